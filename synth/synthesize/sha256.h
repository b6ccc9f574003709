/*
 * sha256.h - streaming SHA-256 (FIPS 180-4).  PRIVATE to synth/: it is not
 * part of the public API and may change; outside synth/ use
 * synth_sha256_hex() from synthesize.h.
 *
 *     cs_sha256_ctx c;
 *     unsigned char digest[32];
 *     cs_sha256_init(&c);
 *     cs_sha256_update(&c, data, len);     // any number of times
 *     cs_sha256_final(&c, digest);
 *
 * A context holds no pointers and needs no freeing; it is not shared between
 * threads (each caller has its own).
 */
#ifndef CS_SHA256_H
#define CS_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct cs_sha256_ctx {
    uint32_t h[8];
    uint64_t len;
    unsigned char buf[64];
    size_t nbuf;
} cs_sha256_ctx;

void cs_sha256_init(cs_sha256_ctx *c);
void cs_sha256_update(cs_sha256_ctx *c, const unsigned char *p, size_t n);
void cs_sha256_final(cs_sha256_ctx *c, unsigned char out[32]);

#endif
