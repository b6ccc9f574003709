/*
 * codegen_channels.c - per-link channel dealing and the hash map the
 * lowering uses (see codegen_channels.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen_channels.h"

/* ---- hash map -------------------------------------------------------------- */

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

long cg_hmap_get(const cg_hmap *m, uint64_t key)
{
    if (!m->cap)
        return -1;
    size_t mask = m->cap - 1, i = mix64(key) & mask;
    while (m->keys[i]) {
        if (m->keys[i] == key + 1)
            return m->vals[i];
        i = (i + 1) & mask;
    }
    return -1;
}

int cg_hmap_put(cg_hmap *m, uint64_t key, long val)
{
    if ((m->n + 1) * 2 > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 1024;
        uint64_t *keys = calloc(cap, sizeof *keys);
        long *vals = malloc(cap * sizeof *vals);
        if (!keys || !vals) {
            free(keys);
            free(vals);
            return CS_ENOMEM;
        }
        for (size_t j = 0; j < m->cap; j++) {
            if (!m->keys[j])
                continue;
            size_t i = mix64(m->keys[j] - 1) & (cap - 1);
            while (keys[i])
                i = (i + 1) & (cap - 1);
            keys[i] = m->keys[j];
            vals[i] = m->vals[j];
        }
        free(m->keys);
        free(m->vals);
        m->keys = keys;
        m->vals = vals;
        m->cap = cap;
    }
    size_t mask = m->cap - 1, i = mix64(key) & mask;
    while (m->keys[i]) {
        if (m->keys[i] == key + 1) {
            m->vals[i] = val;
            return CS_OK;
        }
        i = (i + 1) & mask;
    }
    m->keys[i] = key + 1;
    m->vals[i] = val;
    m->n++;
    return CS_OK;
}

void cg_hmap_free(cg_hmap *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

/* ---- times ------------------------------------------------------------------ */

void cg_send_times(const cs_algorithm *a, long i, bool timed, double *rt, double *wt)
{
    if (timed) {
        *rt = algorithm_send_start_us(a, i);
        *wt = algorithm_send_end_us(a, i) - 2e-6;
        if (!(*wt > *rt))
            *wt = *rt + 1e-9;
    } else {
        int step = algorithm_send_step(a, i);
        *rt = 2.0 * step;
        *wt = 2.0 * step + 1;
    }
}

/* ---- lanes ------------------------------------------------------------------ */

int cg_link_lanes(const cs_topology *t, int src, int dst)
{
    if (!t)
        return 1;
    int li = topology_find_link(t, src, dst);
    return li >= 0 && t->links[li].lanes > 1 ? t->links[li].lanes : 1;
}

void cg_lane_init(cg_lane_state *s, bool timed, int lanes)
{
    memset(s, 0, sizeof *s);
    s->timed = timed;
    s->lanes = lanes > 0 ? lanes : 1;
}

void cg_lane_free(cg_lane_state *s)
{
    free(s->ends);
    free(s->count);
    memset(s, 0, sizeof *s);
}

bool cg_lane_in_order(const cg_lane_state *s, int step, long chunk, double start)
{
    if (!s->any)
        return true;
    if (s->timed)
        return start >= s->start;
    return step > s->step || (step == s->step && chunk >= s->chunk);
}

static int grow(void **arr, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return CS_OK;
    int nc = *cap ? *cap : 4;
    while (nc < need)
        nc *= 2;
    void *na = realloc(*arr, (size_t)nc * elem);
    if (!na)
        return CS_ENOMEM;
    *arr = na;
    *cap = nc;
    return CS_OK;
}

int cg_lane_next(cg_lane_state *s, int step, long chunk, double rt, double wt, int *base,
                 long *minor)
{
    int c;
    if (!s->timed) {
        if (s->any && step != s->step)
            s->j = 0;
        c = (int)(s->j % s->lanes);
        *minor = s->j / s->lanes;
        s->j++;
    } else {
        /* the first channel free at the start (its last message has landed) */
        c = 0;
        while (c < s->nends && s->ends[c] > rt + 1e-9)
            c++;
        if (c == s->nends) {
            if (grow((void **)&s->ends, &s->capends, c + 1, sizeof(double)) != CS_OK)
                return CS_ENOMEM;
            s->nends++;
        }
        s->ends[c] = wt;
        *minor = 0;
    }
    if (c >= s->ncount) {
        if (grow((void **)&s->count, &s->capcount, c + 1, sizeof(long)) != CS_OK)
            return CS_ENOMEM;
        for (int k = s->ncount; k <= c; k++)
            s->count[k] = 0;
        s->ncount = c + 1;
    }
    s->count[c]++;
    s->any = true;
    s->step = step;
    s->chunk = chunk;
    s->start = rt;
    *base = c;
    return CS_OK;
}
