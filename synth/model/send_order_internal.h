/*
 * send_order_internal.h - what the simulator (simulate.c) and the verifier
 * (verify.c, verify_values.c) share about putting sends in order: the key
 * that sorts timed sends by start, the lane min-heap, and the linear-time
 * radix sort of send (or record) indices.  Private to synth/.
 *
 * Both walk sends in start order (ties: earlier end, then lower index, so the
 * order is total and the same in both), and both keep the times at which a
 * link's lanes become free in a binary min-heap of doubles; replacing the
 * minimum is the one heap operation either needs.  Both order millions of
 * sends by step, rank or chunk, where a stable radix sort beats qsort.
 */
#ifndef CS_SEND_ORDER_INTERNAL_H
#define CS_SEND_ORDER_INTERNAL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "algorithm.h"

/* A send's schedule times, for sorting timed sends. */
typedef struct timed_key {
    double start, end;
    int index;
} timed_key;

/* qsort comparator: by start, then end, then index. */
static inline int timed_key_compare(const void *pa, const void *pb)
{
    const timed_key *a = pa, *b = pb;
    if (a->start != b->start)
        return a->start < b->start ? -1 : 1;
    if (a->end != b->end)
        return a->end < b->end ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
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

/* The 32-bit sort key of index x (a send index, or a record index that
 * encodes one) into alg's sends. */
typedef uint32_t (*send_key_fn)(const cs_algorithm *a, uint32_t x);

/* Stable sort of a[0..n) by key(sends, a[i]) (every key <= maxkey), 16 bits
 * at a time, least significant first; tmp has room for n.  CS_OK or
 * CS_ENOMEM. */
static inline int send_radix_sort(const cs_algorithm *alg, uint32_t *a, uint32_t *tmp, size_t n,
                                  send_key_fn key, uint32_t maxkey)
{
    size_t *count = malloc(sizeof(size_t) * 65537);
    if (!count)
        return CS_ENOMEM;
    for (int shift = 0; shift < 32; shift += 16) {
        if (shift > 0 && (maxkey >> shift) == 0)
            break;
        memset(count, 0, sizeof(size_t) * 65537);
        for (size_t k = 0; k < n; k++)
            count[((key(alg, a[k]) >> shift) & 0xffff) + 1]++;
        for (int d = 0; d < 65536; d++)
            count[d + 1] += count[d];
        for (size_t k = 0; k < n; k++)
            tmp[count[(key(alg, a[k]) >> shift) & 0xffff]++] = a[k];
        memcpy(a, tmp, sizeof(uint32_t) * n);
    }
    free(count);
    return CS_OK;
}

#endif
