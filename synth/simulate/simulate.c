/*
 * simulate.c - event-driven, congestion-aware timing of an algorithm (see
 * simulate.h for the model) and the TACOS ideal bound.
 *
 * The simulation is list scheduling: sends are taken in (step, list) order
 * (timed schedules: in their scheduled start order), and each one starts at
 * the latest of (a) the time its chunk is ready at src, (b) the earliest-free
 * lane of its link, (c) the earliest-free lane of every shared set the link
 * belongs to.  Lane-free times are kept in one small binary heap per link and
 * per shared set, so a send costs O(log lanes) plus its shared sets.
 *
 * "Ready at src" means: every receive of that chunk at src that the schedule
 * places before the send (an earlier step; for timed schedules an arrival
 * ending by the send's start) has finished.  Receives and sends are turned into
 * records grouped by (chunk, rank) with linear-time radix passes and ordered
 * inside each group by schedule time, receives first on ties.  A send's ready
 * time is then the latest finish among the receive records before it in its
 * group; walking back stops at the previous send record, whose ready time is
 * remembered, so each record is visited O(1) times overall and no G x P table
 * is ever built.
 */
#include "simulate.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "send_order_internal.h"

#define TIME_EPS 1e-6

void sim_result_free(cs_sim_result *r)
{
    if (!r)
        return;
    free(r->link_busy_us);
    free(r->link_utilization);
    r->link_busy_us = NULL;
    r->link_utilization = NULL;
}

/* ---- records ------------------------------------------------------------------------ */

/* A record is send index * 2 + kind: kind 0 = the send leaving src, 1 = its
 * arrival at dst. */
static inline long rec_chunk(const cs_algorithm *a, uint32_t r)
{
    return algorithm_send_chunk(a, r >> 1);
}
static inline int rec_rank(const cs_algorithm *a, uint32_t r)
{
    return (r & 1) ? algorithm_send_dst(a, r >> 1) : algorithm_send_src(a, r >> 1);
}

/* Schedule time of a record: untimed, a send of step s sits at s + 0.5 and an
 * arrival of step s at s + 1; timed, a send at start + eps, an arrival at end. */
static inline double rec_time(const cs_algorithm *s, uint32_t r, bool timed)
{
    long x = r >> 1;
    if (timed)
        return (r & 1) ? algorithm_send_end_us(s, x) : algorithm_send_start_us(s, x) + TIME_EPS;
    return (r & 1) ? algorithm_send_step(s, x) + 1.0 : algorithm_send_step(s, x) + 0.5;
}

static inline bool rec_before(const cs_algorithm *s, uint32_t a, uint32_t b, bool timed)
{
    double ta = rec_time(s, a, timed), tb = rec_time(s, b, timed);
    if (ta != tb)
        return ta < tb;
    if ((a & 1) != (b & 1))
        return (a & 1) > (b & 1); /* arrivals first */
    return a < b;
}

typedef struct rec_sort_ctx {
    const cs_algorithm *alg;
    bool timed;
} rec_sort_ctx;

static int compare_rec(const void *pa, const void *pb, void *arg)
{
    const rec_sort_ctx *c = arg;
    uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
    if (a == b)
        return 0;
    return rec_before(c->alg, a, b, c->timed) ? -1 : 1;
}

static uint32_t rkey_rank(const cs_algorithm *s, uint32_t r) { return (uint32_t)rec_rank(s, r); }
static uint32_t rkey_chunk(const cs_algorithm *s, uint32_t r) { return (uint32_t)rec_chunk(s, r); }

/* Stable LSD radix sort of (key, val) pairs by 32-bit key. */
static int radix_pairs(uint32_t *key, uint32_t *val, size_t n, uint32_t maxkey)
{
    uint32_t *k2 = malloc(sizeof(uint32_t) * (n ? n : 1));
    uint32_t *v2 = malloc(sizeof(uint32_t) * (n ? n : 1));
    size_t *count = malloc(sizeof(size_t) * 65537);
    if (!k2 || !v2 || !count) {
        free(k2);
        free(v2);
        free(count);
        return CS_ENOMEM;
    }
    for (int shift = 0; shift < 32; shift += 16) {
        if (shift > 0 && (maxkey >> shift) == 0)
            break;
        memset(count, 0, sizeof(size_t) * 65537);
        for (size_t k = 0; k < n; k++)
            count[((key[k] >> shift) & 0xffff) + 1]++;
        for (int d = 0; d < 65536; d++)
            count[d + 1] += count[d];
        for (size_t k = 0; k < n; k++) {
            size_t at = count[(key[k] >> shift) & 0xffff]++;
            k2[at] = key[k];
            v2[at] = val[k];
        }
        memcpy(key, k2, sizeof(uint32_t) * n);
        memcpy(val, v2, sizeof(uint32_t) * n);
    }
    free(k2);
    free(v2);
    free(count);
    return CS_OK;
}

