/*
 * msccl_xml.c - MSCCL XML emission from the shared lowering (codegen_plan.c).
 *
 * Per rank: one thread block per (peer, channel) that rank talks to, plus a
 * local block for final copies.  Steps keep the plan's key order, which is
 * what makes the document deadlock-free (codegen_plan.h).  Dependencies on
 * other blocks become depid/deps; dependencies inside one block are implied
 * by step order and dropped.  Several blocks to wait for become leading nops
 * (the old runtime accumulates the dependencies of nops into the next real
 * step and requires that step to carry the last one).  Flags are monotonic in
 * both runtimes, so waiting on the latest step of a block covers its earlier
 * steps: one dependency per block is enough.
 *
 * Ranks are generated in windows: a window's ranks and their peers ("core")
 * get a plan built from the sends incident to them, the window's <gpu>
 * elements are written through the caller's write function, and everything
 * is freed before the next window.  What a rank's element says depends only
 * on the sends incident to it and to its peers plus the summary's global
 * decisions, so a slice is byte for byte the same as that part of the full
 * document.
 *
 * The text is written for the old runtime's tokenizer: attributes separated
 * by single spaces, values in double quotes, "/>" right after the last value,
 * indentation with spaces only, no XML declaration and no comments.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen_plan.h"
#include "msccl_xml.h"

#define MSCCL_MAX_TB 216
#define MSCCL_MAX_STEPS 256
#define MSCCL_MAX_CHANNELS 32
#define MSCCL_MAX_TB_PER_CHANNEL 32
#define MSCCL_MAX_ELEMENTS 4096
#define MSCCL_MAX_CNT 71
#define EXECUTOR_MAX_TB 1024
#define EXECUTOR_MAX_STEPS 64
#define EXECUTOR_MAX_CHANNELS 32
/* The NCCL fork's 216 = 108 SMs (an A100) x 2: resident blocks per SM */
#define TB_PER_SM 2
#define MAX_GPU_SMS 4096
#define UNLIMITED_BYTES 4611686018427387904LL /* 2^62: "no limit" in both runtimes */
/* A window's ranks and peers may touch about this many sends (counted once
 * per endpoint) unless opt->window_sends says otherwise: it bounds a
 * window's plan to some tens of MB. */
#define WINDOW_INCIDENCE (1L << 19)

void msccl_options_default(cs_msccl_options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->runtime = CS_MSCCL_RUNTIME_AUTO;
}

int msccl_runtime_from_name(const char *name, cs_msccl_runtime *out, cs_error *err)
{
    if (name && strcmp(name, "auto") == 0)
        *out = CS_MSCCL_RUNTIME_AUTO;
    else if (name && strcmp(name, "msccl") == 0)
        *out = CS_MSCCL_RUNTIME_MSCCL;
    else if (name && strcmp(name, "msccl-executor") == 0)
        *out = CS_MSCCL_RUNTIME_EXECUTOR;
    else
        return cs_error_set(err, CS_EINVAL, "runtime",
                            "unknown MSCCL runtime \"%s\" (accepted: auto, msccl, msccl-executor)",
                            name ? name : "");
    return CS_OK;
}

const char *msccl_runtime_name(cs_msccl_runtime runtime)
{
    switch (runtime) {
    case CS_MSCCL_RUNTIME_MSCCL:
        return "msccl";
    case CS_MSCCL_RUNTIME_EXECUTOR:
        return "msccl-executor";
    default:
        return "auto";
    }
}

const char *msccl_coll_name(cs_coll_kind kind, cs_msccl_runtime rt)
{
    bool old = rt == CS_MSCCL_RUNTIME_MSCCL;
    switch (kind) {
    case CS_COLL_ALLREDUCE:
        return "allreduce";
    case CS_COLL_ALLGATHER:
        return "allgather";
    case CS_COLL_REDUCE:
        return "reduce";
    case CS_COLL_BROADCAST:
        return "broadcast";
    case CS_COLL_ALLTOALL:
        return "alltoall";
    case CS_COLL_REDUCESCATTER:
        return old ? "reduce_scatter" : "reducescatter";
    case CS_COLL_GATHER:
        return old ? "custom" : "gather";
    case CS_COLL_SCATTER:
        return old ? "custom" : "scatter";
    case CS_COLL_CUSTOM:
        return rt == CS_MSCCL_RUNTIME_EXECUTOR ? NULL : "custom";
    default:
        return NULL;
    }
}

static cg_limits runtime_limits(cs_msccl_runtime rt)
{
    switch (rt) {
    case CS_MSCCL_RUNTIME_MSCCL:
        return (cg_limits){"the msccl runtime", MSCCL_MAX_TB, MSCCL_MAX_STEPS, MSCCL_MAX_CHANNELS,
                           MSCCL_MAX_TB_PER_CHANNEL, MSCCL_MAX_ELEMENTS, MSCCL_MAX_CNT, 0};
    case CS_MSCCL_RUNTIME_EXECUTOR:
        return (cg_limits){"the msccl-executor runtime", EXECUTOR_MAX_TB, EXECUTOR_MAX_STEPS,
                           EXECUTOR_MAX_CHANNELS, 0, 0, MSCCL_MAX_CNT, 0};
    default:
        return (cg_limits){"runtime auto (a form both runtimes accept)", MSCCL_MAX_TB,
                           EXECUTOR_MAX_STEPS, MSCCL_MAX_CHANNELS, MSCCL_MAX_TB_PER_CHANNEL,
                           MSCCL_MAX_ELEMENTS, MSCCL_MAX_CNT, 0};
    }
}

/* ---- per-rank thread blocks ---------------------------------------------- */

typedef struct tb_info {
    int peer, chan;   /* peer -1: the local block */
    bool sends, recvs;
    long nops;        /* lops in this block */
    long nsteps;      /* XML steps, nops included */
} tb_info;

typedef struct rank_layout {
    int ntb;
    tb_info *tbs;
    int *lop_tb;      /* per lop of the rank (index in the rank's sorted list) */
    long *lop_pos;    /* XML step index of the lop */
    int *lop_nnop;    /* nops in front of it */
    long *lop_next;   /* the next op of the same block (index in the rank's list), -1 */
    long *lop_prev;   /* the previous one, -1 */
    long *lop_leader; /* merged steps: the first of the run (itself otherwise) */
    int *lop_cnt;     /* for leaders: chunks moved by the step */
    char *hasdep;
} rank_layout;

static void layout_free(rank_layout *L)
{
    free(L->tbs);
    free(L->lop_tb);
    free(L->lop_pos);
    free(L->lop_nnop);
    free(L->lop_next);
    free(L->lop_prev);
    free(L->lop_leader);
    free(L->lop_cnt);
    free(L->hasdep);
    memset(L, 0, sizeof *L);
}

static int cmp_tb(const void *x, const void *y)
{
    const tb_info *a = x, *b = y;
    if ((a->peer < 0) != (b->peer < 0))
        return a->peer < 0 ? 1 : -1; /* local block last */
    if (a->chan != b->chan)
        return a->chan < b->chan ? -1 : 1;
    return (a->peer > b->peer) - (a->peer < b->peer);
}

static int find_tb(const rank_layout *L, int peer, int chan)
{
    int lo = 0, hi = L->ntb - 1;
    tb_info key = {.peer = peer, .chan = chan};
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        int c = cmp_tb(&key, &L->tbs[mid]);
        if (c == 0)
            return mid;
        if (c < 0)
            hi = mid - 1;
        else
            lo = mid + 1;
    }
    return -1;
}

