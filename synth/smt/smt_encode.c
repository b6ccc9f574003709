/*
 * smt_encode.c - one SCCL instance (topology, non-combining collective, S
 * steps, R rounds, C chunks) as a Z3 problem, and the algorithm read back
 * from a model.
 *
 * Encoding (docs/smt.md has the full story and the measurements behind it).
 * SCCL encodes an integer time per (chunk, rank) and a Boolean send per
 * (rank, chunk, neighbour).  We encode time in *order* form: has[c][n][t] is
 * true iff rank n holds chunk c by the end of step t (t = 0 is the
 * precondition), with has[t] -> has[t+1].  Everything is then Boolean plus
 * cardinality constraints, which Z3's SAT core ("QF_FD", native cardinality
 * propagation) decides much faster than the arithmetic solver:
 *
 *  - pre: has[c][n][0] fixed; post: has[c][n][S] asserted.
 *  - sends: y[l][c][t] = "c crosses link l in step t" (the default, `direct`);
 *    y -> has[src][t-1], y -> has[dst][t], y -> !has[dst][t-1]; arriving in
 *    step t (has[t] and !has[t-1]) needs one of the y into the rank at t; at
 *    most one y per (chunk, rank) in all.  The measured alternative (SCCL's
 *    split: snd[l][c] for "some step" plus y implied from snd and the arrival
 *    step) is kept behind cfg->direct = false.
 *  - bandwidth: per step t and per link or shared set, sum y <= lanes * r_t.
 *    r_t = 1 + (extra rounds of step t), the extras order-encoded as e[t][j],
 *    written as a plain cardinality: sum y + (lanes copies of each !e[t][j])
 *    <= lanes * (1 + X), X = R - S; sum of all e = X.  Unit coefficients
 *    only: Z3 4.8.12's sorting-network PB encoding returned models violating
 *    weighted constraints.
 *  - implied bounds (cfg->ingress): per rank and step, received <= capacity *
 *    r_t and >= capacity * r_t - slack (slack: capacity over R rounds minus
 *    the chunks the rank must receive); per link and step, carried >= lanes *
 *    r_t - global slack.  At a bandwidth bound these make every link full in
 *    every round, which is where instances are hardest.
 *
 * Sound pruning fixes literals before Z3 sees them: a rank cannot hold a
 * chunk before its hop distance from the chunk's sources ("earliest"), and a
 * rank outside post only ever usefully receives a chunk early enough to pass
 * it on to a rank in post that lacks it ("latest"); later copies could be
 * deleted from any solution, so we forbid them.  Instances whose
 * postcondition is out of reach in S steps are UNSAT without calling Z3.
 *
 * Symmetry: chunks with identical pre and post rows are interchangeable (the
 * constraints only see a chunk through those rows), so any solution can be
 * permuted to order them lexicographically by their has-vectors; we add
 * lex-leader constraints between consecutive members of each class.
 */
#include "smt_internal.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verify.h"

void smt_encode_config_default(smt_encode_config *cfg)
{
    cfg->solver = 0;
    cfg->symmetry = true;
    cfg->sym_len = 0;
    cfg->pb_solver = "sorting";
    cfg->seed = 0;
    cfg->direct = true;
    cfg->ingress = true;
    cfg->fixed_rounds = NULL;
    cfg->card_solver = true;
    cfg->dump_stats = false;
}

/* ---- problem --------------------------------------------------------------- */

void smt_problem_free(smt_problem *p)
{
    if (!p)
        return;
    free(p->lsrc);
    free(p->ldst);
    free(p->llanes);
    free(p->in_begin);
    free(p->in_links);
    free(p->set_begin);
    free(p->set_links);
    free(p->set_lanes);
    free(p->pre);
    free(p->post);
    free(p->dist);
    free(p->earliest);
    free(p->need_dist);
    free(p->sym_next);
    free(p);
}

static void bfs_from(const smt_problem *p, int src, int *dist, int *queue)
{
    for (int n = 0; n < p->P; n++)
        dist[n] = INT_MAX;
    int head = 0, tail = 0;
    dist[src] = 0;
    queue[tail++] = src;
    /* out-links of u: scan all links (topologies for SMT are small) */
    while (head < tail) {
        int u = queue[head++];
        for (int l = 0; l < p->nlinks; l++)
            if (p->lsrc[l] == u && dist[p->ldst[l]] == INT_MAX) {
                dist[p->ldst[l]] = dist[u] + 1;
                queue[tail++] = p->ldst[l];
            }
    }
}

