#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fail unless the generated man pages name, in bold, every subcommand and
# every option that `railio --help` and `railiod --help` list: railio(1) the
# CLI's, railiod(8) the server's; railio(3) must exist.
#
#   scripts/check-man.sh BUILD_DIR
set -euo pipefail

build=${1:?usage: check-man.sh BUILD_DIR}
man=$build/man
for page in railio.1 railiod.8 railio.3; do
    if [ ! -s "$man/$page" ]; then
        if ! command -v scdoc >/dev/null; then
            echo "check-man: SKIP: scdoc is not installed (apt-get install scdoc), no man pages"
            exit 77
        fi
        echo "check-man: $man/$page was not generated" >&2
        exit 1
    fi
done

status=0
# need PAGE WORD...: each WORD must appear as \fBWORD\fR in PAGE.
need() {
    local page=$1 word
    shift
    for word in "$@"; do
        if ! grep -qF "\\fB$word\\fR" "$man/$page"; then
            echo "check-man: $page lacks $word (add it to man/$page.scd)" >&2
            status=1
        fi
    done
}

cli_help=$("$build/railio" --help 2>&1 || true)
srv_help=$("$build/railiod" --help 2>&1 || true)
# Subcommands: the first word of each line of the commands section.
mapfile -t cmds < <(sed -n '/^commands:/,/^$/p' <<<"$cli_help" | sed -n 's/^  \([a-z][a-z]*\) .*/\1/p' | sort -u)
mapfile -t cli_opts < <(grep -oE -- '--[a-z][a-z0-9-]*' <<<"$cli_help" | sort -u)
mapfile -t srv_opts < <(grep -oE -- '--[a-z][a-z0-9-]*' <<<"$srv_help" | sort -u)
[ "${#cmds[@]}" -ge 5 ] || { echo "check-man: railio --help lists ${#cmds[@]} commands" >&2; exit 1; }
[ "${#srv_opts[@]}" -ge 5 ] || { echo "check-man: railiod --help lists ${#srv_opts[@]} options" >&2; exit 1; }

need railio.1 "${cmds[@]}" "${cli_opts[@]}"
need railiod.8 "${srv_opts[@]}"
# railio(3): every function of the public headers (in its bold prototype).
for fn in $(cat "$(dirname "$0")"/../include/*.h | grep -oE '(^|[ *])rio_[a-z][a-z0-9_]*\(' |
    grep -oE 'rio_[a-z0-9_]+' | sort -u); do
    grep -qE "[ *]$fn\(" "$man/railio.3" || { echo "check-man: railio.3 lacks $fn (add it to man/railio.3.scd)" >&2; status=1; }
done
# The pages an install gives name where that install put the docs: under
# the prefix given to `cmake --install --prefix` too, not the configured one.
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
if DESTDIR=$stage cmake --install "$build" --prefix /opt/rio-check >"$stage.log" 2>&1; then
    for page in railio.1 railiod.8; do
        f=$(find "$stage" -name "$page" -path '*man*' | head -1)
        paths=$(grep -oE '/[^ ]*share/doc/[^ ]*' "$f" 2>/dev/null | sed 's/\\&//g; s/[.)]*$//' || true)
        [ -n "$paths" ] || { echo "check-man: installed $page names no docs" >&2; status=1; }
        for p in $paths; do
            case $p in
            /opt/rio-check/*) [ -e "$stage$p" ] || { echo "check-man: installed $page names $p, not installed" >&2; status=1; } ;;
            *) echo "check-man: installed (--prefix /opt/rio-check) $page names $p" >&2; status=1 ;;
            esac
        done
    done
else
    echo "check-man: cmake --install failed:" >&2
    cat "$stage.log" >&2
    status=1
fi
rm -f "$stage.log"
[ "$status" -eq 0 ] && echo "check-man: ${#cmds[@]} commands, ${#cli_opts[@]} + ${#srv_opts[@]} options documented"
exit "$status"
