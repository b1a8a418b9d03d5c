#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fail unless the shared library exports exactly the public API: every
# function declared in include/*.h, and nothing else (an internal rio__* or
# any other name that leaks fails).
#
#   scripts/check-exports.sh LIBRAILIO_SO [SOURCE_DIR]
set -euo pipefail

lib=${1:?usage: check-exports.sh LIBRAILIO_SO [SOURCE_DIR]}
src=${2:-$(dirname "$0")/..}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Defined dynamic symbols, the version node (RAILIO_0) aside.
nm -D --defined-only --format=posix "$lib" | awk '{print $1}' | sed 's/@.*//' |
    grep -v '^RAILIO_[0-9]*$' | sort -u >"$tmp/exported"
# Function declarations of the public headers: "rio_name(" at a line's start
# or after a return type.
cat "$src"/include/*.h | grep -oE '(^|[ *])rio_[a-z][a-z0-9_]*\(' |
    grep -oE 'rio_[a-z0-9_]+' | sort -u >"$tmp/declared"

status=0
if leaked=$(comm -23 "$tmp/exported" "$tmp/declared") && [ -n "$leaked" ]; then
    echo "check-exports: $lib exports names that are not public API:" >&2
    echo "$leaked" | sed 's/^/  /' >&2
    status=1
fi
if missing=$(comm -13 "$tmp/exported" "$tmp/declared") && [ -n "$missing" ]; then
    echo "check-exports: declared in include/ but not exported by $lib:" >&2
    echo "$missing" | sed 's/^/  /' >&2
    status=1
fi
soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
case "$soname" in
librailio.so.[0-9]*) ;;
*)
    echo "check-exports: $lib: SONAME '$soname', expected librailio.so.MAJOR" >&2
    status=1
    ;;
esac
[ "$status" -eq 0 ] && echo "check-exports: $(wc -l <"$tmp/exported") public symbols, SONAME $soname"
exit "$status"
