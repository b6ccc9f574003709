/*
 * bounds_time.c - the time bound of bounds.h: per collective, which cuts to
 * search (on the network of bounds_cutnet.c) and the path latency; plus the
 * bound's JSON form.
 *
 * Why each linear part is a bound in the simulator's model (simulate.h:
 * a send of b bytes over a link lane takes alpha + b / bw, a lane and every
 * shared-set lane carry one send at a time, a switch port is such a set):
 * the sends that cross a cut into S run on lanes of the cut's edges, each
 * lane at most at its edge's per-lane speed; if X bytes must cross, the last
 * lane to finish ran for at least alpha + X / cap(S) (a lane that carried x
 * bytes was busy at least alpha + x / bw, and the x add up to X).  So
 * T >= alpha_min(cut) + X / cap(S), with X = k L from the collective:
 *
 *   allgather      k = P - |S|: every chunk from outside S enters S once;
 *   reducescatter  k = P - |S| leaving S: every chunk reduced outside S needs
 *                  a contribution from S;
 *   broadcast      k = 1 into any S without the root; reduce: out of S;
 *   scatter        k = |S| into S without the root; gather: out of S;
 *   alltoall       k = |S| (P - |S|): every pair (outside, inside) has L;
 *   allreduce      k = 1 into every S and out of every S; and the gossip
 *                  bound: any schedule that leaves every rank with every
 *                  contribution is, per chunk, a one-way gossip among the k
 *                  parts of any partition (a part knows what any of its ranks
 *                  knows), which takes at least 2k - 2 calls (the one-way
 *                  gossip minimum), i.e. 2(k-1) sends between parts per chunk:
 *                  2(k-1) L bytes over the parts' summed egress (ingress).
 *
 * ForestColl's allreduce optimum is reducescatter + allgather; that sum is
 * a bound for schedules that run RS then AG, not for every allreduce: when
 * the RS bottleneck (a rank's egress) and the AG bottleneck (another rank's
 * ingress) are different links, a schedule streams through both at once.
 * On symmetric topologies the gossip bound over the groups (or over single
 * ranks) equals RS + AG (e.g. dgxh100:N: 2 (N-1)/N L over a node's NICs).
 */
#include "bounds.h"
#include "bounds_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Exhaustive cut searches while (searches x network size) fit this; beyond,
 * single ranks and the group quotient.  About 10-30 ms of max-flow. */
#define TB_CUT_WORK 6000000L
/* All-pairs path latency while ranks x (nodes + edges) fit this; beyond, a
 * few sweeps from far ranks (each distance found is a valid bound). */
#define TB_PATH_WORK 3000000L
#define TB_PATH_SWEEPS 6
/* Alltoall: hop-distance sum while ranks x (ranks + physical links + switch
 * ports) fit this, and BFS-order prefix sweeps from up to this many ranks. */
#define TB_DISTANCE_WORK 20000000L
#define TB_PREFIX_ORDERS 8
/* Custom: multi-source path searches per chunk, within this work. */
#define TB_CUSTOM_PATH_WORK 20000000L

/* ---- the bound being built ------------------------------------------------------- */

static void offer(cs_time_bound *b, double latency, double bw, const char *kind, bool exact,
                  const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* Takes (latency, bw) when bw is larger (or equal with a larger latency). */
static void offer(cs_time_bound *b, double latency, double bw, const char *kind, bool exact,
                  const char *fmt, ...)
{
    if (!isfinite(bw) || bw < 0 || !isfinite(latency))
        return;
    if (b->kind[0] && (bw < b->bandwidth_us_per_byte ||
                       (bw == b->bandwidth_us_per_byte && latency <= b->latency_us)))
        return;
    b->latency_us = latency;
    b->bandwidth_us_per_byte = bw;
    b->exact = exact;
    snprintf(b->kind, sizeof b->kind, "%s", kind);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->cut, sizeof b->cut, fmt, ap);
    va_end(ap);
}

void time_bound_offer(cs_time_bound *b, double latency_us, double bandwidth_us_per_byte,
                      const char *kind, bool exact, const char *cut)
{
    offer(b, latency_us, bandwidth_us_per_byte, kind ? kind : "", exact, "%s", cut ? cut : "");
}

double time_bound_us(const cs_time_bound *b, double bytes, int chunks)
{
    double L = b->per_chunk ? bytes / (chunks > 0 ? chunks : 1) : bytes;
    double lin = b->latency_us + b->bandwidth_us_per_byte * L;
    double best = lin > b->path_latency_us ? lin : b->path_latency_us;
    for (int i = 0; i < b->nlines && i < CS_TB_MAX_LINES; i++) {
        double v = b->lines[i].latency_us + b->lines[i].bandwidth_us_per_byte * L;
        best = v > best ? v : best;
    }
    return best;
}

/* ---- describing rank sets ------------------------------------------------------------ */

static int list_ranks(const unsigned char *in, int P, bool want, char *buf, size_t size)
{
    size_t used = (size_t)snprintf(buf, size, "{");
    bool first = true;
    for (int r = 0; r < P && used < size; r++)
        if ((bool)in[r] == want) {
            used += (size_t)snprintf(buf + used, size - used, "%s%d", first ? "" : ",", r);
            first = false;
        }
    if (used < size)
        snprintf(buf + used, size - used, "}");
    return 0;
}

/* "{3}", "all but {5}", "group 3 (ranks 24-31)", "groups {1,4} (16 ranks)",
 * "512 ranks from 0". */
static void describe_ranks(const cs_topology *t, const unsigned char *in, char *buf, size_t size)
{
    int P = t->ranks, n = 0, first = -1;
    for (int r = 0; r < P; r++)
        if (in[r]) {
            n++;
            if (first < 0)
                first = r;
        }
    if (n <= 6) {
        list_ranks(in, P, true, buf, size);
        return;
    }
    if (P - n <= 4) {
        size_t used = (size_t)snprintf(buf, size, "all but ");
        list_ranks(in, P, false, buf + used, size - used);
        return;
    }
    /* a union of whole groups? */
    int whole = 0, ngroups_in = 0, one = -1;
    for (int g = 0; g < t->ngroups; g++) {
        int c = 0;
        for (int i = 0; i < t->groups[g].nranks; i++)
            c += in[t->groups[g].ranks[i]];
        if (c == t->groups[g].nranks && c > 0) {
            whole += c;
            ngroups_in++;
            one = g;
        } else if (c != 0) {
            whole = -1;
            break;
        }
    }
    if (whole == n && ngroups_in == 1) {
        const cs_group *g = &t->groups[one];
        int lo = g->ranks[0], hi = g->ranks[0];
        for (int i = 1; i < g->nranks; i++) {
            lo = g->ranks[i] < lo ? g->ranks[i] : lo;
            hi = g->ranks[i] > hi ? g->ranks[i] : hi;
        }
        if (hi - lo + 1 == g->nranks)
            snprintf(buf, size, "group %d (ranks %d-%d)", one, lo, hi);
        else
            snprintf(buf, size, "group %d (%d ranks)", one, g->nranks);
        return;
    }
    if (whole == n && ngroups_in > 1) {
        snprintf(buf, size, "%d groups (%d ranks from %d)", ngroups_in, n, first);
        return;
    }
    snprintf(buf, size, "%d ranks from %d", n, first);
}

