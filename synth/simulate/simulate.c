/*
 * simulate.c - event-driven, congestion-aware timing of an algorithm (see
 * simulate.h for the model) and the TACOS ideal bound.
 *
 * The simulation is list scheduling: sends are taken in processing order
 * ((step, index); timed schedules: (start, end, index)), and each one starts
 * at the latest of (a) the time its chunk is ready at src, (b) the
 * earliest-free lane of its link, (c) the earliest-free lane of every shared
 * set the link belongs to.  Lane-free times are kept in one small binary heap
 * per link and per shared set, so a send costs O(log lanes) plus its shared
 * sets.  A switch port (derived links with 1 lane, the rank's egress and
 * ingress sets with 1 lane) thus carries one chunk at a time at the port's
 * full bandwidth: the same bytes per microsecond as concurrent sends sharing
 * it, never more (docs/model.md, "Switch ports").
 *
 * "Ready at src" means: every receive of that chunk at src that the schedule
 * places before the send (an earlier step; for timed schedules an arrival
 * ending by the send's start, within 1e-6 us) and that was processed before
 * it has finished.  Within the group of one (chunk, rank), ordered by schedule
 * time with arrivals first on ties, a send's ready time is the previous
 * send's ready time combined with the receives between them.  So before the
 * simulation two links per send are computed, chunk by chunk: next_send (the
 * next send of the same chunk from the same rank) and consumer (the first
 * send of the chunk from dst after this send arrives), and during it each
 * send pushes its ready time to next_send and its finish time to consumer.
 * The chunk-by-chunk pass reads the sends in batches gathered by streaming
 * over the columns (send_batches.c) and splits each batch's chunks between
 * threads.  Memory: 8 bytes of links plus an 8-byte accumulator per send,
 * plus a 4-byte processing order only when the sends are not already in it
 * (producers emit them in order); nothing is G x P.
 */
#include "simulate.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "send_order_internal.h"
#include "simulate_internal.h"

#define TIME_EPS 1e-6
#define NO_SEND UINT32_MAX

void sim_result_free(cs_sim_result *r)
{
    if (!r)
        return;
    free(r->link_busy_us);
    free(r->link_utilization);
    r->link_busy_us = NULL;
    r->link_utilization = NULL;
}

/* ---- next_send and consumer ------------------------------------------------------- */

/* One chunk's records: a send leaving src (kind 0) or arriving at dst (kind
 * 1), at its schedule time: untimed, a send of step s sits at s + 0.5 and an
 * arrival at s + 1; timed, a send at start + eps and an arrival at end. */
typedef struct chunk_rec {
    double time;
    uint32_t tie;       /* sends, timed: rank of end_us (processing order) */
    uint32_t rec;       /* send index * 2 + kind */
    int rank;
} chunk_rec;

/* Group order: schedule time, arrivals first on ties; sends among
 * themselves in processing order, arrivals by index. */
static inline bool rec_before(const chunk_rec *x, const chunk_rec *y)
{
    if (x->time != y->time)
        return x->time < y->time;
    if ((x->rec & 1) != (y->rec & 1))
        return (x->rec & 1) > (y->rec & 1);
    if ((x->rec & 1) == 0 && x->tie != y->tie)
        return x->tie < y->tie;
    return x->rec < y->rec;
}

static int rec_compare(const void *pa, const void *pb)
{
    const chunk_rec *x = pa, *y = pb;
    if (x->rec == y->rec)
        return 0;
    return rec_before(x, y) ? -1 : 1;
}

/* One thread's scratch for linking chunks. */
typedef struct linker {
    const cs_algorithm *a;
    const uint32_t *trank;      /* NULL untimed */
    chunk_rec *rec, *grouped;   /* 2 x the longest chunk so far */
    long cap;
    unsigned *stamp;            /* per rank: chunk epoch of count/start */
    uint32_t *count, *start;    /* per rank */
    int *touched;
    unsigned epoch;
} linker;

/* The common case in one forward pass, with the result link_chunk's sort
 * gives: the chunk's sends in processing order, each arriving strictly after
 * its own schedule time, and distinct start times staying distinct once
 * TIME_EPS is added.  Then a rank's sends come in group order, and an
 * arrival is seen before every send that may consume it, so each send links
 * to the previous send from its src and takes over the arrivals pending at
 * its src that are due by its time (time <= its time: arrivals first on
 * ties).  Returns false (having written some links that link_chunk then
 * overwrites) when the chunk is not of that shape.  out: the chunk's pairs;
 * w->rec holds the pending arrivals (time; rec: the arrival's position k;
 * tie: the next pending at that rank); count/start hold each rank's last
 * send and first pending arrival (positions). */
