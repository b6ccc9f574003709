#!/usr/bin/env bash
# Baseline benchmarks (docs/BENCHMARKS.md, Baselines section):
#   speed:   median generation seconds at 1024 ranks (torus2d:32x32) and for
#            direct alltoall on a 16x16 mesh (routing + verification included)
#   quality: simulated allreduce time / TACOS ideal and cross-group bytes of
#            every baseline on dgx1, torus2d:8x8, dragonfly:4x4 at 1 MiB, 64 MiB
set -euo pipefail
BUILD=${BUILD:-build}
bin="$BUILD/bench/baseline_bench"
[ -x "$bin" ] || make --no-print-directory "$bin"
echo "== baseline speed (median of ${BASELINE_RUNS:-3} runs)"
"$bin" speed "${BASELINE_RUNS:-3}"
echo "== baseline quality (allreduce, simulator)"
"$bin" quality
