#!/usr/bin/env bash
# TACOS benchmarks (docs/BENCHMARKS.md, TACOS section):
#   scale:   2D mesh allgather 16x16..128x128, median synthesis seconds, growth exponent
#   quality: ideal/simulated on torus, mesh, hypercube, DGX-1 (vs the SMT optimum)
#   big:     all-reduce on a 200x200 mesh (40,000 ranks), time and peak memory;
#            long (minutes): set TACOS_BIG=0 to skip it
#   rarest:  with and without rarest-first trials, alternating, on large
#            allgathers (issue 11); long (about 20 minutes): TACOS_RAREST=0 skips it
set -euo pipefail
BUILD=${BUILD:-build}
bin="$BUILD/bench/tacos_bench"
[ -x "$bin" ] || make --no-print-directory "$bin"
echo "== tacos scale (median of ${TACOS_RUNS:-5} runs per size, 1 trial, 1 thread)"
"$bin" scale "${TACOS_RUNS:-5}"
echo "== tacos quality (8 trials)"
"$bin" quality 8
if [ "${TACOS_RAREST:-1}" != 0 ]; then
    echo "== tacos rarest-first at every size (medians of ${TACOS_RUNS:-3}, same run)"
    "$bin" rarest "${TACOS_RUNS:-3}"
fi
if [ "${TACOS_BIG:-1}" != 0 ]; then
    echo "== tacos big (200x200 mesh all-reduce, statistics only)"
    "$bin" big 200
fi
