/*
 * tacos_engine.c - one seeded trial of TACOS' link-chunk matching over a
 * time-expanded network (TACOS paper, Algorithms 1 and 2).
 *
 * The paper's matching visits every unsatisfied (rank, chunk) postcondition in
 * every time span and backtracks to in-neighbours holding the chunk: with P
 * ranks and G chunks that is P*G work per span, so its synthesis time grows
 * roughly cubically.  This engine makes the same greedy decisions from the
 * link's side and only touches what changed:
 *
 *  - Within one span the matches into different destination ranks are
 *    independent (a link feeds one rank, and a rank's "already covered" set
 *    only concerns itself), so matching decomposes per destination: rank d
 *    offers each free in-link (cheapest first, equal costs in a random
 *    rotation) a chunk its source holds that d neither holds nor is already
 *    receiving.  That is the paper's maximal matching for rank d.
 *  - Candidate chunks come from an arrival log per rank: the chunks it holds,
 *    in arrival order.  Each link keeps a cursor into its source's log; a
 *    chunk the destination already covers is skipped for good (covering is
 *    permanent), so a link reads each entry of its source's log once over the
 *    whole run: the total work is about links x G, not spans x P x G.  The
 *    trial's randomness rotates equal-cost links (and can pick among the
 *    first `window` candidates); rarest-first trials choose, in each
 *    destination's last spans, the chunk its other in-neighbours hold least,
 *    and heterogeneous ones can keep slow links off chunks a cheaper route
 *    can bring (variants that tacos.c cycles through across trials).
 *  - Time is continuous.  A send over link l occupies one lane for
 *    alpha + chunk_bytes / bandwidth; completions are kept in buckets of equal
 *    end time (on homogeneous networks every span is one bucket).  Only ranks
 *    whose in-links freed a lane, or whose in-neighbours received something,
 *    are visited at the next event time ("dirty" ranks).
 *  - Per rank, a bitset of G bits says which chunks it holds or is receiving
 *    or does not need (so "wanted" is one bit test).  Logs are trimmed below
 *    the slowest out-link cursor, so they hold the real backlog only.
 *
 * Who starts with which chunk and who needs it (including relays for
 * gather, scatter, alltoall and custom) is set up in tacos_conditions.c.
 *
 * With spare threads, one event's destinations are matched in parallel
 * (contiguous rank ranges, merged in rank order; each rank's random choices
 * come from (seed, rank, event)), so results never depend on the thread count.
 */
#include "tacos_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define TACOS_MATCH_THREADS_MAX 16
/* Below this many ranks a span's matching is too short to split. */
#define TACOS_MATCH_MIN_RANKS 1024

/* ---- random numbers -------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void tacos_rng_seed(tacos_rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t tacos_rng_next(tacos_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint32_t tacos_rng_below(tacos_rng *r, uint32_t n)
{
    return (uint32_t)(((tacos_rng_next(r) >> 32) * (uint64_t)n) >> 32);
}

double tacos_link_cost(const cs_link *l, double chunk_bytes)
{
    return l->alpha_us + chunk_bytes / (l->gbps * 1e3);
}

/* ---- engine state ---------------------------------------------------------- */

/* engine state: see tacos_internal.h */

static void note_peak(engine *e)
{
    size_t now = e->static_bytes + e->log_bytes;
    if (now > e->peak_bytes)
        e->peak_bytes = now;
}

static void engine_free(engine *e)
{
    free(e->covered);
    free(e->holds);
    free(e->gcov);
    free(e->group_cost);
    free(e->holders);
    free(e->tracked);
    free(e->ready_need);
    free(e->flight);
    free(e->flight_begin);
    free(e->flight_head);
    free(e->in_src);
    free(e->window);
    free(e->nwindow);
    free(e->need);
    free(e->cost);
    free(e->in_sorted);
    free(e->group_end);
    free(e->busy);
    free(e->lanes);
    free(e->cursor);
    if (e->logs)
        for (int r = 0; r < e->P; r++)
            free(e->logs[r].buf);
    free(e->logs);
    free(e->set_begin);
    free(e->set_of);
    free(e->set_busy);
    free(e->dirty_bits);
    free(e->arrived);
    free(e->arrived_list);
    for (int i = 0; i < e->nbuckets; i++)
        free(e->buckets[i].items);
    free(e->buckets);
    for (int i = 0; i < e->nspare; i++)
        free(e->spare[i].items);
    free(e->spare);
}

/* Appends chunk c to rank r's arrival log, trimming entries every live out-link
 * has read before growing. */
int tacos_log_append(engine *e, int r, uint32_t c)
{
    arrival_log *lg = &e->logs[r];
    if (lg->len == lg->cap) {
        const cs_topology *t = e->t;
        int64_t mincur = lg->base + lg->len;
        for (int l = t->out_begin[r]; l < t->out_begin[r + 1]; l++)
            if (e->need[t->links[l].dst] > 0 && e->cursor[l] < mincur)
                mincur = e->cursor[l];
        int64_t shift = mincur - lg->base;
        if (shift > 0 && shift >= lg->cap / 4) {
            memmove(lg->buf, lg->buf + shift, (size_t)(lg->len - shift) * sizeof *lg->buf);
            lg->base += shift;
            lg->len -= shift;
        } else {
            int64_t ncap = lg->cap ? lg->cap * 2 : 16;
            uint32_t *nb = realloc(lg->buf, (size_t)ncap * sizeof *nb);
            if (!nb)
                return CS_ENOMEM;
            e->log_bytes += (size_t)(ncap - lg->cap) * sizeof *nb;
            note_peak(e);
            lg->buf = nb;
            lg->cap = ncap;
        }
    }
    lg->buf[lg->len++] = c;
    if (e->holds) {
        if (!e->tracked || e->tracked[r])
            bit_set(e->holds + (size_t)r * e->W, c);
        e->holders[c]++;
    }
    return CS_OK;
}

