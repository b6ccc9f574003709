#!/usr/bin/env bash
# What the chunked-body framing parser (server/framing.c, issue 12 item 8e)
# costs: the parser alone (build/bench/framing_bench: ns per request and per
# MiB against memcpy of the same bytes), then two collsynthd, one with
# --chunk-guard (the default) and one with --no-chunk-guard, serving the same
# cached result; wrk keep-alive on /v1/health and on the cached JSON result,
# FRAMING_RUNS (5) rounds of FRAMING_SECS (5) s against each daemon,
# interleaved (which goes first alternates), medians and the on/off ratio;
# and each daemon's CPU time per request.  Installs wrk with apt-get if
# missing.  Uses SQLite in a temp dir; leaves nothing behind.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
RUNS=${FRAMING_RUNS:-5}
SECS=${FRAMING_SECS:-5}
CONNS=${FRAMING_CONNS:-64}
bin="$BUILD/collsynthd"
[ -x "$bin" ] && [ -x "$BUILD/bench/framing_bench" ] ||
    make --no-print-directory "$bin" "$BUILD/bench/framing_bench"
command -v wrk >/dev/null || { echo "== installing wrk with apt-get"; apt-get install -y wrk >/dev/null; }

echo "== machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) (shared: numbers are noisy)"
echo "== the parser alone: $BUILD/bench/framing_bench 5"
"$BUILD/bench/framing_bench" 5

tmp=$(mktemp -d /tmp/collsynth-framing.XXXXXX)
pid= pid_on= pid_off=
cleanup() {
    for p in $pid_on $pid_off; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT
. "$(dirname "$0")/lib/daemon.sh"
bench_start_daemon on
pid_on=$pid url_on=$url
bench_start_daemon off --no-chunk-guard
pid_off=$pid url_off=$url
grep -q chunk_guard_inactive "$tmp/logon" && { echo "the guard is inactive:"; cat "$tmp/logon"; exit 1; }

body='{"topology":"dgx1","collective":"allgather","options":{"wait_s":300}}'
key=
for u in "$url_on" "$url_off"; do
    key=$(curl -s -XPOST "$u/v1/synthesize" -H 'Content-Type: application/json' -d "$body" |
          sed -n 's/.*"key":"\([0-9a-f]\{64\}\)".*/\1/p')
    [ -n "$key" ] || { echo "synthesis failed on $u"; exit 1; }
done
# each synthesized it once (its timings differ): about the same bytes to serve
echo "cached result: $(curl -s "$url_on/v1/results/$key" | wc -c) bytes (guard), $(curl -s "$url_off/v1/results/$key" | wc -c) bytes (no guard)"
# a chunked POST with a 50 KB extension: 400 with the guard, libmicrohttpd's 500 without
for u in "$url_on" "$url_off"; do
    code=$(python3 - "${u##*:}" <<'EOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
json = b'{"topology":"ring:4","collective":"allgather"}'
s.sendall(b"POST /v1/synthesize HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
          b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" +
          b"%x;e=" % len(json) + b"x" * 50000 + b"\r\n" + json + b"\r\n0\r\n\r\n")
s.settimeout(10)
data = b""
try:
    while True:
        d = s.recv(65536)
        if not d:
            break
        data += d
except OSError:
    pass
print(data[9:12].decode() or "reset")
EOF
)
    echo "50 KB chunk extension, $([ "$u" = "$url_on" ] && echo guard || echo no guard): HTTP $code"
done

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
ticks() { awk '{print $14 + $15}' /proc/$1/stat; }
one() { # url pid -> "req/s us-per-request"
    local t0 t1
    t0=$(ticks "$2")
    wrk -t2 -c"$CONNS" -d"${SECS}s" "$1" >"$tmp/w" 2>&1
    t1=$(ticks "$2")
    grep -q 'Non-2xx\|Socket errors' "$tmp/w" && grep 'Non-2xx\|Socket errors' "$tmp/w" >&2
    local rps
    rps=$(awk '/Requests\/sec/ {print $2}' "$tmp/w")
    awk -v r="$rps" -v t="$((t1 - t0))" -v s="$SECS" -v hz="$(getconf CLK_TCK)" \
        'BEGIN { printf "%s %.2f\n", r, (r > 0 ? t * 1e6 / hz / (r * s) : 0) }'
}
echo "== wrk -t2 -c$CONNS -d${SECS}s keep-alive, $RUNS rounds each, interleaved"
for path in /v1/health "/v1/results/$key"; do
    : >"$tmp/on"; : >"$tmp/off"
    for r in $(seq "$RUNS"); do
        if [ $((r % 2)) = 1 ]; then
            one "$url_on$path" "$pid_on" >>"$tmp/on"; one "$url_off$path" "$pid_off" >>"$tmp/off"
        else
            one "$url_off$path" "$pid_off" >>"$tmp/off"; one "$url_on$path" "$pid_on" >>"$tmp/on"
        fi
    done
    on=$(cut -d' ' -f1 "$tmp/on" | median); off=$(cut -d' ' -f1 "$tmp/off" | median)
    cpu_on=$(cut -d' ' -f2 "$tmp/on" | median); cpu_off=$(cut -d' ' -f2 "$tmp/off" | median)
    name=$([ "$path" = /v1/health ] && echo health || echo cached_json)
    echo "$name req/s: guard $(cut -d' ' -f1 "$tmp/on" | tr '\n' ' ')| no guard $(cut -d' ' -f1 "$tmp/off" | tr '\n' ' ')"
    awk -v a="$on" -v b="$off" -v ca="$cpu_on" -v cb="$cpu_off" -v n="$name" 'BEGIN {
        printf "%s median req/s: guard %.0f, no guard %.0f, ratio %.3f; CPU us/request %.2f vs %.2f\n",
               n, a, b, (b > 0 ? a / b : 0), ca, cb }'
done
echo "== load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
