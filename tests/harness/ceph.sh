#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A single-host Ceph cluster on loopback for railio's tests and benches:
# 1 monitor, 1..3 memstore OSDs, optional radosgw (S3) and mgr, every file in
# one directory the caller names, every daemon detached with setsid and its
# PID recorded, every wait a poll with a timeout. docs/rados.md ("The test
# cluster") tells how the tests use it and the facts each step rests on.
#
#   ceph.sh start DIR [options]    start a cluster in DIR (created; must be empty)
#   ceph.sh stop DIR [--keep DEST] kill every daemon started in DIR (by PID), remove DIR;
#                                  with --keep, first copy the log tails to DEST
#   ceph.sh diag DIR [WHY]         print the cluster's state (ceph -s, health, OSD tree,
#                                  the daemons' own view through their admin sockets)
#                                  and the tails of its logs; bounded in time and size
#   ceph.sh kill-osd DIR N [SIG]   send SIG (default KILL) to osd.N
#   ceph.sh cli DIR ARGS...        run `ceph ARGS...` against the cluster (with a timeout)
#
# start options:
#   --osds N            OSDs (1..3, default 1)
#   --pool NAME         create pool NAME and wait until it takes writes (repeatable;
#                       default: one pool "rio")
#   --pool-size N       replicas per pool (default 1; <= OSDs)
#   --memstore SIZE     bytes each OSD reports as its capacity (default 8G; RAM is
#                       used only for what is stored, about 2x the data)
#   --max-object SIZE   osd max object size (default Ceph's, 128M)
#   --rgw PORT          also start radosgw on 127.0.0.1:PORT with an S3 user; its
#                       keys go to DIR/s3.env (see below)
#   --mgr               also start a mgr (off by default: librados and radosgw
#                       do not need it)
#   --owner PID         stop the cluster by itself when process PID exits (a
#                       watchdog)
#   --keep DEST         with --owner: if PID exits leaving the cluster up (it
#                       was killed), first write `diag` to DEST/diag.txt and
#                       keep the logs there as stop --keep does
#   --diag-at EPOCH     with --owner: the watchdog prints `diag` to start's
#                       stderr once at this time (seconds since 1970) if PID
#                       is still alive: a test about to be killed by ctest's
#                       timeout shows the cluster while its output is still read
#   --timeout SEC       give up starting after SEC seconds (default 60)
#
# What start leaves in DIR:
#   ceph.conf   the configuration (mon address, client keyring, paths)
#   keyring     client.admin's keyring (ceph.conf points at it)
#   env         CEPH_CONF=DIR/ceph.conf and RIO_CEPH_CONF=DIR/ceph.conf
#   s3.env      with --rgw: S3_ENDPOINT=http://127.0.0.1:PORT, S3_ACCESS_KEY,
#               S3_SECRET_KEY, S3_REGION=us-east-1, and the same keys as
#               AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (KEY=VALUE lines,
#               no quotes: `. DIR/s3.env` in a shell)
#   pids/       one file per daemon (mon.a, osd.N, rgw, mgr.x, watchdog)
#   log/        daemon logs
# On success start prints "ceph.sh: up in S s: conf DIR/ceph.conf" and, with
# --rgw, the S3 endpoint and the path of s3.env (not the keys). On failure it prints why, the tail of the logs,
# stops what it started and exits non-zero (DIR is kept for inspection).
# Exit 77: the Ceph packages are missing (scripts/install-deps.sh installs them).
set -euo pipefail

SELF=$(readlink -f "$0")
PROG=ceph.sh

die() {
    echo "$PROG: $*" >&2
    exit 1
}

usage() {
    sed -n '2,/^# Exit 77/s/^# \{0,1\}//p' "$SELF"
}

# Every ceph CLI call gets a timeout: without a mgr some commands hang.
ceph_cli() {
    timeout 20 ceph --conf "$DIR/ceph.conf" --connect-timeout 5 "$@"
}

