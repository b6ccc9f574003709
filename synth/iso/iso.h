/*
 * iso.h - isomorphism-aware keys for synthesis requests: two requests that
 * differ only in how their ranks are numbered (another node order, other
 * rank labels, a relabelled custom topology) get the same iso key, and a
 * schedule synthesized for one is relabelled to the other's numbering.
 *
 *     cs_iso_form a, b;
 *     iso_canonicalize(req_a, NULL, &a, &err);    // a.key, a.canon_of[rank]
 *     iso_canonicalize(req_b, NULL, &b, &err);
 *     if (!strcmp(a.key, b.key)) {
 *         int *map = malloc(...);                  // a's rank -> b's rank
 *         iso_compose(&a, &b, map, &err);
 *         iso_relabel_result(res_a, map, &req_b->collective, req_b->topology->name,
 *                            &res_b, &err);        // then algorithm_verify on b
 *     }
 *
 * What the key covers: the topology without its name or any rank numbering
 * (links with lanes, gbps and alpha; shared sets; switches with their port
 * gbps and alpha; groups), the collective (the root and custom pre/post
 * conditions mapped through the labelling), the method, and every option of
 * the canonical request (synthesize.h), i.e. everything that changes the
 * result except the numbering.  Switch names and the order of ranks inside a
 * switch are not covered: a switch port is one resource whatever its name,
 * so schedules are valid and equally fast under any of them (TACOS unwinds
 * switches in rank order, so a relabelled TACOS schedule may differ from the
 * one a new synthesis would give; it is one of the same quality class, and
 * it passes the same verifier).
 *
 * How: a vertex-coloured graph goes to bliss (libbliss, Junttila and Kaski),
 * which returns a canonical labelling.  bliss has no edge colours, so every
 * link becomes a subdivision vertex whose colour is its (lanes, gbps, alpha)
 * class (a pair of vertices, tail and head, when the link is one-way or in a
 * shared set); switches, shared sets and groups are vertices of their own
 * colour joined to their members; ranks are coloured by their part in the
 * collective (the root; custom pre/postconditions).
 *
 * Big clusters are canonicalized in two levels (scheme "two-level"), because
 * bliss's search grows with the automorphism group, and clusters of
 * identical nodes have huge ones: first each node (group) on its own, its
 * ranks coloured by their label-free attachment to the fabric, which gives
 * node types and the orbits of their ranks; then the node-level quotient
 * (one vertex per node coloured by its type, the fabric's switches and
 * links, ports coloured by type and orbit); then, node by node in canonical
 * order, the ranks inside each node, coloured by the canonical fabric
 * elements they attach to.  Small or ungrouped topologies go to bliss whole
 * (scheme "direct").
 *
 * Soundness does not rest on either scheme being a perfect canonical form:
 * the key is the SHA-256 of the whole request rewritten in canonical rank
 * numbers, so equal keys always mean the two requests are identical after
 * relabelling, i.e. isomorphic, and the composed labelling is an
 * isomorphism.  A scheme that picked a non-canonical labelling would only
 * cost a cache miss.  Canonical labellings may change with the bliss
 * version, so the key names it (ISO_KEY_VERSION).
 *
 * Thread safety: no shared state; every call owns its bliss graphs.
 */
#ifndef CS_ISO_H
#define CS_ISO_H

#include "algorithm.h"
#include "synthesize.h"

/* Part of every key's text: bump when the canonical form or the labelling
 * (bliss version, encoding) changes, so old index rows stop matching. */
#define ISO_KEY_VERSION "iso3-bliss0.73"

typedef struct cs_iso_options {
    /* Grouped topologies with at least this many ranks use the two-level
     * scheme: 0 = the default (ISO_TWO_LEVEL_MIN_RANKS), < 0 never. */
    int two_level_min_ranks;
    /* Requests with more ranks are refused (CS_ELIMIT): 0 = default 65536. */
    int max_ranks;
    /* ... or more physical links (the graph bliss gets grows with them):
     * 0 = default 1,000,000. */
    long max_links;
} cs_iso_options;

#define ISO_TWO_LEVEL_MIN_RANKS 64

typedef struct cs_iso_form {
    char key[65];          /* hex SHA-256 of the request in canonical rank numbers */
    int ranks;
    int *canon_of;         /* owned: rank -> canonical rank (a permutation) */
    char scheme[16];       /* "direct" or "two-level" */
    double seconds;        /* time spent, for metrics and benchmarks */
} cs_iso_form;

/* The canonical labelling and iso key of a parsed request.  opt may be NULL.
 * CS_ELIMIT above opt->max_ranks; CS_ENOMEM. */
int iso_canonicalize(const cs_synth_request *r, const cs_iso_options *opt, cs_iso_form *out,
                     cs_error *err);
void iso_form_clear(cs_iso_form *f);

/* The canonical labelling of a topology alone (every rank alike: no
 * collective), canon_of with t->ranks entries; scheme (may be NULL) gets
 * "direct" or "two-level".  In the two-level scheme canonical numbers are
 * node by node, and nodes of one type attached to the fabric alike get
 * their ranks in the same local order: renumbering a cluster by it makes
 * isomorphic nodes identical in their local numbering (what a method that
 * recognizes node types by their links, like "hierarchical", needs). */
int iso_topology_labelling(const cs_topology *t, const cs_iso_options *opt, int *canon_of,
                           char scheme[16], cs_error *err);

/* The canonical text the key hashes (for tests and debugging); caller frees.
 * canon_of as in cs_iso_form. */
char *iso_canonical_text(const cs_synth_request *r, const int *canon_of);

/* map[r] = the rank of `to`'s numbering that plays the part of rank r of
 * `from`'s numbering (from and to must share the key).  map has from->ranks
 * entries.  CS_EINVAL when the keys or rank counts differ. */
int iso_compose(const cs_iso_form *from, const cs_iso_form *to, int *map, cs_error *err);

/* Rank permutations stored as text ("3,0,1,2"): the index keeps the
 * labelling of every stored result. */
char *iso_labelling_to_text(const int *canon_of, int ranks);
/* Parses and checks that it is a permutation of 0..ranks-1 (CS_EINVAL). */
int iso_labelling_from_text(const char *text, int ranks, int **out, cs_error *err);

/* The global chunk that plays the part of chunk g after ranks are renamed by
 * map (P ranks, the collective's kind): allgather, gather, scatter and
 * reducescatter chunks follow their owner rank (g%P), alltoall chunks their
 * source and destination, the others keep their number. */
long iso_map_chunk(cs_coll_kind kind, int ranks, const int *map, long g);

/* a with every rank r renamed map[r] (src, dst, chunk owners), for the
 * collective `target` (a's collective with its root mapped: the caller's)
 * on the topology named topology_name.  Steps, rounds, ops and times stay. */
int iso_relabel_algorithm(const cs_algorithm *a, const int *map, const cs_collective *target,
                          const char *topology_name, cs_algorithm **out, cs_error *err);
/* t with every rank r renamed map[r] (links, shared sets, switches,
 * groups), named `name` (NULL: t's name).  Lists keep their order, so the
 * result is "the same cluster numbered differently": what tests and
 * benchmarks feed the cache. */
int iso_relabel_topology(const cs_topology *t, const int *map, const char *name,
                         cs_topology **out, cs_error *err);
/* Every algorithm of res relabelled; method, reason, bounds and stats kept. */
int iso_relabel_result(const cs_result *res, const int *map, const cs_collective *target,
                       const char *topology_name, cs_result **out, cs_error *err);

#endif
