#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The S3 gateway (railiod --s3-listen over rados://) against radosgw, on one
# single-host Ceph cluster of its own (tests/harness/ceph.sh --rgw), the same
# clients, one run, stopped on exit (docs/gateway.md, "Against radosgw"):
#   - PUT and GET of large objects with `aws s3 cp`, `curl --aws-sigv4` and
#     `railio put/get s3://` (MB/s, wall clock, medians of --repeat runs,
#     the two servers taking turns first; the timed GETs go to /dev/null,
#     and one more GET of each object into a file is compared byte for
#     byte, untimed);
#   - CLIENTS concurrent clients (curl) of small objects: PUT then GET,
#     ops/s and per-request p50/p99.
#   bench/gateway.sh [--sizes "256 1024"] [--repeat 3] [--small-kib 64] [--small-n 50]
#                    [--clients 16] [--index]
# Sizes in MiB (--sizes "": small objects only); --small-n requests per
# client and direction; --index gives the gateway's pool a key index first
# (railio fsck --index: docs/rados.md "The key index"), which every write
# then keeps.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
SIZES="256 1024" REPEAT=3 SMALL_KIB=64 SMALL_N=50 CLIENTS=16 INDEX=0
while [ $# -gt 0 ]; do
    case $1 in
    --sizes) SIZES=$2; shift 2 ;;
    --repeat) REPEAT=$2; shift 2 ;;
    --small-kib) SMALL_KIB=$2; shift 2 ;;
    --small-n) SMALL_N=$2; shift 2 ;;
    --clients) CLIENTS=$2; shift 2 ;;
    --index) INDEX=1; shift ;;
    *) echo "bench/gateway.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
case $REPEAT in '' | *[!0-9]* | 0) echo "bench/gateway.sh: --repeat takes a count of 1 or more" >&2; exit 2 ;; esac
for t in aws curl python3; do
    command -v $t >/dev/null || { echo "bench/gateway.sh: $t not installed" >&2; exit 1; }
done
[ -x "$BUILD/railiod" ] || { echo "bench/gateway.sh: $BUILD/railiod not built" >&2; exit 1; }
# shellcheck source=bench/gw_lib.sh
. "$ROOT/bench/gw_lib.sh"
gw_bench_start gw 24G
# The timed GETs go to /dev/null: a file written on this VM's disk measured
# the disk's write-back (railio get of 1 GiB at 307 MB/s against curl's 757,
# 2026-12-05), and one in tmpfs the first touch of memory the VM had handed
# back to its host, which moved single GETs by 2-3x whichever server sent
# them (docs/bench.md, "This VM's fresh memory"). Each object is then read
# once more into a file, untimed, and compared.
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
median() { tr ' ' '\n' | sed '/^$/d' | sort -n | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]}'; }
ratio() { python3 -c "print(f'{$2/$1:.2f}')" 2>/dev/null || echo -; }
ep_url() { if [ "$1" = gateway ]; then echo "$GW"; else echo "$S3_ENDPOINT"; fi; }

# One client's PUT of f as key, then its GET of key to out ("-" for stdout).
client_put() { # client url f key
    case $1 in
    aws) aws --endpoint-url "$2" s3 cp --only-show-errors "$3" "s3://bench/$4" ;;
    curl) curl -sf "${SIGV4[@]}" -T "$3" "$2/bench/$4" -o /dev/null ;;
    railio) RIO_S3_ENDPOINT=$2 env -u AWS_SHARED_CREDENTIALS_FILE "$BUILD/railio" put -q "s3://bench/$4" "$3" ;;
    esac
}
client_get() { # client url key out
    case $1 in
    aws) aws --endpoint-url "$2" s3 cp --only-show-errors "s3://bench/$3" "$4" ;;
    curl) curl -sf "${SIGV4[@]}" "$2/bench/$3" -o "$4" ;;
    railio) RIO_S3_ENDPOINT=$2 env -u AWS_SHARED_CREDENTIALS_FILE "$BUILD/railio" get -q "s3://bench/$3" "$4" ;;
    esac
}

CLIENTS_BIG="aws curl"
[ -x "$BUILD/railio" ] && CLIENTS_BIG="$CLIENTS_BIG railio"
for ep in radosgw gateway; do aws --endpoint-url "$(ep_url $ep)" s3 mb s3://bench >/dev/null; done
echo "(MB/s, medians of $REPEAT; ratio = gateway / radosgw)"
echo
echo "| client | size | radosgw PUT | gateway PUT | PUT ratio | radosgw GET | gateway GET | GET ratio |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
for mib in $SIZES; do
    f=$DIR/obj.$mib
    [ -f "$f" ] || head -c $((mib << 20)) /dev/urandom > "$f"
    bytes=$((mib << 20))
    for cl in $CLIENTS_BIG; do
        declare -A put=() get=()
        key=$cl$mib
        for r in $(seq "$REPEAT"); do
            order="radosgw gateway"
            [ $((r % 2)) = 0 ] && order="gateway radosgw"
            for ep in $order; do
                url=$(ep_url "$ep")
                t0=$(now)
                client_put "$cl" "$url" "$f" "$key" >/dev/null 2>&1 || { echo "$ep $cl $mib: PUT failed" >&2; continue; }
                t1=$(now)
                client_get "$cl" "$url" "$key" - >/dev/null 2>&1 || { echo "$ep $cl $mib: GET failed" >&2; continue; }
                t2=$(now)
                put[$ep]+=" $(rate $bytes $t0 $t1)"
                get[$ep]+=" $(rate $bytes $t1 $t2)"
                if [ "$r" = 1 ]; then
                    rm -f "$BACK/back"
                    client_get "$cl" "$url" "$key" "$BACK/back" >/dev/null 2>&1 &&
                        cmp -s "$f" "$BACK/back" || echo "$ep $cl $mib: bytes differ" >&2
                    rm -f "$BACK/back"
                fi
                curl -sf "${SIGV4[@]}" -X DELETE "$url/bench/$key" -o /dev/null || true
            done
        done
        pr=$(echo "${put[radosgw]:-}" | median) pg=$(echo "${put[gateway]:-}" | median)
        gr=$(echo "${get[radosgw]:-}" | median) gg=$(echo "${get[gateway]:-}" | median)
        name=$cl
        [ "$cl" = aws ] && name="aws s3 cp"
        [ "$cl" = railio ] && name="railio s3://"
        echo "| $name | $mib MiB | ${pr:--} | ${pg:--} | $(ratio "$pr" "$pg") | ${gr:--} | ${gg:--} | $(ratio "$gr" "$gg") |"
        unset put get
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
