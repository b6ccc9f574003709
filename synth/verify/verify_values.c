/*
 * verify_values.c - the verifier's value replay: walks the sends one chunk at
 * a time and checks causality, contribution sets and the postcondition (see
 * verify.c for the overall design).
 *
 * Combining collectives track, per (chunk, rank), the exact SET of
 * contributions the rank's partial value holds: a P-bit bitset.  Values are
 * reference counted and shared, so a copy shares its source's bitset (an
 * allgather phase costs no bitset work at all), and "a send in step s reads the
 * value from before step s" falls out of taking every snapshot of a step
 * before applying any of its writes.  Untouched ranks and first sends are
 * singletons with no bitset, and a backward liveness pass finds source values
 * that are never read again, so most reductions update a bitset in place.
 *
 * Timed schedules are replayed per chunk in start order with a heap of
 * pending arrivals: a send reads src after every arrival with end_us <=
 * start_us + 1e-6 has been applied.
 *
 * Chunks come in batches gathered by streaming over the columns
 * (send_batches.c).  From 2^20 sends each batch's chunks are split between
 * worker threads, each with its own per-rank state, values and report; the
 * reports are appended in chunk order, so the result does not depend on the
 * thread count.
 */
#include "verify_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- values (combining collectives) ------------------------------------------------- */

static value *value_alloc_raw(vctx *v, bool zero)
{
    value *x = v->free_values;
    if (x) {
        v->free_values = x->next_free;
    } else {
        if (v->nblocks == v->cap_blocks) {
            long cap = v->cap_blocks ? v->cap_blocks * 2 : 256;
            value **b = realloc(v->all_blocks, sizeof *b * (size_t)cap);
            if (!b) {
                v->oom = true;
                return NULL;
            }
            v->all_blocks = b;
            v->cap_blocks = cap;
        }
        x = malloc(sizeof(value) + sizeof(uint64_t) * (size_t)v->words);
        if (!x) {
            v->oom = true;
            return NULL;
        }
        v->all_blocks[v->nblocks++] = x;
    }
    x->next_free = NULL;
    x->refs = 1;
    x->count = 0;
    if (zero)
        memset(x->bits, 0, sizeof(uint64_t) * (size_t)v->words);
    return x;
}


static void value_unref(vctx *v, value *x)
{
    if (x && --x->refs == 0) {
        x->next_free = v->free_values;
        v->free_values = x;
    }
}

/* A partial value: a materialized set, or (v == NULL) the singleton {single}
 * (empty when single < 0).  Untouched ranks and most first sends are
 * singletons, so they cost no bitset at all. */
typedef struct vref {
    value *v;
    int single;
} vref;

static inline bool vref_has(const vref *x, int r)
{
    if (x->v)
        return (x->v->bits[r >> 6] >> (r & 63)) & 1;
    return x->single == r;
}

static inline int vref_count(const vref *x)
{
    return x->v ? x->v->count : x->single >= 0;
}

/* Marks rank r as touched by the current chunk, with its initial value (its
 * own contribution, if it has one). */
static void touch(vctx *v, long g, int r)
{
    if (v->stamp[r] == v->epoch)
        return;
    v->stamp[r] = v->epoch;
    v->val[r] = NULL;
    v->single[r] = vpre(v, g, r) ? r : -1;
    v->wstep[r] = -1;
    v->touched[v->ntouched++] = r;
}

/* A new reference to rank r's current value (a snapshot). */
static vref snapshot(vctx *v, long g, int r)
{
    touch(v, g, r);
    if (v->val[r]) {
        v->val[r]->refs++;
        return (vref){v->val[r], -1};
    }
    return (vref){NULL, v->single[r]};
}

static void vref_release(vctx *v, vref *x)
{
    value_unref(v, x->v);
    x->v = NULL;
}

/* A bitset copy of x that the caller owns (refs 1), reusing x's own when
 * nobody else holds it. */
static value *own_bits(vctx *v, vref *x)
{
    if (x->v && x->v->refs == 1) {
        value *y = x->v;
        x->v = NULL;
        return y;
    }
    value *y = value_alloc_raw(v, x->v == NULL);
    if (!y)
        return NULL;
    if (x->v) {
        memcpy(y->bits, x->v->bits, sizeof(uint64_t) * (size_t)v->words);
        y->count = x->v->count;
        vref_release(v, x);
    } else if (x->single >= 0) {
        y->bits[x->single >> 6] |= (uint64_t)1 << (x->single & 63);
        y->count = 1;
    }
    return y;
}

static int first_common(const vctx *v, const vref *x, const vref *y)
{
    if (!x->v)
        return x->single >= 0 && vref_has(y, x->single) ? x->single : -1;
    if (!y->v)
        return y->single >= 0 && vref_has(x, y->single) ? y->single : -1;
    for (int w = 0; w < v->words; w++) {
        uint64_t c = x->v->bits[w] & y->v->bits[w];
        if (c)
            return w * 64 + __builtin_ctzll(c);
    }
    return -1;
}

static int first_missing(const vctx *v, const vref *x)
{
    for (int r = 0; r < v->P; r++) {
        if (x->v && x->v->bits[r >> 6] == ~(uint64_t)0) {
            r |= 63;
            continue;
        }
        if (!vref_has(x, r))
            return r;
    }
    return -1;
}

static bool vref_equal(const vctx *v, const vref *x, const vref *y)
{
    if (vref_count(x) != vref_count(y))
        return false;
    if (x->v && y->v)
        return x->v == y->v ||
               memcmp(x->v->bits, y->v->bits, sizeof(uint64_t) * (size_t)v->words) == 0;
    if (!x->v)
        return x->single < 0 || vref_has(y, x->single);
    return y->single < 0 || vref_has(x, y->single);
}

/* dst's value := dst's value (+) in, with in consumed.  Reports a double
 * count. */
