#!/usr/bin/env bash
# The rooted collectives' additive time bound (docs/BENCHMARKS.md, "Rooted
# bound: latency plus cut"):
#   bench/bound_rooted.sh ring     dgx1ring:N (N = 8 16 32 64 128, or
#                                  BOUND_RING_NODES), broadcast and reduce from
#                                  root 0: the bound without and with the
#                                  lines at 1 MiB and 1 GiB, hierarchical's
#                                  best simulated time, both ratios
#   bench/bound_rooted.sh speed [BEFORE_BIN]
#                                  collective_time_bound's median ms (RUNS,
#                                  default 9) for the rooted kinds on 1024-rank
#                                  topologies and mesh2d:100x100, REPS (default
#                                  3) interleaved repetitions; with BEFORE_BIN
#                                  (the same bench built against the bounds
#                                  code before the lines) both, alternating
set -euo pipefail
BUILD=${BUILD:-build}
bin="$BUILD/bench/bound_rooted_bench"
[ -x "$bin" ] || make --no-print-directory "$bin"
case "${1:-ring}" in
ring)
    for n in ${BOUND_RING_NODES:-8 16 32 64 128}; do
        for coll in broadcast reduce; do
            "$bin" ring "$n" "$coll" "${RUNS:-9}"
        done
    done ;;
speed)
    before=${2:-}
    for rep in $(seq "${REPS:-3}"); do
        if [ -n "$before" ]; then
            echo "# rep $rep before"; "$before" speed "${RUNS:-9}"
        fi
        echo "# rep $rep after"; "$bin" speed "${RUNS:-9}"
    done ;;
*) echo "usage: $0 ring | speed [BEFORE_BIN]" >&2; exit 2 ;;
esac
