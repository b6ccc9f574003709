/*
 * send_order_internal.h - what the simulator (simulate.c) and the verifier
 * (verify.c, verify_values.c) share about putting sends in order: grouping
 * send indices by a key with a counting sort, ordering timed sends by time
 * through the time dictionary, and the lane min-heap.  Private to synth/.
 *
 * Memory drives the shape of these helpers: schedules reach 10^8 sends, so
 * the order of the sends is one uint32 index per send and nothing else.  A
 * grouping is a counting sort straight from the identity order (send 0, 1,
 * ...), which is stable and needs no second buffer; keys are recomputed from
 * the algorithm's columns instead of being stored.  Timed sends are compared
 * by the ranks of their times in the algorithm's time dictionary (uint32, one
 * small table per algorithm), never by copying doubles out per send.
 *
 * Both walk timed sends in start order (ties: earlier end, then lower
 * index, so the order is total and the same in both), and both keep lane
 * free times in binary min-heaps.
 */
#ifndef CS_SEND_ORDER_INTERNAL_H
#define CS_SEND_ORDER_INTERNAL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "algorithm.h"

/* Asks for transparent huge pages on a large per-send array that is read or
 * written in a scattered order (a column visited by chunk, the simulator's
 * accumulators): with 4 KB pages nearly every such access also misses the
 * TLB.  Advisory only; ignored where unsupported. */
static inline void send_array_advise(void *p, size_t bytes)
{
    const size_t huge = (size_t)2 << 20;
    if (!p || bytes < 2 * huge)
        return;
    uintptr_t b = ((uintptr_t)p + 4095) & ~(uintptr_t)4095;
    uintptr_t e = ((uintptr_t)p + bytes) & ~(uintptr_t)4095;
    if (e > b)
        madvise((void *)b, e - b, MADV_HUGEPAGE);
}

/* Large per-send working arrays (zeroed), mapped straight from the kernel
 * from 1 MB on and unmapped when freed.  Through malloc, a freed array of
 * a few MB could stay in the heap (glibc raises its mmap threshold after
 * each large free) and count in the peak RSS beside the next one: the
 * verifier-and-simulator walk frees its batch records before the
 * simulator's accumulators arrive, and bytes per send is a target (issue
 * 10: <= 32 on the synthesize -> verify -> simulate -> store path).  The
 * caller passes the same size to free. */
#define SEND_ARRAY_MAP_MIN ((size_t)1 << 20)

