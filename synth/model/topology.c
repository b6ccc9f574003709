/*
 * topology.c - building, validating, finalizing, copying and transforming a
 * cs_topology (topology.h).  The document form (parse, load, print) lives in
 * topology_json.c, the builtins in topology_builtin.c and the graph queries
 * in topology_graph.c; what they share is in topology_internal.h.
 *
 * Before topology_finalize() a topology is a bag of facts in the order they
 * were added: links (bidirectional ones already expanded), shared sets whose
 * `links` array temporarily holds (src, dst) pairs, switches and groups.
 * Finalize turns it into the read-only form every consumer relies on:
 *
 *  1. sort the physical links by (src, dst) once (qsort, O(m log m)) and
 *     report duplicates by their position in the order they were added (the
 *     JSON parser maps that back to "links[i]");
 *  2. lower each switch SCCL-style: a derived link for every ordered pair of
 *     its ranks that no physical link joins, plus an egress and an ingress
 *     shared set (lanes 1) per attached rank over those derived links (sets
 *     of one link are omitted; see lower_switches); copy-capable switches
 *     get their node numbers first (number_switch_nodes), and in a node
 *     view (topology_switch_nodes) each member's port sets also hold its
 *     links to and from the node;
 *  3. sort again (counting sort by src, then each rank's links by dst),
 *     build out_begin / in_begin / in_links by counting;
 *  4. resolve the shared-set pairs to link indices;
 *  5. build group_of;
 *  6. check strong connectivity with one forward and one backward BFS from
 *     rank 0 (so 40,000-rank meshes finalize in milliseconds).
 *
 * Nothing here is O(ranks^2) except switch lowering, which is inherently
 * quadratic in the size of each switch (bounded by CS_TOPOLOGY_MAX_LINKS).
 */
#include "topology.h"
#include "topology_internal.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- construction ---------------------------------------------------------- */

cs_topology *topology_new(const char *name, int ranks)
{
    if (ranks < 1)
        return NULL;
    cs_topology *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    snprintf(t->name, sizeof t->name, "%s", name ? name : "custom");
    t->ranks = ranks;
    t->diameter_cache = -1;
    return t;
}

void topology_free(cs_topology *t)
{
    if (!t)
        return;
    free(t->links);
    for (int i = 0; i < t->nshared; i++)
        free(t->shared[i].links);
    free(t->shared);
    for (int i = 0; i < t->nswitches; i++)
        free(t->switches[i].ranks);
    free(t->switches);
    for (int i = 0; i < t->ngroups; i++)
        free(t->groups[i].ranks);
    free(t->groups);
    free(t->group_of);
    free(t->out_begin);
    free(t->in_begin);
    free(t->in_links);
    free(t);
}

/* Grows an array that holds n elements so it can hold n + 1.  Capacity is
 * implicit: the smallest power of two >= max(n, 8), so no field is needed. */
static int grow(void **arr, size_t n, size_t elem)
{
    if (n >= 8 && (n & (n - 1)) != 0)
        return CS_OK;
    if (n > 0 && n < 8)
        return CS_OK;
    size_t cap = n < 8 ? 8 : n * 2;
    void *p = realloc(*arr, cap * elem);
    if (!p)
        return CS_ENOMEM;
    *arr = p;
    return CS_OK;
}

static int check_open(const cs_topology *t, cs_error *err)
{
    if (!t)
        return cs_error_set(err, CS_EINVAL, "", "no topology");
    if (t->finalized)
        return cs_error_set(err, CS_EINVAL, "", "topology is already finalized");
    return CS_OK;
}

int cs_topology_check_link_values(long long lanes, double gbps, double alpha_us,
                                  const char *path, cs_error *err)
{
    char f[CS_ERROR_FIELD_MAX];
    if (lanes < 1 || lanes > CS_TOPOLOGY_MAX_LANES) {
        fieldf(f, "%s.lanes", path);
        return cs_error_set(err, CS_EINVAL, f, "lanes %lld must be between 1 and %d", lanes,
                            CS_TOPOLOGY_MAX_LANES);
    }
    if (!(gbps > 0.0) || !isfinite(gbps) || gbps > CS_TOPOLOGY_MAX_GBPS) {
        fieldf(f, "%s.gbps", path);
        return cs_error_set(err, CS_EINVAL, f, "gbps %g must be > 0 and <= %g", gbps,
                            CS_TOPOLOGY_MAX_GBPS);
    }
    if (!(alpha_us >= 0.0) || !isfinite(alpha_us) || alpha_us > CS_TOPOLOGY_MAX_ALPHA_US) {
        fieldf(f, "%s.alpha_us", path);
        return cs_error_set(err, CS_EINVAL, f, "alpha_us %g must be >= 0 and <= %g", alpha_us,
                            CS_TOPOLOGY_MAX_ALPHA_US);
    }
    return CS_OK;
}

static int push_link(cs_topology *t, int src, int dst, int lanes, double gbps, double alpha,
                     int switch_id)
{
    if (t->nlinks >= CS_TOPOLOGY_MAX_LINKS)
        return CS_ELIMIT;
    if (grow((void **)&t->links, (size_t)t->nlinks, sizeof *t->links) != CS_OK)
        return CS_ENOMEM;
    t->links[t->nlinks++] = (cs_link){ .src = src, .dst = dst, .lanes = lanes, .gbps = gbps,
                                       .alpha_us = alpha, .switch_id = switch_id };
    return CS_OK;
}