/* Position of lop (global id) within its rank's sorted list. */
static long *build_rank_index(const cg_plan *p)
{
    long *idx = malloc((size_t)(p->nlops ? p->nlops : 1) * sizeof *idx);
    if (!idx)
        return NULL;
    for (int r = 0; r < p->ranks; r++)
        for (long k = p->rank_begin[r]; k < p->rank_begin[r + 1]; k++)
            idx[p->rank_lops[k]] = k - p->rank_begin[r];
    return idx;
}

/* Pass 1: thread blocks, and runs of final copies between contiguous slots
 * (they come last, in slot order) merged into one step. */
static int layout_blocks(const cg_plan *p, int r, int max_cnt, rank_layout *L, cs_error *err)
{
    long lo = p->rank_begin[r], n = p->rank_begin[r + 1] - lo;
    size_t nn = (size_t)(n ? n : 1);
    memset(L, 0, sizeof *L);
    L->tbs = malloc(nn * sizeof(tb_info));
    L->lop_tb = malloc(nn * sizeof(int));
    L->lop_pos = malloc(nn * sizeof(long));
    L->lop_nnop = malloc(nn * sizeof(int));
    L->lop_next = malloc(nn * sizeof(long));
    L->lop_prev = malloc(nn * sizeof(long));
    L->lop_leader = malloc(nn * sizeof(long));
    L->lop_cnt = malloc(nn * sizeof(int));
    L->hasdep = calloc(nn, 1);
    if (!L->tbs || !L->lop_tb || !L->lop_pos || !L->lop_nnop || !L->lop_next || !L->lop_prev ||
        !L->lop_leader || !L->lop_cnt || !L->hasdep)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    /* distinct blocks, kept sorted (a rank has few) */
    for (long k = 0; k < n; k++) {
        const cg_lop *l = &p->lops[p->rank_lops[lo + k]];
        tb_info key = {l->kind == CG_COPY ? -1 : l->peer, l->kind == CG_COPY ? 0 : l->chan,
                       false, false, 0, 0};
        int a = 0, z = L->ntb;
        while (a < z) {
            int mid = (a + z) / 2;
            if (cmp_tb(&L->tbs[mid], &key) < 0)
                a = mid + 1;
            else
                z = mid;
        }
        if (a < L->ntb && cmp_tb(&L->tbs[a], &key) == 0)
            continue;
        memmove(&L->tbs[a + 1], &L->tbs[a], (size_t)(L->ntb - a) * sizeof(tb_info));
        L->tbs[a] = key;
        L->ntb++;
    }
    /* block of each op; runs of final copies between contiguous slots become
     * one step (they come last, in slot order) */
    for (long k = 0; k < n; k++) {
        const cg_lop *l = &p->lops[p->rank_lops[lo + k]];
        int tb = find_tb(L, l->kind == CG_COPY ? -1 : l->peer, l->kind == CG_COPY ? 0 : l->chan);
        if (tb < 0)
            return cs_error_set(err, CS_EINTERNAL, "", "thread block lookup failed");
        L->lop_tb[k] = tb;
        if (l->kind == CG_SEND)
            L->tbs[tb].sends = true;
        if (l->kind == CG_RECV)
            L->tbs[tb].recvs = true;
        L->lop_leader[k] = k;
        L->lop_cnt[k] = 1;
        if (l->kind == CG_COPY && k > 0 && p->lops[p->rank_lops[lo + k - 1]].kind == CG_COPY) {
            long ld = L->lop_leader[k - 1];
            const cg_lop *f = &p->lops[p->rank_lops[lo + ld]];
            int c = L->lop_cnt[ld];
            if (c < max_cnt && f->src.buf == l->src.buf && f->dst.buf == l->dst.buf &&
                l->src.off == f->src.off + c && l->dst.off == f->dst.off + c) {
                L->lop_leader[k] = ld;
                L->lop_cnt[ld]++;
            }
        }
    }
    int *last = malloc(sizeof(int) * (size_t)(L->ntb ? L->ntb : 1));
    if (!last)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    for (int k = 0; k < L->ntb; k++)
        last[k] = -1;
    for (long k = 0; k < n; k++) {
        L->lop_next[k] = -1;
        L->lop_prev[k] = last[L->lop_tb[k]];
        if (last[L->lop_tb[k]] >= 0)
            L->lop_next[last[L->lop_tb[k]]] = k;
        last[L->lop_tb[k]] = (int)k;
    }
    free(last);
    return CS_OK;
}

/* Pass 3: nops, step positions, and which steps are waited for. */
static void layout_steps(const cg_plan *p, int r, const long *rank_index, rank_layout *L)
{
    long lo = p->rank_begin[r], n = p->rank_begin[r + 1] - lo;
    for (long k = 0; k < n; k++) {
        if (L->lop_leader[k] != k) {
            L->lop_pos[k] = L->lop_pos[L->lop_leader[k]];
            L->lop_nnop[k] = 0;
            continue;
        }
        int distinct = 0;
        for (long q = k; q >= 0; q = L->lop_next[q]) {
            if (L->lop_leader[q] != k)
                break;
            const cg_lop *l = &p->lops[p->rank_lops[lo + q]];
            for (int d = 0; d < l->ndeps; d++) {
                int dtb = L->lop_tb[rank_index[p->deps[l->dep_begin + d]]];
                if (dtb == L->lop_tb[k])
                    continue;
                bool seen = false;
                for (long q2 = k; q2 >= 0 && !seen; q2 = L->lop_next[q2]) {
                    const cg_lop *l2 = &p->lops[p->rank_lops[lo + q2]];
                    int lim = q2 == q ? d : l2->ndeps;
                    for (int e = 0; e < lim && !seen; e++)
                        seen = L->lop_tb[rank_index[p->deps[l2->dep_begin + e]]] == dtb;
                    if (q2 == q)
                        break;
                }
                distinct += !seen;
            }
        }
        L->lop_nnop[k] = distinct > 1 ? distinct - 1 : 0;
        tb_info *tb = &L->tbs[L->lop_tb[k]];
        tb->nsteps += L->lop_nnop[k];
        L->lop_pos[k] = tb->nsteps++;
        tb->nops++;
    }
    /* who is waited for */
    for (long k = 0; k < n; k++) {
        const cg_lop *l = &p->lops[p->rank_lops[lo + k]];
        for (int d = 0; d < l->ndeps; d++) {
            long dk = rank_index[p->deps[l->dep_begin + d]];
            if (L->lop_tb[dk] != L->lop_tb[k])
                L->hasdep[L->lop_leader[dk]] = 1;
        }
    }
}

/* Timed: the latest key at which an operation runs, merged or not (a send
 * in a run runs before its transfer lands; codegen_plan.h, "Timed order"):
 * the key its transfer's receive has. */
static cg_key land_key(const cg_lop *l)
{
    if (l->kind != CG_SEND)
        return l->key;
    return (cg_key){l->land, 0, 0, l->key.tid};
}

