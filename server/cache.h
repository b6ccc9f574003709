/*
 * cache.h - the daemon's in-memory cache of response bodies (result JSON,
 * generated code), bounded in bytes with LRU eviction.  Stored results are
 * immutable, so the cache can never be stale: it only saves the store round
 * trip on the hot path (GET /v1/results/{key}).
 *
 * Bodies are reference-counted blobs, so a response can point at the cached
 * bytes without copying them, and eviction while a response is being sent is
 * safe (the last unref frees).
 */
#ifndef CS_SERVER_CACHE_H
#define CS_SERVER_CACHE_H

#include <stdatomic.h>
#include <stddef.h>

typedef struct cs_blob {
    atomic_int refs;
    size_t len;
    char *data;          /* NUL-terminated copy (blob_new, blob_adopt) or mapped bytes */
    size_t cost;         /* bytes the cache charges for it (default len) */
    void (*release)(struct cs_blob *b);   /* NULL: free(data) */
    void *owner;         /* what release frees (an mmap length, an object) */
} cs_blob;

cs_blob *blob_new(const char *data, size_t len);
/* Takes ownership of a malloc'ed, NUL-terminated buffer of len bytes. */
cs_blob *blob_adopt(char *data, size_t len);
/* A blob over bytes someone else owns: release(b) runs when the last
 * reference goes (data and owner are the caller's to interpret). */
cs_blob *blob_wrap(char *data, size_t len, size_t cost, void (*release)(cs_blob *b),
                   void *owner);
void blob_ref(cs_blob *b);
void blob_unref(cs_blob *b);

typedef struct cs_cache cs_cache;

cs_cache *cache_new(size_t max_bytes);
void cache_free(cs_cache *c);
/* A new reference, or NULL. */
cs_blob *cache_get(cs_cache *c, const char *key);
/* Adds (or replaces) key; the cache takes its own reference. */
void cache_put(cs_cache *c, const char *key, cs_blob *b);
void cache_stats(cs_cache *c, long *entries, long *bytes);

#endif
