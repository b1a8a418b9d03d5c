# SPDX-License-Identifier: Apache-2.0
"""Fixtures of railio's pytest suite.

- mock_url: a mock:// URL naming a store of its own (a mock store lives as
  long as one client has it open; clients of the same name share it).
- client: a railio.Client over mock_url, closed after the test.
- railiod: the URL of a railiod this session started on a free loopback port
  (the binary: $RAILIOD, else build/railiod), stopped at the end.
- server_client: a railio.Client over that railiod.

The extension comes from PYTHONPATH (python/tests/run.sh builds it into
build/python), else from python/ (setup.py build_ext --inplace).
"""
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))

try:
    import railio  # noqa: F401
except ImportError:  # not built into PYTHONPATH: an in-place build
    sys.path.insert(0, os.path.dirname(HERE))
    import railio  # noqa: F401


def _railiod_path():
    p = os.environ.get("RAILIOD")
    if p:
        return p
    build = os.environ.get("RAILIO_BUILD_DIR", os.path.join(TOP, "build"))
    return os.path.join(build, "railiod")


class Railiod:
    """A railiod on 127.0.0.1, port chosen by the kernel (--listen :0)."""

    def __init__(self, *args, memory="512M"):
        path = _railiod_path()
        if not os.access(path, os.X_OK):
            pytest.skip("railiod not built (%s)" % path)
        self.dir = tempfile.TemporaryDirectory(prefix="railio-py-")
        port_file = os.path.join(self.dir.name, "port")
        self.log = open(os.path.join(self.dir.name, "railiod.log"), "w+")
        self.proc = subprocess.Popen(
            [path, "--listen", "127.0.0.1:0", "--port-file", port_file, "--memory", memory,
             "--threads", "2", *args],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while True:
            if self.proc.poll() is not None:
                self.log.seek(0)
                raise RuntimeError("railiod exited %d: %s" % (self.proc.returncode, self.log.read()))
            try:
                with open(port_file) as f:
                    addr = f.read().split()[0]
                break
            except (OSError, IndexError):
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("railiod did not write its port file within 10 s")
            time.sleep(0.02)
        self.addr = addr
        self.url = "railio://" + addr

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        self.dir.cleanup()


@pytest.fixture(scope="session")
def railiod():
    d = Railiod()
    yield d.url
    d.stop()


@pytest.fixture
def railiod_factory():
    """Start a railiod with extra options: railiod_factory("--evict", "refuse")."""
    started = []

    def start(*args, **kw):
        d = Railiod(*args, **kw)
        started.append(d)
        return d

    yield start
    for d in started:
        d.stop()


def _all_stopped(pid):
    """Whether every thread of pid is stopped (state T in its stat)."""
    tasks = "/proc/%d/task" % pid
    for t in os.listdir(tasks):
        try:
            with open("%s/%s/stat" % (tasks, t)) as f:
                st = f.read()
        except OSError:
            continue  # a thread that ended
        if st[st.rindex(")") + 2] != "T":
            return False
    return True


@pytest.fixture
def stopped_server():
    """stopped_server(proc): a context manager in which the railiod proc is
    stopped (SIGSTOP: the kernel still takes the bytes, nothing is
    answered), entered once every thread of it is (kill returns before the
    stop, and an answer sent meanwhile would pass a test by luck); resumed
    on leaving."""

    @contextlib.contextmanager
    def stop(proc):
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            end = time.monotonic() + 2
            while not _all_stopped(proc.pid):
                assert time.monotonic() < end, "railiod did not stop within 2 s"
                time.sleep(0.001)
            yield
        finally:
            os.kill(proc.pid, signal.SIGCONT)

    return stop


@pytest.fixture
def mock_url():
    return "mock://py-" + uuid.uuid4().hex[:12]


@pytest.fixture
def client(mock_url):
    with railio.Client(mock_url, paths=2, chunk="64K") as c:
        yield c


@pytest.fixture
def server_client(railiod):
    c = railio.Client(railiod, chunk="64K")
    yield c
    c.close()


@pytest.fixture(params=["mock", "railiod"])
def any_client(request, mock_url):
    """A client over mock:// and one over the session's railiod."""
    if request.param == "mock":
        c = railio.Client(mock_url, paths=2, chunk="64K")
    else:
        c = railio.Client(request.getfixturevalue("railiod"), chunk="64K")
    yield c
    c.close()
