#!/usr/bin/env bash
# Method hierarchical on clusters whose ranks are numbered differently inside
# each node, as Slurm allocations number them (docs/BENCHMARKS.md, "Issue 11:
# hierarchical synthesis"): the Slurm hook's 128-node DGX-1 cluster (NICs on
# local 0, 2, 4, 6, one fabric switch), nodes and ranks inside nodes shuffled
# (iso_bench emit SPEC SEED), POSTed with method auto to a collsynthd started
# with --no-iso-cache, so every allocation (seeds 7, 8, 9) is a fresh
# synthesis; seed 0 (as built) first for reference.  Prints per POST the
# round-trip seconds, the method, frontier entry 0's ratio_to_bound (the
# response's default size) and the head of the reason; then the median
# of the shuffled ones.  BUILD selects the build: run it on a build from
# before the change for the "before" figure.
#   HIER_RN_SPEC (default hook:128), HIER_RN_COLL (default allgather)
set -euo pipefail
BUILD=${BUILD:-build}
bench="$BUILD/bench/iso_bench"
bin="$BUILD/collsynthd"
[ -x "$bench" ] || make --no-print-directory "$bench"
[ -x "$bin" ] || make --no-print-directory "$bin"
spec=${HIER_RN_SPEC:-hook:128}
coll=${HIER_RN_COLL:-allgather}
tmp=$(mktemp -d /tmp/collsynth-hier-rn.XXXXXX)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

echo "== $spec $coll, method auto, $BUILD; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
. "$(dirname "$0")/lib/daemon.sh"
bench_start_daemon "" --max-body-bytes 67108864 --no-iso-cache
times=()
for seed in 0 7 8 9; do
    "$bench" emit "$spec" "$seed" "$coll" auto 300 >"$tmp/b.json"
    s=$(curl -s -o "$tmp/resp" -w '%{time_total}' -XPOST "$url/v1/synthesize" \
            -H 'Content-Type: application/json' --data-binary @"$tmp/b.json")
    grep -q "\"error\"" "$tmp/resp" && { cat "$tmp/resp"; echo; exit 1; }
    method=$(sed -n 's/.*"method":"\([a-z_-]*\)".*/\1/p' "$tmp/resp" | head -1)
    reason=$(grep -o '"reason":"[^"]*"' "$tmp/resp" | head -1 | cut -c11-140 | sed 's/"$//')
    ratio=$(grep -o '"ratio_to_bound":[0-9.e+-]*' "$tmp/resp" | head -1 | cut -d: -f2)
    printf 'seed %d: %6.2f s  method %-12s ratio_to_bound[0] %-8s %s\n' "$seed" "$s" "$method" \
        "$ratio" "$reason"
    [ "$seed" -ne 0 ] && times+=("$s")
done
printf '%s\n' "${times[@]}" | sort -n | awk '{v[NR]=$1} END {printf "median of %d shuffled: %.2f s\n", NR, v[int((NR+1)/2)]}'
