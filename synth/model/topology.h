/*
 * topology.h - the network model: ranks, directed links with lanes, shared
 * bandwidth sets, switches and locality groups (CONTRACT.md section 1).
 *
 * A cs_topology is immutable once finalized.  Build one by parsing Topology
 * JSON (topology_from_json / topology_parse), by expanding a builtin name
 * ("ring:8", "dgx1", "torus2d:8x8"; topology_builtin), or programmatically:
 *
 *     cs_topology *t = topology_new("mine", 4);
 *     topology_add_link(t, 0, 1, 1, 50.0, 0.5, true, &err);
 *     ...
 *     if (topology_finalize(t, &err) != CS_OK) ...   // validates, sorts, indexes
 *
 * topology_load() accepts any of: a builtin name, a path to a JSON file, or a
 * JSON document in a string; it is what the CLI and daemon call.
 *
 * After finalize:
 *  - links[] holds every directed link, bidirectional ones expanded, sorted by
 *    (src, dst) with no duplicates, so the out-links of rank r are the index
 *    range [out_begin[r], out_begin[r+1]).  in_links[in_begin[r] .. in_begin[r+1])
 *    lists the indices of links into r.
 *  - Switches are lowered the SCCL way ("hub and spoke"): every ordered pair of
 *    ranks on a switch gets a link (switch_id >= 0, lanes 1, the port's gbps and
 *    alpha) unless a physical link already joins them, plus one egress and one
 *    ingress shared set per attached rank with lanes 1 (switch_id >= 0).  So
 *    every consumer (verifier, simulator, SMT) sees plain links and shared sets.
 *    TACOS lowers switches differently (degree-d unwinding,
 *    topology_unwind_switches) and ignores the derived links.  The JSON printer
 *    prints the switches, not their derived links and sets.
 *
 * Copy-capable switches (switches[].copy, docs/model.md "Copy-capable
 * switches"): such a switch is also a node of its own, the j-th of them
 * (in switches[] order) numbered ranks + j.  An algorithm may send a chunk
 * from a member rank to the switch node (over the rank's egress port) and
 * from the switch node to any member (over that member's ingress port), the
 * switch holding what it received and copying it to as many ports as it
 * likes, each copy using its port once: TE-CCL's switch node, in-network
 * multicast.  The hyper-edge links stay (unicast through a copy-capable
 * switch is still allowed), so every algorithm valid without the flag is
 * valid with it, timed the same.  Consumers that understand switch nodes
 * (verifier, simulator, mcf) work on topology_switch_nodes(): the same
 * topology with the nodes as extra ranks.  Without copy-capable switches
 * nothing of this exists (nswitch_nodes 0).
 *
 * Units: gbps is GB/s per lane (1e9 bytes/s); alpha_us is microseconds.
 * The time to move b bytes over one lane is alpha_us + b / (gbps * 1e3) us.
 *
 * Thread safety: a finalized topology is read-only; share it freely.
 */
#ifndef CS_TOPOLOGY_H
#define CS_TOPOLOGY_H

#include <jansson.h>
#include "cs_common.h"

#define CS_NAME_MAX 128
/* Flag for json_dumps of documents people read: jansson's default of 17
 * significant digits prints 0.7 as 0.69999999999999996.  (Canonical request
 * keys keep the default: they need exactness, not looks.) */
#define CS_JSON_REAL JSON_REAL_PRECISION(15)
/* Default upper bound on ranks when parsing untrusted input (configurable by
 * the caller through topology_parse_options). */
#define CS_TOPOLOGY_DEFAULT_MAX_RANKS 65536

typedef struct cs_link {
    int src, dst;
    int lanes;        /* chunks per round (SCCL's bandwidth relation B) */
    double gbps;      /* GB/s per lane */
    double alpha_us;  /* per-message latency */
    int switch_id;    /* -1: physical link; else the switch it was lowered from */
} cs_link;

typedef struct cs_shared {
    int nlinks;
    int *links;       /* indices into topology.links, sorted */
    int lanes;        /* the set carries at most this many chunks per round */
    int switch_id;    /* -1: from the document; else derived from that switch */
} cs_shared;