static void reduce_into(vctx *v, long i, int dst, vref *in)
{
    vref cur = {v->val[dst], v->single[dst]};
    if (vref_count(in) == 0) {
        vref_release(v, in);
        return;
    }
    if (vref_count(&cur) == 0) {
        v->val[dst] = in->v;
        v->single[dst] = in->single;
        return;
    }
    int common = first_common(v, &cur, in);
    if (common >= 0)
        verify_send_problem(v, i, "reduce counts the contribution of rank %d twice (rank %d already "
                     "holds it)", common, dst);
    /* accumulate into whichever side we may write, the larger one preferably */
    vref *big = &cur, *small = in;
    if (in->v && (!cur.v || (in->v->refs == 1 && cur.v->refs != 1))) {
        big = in;
        small = &cur;
    }
    value *acc = own_bits(v, big);
    if (!acc) { /* out of memory: own_bits released nothing; drop the incoming value */
        vref_release(v, in);
        return;
    }
    if (small->v) {
        int cnt = 0;
        for (int w = 0; w < v->words; w++) {
            acc->bits[w] |= small->v->bits[w];
            cnt += __builtin_popcountll(acc->bits[w]);
        }
        acc->count = cnt;
    } else if (small->single >= 0) {
        uint64_t bit = (uint64_t)1 << (small->single & 63);
        if (!(acc->bits[small->single >> 6] & bit)) {
            acc->bits[small->single >> 6] |= bit;
            acc->count++;
        }
    }
    vref_release(v, small);
    v->val[dst] = acc;
    v->single[dst] = -1;
}

/* Applies send r of chunk g carrying `in` (a reference the call consumes) to
 * its dst.  step >= 0 (untimed schedules) enables the same-step write
 * conflict check. */
static void apply_combining(vctx *v, long g, const send_rec *r, vref in, int step)
{
    long i = send_rec_index(r);
    cs_op op = send_rec_op(r);
    int dst = r->dst;
    touch(v, g, dst);
    /* wstep: 2*step + (a copy wrote in that step); -1 when never written */
    int w = v->wstep[dst];
    bool same_step = step >= 0 && w >= 0 && w / 2 == step;
    if (same_step && (op == CS_OP_COPY || (w & 1))) {
        vref cur = {v->val[dst], v->single[dst]};
        if (!vref_equal(v, &cur, &in))
            verify_send_problem(v, i, "rank %d is written more than once in step %d and one of the "
                         "writes is a copy: the result depends on the order", dst, step);
    }
    if (op == CS_OP_COPY) {
        value_unref(v, v->val[dst]);
        v->val[dst] = in.v;
        v->single[dst] = in.single;
    } else {
        reduce_into(v, i, dst, &in);
    }
    if (step >= 0)
        v->wstep[dst] = 2 * step + (op == CS_OP_COPY || (same_step && (w & 1)));
}

/* ---- postconditions ---------------------------------------------------------------- */

enum { POST_ALL, POST_ONE, POST_LIST };

static int post_shape(cs_coll_kind k)
{
    switch (k) {
    case CS_COLL_ALLGATHER: case CS_COLL_BROADCAST: case CS_COLL_ALLREDUCE:
        return POST_ALL;
    case CS_COLL_CUSTOM:
        return POST_LIST;
    default:
        return POST_ONE;
    }
}

static int post_single_rank(const cs_collective *c, int P, long g)
{
    switch (c->kind) {
    case CS_COLL_GATHER: case CS_COLL_REDUCE:
        return c->root;
    case CS_COLL_SCATTER: case CS_COLL_REDUCESCATTER:
        return (int)(g % P);
    case CS_COLL_ALLTOALL:
        return (int)((g / P) % P);
    default:
        return -1;
    }
}

int verify_pre_of(const cs_collective *c, int P, long g)
{
    switch (c->kind) {
    case CS_COLL_ALLGATHER: case CS_COLL_GATHER: case CS_COLL_ALLTOALL:
        return (int)(g % P);
    case CS_COLL_SCATTER: case CS_COLL_BROADCAST:
        return c->root;
    case CS_COLL_REDUCESCATTER: case CS_COLL_REDUCE: case CS_COLL_ALLREDUCE:
        return VERIFY_PRE_ALL;
    default:
        return VERIFY_PRE_ASK;
    }
}

/* The shapes above (and verify_pre_of) restate collective.h's table; make
 * sure they agree with the collective module on a sample, so the two can
 * never silently drift. */
int verify_check_shapes(vctx *v, cs_error *err)
{
    const cs_collective *c = v->coll;
    int shape = post_shape(c->kind);
    if (shape == POST_LIST)
        return CS_OK;
    long gmax = v->G < 70 ? v->G : 70;
    int rmax = v->P < 70 ? v->P : 70;
    for (long g = 0; g < gmax; g++)
        for (int r = 0; r < rmax; r++) {
            bool mine = shape == POST_ALL || post_single_rank(c, v->P, g) == r;
            if (mine != collective_post(c, v->P, v->a->chunks, g, r))
                return cs_error_set(err, CS_EINTERNAL, "collective",
                                    "verifier and collective module disagree on the "
                                    "postcondition of chunk %ld at rank %d", g, r);
            int pre = verify_pre_of(c, v->P, g);
            if (pre != VERIFY_PRE_ASK &&
                (pre == VERIFY_PRE_ALL || pre == r) != collective_pre(c, v->P, v->a->chunks, g, r))
                return cs_error_set(err, CS_EINTERNAL, "collective",
                                    "verifier and collective module disagree on the "
                                    "precondition of chunk %ld at rank %d", g, r);
            if (v->combining && !collective_pre(c, v->P, v->a->chunks, g, r))
                return cs_error_set(err, CS_EINTERNAL, "collective",
                                    "combining collective without a contribution at rank %d", r);
        }
    return CS_OK;
}

static bool holds_plain(const vctx *v, long g, int r)
{
    return v->stamp[r] == v->epoch || vpre(v, g, r);
}

static vref rank_state(const vctx *v, long g, int r)
{
    if (v->stamp[r] == v->epoch)
        return (vref){v->val[r], v->single[r]};
    return (vref){NULL, vpre(v, g, r) ? r : -1};
}

