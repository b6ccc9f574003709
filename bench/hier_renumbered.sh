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
# of the shuffled ones.  Each line also gives the daemon's CPU seconds for
# the POST (user + system from /proc, the daemon being otherwise idle): on a
# loaded machine the round trip swings 2x, its CPU time much less.  BUILD
# selects the build: run it on a build from before the change for the
# "before" figure.
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
cpus=()
hz=$(getconf CLK_TCK)
daemon_cpu() { awk -v hz="$hz" '{printf "%.3f", ($14 + $15) / hz}' "/proc/$pid/stat"; }
for seed in 0 7 8 9; do
    "$bench" emit "$spec" "$seed" "$coll" auto 300 >"$tmp/b.json"
    c0=$(daemon_cpu)
    s=$(curl -s -o "$tmp/resp" -w '%{time_total}' -XPOST "$url/v1/synthesize" \
            -H 'Content-Type: application/json' --data-binary @"$tmp/b.json")
    c=$(awk -v a="$c0" -v b="$(daemon_cpu)" 'BEGIN {printf "%.2f", b - a}')
    grep -q "\"error\"" "$tmp/resp" && { cat "$tmp/resp"; echo; exit 1; }
    # method and reason lead the document; the response is ~116 MB on one
    # line, so no regex runs over all of it
    method=$(head -c 4096 "$tmp/resp" | sed -n 's/^{"method":"\([a-z_-]*\)".*/\1/p')
    reason=$(head -c 4096 "$tmp/resp" | grep -o '"reason":"[^"]*"' | head -1 | cut -c11-140 |
             sed 's/"$//')
    ratio=$(grep -o -m1 '"ratio_to_bound":[0-9.e+-]*' "$tmp/resp" | head -1 | cut -d: -f2)
    printf 'seed %d: %6.2f s  cpu %5.2f s  method %-12s ratio_to_bound[0] %-8s %s\n' "$seed" "$s" \
        "$c" "$method" "$ratio" "$reason"
    [ "$seed" -ne 0 ] && times+=("$s") && cpus+=("$c")
done
printf '%s\n' "${times[@]}" | sort -n | awk '{v[NR]=$1} END {printf "median of %d shuffled: %.2f s\n", NR, v[int((NR+1)/2)]}'
printf '%s\n' "${cpus[@]}" | sort -n | awk '{v[NR]=$1} END {printf "median daemon cpu of %d shuffled: %.2f s\n", NR, v[int((NR+1)/2)]}'
