#!/usr/bin/env bash
# A herd of Slurm launch hooks (docs/BENCHMARKS.md, "Issue 10: memory and
# time per send"): HERD_HOOKS (128) hooks of one allocation start at once
# against one collsynthd.  The allocation is 128 DGX-1 nodes of
# clients/slurm/cluster.example.json (1024 ranks, NICs on one fabric switch),
# its topology composed by the hook's own code (build/bench/herd_topology);
# HERD_TOPO=NAME sends a builtin name instead.  Each hook does
# what clients/slurm/collsynth_spank.c does for a collective: POST /v1/synthesize?view=summary with method auto and wait_s
# (its budget minus half a second), poll the job (?view=summary) every 0.2 s
# if the POST came back 202, then GET its node's MSCCL slice
# (?format=msccl-xml&alg=0&runtime=R&ranks=8i-8i+7).  Per hook: the time from
# its POST to its slice, and the slice's status.  Cold: a fresh daemon (the
# herd triggers the synthesis); warm: the same herd again.  The daemon's
# counters say how many syntheses ran (must be 1 per collective).
#
#   bash bench/herd.sh            HERD_COLLECTIVES="allgather reducescatter allreduce"
#                                 HERD_BUDGET_S=30 HERD_RUNTIME=msccl-executor
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
TOPO=${HERD_TOPO:-}
HOOKS=${HERD_HOOKS:-128}
GPN=${HERD_GPUS_PER_NODE:-8}
BUDGET=${HERD_BUDGET_S:-30}
RUNTIME=${HERD_RUNTIME:-msccl-executor}
COLLS=${HERD_COLLECTIVES:-"allgather reducescatter allreduce"}
bin="$BUILD/collsynthd"
[ -x "$bin" ] || make --no-print-directory "$bin"
[ -x "$BUILD/bench/herd_topology" ] || make --no-print-directory "$BUILD/bench/herd_topology"
tmp=$(mktemp -d /tmp/collsynthd-herd.XXXXXX)
pid=
main=$BASHPID
# only the main shell cleans up (a backgrounded hook inherits the trap)
cleanup() {
    [ "$BASHPID" = "$main" ] || return 0
    if [ -n "$pid" ]; then kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; fi
    rm -rf "$tmp"
}
trap cleanup EXIT
if [ -n "$TOPO" ]; then
    printf '"%s"' "$TOPO" >"$tmp/topo.json"
else
    TOPO="cluster.example.json gpu[001-$(printf %03d "$HOOKS")] (DGX-1 nodes)"
    sed "s/gpu\[001-032\]/gpu[001-$(printf %03d "$HOOKS")]/" clients/slurm/cluster.example.json \
        >"$tmp/cluster.json"
    "$BUILD/bench/herd_topology" "$tmp/cluster.json" "gpu[001-$(printf %03d "$HOOKS")]" \
        >"$tmp/topo.json"
fi
. "$(dirname "$0")/lib/daemon.sh"
bench_start_daemon "" --max-connections 1024

now() { date +%s.%N; }

# hook I COLL OUTFILE: one hook's exchange for one collective
hook() {
    local i=$1 coll=$2 out=$3 t0 dl body doc key job st code
    t0=$(now)
    dl=$(echo "$t0 + $BUDGET" | bc)
    { printf '{"topology":'; cat "$tmp/topo.json"
      printf ',"collective":{"kind":"%s"},"method":"auto","options":{"wait_s":%s}}' "$coll" \
             "$(echo "$BUDGET - 0.5" | bc)"; } >"$tmp/body.$coll.$i"
    doc=$(curl -s --max-time "$BUDGET" -XPOST "$url/v1/synthesize?view=summary" \
          -H 'Content-Type: application/json' -d @"$tmp/body.$coll.$i" || true)
    key=$(printf '%s' "$doc" | grep -o '"key":"[0-9a-f]\{64\}"' | head -1 | cut -d'"' -f4 || true)
    job=$(printf '%s' "$doc" | grep -o '"job":"[0-9a-f]*"' | head -1 | cut -d'"' -f4 || true)
    if ! printf '%s' "$doc" | grep -q '"frontier"'; then
        st=
        while [ -n "$job" ] && [ "$(echo "$(now) < $dl - 0.3" | bc)" = 1 ]; do
            doc=$(curl -s --max-time 5 "$url/v1/jobs/$job?view=summary" || true)
            st=$(printf '%s' "$doc" | grep -o '"status":"[a-z]*"' | head -1 | cut -d'"' -f4 || true)
            [ "$st" = done ] || [ "$st" = failed ] || [ "$st" = cancelled ] && break
            sleep 0.2
        done
        if [ "$st" != done ]; then
            echo "$i $(echo "$(now) - $t0" | bc) nores:${st:-none} 0" >"$out"
            return
        fi
    fi
    local lo=$((i * GPN)) hi=$((i * GPN + GPN - 1)) left
    left=$(echo "$dl - $(now)" | bc)
    if [ "$(echo "$left <= 0" | bc)" = 1 ]; then
        echo "$i $(echo "$(now) - $t0" | bc) budget 0" >"$out"
        return
    fi
    code=$(curl -s --max-time "$left" -o "$tmp/xml.$coll.$i" -w '%{http_code}' \
           "$url/v1/results/$key?format=msccl-xml&alg=0&runtime=$RUNTIME&ranks=$lo-$hi" || true)
    echo "$i $(echo "$(now) - $t0" | bc) $code $(wc -c <"$tmp/xml.$coll.$i" 2>/dev/null || echo 0)" >"$out"
}

herd() {  # LABEL
    local label=$1
    for coll in $COLLS; do
        rm -f "$tmp"/r.*
        local t0 t1
        t0=$(now)
        local hooks=()
        for ((i = 0; i < HOOKS; i++)); do
            hook "$i" "$coll" "$tmp/r.$i" &
            hooks+=($!)
        done
        wait "${hooks[@]}"   # the hooks, not the daemon
        t1=$(now)
        cat "$tmp"/r.* >"$tmp/all"
        local ok max med
        ok=$(awk '$3 == 200' "$tmp/all" | wc -l)
        max=$(awk '{print $2}' "$tmp/all" | sort -g | tail -1)
        med=$(awk '{print $2}' "$tmp/all" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
        echo "$label $coll: $ok/$HOOKS slices 200 within ${BUDGET}s; post-to-slice median ${med}s max ${max}s;" \
             "statuses $(awk '{print $3}' "$tmp/all" | sort | uniq -c | awk '{printf "%s x%s ", $2, $1}')" \
             "slice bytes median $(awk '{print $4}' "$tmp/all" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}');" \
             "herd wall $(echo "$t1 - $t0" | bc)s"
        local bad
        bad=$(awk '$3 != 200 {print; exit}' "$tmp/all")
        [ -z "$bad" ] || echo "   first failure: $bad"
    done
    curl -s "$url/metrics" | awk '/^collsynth_syntheses_total\{outcome="started"\}/ {print "   syntheses_started " $2}
                                   /^collsynth_coalesced_total/ {print "   coalesced " $2}'
}

echo "== machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== $HOOKS hooks, $TOPO, method auto, budget ${BUDGET}s, $RUNTIME slices of $GPN ranks"
herd cold
herd warm
