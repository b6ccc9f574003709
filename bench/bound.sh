#!/usr/bin/env bash
# Time-bound benchmarks (docs/BENCHMARKS.md, "Issue 11: the cut-aware time bound"):
#   speed:   collective_time_bound on dgxh100:128, ndv2:128 (1024 ranks each) and
#            mesh2d:100x100, median milliseconds per collective
#   quality: ratio_to_bound of TACOS all-reduce on dgxh100:16, dragonfly:4x5,
#            switch2d:8x4, rfs3d:2x4x8 at 64 MiB and 1 GiB
set -euo pipefail
BUILD=${BUILD:-build}
bin="$BUILD/bench/bound_bench"
[ -x "$bin" ] || make --no-print-directory "$bin"
echo "== time bound speed (median of ${BOUND_RUNS:-9} runs)"
"$bin" speed "${BOUND_RUNS:-9}"
echo "== time bound quality: TACOS all-reduce (${BOUND_TRIALS:-4} trials)"
"$bin" quality "${BOUND_TRIALS:-4}"
