# SPDX-License-Identifier: Apache-2.0
"""railio for asyncio: :class:`Client`, the same calls as awaitables.

Each call runs the blocking call of a :class:`railio.Client` on a small
thread pool the client owns (the extension releases the GIL for the whole
transfer), so the event loop never waits on the network. Each call carries
its own :class:`railio.Cancel`: cancelling the task that awaits it fires
the token, waits until the call has ended (no byte of it is moved after
that, no buffer of it is still written), then raises
:class:`asyncio.CancelledError` in the task.

Example::

    async with railio.aio.Client("railio://127.0.0.1:7070") as c:
        await c.put("k", b"hello")
        buf = bytearray(5)
        n = await c.get_into("k", buf)
        async for e in c.list("k"):
            print(e.key, e.size)
"""

import asyncio
import concurrent.futures
import functools
import itertools

import railio

__all__ = ["Client"]

# Threads of a client's pool when max_workers is not given: a call holds a
# thread for its whole duration, so this is how many calls of one client
# run at once; later ones wait in the pool's queue (a batch call is one
# call however many keys it moves).
DEFAULT_WORKERS = 8


class Client:
    """An asyncio client over :class:`railio.Client`.

    ``Client(url, *, max_workers=8, **options)``: ``url`` and ``options`` as
    for :class:`railio.Client` (options are the URL's query parameters);
    ``max_workers`` is the size of the thread pool the client owns (how many
    of its calls run at once). Use it as an async context manager or call
    :meth:`close`.
    """

    def __init__(self, url, *, max_workers=None, **options):
        self._init(railio.Client(url, **options), max_workers)

    def _init(self, sync, max_workers):
        if max_workers is None:
            max_workers = DEFAULT_WORKERS
        if not isinstance(max_workers, int) or isinstance(max_workers, bool) or max_workers < 1:
            sync.close()
            raise ValueError("max_workers must be a whole number >= 1")
        self._sync = sync
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=max_workers, thread_name_prefix="railio-aio"
        )
        self._pool_down = False
        self._closed = False

    @classmethod
    async def connect(cls, url, *, max_workers=None, **options):
        """Open the client on a thread: ``Client(...)`` opens it in the
        calling thread, and a railio:// client connects to its server
        then; this does not hold the event loop meanwhile."""
        loop = asyncio.get_running_loop()
        sync = await loop.run_in_executor(None, functools.partial(railio.Client, url, **options))
        self = cls.__new__(cls)
        self._init(sync, max_workers)
        return self

    def __repr__(self):
        return "<railio.aio.Client %r>" % (self._sync,)

    @property
    def sync(self):
        """The :class:`railio.Client` the calls run on (share it with threads)."""
        return self._sync

    @property
    def url(self):
        return self._sync.url

    @property
    def last_stats(self):
        """The stats dict of the last call that ended on this client (or None)."""
        return self._sync.last_stats

    @property
    def closed(self):
        return self._closed

    @property
    def collect_stats(self):
        """As railio.Client.collect_stats (False: stats only for calls given stats=)."""
        return self._sync.collect_stats

    @collect_stats.setter
    def collect_stats(self, on):
        self._sync.collect_stats = on

    def cancel(self):
        """Fire every call in progress on this client (they raise Cancelled)."""
        self._sync.cancel()

    # ------------------------------------------------------------ plumbing

    def _check(self):
        if self._closed:
            raise ValueError("railio.aio.Client is closed")

    async def _run(self, fn, args, kwargs, token):
        """Run fn(*args, **kwargs) on the pool; on task cancellation fire token,
        wait for the call to end, re-raise CancelledError."""
        self._check()
        loop = asyncio.get_running_loop()
        cf = self._pool.submit(fn, *args, **kwargs)
        fut = asyncio.wrap_future(cf, loop=loop)
        try:
            # shield: cancelling the task must not cancel fut (the asyncio
            # side would end at once while the call still runs).
            return await asyncio.shield(fut)
        except asyncio.CancelledError:
            # Still in the pool's queue (every worker busy): it never runs,
            # so nothing waits for the calls ahead of it to end.
            if cf.cancel():
                raise
            if token is not None:
                token.fire()
            await _wait_ended(fut)
            raise

    async def _transfer(self, fn, args, kwargs):
        token = kwargs.get("cancel")
        if token is None:
            token = kwargs["cancel"] = railio.Cancel()
        return await self._run(fn, args, kwargs, token)

    # ---------------------------------------------------------------- calls

    async def put(self, key, buffer, **kw):
        """Store buffer under key; the descriptor dict (see railio.Client.put)."""
        return await self._transfer(self._sync.put, (key, buffer), kw)

    async def get(self, key, **kw):
        """The whole object as bytes."""
        return await self._transfer(self._sync.get, (key,), kw)

    async def get_into(self, key, buffer, **kw):
        """Read the object into a writable contiguous buffer; the byte count."""
        return await self._transfer(self._sync.get_into, (key, buffer), kw)

    async def batch_put(self, keys, buffers, **kw):
        """One batch of PUTs (list of 0s; BatchError if any failed)."""
        return await self._transfer(self._sync.batch_put, (keys, buffers), kw)

    async def batch_get_into(self, keys, buffers, **kw):
        """One batch of GETs into buffers (list of byte counts; BatchError if any failed)."""
        return await self._transfer(self._sync.batch_get_into, (keys, buffers), kw)

    async def exists(self, key, **kw):
        """True if key exists."""
        return await self._transfer(self._sync.exists, (key,), kw)

    async def batch_exists(self, keys, **kw):
        """How many keys exist in a row from keys[0]."""
        return await self._transfer(self._sync.batch_exists, (keys,), kw)

    async def stat(self, key, **kw):
        """The key's descriptor dict; NotFound if absent."""
        return await self._transfer(self._sync.stat, (key,), kw)

    async def delete(self, key, **kw):
        """Remove key; NotFound if absent (if_generation= as railio.Client.delete)."""
        return await self._transfer(self._sync.delete, (key,), kw)

    def list(self, prefix="", **kw):
        """An async iterator of railio.Entry under prefix (options as
        railio.Client.list). Entries are fetched a page at a time on the pool."""
        self._check()
        return _AsyncList(self, prefix, kw)

    async def close(self):
        """Wait for the calls in progress, shut the pool down, close the client
        (on a thread: closing may wait for the transport). Idempotent; a
        close() that raised (a stream of ``client.sync`` still open) closes
        the client when called again."""
        self._closed = True
        # The sync client's state and the pool's, not ours: a close that
        # raised left the client open, and returning here then would leave
        # it so for good; and a sync client closed by its user (c.sync.close())
        # left the pool's threads running for as long as this object lived.
        if self._sync.closed and self._pool_down:
            return
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._close_sync)

    def _close_sync(self):
        self._pool.shutdown(wait=True)
        self._pool_down = True
        self._sync.close()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()
        return False


