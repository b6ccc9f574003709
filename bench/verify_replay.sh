#!/usr/bin/env bash
# algorithm_verify's fast (dense) replay against the general chunk-by-chunk
# replay (algorithm_verify_general) on the same hierarchical algorithms, in
# the same run, interleaved (docs/BENCHMARKS.md, "Hierarchical rings and
# verification").  Per algorithm: median and minimum seconds of VR_RUNS runs
# each (default 7), their ratio, and whether the verdicts agree.
set -euo pipefail
BUILD=${BUILD:-build}
bin="$BUILD/bench/verify_replay_bench"
[ -x "$bin" ] || make --no-print-directory "$bin"
runs=${VR_RUNS:-7}
for spec in dgx1ring:8 dgx1ring:16 dgx1ring:32 dgx1ring:128 dgxh100:16; do
    for coll in ${VR_COLLS:-allgather reducescatter allreduce reduce}; do
        "$bin" "$spec" "$coll" "$runs"
    done
done
