/*
 * verify.c - replays an algorithm against its topology and collective and
 * says, send by send, what is wrong with it (see verify.h for the checks).
 * This file is the driver: header and per-send checks, links, bandwidth; the
 * value replay and postcondition are in verify_values.c.
 *
 * Scale drives the design: TACOS schedules reach 10^8 sends, so nothing here
 * is G x P and nothing reads the sends at random.  Per send the verifier keeps
 * one bit (the send passed its own checks).  The per-send checks and the
 * bandwidth sweep walk the sends in processing order, which producers emit,
 * so both are sequential passes (an index of 4 bytes per send is built only
 * for schedules out of order).  Each send's link is looked up once (a byte
 * or two per rank pair up to 2048 ranks, else a binary search over the
 * source's out-links) and kept for the bandwidth sweep up to 2^23 sends (looked up
 * again above).  The value replay
 * (verify_values.c) walks one chunk at a time over batches gathered by
 * streaming over the columns, with per-rank state stamped by the chunk's
 * epoch instead of being cleared.
 *
 * Timed schedules (every send has start_us/end_us) get one sweep in time
 * order instead of the per-step counts, every resource keeping its own sends
 * in flight.  A link or shared set from the document holds at most `lanes`
 * sends at once.  A switch port (the egress or ingress set of one rank on
 * one switch, or a derived link whose set was omitted) is one physical
 * resource with the switch's bandwidth:
 * concurrent sends may share it, but the sum of their rates (chunk bytes over
 * duration minus alpha) may not exceed it (docs/model.md, "Switch ports").
 * That needs the chunk size the times were computed for (the algorithm's
 * chunk_bytes); without it a port carries one send at a time, as in rounds.
 */
#include "verify_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Relative slack of the port-rate check: rates come from differences of
 * floating-point times. */
#define VERIFY_RATE_TOL 1e-6

/* ---- reporting --------------------------------------------------------------------- */

static void vproblem(vctx *v, const char *field, const char *fmt, va_list ap)
{
    cs_verify_report *rep = v->rep;
    rep->ok = false;
    if (rep->nproblems == 0)
        snprintf(v->first_field, sizeof v->first_field, "%s", field ? field : "");
    rep->nproblems++;
    if (rep->nreasons < CS_VERIFY_MAX_REASONS)
        vsnprintf(rep->reasons[rep->nreasons++], sizeof rep->reasons[0], fmt, ap);
}

void verify_problem(vctx *v, const char *field, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vproblem(v, field, fmt, ap);
    va_end(ap);
}

/* "send 17 (chunk 3, 2->5, step 1): " + the reason */
void verify_send_problem(vctx *v, long i, const char *fmt, ...)
{
    if (v->rep->nreasons >= CS_VERIFY_MAX_REASONS && v->rep->nproblems > 0) {
        v->rep->nproblems++;
        return;
    }
    const cs_send sv = algorithm_send(v->a, i), *s = &sv;
    char head[128], field[48], msg[256];
    if (v->timed)
        snprintf(head, sizeof head, "send %ld (chunk %ld, %d->%d, step %d, %.3f-%.3f us): ", i,
                 s->chunk, s->src, s->dst, s->step, s->start_us, s->end_us);
    else
        snprintf(head, sizeof head, "send %ld (chunk %ld, %d->%d, step %d): ", i, s->chunk,
                 s->src, s->dst, s->step);
    snprintf(field, sizeof field, "sends[%ld]", i);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    verify_problem(v, field, "%s%s", head, msg);
}

node_name verify_node_name(const vctx *v, int r)
{
    node_name n;
    int s = r >= v->P ? topology_switch_of_node(v->t, r) : -1;
    if (s >= 0)
        snprintf(n.s, sizeof n.s, "switch %s (node %d)", v->t->switches[s].name, r);
    else
        snprintf(n.s, sizeof n.s, "rank %d", r);
    return n;
}

bool verify_reasons_full(const vctx *v)
{
    return v->rep->nreasons >= CS_VERIFY_MAX_REASONS;
}

/* ---- keys --------------------------------------------------------------------------- */

static inline bool is_valid(const vctx *v, long i) { return (v->valid[i >> 3] >> (i & 7)) & 1; }

/* 2^23 sends: 32 MB of cache at most */
#define VERIFY_LINK_CACHE_MAX (1L << 23)

static inline int link_of(const vctx *v, long i)
{
    if (v->link_pos)
        return v->t->out_begin[algorithm_send_src(v->a, i)] + v->link_pos[i];
    if (v->link_cache)
        return v->link_cache[i];
    return link_finder_find(&v->links, algorithm_send_src(v->a, i), algorithm_send_dst(v->a, i));
}

/* ---- bandwidth ------------------------------------------------------------------------ */

static void describe_set(const vctx *v, int set, char *buf, size_t size)
{
    const cs_shared *sh = &v->t->shared[set];
    if (sh->switch_id >= 0 && sh->nlinks >= 2) {
        /* derived sets hold all links out of (egress) or into (ingress) one rank */
        const cs_link *l0 = &v->t->links[sh->links[0]], *l1 = &v->t->links[sh->links[1]];
        bool egress = l0->src == l1->src;
        snprintf(buf, size, "the %s port of rank %d on switch %s", egress ? "egress" : "ingress",
                 egress ? l0->src : l0->dst, v->t->switches[sh->switch_id].name);
        return;
    }
    int n = snprintf(buf, size, "shared set %d (", set);
    for (int j = 0; j < sh->nlinks && n < (int)size - 16; j++) {
        const cs_link *l = &v->t->links[sh->links[j]];
        n += snprintf(buf + n, size - (size_t)n, "%s%d->%d", j ? ", " : "", l->src, l->dst);
        if (j == 3 && sh->nlinks > 5) {
            n += snprintf(buf + n, size - (size_t)n, ", ... %d links", sh->nlinks);
            break;
        }
    }
    if (n < (int)size - 2)
        snprintf(buf + n, size - (size_t)n, ")");
}

