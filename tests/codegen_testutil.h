/*
 * codegen_testutil.h - algorithms the code generator tests lower: every
 * builtin collective on the DGX-1 from the SMT search (its frontier), from
 * TACOS, and from one baseline, plus small hand-built schedules.
 */
#ifndef CS_CODEGEN_TESTUTIL_H
#define CS_CODEGEN_TESTUTIL_H

#include "algorithm.h"
#include "msccl_xml.h"

enum { CGT_BASELINE = 1, CGT_SMT = 2, CGT_TACOS = 4 };

typedef struct cgt_alg {
    char label[128];
    cs_algorithm *alg;
    const cs_topology *topo;   /* borrowed from the set */
    cs_collective coll;        /* validated copy, for interpreter checks */
} cgt_alg;

typedef struct cgt_set {
    cs_topology *dgx1;
    int n, cap;
    cgt_alg *algs;
} cgt_set;

/* Builds the set for the sources in `which` (CGT_* bits) over the builtin
 * collective kinds; kinds_mask selects kinds (bit = cs_coll_kind), 0 = all.
 * On failure err says which synthesis failed. */
int cgt_build(cgt_set *set, unsigned which, unsigned kinds_mask, cs_error *err);
void cgt_free(cgt_set *set);

/* A finalized topology of n ranks; every ordered pair linked with `lanes`
 * lanes when full, else a bidirectional chain 0-1-...-(n-1). */
cs_topology *cgt_topology(int n, int lanes, bool full);

/* The document generated as slices of `width` ranks (the last may be
 * shorter), reassembled: every slice must carry the same <algo> header,
 * exactly its ranks' <gpu> elements in order, and "</algo>".  *out gets the
 * reassembled document (malloc'd); CS_EVERIFY names a slice that is not
 * right, other codes are the generator's. */
int cgt_reassemble_slices(const cs_algorithm *a, const cs_topology *t, const cs_msccl_options *o,
                          int width, char **out, size_t *len, cs_error *err);

#endif
