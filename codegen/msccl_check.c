/*
 * msccl_check.c - an MSCCL document against the runtimes' parser limits
 * (see msccl_check.h).  Everything is counted on the parsed tree; nothing
 * comes from the generator.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msccl_check.h"
#include "xml_reader.h"

/* The two parsers' limits, as read from their sources. */
#define FORK_MAX_TB 216
#define FORK_MAX_STEPS 256
#define FORK_MAX_CHANNELS 32
#define FORK_MAX_TB_PER_CHANNEL 32
#define FORK_MAX_NODES 4096
#define FORK_MAX_ATTRS 16
#define EXEC_MAX_TB 1024
#define EXEC_MAX_STEPS 64
#define EXEC_MAX_CHANNELS 32
#define MAX_COUNT 72
/* The target GPU: all of a rank's blocks resident at once, 2 per SM (the
 * fork's MSCCL_MAX_NUM_THREAD_BLOCKS is 108*2 for an A100's 108 SMs). */
#define BLOCKS_PER_SM 2
#define MAX_SMS 4096

typedef struct checker {
    bool fork, exec;          /* which runtimes' rules apply */
    const char *fork_name, *exec_name;
    cs_error *err;
    cs_msccl_check_stats st;
    const char *coll;
    bool fork_coll;           /* coll is one of the old runtime's names */
    int ngpus, nchunksperloop, nchannels;
    int gpu_sms;              /* the target GPU's SMs; 0: not checked */
} checker;

static int bad(checker *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int bad(checker *c, int code, const char *fmt, ...)
{
    char msg[CS_ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return cs_error_set(c->err, code, "xml", "%s", msg);
}

/* An integer attribute that must be present. */
static int need_int(checker *c, const xmlr_node *n, const char *name, long *out)
{
    const char *v = xmlr_attr_get(n, name);
    if (!v)
        return bad(c, CS_EINVAL, "line %d: <%s> lacks %s (both runtimes require it)", n->line,
                   n->name, name);
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno)
        return bad(c, CS_EINVAL, "line %d: <%s> %s=\"%s\" is not an integer", n->line, n->name,
                   name, v);
    *out = x;
    return CS_OK;
}

static int attrs_fit(checker *c, const xmlr_node *n)
{
    if (c->fork && n->nattrs > FORK_MAX_ATTRS)
        return bad(c, CS_ELIMIT, "line %d: <%s> has %d attributes; %s reads at most %d",
                   n->line, n->name, n->nattrs, c->fork_name, FORK_MAX_ATTRS);
    return CS_OK;
}

static bool in_list(const char *s, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(s, *list) == 0)
            return true;
    return false;
}

