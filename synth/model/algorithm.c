/*
 * algorithm.c - the schedule object (CONTRACT.md section 3), its compact send
 * storage, its JSON form, bandwidth fitting, the alpha-beta cost, and
 * synthesis results (section 4).
 *
 * Send storage.  TACOS schedules reach hundreds of millions of sends (a
 * 100x100 mesh allgather has 99,990,000), and every byte per send is paid on
 * the whole synthesize -> verify -> simulate -> store path, so sends are not
 * an array of structs but private columns (cs_send_store in algorithm.h):
 *  - chunk, src, dst and step are integer columns, each at the narrowest of
 *    1, 2 or 4 bytes that holds every value stored so far.  Their bounds are
 *    known up front (ranks, global chunks, steps), so a column starts at the
 *    right width and is re-encoded wider only when a value needs it (steps
 *    growing past 255 or 65535, or a deliberately malformed send that the
 *    verifier is meant to report).  1- and 2-byte columns are unsigned (valid
 *    values are >= 0); 4-byte ones are int32, so -1 and out-of-range values
 *    stay representable for the verifier to name.  Nothing is truncated: a
 *    value that does not fit int32 is CS_ELIMIT, and algorithm_new refuses
 *    more than 2^31 - 1 global chunks.  Up to 65,536 ranks and chunks that is
 *    2 bytes per column; 4 bytes beyond.
 *  - op is one bit per send.
 *  - times (timed schedules only) are a dictionary of distinct doubles, kept
 *    exactly, with two index columns (start, end) of adaptive width.  TACOS
 *    has few distinct event times (the spans, times the distinct link costs),
 *    so its indices take 2 bytes; a schedule imported with arbitrary times
 *    still works, with up to two dictionary entries per send.  Entry 0 is NAN,
 *    so untimed sends among timed ones (which the verifier reports) need no
 *    special case.  A hash of the dictionary deduplicates on insertion.
 * So a 100x100 mesh allgather takes 12 bytes and 1 bit per send (the old
 * 40-byte struct array took 40), and a 4096-rank one 12 as well.  Columns grow
 * geometrically with realloc (large blocks are remapped, not copied, and
 * untouched capacity is not resident); builders that know their count call
 * algorithm_reserve_sends once.  Accessors (algorithm.h) are static inline:
 * one predictable switch on the width and a load.
 *
 * The parser is strict about what it accepts (types, ranges, consistency of
 * the header) and names the JSON path of the first bad field, because
 * algorithms come from files and other programs; unknown keys are ignored so
 * the contract can grow.  Semantic validity (links, causality, postcondition)
 * is the verifier's job, not the parser's.
 *
 * Inversion and concatenation are in transform.c.
 */
#include "algorithm.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithm_json_internal.h"
#include "send_order_internal.h"

/* Chunk ids are stored in 32 bits; the verifier and simulator index chunks
 * with 32-bit keys as well. */
#define ALG_MAX_GLOBAL_CHUNKS 0x7fffffffL
#define ALG_MAX_RANKS (1 << 24)
#define ALG_MAX_STEPS (1 << 24)

/* ---- columns -------------------------------------------------------------------- */

/* The narrowest width (bytes) that holds v; v must fit int32. */
static int width_for(long v)
{
    if (v >= 0 && v <= 0xff)
        return 1;
    if (v >= 0 && v <= 0xffff)
        return 2;
    return 4;
}

static inline bool fits_int32(long v) { return v >= INT32_MIN && v <= INT32_MAX; }

static inline void column_put(cs_column *c, long i, int32_t v)
{
    switch (c->width) {
    case 1: ((uint8_t *)c->data)[i] = (uint8_t)v; break;
    case 2: ((uint16_t *)c->data)[i] = (uint16_t)v; break;
    default: ((int32_t *)c->data)[i] = v; break;
    }
}

/* Re-encodes the first n values of c at `width` (wider than c's) in a buffer
 * of cap values. */
static int column_widen(cs_column *c, long n, long cap, int width)
{
    cs_column w = {malloc((size_t)(cap > 0 ? cap : 1) * (size_t)width), width};
    if (!w.data)
        return CS_ENOMEM;
    send_array_advise(w.data, (size_t)cap * (size_t)width);
    for (long i = 0; i < n; i++)
        column_put(&w, i, cs_column_get(c, i));
    free(c->data);
    *c = w;
    return CS_OK;
}

/* Makes c able to hold v at index < cap (widening as needed). */
static inline int column_admit(cs_column *c, long n, long cap, long v)
{
    int w = width_for(v);
    if (w <= c->width)
        return CS_OK;
    return column_widen(c, n, cap, w);
}

static int column_resize(cs_column *c, long cap)
{
    void *d = realloc(c->data, (size_t)(cap > 0 ? cap : 1) * (size_t)c->width);
    if (!d)
        return CS_ENOMEM;
    c->data = d;
    send_array_advise(d, (size_t)cap * (size_t)c->width);
    return CS_OK;
}

/* A column of n values at its narrowest width (for columns rebuilt whole). */
static int column_copy(cs_column *dst, const cs_column *src, long n)
{
    dst->width = src->width;
    dst->data = malloc((size_t)(n > 0 ? n : 1) * (size_t)src->width);
    if (!dst->data)
        return CS_ENOMEM;
    send_array_advise(dst->data, (size_t)n * (size_t)src->width);
    if (n > 0)
        memcpy(dst->data, src->data, (size_t)n * (size_t)src->width);
    return CS_OK;
}

/* ---- the time dictionary ----------------------------------------------------------- */

static inline uint64_t time_hash(double x)
{
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    b ^= b >> 33;
    b *= 0xff51afd7ed558ccdULL;
    b ^= b >> 33;
    b *= 0xc4ceb9fe1a85ec53ULL;
    return b ^ (b >> 33);
}

static inline bool same_bits(double x, double y)
{
    return memcmp(&x, &y, sizeof x) == 0;
}

static int times_rehash(cs_send_store *st, long slots)
{
    uint32_t *h = calloc((size_t)slots, sizeof *h);
    if (!h)
        return CS_ENOMEM;
    for (long k = 1; k < st->ntimes; k++) {
        long j = (long)(time_hash(st->times[k]) & (uint64_t)(slots - 1));
        while (h[j])
            j = (j + 1) & (slots - 1);
        h[j] = (uint32_t)k + 1;
    }
    free(st->time_slots);
    st->time_slots = h;
    st->time_slots_cap = slots;
    return CS_OK;
}

static int times_init(cs_send_store *st)
{
    st->times = malloc(16 * sizeof *st->times);
    if (!st->times)
        return CS_ENOMEM;
    st->times[0] = NAN;
    st->ntimes = 1;
    st->times_cap = 16;
    return times_rehash(st, 32);
}

/* The dictionary index of x (not NAN), added if new. */
static int time_lookup(cs_send_store *st, double x, long *out)
{
    long mask = st->time_slots_cap - 1;
    long j = (long)(time_hash(x) & (uint64_t)mask);
    while (st->time_slots[j]) {
        long k = (long)st->time_slots[j] - 1;
        if (same_bits(st->times[k], x)) {
            *out = k;
            return CS_OK;
        }
        j = (j + 1) & mask;
    }
    if (st->ntimes >= 0xfffffffeL)
        return CS_ELIMIT;
    if (st->ntimes == st->times_cap) {
        long cap = st->times_cap * 2;
        double *t = realloc(st->times, (size_t)cap * sizeof *t);
        if (!t)
            return CS_ENOMEM;
        st->times = t;
        st->times_cap = cap;
    }
    long k = st->ntimes++;
    st->times[k] = x;
    if (2 * st->ntimes > st->time_slots_cap) {
        if (times_rehash(st, st->time_slots_cap * 2) != CS_OK) {
            st->ntimes--;
            return CS_ENOMEM;
        }
    } else {
        st->time_slots[j] = (uint32_t)k + 1;
    }
    *out = k;
    return CS_OK;
}

/* Index of x in the dictionary, added if new.  NAN is always entry 0; other
 * values are matched bit for bit (so times come back exactly as stored).
 * role (0 start, 1 end) selects a one-entry cache in front of the hash. */
static int time_index(cs_send_store *st, double x, int role, long *out)
{
    if (isnan(x)) {
        *out = 0;
        return CS_OK;
    }
    if (st->recent_index[role] > 0 && same_bits(st->recent[role], x)) {
        *out = st->recent_index[role];
        return CS_OK;
    }
    int rc = time_lookup(st, x, out);
    if (rc == CS_OK) {
        st->recent[role] = x;
        st->recent_index[role] = *out;
    }
    return rc;
}

