#!/usr/bin/env bash
# Copy-capable switches and code (docs/BENCHMARKS.md, "Copy-capable switches
# and code generation"): auto's broadcast on dgx2,copy=1 with and without
# options.codegen (CLI --codegen msccl-xml) at three sizes, and TACOS (what
# auto gave on a plain dgx2) for reference: the simulated time, the chunks,
# switch nodes used, and the median solve seconds of ${RUNS:-3} runs.
# Then an 8-port copy-capable switch's allgather with mcf (2 chunks).
set -euo pipefail
BUILD=${BUILD:-build}
cli="$BUILD/collsynth"
[ -x "$cli" ] || make --no-print-directory "$cli"
RUNS=${RUNS:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# run LABEL ARGS...: median seconds and the result's figures
run() {
    local label=$1; shift
    local secs=()
    for _ in $(seq "$RUNS"); do
        local t0 t1
        t0=$(date +%s.%N)
        "$cli" solve "$@" --quiet --json -o "$tmp/r.json" >/dev/null
        t1=$(date +%s.%N)
        secs+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')")
    done
    local med
    med=$(printf '%s\n' "${secs[@]}" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
    python3 - "$tmp/r.json" "$label" "$med" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); a = d["frontier"][0]; st = d.get("stats") or {}
print("%-44s %9.1f us  C=%-3d nodes=%-2s hold=%-6s solve %s s" % (
    sys.argv[2], a.get("simulated_us", float("nan")), a["chunks"], a.get("switch_nodes", 0),
    st.get("switch_buffer_chunks", "-"), sys.argv[3]))
PY
}
for size in 64MiB 1MiB 64KiB; do
    run "dgx2,copy=1 broadcast $size auto" dgx2,copy=1 broadcast --size "$size"
    run "dgx2,copy=1 broadcast $size auto --codegen" dgx2,copy=1 broadcast --size "$size" --codegen msccl-xml
    run "dgx2 broadcast $size tacos" dgx2 broadcast --method tacos --size "$size"
done
cat >"$tmp/nvls8.json" <<'JSON'
{"name":"nvls8","ranks":8,"switches":[{"name":"nvs","ranks":[0,1,2,3,4,5,6,7],"gbps":150,"alpha_us":0.7,"copy":true}]}
JSON
run "nvls8 allgather mcf C=2 64MiB" "$tmp/nvls8.json" allgather --method mcf --chunks 2 --min-chunks 2 --size 64MiB
run "nvls8 allgather mcf C=2 64MiB --codegen" "$tmp/nvls8.json" allgather --method mcf --chunks 2 --min-chunks 2 --size 64MiB --codegen msccl-xml
