#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Install the build into a DESTDIR, then build tests/install/consumer.c outside
# the tree four ways: pkg-config and find_package(railio), each against the
# shared and the static library. Run each against mock:// and a railiod (the
# installed one) on loopback; each checks that it did not load librados.
# The installed railio finds the modules of its own tree (not only those of
# the configured prefix), RIO_MODULE_DIR overrides, a missing one is a clear
# error; no installed object has a RUNPATH.
# Then make uninstall (from install_manifest.txt) and check that nothing is left.
#
#   tests/install/test_install.sh BUILD_DIR SOURCE_DIR
set -euo pipefail

build=$(cd "${1:?usage: test_install.sh BUILD_DIR SOURCE_DIR}" && pwd)
src=$(cd "${2:?usage: test_install.sh BUILD_DIR SOURCE_DIR}" && pwd)
tmp=$(mktemp -d /tmp/railio-install-XXXXXX)
manifest=$build/install_manifest.txt
pid=

cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    # The build's own manifest (a real `make install`) is put back.
    [ -f "$tmp/manifest.saved" ] && cp "$tmp/manifest.saved" "$manifest"
    [ -f "$tmp/manifest.saved" ] || rm -f "$manifest"
    rm -rf "$tmp"
}
trap cleanup EXIT

fail() {
    echo "test_install: FAIL: $*" >&2
    exit 1
}

for tool in pkg-config cmake cc make; do
    command -v "$tool" >/dev/null || { echo "test_install: SKIP: no $tool"; exit 77; }
done
[ -f "$manifest" ] && cp "$manifest" "$tmp/manifest.saved"

# ---------------------------------------------------------------- install
dest=$tmp/root
DESTDIR=$dest cmake --install "$build" >"$tmp/install.log" || { cat "$tmp/install.log"; fail "cmake --install"; }
prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$build/CMakeCache.txt")
root=$dest$prefix
so=$(find "$root" -name 'librailio.so.[0-9]*.*' | head -n 1)
[ -n "$so" ] || fail "no librailio.so.MAJOR.MINOR.PATCH under $root"
libdir=$(dirname "$so")
for f in bin/railio sbin/railiod include/railio.h include/railio_mock.h \
    share/doc/railio/LICENSE; do
    [ -e "$root/$f" ] || fail "not installed: $f"
done
for f in librailio.so librailio.so.0 librailio.a pkgconfig/railio.pc cmake/railio/railioConfig.cmake \
    cmake/railio/railioConfigVersion.cmake; do
    [ -e "$libdir/$f" ] || fail "not installed: $libdir/$f"
done
[ "$(readelf -d "$so" | sed -n 's/.*soname: \[\(.*\)\]/\1/p')" = librailio.so.0 ] || fail "SONAME"
if grep -q '^RIO_HAVE_RADOS:INTERNAL=ON' "$build/CMakeCache.txt" 2>/dev/null ||
    [ -f "$build/modules/railio-rados.so" ]; then
    [ -f "$libdir/railio/modules/railio-rados.so" ] || fail "rados module not installed"
    [ -f "$libdir/railio/modules/railio-s3.so" ] || fail "s3 module not installed"
    have_rados=1
else
    have_rados=0
fi
for m in man1/railio.1 man3/railio.3 man8/railiod.8; do
    if [ -f "$build/man/$(basename "$m")" ]; then
        [ -f "$root/share/man/$m" ] || fail "man page not installed: $m"
    fi
done

