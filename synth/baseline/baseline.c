/*
 * baseline.c - the baseline registry, and the builder that turns logical
 * schedules (sends between any two ranks) into schedules over real links.
 *
 * Routing.  A logical send (chunk, A -> D, logical step l) follows the BFS tree
 * of A (ties to the lowest link index, as topology_shortest_path), one hop per
 * physical step.  Logical steps are not barriers: a send starts once A holds
 * the chunk and one step after A started its sends of the previous logical
 * step (bl_add_phase explains).  Chunks are routed with a table of when each
 * rank receives each chunk, which gives the property everything else rests
 * on: *no rank ever receives a chunk twice*.  A hop into a rank that already
 * holds (or is about to receive) the chunk is not sent; the path continues
 * from that rank once it has the chunk.  A logical send to a rank that already
 * holds the chunk is dropped.
 *
 * Consequently every routed non-combining phase is a tree per chunk, which is
 * exactly what inversion needs: a combining phase is written as its dual
 * (allgather for reduce-scatter, broadcast for reduce), routed on the reversed
 * topology and time-reversed with copies turned into reduces.  Forwarding
 * ranks of the dual become inner nodes of the reduction tree, so their own
 * contributions are combined exactly once and never clobbered.  Gather is the
 * mirror of scatter; there the dual tree is first pruned of forwarders that
 * lead to no target, since a mirrored leaf must be a chunk's source.
 *
 * Cost: one BFS per distinct source (O(links) each, cached per call), a sort
 * of the logical sends, and O(hops) hash-table work for routing; no per-pair
 * path queries.  Every result is checked with algorithm_verify.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "baseline_internal.h"
#include "verify.h"

/* ---- registry ------------------------------------------------------------------ */

#define K(kind) (1u << (kind))

/* Parallel tables: bl_infos is what baseline_list() hands out. */
static const cs_baseline_info bl_infos[] = {
    {"ring", "one logical ring in rank order: allgather, reducescatter, allreduce (RS+AG), "
             "pipelined broadcast/reduce, gather/scatter along the ring"},
    {"rings", "several edge-disjoint directed Hamiltonian rings (NCCL-style, e.g. DGX-1's "
              "NVLink rings), data split across them; one ring when none is found"},
    {"direct", "every pair directly in one logical step: alltoall, allgather, reducescatter, "
               "allreduce (RS+AG), broadcast/reduce, gather/scatter"},
    {"recursive-doubling", "butterfly with partner r xor 2^k: allgather; allreduce by exchange "
                           "(needs a link between partners)"},
    {"recursive-halving", "vector-halving distance-halving reducescatter; allreduce = "
                          "Rabenseifner (RH reducescatter + RD allgather)"},
    {"binomial-tree", "distance-halving binomial tree: broadcast, reduce, gather, scatter; "
                      "allreduce = reduce + broadcast"},
    {"double-binary-tree", "NCCL's two complementary binary trees, half the data on each: "
                           "broadcast, reduce, allreduce = reduce + broadcast"},
    {"bine-tree", "distance-halving Bine (negabinary) tree: broadcast, reduce, gather, scatter; "
                  "allreduce = reduce + broadcast"},
    {"bine-butterfly", "Bine butterflies: distance-doubling reducescatter, distance-halving "
                       "allgather, allreduce = RS + AG"},
};

typedef struct bl_entry {
    unsigned kinds;
    bl_gen_fn gen;
} bl_entry;

#define ALL_AG_RS_AR (K(CS_COLL_ALLGATHER) | K(CS_COLL_REDUCESCATTER) | K(CS_COLL_ALLREDUCE))
#define ALL_TREE (K(CS_COLL_BROADCAST) | K(CS_COLL_REDUCE) | K(CS_COLL_GATHER) | \
                  K(CS_COLL_SCATTER) | K(CS_COLL_ALLREDUCE))

