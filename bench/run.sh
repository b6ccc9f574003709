#!/usr/bin/env bash
# Runs every benchmark script bench/*.sh (except this one) in name order.
set -u
cd "$(dirname "$0")/.."
status=0
for s in bench/*.sh; do
    [ "$(basename "$s")" = run.sh ] && continue
    echo "#### $s"
    bash "$s" || { echo "#### $s failed"; status=1; }
done
exit $status
