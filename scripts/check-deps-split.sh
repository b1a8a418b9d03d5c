#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fail unless `make` (scripts/install-deps.sh build) installs no test peer and
# `make test` (scripts/install-deps.sh test) installs every one of them.
set -euo pipefail

deps=$(dirname "$0")/install-deps.sh
PEERS="ceph-mon ceph-osd ceph-common radosgw fio iperf3 nftables awscli"
build=$(bash "$deps" --list build)
test_set=$(bash "$deps" --list test)
all=$(bash "$deps" --list)
status=0
for p in $PEERS; do
    if grep -qx "$p" <<<"$build"; then
        echo "check-deps-split: the build set installs the test peer $p" >&2
        status=1
    fi
    grep -qx "$p" <<<"$test_set" || { echo "check-deps-split: the test set lacks $p" >&2; status=1; }
done
# What the build runs or links (CMakePresets.json: Ninja; CMakeLists.txt).
for p in build-essential cmake ninja-build pkg-config scdoc libxxhash-dev libssl-dev liburing-dev \
    libcurl4-openssl-dev librados-dev; do
    grep -qx "$p" <<<"$build" || { echo "check-deps-split: the build set lacks $p" >&2; status=1; }
done
# Nor may a build package pull a peer in (librados-dev must not bring a Ceph daemon).
if command -v apt-cache >/dev/null 2>&1; then
    # shellcheck disable=SC2086
    pulled=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
        --no-replaces --no-enhances $build 2>/dev/null | grep -E '^[a-z0-9]' | sort -u) || pulled=
    for p in $PEERS radosgw ceph-mgr ceph-mds; do
        if grep -qx "$p" <<<"$pulled"; then
            echo "check-deps-split: a build package depends on the test peer $p" >&2
            status=1
        fi
    done
fi
[ "$test_set" = "$all" ] || { echo "check-deps-split: the default set is not the test set" >&2; status=1; }
[ "$status" -eq 0 ] && echo "check-deps-split: build: $(wc -l <<<"$build") packages, test: $(wc -l <<<"$test_set")"
exit "$status"
