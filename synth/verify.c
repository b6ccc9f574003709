/*
 * verify.c - replays an algorithm against its topology and collective and
 * says, send by send, what is wrong with it (see verify.h for the checks).
 *
 * Scale drives the design: TACOS schedules on thousands of ranks have tens of
 * millions of sends, so nothing here is G x P or G x P x P.  Sends are
 * bucketed twice with linear-time sorts: by step (for the per-step bandwidth
 * check) and then, stably, by chunk, so the value replay walks one chunk at a
 * time in step order and needs per-rank state only for the chunk at hand.
 * Per-rank state is stamped with the chunk's epoch instead of being cleared.
 *
 * Combining collectives track, per (chunk, rank), the exact SET of
 * contributions the rank's partial value holds: a P-bit bitset.  Values are
 * immutable and reference counted, so a copy shares its source's bitset (an
 * allgather phase costs no bitset work at all), a reduce makes a new one, and
 * "a send in step s reads the value from before step s" falls out for free:
 * snapshots of the sources are taken before any destination of the step is
 * written.  Only ranks the chunk touches get a bitset; the others implicitly
 * hold their own contribution.
 *
 * Timed schedules (every send has start_us/end_us) are replayed per chunk in
 * start order with a heap of pending arrivals: a send reads src after every
 * arrival with end_us <= start_us + 1e-6 has been applied.  Their bandwidth
 * check is a sweep over each link's (and shared set's) intervals.
 */
#include "verify.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TIME_EPS 1e-6

typedef struct value {
    struct value *next_free;
    int refs;
    int count;          /* number of contributions (bits set) */
    uint64_t bits[];
} value;


typedef struct vctx {
    const cs_topology *t;
    const cs_algorithm *a;
    const cs_collective *coll;  /* validated copy */
    cs_verify_report *rep;
    char first_field[CS_ERROR_FIELD_MAX];
    int P;
    long G;
    long n;
    int S;
    bool combining, timed;
    int *link_of;               /* per send; -1 when the send is malformed */
    /* link -> shared sets */
    int *set_begin, *set_list;
    /* value replay */
    unsigned *stamp;            /* per rank: epoch of the chunk that wrote the state */
    double *avail;              /* non-combining: step (or time) from which rank holds it */
    value **val;                /* combining: rank's value when stamped ... */
    int *single;                /* ... or, when val is NULL, the singleton it holds (-1: none) */
    unsigned *lstamp;           /* combining liveness (see mark_dead_sources) */
    unsigned char *live;
    int *wstep;                 /* combining: step of the last write (conflict check) */
    int *touched;
    int ntouched;
    unsigned epoch;
    int words;
    value *free_values;
    value **all_blocks;         /* every value ever allocated, for freeing */
    long nblocks, cap_blocks;
    bool oom;
    /* custom postconditions: chunk -> ranks */
    long *post_begin;
    int *post_rank;
} vctx;

/* ---- reporting --------------------------------------------------------------------- */

static void vproblem(vctx *v, const char *field, const char *fmt, va_list ap)
{
    cs_verify_report *rep = v->rep;
    rep->ok = false;
    if (rep->nproblems == 0)
        snprintf(v->first_field, sizeof v->first_field, "%s", field ? field : "");
    rep->nproblems++;
    if (rep->nreasons < CS_VERIFY_MAX_REASONS)
        vsnprintf(rep->reasons[rep->nreasons++], sizeof rep->reasons[0], fmt, ap);
}

__attribute__((format(printf, 3, 4)))
static void problem(vctx *v, const char *field, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vproblem(v, field, fmt, ap);
    va_end(ap);
}

/* "send 17 (chunk 3, 2->5, step 1): " + the reason */
__attribute__((format(printf, 3, 4)))
static void send_problem(vctx *v, long i, const char *fmt, ...)
{
    if (v->rep->nreasons >= CS_VERIFY_MAX_REASONS && v->rep->nproblems > 0) {
        v->rep->nproblems++;
        return;
    }
    const cs_send *s = &v->a->sends[i];
    char head[128], field[48], msg[256];
    if (v->timed)
        snprintf(head, sizeof head, "send %ld (chunk %ld, %d->%d, step %d, %.3f-%.3f us): ", i,
                 s->chunk, s->src, s->dst, s->step, s->start_us, s->end_us);
    else
        snprintf(head, sizeof head, "send %ld (chunk %ld, %d->%d, step %d): ", i, s->chunk,
                 s->src, s->dst, s->step);
    snprintf(field, sizeof field, "sends[%ld]", i);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    problem(v, field, "%s%s", head, msg);
}

