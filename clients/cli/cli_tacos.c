/*
 * cli_tacos.c - the human summary of a TACOS result (cli_tacos.h).
 */
#include "cli_tacos.h"

#include <math.h>

#include "cli.h"
#include "synthesize.h"

void cli_tacos_report(FILE *report, const cs_result *r, const cs_topology *t,
                      const cs_collective *c, double bytes, uint64_t seed, bool stats_only)
{
    json_t *st = r->stats;
#define NUM(k) json_number_value(json_object_get(st, k))
    char size[32];
    cs_format_size(size, sizeof size, bytes);
    fprintf(report, "tacos %s on %s (%d ranks)%s\n", collective_kind_name(c->kind), t->name,
            t->ranks, stats_only ? ", statistics only" : "");
    /* The schedule simulated on the topology as given (TACOS times it on
     * its own lowering of the switches: its figure may differ there). */
    double sim_us = NUM("sim_time_us");
    cs_time_bound tb;
    cs_bound_ratio br;
    bool have_bound = collective_time_bound(t, c, &tb, NULL) == CS_OK;
    if (have_bound && r->nalgs > 0 &&
        synth_ratio_to_bound(t, &tb, r->algs[0], bytes, &br, NULL) == CS_OK)
        sim_us = br.simulated_us;
    fprintf(report, "  simulated time  %.3f us at %s\n", sim_us, size);
    if (t->nswitches > 0 && fabs(sim_us - NUM("sim_time_us")) > 1e-6 * sim_us)
        fprintf(report, "  tacos timing    %.3f us (switches unwound, degree %.0f)\n",
                NUM("sim_time_us"), NUM("switch_degree"));
    if (have_bound) {
        double bound_us = time_bound_us(&tb, bytes, (int)NUM("chunks"));
        cli_print_time_bound(report, "  ", &tb, bytes, (int)NUM("chunks"));
        fprintf(report, "  ratio_to_bound  %.4f (time bound / simulated time)\n",
                sim_us > 0 ? bound_us / sim_us : 1.0);
    }
    fprintf(report, "  tacos ideal     %.3f us (the TACOS paper's figure: per-rank bandwidth "
                    "and diameter x largest alpha; not a lower bound)\n",
            NUM("ideal_us"));
    fprintf(report, "  sends           %.0f over %.0f spans\n", NUM("sends"), NUM("spans"));
    fprintf(report, "  trials          %.0f (seed %llu)\n", NUM("trials"),
            (unsigned long long)seed);
    if (json_object_get(st, "switch_degree"))
        fprintf(report, "  switch degree   %.0f\n", NUM("switch_degree"));
    fprintf(report, "  time taken      %.3f s, peak memory %.1f MB\n", NUM("seconds"),
            NUM("peak_rss_kb") / 1024.0);
#undef NUM
}