# ------------------------------------------------------- installed files
# As lintian would have them: no RUNPATH/RPATH (the build tree's is dropped).
for f in "$root/bin/railio" "$root/sbin/railiod" "$so" "$libdir"/railio/modules/*.so; do
    [ -f "$f" ] || continue
    readelf -d "$f" | grep -qE '\((RUNPATH|RPATH)\)' && fail "$f has a RUNPATH or RPATH"
done

# ------------------------------------------------ the installed CLI's modules
# The installed railio (linked with librailio.a) finds the modules of its own
# tree (BINDIR/../LIBDIR/railio/modules), not only those of the configured
# prefix: here the tree is DESTDIR/PREFIX, as after `cmake --install --prefix`.
if [ "$have_rados" = 1 ]; then
    rados_url="rados://pool/obj?conf=$tmp/no-ceph.conf"
    env -u RIO_MODULE_DIR "$root/bin/railio" version | grep -q 'backends:.*rados' ||
        fail "the installed railio does not see its rados module"
    LD_DEBUG=files env -u RIO_MODULE_DIR "$root/bin/railio" stat "$rados_url" >"$tmp/ld.log" 2>&1 || true
    grep -q "file=$root/bin/\.\./.*railio/modules/railio-rados.so .*dynamically loaded" "$tmp/ld.log" ||
        { cat "$tmp/ld.log" | grep -v '^ *[0-9]*:' ; fail "the installed railio did not load $libdir/railio/modules/railio-rados.so"; }
    # RIO_MODULE_DIR elsewhere: looked for there alone, and said so.
    out=$(RIO_MODULE_DIR=$tmp/elsewhere "$root/bin/railio" stat "$rados_url" 2>&1) && fail "rados:// without its module"
    grep -q "railio-rados.so, found in none of: $tmp/elsewhere (install railio's rados module" <<<"$out" ||
        fail "RIO_MODULE_DIR elsewhere: $out"
    # The module deleted (and none at the configured prefix): a clear error.
    if [ ! -e "$prefix/${libdir#"$root"/}/railio/modules/railio-rados.so" ]; then
        mv "$libdir/railio/modules/railio-rados.so" "$tmp/railio-rados.so"
        out=$(env -u RIO_MODULE_DIR "$root/bin/railio" stat "$rados_url" 2>&1) && fail "rados:// without its module"
        mv "$tmp/railio-rados.so" "$libdir/railio/modules/railio-rados.so"
        grep -q "rados:// is served by the module railio-rados.so, found in none of: .*install railio's rados module" <<<"$out" ||
            fail "no clear error for a missing module: $out"
    fi
fi

# ------------------------------------------------------------ a railiod
"$root/sbin/railiod" --listen 127.0.0.1:0 --port-file "$tmp/ports" --memory 64M \
    --threads 2 >"$tmp/railiod.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
    [ -s "$tmp/ports" ] && break
    kill -0 "$pid" 2>/dev/null || { cat "$tmp/railiod.log"; fail "railiod exited"; }
    sleep 0.1
done
[ -s "$tmp/ports" ] || fail "railiod wrote no port file"
url="railio://$(head -n 1 "$tmp/ports" | cut -d, -f1)"

# ------------------------------------------------------------ consumers
cp "$src/tests/install/consumer.c" "$src/tests/install/CMakeLists.txt" "$tmp/"
export PKG_CONFIG_PATH=$libdir/pkgconfig PKG_CONFIG_SYSROOT_DIR=$dest

# pkg-config, shared: -lrailio finds librailio.so.
# shellcheck disable=SC2046
cc -o "$tmp/pc_shared" "$tmp/consumer.c" $(pkg-config --cflags --libs railio) ||
    fail "cc with pkg-config (shared)"
# pkg-config, static: the archive itself, and --static for what it needs.
pc_static=$(pkg-config --static --libs railio | sed 's/-lrailio\b//')
# shellcheck disable=SC2046,SC2086
cc -o "$tmp/pc_static" "$tmp/consumer.c" $(pkg-config --cflags railio) "$libdir/librailio.a" \
    $pc_static || fail "cc with pkg-config --static"
unset PKG_CONFIG_SYSROOT_DIR

cmake -S "$tmp" -B "$tmp/cm" -DCMAKE_PREFIX_PATH="$root" -DCMAKE_BUILD_TYPE=Release \
    >"$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log"; fail "find_package(railio)"; }
cmake --build "$tmp/cm" >>"$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log"; fail "build with railio::railio"; }

for prog in pc_shared pc_static cm/consumer_shared cm/consumer_static; do
    bin=$tmp/$prog
    case "$prog" in
    *static)
        ldd "$bin" | grep -q librailio && fail "$prog links librailio.so"
        ;;
    *)
        # The installed library, not one from the build tree or the system.
        [ "$(LD_LIBRARY_PATH=$libdir ldd "$bin" | sed -n 's/.*librailio.so.0 => \([^ ]*\).*/\1/p')" = \
            "$libdir/librailio.so.0" ] || fail "$prog does not resolve $libdir/librailio.so.0"
        ;;
    esac
    ldd "$bin" | grep -qE 'librados|libcurl' && fail "$prog links librados or libcurl"
    out=$(LD_LIBRARY_PATH=$libdir "$bin" "$url" 2>&1) || { echo "$out"; fail "$prog"; }
    echo "$prog: $out" | head -n 1
    grep -q "round trip $url" <<<"$out" || fail "$prog: no railio:// round trip"
    grep -q 'librados and libcurl not loaded' <<<"$out" || fail "$prog: librados/libcurl check"
    # The shared library finds its modules next to itself.
    if [ "$have_rados" = 1 ] && [ "${prog%static}" = "$prog" ]; then
        grep -q 'backends:.*s3 http https.*rados' <<<"$out" || fail "$prog: modules not found next to the library"
    fi
done

# The Python extension built against the staged install, as a packager
# builds it (python/setup.py through pkg-config with PKG_CONFIG_SYSROOT_DIR):
# no RUNPATH into the staging tree (it had one: the sysroot was taken as
# part of the library's place), and it works.
py=/usr/bin/python3
if [ -x "$py" ] && "$py" -c 'import setuptools, sysconfig, os, sys
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' 2>/dev/null; then
    cp -r "$src/python" "$tmp/py"
    (cd "$tmp/py" && PKG_CONFIG_PATH=$libdir/pkgconfig PKG_CONFIG_SYSROOT_DIR=$dest \
        "$py" setup.py build_ext --inplace >"$tmp/py.log" 2>&1) || { cat "$tmp/py.log"; fail "python build_ext"; }
    ext=$(find "$tmp/py/railio" -name '_railio*.so' | head -n 1)
    [ -n "$ext" ] || fail "python: no extension built"
    readelf -d "$ext" | grep -E '\((RUNPATH|RPATH)\)' | grep -qF "$dest" && fail "python: RUNPATH into the staging tree"
    out=$(cd "$tmp" && PYTHONPATH=$tmp/py LD_LIBRARY_PATH=$libdir "$py" -c 'import railio
c = railio.Client("mock://install-py")
c.put("k", b"abc")
assert c.get("k") == b"abc"
print("python: mock round trip")' 2>&1) || { echo "$out"; fail "python: import and round trip"; }
    echo "$out"
fi

# ------------------------------------------------------------- uninstall
# make uninstall reads the manifest, which names the installed paths without DESTDIR.
grep -q "^$prefix/" "$manifest" || fail "install_manifest.txt does not list $prefix/..."
make -s -C "$src" uninstall MANIFEST="$manifest" DESTDIR="$dest" >"$tmp/uninstall.log" ||
    { cat "$tmp/uninstall.log"; fail "make uninstall"; }
left=$(find "$dest" -type f -o -type l)
[ -z "$left" ] || fail "left after make uninstall: $left"
left=$(find "$dest" -type d -name 'railio*')
[ -z "$left" ] || fail "directories left after make uninstall: $left"
echo "test_install: installed, built 4 consumers, ran them against mock:// and $url, make uninstall left nothing"
