# SPDX-License-Identifier: Apache-2.0
"""railio.Client: buffers, zero copy, threads, errors, close, stats."""
import copy
import ctypes
import errno
import mmap
import os
import pickle
import signal
import socket
import threading
import time

import numpy as np
import pytest

import railio
from railio import _railio

try:
    import torch
except ImportError:  # pragma: no cover - Debian's python3-torch is in install-deps.sh
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="python3-torch is not installed")

PAYLOAD = bytes((i * 7 + 3) & 0xFF for i in range(200_000))  # 4 chunks of 64K and a tail


def _sources(data):
    """The same bytes as every kind of read-only-or-writable source buffer."""
    m = mmap.mmap(-1, len(data))
    m.write(data)
    out = {
        "bytes": data,
        "bytearray": bytearray(data),
        "memoryview": memoryview(data),
        "mmap": m,
        "numpy": np.frombuffer(data, dtype=np.uint8).copy(),
        "numpy_f32": np.frombuffer(data[: len(data) // 4 * 4], dtype=np.float32).copy(),
    }
    if torch is not None:
        out["torch"] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    return out


def _as_bytes(buf):
    if torch is not None and isinstance(buf, torch.Tensor):
        return buf.numpy().tobytes()
    return bytes(memoryview(buf).cast("B"))


# ------------------------------------------------------------- round trips


@pytest.mark.parametrize("kind", ["bytes", "bytearray", "memoryview", "mmap", "numpy",
                                  "numpy_f32", "torch"])
def test_put_from_every_buffer_kind(any_client, kind):
    srcs = _sources(PAYLOAD)
    if kind not in srcs:
        pytest.skip("python3-torch is not installed")
    src = srcs[kind]
    want = _as_bytes(src)
    desc = any_client.put("src/" + kind, src)
    assert desc["size"] == len(want)
    assert desc["key"] == "src/" + kind
    assert desc["generation"] >= 1 and isinstance(desc["etag"], str)
    assert desc["chunk_size"] == 65536 and desc["nchunks"] == (len(want) + 65535) // 65536
    assert any_client.get("src/" + kind) == want
    assert any_client.stat("src/" + kind)["size"] == len(want)


def test_put_conditions(any_client):
    """if_absent and if_generation: met, written; not met, GenerationChanged
    and the object as it was; bad values refused before anything is sent."""
    c = any_client
    d1 = c.put("cond/k", b"one" * 30000, if_absent=True)
    with pytest.raises(railio.GenerationChanged):
        c.put("cond/k", b"two", if_absent=True)
    assert c.get("cond/k") == b"one" * 30000
    d2 = c.put("cond/k", b"two", if_generation=d1["generation"])
    assert d2["generation"] != d1["generation"]
    with pytest.raises(railio.GenerationChanged):
        c.put("cond/k", b"three", if_generation=d1["generation"])
    assert c.get("cond/k") == b"two"
    with pytest.raises(ValueError):
        c.put("cond/k", b"x", if_absent=True, if_generation=d2["generation"])
    with pytest.raises(ValueError):
        c.put("cond/k", b"x", if_generation=0)
    with pytest.raises(TypeError):
        c.put("cond/k", b"x", if_generation="1")
    with pytest.raises(TypeError):  # a bool is not a generation (True was 1)
        c.put("cond/k", b"x", if_generation=True)
    with pytest.raises(TypeError):
        c.delete("cond/k", if_generation=True)
    with pytest.raises(TypeError):
        c.put("cond/k", b"x", if_present=True)
    d3 = c.put("cond/k", b"x", if_absent=False)
    assert d3["size"] == 1
    with pytest.raises(railio.GenerationChanged):
        c.delete("cond/k", if_generation=d2["generation"])
    assert c.get("cond/k") == b"x"
    with pytest.raises(ValueError):
        c.delete("cond/k", if_generation=0)
    c.delete("cond/k", if_generation=d3["generation"])
    with pytest.raises(railio.NotFound):
        c.delete("cond/k", if_generation=d3["generation"])
    # A batch of PUTs if absent: the key written first is left, the other
    # written; BatchError says which.
    c.put("cond/b0", b"first")
    with pytest.raises(railio.BatchError) as ei:
        c.batch_put(["cond/b0", "cond/b1"], [b"second", b"new"], if_absent=True)
    assert isinstance(ei.value.results[0], railio.GenerationChanged)
    assert ei.value.results[1] == 0
    assert c.get("cond/b0") == b"first" and c.get("cond/b1") == b"new"
    assert c.batch_put(["cond/b2"], [b"x"], if_absent=True) == [0]
    with pytest.raises(TypeError):
        c.batch_get_into(["cond/b2"], [bytearray(1)], if_absent=True)
    for k in ("cond/b0", "cond/b1", "cond/b2"):
        c.delete(k)


@pytest.mark.parametrize("kind", ["bytearray", "memoryview", "mmap", "numpy", "torch"])
def test_get_into_every_writable_kind(any_client, kind):
    n = len(PAYLOAD)
    if kind == "bytearray":
        dst = bytearray(n)
    elif kind == "memoryview":
        dst = memoryview(bytearray(n))
    elif kind == "mmap":
        dst = mmap.mmap(-1, n)
    elif kind == "numpy":
        dst = np.zeros(n, dtype=np.uint8)
    else:
        if torch is None:
            pytest.skip("python3-torch is not installed")
        dst = torch.zeros(n, dtype=torch.uint8)
    any_client.put("k", PAYLOAD)
    assert any_client.get_into("k", dst) == n
    assert _as_bytes(dst) == PAYLOAD


def test_get_into_bigger_buffer_returns_the_object_size(client):
    client.put("small", b"abc")
    dst = bytearray(b"\xee" * 10)
    assert client.get_into("small", dst) == 3
    assert dst[:3] == b"abc" and dst[3:] == b"\xee" * 7


def test_get_into_too_small_buffer(client):
    client.put("k", PAYLOAD)
    with pytest.raises(railio.Error) as ei:
        client.get_into("k", bytearray(10))
    assert ei.value.code == "RIO_ETOOBIG"


def test_empty_object(any_client):
    any_client.put("empty", b"")
    assert any_client.get("empty") == b""
    assert any_client.get_into("empty", bytearray(4)) == 0


def test_bytes_keys_and_keyword_arguments(client):
    client.put(key=b"bk", buffer=b"v")
    assert client.get(key="bk") == b"v"
    with pytest.raises(TypeError, match="multiple values"):
        client.get("bk", key="bk")
    with pytest.raises(TypeError, match="unexpected keyword"):
        client.get("bk", nope=1)
    with pytest.raises(TypeError, match="str or bytes"):
        client.get(5)
    with pytest.raises(railio.InvalidArgument, match="NUL"):
        client.get("a\0b")


# --------------------------------------------------------------- zero copy


def test_get_into_writes_at_the_buffers_address(client):
    """The bytes land in the caller's memory itself: seen through another
    object over the same address, with the neighbours untouched."""
    n = len(PAYLOAD)
    raw = (ctypes.c_ubyte * (n + 64))()
    ctypes.memset(raw, 0xAB, n + 64)
    base = ctypes.addressof(raw)
    arr = np.frombuffer(raw, dtype=np.uint8)[32:32 + n]  # a view, not a copy
    assert arr.ctypes.data == base + 32
    client.put("k", PAYLOAD)
    assert client.get_into("k", arr) == n
    assert arr.ctypes.data == base + 32
    assert ctypes.string_at(base + 32, n) == PAYLOAD
    assert ctypes.string_at(base, 32) == b"\xab" * 32
    assert ctypes.string_at(base + 32 + n, 32) == b"\xab" * 32

    # a memoryview slice of a bytearray: written in place at its offset
    ba = bytearray(b"\x11" * (n + 100))
    assert client.get_into("k", memoryview(ba)[50:50 + n]) == n
    assert ba[:50] == b"\x11" * 50 and ba[50:50 + n] == PAYLOAD and ba[50 + n:] == b"\x11" * 50


@needs_torch
def test_get_into_torch_tensor_is_its_memory(client):
    n = len(PAYLOAD)
    backing = np.zeros(n + 16, dtype=np.uint8)
    t = torch.from_numpy(backing)[8:8 + n]  # shares backing's memory
    ptr = t.data_ptr()
    assert ptr == backing.ctypes.data + 8
    client.put("k", PAYLOAD)
    assert client.get_into("k", t) == n
    assert t.data_ptr() == ptr
    assert backing[8:8 + n].tobytes() == PAYLOAD
    assert not backing[:8].any() and not backing[8 + n:].any()
    # a float tensor: its bytes, not its element count
    f = torch.zeros(n // 4, dtype=torch.float32)
    client.put("f", PAYLOAD[: n // 4 * 4])
    assert client.get_into("f", f) == n // 4 * 4
    assert f.numpy().tobytes() == PAYLOAD[: n // 4 * 4]
    # put from a tensor view reads the view's bytes
    client.put("view", t[100:200])
    assert client.get("view") == PAYLOAD[100:200]


def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_big_get_into_does_not_grow_rss(mock_url):
    size = 64 << 20
    with railio.Client(mock_url, chunk="4M") as c:
        src = np.full(size, 0x5A, dtype=np.uint8)
        src[::4096] = np.arange(size // 4096, dtype=np.uint64).astype(np.uint8)
        c.put("big", src)
        dst = np.ones(size, dtype=np.uint8)  # touched: its pages are resident already
        before = _rss_bytes()
        assert c.get_into("big", dst) == size
        grew = _rss_bytes() - before
        assert np.array_equal(dst, src)
        assert grew < size // 4, "RSS grew by %d bytes for a %d-byte get_into" % (grew, size)


# ----------------------------------------------------------------- batches


@pytest.mark.parametrize("n", [1, 7, 300])
def test_batch_put_and_get_into(any_client, n):
    pool = np.zeros((n, 4096), dtype=np.uint8)
    for i in range(n):
        pool[i] = i & 0xFF
    keys = ["blk/%04d" % i for i in range(n)]
    assert any_client.batch_put(keys, list(pool)) == [0] * n
    out = np.zeros_like(pool)
    assert any_client.batch_get_into(keys, list(out)) == [4096] * n
    assert np.array_equal(out, pool)
    assert any_client.batch_exists(keys) == n
    assert any_client.batch_exists(keys[: n // 2] + ["missing"] + keys[n // 2:]) == n // 2
    assert any_client.batch_exists([]) == 0
    assert any_client.batch_put([], []) == []


def test_batch_error_results(any_client):
    any_client.put("a", b"A" * 10)
    any_client.put("c", b"C" * 30)
    bufs = [bytearray(10), bytearray(10), bytearray(30)]
    with pytest.raises(railio.BatchError) as ei:
        any_client.batch_get_into(["a", "b", "c"], bufs)
    e = ei.value
    assert isinstance(e, railio.Error)
    assert e.results[0] == 10 and e.results[2] == 30
    assert isinstance(e.results[1], railio.NotFound)
    assert e.results[1].code == "RIO_ENOTFOUND"
    assert "keys[1] 'b'" in str(e) and "1 of 3" in str(e)
    assert bufs[0] == b"A" * 10 and bufs[2] == b"C" * 30


def test_batch_argument_errors(client):
    with pytest.raises(ValueError, match="2 keys but 1 buffers"):
        client.batch_put(["a", "b"], [b"x"])
    with pytest.raises(TypeError, match="single str"):
        client.batch_exists("abc")
    with pytest.raises(TypeError, match=r"buffers\[1\] is read-only"):
        client.batch_get_into(["a", "b"], [bytearray(1), b"ro"])
    with pytest.raises(TypeError, match=r"keys\[1\]"):
        client.batch_put(["a", 3], [b"x", b"y"])
    # any iterable of keys and buffers
    assert client.batch_put(iter(["g1", "g2"]), (b for b in [b"1", b"22"])) == [0, 0]
    assert client.batch_exists(k for k in ["g1", "g2"]) == 2


def test_exists_stat_delete(any_client):
    assert any_client.exists("x") is False
    d = any_client.put("x", b"12345")
    assert any_client.exists("x") is True
    st = any_client.stat("x")
    assert st == d
    any_client.put("x", b"6")
    assert any_client.stat("x")["generation"] > d["generation"]
    assert any_client.delete("x") is None
    assert any_client.exists("x") is False
    with pytest.raises(railio.NotFound):
        any_client.delete("x")
    with pytest.raises(railio.NotFound):
        any_client.stat("x")


# ----------------------------------------------------------------- threads


def test_threads_share_a_client(any_client):
    errors = []
    nthreads, nops = 8, 60

    def work(t):
        try:
            dst = np.zeros(5000, dtype=np.uint8)
            for i in range(nops):
                key = "t%d/%d" % (t, i % 5)
                src = np.full(5000, (t * 31 + i) & 0xFF, dtype=np.uint8)
                any_client.put(key, src)
                assert any_client.get_into(key, dst) == 5000
                assert np.array_equal(dst, src)
                assert any_client.exists(key)
                if i % 10 == 9:
                    keys = ["t%d/%d" % (t, j) for j in range(5)]
                    assert any_client.batch_exists(keys) == 5
                    assert any_client.batch_get_into(keys, [bytearray(5000) for _ in keys]) == \
                        [5000] * 5
        except BaseException as e:  # noqa: B902 - reported below
            errors.append((t, e))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(nthreads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    assert not errors, errors
    assert any_client.last_stats is not None


def test_gil_released_during_a_call(mock_url):
    """Python code runs in another thread while a call waits on the transport."""
    with railio.Client(mock_url) as fast:
        fast.put("k", b"x" * 1000)
        with railio.Client(mock_url, lat="300ms") as slow:
            ticks = [0]
            done = threading.Event()

            def spin():
                while not done.is_set():
                    ticks[0] += 1

            th = threading.Thread(target=spin)
            th.start()
            try:
                t0 = time.monotonic()
                slow.get("k")
                took = time.monotonic() - t0
            finally:
                done.set()
                th.join()
            assert took >= 0.25
            assert ticks[0] > 1000, ticks[0]


# ------------------------------------------------------------- exceptions


@pytest.mark.parametrize("code,cls,builtin", [
    (-10010, "NotFound", FileNotFoundError),
    (-errno.ENOENT, "NotFound", FileNotFoundError),
    (-10028, "NotFound", FileNotFoundError),
    (-errno.EACCES, "AccessDenied", PermissionError),
    (-errno.EPERM, "AccessDenied", PermissionError),
    (-10025, "AccessDenied", PermissionError),
    (-10029, "AccessDenied", PermissionError),
    (-10006, "Timeout", TimeoutError),
    (-errno.ETIMEDOUT, "Timeout", TimeoutError),
    (-10008, "Unavailable", ConnectionError),
    (-errno.ECONNREFUSED, "Unavailable", ConnectionError),
    (-10005, "Unavailable", ConnectionError),
    (-10026, "Unavailable", ConnectionError),
    (-10003, "VerifyError", railio.Error),
    (-10013, "VerifyError", railio.Error),
    (-10009, "VerifyError", railio.Error),
    (-errno.ENOSPC, "NoSpace", railio.Error),
    (-10019, "OutcomeUnknown", railio.Error),
    (-10012, "Cancelled", railio.Error),
    (-10001, "InvalidArgument", ValueError),
    (-10002, "InvalidArgument", ValueError),
    (-errno.EINVAL, "InvalidArgument", ValueError),
    (-10004, "GenerationChanged", railio.Error),
    (-10018, "Error", OSError),
    (-errno.EIO, "Error", OSError),
])
def test_error_mapping(code, cls, builtin):
    e = _railio._error(code)
    assert type(e) is getattr(railio, cls)
    assert isinstance(e, railio.Error) and isinstance(e, OSError) and isinstance(e, builtin)
    assert e.errno == code
    assert e.code.startswith("RIO_E") or e.code.startswith("E")
    assert e.detail is None


def test_type_hints_name_every_stats_and_desc_field(client):
    """The TypedDicts of __init__.pyi hold the keys the dicts have (a type
    checker refused stats["copy_s"], paths[i]["busy_s"] and others)."""
    import ast

    path = os.path.join(os.path.dirname(railio.__file__), "__init__.pyi")
    with open(path) as f:
        tree = ast.parse(f.read())
    hints = {
        node.name: {a.target.id for a in node.body if isinstance(a, ast.AnnAssign)}
        for node in tree.body if isinstance(node, ast.ClassDef)
    }
    desc = client.put("k", b"x" * 100)
    client.get("k")
    st = client.last_stats
    assert hints["Desc"] == set(desc)
    assert hints["Stats"] == set(st)
    assert hints["LatencyStats"] == set(st["latency"])
    assert hints["CpuStats"] == set(st["cpu"])
    assert hints["AdaptStats"] == set(st["adapt"])
    assert hints["PathStats"] == set(st["paths"][0])


def test_signatures_name_what_the_methods_take(client):
    """inspect.signature (help(), IDEs) read every method's: the "-> type"
    after the text signatures made them unreadable, and put's left out
    if_absent= and if_generation=. Each keyword a signature names is taken
    by the method, with its default."""
    import inspect

    client.put("k", b"x")
    required = {"key": "k", "keys": ["k"], "buffer": bytearray(1), "buffers": [bytearray(1)]}
    for name in ("put", "get", "get_into", "batch_put", "batch_get_into", "exists",
                 "batch_exists", "stat", "delete", "list", "open", "cancel", "close"):
        sig = inspect.signature(getattr(railio.Client, name))
        if name in ("delete", "close", "stat"):
            continue  # they remove or end what the others read
        args, kw = [], {}
        for p in sig.parameters.values():
            if p.default is inspect.Parameter.empty:
                args.append(required[p.name])
            else:
                kw[p.name] = p.default
        r = getattr(client, name)(*args, **kw)
        if name == "open":
            r.close()
    assert "if_generation" in inspect.signature(railio.Client.put).parameters
    assert "if_absent" in inspect.signature(railio.Client.batch_put).parameters
    for fn in (railio.version, railio.backends, railio.Cancel.fire):
        inspect.signature(fn)


def test_errors_made_in_python_have_code_and_detail():
    # A test double's or a wrapper's Error: code and detail read None
    # (AttributeError before, where a handler looked at e.code).
    for cls in (railio.Error, railio.NotFound, railio.BatchError):
        e = cls("made here")
        assert (e.code, e.detail, e.errno) == (None, None, None)
    assert _railio._error(-10010).code == "RIO_ENOTFOUND"


def test_errors_pickle_and_copy_whole(client):
    """An Error crosses processes pickled (a ProcessPoolExecutor's worker,
    multiprocessing) and is copied whole: errno came back None (OSError's
    own __reduce__ keeps only the message and __dict__)."""
    client.put("a", b"x")
    errs = [_railio._error(-10010), _railio._error(-errno.ECONNREFUSED)]
    for call in (lambda: client.get("nope"),
                 lambda: client.batch_get_into(["a", "nope"], [bytearray(1), bytearray(1)])):
        with pytest.raises(railio.Error) as ei:
            call()
        errs.append(ei.value)
    for e in errs:
        for e2 in (pickle.loads(pickle.dumps(e)), copy.copy(e)):
            assert type(e2) is type(e)
            assert (str(e2), e2.args, e2.errno, e2.code, e2.detail) == (
                str(e), e.args, e.errno, e.code, e.detail)
    batch = pickle.loads(pickle.dumps(errs[-1]))
    assert batch.results[0] == 1 and isinstance(batch.results[1], railio.NotFound)
    assert batch.results[1].errno == -10010


def test_not_found(any_client):
    with pytest.raises(railio.NotFound) as ei:
        any_client.get("nope/k")
    e = ei.value
    assert isinstance(e, FileNotFoundError)
    assert e.code == "RIO_ENOTFOUND" and e.errno == -10010
    assert "get 'nope/k'" in str(e) and "no such object" in str(e)
    with pytest.raises(FileNotFoundError):
        any_client.get_into("nope/k", bytearray(1))


def test_invalid_option_names_it(mock_url):
    with pytest.raises(railio.InvalidArgument) as ei:
        railio.Client(mock_url, depht=4)
    assert "depht" in str(ei.value) and "depht" in ei.value.detail
    assert isinstance(ei.value, ValueError)
    with pytest.raises(railio.InvalidArgument, match="depth"):
        railio.Client(mock_url, depth=-1)
    with pytest.raises(railio.InvalidArgument):
        railio.Client("nosuch://x")
    with pytest.raises(TypeError, match="option paths"):
        railio.Client(mock_url, paths=[1])


def test_options_as_keywords(mock_url):
    with railio.Client(mock_url, paths=3, chunk="16K", verify=False, retry_checksum=True,
                       deadline="none", lat="1ms,2ms") as c:
        c.put("k", PAYLOAD)
        assert c.stat("k")["chunk_size"] == 16384
        assert c.get("k") == PAYLOAD
        assert len(c.last_stats["paths"]) == 3


def test_timeout(mock_url):
    with railio.Client(mock_url) as fast:
        fast.put("k", b"x" * 100)
        with railio.Client(mock_url, lat="500ms", deadline="50ms") as slow:
            t0 = time.monotonic()
            with pytest.raises(railio.Timeout) as ei:
                slow.get("k")
            assert time.monotonic() - t0 < 5
            assert isinstance(ei.value, TimeoutError)
            assert ei.value.code == "RIO_EDEADLINE"


def test_unavailable_closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    t0 = time.monotonic()
    with pytest.raises(railio.Unavailable) as ei:
        c = railio.Client("railio://127.0.0.1:%d" % port, retries=1, connect_timeout="1s")
        try:
            c.get("k")
        finally:
            c.close()
    assert time.monotonic() - t0 < 30
    assert isinstance(ei.value, ConnectionError)


def test_verify_error(mock_url):
    with railio.Client(mock_url) as good:
        good.put("k", PAYLOAD)
        # every read comes back with a bit flipped
        with railio.Client(mock_url, faults="bitflip", retry_checksum=False) as bad:
            with pytest.raises(railio.VerifyError) as ei:
                bad.get("k")
            assert ei.value.code == "RIO_ECHECKSUM"
        # retried until the retries run out: still a verification failure
        with railio.Client(mock_url, faults="bitflip", retries=2, backoff_base="1ms") as bad:
            with pytest.raises(railio.VerifyError):
                bad.get_into("k", bytearray(len(PAYLOAD)))


def test_no_space(railiod_factory):
    d = railiod_factory("--evict", "refuse", memory="1M")
    with railio.Client(d.url, chunk="256K") as c:
        with pytest.raises(railio.NoSpace):
            c.put("big", bytes(4 << 20))


def test_access_denied(railiod_factory, tmp_path):
    tok = tmp_path / "token"
    tok.write_text("s3cret-token-for-tests-0123456789\n")
    tok.chmod(0o600)
    d = railiod_factory("--auth-token-file", str(tok))
    with pytest.raises(railio.AccessDenied) as ei:
        c = railio.Client(d.url, token="wrong-token-0123456789abcdef", retries=1)
        try:
            c.get("k")
        finally:
            c.close()
    assert "s3cret" not in str(ei.value) and "wrong-token" not in str(ei.value)
    with railio.Client(d.url, token_file=str(tok)) as ok:
        ok.put("k", b"v")
        assert ok.get("k") == b"v"


# ------------------------------------------------------------ cancellation


def _slow_pair(mock_url, size=48 << 20):
    fast = railio.Client(mock_url, chunk="1M")
    fast.put("big", np.ones(size, dtype=np.uint8))
    slow = railio.Client(mock_url, chunk="1M", rate="10M")  # ~5 s for the object
    return fast, slow


def _run_in_thread(fn):
    box = {}

    def run():
        try:
            box["ret"] = fn()
        except BaseException as e:  # noqa: B902
            box["exc"] = e

    th = threading.Thread(target=run)
    th.start()
    return th, box


def test_client_cancel_from_another_thread(mock_url):
    fast, slow = _slow_pair(mock_url)
    try:
        dst = np.zeros(48 << 20, dtype=np.uint8)
        t0 = time.monotonic()
        th, box = _run_in_thread(lambda: slow.get_into("big", dst))
        time.sleep(0.3)
        slow.cancel()
        th.join(10)
        assert not th.is_alive()
        assert isinstance(box.get("exc"), railio.Cancelled), box
        assert box["exc"].code == "RIO_ECANCELED"
        assert time.monotonic() - t0 < 3.0
        # later calls run normally
        slow.put("small", b"ok")
        assert slow.get("small") == b"ok"
    finally:
        slow.close()
        fast.close()


def test_cancel_token(mock_url):
    fast, slow = _slow_pair(mock_url)
    try:
        cx = railio.Cancel()
        assert cx.fired is False
        th, box = _run_in_thread(lambda: slow.get("big", cancel=cx))
        # another call without the token is not cancelled by it
        th2, box2 = _run_in_thread(lambda: fast.get_into("big", bytearray(48 << 20)))
        time.sleep(0.3)
        cx.fire()
        assert cx.fired is True
        th.join(10)
        th2.join(30)
        assert isinstance(box.get("exc"), railio.Cancelled), box
        assert box2.get("ret") == 48 << 20, box2
        with pytest.raises(railio.Cancelled):  # a fired token stays fired
            slow.get("big", cancel=cx)
        with pytest.raises(TypeError, match="railio.Cancel"):
            slow.get("big", cancel=object())
    finally:
        slow.close()
        fast.close()


def test_close_with_calls_in_progress(mock_url):
    fast, slow = _slow_pair(mock_url)
    try:
        th, box = _run_in_thread(lambda: slow.get("big"))
        time.sleep(0.3)
        with pytest.raises(RuntimeError, match="1 call in progress"):
            slow.close()
        th.join(10)
        assert isinstance(box.get("exc"), railio.Cancelled), box
        assert not slow.closed
        with pytest.raises(ValueError, match="closing"):  # no new call begins
            slow.get("big")
        slow.close()
        assert slow.closed
        slow.close()  # idempotent
        with pytest.raises(ValueError, match="closed"):
            slow.get("big")
        with pytest.raises(ValueError, match="closed"):
            slow.stat("big")
    finally:
        slow.close()
        fast.close()


# ----------------------------------------------------------- bad buffers


def test_non_contiguous_refused(client):
    client.put("k", b"x" * 100)
    a = np.zeros(400, dtype=np.uint8)
    with pytest.raises(BufferError, match="buffer is not contiguous"):
        client.put("nc", a[::2])
    with pytest.raises(BufferError, match="buffer is not contiguous"):
        client.get_into("k", a[::4])
    with pytest.raises(BufferError, match="not contiguous"):
        client.get_into("k", np.zeros((20, 20), dtype=np.uint8)[:, :5])
    with pytest.raises(BufferError, match=r"buffers\[1\] is not contiguous"):
        client.batch_put(["a", "b"], [b"x", a[::2]])
    # a Fortran-ordered array is one contiguous block: accepted
    f = np.asfortranarray(np.zeros((10, 10), dtype=np.uint8))
    assert client.get_into("k", f) == 100


def test_read_only_refused_for_get_into(client):
    client.put("k", b"x" * 10)
    with pytest.raises(TypeError, match="read-only"):
        client.get_into("k", b"\0" * 10)
    ro = np.zeros(10, dtype=np.uint8)
    ro.flags.writeable = False
    with pytest.raises(TypeError, match="read-only"):
        client.get_into("k", ro)
    m = mmap.mmap(-1, 10, access=mmap.ACCESS_READ)
    with pytest.raises(TypeError, match="read-only"):
        client.get_into("k", m)
    with pytest.raises(TypeError, match="read-only"):
        client.get_into("k", memoryview(bytearray(10)).toreadonly())
    with pytest.raises(TypeError, match="must be a buffer"):
        client.put("k", "a str is not bytes")


@needs_torch
def test_torch_bad_tensors(client):
    client.put("k", b"x" * 64)
    t = torch.zeros(8, 8, dtype=torch.uint8)
    with pytest.raises(BufferError, match="not contiguous"):
        client.get_into("k", t.t())
    with pytest.raises(BufferError, match="not contiguous"):
        client.put("k2", t[:, ::2])
    meta = torch.empty(64, dtype=torch.uint8, device="meta")
    with pytest.raises(TypeError, match="move it to the CPU"):
        client.get_into("k", meta)
    if torch.cuda.is_available():  # pragma: no cover - no GPU here
        with pytest.raises(TypeError, match="move it to the CPU"):
            client.put("k", torch.zeros(8, device="cuda"))


# ------------------------------------------------------- stats and misc


def test_stats(any_client):
    st = {"stale": 1}
    any_client.put("k", PAYLOAD, stats=st)
    assert "stale" not in st
    assert st["bytes"] == len(PAYLOAD) and st["chunks"] == 4
    got = {}
    any_client.get_into("k", bytearray(len(PAYLOAD)), stats=got)
    for k in ("bytes", "elapsed_s", "goodput_mbps", "chunks", "retries", "retries_by_class",
              "replans", "latency", "paths", "verdict", "verdict_text", "hash_s", "verify_s",
              "cpu", "copy_s", "sink_s", "source_s", "op_s", "service_s", "peak_inflight_bytes"):
        assert k in got, k
    assert got["bytes"] == len(PAYLOAD) and got["elapsed_s"] > 0
    assert set(got["latency"]) == {"p50_s", "p95_s", "p99_s", "max_s"}
    assert set(got["cpu"]) == {"engine_s", "transport_s", "caller_s", "run_queue_wait_s"}
    assert got["op_s"] > 0 and got["peak_inflight_bytes"] > 0
    assert got["adapt"]["state"] in ("growing", "settled", "ceiling")  # on by default
    assert got["adapt"]["paths"] >= 1 and got["adapt"]["depth"] >= 1
    assert "checksum" in got["retries_by_class"]
    assert sum(p["bytes"] for p in got["paths"]) == len(PAYLOAD)
    assert set(got["paths"][0]) == {"bytes", "ops", "errors", "busy_s", "rate_mbps", "cap_mbps",
                                    "peak_depth", "state"}
    assert got["paths"][0]["state"] in ("healthy", "cooling", "probing")
    assert isinstance(got["verdict"], str)
    assert any_client.last_stats == got
    with pytest.raises(TypeError, match="stats must be a dict"):
        any_client.get("k", stats=[])
    # a failed call has stats too
    err = {}
    with pytest.raises(railio.NotFound):
        any_client.get("missing", stats=err)
    assert "bytes" in err


def test_stats_adapt_off(mock_url):
    with railio.Client(mock_url + "?paths=2&adapt=off", chunk="64K") as c:
        c.put("k", PAYLOAD)
        got = {}
        c.get_into("k", bytearray(len(PAYLOAD)), stats=got)
    assert got["adapt"] == {"state": "off", "paths": 0, "depth": 0, "next_pct": 0}


def test_context_manager_repr_and_module(mock_url):
    with railio.Client(mock_url + "?paths=2") as c:
        assert c.url == mock_url + "?paths=2"
        assert repr(c) == "<railio.Client '%s'>" % mock_url
        assert c.last_stats is None
    assert c.closed and "closed" in repr(c)
    with railio.Client("mock://user:pa55word@" + mock_url[7:]) as c:
        assert "pa55word" not in repr(c) and "user:***@" in repr(c)
    assert isinstance(railio.version(), str) and railio.version().count(".") == 2
    assert "mock" in railio.backends() and "railio" in railio.backends()
    assert issubclass(railio.NotFound, FileNotFoundError)


def test_collect_stats_off(client):
    assert client.collect_stats is True
    client.put("k", PAYLOAD)
    first = client.last_stats
    assert first["bytes"] == len(PAYLOAD)
    client.collect_stats = False
    client.get_into("k", bytearray(len(PAYLOAD)))
    assert client.last_stats == first  # that call collected nothing
    got = {}
    client.get("k", stats=got)  # asked for: collected
    assert got["bytes"] == len(PAYLOAD) and client.last_stats == got
    with pytest.raises(railio.NotFound):
        client.get("missing")
    client.collect_stats = True
    with pytest.raises(railio.NotFound):
        client.get("missing")
    assert client.last_stats["bytes"] == 0


def test_client_cancel_fires_caller_tokens_of_calls_in_progress(mock_url):
    fast, slow = _slow_pair(mock_url)
    try:
        cx = railio.Cancel()
        th, box = _run_in_thread(lambda: slow.get("big", cancel=cx))
        time.sleep(0.3)
        slow.cancel()
        th.join(10)
        assert isinstance(box.get("exc"), railio.Cancelled), box
        assert cx.fired
        idle = railio.Cancel()
        slow.cancel()  # a token of no call in progress is left alone
        assert not idle.fired
    finally:
        slow.close()
        fast.close()


def test_close_races_calls_from_threads(mock_url):
    """close() while threads keep calling: it refuses while any call runs,
    succeeds once none does, and every later call raises ValueError; no
    call ever runs on a destroyed client."""
    c = railio.Client(mock_url, lat="1ms")
    c.put("k", b"x" * 4096)
    stop = threading.Event()
    outcomes = []

    def caller():
        buf = bytearray(4096)
        n = 0
        while not stop.is_set():
            try:
                c.get_into("k", buf)
                n += 1
            except railio.Cancelled:
                pass
            except ValueError as e:
                outcomes.append(("closed", n, str(e)))
                return
        outcomes.append(("stopped", n, ""))

    threads = [threading.Thread(target=caller) for _ in range(4)]
    for th in threads:
        th.start()
    time.sleep(0.2)
    refused = 0
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            c.close()
            break
        except RuntimeError:
            refused += 1
    stop.set()
    for th in threads:
        th.join(10)
    assert c.closed
    assert len(outcomes) == 4
    assert all(o[0] == "closed" and "railio.Client is clos" in o[2] for o in outcomes), outcomes
    assert refused >= 1  # the first close() met calls in progress


def test_init_raced_from_threads_opens_one_client(mock_url):
    """__init__ called again by several threads at once on one closed
    Client: one opens it, the others raise RuntimeError. Each built a
    client with the GIL released and the last to return kept its own, so
    the others' clients (and their threads) were lost."""
    c = railio.Client(mock_url)
    c.close()
    n = 8
    barrier = threading.Barrier(n)
    results = []

    def opener():
        barrier.wait()
        try:
            c.__init__(mock_url, paths=4)
            results.append("opened")
        except RuntimeError as e:
            results.append(str(e))

    threads = [threading.Thread(target=opener) for _ in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(20)
    assert len(results) == n
    assert results.count("opened") == 1, results
    assert all("already open" in r for r in results if r != "opened"), results
    c.put("k", b"y" * 100)
    assert c.get("k") == b"y" * 100
    c.close()


@pytest.mark.parametrize("op", ["stat", "delete"])
def test_stat_and_delete_take_cancel_and_stats(railiod_factory, stopped_server, op):
    """stat() and delete() on a server that does not answer end soon after
    their cancel= token fires (far before the op timeout, 20 s here) and
    fill stats=: the stat with Cancelled, the delete, whose request went
    out (never asked twice), with OutcomeUnknown. On a running server they
    work with both given, delete's if_generation= too."""
    d = railiod_factory()
    with railio.Client(d.url, op_timeout="20s") as c:
        c.put("k", b"x")
        fn = getattr(c, op)
        tok, stats = railio.Cancel(), {}
        with stopped_server(d.proc):
            timer = threading.Timer(0.1, tok.fire)
            timer.start()
            t0 = time.monotonic()
            want = railio.OutcomeUnknown if op == "delete" else railio.Cancelled
            with pytest.raises(want):
                fn("k", cancel=tok, stats=stats)
            assert time.monotonic() - t0 < 2
            timer.join()
        assert 0.05 < stats["elapsed_s"] < 2 and stats["bytes"] == 0
        # The server resumed and may apply the DELETE it was sent at any
        # time now: a key of its own for the rest.
        gen = c.put("k2", b"x")["generation"]
        stats = {}
        assert c.stat("k2", cancel=railio.Cancel(), stats=stats)["generation"] == gen
        assert stats["retries"] == 0 and stats["elapsed_s"] > 0
        with pytest.raises(railio.GenerationChanged):
            c.delete("k2", if_generation=gen + 1, cancel=railio.Cancel(), stats={})
        assert c.delete("k2", if_generation=gen, stats=stats) is None
        with pytest.raises(railio.NotFound):
            c.stat("k2", stats=stats)


@pytest.mark.parametrize("op", ["stat", "delete"])
def test_ctrl_c_ends_stat_and_delete_blocked(railiod_factory, stopped_server, op):
    """A Ctrl-C (SIGINT) raises KeyboardInterrupt out of a main-thread
    stat() or delete() blocked on a server that does not answer, soon after
    it came, not at the op timeout (20 s here): the library runs the call's
    progress callback while a metadata call waits, as it does while a
    transfer does, and the binding runs the signal's handler there. The
    interrupt wins over the delete's OutcomeUnknown, as over a put's. The
    client works on afterwards."""
    d = railiod_factory()
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with railio.Client(d.url, op_timeout="20s") as c:
            c.put("k", b"x")
            with stopped_server(d.proc):
                timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
                timer.start()
                t0 = time.monotonic()
                with pytest.raises(KeyboardInterrupt):
                    getattr(c, op)("k")
                took = time.monotonic() - t0
                timer.join()
            assert 0.15 < took < 2
            # The server resumed and may apply the DELETE it was sent at
            # any time now: a key of its own for the rest.
            gen = c.put("k2", b"y")["generation"]
            assert c.stat("k2")["generation"] == gen
    finally:
        signal.signal(signal.SIGINT, old)
