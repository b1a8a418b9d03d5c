# SPDX-License-Identifier: Apache-2.0
"""Helpers of test_aio.py and test_integrations.py: a railiod on loopback
(started and stopped by the test module) and unique mock:// names."""

import itertools
import os
import pathlib
import shutil
import signal
import subprocess
import tempfile
import time

_HERE = pathlib.Path(__file__).resolve().parent
_names = itertools.count()


def build_dir():
    d = os.environ.get("RAILIO_BUILD_DIR")
    return pathlib.Path(d) if d else _HERE.parent.parent / "build"


def mock_url(tag, **query):
    """A mock:// URL with a name no other test uses (mock stores are shared by name)."""
    url = "mock://pyx-%s-%d-%d" % (tag, os.getpid(), next(_names))
    if query:
        url += "?" + "&".join("%s=%s" % kv for kv in query.items())
    return url


class Railiod:
    """railiod --listen 127.0.0.1:0 with a port file; url is railio://ADDR.
    (bench/python_batch.py uses it too.)"""

    def __init__(self, memory="512M", extra=(), build=None):
        exe = pathlib.Path(build or build_dir()) / "railiod"
        if not exe.exists():
            raise FileNotFoundError("%s not built" % exe)
        self.dir = tempfile.mkdtemp(prefix="pyx-railiod-")
        ports = os.path.join(self.dir, "ports")
        self.log = open(os.path.join(self.dir, "log"), "wb")
        self.proc = subprocess.Popen(
            [str(exe), "--listen", "127.0.0.1:0", "--port-file", ports, "--memory", memory,
             "--threads", "2", *extra],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while not os.path.exists(ports):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("railiod did not start")
            time.sleep(0.02)
        with open(ports) as f:
            self.addr = f.readline().strip()
        self.url = "railio://" + self.addr

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
