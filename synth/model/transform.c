/*
 * transform.c - algorithms made from other algorithms: inversion (SCCL sec.
 * 3.5) and concatenation (reducescatter + allgather = allreduce).
 *
 * Inversion turns each chunk's distribution tree upside down: a broadcast tree
 * run backwards on the reversed links gathers every contribution into the
 * root, and since each rank sends its partial only after all of its children
 * (its receivers in the original) have sent theirs, every contribution is
 * reduced exactly once.  That argument needs a tree: a rank that received a
 * chunk twice, or received a chunk it started with, would send its partial
 * twice (a double count), so such schedules are rejected instead of producing
 * an algorithm the verifier would refuse anyway.
 *
 * Chunk ids carry over unchanged: allgather chunk g starts at rank g mod P and
 * reducescatter chunk g is reduced at rank g mod P; gather and scatter mirror
 * each other the same way; broadcast and reduce share the root.
 */
#include "algorithm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct recv_key {
    long chunk;
    int dst;
    int index;
} recv_key;

static int compare_recv(const void *pa, const void *pb)
{
    const recv_key *a = pa, *b = pb;
    if (a->chunk != b->chunk)
        return a->chunk < b->chunk ? -1 : 1;
    if (a->dst != b->dst)
        return a->dst < b->dst ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

/* Every (chunk, rank) received at most once and never by a rank that starts
 * with the chunk. */
static int check_tree(const cs_algorithm *a, cs_error *err)
{
    long n = a->nsends;
    if (n > 0x7fffffff)
        return cs_error_set(err, CS_ELIMIT, "sends", "too many sends to invert (%ld)", n);
    for (long i = 0; i < n; i++) {
        const cs_send sv = algorithm_send(a, i), *s = &sv;
        int nodes = a->ranks + a->switch_nodes;   /* switch nodes invert like ranks */
        if (s->chunk < 0 || s->chunk >= a->global_chunks || s->dst < 0 || s->dst >= nodes ||
            s->src < 0 || s->src >= nodes)
            return cs_error_set(err, CS_EINVAL, "sends",
                                "send %ld (chunk %ld, %d->%d): out of range", i, s->chunk,
                                s->src, s->dst);
        if (s->op != CS_OP_COPY)
            return cs_error_set(err, CS_EINVAL, "sends",
                                "send %ld (chunk %ld, %d->%d, step %d): only copies can be "
                                "inverted", i, s->chunk, s->src, s->dst, s->step);
        if (s->dst < a->ranks && collective_pre(&a->collective, a->ranks, a->chunks, s->chunk,
                                                s->dst))
            return cs_error_set(err, CS_EINVAL, "sends",
                                "send %ld (chunk %ld, %d->%d, step %d): rank %d already starts "
                                "with chunk %ld, so the inverse would count it twice", i,
                                s->chunk, s->src, s->dst, s->step, s->dst, s->chunk);
    }
    if (n < 2)
        return CS_OK;
    recv_key *keys = malloc(sizeof *keys * (size_t)n);
    if (!keys)
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
    for (long i = 0; i < n; i++) {
        keys[i].chunk = algorithm_send_chunk(a, i);
        keys[i].dst = algorithm_send_dst(a, i);
        keys[i].index = (int)i;
    }
    qsort(keys, (size_t)n, sizeof *keys, compare_recv);
    int rc = CS_OK;
    for (long i = 1; i < n; i++) {
        if (keys[i].chunk == keys[i - 1].chunk && keys[i].dst == keys[i - 1].dst) {
            const cs_send sv = algorithm_send(a, keys[i].index), *s = &sv;
            rc = cs_error_set(err, CS_EINVAL, "sends",
                              "send %d (chunk %ld, %d->%d, step %d): rank %d receives chunk %ld "
                              "again (first in send %d); inversion needs each (chunk, rank) "
                              "received at most once", keys[i].index, s->chunk, s->src, s->dst,
                              s->step, s->dst, s->chunk, keys[i - 1].index);
            break;
        }
    }
    free(keys);
    return rc;
}

int algorithm_invert(const cs_algorithm *a, cs_algorithm **out, cs_error *err)
{
    *out = NULL;
    cs_collective inv;
    cs_op op;
    switch (a->collective.kind) {
    case CS_COLL_ALLGATHER:
        collective_init(&inv, CS_COLL_REDUCESCATTER, -1);
        op = CS_OP_REDUCE;
        break;
    case CS_COLL_BROADCAST:
        collective_init(&inv, CS_COLL_REDUCE, a->collective.root);
        op = CS_OP_REDUCE;
        break;
    case CS_COLL_GATHER:
        collective_init(&inv, CS_COLL_SCATTER, a->collective.root);
        op = CS_OP_COPY;
        break;
    case CS_COLL_SCATTER:
        collective_init(&inv, CS_COLL_GATHER, a->collective.root);
        op = CS_OP_COPY;
        break;
    default:
        return cs_error_set(err, CS_EUNSUPPORTED, "collective.kind",
                            "%s cannot be inverted (allgather, broadcast, gather and scatter "
                            "can)", collective_kind_name(a->collective.kind));
    }
    int rc = check_tree(a, err);
    if (rc != CS_OK)
        return rc;
    cs_algorithm *b = NULL;
    rc = algorithm_new(&inv, a->topology, a->ranks, a->chunks, a->steps, &b, err);
    collective_free(&inv);
    if (rc != CS_OK)
        return rc;
    if (b->global_chunks != a->global_chunks) {
        algorithm_free(b);
        return cs_error_set(err, CS_EINTERNAL, "global_chunks",
                            "inverse has %ld global chunks, original %ld", b->global_chunks,
                            a->global_chunks);
    }
    for (int s = 0; s < a->steps; s++)
        b->rounds_per_step[s] = a->rounds_per_step[a->steps - 1 - s];
    algorithm_update_rounds(b);
    memcpy(b->method, a->method, sizeof b->method);
    memcpy(b->optimality, a->optimality, sizeof b->optimality);
    b->timed_chunk_bytes = a->timed_chunk_bytes;
    /* copies out of a switch node become reductions into it: in-network
     * aggregation (SHARP, NVLS), each node combining what its members send
     * before it sends the sum on */
    b->switch_nodes = a->switch_nodes;
    bool timed = algorithm_is_timed(a);
    double horizon = 0.0;
    if (timed)
        for (long i = 0; i < a->nsends; i++)
            if (algorithm_send_end_us(a, i) > horizon)
                horizon = algorithm_send_end_us(a, i);
    /* Reversed order keeps the output roughly in step order. */
    if (algorithm_reserve_sends(b, a->nsends) != CS_OK) {
        algorithm_free(b);
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory for %ld sends", a->nsends);
    }
    for (long i = a->nsends - 1; i >= 0; i--) {
        const cs_send sv = algorithm_send(a, i), *s = &sv;
        int step = a->steps - 1 - s->step;
        int r = timed ? algorithm_add_timed_send(b, s->chunk, s->dst, s->src, step, op,
                                                 horizon - s->end_us, horizon - s->start_us)
                      : algorithm_add_send(b, s->chunk, s->dst, s->src, step, op);
        if (r != CS_OK) {
            algorithm_free(b);
            return cs_error_set(err, r, NULL, r == CS_ELIMIT ? "more than 2^32 distinct times"
                                                           : "out of memory");
        }
    }
    *out = b;
    return CS_OK;
}

int algorithm_concat(const cs_algorithm *first, const cs_algorithm *second,
                     cs_algorithm **out, cs_error *err)
{
    *out = NULL;
    if (first->switch_nodes != second->switch_nodes)
        return cs_error_set(err, CS_EINVAL, "switch_nodes", "cannot concatenate algorithms with "
                            "%d and %d switch nodes", first->switch_nodes, second->switch_nodes);
    if (first->ranks != second->ranks)
        return cs_error_set(err, CS_EINVAL, "ranks", "cannot concatenate algorithms on %d and "
                            "%d ranks", first->ranks, second->ranks);
    cs_coll_kind k1 = first->collective.kind, k2 = second->collective.kind;
    cs_collective result;
    int chunks;
    if (k1 == CS_COLL_REDUCESCATTER && k2 == CS_COLL_ALLGATHER) {
        if (first->chunks != second->chunks)
            return cs_error_set(err, CS_EINVAL, "chunks", "reducescatter has %d chunks, "
                                "allgather %d: they must be equal", first->chunks,
                                second->chunks);
        collective_init(&result, CS_COLL_ALLREDUCE, -1);
        chunks = first->ranks * first->chunks;
    } else if (k1 == CS_COLL_REDUCE && k2 == CS_COLL_BROADCAST) {
        if (first->chunks != second->chunks || first->collective.root != second->collective.root)
            return cs_error_set(err, CS_EINVAL, "chunks", "reduce and broadcast must have the "
                                "same chunks and root");
        collective_init(&result, CS_COLL_ALLREDUCE, -1);
        chunks = first->chunks;
    } else {
        return cs_error_set(err, CS_EUNSUPPORTED, "collective.kind",
                            "concatenating %s and %s has no collective meaning (supported: "
                            "reducescatter + allgather, reduce + broadcast)",
                            collective_kind_name(k1), collective_kind_name(k2));
    }
    if ((long)first->steps + second->steps > 0x7fffffff)
        return cs_error_set(err, CS_ELIMIT, "steps", "too many steps");
    cs_algorithm *c = NULL;
    int rc = algorithm_new(&result, first->topology, first->ranks, chunks,
                           first->steps + second->steps, &c, err);
    collective_free(&result);
    if (rc != CS_OK)
        return rc;
    if (c->global_chunks != first->global_chunks || c->global_chunks != second->global_chunks) {
        algorithm_free(c);
        return cs_error_set(err, CS_EINTERNAL, "global_chunks",
                            "chunk ids do not line up (%ld, %ld -> %ld)", first->global_chunks,
                            second->global_chunks, c->global_chunks);
    }
    for (int s = 0; s < first->steps; s++)
        c->rounds_per_step[s] = first->rounds_per_step[s];
    for (int s = 0; s < second->steps; s++)
        c->rounds_per_step[first->steps + s] = second->rounds_per_step[s];
    algorithm_update_rounds(c);
    if (strcmp(first->method, second->method) == 0)
        memcpy(c->method, first->method, sizeof c->method);
    else
        snprintf(c->method, sizeof c->method, "%.15s+%.15s", first->method, second->method);
    if (strcmp(first->optimality, second->optimality) == 0)
        memcpy(c->optimality, first->optimality, sizeof c->optimality);
    if (first->timed_chunk_bytes == second->timed_chunk_bytes)
        c->timed_chunk_bytes = first->timed_chunk_bytes;
    c->switch_nodes = first->switch_nodes;
    if (algorithm_reserve_sends(c, first->nsends + second->nsends) != CS_OK) {
        algorithm_free(c);
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory for %ld sends",
                            first->nsends + second->nsends);
    }
    bool timed = algorithm_is_timed(first) && algorithm_is_timed(second);
    double shift = 0.0;
    if (timed)
        for (long i = 0; i < first->nsends; i++)
            if (algorithm_send_end_us(first, i) > shift)
                shift = algorithm_send_end_us(first, i);
    for (int part = 0; part < 2; part++) {
        const cs_algorithm *a = part ? second : first;
        int step0 = part ? first->steps : 0;
        double t0 = part ? shift : 0.0;
        for (long i = 0; i < a->nsends; i++) {
            const cs_send sv = algorithm_send(a, i), *s = &sv;
            int r = timed ? algorithm_add_timed_send(c, s->chunk, s->src, s->dst, s->step + step0,
                                                     s->op, s->start_us + t0, s->end_us + t0)
                          : algorithm_add_send(c, s->chunk, s->src, s->dst, s->step + step0,
                                               s->op);
            if (r != CS_OK) {
                algorithm_free(c);
                return cs_error_set(err, r, NULL, r == CS_ELIMIT ? "more than 2^32 distinct times"
                                                               : "out of memory");
            }
        }
    }
    *out = c;
    return CS_OK;
}