static bool holds_full(const vctx *v, long g, int r)
{
    vref x = rank_state(v, g, r);
    return vref_count(&x) == v->P;
}

static void post_missing(vctx *v, long g, int r)
{
    if (!v->combining) {
        verify_problem(v, "sends", "chunk %ld never reaches rank %d (postcondition)", g, r);
        return;
    }
    vref x = rank_state(v, g, r);
    if (v->stamp[r] != v->epoch && x.single == r) {
        verify_problem(v, "sends", "chunk %ld at rank %d holds only its own contribution, not the "
                "full reduction (postcondition)", g, r);
        return;
    }
    int miss = first_missing(v, &x);
    verify_problem(v, "sends", "chunk %ld at rank %d lacks the contribution of rank %d (holds %d of %d; "
            "postcondition)", g, r, miss, vref_count(&x), v->P);
}

/* `received` is, for non-combining kinds, how many non-source ranks received
 * chunk g. */
static void check_post(vctx *v, long g, long received)
{
    int shape = post_shape(v->coll->kind);
    if (shape == POST_ONE) {
        int r = post_single_rank(v->coll, v->P, g);
        bool ok = v->combining ? holds_full(v, g, r) : holds_plain(v, g, r);
        if (!ok)
            post_missing(v, g, r);
        return;
    }
    if (shape == POST_LIST) {
        for (long k = v->post_begin[g]; k < v->post_begin[g + 1]; k++) {
            int r = v->post_rank[k];
            if (!holds_plain(v, g, r))
                post_missing(v, g, r);
        }
        return;
    }
    /* every rank */
    long full;
    if (v->combining) {
        full = 0;
        for (int k = 0; k < v->ntouched; k++)
            full += v->touched[k] < v->P && holds_full(v, g, v->touched[k]);
        if (v->P == 1)
            full += 1 - v->ntouched;
    } else {
        full = received + 1; /* builtin non-combining ALL kinds have one source */
    }
    if (full >= v->P)
        return;
    long missing = v->P - full;
    if (verify_reasons_full(v)) {
        v->rep->nproblems += missing;
        return;
    }
    long reported = 0;
    for (int r = 0; r < v->P && reported < missing; r++) {
        bool ok = v->combining ? holds_full(v, g, r) : holds_plain(v, g, r);
        if (!ok) {
            if (verify_reasons_full(v)) {
                v->rep->nproblems += missing - reported;
                return;
            }
            post_missing(v, g, r);
            reported++;
        }
    }
}

/* ---- the value replay -------------------------------------------------------------- */

/* Each chunk's sends come as records gathered by streaming over the columns
 * (send_batches.c), so the replay reads no column at random. */

typedef struct arrival {
    double end;
    long seq;           /* order among equal ends: the send's position */
    const send_rec *send;
    vref val;           /* the snapshot carried */
} arrival;

static void replay_plain_untimed(vctx *v, long g, const send_rec *recs, long len, long *received)
{
    for (long k = 0; k < len; k++) {
        const send_rec *r = &recs[k];
        int src = r->src, dst = r->dst, step = (int)r->t0;
        if (!(vpre(v, g, src) ||
              (v->stamp[src] == v->epoch && v->avail[src] <= step)))
            verify_send_problem(v, send_rec_index(r), "%s does not hold chunk %ld before "
                                "step %d", verify_node_name(v, src).s, g, step);
        if (v->stamp[dst] != v->epoch && !vpre(v, g, dst)) {
            v->stamp[dst] = v->epoch;
            v->avail[dst] = step + 1;
            *received += dst < v->P;   /* a switch node is no rank of the postcondition */
        }
    }
}

static void replay_plain_timed(vctx *v, long g, const send_rec *recs, long len, long *received)
{
    const cs_algorithm *a = v->a;
    for (long k = 0; k < len; k++) {
        const send_rec *r = &recs[k];
        int src = r->src, dst = r->dst;
        double start = algorithm_time_value(a, r->t0);
        if (!(vpre(v, g, src) ||
              (v->stamp[src] == v->epoch && v->avail[src] <= start + VERIFY_TIME_EPS))) {
            if (v->stamp[src] == v->epoch)
                verify_send_problem(v, send_rec_index(r), "%s only has chunk %ld from "
                                    "%.3f us", verify_node_name(v, src).s, g, v->avail[src]);
            else
                verify_send_problem(v, send_rec_index(r), "%s does not hold chunk %ld",
                                    verify_node_name(v, src).s, g);
        }
        if (vpre(v, g, dst))
            continue;
        double end = algorithm_time_value(a, r->t1);
        if (v->stamp[dst] != v->epoch) {
            v->stamp[dst] = v->epoch;
            v->avail[dst] = end;
            *received += dst < v->P;   /* a switch node is no rank of the postcondition */
        } else if (end < v->avail[dst]) {
            v->avail[dst] = end;
        }
    }
}

static bool is_post_combining(const vctx *v, long g, int r)
{
    if (r >= v->P)
        return false;   /* switch nodes have no postcondition */
    return post_shape(v->coll->kind) == POST_ALL || post_single_rank(v->coll, v->P, g) == r;
}

static void live_init(vctx *v, long g, int r)
{
    if (v->lstamp[r] != v->epoch) {
        v->lstamp[r] = v->epoch;
        v->live[r] = is_post_combining(v, g, r);
    }
}

/* Backward liveness over one chunk's sends: dead[k] says that once its step's
 * snapshots are taken, send k's src value is never read again (no later send
 * from src, no later reduce into it before a copy overwrites it, and no
 * postcondition on it).  Dropping such values leaves most snapshots with a
 * single owner, so reductions update bitsets in place instead of copying. */
