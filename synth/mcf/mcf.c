/*
 * mcf.c - the mcf method (mcf.h): the time-expanded model, the horizon
 * search, the solves, and the solution turned into a verified algorithm.
 *
 * Columns are created only where they can matter: a commodity's flow on link
 * n->m at epoch k exists when the commodity can be at n by k (kappa-weighted
 * distance from a source) and can still reach a rank that needs it by K.
 * That prunes most of the time-expanded graph for latency-bound instances.
 */
#include "mcf.h"
#include "mcf_internal.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bliss/bliss_C.h>

#include "bounds.h"
#include "collective.h"
#include "verify.h"

#define FAR (INT_MAX / 4)
/* Pairwise models with more columns than this are rounded from the LP
 * instead of solved as a MILP (CBC's root LP alone would take minutes):
 * the default of options.milp_max_columns. */
#define MCF_MILP_MAX_COLUMNS 40000
/* Copy demands with a greedy schedule in hand and no time limit from the
 * caller: the seconds given to proving or improving it. */
#define MCF_IMPROVE_BUDGET_S 30.0
/* Seeded greedy runs tried on copy demands before the MILP. */
#define MCF_GREEDY_TRIES 16
/* The least time the best-of-chunkings search gives a chunking when the
 * time limit is shared, so every chunking is at least started (the search
 * may then overrun a limit below this times the chunkings). */
#define MCF_MIN_SHARE_S 0.25

void mcf_options_default(cs_mcf_options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->chunks = 1;
    opt->epochs = 0;
    opt->max_epochs = 256;
    opt->bytes = 64.0 * 1024 * 1024;
    opt->epoch_split = 1;
    opt->gap = 0.0;
    opt->max_columns = 4000000;
    opt->milp_max_columns = MCF_MILP_MAX_COLUMNS;
    opt->max_chunks = 0;
    opt->min_chunks = 1;
}

int mcf_options_validate(const cs_mcf_options *o, const cs_topology *t, const cs_collective *c,
                         cs_error *err)
{
    if (o->chunks < 1 || o->chunks > 4096)
        return cs_error_set(err, CS_EINVAL, "options.chunks", "chunks must be in 1..4096, got %d",
                            o->chunks);
    if (o->max_chunks < 0 || o->max_chunks > 4096)
        return cs_error_set(err, CS_EINVAL, "options.max_chunks",
                            "max_chunks must be in 0..4096 (0: only chunks), got %d",
                            o->max_chunks);
    if (o->min_chunks < 0 || o->min_chunks > 4096)
        return cs_error_set(err, CS_EINVAL, "options.min_chunks",
                            "min_chunks must be in 0..4096 (0 or 1: from one chunk), got %d",
                            o->min_chunks);
    if (o->astar < -1 || o->astar > 1)
        return cs_error_set(err, CS_EINVAL, "options.astar",
                            "astar must be -1 (never), 0 (by model size) or 1 (always), got %d",
                            o->astar);
    if (o->zero_buffer < 0 || o->zero_buffer > 1)
        return cs_error_set(err, CS_EINVAL, "options.zero_buffer",
                            "zero_buffer must be 0 (store-and-forward switch nodes) or 1 "
                            "(what enters a switch node leaves in the same epoch), got %d",
                            o->zero_buffer);
    if (o->zero_buffer && o->astar == 1)
        return cs_error_set(err, CS_EUNSUPPORTED, "options.zero_buffer",
                            "zero_buffer is not enforced by A* rounds (astar 1): leave astar "
                            "at 0 or -1");
    if (o->astar_epochs < 0 || o->astar_epochs > 1024)
        return cs_error_set(err, CS_EINVAL, "options.astar_epochs",
                            "astar_epochs must be in 0..1024 (0: 8), got %d", o->astar_epochs);
    if (o->epochs < 0 || o->epochs > 100000)
        return cs_error_set(err, CS_EINVAL, "options.epochs",
                            "epochs must be in 0..100000 (0: searched), got %d", o->epochs);
    if (o->max_epochs < 1 || o->max_epochs > 100000)
        return cs_error_set(err, CS_EINVAL, "options.max_epochs",
                            "max_epochs must be in 1..100000, got %d", o->max_epochs);
    if (!(o->bytes > 0) || !isfinite(o->bytes))
        return cs_error_set(err, CS_EINVAL, "options.bytes", "bytes must be a positive size");
    if (o->epoch_split < 1 || o->epoch_split > 64)
        return cs_error_set(err, CS_EINVAL, "options.epoch_split",
                            "epoch_split must be in 1..64, got %d", o->epoch_split);
    if (!(o->gap >= 0 && o->gap < 1))
        return cs_error_set(err, CS_EINVAL, "options.gap", "gap must be in [0, 1), got %g",
                            o->gap);
    if (o->time_limit_s < 0 || !isfinite(o->time_limit_s))
        return cs_error_set(err, CS_EINVAL, "options.time_limit_s",
                            "time_limit_s must be >= 0");
    int max_ranks = o->max_ranks > 0 ? o->max_ranks : CS_MCF_DEFAULT_MAX_RANKS;
    if (t->ranks > max_ranks)
        return cs_error_set(err, CS_ELIMIT, "topology",
                            "mcf handles at most %d ranks (its models grow as ranks x links x "
                            "epochs); this topology has %d: use tacos",
                            max_ranks, t->ranks);
    if (collective_kind_is_combining(c->kind))
        return cs_error_set(err, CS_EUNSUPPORTED, "collective.kind",
                            "mcf synthesizes non-combining collectives (flows of data); %s "
                            "combines contributions: use smt or tacos",
                            collective_kind_name(c->kind));
    return CS_OK;
}

/* ---- the instance -------------------------------------------------------------- */

typedef struct inst {
    const cs_topology *t;
    const cs_collective *c;
    int P, L, C;
    long G;
    double chunk_bytes, tau;
    int *kappa;         /* per link: epochs a send holds its lane; arrives k + kappa */
    double *send_us;    /* per link: alpha + chunk / bw */
    int *dist;          /* P x P kappa-weighted shortest distances (FAR: none) */
    bool pairwise;
    /* Copy-capable switches on the node view: ranks node0.. are the switch
     * nodes (node0 = P without them); zero_buffer: they hold nothing from
     * one epoch to the next (options.zero_buffer, TE-CCL's switch buffer of
     * zero): a copy out of a node leaves in the epoch its chunk arrives. */
    int node0;
    bool zero_buffer;
    /* pairwise: per chunk its source and the one rank that needs it (-1: none) */
    int *gsrc, *gdst;
    long *supply;       /* P x P: supply[d * P + s] = chunks s must deliver to d */
    /* copy: per chunk and rank */
    unsigned char *pre, *need;
    int ncomm;          /* P (pairwise: by destination) or G (copy: by chunk) */
    /* Symmetry (pairwise demands): the automorphism group Aut of the
     * topology and the demand (bliss; find_symmetry).  The LP then has
     * variables for one commodity per orbit of Aut on the destinations only:
     * commodity q = g_q(rep_of[q]) flows as its representative does on the
     * images of its links, i.e. q's flow on l is the representative's on
     * qlink[q][l] = g_q^-1(l).  The LP's optimum is unchanged: averaging an
     * optimal solution over Aut gives an invariant one, which is of this
     * form.  Capacity rows of links in one orbit are then the same row when
     * Aut acts freely on the destinations (sym_free), else each is written.
     * The MILP does not use it (a symmetric integer solution need not
     * exist).  sym false: none. */
    bool no_symmetry;   /* options.no_symmetry */
    bool sym, sym_free;
    int sym_orbits, sym_generators;
    double sym_group;   /* |Aut| (bliss' approximation) */
    int *rep_of;        /* P */
    int *qlink;         /* P x L, or NULL */
    int *link_rep;      /* L: the smallest link of l's orbit under Aut */
    /* A representative's flows are also invariant under its stabilizer (the
     * averaged solution is): per representative r, links (ranks) in one
     * orbit of Stab(r) share one column, lcls[r][l] (rcls[r][n]) being the
     * smallest of the class and lsize[r][l] its size.  Then the capacity
     * rows of the links of one orbit of Aut are one row whether or not Aut
     * acts freely.  Stab(r) comes from Schreier generators
     * g_{h(q)}^-1 h g_q (q in r's orbit, h a generator). */
    int *lcls, *lsize;  /* P x L (rows of representatives) */
    int *rcls;          /* P x P */
    int *earliest;      /* ncomm x P: first epoch the commodity can be at a rank */
    int *reach;         /* ncomm x P: fewest epochs from a rank to one that needs it */
} inst;

static void inst_free(inst *in)
{
    free(in->qlink);
    free(in->rep_of);
    free(in->link_rep);
    free(in->lcls);
    free(in->lsize);
    free(in->rcls);
    free(in->kappa);
    free(in->send_us);
    free(in->dist);
    free(in->gsrc);
    free(in->gdst);
    free(in->supply);
    free(in->pre);
    free(in->need);
    free(in->earliest);
    free(in->reach);
}

bool mcf_collective_is_pairwise(const cs_collective *c, int P, int C)
{
    switch (c->kind) {
    case CS_COLL_ALLTOALL: case CS_COLL_SCATTER: case CS_COLL_GATHER: return true;
    case CS_COLL_CUSTOM: break;
    default: return false;
    }
    long G = collective_global_chunks(c, P, C);
    for (long g = 0; g < G; g++) {
        int npre = 0, nneed = 0;
        for (int r = 0; r < P; r++) {
            bool pre = collective_pre(c, P, C, g, r);
            npre += pre;
            nneed += !pre && collective_post(c, P, C, g, r);
        }
        if (nneed > 1 || (nneed == 1 && npre != 1))
            return false;
    }
    return true;
}

static int find_symmetry(inst *in);

static int inst_init(inst *in, const cs_topology *t, const cs_collective *c,
                     const cs_mcf_options *o, cs_error *err)
{
    memset(in, 0, sizeof *in);
    in->t = t;
    in->c = c;
    in->P = t->ranks;
    in->L = t->nlinks;
    in->C = o->chunks;
    in->G = collective_global_chunks(c, in->P, in->C);
    in->chunk_bytes = o->bytes / o->chunks;
    in->no_symmetry = o->no_symmetry;
    in->node0 = t->node_view ? t->ranks - t->nswitch_nodes : t->ranks;
    in->zero_buffer = o->zero_buffer && in->node0 < t->ranks;
    int P = in->P, L = in->L;
    in->kappa = malloc(sizeof *in->kappa * (size_t)L);
    in->send_us = malloc(sizeof *in->send_us * (size_t)L);
    in->dist = malloc(sizeof *in->dist * (size_t)P * (size_t)P);
    if (!in->kappa || !in->send_us || !in->dist)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    double fastest = INFINITY;
    for (int l = 0; l < L; l++) {
        const cs_link *k = &t->links[l];
        in->send_us[l] = k->alpha_us + in->chunk_bytes / (k->gbps * 1e3);
        if (in->send_us[l] < fastest)
            fastest = in->send_us[l];
    }
    in->tau = fastest / o->epoch_split;
    for (int l = 0; l < L; l++) {
        double e = in->send_us[l] / in->tau;
        int kk = (int)ceil(e - 1e-9);
        in->kappa[l] = kk < 1 ? 1 : kk;
    }
    /* Floyd-Warshall on kappa (P <= a few hundred) */
    for (long i = 0; i < (long)P * P; i++)
        in->dist[i] = FAR;
    for (int r = 0; r < P; r++)
        in->dist[(long)r * P + r] = 0;
    for (int l = 0; l < L; l++) {
        long at = (long)t->links[l].src * P + t->links[l].dst;
        if (in->kappa[l] < in->dist[at])
            in->dist[at] = in->kappa[l];
    }
    for (int k = 0; k < P; k++)
        for (int i = 0; i < P; i++) {
            int dik = in->dist[(long)i * P + k];
            if (dik >= FAR)
                continue;
            for (int j = 0; j < P; j++) {
                int v = dik + in->dist[(long)k * P + j];
                if (v < in->dist[(long)i * P + j])
                    in->dist[(long)i * P + j] = v;
            }
        }
    in->pairwise = mcf_collective_is_pairwise(c, P, in->C);
    if (in->pairwise) {
        in->ncomm = P;
        in->gsrc = malloc(sizeof *in->gsrc * (size_t)(in->G ? in->G : 1));
        in->gdst = malloc(sizeof *in->gdst * (size_t)(in->G ? in->G : 1));
        in->supply = calloc((size_t)P * P, sizeof *in->supply);
        if (!in->gsrc || !in->gdst || !in->supply)
            return cs_error_set(err, CS_ENOMEM, "", "out of memory");
        for (long g = 0; g < in->G; g++) {
            int src = -1, dst = -1;
            for (int r = 0; r < P; r++) {
                bool pre = collective_pre(c, P, in->C, g, r);
                if (pre)
                    src = r;
                else if (collective_post(c, P, in->C, g, r))
                    dst = r;
            }
            in->gsrc[g] = src;
            in->gdst[g] = src >= 0 ? dst : -1;
            if (src >= 0 && dst >= 0)
                in->supply[(long)dst * P + src]++;
        }
    } else {
        if (in->G > 0 && (long)P * in->G > 100000000L)
            return cs_error_set(err, CS_ELIMIT, "options.chunks",
                                "%ld chunks x %d ranks is too large for mcf's copy model",
                                in->G, P);
        in->ncomm = (int)in->G;
        in->pre = calloc((size_t)in->G * P, 1);
        in->need = calloc((size_t)in->G * P, 1);
        if (!in->pre || !in->need)
            return cs_error_set(err, CS_ENOMEM, "", "out of memory");
        for (long g = 0; g < in->G; g++)
            for (int r = 0; r < P; r++) {
                bool pre = collective_pre(c, P, in->C, g, r);
                in->pre[g * P + r] = pre;
                in->need[g * P + r] = !pre && collective_post(c, P, in->C, g, r);
            }
    }
    if (find_symmetry(in) != CS_OK)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    long nc = in->ncomm;
    in->earliest = malloc(sizeof *in->earliest * (size_t)(nc ? nc : 1) * P);
    in->reach = malloc(sizeof *in->reach * (size_t)(nc ? nc : 1) * P);
    if (!in->earliest || !in->reach)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    for (long q = 0; q < nc; q++) {
        int *ea = in->earliest + q * P, *re = in->reach + q * P;
        for (int n = 0; n < P; n++) {
            ea[n] = FAR;
            re[n] = FAR;
        }
        for (int s = 0; s < P; s++) {
            bool src = in->pairwise ? in->supply[q * P + s] > 0 : in->pre[q * P + s];
            if (!src)
                continue;
            for (int n = 0; n < P; n++)
                if (in->dist[(long)s * P + n] < ea[n])
                    ea[n] = in->dist[(long)s * P + n];
        }
        for (int d = 0; d < P; d++) {
            bool needs = in->pairwise ? (d == q) : in->need[q * P + d];
            if (!needs)
                continue;
            for (int n = 0; n < P; n++)
                if (in->dist[(long)n * P + d] < re[n])
                    re[n] = in->dist[(long)n * P + d];
        }
    }
    return CS_OK;
}

/* ---- symmetry ------------------------------------------------------------------- */

/* The link a -> b with the same lanes, speed and alpha as l, or -1. */
static int image_link(const cs_topology *t, const cs_link *l, int a, int b)
{
    int i = topology_find_link(t, a, b);
    if (i < 0)
        return -1;
    const cs_link *m = &t->links[i];
    return m->lanes == l->lanes && m->gbps == l->gbps && m->alpha_us == l->alpha_us ? i : -1;
}

