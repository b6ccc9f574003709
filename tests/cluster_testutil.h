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

/* nodes x gpus ranks; node switch ports node_gbps (alpha 0.5 us), rail switch
 * ports rail_gbps (alpha 2 us).  The caller frees the text. */
char *cluster_topology_json(int nodes, int gpus, double node_gbps, double rail_gbps);

#endif