/* Members of a merged run are consecutive in their block; the run's leader
 * is the first.  True when every dependency of lop (a global id) is a member
 * of the run led by `leader` or runs before the run's key `lkey`.  Untimed,
 * the run runs at its leaders' transfer key and a dependency is compared at
 * its transfer key (the order the deadlock argument inducts on,
 * codegen_plan.h).  Timed, the run runs just before its receive leader's key
 * on both ends, and a dependency is compared at the latest key it may run at
 * (land_key).  Either way a dependency is judged by a bound that holds
 * whether or not it is merged itself: a run's fate then depends only on the
 * operations of its two ranks, which every window holds, so a slice says
 * what the whole document says. */
static bool deps_before(const cg_plan *p, const rank_layout *L, const long *rank_index,
                        long lop, long leader_lop, const cg_key *lkey)
{
    const cg_lop *l = &p->lops[lop];
    long lead_k = rank_index[leader_lop];
    for (int d = 0; d < l->ndeps; d++) {
        long dl = p->deps[l->dep_begin + d];
        if (L->lop_leader[rank_index[dl]] == lead_k)
            continue;
        if (p->timed) {
            cg_key dk = land_key(&p->lops[dl]);
            if (cg_key_cmp(&dk, lkey) >= 0)
                return false;
        } else if (cg_transfer_cmp(&p->lops[dl].key, lkey) >= 0) {
            return false;
        }
    }
    return true;
}

static bool next_slot(cg_slot a, int c, cg_slot b)
{
    return a.buf == b.buf && b.off == a.off + c;
}

/* Pass 2: consecutive messages of one connection between contiguous slots
 * become one step moving cnt chunks, on both ends alike.  Normally only
 * messages of the same step (same start time) merge: merging across steps
 * would undo the schedule's pipelining.  When the summary found blocks too
 * long for the runtime (merge_steps), runs grow across steps too.  A run
 * may only grow while each new member needs nothing that comes after the
 * run's first step, so the merged step can run where the first one was.
 * Only the links of window ranks are merged; their peers are core. */

/* Grows the run led by rank r's send k (index in r's list) as far as it
 * goes.  Each link's runs depend only on the operations of its two ranks
 * (deps_before), so the order links are merged in does not matter. */
static void grow_run(const cg_plan *p, const long *rank_index, rank_layout *layouts,
                     const long *recv_of, int r, long k, int max_cnt)
{
    rank_layout *Ls = &layouts[r];
    long lo = p->rank_begin[r];
    const cg_lop *s1 = &p->lops[p->rank_lops[lo + k]];
    long lead_s = p->rank_lops[lo + k], lead_r = recv_of[s1->xfer];
    if (lead_r < 0)
        return;
    rank_layout *Lr = &layouts[s1->peer];
    long rk = rank_index[lead_r];
    const cg_lop *r1 = &p->lops[lead_r];
    long ks = k, kr = rk;
    /* the key the run runs at (untimed: both leaders'; timed: just before
     * the receive leader's).  Untimed eager transfers (their sends have
     * minor key -1, codegen_plan.h) are a step each: a merged step is a
     * rendezvous */
    const cg_key *vkey = p->timed ? &r1->key : &s1->key;
    if (!p->timed && s1->key.minor < 0)
        return;
    while (Ls->lop_cnt[k] < max_cnt) {
        long ks2 = Ls->lop_next[ks], kr2 = Lr->lop_next[kr];
        /* a message already leading (or in) another run stays there */
        if (ks2 < 0 || kr2 < 0 || Ls->lop_leader[ks2] != ks2 || Ls->lop_cnt[ks2] != 1 ||
            Lr->lop_leader[kr2] != kr2 || Lr->lop_cnt[kr2] != 1)
            break;
        long s2l = p->rank_lops[lo + ks2];
        const cg_lop *s2 = &p->lops[s2l];
        if (s2->kind != CG_SEND ||
            recv_of[s2->xfer] != p->rank_lops[p->rank_begin[s1->peer] + kr2])
            break;
        const cg_lop *r2 = &p->lops[recv_of[s2->xfer]];
        if (!p->timed && s2->key.minor < 0)
            break;
        int c = Ls->lop_cnt[k];
        if ((!p->merge_steps &&
             (s2->key.major != s1->key.major || r2->key.major != r1->key.major)) ||
            r2->op != r1->op || !next_slot(s1->src, c, s2->src) ||
            !next_slot(r1->dst, c, r2->dst) ||
            (r1->op == CS_OP_REDUCE && !next_slot(r1->red, c, r2->red)))
            break;
        if (!deps_before(p, Ls, rank_index, s2l, lead_s, vkey) ||
            !deps_before(p, Lr, rank_index, recv_of[s2->xfer], lead_r, vkey))
            break;
        Ls->lop_leader[ks2] = k;
        Lr->lop_leader[kr2] = rk;
        Ls->lop_cnt[k]++;
        Lr->lop_cnt[rk]++;
        ks = ks2;
        kr = kr2;
    }
}

/* recv_of: transfer -> its receive lop, -1 when the receiver is not core. */
static void merge_transfers(const cg_plan *p, const long *rank_index, rank_layout *layouts,
                            const long *recv_of, const unsigned char *window, int max_cnt)
{
    for (int r = 0; r < p->ranks; r++) {
        if (!p->core[r])
            continue;
        rank_layout *Ls = &layouts[r];
        long lo = p->rank_begin[r], n = p->rank_begin[r + 1] - lo;
        for (long k = 0; k < n; k++) {
            const cg_lop *s1 = &p->lops[p->rank_lops[lo + k]];
            if (s1->kind != CG_SEND || Ls->lop_leader[k] != k)
                continue;
            if (!window[r] && !window[s1->peer])
                continue;
            grow_run(p, rank_index, layouts, recv_of, r, k, max_cnt);
        }
    }
}

/* Where a rank's step runs in the deadlock-freedom argument (codegen_plan.h):
 * untimed, at its run leader's transfer key; timed, at its own key, or for a
 * merged transfer just before (sub -1) its run's receive leader's key, on
 * both ends (recv_of: transfer -> receive lop). */
typedef struct run_at {
    const cg_key *key;
    int sub;
} run_at;

static run_at run_key(const cg_plan *p, const rank_layout *L, long lo, long k,
                      const long *recv_of)
{
    long ld = L->lop_leader[k];
    const cg_lop *l = &p->lops[p->rank_lops[lo + ld]];
    if (!p->timed || l->kind == CG_COPY || L->lop_cnt[ld] == 1)
        return (run_at){ld == k || !p->timed ? &l->key : &p->lops[p->rank_lops[lo + k]].key, 0};
    if (l->kind == CG_SEND)
        l = &p->lops[recv_of[l->xfer]];
    return (run_at){&l->key, -1};
}

static int run_cmp(bool timed, run_at x, run_at y)
{
    int c = timed ? cg_key_cmp(x.key, y.key) : cg_transfer_cmp(x.key, y.key);
    return c ? c : (x.sub > y.sub) - (x.sub < y.sub);
}

/* The messages a block sends form one connection (rank, peer, channel).
 * They must be received in the order they are sent, and each transfer is
 * either a rendezvous (untimed, the same transfer key at both ends) or eager
 * (its send's key before its receive's: one chunk, not merged, and the
 * previous message received before the send, so a one-chunk connection is
 * empty whenever the send reaches it).  Timed transfers are all eager or in
 * merged runs (run_key). */