static const bl_entry bl_table[] = {
    {ALL_AG_RS_AR | ALL_TREE, bl_gen_ring},
    {ALL_AG_RS_AR | K(CS_COLL_BROADCAST) | K(CS_COLL_REDUCE), bl_gen_rings},
    {ALL_AG_RS_AR | ALL_TREE | K(CS_COLL_ALLTOALL), bl_gen_direct},
    {K(CS_COLL_ALLGATHER) | K(CS_COLL_ALLREDUCE), bl_gen_recursive_doubling},
    {K(CS_COLL_REDUCESCATTER) | K(CS_COLL_ALLREDUCE), bl_gen_recursive_halving},
    {ALL_TREE, bl_gen_binomial},
    {K(CS_COLL_BROADCAST) | K(CS_COLL_REDUCE) | K(CS_COLL_ALLREDUCE),
     bl_gen_double_binary_tree},
    {ALL_TREE, bl_gen_bine_tree},
    {ALL_AG_RS_AR, bl_gen_bine_butterfly},
};

#define BL_NTABLE ((int)(sizeof bl_table / sizeof bl_table[0]))
_Static_assert(sizeof bl_infos / sizeof bl_infos[0] == sizeof bl_table / sizeof bl_table[0],
               "baseline infos and table differ");

const cs_baseline_info *baseline_list(int *count)
{
    if (count)
        *count = BL_NTABLE;
    return bl_infos;
}

static int bl_index(const char *name)
{
    if (!name)
        return -1;
    for (int i = 0; i < BL_NTABLE; i++)
        if (strcmp(bl_infos[i].name, name) == 0)
            return i;
    return -1;
}

static const bl_entry *bl_find(const char *name)
{
    int i = bl_index(name);
    return i < 0 ? NULL : &bl_table[i];
}

bool baseline_exists(const char *name) { return bl_find(name) != NULL; }

bool baseline_supports(const char *name, cs_coll_kind kind)
{
    const bl_entry *e = bl_find(name);
    if (!e || kind < 0 || kind >= CS_COLL_KIND_COUNT)
        return false;
    return (e->kinds & K(kind)) != 0;
}

/* ---- small helpers ---------------------------------------------------------------- */

int bl_floor_log2(int p)
{
    int m = 0;
    while ((1 << (m + 1)) <= p)
        m++;
    return m;
}

bool bl_is_pow2(int p) { return p > 0 && (p & (p - 1)) == 0; }

int bl_pick_chunks(const bl_request *rq, int natural, int multiple, int *chunks, cs_error *err)
{
    if (multiple < 1)
        multiple = 1;
    if (rq->chunks_req == 0) {
        *chunks = natural;
        return CS_OK;
    }
    if (rq->chunks_req % multiple != 0)
        return cs_error_set(err, CS_EINVAL, "chunks",
                            "%s %s needs chunks to be a multiple of %d, got %d", rq->name,
                            collective_kind_name(rq->c->kind), multiple, rq->chunks_req);
    *chunks = rq->chunks_req;
    return CS_OK;
}

/* ---- logical schedules -------------------------------------------------------------- */

void bl_lsched_init(bl_lsched *ls, cs_coll_kind kind, int root, int ranks, int chunks)
{
    memset(ls, 0, sizeof *ls);
    ls->kind = kind;
    ls->root = root < 0 ? 0 : root;
    ls->ranks = ranks;
    ls->chunks = chunks;
}

void bl_lsched_free(bl_lsched *ls)
{
    free(ls->s);
    ls->s = NULL;
    ls->n = ls->cap = 0;
}

int bl_lsched_add(bl_lsched *ls, long chunk, int src, int dst, int lstep)
{
    if (src == dst)
        return CS_OK;
    if (ls->n == ls->cap) {
        long ncap = ls->cap ? ls->cap * 2 : 256;
        if (ncap > 2 * BL_MAX_SENDS)
            return CS_ELIMIT;
        bl_lsend *ns = realloc(ls->s, (size_t)ncap * sizeof *ns);
        if (!ns)
            return CS_ENOMEM;
        ls->s = ns;
        ls->cap = ncap;
    }
    ls->s[ls->n++] = (bl_lsend){chunk, src, dst, lstep};
    return CS_OK;
}

int bl_lsched_add_many(bl_lsched *ls, const long *chunks, long n, int src, int dst, int lstep)
{
    for (long i = 0; i < n; i++) {
        int rc = bl_lsched_add(ls, chunks[i], src, dst, lstep);
        if (rc != CS_OK)
            return rc;
    }
    return CS_OK;
}

/* ---- the builder -------------------------------------------------------------------- */

typedef struct bl_psend {
    long chunk;
    int src, dst, step;
    int op;
} bl_psend;

