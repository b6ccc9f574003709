#!/usr/bin/env bash
# mcf's zero-buffer switch nodes (options.zero_buffer, --zero-buffer) against
# the default store-and-forward node, in the same run (docs/BENCHMARKS.md,
# "mcf: chunking budget and switches"): per case, the simulated time of the
# schedule, the median solve seconds of MCF_RUNS (3), the copies out of the
# switch nodes and the longest a node holds a chunk (stats.switch_hold_us).
# The zero-buffer schedules' holding is also checked by the verifier's
# algorithm_switch_hold in tests/test_switch_copy.c.
set -euo pipefail
BUILD=${BUILD:-build}
cli="$BUILD/collsynth"
[ -x "$cli" ] || make --no-print-directory "$cli"
runs=${MCF_RUNS:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# 4 ranks on a copy switch: chunk 0 at rank 0 for ranks 2, 3; chunks 1-3 at
# rank 3 for ranks 0 / 1 / 0, 1, 2 (tests/test_switch_copy.c)
echo '{"name":"star4c","ranks":4,"switches":[{"name":"sw","ranks":[0,1,2,3],"gbps":1,"alpha_us":0,"copy":true}]}' > "$tmp/star4c.json"
echo '{"kind":"custom","global_chunks":4,"pre":[[0,0],[1,3],[2,3],[3,3]],"post":[[0,2],[0,3],[1,0],[2,1],[3,0],[3,1],[3,2]]}' > "$tmp/c4.json"
cases=(
    "dgx2,copy=1|broadcast|8|64MiB|60"
    "dgxa100:2,copy=1|broadcast|2|64MiB|60"
    "rfs3d:2x2x4,copy=1|broadcast|2|1MiB|10"
    "$tmp/star4c.json|$tmp/c4.json|1|1000|60"
)
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
printf '%-22s %-10s %-6s %12s %9s %7s %9s\n' topology collective mode "sim us" "solve s" copies "hold us"
for c in "${cases[@]}"; do
    IFS='|' read -r topo coll chunks size limit <<< "$c"
    for mode in store zero; do
        flag=""; [ $mode = zero ] && flag="--zero-buffer"
        secs=()
        for r in $(seq "$runs"); do
            t0=$(date +%s.%N)
            "$cli" solve "$topo" "$coll" --method mcf --chunks "$chunks" --min-chunks "$chunks" \
                --size "$size" --time-limit "$limit" --json $flag > "$tmp/r.json"
            t1=$(date +%s.%N)
            secs+=("$(echo "$t1 - $t0" | bc -l)")
        done
        python3 - "$tmp/r.json" "$(basename "$topo")" "$(basename "$coll")" "$mode" "$(median "${secs[@]}")" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); s = d["stats"]
print("%-22s %-10s %-6s %12.3f %9.2f %7s %9.3f" % (sys.argv[2][:22], sys.argv[3][:10], sys.argv[4],
      d["frontier"][0]["simulated_us"], float(sys.argv[5]), s.get("switch_copies", 0),
      s.get("switch_hold_us", 0.0)))
PY
    done
done