static bool fifo_order(const cg_plan *p, const rank_layout *L, long k, const cg_lop *prev_send,
                       const cg_lop *l, const long *recv_of)
{
    const cg_lop *rv = &p->lops[recv_of[l->xfer]];
    bool rendezvous = !p->timed && cg_transfer_cmp(&l->key, &rv->key) == 0;
    if (!rendezvous && (cg_key_cmp(&l->key, &rv->key) >= 0 ||
                        (!p->timed && L->lop_cnt[L->lop_leader[k]] != 1)))
        return false;
    if (!prev_send || recv_of[prev_send->xfer] < 0)
        return true;
    const cg_key *pk = &p->lops[recv_of[prev_send->xfer]].key;
    return cg_key_cmp(pk, &rv->key) < 0 && (rendezvous || cg_key_cmp(pk, &l->key) < 0);
}

/* Checks on the steps as laid out, merged runs included, what the argument
 * needs: each connection's messages in FIFO order (fifo_order), each thread
 * block's steps at increasing keys, and every step waiting only for steps
 * that run before it.  Cheap (linear in operations and dependencies), so
 * every document is checked; a failure is a bug in the lowering, refused
 * rather than emitted. */
static int check_order(const cg_plan *p, const rank_layout *L, int r, const long *rank_index,
                       const long *recv_of, cs_error *err)
{
    long lo = p->rank_begin[r], n = p->rank_begin[r + 1] - lo;
    const cg_lop **last = calloc((size_t)(L->ntb ? L->ntb : 1), sizeof *last);
    if (!last)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    int rc = CS_OK;
    for (long k = 0; k < n && rc == CS_OK; k++) {
        const cg_lop *l = &p->lops[p->rank_lops[lo + k]];
        if (l->kind != CG_SEND || recv_of[l->xfer] < 0)
            continue;
        if (!fifo_order(p, L, k, last[L->lop_tb[k]], l, recv_of))
            rc = cs_error_set(err, CS_EINTERNAL, "", "rank %d thread block %d: send %ld is "
                              "out of FIFO order on its connection to rank %d (channel %d)", r,
                              L->lop_tb[k], p->xfers[l->xfer], l->peer, l->chan);
        last[L->lop_tb[k]] = l;
    }
    free(last);
    if (rc != CS_OK)
        return rc;
    for (long k = 0; k < n; k++) {
        run_at v = run_key(p, L, lo, k, recv_of);
        long prev = L->lop_prev[k];
        if (L->lop_leader[k] == k && prev >= 0 &&
            run_cmp(p->timed, run_key(p, L, lo, prev, recv_of), v) >= 0)
            return cs_error_set(err, CS_EINTERNAL, "", "rank %d thread block %d: step of "
                                "operation %ld does not run after the one before it (merged "
                                "steps out of order)", r, L->lop_tb[k], k);
        const cg_lop *l = &p->lops[p->rank_lops[lo + k]];
        for (int d = 0; d < l->ndeps; d++) {
            long dk = rank_index[p->deps[l->dep_begin + d]];
            if (L->lop_leader[dk] == L->lop_leader[k])
                continue;
            if (run_cmp(p->timed, run_key(p, L, lo, dk, recv_of), v) >= 0)
                return cs_error_set(err, CS_EINTERNAL, "", "rank %d thread block %d: a step "
                                    "waits for thread block %d's step that runs after it "
                                    "(forward dependency after merging)", r, L->lop_tb[k],
                                    L->lop_tb[dk]);
        }
    }
    return CS_OK;
}

/* Exact limits of one rank's part of a document with ndoc_gpus <gpu>s. */
static int check_limits(const cg_plan *p, const rank_layout *L, int r, const cg_limits *lim,
                        int ndoc_gpus, cs_error *err)
{
    if (L->ntb > lim->max_tb)
        return cs_error_set(err, CS_ELIMIT, "runtime",
                            "rank %d needs %d thread blocks; %s allows at most %d "
                            "(thread block ids 0..%d)%s", r, L->ntb, lim->owner, lim->max_tb,
                            lim->max_tb - 1, CG_HIERARCHICAL_HINT);
    long steps = 0;
    for (int k = 0; k < L->ntb; k++) {
        if (L->tbs[k].nsteps > lim->max_steps)
            return cs_error_set(err, CS_ELIMIT, "runtime",
                                "rank %d thread block %d (%s %d) needs %ld steps with %d channels%s; "
                                "%s allows step s <= %d%s", r, k,
                                L->tbs[k].peer < 0 ? "local copies" : "peer",
                                L->tbs[k].peer, L->tbs[k].nsteps, p->nchannels,
                                p->merge_steps ? " and contiguous chunks merged" : "", lim->owner,
                                lim->max_steps - 1, CG_HIERARCHICAL_HINT);
        steps += L->tbs[k].nsteps;
    }
    if (p->nchannels > lim->max_channels)
        return cs_error_set(err, CS_ELIMIT, "runtime",
                            "the algorithm needs %d channels; %s allows chan < %d%s",
                            p->nchannels, lim->owner, lim->max_channels, CG_HIERARCHICAL_HINT);
    if (lim->max_tb_per_channel) {
        for (int c = 0; c < p->nchannels; c++) {
            int ns = 0, nr = 0;
            for (int k = 0; k < L->ntb; k++) {
                if (L->tbs[k].chan != c || L->tbs[k].peer < 0)
                    continue;
                ns += L->tbs[k].sends;
                nr += L->tbs[k].recvs;
            }
            if (ns > lim->max_tb_per_channel || nr > lim->max_tb_per_channel)
                return cs_error_set(err, CS_ELIMIT, "runtime",
                                    "rank %d has %d sending and %d receiving thread blocks on "
                                    "channel %d; %s allows %d of each per channel%s",
                                    r, ns, nr, c, lim->owner, lim->max_tb_per_channel,
                                    CG_HIERARCHICAL_HINT);
        }
    }
    /* elements one rank parses: <algo>, every <gpu> of the document, its own
     * blocks and steps (the old runtime skips other ranks' children) */
    long elements = 1 + ndoc_gpus + L->ntb + steps;
    if (lim->max_elements && elements >= lim->max_elements)
        return cs_error_set(err, CS_ELIMIT, "runtime",
                            "rank %d's part has %ld XML elements (1 <algo>, %d <gpu>, %d <tb>, "
                            "%ld <step>); %s reads fewer than %d per rank%s%s", r, elements,
                            ndoc_gpus, L->ntb, steps, lim->owner, lim->max_elements,
                            ndoc_gpus > 1 && 2 + L->ntb + steps < lim->max_elements
                                ? "; a per-rank slice (one <gpu>) fits"
                                : "",
                            CG_HIERARCHICAL_HINT);
    return CS_OK;
}

/* ---- text ------------------------------------------------------------------ */

/* Steps are most of a document's bytes: they are formatted by hand rather
 * than through printf. */
static char *put_num(char *o, long v)
{
    char tmp[24];
    int n = 0;
    unsigned long u = v < 0 ? 0UL - (unsigned long)v : (unsigned long)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *o++ = '-';
    while (n)
        *o++ = tmp[--n];
    return o;
}

static char *put_lit(char *o, const char *s)
{
    size_t n = strlen(s);
    memcpy(o, s, n);
    return o + n;
}