static bool link_chunk_fast(linker *w, const send_rec *sr, uint32_t len, uint32_t *out)
{
    const cs_algorithm *a = w->a;
    const uint32_t *trank = w->trank;
    if (++w->epoch == 0) {
        memset(w->stamp, 0, sizeof *w->stamp * (size_t)(a->ranks + a->switch_nodes));
        w->epoch = 1;
    }
    unsigned epoch = w->epoch;
    uint32_t *last = w->count, *pend = w->start;
    chunk_rec *pa = w->rec;
    int nt = 0;
    long scans = 0;
    double prev_time = -INFINITY;
    uint32_t prev0 = 0, prev1 = 0;
    for (uint32_t k = 0; k < len; k++) {
        const send_rec *s = &sr[k];
        uint32_t i = send_rec_index(s);
        double st, en;
        if (trank) {
            uint32_t r0 = trank[s->t0], r1 = trank[s->t1];
            st = algorithm_time_value(a, s->t0) + TIME_EPS;
            en = algorithm_time_value(a, s->t1);
            if (k > 0 && (r0 < prev0 || (r0 == prev0 && r1 < prev1) ||
                          (r0 != prev0 && st == prev_time)))
                return false;
            if (!(en > st))
                return false;
            prev0 = r0;
            prev1 = r1;
            prev_time = st;
        } else {
            if (k > 0 && s->t0 < prev0)
                return false;
            prev0 = s->t0;
            st = s->t0 + 0.5;
            en = s->t0 + 1.0;
        }
        int src = s->src, dst = s->dst;
        if (w->stamp[src] != epoch) {
            w->stamp[src] = epoch;
            last[src] = NO_SEND;
            pend[src] = NO_SEND;
            w->touched[nt++] = src;
        }
        for (uint32_t *pp = &pend[src]; *pp != NO_SEND;) {
            chunk_rec *x = &pa[*pp];
            if (++scans > 4 * (long)len + 64)
                return false;   /* many arrivals wait at one rank: sort instead */
            if (x->time <= st) {
                out[2 * x->rec + 1] = i;
                *pp = x->tie;
            } else {
                pp = &x->tie;
            }
        }
        if (last[src] != NO_SEND)
            out[2 * last[src]] = i;
        last[src] = k;
        if (w->stamp[dst] != epoch) {
            w->stamp[dst] = epoch;
            last[dst] = NO_SEND;
            pend[dst] = NO_SEND;
            w->touched[nt++] = dst;
        }
        pa[k].time = en;
        pa[k].rec = k;
        pa[k].tie = pend[dst];
        pend[dst] = k;
    }
    for (int j = 0; j < nt; j++) {
        int r = w->touched[j];
        if (last[r] != NO_SEND)
            out[2 * last[r]] = NO_SEND;
        for (uint32_t q = pend[r]; q != NO_SEND; q = pa[q].tie)
            out[2 * q + 1] = NO_SEND;
    }
    return true;
}

/* Links one chunk: its records sr[0..len) (index order) write their pairs
 * to out[0..2 len).  A record's position k stands for the send in the
 * sort (rec = 2k + kind): positions follow the index order. */
static int link_chunk(linker *w, const send_rec *sr, uint32_t len, uint32_t *out)
{
    const cs_algorithm *a = w->a;
    if (2 * (long)len > w->cap) {
        long cap = 2 * (long)len;
        chunk_rec *r = realloc(w->rec, sizeof *r * (size_t)cap);
        if (r)
            w->rec = r;
        chunk_rec *g = r ? realloc(w->grouped, sizeof *g * (size_t)cap) : NULL;
        if (!r || !g)
            return CS_ENOMEM;
        w->grouped = g;
        w->cap = cap;
    }
    if (link_chunk_fast(w, sr, len, out))
        return CS_OK;
    if (++w->epoch == 0) {
        memset(w->stamp, 0, sizeof *w->stamp * (size_t)(a->ranks + a->switch_nodes));
        w->epoch = 1;
    }
    int nt = 0;
    for (uint32_t k = 0; k < len; k++) {
        const send_rec *s = &sr[k];
        chunk_rec *x = &w->rec[2 * k], *y = x + 1;
        x->rec = 2 * k;
        y->rec = 2 * k + 1;
        x->rank = s->src;
        y->rank = s->dst;
        if (w->trank) {
            x->time = algorithm_time_value(a, s->t0) + TIME_EPS;
            y->time = algorithm_time_value(a, s->t1);
            x->tie = w->trank[s->t1];
        } else {
            x->time = s->t0 + 0.5;
            y->time = s->t0 + 1.0;
            x->tie = 0;
        }
        y->tie = 0;
        for (int j = 0; j < 2; j++) {
            int rank = x[j].rank;
            if (w->stamp[rank] != w->epoch) {
                w->stamp[rank] = w->epoch;
                w->count[rank] = 0;
                w->touched[nt++] = rank;
            }
            w->count[rank]++;
        }
    }
    uint32_t at = 0;
    for (int j = 0; j < nt; j++) {
        int rank = w->touched[j];
        w->start[rank] = at;
        at += w->count[rank];
        w->count[rank] = w->start[rank];   /* becomes the fill position */
    }
    for (uint32_t k = 0; k < 2 * len; k++)
        w->grouped[w->count[w->rec[k].rank]++] = w->rec[k];
    for (int j = 0; j < nt; j++) {
        int rank = w->touched[j];
        uint32_t b = w->start[rank], e = w->count[rank];
        chunk_rec *g = w->grouped + b;
        if (e - b <= 24) {
            for (uint32_t i = 1; i < e - b; i++) {
                chunk_rec x = g[i];
                uint32_t q = i;
                while (q > 0 && rec_before(&x, &g[q - 1])) {
                    g[q] = g[q - 1];
                    q--;
                }
                g[q] = x;
            }
        } else {
            qsort(g, e - b, sizeof *g, rec_compare);
        }
        /* backwards: each record learns the next send after it */
        uint32_t next = NO_SEND;
        for (uint32_t q = e - b; q-- > 0;) {
            uint32_t r = g[q].rec;
            out[r] = next;   /* 2k: next_send, 2k + 1: consumer */
            if (!(r & 1))
                next = send_rec_index(&sr[r >> 1]);
        }
    }
    return CS_OK;
}