/* A shared set's count in the current step beside its lanes: one cache
 * line for both. */
typedef struct step_slot {
    uint32_t cnt;
    int32_t lanes;
} step_slot;

/* A link's count in the current step, its lanes and its shared sets, in one
 * 16-byte record: the sends of a step hit links at random, and the count,
 * the set range and the set list in separate arrays were three cache misses
 * per send (a cs_link is 40 bytes: on dgxh100:128, 5.5 MB of them).  Most
 * links are in at most two sets (a switch port's egress and ingress), held
 * here; set[0] == BW_MANY_SETS sends the sweep to the set list. */
typedef struct link_slot {
    uint32_t cnt;
    int32_t lanes;
    int32_t set[2];             /* -1: none */
} link_slot;

#define BW_MANY_SETS (-2)

/* Counts a send on shared set `set`, touching it first. */
static inline void count_set(step_slot *sslot, int *stouch, int *ns, int set)
{
    if (sslot[set].cnt++ == 0)
        stouch[(*ns)++] = set;
}

/* Resources over capacity in one step (need 1) get the send that took them
 * over, their (lanes x rounds + 1)-th in the step's order, in *over (need
 * 2 then).  A second walk over the step's sends (order positions k0..k1),
 * only for a step with a problem, so the counting walk does no capacity
 * test per send. */
typedef struct bw_over {
    unsigned char *lneed, *sneed;
    long *lover, *sover;
} bw_over;

static inline void over_count(unsigned char *need, long *over, long cap, long i)
{
    if (*need == 1 && ++*over == cap + 1) {
        *over = i;
        *need = 2;
    }
}

static void find_over(const vctx *v, const uint32_t *ord, long k0, long k1, const link_slot *lslot,
                      const step_slot *sslot, long rounds, bw_over *o)
{
    for (long k = k0; k < k1; k++) {
        long i = ord ? ord[k] : k;
        if (!is_valid(v, i))
            continue;
        int l = link_of(v, i);
        const link_slot *x = &lslot[l];
        over_count(&o->lneed[l], &o->lover[l], x->lanes * rounds, i);
        if (x->set[0] >= 0) {
            for (int q = 0; q < 2 && x->set[q] >= 0; q++)
                over_count(&o->sneed[x->set[q]], &o->sover[x->set[q]],
                           sslot[x->set[q]].lanes * rounds, i);
        } else if (x->set[0] == BW_MANY_SETS) {
            for (int m = v->set_begin[l]; m < v->set_begin[l + 1]; m++)
                over_count(&o->sneed[v->set_list[m]], &o->sover[v->set_list[m]],
                           sslot[v->set_list[m]].lanes * rounds, i);
        }
    }
}

/* Per step, in step order: the sends over each link and shared set. */
static int check_bandwidth_steps(vctx *v, const uint32_t *ord, cs_error *err)
{
    const cs_topology *t = v->t;
    link_slot *lslot = calloc((size_t)t->nlinks + 1, sizeof *lslot);
    step_slot *sslot = calloc((size_t)t->nshared + 1, sizeof *sslot);
    bw_over o = {calloc((size_t)t->nlinks + 1, 1), calloc((size_t)t->nshared + 1, 1),
                 malloc(sizeof(long) * (size_t)(t->nlinks + 1)),
                 malloc(sizeof(long) * (size_t)(t->nshared + 1))};
    int *ltouch = malloc(sizeof(int) * (size_t)(t->nlinks + 1));
    int *stouch = malloc(sizeof(int) * (size_t)(t->nshared + 1));
    int rc = CS_OK;
    if (!lslot || !sslot || !o.lneed || !o.sneed || !o.lover || !o.sover || !ltouch || !stouch) {
        rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
        goto done;
    }
    for (int l = 0; l < t->nlinks; l++) {
        int b = v->set_begin[l], e = v->set_begin[l + 1];
        lslot[l].lanes = t->links[l].lanes;
        lslot[l].set[0] = e - b > 2 ? BW_MANY_SETS : e - b > 0 ? v->set_list[b] : -1;
        lslot[l].set[1] = e - b == 2 ? v->set_list[b + 1] : -1;
    }
    for (int set = 0; set < t->nshared; set++)
        sslot[set].lanes = t->shared[set].lanes;
    long k = 0, n = v->n;
    while (k < n) {
        long i = ord ? ord[k] : k;
        if (!is_valid(v, i)) {
            k++;
            continue;
        }
        int step = algorithm_send_step(v->a, i);
        long rounds = v->a->rounds_per_step[step], k0 = k;
        int nl = 0, ns = 0;
        for (; k < n; k++) {
            i = ord ? ord[k] : k;
            if (!is_valid(v, i))
                continue;
            if (algorithm_send_step(v->a, i) != step)
                break;
            int l = link_of(v, i);
            link_slot *x = &lslot[l];
            if (x->cnt++ == 0)
                ltouch[nl++] = l;
            if (x->set[0] >= 0) {
                count_set(sslot, stouch, &ns, x->set[0]);
                if (x->set[1] >= 0)
                    count_set(sslot, stouch, &ns, x->set[1]);
            } else if (x->set[0] == BW_MANY_SETS) {
                for (int m = v->set_begin[l]; m < v->set_begin[l + 1]; m++)
                    count_set(sslot, stouch, &ns, v->set_list[m]);
            }
        }
        bool over = false;
        for (int j = 0; j < nl; j++) {
            int l = ltouch[j];
            if (lslot[l].cnt > lslot[l].lanes * rounds) {
                o.lneed[l] = 1;
                o.lover[l] = 0;
                over = true;
            }
        }
        for (int j = 0; j < ns; j++) {
            int set = stouch[j];
            if (sslot[set].cnt > sslot[set].lanes * rounds) {
                o.sneed[set] = 1;
                o.sover[set] = 0;
                over = true;
            }
        }
        if (over)
            find_over(v, ord, k0, k, lslot, sslot, rounds, &o);
        for (int j = 0; j < nl; j++) {
            int l = ltouch[j];
            long cap = lslot[l].lanes * rounds, cnt = lslot[l].cnt;   /* not t->links: a miss */
            if (cnt > cap)
                verify_send_problem(v, o.lover[l], "link %d->%d carries %ld chunks in step %d, "
                                    "more than %d lanes x %ld rounds", t->links[l].src,
                                    t->links[l].dst, cnt, step, t->links[l].lanes, rounds);
            lslot[l].cnt = 0;
            o.lneed[l] = 0;
        }
        for (int j = 0; j < ns; j++) {
            int set = stouch[j];
            long cap = sslot[set].lanes * rounds, cnt = sslot[set].cnt;
            if (cnt > cap) {
                char desc[160];
                describe_set(v, set, desc, sizeof desc);
                verify_send_problem(v, o.sover[set], "%s carries %ld chunks in step %d, more than "
                                    "%d lanes x %ld rounds", desc, cnt, step, t->shared[set].lanes,
                                    rounds);
            }
            sslot[set].cnt = 0;
            o.sneed[set] = 0;
        }
    }
done:
    free(lslot);
    free(sslot);
    free(o.lneed);
    free(o.sneed);
    free(o.lover);
    free(o.sover);
    free(ltouch);
    free(stouch);
    return rc;
}