typedef struct cs_switch {
    char name[64];
    int nranks;
    int *ranks;
    double gbps;
    double alpha_us;
    /* Copy-capable (in-network multicast, NVLS/SHARP; JSON "copy": true):
     * besides the hyper-edge links, algorithms may send to and from the
     * switch's own node, numbered `node` (see "Copy-capable switches" above).
     * node is -1 for switches that cannot copy. */
    bool copy;
    int node;
} cs_switch;

typedef struct cs_group {
    int nranks;
    int *ranks;
} cs_group;

typedef struct cs_topology {
    char name[CS_NAME_MAX];
    int ranks;
    int nlinks;
    cs_link *links;
    int nshared;
    cs_shared *shared;
    int nswitches;
    cs_switch *switches;
    int ngroups;
    cs_group *groups;
    int *group_of;    /* rank -> index in groups, -1 when in none; NULL if ngroups == 0 */
    /* indexes, valid after topology_finalize */
    int *out_begin;   /* ranks + 1 entries */
    int *in_begin;    /* ranks + 1 entries */
    int *in_links;    /* nlinks entries */
    bool finalized;
    /* Copy-capable switches, numbered ranks .. ranks + nswitch_nodes - 1 as
     * nodes in algorithms (in a node view: the last nswitch_nodes ranks). */
    int nswitch_nodes;
    /* Made by topology_switch_nodes: the switch nodes are ranks here, with
     * links to and from their members inside the members' switch ports. */
    bool node_view;
    /* Hop diameter once known, else -1.  Regular builtins set it from their
     * closed form; topology_diameter() caches what it computes (atomically, so
     * a shared read-only topology stays safe).  Read it through
     * topology_diameter(), never directly. */
    int diameter_cache;
} cs_topology;

typedef struct cs_topology_parse_options {
    int max_ranks;    /* reject documents with more ranks; 0 = CS_TOPOLOGY_DEFAULT_MAX_RANKS */
    size_t max_links; /* 0 = no limit beyond memory */
} cs_topology_parse_options;

/* ---- construction ---------------------------------------------------------- */

cs_topology *topology_new(const char *name, int ranks);
void topology_free(cs_topology *t);
/* Adds src->dst (and dst->src when bidirectional).  Checks ranges here;
 * duplicates are reported by finalize. */
int topology_add_link(cs_topology *t, int src, int dst, int lanes, double gbps,
                      double alpha_us, bool bidirectional, cs_error *err);
/* links: pairs (src, dst) of links that must exist at finalize. */
int topology_add_shared(cs_topology *t, const int (*pairs)[2], int npairs, int lanes,
                        cs_error *err);
int topology_add_switch(cs_topology *t, const char *name, const int *ranks, int nranks,
                        double gbps, double alpha_us, cs_error *err);
int topology_add_group(cs_topology *t, const int *ranks, int nranks, cs_error *err);
/* Marks switch s (index in the order added) copy-capable, or not. */
int topology_set_switch_copy(cs_topology *t, int s, bool copy, cs_error *err);
/* Validates (ranges, self-loops, duplicates, lanes >= 1, gbps > 0, alpha >= 0,
 * connectivity: every rank reaches every other), lowers switches, sorts links
 * and builds the indexes. */
int topology_finalize(cs_topology *t, cs_error *err);
/* Deep copy of a finalized topology. */
int topology_clone(const cs_topology *t, cs_topology **out, cs_error *err);

/* ---- JSON ------------------------------------------------------------------ */

int topology_from_json(const json_t *doc, const cs_topology_parse_options *opt,
                       cs_topology **out, cs_error *err);
int topology_parse(const char *text, size_t len, const cs_topology_parse_options *opt,
                   cs_topology **out, cs_error *err);
/* Builtin name, file path, or JSON text (decided by the first character). */
int topology_load(const char *spec, const cs_topology_parse_options *opt,
                  cs_topology **out, cs_error *err);
/* The document form of CONTRACT.md: switches as switches, derived links omitted. */
json_t *topology_to_json(const cs_topology *t);

/* ---- builtins ---------------------------------------------------------------- */

typedef struct cs_builtin_info {
    const char *family;      /* "ring" */
    const char *syntax;      /* "ring:N" */
    const char *example;     /* "ring:8" */
    const char *description; /* one line */
} cs_builtin_info;

