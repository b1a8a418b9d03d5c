# SPDX-License-Identifier: Apache-2.0
"""Client.list (pages, delimiter, odd keys, start_after), Client.open "rb"
(readinto in place, read, io.BufferedReader, early close, cancel, the GIL
released) and "wb" (unknown size, abort, a with-block that raises), against
mock:// and a railiod the fixtures (conftest.py) start."""

import contextlib
import hashlib
import io
import os
import signal
import subprocess
import threading
import time
import uuid

import pytest

import railio

MiB = 1 << 20


def _prefix():
    return "t%s/" % uuid.uuid4().hex[:12]


def _put_all(c, keys, value=b"v"):
    c.batch_put(keys, [value] * len(keys))


def _keys(entries):
    return [e.key for e in entries]


# ------------------------------------------------------------------- list


def test_list_2500_keys_in_pages(any_client):
    p = _prefix()
    keys = ["%sk%05d" % (p, i) for i in range(2500)]
    _put_all(any_client, keys[::-1], b"0123456789")
    it = any_client.list(p)
    assert iter(it) is it
    got = list(it)
    # 1000 a page by default: three pages, every key once, in byte order.
    assert _keys(got) == keys
    for e in got:
        assert isinstance(e, railio.Entry)
        assert e.size == 10 and not e.is_dir
        assert isinstance(e.generation, int)
        assert isinstance(e.etag, str) and isinstance(e.mtime, float)
        assert e.mtime == 0.0 or e.mtime > 1.5e9  # 0.0: the listing cannot say
    # Small pages: hundreds of rio_list calls, the same keys.
    assert _keys(any_client.list(p, page_size=7)) == keys
    assert _keys(any_client.list(p, page_size=1))[:5] == keys[:5]
    assert _keys(any_client.list(p, page_size=10000)) == keys
    assert list(any_client.list(p + "nothing-here")) == []


def test_list_page_size_bounds(client):
    for bad in (0, -1, 10001):
        with pytest.raises(railio.InvalidArgument, match="page_size"):
            client.list("", page_size=bad)
    with pytest.raises(TypeError):
        client.list("", cancel=42)


def test_list_delimiter(any_client):
    p = _prefix()
    _put_all(any_client, [p + k for k in ("a/1", "a/2", "a/b/3", "b/4", "c", "d/")])
    top = list(any_client.list(p, recursive=False))
    assert [(e.key, e.is_dir) for e in top] == [
        (p + "a/", True), (p + "b/", True), (p + "c", False), (p + "d/", True)]
    assert [(e.size, e.etag, e.generation, e.mtime) for e in top if e.is_dir] == [(0, "", 0, 0.0)] * 3
    assert [(e.key, e.is_dir) for e in any_client.list(p + "a/", recursive=False)] == [
        (p + "a/1", False), (p + "a/2", False), (p + "a/b/", True)]
    # Recursive: every key.
    assert _keys(any_client.list(p)) == [p + k for k in ("a/1", "a/2", "a/b/3", "b/4", "c", "d/")]
    # Delimiter listing in pages of one: each common prefix still once.
    assert [e.key for e in any_client.list(p, recursive=False, page_size=1)] == [
        p + "a/", p + "b/", p + "c", p + "d/"]


def test_list_odd_keys(any_client):
    p = _prefix()
    odd = [p + "sp ace", p + "q?x=1&y#z", p + "pct%41", p + "ключ/é", p + "\t\x01ctl"]
    _put_all(any_client, odd)
    # A key that is not UTF-8: written and listed as bytes.
    raw = p.encode() + b"bin\xff\xfe"
    with any_client.open(raw, "wb") as w:
        w.write(b"raw")
    got = _keys(any_client.list(p))
    want = sorted([k.encode() for k in odd] + [raw])
    assert [k if isinstance(k, bytes) else k.encode() for k in got] == want
    assert raw in got and all(isinstance(k, str) for k in got if k != raw)
    # The bytes key reads back.
    with any_client.open(raw) as r:
        assert r.read() == b"raw"
    # A prefix may be bytes too; a key with a NUL is refused before any call.
    assert _keys(any_client.list(p.encode() + b"bin")) == [raw]
    with pytest.raises(railio.InvalidArgument, match="NUL character"):
        any_client.list("a\0b")
    with pytest.raises(TypeError):
        any_client.list(5)


