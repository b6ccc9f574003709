#!/usr/bin/env bash
# The margin of method hierarchical over flat TACOS on one case (issue 11:
# >= 20x faster to synthesize), measured in the same run, several times, with
# the load average beside each run (docs/BENCHMARKS.md, "Hierarchical vs
# flat TACOS margin").  Each round runs
#     hier_bench SPEC COLL HIER_RUNS TACOS_RUNS
# (medians of HIER_RUNS hierarchical and TACOS_RUNS TACOS syntheses, ratio of
# the two) and prints its SUMMARY line; then the median of the rounds'
# ratios.  BASE=path/to/another/build also runs that build's hier_bench in
# every round, alternating with this one, for a same-run before/after.
#   HIER_MARGIN_SPEC (dgxh100:128), HIER_MARGIN_COLL (allgather),
#   HIER_MARGIN_ROUNDS (3), HIER_RUNS (5), TACOS_RUNS (3), BUILD (build)
set -euo pipefail
BUILD=${BUILD:-build}
spec=${HIER_MARGIN_SPEC:-dgxh100:128}
coll=${HIER_MARGIN_COLL:-allgather}
rounds=${HIER_MARGIN_ROUNDS:-3}
hruns=${HIER_RUNS:-5}
truns=${TACOS_RUNS:-3}
bench="$BUILD/bench/hier_bench"
[ -x "$bench" ] || make --no-print-directory "$bench"
builds=("$BUILD")
[ -n "${BASE:-}" ] && builds+=("$BASE")
echo "== $spec $coll: hier_bench $spec $coll $hruns $truns, $rounds rounds; $(nproc) cores"
declare -A ratios
for r in $(seq "$rounds"); do
    for b in "${builds[@]}"; do
        load=$(cut -d' ' -f1 /proc/loadavg)
        out=$("$b/bench/hier_bench" "$spec" "$coll" "$hruns" "$truns")
        line=$(echo "$out" | grep SUMMARY)
        x=$(echo "$line" | sed -n 's/.*: \([0-9.]*\)x faster.*/\1/p')
        h=$(echo "$line" | sed -n 's/.*hierarchical \([0-9.]*\) s.*/\1/p')
        t=$(echo "$line" | sed -n 's/.*tacos \([0-9.]*\) s.*/\1/p')
        # process CPU time (builds without the CPU line print "-")
        cpu=$(echo "$out" | grep '^  CPU' | sed -n 's/.*hierarchical \([0-9.]*\) s, tacos \([0-9.]*\) s.*/\1 \2/p')
        printf 'round %d  %-28s load %5s  hierarchical %6.3f s  tacos %6.3f s  %5.1fx  (CPU: %s)\n' \
            "$r" "$b" "$load" "$h" "$t" "$x" "${cpu:--}"
        ratios[$b]+="$x "
    done
done
for b in "${builds[@]}"; do
    med=$(echo "${ratios[$b]}" | tr ' ' '\n' | grep . | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')
    echo "median ratio ($b): ${med}x"
done
