#!/usr/bin/env bash
# Cached GETs of collsynthd against nginx serving the same bytes from a file
# (issue 10 done-when: cached JSON GET >= 1.0x nginx req/s, cached MSCCL XML
# GET >= 0.8x).  wrk keep-alive (its default), CMP_CONNS connections (64),
# CMP_THREADS threads (2), CMP_SECS seconds (5) per run, CMP_RUNS runs (5) of
# each server interleaved so both see the same machine noise (which server
# goes first alternates between rounds); prints the medians and the ratios,
# and each server's CPU time per request (the daemon's process, nginx's
# workers), which depends less on what other processes leave them.  Also checks that a cached GET keeps the connection
# open (no "Connection: close"; curl reuses it for a second request).
# Installs wrk and nginx with apt-get if they are missing (needs root).
# Uses SQLite in a temp dir; leaves nothing behind.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
RUNS=${CMP_RUNS:-5}
SECS=${CMP_SECS:-5}
CONNS=${CMP_CONNS:-64}
THREADS=${CMP_THREADS:-2}
NGINX_WORKERS=${CMP_NGINX_WORKERS:-2}
bin="$BUILD/collsynthd"
[ -x "$bin" ] || make --no-print-directory "$bin"
missing=
command -v wrk >/dev/null || missing="$missing wrk"
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || missing="$missing nginx-light"
if [ -n "$missing" ]; then
    echo "== installing with apt-get:$missing"
    apt-get install -y $missing >/dev/null
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)

tmp=$(mktemp -d /tmp/collsynth-nginx.XXXXXX)
chmod 755 "$tmp" # nginx workers run as another user when started as root
pid= npid=
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    [ -n "$npid" ] && kill "$npid" 2>/dev/null && wait "$npid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
rps_of() { awk '/Requests\/sec/ {print $2}' "$1"; }

echo "== machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) (shared: numbers are noisy)"

# ---- the daemon, one synthesis, its cached documents -----------------------------------
. "$(dirname "$0")/lib/daemon.sh"
bench_start_daemon ""
body='{"topology":"dgx1","collective":"allgather","options":{"wait_s":300}}'
key=$(curl -s -XPOST "$url/v1/synthesize" -H 'Content-Type: application/json' -d "$body" |
      sed -n 's/.*"key":"\([0-9a-f]\{64\}\)".*/\1/p')