/* A send in flight on a resource: when it ends and the rate it takes
 * (bytes/us; 0 on lane resources, where each send takes one lane). */
typedef struct flight {
    double end, rate;
} flight;

typedef struct flight_heap {
    flight *h;
    long n, cap;
} flight_heap;

static bool flight_push(flight_heap *fh, flight x)
{
    if (fh->n == fh->cap) {
        long cap = fh->cap ? fh->cap * 2 : 4;   /* most links hold a few sends at once */
        flight *h = realloc(fh->h, sizeof *h * (size_t)cap);
        if (!h)
            return false;
        fh->h = h;
        fh->cap = cap;
    }
    long i = fh->n++;
    while (i > 0 && fh->h[(i - 1) / 2].end > x.end) {
        fh->h[i] = fh->h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    fh->h[i] = x;
    return true;
}

static flight flight_pop(flight_heap *fh)
{
    flight top = fh->h[0], last = fh->h[--fh->n];
    long i = 0, n = fh->n;
    for (;;) {
        long c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && fh->h[c + 1].end < fh->h[c].end)
            c++;
        if (fh->h[c].end >= last.end)
            break;
        fh->h[i] = fh->h[c];
        i = c;
    }
    if (n > 0)
        fh->h[i] = last;
    return top;
}

/* How a resource limits concurrent sends: `lanes` at once, or (port) a total
 * rate of gbps with per-send latency alpha_us.  Each keeps the sends in
 * flight at the time the sweep has reached. */
typedef struct resource {
    int lanes;
    bool port, checked;
    double gbps, alpha_us;
    double sum;                 /* port: the rates in flight */
    flight_heap fh;
} resource;

static void describe_resource(const vctx *v, int x, char *buf, size_t size)
{
    const cs_topology *t = v->t;
    if (x >= t->nlinks) {
        describe_set(v, x - t->nlinks, buf, size);
        return;
    }
    const cs_link *l = &t->links[x];
    if (l->switch_id >= 0 && v->chunk_bytes > 0)
        snprintf(buf, size, "the switch port of link %d->%d", l->src, l->dst);
    else
        snprintf(buf, size, "link %d->%d", l->src, l->dst);
}

/* Send i (start..end) joins resource x: report it when the resource is
 * already full. */
static int sweep_send(vctx *v, resource *res, int x, long i, double start, double end,
                      cs_error *err)
{
    resource *r = &res[x];
    flight_heap *fh = &r->fh;
    while (fh->n > 0 && fh->h[0].end <= start + VERIFY_TIME_EPS)
        r->sum -= flight_pop(fh).rate;
    if (fh->n == 0)
        r->sum = 0.0;  /* no drift from the subtractions */
    double rate = 0.0;
    char what[160];
    if (r->port) {
        double busy = end - start - r->alpha_us;
        double cap = r->gbps * 1e3 * (1.0 + VERIFY_RATE_TOL);
        rate = busy > 0 ? v->chunk_bytes / busy : INFINITY;
        r->sum += rate;
        if (r->sum > cap) {
            double exact = rate;  /* re-add without accumulated rounding */
            for (long q = 0; q < fh->n; q++)
                exact += fh->h[q].rate;
            r->sum = exact;
            if (exact > cap) {
                describe_resource(v, x, what, sizeof what);
                verify_send_problem(v, i, "%s would carry %.6g GB/s from %.3f us (%ld sends in "
                                    "flight, %.0f-byte chunks), more than its %g GB/s", what,
                                    exact / 1e3, start, fh->n + 1, v->chunk_bytes, r->gbps);
            }
        }
    } else if (fh->n >= r->lanes) {
        describe_resource(v, x, what, sizeof what);
        verify_send_problem(v, i, "%s has %ld sends in flight at %.3f us, more than its %d lanes",
                            what, fh->n + 1, start, r->lanes);
    }
    if (!flight_push(fh, (flight){end, rate}))
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
    return CS_OK;
}