struct bl_builder {
    const cs_topology *t;
    int p;
    int **par[2];      /* [0] forward, [1] reversed: BFS parent per source, lazily */
    bl_psend *s;
    long n, cap;
    int steps;
};

const cs_topology *bl_topology(const bl_builder *b) { return b->t; }

static int bl_builder_init(bl_builder *b, const cs_topology *t)
{
    memset(b, 0, sizeof *b);
    b->t = t;
    b->p = t->ranks;
    for (int d = 0; d < 2; d++) {
        b->par[d] = calloc((size_t)t->ranks, sizeof *b->par[d]);
        if (!b->par[d])
            return CS_ENOMEM;
    }
    return CS_OK;
}

static void bl_builder_free(bl_builder *b)
{
    for (int d = 0; d < 2; d++) {
        if (b->par[d])
            for (int r = 0; r < b->p; r++)
                free(b->par[d][r]);
        free(b->par[d]);
    }
    free(b->s);
    memset(b, 0, sizeof *b);
}

static int bl_push(bl_builder *b, long chunk, int src, int dst, int step, int op)
{
    if (b->n == b->cap) {
        long ncap = b->cap ? b->cap * 2 : 1024;
        bl_psend *ns = realloc(b->s, (size_t)ncap * sizeof *ns);
        if (!ns)
            return CS_ENOMEM;
        b->s = ns;
        b->cap = ncap;
    }
    b->s[b->n++] = (bl_psend){chunk, src, dst, step, op};
    return CS_OK;
}

/* BFS tree from src: parent[v] is the rank before v on the path (src's own
 * entry is src).  reversed: follow links backwards (the reversed topology). */
static const int *bl_tree(bl_builder *b, int src, int reversed)
{
    int **rows = b->par[reversed];
    if (rows[src])
        return rows[src];
    const cs_topology *t = b->t;
    int *par = malloc((size_t)t->ranks * sizeof *par);
    int *queue = malloc((size_t)t->ranks * sizeof *queue);
    if (!par || !queue) {
        free(par);
        free(queue);
        return NULL;
    }
    for (int r = 0; r < t->ranks; r++)
        par[r] = -1;
    par[src] = src;
    int head = 0, tail = 0;
    queue[tail++] = src;
    while (head < tail) {
        int x = queue[head++];
        if (!reversed) {
            for (int li = t->out_begin[x]; li < t->out_begin[x + 1]; li++) {
                int y = t->links[li].dst;
                if (par[y] < 0) {
                    par[y] = x;
                    queue[tail++] = y;
                }
            }
        } else {
            for (int k = t->in_begin[x]; k < t->in_begin[x + 1]; k++) {
                int y = t->links[t->in_links[k]].src;
                if (par[y] < 0) {
                    par[y] = x;
                    queue[tail++] = y;
                }
            }
        }
    }
    free(queue);
    rows[src] = par;
    return par;
}

static int bl_chunk_source(const bl_lsched *ls, long g)
{
    switch (ls->kind) {
    case CS_COLL_ALLGATHER:
    case CS_COLL_ALLTOALL:
        return (int)(g % ls->ranks);
    default:
        return ls->root;
    }
}

/* Logical sends in global order: logical step first, so a rank's sends of
 * step l are placed after its sends of step l-1 (see bl_add_phase). */
static int bl_cmp_lsend(const void *pa, const void *pb)
{
    const bl_lsend *a = pa, *b = pb;
    if (a->lstep != b->lstep)
        return a->lstep < b->lstep ? -1 : 1;
    if (a->chunk != b->chunk)
        return a->chunk < b->chunk ? -1 : 1;
    if (a->src != b->src)
        return a->src < b->src ? -1 : 1;
    return (a->dst > b->dst) - (a->dst < b->dst);
}

/* When each (chunk, rank) is received: an open-addressing hash map from
 * chunk * P + rank to the physical step (-1: held from the start). */
typedef struct bl_arrivals {
    long *keys; /* -1 = empty */
    int *vals;
    long cap, n;
} bl_arrivals;

