/*
 * main.c - the collsynth command-line tool: global options, the command
 * table, dispatch and the global --help.
 *
 *     collsynth [--server URL] COMMAND [ARGS...]
 *
 * The table below is the only place that knows the commands.  ADDING A
 * COMMAND is one line in `commands[]` plus its declaration in cli.h (the
 * function lives in its own clients/cli/cli_*.c file).  Each command parses
 * its own arguments, prints its own --help, and returns the exit code
 * (cli.h: 0 ok, 1 negative result, 2 usage or input error, 3 internal).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct cli_command {
    const char *name;
    cli_fn fn;
    const char *help; /* one line for the global --help */
} cli_command;

static const cli_command commands[] = {
    {"topo", cli_cmd_topo, "show a topology (builtin name or JSON file): topo show|list"},
    {"verify", cli_cmd_verify, "check an algorithm on a topology: valid (0) or invalid (1)"},
    {"simulate", cli_cmd_simulate, "simulate an algorithm: completion time, link utilization"},
    {"baseline", cli_cmd_baseline, "generate a hand-designed algorithm (ring, bine-tree, ...)"},
    {"baselines", cli_cmd_baselines, "list the baselines and the collectives they implement"},
    {"solve", cli_cmd_solve, "synthesize the Pareto frontier offline (SMT): solve TOPO COLLECTIVE"},
    {"submit", cli_cmd_submit, "ask collsynthd for a synthesis (remote): submit TOPO COLLECTIVE"},
    {"status", cli_cmd_status, "a remote job's status and progress: status JOB"},
    {"wait", cli_cmd_wait, "wait for a remote job, with progress: wait JOB"},
    {"get", cli_cmd_get, "fetch a stored result as json, msccl-xml or cuda: get KEY"},
    {"cancel", cli_cmd_cancel, "cancel a remote job: cancel JOB"},
    {"topologies", cli_cmd_topologies, "list builtin topologies (the server's, or this build's)"},
    {"codegen", cli_cmd_codegen, "lower an algorithm to MSCCL XML or CUDA: codegen ALGO.json --format F"},
};

#define NCOMMANDS ((int)(sizeof commands / sizeof commands[0]))

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: collsynth [--server URL] COMMAND [ARGS...]\n"
            "\n"
            "Synthesizes and checks collective-communication algorithms for GPU networks.\n"
            "\n"
            "Commands:\n");
    for (int i = 0; i < NCOMMANDS; i++)
        fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].help);
    fprintf(f,
            "\n"
            "Global options:\n"
            "  --server URL  the collsynthd to talk to (remote commands; default\n"
            "                $COLLSYNTH_SERVER)\n"
            "  --token-file FILE, --timeout S\n"
            "                the remote commands' token and per-request timeout,\n"
            "                here or after the command\n"
            "  -h, --help    this help; 'collsynth COMMAND --help' for a command\n"
            "\n"
            "Topologies: a builtin name (ring:8, dgx1, torus2d:4x4, ...; see\n"
            "'collsynth topo list') or a Topology JSON file.\n"
            "\n"
            "Exit codes: 0 ok, 1 negative result (invalid algorithm, no algorithm\n"
            "exists), 2 usage or input error, 3 internal error.\n");
}

