#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# railio:// plain TCP against tls=on on loopback: PUT and GET of one object,
# interleaved (plain, tls, plain, tls...) for ROUNDS rounds, against two
# railiods of the same build (one plain, one --tls-cert). Per transfer: MB/s
# (the CLI's own figure), CPU seconds per GiB of the client (/usr/bin/time)
# and of the server (/proc/PID/stat utime+stime before and after). Prints
# the AES-128-GCM ceiling of one core (openssl speed) in the same run.
#
#   bench/tls.sh [BUILD_DIR] [SIZE_MIB] [ROUNDS]     (defaults: build 256 3)
set -euo pipefail

BUILD=${1:-build}
MIB=${2:-256}
ROUNDS=${3:-3}
RAILIO=$BUILD/railio
RAILIOD=$BUILD/railiod
TMP=$(mktemp -d /tmp/railio-tls-bench.XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT

cd "$TMP"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key \
    -out ca.pem -days 2 -subj /CN=bench-ca -addext basicConstraints=critical,CA:TRUE 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout srv.key -out srv.csr \
    -subj /CN=localhost 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n' >srv.ext
openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem -days 2 \
    -extfile srv.ext 2>/dev/null
cd - >/dev/null

head -c $((MIB << 20)) /dev/urandom >"$TMP/obj"

"$RAILIOD" --listen 127.0.0.1:0 --port-file "$TMP/plain.port" --memory 2G \
    --log-level warn 2>"$TMP/plain.log" &
PIDS+=($!)
PLAIN_PID=$!
"$RAILIOD" --listen 127.0.0.1:0 --port-file "$TMP/tls.port" --memory 2G --log-level warn \
    --tls-cert "$TMP/srv.pem" --tls-key "$TMP/srv.key" 2>"$TMP/tls.log" &
PIDS+=($!)
TLS_PID=$!
for _ in $(seq 50); do
    [[ -s $TMP/plain.port && -s $TMP/tls.port ]] && break
    sleep 0.1
done
PLAIN_URL="railio://$(cat "$TMP/plain.port")"
TLS_URL="railio://$(cat "$TMP/tls.port")"
TLS_Q="?tls=on&tls_ca=$TMP/ca.pem"

ticks=$(getconf CLK_TCK)
srv_cpu() { awk -v t="$ticks" '{ printf "%.3f", ($14 + $15) / t }' "/proc/$1/stat"; }

echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -r) $(nproc) CPUs; object ${MIB} MiB; ${ROUNDS} rounds"
echo "# AES-128-GCM, one core, 16 KiB blocks (openssl speed):"
openssl speed -evp aes-128-gcm -seconds 2 -bytes 16384 2>/dev/null | tail -1 | sed 's/^/#   /'
printf '%-5s %-4s %-5s %9s %12s %12s\n' round op mode MB/s client_s/GiB server_s/GiB
gib=$(awk -v m="$MIB" 'BEGIN { print m / 1024 }')
for r in $(seq "$ROUNDS"); do
    for op in put get; do
        for mode in plain tls; do
            if [[ $mode == plain ]]; then url=$PLAIN_URL/obj-$r; q=""; pid=$PLAIN_PID; else
                url=$TLS_URL/obj-$r; q=$TLS_Q; pid=$TLS_PID; fi
            s0=$(srv_cpu "$pid")
            if [[ $op == put ]]; then
                /usr/bin/time -f '%U %S' -o "$TMP/time" "$RAILIO" put "$url$q" "$TMP/obj" \
                    >"$TMP/out" 2>&1
            else
                /usr/bin/time -f '%U %S' -o "$TMP/time" "$RAILIO" get "$url$q" - \
                    2>"$TMP/out" >/dev/null
            fi
            s1=$(srv_cpu "$pid")
            mbs=$(grep -o '^[0-9.]* MB/s' "$TMP/out" | head -1 | cut -d' ' -f1)
            read -r cu cs <"$TMP/time"
            awk -v r="$r" -v op="$op" -v mode="$mode" -v mbs="$mbs" -v cu="$cu" -v cs="$cs" \
                -v s0="$s0" -v s1="$s1" -v g="$gib" 'BEGIN {
                printf "%-5s %-4s %-5s %9s %12.2f %12.2f\n", r, op, mode, mbs, (cu + cs) / g,
                    (s1 - s0) / g }'
        done
    done
done