static int bl_arr_init(bl_arrivals *m, long expected)
{
    long cap = 1024;
    while (cap < 2 * expected)
        cap *= 2;
    m->keys = malloc((size_t)cap * sizeof *m->keys);
    m->vals = malloc((size_t)cap * sizeof *m->vals);
    m->cap = cap;
    m->n = 0;
    if (!m->keys || !m->vals)
        return CS_ENOMEM;
    memset(m->keys, 0xff, (size_t)cap * sizeof *m->keys);
    return CS_OK;
}

static void bl_arr_free(bl_arrivals *m)
{
    free(m->keys);
    free(m->vals);
}

static long bl_arr_slot(const bl_arrivals *m, long key)
{
    unsigned long h = (unsigned long)key * 0x9E3779B97F4A7C15ul;
    long i = (long)(h >> 17) & (m->cap - 1);
    while (m->keys[i] != -1 && m->keys[i] != key)
        i = (i + 1) & (m->cap - 1);
    return i;
}

/* The arrival step of key, or INT_MAX when the rank never gets the chunk. */
static int bl_arr_get(const bl_arrivals *m, long key)
{
    long i = bl_arr_slot(m, key);
    return m->keys[i] == -1 ? INT_MAX : m->vals[i];
}

static int bl_arr_put(bl_arrivals *m, long key, int val)
{
    if (2 * (m->n + 1) > m->cap) {
        bl_arrivals big;
        if (bl_arr_init(&big, m->cap) != CS_OK) {
            bl_arr_free(&big);
            return CS_ENOMEM;
        }
        for (long i = 0; i < m->cap; i++)
            if (m->keys[i] != -1) {
                long j = bl_arr_slot(&big, m->keys[i]);
                big.keys[j] = m->keys[i];
                big.vals[j] = m->vals[i];
                big.n++;
            }
        bl_arr_free(m);
        *m = big;
    }
    long i = bl_arr_slot(m, key);
    if (m->keys[i] == -1)
        m->n++;
    m->keys[i] = key;
    m->vals[i] = val;
    return CS_OK;
}

typedef struct bl_rec {
    long chunk;
    int a, b;     /* hop a -> b in the routed (possibly reversed) topology */
    int t;        /* physical step */
    long order;   /* creation order, for a stable sort */
} bl_rec;

static int bl_cmp_rec_chunk(const void *pa, const void *pb)
{
    const bl_rec *a = pa, *b = pb;
    if (a->chunk != b->chunk)
        return a->chunk < b->chunk ? -1 : 1;
    return (a->order > b->order) - (a->order < b->order);
}

/* Removes, for one chunk's records [lo, hi), hops into ranks that neither
 * are the chunk's target nor forward it (repeatedly).  Marks removed ones
 * with a = -1. */
static void bl_prune(bl_rec *rec, long lo, long hi, int target, int *outdeg)
{
    for (long i = lo; i < hi; i++)
        outdeg[rec[i].a]++;
    bool changed = true;
    while (changed) {
        changed = false;
        for (long i = hi - 1; i >= lo; i--) {
            if (rec[i].a < 0)
                continue;
            int y = rec[i].b;
            if (y != target && outdeg[y] == 0) {
                outdeg[rec[i].a]--;
                rec[i].a = -1;
                changed = true;
            }
        }
    }
    for (long i = lo; i < hi; i++)
        if (rec[i].a >= 0)
            outdeg[rec[i].a] = 0;
}

/*
 * Timing.  A logical step is not a barrier: each logical send starts as soon
 * as its source holds the chunk, but no earlier than one step after the
 * source *started* its sends of the previous logical step.  So a rank's own
 * sequence is kept (a binomial root sends to its children one step after
 * another, a ring broadcast injects one chunk per step), while a chunk that
 * took a long route delays only what depends on it, as in a pipelined
 * implementation.  Forwarding ranks relay at once.
 */