int smt_problem_build(const cs_topology *t, const cs_collective *c, int chunks,
                      smt_problem **out, cs_error *err)
{
    *out = NULL;
    if (!t || !t->finalized)
        return cs_error_set(err, CS_EINVAL, "topology", "topology is not finalized");
    smt_problem *p = calloc(1, sizeof *p);
    if (!p)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    int P = t->ranks;
    p->P = P;
    p->C = chunks;
    p->coll = c;
    snprintf(p->topology_name, sizeof p->topology_name, "%s", t->name);
    p->G = collective_global_chunks(c, P, chunks);
    if (p->G < 1 || p->G > 1000000) {
        smt_problem_free(p);
        return cs_error_set(err, CS_ELIMIT, "chunks", "%ld global chunks is outside 1..1000000",
                            p->G);
    }
    long G = p->G;
    p->nlinks = t->nlinks;
    int nl = t->nlinks;
    long set_entries = nl;
    for (int s = 0; s < t->nshared; s++)
        set_entries += t->shared[s].nlinks;
    p->nsets = nl + t->nshared;
    p->lsrc = malloc(sizeof(int) * (size_t)(nl + 1));
    p->ldst = malloc(sizeof(int) * (size_t)(nl + 1));
    p->llanes = malloc(sizeof(int) * (size_t)(nl + 1));
    p->in_begin = calloc((size_t)P + 1, sizeof(int));
    p->in_links = malloc(sizeof(int) * (size_t)(nl + 1));
    p->set_begin = malloc(sizeof(int) * (size_t)(p->nsets + 1));
    p->set_links = malloc(sizeof(int) * (size_t)(set_entries + 1));
    p->set_lanes = malloc(sizeof(int) * (size_t)(p->nsets + 1));
    p->pre = calloc((size_t)(G * P), 1);
    p->post = calloc((size_t)(G * P), 1);
    p->dist = malloc(sizeof(int) * (size_t)P * (size_t)P);
    p->earliest = malloc(sizeof(int) * (size_t)(G * P));
    p->need_dist = malloc(sizeof(int) * (size_t)(G * P));
    p->sym_next = malloc(sizeof(int) * (size_t)G);
    int *queue = malloc(sizeof(int) * (size_t)P);
    if (!p->lsrc || !p->ldst || !p->llanes || !p->in_begin || !p->in_links || !p->set_begin ||
        !p->set_links || !p->set_lanes || !p->pre || !p->post || !p->dist || !p->earliest ||
        !p->need_dist || !p->sym_next || !queue) {
        free(queue);
        smt_problem_free(p);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory building the SMT problem");
    }
    for (int l = 0; l < nl; l++) {
        p->lsrc[l] = t->links[l].src;
        p->ldst[l] = t->links[l].dst;
        p->llanes[l] = t->links[l].lanes;
        p->in_begin[t->links[l].dst + 1]++;
    }
    for (int n = 0; n < P; n++)
        p->in_begin[n + 1] += p->in_begin[n];
    {
        int *fill = calloc((size_t)P, sizeof(int));
        if (!fill) {
            free(queue);
            smt_problem_free(p);
            return cs_error_set(err, CS_ENOMEM, "", "out of memory");
        }
        for (int l = 0; l < nl; l++) {
            int d = p->ldst[l];
            p->in_links[p->in_begin[d] + fill[d]++] = l;
        }
        free(fill);
    }
    int k = 0;
    for (int l = 0; l < nl; l++) {
        p->set_begin[l] = k;
        p->set_links[k++] = l;
        p->set_lanes[l] = p->llanes[l];
    }
    for (int s = 0; s < t->nshared; s++) {
        p->set_begin[nl + s] = k;
        for (int i = 0; i < t->shared[s].nlinks; i++)
            p->set_links[k++] = t->shared[s].links[i];
        p->set_lanes[nl + s] = t->shared[s].lanes;
    }
    p->set_begin[p->nsets] = k;

    for (long g = 0; g < G; g++)
        for (int n = 0; n < P; n++) {
            p->pre[g * P + n] = collective_pre(c, P, chunks, g, n);
            p->post[g * P + n] = collective_post(c, P, chunks, g, n);
        }
    for (int n = 0; n < P; n++)
        bfs_from(p, n, p->dist + (size_t)n * P, queue);
    free(queue);
    for (long g = 0; g < G; g++) {
        const unsigned char *pre = p->pre + g * P, *post = p->post + g * P;
        for (int n = 0; n < P; n++) {
            int e = INT_MAX, nd = INT_MAX;
            for (int h = 0; h < P; h++) {
                if (pre[h] && p->dist[h * P + n] < e)
                    e = p->dist[h * P + n];
                if (post[h] && !pre[h] && p->dist[n * P + h] < nd)
                    nd = p->dist[n * P + h];
            }
            p->earliest[g * P + n] = e;
            p->need_dist[g * P + n] = nd;
        }
    }
    /* interchangeable chunks: identical pre and post rows */
    for (long g = 0; g < G; g++)
        p->sym_next[g] = -1;
    {
        long *last = malloc(sizeof(long) * (size_t)G); /* class representatives' last member */
        long *rep = malloc(sizeof(long) * (size_t)G);
        long nrep = 0;
        if (!last || !rep) {
            free(last);
            free(rep);
            smt_problem_free(p);
            return cs_error_set(err, CS_ENOMEM, "", "out of memory");
        }
        for (long g = 0; g < G; g++) {
            long r;
            for (r = nrep - 1; r >= 0; r--)
                if (!memcmp(p->pre + rep[r] * P, p->pre + g * P, (size_t)P) &&
                    !memcmp(p->post + rep[r] * P, p->post + g * P, (size_t)P))
                    break;
            if (r < 0) {
                rep[nrep] = g;
                last[nrep++] = g;
            } else {
                p->sym_next[last[r]] = (int)g;
                last[r] = g;
            }
        }
        free(last);
        free(rep);
    }
    *out = p;
    return CS_OK;
}

/* ---- encoder ---------------------------------------------------------------- */

