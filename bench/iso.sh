#!/usr/bin/env bash
# Isomorphism-aware cache benchmarks (docs/BENCHMARKS.md, "Issue 11:
# isomorphism-aware cache"; docs/iso.md):
#   1. canonicalization time of 1024-rank allreduce requests (dgxh100:128, the
#      Slurm hook's 128-node DGX-1 cluster, torus2d:32x32), median of ISO_RUNS
#      (default 9), for the request as built and for a renumbered copy, with
#      bliss on the whole graph ("direct") as the baseline in the same run
#   2. the real daemon: a first allocation, then a second one of the same shape
#      with other node order and rank labels, then the first again: latency of
#      each POST (curl), syntheses the daemon ran (/metrics), and whether the
#      second came back relabelled; and, as the baseline in the same run, the
#      second allocation's POST on a daemon started with --no-iso-cache
# Uses SQLite in a temp dir; leaves nothing behind.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
RUNS=${ISO_RUNS:-9}
bench="$BUILD/bench/iso_bench"
bin="$BUILD/collsynthd"
[ -x "$bench" ] || make --no-print-directory "$bench"
[ -x "$bin" ] || make --no-print-directory "$bin"
tmp=$(mktemp -d /tmp/collsynth-iso-bench.XXXXXX)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

echo "== machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) (shared: numbers are noisy)"
echo "== canonicalization, 1024-rank allreduce requests, $RUNS runs (ms)"
"$bench" speed "$RUNS"

. "$(dirname "$0")/lib/daemon.sh"
start_daemon() { bench_start_daemon "$1" --max-body-bytes 67108864 "${@:2}"; }  # name, flags
metric() { curl -s "$url/metrics" | awk -v s="$1" 'index($0, s " ") == 1 {print $2}'; }
post() {  # body file -> "seconds status key relabelled_from"
    curl -s -o "$tmp/resp" -w '%{time_total} %{http_code}' -XPOST "$url/v1/synthesize" \
        -H 'Content-Type: application/json' --data-binary @"$1"
    printf ' %s %s\n' "$(sed -n 's/.*"key":"\([0-9a-f]\{64\}\)".*/\1/p' "$tmp/resp" | cut -c1-12)" \
        "$(sed -n 's/.*"relabelled_from":"\([0-9a-f]\{64\}\)".*/\1/p' "$tmp/resp" | cut -c1-12)"
}

n=0
for case in "hook:16 allgather tacos" "dgxh100:16 allreduce tacos" "hook:128 allgather auto"; do
    set -- $case
    n=$((n + 1))
    "$bench" emit "$1" 0 "$2" "$3" 300 >"$tmp/a.json"
    "$bench" emit "$1" 7 "$2" "$3" 300 >"$tmp/b.json"
    start_daemon "$n"
    read -r ta sa ka _ < <(post "$tmp/a.json")
    s1=$(metric 'collsynth_syntheses_total{outcome="started"}')
    read -r tb sb kb rb < <(post "$tmp/b.json")
    s2=$(metric 'collsynth_syntheses_total{outcome="started"}')
    read -r tc sc _ _ < <(post "$tmp/a.json")
    hits=$(metric 'collsynth_iso_total{outcome="hit"}')
    bench_stop_daemon
    # baseline in the same run: the same two posts with the iso cache off
    start_daemon "$n-off" --no-iso-cache
    post "$tmp/a.json" >/dev/null
    read -r toff _ _ _ < <(post "$tmp/b.json")
    soff=$(metric 'collsynth_syntheses_total{outcome="started"}')
    bench_stop_daemon
    echo "== $1 $2 --method $3: first allocation ${ta}s (HTTP $sa, key $ka, syntheses $s1);" \
         "second, renumbered: ${tb}s (HTTP $sb, key $kb, relabelled_from ${rb:-none}," \
         "syntheses $s2, iso hits $hits); first again: ${tc}s (HTTP $sc);" \
         "second with --no-iso-cache: ${toff}s (syntheses $soff)"
done
