#!/usr/bin/env bash
# Auto's broadcast on copy-capable switches for code (options.codegen):
# schedule and wall time per size, median of N runs, for one or more CLI
# binaries (a baseline built from an older commit next to the current one).
#   bench/auto_unicast_chunking.sh [N] [CLI ...]   (default: 3 build/collsynth)
# Figures: docs/BENCHMARKS.md "Auto's unicast broadcast on mcf's shared budget".
set -euo pipefail
n=${1:-3}
shift || true
clis=("$@")
[ ${#clis[@]} -gt 0 ] || clis=(build/collsynth)
for cli in "${clis[@]}"; do
  for size in 64MiB 1MiB 64KiB; do
    walls=()
    sched=""
    for _ in $(seq "$n"); do
      t0=$(date +%s.%N)
      out=$("$cli" solve dgx2,copy=1 broadcast --codegen msccl-xml --size "$size" 2>&1)
      t1=$(date +%s.%N)
      walls+=("$(echo "$t1 - $t0" | bc)")
      sched=$(grep -o 'schedule [0-9.]* us' <<<"$out" | head -1)
      chunks=$(grep -o 'mcf unicast: [0-9]* chunks\?' <<<"$out" | head -1)
    done
    med=$(printf '%s\n' "${walls[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    printf '%-28s %-6s %-22s %-24s median wall %.2f s\n' "$cli" "$size" "$sched" "$chunks" "$med"
  done
done
