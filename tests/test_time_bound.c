/*
 * Tests of collective_time_bound (bounds.h).
 *
 * 1. brute force: on random topologies of at most 10 ranks (links with
 *    lanes, speeds and alphas of their own, switches, shared sets, groups),
 *    every cut capacity is computed by enumerating every placement of the
 *    switch and set nodes (no max-flow), every rank set is enumerated, and
 *    the bound of each collective is the documented maximum over them.  The
 *    implementation must find exactly that maximum where it says `exact`,
 *    never more anywhere, and latency_us must be the alpha of a maximizing
 *    cut.  Nothing here calls the code under test except for its answer.
 * 2. validity: every baseline, TACOS and (on small topologies) the SMT
 *    frontier, verified, simulated at several sizes: no simulated time is
 *    below the bound.
 * 3. figures derived by hand on machine models and large topologies.
 * 4. rooted collectives' additive lines (latency to a cut plus the cut):
 *    brute force over every rank set on the random topologies, every
 *    method's schedules (hierarchical and mcf too) on rings, ring and switch
 *    clusters, dgx1 and a torus, and the ring cluster figure by hand.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "baseline.h"
#include "bounds.h"
#include "check_main.h"
#include "cluster_testutil.h"
#include "hier.h"
#include "mcf.h"
#include "simulate.h"
#include "smt.h"
#include "tacos.h"
#include "verify.h"
#include "topology_testutil.h"

/* ---- random topologies --------------------------------------------------------------- */

typedef struct {
    uint64_t s;
} rng;

static uint32_t next(rng *r)
{
    r->s = r->s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(r->s >> 33);
}

static int pick(rng *r, int n) { return (int)(next(r) % (uint32_t)n); }

static const double speeds[] = {12.5, 25.0, 50.0, 100.0};
static const double alphas[] = {0.5, 0.7, 1.0, 2.0};

/* A strongly connected topology of P ranks: a ring (either or both ways),
 * extra links, maybe switches, shared sets and groups.  Each physical link
 * is in at most one shared set (the chain order of a link in two sets is a
 * choice of the model, not tested here). */
static cs_topology *random_topology(rng *r, int P, bool with_switches, bool with_sets)
{
    cs_topology *t = topology_new("random", P);
    cs_error err = {0};
    unsigned char linked[16][16] = {{0}};
    int pairs[64][2], npairs = 0;
    for (int i = 0; i < P; i++) {
        int j = (i + 1) % P;
        if (P == 2 && i == 1)
            break;
        bool both = pick(r, 3) > 0 || P == 2;
        int lanes = 1 + pick(r, 3);
        ck_assert_int_eq(topology_add_link(t, i, j, lanes, speeds[pick(r, 4)], alphas[pick(r, 4)],
                                           both, &err), CS_OK);
        linked[i][j] = 1;
        pairs[npairs][0] = i, pairs[npairs++][1] = j;
        if (both) {
            linked[j][i] = 1;
            pairs[npairs][0] = j, pairs[npairs++][1] = i;
        } else if (i == P - 1) {
            /* a one-way ring is still strongly connected */
        }
    }
    int extra = pick(r, P + 1);
    for (int k = 0; k < extra; k++) {
        int a = pick(r, P), b = pick(r, P);
        if (a == b || linked[a][b])
            continue;
        ck_assert_int_eq(topology_add_link(t, a, b, 1 + pick(r, 2), speeds[pick(r, 4)],
                                           alphas[pick(r, 4)], false, &err), CS_OK);
        linked[a][b] = 1;
        if (npairs < 64)
            pairs[npairs][0] = a, pairs[npairs++][1] = b;
    }
    if (with_sets) {
        int nsets = 1 + pick(r, 2), used = 0;
        for (int s = 0; s < nsets && used + 2 <= npairs; s++) {
            int n = 2 + pick(r, 2);
            if (used + n > npairs)
                n = npairs - used;
            ck_assert_int_eq(topology_add_shared(t, (const int(*)[2])&pairs[used], n,
                                                 1 + pick(r, 2), &err), CS_OK);
            used += n;
        }
    }
    if (with_switches) {
        int nsw = 1 + pick(r, 2);
        for (int s = 0; s < nsw; s++) {
            int members[16], n = 0;
            for (int v = 0; v < P; v++)
                if (pick(r, 2))
                    members[n++] = v;
            if (n < 2)
                continue;
            char name[16];
            snprintf(name, sizeof name, "sw%d", s);
            ck_assert_int_eq(topology_add_switch(t, name, members, n, speeds[pick(r, 4)],
                                                 alphas[pick(r, 4)], &err), CS_OK);
        }
    }
    if (pick(r, 2) && P >= 4) {
        int cut = 1 + pick(r, P - 1), a[16], b[16];
        for (int v = 0; v < P; v++)
            (v < cut ? a : b)[v < cut ? v : v - cut] = v;
        ck_assert_int_eq(topology_add_group(t, a, cut, &err), CS_OK);
        ck_assert_int_eq(topology_add_group(t, b, P - cut, &err), CS_OK);
    }
    ck_assert_msg(topology_finalize(t, &err) == CS_OK, "finalize: %s", err.message);
    return t;
}

/* ---- brute force ----------------------------------------------------------------------- */

/* The documented network: nodes 0..P-1 ranks, then a node per switch, then an
 * in/out node pair per document set; edges (u, v, bytes/us). */
typedef struct {
    int nodes, nedges;
    int u[512], v[512];
    double c[512];
} bf_net;

static void bf_edge(bf_net *n, int u, int v, double c)
{
    ck_assert_int_lt(n->nedges, 512);
    n->u[n->nedges] = u, n->v[n->nedges] = v, n->c[n->nedges++] = c;
}

