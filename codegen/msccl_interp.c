/*
 * msccl_interp.c - loads MSCCL XML into a program and runs it on host memory
 * (see msccl_interp.h).
 *
 * The scheduler is a single thread that sweeps over all thread blocks and
 * lets each run as far as it can; a sweep in which nothing moves while some
 * block is unfinished is a deadlock.  This is exact for the runtimes' model
 * (blocks progress independently, wait only on flags and FIFOs), and with
 * a FIFO capacity of one message it is stricter than the real runtimes, whose
 * connection buffers hold several chunk slices.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msccl_interp.h"
#include "xml_reader.h"

#define MAX_NGPUS 65536
#define MAX_VALUES (1L << 27) /* elements over all buffers of all ranks */

enum { T_NOP, T_S, T_R, T_RCS, T_RRS, T_RRC, T_RRCS, T_CPY, T_RE };
static const char *const type_names[] = {"nop", "s", "r", "rcs", "rrs", "rrc", "rrcs", "cpy", "re"};

typedef struct x_step {
    int type;
    char sbuf, dbuf;
    int soff, doff, cnt, depid, deps, hasdep;
    int line;
} x_step;

typedef struct x_tb {
    int send, recv, chan;
    int nsteps;
    x_step *steps;
    int line;
} x_tb;

typedef struct x_gpu {
    int i_chunks, o_chunks, s_chunks;
    int ntb;
    x_tb *tbs;
} x_gpu;

struct cs_msccl_doc {
    char coll[32];
    char proto[16];
    int ngpus, nchunksperloop, nchannels;
    bool inplace, outofplace;
    long long min_bytes, max_bytes;
    bool slice;              /* parsed as a slice: some <gpu> may be absent */
    x_gpu *gpus;
};

/* ---- loading -------------------------------------------------------------- */

static int attr_int(const xmlr_node *n, const char *name, long lo, long hi, bool required,
                    long dflt, long *out, cs_error *err)
{
    const char *v = xmlr_attr_get(n, name);
    if (!v) {
        if (required)
            return cs_error_set(err, CS_EINVAL, name, "line %d: <%s> needs attribute %s",
                                n->line, n->name, name);
        *out = dflt;
        return CS_OK;
    }
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (end == v || *end || errno)
        return cs_error_set(err, CS_EINVAL, name, "line %d: <%s> %s=\"%s\" is not an integer",
                            n->line, n->name, name, v);
    if (x < lo || x > hi)
        return cs_error_set(err, CS_EINVAL, name,
                            "line %d: <%s> %s=%lld is out of range [%ld, %ld]", n->line, n->name,
                            name, x, lo, hi);
    *out = (long)x;
    return CS_OK;
}

static int attr_i(const xmlr_node *n, const char *name, long lo, long hi, int *out, cs_error *err)
{
    long v;
    int rc = attr_int(n, name, lo, hi, true, 0, &v, err);
    if (rc == CS_OK)
        *out = (int)v;
    return rc;
}

static int attr_buf(const xmlr_node *n, const char *name, char *out, cs_error *err)
{
    const char *v = xmlr_attr_get(n, name);
    if (!v)
        return cs_error_set(err, CS_EINVAL, name, "line %d: <step> needs attribute %s", n->line,
                            name);
    if (strcmp(v, "i") && strcmp(v, "o") && strcmp(v, "s"))
        return cs_error_set(err, CS_EINVAL, name,
                            "line %d: %s=\"%s\" is not a buffer (i, o or s)", n->line, name, v);
    *out = v[0];
    return CS_OK;
}

static int buf_chunks(const x_gpu *g, char buf)
{
    return buf == 'i' ? g->i_chunks : buf == 'o' ? g->o_chunks : g->s_chunks;
}

static int load_step(const xmlr_node *n, const x_gpu *g, const x_tb *tb, int index,
                     x_step *st, cs_error *err)
{
    if (strcmp(n->name, "step") != 0)
        return cs_error_set(err, CS_EINVAL, "xml", "line %d: unexpected <%s> in <tb>", n->line,
                            n->name);
    memset(st, 0, sizeof *st);
    st->line = n->line;
    int s, rc;
    if ((rc = attr_i(n, "s", 0, 1 << 20, &s, err)) != CS_OK)
        return rc;
    if (s != index)
        return cs_error_set(err, CS_EINVAL, "s", "line %d: step s=%d but it is step %d of its "
                            "thread block (steps are numbered 0, 1, ...)", n->line, s, index);
    const char *type = xmlr_attr_get(n, "type");
    if (!type)
        return cs_error_set(err, CS_EINVAL, "type", "line %d: <step> needs attribute type", n->line);
    st->type = -1;
    for (int k = 0; k < (int)(sizeof type_names / sizeof type_names[0]); k++)
        if (strcmp(type, type_names[k]) == 0)
            st->type = k;
    if (st->type < 0)
        return cs_error_set(err, CS_EINVAL, "type", "line %d: unknown step type \"%s\" "
                            "(s, r, rcs, rrs, rrc, rrcs, cpy, re, nop)", n->line, type);
    if ((rc = attr_buf(n, "srcbuf", &st->sbuf, err)) != CS_OK ||
        (rc = attr_buf(n, "dstbuf", &st->dbuf, err)) != CS_OK ||
        (rc = attr_i(n, "srcoff", -1, INT32_MAX, &st->soff, err)) != CS_OK ||
        (rc = attr_i(n, "dstoff", -1, INT32_MAX, &st->doff, err)) != CS_OK ||
        (rc = attr_i(n, "cnt", 0, INT32_MAX, &st->cnt, err)) != CS_OK ||
        (rc = attr_i(n, "depid", -1, INT32_MAX, &st->depid, err)) != CS_OK ||
        (rc = attr_i(n, "deps", -1, INT32_MAX, &st->deps, err)) != CS_OK ||
        (rc = attr_i(n, "hasdep", 0, 1, &st->hasdep, err)) != CS_OK)
        return rc;
    if ((st->depid < 0) != (st->deps < 0))
        return cs_error_set(err, CS_EINVAL, "depid", "line %d: depid=%d and deps=%d: both or "
                            "neither must be -1", n->line, st->depid, st->deps);
    bool has_send = st->type == T_S || st->type == T_RCS || st->type == T_RRS || st->type == T_RRCS;
    bool has_recv = st->type == T_R || st->type == T_RCS || st->type == T_RRS ||
                    st->type == T_RRC || st->type == T_RRCS;
    bool reads_src = st->type == T_S || st->type == T_RRS || st->type == T_RRC ||
                     st->type == T_RRCS || st->type == T_CPY || st->type == T_RE;
    bool writes_dst = st->type == T_R || st->type == T_RCS || st->type == T_RRC ||
                      st->type == T_RRCS || st->type == T_CPY || st->type == T_RE;
    if (has_send && tb->send < 0)
        return cs_error_set(err, CS_EINVAL, "type", "line %d: a %s step in a thread block with "
                            "send=\"-1\"", n->line, type);
    if (has_recv && tb->recv < 0)
        return cs_error_set(err, CS_EINVAL, "type", "line %d: a %s step in a thread block with "
                            "recv=\"-1\"", n->line, type);
    if (st->type != T_NOP && st->cnt < 1)
        return cs_error_set(err, CS_EINVAL, "cnt", "line %d: cnt must be >= 1", n->line);
    if (reads_src && (st->soff < 0 || (long)st->soff + st->cnt > buf_chunks(g, st->sbuf)))
        return cs_error_set(err, CS_EINVAL, "srcoff", "line %d: source %c[%d..%d) is outside the "
                            "buffer's %d chunks", n->line, st->sbuf, st->soff, st->soff + st->cnt,
                            buf_chunks(g, st->sbuf));
    if (writes_dst && (st->doff < 0 || (long)st->doff + st->cnt > buf_chunks(g, st->dbuf)))
        return cs_error_set(err, CS_EINVAL, "dstoff", "line %d: destination %c[%d..%d) is outside "
                            "the buffer's %d chunks", n->line, st->dbuf, st->doff,
                            st->doff + st->cnt, buf_chunks(g, st->dbuf));
    return CS_OK;
}

