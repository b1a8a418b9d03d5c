#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Issue 16's tables in one run, against the peers this machine has:
#   a  railio:// on loopback (railiod of this build): PUT/GET of one object
#      and batches of small ones, client CPU s/GiB, iperf3's single stream
#   b  s3:// against radosgw (tests/harness/ceph.sh): railio get/put against
#      curl (one stream), the aws CLI, s3cmd and rclone, each timed from
#      outside into the same tmpfs directory, every GET compared (cmp)
#   c  rados:// with default options against `rados bench` write and seq
#   d  `railio get/put` of a file timed from outside against the in-process
#      rate of the same build, and fio's tmpfs write rate (the sink)
# Missing tools are skipped ("skipped: X not installed"); nothing is
# downloaded. Everything started is stopped on exit, temp dirs removed; only
# 127.0.0.1 is used. docs/bench.md ("Against the peers") reads the tables.
#
#   bench/peers.sh [--only a,b,c,d] [--repeat N] [--quick] [--sizes LIST] [--out FILE]
#   bench/peers.sh --self-test
#
#   --only LIST    tables to make (default a,b,c,d)
#   --repeat N     runs of every measurement, the median shown (default 3)
#   --quick        1 run and small sizes (a: 64M and 4M, batches 64 x 256K and
#                  512 x 32K; b: 64M; c: 64M; d: 64M)
#   --sizes LIST   object sizes of a's single-object rows and of b
#                  (default a: 256M,4M; b: 256M,1G); c is 256M, d 512M
#   --out FILE     append the markdown tables to FILE as well
#   --self-test    a's rows only, at tiny sizes, checked (the ctest bench/peers)
# Environment: RIO_BUILD_DIR (default build/), RAILIO, RAILIOD.
set -euo pipefail
# shellcheck source=bench/peers_lib.sh
. "$(dirname "$0")/peers_lib.sh"

usage() { sed -n '3,28s/^# \{0,1\}//p' "$0"; }

REPEAT=3 QUICK=0 ONLY=a,b,c,d SIZES="" SELFTEST=0
while [ $# -gt 0 ]; do
    case "$1" in
    --only) ONLY=${2:?--only needs a list}; shift ;;
    --repeat) REPEAT=${2:?--repeat needs N}; shift ;;
    --quick) QUICK=1 ;;
    --sizes) SIZES=${2:?--sizes needs a list}; shift ;;
    --out) OUT=${2:?--out needs a file}; shift ;;
    --self-test) SELFTEST=1 ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
    esac
    shift
done
if ! [[ "$REPEAT" =~ ^[0-9]+$ ]] || [ "$REPEAT" -lt 1 ] || [ "$REPEAT" -gt 64 ]; then
    die "--repeat must be 1..64"
