#!/usr/bin/env bash
# Rooted collectives at small sizes on the Slurm hook's DGX-1 ring clusters
# (docs/BENCHMARKS.md, "Rooted collectives at small sizes"): broadcast and
# reduce from root 0 on dgx1ring:N (N = 8 16 32 64 128, or
# ROOTED_SMALL_NODES), hierarchical against flat TACOS and every baseline
# in the same process (bench/hier_ring_bench.c: best simulated time and
# ratio_to_bound at 1 MiB and 1 GiB, hierarchical's median synthesis time
# over HIER_RUNS, default 3, every algorithm verified).
#   bench/rooted_small.sh [BEFORE_BIN]
# BEFORE_BIN: hier_ring_bench built from main before the change; when given
# each case runs it first, then this tree's, one after the other.
set -euo pipefail
BUILD=${BUILD:-build}
bin="$BUILD/bench/hier_ring_bench"
[ -x "$bin" ] || make --no-print-directory "$bin"
before=${1:-}
runs=${HIER_RUNS:-3}
for n in ${ROOTED_SMALL_NODES:-8 16 32 64 128}; do
    for coll in broadcast reduce; do
        if [ -n "$before" ]; then
            echo "# before"
            "$before" "dgx1ring:$n" "$coll" "$runs"
        fi
        echo "# after"
        "$bin" "dgx1ring:$n" "$coll" "$runs"
    done
done