static void put_step(cs_buf *b, long s, const char *type, cg_slot src, cg_slot dst, int cnt,
                     int depid, long deps, int hasdep)
{
    char line[320], *o = line;
    o = put_lit(o, "      <step s=\"");
    o = put_num(o, s);
    o = put_lit(o, "\" type=\"");
    o = put_lit(o, type);
    o = put_lit(o, "\" srcbuf=\"");
    *o++ = src.buf;
    o = put_lit(o, "\" srcoff=\"");
    o = put_num(o, src.off);
    o = put_lit(o, "\" dstbuf=\"");
    *o++ = dst.buf;
    o = put_lit(o, "\" dstoff=\"");
    o = put_num(o, dst.off);
    o = put_lit(o, "\" cnt=\"");
    o = put_num(o, cnt);
    o = put_lit(o, "\" depid=\"");
    o = put_num(o, depid);
    o = put_lit(o, "\" deps=\"");
    o = put_num(o, deps);
    o = put_lit(o, "\" hasdep=\"");
    o = put_num(o, hasdep);
    o = put_lit(o, "\"/>\n");
    cs_buf_append(b, line, (size_t)(o - line));
}

static int emit_rank(cs_buf *b, const cg_plan *p, int r, const rank_layout *L,
                     const long *rank_index, int i_chunks, int o_chunks)
{
    long lo = p->rank_begin[r], n = p->rank_begin[r + 1] - lo;
    cs_buf_printf(b, "  <gpu id=\"%d\" i_chunks=\"%d\" o_chunks=\"%d\" s_chunks=\"%d\">\n", r,
              i_chunks, o_chunks, p->s_chunks[r]);
    size_t ntb = (size_t)(L->ntb ? L->ntb : 1);
    int *dep_tb = malloc(sizeof(int) * ntb);
    long *dep_pos = malloc(sizeof(long) * ntb);
    long *first = malloc(sizeof(long) * ntb);
    if (!dep_tb || !dep_pos || !first) {
        free(dep_tb);
        free(dep_pos);
        free(first);
        return CS_ENOMEM;
    }
    for (int t = 0; t < L->ntb; t++)
        first[t] = -1;
    for (long k = n - 1; k >= 0; k--)
        first[L->lop_tb[k]] = k;
    for (int t = 0; t < L->ntb; t++) {
        const tb_info *tb = &L->tbs[t];
        cs_buf_printf(b, "    <tb id=\"%d\" send=\"%d\" recv=\"%d\" chan=\"%d\">\n", t,
                  tb->sends ? tb->peer : -1, tb->recvs ? tb->peer : -1, tb->chan);
        for (long k = first[t]; k >= 0; k = L->lop_next[k]) {
            if (L->lop_leader[k] != k)
                continue;
            const cg_lop *l = &p->lops[p->rank_lops[lo + k]];
            /* latest step of each other block this step waits for */
            int nd = 0;
            for (long q = k; q >= 0 && L->lop_leader[q] == k; q = L->lop_next[q]) {
                const cg_lop *lq = &p->lops[p->rank_lops[lo + q]];
                for (int d = 0; d < lq->ndeps; d++) {
                    long dk = rank_index[p->deps[lq->dep_begin + d]];
                    int dtb = L->lop_tb[dk];
                    if (dtb == t)
                        continue;
                    int e = 0;
                    while (e < nd && dep_tb[e] != dtb)
                        e++;
                    if (e == nd) {
                        dep_tb[nd] = dtb;
                        dep_pos[nd++] = L->lop_pos[dk];
                    } else if (L->lop_pos[dk] > dep_pos[e]) {
                        dep_pos[e] = L->lop_pos[dk];
                    }
                }
            }
            long s = L->lop_pos[k] - L->lop_nnop[k];
            cg_slot none = {'i', -1}, none_o = {'o', -1};
            for (int e = 0; e + 1 < nd; e++)
                put_step(b, s++, "nop", none, none_o, 0, dep_tb[e], dep_pos[e], 0);
            int depid = nd ? dep_tb[nd - 1] : -1;
            long deps = nd ? dep_pos[nd - 1] : -1;
            int hd = L->hasdep[k];
            switch (l->kind) {
            case CG_SEND:
                put_step(b, s, "s", l->src, l->dst, L->lop_cnt[k], depid, deps, hd);
                break;
            case CG_RECV:
                if (l->op == CS_OP_REDUCE)
                    put_step(b, s, "rrc", l->red, l->dst, L->lop_cnt[k], depid, deps, hd);
                else
                    put_step(b, s, "r", l->src, l->dst, L->lop_cnt[k], depid, deps, hd);
                break;
            default:
                put_step(b, s, "cpy", l->src, l->dst, L->lop_cnt[k], depid, deps, hd);
                break;
            }
        }
        cs_buf_puts(b, "    </tb>\n");
    }
    free(first);
    free(dep_tb);
    free(dep_pos);
    cs_buf_puts(b, "  </gpu>\n");
    return CS_OK;
}

static void default_name(const cs_algorithm *a, char *out, size_t n)
{
    snprintf(out, n, "collsynth-%s-%s-%s", a->method[0] ? a->method : "alg",
             collective_kind_name(a->collective.kind), a->topology[0] ? a->topology : "topo");
}

/* Attribute-safe copy: the old runtime's tokenizer knows no entities. */
static int clean_name(const char *in, char *out, size_t n, cs_error *err)
{
    size_t k = 0;
    for (const char *c = in; *c; c++) {
        if (k + 1 >= n || k >= 120)
            break;
        unsigned char ch = (unsigned char)*c;
        if (ch == '"' || ch == '<' || ch == '>' || ch == '&' || ch < 0x20 || ch == 0x7f)
            return cs_error_set(err, CS_EINVAL, "name",
                                "algorithm name contains '%c'; use letters, digits and -_.:", ch);
        out[k++] = ch == ' ' ? '_' : (char)ch;
    }
    out[k] = 0;
    if (!k)
        return cs_error_set(err, CS_EINVAL, "name", "algorithm name is empty");
    return CS_OK;
}

/* ---- documents ---------------------------------------------------------------- */

/* Everything a window needs that is the same for every rank. */
typedef struct doc {
    const cs_algorithm *a;
    const cs_topology *t;
    const cs_msccl_options *opt;
    cg_limits lim;
    char owner[160];        /* lim.owner when the GPU's SMs lower the block limit */
    cg_summary *sum;
    int i_chunks, o_chunks, nchunksperloop;
    int ndoc_gpus;
    cs_write_fn write;
    void *ctx;
} doc;