/* rec[0..2n): grouped by (chunk, rank), each group in schedule-time order.
 * When chunk * ranks fits 32 bits, *group_key gets each record's group id
 * (chunk * ranks + rank) so group boundaries are found without touching the
 * sends; otherwise it is NULL. */
static int build_records(const cs_algorithm *a, bool timed, uint32_t **out, uint32_t **group_key)
{
    size_t m = 2 * (size_t)a->nsends;
    *out = NULL;
    *group_key = NULL;
    uint32_t *rec = malloc(sizeof(uint32_t) * (m ? m : 1));
    if (!rec)
        return CS_ENOMEM;
    for (size_t k = 0; k < m; k++)
        rec[k] = (uint32_t)k;
    int rc;
    uint32_t *keys = NULL;
    double groups = (double)a->global_chunks * a->ranks;
    if (groups < 4294967295.0) {
        keys = malloc(sizeof(uint32_t) * (m ? m : 1));
        if (!keys) {
            free(rec);
            return CS_ENOMEM;
        }
        for (size_t k = 0; k < m; k++) {
            keys[k] = (uint32_t)rec_chunk(a, (uint32_t)k) * (uint32_t)a->ranks +
                      (uint32_t)rec_rank(a, (uint32_t)k);
        }
        rc = radix_pairs(keys, rec, m, (uint32_t)(groups > 0 ? groups - 1 : 0));
    } else {
        uint32_t *tmp = malloc(sizeof(uint32_t) * (m ? m : 1));
        rc = tmp ? send_radix_sort(a, rec, tmp, m, rkey_rank, (uint32_t)a->ranks)
                 : CS_ENOMEM;
        if (rc == CS_OK)
            rc = send_radix_sort(a, rec, tmp, m, rkey_chunk, (uint32_t)a->global_chunks);
        free(tmp);
    }
    if (rc != CS_OK) {
        free(rec);
        free(keys);
        return rc;
    }
    rec_sort_ctx ctx = {a, timed};
    size_t k = 0;
    while (k < m) {
        size_t e = k + 1;
        if (keys) {
            while (e < m && keys[e] == keys[k])
                e++;
        } else {
            long g = rec_chunk(a, rec[k]);
            int r = rec_rank(a, rec[k]);
            while (e < m && rec_chunk(a, rec[e]) == g && rec_rank(a, rec[e]) == r)
                e++;
        }
        if (e - k == 1) {
            /* nothing to order */
        } else if (e - k <= 24) {
            for (size_t i = k + 1; i < e; i++) {
                uint32_t x = rec[i];
                size_t j = i;
                while (j > k && rec_before(a, x, rec[j - 1], timed)) {
                    rec[j] = rec[j - 1];
                    j--;
                }
                rec[j] = x;
            }
        } else {
            qsort_r(rec + k, e - k, sizeof(uint32_t), compare_rec, &ctx);
        }
        k = e;
    }
    *out = rec;
    *group_key = keys;
    return CS_OK;
}

/* ---- processing order ------------------------------------------------------------- */

static int processing_order(const cs_algorithm *a, bool timed, int *ord)
{
    long n = a->nsends;
    if (timed) {
        timed_key *tk = malloc(sizeof *tk * (size_t)(n ? n : 1));
        if (!tk)
            return CS_ENOMEM;
        for (long i = 0; i < n; i++)
            tk[i] = (timed_key){algorithm_send_start_us(a, i), algorithm_send_end_us(a, i), (int)i};
        qsort(tk, (size_t)n, sizeof *tk, timed_key_compare);
        for (long i = 0; i < n; i++)
            ord[i] = tk[i].index;
        free(tk);
        return CS_OK;
    }
    long *begin = calloc((size_t)a->steps + 2, sizeof(long));
    if (!begin)
        return CS_ENOMEM;
    for (long i = 0; i < n; i++)
        begin[algorithm_send_step(a, i) + 1]++;
    for (int s = 0; s < a->steps; s++)
        begin[s + 1] += begin[s];
    for (long i = 0; i < n; i++)
        ord[begin[algorithm_send_step(a, i)]++] = (int)i;
    free(begin);
    return CS_OK;
}