/* ---- sim_links (simulate_internal.h): next_send and consumer, chunk by chunk ---- */

int sim_links_init(sim_links *L, const cs_algorithm *a, const uint32_t *trank, int nthreads,
                   const send_batches *sb)
{
    memset(L, 0, sizeof *L);
    long n = a->nsends;
    if (nthreads < 1)
        nthreads = 1;
    L->nthreads = nthreads;
    L->nsends = n;
    L->whole = sb->begin != NULL;
    if (L->whole) {
        /* every send's pair at its position among all the batches' records:
         * converted to index order once, after the last batch */
        L->out_cap = sb->nkept;
        L->out = send_array_new(sizeof *L->out * 2 * (size_t)L->out_cap);
    } else {
        L->next_send = send_array_new(sizeof(uint32_t) * (size_t)n);
        L->consumer = send_array_new(sizeof(uint32_t) * (size_t)n);
    }
    linker *w = calloc((size_t)nthreads, sizeof *w);
    L->workers = w;
    if ((L->whole ? !L->out : !L->next_send || !L->consumer) || !w)
        return CS_ENOMEM;
    size_t nodes = (size_t)(a->ranks + a->switch_nodes);   /* ranks and switch nodes */
    for (int t = 0; t < nthreads; t++) {
        w[t] = (linker){.a = a, .trank = trank};
        w[t].stamp = calloc(nodes, sizeof *w[t].stamp);
        w[t].count = malloc(sizeof *w[t].count * nodes);
        w[t].start = malloc(sizeof *w[t].start * nodes);
        w[t].touched = malloc(sizeof *w[t].touched * nodes);
        if (!w[t].stamp || !w[t].count || !w[t].start || !w[t].touched)
            return CS_ENOMEM;
    }
    return CS_OK;
}

int sim_links_batch(sim_links *L, const send_batch *b)
{
    if (L->whole)
        return CS_OK;
    uint32_t entries = b->g1 - b->g0;
    long total = (long)b->begin[entries] - b->begin[0];
    if (total > L->out_cap) {   /* nothing to keep: the batch is linked after this */
        send_array_delete(L->out, sizeof *L->out * 2 * (size_t)L->out_cap);
        L->out_cap = 0;
        L->out = send_array_new(sizeof *L->out * 2 * (size_t)total);
        if (!L->out)
            return CS_ENOMEM;
        L->out_cap = total;
    }
    return CS_OK;
}

int sim_links_chunk(sim_links *L, int thread, const send_batch *b, uint32_t j)
{
    linker *w = &((linker *)L->workers)[thread];
    uint32_t len;
    const send_rec *sr = send_batch_recs(b, j, &len);
    /* whole: the position among all kept sends (dense batches: begin is
     * global); else the position in the batch */
    size_t at = L->whole ? b->begin[j] : (size_t)(sr - b->recs);
    return link_chunk(w, sr, len, L->out + 2 * at);
}

void sim_links_batch_done(sim_links *L, send_batches *sb, const send_batch *b)
{
    if (!L->whole)
        send_batch_write_back(sb, b, L->out, L->next_send, L->consumer);
}

int sim_links_finish(sim_links *L, send_batches *sb)
{
    if (!L->whole)
        return CS_OK;
    L->next_send = send_array_new(sizeof(uint32_t) * (size_t)L->nsends);
    L->consumer = send_array_new(sizeof(uint32_t) * (size_t)L->nsends);
    if (!L->next_send || !L->consumer)
        return CS_ENOMEM;
    int rc = send_batches_write_back_all(sb, L->out, L->next_send, L->consumer);
    send_array_delete(L->out, sizeof *L->out * 2 * (size_t)L->out_cap);
    L->out = NULL;
    L->out_cap = 0;
    return rc;
}

