/*
 * herd_topology.c - prints the "topology" a Slurm launch hook sends for an
 * allocation (bench/herd.sh): the cluster description's nodes composed by
 * clients/slurm/cluster.c, exactly as the hook composes them, with builtin
 * node types expanded from this build's builtins.
 *
 *   herd_topology CLUSTER.json HOSTLIST     e.g. cluster.example.json 'gpu[001-128]'
 */
#include <stdio.h>

#include "../clients/slurm/cluster.h"
#include "../tests/cluster_testutil.h"
#include "topology.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: herd_topology CLUSTER.json HOSTLIST\n");
        return 2;
    }
    char msg[512];
    json_t *cluster = cluster_load_file(argv[1], msg, sizeof msg);
    if (!cluster) {
        fprintf(stderr, "%s\n", msg);
        return 1;
    }
    char **nodes;
    int n = hostlist_expand(argv[2], &nodes, msg, sizeof msg);
    if (n < 0) {
        fprintf(stderr, "%s\n", msg);
        return 1;
    }
    json_t *topo, *expanded;
    if (cluster_build_topology(cluster, nodes, n, cluster_fetch_builtin_local, NULL, &topo, &expanded, msg,
                               sizeof msg) != 0) {
        fprintf(stderr, "%s\n", msg);
        return 1;
    }
    char *s = json_dumps(topo, JSON_COMPACT | JSON_ENCODE_ANY);
    puts(s);
    free(s);
    json_decref(topo);
    json_decref(expanded);
    hostlist_free(nodes, n);
    json_decref(cluster);
    return 0;
}
