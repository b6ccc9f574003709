/*
 * bounds_flow.c - the max-flow the cut bounds run on (bounds_internal.h):
 * FIFO push-relabel with gap and global relabelling on exact int64
 * capacities.  Only the first phase runs (a maximum preflow): it settles the
 * minimum cut, and the bounds need the cut and its value, not a flow.
 */
#include "bounds_internal.h"

#include <stdlib.h>
#include <string.h>

#include "cs_common.h"

/* ---- the network -------------------------------------------------------------------- */


void flow_net_free(flow_net *g)
{
    free(g->head);
    free(g->next);
    free(g->to);
    free(g->cap);
    free(g->base);
    free(g->level);
    free(g->iter);
    free(g->queue);
    free(g->excess);
    free(g->count);
    free(g->queued);
    free(g->active);
    memset(g, 0, sizeof *g);
}

int flow_net_init(flow_net *g, int n, int max_edges)
{
    memset(g, 0, sizeof *g);
    g->n = n;
    g->cap_m = 2 * max_edges;
    g->head = malloc(sizeof(int) * (size_t)n);
    g->next = malloc(sizeof(int) * (size_t)g->cap_m);
    g->to = malloc(sizeof(int) * (size_t)g->cap_m);
    g->cap = malloc(sizeof(int64_t) * (size_t)g->cap_m);
    g->base = malloc(sizeof(int64_t) * (size_t)g->cap_m);
    g->level = malloc(sizeof(int) * (size_t)n);
    g->iter = malloc(sizeof(int) * (size_t)n);
    g->queue = malloc(sizeof(int) * (size_t)n);
    g->excess = malloc(sizeof(int64_t) * (size_t)n);
    g->count = malloc(sizeof(int) * ((size_t)n + 1));
    g->queued = malloc((size_t)n);
    g->active = malloc(sizeof(int) * (size_t)n);
    if (!g->active || !g->head || !g->next || !g->to || !g->cap || !g->base || !g->level || !g->iter ||
        !g->queue || !g->excess || !g->count || !g->queued) {
        flow_net_free(g);
        return CS_ENOMEM;
    }
    for (int i = 0; i < n; i++)
        g->head[i] = -1;
    return CS_OK;
}

/* Adds u->v; returns the edge index (its reverse is index ^ 1). */
int flow_net_edge(flow_net *g, int u, int v, int64_t cap)
{
    int e = g->m;
    g->to[e] = v, g->base[e] = cap, g->next[e] = g->head[u], g->head[u] = e;
    g->to[e + 1] = u, g->base[e + 1] = 0, g->next[e + 1] = g->head[v], g->head[v] = e + 1;
    g->m += 2;
    return e;
}

/* ---- push-relabel (FIFO, gap and global relabelling), first phase only ------------ */

/* Exact distances to t in the residual graph into level[] (n when t is out
 * of reach), and the per-height counts. */
static void pr_global_relabel(flow_net *g, int s, int t)
{
    int n = g->n;
    for (int i = 0; i < n; i++)
        g->level[i] = n;
    for (int h = 0; h <= n; h++)
        g->count[h] = 0;
    int head = 0, tail = 0;
    g->level[t] = 0;
    g->queue[tail++] = t;
    while (head < tail) {
        int w = g->queue[head++];
        for (int e = g->head[w]; e >= 0; e = g->next[e]) {
            int x = g->to[e];          /* residual x -> w is edge e ^ 1 */
            if (g->cap[e ^ 1] > 0 && g->level[x] == n && x != s) {
                g->level[x] = g->level[w] + 1;
                g->queue[tail++] = x;
            }
        }
    }
    for (int i = 0; i < n; i++) {
        g->count[g->level[i]]++;
        g->iter[i] = g->head[i];
    }
}

/* The value of a maximum preflow from s to t (= the max flow value).  Only the
 * first phase of push-relabel runs: it settles the minimum cut, which is all
 * the bounds need.  Afterwards level[v] < n iff v can still reach t, i.e. v is
 * on the sink side of a minimum cut. */
int64_t flow_net_maxflow(flow_net *g, int s, int t)
{
    int n = g->n;
    for (int i = 0; i < n; i++) {
        g->excess[i] = 0;
        g->queued[i] = 0;
    }
    pr_global_relabel(g, s, t);
    int qhead = 0, qlen = 0;
    /* the queue is circular over n slots: a node is in it at most once */
#define PR_ENQUEUE(v)                                          \
    do {                                                       \
        g->active[(qhead + qlen) % n] = (v);                    \
        qlen++;                                                \
        g->queued[(v)] = 1;                                    \
    } while (0)
    for (int e = g->head[s]; e >= 0; e = g->next[e]) {
        int64_t c = g->cap[e];
        int v = g->to[e];
        if (c <= 0)
            continue;
        g->cap[e] = 0;
        g->cap[e ^ 1] += c;
        g->excess[v] += c;
        if (v != t && !g->queued[v] && g->level[v] < n)
            PR_ENQUEUE(v);
    }
    long relabels = 0;
    while (qlen > 0) {
        int u = g->active[qhead];
        qhead = (qhead + 1) % n;
        qlen--;
        g->queued[u] = 0;
        while (g->excess[u] > 0 && g->level[u] < n) {
            int e = g->iter[u];
            if (e < 0) {
                /* relabel */
                int old = g->level[u], h = n;
                for (int f = g->head[u]; f >= 0; f = g->next[f])
                    if (g->cap[f] > 0 && g->level[g->to[f]] + 1 < h)
                        h = g->level[g->to[f]] + 1;
                /* levels run 0..n and count has n + 1 entries: old < n below
                 * limits the gap rule, it is not a bounds check */
                g->count[old]--;
                /* cppcheck-suppress arrayIndexThenCheck */
                if (g->count[old] == 0 && old < n) {
                    /* gap: nothing above old can reach t any more */
                    for (int v = 0; v < n; v++)
                        if (g->level[v] > old && g->level[v] < n) {
                            g->count[g->level[v]]--;
                            g->level[v] = n;
                            g->count[n]++;
                        }
                    h = n;
                }
                g->level[u] = h;
                g->count[h]++;
                g->iter[u] = g->head[u];
                if (++relabels % n == 0) {
                    pr_global_relabel(g, s, t);
                }
                continue;
            }
            int v = g->to[e];
            if (g->cap[e] > 0 && g->level[u] == g->level[v] + 1) {
                int64_t d = g->excess[u] < g->cap[e] ? g->excess[u] : g->cap[e];
                g->cap[e] -= d;
                g->cap[e ^ 1] += d;
                g->excess[u] -= d;
                g->excess[v] += d;
                if (v != t && v != s && !g->queued[v] && g->level[v] < n)
                    PR_ENQUEUE(v);
                if (g->cap[e] == 0)
                    g->iter[u] = g->next[e];
            } else {
                g->iter[u] = g->next[e];
            }
        }
    }
#undef PR_ENQUEUE
    pr_global_relabel(g, s, t);
    return g->excess[t];
}


