#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Listing a bucket: the S3 gateway over rados:// without and with the pool's
# key index (docs/rados.md "The key index") against radosgw, on one
# single-host Ceph cluster of its own (tests/harness/ceph.sh --rgw), stopped
# on exit. A bucket of N small objects is listed while the pool also holds M
# objects of another bucket (a pool serves many buckets; radosgw keeps those
# in its own pools, indexed per bucket):
#   - the first page of ListObjectsV2 (1000 keys, curl), the median of 5;
#   - a page under a prefix of 100 keys with delimiter '/' (curl);
#   - the whole bucket with `aws s3 ls` (N / 1000 pages);
#   - `railio fsck --index` on the pool, once, timed.
#   bench/listing.sh [--objects 5000] [--others 20000] [--runs 5]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
N=5000 M=20000 RUNS=5
while [ $# -gt 0 ]; do
    case $1 in
    --objects) N=$2; shift 2 ;;
    --others) M=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    *) echo "bench/listing.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
PY=/usr/bin/python3
for t in aws curl; do
    command -v $t >/dev/null || { echo "bench/listing.sh: $t not installed" >&2; exit 1; }
done
$PY -c 'import boto3' 2>/dev/null || { echo "bench/listing.sh: python3-boto3 not installed" >&2; exit 1; }
[ -x "$BUILD/railiod" ] && [ -x "$BUILD/railio" ] ||
    { echo "bench/listing.sh: $BUILD/railiod and railio not built" >&2; exit 1; }
# shellcheck source=bench/gw_lib.sh
. "$ROOT/bench/gw_lib.sh"
gw_bench_start list 8G

# N objects in bucket "list" (d00/ .. d49/, 100 keys each when N=5000) and
# M in bucket "other", 16 threads of boto3.
fill() {
    $PY - "$1" "$N" "$M" <<'EOF'
import sys, boto3, concurrent.futures as cf
from botocore.config import Config
url, n, m = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s3 = boto3.client("s3", endpoint_url=url, config=Config(max_pool_connections=16,
                  s3={"addressing_style": "path"}))
for b in ("list", "other"):
    s3.create_bucket(Bucket=b)
def put(a):
    s3.put_object(Bucket=a[0], Key=a[1], Body=b"x" * 5)
jobs = [("list", "d%02d/k%05d" % (i // 100, i)) for i in range(n)]
jobs += [("other", "o/%06d" % i) for i in range(m)]
with cf.ThreadPoolExecutor(16) as ex:
    list(ex.map(put, jobs))
EOF
}

now() { date +%s.%N; }
# The median wall clock of RUNS runs of "$@", in seconds.
median() {
    local v=()
    for _ in $(seq "$RUNS"); do
        local t0 t1
        t0=$(now); "$@" > "$DIR/out"; t1=$(now)
        v+=("$($PY -c "print($t1-$t0)")")
    done
    printf '%s\n' "${v[@]}" | sort -g | sed -n "$(((RUNS + 1) / 2))p"
}
first_page() { curl -sf "${SIGV4[@]}" "$1/list?list-type=2&max-keys=1000"; }
dir_page() { curl -sf "${SIGV4[@]}" "$1/list?list-type=2&prefix=d07/&delimiter=/"; }
whole() { aws --endpoint-url "$1" s3 ls s3://list/ --recursive; }

row() {
    local name=$1 url=$2 fp dp wl keys
    fp=$(median first_page "$url")
    [ "$(grep -o '<Key>' "$DIR/out" | wc -l)" = 1000 ] || [ "$N" -lt 1000 ] ||
        echo "bench/listing.sh: $name: first page not 1000 keys" >&2
    dp=$(median dir_page "$url")
    wl=$(median whole "$url")
    keys=$(wc -l < "$DIR/out")
    [ "$keys" = "$N" ] || echo "bench/listing.sh: $name: listed $keys keys, not $N" >&2
    printf '| %s | %.3f | %.3f | %.2f |\n' "$name" "$fp" "$dp" "$wl"
}

fill "$S3_ENDPOINT" >&2
fill "$GW" >&2
heads=$(rados -c "$DIR/ceph/ceph.conf" -p rio ls | wc -l)
echo "bucket 'list': $N objects; pool rio: $heads objects in namespace \"\" (heads)," \
    "and their chunks; radosgw's own pools alike; $RUNS runs each, median"
echo
echo "| endpoint | first page of 1000, s | prefix d07/ with '/', s | aws s3 ls of $N, s |"
echo "|---|---:|---:|---:|"
row radosgw "$S3_ENDPOINT"
row "gateway, no index (scan)" "$GW"
t0=$(now)
"$BUILD/railio" fsck -q --index "$POOL"
t1=$(now)
sleep 11 # the gateway reads the marker again within 10 s
row "gateway, key index" "$GW"
echo
echo "railio fsck --index: $($PY -c "print(f'{$t1-$t0:.1f}')") s (of which about 50 s waiting" \
    "for running clients to see the marker)"
