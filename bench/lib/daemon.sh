# Sourced by the bench scripts that run collsynthd (server, iso, herd,
# service_scale, nginx_compare, hier_renumbered), so they all start and wait
# for it the same way.  Needs $bin (the daemon) and $tmp (a scratch folder).
#
#   bench_start_daemon SUFFIX [FLAGS...]
#       collsynthd on an ephemeral loopback port, data in $tmp/dataSUFFIX,
#       stdout in $tmp/out, stderr in $tmp/logSUFFIX; sets pid, and url once
#       /v1/health answers (else prints the log and exits 1).
#   bench_stop_daemon
#       SIGTERM, wait, clear pid.

bench_start_daemon() {
    "$bin" --port 0 --data-dir "$tmp/data$1" "${@:2}" >"$tmp/out" 2>"$tmp/log$1" &
    pid=$!
    url=
    for _ in $(seq 100); do
        url=$(grep -o 'http://127.0.0.1:[0-9]*' "$tmp/out" 2>/dev/null | head -1 || true)
        [ -n "$url" ] && curl -sf "$url/v1/health" >/dev/null && return 0
        url=
        sleep 0.05
    done
    echo "daemon did not start"
    cat "$tmp/log$1"
    exit 1
}

bench_stop_daemon() { kill "$pid"; wait "$pid" || true; pid=; }