static void bf_build(const cs_topology *t, bf_net *n)
{
    int P = t->ranks;
    memset(n, 0, sizeof *n);
    int set_node[64], nsets = 0;
    for (int k = 0; k < t->nshared; k++)
        set_node[k] = t->shared[k].switch_id < 0 ? P + t->nswitches + 2 * nsets++ : -1;
    n->nodes = P + t->nswitches + 2 * nsets;
    for (int k = 0; k < t->nshared; k++) {
        if (set_node[k] < 0)
            continue;
        double fastest = 0;
        for (int j = 0; j < t->shared[k].nlinks; j++)
            fastest = fmax(fastest, t->links[t->shared[k].links[j]].gbps * 1e3);
        bf_edge(n, set_node[k], set_node[k] + 1, t->shared[k].lanes * fastest);
    }
    for (int l = 0; l < t->nlinks; l++) {
        const cs_link *k = &t->links[l];
        if (k->switch_id >= 0)
            continue;
        double c = k->lanes * k->gbps * 1e3;
        int set = -1;
        for (int s = 0; s < t->nshared; s++)
            for (int j = 0; set_node[s] >= 0 && j < t->shared[s].nlinks; j++)
                if (t->shared[s].links[j] == l)
                    set = s;
        if (set < 0) {
            bf_edge(n, k->src, k->dst, c);
        } else {
            bf_edge(n, k->src, set_node[set], c);
            bf_edge(n, set_node[set] + 1, k->dst, c);
        }
    }
    for (int s = 0; s < t->nswitches; s++)
        for (int i = 0; i < t->switches[s].nranks; i++) {
            bf_edge(n, t->switches[s].ranks[i], P + s, t->switches[s].gbps * 1e3);
            bf_edge(n, P + s, t->switches[s].ranks[i], t->switches[s].gbps * 1e3);
        }
}

/* cap_in[S] for every rank set S (bit r = rank r in S): the least capacity of
 * edges from outside to inside over every side of the other nodes. */
static void bf_caps(const bf_net *n, int P, double *cap_in)
{
    int aux = n->nodes - P;
    for (unsigned S = 0; S < (1u << P); S++) {
        double best = INFINITY;
        for (unsigned A = 0; A < (1u << aux); A++) {
            double c = 0;
            for (int e = 0; e < n->nedges; e++) {
                int u = n->u[e], v = n->v[e];
                bool in_u = u < P ? (S >> u) & 1 : (A >> (u - P)) & 1;
                bool in_v = v < P ? (S >> v) & 1 : (A >> (v - P)) & 1;
                if (!in_u && in_v)
                    c += n->c[e];
            }
            best = fmin(best, c);
        }
        cap_in[S] = best;
    }
}

static double bf_alpha_into(const cs_topology *t, unsigned S)
{
    double a = INFINITY;
    for (int l = 0; l < t->nlinks; l++)
        if (!((S >> t->links[l].src) & 1) && ((S >> t->links[l].dst) & 1))
            a = fmin(a, t->links[l].alpha_us);
    return a;
}

/* The alpha-weighted distances of the lowered topology (what the simulator
 * runs on), all pairs. */
static void bf_distances(const cs_topology *t, double d[16][16])
{
    int P = t->ranks;
    for (int i = 0; i < P; i++)
        for (int j = 0; j < P; j++)
            d[i][j] = i == j ? 0 : INFINITY;
    for (int l = 0; l < t->nlinks; l++)
        d[t->links[l].src][t->links[l].dst] =
            fmin(d[t->links[l].src][t->links[l].dst], t->links[l].alpha_us);
    for (int k = 0; k < P; k++)
        for (int i = 0; i < P; i++)
            for (int j = 0; j < P; j++)
                d[i][j] = fmin(d[i][j], d[i][k] + d[k][j]);
}

static int popcount(unsigned x) { return __builtin_popcount(x); }

typedef struct {
    double B;          /* the documented maximum */
    double alphas[64]; /* alpha of the cuts that reach it */
    int nalphas;
} bf_best;

static void bf_offer(bf_best *b, double B, double alpha)
{
    if (!(B > 0) || !isfinite(B))
        return;
    if (B > b->B * (1 + 1e-12)) {
        b->B = B;
        b->nalphas = 0;
    }
    if (fabs(B - b->B) <= 1e-12 * b->B && b->nalphas < 64)
        b->alphas[b->nalphas++] = alpha;
}

/* The brute-force B (and maximizing alphas) of kind on t, root 0. */
static bf_best bf_bound(const cs_topology *t, cs_coll_kind kind, const double *cap_in)
{
    int P = t->ranks;
    unsigned all = (1u << P) - 1;
    bf_best b = {0};
    for (unsigned S = 1; S < all; S++) {
        unsigned C = all & ~S;
        double in = cap_in[S], out = cap_in[C];   /* out of S = into its complement */
        int s = popcount(S);
        bool root_in = S & 1;
        switch (kind) {
        case CS_COLL_ALLGATHER:
            bf_offer(&b, (P - s) / in, bf_alpha_into(t, S));
            break;
        case CS_COLL_REDUCESCATTER:
            bf_offer(&b, (P - s) / out, bf_alpha_into(t, C));
            break;
        case CS_COLL_BROADCAST:
            if (!root_in)
                bf_offer(&b, 1 / in, bf_alpha_into(t, S));
            break;
        case CS_COLL_REDUCE:
            if (!root_in)
                bf_offer(&b, 1 / out, bf_alpha_into(t, C));
            break;
        case CS_COLL_SCATTER:
            if (!root_in)
                bf_offer(&b, s / in, bf_alpha_into(t, S));
            break;
        case CS_COLL_GATHER:
            if (!root_in)
                bf_offer(&b, s / out, bf_alpha_into(t, C));
            break;
        case CS_COLL_ALLREDUCE:
            bf_offer(&b, 1 / in, bf_alpha_into(t, S));
            break;
        case CS_COLL_ALLTOALL:
            bf_offer(&b, (double)s * (P - s) / in, bf_alpha_into(t, S));
            break;
        default:
            break;
        }
    }
    return b;
}

