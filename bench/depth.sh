#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Issue 16 item 6 (seed 004's question on every backend): depth 8 against
# depth 1, at batch 1 and batch 16, for file://, s3://, rados:// and
# railio://, one table. Each row is bench/putget.c against the backend's URL
# with ?depth=1 or ?depth=8 (the engine's ops in flight per path, the same
# option on every backend), COUNT objects per call (1: rio_put/rio_get, 16:
# one rio_batch), repeated until each sample moved at least 256 MiB (64
# with --quick), every GET compared byte for byte, client CPU per GiB;
# medians of N. Peers: railiod of this build and a Ceph cluster with radosgw
# (tests/harness/ceph.sh), started here and stopped on exit; file:// writes
# under a temp dir on disk. Only 127.0.0.1 is used. docs/bench.md ("Depth 8
# against depth 1 on every backend") reads the table.
#
#   bench/depth.sh [--only file,s3,rados,railio] [--repeat N] [--quick]
#                  [--sizes LIST] [--file-dir DIR] [--out FILE]
#
#   --only LIST     backends (default file,s3,rados,railio)
#   --repeat N      runs per row, the median shown (default 3)
#   --quick         1 run, samples of 64 MiB
#   --sizes LIST    object sizes (default 4M, seed 004's: one 4 MiB chunk)
#   --file-dir DIR  file:// store root (default a temp dir under TMPDIR or /var/tmp)
#   --out FILE      append the markdown table to FILE as well
# Environment: RIO_BUILD_DIR (default build/), RAILIO, RAILIOD.
set -euo pipefail
# shellcheck source=bench/peers_lib.sh
. "$(dirname "$0")/peers_lib.sh"

usage() { sed -n '3,23s/^# \{0,1\}//p' "$0"; }

REPEAT=3 QUICK=0 ONLY=file,s3,rados,railio SIZES=4M FILE_DIR="" MIN=256
while [ $# -gt 0 ]; do
    case "$1" in
    --only) ONLY=${2:?--only needs a list}; shift ;;
    --repeat) REPEAT=${2:?--repeat needs N}; shift ;;
    --quick) QUICK=1 ;;
    --sizes) SIZES=${2:?--sizes needs a list}; shift ;;
    --file-dir) FILE_DIR=${2:?--file-dir needs a directory}; shift ;;
    --out) OUT=${2:?--out needs a file}; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
    esac
    shift
done
if ! [[ "$REPEAT" =~ ^[0-9]+$ ]] || [ "$REPEAT" -lt 1 ] || [ "$REPEAT" -gt 64 ]; then
    die "--repeat must be 1..64"
fi
for s in ${ONLY//,/ }; do
    [[ "$s" =~ ^(file|s3|rados|railio)$ ]] || die "--only: '$s' is not one of file,s3,rados,railio"
done
only() { [[ ",$ONLY," == *",$1,"* ]]; }
MODE="repeat $REPEAT"
if [ "$QUICK" = 1 ]; then REPEAT=1 MIN=64 MODE="--quick (1 run, 64 MiB samples)"; fi

OWN_FILE_DIR=""
cleanup() {
    [ -n "$OWN_FILE_DIR" ] && rm -rf "$OWN_FILE_DIR"
    peers_cleanup
}
trap cleanup EXIT
trap 'exit 130' INT TERM
peers_init

# URL with depth=D added to its query.
with_depth() {
    case "$1" in
    *\?*) echo "$1&depth=$2" ;;
    *) echo "$1?depth=$2" ;;
    esac
}

r2() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 == 0) print "-"; else printf "%.2f\n", a / b }'; }

# The rows of one backend at URL.
backend_rows() {
    local name=$1 url=$2 s b n p1 pc1 g1 gc1 p8 pc8 g8 gc8
    for s in ${SIZES//,/ }; do
        b=$(to_bytes "$s")
        for n in 1 16; do
            if ! fits $((b * n)) 0 4; then
                emit "| $name | $(human "$b") | $n | skipped: not enough memory | | | | | | |"
                continue
            fi
            read -r p1 pc1 g1 gc1 < <(putget "$(with_depth "$url" 1)" "$s" "$REPEAT" "$n" "$MIN")
            read -r p8 pc8 g8 gc8 < <(putget "$(with_depth "$url" 8)" "$s" "$REPEAT" "$n" "$MIN")
            check_rates "$name $s batch $n depth 1" "$p1" "$pc1" "$g1" "$gc1"
            check_rates "$name $s batch $n depth 8" "$p8" "$pc8" "$g8" "$gc8"
            emit "$(awk -v nm="$name" -v h="$(human "$b")" -v n="$n" -v g1="$g1" -v g8="$g8" \
                -v p1="$p1" -v p8="$p8" -v gc1="$gc1" -v gc8="$gc8" -v pc1="$pc1" -v pc8="$pc8" \
                -v rg="$(r2 "$g8" "$g1")" -v rp="$(r2 "$p8" "$p1")" 'BEGIN {
                printf "| %s | %s | %d | %.0f | %.0f | %s | %.0f | %.0f | %s | %.2f / %.2f | %.2f / %.2f |\n",
                    nm, h, n, g1, g8, rg, p1, p8, rp, gc1, gc8, pc1, pc8 }')"
        done
    done
}

emit "## bench/depth.sh, $MODE"
emit_setup
emit "" "bench/putget.c against each backend's URL with \`depth=1\` and \`depth=8\` (nothing else set), batch = objects per call (1: rio_put/rio_get; 16: one rio_batch), each sample repeated to at least $MIN MiB, every GET compared byte for byte; medians of $REPEAT; CPU is the client's per GiB (depth 1 / depth 8). railio:// and rados:// and s3:// servers on 127.0.0.1 of this machine." ""
emit "| backend | object | batch | GET MB/s d1 | GET MB/s d8 | GET d8/d1 | PUT MB/s d1 | PUT MB/s d8 | PUT d8/d1 | GET CPU s/GiB d1 / d8 | PUT CPU s/GiB d1 / d8 |" \
    "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|"
if only file; then
    if [ -z "$FILE_DIR" ]; then
        OWN_FILE_DIR=$(mktemp -d "${TMPDIR:-/var/tmp}/rio-depth-file.XXXXXX")
        FILE_DIR=$OWN_FILE_DIR
    fi
    backend_rows file:// "file://$(readlink -f "$FILE_DIR")"
fi
if only railio; then
    start_railiod 4G
    backend_rows railio:// "$RAILIO_URL"
    stop_railiod
fi
if only s3 || only rados; then
    st=0
    start_ceph || st=$?
    if [ "$st" = 0 ]; then
        only s3 && backend_rows s3:// "s3://$S3_BUCKET?endpoint=$S3_ENDPOINT"
        only rados && backend_rows rados:// "$RADOS_URL"
    elif [ "$st" = 77 ]; then
        emit "| s3://, rados:// | | | skipped: Ceph (ceph-mon, ceph-osd, radosgw) not installed | | | | | | | |"
    else
        die "the Ceph cluster did not start"
    fi
fi
emit "" "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