static int cmp_int_asc(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Attribute classes -> bliss colours: equal tuples, equal colour. */
typedef struct colours {
    double *key;        /* ntuple doubles per class */
    int n, cap, width;
} colours;

static int colour_of(colours *c, const double *tuple)
{
    for (int i = 0; i < c->n; i++)
        if (!memcmp(c->key + (long)i * c->width, tuple, sizeof *tuple * (size_t)c->width))
            return i;
    if (c->n == c->cap) {
        int nc = c->cap ? 2 * c->cap : 16;
        double *k = realloc(c->key, sizeof *k * (size_t)nc * c->width);
        if (!k)
            return -1;
        c->key = k;
        c->cap = nc;
    }
    memcpy(c->key + (long)c->n * c->width, tuple, sizeof *tuple * (size_t)c->width);
    return c->n++;
}

/* Generators bliss reports, restricted to ranks and links. */
typedef struct gens {
    int P, L, link_base;
    int n, cap;
    int *rank;          /* n x P */
    int *link;          /* n x L */
    bool oom;
} gens;

static void gens_hook(void *user, unsigned int N, const unsigned int *aut)
{
    gens *g = user;
    (void)N;
    if (g->oom)
        return;
    if (g->n == g->cap) {
        int nc = g->cap ? 2 * g->cap : 8;
        int *r = realloc(g->rank, sizeof *r * (size_t)nc * g->P);
        if (!r) {
            g->oom = true;
            return;
        }
        g->rank = r;
        int *l = realloc(g->link, sizeof *l * (size_t)nc * (g->L ? g->L : 1));
        if (!l) {
            g->oom = true;
            return;
        }
        g->link = l;
        g->cap = nc;
    }
    int *r = g->rank + (long)g->n * g->P, *l = g->link + (long)g->n * g->L;
    for (int i = 0; i < g->P; i++)
        r[i] = (int)aut[i];
    /* link l's tail vertex is link_base + 2 l */
    for (int i = 0; i < g->L; i++)
        l[i] = ((int)aut[g->link_base + 2 * i] - g->link_base) / 2;
    g->n++;
}

/* A generator really maps links (lanes, speed, alpha), shared sets and the
 * demand onto themselves (bliss' graph encodes them; checked, not assumed). */
static bool generator_ok(const inst *in, const int *rk, const int *lk)
{
    const cs_topology *t = in->t;
    int P = in->P;
    for (int l = 0; l < in->L; l++) {
        const cs_link *k = &t->links[l];
        if (lk[l] < 0 || lk[l] >= in->L || image_link(t, k, rk[k->src], rk[k->dst]) != lk[l])
            return false;
    }
    for (int d = 0; d < P; d++)
        for (int x = 0; x < P; x++)
            if (in->supply[(long)d * P + x] != in->supply[(long)rk[d] * P + rk[x]])
                return false;
    for (int a = 0; a < t->nshared; a++) {
        const cs_shared *sa = &t->shared[a];
        int *img = malloc(sizeof *img * (size_t)(sa->nlinks ? sa->nlinks : 1));
        if (!img)
            return false;
        for (int i = 0; i < sa->nlinks; i++)
            img[i] = lk[sa->links[i]];
        qsort(img, (size_t)sa->nlinks, sizeof *img, cmp_int_asc);
        bool found = false;
        for (int b = 0; b < t->nshared && !found; b++) {
            const cs_shared *sb = &t->shared[b];
            if (sb->nlinks != sa->nlinks || sb->lanes != sa->lanes)
                continue;
            int *sorted = malloc(sizeof *sorted * (size_t)(sb->nlinks ? sb->nlinks : 1));
            if (!sorted)
                break;
            memcpy(sorted, sb->links, sizeof *sorted * (size_t)sb->nlinks);
            qsort(sorted, (size_t)sb->nlinks, sizeof *sorted, cmp_int_asc);
            found = memcmp(img, sorted, sizeof *img * (size_t)sa->nlinks) == 0;
            free(sorted);
        }
        free(img);
        if (!found)
            return false;
    }
    return true;
}

static int uf_root(int *p, int x)
{
    while (p[x] != x) {
        p[x] = p[p[x]];
        x = p[x];
    }
    return x;
}

static int cmp_u64_asc(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static uint64_t mix64(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

/* Colour refinement (1-WL): *discrete when every vertex ends with a colour
 * of its own, i.e. the graph has no automorphism but the identity.  bliss
 * would find the same at its root, but on that path bliss 0.73 leaks its
 * component-recursion arrays (synth/iso does the same check first).  Hash
 * collisions can only merge classes, so a wrong answer is "not discrete",
 * and bliss then runs as it would have. */
static int refine_is_discrete(const int *vcol, long n, const unsigned *edge, long ne,
                              bool *discrete)
{
    *discrete = n <= 1;
    if (n <= 1)
        return CS_OK;
    long *start = calloc((size_t)n + 1, sizeof *start), *fill = calloc((size_t)n, sizeof *fill);
    unsigned *adj = malloc(sizeof *adj * 2 * (size_t)(ne ? ne : 1));
    uint64_t *c = malloc(sizeof *c * (size_t)n), *next = malloc(sizeof *next * (size_t)n);
    uint64_t *tmp = malloc(sizeof *tmp * (size_t)n);
    int rc = CS_OK;
    if (!start || !fill || !adj || !c || !next || !tmp) {
        rc = CS_ENOMEM;
        goto out;
    }
    for (long e = 0; e < ne; e++) {
        start[edge[2 * e] + 1]++;
        start[edge[2 * e + 1] + 1]++;
    }
    for (long v = 0; v < n; v++)
        start[v + 1] += start[v];
    for (long e = 0; e < ne; e++) {
        unsigned a = edge[2 * e], b = edge[2 * e + 1];
        adj[start[a] + fill[a]++] = b;
        adj[start[b] + fill[b]++] = a;
    }
    for (long v = 0; v < n; v++)
        c[v] = mix64((uint64_t)vcol[v] + 1);
    long classes = 0;
    for (int round = 0; round < 4 * n + 8; round++) {
        memcpy(tmp, c, sizeof *tmp * (size_t)n);
        qsort(tmp, (size_t)n, sizeof *tmp, cmp_u64_asc);
        long k = 0;
        for (long v = 0; v < n; v++)
            k += v == 0 || tmp[v] != tmp[v - 1];
        if (k == n) {
            *discrete = true;
            break;
        }
        if (k <= classes)
            break;
        classes = k;
        /* new colour: own colour and the multiset of the neighbours' (a
         * sum of mixed values is order-free) */
        for (long v = 0; v < n; v++) {
            uint64_t h = mix64(c[v] ^ 0x9E3779B97F4A7C15ULL);
            for (long i = start[v]; i < start[v + 1]; i++)
                h += mix64(c[adj[i]] + 0x632BE59BD9B4E019ULL);
            next[v] = mix64(h);
        }
        memcpy(c, next, sizeof *c * (size_t)n);
    }
out:
    free(start);
    free(fill);
    free(adj);
    free(c);
    free(next);
    free(tmp);
    return rc;
}

/* Pairwise demands: the automorphisms of the topology and the demand, from
 * bliss.  The graph: a vertex per rank; per link a tail and a head vertex
 * (rank src - tail - head - rank dst) coloured by the link's (lanes, gbps,
 * alpha), so direction and attributes are kept (bliss has no edge colours);
 * per shared set a vertex coloured by its lanes joined to its links' tails;
 * per demand pair (s, d) a tail and a head vertex coloured by the chunk
 * count.  Switches are in it as their lowering (derived links and port
 * sets).  Its automorphisms fixing colours, restricted to the ranks, are
 * exactly the rank permutations that keep topology and demand.  Orbits of
 * the destinations and, per destination q, an element g_q that maps the
 * orbit's representative to q come from a breadth-first walk over the
 * generators. */
static int find_symmetry(inst *in)
{
    in->sym = false;
    if (!in->pairwise || in->P < 2 || in->no_symmetry)
        return CS_OK;
    const cs_topology *t = in->t;
    int P = in->P, L = in->L;
    colours col = {.width = 4};
    gens gn = {.P = P, .L = L};
    int rc = CS_OK;
    int *perm = NULL, *rperm = NULL, *rinv = NULL, *queue = NULL, *uf = NULL;
    /* the graph as arrays first: colour refinement may settle it without bliss */
    long nv = 0, ne = 0;
    long maxv = P + 2L * L + t->nshared + 2L * P * P, maxe = 3L * L + 3L * P * P;
    for (int s2 = 0; s2 < t->nshared; s2++)
        maxe += t->shared[s2].nlinks;
    int *vcol = malloc(sizeof *vcol * (size_t)maxv);
    unsigned *edge = malloc(sizeof *edge * 2 * (size_t)(maxe ? maxe : 1));
    if (!vcol || !edge) {
        free(vcol);
        free(edge);
        return CS_ENOMEM;
    }
#define VERTEX(c) (vcol[nv] = (c), nv++)
#define EDGE(a, b) (edge[2 * ne] = (unsigned)(a), edge[2 * ne + 1] = (unsigned)(b), ne++)
    double tup[4];
    /* ranks: one colour; everything else by its class */
    tup[0] = 0, tup[1] = tup[2] = tup[3] = 0;
    int c0 = colour_of(&col, tup);
    for (int r = 0; r < P; r++)
        VERTEX(c0);
    gn.link_base = P;
    for (int l = 0; l < L && rc == CS_OK; l++) {
        const cs_link *k = &t->links[l];
        tup[0] = 1, tup[1] = k->lanes, tup[2] = k->gbps, tup[3] = k->alpha_us;
        int ct = colour_of(&col, tup);
        tup[0] = 2;
        int ch = colour_of(&col, tup);
        if (ct < 0 || ch < 0) {
            rc = CS_ENOMEM;
            break;
        }
        long vt = VERTEX(ct), vh = VERTEX(ch);
        EDGE(k->src, vt);
        EDGE(vt, vh);
        EDGE(vh, k->dst);
    }
    for (int s2 = 0; s2 < t->nshared && rc == CS_OK; s2++) {
        tup[0] = 3, tup[1] = t->shared[s2].lanes, tup[2] = tup[3] = 0;
        int cs = colour_of(&col, tup);
        if (cs < 0) {
            rc = CS_ENOMEM;
            break;
        }
        long v = VERTEX(cs);
        for (int i = 0; i < t->shared[s2].nlinks; i++)
            EDGE(v, P + 2 * t->shared[s2].links[i]);
    }
    for (int d = 0; d < P && rc == CS_OK; d++)
        for (int x = 0; x < P && rc == CS_OK; x++) {
            long n = in->supply[(long)d * P + x];
            if (n <= 0)
                continue;
            tup[0] = 4, tup[1] = (double)n, tup[2] = tup[3] = 0;
            int ct = colour_of(&col, tup);
            tup[0] = 5;
            int ch = colour_of(&col, tup);
            if (ct < 0 || ch < 0) {
                rc = CS_ENOMEM;
                break;
            }
            long vt = VERTEX(ct), vh = VERTEX(ch);
            EDGE(x, vt);
            EDGE(vt, vh);
            EDGE(vh, d);
        }
#undef VERTEX
#undef EDGE
    free(col.key);
    bool discrete = false;
    if (rc == CS_OK)
        rc = refine_is_discrete(vcol, nv, edge, ne, &discrete);
    BlissStats st;
    memset(&st, 0, sizeof st);
    if (rc == CS_OK && !discrete) {
        BlissGraph *bg = bliss_new(0);
        if (!bg) {
            rc = CS_ENOMEM;
        } else {
            for (long v = 0; v < nv; v++)
                bliss_add_vertex(bg, (unsigned)vcol[v]);
            for (long e = 0; e < ne; e++)
                bliss_add_edge(bg, edge[2 * e], edge[2 * e + 1]);
            bliss_find_automorphisms(bg, gens_hook, &gn, &st);
            bliss_release(bg);
        }
    }
    free(vcol);
    free(edge);
    if (rc != CS_OK || gn.oom) {
        rc = CS_ENOMEM;
        goto out;
    }
    /* keep the generators that check out and move some rank */
    int ng = 0;
    for (int i = 0; i < gn.n; i++) {
        const int *rk = gn.rank + (long)i * P, *lk = gn.link + (long)i * L;
        bool moves = false;
        for (int r = 0; r < P && !moves; r++)
            moves = rk[r] != r;
        if (!moves || !generator_ok(in, rk, lk))
            continue;
        if (ng != i) {
            memmove(gn.rank + (long)ng * P, rk, sizeof *rk * (size_t)P);
            memmove(gn.link + (long)ng * L, lk, sizeof *lk * (size_t)L);
        }
        ng++;
    }
    if (ng == 0)
        goto out;
    /* orbits of the destinations and g_q, breadth first over the generators */
    in->rep_of = malloc(sizeof *in->rep_of * (size_t)P);
    perm = malloc(sizeof *perm * (size_t)P * (L ? L : 1)); /* g_q on links */
    rperm = malloc(sizeof *rperm * (size_t)P * P);          /* g_q on ranks */
    rinv = malloc(sizeof *rinv * (size_t)P * P);
    queue = malloc(sizeof *queue * (size_t)P);
    in->qlink = malloc(sizeof *in->qlink * (size_t)P * (L ? L : 1));
    if (!in->rep_of || !perm || !rperm || !rinv || !queue || !in->qlink) {
        rc = CS_ENOMEM;
        goto out;
    }
    for (int q = 0; q < P; q++)
        in->rep_of[q] = -1;
    int orbits = 0, min_orbit = P;
    for (int r = 0; r < P; r++) {
        if (in->rep_of[r] >= 0)
            continue;
        orbits++;
        int head = 0, tail = 0;
        in->rep_of[r] = r;
        for (int l = 0; l < L; l++)
            perm[(long)r * L + l] = l;
        for (int n = 0; n < P; n++)
            rperm[(long)r * P + n] = n;
        queue[tail++] = r;
        while (head < tail) {
            int q = queue[head++];
            for (int i = 0; i < ng; i++) {
                int q2 = gn.rank[(long)i * P + q];
                if (in->rep_of[q2] >= 0)
                    continue;
                in->rep_of[q2] = r;
                const int *h = gn.link + (long)i * L;
                for (int l = 0; l < L; l++) /* g_q2 = h o g_q */
                    perm[(long)q2 * L + l] = h[perm[(long)q * L + l]];
                const int *hr = gn.rank + (long)i * P;
                for (int n = 0; n < P; n++)
                    rperm[(long)q2 * P + n] = hr[rperm[(long)q * P + n]];
                queue[tail++] = q2;
            }
        }
        if (tail < min_orbit)
            min_orbit = tail;
    }
    for (int q = 0; q < P; q++) {
        for (int l = 0; l < L; l++)
            in->qlink[(long)q * L + perm[(long)q * L + l]] = l;
        for (int n = 0; n < P; n++)
            rinv[(long)q * P + rperm[(long)q * P + n]] = n;
    }
    in->sym = orbits < P;
    in->sym_orbits = orbits;
    in->sym_generators = ng;
    in->sym_group = (double)st.group_size_approx;
    /* free action: every orbit as large as the group (then stabilizers
     * are trivial and every class below is a single link) */
    in->sym_free = in->sym && fabs(in->sym_group - min_orbit) < 0.5;
    uf = malloc(sizeof *uf * (size_t)(L > P ? L : P));
    in->link_rep = malloc(sizeof *in->link_rep * (size_t)(L ? L : 1));
    in->lcls = malloc(sizeof *in->lcls * (size_t)P * (L ? L : 1));
    in->lsize = calloc((size_t)P * (L ? L : 1), sizeof *in->lsize);
    in->rcls = malloc(sizeof *in->rcls * (size_t)P * P);
    if (!uf || !in->link_rep || !in->lcls || !in->lsize || !in->rcls) {
        rc = CS_ENOMEM;
        goto out;
    }
    for (int l = 0; l < L; l++)
        uf[l] = l;
    for (int i = 0; i < ng; i++)
        for (int l = 0; l < L; l++) {
            int a = uf_root(uf, l), b = uf_root(uf, gn.link[(long)i * L + l]);
            if (a != b)
                uf[a > b ? a : b] = a < b ? a : b;
        }
    for (int l = 0; l < L; l++)
        in->link_rep[l] = uf_root(uf, l);
    for (int r = 0; r < P; r++) {
        if (in->rep_of[r] != r)
            continue;
        int *lc = in->lcls + (long)r * L, *rcl = in->rcls + (long)r * P;
        for (int l = 0; l < L; l++)
            lc[l] = l;
        for (int n = 0; n < P; n++)
            rcl[n] = n;
        for (int q = 0; q < P && !in->sym_free; q++) {
            if (in->rep_of[q] != r)
                continue;
            for (int i = 0; i < ng; i++) {
                const int *h = gn.link + (long)i * L, *hr = gn.rank + (long)i * P;
                int q2 = hr[q];
                /* s = g_q2^-1 h g_q fixes r */
                for (int l = 0; l < L; l++) {
                    int sl = in->qlink[(long)q2 * L + h[perm[(long)q * L + l]]];
                    int a = uf_root(lc, l), b = uf_root(lc, sl);
                    if (a != b)
                        lc[a > b ? a : b] = a < b ? a : b;
                }
                for (int n = 0; n < P; n++) {
                    int sn = rinv[(long)q2 * P + hr[rperm[(long)q * P + n]]];
                    int a = uf_root(rcl, n), b = uf_root(rcl, sn);
                    if (a != b)
                        rcl[a > b ? a : b] = a < b ? a : b;
                }
            }
        }
        for (int l = 0; l < L; l++) {
            lc[l] = uf_root(lc, l);
            in->lsize[(long)r * L + lc[l]]++;
        }
        for (int n = 0; n < P; n++)
            rcl[n] = uf_root(rcl, n);
    }
out:
    if (!in->sym || rc != CS_OK) {
        in->sym = false;
        in->sym_free = false;
        free(in->qlink);
        in->qlink = NULL;
        free(in->link_rep);
        in->link_rep = NULL;
        free(in->lcls);
        in->lcls = NULL;
        free(in->lsize);
        in->lsize = NULL;
        free(in->rcls);
        in->rcls = NULL;
    }
    free(perm);
    free(rperm);
    free(rinv);
    free(queue);
    free(uf);
    free(gn.rank);
    free(gn.link);
    return rc;
}

/* Copy demands: a floor from each source's egress.  Of the chunks only rank
 * s holds at first, x are needed elsewhere, y of them by two ranks or more.
 * s starts at most E sends per epoch (topology_egress_lanes: its lanes,
 * capped by a port set), each arriving >= ks epochs later (s's fastest
 * out-link).  Each of the y chunks either leaves s twice (one more start
 * for s) or reaches a needer through a relay (>= kmin more epochs, the
 * fastest link, after its first departure).  With r of them relayed, s
 * starts >= x + y - r sends, the last at epoch >= ceil((x+y-r)/E) - 1, and
 * the latest first departure of the relayed ones is >= ceil(r/E) - 1; the
 * horizon is at least the smaller, over r, of the larger of the two
 * arrivals.  A broadcast of C chunks through a copy switch (E = 1) gets
 * C + 1 epochs, which the greedy's pipeline meets: proved without an LP. */
static int source_egress_floor(const inst *in)
{
    const cs_topology *t = in->t;
    int P = in->P, k = 0, kmin = FAR;
    for (int l = 0; l < in->L; l++)
        if (in->kappa[l] < kmin)
            kmin = in->kappa[l];
    long *x = calloc((size_t)P, sizeof *x), *y = calloc((size_t)P, sizeof *y);
    if (!x || !y || kmin >= FAR) {
        free(x);
        free(y);
        return 0;
    }
    for (long g = 0; g < in->G; g++) {
        int src = -1, npre = 0, nneed = 0;
        for (int n = 0; n < P; n++) {
            if (in->pre[g * P + n]) {
                src = n;
                npre++;
            }
            nneed += in->need[g * P + n];
        }
        if (npre != 1 || nneed == 0)
            continue;
        x[src]++;
        y[src] += nneed >= 2;
    }
    for (int s = 0; s < P; s++) {
        if (x[s] == 0)
            continue;
        long E = topology_egress_lanes(t, s), ks = FAR;
        for (int l = t->out_begin[s]; l < t->out_begin[s + 1]; l++)
            if (in->kappa[l] < ks)
                ks = in->kappa[l];
        if (E < 1 || ks >= FAR)
            continue;
        long best = -1;
        for (long r = 0; r <= y[s]; r++) {
            long v = (x[s] + y[s] - r + E - 1) / E - 1 + ks;
            long w = r > 0 ? (r + E - 1) / E - 1 + ks + kmin : 0;
            if (w > v)
                v = w;
            if (best < 0 || v < best)
                best = v;
        }
        if (best > k && best < FAR)
            k = (int)best;
    }
    free(x);
    free(y);
    return k;
}

/* Copy demands: a floor from each rank's ingress.  The n chunks rank d
 * needs each arrive over one of its in-links; d's in-links start at most I
 * sends per epoch (topology_ingress_lanes), so the last of them starts at
 * epoch >= ceil(n / I) - 1 and arrives kd later (d's fastest in-link).  On a
 * switch (dgx2 allgather: 15 chunks through one port) this is the greedy's
 * horizon, so it is proved without an LP (and without the improve budget). */
static int sink_ingress_floor(const inst *in)
{
    const cs_topology *t = in->t;
    int P = in->P, k = 0;
    for (int d = 0; d < P; d++) {
        long n = 0;
        for (long g = 0; g < in->G; g++)
            n += in->need[g * P + d];
        if (n == 0)
            continue;
        long I = topology_ingress_lanes(t, d), kd = FAR;
        for (int i = t->in_begin[d]; i < t->in_begin[d + 1]; i++)
            if (in->kappa[t->in_links[i]] < kd)
                kd = in->kappa[t->in_links[i]];
        if (I < 1 || kd >= FAR)
            continue;
        long v = (n + I - 1) / I - 1 + kd;
        if (v > k && v < FAR)
            k = (int)v;
    }
    return k;
}

/* The smallest horizon any schedule needs: the farthest needed pair (and,
 * for copy demands, the sources' egress and the ranks' ingress). */
static int horizon_floor(const inst *in)
{
    int k = 1, P = in->P;
    for (long q = 0; q < in->ncomm; q++)
        for (int n = 0; n < P; n++) {
            int v = 0;
            if (in->pairwise)
                v = in->supply[q * P + n] > 0 ? in->dist[(long)n * P + q] : 0;
            else if (in->need[q * P + n])
                v = in->earliest[q * P + n];
            if (v > k && v < FAR)
                k = v;
        }
    if (!in->pairwise) {
        int e = source_egress_floor(in), i = sink_ingress_floor(in);
        if (e > k)
            k = e;
        if (i > k)
            k = i;
    }
    return k;
}

/* ---- the model at horizon K ------------------------------------------------------------ */

typedef struct model {
    mcf_lp lp;
    int K;
    /* search: the demand is not enforced; the objective counts the units
     * delivered by K (always feasible: doing nothing is a solution), so a
     * horizon is feasible when every unit is delivered.  CLP proves that far
     * faster than it proves an enforced model infeasible (95 s against
     * 0.4 s for ndv2:2 alltoall at 24 epochs). */
    bool search;
    bool sym;           /* pairwise: one commodity per orbit of in->sym (see inst) */
    double total;       /* units the demand moves */
    long nf;            /* ncomm * L * K */
    int *fcol;          /* flow column of (q, l, k), or -1 */
    int *hcol;          /* copy: holding column of (q, n, k), k in 0..K; pairwise: B of (q, n, k) */
    double *units;      /* pairwise: units a column's value delivers (per column), or NULL */
    int units_cap;
    bool trivially_infeasible;
} model;

static void model_free(model *m)
{
    mcf_lp_free(&m->lp);
    free(m->fcol);
    free(m->hcol);
    free(m->units);
    memset(m, 0, sizeof *m);
}

/* Records that column col delivers `units` units per unit of its value. */
static int model_set_units(model *m, int col, double units)
{
    if (col < 0)
        return CS_ENOMEM;
    if (col >= m->units_cap) {
        int nc = m->units_cap ? m->units_cap : 1024;
        while (nc <= col)
            nc *= 2;
        double *u = realloc(m->units, sizeof *u * (size_t)nc);
        if (!u)
            return CS_ENOMEM;
        memset(u + m->units_cap, 0, sizeof *u * (size_t)(nc - m->units_cap));
        m->units = u;
        m->units_cap = nc;
    }
    m->units[col] = units;
    return CS_OK;
}

static inline long fidx(const inst *in, int K, long q, int l, int k)
{
    return (q * in->L + l) * K + k;
}

static inline long hidx(const inst *in, int K, long q, int n, int k)
{
    return (q * in->P + n) * (K + 1) + k;
}

/* Commodity q's flow column on link l at epoch k in model m (the orbit
 * representative's, on the preimage of l, when the model is reduced). */
static inline int flow_col(const inst *in, const model *m, long q, int l, int k)
{
    if (m->sym) {
        if (in->rep_of[q] != q) {
            l = in->qlink[q * in->L + l];
            q = in->rep_of[q];
        }
        l = in->lcls[q * in->L + l];
    }
    return m->fcol[(q * in->L + l) * m->K + k];
}

/* Capacity rows: sends in flight on each link, and on each shared set, <= lanes. */
static void add_capacity(const inst *in, model *m)
{
    const cs_topology *t = in->t;
    int K = m->K;
    for (int l = 0; l < in->L; l++) {
        /* a reduced model's rows for l and its images are the same row */
        if (m->sym && in->link_rep[l] != l)
            continue;
        for (int k = 0; k < K; k++) {
            int row = -1;
            for (long q = 0; q < in->ncomm; q++)
                for (int k2 = k - in->kappa[l] + 1; k2 <= k; k2++) {
                    if (k2 < 0)
                        continue;
                    int col = flow_col(in, m, q, l, k2);
                    if (col < 0)
                        continue;
                    if (row < 0)
                        row = mcf_lp_add_row(&m->lp, -INFINITY, t->links[l].lanes);
                    mcf_lp_add_coef(&m->lp, row, col, 1.0);
                }
        }
    }
    for (int s = 0; s < t->nshared; s++) {
        const cs_shared *sh = &t->shared[s];
        for (int k = 0; k < K; k++) {
            int row = -1;
            for (int i = 0; i < sh->nlinks; i++) {
                int l = sh->links[i];
                for (long q = 0; q < in->ncomm; q++)
                    for (int k2 = k - in->kappa[l] + 1; k2 <= k; k2++) {
                        if (k2 < 0)
                            continue;
                        int col = flow_col(in, m, q, l, k2);
                        if (col < 0)
                            continue;
                        if (row < 0)
                            row = mcf_lp_add_row(&m->lp, -INFINITY, sh->lanes);
                        mcf_lp_add_coef(&m->lp, row, col, 1.0);
                    }
            }
        }
    }
}

/* Pairwise demands: one commodity per destination d, real (or integer)
 * flows, buffers B(d, n, k) = what n keeps for d after epoch k's sends. */
static int build_pairwise(const inst *in, int K, bool integer, model *m, cs_error *err)
{
    const cs_topology *t = in->t;
    int P = in->P, L = in->L;
    m->nf = (long)in->ncomm * L * K;
    m->fcol = malloc(sizeof *m->fcol * (size_t)(m->nf ? m->nf : 1));
    m->hcol = malloc(sizeof *m->hcol * (size_t)in->ncomm * P * (K + 1));
    if (!m->fcol || !m->hcol)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory for the model");
    for (long i = 0; i < m->nf; i++)
        m->fcol[i] = -1;
    for (long i = 0; i < (long)in->ncomm * P * (K + 1); i++)
        m->hcol[i] = -1;
    for (int d = 0; d < P; d++) {
        const int *ea = in->earliest + (long)d * P, *re = in->reach + (long)d * P;
        long total = 0;
        for (int s = 0; s < P; s++)
            total += in->supply[(long)d * P + s];
        if (total == 0)
            continue;
        m->total += (double)total;
        if (m->sym && in->rep_of[d] != d)
            continue; /* its flows are its representative's images */
        int orbit = 1;
        for (int q = 0; m->sym && q < P; q++)
            orbit += q != d && in->rep_of[q] == d;
        for (int s = 0; s < P; s++)
            if (!m->search && in->supply[(long)d * P + s] > 0 && in->dist[(long)s * P + d] > K)
                m->trivially_infeasible = true;
        for (int l = 0; l < L; l++) {
            int n = t->links[l].src, x = t->links[l].dst;
            if (n == d)
                continue;
            /* a class of Stab(d) has one column, for its smallest link */
            if (m->sym && in->lcls[(long)d * L + l] != l)
                continue;
            int mult = orbit * (m->sym ? in->lsize[(long)d * L + l] : 1);
            for (int k = ea[n]; k < K; k++) {
                int arrive = k + in->kappa[l];
                if (re[x] >= FAR || arrive + re[x] > K)
                    break;
                double ub = t->links[l].lanes;
                /* a little cost on every send and a little preference for
                 * early arrival break the ties that make the time-expanded
                 * LP degenerate (the simplex stalls on them otherwise) */
                double w = x != d ? -1e-4 : m->search ? 1.0 + 0.01 / arrive : 1.0 / arrive;
                w *= mult; /* the orbit's commodities and the class's links all flow so */
                int col = mcf_lp_add_col(&m->lp, 0, ub, w, integer);
                m->fcol[fidx(in, K, d, l, k)] = col;
                if (x == d && model_set_units(m, col, mult))
                    return cs_error_set(err, CS_ENOMEM, "", "out of memory for the model");
            }
        }
        for (int n = 0; n < P; n++) {
            if (n == d || ea[n] >= FAR || (m->sym && in->rcls[(long)d * P + n] != n))
                continue;
            for (int k = ea[n]; k < K; k++)
                if (k + 1 + re[n] <= K || (m->search && in->supply[(long)d * P + n] > 0))
                    m->hcol[hidx(in, K, d, n, k)] = mcf_lp_add_col(&m->lp, 0, (double)total, 0,
                                                                   false);
        }
        for (int n = 0; m->sym && n < P; n++) /* a rank's buffer is its class's */
            for (int k = 0; k < K && in->rcls[(long)d * P + n] != n; k++)
                m->hcol[hidx(in, K, d, n, k)] = m->hcol[hidx(in, K, d, in->rcls[(long)d * P + n], k)];
        /* conservation at n != d, epoch k (one row per class of Stab(d):
         * the others are the same row) */
        for (int n = 0; n < P; n++) {
            if (n == d || ea[n] >= FAR || (m->sym && in->rcls[(long)d * P + n] != n))
                continue;
            for (int k = ea[n]; k < K; k++) {
                double rhs = k == 0 ? (double)in->supply[(long)d * P + n] : 0.0;
                int row = -1;
#define ROW()                                                          \
    do {                                                               \
        if (row < 0)                                                   \
            row = mcf_lp_add_row(&m->lp, rhs, rhs);                    \
    } while (0)
                for (int l = t->out_begin[n]; l < t->out_begin[n + 1]; l++) {
                    int col = flow_col(in, m, d, l, k);
                    if (col >= 0) {
                        ROW();
                        mcf_lp_add_coef(&m->lp, row, col, 1.0);
                    }
                }
                int b = m->hcol[hidx(in, K, d, n, k)];
                if (b >= 0) {
                    ROW();
                    mcf_lp_add_coef(&m->lp, row, b, 1.0);
                }
                if (k > 0 && (b = m->hcol[hidx(in, K, d, n, k - 1)]) >= 0) {
                    ROW();
                    mcf_lp_add_coef(&m->lp, row, b, -1.0);
                }
                for (int i = t->in_begin[n]; i < t->in_begin[n + 1]; i++) {
                    int l = t->in_links[i];
                    int k0 = k - in->kappa[l];
                    if (k0 < 0)
                        continue;
                    int col = flow_col(in, m, d, l, k0);
                    if (col >= 0) {
                        ROW();
                        mcf_lp_add_coef(&m->lp, row, col, -1.0);
                    }
                }
#undef ROW
                if (row < 0 && rhs != 0)
                    m->trivially_infeasible = true;
            }
        }
    }
    add_capacity(in, m);
    if (m->lp.failed)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory building the model");
    return CS_OK;
}

/* Copy demands: one binary commodity per chunk; H(g, n, k) = n holds g at
 * the start of epoch k. */
static int build_copy(const inst *in, int K, bool integer, model *m, cs_error *err)
{
    const cs_topology *t = in->t;
    int P = in->P, L = in->L;
    long G = in->G;
    m->nf = G * L * K;
    m->fcol = malloc(sizeof *m->fcol * (size_t)(m->nf ? m->nf : 1));
    m->hcol = malloc(sizeof *m->hcol * (size_t)(G ? G : 1) * P * (K + 1));
    if (!m->fcol || !m->hcol)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory for the model");
    for (long i = 0; i < m->nf; i++)
        m->fcol[i] = -1;
    for (long i = 0; i < G * P * (K + 1); i++)
        m->hcol[i] = -1;
    for (long g = 0; g < G; g++) {
        const int *ea = in->earliest + g * P, *re = in->reach + g * P;
        const unsigned char *pre = in->pre + g * P, *need = in->need + g * P;
        for (int n = 0; n < P; n++) {
            m->total += need[n];
            if (!m->search && need[n] && ea[n] > K)
                m->trivially_infeasible = true;
            if (pre[n] || ea[n] >= FAR || re[n] >= FAR)
                continue;
            for (int k = ea[n] > 1 ? ea[n] : 1; k <= K; k++) {
                if (!need[n] && k + re[n] > K)
                    break;
                double lb = need[n] && k == K && !m->search ? 1.0 : 0.0;
                /* search: the units held at K, plus a little for holding
                 * earlier (ties broken, as for pairwise flows) */
                double w = !need[n] ? 0.0 : m->search ? (k == K ? 1.0 : 0.001 / k) : 1.0 / k;
                m->hcol[hidx(in, K, g, n, k)] = mcf_lp_add_col(&m->lp, lb, 1, w, integer);
            }
        }
        for (int l = 0; l < L; l++) {
            int n = t->links[l].src, x = t->links[l].dst;
            if (pre[x] || re[x] >= FAR)
                continue;
            for (int k = pre[n] ? 0 : ea[n]; k < K; k++) {
                if (k + in->kappa[l] + re[x] > K)
                    break;
                if (!pre[n] && m->hcol[hidx(in, K, g, n, k)] < 0)
                    continue;
                m->fcol[fidx(in, K, g, l, k)] =
                    mcf_lp_add_col(&m->lp, 0, 1, m->search ? -1e-4 : 0.0, integer);
            }
        }
        /* a rank sends only what it holds */
        for (int l = 0; l < L; l++) {
            int n = t->links[l].src;
            if (pre[n])
                continue;
            for (int k = 0; k < K; k++) {
                int f = m->fcol[fidx(in, K, g, l, k)];
                if (f < 0)
                    continue;
                int row = mcf_lp_add_row(&m->lp, -INFINITY, 0);
                mcf_lp_add_coef(&m->lp, row, f, 1.0);
                mcf_lp_add_coef(&m->lp, row, m->hcol[hidx(in, K, g, n, k)], -1.0);
            }
        }
        /* it holds what it held or what arrived */
        for (int n = 0; n < P; n++) {
            if (pre[n])
                continue;
            for (int k = 1; k <= K; k++) {
                int h = m->hcol[hidx(in, K, g, n, k)];
                if (h < 0)
                    continue;
                int row = mcf_lp_add_row(&m->lp, -INFINITY, 0);
                mcf_lp_add_coef(&m->lp, row, h, 1.0);
                /* a zero-buffer switch node holds at k only what arrives at k */
                int hp = in->zero_buffer && n >= in->node0 ? -1
                                                           : m->hcol[hidx(in, K, g, n, k - 1)];
                if (hp >= 0)
                    mcf_lp_add_coef(&m->lp, row, hp, -1.0);
                for (int i = t->in_begin[n]; i < t->in_begin[n + 1]; i++) {
                    int l = t->in_links[i];
                    int k0 = k - in->kappa[l];
                    if (k0 < 0)
                        continue;
                    int f = m->fcol[fidx(in, K, g, l, k0)];
                    if (f >= 0)
                        mcf_lp_add_coef(&m->lp, row, f, -1.0);
                }
            }
        }
    }
    add_capacity(in, m);
    if (m->lp.failed)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory building the model");
    return CS_OK;
}

static int build_model(const inst *in, int K, bool integer, bool search, long max_columns,
                       model *m, cs_error *err)
{
    memset(m, 0, sizeof *m);
    mcf_lp_init(&m->lp);
    m->K = K;
    m->search = search;
    m->sym = in->pairwise && in->sym && !integer;
    int rc = in->pairwise ? build_pairwise(in, K, integer, m, err)
                          : build_copy(in, K, integer, m, err);
    if (rc == CS_OK && max_columns > 0 && m->lp.ncols > max_columns)
        rc = cs_error_set(err, CS_ELIMIT, "options.chunks",
                          "the mcf model at %d epochs has %d variables, more than the limit of "
                          "%ld (fewer chunks or ranks, or tacos)",
                          K, m->lp.ncols, max_columns);
    if (rc)
        model_free(m);
    return rc;
}

long mcf_estimate_columns(const cs_topology *t, const cs_collective *c, const cs_mcf_options *o)
{
    if (mcf_options_validate(o, t, c, NULL) != CS_OK)
        return -1;
    inst in;
    if (inst_init(&in, t, c, o, NULL) != CS_OK) {
        inst_free(&in);
        return -1;
    }
    double k = horizon_floor(&in);
    cs_time_bound tb;
    if (collective_time_bound(t, c, &tb, NULL) == CS_OK) {
        double kb = time_bound_us(&tb, o->bytes, o->chunks) / in.tau;
        if (kb > k)
            k = kb;
    }
    double cols = 1.5 * (k + 1) * (double)in.ncomm * in.L;
    inst_free(&in);
    return cols > 1e15 ? (long)1e15 : (long)cols;
}

/* ---- the run ------------------------------------------------------------------------- */

typedef struct run {
    const inst *in;
    const cs_mcf_options *o;
    double t0, deadline;
    int done;
    int lp_solves, milp_solves;
    double lp_seconds, milp_seconds;
    /* solves whose solver process crashed (the run went on with a
     * fallback) and the first crash's message, for stats */
    int solver_crashes;
    char crash[sizeof(((cs_error *)0)->message)];
    /* the feasible search LP at the smallest horizon seen: its flows guide
     * the rounding of large pairwise instances */
    model keep;
    double *keep_x;
} run;

static double remaining(const run *r)
{
    if (!isfinite(r->deadline))
        return 0;
    double left = r->deadline - cs_now();
    return left > 0.05 ? left : 0.05;
}

static bool out_of_time(const run *r) { return isfinite(r->deadline) && cs_now() >= r->deadline; }

/* A solve whose process died by a signal (a solver crash, not a cancel or
 * a limit), called where the caller has a fallback (an A* round: LP
 * rounding, the greedy; the full MILP: the greedy's schedule or the LP
 * rounded): counted and noted instead of failing the request.  True (and
 * *rc = CS_OK) when that is the case. */
static bool solver_crashed(run *r, const mcf_solution *sol, int *rc, const cs_error *err)
{
    if (*rc != CS_EINTERNAL || sol->signal == 0)
        return false;
    if (r->solver_crashes++ == 0)
        snprintf(r->crash, sizeof r->crash, "%s", err->message);
    *rc = CS_OK;
    return true;
}

static void progress(run *r, const char *outcome, int K, double seconds, double best,
                     const char *fmt, ...) __attribute__((format(printf, 6, 7)));

static void progress(run *r, const char *outcome, int K, double seconds, double best,
                     const char *fmt, ...)
{
    if (!r->o->progress)
        return;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cs_progress_event ev = {0};
    ev.method = "mcf";
    ev.outcome = outcome;
    ev.message = msg;
    ev.steps = K;
    ev.rounds = K;
    ev.chunks = r->in->C;
    ev.seconds = seconds;
    ev.elapsed = cs_now() - r->t0;
    ev.done = ++r->done;
    ev.total = 0;
    ev.best = best;
    r->o->progress(r->o->progress_ctx, &ev);
}

/* CBC's progress during one MILP solve, as events "incumbent" with the
 * objective, the bound and the gap (best = the incumbent objective). */
typedef struct milp_watch {
    run *r;
    int K;
    double t0;
} milp_watch;

static void milp_progress(void *ctx, double incumbent, double bound)
{
    milp_watch *w = ctx;
    double gap = isfinite(incumbent) && isfinite(bound) && bound != 0
                     ? 100 * fabs(bound - incumbent) / fabs(bound) : NAN;
    progress(w->r, "incumbent", w->K, cs_now() - w->t0, incumbent,
             "CBC at %d epochs: incumbent %.6g, bound %.6g, gap %.3g%%", w->K, incumbent, bound,
             gap);
}

/* Units a search model's solution delivers (its objective without the
 * tie-breaking terms). */
static double delivered(const model *m, const double *x)
{
    if (!x)
        return 0;
    double v = 0;
    if (m->units) {
        for (int j = 0; j < m->lp.ncols && j < m->units_cap; j++)
            v += x[j] * m->units[j];
        return v;
    }
    for (int j = 0; j < m->lp.ncols; j++)
        if (m->lp.obj[j] > 0.5)
            v += x[j] * floor(m->lp.obj[j] + 1e-9);
    return v;
}

/* LP relaxation at horizon K: CS_OK with *feasible and *obj.  search:
 * feasibility through the always-feasible model (obj is then the units
 * delivered); else the model with the demand enforced and its objective. */
static int solve_lp(run *r, int K, bool search, bool *feasible, double *obj, cs_error *err)
{
    model m;
    int rc = build_model(r->in, K, false, search, r->o->max_columns, &m, err);
    if (rc)
        return rc;
    *feasible = false;
    *obj = NAN;
    if (m.trivially_infeasible) {
        model_free(&m);
        return CS_OK;
    }
    mcf_solve_opts so = {.integer = false, .time_limit_s = remaining(r), .cancel = r->o->cancel};

    mcf_solution sol;
    rc = mcf_solve(&m.lp, &so, &sol, err);
    r->lp_solves++;
    r->lp_seconds += sol.seconds;
    if (rc == CS_OK) {
        if (sol.status == MCF_NOSOLUTION)
            rc = cs_error_set(err, CS_ETIMEOUT, "options.time_limit_s",
                              "the LP at %d epochs did not finish within the time limit", K);
        *feasible = sol.status == MCF_OPTIMAL &&
                    (!search || delivered(&m, sol.x) >= m.total - 1e-6 * (1 + m.total));
        *obj = search ? delivered(&m, sol.x) : sol.objective;
        if (search)
            progress(r, *feasible ? "lp" : "lp-infeasible", K, sol.seconds, NAN,
                     "LP at %d epochs (%d columns, %d rows): delivers %.6g of %.6g units%s, "
                     "in %.3f s",
                     K, m.lp.ncols, m.lp.nrows, delivered(&m, sol.x), m.total,
                     *feasible ? ": feasible" : "", sol.seconds);
        else
            progress(r, "lp", K, sol.seconds, NAN,
                     "LP relaxation at %d epochs (%d columns, %d rows): bound %.6g, in %.3f s", K,
                     m.lp.ncols, m.lp.nrows, sol.objective, sol.seconds);
    }
    if (rc == CS_OK && *feasible && search && sol.x &&
        (!r->keep_x || r->keep.K > K)) {
        model_free(&r->keep);
        free(r->keep_x);
        r->keep = m;
        r->keep_x = sol.x;
        sol.x = NULL;
        memset(&m, 0, sizeof m);
    }
    mcf_solution_free(&sol);
    model_free(&m);
    return rc;
}

/* The smallest K in [lo, hi] whose LP is feasible (hi is known feasible).
 * The secant search usually lands on it, so hi - 1 is tried first. */
static int lp_min_horizon(run *r, int lo, int hi, int *out, cs_error *err)
{
    bool first = true;
    while (lo < hi) {
        int mid = first ? hi - 1 : lo + (hi - lo) / 2;
        first = false;
        bool feas;
        double obj;
        int rc = solve_lp(r, mid, true, &feas, &obj, err);
        if (rc)
            return rc;
        if (feas)
            hi = mid;
        else
            lo = mid + 1;
    }
    *out = hi;
    return CS_OK;
}

/* One send of the schedule, in epochs. */
typedef struct msend {
    long chunk;
    int link, epoch;
} msend;

typedef struct sendbuf {
    msend *v;
    long n, cap;
} sendbuf;

static int push_send(sendbuf *b, long chunk, int link, int epoch)
{
    if (b->n == b->cap) {
        long nc = b->cap ? b->cap * 2 : 256;
        msend *q = realloc(b->v, sizeof *q * (size_t)nc);
        if (!q)
            return CS_ENOMEM;
        b->v = q;
        b->cap = nc;
    }
    b->v[b->n++] = (msend){chunk, link, epoch};
    return CS_OK;
}

/* Integer pairwise flows -> chunk sends: per destination, each rank keeps a
 * list of the chunks it holds for it with the epoch they became usable; a flow
 * of x on n->m at epoch k takes x chunks usable by k. */
static int decompose_pairwise(const inst *in, const model *m, const double *x, sendbuf *out,
                              cs_error *err)
{
    const cs_topology *t = in->t;
    int P = in->P, K = m->K;
    long G = in->G;
    /* per rank: chunk ids and ready epochs (a rank holds at most its supply) */
    long *held = malloc(sizeof *held * (size_t)(G ? G : 1));
    int *ready = malloc(sizeof *ready * (size_t)(G ? G : 1));
    int *owner = malloc(sizeof *owner * (size_t)(G ? G : 1));
    if (!held || !ready || !owner) {
        free(held);
        free(ready);
        free(owner);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    int rc = CS_OK;
    for (int d = 0; d < P && rc == CS_OK; d++) {
        /* the chunks for d, each with its current rank and ready epoch */
        long nh = 0;
        for (long g = 0; g < G; g++)
            if (in->gdst[g] == d) {
                held[nh] = g;
                owner[nh] = in->gsrc[g];
                ready[nh] = 0;
                nh++;
            }
        if (nh == 0)
            continue;
        for (int k = 0; k < K && rc == CS_OK; k++)
            for (int l = 0; l < in->L && rc == CS_OK; l++) {
                int col = flow_col(in, m, d, l, k);
                if (col < 0)
                    continue;
                long units = lround(x[col]);
                int n = t->links[l].src, dst = t->links[l].dst;
                for (long u = 0; u < units; u++) {
                    /* the earliest-ready chunk at n for d (FIFO) */
                    long best = -1;
                    for (long i = 0; i < nh; i++)
                        if (owner[i] == n && ready[i] <= k &&
                            (best < 0 || ready[i] < ready[best]))
                            best = i;
                    if (best < 0) {
                        rc = cs_error_set(err, CS_EINTERNAL, "",
                                          "mcf: flow for rank %d leaves rank %d at epoch %d "
                                          "without a chunk to carry",
                                          d, n, k);
                        break;
                    }
                    if (push_send(out, held[best], l, k)) {
                        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
                        break;
                    }
                    owner[best] = dst;
                    ready[best] = k + in->kappa[l];
                }
            }
    }
    free(held);
    free(ready);
    free(owner);
    return rc;
}

/* Binary copy flows -> sends, without the wasteful ones (TE-CCL's reverse
 * DFS): only the first arrival of a chunk at a rank counts, and a send is
 * kept when its destination needs the chunk or forwards it usefully. */
static int decompose_copy(const inst *in, const model *m, const double *x, sendbuf *out,
                          cs_error *err)
{
    const cs_topology *t = in->t;
    int P = in->P, K = m->K, L = in->L;
    int *first = malloc(sizeof *first * (size_t)P);     /* arrival epoch of the first send in */
    int *first_l = malloc(sizeof *first_l * (size_t)P); /* its link and start epoch */
    int *first_k = malloc(sizeof *first_k * (size_t)P);
    unsigned char *useful = malloc((size_t)P);
    if (!first || !first_l || !first_k || !useful) {
        free(first);
        free(first_l);
        free(first_k);
        free(useful);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    int rc = CS_OK;
    for (long g = 0; g < in->G && rc == CS_OK; g++) {
        for (int n = 0; n < P; n++) {
            first[n] = in->pre[g * P + n] ? 0 : FAR;
            first_l[n] = -1;
            useful[n] = in->need[g * P + n];
        }
        for (int k = 0; k < K; k++)
            for (int l = 0; l < L; l++) {
                int col = m->fcol[fidx(in, K, g, l, k)];
                if (col < 0 || x[col] < 0.5)
                    continue;
                int dst = t->links[l].dst, arr = k + in->kappa[l];
                if (in->pre[g * P + dst] || arr >= first[dst])
                    continue;
                first[dst] = arr;
                first_l[dst] = l;
                first_k[dst] = k;
            }
        /* usefulness flows back along first arrivals, latest first */
        for (int k = K - 1; k >= 0; k--)
            for (int n = 0; n < P; n++)
                if (first_l[n] >= 0 && first_k[n] == k && useful[n])
                    useful[t->links[first_l[n]].src] = 1;
        for (int n = 0; n < P; n++)
            if (first_l[n] >= 0 && useful[n] && push_send(out, g, first_l[n], first_k[n])) {
                rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
                break;
            }
    }
    free(first);
    free(first_l);
    free(first_k);
    free(useful);
    return rc;
}

/* decompose_copy with zero-buffer switch nodes (in->zero_buffer): a node
 * holds a chunk only in the epoch it arrives, so each copy out of it at
 * epoch k needs an upload arriving at k (the model has one: H(g, node, k)
 * <= the arrivals at k).  Ranks keep their first arrival as above; per
 * node and epoch one arriving upload is kept, and only when a kept copy
 * leaves then.  Usefulness flows back, latest epoch first, through the
 * ranks' first arrivals and the nodes' uploads. */
static int decompose_copy_zb(const inst *in, const model *m, const double *x, sendbuf *out,
                             cs_error *err)
{
    const cs_topology *t = in->t;
    int P = in->P, K = m->K, L = in->L, N0 = in->node0, S = P - N0;
    size_t nk = (size_t)S * (size_t)(K + 1);
    int *first = malloc(sizeof *first * (size_t)P), *first_l = malloc(sizeof *first_l * (size_t)P);
    int *first_k = malloc(sizeof *first_k * (size_t)P);
    unsigned char *useful = malloc((size_t)P);
    int *up_l = malloc(sizeof *up_l * (nk ? nk : 1));      /* node x arrival epoch: upload link */
    unsigned char *up_need = malloc(nk ? nk : 1);
    int rc = CS_OK;
    if (!first || !first_l || !first_k || !useful || !up_l || !up_need) {
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
        goto out;
    }
    for (long g = 0; g < in->G && rc == CS_OK; g++) {
        for (int n = 0; n < P; n++) {
            first[n] = in->pre[g * P + n] ? 0 : FAR;
            first_l[n] = -1;
            useful[n] = in->need[g * P + n];
        }
        for (size_t i = 0; i < nk; i++) {
            up_l[i] = -1;
            up_need[i] = 0;
        }
        for (int k = 0; k < K; k++)
            for (int l = 0; l < L; l++) {
                int col = m->fcol[fidx(in, K, g, l, k)];
                if (col < 0 || x[col] < 0.5)
                    continue;
                int dst = t->links[l].dst, arr = k + in->kappa[l];
                if (dst >= N0) {
                    if (arr <= K && up_l[(size_t)(dst - N0) * (K + 1) + arr] < 0)
                        up_l[(size_t)(dst - N0) * (K + 1) + arr] = l;
                    continue;
                }
                if (in->pre[g * P + dst] || arr >= first[dst])
                    continue;
                first[dst] = arr;
                first_l[dst] = l;
                first_k[dst] = k;
            }
        for (int k = K - 1; k >= 0; k--) {
            /* ranks' first arrivals sent at k */
            for (int n = 0; n < N0; n++) {
                if (first_l[n] < 0 || first_k[n] != k || !useful[n])
                    continue;
                int src = t->links[first_l[n]].src;
                if (src < N0) {
                    useful[src] = 1;
                } else if (up_l[(size_t)(src - N0) * (K + 1) + k] >= 0) {
                    up_need[(size_t)(src - N0) * (K + 1) + k] = 1;
                } else {
                    rc = cs_error_set(err, CS_EINTERNAL, "", "zero-buffer decomposition: a "
                                      "copy out of node %d at epoch %d without an arrival",
                                      src, k);
                    break;
                }
            }
            /* uploads sent at k that a kept copy needs */
            for (int j = 0; rc == CS_OK && j < S; j++)
                for (int a = k + 1; a <= K; a++) {
                    int l = up_l[(size_t)j * (K + 1) + a];
                    if (l >= 0 && a - in->kappa[l] == k && up_need[(size_t)j * (K + 1) + a])
                        useful[t->links[l].src] = 1;
                }
            if (rc)
                break;
        }
        for (int n = 0; rc == CS_OK && n < N0; n++)
            if (first_l[n] >= 0 && useful[n] && push_send(out, g, first_l[n], first_k[n]))
                rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
        for (int j = 0; rc == CS_OK && j < S; j++)
            for (int a = 0; a <= K; a++) {
                int l = up_l[(size_t)j * (K + 1) + a];
                if (l >= 0 && up_need[(size_t)j * (K + 1) + a] &&
                    push_send(out, g, l, a - in->kappa[l])) {
                    rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
                    break;
                }
            }
    }
out:
    free(first);
    free(first_l);
    free(first_k);
    free(useful);
    free(up_l);
    free(up_need);
    return rc;
}

/* ---- rounding a fractional pairwise solution ----------------------------------
 * For pairwise instances too large for the MILP: follow the LP's flows in
 * time.  Each (destination, link) accumulates the LP's flow as credit; at
 * epoch k a link sends a chunk for d when its credit reaches one half, a
 * chunk for d is ready at its source and a lane is free (the window
 * capacity of the link and its shared sets, so the schedule stays valid).
 * Chunks the rounding leaves behind then move greedily along shortest
 * paths, into the first free lanes.  The simulated time of the result is
 * compared with the LP bound in the result (bounds.mcf_lp). */

typedef struct occ {
    int cap;            /* epochs tracked */
    int *link;          /* L x cap: sends in flight */
    int *set;           /* nshared x cap */
    int *set_begin, *set_of;  /* CSR: the shared sets of each link */
} occ;

static void occ_free(occ *o)
{
    free(o->link);
    free(o->set);
    free(o->set_begin);
    free(o->set_of);
}

static int occ_init(const inst *in, int cap, occ *o)
{
    const cs_topology *t = in->t;
    memset(o, 0, sizeof *o);
    o->cap = cap;
    o->link = calloc((size_t)in->L * cap, sizeof *o->link);
    o->set = calloc((size_t)(t->nshared ? t->nshared : 1) * cap, sizeof *o->set);
    o->set_begin = calloc((size_t)in->L + 1, sizeof *o->set_begin);
    long n = 0;
    for (int s = 0; s < t->nshared; s++)
        n += t->shared[s].nlinks;
    o->set_of = malloc(sizeof *o->set_of * (size_t)(n ? n : 1));
    if (!o->link || !o->set || !o->set_begin || !o->set_of)
        return CS_ENOMEM;
    for (int s = 0; s < t->nshared; s++)
        for (int i = 0; i < t->shared[s].nlinks; i++)
            o->set_begin[t->shared[s].links[i] + 1]++;
    for (int l = 0; l < in->L; l++)
        o->set_begin[l + 1] += o->set_begin[l];
    int *fill = malloc(sizeof *fill * (size_t)(in->L ? in->L : 1));
    if (!fill)
        return CS_ENOMEM;
    memcpy(fill, o->set_begin, sizeof *fill * (size_t)in->L);
    for (int s = 0; s < t->nshared; s++)
        for (int i = 0; i < t->shared[s].nlinks; i++)
            o->set_of[fill[t->shared[s].links[i]]++] = s;
    free(fill);
    return CS_OK;
}

/* A send on l may start at k: lanes free on the link and its sets for its
 * kappa epochs. */
static bool occ_fits(const inst *in, const occ *o, int l, int k)
{
    const cs_topology *t = in->t;
    if (k + in->kappa[l] > o->cap)
        return false;
    for (int e = k; e < k + in->kappa[l]; e++) {
        if (o->link[(long)l * o->cap + e] >= t->links[l].lanes)
            return false;
        for (int i = o->set_begin[l]; i < o->set_begin[l + 1]; i++) {
            int s = o->set_of[i];
            if (o->set[(long)s * o->cap + e] >= t->shared[s].lanes)
                return false;
        }
    }
    return true;
}

static void occ_take(const inst *in, occ *o, int l, int k)
{
    for (int e = k; e < k + in->kappa[l]; e++) {
        o->link[(long)l * o->cap + e]++;
        for (int i = o->set_begin[l]; i < o->set_begin[l + 1]; i++)
            o->set[(long)o->set_of[i] * o->cap + e]++;
    }
}

/* A copy of o with its own counts (the shared-set index is rebuilt). */
static int occ_clone(const inst *in, const occ *o, occ *c)
{
    int rc = occ_init(in, o->cap, c);
    if (rc)
        return rc;
    memcpy(c->link, o->link, sizeof *c->link * (size_t)in->L * o->cap);
    memcpy(c->set, o->set, sizeof *c->set * (size_t)in->t->nshared * o->cap);
    return CS_OK;
}

static int round_pairwise(const inst *in, const model *m, const double *x, double threshold,
                          sendbuf *out, cs_error *err)
{
    const cs_topology *t = in->t;
    int P = in->P, L = in->L, K = m->K;
    long G = in->G;
    int maxk = 1;
    for (int l = 0; l < L; l++)
        if (in->kappa[l] > maxk)
            maxk = in->kappa[l];
    int cap = 4 * K + 4 * P * maxk + 64;
    occ oc;
    int *pos = malloc(sizeof *pos * (size_t)(G ? G : 1));
    int *ready = malloc(sizeof *ready * (size_t)(G ? G : 1));
    double *credit = calloc((size_t)P * L, sizeof *credit);
    int rc = occ_init(in, cap, &oc);
    if (rc || !pos || !ready || !credit) {
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
        goto out;
    }
    long left = 0;
    for (long g = 0; g < G; g++) {
        pos[g] = in->gdst[g] >= 0 ? in->gsrc[g] : -1;
        ready[g] = 0;
        left += pos[g] >= 0;
    }
    /* chunks by destination, for the scans below */
    for (int k = 0; k < K && left > 0; k++)
        for (int d = 0; d < P; d++)
            for (int l = 0; l < L; l++) {
                int col = flow_col(in, m, d, l, k);
                if (col >= 0)
                    credit[(long)d * L + l] += x[col];
                double *cr = &credit[(long)d * L + l];
                int n = t->links[l].src, dst = t->links[l].dst;
                while (*cr >= threshold && occ_fits(in, &oc, l, k)) {
                    long best = -1;
                    for (long g = 0; g < G; g++)
                        if (pos[g] == n && in->gdst[g] == d && ready[g] <= k &&
                            (best < 0 || ready[g] < ready[best]))
                            best = g;
                    if (best < 0)
                        break;
                    occ_take(in, &oc, l, k);
                    if (push_send(out, best, l, k)) {
                        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
                        goto out;
                    }
                    *cr -= 1.0;
                    ready[best] = k + in->kappa[l];
                    pos[best] = dst;
                    if (dst == d) {
                        pos[best] = -1;
                        left--;
                    }
                }
            }
    /* what the rounding left behind: shortest paths, first free lanes */
    for (int k = 0; left > 0; k++) {
        if (k >= cap) {
            rc = cs_error_set(err, CS_EINTERNAL, "",
                              "mcf rounding: %ld chunks still undelivered after %d epochs", left,
                              cap);
            goto out;
        }
        for (long g = 0; g < G; g++) {
            if (pos[g] < 0 || ready[g] > k)
                continue;
            int n = pos[g], d = in->gdst[g], bl = -1, bd = FAR;
            for (int l = t->out_begin[n]; l < t->out_begin[n + 1]; l++) {
                int via = in->kappa[l] + in->dist[(long)t->links[l].dst * P + d];
                if (via < bd && occ_fits(in, &oc, l, k)) {
                    bd = via;
                    bl = l;
                }
            }
            /* only moves that stay on a shortest path to d */
            if (bl < 0 || bd > in->dist[(long)n * P + d])
                continue;
            occ_take(in, &oc, bl, k);
            if (push_send(out, g, bl, k)) {
                rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
                goto out;
            }
            ready[g] = k + in->kappa[bl];
            pos[g] = t->links[bl].dst == d ? -1 : t->links[bl].dst;
            left -= pos[g] < 0;
        }
    }
out:
    occ_free(&oc);
    free(pos);
    free(ready);
    free(credit);
    return rc;
}

/* ---- a greedy schedule for copy demands -----------------------------------------
 * Epoch by epoch, each link with a free lane sends a chunk its source holds
 * and its destination neither holds nor awaits, the rarest first (fewest
 * holders), ties broken by a seeded random order; only chunks the destination
 * needs or can pass on to a rank that needs them.  When it ends within the
 * LP's horizon it is optimal in makespan and the MILP is not needed. */

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static int greedy_copy(const inst *in, int horizon, uint64_t seed, sendbuf *out, int *end_epoch,
                       cs_error *err)
{
    const cs_topology *t = in->t;
    int P = in->P, L = in->L;
    long G = in->G;
    int maxk = 1;
    for (int l = 0; l < L; l++)
        if (in->kappa[l] > maxk)
            maxk = in->kappa[l];
    int cap = horizon + maxk + 1;
    occ oc;
    int *ready = malloc(sizeof *ready * (size_t)(G ? G : 1) * P); /* FAR: not held/awaited */
    int *holders = calloc((size_t)(G ? G : 1), sizeof *holders);
    long *order = malloc(sizeof *order * (size_t)(G ? G : 1));
    /* holders (and awaiters) of each chunk per locality group: a link
     * between groups is scarce, so it first carries chunks the far group
     * has nowhere yet */
    int ng = t->ngroups > 1 && t->group_of ? t->ngroups : 0;
    int *ghas = ng ? calloc((size_t)(G ? G : 1) * ng, sizeof *ghas) : NULL;
    int rc = occ_init(in, cap, &oc);
    if (rc || !ready || !holders || !order || (ng && !ghas)) {
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
        goto out;
    }
    long missing = 0;
    for (long g = 0; g < G; g++) {
        order[g] = g;
        for (int n = 0; n < P; n++) {
            ready[g * P + n] = in->pre[g * P + n] ? 0 : FAR;
            holders[g] += in->pre[g * P + n];
            missing += in->need[g * P + n];
            if (ng && in->pre[g * P + n] && t->group_of[n] >= 0)
                ghas[g * ng + t->group_of[n]]++;
        }
    }
    int last = 0;
    uint64_t rs = seed * 0x9E3779B97F4A7C15ULL + 1;
    /* Copy-capable switches (the node view: nodes from first_node on): odd
     * seeds visit each epoch the links out of the switch nodes first (copies
     * down to every port that lacks a chunk the node holds), then the links
     * up to them, then the rest, so a chunk goes up once and comes down
     * everywhere before unicast takes the ports; even seeds keep the plain
     * order (on an all-to-all demand like allgather the ingress ports are the
     * bottleneck either way, and the plain order avoids the extra hop; they
     * leave the nodes out, so they are the hyper-edge form's greedy), and
     * the shortest of all is kept. */
    int first_node = t->node_view ? t->ranks - t->nswitch_nodes : t->ranks;
    bool nodes_first = t->node_view && t->nswitch_nodes > 0 && (seed & 1);
    for (int k = 0; k < horizon && missing > 0; k++) {
        /* a fresh random order each epoch, then rarest first */
        for (long i = G - 1; i > 0; i--) {
            long j = (long)(rng_next(&rs) % (uint64_t)(i + 1));
            long tmp = order[i];
            order[i] = order[j];
            order[j] = tmp;
        }
        for (long i = 1; i < G; i++) { /* stable insertion sort by holders */
            long v = order[i], j = i - 1;
            while (j >= 0 && holders[order[j]] > holders[v]) {
                order[j + 1] = order[j];
                j--;
            }
            order[j + 1] = v;
        }
        int l0 = (int)(rng_next(&rs) % (uint64_t)L);
        for (int pass = nodes_first ? 0 : 2; pass < 3; pass++)
        for (int li = 0; li < L; li++) {
            int l = (l0 + li) % L;
            int n = t->links[l].src, m = t->links[l].dst;
            if (nodes_first && (n >= first_node ? 0 : m >= first_node ? 1 : 2) != pass)
                continue;
            /* even seeds: the hyper-edge form's greedy exactly (no node), so
             * the copy form is never worse than it */
            if (!nodes_first && (n >= first_node || m >= first_node))
                continue;
            int gm = ng ? t->group_of[m] : -1;
            bool cross = ng && gm >= 0 && t->group_of[n] != gm;
            for (long i = 0; i < 2 * G && occ_fits(in, &oc, l, k); i++) {
                /* cross-group links: a first pass over chunks new to the far group */
                if (i >= G && !cross)
                    break;
                long g = order[i % G];
                if (cross && i < G && ghas[g * ng + gm] > 0)
                    continue;
                /* a zero-buffer node copies a chunk only in the epoch it
                 * arrives, and may get it again once that epoch passed */
                bool zn = in->zero_buffer && n >= in->node0;
                bool zm = in->zero_buffer && m >= in->node0;
                if (zn ? ready[g * P + n] != k : ready[g * P + n] > k)
                    continue;
                if (zm ? ready[g * P + m] < FAR && ready[g * P + m] >= k : ready[g * P + m] < FAR)
                    continue;
                int arr = k + in->kappa[l];
                int re = in->reach[g * P + m];
                if (re >= FAR || arr + re > horizon)
                    continue;
                occ_take(in, &oc, l, k);
                if (push_send(out, g, l, k)) {
                    rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
                    goto out;
                }
                ready[g * P + m] = arr;
                holders[g]++;
                if (gm >= 0)
                    ghas[g * ng + gm]++;
                missing -= in->need[g * P + m];
                if (arr > last)
                    last = arr;
            }
        }
    }
    *end_epoch = missing > 0 ? -1 : last;
out:
    occ_free(&oc);
    free(ready);
    free(holders);
    free(order);
    free(ghas);
    return rc;
}

static int cmp_send(const void *a, const void *b)
{
    const msend *x = a, *y = b;
    if (x->epoch != y->epoch)
        return x->epoch < y->epoch ? -1 : 1;
    if (x->chunk != y->chunk)
        return x->chunk < y->chunk ? -1 : 1;
    return (x->link > y->link) - (x->link < y->link);
}

/* ---- ASAP compaction ------------------------------------------------------------
 * The epoch grid pads every send to whole epochs (a 3.0 us switch send takes
 * two 1.7 us epochs) and starts it on an epoch boundary.  The schedule's
 * sends, taken in epoch order, are started as early as the continuous cost
 * model allows instead (the simulator's and the verifier's timing): once the
 * chunk has arrived at the source and the link and each of its shared sets
 * have a lane free for the whole send.  Every send then starts no later than
 * its epoch: an earlier send that overlaps it in time was in flight at its
 * epoch in the epoch model too, and the model kept those below the lanes; and
 * its chunk arrived by the epoch boundary, as the model required.  So
 * compaction never makes a schedule slower; the result's start_us/end_us are
 * the compacted ones (step stays the epoch). */

typedef struct ivlist {
    double *s, *e;
    int n, cap;
} ivlist;

static int ivl_push(ivlist *r, double s, double e)
{
    if (r->n == r->cap) {
        int nc = r->cap ? 2 * r->cap : 8;
        double *a = realloc(r->s, sizeof *a * (size_t)nc);
        if (!a)
            return CS_ENOMEM;
        r->s = a;
        double *b = realloc(r->e, sizeof *b * (size_t)nc);
        if (!b)
            return CS_ENOMEM;
        r->e = b;
        r->cap = nc;
    }
    r->s[r->n] = s;
    r->e[r->n] = e;
    r->n++;
    return CS_OK;
}

/* Fewer than `lanes` intervals of r overlap any instant of [t, t + d). */
static bool ivl_fits(const ivlist *r, int lanes, double t, double d)
{
    const double eps = 1e-9;
    if (r->n < lanes)
        return true;
    /* the overlap is largest at t or at an interval's start inside the window */
    for (int i = -1; i < r->n; i++) {
        double p = i < 0 ? t : r->s[i];
        if (i >= 0 && !(p > t + eps && p < t + d - eps))
            continue;
        int cnt = 0;
        for (int j = 0; j < r->n; j++)
            cnt += r->s[j] <= p + eps && r->e[j] > p + eps;
        if (cnt >= lanes)
            return false;
    }
    return true;
}

static int cmp_double_asc(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* start[i] for the sends of sb (sorted by cmp_send), compacted as above;
 * falls back to the epoch grid's times if a send would start later than its
 * epoch (it cannot, see above: a guard, not a path). */
/* How many intervals link l and its shared sets hold: the most candidate
 * starts appended for l by append_starts. */
static long ends_on(const ivlist *res, const occ *oc, int L, int l)
{
    long n = res[l].n;
    for (int k = oc->set_begin[l]; k < oc->set_begin[l + 1]; k++)
        n += res[L + oc->set_of[k]].n;
    return n;
}

/* Appends to cand[nc..] every end on link l and on its shared sets, less
 * off, that comes after ready: where a send that holds l from off after its
 * start may start once something there frees.  Returns the new count. */
static long append_starts(const ivlist *res, const occ *oc, int L, int l, double off,
                          double ready, double *cand, long nc)
{
    for (int k = -1; k < oc->set_begin[l + 1] - oc->set_begin[l]; k++) {
        const ivlist *r = k < 0 ? &res[l] : &res[L + oc->set_of[oc->set_begin[l] + k]];
        for (int e = 0; e < r->n; e++)
            if (r->e[e] - off > ready)
                cand[nc++] = r->e[e] - off;
    }
    return nc;
}

static int compact_asap(const inst *in, const sendbuf *sb, double *start)
{
    const cs_topology *t = in->t;
    int P = in->P, L = in->L;
    long G = in->G;
    int ns = t->nshared;
    double *arr = malloc(sizeof *arr * (size_t)(G ? G : 1) * P);
    ivlist *res = calloc((size_t)L + ns, sizeof *res);
    double *cand = NULL;
    long cand_cap = 0;
    occ oc;
    int rc = occ_init(in, 1, &oc);
    if (rc || !arr || !res) {
        rc = CS_ENOMEM;
        goto out;
    }
    for (long i = 0; i < G * P; i++)
        arr[i] = INFINITY;
    for (long g = 0; g < G; g++)
        for (int n = 0; n < P; n++)
            if (in->pairwise ? in->gsrc[g] == n : in->pre[g * P + n])
                arr[g * P + n] = 0;
    bool fallback = false;
    for (long i = 0; i < sb->n && !fallback; i++) {
        const msend *x = &sb->v[i];
        int l = x->link, src = t->links[l].src, dst = t->links[l].dst;
        double d = in->send_us[l], ready = arr[x->chunk * P + src];
        double grid = x->epoch * in->tau;
        if (!(ready <= grid + 1e-9)) {
            fallback = true;
            break;
        }
        /* candidate starts: ready, and every end on the link and its sets after it */
        long need = 1 + ends_on(res, &oc, L, l);
        if (need > cand_cap) {
            double *c2 = realloc(cand, sizeof *c2 * (size_t)need);
            if (!c2) {
                rc = CS_ENOMEM;
                goto out;
            }
            cand = c2;
            cand_cap = need;
        }
        long nc = 1;
        cand[0] = ready;
        nc = append_starts(res, &oc, L, l, 0, ready, cand, nc);
        qsort(cand, (size_t)nc, sizeof *cand, cmp_double_asc);
        double s0 = INFINITY;
        for (int c = 0; c < nc && !isfinite(s0); c++) {
            double tt = cand[c];
            if (tt > grid + 1e-9)
                break;
            bool ok = ivl_fits(&res[l], t->links[l].lanes, tt, d);
            for (int k = oc.set_begin[l]; ok && k < oc.set_begin[l + 1]; k++)
                ok = ivl_fits(&res[L + oc.set_of[k]], t->shared[oc.set_of[k]].lanes, tt, d);
            if (ok)
                s0 = tt;
        }
        if (!isfinite(s0)) {
            fallback = true;
            break;
        }
        start[i] = s0;
        if (ivl_push(&res[l], s0, s0 + d)) {
            rc = CS_ENOMEM;
            goto out;
        }
        for (int k = oc.set_begin[l]; k < oc.set_begin[l + 1]; k++)
            if (ivl_push(&res[L + oc.set_of[k]], s0, s0 + d)) {
                rc = CS_ENOMEM;
                goto out;
            }
        if (s0 + d < arr[x->chunk * P + dst])
            arr[x->chunk * P + dst] = s0 + d;
    }
    if (fallback)
        for (long i = 0; i < sb->n; i++)
            start[i] = sb->v[i].epoch * in->tau;
out:
    if (res)
        for (int i = 0; i < L + ns; i++) {
            free(res[i].s);
            free(res[i].e);
        }
    free(res);
    free(cand);
    free(arr);
    occ_free(&oc);
    return rc;
}

/* Zero-buffer switch nodes (in->zero_buffer): compaction moves an upload to
 * a node and the copies that leave the node when it arrives (same chunk,
 * the copies' epoch = the upload's arrival epoch) as one unit: the upload
 * starts at T and every copy at T + its send time, so the node never holds
 * the chunk in continuous time either.  T is the earliest time at which the
 * chunk is at the uploader and the upload's and every copy's link and sets
 * have a lane free, and at the latest the grid's, with the upload aligned
 * to end at its arrival epoch's boundary (inside the epochs the model
 * counts it in flight).  Uploads no copy leaves with are dead ends and are
 * dropped (keep[i] false).  If a unit finds no time by its grid time, the
 * whole schedule keeps the grid's times (uploads aligned to their arrival
 * boundary): the epoch model's schedule, valid as it is. */
static bool zb_fits(const inst *in, ivlist *res, const occ *oc, int l, double tt, double d)
{
    const cs_topology *t = in->t;
    if (!ivl_fits(&res[l], t->links[l].lanes, tt, d))
        return false;
    for (int k = oc->set_begin[l]; k < oc->set_begin[l + 1]; k++)
        if (!ivl_fits(&res[in->L + oc->set_of[k]], t->shared[oc->set_of[k]].lanes, tt, d))
            return false;
    return true;
}

static int zb_take(const inst *in, ivlist *res, const occ *oc, int l, double tt, double d)
{
    if (ivl_push(&res[l], tt, tt + d))
        return CS_ENOMEM;
    for (int k = oc->set_begin[l]; k < oc->set_begin[l + 1]; k++)
        if (ivl_push(&res[in->L + oc->set_of[k]], tt, tt + d))
            return CS_ENOMEM;
    return CS_OK;
}

/* Takes back the last zb_take on l (its link's and sets' last intervals). */
static void zb_untake(const inst *in, ivlist *res, const occ *oc, int l)
{
    res[l].n--;
    for (int k = oc->set_begin[l]; k < oc->set_begin[l + 1]; k++)
        res[in->L + oc->set_of[k]].n--;
}

/* First index of sb (sorted by cmp_send) at or after (epoch, chunk). */
static long sends_lower_bound(const sendbuf *sb, int epoch, long chunk)
{
    long lo = 0, hi = sb->n;
    while (lo < hi) {
        long mid = lo + (hi - lo) / 2;
        const msend *y = &sb->v[mid];
        if (y->epoch < epoch || (y->epoch == epoch && y->chunk < chunk))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int compact_zero_buffer(const inst *in, const sendbuf *sb, double *start, bool *keep)
{
    const cs_topology *t = in->t;
    int P = in->P, L = in->L, N0 = in->node0;
    long G = in->G, n = sb->n;
    int ns = t->nshared;
    double *arr = malloc(sizeof *arr * (size_t)(G ? G : 1) * P);
    long *up_of = malloc(sizeof *up_of * (size_t)(n ? n : 1)); /* copy -> its upload, or -1 */
    long *cbeg = calloc((size_t)n + 1, sizeof *cbeg);           /* CSR: an upload's copies */
    long *clist = malloc(sizeof *clist * (size_t)(n ? n : 1));
    ivlist *res = calloc((size_t)L + ns, sizeof *res);
    double *cand = NULL;
    long cand_cap = 0;
    occ oc;
    int rc = occ_init(in, 1, &oc);
    if (rc || !arr || !up_of || !cbeg || !clist || !res) {
        rc = CS_ENOMEM;
        goto out;
    }
    bool fallback = false;
    /* pair each copy out of a node with the first upload of its chunk that
     * arrives at that node in the copy's epoch */
    for (long i = 0; i < n; i++) {
        keep[i] = true;
        up_of[i] = -1;
    }
    for (long i = 0; i < n; i++) {
        const msend *y = &sb->v[i];
        int dst = t->links[y->link].dst;
        if (dst < N0)
            continue;
        int a = y->epoch + in->kappa[y->link];
        for (long j = sends_lower_bound(sb, a, y->chunk);
             j < n && sb->v[j].epoch == a && sb->v[j].chunk == y->chunk; j++)
            if (t->links[sb->v[j].link].src == dst && up_of[j] < 0)
                up_of[j] = i;
    }
    for (long i = 0; i < n; i++) {
        if (t->links[sb->v[i].link].src >= N0 && up_of[i] < 0)
            fallback = true; /* cannot happen: the model and the greedy pair them */
        if (up_of[i] >= 0)
            cbeg[up_of[i] + 1]++;
    }
    for (long i = 0; i < n; i++)
        cbeg[i + 1] += cbeg[i];
    {
        long *fill = calloc((size_t)(n ? n : 1), sizeof *fill);
        if (!fill) {
            rc = CS_ENOMEM;
            goto out;
        }
        for (long i = 0; i < n; i++)
            if (up_of[i] >= 0)
                clist[cbeg[up_of[i]] + fill[up_of[i]]++] = i;
        free(fill);
    }
    for (long i = 0; i < n; i++)
        if (t->links[sb->v[i].link].dst >= N0 && cbeg[i + 1] == cbeg[i])
            keep[i] = false; /* a dead end: nothing leaves with it */
    for (long i = 0; i < G * P; i++)
        arr[i] = INFINITY;
    for (long g = 0; g < G; g++)
        for (int r = 0; r < P; r++)
            if (in->pre[g * P + r])
                arr[g * P + r] = 0;
    for (long i = 0; i < n && !fallback; i++) {
        const msend *x = &sb->v[i];
        int l = x->link, src = t->links[l].src, dst = t->links[l].dst;
        if (!keep[i] || src >= N0)
            continue; /* copies go with their upload */
        double d = in->send_us[l], ready = arr[x->chunk * P + src];
        bool up = dst >= N0;
        double grid = up ? (x->epoch + in->kappa[l]) * in->tau - d : x->epoch * in->tau;
        if (!(ready <= grid + 1e-9)) {
            fallback = true;
            break;
        }
        /* candidate starts: ready, every end on the upload's resources, and
         * every end on a copy's resources less the upload's time */
        long need = 1;
        for (long c = -1; c < cbeg[i + 1] - cbeg[i]; c++)
            need += ends_on(res, &oc, L, c < 0 ? l : sb->v[clist[cbeg[i] + c]].link);
        if (need > cand_cap) {
            double *c2 = realloc(cand, sizeof *c2 * (size_t)need);
            if (!c2) {
                rc = CS_ENOMEM;
                goto out;
            }
            cand = c2;
            cand_cap = need;
        }
        long nc = 1;
        cand[0] = ready;
        for (long c = -1; c < cbeg[i + 1] - cbeg[i]; c++)
            nc = append_starts(res, &oc, L, c < 0 ? l : sb->v[clist[cbeg[i] + c]].link,
                               c < 0 ? 0 : d, ready, cand, nc);
        qsort(cand, (size_t)nc, sizeof *cand, cmp_double_asc);
        double s0 = INFINITY;
        for (long c = 0; c < nc && !isfinite(s0); c++) {
            double tt = cand[c];
            if (tt > grid + 1e-9)
                break;
            if (!zb_fits(in, res, &oc, l, tt, d))
                continue;
            /* the copies, each taken while the next is checked (two copies
             * may share a set), then all taken back */
            long taken = 0;
            bool ok = true;
            for (long q = cbeg[i]; ok && q < cbeg[i + 1]; q++) {
                int lj = sb->v[clist[q]].link;
                ok = zb_fits(in, res, &oc, lj, tt + d, in->send_us[lj]);
                if (ok) {
                    if (zb_take(in, res, &oc, lj, tt + d, in->send_us[lj])) {
                        rc = CS_ENOMEM;
                        goto out;
                    }
                    taken++;
                }
            }
            for (long q = cbeg[i] + taken - 1; q >= cbeg[i]; q--)
                zb_untake(in, res, &oc, sb->v[clist[q]].link);
            if (ok)
                s0 = tt;
        }
        if (!isfinite(s0)) {
            fallback = true;
            break;
        }
        start[i] = s0;
        if (zb_take(in, res, &oc, l, s0, d)) {
            rc = CS_ENOMEM;
            goto out;
        }
        if (!up) {
            if (s0 + d < arr[x->chunk * P + dst])
                arr[x->chunk * P + dst] = s0 + d;
            continue;
        }
        for (long q = cbeg[i]; q < cbeg[i + 1]; q++) {
            long j = clist[q];
            int lj = sb->v[j].link, r = t->links[lj].dst;
            start[j] = s0 + d;
            if (zb_take(in, res, &oc, lj, s0 + d, in->send_us[lj])) {
                rc = CS_ENOMEM;
                goto out;
            }
            if (s0 + d + in->send_us[lj] < arr[sb->v[j].chunk * P + r])
                arr[sb->v[j].chunk * P + r] = s0 + d + in->send_us[lj];
        }
    }
    if (fallback)
        for (long i = 0; i < n; i++) {
            const msend *x = &sb->v[i];
            bool up = t->links[x->link].dst >= N0;
            start[i] = up ? (x->epoch + in->kappa[x->link]) * in->tau - in->send_us[x->link]
                          : x->epoch * in->tau;
        }
out:
    if (res)
        for (int i = 0; i < L + ns; i++) {
            free(res[i].s);
            free(res[i].e);
        }
    free(res);
    free(cand);
    free(arr);
    free(up_of);
    free(cbeg);
    free(clist);
    occ_free(&oc);
    return rc;
}

/* The schedule as a timed algorithm, its sends compacted (above); *end_us
 * gets the compacted completion time. */
static int to_algorithm(const inst *in, sendbuf *sb, cs_algorithm **out, double *end_us,
                        cs_error *err)
{
    qsort(sb->v, (size_t)sb->n, sizeof *sb->v, cmp_send);
    double *start = malloc(sizeof *start * (size_t)(sb->n ? sb->n : 1));
    bool *keep = in->zero_buffer ? malloc(sizeof *keep * (size_t)(sb->n ? sb->n : 1)) : NULL;
    if (!start || (in->zero_buffer && !keep) ||
        (in->zero_buffer ? compact_zero_buffer(in, sb, start, keep)
                         : compact_asap(in, sb, start)) != CS_OK) {
        free(start);
        free(keep);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    if (keep) { /* the dead ends out */
        long w = 0;
        for (long i = 0; i < sb->n; i++)
            if (keep[i]) {
                start[w] = start[i];
                sb->v[w++] = sb->v[i];
            }
        sb->n = w;
        free(keep);
    }
    int steps = sb->n ? sb->v[sb->n - 1].epoch + 1 : 1;
    cs_algorithm *a = NULL;
    int rc = algorithm_new(in->c, in->t->name, in->P, in->C, steps, &a, err);
    if (rc) {
        free(start);
        return rc;
    }
    snprintf(a->method, sizeof a->method, "mcf");
    a->timed_chunk_bytes = in->chunk_bytes;
    if (algorithm_reserve_sends(a, sb->n) != CS_OK) {
        algorithm_free(a);
        free(start);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    double end = 0;
    for (long i = 0; i < sb->n; i++) {
        const msend *s = &sb->v[i];
        const cs_link *l = &in->t->links[s->link];
        double fin = start[i] + in->send_us[s->link];
        if (fin > end)
            end = fin;
        rc = algorithm_add_timed_send(a, s->chunk, l->src, l->dst, s->epoch, CS_OP_COPY,
                                      start[i], fin);
        if (rc) {
            algorithm_free(a);
            free(start);
            return cs_error_set(err, rc, "", "cannot add send %ld", i);
        }
    }
    free(start);
    if ((rc = algorithm_sort_by_time(a)) != CS_OK) {
        algorithm_free(a);
        return cs_error_set(err, rc, "", "cannot order the sends by time");
    }
    *end_us = end;
    *out = a;
    return CS_OK;
}

/* The completion time (us) of a send list: the latest end. */
static double sends_end_us(const inst *in, const sendbuf *sb)
{
    double e = 0;
    for (long i = 0; i < sb->n; i++) {
        double v = sb->v[i].epoch * in->tau + in->send_us[sb->v[i].link];
        if (v > e)
            e = v;
    }
    return e;
}

/* A lower bound (us) on the completion of any schedule in the epoch model
 * when horizon K-1 is infeasible: some arrival is at epoch >= K, so its send
 * ends after (K - kappa_l) tau + send_us_l > (K - 1) tau. */
static double horizon_time_bound(const inst *in, int K)
{
    double slack = INFINITY;
    for (int l = 0; l < in->L; l++) {
        double s = in->send_us[l] - (in->kappa[l] - 1) * in->tau;
        if (s < slack)
            slack = s;
    }
    return (K - 1) * in->tau + (isfinite(slack) ? slack : 0);
}

/* The LP's flows rounded with a few credit thresholds; the earliest-ending
 * schedule is kept in *sb. */
static int round_best(const inst *in, const model *m, const double *x, sendbuf *sb,
                      cs_error *err)
{
    static const double thresholds[] = {0.5, 0.25, 0.75, 0.1, 0.9, 0.4, 0.6};
    double best_end = INFINITY;
    sendbuf trial = {0};
    int rc = CS_OK;
    sb->n = 0;
    for (size_t i = 0; i < sizeof thresholds / sizeof *thresholds && rc == CS_OK; i++) {
        trial.n = 0;
        rc = round_pairwise(in, m, x, thresholds[i], &trial, err);
        double e = rc == CS_OK ? sends_end_us(in, &trial) : INFINITY;
        if (e < best_end) {
            best_end = e;
            sendbuf tmp = *sb;
            *sb = trial;
            trial = tmp;
        }
    }
    free(trial.v);
    return rc;
}

/* The epoch after a schedule's last arrival. */
static int sends_end_epoch(const inst *in, const sendbuf *sb)
{
    int e = 0;
    for (long i = 0; i < sb->n; i++) {
        int v = sb->v[i].epoch + in->kappa[sb->v[i].link];
        if (v > e)
            e = v;
    }
    return e;
}

/* ---- A* rounds (TE-CCL section 4.2, Appendix D) ----------------------------------
 * For instances whose full model is too large: time is cut into rounds of
 * R epochs, and each round is a small MILP over its R epochs only, solved
 * one after the other with the state carried over: where each chunk is and
 * from which epoch it is usable there (chunks sent late in a round arrive in
 * the next one: R >= the longest kappa keeps that within one round, the
 * paper's choice), and the lanes that sends of earlier rounds still hold.
 * A round does not have to deliver anything (it would be infeasible), so its
 * objective rewards progress: TE-CCL adds logical links from every rank to
 * every destination weighted by Floyd-Warshall distances and pays for
 * chunks by their distance at the round's end.  Here that reward has A*'s
 * form f = g + h: a chunk delivered in the round costs its arrival epoch; one
 * that ends the round at rank x, usable there from epoch a, costs
 * max(R, a) + dist(x, d), the kappa-weighted distance being a lower bound on
 * the epochs still needed.  The round minimizes the sum of (T0 + f)^2 (the
 * squares weigh the latest chunks most, leaning toward the makespan; a
 * send's coefficient is the change of its chunk's cost, so only the round's
 * sends are variables), with a little preference for earlier sends.  Every
 * send along a shortest path lowers the cost, so each round makes progress
 * while lanes are free.  Small rounds go to CBC for a moment; otherwise (or
 * without an integer solution) the round's LP is rounded to chunks, and
 * lanes left idle carry chunks greedily along shortest paths.  This part is
 * for pairwise demands (flows by destination); copy demands have their own
 * rounds below. */

#define MCF_ASTAR_DEFAULT_EPOCHS 8
/* astar 0: A* when the full model's estimated columns exceed this */
#define MCF_ASTAR_AUTO_COLUMNS 100000
#define MCF_ASTAR_ROUND_LIMIT_S 20.0
#define MCF_ASTAR_MILP_LIMIT_S 2.0
/* Larger rounds go to the LP directly: CBC rarely finishes them in time. */
#define MCF_ASTAR_MILP_MAX_COLUMNS 12000

static double sq(double x) { return x * x; }

static bool use_astar(const inst *in, const cs_mcf_options *o)
{
    if (o->astar < 0)
        return false;
    if (o->astar > 0)
        return true;
    if (!in->pairwise || o->epochs > 0) /* copy demands: on request (the greedy covers
                                            large ones); a fixed horizon: the full model */
        return false;
    /* auto: when the full model would be too large for the LP search
     * (ndv2:2 alltoall with 2 chunks, ~133k, and ndv2:4, ~970k: their LP
     * searches do not finish in 10 and 5 minutes; ndv2:2 with 1, ~68k: 11 s) */
    long est = mcf_estimate_columns(in->t, in->c, o);
    long lim = o->max_columns / 4 < MCF_ASTAR_AUTO_COLUMNS ? o->max_columns / 4
                                                           : MCF_ASTAR_AUTO_COLUMNS;
    return est > lim;
}

static int astar_round_epochs(const inst *in, const cs_mcf_options *o)
{
    int maxk = 1;
    for (int l = 0; l < in->L; l++)
        if (in->kappa[l] > maxk)
            maxk = in->kappa[l];
    int R = o->astar_epochs > 0 ? o->astar_epochs : MCF_ASTAR_DEFAULT_EPOCHS;
    return R < maxk ? maxk : R;
}

/* One round's moves when the MILP gives none: chunks usable in [T0, T0+R)
 * move along shortest paths into free lanes. */
static int astar_greedy_round(const inst *in, occ *oc, int T0, int R, int *pos, int *ready,
                              long *left, sendbuf *out)
{
    const cs_topology *t = in->t;
    int P = in->P;
    for (int k = T0; k < T0 + R && *left > 0; k++)
        for (long g = 0; g < in->G; g++) {
            if (pos[g] < 0 || ready[g] > k)
                continue;
            int n = pos[g], d = in->gdst[g], bl = -1, bd = FAR;
            for (int l = t->out_begin[n]; l < t->out_begin[n + 1]; l++) {
                int via = in->kappa[l] + in->dist[(long)t->links[l].dst * P + d];
                if (via < bd && occ_fits(in, oc, l, k)) {
                    bd = via;
                    bl = l;
                }
            }
            if (bl < 0 || bd > in->dist[(long)n * P + d])
                continue;
            occ_take(in, oc, bl, k);
            if (push_send(out, g, bl, k))
                return CS_ENOMEM;
            ready[g] = k + in->kappa[bl];
            pos[g] = t->links[bl].dst == d ? -1 : t->links[bl].dst;
            *left -= pos[g] < 0;
        }
    return CS_OK;
}

/* stats.astar.solver_crashes, and the first crash's message when there was
 * one: the schedule is valid, but those rounds lost their solver's answer */
static void astar_note_crashes(const run *r, json_t *info)
{
    if (!info)
        return;
    json_object_set_new(info, "solver_crashes", json_integer(r->solver_crashes));
    if (r->solver_crashes > 0)
        json_object_set_new(info, "solver_crash",
                            json_sprintf("%s; those rounds fell back to %s", r->crash,
                                         "the LP rounding or the greedy"));
}

/* Whether round T0 of R epochs may start: the epoch limit and cancellation,
 * shared by both A* drivers; `left` counts what is still to be delivered. */
static int astar_round_may_start(const run *r, int T0, int R, int limit, long left,
                                 const char *what_left, cs_error *err)
{
    if (T0 + R > limit)
        return cs_error_set(err, CS_ELIMIT, "options.max_epochs",
                            "A* rounds: %ld %s still undelivered after %d epochs", left,
                            what_left, T0);
    if (r->o->cancel && cs_cancel_requested(r->o->cancel))
        return cs_error_set(err, CS_ECANCELLED, "", "cancelled");
    return CS_OK;
}

/* After the greedy filled the rounds the time limit left: a timeout when it
 * could not finish either. */
static int astar_after_greedy_fill(long left, const char *what_left, cs_error *err)
{
    if (left > 0)
        return cs_error_set(err, CS_ETIMEOUT, "options.time_limit_s",
                            "A* rounds: %ld %s undelivered at the time limit", left, what_left);
    return CS_OK;
}

/* A round's capacity rows, for both kinds of rounds: on each link and shared
 * set at each of the round's R epochs, the round's sends in flight plus what
 * earlier rounds' sends still hold there (oc, from absolute epoch T0) stay
 * within the lanes.  fcol[(q * L + l) * R + k] is commodity q's flow column
 * on link l at local epoch k (-1: none), for nq commodities (destinations of
 * pairwise rounds, chunks of copy rounds). */
static void astar_capacity_rows(const inst *in, const occ *oc, int T0, int R, const int *fcol,
                                long nq, mcf_lp *lp)
{
    const cs_topology *t = in->t;
    int L = in->L;
    for (int l = 0; l < L; l++)
        for (int k = 0; k < R; k++) {
            int row = -1;
            for (long q = 0; q < nq; q++)
                for (int k2 = k - in->kappa[l] + 1; k2 <= k; k2++) {
                    int col = k2 >= 0 ? fcol[(q * L + l) * R + k2] : -1;
                    if (col < 0)
                        continue;
                    if (row < 0)
                        row = mcf_lp_add_row(lp, -INFINITY,
                                             t->links[l].lanes -
                                                 oc->link[(long)l * oc->cap + T0 + k]);
                    mcf_lp_add_coef(lp, row, col, 1.0);
                }
        }
    for (int sidx = 0; sidx < t->nshared; sidx++) {
        const cs_shared *sh = &t->shared[sidx];
        for (int k = 0; k < R; k++) {
            int row = -1;
            for (int i = 0; i < sh->nlinks; i++) {
                int l = sh->links[i];
                for (long q = 0; q < nq; q++)
                    for (int k2 = k - in->kappa[l] + 1; k2 <= k; k2++) {
                        int col = k2 >= 0 ? fcol[(q * L + l) * R + k2] : -1;
                        if (col < 0)
                            continue;
                        if (row < 0)
                            row = mcf_lp_add_row(lp, -INFINITY,
                                                 sh->lanes -
                                                     oc->set[(long)sidx * oc->cap + T0 + k]);
                        mcf_lp_add_coef(lp, row, col, 1.0);
                    }
            }
        }
    }
}

/* The two drivers (this one and astar_copy) share the round gate, the
 * timeout after the greedy fill and the capacity rows; the rest differs per
 * kind of demand: the state (a position per chunk here, a holding per chunk
 * and rank there), the model, the solve (MILP then LP rounded here, MILP
 * from the greedy's start there), how an answer becomes sends, and when the
 * greedy runs after a solved round (always here, to fill lanes a rounded
 * LP left idle; only after a round that moved nothing there).  One driver
 * with per-kind callbacks was tried on paper: about 40 lines of loop
 * control would be shared, for a state struct, an adapter and a callback
 * table per kind, no shorter and harder to follow. */
static int astar_pairwise(run *r, sendbuf *out, json_t **info, cs_error *err)
{
    const inst *in = r->in;
    const cs_mcf_options *o = r->o;
    const cs_topology *t = in->t;
    int P = in->P, L = in->L;
    long G = in->G;
    int R = astar_round_epochs(in, o);
    int maxk = 1;
    for (int l = 0; l < L; l++)
        if (in->kappa[l] > maxk)
            maxk = in->kappa[l];
    int limit = 4 * o->max_epochs; /* epochs the rounds may use in all */
    int cap = limit + R + maxk + 1;
    occ oc;
    int *pos = malloc(sizeof *pos * (size_t)(G ? G : 1));
    int *ready = malloc(sizeof *ready * (size_t)(G ? G : 1));
    int *sup = malloc(sizeof *sup * (size_t)P * P * R);
    int *ea = malloc(sizeof *ea * (size_t)P * P);
    double *credit = malloc(sizeof *credit * (size_t)P * (L ? L : 1));
    int rc = occ_init(in, cap, &oc);
    int rounds = 0, lp_rounds = 0, milp_rounds = 0, greedy_rounds = 0;
    bool timed_out = false;
    long max_cols = 0;
    double t0 = cs_now(), slowest = 0;
    if (rc || !pos || !ready || !sup || !ea || !credit) {
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
        goto out;
    }
    long left = 0;
    for (long g = 0; g < G; g++) {
        pos[g] = in->gdst[g] >= 0 ? in->gsrc[g] : -1;
        ready[g] = 0;
        left += pos[g] >= 0;
    }
    for (int T0 = 0; left > 0; T0 += R) {
        if ((rc = astar_round_may_start(r, T0, R, limit, left, "chunks", err)) != CS_OK)
            goto out;
        if (out_of_time(r)) {
            /* the rest greedily (milliseconds): a valid schedule, not none */
            for (int T1 = T0; left > 0 && T1 + R <= limit; T1 += R, greedy_rounds++)
                if (astar_greedy_round(in, &oc, T1, R, pos, ready, &left, out)) {
                    rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
                    goto out;
                }
            if ((rc = astar_after_greedy_fill(left, "chunks", err)) != CS_OK)
                goto out;
            timed_out = true;
            break;
        }
        rounds++;
        /* the state: chunks per (destination, rank, local epoch usable) */
        memset(sup, 0, sizeof *sup * (size_t)P * P * R);
        for (long g = 0; g < G; g++) {
            if (pos[g] < 0)
                continue;
            int e = ready[g] - T0;
            if (e < 0)
                e = 0;
            if (e < R)
                sup[((long)in->gdst[g] * P + pos[g]) * R + e]++;
        }
        for (int d = 0; d < P; d++)
            for (int n = 0; n < P; n++) {
                int best = FAR;
                for (int m = 0; m < P; m++) {
                    int dm = in->dist[(long)m * P + n];
                    if (dm >= FAR)
                        continue;
                    for (int e = 0; e < R && e + dm < best; e++)
                        if (sup[((long)d * P + m) * R + e] > 0)
                            best = e + dm;
                }
                ea[(long)d * P + n] = best;
            }
        /* the round's model */
        model m;
        memset(&m, 0, sizeof m);
        mcf_lp_init(&m.lp);
        m.K = R;
        m.nf = (long)P * L * R;
        m.fcol = malloc(sizeof *m.fcol * (size_t)m.nf);
        m.hcol = malloc(sizeof *m.hcol * (size_t)P * P * (R + 1));
        if (!m.fcol || !m.hcol) {
            model_free(&m);
            rc = cs_error_set(err, CS_ENOMEM, "", "out of memory for an A* round");
            goto out;
        }
        for (long i = 0; i < m.nf; i++)
            m.fcol[i] = -1;
        for (long i = 0; i < (long)P * P * (R + 1); i++)
            m.hcol[i] = -1;
        int hmax = 1;
        for (long i = 0; i < (long)P * P; i++)
            if (in->dist[i] < FAR && in->dist[i] > hmax)
                hmax = in->dist[i];
        double fscale = 2.0 * (T0 + R + hmax);
        for (int d = 0; d < P; d++) {
            const int *ead = ea + (long)d * P;
            long total = 0;
            for (long i = (long)d * P * R; i < (long)(d + 1) * P * R; i++)
                total += sup[i];
            if (total == 0)
                continue;
            for (int l = 0; l < L; l++) {
                int n = t->links[l].src, x = t->links[l].dst;
                int hx = in->dist[(long)x * P + d], hn = in->dist[(long)n * P + d];
                if (n == d || hx >= FAR || hn >= FAR)
                    continue;
                for (int k = ead[n]; k < R; k++) {
                    int a = k + in->kappa[l];
                    double after = x == d ? a : (a > R ? a : R) + hx;
                    /* phi(f) = (T0 + f)^2 / scale: convex, so the latest
                     * chunks weigh most (the sum of squares leans toward the
                     * makespan, which is what counts) */
                    double delta = (sq(T0 + after) - sq(T0 + R + hn)) / fscale;
                    /* a little preference for early sends, and a tiny fixed
                     * perturbation per column: without it the many equal
                     * paths make the LP degenerate and the simplex crawl */
                    uint64_t hsh = ((uint64_t)(d + 1) * 0x9E3779B97F4A7C15ULL) ^
                                   ((uint64_t)(l + 1) * 0xC2B2AE3D27D4EB4FULL) ^
                                   ((uint64_t)(k + 1) * 0x165667B19E3779F9ULL);
                    double jitter = 1e-4 * (double)(mix64(hsh) % 1024) / 1024.0;
                    m.fcol[fidx(in, R, d, l, k)] = mcf_lp_add_col(
                        &m.lp, 0, t->links[l].lanes, -delta - 1e-3 * k / R - jitter, true);
                }
            }
            for (int n = 0; n < P; n++) {
                if (n == d)
                    continue;
                for (int k = ead[n]; k < R; k++)
                    m.hcol[hidx(in, R, d, n, k)] = mcf_lp_add_col(&m.lp, 0, (double)total, 0,
                                                                  false);
            }
            for (int n = 0; n < P; n++) {
                if (n == d)
                    continue;
                for (int k = ead[n]; k < R; k++) {
                    double rhs = sup[((long)d * P + n) * R + k];
                    int row = mcf_lp_add_row(&m.lp, rhs, rhs);
                    for (int l = t->out_begin[n]; l < t->out_begin[n + 1]; l++) {
                        int col = m.fcol[fidx(in, R, d, l, k)];
                        if (col >= 0)
                            mcf_lp_add_coef(&m.lp, row, col, 1.0);
                    }
                    mcf_lp_add_coef(&m.lp, row, m.hcol[hidx(in, R, d, n, k)], 1.0);
                    if (k > 0 && m.hcol[hidx(in, R, d, n, k - 1)] >= 0)
                        mcf_lp_add_coef(&m.lp, row, m.hcol[hidx(in, R, d, n, k - 1)], -1.0);
                    for (int i = t->in_begin[n]; i < t->in_begin[n + 1]; i++) {
                        int l = t->in_links[i], k0 = k - in->kappa[l];
                        if (k0 < 0)
                            continue;
                        int col = m.fcol[fidx(in, R, d, l, k0)];
                        if (col >= 0)
                            mcf_lp_add_coef(&m.lp, row, col, -1.0);
                    }
                }
            }
        }
        astar_capacity_rows(in, &oc, T0, R, m.fcol, P, &m.lp);
        if (m.lp.failed) {
            model_free(&m);
            rc = cs_error_set(err, CS_ENOMEM, "", "out of memory for an A* round");
            goto out;
        }
        if (m.lp.ncols > max_cols)
            max_cols = m.lp.ncols;
        double lim = MCF_ASTAR_ROUND_LIMIT_S;
        if (isfinite(r->deadline) && remaining(r) < lim)
            lim = remaining(r);
        /* CBC first, briefly (integral flows need no rounding); without an
         * integer solution in time, the LP and its flows rounded */
        double mlim = lim < MCF_ASTAR_MILP_LIMIT_S ? lim : MCF_ASTAR_MILP_LIMIT_S;
        mcf_solve_opts so = {.integer = true, .time_limit_s = mlim,
                             .gap = o->gap > 0.01 ? o->gap : 0.01, .no_preprocess = true,
                             .cancel = o->cancel};
        mcf_solution sol;
        memset(&sol, 0, sizeof sol);
        bool try_milp = m.lp.ncols <= MCF_ASTAR_MILP_MAX_COLUMNS;
        if (try_milp) {
            rc = mcf_solve(&m.lp, &so, &sol, err);
            r->milp_solves++;
            r->milp_seconds += sol.seconds;
            solver_crashed(r, &sol, &rc, err); /* then the LP below */
        }
        bool integral = try_milp && rc == CS_OK && sol.x != NULL;
        if (rc == CS_OK && !integral) {
            mcf_solution_free(&sol);
            so = (mcf_solve_opts){.integer = false, .time_limit_s = lim, .cancel = o->cancel};
            rc = mcf_solve(&m.lp, &so, &sol, err);
            r->lp_solves++;
            r->lp_seconds += sol.seconds;
            solver_crashed(r, &sol, &rc, err); /* then the greedy alone */
            if (rc == CS_OK && sol.status != MCF_OPTIMAL) {
                mcf_solution_free(&sol);
                memset(&sol, 0, sizeof sol);
            }
        }
        if (sol.seconds > slowest)
            slowest = sol.seconds;
        if (rc) {
            model_free(&m);
            goto out;
        }
        long sends_before = out->n;
        if (sol.x) {
            /* the round's flows rounded to chunks (credit >= 1/2, a chunk
             * usable at the source, lanes free): integral flows come out
             * exactly; what a fractional flow leaves behind stays where it
             * is, in the state of the next round */
            lp_rounds++;
            memset(credit, 0, sizeof *credit * (size_t)P * L);
            for (int k = 0; k < R; k++)
                for (int d = 0; d < P; d++)
                    for (int l = 0; l < L; l++) {
                        int col = m.fcol[fidx(in, R, d, l, k)];
                        if (col < 0)
                            continue;
                        double *cr = &credit[(long)d * L + l];
                        *cr += sol.x[col];
                        int n = t->links[l].src, x = t->links[l].dst, ke = T0 + k;
                        while (*cr >= 0.5) {
                            long best = -1;
                            for (long g = 0; g < G; g++)
                                if (pos[g] == n && in->gdst[g] == d && ready[g] <= ke &&
                                    (best < 0 || ready[g] < ready[best]))
                                    best = g;
                            if (best < 0 || !occ_fits(in, &oc, l, ke))
                                break;
                            *cr -= 1.0;
                            occ_take(in, &oc, l, ke);
                            if (push_send(out, best, l, ke)) {
                                mcf_solution_free(&sol);
                                model_free(&m);
                                rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
                                goto out;
                            }
                            ready[best] = ke + in->kappa[l];
                            pos[best] = x == d ? -1 : x;
                            left -= x == d;
                        }
                    }
        }
        milp_rounds += integral;
        progress(r, sol.x ? "astar" : "astar-greedy", T0 + R, sol.seconds, NAN,
                 "A* round %d (epochs %d..%d, %d columns): %s, %ld chunks left, %.3f s",
                 rounds, T0, T0 + R - 1, m.lp.ncols,
                 integral ? "MILP" : sol.x ? "LP rounded" : "no solution in time: greedy", left,
                 sol.seconds);
        bool moved = sol.x != NULL && out->n > sends_before;
        mcf_solution_free(&sol);
        model_free(&m);
        /* lanes the round left idle: chunks usable by then move along
         * shortest paths (never slower; the only moves when the round's
         * solve gave none) */
        greedy_rounds += !moved;
        if (astar_greedy_round(in, &oc, T0, R, pos, ready, &left, out)) {
            rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
            goto out;
        }
    }
    *info = json_pack("{s:i, s:i, s:i, s:i, s:i, s:b, s:I, s:f, s:f}", "rounds", rounds,
                      "epochs_per_round", R, "milp_rounds", milp_rounds, "lp_rounds",
                      lp_rounds - milp_rounds, "greedy_rounds", greedy_rounds,
                      "finished_greedily_at_time_limit", timed_out, "max_columns", (json_int_t)max_cols, "slowest_round_s",
                      slowest, "seconds", cs_now() - t0);
    astar_note_crashes(r, *info);
out:
    occ_free(&oc);
    free(pos);
    free(ready);
    free(sup);
    free(ea);
    free(credit);
    return rc;
}

/* ---- A* rounds for copy demands ---------------------------------------------------
 * The same rounds with the copy model: per chunk, binary flows F(g, l, k) and
 * holdings H(g, n, k) (n holds g usable from local epoch k; k = R is the end
 * of the round).  The state is, per chunk and rank, the epoch it is usable
 * there (held, or arriving from a send of an earlier round), and the lanes
 * still held.  Progress for a rank d that needs g is a minimum over holders
 * (its cost: the arrival epoch if d gets g in the round, else
 * min_h max(R, usable at h) + dist(h, d)), so it is linearized by levels:
 * y(g, d, j) in [0, 1] may be 1 only if some holder makes the cost <= j, and
 * each level pays phi(j + 1) - phi(j) (phi the squared absolute epoch, as for
 * pairwise rounds), so sum_j of them is phi of the cost, up to a constant.
 * CBC gets each round for a few seconds; without a schedule by then, the
 * round's epochs are filled greedily (each free lane sends the rarest chunk
 * its source holds and its destination lacks and needs or can pass on). */

#define MCF_ASTAR_COPY_MILP_LIMIT_S 5.0

static int astar_copy_greedy_round(const inst *in, occ *oc, int T0, int R, int *avail,
                                   int *holders, long *missing, sendbuf *out)
{
    const cs_topology *t = in->t;
    int P = in->P;
    for (int k = T0; k < T0 + R && *missing > 0; k++)
        for (int l = 0; l < in->L && *missing > 0; l++) {
            int n = t->links[l].src, x = t->links[l].dst;
            while (occ_fits(in, oc, l, k)) {
                long best = -1;
                for (long g = 0; g < in->G; g++) {
                    if (avail[g * P + n] > k || avail[g * P + x] < FAR ||
                        in->reach[g * P + x] >= FAR)
                        continue;
                    if (best < 0 || holders[g] < holders[best])
                        best = g;
                }
                if (best < 0)
                    break;
                occ_take(in, oc, l, k);
                if (push_send(out, best, l, k))
                    return CS_ENOMEM;
                avail[best * P + x] = k + in->kappa[l];
                holders[best]++;
                *missing -= in->need[best * P + x];
            }
        }
    return CS_OK;
}

/* The greedy round's sends as a MILP start for the round model (integer
 * columns: flows and holdings), or NULL. */
static double *astar_copy_start(const inst *in, const occ *oc, int T0, int R, const int *avail,
                                const int *holders, long missing, const mcf_lp *lp,
                                const int *hcol, const int *fcol)
{
    int P = in->P, L = in->L;
    long G = in->G;
    occ oc2;
    int *av2 = malloc(sizeof *av2 * (size_t)(G ? G : 1) * P);
    int *h2 = malloc(sizeof *h2 * (size_t)(G ? G : 1));
    double *start = calloc((size_t)(lp->ncols ? lp->ncols : 1), sizeof *start);
    sendbuf tmp = {0};
    bool ok = av2 && h2 && start && occ_clone(in, oc, &oc2) == CS_OK;
    if (ok) {
        memcpy(av2, avail, sizeof *av2 * (size_t)G * P);
        memcpy(h2, holders, sizeof *h2 * (size_t)G);
        ok = astar_copy_greedy_round(in, &oc2, T0, R, av2, h2, &missing, &tmp) == CS_OK;
        occ_free(&oc2);
    } else {
        occ_free(&oc2);
    }
    for (long i = 0; ok && i < tmp.n; i++) {
        const msend *x = &tmp.v[i];
        int k = x->epoch - T0, dst = in->t->links[x->link].dst;
        int f = fcol[(x->chunk * L + x->link) * R + k];
        if (f < 0) {
            ok = false;
            break;
        }
        start[f] = 1;
        for (int kk = k + in->kappa[x->link]; kk <= R; kk++) {
            int h = hcol[(x->chunk * P + dst) * (R + 1) + kk];
            if (h >= 0)
                start[h] = 1;
        }
    }
    free(tmp.v);
    free(av2);
    free(h2);
    if (!ok) {
        free(start);
        return NULL;
    }
    return start;
}

static int astar_copy(run *r, sendbuf *out, json_t **info, cs_error *err)
{
    const inst *in = r->in;
    const cs_mcf_options *o = r->o;
    const cs_topology *t = in->t;
    int P = in->P, L = in->L;
    long G = in->G;
    int R = astar_round_epochs(in, o);
    int maxk = 1, hmax = 1;
    for (int l = 0; l < L; l++)
        if (in->kappa[l] > maxk)
            maxk = in->kappa[l];
    for (long i = 0; i < (long)P * P; i++)
        if (in->dist[i] < FAR && in->dist[i] > hmax)
            hmax = in->dist[i];
    int J = R + maxk + hmax; /* cost levels 1..J */
    int limit = 4 * o->max_epochs;
    occ oc;
    int *avail = malloc(sizeof *avail * (size_t)(G ? G : 1) * P);
    int *holders = calloc((size_t)(G ? G : 1), sizeof *holders);
    int *hcol = malloc(sizeof *hcol * (size_t)(G ? G : 1) * P * (R + 1));
    int *fcol = malloc(sizeof *fcol * (size_t)(G ? G : 1) * L * R);
    int rc = occ_init(in, limit + R + maxk + 1, &oc);
    int rounds = 0, milp_rounds = 0, greedy_rounds = 0;
    bool timed_out = false;
    long max_cols = 0;
    double t0 = cs_now(), slowest = 0;
    if (rc || !avail || !holders || !hcol || !fcol) {
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
        goto out;
    }
    long missing = 0;
    for (long g = 0; g < G; g++)
        for (int n = 0; n < P; n++) {
            avail[g * P + n] = in->pre[g * P + n] ? 0 : FAR;
            holders[g] += in->pre[g * P + n];
            missing += in->need[g * P + n];
        }
    for (int T0 = 0; missing > 0; T0 += R) {
        if ((rc = astar_round_may_start(r, T0, R, limit, missing, "deliveries", err)) != CS_OK)
            goto out;
        if (out_of_time(r)) {
            /* the rest greedily (milliseconds): a valid schedule, not none */
            for (int T1 = T0; missing > 0 && T1 + R <= limit; T1 += R, greedy_rounds++)
                if (astar_copy_greedy_round(in, &oc, T1, R, avail, holders, &missing, out)) {
                    rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
                    goto out;
                }
            if ((rc = astar_after_greedy_fill(missing, "deliveries", err)) != CS_OK)
                goto out;
            timed_out = true;
            break;
        }
        rounds++;
        mcf_lp lp;
        mcf_lp_init(&lp);
        for (long i = 0; i < G * P * (R + 1); i++)
            hcol[i] = -1;
        for (long i = 0; i < G * L * R; i++)
            fcol[i] = -1;
        double fscale = 2.0 * (T0 + J + 1);
        /* local epoch from which n holds g for sure (FAR: not held, not awaited) */
#define HELD(g, n) (avail[(g) * P + (n)] >= FAR ? FAR                                      \
                    : avail[(g) * P + (n)] - T0 < 0 ? 0 : avail[(g) * P + (n)] - T0)
        for (long g = 0; g < G; g++) {
            bool open = false;
            for (int d = 0; d < P && !open; d++)
                open = in->need[g * P + d] && avail[g * P + d] >= FAR;
            if (!open)
                continue;
            /* holdings of ranks that lack g and can use it */
            for (int n = 0; n < P; n++) {
                if (HELD(g, n) < FAR || in->reach[g * P + n] >= FAR)
                    continue;
                for (int k = 1; k <= R; k++)
                    hcol[(g * P + n) * (R + 1) + k] = mcf_lp_add_col(&lp, 0, 1, 0, true);
            }
            for (int l = 0; l < L; l++) {
                int n = t->links[l].src, x = t->links[l].dst;
                if (HELD(g, x) < FAR || in->reach[g * P + x] >= FAR)
                    continue;
                for (int k = 0; k < R; k++) {
                    bool src_ok = HELD(g, n) <= k || hcol[(g * P + n) * (R + 1) + (k ? k : 1)] >= 0;
                    if (!src_ok || (HELD(g, n) >= FAR && k == 0))
                        continue;
                    fcol[(g * L + l) * R + k] = mcf_lp_add_col(&lp, 0, 1, -1e-4, true);
                }
            }
            /* a rank sends only what it holds */
            for (int l = 0; l < L; l++) {
                int n = t->links[l].src;
                for (int k = 0; k < R; k++) {
                    int f = fcol[(g * L + l) * R + k];
                    if (f < 0 || HELD(g, n) <= k)
                        continue;
                    int row = mcf_lp_add_row(&lp, -INFINITY, 0);
                    mcf_lp_add_coef(&lp, row, f, 1.0);
                    mcf_lp_add_coef(&lp, row, hcol[(g * P + n) * (R + 1) + k], -1.0);
                }
            }
            /* it holds what it held or what arrived */
            for (int n = 0; n < P; n++)
                for (int k = 1; k <= R; k++) {
                    int h = hcol[(g * P + n) * (R + 1) + k];
                    if (h < 0)
                        continue;
                    int row = mcf_lp_add_row(&lp, -INFINITY, 0);
                    mcf_lp_add_coef(&lp, row, h, 1.0);
                    if (k > 1)
                        mcf_lp_add_coef(&lp, row, hcol[(g * P + n) * (R + 1) + k - 1], -1.0);
                    for (int i = t->in_begin[n]; i < t->in_begin[n + 1]; i++) {
                        int l = t->in_links[i], k0 = k - in->kappa[l];
                        if (k0 >= 0 && fcol[(g * L + l) * R + k0] >= 0)
                            mcf_lp_add_coef(&lp, row, fcol[(g * L + l) * R + k0], -1.0);
                    }
                }
            /* progress of every open (g, d) by levels */
            for (int d = 0; d < P; d++) {
                if (!in->need[g * P + d] || avail[g * P + d] < FAR)
                    continue;
                /* the best a holder already gives */
                int have = FAR;
                for (int h = 0; h < P; h++) {
                    int e = HELD(g, h);
                    if (e >= FAR || in->dist[(long)h * P + d] >= FAR)
                        continue;
                    int c = (e > R ? e : R) + in->dist[(long)h * P + d];
                    if (c < have)
                        have = c;
                }
                for (int j = 1; j <= J && j < have; j++) {
                    double w = (sq(T0 + j + 1.0) - sq(T0 + j)) / fscale;
                    int y = mcf_lp_add_col(&lp, 0, 1, w, false);
                    int row = mcf_lp_add_row(&lp, -INFINITY, 0);
                    mcf_lp_add_coef(&lp, row, y, 1.0);
                    /* d itself by j (within the round) */
                    int kd = j < R ? j : R;
                    if (hcol[(g * P + d) * (R + 1) + kd] >= 0)
                        mcf_lp_add_coef(&lp, row, hcol[(g * P + d) * (R + 1) + kd], -1.0);
                    for (int h = 0; h < P; h++) {
                        int dh = in->dist[(long)h * P + d];
                        if (h == d || dh >= FAR)
                            continue;
                        int hc = hcol[(g * P + h) * (R + 1) + R];
                        if (hc >= 0 && R + dh <= j)
                            mcf_lp_add_coef(&lp, row, hc, -1.0);
                    }
                    /* sends arriving after the round */
                    for (int l = 0; l < L; l++) {
                        int x = t->links[l].dst, dx = in->dist[(long)x * P + d];
                        if (dx >= FAR)
                            continue;
                        for (int k = 0; k < R; k++) {
                            int f = fcol[(g * L + l) * R + k], a = k + in->kappa[l];
                            if (f >= 0 && a > R && a + dx <= j)
                                mcf_lp_add_coef(&lp, row, f, -1.0);
                        }
                    }
                }
            }
        }
#undef HELD
        astar_capacity_rows(in, &oc, T0, R, fcol, G, &lp);
        if (lp.failed) {
            mcf_lp_free(&lp);
            rc = cs_error_set(err, CS_ENOMEM, "", "out of memory for an A* round");
            goto out;
        }
        if (lp.ncols > max_cols)
            max_cols = lp.ncols;
        double lim = MCF_ASTAR_COPY_MILP_LIMIT_S;
        if (isfinite(r->deadline) && remaining(r) < lim)
            lim = remaining(r);
        /* CBC starts from the round the greedy would make (on a copy of the
         * state), so it has an incumbent at once and only has to improve it */
        double *start = astar_copy_start(in, &oc, T0, R, avail, holders, missing, &lp, hcol,
                                         fcol);
        mcf_solve_opts so = {.integer = true, .time_limit_s = lim,
                             .gap = o->gap > 0.01 ? o->gap : 0.01, .start = start,
                             .no_preprocess = true, .cancel = o->cancel};
        mcf_solution sol;
        rc = mcf_solve(&lp, &so, &sol, err);
        free(start);
        r->milp_solves++;
        r->milp_seconds += sol.seconds;
        solver_crashed(r, &sol, &rc, err); /* then the greedy round */
        if (sol.seconds > slowest)
            slowest = sol.seconds;
        if (rc) {
            mcf_lp_free(&lp);
            goto out;
        }
        long sends_before = out->n;
        if (sol.x) {
            milp_rounds++;
            for (int k = 0; k < R; k++)
                for (int l = 0; l < L; l++)
                    for (long g = 0; g < G; g++) {
                        int f = fcol[(g * L + l) * R + k];
                        if (f < 0 || sol.x[f] < 0.5)
                            continue;
                        int n = t->links[l].src, x = t->links[l].dst, ke = T0 + k;
                        if (avail[g * P + n] > ke || avail[g * P + x] < FAR ||
                            !occ_fits(in, &oc, l, ke))
                            continue;
                        occ_take(in, &oc, l, ke);
                        if (push_send(out, g, l, ke)) {
                            mcf_solution_free(&sol);
                            mcf_lp_free(&lp);
                            rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
                            goto out;
                        }
                        avail[g * P + x] = ke + in->kappa[l];
                        holders[g]++;
                        missing -= in->need[g * P + x];
                    }
        }
        progress(r, sol.x ? "astar" : "astar-greedy", T0 + R, sol.seconds, NAN,
                 "A* round %d (epochs %d..%d, %d columns): %s, %ld deliveries missing, %.3f s",
                 rounds, T0, T0 + R - 1, lp.ncols, sol.x ? "MILP" : "no schedule in time: greedy",
                 missing, sol.seconds);
        bool moved = sol.x != NULL && out->n > sends_before;
        mcf_solution_free(&sol);
        mcf_lp_free(&lp);
        greedy_rounds += !moved;
        if (!moved &&
            astar_copy_greedy_round(in, &oc, T0, R, avail, holders, &missing, out)) {
            rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
            goto out;
        }
    }
    *info = json_pack("{s:i, s:i, s:i, s:i, s:i, s:b, s:I, s:f, s:f}", "rounds", rounds,
                      "epochs_per_round", R, "milp_rounds", milp_rounds, "lp_rounds", 0,
                      "greedy_rounds", greedy_rounds, "finished_greedily_at_time_limit",
                      timed_out, "max_columns", (json_int_t)max_cols,
                      "slowest_round_s", slowest, "seconds", cs_now() - t0);
    astar_note_crashes(r, *info);
out:
    occ_free(&oc);
    free(avail);
    free(holders);
    free(hcol);
    free(fcol);
    return rc;
}

/* One chunking: o->chunks. */
static int synthesize_one(const cs_topology *t, const cs_collective *c, const cs_mcf_options *o,
                          cs_result **out, cs_error *err)
{
    *out = NULL;
    int rc;
    run r = {0};
    r.o = o;
    r.t0 = cs_now();
    r.deadline = o->time_limit_s > 0 ? r.t0 + o->time_limit_s : INFINITY;
    inst in;
    rc = inst_init(&in, t, c, o, err);
    r.in = &in;
    if (rc) {
        inst_free(&in);
        return rc;
    }
    progress(&r, "start", 0, 0, NAN,
             "mcf: %s, %d ranks, %ld chunks, %s model, epoch %.4g us", collective_kind_name(c->kind),
             in.P, in.G, in.pairwise ? "LP (by destination)" : "MILP (by chunk, with copy)",
             in.tau);

    /* The horizon: no schedule of K epochs ends after K tau, so K >= the
     * cut bound / tau; from there the LP's smallest feasible horizon,
     * galloping up then bisecting. */
    int k0 = horizon_floor(&in);
    {
        cs_time_bound tb;
        if (collective_time_bound(t, c, &tb, NULL) == CS_OK) {
            double kb = ceil(time_bound_us(&tb, o->bytes, o->chunks) / in.tau - 1e-9);
            if (kb > k0 && kb < 1e6)
                k0 = (int)kb;
        }
    }
    int lp_k = -1;
    bool feas = false;
    /* the schedule and how it was found */
    sendbuf sb = {0};
    double milp_obj = NAN, milp_bound = NAN;
    int milp_status = MCF_NOSOLUTION;
    int used_k = -1;
    bool rounded = false, greedy_done = false;
    json_t *astar_info = NULL;
    if (use_astar(&in, o)) {
        /* A* rounds: no horizon search, no full model */
        rc = in.pairwise ? astar_pairwise(&r, &sb, &astar_info, err)
                         : astar_copy(&r, &sb, &astar_info, err);
        if (rc != CS_OK) {
            free(sb.v);
            goto done;
        }
        used_k = sends_end_epoch(&in, &sb);
        milp_status = MCF_FEASIBLE;
        goto schedule_ready;
    }
    int cap = o->epochs > 0 ? o->epochs : o->max_epochs;
    if (k0 > cap)
        k0 = cap;
    /* Copy demands: the greedy first.  When it ends at the cut bound's
     * horizon it is optimal without any LP; else one LP at its horizon - 1
     * usually proves it optimal (allgather on DGX-1). */
    sendbuf gsb = {0};
    int gK = -1;
    bool search_done = false, keep_greedy = false;
    if (!in.pairwise && o->epochs == 0) {
        double t1 = cs_now();
        sendbuf trial = {0};
        for (uint64_t seed = 1; seed <= MCF_GREEDY_TRIES && gK != k0; seed++) {
            int endk = -1;
            trial.n = 0;
            if ((rc = greedy_copy(&in, cap, seed, &trial, &endk, err))) {
                free(trial.v);
                free(gsb.v);
                goto done;
            }
            if (endk >= 0 && (gK < 0 || endk < gK)) {
                gK = endk;
                sendbuf tmp = gsb;
                gsb = trial;
                trial = tmp;
            }
        }
        free(trial.v);
        progress(&r, "greedy", gK, cs_now() - t1, gK >= 0 ? sends_end_us(&in, &gsb) : NAN,
                 "greedy schedule of %d epochs (the cut bound allows %d) in %.3f s", gK, k0,
                 cs_now() - t1);
        if (gK >= 0 && gK <= k0) {
            lp_k = gK;
            search_done = true;
        } else if (gK > k0) {
            /* With a schedule in hand, proving or improving it gets a budget
             * of its own when the caller set none: the copy model's LP is
             * weak and its MILP can run for hours (ndv2:2 allgather). */
            if (!isfinite(r.deadline))
                r.deadline = cs_now() + MCF_IMPROVE_BUDGET_S;
            double del;
            rc = solve_lp(&r, gK - 1, true, &feas, &del, err);
            if (rc == CS_OK && !feas) {
                lp_k = gK;
            } else if (rc == CS_OK) {
                rc = lp_min_horizon(&r, k0, gK - 1, &lp_k, err);
            }
            if (rc == CS_ETIMEOUT) {
                /* keep the greedy; the cut bound is the bound */
                cs_error_clear(err);
                rc = CS_OK;
                lp_k = k0;
                keep_greedy = true;
            }
            if (rc) {
                free(gsb.v);
                goto done;
            }
            search_done = true;
        }
    }
    /* Secant steps on the units delivered by K (they grow about linearly
     * with K once a cut is the bottleneck), then bisection. */
    int lo = k0, hi = k0;
    double prev_k = -1, prev_del = 0;
    for (; !search_done;) {
        double del;
        rc = solve_lp(&r, hi, true, &feas, &del, err);
        if (rc)
            goto done;
        if (feas)
            break;
        if (hi >= cap) {
            rc = cs_error_set(err, o->epochs > 0 ? CS_EUNSAT : CS_ELIMIT,
                              o->epochs > 0 ? "options.epochs" : "options.max_epochs",
                              "no schedule fits %d epochs of %.4g us (even the LP relaxation "
                              "cannot deliver everything)%s",
                              cap, in.tau, o->epochs > 0 ? ": raise epochs" : "");
            goto done;
        }
        lo = hi + 1;
        double total = 0;
        for (long q = 0; q < (in.pairwise ? (long)in.P * in.P : in.G * in.P); q++)
            total += in.pairwise ? (double)in.supply[q] : in.need[q];
        int next = hi + 1;
        if (prev_k >= 0 && del > prev_del) {
            double slope = (del - prev_del) / (hi - prev_k);
            double want = hi + ceil((total - del) / slope - 1e-9);
            if (want > next)
                next = want > 4.0 * hi + 8 ? 4 * hi + 8 : (int)want;
        } else if (prev_k >= 0) {
            next = 2 * hi;
        }
        prev_k = hi;
        prev_del = del;
        hi = next > cap ? cap : next;
    }
    if (!search_done && (rc = lp_min_horizon(&r, lo, hi, &lp_k, err))) {
        free(gsb.v);
        goto done;
    }
    int K = o->epochs > 0 ? o->epochs : lp_k;

    /* The schedule: the MILP at K, K+1, ... (exact), or for pairwise
     * instances too large for it, the LP's flows rounded. */
    bool big = in.pairwise && r.keep_x && r.keep.lp.ncols > o->milp_max_columns;
    if (in.pairwise && r.keep_x && r.keep.K == K) {
        /* the LP rounded first: when it fits the LP's horizon it is optimal
         * in makespan and CBC is not needed (it can take a minute to prove
         * the secondary objective, torus2d:4x4 alltoall) */
        double t1 = cs_now();
        if ((rc = round_best(&in, &r.keep, r.keep_x, &sb, err)))
            goto done;
        if (sends_end_epoch(&in, &sb) <= K) {
            greedy_done = true;
            rounded = true;
            used_k = K;
            milp_status = MCF_OPTIMAL;
        } else {
            sb.n = 0;
        }
        progress(&r, greedy_done ? "optimal" : "rounded", K, cs_now() - t1,
                 greedy_done ? sends_end_us(&in, &sb) : NAN,
                 "LP at %d epochs rounded to chunks %s its horizon (%.3f s)", K,
                 greedy_done ? "within" : "beyond", cs_now() - t1);
    }
    if (!greedy_done && gK >= 0 && gK <= K) {
        /* the greedy meets the LP's horizon: optimal in makespan */
        sb = gsb;
        gsb = (sendbuf){0};
        greedy_done = true;
        used_k = K;
        milp_status = MCF_OPTIMAL;
    } else if (!in.pairwise) {
        /* a few seeded greedy runs: one that fits K is optimal in makespan */
        double t1 = cs_now();
        for (uint64_t seed = 1; seed <= MCF_GREEDY_TRIES && !greedy_done; seed++) {
            int endk = -1;
            sb.n = 0;
            if ((rc = greedy_copy(&in, K, seed, &sb, &endk, err)))
                goto done;
            if (endk >= 0 && endk <= K) {
                greedy_done = true;
                used_k = K;
                milp_status = MCF_OPTIMAL;
            }
        }
        if (!greedy_done)
            sb.n = 0;
        progress(&r, greedy_done ? "optimal" : "greedy", K, cs_now() - t1,
                 greedy_done ? sends_end_us(&in, &sb) : NAN,
                 "greedy schedule %s the LP's %d epochs (%.3f s)",
                 greedy_done ? "meets" : "does not meet", K, cs_now() - t1);
    }
    for (int k = K; !big && !greedy_done && !keep_greedy && k <= cap && (gK < 0 || k < gK);
         k++) {
        if (out_of_time(&r)) {
            rc = cs_error_set(err, CS_ETIMEOUT, "options.time_limit_s",
                              "no schedule within the time limit (LP bound: %d epochs)", lp_k);
            break;
        }
        model m;
        if ((rc = build_model(&in, k, true, false, o->max_columns, &m, err)))
            break;
        mcf_solve_opts so = {.integer = true, .time_limit_s = remaining(&r), .gap = o->gap,
                             .cancel = o->cancel};
        milp_watch w = {&r, k, cs_now()};
        if (o->progress) {
            so.on_progress = milp_progress;
            so.progress_ctx = &w;
        }
        mcf_solution sol;
        rc = mcf_solve(&m.lp, &so, &sol, err);
        r.milp_solves++;
        r.milp_seconds += sol.seconds;
        /* CBC crashed (docs/mcf.md, "The solver front"): with the greedy's
         * schedule (copy) or an LP to round (pairwise) at hand, those below,
         * as after a limit without a schedule; else the crash is the error */
        if (rc == CS_EINTERNAL && sol.signal && (in.pairwise ? r.keep_x != NULL : gK >= 0) &&
            solver_crashed(&r, &sol, &rc, err)) {
            cs_error_clear(err);
            model_free(&m);
            break;
        }
        if (rc) {
            model_free(&m);
            break;
        }
        if (sol.x) {
            milp_obj = sol.objective;
            milp_bound = sol.bound;
            milp_status = sol.status;
            rc = in.pairwise      ? decompose_pairwise(&in, &m, sol.x, &sb, err)
                 : in.zero_buffer ? decompose_copy_zb(&in, &m, sol.x, &sb, err)
                                  : decompose_copy(&in, &m, sol.x, &sb, err);
            used_k = k;
        }
        progress(&r, sol.x ? (sol.status == MCF_OPTIMAL ? "optimal" : "incumbent") : "infeasible",
                 k, sol.seconds, sol.x ? sends_end_us(&in, &sb) : NAN,
                 "MILP at %d epochs (%d columns, %d rows): %s, objective %.6g, bound %.6g, "
                 "gap %.3g%% in %.3f s",
                 k, m.lp.ncols, m.lp.nrows,
                 sol.x ? (sol.status == MCF_OPTIMAL ? "optimal" : "stopped with a schedule")
                       : sol.status == MCF_INFEASIBLE ? "infeasible" : "no schedule yet",
                 sol.objective, sol.bound,
                 sol.x && sol.bound != 0 ? 100 * fabs(sol.bound - sol.objective) / fabs(sol.bound)
                                         : NAN,
                 sol.seconds);
        bool stop = sol.x != NULL || sol.status == MCF_NOSOLUTION || o->epochs > 0;
        mcf_solution_free(&sol);
        model_free(&m);
        if (rc || stop)
            break;
    }
    if (!in.pairwise && used_k < 0 && gK >= 0 && (rc == CS_OK || rc == CS_ETIMEOUT)) {
        /* the MILP found nothing better in time: the greedy's schedule */
        cs_error_clear(err);
        rc = CS_OK;
        free(sb.v);
        sb = gsb;
        gsb = (sendbuf){0};
        used_k = gK;
        milp_status = MCF_FEASIBLE;
    }
    free(gsb.v);
    if (in.pairwise && used_k < 0 && r.keep_x &&
        (rc == CS_OK || rc == CS_ETIMEOUT)) {
        /* too large for the MILP, or it found nothing in time: round the LP */
        cs_error_clear(err);
        double t1 = cs_now();
        rc = round_best(&in, &r.keep, r.keep_x, &sb, err);
        if (rc == CS_OK) {
            rounded = true;
            used_k = r.keep.K;
            milp_status = MCF_FEASIBLE;
            progress(&r, "rounded", used_k, cs_now() - t1, sends_end_us(&in, &sb),
                     "LP at %d epochs rounded to chunks: schedule ends at %.4g us (%.3f s)",
                     used_k, sends_end_us(&in, &sb), cs_now() - t1);
        }
    }
    if (rc == CS_OK && used_k < 0)
        rc = cs_error_set(err, out_of_time(&r) ? CS_ETIMEOUT : CS_EUNSAT,
                          out_of_time(&r) ? "options.time_limit_s" : "options.epochs",
                          "mcf found no integer schedule (LP bound: %d epochs of %.4g us)", lp_k,
                          in.tau);
schedule_ready:;
    cs_algorithm *a = NULL;
    double grid_us = sends_end_us(&in, &sb), end_us = grid_us;
    if (rc == CS_OK)
        rc = to_algorithm(&in, &sb, &a, &end_us, err);
    free(sb.v);
    if (rc == CS_OK && (rc = algorithm_verify(t, a, err)) != CS_OK) {
        algorithm_free(a);
        goto done;
    }
    if (rc)
        goto done;
    cs_result *res = NULL;
    if ((rc = result_new("mcf", &res, err))) {
        algorithm_free(a);
        goto done;
    }
    if ((rc = result_add(res, a))) {
        algorithm_free(a);
        result_free(res);
        rc = cs_error_set(err, rc, "", "out of memory");
        goto done;
    }
    res->complete = milp_status == MCF_OPTIMAL && o->gap == 0;
    res->synth_seconds = cs_now() - r.t0;
    /* The epoch model's bound is a bound on every schedule when each link's
     * send time is a whole number of epochs (flooring the start times of any
     * schedule then gives an epoch schedule); else it bounds the schedules
     * of the epoch model only (a 3 us send padded to 2 epochs of 1.7 us). */
    bool exact = true;
    for (int l = 0; l < in.L; l++)
        if (fabs(in.send_us[l] - in.kappa[l] * in.tau) > 1e-9 * in.tau)
            exact = false;
    /* A* rounds solve no full model: no LP bound then */
    json_t *lp = lp_k < 0 ? NULL
                          : json_pack("{s:i, s:f, s:f, s:s, s:b}", "epochs", lp_k, "epoch_us",
                                      in.tau, "time_us", horizon_time_bound(&in, lp_k), "form",
                                      in.pairwise ? "lp by destination"
                                                  : "milp relaxation by chunk",
                                      "exact", exact);
    double gap = isfinite(milp_bound) && milp_bound != 0
                     ? fabs(milp_bound - milp_obj) / fabs(milp_bound) : 0.0;
    res->stats = json_pack("{s:s, s:i, s:i, s:f, s:f, s:o*, s:f, s:f, s:f, s:s, s:i, s:i, "
                           "s:f, s:f, s:f}",
                           "model", astar_info ? "A* rounds (a MILP or LP per round)"
                                    : in.pairwise ? "lp" : "milp",
                           "epochs", used_k,
                           "epochs_used", a->steps, "epoch_us", in.tau, "chunk_bytes",
                           in.chunk_bytes, "mcf_lp", lp, "milp_objective",
                           isfinite(milp_obj) ? milp_obj : 0.0, "milp_bound",
                           isfinite(milp_bound) ? milp_bound : 0.0, "gap", gap, "status",
                           astar_info                   ? "A* rounds"
                           : rounded && greedy_done     ? "optimal (LP rounding meets the LP bound)"
                           : rounded                    ? "lp rounded"
                           : greedy_done                ? "optimal (greedy meets the LP bound)"
                           : milp_status == MCF_OPTIMAL ? "optimal"
                                                        : "feasible",
                           "lp_solves",
                           r.lp_solves, "milp_solves", r.milp_solves, "lp_seconds", r.lp_seconds,
                           "milp_seconds", r.milp_seconds, "schedule_us", end_us);
    json_object_set_new(res->stats, "epoch_grid_us", json_real(grid_us));
    if (!astar_info && r.solver_crashes > 0)
        json_object_set_new(res->stats, "solver_crash",
                            json_sprintf("%s; the schedule is the %s", r.crash,
                                         in.pairwise ? "LP's rounding" : "greedy's"));
    if (astar_info) {
        json_object_set_new(res->stats, "astar", astar_info);
        astar_info = NULL;
    }
    if (in.sym)
        json_object_set_new(res->stats, "symmetry",
                            json_pack("{s:i, s:i, s:f, s:b}", "orbits", in.sym_orbits,
                                      "generators", in.sym_generators, "group_size",
                                      in.sym_group, "free", in.sym_free));
    if (lp_k >= 0)
        progress(&r, "done", used_k, res->synth_seconds, end_us,
                 "mcf: schedule of %ld sends ends at %.4g us (LP bound %.4g us, %d epochs)",
                 a->nsends, end_us, horizon_time_bound(&in, lp_k), lp_k);
    else
        progress(&r, "done", used_k, res->synth_seconds, end_us,
                 "mcf: schedule of %ld sends ends at %.4g us (A* rounds, no LP bound)",
                 a->nsends, end_us);
    *out = res;
done:
    json_decref(astar_info);
    model_free(&r.keep);
    free(r.keep_x);
    inst_free(&in);
    return rc;
}

/* ---- copy-capable switches ------------------------------------------------------------- */

/* Collective c (on P ranks) as a custom one on the node view's P + S ranks:
 * the same chunks, pre- and postconditions on the ranks only, nothing at
 * the switch nodes (they relay and copy, they want nothing). */
static int switch_node_collective(const cs_collective *c, int P, int C, int nodes,
                                  cs_collective *out, cs_error *err)
{
    memset(out, 0, sizeof *out);
    long G = collective_global_chunks(c, P, C);
    long npre = 0, npost = 0;
    for (long g = 0; g < G; g++)
        for (int r = 0; r < P; r++) {
            npre += collective_pre(c, P, C, g, r);
            npost += collective_post(c, P, C, g, r);
        }
    if (G > INT_MAX / 2 || npre > INT_MAX / 2 || npost > INT_MAX / 2)
        return cs_error_set(err, CS_ELIMIT, "options.chunks", "too many chunks for mcf's "
                            "switch-node model");
    collective_init(out, CS_COLL_CUSTOM, -1);
    out->custom_global_chunks = (int)G;
    out->pre = malloc(sizeof(int) * 2 * (size_t)(npre ? npre : 1));
    out->post = malloc(sizeof(int) * 2 * (size_t)(npost ? npost : 1));
    if (!out->pre || !out->post) {
        collective_free(out);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    for (long g = 0; g < G; g++)
        for (int r = 0; r < P; r++) {
            if (collective_pre(c, P, C, g, r)) {
                out->pre[2 * out->npre] = (int)g;
                out->pre[2 * out->npre++ + 1] = r;
            }
            if (collective_post(c, P, C, g, r)) {
                out->post[2 * out->npost] = (int)g;
                out->post[2 * out->npost++ + 1] = r;
            }
        }
    int rc = collective_validate(out, nodes, err);
    if (rc)
        collective_free(out);
    return rc;
}

/* How much a schedule through switch nodes buffers in them: the switch node
 * is store-and-forward (docs/model.md "Copy-capable switches": it may hold a
 * chunk between its arrival and its last copy, which TE-CCL's zero-buffer
 * switch may not), so results say how long and how much it holds.  Chunk g
 * is held at node j from its first arrival's end to its last copy's start;
 * *hold_us is the longest such span, *peak the most chunks one node holds
 * at once (spans shorter than 1e-6 us are forwarding, not holding). */
typedef struct hold_span { double at; int delta; } hold_span;

static int cmp_hold_span(const void *x, const void *y)
{
    const hold_span *a = x, *b = y;
    if (a->at != b->at)
        return a->at < b->at ? -1 : 1;
    return a->delta - b->delta; /* an end before a start at the same time */
}

static int switch_buffer_use(const cs_algorithm *a, int P, int S, double *hold_us, int *peak)
{
    long G = a->global_chunks;
    size_t n = (size_t)(G > 0 ? G : 1) * (size_t)S;
    double *first = malloc(sizeof *first * n), *lastc = malloc(sizeof *lastc * n);
    hold_span *ev = malloc(sizeof *ev * 2 * n);
    if (!first || !lastc || !ev) {
        free(first);
        free(lastc);
        free(ev);
        return CS_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        first[i] = INFINITY;
        lastc[i] = -INFINITY;
    }
    for (long k = 0; k < a->nsends; k++) {
        int src = algorithm_send_src(a, k), dst = algorithm_send_dst(a, k);
        long g = algorithm_send_chunk(a, k);
        if (dst >= P && dst - P < S && algorithm_send_end_us(a, k) < first[g * S + dst - P])
            first[g * S + dst - P] = algorithm_send_end_us(a, k);
        if (src >= P && src - P < S && algorithm_send_start_us(a, k) > lastc[g * S + src - P])
            lastc[g * S + src - P] = algorithm_send_start_us(a, k);
    }
    *hold_us = 0;
    *peak = 0;
    for (int j = 0; j < S; j++) {
        size_t ne = 0;
        for (long g = 0; g < G; g++) {
            double e = first[g * S + j], c = lastc[g * S + j];
            if (!isfinite(e) || !isfinite(c) || c - e <= 1e-6)
                continue;
            if (c - e > *hold_us)
                *hold_us = c - e;
            ev[ne++] = (hold_span){e, 1};
            ev[ne++] = (hold_span){c, -1};
        }
        qsort(ev, ne, sizeof *ev, cmp_hold_span);
        int cur = 0;
        for (size_t i = 0; i < ne; i++) {
            cur += ev[i].delta;
            if (cur > *peak)
                *peak = cur;
        }
    }
    free(first);
    free(lastc);
    free(ev);
    return CS_OK;
}

/* One chunking, with copy-capable switches as TE-CCL's switch nodes: copy
 * demands are solved on the node view (each such switch a node with flow
 * and holding variables like a GPU, and no demand; its links to and from
 * the members inside their ports), so the MILP may send a chunk up once and
 * copy it down to many ports; every schedule the hyper-edge form allows is
 * still allowed there.  The schedules then name the nodes (ranks + j) and
 * are verified again on t.  Pairwise demands gain nothing from copy (a
 * unicast through the node costs two transfers where the hyper-edge costs
 * one), so they, and topologies without such switches, are solved as given. */
static int synthesize_nodes(const cs_topology *t, const cs_collective *c, const cs_mcf_options *o,
                            cs_result **out, cs_error *err)
{
    if (t->nswitch_nodes == 0 || t->node_view || mcf_collective_is_pairwise(c, t->ranks,
                                                                            o->chunks))
        return synthesize_one(t, c, o, out, err);
    *out = NULL;
    int P = t->ranks;
    cs_topology *nv = NULL;
    cs_collective nc;
    int rc = topology_switch_nodes(t, &nv, err);
    if (rc)
        return rc;
    if ((rc = switch_node_collective(c, P, o->chunks, nv->ranks, &nc, err))) {
        topology_free(nv);
        return rc;
    }
    cs_result *res = NULL;
    rc = synthesize_one(nv, &nc, o, &res, err);
    int S = t->nswitch_nodes;
    for (int i = 0; rc == CS_OK && i < res->nalgs; i++) {
        const cs_algorithm *a = res->algs[i];
        /* A chunk sent up to a node that never copies it on afterwards is
         * a dead end (the greedy may send one when a port is free): it only
         * loads the sender's port.  last[g * S + j]: the latest start of a
         * send of g out of node P + j; a send up to it is kept only when it
         * arrives by then. */
        long G = a->global_chunks;
        double *last = malloc(sizeof *last * (size_t)(G > 0 ? G : 1) * (size_t)S);
        if (!last) {
            rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
            break;
        }
        for (long k = 0; k < G * S; k++)
            last[k] = -INFINITY;
        for (long k = 0; k < a->nsends; k++) {
            int src = algorithm_send_src(a, k);
            long g = algorithm_send_chunk(a, k);
            if (src >= P && g < G && src - P < S && algorithm_send_start_us(a, k) >
                                                        last[g * S + (src - P)])
                last[g * S + (src - P)] = algorithm_send_start_us(a, k);
        }
        cs_algorithm *b = NULL;
        if ((rc = algorithm_new(c, t->name, P, o->chunks, a->steps, &b, err)))
            break;
        memcpy(b->rounds_per_step, a->rounds_per_step, sizeof(int) * (size_t)a->steps);
        algorithm_update_rounds(b);
        memcpy(b->method, a->method, sizeof b->method);
        memcpy(b->optimality, a->optimality, sizeof b->optimality);
        b->timed_chunk_bytes = a->timed_chunk_bytes;
        /* a schedule that happens to use no node is a plain one: it says so
         * (switch_nodes 0), so it generates code and prints as before */
        bool via_node = false;
        b->switch_nodes = t->nswitch_nodes;
        if (algorithm_reserve_sends(b, a->nsends) != CS_OK)
            rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
        for (long k = 0; rc == CS_OK && k < a->nsends; k++) {
            cs_send sv = algorithm_send(a, k);
            if (sv.dst >= P && sv.dst - P < S && sv.chunk < G &&
                sv.end_us > last[sv.chunk * S + (sv.dst - P)] + 1e-6)
                continue; /* a dead end */
            via_node |= sv.src >= P || sv.dst >= P;
            if ((rc = algorithm_add_timed_send(b, sv.chunk, sv.src, sv.dst, sv.step, sv.op,
                                               sv.start_us, sv.end_us)))
                cs_error_set(err, rc, "", "cannot add send %ld", k);
        }
        free(last);
        if (!via_node)
            b->switch_nodes = 0;
        if (rc == CS_OK)
            rc = algorithm_verify(t, b, err);
        if (rc) {
            algorithm_free(b);
            break;
        }
        algorithm_free(res->algs[i]);
        res->algs[i] = b;
    }
    double hold_us = 0, chunk_bytes = 0;
    int peak = 0;
    for (int i = 0; rc == CS_OK && i < res->nalgs; i++) {
        double h = 0;
        int pk = 0;
        if (switch_buffer_use(res->algs[i], P, S, &h, &pk) != CS_OK)
            rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
        hold_us = h > hold_us ? h : hold_us;
        if (pk > peak) {
            peak = pk;
            chunk_bytes = res->algs[i]->timed_chunk_bytes;
        }
    }
    if (rc == CS_OK) {
        int used = 0;
        for (int i = 0; i < res->nalgs; i++)
            for (long k = 0; k < res->algs[i]->nsends; k++)
                used += algorithm_send_src(res->algs[i], k) >= P;
        json_object_set_new(res->stats, "switch_nodes", json_integer(t->nswitch_nodes));
        json_object_set_new(res->stats, "switch_copies", json_integer(used));
        /* options.zero_buffer: the model, the greedy and the compaction kept
         * every copy leaving a node as its chunk arrived */
        json_object_set_new(res->stats, "switch_zero_buffer", json_boolean(o->zero_buffer));
        /* store-and-forward: what the schedule asks the switches to buffer */
        json_object_set_new(res->stats, "switch_hold_us", json_real(hold_us));
        json_object_set_new(res->stats, "switch_buffer_chunks", json_integer(peak));
        json_object_set_new(res->stats, "switch_buffer_bytes", json_real(peak * chunk_bytes));
        *out = res;
    } else {
        result_free(res);
    }
    collective_free(&nc);
    topology_free(nv);
    return rc;
}

/* The chunkings the best-of search tries for lo..hi: all of them up to 8,
 * else the four smallest, hi, and hi halved down to lo (a model per
 * chunking; the gains come from the few smallest and the requested one). */
static int chunking_candidates(int lo, int hi, int *v)
{
    int n = 0;
    if (hi - lo + 1 <= 8) {
        for (int c = lo; c <= hi; c++)
            v[n++] = c;
        return n;
    }
    for (int c = lo; c < lo + 4; c++)
        v[n++] = c;
    int half[32], nh = 0;
    for (int c = hi / 2; c >= lo + 4 && nh < 32; c /= 2)
        half[nh++] = c;
    for (int i = nh - 1; i >= 0; i--)
        if (half[i] != v[n - 1])
            v[n++] = half[i];
    v[n++] = hi;
    return n;
}

static double stats_schedule_us(const cs_result *r)
{
    return json_number_value(json_object_get(r->stats, "schedule_us"));
}

/* A lower bound (us) on the end of every schedule mcf can return for the
 * chunking o->chunks (chunk = o->bytes / o->chunks), on the view mcf solves
 * it on (synthesize_nodes): the largest of
 *  - the cut bound (bounds.h; chunk-independent except for custom demands);
 *  - the farthest needed pair in continuous time: a chunk crosses each hop
 *    of its path in alpha + chunk / bw of that link (Floyd-Warshall);
 *  - when every send is a whole number of epochs (exact: flooring any
 *    schedule's start times gives an epoch schedule), the epoch model's
 *    horizon floor (horizon_floor: the sources' egress and the ranks'
 *    ingress, counted in sends) as time.
 * The best-of-chunkings search skips a chunking whose floor is no better
 * than a schedule already found ("proved unable to win").  *exact says
 * whether the epoch floor applied.  Returns 0 when nothing is known. */
static double chunking_floor_us(const cs_topology *t, const cs_collective *c,
                                const cs_mcf_options *o, const cs_time_bound *tb, bool *exact)
{
    *exact = false;
    double floor_us = tb ? time_bound_us(tb, o->bytes, o->chunks) : 0;
    if (!isfinite(floor_us))
        floor_us = 0;
    cs_topology *nv = NULL;
    cs_collective nc;
    const cs_topology *vt = t;
    const cs_collective *vc = c;
    bool view = t->nswitch_nodes > 0 && !t->node_view &&
                !mcf_collective_is_pairwise(c, t->ranks, o->chunks);
    if (view) {
        if (topology_switch_nodes(t, &nv, NULL) != CS_OK)
            return floor_us;
        if (switch_node_collective(c, t->ranks, o->chunks, nv->ranks, &nc, NULL) != CS_OK) {
            topology_free(nv);
            return floor_us;
        }
        vt = nv;
        vc = &nc;
    }
    cs_mcf_options fo = *o;
    fo.no_symmetry = true; /* the floor needs no orbits */
    inst in;
    if (inst_init(&in, vt, vc, &fo, NULL) == CS_OK) {
        int P = in.P;
        double *d = malloc(sizeof *d * (size_t)P * (size_t)P);
        if (d) {
            for (long i = 0; i < (long)P * P; i++)
                d[i] = INFINITY;
            for (int r = 0; r < P; r++)
                d[(long)r * P + r] = 0;
            for (int l = 0; l < in.L; l++) {
                long at = (long)vt->links[l].src * P + vt->links[l].dst;
                if (in.send_us[l] < d[at])
                    d[at] = in.send_us[l];
            }
            for (int k = 0; k < P; k++)
                for (int i = 0; i < P; i++) {
                    double dik = d[(long)i * P + k];
                    if (!isfinite(dik))
                        continue;
                    for (int j = 0; j < P; j++)
                        if (dik + d[(long)k * P + j] < d[(long)i * P + j])
                            d[(long)i * P + j] = dik + d[(long)k * P + j];
                }
            for (long q = 0; q < in.ncomm; q++)
                for (int n = 0; n < P; n++) {
                    double v = INFINITY;
                    if (in.pairwise) {
                        if (in.supply[q * P + n] > 0)
                            v = d[(long)n * P + q];
                    } else if (in.need[q * P + n]) {
                        for (int s = 0; s < P; s++)
                            if (in.pre[q * P + s] && d[(long)s * P + n] < v)
                                v = d[(long)s * P + n];
                    }
                    if (isfinite(v) && v > floor_us)
                        floor_us = v;
                }
            free(d);
        }
        bool whole = true;
        for (int l = 0; l < in.L; l++)
            if (fabs(in.send_us[l] - in.kappa[l] * in.tau) > 1e-9 * in.tau)
                whole = false;
        if (whole) {
            double e = horizon_time_bound(&in, horizon_floor(&in));
            *exact = true;
            if (e > floor_us)
                floor_us = e;
        }
    }
    inst_free(&in);
    if (view) {
        collective_free(&nc);
        topology_free(nv);
    }
    return floor_us;
}

/* One chunking's trial in the best-of search. */
typedef struct chunk_trial {
    int chunks;
    double floor_us;    /* chunking_floor_us */
    bool floor_exact;
    cs_result *res;     /* its schedule, or NULL */
    json_t *entry;      /* what stats.chunking.tried says about it */
    double seconds;     /* spent on it, all passes */
    bool cut;           /* a share of the budget stopped it (no schedule, or one not proved) */
    bool pruned;        /* its floor cannot beat a schedule found */
} chunk_trial;

static int cmp_trial_floor(const void *x, const void *y)
{
    const chunk_trial *a = x, *b = y;
    if (a->floor_us < b->floor_us - 1e-9)
        return -1;
    if (a->floor_us > b->floor_us + 1e-9)
        return 1;
    return a->chunks - b->chunks; /* cheaper models first among equals */
}

/* A progress event of the best-of-chunkings search (outcome "chunking",
 * "chunking-pruned" or "chunking-done"; chunks = the chunking). */
static void chunking_progress(const cs_mcf_options *o, const char *outcome, int chunks,
                              double seconds, double t0, int done, int total, double best,
                              const char *fmt, ...) __attribute__((format(printf, 9, 10)));

static void chunking_progress(const cs_mcf_options *o, const char *outcome, int chunks,
                              double seconds, double t0, int done, int total, double best,
                              const char *fmt, ...)
{
    if (!o->progress)
        return;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cs_progress_event ev = {0};
    ev.method = "mcf";
    ev.outcome = outcome;
    ev.message = msg;
    ev.chunks = chunks;
    ev.seconds = seconds;
    ev.elapsed = cs_now() - t0;
    ev.done = done;
    ev.total = total;
    ev.best = best;
    o->progress(o->progress_ctx, &ev);
}

/* Trial x cannot be chosen over the best schedule b: its floor is above
 * b's end, or equal to it with no more chunks (ties go to more chunks). */
static bool cannot_win(const chunk_trial *x, const chunk_trial *b)
{
    double us = stats_schedule_us(b->res);
    return x->floor_us > us + 1e-9 || (x->floor_us >= us - 1e-9 && x->chunks <= b->chunks);
}

/* Appends "a, b, c" of the chunk counts of trials with flag set to buf. */
static void list_trials(char *buf, size_t n, const chunk_trial *tr, int nt, int which)
{
    size_t at = strlen(buf);
    bool first = true;
    for (int i = 0; i < nt && at + 8 < n; i++) {
        bool on = which == 0 ? tr[i].pruned : tr[i].cut;
        if (!on)
            continue;
        at += (size_t)snprintf(buf + at, n - at, "%s%d", first ? "" : ", ", tr[i].chunks);
        first = false;
    }
}

/* Runs chunking tr->chunks with `share` seconds (0: no limit). */
static int run_trial(const cs_topology *t, const cs_collective *c, const cs_mcf_options *o,
                     chunk_trial *tr, double share, int pass, cs_error *err)
{
    cs_mcf_options oc = *o;
    oc.chunks = tr->chunks;
    oc.min_chunks = tr->chunks;
    oc.max_chunks = 0;
    oc.time_limit_s = share;
    cs_result *one = NULL;
    cs_error e1;
    cs_error_clear(&e1);
    double t1 = cs_now();
    int rc = synthesize_nodes(t, c, &oc, &one, &e1);
    tr->seconds += cs_now() - t1;
    json_t *e = json_pack("{s:i, s:f, s:b, s:i, s:f}", "chunks", tr->chunks, "floor_us",
                          tr->floor_us, "floor_exact", tr->floor_exact, "pass", pass,
                          "share_s", share);
    if (rc != CS_OK) {
        if (tr->res) { /* a rerun that failed: the first pass's schedule stands */
            json_object_set_new(tr->entry, "rerun_error", json_string(e1.message));
            json_decref(e);
            if (err)
                *err = e1;
            return rc;
        }
        json_object_set_new(e, "error", json_string(e1.message));
        /* no schedule within its share: cut short (a later pass may retry) */
        tr->cut = rc == CS_ETIMEOUT;
        json_object_set_new(e, "outcome", json_string(tr->cut ? "cut short: no schedule "
                                                                "within its share"
                                                              : "error"));
        json_decref(tr->entry);
        tr->entry = e;
        if (err)
            *err = e1;
        return rc;
    }
    double us = stats_schedule_us(one);
    json_t *lp = json_object_get(one->stats, "mcf_lp");
    json_object_set_new(e, "chunk_bytes", json_real(o->bytes / tr->chunks));
    json_object_set_new(e, "schedule_us", json_real(us));
    json_object_set(e, "status", json_object_get(one->stats, "status"));
    json_object_set(e, "lp_time_us", json_object_get(lp, "time_us") ? json_object_get(lp,
                                                                                      "time_us")
                                                                   : json_null());
    json_object_set_new(e, "seconds", json_real(one->synth_seconds));
    /* a limited trial that proved nothing was cut short by its share;
     * a proved one, or one whose heuristic ran to its end, was not */
    tr->cut = !one->complete && share > 0 && one->synth_seconds >= 0.9 * share;
    json_object_set_new(e, "outcome",
                        json_string(one->complete ? "optimal"
                                    : tr->cut     ? "cut short: schedule not proved optimal "
                                                    "within its share"
                                                  : "schedule (not proved optimal)"));
    /* keep the faster of this pass's and an earlier pass's schedule, and
     * the entry that describes it */
    if (tr->res && stats_schedule_us(tr->res) <= us + 1e-9) {
        json_object_set_new(tr->entry, "rerun_schedule_us", json_real(us));
        json_decref(e);
        result_free(one);
    } else {
        json_decref(tr->entry);
        tr->entry = e;
        result_free(tr->res);
        tr->res = one;
    }
    return CS_OK;
}

/* options.chunks = C with min_chunks < C: the same bytes in lo..C chunks,
 * and the schedule that ends first is returned (ties go to more chunks).
 * Fewer, larger chunks pay alpha fewer times; more, smaller ones pipeline
 * better; which wins depends on the size, so the choice is measured, not
 * guessed.  Each chunking's schedule is optimal in its epoch model when its
 * status says so, so the result is at least as fast as any schedule of the
 * epoch model with lo..C chunks (the SMT frontier's k-synchronous schedules
 * among them, where the epoch model is exact).
 *
 * The time limit is shared, not spent first come first served (one
 * chunking's MILP could use it all: dgx2 broadcast, 8 chunks, 60 s proved
 * 2 chunks and never tried 3..8).  Each chunking gets a lower bound first
 * (chunking_floor_us); they run in the order of their floors (the most
 * promising first; equal floors: fewer chunks, the smaller model), each
 * with an even share of what is left (time_limit / chunkings left: what one
 * leaves unused carries forward), and a chunking whose floor is no better
 * than the best schedule found is not run: it cannot win.  Time left after
 * every chunking ran goes to a second pass over the ones their share cut
 * short and that can still win.  stats.chunking.tried says, per chunking,
 * its floor, share, pass and outcome. */
static int synthesize_best_chunking(const cs_topology *t, const cs_collective *c,
                                    const cs_mcf_options *o, cs_result **out, cs_error *err)
{
    int lo = o->min_chunks > 1 ? o->min_chunks : 1, hi = o->chunks;
    int cand[48];
    int nc = chunking_candidates(lo, hi, cand);
    double t0 = cs_now();
    bool limited = o->time_limit_s > 0;
    cs_time_bound tb;
    bool have_tb = collective_time_bound(t, c, &tb, NULL) == CS_OK;
    chunk_trial tr[48];
    memset(tr, 0, sizeof tr);
    for (int i = 0; i < nc; i++) {
        cs_mcf_options oc = *o;
        oc.chunks = cand[i];
        tr[i].chunks = cand[i];
        tr[i].floor_us = chunking_floor_us(t, c, &oc, have_tb ? &tb : NULL,
                                           &tr[i].floor_exact);
    }
    qsort(tr, (size_t)nc, sizeof *tr, cmp_trial_floor);
    int best = -1, rc = CS_OK;
    cs_error last_err;
    cs_error_clear(&last_err);
    bool any_unknown = false; /* a chunking neither run to a schedule nor pruned */
    int ndone = 0;            /* chunkings settled in pass 1 (progress events) */
    for (int pass = 1; pass <= 2 && rc == CS_OK; pass++) {
        /* pass 2: the chunkings cut short that can still win, when the
         * time left gives each more than it had */
        int todo = 0;
        for (int i = 0; i < nc; i++)
            todo += pass == 1 || tr[i].cut;
        if (pass == 2 && (!limited || todo == 0))
            break;
        for (int i = 0; i < nc; i++) {
            if (pass == 2 && !tr[i].cut)
                continue;
            if (best >= 0 && cannot_win(&tr[i], &tr[best])) {
                /* cannot end before the best (nor tie it with more chunks):
                 * proved unable to win */
                todo--;
                if (pass == 1) {
                    tr[i].pruned = true;
                    tr[i].entry = json_pack("{s:i, s:f, s:b, s:s, s:i, s:f}", "chunks",
                                            tr[i].chunks, "floor_us", tr[i].floor_us,
                                            "floor_exact", tr[i].floor_exact, "outcome",
                                            "not run: its floor cannot beat the best",
                                            "best_chunks", tr[best].chunks, "best_us",
                                            stats_schedule_us(tr[best].res));
                } else {
                    json_object_set_new(tr[i].entry, "cannot_win", json_true());
                }
                tr[i].cut = false;
                chunking_progress(o, "chunking-pruned", tr[i].chunks, 0, t0, ++ndone,
                                  nc, stats_schedule_us(tr[best].res),
                                  "mcf: %d chunks not run: floor %.4g us, best %.4g us (%d "
                                  "chunks)", tr[i].chunks, tr[i].floor_us,
                                  stats_schedule_us(tr[best].res), tr[best].chunks);
                continue;
            }
            double share = 0;
            if (limited) {
                double left = o->time_limit_s - (cs_now() - t0);
                share = left / (todo > 0 ? todo : 1);
                if (pass == 2 && share < 1.5 * json_number_value(json_object_get(tr[i].entry,
                                                                                  "share_s")))
                    break; /* no more than it had: a rerun would end the same */
                /* every chunking is at least started (its cheapest schedule:
                 * the greedy, the LP rounded), even when the ones before
                 * overran their shares */
                if (share < MCF_MIN_SHARE_S)
                    share = MCF_MIN_SHARE_S;
            }
            todo--;
            chunking_progress(o, "chunking", tr[i].chunks, 0, t0, ndone, nc,
                              best >= 0 ? stats_schedule_us(tr[best].res) : NAN,
                              "mcf: %d chunks (pass %d): floor %.4g us, %s%.3g s", tr[i].chunks,
                              pass, tr[i].floor_us, share > 0 ? "share " : "no time limit",
                              share > 0 ? share : 0.0);
            cs_error e1;
            int r1 = run_trial(t, c, o, &tr[i], share, pass, &e1);
            chunking_progress(o, "chunking-done", tr[i].chunks, tr[i].seconds, t0,
                              pass == 1 ? ++ndone : ndone, nc,
                              tr[i].res ? stats_schedule_us(tr[i].res) : NAN, "mcf: %d chunks: %s",
                              tr[i].chunks,
                              json_string_value(json_object_get(tr[i].entry, "outcome"))
                                  ? json_string_value(json_object_get(tr[i].entry, "outcome"))
                                  : "no outcome");
            if (r1 != CS_OK) {
                last_err = e1;
                if (r1 == CS_ECANCELLED ||
                    (r1 != CS_ETIMEOUT && r1 != CS_ELIMIT && r1 != CS_EUNSAT)) {
                    if (err)
                        *err = e1;
                    rc = r1;
                    break;
                }
                continue;
            }
            double us = stats_schedule_us(tr[i].res);
            if (best < 0 || us < stats_schedule_us(tr[best].res) - 1e-9 ||
                (us <= stats_schedule_us(tr[best].res) + 1e-9 && tr[i].chunks > tr[best].chunks))
                best = i;
        }
    }
    /* a chunking cut short whose floor cannot beat the best could not have
     * won with more time either */
    for (int i = 0; best >= 0 && i < nc; i++)
        if (i != best && tr[i].cut && cannot_win(&tr[i], &tr[best])) {
            tr[i].cut = false;
            json_object_set_new(tr[i].entry, "cannot_win", json_true());
        }
    json_t *tried = json_array();
    for (int i = 0; i < nc; i++) {
        any_unknown |= !tr[i].res && !tr[i].pruned &&
                       !json_is_true(json_object_get(tr[i].entry, "cannot_win"));
        if (tr[i].entry)
            json_array_append_new(tried, tr[i].entry);
        tr[i].entry = NULL;
    }
    if (rc != CS_OK || best < 0) {
        for (int i = 0; i < nc; i++)
            result_free(tr[i].res);
        json_decref(tried);
        if (rc != CS_OK)
            return rc;
        if (last_err.code != CS_OK) {
            if (err)
                *err = last_err;
            return last_err.code;
        }
        return cs_error_set(err, CS_EUNSAT, "options.chunks",
                            "mcf found no schedule for any chunking %d..%d", lo, hi);
    }
    cs_result *res = tr[best].res;
    tr[best].res = NULL;
    int best_c = tr[best].chunks;
    bool complete = res->complete && !any_unknown;
    for (int i = 0; i < nc; i++) {
        if (tr[i].res)
            complete &= tr[i].res->complete;
        result_free(tr[i].res);
    }
    /* why this chunking: against the requested one, or the runner-up */
    double bus = stats_schedule_us(res), other_us = NAN;
    int other_c = -1;
    for (size_t i = 0; i < json_array_size(tried); i++) {
        json_t *e = json_array_get(tried, i);
        int ci = (int)json_integer_value(json_object_get(e, "chunks"));
        json_t *us = json_object_get(e, "schedule_us");
        if (ci == best_c || !us)
            continue;
        if (ci == hi || other_c < 0 || (other_c != hi && json_number_value(us) < other_us)) {
            other_c = ci;
            other_us = json_number_value(us);
        }
    }
    int npruned = 0, ncut = 0;
    for (int i = 0; i < nc; i++) {
        npruned += tr[i].pruned;
        ncut += tr[i].cut;
    }
    char why[160];
    if (other_c < 0 && npruned > 0)
        snprintf(why, sizeof why, "no other chunking can beat it");
    else if (other_c < 0)
        snprintf(why, sizeof why, "the only chunking that found a schedule");
    else if (best_c == hi)
        snprintf(why, sizeof why, "%s than %d chunks (%.4g us)",
                 bus < other_us - 1e-9 ? "faster" : "as fast as (ties go to more chunks)",
                 other_c, other_us);
    else
        snprintf(why, sizeof why, "%d chunk%s take%s %.4g us: %s", other_c,
                 other_c == 1 ? "" : "s", other_c == 1 ? "s" : "", other_us,
                 best_c < other_c ? "fewer, larger chunks pay alpha fewer times"
                                  : "more, smaller chunks pipeline better");
    /* which chunkings could not win, and which a share cut short */
    char notes[200] = "";
    if (npruned) {
        snprintf(notes, sizeof notes, "; not run (their floors cannot beat %.4g us): ", bus);
        list_trials(notes, sizeof notes, tr, nc, 0);
    }
    if (ncut) {
        size_t at = strlen(notes);
        snprintf(notes + at, sizeof notes - at, "; cut short by their share of %.3g s: ",
                 o->time_limit_s);
        list_trials(notes, sizeof notes, tr, nc, 1);
    }
    char chunk_size[32];
    cs_format_size(chunk_size, sizeof chunk_size, o->bytes / best_c);
    cs_text_printf(res->reason, sizeof res->reason,
                   "mcf: %d chunk%s of %s end at %.4g us, the best of chunkings %d..%d of "
                   "the same bytes; %s%s",
                   best_c, best_c == 1 ? "" : "s", chunk_size, bus, lo, hi, why, notes);
    json_t *order = json_array(), *pruned = json_array(), *cut = json_array();
    for (int i = 0; i < nc; i++) {
        json_array_append_new(order, json_integer(tr[i].chunks));
        if (tr[i].pruned)
            json_array_append_new(pruned, json_integer(tr[i].chunks));
        if (tr[i].cut)
            json_array_append_new(cut, json_integer(tr[i].chunks));
    }
    json_object_set_new(res->stats, "chunking",
                        json_pack("{s:i, s:i, s:i, s:o, s:o, s:o, s:o, s:f, s:s}", "requested",
                                  hi, "min", lo, "chosen", best_c, "tried", tried, "order",
                                  order, "pruned", pruned, "cut_short", cut, "time_limit_s",
                                  o->time_limit_s, "reason", res->reason));
    res->complete = complete;
    res->synth_seconds = cs_now() - t0;
    *out = res;
    return CS_OK;
}

int mcf_synthesize(const cs_topology *t, const cs_collective *c, const cs_mcf_options *o,
                   cs_result **out, cs_error *err)
{
    *out = NULL;
    int rc = mcf_options_validate(o, t, c, err);
    if (rc)
        return rc;
    int hi = o->max_chunks > o->chunks ? o->max_chunks : o->chunks;
    if (hi == o->chunks && o->min_chunks < o->chunks && o->epochs == 0)
        return synthesize_best_chunking(t, c, o, out, err);
    if (hi == o->chunks)
        return synthesize_nodes(t, c, o, out, err);
    /* A frontier over chunkings: the same bytes in chunks..max_chunks chunks
     * (fewer chunks pay alpha fewer times, more pipeline better; which wins
     * depends on the size, as on SMT's frontier). */
    double t0 = cs_now();
    cs_result *res = NULL;
    json_t *by = json_array(), *cut = json_array();
    bool complete = true;
    cs_error last;
    cs_error_clear(&last);
    for (int C = o->chunks; C <= hi; C++) {
        cs_mcf_options oc = *o;
        oc.chunks = C;
        oc.max_chunks = 0;
        if (o->time_limit_s > 0) {
            /* an even share of what is left, as in the best-of search (one
             * chunking's MILP must not take the others' time) */
            double left = o->time_limit_s - (cs_now() - t0);
            oc.time_limit_s = left / (hi - C + 1);
            if (oc.time_limit_s < MCF_MIN_SHARE_S)
                oc.time_limit_s = MCF_MIN_SHARE_S;
        }
        cs_result *one = NULL;
        cs_error e1;
        cs_error_clear(&e1);
        rc = synthesize_nodes(t, c, &oc, &one, &e1);
        if (rc == CS_ETIMEOUT) { /* no schedule in its share: the next may find one */
            json_array_append_new(cut, json_integer(C));
            complete = false;
            last = e1;
            rc = CS_OK;
            continue;
        }
        if (rc != CS_OK) {
            if (rc == CS_ECANCELLED || !res) {
                if (err)
                    *err = e1;
                result_free(res);
                json_decref(by);
                json_decref(cut);
                return rc;
            }
            complete = false; /* keep the chunkings found so far */
            rc = CS_OK;
            break;
        }
        json_t *st = json_deep_copy(one->stats); /* a copy: res->stats will hold this array */
        json_object_set_new(st, "chunks", json_integer(C));
        json_array_append_new(by, st);
        complete &= one->complete;
        if (!res) {
            res = one;
            continue;
        }
        cs_algorithm *a = one->algs[0];
        one->nalgs = 0;
        result_free(one);
        if ((rc = result_add(res, a)) != CS_OK) {
            algorithm_free(a);
            result_free(res);
            json_decref(by);
            json_decref(cut);
            return cs_error_set(err, rc, "", "out of memory");
        }
    }
    if (!res) { /* every chunking timed out in its share */
        json_decref(by);
        json_decref(cut);
        if (err)
            *err = last;
        return CS_ETIMEOUT;
    }
    json_object_set_new(res->stats, "by_chunks", by);
    /* chunkings whose share ended without a schedule */
    json_object_set_new(res->stats, "cut_short_chunks", cut);
    res->complete = complete;
    res->synth_seconds = cs_now() - t0;
    *out = res;
    return CS_OK;
}
