/*
 * cli_mcf.h - the mcf part of `collsynth solve`:
 *
 *     collsynth solve TOPO COLLECTIVE --method mcf [--chunks N] [--epochs K]
 *         [--size BYTES] [--epoch-split N] [--gap G] [--time-limit S]
 *         [--root R] [--output FILE] [--json]
 *
 * Same shape as cli_tacos.h: argv[0] is "solve", "--method mcf" is accepted
 * and ignored; prints the schedule's simulated time, the LP bound and the
 * cut bound, the solver figures; returns the process exit status (cli.h).
 */
#ifndef CS_CLI_MCF_H
#define CS_CLI_MCF_H

#include <stdio.h>

int cli_solve_mcf(int argc, char **argv, FILE *report);

#endif
