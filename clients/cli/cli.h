/*
 * cli.h - what the collsynth command-line tool's files share: the command
 * signature, the exit codes, and a few small helpers.
 *
 * A command is `int cmd(int argc, char **argv, const cli_globals *g)` where
 * argv[0] is the command's own name and the return value is the process exit
 * code.  To add one: write the function in its own clients/cli/cli_*.c file,
 * declare it below, and add one line to the table in main.c.
 *
 * Output conventions: results go to stdout (JSON where a document is the
 * result), diagnostics to stderr prefixed with "collsynth CMD: ".
 */
#ifndef CS_CLI_H
#define CS_CLI_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "collective.h"
#include "cs_common.h"
#include "result_codec.h"
#include "topology.h"

/* Exit codes (docs/cli.md). */
enum {
    CLI_EXIT_OK = 0,       /* success; for verify: the algorithm is valid */
    CLI_EXIT_NEGATIVE = 1, /* a negative answer: invalid algorithm, no algorithm exists,
                              unsupported combination, time limit reached */
    CLI_EXIT_USAGE = 2,    /* bad command line or unusable input (file, JSON, topology) */
    CLI_EXIT_INTERNAL = 3  /* out of memory, internal error, server unreachable */
};

typedef struct cli_globals {
    const char *prog;   /* argv[0] of the process, for messages */
    const char *server; /* --server URL (or $COLLSYNTH_SERVER), NULL when not given */
} cli_globals;

typedef int (*cli_fn)(int argc, char **argv, const cli_globals *g);

/* ---- commands ------------------------------------------------------------------ */

int cli_cmd_topo(int argc, char **argv, const cli_globals *g);      /* cli_offline.c */
int cli_cmd_verify(int argc, char **argv, const cli_globals *g);    /* cli_offline.c */
int cli_cmd_simulate(int argc, char **argv, const cli_globals *g);  /* cli_offline.c */
int cli_cmd_baseline(int argc, char **argv, const cli_globals *g);  /* cli_offline.c */
int cli_cmd_baselines(int argc, char **argv, const cli_globals *g); /* cli_offline.c */
int cli_cmd_solve(int argc, char **argv, const cli_globals *g);     /* cli_solve.c */
int cli_cmd_submit(int argc, char **argv, const cli_globals *g);     /* cli_remote.c */
int cli_cmd_status(int argc, char **argv, const cli_globals *g);     /* cli_remote.c */
int cli_cmd_wait(int argc, char **argv, const cli_globals *g);       /* cli_remote.c */
int cli_cmd_get(int argc, char **argv, const cli_globals *g);        /* cli_remote.c */
int cli_cmd_cancel(int argc, char **argv, const cli_globals *g);     /* cli_remote.c */
int cli_cmd_topologies(int argc, char **argv, const cli_globals *g); /* cli_remote.c */
int cli_cmd_codegen(int argc, char **argv, const cli_globals *g);    /* cli_codegen.c */

/* ---- helpers (cli_offline.c) --------------------------------------------------- */

/* Prints "collsynth CMD: message" and "Try 'collsynth CMD --help'." to
 * stderr; returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints "collsynth CMD: what: message [field]" for a library error and
 * returns the exit code for its status (cli_exit_code). */
int cli_report_error(const char *cmd, const char *what, int status, const cs_error *err);
/* CS_OK -> 0; EUNSAT, EVERIFY, EUNSUPPORTED, ETIMEOUT, ECANCELLED -> 1;
 * EINVAL, EIO, ELIMIT -> 2; ENOMEM, EINTERNAL -> 3. */
int cli_exit_code(int status);
bool cli_is_help(const char *arg);
/* Matches option `name` at argv[*i] in the forms "--name VALUE" and
 * "--name=VALUE".  Returns 1 and sets *value (advancing *i past a separate
 * value), 0 when argv[*i] is another argument, -1 when the value is missing
 * (after printing a usage error for cmd). */
int cli_option(const char *cmd, int argc, char **argv, int *i, const char *name,
               const char **value);
/* Integers and byte sizes ("64", "1.5M", "4KiB", "2GiB"; K/M/G decimal,
 * KiB/MiB/GiB binary, optional trailing B); false when malformed. */