/* Lazy holdings: rank u's row becomes exact from now on.  On universal kinds
 * "covered" is held or arriving, so what u holds is its covered row minus
 * the chunks in flight on its in-links (the newest busy[m] sends of each). */
static void track_rank(engine *e, int u)
{
    if (e->tracked[u])
        return;
    const cs_topology *t = e->t;
    uint64_t *row = e->holds + (size_t)u * e->W;
    memcpy(row, e->covered + (size_t)u * e->W, (size_t)e->W * sizeof *row);
    for (int k = t->in_begin[u]; k < t->in_begin[u + 1]; k++) {
        int m = t->in_links[k];
        int b = e->flight_begin[m], lanes = e->flight_begin[m + 1] - b, h = e->flight_head[m];
        for (int i = 0; i < e->busy[m]; i++) {
            h = h == 0 ? lanes - 1 : h - 1;
            bit_clear(row, e->flight[b + h]);
        }
    }
    e->tracked[u] = 1;
}

/* Destination d is about to choose rarest first: its in-neighbours' rows must
 * be exact.  Called between events only (rows of other ranks are written). */
static void track_in_neighbours(engine *e, int d)
{
    const cs_topology *t = e->t;
    for (int k = t->in_begin[d]; k < t->in_begin[d + 1]; k++)
        track_rank(e, t->links[t->in_links[k]].src);
}

static inline void mark_dirty(engine *e, int r)
{
    if (e->need[r] > 0)
        e->dirty_bits[r >> 6] |= 1ULL << (r & 63);
}

/* The generator for one destination at one event: matching decisions depend
 * only on (seed, rank, event), never on which thread matched the rank. */
typedef struct local_rng { uint64_t x; } local_rng;

static inline uint32_t local_below(local_rng *r, uint32_t n)
{
    return (uint32_t)(((splitmix64(&r->x) >> 32) * (uint64_t)n) >> 32);
}

/* ---- events ---------------------------------------------------------------- */

static int bucket_push(engine *e, double time, int link, uint32_t chunk)
{
    /* the last send's bucket when its time is exactly this one: bucket times
     * are strictly descending (a bucket is only created with no other within
     * the tolerance, and only raised to a time below its predecessor's), so
     * the search below would find the same bucket */
    if (e->last_bucket < e->nbuckets && e->buckets[e->last_bucket].time == time) {
        bucket *b = &e->buckets[e->last_bucket];
        if (b->n < b->cap) {
            b->items[b->n++] = (inflight){link, chunk};
            return CS_OK;
        }
    }
    /* find a bucket with (nearly) the same time; buckets sorted descending */
    int lo = 0, hi = e->nbuckets;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (e->buckets[mid].time > time)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* candidates: lo (time <= ours) and lo-1 (time > ours) */
    double tol = 1e-12 * (fabs(time) > 1.0 ? fabs(time) : 1.0);
    int hit = -1;
    if (lo < e->nbuckets && time - e->buckets[lo].time <= tol)
        hit = lo;
    else if (lo > 0 && e->buckets[lo - 1].time - time <= tol)
        hit = lo - 1;
    if (hit < 0) {
        if (e->nbuckets == e->bucket_cap) {
            int ncap = e->bucket_cap ? e->bucket_cap * 2 : 8;
            bucket *nb = realloc(e->buckets, (size_t)ncap * sizeof *nb);
            if (!nb)
                return CS_ENOMEM;
            e->buckets = nb;
            e->bucket_cap = ncap;
        }
        memmove(&e->buckets[lo + 1], &e->buckets[lo],
                (size_t)(e->nbuckets - lo) * sizeof *e->buckets);
        bucket fresh = {0};
        if (e->nspare > 0)
            fresh = e->spare[--e->nspare];
        fresh.time = time;
        fresh.n = 0;
        e->buckets[lo] = fresh;
        e->nbuckets++;
        hit = lo;
    }
    e->last_bucket = hit;
    bucket *b = &e->buckets[hit];
    if (time > b->time)
        b->time = time; /* never deliver before the latest end in the bucket */
    if (b->n == b->cap) {
        long ncap = b->cap ? b->cap * 2 : 64;
        inflight *ni = realloc(b->items, (size_t)ncap * sizeof *ni);
        if (!ni)
            return CS_ENOMEM;
        e->static_bytes += (size_t)(ncap - b->cap) * sizeof *ni;
        note_peak(e);
        b->items = ni;
        b->cap = ncap;
    }
    b->items[b->n++] = (inflight){link, chunk};
    return CS_OK;
}

/* ---- preparation ----------------------------------------------------------- */

/* In-degrees are small: an insertion sort by (cost, index) needs no context
 * pointer (qsort would need global state). */
static void sort_in_links(int *idx, int n, const double *cost)
{
    for (int i = 1; i < n; i++) {
        int v = idx[i], j = i - 1;
        while (j >= 0 && (cost[idx[j]] > cost[v] || (cost[idx[j]] == cost[v] && idx[j] > v))) {
            idx[j + 1] = idx[j];
            j--;
        }
        idx[j + 1] = v;
    }
}

/* Group coverage for cheaper_supplier: per group, the chunks some member
 * covers, and the cost of the group's slowest own link when its own links
 * connect every member to every other (else +inf: the group test is off,
 * since a member's chunk may then reach d only from outside). */
