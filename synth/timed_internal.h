/*
 * timed_internal.h - what the simulator (simulate.c) and the verifier
 * (verify.c, verify_values.c) share about timed sends: the key that puts
 * sends in start order, and the lane min-heap.  Private to synth/.
 *
 * Both walk sends in start order (ties: earlier end, then lower index, so the
 * order is total and the same in both), and both keep the times at which a
 * link's lanes become free in a binary min-heap of doubles; replacing the
 * minimum is the one heap operation either needs.
 */
#ifndef CS_TIMED_INTERNAL_H
#define CS_TIMED_INTERNAL_H

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

#endif
