/*
 * bounds.c - lower bounds on steps and on rounds per chunk for a collective
 * on a topology (collective_bounds, collective.h).
 *
 * Model (SCCL's k-synchronous algorithms): an algorithm has `chunks` = C,
 * moves chunks over links in rounds, and a link carries at most `lanes`
 * chunks per round (a shared set at most its `lanes` over all its links).  The
 * bounds are on R / C, the rounds per chunk, and on S, the steps.
 *
 * Steps: a chunk needs at least dist(source, destination) steps, so the bound
 * is the largest such hop distance:
 *   allgather, alltoall   the diameter (max over all pairs);
 *   broadcast, scatter    the eccentricity of the root;
 *   gather                the largest distance into the root;
 *   reducescatter, reduce the dual (allgather, broadcast) on the reversed
 *                         topology, i.e. the same distances read backwards;
 *   allreduce             reducescatter + allgather steps (a bound for the
 *                         SCCL construction RS then AG, not for every
 *                         conceivable allreduce);
 *   custom                for each chunk, the largest distance from the
 *                         nearest rank holding it to a rank that needs it.
 *
 * Rounds per chunk: cut bounds.  For a set S of ranks, if every algorithm must
 * move at least k*C chunks into S and at most cap(S) chunks per round can
 * enter S, then R/C >= k / cap(S).  cap(S) is a minimum cut in a flow network
 * with one node per rank and, per shared set, an in and an out node joined by
 * an edge of the set's lanes; a link src->dst of l lanes runs src -> set1 ->
 * set2 -> ... -> dst through the sets that contain it (edges of l lanes).
 * Every real round maps to a feasible flow in that network, so its cuts never
 * undercount what can cross and the bounds stay valid (switch lowering makes
 * every switch port such a set, so a rank on a switch gets 1 lane in, 1 out).
 * A switch whose lowering cuts every rank partition like a hub would (see
 * hub_switches: no member has more than n/4 physical links to others) is one
 * hub node with a 1-lane edge to and from each member instead of its n(n-1)
 * derived links: the same cuts, values and sets, in a network of thousands of
 * edges instead of a million for a 512-port fabric switch.
 *
 *   allgather     k = P - |S| for any S (not empty, not all): maximize
 *                 (P-|S|)/cap(S), i.e. find lambda* = min cap(S)/(P-|S|) by
 *                 Dinkelbach iteration: for a given lambda = p/q, the minimum
 *                 of q*cap(S) - p*(P-|S|) over S containing a fixed rank t0 is
 *                 an s-t min cut (source -> every rank with capacity p, links
 *                 scaled by q, t0 -> sink infinite), solved for every t0 with
 *                 push-relabel (FIFO, gap and global relabelling; the first
 *                 phase settles the min cut) on exact 64-bit integers.
 *                 lambda starts at the best single-rank cut; a negative
 *                 minimum makes lambda that set's ratio at once; a pass over
 *                 every t0 without one proves lambda optimal.  The result is
 *                 exact: rpc = 1/lambda* as a reduced fraction (DGX-1: 7/6).
 *   broadcast     k = 1 for any S without the root: rpc = 1 / min over t of
 *                 maxflow(root, t).
 *   scatter       k = |S| for S without the root: maximize |S|/cap(S) by
 *                 Dinkelbach (root on the source side, every other rank ->
 *                 sink with capacity p): one min cut per iteration.
 *   gather        scatter on the reversed topology (chunks leave S).
 *   alltoall      k = |S|*(P-|S|): not a ratio min cut can optimize, so the
 *                 bound is the best of the cuts examined: every set the
 *                 allgather Dinkelbach met, each rank alone and its
 *                 complement, each locality group and its complement (exact
 *                 cut capacity), and the prefixes of the rank numbering and
 *                 of a BFS order from every rank (capacity = plain sum of
 *                 entering lanes, an over-estimate, so still valid).  Valid,
 *                 not always tight (DGX-1: 8/3 from its two groups).
 *   reducescatter, reduce: the dual (allgather, broadcast) on the reversed
 *                 topology (an inverted algorithm runs the same rounds).
 *   allreduce     with C = P*c chunks done as RS then AG of c chunks each:
 *                 (rpc_RS + rpc_AG) / P.
 *   custom        per-rank cuts: chunks a rank must receive over its
 *                 ingress lanes, chunks only it holds and others need over its
 *                 egress lanes (rounds, taking C = 1).
 *
 * Scale: the exact allgather search needs at least P max-flows (one pass over
 * t0, starting from the best single-rank cut, updating lambda eagerly).  For
 * P * (network size) > 2e7 (e.g. a 45x45 mesh, or 1024 ranks on switches no
 * hub stands for) only 4e6 / size (at least 16) evenly spaced t0 are tried:
 * valid, not proven tight, and the description says "sampled".  Broadcast samples its targets
 * the same way (a min over fewer targets is larger: still a valid bound).
 * For P > BOUNDS_FALLBACK_RANKS (4096) it falls back to per-rank cuts (a rank
 * alone and its complement, using topology_ingress/egress_lanes).  The steps
 * bound uses BFS from a few ranks (a double sweep) instead of the full
 * diameter when P * (P + links) > 2e8.  All still valid, possibly loose.
 */
#include "collective.h"
#include "bounds_internal.h"

