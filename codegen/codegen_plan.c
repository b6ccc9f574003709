/*
 * codegen_plan.c - the lowering shared by the MSCCL XML and CUDA generators:
 * buffer slots, channels, per-rank local operations with their hazards, and
 * push-model tasks.  See codegen_plan.h for the design and the argument why
 * the resulting order cannot deadlock.
 *
 * A plan covers the sends incident to its core ranks only, so memory is
 * proportional to those sends plus the (rank, slot) pairs they touch:
 * locations and slot states live in hash maps, not dense tables, so large
 * TACOS schedules lower without materializing ranks x chunks arrays.
 */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen_channels.h"
#include "codegen_plan.h"

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

/* ---- keys ---------------------------------------------------------------- */

int cg_transfer_cmp(const cg_key *x, const cg_key *y)
{
    if (x->major != y->major)
        return x->major < y->major ? -1 : 1;
    if (x->minor != y->minor)
        return x->minor < y->minor ? -1 : 1;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    return 0;
}

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

/* An event of a transfer: its read (the send's key) or its landing (the
 * receive's key).  Ordered by (t, key); given t the key's major part is
 * fixed, so (t, minor, phase, send index) is the same order, packed small
 * for sorting. */
typedef struct event {
    double t;
    long minor;
    uint64_t order;   /* phase << 62 | send index */
    long xw;          /* transfer * 2 + (1 for the landing) */
} event;

/* Locations larger than this many chunks live in a hash map, not an array. */
#define DENSE_CHUNKS (1L << 22)