/* Whether derived link l (switch_id >= 0) is in a derived set: then its
 * switch port is checked there, as a set. */
static bool in_port_set(const vctx *v, int l)
{
    for (int m = v->set_begin[l]; m < v->set_begin[l + 1]; m++)
        if (v->t->shared[v->set_list[m]].switch_id >= 0)
            return true;
    return false;
}

/* One sweep over the sends in time order (the index order, for schedules
 * emitted sorted), every link and shared set keeping its own sends in
 * flight: no per-send memory, and each send's fields read once, in order. */
static int check_bandwidth_timed(vctx *v, const uint32_t *ord, cs_error *err)
{
    const cs_topology *t = v->t;
    int L = t->nlinks, R = L + t->nshared;
    bool rates = v->chunk_bytes > 0;
    resource *res = calloc((size_t)R + 1, sizeof *res);
    if (!res)
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
    for (int l = 0; l < L; l++) {
        const cs_link *lk = &t->links[l];
        res[l] = (resource){.lanes = lk->lanes, .checked = true, .gbps = lk->gbps,
                            .alpha_us = lk->alpha_us};
        if (rates && lk->switch_id >= 0) {
            /* a switch pair: its ports are the resources */
            res[l].port = true;
            res[l].checked = !in_port_set(v, l);
        }
    }
    for (int set = 0; set < t->nshared; set++) {
        const cs_shared *sh = &t->shared[set];
        resource *r = &res[L + set];
        *r = (resource){.lanes = sh->lanes, .checked = true};
        if (rates && sh->switch_id >= 0) {
            r->port = true;
            r->gbps = t->switches[sh->switch_id].gbps;
            r->alpha_us = t->switches[sh->switch_id].alpha_us;
        }
    }
    int rc = CS_OK;
    for (long k = 0; k < v->n && rc == CS_OK; k++) {
        long i = ord ? ord[k] : k;
        if (!is_valid(v, i))
            continue;
        double start = algorithm_send_start_us(v->a, i), end = algorithm_send_end_us(v->a, i);
        int l = link_of(v, i);
        if (res[l].checked)
            rc = sweep_send(v, res, l, i, start, end, err);
        for (int m = v->set_begin[l]; m < v->set_begin[l + 1] && rc == CS_OK; m++)
            rc = sweep_send(v, res, L + v->set_list[m], i, start, end, err);
    }
    for (int x = 0; x < R; x++)
        free(res[x].fh.h);
    free(res);
    return rc;
}

/* ---- driver ------------------------------------------------------------------------ */

static int build_set_index(vctx *v, cs_error *err)
{
    const cs_topology *t = v->t;
    v->set_begin = calloc((size_t)t->nlinks + 2, sizeof(int));
    if (!v->set_begin)
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
    long total = 0;
    for (int k = 0; k < t->nshared; k++) {
        total += t->shared[k].nlinks;
        for (int j = 0; j < t->shared[k].nlinks; j++) {
            int l = t->shared[k].links[j];
            if (l < 0 || l >= t->nlinks)
                return cs_error_set(err, CS_EINVAL, "topology", "shared set %d names link %d "
                                    "of %d", k, l, t->nlinks);
            v->set_begin[l + 1]++;
        }
    }
    for (int l = 0; l < t->nlinks; l++)
        v->set_begin[l + 1] += v->set_begin[l];
    v->set_list = malloc(sizeof(int) * (size_t)(total > 0 ? total : 1));
    int *fill = malloc(sizeof(int) * (size_t)(t->nlinks + 1));
    if (!v->set_list || !fill) {
        free(fill);
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
    }
    memcpy(fill, v->set_begin, sizeof(int) * (size_t)(t->nlinks + 1));
    for (int k = 0; k < t->nshared; k++)
        for (int j = 0; j < t->shared[k].nlinks; j++)
            v->set_list[fill[t->shared[k].links[j]]++] = k;
    free(fill);
    return CS_OK;
}

