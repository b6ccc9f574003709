/*
 * synthesize.h - the method dispatcher the daemon and the CLI share: a
 * synthesis request (topology, collective, method, options) parsed and
 * validated once, reduced to a canonical form whose SHA-256 is the cache key,
 * and run by the right synthesizer.
 *
 *     cs_synth_limits lim;
 *     synth_limits_default(&lim);
 *     cs_synth_request *req;
 *     if (synth_request_parse(body, len, &lim, &req, &err) != CS_OK)
 *         ... err.field names the bad input ("options.k", "topology.links[3].src")
 *     puts(req->key);                       // 64 hex digits, stable everywhere
 *     cs_result *res;
 *     synth_run(req, &lim, NULL, &res, &err);  // res->method, res->reason say what ran
 *     json_t *doc = synth_result_to_json(req, res);   // CONTRACT.md section 4
 *
 * Request document (CONTRACT.md section 4):
 *   {"topology": "dgx1" | {Topology JSON}, "collective": {"kind": ...},
 *    "method": "auto" | "smt" | "tacos" | "hierarchical" | <baseline name>,
 *    "options": {...}}
 * Options, by method (unknown keys are rejected, naming them):
 *   every method: wait_s (daemon: how long POST waits before answering 202),
 *                 time_limit_s (per-job wall-clock limit).  Neither is part of
 *                 the key: they change when you get the answer, not the answer.
 *                 codegen ("msccl-xml", "cuda" or "none", the default): the
 *                 format the client will generate the result in.  Both code
 *                 formats are lowered through the same MSCCL plan, which has
 *                 GPU-to-GPU sends only, so a schedule that copies inside a
 *                 copy-capable switch cannot be generated; with codegen set,
 *                 auto and mcf synthesize for the request's *instance*: the
 *                 topology with its copy-capable switches as plain switches
 *                 (unicast through them, the hyper-edge form).  It is part of
 *                 the key only where it changes the answer (auto or mcf on a
 *                 topology with copy-capable switches), written as
 *                 "codegen": "msccl-xml" for both formats.
 *   smt:      k, max_chunks, max_steps, steps, rounds, chunks,
 *             instance_time_limit_s, total_time_limit_s   (cs_smt_options)
 *   tacos:    chunks, trials, seed, switch_degree, bytes   (cs_tacos_options)
 *   baseline: chunks                                       (cs_baseline_options)
 *   mcf:      chunks, max_chunks, min_chunks, epochs, max_epochs, bytes,
 *             epoch_split, gap, milp_max_columns, astar, astar_epochs, zero_buffer
 *             (cs_mcf_options)
 *   hierarchical: smt_time_limit_s (per node-type SMT search; default 2)
 *   auto:     "smt": {smt options}, "tacos": {tacos options}, "mcf": {mcf options}
 *
 * The auto policy (limits in cs_synth_limits, server configuration, not part
 * of the key): hierarchical for allgather, reducescatter, allreduce, broadcast,
 * reduce and alltoall on topologies of nodes joined by a switched fabric
 * (hier_applicable) that are too large for SMT (the cases that would
 * otherwise go to flat TACOS); SMT when ranks <= smt_max_ranks and the
 * estimated SMT variable count <= smt_max_variables, with at most smt_time_budget_s of search; TACOS
 * when the instance is larger, when SMT cannot handle the collective, or when
 * SMT found nothing within its budget.  Alltoall and custom demands go to mcf
 * first (TE-CCL's flow model pipelines and pays alpha per hop exactly, where
 * step-synchronous search loses) when ranks <= mcf_max_ranks and mcf's
 * estimated model has at most mcf_max_columns variables, with at most
 * mcf_time_budget_s; the policy above runs when mcf does not fit or finds
 * nothing.  A broadcast on copy-capable switches goes to mcf first too (it
 * copies in the switch); when the request needs code (options.codegen) the
 * switches are unicast and mcf runs on them with the best of chunkings
 * 1, 2, 4, 8, 16 within a short budget (the MILP rarely improves the
 * greedy's unicast schedule there).  result->reason says which ran and why.
 *
 * Information flows one way: request -> instance -> synthesizer.  The
 * request says what the output must be (options.codegen); parsing turns it
 * into the instance the synthesizers see (synth_request_instance); no
 * synthesizer knows about requests or formats.
 *
 * Canonical request: builtins expanded to their links; links, shared sets and
 * custom pairs sorted; every option of the methods that may run written out
 * with its default; compact JSON with sorted keys.  Two requests that mean the
 * same synthesis get the same key on every machine.
 *
 * Thread safety: a request is read-only after parsing; synth_run may be called
 * from many threads at once (each call owns its result).
 */