/* ---- simulation ------------------------------------------------------------------- */

int simulate_algorithm(const cs_topology *t, const cs_algorithm *a, double bytes,
                       cs_sim_result *out, cs_error *err)
{
    memset(out, 0, sizeof *out);
    if (!t || !t->finalized)
        return cs_error_set(err, CS_EINVAL, "topology", "simulation needs a finalized topology");
    if (a->ranks != t->ranks)
        return cs_error_set(err, CS_EINVAL, "ranks", "the algorithm has %d ranks, topology %s "
                            "has %d", a->ranks, t->name, t->ranks);
    if (!isfinite(bytes) || bytes < 0)
        return cs_error_set(err, CS_EINVAL, "bytes", "bytes must be a finite number >= 0");
    if (a->chunks < 1)
        return cs_error_set(err, CS_EINVAL, "chunks", "chunks must be >= 1");
    long n = a->nsends;
    if (n > 0x7fffffffL || a->global_chunks > 0xffffffffL)
        return cs_error_set(err, CS_ELIMIT, "sends", "too large to simulate: %ld sends, %ld "
                            "global chunks", n, a->global_chunks);
    bool timed = algorithm_is_timed(a);
    int L = t->nlinks;
    int rc = CS_OK;
    int *link_of = malloc(sizeof(int) * (size_t)(n ? n : 1));
    int *ord = malloc(sizeof(int) * (size_t)(n ? n : 1));
    uint32_t *rec = NULL, *group_key = NULL;
    uint32_t *pos_of = malloc(sizeof(uint32_t) * (size_t)(n ? n : 1));
    double *finish = malloc(sizeof(double) * (size_t)(n ? n : 1));
    double *ready = malloc(sizeof(double) * (size_t)(n ? n : 1));
    double *dur = malloc(sizeof(double) * (size_t)(L ? L : 1));
    int *lane_begin = malloc(sizeof(int) * (size_t)(L + 1));
    int *set_lane_begin = malloc(sizeof(int) * (size_t)(t->nshared + 1));
    int *set_begin = calloc((size_t)L + 2, sizeof(int));
    int *set_list = NULL;
    double *lanes = NULL, *set_lanes = NULL;
    out->link_busy_us = calloc((size_t)(L ? L : 1), sizeof(double));
    out->link_utilization = calloc((size_t)(L ? L : 1), sizeof(double));
    out->nlinks = L;
    if (!link_of || !ord || !pos_of || !finish || !ready || !dur || !lane_begin ||
        !set_lane_begin || !set_begin || !out->link_busy_us || !out->link_utilization) {
        rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory simulating %ld sends", n);
        goto done;
    }
    for (long i = 0; i < n; i++) {
        const cs_send sv = algorithm_send(a, i), *s = &sv;
        if (s->step < 0 || s->step >= a->steps || s->chunk < 0 ||
            s->chunk >= a->global_chunks) {
            rc = cs_error_set(err, CS_EINVAL, "sends", "send %ld (chunk %ld, %d->%d, step %d): "
                              "chunk or step out of range", i, s->chunk, s->src, s->dst,
                              s->step);
            goto done;
        }
        if ((link_of[i] = topology_find_link(t, s->src, s->dst)) < 0) {
            rc = cs_error_set(err, CS_EINVAL, "sends", "send %ld (chunk %ld, %d->%d, step %d): "
                              "no link %d->%d", i, s->chunk, s->src, s->dst, s->step, s->src,
                              s->dst);
            goto done;
        }
        finish[i] = NAN;
        ready[i] = NAN;
    }
    /* lanes */
    double chunk = algorithm_chunk_bytes(a, bytes);
    out->chunk_bytes = chunk;
    long nl = 0;
    for (int l = 0; l < L; l++) {
        lane_begin[l] = (int)nl;
        nl += t->links[l].lanes;
        dur[l] = t->links[l].alpha_us + chunk / (t->links[l].gbps * 1e3);
    }
    lane_begin[L] = (int)nl;
    long ns = 0, members = 0;
    for (int k = 0; k < t->nshared; k++) {
        set_lane_begin[k] = (int)ns;
        ns += t->shared[k].lanes;
        members += t->shared[k].nlinks;
        for (int j = 0; j < t->shared[k].nlinks; j++)
            set_begin[t->shared[k].links[j] + 1]++;
    }
    set_lane_begin[t->nshared] = (int)ns;
    for (int l = 0; l < L; l++)
        set_begin[l + 1] += set_begin[l];
    lanes = calloc((size_t)(nl ? nl : 1), sizeof(double));
    set_lanes = calloc((size_t)(ns ? ns : 1), sizeof(double));
    set_list = malloc(sizeof(int) * (size_t)(members ? members : 1));
    int *fill = malloc(sizeof(int) * (size_t)(L + 1));
    if (!lanes || !set_lanes || !set_list || !fill) {
        free(fill);
        rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
        goto done;
    }
    memcpy(fill, set_begin, sizeof(int) * (size_t)(L + 1));
    for (int k = 0; k < t->nshared; k++)
        for (int j = 0; j < t->shared[k].nlinks; j++)
            set_list[fill[t->shared[k].links[j]]++] = k;
    free(fill);

    if (processing_order(a, timed, ord) != CS_OK || build_records(a, timed, &rec, &group_key) != CS_OK) {
        rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory ordering %ld sends", n);
        goto done;
    }
    for (size_t p = 0; p < 2 * (size_t)n; p++)
        if ((rec[p] & 1) == 0)
            pos_of[rec[p] >> 1] = (uint32_t)p;

    double end_time = 0.0;
    for (long k = 0; k < n; k++) {
        int i = ord[k];
        const cs_send sv = algorithm_send(a, i), *s = &sv;
        /* ready: the latest finish among the receives before this send in its group */
        double r = 0.0;
        for (size_t p = pos_of[i]; p-- > 0;) {
            uint32_t q = rec[p];
            if (group_key ? group_key[p] != group_key[pos_of[i]]
                          : (rec_chunk(a, q) != s->chunk || rec_rank(a, q) != s->src))
                break;
            int j = (int)(q >> 1);
            if (q & 1) {
                if (!isnan(finish[j]) && finish[j] > r)
                    r = finish[j];
            } else if (!isnan(ready[j])) {
                if (ready[j] > r)
                    r = ready[j];
                break;
            }
        }
        ready[i] = r;
        int l = link_of[i];
        double *lh = lanes + lane_begin[l];
        int lanes_l = lane_begin[l + 1] - lane_begin[l];
        double start = r > lh[0] ? r : lh[0];
        for (int m = set_begin[l]; m < set_begin[l + 1]; m++) {
            int set = set_list[m];
            double free_at = set_lanes[set_lane_begin[set]];
            if (free_at > start)
                start = free_at;
        }
        double fin = start + dur[l];
        heap_replace_min(lh, lanes_l, fin);
        for (int m = set_begin[l]; m < set_begin[l + 1]; m++) {
            int set = set_list[m];
            heap_replace_min(set_lanes + set_lane_begin[set],
                             set_lane_begin[set + 1] - set_lane_begin[set], fin);
        }
        finish[i] = fin;
        if (fin > end_time)
            end_time = fin;
        out->link_busy_us[l] += dur[l];
        out->total_bytes += chunk;
        if (t->group_of && t->group_of[s->src] != t->group_of[s->dst])
            out->cross_group_bytes += chunk;
    }
    out->time_us = end_time;
    out->max_utilization = 0.0;
    for (int l = 0; l < L; l++) {
        double u = end_time > 0 ? out->link_busy_us[l] / (end_time * t->links[l].lanes) : 0.0;
        out->link_utilization[l] = u;
        if (u > out->max_utilization)
            out->max_utilization = u;
    }
    out->ideal_us = simulate_ideal_us(t, &a->collective, a->chunks, bytes);
done:
    free(link_of);
    free(ord);
    free(rec);
    free(group_key);
    free(pos_of);
    free(finish);
    free(ready);
    free(dur);
    free(lane_begin);
    free(set_lane_begin);
    free(set_begin);
    free(set_list);
    free(lanes);
    free(set_lanes);
    if (rc != CS_OK)
        sim_result_free(out);
    return rc;
}