static int init_group_cover(engine *e, cs_error *err)
{
    const cs_topology *t = e->t;
    int NG = t->ngroups;
    e->gcov = calloc((size_t)NG * e->W, sizeof *e->gcov);
    e->group_cost = malloc((size_t)NG * sizeof *e->group_cost);
    int *seen = calloc((size_t)e->P, sizeof *seen), *queue = malloc((size_t)e->P * sizeof *queue);
    if (!e->gcov || !e->group_cost || !seen || !queue) {
        free(seen);
        free(queue);
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory for group coverage");
    }
    e->static_bytes += (size_t)NG * (e->W * 8 + sizeof(double));
    int stamp = 0;
    for (int g = 0; g < NG; g++) {
        const cs_group *gr = &t->groups[g];
        double worst = 0.0;
        bool connected = gr->nranks > 0;
        /* every member reaches every other over the group's links: one
         * forward and one backward search from the first member */
        for (int dir = 0; dir < 2 && connected; dir++) {
            stamp++;
            int qh = 0, qt = 0, reached = 1;
            seen[gr->ranks[0]] = stamp;
            queue[qt++] = gr->ranks[0];
            while (qh < qt) {
                int v = queue[qh++];
                int lo = dir ? t->in_begin[v] : t->out_begin[v];
                int hi = dir ? t->in_begin[v + 1] : t->out_begin[v + 1];
                for (int k = lo; k < hi; k++) {
                    int l = dir ? t->in_links[k] : k;
                    int u = dir ? t->links[l].src : t->links[l].dst;
                    if (t->group_of[u] != g)
                        continue;
                    if (e->cost[l] > worst)
                        worst = e->cost[l];
                    if (seen[u] != stamp) {
                        seen[u] = stamp;
                        queue[qt++] = u;
                        reached++;
                    }
                }
            }
            connected = reached == gr->nranks;
        }
        e->group_cost[g] = connected ? worst : INFINITY;
        for (int i = 0; i < gr->nranks; i++) {
            const uint64_t *row = e->covered + (size_t)gr->ranks[i] * e->W;
            uint64_t *grow = e->gcov + (size_t)g * e->W;
            for (long w = 0; w < e->W; w++)
                grow[w] |= row[w];
        }
    }
    free(seen);
    free(queue);
    return CS_OK;
}

