/*
 * codegen_plan.c - the lowering shared by the MSCCL XML and CUDA generators:
 * buffer slots, channels, per-rank local operations with their hazards, and
 * push-model tasks.  See codegen_plan.h for the design and the argument why
 * the resulting order cannot deadlock.
 *
 * Memory is proportional to the sends plus the (rank, slot) pairs actually
 * touched: locations and slot states live in hash maps, not dense tables, so
 * large TACOS schedules lower without materializing ranks x chunks arrays.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen_plan.h"

/* ---- growable string ----------------------------------------------------- */

static bool buf_reserve(cg_buf *b, size_t extra)
{
    if (b->failed)
        return false;
    if (b->len + extra + 1 <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *s = realloc(b->s, cap);
    if (!s) {
        b->failed = true;
        return false;
    }
    b->s = s;
    b->cap = cap;
    return true;
}

void cg_printf(cg_buf *b, const char *fmt, ...)
{
    char small[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = true;
        return;
    }
    if (!buf_reserve(b, (size_t)n))
        return;
    if ((size_t)n < sizeof small) {
        memcpy(b->s + b->len, small, (size_t)n + 1);
    } else {
        va_start(ap, fmt);
        vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    b->len += (size_t)n;
}

void cg_puts(cg_buf *b, const char *s)
{
    size_t n = strlen(s);
    if (!buf_reserve(b, n))
        return;
    memcpy(b->s + b->len, s, n + 1);
    b->len += n;
}

/* ---- layouts ------------------------------------------------------------- */

int codegen_in_offset(cs_coll_kind kind, int P, int C, long g, int rank)
{
    (void)rank;
    switch (kind) {
    case CS_COLL_ALLGATHER:
    case CS_COLL_GATHER:
        return (int)(g / P);
    case CS_COLL_REDUCESCATTER:
    case CS_COLL_SCATTER:
        return (int)((g % P) * C + g / P);
    case CS_COLL_ALLTOALL:
        return (int)(((g / P) % P) * C + g / ((long)P * P));
    default:
        return (int)g;
    }
}

int codegen_out_offset(cs_coll_kind kind, int P, int C, long g, int rank)
{
    (void)rank;
    switch (kind) {
    case CS_COLL_ALLGATHER:
    case CS_COLL_GATHER:
        return (int)((g % P) * C + g / P);
    case CS_COLL_REDUCESCATTER:
    case CS_COLL_SCATTER:
        return (int)(g / P);
    case CS_COLL_ALLTOALL:
        return (int)((g % P) * C + g / ((long)P * P));
    default:
        return (int)g;
    }
}

/* ---- a small open-addressing hash map: uint64 -> long -------------------- */

typedef struct hmap {
    uint64_t *keys; /* stored as key + 1; 0 = empty */
    long *vals;
    size_t cap, n;
} hmap;

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static long hmap_get(const hmap *m, uint64_t key)
{
    if (!m->cap)
        return -1;
    size_t mask = m->cap - 1, i = mix64(key) & mask;
    while (m->keys[i]) {
        if (m->keys[i] == key + 1)
            return m->vals[i];
        i = (i + 1) & mask;
    }
    return -1;
}

static int hmap_put(hmap *m, uint64_t key, long val)
{
    if ((m->n + 1) * 2 > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 1024;
        uint64_t *keys = calloc(cap, sizeof *keys);
        long *vals = malloc(cap * sizeof *vals);
        if (!keys || !vals) {
            free(keys);
            free(vals);
            return CS_ENOMEM;
        }
        for (size_t j = 0; j < m->cap; j++) {
            if (!m->keys[j])
                continue;
            size_t i = mix64(m->keys[j] - 1) & (cap - 1);
            while (keys[i])
                i = (i + 1) & (cap - 1);
            keys[i] = m->keys[j];
            vals[i] = m->vals[j];
        }
        free(m->keys);
        free(m->vals);
        m->keys = keys;
        m->vals = vals;
        m->cap = cap;
    }
    size_t mask = m->cap - 1, i = mix64(key) & mask;
    while (m->keys[i]) {
        if (m->keys[i] == key + 1) {
            m->vals[i] = val;
            return CS_OK;
        }
        i = (i + 1) & mask;
    }
    m->keys[i] = key + 1;
    m->vals[i] = val;
    m->n++;
    return CS_OK;
}

static void hmap_free(hmap *m)
{
    free(m->keys);
    free(m->vals);
}

/* ---- keys ---------------------------------------------------------------- */

int cg_key_cmp(const cg_key *x, const cg_key *y)
{
    if (x->major != y->major)
        return x->major < y->major ? -1 : 1;
    if (x->minor != y->minor)
        return x->minor < y->minor ? -1 : 1;
    if (x->phase != y->phase)
        return x->phase < y->phase ? -1 : 1;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    return 0;
}

/* ---- builder state -------------------------------------------------------- */

typedef struct slot_state {
    long last_writer; /* lop id or -1 */
    long readers;     /* head of a list in the reader pool, -1 empty */
} slot_state;

typedef struct reader_node {
    long lop;
    long next;
} reader_node;

typedef struct event {
    double t;
    cg_key key;
    long xfer;
    int is_write;
} event;

typedef struct builder {
    const cs_algorithm *a;
    cs_collective coll;     /* validated copy */
    cg_plan *p;
    int P, C;
    long G;
    int *chan;              /* per send */
    long *minor;            /* per send */
    double *rt, *wt;        /* semantic read / write time per send */
    long *send_lop;         /* per send */
    unsigned char *landed;  /* per send */
    hmap locmap;            /* (rank, chunk) -> index into locs */
    cg_slot *locs;
    long nlocs, caplocs;
    hmap slotmap;           /* (rank, canonical slot) -> index into states */
    slot_state *states;
    long nstates, capstates;
    reader_node *readers;
    long nreaders, capreaders;
    long caplops, capdeps, captasks;
    int spread;             /* channels per lane */
    cs_error *err;
} builder;

#define GROW(arr, n, cap, type)                                                   \
    do {                                                                          \
        if ((n) >= (cap)) {                                                       \
            long nc_ = (cap) ? (cap) * 2 : 256;                                   \
            type *na_ = realloc((arr), (size_t)nc_ * sizeof(type));               \
            if (!na_)                                                             \
                return CS_ENOMEM;                                                 \
            (arr) = na_;                                                          \
            (cap) = nc_;                                                          \
        }                                                                         \
    } while (0)

static bool kind_inplace(cs_coll_kind k)
{
    return k == CS_COLL_ALLGATHER || k == CS_COLL_REDUCESCATTER || k == CS_COLL_ALLREDUCE ||
           k == CS_COLL_BROADCAST || k == CS_COLL_REDUCE;
}

/* The slot's identity for hazards: i slots that alias an o slot in place are
 * the o slot. */
static uint64_t canon(const builder *b, int rank, cg_slot s)
{
    long id;
    if (s.buf == 'o') {
        id = 3L * s.off;
    } else if (s.buf == 'i') {
        id = 3L * s.off + 1;
        if (b->p->inplace) {
            long alias = -1;
            switch (b->p->kind) {
            case CS_COLL_ALLGATHER:
                alias = (long)rank * b->C + s.off;
                break;
            case CS_COLL_REDUCESCATTER:
                if (s.off >= (long)rank * b->C && s.off < (long)(rank + 1) * b->C)
                    alias = s.off - (long)rank * b->C;
                break;
            default:
                alias = s.off;
                break;
            }
            if (alias >= 0)
                id = 3L * alias;
        }
    } else {
        id = 3L * s.off + 2;
    }
    return ((uint64_t)rank << 42) ^ (uint64_t)id;
}

static int loc_get(builder *b, int rank, long g, cg_slot *out)
{
    long idx = hmap_get(&b->locmap, ((uint64_t)rank << 42) ^ (uint64_t)g);
    if (idx >= 0) {
        *out = b->locs[idx];
        return CS_OK;
    }
    out->buf = 0;
    out->off = 0;
    if (collective_pre(&b->coll, b->P, b->C, g, rank)) {
        out->buf = 'i';
        out->off = codegen_in_offset(b->p->kind, b->P, b->C, g, rank);
    }
    return CS_OK;
}

static int loc_set(builder *b, int rank, long g, cg_slot s)
{
    uint64_t key = ((uint64_t)rank << 42) ^ (uint64_t)g;
    long idx = hmap_get(&b->locmap, key);
    if (idx >= 0) {
        b->locs[idx] = s;
        return CS_OK;
    }
    GROW(b->locs, b->nlocs, b->caplocs, cg_slot);
    b->locs[b->nlocs] = s;
    return hmap_put(&b->locmap, key, b->nlocs++);
}

/* Index of the state of (rank, slot), created on first use. */
static long state_of(builder *b, int rank, cg_slot s, int *rc)
{
    uint64_t key = canon(b, rank, s);
    long idx = hmap_get(&b->slotmap, key);
    if (idx >= 0)
        return idx;
    if (b->nstates >= b->capstates) {
        long nc = b->capstates ? b->capstates * 2 : 256;
        slot_state *ns = realloc(b->states, (size_t)nc * sizeof *ns);
        if (!ns) {
            *rc = CS_ENOMEM;
            return -1;
        }
        b->states = ns;
        b->capstates = nc;
    }
    b->states[b->nstates].last_writer = -1;
    b->states[b->nstates].readers = -1;
    if ((*rc = hmap_put(&b->slotmap, key, b->nstates)) != CS_OK)
        return -1;
    return b->nstates++;
}

static int add_reader(builder *b, long st, long lop)
{
    GROW(b->readers, b->nreaders, b->capreaders, reader_node);
    b->readers[b->nreaders].lop = lop;
    b->readers[b->nreaders].next = b->states[st].readers;
    b->states[st].readers = b->nreaders++;
    return CS_OK;
}

static int new_lop(builder *b, long *id)
{
    cg_plan *p = b->p;
    GROW(p->lops, p->nlops, b->caplops, cg_lop);
    memset(&p->lops[p->nlops], 0, sizeof(cg_lop));
    p->lops[p->nlops].peer = -1;
    p->lops[p->nlops].xfer = -1;
    p->lops[p->nlops].task = -1;
    p->lops[p->nlops].dep_begin = p->ndeps;
    *id = p->nlops++;
    return CS_OK;
}

/* Appends dep to lop's list (which must be the last one being built). */
static int add_dep(builder *b, long lop, long dep)
{
    cg_plan *p = b->p;
    if (dep < 0 || dep == lop)
        return CS_OK;
    cg_lop *l = &p->lops[lop];
    for (long k = l->dep_begin; k < p->ndeps; k++)
        if (p->deps[k] == dep)
            return CS_OK;
    GROW(p->deps, p->ndeps, b->capdeps, long);
    p->deps[p->ndeps++] = dep;
    p->lops[lop].ndeps++;
    return CS_OK;
}

static int add_task(builder *b, long lop, long recv_lop, int exec_rank, int flag_rank)
{
    cg_plan *p = b->p;
    GROW(p->tasks, p->ntasks, b->captasks, cg_task);
    p->tasks[p->ntasks] = (cg_task){lop, recv_lop, exec_rank, flag_rank};
    p->lops[lop].task = p->ntasks;
    if (recv_lop >= 0)
        p->lops[recv_lop].task = p->ntasks;
    p->ntasks++;
    return CS_OK;
}

/* ---- channels and keys ---------------------------------------------------- */

/* Sort records carry their own keys: qsort has no context argument and the
 * library keeps no global state. */
typedef struct send_rec {
    int src, dst, step;
    double start;
    long chunk;
    long idx;
} send_rec;

static int cmp_untimed(const void *x, const void *y)
{
    const send_rec *a = x, *b = y;
    if (a->src != b->src) return a->src < b->src ? -1 : 1;
    if (a->dst != b->dst) return a->dst < b->dst ? -1 : 1;
    if (a->step != b->step) return a->step < b->step ? -1 : 1;
    if (a->chunk != b->chunk) return a->chunk < b->chunk ? -1 : 1;
    return a->idx < b->idx ? -1 : (a->idx > b->idx);
}

static int cmp_timed(const void *x, const void *y)
{
    const send_rec *a = x, *b = y;
    if (a->src != b->src) return a->src < b->src ? -1 : 1;
    if (a->dst != b->dst) return a->dst < b->dst ? -1 : 1;
    if (a->start != b->start) return a->start < b->start ? -1 : 1;
    return a->idx < b->idx ? -1 : (a->idx > b->idx);
}

static int assign_channels(builder *b, const cs_topology *t)
{
    const cs_algorithm *a = b->a;
    long n = a->nsends;
    send_rec *rec = malloc((size_t)(n ? n : 1) * sizeof *rec);
    long *idx = malloc((size_t)(n ? n : 1) * sizeof *idx);
    double *ends = NULL;
    long capends = 0;
    if (!idx || !rec) {
        free(idx);
        free(rec);
        return CS_ENOMEM;
    }
    for (long k = 0; k < n; k++) {
        const cs_send sv = algorithm_send(a, k), *s = &sv;
        rec[k] = (send_rec){s->src, s->dst, s->step, s->start_us, s->chunk, k};
    }
    qsort(rec, (size_t)n, sizeof *rec, b->p->timed ? cmp_timed : cmp_untimed);
    for (long k = 0; k < n; k++)
        idx[k] = rec[k].idx;
    free(rec);
    int maxchan = 0;
    for (long k = 0; k < n;) {
        const cs_send sv0 = algorithm_send(a, idx[k]), *s0 = &sv0;
        int lanes = 1;
        if (t) {
            int li = topology_find_link(t, s0->src, s0->dst);
            if (li >= 0 && t->links[li].lanes > 1)
                lanes = t->links[li].lanes;
        }
        long e = k;
        while (e < n && algorithm_send_src(a, idx[e]) == s0->src &&
               algorithm_send_dst(a, idx[e]) == s0->dst)
            e++;
        if (!b->p->timed) {
            long j = 0;
            for (long q = k; q < e; q++) {
                if (q > k && algorithm_send_step(a, idx[q]) != algorithm_send_step(a, idx[q - 1]))
                    j = 0;
                b->chan[idx[q]] = (int)(j % lanes);
                b->minor[idx[q]] = j / lanes;
                j++;
            }
        } else {
            long nch = 0;
            for (long q = k; q < e; q++) {
                long x = idx[q];
                long c = 0;
                while (c < nch && ends[c] > b->rt[x] + 1e-9)
                    c++;
                if (c == nch) {
                    if (nch >= capends) {
                        long nc = capends ? capends * 2 : 16;
                        double *ne = realloc(ends, (size_t)nc * sizeof *ne);
                        if (!ne) {
                            free(idx);
                            free(ends);
                            return CS_ENOMEM;
                        }
                        ends = ne;
                        capends = nc;
                    }
                    nch++;
                }
                ends[c] = b->wt[x];
                b->chan[x] = (int)c;
                b->minor[x] = 0;
            }
        }
        if (b->spread > 1) {
            /* deal each channel's messages, in order, over `spread` channels:
             * a subsequence of a channel keeps its order properties */
            int nbase = 0;
            for (long q = k; q < e; q++)
                if (b->chan[idx[q]] + 1 > nbase)
                    nbase = b->chan[idx[q]] + 1;
            long *ord = calloc((size_t)nbase, sizeof *ord);
            if (!ord) {
                free(idx);
                free(ends);
                return CS_ENOMEM;
            }
            for (long q = k; q < e; q++) {
                int base = b->chan[idx[q]];
                b->chan[idx[q]] = base * b->spread + (int)(ord[base]++ % b->spread);
            }
            free(ord);
        }
        for (long q = k; q < e; q++)
            if (b->chan[idx[q]] > maxchan)
                maxchan = b->chan[idx[q]];
        k = e;
    }
    b->p->nchannels = maxchan + 1;
    free(idx);
    free(ends);
    return CS_OK;
}

static int cmp_event(const void *x, const void *y)
{
    const event *a = x, *b = y;
    if (a->t != b->t)
        return a->t < b->t ? -1 : 1;
    return cg_key_cmp(&a->key, &b->key);
}

/* ---- event processing ----------------------------------------------------- */

static cg_key send_key(const builder *b, long x)
{
    const cs_send sv = algorithm_send(b->a, x), *s = &sv;
    if (b->p->timed)
        return (cg_key){b->rt[x], 0, 1, x};
    return (cg_key){s->step, b->minor[x], 0, x};
}

static cg_key recv_key(const builder *b, long x)
{
    const cs_send sv = algorithm_send(b->a, x), *s = &sv;
    if (b->p->timed)
        return (cg_key){b->wt[x], 0, 0, x};
    return (cg_key){s->step, b->minor[x], 1, x};
}

static int do_read(builder *b, long x)
{
    const cs_send sv = algorithm_send(b->a, x), *s = &sv;
    cg_slot L;
    int rc = loc_get(b, s->src, s->chunk, &L);
    if (rc != CS_OK)
        return rc;
    if (!L.buf)
        return cs_error_set(b->err, CS_EINVAL, "sends", "send %ld: rank %d does not hold chunk %ld "
                            "when it sends it in step %d (verify the algorithm first)",
                            x, s->src, s->chunk, s->step);
    long id;
    if ((rc = new_lop(b, &id)) != CS_OK)
        return rc;
    cg_lop *l = &b->p->lops[id];
    l->kind = CG_SEND;
    l->rank = s->src;
    l->peer = s->dst;
    l->chan = b->chan[x];
    l->op = s->op;
    l->xfer = x;
    l->key = send_key(b, x);
    l->src = L;
    long st = state_of(b, s->src, L, &rc);
    if (st < 0)
        return rc;
    if ((rc = add_dep(b, id, b->states[st].last_writer)) != CS_OK)
        return rc;
    if ((rc = add_reader(b, st, id)) != CS_OK)
        return rc;
    b->send_lop[x] = id;
    return CS_OK;
}

static bool post_at(const builder *b, int rank, long g)
{
    return collective_post(&b->coll, b->P, b->C, g, rank);
}

static int do_write(builder *b, long x)
{
    const cs_send sv = algorithm_send(b->a, x), *s = &sv;
    cg_plan *p = b->p;
    int rc = CS_OK;
    int op = s->op;
    cg_slot red = {0, 0}, target = {0, 0};
    if (op == CS_OP_REDUCE) {
        if ((rc = loc_get(b, s->dst, s->chunk, &red)) != CS_OK)
            return rc;
        if (!red.buf)
            op = CS_OP_COPY;
    }
    if (post_at(b, s->dst, s->chunk)) {
        target.buf = 'o';
        target.off = codegen_out_offset(p->kind, b->P, b->C, s->chunk, s->dst);
        long st = state_of(b, s->dst, target, &rc);
        if (st < 0)
            return rc;
        for (long r = b->states[st].readers; r >= 0; r = b->readers[r].next) {
            const cg_lop *rl = &p->lops[b->readers[r].lop];
            if (rl->kind == CG_SEND && !b->landed[rl->xfer]) {
                target.buf = 0; /* still being read by a transfer in flight */
                break;
            }
        }
    }
    if (!target.buf) {
        target.buf = 's';
        target.off = p->s_chunks[s->dst]++;
    }
    long id;
    if ((rc = new_lop(b, &id)) != CS_OK)
        return rc;
    cg_lop *l = &p->lops[id];
    long sl = b->send_lop[x];
    l->kind = CG_RECV;
    l->rank = s->dst;
    l->peer = s->src;
    l->chan = b->chan[x];
    l->op = op;
    l->xfer = x;
    l->key = recv_key(b, x);
    l->src = p->lops[sl].src;
    l->dst = target;
    l->red = op == CS_OP_REDUCE ? red : (cg_slot){0, 0};
    p->lops[sl].dst = target;
    if (op == CS_OP_REDUCE) {
        long sr = state_of(b, s->dst, red, &rc);
        if (sr < 0)
            return rc;
        if ((rc = add_dep(b, id, b->states[sr].last_writer)) != CS_OK)
            return rc;
        if ((rc = add_reader(b, sr, id)) != CS_OK)
            return rc;
    }
    long st = state_of(b, s->dst, target, &rc);
    if (st < 0)
        return rc;
    if ((rc = add_dep(b, id, b->states[st].last_writer)) != CS_OK)
        return rc;
    for (long r = b->states[st].readers; r >= 0; r = b->readers[r].next)
        if ((rc = add_dep(b, id, b->readers[r].lop)) != CS_OK)
            return rc;
    b->states[st].last_writer = id;
    b->states[st].readers = -1;
    b->landed[x] = 1;
    if ((rc = loc_set(b, s->dst, s->chunk, target)) != CS_OK)
        return rc;
    return add_task(b, sl, id, s->src, s->dst);
}

static int final_copy(builder *b, int rank, long g, long *ncopies)
{
    cg_plan *p = b->p;
    cg_slot L, H = {'o', codegen_out_offset(p->kind, b->P, b->C, g, rank)};
    int rc = loc_get(b, rank, g, &L);
    if (rc != CS_OK)
        return rc;
    if (!L.buf)
        return cs_error_set(b->err, CS_EINVAL, "sends",
                            "rank %d never receives chunk %ld that it must hold at the end "
                            "(verify the algorithm first)", rank, g);
    if (L.buf == H.buf && L.off == H.off)
        return CS_OK;
    long id;
    if ((rc = new_lop(b, &id)) != CS_OK)
        return rc;
    cg_lop *l = &p->lops[id];
    l->kind = CG_COPY;
    l->rank = rank;
    l->op = CS_OP_COPY;
    l->key = (cg_key){INFINITY, 0, 0, (*ncopies)++};
    l->src = L;
    l->dst = H;
    long sl = state_of(b, rank, L, &rc);
    if (sl < 0)
        return rc;
    if ((rc = add_dep(b, id, b->states[sl].last_writer)) != CS_OK)
        return rc;
    if ((rc = add_reader(b, sl, id)) != CS_OK)
        return rc;
    long sh = state_of(b, rank, H, &rc);
    if (sh < 0)
        return rc;
    if (canon(b, rank, L) != canon(b, rank, H)) {
        if ((rc = add_dep(b, id, b->states[sh].last_writer)) != CS_OK)
            return rc;
        for (long r = b->states[sh].readers; r >= 0; r = b->readers[r].next)
            if ((rc = add_dep(b, id, b->readers[r].lop)) != CS_OK)
                return rc;
    }
    /* else: an input slot copied to the output slot it is in place: the same
     * memory and the same value in place, different memory out of place, so
     * the sends still reading the input need not be waited for */
    b->states[sh].last_writer = id;
    b->states[sh].readers = -1;
    if ((rc = loc_set(b, rank, g, H)) != CS_OK)
        return rc;
    return add_task(b, id, -1, rank, rank);
}

static int final_copies(builder *b)
{
    long ncopies = 0;
    int rc = CS_OK;
    int P = b->P;
    for (long g = 0; g < b->G && rc == CS_OK; g++) {
        switch (b->p->kind) {
        case CS_COLL_ALLGATHER:
        case CS_COLL_BROADCAST:
        case CS_COLL_ALLREDUCE:
            for (int r = 0; r < P && rc == CS_OK; r++)
                rc = final_copy(b, r, g, &ncopies);
            break;
        case CS_COLL_REDUCESCATTER:
        case CS_COLL_SCATTER:
            rc = final_copy(b, (int)(g % P), g, &ncopies);
            break;
        case CS_COLL_GATHER:
        case CS_COLL_REDUCE:
            rc = final_copy(b, b->p->root, g, &ncopies);
            break;
        case CS_COLL_ALLTOALL:
            rc = final_copy(b, (int)((g / P) % P), g, &ncopies);
            break;
        default:
            for (int r = 0; r < P && rc == CS_OK; r++)
                if (post_at(b, r, g))
                    rc = final_copy(b, r, g, &ncopies);
            break;
        }
    }
    return rc;
}

/* ---- per-rank order and self-checks ------------------------------------- */

typedef struct lop_rec {
    cg_key key;
    long id;
} lop_rec;

static int cmp_lop(const void *x, const void *y)
{
    return cg_key_cmp(&((const lop_rec *)x)->key, &((const lop_rec *)y)->key);
}

static int order_ranks(builder *b)
{
    cg_plan *p = b->p;
    p->rank_begin = calloc((size_t)p->ranks + 1, sizeof(long));
    p->rank_lops = malloc((size_t)(p->nlops ? p->nlops : 1) * sizeof(long));
    if (!p->rank_begin || !p->rank_lops)
        return CS_ENOMEM;
    for (long k = 0; k < p->nlops; k++)
        p->rank_begin[p->lops[k].rank + 1]++;
    for (int r = 0; r < p->ranks; r++)
        p->rank_begin[r + 1] += p->rank_begin[r];
    long *fill = malloc((size_t)p->ranks * sizeof(long));
    if (!fill)
        return CS_ENOMEM;
    for (int r = 0; r < p->ranks; r++)
        fill[r] = p->rank_begin[r];
    for (long k = 0; k < p->nlops; k++)
        p->rank_lops[fill[p->lops[k].rank]++] = k;
    free(fill);
    lop_rec *rec = malloc((size_t)(p->nlops ? p->nlops : 1) * sizeof *rec);
    if (!rec)
        return CS_ENOMEM;
    for (int r = 0; r < p->ranks; r++) {
        long lo = p->rank_begin[r], hi = p->rank_begin[r + 1];
        for (long k = lo; k < hi; k++)
            rec[k - lo] = (lop_rec){p->lops[p->rank_lops[k]].key, p->rank_lops[k]};
        qsort(rec, (size_t)(hi - lo), sizeof *rec, cmp_lop);
        for (long k = lo; k < hi; k++)
            p->rank_lops[k] = rec[k - lo].id;
    }
    free(rec);
    /* The deadlock-freedom argument needs every dependency to point back. */
    for (long k = 0; k < p->nlops; k++) {
        const cg_lop *l = &p->lops[k];
        for (int d = 0; d < l->ndeps; d++) {
            const cg_lop *dl = &p->lops[p->deps[l->dep_begin + d]];
            if (dl->rank != l->rank || cg_key_cmp(&dl->key, &l->key) >= 0 || dl->task >= l->task)
                return cs_error_set(b->err, CS_EINTERNAL, "",
                                    "lowering produced a forward dependency on rank %d", l->rank);
        }
    }
    return CS_OK;
}

/* ---- entry points ------------------------------------------------------------ */

void codegen_plan_free(cg_plan *p)
{
    if (!p)
        return;
    free(p->s_chunks);
    free(p->lops);
    free(p->deps);
    free(p->rank_begin);
    free(p->rank_lops);
    free(p->tasks);
    free(p);
}

static int plan_sizes(cg_plan *p)
{
    int P = p->ranks, C = p->chunks;
    switch (p->kind) {
    case CS_COLL_ALLGATHER:
    case CS_COLL_GATHER:
        p->i_chunks = C;
        p->o_chunks = P * C;
        break;
    case CS_COLL_REDUCESCATTER:
    case CS_COLL_SCATTER:
        p->i_chunks = P * C;
        p->o_chunks = C;
        break;
    case CS_COLL_ALLTOALL:
        p->i_chunks = p->o_chunks = P * C;
        break;
    default:
        p->i_chunks = p->o_chunks = (int)p->global_chunks;
        break;
    }
    return CS_OK;
}

int codegen_plan_build(const cs_algorithm *a, const cs_topology *t, cg_plan **out, cs_error *err)
{
    return codegen_plan_build_spread(a, t, 1, out, err);
}

int codegen_plan_build_spread(const cs_algorithm *a, const cs_topology *t, int spread,
                              cg_plan **out, cs_error *err)
{
    *out = NULL;
    if (spread < 1 || spread > 1024)
        return cs_error_set(err, CS_EINVAL, "spread", "channels per lane must be 1..1024");
    if (!a)
        return cs_error_set(err, CS_EINVAL, "algorithm", "no algorithm");
    if (a->ranks < 1 || a->chunks < 1)
        return cs_error_set(err, CS_EINVAL, "ranks", "algorithm has %d ranks and %d chunks",
                            a->ranks, a->chunks);
    if (t && t->ranks != a->ranks)
        return cs_error_set(err, CS_EINVAL, "topology", "topology has %d ranks, algorithm %d",
                            t->ranks, a->ranks);
    long G = collective_global_chunks(&a->collective, a->ranks, a->chunks);
    if (G < 1 || G > (1L << 30) || (long)a->ranks * a->chunks > (1L << 30))
        return cs_error_set(err, CS_ELIMIT, "chunks", "%ld global chunks is too many to lower", G);
    builder b;
    memset(&b, 0, sizeof b);
    b.a = a;
    b.err = err;
    b.P = a->ranks;
    b.C = a->chunks;
    b.G = G;
    b.spread = spread;
    int rc = collective_copy(&b.coll, &a->collective, err);
    if (rc != CS_OK)
        return rc;
    if ((rc = collective_validate(&b.coll, a->ranks, err)) != CS_OK) {
        collective_free(&b.coll);
        return rc;
    }
    cg_plan *p = calloc(1, sizeof *p);
    long n = a->nsends;
    size_t nn = (size_t)(n ? n : 1);
    b.p = p;
    if (!p)
        goto nomem;
    p->kind = a->collective.kind;
    p->root = a->collective.root;
    p->ranks = a->ranks;
    p->chunks = a->chunks;
    p->global_chunks = G;
    p->timed = n > 0 && algorithm_is_timed(a);
    p->inplace = kind_inplace(p->kind);
    plan_sizes(p);
    p->s_chunks = calloc((size_t)a->ranks, sizeof(int));
    b.chan = malloc(nn * sizeof(int));
    b.minor = malloc(nn * sizeof(long));
    b.rt = malloc(nn * sizeof(double));
    b.wt = malloc(nn * sizeof(double));
    b.send_lop = malloc(nn * sizeof(long));
    b.landed = calloc(nn, 1);
    event *ev = malloc(2 * nn * sizeof(event));
    if (!p->s_chunks || !b.chan || !b.minor || !b.rt || !b.wt || !b.send_lop || !b.landed || !ev) {
        free(ev);
        goto nomem;
    }
    for (long x = 0; x < n; x++) {
        const cs_send sv = algorithm_send(a, x), *s = &sv;
        if (s->src < 0 || s->src >= a->ranks || s->dst < 0 || s->dst >= a->ranks ||
            s->src == s->dst || s->chunk < 0 || s->chunk >= G) {
            free(ev);
            rc = cs_error_set(err, CS_EINVAL, "sends", "send %ld is out of range "
                              "(chunk %ld, src %d, dst %d)", x, s->chunk, s->src, s->dst);
            goto fail;
        }
        if (p->timed) {
            b.rt[x] = s->start_us;
            b.wt[x] = s->end_us - 2e-6;
            if (!(b.wt[x] > b.rt[x]))
                b.wt[x] = b.rt[x] + 1e-9;
        } else {
            b.rt[x] = 2.0 * s->step;
            b.wt[x] = 2.0 * s->step + 1;
        }
    }
    if ((rc = assign_channels(&b, t)) != CS_OK) {
        free(ev);
        goto fail;
    }
    for (long x = 0; x < n; x++) {
        ev[2 * x] = (event){b.rt[x], send_key(&b, x), x, 0};
        ev[2 * x + 1] = (event){b.wt[x], recv_key(&b, x), x, 1};
    }
    qsort(ev, (size_t)(2 * n), sizeof *ev, cmp_event);
    for (long k = 0; k < 2 * n && rc == CS_OK; k++)
        rc = ev[k].is_write ? do_write(&b, ev[k].xfer) : do_read(&b, ev[k].xfer);
    free(ev);
    if (rc == CS_OK)
        rc = final_copies(&b);
    if (rc == CS_OK)
        rc = order_ranks(&b);
    if (rc != CS_OK)
        goto fail;
    goto done;
nomem:
    rc = cs_error_set(err, CS_ENOMEM, "", "out of memory lowering the algorithm");
fail:
    if (rc == CS_ENOMEM && err && err->code != CS_ENOMEM)
        cs_error_set(err, CS_ENOMEM, "", "out of memory lowering the algorithm");
    codegen_plan_free(p);
    p = NULL;
done:
    free(b.chan);
    free(b.minor);
    free(b.rt);
    free(b.wt);
    free(b.send_lop);
    free(b.landed);
    hmap_free(&b.locmap);
    hmap_free(&b.slotmap);
    free(b.locs);
    free(b.states);
    free(b.readers);
    collective_free(&b.coll);
    *out = p;
    return rc;
}