fi
for s in ${ONLY//,/ }; do [[ "$s" =~ ^[abcd]$ ]] || die "--only: '$s' is not one of a,b,c,d"; done
only() { [[ ",$ONLY," == *",$1,"* ]]; }

if [ "$SELFTEST" = 1 ]; then
    QUICK=1 ONLY=a REPEAT=1
fi
[ "$QUICK" = 1 ] && [ "$SELFTEST" = 0 ] && REPEAT=1
A_SIZES=256M,4M A_BATCH="512x256K 4096x32K" A_MIN=256 B_SIZES=256M,1G C_SIZE=256M C_SECS=4
D_SIZE=512M CEIL_SECS=3
if [ "$QUICK" = 1 ]; then
    A_SIZES=64M,4M A_BATCH="64x256K 512x32K" A_MIN=64 B_SIZES=64M C_SIZE=64M C_SECS=2
    D_SIZE=64M CEIL_SECS=1
fi
if [ "$SELFTEST" = 1 ]; then A_SIZES=4M A_BATCH="16x256K 64x32K" A_MIN=0; fi
if [ -n "$SIZES" ]; then A_SIZES=$SIZES B_SIZES=$SIZES; fi

trap peers_cleanup EXIT
trap 'exit 130' INT TERM
peers_init
MODE="repeat $REPEAT"
[ "$QUICK" = 1 ] && MODE="--quick (1 run, small sizes)"
[ "$SELFTEST" = 1 ] && MODE="--self-test"

fmt() { awk -v v="$1" -v f="${2:-%.0f}" 'BEGIN { if (v == "-" || v == "") print "-"; else printf f "\n", v }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || b + 0 == 0) print "-"; else printf "%.2f\n", a / b }'; }

# ------------------------------------------------------------------ (a)

iperf3_mbps() {
    local port
    have iperf3 || { echo -; return; }
    port=$(free_port) || { echo -; return; }
    # In a command substitution: PIDS would not reach the exit trap, so the
    # server is bounded by timeout itself (-1: it exits after one test).
    timeout $((CEIL_SECS + 15)) iperf3 -s -1 -B 127.0.0.1 -p "$port" >/dev/null 2>&1 &
    local spid=$!
    sleep 0.3
    timeout $((CEIL_SECS + 10)) iperf3 -c 127.0.0.1 -p "$port" -t "$CEIL_SECS" -J 2>/dev/null |
        awk -F'[:,]' '/"sum_received"/ { f = 1 } f && /"bits_per_second"/ { printf "%.0f\n", $2 / 8e6; exit }' ||
        echo -
    wait "$spid" 2>/dev/null || true
}

sec_a() {
    local ceil s b n cnt r put put_cpu get get_cpu min
    emit "" "### (a) railio:// on loopback ($MODE)" ""
    start_railiod 2G
    ceil=-
    if [ "$SELFTEST" = 0 ]; then
        detect iperf3
        ceil=$(iperf3_mbps)
    fi
    [ -z "$ceil" ] && ceil=-
    emit "railiod of this build on 127.0.0.1, default options (memory store, no prefault); the client is bench/putget.c (one process, default options), every GET compared byte for byte; each single-object size first PUT twice and discarded (a fresh server's first two PUTs of a size write into memory it maps and touches for the first time, about 0.3-1 s per GiB of page faults on this VM, which later PUTs of that size do not pay: railiod keeps freed mappings up to an eighth of --memory, or use --prefault); CPU is the client's (getrusage, all its threads) per GiB moved; medians of $REPEAT. iperf3 single stream in the same run: $ceil MB/s." ""
    if have mooncake_master; then
        emit "- Mooncake Store: mooncake_master is installed, but this script has no Mooncake runner yet: no Mooncake column" ""
    else
        emit "- skipped: Mooncake Store not installed (no mooncake_master; its PyPI wheels, mooncake-transfer-engine*, are not in this environment and this script installs nothing): no Mooncake column; issue 16's Mooncake figures were measured elsewhere" ""
    fi
    emit "| work | MB/s | client CPU s/GiB | PUT / GET | of iperf3 |" "|---|---:|---:|---:|---:|"
    for s in ${A_SIZES//,/ }; do
        b=$(to_bytes "$s")
        min=0
        [ "$b" -lt $((64 << 20)) ] && min=$A_MIN
        fits "$b" 0 3 || { emit "| PUT/GET $(human "$b") | skipped: not enough memory | | | |"; continue; }
        putget "$RAILIO_URL" "$s" 2 1 "$min" >/dev/null # warm-up, discarded (see emit above)
        read -r put put_cpu get get_cpu < <(putget "$RAILIO_URL" "$s" "$REPEAT" 1 "$min")
        check_rates "$s" "$put" "$put_cpu" "$get" "$get_cpu"
        emit "| GET $(human "$b") | $(fmt "$get") | $(fmt "$get_cpu" %.2f) | | $(ratio "$get" "$ceil") |"
        emit "| PUT $(human "$b") | $(fmt "$put") | $(fmt "$put_cpu" %.2f) | $(ratio "$put" "$get") | $(ratio "$put" "$ceil") |"
    done
    for r in $A_BATCH; do
        cnt=${r%x*} n=${r#*x}
        read -r put put_cpu get get_cpu < <(putget "$RAILIO_URL" "$n" "$REPEAT" "$cnt" 0)
        check_rates "$r" "$put" "$put_cpu" "$get" "$get_cpu"
        emit "| batch PUT $cnt x $(human "$(to_bytes "$n")") | $(fmt "$put") | $(fmt "$put_cpu" %.2f) | $(ratio "$put" "$get") | |"
        emit "| batch GET $cnt x $(human "$(to_bytes "$n")") | $(fmt "$get") | $(fmt "$get_cpu" %.2f) | | |"
    done
    stop_railiod
}

# ------------------------------------------------------------------ (b)

s3cmd_cfg() {
    local h=${S3_ENDPOINT#http://}
    printf '[default]\naccess_key = %s\nsecret_key = %s\nhost_base = %s\nhost_bucket = %s\nuse_https = False\nsignature_v2 = False\nbucket_location = us-east-1\n' \
        "$S3_ACCESS_KEY" "$S3_SECRET_KEY" "$h" "$h" >"$TMP/s3cfg"
}

# s3op TOOL put|get KEY FILE: one transfer by TOOL with its defaults.
s3op() {
    local tool=$1 op=$2 key=$3 f=$4
    case "$tool:$op" in
    railio:put) "$RAILIO" put -q "s3://$S3_BUCKET/$key?endpoint=$S3_ENDPOINT" "$f" ;;
    railio:get) "$RAILIO" get -q "s3://$S3_BUCKET/$key?endpoint=$S3_ENDPOINT" "$f" ;;
    curl:put) s3_curl -o /dev/null -T "$f" "$S3_ENDPOINT/$S3_BUCKET/$key" ;;
    curl:get) s3_curl -o "$f" "$S3_ENDPOINT/$S3_BUCKET/$key" ;;
    aws:put) aws --endpoint-url "$S3_ENDPOINT" s3 cp --only-show-errors "$f" "s3://$S3_BUCKET/$key" ;;
    aws:get) aws --endpoint-url "$S3_ENDPOINT" s3 cp --only-show-errors "s3://$S3_BUCKET/$key" "$f" ;;
    s3cmd:put) s3cmd -q -c "$TMP/s3cfg" put "$f" "s3://$S3_BUCKET/$key" ;;
    s3cmd:get) s3cmd -q -c "$TMP/s3cfg" get --force "s3://$S3_BUCKET/$key" "$f" ;;
    rclone:*)
        local a="$f" b="rgw:$S3_BUCKET/$key"
        [ "$op" = get ] && a=$b b=$f
        # AWS_CA_BUNDLE (for https) makes rclone refuse its plain-http transport;
        # --ignore-times: without it rclone skips a PUT whose size and mtime
        # match what the bucket holds, and its PUT column timed nothing
        env -u AWS_CA_BUNDLE RCLONE_CONFIG=/dev/null RCLONE_CONFIG_RGW_TYPE=s3 \
            RCLONE_CONFIG_RGW_PROVIDER=Ceph RCLONE_CONFIG_RGW_ENDPOINT="$S3_ENDPOINT" \
            RCLONE_CONFIG_RGW_ACCESS_KEY_ID="$S3_ACCESS_KEY" \
            RCLONE_CONFIG_RGW_SECRET_ACCESS_KEY="$S3_SECRET_KEY" RCLONE_CONFIG_RGW_REGION=us-east-1 \
            rclone copyto -q --ignore-times "$a" "$b"
        ;;
    esac
}

