/*
 * cli_mcf.h - the report `collsynth solve ... --method mcf` prints (the
 * dispatcher runs the method, cli_solve.c parses the options): the
 * schedule's simulated time at the size its chunks were timed with, the LP
 * bound (bounds.mcf_lp), the cut bound and ratio_to_bound, and the solver's
 * figures (model, objective, bound, gap, solve times).
 */
#ifndef CS_CLI_MCF_H
#define CS_CLI_MCF_H

#include <stdio.h>

#include "algorithm.h"

void cli_mcf_report(FILE *report, const cs_result *r, const cs_topology *t,
                    const cs_collective *c, double bytes);

#endif
