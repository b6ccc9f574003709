/*
 * cluster_e2e.h - issue 10's end-to-end check of a multi-node allocation
 * through a running collsynthd, as a client sees it: POST /v1/synthesize
 * with method auto, wait for `done`, then fetch every rank's MSCCL slice
 * (?format=msccl-xml&rank=R, for each runtime), check each slice against
 * that runtime's limits (msccl_check.h, counted on the text), reassemble
 * the slices into one document and run it in the XML interpreter
 * (msccl_interp.h) against the collective's postcondition; every node's
 * slice (?ranks=A-B) must be the byte concatenation of its ranks' slices.
 *
 *     e2e_options o;
 *     e2e_options_default(&o);
 *     o.base_url = d.base_url;            // a daemon (tests/server_harness.h)
 *     e2e_report rep;
 *     e2e_run(&o, "\"dgxh100:16\"", "allgather", &rep);
 *     ck_assert_msg(e2e_ok(&rep), "%s", rep.error);
 *
 * Shared by tests/slow_cluster_e2e.c (16 nodes) and bench/cluster_bench.c
 * (128 nodes, which includes this file, as benches link no test helpers).
 * Nothing here reads the daemon's internals: every check is on what the
 * HTTP API returns.
 */
#ifndef CS_CLUSTER_E2E_H
#define CS_CLUSTER_E2E_H

#include <stdbool.h>
#include <stdio.h>

#define E2E_MAX_ALGS 8
#define E2E_MSG 1024

typedef struct e2e_options {
    const char *base_url;     /* http://127.0.0.1:PORT */
    double done_timeout_s;    /* give up waiting for done after this (default 600) */
    int rank_stride;          /* fetch ranks 0, stride, 2*stride, ... (default 1: every
                                 rank; the interpreter runs only when every rank is there) */
    int max_algs;             /* frontier algorithms to check, from 0 (default 1; 0: all) */
    bool executor;            /* also the msccl-executor runtime (default true) */
    int node_ranks;           /* ranks per node for the ?ranks=A-B check (default 8) */
    int warm_samples;         /* repeat fetches of cached slices timed (default 32) */
    FILE *log;                /* progress lines (NULL: quiet) */
} e2e_options;

typedef struct e2e_runtime_report {
    const char *runtime;      /* "msccl" or "msccl-executor" */
    int fetched, refused;     /* slices answered 200 / not */
    long bytes;               /* all slices */
    double cold_ms_median, cold_ms_max;   /* first fetch of each slice (generated) */
    double warm_ms_median, warm_ms_max;   /* repeats (cached) */
    long worst_elements;      /* the most XML elements one rank parses */
    int worst_elements_rank;
    int worst_steps, worst_tbs, worst_cnt, nchannels;
    int limits_failed;        /* slices msccl_check_limits refused */
    int refused_limit;        /* of `refused`: 422 with code "limit" (a clean refusal) */
    int interp_rc;            /* CS_OK, or why it failed; -1: not run */
    double interp_s;
    long interp_steps;
    double node_ms, node_ms_max;   /* ?ranks=A-B fetches, every node: median, max */
    bool node_ok;             /* every node's: 200, within limits, = its ranks' slices */
    char first_problem[E2E_MSG];
} e2e_runtime_report;

typedef struct e2e_alg_report {
    int index, steps, chunks;
    double ratio_to_bound;
    e2e_runtime_report rt[2];
    int nrt;
} e2e_alg_report;

typedef struct e2e_report {
    char key[65];
    char method[32];
    char reason[E2E_MSG];
    long post_status;
    double post_ms;           /* the POST's answer */
    double done_s;            /* POST to `done` seen by the client (polling every 20 ms) */
    double server_s;          /* the job's updated - created */
    int ranks, nalgs;
    e2e_alg_report algs[E2E_MAX_ALGS];
    int nchecked;
    bool done;
    bool partial;             /* a rank stride: not every slice fetched, no interpreter run */
    char error[E2E_MSG];      /* the first thing that went wrong, "" if none */
} e2e_report;

void e2e_options_default(e2e_options *o);
/* topology: the request's "topology" value as JSON text (a quoted builtin
 * name or a Topology JSON object).  Returns 0 when the run completed (which
 * does not mean every check passed: see e2e_ok), -1 when it could not go on
 * (rep->error says why). */
int e2e_run(const e2e_options *o, const char *topology, const char *collective, e2e_report *rep);
/* Every check passed: done, every slice fetched and within limits, the
 * interpreter accepted the reassembled document, the node slice matched. */
bool e2e_ok(const e2e_report *rep);
/* One line per frontier algorithm and runtime (the BENCHMARKS table). */
void e2e_print(FILE *f, const char *label, const e2e_report *rep);

/* For Check tests (tests/cluster_e2e_check.c; benches do not link it):
 * runs e2e_run with the defaults (first frontier algorithm, both runtimes,
 * every rank) and asserts, naming the case: done; method hierarchical; for
 * each runtime every slice 200 within limits with its own <gpu>, the
 * reassembled document right in the interpreter, the node slice equal to
 * its ranks' slices.  A (label, collective, runtime) in the known-gaps
 * table (a codegen limit reported in /work/team/NOTES.md) may instead be
 * refused, but only cleanly: every refusal a 422 naming the limit, no
 * document served outside the limits, nothing the interpreter rejects. */
void cluster_e2e_assert(const char *base_url, const char *label, const char *topology,
                        const char *collective);

/* The Slurm hook's allocation topology (clients/slurm/cluster.c) for
 * `nodes` DGX-1 nodes named gpu001.., NICs on local ranks 0, 2, 4, 6, one
 * fabric switch at 12.5 GB/s (alpha 3 us): the JSON text of the request's
 * "topology" value, as the hook posts it (malloc'd), or NULL with msg. */
char *e2e_hook_dgx1_cluster(int nodes, char *msg, size_t msglen);

#endif
