/*
 * bounds_internal.h - private interface of the bounds code (bounds.c, the
 * round bounds of collective.h; bounds_time.c, the time bound of bounds.h):
 * the max-flow both of them run their cuts on (bounds_flow.c), and the
 * bandwidth network of the time bound with its cut searches
 * (bounds_cutnet.c).
 *
 * A flow_net is a directed graph with int64 capacities in adjacency lists;
 * edge e and e ^ 1 are a pair (forward, residual).  `base` holds the
 * capacities as built and `cap` the residual ones: callers set cap from base
 * (scaled as they need) before every flow_net_maxflow, which then leaves the
 * residual graph behind, so flow_net_sink_side tells the side of every node
 * in a minimum cut.  Exact integer arithmetic: no rounding ever decides a cut.
 */
#ifndef CS_BOUNDS_INTERNAL_H
#define CS_BOUNDS_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "cs_common.h"
#include "topology.h"

/* "Infinite" capacity: large, yet sums of a few of them cannot overflow. */
#define FLOW_INF (INT64_MAX / 4)

typedef struct flow_net {
    int n, m, cap_m;
    int *head, *next, *to;   /* adjacency lists; edge e and e^1 are a pair */
    int64_t *cap, *base;     /* residual capacity, capacity as built */
    int *level, *iter, *queue;
    int64_t *excess;         /* push-relabel */
    int *count;              /* nodes per height, 0..n */
    unsigned char *queued;
    int *active;             /* FIFO of active nodes (queue is the BFS's) */
} flow_net;

/* CS_OK or CS_ENOMEM; room for max_edges edges (each adds a residual twin). */
int flow_net_init(flow_net *g, int n, int max_edges);
void flow_net_free(flow_net *g);
/* Adds u->v with capacity cap (base); returns its index (the twin is index ^ 1). */
int flow_net_edge(flow_net *g, int u, int v, int64_t cap);
/* The value of a maximum s-t flow over the residual capacities in cap[]
 * (push-relabel, first phase: it settles the minimum cut, which is all the
 * bounds need).  Afterwards flow_net_sink_side() tells each node's side. */
int64_t flow_net_maxflow(flow_net *g, int s, int t);
/* After flow_net_maxflow: v can still reach t, i.e. is on the sink side of a
 * minimum cut. */
static inline bool flow_net_sink_side(const flow_net *g, int v)
{
    return g->level[v] < g->n;
}

/* ---- the time bound's network (bounds_cutnet.c) ----------------------------------
 *
 * Vertices are the ranks, or the parts of a partition (the topology's groups:
 * each part contracted to one vertex, so only cuts that keep a part whole are
 * seen).  Besides them: a node per switch with an edge of the port's
 * bandwidth from and to each attached vertex (ports of one part add up), and
 * an in/out node pair per document shared set joined by the set's lanes at
 * its fastest link; a physical link is a chain src -> sets -> dst of edges of
 * lanes x gbps.  Links and switches inside one part are dropped.  Switch-
 * derived links and sets are not used: the switch node stands for them.
 * `reversed` builds the reversed network (cuts into S become cuts out of S).
 *
 * Capacities are bytes per us (bw[]) and, for the max-flow, integers
 * ceil(bw * scale): rounding up only overstates capacities, so every bound
 * stays valid; scale is 1e3 unless the products of the search would overflow.
 * Cut values reported to callers are recomputed in bytes/us from the cut's
 * edges. */

typedef struct cut_network {
    flow_net g;
    const cs_topology *topo;
    int nv;                   /* vertices 0..nv-1 */
    int *part_of;             /* rank -> vertex (owned) */
    int64_t *weight;          /* ranks per vertex */
    int64_t total_weight;     /* the topology's ranks */
    bool reversed;
    int s, t;
    int *src_edge, *sink_edge;
    int own_edges;            /* edges [0, own_edges) model the topology */
    double *bw;               /* bytes per us of own edge e */
    double *in_bw, *out_bw;   /* per vertex: sum over its own in- (out-) edges */
    double scale;             /* integer units per byte/us */
    int *physical;            /* indices of the topology's physical links */
    int nphysical;
} cut_network;

/* part_of NULL: a vertex per rank; else rank -> part in [0, nparts). */
int cutnet_build(const cs_topology *t, const int *part_of, int nparts, bool reversed,
                 cut_network *n, cs_error *err);
void cutnet_free(cut_network *n);
/* Nodes plus edges: what one max-flow costs, roughly. */
long cutnet_size(const cut_network *n);

/* A cut: the vertex set S on the sink side, how many L must cross into it
 * (k), and the bytes/us of its edges (an upper bound on cap(S)). */
typedef struct cut_found {
    unsigned char *in_s;      /* nv entries, owned; NULL when nothing was found */
    int64_t k;
    double cap_bw;
} cut_found;

void cut_found_free(cut_found *c);

/* max over S (not empty, not all) of (W - w(S)) / cap_in(S): the allgather
 * family.  Every vertex is tried as the one forced into S while nv max-flows
 * fit `budget` (nodes+edges visits per max-flow); then *exact is set.  Above
 * it, only the single-vertex cuts (all edges into one vertex) are tried. */
int cutnet_max_outside_ratio(cut_network *n, long budget, cut_found *best, bool *exact,
                             cs_error *err);
/* max over S not holding vertex `pinned` of w(S) / cap_in(S): the scatter
 * family.  One max-flow per Dinkelbach step; exact unless the budget ends it. */
int cutnet_max_inside_ratio(cut_network *n, int pinned, long budget, cut_found *best,
                            bool *exact, cs_error *err);
/* min over S not holding `pinned` (not empty) of cap_in(S), as a cut with
 * k = 1: the broadcast family.  Exact while nv max-flows fit the budget;
 * above it, the single-vertex cuts only. */
int cutnet_min_cut_avoiding(cut_network *n, int pinned, long budget, cut_found *best,
                            bool *exact, cs_error *err);
/* The minimum cut into a set S that holds vertex w and no vertex v with
 * vdist[v] < vdist[w] (those are forced to the source side; the rest are
 * free): S into in_s (nv entries), its capacity in bytes/us into cap_bw.  One
 * max-flow.  The additive rooted bound (bounds_time.c) runs it per w. */
int cutnet_min_cut_beyond(cut_network *n, const double *vdist, int w, unsigned char *in_s,
                          double *cap_bw);
/* cap_in(S) for a given vertex set (an exact min cut), in bytes/us. */
int cutnet_capacity_into(cut_network *n, const unsigned char *in_s, double *cap_bw,
                         cs_error *err);
/* The smallest alpha of a topology link crossing the cut: into S (or out of
 * S on a reversed network), S given per vertex.  INFINITY when none does. */
double cutnet_crossing_alpha(const cut_network *n, const unsigned char *in_s);
/* The same for every link between two different vertices (a partition). */
double cutnet_partition_alpha(const cut_network *n);

#endif