ensure_ceph() {
    [ -n "$CEPH_DIR" ] && return 0
    local st=0
    start_ceph || st=$?
    if [ "$st" = 77 ]; then emit "- skipped: Ceph (ceph-mon, ceph-osd, radosgw) not installed"; fi
    return "$st"
}

sec_b() {
    local t s b r k
    tools=(railio)
    emit "" "### (b) s3:// against radosgw ($MODE)" ""
    ensure_ceph || return 0
    detect curl aws s3cmd rclone
    tools+=("${FOUND[@]}")
    emit "- skipped: s5cmd not installed (no Debian package; its releases are downloads, which this script never makes)"
    have s3cmd && s3cmd_cfg
    emit "" "radosgw of tests/harness/ceph.sh (1 monitor, 1 memstore OSD) on 127.0.0.1; each tool with its default options, one process per transfer, timed from outside (wall seconds; CPU = user + system of the tool's process and children, per GiB); every GET into the same tmpfs directory and compared with the source (cmp); medians of $REPEAT. \"railio vs best\": the best peer's figure over railio's (above 1: railio faster, or cheaper)." ""
    local hdr="| work |" sep="|---|"
    for t in "${tools[@]}"; do hdr+=" $t |"; sep+="---:|"; done
    emit "$hdr railio vs best peer |" "$sep---|"
    for s in ${B_SIZES//,/ }; do
        b=$(to_bytes "$s")
        if ! fits "$b" 2 5; then
            emit "| $(human "$b") | skipped: not enough tmpfs or memory for 2 files and the server's copy |"
            continue
        fi
        head -c "$b" /dev/urandom >"$TMP/src"
        for t in "${tools[@]}"; do
            k="peers-$t-$b"
            : >"$TMP/b.$t.put" && : >"$TMP/b.$t.get"
            for r in $(seq 1 "$REPEAT"); do
                # every tool really uploads: no earlier copy of the key
                # left for a tool to find and skip
                s3_absent "$k" || die "$t PUT $(human "$b"): could not remove $k before the PUT"
                timed "$TMP/op.log" s3op "$t" put "$k" "$TMP/src" >>"$TMP/b.$t.put" ||
                    die "$t PUT $(human "$b"): $(tail -3 "$TMP/op.log")"
                rm -f "$TMP/dst"
                timed "$TMP/op.log" s3op "$t" get "$k" "$TMP/dst" >>"$TMP/b.$t.get" ||
                    die "$t GET $(human "$b"): $(tail -3 "$TMP/op.log")"
                cmp -s "$TMP/src" "$TMP/dst" || die "$t GET $(human "$b"): the bytes differ from the source"
                rm -f "$TMP/dst"
            done
            s3_curl -X DELETE -o /dev/null "$S3_ENDPOINT/$S3_BUCKET/$k" || true
        done
        rm -f "$TMP/src"
        for op in GET PUT; do
            for col in 1 2; do
                b_row "$op" "$col" "$b"
            done
        done
    done
}

# s3_absent KEY: delete KEY and check that HEAD answers 404.
s3_absent() {
    local code
    s3_curl -X DELETE -o /dev/null "$S3_ENDPOINT/$S3_BUCKET/$1" || return 1
    # --fail makes the 404 an exit status; -w still prints the code
    code=$(s3_curl -o /dev/null -w '%{http_code}' -I "$S3_ENDPOINT/$S3_BUCKET/$1" 2>/dev/null) || true
    [ "$code" = 404 ]
}

# One row of (b): column 1 wall seconds, 2 CPU s/GiB, medians per tool, and
# the best peer's over railio's.
b_row() {
    local op=$1 col=$2 b=$3 f=${1,,} t w rv=- best="" bname="" row
    [ "$col" = 1 ] && row="| $op $(human "$b"), s |" || row="| $op $(human "$b"), CPU s/GiB |"
    for t in "${tools[@]}"; do
        w=$(awk -v c="$col" -v g="$b" '{ print c == 1 ? $1 : $2 / (g / 1073741824) }' "$TMP/b.$t.$f" | median)
        row+=" $(fmt "$w" %.2f) |"
        if [ "$t" = railio ]; then
            rv=$w
        elif [ -z "$best" ] || awk -v a="$w" -v b="$best" 'BEGIN { exit !(a < b) }'; then
            best=$w bname=$t
        fi
    done
    if [ -n "$best" ]; then row+=" $(ratio "$best" "$rv") ($bname) |"; else row+=" - |"; fi
    emit "$row"
}

# ------------------------------------------------------------------ (c)

sec_c() {
    local b j
    emit "" "### (c) rados:// defaults against \`rados bench\` ($MODE)" ""
    if ! have rados; then emit "- skipped: rados not installed"; return 0; fi
    if ! have jq; then emit "- skipped: jq not installed (it reads railio bench's JSON)"; return 0; fi
    ensure_ceph || return 0
    b=$(to_bytes "$C_SIZE")
    j=$TMP/rados.json
    "$RAILIO" bench "$RADOS_URL" --sizes "$C_SIZE" --conc 16 --defaults --rados-bench "$C_SECS" \
        --reps "$REPEAT" --no-cli --no-aio --no-nomd5 --json >"$j" 2>"$TMP/rados.err" ||
        die "railio bench rados://: $(tail -3 "$TMP/rados.err")"
    emit "The same cluster; \`railio bench rados://rio --sizes $C_SIZE --conc 16 --defaults --rados-bench $C_SECS --reps $REPEAT --no-cli --no-aio --no-nomd5\` (what bench/rados.sh runs, on its own cluster): the row with no option set, against \`rados bench $C_SECS write\` and \`seq\` (-t 16, 4 MiB objects) run first (reps $REPEAT); medians; CPU s/GiB of each process." ""
    emit "| object | railio PUT MB/s | rados bench write | PUT / write | railio GET MB/s | rados bench seq | GET / seq | CPU s/GiB PUT / write | CPU s/GiB GET / seq |" \
        "|---|---:|---:|---:|---:|---:|---:|---|---|"
    jq -r '.rados_bench as $rb | .rows[] | select(.conc == 0) |
        [.put_mbps, $rb.write_mbps, .get_mbps, $rb.seq_mbps, .put_cpu_s_gib, $rb.write_cpu_s_gib,
         .get_cpu_s_gib, $rb.seq_cpu_s_gib] | @tsv' "$j" |
        awk -F'\t' -v h="$(human "$b")" '{
            printf "| %s | %.0f | %.0f | %.2f | %.0f | %.0f | %.2f | %.2f / %.2f | %.2f / %.2f |\n",
                h, $1, $2, ($2 > 0 ? $1 / $2 : 0), $3, $4, ($4 > 0 ? $3 / $4 : 0), $5, $6, $7, $8 }' \
        >"$TMP/c.rows"
    [ -s "$TMP/c.rows" ] || die "railio bench rados:// gave no row: $(head -c 400 "$j")"
    while IFS= read -r row; do emit "$row"; done <"$TMP/c.rows"
}