static int prepare(doc *d, const cs_algorithm *a, const cs_msccl_options *opt, cs_buf *header,
                   int min_spread, cs_error *err)
{
    if (opt->runtime < CS_MSCCL_RUNTIME_AUTO || opt->runtime > CS_MSCCL_RUNTIME_EXECUTOR)
        return cs_error_set(err, CS_EINVAL, "runtime", "unknown runtime %d", (int)opt->runtime);
    const char *proto = opt->proto ? opt->proto : "Simple";
    if (strcmp(proto, "Simple") && strcmp(proto, "LL") && strcmp(proto, "LL128"))
        return cs_error_set(err, CS_EINVAL, "proto",
                            "protocol \"%s\" is not one of Simple, LL, LL128", proto);
    if (opt->min_bytes < 0 || opt->max_bytes < 0 ||
        (opt->max_bytes > 0 && opt->min_bytes > opt->max_bytes))
        return cs_error_set(err, CS_EINVAL, "min_bytes",
                            "byte range [%lld, %lld] is invalid (0 <= min <= max; max 0 = no limit)",
                            opt->min_bytes, opt->max_bytes);
    const char *coll = msccl_coll_name(a->collective.kind, opt->runtime);
    if (!coll)
        return cs_error_set(err, CS_EUNSUPPORTED, "collective",
                            "the %s runtime has no collective for \"%s\"",
                            msccl_runtime_name(opt->runtime),
                            collective_kind_name(a->collective.kind));
    char name[128];
    if (opt->name) {
        int rc = clean_name(opt->name, name, sizeof name, err);
        if (rc != CS_OK)
            return rc;
    } else {
        char raw[3 * CS_NAME_MAX];
        default_name(a, raw, sizeof raw);
        size_t k = 0;
        for (const char *c = raw; *c && k < 120; c++)
            name[k++] = (*c == '"' || *c == '<' || *c == '>' || *c == '&' || *c == ' ' ||
                         (unsigned char)*c < 0x20) ? '_' : *c;
        name[k] = 0;
    }
    if (opt->gpu_sms < 0 || opt->gpu_sms > MAX_GPU_SMS)
        return cs_error_set(err, CS_EINVAL, "gpu_sms",
                            "gpu_sms=%d is not a GPU's SM count (1..%d, or 0 for the "
                            "runtime's own thread-block limit)", opt->gpu_sms, MAX_GPU_SMS);
    d->lim = runtime_limits(opt->runtime);
    if (opt->gpu_sms > 0 && TB_PER_SM * opt->gpu_sms < d->lim.max_tb) {
        /* every block of a rank must be resident at once (they spin on each
         * other): a GPU with fewer SMs holds fewer of them */
        snprintf(d->owner, sizeof d->owner, "%s on a GPU with gpu_sms=%d (%d thread blocks per SM)",
                 d->lim.owner, opt->gpu_sms, TB_PER_SM);
        d->lim.owner = d->owner;
        d->lim.max_tb = TB_PER_SM * opt->gpu_sms;
    }
    /* without merged steps every message is its own unit when dealing */
    cg_limits slim = d->lim;
    if (opt->single_chunk_steps)
        slim.max_cnt = 1;
    slim.min_spread = min_spread;
    int rc = codegen_summary_build(a, d->t, &slim, &d->sum, err);
    if (rc != CS_OK)
        return rc;
    /* the buffer sizes every <gpu> declares */
    int P = a->ranks, C = a->chunks;
    long G = d->sum->global_chunks;
    switch (a->collective.kind) {
    case CS_COLL_ALLGATHER:
    case CS_COLL_GATHER:
        d->i_chunks = C;
        d->o_chunks = P * C;
        d->nchunksperloop = d->o_chunks;
        break;
    case CS_COLL_REDUCESCATTER:
    case CS_COLL_SCATTER:
        d->i_chunks = P * C;
        d->o_chunks = C;
        d->nchunksperloop = d->i_chunks;
        break;
    case CS_COLL_ALLTOALL:
        d->i_chunks = d->o_chunks = d->nchunksperloop = P * C;
        break;
    default:
        d->i_chunks = d->o_chunks = d->nchunksperloop = (int)G;
        break;
    }
    if (strcmp(coll, "custom") == 0) /* the old runtime wants both equal to the loop */
        d->i_chunks = d->o_chunks = d->nchunksperloop;
    long long max_bytes = opt->max_bytes;
    if (max_bytes == 0 && opt->runtime != CS_MSCCL_RUNTIME_EXECUTOR)
        max_bytes = UNLIMITED_BYTES;
    bool inplace = a->collective.kind == CS_COLL_ALLGATHER ||
                   a->collective.kind == CS_COLL_REDUCESCATTER ||
                   a->collective.kind == CS_COLL_ALLREDUCE ||
                   a->collective.kind == CS_COLL_BROADCAST || a->collective.kind == CS_COLL_REDUCE;
    cs_buf_printf(header, "<algo name=\"%s\" proto=\"%s\" nchannels=\"%d\" nchunksperloop=\"%d\" "
              "ngpus=\"%d\" coll=\"%s\" inplace=\"%d\" outofplace=\"1\" minBytes=\"%lld\" "
              "maxBytes=\"%lld\" redop=\"sum\">\n",
              name, proto, d->sum->nchannels, d->nchunksperloop, P, coll, inplace ? 1 : 0,
              opt->min_bytes, max_bytes);
    return header->failed ? cs_error_set(err, CS_ENOMEM, "", "out of memory") : CS_OK;
}

static int put(const doc *d, cs_buf *b, cs_error *err)
{
    if (b->failed)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory writing the document");
    int rc = b->len ? d->write(d->ctx, b->s, b->len) : CS_OK;
    b->len = 0;
    if (rc != CS_OK)
        return cs_error_set(err, rc, "", "writing the document failed (%s)", cs_status_name(rc));
    return CS_OK;
}

/* The <gpu> elements of ranks lo..hi: plan of them and their peers, layouts,
 * exact limits, text. */
static int emit_window(const doc *d, int lo, int hi, unsigned char *core, unsigned char *window,
                       bool dry, cs_error *err)
{
    const cg_summary *s = d->sum;
    int P = s->ranks;
    memset(core, 0, (size_t)P);
    memset(window, 0, (size_t)P);
    for (int r = lo; r <= hi; r++) {
        window[r] = core[r] = 1;
        for (long k = s->rank_link_begin[r]; k < s->rank_link_begin[r + 1]; k++) {
            const cg_link *L = &s->links[s->rank_links[k]];
            core[L->src] = core[L->dst] = 1;
        }
    }
    cg_plan *p = NULL;
    int rc = codegen_plan_build_core(d->a, d->t, s, core, &p, err);
    if (rc != CS_OK)
        return rc;
    long *rank_index = build_rank_index(p);
    rank_layout *layouts = calloc((size_t)P, sizeof *layouts);
    cs_buf b = {0};
    if (!rank_index || !layouts) {
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
        goto done;
    }
    for (int r = 0; r < P && rc == CS_OK; r++)
        if (core[r])
            rc = layout_blocks(p, r, d->lim.max_cnt, &layouts[r], err);
    long *recv_of = rc == CS_OK ? malloc((size_t)(p->nxfers ? p->nxfers : 1) * sizeof(long))
                                : NULL;
    if (rc == CS_OK && !recv_of)
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
    for (long x = 0; x < p->nxfers && rc == CS_OK; x++)
        recv_of[x] = -1;
    for (long k = 0; k < p->nlops && rc == CS_OK; k++)
        if (p->lops[k].kind == CG_RECV)
            recv_of[p->lops[k].xfer] = k;
    if (rc == CS_OK && !d->opt->single_chunk_steps)
        merge_transfers(p, rank_index, layouts, recv_of, window, d->lim.max_cnt);
    for (int r = lo; r <= hi && rc == CS_OK; r++)
        rc = check_order(p, &layouts[r], r, rank_index, recv_of, err);
    free(recv_of);
    for (int r = lo; r <= hi && rc == CS_OK; r++) {
        layout_steps(p, r, rank_index, &layouts[r]);
        if (!dry) {
            rc = check_limits(p, &layouts[r], r, &d->lim, d->ndoc_gpus, err);
            continue;
        }
        for (int k = 0; k < layouts[r].ntb && rc == CS_OK; k++)
            if (layouts[r].tbs[k].nsteps > d->lim.max_steps)
                rc = CS_ELIMIT;   /* settle_spread widens the spread */
    }
    for (int r = lo; r <= hi && rc == CS_OK && !dry; r++) {
        if ((rc = emit_rank(&b, p, r, &layouts[r], rank_index, d->i_chunks, d->o_chunks)) != CS_OK)
            cs_error_set(err, rc, "", "out of memory writing the document");
        else
            rc = put(d, &b, err);
    }
done:
    if (layouts)
        for (int r = 0; r < P; r++)
            layout_free(&layouts[r]);
    free(layouts);
    free(rank_index);
    free(b.s);
    codegen_plan_free(p);
    return rc;
}