/* Creates the start/end columns (every existing send untimed: index 0). */
static int times_columns_init(cs_algorithm *a)
{
    cs_send_store *st = &a->store;
    if (st->start.data)
        return CS_OK;
    if (!st->times && times_init(st) != CS_OK)
        return CS_ENOMEM;
    long cap = st->cap > 0 ? st->cap : 1;
    cs_column s = {calloc((size_t)cap, 1), 1}, e = {calloc((size_t)cap, 1), 1};
    if (!s.data || !e.data) {
        free(s.data);
        free(e.data);
        return CS_ENOMEM;
    }
    st->start = s;
    st->end = e;
    return CS_OK;
}

long algorithm_time_count(const cs_algorithm *a)
{
    return a->store.times ? a->store.ntimes : 1;
}

static int compare_time_index(const void *pa, const void *pb, void *ctx)
{
    const double *t = ctx;
    double x = t[*(const uint32_t *)pa], y = t[*(const uint32_t *)pb];
    if (isnan(x) || isnan(y))
        return isnan(x) - isnan(y);
    return (x > y) - (x < y);
}

int algorithm_time_ranks(const cs_algorithm *a, uint32_t *rank)
{
    long n = algorithm_time_count(a);
    if (!a->store.times) {
        rank[0] = 0;
        return CS_OK;
    }
    uint32_t *idx = malloc((size_t)n * sizeof *idx);
    if (!idx)
        return CS_ENOMEM;
    for (long k = 0; k < n; k++)
        idx[k] = (uint32_t)k;
    qsort_r(idx, (size_t)n, sizeof *idx, compare_time_index, a->store.times);
    for (long k = 0; k < n; k++)
        rank[idx[k]] = (uint32_t)k;
    free(idx);
    return CS_OK;
}

/* ---- construction -------------------------------------------------------------- */

static double global_chunks_estimate(const cs_collective *c, int ranks, int chunks)
{
    double p = ranks, ch = chunks;
    switch (c->kind) {
    case CS_COLL_ALLGATHER: case CS_COLL_GATHER: case CS_COLL_SCATTER:
    case CS_COLL_REDUCESCATTER:
        return p * ch;
    case CS_COLL_ALLTOALL:
        return p * p * ch;
    case CS_COLL_CUSTOM:
        return c->custom_global_chunks;
    default:
        return ch;
    }
}

int algorithm_new(const cs_collective *c, const char *topology_name, int ranks, int chunks,
                  int steps, cs_algorithm **out, cs_error *err)
{
    *out = NULL;
    if (!c)
        return cs_error_set(err, CS_EINVAL, "collective", "collective is missing");
    if (ranks < 1 || ranks > ALG_MAX_RANKS)
        return cs_error_set(err, CS_EINVAL, "ranks", "ranks %d out of range [1, %d]", ranks,
                            ALG_MAX_RANKS);
    if (chunks < 1)
        return cs_error_set(err, CS_EINVAL, "chunks", "chunks must be >= 1, got %d", chunks);
    if (steps < 0 || steps > ALG_MAX_STEPS)
        return cs_error_set(err, CS_EINVAL, "steps", "steps %d out of range [0, %d]", steps,
                            ALG_MAX_STEPS);
    if (global_chunks_estimate(c, ranks, chunks) > (double)ALG_MAX_GLOBAL_CHUNKS)
        return cs_error_set(err, CS_ELIMIT, "chunks",
                            "%s with %d chunks on %d ranks has %.0f global chunks, more than "
                            "the %ld an algorithm can number (chunk ids are 32-bit)",
                            collective_kind_name(c->kind), chunks, ranks,
                            global_chunks_estimate(c, ranks, chunks), ALG_MAX_GLOBAL_CHUNKS);
    cs_algorithm *a = calloc(1, sizeof *a);
    if (!a)
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
    int rc = collective_copy(&a->collective, c, err);
    if (rc != CS_OK) {
        free(a);
        return rc;
    }
    rc = collective_validate(&a->collective, ranks, err);
    if (rc != CS_OK) {
        collective_free(&a->collective);
        free(a);
        return rc;
    }
    snprintf(a->topology, sizeof a->topology, "%s", topology_name ? topology_name : "");
    a->ranks = ranks;
    a->chunks = chunks;
    a->global_chunks = collective_global_chunks(&a->collective, ranks, chunks);
    a->steps = steps;
    a->rounds_per_step = malloc(sizeof(int) * (size_t)(steps > 0 ? steps : 1));
    if (!a->rounds_per_step) {
        algorithm_free(a);
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
    }
    for (int s = 0; s < steps; s++)
        a->rounds_per_step[s] = 1;
    a->rounds = steps;
    /* columns start at the width their valid values need */
    a->store.chunk.width = width_for(a->global_chunks > 0 ? a->global_chunks - 1 : 0);
    a->store.src.width = a->store.dst.width = width_for(ranks - 1);
    a->store.step.width = width_for(steps > 0 ? steps - 1 : 0);
    *out = a;
    return CS_OK;
}

static void store_free(cs_send_store *st)
{
    free(st->chunk.data);
    free(st->src.data);
    free(st->dst.data);
    free(st->step.data);
    free(st->reduce);
    free(st->start.data);
    free(st->end.data);
    free(st->times);
    free(st->time_slots);
    memset(st, 0, sizeof *st);
}

void algorithm_free(cs_algorithm *a)
{
    if (!a)
        return;
    collective_free(&a->collective);
    free(a->rounds_per_step);
    store_free(&a->store);
    free(a);
}

/* Room for `cap` sends in every column (exactly cap: callers choose growth). */
static int store_resize(cs_send_store *st, long cap)
{
    if ((size_t)cap > SIZE_MAX / 8)
        return CS_ENOMEM;
    if (column_resize(&st->chunk, cap) || column_resize(&st->src, cap) ||
        column_resize(&st->dst, cap) || column_resize(&st->step, cap))
        return CS_ENOMEM;
    if (st->start.data && (column_resize(&st->start, cap) || column_resize(&st->end, cap)))
        return CS_ENOMEM;
    size_t old_bytes = st->reduce ? (size_t)(st->cap + 7) / 8 : 0, bytes = (size_t)(cap + 7) / 8;
    unsigned char *r = realloc(st->reduce, bytes > 0 ? bytes : 1);
    if (!r)
        return CS_ENOMEM;
    if (bytes > old_bytes)
        memset(r + old_bytes, 0, bytes - old_bytes);
    st->reduce = r;
    st->cap = cap;
    return CS_OK;
}

int algorithm_reserve_sends(cs_algorithm *a, long n)
{
    if (n <= a->store.cap)
        return CS_OK;
    return store_resize(&a->store, n);
}

static int grow_for(cs_algorithm *a, long need)
{
    if (need <= a->store.cap)
        return CS_OK;
    long cap = a->store.cap ? a->store.cap : 64;
    while (cap < need)
        cap += cap / 2 + 16;
    return store_resize(&a->store, cap);
}

size_t algorithm_storage_bytes(const cs_algorithm *a)
{
    const cs_send_store *st = &a->store;
    size_t cap = (size_t)st->cap;
    size_t b = cap * (size_t)(st->chunk.width + st->src.width + st->dst.width + st->step.width) +
               (cap + 7) / 8;
    if (st->start.data)
        b += cap * (size_t)(st->start.width + st->end.width);
    if (st->times)
        b += (size_t)st->times_cap * sizeof(double) +
             (size_t)st->time_slots_cap * sizeof(uint32_t);
    return b;
}

static inline bool send_is_timed(double start, double end)
{
    return isfinite(start) && isfinite(end);
}

/* Writes send i (i < cap) into the columns, widening them as needed. */
static int store_send(cs_algorithm *a, long i, long chunk, int src, int dst, int step, cs_op op,
                      double start_us, double end_us)
{
    cs_send_store *st = &a->store;
    if (!fits_int32(chunk))
        return CS_ELIMIT;
    int rc;
    if ((rc = column_admit(&st->chunk, a->nsends, st->cap, chunk)) ||
        (rc = column_admit(&st->src, a->nsends, st->cap, src)) ||
        (rc = column_admit(&st->dst, a->nsends, st->cap, dst)) ||
        (rc = column_admit(&st->step, a->nsends, st->cap, step)))
        return rc;
    long ks = 0, ke = 0;
    if (!isnan(start_us) || !isnan(end_us) || st->start.data) {
        if ((rc = times_columns_init(a)) || (rc = time_index(st, start_us, 0, &ks)) ||
            (rc = time_index(st, end_us, 1, &ke)) ||
            (rc = column_admit(&st->start, a->nsends, st->cap, ks)) ||
            (rc = column_admit(&st->end, a->nsends, st->cap, ke)))
            return rc;
    }
    column_put(&st->chunk, i, (int32_t)chunk);
    column_put(&st->src, i, src);
    column_put(&st->dst, i, dst);
    column_put(&st->step, i, step);
    if (op == CS_OP_REDUCE)
        st->reduce[i >> 3] |= (unsigned char)(1u << (i & 7));
    else
        st->reduce[i >> 3] &= (unsigned char)~(1u << (i & 7));
    if (st->start.data) {
        column_put(&st->start, i, (int32_t)ks);
        column_put(&st->end, i, (int32_t)ke);
    }
    return CS_OK;
}

