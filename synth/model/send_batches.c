/*
 * send_batches.c - the sends of an algorithm, chunk by chunk, gathered in
 * batches by streaming over the columns (declared in send_order_internal.h).
 *
 * The verifier's value replay and the simulator's dependency links walk one
 * chunk at a time, but a schedule is stored in time order, so a chunk's sends
 * are scattered over the whole index range: read through an index, every
 * field of every send is a cache (and TLB) miss.  Instead, a batch of
 * consecutive chunks is gathered by one sequential pass over the columns:
 * each send of a chunk in the batch is copied, as a 20-byte send_rec, to its
 * place (chunk order, index order within a chunk) in a scratch array.  The
 * scratch holds a quarter of the sends, so a schedule takes about four
 * streaming passes, about 5 bytes per send of memory and no per-send index.
 * Each of those passes reads every send's chunk and keeps a quarter of them,
 * at random as far as the branch predictor can tell, so on one thread (below
 * 2^20 sends) and up to 2^23 sends the kept sends' indices are first dealt
 * into one bucket per batch (4 bytes per send, one pass), and a batch then
 * reads only its own sends, in the same order (docs/BENCHMARKS.md, "Hierarchical
 * vs flat TACOS margin").
 *
 * Chunk counts need G + 1 counters, which a valid algorithm never makes much
 * larger than its sends (every chunk but the ones already in place moves at
 * least once).  When chunks far outnumber the sends (a malformed or partial
 * algorithm) the kept sends are sorted by chunk instead, and gathered through
 * that order.
 */
#include "send_order_internal.h"

#include <pthread.h>
#include <stdio.h>

static inline bool kept(const send_batches *b, uint32_t i)
{
    return !b->keep || ((b->keep[i >> 3] >> (i & 7)) & 1);
}

static inline send_rec make_rec(const cs_algorithm *a, uint32_t i, bool timed)
{
    send_rec r;
    r.index = i | (algorithm_send_op(a, i) == CS_OP_REDUCE ? SEND_REC_REDUCE : 0);
    r.src = algorithm_send_src(a, i);
    r.dst = algorithm_send_dst(a, i);
    if (timed) {
        r.t0 = algorithm_send_start_index(a, i);
        r.t1 = algorithm_send_end_index(a, i);
    } else {
        r.t0 = (uint32_t)algorithm_send_step(a, i);
        r.t1 = 0;
    }
    return r;
}

static uint32_t key_chunk(const void *ctx, uint32_t i)
{
    return (uint32_t)algorithm_send_chunk(ctx, i);
}

/* The chunk bounds of every batch next_dense would gather (the same rule:
 * chunks while their sends fit the scratch; a chunk alone that does not
 * grows it, for the batches after it too), then each kept send's index
 * into its batch's bucket, in one pass.  Without memory for the buckets the
 * batches are scanned for as before. */
static int bucket_init(send_batches *b)
{
    uint32_t G = b->G, nb = 0;
    long cap = b->cap;
    uint32_t *bound = malloc(sizeof *bound * ((size_t)G + 2));
    uint32_t *of = malloc(sizeof *of * ((size_t)G + 1));
    uint32_t *at = NULL;
    b->bucket = malloc(sizeof *b->bucket * (size_t)b->nkept);
    if (!bound || !of || !b->bucket)
        goto fail;
    for (uint32_t g0 = 0, g1; g0 < G; g0 = g1) {
        g1 = g0;
        while (g1 < G && b->begin[g1 + 1] - b->begin[g0] <= (uint64_t)cap)
            g1++;
        if (g1 == g0) {
            cap = b->begin[g0 + 1] - b->begin[g0];
            g1 = g0 + 1;
        }
        bound[nb] = g0;
        for (uint32_t g = g0; g < g1; g++)
            of[g] = nb;
        nb++;
    }
    bound[nb] = G;
    at = malloc(sizeof *at * ((size_t)nb + 1));
    if (!at)
        goto fail;
    for (uint32_t k = 0; k < nb; k++)
        at[k] = b->begin[bound[k]];
    const cs_algorithm *a = b->a;
    for (uint32_t i = 0; i < b->n; i++)
        if (kept(b, i))
            b->bucket[at[of[algorithm_send_chunk(a, i)]]++] = i;
    free(at);
    free(of);
    b->batch_g0 = bound;
    b->nbatches = nb;
    return CS_OK;
fail:
    free(bound);
    free(of);
    free(b->bucket);
    b->bucket = NULL;
    return CS_OK;
}

