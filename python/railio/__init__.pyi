# SPDX-License-Identifier: Apache-2.0
# Type hints of the railio package (the C extension railio._railio re-exported).

import io
import types
from collections.abc import Iterable, Iterator
from typing import Any, Literal, TypedDict, overload

from _typeshed import ReadableBuffer, WriteableBuffer

from . import aio as aio

__version__: str

# An option value: appended to the URL as a query parameter (True/False -> 1/0).
_Option = bool | int | float | str
# A key: str (UTF-8) or bytes, without NUL.
_Key = str | bytes

# ------------------------------------------------------------------ stats

class LatencyStats(TypedDict):
    p50_s: float
    p95_s: float
    p99_s: float
    max_s: float

class PathStats(TypedDict):
    bytes: int
    ops: int
    errors: int
    busy_s: float
    rate_mbps: float
    cap_mbps: float  # 0: unknown
    peak_depth: int
    state: str  # "healthy", "cooling", "probing"

class CpuStats(TypedDict):
    engine_s: float
    transport_s: float
    caller_s: float
    run_queue_wait_s: float

class AdaptStats(TypedDict):
    state: str  # "off", "growing", "settled", "ceiling"
    paths: int
    depth: int
    next_pct: int

class Stats(TypedDict):
    bytes: int
    elapsed_s: float
    goodput_mbps: float
    chunks: int
    retries: int
    retries_by_class: dict[str, int]
    replans: int
    latency: LatencyStats
    paths: list[PathStats]
    verdict: str
    verdict_text: str
    hash_s: float
    verify_s: float
    copy_s: float
    sink_s: float
    source_s: float
    op_s: float
    service_s: float
    peak_inflight_bytes: int
    cpu: CpuStats
    adapt: AdaptStats

class Desc(TypedDict):
    key: _Key  # bytes when the key is not UTF-8
    size: int
    generation: int
    etag: str
    chunk_size: int
    nchunks: int

# ------------------------------------------------------------- exceptions

class Error(OSError):
    """A railio error. code: the RIO name ("RIO_ENOTFOUND", "ECONNRESET");
    errno: the negative rio/errno value; detail: rio_error_detail() or None."""

    code: str
    errno: int  # type: ignore[assignment]
    detail: str | None

class NotFound(Error, FileNotFoundError): ...
class AccessDenied(Error, PermissionError): ...
class Timeout(Error, TimeoutError): ...
class Unavailable(Error, ConnectionError): ...
class VerifyError(Error): ...
class NoSpace(Error): ...
class OutcomeUnknown(Error): ...
class Cancelled(Error): ...
class InvalidArgument(Error, ValueError): ...
class GenerationChanged(Error): ...

class BatchError(Error):
    """Some ops of a batch failed: per key, its result (bytes or 0) or its Error."""

    results: list[int | Error]

# ------------------------------------------------------------------ tokens

class Cancel:
    """A cancellation token: pass it as cancel= to a call; fire() from any thread."""

    def __init__(self) -> None: ...
    def fire(self) -> None: ...
    @property
    def fired(self) -> bool: ...

# ----------------------------------------------------------------- listing

class Entry:
    """One listed key (or, with is_dir, a common prefix ending in '/')."""

    @property
    def key(self) -> str | bytes: ...
    @property
    def size(self) -> int: ...
    @property
    def etag(self) -> str: ...
    @property
    def generation(self) -> int: ...
    @property
    def mtime(self) -> float: ...
    @property
    def is_dir(self) -> bool: ...

# ----------------------------------------------------------------- streams

class Reader(io.RawIOBase):
    """Client.open(key, "rb"): the object streamed in order, every chunk verified."""

    @property
    def size(self) -> int: ...
    @property
    def etag(self) -> str: ...
    @property
    def generation(self) -> int: ...
    def readinto(self, b: WriteableBuffer, /) -> int: ...
    def read(self, n: int = -1, /) -> bytes: ...
    def readable(self) -> bool: ...
    def seekable(self) -> bool: ...
    def close(self) -> None: ...
    def __enter__(self) -> Reader: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: types.TracebackType | None,
    ) -> None: ...