/* Allreduce's gossip over a partition (part[r]), with exact part cuts. */
static double bf_gossip(const cs_topology *t, const double *cap_in, const int *part, int k)
{
    unsigned all = (1u << t->ranks) - 1;
    double in = 0, out = 0;
    for (int g = 0; g < k; g++) {
        unsigned S = 0;
        for (int r = 0; r < t->ranks; r++)
            if (part[r] == g)
                S |= 1u << r;
        in += cap_in[S];
        out += cap_in[all & ~S];
    }
    return 2.0 * (k - 1) / fmin(in, out);
}

static double bf_alltoall_distance(const cs_topology *t)
{
    int P = t->ranks, hops[16][16];
    for (int i = 0; i < P; i++)
        for (int j = 0; j < P; j++)
            hops[i][j] = i == j ? 0 : 1000;
    for (int l = 0; l < t->nlinks; l++)
        hops[t->links[l].src][t->links[l].dst] = 1;
    for (int k = 0; k < P; k++)
        for (int i = 0; i < P; i++)
            for (int j = 0; j < P; j++)
                if (hops[i][k] + hops[k][j] < hops[i][j])
                    hops[i][j] = hops[i][k] + hops[k][j];
    /* total egress: every edge of the network leaving a rank */
    bf_net n;
    bf_build(t, &n);
    double out = 0, in = 0, sum = 0;
    for (int e = 0; e < n.nedges; e++) {
        out += n.u[e] < P ? n.c[e] : 0;
        in += n.v[e] < P ? n.c[e] : 0;
    }
    for (int i = 0; i < P; i++)
        for (int j = 0; j < P; j++)
            sum += hops[i][j];
    return sum / fmin(out, in);
}

static cs_time_bound bound_of(const cs_topology *t, cs_coll_kind kind, int root)
{
    cs_collective c;
    collective_init(&c, kind, collective_kind_is_rooted(kind) ? root : -1);
    cs_time_bound b;
    cs_error err = {0};
    ck_assert_msg(collective_time_bound(t, &c, &b, &err) == CS_OK, "%s: %s",
                  collective_kind_name(kind), err.message);
    return b;
}

static bool close_to(double a, double b) { return fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b)); }

/* The rooted lines against brute force: at L = 4^q the bound is the larger of
 * the bound without lines and max over S (root 0 not in S) of
 * d(S) + k L / cap(S), d(S) the alpha-distance from the root to S's nearest
 * rank (to the root from S's nearest, reduce and gather), k = 1 (broadcast,
 * reduce; found exactly) or |S| (scatter, gather; never above it). */
static void check_rooted_lines(const cs_topology *t, cs_coll_kind kind, const cs_time_bound *b,
                               const double *cap_in, double d[16][16], bool switch_pair_linked,
                               int round)
{
    int P = t->ranks;
    unsigned all = (1u << P) - 1;
    bool into = kind == CS_COLL_BROADCAST || kind == CS_COLL_SCATTER;
    bool per_rank = kind == CS_COLL_SCATTER || kind == CS_COLL_GATHER;
    for (int q = 0; q <= 15; q += 5) {
        double L = pow(4, q), want = 0;
        for (unsigned S = 2; S <= all; S += 2) {   /* bit 0 (the root) clear */
            double cap = into ? cap_in[S] : cap_in[all & ~S];
            double dS = INFINITY;
            for (int v = 0; v < P; v++)
                if ((S >> v) & 1)
                    dS = fmin(dS, into ? d[0][v] : d[v][0]);
            if (cap > 0 && isfinite(cap) && isfinite(dS))
                want = fmax(want, dS + (per_rank ? popcount(S) : 1) * L / cap);
        }
        double old = fmax(b->latency_us + b->bandwidth_us_per_byte * L, b->path_latency_us);
        double got = time_bound_us(b, L, 1);
        const char *name = collective_kind_name(kind);
        ck_assert_msg(got >= old, "round %d %s: lines lowered the bound", round, name);
        ck_assert_msg(got <= fmax(old, want) * (1 + 1e-9),
                      "round %d %s at L %g: %.9g above the brute-force %.9g", round, name, L, got,
                      fmax(old, want));
        if (!per_rank && !switch_pair_linked)
            ck_assert_msg(close_to(got, fmax(old, want)),
                          "round %d %s on %d ranks at L %g: %.12g, brute force %.12g", round,
                          name, P, L, got, fmax(old, want));
    }
}