#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Max-flows per search are P; each costs about the network's size (nodes +
 * edges).  Up to BOUNDS_EXACT_WORK = P * size the search is exhaustive (exact);
 * beyond, BOUNDS_SAMPLE_WORK / size (at least BOUNDS_SAMPLE_MIN) evenly spaced
 * ranks are tried. */
#define BOUNDS_EXACT_WORK 20000000L
#define BOUNDS_SAMPLE_WORK 4000000L
#define BOUNDS_SAMPLE_MIN 16
/* BFS-order prefixes (alltoall) while P * (P + links) fits this */
#define BOUNDS_BFS_PREFIX_WORK 20000000L
/* the exact diameter (P BFS) while P * (P + links) fits this */
#define BOUNDS_DIAMETER_WORK 200000000L
#define BOUNDS_FALLBACK_RANKS 4096
/* Work budget (ranks+links per BFS times BFS count) for custom steps. */
#define CUSTOM_STEPS_BUDGET 100000000L

/* ---- the cut network of a topology ------------------------------------------------- */

typedef struct {
    flow_net g;
    int P;
    int s, t;
    int *src_edge;   /* per rank: s -> rank edge */
    int *sink_edge;  /* per rank: rank -> t edge */
    int base_edges;  /* edges [0, base_edges) are the topology's */
    int64_t total_lanes;
} cut_net;

static void cut_free(cut_net *c)
{
    flow_net_free(&c->g);
    free(c->src_edge);
    free(c->sink_edge);
}

/* Switches whose SCCL lowering one hub node stands for exactly in the cut
 * network: member -> hub and hub -> member edges of 1 lane (the ports)
 * instead of a derived link per ordered pair chained through the members'
 * egress and ingress sets.  A 512-port fabric switch is 261,632 derived
 * links, 785k edges of the lowered network against 1,024 of the hub (and
 * a push-relabel over the lowered form runs 1.5-3x slower when the ranks
 * are numbered differently: the same work, scattered over 38 MB).
 *
 * Why it is exact.  The network's cut function decomposes: given which
 * ranks are on the sink side, each switch's internal nodes are cut
 * independently, and for a switch s whose members split into U (source
 * side) and W (sink side) the lowered form can pass exactly a maximum
 * matching of the bipartite graph U x W minus the pairs s derived no link
 * for (each egress and ingress set carries 1 lane), where the hub passes
 * min(|U|, |W|).  s derives a link for every ordered pair of members that
 * no other link joins; let d be the most such other links (physical, or
 * another switch's) a member has to, or from, other members.  Hall's
 * condition holds on the smaller side W whenever |U| >= 2d: a subset W' of
 * more than d ranks has every rank of U as a neighbour (a rank misses at
 * most d of them), and a smaller one misses at most d ranks of U (those
 * missing a pair into any one of its ranks), leaving |U| - d >= d >= |W'|;
 * the same holds with the sides swapped.  With n >= 4d members the larger
 * side always has n/2 >= 2d, so both forms cut every rank
 * partition at the same capacity, give the same maximum flows and the same
 * (unique, minimal) sink side of a minimum cut: every bound and set found
 * is the one the lowered form gives.  Not used (the lowering stays) for
 * smaller or densely wired switches, for copy-capable switches in a node
 * view (their port sets also hold the node's links) and for switches with
 * a derived link in a document shared set. */
static unsigned char *hub_switches(const cs_topology *t)
{
    if (t->nswitches == 0)
        return NULL;
    unsigned char *hub = calloc((size_t)t->nswitches, 1);
    int *mark = malloc(sizeof(int) * (size_t)t->ranks);
    if (!hub || !mark) {
        free(hub);
        free(mark);
        return NULL;   /* no hubs: the lowered form, as before */
    }
    for (int r = 0; r < t->ranks; r++)
        mark[r] = -1;
    for (int s = 0; s < t->nswitches; s++) {
        const cs_switch *sw = &t->switches[s];
        if (sw->nranks < 2 || (t->node_view && sw->copy))
            continue;
        for (int i = 0; i < sw->nranks; i++)
            mark[sw->ranks[i]] = s;
        int d = 0;
        bool member_ranks = true;
        for (int i = 0; i < sw->nranks; i++) {
            int a = sw->ranks[i];
            if (a < 0 || a >= t->ranks) {
                member_ranks = false;
                break;
            }
            int out = 0, in = 0;
            /* a pair joined by a link not derived from s (physical, or an
             * earlier switch's) gets no derived link of s */
            for (int k = t->out_begin[a]; k < t->out_begin[a + 1]; k++)
                out += t->links[k].switch_id != s && mark[t->links[k].dst] == s;
            for (int k = t->in_begin[a]; k < t->in_begin[a + 1]; k++) {
                const cs_link *l = &t->links[t->in_links[k]];
                in += l->switch_id != s && mark[l->src] == s;
            }
            if (out > d)
                d = out;
            if (in > d)
                d = in;
        }
        hub[s] = member_ranks && (long)sw->nranks >= 4L * d;
    }
    free(mark);
    /* a derived link in a document set: its chain passes that set too */
    for (int k = 0; k < t->nshared; k++) {
        if (t->shared[k].switch_id >= 0)
            continue;
        for (int j = 0; j < t->shared[k].nlinks; j++) {
            int sid = t->links[t->shared[k].links[j]].switch_id;
            if (sid >= 0)
                hub[sid] = 0;
        }
    }
    return hub;
}