now_ms() {
    date +%s%3N
}

# A TCP port on 127.0.0.1 that nothing listens on (a connect is refused),
# below the kernel's ephemeral range: a port in that range may be taken as
# the source port of some other test's outgoing connection between this probe
# and the daemon's bind (the monitor then dies with EADDRINUSE).
free_port() {
    local p i lo hi
    read -r lo hi </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || lo=32768
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

# Alive and not a zombie waiting for its (adopted) parent to reap it.
pid_alive() {
    local st
    [ -n "$1" ] && [ -r "/proc/$1/stat" ] || return 1
    st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
    [ -n "$st" ] && [ "$st" != Z ]
}

# PID of a daemon we recorded, if it is still the process we started (its
# command line names our conf file, so a reused PID is never touched).
our_pid() {
    local f="$DIR/pids/$1" pid
    [ -f "$f" ] || return 1
    pid=$(cat "$f")
    [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$DIR" || return 1
    echo "$pid"
}

# Start a daemon detached (own session, no terminal), record its PID.
spawn() {
    local name=$1
    shift
    setsid "$@" </dev/null >"$DIR/log/$name.out" 2>&1 &
    echo $! >"$DIR/pids/$name"
}

check_alive() {
    local f name pid
    for f in "$DIR"/pids/*; do
        [ -f "$f" ] || continue
        name=$(basename "$f")
        [ "$name" = watchdog ] && continue
        pid=$(cat "$f")
        if ! pid_alive "$pid"; then
            echo "$PROG: $name (pid $pid) died" >&2
            return 1
        fi
    done
}

# RIO_CEPH_TRACE=1: print how long each step took.
T_PREV=0
step() {
    if [ "${RIO_CEPH_TRACE:-}" = 1 ]; then
        local t
        t=$(now_ms)
        echo "$PROG: +$((t - T_PREV)) ms $*" >&2
        T_PREV=$t
    fi
}

DEADLINE=0
# poll DESC CMD...: run CMD until it succeeds, every daemon alive, before the deadline.
poll() {
    local desc=$1
    shift
    while :; do
        if "$@" >/dev/null 2>&1; then
            return 0
        fi
        check_alive || return 1
        if [ "$(now_ms)" -ge "$DEADLINE" ]; then
            echo "$PROG: timed out waiting for $desc" >&2
            return 1
        fi
        sleep 0.1
    done
}

show_logs() {
    local f
    for f in "$DIR"/log/*; do
        [ -s "$f" ] || continue
        echo "---- $f (tail)" >&2
        tail -n 15 "$f" >&2 || true
    done
}

kill_all() {
    local f name pid pids=()
    [ -d "$DIR/pids" ] || return 0
    for f in "$DIR"/pids/*; do
        [ -f "$f" ] || continue
        name=$(basename "$f")
        [ "$name" = watchdog ] && [ "${RIO_CEPH_WATCHDOG:-}" = 1 ] && continue
        if pid=$(our_pid "$name"); then
            kill -TERM "$pid" 2>/dev/null || true
            pids+=("$pid")
        fi
    done
    local i
    for i in $(seq 1 10); do
        local left=0 p
        for p in "${pids[@]}"; do
            pid_alive "$p" && left=1
        done
        [ "$left" = 0 ] && break
        sleep 0.1
    done
    for p in "${pids[@]}"; do
        kill -KILL "$p" 2>/dev/null || true
    done
}

# ------------------------------------------------------------------ start

# SIZE (N, NK, NM, NG, NT: powers of 1024, as Ceph reads memstore device
# bytes) in bytes.
size_bytes() {
    local n u
    [[ "$1" =~ ^([0-9]+)([KMGT]?)(i?B?)$ ]] || return 1
    n=${BASH_REMATCH[1]} u=${BASH_REMATCH[2]}
    case "$u" in
    K) n=$((n << 10)) ;;
    M) n=$((n << 20)) ;;
    G) n=$((n << 30)) ;;
    T) n=$((n << 40)) ;;
    esac
    echo "$n"
}

write_conf() {
    local max_object_line=""
    [ -n "$MAX_OBJECT" ] && max_object_line="osd max object size = $MAX_OBJECT"
    cat >"$DIR/ceph.conf" <<EOF
[global]
fsid = $FSID
mon host = [v2:127.0.0.1:$MON_PORT]
mon initial members = a
public addr = 127.0.0.1
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
auth allow insecure global id reclaim = false
ms bind msgr1 = false
ms bind msgr2 = true
ms bind ipv6 = false
ms bind retry delay = 1
run dir = $DIR/run
admin socket = $DIR/run/\$name.asok
pid file = $DIR/run/\$name.pid
log file = $DIR/log/\$name.log
mon cluster log file = $DIR/log/cluster.log
crash dir = $DIR/crash
keyring = $DIR/keyring
log to stderr = false
err to stderr = false
osd pool default size = $POOL_SIZE
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
mon data avail warn = 1
mon data avail crit = 0
mon mgr mkfs grace = 86400
paxos propose interval = 0.05
paxos min wait = 0.01
osd objectstore = memstore
memstore device bytes = $MEMSTORE
$max_object_line

[client]
admin socket = $DIR/run/\$name.\$pid.\$cctid.asok

[mon]
mon data = $DIR/mon.\$id
keyring = $DIR/mon.keyring

[osd]
osd data = $DIR/osd.\$id
keyring = $DIR/osd.\$id/keyring
osd heartbeat interval = 1
# Fullness from the PGs' own byte counts, not from memstore's statfs: seen
# under load (test_rados, ASan, two CPU hogs), memstore's used-bytes counter
# went below zero (perf dump: stat_bytes_used 18446744073709527671, i.e.
# -23945), the OSD read that as full ("full status failsafe engaged, dropping
# updates, now -2147483648% full"), the monitor flagged every pool full and
# every write waited forever: PUTs ended in RIO_EDEADLINE or RIO_ENOPATH,
# reads and the monitor kept answering. Ceph's own test option; the capacity
# is still --memstore, and a really full OSD still stops writes.
fake statfs for testing = $MEMSTORE_BYTES

[mgr]
mgr data = $DIR/mgr.\$id
keyring = $DIR/mgr.\$id/keyring

[client.rgw.gw]
keyring = $DIR/rgw.keyring
rgw data = $DIR/rgw
rgw frontends = beast endpoint=127.0.0.1:$RGW_PORT
rgw thread pool size = 32
# Deleted data is freed by garbage collection, two hours later by default: a
# long run would fill the small OSD and every write would hang.
rgw gc obj min wait = 1
rgw gc processor period = 5
rgw dns name = 127.0.0.1
EOF
}

start_mon() {
    ceph-authtool --create-keyring "$DIR/mon.keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
    ceph-authtool --create-keyring "$DIR/keyring" --gen-key -n client.admin \
        --cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *' --cap mds 'allow *' >/dev/null
    ceph-authtool "$DIR/mon.keyring" --import-keyring "$DIR/keyring" >/dev/null
    monmaptool --create --fsid "$FSID" --addv a "[v2:127.0.0.1:$MON_PORT]" "$DIR/monmap" >/dev/null
    mkdir -p "$DIR/mon.a"
    ceph-mon --conf "$DIR/ceph.conf" --mkfs -i a --monmap "$DIR/monmap" \
        --keyring "$DIR/mon.keyring" >"$DIR/log/mon-mkfs.out" 2>&1 ||
        {
            cat "$DIR/log/mon-mkfs.out" >&2
            return 1
        }
    spawn mon.a ceph-mon -f -i a --conf "$DIR/ceph.conf"
    poll "the monitor" ceph_cli mon stat
}

osds_up() {
    local n
    n=$(ceph_cli osd stat -f json 2>/dev/null | sed -n 's/.*"num_up_osds":\([0-9]*\).*/\1/p')
    [ "${n:-0}" -ge "$NOSDS" ]
}

start_osds() {
    local i id uuid secret mkfs_pids=()
    for i in $(seq 1 "$NOSDS"); do
        uuid=$(cat /proc/sys/kernel/random/uuid)
        secret=$(ceph-authtool --gen-print-key)
        printf '{"cephx_secret": "%s"}\n' "$secret" >"$DIR/osd-new.json"
        id=$(ceph_cli osd new "$uuid" -i "$DIR/osd-new.json")
        [[ "$id" =~ ^[0-9]+$ ]] || die "ceph osd new: unexpected answer '$id'"
        mkdir -p "$DIR/osd.$id"
        # ceph-osd --mkfs --key does not write the keyring: write it ourselves.
        printf '[osd.%s]\n\tkey = %s\n' "$id" "$secret" >"$DIR/osd.$id/keyring"
        ceph-osd --conf "$DIR/ceph.conf" --mkfs -i "$id" --key "$secret" --osd-uuid "$uuid" \
            >"$DIR/log/osd-mkfs.$id.out" 2>&1 &
        mkfs_pids+=("$!:$id")
    done
    rm -f "$DIR/osd-new.json"
    for e in "${mkfs_pids[@]}"; do
        if ! wait "${e%%:*}"; then
            cat "$DIR/log/osd-mkfs.${e##*:}.out" >&2
            return 1
        fi
    done
    for e in "${mkfs_pids[@]}"; do
        id=${e##*:}
        spawn "osd.$id" ceph-osd -f -i "$id" --conf "$DIR/ceph.conf"
    done
    poll "$NOSDS OSD(s) up" osds_up
}

pool_takes_writes() {
    timeout 10 rados --conf "$DIR/ceph.conf" -p "$1" put rio-harness-probe /dev/null &&
        timeout 10 rados --conf "$DIR/ceph.conf" -p "$1" rm rio-harness-probe
}

create_one_pool() {
    ceph_cli osd pool create "$1" 8 8 >/dev/null 2>>"$DIR/log/pools.out" || return 1
    if [ "$POOL_SIZE" != 1 ]; then
        ceph_cli osd pool set "$1" size "$POOL_SIZE" >/dev/null 2>>"$DIR/log/pools.out" || return 1
        ceph_cli osd pool set "$1" min_size 1 >/dev/null 2>>"$DIR/log/pools.out" || return 1
    fi
}

# Pools are created in parallel (each `ceph` call is a Python start-up).
create_pools() {
    local p jobs=()
    for p in "${POOLS[@]}"; do
        create_one_pool "$p" &
        jobs+=($!)
    done
    for p in "${jobs[@]}"; do
        wait "$p" || {
            cat "$DIR/log/pools.out" >&2
            return 1
        }
    done
    for p in "${POOLS[@]}"; do
        poll "pool $p to take writes" pool_takes_writes "$p"
    done
}

start_mgr() {
    mkdir -p "$DIR/mgr.x"
    ceph_cli auth get-or-create mgr.x mon 'allow profile mgr' osd 'allow *' mds 'allow *' \
        -o "$DIR/mgr.x/keyring" >/dev/null
    spawn mgr.x ceph-mgr -f -i x --conf "$DIR/ceph.conf"
    poll "the mgr" sh -c "timeout 20 ceph --conf '$DIR/ceph.conf' --connect-timeout 5 mgr stat -f json | grep -q '\"available\": *true'"
}

rgw_answers() {
    local line
    exec 3<>"/dev/tcp/127.0.0.1/$RGW_PORT" || return 1
    printf 'GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
    IFS= read -r -t 2 line <&3 || {
        exec 3<&-
        return 1
    }
    exec 3<&-
    [[ "$line" == HTTP/1.?\ 200* ]]
}

start_rgw() {
    local access secret
    mkdir -p "$DIR/rgw"
    ceph_cli auth get-or-create client.rgw.gw mon 'allow rw' osd 'allow rwx' mgr 'allow rw' \
        -o "$DIR/rgw.keyring" >/dev/null
    spawn rgw radosgw -f -n client.rgw.gw --conf "$DIR/ceph.conf"
    poll "radosgw on 127.0.0.1:$RGW_PORT" rgw_answers
    access=$(head -c 10 /dev/urandom | od -An -tx1 | tr -d ' \n' | tr 'a-f' 'A-F')
    secret=$(head -c 20 /dev/urandom | od -An -tx1 | tr -d ' \n')
    timeout 30 radosgw-admin --conf "$DIR/ceph.conf" user create --uid=railio \
        --display-name=railio --access-key="$access" --secret-key="$secret" \
        >"$DIR/log/rgw-user.out" 2>&1 || {
        cat "$DIR/log/rgw-user.out" >&2
        return 1
    }
    cat >"$DIR/s3.env" <<EOF
S3_ENDPOINT=http://127.0.0.1:$RGW_PORT
S3_ACCESS_KEY=$access
S3_SECRET_KEY=$secret
S3_REGION=us-east-1
AWS_ACCESS_KEY_ID=$access
AWS_SECRET_ACCESS_KEY=$secret
EOF
}

start_watchdog() {
    # Its own session too, so it outlives the caller's process group. With
    # --diag-at it keeps the caller's stderr (a test's output) to print diag
    # there; otherwise nothing, so that `$(ceph.sh start ...)` does not wait
    # for it.
    local args=("$SELF" watch "$DIR" "$OWNER" --diag-at "$DIAG_AT")
    [ -n "$KEEP" ] && args+=(--keep "$KEEP")
    if [ "$DIAG_AT" != 0 ]; then
        setsid bash "${args[@]}" </dev/null >/dev/null &
    else
        setsid bash "${args[@]}" </dev/null >/dev/null 2>&1 &
    fi
    echo $! >"$DIR/pids/watchdog"
}

cmd_start() {
    NOSDS=1 POOL_SIZE=1 MEMSTORE=8G MAX_OBJECT="" RGW_PORT=0 WITH_MGR=0 OWNER="" TIMEOUT=60
    KEEP="" DIAG_AT=0
    POOLS=()
    while [ $# -gt 0 ]; do
        case "$1" in
        --osds) NOSDS=$2; shift ;;
        --pool) POOLS+=("$2"); shift ;;
        --pool-size) POOL_SIZE=$2; shift ;;
        --memstore) MEMSTORE=$2; shift ;;
        --max-object) MAX_OBJECT=$2; shift ;;
        --rgw) RGW_PORT=$2; shift ;;
        --mgr) WITH_MGR=1 ;;
        --owner) OWNER=$2; shift ;;
        --timeout) TIMEOUT=$2; shift ;;
        --keep) KEEP=$2; shift ;;
        --diag-at) DIAG_AT=$2; shift ;;
        *) die "start: unknown option '$1' (ceph.sh --help)" ;;
        esac
        shift
    done
    [[ "$NOSDS" =~ ^[1-3]$ ]] || die "--osds must be 1..3"
    [[ "$POOL_SIZE" =~ ^[1-3]$ ]] && [ "$POOL_SIZE" -le "$NOSDS" ] ||
        die "--pool-size must be 1..OSDs"
    [[ "$RGW_PORT" =~ ^[0-9]+$ ]] || die "--rgw needs a port number"
    [[ "$DIAG_AT" =~ ^[0-9]+$ ]] || die "--diag-at needs a time in seconds since 1970"
    MEMSTORE_BYTES=$(size_bytes "$MEMSTORE") && [ "$MEMSTORE_BYTES" -gt 0 ] ||
        die "--memstore needs a size (8G, 512M, 1073741824)"
    [ ${#POOLS[@]} -gt 0 ] || POOLS=(rio)

    local t0 bin
    for bin in ceph-mon ceph-osd ceph-authtool monmaptool ceph rados; do
        command -v "$bin" >/dev/null 2>&1 || {
            echo "$PROG: $bin not found: install the Ceph packages (scripts/install-deps.sh)" >&2
            exit 77
        }
    done
    if [ "$RGW_PORT" != 0 ]; then
        command -v radosgw >/dev/null 2>&1 || {
            echo "$PROG: radosgw not found (scripts/install-deps.sh)" >&2
            exit 77
        }
    fi
    if [ "$WITH_MGR" = 1 ]; then
        command -v ceph-mgr >/dev/null 2>&1 || die "ceph-mgr not found (apt-get install ceph-mgr)"
    fi

    mkdir -p "$DIR"
    DIR=$(readlink -f "$DIR")
    [ -z "$(ls -A "$DIR")" ] || die "start: $DIR is not empty"
    mkdir -p "$DIR/pids" "$DIR/log" "$DIR/run" "$DIR/crash"
    touch "$DIR/.rio-ceph-harness"
    # A leftover CEPH_KEYRING overrides the config file, for daemons too.
    unset CEPH_KEYRING CEPH_ARGS CEPH_CONF
    t0=$(now_ms)
    DEADLINE=$((t0 + TIMEOUT * 1000))
    FSID=$(cat /proc/sys/kernel/random/uuid)
    MON_PORT=$(free_port) || die "no free port"
    [ -n "$OWNER" ] && start_watchdog

    trap 'echo "$PROG: start failed" >&2; show_logs; kill_all; exit 1' ERR
    T_PREV=$t0
    write_conf
    start_mon || false
    step "monitor up"
    start_osds || false
    step "OSDs up"
    create_pools || false
    step "pools ready"
    [ "$WITH_MGR" = 1 ] && { start_mgr || false; }
    [ "$RGW_PORT" != 0 ] && { start_rgw || false; }
    trap - ERR

    printf 'CEPH_CONF=%s\nRIO_CEPH_CONF=%s\n' "$DIR/ceph.conf" "$DIR/ceph.conf" >"$DIR/env"
    echo "$PROG: up in $(awk -v ms=$(($(now_ms) - t0)) 'BEGIN{printf "%.1f", ms/1000}') s: conf $DIR/ceph.conf"
    # The endpoint, not the keys: they stay in the file (never in a log).
    [ "$RGW_PORT" != 0 ] && echo "$PROG: S3 on http://127.0.0.1:$RGW_PORT, keys in $DIR/s3.env"
    return 0
}

cmd_stop() {
    local keep=""
    [ "${1:-}" = --keep ] && { keep=${2:?stop: --keep needs a directory}; }
    [ -d "$DIR" ] || return 0
    DIR=$(readlink -f "$DIR")
    [ -f "$DIR/.rio-ceph-harness" ] || die "stop: $DIR was not made by $PROG; not touching it"
    kill_all
    if [ "${RIO_CEPH_WATCHDOG:-}" != 1 ] && pid=$(our_pid watchdog 2>/dev/null); then
        kill -KILL "$pid" 2>/dev/null || true
    fi
    [ -n "$keep" ] && keep_logs "$keep"
    rm -rf "$DIR"
}

# ------------------------------------------------------------------ diagnosis

# Bounds: each ceph command's time (the monitor may be what is stuck; they
# run side by side), the lines shown of each log, the bytes kept of each.
DIAG_CLI_S=8
DIAG_LOG_LINES=50
KEEP_LOG_BYTES=$((2 * 1024 * 1024))

# diag_run FILE TITLE HEAD CMD...: CMD's output, its first HEAD lines, to FILE.
diag_run() {
    local out=$1 title=$2 head=$3 st=0
    shift 3
    {
        echo "---- $title"
        timeout "$DIAG_CLI_S" "$@" </dev/null >"$out.raw" 2>&1 || st=$?
        head -n "$head" "$out.raw"
        [ "$(wc -l <"$out.raw")" -le "$head" ] || echo "[... first $head lines]"
        [ "$st" = 0 ] || echo "[exit $st$([ "$st" = 124 ] && echo ": no answer in $DIAG_CLI_S s")]"
        rm -f "$out.raw"
    } >"$out" 2>&1
}

# diag [WHY]: what a stalled test needs to say about the cluster.
cmd_diag() {
    local why=${1:-} tmp f name pid st n=0 cli asok
    DIR=$(readlink -f "$DIR")
    [ -f "$DIR/.rio-ceph-harness" ] || die "diag: $DIR was not made by $PROG"
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/rio-ceph-diag.XXXXXX")
    cli=(ceph --conf "$DIR/ceph.conf" --connect-timeout 5)
    # The logs first: the commands below add to the monitor's (audit lines,
    # left out here with the monitor's own command log).
    for f in "$DIR"/log/mon.*.log "$DIR"/log/osd.*.log "$DIR"/log/client.rgw.*.log \
        "$DIR"/log/cluster.log; do
        [ -s "$f" ] || continue
        n=$DIAG_LOG_LINES
        [ "$(basename "$f")" = cluster.log ] && n=20
        {
            echo "---- $f (last $n lines, routine lines left out)"
            grep -v -e 'log_channel(audit)' -e 'handle_command mon_command' \
                -e 'set_statfs fake total' "$f" | tail -n "$n"
        } >>"$tmp/90"
    done
    find "$DIR/crash" -mindepth 1 -maxdepth 1 -printf 'crash report: %f\n' 2>/dev/null >>"$tmp/90" || true
    diag_run "$tmp/10" "ceph -s" 40 "${cli[@]}" -s &
    diag_run "$tmp/11" "ceph health detail" 30 "${cli[@]}" health detail &
    diag_run "$tmp/12" "ceph osd tree" 20 "${cli[@]}" osd tree &
    diag_run "$tmp/13" "ceph osd dump" 30 "${cli[@]}" osd dump &
    n=0
    for asok in "$DIR"/run/mon.*.asok "$DIR"/run/osd.*.asok; do
        [ -S "$asok" ] || continue
        name=$(basename "$asok" .asok)
        n=$((n + 1))
        case "$name" in
        mon.*)
            diag_run "$tmp/2${n}a" "$name (admin socket): mon_status" 8 \
                ceph --admin-daemon "$asok" mon_status &
            diag_run "$tmp/2${n}b" "$name (admin socket): ops" 30 \
                ceph --admin-daemon "$asok" ops &
            ;;
        osd.*)
            diag_run "$tmp/2${n}a" "$name (admin socket): status" 15 \
                ceph --admin-daemon "$asok" status &
            diag_run "$tmp/2${n}b" "$name (admin socket): dump_ops_in_flight" 40 \
                ceph --admin-daemon "$asok" dump_ops_in_flight &
            diag_run "$tmp/2${n}c" "$name (admin socket): capacity as the OSD counts it" 5 \
                sh -c "ceph --admin-daemon '$asok' perf dump | grep -E '\"stat_bytes'" &
            ;;
        esac
    done
    {
        echo "==== $PROG diag $DIR: $(date -u '+%F %T') UTC${why:+: $why}"
        echo "load: $(cat /proc/loadavg); $(grep -E '^(MemAvailable|SwapFree)' /proc/meminfo | tr -s ' ' | tr '\n' ' ')"
        # Pressure stall information: the share of the last 10/60/300 s in
        # which tasks waited for a CPU, memory or I/O (a starved or
        # swapping machine, against a stuck daemon).
        for f in cpu memory io; do
            [ -r "/proc/pressure/$f" ] && echo "pressure $f: $(head -n 1 "/proc/pressure/$f")"
        done
        df -h "$DIR" 2>/dev/null | tail -n 1 | awk '{print "disk: " $4 " free of " $2 " (" $5 " used) on " $6}'
        for f in "$DIR"/pids/*; do
            [ -f "$f" ] || continue
            name=$(basename "$f")
            pid=$(cat "$f")
            if pid_alive "$pid"; then
                st=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1)
                echo "$name: pid $pid alive (state $st, $(grep -E '^VmRSS' "/proc/$pid/status" 2>/dev/null | tr -s ' \t' ' '))"
            else
                echo "$name: pid $pid NOT RUNNING"
                if [ -s "$DIR/log/$name.out" ]; then
                    tail -n 10 "$DIR/log/$name.out" | sed 's/^/    /'
                fi
            fi
        done
    } >"$tmp/00"
    wait
    cat "$tmp"/[0-9]*
    echo "==== end of $PROG diag"
    rm -rf "$tmp"
}

# keep_logs DEST: the tail of every log (KEEP_LOG_BYTES each), the config
# and crash reports, for a failed test to be looked at after DIR is gone.
keep_logs() {
    local dest=$1 f
    mkdir -p "$dest/log" || return 0
    for f in "$DIR"/log/*; do
        [ -f "$f" ] && tail -c "$KEEP_LOG_BYTES" "$f" >"$dest/log/$(basename "$f")"
    done
    cp "$DIR/ceph.conf" "$dest/" 2>/dev/null || true
    [ -d "$DIR/crash" ] && cp -r "$DIR/crash" "$dest/" 2>/dev/null
    return 0
}

# watch DIR OWNER [--diag-at EPOCH] [--keep DEST]: the watchdog (start --owner).
cmd_watch() {
    local owner=$1 diag_at=0 keep="" shown=0
    shift
    while [ $# -gt 0 ]; do
        case "$1" in
        --diag-at) diag_at=$2; shift ;;
        --keep) keep=$2; shift ;;
        *) die "watch: unknown option '$1'" ;;
        esac
        shift
    done
    export RIO_CEPH_WATCHDOG=1
    # The reader of our stderr (ctest) may be gone: a write must not kill us
    # before the cluster is stopped.
    trap '' PIPE
    while kill -0 "$owner" 2>/dev/null; do
        if [ "$diag_at" != 0 ] && [ "$shown" = 0 ] && [ "$(date +%s)" -ge "$diag_at" ]; then
            shown=1
            cmd_diag "process $owner is still running near its time limit" >&2 || true
        fi
        sleep 1 >/dev/null 2>&1
    done
    exec 2>/dev/null
    [ -d "$DIR" ] || return 0
    if [ -n "$keep" ]; then
        if mkdir -p "$keep"; then
            cmd_diag "process $owner exited (killed?) without stopping the cluster" \
                >"$keep/diag.txt" 2>&1 || true
        fi
        cmd_stop --keep "$keep"
    else
        cmd_stop
    fi
}

cmd_kill_osd() {
    local n=$1 sig=${2:-KILL} pid
    DIR=$(readlink -f "$DIR")
    pid=$(our_pid "osd.$n") || die "kill-osd: osd.$n is not running"
    kill -s "$sig" "$pid"
}

case "${1:-}" in
start | stop | kill-osd | cli | diag | watch)
    cmd=$1
    shift
    [ $# -ge 1 ] || die "$cmd: DIR missing"
    DIR=$1
    shift
    case "$cmd" in
    start) cmd_start "$@" ;;
    stop) cmd_stop "$@" ;;
    diag) cmd_diag "$@" ;;
    watch) cmd_watch "$@" ;;
    kill-osd)
        [ $# -ge 1 ] || die "kill-osd: N missing"
        cmd_kill_osd "$@"
        ;;
    cli)
        DIR=$(readlink -f "$DIR")
        ceph_cli "$@"
        ;;
    esac
    ;;
-h | --help)
    usage
    ;;
*)
    usage >&2
    exit 2
    ;;
esac