START_TEST(random_topologies_match_brute_force)
{
    rng r = {0x5eed + (uint64_t)_i};
    static const cs_coll_kind kinds[] = {
        CS_COLL_ALLGATHER, CS_COLL_REDUCESCATTER, CS_COLL_BROADCAST, CS_COLL_REDUCE,
        CS_COLL_SCATTER,   CS_COLL_GATHER,        CS_COLL_ALLREDUCE, CS_COLL_ALLTOALL,
    };
    for (int round = 0; round < 6; round++) {
        int P = 2 + pick(&r, 9);
        cs_topology *t = random_topology(&r, P, pick(&r, 3) > 0, pick(&r, 2) > 0);
        bf_net n;
        bf_build(t, &n);
        static double cap_in[1 << 10];
        bf_caps(&n, P, cap_in);
        double d[16][16];
        bf_distances(t, d);
        bool switch_pair_linked = false;   /* a physical link beside a switch path */
        for (int s = 0; s < t->nswitches; s++)
            for (int i = 0; i < t->switches[s].nranks; i++)
                for (int j = 0; j < t->switches[s].nranks; j++)
                    if (i != j) {
                        int l = topology_find_link(t, t->switches[s].ranks[i],
                                                   t->switches[s].ranks[j]);
                        switch_pair_linked |= l >= 0 && t->links[l].switch_id < 0;
                    }
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
            cs_time_bound b = bound_of(t, kinds[k], 0);
            bf_best want = bf_bound(t, kinds[k], cap_in);
            const char *name = collective_kind_name(kinds[k]);
            if (kinds[k] == CS_COLL_ALLREDUCE) {
                int single[16];
                for (int v = 0; v < P; v++)
                    single[v] = v;
                double most = fmax(want.B, bf_gossip(t, cap_in, single, P));
                if (t->ngroups > 0)
                    most = fmax(most, bf_gossip(t, cap_in, t->group_of, t->ngroups));
                /* the smallest cut is searched exhaustively; the gossip uses
                 * part capacities that may exceed the exact ones */
                ck_assert_msg(b.bandwidth_us_per_byte >= want.B * (1 - 1e-9) &&
                                  b.bandwidth_us_per_byte <= most * (1 + 1e-9),
                              "round %d %s: B %.9g outside [%.9g, %.9g] (%s)", round, name,
                              b.bandwidth_us_per_byte, want.B, most, b.cut);
            } else if (kinds[k] == CS_COLL_ALLTOALL) {
                double most = fmax(want.B, bf_alltoall_distance(t));
                ck_assert_msg(b.bandwidth_us_per_byte <= most * (1 + 1e-9),
                              "round %d %s: B %.9g above %.9g (%s)", round, name,
                              b.bandwidth_us_per_byte, most, b.cut);
            } else {
                ck_assert_msg(b.exact, "round %d %s: %d ranks should be searched exactly", round,
                              name, P);
                ck_assert_msg(close_to(b.bandwidth_us_per_byte, want.B),
                              "round %d %s on %d ranks: B %.12g, brute force %.12g (%s)", round,
                              name, P, b.bandwidth_us_per_byte, want.B, b.cut);
                bool alpha_ok = false;
                for (int i = 0; i < want.nalphas; i++)
                    alpha_ok |= close_to(b.latency_us, want.alphas[i]);
                ck_assert_msg(alpha_ok, "round %d %s: latency %.9g is no maximizing cut's alpha",
                              round, name, b.latency_us);
            }
            /* path latency: the farthest pair the collective must connect */
            double dmax = 0;
            for (int i = 0; i < P; i++)
                for (int j = 0; j < P; j++) {
                    bool need = kinds[k] == CS_COLL_BROADCAST || kinds[k] == CS_COLL_SCATTER
                                    ? i == 0
                                : kinds[k] == CS_COLL_REDUCE || kinds[k] == CS_COLL_GATHER
                                    ? j == 0
                                    : true;
                    if (need)
                        dmax = fmax(dmax, d[i][j]);
                }
            if (switch_pair_linked)
                ck_assert(b.path_latency_us <= dmax * (1 + 1e-12));
            else
                ck_assert_msg(close_to(b.path_latency_us, dmax), "round %d %s: D %.9g, want %.9g",
                              round, name, b.path_latency_us, dmax);
            if (collective_kind_is_rooted(kinds[k]))
                check_rooted_lines(t, kinds[k], &b, cap_in, d, switch_pair_linked, round);
        }
        topology_free(t);
    }
}
END_TEST

/* ---- validity: no schedule beats the bound ----------------------------------------------- */

static const double sizes[] = {1024.0, 1048576.0, 268435456.0};

/* Verifies a on t (or, for TACOS on switches, on the topology it was made
 * for), then simulates it on t at each size against the bound. */
static void check_schedule(const cs_topology *t, const cs_algorithm *a, const cs_time_bound *b,
                           const char *what)
{
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        cs_sim_result sr;
        cs_error err = {0};
        ck_assert_msg(simulate_algorithm(t, a, sizes[k], &sr, &err) == CS_OK, "%s: %s", what,
                      err.message);
        double bound = time_bound_us(b, sizes[k], a->chunks);
        ck_assert_msg(sr.time_us >= bound * (1 - 1e-9),
                      "%s on %s at %.0f bytes: simulated %.6f us beats the bound %.6f us "
                      "(A %.6g, B %.6g, D %.6g; %s; %s)",
                      what, t->name, sizes[k], sr.time_us, bound, b->latency_us,
                      b->bandwidth_us_per_byte, b->path_latency_us, b->cut, b->path);
        sim_result_free(&sr);
    }
}

static int run_every_method(const cs_topology *t, const cs_collective *c, bool smt)
{
    cs_time_bound b;
    cs_error err = {0};
    ck_assert_msg(collective_time_bound(t, c, &b, &err) == CS_OK, "%s", err.message);
    int checked = 0;
    int nb = 0;
    const cs_baseline_info *bl = baseline_list(&nb);
    for (int i = 0; i < nb; i++) {
        if (!baseline_supports(bl[i].name, c->kind))
            continue;
        for (int chunks = 0; chunks <= 2; chunks += 2) {
            cs_baseline_options o = {chunks};
            cs_algorithm *a = NULL;
            if (baseline_generate(bl[i].name, t, c, &o, &a, &err) != CS_OK)
                continue;   /* not every baseline fits every topology */
            ck_assert_int_eq(algorithm_verify(t, a, &err), CS_OK);
            char what[96];
            snprintf(what, sizeof what, "baseline %s (%s, %d chunks)", bl[i].name,
                     collective_kind_name(c->kind), a->chunks);
            check_schedule(t, a, &b, what);
            algorithm_free(a);
            checked++;
        }
    }
    for (int chunks = 1; chunks <= 2; chunks++) {
        cs_tacos_options o;
        tacos_options_default(&o);
        o.chunks = chunks;
        o.trials = 2;
        o.threads = 1;
        cs_result *res = NULL;
        if (tacos_synthesize(t, c, &o, &res, &err) != CS_OK)
            continue;
        for (int i = 0; i < res->nalgs; i++) {
            char what[64];
            snprintf(what, sizeof what, "tacos (%s, %d chunks)", collective_kind_name(c->kind),
                     chunks);
            check_schedule(t, res->algs[i], &b, what);
            checked++;
        }
        result_free(res);
    }
    if (smt) {
        cs_smt_options o;
        smt_options_default(&o);
        o.max_chunks = 2;
        o.total_time_limit_s = 20;
        o.threads = 1;
        cs_result *res = NULL;
        if (smt_search(t, c, &o, &res, &err) == CS_OK) {
            for (int i = 0; i < res->nalgs; i++) {
                ck_assert_int_eq(algorithm_verify(t, res->algs[i], &err), CS_OK);
                char what[64];
                snprintf(what, sizeof what, "smt (%s, frontier %d)",
                         collective_kind_name(c->kind), i);
                check_schedule(t, res->algs[i], &b, what);
                checked++;
            }
        }
        result_free(res);
    }
    return checked;
}