typedef struct enc {
    Z3_context ctx;
    Z3_solver solver;
    Z3_sort boolsort;
    Z3_ast T, F;
    unsigned next_id;
    long nvars, ncons;
    int S;
    bool direct;
    bool oom;
    smt_live *live;
    char why[200];                /* reason for an UNSAT found while encoding */
    const smt_problem *p;
    Z3_ast *has;  /* G * P * (S+1) */
    Z3_ast *snd;  /* nlinks * G, NULL when impossible */
    Z3_ast *y;    /* (nlinks * S + t-1) * G, NULL when impossible */
    Z3_ast *e;    /* S * X */
    Z3_ast *buf;  /* scratch for PB terms */
    int *coef;
    long bufcap;
} enc;

static Z3_ast mkvar(enc *E)
{
    E->nvars++;
    return Z3_mk_const(E->ctx, Z3_mk_int_symbol(E->ctx, (int)E->next_id++), E->boolsort);
}

static Z3_ast neg(enc *E, Z3_ast a)
{
    if (a == E->T)
        return E->F;
    if (a == E->F)
        return E->T;
    return Z3_mk_not(E->ctx, a);
}

/* Asserts the disjunction of n literals, simplifying constants. */
static void clause(enc *E, int n, const Z3_ast *lits)
{
    Z3_ast small[16];
    Z3_ast *keep = n <= 16 ? small : malloc(sizeof(Z3_ast) * (size_t)n);
    int m = 0;
    if (!keep) {
        E->oom = true;
        return;
    }
    for (int i = 0; i < n; i++) {
        if (lits[i] == E->T) {
            m = -1;
            break;
        }
        if (lits[i] != E->F)
            keep[m++] = lits[i];
    }
    if (m >= 0) {
        E->ncons++;
        if (m == 0)
            Z3_solver_assert(E->ctx, E->solver, E->F);
        else if (m == 1)
            Z3_solver_assert(E->ctx, E->solver, keep[0]);
        else
            Z3_solver_assert(E->ctx, E->solver, Z3_mk_or(E->ctx, (unsigned)m, keep));
    }
    if (keep != small)
        free(keep);
}

static void clause2(enc *E, Z3_ast a, Z3_ast b)
{
    Z3_ast l[2] = {a, b};
    clause(E, 2, l);
}

static void clause3(enc *E, Z3_ast a, Z3_ast b, Z3_ast c)
{
    Z3_ast l[3] = {a, b, c};
    clause(E, 3, l);
}

static void clause4(enc *E, Z3_ast a, Z3_ast b, Z3_ast c, Z3_ast d)
{
    Z3_ast l[4] = {a, b, c, d};
    clause(E, 4, l);
}

#define HAS(E, g, n, t) ((E)->has[((size_t)(g) * (E)->p->P + (n)) * ((E)->S + 1) + (t)])

static int ensure_buf(enc *E, long n)
{
    if (n <= E->bufcap)
        return 0;
    long cap = n * 2;
    Z3_ast *b = realloc(E->buf, sizeof(Z3_ast) * (size_t)cap);
    if (!b)
        return -1;
    E->buf = b;
    int *c = realloc(E->coef, sizeof(int) * (size_t)cap);
    if (!c)
        return -1;
    E->coef = c;
    E->bufcap = cap;
    return 0;
}

/* x <=lex z over literal vectors (definitional "equal so far" chain). */
static void lex_leq(enc *E, int n, const Z3_ast *x, const Z3_ast *z)
{
    Z3_ast eq = E->T;
    for (int i = 0; i < n; i++) {
        /* eq -> (x_i -> z_i) */
        clause3(E, neg(E, eq), neg(E, x[i]), z[i]);
        if (i == n - 1)
            break;
        Z3_ast nx = mkvar(E);
        /* nx <-> eq & (x_i <-> z_i); given the constraint above, x_i <-> z_i
         * under eq is x_i | !z_i. */
        clause2(E, neg(E, nx), eq);
        clause3(E, neg(E, nx), x[i], neg(E, z[i]));
        clause3(E, neg(E, nx), neg(E, x[i]), z[i]);
        clause4(E, neg(E, eq), x[i], z[i], nx);
        clause4(E, neg(E, eq), neg(E, x[i]), neg(E, z[i]), nx);
        eq = nx;
    }
}

/* Polled while encoding, so a cancel does not wait for a long encoding. */
static bool enc_stopped(enc *E)
{
    if (!E->live)
        return false;
    pthread_mutex_lock(E->live->lock);
    bool stop = E->live->interrupted;
    pthread_mutex_unlock(E->live->lock);
    return stop;
}

static void z3_silent(Z3_context c, Z3_error_code e)
{
    (void)c;
    (void)e;
}

static void enc_free(enc *E)
{
    free(E->has);
    free(E->snd);
    free(E->y);
    free(E->e);
    free(E->buf);
    free(E->coef);
}

/* Chunks per round each rank can receive: the lanes of its in-links, capped
 * by any constraint set that holds all of them (a switch port). */
static int *ingress_caps(const smt_problem *p)
{
    int *cap = calloc((size_t)p->P, sizeof(int));
    unsigned char *mark = calloc((size_t)p->nlinks + 1, 1);
    if (!cap || !mark) {
        free(cap);
        free(mark);
        return NULL;
    }
    for (int v = 0; v < p->P; v++) {
        int deg = p->in_begin[v + 1] - p->in_begin[v];
        for (int i = p->in_begin[v]; i < p->in_begin[v + 1]; i++) {
            cap[v] += p->llanes[p->in_links[i]];
            mark[p->in_links[i]] = 1;
        }
        for (int s = 0; s < p->nsets; s++) {
            int covered = 0;
            for (int i = p->set_begin[s]; i < p->set_begin[s + 1]; i++)
                covered += mark[p->set_links[i]];
            if (covered == deg && p->set_lanes[s] < cap[v])
                cap[v] = p->set_lanes[s];
        }
        for (int i = p->in_begin[v]; i < p->in_begin[v + 1]; i++)
            mark[p->in_links[i]] = 0;
    }
    free(mark);
    return cap;
}

