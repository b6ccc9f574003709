/*
 * codegen_summary.c - the one pass over all sends that code generation
 * needs before it can lower any rank (see codegen_plan.h): links, channel
 * counts, and the decisions every rank must share (channels per lane,
 * merging across steps, nchannels), checked against a runtime's limits.
 *
 * Memory is O(ranks + links x channels) when the sends come in canonical
 * order per link (what SMT, TACOS and the baselines produce); otherwise a
 * 4-byte index of the sends is sorted once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen_channels.h"
#include "codegen_plan.h"

/* ---- dealing a base channel's messages over spread channels ---------------- */

int cg_unit_spread(long m, int spread)
{
    if (spread <= 1 || m <= 1)
        return 1;
    return m < spread ? (int)m : spread;
}

int cg_deal(long ord, long m, int spread, bool block)
{
    spread = cg_unit_spread(m, spread);
    if (spread <= 1)
        return 0;
    if (!block)
        return (int)(ord % spread);
    /* contiguous blocks: message ord goes to floor(ord * spread / m) */
    return (int)((ord * (long)spread) / (m > 0 ? m : 1));
}

long cg_deal_count(long m, int spread, bool block, int k)
{
    spread = cg_unit_spread(m, spread);
    if (spread <= 1)
        return k == 0 ? m : 0;
    if (k < 0 || k >= spread)
        return 0;
    if (!block)
        return k < m ? (m - k + spread - 1) / spread : 0;
    /* ord in [ceil(k m / spread), ceil((k + 1) m / spread)) */
    long lo = (k * m + spread - 1) / spread, hi = ((k + 1) * m + spread - 1) / spread;
    return hi - lo;
}

/* ---- building --------------------------------------------------------------- */

void codegen_summary_free(cg_summary *s)
{
    if (!s)
        return;
    free(s->links);
    free(s->base_count);
    free(s->base_units[0]);
    free(s->base_units[1]);
    free(s->rank_link_begin);
    free(s->rank_links);
    free(s->incident);
    cg_hmap_free(&s->link_map);
    free(s);
}

static uint64_t link_key(int src, int dst)
{
    return ((uint64_t)(uint32_t)src << 32) | (uint32_t)dst;
}

int cg_summary_link(const cg_summary *s, int src, int dst)
{
    return (int)cg_hmap_get(&s->link_map, link_key(src, dst));
}

typedef struct scan {
    cg_summary *s;
    const cs_algorithm *a;
    const cs_topology *t;
    cg_lane_state *lanes;     /* per link */
    int nlanes, caplinks;
} scan;

static long link_of(scan *sc, int src, int dst)
{
    cg_summary *s = sc->s;
    long l = cg_hmap_get(&sc->s->link_map, link_key(src, dst));
    if (l >= 0)
        return l;
    if (s->nlinks == sc->caplinks) {
        int cap = sc->caplinks ? sc->caplinks * 2 : 256;
        cg_link *nl = realloc(s->links, (size_t)cap * sizeof *nl);
        if (!nl)
            return -1;
        s->links = nl;
        cg_lane_state *ns = realloc(sc->lanes, (size_t)cap * sizeof *ns);
        if (!ns)
            return -1;
        sc->lanes = ns;
        sc->caplinks = cap;
    }
    l = s->nlinks;
    int lanes = cg_link_lanes(sc->t, src, dst);
    s->links[l] = (cg_link){src, dst, lanes, 0, 0, 0, 0};
    cg_lane_init(&sc->lanes[l], s->timed, lanes, &s->rule);
    sc->nlanes++;
    if (cg_hmap_put(&sc->s->link_map, link_key(src, dst), l) != CS_OK)
        return -1;
    s->nlinks++;
    return l;
}

static int feed(scan *sc, long l, long i)
{
    const cs_algorithm *a = sc->a;
    double rt, wt;
    cg_send_times(a, i, sc->s->timed, &rt, &wt);
    int base, nu;
    long minor;
    return cg_lane_next(&sc->lanes[l], algorithm_send_step(a, i), algorithm_send_chunk(a, i), rt,
                        wt, &base, &minor, &nu);
}

/* Canonical order per link for the index sort (qsort_r: the algorithm is the
 * context, no global state): link, then step and chunk (untimed) or start
 * time (timed), then send index. */