/* Header problems make the rest meaningless when they concern sizes. */
static bool check_header(vctx *v)
{
    const cs_algorithm *a = v->a;
    bool usable = true;
    if (a->ranks != v->P) {
        verify_problem(v, "ranks", "ranks: the algorithm has %d ranks, topology %s has %d", a->ranks,
                v->t->name, v->P);
        usable = false;
    }
    if (a->chunks < 1) {
        verify_problem(v, "chunks", "chunks must be >= 1, got %d", a->chunks);
        usable = false;
    }
    if (a->steps < 0 || (a->steps > 0 && !a->rounds_per_step)) {
        verify_problem(v, "steps", "steps must be >= 0 with rounds_per_step, got %d", a->steps);
        return false;
    }
    long sum = 0;
    for (int s = 0; s < a->steps; s++) {
        if (a->rounds_per_step[s] < 1) {
            char f[48];
            snprintf(f, sizeof f, "rounds_per_step[%d]", s);
            verify_problem(v, f, "rounds_per_step[%d] is %d, must be >= 1", s, a->rounds_per_step[s]);
            usable = false;
        }
        sum += a->rounds_per_step[s];
    }
    if (sum != a->rounds)
        verify_problem(v, "rounds", "rounds is %d but rounds_per_step sums to %ld", a->rounds, sum);
    if (usable) {
        long g = collective_global_chunks(v->coll, a->ranks, a->chunks);
        if (g != a->global_chunks) {
            verify_problem(v, "global_chunks", "global_chunks is %ld but %s with %d ranks and %d "
                    "chunks has %ld", a->global_chunks, collective_kind_name(v->coll->kind),
                    a->ranks, a->chunks, g);
            usable = false;
        }
    }
    long ntimed = algorithm_timed_count(a);
    if (ntimed != 0 && ntimed != a->nsends)
        verify_problem(v, "sends", "%ld of %ld sends carry start_us/end_us: a timed schedule times "
                "every send", ntimed, a->nsends);
    v->timed = ntimed > 0 && ntimed == a->nsends;
    if (v->timed && !(a->timed_chunk_bytes >= 0 && isfinite(a->timed_chunk_bytes))) {
        verify_problem(v, "chunk_bytes", "chunk_bytes must be a finite number >= 0, got %g",
                       a->timed_chunk_bytes);
        usable = false;
    }
    v->chunk_bytes = v->timed ? a->timed_chunk_bytes : 0.0;
    return usable;
}

/* The per-send checks of sends [i0, i1) (i0 a multiple of 8: each range
 * writes its own bytes of v->valid). */
static long check_send_range(vctx *v, long i0, long i1)
{
    const cs_algorithm *a = v->a;
    long nvalid = 0;
    for (long i = i0; i < i1; i++) {
        const cs_send sv = algorithm_send(a, i), *s = &sv;
        if (s->chunk < 0 || s->chunk >= v->G) {
            verify_send_problem(v, i, "chunk %ld out of range for %ld global chunks", s->chunk, v->G);
            continue;
        }
        if (s->src < 0 || s->src >= v->N || s->dst < 0 || s->dst >= v->N) {
            int bad = s->src < 0 || s->src >= v->N ? s->src : s->dst;
            if (v->N > v->P)
                verify_send_problem(v, i, "rank %d out of range for %d ranks and %d switch "
                                    "nodes", bad, v->P, v->N - v->P);
            else if (v->t->nswitch_nodes > 0 && bad >= v->P)
                verify_send_problem(v, i, "rank %d out of range for %d ranks (switch nodes "
                                    "%d..%d need the algorithm's switch_nodes)", bad, v->P,
                                    v->P, v->P + v->t->nswitch_nodes - 1);
            else
                verify_send_problem(v, i, "rank %d out of range for %d ranks", bad, v->P);
            continue;
        }
        if (s->src == s->dst) {
            verify_send_problem(v, i, "rank %d sends to itself", s->src);
            continue;
        }
        if (s->step < 0 || s->step >= v->S) {
            verify_send_problem(v, i, "step %d out of range for %d steps", s->step, v->S);
            continue;
        }
        if (s->op != CS_OP_COPY && s->op != CS_OP_REDUCE) {
            verify_send_problem(v, i, "op %d is neither copy nor reduce", (int)s->op);
            continue;
        }
        if (s->op == CS_OP_REDUCE && !v->combining) {
            verify_send_problem(v, i, "reduce is not allowed in %s (not a combining collective)",
                         collective_kind_name(v->coll->kind));
            continue;
        }
        if (v->timed && (s->end_us < s->start_us || s->start_us < 0)) {
            verify_send_problem(v, i, "end_us %.3f is before start_us %.3f", s->end_us, s->start_us);
            continue;
        }
        int l = link_finder_find(&v->links, s->src, s->dst);
        if (l < 0) {
            if (s->src >= v->P || s->dst >= v->P) {
                int node = s->src >= v->P ? s->src : s->dst;
                int other = s->src >= v->P ? s->dst : s->src;
                verify_send_problem(v, i, "%s: %s", verify_node_name(v, node).s,
                                    other >= v->P ? "switch nodes do not send to each other"
                                                  : "the rank is not on this switch");
            } else {
                verify_send_problem(v, i, "no link %d->%d", s->src, s->dst);
            }
            continue;
        }
        if (v->link_pos)
            v->link_pos[i] = (uint8_t)(l - v->t->out_begin[s->src]);
        else if (v->link_cache)
            v->link_cache[i] = l;
        v->valid[i >> 3] |= (unsigned char)(1u << (i & 7));
        nvalid++;
    }
    return nvalid;
}

typedef struct check_job {
    vctx v;                     /* a copy with its own report */
    cs_verify_report rep;
    long i0, i1;
    long nvalid;
} check_job;

static void *check_job_run(void *arg)
{
    check_job *j = arg;
    j->nvalid = check_send_range(&j->v, j->i0, j->i1);
    return NULL;
}

/* Every send's own checks.  From 2^20 sends the second half of the index
 * range is checked on another thread, into a report of its own that is
 * appended after the first half's: the same report as one pass. */
