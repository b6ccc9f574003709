#!/usr/bin/env bash
# Method hierarchical against flat TACOS in the same run (docs/BENCHMARKS.md,
# "Issue 11: hierarchical synthesis"): dgxh100:128 and the Slurm hook's
# 128-node DGX-1 cluster (NICs on local ranks 0, 2, 4, 6; one fabric switch
# at 12.5 GB/s), allgather and allreduce.  Per case: median synthesis seconds
# (hierarchical: HIER_RUNS runs, default 5; TACOS: HIER_TACOS_RUNS, default 3
# on dgxh100:128 and 1 on the DGX-1 cluster, where one TACOS run takes 1-2
# minutes), simulated time and ratio_to_bound at 1 MiB and 1 GiB per rank,
# and every hierarchical algorithm lowered to MSCCL XML and checked against
# both runtimes' limits.  HIER_NODES changes the node count (default 128).
# Broadcast (root 0) on dgxh100 too: not a target, for the record.
set -euo pipefail
BUILD=${BUILD:-build}
bin="$BUILD/bench/hier_bench"
[ -x "$bin" ] || make --no-print-directory "$bin"
runs=${HIER_RUNS:-5}
nodes=${HIER_NODES:-128}
for topo in "dgxh100:$nodes" "dgx1cluster:$nodes"; do
    case "$topo" in
        dgxh100:*) truns=${HIER_TACOS_RUNS:-3} ;;
        *) truns=${HIER_TACOS_RUNS:-1} ;;
    esac
    colls="allgather allreduce"
    case "$topo" in dgxh100:*) colls="$colls broadcast" ;; esac
    for coll in $colls; do
        /usr/bin/time -f "  (process: %e s wall, %M KB peak RSS)" "$bin" "$topo" "$coll" "$runs" "$truns" msccl
    done
done