int bl_add_phase(bl_builder *b, const bl_lsched *ls, bl_mode mode, cs_error *err)
{
    const int p = b->p;
    const int reversed = mode != BL_FORWARD;
    int rc = CS_OK;
    if (ls->n == 0)
        return CS_OK;
    bl_lsend *ord = malloc((size_t)ls->n * sizeof *ord);
    int *path = malloc((size_t)(p + 1) * sizeof *path);
    int *gate = calloc((size_t)p, sizeof *gate);
    int *first = malloc((size_t)p * sizeof *first);
    int *active = malloc((size_t)p * sizeof *active);
    int *outdeg = calloc((size_t)p, sizeof *outdeg);
    bl_arrivals arr = {0};
    bl_rec *rec = NULL;
    long nrec = 0, caprec = 0;
    int nactive = 0, cur_l = INT_MIN, tmax = -1;
    if (!ord || !path || !gate || !first || !active || !outdeg ||
        bl_arr_init(&arr, ls->n + p) != CS_OK) {
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory routing a baseline");
        goto out;
    }
    memcpy(ord, ls->s, (size_t)ls->n * sizeof *ord);
    qsort(ord, (size_t)ls->n, sizeof *ord, bl_cmp_lsend);
    for (int r = 0; r < p; r++)
        first[r] = INT_MAX;

    for (long i = 0; i < ls->n; i++) {
        const bl_lsend *e = &ord[i];
        long g = e->chunk;
        int l = e->lstep, A = e->src, D = e->dst;
        if (A < 0 || A >= p || D < 0 || D >= p || l < 0 || g < 0) {
            rc = cs_error_set(err, CS_EINTERNAL, "", "baseline: logical send out of range");
            goto out;
        }
        if (l != cur_l) {
            /* a new logical step: ranks that sent in the last one move their gate */
            for (int k = 0; k < nactive; k++) {
                int r = active[k];
                if (first[r] != INT_MAX && first[r] + 1 > gate[r])
                    gate[r] = first[r] + 1;
                first[r] = INT_MAX;
            }
            nactive = 0;
            cur_l = l;
        }
        long key0 = g * p;
        int src0 = bl_chunk_source(ls, g);
        if (bl_arr_get(&arr, key0 + src0) == INT_MAX &&
            bl_arr_put(&arr, key0 + src0, -1) != CS_OK) {
            rc = cs_error_set(err, CS_ENOMEM, "", "out of memory routing a baseline");
            goto out;
        }
        if (bl_arr_get(&arr, key0 + D) != INT_MAX)
            continue; /* already delivered (or on its way) */
        int have = bl_arr_get(&arr, key0 + A);
        if (have == INT_MAX) {
            rc = cs_error_set(err, CS_EINTERNAL, "",
                              "baseline: rank %d sends chunk %ld at logical step %d before "
                              "holding it",
                              A, g, l);
            goto out;
        }
        const int *par = bl_tree(b, A, reversed);
        if (!par) {
            rc = cs_error_set(err, CS_ENOMEM, "", "out of memory routing a baseline");
            goto out;
        }
        int h = 0;
        for (int x = D; x != A; x = par[x]) {
            if (par[x] < 0 || h > p) {
                rc = cs_error_set(err, CS_EINTERNAL, "", "baseline: rank %d cannot reach rank %d",
                                  A, D);
                goto out;
            }
            path[h++] = x;
        }
        path[h] = A; /* path[h] .. path[0] is A .. D */
        int t = have + 1 > gate[A] ? have + 1 : gate[A];
        if (t < first[A]) {
            if (first[A] == INT_MAX)
                active[nactive++] = A;
            first[A] = t;
        }
        for (int k = h; k > 0; k--) {
            int x = path[k], y = path[k - 1];
            int hy = bl_arr_get(&arr, key0 + y);
            if (hy != INT_MAX) { /* y has it (or gets it): continue from there */
                t = hy + 1;
                continue;
            }
            if (nrec == caprec) {
                long ncap = caprec ? caprec * 2 : 1024;
                if (nrec + b->n > BL_MAX_SENDS) {
                    rc = cs_error_set(err, CS_ELIMIT, "",
                                      "the baseline needs more than %ld sends on %s",
                                      BL_MAX_SENDS, b->t->name);
                    goto out;
                }
                bl_rec *nr = realloc(rec, (size_t)ncap * sizeof *nr);
                if (!nr) {
                    rc = cs_error_set(err, CS_ENOMEM, "", "out of memory routing a baseline");
                    goto out;
                }
                rec = nr;
                caprec = ncap;
            }
            rec[nrec] = (bl_rec){g, x, y, t, nrec};
            nrec++;
            if (bl_arr_put(&arr, key0 + y, t) != CS_OK) {
                rc = cs_error_set(err, CS_ENOMEM, "", "out of memory routing a baseline");
                goto out;
            }
            if (t > tmax)
                tmax = t;
            t++;
        }
    }
    if (mode == BL_MIRROR) {
        qsort(rec, (size_t)nrec, sizeof *rec, bl_cmp_rec_chunk);
        for (long lo = 0, hi; lo < nrec; lo = hi) {
            for (hi = lo; hi < nrec && rec[hi].chunk == rec[lo].chunk; hi++)
                ;
            bl_prune(rec, lo, hi, (int)(rec[lo].chunk % p), outdeg);
        }
    }
    if (b->n + nrec > BL_MAX_SENDS) {
        rc = cs_error_set(err, CS_ELIMIT, "", "the baseline needs more than %ld sends on %s",
                          BL_MAX_SENDS, b->t->name);
        goto out;
    }
    long total = tmax + 1;
    for (long k = 0; k < nrec; k++) {
        const bl_rec *r = &rec[k];
        if (r->a < 0)
            continue;
        if (mode == BL_FORWARD)
            rc = bl_push(b, r->chunk, r->a, r->b, b->steps + r->t, CS_OP_COPY);
        else
            rc = bl_push(b, r->chunk, r->b, r->a, b->steps + (int)(total - 1 - r->t),
                         mode == BL_INVERT ? CS_OP_REDUCE : CS_OP_COPY);
        if (rc != CS_OK) {
            rc = cs_error_set(err, CS_ENOMEM, "", "out of memory building a baseline");
            goto out;
        }
    }
    b->steps += (int)total;
out:
    free(ord);
    free(path);
    free(gate);
    free(first);
    free(active);
    free(outdeg);
    bl_arr_free(&arr);
    free(rec);
    return rc;
}

