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

/* What a lane needs to tell whether a message continues the previous one's
 * run: the collective's buffer layout (contiguous slots) and the most chunks
 * one step may move (0: no limit). */
typedef struct cg_run_rule {
    cs_coll_kind kind;
    int ranks, chunks;
    int max_cnt;
} cg_run_rule;

/* Units: a base channel's messages are dealt over channels in units, not one
 * by one, so that what could move as one step stays on one thread block.  A
 * unit is a run of consecutive messages of the base channel whose chunks are
 * neighbours in the collective's input or output layout (the slots a sender
 * reads and a receiver writes, unless values were parked in scratch), at
 * most max_cnt long; a "step" unit also keeps to one step (one start time
 * for timed schedules), an "any" unit may span steps (merging across steps).
 * A unit is an estimate of what the emitter merges, which checks the real
 * slots and dependencies: both ends deal by the same rule, so they agree. */
enum { CG_UNIT_STEP = 0, CG_UNIT_ANY = 1 };

typedef struct cg_lane_state {
    bool timed;
    int lanes;
    cg_run_rule rule;
    bool any;
    int step;          /* last message, for the order check */
    long chunk;
    double start;
    long j;            /* untimed: messages so far in the current step */
    long runs;         /* untimed: runs started so far (round-robin over lanes) */
    int lane;          /* untimed: the base channel of the last message */
    double *ends;      /* timed: when each base channel is free again */
    int nends, capends;
    long *count;       /* messages per base channel */
    long *units[2];    /* units per base channel: CG_UNIT_STEP, CG_UNIT_ANY */
    long *last_chunk;  /* per base channel: its last message */
    double *last_key;  /* step or start time */
    int *run_len[2];   /* length of the current unit */
    int ncount, capcount;
} cg_lane_state;

/* rule may be NULL: every message is its own unit. */
void cg_lane_init(cg_lane_state *s, bool timed, int lanes, const cg_run_rule *rule);
void cg_lane_free(cg_lane_state *s);
/* True when a message (step, chunk, start) may follow the previous one in
 * canonical order. */
bool cg_lane_in_order(const cg_lane_state *s, int step, long chunk, double start);
/* The next message's base channel and minor key, and in *newunit which units
 * it starts (bit CG_UNIT_STEP, bit CG_UNIT_ANY); CS_OK or CS_ENOMEM. */
int cg_lane_next(cg_lane_state *s, int step, long chunk, double rt, double wt, int *base,
                 long *minor, int *newunit);

/* Lanes of the link src -> dst (1 without a topology or such a link). */
int cg_link_lanes(const cs_topology *t, int src, int dst);

#endif