void sim_links_done(sim_links *L)
{
    linker *w = L->workers;
    for (int t = 0; w && t < L->nthreads; t++) {
        free(w[t].rec);
        free(w[t].grouped);
        free(w[t].stamp);
        free(w[t].count);
        free(w[t].start);
        free(w[t].touched);
    }
    free(w);
    L->workers = NULL;
    send_array_delete(L->out, sizeof *L->out * 2 * (size_t)L->out_cap);
    L->out = NULL;
    L->out_cap = 0;
}

void sim_links_free(sim_links *L)
{
    sim_links_done(L);
    send_array_delete(L->next_send, sizeof(uint32_t) * (size_t)L->nsends);
    send_array_delete(L->consumer, sizeof(uint32_t) * (size_t)L->nsends);
    memset(L, 0, sizeof *L);
}

/* One thread's share of a batch. */
typedef struct link_job {
    sim_links *L;
    int thread;
    const send_batch *batch;
    uint32_t j0, j1;
    int rc;
} link_job;

static void *link_job_run(void *arg)
{
    link_job *job = arg;
    for (uint32_t j = job->j0; j < job->j1 && job->rc == CS_OK; j++)
        job->rc = sim_links_chunk(job->L, job->thread, job->batch, j);
    return NULL;
}

/* next_send and consumer of every send, chunk by chunk: batches of chunks
 * gathered by streaming over the columns, each batch's chunks split between
 * threads (they write disjoint sends). */
static int build_links(const cs_algorithm *a, const uint32_t *trank, sim_links *L)
{
    send_batches sb;
    int rc = send_batches_init(&sb, a, NULL, trank != NULL);
    int nthreads = rc == CS_OK && sb.begin ? send_pass_threads(a->nsends) : 1;
    if (rc == CS_OK)
        rc = sim_links_init(L, a, trank, nthreads, &sb);
    send_batch b;
    while (rc == CS_OK && (rc = send_batches_next(&sb, &b)) == CS_OK) {
        if ((rc = sim_links_batch(L, &b)) != CS_OK)
            break;
        uint32_t entries = b.g1 - b.g0;
        long total = (long)b.begin[entries] - b.begin[0];
        link_job job[4];
        uint32_t j = 0;
        for (int t = 0; t < nthreads; t++) {
            job[t] = (link_job){.L = L, .thread = t, .batch = &b, .j0 = j};
            long goal = b.begin[0] + total * (t + 1) / nthreads;
            while (j < entries && (t == nthreads - 1 || b.begin[j + 1] <= goal))
                j++;
            job[t].j1 = t == nthreads - 1 ? entries : j;
        }
        pthread_t th[4];
        int started = 0;
        for (int t = 1; t < nthreads; t++) {
            if (pthread_create(&th[t], NULL, link_job_run, &job[t]) != 0)
                break;
            started = t;
        }
        link_job_run(&job[0]);
        for (int t = started + 1; t < nthreads; t++)
            link_job_run(&job[t]);
        for (int t = 1; t <= started; t++)
            pthread_join(th[t], NULL);
        for (int t = 0; t < nthreads; t++)
            if (rc == CS_OK)
                rc = job[t].rc;
        if (rc == CS_OK)
            sim_links_batch_done(L, &sb, &b);
    }
    if (rc == SEND_BATCHES_DONE)
        rc = sim_links_finish(L, &sb);
    send_batches_free(&sb);
    sim_links_done(L);
    return rc;
}

/* ---- simulation ------------------------------------------------------------------- */

/* Resources: every link and shared set is a group of lanes (one min-heap of
 * lane free times each).  A send takes one lane of its link and of each of
 * its sets for alpha + chunk / gbps, except on switch ports of timed
 * schedules with a known chunk size: there each send runs at the rate it was
 * scheduled with (chunk_bytes / (duration - alpha), at most the port's
 * bandwidth B; docs/model.md, "Switch ports"), the port gets k lanes of B/k
 * with k = floor(B / the lowest rate on it) (at most PORT_MAX_LANES) and a
 * send at rate r takes max(1, floor(r k / B)) lanes; the derived pair link
 * itself is then no constraint.  Rounding down, not up: sends whose rates
 * sum to at most B (what the verifier accepts) then always fit the k lanes
 * together (each x = r k / B is > k / (k + 1) as r >= the lowest rate, so
 * with L lanes taken, k + 1 <= L would need sum x > k), so a verified timed
 * schedule never waits for a port it shares as scheduled and simulates no
 * later than it claims (simulate.h).  Rounding up serialized 0.6 B and
 * 0.4 B on one port (k = 2: 2 + 1 lanes), 6.17 us against 3.5 us claimed.
 * Unverified schedules that oversubscribe a port may run above B here. */
#define PORT_MAX_LANES 64

typedef struct sim_resources {
    int *lane_begin, *set_lane_begin;  /* L + 1, nshared + 1 */
    double *lanes, *set_lanes;
    int *set_begin, *set_list;         /* link -> shared sets */
    bool rates;                        /* switch ports run at scheduled rates */
    unsigned char *port_link;          /* per link: a switch pair (rates only) */
    double *port_bw;                   /* per link and per set: B in bytes/us, 0 if no port */
    double *set_bw;
} sim_resources;

