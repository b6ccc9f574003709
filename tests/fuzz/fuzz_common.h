/*
 * fuzz_common.h - what the libFuzzer harnesses of tests/fuzz/ share.
 *
 * Each harness defines LLVMFuzzerTestOneInput and checks properties of the
 * code it drives, not only that it does not crash: FUZZ_CHECK prints what
 * did not hold and aborts, which libFuzzer reports as a crash and saves the
 * input for (build-fuzz/fuzz/<name>-crash-*).  Run them with `make fuzz`
 * (docs/qa.md "Fuzzing"); replay one input with `build-fuzz/fuzz/fuzz_NAME
 * FILE`.
 *
 * The ordinary build compiles these files too (not linked: no libFuzzer
 * there), so an API change that breaks a harness breaks the build.
 */
#ifndef CS_FUZZ_COMMON_H
#define CS_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_CHECK(cond, ...)                                                            \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "%s:%d: property failed: %s: ", __FILE__, __LINE__, #cond);  \
            fprintf(stderr, __VA_ARGS__);                                                \
            fputc('\n', stderr);                                                         \
            abort();                                                                     \
        }                                                                                \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A deterministic stream of small numbers from the input's own bytes (so a
 * saved input replays the same reads, splits and choices). */
typedef struct fuzz_rng {
    uint64_t s;
} fuzz_rng;

static inline fuzz_rng fuzz_rng_from(const uint8_t *data, size_t size)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a of the input */
    for (size_t i = 0; i < size; i++)
        h = (h ^ data[i]) * 1099511628211ull;
    fuzz_rng r = {h ? h : 1};
    return r;
}

static inline unsigned fuzz_next(fuzz_rng *r, unsigned n)
{
    r->s ^= r->s << 13;
    r->s ^= r->s >> 7;
    r->s ^= r->s << 17;
    return n ? (unsigned)(r->s % n) : 0;
}

/* A growing byte buffer. */
typedef struct fuzz_buf {
    char *p;
    size_t n, cap;
} fuzz_buf;

static inline void fuzz_buf_add(fuzz_buf *b, const void *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        b->p = realloc(b->p, b->cap);
        if (!b->p)
            abort();
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static inline void fuzz_buf_puts(fuzz_buf *b, const char *s) { fuzz_buf_add(b, s, strlen(s)); }

#endif
