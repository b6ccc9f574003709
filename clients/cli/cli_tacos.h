/*
 * cli_tacos.h - the TACOS part of `collsynth solve`:
 *
 *     collsynth solve TOPO COLLECTIVE --method tacos [--chunks N] [--trials N]
 *         [--seed N] [--size BYTES] [--switch-degree D] [--threads N]
 *         [--stats-only] [--output FILE] [--json]
 *
 * cli_solve_tacos() takes the arguments after "solve" (TOPO, COLLECTIVE and
 * the options; "--method tacos" is accepted and ignored), runs
 * tacos_synthesize and prints the simulated time, the ideal bound, their
 * ratio, the sends, the trials and the time taken.  It returns the process
 * exit status: 0 done, 1 synthesis failed, 2 bad usage.
 */
#ifndef CS_CLI_TACOS_H
#define CS_CLI_TACOS_H

#include <stdio.h>

int cli_solve_tacos(int argc, char **argv, FILE *out, FILE *errout);

#endif