static long check_sends(vctx *v)
{
    long n = v->n, half = (n / 2) & ~7L;
    check_job job;
    pthread_t th;
    if (send_pass_threads(n) < 2 || half == 0 || v->rep->nproblems > 0)
        return check_send_range(v, 0, n);
    memset(&job, 0, sizeof job);
    job.v = *v;
    job.v.rep = &job.rep;
    job.rep.ok = true;
    job.v.first_field[0] = '\0';
    job.i0 = half;
    job.i1 = n;
    bool threaded = pthread_create(&th, NULL, check_job_run, &job) == 0;
    long nvalid = check_send_range(v, 0, half);
    if (threaded)
        pthread_join(th, NULL);
    else
        check_job_run(&job);
    if (job.rep.nproblems > 0) {
        cs_verify_report *to = v->rep;
        if (to->nproblems == 0)
            snprintf(v->first_field, sizeof v->first_field, "%s", job.v.first_field);
        to->ok = false;
        to->nproblems += job.rep.nproblems;
        for (int k = 0; k < job.rep.nreasons && to->nreasons < CS_VERIFY_MAX_REASONS; k++)
            memcpy(to->reasons[to->nreasons++], job.rep.reasons[k], sizeof to->reasons[0]);
    }
    return nvalid + job.nvalid;
}

/* The simulator's timing sweep on its own thread. */
typedef struct timing_job {
    const vctx *v;
    double bytes;
    const uint32_t *ord;
    const sim_links *links;
    cs_sim_result *sim;
    cs_error err;
    int rc;
} timing_job;

static void *timing_job_run(void *arg)
{
    timing_job *j = arg;
    cs_error_clear(&j->err);
    j->rc = sim_timing(j->v->t, j->v->a, j->bytes, &j->v->links, j->v->trank, j->ord, j->links,
                       true, j->sim, &j->err);
    return NULL;
}

/* algorithm_verify_simulate after check_sends: the value replay first,
 * building the simulator's links from its chunks, then the bandwidth sweep
 * and the simulator's timing sweep side by side (two sequential passes over
 * the same sends, independent of each other: one core each).  The timing
 * sweep needs every send in range on a link, so it runs only when
 * check_sends found nothing.  The report is the one algorithm_verify gives:
 * the replay's problems are held apart and appended after the bandwidth
 * sweep's, the order in which algorithm_verify finds them. */
static int verify_and_time(vctx *v, const uint32_t *ord, double bytes, sim_links *links,
                           cs_sim_result *sim, double t0, double *verify_s, cs_error *err)
{
    cs_verify_report later;
    memset(&later, 0, sizeof later);
    later.ok = true;
    vctx rv = *v;
    rv.rep = &later;
    rv.first_field[0] = '\0';
    bool sends_ok = v->rep->nproblems == 0;
    int rc = verify_replay_values(&rv, err);
    sim_links_done(links);
    if (verify_s)
        *verify_s = cs_now() - t0;
    timing_job job = {.v = v, .bytes = bytes, .ord = ord, .links = links, .sim = sim,
                      .rc = CS_OK};
    pthread_t th;
    bool timing = rc == CS_OK && sends_ok, threaded = false;
    if (timing)
        threaded = pthread_create(&th, NULL, timing_job_run, &job) == 0;
    if (rc == CS_OK)
        rc = v->timed ? check_bandwidth_timed(v, ord, err) : check_bandwidth_steps(v, ord, err);
    if (timing && !threaded)
        timing_job_run(&job);
    if (threaded)
        pthread_join(th, NULL);
    if (later.nproblems > 0) {
        cs_verify_report *to = v->rep;
        if (to->nproblems == 0)
            snprintf(v->first_field, sizeof v->first_field, "%s", rv.first_field);
        to->ok = false;
        to->nproblems += later.nproblems;
        for (int k = 0; k < later.nreasons && to->nreasons < CS_VERIFY_MAX_REASONS; k++)
            memcpy(to->reasons[to->nreasons++], later.reasons[k], sizeof to->reasons[0]);
    }
    if (rc == CS_OK && timing && job.rc != CS_OK && v->rep->ok) {
        rc = job.rc;
        if (err)
            *err = job.err;
    }
    if (rc != CS_OK || !v->rep->ok) {
        sim_result_free(sim);   /* nothing simulated for an invalid algorithm */
        memset(sim, 0, sizeof *sim);
    }
    return rc;
}

/* The verification; with sim, also the simulation at `bytes` when the
 * algorithm is valid, through the verifier's own passes (sim_links built
 * from the value replay's chunks, then the simulator's timing sweep), and
 * *verify_s the seconds before that sweep. */
