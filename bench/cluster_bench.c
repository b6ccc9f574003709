/*
 * cluster_bench.c - issue 10's first done-when bullet end to end
 * (docs/BENCHMARKS.md, "Issue 10: clusters end to end"): starts the real
 * build/collsynthd on 127.0.0.1 with an ephemeral port and a temp data dir,
 * and for each collective POSTs the topology with method auto, waits for
 * `done`, fetches every rank's MSCCL slice for both runtimes, checks each
 * against the runtime's limits, reassembles them and runs the XML
 * interpreter (tests/cluster_e2e.c does the checks; the slow test
 * tests/slow_cluster_e2e.c runs the same at 16 nodes).
 *
 *   cluster_bench [options] TOPO COLLECTIVE...
 *     TOPO          dgxh100:N (any builtin name) or dgx1cluster:N: the Slurm
 *                   hook's cluster of N DGX-1 nodes (NICs on local ranks 0, 2,
 *                   4, 6, one fabric switch at 12.5 GB/s) built by the hook's
 *                   own code, posted as the hook posts it
 *     --stride S    fetch every S-th rank only (default 1: every rank; the
 *                   interpreter and the node check need every rank)
 *     --algs K      frontier algorithms to check from entry 0 (default 1; 0: all)
 *     --no-executor only the msccl runtime
 *     --topology-out FILE  write the request's topology value and exit
 *
 * Prints one block per collective (e2e_print) and a final line per
 * collective, "RESULT TOPO COLL ok|FAILED ...", plus the daemon's peak RSS.
 * Exit status 0 when every check passed.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tests/cluster_e2e.h"
#include "../tests/server_harness.h"

static long daemon_peak_kb(const cs_daemon *d)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)d->pid);
    FILE *f = fopen(path, "r");
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6))
            kb = strtol(line + 6, NULL, 10);
    if (f)
        fclose(f);
    return kb;
}

int main(int argc, char **argv)
{
    e2e_options o;
    e2e_options_default(&o);
    o.log = stderr;
    const char *topo_out = NULL;
    int i = 1;
    for (; i < argc && !strncmp(argv[i], "--", 2); i++) {
        if (!strcmp(argv[i], "--stride") && i + 1 < argc)
            o.rank_stride = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--algs") && i + 1 < argc)
            o.max_algs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-executor"))
            o.executor = false;
        else if (!strcmp(argv[i], "--topology-out") && i + 1 < argc)
            topo_out = argv[++i];
        else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (i >= argc || (!topo_out && i + 1 >= argc)) {
        fprintf(stderr, "usage: %s [--stride S] [--algs K] [--no-executor] [--topology-out FILE] "
                        "TOPO COLLECTIVE...\n", argv[0]);
        return 2;
    }
    const char *spec = argv[i++];
    char *topo = NULL;
    int nodes = 0;
    if (sscanf(spec, "dgx1cluster:%d", &nodes) == 1) {
        char msg[256];
        topo = e2e_hook_dgx1_cluster(nodes, msg, sizeof msg);
        if (!topo) {
            fprintf(stderr, "cluster: %s\n", msg);
            return 1;
        }
    } else {
        json_t *s = json_string(spec);
        topo = json_dumps(s, JSON_ENCODE_ANY);
        json_decref(s);
    }
    if (topo_out) {
        FILE *f = fopen(topo_out, "w");
        if (!f || fputs(topo, f) < 0 || fclose(f) != 0) {
            perror(topo_out);
            return 1;
        }
        free(topo);
        return 0;
    }
    cs_daemon d;
    if (daemon_start(&d, NULL, NULL, NULL) != 0) {
        fprintf(stderr, "the daemon did not start\n");
        return 1;
    }
    o.base_url = d.base_url;
    fprintf(stderr, "daemon %s (pid %d), topology %s (%zu bytes of request JSON)\n", d.base_url,
            (int)d.pid, spec, strlen(topo));
    int failed = 0;
    char lines[8][1200];
    int nl = 0;
    for (; i < argc; i++) {
        e2e_report rep;
        e2e_run(&o, topo, argv[i], &rep);
        char label[200];
        snprintf(label, sizeof label, "%s %s", spec, argv[i]);
        e2e_print(stdout, label, &rep);
        fflush(stdout);
        bool ok = e2e_ok(&rep);
        failed += !ok;
        if (nl < 8) {
            const e2e_runtime_report *m = rep.nchecked ? &rep.algs[0].rt[0] : NULL;
            const e2e_runtime_report *x =
                rep.nchecked && rep.algs[0].nrt > 1 ? &rep.algs[0].rt[1] : NULL;
            snprintf(lines[nl++], sizeof lines[0],
                     "RESULT %s %s %s | done %.2f s | %s | slices msccl %d/%d exec %d/%d | "
                     "cold ms med/max %.1f/%.1f | worst %ld el, %d steps, %d tbs | interp %s/%s | "
                     "node %s/%s%s%.300s",
                     spec, argv[i], ok ? "ok" : "FAILED", rep.done_s, rep.method,
                     m ? m->fetched - m->limits_failed : 0, rep.ranks,
                     x ? x->fetched - x->limits_failed : 0, rep.ranks, m ? m->cold_ms_median : 0,
                     m ? m->cold_ms_max : 0, m ? m->worst_elements : 0, m ? m->worst_steps : 0,
                     m ? m->worst_tbs : 0,
                     m && m->interp_rc == 0 ? "ok" : "no", x && x->interp_rc == 0 ? "ok" : "no",
                     m && m->node_ok ? "ok" : "no", x && x->node_ok ? "ok" : "no",
                     rep.error[0] ? " | " : (m && m->first_problem[0]) ? " | " : (x && x->first_problem[0]) ? " | exec: " : "",
                     rep.error[0] ? rep.error : (m && m->first_problem[0]) ? m->first_problem : x ? x->first_problem : "");
        }
    }
    printf("daemon peak RSS %.0f MB\n", (double)daemon_peak_kb(&d) / 1024);
    for (int k = 0; k < nl; k++)
        printf("%s\n", lines[k]);
    daemon_stop(&d);
    free(topo);
    return failed ? 1 : 0;
}
