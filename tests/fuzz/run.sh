#!/usr/bin/env bash
# Runs libFuzzer harnesses one after the other (make fuzz; docs/qa.md):
#   tests/fuzz/run.sh BUILD SECONDS NAME...
# Each runs for SECONDS from its seed corpus tests/fuzz/corpus/NAME/ (read
# only: new inputs go to BUILD/fuzz/work-NAME/), in one process (the harnesses
# are single-threaded; run several `make fuzz FUZZ=...` to use more cores).
# Crashes and failed properties are saved as BUILD/fuzz/NAME-crash-*; the
# exit status is non-zero when any harness found one.  A last line per
# harness gives its runs and executions per second.
set -u
cd "$(dirname "$0")/../.."
build=$1 seconds=$2
shift 2
# Longest input per harness: enough for every structure the harness builds.
declare -A max_len=([framing]=8192 [request]=4096 [topology]=4096 [codec]=8192 [algorithm]=8192)
status=0
summary=()
for name in "$@"; do
    bin="$build/fuzz/fuzz_$name"
    [ -x "$bin" ] || { echo "fuzz: no harness $bin" >&2; status=1; continue; }
    work="$build/fuzz/work-$name"
    mkdir -p "$work" "tests/fuzz/corpus/$name"
    dict=()
    [ -f "tests/fuzz/$name.dict" ] && dict=("-dict=tests/fuzz/$name.dict")
    log="$build/fuzz/$name.log"
    echo "fuzz: $name for ${seconds}s (log $log)"
    ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}" \
    "$bin" "$work" "tests/fuzz/corpus/$name" "${dict[@]}" \
        -max_total_time="$seconds" -max_len="${max_len[$name]:-4096}" -timeout=20 \
        -rss_limit_mb=2560 -print_final_stats=1 \
        -artifact_prefix="$build/fuzz/$name-" >"$log" 2>&1
    rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
    if [ $rc -ne 0 ]; then
        status=1
        grep -m1 -E 'property failed|ERROR: (AddressSanitizer|libFuzzer)|runtime error' "$log"
        summary+=("$name: FAILED after ${runs:-?} runs ($(ls -t "$build/fuzz/$name-"* 2>/dev/null | head -1))")
    else
        summary+=("$name: ok, ${runs:-?} runs, ${rate:-?} exec/s, ${cov:-cov: ?}")
    fi
done
printf 'fuzz: %s\n' "${summary[@]}"
exit $status