int algorithm_add_timed_send(cs_algorithm *a, long chunk, int src, int dst, int step,
                             cs_op op, double start_us, double end_us)
{
    int rc = grow_for(a, a->nsends + 1);
    if (rc == CS_OK)
        rc = store_send(a, a->nsends, chunk, src, dst, step, op, start_us, end_us);
    if (rc != CS_OK)
        return rc;
    a->nsends++;
    a->store.ntimed += send_is_timed(start_us, end_us);
    return CS_OK;
}

int algorithm_add_send(cs_algorithm *a, long chunk, int src, int dst, int step, cs_op op)
{
    return algorithm_add_timed_send(a, chunk, src, dst, step, op, NAN, NAN);
}

int algorithm_set_send(cs_algorithm *a, long i, const cs_send *s)
{
    bool was = send_is_timed(algorithm_send_start_us(a, i), algorithm_send_end_us(a, i));
    int rc = store_send(a, i, s->chunk, s->src, s->dst, s->step, s->op, s->start_us, s->end_us);
    if (rc != CS_OK)
        return rc;
    a->store.ntimed += (long)send_is_timed(s->start_us, s->end_us) - (long)was;
    return CS_OK;
}

/* Whether v (>= 0) fits c as it is (no widening). */
static inline bool column_holds(const cs_column *c, unsigned long v)
{
    return v < (c->width == 1 ? 0x100ul : c->width == 2 ? 0x10000ul : 0x80000000ul);
}

int algorithm_put_send(cs_algorithm *a, long i, long chunk, int src, int dst, int step, cs_op op)
{
    cs_send_store *st = &a->store;
    /* a builder's fill over placeholders: every value fits, no time columns */
    if (!st->start.data && column_holds(&st->chunk, (unsigned long)chunk) &&
        column_holds(&st->src, (unsigned)src) && column_holds(&st->dst, (unsigned)dst) &&
        column_holds(&st->step, (unsigned)step)) {
        column_put(&st->chunk, i, (int32_t)chunk);
        column_put(&st->src, i, src);
        column_put(&st->dst, i, dst);
        column_put(&st->step, i, step);
        unsigned char bit = (unsigned char)(1u << (i & 7));
        if (op == CS_OP_REDUCE)
            st->reduce[i >> 3] |= bit;
        else
            st->reduce[i >> 3] &= (unsigned char)~bit;
        return CS_OK;
    }
    if (st->start.data) {
        cs_send s = {chunk, src, dst, step, op, NAN, NAN};
        return algorithm_set_send(a, i, &s);
    }
    /* no time columns: every send is untimed, so ntimed stays 0 */
    return store_send(a, i, chunk, src, dst, step, op, NAN, NAN);
}

/* v[0..n) into c at idx[0..n), the width dispatched once. */
static void column_scatter(cs_column *c, int n, const long *idx, const int32_t *v)
{
    switch (c->width) {
    case 1: for (int j = 0; j < n; j++) ((uint8_t *)c->data)[idx[j]] = (uint8_t)v[j]; break;
    case 2: for (int j = 0; j < n; j++) ((uint16_t *)c->data)[idx[j]] = (uint16_t)v[j]; break;
    default: for (int j = 0; j < n; j++) ((int32_t *)c->data)[idx[j]] = v[j]; break;
    }
}

static bool column_holds_all(const cs_column *c, int n, const int32_t *v)
{
    uint32_t any = 0;
    for (int j = 0; j < n; j++)
        any |= (uint32_t)v[j];
    /* a negative value sets the top bit: never held below 4 bytes */
    return c->width == 4 ? true : any < (c->width == 1 ? 0x100u : 0x10000u);
}

int algorithm_put_sends(cs_algorithm *a, int n, const long *idx, const int32_t *chunk,
                        const int32_t *src, const int32_t *dst, const int32_t *step,
                        const unsigned char *reduce)
{
    cs_send_store *st = &a->store;
    if (st->start.data || !column_holds_all(&st->chunk, n, chunk) ||
        !column_holds_all(&st->src, n, src) || !column_holds_all(&st->dst, n, dst) ||
        !column_holds_all(&st->step, n, step)) {
        for (int j = 0; j < n; j++) {
            int rc = algorithm_put_send(a, idx[j], chunk[j], src[j], dst[j], step[j],
                                        reduce[j] ? CS_OP_REDUCE : CS_OP_COPY);
            if (rc != CS_OK)
                return rc;
        }
        return CS_OK;
    }
    column_scatter(&st->chunk, n, idx, chunk);
    column_scatter(&st->src, n, idx, src);
    column_scatter(&st->dst, n, idx, dst);
    column_scatter(&st->step, n, idx, step);
    for (int j = 0; j < n; j++) {
        unsigned char bit = (unsigned char)(1u << (idx[j] & 7));
        if (reduce[j])
            st->reduce[idx[j] >> 3] |= bit;
        else
            st->reduce[idx[j] >> 3] &= (unsigned char)~bit;
    }
    return CS_OK;
}

/* Values at..at+n-1 of c all equal to value at (by doubling copies). */
static void fill_copies(cs_column *c, long at, long n)
{
    char *base = (char *)c->data + (size_t)at * (size_t)c->width;
    size_t have = 1, want = (size_t)n;
    while (have < want) {
        size_t take = have < want - have ? have : want - have;
        memcpy(base + have * (size_t)c->width, base, take * (size_t)c->width);
        have += take;
    }
}

static void copy_reduce_bit(unsigned char *r, long from, long i)
{
    if (r[from >> 3] & (1u << (from & 7)))
        r[i >> 3] |= (unsigned char)(1u << (i & 7));
    else
        r[i >> 3] &= (unsigned char)~(1u << (i & 7));
}

int algorithm_add_send_copies(cs_algorithm *a, long n, long chunk, int src, int dst, int step,
                              cs_op op)
{
    if (n <= 0)
        return CS_OK;
    long at = a->nsends;
    int rc = grow_for(a, at + n);
    if (rc == CS_OK)
        rc = store_send(a, at, chunk, src, dst, step, op, NAN, NAN);
    if (rc != CS_OK)
        return rc;
    cs_send_store *st = &a->store;
    /* the first copy's encoded values, doubled column by column */
    cs_column *cols[6] = {&st->chunk, &st->src, &st->dst, &st->step, &st->start, &st->end};
    for (int c = 0; c < 6; c++)
        if (cols[c]->data)
            fill_copies(cols[c], at, n);
    for (long i = at + 1; i < at + n && (i & 7); i++)
        copy_reduce_bit(st->reduce, at, i);
    long b0 = (at + 8) / 8, b1 = (at + n) / 8;   /* whole bytes after the first send's */
    if (b1 > b0)
        memset(st->reduce + b0, op == CS_OP_REDUCE ? 0xff : 0, (size_t)(b1 - b0));
    for (long i = b1 * 8 > at + 1 ? b1 * 8 : at + 1; i < at + n; i++)
        copy_reduce_bit(st->reduce, at, i);
    a->nsends = at + n;
    return CS_OK;
}

int algorithm_set_send_step(cs_algorithm *a, long i, int step)
{
    int rc = column_admit(&a->store.step, a->nsends, a->store.cap, step);
    if (rc == CS_OK)
        column_put(&a->store.step, i, step);
    return rc;
}

void algorithm_truncate_sends(cs_algorithm *a, long n)
{
    if (n < 0 || n >= a->nsends)
        return;
    for (long i = n; i < a->nsends; i++)
        a->store.ntimed -= send_is_timed(algorithm_send_start_us(a, i), algorithm_send_end_us(a, i));
    a->nsends = n;
}