static inline void *send_array_new(size_t bytes)
{
    if (bytes < SEND_ARRAY_MAP_MIN)
        return calloc(1, bytes ? bytes : 1);
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static inline void send_array_delete(void *p, size_t bytes)
{
    if (!p)
        return;
    if (bytes < SEND_ARRAY_MAP_MIN)
        free(p);
    else
        munmap(p, bytes);
}

/* How many sends ahead scattered loops prefetch (algorithm_prefetch). */
#define SEND_PREFETCH 16

/* ---- link lookups ----------------------------------------------------------------
 * The verifier and simulator look up the link of every send (src -> dst),
 * several times per send, in a scattered rank order.  topology_find_link
 * binary-searches the 40-byte cs_link records, which on a switch-lowered
 * cluster (dgxh100:128: 134 out-links per rank, 5.5 MB of links) is a few
 * cache misses per lookup.  A link_finder keeps only each link's dst, as
 * 2 bytes, in the same (src, dst) order: 2 bytes per link (270 KB there,
 * 80 KB for mesh2d:100x100), so lookups stay in L2.  Built per call, owned
 * by the caller; ranks beyond 65536 fall back to topology_find_link.
 * The binary search still costs a few mispredicted branches per lookup
 * (a third of the verifier's per-send checks on a million-send
 * composition), so a caller about to look up many sends may add a dense
 * table (link_finder_densify): one byte per (src, dst) pair, the link's
 * position among src's out-links, when that stays small (at most 2048
 * ranks: 4 MB; 1 MB for 1024 ranks, in L2) and pays for itself (no more
 * pairs than 8 lookups per pair); two bytes per pair (pos16) where a rank
 * has 255 or more out-links (a fabric switch joining 512 NICs). */
typedef struct link_finder {
    const cs_topology *t;
    const int *begin;           /* t->out_begin */
    uint16_t *dst;              /* per link; NULL: fall back */
    unsigned ranks;
    uint8_t *pos;               /* dense: [src * ranks + dst], LINK_FINDER_NONE: no link */
    uint16_t *pos16;            /* the same at 2 bytes, LINK_FINDER_NONE16 (pos NULL then) */
} link_finder;

#define LINK_FINDER_NONE16 0xffff

#define LINK_FINDER_NONE 0xff
#define LINK_FINDER_DENSE_MAX_RANKS 2048

/* CS_OK or CS_ENOMEM; free with link_finder_free either way. */
static inline int link_finder_init(link_finder *f, const cs_topology *t)
{
    f->t = t;
    f->begin = t->out_begin;
    f->ranks = (unsigned)t->ranks;
    f->dst = NULL;
    f->pos = NULL;
    f->pos16 = NULL;
    if (t->ranks > 65536)
        return CS_OK;
    f->dst = malloc(sizeof *f->dst * (size_t)(t->nlinks > 0 ? t->nlinks : 1));
    if (!f->dst)
        return CS_ENOMEM;
    for (int l = 0; l < t->nlinks; l++)
        f->dst[l] = (uint16_t)t->links[l].dst;
    return CS_OK;
}

/* Adds the dense table for about `lookups` lookups when the size limits
 * above allow it: a byte per pair when every rank has fewer than 255
 * out-links, else two when fewer than 65535; else (or without memory for
 * it) lookups keep the binary search. */
static inline void link_finder_densify(link_finder *f, long lookups)
{
    const cs_topology *t = f->t;
    long P = t->ranks;
    int maxdeg = 0;
    if (f->pos || f->pos16 || !f->dst || P < 1 || P > LINK_FINDER_DENSE_MAX_RANKS ||
        P * P > 8 * lookups)
        return;
    for (int r = 0; r < P; r++)
        if (t->out_begin[r + 1] - t->out_begin[r] > maxdeg)
            maxdeg = t->out_begin[r + 1] - t->out_begin[r];
    if (maxdeg < LINK_FINDER_NONE) {
        uint8_t *pos = malloc((size_t)(P * P));
        if (!pos)
            return;
        memset(pos, LINK_FINDER_NONE, (size_t)(P * P));
        for (int r = 0; r < P; r++)
            for (int l = t->out_begin[r]; l < t->out_begin[r + 1]; l++) {
                uint8_t *x = &pos[(long)r * P + t->links[l].dst];
                if (*x == LINK_FINDER_NONE)    /* the first, as the search finds */
                    *x = (uint8_t)(l - t->out_begin[r]);
            }
        f->pos = pos;
    } else if (maxdeg < LINK_FINDER_NONE16) {
        uint16_t *pos = malloc(sizeof *pos * (size_t)(P * P));
        if (!pos)
            return;
        memset(pos, 0xff, sizeof *pos * (size_t)(P * P));
        for (int r = 0; r < P; r++)
            for (int l = t->out_begin[r]; l < t->out_begin[r + 1]; l++) {
                uint16_t *x = &pos[(long)r * P + t->links[l].dst];
                if (*x == LINK_FINDER_NONE16)
                    *x = (uint16_t)(l - t->out_begin[r]);
            }
        f->pos16 = pos;
    }
}

static inline void link_finder_free(link_finder *f)
{
    free(f->dst);
    f->dst = NULL;
    free(f->pos);
    f->pos = NULL;
    free(f->pos16);
    f->pos16 = NULL;
}

/* topology_find_link(t, src, dst): the link's index, or -1. */
static inline int link_finder_find(const link_finder *f, int src, int dst)
{
    if (!f->dst)
        return topology_find_link(f->t, src, dst);
    if ((unsigned)src >= f->ranks || (unsigned)dst >= f->ranks)
        return -1;
    if (f->pos) {
        unsigned p = f->pos[(size_t)src * f->ranks + (unsigned)dst];
        return p == LINK_FINDER_NONE ? -1 : f->begin[src] + (int)p;
    }
    if (f->pos16) {
        unsigned p = f->pos16[(size_t)src * f->ranks + (unsigned)dst];
        return p == LINK_FINDER_NONE16 ? -1 : f->begin[src] + (int)p;
    }
    int lo = f->begin[src], end = f->begin[src + 1], hi = end;
    uint16_t d = (uint16_t)dst;
    const uint16_t *x = f->dst;
    while (hi - lo > 8) {   /* the first x >= d is in [lo, hi] */
        int mid = lo + (hi - lo) / 2;
        if (x[mid] < d)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (; lo < end; lo++)
        if (x[lo] >= d)
            return x[lo] == d ? lo : -1;
    return -1;
}

/* Replaces the minimum of the n-element min-heap h (n >= 1) by x and sifts
 * it down. */
static inline void heap_replace_min(double *h, long n, double x)
{
    long i = 0;
    for (;;) {
        long c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && h[c + 1] < h[c])
            c++;
        if (h[c] >= x)
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = x;
}

/* The key of send i, in [0, nkeys). */
typedef uint32_t (*send_key_fn)(const void *ctx, uint32_t i);

/* Groups the sends i in [0, n) with keep[i] set (keep: a bitset, NULL = all)
 * by key: ord receives them in key order, index order within a key (stable),
 * and begin[0..nkeys] (when not NULL) the start of each key's group.  One
 * uint32 count per key, so callers keep nkeys near n or below.  Returns the
 * number of sends placed, or -1 when out of memory. */
static inline long send_group_by_key(uint32_t n, const unsigned char *keep, send_key_fn key,
                                     const void *ctx, uint32_t nkeys, uint32_t *ord,
                                     uint32_t *begin)
{
    uint32_t *pos = calloc((size_t)nkeys + 1, sizeof *pos);
    if (!pos)
        return -1;
    for (uint32_t i = 0; i < n; i++)
        if (!keep || ((keep[i >> 3] >> (i & 7)) & 1))
            pos[key(ctx, i) + 1]++;
    for (uint32_t k = 0; k < nkeys; k++)
        pos[k + 1] += pos[k];
    long placed = pos[nkeys];
    if (begin)
        memcpy(begin, pos, sizeof *pos * ((size_t)nkeys + 1));
    for (uint32_t i = 0; i < n; i++)
        if (!keep || ((keep[i >> 3] >> (i & 7)) & 1))
            ord[pos[key(ctx, i)]++] = i;
    free(pos);
    return placed;
}

typedef struct keyed_sort { send_key_fn key; const void *ctx; } keyed_sort;

static inline int keyed_sort_compare(const void *pa, const void *pb, void *arg)
{
    const keyed_sort *k = arg;
    uint32_t i = *(const uint32_t *)pa, j = *(const uint32_t *)pb;
    uint32_t x = k->key(k->ctx, i), y = k->key(k->ctx, j);
    if (x != y)
        return x < y ? -1 : 1;
    return i < j ? -1 : i > j;
}

/* send_group_by_key without begin, for keys that may far outnumber the sends
 * (chunk ids of a sparse custom collective, step numbers): beyond 2n + 2^16
 * keys a comparison sort replaces the count array. */
static inline long send_sort_by_key(uint32_t n, const unsigned char *keep, send_key_fn key,
                                    const void *ctx, uint64_t nkeys, uint32_t *ord)
{
    if (nkeys <= 2 * (uint64_t)n + 65536)
        return send_group_by_key(n, keep, key, ctx, (uint32_t)nkeys, ord, NULL);
    long m = 0;
    for (uint32_t i = 0; i < n; i++)
        if (!keep || ((keep[i >> 3] >> (i & 7)) & 1))
            ord[m++] = i;
    keyed_sort k = {key, ctx};
    qsort_r(ord, (size_t)m, sizeof *ord, keyed_sort_compare, &k);
    return m;
}

/* Ordering timed sends: a[i] before b when (start rank, end rank, index) is
 * smaller; trank maps dictionary indices to time ranks (algorithm_time_ranks). */
typedef struct time_order {
    const cs_algorithm *a;
    const uint32_t *trank;
} time_order;

static inline int time_order_compare(const time_order *o, uint32_t i, uint32_t j)
{
    uint32_t si = o->trank[algorithm_send_start_index(o->a, i)];
    uint32_t sj = o->trank[algorithm_send_start_index(o->a, j)];
    if (si != sj)
        return si < sj ? -1 : 1;
    uint32_t ei = o->trank[algorithm_send_end_index(o->a, i)];
    uint32_t ej = o->trank[algorithm_send_end_index(o->a, j)];
    if (ei != ej)
        return ei < ej ? -1 : 1;
    return i < j ? -1 : i > j;
}

static inline int time_order_qsort(const void *pa, const void *pb, void *ctx)
{
    return time_order_compare(ctx, *(const uint32_t *)pa, *(const uint32_t *)pb);
}

/* Sorts seg[0..len) by time.  Producers emit sends in time order, so the
 * common case is one linear check; nearly sorted input takes an insertion
 * pass, anything else qsort. */
static inline void sort_by_time(const time_order *o, uint32_t *seg, long len)
{
    long inversions = 0;
    for (long k = 0; k < len && k < SEND_PREFETCH; k++)
        algorithm_prefetch(o->a, seg[k], CS_FIELD_TIMES);
    for (long k = 1; k < len; k++) {
        if (k + SEND_PREFETCH < len)
            algorithm_prefetch(o->a, seg[k + SEND_PREFETCH], CS_FIELD_TIMES);
        inversions += time_order_compare(o, seg[k - 1], seg[k]) > 0;
    }
    if (inversions == 0)
        return;
    if (len > 32 && inversions > 16) {
        qsort_r(seg, (size_t)len, sizeof *seg, time_order_qsort, (void *)o);
        return;
    }
    for (long k = 1; k < len; k++) {
        uint32_t x = seg[k];
        long j = k;
        while (j > 0 && time_order_compare(o, x, seg[j - 1]) < 0) {
            seg[j] = seg[j - 1];
            j--;
        }
        seg[j] = x;
    }
}

/* ---- chunk by chunk, streaming (send_batches.c) ------------------------------------ */

/* A send as the chunk-by-chunk passes read it, gathered once: 20 bytes. */
typedef struct send_rec {
    uint32_t index;     /* the send's index; SEND_REC_REDUCE set for a reduce */
    int32_t src, dst;
    uint32_t t0, t1;    /* timed: start and end dictionary indices; untimed: step, 0 */
} send_rec;

#define SEND_REC_REDUCE 0x80000000u
static inline uint32_t send_rec_index(const send_rec *r) { return r->index & ~SEND_REC_REDUCE; }
static inline cs_op send_rec_op(const send_rec *r)
{
    return (r->index & SEND_REC_REDUCE) ? CS_OP_REDUCE : CS_OP_COPY;
}

/* One batch: entries j in [0, g1 - g0), each a chunk with its records
 * recs[begin[j] - base .. begin[j + 1] - base) in index order. */
typedef struct send_batch {
    uint32_t g0, g1;
    const uint32_t *chunk;      /* chunk id of entry j; NULL: entry j is chunk g0 + j */
    const uint32_t *begin;
    uint32_t base;
    send_rec *recs;
} send_batch;

static inline long send_batch_chunk(const send_batch *b, uint32_t j)
{
    return b->chunk ? b->chunk[j] : (long)b->g0 + j;
}
static inline send_rec *send_batch_recs(const send_batch *b, uint32_t j, uint32_t *len)
{
    *len = b->begin[j + 1] - b->begin[j];
    return b->recs + (b->begin[j] - b->base);
}

typedef struct send_batches {
    const cs_algorithm *a;
    const unsigned char *keep;  /* bitset of the sends to take, NULL = all */
    bool timed;
    uint32_t n, G;
    uint32_t *begin;            /* G + 1 chunk starts among the kept sends, or NULL (sparse) */
    uint32_t *sparse;           /* sparse: the kept sends sorted by chunk */
    long nkept, cap;
    send_rec *recs;             /* cap records (send_array_new) */
    uint32_t *fill, *sparse_begin;
    uint32_t fill_cap, next_chunk;
    /* Dense, from 2^20 sends: the gathering and write-back scan the index
     * range in two halves on two threads; lower[g] counts chunk g's kept
     * sends below `half`, where the second half's records start. */
    uint32_t half, *lower, *fill2, fill_cap2;
    long next_pos;
    /* Dense, one thread, several batches, up to SEND_BATCHES_BUCKET_MAX
     * sends: the kept sends' indices bucketed by batch (ascending in each,
     * batch b at bucket[begin[batch_g0[b]] ..)), so a batch reads only its
     * own sends instead of scanning every send's chunk again (a
     * mispredicted branch on most of them); 4 bytes per send. */
    uint32_t *bucket;
    uint32_t *batch_g0;         /* nbatches + 1 chunk bounds, then G */
    uint32_t nbatches, next_batch;
} send_batches;

#define SEND_BATCHES_BUCKET_MAX (1L << 23)

#define SEND_BATCHES_DONE 1

/* Counts the kept sends per chunk (one pass over the chunk column).  CS_OK or
 * CS_ENOMEM; free with send_batches_free either way. */
int send_batches_init(send_batches *b, const cs_algorithm *a, const unsigned char *keep,
                      bool timed);
/* Gathers the next batch of consecutive chunks (one sequential pass over the
 * columns).  CS_OK, SEND_BATCHES_DONE after the last, or CS_ENOMEM.  The
 * batch's records stay valid until the next call. */
int send_batches_next(send_batches *b, send_batch *out);
void send_batches_free(send_batches *b);
/* Results a pass computed per record of `batch` (the last one
 * send_batches_next returned), pairs[2p] and pairs[2p + 1] for the record
 * at position p, stored per send: col0[i] and col1[i].  Streams over the
 * chunk column as the gathering did, so the per-send columns are written in
 * index order instead of at random (a cache and TLB miss per store). */
void send_batch_write_back(send_batches *b, const send_batch *batch, const uint32_t *pairs,
                           uint32_t *col0, uint32_t *col1);
/* The same for every batch at once (dense only: b->begin set), after the
 * last: pairs are by position among all kept sends (chunk-major), written
 * to col0[i], col1[i] in one scan (two halves on two threads from 2^20
 * sends).  Frees the batch records first (send_batches_next is done), so
 * they never sit beside both columns.  CS_OK or CS_ENOMEM. */
int send_batches_write_back_all(send_batches *b, const uint32_t *pairs, uint32_t *col0,
                                uint32_t *col1);

/* The order the verifier's bandwidth sweep and the simulator walk sends in:
 * (step, index), or with trank (timed) (start, end, index).  *ord is NULL
 * when that is the index order already (producers emit it), else n indices
 * the caller frees.  CS_OK or CS_ENOMEM. */
int send_processing_order(const cs_algorithm *a, const uint32_t *trank, uint32_t **ord);

/* Worker threads for the chunk-by-chunk passes of one large algorithm: the
 * passes split each batch's chunks between them (results do not depend on
 * the count).  1 below 2^20 sends; at most 4. */
int send_pass_threads(long nsends);

#endif