bool cli_parse_int(const char *s, int *out);
bool cli_parse_size(const char *s, double *bytes);
/* topology_load with the CLI's messages; returns an exit code. */
int cli_load_topology(const char *cmd, const char *spec, cs_topology **out);
/* The topology a document carries when none was given on the command line:
 * a Result's own "topology" (the builtin name or the Topology JSON `solve -o`
 * and the service write), else the algorithm's "topology" name when it is a
 * builtin.  A Topology JSON taken from a Result whose name is not a builtin
 * is named on stderr ("note: topology 'quad' (4 ranks): the result's own"),
 * so the user sees what the check ran on.  Returns an exit code (a Result whose topology is not usable
 * is an input error); *out stays NULL when the document carries none that
 * can be used (*why then says so, for the caller's message). */
int cli_document_topology(const char *cmd, const cs_result *r, const cs_algorithm *a,
                          cs_topology **out, char *why, size_t why_len);
/* A collective from a kind name, "KIND:ROOT" (broadcast:3), or a JSON document
 * (or a path to one); root < -1 means "not given".  Returns an exit code. */
int cli_load_collective(const char *cmd, const char *spec, int root, cs_collective *out);
/* Writes doc (indented, trailing newline) to path, or stdout when path is
 * NULL or "-".  Returns an exit code. */
int cli_write_json(const char *cmd, const json_t *doc, const char *path);
/* A result document written by its streaming writer (result_codec.h): up to
 * CLI_PRETTY_MAX_SENDS sends indented like cli_write_json, larger ones
 * compact and a block at a time, so memory does not grow with the result. */
#define CLI_PRETTY_MAX_SENDS 100000
int cli_write_streamed(const char *cmd, cs_result_writer *w, long nsends, const char *path);

/* ---- output files (cli_output.c) ------------------------------------------------ */

/* An output: standard output for NULL or "-"; otherwise FILE written to a
 * temporary file beside it and renamed over it by cli_out_close, so FILE
 * appears (or replaces the old one) only complete: an error, a refused
 * download or a Ctrl-C part way leave FILE as it was and no temporary file.
 * Paths that are not regular files (a pipe, /dev/null) are written in place. */
typedef struct cli_out {
    const char *cmd;
    const char *path;  /* as given; NULL: standard output */
    char *tmp;         /* the temporary file, NULL when written in place */
    char *real;        /* the file a symbolic link FILE names, NULL otherwise */
    FILE *f;           /* write here */
    int error;         /* errno of a failed write the caller noticed, 0 */
    int guard;         /* cli_remove_on_signal's slot for tmp, -1 none */
} cli_out;
/* Returns an exit code (the failure printed). */
int cli_out_open(cli_out *o, const char *cmd, const char *path);
/* With ok, flushes and puts FILE in place; without, discards the temporary
 * file (the caller printed why).  A write error (o->error set by the
 * caller, or found flushing) is printed here either way: CLI_EXIT_USAGE.
 * Returns CLI_EXIT_OK or the exit code of the failure it printed. */
int cli_out_close(cli_out *o, bool ok);
/* A temporary file of the command's own that a fatal signal (SIGINT,
 * SIGTERM, SIGHUP, SIGXFSZ) must remove before the process dies of it.
 * Returns a slot for cli_keep_on_signal, -1 when none is free. */
int cli_remove_on_signal(const char *path);
/* The file is no longer the signal's to remove (renamed, or removed). */
void cli_keep_on_signal(int slot);
/* Before a long computation: whether FILE can be written (its directory
 * exists and is writable, it is not a directory), without creating it.
 * Returns an exit code (the failure printed). */
int cli_out_precheck(const char *cmd, const char *path);

/* ---- the time bound in reports (cli_bound.c) ----------------------------------- */

struct cs_time_bound;
/* "64MiB", "1GiB", "1.5MB", "4096B": a size as people write it. */
/* "12.3us", "4.56ms", "1.234s". */
void cli_fmt_us(char *buf, size_t n, double us);
/* collective_time_bound with the CLI's messages; returns an exit code. */
int cli_time_bound(const char *cmd, const cs_topology *t, const cs_collective *c,
                   struct cs_time_bound *out);
/* "time bound   3132.4us at 64MiB (forestcoll, exact): S = {0}: ...; path 1.4us"
 * on one line, then the cut on the next, indented by `indent`. */
void cli_print_time_bound(FILE *f, const char *indent, const struct cs_time_bound *b,
                          double bytes, int chunks);

#endif