class Writer:
    """Client.open(key, "wb"): nothing is visible until close() commits;
    an exception inside its with-block aborts it."""

    def write(self, b: ReadableBuffer, /) -> int: ...
    def close(self) -> Desc | None: ...
    def abort(self) -> None: ...
    def writable(self) -> bool: ...
    @property
    def closed(self) -> bool: ...
    def __enter__(self) -> Writer: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: types.TracebackType | None,
    ) -> None: ...

# ------------------------------------------------------------------ client

class Client:
    """A client for url (mock://, railio://, s3://, rados://, file://);
    options are the URL's query parameters as keyword arguments. Safe to
    share across threads; every transfer releases the GIL."""

    @property
    def url(self) -> str: ...
    @property
    def last_stats(self) -> Stats | None: ...
    @property
    def closed(self) -> bool: ...
    # False: calls collect stats only when given stats= (last_stats stays
    # None); a call's stats cost the library a scan of /proc per call.
    collect_stats: bool
    def __init__(self, url: str, **options: _Option) -> None: ...
    def close(self) -> None: ...
    def cancel(self) -> None: ...
    def __enter__(self) -> Client: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: types.TracebackType | None,
    ) -> None: ...
    def put(
        self, key: _Key, buffer: ReadableBuffer | Any, *, cancel: Cancel | None = None,
        stats: dict[str, Any] | None = None, if_absent: bool = False,
        if_generation: int | None = None,
    ) -> Desc: ...
    def get(
        self, key: _Key, *, cancel: Cancel | None = None, stats: dict[str, Any] | None = None
    ) -> bytes: ...
    def get_into(
        self, key: _Key, buffer: WriteableBuffer | Any, *, cancel: Cancel | None = None,
        stats: dict[str, Any] | None = None,
    ) -> int: ...
    def batch_put(
        self, keys: Iterable[_Key], buffers: Iterable[ReadableBuffer | Any], *,
        cancel: Cancel | None = None, stats: dict[str, Any] | None = None,
        if_absent: bool = False,
    ) -> list[int]: ...
    def batch_get_into(
        self, keys: Iterable[_Key], buffers: Iterable[WriteableBuffer | Any], *,
        cancel: Cancel | None = None, stats: dict[str, Any] | None = None,
    ) -> list[int]: ...
    def exists(
        self, key: _Key, *, cancel: Cancel | None = None, stats: dict[str, Any] | None = None
    ) -> bool: ...
    def batch_exists(
        self, keys: Iterable[_Key], *, cancel: Cancel | None = None,
        stats: dict[str, Any] | None = None,
    ) -> int: ...
    def stat(
        self, key: _Key, *, cancel: Cancel | None = None, stats: dict[str, Any] | None = None
    ) -> Desc: ...
    def delete(
        self, key: _Key, *, if_generation: int | None = None, cancel: Cancel | None = None,
        stats: dict[str, Any] | None = None,
    ) -> None: ...
    def list(
        self, prefix: str = "", *, recursive: bool = True, start_after: str | None = None,
        page_size: int = 1000, cancel: Cancel | None = None,
    ) -> Iterator[Entry]: ...
    @overload
    def open(
        self, key: _Key, mode: Literal["rb"] = "rb", *, prefetch: int = 0,
        size: int | None = None, cancel: Cancel | None = None,
        stats: dict[str, Any] | None = None,
    ) -> Reader: ...
    @overload
    def open(
        self, key: _Key, mode: Literal["wb"], *, prefetch: int = 0, size: int | None = None,
        cancel: Cancel | None = None, stats: dict[str, Any] | None = None,
    ) -> Writer: ...

def version() -> str: ...
def backends() -> list[str]: ...