static bool reasons_full(const vctx *v)
{
    return v->rep->nreasons >= CS_VERIFY_MAX_REASONS;
}

/* ---- linear-time sorting of send indices ------------------------------------------ */

/* Stable sort of idx[0..n) by key(idx[i]) (a 32-bit unsigned key computed from
 * the send), least significant 16 bits first. */
typedef uint32_t (*key_fn)(const cs_send *s);

static uint32_t key_step(const cs_send *s) { return (uint32_t)s->step; }
static uint32_t key_chunk(const cs_send *s) { return (uint32_t)s->chunk; }

static int radix_sort(const cs_send *sends, int *idx, int *tmp, long n, key_fn key,
                      uint32_t maxkey)
{
    size_t *count = malloc(sizeof(size_t) * 65537);
    if (!count)
        return CS_ENOMEM;
    for (int shift = 0; shift < 32; shift += 16) {
        if (shift > 0 && (maxkey >> shift) == 0)
            break;
        memset(count, 0, sizeof(size_t) * 65537);
        for (long k = 0; k < n; k++)
            count[((key(&sends[idx[k]]) >> shift) & 0xffff) + 1]++;
        for (int d = 0; d < 65536; d++)
            count[d + 1] += count[d];
        for (long k = 0; k < n; k++)
            tmp[count[(key(&sends[idx[k]]) >> shift) & 0xffff]++] = idx[k];
        memcpy(idx, tmp, sizeof(int) * (size_t)n);
    }
    free(count);
    return CS_OK;
}

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
    v->single[r] = collective_pre(v->coll, v->P, v->a->chunks, g, r) ? r : -1;
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
        send_problem(v, i, "reduce counts the contribution of rank %d twice (rank %d already "
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

/* Applies send i carrying `in` (a reference the call consumes) to its dst.
 * step >= 0 (untimed schedules) enables the same-step write conflict check. */
static void apply_combining(vctx *v, long i, vref in, int step)
{
    const cs_send *s = &v->a->sends[i];
    int dst = s->dst;
    touch(v, s->chunk, dst);
    /* wstep: 2*step + (a copy wrote in that step); -1 when never written */
    int w = v->wstep[dst];
    bool same_step = step >= 0 && w >= 0 && w / 2 == step;
    if (same_step && (s->op == CS_OP_COPY || (w & 1))) {
        vref cur = {v->val[dst], v->single[dst]};
        if (!vref_equal(v, &cur, &in))
            send_problem(v, i, "rank %d is written more than once in step %d and one of the "
                         "writes is a copy: the result depends on the order", dst, step);
    }
    if (s->op == CS_OP_COPY) {
        value_unref(v, v->val[dst]);
        v->val[dst] = in.v;
        v->single[dst] = in.single;
    } else {
        reduce_into(v, i, dst, &in);
    }
    if (step >= 0)
        v->wstep[dst] = 2 * step + (s->op == CS_OP_COPY || (same_step && (w & 1)));
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

/* The shapes above restate collective.h's table; make sure they agree with
 * the collective module on a sample, so the two can never silently drift. */
static int check_shapes(vctx *v, cs_error *err)
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
            if (v->combining && !collective_pre(c, v->P, v->a->chunks, g, r))
                return cs_error_set(err, CS_EINTERNAL, "collective",
                                    "combining collective without a contribution at rank %d", r);
        }
    return CS_OK;
}

static bool holds_plain(const vctx *v, long g, int r)
{
    return v->stamp[r] == v->epoch || collective_pre(v->coll, v->P, v->a->chunks, g, r);
}

static vref rank_state(const vctx *v, long g, int r)
{
    if (v->stamp[r] == v->epoch)
        return (vref){v->val[r], v->single[r]};
    return (vref){NULL, collective_pre(v->coll, v->P, v->a->chunks, g, r) ? r : -1};
}

static bool holds_full(const vctx *v, long g, int r)
{
    vref x = rank_state(v, g, r);
    return vref_count(&x) == v->P;
}