/* ---- the TACOS ideal ------------------------------------------------------------- */

/* Bytes rank r must at least receive and send for the collective, with L the
 * per-rank share (chunk = L / chunks).  Custom collectives: see custom_data. */
static void builtin_data(const cs_collective *c, int P, int r, double L, double *in,
                         double *out)
{
    double p1 = P - 1;
    bool root = r == c->root;
    *in = *out = 0.0;
    switch (c->kind) {
    case CS_COLL_ALLGATHER: *in = p1 * L; *out = L; break;
    case CS_COLL_REDUCESCATTER: *in = L; *out = p1 * L; break;
    case CS_COLL_ALLREDUCE: *in = *out = 2.0 * p1 / P * L; break;
    case CS_COLL_BROADCAST: if (root) *out = L; else *in = L; break;
    case CS_COLL_REDUCE: if (root) *in = L; else *out = L; break;
    case CS_COLL_GATHER: if (root) *in = p1 * L; else *out = L; break;
    case CS_COLL_SCATTER: if (root) *out = p1 * L; else *in = L; break;
    case CS_COLL_ALLTOALL: *in = *out = p1 * L; break;
    default: break;
    }
}

/* Custom: a rank receives every post chunk it does not start with; a chunk with
 * exactly one source that some other rank needs must leave that source. */