int topology_add_link(cs_topology *t, int src, int dst, int lanes, double gbps,
                      double alpha_us, bool bidirectional, cs_error *err)
{
    int rc = check_open(t, err);
    if (rc)
        return rc;
    if (src < 0 || src >= t->ranks)
        return cs_error_set(err, CS_EINVAL, "src", "rank %d out of range 0..%d", src,
                            t->ranks - 1);
    if (dst < 0 || dst >= t->ranks)
        return cs_error_set(err, CS_EINVAL, "dst", "rank %d out of range 0..%d", dst,
                            t->ranks - 1);
    if (src == dst)
        return cs_error_set(err, CS_EINVAL, "dst", "self-loop: src and dst are both %d", src);
    rc = cs_topology_check_link_values(lanes, gbps, alpha_us, "link", err);
    if (rc)
        return rc;
    rc = push_link(t, src, dst, lanes, gbps, alpha_us, -1);
    if (rc == CS_OK && bidirectional)
        rc = push_link(t, dst, src, lanes, gbps, alpha_us, -1);
    if (rc == CS_ELIMIT)
        return cs_error_set(err, CS_ELIMIT, "links", "more than %d links",
                            CS_TOPOLOGY_MAX_LINKS);
    if (rc)
        return cs_error_set(err, rc, "links", "out of memory");
    return CS_OK;
}

int topology_add_shared(cs_topology *t, const int (*pairs)[2], int npairs, int lanes,
                        cs_error *err)
{
    int rc = check_open(t, err);
    if (rc)
        return rc;
    if (npairs < 1 || !pairs)
        return cs_error_set(err, CS_EINVAL, "shared.links", "a shared set needs links");
    if (lanes < 1 || lanes > CS_TOPOLOGY_MAX_LANES)
        return cs_error_set(err, CS_EINVAL, "shared.lanes", "lanes %d must be between 1 and %d",
                            lanes, CS_TOPOLOGY_MAX_LANES);
    for (int i = 0; i < npairs; i++)
        for (int k = 0; k < 2; k++)
            if (pairs[i][k] < 0 || pairs[i][k] >= t->ranks)
                return cs_error_set(err, CS_EINVAL, "shared.links",
                                    "rank %d out of range 0..%d", pairs[i][k], t->ranks - 1);
    if (grow((void **)&t->shared, (size_t)t->nshared, sizeof *t->shared) != CS_OK)
        return cs_error_set(err, CS_ENOMEM, "shared", "out of memory");
    int *flat = malloc(sizeof(int) * 2 * (size_t)npairs);
    if (!flat)
        return cs_error_set(err, CS_ENOMEM, "shared", "out of memory");
    for (int i = 0; i < npairs; i++) {
        flat[2 * i] = pairs[i][0];
        flat[2 * i + 1] = pairs[i][1];
    }
    t->shared[t->nshared++] = (cs_shared){ .nlinks = npairs, .links = flat, .lanes = lanes,
                                           .switch_id = -1 };
    return CS_OK;
}

static int *copy_ints(const int *a, int n)
{
    int *p = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    if (p && n > 0)
        memcpy(p, a, sizeof(int) * (size_t)n);
    return p;
}

static int check_rank_list(const cs_topology *t, const int *ranks, int n, const char *what,
                           cs_error *err)
{
    unsigned char *seen = calloc((size_t)t->ranks, 1);
    if (!seen)
        return cs_error_set(err, CS_ENOMEM, what, "out of memory");
    int rc = CS_OK;
    for (int i = 0; i < n && rc == CS_OK; i++) {
        char f[CS_ERROR_FIELD_MAX];
        fieldf(f, "%s.ranks[%d]", what, i);
        if (ranks[i] < 0 || ranks[i] >= t->ranks)
            rc = cs_error_set(err, CS_EINVAL, f, "rank %d out of range 0..%d", ranks[i],
                              t->ranks - 1);
        else if (seen[ranks[i]])
            rc = cs_error_set(err, CS_EINVAL, f, "rank %d listed twice", ranks[i]);
        else
            seen[ranks[i]] = 1;
    }
    free(seen);
    return rc;
}

int topology_add_switch(cs_topology *t, const char *name, const int *ranks, int nranks,
                        double gbps, double alpha_us, cs_error *err)
{
    int rc = check_open(t, err);
    if (rc)
        return rc;
    if (nranks < 2 || !ranks)
        return cs_error_set(err, CS_EINVAL, "switch.ranks", "a switch needs at least 2 ranks");
    if ((rc = check_rank_list(t, ranks, nranks, "switch", err)))
        return rc;
    if ((rc = cs_topology_check_link_values(1, gbps, alpha_us, "switch", err)))
        return rc;
    if (grow((void **)&t->switches, (size_t)t->nswitches, sizeof *t->switches) != CS_OK)
        return cs_error_set(err, CS_ENOMEM, "switches", "out of memory");
    cs_switch *s = &t->switches[t->nswitches];
    memset(s, 0, sizeof *s);
    if (name && name[0])
        snprintf(s->name, sizeof s->name, "%s", name);
    else
        snprintf(s->name, sizeof s->name, "sw%d", t->nswitches);
    s->ranks = copy_ints(ranks, nranks);
    if (!s->ranks)
        return cs_error_set(err, CS_ENOMEM, "switches", "out of memory");
    s->nranks = nranks;
    s->gbps = gbps;
    s->alpha_us = alpha_us;
    s->copy = false;
    s->node = -1;
    t->nswitches++;
    return CS_OK;
}