int algorithm_clone(const cs_algorithm *a, cs_algorithm **out, cs_error *err)
{
    cs_algorithm *b = NULL;
    int rc = algorithm_new(&a->collective, a->topology, a->ranks, a->chunks, a->steps, &b, err);
    if (rc != CS_OK)
        return rc;
    memcpy(b->rounds_per_step, a->rounds_per_step, sizeof(int) * (size_t)a->steps);
    b->rounds = a->rounds;
    b->global_chunks = a->global_chunks;
    memcpy(b->method, a->method, sizeof b->method);
    memcpy(b->optimality, a->optimality, sizeof b->optimality);
    b->timed_chunk_bytes = a->timed_chunk_bytes;
    b->switch_nodes = a->switch_nodes;
    const cs_send_store *sa = &a->store;
    cs_send_store *sb = &b->store;
    long n = a->nsends;
    size_t bits = (size_t)(n + 7) / 8;
    bool ok = column_copy(&sb->chunk, &sa->chunk, n) == CS_OK &&
              column_copy(&sb->src, &sa->src, n) == CS_OK &&
              column_copy(&sb->dst, &sa->dst, n) == CS_OK &&
              column_copy(&sb->step, &sa->step, n) == CS_OK &&
              (sb->reduce = malloc(bits > 0 ? bits : 1)) != NULL;
    if (ok && bits > 0)
        memcpy(sb->reduce, sa->reduce, bits);
    if (ok && sa->start.data)
        ok = column_copy(&sb->start, &sa->start, n) == CS_OK &&
             column_copy(&sb->end, &sa->end, n) == CS_OK &&
             (sb->times = malloc((size_t)sa->times_cap * sizeof(double))) != NULL &&
             (sb->time_slots = malloc((size_t)sa->time_slots_cap * sizeof(uint32_t))) != NULL;
    if (!ok) {
        algorithm_free(b);
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory copying %ld sends", n);
    }
    if (sa->start.data) {
        memcpy(sb->times, sa->times, (size_t)sa->ntimes * sizeof(double));
        memcpy(sb->time_slots, sa->time_slots, (size_t)sa->time_slots_cap * sizeof(uint32_t));
        sb->ntimes = sa->ntimes;
        sb->times_cap = sa->times_cap;
        sb->time_slots_cap = sa->time_slots_cap;
    }
    sb->cap = n;
    sb->ntimed = sa->ntimed;
    b->nsends = n;
    *out = b;
    return CS_OK;
}

int algorithm_set_steps(cs_algorithm *a, int steps, cs_error *err)
{
    if (steps < 0 || steps > ALG_MAX_STEPS)
        return cs_error_set(err, CS_EINVAL, "steps", "steps %d out of range [0, %d]", steps,
                            ALG_MAX_STEPS);
    int *r = realloc(a->rounds_per_step, sizeof(int) * (size_t)(steps > 0 ? steps : 1));
    if (!r)
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
    for (int s = a->steps; s < steps; s++)
        r[s] = 1;
    a->rounds_per_step = r;
    a->steps = steps;
    algorithm_update_rounds(a);
    return CS_OK;
}

void algorithm_update_rounds(cs_algorithm *a)
{
    long sum = 0;
    for (int s = 0; s < a->steps; s++)
        sum += a->rounds_per_step[s];
    a->rounds = sum > 0x7fffffff ? 0x7fffffff : (int)sum;
}

bool algorithm_is_timed(const cs_algorithm *a)
{
    return a->nsends > 0 && a->store.ntimed == a->nsends;
}

int algorithm_steps_from_start_times(cs_algorithm *a, cs_error *err)
{
    if (a->nsends == 0)
        return CS_OK;
    if (!algorithm_is_timed(a))
        return cs_error_set(err, CS_EINVAL, "sends", "steps from start times need a timed "
                            "schedule (%ld of %ld sends timed)", a->store.ntimed, a->nsends);
    long D = a->store.ntimes;
    uint32_t *step_of = calloc((size_t)D, sizeof *step_of);   /* used start entries, then steps */
    uint32_t *order = malloc((size_t)D * sizeof *order);
    cs_column col = {NULL, 1};
    if (!step_of || !order) {
        free(step_of);
        free(order);
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory renumbering steps");
    }
    for (long i = 0; i < a->nsends; i++)
        step_of[algorithm_send_start_index(a, i)] = 1;
    long nused = 0;
    for (long k = 0; k < D; k++)
        if (step_of[k])
            order[nused++] = (uint32_t)k;
    qsort_r(order, (size_t)nused, sizeof *order, compare_time_index, a->store.times);
    int rc = CS_OK;
    if (nused > ALG_MAX_STEPS) {
        rc = cs_error_set(err, CS_ELIMIT, "steps", "%ld distinct start times: more than %d steps",
                          nused, ALG_MAX_STEPS);
        goto done;
    }
    for (long s = 0; s < nused; s++)
        step_of[order[s]] = (uint32_t)s;
    col.width = width_for(nused - 1);
    col.data = malloc((size_t)a->store.cap * (size_t)col.width);
    send_array_advise(col.data, (size_t)a->store.cap * (size_t)col.width);
    if (!col.data) {
        rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory renumbering steps");
        goto done;
    }
    for (long i = 0; i < a->nsends; i++)
        column_put(&col, i, (int32_t)step_of[algorithm_send_start_index(a, i)]);
    if ((rc = algorithm_set_steps(a, (int)nused, err)) != CS_OK) {
        free(col.data);
        goto done;
    }
    free(a->store.step.data);
    a->store.step = col;
    for (int s = 0; s < a->steps; s++)
        a->rounds_per_step[s] = 1;
    algorithm_update_rounds(a);
done:
    free(step_of);
    free(order);
    return rc;
}

/* ---- bandwidth fitting ------------------------------------------------------------- */

int algorithm_fit_rounds(cs_algorithm *a, const cs_topology *t, cs_error *err)
{
    if (!t || !t->finalized)
        return cs_error_set(err, CS_EINVAL, "topology", "topology is not finalized");
    if (a->ranks != t->ranks)
        return cs_error_set(err, CS_EINVAL, "ranks", "algorithm has %d ranks, topology %d",
                            a->ranks, t->ranks);
    int rc = CS_OK;
    long n = a->nsends;
    int S = a->steps;
    long *step_begin = calloc((size_t)S + 2, sizeof(long));
    int *order = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    int *link_of = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    long *link_count = calloc((size_t)t->nlinks + 1, sizeof(long));
    long *set_count = calloc((size_t)t->nshared + 1, sizeof(long));
    int *set_begin = calloc((size_t)t->nlinks + 2, sizeof(int));
    int *set_list = NULL;
    int *touched = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    if (!step_begin || !order || !link_of || !link_count || !set_count || !set_begin ||
        !touched || n > 0x7fffffff) {
        rc = cs_error_set(err, n > 0x7fffffff ? CS_ELIMIT : CS_ENOMEM, NULL,
                          "cannot fit rounds for %ld sends", n);
        goto done;
    }
    /* link -> shared sets containing it */
    long nmember = 0;
    for (int k = 0; k < t->nshared; k++) {
        nmember += t->shared[k].nlinks;
        for (int j = 0; j < t->shared[k].nlinks; j++)
            set_begin[t->shared[k].links[j] + 1]++;
    }
    for (int l = 0; l < t->nlinks; l++)
        set_begin[l + 1] += set_begin[l];
    set_list = malloc(sizeof(int) * (size_t)(nmember > 0 ? nmember : 1));
    int *fill = malloc(sizeof(int) * (size_t)(t->nlinks + 1));
    if (!set_list || !fill) {
        free(fill);
        rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
        goto done;
    }
    memcpy(fill, set_begin, sizeof(int) * (size_t)(t->nlinks + 1));
    for (int k = 0; k < t->nshared; k++)
        for (int j = 0; j < t->shared[k].nlinks; j++)
            set_list[fill[t->shared[k].links[j]]++] = k;
    free(fill);

    for (long i = 0; i < n; i++) {
        const cs_send sv = algorithm_send(a, i), *s = &sv;
        if (s->step < 0 || s->step >= S) {
            rc = cs_error_set(err, CS_EINVAL, "sends", "send %ld: step %d out of range [0, %d)",
                              i, s->step, S);
            goto done;
        }
        if (s->src < 0 || s->src >= t->ranks || s->dst < 0 || s->dst >= t->ranks ||
            (link_of[i] = topology_find_link(t, s->src, s->dst)) < 0) {
            rc = cs_error_set(err, CS_EINVAL, "sends", "send %ld (chunk %ld, %d->%d, step %d): "
                              "no link %d->%d", i, s->chunk, s->src, s->dst, s->step, s->src,
                              s->dst);
            goto done;
        }
        step_begin[s->step + 1]++;
    }
    for (int s = 0; s < S; s++)
        step_begin[s + 1] += step_begin[s];
    {
        long *pos = malloc(sizeof(long) * (size_t)(S + 1));
        if (!pos) {
            rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
            goto done;
        }
        memcpy(pos, step_begin, sizeof(long) * (size_t)(S + 1));
        for (long i = 0; i < n; i++)
            order[pos[algorithm_send_step(a, i)]++] = (int)i;
        free(pos);
    }
    for (int s = 0; s < S; s++) {
        long need = 1;
        long ntouched = 0;
        for (long k = step_begin[s]; k < step_begin[s + 1]; k++) {
            int l = link_of[order[k]];
            if (link_count[l]++ == 0)
                touched[ntouched++] = l;
            for (int m = set_begin[l]; m < set_begin[l + 1]; m++)
                set_count[set_list[m]]++;
        }
        for (long k = 0; k < ntouched; k++) {
            int l = touched[k];
            long lanes = t->links[l].lanes;
            long r = (link_count[l] + lanes - 1) / lanes;
            if (r > need)
                need = r;
            for (int m = set_begin[l]; m < set_begin[l + 1]; m++) {
                int set = set_list[m];
                if (set_count[set] == 0)
                    continue;
                long sl = t->shared[set].lanes;
                r = (set_count[set] + sl - 1) / sl;
                if (r > need)
                    need = r;
                set_count[set] = 0;
            }
            link_count[l] = 0;
        }
        if (need > 0x7fffffff / (S > 0 ? S : 1)) {
            rc = cs_error_set(err, CS_ELIMIT, "rounds_per_step", "step %d needs %ld rounds", s,
                              need);
            goto done;
        }
        a->rounds_per_step[s] = (int)need;
    }
    algorithm_update_rounds(a);
done:
    free(step_begin);
    free(order);
    free(link_of);
    free(link_count);
    free(set_count);
    free(set_begin);
    free(set_list);
    free(touched);
    return rc;
}