def test_list_start_after(any_client):
    p = _prefix()
    keys = ["%sk%04d" % (p, i) for i in range(1200)]
    _put_all(any_client, keys)
    assert _keys(any_client.list(p, start_after=keys[999])) == keys[1000:]
    assert _keys(any_client.list(p, start_after=keys[9], page_size=100)) == keys[10:]
    # Not a key itself: the keys after it in byte order.
    assert _keys(any_client.list(p, start_after=p + "k0099z")) == keys[100:]
    assert list(any_client.list(p, start_after=keys[-1])) == []


def test_list_error_and_closed_client(client):
    client.put("a", b"1")
    tok = railio.Cancel()
    it = client.list("", cancel=tok)
    tok.fire()
    with pytest.raises(railio.Cancelled):
        next(it)
    assert list(it) == []  # an error ends the listing
    assert _keys(client.list("")) == ["a"]
    it = client.list("")
    client.close()
    with pytest.raises(ValueError):
        next(it)
    with pytest.raises(ValueError):
        client.list("")


# ----------------------------------------------------------------- reader

BIG = 64 * MiB


@pytest.fixture(scope="module")
def big(railiod):
    """A 64 MiB object on the railiod and its bytes."""
    data = os.urandom(BIG)
    key = "big/" + uuid.uuid4().hex
    with railio.Client(railiod) as c:
        c.put(key, data)
    return key, data


def test_reader_readinto_small_pieces_byte_exact(railiod, big):
    key, data = big
    want = hashlib.sha256(data).hexdigest()
    h = hashlib.sha256()
    buf = bytearray(100003)  # not a divisor of any chunk size
    mv = memoryview(buf)
    stats = {}
    with railio.Client(railiod) as c:
        with c.open(key, "rb", prefetch=4, stats=stats) as r:
            assert r.readable() and not r.seekable() and not r.writable()
            assert r.size == BIG and r.generation > 0 and isinstance(r.etag, str)
            assert r.key == key
            total = 0
            while True:
                n = r.readinto(buf)
                if n == 0:
                    break
                h.update(mv[:n])
                total += n
                assert r.tell() == total
            assert r.readinto(buf) == 0 and r.read() == b""
        assert r.closed
        assert total == BIG and h.hexdigest() == want
        assert stats["bytes"] == BIG
        assert c.last_stats["bytes"] == BIG
        # the loop's own time (the sha256) is the destination's: sink_s
        assert 0 < stats["sink_s"] <= stats["elapsed_s"]


def _rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_reader_into_numpy_at_its_address(railiod, big):
    np = pytest.importorskip("numpy")
    key, data = big
    arr = np.empty(BIG, dtype=np.uint8)
    arr.fill(1)  # touched: its pages are resident before the read
    addr = arr.ctypes.data
    with railio.Client(railiod) as c:
        rss0 = _rss()
        with c.open(key, prefetch=2) as r:
            off = 0
            while off < BIG:
                # A numpy view of the array: the reader writes at its address.
                n = r.readinto(arr[off:off + 3 * MiB + 1])
                assert n > 0
                off += n
            assert r.readinto(arr[:1]) == 0
        grown = _rss() - rss0
    assert arr.ctypes.data == addr
    assert arr.tobytes() == data
    # No copy of the object was made on the way (prefetch=2 chunks only).
    print("RSS growth over a 64 MiB read: %.1f MiB" % (grown / MiB))
    assert grown < 32 * MiB, grown
    # A read-only or non-contiguous destination is refused.
    with railio.Client(railiod) as c, c.open(key) as r:
        # Said as readinto's (it named get_into, a call not made).
        with pytest.raises(TypeError, match="b is read-only: what is read lands in it") as ei:
            r.readinto(b"read-only bytes")
        assert "get_into" not in str(ei.value)
        with pytest.raises(BufferError):
            r.readinto(np.zeros((8, 8), dtype=np.uint8)[:, ::2])


def test_reader_read_and_readall(any_client):
    data = os.urandom(3 * MiB + 5)
    key = _prefix() + "obj"
    any_client.put(key, data)
    with any_client.open(key) as r:
        assert r.read(0) == b""
        assert r.read(10) == data[:10]
        assert r.read(MiB) == data[10:10 + MiB]
        assert r.readall() == data[10 + MiB:]
        assert r.read(5) == b"" and r.read() == b""
    with any_client.open(key) as r:
        assert r.read() == data
    with any_client.open(key) as r:
        assert r.read(len(data) + 100) == data