static int engine_init(engine *e, const tacos_problem *p, uint64_t seed, cs_error *err)
{
    memset(e, 0, sizeof *e);
    e->p = p;
    e->t = p->topo;
    const cs_topology *t = p->topo;
    e->P = t->ranks;
    e->L = t->nlinks;
    e->G = collective_global_chunks(p->coll, e->P, p->chunks);
    tacos_rng_seed(&e->rng, seed);
    {
        uint64_t x = seed ^ 0x5851f42d4c957f2dULL;
        e->seed_base = splitmix64(&x);
    }
    if (e->G <= 0 || e->G >= (long)UINT32_MAX)
        return cs_error_set(err, CS_ELIMIT, "chunks", "%ld global chunks: TACOS handles 1..%u",
                            e->G, UINT32_MAX - 1);
    e->W = (e->G + 63) / 64;
    e->universal = tacos_kind_is_universal(p->coll);
    double bitset_bytes = (double)e->P * (double)e->W * 8.0;
    if (bitset_bytes > 8.0 * 1024 * 1024 * 1024)
        return cs_error_set(err, CS_ELIMIT, "chunks",
                            "%d ranks x %ld chunks needs %.1f GiB of holdings: over the 8 GiB limit",
                            e->P, e->G, bitset_bytes / (1024.0 * 1024 * 1024));
    int P = e->P, L = e->L;
    e->covered = calloc((size_t)P * e->W, sizeof *e->covered);
    e->need = calloc((size_t)P, sizeof *e->need);
    size_t rarest_bytes = 0;
    if (p->rarest) {
        e->holds = calloc((size_t)P * e->W, sizeof *e->holds);
        e->holders = calloc((size_t)e->G, sizeof *e->holders);
        e->window = malloc((size_t)(L ? L : 1) * TACOS_RAREST_WINDOW * sizeof *e->window);
        e->nwindow = calloc((size_t)(L ? L : 1), 1);
        e->in_src = malloc((size_t)(L ? L : 1) * sizeof *e->in_src);
        if (!e->holds || !e->holders || !e->window || !e->nwindow || !e->in_src)
            return cs_error_set(err, CS_ENOMEM, NULL, "out of memory for holdings "
                                "(%d ranks x %ld chunks)", P, e->G);
        /* one bit per (rank, chunk): an eighth of a byte per send of an allgather */
        rarest_bytes = (size_t)P * e->W * 8 + (size_t)e->G * sizeof(int) +
                       (size_t)L * (TACOS_RAREST_WINDOW * sizeof(uint32_t) + 1 + sizeof(int));
        for (int k = 0; k < L; k++)
            e->in_src[k] = t->links[t->in_links[k]].src;
        /* a link carries at most min(lanes, G) chunks at once (each chunk goes
         * to a destination once): its ring's size */
        long slots = 0;
        for (int l = 0; l < L; l++)
            slots += t->links[l].lanes < e->G ? t->links[l].lanes : e->G;
        /* lazy on universal kinds, unless the rings would outgrow the rows
         * they save (huge lane counts): then every row is kept throughout */
        if (e->universal && slots <= (long)P * e->W * 2 + 4096 && slots < INT32_MAX) {
            e->tracked = calloc((size_t)P, 1);
            e->ready_need = malloc((size_t)P * sizeof *e->ready_need);
            e->flight_begin = malloc(((size_t)L + 1) * sizeof *e->flight_begin);
            e->flight_head = calloc((size_t)(L ? L : 1), sizeof *e->flight_head);
            e->flight = malloc((size_t)(slots ? slots : 1) * sizeof *e->flight);
            if (!e->tracked || !e->ready_need || !e->flight_begin || !e->flight_head || !e->flight)
                return cs_error_set(err, CS_ENOMEM, NULL, "out of memory for holdings "
                                    "(%d ranks, %ld link lanes)", P, slots);
            long at = 0;
            for (int l = 0; l < L; l++) {
                e->flight_begin[l] = (int)at;
                at += t->links[l].lanes < e->G ? t->links[l].lanes : e->G;
            }
            e->flight_begin[L] = (int)at;
            /* a destination may choose rarest first at the next event once its
             * need, less what one event can match into it, is in range */
            for (int r = 0; r < P; r++) {
                long lanes = 0;
                for (int k = t->in_begin[r]; k < t->in_begin[r + 1]; k++)
                    lanes += t->links[t->in_links[k]].lanes;
                e->ready_need[r] = (long)TACOS_RAREST_SPANS * (t->in_begin[r + 1] - t->in_begin[r]) +
                                   lanes;
            }
            rarest_bytes += (size_t)P * (1 + sizeof(long)) + (size_t)L * 2 * sizeof(int) +
                            (size_t)slots * sizeof(uint32_t);
        }
    }
    e->cost = malloc((size_t)L * sizeof *e->cost);
    e->in_sorted = malloc((size_t)(L ? L : 1) * sizeof *e->in_sorted);
    e->group_end = malloc((size_t)(L ? L : 1) * sizeof *e->group_end);
    e->busy = calloc((size_t)(L ? L : 1), sizeof *e->busy);
    e->lanes = malloc((size_t)(L ? L : 1) * sizeof *e->lanes);
    e->cursor = calloc((size_t)(L ? L : 1), sizeof *e->cursor);
    e->logs = calloc((size_t)P, sizeof *e->logs);
    e->dirty_words = (P + 63) / 64;
    e->dirty_bits = calloc((size_t)e->dirty_words, sizeof *e->dirty_bits);
    e->arrived = calloc((size_t)P, 1);
    e->arrived_list = malloc((size_t)P * sizeof *e->arrived_list);
    e->set_begin = calloc((size_t)L + 1, sizeof *e->set_begin);
    e->set_busy = calloc((size_t)(t->nshared ? t->nshared : 1), sizeof *e->set_busy);
    if (!e->covered || !e->need || !e->cost || !e->in_sorted || !e->group_end || !e->busy || !e->lanes ||
        !e->cursor || !e->logs || !e->dirty_bits || !e->arrived ||
        !e->arrived_list || !e->set_begin || !e->set_busy)
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory for a %d-rank, %ld-chunk trial",
                            P, e->G);
    e->static_bytes = (size_t)P * e->W * 8 + (size_t)P * (sizeof(long) + sizeof(arrival_log) + 10) +
                      (size_t)L * (sizeof(double) + 4 * sizeof(int) + sizeof(int64_t)) +
                      rarest_bytes;
    for (int l = 0; l < L; l++) {
        e->lanes[l] = t->links[l].lanes;
        e->cost[l] = tacos_link_cost(&t->links[l], p->chunk_bytes);
        if (!(e->cost[l] > 0.0) || !isfinite(e->cost[l]))
            return cs_error_set(err, CS_EINVAL, "links", "link %d->%d has no positive finite time",
                                t->links[l].src, t->links[l].dst);
    }
    for (int r = 0; r < P; r++) {
        int lo = t->in_begin[r], hi = t->in_begin[r + 1];
        memcpy(e->in_sorted + lo, t->in_links + lo, (size_t)(hi - lo) * sizeof(int));
        sort_in_links(e->in_sorted + lo, hi - lo, e->cost);
        for (int i = hi - 1; i >= lo; i--)
            e->group_end[i] = (i + 1 < hi && e->cost[e->in_sorted[i + 1]] == e->cost[e->in_sorted[i]])
                                  ? e->group_end[i + 1] : i + 1;
    }
    /* link -> shared sets */
    for (int s = 0; s < t->nshared; s++)
        for (int k = 0; k < t->shared[s].nlinks; k++)
            e->set_begin[t->shared[s].links[k] + 1]++;
    for (int l = 0; l < L; l++)
        e->set_begin[l + 1] += e->set_begin[l];
    if (e->set_begin[L] > 0) {
        e->set_of = malloc((size_t)e->set_begin[L] * sizeof *e->set_of);
        int *fill = calloc((size_t)L, sizeof *fill);
        if (!e->set_of || !fill) {
            free(fill);
            return cs_error_set(err, CS_ENOMEM, NULL, "out of memory for shared sets");
        }
        for (int s = 0; s < t->nshared; s++)
            for (int k = 0; k < t->shared[s].nlinks; k++) {
                int l = t->shared[s].links[k];
                e->set_of[e->set_begin[l] + fill[l]++] = s;
            }
        free(fill);
    }
    e->skip_redundant = p->skip_redundant && (e->universal || e->holds);
    note_peak(e);
    int rc = tacos_init_conditions(e, err);
    if (rc == CS_OK && e->skip_redundant && e->universal && t->ngroups > 0)
        rc = init_group_cover(e, err);
    if (rc == CS_OK && e->tracked)
        for (int d = 0; d < P; d++)
            if (e->need[d] <= e->ready_need[d]) {
                e->ready_need[d] = -1;
                track_in_neighbours(e, d);
            }
    return rc;
}

/* ---- matching -------------------------------------------------------------- */

static inline bool link_has_room(const engine *e, int l)
{
    if (e->busy[l] >= e->lanes[l])
        return false;
    if (!e->set_of)
        return true; /* no shared sets */
    for (int k = e->set_begin[l]; k < e->set_begin[l + 1]; k++) {
        int s = e->set_of[k];
        if (e->set_busy[s] >= e->t->shared[s].lanes)
            return false;
    }
    return true;
}

