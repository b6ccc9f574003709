/*
 * codegen_plan.h - INTERNAL to codegen/: the lowering both code generators
 * share (msccl_xml.c and cuda_gen.c).  Not a public header: callers use
 * msccl_xml.h and cuda_gen.h.
 *
 * An algorithm says which chunk moves where in which step; a runtime needs to
 * know in which buffer slot each value lives, which thread block moves it and
 * what it must wait for.  The lowering answers that in two parts:
 *
 *  - A summary (codegen_summary_build): one pass over the sends that needs
 *    O(ranks + links) memory when the sends come in their canonical order
 *    (step then chunk, or start time: what every synthesizer produces), and
 *    a 4-byte index per send otherwise.  It finds every link, deals each
 *    link's messages over channels, and decides the things that must be the
 *    same for every rank: channels per lane (`spread`), whether contiguous
 *    chunks may merge across steps, nchannels.  It checks every rank against
 *    the limits that follow from per-link counts (thread blocks, channels,
 *    blocks per channel), so a limit is refused the same way whichever ranks
 *    are generated.
 *  - A plan (codegen_plan_build_core) for a set of "core" ranks, built from
 *    the sends incident to them only.  Everything a rank's operations depend
 *    on (its slots, hazards, order) is a function of the sends incident to
 *    it, so a rank's plan is the same whether built alone or with every
 *    other rank: slices of a document are byte-identical to its parts.  A
 *    transfer whose other end is not core has that side missing (slot
 *    buf 0); emitting a rank needs its peers core.
 *
 * The lowering itself:
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
 *    with a key.  Untimed schedules (SMT, the baselines, the hierarchical
 *    compositions, whose steps are numbered per chunk but are steps):
 *    (step, sender rank, message index in the step on the link, send before
 *    receive); timed ones (TACOS, MCF, a frontier's flat TACOS entry, iso
 *    relabellings of them): (time, receive before send), a send at its
 *    start, a receive at its landing.  The sends of one link in one step go
 *    to the link's lanes (base channels) in runs of neighbouring chunks;
 *    timed sends go to the first base channel whose last message has landed
 *    by their start.  With spread > 1 each base channel's messages are dealt
 *    over spread channels (round-robin; in contiguous blocks when merging
 *    across steps is on, which keeps neighbouring chunks together): a
 *    subsequence keeps every order property below.  Each thread block runs
 *    its operations in key order.
 *  - What the runtimes do (shared/reference/msccl-xml.md, the NCCL fork's
 *    interpreter): a thread block runs its steps one after the other; a step
 *    first waits for the flag it depends on; a step of cnt chunks moves them
 *    through the connection (sender, receiver, channel) a chunk at a time
 *    (per loop iteration a chunk is MSCCL_CHUNKSTEPS = 4 of the connection's
 *    NCCL_STEPS = 8 slots, so a connection holds two chunks); a send blocks
 *    while the connection is full, a receive while it is empty.  So a step
 *    of one chunk is "eager" (it completes into an empty connection whatever
 *    the other end does), and a merged step is a rendezvous (it completes
 *    only while the other end runs the matching step).  The arguments below
 *    hold with connections of one chunk, so for the runtimes' two; the tests
 *    run every document that way (msccl_interp.h, which also reports a
 *    deadlock's cycle of waits).  Both need every dependency to point to a
 *    smaller key (and untimed, a smaller transfer key), which the plan
 *    builder checks (order_ranks), and the messages of one connection to be
 *    received in the order they are sent, untimed with the same transfer key
 *    at both ends, timed with each message's receive before the next
 *    message's send (the channel-free rule gives it).  The emitter checks
 *    that and the steps as laid out, merged ones included (msccl_xml.c
 *    check_order): each block's steps at increasing keys, every wait on a
 *    step at a smaller key.  (CUDA tasks need only the first: a task is run
 *    by its sender after the tasks it depends on, with no FIFO.)
 *  - Timed order (TACOS, MCF).  Keys are not transfer keys: a transfer's send
 *    (at its start) and receive (at its landing) sit at different places,
 *    and a block holding both directions of a channel runs "send x, receive
 *    y" on one end and "send y, receive x" on the other when x and y overlap
 *    in time.  That is what a full-duplex schedule wants (both ends send at
 *    once), and it cannot deadlock while steps move one chunk: execute all
 *    operations of all ranks in key order; when a send is reached its
 *    block's earlier operations and its dependencies are done (smaller
 *    keys), and the previous message of its connection has been received
 *    (its receive key is smaller), so the send completes into the empty
 *    connection; when a receive is reached its message was sent (the send's
 *    key, its start, is smaller) and is at the head of the connection.
 *    Merged steps are rendezvous and need more: two merged sends crossing in
 *    one block pair ("send run X, receive run Y" against "send run Y, receive
 *    run X") deadlock whenever the runs are longer than the connection
 *    (tests/test_codegen_order.c builds that program).  So a merged run of
 *    transfers x1..xk (k >= 2, consecutive messages of one connection,
 *    consecutive in both blocks) is placed at v = just before x1's receive
 *    key, on both ends, and the emitter merges a message only when each
 *    dependency of each member (other than the run's own) runs before v at
 *    the latest key it may run at (msccl_xml.c deps_before, land_key: a
 *    send in a run runs before its transfer lands; a receive, merged or
 *    not, at or before its key).  Then the same key-order execution, with v
 *    for the run's steps, still works: on the sending end the operations
 *    before the run have keys below x1's start and those after it keys
 *    above xk's start, which is at or after x1's landing (the members follow
 *    one another on the channel); on the receiving end those before have
 *    keys below x1's landing (a merged send among them runs before its own
 *    run's first landing, which is before its last member's start, which is
 *    before that operation); dependents of a member wait for its transfer
 *    to land, which is after v; every earlier message of the connection was
 *    received before x1's start.  So when v is reached both ends are at the
 *    run with an empty connection and stream it chunk by chunk.  Without
 *    merged transfers (the usual case: a channel used both ways alternates
 *    directions message by message, so nothing is consecutive) documents
 *    are as before.
 *  - Eager exchanges (untimed).  In transfer-key order the two ends of a
 *    channel run a step's exchange "send x, receive y" and "receive x, send
 *    y": the second end receives before it sends, so an exchange that the
 *    schedule meant to be full duplex takes two transfer times on the
 *    runtimes.  So where, in one step on one channel between two ranks,
 *    each way carries exactly one message, the two are eager: each send's
 *    key is (step, -1, ...), before everything of its step, and both ends
 *    send first (mark_eager; a minor bit marks them, so the keys read no
 *    extra array).  Such a send reads what earlier steps wrote, never
 *    merges, and its connection's previous message is from an earlier
 *    step.  The argument still holds: run a step's eager sends first (each
 *    finds its connection empty and its dependencies done), then the rest
 *    of the step in transfer-key order, an eager receive at its own key
 *    (its message is in the connection).  Where a step moves several
 *    messages each way on a channel the transfer order stays: eager sends
 *    of several messages would need room for all of them.
 *  - Untimed order, merged steps and why the sender is in the key: the emitter
 *    merges a run of messages that are consecutive in both ends' thread
 *    blocks into one step of cnt chunks, and such a step streams through the
 *    FIFO: it finishes only while the other end runs the matching step.  The
 *    argument for merged steps is an induction on transfers, not on local
 *    operations.  Untimed, a transfer's key is (step, sender, index, send
 *    index); both its local operations carry it (they differ in the phase
 *    only).
 *    (a) A thread block is one (peer, channel) and holds both directions of
 *    that channel; its operations have distinct (step, sender, index), so
 *    the two blocks of a channel between two ranks run its transfers in the
 *    same order: transfer-key order (a step's messages from the smaller
 *    rank, then those from the larger one).  With the index before the
 *    sender the two blocks would alternate "send 0, receive 0, send 1, ..."
 *    in opposite roles, one direction's messages of a step would never be
 *    consecutive, and no run on a link used both ways could merge (the
 *    hook's 128-node DGX-1 allgather needed 65 steps where 64 are allowed).
 *    (b) Every dependency points to a smaller transfer key: a send waits for
 *    the receive that wrote its slot in an earlier step; a receive waits for
 *    operations whose transfers landed before it in the lowering's event
 *    order, which within a step is the transfer-key order (the plan builder
 *    checks it).  A merged step runs where its first member (the leader)
 *    was; the emitter merges a member only when each of its dependencies is
 *    in the same run or has a smaller transfer key than the run's leader,
 *    and the dependency's own step runs at or before its own key
 *    (msccl_xml.c deps_before).  Same-step reduce runs from several peers
 *    into the same chunks still merge: a rank receives one sender's
 *    messages of a step before the next sender's, so each run waits only on
 *    whole runs that come before it.
 *    (c) Each direction of a channel carries its runs in key order, so when
 *    a run starts every earlier run on that FIFO has been received.
 *    Induction on the leader's transfer key: the unfinished run with the
 *    smallest one has every earlier operation of both its blocks finished
 *    (a), every dependency of both ends finished (b), an empty FIFO (c), so
 *    both ends run it to completion, one chunk at a time if need be.
 *  - Tasks (full plans only): for the push model (CUDA), a transfer is one
 *    task executed by the sender; tasks are numbered in the order their data
 *    lands, and every task depends only on tasks with smaller numbers.
 */