/* "ring:8", "torus2d:4x4", "dgx1", ...; unknown names and bad parameters are
 * CS_EINVAL with a message listing what is accepted. */
int topology_builtin(const char *spec, cs_topology **out, cs_error *err);
/* The table of builtin families (static storage). */
const cs_builtin_info *topology_builtin_list(int *count);

/* ---- queries ------------------------------------------------------------------ */

/* Index into links of src->dst, or -1. O(log degree). */
int topology_find_link(const cs_topology *t, int src, int dst);
/* BFS hop distances from src into dist[ranks] (-1 unreachable). */
int topology_shortest_hops(const cs_topology *t, int src, int *dist, cs_error *err);
/* Maximum over pairs of the hop distance.  O(ranks * (physical links +
 * switch ports)): switches are walked as one hop (topology_hops_new). */
int topology_diameter(const cs_topology *t, int *diameter, cs_error *err);
/* Hop distances for many sources on a topology with switches, without
 * walking the derived links: every ordered pair of a switch's members is
 * one hop apart (a derived link, or the link that replaced it), so the
 * first member a BFS reaches gives the others its distance + 1.  The same
 * distances as a BFS over every link at O(ranks + physical links + switch
 * ports) per source instead of O(ranks + links): a 512-port switch is
 * 261,632 derived links.  NULL when the topology has no switches, is a node
 * view (switch nodes as ranks), or memory runs out: walk the links then. */
typedef struct cs_hops cs_hops;
cs_hops *topology_hops_new(const cs_topology *t);
void topology_hops_free(cs_hops *h);
/* BFS from src over out-links (backward: into src over in-links, dist[r] =
 * hops from r to src); dist[ranks] gets -1 where unreachable.  Returns the
 * largest distance found. */
int topology_hops_from(cs_hops *h, int src, bool backward, int *dist);
/* Shortest path src->dst as link indices (BFS, ties broken by lowest link
 * index so results are deterministic).  *path has room for ranks entries;
 * returns the hop count in *nhops. */
int topology_shortest_path(const cs_topology *t, int src, int dst, int *path, int *nhops,
                           cs_error *err);
/* Chunks per round a rank can send / receive: sum of lanes, capped by any
 * shared set that covers all of the rank's out (in) links. */
int topology_egress_lanes(const cs_topology *t, int rank);
int topology_ingress_lanes(const cs_topology *t, int rank);
/* Bytes per microsecond a rank can send / receive: the sum over lanes of
 * gbps*1e3, where a shared set counts its lanes at the fastest of its links. */
double topology_egress_bw(const cs_topology *t, int rank);
double topology_ingress_bw(const cs_topology *t, int rank);
/* The reversed topology (every link src->dst becomes dst->src; shared sets and
 * switches follow).  Used to synthesize combining collectives by inversion. */
int topology_reverse(const cs_topology *t, cs_topology **out, cs_error *err);
/* The switch whose node is `node` (ranks <= node < ranks + nswitch_nodes;
 * in a node view the last nswitch_nodes ranks), or -1. */
int topology_switch_of_node(const cs_topology *t, int node);
/* The node view: t with every copy-capable switch's node as an extra rank
 * (ranks + j for the j-th), joined to each member a by links a->node and
 * node->a (1 lane, the switch's gbps and alpha, switch_id of the switch)
 * that belong to a's egress and ingress port sets with its hyper-edge links
 * (so a port carries one chunk at a time, whichever way it goes).  The
 * nodes are in no group.  CS_EINVAL when t has no copy-capable switch. */
int topology_switch_nodes(const cs_topology *t, cs_topology **out, cs_error *err);
/* t with every switch copy-capable (copy = true) or none (false), named
 * `name` (NULL: t's name); physical links, sets and groups as in t. */
int topology_with_switch_copy(const cs_topology *t, bool copy, const char *name,
                              cs_topology **out, cs_error *err);
/* TACOS' switch lowering: a topology without switches where the i-th rank of each
 * switch links to the (i+1..i+degree mod n)-th with gbps / degree each.
 * degree < 1 or >= n is CS_EINVAL. */
int topology_unwind_switches(const cs_topology *t, int degree, cs_topology **out,
                             cs_error *err);

#endif