#ifndef CS_SYNTHESIZE_H
#define CS_SYNTHESIZE_H

#include <jansson.h>
#include "algorithm.h"
#include "baseline.h"
#include "bounds.h"
#include "mcf.h"
#include "hier.h"
#include "smt.h"
#include "tacos.h"

typedef struct cs_synth_limits {
    int max_ranks;             /* topologies with more ranks are rejected (default 4096) */
    size_t max_links;          /* 0 = no limit (default 1,000,000) */
    int max_chunks;            /* upper bound on any chunks option (default 64) */
    int max_trials;            /* upper bound on tacos trials (default 64) */
    int max_smt_steps;         /* upper bound on smt steps/max_steps/rounds (default 64) */
    double max_wait_s;         /* upper bound on options.wait_s (default 300) */
    double max_time_limit_s;   /* upper bound on options.time_limit_s (default 86400) */
    long max_sends;            /* refuse requests whose result would hold more sends
                                  (synth_estimate_sends); 0 = no limit (default) */
    double max_result_bytes;   /* refuse requests whose result cannot fit: estimated
                                  sends x SYNTH_BYTES_PER_SEND above this; 0 = no limit
                                  (default) */
    /* auto policy */
    int smt_max_ranks;         /* default 16 */
    long smt_max_variables;    /* default 50,000 */
    double smt_time_budget_s;  /* default 30; 0 = no budget */
    int mcf_max_ranks;         /* auto runs mcf for alltoall/custom up to this (default 16) */
    long mcf_max_columns;      /* ... when its estimated model is at most this (default 300,000) */
    double mcf_time_budget_s;  /* ... with at most this much time (default 60; 0 = none) */
    int threads;               /* solver threads per synthesis (0 = CPU count) */
    /* in-process callers (the CLI); neither changes what a result means */
    int smt_limit_ranks;       /* method smt refuses larger topologies (0 = smt.h's
                                  CS_SMT_DEFAULT_MAX_RANKS) */
    bool tacos_stats_only;     /* TACOS keeps its statistics, not the sends: a result
                                  with no algorithm (very large topologies) */
} cs_synth_limits;

void synth_limits_default(cs_synth_limits *lim);

typedef enum cs_synth_method {
    CS_SYNTH_AUTO = 0,
    CS_SYNTH_SMT,
    CS_SYNTH_TACOS,
    CS_SYNTH_BASELINE,
    CS_SYNTH_MCF,
    CS_SYNTH_HIER              /* "hierarchical" (hier.h) */
} cs_synth_method;

typedef struct cs_synth_request {
    cs_topology *topology;        /* owned, finalized */
    cs_collective collective;     /* owned, validated for topology->ranks */
    cs_synth_method method_kind;
    char method[32];              /* "auto", "smt", "tacos" or the baseline name */
    cs_smt_options smt;           /* normalized; progress/cancel unset */
    cs_tacos_options tacos;       /* normalized; progress/cancel unset */
    cs_baseline_options baseline;
    cs_mcf_options mcf;           /* normalized; progress/cancel unset */
    cs_hier_options hier;         /* normalized; progress/cancel unset */
    double wait_s;                /* options.wait_s (0 when absent); not in the key */
    double time_limit_s;          /* options.time_limit_s (0 = none); not in the key */
    /* options.codegen other than "none": the client will lower the result to
     * MSCCL XML or CUDA, so it must not copy in a switch. */
    bool codegen;
    /* owned: what the synthesizers get when it differs from `topology` (with
     * codegen, auto and mcf on copy-capable switches: the same topology with
     * every switch unicast, topology_with_switch_copy); NULL = topology.
     * Read it through synth_request_instance. */
    cs_topology *instance;
    json_t *canonical;            /* owned: the canonical request document */
    char key[65];                 /* hex SHA-256 of the canonical JSON text */
} cs_synth_request;

