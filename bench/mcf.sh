#!/usr/bin/env bash
# mcf benchmarks (docs/BENCHMARKS.md, "Issue 13: mcf"):
#   table3: DGX-1, 25 KB chunks, allgather and alltoall with 1..4 chunks: median
#           solve time of ${MCF_RUNS:-3} runs against 2x TE-CCL's Gurobi times,
#           simulated time against the best SMT frontier point at the same size
#   ndv2:   ndv2:2 alltoall (LP + rounding): time and simulated time / LP bound;
#           long (about a minute): MCF_NDV2=0 skips it
#   sym:    alltoall LPs with and without the automorphism reduction (several
#           minutes: the unreduced ones are slow): MCF_SYM=0 skips it
#   astar:  A* rounds against the full model (several minutes): MCF_ASTAR=0 skips it
#   copy:   copy-capable switches vs the hyper-edge form (switch_copy_bench)
set -euo pipefail
BUILD=${BUILD:-build}
bin="$BUILD/bench/mcf_bench"
[ -x "$bin" ] || make --no-print-directory "$bin"
[ -x "$BUILD/bench/switch_copy_bench" ] || make --no-print-directory "$BUILD/bench/switch_copy_bench"
echo "== mcf table3 (dgx1, 25 KB chunks)"
"$bin" table3 "${MCF_RUNS:-3}"
if [ "${MCF_NDV2:-1}" != 0 ]; then
    echo "== mcf ndv2:2 alltoall"
    "$bin" ndv2 1
fi
if [ "${MCF_SYM:-1}" != 0 ]; then
    echo "== mcf symmetry (alltoall, 25 KB)"
    "$bin" sym
fi
if [ "${MCF_ASTAR:-1}" != 0 ]; then
    echo "== mcf A* rounds against the full model (alltoall, 25 KB chunks)"
    "$bin" astar
fi
# copy-capable switches (TE-CCL's switch node) against the hyper-edge form:
# star8, dgx2, ndv2:2 broadcast/allgather at 1 MiB; ndv2:2 and dgx2 allgather
# take ~30 s each (the copy model's improve budget); MCF_COPY=0 skips it
if [ "${MCF_COPY:-1}" != 0 ]; then
    echo "== mcf copy-capable switch vs hyper-edge"
    "$BUILD/bench/switch_copy_bench" "${MCF_RUNS:-3}"
fi
