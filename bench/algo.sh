#!/usr/bin/env bash
# Verifier / simulator / algorithm-JSON benchmarks (docs/BENCHMARKS.md,
# "Algorithms, verifier and simulator" section):
#   ring allgather and ring reducescatter schedules on ring:N, verified and
#   simulated (median of ALGO_RUNS runs), plus the JSON round trip of 1M sends.
#   ALGO_RANKS (default "2048 4096"): ring sizes; 4096 gives 16.8M sends and
#   needs about 2 GB of memory.
set -euo pipefail
BUILD=${BUILD:-build}
bin="$BUILD/bench/algo_bench"
[ -x "$bin" ] || make --no-print-directory "$bin"
for p in ${ALGO_RANKS:-2048 4096}; do
    echo "== ring:$p, C=1 (median of ${ALGO_RUNS:-3} runs)"
    "$bin" "$p" 1 "${ALGO_RUNS:-3}"
done