/* Builds every constraint; returns CS_EUNSAT when the postcondition is out
 * of reach (no solver call needed), CS_ENOMEM, or CS_OK. */
static int encode(enc *E, int R, const smt_encode_config *cfg)
{
    const smt_problem *p = E->p;
    int S = E->S, P = p->P, nl = p->nlinks;
    long G = p->G;
    int X = R - S;
    /* capacity: decided before building anything */
    {
        long total = 0, need_all = 0;
        for (int l = 0; l < nl; l++)
            total += (long)p->llanes[l] * R;
        for (long i = 0; i < G * P; i++)
            need_all += p->post[i] && !p->pre[i];
        if (total < need_all) {
            snprintf(E->why, sizeof E->why,
                     "no %d-round algorithm exists: the links carry %ld chunks in %d rounds, "
                     "the postcondition needs %ld receives", R, total, R, need_all);
            return CS_EUNSAT;
        }
        int *cap = ingress_caps(p);
        if (!cap)
            return CS_ENOMEM;
        for (int v = 0; v < P; v++) {
            long need = 0;
            for (long g = 0; g < G; g++)
                need += p->post[(size_t)g * P + v] && !p->pre[(size_t)g * P + v];
            if ((long)cap[v] * R < need) {
                snprintf(E->why, sizeof E->why,
                         "no %d-round algorithm exists: rank %d must receive %ld chunks but "
                         "takes at most %d per round", R, v, need, cap[v]);
                free(cap);
                return CS_EUNSAT;
            }
        }
        free(cap);
    }
    E->has = malloc(sizeof(Z3_ast) * (size_t)G * (size_t)P * (size_t)(S + 1));
    E->snd = calloc((size_t)nl * (size_t)G, sizeof(Z3_ast));
    E->y = calloc((size_t)nl * (size_t)S * (size_t)G, sizeof(Z3_ast));
    E->e = malloc(sizeof(Z3_ast) * (size_t)(S * (X > 0 ? X : 1)));
    if (!E->has || !E->snd || !E->y || !E->e)
        return CS_ENOMEM;

    /* has: fixed literals from earliest / latest, fresh variables otherwise */
    for (long g = 0; g < G; g++) {
        if (enc_stopped(E))
            return CS_ECANCELLED;
        for (int n = 0; n < P; n++) {
            size_t gn = (size_t)g * P + n;
            if (p->pre[gn]) {
                for (int t = 0; t <= S; t++)
                    HAS(E, g, n, t) = E->T;
                continue;
            }
            int early = p->earliest[gn];
            int late;
            if (p->post[gn])
                late = S;
            else if (p->need_dist[gn] == INT_MAX)
                late = -1;
            else
                late = S - p->need_dist[gn];
            if (p->post[gn] && early > S) {
                snprintf(E->why, sizeof E->why,
                         "no %d-step algorithm exists: chunk %ld needs %s hops to reach rank %d",
                         S, g, early == INT_MAX ? "infinitely many" : "more", n);
                return CS_EUNSAT;
            }
            HAS(E, g, n, 0) = E->F;
            for (int t = 1; t <= S; t++) {
                if (t < early || late < early || late < 1)
                    HAS(E, g, n, t) = E->F;
                else if (t > late)
                    HAS(E, g, n, t) = HAS(E, g, n, late);
                else {
                    HAS(E, g, n, t) = mkvar(E);
                    if (HAS(E, g, n, t - 1) != E->F)
                        clause2(E, neg(E, HAS(E, g, n, t - 1)), HAS(E, g, n, t));
                }
            }
            if (p->post[gn])
                clause(E, 1, &HAS(E, g, n, S));
        }
    }

    /* sends, exactly one receive, causality, bandwidth indicators */
    for (long g = 0; g < G; g++) {
        if (enc_stopped(E))
            return CS_ECANCELLED;
        for (int v = 0; v < P; v++) {
            size_t gv = (size_t)g * P + v;
            if (p->pre[gv] || HAS(E, g, v, S) == E->F)
                continue;
            int deg = p->in_begin[v + 1] - p->in_begin[v];
            Z3_ast *inv = malloc(sizeof(Z3_ast) * ((size_t)deg * (size_t)S + 2));
            if (!inv)
                return CS_ENOMEM;
            int nin = 0;
            if (cfg->direct) {
                /* y[l][c][t] is exactly "c crosses l in step t" */
                for (int t = 1; t <= S; t++) {
                    Z3_ast hv = HAS(E, g, v, t), hv0 = HAS(E, g, v, t - 1);
                    if (hv == E->F || hv == hv0)
                        continue;
                    int first = nin;
                    for (int i = p->in_begin[v]; i < p->in_begin[v + 1]; i++) {
                        int l = p->in_links[i], u = p->lsrc[l];
                        Z3_ast hu = HAS(E, g, u, t - 1);
                        if (hu == E->F)
                            continue;
                        Z3_ast yv = mkvar(E);
                        E->y[((size_t)l * S + (t - 1)) * G + g] = yv;
                        inv[nin++] = yv;
                        clause2(E, neg(E, yv), hu);
                        clause2(E, neg(E, yv), hv);
                        clause2(E, neg(E, yv), neg(E, hv0));
                    }
                    /* arriving in step t needs a crossing in step t */
                    inv[nin] = neg(E, hv);
                    inv[nin + 1] = hv0;
                    clause(E, nin - first + 2, inv + first);
                }
            } else {
                for (int i = p->in_begin[v]; i < p->in_begin[v + 1]; i++) {
                    int l = p->in_links[i], u = p->lsrc[l];
                    if (HAS(E, g, u, S - 1) == E->F)
                        continue;
                    Z3_ast s = mkvar(E);
                    E->snd[(size_t)l * G + g] = s;
                    inv[nin++] = s;
                    clause2(E, neg(E, s), HAS(E, g, v, S));
                    for (int t = 1; t <= S; t++) {
                        Z3_ast hv = HAS(E, g, v, t), hv0 = HAS(E, g, v, t - 1);
                        if (hv == E->F || hv == hv0)
                            continue;
                        clause3(E, neg(E, s), neg(E, hv), HAS(E, g, u, t - 1));
                        Z3_ast yv = mkvar(E);
                        E->y[((size_t)l * S + (t - 1)) * G + g] = yv;
                        clause4(E, neg(E, s), neg(E, hv), hv0, yv);
                        if (cfg->ingress) {
                            /* y exactly "c crosses l in step t", so lower bounds on
                             * sums of y are not met by junk */
                            clause2(E, neg(E, yv), s);
                            clause2(E, neg(E, yv), hv);
                            clause2(E, neg(E, yv), neg(E, hv0));
                        }
                    }
                }
                /* has[S] -> some send */
                inv[nin] = neg(E, HAS(E, g, v, S));
                clause(E, nin + 1, inv);
            }
            /* at most one receive */
            if (nin > 1) {
                Z3_solver_assert(E->ctx, E->solver, Z3_mk_atmost(E->ctx, (unsigned)nin, inv, 1));
                E->ncons++;
            }
            free(inv);
        }
    }

    /* rounds: e[t][j] (r_t >= j + 2), order-encoded; at most X extras in all */
    for (int t = 0; t < S; t++)
        for (int j = 0; j < X; j++) {
            E->e[t * X + j] = mkvar(E);
            if (j > 0)
                clause2(E, neg(E, E->e[t * X + j]), E->e[t * X + j - 1]);
        }
    if (X > 0 && S > 1) {
        Z3_solver_assert(E->ctx, E->solver,
                         Z3_mk_atmost(E->ctx, (unsigned)(S * X), E->e, (unsigned)X));
        E->ncons++;
    }
    if (cfg->fixed_rounds)
        for (int t = 0; t < S; t++)
            for (int j = 0; j < X; j++)
                clause(E, 1, (Z3_ast[]){j + 1 < cfg->fixed_rounds[t] ? E->e[t * X + j]
                                                                       : neg(E, E->e[t * X + j])});
    if (X > 0 && cfg->ingress) {
        /* the ingress lower bounds assume all R rounds are used */
        Z3_solver_assert(E->ctx, E->solver,
                         Z3_mk_atleast(E->ctx, (unsigned)(S * X), E->e, (unsigned)X));
        E->ncons++;
    }

    /* bandwidth per step and per link / shared set.  Only unit coefficients:
     * lanes * !e[t][j] is written as `lanes` copies of !e[t][j] (weighted PB
     * constraints went wrong with Z3 4.8.12's sorting-network PB encoding). */
    int maxlanes = 0;
    for (int s = 0; s < p->nsets; s++)
        if (p->set_lanes[s] > maxlanes)
            maxlanes = p->set_lanes[s];
    int *cap = NULL;
    if (cfg->ingress) {
        cap = ingress_caps(p);
        if (!cap)
            return CS_ENOMEM;
        for (int v = 0; v < P; v++)
            if (cap[v] > maxlanes)
                maxlanes = cap[v];
    }
    Z3_ast *ecopy = NULL;
    if (X > 0) {
        ecopy = malloc(sizeof(Z3_ast) * (size_t)S * (size_t)X * (size_t)maxlanes);
        if (!ecopy)
            return CS_ENOMEM;
        for (int t = 0; t < S; t++)
            for (int j = 0; j < X; j++)
                for (int c = 0; c < maxlanes; c++) {
                    Z3_ast *slot = &ecopy[((size_t)t * X + j) * maxlanes + c];
                    if (c == 0) {
                        *slot = neg(E, E->e[t * X + j]);
                    } else {
                        *slot = mkvar(E);
                        clause2(E, neg(E, *slot), neg(E, E->e[t * X + j]));
                        clause2(E, *slot, E->e[t * X + j]);
                    }
                }
    }
    /* global slack: capacity of all links over R rounds minus the receives the
     * postcondition forces */
    long gslack = 0;
    for (int l = 0; l < nl; l++)
        gslack += (long)p->llanes[l] * R;
    for (long i = 0; i < G * P; i++)
        if (p->post[i] && !p->pre[i])
            gslack--;
    if (gslack < 0) {
        snprintf(E->why, sizeof E->why,
                 "no %d-round algorithm exists: the links carry fewer chunks in %d rounds than "
                 "the postcondition needs", R, R);
        free(cap);
        free(ecopy);
        return CS_EUNSAT;
    }
    for (int s = 0; s < p->nsets; s++) {
        int b = p->set_lanes[s];
        long maxterms = (long)(p->set_begin[s + 1] - p->set_begin[s]) * G + (long)X * b;
        if (ensure_buf(E, maxterms)) {
            free(cap);
            free(ecopy);
            return CS_ENOMEM;
        }
        for (int t = 0; t < S; t++) {
            long n = 0;
            for (int i = p->set_begin[s]; i < p->set_begin[s + 1]; i++) {
                int l = p->set_links[i];
                Z3_ast *row = E->y + ((size_t)l * S + t) * G;
                for (long g = 0; g < G; g++)
                    if (row[g])
                        E->buf[n++] = row[g];
            }
            long ny = n;
            for (int j = 0; j < X; j++)
                for (int c = 0; c < b; c++)
                    E->buf[n++] = ecopy[((size_t)t * X + j) * maxlanes + c];
            if (ny > b) { /* else r_t >= 1 already allows it */
                Z3_solver_assert(E->ctx, E->solver,
                                 Z3_mk_atmost(E->ctx, (unsigned)n, E->buf, (unsigned)(b * (1 + X))));
                E->ncons++;
            }
            /* a link must carry what the rest of the network cannot */
            long lo = (long)b * (1 + X) - gslack;
            if (cfg->ingress && s < nl && lo > 0) {
                Z3_solver_assert(E->ctx, E->solver,
                                 Z3_mk_atleast(E->ctx, (unsigned)n, E->buf, (unsigned)lo));
                E->ncons++;
            }
        }
    }
    /* implied per-rank ingress constraints (see the top of the file) */
    for (int v = 0; v < P && cfg->ingress; v++) {
        long need = 0;
        for (long g = 0; g < G; g++)
            if (p->post[(size_t)g * P + v] && !p->pre[(size_t)g * P + v])
                need++;
        long slack = (long)cap[v] * R - need;
        if (slack < 0) {
            snprintf(E->why, sizeof E->why,
                     "no %d-round algorithm exists: rank %d must receive %ld chunks but takes "
                     "at most %d per round", R, v, need, cap[v]);
            free(cap);
            free(ecopy);
            return CS_EUNSAT;
        }
        long maxterms = (long)(p->in_begin[v + 1] - p->in_begin[v]) * G + (long)X * cap[v];
        if (ensure_buf(E, maxterms)) {
            free(cap);
            free(ecopy);
            return CS_ENOMEM;
        }
        for (int t = 0; t < S; t++) {
            long n = 0;
            for (int i = p->in_begin[v]; i < p->in_begin[v + 1]; i++) {
                Z3_ast *row = E->y + ((size_t)p->in_links[i] * S + t) * G;
                for (long g = 0; g < G; g++)
                    if (row[g])
                        E->buf[n++] = row[g];
            }
            long ny = n;
            for (int j = 0; j < X; j++)
                for (int c = 0; c < cap[v]; c++)
                    E->buf[n++] = ecopy[((size_t)t * X + j) * maxlanes + c];
            long hi = (long)cap[v] * (1 + X);
            if (ny > cap[v]) {
                Z3_solver_assert(E->ctx, E->solver,
                                 Z3_mk_atmost(E->ctx, (unsigned)n, E->buf, (unsigned)hi));
                E->ncons++;
            }
            long lo = hi - slack;
            if (lo > 0) {
                Z3_solver_assert(E->ctx, E->solver,
                                 Z3_mk_atleast(E->ctx, (unsigned)n, E->buf, (unsigned)lo));
                E->ncons++;
            }
        }
    }
    free(cap);
    free(ecopy);
    if (E->oom)
        return CS_ENOMEM;

    /* symmetry breaking between interchangeable chunks */
    if (cfg->symmetry) {
        long len = (long)P * S;
        if (ensure_buf(E, 2 * len + 2))
            return CS_ENOMEM;
        for (long g = 0; g < G; g++) {
            long h = p->sym_next[g];
            if (h < 0)
                continue;
            int n = 0;
            for (int r = 0; r < P; r++)
                for (int t = 1; t <= S; t++) {
                    Z3_ast a = HAS(E, g, r, t), b = HAS(E, h, r, t);
                    if (a == E->T || a == E->F || a == HAS(E, g, r, t - 1))
                        continue;
                    E->buf[n] = a;
                    E->buf[len + n] = b;
                    n++;
                    if (cfg->sym_len > 0 && n >= cfg->sym_len)
                        goto full;
                }
full:
            if (n > 0)
                lex_leq(E, n, E->buf + len, E->buf);
        }
    }
    return CS_OK;
}