/* Whether chunk c can reach l's destination d over cheaper links: an
 * in-neighbour with a cheaper link holds (or is receiving) it, or, for a link
 * into d's group from outside, some rank of the group covers it and the
 * group's own links are all cheaper than l.  Then a slow link should not
 * spend its long occupancy on c: it waits for a chunk only it can bring.  The
 * group test is what keeps a node's scale-out ports on distinct chunks (on
 * switch2d:8x4 each port imports what no GPU of its node has yet, and the
 * node's fast links spread it). */
/* not inlined: only slow links on heterogeneous topologies call it, and inlining
 * it into the choice loops slows the common path */
__attribute__((noinline)) static bool cheaper_supplier(const engine *e, int l, uint32_t c)
{
    const cs_topology *t = e->t;
    int d = t->links[l].dst;
    double cl = e->cost[l];
    for (int k = t->in_begin[d]; k < t->in_begin[d + 1]; k++) {
        int m = e->in_sorted[k];
        if (e->cost[m] >= cl)
            break;
        int u = t->links[m].src;
        const uint64_t *urow = (e->universal ? e->covered : e->holds) + (size_t)u * e->W;
        if (bit_get(urow, c))
            return true;
    }
    /* a link into d's group from outside it: some rank of the group covers c */
    if (e->gcov) {
        int g = t->group_of[d];
        if (g >= 0 && t->group_of[t->links[l].src] != g && e->group_cost[g] < cl &&
            bit_get(e->gcov + (size_t)g * e->W, c))
            return true;
    }
    return false;
}

/* Rarest first: among the first TACOS_RAREST_WINDOW chunks link l could carry
 * (its window, in its source's arrival order), the one the fewest other
 * in-neighbours of the destination hold, then the one the fewest ranks hold,
 * then a random one.  A chunk only this link can deliver goes first, so the
 * chunks several links could deliver are left for the last spans, which stay
 * full: this is what takes DGX-1, hypercubes and 2D tori to their in-link
 * bounds.
 *
 * It decides only in a destination's last TACOS_RAREST_SPANS spans (need <=
 * that many chunks per in-link), which is where it matters: before that every
 * in-link has plenty to carry, and oldest-first (the plain choice) pipelines as
 * well.  So it costs (window x in-degree) bit tests for about spans x
 * in-degree picks per rank, next to nothing at any size; it used to rank the
 * whole backlog at every pick and was switched off above 2^15 ranks x chunks.
 * The window is refilled from the link's cursor, so each log entry is still
 * read once per link.
 *
 * A slow link kept off redundant chunks (skip_redundant) takes its oldest
 * candidate no cheaper route can supply, as in the plain choice. */
static long pick_rarest(engine *e, int l, local_rng *rng)
{
    const cs_topology *t = e->t;
    const cs_link *lk = &t->links[l];
    int d = lk->dst, s = lk->src;
    const uint64_t *row = e->covered + (size_t)d * e->W;
    uint32_t *win = e->window + (size_t)l * TACOS_RAREST_WINDOW;
    bool slow = e->skip_redundant && e->cost[e->in_sorted[t->in_begin[d]]] < e->cost[l];
    /* drop what the destination covers by now and, on a slow link, what a
     * cheaper route can supply by now (both permanent); refill */
    int n = 0;
    for (int i = 0; i < e->nwindow[l]; i++)
        if (!bit_get(row, win[i]) && !(slow && cheaper_supplier(e, l, win[i])))
            win[n++] = win[i];
    const arrival_log *lg = &e->logs[s];
    const uint32_t *buf = lg->buf - lg->base;
    int64_t pos = e->cursor[l] < lg->base ? lg->base : e->cursor[l], end = lg->base + lg->len;
    while (n < TACOS_RAREST_WINDOW && pos < end) {
        uint32_t c = buf[pos++];
        if (!bit_get(row, c) && !(slow && cheaper_supplier(e, l, c)))
            win[n++] = c;
    }
    e->cursor[l] = pos;
    int best = slow && n > 0 ? 0 : -1;
    if (!slow) {
        int best_supply = 0, best_holders = 0, ties = 0;
        for (int i = 0; i < n; i++) {
            uint32_t c = win[i];
            /* other in-neighbours holding c; stop once it cannot win */
            int supply = 0;
            for (int k = t->in_begin[d]; k < t->in_begin[d + 1]; k++) {
                int u = e->in_src[k];
                if (u != s && bit_get(e->holds + (size_t)u * e->W, c) &&
                    ++supply > best_supply && best >= 0)
                    break;
            }
            if (best >= 0 && supply > best_supply)
                continue;
            int holders = e->holders[c];
            if (best < 0 || supply < best_supply || holders < best_holders) {
                best = i;
                best_supply = supply;
                best_holders = holders;
                ties = 1;
            } else if (holders == best_holders && local_below(rng, (uint32_t)++ties) == 0) {
                best = i;
            }
        }
    }
    if (best < 0) {
        e->nwindow[l] = (unsigned char)n;
        return -1;
    }
    uint32_t c = win[best];
    /* the chosen chunk is covered from now on: take it out */
    memmove(win + best, win + best + 1, (size_t)(n - best - 1) * sizeof *win);
    e->nwindow[l] = (unsigned char)(n - 1);
    return c;
}

/* A chunk link l (into d) has at its source and d still needs, or -1.
 * rarest_need: d's need at or below which it chooses rarest first (its last
 * spans; -1 for plain trials). */