int topology_set_switch_copy(cs_topology *t, int s, bool copy, cs_error *err)
{
    int rc = check_open(t, err);
    if (rc)
        return rc;
    if (s < 0 || s >= t->nswitches)
        return cs_error_set(err, CS_EINVAL, "switches", "switch %d of %d", s, t->nswitches);
    t->switches[s].copy = copy;
    return CS_OK;
}

int topology_add_group(cs_topology *t, const int *ranks, int nranks, cs_error *err)
{
    int rc = check_open(t, err);
    if (rc)
        return rc;
    if (nranks < 1 || !ranks)
        return cs_error_set(err, CS_EINVAL, "groups", "a group needs at least 1 rank");
    if ((rc = check_rank_list(t, ranks, nranks, "group", err)))
        return rc;
    if (grow((void **)&t->groups, (size_t)t->ngroups, sizeof *t->groups) != CS_OK)
        return cs_error_set(err, CS_ENOMEM, "groups", "out of memory");
    int *copy = copy_ints(ranks, nranks);
    if (!copy)
        return cs_error_set(err, CS_ENOMEM, "groups", "out of memory");
    t->groups[t->ngroups++] = (cs_group){ .nranks = nranks, .ranks = copy };
    return CS_OK;
}

static int find_indexed(const cs_topology *t, int src, int dst);

/* ---- finalize ------------------------------------------------------------------ */

typedef struct {
    cs_link link;
    int pos;      /* position in add order, for error messages */
} positioned_link;

static int cmp_positioned(const void *a, const void *b)
{
    const cs_link *x = &((const positioned_link *)a)->link;
    const cs_link *y = &((const positioned_link *)b)->link;
    if (x->src != y->src)
        return x->src < y->src ? -1 : 1;
    if (x->dst != y->dst)
        return x->dst < y->dst ? -1 : 1;
    int px = ((const positioned_link *)a)->pos, py = ((const positioned_link *)b)->pos;
    return px < py ? -1 : px > py;
}

static int cmp_link(const void *a, const void *b)
{
    const cs_link *x = a, *y = b;
    if (x->src != y->src)
        return x->src < y->src ? -1 : 1;
    return x->dst < y->dst ? -1 : x->dst > y->dst;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return x < y ? -1 : x > y;
}

/* Index of src->dst in links[0..n) sorted by (src, dst), or -1. */
static int find_sorted(const cs_link *links, int n, int src, int dst)
{
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        const cs_link *l = &links[mid];
        if (l->src < src || (l->src == src && l->dst < dst))
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < n && links[lo].src == src && links[lo].dst == dst)
        return lo;
    return -1;
}

/* Step 1: sort physical links, report duplicates (origin maps add position to
 * the JSON index, or NULL). */
static int sort_physical(cs_topology *t, const int *origin, cs_error *err)
{
    if (t->nlinks == 0)
        return CS_OK;
    /* counting sort by src (stable, so add order survives), then each
     * rank's bucket by (dst, position) */
    positioned_link *p = malloc(sizeof *p * (size_t)t->nlinks);
    int *start = calloc((size_t)t->ranks + 1, sizeof(int));
    if (!p || !start) {
        free(p);
        free(start);
        return cs_error_set(err, CS_ENOMEM, "links", "out of memory");
    }
    for (int i = 0; i < t->nlinks; i++)
        start[t->links[i].src + 1]++;
    for (int r = 0; r < t->ranks; r++)
        start[r + 1] += start[r];
    for (int i = 0; i < t->nlinks; i++) {
        positioned_link *q = &p[start[t->links[i].src]++];
        q->link = t->links[i];
        q->pos = i;
    }
    for (int r = 0, b = 0; r < t->ranks; b = start[r], r++)
        if (start[r] - b > 1)
            qsort(p + b, (size_t)(start[r] - b), sizeof *p, cmp_positioned);
    free(start);
    for (int i = 1; i < t->nlinks; i++) {
        if (p[i].link.src == p[i - 1].link.src && p[i].link.dst == p[i - 1].link.dst) {
            int a = p[i - 1].pos, b = p[i].pos;
            int rc;
            if (origin) {
                char f[CS_ERROR_FIELD_MAX];
                fieldf(f, "links[%d]", origin[b]);
                if (origin[a] == origin[b])
                    rc = cs_error_set(err, CS_EINVAL, f, "duplicate link %d->%d",
                                      p[i].link.src, p[i].link.dst);
                else
                    rc = cs_error_set(err, CS_EINVAL, f,
                                      "duplicate link %d->%d (also given by links[%d])",
                                      p[i].link.src, p[i].link.dst, origin[a]);
            } else {
                rc = cs_error_set(err, CS_EINVAL, "links", "duplicate link %d->%d",
                                  p[i].link.src, p[i].link.dst);
            }
            free(p);
            return rc;
        }
    }
    for (int i = 0; i < t->nlinks; i++)
        t->links[i] = p[i].link;
    free(p);
    return CS_OK;
}

/* Step 2: switch lowering.  Derived links are appended; the per-rank shared
 * sets follow the document's sets, as (src, dst) pairs resolved in step 4
 * with the others.  Two rules keep them cheap to find and use:
 *  - a set of a single derived link is omitted: the link's own 1 lane
 *    already says everything the set would;
 *  - the derived sets are ordered egress first, then ingress, each by owner
 *    rank (then switch), so topology_graph.c finds a rank's sets by binary
 *    search.  Every derived set has >= 2 links, all from (egress) or all into
 *    (ingress) its owner, so its kind can be read off its first two links. */