static void mark_dead_sources(vctx *v, long g, const send_rec *recs, long len,
                              unsigned char *dead)
{
    long end = len;
    while (end > 0) {
        uint32_t step = recs[end - 1].t0;
        long k = end;
        while (k > 0 && recs[k - 1].t0 == step)
            k--;
        for (long j = k; j < end; j++) {
            int d = recs[j].dst;
            live_init(v, g, d);
            if (send_rec_op(&recs[j]) == CS_OP_COPY)
                v->live[d] = 0;
        }
        for (long j = k; j < end; j++)
            if (send_rec_op(&recs[j]) == CS_OP_REDUCE)
                v->live[recs[j].dst] = 1;
        for (long j = k; j < end; j++) {
            int a = recs[j].src;
            live_init(v, g, a);
            dead[j] = !v->live[a];
        }
        for (long j = k; j < end; j++)
            v->live[recs[j].src] = 1;
        end = k;
    }
}

static int replay_combining_untimed(vctx *v, long g, const send_rec *recs, long len, vref *snap,
                                    unsigned char *dead)
{
    mark_dead_sources(v, g, recs, len, dead);
    long k = 0;
    while (k < len) {
        uint32_t step = recs[k].t0;
        long end = k;
        while (end < len && recs[end].t0 == step)
            end++;
        for (long j = k; j < end; j++)
            snap[j - k] = snapshot(v, g, recs[j].src);
        for (long j = k; j < end; j++) {
            if (!dead[j])
                continue;
            int a = recs[j].src;
            value_unref(v, v->val[a]);
            v->val[a] = NULL;
            v->single[a] = -1;
        }
        for (long j = k; j < end; j++)
            apply_combining(v, g, &recs[j], snap[j - k], (int)step);
        if (v->oom)
            return CS_ENOMEM;
        k = end;
    }
    return CS_OK;
}

static bool arrival_before(const arrival *x, const arrival *y)
{
    return x->end < y->end || (x->end == y->end && x->seq < y->seq);
}

static void heap_push(arrival *h, long *n, arrival x)
{
    long i = (*n)++;
    while (i > 0) {
        long p = (i - 1) / 2;
        if (!arrival_before(&x, &h[p]))
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = x;
}

static arrival heap_pop(arrival *h, long *n)
{
    arrival top = h[0];
    arrival last = h[--(*n)];
    long i = 0;
    for (;;) {
        long c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && arrival_before(&h[c + 1], &h[c]))
            c++;
        if (!arrival_before(&h[c], &last))
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0)
        h[i] = last;
    return top;
}

static int replay_combining_timed(vctx *v, long g, const send_rec *recs, long len, arrival *heap)
{
    long nh = 0;
    for (long k = 0; k < len; k++) {
        const send_rec *r = &recs[k];
        double start = algorithm_time_value(v->a, r->t0);
        while (nh > 0 && heap[0].end <= start + VERIFY_TIME_EPS) {
            arrival x = heap_pop(heap, &nh);
            apply_combining(v, g, x.send, x.val, -1);
        }
        heap_push(heap, &nh, (arrival){algorithm_time_value(v->a, r->t1), k, r,
                                       snapshot(v, g, r->src)});
    }
    while (nh > 0) {
        arrival x = heap_pop(heap, &nh);
        apply_combining(v, g, x.send, x.val, -1);
    }
    return v->oom ? CS_ENOMEM : CS_OK;
}

/* A chunk's records in replay order: (step, index), or timed (start, end,
 * index) through the time ranks.  They usually are in it already. */
static inline bool rec_after(const vctx *v, const send_rec *x, const send_rec *y)
{
    if (v->timed) {
        uint32_t a = v->trank[x->t0], b = v->trank[y->t0];
        if (a != b)
            return a > b;
        a = v->trank[x->t1];
        b = v->trank[y->t1];
        if (a != b)
            return a > b;
    } else if (x->t0 != y->t0) {
        return x->t0 > y->t0;
    }
    return send_rec_index(x) > send_rec_index(y);
}

static int rec_qsort(const void *pa, const void *pb, void *ctx)
{
    const send_rec *x = pa, *y = pb;
    return rec_after(ctx, x, y) ? 1 : rec_after(ctx, y, x) ? -1 : 0;
}

static void order_chunk(const vctx *v, send_rec *recs, long len)
{
    long descents = 0;
    for (long k = 1; k < len; k++)
        descents += rec_after(v, &recs[k - 1], &recs[k]);
    if (descents == 0)
        return;
    if (len > 32 && descents > 16) {
        qsort_r(recs, (size_t)len, sizeof *recs, rec_qsort, (void *)v);
        return;
    }
    for (long k = 1; k < len; k++) {
        send_rec x = recs[k];
        long j = k;
        while (j > 0 && rec_after(v, &recs[j - 1], &x)) {
            recs[j] = recs[j - 1];
            j--;
        }
        recs[j] = x;
    }
}

/* The replay state of one thread: a vctx of its own (its report, per-rank
 * state and values) over the shared read-only fields. */
typedef struct replay_worker {
    vctx v;
    cs_verify_report rep;
    unsigned char *dead;
    void *scratch;              /* snapshots (untimed) or the arrival heap (timed) */
    long scratch_len;
    const send_batch *batch;
    uint32_t j0, j1;            /* batch entries to replay */
    int thread;
    int rc;
} replay_worker;

static int worker_init(replay_worker *w, const vctx *v)
{
    int P = v->N;   /* ranks and switch nodes */
    memset(w, 0, sizeof *w);
    w->v = *v;
    vctx *x = &w->v;
    x->rep = &w->rep;
    w->rep.ok = true;
    x->first_field[0] = '\0';
    x->epoch = 0;
    x->stamp = calloc((size_t)P, sizeof(unsigned));
    x->touched = malloc(sizeof(int) * (size_t)P);
    x->avail = NULL;
    x->val = NULL;
    x->single = NULL;
    x->lstamp = NULL;
    x->live = NULL;
    x->wstep = NULL;
    x->free_values = NULL;
    x->all_blocks = NULL;
    x->nblocks = x->cap_blocks = 0;
    x->oom = false;
    if (!x->combining) {
        x->avail = malloc(sizeof(double) * (size_t)P);
    } else {
        x->val = calloc((size_t)P, sizeof(value *));
        x->single = malloc(sizeof(int) * (size_t)P);
        x->lstamp = calloc((size_t)P, sizeof(unsigned));
        x->live = malloc((size_t)P);
        x->wstep = malloc(sizeof(int) * (size_t)P);
    }
    bool ok = x->stamp && x->touched &&
              (x->combining ? x->val && x->single && x->lstamp && x->live && x->wstep
                            : x->avail != NULL);
    return ok ? CS_OK : CS_ENOMEM;
}

