#!/usr/bin/env bash
# collsynthd benchmarks (docs/BENCHMARKS.md, collsynthd section):
#   1. cached GET /v1/results/{key} with wrk on loopback: requests/s and p99,
#      median of SERVER_RUNS runs (default 5) of SERVER_SECS seconds (default 5),
#      and GET /v1/health in the same runs as the in-process floor
#   2. 200 concurrent identical cold POSTs: how many syntheses ran (must be 1)
# Needs wrk and curl.  Uses SQLite in a temp dir; leaves nothing behind.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
RUNS=${SERVER_RUNS:-5}
SECS=${SERVER_SECS:-5}
CONNS=${SERVER_CONNS:-16}
THREADS=${SERVER_WRK_THREADS:-2}
bin="$BUILD/collsynthd"
[ -x "$bin" ] || make --no-print-directory "$bin"
command -v wrk >/dev/null || { echo "wrk is not installed"; exit 1; }
tmp=$(mktemp -d /tmp/collsynthd-bench.XXXXXX)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

. "$(dirname "$0")/lib/daemon.sh"
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
# wrk's p99 in ms, whatever unit it printed
p99_ms() { awk '/ 99%/ {v=$2; if (v ~ /us$/) {sub(/us/,"",v); v/=1000} else if (v ~ /ms$/) {sub(/ms/,"",v)} else if (v ~ /s$/) {sub(/s/,"",v); v*=1000}; print v}'; }

echo "== machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) (shared: numbers are noisy)"

# ---- 1. cached GET -------------------------------------------------------------------
bench_start_daemon 1
body='{"topology":"dgx1","collective":{"kind":"allgather"},"options":{"wait_s":300}}'
key=$(curl -s -XPOST "$url/v1/synthesize" -H 'Content-Type: application/json' -d "$body" |
      sed -n 's/.*"key":"\([0-9a-f]\{64\}\)".*/\1/p')
[ -n "$key" ] || { echo "synthesis failed"; exit 1; }
size=$(curl -s "$url/v1/results/$key" | wc -c)
method=$(curl -s "$url/v1/results/$key" | sed -n 's/.*"method":"\([a-z0-9-]*\)".*/\1/p' | head -1)
echo "== cached GET /v1/results/KEY (dgx1 allgather, auto -> $method, $size bytes)," \
     "wrk -t$THREADS -c$CONNS -d${SECS}s, $RUNS runs"
: >"$tmp/rps"; : >"$tmp/p99"; : >"$tmp/hrps"; : >"$tmp/hp99"
for i in $(seq "$RUNS"); do
    wrk -t"$THREADS" -c"$CONNS" -d"${SECS}s" --latency "$url/v1/results/$key" >"$tmp/wrk" 2>&1
    rps=$(awk '/Requests\/sec/ {print $2}' "$tmp/wrk"); p99=$(p99_ms <"$tmp/wrk")
    wrk -t"$THREADS" -c"$CONNS" -d"${SECS}s" --latency "$url/v1/health" >"$tmp/wrkh" 2>&1
    hrps=$(awk '/Requests\/sec/ {print $2}' "$tmp/wrkh"); hp99=$(p99_ms <"$tmp/wrkh")
    echo "   run $i: result ${rps} req/s p99 ${p99} ms | health ${hrps} req/s p99 ${hp99} ms"
    echo "$rps" >>"$tmp/rps"; echo "$p99" >>"$tmp/p99"
    echo "$hrps" >>"$tmp/hrps"; echo "$hp99" >>"$tmp/hp99"
done
# the daemon's own view: p99 bucket of its request-duration histogram (time
# from the request's arrival in the handler to the end of the response)
curl -s "$url/metrics" | awk '
    /^collsynth_http_request_duration_seconds_bucket\{route="result"/ {
        match($0, /le="[^"]*"/); le = substr($0, RSTART + 4, RLENGTH - 5); n++; les[n] = le; c[n] = $2 }
    END { total = c[n]; for (i = 1; i <= n; i++) if (c[i] >= 0.99 * total) {
              printf "server_side_p99_bucket_le_s %s (of %d requests; %.2f%% under 1 ms)\n", les[i], total, 100 * c[2] / total; break } }'
# a lighter offered load: one wrk thread, 4 connections (less CPU contention)
: >"$tmp/lrps"; : >"$tmp/lp99"
for i in $(seq "$RUNS"); do
    wrk -t1 -c4 -d"${SECS}s" --latency "$url/v1/results/$key" >"$tmp/wrkl" 2>&1
    lr=$(awk '/Requests\/sec/ {print $2}' "$tmp/wrkl"); lp=$(p99_ms <"$tmp/wrkl")
    echo "   light run $i: result ${lr} req/s p99 ${lp} ms"
    echo "$lr" >>"$tmp/lrps"; echo "$lp" >>"$tmp/lp99"
done
echo "light_load_t1_c4_rps_median $(median <"$tmp/lrps")"
echo "light_load_t1_c4_p99_ms_median $(median <"$tmp/lp99")"
mrps=$(median <"$tmp/rps"); mp99=$(median <"$tmp/p99")
echo "cached_get_rps_median $mrps"
echo "cached_get_p99_ms_median $mp99"
echo "health_rps_median $(median <"$tmp/hrps")"
echo "health_p99_ms_median $(median <"$tmp/hp99")"
awk -v r="$mrps" -v p="$mp99" 'BEGIN {
    printf "target >= 20000 req/s: %s; target p99 <= 5 ms: %s\n",
           (r >= 20000 ? "met" : "NOT met"), (p <= 5 ? "met" : "NOT met") }'
bench_stop_daemon

# ---- 2. 200 concurrent identical cold POSTs ---------------------------------------------
N=${SERVER_POSTS:-200}
bench_start_daemon 2 --max-connections 1024
body='{"topology":"ring:8","collective":{"kind":"allgather"},"method":"smt","options":{"wait_s":120}}'
echo "== $N concurrent identical cold POSTs (ring:8 allgather, smt, wait_s 120)"
t0=$(date +%s.%N)
seq "$N" | xargs -P "$N" -I{} curl -s -o "$tmp/post.{}" -w '%{http_code}\n' \
    -XPOST "$url/v1/synthesize" -H 'Content-Type: application/json' -d "$body" >"$tmp/codes"
t1=$(date +%s.%N)
codes=$(sort "$tmp/codes" | uniq -c | awk '{printf "%s x%s ", $2, $1}')
keys=$(cat "$tmp"/post.* | grep -o '"key":"[0-9a-f]*"' | sort -u | wc -l)
started=$(curl -s "$url/metrics" | awk '/^collsynth_syntheses_total\{outcome="started"\}/ {print $2}')
coalesced=$(curl -s "$url/metrics" | awk '/^collsynth_coalesced_total/ {print $2}')
echo "statuses: $codes"
echo "distinct keys: $keys"
echo "syntheses_started $started"
echo "coalesced $coalesced"
echo "wall_seconds $(echo "$t1 - $t0" | bc)"
[ "$started" = 1 ] && echo "exactly one synthesis: met" || echo "exactly one synthesis: NOT met"
bench_stop_daemon