static bool model_true(Z3_context ctx, Z3_model m, Z3_ast a)
{
    Z3_ast v = NULL;
    if (!Z3_model_eval(ctx, m, a, true, &v) || !v)
        return false;
    return Z3_get_bool_value(ctx, v) == Z3_L_TRUE;
}

/* Reads sends and rounds from the model; drops receives nobody needs. */
static int extract(enc *E, Z3_model m, int R, cs_algorithm **out, cs_error *err)
{
    const smt_problem *p = E->p;
    int S = E->S, P = p->P, nl = p->nlinks;
    long G = p->G;
    int X = R - S;
    cs_algorithm *a = NULL;
    int rc = algorithm_new(p->coll, p->topology_name, P, p->C, S, &a, err);
    if (rc)
        return rc;
    int sum = 0;
    for (int t = 0; t < S; t++) {
        int r = 1;
        for (int j = 0; j < X; j++)
            if (model_true(E->ctx, m, E->e[t * X + j]))
                r++;
        a->rounds_per_step[t] = r;
        sum += r;
    }
    if (sum > R) {
        algorithm_free(a);
        return cs_error_set(err, CS_EINTERNAL, "", "model uses %d rounds, more than %d", sum, R);
    }
    a->rounds_per_step[S - 1] += R - sum;
    algorithm_update_rounds(a);

    /* per (chunk, rank): the incoming link and the arrival step */
    int *from = malloc(sizeof(int) * (size_t)(G * P));
    int *when = malloc(sizeof(int) * (size_t)(G * P));
    int *fanout = calloc((size_t)(G * P), sizeof(int));
    long *stack = malloc(sizeof(long) * (size_t)(G * P));
    if (!from || !when || !fanout || !stack) {
        free(from);
        free(when);
        free(fanout);
        free(stack);
        algorithm_free(a);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    for (long i = 0; i < G * P; i++)
        from[i] = -1;
    if (E->direct) {
        for (int l = 0; l < nl; l++)
            for (int t = 1; t <= S; t++)
                for (long g = 0; g < G; g++) {
                    Z3_ast yv = E->y[((size_t)l * S + (t - 1)) * G + g];
                    if (!yv || !model_true(E->ctx, m, yv))
                        continue;
                    size_t gv = (size_t)g * P + p->ldst[l];
                    from[gv] = l;
                    when[gv] = t;
                    fanout[(size_t)g * P + p->lsrc[l]]++;
                }
    }
    for (int l = 0; l < nl && !E->direct; l++)
        for (long g = 0; g < G; g++) {
            Z3_ast s = E->snd[(size_t)l * G + g];
            if (!s || !model_true(E->ctx, m, s))
                continue;
            int v = p->ldst[l];
            size_t gv = (size_t)g * P + v;
            if (!model_true(E->ctx, m, HAS(E, g, v, S)))
                continue;
            int t = 1;
            while (t < S && !model_true(E->ctx, m, HAS(E, g, v, t)))
                t++;
            from[gv] = l;
            when[gv] = t;
            fanout[(size_t)g * P + p->lsrc[l]]++;
        }
    /* prune receives outside post that feed nothing */
    long top = 0;
    for (long i = 0; i < G * P; i++)
        if (from[i] >= 0 && !p->post[i] && fanout[i] == 0)
            stack[top++] = i;
    while (top > 0) {
        long i = stack[--top];
        long g = i / P;
        int u = p->lsrc[from[i]];
        from[i] = -1;
        long j = g * P + u;
        if (--fanout[j] == 0 && from[j] >= 0 && !p->post[j])
            stack[top++] = j;
    }
    rc = CS_OK;
    for (long i = 0; i < G * P && rc == CS_OK; i++)
        if (from[i] >= 0) {
            int l = from[i];
            if (algorithm_add_send(a, i / P, p->lsrc[l], p->ldst[l], when[i] - 1, CS_OP_COPY))
                rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
        }
    free(from);
    free(when);
    free(fanout);
    free(stack);
    if (rc) {
        algorithm_free(a);
        return rc;
    }
    algorithm_sort_sends(a);
    snprintf(a->method, sizeof a->method, "smt");
    *out = a;
    return CS_OK;
}

int smt_encode_solve(const smt_problem *p, int S, int R, const smt_encode_config *cfg,
                     double time_limit_s, smt_live *live, cs_algorithm **out,
                     smt_instance_stats *st, cs_error *err)
{
    *out = NULL;
    smt_instance_stats dummy;
    if (!st)
        st = &dummy;
    memset(st, 0, sizeof *st);
    smt_encode_config defcfg;
    if (!cfg) {
        smt_encode_config_default(&defcfg);
        cfg = &defcfg;
    }
    if (S < 1 || R < S)
        return cs_error_set(err, CS_EINVAL, "rounds", "need 1 <= steps <= rounds (got %d, %d)", S, R);
    double t0 = cs_now();
    Z3_config zc = Z3_mk_config();
    Z3_set_param_value(zc, "model", "true");
    Z3_context ctx = Z3_mk_context(zc);
    Z3_del_config(zc);
    if (!ctx)
        return cs_error_set(err, CS_ENOMEM, "", "cannot create a Z3 context");
    Z3_set_error_handler(ctx, z3_silent);
    if (live) {
        pthread_mutex_lock(live->lock);
        live->ctx = ctx;
        bool stop = live->interrupted;
        pthread_mutex_unlock(live->lock);
        if (stop) {
            pthread_mutex_lock(live->lock);
            live->ctx = NULL;
            pthread_mutex_unlock(live->lock);
            Z3_del_context(ctx);
            return cs_error_set(err, CS_ECANCELLED, "", "cancelled");
        }
    }
    Z3_solver solver;
    if (cfg->solver == 0)
        solver = Z3_mk_solver_for_logic(ctx, Z3_mk_string_symbol(ctx, "QF_FD"));
    else if (cfg->solver == 1)
        solver = Z3_mk_solver(ctx);
    else
        solver = Z3_mk_simple_solver(ctx);
    Z3_solver_inc_ref(ctx, solver);
    {
        Z3_params prm = Z3_mk_params(ctx);
        Z3_params_inc_ref(ctx, prm);
        if (time_limit_s > 0) {
            double ms = time_limit_s * 1000.0;
            Z3_params_set_uint(ctx, prm, Z3_mk_string_symbol(ctx, "timeout"),
                               ms > 4e9 ? 4000000000u : (unsigned)(ms < 1 ? 1 : ms));
        }
        if (cfg->pb_solver && cfg->pb_solver[0])
            Z3_params_set_symbol(ctx, prm, Z3_mk_string_symbol(ctx, "pb.solver"),
                                 Z3_mk_string_symbol(ctx, cfg->pb_solver));
        if (cfg->solver == 0)
            Z3_params_set_bool(ctx, prm, Z3_mk_string_symbol(ctx, "cardinality.solver"),
                               cfg->card_solver);
        if (cfg->seed)
            Z3_params_set_uint(ctx, prm, Z3_mk_string_symbol(ctx, "random_seed"), cfg->seed);
        /* Z3 otherwise installs its own SIGINT handler around every check,
         * which only cancels that one instance: the search went on with the
         * next, and Ctrl-C never stopped `collsynth solve` (a library must
         * not take the process's signals; cancellation is live->interrupted) */
        Z3_params_set_bool(ctx, prm, Z3_mk_string_symbol(ctx, "ctrl_c"), false);
        Z3_solver_set_params(ctx, solver, prm);
        Z3_params_dec_ref(ctx, prm);
    }
    enc E;
    memset(&E, 0, sizeof E);
    E.ctx = ctx;
    E.solver = solver;
    E.boolsort = Z3_mk_bool_sort(ctx);
    E.T = Z3_mk_true(ctx);
    E.F = Z3_mk_false(ctx);
    E.S = S;
    E.p = p;
    E.direct = cfg->direct;
    E.live = live;
    int rc = encode(&E, R, cfg);
    st->vars = E.nvars;
    st->constraints = E.ncons;
    double t1 = cs_now();
    st->encode_s = t1 - t0;
    if (rc == CS_OK) {
        bool stop = false;
        if (live) {
            pthread_mutex_lock(live->lock);
            stop = live->interrupted;
            pthread_mutex_unlock(live->lock);
        }
        Z3_lbool res = stop ? Z3_L_UNDEF : Z3_solver_check(ctx, solver);
        double t2 = cs_now();
        st->z3_s = t2 - t1;
        {
            Z3_stats zs = Z3_solver_get_statistics(ctx, solver);
            Z3_stats_inc_ref(ctx, zs);
            for (unsigned i = 0; i < Z3_stats_size(ctx, zs); i++)
            {
                if (Z3_stats_is_uint(ctx, zs, i) &&
                    !strcmp(Z3_stats_get_key(ctx, zs, i), "sat conflicts"))
                    st->conflicts = Z3_stats_get_uint_value(ctx, zs, i);
                if (cfg->dump_stats)
                    fprintf(stderr, "  %s = %g\n", Z3_stats_get_key(ctx, zs, i),
                            Z3_stats_is_uint(ctx, zs, i) ? (double)Z3_stats_get_uint_value(ctx, zs, i)
                                                         : Z3_stats_get_double_value(ctx, zs, i));
            }
            Z3_stats_dec_ref(ctx, zs);
        }
        if (res == Z3_L_TRUE) {
            Z3_model m = Z3_solver_get_model(ctx, solver);
            if (!m) {
                rc = cs_error_set(err, CS_EINTERNAL, "", "Z3 returned sat without a model");
            } else {
                Z3_model_inc_ref(ctx, m);
                rc = extract(&E, m, R, out, err);
                Z3_model_dec_ref(ctx, m);
            }
            st->extract_s = cs_now() - t2;
        } else if (res == Z3_L_FALSE) {
            rc = cs_error_set(err, CS_EUNSAT, "",
                              "no %d-step, %d-round algorithm with %d chunks exists", S, R, p->C);
        } else {
            bool cancelled = false;
            if (live) {
                pthread_mutex_lock(live->lock);
                cancelled = live->interrupted;
                pthread_mutex_unlock(live->lock);
            }
            if (cancelled)
                rc = cs_error_set(err, CS_ECANCELLED, "", "cancelled");
            else if (time_limit_s > 0 && t2 - t1 >= time_limit_s * 0.9)
                rc = cs_error_set(err, CS_ETIMEOUT, "",
                                  "instance (S=%d, R=%d, C=%d) hit its %.3g s time limit", S, R,
                                  p->C, time_limit_s);
            else
                rc = cs_error_set(err, CS_ETIMEOUT, "", "Z3 gave up: %s",
                                  Z3_solver_get_reason_unknown(ctx, solver));
        }
    } else if (rc == CS_EUNSAT) {
        cs_error_set(err, CS_EUNSAT, "", "%s", E.why[0] ? E.why : "no algorithm exists");
    } else if (rc == CS_ECANCELLED) {
        cs_error_set(err, CS_ECANCELLED, "", "cancelled while encoding");
    } else {
        cs_error_set(err, rc, "", "out of memory encoding the instance");
    }
    if (live) {
        pthread_mutex_lock(live->lock);
        live->ctx = NULL;
        pthread_mutex_unlock(live->lock);
    }
    enc_free(&E);
    Z3_solver_dec_ref(ctx, solver);
    Z3_del_context(ctx);
    return rc;
}