async def _wait_ended(fut):
    """Wait until fut is done even when the task is cancelled again meanwhile
    (the call ends soon: its token was fired); collect its outcome so that
    asyncio does not report an exception nobody retrieved."""
    while not fut.done():
        try:
            await asyncio.wait((fut,))
        except asyncio.CancelledError:
            continue
    if not fut.cancelled():
        fut.exception()


class _AsyncList:
    """``async for entry in client.list(prefix)``: the sync iterator advanced
    on the client's pool, one page of entries per hop."""

    def __init__(self, client, prefix, kw):
        self._client = client
        page = kw.get("page_size", 1000)
        self._page = page if isinstance(page, int) and page > 0 else 1000
        kw = dict(kw)
        self._token = kw.get("cancel")
        if self._token is None:
            self._token = kw["cancel"] = railio.Cancel()
        self._args = (prefix,)
        self._kw = kw
        self._it = None
        self._buf = []
        self._pos = 0
        self._done = False

    def __aiter__(self):
        return self

    def _open(self):
        return self._client._sync.list(*self._args, **self._kw)

    def _take(self, it):
        return list(itertools.islice(it, self._page))

    async def __anext__(self):
        if self._pos < len(self._buf):
            e = self._buf[self._pos]
            self._pos += 1
            return e
        if self._done:
            raise StopAsyncIteration
        if self._it is None:
            self._it = await self._client._run(self._open, (), {}, self._token)
        self._buf = await self._client._run(self._take, (self._it,), {}, self._token)
        self._pos = 0
        if len(self._buf) < self._page:
            self._done = True
        if not self._buf:
            raise StopAsyncIteration
        self._pos = 1
        return self._buf[0]

    async def aclose(self):
        self._done = True
        self._buf = []