static void worker_free(replay_worker *w)
{
    vctx *x = &w->v;
    free(x->stamp);
    free(x->touched);
    free(x->avail);
    free(x->val);
    free(x->single);
    free(x->lstamp);
    free(x->live);
    free(x->wstep);
    for (long b = 0; b < x->nblocks; b++)
        free(x->all_blocks[b]);
    free(x->all_blocks);
    free(w->dead);
    free(w->scratch);
}

/* Room for a chunk of len sends in the combining scratch. */
static int worker_room(replay_worker *w, long len)
{
    if (!w->v.combining || len <= w->scratch_len)
        return CS_OK;
    size_t each = w->v.timed ? sizeof(arrival) : sizeof(vref);
    void *s = realloc(w->scratch, each * (size_t)len);
    unsigned char *d = s ? realloc(w->dead, (size_t)len) : NULL;
    if (s)
        w->scratch = s;
    if (!s || !d)
        return CS_ENOMEM;
    w->dead = d;
    w->scratch_len = len;
    return CS_OK;
}

/* Replays chunk g (records recs[0..len)) and checks its postcondition. */
static int replay_chunk(replay_worker *w, long g, send_rec *recs, long len)
{
    vctx *v = &w->v;
    int rc = worker_room(w, len);
    if (rc != CS_OK)
        return rc;
    v->epoch++;
    if (v->epoch == 0) { /* wrapped: clear stamps once */
        memset(v->stamp, 0, sizeof(unsigned) * (size_t)v->N);
        if (v->lstamp)
            memset(v->lstamp, 0, sizeof(unsigned) * (size_t)v->N);
        v->epoch = 1;
    }
    v->ntouched = 0;
    v->pre_g = g;
    v->pre_one = verify_pre_of(v->coll, v->P, g);
    long received = 0;
    order_chunk(v, recs, len);
    if (!v->combining) {
        if (v->timed)
            replay_plain_timed(v, g, recs, len, &received);
        else
            replay_plain_untimed(v, g, recs, len, &received);
    } else {
        rc = v->timed ? replay_combining_timed(v, g, recs, len, w->scratch)
                      : replay_combining_untimed(v, g, recs, len, w->scratch, w->dead);
        if (rc != CS_OK)
            return rc;
    }
    check_post(v, g, received);
    if (v->combining) {
        for (int j = 0; j < v->ntouched; j++)
            value_unref(v, v->val[v->touched[j]]);
        v->ntouched = 0;
    }
    return CS_OK;
}

static void *worker_run(void *arg)
{
    replay_worker *w = arg;
    const send_batch *b = w->batch;
    for (uint32_t j = w->j0; j < w->j1 && w->rc == CS_OK; j++) {
        uint32_t len;
        send_rec *recs = send_batch_recs(b, j, &len);
        /* the simulator's links first: the replay reorders the records */
        if (w->v.sim)
            w->rc = sim_links_chunk(w->v.sim, w->thread, b, j);
        if (w->rc == CS_OK)
            w->rc = replay_chunk(w, send_batch_chunk(b, j), recs, len);
    }
    return NULL;
}

/* Appends a worker's problems to the main report, in order. */
static void merge_report(vctx *v, replay_worker *w)
{
    cs_verify_report *from = &w->rep, *to = v->rep;
    if (from->nproblems == 0)
        return;
    if (to->nproblems == 0)
        snprintf(v->first_field, sizeof v->first_field, "%s", w->v.first_field);
    to->ok = false;
    to->nproblems += from->nproblems;
    for (int k = 0; k < from->nreasons && to->nreasons < CS_VERIFY_MAX_REASONS; k++)
        memcpy(to->reasons[to->nreasons++], from->reasons[k], sizeof to->reasons[0]);
    memset(from, 0, sizeof *from);
    from->ok = true;
    w->v.first_field[0] = '\0';
}

/* ---- the dense replay ----------------------------------------------------------------
 * For non-combining untimed collectives with few enough (chunk, node) pairs,
 * one walk over the sends in processing order (step, index) with a byte (or
 * two) per pair: the first step from which the node holds the chunk.  In
 * that order every send of an earlier step has been applied when a send is
 * checked, which is exactly what the chunk-by-chunk replay sees (it takes
 * each chunk's sends in (step, index) order), so "src holds the chunk
 * before the send's step" and the postcondition come out the same.  It
 * needs no batches (no per-send gathering: on a million-send composition
 * a third of the verifier's time), but it finds problems in another order,
 * so it only answers "no problem": at the first one it stops, and the
 * chunk-by-chunk replay runs and reports as always. */
#define VERIFY_DENSE_MAX (1L << 22)


bool verify_replay_dense_fits(const vctx *v)
{
    if (v->general || v->timed || v->sim || v->coll->kind == CS_COLL_CUSTOM || v->G <= 0)
        return false;
    /* combining: only where the chunk-by-chunk replay runs on one thread
     * (send_pass_threads: from 2^20 sends it splits chunks between up to 4
     * and was faster) and the sets could take at most 2^22 words: the walk
     * visits (chunk, node) pairs all over, the general replay one chunk at a
     * time, so with 2^24 words of sets (hook-dgx1 ring 128 nodes, 1024
     * ranks, reducescatter or reduce of 1024 chunks, 2^20 sends) the walk
     * took 0.13-0.18 s against 0.09-0.10 s; within both limits it is
     * 1.5-6x faster (bench/verify_replay.sh) */
    if (v->combining)
        return v->G * v->N <= VERIFY_DENSE_MAX && v->S < 0x7ffe &&
               send_pass_threads(v->n) == 1 && v->G * v->N * (long)v->words <= (1L << 22);
    return v->G * v->N <= VERIFY_DENSE_MAX && v->S < 0xfffe;
}

