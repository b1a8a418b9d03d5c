#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The Python package against the C API, in the same run, on the same railiod.

Starts a railiod on loopback, stores 512 x 256 KiB and 4096 x 32 KiB
objects, then times batch_get_into of each set through the railio package
and rio_batch through the C API, and reports the throughput ratio Python / C
(goal >= 0.95) with each side's CPU seconds. Then the per-call overhead of a
4 KiB get_into over rio_get (goal < 5 us), on the railiod and on mock://
(in-process: only the binding's cost differs), with the package's default
(every call collects stats, as does the C call "C+st") and with
client.collect_stats = False (as the bare C call). Not a test: figures for
docs/bench.md.

The C side is bench/c_batch.c, built here as a shared object: one ctypes
call runs a whole rio_batch, or a whole loop of rio_get, timed in C, so
ctypes' own cost is not in its figures. Both sides run in this process on
clients of their own, repetition by repetition in turn (C, Python, C, ...),
so both see the same machine. CPU seconds are the process's (getrusage:
every thread) during a repetition.

    /usr/bin/python3 bench/python_batch.py [--build build] [--reps 15] [--calls 2000]
"""

import argparse
import ctypes
import json
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
KiB = 1024

try:
    import railio
except ImportError:
    sys.path.insert(0, str(ROOT / "python"))  # an in-place build (setup.py build_ext -i)
    import railio
sys.path.insert(0, str(ROOT / "python" / "tests"))
from conftest import Railiod  # noqa: E402 (the tests' railiod on loopback)


def cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def load_helper(build):
    lib = build / "libc_batch.so"
    src = ROOT / "bench" / "c_batch.c"
    rio = build / "librailio.so"
    if not lib.exists() or lib.stat().st_mtime < max(src.stat().st_mtime, rio.stat().st_mtime):
        cc = os.environ.get("CC", "cc")
        subprocess.run([cc, "-O2", "-shared", "-fPIC", "-I", str(ROOT / "include"), str(src),
                        "-L", str(build), "-lrailio", "-Wl,-rpath," + str(build), "-o",
                        str(lib)], check=True)
    h = ctypes.CDLL(str(lib))
    h.cb_open.restype = ctypes.c_void_p
    h.cb_open.argtypes = [ctypes.c_char_p]
    h.cb_close.argtypes = [ctypes.c_void_p]
    h.cb_batch.restype = ctypes.c_double
    h.cb_batch.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_char_p),
                           ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint, ctypes.c_size_t]
    h.cb_get.restype = ctypes.c_double
    h.cb_get.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t,
                         ctypes.c_uint, ctypes.c_int]
    return h


class CClient:
    def __init__(self, h, url):
        self.h = h
        self.c = h.cb_open(url.encode())
        if not self.c:
            sys.exit("python_batch: C client for %s did not open" % url)

    def close(self):
        self.h.cb_close(self.c)


def timed(fn):
    """{wall_s, cpu_s} of fn(); fn returns its own wall time (C) or None."""
    t0, c0 = time.perf_counter(), cpu_s()
    w = fn()
    t1, c1 = time.perf_counter(), cpu_s()
    if w is not None and w < 0:
        sys.exit("python_batch: the C call failed (%d)" % w)
    return {"wall_s": (t1 - t0) if w is None else w, "cpu_s": c1 - c0}


def med(samples, field):
    return statistics.median(s[field] for s in samples)


def bench_batch(h, cc, client, n, size, prefix, reps):
    keys = ["%s%d" % (prefix, i) for i in range(n)]
    client.batch_put(keys, [bytes([i & 0xFF]) * size for i in range(n)])
    bufs = [bytearray(size) for _ in range(n)]
    ckeys = (ctypes.c_char_p * n)(*[k.encode() for k in keys])
    cbufs_mem = [ctypes.create_string_buffer(size) for _ in range(n)]
    cbufs = (ctypes.c_void_p * n)(*[ctypes.addressof(b) for b in cbufs_mem])

    def py():
        if client.batch_get_into(keys, bufs) != [size] * n:
            sys.exit("python_batch: batch_get_into short")

    cs, ps = [], []
    for r in range(reps + 1):  # repetition 0 warms both up
        c = timed(lambda: h.cb_batch(cc.c, ckeys, cbufs, n, size))
        p = timed(py)
        if r:
            cs.append(c)
            ps.append(p)
    if bufs[n - 1] != bytes([(n - 1) & 0xFF]) * size:
        sys.exit("python_batch: wrong bytes read")
    total = n * size
    row = {"ops": n, "size": size,
           "c_gbps": total / med(cs, "wall_s") / 1e9, "py_gbps": total / med(ps, "wall_s") / 1e9,
           "c_cpu_s": med(cs, "cpu_s"), "py_cpu_s": med(ps, "cpu_s")}
    row["ratio"] = row["py_gbps"] / row["c_gbps"]
    return row


def bench_get(h, cc, client, name, calls, reps):
    size = 4 * KiB
    client.put("small4k", bytes(size))
    buf = bytearray(size)
    cbuf = ctypes.create_string_buffer(size)
    get_into = client.get_into

    def py():
        for _ in range(calls):
            if get_into("small4k", buf) != size:
                sys.exit("python_batch: short get_into")

    cs, ss, ps, ns = [], [], [], []
    for r in range(reps + 1):
        c = timed(lambda: h.cb_get(cc.c, b"small4k", cbuf, size, calls, 0))
        s = timed(lambda: h.cb_get(cc.c, b"small4k", cbuf, size, calls, 1))
        p = timed(py)
        client.collect_stats = False
        n = timed(py)
        client.collect_stats = True
        if r:
            cs.append(c)
            ss.append(s)
            ps.append(p)
            ns.append(n)

    def us(samples, field="wall_s"):
        return med(samples, field) / calls * 1e6

    return {"target": name, "c_us": us(cs), "c_stats_us": us(ss), "py_us": us(ps),
            "py_nostats_us": us(ns), "overhead_us": us(ns) - us(cs),
            "overhead_stats_us": us(ps) - us(ss), "c_cpu_us": us(cs, "cpu_s"),
            "c_stats_cpu_us": us(ss, "cpu_s"), "py_cpu_us": us(ps, "cpu_s"),
            "py_nostats_cpu_us": us(ns, "cpu_s")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.environ.get("RAILIO_BUILD_DIR", str(ROOT / "build")))
    ap.add_argument("--reps", type=int, default=15, help="timed repetitions a side (default 15)")
    ap.add_argument("--calls", type=int, default=2000, help="4 KiB gets a repetition")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    a = ap.parse_args()
    if not (1 <= a.reps <= 1000 and 1 <= a.calls <= 10**7):
        ap.error("--reps 1..1000, --calls 1..10^7")
    build = pathlib.Path(a.build).resolve()
    os.environ["RAILIO_BUILD_DIR"] = str(build)  # where Railiod finds railiod
    h = load_helper(build)

    results = {"railio": railio.version(), "python": sys.version.split()[0],
               "cpus": os.cpu_count(), "reps": a.reps, "batch": [], "get4k": []}
    srv = Railiod(memory="1G")
    try:
        with railio.Client(srv.url) as client:
            cc = CClient(h, srv.url)
            try:
                for n, size, prefix in [(512, 256 * KiB, "b256k/"), (4096, 32 * KiB, "b32k/")]:
                    results["batch"].append(bench_batch(h, cc, client, n, size, prefix, a.reps))
                results["get4k"].append(bench_get(h, cc, client, "railiod", a.calls, a.reps))
            finally:
                cc.close()
        mock = "mock://pybench-%d" % os.getpid()
        with railio.Client(mock) as client:
            cc = CClient(h, mock)  # opened while client holds the mock's store
            try:
                results["get4k"].append(bench_get(h, cc, client, "mock", a.calls, a.reps))
            finally:
                cc.close()
    finally:
        srv.stop()

    if a.json:
        print(json.dumps(results, indent=1))
        return
    print("railio %s, Python %s, %d CPUs; medians of %d repetitions a side, C and Python "
          "in turn" % (results["railio"], results["python"], results["cpus"], a.reps))
    print("%-20s %8s %8s %7s %9s %9s" % ("batch_get_into", "C GB/s", "Py GB/s", "Py/C",
                                        "C cpu s", "Py cpu s"))
    for r in results["batch"]:
        print("%-20s %8.2f %8.2f %7.3f %9.4f %9.4f" % (
            "%d x %d KiB" % (r["ops"], r["size"] // KiB), r["c_gbps"], r["py_gbps"],
            r["ratio"], r["c_cpu_s"], r["py_cpu_s"]))
    print("4 KiB get_into, us a call: C rio_get without and with a struct rio_stats (C+st); "
          "Python with stats (the default) and with collect_stats=False (Py-ns)")
    print("%-8s %6s %6s %6s %6s %7s %9s %6s %7s %6s %7s" % (
        "", "C", "C+st", "Py", "Py-ns", "Py-ns-C", "Py-(C+st)", "C cpu", "C+st cpu", "Py cpu",
        "Py-ns cpu"))
    for r in results["get4k"]:
        print("%-8s %6.1f %6.1f %6.1f %6.1f %7.1f %9.1f %6.1f %7.1f %6.1f %7.1f" % (
            r["target"], r["c_us"], r["c_stats_us"], r["py_us"], r["py_nostats_us"],
            r["overhead_us"], r["overhead_stats_us"], r["c_cpu_us"], r["c_stats_cpu_us"],
            r["py_cpu_us"], r["py_nostats_cpu_us"]))

if __name__ == "__main__":
    main()
