#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `railio bench rados://` on a fresh single-host cluster of its own
# (tests/harness/ceph.sh: 1 monitor, --osds memstore OSDs, pool "rio"),
# stopped on exit. Options go to the bench (railio bench rados:// --help);
# docs/bench.md and docs/rados.md show its table.
#   bench/rados.sh [--osds N] [bench options, e.g. --sizes 256M,1G --reps 3 --json]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RAILIO=${RAILIO:-$ROOT/build/railio}
OSDS=1
if [ "${1:-}" = --osds ]; then OSDS=$2; shift 2; fi
[ -x "$RAILIO" ] || { echo "bench/rados.sh: $RAILIO not built (RAILIO=path overrides)" >&2; exit 1; }
DIR=$(mktemp -d "${TMPDIR:-/tmp}/rio-rados-bench.XXXXXX")
trap 'bash "$ROOT/tests/harness/ceph.sh" stop "$DIR" >/dev/null 2>&1 || true' EXIT
bash "$ROOT/tests/harness/ceph.sh" start "$DIR" --osds "$OSDS" --pool rio --owner $$ >&2
"$RAILIO" bench "rados://rio?conf=$DIR/ceph.conf" "$@"
