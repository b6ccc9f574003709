/* bench_stats.c - see bench_stats.h. */
#include "bench_stats.h"

#include <stdlib.h>
#include <string.h>

int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(const double *v, int n)
{
    if (n < 1)
        return 0;
    /* sorted on a copy: callers print their samples in run order */
    double small[64], *c = n <= 64 ? small : malloc((size_t)n * sizeof *c);
    if (!c)
        return 0;
    memcpy(c, v, (size_t)n * sizeof *c);
    qsort(c, (size_t)n, sizeof *c, bench_cmp_double);
    double m = n % 2 ? c[n / 2] : (c[n / 2 - 1] + c[n / 2]) / 2;
    if (c != small)
        free(c);
    return m;
}