static int check_algo(checker *c, const xmlr_node *root)
{
    static const char *const fork_colls[] = {"allreduce", "allgather", "reduce", "broadcast",
                                             "alltoall", "reduce_scatter", "custom", NULL};
    static const char *const exec_colls[] = {"reduce", "broadcast", "allreduce",
                                             "reducescatter", "allgather", "send", "recv",
                                             "gather", "scatter", "alltoall", "alltoallv",
                                             NULL};
    int rc;
    long v;
    if (strcmp(root->name, "algo") != 0)
        return bad(c, CS_EINVAL, "line %d: the root is <%s>, not <algo>", root->line, root->name);
    if ((rc = attrs_fit(c, root)) != CS_OK)
        return rc;
    if ((rc = need_int(c, root, "ngpus", &v)) != CS_OK)
        return rc;
    if (v < 1 || v > (1 << 20))
        return bad(c, CS_EINVAL, "<algo> ngpus=%ld is out of range", v);
    c->ngpus = (int)v;
    if ((rc = need_int(c, root, "nchunksperloop", &v)) != CS_OK)
        return rc;
    if (v < 1)
        return bad(c, CS_EINVAL, "<algo> nchunksperloop=%ld must be positive", v);
    c->nchunksperloop = (int)v;
    if ((rc = need_int(c, root, "nchannels", &v)) != CS_OK)
        return rc;
    if (v < 1)
        return bad(c, CS_EINVAL, "<algo> nchannels=%ld must be positive", v);
    c->nchannels = (int)v;
    if (c->exec && v > EXEC_MAX_CHANNELS)
        return bad(c, CS_ELIMIT, "<algo> nchannels=%ld; %s allows at most %d", v, c->exec_name,
                   EXEC_MAX_CHANNELS);
    if ((rc = need_int(c, root, "inplace", &v)) != CS_OK)
        return rc;
    const char *proto = xmlr_attr_get(root, "proto");
    if (!proto || (strcmp(proto, "Simple") && strcmp(proto, "LL128") && strcmp(proto, "LL")))
        return bad(c, CS_EINVAL, "<algo> proto must be Simple, LL128 or LL");
    c->coll = xmlr_attr_get(root, "coll");
    if (!c->coll)
        return bad(c, CS_EINVAL, "<algo> lacks coll");
    bool fork_knows = in_list(c->coll, fork_colls), exec_knows = in_list(c->coll, exec_colls);
    c->fork_coll = fork_knows;
    /* for both runtimes a name both know; where none exists (reducescatter,
     * gather, scatter) one of them must know it */
    bool both_possible = strcmp(c->coll, "reducescatter") && strcmp(c->coll, "reduce_scatter") &&
                         strcmp(c->coll, "gather") && strcmp(c->coll, "scatter");
    if (c->fork && !fork_knows && (!c->exec || both_possible || !exec_knows))
        return bad(c, CS_EINVAL, "<algo> coll=\"%s\" is not a collective %s knows", c->coll,
                   c->fork_name);
    if (c->exec && !exec_knows && (!c->fork || both_possible || !fork_knows))
        return bad(c, CS_EINVAL, "<algo> coll=\"%s\" is not a collective %s knows", c->coll,
                   c->exec_name);
    if (c->exec) {
        static const char *const need[] = {"minBytes", "maxBytes", "outofplace"};
        for (size_t k = 0; k < sizeof need / sizeof need[0]; k++)
            if ((rc = need_int(c, root, need[k], &v)) != CS_OK)
                return rc;
    }
    c->st.ngpus = c->ngpus;
    c->st.nchannels = c->nchannels;
    return CS_OK;
}

static long buf_chunks(char buf, long i, long o, long s)
{
    return buf == 'i' ? i : buf == 'o' ? o : s;
}

