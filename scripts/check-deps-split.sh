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
for p in cmake pkg-config scdoc libxxhash-dev libssl-dev; do
    grep -qx "$p" <<<"$build" || { echo "check-deps-split: the build set lacks $p" >&2; status=1; }
done
[ "$test_set" = "$all" ] || { echo "check-deps-split: the default set is not the test set" >&2; status=1; }
[ "$status" -eq 0 ] && echo "check-deps-split: build: $(wc -l <<<"$build") packages, test: $(wc -l <<<"$test_set")"
exit "$status"