static int load_gpu(const xmlr_node *n, cs_msccl_doc *d, cs_error *err)
{
    int id, rc;
    if ((rc = attr_i(n, "id", 0, d->ngpus - 1, &id, err)) != CS_OK)
        return rc;
    x_gpu *g = &d->gpus[id];
    if (g->tbs || g->i_chunks >= 0)
        return cs_error_set(err, CS_EINVAL, "id", "line %d: gpu id %d appears twice", n->line, id);
    if ((rc = attr_i(n, "i_chunks", 0, 1 << 24, &g->i_chunks, err)) != CS_OK ||
        (rc = attr_i(n, "o_chunks", 0, 1 << 24, &g->o_chunks, err)) != CS_OK ||
        (rc = attr_i(n, "s_chunks", 0, 1 << 24, &g->s_chunks, err)) != CS_OK)
        return rc;
    g->tbs = calloc((size_t)(n->nchildren ? n->nchildren : 1), sizeof(x_tb));
    if (!g->tbs)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    g->ntb = n->nchildren;
    for (int k = 0; k < g->ntb; k++)
        g->tbs[k].line = -1;
    for (int k = 0; k < n->nchildren; k++) {
        const xmlr_node *t = n->children[k];
        if (strcmp(t->name, "tb") != 0)
            return cs_error_set(err, CS_EINVAL, "xml", "line %d: unexpected <%s> in <gpu>",
                                t->line, t->name);
        int tid;
        if ((rc = attr_i(t, "id", 0, g->ntb - 1, &tid, err)) != CS_OK) {
            if (err && xmlr_attr_get(t, "id"))
                cs_error_set(err, CS_EINVAL, "id", "line %d: thread block ids of gpu %d must be "
                             "0..%d, consecutive and unique", t->line, id, g->ntb - 1);
            return rc;
        }
        x_tb *tb = &g->tbs[tid];
        if (tb->line >= 0)
            return cs_error_set(err, CS_EINVAL, "id", "line %d: gpu %d has thread block %d twice",
                                t->line, id, tid);
        tb->line = t->line;
        if ((rc = attr_i(t, "send", -1, d->ngpus - 1, &tb->send, err)) != CS_OK ||
            (rc = attr_i(t, "recv", -1, d->ngpus - 1, &tb->recv, err)) != CS_OK ||
            (rc = attr_i(t, "chan", 0, d->nchannels - 1, &tb->chan, err)) != CS_OK)
            return rc;
        if (tb->send == id || tb->recv == id)
            return cs_error_set(err, CS_EINVAL, "send", "line %d: thread block %d of gpu %d has "
                                "itself as a peer", t->line, tid, id);
        tb->steps = calloc((size_t)(t->nchildren ? t->nchildren : 1), sizeof(x_step));
        if (!tb->steps)
            return cs_error_set(err, CS_ENOMEM, "", "out of memory");
        tb->nsteps = t->nchildren;
        for (int s = 0; s < t->nchildren; s++)
            if ((rc = load_step(t->children[s], g, tb, s, &tb->steps[s], err)) != CS_OK)
                return rc;
    }
    /* one connection per (peer, channel) and direction */
    for (int a = 0; a < g->ntb; a++)
        for (int b = a + 1; b < g->ntb; b++) {
            const x_tb *x = &g->tbs[a], *y = &g->tbs[b];
            if (x->chan != y->chan)
                continue;
            if ((x->send >= 0 && x->send == y->send) || (x->recv >= 0 && x->recv == y->recv))
                return cs_error_set(err, CS_EINVAL, "chan", "line %d: thread blocks %d and %d of "
                                    "gpu %d use the same peer and channel %d", y->line, a, b, id,
                                    x->chan);
        }
    /* dependencies name existing blocks and steps */
    for (int a = 0; a < g->ntb; a++)
        for (int s = 0; s < g->tbs[a].nsteps; s++) {
            const x_step *st = &g->tbs[a].steps[s];
            if (st->depid < 0)
                continue;
            if (st->depid >= g->ntb || st->depid == a)
                return cs_error_set(err, CS_EINVAL, "depid", "line %d: depid=%d is not another "
                                    "thread block of gpu %d", st->line, st->depid, id);
            if (st->deps >= g->tbs[st->depid].nsteps)
                return cs_error_set(err, CS_EINVAL, "deps", "line %d: deps=%d but thread block %d "
                                    "has %d steps", st->line, st->deps, st->depid,
                                    g->tbs[st->depid].nsteps);
        }
    return CS_OK;
}

void msccl_doc_free(cs_msccl_doc *d)
{
    if (!d)
        return;
    if (d->gpus)
        for (int r = 0; r < d->ngpus; r++) {
            for (int t = 0; t < d->gpus[r].ntb; t++)
                free(d->gpus[r].tbs[t].steps);
            free(d->gpus[r].tbs);
        }
    free(d->gpus);
    free(d);
}

