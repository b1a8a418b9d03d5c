#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Shared by bench/peers.sh and bench/depth.sh (sourced, not run): the peers
# they start (railiod, a Ceph cluster with radosgw), a temp dir on tmpfs,
# timing from outside, medians, markdown output. Everything started is
# recorded and stopped by peers_cleanup (the scripts' EXIT trap); only
# 127.0.0.1 is used.
# shellcheck disable=SC2034  # RAILIO_URL, RADOS_URL ... are read by the scripts

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${RIO_BUILD_DIR:-$ROOT/build}
RAILIO=${RAILIO:-$BUILD/railio}
RAILIOD=${RAILIOD:-$BUILD/railiod}
PROG=$(basename "$0")
OUT=""         # --out FILE: the markdown tables are appended there too
TMP=""         # on tmpfs: sources, destinations, putget, configs
CEPH_DIR=""    # tests/harness/ceph.sh's directory while a cluster runs
PIDS=()        # processes started here, killed by PID on exit
RAILIOD_PID=""
S3_BUCKET=peers

die() {
    echo "$PROG: $*" >&2
    exit 1
}

# Exit 77 (ctest's skip): something this run needs is not there.
skip() {
    echo "$PROG: skipped: $*" >&2
    exit 77
}

have() { command -v "$1" >/dev/null 2>&1; }

peers_cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    if [ -n "$CEPH_DIR" ]; then
        bash "$ROOT/tests/harness/ceph.sh" stop "$CEPH_DIR" >/dev/null 2>&1 || true
    fi
    [ -n "$TMP" ] && rm -rf "$TMP"
    return 0
}

# The temp dir on tmpfs (/dev/shm where it is one, else TMPDIR) and the
# putget program built from bench/putget.c against this build's library.
peers_init() {
    [ -x "$RAILIO" ] || die "$RAILIO not built (make; RAILIO=path overrides)"
    [ -e "$BUILD/librailio.so" ] || skip "$BUILD/librailio.so not built: bench/putget.c links it"
    have cc || skip "cc not found: it builds bench/putget.c"
    local base=/dev/shm
    [ -d "$base" ] && [ -w "$base" ] || base=${TMPDIR:-/tmp}
    TMP=$(mktemp -d "$base/rio-$PROG.XXXXXX")
    cc -O2 -I"$ROOT/include" "$ROOT/bench/putget.c" -L"$BUILD" -lrailio \
        -Wl,-rpath,"$BUILD" -o "$TMP/putget" || die "building bench/putget.c failed"
}

# Bytes of "256M", "32K", "1G" (or plain bytes).
to_bytes() {
    local v=${1%[KkMmGg]} s=${1: -1}
    [[ "$v" =~ ^[0-9]+$ ]] || die "size '$1': a number with K, M or G"
    case "$s" in
    K | k) echo $((v << 10)) ;;
    M | m) echo $((v << 20)) ;;
    G | g) echo $((v << 30)) ;;
    *) echo "$v" ;;
    esac
}

# "268435456" -> "256 MiB"
human() {
    local b=$1
    if [ $((b % (1 << 30))) = 0 ]; then echo "$((b >> 30)) GiB"
    elif [ $((b % (1 << 20))) = 0 ]; then echo "$((b >> 20)) MiB"
    else echo "$((b >> 10)) KiB"; fi
}

# KiB free: of the filesystem holding $1, and of memory (MemAvailable).
free_kib_fs() { df -Pk "$1" | awk 'NR == 2 { print $4 }'; }
free_kib_mem() { awk '/^MemAvailable:/ { print $2 }' /proc/meminfo; }

# fits BYTES FS_COPIES MEM_COPIES: room on TMP's filesystem for FS_COPIES
# and in memory for MEM_COPIES of BYTES, 1 GiB of memory kept spare.
fits() {
    local kib=$(($1 >> 10))
    [ $((kib * $2)) -lt "$(free_kib_fs "$TMP")" ] &&
        [ $((kib * $3 + (1 << 20))) -lt "$(free_kib_mem)" ]
}

# Median of the numbers on stdin ("-" when there are none).
median() {
    sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else print v[int((NR + 1) / 2)] }'
}

# timed LOG CMD...: run CMD (stdout and stderr to LOG), print "WALL CPU" in
# seconds (CPU: user + system of CMD and its children, bash's times). The
# status is CMD's.
timed() {
    local log=$1 tf st
    shift
    tf=$TMP/time.$$
    local TIMEFORMAT='%R %U %S'
    { time "$@" >"$log" 2>&1; } 2>"$tf" && st=0 || st=$?
    awk '{ printf "%.3f %.3f\n", $1, $2 + $3 }' "$tf"
    return "$st"
}

# Markdown to stdout and, with --out, to the file.
emit() {
    printf '%s\n' "$@"
    if [ -n "$OUT" ]; then printf '%s\n' "$@" >>"$OUT"; fi
}