/* ---- sorting --------------------------------------------------------------------- */

static int compare_sends(const void *pa, const void *pb, void *ctx)
{
    const cs_algorithm *alg = ctx;
    uint32_t i = *(const uint32_t *)pa, j = *(const uint32_t *)pb;
    cs_send a = algorithm_send(alg, i), b = algorithm_send(alg, j);
    if (a.step != b.step)
        return a.step < b.step ? -1 : 1;
    if (a.chunk != b.chunk)
        return a.chunk < b.chunk ? -1 : 1;
    if (a.src != b.src)
        return a.src < b.src ? -1 : 1;
    if (a.dst != b.dst)
        return a.dst < b.dst ? -1 : 1;
    if (a.op != b.op)
        return a.op < b.op ? -1 : 1;
    /* timed sends: earlier start first; NaN (untimed) compares equal */
    if (a.start_us < b.start_us)
        return -1;
    if (a.start_us > b.start_us)
        return 1;
    return i < j ? -1 : i > j;
}

static int column_gather(cs_column *c, const uint32_t *perm, long n)
{
    cs_column g = {malloc((size_t)(n > 0 ? n : 1) * (size_t)c->width), c->width};
    if (!g.data)
        return CS_ENOMEM;
    send_array_advise(g.data, (size_t)n * (size_t)c->width);
    for (long k = 0; k < n; k++)
        column_put(&g, k, cs_column_get(c, perm[k]));
    free(c->data);
    *c = g;
    return CS_OK;
}

/* Reorders the sends: new send k is old send perm[k].  Column by column, so
 * the extra memory is one column at a time.  On CS_ENOMEM part of the columns
 * may be reordered: callers treat the algorithm as lost. */
static int store_permute(cs_algorithm *a, const uint32_t *perm)
{
    cs_send_store *st = &a->store;
    long n = a->nsends;
    size_t bytes = (size_t)(n + 7) / 8;
    unsigned char *r = calloc(bytes > 0 ? bytes : 1, 1);
    if (!r || column_gather(&st->chunk, perm, n) || column_gather(&st->src, perm, n) ||
        column_gather(&st->dst, perm, n) || column_gather(&st->step, perm, n) ||
        (st->start.data && (column_gather(&st->start, perm, n) ||
                            column_gather(&st->end, perm, n)))) {
        free(r);
        return CS_ENOMEM;
    }
    for (long k = 0; k < n; k++)
        if ((st->reduce[perm[k] >> 3] >> (perm[k] & 7)) & 1)
            r[k >> 3] |= (unsigned char)(1u << (k & 7));
    free(st->reduce);
    st->reduce = r;
    st->cap = n;
    return CS_OK;
}

int algorithm_sort_sends(cs_algorithm *a)
{
    long n = a->nsends;
    if (n < 2)
        return CS_OK;
    if (n > 0xffffffffL)
        return CS_ELIMIT;
    uint32_t *perm = malloc((size_t)n * sizeof *perm);
    if (!perm)
        return CS_ENOMEM;
    for (long k = 0; k < n; k++)
        perm[k] = (uint32_t)k;
    qsort_r(perm, (size_t)n, sizeof *perm, compare_sends, a);
    int rc = store_permute(a, perm);
    free(perm);
    return rc;
}

static uint32_t key_start_rank(const void *ctx, uint32_t i)
{
    const time_order *o = ctx;
    return o->trank[algorithm_send_start_index(o->a, i)];
}

int algorithm_sort_by_time(cs_algorithm *a)
{
    long n = a->nsends;
    if (n < 2)
        return CS_OK;
    if (!algorithm_is_timed(a))
        return CS_EINVAL;
    if (n > 0xffffffffL)
        return CS_ELIMIT;
    uint32_t *trank = malloc(sizeof *trank * (size_t)algorithm_time_count(a));
    if (!trank || algorithm_time_ranks(a, trank) != CS_OK) {
        free(trank);
        return CS_ENOMEM;
    }
    time_order to = {a, trank};
    long k = 1;
    while (k < n && time_order_compare(&to, (uint32_t)(k - 1), (uint32_t)k) < 0)
        k++;
    int rc = CS_OK;
    uint32_t *perm = NULL;
    if (k < n) {
        perm = malloc(sizeof *perm * (size_t)n);
        rc = perm && send_group_by_key((uint32_t)n, NULL, key_start_rank, &to,
                                       (uint32_t)algorithm_time_count(a), perm, NULL) >= 0
             ? CS_OK : CS_ENOMEM;
        for (long b = 0; rc == CS_OK && b < n;) {
            long e = b + 1;
            uint32_t sb = key_start_rank(&to, perm[b]);
            while (e < n && key_start_rank(&to, perm[e]) == sb)
                e++;
            sort_by_time(&to, perm + b, e - b);
            b = e;
        }
        if (rc == CS_OK)
            rc = store_permute(a, perm);
    }
    free(perm);
    free(trank);
    return rc;
}

/* ---- JSON ------------------------------------------------------------------------ */

/* Reads an integer member.  required: absent is an error; else *out keeps its
 * default. */
static int json_get_long(const json_t *obj, const char *key, const char *path, bool required,
                         long lo, long hi, long *out, cs_error *err)
{
    json_t *v = json_object_get(obj, key);
    if (!v) {
        if (required)
            return cs_error_set(err, CS_EINVAL, path, "%s is required", path);
        return CS_OK;
    }
    if (!json_is_integer(v))
        return cs_error_set(err, CS_EINVAL, path, "%s must be an integer", path);
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi)
        return cs_error_set(err, CS_EINVAL, path, "%s: %lld out of range [%ld, %ld]", path,
                            (long long)x, lo, hi);
    *out = (long)x;
    return CS_OK;
}

static int json_get_string(const json_t *obj, const char *key, const char *path, char *buf,
                           size_t size, cs_error *err)
{
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return CS_OK;
    if (!json_is_string(v))
        return cs_error_set(err, CS_EINVAL, path, "%s must be a string", path);
    if (json_string_length(v) >= size)
        return cs_error_set(err, CS_EINVAL, path, "%s is longer than %zu characters", path,
                            size - 1);
    snprintf(buf, size, "%s", json_string_value(v));
    return CS_OK;
}

static int json_get_time(const json_t *obj, const char *key, const char *path, double *out,
                         cs_error *err)
{
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        *out = NAN;
        return CS_OK;
    }
    if (!json_is_number(v))
        return cs_error_set(err, CS_EINVAL, path, "%s must be a number", path);
    double x = json_number_value(v);
    if (!isfinite(x) || x < 0)
        return cs_error_set(err, CS_EINVAL, path, "%s must be a finite number >= 0", path);
    *out = x;
    return CS_OK;
}

/* Integer member of a send; formats the field path only on error (parsing
 * millions of sends must not pay for a snprintf per field). */
