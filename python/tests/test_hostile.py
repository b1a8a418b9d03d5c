# SPDX-License-Identifier: Apache-2.0
"""What a careless or hostile caller of the Python API meets: tensors whose
memory is swapped while a call uses it, tensors with no CPU
memory, lazy views whose bytes are not their values, keys out of bounds
or not UTF-8, a Reader or Writer entered from two
threads, a client used in a forked child. Each was a crash, wrong data or
a hang before it was refused."""
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import railio

try:
    import torch
except ImportError:  # pragma: no cover - Debian's python3-torch is in install-deps.sh
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="python3-torch is not installed")


@needs_torch
def test_tensor_storage_swapped_during_a_call(mock_url):
    """The memory a call lands in or sends from stays alive: set_() from
    another thread gives the tensor other storage, the call keeps the old
    one (it was freed under the call)."""
    n = 16 << 20
    with railio.Client(mock_url, paths=1, chunk="64K", rate="100M") as c:
        data = os.urandom(n)
        c.put("k", data)
        # Nothing else refers to the memory given (16 MiB: freeing it
        # unmaps it, and a write into it faulted).
        t = torch.zeros(n, dtype=torch.uint8)

        def swap():
            time.sleep(0.03)
            t.set_(torch.empty(0, dtype=torch.uint8))

        th = threading.Thread(target=swap)
        th.start()
        assert c.get_into("k", t) == n
        th.join()
        assert t.numel() == 0
        u = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        t = u
        th = threading.Thread(target=swap)
        th.start()
        c.put("p", u)
        th.join()
        assert c.get("p") == data
        # The storage stays resizable (tensor.numpy() would have pinned it).
        t.resize_(2 * n)


@needs_torch
def test_tensor_without_cpu_memory_refused(client):
    class Wrapper(torch.Tensor):  # the mechanism of DTensor / FakeTensor
        @staticmethod
        def __new__(cls, n):
            return torch.Tensor._make_wrapper_subclass(cls, (n,), dtype=torch.uint8,
                                                       device="cpu")

        __torch_function__ = torch._C._disabled_torch_function_impl

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            raise NotImplementedError(str(func))

    client.put("k", b"A" * 65536)
    with pytest.raises(TypeError, match="no memory behind"):
        client.get_into("k", Wrapper(65536))  # wrote 64 KiB over the C stack
    with pytest.raises(TypeError, match="no memory behind"):
        client.put("leak", Wrapper(512))  # stored 512 bytes of the stack
    assert not client.exists("leak")
    # Sparse and MKL-DNN tensors have no one block of memory either (torch's
    # RuntimeError "doesn't have storage" came through).
    sparse = torch.sparse_coo_tensor(torch.tensor([[0, 1]]), torch.tensor([1.0, 2.0]), (4,))
    for t in [sparse, torch.ones(4).to_mkldnn()]:
        with pytest.raises(TypeError, match="layout torch.(sparse_coo|_mkldnn)"):
            client.put("leak", t)
        with pytest.raises(TypeError, match="to_dense"):
            client.get_into("k", t)
    assert not client.exists("leak")

    class Liar:  # isinstance() says tensor, the type does not
        __class__ = property(lambda self: torch.Tensor)

        def data_ptr(self):
            return 0x10000

        def is_contiguous(self):
            return True

    with pytest.raises(TypeError, match="must be a buffer"):
        client.get_into("k", Liar())


@needs_torch
def test_lazy_views_refused_fortran_order_as_memory(client):
    v = torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex64).conj()
    with pytest.raises(BufferError, match="resolve_conj"):
        client.put("c", v)
    client.put("c", v.resolve_conj())
    got = torch.frombuffer(bytearray(client.get("c")), dtype=torch.complex64)
    assert got.tolist() == [1 - 2j, 3 + 4j]
    with pytest.raises(BufferError, match="resolve_conj"):
        client.put("n", torch.tensor([1.0, 2.0])._neg_view())
    # A Fortran-order array is taken as its memory, as a tensor is.
    a = np.arange(12, dtype=np.uint8).reshape(3, 4)
    client.put("f", a.T)
    assert client.get("f") == a.T.tobytes(order="A")
    back = np.zeros((4, 3), dtype=np.uint8, order="F")
    client.get_into("f", back)
    assert (back == a.T).all()


