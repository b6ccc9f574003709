/*
 * cli_tacos.h - the TACOS part of `collsynth solve`:
 *
 *     collsynth solve TOPO COLLECTIVE --method tacos [--chunks N] [--trials N]
 *         [--seed N] [--size BYTES] [--switch-degree D] [--threads N]
 *         [--root R] [--stats-only] [--output FILE] [--json]
 *
 * cli_solve_tacos() takes the arguments of `solve` (argv[0] is "solve", then
 * TOPO, COLLECTIVE and the options; "--method tacos" is accepted and
 * ignored), the same shape as cli_solve.c's methods.  It parses them with
 * the shared helpers of cli.h (so sizes, messages and exit codes match the
 * other commands), runs
 * tacos_synthesize and prints the simulated time, the ideal bound, their
 * ratio, the sends, the trials and the time taken to `report`.  It returns
 * the process exit status (cli.h): 0 done, 1 synthesis failed, 2 bad usage
 * or input, 3 internal error.
 */
#ifndef CS_CLI_TACOS_H
#define CS_CLI_TACOS_H

#include <stdio.h>

int cli_solve_tacos(int argc, char **argv, FILE *report);

#endif