static void resources_free(sim_resources *r)
{
    free(r->lane_begin);
    free(r->set_lane_begin);
    free(r->lanes);
    free(r->set_lanes);
    free(r->set_begin);
    free(r->set_list);
    free(r->port_link);
    free(r->port_bw);
    free(r->set_bw);
}

/* The rate (bytes/us) at which timed send i was scheduled over switch link l,
 * capped at the port's bandwidth. */
static double scheduled_rate(const cs_algorithm *a, long i, const cs_link *l)
{
    double busy = algorithm_send_end_us(a, i) - algorithm_send_start_us(a, i) - l->alpha_us;
    double bw = l->gbps * 1e3, r = busy > 0 ? a->timed_chunk_bytes / busy : bw;
    return r < bw ? r : bw;
}

/* Lanes a send at rate r takes on a port of bw split into k lanes (above:
 * rounded down, at least one). */
static inline int lanes_for_rate(double r, double bw, int k)
{
    double m = floor(r * k / bw + 1e-9);
    return m < 1 ? 1 : m > k ? k : (int)m;
}

static int resources_init(sim_resources *r, const cs_topology *t, const cs_algorithm *a,
                          const link_finder *lf, bool timed)
{
    int L = t->nlinks, S = t->nshared;
    memset(r, 0, sizeof *r);
    r->lane_begin = malloc(sizeof(int) * (size_t)(L + 1));
    r->set_lane_begin = malloc(sizeof(int) * (size_t)(S + 1));
    r->set_begin = calloc((size_t)L + 2, sizeof(int));
    r->port_bw = calloc((size_t)L + 1, sizeof(double));
    r->set_bw = calloc((size_t)S + 1, sizeof(double));
    r->port_link = calloc((size_t)L + 1, 1);
    double *rmin = malloc(sizeof(double) * (size_t)(L + S + 1));
    if (!r->lane_begin || !r->set_lane_begin || !r->set_begin || !r->port_bw || !r->set_bw ||
        !r->port_link || !rmin) {
        free(rmin);
        return CS_ENOMEM;
    }
    long members = 0;
    for (int k = 0; k < S; k++) {
        members += t->shared[k].nlinks;
        for (int j = 0; j < t->shared[k].nlinks; j++)
            r->set_begin[t->shared[k].links[j] + 1]++;
    }
    for (int l = 0; l < L; l++)
        r->set_begin[l + 1] += r->set_begin[l];
    r->set_list = malloc(sizeof(int) * (size_t)(members ? members : 1));
    int *fill = malloc(sizeof(int) * (size_t)(L + 1));
    if (!r->set_list || !fill) {
        free(fill);
        free(rmin);
        return CS_ENOMEM;
    }
    memcpy(fill, r->set_begin, sizeof(int) * (size_t)(L + 1));
    for (int k = 0; k < S; k++)
        for (int j = 0; j < t->shared[k].nlinks; j++)
            r->set_list[fill[t->shared[k].links[j]]++] = k;
    free(fill);
    /* switch ports of a timed schedule: bandwidths and the lowest rate on each */
    r->rates = timed && a->timed_chunk_bytes > 0 && t->nswitches > 0;
    for (int x = 0; x < L + S; x++)
        rmin[x] = INFINITY;
    if (r->rates) {
        for (int k = 0; k < S; k++)
            if (t->shared[k].switch_id >= 0)
                r->set_bw[k] = t->switches[t->shared[k].switch_id].gbps * 1e3;
        for (int l = 0; l < L; l++) {
            if (t->links[l].switch_id < 0)
                continue;
            r->port_link[l] = 1;
            bool in_set = false;
            for (int m = r->set_begin[l]; m < r->set_begin[l + 1]; m++)
                in_set |= r->set_bw[r->set_list[m]] > 0;
            if (!in_set)
                r->port_bw[l] = t->links[l].gbps * 1e3;
        }
        for (long i = 0; i < a->nsends; i++) {
            int l = link_finder_find(lf, algorithm_send_src(a, i), algorithm_send_dst(a, i));
            if (!r->port_link[l])
                continue;
            double rate = scheduled_rate(a, i, &t->links[l]);
            if (rate < rmin[l])
                rmin[l] = rate;
            for (int m = r->set_begin[l]; m < r->set_begin[l + 1]; m++)
                if (rate < rmin[L + r->set_list[m]])
                    rmin[L + r->set_list[m]] = rate;
        }
    }
    long nl = 0, ns = 0;
    for (int l = 0; l < L; l++) {
        r->lane_begin[l] = (int)nl;
        int k = t->links[l].lanes;
        if (r->port_link[l])
            k = r->port_bw[l] > 0 && isfinite(rmin[l])
                    ? (int)fmin(PORT_MAX_LANES, fmax(1.0, floor(r->port_bw[l] / rmin[l] + 1e-9)))
                    : 1;
        nl += k;
    }
    r->lane_begin[L] = (int)nl;
    for (int k = 0; k < S; k++) {
        r->set_lane_begin[k] = (int)ns;
        int lanes = t->shared[k].lanes;
        if (r->set_bw[k] > 0)
            lanes = isfinite(rmin[L + k])
                        ? (int)fmin(PORT_MAX_LANES, fmax(1.0, floor(r->set_bw[k] / rmin[L + k] + 1e-9)))
                        : 1;
        ns += lanes;
    }
    r->set_lane_begin[S] = (int)ns;
    free(rmin);
    r->lanes = calloc((size_t)(nl ? nl : 1), sizeof(double));
    r->set_lanes = calloc((size_t)(ns ? ns : 1), sizeof(double));
    return r->lanes && r->set_lanes ? CS_OK : CS_ENOMEM;
}