static void post_missing(vctx *v, long g, int r)
{
    if (!v->combining) {
        problem(v, "sends", "chunk %ld never reaches rank %d (postcondition)", g, r);
        return;
    }
    vref x = rank_state(v, g, r);
    if (v->stamp[r] != v->epoch && x.single == r) {
        problem(v, "sends", "chunk %ld at rank %d holds only its own contribution, not the "
                "full reduction (postcondition)", g, r);
        return;
    }
    int miss = first_missing(v, &x);
    problem(v, "sends", "chunk %ld at rank %d lacks the contribution of rank %d (holds %d of %d; "
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
            full += holds_full(v, g, v->touched[k]);
        if (v->P == 1)
            full += 1 - v->ntouched;
    } else {
        full = received + 1; /* builtin non-combining ALL kinds have one source */
    }
    if (full >= v->P)
        return;
    long missing = v->P - full;
    if (reasons_full(v)) {
        v->rep->nproblems += missing;
        return;
    }
    long reported = 0;
    for (int r = 0; r < v->P && reported < missing; r++) {
        bool ok = v->combining ? holds_full(v, g, r) : holds_plain(v, g, r);
        if (!ok) {
            if (reasons_full(v)) {
                v->rep->nproblems += missing - reported;
                return;
            }
            post_missing(v, g, r);
            reported++;
        }
    }
}

/* ---- the value replay -------------------------------------------------------------- */

typedef struct arrival {
    double end;
    long seq;           /* order among equal ends: the send's position */
    int send;
    vref val;           /* the snapshot carried */
} arrival;

static void replay_plain_untimed(vctx *v, long g, const int *seg, long len, long *received)
{
    for (long k = 0; k < len; k++) {
        int i = seg[k];
        const cs_send *s = &v->a->sends[i];
        if (!(collective_pre(v->coll, v->P, v->a->chunks, g, s->src) ||
              (v->stamp[s->src] == v->epoch && v->avail[s->src] <= s->step)))
            send_problem(v, i, "rank %d does not hold chunk %ld before step %d", s->src, g,
                         s->step);
        if (v->stamp[s->dst] != v->epoch && !collective_pre(v->coll, v->P, v->a->chunks, g, s->dst)) {
            v->stamp[s->dst] = v->epoch;
            v->avail[s->dst] = s->step + 1;
            (*received)++;
        }
    }
}

static void replay_plain_timed(vctx *v, long g, const int *seg, long len, long *received)
{
    for (long k = 0; k < len; k++) {
        int i = seg[k];
        const cs_send *s = &v->a->sends[i];
        if (!(collective_pre(v->coll, v->P, v->a->chunks, g, s->src) ||
              (v->stamp[s->src] == v->epoch && v->avail[s->src] <= s->start_us + TIME_EPS))) {
            if (v->stamp[s->src] == v->epoch)
                send_problem(v, i, "rank %d only has chunk %ld from %.3f us", s->src, g,
                             v->avail[s->src]);
            else
                send_problem(v, i, "rank %d does not hold chunk %ld", s->src, g);
        }
        if (collective_pre(v->coll, v->P, v->a->chunks, g, s->dst))
            continue;
        if (v->stamp[s->dst] != v->epoch) {
            v->stamp[s->dst] = v->epoch;
            v->avail[s->dst] = s->end_us;
            (*received)++;
        } else if (s->end_us < v->avail[s->dst]) {
            v->avail[s->dst] = s->end_us;
        }
    }
}