static int send_int(const json_t *js, long i, const char *key, long lo, long hi,
                    const char *range_what, long *out, cs_error *err)
{
    json_t *v = json_object_get(js, key);
    char path[CS_ERROR_FIELD_MAX];
    if (v && json_is_integer(v)) {
        json_int_t x = json_integer_value(v);
        if (x >= lo && x <= hi) {
            *out = (long)x;
            return CS_OK;
        }
        snprintf(path, sizeof path, "sends[%ld].%s", i, key);
        if (range_what)
            return cs_error_set(err, CS_EINVAL, path, "%s: %s %lld out of range for %ld %s", path,
                                key, (long long)x, hi + 1, range_what);
        return cs_error_set(err, CS_EINVAL, path, "%s: %lld out of range [%ld, %ld]", path,
                            (long long)x, lo, hi);
    }
    snprintf(path, sizeof path, "sends[%ld].%s", i, key);
    if (!v)
        return cs_error_set(err, CS_EINVAL, path, "%s is required", path);
    return cs_error_set(err, CS_EINVAL, path, "%s must be an integer", path);
}

static int parse_send(const json_t *js, long i, cs_algorithm *a, cs_error *err)
{
    char path[CS_ERROR_FIELD_MAX];
    if (!json_is_object(js)) {
        snprintf(path, sizeof path, "sends[%ld]", i);
        return cs_error_set(err, CS_EINVAL, path, "%s must be an object", path);
    }
    long chunk = -1, src = -1, dst = -1, step = -1;
    int rc;
    if ((rc = send_int(js, i, "chunk", 0, a->global_chunks - 1, "global chunks", &chunk, err)) ||
        (rc = send_int(js, i, "src", 0, a->ranks + a->switch_nodes - 1, NULL, &src, err)) ||
        (rc = send_int(js, i, "dst", 0, a->ranks + a->switch_nodes - 1, NULL, &dst, err)) ||
        (rc = send_int(js, i, "step", 0, (long)a->steps - 1, "steps", &step, err))) {
        /* ranks get the wording of the contract's example */
        if (err && (strstr(err->field, ".src") || strstr(err->field, ".dst")) &&
            strstr(err->message, "out of range")) {
            json_int_t r = json_integer_value(json_object_get(js, strstr(err->field, ".src")
                                                                  ? "src" : "dst"));
            snprintf(path, sizeof path, "%s", err->field);
            cs_error_set(err, CS_EINVAL, path, "%s: rank %lld out of range for %d ranks", path,
                         (long long)r, a->ranks);
        }
        return rc;
    }
    if (src == dst) {
        snprintf(path, sizeof path, "sends[%ld].dst", i);
        return cs_error_set(err, CS_EINVAL, path, "%s: rank %ld sends to itself", path, dst);
    }
    cs_op op = CS_OP_COPY;
    json_t *jop = json_object_get(js, "op");
    if (jop) {
        const char *name = json_string_value(jop);
        if (name && strcmp(name, "copy") == 0) {
            op = CS_OP_COPY;
        } else if (name && strcmp(name, "reduce") == 0) {
            op = CS_OP_REDUCE;
        } else {
            snprintf(path, sizeof path, "sends[%ld].op", i);
            if (!name)
                return cs_error_set(err, CS_EINVAL, path, "%s must be a string", path);
            return cs_error_set(err, CS_EINVAL, path, "%s: \"%s\" is not an op (copy or reduce)",
                                path, name);
        }
    }
    double start = NAN, end = NAN;
    json_t *js_start = json_object_get(js, "start_us"), *js_end = json_object_get(js, "end_us");
    if (js_start || js_end) {
        snprintf(path, sizeof path, "sends[%ld].start_us", i);
        if ((rc = json_get_time(js, "start_us", path, &start, err)) != CS_OK)
            return rc;
        snprintf(path, sizeof path, "sends[%ld].end_us", i);
        if ((rc = json_get_time(js, "end_us", path, &end, err)) != CS_OK)
            return rc;
        if (isnan(start) != isnan(end))
            return cs_error_set(err, CS_EINVAL, path,
                                "sends[%ld]: start_us and end_us must be given together", i);
        if (!isnan(start) && end < start)
            return cs_error_set(err, CS_EINVAL, path, "%s: %g is before start_us %g", path, end,
                                start);
    }
    if ((rc = algorithm_add_timed_send(a, chunk, (int)src, (int)dst, (int)step, op, start,
                                       end)) != CS_OK)
        return cs_error_set(err, rc, "sends", rc == CS_ELIMIT
                            ? "send %ld: more than 2^32 distinct times"
                            : "out of memory at send %ld", i);
    return CS_OK;
}

/* Prepends `prefix` to err->field ("frontier[2]" + "sends[1].dst"). */
static void prefix_field(cs_error *err, const char *prefix)
{
    if (!err)
        return;
    char f[2 * CS_ERROR_FIELD_MAX + 8];
    size_t lp = strlen(prefix), lf = strlen(err->field);
    memcpy(f, prefix, lp);
    size_t n = lp;
    if (lf) {
        f[n++] = '.';
        memcpy(f + n, err->field, lf);
        n += lf;
    }
    if (n >= CS_ERROR_FIELD_MAX)
        n = CS_ERROR_FIELD_MAX - 1;
    memcpy(err->field, f, n);
    err->field[n] = '\0';
}

/* Every member but the sends' contents: "sends" must be there and be an
 * array, which is left for the caller to read (algorithm_json_internal.h). */
int algorithm_frame_from_json(const json_t *doc, cs_algorithm **out, cs_error *err)
{
    *out = NULL;
    if (!json_is_object(doc))
        return cs_error_set(err, CS_EINVAL, "", "an algorithm must be a JSON object");
    json_t *jc = json_object_get(doc, "collective");
    if (!jc)
        return cs_error_set(err, CS_EINVAL, "collective", "collective is required");
    cs_collective coll;
    memset(&coll, 0, sizeof coll);
    int rc = collective_from_json(jc, &coll, err);
    if (rc != CS_OK) {
        if (err && strncmp(err->field, "collective", 10) != 0)
            prefix_field(err, "collective");
        return rc;
    }
    long ranks = 0, chunks = 0, steps = 0;
    if ((rc = json_get_long(doc, "ranks", "ranks", true, 1, ALG_MAX_RANKS, &ranks, err)) ||
        (rc = json_get_long(doc, "chunks", "chunks", true, 1, 0x7fffffff, &chunks, err)) ||
        (rc = json_get_long(doc, "steps", "steps", true, 0, ALG_MAX_STEPS, &steps, err))) {
        collective_free(&coll);
        return rc;
    }
    char topo[CS_NAME_MAX] = "";
    if ((rc = json_get_string(doc, "topology", "topology", topo, sizeof topo, err)) != CS_OK) {
        collective_free(&coll);
        return rc;
    }
    cs_algorithm *a = NULL;
    rc = algorithm_new(&coll, topo, (int)ranks, (int)chunks, (int)steps, &a, err);
    collective_free(&coll);
    if (rc != CS_OK) {
        if (err && err->field[0] && strncmp(err->field, "collective", 10) != 0 &&
            strcmp(err->field, "ranks") != 0 && strcmp(err->field, "chunks") != 0 &&
            strcmp(err->field, "steps") != 0)
            prefix_field(err, "collective");
        return rc;
    }
    long g = a->global_chunks;
    if ((rc = json_get_long(doc, "global_chunks", "global_chunks", false, 0, ALG_MAX_GLOBAL_CHUNKS,
                            &g, err)) != CS_OK)
        goto fail;
    if (g != a->global_chunks) {
        rc = cs_error_set(err, CS_EINVAL, "global_chunks",
                          "global_chunks %ld does not match %s with %d ranks and %d chunks "
                          "(expected %ld)", g, collective_kind_name(a->collective.kind),
                          a->ranks, a->chunks, a->global_chunks);
        goto fail;
    }
    json_t *jr = json_object_get(doc, "rounds_per_step");
    if (jr && !json_is_null(jr)) {
        if (!json_is_array(jr)) {
            rc = cs_error_set(err, CS_EINVAL, "rounds_per_step", "rounds_per_step must be an array");
            goto fail;
        }
        if ((long)json_array_size(jr) != steps) {
            rc = cs_error_set(err, CS_EINVAL, "rounds_per_step",
                              "rounds_per_step has %zu entries, steps is %ld",
                              json_array_size(jr), steps);
            goto fail;
        }
        for (long s = 0; s < steps; s++) {
            char path[64];
            snprintf(path, sizeof path, "rounds_per_step[%ld]", s);
            json_t *v = json_array_get(jr, (size_t)s);
            if (!json_is_integer(v) || json_integer_value(v) < 1 ||
                json_integer_value(v) > 0x7fffffff) {
                rc = cs_error_set(err, CS_EINVAL, path, "%s must be an integer >= 1", path);
                goto fail;
            }
            a->rounds_per_step[s] = (int)json_integer_value(v);
        }
    }
    long sum = 0;
    for (long s = 0; s < steps; s++)
        sum += a->rounds_per_step[s];
    if (sum > 0x7fffffff) {
        rc = cs_error_set(err, CS_EINVAL, "rounds_per_step", "rounds_per_step sums to %ld", sum);
        goto fail;
    }
    algorithm_update_rounds(a);
    long rounds = a->rounds;
    if ((rc = json_get_long(doc, "rounds", "rounds", false, 0, 0x7fffffff, &rounds, err)) !=
        CS_OK)
        goto fail;
    if (rounds != a->rounds) {
        rc = cs_error_set(err, CS_EINVAL, "rounds",
                          "rounds %ld is not the sum of rounds_per_step (%d)", rounds, a->rounds);
        goto fail;
    }
    if ((rc = json_get_string(doc, "method", "method", a->method, sizeof a->method, err)) ||
        (rc = json_get_string(doc, "optimality", "optimality", a->optimality,
                              sizeof a->optimality, err)))
        goto fail;
    if (a->optimality[0] && strcmp(a->optimality, "latency") != 0 &&
        strcmp(a->optimality, "bandwidth") != 0 && strcmp(a->optimality, "both") != 0) {
        rc = cs_error_set(err, CS_EINVAL, "optimality",
                          "optimality \"%s\" is not latency, bandwidth, both or \"\"",
                          a->optimality);
        goto fail;
    }
    json_t *jcb = json_object_get(doc, "chunk_bytes");
    if (jcb && !json_is_null(jcb)) {
        if (!json_is_number(jcb) || !isfinite(json_number_value(jcb)) ||
            json_number_value(jcb) < 0) {
            rc = cs_error_set(err, CS_EINVAL, "chunk_bytes",
                              "chunk_bytes must be a finite number >= 0");
            goto fail;
        }
        a->timed_chunk_bytes = json_number_value(jcb);
    }
    json_t *jsn = json_object_get(doc, "switch_nodes");
    if (jsn && !json_is_null(jsn)) {
        if (!json_is_integer(jsn) || json_integer_value(jsn) < 0 ||
            json_integer_value(jsn) > 65536) {
            rc = cs_error_set(err, CS_EINVAL, "switch_nodes",
                              "switch_nodes must be an integer in 0..65536");
            goto fail;
        }
        a->switch_nodes = (int)json_integer_value(jsn);
    }
    json_t *js = json_object_get(doc, "sends");
    if (!js) {
        rc = cs_error_set(err, CS_EINVAL, "sends", "sends is required");
        goto fail;
    }
    if (!json_is_array(js)) {
        rc = cs_error_set(err, CS_EINVAL, "sends", "sends must be an array");
        goto fail;
    }
    *out = a;
    return CS_OK;
fail:
    algorithm_free(a);
    return rc;
}