#ifndef CS_CODEGEN_PLAN_H
#define CS_CODEGEN_PLAN_H

#include "algorithm.h"
#include "codegen_channels.h"

/* ---- runtime limits (NULL where a target has none, e.g. CUDA) ------------ */

typedef struct cg_limits {
    const char *owner;      /* "the msccl runtime", ... for messages */
    int max_tb;             /* thread blocks per rank (ids 0..max_tb-1) */
    int max_steps;          /* steps per thread block (s 0..max_steps-1) */
    int max_channels;       /* channel ids 0..max_channels-1 */
    int max_tb_per_channel; /* sending and receiving blocks per channel; 0: none */
    int max_elements;       /* XML elements one rank parses must be fewer; 0: none */
    int max_cnt;            /* chunks one step moves */
    int min_spread;         /* start the spread search here (0 or 1: from 1) */
} cg_limits;

/* The hint every CS_ELIMIT message ends with. */
#define CG_HIERARCHICAL_HINT \
    "; a hierarchical schedule (method \"hierarchical\") keeps per-rank lists short"

/* ---- summary --------------------------------------------------------------- */

typedef struct cg_link {
    int src, dst, lanes;
    long n;          /* messages */
    int nbase;       /* base channels used */
    long base_off;   /* messages per base channel: summary->base_count[base_off + c] */
    int group;       /* channel group (peer groups, below); the same both ways */
} cg_link;

