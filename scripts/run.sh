#!/usr/bin/env bash
# `make run`: the main job on the embedded defaults.  Starts collsynthd on the
# SQLite store when it is built; otherwise an offline CLI demo.
set -u
cd "$(dirname "$0")/.."
B=${BUILD:-build}
if [ -x "$B/collsynthd" ]; then
    exec "$B/collsynthd" --data-dir "${COLLSYNTH_DATA_DIR:-./collsynth-data}"
fi
exec "$B/collsynth" topo show dgx1