static int cmp_link(const cs_algorithm *a, long i, long j)
{
    int si = algorithm_send_src(a, i), sj = algorithm_send_src(a, j);
    if (si != sj)
        return si < sj ? -1 : 1;
    int di = algorithm_send_dst(a, i), dj = algorithm_send_dst(a, j);
    return (di > dj) - (di < dj);
}

static int cmp_canonical(const void *x, const void *y, void *ctx)
{
    const cs_algorithm *a = ctx;
    long i = *(const uint32_t *)x, j = *(const uint32_t *)y;
    int c = cmp_link(a, i, j);
    if (c)
        return c;
    int ti = algorithm_send_step(a, i), tj = algorithm_send_step(a, j);
    if (ti != tj)
        return ti < tj ? -1 : 1;
    long ci = algorithm_send_chunk(a, i), cj = algorithm_send_chunk(a, j);
    if (ci != cj)
        return ci < cj ? -1 : 1;
    return i < j ? -1 : (i > j);
}

static int cmp_canonical_timed(const void *x, const void *y, void *ctx)
{
    const cs_algorithm *a = ctx;
    long i = *(const uint32_t *)x, j = *(const uint32_t *)y;
    int c = cmp_link(a, i, j);
    if (c)
        return c;
    double ti = algorithm_send_start_us(a, i), tj = algorithm_send_start_us(a, j);
    if (ti != tj)
        return ti < tj ? -1 : 1;
    return i < j ? -1 : (i > j);
}

/* The sends are not in canonical order: sort an index and deal again. */
static int deal_sorted(scan *sc, cs_error *err)
{
    cg_summary *s = sc->s;
    long n = s->nsends;
    if (n > (long)UINT32_MAX)
        return cs_error_set(err, CS_ELIMIT, "sends", "%ld sends is too many to lower", n);
    uint32_t *idx = malloc((size_t)(n ? n : 1) * sizeof *idx);
    if (!idx)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory sorting the sends");
    for (long i = 0; i < n; i++)
        idx[i] = (uint32_t)i;
    qsort_r(idx, (size_t)n, sizeof *idx, s->timed ? cmp_canonical_timed : cmp_canonical,
            (void *)sc->a);
    for (int l = 0; l < s->nlinks; l++) {
        cg_lane_free(&sc->lanes[l]);
        cg_lane_init(&sc->lanes[l], s->timed, s->links[l].lanes, &s->rule);
    }
    int rc = CS_OK;
    for (long k = 0; k < n && rc == CS_OK; k++) {
        long i = idx[k];
        long l = cg_hmap_get(&sc->s->link_map, link_key(algorithm_send_src(sc->a, i),
                                                algorithm_send_dst(sc->a, i)));
        rc = feed(sc, l, i);
    }
    free(idx);
    if (rc != CS_OK)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory dealing channels");
    return CS_OK;
}

static int cmp_link_by_peer(const void *x, const void *y, void *ctx)
{
    const cg_summary *s = ((const void **)ctx)[0];
    int r = *(const int *)((const void **)ctx)[1];
    const cg_link *a = &s->links[*(const int *)x], *b = &s->links[*(const int *)y];
    int pa = a->src == r ? a->dst : a->src, pb = b->src == r ? b->dst : b->src;
    if (pa != pb)
        return pa < pb ? -1 : 1;
    return (a->src != r) - (b->src != r); /* outgoing first */
}

static int build_adjacency(cg_summary *s)
{
    s->rank_link_begin = calloc((size_t)s->ranks + 1, sizeof(long));
    s->rank_links = malloc((size_t)(2 * s->nlinks + 1) * sizeof(int));
    long *fill = malloc((size_t)s->ranks * sizeof(long));
    if (!s->rank_link_begin || !s->rank_links || !fill) {
        free(fill);
        return CS_ENOMEM;
    }
    for (int l = 0; l < s->nlinks; l++) {
        s->rank_link_begin[s->links[l].src + 1]++;
        s->rank_link_begin[s->links[l].dst + 1]++;
    }
    for (int r = 0; r < s->ranks; r++)
        s->rank_link_begin[r + 1] += s->rank_link_begin[r];
    for (int r = 0; r < s->ranks; r++)
        fill[r] = s->rank_link_begin[r];
    for (int l = 0; l < s->nlinks; l++) {
        s->rank_links[fill[s->links[l].src]++] = l;
        s->rank_links[fill[s->links[l].dst]++] = l;
    }
    free(fill);
    for (int r = 0; r < s->ranks; r++) {
        const void *ctx[2] = {s, &r};
        long b = s->rank_link_begin[r];
        qsort_r(s->rank_links + b, (size_t)(s->rank_link_begin[r + 1] - b), sizeof(int),
                cmp_link_by_peer, ctx);
    }
    return CS_OK;
}

