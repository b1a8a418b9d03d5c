# SPDX-License-Identifier: Apache-2.0
"""LMCache remote connector over railio.

``RailioConnector`` has the shape of LMCache's ``RemoteConnector``
(``lmcache.v1.storage_backend.connector.base_connector``): async ``exists``,
``get``, ``put``, ``list`` and ``close``, plus ``exists_sync``, without
importing LMCache. Keys are strings or objects with ``to_string()`` (an
LMCache ``CacheEngineKey``); values are buffers (bytes, bytearray,
memoryview, numpy arrays, CPU torch tensors) or objects with a
``byte_array`` (an LMCache ``MemoryObj``). The calls run on
:class:`railio.aio.Client`, so none blocks the event loop.
"""

import railio
import railio.aio

__all__ = ["RailioConnector"]


def _key_str(key):
    to_string = getattr(key, "to_string", None)
    if to_string is not None:
        return to_string()
    if isinstance(key, str):
        return key
    raise TypeError("key must be a str or have to_string(), not %s" % type(key).__name__)


def _payload(obj):
    b = getattr(obj, "byte_array", None)
    return obj if b is None else b


class RailioConnector:
    """``RailioConnector(url, *, key_prefix="", allocator=None, max_workers=None, **options)``.

    url and options as for :class:`railio.Client`. ``allocator(nbytes)``, if
    given, returns the writable buffer (or ``MemoryObj``) ``get`` reads an
    object into (its size asked by one lookup first); without it ``get``
    returns bytes.
    """

    def __init__(self, url, *, key_prefix="", allocator=None, max_workers=None, **options):
        if not isinstance(key_prefix, str):
            raise TypeError("key_prefix must be a str")
        self.key_prefix = key_prefix
        self.allocator = allocator
        self.client = railio.aio.Client(url, max_workers=max_workers, **options)

    def _key(self, key):
        return self.key_prefix + _key_str(key)

    async def exists(self, key):
        """True if key is stored."""
        return await self.client.exists(self._key(key))

    def exists_sync(self, key):
        """exists, blocking the calling thread."""
        return self.client.sync.exists(self._key(key))

    async def get(self, key):
        """The object under key (bytes, or what allocator gave, filled), or
        None when absent."""
        k = self._key(key)
        try:
            if self.allocator is None:
                return await self.client.get(k)
            size = (await self.client.stat(k))["size"]
            obj = self.allocator(size)
            if obj is None:
                return None
            n = await self.client.get_into(k, _payload(obj))
        except railio.NotFound:
            return None
        except railio.Error as e:
            # replaced by a larger object between the lookup and the read:
            # a miss, as a shorter one is (not an error the caller would
            # have to tell from a failed transfer)
            if e.code == "RIO_ETOOBIG":
                return None
            raise
        # replaced by a shorter object between the lookup and the read: a miss
        return obj if n == size else None

    async def put(self, key, memory_obj):
        """Store memory_obj under key (replacing it atomically)."""
        await self.client.put(self._key(key), _payload(memory_obj))

    async def list(self):
        """Every key under key_prefix (without it)."""
        n = len(self.key_prefix)
        return [e.key[n:] async for e in self.client.list(self.key_prefix) if not e.is_dir]

    async def close(self):
        await self.client.close()