static int verify_run(const cs_topology *t, const cs_algorithm *a, cs_verify_report *rep,
                      double bytes, cs_sim_result *sim, double *verify_s, bool general,
                      cs_error *err)
{
    double t0 = cs_now();
    sim_links links;
    memset(&links, 0, sizeof links);
    memset(rep, 0, sizeof *rep);
    rep->ok = true;
    if (!t || !t->finalized)
        return cs_error_set(err, CS_EINVAL, "topology", "verify needs a finalized topology");
    if (!a)
        return cs_error_set(err, CS_EINVAL, "algorithm", "no algorithm to verify");
    vctx v;
    memset(&v, 0, sizeof v);
    v.t = t;
    v.a = a;
    v.rep = rep;
    v.sim = sim ? &links : NULL;
    v.general = general;
    /* a node view is itself a topology (its nodes ranks) to an algorithm
     * of that many ranks, and the view of a topology of fewer ranks else */
    v.P = t->node_view && a->ranks != t->ranks ? t->ranks - t->nswitch_nodes : t->ranks;
    v.N = t->ranks;
    /* Sends through switch nodes are checked on the node view, where the
     * nodes are ranks P.. with links inside their members' ports; every
     * other algorithm on exactly the topology it was given. */
    cs_topology *nodes = NULL;
    if (a->switch_nodes > 0 && t->nswitch_nodes > 0 && !t->node_view) {
        if (a->switch_nodes > t->nswitch_nodes) {
            verify_problem(&v, "switch_nodes", "switch_nodes: the algorithm names %d switch "
                           "nodes, topology %s has %d copy-capable switches", a->switch_nodes,
                           t->name, t->nswitch_nodes);
        } else {
            int rc0 = topology_switch_nodes(t, &nodes, err);
            if (rc0 != CS_OK)
                return rc0;
            v.t = nodes;
            v.N = v.P + a->switch_nodes;
        }
    } else if (a->switch_nodes > 0 && !t->node_view) {
        verify_problem(&v, "switch_nodes", "switch_nodes: the algorithm names %d switch nodes, "
                       "topology %s has no copy-capable switch", a->switch_nodes, t->name);
    }
    v.n = a->nsends;
    v.S = a->steps;
    uint32_t *ord = NULL;
    cs_collective coll;
    memset(&coll, 0, sizeof coll);
    int rc = collective_copy(&coll, &a->collective, err);
    if (rc != CS_OK) {
        topology_free(nodes);
        return rc;
    }
    v.coll = &coll;
    v.pre_g = -1;
    v.combining = collective_kind_is_combining(coll.kind);
    if (a->ranks >= 1 && collective_validate(&coll, a->ranks, err) != CS_OK) {
        verify_problem(&v, "collective", "collective: %s", err ? err->message : "invalid");
        cs_error_clear(err);
        goto finish;
    }
    if (!check_header(&v))
        goto finish;
    v.G = a->global_chunks;
    if (v.G > 0x7fffffffL || v.n > 0x7fffffffL) {
        rc = cs_error_set(err, CS_ELIMIT, v.G > 0x7fffffffL ? "global_chunks" : "sends",
                          "too large to verify: %ld global chunks, %ld sends", v.G, v.n);
        goto finish;
    }
    if ((rc = verify_check_shapes(&v, err)) != CS_OK)
        goto finish;
    if (coll.kind == CS_COLL_CUSTOM && (rc = verify_build_custom_post(&v, err)) != CS_OK)
        goto finish;
    if ((rc = build_set_index(&v, err)) != CS_OK)
        goto finish;
    if (link_finder_init(&v.links, v.t) != CS_OK) {
        rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
        goto finish;
    }
    /* every send is looked up by the checks (and again by the simulator's
     * timing sweep in algorithm_verify_simulate) */
    link_finder_densify(&v.links, v.n);
    /* no memory for the cache: the sweep looks links up again */
    if (v.n > 0 && v.n <= VERIFY_LINK_CACHE_MAX) {
        if (v.links.pos)   /* every rank has < 255 out-links: a byte each */
            v.link_pos = malloc((size_t)v.n);
        else
            v.link_cache = malloc(sizeof(int32_t) * (size_t)v.n);
    }
    v.valid = calloc((size_t)(v.n + 7) / 8 + 1, 1);
    if (!v.valid) {
        rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory for %ld sends", v.n);
        goto finish;
    }
    if (v.timed) {
        v.trank = malloc(sizeof *v.trank * (size_t)algorithm_time_count(a));
        if (!v.trank || algorithm_time_ranks(a, v.trank) != CS_OK) {
            rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
            goto finish;
        }
    }
    v.words = (v.P + 63) / 64;   /* contributions: ranks only */
    v.all_valid = check_sends(&v) == v.n;
    /* bandwidth, in processing order (no index needed when the sends are in
     * it already, as producers emit them) */
    if (send_processing_order(a, v.trank, &ord) != CS_OK) {
        rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory ordering %ld sends", v.n);
        goto finish;
    }
    if (!sim) {
        rc = v.timed ? check_bandwidth_timed(&v, ord, err) : check_bandwidth_steps(&v, ord, err);
        if (rc == CS_OK && verify_replay_dense_fits(&v))
            v.ord = ord;   /* the dense replay walks the sends in this order too */
        else {
            free(ord);
            ord = NULL;
        }
        if (rc == CS_OK)
            rc = verify_replay_values(&v, err);
    } else {
        rc = verify_and_time(&v, ord, bytes, &links, sim, t0, verify_s, err);
    }
finish:
    sim_links_free(&links);
    free(ord);
    free(v.valid);
    free(v.link_cache);
    free(v.link_pos);
    free(v.trank);
    free(v.set_begin);
    free(v.set_list);
    link_finder_free(&v.links);
    free(v.stamp);
    free(v.avail);
    free(v.val);
    free(v.single);
    free(v.lstamp);
    free(v.live);
    free(v.wstep);
    free(v.touched);
    free(v.post_begin);
    free(v.post_rank);
    topology_free(nodes);
    for (long b = 0; b < v.nblocks; b++)
        free(v.all_blocks[b]);
    free(v.all_blocks);
    collective_free(&coll);
    if (rc != CS_OK)
        return rc;
    if (!rep->ok) {
        cs_error_set(err, CS_EVERIFY, v.first_field, "%s", rep->nreasons ? rep->reasons[0]
                                                                          : "invalid algorithm");
        return CS_EVERIFY;
    }
    return CS_OK;
}

int algorithm_verify_report(const cs_topology *t, const cs_algorithm *a,
                            cs_verify_report *rep, cs_error *err)
{
    return verify_run(t, a, rep, 0.0, NULL, NULL, false, err);
}

int algorithm_verify_general(const cs_topology *t, const cs_algorithm *a, cs_error *err)
{
    cs_verify_report rep;
    return verify_run(t, a, &rep, 0.0, NULL, NULL, true, err);
}

