/*
 * iso.c - canonical labelling of synthesis requests with bliss, the iso key,
 * and relabelling of schedules (iso.h).
 *
 * Colours: every vertex gets a 64-bit colour key, a hash of what it stands
 * for (a rank and its part in the collective, a link's lanes/gbps/alpha, a
 * switch's port, ...).  bliss wants small integers, so the distinct keys of
 * one graph are sorted and numbered: the numbering depends only on the set
 * of keys, never on the input's labels.  Two different things hashing alike
 * would merge two colour classes; that can only make a labelling less
 * canonical (a cache miss), never unsound, because the key is the hash of
 * the whole relabelled request (iso.h).
 */
#include "iso.h"

#include <bliss/bliss_C.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collective.h"

/* ---- colour keys -------------------------------------------------------------------- */

enum {
    K_RANK = 1, K_BI, K_TAIL, K_HEAD, K_SHARED, K_SWITCH, K_GROUP,
    K_XOUT, K_XIN, K_XSW, K_QGROUP, K_PORT, K_XTAIL, K_XHEAD, K_RSW, K_ROUT, K_RIN, K_TYPE
};

static uint64_t mix(uint64_t h, uint64_t x)
{
    h ^= x + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 31;
    h *= 0x94d049bb133111ebULL;
    h ^= h >> 29;
    return h;
}