static inline long pick_chunk(engine *e, int l, int d, long rarest_need, local_rng *rng)
{
    /* need only falls, so once a destination is in its last spans it stays
     * there, and a window is never left half-used by the plain choice */
    if (e->need[d] <= rarest_need)
        return pick_rarest(e, l, rng);
    const cs_link *lk = &e->t->links[l];
    arrival_log *lg = &e->logs[lk->src];
    const uint64_t *row = e->covered + (size_t)lk->dst * e->W;
    int64_t pos = e->cursor[l], end = lg->base + lg->len;
    if (pos < lg->base)
        pos = lg->base; /* cannot happen: trimming respects live cursors */
    const uint32_t *buf = lg->buf - lg->base;
    while (pos < end && bit_get(row, buf[pos]))
        pos++;
    e->cursor[l] = pos;
    if (pos == end)
        return -1;
    if (e->skip_redundant && e->cost[e->in_sorted[e->t->in_begin[lk->dst]]] < e->cost[l]) {
        /* first candidate no cheaper in-link could supply; none: stay idle */
        int64_t limit = pos + 256;
        for (int64_t q = pos; q < end && q < limit; q++) {
            uint32_t c = buf[q];
            if (!bit_get(row, c) && !cheaper_supplier(e, l, c))
                return c;
        }
        return -1;
    }
    int window = e->p->window;
    if (window <= 1)
        return buf[pos];
    /* choose uniformly among the first `window` candidates (reservoir) */
    long chosen = buf[pos];
    int seen = 1;
    int64_t limit = pos + 8L * window;
    for (int64_t q = pos + 1; q < end && q < limit && seen < window; q++) {
        uint32_t c = buf[q];
        if (!bit_get(row, c) && local_below(rng, (uint32_t)++seen) == 0)
            chosen = c;
    }
    return chosen;
}

/* ---- matching one event, possibly on several threads ------------------------ */

typedef struct pending { double end; int32_t link; uint32_t chunk; } pending;

/* What one thread matched at one event, merged in rank order afterwards. */
typedef struct match_out {
    tacos_rec *recs;
    long nrecs, caprecs;
    pending *push;
    long npush, cappush;
    int *ready;             /* destinations whose in-neighbours must be tracked */
    long nready, capready;
    int rc;
} match_out;

static int out_grow(match_out *mo, bool keep)
{
    if (mo->npush == mo->cappush) {
        long ncap = mo->cappush ? mo->cappush * 2 : 1024;
        pending *np = realloc(mo->push, (size_t)ncap * sizeof *np);
        if (!np)
            return CS_ENOMEM;
        mo->push = np;
        mo->cappush = ncap;
    }
    if (keep && mo->nrecs == mo->caprecs) {
        long ncap = mo->caprecs ? mo->caprecs * 2 : 1024;
        tacos_rec *nr = realloc(mo->recs, (size_t)ncap * sizeof *nr);
        if (!nr)
            return CS_ENOMEM;
        mo->recs = nr;
        mo->caprecs = ncap;
    }
    return CS_OK;
}

/* Matches every dirty destination whose bit lies in dirty words [w0, w1).
 * Touches only those ranks' state (bitset rows, needs, in-link lanes and
 * cursors) and reads the arrival logs, which change only between events. */
static void match_range(engine *e, long w0, long w1, double now, uint64_t event, bool keep,
                        match_out *mo)
{
    const cs_topology *t = e->t;
    for (long w = w0; w < w1; w++) {
        uint64_t bits = e->dirty_bits[w];
        if (!bits)
            continue;
        e->dirty_bits[w] = 0;
        while (bits) {
            int d = (int)(w * 64 + __builtin_ctzll(bits));
            bits &= bits - 1;
            if (e->need[d] == 0)
                continue;
            local_rng rng = {e->seed_base ^ ((uint64_t)d * 0x9e3779b97f4a7c15ULL) ^
                             (event * 0xd1b54a32d192ed03ULL)};
            uint64_t *row = e->covered + (size_t)d * e->W;
            int lo = t->in_begin[d], hi = t->in_begin[d + 1];
            long rarest_need = e->holds ? (long)TACOS_RAREST_SPANS * (hi - lo) : -1;
            for (int g0 = lo; g0 < hi && e->need[d] > 0;) {
                int g1 = e->group_end[g0], k = g1 - g0;
                int rot = k > 1 ? (int)local_below(&rng, (uint32_t)k) : 0;
                for (int j = 0; j < k && e->need[d] > 0; j++) {
                    int at = rot + j < k ? rot + j : rot + j - k;
                    int l = e->in_sorted[g0 + at];
                    while (link_has_room(e, l)) {
                        long c = pick_chunk(e, l, d, rarest_need, &rng);
                        if (c < 0)
                            break;
                        if (out_grow(mo, keep)) {
                            mo->rc = CS_ENOMEM;
                            return;
                        }
                        bit_set(row, c);
                        if (e->gcov && t->group_of[d] >= 0)
                            bit_set(e->gcov + (size_t)t->group_of[d] * e->W, c);
                        e->need[d]--;
                        e->busy[l]++;
                        for (int q = e->set_begin[l]; q < e->set_begin[l + 1]; q++)
                            e->set_busy[e->set_of[q]]++;
                        if (e->flight) {
                            int b = e->flight_begin[l], h = e->flight_head[l];
                            e->flight[b + h] = (uint32_t)c;
                            e->flight_head[l] = b + h + 1 == e->flight_begin[l + 1] ? 0 : h + 1;
                        }
                        if (keep)
                            mo->recs[mo->nrecs++] = (tacos_rec){(uint32_t)c, l};
                        mo->push[mo->npush++] = (pending){now + e->cost[l], l, (uint32_t)c};
                    }
                }
                g0 = g1;
            }
            if (e->ready_need && e->need[d] <= e->ready_need[d]) {
                e->ready_need[d] = -1;
                if (mo->nready == mo->capready) {
                    long ncap = mo->capready ? mo->capready * 2 : 256;
                    int *nr = realloc(mo->ready, (size_t)ncap * sizeof *nr);
                    if (!nr) {
                        mo->rc = CS_ENOMEM;
                        return;
                    }
                    mo->ready = nr;
                    mo->capready = ncap;
                }
                mo->ready[mo->nready++] = d;
            }
        }
    }
}