def test_reader_buffered(railiod, big):
    key, data = big
    with railio.Client(railiod) as c:
        r = c.open(key)
        assert isinstance(r, io.RawIOBase)
        b = io.BufferedReader(r, buffer_size=256 * 1024)
        assert b.read(7) == data[:7]
        assert b.peek(1)[:1] == data[7:8]
        parts = [b.read(12345) for _ in range(10)]
        assert b"".join(parts) == data[7:7 + 123450]
        rest = b.read()
        assert rest == data[7 + 123450:]
        b.close()
        assert r.closed
        # Lines through a text wrapper over the buffered reader.
        c.put("lines", b"one\ntwo\nthree\n")
        with io.TextIOWrapper(io.BufferedReader(c.open("lines")), encoding="ascii") as t:
            assert t.readlines() == ["one\n", "two\n", "three\n"]


def test_reader_closed_early(railiod, big):
    key, data = big
    c = railio.Client(railiod)
    r = c.open(key, prefetch=8)
    assert r.read(MiB) == data[:MiB]
    r.close()  # 63 MiB unread: the fetches in flight stop
    r.close()  # idempotent
    assert r.closed
    with pytest.raises(ValueError, match="closed"):
        r.read(1)
    with pytest.raises(ValueError, match="closed"):
        r.readinto(bytearray(1))
    with pytest.raises(ValueError):
        r.readable()
    with c.open(key) as r2:  # the any_client goes on
        assert r2.read(5) == data[:5]
    c.close()  # nothing open any more


def test_client_close_refused_while_stream_open(railiod, big):
    key, data = big
    c = railio.Client(railiod)
    r = c.open(key, prefetch=2)
    w = c.open("w/open", "wb", size=10)
    assert r.read(10) == data[:10]
    # A stream is a call in progress: close() fires its token and refuses.
    with pytest.raises(RuntimeError):
        c.close()
    with pytest.raises(railio.Cancelled):
        r.read()
    r.close()
    with pytest.raises(railio.Cancelled):
        w.write(b"0123456789")
        w.close()
    w.abort()
    c.close()


def test_reader_dropped_unclosed(client):
    client.put("k", os.urandom(MiB))
    r = client.open("k")
    r.read(10)
    del r  # closed by its destructor: the any_client is no longer busy
    client.close()


def test_reader_missing_key_raises_at_open(any_client):
    with pytest.raises(railio.NotFound) as ei:
        any_client.open(_prefix() + "missing")
    assert isinstance(ei.value, FileNotFoundError)
    assert isinstance(ei.value, railio.Error)
    # A failed open leaves the any_client usable and not busy.
    any_client.put("present", b"x")
    with any_client.open("present") as r:
        assert r.read() == b"x"


def test_open_arguments(client):
    client.put("k", b"x")
    with pytest.raises(railio.InvalidArgument, match="mode"):
        client.open("k", "r")
    with pytest.raises(railio.InvalidArgument, match="mode"):
        client.open("k", "ab")
    with pytest.raises(railio.InvalidArgument, match="prefetch"):
        client.open("k", prefetch=-1)
    with pytest.raises(railio.InvalidArgument, match="size"):
        client.open("k", "rb", size=3)
    with pytest.raises(railio.InvalidArgument, match="size"):
        client.open("k", "wb", size=-1)
    with pytest.raises(TypeError):
        client.open("k", stats=[])
    with pytest.raises(TypeError):
        client.open(None)
    with pytest.raises(railio.InvalidArgument, match="NUL character"):
        client.open("a\0b")


# ------------------------------------------------------------------ writer


def test_writer_unknown_size_round_trip(any_client):
    p = _prefix()
    data = os.urandom(9 * MiB + 13)
    pieces = [1, 4096, MiB - 1, 3 * MiB, 7, len(data)]
    stats = {}
    w = any_client.open(p + "w/obj", "wb", stats=stats)
    assert w.writable() and not w.readable() and not w.seekable()
    off = 0
    for n in pieces:
        chunk = memoryview(data)[off:off + n]
        assert w.write(chunk) == len(chunk)
        off += len(chunk)
    assert off == len(data)
    with pytest.raises(railio.NotFound):
        any_client.stat(p + "w/obj")  # nothing visible before close
    desc = w.close()
    assert w.closed
    assert desc["key"] == p + "w/obj" and desc["size"] == len(data)
    assert desc["generation"] > 0 and isinstance(desc["etag"], str)
    assert desc["nchunks"] >= 1 and desc["chunk_size"] > 0
    assert w.close() == desc  # idempotent
    assert stats["bytes"] == len(data)
    assert any_client.get(p + "w/obj") == data
    with pytest.raises(ValueError, match="closed"):
        w.write(b"more")
    # Empty object, and buffers of every kind.
    with any_client.open(p + "w/empty", "wb") as w:
        pass
    assert any_client.stat(p + "w/empty")["size"] == 0
    with any_client.open(p + "w/kinds", "wb") as w:
        w.write(b"ab")
        w.write(bytearray(b"cd"))
        w.write(memoryview(b"xefx")[1:3])
    assert any_client.get(p + "w/kinds") == b"abcdef"


