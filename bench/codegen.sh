#!/usr/bin/env bash
# Code generation benchmarks (docs/BENCHMARKS.md, code generation section):
# time to lower large TACOS schedules to MSCCL XML (old runtime) and CUDA, and
# to check the XML with the interpreter; TACOS synthesis time of the same
# schedule is printed for comparison.  CODEGEN_RUNS runs each (default 5).
set -euo pipefail
BUILD=${BUILD:-build}
bin="$BUILD/bench/codegen_bench"
[ -x "$bin" ] || make --no-print-directory "$bin"
runs=${CODEGEN_RUNS:-5}
echo "== 256-rank torus allgather (65,280 sends): XML + interpreter"
"$bin" torus2d:16x16 allgather 1 "$runs"
echo "== 64-rank torus allreduce, 2 chunks: XML + interpreter + CUDA"
"$bin" torus2d:8x8 allreduce 2 "$runs"
echo "== DGX-1 allreduce, 4 chunks"
"$bin" dgx1 allreduce 4 "$runs"
echo "== 1024-rank torus allgather (1M sends): channels spread past 256 steps per block"
"$bin" torus2d:32x32 allgather 1 1 || true