static inline bool dense_valid(const vctx *v, long i)
{
    return v->all_valid || ((v->valid[i >> 3] >> (i & 7)) & 1);
}

/* The walk with arrival steps of type T (NONE: never); true when clean. */
#define DENSE_WALK(T, NONE)                                                             \
    do {                                                                                \
        T *arr = malloc(sizeof(T) * (size_t)(G * N));                                   \
        if (!arr)                                                                       \
            break;                                                                      \
        memset(arr, 0xff, sizeof(T) * (size_t)(G * N));                                 \
        clean = true;                                                                   \
        for (long k = 0; k < n && clean; k++) {                                         \
            long i = ord ? ord[k] : k;                                                  \
            if (!dense_valid(v, i))                                                     \
                continue;                                                               \
            long g = algorithm_send_chunk(a, i);                                        \
            int src = algorithm_send_src(a, i), dst = algorithm_send_dst(a, i);         \
            int s = algorithm_send_step(a, i);                                          \
            if (src != pre[g] && !(arr[g * N + src] != (NONE) && arr[g * N + src] <= s)) \
                clean = false;                                                          \
            T *x = &arr[g * N + dst];                                                   \
            if (dst != pre[g] && (*x == (NONE) || s + 1 < *x))                          \
                *x = (T)(s + 1);                                                        \
        }                                                                               \
        for (long g = 0; g < G && clean; g++) {                                         \
            const T *row = arr + g * N;                                                 \
            if (shape == 0) {                                                           \
                for (int r = 0; r < P && clean; r++)                                    \
                    clean = r == pre[g] || row[r] != (NONE);                            \
            } else {                                                                    \
                int r = post_single_rank(v->coll, P, g);                                \
                clean = r == pre[g] || row[r] != (NONE);                                \
            }                                                                           \
        }                                                                               \
        free(arr);                                                                      \
        done = true;                                                                    \
    } while (0)

/* True when the dense replay ran and found nothing (the chunk-by-chunk replay
 * would find nothing either); false to run that replay (a problem, or no
 * memory). */
static bool replay_dense_clean(const vctx *v)
{
    const cs_algorithm *a = v->a;
    const uint32_t *ord = v->ord;
    long G = v->G, n = v->n;
    int N = v->N, P = v->P, shape = post_shape(v->coll->kind) == POST_ALL ? 0 : 1;
    /* each chunk's one holder before any send (builtin non-combining kinds) */
    int *pre = malloc(sizeof *pre * (size_t)G);
    if (!pre)
        return false;
    for (long g = 0; g < G; g++)
        pre[g] = verify_pre_of(v->coll, P, g);
    bool clean = false, done = false;
    if (v->S < 0xfe)
        DENSE_WALK(uint8_t, 0xff);
    else
        DENSE_WALK(uint16_t, 0xffff);
    free(pre);
    return done && clean;
}

/* ---- the dense replay of combining collectives -----------------------------------------
 * The same walk for reducescatter, reduce and allreduce (untimed, builtin):
 * per (chunk, node) the exact contribution set and the step of its last
 * write (2 step + 1 when a copy wrote in that step, as apply_combining
 * keeps it).  A set is a code: a rank's singleton, empty, or a P-bit
 * bitset in a pool, shared by reference count (a copy shares, a reduce
 * writes in place when it holds the only reference), so a schedule pays
 * bitsets only where reductions made them.  Step by step in processing
 * order: first every read of the step (a reference to the source's set,
 * so every read sees the value from before the step, as the
 * chunk-by-chunk replay's snapshots do), then the writes in order with
 * apply_combining's checks: a copy replaces; a reduce into a set sharing a
 * contribution is a double count; a second write of one node in a step
 * where one of them is a copy must carry the same set.  The postcondition:
 * the full set at every rank (allreduce) or at the one rank of the chunk.
 * So it answers exactly what the general replay does about the same sends;
 * like the plain walk it only answers "no problem", and at the first one
 * the chunk-by-chunk replay runs and reports. */
#define COMB_NONE 0xffffu       /* ws: never written, the node's own contribution */
#define COMB_EMPTY 0xffffffffu  /* code: no contribution */
#define COMB_ONE 0x80000000u    /* code: COMB_ONE | r, rank r's alone; else a pool set */

typedef struct comb_walk {
    const vctx *v;
    long G;
    int N, P, W;
    uint32_t *val;              /* G N codes (where ws != COMB_NONE) */
    uint16_t *ws;               /* G N: last write (2 step + copy), COMB_NONE */
    uint64_t *pool;             /* sets, W words each */
    uint32_t *refs;             /* per set */
    uint32_t *free_ids;
    long nsets, cap_sets, nfree;
    uint32_t *in;               /* per send of the step: the set it carries */
    long cap;
    bool oom;
} comb_walk;

static void comb_free(comb_walk *c)
{
    free(c->val);
    free(c->ws);
    free(c->pool);
    free(c->refs);
    free(c->free_ids);
    free(c->in);
}

static uint32_t comb_code(const comb_walk *c, long x, int r)
{
    if (c->ws[x] != COMB_NONE)
        return c->val[x];
    return r < c->P ? COMB_ONE | (uint32_t)r : COMB_EMPTY;
}

static bool comb_is_set(uint32_t code)
{
    return !(code & COMB_ONE);
}

static void comb_ref(comb_walk *c, uint32_t code)
{
    if (comb_is_set(code))
        c->refs[code]++;
}

static void comb_unref(comb_walk *c, uint32_t code)
{
    if (comb_is_set(code) && --c->refs[code] == 0)
        c->free_ids[c->nfree++] = code;
}