def test_writer_known_size_railiod(railiod):
    data = os.urandom(5 * MiB + 1)
    with railio.Client(railiod) as c:
        with c.open("w/known", "wb", size=len(data)) as w:
            for off in range(0, len(data), 1000003):
                w.write(data[off:off + 1000003])
        assert c.get("w/known") == data
        # A declared size not met: close raises, nothing is published.
        w = c.open("w/short", "wb", size=100)
        w.write(b"x" * 99)
        with pytest.raises(railio.Error):
            w.close()
        with pytest.raises(railio.NotFound):
            c.stat("w/short")
        assert w.closed


def test_writer_buffered(client):
    data = os.urandom(2 * MiB + 3)
    bw = io.BufferedWriter(client.open("w/buf", "wb"), buffer_size=64 * 1024)
    for off in range(0, len(data), 777):
        bw.write(data[off:off + 777])
    bw.close()  # flushes, then closes the writer: commits
    assert client.get("w/buf") == data


def test_writer_with_block_that_raises_leaves_nothing(any_client):
    key = _prefix() + "aborted"

    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        with any_client.open(key, "wb", size=3 * MiB) as w:
            w.write(os.urandom(3 * MiB))  # every byte written, then the block fails
            raise Boom()
    assert w.closed
    with pytest.raises(railio.NotFound):
        any_client.stat(key)
    assert not any_client.exists(key)
    # abort() by hand, and a writer dropped unclosed: nothing either.
    w = any_client.open(key, "wb", size=4)
    w.write(b"abcd")
    w.abort()
    w.abort()
    assert w.closed and w.close() is None
    w = any_client.open(key, "wb", size=4)
    w.write(b"abcd")
    del w
    with pytest.raises(railio.NotFound):
        any_client.stat(key)
    assert list(any_client.list(key)) == []


# ------------------------------------------------------------------ cancel


def test_cancel_stops_reader_and_writer(railiod, big):
    key, data = big
    with railio.Client(railiod) as c:
        r = c.open(key, prefetch=2)
        buf = bytearray(64 * 1024)
        assert r.readinto(buf) == len(buf)
        c.cancel()  # fires the token the reader took at open
        with pytest.raises(railio.Cancelled):
            while r.readinto(buf):
                pass
        with pytest.raises(railio.Cancelled):
            r.readinto(buf)  # the reader keeps its error
        r.close()
        # Later calls run normally.
        with c.open(key) as r2:
            assert r2.read(10) == data[:10]

        w = c.open("w/cancelled", "wb", size=BIG)
        w.write(memoryview(data)[:MiB])
        c.cancel()
        with pytest.raises(railio.Cancelled):
            w.write(memoryview(data)[MiB:])
            w.close()
        w.abort()
        with pytest.raises(railio.NotFound):
            c.stat("w/cancelled")


def test_cancel_token_from_another_thread(railiod, big):
    key, data = big
    tok = railio.Cancel()
    errors = []
    progress = []

    with railio.Client(railiod) as c:
        r = c.open(key, prefetch=1, cancel=tok)

        def reader():
            buf = bytearray(4096)
            try:
                while True:
                    n = r.readinto(buf)
                    if not n:
                        break
                    progress.append(n)
            except railio.Error as e:
                errors.append(e)

        t = threading.Thread(target=reader)
        t.start()
        while not progress:  # the reader runs (and releases the GIL meanwhile)
            time.sleep(0.001)
        tok.fire()
        t.join(30)
        assert not t.is_alive()
        r.close()
        assert len(errors) == 1 and isinstance(errors[0], railio.Cancelled)
        assert sum(progress) < BIG
        # The any_client itself was not cancelled.
        with c.open(key) as r2:
            assert r2.read(3) == data[:3]