/* The time m lanes of heap h (k lanes) are free; lanes_commit takes them. */
static double lanes_free_at(double *h, int k, int m)
{
    if (m <= 1)
        return h[0];
    /* several lanes (a port send faster than the port's slowest): a sorted
     * array is a min-heap, and k <= PORT_MAX_LANES */
    for (int i = 1; i < k; i++) {
        double x = h[i];
        int j = i;
        while (j > 0 && h[j - 1] > x) {
            h[j] = h[j - 1];
            j--;
        }
        h[j] = x;
    }
    return h[m - 1];
}

static void lanes_commit(double *h, int k, int m, double fin)
{
    if (m <= 1) {
        heap_replace_min(h, k, fin);
        return;
    }
    for (int i = 0; i < m; i++)   /* h is sorted (lanes_free_at): keep it so */
        h[i] = fin;
    for (int i = m; i < k && h[i] < fin; i++) {
        h[i - m] = h[i];
        h[i] = fin;
    }
}

static int simulate_switch_nodes(const cs_topology *t, const cs_algorithm *a, double bytes,
                                 bool ideal, cs_sim_result *out, cs_error *err);
static int simulate(const cs_topology *t, const cs_algorithm *a, double bytes, bool ideal,
                    cs_sim_result *out, cs_error *err);

int simulate_algorithm(const cs_topology *t, const cs_algorithm *a, double bytes,
                       cs_sim_result *out, cs_error *err)
{
    return simulate(t, a, bytes, true, out, err);
}

int simulate_algorithm_time(const cs_topology *t, const cs_algorithm *a, double bytes,
                            cs_sim_result *out, cs_error *err)
{
    return simulate(t, a, bytes, false, out, err);
}

static int simulate(const cs_topology *t, const cs_algorithm *a, double bytes, bool ideal,
                    cs_sim_result *out, cs_error *err)
{
    memset(out, 0, sizeof *out);
    if (!t || !t->finalized)
        return cs_error_set(err, CS_EINVAL, "topology", "simulation needs a finalized topology");
    if (a->switch_nodes > 0 && !t->node_view)
        return simulate_switch_nodes(t, a, bytes, ideal, out, err);
    int P = t->node_view && a->ranks != t->ranks ? t->ranks - t->nswitch_nodes : t->ranks;
    if (a->ranks != P || a->ranks + a->switch_nodes > t->ranks)
        return cs_error_set(err, CS_EINVAL, "ranks", "the algorithm has %d ranks, topology %s "
                            "has %d", a->ranks, t->name, P);
    if (!isfinite(bytes) || bytes < 0)
        return cs_error_set(err, CS_EINVAL, "bytes", "bytes must be a finite number >= 0");
    if (a->chunks < 1)
        return cs_error_set(err, CS_EINVAL, "chunks", "chunks must be >= 1");
    long n = a->nsends;
    if (n > 0x7fffffffL)
        return cs_error_set(err, CS_ELIMIT, "sends", "too large to simulate: %ld sends", n);
    bool timed = algorithm_is_timed(a);
    int rc = CS_OK;
    link_finder lf;
    if (link_finder_init(&lf, t) != CS_OK) {
        link_finder_free(&lf);
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory simulating %ld sends", n);
    }
    for (long i = 0; i < n; i++) {
        const cs_send sv = algorithm_send(a, i), *s = &sv;
        if (s->step < 0 || s->step >= a->steps || s->chunk < 0 ||
            s->chunk >= a->global_chunks || s->src < 0 || s->src >= t->ranks || s->dst < 0 ||
            s->dst >= t->ranks) {
            link_finder_free(&lf);
            return cs_error_set(err, CS_EINVAL, "sends", "send %ld (chunk %ld, %d->%d, step %d): "
                                "chunk, rank or step out of range", i, s->chunk, s->src, s->dst,
                                s->step);
        }
        if (link_finder_find(&lf, s->src, s->dst) < 0) {
            link_finder_free(&lf);
            return cs_error_set(err, CS_EINVAL, "sends", "send %ld (chunk %ld, %d->%d, step %d): "
                                "no link %d->%d", i, s->chunk, s->src, s->dst, s->step, s->src,
                                s->dst);
        }
    }
    uint32_t *trank = NULL, *ord = NULL;
    sim_links L;
    memset(&L, 0, sizeof L);
    if (timed) {
        trank = malloc(sizeof *trank * (size_t)algorithm_time_count(a));
        if (trank && algorithm_time_ranks(a, trank) != CS_OK) {
            free(trank);
            trank = NULL;
        }
    }
    if ((timed && !trank) || build_links(a, trank, &L) != CS_OK ||
        send_processing_order(a, trank, &ord) != CS_OK)
        rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory simulating %ld sends", n);
    if (rc == CS_OK)
        rc = sim_timing(t, a, bytes, &lf, trank, ord, &L, ideal, out, err);
    sim_links_free(&L);
    link_finder_free(&lf);
    free(trank);
    free(ord);
    return rc;
}

