/*
 * bounds_internal.h - private interface of the bounds code (bounds.c, the
 * round bounds of collective.h; bounds_time.c, the time bound of bounds.h):
 * the max-flow both of them run their cuts on.
 *
 * A flow_net is a directed graph with int64 capacities in adjacency lists;
 * edge e and e ^ 1 are a pair (forward, residual).  `base` holds the
 * capacities as built and `cap` the residual ones: callers set cap from base
 * (scaled as they need) before every flow_net_maxflow, which then leaves the
 * residual graph behind, so flow_net_sink_side tells the side of every node
 * in a minimum cut.  Exact integer arithmetic: no rounding ever decides a cut.
 */
#ifndef CS_BOUNDS_INTERNAL_H
#define CS_BOUNDS_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

/* "Infinite" capacity: large, yet sums of a few of them cannot overflow. */
#define FLOW_INF (INT64_MAX / 4)

typedef struct flow_net {
    int n, m, cap_m;
    int *head, *next, *to;   /* adjacency lists; edge e and e^1 are a pair */
    int64_t *cap, *base;     /* residual capacity, capacity as built */
    int *level, *iter, *queue;
    int64_t *excess;         /* push-relabel */
    int *count;              /* nodes per height, 0..n */
    unsigned char *queued;
    int *active;             /* FIFO of active nodes (queue is the BFS's) */
} flow_net;

/* CS_OK or CS_ENOMEM; room for max_edges edges (each adds a residual twin). */
int flow_net_init(flow_net *g, int n, int max_edges);
void flow_net_free(flow_net *g);
/* Adds u->v with capacity cap (base); returns its index (the twin is index ^ 1). */
int flow_net_edge(flow_net *g, int u, int v, int64_t cap);
/* The value of a maximum s-t flow over the residual capacities in cap[]
 * (push-relabel, first phase: it settles the minimum cut, which is all the
 * bounds need).  Afterwards flow_net_sink_side() tells each node's side. */
int64_t flow_net_maxflow(flow_net *g, int s, int t);
/* After flow_net_maxflow: v can still reach t, i.e. is on the sink side of a
 * minimum cut. */
static inline bool flow_net_sink_side(const flow_net *g, int v)
{
    return g->level[v] < g->n;
}

#endif
