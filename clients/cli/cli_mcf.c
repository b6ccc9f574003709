/*
 * cli_mcf.c - the mcf report of `collsynth solve` (see cli_mcf.h).
 */
#include "cli_mcf.h"

#include <math.h>

#include "cli.h"
#include "synthesize.h"

void cli_mcf_report(FILE *report, const cs_result *r, const cs_topology *t,
                    const cs_collective *c, double bytes)
{
    json_t *st = r->stats, *lp = json_object_get(st, "mcf_lp");
    const cs_algorithm *a = r->nalgs > 0 ? r->algs[0] : NULL;
#define NUM(o, k) json_number_value(json_object_get(o, k))
    char size[32];
    cs_format_size(size, sizeof size, bytes);
    fprintf(report, "mcf %s on %s (%d ranks), %d chunk%s, %s model\n",
            collective_kind_name(c->kind), t->name, t->ranks, a ? a->chunks : 0,
            a && a->chunks == 1 ? "" : "s", json_string_value(json_object_get(st, "model")));
    cs_time_bound tb;
    cs_bound_ratio br;
    bool have_bound = collective_time_bound(t, c, &tb, NULL) == CS_OK;
    bool have_ratio = have_bound && a && synth_ratio_to_bound(t, &tb, a, bytes, &br, NULL) == CS_OK;
    fprintf(report, "  simulated time  %.3f us at %s (schedule %.3f us: %.0f epochs of %.4g us)\n",
            have_ratio ? br.simulated_us : NAN, size, NUM(st, "schedule_us"),
            NUM(st, "epochs_used"), NUM(st, "epoch_us"));
    if (lp)
        fprintf(report, "  LP bound        %.3f us (no schedule fits %.0f epochs)%s\n",
                NUM(lp, "time_us"), NUM(lp, "epochs") - 1,
                json_is_true(json_object_get(lp, "exact"))
                    ? ""
                    : "; of the epoch model only: some sends do not fill whole epochs");
    json_t *as = json_object_get(st, "astar");
    if (as)
        fprintf(report, "  A* rounds       %.0f rounds of %.0f epochs (%.0f by CBC, %.0f LP-rounded, "
                        "%.0f greedy), at most %.0f columns, slowest round %.3f s; no LP bound\n",
                NUM(as, "rounds"), NUM(as, "epochs_per_round"), NUM(as, "milp_rounds"),
                NUM(as, "lp_rounds"), NUM(as, "greedy_rounds"), NUM(as, "max_columns"), NUM(as, "slowest_round_s"));
    if (have_bound)
        cli_print_time_bound(report, "  ", &tb, bytes, a ? a->chunks : 1);
    if (have_ratio)
        fprintf(report, "  ratio_to_bound  %.4f (time bound / simulated time)\n", br.ratio);
    fprintf(report, "  solver          %s, objective %.6g, bound %.6g, gap %.3g%%\n",
            json_string_value(json_object_get(st, "status")), NUM(st, "milp_objective"),
            NUM(st, "milp_bound"), 100 * NUM(st, "gap"));
    fprintf(report, "  time taken      %.3f s (%.0f LP solves %.3f s, %.0f MILP solves %.3f s)\n",
            r->synth_seconds, NUM(st, "lp_solves"), NUM(st, "lp_seconds"), NUM(st, "milp_solves"),
            NUM(st, "milp_seconds"));
    fprintf(report, "  sends           %ld\n", a ? a->nsends : 0L);
#undef NUM
}