/* The method name nearest to a misspelt one ("tacso" -> "tacos"; the
 * methods and every baseline), or NULL when none is close (cs_nearest_name).
 * The returned string is static. */
const char *synth_method_suggest(const char *name);

/* Parses and validates a request document; every error names its field. */
int synth_request_from_json(const json_t *doc, const cs_synth_limits *lim,
                            cs_synth_request **out, cs_error *err);
/* The same from text (a JSON syntax error is CS_EINVAL with field ""). */
int synth_request_parse(const char *text, size_t len, const cs_synth_limits *lim,
                        cs_synth_request **out, cs_error *err);
void synth_request_free(cs_synth_request *r);
/* The topology the request's synthesizers run on: r->instance when set, else
 * r->topology.  Results are still verified on, and name, r->topology (a
 * unicast schedule is valid on a copy-capable switch as written). */
const cs_topology *synth_request_instance(const cs_synth_request *r);
/* The key of the same request with options.codegen "msccl-xml" (what a client
 * that wants code must ask for instead) from a canonical request text, in
 * key_out (65 bytes; lim as for parsing, NULL for the defaults).  CS_OK with key_out equal to the request's own key when
 * codegen changes nothing for it. */
int synth_request_key_with_codegen(const char *canonical_text, size_t len,
                                   const cs_synth_limits *lim, char key_out[65], cs_error *err);
/* Compact, sorted-keys canonical JSON (what the key hashes); caller frees. */
char *synth_request_canonical_text(const cs_synth_request *r);
/* Turns r, as parsed from a client's document, into what
 * synth_request_parse of its own canonical text gives (with the same limits),
 * in place, so collsynthd's worker can run the request its HTTP thread parsed
 * instead of parsing the stored canonical request again (server/jobs.h,
 * jobs_hand_over).  The two parses differ only where the canonical form
 * leaves out or reorders: each group's ranks are sorted, wait_s and
 * time_limit_s are 0, codegen stays only where it made an instance, and a
 * builtin's remembered diameter is forgotten.  False, r unchanged, where
 * this cannot make them equal (more than one shared set given by the
 * document: their order; custom collectives: their pre/post lists; a unicast
 * instance: its own groups): the caller parses the canonical text then.
 * The key and canonical document stay as they are (they were already those
 * of the canonical request). */
bool synth_request_make_canonical(cs_synth_request *r);

/* topology_builtin() for untrusted names: refuses, before building anything,
 * names whose rank count (or, for fully connected families, link count) would
 * exceed lim->max_ranks (lim->max_links).  Errors name field "topology". */
int synth_builtin_checked(const char *name, const cs_synth_limits *lim, cs_topology **out,
                          cs_error *err);

/* Rough count of Boolean/integer variables of the SCCL encoding for the largest
 * instance the search tries: G(max_chunks) * (ranks + links). */
long synth_smt_estimate_variables(const cs_topology *t, const cs_collective *c,
                                  int max_chunks);

/* Estimate of the sends in one algorithm of the result: every global chunk
 * of the (dual) collective reaching every other rank once (allreduce counts
 * both halves); for alltoall, gather and scatter, where each chunk goes to
 * one rank, chunks times the mean shortest-path hops (sampled).  Used to
 * refuse results that cannot fit in memory. */
