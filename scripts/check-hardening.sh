#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fail unless the programs, the shared library and the modules are built as
# Debian's hardening=+all builds a package (what lintian and hardening-check
# look at): no executable stack, full RELRO (GNU_RELRO and BIND_NOW), PIE
# programs, stack canaries and, unless FORTIFY=0 (Debug or sanitizer builds),
# the fortified libc calls (__*_chk).
#
#   scripts/check-hardening.sh [--no-fortify] FILE...
set -euo pipefail

fortify=1
if [ "${1:-}" = --no-fortify ]; then
    fortify=0
    shift
fi
[ "$#" -gt 0 ] || { echo "usage: check-hardening.sh [--no-fortify] FILE..." >&2; exit 2; }

status=0
bad() {
    echo "check-hardening: $1: $2" >&2
    status=1
}
for f in "$@"; do
    [ -f "$f" ] || { bad "$f" "missing"; continue; }
    phdrs=$(readelf -lW "$f")
    dyn=$(readelf -dW "$f")
    syms=$(nm -D --undefined-only "$f")
    stack=$(awk '$1 == "GNU_STACK" {print $(NF-1)}' <<<"$phdrs")
    [ "$stack" = RW ] || bad "$f" "stack is '${stack:-absent}', not RW (executable stack)"
    grep -q GNU_RELRO <<<"$phdrs" || bad "$f" "no GNU_RELRO (-z relro)"
    grep -qE 'BIND_NOW|FLAGS.*\bNOW\b' <<<"$dyn" || bad "$f" "no BIND_NOW (-z now): partial RELRO"
    if readelf -hW "$f" | grep -q 'Type:.*EXEC'; then
        bad "$f" "not PIE"
    elif grep -q INTERP <<<"$phdrs" && ! grep -qE 'FLAGS_1.*\bPIE\b' <<<"$dyn"; then
        bad "$f" "a program without the PIE flag"
    fi
    grep -q '__stack_chk_fail' <<<"$syms" || bad "$f" "no stack protector (__stack_chk_fail)"
    if [ "$fortify" = 1 ]; then
        grep -qE ' U __[a-z_]+_chk(@|$)' <<<"$syms" || bad "$f" "no fortified call (_FORTIFY_SOURCE)"
    fi
done
[ "$status" -eq 0 ] && echo "check-hardening: $# files: RW stack, full RELRO, PIE, canaries$([ "$fortify" = 1 ] && echo ', fortified')"
exit "$status"