int send_batches_init(send_batches *b, const cs_algorithm *a, const unsigned char *keep,
                      bool timed)
{
    memset(b, 0, sizeof *b);
    b->a = a;
    b->keep = keep;
    b->timed = timed;
    b->n = (uint32_t)a->nsends;
    b->G = (uint32_t)a->global_chunks;
    if ((uint64_t)b->G <= 2 * (uint64_t)b->n + 65536) {
        b->begin = calloc((size_t)b->G + 1, sizeof *b->begin);
        if (!b->begin)
            return CS_ENOMEM;
        if (send_pass_threads(b->n) >= 2) {
            b->half = b->n / 2;
            b->lower = calloc((size_t)b->G + 1, sizeof *b->lower);
            if (!b->lower)
                return CS_ENOMEM;
        }
        for (uint32_t i = 0; i < b->half; i++)
            if (kept(b, i))
                b->lower[algorithm_send_chunk(a, i)]++;
        for (uint32_t i = 0; i < b->n; i++)
            if (kept(b, i))
                b->begin[algorithm_send_chunk(a, i) + 1]++;
        for (uint32_t g = 0; g < b->G; g++)
            b->begin[g + 1] += b->begin[g];
        b->nkept = b->begin[b->G];
    } else {
        b->sparse = malloc(sizeof *b->sparse * (b->n ? b->n : 1));
        long m = b->sparse ? send_sort_by_key(b->n, keep, key_chunk, a, b->G, b->sparse) : -1;
        if (m < 0)
            return CS_ENOMEM;
        b->nkept = m;
    }
    /* a quarter of the sends per batch (5 bytes per send), but never tiny */
    long cap = b->nkept / 4;
    if (cap < (1L << 18))
        cap = 1L << 18;
    if (cap > b->nkept)
        cap = b->nkept > 0 ? b->nkept : 1;
    b->cap = cap;
    b->recs = send_array_new(sizeof *b->recs * (size_t)cap);
    if (!b->recs)
        return CS_ENOMEM;
    send_array_advise(b->recs, sizeof *b->recs * (size_t)cap);
    if (b->begin && !b->lower && b->nkept > cap && b->n <= SEND_BATCHES_BUCKET_MAX)
        return bucket_init(b);
    return CS_OK;
}

void send_batches_free(send_batches *b)
{
    free(b->begin);
    free(b->sparse);
    send_array_delete(b->recs, sizeof *b->recs * (size_t)b->cap);
    free(b->fill);
    free(b->fill2);
    free(b->lower);
    free(b->sparse_begin);
    free(b->bucket);
    free(b->batch_g0);
    memset(b, 0, sizeof *b);
}

/* One scan of the index range [i0, i1) for the chunks [g0, g0 + nch):
 * each kept send of those chunks takes the next position of its chunk
 * (fill, relative to the batch), and is gathered there (gather) or has
 * its pair written back from there. */
typedef struct batch_scan {
    const send_batches *b;
    uint32_t i0, i1, g0, nch;
    uint32_t *fill;
    bool gather;
    const uint32_t *pairs;      /* write-back */
    uint32_t *col0, *col1;
} batch_scan;

/* The scan with the chunk column read at its width (one loop per width,
 * no switch per send: this loop reads every send's chunk in every batch). */
#define BATCH_SCAN_LOOP(T)                                                          \
    do {                                                                            \
        const T *cc = (const T *)b->a->store.chunk.data;                            \
        if (j->gather) {                                                            \
            for (uint32_t i = j->i0; i < j->i1; i++) {                              \
                uint32_t g = (uint32_t)cc[i] - g0;                                  \
                if (g < nch && kept(b, i))                                          \
                    b->recs[fill[g]++] = make_rec(b->a, i, b->timed);               \
            }                                                                       \
        } else {                                                                    \
            for (uint32_t i = j->i0; i < j->i1; i++) {                              \
                uint32_t g = (uint32_t)cc[i] - g0;                                  \
                if (g < nch && kept(b, i)) {                                        \
                    uint32_t p = fill[g]++;                                         \
                    j->col0[i] = j->pairs[2 * (size_t)p];                           \
                    j->col1[i] = j->pairs[2 * (size_t)p + 1];                       \
                }                                                                   \
            }                                                                       \
        }                                                                           \
    } while (0)

static void *batch_scan_run1(void *arg)
{
    batch_scan *j = arg;
    const send_batches *b = j->b;
    uint32_t g0 = j->g0, nch = j->nch, *fill = j->fill;
    switch (b->a->store.chunk.width) {
    case 1: BATCH_SCAN_LOOP(uint8_t); break;
    case 2: BATCH_SCAN_LOOP(uint16_t); break;
    default: BATCH_SCAN_LOOP(int32_t); break;
    }
    return NULL;
}

