#!/usr/bin/env bash
# Timed schedules: the simulator runs them as soon as they can (simulate.h,
# docs/model.md "Simulation"), not at their start_us.  Per method and
# instance: the schedule's own completion time (frontier "scheduled_us", its
# latest end_us) against the simulated one ("simulated_us", at the same
# size), and their ratio; for a verified schedule simulated <= scheduled
# (tests/test_simulate.c).  Deterministic figures (no timing), one run each.
# Env: SIM_SIZE (1MiB).
set -euo pipefail
BUILD=${BUILD:-build}
cli="$BUILD/collsynth"
[ -x "$cli" ] || make --no-print-directory "$cli"
size=${SIM_SIZE:-1MiB}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '%-8s %-14s %-10s %6s %14s %14s %9s\n' method topology collective chunks "scheduled us" "simulated us" "sim/sched"
for c in "mcf dgx1 alltoall 2" "mcf dgx1 allgather 2" "mcf ring:8 broadcast 4" "mcf dgx2,copy=1 broadcast 8" \
         "mcf ndv2:2 alltoall 1" \
         "tacos dgx1 allgather 2" "tacos dgx2 allgather 2" "tacos torus2d:4x4 allgather 2" \
         "tacos ndv2:2 alltoall 1" "tacos dgxa100:2 allgather 1"; do
    read -r m topo coll chunks <<< "$c"
    extra=""; [ "$m" = mcf ] && extra="--min-chunks $chunks --time-limit 60"
    "$cli" solve "$topo" "$coll" --method "$m" --chunks "$chunks" --size "$size" $extra --json > "$tmp/r.json"
    python3 - "$tmp/r.json" "$m" "$topo" "$coll" "$chunks" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for f in d["frontier"][:1]:
    sc, si = f.get("scheduled_us"), f.get("simulated_us")
    print("%-8s %-14s %-10s %6s %14s %14.3f %9s" % (sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5],
          "%.3f" % sc if sc else "-", si, "%.4f" % (si / sc) if sc else "-"))
PY
done
