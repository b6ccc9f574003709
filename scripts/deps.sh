#!/usr/bin/env bash
# Installs the Debian packages listed in scripts/packages-<set>.txt that are
# missing, so `make run` / `make test` work on a fresh machine.  Needs root
# (or sudo) and Debian's package archive; says exactly what is missing otherwise.
set -u
cd "$(dirname "$0")/.."
missing=()
for set in "$@"; do
    list="scripts/packages-$set.txt"
    [ -f "$list" ] || { echo "deps: no package list $list" >&2; exit 2; }
    while read -r pkg _; do
        case "$pkg" in ''|'#'*) continue ;; esac
        if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
            missing+=("$pkg")
        fi
    done < "$list"
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "deps: installing missing Debian packages: ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then SUDO=""; elif command -v sudo >/dev/null; then SUDO="sudo -n"; else SUDO=none; fi
if [ "$SUDO" = none ]; then
    echo "deps: not root and no sudo; install these yourself: apt-get install ${missing[*]}" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
if ! $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >/tmp/collsynth-apt.log 2>&1; then
    $SUDO apt-get update -q >>/tmp/collsynth-apt.log 2>&1
    if ! $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >>/tmp/collsynth-apt.log 2>&1; then
        echo "deps: apt-get could not install: ${missing[*]} (log: /tmp/collsynth-apt.log):" >&2
        tail -n 5 /tmp/collsynth-apt.log >&2
        exit 1
    fi
fi
echo "deps: installed ${missing[*]}"
