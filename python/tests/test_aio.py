# SPDX-License-Identifier: Apache-2.0
"""railio.aio: round trips, many awaits at once, task cancellation mapped to
the call's Cancel (the call ends before CancelledError reaches the task),
and an event loop that keeps running while transfers do."""

import asyncio
import contextlib
import time
import uuid

import pytest

import railio
import railio.aio

MiB = 1 << 20


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def pattern(n, seed):
    return bytes((i * 131 + seed) & 0xFF for i in range(256)) * (n // 256) + bytes(n % 256)


async def round_trip(url):
    # keys of their own: the railiod is the session's
    p = "aio-%s-" % uuid.uuid4().hex[:8]
    async with railio.aio.Client(url) as c:
        data = pattern(300_000, 1)
        desc = await c.put(p + "a/one", data)
        assert desc["size"] == len(data)
        assert await c.get(p + "a/one") == data
        buf = bytearray(len(data))
        assert await c.get_into(p + "a/one", buf) == len(data)
        assert buf == data
        assert (await c.stat(p + "a/one"))["size"] == len(data)

        keys = [p + "a/b%d" % i for i in range(5)]
        vals = [pattern(10_000 + i, i) for i in range(5)]
        assert await c.batch_put(keys, vals) == [0] * 5
        outs = [bytearray(len(v)) for v in vals]
        assert await c.batch_get_into(keys, outs) == [len(v) for v in vals]
        assert outs == [bytearray(v) for v in vals]

        assert await c.exists(p + "a/b0")
        assert not await c.exists(p + "a/none")
        assert await c.batch_exists(keys + [p + "a/none", p + "a/b1"]) == 5
        assert await c.batch_exists([p + "a/none"] + keys) == 0

        stats = {}
        await c.get_into(p + "a/b1", outs[1], stats=stats)
        assert stats["bytes"] == len(vals[1])
        c.collect_stats = False
        assert c.sync.collect_stats is False and c.collect_stats is False
        c.collect_stats = True

        listed = sorted([e.key async for e in c.list(p + "a/", page_size=2)])
        assert listed == sorted([p + "a/one"] + keys)

        await c.delete(p + "a/b4")
        assert not await c.exists(p + "a/b4")
        with pytest.raises(railio.NotFound):
            await c.get(p + "a/b4")
        with pytest.raises(FileNotFoundError):
            await c.delete(p + "a/b4")
        with pytest.raises(railio.BatchError) as ei:
            await c.batch_get_into([p + "a/b0", p + "a/b4"], outs[:2])
        assert isinstance(ei.value.results[1], railio.NotFound)
        assert ei.value.results[0] == len(vals[0])


@contextlib.asynccontextmanager
async def slow_client(name, size, seed):
    """A client reading at 2 MiB/s from the mock store name holding "big"
    (size bytes); the writer keeps the store (shared by name) alive."""
    async with railio.aio.Client(name) as w, railio.aio.Client(
        name + "?rate=2M", chunk="256K"
    ) as c:
        await w.put("big", pattern(size, seed))
        yield c


def test_round_trip_mock(mock_url):
    run(round_trip(mock_url))


def test_round_trip_railiod(railiod):
    run(round_trip(railiod))


def test_connect_opens_on_a_thread(railiod):
    async def main():
        c = await railio.aio.Client.connect(railiod, max_workers=2)
        try:
            await c.put("conn", b"x")
            assert await c.get("conn") == b"x"
        finally:
            await c.close()
        with pytest.raises(railio.InvalidArgument):
            await railio.aio.Client.connect(railiod, no_such_option=1)

    run(main())


def test_many_concurrent_awaits(mock_url):
    async def main():
        # 4 threads, 64 calls at once: they queue on the pool and all finish
        async with railio.aio.Client(mock_url, max_workers=4) as c:
            vals = [pattern(4096 + i, i) for i in range(64)]
            await asyncio.gather(*(c.put("k%d" % i, v) for i, v in enumerate(vals)))
            got = await asyncio.gather(*(c.get("k%d" % i) for i in range(64)))
            assert got == vals
            bufs = [bytearray(len(v)) for v in vals]
            ns = await asyncio.gather(*(c.get_into("k%d" % i, b) for i, b in enumerate(bufs)))
            assert ns == [len(v) for v in vals] and bufs == [bytearray(v) for v in vals]

    run(main())


def test_cancel_task_mid_transfer_ends_call_first(mock_url):
    """A read held by a `late` fault: when cancelled, its op writes 0xDD into
    the destination 500 ms later and only then completes. The task's
    CancelledError must come after that (the call has ended), and the buffer
    must not change afterwards; the caller's Cancel is fired."""

    async def main():
        name = mock_url
        url = name + "?faults=late:op=read:delay=500:count=1"
        # the writer keeps the mock's store (shared by name) alive
        async with railio.aio.Client(name) as w, railio.aio.Client(url, max_workers=1) as c:
            await w.put("obj", pattern(MiB, 7))
            buf = bytearray(MiB)
            token = railio.Cancel()
            task = asyncio.ensure_future(c.get_into("obj", buf, cancel=token))
            await asyncio.sleep(0.3)
            assert not task.done()
            t0 = time.monotonic()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            waited = time.monotonic() - t0
            assert token.fired
            assert waited >= 0.4, "CancelledError before the call ended (%.3f s)" % waited
            snap = bytes(buf)
            await asyncio.sleep(0.8)
            assert bytes(buf) == snap
            # the pool's one thread is free and the client works on
            assert await c.get_into("obj", buf) == MiB
            assert bytes(buf) == pattern(MiB, 7)

    run(main())


def test_cancel_task_on_slow_mock_is_prompt(mock_url):
    """8 MiB at 2 MiB/s takes 4 s; cancelled after 0.3 s the task ends soon
    after, and the same call run through the sync API raises railio.Cancelled."""

    async def main():
        async with slow_client(mock_url, 8 * MiB, 3) as c:
            buf = bytearray(8 * MiB)
            task = asyncio.ensure_future(c.get_into("big", buf))
            await asyncio.sleep(0.3)
            t0 = time.monotonic()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert time.monotonic() - t0 < 2.0

            token = railio.Cancel()
            loop = asyncio.get_running_loop()
            loop.call_later(0.3, token.fire)
            with pytest.raises(railio.Cancelled):
                await loop.run_in_executor(
                    None, lambda: c.sync.get_into("big", buf, cancel=token))

    run(main())


def test_cancel_of_a_queued_call_is_prompt(mock_url):
    """With the pool's one thread busy on a 4 s read, a second call waits in
    the pool's queue; cancelled there it ends at once (it never runs: its
    buffer is never written), not once the read ahead of it has ended."""

    async def main():
        async with slow_client(mock_url, 8 * MiB, 5) as fast:
            async with railio.aio.Client(fast.url, max_workers=1) as c:
                busy = asyncio.ensure_future(c.get_into("big", bytearray(8 * MiB)))
                buf = bytearray(8 * MiB)
                queued = asyncio.ensure_future(c.get_into("big", buf))
                await asyncio.sleep(0.3)
                t0 = time.monotonic()
                queued.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await queued
                waited = time.monotonic() - t0
                assert waited < 1.0, "the queued call's cancel waited %.3f s" % waited
                assert not busy.done()
                busy.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await busy
                assert buf == bytearray(8 * MiB)

    run(main())


def test_event_loop_not_blocked(mock_url):
    """A ticker every 10 ms keeps ticking while a 2 s transfer runs."""

    async def main():
        async with slow_client(mock_url, 4 * MiB, 5) as c:
            ticks = []
            done = False

            async def ticker():
                while not done:
                    ticks.append(time.monotonic())
                    await asyncio.sleep(0.01)

            t = asyncio.ensure_future(ticker())
            buf = bytearray(4 * MiB)
            t0 = time.monotonic()
            assert await c.get_into("big", buf) == 4 * MiB
            elapsed = time.monotonic() - t0
            done = True
            await t
            assert elapsed > 1.0
            gaps = [b - a for a, b in zip(ticks, ticks[1:])]
            assert len(ticks) >= 0.25 * elapsed / 0.01, (len(ticks), elapsed)
            assert max(gaps) < 0.5, max(gaps)

    run(main())


def test_close_and_context_manager(mock_url):
    async def main():
        c = railio.aio.Client(mock_url)
        await c.put("k", b"x")
        await c.close()
        await c.close()  # idempotent
        assert c.closed
        with pytest.raises(ValueError):
            await c.get("k")
        with pytest.raises(ValueError):
            railio.aio.Client(mock_url, max_workers=0)
        with pytest.raises(railio.InvalidArgument):
            railio.aio.Client(mock_url, no_such_option=1)

    run(main())


def test_close_refused_then_closes_when_called_again(mock_url):
    # A stream of c.sync still open: close() raises as the sync client's
    # does; it used to mark the client closed first, so the next close()
    # returned at once and the sync client was never closed.
    async def main():
        c = railio.aio.Client(mock_url)
        await c.put("k", b"x")
        r = c.sync.open("k", "rb")
        with pytest.raises(RuntimeError, match="in progress"):
            await c.close()
        assert c.closed and not c.sync.closed
        with pytest.raises(ValueError):
            await c.get("k")
        r.close()
        await c.close()
        assert c.sync.closed
        await c.close()  # idempotent

    run(main())


def test_close_after_the_sync_client_closed_shuts_the_pool(mock_url):
    # c.sync closed by its user first: close() returned at once on the sync
    # client's state, and the pool's threads ran on, idle, for as long as
    # the aio client lived.
    async def main():
        c = railio.aio.Client(mock_url, max_workers=2)
        await c.put("k", b"x")  # a worker of the pool started
        workers = list(c._pool._threads)
        assert workers
        c.sync.close()
        await c.close()
        assert c.closed and c.sync.closed
        assert not [t for t in workers if t.is_alive()]
        await c.close()  # idempotent

    run(main())


def test_list_async_iterator_pages(mock_url):
    async def main():
        async with railio.aio.Client(mock_url) as c:
            keys = ["p/%02d" % i for i in range(10)]
            await c.batch_put(keys, [b"v"] * 10)
            await c.put("q/other", b"v")
            got = []
            async for e in c.list("p/", page_size=3):
                got.append((e.key, e.size))
            assert got == [(k, 1) for k in keys]
            assert [e.key async for e in c.list("none/")] == []

    run(main())


@pytest.mark.parametrize("op", ["stat", "delete"])
def test_wait_for_ends_a_stat_or_delete_on_a_stopped_server(railiod_factory, stopped_server, op):
    """asyncio.wait_for(c.stat(k), 0.2) on a server that does not answer
    raises TimeoutError at once, and the pool's one thread is free again:
    close() returns promptly. stat and delete ran without a token before,
    so the timeout waited for the call's own end (the op timeout, 20 s
    here), and so did close()."""
    d = railiod_factory()

    async def main():
        c = railio.aio.Client(d.url, max_workers=1, op_timeout="20s")
        await c.put("k", b"x")
        with stopped_server(d.proc):
            t0 = time.monotonic()
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(getattr(c, op)("k"), 0.2)
            assert time.monotonic() - t0 < 2
            t0 = time.monotonic()
            await c.close()
            assert time.monotonic() - t0 < 2

    run(main())