# A port on 127.0.0.1 nobody listens on, below the ephemeral range.
free_port() {
    local p lo hi i
    read -r lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || lo=32768
    [ "$lo" -gt 12000 ] 2>/dev/null || lo=32768
    for i in $(seq 1 200); do
        p=$((lo - 11000 + RANDOM % 11000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            echo "$p"
            return 0
        fi
    done
    return 1
}

# railiod on 127.0.0.1 (port 0), its URL in RAILIO_URL, its PID in RAILIOD_PID.
start_railiod() {
    local mem=${1:-2G}
    [ -x "$RAILIOD" ] || die "$RAILIOD not built"
    "$RAILIOD" --listen 127.0.0.1:0 --port-file "$TMP/railiod.port" --memory "$mem" \
        --log-level warn 2>"$TMP/railiod.log" &
    RAILIOD_PID=$!
    PIDS+=("$RAILIOD_PID")
    for _ in $(seq 1 100); do
        [ -s "$TMP/railiod.port" ] && break
        kill -0 "$RAILIOD_PID" 2>/dev/null || die "railiod exited: $(tail -3 "$TMP/railiod.log")"
        sleep 0.1
    done
    [ -s "$TMP/railiod.port" ] || die "railiod did not write its port"
    RAILIO_URL="railio://$(head -1 "$TMP/railiod.port")"
}

# A single-host Ceph cluster (1 monitor, 1 memstore OSD, pool "rio") with
# radosgw on 127.0.0.1 (tests/harness/ceph.sh), a bucket $S3_BUCKET made,
# and the S3 keys in the environment. Returns 77 when Ceph is not installed.
start_ceph() {
    local memstore=${1:-8G} port st=0
    port=$(free_port) || die "no free port for radosgw"
    CEPH_DIR=$(mktemp -d "${TMPDIR:-/tmp}/rio-$PROG-ceph.XXXXXX")
    bash "$ROOT/tests/harness/ceph.sh" start "$CEPH_DIR" --rgw "$port" --pool rio \
        --memstore "$memstore" --owner $$ >"$TMP/ceph.out" 2>&1 || st=$?
    if [ "$st" != 0 ]; then
        [ "$st" = 77 ] || cat "$TMP/ceph.out" >&2
        rm -rf "$CEPH_DIR"
        CEPH_DIR=""
        return "$st"
    fi
    set -a
    # shellcheck disable=SC1091
    . "$CEPH_DIR/s3.env"
    set +a
    export AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1
    RADOS_URL="rados://rio?conf=$CEPH_DIR/ceph.conf"

    s3_curl -X PUT "$S3_ENDPOINT/$S3_BUCKET" >/dev/null || die "creating bucket $S3_BUCKET failed"
}

# curl with SigV4 against radosgw (which wants the payload hash header).
s3_curl() {
    curl -sS --fail --aws-sigv4 "aws:amz:${AWS_REGION:-us-east-1}:s3" \
        --user "$S3_ACCESS_KEY:$S3_SECRET_KEY" -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' "$@"
}

# FOUND=(each of $@ that is installed); "skipped: X not installed" for the
# others, on the console and in the tables' notes.
detect() {
    local t
    FOUND=()
    for t in "$@"; do
        if have "$t"; then FOUND+=("$t"); else emit "- skipped: $t not installed"; fi
    done
}

stop_railiod() {
    [ -n "${RAILIOD_PID:-}" ] || return 0
    kill "$RAILIOD_PID" 2>/dev/null || true
    wait "$RAILIOD_PID" 2>/dev/null || true
    local p keep=()
    for p in "${PIDS[@]}"; do [ "$p" = "$RAILIOD_PID" ] || keep+=("$p"); done
    PIDS=("${keep[@]}")
    RAILIOD_PID=""
    rm -f "$TMP/railiod.port"
}

stop_ceph() {
    [ -n "$CEPH_DIR" ] || return 0
    bash "$ROOT/tests/harness/ceph.sh" stop "$CEPH_DIR" >/dev/null 2>&1 || true
    CEPH_DIR=""
}

# The machine and the build, once at the top of each run's output.
emit_setup() {
    local rev
    rev=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
    emit "$(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs ($(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)), $(($(awk '/^MemTotal:/ { print $2 }' /proc/meminfo) >> 20)) GiB, Linux $(uname -r), build $rev ($BUILD), load average $(cut -d' ' -f1-3 /proc/loadavg) at the start."
}

# Every figure a rate above 0 and a CPU figure at or above 0: what putget
# printed was parsed (the self-test's check).
check_rates() {
    local what=$1
    shift
    awk -v p="$1" -v pc="$2" -v g="$3" -v gc="$4" 'BEGIN {
        ok = p ~ /^[0-9.]+$/ && g ~ /^[0-9.]+$/ && pc ~ /^[0-9.]+$/ && gc ~ /^[0-9.]+$/ && p > 0 && g > 0
        exit !ok }' || die "$what: no rate parsed (PUT '$1' '$2', GET '$3' '$4')"
}

# putget ARGS...: bench/putget.c's medians, "PUT_MBps PUT_CPU GET_MBps
# GET_CPU" (CPU in s/GiB), or die with its last words.
putget() {
    local log=$TMP/putget.log
    "$TMP/putget" "$@" >"$log" 2>&1 || die "putget $*: $(tail -2 "$log")"
    awk '/^putget-raw / { print $2, $3, $4, $5 }' "$log"
}