int algorithm_verify_simulate(const cs_topology *t, const cs_algorithm *a, double bytes,
                              cs_sim_result *sim, double *verify_s, cs_error *err)
{
    memset(sim, 0, sizeof *sim);
    if (verify_s)
        *verify_s = 0.0;
    if (!isfinite(bytes) || bytes < 0)
        return cs_error_set(err, CS_EINVAL, "bytes", "bytes must be a finite number >= 0");
    cs_verify_report rep;
    if (a && a->switch_nodes > 0) {
        /* checked on the node view: verified, then simulated apart */
        double t0 = cs_now();
        int rc = algorithm_verify_report(t, a, &rep, err);
        if (verify_s)
            *verify_s = cs_now() - t0;
        return rc == CS_OK ? simulate_algorithm(t, a, bytes, sim, err) : rc;
    }
    return verify_run(t, a, &rep, bytes, sim, verify_s, false, err);
}

int algorithm_verify(const cs_topology *t, const cs_algorithm *a, cs_error *err)
{
    cs_verify_report rep;
    return algorithm_verify_report(t, a, &rep, err);
}

/* ---- how long switch nodes hold chunks (verify.h) ----------------------------------- */

typedef struct hold_arrival {
    long chunk;
    int node;
    double end;
    double last_copy; /* latest start of a copy that used this arrival */
} hold_arrival;

static int cmp_hold_arrival(const void *x, const void *y)
{
    const hold_arrival *a = x, *b = y;
    if (a->node != b->node)
        return a->node - b->node;
    if (a->chunk != b->chunk)
        return a->chunk < b->chunk ? -1 : 1;
    return (a->end > b->end) - (a->end < b->end);
}

typedef struct hold_event { double at; int delta; } hold_event;

static int cmp_hold_event(const void *x, const void *y)
{
    const hold_event *a = x, *b = y;
    if (a->at != b->at)
        return a->at < b->at ? -1 : 1;
    return a->delta - b->delta; /* a release before a hold at the same instant */
}

int algorithm_switch_hold(const cs_topology *t, const cs_algorithm *a, cs_switch_hold *out,
                          cs_error *err)
{
    memset(out, 0, sizeof *out);
    int P = a->ranks, S = a->switch_nodes;
    if (S <= 0)
        return CS_OK;
    if (!algorithm_is_timed(a))
        return cs_error_set(err, CS_EINVAL, "algorithm",
                            "switch buffering is measured on timed schedules only");
    if (t->ranks != P)
        return cs_error_set(err, CS_EINVAL, "algorithm", "the algorithm has %d ranks, the "
                            "topology %d", P, t->ranks);
    long nup = 0;
    for (long k = 0; k < a->nsends; k++) {
        int dst = algorithm_send_dst(a, k);
        nup += dst >= P && dst < P + S;
    }
    hold_arrival *up = malloc(sizeof *up * (size_t)(nup ? nup : 1));
    if (!up)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    long m = 0;
    for (long k = 0; k < a->nsends; k++) {
        int dst = algorithm_send_dst(a, k);
        if (dst >= P && dst < P + S)
            up[m++] = (hold_arrival){algorithm_send_chunk(a, k), dst, algorithm_send_end_us(a, k),
                                     -INFINITY};
    }
    qsort(up, (size_t)nup, sizeof *up, cmp_hold_arrival);
    int rc = CS_OK;
    for (long k = 0; k < a->nsends && rc == CS_OK; k++) {
        int src = algorithm_send_src(a, k);
        if (src < P || src >= P + S)
            continue;
        long g = algorithm_send_chunk(a, k);
        double s = algorithm_send_start_us(a, k);
        /* the latest arrival of g at src that ends by s (1e-6 us: the verifier's slack) */
        long lo = 0, hi = nup;
        while (lo < hi) {
            long mid = lo + (hi - lo) / 2;
            const hold_arrival *h = &up[mid];
            bool before = h->node < src || (h->node == src && h->chunk < g) ||
                          (h->node == src && h->chunk == g && h->end <= s + 1e-6);
            if (before)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo == 0 || up[lo - 1].node != src || up[lo - 1].chunk != g) {
            rc = cs_error_set(err, CS_EVERIFY, "algorithm",
                              "send %ld copies chunk %ld out of switch node %d before it "
                              "arrived there", k, g, src);
            break;
        }
        hold_arrival *h = &up[lo - 1];
        double wait = s - h->end;
        out->copies++;
        if (wait > 1e-6) {
            out->held_copies++;
            if (wait > out->max_hold_us)
                out->max_hold_us = wait;
        }
        if (s > h->last_copy)
            h->last_copy = s;
    }
    /* the most chunks one node holds at once: each arrival is held from its
     * end to the last copy that used it */
    hold_event *ev = rc == CS_OK ? malloc(sizeof *ev * 2 * (size_t)(nup ? nup : 1)) : NULL;
    if (rc == CS_OK && !ev)
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
    for (long i = 0; rc == CS_OK && i < nup;) {
        long j = i, ne = 0;
        for (; j < nup && up[j].node == up[i].node; j++)
            if (up[j].last_copy - up[j].end > 1e-6) {
                ev[ne++] = (hold_event){up[j].end, 1};
                ev[ne++] = (hold_event){up[j].last_copy, -1};
            }
        qsort(ev, (size_t)ne, sizeof *ev, cmp_hold_event);
        int cur = 0;
        for (long q = 0; q < ne; q++) {
            cur += ev[q].delta;
            if (cur > out->peak_chunks)
                out->peak_chunks = cur;
        }
        i = j;
    }
    free(ev);
    free(up);
    return rc;
}
