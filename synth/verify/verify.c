/*
 * verify.c - replays an algorithm against its topology and collective and
 * says, send by send, what is wrong with it (see verify.h for the checks).
 * This file is the driver: header and per-send checks, links, bandwidth; the
 * value replay and postcondition are in verify_values.c.
 *
 * Scale drives the design: TACOS schedules on thousands of ranks have tens of
 * millions of sends, so nothing here is G x P or G x P x P.  Sends are
 * bucketed twice with linear-time sorts: by step (for the per-step bandwidth
 * check) and then, stably, by chunk, so the value replay walks one chunk at a
 * time in step order and needs per-rank state only for the chunk at hand.
 * Per-rank state is stamped with the chunk's epoch instead of being cleared.
 *
 * Timed schedules (every send has start_us/end_us) get a sweep over each
 * link's (and shared set's) intervals instead of the per-step counts.
 */
#include "verify_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

bool verify_reasons_full(const vctx *v)
{
    return v->rep->nreasons >= CS_VERIFY_MAX_REASONS;
}

/* ---- linear-time sorting of send indices ------------------------------------------ */

/* Keys for send_radix_sort (send_order_internal.h). */
static uint32_t key_step(const cs_algorithm *a, uint32_t i)
{
    return (uint32_t)algorithm_send_step(a, i);
}
static uint32_t key_chunk(const cs_algorithm *a, uint32_t i)
{
    return (uint32_t)algorithm_send_chunk(a, i);
}

/* ---- bandwidth ------------------------------------------------------------------------ */