int sim_timing(const cs_topology *t, const cs_algorithm *a, double bytes, const link_finder *lfp,
               const uint32_t *trank, const uint32_t *ord, const sim_links *links, bool ideal,
               cs_sim_result *out, cs_error *err)
{
    memset(out, 0, sizeof *out);
    long n = a->nsends;
    bool timed = trank != NULL;
    int L = t->nlinks;
    int rc = CS_OK;
    const link_finder lf = *lfp;
    const uint32_t *next_send = links->next_send, *consumer = links->consumer;
    double *acc = NULL;   /* per send: the latest finish it waits for so far */
    double *dur = malloc(sizeof(double) * (size_t)(L ? L : 1));
    sim_resources res;
    memset(&res, 0, sizeof res);
    out->link_busy_us = calloc((size_t)(L ? L : 1), sizeof(double));
    out->link_utilization = calloc((size_t)(L ? L : 1), sizeof(double));
    out->nlinks = L;
    if (!dur || !out->link_busy_us || !out->link_utilization ||
        resources_init(&res, t, a, &lf, timed) != CS_OK ||
        !(acc = send_array_new(sizeof *acc * (size_t)n))) {
        rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory simulating %ld sends", n);
        goto done;
    }
    double chunk = algorithm_chunk_bytes(a, bytes);
    out->chunk_bytes = chunk;
    for (int l = 0; l < L; l++)
        dur[l] = t->links[l].alpha_us + chunk / (t->links[l].gbps * 1e3);

    double end_time = 0.0;
    for (long k = 0; k < n; k++) {
        uint32_t i = ord ? ord[k] : (uint32_t)k;
        int src = algorithm_send_src(a, i), dst = algorithm_send_dst(a, i);
        double r = acc[i];
        int l = link_finder_find(&lf, src, dst);
        const cs_link *lk = &t->links[l];
        double d = dur[l], share = 1.0, rate = 0.0;
        if (res.port_link[l]) {
            rate = scheduled_rate(a, i, lk);
            d = lk->alpha_us + chunk / rate;
            share = rate / (lk->gbps * 1e3);
        }
        double *lh = res.lanes + res.lane_begin[l];
        int kl = res.lane_begin[l + 1] - res.lane_begin[l];
        bool link_limits = !res.port_link[l] || res.port_bw[l] > 0;
        int ml = res.port_link[l] && link_limits ? lanes_for_rate(rate, res.port_bw[l], kl) : 1;
        double start = r;
        if (link_limits) {
            double f = lanes_free_at(lh, kl, ml);
            if (f > start)
                start = f;
        }
        for (int m = res.set_begin[l]; m < res.set_begin[l + 1]; m++) {
            int set = res.set_list[m];
            int ks = res.set_lane_begin[set + 1] - res.set_lane_begin[set];
            int ms = res.set_bw[set] > 0 ? lanes_for_rate(rate, res.set_bw[set], ks) : 1;
            double f = lanes_free_at(res.set_lanes + res.set_lane_begin[set], ks, ms);
            if (f > start)
                start = f;
        }
        double fin = start + d;
        if (link_limits)
            lanes_commit(lh, kl, ml, fin);
        for (int m = res.set_begin[l]; m < res.set_begin[l + 1]; m++) {
            int set = res.set_list[m];
            int ks = res.set_lane_begin[set + 1] - res.set_lane_begin[set];
            int ms = res.set_bw[set] > 0 ? lanes_for_rate(rate, res.set_bw[set], ks) : 1;
            lanes_commit(res.set_lanes + res.set_lane_begin[set], ks, ms, fin);
        }
        uint32_t q = next_send[i];
        if (q != NO_SEND && acc[q] < r)
            acc[q] = r;
        q = consumer[i];
        if (q != NO_SEND && acc[q] < fin)
            acc[q] = fin;
        if (fin > end_time)
            end_time = fin;
        out->link_busy_us[l] += d * share;
        out->total_bytes += chunk;
        if (t->group_of && t->group_of[src] != t->group_of[dst])
            out->cross_group_bytes += chunk;
    }
    out->time_us = end_time;
    if (timed) {
        for (long i = 0; i < n; i++)
            if (algorithm_send_end_us(a, i) > out->scheduled_us)
                out->scheduled_us = algorithm_send_end_us(a, i);
        out->scheduled_size = a->timed_chunk_bytes > 0 &&
                              fabs(chunk - a->timed_chunk_bytes) <= 1e-9 * a->timed_chunk_bytes;
    }
    out->max_utilization = 0.0;
    for (int l = 0; l < L; l++) {
        double u = end_time > 0 ? out->link_busy_us[l] / (end_time * t->links[l].lanes) : 0.0;
        out->link_utilization[l] = u;
        if (u > out->max_utilization)
            out->max_utilization = u;
    }
    out->ideal_us = ideal ? simulate_ideal_us(t, &a->collective, a->chunks, bytes) : NAN;
done:
    send_array_delete(acc, sizeof *acc * (size_t)n);
    free(dur);
    resources_free(&res);
    if (rc != CS_OK)
        sim_result_free(out);
    return rc;
}