int bl_add_native(bl_builder *b, const bl_lsend *sends, long n, const cs_op *ops, int nsteps,
                  cs_error *err)
{
    for (long i = 0; i < n; i++) {
        const bl_lsend *e = &sends[i];
        if (topology_find_link(b->t, e->src, e->dst) < 0)
            return cs_error_set(err, CS_EUNSUPPORTED, "topology",
                                "this exchange needs a direct link from rank %d to rank %d, "
                                "which %s does not have",
                                e->src, e->dst, b->t->name);
    }
    for (long i = 0; i < n; i++) {
        const bl_lsend *e = &sends[i];
        if (bl_push(b, e->chunk, e->src, e->dst, b->steps + e->lstep, ops[i]) != CS_OK)
            return cs_error_set(err, CS_ENOMEM, "", "out of memory building a baseline");
    }
    b->steps += nsteps;
    return CS_OK;
}

/* Drops steps without sends (routing and pruning can leave some), keeping order. */
static int bl_compact_steps(bl_builder *b)
{
    if (b->steps <= 0)
        return CS_OK;
    int *map = calloc((size_t)b->steps, sizeof *map);
    if (!map)
        return CS_ENOMEM;
    for (long i = 0; i < b->n; i++)
        map[b->s[i].step] = 1;
    int k = 0;
    for (int s = 0; s < b->steps; s++)
        map[s] = map[s] ? k++ : -1;
    for (long i = 0; i < b->n; i++)
        b->s[i].step = map[b->s[i].step];
    b->steps = k;
    free(map);
    return CS_OK;
}

static int bl_finish(bl_builder *b, const cs_collective *c, int chunks, const char *name,
                     cs_algorithm **out, cs_error *err)
{
    int rc = bl_compact_steps(b);
    if (rc != CS_OK)
        return cs_error_set(err, rc, "", "out of memory building a baseline");
    cs_algorithm *a = NULL;
    rc = algorithm_new(c, b->t->name, b->t->ranks, chunks, b->steps, &a, err);
    if (rc != CS_OK)
        return rc;
    snprintf(a->method, sizeof a->method, "%s", name);
    for (long i = 0; i < b->n; i++) {
        const bl_psend *s = &b->s[i];
        rc = algorithm_add_send(a, s->chunk, s->src, s->dst, s->step, (cs_op)s->op);
        if (rc != CS_OK) {
            algorithm_free(a);
            return cs_error_set(err, rc, "", "out of memory building a baseline");
        }
    }
    rc = algorithm_fit_rounds(a, b->t, err);
    if (rc != CS_OK) {
        algorithm_free(a);
        return rc;
    }
    algorithm_sort_sends(a);
    cs_error verr;
    cs_error_clear(&verr);
    rc = algorithm_verify(b->t, a, &verr);
    if (rc != CS_OK) {
        algorithm_free(a);
        if (rc == CS_ENOMEM)
            return cs_error_set(err, rc, "", "out of memory verifying a baseline");
        return cs_error_set(err, CS_EINTERNAL, "",
                            "baseline %s for %s on %s failed verification: %s", name,
                            collective_kind_name(c->kind), b->t->name, verr.message);
    }
    *out = a;
    return CS_OK;
}

