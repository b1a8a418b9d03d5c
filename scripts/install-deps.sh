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
    zlib1g-dev           # railiod --s3-listen: x-amz-checksum-crc32
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

if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "install-deps: dpkg-query not found: this script supports Debian and its derivatives" >&2
    exit 1
fi

missing=()
for p in "${PACKAGES[@]}"; do
    installed "$p" || missing+=("$p")
done

if [ "${#missing[@]}" -eq 0 ]; then
    exit 0
fi

if [ "$check" -eq 1 ]; then
    echo "install-deps: missing packages: ${missing[*]}" >&2
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