typedef struct {
    int dir, owner, switch_id, np;
    int *pairs;
} derived_set;

static int cmp_derived(const void *a, const void *b)
{
    const derived_set *x = a, *y = b;
    if (x->dir != y->dir)
        return x->dir - y->dir;
    if (x->owner != y->owner)
        return x->owner < y->owner ? -1 : 1;
    return x->switch_id - y->switch_id;
}

/* The switches of each rank, ascending (built in switches[] order, so
 * sorted by construction): of[begin[r] .. begin[r + 1]). */
typedef struct switch_members {
    int *begin, *of;
} switch_members;

static int switch_members_build(const cs_topology *t, long long ports, switch_members *m)
{
    m->begin = calloc((size_t)t->ranks + 1, sizeof(int));
    m->of = malloc(sizeof(int) * (size_t)(ports > 0 ? ports : 1));
    if (!m->begin || !m->of)
        return CS_ENOMEM;
    for (int s = 0; s < t->nswitches; s++)
        for (int i = 0; i < t->switches[s].nranks; i++)
            m->begin[t->switches[s].ranks[i] + 1]++;
    for (int r = 0; r < t->ranks; r++)
        m->begin[r + 1] += m->begin[r];
    int *fill = malloc(sizeof(int) * ((size_t)t->ranks + 1));
    if (!fill)
        return CS_ENOMEM;
    memcpy(fill, m->begin, sizeof(int) * ((size_t)t->ranks + 1));
    for (int s = 0; s < t->nswitches; s++)
        for (int i = 0; i < t->switches[s].nranks; i++)
            m->of[fill[t->switches[s].ranks[i]]++] = s;
    free(fill);
    return CS_OK;
}

/* The first switch both a and b are on (INT_MAX: none). */
static int first_common_switch(const switch_members *m, int a, int b)
{
    int i = m->begin[a], ie = m->begin[a + 1], j = m->begin[b], je = m->begin[b + 1];
    while (i < ie && j < je) {
        if (m->of[i] == m->of[j])
            return m->of[i];
        if (m->of[i] < m->of[j])
            i++;
        else
            j++;
    }
    return INT_MAX;
}

/* A pair of ranks on several switches is joined once, by the first of them
 * in switches[] order (the rule topology_unwind_switches follows too): links
 * stay unique per (src, dst), as every consumer assumes (topology_find_link
 * finds one link per pair; a duplicate would give SMT a second lane the
 * verifier does not see).  The later switches' port sets leave the pair
 * out, as they leave out a pair a physical link joins. */
static int lower_switches(cs_topology *t, cs_error *err)
{
    int nphys = t->nlinks;
    long long derived = 0, ports = 0;
    for (int s = 0; s < t->nswitches; s++) {
        long long n = t->switches[s].nranks;
        derived += n * (n - 1) + (t->node_view && t->switches[s].copy ? 2 * n : 0);
        ports += n;
    }
    if (derived + nphys > CS_TOPOLOGY_MAX_LINKS)
        return cs_error_set(err, CS_ELIMIT, "switches",
                            "lowering the switches needs %lld links, more than %d",
                            derived + nphys, CS_TOPOLOGY_MAX_LINKS);
    if (ports == 0)
        return CS_OK;
    switch_members members = {0};
    if (t->nswitches > 1 && switch_members_build(t, ports, &members) != CS_OK) {
        free(members.begin);
        free(members.of);
        return cs_error_set(err, CS_ENOMEM, "switches", "out of memory");
    }
    derived_set *sets = calloc((size_t)(2 * ports), sizeof *sets);
    if (!sets) {
        free(members.begin);
        free(members.of);
        return cs_error_set(err, CS_ENOMEM, "switches", "out of memory");
    }
    int nsets = 0, rc = CS_OK;
    for (int s = 0; s < t->nswitches && rc == CS_OK; s++) {
        const cs_switch *sw = &t->switches[s];
        int n = sw->nranks;
        /* node view: the switch's node is one more port peer of every member */
        int node = t->node_view && sw->copy ? sw->node : -1;
        for (int dir = 0; dir < 2 && rc == CS_OK; dir++) {
            for (int i = 0; i < n && rc == CS_OK; i++) {
                int a = sw->ranks[i], np = 0;
                int *pairs = malloc(sizeof(int) * 2 * (size_t)n);
                if (!pairs) {
                    rc = cs_error_set(err, CS_ENOMEM, "switches", "out of memory");
                    break;
                }
                for (int j = 0; j < n; j++) {
                    if (i == j)
                        continue;
                    int b = sw->ranks[j];
                    int src = dir == 0 ? a : b, dst = dir == 0 ? b : a;
                    if (find_sorted(t->links, nphys, src, dst) >= 0)
                        continue;
                    if (members.begin && first_common_switch(&members, a, b) < s)
                        continue; /* an earlier switch joins them */
                    if (dir == 0 && push_link(t, src, dst, 1, sw->gbps, sw->alpha_us, s)) {
                        rc = cs_error_set(err, CS_ENOMEM, "switches", "out of memory");
                        break;
                    }
                    pairs[2 * np] = src;
                    pairs[2 * np + 1] = dst;
                    np++;
                }
                if (node >= 0 && rc == CS_OK) {
                    if (dir == 0 && (push_link(t, a, node, 1, sw->gbps, sw->alpha_us, s) ||
                                     push_link(t, node, a, 1, sw->gbps, sw->alpha_us, s))) {
                        rc = cs_error_set(err, CS_ENOMEM, "switches", "out of memory");
                    } else {
                        pairs[2 * np] = dir == 0 ? a : node;
                        pairs[2 * np + 1] = dir == 0 ? node : a;
                        np++;
                    }
                }
                if (np < 2 || rc) {
                    free(pairs);
                    continue;
                }
                sets[nsets++] = (derived_set){ .dir = dir, .owner = a, .switch_id = s, .np = np,
                                               .pairs = pairs };
            }
        }
    }
    if (rc == CS_OK)
        qsort(sets, (size_t)nsets, sizeof *sets, cmp_derived);
    int i = 0;
    for (; i < nsets && rc == CS_OK; i++) {
        if (grow((void **)&t->shared, (size_t)t->nshared, sizeof *t->shared) != CS_OK) {
            rc = cs_error_set(err, CS_ENOMEM, "switches", "out of memory");
            break;
        }
        t->shared[t->nshared++] = (cs_shared){ .nlinks = sets[i].np, .links = sets[i].pairs,
                                               .lanes = 1, .switch_id = sets[i].switch_id };
    }
    for (; i < nsets; i++)
        free(sets[i].pairs);
    free(sets);
    free(members.begin);
    free(members.of);
    return rc;
}