/* ---- peer groups ------------------------------------------------------------- */

/* Deals the peer pairs into groups of at most lim->max_tb_per_channel peers
 * per rank (cg_summary, ngroups), greedily in link order, the two links of
 * a pair in one group (one thread block per peer and channel carries both
 * directions).  A pair goes to the first group where both ranks have room:
 * a rank with P peers fills at most (P - 1) / cap groups before it, so at
 * most (Pu - 1) / cap + (Pv - 1) / cap + 1 groups are ever needed. */
static int assign_groups(cg_summary *s, const cg_limits *lim)
{
    s->ngroups = 1;
    for (int l = 0; l < s->nlinks; l++)
        s->links[l].group = 0;
    if (!lim || lim->max_tb_per_channel <= 0)
        return CS_OK;
    int cap = lim->max_tb_per_channel, maxpeers = 0;
    for (int r = 0; r < s->ranks; r++) {
        int peers = 0, last = -1;
        for (long k = s->rank_link_begin[r]; k < s->rank_link_begin[r + 1]; k++) {
            const cg_link *L = &s->links[s->rank_links[k]];
            int q = L->src == r ? L->dst : L->src;
            peers += q != last;
            last = q;
        }
        if (peers > maxpeers)
            maxpeers = peers;
    }
    if (maxpeers <= cap)
        return CS_OK;
    int gmax = 2 * ((maxpeers - 1) / cap) + 1;
    int *deg = calloc((size_t)s->ranks * (size_t)gmax, sizeof(int));
    if (!deg)
        return CS_ENOMEM;
    for (int l = 0; l < s->nlinks; l++) {
        cg_link *L = &s->links[l];
        int rev = cg_summary_link(s, L->dst, L->src);
        if (rev >= 0 && rev < l) {   /* the pair already has its group */
            L->group = s->links[rev].group;
            continue;
        }
        int g = 0;
        while (g < gmax - 1 && (deg[(size_t)L->src * gmax + g] >= cap ||
                                deg[(size_t)L->dst * gmax + g] >= cap))
            g++;
        L->group = g;
        deg[(size_t)L->src * gmax + g]++;
        deg[(size_t)L->dst * gmax + g]++;
        if (g + 1 > s->ngroups)
            s->ngroups = g + 1;
    }
    free(deg);
    return CS_OK;
}

/* ---- choosing channels per lane ---------------------------------------------- */

typedef struct evaluation {
    bool feasible;       /* thread blocks, channels, blocks per channel fit */
    long max_msgs;       /* units (estimated steps) of the fullest thread block */
    int max_rank;        /* its rank */
    long max_elements;   /* estimated XML elements of the fullest rank (one <gpu>) */
    int nchannels;
    char bad[400];       /* the first structural violation */
} evaluation;

static long link_sub_count(const cg_summary *s, int l, int ch, int spread, bool block,
                           bool merge)
{
    if (l < 0)
        return 0;
    const cg_link *L = &s->links[l];
    int base = ch / spread;
    if (base >= L->nbase)
        return 0;
    return cg_deal_count(s->base_units[merge][L->base_off + base], spread, block, ch % spread);
}

/* Thread blocks, channels and the elements of every rank when units of the
 * kind `merge` selects are dealt over `spread` channels per base channel.
 * Elements count one step per unit (nops come on top: the caller keeps
 * room for them). */
