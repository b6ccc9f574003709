/*
 * cache.c - byte-bounded LRU of reference-counted blobs (see cache.h): a
 * chained hash table plus a doubly linked recency list, under one mutex.  The
 * critical section is a hash probe and two pointer swaps, far below the cost
 * of the HTTP exchange around it.
 */
#include "cache.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

cs_blob *blob_adopt(char *data, size_t len)
{
    cs_blob *b = malloc(sizeof *b);
    if (!b) {
        free(data);
        return NULL;
    }
    atomic_init(&b->refs, 1);
    b->len = len;
    b->data = data;
    b->cost = len;
    b->release = NULL;
    b->owner = NULL;
    return b;
}

cs_blob *blob_wrap(char *data, size_t len, size_t cost, void (*release)(cs_blob *b),
                   void *owner)
{
    cs_blob *b = malloc(sizeof *b);
    if (!b)
        return NULL;
    atomic_init(&b->refs, 1);
    b->len = len;
    b->data = data;
    b->cost = cost;
    b->release = release;
    b->owner = owner;
    return b;
}

cs_blob *blob_new(const char *data, size_t len)
{
    char *copy = malloc(len + 1);
    if (!copy)
        return NULL;
    memcpy(copy, data, len);
    copy[len] = '\0';
    return blob_adopt(copy, len);
}

void blob_ref(cs_blob *b)
{
    if (b)
        atomic_fetch_add(&b->refs, 1);
}

void blob_unref(cs_blob *b)
{
    if (b && atomic_fetch_sub(&b->refs, 1) == 1) {
        if (b->release)
            b->release(b);
        else
            free(b->data);
        free(b);
    }
}

typedef struct entry {
    char *key;
    uint64_t hash;
    cs_blob *blob;
    struct entry *chain;
    struct entry *prev, *next;   /* recency: head = most recent */
} entry;

struct cs_cache {
    pthread_mutex_t lock;
    size_t max_bytes, bytes;
    long count;
    size_t nbuckets;
    entry **buckets;
    entry *head, *tail;
};

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

cs_cache *cache_new(size_t max_bytes)
{
    cs_cache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->nbuckets = 4096;
    c->buckets = calloc(c->nbuckets, sizeof *c->buckets);
    if (!c->buckets) {
        free(c);
        return NULL;
    }
    c->max_bytes = max_bytes;
    pthread_mutex_init(&c->lock, NULL);
    return c;
}

static void list_unlink(cs_cache *c, entry *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        c->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        c->tail = e->prev;
    e->prev = e->next = NULL;
}

static void list_push_front(cs_cache *c, entry *e)
{
    e->prev = NULL;
    e->next = c->head;
    if (c->head)
        c->head->prev = e;
    c->head = e;
    if (!c->tail)
        c->tail = e;
}

static size_t entry_cost(const entry *e) { return e->blob->cost + strlen(e->key) + 96; }

static void remove_entry(cs_cache *c, entry *e)
{
    entry **pp = &c->buckets[e->hash % c->nbuckets];
    while (*pp && *pp != e)
        pp = &(*pp)->chain;
    if (*pp)
        *pp = e->chain;
    list_unlink(c, e);
    c->bytes -= entry_cost(e);
    c->count--;
    blob_unref(e->blob);
    free(e->key);
    free(e);
}

void cache_free(cs_cache *c)
{
    if (!c)
        return;
    while (c->head)
        remove_entry(c, c->head);
    free(c->buckets);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

static entry *find(cs_cache *c, const char *key, uint64_t h)
{
    for (entry *e = c->buckets[h % c->nbuckets]; e; e = e->chain)
        if (e->hash == h && strcmp(e->key, key) == 0)
            return e;
    return NULL;
}

cs_blob *cache_get(cs_cache *c, const char *key)
{
    if (!c)
        return NULL;
    uint64_t h = hash_str(key);
    pthread_mutex_lock(&c->lock);
    entry *e = find(c, key, h);
    cs_blob *b = NULL;
    if (e) {
        if (c->head != e) {
            list_unlink(c, e);
            list_push_front(c, e);
        }
        b = e->blob;
        blob_ref(b);
    }
    pthread_mutex_unlock(&c->lock);
    return b;
}

void cache_put(cs_cache *c, const char *key, cs_blob *b)
{
    if (!c || !b || b->cost + 1024 > c->max_bytes)
        return;
    uint64_t h = hash_str(key);
    pthread_mutex_lock(&c->lock);
    entry *old = find(c, key, h);
    if (old)
        remove_entry(c, old);
    entry *e = calloc(1, sizeof *e);
    if (e && (e->key = strdup(key))) {
        e->hash = h;
        e->blob = b;
        blob_ref(b);
        e->chain = c->buckets[h % c->nbuckets];
        c->buckets[h % c->nbuckets] = e;
        list_push_front(c, e);
        c->bytes += entry_cost(e);
        c->count++;
        while (c->bytes > c->max_bytes && c->tail && c->tail != e)
            remove_entry(c, c->tail);
    } else {
        free(e);
    }
    pthread_mutex_unlock(&c->lock);
}

void cache_stats(cs_cache *c, long *entries, long *bytes)
{
    pthread_mutex_lock(&c->lock);
    *entries = c->count;
    *bytes = (long)c->bytes;
    pthread_mutex_unlock(&c->lock);
}