@needs_torch
@pytest.mark.parametrize("make", [
    lambda: torch.arange(10, dtype=torch.bfloat16),
    lambda: torch.ones(5, dtype=torch.bool),
    lambda: torch.tensor(3.5),
    lambda: torch.empty(0),
    lambda: torch.arange(6.0).reshape(2, 3),
    lambda: torch.ones(4, requires_grad=True),
], ids=["bfloat16", "bool", "0-dim", "empty", "2-d", "requires_grad"])
def test_tensor_kinds_round_trip(client, make):
    x = make()
    client.put("x", x)
    assert len(client.get("x")) == x.numel() * x.element_size()
    y = torch.zeros_like(x.detach())
    assert client.get_into("x", y) == x.numel() * x.element_size()
    assert torch.equal(y, x.detach())


def test_keys_of_1_to_1024_bytes_and_bytes_keys_round_trip(client):
    with pytest.raises(railio.InvalidArgument, match="1 to 1024 bytes"):
        client.put("", b"v")
    with pytest.raises(railio.InvalidArgument, match="1 to 1024 bytes"):
        client.put("k" * 1025, b"v")
    client.put("k" * 1024, b"v")
    # A key that is not UTF-8 (another tool's object) is bytes both ways:
    # put()'s descriptor gave a surrogate-escaped str that no call took.
    d = client.put(b"bin\xff\xfe", b"v")
    assert d["key"] == b"bin\xff\xfe"
    assert client.get(d["key"]) == b"v"
    assert client.stat(d["key"])["key"] == d["key"]
    assert [e.key for e in client.list(prefix=b"bin")] == [d["key"]]
    assert client.put("é", b"w")["key"] == "é"
    # A str no UTF-8 spells (a surrogate-escaped file name) broke no rule
    # the API names: it raised UnicodeEncodeError, not naming keys[i].
    with pytest.raises(railio.InvalidArgument, match="key is not valid UTF-8"):
        client.put("bin\udcff", b"v")
    with pytest.raises(railio.InvalidArgument, match=r"keys\[1\] is not valid UTF-8"):
        client.batch_exists(["k", "bin\udcff"])
    with pytest.raises(railio.InvalidArgument, match="prefix is not valid UTF-8"):
        client.list("\udcff")


@needs_torch
@pytest.mark.parametrize("kind", ["reader", "writer"])
def test_stream_entered_by_two_threads_is_busy(mock_url, kind):
    """Taking a tensor's buffer runs its Python methods, which let another
    thread in: that thread finds the stream in use; it read or wrote beside
    the first call and close() freed the stream under it."""
    class Slow(torch.Tensor):
        def is_contiguous(self, *a, **k):
            time.sleep(0.5)
            return super().is_contiguous(*a, **k)

    with railio.Client(mock_url, paths=1, chunk="1M") as c:
        c.put("k", bytes(8 << 20))
        s = c.open("k", "rb") if kind == "reader" else c.open("w", "wb", size=8 << 20)
        big = torch.zeros(4 << 20, dtype=torch.uint8).as_subclass(Slow)
        first = []
        op = s.readinto if kind == "reader" else s.write
        th = threading.Thread(target=lambda: first.append(op(big)))
        th.start()
        time.sleep(0.1)  # the first call is inside is_contiguous()
        with pytest.raises(RuntimeError, match="in use"):
            op(bytearray(1 << 20))
        with pytest.raises(RuntimeError, match="in use"):
            s.close()
        th.join()
        assert first == [4 << 20]
        if kind == "writer":
            s.write(bytes(4 << 20))
        s.close()
        if kind == "writer":
            assert c.stat("w")["size"] == 8 << 20


