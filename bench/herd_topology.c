/*
 * herd_topology.c - prints the "topology" a Slurm launch hook sends for an
 * allocation (bench/herd.sh): the cluster description's nodes composed by
 * clients/slurm/cluster.c, exactly as the hook composes them, with builtin
 * node types expanded from this build's builtins.
 *
 *   herd_topology CLUSTER.json HOSTLIST     e.g. cluster.example.json 'gpu[001-128]'
 */
#include <stdio.h>

#include "../clients/slurm/cluster.c"
#include "topology.h"

static json_t *fetch_builtin(void *ctx, const char *name, char *msg, size_t msglen)
{
    (void)ctx;
    cs_topology *t = NULL;
    cs_error err;
    if (topology_builtin(name, &t, &err) != CS_OK) {
        snprintf(msg, msglen, "%s", err.message);
        return NULL;
    }
    json_t *j = topology_to_json(t);
    topology_free(t);
    return j;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: herd_topology CLUSTER.json HOSTLIST\n");
        return 2;
    }
    json_error_t jerr;
    json_t *cluster = json_load_file(argv[1], 0, &jerr);
    if (!cluster) {
        fprintf(stderr, "%s: line %d: %s\n", argv[1], jerr.line, jerr.text);
        return 1;
    }
    char msg[512];
    char **nodes;
    int n = hostlist_expand(argv[2], &nodes, msg, sizeof msg);
    if (n < 0) {
        fprintf(stderr, "%s\n", msg);
        return 1;
    }
    json_t *topo, *expanded;
    if (cluster_build_topology(cluster, nodes, n, fetch_builtin, NULL, &topo, &expanded, msg,
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
