#!/usr/bin/env bash
# rados:// goodput against its ceilings, in one run on one single-host cluster
# (tests/harness/ceph.sh: 1 monitor, memstore OSDs, pool "rio"):
#   - railio put/get of one SIZE object (4 MiB chunks) at depth 1..32,
#   - `rados bench` write/seq (a plain librados aio writer/reader of 4 MiB
#     objects) at the same concurrency: the cluster's ceiling,
#   - `rados put`/`rados get` of one 64 MiB object (the stock tool; a single
#     RADOS object cannot exceed osd_max_object_size, 128 MiB),
#   - md5sum of the file: the one-core MD5 ceiling a PUT's ETag is bound by.
# Prints a Markdown table (docs/rados.md shows one).
#
#   bench/rados.sh [--size 256M] [--osds 1] [--depths "1 2 4 8 16 32"] [--secs 5]
# Needs a build (build/railio) and the Ceph packages (scripts/install-deps.sh).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
RAILIO=${RAILIO:-$ROOT/build/railio}
SIZE=256M OSDS=1 DEPTHS="1 2 4 8 16 32" SECS=5
while [ $# -gt 0 ]; do
    case "$1" in
    --size) SIZE=$2; shift ;;
    --osds) OSDS=$2; shift ;;
    --depths) DEPTHS=$2; shift ;;
    --secs) SECS=$2; shift ;;
    *) echo "usage: $0 [--size 256M] [--osds N] [--depths LIST] [--secs S]" >&2; exit 2 ;;
    esac
    shift
done
[ -x "$RAILIO" ] || { echo "bench/rados.sh: $RAILIO not built" >&2; exit 1; }

WORK=$(mktemp -d /tmp/rio-rados-bench.XXXXXX)
DIR=$WORK/cluster
cleanup() {
    bash "$ROOT/tests/harness/ceph.sh" stop "$DIR" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT
bash "$ROOT/tests/harness/ceph.sh" start "$DIR" --osds "$OSDS" --pool rio --owner $$ >&2
CONF=$DIR/ceph.conf
R="rados --conf $CONF -p rio"

bytes=$(numfmt --from=iec "$SIZE")
head -c "$bytes" /dev/urandom >"$WORK/obj"
head -c $((64 << 20)) "$WORK/obj" >"$WORK/obj64"

secs() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.3f", (b-a)/1e9}'; }
mbps() { awk -v n="$1" -v s="$2" 'BEGIN{printf "%.0f", n/s/1e6}'; }

t0=$(date +%s%N); md5sum "$WORK/obj" >/dev/null; t1=$(date +%s%N)
md5_mbps=$(mbps "$bytes" "$(secs "$t0" "$t1")")
t0=$(date +%s%N); $R put rio-bench-64m "$WORK/obj64"; t1=$(date +%s%N)
rput=$(mbps $((64 << 20)) "$(secs "$t0" "$t1")")
t0=$(date +%s%N); $R get rio-bench-64m "$WORK/out64"; t1=$(date +%s%N)
rget=$(mbps $((64 << 20)) "$(secs "$t0" "$t1")")
cmp -s "$WORK/obj64" "$WORK/out64" || { echo "rados get returned other bytes" >&2; exit 1; }
$R rm rio-bench-64m

echo "setup: $(nproc) cores, $OSDS memstore OSD(s), object $SIZE, chunk 4 MiB, one path;"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "md5sum of the object: $md5_mbps MB/s; rados put 64 MiB: $rput MB/s, rados get 64 MiB: $rget MB/s"
echo
echo "| depth | railio PUT MB/s | railio GET MB/s | rados bench write MB/s | rados bench seq MB/s | PUT hash s |"
echo "|---|---|---|---|---|---|"
for d in $DEPTHS; do
    url="rados://rio/bench-obj?conf=$CONF&depth=$d&chunk=4M"
    pj=$("$RAILIO" put "$url" "$WORK/obj" --json 2>/dev/null | grep -o '{.*}' | tail -1)
    gj=$("$RAILIO" get "$url" "$WORK/out" --json 2>/dev/null | grep -o '{.*}' | tail -1)
    cmp -s "$WORK/obj" "$WORK/out" || { echo "railio get returned other bytes" >&2; exit 1; }
    put=$(sed -n 's/.*"goodput_mbps":\([0-9.]*\).*/\1/p' <<<"$pj" | head -1)
    get=$(sed -n 's/.*"goodput_mbps":\([0-9.]*\).*/\1/p' <<<"$gj" | head -1)
    hash=$(sed -n 's/.*"hash_ns":\([0-9]*\).*/\1/p' <<<"$pj" | head -1)
    "$RAILIO" rm "$url" >/dev/null
    bw=$($R bench "$SECS" write -b 4194304 -t "$d" --no-cleanup 2>/dev/null |
        sed -n 's/^Bandwidth (MB\/sec): *\([0-9.]*\).*/\1/p')
    br=$($R bench "$SECS" seq -t "$d" 2>/dev/null | sed -n 's/^Bandwidth (MB\/sec): *\([0-9.]*\).*/\1/p')
    $R cleanup >/dev/null 2>&1 || true
    # rados bench reports MiB/s as "MB/sec": convert to MB/s (1e6) like railio.
    bw=$(awk -v v="${bw:-0}" 'BEGIN{printf "%.0f", v*1.048576}')
    br=$(awk -v v="${br:-0}" 'BEGIN{printf "%.0f", v*1.048576}')
    printf '| %s | %.0f | %.0f | %s | %s | %.2f |\n' "$d" "${put:-0}" "${get:-0}" "$bw" "$br" \
        "$(awk -v n="${hash:-0}" 'BEGIN{print n/1e9}')"
done
