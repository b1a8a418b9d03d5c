#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Small objects through radosgw and one or more gateways (railiod
# --s3-listen over rados://) on one single-host Ceph cluster of its own,
# in alternating rounds so that a shared machine's load falls on all of
# them alike (docs/bench.md, "The S3 gateway against radosgw"). For each
# endpoint and direction: ops/s, p50/p99 per request, and what one request
# cost the endpoint's daemon and the OSD in CPU (ms, from /proc; 10 ms
# ticks, so only means over many requests mean anything) and in context
# switches of the daemon's threads.
#   bench/gateway-small.sh [--builds "DIR..."] [--clients 16] [--n 20]
#                          [--rounds 2] [--kib 64] [--keepalive] [--head-cache D]
# --builds: build directories, one gateway each (default: ./build); the
# same directory twice compares a build with itself (the noise).
# --keepalive: each client's GETs are one curl process on one connection
# (by default, as bench/gateway.sh: one process and connection a request).
# --head-cache: the gateways' --s3-head-cache (default theirs, 1s: a GET
# rarely finds the PUT's entry; 1m: most GETs do, slots permitting).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILDS=$ROOT/build CLIENTS=16 N=20 ROUNDS=2 KIB=64 KEEPALIVE=0 HC=()
while [ $# -gt 0 ]; do
    case $1 in
    --builds) BUILDS=$2; shift 2 ;;
    --clients) CLIENTS=$2; shift 2 ;;
    --n) N=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --kib) KIB=$2; shift 2 ;;
    --keepalive) KEEPALIVE=1; shift ;;
    --head-cache) HC=(--s3-head-cache "$2"); shift 2 ;;
    *) echo "bench/gateway-small.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
for t in curl python3; do
    command -v $t >/dev/null || { echo "bench/gateway-small.sh: $t not installed" >&2; exit 1; }
done
DIR=$(mktemp -d "${TMPDIR:-/tmp}/rio-gw-small.XXXXXX")
GWS=()
cleanup() {
    for p in "${GWS[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
    bash "$ROOT/tests/harness/ceph.sh" stop "$DIR/ceph" >/dev/null 2>&1 || true
    rm -rf "$DIR"
}
trap cleanup EXIT
RGWPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
bash "$ROOT/tests/harness/ceph.sh" start "$DIR/ceph" --pool rio --memstore 8G --rgw "$RGWPORT" \
    --owner $$ >&2
# shellcheck disable=SC1091
. "$DIR/ceph/s3.env" >/dev/null
printf '%s %s *\n' "$S3_ACCESS_KEY" "$S3_SECRET_KEY" > "$DIR/keys"
chmod 600 "$DIR/keys"
URLS=("$S3_ENDPOINT") NAMES=(radosgw) PIDS=("$(pgrep -f "radosgw.*$DIR" | head -1)")
k=0
for b in $BUILDS; do
    k=$((k + 1))
    [ -x "$b/railiod" ] || { echo "bench/gateway-small.sh: $b/railiod not built" >&2; exit 1; }
    RIO_MODULE_DIR=$b/modules "$b/railiod" --listen 127.0.0.1:0 --port-file "$DIR/ports$k" \
        --log-level warn --s3-listen 127.0.0.1:0 --s3-keys "$DIR/keys" ${HC[@]+"${HC[@]}"} \
        --s3-backend "rados://rio?conf=$DIR/ceph/ceph.conf" 2> "$DIR/railiod$k.log" &
    GWS+=($!)
    for _ in $(seq 100); do [ -s "$DIR/ports$k" ] && grep -q s3= "$DIR/ports$k" && break; sleep 0.1; done
    URLS+=("http://$(sed -n 's/^s3=//p' "$DIR/ports$k")") NAMES+=("gateway$k ($b)") PIDS+=("${GWS[-1]}")
done
OSD=$(pgrep -f "ceph-osd.*$DIR" | head -1)
SIGV4=(--aws-sigv4 aws:amz:us-east-1:s3 --user "$S3_ACCESS_KEY:$S3_SECRET_KEY"
    -H "x-amz-content-sha256: UNSIGNED-PAYLOAD")
head -c $((KIB << 10)) /dev/urandom > "$DIR/small"

ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
switches() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/ctxt_switches/ { t += $2 } END { print t + 0 }'; }
load() { # endpoint index, PUT or GET
    local i=$1 dir=$2 url=${URLS[$1]} pid=${PIDS[$1]} pids=() t0 t1
    local o0 g0 x0 o1 g1 x1
    o0=$(ticks "$OSD") g0=$(ticks "$pid") x0=$(switches "$pid")
    t0=$(date +%s.%N)
    for c in $(seq "$CLIENTS"); do
        (
            if [ "$dir" = GET ] && [ "$KEEPALIVE" = 1 ]; then
                args=()
                for j in $(seq "$N"); do args+=(-o /dev/null "$url/small$i/s$c-$j"); done
                curl -sf "${SIGV4[@]}" -w '%{time_total}\n' "${args[@]}" > "$DIR/lat.$c"
                exit 0
            fi
            for j in $(seq "$N"); do
                if [ "$dir" = PUT ]; then
                    curl -sf "${SIGV4[@]}" -T "$DIR/small" -o /dev/null -w '%{time_total}\n' \
                        "$url/small$i/s$c-$j"
                else
                    curl -sf "${SIGV4[@]}" -o /dev/null -w '%{time_total}\n' "$url/small$i/s$c-$j"
                fi
            done > "$DIR/lat.$c"
        ) &
        pids+=($!)
    done
    wait "${pids[@]}" # not railiod
    t1=$(date +%s.%N)
    o1=$(ticks "$OSD") g1=$(ticks "$pid") x1=$(switches "$pid")
    cat "$DIR"/lat.* | python3 -c "
import sys
v = sorted(float(x) for x in sys.stdin if x.strip())
n = len(v)
hz = 100
print(f'| ${NAMES[$i]} | $dir | {n/($t1-$t0):.0f} | {v[n//2]*1e3:.1f} | {v[min(n-1, n*99//100)]*1e3:.1f} '
      f'| {($g1-$g0)*1e3/hz/n:.2f} | {($o1-$o0)*1e3/hz/n:.2f} | {($x1-$x0)/n:.1f} |')"
}

for i in "${!URLS[@]}"; do
    curl -sf "${SIGV4[@]}" -X PUT "${URLS[$i]}/small$i" -o /dev/null
done
echo "| endpoint | $CLIENTS clients x $N, $KIB KiB | ops/s | p50 ms | p99 ms | daemon CPU ms/op | OSD CPU ms/op | switches/op |"
echo "|---|---|---|---|---|---|---|---|"
for _ in $(seq "$ROUNDS"); do
    for i in "${!URLS[@]}"; do load "$i" PUT; done
    for i in "${!URLS[@]}"; do load "$i" GET; done
    for i in $(printf '%s\n' "${!URLS[@]}" | tac); do load "$i" GET; done
done