/* The scans of a batch: one over every send, or (b->lower) two halves
 * whose fills start where their records do.  Returns the count. */
static int batch_scan_setup(send_batches *b, uint32_t g0, uint32_t nch, uint32_t base,
                            batch_scan job[2])
{
    for (uint32_t g = 0; g < nch; g++)
        b->fill[g] = b->begin[g0 + g] - base;
    job[0] = (batch_scan){.b = b, .i0 = 0, .i1 = b->n, .g0 = g0, .nch = nch, .fill = b->fill};
    if (!b->lower)
        return 1;
    for (uint32_t g = 0; g < nch; g++)
        b->fill2[g] = b->fill[g] + b->lower[g0 + g];
    job[0].i1 = b->half;
    job[1] = (batch_scan){.b = b, .i0 = b->half, .i1 = b->n, .g0 = g0, .nch = nch,
                          .fill = b->fill2};
    return 2;
}

static void batch_scan_run(batch_scan *job, int parts)
{
    pthread_t th;
    bool threaded = parts == 2 && pthread_create(&th, NULL, batch_scan_run1, &job[1]) == 0;
    batch_scan_run1(&job[0]);
    if (threaded)
        pthread_join(th, NULL);
    else if (parts == 2)
        batch_scan_run1(&job[1]);
}

/* Dense: chunks [g0, g1) whose sends fit the scratch (at least one chunk,
 * growing the scratch if that chunk alone does not fit). */
/* The gathering of batch j from its bucket (b->bucket): its sends only,
 * in index order, each to the next position of its chunk; or (pairs) the
 * write-back of their results. */
/* Makes the scratch records hold at least `need` (a batch of one chunk
 * larger than the scratch).  Nothing in them is kept: a batch's records are
 * gathered after this. */
static int recs_hold(send_batches *b, long need)
{
    if (need <= b->cap)
        return CS_OK;
    send_array_delete(b->recs, sizeof *b->recs * (size_t)b->cap);
    b->cap = 0;
    b->recs = send_array_new(sizeof *b->recs * (size_t)need);
    if (!b->recs)
        return CS_ENOMEM;
    b->cap = need;
    return CS_OK;
}

static void bucket_scan(send_batches *b, uint32_t j, uint32_t *fill, const uint32_t *pairs,
                        uint32_t *col0, uint32_t *col1)
{
    uint32_t g0 = b->batch_g0[j], g1 = b->batch_g0[j + 1];
    const uint32_t *x = b->bucket + b->begin[g0], *end = b->bucket + b->begin[g1];
    const cs_algorithm *a = b->a;
    for (; x < end; x++) {
        uint32_t i = *x, p = fill[algorithm_send_chunk(a, i) - g0]++;
        if (pairs) {
            col0[i] = pairs[2 * (size_t)p];
            col1[i] = pairs[2 * (size_t)p + 1];
        } else {
            b->recs[p] = make_rec(a, i, b->timed);
        }
    }
}

static int next_dense(send_batches *b, send_batch *out)
{
    uint32_t g0 = b->next_chunk, g1 = g0;
    if (b->bucket) {
        uint32_t j = b->next_batch;
        g1 = b->batch_g0[j + 1];
        uint32_t nch = g1 - g0, base = b->begin[g0];
        long need = b->begin[g1] - base;
        if (recs_hold(b, need) != CS_OK) /* one chunk larger than the scratch */
            return CS_ENOMEM;
        if (nch > b->fill_cap) {
            uint32_t *f = realloc(b->fill, sizeof *f * nch);
            if (!f)
                return CS_ENOMEM;
            b->fill = f;
            b->fill_cap = nch;
        }
        for (uint32_t g = 0; g < nch; g++)
            b->fill[g] = b->begin[g0 + g] - base;
        bucket_scan(b, j, b->fill, NULL, NULL, NULL);
        out->g0 = g0;
        out->g1 = g1;
        out->recs = b->recs;
        out->begin = b->begin + g0;
        out->base = base;
        b->next_chunk = g1;
        b->next_batch = j + 1;
        return CS_OK;
    }
    while (g1 < b->G && b->begin[g1 + 1] - b->begin[g0] <= (uint64_t)b->cap)
        g1++;
    if (g1 == g0) {
        /* one chunk larger than the scratch */
        if (recs_hold(b, (long)(b->begin[g0 + 1] - b->begin[g0])) != CS_OK)
            return CS_ENOMEM;
        g1 = g0 + 1;
    }
    uint32_t nch = g1 - g0, base = b->begin[g0];
    if (nch > b->fill_cap) {
        uint32_t *f = realloc(b->fill, sizeof *f * nch);
        if (!f)
            return CS_ENOMEM;
        b->fill = f;
        b->fill_cap = nch;
    }
    if (b->lower && nch > b->fill_cap2) {
        uint32_t *f = realloc(b->fill2, sizeof *f * nch);
        if (!f)
            return CS_ENOMEM;
        b->fill2 = f;
        b->fill_cap2 = nch;
    }
    batch_scan job[2];
    int parts = batch_scan_setup(b, g0, nch, base, job);
    for (int p = 0; p < parts; p++)
        job[p].gather = true;
    batch_scan_run(job, parts);
    out->g0 = g0;
    out->g1 = g1;
    out->recs = b->recs;
    out->begin = b->begin + g0;
    out->base = base;
    b->next_chunk = g1;
    return CS_OK;
}