/* A new set (refs 1, words zero), or COMB_EMPTY when memory runs out. */
static uint32_t comb_new(comb_walk *c)
{
    uint32_t id;
    if (c->nfree > 0) {
        id = c->free_ids[--c->nfree];
    } else {
        if (c->nsets == c->cap_sets) {
            long cap = c->cap_sets ? c->cap_sets * 2 : 1024;
            if (cap >= (long)COMB_ONE) {
                c->oom = true;
                return COMB_EMPTY;
            }
            uint64_t *p = realloc(c->pool, sizeof *p * (size_t)(cap * c->W));
            if (p)
                c->pool = p;
            uint32_t *r = realloc(c->refs, sizeof *r * (size_t)cap);
            if (r)
                c->refs = r;
            uint32_t *f = realloc(c->free_ids, sizeof *f * (size_t)cap);
            if (f)
                c->free_ids = f;
            if (!p || !r || !f) {
                c->oom = true;
                return COMB_EMPTY;
            }
            c->cap_sets = cap;
        }
        id = (uint32_t)c->nsets++;
    }
    c->refs[id] = 1;
    memset(c->pool + (long)id * c->W, 0, sizeof(uint64_t) * (size_t)c->W);
    return id;
}

/* Word w of a code's set. */
static uint64_t comb_word(const comb_walk *c, uint32_t code, int w)
{
    if (code == COMB_EMPTY)
        return 0;
    if (!comb_is_set(code)) {
        int r = (int)(code & ~COMB_ONE);
        return r >> 6 == w ? (uint64_t)1 << (r & 63) : 0;
    }
    return c->pool[(long)code * c->W + w];
}

static bool comb_equal(const comb_walk *c, uint32_t a, uint32_t b)
{
    if (a == b)
        return true;
    for (int w = 0; w < c->W; w++)
        if (comb_word(c, a, w) != comb_word(c, b, w))
            return false;
    return true;
}

/* dst's set (code *cur) := *cur (+) in; false on a double count. */
static bool comb_reduce(comb_walk *c, uint32_t *cur, uint32_t in)
{
    if (in == COMB_EMPTY)
        return true;
    if (*cur == COMB_EMPTY) {
        comb_ref(c, in);
        *cur = in;
        return true;
    }
    uint32_t acc = *cur;
    if (!comb_is_set(acc) || c->refs[acc] > 1) {
        uint32_t n = comb_new(c);
        if (c->oom)
            return false;
        for (int w = 0; w < c->W; w++)
            c->pool[(long)n * c->W + w] = comb_word(c, acc, w);
        comb_unref(c, acc);
        acc = n;
    }
    uint64_t *bits = c->pool + (long)acc * c->W;
    *cur = acc;
    if (!comb_is_set(in)) {
        int r = (int)(in & ~COMB_ONE);
        uint64_t bit = (uint64_t)1 << (r & 63);
        if (bits[r >> 6] & bit)
            return false;
        bits[r >> 6] |= bit;
        return true;
    }
    const uint64_t *add = c->pool + (long)in * c->W;
    for (int w = 0; w < c->W; w++) {
        if (bits[w] & add[w])
            return false;   /* a contribution counted twice */
        bits[w] |= add[w];
    }
    return true;
}

/* One step's sends ord[k0..k1): true when none shows a problem. */
static bool comb_step(comb_walk *c, const uint32_t *ord, long k0, long k1, int step)
{
    const vctx *v = c->v;
    const cs_algorithm *a = v->a;
    int N = c->N;
    if (k1 - k0 > c->cap) {
        long cap = c->cap ? c->cap : 1024;
        while (cap < k1 - k0)
            cap *= 2;
        uint32_t *in = realloc(c->in, sizeof *in * (size_t)cap);
        if (!in)
            return false;
        c->in = in;
        c->cap = cap;
    }
    for (long k = k0; k < k1; k++) {
        long i = ord ? ord[k] : k;
        c->in[k - k0] = COMB_EMPTY;
        if (!dense_valid(v, i))
            continue;
        int src = algorithm_send_src(a, i);
        uint32_t code = comb_code(c, algorithm_send_chunk(a, i) * N + src, src);
        comb_ref(c, code);
        c->in[k - k0] = code;
    }
    bool ok = true;
    for (long k = k0; k < k1 && ok; k++) {
        long i = ord ? ord[k] : k;
        if (!dense_valid(v, i))
            continue;
        int dst = algorithm_send_dst(a, i);
        long x = algorithm_send_chunk(a, i) * N + dst;
        cs_op op = algorithm_send_op(a, i);
        uint32_t in = c->in[k - k0];
        unsigned w = c->ws[x];
        uint32_t cur = comb_code(c, x, dst);
        bool same_step = w != COMB_NONE && (int)(w / 2) == step;
        if (same_step && (op == CS_OP_COPY || (w & 1)) && !comb_equal(c, cur, in))
            ok = false;
        if (op == CS_OP_COPY) {
            comb_ref(c, in);
            comb_unref(c, cur);
            cur = in;
        } else if (ok) {
            ok = comb_reduce(c, &cur, in);
        }
        c->val[x] = cur;
        c->ws[x] = (uint16_t)(2 * step + (op == CS_OP_COPY || (same_step && (w & 1))));
    }
    for (long k = k0; k < k1; k++)
        comb_unref(c, c->in[k - k0]);
    return ok && !c->oom;
}

/* The set at pair x (rank r) holds every contribution. */
static bool comb_full(const comb_walk *c, long x, int r)
{
    uint32_t code = comb_code(c, x, r);
    for (int w = 0; w < c->W; w++) {
        int bits = c->P - 64 * w;
        uint64_t want = bits >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << bits) - 1;
        if (comb_word(c, code, w) != want)
            return false;
    }
    return true;
}

