/*
 * bench_stats.h - the order statistics the benches report (docs/BENCHMARKS.md
 * asks for medians of 3-5 runs): one comparison for qsort over doubles and
 * one median, instead of a copy in every bench.
 *
 *     qsort(ms, (size_t)runs, sizeof *ms, bench_cmp_double);   // min ms[0], max ms[runs-1]
 *     printf("median %.1f ms\n", bench_median(ms, runs));
 */
#ifndef CS_BENCH_STATS_H
#define CS_BENCH_STATS_H

/* Ascending order of two doubles, for qsort. */
int bench_cmp_double(const void *a, const void *b);
/* The median of v[0..n) (mean of the middle two for even n; 0 for n < 1);
 * v is left as it was. */
double bench_median(const double *v, int n);

#endif