/* Records that span `span` (starting at `now`) begins at the current record:
 * its entry is written before the event's sends and overwritten by the next
 * event when this one matched nothing.  One slot is kept spare for the end. */
static int open_span(tacos_trial *out, int span, double now)
{
    if (span + 2 > out->span_cap) {
        int cap = out->span_cap ? out->span_cap * 2 : 64;
        long *f = realloc(out->span_first, sizeof *f * (size_t)cap);
        if (!f)
            return CS_ENOMEM;
        out->span_first = f;
        double *t = realloc(out->span_start, sizeof *t * (size_t)cap);
        if (!t)
            return CS_ENOMEM;
        out->span_start = t;
        out->span_cap = cap;
    }
    out->span_first[span] = out->nsends;
    out->span_start[span] = now;
    return CS_OK;
}

/* A barrier whose size can shrink before first use (if a thread fails to
 * start, the others must not wait for it). */
typedef struct cbarrier {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int count, waiting;
    unsigned gen;
} cbarrier;

static void cb_init(cbarrier *b, int count)
{
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    b->count = count;
    b->waiting = 0;
    b->gen = 0;
}

static void cb_destroy(cbarrier *b)
{
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cv);
}

static void cb_set_count(cbarrier *b, int count)
{
    pthread_mutex_lock(&b->mu);
    b->count = count;
    pthread_mutex_unlock(&b->mu);
}

static void cb_wait(cbarrier *b)
{
    pthread_mutex_lock(&b->mu);
    unsigned gen = b->gen;
    if (++b->waiting >= b->count) {
        b->waiting = 0;
        b->gen++;
        pthread_cond_broadcast(&b->cv);
    } else {
        while (gen == b->gen)
            pthread_cond_wait(&b->cv, &b->mu);
    }
    pthread_mutex_unlock(&b->mu);
}

/* Worker threads for matching: they wait at `start`, match their share of
 * the dirty words, and meet the main thread (share 0) at `done`. */
typedef struct match_pool {
    engine *e;
    int n;
    pthread_t th[TACOS_MATCH_THREADS_MAX];
    cbarrier start, done;
    bool quit;
    double now;
    uint64_t event;
    bool keep;
    match_out mo[TACOS_MATCH_THREADS_MAX];
} match_pool;

typedef struct worker_arg { match_pool *pool; int k; } worker_arg;

static void share(const match_pool *mp, int k, long *w0, long *w1)
{
    long words = mp->e->dirty_words;
    *w0 = words * k / mp->n;
    *w1 = words * (k + 1) / mp->n;
}

static void *match_worker(void *arg)
{
    worker_arg *wa = arg;
    match_pool *mp = wa->pool;
    for (;;) {
        cb_wait(&mp->start);
        if (mp->quit)
            break;
        long w0, w1;
        share(mp, wa->k, &w0, &w1);
        match_range(mp->e, w0, w1, mp->now, mp->event, mp->keep, &mp->mo[wa->k]);
        cb_wait(&mp->done);
    }
    return NULL;
}