int algorithm_send_from_json(cs_algorithm *a, const json_t *send, long index, cs_error *err)
{
    return parse_send(send, index, a, err);
}

int algorithm_sends_done(const cs_algorithm *a, cs_error *err)
{
    long ntimed = a->store.ntimed;
    if (ntimed != 0 && ntimed != a->nsends)
        return cs_error_set(err, CS_EINVAL, "sends",
                            "%ld of %ld sends have start_us/end_us: give them on every send or "
                            "none", ntimed, a->nsends);
    return CS_OK;
}

/* The sends of an algorithm document held as a DOM (algorithm_from_json). */
static int sends_from_dom(void *ctx, int index, const json_t *doc, cs_algorithm *a,
                          cs_error *err)
{
    (void)ctx;
    (void)index;
    const json_t *js = json_object_get(doc, "sends");
    size_t n = json_array_size(js);
    if (algorithm_reserve_sends(a, (long)n) != CS_OK)
        return cs_error_set(err, CS_ENOMEM, "sends", "out of memory for %zu sends", n);
    for (size_t i = 0; i < n; i++) {
        int rc = parse_send(json_array_get(js, i), (long)i, a, err);
        if (rc != CS_OK)
            return rc;
    }
    return CS_OK;
}

int algorithm_from_json_with(const json_t *doc, int index, algorithm_sends_fn sends, void *ctx,
                             cs_algorithm **out, cs_error *err)
{
    cs_algorithm *a = NULL;
    int rc = algorithm_frame_from_json(doc, &a, err);
    if (rc != CS_OK) {
        *out = NULL;
        return rc;
    }
    if ((rc = sends(ctx, index, doc, a, err)) != CS_OK ||
        (rc = algorithm_sends_done(a, err)) != CS_OK) {
        algorithm_free(a);
        *out = NULL;
        return rc;
    }
    *out = a;
    return CS_OK;
}

int algorithm_from_json(const json_t *doc, cs_algorithm **out, cs_error *err)
{
    return algorithm_from_json_with(doc, -1, sends_from_dom, NULL, out, err);
}

int algorithm_parse(const char *text, size_t len, cs_algorithm **out, cs_error *err)
{
    *out = NULL;
    json_error_t jerr;
    json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!doc)
        return cs_error_set(err, CS_EINVAL, "", "invalid JSON at line %d column %d: %s",
                            jerr.line, jerr.column, jerr.text);
    int rc = algorithm_from_json(doc, out, err);
    json_decref(doc);
    return rc;
}

int algorithm_load_file(const char *path, cs_algorithm **out, cs_error *err)
{
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    int rc = cs_read_file(path, &text, &len, err);
    if (rc != CS_OK)
        return rc;
    rc = algorithm_parse(text, len, out, err);
    free(text);
    return rc;
}

/* json_object_set_new that tolerates a NULL value (allocation failure) by
 * reporting it through *ok. */
static void set_new(json_t *obj, const char *key, json_t *v, bool *ok)
{
    if (!v || json_object_set_new(obj, key, v) != 0)
        *ok = false;
}

static json_t *algorithm_doc(const cs_algorithm *a, bool with_sends);

json_t *algorithm_to_json(const cs_algorithm *a) { return algorithm_doc(a, true); }

json_t *algorithm_to_json_frame(const cs_algorithm *a) { return algorithm_doc(a, false); }

static json_t *algorithm_doc(const cs_algorithm *a, bool with_sends)
{
    json_t *doc = json_object();
    if (!doc)
        return NULL;
    bool ok = true;
    set_new(doc, "collective", collective_to_json(&a->collective), &ok);
    set_new(doc, "topology", json_string(a->topology), &ok);
    set_new(doc, "ranks", json_integer(a->ranks), &ok);
    set_new(doc, "chunks", json_integer(a->chunks), &ok);
    set_new(doc, "global_chunks", json_integer(a->global_chunks), &ok);
    set_new(doc, "steps", json_integer(a->steps), &ok);
    set_new(doc, "rounds", json_integer(a->rounds), &ok);
    json_t *rps = json_array();
    for (int s = 0; rps && s < a->steps; s++)
        if (json_array_append_new(rps, json_integer(a->rounds_per_step[s])) != 0)
            ok = false;
    set_new(doc, "rounds_per_step", rps, &ok);
    set_new(doc, "method", json_string(a->method), &ok);
    set_new(doc, "optimality", json_string(a->optimality), &ok);
    json_t *sends = json_array();
    bool timed = algorithm_is_timed(a);
    if (timed && a->timed_chunk_bytes > 0)
        set_new(doc, "chunk_bytes", json_real(a->timed_chunk_bytes), &ok);
    if (a->switch_nodes > 0)   /* only then: other documents print as before */
        set_new(doc, "switch_nodes", json_integer(a->switch_nodes), &ok);
    for (long i = 0; with_sends && sends && ok && i < a->nsends; i++) {
        const cs_send sv = algorithm_send(a, i), *s = &sv;
        json_t *js = json_object();
        if (!js) {
            ok = false;
            break;
        }
        set_new(js, "chunk", json_integer(s->chunk), &ok);
        set_new(js, "src", json_integer(s->src), &ok);
        set_new(js, "dst", json_integer(s->dst), &ok);
        set_new(js, "step", json_integer(s->step), &ok);
        set_new(js, "op", json_string(s->op == CS_OP_REDUCE ? "reduce" : "copy"), &ok);
        if (isfinite(s->start_us) && isfinite(s->end_us)) {
            set_new(js, "start_us", json_real(s->start_us), &ok);
            set_new(js, "end_us", json_real(s->end_us), &ok);
        }
        if (json_array_append_new(sends, js) != 0)
            ok = false;
    }
    set_new(doc, "sends", sends, &ok);
    if (!ok) {
        json_decref(doc);
        return NULL;
    }
    return doc;
}

/* ---- cost -------------------------------------------------------------------- */

double algorithm_chunk_bytes(const cs_algorithm *a, double bytes)
{
    return a->chunks > 0 ? bytes / a->chunks : 0.0;
}