typedef struct builder {
    const cs_algorithm *a;
    const cg_summary *sum;
    cs_collective coll;     /* validated copy */
    cg_plan *p;
    int P, C;
    long G;
    bool full;              /* every rank core: tasks too */
    /* per transfer (index into p->xfers): what the lowering reads of its
     * send, copied once in send order so the rank-by-rank passes do not
     * wander over the whole algorithm */
    struct xinfo {
        long chunk;
        int src, dst, step, op;
    } *xi;
    int *chan;
    long *minor;
    double *rt, *wt;        /* semantic read / write time */
    /* Runs (the units assign_channels deals: neighbouring chunks of one link
     * that may move as one step): each transfer's run, by the index of its
     * first transfer, its position in it, and per first transfer the run's
     * length, where its scratch slots start and the first position they are
 * for (run_first -1: none reserved yet).  A
     * run whose receives park values in scratch gets consecutive scratch
     * slots, so its steps can merge (reduce-scatter's rrc receives). */
    int *run_lead;          /* transfer ids and operation ids are below INT_MAX (checked) */
    int *run_pos, *run_len, *run_off, *run_first;
    int *send_lop;          /* -1 when the sender is not core */
    int *recv_lop;          /* -1 when the receiver is not core */
    unsigned char *landed;
    /* The rank being lowered.  A rank's slots and locations change only
     * through its own events, so ranks are lowered one after the other with
     * their state in arrays reused (and reset through touched lists). */
    int cur;
    bool dense_loc;
    cg_slot *loc;           /* per chunk, buf 0: still where the precondition put it */
    cg_hmap locmap;         /* chunk -> index into locs (when not dense) */
    cg_slot *locs;
    long nlocs, caplocs;
    long *touched;          /* chunks whose loc was set */
    long ntouched, captouched;
    slot_state *states;     /* o slots, then i slots, then scratch slots */
    long nio, capstates;
    long *stouched;         /* o/i states used */
    long nstouched, capstouched;
    reader_node *readers;
    long nreaders, capreaders;
    long caplops, capdeps, captasks;
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

/* The slot's identity for hazards on the current rank: o slots, then i
 * slots, then scratch; i slots that alias an o slot in place are the o
 * slot. */
static long canon(const builder *b, cg_slot s)
{
    const cg_plan *p = b->p;
    if (s.buf == 'o')
        return s.off;
    if (s.buf == 'i') {
        if (p->inplace) {
            long alias = -1;
            switch (p->kind) {
            case CS_COLL_ALLGATHER:
                alias = (long)b->cur * b->C + s.off;
                break;
            case CS_COLL_REDUCESCATTER:
                if (s.off >= (long)b->cur * b->C && s.off < (long)(b->cur + 1) * b->C)
                    alias = s.off - (long)b->cur * b->C;
                break;
            default:
                alias = s.off;
                break;
            }
            if (alias >= 0)
                return alias;
        }
        return (long)p->o_chunks + s.off;
    }
    return b->nio + s.off;
}

static cg_slot loc_get(const builder *b, long g)
{
    cg_slot out = {0, 0};
    if (b->dense_loc) {
        out = b->loc[g];
    } else {
        long idx = cg_hmap_get(&b->locmap, (uint64_t)g);
        if (idx >= 0)
            out = b->locs[idx];
    }
    if (!out.buf && collective_pre(&b->coll, b->P, b->C, g, b->cur)) {
        out.buf = 'i';
        out.off = codegen_in_offset(b->p->kind, b->P, b->C, g, b->cur);
    }
    return out;
}

static int loc_set(builder *b, long g, cg_slot s)
{
    if (b->dense_loc) {
        if (!b->loc[g].buf) {
            GROW(b->touched, b->ntouched, b->captouched, long);
            b->touched[b->ntouched++] = g;
        }
        b->loc[g] = s;
        return CS_OK;
    }
    long idx = cg_hmap_get(&b->locmap, (uint64_t)g);
    if (idx >= 0) {
        b->locs[idx] = s;
        return CS_OK;
    }
    GROW(b->locs, b->nlocs, b->caplocs, cg_slot);
    b->locs[b->nlocs] = s;
    return cg_hmap_put(&b->locmap, (uint64_t)g, b->nlocs++);
}

/* Index of the state of a slot of the current rank (fresh ones are empty). */
static long state_of(builder *b, cg_slot s, int *rc)
{
    long idx = canon(b, s);
    if (idx < b->nio) {
        if (b->states[idx].last_writer == -2) {
            if (b->nstouched >= b->capstouched) {
                long nc = b->capstouched ? b->capstouched * 2 : 256;
                long *nt = realloc(b->stouched, (size_t)nc * sizeof *nt);
                if (!nt) {
                    *rc = CS_ENOMEM;
                    return -1;
                }
                b->stouched = nt;
                b->capstouched = nc;
            }
            b->stouched[b->nstouched++] = idx;
            b->states[idx] = (slot_state){-1, -1};
        }
        return idx;
    }
    if (idx >= b->capstates) {
        long nc = b->capstates * 2;
        while (nc <= idx)
            nc *= 2;
        slot_state *ns = realloc(b->states, (size_t)nc * sizeof *ns);
        if (!ns) {
            *rc = CS_ENOMEM;
            return -1;
        }
        for (long k = b->capstates; k < nc; k++)
            ns[k] = (slot_state){-1, -1};
        b->states = ns;
        b->capstates = nc;
    }
    return idx;
}

/* Forgets the current rank's state (only what it touched). */
static void reset_rank_state(builder *b)
{
    if (b->dense_loc) {
        for (long k = 0; k < b->ntouched; k++)
            b->loc[b->touched[k]] = (cg_slot){0, 0};
    } else {
        cg_hmap_free(&b->locmap);
        b->nlocs = 0;
    }
    b->ntouched = 0;
    for (long k = 0; k < b->nstouched; k++)
        b->states[b->stouched[k]].last_writer = -2;
    b->nstouched = 0;
    for (long k = b->nio; k < b->capstates; k++)
        b->states[k] = (slot_state){-1, -1};
    b->nreaders = 0;
}

static int add_reader(builder *b, long st, long lop)
{
    GROW(b->readers, b->nreaders, b->capreaders, reader_node);
    b->readers[b->nreaders].lop = lop;
    b->readers[b->nreaders].next = b->states[st].readers;
    b->states[st].readers = b->nreaders++;
    return CS_OK;
}

/* a 1024-rank document's window holds millions of these (codegen_plan.h) */
_Static_assert(sizeof(long) != 8 || sizeof(cg_lop) <= 88, "cg_lop grew: mind the padding");

static int new_lop(builder *b, long *id)
{
    cg_plan *p = b->p;
    if (p->nlops >= INT_MAX) /* cg_lop's task, the transfers' operation ids: int */
        return cs_error_set(b->err, CS_ELIMIT, "sends", "the plan needs more than %d "
                            "operations", INT_MAX - 1);
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
    if (p->ndeps >= INT_MAX) /* cg_lop's dep_begin: int */
        return cs_error_set(b->err, CS_ELIMIT, "sends", "the plan needs more than %d "
                            "dependencies", INT_MAX - 1);
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
    p->lops[lop].task = (int)p->ntasks; /* make_tasks checked: fewer than INT_MAX */
    if (recv_lop >= 0)
        p->lops[recv_lop].task = (int)p->ntasks;
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
    long idx;   /* the algorithm's send index */
    long x;     /* transfer */
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

/* Untimed: the transfers that run eagerly, sent before the step's receives
 * on both ends of their channel (codegen_plan.h, "Eager exchanges"): in one
 * step on one channel between two ranks, the only message each way.  Then
 * both ends send first and the exchange is full duplex, where the transfer
 * order would have one end receive before it sends.  Both links of the pair
 * are in every plan that has one of the two ranks core, so every window
 * decides alike.  order: transfers grouped by link (each in step order),
 * end[l]: where link l's group ends. */
#define EAGER_GROUP_MAX 64
/* Marks an eager transfer in its minor (which the key reads anyway: no
 * extra array to touch per send when keys are made). */
#define CG_EAGER_BIT (1L << 62)

static void mark_eager(builder *b, const int *lid, const long *end, const long *order)
{
    const cg_summary *sum = b->sum;
    for (int l = 0; l < sum->nlinks; l++) {
        int src = sum->links[l].src, dst = sum->links[l].dst;
        int r = src < dst ? cg_summary_link(sum, dst, src) : -1;
        if (r < 0)
            continue;
        long i = l ? end[l - 1] : 0, ie = end[l];
        long j = r ? end[r - 1] : 0, je = end[r];
        if (i == ie || lid[order[i]] != l || j == je || lid[order[j]] != r)
            continue; /* a link without transfers in this plan */
        while (i < ie && j < je) {
            int si = b->xi[order[i]].step, sj = b->xi[order[j]].step;
            if (si != sj) {
                while (i < ie && b->xi[order[i]].step < sj)
                    i++;
                while (j < je && b->xi[order[j]].step < si)
                    j++;
                continue;
            }
            long i1 = i, j1 = j;
            while (i1 < ie && b->xi[order[i1]].step == si)
                i1++;
            while (j1 < je && b->xi[order[j1]].step == si)
                j1++;
            if (i1 - i <= EAGER_GROUP_MAX && j1 - j <= EAGER_GROUP_MAX) {
                for (long q = i; q < i1; q++) {
                    long x = order[q], mate = -1;
                    int same = 0, rev = 0;
                    for (long q2 = i; q2 < i1; q2++)
                        same += b->chan[order[q2]] == b->chan[x];
                    for (long q2 = j; q2 < j1; q2++)
                        if (b->chan[order[q2]] == b->chan[x]) {
                            rev++;
                            mate = order[q2];
                        }
                    if (same == 1 && rev == 1) {
                        b->minor[x] |= CG_EAGER_BIT;
                        b->minor[mate] |= CG_EAGER_BIT;
                    }
                }
            }
            i = i1;
            j = j1;
        }
    }
}

/* Every link of a transfer in the plan has all its sends in the plan (they
 * are selected by endpoint), so dealing it here gives the same channels as
 * the summary's pass over all sends.  Transfers are grouped by link with a
 * stable counting sort, which keeps send order: canonical order already
 * when the summary found the sends ordered, else each link is sorted. */
static int assign_channels(builder *b, const cs_topology *t)
{
    const cg_plan *p = b->p;
    const cg_summary *sum = b->sum;
    long n = p->nxfers;
    int *lid = malloc((size_t)(n ? n : 1) * sizeof *lid);
    long *begin = calloc((size_t)sum->nlinks + 1, sizeof *begin);
    long *order = malloc((size_t)(n ? n : 1) * sizeof *order);
    int *base = malloc((size_t)(n ? n : 1) * sizeof *base);
    send_rec *rec = NULL;
    long caprec = 0;
    long *ord = NULL, *lead = NULL;
    int capord = 0, caplead = 0, rc = CS_OK;
    if (!lid || !begin || !order || !base) {
        rc = CS_ENOMEM;
        goto done;
    }
    for (long x = 0; x < n; x++) {
        lid[x] = cg_summary_link(sum, b->xi[x].src, b->xi[x].dst);
        if (lid[x] < 0) {
            rc = cs_error_set(b->err, CS_EINTERNAL, "", "send %ld is on no link of the summary",
                              p->xfers[x]);
            goto done;
        }
        begin[lid[x] + 1]++;
    }
    for (int l = 0; l < sum->nlinks; l++)
        begin[l + 1] += begin[l];
    for (long x = 0; x < n; x++)
        order[begin[lid[x]]++] = x;
    int spread = sum->spread;
    bool block = sum->block_deal;
    int merge = sum->merge_steps ? CG_UNIT_ANY : CG_UNIT_STEP;
    for (long k = 0; k < n && rc == CS_OK;) {
        long e = k;
        while (e < n && lid[order[e]] == lid[order[k]])
            e++;
        if (!sum->ordered) {
            if (e - k > caprec) {
                free(rec);
                caprec = e - k;
                if (!(rec = malloc((size_t)caprec * sizeof *rec))) {
                    rc = CS_ENOMEM;
                    break;
                }
            }
            for (long q = k; q < e; q++) {
                long x = order[q];
                rec[q - k] = (send_rec){b->xi[x].src, b->xi[x].dst, b->xi[x].step,
                                        p->timed ? b->rt[x] : 0, b->xi[x].chunk, p->xfers[x], x};
            }
            qsort(rec, (size_t)(e - k), sizeof *rec, p->timed ? cmp_timed : cmp_untimed);
            for (long q = k; q < e; q++)
                order[q] = rec[q - k].x;
        }
        long x0 = order[k];
        cg_lane_state ls;
        cg_lane_init(&ls, p->timed, cg_link_lanes(t, b->xi[x0].src, b->xi[x0].dst), &sum->rule);
        for (long q = k; q < e && rc == CS_OK; q++) {
            long x = order[q];
            int nu;
            rc = cg_lane_next(&ls, b->xi[x].step, b->xi[x].chunk, b->rt[x], b->wt[x], &base[x],
                              &b->minor[x], &nu);
            /* the unit bit travels with the base channel until dealing */
            base[x] = base[x] * 2 + ((nu >> merge) & 1);
        }
        /* deal each base channel's units, in order, over `spread` channels:
         * a subsequence of a channel keeps its order properties, and a unit
         * (a run that may move as one step) stays on one channel */
        if (rc == CS_OK && ls.ncount > capord) {
            long *no = realloc(ord, (size_t)ls.ncount * sizeof *no);
            if (!no)
                rc = CS_ENOMEM;
            else {
                ord = no;
                capord = ls.ncount;
            }
        }
        if (rc == CS_OK && ls.ncount > caplead) {
            long *nl = realloc(lead, (size_t)ls.ncount * sizeof *nl);
            if (!nl)
                rc = CS_ENOMEM;
            else {
                lead = nl;
                caplead = ls.ncount;
            }
        }
        if (rc == CS_OK) {
            for (int c = 0; c < ls.ncount; c++) {
                ord[c] = -1;
                lead[c] = -1;
            }
            for (long q = k; q < e; q++) {
                long x = order[q];
                int c = base[x] / 2;
                ord[c] += base[x] & 1;
                b->chan[x] = sum->links[lid[x]].group * sum->maxbase * spread + c * spread +
                             cg_deal(ord[c], ls.units[merge][c], spread, block);
                /* a new unit (or the base channel's first message) starts a run */
                if ((base[x] & 1) || lead[c] < 0)
                    lead[c] = x;
                b->run_lead[x] = lead[c];
                b->run_pos[x] = b->run_len[lead[c]]++;
            }
        }
        cg_lane_free(&ls);
        k = e;
    }
    if (rc == CS_OK && !p->timed)
        mark_eager(b, lid, begin, order);
done:
    free(ord);
    free(lead);
    free(rec);
    free(lid);
    free(begin);
    free(order);
    free(base);
    return rc;
}

static int cmp_event(const void *x, const void *y)
{
    const event *a = x, *b = y;
    if (a->t != b->t)
        return a->t < b->t ? -1 : 1;
    if (a->minor != b->minor)
        return a->minor < b->minor ? -1 : 1;
    return (a->order > b->order) - (a->order < b->order);
}

/* ---- event processing (the current rank) --------------------------------- */

/* Untimed minor key: the sender's rank, then the message's index in its
 * step on its link.  So the two thread blocks of one channel between two
 * ranks see that channel's messages in the same order (one direction's
 * messages of a step, then the other's): a step moving several chunks needs
 * both ends at it at once (it streams through the FIFO), and a direction's
 * messages of a step stay consecutive, so runs merge.  On a rank, one
 * sender's same-step messages all land before the next sender's, so a
 * reduce run from one peer waits only on whole earlier runs (codegen_plan.h,
 * "Order"). */
#define CG_MINOR_SENDER_SHIFT 40

static long untimed_minor(const builder *b, long x)
{
    return ((long)b->xi[x].src << CG_MINOR_SENDER_SHIFT) + (b->minor[x] & ~CG_EAGER_BIT);
}

static cg_key send_key(const builder *b, long x)
{
    long i = b->p->xfers[x];
    if (b->p->timed)
        return (cg_key){b->rt[x], 0, 1, i};
    /* an eager send comes before everything of its step (minors are >= 0) */
    return (cg_key){b->xi[x].step, (b->minor[x] & CG_EAGER_BIT) ? -1 : untimed_minor(b, x), 0,
                    i};
}

static cg_key recv_key(const builder *b, long x)
{
    long i = b->p->xfers[x];
    if (b->p->timed)
        return (cg_key){b->wt[x], 0, 0, i};
    return (cg_key){b->xi[x].step, untimed_minor(b, x), 1, i};
}

static event make_event(const builder *b, long x, int landing)
{
    cg_key k = landing ? recv_key(b, x) : send_key(b, x);
    return (event){landing ? b->wt[x] : b->rt[x], k.minor,
                   ((uint64_t)k.phase << 62) | (uint64_t)k.tid, 2 * x + landing};
}

static int do_read(builder *b, long x)
{
    long chunk = b->xi[x].chunk;
    cg_slot L = loc_get(b, chunk);
    if (!L.buf)
        return cs_error_set(b->err, CS_EINVAL, "sends", "send %ld: rank %d does not hold chunk %ld "
                            "when it sends it in step %d (verify the algorithm first)",
                            b->p->xfers[x], b->cur, chunk, b->xi[x].step);
    long id;
    int rc;
    if ((rc = new_lop(b, &id)) != CS_OK)
        return rc;
    cg_lop *l = &b->p->lops[id];
    l->kind = CG_SEND;
    l->rank = b->cur;
    l->peer = b->xi[x].dst;
    l->chan = b->chan[x];
    l->op = b->xi[x].op;
    l->xfer = x;
    l->key = send_key(b, x);
    l->land = b->wt[x];
    l->src = L;
    long st = state_of(b, L, &rc);
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
    int src = b->xi[x].src, dst = b->cur;
    long chunk = b->xi[x].chunk;
    cg_plan *p = b->p;
    int rc = CS_OK;
    int op = b->xi[x].op;
    cg_slot red = {0, 0}, target = {0, 0};
    if (op == CS_OP_REDUCE) {
        red = loc_get(b, chunk);
        if (!red.buf)
            op = CS_OP_COPY;
    }
    if (post_at(b, dst, chunk)) {
        target.buf = 'o';
        target.off = codegen_out_offset(p->kind, b->P, b->C, chunk, dst);
        long st = state_of(b, target, &rc);
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
        /* a fresh scratch slot; in a run, the run's next one (slots for the
         * rest of the run are reserved at its first parked receive, so
         * neighbouring chunks land in neighbouring slots) */
        target.buf = 's';
        long lead = b->run_lead[x];
        int pos = b->run_pos[x], len = b->run_len[lead];
        if (len > 1 && b->run_first[lead] < 0) {
            /* slots for positions pos..len-1: s_chunks .. s_chunks + len - pos - 1 */
            b->run_first[lead] = pos;
            b->run_off[lead] = p->s_chunks[dst] - pos;
            p->s_chunks[dst] += len - pos;
        }
        if (p->s_chunks[dst] + (long)len >= CG_SLOT_LIMIT)
            return cs_error_set(b->err, CS_ELIMIT, "sends", "rank %d needs more than %ld "
                                "scratch chunk slots", dst, CG_SLOT_LIMIT - 1);
        if (len > 1 && b->run_first[lead] >= 0 && pos >= b->run_first[lead])
            target.off = b->run_off[lead] + pos;   /* reserved for this position only */
        else
            target.off = p->s_chunks[dst]++;
    }
    long id;
    if ((rc = new_lop(b, &id)) != CS_OK)
        return rc;
    cg_lop *l = &p->lops[id];
    l->kind = CG_RECV;
    l->rank = dst;
    l->peer = src;
    l->chan = b->chan[x];
    l->op = op;
    l->xfer = x;
    l->key = recv_key(b, x);
    l->land = b->wt[x];
    l->dst = target;
    l->red = op == CS_OP_REDUCE ? red : (cg_slot){0, 0};
    if (op == CS_OP_REDUCE) {
        long sr = state_of(b, red, &rc);
        if (sr < 0)
            return rc;
        if ((rc = add_dep(b, id, b->states[sr].last_writer)) != CS_OK)
            return rc;
        if ((rc = add_reader(b, sr, id)) != CS_OK)
            return rc;
    }
    long st = state_of(b, target, &rc);
    if (st < 0)
        return rc;
    if ((rc = add_dep(b, id, b->states[st].last_writer)) != CS_OK)
        return rc;
    for (long r = b->states[st].readers; r >= 0; r = b->readers[r].next)
        if ((rc = add_dep(b, id, b->readers[r].lop)) != CS_OK)
            return rc;
    b->states[st].last_writer = id;
    b->states[st].readers = -1;
    b->recv_lop[x] = id;
    return loc_set(b, chunk, target);
}

static int final_copy(builder *b, long g)
{
    cg_plan *p = b->p;
    int rank = b->cur;
    cg_slot L = loc_get(b, g), H = {'o', codegen_out_offset(p->kind, b->P, b->C, g, rank)};
    if (!L.buf)
        return cs_error_set(b->err, CS_EINVAL, "sends",
                            "rank %d never receives chunk %ld that it must hold at the end "
                            "(verify the algorithm first)", rank, g);
    if (L.buf == H.buf && L.off == H.off)
        return CS_OK;
    long id;
    int rc;
    if ((rc = new_lop(b, &id)) != CS_OK)
        return rc;
    cg_lop *l = &p->lops[id];
    l->kind = CG_COPY;
    l->rank = rank;
    l->op = CS_OP_COPY;
    l->key = (cg_key){INFINITY, 0, 0, g};
    l->land = INFINITY;
    l->src = L;
    l->dst = H;
    long sl = state_of(b, L, &rc);
    if (sl < 0)
        return rc;
    if ((rc = add_dep(b, id, b->states[sl].last_writer)) != CS_OK)
        return rc;
    if ((rc = add_reader(b, sl, id)) != CS_OK)
        return rc;
    long sh = state_of(b, H, &rc);
    if (sh < 0)
        return rc;
    if (sl != sh) {
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
    return loc_set(b, g, H);
}

/* Final copies of the current rank, in chunk order: the chunks it must hold
 * at the end, enumerated without scanning every (rank, chunk) pair. */
static int final_copies(builder *b)
{
    int rc = CS_OK;
    int P = b->P, C = b->C, r = b->cur;
    switch (b->p->kind) {
    case CS_COLL_ALLGATHER:
    case CS_COLL_BROADCAST:
    case CS_COLL_ALLREDUCE:
        for (long g = 0; g < b->G && rc == CS_OK; g++)
            rc = final_copy(b, g);
        break;
    case CS_COLL_REDUCESCATTER:
    case CS_COLL_SCATTER:
        for (long g = r; g < b->G && rc == CS_OK; g += P)
            rc = final_copy(b, g);
        break;
    case CS_COLL_GATHER:
    case CS_COLL_REDUCE:
        for (long g = 0; r == b->p->root && g < b->G && rc == CS_OK; g++)
            rc = final_copy(b, g);
        break;
    case CS_COLL_ALLTOALL:
        for (long c = 0; c < C && rc == CS_OK; c++)
            for (long q = 0; q < P && rc == CS_OK; q++)
                rc = final_copy(b, c * P * P + (long)r * P + q);
        break;
    default:
        for (long g = 0; g < b->G && rc == CS_OK; g++)
            if (post_at(b, r, g))
                rc = final_copy(b, g);
        break;
    }
    return rc;
}

/* One rank: its events (reads and landings of its sends, writes of what it
 * receives) in the global order restricted to it, then its final copies. */
static int lower_rank(builder *b, event *ev, long nev)
{
    qsort(ev, (size_t)nev, sizeof *ev, cmp_event);
    int rc = CS_OK;
    for (long k = 0; k < nev && rc == CS_OK; k++) {
        long x = ev[k].xw / 2;
        if (!(ev[k].xw & 1))
            rc = do_read(b, x);
        else if (b->xi[x].dst == b->cur)
            rc = do_write(b, x);
        else
            b->landed[x] = 1; /* one of its sends landed: its slot may be reused */
    }
    if (rc == CS_OK)
        rc = final_copies(b);
    reset_rank_state(b);
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
    /* one rank sorted at a time: room for the largest rank's operations */
    long most = 1;
    for (int r = 0; r < p->ranks; r++)
        if (p->rank_begin[r + 1] - p->rank_begin[r] > most)
            most = p->rank_begin[r + 1] - p->rank_begin[r];
    lop_rec *rec = malloc((size_t)most * sizeof *rec);
    if (!rec)
        return CS_ENOMEM;
    for (int r = 0; r < p->ranks; r++) {
        long lo = p->rank_begin[r], hi = p->rank_begin[r + 1];
        /* timed schedules create a rank's operations in key order already */
        bool sorted = true;
        for (long k = lo + 1; k < hi && sorted; k++)
            sorted = cg_key_cmp(&p->lops[p->rank_lops[k - 1]].key,
                                &p->lops[p->rank_lops[k]].key) < 0;
        if (sorted)
            continue;
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
            if (dl->rank != l->rank || cg_key_cmp(&dl->key, &l->key) >= 0 ||
                (!p->timed && cg_transfer_cmp(&dl->key, &l->key) >= 0) ||
                (b->full && dl->task >= l->task))
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
    free(p->core);
    free(p->xfers);
    free(p->lops);
    free(p->deps);
    free(p->rank_begin);
    free(p->rank_lops);
    free(p->tasks);
    free(p);
}

static void plan_sizes(cg_plan *p)
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
}

int codegen_plan_build(const cs_algorithm *a, const cs_topology *t, cg_plan **out, cs_error *err)
{
    *out = NULL;
    cg_summary *sum;
    int rc = codegen_summary_build(a, t, NULL, &sum, err);
    if (rc != CS_OK)
        return rc;
    rc = codegen_plan_build_core(a, t, sum, NULL, out, err);
    codegen_summary_free(sum);
    return rc;
}

/* The transfers with a core endpoint, in send order. */
static int select_transfers(builder *b)
{
    const cs_algorithm *a = b->a;
    cg_plan *p = b->p;
    long n = 0;
    for (long i = 0; i < a->nsends; i++)
        if (b->full || p->core[algorithm_send_src(a, i)] || p->core[algorithm_send_dst(a, i)])
            n++;
    p->xfers = malloc((size_t)(n ? n : 1) * sizeof(long));
    b->xi = malloc((size_t)(n ? n : 1) * sizeof *b->xi);
    if (!p->xfers || !b->xi)
        return CS_ENOMEM;
    for (long i = 0; i < a->nsends; i++) {
        int src = algorithm_send_src(a, i), dst = algorithm_send_dst(a, i);
        if (!b->full && !p->core[src] && !p->core[dst])
            continue;
        b->xi[p->nxfers] = (struct xinfo){algorithm_send_chunk(a, i), src, dst,
                                          algorithm_send_step(a, i), algorithm_send_op(a, i)};
        p->xfers[p->nxfers++] = i;
    }
    return CS_OK;
}

/* The lowering's state (per transfer, per rank being lowered); free(NULL)
 * and a second call are no-ops. */
static void free_lowering_state(builder *b)
{
#define RELEASE(field) (free(b->field), b->field = NULL)
    RELEASE(xi), RELEASE(chan), RELEASE(minor), RELEASE(rt), RELEASE(wt);
    RELEASE(send_lop), RELEASE(recv_lop), RELEASE(landed), RELEASE(run_lead);
    RELEASE(run_pos), RELEASE(run_len), RELEASE(run_off), RELEASE(run_first);
    RELEASE(loc), RELEASE(locs), RELEASE(touched), RELEASE(states), RELEASE(stouched);
    RELEASE(readers);
#undef RELEASE
    cg_hmap_free(&b->locmap);
}

/* Per-rank event lists: a core rank gets the read and the landing of each
 * of its sends and the write of each of its receives.  Kept as transfer
 * numbers (xw: transfer * 2 + 1 for the landing), 4 bytes an event; each
 * rank's events are made and sorted only when it is lowered (lower_rank),
 * into one buffer of the largest rank's size: three 32-byte events per
 * transfer for every rank at once were a fifth of a 1024-rank document's
 * peak memory.  make_event depends only on what assign_channels settled,
 * so an event made later is the same event. */
static int rank_events(builder *b, long **begin_out, uint32_t **ev_out)
{
    cg_plan *p = b->p;
    long *begin = calloc((size_t)p->ranks + 1, sizeof(long));
    if (!begin)
        return CS_ENOMEM;
    for (long x = 0; x < p->nxfers; x++) {
        int src = b->xi[x].src, dst = b->xi[x].dst;
        if (p->core[src])
            begin[src + 1] += 2;
        if (p->core[dst])
            begin[dst + 1]++;
    }
    for (int r = 0; r < p->ranks; r++)
        begin[r + 1] += begin[r];
    long n = begin[p->ranks];
    uint32_t *ev = malloc((size_t)(n ? n : 1) * sizeof *ev);
    long *fill = malloc((size_t)p->ranks * sizeof(long));
    if (!ev || !fill) {
        free(begin);
        free(ev);
        free(fill);
        return CS_ENOMEM;
    }
    memcpy(fill, begin, (size_t)p->ranks * sizeof(long));
    for (long x = 0; x < p->nxfers; x++) {
        int src = b->xi[x].src, dst = b->xi[x].dst;
        if (p->core[src]) { /* x < 2^30: both fit */
            ev[fill[src]++] = (uint32_t)(2 * x);
            ev[fill[src]++] = (uint32_t)(2 * x + 1);
        }
        if (p->core[dst])
            ev[fill[dst]++] = (uint32_t)(2 * x + 1);
    }
    free(fill);
    *begin_out = begin;
    *ev_out = ev;
    return CS_OK;
}

/* Push-model tasks of a full plan: transfers in landing order, then the
 * final copies rank by rank. */
static int make_tasks(builder *b)
{
    cg_plan *p = b->p;
    long n = p->nxfers;
    /* a task per transfer and per copy: at most one per operation */
    if (p->nlops >= INT_MAX)
        return cs_error_set(b->err, CS_ELIMIT, "sends", "%ld operations: a full plan (CUDA) "
                            "holds fewer than %d", p->nlops, INT_MAX);
    event *ev = malloc((size_t)(n ? n : 1) * sizeof *ev);
    if (!ev)
        return CS_ENOMEM;
    for (long x = 0; x < n; x++)
        ev[x] = make_event(b, x, 1);
    qsort(ev, (size_t)n, sizeof *ev, cmp_event);
    int rc = CS_OK;
    for (long k = 0; k < n && rc == CS_OK; k++) {
        long x = ev[k].xw / 2;
        const cg_lop *sl = &p->lops[b->send_lop[x]];
        rc = add_task(b, b->send_lop[x], b->recv_lop[x], sl->rank, sl->peer);
    }
    free(ev);
    for (long k = 0; k < p->nlops && rc == CS_OK; k++)
        if (p->lops[k].kind == CG_COPY)
            rc = add_task(b, k, -1, p->lops[k].rank, p->lops[k].rank);
    return rc;
}

int codegen_plan_build_core(const cs_algorithm *a, const cs_topology *t, const cg_summary *sum,
                            const unsigned char *core, cg_plan **out, cs_error *err)
{
    *out = NULL;
    if (!a || !sum)
        return cs_error_set(err, CS_EINVAL, "algorithm", "no algorithm");
    if (sum->ranks != a->ranks || sum->nsends != a->nsends)
        return cs_error_set(err, CS_EINVAL, "algorithm", "the summary is of another algorithm");
    builder b;
    memset(&b, 0, sizeof b);
    b.a = a;
    b.sum = sum;
    b.err = err;
    b.P = a->ranks;
    b.C = a->chunks;
    b.G = sum->global_chunks;
    b.full = core == NULL;
    int rc = collective_copy(&b.coll, &a->collective, err);
    if (rc != CS_OK)
        return rc;
    if ((rc = collective_validate(&b.coll, a->ranks, err)) != CS_OK) {
        collective_free(&b.coll);
        return rc;
    }
    cg_plan *p = calloc(1, sizeof *p);
    long *ev_begin = NULL;
    uint32_t *ev = NULL;
    event *rank_ev = NULL;
    b.p = p;
    if (!p)
        goto nomem;
    p->kind = a->collective.kind;
    p->root = a->collective.root;
    p->ranks = a->ranks;
    p->chunks = a->chunks;
    p->global_chunks = b.G;
    p->timed = sum->timed;
    p->inplace = kind_inplace(p->kind);
    p->nchannels = sum->nchannels;
    p->merge_steps = sum->merge_steps;
    plan_sizes(p);
    /* transfer numbers in 32 bits (rank events hold 2x + 1); slots in 23 */
    if (a->nsends >= (1L << 30)) {
        rc = cs_error_set(err, CS_ELIMIT, "sends", "%ld sends; code generation takes fewer "
                          "than 2^30", a->nsends);
        goto fail;
    }
    if (p->i_chunks >= CG_SLOT_LIMIT || p->o_chunks >= CG_SLOT_LIMIT) {
        rc = cs_error_set(err, CS_ELIMIT, "chunks", "buffers of %d input and %d output chunks; "
                          "code generation takes fewer than %ld", p->i_chunks, p->o_chunks,
                          CG_SLOT_LIMIT);
        goto fail;
    }
    p->s_chunks = calloc((size_t)a->ranks, sizeof(int));
    p->core = malloc((size_t)a->ranks);
    if (!p->s_chunks || !p->core)
        goto nomem;
    for (int r = 0; r < a->ranks; r++)
        p->core[r] = core ? core[r] != 0 : 1;
    if (select_transfers(&b) != CS_OK)
        goto nomem;
    long n = p->nxfers;
    size_t nn = (size_t)(n ? n : 1);
    b.chan = malloc(nn * sizeof(int));
    b.minor = malloc(nn * sizeof(long));
    b.rt = malloc(nn * sizeof(double));
    b.wt = malloc(nn * sizeof(double));
    b.send_lop = malloc(nn * sizeof(int));
    b.recv_lop = malloc(nn * sizeof(int));
    b.landed = calloc(nn, 1);
    b.run_lead = malloc(nn * sizeof(int));
    b.run_pos = malloc(nn * sizeof(int));
    b.run_len = calloc(nn, sizeof(int));
    b.run_off = malloc(nn * sizeof(int));
    b.run_first = malloc(nn * sizeof(int));
    if (b.run_first)
        for (size_t k = 0; k < nn; k++)
            b.run_first[k] = -1;
    /* rank state: chunk locations and o/i slot states, reused rank by rank */
    b.dense_loc = b.G <= DENSE_CHUNKS;
    if (b.dense_loc)
        b.loc = calloc((size_t)b.G, sizeof(cg_slot));
    b.nio = (long)p->o_chunks + p->i_chunks;
    b.capstates = b.nio + 256;
    b.states = malloc((size_t)b.capstates * sizeof(slot_state));
    /* about two operations per transfer: no reallocation on the way */
    b.caplops = 2 * (long)nn + 64;
    p->lops = malloc((size_t)b.caplops * sizeof(cg_lop));
    b.capdeps = (long)nn + 64;
    p->deps = malloc((size_t)b.capdeps * sizeof(long));
    if (!b.chan || !b.minor || !b.rt || !b.wt || !b.send_lop || !b.recv_lop || !b.landed ||
        !b.run_lead || !b.run_pos || !b.run_len || !b.run_off || !b.run_first ||
        (b.dense_loc && !b.loc) || !b.states || !p->lops || !p->deps)
        goto nomem;
    for (long k = 0; k < b.capstates; k++)
        b.states[k] = (slot_state){k < b.nio ? -2 : -1, -1};
    for (long x = 0; x < n; x++) {
        long i = p->xfers[x];
        int src = b.xi[x].src, dst = b.xi[x].dst;
        long chunk = b.xi[x].chunk;
        if (src < 0 || src >= a->ranks || dst < 0 || dst >= a->ranks || src == dst ||
            chunk < 0 || chunk >= b.G) {
            rc = cs_error_set(err, CS_EINVAL, "sends", "send %ld is out of range "
                              "(chunk %ld, src %d, dst %d)", i, chunk, src, dst);
            goto fail;
        }
        cg_send_times(a, i, p->timed, &b.rt[x], &b.wt[x]);
        b.send_lop[x] = b.recv_lop[x] = -1;
    }
    if ((rc = assign_channels(&b, t)) != CS_OK)
        goto fail;
    if (rank_events(&b, &ev_begin, &ev) != CS_OK)
        goto nomem;
    long most = 1;
    for (int r = 0; r < p->ranks; r++)
        if (ev_begin[r + 1] - ev_begin[r] > most)
            most = ev_begin[r + 1] - ev_begin[r];
    if (!(rank_ev = malloc((size_t)most * sizeof *rank_ev)))
        goto nomem;
    for (int r = 0; r < p->ranks && rc == CS_OK; r++) {
        if (!p->core[r])
            continue;
        b.cur = r;
        long nev = ev_begin[r + 1] - ev_begin[r];
        for (long k = 0; k < nev; k++) {
            uint32_t xw = ev[ev_begin[r] + k];
            rank_ev[k] = make_event(&b, (long)(xw / 2), (int)(xw & 1));
        }
        rc = lower_rank(&b, rank_ev, nev);
    }
    /* each side of a transfer learns the other's slot */
    for (long x = 0; x < n && rc == CS_OK; x++) {
        if (b.send_lop[x] < 0 || b.recv_lop[x] < 0)
            continue;
        p->lops[b.recv_lop[x]].src = p->lops[b.send_lop[x]].src;
        p->lops[b.send_lop[x]].dst = p->lops[b.recv_lop[x]].dst;
    }
    if (rc == CS_OK && b.full)
        rc = make_tasks(&b);
    /* order_ranks needs only the plan: the lowering's per-transfer state
     * (about as large as the operations) goes first, so the peak stays the
     * lowering's */
    free(ev);
    free(ev_begin);
    free(rank_ev);
    ev = NULL;
    ev_begin = NULL;
    rank_ev = NULL;
    free_lowering_state(&b);
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
    free(ev);
    free(ev_begin);
    free(rank_ev);
    free_lowering_state(&b);
    collective_free(&b.coll);
    *out = p;
    return rc;
}