/* The summary chooses channels per lane from an estimate that counts a run
 * of neighbouring chunks as one step; where the runs cannot merge (each
 * chunk waits for a different earlier receive, as in pipelined
 * hierarchical schedules) its fullest block gets more steps than the
 * runtime allows although more channels would hold them.  So the rank the
 * estimate says is fullest and the first 8 ranks are laid out exactly (no
 * text), and while one of their blocks has too many steps the spread
 * doubles, as long as the wider spread is feasible.  Other ranks can still
 * fail: the writer then refuses with the rank and the value.  The decision is a function of the whole algorithm,
 * the same for the whole document and every slice. */
static int settle_spread(doc *d, const cs_algorithm *a, const cs_msccl_options *opt,
                         cs_buf *header, cs_error *err)
{
    int P = a->ranks, rc = CS_OK;
    unsigned char *core = malloc((size_t)P), *window = malloc((size_t)P);
    if (!core || !window)
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
    while (rc == CS_OK) {
        /* the fullest rank by the estimate, and the first 8 ranks (one node
         * of every cluster builtin: each local role once) */
        int r = d->sum->fullest_rank, hi = P < 8 ? P - 1 : 7;
        cs_error e2;
        cs_error_clear(&e2);
        int fit = emit_window(d, r, r, core, window, true, &e2);
        if (fit == CS_OK)
            fit = emit_window(d, 0, hi, core, window, true, &e2);
        if (fit == CS_OK)
            break;
        if (fit != CS_ELIMIT) {
            if (err)
                *err = e2;
            rc = fit;
            break;
        }
        int next = d->sum->spread * 2;
        if (next > d->lim.max_channels)
            break; /* the writer reports the limit with the rank and the value */
        doc d2 = *d;
        d2.sum = NULL;
        cs_buf h2 = {0};
        cs_error_clear(&e2);
        if (prepare(&d2, a, opt, &h2, next, &e2) != CS_OK || d2.sum->spread < next) {
            codegen_summary_free(d2.sum);
            free(h2.s);
            break; /* not feasible wider: keep what the estimate chose */
        }
        codegen_summary_free(d->sum);
        *d = d2;
        free(header->s);
        *header = h2;
    }
    free(core);
    free(window);
    return rc;
}

/* The last rank of the window starting at lo: ranks are added while the
 * sends incident to the window and its peers stay within the budget. */
static int window_end(const cg_summary *s, int lo, int hi, long budget, unsigned char *mark)
{
    long used = 0;
    int end = lo;
    memset(mark, 0, (size_t)s->ranks);
    for (int r = lo; r <= hi; r++) {
        long add = mark[r] ? 0 : s->incident[r];
        for (long k = s->rank_link_begin[r]; k < s->rank_link_begin[r + 1]; k++) {
            const cg_link *L = &s->links[s->rank_links[k]];
            int q = L->src == r ? L->dst : L->src;
            if (!mark[q])
                add += s->incident[q]; /* counted twice if two links: still a bound */
        }
        if (r > lo && used + add > budget)
            break;
        used += add;
        mark[r] = 1;
        for (long k = s->rank_link_begin[r]; k < s->rank_link_begin[r + 1]; k++) {
            const cg_link *L = &s->links[s->rank_links[k]];
            mark[L->src] = mark[L->dst] = 1;
        }
        end = r;
    }
    return end;
}