double algorithm_cost_us(const cs_algorithm *a, const cs_topology *t, double bytes)
{
    double alpha = 0.0, min_gbps = INFINITY;
    for (int l = 0; l < t->nlinks; l++) {
        if (t->links[l].alpha_us > alpha)
            alpha = t->links[l].alpha_us;
        if (t->links[l].gbps < min_gbps)
            min_gbps = t->links[l].gbps;
    }
    double beta = isfinite(min_gbps) && min_gbps > 0 ? 1.0 / (min_gbps * 1e3) : 0.0;
    double per_chunk = a->chunks > 0 ? (double)a->rounds / a->chunks : 0.0;
    return a->steps * alpha + per_chunk * bytes * beta;
}

/* ---- results ----------------------------------------------------------------- */

int result_new(const char *method, cs_result **out, cs_error *err)
{
    cs_result *r = calloc(1, sizeof *r);
    if (!r) {
        *out = NULL;
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
    }
    snprintf(r->method, sizeof r->method, "%s", method ? method : "");
    r->bound_rounds_per_chunk = 0.0;
    *out = r;
    return CS_OK;
}

/* Frontier order: ascending steps, then descending rounds per chunk. */
static bool frontier_before(const cs_algorithm *x, const cs_algorithm *y)
{
    if (x->steps != y->steps)
        return x->steps < y->steps;
    double rx = (double)x->rounds / x->chunks, ry = (double)y->rounds / y->chunks;
    return rx > ry;
}

int result_add(cs_result *r, cs_algorithm *a)
{
    if (!a)
        return CS_EINVAL;
    cs_algorithm **algs = realloc(r->algs, sizeof *algs * (size_t)(r->nalgs + 1));
    if (!algs) {
        algorithm_free(a);
        return CS_ENOMEM;
    }
    r->algs = algs;
    int pos = r->nalgs;
    while (pos > 0 && frontier_before(a, algs[pos - 1]))
        pos--;
    memmove(&algs[pos + 1], &algs[pos], sizeof *algs * (size_t)(r->nalgs - pos));
    algs[pos] = a;
    r->nalgs++;
    return CS_OK;
}

void result_free(cs_result *r)
{
    if (!r)
        return;
    for (int i = 0; i < r->nalgs; i++)
        algorithm_free(r->algs[i]);
    free(r->algs);
    json_decref(r->stats);
    json_decref(r->topology);
    free(r);
}

static json_t *result_doc(const cs_result *r, bool with_sends);

json_t *result_to_json(const cs_result *r) { return result_doc(r, true); }

json_t *result_to_json_frame(const cs_result *r) { return result_doc(r, false); }

static json_t *result_doc(const cs_result *r, bool with_sends)
{
    json_t *doc = json_object();
    if (!doc)
        return NULL;
    bool ok = true;
    set_new(doc, "method", json_string(r->method), &ok);
    set_new(doc, "reason", json_string(r->reason), &ok);
    json_t *fr = json_array();
    for (int i = 0; fr && ok && i < r->nalgs; i++) {
        json_t *ja = algorithm_doc(r->algs[i], with_sends);
        if (!ja || json_array_append_new(fr, ja) != 0)
            ok = false;
    }
    set_new(doc, "frontier", fr, &ok);
    json_t *b = json_object();
    if (b) {
        set_new(b, "steps", json_integer(r->bound_steps), &ok);
        set_new(b, "rounds_per_chunk", isfinite(r->bound_rounds_per_chunk)
                                           ? json_real(r->bound_rounds_per_chunk)
                                           : json_null(), &ok);
    }
    set_new(doc, "bounds", b, &ok);
    set_new(doc, "synth_seconds", json_real(isfinite(r->synth_seconds) ? r->synth_seconds : 0.0),
            &ok);
    set_new(doc, "complete", json_boolean(r->complete), &ok);
    if (r->stats)
        set_new(doc, "stats", json_incref(r->stats), &ok);
    if (!ok) {
        json_decref(doc);
        return NULL;
    }
    return doc;
}

int result_from_json(const json_t *doc, cs_result **out, cs_error *err)
{
    return result_from_json_with(doc, sends_from_dom, NULL, out, err);
}

int result_from_json_with(const json_t *doc, algorithm_sends_fn sends, void *ctx,
                          cs_result **out, cs_error *err)
{
    *out = NULL;
    if (!json_is_object(doc))
        return cs_error_set(err, CS_EINVAL, "", "a result must be a JSON object");
    char method[32] = "";
    int rc = json_get_string(doc, "method", "method", method, sizeof method, err);
    if (rc != CS_OK)
        return rc;
    cs_result *r = NULL;
    if ((rc = result_new(method, &r, err)) != CS_OK)
        return rc;
    if ((rc = json_get_string(doc, "reason", "reason", r->reason, sizeof r->reason, err)))
        goto fail;
    json_t *fr = json_object_get(doc, "frontier");
    if (!json_is_array(fr)) {
        rc = cs_error_set(err, CS_EINVAL, "frontier", "frontier must be an array");
        goto fail;
    }
    for (size_t i = 0; i < json_array_size(fr); i++) {
        cs_algorithm *a = NULL;
        if ((rc = algorithm_from_json_with(json_array_get(fr, i), (int)i, sends, ctx, &a,
                                           err)) != CS_OK) {
            char prefix[32];
            snprintf(prefix, sizeof prefix, "frontier[%zu]", i);
            prefix_field(err, prefix);
            goto fail;
        }
        if (result_add(r, a) != CS_OK) {
            rc = cs_error_set(err, CS_ENOMEM, "frontier", "out of memory");
            goto fail;
        }
    }
    json_t *b = json_object_get(doc, "bounds");
    if (b && !json_is_null(b)) {
        if (!json_is_object(b)) {
            rc = cs_error_set(err, CS_EINVAL, "bounds", "bounds must be an object");
            goto fail;
        }
        long steps = 0;
        if ((rc = json_get_long(b, "steps", "bounds.steps", false, 0, 0x7fffffff, &steps, err)))
            goto fail;
        r->bound_steps = (int)steps;
        json_t *rpc = json_object_get(b, "rounds_per_chunk");
        if (rpc && !json_is_null(rpc)) {
            if (!json_is_number(rpc) || json_number_value(rpc) < 0) {
                rc = cs_error_set(err, CS_EINVAL, "bounds.rounds_per_chunk",
                                  "bounds.rounds_per_chunk must be a number >= 0");
                goto fail;
            }
            r->bound_rounds_per_chunk = json_number_value(rpc);
        } else if (rpc) {
            r->bound_rounds_per_chunk = NAN;
        }
    }
    json_t *ss = json_object_get(doc, "synth_seconds");
    if (ss && !json_is_null(ss)) {
        if (!json_is_number(ss)) {
            rc = cs_error_set(err, CS_EINVAL, "synth_seconds", "synth_seconds must be a number");
            goto fail;
        }
        r->synth_seconds = json_number_value(ss);
    }
    json_t *cp = json_object_get(doc, "complete");
    if (cp && !json_is_null(cp)) {
        if (!json_is_boolean(cp)) {
            rc = cs_error_set(err, CS_EINVAL, "complete", "complete must be a boolean");
            goto fail;
        }
        r->complete = json_is_true(cp);
    }
    json_t *st = json_object_get(doc, "stats");
    if (st && json_is_object(st))
        r->stats = json_deep_copy(st);
    json_t *topo = json_object_get(doc, "topology");
    if (topo && !json_is_null(topo)) {
        if (!json_is_string(topo) && !json_is_object(topo)) {
            rc = cs_error_set(err, CS_EINVAL, "topology", "topology must be a builtin name or "
                              "a Topology JSON object");
            goto fail;
        }
        /* a copy: the document is the caller's, and may change or go */
        if (!(r->topology = json_deep_copy(topo))) {
            rc = cs_error_set(err, CS_ENOMEM, "topology", "out of memory");
            goto fail;
        }
    }
    *out = r;
    return CS_OK;
fail:
    result_free(r);
    return rc;
}

int result_topology(const cs_result *r, cs_topology **out, cs_error *err)
{
    *out = NULL;
    if (!r->topology)
        return cs_error_set(err, CS_EINVAL, "topology", "the result does not carry its "
                            "topology");
    int rc = json_is_string(r->topology)
                 ? topology_builtin(json_string_value(r->topology), out, err)
                 : topology_from_json(r->topology, NULL, out, err);
    if (rc != CS_OK)
        prefix_field(err, "topology");
    return rc;
}

const cs_algorithm *result_best_for_size(const cs_result *r, const cs_topology *t,
                                         double bytes)
{
    const cs_algorithm *best = NULL;
    double best_cost = INFINITY;
    for (int i = 0; i < r->nalgs; i++) {
        double c = algorithm_cost_us(r->algs[i], t, bytes);
        if (!best || c < best_cost) {
            best = r->algs[i];
            best_cost = c;
        }
    }
    return best;
}