static uint64_t dbits(double d)
{
    if (d == 0)
        d = 0; /* -0.0 and 0.0 are one value */
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static uint64_t link_attr(const cs_link *l)
{
    return mix(mix(mix(0x4c494e4bULL, (uint64_t)l->lanes), dbits(l->gbps)), dbits(l->alpha_us));
}

static uint64_t switch_attr(const cs_switch *s)
{
    uint64_t h = mix(mix(mix(0x53574954ULL, dbits(s->gbps)), dbits(s->alpha_us)),
                     (uint64_t)s->nranks);
    /* a copy-capable switch is another kind of vertex (attributes of
     * switches that cannot copy are unchanged, so are their keys) */
    return s->copy ? mix(h, 0x434f5059ULL) : h;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* A hash of a list of keys that does not depend on their order. */
static uint64_t hash_multiset(uint64_t seed, uint64_t *items, int n)
{
    qsort(items, (size_t)n, sizeof *items, cmp_u64);
    uint64_t h = mix(seed, (uint64_t)n);
    for (int i = 0; i < n; i++)
        h = mix(h, items[i]);
    return h;
}

/* ---- a growable vertex-coloured graph for bliss --------------------------------------- */

typedef struct gbuild {
    uint64_t *col;
    int nv, capv;
    unsigned *edges;   /* pairs */
    long ne, cape;
    bool oom;
} gbuild;

static int gb_vertex(gbuild *g, uint64_t colour)
{
    if (g->nv == g->capv) {
        int cap = g->capv ? 2 * g->capv : 64;
        uint64_t *c = realloc(g->col, sizeof *c * (size_t)cap);
        if (!c) {
            g->oom = true;
            return 0;
        }
        g->col = c;
        g->capv = cap;
    }
    g->col[g->nv] = colour;
    return g->nv++;
}

static void gb_edge(gbuild *g, int a, int b)
{
    if (g->ne == g->cape) {
        long cap = g->cape ? 2 * g->cape : 128;
        unsigned *e = realloc(g->edges, sizeof *e * 2 * (size_t)cap);
        if (!e) {
            g->oom = true;
            return;
        }
        g->edges = e;
        g->cape = cap;
    }
    g->edges[2 * g->ne] = (unsigned)a;
    g->edges[2 * g->ne + 1] = (unsigned)b;
    g->ne++;
}

static void gb_reset(gbuild *g)
{
    g->nv = 0;
    g->ne = 0;
}

static void gb_free(gbuild *g)
{
    free(g->col);
    free(g->edges);
    memset(g, 0, sizeof *g);
}

typedef struct orbit_ctx {
    int *parent;
} orbit_ctx;

static int uf_find(int *p, int x)
{
    while (p[x] != x) {
        p[x] = p[p[x]];
        x = p[x];
    }
    return x;
}

static void orbit_hook(void *user, unsigned int n, const unsigned int *aut)
{
    orbit_ctx *o = user;
    for (unsigned v = 0; v < n; v++) {
        int a = uf_find(o->parent, (int)v), b = uf_find(o->parent, (int)aut[v]);
        if (a != b) {
            if (a < b)
                o->parent[b] = a;
            else
                o->parent[a] = b;
        }
    }
}

static int cmp_u64_idx(const void *a, const void *b);

/* Colour refinement (1-dimensional Weisfeiler-Leman) with hashed colours:
 * when it ends with every vertex of its own colour, the order of the
 * colours is a canonical labelling (colours are functions of the graph, not
 * of its labels), and no search is needed.  *discrete tells; lab is filled
 * then.  bliss would find the same partition at its root, but on that path
 * bliss 0.73 leaks its component-recursion arrays (about 24 bytes per vertex,
 * per call), and these are most of the graphs a cluster request makes.  A
 * hash collision can only merge classes: then bliss runs, as it would have. */
static int wl_discrete(const gbuild *g, unsigned *lab, bool *discrete, cs_error *err)
{
    *discrete = false;
    int n = g->nv;
    if (n == 0) {
        *discrete = true;
        return CS_OK;
    }
    long *start = calloc((size_t)n + 1, sizeof *start);
    long *fill = calloc((size_t)n + 1, sizeof *fill);
    unsigned *adj = malloc(sizeof *adj * 2 * (size_t)(g->ne ? g->ne : 1));
    uint64_t *col = malloc(sizeof *col * (size_t)n), *next = malloc(sizeof *next * (size_t)n);
    uint64_t *tmp = malloc(sizeof *tmp * 2 * (size_t)n);
    uint64_t *nb = NULL;
    int rc = CS_OK;
    if (!start || !fill || !adj || !col || !next || !tmp) {
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
        goto out;
    }
    long maxd = 0;
    for (long e = 0; e < g->ne; e++) {
        start[g->edges[2 * e] + 1]++;
        start[g->edges[2 * e + 1] + 1]++;
    }
    for (int v = 0; v < n; v++) {
        if (start[v + 1] > maxd)
            maxd = start[v + 1];
        start[v + 1] += start[v];
    }
    for (long e = 0; e < g->ne; e++) {
        unsigned a = g->edges[2 * e], b = g->edges[2 * e + 1];
        adj[start[a] + fill[a]++] = b;
        adj[start[b] + fill[b]++] = a;
    }
    nb = malloc(sizeof *nb * (size_t)(maxd ? maxd : 1));
    if (!nb) {
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
        goto out;
    }
    memcpy(col, g->col, sizeof *col * (size_t)n);
    int classes = 0;
    /* Rounds cost O(n log n + m) each, and a long path needs n/2 of them to
     * become discrete: past a budget, bliss (whose refinement is not
     * round-based) takes over. */
    long budget = 64L * (n + 2 * g->ne) + (1L << 20), spent = 0;
    for (;;) {
        spent += n + 2 * g->ne;
        if (spent > budget)
            break;
        for (int v = 0; v < n; v++)
            tmp[v] = col[v];
        qsort(tmp, (size_t)n, sizeof *tmp, cmp_u64);
        int k = 0;
        for (int v = 0; v < n; v++)
            k += v == 0 || tmp[v] != tmp[v - 1];
        if (k == n) {
            /* discrete: positions in colour order */
            for (int v = 0; v < n; v++) {
                tmp[2 * v] = col[v];
                tmp[2 * v + 1] = (uint64_t)v;
            }
            qsort(tmp, (size_t)n, 2 * sizeof *tmp, cmp_u64_idx);
            for (int i = 0; i < n; i++)
                lab[tmp[2 * i + 1]] = (unsigned)i;
            *discrete = true;
            break;
        }
        if (k <= classes)
            break; /* stable and not discrete: bliss searches */
        classes = k;
        for (int v = 0; v < n; v++) {
            long d = start[v + 1] - start[v];
            for (long i = 0; i < d; i++)
                nb[i] = col[adj[start[v] + i]];
            next[v] = hash_multiset(col[v], nb, (int)d);
        }
        memcpy(col, next, sizeof *col * (size_t)n);
    }
out:
    free(start);
    free(fill);
    free(adj);
    free(col);
    free(next);
    free(tmp);
    free(nb);
    return rc;
}

/* Canonical labelling of g: lab[v] = v's position in the canonical graph.
 * With parent (nv entries), parent[] becomes a union-find forest of the
 * automorphism group's orbits. */
static int gb_canon(gbuild *g, unsigned *lab, int *parent, cs_error *err)
{
    if (g->oom)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory building the iso graph");
    bool discrete = false;
    int wrc = wl_discrete(g, lab, &discrete, err);
    if (wrc)
        return wrc;
    if (discrete) {
        /* no automorphism but the identity: every vertex is its own orbit */
        if (parent)
            for (int v = 0; v < g->nv; v++)
                parent[v] = v;
        return CS_OK;
    }
    uint64_t *sorted = malloc(sizeof *sorted * (size_t)(g->nv ? g->nv : 1));
    if (!sorted)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    memcpy(sorted, g->col, sizeof *sorted * (size_t)g->nv);
    qsort(sorted, (size_t)g->nv, sizeof *sorted, cmp_u64);
    int nd = 0;
    for (int i = 0; i < g->nv; i++)
        if (nd == 0 || sorted[nd - 1] != sorted[i])
            sorted[nd++] = sorted[i];
    BlissGraph *bg = bliss_new(0);
    if (!bg) {
        free(sorted);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    for (int v = 0; v < g->nv; v++) {
        uint64_t *hit = bsearch(&g->col[v], sorted, (size_t)nd, sizeof *sorted, cmp_u64);
        bliss_add_vertex(bg, (unsigned)(hit - sorted));
    }
    free(sorted);
    for (long e = 0; e < g->ne; e++)
        bliss_add_edge(bg, g->edges[2 * e], g->edges[2 * e + 1]);
    orbit_ctx oc = {parent};
    if (parent)
        for (int v = 0; v < g->nv; v++)
            parent[v] = v;
    const unsigned *cl = bliss_find_canonical_labeling(bg, parent ? orbit_hook : NULL, &oc, NULL);
    memcpy(lab, cl, sizeof *lab * (size_t)g->nv);
    bliss_release(bg);
    return CS_OK;
}

/* Canonical labelling through twin reduction.  Vertices of one colour with
 * the same neighbours ("twins") are interchangeable in every automorphism,
 * so their order never changes the canonical form: the graph with one
 * vertex per twin class (coloured by colour and class size) is labelled,
 * and each class is laid out at its representative's place.  bliss spends
 * its time individualizing such vertices one by one (nodes on a fabric
 * switch, GPUs alone on an NVSwitch), so this shrinks both the graph and
 * the search. */
static int cmp_u64_idx(const void *a, const void *b)
{
    /* (value, index) pairs */
    const uint64_t *x = a, *y = b;
    if (x[0] != y[0])
        return x[0] < y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

static int cmp_unsigned(const void *a, const void *b)
{
    unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
    return x < y ? -1 : x > y;
}

/* N(u) + {u} == N(v) + {v}, both lists sorted and without duplicates:
 * walks both lists with u (v) taken in at its place. */
static bool same_closed(const unsigned *nu, long du, int u, const unsigned *nv, long dv, int v)
{
    if (du != dv)
        return false;
    long i = 0, j = 0;
    bool u_done = false, v_done = false;
    for (long k = 0; k <= du; k++) {
        unsigned a, b;
        if (!u_done && (i == du || (unsigned)u < nu[i])) {
            a = (unsigned)u;
            u_done = true;
        } else {
            a = nu[i++];
        }
        if (!v_done && (j == dv || (unsigned)v < nv[j])) {
            b = (unsigned)v;
            v_done = true;
        } else {
            b = nv[j++];
        }
        if (a != b)
            return false;
    }
    return true;
}

static int gb_canon_twins(gbuild *g, unsigned *lab, cs_error *err)
{
    if (g->oom)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory building the iso graph");
    int n = g->nv;
    long *start = calloc((size_t)n + 1, sizeof *start);
    unsigned *adj = malloc(sizeof *adj * 2 * (size_t)(g->ne ? g->ne : 1));
    long *fill = calloc((size_t)n + 1, sizeof *fill);
    uint64_t *key = malloc(sizeof *key * 2 * (size_t)(n ? n : 1));
    int *rep = malloc(sizeof *rep * (size_t)(n ? n : 1));
    int *size = calloc((size_t)(n ? n : 1), sizeof *size);
    int *runreps = NULL;
    uint64_t *truek = NULL;
    char *kind = NULL;
    int rc = CS_OK;
    if (!start || !adj || !fill || !key || !rep || !size) {
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
        goto out;
    }
    for (long e = 0; e < g->ne; e++) {
        start[g->edges[2 * e] + 1]++;
        start[g->edges[2 * e + 1] + 1]++;
    }
    for (int v = 0; v < n; v++)
        start[v + 1] += start[v];
    for (long e = 0; e < g->ne; e++) {
        unsigned a = g->edges[2 * e], b = g->edges[2 * e + 1];
        adj[start[a] + fill[a]++] = b;
        adj[start[b] + fill[b]++] = a;
    }
    for (int v = 0; v < n; v++) {
        unsigned *nb = adj + start[v];
        long d = start[v + 1] - start[v], k = 0;
        qsort(nb, (size_t)d, sizeof *nb, cmp_unsigned);
        for (long i = 0; i < d; i++) /* duplicate edges are one edge */
            if (k == 0 || nb[k - 1] != nb[i])
                nb[k++] = nb[i];
        fill[v] = k; /* degree without duplicates */
        uint64_t h = mix(g->col[v], (uint64_t)k);
        for (long i = 0; i < k; i++)
            h = mix(h, nb[i]);
        key[2 * v] = h;
        key[2 * v + 1] = (uint64_t)v;
    }
    qsort(key, (size_t)n, 2 * sizeof *key, cmp_u64_idx);
    int nrep = 0;
    runreps = malloc(sizeof *runreps * (size_t)n);
    truek = malloc(sizeof *truek * 2 * (size_t)n);
    kind = calloc((size_t)n, 1);
    if (!runreps || !truek || !kind) {
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
        goto out;
    }
    /* false twins: the same colour and the same (open) neighbourhood */
    for (int i = 0; i < n;) {
        int j = i, nr = 0;
        while (j < n && key[2 * j] == key[2 * i])
            j++;
        /* equal hashes: compare exactly against the run's representatives */
        for (int x = i; x < j; x++) {
            int v = (int)key[2 * x + 1];
            rep[v] = v;
            for (int y = 0; y < nr; y++) {
                int u = runreps[y];
                if (g->col[u] == g->col[v] && fill[u] == fill[v] &&
                    !memcmp(adj + start[u], adj + start[v], sizeof *adj * (size_t)fill[v])) {
                    rep[v] = u;
                    break;
                }
            }
            if (rep[v] == v)
                runreps[nr++] = v;
            size[rep[v]]++;
        }
        i = j;
    }
    /* true twins, among the vertices left alone: adjacent, with the same
     * colour and the same closed neighbourhood (a clique of ranks: the
     * fully connected builtins).  A vertex cannot have both kinds. */
    int nt = 0;
    for (int v = 0; v < n; v++)
        if (size[v] == 1 && rep[v] == v) {
            uint64_t h = mix(mix(g->col[v], 0x54525545ULL), (uint64_t)fill[v] + 1);
            bool placed = false;
            for (long i = 0; i < fill[v]; i++) {
                unsigned w = adj[start[v] + i];
                if (!placed && (unsigned)v < w) {
                    h = mix(h, (uint64_t)v);
                    placed = true;
                }
                h = mix(h, w);
            }
            if (!placed)
                h = mix(h, (uint64_t)v);
            truek[2 * nt] = h;
            truek[2 * nt + 1] = (uint64_t)v;
            nt++;
        }
    qsort(truek, (size_t)nt, 2 * sizeof *truek, cmp_u64_idx);
    for (int i = 0; i < nt;) {
        int j = i, nr = 0;
        while (j < nt && truek[2 * j] == truek[2 * i])
            j++;
        for (int x = i; x < j && j - i > 1; x++) {
            int v = (int)truek[2 * x + 1];
            for (int y = 0; y < nr; y++) {
                int u = runreps[y];
                if (g->col[u] == g->col[v] && same_closed(adj + start[u], fill[u], u,
                                                          adj + start[v], fill[v], v)) {
                    rep[v] = u;
                    kind[u] = 1;
                    size[u]++;
                    size[v]--;
                    break;
                }
            }
            if (rep[v] == v)
                runreps[nr++] = v;
        }
        i = j;
    }
    nrep = 0;
    for (int v = 0; v < n; v++)
        nrep += rep[v] == v;
    if (nrep == n) {
        rc = gb_canon(g, lab, NULL, err);
        goto out;
    }
    /* the reduced graph: representatives in vertex order */
    {
        int *idx = malloc(sizeof *idx * (size_t)n);
        gbuild r = {0};
        if (!idx) {
            rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
            goto out;
        }
        for (int v = 0; v < n; v++)
            if (rep[v] == v)
                idx[v] = gb_vertex(&r, mix(mix(mix(0x54574e53ULL, g->col[v]), (uint64_t)size[v]),
                                       (uint64_t)kind[v]));
        for (int v = 0; v < n; v++) {
            if (rep[v] != v)
                continue;
            for (long i = 0; i < fill[v]; i++) {
                int w = (int)adj[start[v] + i];
                if (rep[w] == w && idx[v] < idx[w])
                    gb_edge(&r, idx[v], idx[w]);
            }
        }
        unsigned *rlab = malloc(sizeof *rlab * (size_t)(r.nv ? r.nv : 1));
        int *byc = malloc(sizeof *byc * (size_t)(r.nv ? r.nv : 1));
        int *off = malloc(sizeof *off * (size_t)n);
        if (!rlab || !byc || !off)
            rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
        if (!rc)
            rc = gb_canon(&r, rlab, NULL, err);
        if (!rc) {
            /* classes laid out in their representatives' canonical order */
            for (int v = 0; v < n; v++)
                if (rep[v] == v)
                    byc[rlab[idx[v]]] = v;
            int next = 0;
            for (int k = 0; k < r.nv; k++) {
                off[byc[k]] = next;
                next += size[byc[k]];
            }
            for (int v = 0; v < n; v++)
                lab[v] = (unsigned)off[rep[v]]++;
        }
        free(rlab);
        free(byc);
        free(off);
        free(idx);
        gb_free(&r);
    }
out:
    free(start);
    free(adj);
    free(fill);
    free(key);
    free(rep);
    free(size);
    free(runreps);
    free(truek);
    free(kind);
    return rc;
}

/* A hash of the canonical form of g under lab (colours in canonical order and
 * the canonical edge list): equal for isomorphic coloured graphs. */
static uint64_t gb_canon_hash(const gbuild *g, const unsigned *lab, bool *oom)
{
    uint64_t *cols = malloc(sizeof *cols * (size_t)(g->nv ? g->nv : 1));
    uint64_t *edges = malloc(sizeof *edges * (size_t)(g->ne ? g->ne : 1));
    if (!cols || !edges) {
        free(cols);
        free(edges);
        *oom = true;
        return 0;
    }
    for (int v = 0; v < g->nv; v++)
        cols[lab[v]] = g->col[v];
    for (long e = 0; e < g->ne; e++) {
        uint64_t a = lab[g->edges[2 * e]], b = lab[g->edges[2 * e + 1]];
        edges[e] = a < b ? (a << 32) | b : (b << 32) | a;
    }
    qsort(edges, (size_t)g->ne, sizeof *edges, cmp_u64);
    uint64_t h = mix(K_TYPE, (uint64_t)g->nv);
    for (int v = 0; v < g->nv; v++)
        h = mix(h, cols[v]);
    for (long e = 0; e < g->ne; e++)
        if (e == 0 || edges[e] != edges[e - 1])
            h = mix(h, edges[e]);
    free(cols);
    free(edges);
    return h;
}

/* ---- the request's structure ------------------------------------------------------------ */

typedef struct iso_ctx {
    const cs_synth_request *r;
    const cs_topology *t;
    int P;
    uint64_t *role;        /* rank -> colour key of its part in the collective */
    bool *in_shared;       /* link -> in a shared set from the document */
    int *link_group;       /* two-level: link -> group when internal, else -1 */
    int *switch_group;     /* two-level: switch -> group when internal, else -1 */
    int *shared_group;     /* two-level: shared set -> group when internal, else -1 */
    /* Physical links only (switches' lowered links are not the document's
     * and can outnumber them a thousandfold): their indices in (src, dst)
     * order, so phys[pout_begin[r] .. pout_begin[r+1]) are r's out-links;
     * pin[pin_begin[r] .. pin_begin[r+1]) its in-links. */
    int nphys;
    int *phys, *pout_begin, *pin_begin, *pin;
    /* The most common kind of two-way link (lanes, gbps, alpha), a choice
     * that depends on the network only: links of this kind are plain edges
     * between their ranks, every other kind gets subdivision vertices.
     * Subdividing every link of a star or a fully connected graph hides
     * that their ranks are interchangeable (twins), and bliss then searches
     * the whole symmetric group (star:4096 took 27 s; now microseconds). */
    bool have_plain;
    uint64_t plain_attr;
} iso_ctx;

static int physical_links(iso_ctx *c, cs_error *err)
{
    const cs_topology *t = c->t;
    int P = c->P, n = 0;
    for (int i = 0; i < t->nlinks; i++)
        n += t->links[i].switch_id < 0;
    c->nphys = n;
    c->phys = malloc(sizeof *c->phys * (size_t)(n ? n : 1));
    c->pin = malloc(sizeof *c->pin * (size_t)(n ? n : 1));
    c->pout_begin = calloc((size_t)P + 1, sizeof *c->pout_begin);
    c->pin_begin = calloc((size_t)P + 1, sizeof *c->pin_begin);
    int *fill = calloc((size_t)P + 1, sizeof *fill);
    if (!c->phys || !c->pin || !c->pout_begin || !c->pin_begin || !fill) {
        free(fill);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    n = 0;
    for (int i = 0; i < t->nlinks; i++)
        if (t->links[i].switch_id < 0) {
            c->phys[n++] = i;
            c->pout_begin[t->links[i].src + 1]++;
            c->pin_begin[t->links[i].dst + 1]++;
        }
    for (int r = 0; r < P; r++) {
        c->pout_begin[r + 1] += c->pout_begin[r];
        c->pin_begin[r + 1] += c->pin_begin[r];
    }
    for (int k = 0; k < n; k++) {
        int d = t->links[c->phys[k]].dst;
        c->pin[c->pin_begin[d] + fill[d]++] = c->phys[k];
    }
    free(fill);
    return CS_OK;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return x < y ? -1 : x > y;
}

static int rank_roles(iso_ctx *c, cs_error *err)
{
    int P = c->P;
    c->role = malloc(sizeof *c->role * (size_t)P);
    if (!c->role)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    if (!c->r) {
        /* the topology alone: every rank alike */
        for (int r = 0; r < P; r++)
            c->role[r] = mix(K_RANK, 0);
        return CS_OK;
    }
    const cs_collective *col = &c->r->collective;
    for (int r = 0; r < P; r++)
        c->role[r] = mix(K_RANK, collective_kind_is_rooted(col->kind) && r == col->root);
    if (col->kind != CS_COLL_CUSTOM)
        return CS_OK;
    /* A rank's part in a custom collective: the (chunk, pre/post) pairs it
     * appears in.  Chunk numbers are not relabelled: they name the data. */
    long n = (long)col->npre + col->npost;
    uint64_t *items = malloc(sizeof *items * (size_t)(n ? n : 1));
    int *start = calloc((size_t)P + 1, sizeof *start);
    int *fill = calloc((size_t)P, sizeof *fill);
    if (!items || !start || !fill) {
        free(items);
        free(start);
        free(fill);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    for (int i = 0; i < col->npre; i++)
        start[col->pre[2 * i + 1] + 1]++;
    for (int i = 0; i < col->npost; i++)
        start[col->post[2 * i + 1] + 1]++;
    for (int r = 0; r < P; r++)
        start[r + 1] += start[r];
    for (int i = 0; i < col->npre; i++) {
        int r = col->pre[2 * i + 1];
        items[start[r] + fill[r]++] = (uint64_t)col->pre[2 * i] * 2;
    }
    for (int i = 0; i < col->npost; i++) {
        int r = col->post[2 * i + 1];
        items[start[r] + fill[r]++] = (uint64_t)col->post[2 * i] * 2 + 1;
    }
    for (int r = 0; r < P; r++) {
        /* duplicates say nothing new (as in the canonical request) */
        uint64_t *v = items + start[r];
        int m = start[r + 1] - start[r], k = 0;
        qsort(v, (size_t)m, sizeof *v, cmp_u64);
        for (int i = 0; i < m; i++)
            if (k == 0 || v[k - 1] != v[i])
                v[k++] = v[i];
        c->role[r] = hash_multiset(c->role[r], v, k);
    }
    free(items);
    free(start);
    free(fill);
    return CS_OK;
}

static bool link_is_physical(const cs_topology *t, int i) { return t->links[i].switch_id < 0; }

static bool same_attr(const cs_link *a, const cs_link *b)
{
    return a->lanes == b->lanes && dbits(a->gbps) == dbits(b->gbps) &&
           dbits(a->alpha_us) == dbits(b->alpha_us);
}

/* The reverse link of i when it is physical and can share i's subdivision
 * vertex (same attributes, neither in a shared set); else -1. */
static int mergeable_reverse(const iso_ctx *c, int i)
{
    const cs_link *l = &c->t->links[i];
    if (c->in_shared[i])
        return -1;
    int j = topology_find_link(c->t, l->dst, l->src);
    if (j < 0 || !link_is_physical(c->t, j) || c->in_shared[j] || !same_attr(l, &c->t->links[j]))
        return -1;
    return j;
}

/* Adds link i (and its mergeable reverse, when i is the lower end) between
 * the vertices vu and vv of its ends; *tail gets the vertex shared sets
 * attach to (-1 when the link was added with its reverse). */
static void add_link(gbuild *g, const iso_ctx *c, int i, int vu, int vv, int *tail)
{
    const cs_link *l = &c->t->links[i];
    *tail = -1;
    int j = mergeable_reverse(c, i);
    if (j >= 0) {
        if (l->src < l->dst && c->have_plain && link_attr(l) == c->plain_attr) {
            gb_edge(g, vu, vv);
        } else if (l->src < l->dst) {
            int s = gb_vertex(g, mix(K_BI, link_attr(l)));
            gb_edge(g, vu, s);
            gb_edge(g, s, vv);
        }
        return;
    }
    int a = gb_vertex(g, mix(K_TAIL, link_attr(l)));
    int b = gb_vertex(g, mix(K_HEAD, link_attr(l)));
    gb_edge(g, vu, a);
    gb_edge(g, a, b);
    gb_edge(g, b, vv);
    *tail = a;
}

static int choose_plain_links(iso_ctx *c, cs_error *err)
{
    const cs_topology *t = c->t;
    uint64_t *a = malloc(sizeof *a * (size_t)(c->nphys ? c->nphys : 1));
    if (!a)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    int n = 0;
    for (int k = 0; k < c->nphys; k++) {
        int i = c->phys[k];
        if (t->links[i].src < t->links[i].dst && mergeable_reverse(c, i) >= 0)
            a[n++] = link_attr(&t->links[i]);
    }
    qsort(a, (size_t)n, sizeof *a, cmp_u64);
    int best = 0;
    for (int i = 0; i < n;) {
        int j = i;
        while (j < n && a[j] == a[i])
            j++;
        /* most links; a tie goes to the smaller hash (also label-free) */
        if (j - i > best) {
            best = j - i;
            c->plain_attr = a[i];
            c->have_plain = true;
        }
        i = j;
    }
    free(a);
    return CS_OK;
}

/* ---- scheme "direct": the whole request in one graph ------------------------------------------ */

static int canon_direct(iso_ctx *c, int *canon_of, cs_error *err)
{
    const cs_topology *t = c->t;
    int P = c->P;
    gbuild g = {0};
    int *tail = malloc(sizeof *tail * (size_t)(t->nlinks ? t->nlinks : 1));
    if (!tail)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    for (int r = 0; r < P; r++)
        gb_vertex(&g, c->role[r]);
    for (int k = 0; k < c->nphys; k++) {
        int i = c->phys[k];
        add_link(&g, c, i, t->links[i].src, t->links[i].dst, &tail[i]);
    }
    for (int s = 0; s < t->nshared; s++) {
        const cs_shared *sh = &t->shared[s];
        if (sh->switch_id >= 0)
            continue;
        int v = gb_vertex(&g, mix(K_SHARED, (uint64_t)sh->lanes));
        for (int k = 0; k < sh->nlinks; k++)
            gb_edge(&g, v, tail[sh->links[k]]);
    }
    for (int s = 0; s < t->nswitches; s++) {
        int v = gb_vertex(&g, mix(K_SWITCH, switch_attr(&t->switches[s])));
        for (int k = 0; k < t->switches[s].nranks; k++)
            gb_edge(&g, v, t->switches[s].ranks[k]);
    }
    for (int q = 0; q < t->ngroups; q++) {
        int v = gb_vertex(&g, K_GROUP);
        for (int k = 0; k < t->groups[q].nranks; k++)
            gb_edge(&g, v, t->groups[q].ranks[k]);
    }
    free(tail);
    unsigned *lab = malloc(sizeof *lab * (size_t)(g.nv ? g.nv : 1));
    int rc = lab ? gb_canon_twins(&g, lab, err) : cs_error_set(err, CS_ENOMEM, "", "out of memory");
    /* ranks in canonical order: their canonical positions, compressed (lab
     * is a permutation, so this is a counting pass) */
    int *pos = rc ? NULL : malloc(sizeof *pos * (size_t)(g.nv ? g.nv : 1));
    if (!rc && !pos)
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
    if (!rc) {
        for (int v = 0; v < g.nv; v++)
            pos[v] = -1;
        for (int r = 0; r < P; r++)
            pos[lab[r]] = r;
        int k = 0;
        for (int v = 0; v < g.nv; v++)
            if (pos[v] >= 0)
                canon_of[pos[v]] = k++;
    }
    free(pos);
    free(lab);
    gb_free(&g);
    return rc;
}

/* ---- scheme "two-level": nodes, the node-level quotient, ranks inside nodes ---------------------- */

/* Whether the topology is made of groups that partition the ranks, with
 * every document shared set inside one group (else: direct). */
static bool two_level_applies(const cs_topology *t)
{
    if (t->ngroups < 2 || !t->group_of)
        return false;
    long total = 0;
    for (int q = 0; q < t->ngroups; q++)
        total += t->groups[q].nranks;
    if (total != t->ranks)
        return false;
    for (int r = 0; r < t->ranks; r++)
        if (t->group_of[r] < 0)
            return false;
    for (int s = 0; s < t->nshared; s++) {
        const cs_shared *sh = &t->shared[s];
        if (sh->switch_id >= 0 || sh->nlinks == 0)
            continue;
        int q = t->group_of[t->links[sh->links[0]].src];
        for (int k = 0; k < sh->nlinks; k++) {
            const cs_link *l = &t->links[sh->links[k]];
            if (t->group_of[l->src] != q || t->group_of[l->dst] != q)
                return false;
        }
    }
    return true;
}

/* Nodes of a cluster are mostly copies written the same way (the hook and
 * the builtins repeat one node's links in one order), so their graphs are
 * often identical vertex for vertex: bliss is deterministic, so the
 * labelling of the first serves all of them.  Entries keep the whole graph
 * and are compared exactly (the hash only finds candidates). */
typedef struct gmemo_entry {
    uint64_t h;
    int nv;
    long ne;
    uint64_t *col;
    unsigned *edges;
    unsigned *lab;
    int *orbit;            /* (b): per rank vertex, the orbit's smallest position */
    uint64_t type;         /* (b): the node type */
} gmemo_entry;

typedef struct gmemo {
    gmemo_entry *e;
    int n, cap;
} gmemo;

#define GMEMO_MAX 4096

static uint64_t gb_hash(const gbuild *g)
{
    uint64_t h = mix((uint64_t)g->nv, (uint64_t)g->ne);
    for (int v = 0; v < g->nv; v++)
        h = mix(h, g->col[v]);
    for (long e = 0; e < 2 * g->ne; e++)
        h = mix(h, g->edges[e]);
    return h;
}

static gmemo_entry *gmemo_find(const gmemo *m, const gbuild *g, uint64_t h)
{
    for (int i = 0; i < m->n; i++) {
        gmemo_entry *e = &m->e[i];
        if (e->h == h && e->nv == g->nv && e->ne == g->ne &&
            !memcmp(e->col, g->col, sizeof *e->col * (size_t)g->nv) &&
            !memcmp(e->edges, g->edges, sizeof *e->edges * 2 * (size_t)g->ne))
            return e;
    }
    return NULL;
}

/* Adds g with its labelling (and, for (b), orbits of its first nranks
 * vertices and type); NULL when full or out of memory (the caller then
 * simply does not reuse it). */
static gmemo_entry *gmemo_add(gmemo *m, const gbuild *g, uint64_t h, const unsigned *lab,
                              const int *orbit, int nranks, uint64_t type)
{
    if (m->n >= GMEMO_MAX)
        return NULL;
    if (m->n == m->cap) {
        int cap = m->cap ? 2 * m->cap : 16;
        gmemo_entry *e = realloc(m->e, sizeof *e * (size_t)cap);
        if (!e)
            return NULL;
        m->e = e;
        m->cap = cap;
    }
    gmemo_entry *e = &m->e[m->n];
    memset(e, 0, sizeof *e);
    e->h = h;
    e->nv = g->nv;
    e->ne = g->ne;
    e->type = type;
    e->col = malloc(sizeof *e->col * (size_t)(g->nv ? g->nv : 1));
    e->edges = malloc(sizeof *e->edges * 2 * (size_t)(g->ne ? g->ne : 1));
    e->lab = malloc(sizeof *e->lab * (size_t)(g->nv ? g->nv : 1));
    e->orbit = orbit ? malloc(sizeof *e->orbit * (size_t)(nranks ? nranks : 1)) : NULL;
    if (!e->col || !e->edges || !e->lab || (orbit && !e->orbit)) {
        free(e->col);
        free(e->edges);
        free(e->lab);
        free(e->orbit);
        return NULL;
    }
    memcpy(e->col, g->col, sizeof *e->col * (size_t)g->nv);
    memcpy(e->edges, g->edges, sizeof *e->edges * 2 * (size_t)g->ne);
    memcpy(e->lab, lab, sizeof *e->lab * (size_t)g->nv);
    if (orbit)
        memcpy(e->orbit, orbit, sizeof *e->orbit * (size_t)nranks);
    m->n++;
    return e;
}

static void gmemo_free(gmemo *m)
{
    for (int i = 0; i < m->n; i++) {
        free(m->e[i].col);
        free(m->e[i].edges);
        free(m->e[i].lab);
        free(m->e[i].orbit);
    }
    free(m->e);
    memset(m, 0, sizeof *m);
}

typedef struct two_level {
    int G;
    uint64_t *sig;         /* rank -> label-free attachment to the fabric (and role) */
    uint64_t *type;        /* group -> node type */
    int *orbit;            /* rank -> smallest canonical local position of its orbit */
    unsigned *bpos;        /* rank -> its canonical position in step (b)'s node graph */
    int *local;            /* rank -> index in its group's rank list */
    int *gpos;             /* group -> canonical position */
    int *swpos;            /* switch -> canonical position among external switches (-1: internal) */
    int *canon_of;         /* rank -> canonical rank, -1 until its group is done */
    int **gswitches;       /* group -> internal switches, -1 terminated */
    int **gshared;         /* group -> internal shared sets, -1 terminated */
} two_level;

static void two_level_free(two_level *w)
{
    free(w->sig);
    free(w->type);
    free(w->orbit);
    free(w->bpos);
    free(w->local);
    free(w->gpos);
    free(w->swpos);
    if (w->gswitches)
        for (int q = 0; q < w->G; q++)
            free(w->gswitches[q]);
    if (w->gshared)
        for (int q = 0; q < w->G; q++)
            free(w->gshared[q]);
    free(w->gswitches);
    free(w->gshared);
}

/* Lists, per group, the items (switches or shared sets) whose group is it. */
static int **per_group_lists(const int *item_group, int nitems, int G)
{
    int *count = calloc((size_t)G, sizeof *count);
    int **lists = calloc((size_t)G, sizeof *lists);
    bool ok = count && lists;
    for (int i = 0; ok && i < nitems; i++)
        if (item_group[i] >= 0)
            count[item_group[i]]++;
    for (int q = 0; ok && q < G; q++) {
        lists[q] = malloc(sizeof(int) * (size_t)(count[q] + 1));
        ok = lists[q] != NULL;
        if (ok)
            lists[q][0] = -1;
        count[q] = 0;
    }
    for (int i = 0; ok && i < nitems; i++)
        if (item_group[i] >= 0) {
            int q = item_group[i];
            lists[q][count[q]++] = i;
            lists[q][count[q]] = -1;
        }
    free(count);
    if (!ok && lists) {
        for (int q = 0; q < G; q++)
            free(lists[q]);
        free(lists);
        return NULL;
    }
    return lists;
}

/* The graph of group q alone: its ranks (vertices 0..n-1 in the group's
 * list order) coloured by colour[], its internal links, shared sets and
 * switches. */
static void build_group_graph(gbuild *g, const iso_ctx *c, const two_level *w, int q,
                              const uint64_t *colour, int *tail)
{
    const cs_topology *t = c->t;
    const cs_group *grp = &t->groups[q];
    gb_reset(g);
    for (int k = 0; k < grp->nranks; k++)
        gb_vertex(g, colour[grp->ranks[k]]);
    for (int k = 0; k < grp->nranks; k++) {
        int r = grp->ranks[k];
        for (int x = c->pout_begin[r]; x < c->pout_begin[r + 1]; x++) {
            int i = c->phys[x];
            tail[i] = -1;
            if (c->link_group[i] == q)
                add_link(g, c, i, w->local[r], w->local[t->links[i].dst], &tail[i]);
        }
    }
    for (const int *s = w->gshared[q]; *s >= 0; s++) {
        const cs_shared *sh = &t->shared[*s];
        int v = gb_vertex(g, mix(K_SHARED, (uint64_t)sh->lanes));
        for (int k = 0; k < sh->nlinks; k++)
            gb_edge(g, v, tail[sh->links[k]]);
    }
    for (const int *s = w->gswitches[q]; *s >= 0; s++) {
        const cs_switch *sw = &t->switches[*s];
        int v = gb_vertex(g, mix(K_SWITCH, switch_attr(sw)));
        for (int k = 0; k < sw->nranks; k++)
            gb_edge(g, v, w->local[sw->ranks[k]]);
    }
}

static int cmp_u64_pair(const void *a, const void *b)
{
    const uint64_t *x = a, *y = b;
    if (x[0] != y[0])
        return x[0] < y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

static int canon_two_level(iso_ctx *c, int *canon_of, cs_error *err)
{
    const cs_topology *t = c->t;
    int P = c->P, G = t->ngroups;
    two_level w = {.G = G};
    gbuild g = {0};
    gmemo memo_b = {0}, memo_d = {0};
    int rc = CS_OK;
    uint64_t *items = NULL, *colour = NULL;
    unsigned *lab = NULL;
    int *parent = NULL, *tail = NULL;
    c->link_group = malloc(sizeof(int) * (size_t)(t->nlinks ? t->nlinks : 1));
    c->switch_group = malloc(sizeof(int) * (size_t)(t->nswitches ? t->nswitches : 1));
    c->shared_group = malloc(sizeof(int) * (size_t)(t->nshared ? t->nshared : 1));
    w.sig = malloc(sizeof *w.sig * (size_t)P);
    w.type = malloc(sizeof *w.type * (size_t)G);
    w.orbit = malloc(sizeof *w.orbit * (size_t)P);
    w.bpos = malloc(sizeof *w.bpos * (size_t)P);
    w.local = malloc(sizeof *w.local * (size_t)P);
    w.gpos = malloc(sizeof *w.gpos * (size_t)G);
    w.swpos = malloc(sizeof *w.swpos * (size_t)(t->nswitches ? t->nswitches : 1));
    colour = malloc(sizeof *colour * (size_t)P);
    tail = malloc(sizeof *tail * (size_t)(t->nlinks ? t->nlinks : 1));
    if (!c->link_group || !c->switch_group || !c->shared_group || !w.sig || !w.type ||
        !w.orbit || !w.bpos || !w.local || !w.gpos || !w.swpos || !colour || !tail) {
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
        goto out;
    }
    w.canon_of = canon_of;
    for (int r = 0; r < P; r++)
        canon_of[r] = -1;
    for (int q = 0; q < G; q++)
        for (int k = 0; k < t->groups[q].nranks; k++)
            w.local[t->groups[q].ranks[k]] = k;
    for (int x = 0; x < c->nphys; x++) {
        int i = c->phys[x];
        int a = t->group_of[t->links[i].src], b = t->group_of[t->links[i].dst];
        c->link_group[i] = a == b ? a : -1;
    }
    for (int s = 0; s < t->nswitches; s++) {
        const cs_switch *sw = &t->switches[s];
        int q = sw->nranks > 0 ? t->group_of[sw->ranks[0]] : -1;
        for (int k = 1; k < sw->nranks && q >= 0; k++)
            if (t->group_of[sw->ranks[k]] != q)
                q = -1;
        c->switch_group[s] = q;
    }
    for (int s = 0; s < t->nshared; s++)
        c->shared_group[s] = t->shared[s].switch_id >= 0 || t->shared[s].nlinks == 0
                                 ? -1
                                 : c->link_group[t->shared[s].links[0]];
    w.gswitches = per_group_lists(c->switch_group, t->nswitches, G);
    w.gshared = per_group_lists(c->shared_group, t->nshared, G);
    if (!w.gswitches || !w.gshared) {
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
        goto out;
    }

    /* (a) each rank's label-free attachment to the fabric */
    int *nitems = calloc((size_t)P + 1, sizeof *nitems);
    if (!nitems) {
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
        goto out;
    }
    for (int x = 0; x < c->nphys; x++)
        if (c->link_group[c->phys[x]] < 0) {
            int i = c->phys[x];
            nitems[t->links[i].src + 1]++;
            nitems[t->links[i].dst + 1]++;
        }
    for (int s = 0; s < t->nswitches; s++)
        if (c->switch_group[s] < 0)
            for (int k = 0; k < t->switches[s].nranks; k++)
                nitems[t->switches[s].ranks[k] + 1]++;
    for (int r = 0; r < P; r++)
        nitems[r + 1] += nitems[r];
    long nall = nitems[P];
    items = malloc(sizeof *items * (size_t)(nall ? nall : 1));
    int *fill = calloc((size_t)P, sizeof *fill);
    if (!items || !fill) {
        free(nitems);
        free(fill);
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
        goto out;
    }
    for (int x = 0; x < c->nphys; x++)
        if (c->link_group[c->phys[x]] < 0) {
            int i = c->phys[x];
            int u = t->links[i].src, v = t->links[i].dst;
            items[nitems[u] + fill[u]++] = mix(K_XOUT, link_attr(&t->links[i]));
            items[nitems[v] + fill[v]++] = mix(K_XIN, link_attr(&t->links[i]));
        }
    for (int s = 0; s < t->nswitches; s++)
        if (c->switch_group[s] < 0)
            for (int k = 0; k < t->switches[s].nranks; k++) {
                int r = t->switches[s].ranks[k];
                items[nitems[r] + fill[r]++] = mix(K_XSW, switch_attr(&t->switches[s]));
            }
    for (int r = 0; r < P; r++)
        w.sig[r] = hash_multiset(c->role[r], items + nitems[r], nitems[r + 1] - nitems[r]);
    free(nitems);
    free(fill);
    free(items);
    items = NULL;

    /* (b) node types and the orbits of their ranks */
    int maxv = 0;
    for (int q = 0; q < G; q++) {
        const cs_group *grp = &t->groups[q];
        build_group_graph(&g, c, &w, q, w.sig, tail);
        uint64_t h = gb_hash(&g);
        const gmemo_entry *hit = gmemo_find(&memo_b, &g, h);
        if (hit) {
            w.type[q] = hit->type;
            for (int k = 0; k < grp->nranks; k++)
            {
                w.orbit[grp->ranks[k]] = hit->orbit[k];
                w.bpos[grp->ranks[k]] = hit->lab[k];
            }
            continue;
        }
        if (g.nv > maxv) {
            unsigned *nl = realloc(lab, sizeof *lab * (size_t)g.nv);
            int *np = realloc(parent, sizeof *parent * (size_t)g.nv);
            if (nl)
                lab = nl;
            if (np)
                parent = np;
            if (!nl || !np) {
                rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
                goto out;
            }
            maxv = g.nv;
        }
        if ((rc = gb_canon(&g, lab, parent, err)))
            goto out;
        bool oom = false;
        w.type[q] = gb_canon_hash(&g, lab, &oom);
        if (oom) {
            rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
            goto out;
        }
        /* orbit ids: the smallest canonical position in the orbit */
        int *best = malloc(sizeof *best * (size_t)(g.nv ? g.nv : 1));
        if (!best) {
            rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
            goto out;
        }
        for (int v = 0; v < g.nv; v++)
            best[v] = INT32_MAX;
        for (int k = 0; k < grp->nranks; k++) {
            int root = uf_find(parent, k);
            if ((int)lab[k] < best[root])
                best[root] = (int)lab[k];
        }
        for (int k = 0; k < grp->nranks; k++)
        {
            w.orbit[grp->ranks[k]] = best[uf_find(parent, k)];
            w.bpos[grp->ranks[k]] = lab[k];
        }
        int *orb = malloc(sizeof *orb * (size_t)(grp->nranks ? grp->nranks : 1));
        if (orb) {
            for (int k = 0; k < grp->nranks; k++)
                orb[k] = w.orbit[grp->ranks[k]];
            gmemo_add(&memo_b, &g, h, lab, orb, grp->nranks, w.type[q]);
        }
        free(orb);
        free(best);
    }

    /* (c) the node-level quotient: nodes by type, the fabric's switches and
     * links, ports by type and orbit */
    gb_reset(&g);
    for (int q = 0; q < G; q++)
        gb_vertex(&g, mix(K_QGROUP, w.type[q]));
    int *swv = malloc(sizeof *swv * (size_t)(t->nswitches ? t->nswitches : 1));
    uint64_t *pairs = NULL;
    if (!swv) {
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
        goto out;
    }
    int maxn = 0;
    for (int s = 0; s < t->nswitches; s++)
        if (t->switches[s].nranks > maxn)
            maxn = t->switches[s].nranks;
    pairs = malloc(sizeof *pairs * 2 * (size_t)(maxn ? maxn : 1));
    items = malloc(sizeof *items * (size_t)(maxn ? maxn : 1));
    if (!pairs || !items) {
        free(swv);
        free(pairs);
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
        goto out;
    }
    /* ports: (group, switch vertex, colour) triples */
    long nports = 0, capports = 0;
    uint64_t *ports = NULL;
    for (int s = 0; s < t->nswitches; s++) {
        swv[s] = -1;
        if (c->switch_group[s] >= 0)
            continue;
        const cs_switch *sw = &t->switches[s];
        int v = swv[s] = gb_vertex(&g, mix(K_XSW, switch_attr(sw)));
        /* one port per (switch, group): the orbits of the group's ranks on
         * the switch */
        for (int k = 0; k < sw->nranks; k++) {
            pairs[2 * k] = (uint64_t)t->group_of[sw->ranks[k]];
            pairs[2 * k + 1] = (uint64_t)w.orbit[sw->ranks[k]];
        }
        qsort(pairs, (size_t)sw->nranks, 2 * sizeof *pairs, cmp_u64_pair);
        for (int k = 0; k < sw->nranks;) {
            int q = (int)pairs[2 * k], m = 0;
            while (k < sw->nranks && (int)pairs[2 * k] == q)
                items[m++] = pairs[2 * k++ + 1];
            if (nports == capports) {
                long cap = capports ? 2 * capports : 256;
                uint64_t *np = realloc(ports, sizeof *np * 3 * (size_t)cap);
                if (!np) {
                    g.oom = true;
                    break;
                }
                ports = np;
                capports = cap;
            }
            ports[3 * nports] = (uint64_t)q;
            ports[3 * nports + 1] = (uint64_t)v;
            ports[3 * nports + 2] = hash_multiset(mix(K_PORT, w.type[q]), items, m);
            nports++;
        }
    }
    /* When every port has one colour (nodes of one type, each attached to
     * each fabric switch the same way: rails, a fabric switch), the port
     * vertices say nothing an edge does not, and without them bliss has a
     * far smaller graph to search (a rail-optimized cluster's quotient is
     * then K(nodes, rails)). */
    bool uniform = true;
    for (long k = 1; k < nports && uniform; k++)
        uniform = ports[3 * k + 2] == ports[2];
    for (long k = 0; k < nports; k++) {
        int q = (int)ports[3 * k], v = (int)ports[3 * k + 1];
        if (uniform) {
            gb_edge(&g, q, v);
        } else {
            int pv = gb_vertex(&g, ports[3 * k + 2]);
            gb_edge(&g, q, pv);
            gb_edge(&g, pv, v);
        }
    }
    free(ports);
    free(pairs);
    for (int x = 0; x < c->nphys; x++) {
        int i = c->phys[x];
        if (c->link_group[i] >= 0)
            continue;
        const cs_link *l = &t->links[i];
        int gu = t->group_of[l->src], gv = t->group_of[l->dst];
        int a = gb_vertex(&g, mix(mix(mix(K_XTAIL, link_attr(l)), w.type[gu]),
                                  (uint64_t)w.orbit[l->src]));
        int b = gb_vertex(&g, mix(mix(mix(K_XHEAD, link_attr(l)), w.type[gv]),
                                  (uint64_t)w.orbit[l->dst]));
        gb_edge(&g, gu, a);
        gb_edge(&g, a, b);
        gb_edge(&g, b, gv);
    }
    {
        unsigned *qlab = malloc(sizeof *qlab * (size_t)(g.nv ? g.nv : 1));
        if (!qlab) {
            free(swv);
            rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
            goto out;
        }
        if ((rc = gb_canon_twins(&g, qlab, err))) {
            free(qlab);
            free(swv);
            goto out;
        }
        /* groups and external switches in canonical order */
        int *byq = malloc(sizeof *byq * (size_t)(g.nv ? g.nv : 1));
        if (!byq) {
            free(qlab);
            free(swv);
            rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
            goto out;
        }
        for (int v = 0; v < g.nv; v++)
            byq[v] = -1;
        for (int q = 0; q < G; q++)
            byq[qlab[q]] = q;
        int k = 0;
        for (int v = 0; v < g.nv; v++)
            if (byq[v] >= 0)
                w.gpos[byq[v]] = k++;
        for (int v = 0; v < g.nv; v++)
            byq[v] = -1;
        for (int s = 0; s < t->nswitches; s++) {
            w.swpos[s] = -1;
            if (swv[s] >= 0)
                byq[qlab[swv[s]]] = s;
        }
        k = 0;
        for (int v = 0; v < g.nv; v++)
            if (byq[v] >= 0)
                w.swpos[byq[v]] = k++;
        free(byq);
        free(qlab);
        free(swv);
    }

    /* (d) ranks inside each node, node by node in canonical order, coloured
     * by the canonical fabric elements they attach to (and the canonical
     * ranks of neighbours in nodes already done) */
    int *gorder = malloc(sizeof *gorder * (size_t)G);
    int *rsw_count = calloc((size_t)P + 1, sizeof *rsw_count);
    int *rsw = NULL;
    if (!gorder || !rsw_count) {
        free(gorder);
        free(rsw_count);
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
        goto out;
    }
    for (int q = 0; q < G; q++)
        gorder[w.gpos[q]] = q;
    /* external switches per rank (CSR) */
    long nsw = 0;
    for (int s = 0; s < t->nswitches; s++)
        if (w.swpos[s] >= 0)
            for (int k = 0; k < t->switches[s].nranks; k++) {
                rsw_count[t->switches[s].ranks[k] + 1]++;
                nsw++;
            }
    for (int r = 0; r < P; r++)
        rsw_count[r + 1] += rsw_count[r];
    rsw = malloc(sizeof *rsw * (size_t)(nsw ? nsw : 1));
    int *rfill = calloc((size_t)P, sizeof *rfill);
    if (!rsw || !rfill) {
        free(gorder);
        free(rsw_count);
        free(rsw);
        free(rfill);
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
        goto out;
    }
    for (int s = 0; s < t->nswitches; s++)
        if (w.swpos[s] >= 0)
            for (int k = 0; k < t->switches[s].nranks; k++) {
                int r = t->switches[s].ranks[k];
                rsw[rsw_count[r] + rfill[r]++] = w.swpos[s];
            }
    free(rfill);
    int offset = 0;
    uint64_t *ritems = NULL;
    int ritems_cap = 0;
    for (int gi = 0; gi < G && !rc; gi++) {
        int q = gorder[gi];
        const cs_group *grp = &t->groups[q];
        for (int k = 0; k < grp->nranks && !rc; k++) {
            int r = grp->ranks[k];
            int need = rsw_count[r + 1] - rsw_count[r] + (c->pout_begin[r + 1] - c->pout_begin[r]) +
                       (c->pin_begin[r + 1] - c->pin_begin[r]);
            if (need > ritems_cap) {
                uint64_t *n = realloc(ritems, sizeof *n * (size_t)need);
                if (!n) {
                    rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
                    break;
                }
                ritems = n;
                ritems_cap = need;
            }
            int m = 0;
            for (int x = rsw_count[r]; x < rsw_count[r + 1]; x++)
                ritems[m++] = mix(K_RSW, (uint64_t)rsw[x]);
            for (int xo = c->pout_begin[r]; xo < c->pout_begin[r + 1]; xo++) {
                int i = c->phys[xo];
                if (c->link_group[i] >= 0)
                    continue;
                int x = t->links[i].dst;
                uint64_t who = canon_of[x] >= 0 ? (uint64_t)canon_of[x]
                                                : ((uint64_t)1 << 40) + (uint64_t)w.orbit[x];
                ritems[m++] = mix(mix(mix(K_ROUT, link_attr(&t->links[i])),
                                      (uint64_t)w.gpos[t->group_of[x]]),
                                  who);
            }
            for (int j = c->pin_begin[r]; j < c->pin_begin[r + 1]; j++) {
                int i = c->pin[j];
                if (c->link_group[i] >= 0)
                    continue;
                int x = t->links[i].src;
                uint64_t who = canon_of[x] >= 0 ? (uint64_t)canon_of[x]
                                                : ((uint64_t)1 << 40) + (uint64_t)w.orbit[x];
                ritems[m++] = mix(mix(mix(K_RIN, link_attr(&t->links[i])),
                                      (uint64_t)w.gpos[t->group_of[x]]),
                                  who);
            }
            colour[r] = hash_multiset(w.sig[r], ritems, m);
        }
        if (rc)
            break;
        /* The group's ranks in canonical order.  Two shortcuts before bliss:
         * ranks whose colours are all distinct are ordered by colour (the
         * colours are canonical); colours that split the ranks exactly as
         * step (b)'s did leave (b)'s canonical order valid (every
         * automorphism of (b)'s graph keeps them). */
        int n = grp->nranks;
        uint64_t *ord = malloc(sizeof *ord * 2 * (size_t)(n ? n : 1));
        uint64_t *pc = malloc(sizeof *pc * 2 * (size_t)(n ? n : 1));
        if (!ord || !pc) {
            free(ord);
            free(pc);
            rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
            break;
        }
        for (int k = 0; k < n; k++) {
            pc[2 * k] = w.sig[grp->ranks[k]];
            pc[2 * k + 1] = colour[grp->ranks[k]];
        }
        qsort(pc, (size_t)n, 2 * sizeof *pc, cmp_u64_pair);
        int dsig = 0, dpair = 0;
        for (int k = 0; k < n; k++) {
            dsig += k == 0 || pc[2 * k] != pc[2 * k - 2];
            dpair += k == 0 || pc[2 * k] != pc[2 * k - 2] || pc[2 * k + 1] != pc[2 * k - 1];
        }
        for (int k = 0; k < n; k++)
            pc[k] = colour[grp->ranks[k]];
        qsort(pc, (size_t)n, sizeof *pc, cmp_u64);
        int dcol = 0;
        for (int k = 0; k < n; k++)
            dcol += k == 0 || pc[k] != pc[k - 1];
        free(pc);
        if (dcol == n) {
            for (int k = 0; k < n; k++)
                ord[2 * k] = colour[grp->ranks[k]];
        } else if (dpair == dsig && dcol == dsig) {
            for (int k = 0; k < n; k++)
                ord[2 * k] = w.bpos[grp->ranks[k]];
        } else {
            build_group_graph(&g, c, &w, q, colour, tail);
            if (g.nv > maxv) {
                unsigned *nl = realloc(lab, sizeof *lab * (size_t)g.nv);
                if (!nl) {
                    free(ord);
                    rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
                    break;
                }
                lab = nl;
                maxv = g.nv;
            }
            uint64_t h = gb_hash(&g);
            const gmemo_entry *hit = gmemo_find(&memo_d, &g, h);
            if (hit) {
                memcpy(lab, hit->lab, sizeof *lab * (size_t)g.nv);
            } else {
                if ((rc = gb_canon(&g, lab, NULL, err))) {
                    free(ord);
                    break;
                }
                gmemo_add(&memo_d, &g, h, lab, NULL, 0, 0);
            }
            /* rank vertices are 0..n-1 */
            for (int k = 0; k < n; k++)
                ord[2 * k] = lab[k];
        }
        for (int k = 0; k < n; k++)
            ord[2 * k + 1] = (uint64_t)grp->ranks[k];
        qsort(ord, (size_t)n, 2 * sizeof *ord, cmp_u64_pair);
        for (int k = 0; k < n; k++)
            canon_of[ord[2 * k + 1]] = offset + k;
        offset += n;
        free(ord);
    }
    free(ritems);
    free(gorder);
    free(rsw_count);
    free(rsw);

out:
    free(items);
    free(colour);
    free(lab);
    free(parent);
    free(tail);
    gb_free(&g);
    gmemo_free(&memo_b);
    gmemo_free(&memo_d);
    two_level_free(&w);
    return rc;
}

/* ---- the canonical text and the key ------------------------------------------------------------ */

/* Appenders without printf (the text is a cs_buf, cs_common.h): the
 * canonical text of a 1024-rank cluster has tens of thousands of numbers,
 * and printf's parsing (and %.17g above all) dominated its cost. */
static void sb_int(cs_buf *b, long v)
{
    char tmp[24];
    int n = 0;
    unsigned long u = v < 0 ? 0UL - (unsigned long)v : (unsigned long)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        tmp[n++] = '-';
    if (!cs_buf_reserve(b, (size_t)n))
        return;
    while (n)
        b->s[b->len++] = tmp[--n];
    b->s[b->len] = '\0';
}

/* A double, exactly: its IEEE bits as "x" and 16 hex digits (-0 as 0). */
static void sb_real(cs_buf *b, double d)
{
    static const char hex[] = "0123456789abcdef";
    uint64_t u = dbits(d);
    if (!cs_buf_reserve(b, 17))
        return;
    b->s[b->len++] = 'x';
    for (int i = 15; i >= 0; i--)
        b->s[b->len++] = hex[(u >> (4 * i)) & 15];
    b->s[b->len] = '\0';
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_int_pair(const void *a, const void *b)
{
    const int *x = a, *y = b;
    if (x[0] != y[0])
        return x[0] < y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

/* Appends a sorted, comma-separated list of element texts (each malloc'd,
 * freed here). */
static void sb_sorted_list(cs_buf *b, char **texts, int n)
{
    qsort(texts, (size_t)n, sizeof *texts, cmp_str);
    cs_buf_printf(b, "[");
    for (int i = 0; i < n; i++) {
        if (i)
            cs_buf_putc(b, ',');
        cs_buf_puts(b, texts[i] ? texts[i] : "");
        free(texts[i]);
    }
    cs_buf_printf(b, "]");
}

static char *ranks_text(const int *ranks, int n, const int *canon_of)
{
    int *v = malloc(sizeof *v * (size_t)(n ? n : 1));
    if (!v)
        return NULL;
    for (int k = 0; k < n; k++)
        v[k] = canon_of[ranks[k]];
    qsort(v, (size_t)n, sizeof *v, cmp_int);
    cs_buf b = {0};
    cs_buf_printf(&b, "[");
    for (int k = 0; k < n; k++) {
        if (k)
            cs_buf_putc(&b, ',');
        sb_int(&b, v[k]);
    }
    cs_buf_putc(&b, ']');
    free(v);
    if (b.failed) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

static int cmp_attr(const void *a, const void *b)
{
    const uint64_t *x = a, *y = b;
    for (int i = 0; i < 3; i++)
        if (x[i] != y[i])
            return x[i] < y[i] ? -1 : 1;
    return 0;
}

static char *canonical_text(const iso_ctx *c, const int *canon_of)
{
    const cs_synth_request *r = c->r;
    const cs_topology *t = r->topology;
    cs_buf b = {0};
    cs_buf_printf(&b, "{\"v\":\"%s\",\"ranks\":%d,\"link_kinds\":[", ISO_KEY_VERSION, t->ranks);
    /* physical links in canonical numbers, sorted by (src, dst) */
    int n = c->nphys;
    int *lk = malloc(sizeof *lk * 3 * (size_t)(n ? n : 1));
    if (!lk) {
        free(b.s);
        return NULL;
    }
    for (int k = 0; k < n; k++) {
        int i = c->phys[k];
        lk[3 * k] = canon_of[t->links[i].src];
        lk[3 * k + 1] = canon_of[t->links[i].dst];
        lk[3 * k + 2] = i;
    }
    qsort(lk, (size_t)n, 3 * sizeof *lk, cmp_int_pair);
    /* Link attributes repeat (a cluster has a handful of link kinds): they
     * are written once, sorted, and links name them by index, which keeps
     * the text (and its hashing) short. */
    uint64_t *attr = malloc(sizeof *attr * 4 * (n > 0 ? (size_t)n : 1));
    if (!attr) {
        free(lk);
        free(b.s);
        return NULL;
    }
    for (int k = 0; k < n; k++) {
        const cs_link *l = &t->links[c->phys[k]];
        attr[4 * k] = (uint64_t)l->lanes;
        attr[4 * k + 1] = dbits(l->gbps);
        attr[4 * k + 2] = dbits(l->alpha_us);
        attr[4 * k + 3] = 0;
    }
    qsort(attr, (size_t)n, 4 * sizeof *attr, cmp_attr);
    int na = 0;
    for (int k = 0; k < n; k++)
        if (na == 0 || cmp_attr(&attr[4 * (na - 1)], &attr[4 * k]) != 0) {
            memmove(&attr[4 * na], &attr[4 * k], 4 * sizeof *attr);
            na++;
        }
    for (int k = 0; k < na; k++) {
        double gbps, alpha;
        memcpy(&gbps, &attr[4 * k + 1], sizeof gbps);
        memcpy(&alpha, &attr[4 * k + 2], sizeof alpha);
        cs_buf_puts(&b, k ? ",[" : "[");
        sb_int(&b, (long)attr[4 * k]);
        cs_buf_putc(&b, ',');
        sb_real(&b, gbps);
        cs_buf_putc(&b, ',');
        sb_real(&b, alpha);
        cs_buf_putc(&b, ']');
    }
    cs_buf_puts(&b, "],\"links\":[");
    for (int k = 0; k < n; k++) {
        const cs_link *l = &t->links[lk[3 * k + 2]];
        uint64_t key[4] = {(uint64_t)l->lanes, dbits(l->gbps), dbits(l->alpha_us), 0};
        const uint64_t *hit = bsearch(key, attr, (size_t)na, 4 * sizeof *attr, cmp_attr);
        cs_buf_puts(&b, k ? ",[" : "[");
        sb_int(&b, lk[3 * k]);
        cs_buf_putc(&b, ',');
        sb_int(&b, lk[3 * k + 1]);
        cs_buf_putc(&b, ',');
        sb_int(&b, hit ? (long)((hit - attr) / 4) : -1);
        cs_buf_putc(&b, ']');
    }
    free(attr);
    free(lk);
    cs_buf_printf(&b, "],\"shared\":");
    char **texts = malloc(sizeof *texts *
                          (size_t)(t->nshared + t->nswitches + t->ngroups + 1));
    if (!texts) {
        free(b.s);
        return NULL;
    }
    int m = 0;
    for (int s = 0; s < t->nshared; s++) {
        const cs_shared *sh = &t->shared[s];
        if (sh->switch_id >= 0)
            continue;
        int *pairs = malloc(sizeof *pairs * 2 * (size_t)(sh->nlinks ? sh->nlinks : 1));
        cs_buf e = {0};
        if (!pairs) {
            b.failed = true;
            continue;
        }
        for (int k = 0; k < sh->nlinks; k++) {
            pairs[2 * k] = canon_of[t->links[sh->links[k]].src];
            pairs[2 * k + 1] = canon_of[t->links[sh->links[k]].dst];
        }
        qsort(pairs, (size_t)sh->nlinks, 2 * sizeof *pairs, cmp_int_pair);
        cs_buf_printf(&e, "[%d,[", sh->lanes);
        for (int k = 0; k < sh->nlinks; k++) {
            cs_buf_puts(&e, k ? ",[" : "[");
            sb_int(&e, pairs[2 * k]);
            cs_buf_putc(&e, ',');
            sb_int(&e, pairs[2 * k + 1]);
            cs_buf_putc(&e, ']');
        }
        cs_buf_printf(&e, "]]");
        free(pairs);
        if (e.failed)
            b.failed = true;
        texts[m++] = e.s;
    }
    sb_sorted_list(&b, texts, m);
    cs_buf_printf(&b, ",\"switches\":");
    m = 0;
    for (int s = 0; s < t->nswitches; s++) {
        const cs_switch *sw = &t->switches[s];
        char *rt = ranks_text(sw->ranks, sw->nranks, canon_of);
        cs_buf e = {0};
        cs_buf_putc(&e, '[');
        sb_real(&e, sw->gbps);
        cs_buf_putc(&e, ',');
        sb_real(&e, sw->alpha_us);
        cs_buf_putc(&e, ',');
        cs_buf_puts(&e, rt ? rt : "?");
        cs_buf_putc(&e, ']');
        if (!rt || e.failed)
            b.failed = true;
        free(rt);
        texts[m++] = e.s;
    }
    sb_sorted_list(&b, texts, m);
    cs_buf_printf(&b, ",\"groups\":");
    m = 0;
    for (int q = 0; q < t->ngroups; q++) {
        texts[m] = ranks_text(t->groups[q].ranks, t->groups[q].nranks, canon_of);
        if (!texts[m])
            b.failed = true;
        m++;
    }
    sb_sorted_list(&b, texts, m);
    free(texts);

    const cs_collective *col = &r->collective;
    cs_buf_printf(&b, ",\"collective\":{\"kind\":\"%s\"", collective_kind_name(col->kind));
    if (collective_kind_is_rooted(col->kind))
        cs_buf_printf(&b, ",\"root\":%d", col->root >= 0 && col->root < t->ranks ? canon_of[col->root] : -1);
    if (col->kind == CS_COLL_CUSTOM) {
        cs_buf_printf(&b, ",\"global_chunks\":%d", col->custom_global_chunks);
        const int *lists[2] = {col->pre, col->post};
        int counts[2] = {col->npre, col->npost};
        for (int wh = 0; wh < 2; wh++) {
            int *p = malloc(sizeof *p * 2 * (size_t)(counts[wh] ? counts[wh] : 1));
            if (!p) {
                b.failed = true;
                continue;
            }
            for (int j = 0; j < counts[wh]; j++) {
                p[2 * j] = lists[wh][2 * j];
                p[2 * j + 1] = canon_of[lists[wh][2 * j + 1]];
            }
            qsort(p, (size_t)counts[wh], 2 * sizeof *p, cmp_int_pair);
            cs_buf_printf(&b, ",\"%s\":[", wh ? "post" : "pre");
            int out = 0;
            for (int j = 0; j < counts[wh]; j++) {
                if (j > 0 && p[2 * j] == p[2 * j - 2] && p[2 * j + 1] == p[2 * j - 1])
                    continue;
                cs_buf_printf(&b, "%s[%d,%d]", out++ ? "," : "", p[2 * j], p[2 * j + 1]);
            }
            cs_buf_printf(&b, "]");
            free(p);
        }
    }
    cs_buf_printf(&b, "}");
    /* the method and every option the canonical request writes out */
    json_t *mo = json_object();
    if (mo && r->canonical) {
        json_object_set(mo, "method", json_object_get(r->canonical, "method"));
        json_object_set(mo, "options", json_object_get(r->canonical, "options"));
    }
    char *mot = mo ? json_dumps(mo, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17))
                   : NULL;
    json_decref(mo);
    if (!mot)
        b.failed = true;
    cs_buf_printf(&b, ",\"request\":%s}", mot ? mot : "null");
    free(mot);
    if (b.failed) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

static void ctx_free(iso_ctx *c)
{
    free(c->role);
    free(c->in_shared);
    free(c->link_group);
    free(c->switch_group);
    free(c->shared_group);
    free(c->phys);
    free(c->pout_begin);
    free(c->pin_begin);
    free(c->pin);
}

char *iso_canonical_text(const cs_synth_request *r, const int *canon_of)
{
    iso_ctx c = {.r = r, .t = r->topology, .P = r->topology->ranks};
    char *text = physical_links(&c, NULL) == CS_OK ? canonical_text(&c, canon_of) : NULL;
    ctx_free(&c);
    return text;
}

/* ---- entry points ---------------------------------------------------------------------------- */

void iso_form_clear(cs_iso_form *f)
{
    if (!f)
        return;
    free(f->canon_of);
    memset(f, 0, sizeof *f);
}

/* The canonical labelling of c's topology (and request, when c->r is set)
 * into canon_of; the scheme used into scheme. */
static int labelling(iso_ctx *c, const cs_iso_options *opt, int *canon_of, char scheme[16],
                     cs_error *err)
{
    const cs_topology *t = c->t;
    int max_ranks = opt && opt->max_ranks > 0 ? opt->max_ranks : 65536;
    if (t->ranks > max_ranks)
        return cs_error_set(err, CS_ELIMIT, "topology",
                            "%d ranks: isomorphism keys are computed up to %d ranks", t->ranks,
                            max_ranks);
    int two_min = opt && opt->two_level_min_ranks ? opt->two_level_min_ranks
                                                  : ISO_TWO_LEVEL_MIN_RANKS;
    int rc = rank_roles(c, err);
    c->in_shared = calloc((size_t)(t->nlinks ? t->nlinks : 1), sizeof *c->in_shared);
    if (!rc && !c->in_shared)
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
    if (!rc)
        rc = physical_links(c, err);
    long max_links = opt && opt->max_links > 0 ? opt->max_links : 1000000;
    if (!rc && c->nphys > max_links)
        rc = cs_error_set(err, CS_ELIMIT, "topology",
                          "%d links: isomorphism keys are computed up to %ld links", c->nphys,
                          max_links);
    if (!rc) {
        for (int s = 0; s < t->nshared; s++)
            if (t->shared[s].switch_id < 0)
                for (int k = 0; k < t->shared[s].nlinks; k++)
                    c->in_shared[t->shared[s].links[k]] = true;
        rc = choose_plain_links(c, err);
    }
    if (!rc) {
        bool two = two_min > 0 && t->ranks >= two_min && two_level_applies(t);
        snprintf(scheme, 16, "%s", two ? "two-level" : "direct");
        rc = two ? canon_two_level(c, canon_of, err) : canon_direct(c, canon_of, err);
    }
    if (!rc) {
        /* a labelling that is not a permutation would be a bug here */
        char *seen = calloc((size_t)(t->ranks ? t->ranks : 1), 1);
        if (!seen)
            rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
        for (int k = 0; !rc && k < t->ranks; k++) {
            int x = canon_of[k];
            if (x < 0 || x >= t->ranks || seen[x])
                rc = cs_error_set(err, CS_EINTERNAL, "", "iso labelling is not a permutation");
            else
                seen[x] = 1;
        }
        free(seen);
    }
    return rc;
}

int iso_topology_labelling(const cs_topology *t, const cs_iso_options *opt, int *canon_of,
                           char scheme[16], cs_error *err)
{
    iso_ctx c = {.r = NULL, .t = t, .P = t->ranks};
    char sch[16];
    int rc = labelling(&c, opt, canon_of, scheme ? scheme : sch, err);
    ctx_free(&c);
    return rc;
}

int iso_canonicalize(const cs_synth_request *r, const cs_iso_options *opt, cs_iso_form *out,
                     cs_error *err)
{
    memset(out, 0, sizeof *out);
    double t0 = cs_now();
    const cs_topology *t = r->topology;
    iso_ctx c = {.r = r, .t = t, .P = t->ranks};
    int rc = CS_OK;
    out->canon_of = malloc(sizeof *out->canon_of * (size_t)(t->ranks ? t->ranks : 1));
    if (!out->canon_of)
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
    /* Schedules on copy-capable switches name switch nodes (ranks + j), which
     * a rank labelling does not map: such requests share results by their
     * exact key only. */
    if (!rc && t->nswitch_nodes > 0)
        rc = cs_error_set(err, CS_EUNSUPPORTED, "topology", "topology %s has copy-capable "
                          "switches: no isomorphism key (exact keys only)", t->name);
    if (!rc)
        rc = labelling(&c, opt, out->canon_of, out->scheme, err);
    if (!rc) {
        char *text = canonical_text(&c, out->canon_of);
        if (!text)
            rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
        else
            synth_sha256_hex(text, strlen(text), out->key);
        free(text);
    }
    ctx_free(&c);
    out->ranks = t->ranks;
    out->seconds = cs_now() - t0;
    if (rc)
        iso_form_clear(out);
    return rc;
}

int iso_compose(const cs_iso_form *from, const cs_iso_form *to, int *map, cs_error *err)
{
    if (strcmp(from->key, to->key) != 0 || from->ranks != to->ranks)
        return cs_error_set(err, CS_EINVAL, "", "the two requests are not isomorphic");
    int P = from->ranks;
    int *inv = malloc(sizeof *inv * (size_t)(P ? P : 1));
    if (!inv)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    for (int r = 0; r < P; r++)
        inv[to->canon_of[r]] = r;
    for (int r = 0; r < P; r++)
        map[r] = inv[from->canon_of[r]];
    free(inv);
    return CS_OK;
}

char *iso_labelling_to_text(const int *canon_of, int ranks)
{
    cs_buf b = {0};
    for (int r = 0; r < ranks; r++)
        cs_buf_printf(&b, "%s%d", r ? "," : "", canon_of[r]);
    if (ranks == 0)
        cs_buf_printf(&b, "%s", "");
    if (b.failed) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

int iso_labelling_from_text(const char *text, int ranks, int **out, cs_error *err)
{
    *out = NULL;
    int *v = malloc(sizeof *v * (size_t)(ranks ? ranks : 1));
    char *seen = calloc((size_t)(ranks ? ranks : 1), 1);
    if (!v || !seen) {
        free(v);
        free(seen);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    const char *p = text ? text : "";
    int rc = CS_OK;
    for (int r = 0; r < ranks && !rc; r++) {
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p || x < 0 || x >= ranks || seen[x] || (r + 1 < ranks && *end != ',') ||
            (r + 1 == ranks && *end != '\0'))
            rc = cs_error_set(err, CS_EINVAL, "labelling",
                              "stored labelling is not a permutation of %d ranks", ranks);
        else {
            v[r] = (int)x;
            seen[x] = 1;
            p = end + 1;
        }
    }
    free(seen);
    if (rc) {
        free(v);
        return rc;
    }
    *out = v;
    return CS_OK;
}

long iso_map_chunk(cs_coll_kind kind, int ranks, const int *map, long g)
{
    long P = ranks;
    switch (kind) {
    case CS_COLL_ALLGATHER:
    case CS_COLL_GATHER:
    case CS_COLL_SCATTER:
    case CS_COLL_REDUCESCATTER:
        return (g / P) * P + map[g % P];
    case CS_COLL_ALLTOALL: {
        long c = g / (P * P), dst = (g / P) % P, src = g % P;
        return c * P * P + (long)map[dst] * P + map[src];
    }
    default:
        return g;
    }
}

int iso_relabel_algorithm(const cs_algorithm *a, const int *map, const cs_collective *target,
                          const char *topology_name, cs_algorithm **out, cs_error *err)
{
    *out = NULL;
    cs_algorithm *b = NULL;
    int rc = algorithm_new(target, topology_name, a->ranks, a->chunks, a->steps, &b, err);
    if (rc)
        return rc;
    for (int s = 0; s < a->steps; s++)
        b->rounds_per_step[s] = a->rounds_per_step[s];
    algorithm_update_rounds(b);
    snprintf(b->method, sizeof b->method, "%s", a->method);
    snprintf(b->optimality, sizeof b->optimality, "%s", a->optimality);
    b->timed_chunk_bytes = a->timed_chunk_bytes;
    if (algorithm_reserve_sends(b, a->nsends) != CS_OK) {
        algorithm_free(b);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory relabelling %ld sends",
                            a->nsends);
    }
    for (long i = 0; i < a->nsends && !rc; i++) {
        cs_send s = algorithm_send(a, i);
        if (s.src < 0 || s.src >= a->ranks || s.dst < 0 || s.dst >= a->ranks) {
            rc = cs_error_set(err, CS_EUNSUPPORTED, "sends", "send %ld (%d->%d) goes through "
                              "a switch node: relabelling maps ranks only", i, s.src, s.dst);
            break;
        }
        long g = iso_map_chunk(a->collective.kind, a->ranks, map, s.chunk);
        if (isfinite(s.start_us) && isfinite(s.end_us))
            rc = algorithm_add_timed_send(b, g, map[s.src], map[s.dst], s.step, s.op, s.start_us,
                                          s.end_us);
        else
            rc = algorithm_add_send(b, g, map[s.src], map[s.dst], s.step, s.op);
        if (rc)
            cs_error_set(err, rc, "", "cannot relabel send %ld", i);
    }
    if (rc) {
        algorithm_free(b);
        return rc;
    }
    *out = b;
    return CS_OK;
}

int iso_relabel_result(const cs_result *res, const int *map, const cs_collective *target,
                       const char *topology_name, cs_result **out, cs_error *err)
{
    *out = NULL;
    cs_result *n = NULL;
    int rc = result_new(res->method, &n, err);
    if (rc)
        return rc;
    snprintf(n->reason, sizeof n->reason, "%s", res->reason);
    n->bound_steps = res->bound_steps;
    n->bound_rounds_per_chunk = res->bound_rounds_per_chunk;
    n->synth_seconds = res->synth_seconds;
    n->complete = res->complete;
    if (res->stats)
        n->stats = json_deep_copy(res->stats);
    for (int i = 0; i < res->nalgs && !rc; i++) {
        cs_algorithm *b = NULL;
        rc = iso_relabel_algorithm(res->algs[i], map, target, topology_name, &b, err);
        if (!rc && (rc = result_add(n, b)) != CS_OK) {
            algorithm_free(b);
            cs_error_set(err, rc, "", "out of memory");
        }
    }
    if (rc) {
        result_free(n);
        return rc;
    }
    *out = n;
    return CS_OK;
}

static void map_rank_array(json_t *arr, const int *map)
{
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v)
        json_integer_set(v, map[json_integer_value(v)]);
}

int iso_relabel_topology(const cs_topology *t, const int *map, const char *name,
                         cs_topology **out, cs_error *err)
{
    *out = NULL;
    json_t *doc = topology_to_json(t);
    if (!doc)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    if (name)
        json_object_set_new(doc, "name", json_string(name));
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(doc, "links"), i, e) {
        json_object_set_new(e, "src", json_integer(map[json_integer_value(json_object_get(e, "src"))]));
        json_object_set_new(e, "dst", json_integer(map[json_integer_value(json_object_get(e, "dst"))]));
    }
    json_array_foreach(json_object_get(doc, "shared"), i, e) {
        size_t j;
        json_t *pair;
        json_array_foreach(json_object_get(e, "links"), j, pair)
            map_rank_array(pair, map);
    }
    json_array_foreach(json_object_get(doc, "switches"), i, e)
        map_rank_array(json_object_get(e, "ranks"), map);
    json_array_foreach(json_object_get(doc, "groups"), i, e)
        map_rank_array(json_is_array(e) ? e : json_object_get(e, "ranks"), map);
    cs_topology_parse_options po = {.max_ranks = t->ranks};
    int rc = topology_from_json(doc, &po, out, err);
    json_decref(doc);
    return rc;
}
