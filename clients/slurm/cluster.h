/*
 * cluster.h - the pure parts of the Slurm launch hook: reading a cluster
 * description, expanding Slurm host lists, building the Topology JSON of an
 * allocation, turning a Pareto frontier into message-size ranges, and
 * stamping those ranges into MSCCL XML.  No Slurm and no network here, so the
 * logic is testable on its own (tests/test_slurm.c) and the Makefile puts
 * cluster.c in the test helper library, which tests and benches compose
 * allocations with.
 *
 * Cluster description (JSON; docs/clients.md, example in
 * clients/slurm/cluster.example.json):
 *
 *   {
 *     "name": "lab",
 *     "node_types": {
 *       "dgx1": {"topology": "dgx1", "nics": [0, 2, 4, 6]},
 *       "quad": {"topology": {"name": "quad", "ranks": 4, "links": [...]}}
 *     },
 *     "nodes": [ {"names": "gpu[001-016]", "type": "dgx1"},
 *                {"names": "*", "type": "quad"} ],
 *     "fabric": {"kind": "switch", "gbps": 12.5, "alpha_us": 3.0}
 *   }
 *
 * Ranks of the allocation are numbered node by node in the step's node-list
 * order (a block distribution: node k's local GPU g is rank offset_k + g), so
 * each node can ask the daemon for the slice of its own ranks only.
 * Fabric kinds: "switch" (one switch joining the NIC ranks of every node),
 * "ring" (NIC rank i of node k to NIC rank i of node k+1, both ways, closing
 * the ring).  `nics` defaults to every local rank.  Each node becomes one
 * locality group.
 */
#ifndef CS_SLURM_CLUSTER_H
#define CS_SLURM_CLUSTER_H

#include <jansson.h>
#include <stddef.h>

/* The hook's plugstack.conf arguments, key=value (docs/clients.md). */
enum { CLUSTER_ARG_SERVER, CLUSTER_ARG_TOKEN_FILE, CLUSTER_ARG_CLUSTER, CLUSTER_ARG_COLLECTIVES,
       CLUSTER_ARG_TIMEOUT, CLUSTER_ARG_METHOD, CLUSTER_ARG_TMPDIR, CLUSTER_ARG_OPTIONS,
       CLUSTER_ARG_GPUS, CLUSTER_ARG_ROOT, CLUSTER_ARG_GPU_SMS, CLUSTER_ARG_COUNT };
/* Which argument `arg` sets (a CLUSTER_ARG_*; *value points past the '='), or
 * -1 with msg naming the problem: not key=value, or an unknown key, with the
 * nearest known one when it looks like a typo ("unknown plugstack argument
 * 'clustr' (did you mean cluster?)"). */
int cluster_plugstack_arg(const char *arg, const char **value, char *msg, size_t msglen);

/* Reads a cluster description file as the hook does: a leading UTF-8
 * byte-order mark (a Windows editor's) is dropped, as by every JSON input of
 * collsynth (cs_read_file).  Returns the document (new reference), or NULL
 * with msg naming the file and the problem (unreadable, the JSON's line and
 * column, not an object). */
json_t *cluster_load_file(const char *path, char *msg, size_t msglen);

/* Expands "gpu[01-03,7],login1" into a NUL-separated list of names.  Returns
 * the count (>= 0) or -1 on a malformed list (msg filled).  *out is malloc'd
 * as an array of malloc'd strings; free with hostlist_free. */
int hostlist_expand(const char *list, char ***out, char *msg, size_t msglen);
void hostlist_free(char **names, int n);

/* Fetches a builtin topology by name as Topology JSON (new reference), or NULL
 * with msg filled.  The hook passes a function that asks collsynthd. */
typedef json_t *(*cluster_fetch_builtin_fn)(void *ctx, const char *name, char *msg,
                                            size_t msglen);

/* Builds the allocation's topology for the given nodes.  On success *topology
 * is the request's "topology" value: a builtin name (a JSON string) when the
 * allocation is one node whose type names a builtin (so every such job shares
 * one cached result), else a Topology JSON object.  *expanded is always the
 * Topology JSON object (for the cost model).  Returns 0, or -1 with msg. */
int cluster_build_topology(const json_t *cluster, char **nodes, int nnodes,
                           cluster_fetch_builtin_fn fetch, void *fetch_ctx,
                           json_t **topology, json_t **expanded, char *msg, size_t msglen);

/* The ranks of node `nodeid` (its index in the step's node list) in the
 * allocation's topology: the block [*first, *last] of its locality group.
 * Returns 0, or -1 when the topology has no such group or it is not a
 * contiguous block. */
int cluster_node_ranks(const json_t *expanded, int nodeid, int *first, int *last);

/* The cost model's alpha (largest per-message latency, us) and beta (us per
 * byte on the slowest lane) of a Topology JSON object, switch ports included. */
void cluster_alpha_beta(const json_t *topology, double *alpha_us, double *beta_us_per_byte);

/* A message-size range [min_bytes, max_bytes) where frontier[index] has the
 * lowest alpha-beta cost; max_bytes == 0 means no upper limit. */
typedef struct size_range {
    int index;
    unsigned long long min_bytes, max_bytes;
} size_range;

/* Splits [0, inf) among the frontier's algorithms by the contract's cost
 * steps*alpha + (rounds/chunks)*L*beta.  Algorithms never best get no range.
 * Returns the number of ranges (<= frontier size) written to out, ascending. */
int frontier_size_ranges(const json_t *frontier, double alpha_us, double beta,
                         size_range *out, int max_out);

/* A byte count inside the range, for asking the server to pick that algorithm. */
unsigned long long size_range_probe(const size_range *r);

/* Where a long log message is cut into lines the reader sees whole (the
 * hook's warnings carry the daemon's refusals, which run to several hundred
 * characters; one line per piece keeps every log path's own line limit out
 * of the way): the length of the first piece of `text`, at most `width`
 * (>= 1) bytes: all of it when it fits, else up to the last space within
 * width, else width bytes (a long word or URL is cut there), never inside a
 * UTF-8 sequence.  The caller skips the spaces that follow the piece. */
size_t cluster_line_piece(const char *text, size_t width);

/* Returns a new string: xml with the first <algo ...> element's minBytes and
 * maxBytes set to the range (existing values replaced).  max_bytes == 0 (no
 * limit) is written as 2^40.  NULL when there is no <algo element. */
char *xml_set_byte_range(const char *xml, unsigned long long min_bytes,
                         unsigned long long max_bytes);

#define CS_SLURM_NO_LIMIT_BYTES (1ULL << 40)

#endif
