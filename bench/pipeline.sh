#!/usr/bin/env bash
# Memory and time per send on synthesize -> verify -> simulate -> store
# (docs/BENCHMARKS.md, "Issue 10: memory and time per send").
#
#   bash bench/pipeline.sh            32x32 and 64x64 (5 runs), 100x100 (PIPELINE_BIG_RUNS)
#   PIPELINE_RUNS=N PIPELINE_SIZES="32 64" PIPELINE_BIG_RUNS=0 bash bench/pipeline.sh
#
# Each run of build/bench/pipeline_bench SIDE is one process: TACOS allgather on
# mesh2d:SIDExSIDE (1 trial, sends kept), its verification and simulation,
# then the stored (encoded) form.  Medians of the runs per key.  Then the CLI:
# peak RSS of `collsynth solve mesh2d:32x32 allgather --method tacos --json`
# (output to /dev/null), medians of the same number of runs.
# 100x100 holds about 100M sends (~3 GB): PIPELINE_BIG_RUNS=0 skips it.
set -euo pipefail
BUILD=${BUILD:-build}
bin="$BUILD/bench/pipeline_bench"
cli="$BUILD/collsynth"
[ -x "$bin" ] || make --no-print-directory "$bin"
[ -x "$cli" ] || make --no-print-directory "$cli"
runs=${PIPELINE_RUNS:-5}
sizes=${PIPELINE_SIZES:-"32 64"}
big_runs=${PIPELINE_BIG_RUNS:-1}
threads=${PIPELINE_THREADS:-1}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# median KEY FILES...: the median of KEY's values over the files
median() {
    local key=$1
    shift
    awk -v k="$key" '$1 == k { print $2 }' "$@" | sort -g |
        awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2];
              else printf "%.4g\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

keys="sends search_s build_s verify_s simulate_s verify_plus_simulate_over_synthesis encode_s
send_storage_bytes_per_send synth_verify_sim_peak_bytes_per_send rss_after_synthesis_bytes_per_send
encoded_bytes_per_send encode_working_bytes_per_send path_peak_rss_mb path_peak_bytes_per_send"

run_size() {
    local side=$1 n=$2
    for ((r = 1; r <= n; r++)); do
        "$bin" "$side" "$threads" >"$tmp/$side.$r"
    done
    echo "== mesh2d:${side}x${side} allgather (TACOS, 1 trial, $threads thread(s)), median of $n"
    for k in $keys; do
        printf '%-40s %s\n' "$k" "$(median "$k" "$tmp/$side".*)"
    done
}

for s in $sizes; do
    run_size "$s" "$runs"
done
if [ "$big_runs" -gt 0 ]; then
    run_size 100 "$big_runs"
fi

echo "== CLI: collsynth solve mesh2d:32x32 allgather --method tacos --json, median of $runs"
for ((r = 1; r <= runs; r++)); do
    /usr/bin/time -f "%M %e" -o "$tmp/cli.$r" "$cli" solve mesh2d:32x32 allgather --method tacos \
        --json >/dev/null
    awk '{ print "peak_rss_mb", $1 / 1024; print "wall_s", $2 }' "$tmp/cli.$r" >"$tmp/clim.$r"
done
printf '%-40s %s\n' peak_rss_mb "$(median peak_rss_mb "$tmp"/clim.*)"
printf '%-40s %s\n' wall_s "$(median wall_s "$tmp"/clim.*)"