/* Step 3: sorts all links by (src, dst): a counting sort by src (one move per
 * link), then each rank's out-links by dst.  Much cheaper than one qsort of
 * millions of 40-byte links after switch lowering. */
static int sort_links(cs_topology *t, cs_error *err)
{
    int n = t->ranks, m = t->nlinks;
    if (m == 0)
        return CS_OK;
    int *start = calloc((size_t)n + 1, sizeof(int));
    cs_link *sorted = malloc(sizeof *sorted * (size_t)m);
    if (!start || !sorted) {
        free(start);
        free(sorted);
        return cs_error_set(err, CS_ENOMEM, "links", "out of memory");
    }
    for (int i = 0; i < m; i++)
        start[t->links[i].src + 1]++;
    for (int r = 0; r < n; r++)
        start[r + 1] += start[r];
    for (int i = 0; i < m; i++)
        sorted[start[t->links[i].src]++] = t->links[i];
    /* start[r] is now the end of rank r's bucket, i.e. the begin of r + 1 */
    for (int r = 0, b = 0; r < n; b = start[r], r++) {
        int e = start[r];
        if (e - b > 1)
            qsort(sorted + b, (size_t)(e - b), sizeof *sorted, cmp_link);
    }
    free(start);
    free(t->links);
    t->links = sorted;
    return CS_OK;
}

static int build_indexes(cs_topology *t, cs_error *err)
{
    int n = t->ranks, m = t->nlinks;
    t->out_begin = calloc((size_t)n + 1, sizeof(int));
    t->in_begin = calloc((size_t)n + 1, sizeof(int));
    t->in_links = malloc(sizeof(int) * (size_t)(m > 0 ? m : 1));
    if (!t->out_begin || !t->in_begin || !t->in_links)
        return cs_error_set(err, CS_ENOMEM, "links", "out of memory");
    for (int i = 0; i < m; i++) {
        t->out_begin[t->links[i].src + 1]++;
        t->in_begin[t->links[i].dst + 1]++;
    }
    for (int r = 0; r < n; r++) {
        t->out_begin[r + 1] += t->out_begin[r];
        t->in_begin[r + 1] += t->in_begin[r];
    }
    int *fill = malloc(sizeof(int) * (size_t)n);
    if (!fill)
        return cs_error_set(err, CS_ENOMEM, "links", "out of memory");
    memcpy(fill, t->in_begin, sizeof(int) * (size_t)n);
    for (int i = 0; i < m; i++)
        t->in_links[fill[t->links[i].dst]++] = i;
    free(fill);
    return CS_OK;
}

static int resolve_shared(cs_topology *t, cs_error *err)
{
    int ndoc = 0;
    for (int i = 0; i < t->nshared; i++) {
        cs_shared *s = &t->shared[i];
        if (s->switch_id < 0)
            ndoc++;
        int *idx = malloc(sizeof(int) * (size_t)s->nlinks);
        if (!idx)
            return cs_error_set(err, CS_ENOMEM, "shared", "out of memory");
        for (int j = 0; j < s->nlinks; j++) {
            int src = s->links[2 * j], dst = s->links[2 * j + 1];
            int k = find_indexed(t, src, dst);
            if (k < 0) {
                free(idx);
                char f[CS_ERROR_FIELD_MAX];
                fieldf(f, "shared[%d].links[%d]", ndoc - 1, j);
                return cs_error_set(err, CS_EINVAL, f, "no link %d->%d in the topology", src,
                                    dst);
            }
            idx[j] = k;
        }
        qsort(idx, (size_t)s->nlinks, sizeof(int), cmp_int);
        for (int j = 1; j < s->nlinks; j++) {
            if (idx[j] == idx[j - 1]) {
                char f[CS_ERROR_FIELD_MAX];
                fieldf(f, "shared[%d].links", ndoc - 1);
                int rc = cs_error_set(err, CS_EINVAL, f, "link %d->%d listed twice",
                                      t->links[idx[j]].src, t->links[idx[j]].dst);
                free(idx);
                return rc;
            }
        }
        free(s->links);
        s->links = idx;
    }
    return CS_OK;
}