long synth_estimate_sends(const cs_topology *t, const cs_collective *c, int chunks);

/* Memory a result takes per send on its way through synthesis,
 * verification, simulation and storing (a conservative figure measured on
 * TACOS; the limit is what it multiplies). */
#define SYNTH_BYTES_PER_SEND 128

/* CS_ELIMIT, naming the sizes, when `sends` sends cannot fit lim's
 * max_result_bytes (or exceed its max_sends). */
int synth_check_result_size(long sends, const cs_synth_limits *lim, const char *field,
                            cs_error *err);

/* Nothing to move: one rank, or a custom collective whose postcondition is
 * already in its precondition.  synth_run answers such a request at once, for
 * every method, with a complete frontier of one empty algorithm (0 steps,
 * 0 rounds, optimality "both") and a reason that says it is trivial. */
bool synth_request_trivial(const cs_synth_request *r);

typedef struct cs_synth_hooks {
    cs_progress_fn progress;      /* may be NULL */
    void *progress_ctx;
    cs_cancel *cancel;            /* may be NULL */
} cs_synth_hooks;

/* Runs the request's method (the auto policy from lim; lim may be NULL for the
 * defaults).  On success *out has method and reason set. */
int synth_run(const cs_synth_request *r, const cs_synth_limits *lim,
              const cs_synth_hooks *hooks, cs_result **out, cs_error *err);

/* result_to_json plus key, topology (name), collective and reason, and the
 * time bound with each algorithm's ratio_to_bound (synth_annotate_time_bound
 * at synth_bound_bytes(r)): it simulates every frontier algorithm once. */
json_t *synth_result_to_json(const cs_synth_request *r, const cs_result *res);
/* The same document with every algorithm's "sends": [] (its members computed
 * from the whole result, sends included): what result_codec_encode stores as
 * the result's header. */
json_t *synth_result_to_json_frame(const cs_synth_request *r, const cs_result *res);

/* ---- the time bound in results (synthesize_bound.c) -------------------------- */

/* The size at which results report ratio_to_bound when nothing else says:
 * the per-rank share L, as TACOS' default `bytes`. */
#define CS_BOUND_DEFAULT_BYTES (64.0 * 1024 * 1024)

/* The size of a request's ratio_to_bound: its tacos `bytes` option (in the
 * canonical request of the methods that take it; else the default,
 * CS_BOUND_DEFAULT_BYTES), whatever method runs. */
double synth_bound_bytes(const cs_synth_request *r);

typedef struct cs_bound_ratio {
    double bound_us;       /* time_bound_us at the size */
    double simulated_us;   /* simulate_algorithm at the size */
    double ratio;          /* bound_us / simulated_us: <= 1 */
    double scheduled_us;   /* timed schedules simulated at the chunk size they were timed
                              with: their own completion time (simulate.h); else 0 */
} cs_bound_ratio;

/* Simulates a on t at `bytes` (the per-rank share) and compares with tb. */
int synth_ratio_to_bound(const cs_topology *t, const cs_time_bound *tb, const cs_algorithm *a,
                         double bytes, cs_bound_ratio *out, cs_error *err);

/* Adds to a result document (result_to_json's form) bounds.time and, to
 * frontier[i] (res->algs[i]), ratio_to_bound, bound_bytes, bound_us and
 * simulated_us at `bytes`.  An algorithm the simulator refuses keeps none. */
int synth_annotate_time_bound(json_t *doc, const cs_topology *t, const cs_collective *c,
                              const cs_result *res, double bytes, cs_error *err);

/* mcf results: copies the LP bound the method computed (stats.mcf_lp:
 * epochs, epoch_us, time_us, objective) to bounds.mcf_lp, next to the cut
 * bound.  A no-op for other results. */
void synth_annotate_mcf_bound(json_t *doc, const cs_result *res);

/* SHA-256 of data as 64 lowercase hex digits and a NUL. */
void synth_sha256_hex(const void *data, size_t len, char out[65]);

#endif