static int check_step(checker *c, const xmlr_node *n, int rank, int tb, int index, long chunks[3])
{
    static const char *const common_types[] = {"s", "r", "rcs", "rrs", "rrc", "rrcs", "cpy",
                                               "re", "nop", NULL};
    static const char *const reads_src[] = {"s", "rrs", "rrc", "rrcs", "cpy", "re", NULL};
    static const char *const writes_dst[] = {"r", "rcs", "rrc", "rrcs", "cpy", "re", NULL};
    int rc;
    if (strcmp(n->name, "step") != 0)
        return bad(c, CS_EINVAL, "line %d: unexpected <%s> in <tb>", n->line, n->name);
    if ((rc = attrs_fit(c, n)) != CS_OK)
        return rc;
    long s, srcoff, dstoff, cnt, depid, deps, hasdep;
    if ((rc = need_int(c, n, "s", &s)) != CS_OK || (rc = need_int(c, n, "srcoff", &srcoff)) ||
        (rc = need_int(c, n, "dstoff", &dstoff)) || (rc = need_int(c, n, "cnt", &cnt)) ||
        (rc = need_int(c, n, "depid", &depid)) || (rc = need_int(c, n, "deps", &deps)) ||
        (rc = need_int(c, n, "hasdep", &hasdep)))
        return rc;
    const char *type = xmlr_attr_get(n, "type"), *sb = xmlr_attr_get(n, "srcbuf"),
               *db = xmlr_attr_get(n, "dstbuf");
    if (!type || !sb || !db)
        return bad(c, CS_EINVAL, "line %d: <step> lacks type, srcbuf or dstbuf", n->line);
    bool known = in_list(type, common_types) || (c->fork && !c->exec && !strcmp(type, "ra"));
    if (!known)
        return bad(c, CS_EINVAL, "line %d: step type \"%s\" is not one the runtime knows", n->line,
                   type);
    if (strlen(sb) != 1 || strlen(db) != 1 || !strchr("ios", sb[0]) || !strchr("ios", db[0]))
        return bad(c, CS_EINVAL, "line %d: buffers must be i, o or s", n->line);
    if (s != index)
        return bad(c, CS_EINVAL, "line %d: rank %d thread block %d: step s=%ld is its step %d "
                   "(steps must be numbered in order)", n->line, rank, tb, s, index);
    if (c->fork && s >= FORK_MAX_STEPS)
        return bad(c, CS_ELIMIT, "line %d: rank %d thread block %d: step s=%ld; %s allows "
                   "s <= %d", n->line, rank, tb, s, c->fork_name, FORK_MAX_STEPS - 1);
    if (c->exec && s >= EXEC_MAX_STEPS)
        return bad(c, CS_ELIMIT, "line %d: rank %d thread block %d: step s=%ld; %s allows "
                   "s < %d", n->line, rank, tb, s, c->exec_name, EXEC_MAX_STEPS);
    if (cnt < 0 || cnt >= MAX_COUNT)
        return bad(c, CS_ELIMIT, "line %d: rank %d: cnt=%ld; the runtimes allow 0..%d", n->line,
                   rank, cnt, MAX_COUNT - 1);
    if (cnt > c->st.max_cnt)
        c->st.max_cnt = (int)cnt;
    c->st.merged_steps += cnt > 1;
    if (in_list(type, reads_src) &&
        (srcoff < 0 || srcoff + cnt > buf_chunks(sb[0], chunks[0], chunks[1], chunks[2])))
        return bad(c, CS_EINVAL, "line %d: rank %d: source %c[%ld..%ld) is outside the buffer",
                   n->line, rank, sb[0], srcoff, srcoff + cnt);
    if (in_list(type, writes_dst) &&
        (dstoff < 0 || dstoff + cnt > buf_chunks(db[0], chunks[0], chunks[1], chunks[2])))
        return bad(c, CS_EINVAL, "line %d: rank %d: destination %c[%ld..%ld) is outside the "
                   "buffer", n->line, rank, db[0], dstoff, dstoff + cnt);
    if ((depid < 0) != (deps < 0) || hasdep < 0 || hasdep > 1)
        return bad(c, CS_EINVAL, "line %d: rank %d: depid/deps/hasdep are inconsistent", n->line,
                   rank);
    return CS_OK;
}