int msccl_xml_write_ranks(const cs_algorithm *a, const cs_topology *t, const cs_msccl_options *opt,
                          int rank_lo, int rank_hi, cs_write_fn write, void *ctx, cs_error *err)
{
    cs_msccl_options dflt;
    msccl_options_default(&dflt);
    if (!opt)
        opt = &dflt;
    if (!a)
        return cs_error_set(err, CS_EINVAL, "algorithm", "no algorithm");
    if (!write)
        return cs_error_set(err, CS_EINVAL, "write", "no write function");
    if (rank_lo < 0 || rank_hi < rank_lo || rank_hi >= a->ranks)
        return cs_error_set(err, CS_EINVAL, "ranks", "ranks %d-%d are not within 0-%d", rank_lo,
                            rank_hi, a->ranks - 1);
    doc d = {.a = a, .t = t, .opt = opt,
             .ndoc_gpus = opt->limit_gpus > 0 ? opt->limit_gpus : rank_hi - rank_lo + 1,
             .write = write,
             .ctx = ctx};
    cs_buf b = {0};
    int rc = prepare(&d, a, opt, &b, 0, err);
    if (rc == CS_OK)
        rc = settle_spread(&d, a, opt, &b, err);
    if (rc == CS_OK)
        rc = put(&d, &b, err);
    unsigned char *core = NULL, *window = NULL;
    if (rc == CS_OK) {
        core = malloc((size_t)a->ranks);
        window = malloc((size_t)a->ranks);
        if (!core || !window)
            rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    for (int lo = rank_lo; lo <= rank_hi && rc == CS_OK;) {
        int hi = window_end(d.sum, lo, rank_hi,
                            opt->window_sends > 0 ? opt->window_sends : WINDOW_INCIDENCE, core);
        rc = emit_window(&d, lo, hi, core, window, false, err);
        lo = hi + 1;
    }
    if (rc == CS_OK) {
        cs_buf_puts(&b, "</algo>\n");
        rc = put(&d, &b, err);
    }
    free(core);
    free(window);
    free(b.s);
    codegen_summary_free(d.sum);
    return rc;
}

static int append(void *ctx, const char *data, size_t len)
{
    cs_buf *b = ctx;
    cs_buf_append(b, data, len);
    return b->failed ? CS_ENOMEM : CS_OK;
}

int msccl_xml_generate_ranks(const cs_algorithm *a, const cs_topology *t,
                             const cs_msccl_options *opt, int rank_lo, int rank_hi, char **out,
                             size_t *len, cs_error *err)
{
    *out = NULL;
    if (len)
        *len = 0;
    cs_buf b = {0};
    int rc = msccl_xml_write_ranks(a, t, opt, rank_lo, rank_hi, append, &b, err);
    if (rc != CS_OK) {
        free(b.s);
        return rc;
    }
    *out = b.s;
    if (len)
        *len = b.len;
    return CS_OK;
}

int msccl_xml_generate(const cs_algorithm *a, const cs_topology *t, const cs_msccl_options *opt,
                       char **out, size_t *len, cs_error *err)
{
    *out = NULL;
    if (len)
        *len = 0;
    if (!a)
        return cs_error_set(err, CS_EINVAL, "algorithm", "no algorithm");
    return msccl_xml_generate_ranks(a, t, opt, 0, a->ranks - 1, out, len, err);
}

/* ---- size ranges for a frontier ------------------------------------------- */

static int cmp_dbl(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* Costs are lines in the size: a + b * bytes. */
typedef struct cost_line {
    double a, b;
} cost_line;

static double line_at(cost_line l, double x)
{
    return l.a + l.b * x;
}

/* The cheapest of lines idx[0..n) at x (ties to the earlier). */
static int cheapest_among(const cost_line *l, const int *idx, int n, double x)
{
    int best = -1;
    double best_cost = 0;
    for (int k = 0; k < n; k++) {
        double c = line_at(l[idx[k]], x);
        if (best < 0 || c < best_cost) {
            best = idx[k];
            best_cost = c;
        }
    }
    return best;
}

/* Sizes where the cheapest of a set can change: 0 and every crossing. */
static int crossings(const cost_line *l, const int *idx, int n, double **out, size_t *nout)
{
    double *x = malloc(((size_t)n * (size_t)n + 2) * sizeof *x);
    if (!x)
        return CS_ENOMEM;
    size_t nx = 0;
    x[nx++] = 0;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            cost_line a = l[idx[i]], b = l[idx[j]];
            if (a.b != b.b) {
                double c = (b.a - a.a) / (a.b - b.b);
                if (c > 0 && c < 9e18)
                    x[nx++] = ceil(c);
            }
        }
    qsort(x, nx, sizeof *x, cmp_dbl);
    *out = x;
    *nout = nx;
    return CS_OK;
}

/* Ranges where each of idx[0..n) is the cheapest among them. */
static int ranges_among(const cost_line *l, const int *idx, int n, cs_byte_range *out)
{
    double *x;
    size_t nx;
    if (crossings(l, idx, n, &x, &nx) != CS_OK)
        return CS_ENOMEM;
    int prev = -1;
    for (size_t k = 0; k < nx; k++) {
        if (k > 0 && x[k] == x[k - 1])
            continue;
        /* the cheapest on [x[k], next) is the cheapest just after x[k] */
        size_t nk = k + 1;
        while (nk < nx && x[nk] == x[k])
            nk++;
        double probe = nk < nx ? (x[k] + x[nk]) / 2 : x[k] * 2 + 1e6;
        int w = cheapest_among(l, idx, n, probe);
        if (w != prev) {
            if (prev >= 0)
                out[prev].max_bytes = (long long)x[k];
            if (!out[w].best) {
                out[w].best = true;
                out[w].min_bytes = (long long)x[k];
            }
            prev = w;
        }
    }
    free(x);
    return CS_OK;
}

static int frontier_lines(const cs_result *r, const cs_topology *t, cost_line **out, int **all,
                          cs_error *err)
{
    int n = r->nalgs;
    *out = malloc((size_t)(n ? n : 1) * sizeof **out);
    *all = malloc((size_t)(n ? n : 1) * sizeof **all);
    if (!*out || !*all) {
        free(*out);
        free(*all);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    for (int i = 0; i < n; i++) {
        double a0 = algorithm_cost_us(r->algs[i], t, 0);
        (*out)[i] = (cost_line){a0, (algorithm_cost_us(r->algs[i], t, 1e9) - a0) / 1e9};
        (*all)[i] = i;
    }
    return CS_OK;
}

int msccl_frontier_ranges(const cs_result *r, const cs_topology *t, cs_byte_range *out,
                          cs_error *err)
{
    return msccl_frontier_ranges_limited(r, t, 0, out, NULL, err);
}

/* The worst slowdown over all sizes of the best of `sub` against the best of
 * `all`: both are lower envelopes of lines, so the ratio is largest at a
 * crossing of some pair, at 0, or for very large sizes. */
static double worst_slowdown(const cost_line *l, const int *sub, int ns, const int *all, int na,
                             const double *probes, size_t np)
{
    double worst = 1;
    for (size_t k = 0; k <= np; k++) {
        double x = k < np ? probes[k] : 1e15;
        double cs = line_at(l[cheapest_among(l, sub, ns, x)], x);
        double ca = line_at(l[cheapest_among(l, all, na, x)], x);
        if (ca > 0 && cs / ca > worst)
            worst = cs / ca;
    }
    return worst;
}

int msccl_frontier_ranges_limited(const cs_result *r, const cs_topology *t, int max_docs,
                                  cs_byte_range *out, int *dropped, cs_error *err)
{
    if (!r || !t || !out)
        return cs_error_set(err, CS_EINVAL, "result", "a result and its topology are needed");
    int n = r->nalgs;
    if (dropped)
        *dropped = 0;
    for (int i = 0; i < n; i++)
        out[i] = (cs_byte_range){0, 0, false};
    if (n == 0)
        return CS_OK;
    cost_line *l;
    int *all;
    int rc = frontier_lines(r, t, &l, &all, err);
    if (rc != CS_OK)
        return rc;
    if (ranges_among(l, all, n, out) != CS_OK) {
        free(l);
        free(all);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    int nw = 0;
    int *win = malloc((size_t)n * sizeof *win), *pick = malloc((size_t)n * sizeof *pick);
    int *best = malloc((size_t)n * sizeof *best);
    double *probes = NULL;
    size_t np = 0;
    if (!win || !pick || !best || crossings(l, all, n, &probes, &np) != CS_OK) {
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
        goto done;
    }
    for (int i = 0; i < n; i++)
        if (out[i].best)
            win[nw++] = i;
    if (max_docs <= 0 || nw <= max_docs)
        goto done;
    /* keep the max_docs winners whose worst slowdown is smallest: every
     * subset when there are few, else drop greedily */
    double best_worst = INFINITY;
    long subsets = 1;
    for (int k = 0; k < max_docs && subsets < 100000; k++)
        subsets = subsets * (nw - k) / (k + 1);
    if (subsets < 100000 && max_docs <= 64) {
        int c[64];
        for (int k = 0; k < max_docs; k++)
            c[k] = k;
        for (;;) {
            for (int k = 0; k < max_docs; k++)
                pick[k] = win[c[k]];
            double w = worst_slowdown(l, pick, max_docs, win, nw, probes, np);
            if (w < best_worst - 1e-12) {
                best_worst = w;
                memcpy(best, pick, (size_t)max_docs * sizeof *pick);
            }
            int k = max_docs - 1;
            while (k >= 0 && c[k] == nw - max_docs + k)
                k--;
            if (k < 0)
                break;
            c[k]++;
            for (int j = k + 1; j < max_docs; j++)
                c[j] = c[j - 1] + 1;
        }
    } else {
        int m = nw;
        memcpy(best, win, (size_t)nw * sizeof *win);
        while (m > max_docs) {
            int drop = 0;
            double dw = INFINITY;
            for (int k = 0; k < m; k++) {
                int q = 0;
                for (int j = 0; j < m; j++)
                    if (j != k)
                        pick[q++] = best[j];
                double w = worst_slowdown(l, pick, m - 1, win, nw, probes, np);
                if (w < dw) {
                    dw = w;
                    drop = k;
                }
            }
            memmove(best + drop, best + drop + 1, (size_t)(m - drop - 1) * sizeof *best);
            m--;
        }
    }
    for (int i = 0; i < n; i++)
        out[i] = (cs_byte_range){0, 0, false};
    if (ranges_among(l, best, max_docs, out) != CS_OK) {
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
        goto done;
    }
    if (dropped)
        *dropped = nw - max_docs;
done:
    free(probes);
    free(win);
    free(pick);
    free(best);
    free(l);
    free(all);
    return rc;
}
