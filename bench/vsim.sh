#!/usr/bin/env bash
# Verification and simulation against the synthesis (docs/BENCHMARKS.md,
# "Issue 10: verification and simulation speed"): build/bench/vsim_bench on
# TACOS mesh2d:SxS allgather (1 trial, 1 thread) and the hierarchical
# dgxh100:128 allgather, each result verified and simulated VSIM_REPS times
# (median) as algorithm_verify + simulate_algorithm and as the one-walk
# algorithm_verify_simulate TACOS runs; simulated times printed to the bit.
#
#   bash bench/vsim.sh                 mesh2d:64x64 and dgxh100:128
#   VSIM_SIZES="32 64 100" bash bench/vsim.sh
#
# The end-to-end ratio (verify + simulate) / synthesis inside TACOS is
# bench/pipeline.sh's verify_plus_simulate_over_synthesis.
set -euo pipefail
BUILD=${BUILD:-build}
bin="$BUILD/bench/vsim_bench"
[ -x "$bin" ] || make --no-print-directory "$bin"
reps=${VSIM_REPS:-3}
for s in ${VSIM_SIZES:-64}; do
    echo "== mesh2d:${s}x${s} allgather, tacos (load $(cut -d' ' -f1 /proc/loadavg))"
    "$bin" "mesh2d:${s}x${s}" allgather tacos "$reps"
done
echo "== dgxh100:128 allgather, hierarchical (load $(cut -d' ' -f1 /proc/loadavg))"
"$bin" dgxh100:128 allgather hierarchical "$((reps * 3))"