@contextlib.contextmanager
def _on_stopped_server(proc, fn):
    """fn() on a thread while the railiod proc is stopped (SIGSTOP): yields
    (thread, out) once fn is about to run, out getting fn's result or its
    railio.Error. Leaving resumes the server and joins the thread; should
    the GIL stay held, a watchdog resumes the server after 10 s."""
    out = []
    entered = threading.Event()

    def run():
        entered.set()
        try:
            out.append(fn())
        except railio.Error as e:
            out.append(e)

    os.kill(proc.pid, signal.SIGSTOP)
    watchdog = subprocess.Popen(["sh", "-c", "sleep 10; kill -CONT %d" % proc.pid])
    t = threading.Thread(target=run)
    try:
        t.start()
        entered.wait()
        yield t, out
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        watchdog.kill()
        watchdog.wait()
        t.join(30)


def test_readinto_releases_the_gil(railiod_factory):
    """A readinto blocked on a stopped server leaves the GIL to other threads,
    and refuses a second thread on the same reader."""
    d = railiod_factory()
    with railio.Client(d.url) as c:
        data = os.urandom(16 * MiB)
        c.put("g", data)
        tok = railio.Cancel()
        r = c.open("g", prefetch=1, cancel=tok)
        buf = bytearray(len(data))
        with _on_stopped_server(d.proc, lambda: r.readinto(buf)) as (t, out):
            spins, end = 0, time.monotonic() + 0.2
            while time.monotonic() < end:  # Python code runs meanwhile
                spins += 1
            assert t.is_alive() and not out
            # One thread at a time: the library's reader is not thread-safe.
            with pytest.raises(RuntimeError, match="in use"):
                r.readinto(bytearray(1))
            with pytest.raises(RuntimeError, match="in use"):
                r.close()
            assert not r.closed
            c.cancel()  # fires the reader's token (a call in progress)
            assert tok.fired
        assert not t.is_alive()
        assert spins > 0
        res = out[0]
        assert isinstance(res, railio.Cancelled) or res < len(data), res
        with pytest.raises(railio.Cancelled):
            while r.readinto(buf):
                pass
        r.close()


def test_stream_stats(client):
    data = os.urandom(300 * 1024)
    client.put("s", data)
    with client.open("s") as r:
        r.read()
    assert client.last_stats["bytes"] == len(data)
    w = client.open("s2", "wb")
    w.write(data)
    w.close()
    assert client.last_stats["bytes"] == len(data)
    first = client.last_stats
    # collect_stats off: a stream given no stats= collects none.
    client.collect_stats = False
    with client.open("s") as r:
        r.read(10)
    with client.open("s3", "wb") as w:
        w.write(b"abc")
    assert client.last_stats == first
    got = {}
    with client.open("s", stats=got) as r:
        assert r.read() == data
        assert got == {}  # filled at close
    assert got["bytes"] == len(data) and client.last_stats == got


def test_reader_into_torch_tensor(client):
    torch = pytest.importorskip("torch")
    data = os.urandom(MiB + 7)
    client.put("t", data)
    t = torch.zeros(len(data), dtype=torch.uint8)
    addr = t.data_ptr()
    with client.open("t") as r:
        assert r.readinto(t) == len(data)  # the tensor's memory, no copy
    assert t.data_ptr() == addr and bytes(t.numpy()) == data
    with client.open("t2", "wb") as w:  # and a tensor as a source
        assert w.write(t) == len(data)
    assert client.get("t2") == data


def test_cancel_unblocks_a_writer(railiod_factory):
    """Client.cancel() from another thread stops a write blocked on a stopped
    server (every slot in flight); nothing is published."""
    d = railiod_factory()
    with railio.Client(d.url) as c:
        data = os.urandom(32 * MiB)
        w = c.open("w/blocked", "wb", prefetch=2)
        with _on_stopped_server(d.proc, lambda: w.write(data)) as (t, out):
            time.sleep(0.2)
            assert t.is_alive() and not out  # blocked, the GIL free
            with pytest.raises(RuntimeError, match="in use"):
                w.write(b"x")
            c.cancel()
            t.join(30)
            assert not t.is_alive()  # while the server is still stopped
        assert isinstance(out[0], railio.Cancelled), out
        with pytest.raises(railio.Cancelled):
            w.close()
        assert w.closed
        with pytest.raises(railio.NotFound):
            c.stat("w/blocked")
