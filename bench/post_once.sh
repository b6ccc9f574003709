#!/usr/bin/env bash
# CPU time collsynthd spends per POST /v1/synthesize of a large hierarchical
# request (docs/BENCHMARKS.md, "POST once: parse and renumbering cost"): the
# Slurm hook's 128-node DGX-1 cluster and dgxh100:128, allgather, method auto,
# as built (seed 0) and renumbered (nodes and ranks inside nodes shuffled,
# seed 7; bodies from `iso_bench emit SPEC SEED allgather auto 300`).
# Every POST is a fresh synthesis: options.tacos.seed differs per POST (a
# new key; auto runs hierarchical here, which does not read it), and the
# daemon runs with --no-iso-cache.  The daemon's CPU seconds (user + system
# from /proc, the daemon otherwise idle) are taken around each POST, which
# waits for the result (~0.1 GB response, written to a file).
#   BUILD (build): the build measured; BASE (unset): another build (e.g. main
#   before a change), measured in the same run, its daemon alternating with
#   this one's round by round.
#   POST_ONCE_RUNS (5): POSTs per case and build; the median is printed.
#   POST_ONCE_CASES ("hook:128:0 hook:128:7 dgxh100:128:0 dgxh100:128:7")
set -euo pipefail
BUILD=${BUILD:-build}
runs=${POST_ONCE_RUNS:-5}
cases=${POST_ONCE_CASES:-"hook:128:0 hook:128:7 dgxh100:128:0 dgxh100:128:7"}
builds=("$BUILD")
[ -n "${BASE:-}" ] && builds+=("$BASE")
emit="$BUILD/bench/iso_bench"
[ -x "$emit" ] || make --no-print-directory "$emit"
tmp=$(mktemp -d /tmp/collsynth-post-once.XXXXXX)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
. "$(dirname "$0")/lib/daemon.sh"
hz=$(getconf CLK_TCK)
daemon_cpu() { awk -v hz="$hz" '{printf "%.3f", ($14 + $15) / hz}' "/proc/$pid/stat"; }
echo "== POST once: $runs POSTs per case and build; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for c in $cases; do
    seed=${c##*:}
    spec=${c%:*}
    "$emit" emit "$spec" "$seed" allgather auto 300 >"$tmp/body-$c.json"
done
declare -A cpu
n=0
for r in $(seq "$runs"); do
    for b in "${builds[@]}"; do
        bin="$b/collsynthd"
        n=$((n + 1))
        bench_start_daemon "$n" --max-body-bytes 67108864 --no-iso-cache
        for c in $cases; do
            # a new key per POST and build: tacos.seed = round * 1000 + build index
            sed "s/\"wait_s\":300.0}/\"wait_s\":300.0,\"tacos\":{\"seed\":$((r * 1000 + n))}}/" \
                "$tmp/body-$c.json" >"$tmp/b.json"
            c0=$(daemon_cpu)
            code=$(curl -s -o "$tmp/resp" -w '%{http_code}' -XPOST "$url/v1/synthesize" \
                       -H 'Content-Type: application/json' --data-binary @"$tmp/b.json")
            c1=$(daemon_cpu)
            method=$(head -c 4096 "$tmp/resp" | sed -n 's/^{"method":"\([a-z_-]*\)".*/\1/p')
            [ "$code" = 200 ] || { echo "$b $c: HTTP $code"; head -c 600 "$tmp/resp"; exit 1; }
            d=$(awk -v a="$c0" -v b="$c1" 'BEGIN {printf "%.2f", b - a}')
            printf 'round %d  %-30s %-16s cpu %5.2f s  %s\n' "$r" "$b" "$c" "$d" "$method"
            cpu["$b|$c"]+="$d "
        done
        bench_stop_daemon
    done
done
for c in $cases; do
    line="median $c:"
    for b in "${builds[@]}"; do
        med=$(echo "${cpu["$b|$c"]}" | tr ' ' '\n' | grep . | sort -n |
              awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')
        line+="  $b $med s"
    done
    echo "$line"
done
