#!/usr/bin/env bash
# mcf's best-of-chunkings search under a time limit (docs/BENCHMARKS.md,
# "mcf: chunking budget and switches"):
#   TOPO COLLECTIVE --chunks 8 --time-limit BUDGET at 64 MiB, the shared
#   budget (mcf today: floors first, the most promising chunking first, an
#   even share of what is left each, chunkings whose floor cannot win not
#   run) against the old loop, replayed here in the same run: chunkings
#   1, 2, ... 8 in turn, each given all the time left (--min-chunks C
#   --chunks C --time-limit LEFT) until the budget is gone.
# Prints per run the simulated time of the schedule returned, the wall
# seconds and the chunkings run, then the medians of MCF_RUNS (default 3).
# Env: MCF_BUDGET (60), MCF_RUNS (3), MCF_CHUNKS (8), MCF_CASES ("dgx2:broadcast"
# "ndv2:2:alltoall" ...: TOPO:COLLECTIVE pairs, space separated; the collective
# after the last colon).
set -euo pipefail
BUILD=${BUILD:-build}
cli="$BUILD/collsynth"
[ -x "$cli" ] || make --no-print-directory "$cli"
budget=${MCF_BUDGET:-60}
runs=${MCF_RUNS:-3}
nch=${MCF_CHUNKS:-8}
cases=${MCF_CASES:-"dgx2:broadcast"}
size=$((64 * 1024 * 1024))
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sim_of() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.2f" % d["frontier"][0]["simulated_us"])' "$1"; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
for case in $cases; do
    topo=${case%:*}
    coll=${case##*:}
    echo "== $topo $coll, up to $nch chunks of 64 MiB, budget ${budget} s, $runs runs"
    new_us=(); new_s=(); old_us=(); old_s=()
    for r in $(seq "$runs"); do
        # shared budget (this build)
        t0=$(date +%s.%N)
        "$cli" solve "$topo" "$coll" --method mcf --chunks "$nch" --size $size \
            --time-limit "$budget" --json > "$tmp/new.json"
        t1=$(date +%s.%N)
        us=$(sim_of "$tmp/new.json")
        s=$(echo "$t1 - $t0" | bc -l)
        ran=$(python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["stats"]["chunking"]; print("order %s, not run %s, cut short %s" % (c["order"], c["pruned"], c["cut_short"]))' "$tmp/new.json")
        printf '  shared  run %d: %8s us in %6.1f s  (%s)\n' "$r" "$us" "$s" "$ran"
        new_us+=("$us"); new_s+=("$s")
        # the old loop, replayed
        t0=$(date +%s.%N)
        best=""; tried=""
        for C in $(seq "$nch"); do
            left=$(echo "$budget - ($(date +%s.%N) - $t0)" | bc -l)
            if (( $(echo "$left <= 0.05" | bc -l) )); then break; fi
            if "$cli" solve "$topo" "$coll" --method mcf --chunks $C --min-chunks $C \
                --size $size --time-limit "$left" --json > "$tmp/old$C.json" 2>/dev/null; then
                u=$(sim_of "$tmp/old$C.json")
                tried="$tried $C"
                if [ -z "$best" ] || (( $(echo "$u <= $best" | bc -l) )); then best=$u; fi
            else
                break # the old loop stopped at a chunking that timed out
            fi
        done
        t1=$(date +%s.%N)
        s=$(echo "$t1 - $t0" | bc -l)
        printf '  old     run %d: %8s us in %6.1f s  (chunkings run:%s)\n' "$r" "$best" "$s" "$tried"
        old_us+=("$best"); old_s+=("$s")
    done
    mn=$(median "${new_us[@]}"); mo=$(median "${old_us[@]}")
    printf '  median: shared %s us in %.1f s; old loop %s us in %.1f s; old/shared time %.3f\n' \
        "$mn" "$(median "${new_s[@]}")" "$mo" "$(median "${old_s[@]}")" \
        "$(echo "$mo / $mn" | bc -l)"
done