static int check_gpu(checker *c, const xmlr_node *g, unsigned char *seen)
{
    int rc;
    long id, ic, oc, sc;
    if (strcmp(g->name, "gpu") != 0)
        return bad(c, CS_EINVAL, "line %d: unexpected <%s> in <algo>", g->line, g->name);
    if ((rc = attrs_fit(c, g)) != CS_OK)
        return rc;
    if ((rc = need_int(c, g, "id", &id)) || (rc = need_int(c, g, "i_chunks", &ic)) ||
        (rc = need_int(c, g, "o_chunks", &oc)) || (rc = need_int(c, g, "s_chunks", &sc)))
        return rc;
    if (id < 0 || id >= c->ngpus)
        return bad(c, CS_EINVAL, "line %d: gpu id %ld is not within ngpus=%d", g->line, id,
                   c->ngpus);
    if (seen[id]++)
        return bad(c, CS_EINVAL, "line %d: gpu id %ld appears twice", g->line, id);
    if (ic < 0 || oc < 0 || sc < 0)
        return bad(c, CS_EINVAL, "line %d: gpu %ld has negative chunk counts", g->line, id);
    int rank = (int)id;
    if (c->fork && c->fork_coll) { /* the old runtime's rule for its collectives */
        long imul = !strcmp(c->coll, "allgather") ? c->ngpus : 1;
        long omul = !strcmp(c->coll, "reduce_scatter") || !strcmp(c->coll, "reducescatter")
                        ? c->ngpus
                        : 1;
        if ((ic && ic * imul != c->nchunksperloop) || (oc && oc * omul != c->nchunksperloop))
            return bad(c, CS_EINVAL, "line %d: gpu %d: i_chunks=%ld, o_chunks=%ld do not match "
                       "nchunksperloop=%d as %s requires", g->line, rank, ic, oc,
                       c->nchunksperloop, c->fork_name);
    }
    int ntb = g->nchildren;
    if (c->fork && ntb > FORK_MAX_TB)
        return bad(c, CS_ELIMIT, "line %d: rank %d has %d thread blocks; %s allows %d (ids "
                   "0..%d)", g->line, rank, ntb, c->fork_name, FORK_MAX_TB, FORK_MAX_TB - 1);
    if (c->exec && ntb > EXEC_MAX_TB)
        return bad(c, CS_ELIMIT, "line %d: rank %d has %d thread blocks; %s allows ids up to %d",
                   g->line, rank, ntb, c->exec_name, EXEC_MAX_TB - 1);
    if (c->gpu_sms > 0 && ntb > BLOCKS_PER_SM * c->gpu_sms)
        return bad(c, CS_ELIMIT, "line %d: rank %d has %d thread blocks; a GPU with gpu_sms=%d "
                   "holds at most %d at once (%d per SM), and every block of a rank must be "
                   "resident", g->line, rank, ntb, c->gpu_sms, BLOCKS_PER_SM * c->gpu_sms,
                   BLOCKS_PER_SM);
    if (ntb > c->st.max_tbs)
        c->st.max_tbs = ntb;
    int nch = c->nchannels;
    int *senders = calloc((size_t)nch, sizeof(int)), *receivers = calloc((size_t)nch, sizeof(int));
    unsigned char *ids = calloc((size_t)(ntb ? ntb : 1), 1);
    if (!senders || !receivers || !ids) {
        free(senders);
        free(receivers);
        free(ids);
        return cs_error_set(c->err, CS_ENOMEM, "", "out of memory");
    }
    long chunks[3] = {ic, oc, sc};
    long steps = 0;
    rc = CS_OK;
    for (int k = 0; k < ntb && rc == CS_OK; k++) {
        const xmlr_node *t = g->children[k];
        long tid, send, recv, chan;
        if (strcmp(t->name, "tb") != 0) {
            rc = bad(c, CS_EINVAL, "line %d: unexpected <%s> in <gpu>", t->line, t->name);
            break;
        }
        if ((rc = attrs_fit(c, t)) || (rc = need_int(c, t, "id", &tid)) ||
            (rc = need_int(c, t, "send", &send)) || (rc = need_int(c, t, "recv", &recv)) ||
            (rc = need_int(c, t, "chan", &chan)))
            break;
        if (tid < 0 || tid >= ntb || ids[tid]++) {
            rc = bad(c, CS_EINVAL, "line %d: rank %d: thread block ids must be 0..%d, unique "
                     "and consecutive (id %ld)", t->line, rank, ntb - 1, tid);
            break;
        }
        if (send < -1 || send >= c->ngpus || recv < -1 || recv >= c->ngpus || send == rank ||
            recv == rank) {
            rc = bad(c, CS_EINVAL, "line %d: rank %d thread block %ld: peers send=%ld recv=%ld",
                     t->line, rank, tid, send, recv);
            break;
        }
        if (chan < 0 || chan >= nch) {
            rc = bad(c, CS_EINVAL, "line %d: rank %d thread block %ld: chan=%ld is not below "
                     "nchannels=%d", t->line, rank, tid, chan, nch);
            break;
        }
        if (c->fork && chan >= FORK_MAX_CHANNELS) {
            rc = bad(c, CS_ELIMIT, "line %d: rank %d thread block %ld: chan=%ld; %s allows "
                     "0..%d", t->line, rank, tid, chan, c->fork_name, FORK_MAX_CHANNELS - 1);
            break;
        }
        senders[chan] += send >= 0;
        receivers[chan] += recv >= 0;
        if (c->fork && (senders[chan] > FORK_MAX_TB_PER_CHANNEL ||
                        receivers[chan] > FORK_MAX_TB_PER_CHANNEL)) {
            rc = bad(c, CS_ELIMIT, "line %d: rank %d: channel %ld has %d sending and %d "
                     "receiving thread blocks; %s allows %d of each", t->line, rank, chan,
                     senders[chan], receivers[chan], c->fork_name, FORK_MAX_TB_PER_CHANNEL);
            break;
        }
        if (t->nchildren > c->st.max_steps)
            c->st.max_steps = t->nchildren;
        for (int s = 0; s < t->nchildren && rc == CS_OK; s++)
            rc = check_step(c, t->children[s], rank, (int)tid, s, chunks);
        steps += t->nchildren;
    }
    free(senders);
    free(receivers);
    free(ids);
    if (rc != CS_OK)
        return rc;
    /* what this rank's parser holds: <algo>, every <gpu> (other ranks' are
     * entered, their children skipped), its own blocks and steps */
    long elements = 1 + c->st.gpus + ntb + steps;
    if (elements > c->st.max_elements)
        c->st.max_elements = elements;
    if (c->fork && elements >= FORK_MAX_NODES)
        return bad(c, CS_ELIMIT, "rank %d parses %ld XML elements; %s reads fewer than %d",
                   rank, elements, c->fork_name, FORK_MAX_NODES);
    return CS_OK;
}