static int build_group_of(cs_topology *t, cs_error *err)
{
    if (t->ngroups == 0)
        return CS_OK;
    t->group_of = malloc(sizeof(int) * (size_t)t->ranks);
    if (!t->group_of)
        return cs_error_set(err, CS_ENOMEM, "groups", "out of memory");
    for (int r = 0; r < t->ranks; r++)
        t->group_of[r] = -1;
    for (int g = 0; g < t->ngroups; g++)
        for (int i = 0; i < t->groups[g].nranks; i++) {
            int r = t->groups[g].ranks[i];
            if (t->group_of[r] >= 0) {
                char f[CS_ERROR_FIELD_MAX];
                fieldf(f, "groups[%d][%d]", g, i);
                return cs_error_set(err, CS_EINVAL, f, "rank %d is already in groups[%d]", r,
                                    t->group_of[r]);
            }
            t->group_of[r] = g;
        }
    return CS_OK;
}

/* BFS over out-links (forward) or in-links (backward) from rank 0; returns the
 * first rank not reached, or -1. */
static int first_unreached(const cs_topology *t, bool forward, int *queue, unsigned char *seen)
{
    memset(seen, 0, (size_t)t->ranks);
    int head = 0, tail = 0;
    queue[tail++] = 0;
    seen[0] = 1;
    while (head < tail) {
        int r = queue[head++];
        if (forward) {
            for (int i = t->out_begin[r]; i < t->out_begin[r + 1]; i++) {
                int d = t->links[i].dst;
                if (!seen[d]) {
                    seen[d] = 1;
                    queue[tail++] = d;
                }
            }
        } else {
            for (int i = t->in_begin[r]; i < t->in_begin[r + 1]; i++) {
                int s = t->links[t->in_links[i]].src;
                if (!seen[s]) {
                    seen[s] = 1;
                    queue[tail++] = s;
                }
            }
        }
    }
    for (int r = 0; r < t->ranks; r++)
        if (!seen[r])
            return r;
    return -1;
}

static int check_connected(const cs_topology *t, cs_error *err)
{
    int *queue = malloc(sizeof(int) * (size_t)t->ranks);
    unsigned char *seen = malloc((size_t)t->ranks);
    if (!queue || !seen) {
        free(queue);
        free(seen);
        return cs_error_set(err, CS_ENOMEM, "links", "out of memory");
    }
    int rc = CS_OK;
    int r = first_unreached(t, true, queue, seen);
    if (r >= 0) {
        rc = cs_error_set(err, CS_EINVAL, "links",
                          "not connected: rank %d cannot reach rank %d", 0, r);
    } else if ((r = first_unreached(t, false, queue, seen)) >= 0) {
        rc = cs_error_set(err, CS_EINVAL, "links",
                          "not connected: rank %d cannot reach rank %d", r, 0);
    }
    free(queue);
    free(seen);
    return rc;
}

/* Copy-capable switches get their node numbers: ranks + j for the j-th (a
 * node view already counts them among its ranks). */
static int number_switch_nodes(cs_topology *t, cs_error *err)
{
    int ncopy = 0;
    for (int s = 0; s < t->nswitches; s++)
        ncopy += t->switches[s].copy;
    int base = t->node_view ? t->ranks - ncopy : t->ranks;
    if (base < 1 || (long long)t->ranks + ncopy > INT_MAX / 2)
        return cs_error_set(err, CS_EINVAL, "switches", "%d copy-capable switches do not fit "
                            "%d ranks", ncopy, t->ranks);
    for (int s = 0, j = 0; s < t->nswitches; s++)
        t->switches[s].node = t->switches[s].copy ? base + j++ : -1;
    t->nswitch_nodes = ncopy;
    return CS_OK;
}

int cs_topology_finalize_with_origin(cs_topology *t, const int *origin, cs_error *err)
{
    int rc = check_open(t, err);
    if (rc)
        return rc;
    if ((rc = sort_physical(t, origin, err)))
        return rc;
    if ((rc = number_switch_nodes(t, err)))
        return rc;
    if ((rc = lower_switches(t, err)))
        return rc;
    if (t->nswitches > 0 && (rc = sort_links(t, err)))   /* physical ones are sorted */
        return rc;
    if ((rc = build_indexes(t, err)))
        return rc;
    if ((rc = resolve_shared(t, err)))
        return rc;
    if ((rc = build_group_of(t, err)))
        return rc;
    if ((rc = check_connected(t, err)))
        return rc;
    t->finalized = true;
    return CS_OK;
}

int topology_finalize(cs_topology *t, cs_error *err)
{
    return cs_topology_finalize_with_origin(t, NULL, err);
}

/* ---- copies and transforms --------------------------------------------------------- */