FORK_CHILD = r"""
import os, signal, sys
import railio
c = railio.Client(sys.argv[1])
c.put("k", b"parent")
r = c.open("k", "rb")  # a call of the parent's in progress across the fork
how = sys.argv[2]
pid = os.fork()
if pid == 0:
    signal.alarm(20)
    if how == "use":
        try:
            c.get("k")
            os._exit(3)
        except RuntimeError as e:
            os._exit(0 if "forked" in str(e) else 4)
    if how == "close":
        c.close()
        os._exit(0)
    if how == "reopen":
        # Closed and opened again here, the client is the child's: it
        # works and closes, the parent's call in progress counting for
        # nothing here (its close raised "1 call in progress" for good,
        # and no call began after), also once the parent's stream is
        # dropped here.
        c.close()
        c.__init__(sys.argv[1])
        c.put("k2", b"child")
        ok = c.get("k2") == b"child"
        c.close()
        ok = ok and c.closed
        r.close()
        c.__init__(sys.argv[1])
        ok = ok and c.get("k2") == b"child"
        c.close()
        os._exit(0 if ok and c.closed else 5)
    sys.exit(0)  # the interpreter's exit deallocates the client
_, status = os.waitpid(pid, 0)
assert r.read() == b"parent"  # the parent's stream and client are untouched
r.close()
assert c.get("k") == b"parent"
c.close()
sys.exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
@pytest.mark.parametrize("how", ["use", "close", "exit", "reopen"])
def test_client_in_a_forked_child(mock_url, how):
    """A forked child has none of the client's threads: using it raises
    at once (it hung for good), and the child exits cleanly whether it
    closes it or leaves it to the interpreter's exit (a segfault joining
    threads that are not there). Closed and opened again in the child, it
    is the child's, whatever calls the parent had in progress."""
    r = subprocess.run([sys.executable, "-c", FORK_CHILD, mock_url, how], timeout=60,
                       capture_output=True, text=True)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])


def test_client_reopened_after_a_refused_close(mock_url):
    c = railio.Client(mock_url, paths=1, chunk="64K", rate="20M")
    c.put("k", bytes(8 << 20))
    done = []

    def get():
        try:
            c.get("k")
        except railio.Cancelled:
            pass
        done.append(1)

    th = threading.Thread(target=get)
    th.start()
    time.sleep(0.1)
    with pytest.raises(RuntimeError, match="in progress"):
        c.close()
    th.join()
    c.close()
    c.__init__(mock_url + "-2")
    c.put("k2", b"v")  # "railio.Client is closing" for good
    assert c.get("k2") == b"v"
    c.close()


def test_buffers_of_python_objects_refused(client):
    """A numpy dtype=object array (or ctypes py_object array, or a field
    of objects) exports its PyObject pointers as its bytes: put() published
    the process's addresses and get_into() wrote the object's bytes over
    the pointers (a server's bytes the interpreter then dereferenced)."""
    import ctypes

    objs = np.array([object(), "x", 3], dtype=object)
    # The array's own pointer bytes: were the GET let through, it would
    # write back the same pointers, so the test fails without crashing.
    same = ctypes.string_at(objs.ctypes.data, objs.nbytes)
    client.put("ptrs", same)
    for buf in [objs, np.zeros(2, [("a", "O"), ("b", "i4")]), (ctypes.py_object * 2)()]:
        with pytest.raises(TypeError, match="holds Python objects"):
            client.put("o", buf)
        with pytest.raises(TypeError, match="holds Python objects"):
            client.get_into("ptrs", buf)
        with pytest.raises(TypeError, match=r"buffers\[1\] holds Python objects"):
            client.batch_put(["a", "b"], [b"x", buf])
    with client.open("ptrs", "rb") as r, pytest.raises(TypeError, match="holds Python objects"):
        r.readinto(objs)
    with client.open("w", "wb") as w, pytest.raises(TypeError, match="holds Python objects"):
        w.write(objs)
    assert not client.exists("o")
    # Plain data whose format names a field "O..." or has no format at all.
    client.put("f", np.zeros(2, [("Obj", "<i4")]))
    client.put("t", np.zeros(3, "M8[s]"))
    assert client.get_into("t", np.ones(3, "M8[s]")) == 24