static const char *const known_colls[] = {"allreduce", "allgather", "reduce", "broadcast",
                                          "alltoall", "reduce_scatter", "reducescatter",
                                          "custom", "gather", "scatter"};

static int parse_doc(const char *text, size_t len, bool slice, cs_msccl_doc **out,
                     cs_error *err)
{
    *out = NULL;
    /* a bound against runaway inputs, not a model limit: whole 1024-rank
     * cluster documents (tests/cluster_e2e.c) are 50-250 MB */
    if (len > ((size_t)1 << 30))
        return cs_error_set(err, CS_ELIMIT, "xml", "document larger than 1 GiB");
    xmlr_node *root;
    int rc = xmlr_parse(text, len, &root, err);
    if (rc != CS_OK)
        return rc;
    cs_msccl_doc *d = calloc(1, sizeof *d);
    if (!d) {
        xmlr_free(root);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    long v;
    if (strcmp(root->name, "algo") != 0) {
        rc = cs_error_set(err, CS_EINVAL, "xml", "line %d: the root element is <%s>, not <algo>",
                          root->line, root->name);
        goto done;
    }
    if ((rc = attr_i(root, "ngpus", 1, MAX_NGPUS, &d->ngpus, err)) != CS_OK ||
        (rc = attr_i(root, "nchunksperloop", 1, 1 << 24, &d->nchunksperloop, err)) != CS_OK ||
        (rc = attr_i(root, "nchannels", 1, 1024, &d->nchannels, err)) != CS_OK)
        goto done;
    if ((rc = attr_int(root, "inplace", 0, 1, true, 0, &v, err)) != CS_OK)
        goto done;
    d->inplace = v;
    if ((rc = attr_int(root, "outofplace", 0, 1, false, 1, &v, err)) != CS_OK)
        goto done;
    d->outofplace = v;
    if ((rc = attr_int(root, "minBytes", 0, LONG_MAX, false, 0, &v, err)) != CS_OK)
        goto done;
    d->min_bytes = v;
    if ((rc = attr_int(root, "maxBytes", 0, LONG_MAX, false, -1, &v, err)) != CS_OK)
        goto done;
    d->max_bytes = v;
    const char *proto = xmlr_attr_get(root, "proto"), *coll = xmlr_attr_get(root, "coll");
    if (!proto || (strcmp(proto, "Simple") && strcmp(proto, "LL") && strcmp(proto, "LL128"))) {
        rc = cs_error_set(err, CS_EINVAL, "proto", "line %d: proto must be Simple, LL or LL128",
                          root->line);
        goto done;
    }
    snprintf(d->proto, sizeof d->proto, "%s", proto);
    bool known = false;
    for (size_t k = 0; coll && k < sizeof known_colls / sizeof known_colls[0]; k++)
        known |= strcmp(coll, known_colls[k]) == 0;
    if (!known) {
        rc = cs_error_set(err, CS_EINVAL, "coll", "line %d: coll \"%s\" is not a collective either "
                          "runtime knows", root->line, coll ? coll : "");
        goto done;
    }
    snprintf(d->coll, sizeof d->coll, "%s", coll);
    d->gpus = calloc((size_t)d->ngpus, sizeof(x_gpu));
    if (!d->gpus) {
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
        goto done;
    }
    for (int r = 0; r < d->ngpus; r++)
        d->gpus[r].i_chunks = -1;
    for (int k = 0; k < root->nchildren && rc == CS_OK; k++) {
        const xmlr_node *g = root->children[k];
        if (strcmp(g->name, "gpu") != 0)
            rc = cs_error_set(err, CS_EINVAL, "xml", "line %d: unexpected <%s> in <algo>", g->line,
                              g->name);
        else
            rc = load_gpu(g, d, err);
    }
    for (int r = 0; r < d->ngpus && rc == CS_OK; r++)
        if (d->gpus[r].i_chunks < 0 && !slice)
            rc = cs_error_set(err, CS_EINVAL, "ngpus", "ngpus=%d but there is no <gpu id=\"%d\">",
                              d->ngpus, r);
    d->slice = slice;
done:
    xmlr_free(root);
    if (rc != CS_OK) {
        msccl_doc_free(d);
        return rc;
    }
    *out = d;
    return CS_OK;
}

int msccl_doc_parse(const char *text, size_t len, cs_msccl_doc **out, cs_error *err)
{
    return parse_doc(text, len, false, out, err);
}

int msccl_doc_parse_slice(const char *text, size_t len, cs_msccl_doc **out, cs_error *err)
{
    return parse_doc(text, len, true, out, err);
}

bool msccl_doc_has_gpu(const cs_msccl_doc *d, int rank)
{
    return rank >= 0 && rank < d->ngpus && d->gpus[rank].i_chunks >= 0;
}

int msccl_doc_ngpus(const cs_msccl_doc *d) { return d->ngpus; }
int msccl_doc_nchannels(const cs_msccl_doc *d) { return d->nchannels; }
int msccl_doc_nchunksperloop(const cs_msccl_doc *d) { return d->nchunksperloop; }
const char *msccl_doc_coll(const cs_msccl_doc *d) { return d->coll; }
bool msccl_doc_inplace(const cs_msccl_doc *d) { return d->inplace; }
bool msccl_doc_outofplace(const cs_msccl_doc *d) { return d->outofplace; }
long long msccl_doc_min_bytes(const cs_msccl_doc *d) { return d->min_bytes; }
long long msccl_doc_max_bytes(const cs_msccl_doc *d) { return d->max_bytes; }

int msccl_doc_rank_tbs(const cs_msccl_doc *d, int rank)
{
    return msccl_doc_has_gpu(d, rank) ? d->gpus[rank].ntb : -1;
}

int msccl_doc_rank_max_steps(const cs_msccl_doc *d, int rank)
{
    if (!msccl_doc_has_gpu(d, rank))
        return -1;
    int m = 0;
    for (int t = 0; t < d->gpus[rank].ntb; t++)
        if (d->gpus[rank].tbs[t].nsteps > m)
            m = d->gpus[rank].tbs[t].nsteps;
    return m;
}

/* ---- execution --------------------------------------------------------------- */

typedef union value {
    double d;
    int64_t i;
} value;

typedef struct conn {
    int src, dst, chan;
    int stb, rtb;   /* the sending and the receiving thread block (-1: none) */
    int head, count;
    int *cnt;       /* per slot: chunks of the sender's step */
    int *idx;       /* per slot: which of them this piece is */
    value **msg;    /* per slot */
} conn;

typedef struct run {
    const cs_msccl_doc *d;
    const cs_msccl_interp_options *o;
    int E;
    value **ibuf, **obuf, **sbuf; /* per rank */
    value *storage;
    long nconns;
    conn *conns;
    int **flag, **pc, **sub; /* sub: chunks of the current step already moved */
    long **sconn, **rconn;   /* per rank and thread block: connection index or -1 */
    cs_msccl_interp_stats st;
    cs_error *err;
} run;

static int cmp_conn(const void *x, const void *y)
{
    const conn *a = x, *b = y;
    if (a->src != b->src) return a->src < b->src ? -1 : 1;
    if (a->dst != b->dst) return a->dst < b->dst ? -1 : 1;
    return (a->chan > b->chan) - (a->chan < b->chan);
}

static long find_conn(const run *R, int src, int dst, int chan)
{
    conn key = {.src = src, .dst = dst, .chan = chan};
    conn *c = bsearch(&key, R->conns, (size_t)R->nconns, sizeof(conn), cmp_conn);
    return c ? c - R->conns : -1;
}

static value *bufptr(const run *R, int rank, char buf, int off)
{
    value *b = buf == 'i' ? R->ibuf[rank] : buf == 'o' ? R->obuf[rank] : R->sbuf[rank];
    return b + (long)off * R->E;
}

static value add(const run *R, value a, value b)
{
    value r;
    if (R->o->type == CS_INTERP_INT64)
        r.i = (int64_t)((uint64_t)a.i + (uint64_t)b.i);
    else
        r.d = a.d + b.d;
    return r;
}

static void finish_step(run *R, int rank, int t, const x_step *s, int pc)
{
    if (s->hasdep)
        R->flag[rank][t] = pc;
    R->pc[rank][t] = pc + 1;
    R->sub[rank][t] = 0;
    R->st.steps_executed++;
}

/* Tries to make progress on a block's current step; 1 when it did, 0 when it
 * must wait, < 0 on error.  Transfers stream one chunk at a time through the
 * FIFOs, as the runtimes move a step of cnt chunks in cnt pieces: a step of
 * several chunks never needs room for all of them at once. */
static int try_step(run *R, int rank, int t)
{
    const x_tb *tb = &R->d->gpus[rank].tbs[t];
    int pc = R->pc[rank][t];
    const x_step *s = &tb->steps[pc];
    int u = R->sub[rank][t];
    if (u == 0 && s->depid >= 0 && R->flag[rank][s->depid] < s->deps)
        return 0;
    bool has_send = s->type == T_S || s->type == T_RCS || s->type == T_RRS || s->type == T_RRCS;
    bool has_recv = s->type == T_R || s->type == T_RCS || s->type == T_RRS || s->type == T_RRC ||
                    s->type == T_RRCS;
    long E = R->E;
    if (!has_send && !has_recv) {
        long n = (long)s->cnt * E;
        if (s->type == T_CPY || s->type == T_RE) {
            value *src = bufptr(R, rank, s->sbuf, s->soff), *dst = bufptr(R, rank, s->dbuf, s->doff);
            if (s->type == T_CPY)
                memmove(dst, src, (size_t)n * sizeof(value));
            else
                for (long k = 0; k < n; k++)
                    dst[k] = add(R, dst[k], src[k]);
        }
        finish_step(R, rank, t, s, pc);
        return 1;
    }
    conn *in = has_recv ? &R->conns[R->rconn[rank][t]] : NULL;
    conn *out = has_send ? &R->conns[R->sconn[rank][t]] : NULL;
    if (in && in->count == 0)
        return 0;
    if (out && out->count >= R->o->fifo_capacity)
        return 0;
    value *m = NULL;
    if (in) {
        int slot = in->head;
        if (in->cnt[slot] != s->cnt || in->idx[slot] != u)
            return cs_error_set(R->err, CS_EVERIFY, "cnt", "line %d: rank %d receives %d chunks "
                                "from rank %d but the sender's step moves %d", s->line, rank,
                                s->cnt, in->src, in->cnt[slot]);
        m = in->msg[slot];
        in->msg[slot] = NULL;
        in->head = (in->head + 1) % R->o->fifo_capacity;
        in->count--;
    }
    value *src = (s->type == T_S || s->type == T_RRS || s->type == T_RRC || s->type == T_RRCS)
                     ? bufptr(R, rank, s->sbuf, s->soff) + (long)u * E : NULL;
    value *dst = (s->type == T_R || s->type == T_RCS || s->type == T_RRC || s->type == T_RRCS)
                     ? bufptr(R, rank, s->dbuf, s->doff) + (long)u * E : NULL;
    value *send = NULL;
    switch (s->type) {
    case T_S:
        send = malloc((size_t)E * sizeof(value));
        if (send)
            memcpy(send, src, (size_t)E * sizeof(value));
        break;
    case T_R:
        memcpy(dst, m, (size_t)E * sizeof(value));
        break;
    case T_RCS:
        memcpy(dst, m, (size_t)E * sizeof(value));
        send = m;
        m = NULL;
        break;
    case T_RRS:
        for (long k = 0; k < E; k++)
            m[k] = add(R, m[k], src[k]);
        send = m;
        m = NULL;
        break;
    default: /* T_RRC, T_RRCS */
        for (long k = 0; k < E; k++)
            dst[k] = add(R, m[k], src[k]);
        if (s->type == T_RRCS) {
            send = m;
            m = NULL;
            memcpy(send, dst, (size_t)E * sizeof(value));
        }
        break;
    }
    free(m);
    if (has_send) {
        if (!send)
            return cs_error_set(R->err, CS_ENOMEM, "", "out of memory");
        int slot = (out->head + out->count) % R->o->fifo_capacity;
        out->msg[slot] = send;
        out->cnt[slot] = s->cnt;
        out->idx[slot] = u;
        out->count++;
        R->st.messages++;
        if (out->count > R->st.max_fifo)
            R->st.max_fifo = out->count;
    }
    if (++R->sub[rank][t] == s->cnt)
        finish_step(R, rank, t, s, pc);
    return 1;
}

/* What the blocked block (r, t) waits for: the block (*wr, *wt) it needs to
 * move (-1: none), and why, in words.  Mirrors try_step's checks. */
static void wait_of(const run *R, int r, int t, int *wr, int *wt, char *why, size_t n)
{
    const x_tb *tb = &R->d->gpus[r].tbs[t];
    const x_step *s = &tb->steps[R->pc[r][t]];
    bool has_send = s->type == T_S || s->type == T_RCS || s->type == T_RRS || s->type == T_RRCS;
    bool has_recv = s->type == T_R || s->type == T_RCS || s->type == T_RRS || s->type == T_RRC ||
                    s->type == T_RRCS;
    *wr = *wt = -1;
    if (R->sub[r][t] == 0 && s->depid >= 0 && R->flag[r][s->depid] < s->deps) {
        *wr = r;
        *wt = s->depid;
        snprintf(why, n, "waits for thread block %d step %d", s->depid, s->deps);
    } else if (has_recv && R->conns[R->rconn[r][t]].count == 0) {
        *wr = tb->recv;
        *wt = R->conns[R->rconn[r][t]].stb;
        snprintf(why, n, "waits for a message from rank %d", tb->recv);
    } else if (has_send) {
        *wr = tb->send;
        *wt = R->conns[R->sconn[r][t]].rtb;
        snprintf(why, n, "waits for room to send to rank %d", tb->send);
    } else {
        snprintf(why, n, "cannot move");
    }
    if (*wt < 0)
        *wr = -1;
}

static bool tb_done(const run *R, int r, int t)
{
    return R->pc[r][t] >= R->d->gpus[r].tbs[t].nsteps;
}

/* Follows the waits from every blocked block until one walk closes a cycle
 * (each blocked block waits for exactly one other, so a walk either closes a
 * cycle or ends at a finished block).  Fills R->st.cycle; returns the
 * cycle's length, 0 when no walk closes one, -1 without memory to walk. */
static long find_cycle(run *R, long ntb, const long *base)
{
    const cs_msccl_doc *d = R->d;
    /* 0 unvisited, 1 on the current walk, 2 done; pos: index in the walk */
    unsigned char *mark = calloc((size_t)(ntb ? ntb : 1), 1);
    long *pos = malloc((size_t)(ntb ? ntb : 1) * sizeof *pos);
    int *pr = malloc((size_t)(ntb ? ntb : 1) * sizeof *pr);
    int *pt = malloc((size_t)(ntb ? ntb : 1) * sizeof *pt);
    long found = 0;
    if (!mark || !pos || !pr || !pt) {
        found = -1;
        goto done;
    }
    for (int r0 = 0; r0 < d->ngpus && !found; r0++)
        for (int t0 = 0; t0 < d->gpus[r0].ntb && !found; t0++) {
            if (mark[base[r0] + t0] || tb_done(R, r0, t0))
                continue;
            long len = 0;
            int r = r0, t = t0;
            for (;;) {
                long g = base[r] + t;
                if (mark[g] == 1) { /* closed: the cycle starts at g's place */
                    long from = pos[g];
                    found = len - from;
                    for (long k = from; k < len && k - from < CS_INTERP_CYCLE_MAX; k++)
                        R->st.cycle[k - from] =
                            (cs_interp_wait){pr[k], pt[k], R->pc[pr[k]][pt[k]]};
                    break;
                }
                if (mark[g] == 2 || tb_done(R, r, t))
                    break;
                mark[g] = 1;
                pos[g] = len;
                pr[len] = r;
                pt[len++] = t;
                int wr, wt;
                char why[96];
                wait_of(R, r, t, &wr, &wt, why, sizeof why);
                if (wr < 0)
                    break;
                r = wr;
                t = wt;
            }
            for (long k = 0; k < len; k++)
                mark[base[pr[k]] + pt[k]] = 2;
        }
done:
    free(mark);
    free(pos);
    free(pr);
    free(pt);
    R->st.cycle_len = (int)(found > INT_MAX ? INT_MAX : found < 0 ? 0 : found);
    return found;
}

static int describe_deadlock(run *R)
{
    char msg[CS_ERROR_MESSAGE_MAX];
    int len = 0, shown = 0;
    long blocked = 0, ntb = 0;
    const cs_msccl_doc *d = R->d;
    /* The deadlock is certain (no block moved); only its description needs
     * memory, so without memory it is still reported, as the blocked blocks
     * with what each waits for, and the cycle search is said to be skipped
     * (it was CS_ENOMEM without a message, and the caller's "out of memory
     * running the document" hid the verdict). */
    long *base = malloc((size_t)(d->ngpus + 1) * sizeof *base);
    for (int r = 0; r < d->ngpus; r++) {
        if (base)
            base[r] = ntb;
        ntb += d->gpus[r].ntb;
        for (int t = 0; t < d->gpus[r].ntb; t++)
            blocked += !tb_done(R, r, t);
    }
    long cyc = base ? find_cycle(R, ntb, base) : -1;
    free(base);
    msg[0] = 0;
    if (cyc < 0)
        len = snprintf(msg, sizeof msg, "(no memory to look for a cycle) ");
    if (cyc > 0) {
        len = snprintf(msg, sizeof msg, "cycle of %ld: ", cyc);
        for (long k = 0; k <= cyc && k <= CS_INTERP_CYCLE_MAX && len < (int)sizeof msg - 100;
             k++) {
            const cs_interp_wait *w = &R->st.cycle[k < cyc && k < CS_INTERP_CYCLE_MAX ? k : 0];
            if (k == cyc || k == CS_INTERP_CYCLE_MAX) {
                len += snprintf(msg + len, sizeof msg - (size_t)len, "%srank %d tb %d",
                                k == cyc ? "" : "... ", w->rank, w->tb);
                break;
            }
            const x_step *s = &d->gpus[w->rank].tbs[w->tb].steps[w->step];
            char why[96];
            int wr, wt;
            wait_of(R, w->rank, w->tb, &wr, &wt, why, sizeof why);
            len += snprintf(msg + len, sizeof msg - (size_t)len, "rank %d tb %d step %d (%s, "
                            "cnt %d) %s -> ", w->rank, w->tb, w->step, type_names[s->type], s->cnt,
                            why);
        }
    } else {
        /* no cycle (or none looked for): some block waits for one that has
         * finished, or for what no block provides */
        for (int r = 0; r < d->ngpus; r++)
            for (int t = 0; t < d->gpus[r].ntb; t++) {
                if (tb_done(R, r, t) || shown >= 3 || len >= (int)sizeof msg - 160)
                    continue;
                const x_step *s = &d->gpus[r].tbs[t].steps[R->pc[r][t]];
                char why[96];
                int wr, wt;
                wait_of(R, r, t, &wr, &wt, why, sizeof why);
                len += snprintf(msg + len, sizeof msg - (size_t)len,
                                "%srank %d tb %d step %d (%s) %s%s", shown ? "; " : "", r, t,
                                R->pc[r][t], type_names[s->type], why,
                                wr < 0 ? " (no block can provide it)"
                                       : tb_done(R, wr, wt) ? ", which has finished" : "");
                shown++;
            }
    }
    return cs_error_set(R->err, CS_EVERIFY, "", "deadlock: %ld thread blocks cannot proceed; %s",
                        blocked, msg);
}

static int execute(run *R)
{
    const cs_msccl_doc *d = R->d;
    for (;;) {
        bool moved = false, unfinished = false;
        R->st.sweeps++;
        for (int r = 0; r < d->ngpus; r++)
            for (int t = 0; t < d->gpus[r].ntb; t++) {
                while (R->pc[r][t] < d->gpus[r].tbs[t].nsteps) {
                    int rc = try_step(R, r, t);
                    if (rc < 0)
                        return rc;
                    if (rc == 0)
                        break;
                    moved = true;
                }
                if (R->pc[r][t] < d->gpus[r].tbs[t].nsteps)
                    unfinished = true;
            }
        if (!unfinished)
            break;
        if (!moved)
            return describe_deadlock(R);
    }
    for (long c = 0; c < R->nconns; c++)
        if (R->conns[c].count)
            return cs_error_set(R->err, CS_EVERIFY, "", "%d message(s) from rank %d to rank %d on "
                                "channel %d were never received", R->conns[c].count,
                                R->conns[c].src, R->conns[c].dst, R->conns[c].chan);
    return CS_OK;
}

static int setup_conns(run *R)
{
    const cs_msccl_doc *d = R->d;
    long n = 0;
    for (int r = 0; r < d->ngpus; r++)
        for (int t = 0; t < d->gpus[r].ntb; t++)
            n += d->gpus[r].tbs[t].send >= 0;
    R->conns = calloc((size_t)(n ? n : 1), sizeof(conn));
    if (!R->conns)
        return CS_ENOMEM;
    for (int r = 0; r < d->ngpus; r++)
        for (int t = 0; t < d->gpus[r].ntb; t++) {
            const x_tb *tb = &d->gpus[r].tbs[t];
            if (tb->send >= 0)
                R->conns[R->nconns++] = (conn){r, tb->send, tb->chan, t, -1, 0, 0, NULL, NULL, NULL};
        }
    qsort(R->conns, (size_t)R->nconns, sizeof(conn), cmp_conn);
    for (long c = 0; c < R->nconns; c++) {
        R->conns[c].cnt = calloc((size_t)R->o->fifo_capacity, sizeof(int));
        R->conns[c].idx = calloc((size_t)R->o->fifo_capacity, sizeof(int));
        R->conns[c].msg = calloc((size_t)R->o->fifo_capacity, sizeof(value *));
        if (!R->conns[c].cnt || !R->conns[c].idx || !R->conns[c].msg)
            return CS_ENOMEM;
    }
    R->sconn = calloc((size_t)d->ngpus, sizeof(long *));
    R->rconn = calloc((size_t)d->ngpus, sizeof(long *));
    if (!R->sconn || !R->rconn)
        return CS_ENOMEM;
    for (int r = 0; r < d->ngpus; r++) {
        size_t n = (size_t)(d->gpus[r].ntb ? d->gpus[r].ntb : 1);
        R->sconn[r] = malloc(n * sizeof(long));
        R->rconn[r] = malloc(n * sizeof(long));
        if (!R->sconn[r] || !R->rconn[r])
            return CS_ENOMEM;
    }
    for (int r = 0; r < d->ngpus; r++)
        for (int t = 0; t < d->gpus[r].ntb; t++) {
            const x_tb *tb = &d->gpus[r].tbs[t];
            R->sconn[r][t] = tb->send >= 0 ? find_conn(R, r, tb->send, tb->chan) : -1;
            R->rconn[r][t] = -1;
            if (tb->recv >= 0) {
                R->rconn[r][t] = find_conn(R, tb->recv, r, tb->chan);
                if (R->rconn[r][t] < 0)
                    return cs_error_set(R->err, CS_EVERIFY, "recv", "line %d: rank %d thread "
                                        "block %d receives from rank %d on channel %d, but that "
                                        "rank has no thread block sending to %d on it", tb->line,
                                        r, t, tb->recv, tb->chan, r);
                R->conns[R->rconn[r][t]].rtb = t;
            }
        }
    return CS_OK;
}

/* ---- expected results ---------------------------------------------------------- */

static value input_value(const run *R, int rank, long off, int e)
{
    value v;
    if (R->o->type == CS_INTERP_INT64)
        v.i = ((int64_t)(rank + 1) << 36) + (int64_t)off * 64 + e + 1;
    else
        v.d = (rank + 1) * 1048576.0 + off * 16.0 + e + 1;
    return v;
}

static bool same(const run *R, value a, value b)
{
    return R->o->type == CS_INTERP_INT64 ? a.i == b.i : a.d == b.d;
}

static double shown(const run *R, value v)
{
    return R->o->type == CS_INTERP_INT64 ? (double)v.i : v.d;
}

typedef struct layout {
    cs_coll_kind kind;
    int root;
    int C;       /* chunks per rank block */
} layout;

static int decide_layout(const run *R, layout *L)
{
    const cs_msccl_doc *d = R->d;
    const cs_collective *c = R->o->collective;
    int P = d->ngpus;
    const char *coll = d->coll;
    if (c) {
        static const struct { const char *coll; cs_coll_kind kind; } names[] = {
            {"allreduce", CS_COLL_ALLREDUCE}, {"allgather", CS_COLL_ALLGATHER},
            {"reduce", CS_COLL_REDUCE}, {"broadcast", CS_COLL_BROADCAST},
            {"alltoall", CS_COLL_ALLTOALL}, {"reduce_scatter", CS_COLL_REDUCESCATTER},
            {"reducescatter", CS_COLL_REDUCESCATTER}, {"gather", CS_COLL_GATHER},
            {"scatter", CS_COLL_SCATTER}};
        bool fits = !strcmp(coll, "custom") &&
                    (c->kind == CS_COLL_GATHER || c->kind == CS_COLL_SCATTER ||
                     c->kind == CS_COLL_CUSTOM);
        for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
            fits |= !strcmp(coll, names[k].coll) && names[k].kind == c->kind;
        if (!fits)
            return cs_error_set(R->err, CS_EINVAL, "collective", "the document is coll \"%s\" "
                                "but the collective to check is %s", coll,
                                collective_kind_name(c->kind));
        L->kind = c->kind;
        L->root = c->root;
    } else if (!strcmp(coll, "allreduce")) {
        L->kind = CS_COLL_ALLREDUCE;
    } else if (!strcmp(coll, "allgather")) {
        L->kind = CS_COLL_ALLGATHER;
    } else if (!strcmp(coll, "reduce_scatter") || !strcmp(coll, "reducescatter")) {
        L->kind = CS_COLL_REDUCESCATTER;
    } else if (!strcmp(coll, "alltoall")) {
        L->kind = CS_COLL_ALLTOALL;
    } else {
        return cs_error_set(R->err, CS_EINVAL, "collective", "coll \"%s\" needs the collective "
                            "(root or pairs) to check the result", coll);
    }
    if (collective_kind_is_rooted(L->kind) && (L->root < 0 || L->root >= P))
        return cs_error_set(R->err, CS_EINVAL, "root", "root %d is out of range", L->root);
    const x_gpu *g = &d->gpus[0];
    switch (L->kind) {
    case CS_COLL_ALLGATHER:
        L->C = g->i_chunks;
        break;
    case CS_COLL_GATHER:
        L->C = d->gpus[L->root].o_chunks / P;
        break;
    case CS_COLL_REDUCESCATTER:
        L->C = g->o_chunks;
        break;
    case CS_COLL_SCATTER:
    case CS_COLL_ALLTOALL:
        L->C = g->i_chunks / P;
        break;
    case CS_COLL_CUSTOM:
        L->C = (int)c->custom_global_chunks;
        break;
    default:
        L->C = g->o_chunks;
        break;
    }
    if (L->C < 1)
        return cs_error_set(R->err, CS_EINVAL, "i_chunks", "the buffers hold no chunks");
    /* every rank must declare the buffers the check reads */
    for (int r = 0; r < P; r++) {
        const x_gpu *x = &d->gpus[r];
        long need_i = 0, need_o = 0;
        switch (L->kind) {
        case CS_COLL_ALLGATHER: need_i = L->C; need_o = (long)P * L->C; break;
        case CS_COLL_GATHER: need_i = L->C; need_o = r == L->root ? (long)P * L->C : 0; break;
        case CS_COLL_REDUCESCATTER: need_i = (long)P * L->C; need_o = L->C; break;
        case CS_COLL_SCATTER: need_i = r == L->root ? (long)P * L->C : 0; need_o = L->C; break;
        case CS_COLL_ALLTOALL: need_i = need_o = (long)P * L->C; break;
        case CS_COLL_BROADCAST: need_i = r == L->root ? L->C : 0; need_o = L->C; break;
        case CS_COLL_REDUCE: need_i = L->C; need_o = r == L->root ? L->C : 0; break;
        default: need_i = need_o = L->C; break;
        }
        if (x->i_chunks < need_i || x->o_chunks < need_o)
            return cs_error_set(R->err, CS_EVERIFY, "i_chunks", "gpu %d declares i_chunks=%d "
                                "o_chunks=%d but a %s of %d chunks per rank needs %ld and %ld", r,
                                x->i_chunks, x->o_chunks, collective_kind_name(L->kind), L->C,
                                need_i, need_o);
    }
    return CS_OK;
}

/* Value chunk `off` of rank `rank`'s input holds (before the run). */
static value in_val(const run *R, const layout *L, int rank, long off, int e)
{
    if (L->kind == CS_COLL_CUSTOM)
        return input_value(R, 0, off, e);
    return input_value(R, rank, off, e);
}

static int check_output(run *R, const layout *L)
{
    int P = R->d->ngpus, C = L->C, E = R->E;
    for (int r = 0; r < P; r++) {
        long nout;
        switch (L->kind) {
        case CS_COLL_ALLGATHER: case CS_COLL_ALLTOALL: nout = (long)P * C; break;
        case CS_COLL_GATHER: nout = r == L->root ? (long)P * C : 0; break;
        case CS_COLL_REDUCE: nout = r == L->root ? C : 0; break;
        case CS_COLL_CUSTOM: nout = C; break;
        default: nout = C; break;
        }
        for (long x = 0; x < nout; x++) {
            if (L->kind == CS_COLL_CUSTOM &&
                !collective_post(R->o->collective, P, 1, x, r))
                continue;
            for (int e = 0; e < E; e++) {
                value want = {0};
                switch (L->kind) {
                case CS_COLL_ALLGATHER:
                case CS_COLL_GATHER:
                    want = in_val(R, L, (int)(x / C), x % C, e);
                    break;
                case CS_COLL_ALLTOALL:
                    want = in_val(R, L, (int)(x / C), (long)r * C + x % C, e);
                    break;
                case CS_COLL_BROADCAST:
                    want = in_val(R, L, L->root, x, e);
                    break;
                case CS_COLL_SCATTER:
                    want = in_val(R, L, L->root, (long)r * C + x, e);
                    break;
                case CS_COLL_REDUCESCATTER:
                    for (int p = 0; p < P; p++)
                        want = p ? add(R, want, in_val(R, L, p, (long)r * C + x, e))
                                 : in_val(R, L, p, (long)r * C + x, e);
                    break;
                case CS_COLL_CUSTOM:
                    want = in_val(R, L, 0, x, e);
                    break;
                default: /* allreduce, reduce */
                    for (int p = 0; p < P; p++)
                        want = p ? add(R, want, in_val(R, L, p, x, e)) : in_val(R, L, p, x, e);
                    break;
                }
                value got = R->obuf[r][x * E + e];
                if (!same(R, got, want))
                    return cs_error_set(R->err, CS_EVERIFY, "", "wrong result: rank %d output "
                                        "chunk %ld element %d is %.17g, expected %.17g (%s, %s)",
                                        r, x, e, shown(R, got), shown(R, want),
                                        collective_kind_name(L->kind),
                                        R->o->inplace ? "in place" : "out of place");
            }
        }
    }
    return CS_OK;
}

static int setup_buffers(run *R, const layout *L)
{
    const cs_msccl_doc *d = R->d;
    int P = d->ngpus, E = R->E;
    long total = 0;
    for (int r = 0; r < P; r++)
        total += ((long)d->gpus[r].i_chunks + d->gpus[r].o_chunks + d->gpus[r].s_chunks) * E;
    if (total > MAX_VALUES)
        return cs_error_set(R->err, CS_ELIMIT, "", "buffers of %ld elements exceed the "
                            "interpreter's limit of %ld", total, MAX_VALUES);
    R->storage = malloc((size_t)(total ? total : 1) * sizeof(value));
    R->ibuf = calloc((size_t)P, sizeof(value *));
    R->obuf = calloc((size_t)P, sizeof(value *));
    R->sbuf = calloc((size_t)P, sizeof(value *));
    if (!R->storage || !R->ibuf || !R->obuf || !R->sbuf)
        return CS_ENOMEM;
    value poison;
    if (R->o->type == CS_INTERP_INT64)
        poison.i = INT64_MIN + 12345;
    else
        poison.d = NAN;
    for (long k = 0; k < total; k++)
        R->storage[k] = poison;
    value *p = R->storage;
    for (int r = 0; r < P; r++) {
        const x_gpu *g = &d->gpus[r];
        R->obuf[r] = p;
        p += (long)g->o_chunks * E;
        R->ibuf[r] = p;
        p += (long)g->i_chunks * E;
        R->sbuf[r] = p;
        p += (long)g->s_chunks * E;
        if (R->o->inplace) {
            /* NCCL in-place calls: the input is (a block of) the output */
            switch (L->kind) {
            case CS_COLL_ALLGATHER:
                if ((long)(r + 1) * g->i_chunks > g->o_chunks)
                    return cs_error_set(R->err, CS_EVERIFY, "o_chunks", "in-place allgather "
                                        "needs o_chunks >= ngpus * i_chunks");
                R->ibuf[r] = R->obuf[r] + (long)r * g->i_chunks * E;
                break;
            case CS_COLL_REDUCESCATTER:
                R->obuf[r] = R->ibuf[r] + (long)r * g->o_chunks * E;
                if ((long)(r + 1) * g->o_chunks > g->i_chunks)
                    return cs_error_set(R->err, CS_EVERIFY, "i_chunks", "in-place reducescatter "
                                        "needs i_chunks >= ngpus * o_chunks");
                break;
            default:
                if (g->i_chunks > g->o_chunks)
                    return cs_error_set(R->err, CS_EVERIFY, "i_chunks", "in-place %s needs "
                                        "i_chunks <= o_chunks", collective_kind_name(L->kind));
                R->ibuf[r] = R->obuf[r];
                break;
            }
        }
    }
    for (int r = 0; r < P; r++) {
        int n = d->gpus[r].i_chunks;
        for (long x = 0; x < n; x++)
            for (int e = 0; e < E; e++)
                if (L->kind != CS_COLL_CUSTOM || (x < L->C &&
                    collective_pre(R->o->collective, P, 1, x, r)))
                R->ibuf[r][x * E + e] = in_val(R, L, r, x, e);
    }
    return CS_OK;
}

void msccl_interp_options_default(cs_msccl_interp_options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->type = CS_INTERP_DOUBLE;
    opt->elems_per_chunk = 3;
    opt->fifo_capacity = 1;
}

int msccl_interp_check(const cs_msccl_doc *doc, const cs_msccl_interp_options *opt,
                       cs_msccl_interp_stats *stats, cs_error *err)
{
    cs_msccl_interp_options dflt;
    msccl_interp_options_default(&dflt);
    if (!opt)
        opt = &dflt;
    if (!doc)
        return cs_error_set(err, CS_EINVAL, "xml", "no document");
    if (opt->elems_per_chunk < 1 || opt->elems_per_chunk > 4096 || opt->fifo_capacity < 1 ||
        opt->fifo_capacity > 1 << 20)
        return cs_error_set(err, CS_EINVAL, "options", "elems_per_chunk must be 1..4096 and "
                            "fifo_capacity >= 1");
    for (int r = 0; r < doc->ngpus; r++)
        if (!msccl_doc_has_gpu(doc, r))
            return cs_error_set(err, CS_EINVAL, "ngpus", "the slice has no <gpu id=\"%d\">: only "
                                "a document with every rank runs", r);
    if (opt->inplace && !doc->inplace)
        return cs_error_set(err, CS_EINVAL, "inplace", "the document is not for in-place calls");
    if (!opt->inplace && !doc->outofplace)
        return cs_error_set(err, CS_EINVAL, "inplace", "the document is not for out-of-place calls");
    if (opt->collective && opt->collective->kind == CS_COLL_CUSTOM &&
        !opt->collective->custom_bits)
        return cs_error_set(err, CS_EINVAL, "collective", "validate the custom collective first");
    run R;
    memset(&R, 0, sizeof R);
    R.d = doc;
    R.o = opt;
    R.E = opt->elems_per_chunk;
    R.err = err;
    layout L = {0};
    L.root = -1;
    int P = doc->ngpus;
    int rc = decide_layout(&R, &L);
    if (rc == CS_OK)
        rc = setup_buffers(&R, &L);
    if (rc == CS_OK)
        rc = setup_conns(&R);
    if (rc == CS_OK) {
        R.flag = calloc((size_t)P, sizeof(int *));
        R.pc = calloc((size_t)P, sizeof(int *));
        R.sub = calloc((size_t)P, sizeof(int *));
        if (!R.flag || !R.pc || !R.sub)
            rc = CS_ENOMEM;
        for (int r = 0; r < P && rc == CS_OK; r++) {
            int n = doc->gpus[r].ntb ? doc->gpus[r].ntb : 1;
            R.flag[r] = malloc((size_t)n * sizeof(int));
            R.pc[r] = calloc((size_t)n, sizeof(int));
            R.sub[r] = calloc((size_t)n, sizeof(int));
            if (!R.flag[r] || !R.pc[r] || !R.sub[r]) {
                rc = CS_ENOMEM;
                break;
            }
            for (int t = 0; t < n; t++)
                R.flag[r][t] = -1;
        }
    }
    if (rc == CS_OK)
        rc = execute(&R);
    if (rc == CS_OK)
        rc = check_output(&R, &L);
    if (rc == CS_ENOMEM)
        cs_error_set(err, CS_ENOMEM, "", "out of memory running the document");
    if (stats)
        *stats = R.st;
    for (long c = 0; c < R.nconns; c++) {
        if (R.conns[c].msg)
            for (int k = 0; k < opt->fifo_capacity; k++)
                free(R.conns[c].msg[k]);
        free(R.conns[c].msg);
        free(R.conns[c].cnt);
        free(R.conns[c].idx);
    }
    free(R.conns);
    for (int r = 0; r < P; r++) {
        if (R.flag)
            free(R.flag[r]);
        if (R.pc)
            free(R.pc[r]);
        if (R.sub)
            free(R.sub[r]);
        if (R.sconn)
            free(R.sconn[r]);
        if (R.rconn)
            free(R.rconn[r]);
    }
    free(R.sconn);
    free(R.rconn);
    free(R.flag);
    free(R.pc);
    free(R.sub);
    free(R.ibuf);
    free(R.obuf);
    free(R.sbuf);
    free(R.storage);
    return rc;
}