static bool replay_dense_combining_clean(const vctx *v)
{
    comb_walk c;
    memset(&c, 0, sizeof c);
    c.v = v;
    c.G = v->G;
    c.N = v->N;
    c.P = v->P;
    c.W = v->words;
    long pairs = c.G * c.N;
    c.val = malloc(sizeof *c.val * (size_t)pairs);
    c.ws = malloc(sizeof *c.ws * (size_t)pairs);
    bool clean = c.val && c.ws;
    if (clean)
        memset(c.ws, 0xff, sizeof *c.ws * (size_t)pairs);
    const cs_algorithm *a = v->a;
    const uint32_t *ord = v->ord;
    long n = v->n;
    for (long k0 = 0; k0 < n && clean;) {
        int step = algorithm_send_step(a, ord ? ord[k0] : k0);
        long k1 = k0 + 1;
        while (k1 < n && algorithm_send_step(a, ord ? ord[k1] : k1) == step)
            k1++;
        clean = comb_step(&c, ord, k0, k1, step);
        k0 = k1;
    }
    int shape = post_shape(v->coll->kind);
    for (long g = 0; g < c.G && clean; g++) {
        if (shape == POST_ALL) {
            for (int r = 0; r < c.P && clean; r++)
                clean = comb_full(&c, g * c.N + r, r);
        } else {
            int r = post_single_rank(v->coll, c.P, g);
            clean = comb_full(&c, g * c.N + r, r);
        }
    }
    comb_free(&c);
    return clean;
}

int verify_replay_values(vctx *v, cs_error *err)
{
    if (verify_replay_dense_fits(v) &&
        (v->combining ? replay_dense_combining_clean(v) : replay_dense_clean(v)))
        return CS_OK;

    send_batches sb;
    int rc = send_batches_init(&sb, v->a, v->all_valid ? NULL : v->valid, v->timed);
    bool sparse = rc == CS_OK && !sb.begin;
    int nthreads = sparse ? 1 : send_pass_threads(v->n);
    replay_worker *w = calloc((size_t)nthreads, sizeof *w);
    if (rc == CS_OK && !w)
        rc = CS_ENOMEM;
    int made = 0;
    for (; rc == CS_OK && made < nthreads; made++) {
        rc = worker_init(&w[made], v);
        w[made].thread = made;
    }
    if (rc == CS_OK && v->sim)
        rc = sim_links_init(v->sim, v->a, v->trank, nthreads, &sb);
    long next_g = 0;   /* sparse: chunks without sends still have postconditions */
    send_batch b;
    while (rc == CS_OK && (rc = send_batches_next(&sb, &b)) == CS_OK) {
        uint32_t entries = b.g1 - b.g0;
        if (v->sim && (rc = sim_links_batch(v->sim, &b)) != CS_OK)
            break;
        if (sparse) {
            for (uint32_t j = 0; j < entries && rc == CS_OK; j++) {
                long g = send_batch_chunk(&b, j);
                for (; next_g < g && rc == CS_OK; next_g++)
                    rc = replay_chunk(&w[0], next_g, NULL, 0);
                uint32_t len;
                send_rec *recs = send_batch_recs(&b, j, &len);
                if (rc == CS_OK && v->sim)
                    rc = sim_links_chunk(v->sim, 0, &b, j);
                if (rc == CS_OK)
                    rc = replay_chunk(&w[0], g, recs, len);
                next_g = g + 1;
            }
            merge_report(v, &w[0]);
            if (rc == CS_OK && v->sim)
                sim_links_batch_done(v->sim, &sb, &b);
            continue;
        }
        /* split the batch's chunks by their sends */
        long total = (long)b.begin[entries] - b.begin[0];
        uint32_t j = 0;
        for (int t = 0; t < nthreads; t++) {
            w[t].batch = &b;
            w[t].j0 = j;
            long goal = b.begin[0] + total * (t + 1) / nthreads;
            while (j < entries && (t == nthreads - 1 || b.begin[j + 1] <= goal))
                j++;
            w[t].j1 = t == nthreads - 1 ? entries : j;
        }
        pthread_t th[4];
        int started = 0;
        for (int t = 1; t < nthreads; t++) {
            if (pthread_create(&th[t], NULL, worker_run, &w[t]) != 0)
                break;
            started = t;
        }
        worker_run(&w[0]);
        for (int t = started + 1; t < nthreads; t++)
            worker_run(&w[t]);   /* threads that could not start: run here */
        for (int t = 1; t <= started; t++)
            pthread_join(th[t], NULL);
        for (int t = 0; t < nthreads; t++) {
            if (rc == CS_OK)
                rc = w[t].rc;
            merge_report(v, &w[t]);
        }
        if (rc == CS_OK && v->sim)
            sim_links_batch_done(v->sim, &sb, &b);
    }
    if (rc == SEND_BATCHES_DONE) {
        rc = v->sim ? sim_links_finish(v->sim, &sb) : CS_OK;
        for (; sparse && next_g < v->G && rc == CS_OK; next_g++)
            rc = replay_chunk(&w[0], next_g, NULL, 0);
        if (sparse)
            merge_report(v, &w[0]);
    }
    for (int t = 0; t < made; t++)
        worker_free(&w[t]);
    free(w);
    send_batches_free(&sb);
    if (rc != CS_OK)
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory replaying %ld sends", v->n);
    return CS_OK;
}

int verify_build_custom_post(vctx *v, cs_error *err)
{
    const cs_collective *c = v->coll;
    v->post_begin = calloc((size_t)v->G + 2, sizeof(long));
    v->post_rank = malloc(sizeof(int) * (size_t)(c->npost > 0 ? c->npost : 1));
    if (!v->post_begin || !v->post_rank)
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
    for (int k = 0; k < c->npost; k++) {
        long g = c->post[2 * k];
        if (g < 0 || g >= v->G || c->post[2 * k + 1] < 0 || c->post[2 * k + 1] >= v->P)
            return cs_error_set(err, CS_EINVAL, "collective.post", "post[%d] out of range", k);
        v->post_begin[g + 1]++;
    }
    for (long g = 0; g < v->G; g++)
        v->post_begin[g + 1] += v->post_begin[g];
    long *fill = malloc(sizeof(long) * (size_t)(v->G + 1));
    if (!fill)
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
    memcpy(fill, v->post_begin, sizeof(long) * (size_t)(v->G + 1));
    for (int k = 0; k < c->npost; k++)
        v->post_rank[fill[c->post[2 * k]]++] = c->post[2 * k + 1];
    free(fill);
    return CS_OK;
}

