/*
 * codegen_channels.c - per-link channel dealing and the hash map the
 * lowering uses (see codegen_channels.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen_channels.h"
#include "codegen_plan.h"

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

void cg_lane_init(cg_lane_state *s, bool timed, int lanes, const cg_run_rule *rule)
{
    memset(s, 0, sizeof *s);
    s->timed = timed;
    s->lanes = lanes > 0 ? lanes : 1;
    if (rule)
        s->rule = *rule;
    else
        s->rule.max_cnt = 1;
}

void cg_lane_free(cg_lane_state *s)
{
    free(s->ends);
    free(s->count);
    for (int m = 0; m < 2; m++) {
        free(s->units[m]);
        free(s->run_len[m]);
    }
    free(s->last_chunk);
    free(s->last_key);
    memset(s, 0, sizeof *s);
}

/* Chunk g's slot follows chunk prev's in the input or the output layout. */
static bool neighbours(const cg_run_rule *r, long prev, long g)
{
    if (r->ranks < 1)
        return false;
    return codegen_out_offset(r->kind, r->ranks, r->chunks, g, 0) ==
               codegen_out_offset(r->kind, r->ranks, r->chunks, prev, 0) + 1 ||
           codegen_in_offset(r->kind, r->ranks, r->chunks, g, 0) ==
               codegen_in_offset(r->kind, r->ranks, r->chunks, prev, 0) + 1;
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
                 long *minor, int *newunit)
{
    int c;
    if (!s->timed) {
        bool fresh = !s->any || step != s->step;
        if (fresh)
            s->j = 0;
        /* a run of neighbouring chunks stays on one lane, so it can move as
         * one step (round-robin per message would leave every lane's chunks
         * apart, and nothing would merge); runs go round-robin over lanes,
         * across steps too, so one-run steps still use every lane in turn.
         * The minor key is the message's index in the step: increasing on
         * every lane, which is all the order argument needs. */
        int cap = s->rule.max_cnt > 0 ? s->rule.max_cnt : 0x7fffffff;
        bool stay = !fresh && s->lanes > 1 && s->lane < s->ncount &&
                    neighbours(&s->rule, s->chunk, chunk) && s->run_len[0][s->lane] < cap;
        if (!stay)
            s->lane = (int)(s->runs++ % s->lanes);
        c = s->lane;
        *minor = s->j;
        s->j++;
    } else {
        /* the first channel free at the start (its last message has landed).
         * Exactly: a message may follow another on a channel only when the
         * other's landing (wt) is not after its start, so in key order the
         * earlier receive comes first and one-message FIFOs suffice
         * (codegen_plan.h, "Timed order"; the plan builder checks it). */
        c = 0;
        while (c < s->nends && s->ends[c] > rt)
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
        if (c + 1 > s->capcount) {
            int nc = s->capcount ? s->capcount : 4;
            while (nc < c + 1)
                nc *= 2;
            long *cnt = realloc(s->count, (size_t)nc * sizeof(long));
            if (cnt)
                s->count = cnt;
            long *u0 = cnt ? realloc(s->units[0], (size_t)nc * sizeof(long)) : NULL;
            if (u0)
                s->units[0] = u0;
            long *u1 = u0 ? realloc(s->units[1], (size_t)nc * sizeof(long)) : NULL;
            if (u1)
                s->units[1] = u1;
            long *lc = u1 ? realloc(s->last_chunk, (size_t)nc * sizeof(long)) : NULL;
            if (lc)
                s->last_chunk = lc;
            double *lk = lc ? realloc(s->last_key, (size_t)nc * sizeof(double)) : NULL;
            if (lk)
                s->last_key = lk;
            int *r0 = lk ? realloc(s->run_len[0], (size_t)nc * sizeof(int)) : NULL;
            if (r0)
                s->run_len[0] = r0;
            int *r1 = r0 ? realloc(s->run_len[1], (size_t)nc * sizeof(int)) : NULL;
            if (!r1)
                return CS_ENOMEM;
            s->run_len[1] = r1;
            s->capcount = nc;
        }
        for (int k = s->ncount; k <= c; k++) {
            s->count[k] = s->units[0][k] = s->units[1][k] = 0;
            s->run_len[0][k] = s->run_len[1][k] = 0;
        }
        s->ncount = c + 1;
    }
    /* the units this message starts on its base channel */
    double key = s->timed ? rt : (double)step;
    int cap = s->rule.max_cnt > 0 ? s->rule.max_cnt : 0x7fffffff;
    bool near = s->count[c] > 0 && neighbours(&s->rule, s->last_chunk[c], chunk);
    bool cont[2] = {near && s->last_key[c] == key && s->run_len[0][c] < cap,
                    near && s->run_len[1][c] < cap};
    int nu = 0;
    for (int m = 0; m < 2; m++) {
        if (cont[m]) {
            s->run_len[m][c]++;
        } else {
            s->run_len[m][c] = 1;
            s->units[m][c]++;
            nu |= 1 << m;
        }
    }
    *newunit = nu;
    s->last_chunk[c] = chunk;
    s->last_key[c] = key;
    s->count[c]++;
    s->any = true;
    s->step = step;
    s->chunk = chunk;
    s->start = rt;
    *base = c;
    return CS_OK;
}
