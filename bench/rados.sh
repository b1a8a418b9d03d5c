#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `railio bench rados://` on a fresh single-host cluster of its own
# (tests/harness/ceph.sh: 1 monitor, --osds memstore OSDs, pool "rio"),
# stopped on exit. Options go to the bench (railio bench rados:// --help);
# docs/bench.md and docs/rados.md show its table.
#   bench/rados.sh [--osds N] [--vs RAILIO2 [--rounds N]] [bench options, e.g. --sizes 256M,1G --reps 3 --json]
# --vs: an A/B run on the one cluster: RAILIO (this build) and RAILIO2 (e.g.
# another checkout's build/railio) take turns, N rounds (default 3), each run
# headed by "## round R: PATH, load average L" (the machine's load when it
# started), so that two builds are compared in the same minutes.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RAILIO=${RAILIO:-$ROOT/build/railio}
OSDS=1
VS=
ROUNDS=3
while [ $# -gt 0 ]; do
    case $1 in
    --osds) OSDS=$2; shift 2 ;;
    --vs) VS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    *) break ;;
    esac
done
case $ROUNDS in '' | *[!0-9]*) echo "bench/rados.sh: --rounds needs a number" >&2; exit 2 ;; esac
if [ "$ROUNDS" -lt 1 ] || [ "$ROUNDS" -gt 100 ]; then
    echo "bench/rados.sh: --rounds must be 1 to 100" >&2
    exit 2
fi
for b in "$RAILIO" ${VS:+"$VS"}; do
    [ -x "$b" ] || { echo "bench/rados.sh: $b not built (RAILIO=path overrides; --vs names the other)" >&2; exit 1; }
done
DIR=$(mktemp -d "${TMPDIR:-/tmp}/rio-rados-bench.XXXXXX")
trap 'bash "$ROOT/tests/harness/ceph.sh" stop "$DIR" >/dev/null 2>&1 || true' EXIT
bash "$ROOT/tests/harness/ceph.sh" start "$DIR" --osds "$OSDS" --pool rio --owner $$ >&2
URL="rados://rio?conf=$DIR/ceph.conf"
if [ -z "$VS" ]; then
    "$RAILIO" bench "$URL" "$@"
    exit
fi
for r in $(seq 1 "$ROUNDS"); do
    for b in "$RAILIO" "$VS"; do
        echo "## round $r: $b, load average $(cut -d' ' -f1-3 /proc/loadavg)"
        "$b" bench "$URL" "$@"
    done
done