static int evaluate(const cg_summary *s, const cg_limits *lim, int spread, bool block,
                    bool merge, evaluation *ev)
{
    memset(ev, 0, sizeof *ev);
    ev->feasible = true;
    int maxbase = 1;
    for (int l = 0; l < s->nlinks; l++)
        if (s->links[l].nbase > maxbase)
            maxbase = s->links[l].nbase;
    int width = maxbase * spread, nch = s->ngroups * width;
    int *sends = calloc((size_t)nch, sizeof(int)), *recvs = calloc((size_t)nch, sizeof(int));
    if (!sends || !recvs) {
        free(sends);
        free(recvs);
        return CS_ENOMEM;
    }
    int maxch = -1;
    for (int r = 0; r < s->ranks; r++) {
        memset(sends, 0, (size_t)nch * sizeof(int));
        memset(recvs, 0, (size_t)nch * sizeof(int));
        long tbs = 1; /* the block for final copies, if the rank has any */
        long units = 0;
        long b = s->rank_link_begin[r], e = s->rank_link_begin[r + 1];
        for (long k = b; k < e;) {
            /* the links to and from one peer */
            int out = -1, in = -1;
            const cg_link *L = &s->links[s->rank_links[k]];
            int peer = L->src == r ? L->dst : L->src;
            while (k < e) {
                const cg_link *M = &s->links[s->rank_links[k]];
                if ((M->src == r ? M->dst : M->src) != peer)
                    break;
                if (M->src == r)
                    out = s->rank_links[k];
                else
                    in = s->rank_links[k];
                k++;
            }
            int nb = 0;
            if (out >= 0)
                nb = s->links[out].nbase;
            if (in >= 0 && s->links[in].nbase > nb)
                nb = s->links[in].nbase;
            int g0 = s->links[out >= 0 ? out : in].group;
            for (int ch = 0; ch < nb * spread; ch++) {
                long co = link_sub_count(s, out, ch, spread, block, merge);
                long ci = link_sub_count(s, in, ch, spread, block, merge);
                if (co + ci == 0)
                    continue;
                int real = g0 * width + ch;   /* the pair's two links share a group */
                tbs++;
                units += co + ci;
                sends[real] += co > 0;
                recvs[real] += ci > 0;
                if (co + ci > ev->max_msgs) {
                    ev->max_msgs = co + ci;
                    ev->max_rank = r;
                }
                if (real > maxch)
                    maxch = real;
            }
        }
        long elements = 2 + tbs + units;
        if (elements > ev->max_elements)
            ev->max_elements = elements;
        if (!lim || !ev->feasible)
            continue;
        if (tbs > lim->max_tb) {
            ev->feasible = false;
            snprintf(ev->bad, sizeof ev->bad, "rank %d needs %ld thread blocks (one per peer and "
                     "channel, with %d channel(s) per lane, plus one for local copies); %s "
                     "allows at most %d (ids 0..%d)", r, tbs, spread, lim->owner, lim->max_tb,
                     lim->max_tb - 1);
        }
        for (int ch = 0; ch < nch && ev->feasible && lim->max_tb_per_channel; ch++)
            if (sends[ch] > lim->max_tb_per_channel || recvs[ch] > lim->max_tb_per_channel) {
                ev->feasible = false;
                snprintf(ev->bad, sizeof ev->bad, "rank %d has %d sending and %d receiving "
                         "thread blocks on channel %d; %s allows %d of each per channel", r,
                         sends[ch], recvs[ch], ch, lim->owner, lim->max_tb_per_channel);
            }
    }
    ev->nchannels = maxch + 1 > 0 ? maxch + 1 : 1;
    if (lim && ev->feasible && ev->nchannels > lim->max_channels) {
        ev->feasible = false;
        snprintf(ev->bad, sizeof ev->bad, "the algorithm needs %d channels (%d per lane); %s "
                 "allows chan < %d", ev->nchannels, spread, lim->owner, lim->max_channels);
    }
    free(sends);
    free(recvs);
    return CS_OK;
}

/* Merging across steps: deal in contiguous blocks (neighbouring chunks
 * stay on one channel and can move as one step) unless that spreads the
 * channels past the runtime's limits; round-robin dealing still merges what
 * happens to be contiguous. */