int topology_clone(const cs_topology *t, cs_topology **out, cs_error *err)
{
    *out = NULL;
    if (!t || !t->finalized)
        return cs_error_set(err, CS_EINVAL, "", "clone needs a finalized topology");
    cs_topology *c = topology_new(t->name, t->ranks);
    if (!c)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    int n = t->ranks, m = t->nlinks;
    c->nlinks = m;
    c->links = malloc(sizeof *c->links * (size_t)(m > 0 ? m : 1));
    c->out_begin = copy_ints(t->out_begin, n + 1);
    c->in_begin = copy_ints(t->in_begin, n + 1);
    c->in_links = copy_ints(t->in_links, m);
    c->shared = calloc((size_t)(t->nshared > 0 ? t->nshared : 1), sizeof *c->shared);
    c->switches = calloc((size_t)(t->nswitches > 0 ? t->nswitches : 1), sizeof *c->switches);
    c->groups = calloc((size_t)(t->ngroups > 0 ? t->ngroups : 1), sizeof *c->groups);
    if (!c->links || !c->out_begin || !c->in_begin || !c->in_links || !c->shared ||
        !c->switches || !c->groups)
        goto nomem;
    if (m > 0)
        memcpy(c->links, t->links, sizeof *c->links * (size_t)m);
    for (int i = 0; i < t->nshared; i++) {
        c->shared[i] = t->shared[i];
        c->shared[i].links = copy_ints(t->shared[i].links, t->shared[i].nlinks);
        c->nshared = i + 1;
        if (!c->shared[i].links)
            goto nomem;
    }
    for (int i = 0; i < t->nswitches; i++) {
        c->switches[i] = t->switches[i];
        c->switches[i].ranks = copy_ints(t->switches[i].ranks, t->switches[i].nranks);
        c->nswitches = i + 1;
        if (!c->switches[i].ranks)
            goto nomem;
    }
    for (int i = 0; i < t->ngroups; i++) {
        c->groups[i] = t->groups[i];
        c->groups[i].ranks = copy_ints(t->groups[i].ranks, t->groups[i].nranks);
        c->ngroups = i + 1;
        if (!c->groups[i].ranks)
            goto nomem;
    }
    if (t->group_of && !(c->group_of = copy_ints(t->group_of, n)))
        goto nomem;
    c->diameter_cache = __atomic_load_n(&t->diameter_cache, __ATOMIC_ACQUIRE);
    c->nswitch_nodes = t->nswitch_nodes;
    c->node_view = t->node_view;
    c->finalized = true;
    *out = c;
    return CS_OK;
nomem:
    topology_free(c);
    return cs_error_set(err, CS_ENOMEM, "", "out of memory");
}

int topology_find_link(const cs_topology *t, int src, int dst)
{
    if (!t || !t->finalized)
        return -1;
    return find_indexed(t, src, dst);
}

/* find_link once the indexes exist (also during finalize). */
static int find_indexed(const cs_topology *t, int src, int dst)
{
    if (src < 0 || src >= t->ranks || dst < 0 || dst >= t->ranks)
        return -1;
    int lo = t->out_begin[src], hi = t->out_begin[src + 1];
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (t->links[mid].dst < dst)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < t->out_begin[src + 1] && t->links[lo].dst == dst)
        return lo;
    return -1;
}

/* Copies switches and groups of t into c (not finalized). */
static int copy_switches_groups(const cs_topology *t, cs_topology *c, bool switches,
                                cs_error *err)
{
    int rc;
    if (switches)
        for (int i = 0; i < t->nswitches; i++) {
            const cs_switch *s = &t->switches[i];
            if ((rc = topology_add_switch(c, s->name, s->ranks, s->nranks, s->gbps, s->alpha_us,
                                          err)))
                return rc;
            c->switches[c->nswitches - 1].copy = s->copy;
        }
    for (int i = 0; i < t->ngroups; i++)
        if ((rc = topology_add_group(c, t->groups[i].ranks, t->groups[i].nranks, err)))
            return rc;
    return CS_OK;
}

/* Adds the document's shared sets of t to c, each pair reversed when asked;
 * with only_physical, sets that mention a switch-derived link are dropped. */
static int copy_doc_shared(const cs_topology *t, cs_topology *c, bool reversed,
                           bool only_physical, cs_error *err)
{
    for (int i = 0; i < t->nshared; i++) {
        const cs_shared *s = &t->shared[i];
        if (s->switch_id >= 0)
            continue;
        int (*pairs)[2] = malloc(sizeof *pairs * (size_t)s->nlinks);
        if (!pairs)
            return cs_error_set(err, CS_ENOMEM, "shared", "out of memory");
        bool keep = true;
        for (int j = 0; j < s->nlinks; j++) {
            const cs_link *l = &t->links[s->links[j]];
            if (l->switch_id >= 0 && only_physical)
                keep = false;
            pairs[j][0] = reversed ? l->dst : l->src;
            pairs[j][1] = reversed ? l->src : l->dst;
        }
        int rc = keep ? topology_add_shared(c, (const int (*)[2])pairs, s->nlinks, s->lanes, err)
                      : CS_OK;
        free(pairs);
        if (rc)
            return rc;
    }
    return CS_OK;
}

/* A copy of t's document facts (physical links, the document's sets,
 * switches with their copy flags, groups) in a new topology of `ranks`
 * ranks, not finalized; `reversed` turns every link and set around. */
static int copy_document(const cs_topology *t, const char *name, int ranks, bool reversed,
                         cs_topology **out, cs_error *err)
{
    cs_topology *c = topology_new(name ? name : t->name, ranks);
    if (!c)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    int rc = CS_OK;
    for (int i = 0; i < t->nlinks && rc == CS_OK; i++) {
        const cs_link *l = &t->links[i];
        if (l->switch_id < 0)
            rc = topology_add_link(c, reversed ? l->dst : l->src, reversed ? l->src : l->dst,
                                   l->lanes, l->gbps, l->alpha_us, false, err);
    }
    if (rc == CS_OK)
        rc = copy_doc_shared(t, c, reversed, false, err);
    if (rc == CS_OK)
        rc = copy_switches_groups(t, c, true, err);
    if (rc) {
        topology_free(c);
        return rc;
    }
    *out = c;
    return CS_OK;
}