static const char *const valid_topologies[] = {
    "ring:8",       "line:5",        "star:6",         "fc:5",          "mesh2d:3x3",
    "torus2d:4x4",  "hypercube:3",   "dgx1",           "dgx2",          "ndv2:2",
    "dgxa100:2",    "dgxh100:2",     "dragonfly:3x4",  "switch2d:4x3",  "rfs3d:2x2x3",
    "amd8",         "amd8fc",
};

START_TEST(no_schedule_beats_the_bound)
{
    cs_topology *t = test_topology(valid_topologies[_i]);
    static const cs_coll_kind kinds[] = {
        CS_COLL_ALLGATHER, CS_COLL_REDUCESCATTER, CS_COLL_ALLREDUCE, CS_COLL_BROADCAST,
        CS_COLL_REDUCE,    CS_COLL_GATHER,        CS_COLL_SCATTER,   CS_COLL_ALLTOALL,
    };
    int checked = 0;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        for (int root = 0; root < (collective_kind_is_rooted(kinds[k]) ? 2 : 1); root++) {
            cs_collective c;
            collective_init(&c, kinds[k], collective_kind_is_rooted(kinds[k]) ? root * (t->ranks - 1) : -1);
            bool smt = t->ranks <= 8 && kinds[k] != CS_COLL_ALLTOALL;
            checked += run_every_method(t, &c, smt);
        }
    }
    ck_assert_int_gt(checked, 10);
    topology_free(t);
}
END_TEST

/* Random topologies too, with TACOS and the baselines. */
START_TEST(no_schedule_beats_the_bound_on_random_topologies)
{
    rng r = {0xbeef + (uint64_t)_i};
    for (int round = 0; round < 4; round++) {
        cs_topology *t = random_topology(&r, 3 + pick(&r, 6), pick(&r, 2) > 0, pick(&r, 2) > 0);
        static const cs_coll_kind kinds[] = {CS_COLL_ALLGATHER, CS_COLL_ALLREDUCE,
                                             CS_COLL_BROADCAST, CS_COLL_ALLTOALL,
                                             CS_COLL_REDUCESCATTER};
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
            cs_collective c;
            collective_init(&c, kinds[k], collective_kind_is_rooted(kinds[k]) ? 0 : -1);
            run_every_method(t, &c, false);
        }
        topology_free(t);
    }
}
END_TEST

/* ---- figures derived by hand ----------------------------------------------------------- */

static void expect_B(const char *spec, cs_coll_kind kind, int root, double want, double want_a,
                     const char *kind_name)
{
    cs_topology *t = test_topology(spec);
    cs_time_bound b = bound_of(t, kind, root);
    ck_assert_msg(close_to(b.bandwidth_us_per_byte, want),
                  "%s %s: B %.12g us/byte, want %.12g (%s)", spec, collective_kind_name(kind),
                  b.bandwidth_us_per_byte, want, b.cut);
    ck_assert_msg(close_to(b.latency_us, want_a), "%s %s: A %.9g, want %.9g", spec,
                  collective_kind_name(kind), b.latency_us, want_a);
    ck_assert_str_eq(b.kind, kind_name);
    ck_assert(strlen(b.cut) > 0);
    topology_free(t);
}

START_TEST(machine_models_and_large_topologies)
{
    /* DGX-1: a GPU receives 7 L over its 6 NVLinks of 25 GB/s: 7 / 150e3 us per byte */
    expect_B("dgx1", CS_COLL_ALLGATHER, -1, 7 / 150e3, 0.7, "forestcoll");
    /* allreduce: gossip among 8 ranks, 14 L over 8 x 150 GB/s = RS + AG, 2 x 7/8 / 150e3 */
    expect_B("dgx1", CS_COLL_ALLREDUCE, -1, 14 / 1200e3, 0.7, "gossip");
    /* alltoall: the two halves exchange 16 L over 6 lanes of 25 GB/s */
    expect_B("dgx1", CS_COLL_ALLTOALL, -1, 16 / 150e3, 0.7, "cut");
    /* dgx2: 15 L through one 150 GB/s NVSwitch port */
    expect_B("dgx2", CS_COLL_ALLGATHER, -1, 15 / 150e3, 0.7, "forestcoll");
    /* dgxh100:16: a node receives 120 L through its 8 NICs of 50 GB/s (2 us) */
    expect_B("dgxh100:16", CS_COLL_ALLGATHER, -1, 120 / 400e3, 2.0, "forestcoll");
    expect_B("dgxh100:16", CS_COLL_REDUCESCATTER, -1, 120 / 400e3, 2.0, "forestcoll");
    /* allreduce: gossip among 16 nodes, 30 L over 16 x 400 GB/s: 2 (N-1)/N L / 400 GB/s */
    expect_B("dgxh100:16", CS_COLL_ALLREDUCE, -1, 30 / 6400e3, 2.0, "gossip");
    /* broadcast: another node receives L over 8 NICs */
    expect_B("dgxh100:16", CS_COLL_BROADCAST, 0, 1 / 400e3, 2.0, "cut");
    /* 1024 ranks, found on the node quotient: 1016 L into a node over 400 GB/s */
    expect_B("dgxh100:128", CS_COLL_ALLGATHER, -1, 1016 / 400e3, 2.0, "forestcoll");
    expect_B("dgxa100:128", CS_COLL_ALLGATHER, -1, 1016 / 200e3, 2.0, "forestcoll");
    /* 10,000-rank mesh: a corner receives 9999 L over 2 links of 50 GB/s */
    expect_B("mesh2d:100x100", CS_COLL_ALLGATHER, -1, 9999 / 100e3, 0.5, "forestcoll");
    /* ring:8 alltoall: half the ring receives 16 L over 2 links */
    expect_B("ring:8", CS_COLL_ALLTOALL, -1, 16 / 100e3, 0.5, "cut");
    /* ndv2:2: a server receives 8 L through 2 switch ports of 12.5 GB/s (1 us) */
    expect_B("ndv2:2", CS_COLL_ALLGATHER, -1, 8 / 25e3, 1.0, "forestcoll");
    /* scatter from 0 on star:5: every leaf gets L over its own 50 GB/s link;
     * the root sends 4 L over 4 links, and the set of all leaves is the cut */
    expect_B("star:5", CS_COLL_SCATTER, 0, 4 / 200e3, 0.5, "cut");
}
END_TEST