/* Rank-level membership of a vertex set. */
static int ranks_of(const cut_network *n, const unsigned char *in_s, unsigned char **out,
                    cs_error *err)
{
    int P = n->topo->ranks;
    unsigned char *r = malloc((size_t)P);
    if (!r)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    for (int i = 0; i < P; i++)
        r[i] = in_s[n->part_of[i]];
    *out = r;
    return CS_OK;
}

/* Offers the cut c of network n: T >= alpha + k L / cap. */
static int offer_cut(cs_time_bound *b, const cut_network *n, const cut_found *c,
                     const char *kind, bool exact, const char *what, cs_error *err)
{
    if (!c->in_s || !(c->cap_bw > 0))
        return CS_OK;
    /* describing a cut and finding its alpha walk every link: only for a
     * cut that raises the bound (among equal ones the first is kept) */
    if (b->kind[0] && (double)c->k / c->cap_bw <= b->bandwidth_us_per_byte)
        return CS_OK;
    unsigned char *ranks = NULL;
    int rc = ranks_of(n, c->in_s, &ranks, err);
    if (rc)
        return rc;
    char d[96];
    describe_ranks(n->topo, ranks, d, sizeof d);
    free(ranks);
    double alpha = cutnet_crossing_alpha(n, c->in_s);
    offer(b, isfinite(alpha) ? alpha : 0, (double)c->k / c->cap_bw, kind, exact,
          "S = %s: %lld x L must %s S over %.6g GB/s", d, (long long)c->k,
          what ? what : (n->reversed ? "leave" : "enter"), c->cap_bw / 1e3);
    return CS_OK;
}

/* ---- the group quotient ---------------------------------------------------------------- */

/* rank -> part: the topology's groups, then each ungrouped rank alone.
 * Returns the part count (0 when the topology has no groups). */
static int group_parts(const cs_topology *t, int **out, cs_error *err)
{
    *out = NULL;
    if (t->ngroups == 0 || !t->group_of)
        return 0;
    int *part = malloc(sizeof(int) * (size_t)t->ranks);
    if (!part) {
        cs_error_set(err, CS_ENOMEM, "", "out of memory");
        return -1;
    }
    int k = t->ngroups;
    for (int r = 0; r < t->ranks; r++)
        part[r] = t->group_of[r] >= 0 ? t->group_of[r] : k++;
    *out = part;
    return k;
}

/* Runs search(net) on the rank network and, unless that was exhaustive, on
 * the group quotient too; offers what each found. */
typedef int (*cut_search)(cut_network *n, int pinned, cut_found *best, bool *exact,
                          cs_error *err);

static int search_both(const cs_topology *t, bool reversed, int root, cut_search search,
                       cs_time_bound *b, const char *kind, const char *what, cs_error *err)
{
    cut_network n;
    int rc = cutnet_build(t, NULL, 0, reversed, &n, err);
    if (rc)
        return rc;
    cut_found best = {0};
    bool exact = false;
    rc = search(&n, root, &best, &exact, err);
    if (rc == CS_OK)
        rc = offer_cut(b, &n, &best, kind, exact, what, err);
    cut_found_free(&best);
    cutnet_free(&n);
    if (rc || exact)
        return rc;
    int *part;
    int nparts = group_parts(t, &part, err);
    if (nparts < 0)
        return CS_ENOMEM;
    if (nparts < 2) {
        free(part);
        return CS_OK;
    }
    rc = cutnet_build(t, part, nparts, reversed, &n, err);
    if (rc == CS_OK) {
        rc = search(&n, root >= 0 ? part[root] : -1, &best, &exact, err);
        if (rc == CS_OK)
            rc = offer_cut(b, &n, &best, kind, false, what, err);
        cut_found_free(&best);
        cutnet_free(&n);
    }
    free(part);
    return rc;
}

static int search_spread(cut_network *n, int pinned, cut_found *best, bool *exact,
                         cs_error *err)
{
    (void)pinned;
    return cutnet_max_outside_ratio(n, TB_CUT_WORK, best, exact, err);
}

static int search_root_spread(cut_network *n, int pinned, cut_found *best, bool *exact,
                              cs_error *err)
{
    return cutnet_max_inside_ratio(n, pinned, TB_CUT_WORK, best, exact, err);
}

static int search_root_min_cut(cut_network *n, int pinned, cut_found *best, bool *exact,
                               cs_error *err)
{
    return cutnet_min_cut_avoiding(n, pinned, TB_CUT_WORK, best, exact, err);
}

/* ---- allreduce ------------------------------------------------------------------------- */

/* Gossip over the vertices of n (a partition): 2(k-1) L over the summed
 * egress (or ingress) of the parts. */
static void offer_gossip(cs_time_bound *b, const cut_network *n, const char *parts)
{
    double out = 0, in = 0;
    for (int v = 0; v < n->nv; v++) {
        out += n->out_bw[v];
        in += n->in_bw[v];
    }
    double cap = out < in ? out : in;
    if (n->nv < 2 || !(cap > 0))
        return;
    double bw = 2.0 * (n->nv - 1) / cap;
    if (b->kind[0] && bw <= b->bandwidth_us_per_byte)
        return;
    double alpha = cutnet_partition_alpha(n);
    offer(b, isfinite(alpha) ? alpha : 0, bw, "gossip", false,
          "gossip among %d %s: each chunk crosses between them 2(k-1) = %d times, over "
          "%.6g GB/s of their %s",
          n->nv, parts, 2 * (n->nv - 1), cap / 1e3, out < in ? "egress" : "ingress");
}

/* On the network of a partition (part NULL: ranks): the gossip bound, and
 * the smallest cut each way (L must cross every cut, in and out). */
static int allreduce_on(const cs_topology *t, const int *part, int nparts, const char *parts,
                        cs_time_bound *b, cs_error *err)
{
    for (int dir = 0; dir < 2; dir++) {
        cut_network n;
        int rc = cutnet_build(t, part, nparts, dir == 1, &n, err);
        if (rc)
            return rc;
        if (dir == 0)
            offer_gossip(b, &n, parts);
        cut_found best = {0};
        bool exact = false;
        rc = cutnet_min_cut_avoiding(&n, 0, TB_CUT_WORK / 2, &best, &exact, err);
        if (rc == CS_OK)
            rc = offer_cut(b, &n, &best, "cut", false, NULL, err);
        cut_found_free(&best);
        cutnet_free(&n);
        if (rc)
            return rc;
    }
    return CS_OK;
}

static int allreduce_bound(const cs_topology *t, cs_time_bound *b, cs_error *err)
{
    int rc = allreduce_on(t, NULL, 0, "ranks", b, err);
    if (rc)
        return rc;
    int *part;
    int nparts = group_parts(t, &part, err);
    if (nparts < 0)
        return CS_ENOMEM;
    if (nparts >= 2)
        rc = allreduce_on(t, part, nparts, "groups", b, err);
    free(part);
    return rc;
}

/* ---- alltoall ----------------------------------------------------------------------- */

