/*
 * tacos_conditions.c - where a TACOS trial's chunks start and which ranks
 * need them, before any matching (tacos_engine.c does the matching).
 *
 * Allgather and broadcast are "universal": every rank needs every chunk it
 * lacks, so a rank's need is G minus what it starts with.  Chunks that only
 * some ranks need (gather, scatter, alltoall, custom) must be relayed by ranks
 * that do not: each (chunk, target) gets a random shortest path from the
 * chunk's nearest source (BFS distances, random ties, so trials differ), and
 * the ranks on it are marked as needing the chunk.  BFS distances are cached
 * per target rank (gather: one BFS to the root), or for scatter per source (one
 * BFS from the root, walking back from each target).
 */
#include "tacos_internal.h"

#include <stdlib.h>
#include <string.h>

bool tacos_kind_is_universal(const cs_collective *c)
{
    return c->kind == CS_COLL_ALLGATHER || c->kind == CS_COLL_BROADCAST;
}

/* BFS hop distances from every rank to `target` (over links toward it). */
static void bfs_to(const cs_topology *t, int target, int *dist, int *queue)
{
    for (int r = 0; r < t->ranks; r++)
        dist[r] = -1;
    int qh = 0, qt = 0;
    dist[target] = 0;
    queue[qt++] = target;
    while (qh < qt) {
        int v = queue[qh++];
        for (int k = t->in_begin[v]; k < t->in_begin[v + 1]; k++) {
            int u = t->links[t->in_links[k]].src;
            if (dist[u] < 0) {
                dist[u] = dist[v] + 1;
                queue[qt++] = u;
            }
        }
    }
}

/* BFS hop distances from `source` to every rank (over links away from it). */
static void bfs_from(const cs_topology *t, int source, int *dist, int *queue)
{
    for (int r = 0; r < t->ranks; r++)
        dist[r] = -1;
    int qh = 0, qt = 0;
    dist[source] = 0;
    queue[qt++] = source;
    while (qh < qt) {
        int u = queue[qh++];
        for (int l = t->out_begin[u]; l < t->out_begin[u + 1]; l++) {
            int v = t->links[l].dst;
            if (dist[v] < 0) {
                dist[v] = dist[u] + 1;
                queue[qt++] = v;
            }
        }
    }
}

/* For a chunk with one source: marks a random shortest path from `source` to
 * `target`, walking back from the target over distances from the source. */
static int mark_path_back(engine *e, long g, int source, int target, const int *dist)
{
    const cs_topology *t = e->t;
    if (dist[target] < 0)
        return CS_EUNSAT;
    int v = target;
    while (v != source) {
        uint64_t *row = e->covered + (size_t)v * e->W;
        if (bit_get(row, g)) {
            bit_clear(row, g);
            e->need[v]++;
            e->remaining++;
        }
        int k = dist[v], pick = -1, n = 0;
        for (int j = t->in_begin[v]; j < t->in_begin[v + 1]; j++) {
            int u = t->links[t->in_links[j]].src;
            if (dist[u] == k - 1 && tacos_rng_below(&e->rng, (uint32_t)++n) == 0)
                pick = u;
        }
        if (pick < 0)
            return CS_EINTERNAL;
        v = pick;
    }
    return CS_OK;
}

/* Marks ranks on a random shortest path from the nearest source of chunk g to
 * `target` as needing g (clears their covered bit).  srcs: the chunk's
 * sources. */
static int mark_path(engine *e, long g, const int *srcs, int nsrcs, int target, const int *dist)
{
    const cs_topology *t = e->t;
    int best = -1, nbest = 0;
    for (int i = 0; i < nsrcs; i++) {
        int s = srcs[i];
        if (s == target)
            return CS_OK;
        if (dist[s] < 0)
            continue;
        if (best < 0 || dist[s] < dist[best]) {
            best = s;
            nbest = 1;
        } else if (dist[s] == dist[best] && tacos_rng_below(&e->rng, (uint32_t)++nbest) == 0) {
            best = s;
        }
    }
    if (best < 0)
        return CS_EUNSAT;
    int u = best;
    while (u != target) {
        int k = dist[u], pick = -1, n = 0;
        for (int l = t->out_begin[u]; l < t->out_begin[u + 1]; l++) {
            int v = t->links[l].dst;
            if (dist[v] == k - 1 && tacos_rng_below(&e->rng, (uint32_t)++n) == 0)
                pick = v;
        }
        if (pick < 0)
            return CS_EINTERNAL;
        uint64_t *row = e->covered + (size_t)pick * e->W;
        if (bit_get(row, g)) {
            bool holds = false;
            for (int i = 0; i < nsrcs; i++)
                holds |= srcs[i] == pick;
            if (!holds) {
                bit_clear(row, g);
                e->need[pick]++;
                e->remaining++;
            }
        }
        u = pick;
    }
    return CS_OK;
}

/* Sets up holdings and needs: universal kinds need everything they lack;
 * targeted kinds mark relays along random shortest paths. */