START_TEST(path_latency_and_evaluation)
{
    /* dgxh100:2: GPU 0 to GPU 9 goes NVSwitch (0.7) then rail 1 (2.0) */
    cs_topology *t = test_topology("dgxh100:2");
    cs_time_bound b = bound_of(t, CS_COLL_ALLGATHER, -1);
    ck_assert(close_to(b.path_latency_us, 2.7));
    ck_assert(strstr(b.path, "2.7") != NULL);
    /* at small sizes the path wins, at large ones the cut */
    ck_assert(close_to(time_bound_us(&b, 0, 1), 2.7));
    ck_assert(close_to(time_bound_us(&b, 1e9, 1), b.latency_us + 1e9 * b.bandwidth_us_per_byte));
    /* broadcast from 3: farthest is another rail in the other node */
    b = bound_of(t, CS_COLL_BROADCAST, 3);
    ck_assert(close_to(b.path_latency_us, 2.7));
    /* reduce to 3: paths into the root */
    b = bound_of(t, CS_COLL_REDUCE, 3);
    ck_assert(close_to(b.path_latency_us, 2.7));
    topology_free(t);
    /* line:5: 4 hops of 0.5 us */
    t = test_topology("line:5");
    b = bound_of(t, CS_COLL_ALLREDUCE, -1);
    ck_assert(close_to(b.path_latency_us, 2.0));
    b = bound_of(t, CS_COLL_GATHER, 2);
    ck_assert(close_to(b.path_latency_us, 1.0));
    topology_free(t);
}
END_TEST

START_TEST(custom_offer_json_and_errors)
{
    cs_topology *t = test_topology("ring:4");
    /* custom: chunk 0 from rank 0 to 1 and 2; chunk 1 from 3 to 1: rank 1 lacks
     * 2 chunks over 2 links of 50 GB/s: 2 / 100e3 per chunk byte */
    cs_collective c;
    cs_error err = {0};
    json_t *doc = json_loads("{\"kind\": \"custom\", \"global_chunks\": 2, \"pre\": [[0, 0], "
                             "[1, 3]], \"post\": [[0, 1], [0, 2], [1, 1]]}",
                             0, NULL);
    ck_assert_int_eq(collective_from_json(doc, &c, &err), CS_OK);
    json_decref(doc);
    cs_time_bound b;
    ck_assert_int_eq(collective_time_bound(t, &c, &b, &err), CS_EINVAL);   /* not validated */
    ck_assert_int_eq(collective_validate(&c, 4, &err), CS_OK);
    ck_assert_int_eq(collective_time_bound(t, &c, &b, &err), CS_OK);
    ck_assert(b.per_chunk);
    ck_assert(close_to(b.bandwidth_us_per_byte, 2 / 100e3));
    /* 0 -> 2 takes 2 hops */
    ck_assert(close_to(b.path_latency_us, 1.0));
    /* per chunk: L = bytes / chunks */
    ck_assert(close_to(time_bound_us(&b, 4e6, 4), 0.5 + 1e6 * 2 / 100e3));
    collective_free(&c);

    /* JSON round trip */
    b = bound_of(t, CS_COLL_ALLGATHER, -1);
    json_t *j = time_bound_to_json(&b);
    ck_assert_ptr_nonnull(json_object_get(j, "latency_us"));
    ck_assert_ptr_nonnull(json_object_get(j, "bandwidth_us_per_byte"));
    ck_assert_str_eq(json_string_value(json_object_get(j, "kind")), "forestcoll");
    cs_time_bound back;
    ck_assert_int_eq(time_bound_from_json(j, &back, &err), CS_OK);
    ck_assert(close_to(back.bandwidth_us_per_byte, b.bandwidth_us_per_byte));
    ck_assert(close_to(back.path_latency_us, b.path_latency_us));
    ck_assert_str_eq(back.cut, b.cut);
    ck_assert(back.exact == b.exact);
    json_object_set_new(j, "latency_us", json_string("x"));
    ck_assert_int_eq(time_bound_from_json(j, &back, &err), CS_EINVAL);
    ck_assert_str_eq(err.field, "latency_us");
    json_decref(j);

    /* another bound joins when it is larger */
    cs_time_bound o = b;
    time_bound_offer(&o, 1.0, b.bandwidth_us_per_byte / 2, "mcf-lp", true, "smaller");
    ck_assert_str_eq(o.kind, "forestcoll");
    time_bound_offer(&o, 1.0, b.bandwidth_us_per_byte * 2, "mcf-lp", true, "the LP");
    ck_assert_str_eq(o.kind, "mcf-lp");
    ck_assert_str_eq(o.cut, "the LP");

    /* errors */
    cs_collective bc;
    collective_init(&bc, CS_COLL_BROADCAST, 9);
    ck_assert_int_eq(collective_time_bound(t, &bc, &b, &err), CS_EINVAL);
    ck_assert_str_eq(err.field, "collective.root");
    topology_free(t);
    /* one rank: nothing to move */
    t = topology_new("one", 1);
    ck_assert_int_eq(topology_finalize(t, &err), CS_OK);
    b = bound_of(t, CS_COLL_ALLREDUCE, -1);
    ck_assert(time_bound_us(&b, 1e9, 1) == 0);
    topology_free(t);
}
END_TEST

