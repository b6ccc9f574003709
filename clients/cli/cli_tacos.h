/*
 * cli_tacos.h - the human summary of a TACOS result, for `collsynth solve`
 * (cli_solve.c runs every method through the dispatcher, synthesize.h, and
 * prints TACOS results with this; SMT and baseline results as a frontier
 * table).
 *
 * cli_tacos_report() prints the simulated time on the topology as given, the
 * cut-aware time bound and ratio_to_bound (bound / simulated time, <= 1, the
 * one convention everywhere), the TACOS paper's ideal under its own name (not
 * a lower bound), the sends, the trials and the time taken.  `bytes` is the
 * per-rank share the run was timed at (the tacos `bytes` option);
 * `stats_only` says the sends were not kept.
 */
#ifndef CS_CLI_TACOS_H
#define CS_CLI_TACOS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "algorithm.h"

void cli_tacos_report(FILE *report, const cs_result *r, const cs_topology *t,
                      const cs_collective *c, double bytes, uint64_t seed, bool stats_only);

#endif