static void describe_set(const vctx *v, int set, char *buf, size_t size)
{
    const cs_shared *sh = &v->t->shared[set];
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

static int check_bandwidth_steps(vctx *v, const int *ord, long nvalid, cs_error *err)
{
    const cs_topology *t = v->t;
    long *lcnt = calloc((size_t)t->nlinks + 1, sizeof(long));
    long *scnt = calloc((size_t)t->nshared + 1, sizeof(long));
    int *lover = malloc(sizeof(int) * (size_t)(t->nlinks + 1));
    int *sover = malloc(sizeof(int) * (size_t)(t->nshared + 1));
    int *ltouch = malloc(sizeof(int) * (size_t)(t->nlinks + 1));
    int *stouch = malloc(sizeof(int) * (size_t)(t->nshared + 1));
    int rc = CS_OK;
    if (!lcnt || !scnt || !lover || !sover || !ltouch || !stouch) {
        rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
        goto done;
    }
    long k = 0;
    while (k < nvalid) {
        int step = algorithm_send_step(v->a, ord[k]);
        long rounds = v->a->rounds_per_step[step];
        int nl = 0, ns = 0;
        for (; k < nvalid && algorithm_send_step(v->a, ord[k]) == step; k++) {
            int i = ord[k];
            int l = v->link_of[i];
            if (lcnt[l]++ == 0)
                ltouch[nl++] = l;
            if (lcnt[l] == t->links[l].lanes * rounds + 1)
                lover[l] = i;
            for (int m = v->set_begin[l]; m < v->set_begin[l + 1]; m++) {
                int set = v->set_list[m];
                if (scnt[set]++ == 0)
                    stouch[ns++] = set;
                if (scnt[set] == t->shared[set].lanes * rounds + 1)
                    sover[set] = i;
            }
        }
        for (int j = 0; j < nl; j++) {
            int l = ltouch[j];
            long cap = t->links[l].lanes * rounds;
            if (lcnt[l] > cap)
                verify_send_problem(v, lover[l], "link %d->%d carries %ld chunks in step %d, more "
                             "than %d lanes x %ld rounds", t->links[l].src, t->links[l].dst,
                             lcnt[l], step, t->links[l].lanes, rounds);
            lcnt[l] = 0;
        }
        for (int j = 0; j < ns; j++) {
            int set = stouch[j];
            long cap = t->shared[set].lanes * rounds;
            if (scnt[set] > cap) {
                char desc[160];
                describe_set(v, set, desc, sizeof desc);
                verify_send_problem(v, sover[set], "%s carries %ld chunks in step %d, more than %d "
                             "lanes x %ld rounds", desc, scnt[set], step, t->shared[set].lanes,
                             rounds);
            }
            scnt[set] = 0;
        }
    }
done:
    free(lcnt);
    free(scnt);
    free(lover);
    free(sover);
    free(ltouch);
    free(stouch);
    return rc;
}

/* Sweep: sends (already in start order) on one resource with `lanes` lanes;
 * reports every send that starts while `lanes` others are still in flight. */
static void sweep_concurrency(vctx *v, const timed_key *tk, long len, int lanes, double *heap,
                              const char *what)
{
    long nh = 0;
    for (long k = 0; k < len; k++) {
        /* pop finished (min-heap of end times) */
        while (nh > 0 && heap[0] <= tk[k].start + VERIFY_TIME_EPS) {
            double last = heap[--nh];
            if (nh > 0)
                heap_replace_min(heap, nh, last);
        }
        if (nh >= lanes)
            verify_send_problem(v, tk[k].index, "%s has %ld sends in flight at %.3f us, more than its "
                         "%d lanes", what, nh + 1, tk[k].start, lanes);
        long i = nh++;
        double x = tk[k].end;
        while (i > 0 && heap[(i - 1) / 2] > x) {
            heap[i] = heap[(i - 1) / 2];
            i = (i - 1) / 2;
        }
        heap[i] = x;
    }
}

static int check_bandwidth_timed(vctx *v, long nvalid, cs_error *err)
{
    const cs_topology *t = v->t;
    int L = t->nlinks;
    long *begin = calloc((size_t)L + 2, sizeof(long));
    timed_key *tk = malloc(sizeof(timed_key) * (size_t)(nvalid > 0 ? nvalid : 1));
    double *heap = malloc(sizeof(double) * (size_t)(nvalid > 0 ? nvalid : 1));
    timed_key *setk = NULL;
    int rc = CS_OK;
    if (!begin || !tk || !heap) {
        rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
        goto done;
    }
    for (long i = 0; i < v->n; i++)
        if (v->link_of[i] >= 0)
            begin[v->link_of[i] + 1]++;
    for (int l = 0; l < L; l++)
        begin[l + 1] += begin[l];
    {
        long *pos = malloc(sizeof(long) * (size_t)(L + 1));
        if (!pos) {
            rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
            goto done;
        }
        memcpy(pos, begin, sizeof(long) * (size_t)(L + 1));
        for (long i = 0; i < v->n; i++)
            if (v->link_of[i] >= 0)
                tk[pos[v->link_of[i]]++] = (timed_key){algorithm_send_start_us(v->a, i),
                                                       algorithm_send_end_us(v->a, i), (int)i};
        free(pos);
    }
    for (int l = 0; l < L; l++) {
        long len = begin[l + 1] - begin[l];
        if (len == 0)
            continue;
        qsort(tk + begin[l], (size_t)len, sizeof *tk, timed_key_compare);
        char what[48];
        snprintf(what, sizeof what, "link %d->%d", t->links[l].src, t->links[l].dst);
        sweep_concurrency(v, tk + begin[l], len, t->links[l].lanes, heap, what);
    }
    for (int set = 0; set < t->nshared; set++) {
        const cs_shared *sh = &t->shared[set];
        long len = 0;
        for (int j = 0; j < sh->nlinks; j++)
            len += begin[sh->links[j] + 1] - begin[sh->links[j]];
        if (len <= sh->lanes)
            continue;
        timed_key *buf = realloc(setk, sizeof *buf * (size_t)len);
        if (!buf) {
            rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
            goto done;
        }
        setk = buf;
        long m = 0;
        for (int j = 0; j < sh->nlinks; j++) {
            long b = begin[sh->links[j]], e = begin[sh->links[j] + 1];
            memcpy(setk + m, tk + b, sizeof *tk * (size_t)(e - b));
            m += e - b;
        }
        qsort(setk, (size_t)len, sizeof *setk, timed_key_compare);
        char what[160];
        describe_set(v, set, what, sizeof what);
        sweep_concurrency(v, setk, len, sh->lanes, heap, what);
    }
done:
    free(begin);
    free(tk);
    free(heap);
    free(setk);
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
    if (a->ranks != v->t->ranks) {
        verify_problem(v, "ranks", "ranks: the algorithm has %d ranks, topology %s has %d", a->ranks,
                v->t->name, v->t->ranks);
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
    long ntimed = 0;
    for (long i = 0; i < a->nsends; i++)
        ntimed += isfinite(algorithm_send_start_us(a, i)) && isfinite(algorithm_send_end_us(a, i));
    if (ntimed != 0 && ntimed != a->nsends)
        verify_problem(v, "sends", "%ld of %ld sends carry start_us/end_us: a timed schedule times "
                "every send", ntimed, a->nsends);
    v->timed = ntimed > 0 && ntimed == a->nsends;
    return usable;
}

static long check_sends(vctx *v)
{
    const cs_algorithm *a = v->a;
    long nvalid = 0;
    for (long i = 0; i < v->n; i++) {
        const cs_send sv = algorithm_send(a, i), *s = &sv;
        v->link_of[i] = -1;
        if (s->chunk < 0 || s->chunk >= v->G) {
            verify_send_problem(v, i, "chunk %ld out of range for %ld global chunks", s->chunk, v->G);
            continue;
        }
        if (s->src < 0 || s->src >= v->P || s->dst < 0 || s->dst >= v->P) {
            verify_send_problem(v, i, "rank %d out of range for %d ranks",
                         s->src < 0 || s->src >= v->P ? s->src : s->dst, v->P);
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
        int l = topology_find_link(v->t, s->src, s->dst);
        if (l < 0) {
            verify_send_problem(v, i, "no link %d->%d", s->src, s->dst);
            continue;
        }
        v->link_of[i] = l;
        nvalid++;
    }
    return nvalid;
}

int algorithm_verify_report(const cs_topology *t, const cs_algorithm *a,
                            cs_verify_report *rep, cs_error *err)
{
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
    v.P = t->ranks;
    v.n = a->nsends;
    v.S = a->steps;
    int *ord = NULL, *tmp = NULL;
    cs_collective coll;
    memset(&coll, 0, sizeof coll);
    int rc = collective_copy(&coll, &a->collective, err);
    if (rc != CS_OK)
        return rc;
    v.coll = &coll;
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
    v.link_of = malloc(sizeof(int) * (size_t)(v.n > 0 ? v.n : 1));
    ord = malloc(sizeof(int) * (size_t)(v.n > 0 ? v.n : 1));
    tmp = malloc(sizeof(int) * (size_t)(v.n > 0 ? v.n : 1));
    if (!v.link_of || !ord || !tmp) {
        rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory for %ld sends", v.n);
        goto finish;
    }
    v.words = (v.P + 63) / 64;
    long nvalid = check_sends(&v);
    long m = 0;
    for (long i = 0; i < v.n; i++)
        if (v.link_of[i] >= 0)
            ord[m++] = (int)i;
    if (v.timed) {
        if ((rc = check_bandwidth_timed(&v, nvalid, err)) != CS_OK)
            goto finish;
    } else {
        if (send_radix_sort(a, (uint32_t *)ord, (uint32_t *)tmp, (size_t)nvalid, key_step,
                            (uint32_t)(v.S > 0 ? v.S : 1)) != CS_OK) {
            rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
            goto finish;
        }
        if ((rc = check_bandwidth_steps(&v, ord, nvalid, err)) != CS_OK)
            goto finish;
    }
    if (send_radix_sort(a, (uint32_t *)ord, (uint32_t *)tmp, (size_t)nvalid, key_chunk,
                        (uint32_t)v.G) != CS_OK) {
        rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
        goto finish;
    }
    free(tmp);
    tmp = NULL;
    rc = verify_replay_values(&v, ord, nvalid, err);
finish:
    free(ord);
    free(tmp);
    free(v.link_of);
    free(v.set_begin);
    free(v.set_list);
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

int algorithm_verify(const cs_topology *t, const cs_algorithm *a, cs_error *err)
{
    cs_verify_report rep;
    return algorithm_verify_report(t, a, &rep, err);
}
