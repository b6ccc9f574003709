#!/usr/bin/env bash
# A 16.7M-send result through collsynthd (docs/BENCHMARKS.md, "Issue 10:
# memory and time per send"): mesh2d:64x64 allgather with TACOS, POSTed and
# waited for; then the full JSON document streamed (curl to /dev/null), and
# one rank's JSON slice and one rank's MSCCL slice (?rank=R), medians of
# SCALE_RUNS GETs each.  The daemon's peak RSS (VmHWM from /proc) is read
# after the synthesis and after the full GETs.
#
#   bash bench/service_scale.sh               (SCALE_TOPO=mesh2d:64x64 SCALE_RUNS=5)
#
# Needs curl.  SQLite in a temp dir; leaves nothing behind.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
TOPO=${SCALE_TOPO:-mesh2d:64x64}
RUNS=${SCALE_RUNS:-5}
bin="$BUILD/collsynthd"
[ -x "$bin" ] || make --no-print-directory "$bin"
tmp=$(mktemp -d /tmp/collsynthd-scale.XXXXXX)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
hwm_mb() { awk '/^VmHWM:/ {printf "%.0f", $2 / 1024}' "/proc/$pid/status"; }
rss_mb() { awk '/^VmRSS:/ {printf "%.0f", $2 / 1024}' "/proc/$pid/status"; }

. "$(dirname "$0")/lib/daemon.sh"
bench_start_daemon ""
echo "== machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== $TOPO allgather, method tacos, through collsynthd (SQLite)"
echo "daemon_rss_at_start_mb $(rss_mb)"
body="{\"topology\":\"$TOPO\",\"collective\":{\"kind\":\"allgather\"},\"method\":\"tacos\"}"
t0=$(date +%s.%N)
curl -s -XPOST "$url/v1/synthesize" -H 'Content-Type: application/json' -d "$body" >"$tmp/post"
key=$(sed -n 's/.*"key":"\([0-9a-f]\{64\}\)".*/\1/p' "$tmp/post" | head -1 || true)
job=$(sed -n 's/.*"job":"\([0-9a-f]*\)".*/\1/p' "$tmp/post" | head -1 || true)
[ -n "$key" ] && [ -n "$job" ] || { echo "no job: $(head -c 400 "$tmp/post")"; exit 1; }
status=
for _ in $(seq 1200); do
    status=$(curl -s "$url/v1/jobs/$job?view=summary" | grep -o '"status":"[a-z]*"' | head -1 || true)
    case "$status" in *done*|*failed*|*cancelled*) break ;; esac
    sleep 0.5
done
t1=$(date +%s.%N)
echo "job_status $status"
echo "post_to_done_s $(echo "$t1 - $t0" | bc)"
echo "daemon_peak_rss_after_synthesis_mb $(hwm_mb)"
: >"$tmp/full"
for i in $(seq "$RUNS"); do
    curl -s -o /dev/null -w '%{time_total} %{size_download} %{http_code}\n' \
        "$url/v1/results/$key" >>"$tmp/full"
done
echo "full_json_status $(awk '{print $3}' "$tmp/full" | sort -u | tr '\n' ' ')"
echo "full_json_bytes $(awk 'NR==1 {print $2}' "$tmp/full")"
echo "full_json_s_median $(awk '{print $1}' "$tmp/full" | median)"
echo "full_json_s_first $(awk 'NR==1 {print $1}' "$tmp/full")"
echo "daemon_peak_rss_after_full_gets_mb $(hwm_mb)"
ranks=$(echo "$TOPO" | sed -n 's/.*:\([0-9]*\)x\([0-9]*\)/\1 \2/p' | awk '{print $1 * $2}')
for fmt in json msccl-xml; do
    : >"$tmp/slice"
    for i in $(seq "$RUNS"); do
        r=$(( (i * 997) % ranks ))
        curl -s -o /dev/null -w '%{time_total} %{size_download} %{http_code}\n' \
            "$url/v1/results/$key?rank=$r&format=$fmt" >>"$tmp/slice"
    done
    echo "slice_${fmt}_status $(awk '{print $3}' "$tmp/slice" | sort -u | tr '\n' ' ')"
    if ! awk '{print $3}' "$tmp/slice" | grep -qx 200; then
        echo "slice_${fmt}_answer $(curl -s "$url/v1/results/$key?rank=0&format=$fmt" | head -c 400)"
    fi
    echo "slice_${fmt}_bytes_median $(awk '{print $2}' "$tmp/slice" | median)"
    echo "slice_${fmt}_s_median $(awk '{print $1}' "$tmp/slice" | median)"
    echo "slice_${fmt}_s_max $(awk '{print $1}' "$tmp/slice" | sort -g | tail -1)"
done
echo "daemon_peak_rss_end_mb $(hwm_mb)"