static int cut_build(const cs_topology *t, cut_net *c, cs_error *err)
{
    memset(c, 0, sizeof *c);
    int P = t->ranks, K = t->nshared;
    unsigned char *hub = hub_switches(t);
    /* kept sets: those not standing for a hub switch's ports; node of set k */
    int *set_node = malloc(sizeof(int) * (size_t)(K > 0 ? K : 1));
    int *hub_node = malloc(sizeof(int) * (size_t)(t->nswitches > 0 ? t->nswitches : 1));
    if (!set_node || !hub_node) {
        free(hub);
        free(set_node);
        free(hub_node);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    int n = P;
    for (int k = 0; k < K; k++) {
        int sid = t->shared[k].switch_id;
        set_node[k] = sid >= 0 && hub && hub[sid] ? -1 : n;
        if (set_node[k] >= 0)
            n += 2;
    }
    long hub_edges = 0;
    for (int s = 0; s < t->nswitches; s++) {
        hub_node[s] = hub && hub[s] ? n++ : -1;
        if (hub_node[s] >= 0)
            hub_edges += 2L * t->switches[s].nranks;
    }
    /* link -> kept sets containing it, CSR (links of hub switches have none) */
    int *cnt = calloc((size_t)t->nlinks + 1, sizeof(int));
    if (!cnt) {
        free(hub);
        free(set_node);
        free(hub_node);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    long memberships = 0, nsets = 0, nlinks = 0;
    for (int k = 0; k < K; k++) {
        if (set_node[k] < 0)
            continue;
        nsets++;
        for (int j = 0; j < t->shared[k].nlinks; j++)
            cnt[t->shared[k].links[j] + 1]++;
        memberships += t->shared[k].nlinks;
    }
    for (int l = 0; l < t->nlinks; l++) {
        cnt[l + 1] += cnt[l];
        int sid = t->links[l].switch_id;
        nlinks += !(sid >= 0 && hub && hub[sid]);
    }
    int *sets = malloc(sizeof(int) * (size_t)(memberships > 0 ? memberships : 1));
    int *fill = malloc(sizeof(int) * (size_t)(t->nlinks > 0 ? t->nlinks : 1));
    if (!sets || !fill) {
        free(cnt);
        free(sets);
        free(fill);
        free(hub);
        free(set_node);
        free(hub_node);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    memcpy(fill, cnt, sizeof(int) * (size_t)t->nlinks);
    for (int k = 0; k < K; k++)   /* ascending k: every chain visits sets in one order */
        if (set_node[k] >= 0)
            for (int j = 0; j < t->shared[k].nlinks; j++)
                sets[fill[t->shared[k].links[j]]++] = k;
    free(fill);
    long edges = nsets + nlinks + memberships + hub_edges + 2L * P;
    n += 2;
    if (edges > INT_MAX / 4 || flow_net_init(&c->g, n, (int)edges) != CS_OK) {
        free(cnt);
        free(sets);
        free(hub);
        free(set_node);
        free(hub_node);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory for the cut network");
    }
    c->P = P;
    c->s = n - 2;
    c->t = n - 1;
    for (int k = 0; k < K; k++)
        if (set_node[k] >= 0)
            flow_net_edge(&c->g, set_node[k], set_node[k] + 1, t->shared[k].lanes);
    for (int s = 0; s < t->nswitches; s++)
        if (hub_node[s] >= 0)
            for (int i = 0; i < t->switches[s].nranks; i++) {
                /* a port: 1 lane up and 1 lane down, as its egress and ingress sets */
                flow_net_edge(&c->g, t->switches[s].ranks[i], hub_node[s], 1);
                flow_net_edge(&c->g, hub_node[s], t->switches[s].ranks[i], 1);
            }
    for (int l = 0; l < t->nlinks; l++) {
        const cs_link *lk = &t->links[l];
        /* the total counts every link, hub switches' too: scatter's Dinkelbach
         * starts from it */
        c->total_lanes += lk->lanes;
        if (lk->switch_id >= 0 && hub && hub[lk->switch_id])
            continue;
        int prev = lk->src;
        for (int i = cnt[l]; i < cnt[l + 1]; i++) {
            flow_net_edge(&c->g, prev, set_node[sets[i]], lk->lanes);
            prev = set_node[sets[i]] + 1;
        }
        flow_net_edge(&c->g, prev, lk->dst, lk->lanes);
    }
    free(cnt);
    free(sets);
    free(hub);
    free(set_node);
    free(hub_node);
    c->base_edges = c->g.m;
    c->src_edge = malloc(sizeof(int) * (size_t)P);
    c->sink_edge = malloc(sizeof(int) * (size_t)P);
    if (!c->src_edge || !c->sink_edge) {
        cut_free(c);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    for (int r = 0; r < P; r++) {
        c->src_edge[r] = flow_net_edge(&c->g, c->s, r, 0);
        c->sink_edge[r] = flow_net_edge(&c->g, r, c->t, 0);
    }
    return CS_OK;
}

/* Resets residual capacities: topology edges scaled by q, terminal edges 0. */
static void cut_reset(cut_net *c, int64_t q)
{
    for (int e = 0; e < c->base_edges; e++)
        c->g.cap[e] = c->g.base[e] * q;
    for (int e = c->base_edges; e < c->g.m; e++)
        c->g.cap[e] = 0;
}

/* Capacity (lanes per round) into the rank set in_s (1 = in S): the min cut
 * with the ranks pinned to their sides and the set nodes free. */
static int64_t cut_capacity_into(cut_net *c, const unsigned char *in_s)
{
    cut_reset(c, 1);
    for (int r = 0; r < c->P; r++) {
        if (in_s[r])
            c->g.cap[c->sink_edge[r]] = FLOW_INF;
        else
            c->g.cap[c->src_edge[r]] = FLOW_INF;
    }
    return flow_net_maxflow(&c->g, c->s, c->t);
}

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b) {
        int64_t r = a % b;
        a = b;
        b = r;
    }
    return a < 0 ? -a : a;
}

/* A candidate bound num/den (rounds per chunk) with its description. */
typedef struct {
    int64_t num, den;
    char why[256];
} rpc_bound;

static void bound_offer(rpc_bound *b, int64_t num, int64_t den, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void bound_offer(rpc_bound *b, int64_t num, int64_t den, const char *fmt, ...)
{
    if (den <= 0)
        return;
    /* num/den > b->num/b->den ? (values are small: no overflow for P <= 2^20) */
    if (b->den > 0 && (__int128)num * b->den <= (__int128)b->num * den)
        return;
    int64_t g = gcd64(num, den);
    if (g == 0)
        g = 1;
    b->num = num / g;
    b->den = den / g;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->why, sizeof b->why, fmt, ap);
    va_end(ap);
}

/* Describes a rank set briefly: "{0}", "{0,1,2} (3 ranks)", "7 ranks incl. 4". */
static void describe_set(const unsigned char *in_s, int P, char *buf, size_t size)
{
    int n = 0, first = -1;
    for (int r = 0; r < P; r++)
        if (in_s[r]) {
            if (first < 0)
                first = r;
            n++;
        }
    if (n <= 8) {
        size_t used = 0;
        used += (size_t)snprintf(buf, size, "{");
        for (int r = 0; r < P && used < size; r++)
            if (in_s[r])
                used += (size_t)snprintf(buf + used, size - used, "%s%d",
                                         used > 1 ? "," : "", r);
        if (used < size)
            snprintf(buf + used, size - used, "}");
    } else {
        snprintf(buf, size, "%d ranks from %d", n, first);
    }
}

/* ---- allgather / alltoall: Dinkelbach over s-t min cuts ----------------------------- */

/* How many of the P candidates (t0 or targets) to try: all while P max-flows
 * fit BOUNDS_EXACT_WORK, else an evenly spaced sample. */
static int tries(const cut_net *c, int P)
{
    long size = (long)c->g.n + c->g.m;
    if ((long)P * size <= BOUNDS_EXACT_WORK)
        return P;
    long k = BOUNDS_SAMPLE_WORK / size;
    if (k < BOUNDS_SAMPLE_MIN)
        k = BOUNDS_SAMPLE_MIN;
    return k < P ? (int)k : P;
}

/* Offers S = the first k ranks of order (k = 1..P-1) for alltoall, with
 * cap(S) the plain sum of lanes entering S (shared sets ignored: an upper
 * bound on the capacity, so the ratio stays a valid bound), updated as each
 * rank joins: O(degree) per step. */
static void a2a_prefixes(const cs_topology *t, const int *order, unsigned char *in_s,
                         const char *what, rpc_bound *a2a)
{
    int P = t->ranks;
    memset(in_s, 0, (size_t)P);
    int64_t cap = 0;
    for (int k = 1; k < P; k++) {
        int v = order[k - 1];
        for (int i = t->in_begin[v]; i < t->in_begin[v + 1]; i++) {
            const cs_link *l = &t->links[t->in_links[i]];
            if (!in_s[l->src])
                cap += l->lanes;
        }
        for (int i = t->out_begin[v]; i < t->out_begin[v + 1]; i++)
            if (in_s[t->links[i].dst])
                cap -= t->links[i].lanes;
        in_s[v] = 1;
        bound_offer(a2a, (int64_t)k * (P - k), cap,
                    "alltoall cut: %d chunks per chunk must enter the first %d ranks of %s "
                    "(from %d) over %lld lanes", k * (P - k), k, what, order[0], (long long)cap);
    }
}

/* Alltoall candidates beyond the allgather search: locality groups and their
 * complements (exact cut capacity), prefixes of the rank numbering, and (for
 * P * (P + links) <= BOUNDS_BFS_PREFIX_WORK) prefixes of a BFS order from
 * every rank. */
static int a2a_candidates(const cs_topology *t, cut_net *c, rpc_bound *a2a, cs_error *err)
{
    int P = t->ranks;
    unsigned char *in_s = malloc((size_t)P);
    int *order = malloc(sizeof(int) * (size_t)P);
    if (!in_s || !order) {
        free(in_s);
        free(order);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    /* exact cut capacity costs a max-flow each: as many groups as tries() allows */
    int ngroups = t->ngroups, budget = tries(c, 2 * ngroups) / 2;
    if (budget < ngroups)
        ngroups = budget > 0 ? budget : 1;
    for (int g = 0; g < ngroups; g++)
        for (int side = 0; side < 2; side++) {
            memset(in_s, side, (size_t)P);
            for (int i = 0; i < t->groups[g].nranks; i++)
                in_s[t->groups[g].ranks[i]] = (unsigned char)!side;
            int k = 0;
            for (int r = 0; r < P; r++)
                k += in_s[r];
            if (k == 0 || k == P)
                continue;
            int64_t cap = cut_capacity_into(c, in_s);
            bound_offer(a2a, (int64_t)k * (P - k), cap,
                        "alltoall cut: %d chunks per chunk must enter %s group %d over %lld "
                        "lanes", k * (P - k), side ? "all but" : "", g, (long long)cap);
        }
    for (int r = 0; r < P; r++)
        order[r] = r;
    a2a_prefixes(t, order, in_s, "the numbering", a2a);
    if ((long)P * ((long)P + t->nlinks) <= BOUNDS_BFS_PREFIX_WORK) {
        for (int v = 0; v < P; v++) {
            /* BFS order from v over out-links, ties by link order */
            memset(in_s, 0, (size_t)P);
            int head = 0, tail = 0;
            order[tail++] = v;
            in_s[v] = 1;
            while (head < tail) {
                int u = order[head++];
                for (int i = t->out_begin[u]; i < t->out_begin[u + 1]; i++)
                    if (!in_s[t->links[i].dst]) {
                        in_s[t->links[i].dst] = 1;
                        order[tail++] = t->links[i].dst;
                    }
            }
            a2a_prefixes(t, order, in_s, "a BFS order", a2a);
        }
    }
    free(in_s);
    free(order);
    return CS_OK;
}

/* Sets ag to the allgather rpc and, when a2a is non-NULL, offers every
 * examined set with the alltoall count |S|*(P-|S|).  Exact when every rank is
 * tried as t0 (see tries()); above that only a sample is tried, which still
 * yields valid cuts. */
static int allgather_cuts(const cs_topology *t, rpc_bound *ag, rpc_bound *a2a, cs_error *err)
{
    int P = t->ranks;
    /* lambda = p / q starts at the best single-rank cut (capped ingress lanes
     * are an upper bound on what can enter the rank, so the ratio is a valid
     * bound and lambda0 >= lambda*). */
    int64_t p = -1, q = 1;
    for (int v = 0; v < P; v++) {
        int in = topology_ingress_lanes(t, v), out = topology_egress_lanes(t, v);
        if (in > 0 && (p < 0 || (int64_t)in * q < p * (P - 1))) {
            p = in;
            q = P - 1;
            ag->num = ag->den = 0;
            bound_offer(ag, P - 1, in,
                        "min cut: %d chunks per chunk must enter S = {%d} over %d lanes", P - 1, v,
                        in);
        }
        if (a2a) {
            bound_offer(a2a, P - 1, in, "alltoall: rank %d must receive %d chunks per chunk "
                        "over %d lanes", v, P - 1, in);
            bound_offer(a2a, P - 1, out, "alltoall: rank %d must send %d chunks per chunk "
                        "over %d lanes", v, P - 1, out);
        }
    }
    if (p < 0)
        return CS_OK;
    cut_net c;
    int rc = cut_build(t, &c, err);
    if (rc)
        return rc;
    unsigned char *in_s = malloc((size_t)P);
    if (!in_s) {
        cut_free(&c);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    int ntries = tries(&c, P);
    bool sampled = ntries < P;
    /* Eager Dinkelbach: any set with q*cap(S) - p*(P-|S|) < 0 lowers lambda at
     * once; stop after a full pass over the t0 without improvement. */
    int since_improved = 0;
    for (int k = 0; since_improved < ntries && k < 64 * ntries; k++, since_improved++) {
        int t0 = sampled ? (int)((long)(k % ntries) * P / ntries) : k % P;
        cut_reset(&c, q);
        for (int r = 0; r < P; r++)
            c.g.cap[c.src_edge[r]] = p;
        c.g.cap[c.sink_edge[t0]] = FLOW_INF;
        int64_t cut = flow_net_maxflow(&c.g, c.s, c.t);
        int size = 0;
        for (int r = 0; r < P; r++) {
            in_s[r] = flow_net_sink_side(&c.g, r);
            size += in_s[r];
        }
        int64_t capq = cut - p * size;      /* = q * cap(S) */
        int64_t f = cut - p * (int64_t)P;   /* = q*cap(S) - p*(P-|S|) */
        if (size == P)
            continue;
        char d[96];
        describe_set(in_s, P, d, sizeof d);
        if (a2a)
            bound_offer(a2a, (int64_t)size * (P - size) * q, capq,
                        "alltoall cut: %d chunks per chunk must enter S = %s over %lld lanes",
                        size * (P - size), d, (long long)(capq / q));
        if (f < 0) {
            p = capq / q;
            q = P - size;
            ag->num = ag->den = 0;
            bound_offer(ag, q, p, "min cut: %lld chunks per chunk must enter S = %s over %lld "
                        "lanes%s", (long long)q, d, (long long)p,
                        sampled ? " (sampled search)" : "");
            since_improved = 0;
        }
    }
    free(in_s);
    if (a2a)
        rc = a2a_candidates(t, &c, a2a, err);
    cut_free(&c);
    return rc;
}

/* broadcast from root: 1 / min_t maxflow(root, t). */
static int broadcast_cut(const cs_topology *t, int root, rpc_bound *b, cs_error *err)
{
    cut_net c;
    int rc = cut_build(t, &c, err);
    if (rc)
        return rc;
    int64_t best = FLOW_INF;
    int at = -1, P = t->ranks, ntries = tries(&c, P);
    for (int k = 0; k < ntries; k++) {
        int v = ntries < P ? (int)((long)k * P / ntries) : k;
        if (v == root)
            continue;
        cut_reset(&c, 1);
        c.g.cap[c.src_edge[root]] = FLOW_INF;
        c.g.cap[c.sink_edge[v]] = FLOW_INF;
        int64_t f = flow_net_maxflow(&c.g, c.s, c.t);
        if (f < best) {
            best = f;
            at = v;
        }
    }
    if (at >= 0)
        bound_offer(b, 1, best, "min cut from root %d to rank %d: %lld lanes%s", root, at,
                    (long long)best, ntries < P ? " (sampled targets)" : "");
    cut_free(&c);
    return CS_OK;
}

/* scatter from root: max over S without root of |S| / cap(S), by Dinkelbach. */
static int scatter_cuts(const cs_topology *t, int root, rpc_bound *b, cs_error *err)
{
    int P = t->ranks;
    cut_net c;
    int rc = cut_build(t, &c, err);
    if (rc)
        return rc;
    unsigned char *in_s = malloc((size_t)P);
    if (!in_s) {
        cut_free(&c);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    int64_t p = c.total_lanes + 1, q = 1;
    for (int iter = 0; iter < 64; iter++) {
        cut_reset(&c, q);
        c.g.cap[c.src_edge[root]] = FLOW_INF;
        for (int r = 0; r < P; r++)
            if (r != root)
                c.g.cap[c.sink_edge[r]] = p;
        int64_t cut = flow_net_maxflow(&c.g, c.s, c.t);
        int size = 0;
        for (int r = 0; r < P; r++) {
            in_s[r] = flow_net_sink_side(&c.g, r);
            size += in_s[r];
        }
        int64_t capq = cut - p * (int64_t)(P - 1 - size);   /* q * cap(S) */
        int64_t f = capq - p * size;
        if (f >= 0 || size == 0)
            break;
        p = capq / q;
        q = size;
        char d[96];
        describe_set(in_s, P, d, sizeof d);
        b->num = b->den = 0;
        bound_offer(b, q, p, "min cut: %lld chunks per chunk must enter S = %s (root %d outside) "
                             "over %lld lanes", (long long)q, d, root, (long long)p);
    }
    free(in_s);
    cut_free(&c);
    return CS_OK;
}

/* ---- per-rank fallback for huge topologies ---------------------------------------- */

static void per_rank_bounds(const cs_topology *t, const cs_collective *c, rpc_bound *b)
{
    int P = t->ranks;
    for (int v = 0; v < P; v++) {
        int in = topology_ingress_lanes(t, v), out = topology_egress_lanes(t, v);
        switch (c->kind) {
        case CS_COLL_ALLGATHER:
            bound_offer(b, P - 1, in, "per-rank cut: rank %d receives %d chunks per chunk over "
                        "%d lanes (cut search skipped above %d ranks)", v, P - 1, in,
                        BOUNDS_FALLBACK_RANKS);
            bound_offer(b, 1, out, "per-rank cut: rank %d sends its chunks over %d lanes", v,
                        out);
            break;
        case CS_COLL_ALLTOALL:
            bound_offer(b, P - 1, in, "per-rank cut: rank %d receives %d chunks per chunk over "
                        "%d lanes (cut search skipped above %d ranks)", v, P - 1, in,
                        BOUNDS_FALLBACK_RANKS);
            bound_offer(b, P - 1, out, "per-rank cut: rank %d sends %d chunks per chunk over "
                        "%d lanes", v, P - 1, out);
            break;
        case CS_COLL_BROADCAST:
            if (v != c->root)
                bound_offer(b, 1, in, "per-rank cut: rank %d receives over %d lanes", v, in);
            else
                bound_offer(b, 1, out, "per-rank cut: root %d sends over %d lanes", v, out);
            break;
        case CS_COLL_SCATTER:
            if (v != c->root)
                bound_offer(b, 1, in, "per-rank cut: rank %d receives over %d lanes", v, in);
            else
                bound_offer(b, P - 1, out, "per-rank cut: root %d sends %d chunks per chunk over "
                            "%d lanes", v, P - 1, out);
            break;
        case CS_COLL_GATHER:
            if (v != c->root)
                bound_offer(b, 1, out, "per-rank cut: rank %d sends over %d lanes", v, out);
            else
                bound_offer(b, P - 1, in, "per-rank cut: root %d receives %d chunks per chunk "
                            "over %d lanes", v, P - 1, in);
            break;
        default:
            break;
        }
    }
}

/* ---- steps ----------------------------------------------------------------------------- */

/* Max over targets of dist(src, .) (forward) or dist(., src) (backward);
 * with hops (topology_hops_new) switches are walked as one hop, not as
 * their derived links: the same distances. */
static int eccentricity(const cs_topology *t, int src, bool backward, int *dist, int *queue,
                        cs_hops *hops)
{
    if (hops)
        return topology_hops_from(hops, src, backward, dist);
    for (int r = 0; r < t->ranks; r++)
        dist[r] = -1;
    int head = 0, tail = 0, ecc = 0;
    dist[src] = 0;
    queue[tail++] = src;
    while (head < tail) {
        int u = queue[head++];
        int b = backward ? t->in_begin[u] : t->out_begin[u];
        int e = backward ? t->in_begin[u + 1] : t->out_begin[u + 1];
        for (int i = b; i < e; i++) {
            int v = backward ? t->links[t->in_links[i]].src : t->links[i].dst;
            if (dist[v] < 0) {
                dist[v] = dist[u] + 1;
                if (dist[v] > ecc)
                    ecc = dist[v];
                queue[tail++] = v;
            }
        }
    }
    return ecc;
}

/* The diameter, or for huge topologies (P * (P + links) > 2e8) a double-sweep
 * lower bound on it (exact on meshes and tori). */
static int diameter_bound(const cs_topology *t, int *dist, int *queue, cs_hops *hops)
{
    int best = 0;
    /* the choice stays on the links' count (results as before); the hop
     * walk only makes each BFS cheaper */
    if ((long)t->ranks * ((long)t->ranks + t->nlinks) <= BOUNDS_DIAMETER_WORK) {
        for (int s = 0; s < t->ranks; s++) {
            int e = eccentricity(t, s, false, dist, queue, hops);
            if (e > best)
                best = e;
        }
        return best;
    }
    int s = 0;
    for (int sweep = 0; sweep < 4; sweep++) {
        int e = eccentricity(t, s, false, dist, queue, hops);
        if (e > best)
            best = e;
        int far = s;
        for (int r = 0; r < t->ranks; r++)
            if (dist[r] > dist[far])
                far = r;
        s = far;
    }
    return best;
}

static int custom_steps(const cs_topology *t, const cs_collective *c, int *dist, int *queue)
{
    int P = t->ranks, best = 0;
    long per_bfs = (long)P + t->nlinks, spent = 0;
    for (long g = 0; g < c->custom_global_chunks && spent < CUSTOM_STEPS_BUDGET; g++) {
        /* multi-source BFS from the ranks holding chunk g */
        int head = 0, tail = 0;
        for (int r = 0; r < P; r++) {
            dist[r] = -1;
            if (collective_pre(c, P, 1, g, r)) {
                dist[r] = 0;
                queue[tail++] = r;
            }
        }
        while (head < tail) {
            int u = queue[head++];
            for (int i = t->out_begin[u]; i < t->out_begin[u + 1]; i++) {
                int v = t->links[i].dst;
                if (dist[v] < 0) {
                    dist[v] = dist[u] + 1;
                    queue[tail++] = v;
                }
            }
        }
        for (int r = 0; r < P; r++)
            if (collective_post(c, P, 1, g, r) && dist[r] > best)
                best = dist[r];
        spent += per_bfs;
    }
    return best;
}

static void custom_rank_cuts(const cs_topology *t, const cs_collective *c, rpc_bound *b)
{
    int P = t->ranks;
    long *need_in = calloc((size_t)P, sizeof(long)), *need_out = calloc((size_t)P, sizeof(long));
    if (!need_in || !need_out) {
        free(need_in);
        free(need_out);
        return;
    }
    for (long g = 0; g < c->custom_global_chunks; g++) {
        int src = collective_source(c, P, 1, g);
        bool leaves = false;
        for (int r = 0; r < P; r++)
            if (collective_post(c, P, 1, g, r) && !collective_pre(c, P, 1, g, r)) {
                need_in[r]++;
                leaves = true;
            }
        if (src >= 0 && leaves)
            need_out[src]++;
    }
    for (int r = 0; r < P; r++) {
        if (need_in[r] > 0)
            bound_offer(b, need_in[r], topology_ingress_lanes(t, r),
                        "rank %d must receive %ld chunks over %d lanes", r, need_in[r],
                        topology_ingress_lanes(t, r));
        if (need_out[r] > 0)
            bound_offer(b, need_out[r], topology_egress_lanes(t, r),
                        "rank %d alone holds %ld needed chunks, sent over %d lanes", r,
                        need_out[r], topology_egress_lanes(t, r));
    }
    free(need_in);
    free(need_out);
}

/* ---- the entry point -------------------------------------------------------------------- */

/* Bounds of a non-combining kind (or allgather-like) on topology t. */
static int direct_bounds(const cs_topology *t, const cs_collective *c, int *steps,
                         rpc_bound *b, cs_error *err)
{
    int P = t->ranks;
    int *dist = malloc(sizeof(int) * (size_t)P), *queue = malloc(sizeof(int) * (size_t)P);
    if (!dist || !queue) {
        free(dist);
        free(queue);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    cs_hops *hops = topology_hops_new(t);   /* NULL: walk the links */
    switch (c->kind) {
    case CS_COLL_ALLGATHER:
    case CS_COLL_ALLTOALL:
        *steps = diameter_bound(t, dist, queue, hops);
        break;
    case CS_COLL_BROADCAST:
    case CS_COLL_SCATTER:
        *steps = eccentricity(t, c->root, false, dist, queue, hops);
        break;
    case CS_COLL_GATHER:
        *steps = eccentricity(t, c->root, true, dist, queue, hops);
        break;
    case CS_COLL_CUSTOM:
        *steps = custom_steps(t, c, dist, queue);
        break;
    default:
        *steps = 0;
    }
    topology_hops_free(hops);
    free(dist);
    free(queue);
    if (P < 2)
        return CS_OK;
    bool exact = P <= BOUNDS_FALLBACK_RANKS;   /* max-flow methods at all */
    int rc = CS_OK;
    switch (c->kind) {
    case CS_COLL_ALLGATHER:
        rc = exact ? allgather_cuts(t, b, NULL, err) : CS_OK;
        break;
    case CS_COLL_ALLTOALL:
        if (exact) {
            rpc_bound ag = { 0 };
            rc = allgather_cuts(t, &ag, b, err);
        }
        break;
    case CS_COLL_BROADCAST:
        rc = exact ? broadcast_cut(t, c->root, b, err) : CS_OK;
        break;
    case CS_COLL_SCATTER:
        rc = exact ? scatter_cuts(t, c->root, b, err) : CS_OK;
        break;
    case CS_COLL_GATHER:
        if (exact) {
            cs_topology *rev;
            rc = topology_reverse(t, &rev, err);
            if (rc == CS_OK) {
                rc = scatter_cuts(rev, c->root, b, err);
                topology_free(rev);
            }
        }
        break;
    case CS_COLL_CUSTOM:
        custom_rank_cuts(t, c, b);
        break;
    default:
        break;
    }
    if (rc == CS_OK && !exact)
        per_rank_bounds(t, c, b);
    return rc;
}

static void fill(cs_bounds *out, int steps, const rpc_bound *b, const char *prefix)
{
    out->steps = steps;
    out->rpc_num = b->den > 0 ? b->num : 0;
    out->rpc_den = b->den > 0 ? b->den : 1;
    out->rounds_per_chunk = (double)out->rpc_num / (double)out->rpc_den;
    const char *why = b->den > 0 ? b->why : "no cut (single rank)";
    size_t n = strlen(prefix), cap = sizeof out->bandwidth_cut - 1;
    if (n > cap)
        n = cap;
    memcpy(out->bandwidth_cut, prefix, n);
    size_t m = strlen(why);
    if (m > cap - n)
        m = cap - n;
    memcpy(out->bandwidth_cut + n, why, m);
    out->bandwidth_cut[n + m] = '\0';
}

int collective_bounds(const cs_topology *t, const cs_collective *c, cs_bounds *out,
                      cs_error *err)
{
    memset(out, 0, sizeof *out);
    out->rpc_den = 1;
    if (!t || !t->finalized || !c)
        return cs_error_set(err, CS_EINVAL, "", "bounds need a finalized topology and a collective");
    if (collective_kind_is_rooted(c->kind) && (c->root < 0 || c->root >= t->ranks))
        return cs_error_set(err, CS_EINVAL, "collective.root", "root %d out of range 0..%d",
                            c->root, t->ranks - 1);
    if (c->kind == CS_COLL_CUSTOM && (!c->custom_bits || c->custom_ranks != t->ranks))
        return cs_error_set(err, CS_EINVAL, "collective",
                            "call collective_validate for %d ranks first", t->ranks);
    int rc, steps = 0;
    rpc_bound b = { 0 };
    if (!collective_kind_is_combining(c->kind)) {
        rc = direct_bounds(t, c, &steps, &b, err);
        if (rc == CS_OK)
            fill(out, steps, &b, "");
        return rc;
    }
    cs_topology *rev;
    if ((rc = topology_reverse(t, &rev, err)))
        return rc;
    cs_collective dual;
    if (c->kind == CS_COLL_ALLREDUCE) {
        /* RS = allgather on the reversed topology; AG on t. */
        int s_rs = 0, s_ag = 0;
        rpc_bound rs = { 0 }, ag = { 0 };
        collective_init(&dual, CS_COLL_ALLGATHER, -1);
        rc = direct_bounds(rev, &dual, &s_rs, &rs, err);
        if (rc == CS_OK)
            rc = direct_bounds(t, &dual, &s_ag, &ag, err);
        if (rc == CS_OK) {
            /* (rs.num/rs.den + ag.num/ag.den) / P */
            int64_t P = t->ranks;
            rpc_bound sum = { 0 };
            if (rs.den > 0 && ag.den > 0)
                bound_offer(&sum, rs.num * ag.den + ag.num * rs.den, rs.den * ag.den * P,
                            "reducescatter (%lld/%lld) + allgather (%lld/%lld) over %lld ranks; "
                            "AG %s",
                            (long long)rs.num, (long long)rs.den, (long long)ag.num,
                            (long long)ag.den, (long long)P, ag.why);
            fill(out, s_rs + s_ag, &sum, "");
        }
    } else {
        rc = collective_dual(c, &dual, err);
        if (rc == CS_OK)
            rc = direct_bounds(rev, &dual, &steps, &b, err);
        if (rc == CS_OK)
            fill(out, steps, &b, "dual on the reversed topology: ");
    }
    topology_free(rev);
    return rc;
}