/* Cross-group bytes of a schedule through switch nodes: a node is in no
 * group, so the view counted every send to or from it; what crosses groups
 * is a copy from a node to a rank of another group than the chunk's
 * uploader's (the first upload of that chunk to that node), and the
 * rank-to-rank sends as always. */
static int cross_group_via_nodes(const cs_topology *t, const cs_algorithm *a, cs_sim_result *out)
{
    out->cross_group_bytes = 0.0;
    if (!t->group_of)
        return CS_OK;
    int S = a->switch_nodes, P = a->ranks;
    long G = a->global_chunks;
    int *up = malloc(sizeof *up * (size_t)(G > 0 ? G : 1) * (size_t)S);
    if (!up)
        return CS_ENOMEM;
    for (long i = 0; i < G * S; i++)
        up[i] = -2;
    for (long i = 0; i < a->nsends; i++) {   /* uploads first: any order of the sends */
        int src = algorithm_send_src(a, i), dst = algorithm_send_dst(a, i);
        long g = algorithm_send_chunk(a, i);
        if (src < P && dst >= P && up[g * S + dst - P] == -2)
            up[g * S + dst - P] = t->group_of[src];
    }
    for (long i = 0; i < a->nsends; i++) {
        int src = algorithm_send_src(a, i), dst = algorithm_send_dst(a, i);
        long g = algorithm_send_chunk(a, i);
        int from = src < P ? t->group_of[src] : up[g * S + src - P];
        if (dst < P && from != -2 && from != t->group_of[dst])
            out->cross_group_bytes += out->chunk_bytes;
    }
    free(up);
    return CS_OK;
}

/* Schedules through copy-capable switch nodes: simulated on the node view
 * (the nodes as ranks, their links inside the members' ports), the link
 * figures then reported for t's own links (a switch node's links are not
 * among them) and the ideal for t. */
static int simulate_switch_nodes(const cs_topology *t, const cs_algorithm *a, double bytes,
                                 bool ideal, cs_sim_result *out, cs_error *err)
{
    if (a->ranks != t->ranks)
        return cs_error_set(err, CS_EINVAL, "ranks", "the algorithm has %d ranks, topology %s "
                            "has %d", a->ranks, t->name, t->ranks);
    if (a->switch_nodes > t->nswitch_nodes)
        return cs_error_set(err, CS_EINVAL, "switch_nodes", "the algorithm names %d switch "
                            "nodes, topology %s has %d copy-capable switches", a->switch_nodes,
                            t->name, t->nswitch_nodes);
    cs_topology *nv = NULL;
    int rc = topology_switch_nodes(t, &nv, err);
    if (rc != CS_OK)
        return rc;
    cs_sim_result r;
    rc = simulate(nv, a, bytes, false, &r, err);
    if (rc == CS_OK) {
        *out = r;
        out->nlinks = t->nlinks;
        out->link_busy_us = calloc((size_t)(t->nlinks ? t->nlinks : 1), sizeof(double));
        out->link_utilization = calloc((size_t)(t->nlinks ? t->nlinks : 1), sizeof(double));
        if (!out->link_busy_us || !out->link_utilization) {
            sim_result_free(out);
            rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
        } else {
            out->max_utilization = 0.0;
            for (int l = 0; l < nv->nlinks; l++) {
                const cs_link *k = &nv->links[l];
                int m = k->src < t->ranks && k->dst < t->ranks
                            ? topology_find_link(t, k->src, k->dst) : -1;
                if (m < 0)
                    continue;
                out->link_busy_us[m] = r.link_busy_us[l];
                out->link_utilization[m] = r.link_utilization[l];
                if (r.link_utilization[l] > out->max_utilization)
                    out->max_utilization = r.link_utilization[l];
            }
            out->ideal_us = ideal ? simulate_ideal_us(t, &a->collective, a->chunks, bytes) : NAN;
            if (cross_group_via_nodes(t, a, out) != CS_OK) {
                sim_result_free(out);
                rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
            }
        }
        sim_result_free(&r);
    }
    topology_free(nv);
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
