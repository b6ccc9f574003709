#!/usr/bin/env bash
# Code generation CPU time for step schedules (baselines), where exchanges in
# a step are ordered eagerly (docs/BENCHMARKS.md, "Code generation order for
# timed and hierarchical schedules"). CODEGEN_RUNS runs each (default 3).
set -euo pipefail
BUILD=${BUILD:-build}
bin="$BUILD/bench/codegen_steps_bench"
[ -x "$bin" ] || make --no-print-directory "$bin"
runs=${CODEGEN_RUNS:-3}
"$bin" hypercube:10 allgather recursive-doubling "$runs"
"$bin" ring:512 allreduce ring "$runs"
