/*
 * codegen_plan.h - INTERNAL to codegen/: the lowering both code generators
 * share (msccl_xml.c and cuda_gen.c).  Not a public header: callers use
 * msccl_xml.h and cuda_gen.h.
 *
 * An algorithm says which chunk moves where in which step; a runtime needs to
 * know in which buffer slot each value lives, which thread block moves it and
 * what it must wait for.  codegen_plan_build() answers that once:
 *
 *  - Buffers: every rank has an input (i), output (o) and scratch (s) buffer
 *    in units of one algorithm chunk.  A value starts in i (the collective's
 *    precondition, NCCL layout) and must end in o (its "home").  A receive
 *    writes the home slot when the rank needs the chunk at the end, otherwise
 *    a fresh scratch slot (a rank that only forwards).  Final local copies move
 *    values that ended elsewhere (a rank's own allgather chunk, values parked
 *    in scratch) into o.
 *  - In place: for allgather, reducescatter, allreduce, broadcast and reduce
 *    the i slot and the o slot of the same (rank, chunk) can be the same
 *    memory (NCCL's in-place calls).  Hazards are tracked on the aliased slot,
 *    so one document is correct both in place and out of place.
 *  - Hazards per rank and slot: a send waits for the last write of what it
 *    reads (RAW); a receive waits for the last write (WAW, and RAW on the value
 *    it reduces into) and for earlier sends still reading the slot (WAR).  A
 *    receive whose slot is still read by a transfer that has not landed yet
 *    goes to a fresh scratch slot instead, so no dependency ever points to an
 *    operation later in the schedule order.
 *  - Order: each transfer has a send-side and a receive-side local operation
 *    with a key.  Untimed schedules: (step, slot index on the link's channel,
 *    send before receive); timed ones (TACOS): (time, receive before send).
 *    The sends of one link in one step go round-robin over the link's lanes
 *    (channels); timed sends go to the first channel free at their start.
 *    Every dependency points to a smaller key and each channel carries
 *    messages in key order, so executing every thread block in key order
 *    cannot deadlock even with one-message FIFOs (induction on the key).
 *  - Tasks: for the push model (CUDA), a transfer is one task executed by the
 *    sender; tasks are numbered in the order their data lands, and every task
 *    depends only on tasks with smaller numbers.
 */
#ifndef CS_CODEGEN_PLAN_H
#define CS_CODEGEN_PLAN_H

#include "algorithm.h"

typedef struct cg_slot {
    char buf;   /* 'i', 'o', 's'; 0 = none */
    int off;
} cg_slot;

typedef struct cg_key {
    double major;   /* step (untimed) or time (timed); +inf for final copies */
    long minor;     /* slot index on the channel (untimed) */
    int phase;
    long tid;       /* tie break: transfer index */
} cg_key;

enum { CG_SEND = 0, CG_RECV = 1, CG_COPY = 2 };

typedef struct cg_lop {
    int kind;          /* CG_SEND, CG_RECV, CG_COPY */
    int rank;
    int peer;          /* the other rank; -1 for copies */
    int chan;          /* channel; 0 for copies */
    int op;            /* CS_OP_COPY or CS_OP_REDUCE (receives) */
    long xfer;         /* index into the algorithm's sends; -1 for copies */
    cg_key key;
    /* SEND: src = local slot read, dst = the receiver's slot written.
     * RECV: src = the sender's slot, dst = local slot written, red = local slot
     *       combined (op reduce), red.buf 0 otherwise.
     * COPY: src -> dst, both local. */
    cg_slot src, dst, red;
    long dep_begin;    /* into plan->deps: local ops on the same rank */
    int ndeps;
    long task;         /* push-model task executing this op */
} cg_lop;

typedef struct cg_task {
    long lop;          /* SEND lop (transfer) or COPY lop */
    long recv_lop;     /* RECV lop, -1 for copies */
    int exec_rank;     /* the rank that runs it (sender) */
    int flag_rank;     /* the rank whose memory holds its flag (receiver) */
} cg_task;

typedef struct cg_plan {
    cs_coll_kind kind;
    int root;
    int ranks, chunks;
    long global_chunks;
    bool timed;
    bool inplace;          /* one document works in place and out of place */
    int i_chunks, o_chunks; /* per rank, same on every rank */
    int *s_chunks;         /* per rank */
    int nchannels;
    long nlops;
    cg_lop *lops;
    long ndeps;
    long *deps;            /* lop ids */
    long *rank_begin;      /* ranks + 1 */
    long *rank_lops;       /* per rank, lop ids sorted by key */
    long ntasks;
    cg_task *tasks;        /* in landing order */
} cg_plan;

/* t may be NULL: then every link has one lane (one channel per link). */
int codegen_plan_build(const cs_algorithm *a, const cs_topology *t, cg_plan **out,
                       cs_error *err);
/* The same with `spread` channels per lane: each lane's messages are dealt
 * round-robin over spread channels, shortening every thread block's step
 * list about spread-fold (for runtimes with few steps per block). */
int codegen_plan_build_spread(const cs_algorithm *a, const cs_topology *t, int spread,
                              cg_plan **out, cs_error *err);
void codegen_plan_free(cg_plan *p);
int cg_key_cmp(const cg_key *x, const cg_key *y);

/* NCCL buffer layout of a collective in chunk units (used by the generators
 * and, independently re-derived, by the tests). */
int codegen_in_offset(cs_coll_kind kind, int ranks, int chunks, long g, int rank);
int codegen_out_offset(cs_coll_kind kind, int ranks, int chunks, long g, int rank);

/* A growable string for the emitters. */
typedef struct cg_buf {
    char *s;
    size_t len, cap;
    bool failed;
} cg_buf;

void cg_printf(cg_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cg_puts(cg_buf *b, const char *s);

#endif
