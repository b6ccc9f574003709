/*
 * baseline.h - hand-designed collective algorithms as Algorithm JSON on any
 * topology: what NCCL/MPI ship, to compare synthesized algorithms against.
 *
 * Each baseline is defined on logical ranks; a logical send between ranks that
 * share no link is routed over a shortest path (topology_shortest_path) as
 * consecutive hop sends, so on a foreign topology the schedule shows its real
 * congestion.  Rounds per step come from algorithm_fit_rounds, so every
 * baseline passes algorithm_verify on every topology.
 *
 * Names (baseline_list): ring, rings (several edge-disjoint rings where the
 * topology has them), direct, recursive-doubling, recursive-halving,
 * binomial-tree, double-binary-tree, bine-tree, bine-butterfly.  Not every
 * baseline exists for every collective: baseline_supports() says which, and
 * baseline_generate() answers CS_EUNSUPPORTED with a message otherwise.
 */
#ifndef CS_BASELINE_H
#define CS_BASELINE_H

#include "algorithm.h"

typedef struct cs_baseline_info {
    const char *name;
    const char *description;
} cs_baseline_info;

typedef struct cs_baseline_options {
    int chunks;         /* chunks per rank share; 0 = the baseline's natural count */
} cs_baseline_options;

const cs_baseline_info *baseline_list(int *count);
bool baseline_exists(const char *name);
bool baseline_supports(const char *name, cs_coll_kind kind);
/* opt may be NULL. The result has method = name and passes algorithm_verify. */
int baseline_generate(const char *name, const cs_topology *t, const cs_collective *c,
                      const cs_baseline_options *opt, cs_algorithm **out, cs_error *err);

/* Bine building blocks (exported for tests against the reference vectors). */
unsigned bine_negabinary(unsigned r, unsigned p);
unsigned bine_negabinary_inverse(unsigned x, unsigned p);
/* Peer of rank r at step k of the distance-doubling butterfly on p = 2^s ranks. */
int bine_butterfly_peer(int r, int k, int p);
/* Block position of rank r in the reduce-scatter butterfly. */
int bine_block_position(int r, int p);

#endif
