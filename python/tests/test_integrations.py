# SPDX-License-Identifier: Apache-2.0
"""The SGLang and LMCache adapters, exercised directly (neither framework is
installed): pages of a numpy or torch host pool written and read back in
place, prefix hits, misses, clear; the async connector's calls."""

import asyncio
import uuid

import numpy as np
import pytest

import railio
from railio.integrations.lmcache import RailioConnector
from railio.integrations.sglang import RailioHiCacheStorage

try:
    import torch
except ImportError:  # pragma: no cover - Debian's python3-torch is a test dependency
    torch = None

PAGES, PAGE_ELEMS = 16, 2048  # float16: 4 KiB a page


@pytest.fixture(params=["mock", "railiod"])
def url(request, mock_url):
    """A mock:// store of the test's own, or the session's railiod."""
    if request.param == "mock":
        return mock_url
    return request.getfixturevalue("railiod")


@pytest.fixture
def ns():
    """A key prefix of the test's own (the railiod is the session's)."""
    return "ig-%s/" % uuid.uuid4().hex[:8]


def np_pool():
    rng = np.random.default_rng(5)
    return rng.standard_normal((PAGES, PAGE_ELEMS)).astype(np.float16)


def test_sglang_pool_round_trip_numpy(url, ns):
    with RailioHiCacheStorage(url, key_prefix=ns) as st:
        pool = np_pool()
        ref = pool.copy()
        keys = ["h%02d" % i for i in range(PAGES)]
        assert st.batch_set(keys, target_locations=[pool[i] for i in range(PAGES)])
        pool[:] = 0
        # read back into the same pool, rows in reverse order of their keys
        rows = [pool[PAGES - 1 - i] for i in range(PAGES)]
        got = st.batch_get(keys, target_locations=rows)
        assert all(g is r for g, r in zip(got, rows))
        assert np.array_equal(pool[::-1], ref)
        # single page: written in place, the target returned
        row = pool[3]
        row[:] = 0
        assert st.get(keys[3], target_location=row) is row
        assert np.array_equal(pool[3], ref[3])
        # no target: the bytes
        assert st.get(keys[0]) == ref[0].tobytes()


def test_sglang_hits_misses_and_clear(url, ns):
    with RailioHiCacheStorage(url, key_prefix=ns + "c/") as st, RailioHiCacheStorage(
        url, key_prefix=ns + "other/"
    ) as other:
        page = np.arange(PAGE_ELEMS, dtype=np.float16)
        assert st.set("a", page)
        assert st.set("b", value=page.tobytes())
        assert st.set("c", target_location=page)
        assert other.set("a", page)
        assert st.exists("a") and not st.exists("zz")
        assert st.batch_exists(["a", "b", "c"]) == 3
        assert st.batch_exists(["a", "b", "zz", "c"]) == 2
        assert st.batch_exists(["zz", "a"]) == 0
        assert st.batch_exists([]) == 0
        dst = np.zeros_like(page)
        assert st.get("zz", target_location=dst) is None
        got = st.batch_get(["a", "zz", "b"], target_locations=[dst, np.zeros_like(page),
                                                               np.zeros_like(page)])
        assert got[0] is dst and got[1] is None and got[2] is not None
        assert np.array_equal(dst, page)
        # a page whose size differs from its target is a miss, not a partial page
        big = np.zeros(PAGE_ELEMS * 2, dtype=np.float16)
        assert st.get("a", target_location=big) is None
        assert st.batch_get(["a"], target_locations=[big]) == [None]
        # target_size (bytes): only the first bytes of the target
        assert st.get("a", target_location=big, target_size=page.nbytes) is big
        assert np.array_equal(big[:PAGE_ELEMS], page)
        st.clear()
        assert st.batch_exists(["a", "b", "c"]) == 0
        assert other.exists("a")
        with pytest.raises(ValueError):
            st.set("x")
        with pytest.raises(ValueError):
            st.batch_get(["a", "b"], target_locations=[dst])


def test_sglang_batch_set_target_sizes_and_failure(mock_url):
    with RailioHiCacheStorage(mock_url) as st:
        buf = bytearray(b"0123456789" * 100)
        assert st.batch_set(["x", "y"], values=[buf, buf], target_sizes=[10, 1000])
        assert st.get("x") == b"0123456789"
        assert len(st.get("y")) == 1000
        with pytest.raises(ValueError):
            st.set("z", buf, target_size=1001)
    # a store that refuses every commit: False, not an exception
    with RailioHiCacheStorage(mock_url + "-f", faults="meta_error:op=put_commit:error=EIO") as st:
        assert st.set("x", b"v") is False
        assert st.batch_set(["x", "y"], [b"v", b"w"]) is False
        assert st.exists("x") is False


