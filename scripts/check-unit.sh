#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Check the example systemd unit (contrib/railiod.service) against the built
# railiod: every --option of its ExecStart is one railiod --help lists, and,
# where systemd-analyze is installed, `systemd-analyze verify` accepts the
# unit (with ExecStart pointing at the built railiod).
#
#   scripts/check-unit.sh RAILIOD SOURCE_DIR
set -euo pipefail

railiod=${1:?usage: check-unit.sh RAILIOD SOURCE_DIR}
src=${2:?usage: check-unit.sh RAILIOD SOURCE_DIR}
unit=$src/contrib/railiod.service
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

status=0
# ExecStart with its continuation lines joined.
exec_start=$(sed -n '/^ExecStart=/,/[^\\]$/p' "$unit" | tr -d '\\\n')
[ -n "$exec_start" ] || { echo "check-unit: no ExecStart= in $unit" >&2; exit 1; }
help=$("$railiod" --help)
for opt in $(grep -oE -- '--[a-z][a-z-]*' <<<"$exec_start" | sort -u); do
    grep -qE -- "(^|[ ,])$opt([ =,]|$)" <<<"$help" ||
        { echo "check-unit: ExecStart uses $opt, which railiod --help does not list" >&2; status=1; }
done

if command -v systemd-analyze >/dev/null 2>&1; then
    sed "s|/usr/sbin/railiod|$(realpath "$railiod")|" "$unit" >"$tmp/railiod.service"
    if ! out=$(systemd-analyze verify --man=no "$tmp/railiod.service" 2>&1); then
        echo "check-unit: systemd-analyze verify: $out" >&2
        status=1
    fi
else
    echo "check-unit: systemd-analyze not installed: the options only"
fi
[ "$status" -eq 0 ] && echo "check-unit: $unit: ExecStart options known to railiod$(command -v systemd-analyze >/dev/null && echo ', systemd-analyze verify passes')"
exit "$status"