int topology_reverse(const cs_topology *t, cs_topology **out, cs_error *err)
{
    *out = NULL;
    if (!t || !t->finalized)
        return cs_error_set(err, CS_EINVAL, "", "reverse needs a finalized topology");
    cs_topology *c;
    int rc = copy_document(t, NULL, t->ranks, true, &c, err);
    if (rc == CS_OK && (rc = topology_finalize(c, err)) != CS_OK)
        topology_free(c);
    if (rc == CS_OK)
        *out = c;
    return rc;
}

int topology_unwind_switches(const cs_topology *t, int degree, cs_topology **out,
                             cs_error *err)
{
    *out = NULL;
    if (!t || !t->finalized)
        return cs_error_set(err, CS_EINVAL, "", "unwind needs a finalized topology");
    for (int s = 0; s < t->nswitches; s++)
        if (degree < 1 || degree >= t->switches[s].nranks)
            return cs_error_set(err, CS_EINVAL, "degree",
                                "degree %d must be between 1 and %d (switch %s has %d ranks)",
                                degree, t->switches[s].nranks - 1, t->switches[s].name,
                                t->switches[s].nranks);
    cs_topology *c = topology_new(t->name, t->ranks);
    if (!c)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    int rc = CS_OK;
    for (int i = 0; i < t->nlinks && rc == CS_OK; i++) {
        const cs_link *l = &t->links[i];
        if (l->switch_id < 0)
            rc = topology_add_link(c, l->src, l->dst, l->lanes, l->gbps, l->alpha_us, false,
                                   err);
    }
    /* A pair already joined (by a physical link or an earlier switch) keeps its
     * first link: candidates are sorted once and duplicates skipped. */
    size_t ncand = 0;
    for (int s = 0; s < t->nswitches; s++)
        ncand += (size_t)t->switches[s].nranks * (size_t)degree;
    positioned_link *cand = malloc(sizeof *cand * (ncand > 0 ? ncand : 1));
    if (!cand)
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
    size_t k = 0;
    for (int s = 0; s < t->nswitches && rc == CS_OK; s++) {
        const cs_switch *sw = &t->switches[s];
        int n = sw->nranks;
        for (int i = 0; i < n; i++)
            for (int d = 1; d <= degree; d++) {
                cand[k].link = (cs_link){ .src = sw->ranks[i], .dst = sw->ranks[(i + d) % n],
                                          .lanes = 1, .gbps = sw->gbps / degree,
                                          .alpha_us = sw->alpha_us, .switch_id = -1 };
                cand[k].pos = (int)k;
                k++;
            }
    }
    if (rc == CS_OK && ncand > 0)
        qsort(cand, ncand, sizeof *cand, cmp_positioned);
    for (size_t i = 0; i < ncand && rc == CS_OK; i++) {
        const cs_link *l = &cand[i].link;
        if (i > 0 && cand[i - 1].link.src == l->src && cand[i - 1].link.dst == l->dst)
            continue;
        int e = topology_find_link(t, l->src, l->dst);
        if (e >= 0 && t->links[e].switch_id < 0)
            continue;
        rc = topology_add_link(c, l->src, l->dst, 1, l->gbps, l->alpha_us, false, err);
    }
    free(cand);
    if (rc == CS_OK)
        rc = copy_doc_shared(t, c, false, true, err);
    if (rc == CS_OK)
        rc = copy_switches_groups(t, c, false, err);
    if (rc == CS_OK)
        rc = topology_finalize(c, err);
    if (rc) {
        topology_free(c);
        return rc;
    }
    *out = c;
    return CS_OK;
}

/* ---- copy-capable switches ----------------------------------------------------------- */

int topology_switch_of_node(const cs_topology *t, int node)
{
    int base = t->node_view ? t->ranks - t->nswitch_nodes : t->ranks;
    if (node < base || node >= base + t->nswitch_nodes)
        return -1;
    for (int s = 0; s < t->nswitches; s++)
        if (t->switches[s].node == node)
            return s;
    return -1;
}

int topology_switch_nodes(const cs_topology *t, cs_topology **out, cs_error *err)
{
    *out = NULL;
    if (!t || !t->finalized)
        return cs_error_set(err, CS_EINVAL, "", "the switch-node view needs a finalized topology");
    if (t->node_view)
        return topology_clone(t, out, err);
    if (t->nswitch_nodes == 0)
        return cs_error_set(err, CS_EINVAL, "topology", "topology %s has no copy-capable switch",
                            t->name);
    cs_topology *c;
    int rc = copy_document(t, NULL, t->ranks + t->nswitch_nodes, false, &c, err);
    if (rc)
        return rc;
    c->node_view = true;
    if ((rc = topology_finalize(c, err))) {
        topology_free(c);
        return rc;
    }
    *out = c;
    return CS_OK;
}

int topology_with_switch_copy(const cs_topology *t, bool copy, const char *name,
                              cs_topology **out, cs_error *err)
{
    *out = NULL;
    if (!t || !t->finalized || t->node_view)
        return cs_error_set(err, CS_EINVAL, "", "needs a finalized topology (not a node view)");
    cs_topology *c;
    int rc = copy_document(t, name, t->ranks, false, &c, err);
    if (rc)
        return rc;
    for (int s = 0; s < c->nswitches; s++)
        c->switches[s].copy = copy;
    if ((rc = topology_finalize(c, err))) {
        topology_free(c);
        return rc;
    }
    *out = c;
    return CS_OK;
}
