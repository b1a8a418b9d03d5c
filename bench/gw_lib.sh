# SPDX-License-Identifier: Apache-2.0
# Sourced by bench/gateway.sh and bench/listing.sh: one single-host Ceph
# cluster with radosgw (tests/harness/ceph.sh --rgw) and railiod's S3
# gateway over a pool of it, both with radosgw's user's keys, stopped and
# removed on exit.
#   gw_bench_start NAME MEMSTORE
# sets DIR (scratch, removed on exit), POOL (the gateway's rados:// URL),
# GW (its http://HOST:PORT), S3_ENDPOINT, S3_ACCESS_KEY, S3_SECRET_KEY
# (radosgw's, from s3.env), SIGV4 (curl's signing arguments), and exports
# the aws CLI's AWS_* (path-style addressing). Needs ROOT, BUILD, and PY
# (a python3 with boto3 or without: only socket is used here).

GWPID=
gw_bench_cleanup() {
    [ -n "$GWPID" ] && kill "$GWPID" 2>/dev/null && wait "$GWPID" 2>/dev/null
    bash "$ROOT/tests/harness/ceph.sh" stop "$DIR/ceph" >/dev/null 2>&1 || true
    rm -rf "$DIR"
}

gw_bench_start() {
    local name=$1 memstore=$2 rgwport
    DIR=$(mktemp -d "${TMPDIR:-/tmp}/rio-$name-bench.XXXXXX")
    trap gw_bench_cleanup EXIT
    rgwport=$(${PY:-python3} -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    bash "$ROOT/tests/harness/ceph.sh" start "$DIR/ceph" --pool rio --memstore "$memstore" \
        --rgw "$rgwport" --owner $$ >&2
    # shellcheck disable=SC1091
    . "$DIR/ceph/s3.env"
    # The gateway serves radosgw's user too: the same keys for both.
    printf '%s %s *\n' "$S3_ACCESS_KEY" "$S3_SECRET_KEY" > "$DIR/keys"
    chmod 600 "$DIR/keys"
    POOL="rados://rio?conf=$DIR/ceph/ceph.conf"
    "$BUILD/railiod" --listen 127.0.0.1:0 --port-file "$DIR/ports" --log-level warn \
        --s3-listen 127.0.0.1:0 --s3-keys "$DIR/keys" --s3-backend "$POOL" \
        2> "$DIR/railiod.log" &
    GWPID=$!
    for _ in $(seq 100); do [ -s "$DIR/ports" ] && grep -q s3= "$DIR/ports" && break; sleep 0.1; done
    GW=http://$(sed -n 's/^s3=//p' "$DIR/ports")
    export AWS_ACCESS_KEY_ID=$S3_ACCESS_KEY AWS_SECRET_ACCESS_KEY=$S3_SECRET_KEY
    export AWS_DEFAULT_REGION=us-east-1 AWS_SHARED_CREDENTIALS_FILE=/dev/null
    export AWS_CONFIG_FILE=$DIR/awscfg
    printf '[default]\ns3 =\n    addressing_style = path\n' > "$AWS_CONFIG_FILE"
    # UNSIGNED-PAYLOAD: radosgw refuses curl's signature without x-amz-content-sha256.
    SIGV4=(--aws-sigv4 aws:amz:us-east-1:s3 --user "$S3_ACCESS_KEY:$S3_SECRET_KEY"
        -H "x-amz-content-sha256: UNSIGNED-PAYLOAD")
}