FORK_STREAMS = r"""
import os, signal, sys
import railio
c = railio.Client(sys.argv[1], paths=1, chunk="64K")
c.put("k", bytes(range(256)) * (4 << 12))
r = c.open("k", "rb", prefetch=4)
head = r.read(10)
w = c.open("w", "wb")
w.write(b"x" * 100000)
how = sys.argv[2]
pid = os.fork()
if pid == 0:
    signal.alarm(20)
    if how == "reopen":
        # The client closed and opened again here is the child's; the
        # streams are still the parent's.
        c.close()
        c.__init__(sys.argv[1])
        how = "use"
    if how == "use":
        for call in (lambda: r.read(10), lambda: r.readinto(bytearray(10)),
                     lambda: w.write(b"y"), w.close):
            try:
                call()
                os._exit(3)
            except RuntimeError as e:
                if "forked" not in str(e):
                    os._exit(4)
        w.abort()
        r.close()
        os._exit(0)
    if how == "close":
        r.close()
        w.abort()
        os._exit(0)
    sys.exit(0)  # the interpreter's exit deallocates both
_, status = os.waitpid(pid, 0)
# The parent's streams are untouched: the rest of the object, the upload.
assert head + r.read() == bytes(range(256)) * (4 << 12)
r.close()
w.write(b"z")
assert w.close()["size"] == 100001
assert c.get("w") == b"x" * 100000 + b"z"
c.close()
sys.exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
@pytest.mark.parametrize("how", ["use", "close", "exit", "reopen"])
def test_streams_in_a_forked_child(mock_url, how):
    """A Reader or Writer open across fork() is the parent's: in the child
    reading or writing raises at once (it went on with the parent's
    prefetched chunks, then would wait for its threads), and closing it or
    the interpreter's exit leaves the library's stream alone (the child
    hung for good at exit, in rio_reader_close). So it stays when the child
    closed the client and opened it again (reopen: the streams were taken
    as the child's, and reading past the prefetched chunks hung)."""
    r = subprocess.run([sys.executable, "-c", FORK_STREAMS, mock_url, how], timeout=60,
                       capture_output=True, text=True)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])



@pytest.mark.parametrize("stalled", [False, True], ids=["moving", "stalled"])
def test_ctrl_c_interrupts_a_call(mock_url, stalled):
    """Ctrl-C during a long get raises KeyboardInterrupt at once, not when
    the transfer ends (a 4 s GET), nor at the deadline of one that stalled
    (each READ held 20 s). Only that call is cancelled: the client goes on
    working, its other calls were not cancelled with it."""
    import signal

    n = 32 << 20
    with railio.Client(mock_url) as fast:  # keeps the store; its PUT is not throttled
        fast.put("big", os.urandom(n))
        fast.put("small", b"s" * 1000)
        faults = "&faults=delay:op=read:delay=20000" if stalled else ""
        with railio.Client(mock_url + "?paths=1&chunk=1M&rate=8M" + faults) as c:
            main = threading.main_thread().ident
            timer = threading.Timer(0.3, signal.pthread_kill, (main, signal.SIGINT))
            t0 = time.monotonic()
            timer.start()
            with pytest.raises(KeyboardInterrupt):
                c.get("big")
            took = time.monotonic() - t0
            timer.join()
            assert took < 2.0, f"KeyboardInterrupt after {took:.2f} s"
            if not stalled:
                assert c.get("small") == b"s" * 1000
        assert fast.get("small") == b"s" * 1000


def test_ctrl_c_when_railio_was_first_imported_on_a_thread():
    """The main thread is Python's, not the thread that imported railio
    first (a lazy import in a worker): Ctrl-C still interrupts its GET."""
    code = r'''
import os, signal, sys, threading, time
mod = {}
t = threading.Thread(target=lambda: mod.setdefault("r", __import__("railio")))
t.start(); t.join()
railio = mod["r"]
url = "mock://impthread-%d" % os.getpid()
with railio.Client(url) as fast:
    fast.put("big", os.urandom(32 << 20))
    with railio.Client(url + "?paths=1&chunk=1M&rate=8M") as c:
        main = threading.main_thread().ident
        threading.Timer(0.3, signal.pthread_kill, (main, signal.SIGINT)).start()
        t0 = time.monotonic()
        try:
            c.get("big")
            print("not interrupted")
        except KeyboardInterrupt:
            print("interrupted after %.2f s" % (time.monotonic() - t0))
'''
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    took = float(out.stdout.split()[-2])
    assert out.stdout.startswith("interrupted") and took < 2.0, out.stdout