/* Why the path and the cut are not added: root 0 has a 2-lane 1 GB/s link to
 * rank 1 and a 10-hop chain of fast links (1 us alpha each) to rank 11.  A
 * broadcast of L = 20,000 bytes in 2 chunks sends both halves to rank 1 at
 * once (1 + 10,000 / 1e3 = 11 us) while the chunks run down the chain (11
 * hops of the second chunk: 11 us): 11 us in all, below the 10 us path plus
 * the 10 us cut, and equal to the larger of the cut (11) and the path (10). */
START_TEST(path_and_cut_are_not_added)
{
    cs_topology *t = topology_new("chain", 12);
    cs_error err = {0};
    ck_assert_int_eq(topology_add_link(t, 0, 1, 2, 1.0, 1.0, true, &err), CS_OK);
    int chain[11] = {0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    for (int i = 0; i + 1 < 11; i++)
        ck_assert_int_eq(topology_add_link(t, chain[i], chain[i + 1], 1, 1e6, 1.0, true, &err),
                         CS_OK);
    ck_assert_int_eq(topology_finalize(t, &err), CS_OK);
    cs_collective c;
    collective_init(&c, CS_COLL_BROADCAST, 0);
    cs_algorithm *a = NULL;
    ck_assert_int_eq(algorithm_new(&c, "chain", 12, 2, 11, &a, &err), CS_OK);
    ck_assert_int_eq(algorithm_add_send(a, 0, 0, 1, 0, CS_OP_COPY), CS_OK);
    ck_assert_int_eq(algorithm_add_send(a, 1, 0, 1, 0, CS_OP_COPY), CS_OK);
    for (int ch = 0; ch < 2; ch++)
        for (int h = 0; h + 1 < 11; h++)
            ck_assert_int_eq(algorithm_add_send(a, ch, chain[h], chain[h + 1], h + ch, CS_OP_COPY),
                             CS_OK);
    ck_assert_msg(algorithm_verify(t, a, &err) == CS_OK, "%s", err.message);
    cs_time_bound b = bound_of(t, CS_COLL_BROADCAST, 0);
    /* the cut: rank 1 receives L over 2 lanes of 1 GB/s after one 1 us alpha */
    ck_assert(close_to(b.bandwidth_us_per_byte, 1 / 2e3));
    ck_assert(close_to(b.latency_us, 1.0));
    ck_assert(close_to(b.path_latency_us, 10.0));
    cs_sim_result sr;
    ck_assert_int_eq(simulate_algorithm(t, a, 20000, &sr, &err), CS_OK);
    ck_assert(fabs(sr.time_us - 11.0) < 1e-3);   /* 11 hops of 1 us + 10 ns */
    ck_assert(sr.time_us >= time_bound_us(&b, 20000, 2));
    ck_assert(close_to(time_bound_us(&b, 20000, 2), 11.0));
    ck_assert(sr.time_us < b.path_latency_us + b.bandwidth_us_per_byte * 20000);
    sim_result_free(&sr);
    algorithm_free(a);
    topology_free(t);
}
END_TEST

/* ---- rooted collectives: latency to the cut plus the cut ---------------------------------- */

/* The Slurm hook's DGX-1 nodes (NICs on local ranks 0/2/4/6) on a ring or a
 * switch fabric of 12.5 GB/s (alpha 3 us). */
static cs_topology *hook_cluster(int nodes, const char *fabric)
{
    json_t *expanded = NULL;
    char msg[256];
    json_t *topo = cluster_hook_dgx1("hook", nodes, 1, fabric, 12.5, &expanded, msg, sizeof msg);
    ck_assert_msg(topo != NULL, "cluster: %s", msg);
    cs_topology *t = NULL;
    cs_error err = {0};
    cs_topology_parse_options po = {0};
    ck_assert_msg(topology_from_json(expanded, &po, &t, &err) == CS_OK, "%s", err.message);
    json_decref(topo);
    json_decref(expanded);
    return t;
}

static const double rooted_sizes[] = {1024.0, 1048576.0, 268435456.0, 1073741824.0};

static int check_rooted(const cs_topology *t, const cs_algorithm *a, const cs_time_bound *b,
                        const char *what)
{
    cs_error err = {0};
    ck_assert_msg(algorithm_verify(t, a, &err) == CS_OK, "%s: %s", what, err.message);
    for (size_t k = 0; k < sizeof rooted_sizes / sizeof rooted_sizes[0]; k++) {
        cs_sim_result sr;
        ck_assert_msg(simulate_algorithm(t, a, rooted_sizes[k], &sr, &err) == CS_OK, "%s: %s",
                      what, err.message);
        double bound = time_bound_us(b, rooted_sizes[k], a->chunks);
        ck_assert_msg(sr.time_us >= bound * (1 - 1e-9),
                      "%s on %s at %.0f bytes: simulated %.6f us beats the bound %.6f us "
                      "(A %.6g, B %.6g, D %.6g, %d lines, first %s)",
                      what, t->name, rooted_sizes[k], sr.time_us, bound, b->latency_us,
                      b->bandwidth_us_per_byte, b->path_latency_us, b->nlines,
                      b->nlines ? b->lines[0].cut : "-");
        sim_result_free(&sr);
    }
    return 1;
}

/* Every method's schedules (baselines, TACOS, hierarchical where it applies,
 * mcf for the copy kinds) on rings, ring and switch clusters, dgx1 and a
 * torus, broadcast / reduce / scatter / gather from three roots, at 1 KiB ..
 * 1 GiB: none simulates below the bound with its additive lines. */
START_TEST(rooted_lines_hold_for_every_method)
{
    cs_topology *t = _i == 0 ? test_topology("ring:8")
                   : _i == 1 ? hook_cluster(2, "ring")
                   : _i == 2 ? hook_cluster(2, "switch")
                   : _i == 3 ? test_topology("dgx1")
                   : _i == 4 ? test_topology("torus2d:4x4")
                             : hook_cluster(4, "ring");
    static const cs_coll_kind kinds[] = {CS_COLL_BROADCAST, CS_COLL_REDUCE, CS_COLL_SCATTER,
                                         CS_COLL_GATHER};
    int roots[3] = {0, t->ranks / 2 + 1, t->ranks - 1}, checked = 0, lines = 0;
    cs_error err = {0};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (int ri = 0; ri < 3; ri++) {
            cs_collective c;
            collective_init(&c, kinds[k], roots[ri]);
            const char *kn = collective_kind_name(kinds[k]);
            cs_time_bound b;
            ck_assert_int_eq(collective_time_bound(t, &c, &b, &err), CS_OK);
            lines += b.nlines > 0;
            char what[128];
            int nb = 0;
            const cs_baseline_info *bl = baseline_list(&nb);
            for (int i = 0; i < nb; i++) {
                if (!baseline_supports(bl[i].name, c.kind))
                    continue;
                for (int chunks = 0; chunks <= 4; chunks += 4) {
                    cs_baseline_options o = {chunks};
                    cs_algorithm *a = NULL;
                    if (baseline_generate(bl[i].name, t, &c, &o, &a, &err) != CS_OK)
                        continue;
                    snprintf(what, sizeof what, "baseline %s %s root %d (%d chunks)", bl[i].name,
                             kn, c.root, a->chunks);
                    checked += check_rooted(t, a, &b, what);
                    algorithm_free(a);
                }
            }
            cs_tacos_options to;
            tacos_options_default(&to);
            to.chunks = 2;
            to.trials = 1;
            to.threads = 1;
            cs_result *res = NULL;
            if (tacos_synthesize(t, &c, &to, &res, &err) == CS_OK)
                for (int i = 0; i < res->nalgs; i++) {
                    snprintf(what, sizeof what, "tacos %s root %d", kn, c.root);
                    checked += check_rooted(t, res->algs[i], &b, what);
                }
            result_free(res);
            res = NULL;
            if (hier_applicable(t, &c, &err) == CS_OK) {
                cs_hier_options ho;
                hier_options_default(&ho);
                ho.threads = 1;
                ck_assert_msg(hier_synthesize(t, &c, &ho, &res, &err) == CS_OK, "%s", err.message);
                for (int i = 0; i < res->nalgs; i++) {
                    snprintf(what, sizeof what, "hierarchical %s root %d [%d]", kn, c.root, i);
                    checked += check_rooted(t, res->algs[i], &b, what);
                }
                result_free(res);
                res = NULL;
            }
            if (c.kind != CS_COLL_REDUCE && t->ranks <= 16) {
                cs_mcf_options mo;
                mcf_options_default(&mo);
                mo.chunks = 2;
                mo.time_limit_s = 10;
                mo.bytes = 1048576;
                if (mcf_synthesize(t, &c, &mo, &res, &err) == CS_OK)
                    for (int i = 0; i < res->nalgs; i++) {
                        snprintf(what, sizeof what, "mcf %s root %d", kn, c.root);
                        checked += check_rooted(t, res->algs[i], &b, what);
                    }
                result_free(res);
                res = NULL;
            }
        }
    ck_assert_int_gt(checked, 24);
    ck_assert_int_gt(lines, 0);
    topology_free(t);
}
END_TEST

/* The ring cluster example (8 hook DGX-1 nodes on a 12.5 GB/s ring, root 0,
 * 1 MiB): node 4 is 4 ring hops of 3 us away and takes the buffer in over
 * its 8 ring links (4 NICs x 2 ways x 12.5 GB/s = 100 GB/s), so no schedule
 * ends before 12 + 1048576 / 100e3 = 22.49 us; without the lines the bound
 * was the larger of the path and the cut (13.5 us).  Reduce mirrors it. */
START_TEST(rooted_lines_raise_the_ring_cluster_bound)
{
    cs_topology *t = hook_cluster(8, "ring");
    for (int k = 0; k < 2; k++) {
        cs_collective c;
        collective_init(&c, k ? CS_COLL_REDUCE : CS_COLL_BROADCAST, 0);
        cs_time_bound b;
        cs_error err = {0};
        ck_assert_int_eq(collective_time_bound(t, &c, &b, &err), CS_OK);
        double L = 1048576;
        double old = fmax(b.latency_us + b.bandwidth_us_per_byte * L, b.path_latency_us);
        double now = time_bound_us(&b, L, 1);
        ck_assert_msg(now >= 12 + L / 100e3 - 1e-9, "%s: %.4f us, want >= %.4f",
                      collective_kind_name(c.kind), now, 12 + L / 100e3);
        ck_assert_msg(now > old + 8, "%s: %.4f us, old %.4f us", collective_kind_name(c.kind),
                      now, old);
        /* JSON carries the lines, and a client reading it gets the same bound */
        json_t *j = time_bound_to_json(&b);
        ck_assert(json_array_size(json_object_get(j, "lines")) == (size_t)b.nlines);
        cs_time_bound back;
        ck_assert_int_eq(time_bound_from_json(j, &back, &err), CS_OK);
        ck_assert(close_to(time_bound_us(&back, L, 1), now));
        json_decref(j);
    }
    topology_free(t);
}
END_TEST

static Suite *time_bound_suite(void)
{
    Suite *s = suite_create("time_bound");
    TCase *tc = tcase_create("brute_force");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, random_topologies_match_brute_force, 0, 8);
    suite_add_tcase(s, tc);
    tc = tcase_create("figures");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, machine_models_and_large_topologies);
    tcase_add_test(tc, path_latency_and_evaluation);
    tcase_add_test(tc, custom_offer_json_and_errors);
    tcase_add_test(tc, path_and_cut_are_not_added);
    suite_add_tcase(s, tc);
    tc = tcase_create("validity");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, no_schedule_beats_the_bound, 0,
                        (int)(sizeof valid_topologies / sizeof valid_topologies[0]));
    tcase_add_loop_test(tc, no_schedule_beats_the_bound_on_random_topologies, 0, 4);
    suite_add_tcase(s, tc);
    tc = tcase_create("rooted");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, rooted_lines_hold_for_every_method, 0, 6);
    tcase_add_test(tc, rooted_lines_raise_the_ring_cluster_bound);
    suite_add_tcase(s, tc);
    return s;
}

CS_CHECK_MAIN(time_bound_suite)