int tacos_init_conditions(engine *e, cs_error *err)
{
    const tacos_problem *p = e->p;
    const cs_collective *c = p->coll;
    const cs_topology *t = e->t;
    int P = e->P, C = p->chunks;
    long G = e->G;
    if (tacos_kind_is_universal(c)) {
        for (long g = 0; g < G; g++) {
            int s = collective_source(c, P, C, g);
            if (s < 0)
                return cs_error_set(err, CS_EINTERNAL, "collective", "chunk %ld has no single source", g);
            bit_set(e->covered + (size_t)s * e->W, g);
            int rc = tacos_log_append(e, s, (uint32_t)g);
            if (rc)
                return cs_error_set(err, rc, NULL, "out of memory for arrival logs");
        }
        /* tail bits beyond G count as covered */
        for (int r = 0; r < P; r++) {
            uint64_t *row = e->covered + (size_t)r * e->W;
            for (long g = G; g < e->W * 64; g++)
                bit_set(row, g);
            e->need[r] = G - (long)e->logs[r].len;
            e->remaining += e->need[r];
        }
        return CS_OK;
    }

    /* targeted: everything covered until a path says otherwise */
    memset(e->covered, 0xff, (size_t)P * e->W * sizeof *e->covered);
    /* per chunk: sources and targets as CSR lists */
    long *sb = calloc((size_t)G + 1, sizeof *sb), *tb = calloc((size_t)G + 1, sizeof *tb);
    int *dist = malloc((size_t)P * sizeof *dist), *queue = malloc((size_t)P * sizeof *queue);
    int **dist_cache = calloc((size_t)P, sizeof *dist_cache);
    int *sv = NULL, *tv = NULL;
    int rc = CS_OK;
    if (!sb || !tb || !dist || !queue || !dist_cache) {
        rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory for collective conditions");
        goto out;
    }
    long npre = 0, npost = 0;
    if (c->kind == CS_COLL_CUSTOM) {
        for (int i = 0; i < c->npre; i++)
            sb[c->pre[2 * i] + 1]++;
        for (int i = 0; i < c->npost; i++)
            tb[c->post[2 * i] + 1]++;
        npre = c->npre;
        npost = c->npost;
    } else {
        for (long g = 0; g < G; g++) {
            sb[g + 1] = 1;
            tb[g + 1] = 1;
        }
        npre = npost = G;
    }
    for (long g = 0; g < G; g++) {
        sb[g + 1] += sb[g];
        tb[g + 1] += tb[g];
    }
    sv = malloc((size_t)(npre ? npre : 1) * sizeof *sv);
    tv = malloc((size_t)(npost ? npost : 1) * sizeof *tv);
    if (!sv || !tv) {
        rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory for collective conditions");
        goto out;
    }
    if (c->kind == CS_COLL_CUSTOM) {
        long *fill = calloc((size_t)G, sizeof *fill);
        if (!fill) {
            rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory for collective conditions");
            goto out;
        }
        for (int i = 0; i < c->npre; i++) {
            int g = c->pre[2 * i];
            sv[sb[g] + fill[g]++] = c->pre[2 * i + 1];
        }
        memset(fill, 0, (size_t)G * sizeof *fill);
        for (int i = 0; i < c->npost; i++) {
            int g = c->post[2 * i];
            tv[tb[g] + fill[g]++] = c->post[2 * i + 1];
        }
        free(fill);
    } else {
        for (long g = 0; g < G; g++) {
            int src, dst;
            switch (c->kind) {
            case CS_COLL_GATHER: src = (int)(g % P); dst = c->root; break;
            case CS_COLL_SCATTER: src = c->root; dst = (int)(g % P); break;
            case CS_COLL_ALLTOALL: src = (int)(g % P); dst = (int)((g / P) % P); break;
            default:
                rc = cs_error_set(err, CS_EUNSUPPORTED, "collective.kind",
                                  "TACOS matching cannot run %s directly", collective_kind_name(c->kind));
                goto out;
            }
            sv[sb[g]] = src;
            tv[tb[g]] = dst;
        }
    }
    (void)C;
    for (long g = 0; g < G; g++) {
        int ns = (int)(sb[g + 1] - sb[g]);
        for (int i = 0; i < ns; i++) {
            int s = sv[sb[g] + i];
            rc = tacos_log_append(e, s, (uint32_t)g);
            if (rc) {
                rc = cs_error_set(err, rc, NULL, "out of memory for arrival logs");
                goto out;
            }
        }
        /* scatter: one source for everything, so one BFS from it */
        if (c->kind == CS_COLL_SCATTER) {
            int src = sv[sb[g]];
            if (!dist_cache[src]) {
                dist_cache[src] = malloc((size_t)P * sizeof **dist_cache);
                if (!dist_cache[src]) {
                    rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory for distances");
                    goto out;
                }
                bfs_from(t, src, dist_cache[src], queue);
            }
            for (long k = tb[g]; k < tb[g + 1]; k++) {
                if (tv[k] == src)
                    continue;
                rc = mark_path_back(e, g, src, tv[k], dist_cache[src]);
                if (rc) {
                    rc = cs_error_set(err, rc, "collective", "chunk %ld cannot reach rank %d", g,
                                      tv[k]);
                    goto out;
                }
            }
            continue;
        }
        for (long k = tb[g]; k < tb[g + 1]; k++) {
            int target = tv[k];
            if (!dist_cache[target]) {
                dist_cache[target] = malloc((size_t)P * sizeof **dist_cache);
                if (!dist_cache[target]) {
                    rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory for distances");
                    goto out;
                }
                bfs_to(t, target, dist_cache[target], queue);
            }
            rc = mark_path(e, g, sv + sb[g], ns, target, dist_cache[target]);
            if (rc == CS_EUNSAT) {
                rc = cs_error_set(err, CS_EUNSAT, "collective",
                                  "chunk %ld cannot reach rank %d: no path from its sources", g, target);
                goto out;
            } else if (rc) {
                rc = cs_error_set(err, rc, NULL, "internal error marking a relay path");
                goto out;
            }
        }
    }
out:
    if (dist_cache)
        for (int r = 0; r < P; r++)
            free(dist_cache[r]);
    free(dist_cache);
    free(sb);
    free(tb);
    free(sv);
    free(tv);
    free(dist);
    free(queue);
    return rc;
}

