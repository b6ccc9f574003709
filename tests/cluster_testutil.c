/* cluster_testutil.c - see cluster_testutil.h. */
#include "cluster_testutil.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "../clients/slurm/cluster.h"
#include "topology.h"

char *cluster_topology_json(int nodes, int gpus, double node_gbps, double rail_gbps)
{
    json_t *sw = json_array(), *groups = json_array();
    for (int n = 0; n < nodes; n++) {
        json_t *ranks = json_array();
        for (int g = 0; g < gpus; g++)
            json_array_append_new(ranks, json_integer(n * gpus + g));
        char name[32];
        snprintf(name, sizeof name, "nvswitch%d", n);
        json_array_append_new(sw, json_pack("{s:s, s:O, s:f, s:f}", "name", name, "ranks", ranks,
                                            "gbps", node_gbps, "alpha_us", 0.5));
        json_array_append_new(groups, ranks);
    }
    for (int g = 0; g < gpus; g++) {
        json_t *ranks = json_array();
        for (int n = 0; n < nodes; n++)
            json_array_append_new(ranks, json_integer(n * gpus + g));
        char name[32];
        snprintf(name, sizeof name, "rail%d", g);
        json_array_append_new(sw, json_pack("{s:s, s:o, s:f, s:f}", "name", name, "ranks", ranks,
                                            "gbps", rail_gbps, "alpha_us", 2.0));
    }
    json_t *doc = json_pack("{s:s, s:i, s:[], s:o, s:o}", "name", "cluster", "ranks",
                            nodes * gpus, "links", "switches", sw, "groups", groups);
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    return text;
}

json_t *cluster_fetch_builtin_local(void *ctx, const char *name, char *msg, size_t msglen)
{
    (void)ctx;
    cs_topology *t = NULL;
    cs_error err;
    if (topology_builtin(name, &t, &err) != CS_OK) {
        snprintf(msg, msglen, "%s", err.message);
        return NULL;
    }
    json_t *doc = topology_to_json(t);
    topology_free(t);
    return doc;
}

json_t *cluster_hook_dgx1(const char *name, int nodes, int first_node, const char *fabric,
                          double gbps, json_t **expanded, char *msg, size_t msglen)
{
    json_t *cluster = json_pack(
        "{s:s, s:{s:{s:s, s:[iiii]}}, s:[{s:s, s:s}], s:{s:s, s:f, s:f}}", "name", name,
        "node_types", "dgx1", "topology", "dgx1", "nics", 0, 2, 4, 6, "nodes", "names", "*",
        "type", "dgx1", "fabric", "kind", fabric, "gbps", gbps, "alpha_us", 3.0);
    char **names = calloc((size_t)(nodes > 0 ? nodes : 1), sizeof *names);
    for (int k = 0; k < nodes; k++) {
        names[k] = malloc(16);
        snprintf(names[k], 16, "gpu%03d", first_node + k);
    }
    json_t *topo = NULL, *exp = NULL;
    if (cluster_build_topology(cluster, names, nodes, cluster_fetch_builtin_local, NULL, &topo,
                               &exp, msg, msglen) != 0) {
        json_decref(topo);
        json_decref(exp);
        topo = exp = NULL;
    }
    hostlist_free(names, nodes);
    json_decref(cluster);
    if (expanded)
        *expanded = exp;
    else
        json_decref(exp);
    return topo;
}
