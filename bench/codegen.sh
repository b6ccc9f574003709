#!/usr/bin/env bash
# Code generation benchmarks (docs/BENCHMARKS.md, code generation sections):
# time to lower large TACOS schedules to MSCCL XML (old runtime) and CUDA, and
# to check the XML with the interpreter; TACOS synthesis time of the same
# schedule is printed for comparison.  Then per-rank slices of a ~1M-send
# schedule: the full document streamed and in memory, and one-rank slices,
# CPU time and peak memory (each measurement in its own process).
# CODEGEN_RUNS runs each (default 5).
set -euo pipefail
BUILD=${BUILD:-build}
bin="$BUILD/bench/codegen_bench"
slices="$BUILD/bench/codegen_slices_bench"
[ -x "$bin" ] || make --no-print-directory "$bin"
[ -x "$slices" ] || make --no-print-directory "$slices"
runs=${CODEGEN_RUNS:-5}
echo "== 256-rank torus allgather (65,280 sends): XML + interpreter"
"$bin" torus2d:16x16 allgather 1 "$runs"
echo "== 64-rank torus allreduce, 2 chunks: XML + interpreter + CUDA"
"$bin" torus2d:8x8 allreduce 2 "$runs"
echo "== DGX-1 allreduce, 4 chunks"
"$bin" dgx1 allreduce 4 "$runs"
echo "== 1024-rank mesh allgather (1,047,552 sends): full document vs one-rank slices, msccl"
"$slices" mesh2d:32x32 allgather "$runs" msccl 8
echo "== the same for msccl-executor (64 steps per thread block: channels spread)"
"$slices" mesh2d:32x32 allgather "$runs" msccl-executor 8
