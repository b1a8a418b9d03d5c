#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fail when a source file lacks its SPDX licence line.
#
#   scripts/check-spdx.sh [SOURCE_DIR]
#
# C sources and headers: line 1 is exactly "/* SPDX-License-Identifier: Apache-2.0 */".
# Scripts (a file starting with "#!"): line 2 is "# SPDX-License-Identifier: Apache-2.0".
# Python, CMake and make files, the .in templates: line 1 is that "# SPDX..." line.
# Man page sources (*.scd, whose first line must be the title): line 3 is
# "; SPDX-License-Identifier: Apache-2.0" (a comment scdoc drops).
# The files are those git tracks; without git, a walk of include/ src/ tests/
# bench/ scripts/ .ci/ contrib/ python/ man/ cmake/ and the top-level build files.
set -euo pipefail

src=${1:-$(dirname "$0")/..}
cd "$src"

C_LINE='/* SPDX-License-Identifier: Apache-2.0 */'
SH_LINE='# SPDX-License-Identifier: Apache-2.0'

if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    mapfile -t files < <(git ls-files -- include src tests bench scripts .ci contrib python man \
        cmake CMakeLists.txt Makefile)
else
    mapfile -t files < <(find include src tests bench scripts .ci contrib python man cmake \
        CMakeLists.txt Makefile -type f 2>/dev/null | sort)
fi

bad=0
checked=0
for f in "${files[@]}"; do
    [ -f "$f" ] || continue
    case "$f" in
    *.c | *.h)
        checked=$((checked + 1))
        if [ "$(head -n 1 "$f")" != "$C_LINE" ]; then
            echo "check-spdx: $f: line 1 is not '$C_LINE'" >&2
            bad=$((bad + 1))
        fi
        ;;
    *.scd)
        checked=$((checked + 1))
        if [ "$(sed -n 3p "$f")" != "; SPDX-License-Identifier: Apache-2.0" ]; then
            echo "check-spdx: $f: line 3 (after the title) is not '; SPDX-License-Identifier: Apache-2.0'" >&2
            bad=$((bad + 1))
        fi
        ;;
    *CMakeLists.txt | *Makefile | *.cmake | *.in | *.py | *.pyi)
        checked=$((checked + 1))
        line=$(head -n 1 "$f")
        [ "${line:0:2}" = "#!" ] && line=$(sed -n 2p "$f")
        if [ "$line" != "$SH_LINE" ]; then
            echo "check-spdx: $f: its first line (after a shebang) is not '$SH_LINE'" >&2
            bad=$((bad + 1))
        fi
        ;;
    *)
        [ "$(head -c 2 "$f" | tr -d '\000')" = "#!" ] || continue
        checked=$((checked + 1))
        if [ "$(sed -n 2p "$f")" != "$SH_LINE" ]; then
            echo "check-spdx: $f: line 2 (after the shebang) is not '$SH_LINE'" >&2
            bad=$((bad + 1))
        fi
        ;;
    esac
done

if [ "$checked" -eq 0 ]; then
    echo "check-spdx: no source file found under $PWD" >&2
    exit 1
fi
if [ "$bad" -ne 0 ]; then
    echo "check-spdx: $bad of $checked files lack the SPDX line" >&2
    exit 1
fi
echo "check-spdx: $checked files carry the SPDX line"