static const cli_command *find_command(const char *name)
{
    for (int i = 0; i < NCOMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

/* The remote commands' connection options, which people write before the
 * command like --server ("collsynth --server URL --token-file F submit
 * ..."): given there, they are handed to the command as its own options. */
static const char *const connection_options[] = {"--token-file", "--timeout"};

static bool is_remote_command(const char *name)
{
    static const char *const remote[] = {"submit", "status", "wait", "get", "cancel",
                                         "topologies"};
    for (size_t k = 0; k < sizeof remote / sizeof *remote; k++)
        if (strcmp(name, remote[k]) == 0)
            return true;
    return false;
}

static int run(int argc, char **argv)
{
    cli_globals g = {argv[0], getenv("COLLSYNTH_SERVER")};
    if (g.server && !*g.server)
        g.server = NULL;
    /* global connection options, as "--name" "value" pairs */
    const char *forward[2 * (sizeof connection_options / sizeof *connection_options)];
    int nforward = 0;
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *v = NULL;
        if (cli_is_help(argv[i])) {
            usage(stdout);
            return CLI_EXIT_OK;
        }
        int m = cli_option(NULL, argc, argv, &i, "--server", &v);
        if (m < 0)
            return CLI_EXIT_USAGE;
        if (m > 0) {
            g.server = v;
            continue;
        }
        bool taken = false;
        for (size_t k = 0; k < sizeof connection_options / sizeof *connection_options; k++) {
            m = cli_option(NULL, argc, argv, &i, connection_options[k], &v);
            if (m < 0)
                return CLI_EXIT_USAGE;
            if (m > 0 && nforward + 2 <= (int)(sizeof forward / sizeof *forward)) {
                forward[nforward++] = connection_options[k];
                forward[nforward++] = v;
                taken = true;
                break;
            }
        }
        if (taken)
            continue;
        fprintf(stderr, "collsynth: unknown option '%s'\n", argv[i]);
        fprintf(stderr, "Try 'collsynth --help'.\n");
        return CLI_EXIT_USAGE;
    }
    if (i >= argc) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    /* "collsynth help [COMMAND]" */
    if (strcmp(argv[i], "help") == 0) {
        if (i + 1 >= argc) {
            usage(stdout);
            return CLI_EXIT_OK;
        }
        const cli_command *c = find_command(argv[i + 1]);
        if (!c) {
            fprintf(stderr, "collsynth: unknown command '%s'\nTry 'collsynth --help'.\n",
                    argv[i + 1]);
            return CLI_EXIT_USAGE;
        }
        char *hargv[] = {argv[i + 1], "--help", NULL};
        return c->fn(2, hargv, &g);
    }
    const cli_command *c = find_command(argv[i]);
    if (!c) {
        const char *names[NCOMMANDS];
        for (int k = 0; k < NCOMMANDS; k++)
            names[k] = commands[k].name;
        const char *near = cs_nearest_name(argv[i], strlen(argv[i]), names, NCOMMANDS);
        if (near)
            fprintf(stderr, "collsynth: unknown command '%s': did you mean '%s'?\n", argv[i],
                    near);
        else
            fprintf(stderr, "collsynth: unknown command '%s'\n", argv[i]);
        fprintf(stderr, "Try 'collsynth --help'.\n");
        return CLI_EXIT_USAGE;
    }
    if (nforward == 0)
        return c->fn(argc - i, argv + i, &g);
    if (!is_remote_command(c->name)) {
        fprintf(stderr, "collsynth: %s applies to the remote commands (submit, status, wait, "
                        "get, cancel, topologies), not to '%s'\n", forward[0], c->name);
        fprintf(stderr, "Try 'collsynth --help'.\n");
        return CLI_EXIT_USAGE;
    }
    /* COMMAND, the forwarded options, then the command's own arguments */
    int n = argc - i;
    char **cargv = calloc((size_t)(n + nforward + 1), sizeof *cargv);
    if (!cargv) {
        fprintf(stderr, "collsynth: out of memory\n");
        return CLI_EXIT_INTERNAL;
    }
    int k = 0;
    cargv[k++] = argv[i];
    for (int f = 0; f < nforward; f++)
        cargv[k++] = (char *)forward[f];
    for (int a = i + 1; a < argc; a++)
        cargv[k++] = argv[a];
    int rc = c->fn(k, cargv, &g);
    free(cargv);
    return rc;
}

/* What a command printed on standard output (a summary, help, a listing)
 * is only out once stdout is flushed: a write that failed there (a full
 * disk under `> FILE`) was lost and the command exited 0.  Checked once, at
 * the end, with the errno of the failing flush (a failure nothing reported,
 * found by ferror alone, has no errno left to name).  A reader that went
 * away (EPIPE, `| head`) is not the command's failure. */
int main(int argc, char **argv)
{
    int rc = run(argc, argv);
    bool earlier = ferror(stdout);
    errno = 0;
    int e = fflush(stdout) != 0 ? (errno ? errno : EIO) : 0;
    if (rc == CLI_EXIT_OK && (e || earlier) && e != EPIPE) {
        fprintf(stderr, "collsynth: cannot write standard output: %s\n",
                e ? strerror(e) : "a write failed");
        rc = CLI_EXIT_USAGE;
    }
    return rc;
}