# ------------------------------------------------------------------ (d)

sec_d() {
    local b put put_cpu get get_cpu r fio_mbps cp cg wp wg
    emit "" "### (d) \`railio get/put\` of a file against the in-process rate ($MODE)" ""
    b=$(to_bytes "$D_SIZE")
    fits "$b" 2 4 || { emit "- skipped: not enough tmpfs or memory for $(human "$b")"; return 0; }
    # 8x the object: railiod keeps freed mappings of up to an eighth of
    # --memory for the next PUT (docs/server.md); below that each in-process
    # PUT of one 512 MiB buffer first-touches fresh memory on the server
    # (2G gave 262-830 MB/s against 1900-2060), while the CLI's chunked
    # stream does not, and the ratio compared two servers.
    start_railiod "$(((b * 8 + (1 << 30) - 1) >> 30))G"
    putget "$RAILIO_URL" "$D_SIZE" 2 1 0 >/dev/null # warm-up, discarded (as in (a))
    read -r put put_cpu get get_cpu < <(putget "$RAILIO_URL" "$D_SIZE" "$REPEAT" 1 0)
    head -c "$b" /dev/urandom >"$TMP/src"
    : >"$TMP/d.put" && : >"$TMP/d.get" && : >"$TMP/d.null"
    for r in $(seq 1 "$REPEAT"); do
        timed "$TMP/op.log" "$RAILIO" put -q "$RAILIO_URL/peers/cli" "$TMP/src" >>"$TMP/d.put" ||
            die "railio put: $(tail -3 "$TMP/op.log")"
        rm -f "$TMP/dst"
        timed "$TMP/op.log" "$RAILIO" get -q "$RAILIO_URL/peers/cli" "$TMP/dst" >>"$TMP/d.get" ||
            die "railio get: $(tail -3 "$TMP/op.log")"
        cmp -s "$TMP/src" "$TMP/dst" || die "railio get: the bytes differ from the source"
        rm -f "$TMP/dst"
        # The same GET with no destination to fill: the CLI's own cost.
        timed /dev/null "$RAILIO" get -q "$RAILIO_URL/peers/cli" - >>"$TMP/d.null" ||
            die "railio get to /dev/null failed"
    done
    "$RAILIO" rm -q "$RAILIO_URL/peers/cli" >/dev/null 2>&1 || true
    rm -f "$TMP/src"
    fio_mbps=-
    detect fio
    if have fio && have jq; then
        fio --name=sink --filename="$TMP/fio.dat" --rw=write --bs=4M --size="$b" --ioengine=psync \
            --output-format=json >"$TMP/fio.json" 2>/dev/null &&
            fio_mbps=$(jq '.jobs[0].write.bw_bytes / 1e6 | round' "$TMP/fio.json") || fio_mbps=-
        rm -f "$TMP/fio.dat"
    fi
    stop_railiod
    wg=$(awk '{ print $1 }' "$TMP/d.get" | median)
    wp=$(awk '{ print $1 }' "$TMP/d.put" | median)
    cg=$(awk -v g="$b" '{ print $2 / (g / 1073741824) }' "$TMP/d.get" | median)
    cp=$(awk -v g="$b" '{ print $2 / (g / 1073741824) }' "$TMP/d.put" | median)
    local mg mp mn wn cn
    wn=$(awk '{ print $1 }' "$TMP/d.null" | median)
    cn=$(awk -v g="$b" '{ print $2 / (g / 1073741824) }' "$TMP/d.null" | median)
    mn=$(awk -v w="$wn" -v g="$b" 'BEGIN { printf "%.0f", g / 1e6 / w }')
    mg=$(awk -v w="$wg" -v g="$b" 'BEGIN { printf "%.0f", g / 1e6 / w }')
    mp=$(awk -v w="$wp" -v g="$b" 'BEGIN { printf "%.0f", g / 1e6 / w }')
    emit "railiod of this build on 127.0.0.1 (--memory 8x the object, so that freed mappings are kept for the next PUT); \`railio get URL FILE\` into tmpfs and \`railio put URL FILE\` from tmpfs, $(human "$b"), timed from outside (process start to exit; CPU of the process), and \`railio get URL -\` into /dev/null (no destination to fill: the CLI's own cost), against bench/putget.c's in-process PUT and GET of the same size on the same server; medians of $REPEAT. The sink: fio writing $(human "$b") to a tmpfs file in 4 MiB writes: $fio_mbps MB/s." ""
    emit "| op | CLI MB/s | CLI CPU s/GiB | in-process MB/s | in-process CPU s/GiB | CLI / in-process |" \
        "|---|---:|---:|---:|---:|---:|"
    emit "| get $(human "$b") | $mg | $(fmt "$cg" %.2f) | $(fmt "$get") | $(fmt "$get_cpu" %.2f) | $(ratio "$mg" "$get") |"
    emit "| get $(human "$b") to stdout, /dev/null | $mn | $(fmt "$cn" %.2f) | $(fmt "$get") | $(fmt "$get_cpu" %.2f) | $(ratio "$mn" "$get") |"
    emit "| put $(human "$b") | $mp | $(fmt "$cp" %.2f) | $(fmt "$put") | $(fmt "$put_cpu" %.2f) | $(ratio "$mp" "$put") |"
}

# ------------------------------------------------------------------ run

emit "## bench/peers.sh, $MODE"
emit_setup
only a && sec_a
only b && sec_b
only c && sec_c
stop_ceph
only d && sec_d
emit "" "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
if [ "$SELFTEST" = 1 ]; then
    # every row of (a) has a rate: the script parsed what putget printed
    echo "$PROG: self-test ok" >&2
fi