static int set_merging(cg_summary *s, const cg_limits *lim, evaluation *ev, cs_error *err)
{
    s->merge_steps = true;
    s->block_deal = true;
    if (evaluate(s, lim, s->spread, true, true, ev) != CS_OK)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    if (!ev->feasible) {
        s->block_deal = false;
        if (evaluate(s, lim, s->spread, false, true, ev) != CS_OK)
            return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    return CS_OK;
}

/* The smallest spread (1, 2, 4, ...) whose fullest thread block leaves room
 * for the waits (nops) of a few steps; failing that, the largest spread the
 * runtime's channels and blocks allow, with merging across steps.  Merging
 * also when a rank's elements would not fit without it. */
static int choose_spread(cg_summary *s, const cg_limits *lim, cs_error *err)
{
    evaluation ev, first;
    s->spread = 1;
    s->merge_steps = s->block_deal = false;
    if (!lim) {
        if (evaluate(s, NULL, 1, false, false, &ev) != CS_OK)
            return cs_error_set(err, CS_ENOMEM, "", "out of memory");
        s->nchannels = ev.nchannels;
        return CS_OK;
    }
    long steps_room = lim->max_steps - lim->max_steps / 8;
    long elem_room = lim->max_elements ? lim->max_elements - 1 - lim->max_elements / 16 : 0;
    int best_feasible = 0;
    bool fits = false;
    memset(&first, 0, sizeof first);
    int start = lim->min_spread > 1 ? lim->min_spread : 1;
    for (int spread = start; spread <= lim->max_channels && !fits; spread *= 2) {
        if (evaluate(s, lim, spread, false, false, &ev) != CS_OK)
            return cs_error_set(err, CS_ENOMEM, "", "out of memory");
        if (spread == start)
            first = ev;
        if (!ev.feasible)
            break; /* more channels only adds blocks */
        best_feasible = spread;
        fits = ev.max_msgs <= steps_room;
    }
    if (!best_feasible)
        return cs_error_set(err, CS_ELIMIT, "runtime", "%s%s", first.bad, CG_HIERARCHICAL_HINT);
    /* the smallest spread that fits, else as many channels as allowed */
    s->spread = best_feasible;
    if (fits && elem_room && ev.max_elements > elem_room)
        fits = false;
    if (!fits) { /* else ev is the evaluation of this spread */
        int rc = set_merging(s, lim, &ev, err);
        if (rc != CS_OK)
            return rc;
    }
    s->nchannels = ev.nchannels;
    s->fullest_rank = ev.max_rank;
    return CS_OK;
}

/* Schedules through a copy-capable switch's node (mcf on topologies with
 * switches[].copy) hold a chunk in the switch and copy it to several ports:
 * in-network multicast, which no MSCCL primitive (send, recv, copy, reduce
 * between GPU buffers) can express, and a lowering to GPU sends would load
 * the source's port once per copy, not once, so it would not be the schedule
 * that was verified and timed.  Refused, naming the switch. */
/* switch_nodes only allows sends through nodes: an algorithm that declares
 * nodes but sends only between GPUs is a plain schedule, and has code. */
static bool names_a_switch_node(const cs_algorithm *a)
{
    for (long i = 0; i < a->nsends; i++)
        if (algorithm_send_src(a, i) >= a->ranks || algorithm_send_dst(a, i) >= a->ranks)
            return true;
    return false;
}

static int refuse_switch_nodes(const cs_algorithm *a, const cs_topology *t, cs_error *err)
{
    for (long i = 0; i < a->nsends; i++) {
        int src = algorithm_send_src(a, i), dst = algorithm_send_dst(a, i);
        if (src < a->ranks && dst < a->ranks)
            continue;
        int node = src >= a->ranks ? src : dst;
        int sw = t ? topology_switch_of_node(t, node) : -1;
        char name[96];
        if (sw >= 0)
            snprintf(name, sizeof name, "copy-capable switch %s (node %d)", t->switches[sw].name,
                     node);
        else
            snprintf(name, sizeof name, "copy-capable switch node %d", node);
        return cs_error_set(err, CS_EUNSUPPORTED, "algorithm",
                            "send %ld (chunk %ld, %d->%d) goes through %s: MSCCL runtimes cannot "
                            "express in-switch multicast; synthesize with options.codegen "
                            "\"msccl-xml\" (CLI: --codegen msccl-xml), which uses copy-capable "
                            "switches as unicast, to generate code",
                            i, algorithm_send_chunk(a, i), src, dst, name);
    }
    return cs_error_set(err, CS_EUNSUPPORTED, "algorithm", "the algorithm names %d switch nodes: "
                        "MSCCL runtimes cannot express in-switch multicast", a->switch_nodes);
}

int codegen_summary_build(const cs_algorithm *a, const cs_topology *t, const cg_limits *lim,
                          cg_summary **out, cs_error *err)
{
    *out = NULL;
    if (!a)
        return cs_error_set(err, CS_EINVAL, "algorithm", "no algorithm");
    if (a->ranks < 1 || a->chunks < 1)
        return cs_error_set(err, CS_EINVAL, "ranks", "algorithm has %d ranks and %d chunks",
                            a->ranks, a->chunks);
    if (t && t->ranks != a->ranks)
        return cs_error_set(err, CS_EINVAL, "topology", "topology has %d ranks, algorithm %d",
                            t->ranks, a->ranks);
    if (a->switch_nodes > 0 && names_a_switch_node(a))
        return refuse_switch_nodes(a, t, err);
    long G = collective_global_chunks(&a->collective, a->ranks, a->chunks);
    if (G < 1 || G > (1L << 30) || (long)a->ranks * a->chunks > (1L << 30))
        return cs_error_set(err, CS_ELIMIT, "chunks", "%ld global chunks is too many to lower", G);
    cg_summary *s = calloc(1, sizeof *s);
    if (!s)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    s->kind = a->collective.kind;
    s->ranks = a->ranks;
    s->chunks = a->chunks;
    s->global_chunks = G;
    s->nsends = a->nsends;
    s->timed = a->nsends > 0 && algorithm_is_timed(a);
    s->ordered = true;
    s->rule = (cg_run_rule){a->collective.kind, a->ranks, a->chunks, lim ? lim->max_cnt : 0};
    scan sc = {.s = s, .a = a, .t = t};
    int rc = CS_OK;
    s->incident = calloc((size_t)a->ranks, sizeof(long));
    if (!s->incident)
        goto nomem;
    for (long i = 0; i < a->nsends; i++) {
        int src = algorithm_send_src(a, i), dst = algorithm_send_dst(a, i);
        long chunk = algorithm_send_chunk(a, i);
        if (src < 0 || src >= a->ranks || dst < 0 || dst >= a->ranks || src == dst ||
            chunk < 0 || chunk >= G) {
            rc = cs_error_set(err, CS_EINVAL, "sends", "send %ld is out of range "
                              "(chunk %ld, src %d, dst %d)", i, chunk, src, dst);
            goto fail;
        }
        long l = link_of(&sc, src, dst);
        if (l < 0)
            goto nomem;
        s->links[l].n++;
        s->incident[src]++;
        s->incident[dst]++;
        if (!s->ordered)
            continue;
        cg_lane_state *ls = &sc.lanes[l];
        double start = s->timed ? algorithm_send_start_us(a, i) : 0;
        if (!cg_lane_in_order(ls, algorithm_send_step(a, i), chunk, start))
            s->ordered = false;
        else if (feed(&sc, l, i) != CS_OK)
            goto nomem;
    }
    if (!s->ordered && (rc = deal_sorted(&sc, err)) != CS_OK)
        goto fail;
    long nbase_total = 0;
    for (int l = 0; l < s->nlinks; l++)
        nbase_total += sc.lanes[l].ncount;
    s->base_count = malloc((size_t)(nbase_total ? nbase_total : 1) * sizeof(long));
    s->base_units[0] = malloc((size_t)(nbase_total ? nbase_total : 1) * sizeof(long));
    s->base_units[1] = malloc((size_t)(nbase_total ? nbase_total : 1) * sizeof(long));
    if (!s->base_count || !s->base_units[0] || !s->base_units[1])
        goto nomem;
    nbase_total = 0;
    for (int l = 0; l < s->nlinks; l++) {
        s->links[l].nbase = sc.lanes[l].ncount;
        s->links[l].base_off = nbase_total;
        for (int c = 0; c < sc.lanes[l].ncount; c++) {
            s->base_units[0][nbase_total] = sc.lanes[l].units[0][c];
            s->base_units[1][nbase_total] = sc.lanes[l].units[1][c];
            s->base_count[nbase_total++] = sc.lanes[l].count[c];
        }
    }
    if (build_adjacency(s) != CS_OK || assign_groups(s, lim) != CS_OK)
        goto nomem;
    for (int l = 0; l < s->nlinks; l++)
        if (s->links[l].nbase > s->maxbase)
            s->maxbase = s->links[l].nbase;
    if (s->maxbase < 1)
        s->maxbase = 1;
    if ((rc = choose_spread(s, lim, err)) != CS_OK)
        goto fail;
    goto done;
nomem:
    rc = cs_error_set(err, CS_ENOMEM, "", "out of memory summarizing the sends");
fail:
    codegen_summary_free(s);
    s = NULL;
done:
    for (int l = 0; l < sc.nlanes; l++)
        cg_lane_free(&sc.lanes[l]);
    free(sc.lanes);
    *out = s;
    return rc;
}