def test_sglang_target_size_on_any_contiguous_buffer(mock_url):
    # A Fortran-order page is contiguous, taken as its memory as railio
    # takes it (with target_size it was a TypeError: memoryview.cast takes
    # C order only); a strided one is a BufferError naming it.
    with RailioHiCacheStorage(mock_url) as st:
        page = np.asfortranarray(np.arange(64, dtype=np.uint8).reshape(8, 8))
        assert st.set("f", page, target_size=16)
        assert st.get("f") == page.tobytes(order="A")[:16]
        back = np.asfortranarray(np.zeros((8, 8), dtype=np.uint8))
        assert st.get("f", back, target_size=16) is back
        assert back.tobytes(order="A")[:16] == page.tobytes(order="A")[:16]
        with pytest.raises(BufferError, match=r"target_location is not contiguous"):
            st.get("f", np.zeros((8, 8), dtype=np.uint8)[:, ::2], target_size=4)
        with pytest.raises(TypeError):
            st.get("f", b"read-only", target_size=4)


@pytest.mark.skipif(torch is None, reason="python3-torch not installed")
def test_sglang_torch_pool_in_place(url, ns):
    with RailioHiCacheStorage(url, key_prefix=ns) as st:
        pool = torch.arange(PAGES * PAGE_ELEMS, dtype=torch.float32).reshape(PAGES, PAGE_ELEMS)
        ref = pool.clone()
        keys = ["p%d" % i for i in range(PAGES)]
        assert st.batch_set(keys, [pool[i] for i in range(PAGES)])
        pool.zero_()
        got = st.batch_get(keys, [pool[i] for i in range(PAGES)])
        assert all(g is not None for g in got)
        assert torch.equal(pool, ref)
        # target_size on a tensor page: the first half only
        row = pool[0]
        row.zero_()
        half = PAGE_ELEMS * 4 // 2
        assert st.set("half", pool[1], target_size=half)
        assert st.get("half", row, target_size=half) is row
        assert torch.equal(pool[0, : PAGE_ELEMS // 2], ref[1, : PAGE_ELEMS // 2])
        assert torch.count_nonzero(pool[0, PAGE_ELEMS // 2:]) == 0


class Key:
    """Stands for LMCache's CacheEngineKey."""

    def __init__(self, s):
        self.s = s

    def to_string(self):
        return "key@" + self.s


class MemObj:
    """Stands for LMCache's MemoryObj."""

    def __init__(self, n):
        self.buf = bytearray(n)

    @property
    def byte_array(self):
        return memoryview(self.buf)


def test_lmcache_connector(url, ns):
    async def main():
        conn = RailioConnector(url, key_prefix=ns)
        try:
            assert not await conn.exists("a")
            assert await conn.get("a") is None
            await conn.put("a", b"alpha")
            await conn.put(Key("b"), np.arange(100, dtype=np.uint8))
            m = MemObj(64)
            m.buf[:] = bytes(range(64))
            await conn.put("c", m)
            assert await conn.exists("a") and conn.exists_sync("a")
            assert await conn.get("a") == b"alpha"
            assert await conn.get(Key("b")) == bytes(range(100))
            assert sorted(await conn.list()) == ["a", "c", "key@b"]
            res = await asyncio.gather(*(conn.get(k) for k in ["a", "c", "nope"]))
            assert res == [b"alpha", bytes(range(64)), None]
            with pytest.raises(TypeError):
                await conn.put(3, b"x")
        finally:
            await conn.close()

        # with an allocator: get reads into the object it gives
        conn = RailioConnector(url, key_prefix=ns, allocator=MemObj)
        try:
            got = await conn.get("c")
            assert isinstance(got, MemObj) and bytes(got.buf) == bytes(range(64))
            assert await conn.get("nope") is None
        finally:
            await conn.close()

        # an object replaced between the lookup and the read, by a larger
        # or a shorter one: a miss either way, never an error
        for size in (128, 16):
            with railio.Client(url) as other:

                def replacing(n, size=size, other=other):
                    other.put(ns + "d", bytes(size))
                    return MemObj(n)

                other.put(ns + "d", bytes(64))
                conn = RailioConnector(url, key_prefix=ns, allocator=replacing)
                try:
                    assert await conn.get("d") is None
                finally:
                    await conn.close()

    with railio.Client(url):  # keeps a mock:// store alive between the connectors
        asyncio.run(asyncio.wait_for(main(), 60))
