#!/usr/bin/env bash
# Hierarchical on the Slurm hook's ring clusters (N DGX-1 nodes, NICs
# 0/2/4/6, ring fabric 12.5 GB/s both ways) against flat TACOS and every
# baseline that supports the collective, on the same topology in the same
# run (docs/BENCHMARKS.md, "Hierarchical rings and verification").  Per
# case: hierarchical's median synthesis seconds over HIER_RUNS (default 3),
# each method's best simulated time and ratio_to_bound at 1 MiB and 1 GiB,
# every hierarchical algorithm verified.
#   bench/hier_ring.sh          broadcast and reduce (root 0)
#   bench/hier_ring.sh renum    allgather, reducescatter, allreduce on the
#                               cluster as built and renumbered
#                               (dgx1ringrenum:N: nodes out of ring order,
#                               GPUs rotated inside nodes)
# HIER_RING_NODES: the node counts (default "8 16 32 64 128").
set -euo pipefail
BUILD=${BUILD:-build}
bin="$BUILD/bench/hier_ring_bench"
[ -x "$bin" ] || make --no-print-directory "$bin"
runs=${HIER_RUNS:-3}
mode=${1:-rooted}
for n in ${HIER_RING_NODES:-8 16 32 64 128}; do
    if [ "$mode" = renum ]; then
        for coll in allgather reducescatter allreduce; do
            for spec in "dgx1ring:$n" "dgx1ringrenum:$n"; do
                echo "-- $spec"
                /usr/bin/time -f "  (process: %e s wall, %M KB peak RSS)" "$bin" "$spec" "$coll" "$runs"
            done
        done
    else
        for coll in broadcast reduce; do
            /usr/bin/time -f "  (process: %e s wall, %M KB peak RSS)" "$bin" "dgx1ring:$n" "$coll" "$runs"
        done
    fi
done
