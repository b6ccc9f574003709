/*
 * codegen_channels.h - INTERNAL to codegen/: how one link's messages are
 * dealt over channels, shared by the summary pass (codegen_summary.c), which
 * counts, and the plan builder (codegen_plan.c), which assigns.  Both feed a
 * link's messages in the same canonical order (untimed: step, chunk, send
 * index; timed: start time, send index), so they agree message by message.
 *
 * Also a small open-addressing hash map (uint64 -> long) for the tables
 * keyed by (rank, something) that must not be dense ranks x chunks arrays.
 */
#ifndef CS_CODEGEN_CHANNELS_H
#define CS_CODEGEN_CHANNELS_H

#include <stdint.h>

#include "algorithm.h"

/* ---- hash map -------------------------------------------------------------- */

typedef struct cg_hmap {
    uint64_t *keys; /* stored as key + 1; 0 = empty */
    long *vals;
    size_t cap, n;
} cg_hmap;

long cg_hmap_get(const cg_hmap *m, uint64_t key);       /* -1 when absent */
int cg_hmap_put(cg_hmap *m, uint64_t key, long val);    /* CS_OK or CS_ENOMEM */
void cg_hmap_free(cg_hmap *m);

/* ---- the semantic times of a send ------------------------------------------ */

/* rt: when the sender reads, wt: when the receiver's slot is written.
 * Untimed: 2*step and 2*step + 1; timed: start and (a hair before) end. */
void cg_send_times(const cs_algorithm *a, long i, bool timed, double *rt, double *wt);

/* ---- base channels of one link --------------------------------------------- */

typedef struct cg_lane_state {
    bool timed;
    int lanes;
    bool any;
    int step;          /* last message, for the order check */
    long chunk;
    double start;
    long j;            /* untimed: messages so far in the current step */
    double *ends;      /* timed: when each base channel is free again */
    int nends, capends;
    long *count;       /* messages per base channel */
    int ncount, capcount;
} cg_lane_state;

void cg_lane_init(cg_lane_state *s, bool timed, int lanes);
void cg_lane_free(cg_lane_state *s);
/* True when a message (step, chunk, start) may follow the previous one in
 * canonical order. */
bool cg_lane_in_order(const cg_lane_state *s, int step, long chunk, double start);
/* The next message's base channel and minor key; CS_OK or CS_ENOMEM. */
int cg_lane_next(cg_lane_state *s, int step, long chunk, double rt, double wt, int *base,
                 long *minor);

/* Lanes of the link src -> dst (1 without a topology or such a link). */
int cg_link_lanes(const cs_topology *t, int src, int dst);

#endif
