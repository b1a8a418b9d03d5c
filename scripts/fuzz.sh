#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Build the libFuzzer targets (tests/fuzz/fuzz_<name>.c) with clang
# (-fsanitize=fuzzer,address,undefined) and fuzz each for a while.
#
#   scripts/fuzz.sh [-k] [-o OUTDIR] [-t SECONDS] [-j JOBS] [NAME...]
#
# NAME is a target's file stem without fuzz_ (proto, http, ...); none means
# every tests/fuzz/fuzz_*.c. A target names its library sources, paths from
# the repository root, in a comment in its first 20 lines:
#     /* FUZZ_SOURCES src/proto/proto.c src/core/checksum.c */
# (more such lines when one would pass 100 columns) and, when it needs more than libxxhash and libcrypto, pkg-config modules:
#     /* FUZZ_PKGS libcurl */
# Its seed corpus is tests/fuzz/corpus/<name>/ (read, never written).
#
# Per target, under OUTDIR/<name>/ (OUTDIR default build/fuzz): the binary,
# corpus/ (what the fuzzer found; emptied first unless -k keeps it across
# runs), crashes/ (crash-*, leak-*, timeout-* inputs) and log.
#   -t SECONDS  how long each target fuzzes (default 10)
#   -j JOBS     targets fuzzed at once (default 1)
#   -k          keep each target's corpus from earlier runs (make fuzz)
# Environment: CLANG (default clang), FUZZ_SEED (libFuzzer -seed, default 1,
# so a run is repeatable), FUZZ_ARGS (more libFuzzer arguments).
# Exit: 0 clean, 1 a build failure, a crash or a failed check (the input is in
# crashes/, the log says which), 77 when no clang with libFuzzer is installed
# (scripts/install-deps.sh installs it).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/build/fuzz
secs=10
jobs=1
keep=0
while getopts "ko:t:j:" opt; do
    case $opt in
    k) keep=1 ;;
    o) out=$OPTARG ;;
    t) secs=$OPTARG ;;
    j) jobs=$OPTARG ;;
    *) sed -n '3,26p' "$0" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
cc=${CLANG:-clang}

names=("$@")
if [ ${#names[@]} -eq 0 ]; then
    for f in "$root"/tests/fuzz/fuzz_*.c; do
        n=$(basename "$f" .c)
        names+=("${n#fuzz_}")
    done
fi

if ! command -v "$cc" >/dev/null 2>&1; then
    echo "fuzz: SKIP: $cc not found (scripts/install-deps.sh installs clang)" >&2
    exit 77
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)

# Does this clang have libFuzzer?
probe=$(mktemp -d "$out/probe.XXXXXX")
printf '#include <stdint.h>\n#include <stddef.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' >"$probe/p.c"
if ! "$cc" -fsanitize=fuzzer,address,undefined "$probe/p.c" -o "$probe/p" >/dev/null 2>&1; then
    rm -rf "$probe"
    echo "fuzz: SKIP: $cc cannot link -fsanitize=fuzzer (libclang-rt-dev missing?)" >&2
    exit 77
fi
rm -rf "$probe"

# decl FILE KEY: the words after KEY in FILE's first 20 lines.
# decl FILE WORD: what FILE's WORD lines say, joined (several add up:
# clang-format wraps a long one).
decl() {
    head -n 20 "$1" | sed -n "s|.*$2[[:space:]]\{1,\}\([^*]*\).*|\1|p" | tr '\n' ' '
}

# one NAME: build and fuzz one target; its output goes to OUTDIR/NAME/log.
one() {
    local name=$1 src=$root/tests/fuzz/fuzz_$1.c dir=$out/$1
    mkdir -p "$dir/crashes"
    if [ ! -f "$src" ]; then
        echo "fuzz: $name: no $src" >&2
        return 1
    fi
    local srcs pkgs cflags libs
    srcs=$(decl "$src" FUZZ_SOURCES)
    pkgs="libxxhash $(decl "$src" FUZZ_PKGS)"
    if [ -z "$srcs" ]; then
        echo "fuzz: $name: $src has no /* FUZZ_SOURCES ... */ line in its first 20 lines" >&2
        return 1
    fi
    # shellcheck disable=SC2086
    cflags=$(pkg-config --cflags $pkgs 2>/dev/null || true)
    # shellcheck disable=SC2086
    libs=$(pkg-config --libs $pkgs 2>/dev/null || echo -lxxhash)
    local files=()
    for s in $srcs; do files+=("$root/$s"); done
    # shellcheck disable=SC2086
    if ! "$cc" -std=gnu11 -g -O1 -fno-omit-frame-pointer \
        -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
        -Wall -Wextra -Werror -Wno-unused-function \
        -I"$root/include" -I"$root/src" -I"$root/tests/fuzz" $cflags \
        "$src" "${files[@]}" -o "$dir/fuzz_$name" $libs -lcrypto -lpthread -lm \
        >"$dir/log" 2>&1; then
        echo "fuzz: $name: build failed:" >&2
        cat "$dir/log" >&2
        return 1
    fi
    [ "$keep" = 1 ] || rm -rf "$dir/corpus"
    mkdir -p "$dir/corpus"
    local seeds=()
    [ -d "$root/tests/fuzz/corpus/$name" ] && seeds=("$root/tests/fuzz/corpus/$name")
    # The first directory receives what the fuzzer finds; the seed corpus is
    # only read. RIO_FUZZ_SEED_DIR: a target may write generated seeds there.
    # shellcheck disable=SC2086
    if ! (cd "$dir" && RIO_FUZZ_SEED_DIR="$dir/corpus" \
        ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}:abort_on_error=1" \
        UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}" \
        "$dir/fuzz_$name" -max_total_time="$secs" -seed="${FUZZ_SEED:-1}" \
        -rss_limit_mb=2048 -timeout=10 -max_len=65536 -print_final_stats=1 \
        -artifact_prefix="$dir/crashes/" ${FUZZ_ARGS:-} "$dir/corpus" "${seeds[@]}" \
        >>"$dir/log" 2>&1); then
        echo "fuzz: $name: FAILED (input in $dir/crashes/, log $dir/log):" >&2
        tail -n 60 "$dir/log" >&2
        return 1
    fi
    local execs
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -n 1)
    echo "fuzz: $name: clean, ${secs}s, ${execs:-?} runs, corpus $(find "$dir/corpus" -type f | wc -l) inputs"
}

rc=0
running=0
pids=()
for name in "${names[@]}"; do
    echo "fuzz: $name: building and fuzzing for ${secs}s"
    one "$name" &
    pids+=($!)
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then
        wait -n || rc=1
        running=$((running - 1))
    fi
done
while [ "$running" -gt 0 ]; do
    wait -n || rc=1
    running=$((running - 1))
done
exit $rc
