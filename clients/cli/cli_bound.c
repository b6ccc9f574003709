/*
 * cli_bound.c - how the CLI reports the time bound (bounds.h): the bound at
 * a size, the cut and path that give it, and the figures it is compared with
 * (`ratio_to_bound` = bound / simulated time, <= 1, everywhere).
 */
#include <math.h>
#include <stdio.h>

#include "bounds.h"
#include "cli.h"

void cli_fmt_us(char *buf, size_t n, double us)
{
    if (us < 1e3)
        snprintf(buf, n, "%.1fus", us);
    else if (us < 1e6)
        snprintf(buf, n, "%.2fms", us / 1e3);
    else
        snprintf(buf, n, "%.3fs", us / 1e6);
}

int cli_time_bound(const char *cmd, const cs_topology *t, const cs_collective *c,
                   cs_time_bound *out)
{
    cs_error err;
    cs_error_clear(&err);
    int rc = collective_time_bound(t, c, out, &err);
    return rc == CS_OK ? CLI_EXIT_OK : cli_report_error(cmd, "time bound", rc, &err);
}

void cli_print_time_bound(FILE *f, const char *indent, const cs_time_bound *b, double bytes,
                          int chunks)
{
    char size[32], us[32], path[32];
    cs_format_size(size, sizeof size, bytes);
    cli_fmt_us(us, sizeof us, time_bound_us(b, bytes, chunks));
    cli_fmt_us(path, sizeof path, b->path_latency_us);
    fprintf(f, "%stime bound  %s at %s (%s%s; path latency %s)\n", indent, us, size, b->kind,
            b->exact ? ", exact" : "", path);
    fprintf(f, "%s  cut: %s\n", indent, b->cut);
    /* a rooted collective's additive line (latency to the cut + the cut),
     * when it is what sets the bound at this size */
    double L = b->per_chunk ? bytes / (chunks > 0 ? chunks : 1) : bytes;
    double top = fmax(b->latency_us + b->bandwidth_us_per_byte * L, b->path_latency_us);
    int win = -1;
    for (int i = 0; i < b->nlines; i++) {
        double v = b->lines[i].latency_us + b->lines[i].bandwidth_us_per_byte * L;
        if (v > top) {
            top = v;
            win = i;
        }
    }
    if (win >= 0)
        fprintf(f, "%s  latency + cut: %s\n", indent, b->lines[win].cut);
}
