# SPDX-License-Identifier: Apache-2.0
# Type hints of railio.aio.

import types
from collections.abc import AsyncIterator, Iterable
from typing import Any

from _typeshed import ReadableBuffer, WriteableBuffer

import railio

DEFAULT_WORKERS: int

class Client:
    """railio.Client's calls as awaitables, on a thread pool the client owns;
    cancelling the awaiting task fires the call's Cancel, waits for the call
    to end and raises CancelledError."""

    def __init__(
        self, url: str, *, max_workers: int | None = None, **options: bool | int | float | str
    ) -> None: ...
    @classmethod
    async def connect(
        cls, url: str, *, max_workers: int | None = None, **options: bool | int | float | str
    ) -> Client: ...
    @property
    def sync(self) -> railio.Client: ...
    @property
    def url(self) -> str: ...
    @property
    def last_stats(self) -> railio.Stats | None: ...
    @property
    def closed(self) -> bool: ...
    collect_stats: bool
    def cancel(self) -> None: ...
    async def put(
        self, key: str | bytes, buffer: ReadableBuffer | Any, *, cancel: railio.Cancel | None = None,
        stats: dict[str, Any] | None = None, if_absent: bool = False,
        if_generation: int | None = None,
    ) -> railio.Desc: ...
    async def get(
        self, key: str | bytes, *, cancel: railio.Cancel | None = None,
        stats: dict[str, Any] | None = None,
    ) -> bytes: ...
    async def get_into(
        self, key: str | bytes, buffer: WriteableBuffer | Any, *, cancel: railio.Cancel | None = None,
        stats: dict[str, Any] | None = None,
    ) -> int: ...
    async def batch_put(
        self, keys: Iterable[str | bytes], buffers: Iterable[ReadableBuffer | Any], *,
        cancel: railio.Cancel | None = None, stats: dict[str, Any] | None = None,
        if_absent: bool = False,
    ) -> list[int]: ...
    async def batch_get_into(
        self, keys: Iterable[str | bytes], buffers: Iterable[WriteableBuffer | Any], *,
        cancel: railio.Cancel | None = None, stats: dict[str, Any] | None = None,
    ) -> list[int]: ...
    async def exists(
        self, key: str | bytes, *, cancel: railio.Cancel | None = None,
        stats: dict[str, Any] | None = None,
    ) -> bool: ...
    async def batch_exists(
        self, keys: Iterable[str | bytes], *, cancel: railio.Cancel | None = None,
        stats: dict[str, Any] | None = None,
    ) -> int: ...
    async def stat(
        self, key: str | bytes, *, cancel: railio.Cancel | None = None,
        stats: dict[str, Any] | None = None,
    ) -> railio.Desc: ...
    async def delete(
        self, key: str | bytes, *, if_generation: int | None = None,
        cancel: railio.Cancel | None = None, stats: dict[str, Any] | None = None,
    ) -> None: ...
    def list(
        self, prefix: str = "", *, recursive: bool = True, start_after: str | None = None,
        page_size: int = 1000, cancel: railio.Cancel | None = None,
    ) -> AsyncIterator[railio.Entry]: ...
    async def close(self) -> None: ...
    async def __aenter__(self) -> Client: ...
    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: types.TracebackType | None,
    ) -> bool: ...
