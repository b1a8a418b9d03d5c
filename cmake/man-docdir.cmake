# SPDX-License-Identifier: Apache-2.0
# A rendered man page (IN) with its placeholder RIODOCDIRPLACEHOLDER (left
# alone by scdoc) made DOCDIR, written to OUT: at build time with the
# configured DOCDIR (build/man/, what check-man.sh reads), at install time
# with the prefix the install is made to (`cmake --install build --prefix
# P` included, which the configured path would not name).
#   cmake -DIN=... -DOUT=... -DDOCDIR=... -P man-docdir.cmake
file(READ "${IN}" _page)
string(REPLACE "RIODOCDIRPLACEHOLDER" "${DOCDIR}" _page "${_page}")
file(WRITE "${OUT}" "${_page}")
