#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Install the Debian packages railio's build, or its tests, need.
#
#   scripts/install-deps.sh [--check] [build|test|all]
#     build   what `make` needs: compiler, CMake, the libraries, scdoc
#     test    build, plus the tests' peers: Ceph daemons, radosgw, fio, iperf3,
#             nftables, awscli, clang (fuzz, TSan) ...
#     all     the same as test (the default)
#   --check   list what is missing; exit 1 if anything is
#   --list    print the set's packages, one a line, and exit
#
# With the test set, where Node.js 20 or newer and npm are on the PATH, the
# npm packages of the gateway's JavaScript tests (the AWS SDK for
# JavaScript v3, the MinIO SDK: tests/integration/test_gw_js.c) go into
# $RIO_NPM_DIR (default ~/.cache/railio/npm) when missing; without Node.js
# those tests skip. A failed npm install warns and does not fail.
#
# Idempotent: asks dpkg first and only runs apt-get for missing packages.
# Runs apt-get directly as root, through sudo otherwise.
set -euo pipefail

BUILD_PACKAGES=(
    build-essential
    cmake
    ninja-build
    pkg-config
    scdoc # man pages (man/*.scd)
    libxxhash-dev
    libssl-dev           # libcrypto (HMAC, MD5) and libssl (railio:// tls=on)
    liburing-dev         # file:// transport (io_uring)
    libcurl4-openssl-dev # s3:// and http(s):// transport (libcurl)
    librados-dev         # rados:// module (librados)
    libmicrohttpd-dev    # railiod --s3-listen: the S3 gateway (HTTP/1.1 server)
    zlib1g-dev           # tests/unit/test_checksum: zlib's CRC-32 against the library's
)

TEST_PACKAGES=(
    clang
    libclang-rt-14-dev # clang's sanitizer runtimes
    clang-format
    fio      # file:// bench ceiling
    curl     # s3 tests: SigV4 cross-checks with the curl CLI
    python3  # s3 tests: tests/harness/s3fault.py
    awscli   # s3 bench ceiling (railio bench s3://, aws s3 cp); gateway tests
    s3cmd    # gateway tests: tests/integration/test_gw_clients
    rclone   # gateway tests: tests/integration/test_gw_clients
    restic   # gateway tests: tests/integration/test_gw_compat
    s3fs     # gateway tests: test_gw_clients (the bucket mounted with s3fs-fuse)
    s3backer # gateway tests: test_gw_clients (the bucket as a block device)
    chromium-headless-shell # gateway tests: test_gw_cors (a browser on another origin)
    python3-boto3 # gateway tests: test_gw_clients (boto3)
    ceph-mon # rados tests: tests/harness/ceph.sh (single-host cluster)
    ceph-osd
    ceph-common
    radosgw  # s3 tests: tests/harness/ceph.sh --rgw
    iperf3   # railio:// bench ceiling (railio bench --ceiling)
    openssl  # TLS tests: certificates for test_tcp_tls, bench/tls.sh
    nftables # rails tests: tests/harness/rails.sh fails a rail (nft drop / reset)
    iproute2 # rails tests: ip netns, veth, tc tbf (tests/harness/rails.sh)
    python3-dev        # python/: the railio._railio extension (Python.h)
    python3-setuptools # python/setup.py
    python3-pytest     # python/tests (ctest python/pytest)
    python3-numpy      # python/tests: numpy buffers
    python3-torch      # python/tests: CPU torch tensors
)

usage() {
    sed -n '2,14s/^# \{0,1\}//p' "$0"
}

check=0
list=0
set_name=all
for arg in "$@"; do
    case "$arg" in
    --check) check=1 ;;
    --list) list=1 ;;
    build | test | all) set_name=$arg ;;
    -h | --help)
        usage
        exit 0
        ;;
    *)
        usage >&2
        exit 2
        ;;
    esac
done
PACKAGES=("${BUILD_PACKAGES[@]}")
[ "$set_name" = build ] || PACKAGES+=("${TEST_PACKAGES[@]}")
if [ "$list" -eq 1 ]; then
    printf '%s\n' "${PACKAGES[@]}"
    exit 0
fi

installed() {
    [ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" = "installed" ]
}

NPM_PEERS=(@aws-sdk/client-s3 @aws-sdk/lib-storage @aws-sdk/s3-request-presigner minio)
# The npm peers (above): with --check, 1 when Node.js 20+ and npm are here
# and one is missing; else installed when missing (a failure only warns).
npm_peers() {
    local dir=${RIO_NPM_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/railio/npm} major missing_npm=0
    [ "$set_name" != build ] || return 0
    if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
        [ "$check" -eq 1 ] ||
            echo "install-deps: no Node.js with npm: the JavaScript SDK gateway tests will skip" >&2
        return 0
    fi
    major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
    if [ "$major" -lt 20 ]; then
        [ "$check" -eq 1 ] ||
            echo "install-deps: Node.js $major (the AWS SDK needs 20): its gateway tests will skip" >&2
        return 0
    fi
    for p in "${NPM_PEERS[@]}"; do
        [ -f "$dir/node_modules/$p/package.json" ] || missing_npm=1
    done
    [ "$missing_npm" -eq 1 ] || return 0
    if [ "$check" -eq 1 ]; then
        echo "install-deps: missing npm packages in $dir: ${NPM_PEERS[*]}" >&2
        return 1
    fi
    echo "install-deps: npm install ${NPM_PEERS[*]} into $dir"
    mkdir -p "$dir"
    npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "${NPM_PEERS[@]}" >&2 ||
        echo "install-deps: npm install failed: the JavaScript SDK gateway tests will skip" >&2
}

if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "install-deps: dpkg-query not found: this script supports Debian and its derivatives" >&2
    exit 1
fi

missing=()
for p in "${PACKAGES[@]}"; do
    installed "$p" || missing+=("$p")
done

if [ "${#missing[@]}" -eq 0 ]; then
    npm_peers # with --check: its status
    exit $?
fi

if [ "$check" -eq 1 ]; then
    echo "install-deps: missing packages: ${missing[*]}" >&2
    npm_peers || true
    exit 1
fi

if [ "$(id -u)" -eq 0 ]; then
    as_root=()
elif command -v sudo >/dev/null 2>&1; then
    as_root=(sudo)
else
    echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"

still=()
for p in "${missing[@]}"; do
    installed "$p" || still+=("$p")
done
if [ "${#still[@]}" -ne 0 ]; then
    echo "install-deps: still missing after apt-get: ${still[*]}" >&2
    exit 1
fi
npm_peers
