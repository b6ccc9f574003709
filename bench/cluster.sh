#!/usr/bin/env bash
# Issue 10's first done-when bullet, end to end (docs/BENCHMARKS.md, "Issue 10:
# clusters end to end"): for dgxh100:128 (1024 ranks) and the Slurm hook's
# 128-node DGX-1 cluster (NICs on local ranks 0, 2, 4, 6, one fabric switch at
# 12.5 GB/s, built by the hook's own code), allgather, reducescatter and
# allreduce are POSTed to a real collsynthd (127.0.0.1, ephemeral port, temp
# data dir, one daemon per topology) with method auto; each case reports the
# time to `done`, the method auto chose and why, then every rank's MSCCL slice
# (?format=msccl-xml&rank=R) for both runtimes (msccl, msccl-executor): fetch
# latency median/max (first fetch: generated; repeats: cached), the worst
# rank's XML elements, steps per thread block and thread blocks, each slice
# against that runtime's limits (codegen/msccl_check.h), the slices
# reassembled and run in the XML interpreter (codegen/msccl_interp.h), and
# every node's ?ranks=A-B slice (what the Slurm hook asks for) against its
# ranks' slices.
#
#   bash bench/cluster.sh                       # both topologies, 128 nodes
#   CLUSTER_NODES=16 bash bench/cluster.sh      # the slow test's size
#   CLUSTER_STRIDE=64 bash bench/cluster.sh     # every 64th rank only (quick look)
#   CLUSTER_ALGS=0 bash bench/cluster.sh        # every frontier algorithm, not just entry 0
# The driver is build/bench/cluster_bench (bench/cluster_bench.c); its exit
# status is non-zero when a check failed, and this script goes on to the next
# topology and exits non-zero at the end.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
bin="$BUILD/bench/cluster_bench"
make --no-print-directory "$bin" "$BUILD/collsynthd" >/dev/null || exit 1
nodes=${CLUSTER_NODES:-128}
stride=${CLUSTER_STRIDE:-1}
algs=${CLUSTER_ALGS:-1}
echo "== machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) (shared: times are noisy)"
status=0
for topo in "dgxh100:$nodes" "dgx1cluster:$nodes"; do
    echo "== $topo"
    /usr/bin/time -f "  (driver: %e s wall, %M KB peak RSS)" \
        "$bin" --stride "$stride" --algs "$algs" "$topo" allgather reducescatter allreduce ||
        status=1
done
exit $status
