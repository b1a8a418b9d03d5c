#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The S3 gateway (railiod --s3-listen over rados://) against radosgw, on one
# single-host Ceph cluster of its own (tests/harness/ceph.sh --rgw), the same
# clients, one run, stopped on exit (docs/gateway.md, "Against radosgw"):
#   - PUT and GET of large objects with `aws s3 cp`, `curl --aws-sigv4` and
#     `railio put/get s3://` (MB/s, wall clock; GETs into tmpfs where there
#     is one);
#   - CLIENTS concurrent clients (curl) of small objects: PUT then GET,
#     ops/s and per-request p50/p99.
#   bench/gateway.sh [--sizes "256 1024"] [--small-kib 64] [--small-n 50] [--clients 16]
#                    [--index]
# Sizes in MiB (--sizes "": small objects only); --small-n requests per
# client and direction; --index gives the gateway's pool a key index first
# (railio fsck --index: docs/rados.md "The key index"), which every write
# then keeps.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
SIZES="256 1024" SMALL_KIB=64 SMALL_N=50 CLIENTS=16 INDEX=0
while [ $# -gt 0 ]; do
    case $1 in
    --sizes) SIZES=$2; shift 2 ;;
    --small-kib) SMALL_KIB=$2; shift 2 ;;
    --small-n) SMALL_N=$2; shift 2 ;;
    --clients) CLIENTS=$2; shift 2 ;;
    --index) INDEX=1; shift ;;
    *) echo "bench/gateway.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
for t in aws curl python3; do
    command -v $t >/dev/null || { echo "bench/gateway.sh: $t not installed" >&2; exit 1; }
done
[ -x "$BUILD/railiod" ] || { echo "bench/gateway.sh: $BUILD/railiod not built" >&2; exit 1; }
# shellcheck source=bench/gw_lib.sh
. "$ROOT/bench/gw_lib.sh"
gw_bench_start gw 24G
# GETs land in tmpfs where there is one: a file replaced on this VM's disk
# measured the disk's write-back, not the gateway (railio get of 1 GiB at
# 307 MB/s against curl's 757 there, 2026-12-05). Each client's GET writes
# a new file (the previous client's is removed before it): one replacing a
# file holds both until it is done, and on this VM memory touched for the
# first time in a while is slow (docs/bench.md, "This VM's fresh memory").
BACK=$DIR
if [ -d /dev/shm ] && [ -w /dev/shm ]; then
    BACK=$(mktemp -d /dev/shm/rio-gw-back.XXXXXX)
    trap 'rm -rf "$BACK"; gw_bench_cleanup' EXIT
fi
if [ "$INDEX" = 1 ]; then
    "$BUILD/railio" fsck -q --index "$POOL" >&2
    sleep 11 # the gateway reads the marker again within 10 s
    echo "(the gateway's pool has a key index)"
fi

now() { date +%s.%N; }
rate() { python3 -c "import sys; print(f'{$1/1e6/($3-$2):.0f}')"; }

echo "| endpoint | client | size | PUT MB/s | GET MB/s |"
echo "|---|---|---|---|---|"
for ep in radosgw gateway; do
    url=$S3_ENDPOINT
    [ $ep = gateway ] && url=$GW
    aws --endpoint-url "$url" s3 mb s3://bench >/dev/null
    for mib in $SIZES; do
        f=$DIR/obj.$mib
        [ -f "$f" ] || head -c $((mib << 20)) /dev/urandom > "$f"
        bytes=$((mib << 20))
        rm -f "$BACK/back"
        t0=$(now); aws --endpoint-url "$url" s3 cp --only-show-errors "$f" "s3://bench/a$mib"; t1=$(now)
        aws --endpoint-url "$url" s3 cp --only-show-errors "s3://bench/a$mib" "$BACK/back"; t2=$(now)
        cmp -s "$f" "$BACK/back" || echo "$ep aws $mib: bytes differ" >&2
        echo "| $ep | aws s3 cp | $mib MiB | $(rate $bytes $t0 $t1) | $(rate $bytes $t1 $t2) |"
        rm -f "$BACK/back"
        t0=$(now); curl -sf "${SIGV4[@]}" -T "$f" "$url/bench/c$mib" -o /dev/null; t1=$(now)
        curl -sf "${SIGV4[@]}" "$url/bench/c$mib" -o "$BACK/back"; t2=$(now)
        cmp -s "$f" "$BACK/back" || echo "$ep curl $mib: bytes differ" >&2
        echo "| $ep | curl | $mib MiB | $(rate $bytes $t0 $t1) | $(rate $bytes $t1 $t2) |"
        if [ -x "$BUILD/railio" ]; then
            rm -f "$BACK/back"
            t0=$(now)
            if RIO_S3_ENDPOINT=$url env -u AWS_SHARED_CREDENTIALS_FILE "$BUILD/railio" put "s3://bench/r$mib" "$f" >/dev/null 2>&1; then
                t1=$(now)
                RIO_S3_ENDPOINT=$url env -u AWS_SHARED_CREDENTIALS_FILE "$BUILD/railio" get "s3://bench/r$mib" "$BACK/back" >/dev/null 2>&1
                t2=$(now)
                cmp -s "$f" "$BACK/back" || echo "$ep railio $mib: bytes differ" >&2
                echo "| $ep | railio s3:// | $mib MiB | $(rate $bytes $t0 $t1) | $(rate $bytes $t1 $t2) |"
            fi
        fi
        curl -sf "${SIGV4[@]}" -X DELETE "$url/bench/a$mib" -o /dev/null || true
        curl -sf "${SIGV4[@]}" -X DELETE "$url/bench/c$mib" -o /dev/null || true
        curl -sf "${SIGV4[@]}" -X DELETE "$url/bench/r$mib" -o /dev/null || true
        rm -f "$BACK/back"
    done
done

echo
echo "| endpoint | $CLIENTS clients x $SMALL_N, $SMALL_KIB KiB | ops/s | p50 ms | p99 ms |"
echo "|---|---|---|---|---|"
head -c $((SMALL_KIB << 10)) /dev/urandom > "$DIR/small"
for ep in radosgw gateway; do
    url=$S3_ENDPOINT
    [ $ep = gateway ] && url=$GW
    for dir in PUT GET; do
        rm -f "$DIR"/lat.*
        t0=$(now)
        pids=()
        for c in $(seq "$CLIENTS"); do
            (
                for i in $(seq "$SMALL_N"); do
                    if [ $dir = PUT ]; then
                        curl -sf "${SIGV4[@]}" -T "$DIR/small" -o /dev/null -w '%{time_total}\n' \
                            "$url/bench/s$c-$i"
                    else
                        curl -sf "${SIGV4[@]}" -o /dev/null -w '%{time_total}\n' "$url/bench/s$c-$i"
                    fi
                done > "$DIR/lat.$c"
            ) &
            pids+=($!)
        done
        wait "${pids[@]}" # not railiod
        t1=$(now)
        cat "$DIR"/lat.* | python3 -c "
import sys
v = sorted(float(x) for x in sys.stdin if x.strip())
n = len(v)
print(f'| $ep | {\"$dir\"} | {n/($t1-$t0):.0f} | {v[n//2]*1e3:.1f} | {v[min(n-1, n*99//100)]*1e3:.1f} |')"
    done
done