/* The lowered topology without its derived links: per rank, its physical
 * out- and in-links and its switches (CSR).  A switch stands for the derived
 * links between its ranks (one hop each way), so walks cost O(ranks +
 * physical links + ports) instead of O(ports^2). */
typedef struct {
    int *out_begin, *out;     /* link indices */
    int *in_begin, *in;
    int *sw_begin, *sw;       /* switch indices */
} rank_adjacency;

static void rank_adjacency_free(rank_adjacency *a)
{
    free(a->out_begin);
    free(a->out);
    free(a->in_begin);
    free(a->in);
    free(a->sw_begin);
    free(a->sw);
}

/* The two arrays of a CSR of n rows and m entries; begin[] zeroed. */
static int csr_alloc(int n, long m, int **begin, int **list)
{
    *begin = calloc((size_t)n + 1, sizeof(int));
    *list = malloc(sizeof(int) * (size_t)(m > 0 ? m : 1));
    return *begin && *list ? CS_OK : CS_ENOMEM;
}

static int rank_adjacency_build(const cs_topology *t, rank_adjacency *a, cs_error *err)
{
    memset(a, 0, sizeof *a);
    int P = t->ranks;
    long phys = 0, ports = 0;
    for (int l = 0; l < t->nlinks; l++)
        phys += t->links[l].switch_id < 0;
    for (int s = 0; s < t->nswitches; s++)
        ports += t->switches[s].nranks;
    int *fill = malloc(sizeof(int) * ((size_t)P + 1));
    if (!fill || csr_alloc(P, phys, &a->out_begin, &a->out) || csr_alloc(P, phys, &a->in_begin, &a->in) ||
        csr_alloc(P, ports, &a->sw_begin, &a->sw)) {
        free(fill);
        rank_adjacency_free(a);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    for (int l = 0; l < t->nlinks; l++)
        if (t->links[l].switch_id < 0) {
            a->out_begin[t->links[l].src + 1]++;
            a->in_begin[t->links[l].dst + 1]++;
        }
    for (int s = 0; s < t->nswitches; s++)
        for (int i = 0; i < t->switches[s].nranks; i++)
            a->sw_begin[t->switches[s].ranks[i] + 1]++;
    for (int r = 0; r < P; r++) {
        a->out_begin[r + 1] += a->out_begin[r];
        a->in_begin[r + 1] += a->in_begin[r];
        a->sw_begin[r + 1] += a->sw_begin[r];
    }
    memcpy(fill, a->out_begin, sizeof(int) * ((size_t)P + 1));
    for (int l = 0; l < t->nlinks; l++)
        if (t->links[l].switch_id < 0)
            a->out[fill[t->links[l].src]++] = l;
    memcpy(fill, a->in_begin, sizeof(int) * ((size_t)P + 1));
    for (int l = 0; l < t->nlinks; l++)
        if (t->links[l].switch_id < 0)
            a->in[fill[t->links[l].dst]++] = l;
    memcpy(fill, a->sw_begin, sizeof(int) * ((size_t)P + 1));
    for (int s = 0; s < t->nswitches; s++)
        for (int i = 0; i < t->switches[s].nranks; i++)
            a->sw[fill[t->switches[s].ranks[i]]++] = s;
    free(fill);
    return CS_OK;
}

/* Offers S = the first k ranks of `order` (k = 1..P-1), with cap(S) from a
 * cut of the network: the physical links into S (shared sets ignored) plus,
 * per switch, the cheaper side of its ports (min(inside, outside) ports).  An
 * upper bound on the min cut, so a valid bound; O(degree) per rank added. */
static void prefix_sweep(const cs_topology *t, const rank_adjacency *adj, const int *order,
                         unsigned char *in_s, int *sw_in, const char *what, cs_time_bound *b)
{
    int P = t->ranks;
    memset(in_s, 0, (size_t)P);
    memset(sw_in, 0, sizeof(int) * (size_t)(t->nswitches > 0 ? t->nswitches : 1));
    double cap = 0, best = -1;
    int best_k = 0;
    for (int k = 1; k < P; k++) {
        int v = order[k - 1];
        for (int i = adj->in_begin[v]; i < adj->in_begin[v + 1]; i++) {
            const cs_link *l = &t->links[adj->in[i]];
            if (!in_s[l->src])
                cap += l->lanes * l->gbps * 1e3;
        }
        for (int i = adj->out_begin[v]; i < adj->out_begin[v + 1]; i++) {
            const cs_link *l = &t->links[adj->out[i]];
            if (in_s[l->dst])
                cap -= l->lanes * l->gbps * 1e3;
        }
        for (int j = adj->sw_begin[v]; j < adj->sw_begin[v + 1]; j++) {
            const cs_switch *s = &t->switches[adj->sw[j]];
            int c = sw_in[adj->sw[j]]++, m = s->nranks;
            int before = c < m - c ? c : m - c, after = c + 1 < m - c - 1 ? c + 1 : m - c - 1;
            cap += (after - before) * s->gbps * 1e3;
        }
        in_s[v] = 1;
        double ratio = cap > 0 ? (double)k * (P - k) / cap : -1;
        if (ratio > best) {
            best = ratio;
            best_k = k;
        }
    }
    if (best_k == 0 || (b->kind[0] && best <= b->bandwidth_us_per_byte))
        return;
    /* the winner again, for its description and alpha */
    memset(in_s, 0, (size_t)P);
    for (int k = 0; k < best_k; k++)
        in_s[order[k]] = 1;
    double alpha = INFINITY;
    for (int l = 0; l < t->nlinks; l++)
        if (!in_s[t->links[l].src] && in_s[t->links[l].dst] && t->links[l].alpha_us < alpha)
            alpha = t->links[l].alpha_us;
    char d[96];
    describe_ranks(t, in_s, d, sizeof d);
    offer(b, isfinite(alpha) ? alpha : 0, best, "cut", false,
          "S = %s, the first %d ranks of %s: |S|(P-|S|) = %lld x L must enter S over "
          "%.6g GB/s",
          d, best_k, what, (long long)best_k * (P - best_k), (double)best_k * (P - best_k) / best / 1e3);
}

/* BFS from src over the lowered topology's hops (physical links, and a
 * switch joining its ranks): order[] gets the ranks in visit order, dist[]
 * the hops; sw_seen[] (nswitches entries) is scratch. */
static void bfs(const cs_topology *t, const rank_adjacency *adj, int src, int *order, int *dist,
                int *sw_seen)
{
    for (int r = 0; r < t->ranks; r++)
        dist[r] = -1;
    for (int s = 0; s < t->nswitches; s++)
        sw_seen[s] = 0;
    int head = 0, tail = 0;
    order[tail++] = src;
    dist[src] = 0;
    while (head < tail) {
        int u = order[head++];
        for (int i = adj->out_begin[u]; i < adj->out_begin[u + 1]; i++) {
            int v = t->links[adj->out[i]].dst;
            if (dist[v] < 0) {
                dist[v] = dist[u] + 1;
                order[tail++] = v;
            }
        }
        for (int j = adj->sw_begin[u]; j < adj->sw_begin[u + 1]; j++) {
            const cs_switch *s = &t->switches[adj->sw[j]];
            if (sw_seen[adj->sw[j]]++)
                continue;   /* its ranks were reached from an earlier (as close) rank */
            for (int i = 0; i < s->nranks; i++)
                if (dist[s->ranks[i]] < 0) {
                    dist[s->ranks[i]] = dist[u] + 1;
                    order[tail++] = s->ranks[i];
                }
        }
    }
}

static int alltoall_bound(const cs_topology *t, cs_time_bound *b, cs_error *err)
{
    int P = t->ranks, rc;
    cut_network n;
    if ((rc = cutnet_build(t, NULL, 0, false, &n, err)))
        return rc;
    double alpha_all = INFINITY, out_total = 0, in_total = 0;
    for (int l = 0; l < t->nlinks; l++)
        alpha_all = t->links[l].alpha_us < alpha_all ? t->links[l].alpha_us : alpha_all;
    if (!isfinite(alpha_all))
        alpha_all = 0;
    /* each rank alone, and all ranks but one: (P-1) L in or out */
    for (int v = 0; v < P; v++) {
        out_total += n.out_bw[v];
        in_total += n.in_bw[v];
        if (n.in_bw[v] > 0)
            offer(b, alpha_all, (P - 1) / n.in_bw[v], "cut", false,
                  "S = {%d}: (P-1) = %d x L must enter S over %.6g GB/s", v, P - 1,
                  n.in_bw[v] / 1e3);
        if (n.out_bw[v] > 0)
            offer(b, alpha_all, (P - 1) / n.out_bw[v], "cut", false,
                  "S = all but {%d}: (P-1) = %d x L must leave rank %d over %.6g GB/s", v,
                  P - 1, v, n.out_bw[v] / 1e3);
    }
    cutnet_free(&n);
    /* each group and its complement, with its exact cut */
    int *part;
    int nparts = group_parts(t, &part, err);
    if (nparts < 0)
        return CS_ENOMEM;
    for (int dir = 0; nparts >= 2 && dir < 2; dir++) {
        if ((rc = cutnet_build(t, part, nparts, dir == 1, &n, err))) {
            free(part);
            return rc;
        }
        unsigned char *in_s = calloc((size_t)nparts, 1);
        for (int g = 0; in_s && g < t->ngroups; g++) {
            cut_found c = {.in_s = in_s, .k = n.weight[g] * (P - n.weight[g])};
            in_s[g] = 1;
            if ((long)nparts * cutnet_size(&n) <= TB_CUT_WORK / 16)
                rc = cutnet_capacity_into(&n, in_s, &c.cap_bw, err);
            else
                c.cap_bw = n.in_bw[g];   /* reversed: the group's egress */
            if (rc == CS_OK)
                rc = offer_cut(b, &n, &c, "cut", false, NULL, err);
            in_s[g] = 0;
            if (rc)
                break;
        }
        if (!in_s)
            rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
        free(in_s);
        cutnet_free(&n);
        if (rc) {
            free(part);
            return rc;
        }
    }
    free(part);
    /* prefixes of the numbering and of BFS orders; the hop-distance sum */
    rank_adjacency adj;
    if ((rc = rank_adjacency_build(t, &adj, err)))
        return rc;
    int *order = malloc(sizeof(int) * (size_t)P), *dist = malloc(sizeof(int) * (size_t)P);
    int *sw_in = malloc(sizeof(int) * (size_t)(t->nswitches > 0 ? t->nswitches : 1));
    unsigned char *in_s = malloc((size_t)P);
    if (!order || !dist || !sw_in || !in_s) {
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
        goto done;
    }
    for (int r = 0; r < P; r++)
        order[r] = r;
    prefix_sweep(t, &adj, order, in_s, sw_in, "the numbering", b);
    int src = 0;
    for (int k = 0; k < TB_PREFIX_ORDERS; k++) {
        bfs(t, &adj, src, order, dist, sw_in);
        prefix_sweep(t, &adj, order, in_s, sw_in, "a BFS order", b);
        int far = order[P - 1];
        src = far == src ? (src + 1) % P : far;
    }
    long walk = (long)P + adj.out_begin[P] + adj.sw_begin[P];
    if ((long)P * walk <= TB_DISTANCE_WORK) {
        double hops = 0;
        for (int s = 0; s < P; s++) {
            bfs(t, &adj, s, order, dist, sw_in);
            for (int r = 0; r < P; r++)
                hops += dist[r] > 0 ? dist[r] : 0;
        }
        double cap = out_total < in_total ? out_total : in_total;
        if (cap > 0)
            offer(b, alpha_all, hops / cap, "distance", false,
                  "hop distance: the P(P-1) pairs' L travel %.0f hops in all, over %.6g GB/s "
                  "of total %s",
                  hops, cap / 1e3, out_total < in_total ? "egress" : "ingress");
    }
    /* The max-concurrent-flow LP bound (kind "mcf-lp") is not computed here:
     * it needs the LP solver of synth/mcf, a layer above this one, which
     * joins it to this bound with time_bound_offer(). */
done:
    free(order);
    free(dist);
    free(sw_in);
    free(in_s);
    rank_adjacency_free(&adj);
    return rc;
}

/* ---- custom ---------------------------------------------------------------------------- */

/* Per rank: the chunks it must receive, and the chunks only it holds that
 * others need, over its capacity (L = one chunk). */
static int custom_bound(const cs_topology *t, const cs_collective *c, cs_time_bound *b,
                        cs_error *err)
{
    int P = t->ranks;
    long *need_in = calloc((size_t)P, sizeof(long)), *need_out = calloc((size_t)P, sizeof(long));
    cut_network n;
    int rc = need_in && need_out ? cutnet_build(t, NULL, 0, false, &n, err)
                                 : cs_error_set(err, CS_ENOMEM, "", "out of memory");
    if (rc) {
        free(need_in);
        free(need_out);
        return rc;
    }
    for (long g = 0; g < c->custom_global_chunks; g++) {
        int src = collective_source(c, P, 1, g);
        bool leaves = false;
        for (int r = 0; r < P; r++)
            if (collective_post(c, P, 1, g, r) && !collective_pre(c, P, 1, g, r)) {
                need_in[r]++;
                if (r != src)
                    leaves = true;
            }
        if (src >= 0 && leaves)
            need_out[src]++;
    }
    double alpha_all = INFINITY;
    for (int l = 0; l < t->nlinks; l++)
        alpha_all = t->links[l].alpha_us < alpha_all ? t->links[l].alpha_us : alpha_all;
    if (!isfinite(alpha_all))
        alpha_all = 0;
    for (int r = 0; r < P; r++) {
        if (need_in[r] > 0 && n.in_bw[r] > 0)
            offer(b, alpha_all, need_in[r] / n.in_bw[r], "cut", false,
                  "rank %d must receive %ld chunks over %.6g GB/s", r, need_in[r],
                  n.in_bw[r] / 1e3);
        if (need_out[r] > 0 && n.out_bw[r] > 0)
            offer(b, alpha_all, need_out[r] / n.out_bw[r], "cut", false,
                  "rank %d alone holds %ld needed chunks, sent over %.6g GB/s", r, need_out[r],
                  n.out_bw[r] / 1e3);
    }
    cutnet_free(&n);
    free(need_in);
    free(need_out);
    return CS_OK;
}

/* ---- path latency ------------------------------------------------------------------ */

/* Ranks and switches; a link costs its alpha, entering a switch its port's
 * alpha and leaving it nothing (one switch hop = one port alpha).  Where a
 * physical link joins two ranks of a switch the simulator has no derived
 * link between them; the path through the switch node is then an extra,
 * shorter path: distances only get smaller, so they stay bounds. */
typedef struct {
    int n;
    int *begin, *to;
    double *w;
} path_graph;

static void path_graph_free(path_graph *g)
{
    free(g->begin);
    free(g->to);
    free(g->w);
}

static int path_graph_build(const cs_topology *t, bool backward, path_graph *g, cs_error *err)
{
    memset(g, 0, sizeof *g);
    int P = t->ranks;
    g->n = P + t->nswitches;
    long m = 0;
    for (int l = 0; l < t->nlinks; l++)
        m += t->links[l].switch_id < 0;
    for (int s = 0; s < t->nswitches; s++)
        m += 2L * t->switches[s].nranks;
    g->begin = calloc((size_t)g->n + 1, sizeof(int));
    g->to = malloc(sizeof(int) * (size_t)(m > 0 ? m : 1));
    g->w = malloc(sizeof(double) * (size_t)(m > 0 ? m : 1));
    int *fill = malloc(sizeof(int) * ((size_t)g->n + 1));
    if (!g->begin || !g->to || !g->w || !fill) {
        free(fill);
        path_graph_free(g);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    /* two passes: count, then place (u -> v of weight w; backward swaps u, v) */
    for (int pass = 0; pass < 2; pass++) {
        for (int l = 0; l < t->nlinks; l++) {
            const cs_link *k = &t->links[l];
            if (k->switch_id >= 0)
                continue;
            int u = backward ? k->dst : k->src, v = backward ? k->src : k->dst;
            if (pass == 0) {
                g->begin[u + 1]++;
            } else {
                g->to[fill[u]] = v;
                g->w[fill[u]++] = k->alpha_us;
            }
        }
        for (int s = 0; s < t->nswitches; s++)
            for (int i = 0; i < t->switches[s].nranks; i++) {
                int r = t->switches[s].ranks[i], sw = P + s;
                double a = t->switches[s].alpha_us;
                /* forward: r -> sw costs a, sw -> r is free; backward mirrored */
                int u1 = backward ? sw : r, v1 = backward ? r : sw;
                int u2 = backward ? r : sw, v2 = backward ? sw : r;
                if (pass == 0) {
                    g->begin[u1 + 1]++;
                    g->begin[u2 + 1]++;
                } else {
                    g->to[fill[u1]] = v1;
                    g->w[fill[u1]++] = a;
                    g->to[fill[u2]] = v2;
                    g->w[fill[u2]++] = 0;
                }
            }
        if (pass == 0) {
            for (int v = 0; v < g->n; v++)
                g->begin[v + 1] += g->begin[v];
            memcpy(fill, g->begin, sizeof(int) * ((size_t)g->n + 1));
        }
    }
    free(fill);
    return CS_OK;
}

typedef struct {
    double d;
    int v;
} heap_item;

/* Dijkstra from the sources (dist 0) into dist[n]; heap has room for
 * n + edges items. */
static void dijkstra(const path_graph *g, const int *src, int nsrc, double *dist, heap_item *heap)
{
    for (int v = 0; v < g->n; v++)
        dist[v] = INFINITY;
    int len = 0;
    for (int i = 0; i < nsrc; i++) {
        dist[src[i]] = 0;
        heap[len++] = (heap_item){0, src[i]};
    }
    while (len > 0) {
        heap_item top = heap[0];
        heap_item last = heap[--len];
        int i = 0;
        while (2 * i + 1 < len) {   /* sift last down from the root */
            int c = 2 * i + 1;
            if (c + 1 < len && heap[c + 1].d < heap[c].d)
                c++;
            if (heap[c].d >= last.d)
                break;
            heap[i] = heap[c];
            i = c;
        }
        if (len > 0)
            heap[i] = last;
        if (top.d > dist[top.v])
            continue;
        for (int e = g->begin[top.v]; e < g->begin[top.v + 1]; e++) {
            int v = g->to[e];
            double nd = top.d + g->w[e];
            if (nd < dist[v]) {
                dist[v] = nd;
                int j = len++;   /* sift up */
                while (j > 0 && heap[(j - 1) / 2].d > nd) {
                    heap[j] = heap[(j - 1) / 2];
                    j = (j - 1) / 2;
                }
                heap[j] = (heap_item){nd, v};
            }
        }
    }
}

/* The farthest rank from the sources: its index, distance in *far_d. */
static int farthest_rank(const double *dist, int P, double *far_d)
{
    int far = -1;
    *far_d = 0;
    for (int r = 0; r < P; r++)
        if (isfinite(dist[r]) && (far < 0 || dist[r] > *far_d)) {
            far = r;
            *far_d = dist[r];
        }
    return far;
}

/* root_dist (P entries, may be NULL): for a rooted collective, each rank's
 * alpha-weighted distance from the root (to it for reduce and gather), which
 * rooted_additive reads rather than searching the same graph again. */
static int path_latency(const cs_topology *t, const cs_collective *c, cs_time_bound *b,
                        double *root_dist, cs_error *err)
{
    int P = t->ranks;
    bool backward = c->kind == CS_COLL_GATHER || c->kind == CS_COLL_REDUCE;
    path_graph g;
    int rc = path_graph_build(t, backward, &g, err);
    if (rc)
        return rc;
    long m = g.begin[g.n];
    double *dist = malloc(sizeof(double) * (size_t)g.n);
    heap_item *heap = malloc(sizeof(heap_item) * (size_t)(g.n + m + 1));
    int *src = malloc(sizeof(int) * (size_t)P);
    if (!dist || !heap || !src) {
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
        goto done;
    }
    double best = 0, d;
    int from = -1, to = -1;
    switch (c->kind) {
    case CS_COLL_BROADCAST:
    case CS_COLL_SCATTER:
    case CS_COLL_GATHER:
    case CS_COLL_REDUCE:
        src[0] = c->root;
        dijkstra(&g, src, 1, dist, heap);
        if (root_dist)
            memcpy(root_dist, dist, sizeof(double) * (size_t)P);
        to = farthest_rank(dist, P, &best);
        from = c->root;
        if (backward) {   /* distances are to the root */
            from = to;
            to = c->root;
        }
        break;
    case CS_COLL_CUSTOM: {
        long spent = 0, per = (long)g.n + m;
        for (long ch = 0; ch < c->custom_global_chunks && spent < TB_CUSTOM_PATH_WORK; ch++) {
            int ns = 0;
            for (int r = 0; r < P; r++)
                if (collective_pre(c, P, 1, ch, r))
                    src[ns++] = r;
            if (ns == 0)
                continue;
            dijkstra(&g, src, ns, dist, heap);
            spent += per;
            for (int r = 0; r < P; r++)
                if (collective_post(c, P, 1, ch, r) && isfinite(dist[r]) && dist[r] > best) {
                    best = dist[r];
                    to = r;
                    from = (int)ch;
                }
        }
        if (to >= 0)
            snprintf(b->path, sizeof b->path, "chunk %d to rank %d: %.6g us", from, to, best);
        b->path_latency_us = best;
        goto done;
    }
    default:   /* every pair: the alpha-weighted diameter, or sweeps toward it */
        if ((long)P * ((long)g.n + m) <= TB_PATH_WORK) {
            for (int s = 0; s < P; s++) {
                src[0] = s;
                dijkstra(&g, src, 1, dist, heap);
                int far = farthest_rank(dist, P, &d);
                if (far >= 0 && d > best) {
                    best = d;
                    from = s;
                    to = far;
                }
            }
        } else {
            int s = 0;
            for (int k = 0; k < TB_PATH_SWEEPS; k++) {
                src[0] = s;
                dijkstra(&g, src, 1, dist, heap);
                int far = farthest_rank(dist, P, &d);
                if (far < 0)
                    break;
                if (d > best) {
                    best = d;
                    from = s;
                    to = far;
                }
                s = far == s ? (s + 1) % P : far;
            }
        }
        break;
    }
    b->path_latency_us = best;
    if (from >= 0 && to >= 0)
        snprintf(b->path, sizeof b->path, "rank %d -> rank %d: %.6g us", from, to, best);
done:
    free(dist);
    free(heap);
    free(src);
    path_graph_free(&g);
    return rc;
}

/* ---- rooted collectives: latency to the cut plus the cut ---------------------------------
 *
 * Claim (broadcast; scatter with |S| L; reduce and gather mirrored): for every
 * set S of ranks without the root,
 *
 *     T >= d(S) + L / cap_in(S),    d(S) = min over v in S of d(root, v),
 *
 * d the alpha-weighted distance of path_graph (a link costs its alpha, a
 * switch hop its port's alpha).  Proof in the simulator's model (simulate.h):
 * (1) every send takes at least its link's alpha (alpha + b / rate; a copy-
 * capable switch node costs an upload and a copy, each at least the port's
 * alpha) and starts only once its chunk is at its source, so a chunk is at
 * rank u no earlier than d(root, u), and a send u -> v starts no earlier than
 * d(root, u) >= d(root, v) - alpha(u -> v).  (2) Every chunk must reach S,
 * which starts without it: for each chunk take the send that first delivers
 * it into S (its source is outside S); its chain of network edges crosses
 * the cut, and it occupies a lane of that edge's resource (a link, a shared
 * set, a switch port) for alpha + b / rate with rate at most the lane's speed.
 * These sends carry X >= L bytes (|S| L for scatter).  (3) On a lane l of
 * the cut that carried x_l of those bytes, the first such send starts at s
 * and the lane is busy from s for at least its alpha plus x_l / bw_l (one
 * send at a time), so it ends at T >= s + alpha + x_l / bw_l >=
 * d(S) + x_l / bw_l by (1).  Over the lanes, max x_l / bw_l >= X / sum bw_l
 * = X / cap_in(S), and the lanes' own d terms are all >= d(S), so
 * T >= d(S) + X / cap_in(S).  Only one alpha per lane is counted and no
 * per-chunk store-and-forward term (b / bw per hop): chunks can be split
 * fine and pipelined, so neither can be charged to a schedule we do not see.
 * Reduce mirrored: for each chunk take, on the chain of sends that brings S's
 * contribution to the root's result, the last send leaving S; it ends at f,
 * and the data still needs d(v, root) >= d(u, root) - alpha after it, so a
 * lane of the out-cut that carried x_l ends at f >= x_l / bw_l + alpha
 * (started at >= 0) and T >= f + d(v, root) >= x_l / bw_l + d(S -> root).
 *
 * This is not D + the cut (docs/model.md, "A and D are not added"): d(S) is
 * the distance to S's nearest rank, not to the farthest rank; the 12-rank
 * example there meets it exactly (S = {1}: 1 us + 20,000 B / 2 GB/s = 11 us,
 * achieved).  Adding the distance from the cut to S's farthest rank would
 * need the last byte into S to land at the nearest rank, which a schedule
 * need not do; it is not added.
 *
 * Premise shared with the linear part: a cut's lanes never carry more than
 * their speed.  For timed schedules on switch ports at unequal rates the
 * simulator rounds a send's port lanes down (simulate.c), so sends that
 * overlap in the simulation though not in the schedule can exceed the port
 * by up to (k + 1) / k; both the cut bound and these lines assume they do not.
 *
 * Which S: the maximum over S is the maximum over w (S's nearest rank) of
 * d(w) + L / (the minimum cut into a set holding w and no rank nearer than w):
 * one max-flow per w (cutnet_min_cut_beyond), exact for broadcast and reduce
 * while it fits the cut budget; beyond it, the same on the group quotient
 * (unions of whole groups), plus every single rank and every single group.
 * Scatter and gather (k = |S|) take the single ranks, the single groups and
 * the group quotient's flow cuts with their own k: valid, not the maximum.
 * Ranks are taken farthest first, and a rank whose line could not beat the
 * bound so far at any size even with the search's largest slope is skipped.  Each S gives a line; the lines that are the
 * largest at some size 4^k (1 B .. 1 TiB) are kept. */

typedef struct {
    double a, bw;       /* the line */
    int kind;           /* 0 a rank, 1 a group, 2 a flow cut on ranks, 3 on groups */
    int who, size;      /* the rank / group / nearest rank; |S| */
} add_cand;

#define ADD_SIZES 21   /* L = 4^k, k = 0..20 */

typedef struct {
    add_cand *c;
    int n, cap;
    double env[ADD_SIZES];   /* the bound so far at each size (pruning) */
    double slope_max;        /* no candidate's slope exceeds it (0: unknown) */
} add_list;

/* Whether a line (a, up to slope_max) could still raise the bound at some
 * size 4^k: when not, its max-flow is skipped (which only drops a
 * candidate, so the bound stays valid; with an exact slope_max nothing that
 * could win is dropped). */
static bool add_could_win(const add_list *l, double a)
{
    if (!(l->slope_max > 0))
        return true;
    double L = 1;
    for (int k = 0; k < ADD_SIZES; k++, L *= 4)
        if (a + l->slope_max * L > l->env[k] * (1 + 1e-12))
            return true;
    return false;
}

static int add_push(add_list *l, double a, double bw, int kind, int who, int size,
                    cs_error *err)
{
    if (!isfinite(a) || !isfinite(bw) || !(bw > 0))
        return CS_OK;
    if (l->n == l->cap) {
        int nc = l->cap ? 2 * l->cap : 64;
        add_cand *g = realloc(l->c, sizeof *g * (size_t)nc);
        if (!g)
            return cs_error_set(err, CS_ENOMEM, "", "out of memory");
        l->c = g;
        l->cap = nc;
    }
    l->c[l->n++] = (add_cand){a, bw, kind, who, size};
    double L = 1;
    for (int k = 0; k < ADD_SIZES; k++, L *= 4)
        l->env[k] = fmax(l->env[k], a + bw * L);
    return CS_OK;
}

/* Descending distance, then ascending vertex (a stable order for ties). */
static int cmp_farther(const void *pa, const void *pb)
{
    const heap_item *a = pa, *b = pb;
    if (a->d != b->d)
        return a->d < b->d ? 1 : -1;
    return (a->v > b->v) - (a->v < b->v);
}

/* Per-w min cuts on network n, vertex distances vdist (the root's vertex
 * below every other); k = 1 (broadcast, reduce) or |S| (scatter, gather). */
static int add_flow_cuts(cut_network *n, const double *vdist, int root_v, bool per_rank_k,
                         int kind, add_list *l, cs_error *err)
{
    unsigned char *in_s = malloc((size_t)n->nv);
    heap_item *order = malloc(sizeof(heap_item) * (size_t)n->nv);
    if (!in_s || !order) {
        free(in_s);
        free(order);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    /* farthest first: their lines, once found, let nearer ones be skipped */
    int no = 0;
    for (int w = 0; w < n->nv; w++)
        if (w != root_v && isfinite(vdist[w]))
            order[no++] = (heap_item){vdist[w], w};
    qsort(order, (size_t)no, sizeof *order, cmp_farther);
    int rc = CS_OK;
    for (int i = 0; i < no && rc == CS_OK; i++) {
        int w = order[i].v;
        if (!add_could_win(l, vdist[w]))
            continue;
        double cap_bw;
        cutnet_min_cut_beyond(n, vdist, w, in_s, &cap_bw);
        double d = INFINITY;
        int64_t weight = 0;
        for (int v = 0; v < n->nv; v++)
            if (in_s[v]) {
                d = vdist[v] < d ? vdist[v] : d;
                weight += n->weight[v];
            }
        if (weight > 0 && cap_bw > 0)
            rc = add_push(l, d, (per_rank_k ? (double)weight : 1.0) / cap_bw, kind, w,
                          (int)weight, err);
    }
    free(in_s);
    free(order);
    return rc;
}

static void add_describe(const cs_topology *t, const add_cand *c, char *buf, size_t size)
{
    switch (c->kind) {
    case 0:
        snprintf(buf, size, "S = {%d}", c->who);
        break;
    case 1:
        snprintf(buf, size, "S = group %d (%d ranks)", c->who, c->size);
        break;
    case 2:
        snprintf(buf, size, "S = %d ranks nearest %d", c->size, c->who);
        break;
    default:
        snprintf(buf, size, "S = %d ranks, groups from %d", c->size, c->who);
        break;
    }
    (void)t;
}

/* vdist: path_latency's root distances (to the root for reduce and gather);
 * the root's own entry is overwritten. */
static int rooted_additive(const cs_topology *t, const cs_collective *c, double *vdist,
                           cs_time_bound *b, cs_error *err)
{
    int P = t->ranks;
    bool reversed = c->kind == CS_COLL_REDUCE || c->kind == CS_COLL_GATHER;
    bool per_rank_k = c->kind == CS_COLL_SCATTER || c->kind == CS_COLL_GATHER;
    int rc = CS_OK;
    add_list l = {0};
    int *part = NULL;
    cut_network n;
    bool have_net = false;
    vdist[c->root] = -1;   /* always on the root's side */
    {
        double L = 1;
        for (int k = 0; k < ADD_SIZES; k++, L *= 4)
            l.env[k] = time_bound_us(b, L, 1);
        /* the cut search's slope: the largest k / cap over the sets it
         * searched, the same family as every candidate here */
        l.slope_max = b->bandwidth_us_per_byte;
    }

    /* the rank network: single ranks, and per-rank flow cuts within budget */
    if ((rc = cutnet_build(t, NULL, 0, reversed, &n, err)))
        goto done;
    have_net = true;
    for (int v = 0; v < n.nv && rc == CS_OK; v++)
        if (v != c->root && n.in_bw[v] > 0)
            rc = add_push(&l, vdist[v], 1.0 / n.in_bw[v], 0, v, 1, err);
    /* per-rank flows for broadcast and reduce only: for scatter and gather
     * the slope bound |S| / cap prunes nothing and the flows' sets (least
     * cap, not most |S| / cap) rarely win: they cost up to 100x the cut
     * search for no gain on the bench topologies */
    if (rc == CS_OK && !per_rank_k && (long)n.nv * cutnet_size(&n) <= TB_CUT_WORK)
        rc = add_flow_cuts(&n, vdist, c->root, per_rank_k, 2, &l, err);
    cutnet_free(&n);
    have_net = false;
    if (rc)
        goto done;

    /* the group quotient: each group alone, and per-group flow cuts */
    int nparts = group_parts(t, &part, err);
    if (nparts < 0) {
        rc = CS_ENOMEM;
        goto done;
    }
    if (nparts >= 2) {
        if ((rc = cutnet_build(t, part, nparts, reversed, &n, err)))
            goto done;
        have_net = true;
        double *pd = malloc(sizeof(double) * (size_t)nparts);
        if (!pd) {
            rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
            goto done;
        }
        for (int p = 0; p < nparts; p++)
            pd[p] = INFINITY;
        for (int r = 0; r < P; r++)
            pd[part[r]] = vdist[r] < pd[part[r]] ? vdist[r] : pd[part[r]];
        int rp = part[c->root];
        for (int p = 0; p < nparts && rc == CS_OK; p++)
            if (p != rp && n.in_bw[p] > 0)
                rc = add_push(&l, pd[p], (per_rank_k ? (double)n.weight[p] : 1.0) / n.in_bw[p],
                              1, p, (int)n.weight[p], err);
        if (rc == CS_OK && (long)n.nv * cutnet_size(&n) <= TB_CUT_WORK)
            rc = add_flow_cuts(&n, pd, rp, per_rank_k, 3, &l, err);
        free(pd);
        if (rc)
            goto done;
    }

    /* keep the lines that are the largest at some size 4^k and beat the rest */
    b->nlines = 0;
    double L = 1;
    for (int k = 0; k < ADD_SIZES; k++, L *= 4) {
        int best = -1;
        double bv = time_bound_us(b, L, 1);
        for (int i = 0; i < l.n; i++) {
            double v = l.c[i].a + l.c[i].bw * L;
            if (v > bv * (1 + 1e-12)) {
                bv = v;
                best = i;
            }
        }
        if (best < 0 || b->nlines >= CS_TB_MAX_LINES)
            continue;
        cs_bound_line *ln = &b->lines[b->nlines++];
        ln->latency_us = l.c[best].a;
        ln->bandwidth_us_per_byte = l.c[best].bw;
        char d[64];
        add_describe(t, &l.c[best], d, sizeof d);
        snprintf(ln->cut, sizeof ln->cut, "%s: %.6g us away, %s", d, l.c[best].a,
                 per_rank_k ? "|S| L" : "L");
    }
done:
    if (have_net)
        cutnet_free(&n);
    free(part);
    free(l.c);
    return rc;
}

/* ---- the entry point ----------------------------------------------------------------- */

int collective_time_bound(const cs_topology *t, const cs_collective *c, cs_time_bound *out,
                          cs_error *err)
{
    memset(out, 0, sizeof *out);
    if (!t || !t->finalized || !c)
        return cs_error_set(err, CS_EINVAL, "", "the time bound needs a finalized topology and "
                            "a collective");
    if (collective_kind_is_rooted(c->kind) && (c->root < 0 || c->root >= t->ranks))
        return cs_error_set(err, CS_EINVAL, "collective.root", "root %d out of range 0..%d",
                            c->root, t->ranks - 1);
    if (c->kind == CS_COLL_CUSTOM && (!c->custom_bits || c->custom_ranks != t->ranks))
        return cs_error_set(err, CS_EINVAL, "collective",
                            "call collective_validate for %d ranks first", t->ranks);
    double t0 = cs_now();
    out->per_chunk = c->kind == CS_COLL_CUSTOM;
    if (t->ranks < 2) {
        snprintf(out->kind, sizeof out->kind, "trivial");
        snprintf(out->cut, sizeof out->cut, "one rank: nothing moves");
        return CS_OK;
    }
    int rc;
    switch (c->kind) {
    case CS_COLL_ALLGATHER:
    case CS_COLL_REDUCESCATTER:
        rc = search_both(t, c->kind == CS_COLL_REDUCESCATTER, -1, search_spread, out,
                         "forestcoll", NULL, err);
        break;
    case CS_COLL_SCATTER:
    case CS_COLL_GATHER:
        rc = search_both(t, c->kind == CS_COLL_GATHER, c->root, search_root_spread, out, "cut",
                         NULL, err);
        break;
    case CS_COLL_BROADCAST:
    case CS_COLL_REDUCE:
        rc = search_both(t, c->kind == CS_COLL_REDUCE, c->root, search_root_min_cut, out, "cut",
                         NULL, err);
        break;
    case CS_COLL_ALLREDUCE:
        rc = allreduce_bound(t, out, err);
        break;
    case CS_COLL_ALLTOALL:
        rc = alltoall_bound(t, out, err);
        break;
    case CS_COLL_CUSTOM:
        rc = custom_bound(t, c, out, err);
        break;
    default:
        rc = cs_error_set(err, CS_EINVAL, "collective.kind", "unknown collective kind");
    }
    bool additive = collective_kind_is_rooted(c->kind) && c->kind != CS_COLL_CUSTOM;
    double *root_dist = NULL;
    if (rc == CS_OK && additive && !(root_dist = malloc(sizeof(double) * (size_t)t->ranks)))
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
    if (rc == CS_OK)
        rc = path_latency(t, c, out, root_dist, err);
    if (rc == CS_OK && additive)
        rc = rooted_additive(t, c, root_dist, out, err);
    free(root_dist);
    if (rc == CS_OK && !out->kind[0]) {
        snprintf(out->kind, sizeof out->kind, "cut");
        snprintf(out->cut, sizeof out->cut, "no data must cross any cut");
    }
    out->seconds = cs_now() - t0;
    return rc;
}

/* ---- JSON ------------------------------------------------------------------------------ */

json_t *time_bound_to_json(const cs_time_bound *b)
{
    json_t *doc = json_object();
    if (!doc)
        return NULL;
    int bad = 0;
    bad |= json_object_set_new(doc, "latency_us", json_real(b->latency_us));
    bad |= json_object_set_new(doc, "bandwidth_us_per_byte", json_real(b->bandwidth_us_per_byte));
    bad |= json_object_set_new(doc, "path_latency_us", json_real(b->path_latency_us));
    bad |= json_object_set_new(doc, "kind", json_string(b->kind));
    bad |= json_object_set_new(doc, "cut", json_string(b->cut));
    bad |= json_object_set_new(doc, "path", json_string(b->path));
    bad |= json_object_set_new(doc, "exact", json_boolean(b->exact));
    bad |= json_object_set_new(doc, "seconds", json_real(b->seconds));
    if (b->per_chunk)
        bad |= json_object_set_new(doc, "per_chunk", json_true());
    if (b->nlines > 0) {
        json_t *lines = json_array();
        bad |= !lines;
        for (int i = 0; lines && i < b->nlines && i < CS_TB_MAX_LINES; i++) {
            json_t *o = json_pack("{s:f, s:f, s:s}", "latency_us", b->lines[i].latency_us,
                                  "bandwidth_us_per_byte", b->lines[i].bandwidth_us_per_byte,
                                  "cut", b->lines[i].cut);
            bad |= !o || json_array_append_new(lines, o);
        }
        bad |= json_object_set_new(doc, "lines", lines);
    }
    if (bad) {
        json_decref(doc);
        return NULL;
    }
    return doc;
}

static int get_number(const json_t *doc, const char *key, double *out, cs_error *err)
{
    const json_t *v = json_object_get(doc, key);
    if (!v)
        return CS_OK;
    if (!json_is_number(v) || !isfinite(json_number_value(v)) || json_number_value(v) < 0)
        return cs_error_set(err, CS_EINVAL, key, "%s must be a number >= 0", key);
    *out = json_number_value(v);
    return CS_OK;
}

static void get_string(const json_t *doc, const char *key, char *buf, size_t size)
{
    const char *s = json_string_value(json_object_get(doc, key));
    if (s)
        snprintf(buf, size, "%s", s);
}

int time_bound_from_json(const json_t *doc, cs_time_bound *out, cs_error *err)
{
    memset(out, 0, sizeof *out);
    if (!json_is_object(doc))
        return cs_error_set(err, CS_EINVAL, "", "a time bound must be a JSON object");
    int rc;
    if ((rc = get_number(doc, "latency_us", &out->latency_us, err)) ||
        (rc = get_number(doc, "bandwidth_us_per_byte", &out->bandwidth_us_per_byte, err)) ||
        (rc = get_number(doc, "path_latency_us", &out->path_latency_us, err)) ||
        (rc = get_number(doc, "seconds", &out->seconds, err)))
        return rc;
    get_string(doc, "kind", out->kind, sizeof out->kind);
    get_string(doc, "cut", out->cut, sizeof out->cut);
    get_string(doc, "path", out->path, sizeof out->path);
    out->exact = json_is_true(json_object_get(doc, "exact"));
    out->per_chunk = json_is_true(json_object_get(doc, "per_chunk"));
    const json_t *lines = json_object_get(doc, "lines");
    if (lines && !json_is_array(lines))
        return cs_error_set(err, CS_EINVAL, "lines", "the time bound's lines must be an array");
    size_t i;
    const json_t *o;
    json_array_foreach(lines, i, o) {
        if (out->nlines >= CS_TB_MAX_LINES)
            break;   /* fewer lines: a smaller bound, still a bound */
        cs_bound_line *ln = &out->lines[out->nlines];
        if ((rc = get_number(o, "latency_us", &ln->latency_us, err)) ||
            (rc = get_number(o, "bandwidth_us_per_byte", &ln->bandwidth_us_per_byte, err)))
            return rc;
        get_string(o, "cut", ln->cut, sizeof ln->cut);
        out->nlines++;
    }
    return CS_OK;
}
