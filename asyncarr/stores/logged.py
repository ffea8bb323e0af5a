"""LoggingStore: zarr 3's store wrapper that logs and counts every call to the store it wraps."""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Iterator
from typing import Any

from .base import ByteRange, Store
from .cache import WrapperStore

__all__ = ["LoggingStore"]


class LoggingStore(WrapperStore):
    """Logs each call (``Calling LocalStore.get(key)``, then ``Finished ... [0.01 s]``) and counts
    it in ``counter`` by method name, as zarr-python 3's ``LoggingStore`` does.

    The logger is ``logging.getLogger(f"LoggingStore({location})")`` at ``log_level``; with no
    handler configured anywhere for it, one writing to stdout is added (zarr's default).
    """

    def __init__(self, store: Store, log_level: str = "DEBUG", log_handler: logging.Handler | None = None) -> None:
        super().__init__(store)
        self.counter: defaultdict[str, int] = defaultdict(int)
        self.log_level = log_level
        self.logger = logging.getLogger(f"LoggingStore({store.location})")
        self.logger.setLevel(log_level)
        if log_handler is None and not self.logger.hasHandlers():
            log_handler = logging.StreamHandler(sys.stdout)
            log_handler.setFormatter(logging.Formatter("%(asctime)s - %(name)s - %(levelname)s - %(message)s"))
        if log_handler is not None:
            self.logger.addHandler(log_handler)

    @contextlib.contextmanager
    def _logged(self, method: str, hint: Any = "") -> Iterator[None]:
        """Log the call of ``method`` around the block, and count it."""
        operation = f"{type(self.inner).__name__}.{method}" + (f"({hint})" if hint != "" else "")
        self.logger.info(" Calling %s", operation)
        started = time.perf_counter()
        try:
            yield
        finally:
            self.counter[method] += 1
            self.logger.info("Finished %s [%.2f s]", operation, time.perf_counter() - started)

    async def get(self, key: str, byte_range: ByteRange | None = None) -> bytes | None:
        """The wrapped store's value at ``key``, logged."""
        with self._logged("get", key):
            return await super().get(key, byte_range)

    async def set(self, key: str, value: bytes) -> None:
        """Store ``value`` in the wrapped store, logged."""
        with self._logged("set", key):
            await super().set(key, value)

    async def delete(self, key: str) -> None:
        """Delete ``key`` from the wrapped store, logged."""
        with self._logged("delete", key):
            await super().delete(key)

    async def exists(self, key: str) -> bool:
        """Whether the wrapped store has ``key``, logged."""
        with self._logged("exists", key):
            return await super().exists(key)

    async def getsize(self, key: str) -> int | None:
        """Size of the value at ``key``, logged."""
        with self._logged("getsize", key):
            return await super().getsize(key)

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        """The wrapped store's keys below ``prefix``, logged."""
        with self._logged("list_prefix", prefix):
            async for key in super().list_prefix(prefix):
                yield key

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        """The wrapped store's children of ``prefix``, logged."""
        with self._logged("list_dir", prefix):
            async for name in super().list_dir(prefix):
                yield name

    def __getstate__(self) -> dict[str, Any]:
        return {"inner": self.inner, "log_level": self.log_level}

    def __setstate__(self, state: dict[str, Any]) -> None:
        LoggingStore.__init__(self, state["inner"], state["log_level"])
