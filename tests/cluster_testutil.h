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

#endif