static bool is_post_combining(const vctx *v, long g, int r)
{
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
static void mark_dead_sources(vctx *v, long g, const int *seg, long len, unsigned char *dead)
{
    const cs_send *sends = v->a->sends;
    long end = len;
    while (end > 0) {
        int step = sends[seg[end - 1]].step;
        long k = end;
        while (k > 0 && sends[seg[k - 1]].step == step)
            k--;
        for (long j = k; j < end; j++) {
            const cs_send *s = &sends[seg[j]];
            live_init(v, g, s->dst);
            if (s->op == CS_OP_COPY)
                v->live[s->dst] = 0;
        }
        for (long j = k; j < end; j++) {
            const cs_send *s = &sends[seg[j]];
            if (s->op == CS_OP_REDUCE)
                v->live[s->dst] = 1;
        }
        for (long j = k; j < end; j++) {
            int a = sends[seg[j]].src;
            live_init(v, g, a);
            dead[j] = !v->live[a];
        }
        for (long j = k; j < end; j++)
            v->live[sends[seg[j]].src] = 1;
        end = k;
    }
}

static int replay_combining_untimed(vctx *v, long g, const int *seg, long len, vref *snap,
                                    unsigned char *dead)
{
    mark_dead_sources(v, g, seg, len, dead);
    long k = 0;
    while (k < len) {
        int step = v->a->sends[seg[k]].step;
        long end = k;
        while (end < len && v->a->sends[seg[end]].step == step)
            end++;
        for (long j = k; j < end; j++)
            snap[j - k] = snapshot(v, g, v->a->sends[seg[j]].src);
        for (long j = k; j < end; j++) {
            if (!dead[j])
                continue;
            int a = v->a->sends[seg[j]].src;
            value_unref(v, v->val[a]);
            v->val[a] = NULL;
            v->single[a] = -1;
        }
        for (long j = k; j < end; j++)
            apply_combining(v, seg[j], snap[j - k], step);
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

static int replay_combining_timed(vctx *v, long g, const int *seg, long len, arrival *heap)
{
    long nh = 0;
    for (long k = 0; k < len; k++) {
        int i = seg[k];
        const cs_send *s = &v->a->sends[i];
        while (nh > 0 && heap[0].end <= s->start_us + TIME_EPS) {
            arrival x = heap_pop(heap, &nh);
            apply_combining(v, x.send, x.val, -1);
        }
        heap_push(heap, &nh, (arrival){s->end_us, k, i, snapshot(v, g, s->src)});
    }
    while (nh > 0) {
        arrival x = heap_pop(heap, &nh);
        apply_combining(v, x.send, x.val, -1);
    }
    return v->oom ? CS_ENOMEM : CS_OK;
}

typedef struct timed_key {
    double start, end;
    int index;
} timed_key;

static int compare_timed(const void *pa, const void *pb)
{
    const timed_key *a = pa, *b = pb;
    if (a->start != b->start)
        return a->start < b->start ? -1 : 1;
    if (a->end != b->end)
        return a->end < b->end ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

static void sort_by_time(const cs_send *sends, int *seg, long len, timed_key *tk)
{
    if (len < 2)
        return;
    for (long k = 0; k < len; k++)
        tk[k] = (timed_key){sends[seg[k]].start_us, sends[seg[k]].end_us, seg[k]};
    qsort(tk, (size_t)len, sizeof *tk, compare_timed);
    for (long k = 0; k < len; k++)
        seg[k] = tk[k].index;
}

/* ord: valid sends sorted by chunk (then step for untimed). */
static int replay_values(vctx *v, int *ord, long nvalid, cs_error *err)
{
    int P = v->P;
    int rc = CS_OK;
    long maxseg = 0;
    for (long k = 0; k < nvalid;) {
        long e = k;
        while (e < nvalid && v->a->sends[ord[e]].chunk == v->a->sends[ord[k]].chunk)
            e++;
        if (e - k > maxseg)
            maxseg = e - k;
        k = e;
    }
    unsigned char *dead = NULL;
    v->stamp = calloc((size_t)P, sizeof(unsigned));
    v->touched = malloc(sizeof(int) * (size_t)P);
    if (!v->combining)
        v->avail = malloc(sizeof(double) * (size_t)P);
    else {
        v->val = calloc((size_t)P, sizeof(value *));
        v->single = malloc(sizeof(int) * (size_t)P);
        v->lstamp = calloc((size_t)P, sizeof(unsigned));
        v->live = malloc((size_t)P);
        dead = malloc((size_t)(maxseg > 0 ? maxseg : 1));
        v->wstep = malloc(sizeof(int) * (size_t)P);
    }
    void *scratch = NULL;   /* snapshots (untimed) or the arrival heap (timed) */
    timed_key *tk = NULL;
    if (v->combining)
        scratch = malloc((v->timed ? sizeof(arrival) : sizeof(vref)) *
                         (size_t)(maxseg > 0 ? maxseg : 1));
    if (v->timed)
        tk = malloc(sizeof(timed_key) * (size_t)(maxseg > 0 ? maxseg : 1));
    if (!v->stamp || !v->touched || (!v->combining && !v->avail) ||
        (v->combining && (!v->val || !v->single || !v->wstep || !scratch || !v->lstamp ||
                          !v->live || !dead)) || (v->timed && !tk)) {
        rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory replaying %ld sends", nvalid);
        goto done;
    }
    long k = 0;
    for (long g = 0; g < v->G; g++) {
        long e = k;
        while (e < nvalid && v->a->sends[ord[e]].chunk == g)
            e++;
        v->epoch++;
        if (v->epoch == 0) { /* wrapped: clear stamps once */
            memset(v->stamp, 0, sizeof(unsigned) * (size_t)P);
            if (v->lstamp)
                memset(v->lstamp, 0, sizeof(unsigned) * (size_t)P);
            v->epoch = 1;
        }
        v->ntouched = 0;
        long received = 0;
        int *seg = ord + k;
        long len = e - k;
        if (v->timed)
            sort_by_time(v->a->sends, seg, len, tk);
        if (!v->combining) {
            if (v->timed)
                replay_plain_timed(v, g, seg, len, &received);
            else
                replay_plain_untimed(v, g, seg, len, &received);
        } else {
            rc = v->timed ? replay_combining_timed(v, g, seg, len, scratch)
                          : replay_combining_untimed(v, g, seg, len, scratch, dead);
            if (rc != CS_OK) {
                rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory replaying chunk %ld", g);
                goto done;
            }
        }
        check_post(v, g, received);
        if (v->combining) {
            for (int j = 0; j < v->ntouched; j++)
                value_unref(v, v->val[v->touched[j]]);
            v->ntouched = 0;
        }
        k = e;
    }
done:
    free(scratch);
    free(dead);
    free(tk);
    return rc;
}

/* ---- bandwidth ------------------------------------------------------------------------ */

static void describe_set(const vctx *v, int set, char *buf, size_t size)
{
    const cs_shared *sh = &v->t->shared[set];
    int n = snprintf(buf, size, "shared set %d (", set);
    for (int j = 0; j < sh->nlinks && n < (int)size - 16; j++) {
        const cs_link *l = &v->t->links[sh->links[j]];
        n += snprintf(buf + n, size - (size_t)n, "%s%d->%d", j ? ", " : "", l->src, l->dst);
        if (j == 3 && sh->nlinks > 5) {
            n += snprintf(buf + n, size - (size_t)n, ", ... %d links", sh->nlinks);
            break;
        }
    }
    if (n < (int)size - 2)
        snprintf(buf + n, size - (size_t)n, ")");
}

static int check_bandwidth_steps(vctx *v, const int *ord, long nvalid, cs_error *err)
{
    const cs_topology *t = v->t;
    long *lcnt = calloc((size_t)t->nlinks + 1, sizeof(long));
    long *scnt = calloc((size_t)t->nshared + 1, sizeof(long));
    int *lover = malloc(sizeof(int) * (size_t)(t->nlinks + 1));
    int *sover = malloc(sizeof(int) * (size_t)(t->nshared + 1));
    int *ltouch = malloc(sizeof(int) * (size_t)(t->nlinks + 1));
    int *stouch = malloc(sizeof(int) * (size_t)(t->nshared + 1));
    int rc = CS_OK;
    if (!lcnt || !scnt || !lover || !sover || !ltouch || !stouch) {
        rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
        goto done;
    }
    long k = 0;
    while (k < nvalid) {
        int step = v->a->sends[ord[k]].step;
        long rounds = v->a->rounds_per_step[step];
        int nl = 0, ns = 0;
        for (; k < nvalid && v->a->sends[ord[k]].step == step; k++) {
            int i = ord[k];
            int l = v->link_of[i];
            if (lcnt[l]++ == 0)
                ltouch[nl++] = l;
            if (lcnt[l] == t->links[l].lanes * rounds + 1)
                lover[l] = i;
            for (int m = v->set_begin[l]; m < v->set_begin[l + 1]; m++) {
                int set = v->set_list[m];
                if (scnt[set]++ == 0)
                    stouch[ns++] = set;
                if (scnt[set] == t->shared[set].lanes * rounds + 1)
                    sover[set] = i;
            }
        }
        for (int j = 0; j < nl; j++) {
            int l = ltouch[j];
            long cap = t->links[l].lanes * rounds;
            if (lcnt[l] > cap)
                send_problem(v, lover[l], "link %d->%d carries %ld chunks in step %d, more "
                             "than %d lanes x %ld rounds", t->links[l].src, t->links[l].dst,
                             lcnt[l], step, t->links[l].lanes, rounds);
            lcnt[l] = 0;
        }
        for (int j = 0; j < ns; j++) {
            int set = stouch[j];
            long cap = t->shared[set].lanes * rounds;
            if (scnt[set] > cap) {
                char desc[160];
                describe_set(v, set, desc, sizeof desc);
                send_problem(v, sover[set], "%s carries %ld chunks in step %d, more than %d "
                             "lanes x %ld rounds", desc, scnt[set], step, t->shared[set].lanes,
                             rounds);
            }
            scnt[set] = 0;
        }
    }
done:
    free(lcnt);
    free(scnt);
    free(lover);
    free(sover);
    free(ltouch);
    free(stouch);
    return rc;
}

/* Sweep: sends (already in start order) on one resource with `lanes` lanes;
 * reports every send that starts while `lanes` others are still in flight. */
static void sweep_concurrency(vctx *v, const timed_key *tk, long len, int lanes, double *heap,
                              const char *what)
{
    long nh = 0;
    for (long k = 0; k < len; k++) {
        /* pop finished (min-heap of end times) */
        while (nh > 0 && heap[0] <= tk[k].start + TIME_EPS) {
            double last = heap[--nh];
            long i = 0;
            for (;;) {
                long c = 2 * i + 1;
                if (c >= nh)
                    break;
                if (c + 1 < nh && heap[c + 1] < heap[c])
                    c++;
                if (heap[c] >= last)
                    break;
                heap[i] = heap[c];
                i = c;
            }
            if (nh > 0)
                heap[i] = last;
        }
        if (nh >= lanes)
            send_problem(v, tk[k].index, "%s has %ld sends in flight at %.3f us, more than its "
                         "%d lanes", what, nh + 1, tk[k].start, lanes);
        long i = nh++;
        double x = tk[k].end;
        while (i > 0 && heap[(i - 1) / 2] > x) {
            heap[i] = heap[(i - 1) / 2];
            i = (i - 1) / 2;
        }
        heap[i] = x;
    }
}

static int check_bandwidth_timed(vctx *v, long nvalid, cs_error *err)
{
    const cs_topology *t = v->t;
    int L = t->nlinks;
    long *begin = calloc((size_t)L + 2, sizeof(long));
    timed_key *tk = malloc(sizeof(timed_key) * (size_t)(nvalid > 0 ? nvalid : 1));
    double *heap = malloc(sizeof(double) * (size_t)(nvalid > 0 ? nvalid : 1));
    timed_key *setk = NULL;
    int rc = CS_OK;
    if (!begin || !tk || !heap) {
        rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
        goto done;
    }
    for (long i = 0; i < v->n; i++)
        if (v->link_of[i] >= 0)
            begin[v->link_of[i] + 1]++;
    for (int l = 0; l < L; l++)
        begin[l + 1] += begin[l];
    {
        long *pos = malloc(sizeof(long) * (size_t)(L + 1));
        if (!pos) {
            rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
            goto done;
        }
        memcpy(pos, begin, sizeof(long) * (size_t)(L + 1));
        for (long i = 0; i < v->n; i++)
            if (v->link_of[i] >= 0)
                tk[pos[v->link_of[i]]++] = (timed_key){v->a->sends[i].start_us,
                                                       v->a->sends[i].end_us, (int)i};
        free(pos);
    }
    for (int l = 0; l < L; l++) {
        long len = begin[l + 1] - begin[l];
        if (len == 0)
            continue;
        qsort(tk + begin[l], (size_t)len, sizeof *tk, compare_timed);
        char what[48];
        snprintf(what, sizeof what, "link %d->%d", t->links[l].src, t->links[l].dst);
        sweep_concurrency(v, tk + begin[l], len, t->links[l].lanes, heap, what);
    }
    for (int set = 0; set < t->nshared; set++) {
        const cs_shared *sh = &t->shared[set];
        long len = 0;
        for (int j = 0; j < sh->nlinks; j++)
            len += begin[sh->links[j] + 1] - begin[sh->links[j]];
        if (len <= sh->lanes)
            continue;
        timed_key *buf = realloc(setk, sizeof *buf * (size_t)len);
        if (!buf) {
            rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
            goto done;
        }
        setk = buf;
        long m = 0;
        for (int j = 0; j < sh->nlinks; j++) {
            long b = begin[sh->links[j]], e = begin[sh->links[j] + 1];
            memcpy(setk + m, tk + b, sizeof *tk * (size_t)(e - b));
            m += e - b;
        }
        qsort(setk, (size_t)len, sizeof *setk, compare_timed);
        char what[160];
        describe_set(v, set, what, sizeof what);
        sweep_concurrency(v, setk, len, sh->lanes, heap, what);
    }
done:
    free(begin);
    free(tk);
    free(heap);
    free(setk);
    return rc;
}

/* ---- driver ------------------------------------------------------------------------ */

static int build_set_index(vctx *v, cs_error *err)
{
    const cs_topology *t = v->t;
    v->set_begin = calloc((size_t)t->nlinks + 2, sizeof(int));
    if (!v->set_begin)
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
    long total = 0;
    for (int k = 0; k < t->nshared; k++) {
        total += t->shared[k].nlinks;
        for (int j = 0; j < t->shared[k].nlinks; j++) {
            int l = t->shared[k].links[j];
            if (l < 0 || l >= t->nlinks)
                return cs_error_set(err, CS_EINVAL, "topology", "shared set %d names link %d "
                                    "of %d", k, l, t->nlinks);
            v->set_begin[l + 1]++;
        }
    }
    for (int l = 0; l < t->nlinks; l++)
        v->set_begin[l + 1] += v->set_begin[l];
    v->set_list = malloc(sizeof(int) * (size_t)(total > 0 ? total : 1));
    int *fill = malloc(sizeof(int) * (size_t)(t->nlinks + 1));
    if (!v->set_list || !fill) {
        free(fill);
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
    }
    memcpy(fill, v->set_begin, sizeof(int) * (size_t)(t->nlinks + 1));
    for (int k = 0; k < t->nshared; k++)
        for (int j = 0; j < t->shared[k].nlinks; j++)
            v->set_list[fill[t->shared[k].links[j]]++] = k;
    free(fill);
    return CS_OK;
}

static int build_custom_post(vctx *v, cs_error *err)
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

/* Header problems make the rest meaningless when they concern sizes. */
static bool check_header(vctx *v)
{
    const cs_algorithm *a = v->a;
    bool usable = true;
    if (a->ranks != v->t->ranks) {
        problem(v, "ranks", "ranks: the algorithm has %d ranks, topology %s has %d", a->ranks,
                v->t->name, v->t->ranks);
        usable = false;
    }
    if (a->chunks < 1) {
        problem(v, "chunks", "chunks must be >= 1, got %d", a->chunks);
        usable = false;
    }
    if (a->steps < 0 || (a->steps > 0 && !a->rounds_per_step)) {
        problem(v, "steps", "steps must be >= 0 with rounds_per_step, got %d", a->steps);
        return false;
    }
    long sum = 0;
    for (int s = 0; s < a->steps; s++) {
        if (a->rounds_per_step[s] < 1) {
            char f[48];
            snprintf(f, sizeof f, "rounds_per_step[%d]", s);
            problem(v, f, "rounds_per_step[%d] is %d, must be >= 1", s, a->rounds_per_step[s]);
            usable = false;
        }
        sum += a->rounds_per_step[s];
    }
    if (sum != a->rounds)
        problem(v, "rounds", "rounds is %d but rounds_per_step sums to %ld", a->rounds, sum);
    if (usable) {
        long g = collective_global_chunks(v->coll, a->ranks, a->chunks);
        if (g != a->global_chunks) {
            problem(v, "global_chunks", "global_chunks is %ld but %s with %d ranks and %d "
                    "chunks has %ld", a->global_chunks, collective_kind_name(v->coll->kind),
                    a->ranks, a->chunks, g);
            usable = false;
        }
    }
    if (a->nsends > 0 && !a->sends) {
        problem(v, "sends", "sends is NULL with nsends %ld", a->nsends);
        usable = false;
    }
    long ntimed = 0;
    for (long i = 0; i < a->nsends && a->sends; i++)
        ntimed += isfinite(a->sends[i].start_us) && isfinite(a->sends[i].end_us);
    if (ntimed != 0 && ntimed != a->nsends)
        problem(v, "sends", "%ld of %ld sends carry start_us/end_us: a timed schedule times "
                "every send", ntimed, a->nsends);
    v->timed = ntimed > 0 && ntimed == a->nsends;
    return usable;
}

static long check_sends(vctx *v)
{
    const cs_algorithm *a = v->a;
    long nvalid = 0;
    for (long i = 0; i < v->n; i++) {
        const cs_send *s = &a->sends[i];
        v->link_of[i] = -1;
        if (s->chunk < 0 || s->chunk >= v->G) {
            send_problem(v, i, "chunk %ld out of range for %ld global chunks", s->chunk, v->G);
            continue;
        }
        if (s->src < 0 || s->src >= v->P || s->dst < 0 || s->dst >= v->P) {
            send_problem(v, i, "rank %d out of range for %d ranks",
                         s->src < 0 || s->src >= v->P ? s->src : s->dst, v->P);
            continue;
        }
        if (s->src == s->dst) {
            send_problem(v, i, "rank %d sends to itself", s->src);
            continue;
        }
        if (s->step < 0 || s->step >= v->S) {
            send_problem(v, i, "step %d out of range for %d steps", s->step, v->S);
            continue;
        }
        if (s->op != CS_OP_COPY && s->op != CS_OP_REDUCE) {
            send_problem(v, i, "op %d is neither copy nor reduce", (int)s->op);
            continue;
        }
        if (s->op == CS_OP_REDUCE && !v->combining) {
            send_problem(v, i, "reduce is not allowed in %s (not a combining collective)",
                         collective_kind_name(v->coll->kind));
            continue;
        }
        if (v->timed && (s->end_us < s->start_us || s->start_us < 0)) {
            send_problem(v, i, "end_us %.3f is before start_us %.3f", s->end_us, s->start_us);
            continue;
        }
        int l = topology_find_link(v->t, s->src, s->dst);
        if (l < 0) {
            send_problem(v, i, "no link %d->%d", s->src, s->dst);
            continue;
        }
        v->link_of[i] = l;
        nvalid++;
    }
    return nvalid;
}

int algorithm_verify_report(const cs_topology *t, const cs_algorithm *a,
                            cs_verify_report *rep, cs_error *err)
{
    memset(rep, 0, sizeof *rep);
    rep->ok = true;
    if (!t || !t->finalized)
        return cs_error_set(err, CS_EINVAL, "topology", "verify needs a finalized topology");
    if (!a)
        return cs_error_set(err, CS_EINVAL, "algorithm", "no algorithm to verify");
    vctx v;
    memset(&v, 0, sizeof v);
    v.t = t;
    v.a = a;
    v.rep = rep;
    v.P = t->ranks;
    v.n = a->nsends;
    v.S = a->steps;
    int *ord = NULL, *tmp = NULL;
    cs_collective coll;
    memset(&coll, 0, sizeof coll);
    int rc = collective_copy(&coll, &a->collective, err);
    if (rc != CS_OK)
        return rc;
    v.coll = &coll;
    v.combining = collective_kind_is_combining(coll.kind);
    if (a->ranks >= 1 && collective_validate(&coll, a->ranks, err) != CS_OK) {
        problem(&v, "collective", "collective: %s", err ? err->message : "invalid");
        cs_error_clear(err);
        goto finish;
    }
    if (!check_header(&v))
        goto finish;
    v.G = a->global_chunks;
    if (v.G > 0x7fffffffL || v.n > 0x7fffffffL) {
        rc = cs_error_set(err, CS_ELIMIT, v.G > 0x7fffffffL ? "global_chunks" : "sends",
                          "too large to verify: %ld global chunks, %ld sends", v.G, v.n);
        goto finish;
    }
    if ((rc = check_shapes(&v, err)) != CS_OK)
        goto finish;
    if (coll.kind == CS_COLL_CUSTOM && (rc = build_custom_post(&v, err)) != CS_OK)
        goto finish;
    if ((rc = build_set_index(&v, err)) != CS_OK)
        goto finish;
    v.link_of = malloc(sizeof(int) * (size_t)(v.n > 0 ? v.n : 1));
    ord = malloc(sizeof(int) * (size_t)(v.n > 0 ? v.n : 1));
    tmp = malloc(sizeof(int) * (size_t)(v.n > 0 ? v.n : 1));
    if (!v.link_of || !ord || !tmp) {
        rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory for %ld sends", v.n);
        goto finish;
    }
    v.words = (v.P + 63) / 64;
    long nvalid = check_sends(&v);
    long m = 0;
    for (long i = 0; i < v.n; i++)
        if (v.link_of[i] >= 0)
            ord[m++] = (int)i;
    if (v.timed) {
        if ((rc = check_bandwidth_timed(&v, nvalid, err)) != CS_OK)
            goto finish;
    } else {
        if (radix_sort(a->sends, ord, tmp, nvalid, key_step, (uint32_t)(v.S > 0 ? v.S : 1)) !=
            CS_OK) {
            rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
            goto finish;
        }
        if ((rc = check_bandwidth_steps(&v, ord, nvalid, err)) != CS_OK)
            goto finish;
    }
    if (radix_sort(a->sends, ord, tmp, nvalid, key_chunk, (uint32_t)v.G) != CS_OK) {
        rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
        goto finish;
    }
    free(tmp);
    tmp = NULL;
    rc = replay_values(&v, ord, nvalid, err);
finish:
    free(ord);
    free(tmp);
    free(v.link_of);
    free(v.set_begin);
    free(v.set_list);
    free(v.stamp);
    free(v.avail);
    free(v.val);
    free(v.single);
    free(v.lstamp);
    free(v.live);
    free(v.wstep);
    free(v.touched);
    free(v.post_begin);
    free(v.post_rank);
    for (long b = 0; b < v.nblocks; b++)
        free(v.all_blocks[b]);
    free(v.all_blocks);
    collective_free(&coll);
    if (rc != CS_OK)
        return rc;
    if (!rep->ok) {
        cs_error_set(err, CS_EVERIFY, v.first_field, "%s", rep->nreasons ? rep->reasons[0]
                                                                          : "invalid algorithm");
        return CS_EVERIFY;
    }
    return CS_OK;
}

int algorithm_verify(const cs_topology *t, const cs_algorithm *a, cs_error *err)
{
    cs_verify_report rep;
    return algorithm_verify_report(t, a, &rep, err);
}