/* Sparse: the kept sends in chunk order through b->sparse, a batch at a time;
 * begin is rebuilt per batch over the chunks present. */
static int next_sparse(send_batches *b, send_batch *out)
{
    long k0 = b->next_pos, k1 = k0;
    uint32_t nch = 0;
    while (k1 < b->nkept) {
        long e = k1;
        long g = algorithm_send_chunk(b->a, b->sparse[k1]);
        while (e < b->nkept && algorithm_send_chunk(b->a, b->sparse[e]) == g)
            e++;
        if (k1 > k0 && e - k0 > b->cap)
            break;
        k1 = e;
        nch++;
    }
    if (recs_hold(b, k1 - k0) != CS_OK)
        return CS_ENOMEM;
    uint32_t *sb = realloc(b->sparse_begin, sizeof *sb * ((size_t)nch + 1));
    if (!sb)
        return CS_ENOMEM;
    b->sparse_begin = sb;
    /* chunks absent from the algorithm get no entry: out->chunk names them */
    uint32_t *ids = realloc(b->fill, sizeof *ids * (nch ? nch : 1));
    if (!ids)
        return CS_ENOMEM;
    b->fill = ids;
    b->fill_cap = nch;
    uint32_t c = 0;
    for (long k = k0; k < k1; k++) {
        uint32_t i = b->sparse[k];
        uint32_t g = (uint32_t)algorithm_send_chunk(b->a, i);
        if (k == k0 || g != ids[c - 1]) {
            ids[c] = g;
            sb[c++] = (uint32_t)(k - k0);
        }
        b->recs[k - k0] = make_rec(b->a, i, b->timed);
    }
    sb[c] = (uint32_t)(k1 - k0);
    out->g0 = 0;
    out->g1 = c;
    out->recs = b->recs;
    out->begin = sb;
    out->base = 0;
    out->chunk = ids;
    b->next_pos = k1;
    return CS_OK;
}

void send_batch_write_back(send_batches *b, const send_batch *batch, const uint32_t *pairs,
                           uint32_t *col0, uint32_t *col1)
{
    uint32_t nrec = batch->begin[batch->g1 - batch->g0] - batch->begin[0];
    if (!b->begin) {
        /* sparse: the records are the kept sends in b->sparse order */
        const uint32_t *ids = b->sparse + (b->next_pos - nrec);
        for (uint32_t p = 0; p < nrec; p++) {
            col0[ids[p]] = pairs[2 * p];
            col1[ids[p]] = pairs[2 * p + 1];
        }
        return;
    }
    uint32_t g0 = batch->g0, nch = batch->g1 - g0;
    if (b->bucket) {
        /* the positions as the gathering gave them: the same bucket again */
        for (uint32_t g = 0; g < nch; g++)
            b->fill[g] = b->begin[g0 + g] - batch->base;
        bucket_scan(b, b->next_batch - 1, b->fill, pairs, col0, col1);
        return;
    }
    /* the positions as the gathering gave them: the same scans again */
    batch_scan job[2];
    int parts = batch_scan_setup(b, g0, nch, batch->base, job);
    for (int p = 0; p < parts; p++) {
        job[p].pairs = pairs;
        job[p].col0 = col0;
        job[p].col1 = col1;
    }
    batch_scan_run(job, parts);
}

