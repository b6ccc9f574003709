#!/usr/bin/env bash
# SMT benchmarks (docs/BENCHMARKS.md, SMT section): whole Pareto searches and
# single instances, median of SMT_RUNS runs (default 5), the share of time in
# Z3, and the (6,3,7) DGX-1 instance under each encoding variant.
#   SMT_ENCODINGS=0 skips the encoding comparison (it may take minutes).
set -euo pipefail
BUILD=${BUILD:-build}
bin="$BUILD/bench/smt_bench"
[ -x "$bin" ] || make --no-print-directory "$bin"
args=(--runs "${SMT_RUNS:-5}")
[ "${SMT_ENCODINGS:-1}" != 0 ] && args+=(--encodings)
echo "== smt (load: $(cut -d' ' -f1-3 /proc/loadavg))"
"$bin" "${args[@]}"