int tacos_run_trial(const tacos_problem *p, uint64_t seed, bool keep, const cs_cancel *cancel,
                    tacos_trial *out, cs_error *err)
{
    memset(out, 0, sizeof *out);
    out->keep = keep;
    engine e;
    int rc = engine_init(&e, p, seed, err);
    if (rc) {
        engine_free(&e);
        return rc;
    }
    const cs_topology *t = e.t;
    for (int r = 0; r < e.P; r++)
        mark_dirty(&e, r);
    /* parallel matching only where ranks' matches cannot see each other:
     * no shared sets, no cheaper-supplier checks (they read other ranks'
     * coverage); rarest-first reads counts that change between events only */
    int nthreads = p->match_threads;
    if (nthreads > TACOS_MATCH_THREADS_MAX)
        nthreads = TACOS_MATCH_THREADS_MAX;
    if (nthreads < 1 || e.P < TACOS_MATCH_MIN_RANKS || t->nshared > 0 || e.skip_redundant)
        nthreads = 1;
    match_pool *mp = calloc(1, sizeof *mp);
    worker_arg wargs[TACOS_MATCH_THREADS_MAX];
    int started = 0;
    if (!mp) {
        engine_free(&e);
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
    }
    mp->e = &e;
    mp->keep = keep;
    cb_init(&mp->start, nthreads);
    cb_init(&mp->done, nthreads);
    for (int k = 1; k < nthreads; k++) {
        wargs[k] = (worker_arg){mp, k};
        if (pthread_create(&mp->th[k], NULL, match_worker, &wargs[k]) != 0)
            break;
        started++;
    }
    /* fewer threads than asked (thread creation failed): results are the same */
    mp->n = started + 1;
    cb_set_count(&mp->start, mp->n);
    cb_set_count(&mp->done, mp->n);
    double now = 0.0;
    int nspans = 0;
    uint64_t event = 0;
    while (e.remaining > 0) {
        if ((event & 63) == 0 && cs_cancel_requested(cancel)) {
            rc = cs_error_set(err, CS_ECANCELLED, NULL, "TACOS trial cancelled");
            goto out;
        }
        /* match every dirty destination at time `now` */
        int span = nspans;
        if (mp->n > 1) {
            mp->now = now;
            mp->event = event;
            cb_wait(&mp->start);
            long w0, w1;
            share(mp, 0, &w0, &w1);
            match_range(&e, w0, w1, now, event, keep, &mp->mo[0]);
            cb_wait(&mp->done);
        } else {
            match_range(&e, 0, e.dirty_words, now, event, keep, &mp->mo[0]);
        }
        event++;
        if (keep && (rc = open_span(out, span, now)) != CS_OK) {
            rc = cs_error_set(err, rc, NULL, "out of memory recording spans");
            goto out;
        }
        /* merge in rank order */
        for (int k = 0; k < mp->n; k++) {
            match_out *mo = &mp->mo[k];
            if (mo->rc) {
                rc = cs_error_set(err, mo->rc, NULL, "out of memory matching");
                goto out;
            }
            if (keep && mo->nrecs > 0) {
                if (out->nsends + mo->nrecs > out->cap) {
                    long ncap = out->cap ? out->cap : 1024;
                    while (ncap < out->nsends + mo->nrecs)
                        ncap *= 2;
                    tacos_rec *nr = realloc(out->recs, (size_t)ncap * sizeof *nr);
                    if (!nr) {
                        rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory recording sends");
                        goto out;
                    }
                    out->recs = nr;
                    out->cap = ncap;
                }
                memcpy(out->recs + out->nsends, mo->recs, (size_t)mo->nrecs * sizeof *mo->recs);
            }
            for (long i = 0; i < mo->npush; i++) {
                const pending *pd = &mo->push[i];
                out->checksum = (out->checksum ^ ((uint64_t)pd->chunk * 0x9e3779b97f4a7c15ULL +
                                                  (uint64_t)pd->link * 0xbf58476d1ce4e5b9ULL +
                                                  (uint64_t)span)) * 0x100000001b3ULL;
                if ((rc = bucket_push(&e, pd->end, pd->link, pd->chunk))) {
                    rc = cs_error_set(err, rc, NULL, "out of memory for events");
                    goto out;
                }
            }
            for (long i = 0; i < mo->nready; i++)
                track_in_neighbours(&e, mo->ready[i]);
            mo->nready = 0;
            out->nsends += mo->npush;
            e.remaining -= mo->npush;
            if (mo->npush > 0)
                nspans = span + 1;
            mo->nrecs = 0;
            mo->npush = 0;
        }
        if (e.remaining == 0)
            break;
        if (e.nbuckets == 0) {
            for (int r = 0; r < e.P; r++)
                if (e.need[r] > 0) {
                    const uint64_t *row = e.covered + (size_t)r * e.W;
                    long g = 0;
                    while (g < e.G && bit_get(row, g))
                        g++;
                    rc = cs_error_set(err, CS_EUNSAT, "topology",
                                      "rank %d cannot receive chunk %ld: no in-neighbour can supply it",
                                      r, g);
                    goto out;
                }
            rc = cs_error_set(err, CS_EINTERNAL, NULL, "TACOS: needs left but none found");
            goto out;
        }
        /* deliver the earliest bucket */
        bucket b = e.buckets[--e.nbuckets];
        now = b.time;
        for (long i = 0; i < b.n; i++) {
            int l = b.items[i].link;
            const cs_link *lk = &t->links[l];
            e.busy[l]--;
            for (int q = e.set_begin[l]; q < e.set_begin[l + 1]; q++) {
                int s = e.set_of[q];
                if (e.set_busy[s]-- == t->shared[s].lanes)
                    for (int m = 0; m < t->shared[s].nlinks; m++)
                        mark_dirty(&e, t->links[t->shared[s].links[m]].dst);
            }
            if ((rc = tacos_log_append(&e, lk->dst, b.items[i].chunk))) {
                rc = cs_error_set(err, rc, NULL, "out of memory for arrival logs");
                free(b.items);
                goto out;
            }
            mark_dirty(&e, lk->dst);
            if (!e.arrived[lk->dst]) {
                e.arrived[lk->dst] = 1;
                e.arrived_list[e.narrived++] = lk->dst;
            }
        }
        for (int i = 0; i < e.narrived; i++) {
            int x = e.arrived_list[i];
            e.arrived[x] = 0;
            for (int l = t->out_begin[x]; l < t->out_begin[x + 1]; l++)
                if (e.busy[l] < e.lanes[l])
                    mark_dirty(&e, t->links[l].dst);
        }
        e.narrived = 0;
        /* recycle the bucket's storage */
        if (e.nspare == e.spare_cap) {
            int ncap = e.spare_cap ? e.spare_cap * 2 : 8;
            bucket *ns = realloc(e.spare, (size_t)ncap * sizeof *ns);
            if (!ns) {
                free(b.items);
                rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory for events");
                goto out;
            }
            e.spare = ns;
            e.spare_cap = ncap;
        }
        e.spare[e.nspare++] = b;
    }
    /* the makespan is the latest end among the sends still in flight */
    {
        double last = now;
        for (int i = 0; i < e.nbuckets; i++)
            if (e.buckets[i].time > last)
                last = e.buckets[i].time;
        out->makespan_us = last;
    }
    out->nspans = nspans;
    if (keep && out->span_first)
        out->span_first[nspans] = out->nsends;
    out->peak_bytes = e.peak_bytes;
out:
    if (mp->n > 1) {
        mp->quit = true;
        cb_wait(&mp->start);
        for (int k = 1; k < mp->n; k++)
            pthread_join(mp->th[k], NULL);
    }
    cb_destroy(&mp->start);
    cb_destroy(&mp->done);
    for (int k = 0; k < TACOS_MATCH_THREADS_MAX; k++) {
        free(mp->mo[k].recs);
        free(mp->mo[k].push);
        free(mp->mo[k].ready);
    }
    free(mp);
    engine_free(&e);
    if (rc)
        tacos_trial_free(out);
    return rc;
}

void tacos_trial_free(tacos_trial *tr)
{
    if (tr) {
        free(tr->recs);
        free(tr->span_first);
        free(tr->span_start);
        tr->recs = NULL;
        tr->span_first = NULL;
        tr->span_start = NULL;
        tr->nsends = 0;
        tr->cap = 0;
        tr->span_cap = 0;
    }
}