typedef struct cg_summary {
    cs_coll_kind kind;
    int ranks, chunks;
    long global_chunks;
    long nsends;
    bool timed;
    int nlinks;
    cg_link *links;
    long *base_count;       /* messages per base channel */
    long *base_units[2];    /* units per base channel (CG_UNIT_STEP, CG_UNIT_ANY) */
    cg_run_rule rule;       /* how units were cut */
    long *rank_link_begin;  /* ranks + 1: links out of or into each rank */
    int *rank_links;
    long *incident;         /* per rank: sends + receives */
    int spread;             /* channels per base channel */
    /* Peer groups: a rank with more peers than a channel holds sending (or
     * receiving) thread blocks (32 in the NCCL fork) has its peers dealt
     * into groups, each with its own channels: a message on base channel c,
     * spread index k, of a link in group g goes on channel
     * g * maxbase * spread + c * spread + k.  One group (all 0) otherwise,
     * so documents that fit without groups are unchanged. */
    int fullest_rank;       /* the rank whose block the estimate says is fullest */
    int maxbase;            /* the most base channels of a link */
    int ngroups;
    bool merge_steps;       /* merge contiguous chunks across steps */
    bool block_deal;        /* deal in contiguous blocks (else round-robin) */
    int nchannels;
    bool ordered;           /* the sends came in canonical order (no index built) */
    cg_hmap link_map;       /* (src, dst) -> link */
} cg_summary;

/* lim may be NULL (no runtime limits: spread 1).  Validates every send's
 * ranks and chunk; CS_ELIMIT names the rank, the limit and the value. */
int codegen_summary_build(const cs_algorithm *a, const cs_topology *t, const cg_limits *lim,
                          cg_summary **out, cs_error *err);
void codegen_summary_free(cg_summary *s);
/* The link src -> dst, -1 when no send uses it. */
int cg_summary_link(const cg_summary *s, int src, int dst);
/* The channel a base channel's ord-th unit (of m) goes to, and how many
 * units sub-channel k of a base channel with m units carries.  Units, not
 * messages, are dealt (codegen_channels.h): a run that can move as one step
 * stays on one thread block, and a base channel with fewer units than
 * `spread` uses only as many channels as it has units (cg_unit_spread), so
 * short links do not cost spread thread blocks each. */