int msccl_check_limits(const char *text, size_t len, cs_msccl_runtime runtime,
                       cs_msccl_check_stats *stats, cs_error *err)
{
    cs_msccl_options o;
    msccl_options_default(&o);
    o.runtime = runtime;
    return msccl_check_for(text, len, &o, stats, err);
}

int msccl_check_for(const char *text, size_t len, const cs_msccl_options *opt,
                    cs_msccl_check_stats *stats, cs_error *err)
{
    checker c;
    memset(&c, 0, sizeof c);
    c.err = err;
    c.fork = opt->runtime != CS_MSCCL_RUNTIME_EXECUTOR;
    c.exec = opt->runtime != CS_MSCCL_RUNTIME_MSCCL;
    c.fork_name = "the msccl runtime";
    c.exec_name = "the msccl-executor runtime";
    if (stats)
        memset(stats, 0, sizeof *stats);
    if (opt->gpu_sms < 0 || opt->gpu_sms > MAX_SMS)
        return cs_error_set(err, CS_EINVAL, "gpu_sms", "gpu_sms=%d is not a GPU's SM count "
                            "(1..%d, or 0 for the runtime's own thread-block limit)",
                            opt->gpu_sms, MAX_SMS);
    c.gpu_sms = opt->gpu_sms;
    xmlr_node *root;
    int rc = xmlr_parse(text, len, &root, err);
    if (rc != CS_OK)
        return rc;
    if ((rc = check_algo(&c, root)) != CS_OK) {
        xmlr_free(root);
        return rc;
    }
    c.st.gpus = root->nchildren; /* every <gpu> counts for every rank's parse */
    unsigned char *seen = calloc((size_t)c.ngpus, 1);
    if (!seen)
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
    for (int k = 0; k < root->nchildren && rc == CS_OK; k++)
        rc = check_gpu(&c, root->children[k], seen);
    free(seen);
    xmlr_free(root);
    if (stats)
        *stats = c.st;
    return rc;
}
