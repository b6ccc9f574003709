/*
 * cluster_testutil.h - the multi-node cluster of issue 11 as Topology JSON,
 * for tests that need switches the way real clusters have them: each node's
 * GPUs on one switch (NVSwitch), GPU r of every node on rail switch r (the
 * NICs), groups = nodes.
 *
 *     char *doc = cluster_topology_json(16, 8, 450.0, 50.0);   // malloc'd
 */
#ifndef CS_CLUSTER_TESTUTIL_H
#define CS_CLUSTER_TESTUTIL_H

#include <jansson.h>
#include <stddef.h>

/* nodes x gpus ranks; node switch ports node_gbps (alpha 0.5 us), rail switch
 * ports rail_gbps (alpha 2 us).  The caller frees the text. */
char *cluster_topology_json(int nodes, int gpus, double node_gbps, double rail_gbps);

/* A builtin topology as Topology JSON (new reference), or NULL with msg
 * filled (msg may be NULL when msglen is 0): the fetch callback of the Slurm
 * hook's cluster_build_topology(), answered here rather than by collsynthd. */
json_t *cluster_fetch_builtin_local(void *ctx, const char *name, char *msg, size_t msglen);

/* The Slurm hook's allocation of `nodes` DGX-1 nodes named gpuNNN from
 * gpu<first_node> on (NICs on local ranks 0, 2, 4, 6) joined by a fabric of
 * `fabric` kind ("switch" or "ring", alpha 3 us) with gbps per port, composed
 * by the hook's own cluster_build_topology() with this build's builtins, in a
 * cluster description named `cluster` (the topology is named after it).
 * Returns the request's "topology" value (new reference: a builtin name for
 * one node, else Topology JSON) and, when expanded is not NULL, the Topology
 * JSON object in *expanded; NULL with msg filled on failure. */
json_t *cluster_hook_dgx1(const char *cluster, int nodes, int first_node, const char *fabric,
                          double gbps, json_t **expanded, char *msg, size_t msglen);

#endif