int cg_unit_spread(long m, int spread);
int cg_deal(long ord, long m, int spread, bool block);
long cg_deal_count(long m, int spread, bool block, int k);

/* ---- plan ------------------------------------------------------------------- */

/* Four bytes: an operation holds three, a 1024-rank window millions of
 * operations.  off is below CG_SLOT_LIMIT (the plan refuses a schedule
 * whose buffers need more chunk slots, by name); -1 marks "none" in nops. */
typedef struct cg_slot {
    unsigned buf : 8;   /* 'i', 'o', 's'; 0 = none or unknown (the other side is not core) */
    signed off : 24;
} cg_slot;
#define CG_SLOT_LIMIT (1L << 23)

typedef struct cg_key {
    double major;   /* step (untimed) or time (timed); +inf for final copies */
    long minor;     /* slot index on the channel (untimed) */
    int phase;
    long tid;       /* tie break: send index (chunk for final copies) */
} cg_key;

enum { CG_SEND = 0, CG_RECV = 1, CG_COPY = 2 };

/* About two per send, so a 1024-rank document's window holds millions: the
 * fields are ordered (kind/op narrowed, slots packed, indices into the plan
 * 32-bit: the plan refuses more than INT_MAX operations or dependencies) so
 * little is padding; 88 bytes, was 120. */
typedef struct cg_lop {
    cg_key key;
    long xfer;         /* index into plan->xfers; -1 for copies */
    double land;       /* when the transfer lands (the receive's key major); +inf for copies */
    int dep_begin;     /* into plan->deps: local ops on the same rank */
    int task;          /* push-model task executing this op (full plans) */
    int rank;
    int peer;          /* the other rank; -1 for copies */
    int chan;          /* channel; 0 for copies */
    int ndeps;
    /* SEND: src = local slot read, dst = the receiver's slot written.
     * RECV: src = the sender's slot, dst = local slot written, red = local slot
     *       combined (op reduce), red.buf 0 otherwise.
     * COPY: src -> dst, both local. */
    cg_slot src, dst, red;
    unsigned char kind; /* CG_SEND, CG_RECV, CG_COPY */
    unsigned char op;   /* CS_OP_COPY or CS_OP_REDUCE (receives) */
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
    int *s_chunks;         /* per rank (exact for core ranks) */
    int nchannels;         /* from the summary */
    bool merge_steps;      /* from the summary */
    unsigned char *core;   /* per rank: 1 when its operations are in the plan */
    long nxfers;
    long *xfers;           /* the algorithm's send index of each transfer */
    long nlops;
    cg_lop *lops;
    long ndeps;
    long *deps;            /* lop ids */
    long *rank_begin;      /* ranks + 1 */
    long *rank_lops;       /* per rank, lop ids sorted by key */
    long ntasks;
    cg_task *tasks;        /* in landing order (full plans) */
} cg_plan;

/* Every rank core, with tasks: the CUDA lowering.  t may be NULL: then every
 * link has one lane (one channel per link). */
int codegen_plan_build(const cs_algorithm *a, const cs_topology *t, cg_plan **out,
                       cs_error *err);
/* The plan of the ranks with core[r] != 0 (core NULL: all, with tasks),
 * using the summary's channel decisions. */
int codegen_plan_build_core(const cs_algorithm *a, const cs_topology *t, const cg_summary *sum,
                            const unsigned char *core, cg_plan **out, cs_error *err);
void codegen_plan_free(cg_plan *p);
int cg_key_cmp(const cg_key *x, const cg_key *y);
/* The transfer order of untimed keys (phase ignored: a send and the receive
 * of one transfer compare equal), which the deadlock argument inducts on. */
int cg_transfer_cmp(const cg_key *x, const cg_key *y);

/* NCCL buffer layout of a collective in chunk units (used by the generators
 * and, independently re-derived, by the tests). */
int codegen_in_offset(cs_coll_kind kind, int ranks, int chunks, long g, int rank);
int codegen_out_offset(cs_coll_kind kind, int ranks, int chunks, long g, int rank);

#endif
