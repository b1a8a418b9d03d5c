#!/usr/bin/env bash
# Build the protocol fuzz target with clang (libFuzzer + ASan + UBSan) and run
# it for a short while: the CI smoke for src/proto.
#
#   scripts/fuzz-smoke.sh [OUTDIR] [SECONDS]
#
# OUTDIR (default build/fuzz) receives the binary, the corpus and any crash
# artifact; nothing is written into the source tree. SECONDS defaults to 20.
# Environment: CLANG (default clang), FUZZ_SEED (libFuzzer -seed, default 1,
# so a run is repeatable), FUZZ_ARGS (more libFuzzer arguments).
# Exit: 0 clean, 1 a crash or a failed check (the input is in OUTDIR),
# 77 when no clang with libFuzzer is installed (scripts/install-deps.sh
# installs it).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/build/fuzz}
secs=${2:-20}
cc=${CLANG:-clang}

if ! command -v "$cc" >/dev/null 2>&1; then
    echo "fuzz-smoke: SKIP: $cc not found (scripts/install-deps.sh installs clang)" >&2
    exit 77
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)

# Does this clang have libFuzzer?
probe="$out/probe.c"
printf '#include <stdint.h>\n#include <stddef.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' >"$probe"
if ! "$cc" -fsanitize=fuzzer "$probe" -o "$out/probe" >/dev/null 2>&1; then
    echo "fuzz-smoke: SKIP: $cc cannot link -fsanitize=fuzzer (libclang-rt-dev missing?)" >&2
    exit 77
fi
rm -f "$probe" "$out/probe"

xxh_cflags=$(pkg-config --cflags libxxhash 2>/dev/null || true)
xxh_libs=$(pkg-config --libs libxxhash 2>/dev/null || echo -lxxhash)

echo "fuzz-smoke: building $out/fuzz_proto"
# The sources the target needs: the codec and the checksums (xxh3 for the
# header check; OpenSSL for the HMAC of AUTH).
"$cc" -std=gnu11 -g -O1 -fno-omit-frame-pointer \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    -Wall -Wextra -Werror \
    -I"$root/include" -I"$root/src" $xxh_cflags \
    "$root/tests/fuzz/fuzz_proto.c" "$root/src/proto/proto.c" "$root/src/core/checksum.c" \
    -o "$out/fuzz_proto" $xxh_libs -lcrypto

corpus="$out/corpus"
rm -rf "$corpus"
mkdir -p "$corpus"
cd "$out"
echo "fuzz-smoke: fuzzing for ${secs}s"
# shellcheck disable=SC2086
RIO_FUZZ_SEED_DIR="$corpus" ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}:abort_on_error=1" \
    "$out/fuzz_proto" -max_total_time="$secs" -seed="${FUZZ_SEED:-1}" -rss_limit_mb=2048 \
    -timeout=10 -max_len=4096 -print_final_stats=1 -artifact_prefix="$out/" \
    ${FUZZ_ARGS:-} "$corpus"
echo "fuzz-smoke: clean"
