#!/usr/bin/env bash
# Runs Check test binaries, one after another, and prints one closing line
# "N passed, N failed, N skipped" (counting Check's individual tests; a skip
# is a line "RUNNER: SKIPPED what: why" that a runner prints when something
# it needs is missing, e.g. nvcc).  Skips are listed before the closing line
# even for passing runners, whose other output is dropped.  Exits non-zero
# if any test failed or any binary crashed or timed out.
#   VALGRIND=1   run each binary under valgrind --leak-check=full (no fork)
#   TEST_TIMEOUT seconds per binary (default 900)
#   CK_TIMEOUT_MULTIPLIER scales each test's own timeout (default 2)
set -u
passed=0; failed=0; broken=(); skips=()
timeout_s=${TEST_TIMEOUT:-900}
export CK_DEFAULT_TIMEOUT=${CK_DEFAULT_TIMEOUT:-300}
# Check's per-test timeouts (tcase_set_timeout) guard against hangs; they are
# not performance limits.  Doubled, a slow or loaded 2-core machine (CI) does
# not turn a test at half its limit here into a timeout there.
export CK_TIMEOUT_MULTIPLIER=${CK_TIMEOUT_MULTIPLIER:-2}
for t in "$@"; do
    name=$(basename "$t")
    log=$(mktemp)
    start=$(date +%s.%N)
    if [ "${VALGRIND:-0}" = 1 ]; then
        CK_FORK=no timeout "$timeout_s" valgrind -q --error-exitcode=99 --leak-check=full \
            --errors-for-leak-kinds=definite "$t" >"$log" 2>&1
    else
        timeout "$timeout_s" "$t" >"$log" 2>&1
    fi
    rc=$?
    secs=$(printf '%.1f' "$(echo "$(date +%s.%N) - $start" | bc)")
    summary=$(grep -E '^[0-9]+%: Checks: [0-9]+' "$log" | tail -n 1)
    while IFS= read -r line; do
        skips+=("$line")
    done < <(grep -E '^[A-Za-z0-9_]+: SKIPPED' "$log")
    if [ -n "$summary" ]; then
        checks=$(sed -E 's/.*Checks: ([0-9]+).*/\1/' <<<"$summary")
        fails=$(sed -E 's/.*Failures: ([0-9]+), Errors: ([0-9]+).*/\1 \2/' <<<"$summary" | awk '{print $1+$2}')
        passed=$((passed + checks - fails)); failed=$((failed + fails))
    fi
    if [ $rc -ne 0 ] || [ -z "$summary" ]; then
        broken+=("$name")
        [ -z "$summary" ] && failed=$((failed + 1))
        echo "---- $name (exit $rc, ${secs}s) ----"
        grep -v -E '^[0-9]+%: Checks' "$log" | tail -n 40
        echo "$summary"
    else
        echo "$name: $summary (${secs}s)"
    fi
    rm -f "$log"
done
[ ${#broken[@]} -gt 0 ] && echo "failing: ${broken[*]}"
for line in "${skips[@]}"; do
    echo "skipped: $line"
done
echo "$passed passed, $failed failed, ${#skips[@]} skipped"
[ ${#broken[@]} -eq 0 ] && [ $failed -eq 0 ]
