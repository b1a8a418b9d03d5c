# SPDX-License-Identifier: Apache-2.0
"""Build railio's CPython extension (railio._railio) over librailio.

Where the library comes from, in this order:
- RAILIO_BUILD_DIR (an in-tree CMake build directory): the headers from
  ../include, librailio.so from that directory, with an rpath to it so the
  extension loads it without LD_LIBRARY_PATH;
- pkg-config railio (an installed library: `make install`);
- ../build when it holds librailio.so (a source checkout after `make`).
An installed library comes before ../build: a package installed against the
build tree would load librailio.so from there, and break once it went.
Which one was taken is printed.

Works offline with Debian's python3-setuptools and python3-dev:
`pip install --no-build-isolation ./python` or, in place,
`python3 setup.py build_ext --inplace`.
"""
import os
import shlex
import subprocess
import sys

from setuptools import Extension, find_packages, setup

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)


def _source_dir(build_dir):
    """The source tree a CMake build directory was configured from (pip may
    build from a copy of python/, so ../include is not always there)."""
    try:
        with open(os.path.join(build_dir, "CMakeCache.txt")) as f:
            for line in f:
                if line.startswith("CMAKE_HOME_DIRECTORY:"):
                    return line.split("=", 1)[1].strip()
    except OSError:
        pass
    return TOP


def _in_tree(build_dir):
    build_dir = os.path.abspath(build_dir)
    if not os.path.exists(os.path.join(build_dir, "librailio.so")):
        sys.exit("setup.py: RAILIO_BUILD_DIR=%s holds no librailio.so (run `make` first)" % build_dir)
    include = os.path.join(_source_dir(build_dir), "include")
    if not os.path.exists(os.path.join(include, "railio.h")):
        sys.exit("setup.py: %s has no railio.h" % include)
    return dict(
        include_dirs=[include],
        library_dirs=[build_dir],
        runtime_library_dirs=[build_dir],
        libraries=["railio"],
        extra_compile_args=[],
        extra_link_args=[],
    )


def _pkg_config():
    try:
        cflags = subprocess.check_output(["pkg-config", "--cflags", "railio"], text=True)
        libs = subprocess.check_output(["pkg-config", "--libs", "railio"], text=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    cfg = dict(include_dirs=[], library_dirs=[], runtime_library_dirs=[], libraries=[],
               extra_compile_args=[], extra_link_args=[])
    for f in shlex.split(cflags):
        if f.startswith("-I"):
            cfg["include_dirs"].append(f[2:])
        else:
            cfg["extra_compile_args"].append(f)
    # A staged install (PKG_CONFIG_SYSROOT_DIR=/tmp/pkg, as a packager
    # builds): pkg-config puts the sysroot before each path, but the library
    # will be loaded from the path without it, so that is what decides.
    sysroot = os.environ.get("PKG_CONFIG_SYSROOT_DIR", "").rstrip("/")
    for f in shlex.split(libs):
        if f.startswith("-L"):
            cfg["library_dirs"].append(f[2:])
            # a prefix outside the loader's default path (e.g. make install
            # PREFIX=/opt/railio): load that library without LD_LIBRARY_PATH
            where = f[2:]
            if sysroot and where.startswith(sysroot + "/"):
                where = where[len(sysroot):]
            if not where.startswith(("/usr/lib", "/lib")):
                cfg["runtime_library_dirs"].append(where)
        elif f.startswith("-l"):
            cfg["libraries"].append(f[2:])
        else:
            cfg["extra_link_args"].append(f)
    return cfg


def _library():
    env = os.environ.get("RAILIO_BUILD_DIR")
    if env:
        print("setup.py: librailio of the build directory %s (RAILIO_BUILD_DIR)" % env,
              file=sys.stderr)
        return _in_tree(env)
    cfg = _pkg_config()
    if cfg is not None:
        print("setup.py: the installed librailio (pkg-config railio)", file=sys.stderr)
        return cfg
    default = os.path.join(TOP, "build")
    if os.path.exists(os.path.join(default, "librailio.so")) and \
            os.path.exists(os.path.join(TOP, "include", "railio.h")):
        print("setup.py: librailio of the build directory %s (none installed)" % default,
              file=sys.stderr)
        return _in_tree(default)
    sys.exit("setup.py: librailio not found: set RAILIO_BUILD_DIR to a build directory, "
             "or install railio so that `pkg-config railio` finds it")


cfg = _library()
# Sources are named relative to this directory, wherever setup.py runs from.
os.chdir(HERE)
cfg["extra_compile_args"] += ["-std=gnu11", "-Wall", "-Wextra", "-Wshadow",
                              "-Wmissing-prototypes", "-Wstrict-prototypes",
                              "-Wno-missing-field-initializers", "-Wno-cast-function-type",
                              "-Werror=implicit-function-declaration"]

setup(
    name="railio",
    version="0.1.0",
    description="Move large objects over every path you have: railio's Python binding",
    license="Apache-2.0",
    packages=find_packages(include=["railio", "railio.*"]),
    package_dir={"": "."},
    package_data={"railio": ["py.typed", "*.pyi"]},
    python_requires=">=3.10",
    ext_modules=[
        Extension(
            "railio._railio",
            sources=["src/client.c", "src/stream.c"],
            depends=["src/railio_py.h"],
            **cfg,
        )
    ],
    zip_safe=False,
)