static int custom_data(const cs_collective *c, int P, int chunks, double chunk_bytes,
                       double *in, double *out)
{
    long G = c->custom_global_chunks;
    int *holders = calloc((size_t)(G > 0 ? G : 1), sizeof(int));
    int *source = malloc(sizeof(int) * (size_t)(G > 0 ? G : 1));
    unsigned char *needed = calloc((size_t)(G > 0 ? G : 1), 1);
    if (!holders || !source || !needed) {
        free(holders);
        free(source);
        free(needed);
        return CS_ENOMEM;
    }
    for (int k = 0; k < c->npre; k++) {
        long g = c->pre[2 * k];
        if (g >= 0 && g < G) {
            holders[g]++;
            source[g] = c->pre[2 * k + 1];
        }
    }
    for (int k = 0; k < c->npost; k++) {
        long g = c->post[2 * k];
        int r = c->post[2 * k + 1];
        if (g < 0 || g >= G || r < 0 || r >= P)
            continue;
        if (!collective_pre(c, P, chunks, g, r)) {
            in[r] += chunk_bytes;
            needed[g] = 1;
        }
    }
    for (long g = 0; g < G; g++)
        if (needed[g] && holders[g] == 1 && source[g] >= 0 && source[g] < P)
            out[source[g]] += chunk_bytes;
    free(holders);
    free(source);
    free(needed);
    return CS_OK;
}

double simulate_ideal_us(const cs_topology *t, const cs_collective *c, int chunks, double bytes)
{
    if (!t || !t->finalized || !c || chunks < 1 || !(bytes >= 0))
        return NAN;
    int P = t->ranks;
    if (P <= 1)
        return 0.0;
    int diameter = 0;
    if (topology_diameter(t, &diameter, NULL) != CS_OK)
        return NAN;
    double alpha = 0.0;
    for (int l = 0; l < t->nlinks; l++)
        if (t->links[l].alpha_us > alpha)
            alpha = t->links[l].alpha_us;
    double bw_term = 0.0;
    if (c->kind == CS_COLL_CUSTOM) {
        cs_collective cc;
        memset(&cc, 0, sizeof cc);
        double *in = calloc((size_t)P, sizeof(double));
        double *out = calloc((size_t)P, sizeof(double));
        bool ok = in && out && collective_copy(&cc, c, NULL) == CS_OK &&
                  collective_validate(&cc, P, NULL) == CS_OK &&
                  custom_data(&cc, P, chunks, bytes / chunks, in, out) == CS_OK;
        for (int r = 0; ok && r < P; r++) {
            double ib = topology_ingress_bw(t, r), ob = topology_egress_bw(t, r);
            if (in[r] > 0 && ib > 0 && in[r] / ib > bw_term)
                bw_term = in[r] / ib;
            if (out[r] > 0 && ob > 0 && out[r] / ob > bw_term)
                bw_term = out[r] / ob;
        }
        collective_free(&cc);
        free(in);
        free(out);
        if (!ok)
            return NAN;
    } else {
        for (int r = 0; r < P; r++) {
            double in, out;
            builtin_data(c, P, r, bytes, &in, &out);
            double ib = topology_ingress_bw(t, r), ob = topology_egress_bw(t, r);
            if (in > 0 && ib > 0 && in / ib > bw_term)
                bw_term = in / ib;
            if (out > 0 && ob > 0 && out / ob > bw_term)
                bw_term = out / ob;
        }
    }
    return diameter * alpha + bw_term;
}