int baseline_generate(const char *name, const cs_topology *t, const cs_collective *c,
                      const cs_baseline_options *opt, cs_algorithm **out, cs_error *err)
{
    if (out)
        *out = NULL;
    if (!out || !t || !c)
        return cs_error_set(err, CS_EINVAL, "", "baseline_generate: missing argument");
    const bl_entry *e = bl_find(name);
    if (!e)
        return cs_error_set(err, CS_EINVAL, "method",
                            "unknown baseline '%s' (known: ring, rings, direct, "
                            "recursive-doubling, recursive-halving, binomial-tree, "
                            "double-binary-tree, bine-tree, bine-butterfly)",
                            name ? name : "(null)");
    if (!t->finalized)
        return cs_error_set(err, CS_EINVAL, "topology", "topology is not finalized");
    if (c->kind < 0 || c->kind >= CS_COLL_KIND_COUNT)
        return cs_error_set(err, CS_EINVAL, "collective.kind", "unknown collective kind");
    if (!(e->kinds & K(c->kind)))
        return cs_error_set(err, CS_EUNSUPPORTED, "collective.kind",
                            "baseline %s does not implement %s", name,
                            collective_kind_name(c->kind));
    int chunks_req = opt ? opt->chunks : 0;
    if (chunks_req < 0)
        return cs_error_set(err, CS_EINVAL, "chunks", "chunks must be >= 0, got %d", chunks_req);
    if (chunks_req > 4096)
        return cs_error_set(err, CS_ELIMIT, "chunks", "chunks %d exceeds the limit 4096",
                            chunks_req);
    if (t->ranks < 2)
        return cs_error_set(err, CS_EUNSUPPORTED, "topology",
                            "baselines need at least 2 ranks, %s has %d", t->name, t->ranks);
    /* Refuse at once what cannot fit: every chunk must reach (or leave)
     * P-1 ranks, so this many sends is a lower bound for any schedule. */
    long p1 = t->ranks - 1, cmin = chunks_req > 0 ? chunks_req : 1, need;
    switch (c->kind) {
    case CS_COLL_ALLGATHER:
    case CS_COLL_REDUCESCATTER:
        need = cmin * (p1 + 1) * p1;
        break;
    case CS_COLL_ALLTOALL:
        need = cmin * (p1 + 1) * p1;
        break;
    case CS_COLL_ALLREDUCE:
        need = 2 * cmin * p1;
        break;
    default:
        need = cmin * p1;
    }
    if (need > BL_MAX_SENDS)
        return cs_error_set(err, CS_ELIMIT, chunks_req > 0 ? "chunks" : "topology",
                            "%s %s on %d ranks with %ld chunks needs at least %ld sends, more "
                            "than the limit %ld",
                            name, collective_kind_name(c->kind), t->ranks, cmin, need,
                            BL_MAX_SENDS);
    cs_collective cc;
    int rc = collective_copy(&cc, c, err);
    if (rc != CS_OK)
        return rc;
    rc = collective_validate(&cc, t->ranks, err);
    if (rc != CS_OK) {
        collective_free(&cc);
        return rc;
    }
    bl_request rq = {t, &cc, t->ranks, collective_kind_is_rooted(cc.kind) ? cc.root : 0,
                     chunks_req, bl_infos[bl_index(name)].name};
    bl_builder b;
    rc = bl_builder_init(&b, t);
    int chunks = 0;
    if (rc != CS_OK)
        rc = cs_error_set(err, rc, "", "out of memory");
    else
        rc = e->gen(&rq, &b, &chunks, err);
    if (rc == CS_OK)
        rc = bl_finish(&b, &cc, chunks, rq.name, out, err);
    bl_builder_free(&b);
    collective_free(&cc);
    return rc;
}