[ -n "$key" ] || { echo "synthesis failed"; exit 1; }
jpath="/v1/results/$key"
xpath="/v1/results/$key?format=msccl-xml"
mkdir -p "$tmp/www"
curl -sf -o "$tmp/www/result.json" "$url$jpath"
curl -sf -o "$tmp/www/result.xml" "$url$xpath"
chmod 644 "$tmp/www"/*
jsize=$(wc -c <"$tmp/www/result.json"); xsize=$(wc -c <"$tmp/www/result.xml")
echo "== dgx1 allgather: JSON $jsize bytes, MSCCL XML $xsize bytes"

# ---- keep-alive: two cached GETs on one connection ------------------------------------
for p in "$jpath" "$xpath"; do
    curl -sv -o /dev/null -o /dev/null "$url$p" "$url$p" 2>"$tmp/curlv" || true
    reused=$(grep -c 'Re-using existing connection' "$tmp/curlv" || true)
    closes=$(grep -ci '^< connection: close' "$tmp/curlv" || true)
    conns=$(grep -c 'Connected to' "$tmp/curlv" || true)
    if [ "$reused" -ge 1 ] && [ "$closes" = 0 ] && [ "$conns" = 1 ]; then
        echo "keep-alive $p: met (2 GETs, 1 connection, no 'Connection: close')"
    else
        echo "keep-alive $p: NOT met (connections $conns, reused $reused, 'Connection: close' $closes)"
    fi
done

# ---- nginx serving the same bytes ------------------------------------------------------
nport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$tmp/nginx.conf" <<EOF
daemon off;
master_process on;
worker_processes $NGINX_WORKERS;
pid $tmp/nginx.pid;
error_log $tmp/nginx-error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_timeout 65;
    keepalive_requests 1000000;
    client_body_temp_path $tmp/nginx-body;
    proxy_temp_path $tmp/nginx-proxy;
    fastcgi_temp_path $tmp/nginx-fastcgi;
    uwsgi_temp_path $tmp/nginx-uwsgi;
    scgi_temp_path $tmp/nginx-scgi;
    server {
        listen 127.0.0.1:$nport;
        root $tmp/www;
        location = /result.json { types { } default_type application/json; }
        location = /result.xml  { types { } default_type application/xml; }
    }
}
EOF
"$NGINX" -p "$tmp" -c "$tmp/nginx.conf" 2>"$tmp/nginx-start.log" &
npid=$!
nurl="http://127.0.0.1:$nport"
for _ in $(seq 100); do curl -sf -o /dev/null "$nurl/result.json" && break; sleep 0.05; done
cmp -s <(curl -s "$nurl/result.json") "$tmp/www/result.json" || { echo "nginx did not serve"; cat "$tmp/nginx-start.log" "$tmp/nginx-error.log"; exit 1; }
cmp -s <(curl -s "$nurl/result.xml") <(curl -s "$url$xpath") || { echo "nginx XML differs from the daemon's"; exit 1; }

# ---- interleaved wrk runs ----------------------------------------------------------------
# CPU ticks of each of the daemon's HTTP worker threads (named MHD-worker):
# how the connections' work split over them (a burst of connections all on
# one worker showed as one busy thread and one idle one)
worker_ticks() {
    for t in /proc/$pid/task/*; do
        if [ "$(cat "$t/comm" 2>/dev/null)" = MHD-worker ]; then awk '{print $14 + $15}' "$t/stat"; fi
    done | tr '\n' ' '
}
# CPU ticks (user + system, all threads) of the daemon, and of nginx's workers
daemon_ticks() { awk '{print $14 + $15}' /proc/$pid/stat; }
nginx_ticks() {
    local t=0 w
    for w in $(pgrep -P "$npid" 2>/dev/null); do t=$((t + $(awk '{print $14 + $15}' /proc/$w/stat))); done
    echo $t
}
# CPU microseconds per request: ticks, req/s
us_per_req() { awk -v t="$1" -v r="$2" -v s="$SECS" -v hz="$(getconf CLK_TCK)" \
    'BEGIN { printf "%.1f", (r > 0 ? t * 1e6 / hz / (r * s) : 0) }'; }
split_of() { # before-list after-list -> "a/b" share of each worker in %
    awk -v a="$1" -v b="$2" 'BEGIN { n = split(a, x, " "); split(b, y, " "); t = 0
        for (i = 1; i <= n; i++) { d[i] = y[i] - x[i]; t += d[i] }
        for (i = 1; i <= n; i++) printf "%s%d", (i > 1 ? "/" : ""), (t > 0 ? 100 * d[i] / t : 0) }'
}
echo "== wrk -t$THREADS -c$CONNS -d${SECS}s (keep-alive), $RUNS runs of each, interleaved; nginx $NGINX_WORKERS workers"
# one wrk run: req/s on stdout; non-2xx answers or socket errors go to stderr
one() {
    wrk -t"$THREADS" -c"$CONNS" -d"${SECS}s" "$1" >"$tmp/w" 2>&1
    if grep -q 'Non-2xx\|Socket errors' "$tmp/w"; then
        echo "   $1: $(grep 'Non-2xx\|Socket errors' "$tmp/w" | tr '\n' ' ')" >&2
    fi
    rps_of "$tmp/w"
}
: >"$tmp/dj"; : >"$tmp/nj"; : >"$tmp/dx"; : >"$tmp/nx"; : >"$tmp/rj"; : >"$tmp/rx"
: >"$tmp/cdj"; : >"$tmp/cnj"; : >"$tmp/cdx"; : >"$tmp/cnx"
# one format's pair: the daemon's run and nginx's, in the order given (the
# order alternates between rounds: on a busy machine the slot a run gets
# matters, e.g. one server always following the other's teardown)
pair() { # daemon-url nginx-url first(d|n) -> sets d n td tn w_a w_b
    local a b
    if [ "$3" = d ]; then
        a=$(worker_ticks); td=$(daemon_ticks); d=$(one "$1"); td=$(($(daemon_ticks) - td)); b=$(worker_ticks)
        tn=$(nginx_ticks); n=$(one "$2"); tn=$(($(nginx_ticks) - tn))
    else
        tn=$(nginx_ticks); n=$(one "$2"); tn=$(($(nginx_ticks) - tn))
        a=$(worker_ticks); td=$(daemon_ticks); d=$(one "$1"); td=$(($(daemon_ticks) - td)); b=$(worker_ticks)
    fi
    w_a=$a w_b=$b
}
for i in $(seq "$RUNS"); do
    first=d; [ $((i % 2)) = 0 ] && first=n
    pair "$url$jpath" "$nurl/result.json" $first
    dj=$d nj=$n w0=$w_a w1=$w_b t0=0 t1=$td n0=0 n1=$tn
    pair "$url$xpath" "$nurl/result.xml" $first
    dx=$d nx=$n w2=$w_a w3=$w_b t2=0 t3=$td n2=0 n3=$tn
    cdj=$(us_per_req $((t1 - t0)) "$dj"); cnj=$(us_per_req $((n1 - n0)) "$nj")
    cdx=$(us_per_req $((t3 - t2)) "$dx"); cnx=$(us_per_req $((n3 - n2)) "$nx")
    echo "   run $i ($([ $first = d ] && echo daemon || echo nginx) first): JSON daemon $dj nginx $nj | XML daemon $dx nginx $nx req/s" \
         "(load $(cut -d' ' -f1 /proc/loadavg); daemon workers' CPU % JSON" \
         "$(split_of "$w0" "$w1"), XML $(split_of "$w2" "$w3"); CPU us/request JSON" \
         "$cdj vs $cnj, XML $cdx vs $cnx)"
    echo "$cdj" >>"$tmp/cdj"; echo "$cnj" >>"$tmp/cnj"; echo "$cdx" >>"$tmp/cdx"; echo "$cnx" >>"$tmp/cnx"
    echo "$dj" >>"$tmp/dj"; echo "$nj" >>"$tmp/nj"; echo "$dx" >>"$tmp/dx"; echo "$nx" >>"$tmp/nx"
    awk -v a="$dj" -v b="$nj" 'BEGIN {print a / b}' >>"$tmp/rj"
    awk -v a="$dx" -v b="$nx" 'BEGIN {print a / b}' >>"$tmp/rx"
done
# the ratio of each run's adjacent pair, less sensitive to load drifting between runs
# server CPU per request (the daemon's whole process, nginx's workers): what
# the servers cost, less sensitive than req/s to how much CPU other
# processes on a shared machine leave them
echo "json_cpu_us_per_request_median daemon $(median <"$tmp/cdj") nginx $(median <"$tmp/cnj")"
echo "xml_cpu_us_per_request_median daemon $(median <"$tmp/cdx") nginx $(median <"$tmp/cnx")"
echo "json_paired_ratio_median $(median <"$tmp/rj")"
echo "xml_paired_ratio_median $(median <"$tmp/rx")"
mdj=$(median <"$tmp/dj"); mnj=$(median <"$tmp/nj"); mdx=$(median <"$tmp/dx"); mnx=$(median <"$tmp/nx")
echo "json_daemon_rps_median $mdj"
echo "json_nginx_rps_median $mnj"
echo "xml_daemon_rps_median $mdx"
echo "xml_nginx_rps_median $mnx"
awk -v dj="$mdj" -v nj="$mnj" -v dx="$mdx" -v nx="$mnx" 'BEGIN {
    rj = dj / nj; rx = dx / nx
    printf "json_ratio_to_nginx %.2f (target >= 1.0: %s)\n", rj, (rj >= 1.0 ? "met" : "NOT met")
    printf "xml_ratio_to_nginx %.2f (target >= 0.8: %s)\n", rx, (rx >= 0.8 ? "met" : "NOT met") }'
# ---- both at once -----------------------------------------------------------------------
# The interleaved runs give each server its own slot, and on a shared machine
# the CPU a slot gets varies more than the servers differ.  Here one wrk
# (CMP_THREADS / 2 threads, CMP_CONNS connections) drives each server at the
# same time, so both meet exactly the same interference and each other: the
# ratio says which serves more with the same machine.  CMP_BOTH_RUNS rounds
# (3; 0 skips it).
BOTH=${CMP_BOTH_RUNS:-3}
if [ "$BOTH" -gt 0 ]; then
    half=$(( THREADS / 2 > 0 ? THREADS / 2 : 1 ))
    echo "== both at once: wrk -t$half -c$CONNS -d${SECS}s against each, $BOTH rounds per format"
    : >"$tmp/bj"; : >"$tmp/bx"
    for i in $(seq "$BOTH"); do
        for f in json xml; do
            if [ $f = json ]; then du="$url$jpath"; nu="$nurl/result.json"; else du="$url$xpath"; nu="$nurl/result.xml"; fi
            wrk -t"$half" -c"$CONNS" -d"${SECS}s" "$du" >"$tmp/wd" 2>&1 & wa=$!
            wrk -t"$half" -c"$CONNS" -d"${SECS}s" "$nu" >"$tmp/wn" 2>&1 & wb=$!
            wait $wa $wb
            d=$(rps_of "$tmp/wd"); n=$(rps_of "$tmp/wn")
            echo "   round $i $f: daemon $d nginx $n req/s (load $(cut -d' ' -f1 /proc/loadavg))"
            awk -v a="$d" -v b="$n" 'BEGIN {print a / b}' >>"$tmp/b${f:0:1}"
        done
    done
    echo "both_at_once_json_ratio_median $(median <"$tmp/bj")"
    echo "both_at_once_xml_ratio_median $(median <"$tmp/bx")"
fi
echo "== load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
