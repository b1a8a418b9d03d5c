# SPDX-License-Identifier: Apache-2.0
"""SGLang hierarchical cache storage over railio.

``RailioHiCacheStorage`` has the methods of SGLang's ``HiCacheStorage``
(``sglang.srt.mem_cache.hicache_storage``) with their meaning, without
importing SGLang: subclass or register it where SGLang wants a storage
backend. Pages move between the host memory pool and the store without a
copy: ``target_location`` is a CPU torch tensor, a numpy array or any
writable buffer (a page of the pool), and ``get``/``batch_get`` write into it.

Keys are stored as ``key_prefix + key``. Sizes (``target_size``,
``target_sizes``) are in bytes; a page read back must have exactly the size
of its target (else it counts as a miss), so a partial page never reaches
the pool.
"""

import logging
import pickle

import railio

__all__ = ["RailioHiCacheStorage"]

log = logging.getLogger(__name__)


def _byte_view(obj, size, what):
    """obj limited to its first size bytes (no copy); obj itself if size is None."""
    if size is None:
        return obj
    size = int(size)
    if size < 0:
        raise ValueError("%s: size %d is negative" % (what, size))
    if type(obj).__module__.split(".")[0] == "torch":
        import torch

        if not obj.is_contiguous():
            raise BufferError("%s is not contiguous" % what)
        flat = obj.view(-1).view(torch.uint8)
    else:
        # Its memory as bytes, as railio takes it: a Fortran-order array is
        # contiguous too (memoryview.cast refused it: C order only), and a
        # strided view is a BufferError as railio's own.
        try:
            flat = pickle.PickleBuffer(obj).raw()
        except BufferError:
            raise BufferError("%s is not contiguous" % what) from None
    if size > len(flat):
        raise ValueError("%s: size %d is more than its %d bytes" % (what, size, len(flat)))
    return flat[:size]


def _views(call, keys, bufs, sizes, what):
    """The byte views of bufs limited by sizes (None: whole), their counts
    checked against keys'."""
    bufs = list(bufs)
    if len(bufs) != len(keys):
        raise ValueError("%s: %d keys, %d %s" % (call, len(keys), len(bufs), what))
    sizes = [None] * len(keys) if sizes is None else list(sizes)
    if len(sizes) != len(keys):
        raise ValueError("%s: %d keys, %d target_sizes" % (call, len(keys), len(sizes)))
    return bufs, [_byte_view(b, n, "%s[%d]" % (what, i))
                  for i, (b, n) in enumerate(zip(bufs, sizes))]


def _nbytes(view):
    if type(view).__module__.split(".")[0] == "torch":
        return view.numel() * view.element_size()
    return memoryview(view).nbytes


class RailioHiCacheStorage:
    """SGLang ``HiCacheStorage`` on a railio store.

    ``RailioHiCacheStorage(url, *, key_prefix="", **options)``: url and
    options as for :class:`railio.Client`. Errors of the store are logged
    and reported the way SGLang expects (``None`` for a page not read,
    ``False`` for a write that failed, ``0`` hits); a bad argument raises.
    """

    def __init__(self, url, *, key_prefix="", **options):
        if not isinstance(key_prefix, str):
            raise TypeError("key_prefix must be a str")
        self.key_prefix = key_prefix
        self.client = railio.Client(url, **options)

    def _key(self, key):
        return self.key_prefix + key

    # ------------------------------------------------------------------ get

    def get(self, key, target_location=None, target_size=None):
        """The page under key: written into target_location (returned) when
        given, else returned as bytes; None when it is absent or unreadable."""
        try:
            if target_location is None:
                return self.client.get(self._key(key))
            view = _byte_view(target_location, target_size, "target_location")
            n = self.client.get_into(self._key(key), view)
        except railio.NotFound:
            return None
        except railio.Error as e:
            log.warning("railio: get %s failed: %s", key, e)
            return None
        if n != _nbytes(view):
            log.warning("railio: get %s: %d bytes, the target holds %d", key, n, _nbytes(view))
            return None
        return target_location

    def batch_get(self, keys, target_locations=None, target_sizes=None):
        """get of every key, the pages read in one batch: a list with, per
        key, its target_location (or bytes) or None."""
        keys = list(keys)
        if target_locations is None:
            return [self.get(k) for k in keys]
        targets, views = _views("batch_get", keys, target_locations, target_sizes,
                                "target_locations")
        if not keys:
            return []
        try:
            results = self.client.batch_get_into([self._key(k) for k in keys], views)
        except railio.BatchError as e:
            results = e.results
        except railio.Error as e:
            log.warning("railio: batch_get of %d keys failed: %s", len(keys), e)
            return [None] * len(keys)
        out = []
        for k, t, v, r in zip(keys, targets, views, results):
            if isinstance(r, int) and r == _nbytes(v):
                out.append(t)
                continue
            if not isinstance(r, railio.NotFound):
                log.warning("railio: batch_get %s: %s", k, r if isinstance(r, Exception)
                            else "%d bytes, the target holds %d" % (r, _nbytes(v)))
            out.append(None)
        return out

    # ------------------------------------------------------------------ set

    def set(self, key, value=None, target_location=None, target_size=None):
        """Store value (or the page at target_location) under key: True if
        stored, False if the store failed."""
        src = value if value is not None else target_location
        if src is None:
            raise ValueError("set %s: neither value nor target_location" % key)
        view = _byte_view(src, target_size, "value")
        try:
            self.client.put(self._key(key), view)
        except railio.Error as e:
            log.warning("railio: set %s failed: %s", key, e)
            return False
        return True

    def batch_set(self, keys, values=None, target_locations=None, target_sizes=None):
        """set of every key in one batch: True if every page was stored."""
        keys = list(keys)
        srcs = values if values is not None else target_locations
        if srcs is None:
            raise ValueError("batch_set: neither values nor target_locations")
        _, views = _views("batch_set", keys, srcs, target_sizes, "values")
        if not keys:
            return True
        try:
            self.client.batch_put([self._key(k) for k in keys], views)
        except railio.Error as e:
            log.warning("railio: batch_set of %d keys failed: %s", len(keys), e)
            return False
        return True

    # --------------------------------------------------------------- lookup

    def exists(self, key):
        """True if a page is stored under key."""
        try:
            return self.client.exists(self._key(key))
        except railio.Error as e:
            log.warning("railio: exists %s failed: %s", key, e)
            return False

    def batch_exists(self, keys):
        """How many of keys are stored in a row from keys[0] (the prefix of a
        sequence's pages that can be read back), in one lookup batch."""
        keys = [self._key(k) for k in keys]
        if not keys:
            return 0
        try:
            return self.client.batch_exists(keys)
        except railio.Error as e:
            log.warning("railio: batch_exists of %d keys failed: %s", len(keys), e)
            return 0

    def clear(self):
        """Delete every page under key_prefix (every key of the store when
        key_prefix is empty)."""
        for e in list(self.client.list(self.key_prefix)):
            if e.is_dir:
                continue
            try:
                self.client.delete(e.key)
            except railio.NotFound:
                pass

    def close(self):
        self.client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
