#!/usr/bin/env bash
# `collsynth codegen` on the Slurm hook's 128 x DGX-1 (1024-rank) allgather
# (docs/BENCHMARKS.md, "CLI codegen: streamed output, no sends DOM"): wall
# time, CPU and peak RSS (/usr/bin/time -v) of the whole MSCCL document,
# each run its own process, medians of CLI_CODEGEN_RUNS (default 3).  With
# BASE=/path/to/old/collsynth the old binary runs alternately on the same
# input and must write the same bytes (sha256 compared).
# The input: hook128.json from cluster_bench --topology-out, ag.json from
# `collsynth solve hook128.json allgather --json` (a Result, 2 algorithms,
# ~1M sends each, 117 MB).
set -euo pipefail
BUILD=${BUILD:-build}
cli="$BUILD/collsynth"
[ -x "$cli" ] || make --no-print-directory "$cli"
[ -x "$BUILD/bench/cluster_bench" ] || make --no-print-directory "$BUILD/bench/cluster_bench"
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (apt-get install time)" >&2; exit 1; }
runs=${CLI_CODEGEN_RUNS:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$BUILD/bench/cluster_bench" --topology-out "$work/hook128.json" dgx1cluster:128 >/dev/null
"$cli" solve "$work/hook128.json" allgather --json >"$work/ag.json" 2>/dev/null
echo "input: $(stat -c %s "$work/ag.json") bytes of Result JSON"

args=(codegen "$work/ag.json" --topology "$work/hook128.json" --format msccl-xml
      --runtime msccl-executor --index 1 -o "$work/out.xml")

# one run: prints "wall_seconds peak_kb sha256 cpu_seconds"
measure() {
    /usr/bin/time -v "$1" "${args[@]}" 2>"$work/time.txt" >/dev/null
    local wall kb sum cpu
    wall=$(awk -F': ' '/Elapsed/ {n = split($2, p, ":"); s = 0;
           for (i = 1; i <= n; i++) s = s * 60 + p[i]; print s}' "$work/time.txt")
    kb=$(awk -F': ' '/Maximum resident/ {print $2}' "$work/time.txt")
    sum=$(sha256sum "$work/out.xml" | cut -c1-16)
    cpu=$(awk -F': ' '/User time|System time/ {s += $2} END {print s}' "$work/time.txt")
    echo "$wall $kb $sum $cpu"
}

median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

names=(new)
bins=("$cli")
if [ -n "${BASE:-}" ]; then names=(base new); bins=("$BASE" "$cli"); fi
for ((r = 1; r <= runs; r++)); do
    for k in "${!bins[@]}"; do
        measure "${bins[$k]}" >>"$work/${names[$k]}.txt"
    done
done
for k in "${!names[@]}"; do
    f="$work/${names[$k]}.txt"
    echo "${names[$k]}: wall $(cut -d' ' -f1 "$f" | tr '\n' ' ')s, median $(cut -d' ' -f1 "$f" | median) s;" \
         "CPU median $(cut -d' ' -f4 "$f" | median) s;" \
         "peak RSS median $(cut -d' ' -f2 "$f" | median | awk '{printf "%.0f", $1 / 1024}') MB;" \
         "sha256 $(cut -d' ' -f3 "$f" | sort -u | tr '\n' ' ')"
done
if [ -n "${BASE:-}" ]; then
    a=$(cut -d' ' -f3 "$work/base.txt" | sort -u); b=$(cut -d' ' -f3 "$work/new.txt" | sort -u)
    [ "$a" = "$b" ] && echo "same bytes" || { echo "OUTPUT DIFFERS" >&2; exit 1; }
fi