int send_batches_write_back_all(send_batches *b, const uint32_t *pairs, uint32_t *col0,
                                uint32_t *col1)
{
    /* no batch follows: the records go before the columns are written */
    send_array_delete(b->recs, sizeof *b->recs * (size_t)b->cap);
    b->recs = NULL;
    b->cap = 0;
    uint32_t nch = b->G;
    if (nch > b->fill_cap) {
        uint32_t *f = realloc(b->fill, sizeof *f * (nch ? nch : 1));
        if (!f)
            return CS_ENOMEM;
        b->fill = f;
        b->fill_cap = nch;
    }
    if (b->lower && nch > b->fill_cap2) {
        uint32_t *f = realloc(b->fill2, sizeof *f * (nch ? nch : 1));
        if (!f)
            return CS_ENOMEM;
        b->fill2 = f;
        b->fill_cap2 = nch;
    }
    batch_scan job[2];
    int parts = batch_scan_setup(b, 0, nch, 0, job);
    for (int p = 0; p < parts; p++) {
        job[p].pairs = pairs;
        job[p].col0 = col0;
        job[p].col1 = col1;
    }
    batch_scan_run(job, parts);
    return CS_OK;
}

int send_batches_next(send_batches *b, send_batch *out)
{
    memset(out, 0, sizeof *out);
    if (b->begin) {
        if (b->next_chunk >= b->G)
            return SEND_BATCHES_DONE;
        return next_dense(b, out);
    }
    if (b->next_pos >= b->nkept)
        return SEND_BATCHES_DONE;
    return next_sparse(b, out);
}

int send_pass_threads(long nsends)
{
    if (nsends < (1L << 20))
        return 1;
    int n = cs_cpu_count();
    return n < 1 ? 1 : n > 4 ? 4 : n;
}

/* ---- processing order ----------------------------------------------------------- */

typedef struct order_ctx {
    const cs_algorithm *a;
    const uint32_t *trank;
} order_ctx;

/* The verifier orders sends before it has rejected them all: a step out of
 * [0, steps) goes to the last group (its place does not matter, the send is
 * invalid and skipped) instead of past the end of the counts. */
static uint32_t key_step(const void *ctx, uint32_t i)
{
    const cs_algorithm *a = ((const order_ctx *)ctx)->a;
    int s = algorithm_send_step(a, i), last = a->steps > 0 ? a->steps - 1 : 0;
    return (uint32_t)(s < 0 || s > last ? last : s);
}

static uint32_t key_start(const void *ctx, uint32_t i)
{
    const order_ctx *o = ctx;
    return o->trank[algorithm_send_start_index(o->a, i)];
}

static inline bool in_order(const order_ctx *o, uint32_t i, uint32_t j)
{
    if (!o->trank)
        return algorithm_send_step(o->a, i) <= algorithm_send_step(o->a, j);
    time_order to = {o->a, o->trank};
    return time_order_compare(&to, i, j) < 0;
}

int send_processing_order(const cs_algorithm *a, const uint32_t *trank, uint32_t **ord)
{
    *ord = NULL;
    uint32_t n = (uint32_t)a->nsends;
    order_ctx o = {a, trank};
    uint32_t k = 1;
    if (!trank) {   /* the step column at its width: no dispatch per send */
        const cs_column *c = &a->store.step;
        switch (c->width) {
        case 1: { const uint8_t *x = c->data; while (k < n && x[k - 1] <= x[k]) k++; } break;
        case 2: { const uint16_t *x = c->data; while (k < n && x[k - 1] <= x[k]) k++; } break;
        default: { const int32_t *x = c->data; while (k < n && x[k - 1] <= x[k]) k++; } break;
        }
    }
    while (k < n && in_order(&o, k - 1, k))
        k++;
    if (k >= n)
        return CS_OK;
    uint32_t *x = malloc(sizeof *x * n);
    if (!x)
        return CS_ENOMEM;
    if (!trank) {
        if (send_sort_by_key(n, NULL, key_step, &o, (uint64_t)(a->steps > 0 ? a->steps : 1),
                             x) < 0) {
            free(x);
            return CS_ENOMEM;
        }
        *ord = x;
        return CS_OK;
    }
    /* by start time, then each group of equal starts by (end, index) */
    if (send_group_by_key(n, NULL, key_start, &o, (uint32_t)algorithm_time_count(a), x, NULL) <
        0) {
        free(x);
        return CS_ENOMEM;
    }
    time_order to = {a, trank};
    for (uint32_t b = 0; b < n;) {
        uint32_t e = b + 1, st = key_start(&o, x[b]);
        while (e < n && key_start(&o, x[e]) == st)
            e++;
        sort_by_time(&to, x + b, e - b);
        b = e;
    }
    *ord = x;
    return CS_OK;
}
