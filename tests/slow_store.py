"""Test helpers: real stores that add latency and count requests in flight, and whole-store snapshots."""

from __future__ import annotations

import asyncio
import os
import pathlib
import threading
from typing import Any

from asyncarr.stores import LocalStore, MemoryStore

METADATA_NAMES = frozenset({"zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata"})


class LatencyMixin:
    """Makes every get/set/delete of a real store take ``delay`` seconds and counts requests in flight."""

    def __init__(self, *args: Any, delay: float = 0.05, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.delay = delay
        self._counter_lock = threading.Lock()
        self.reset_counters()

    def reset_counters(self) -> None:
        """Forget what was counted so far."""
        with self._counter_lock:
            self.in_flight = 0
            self.max_in_flight = 0
            self.requests = 0

    def _enter(self) -> None:
        with self._counter_lock:
            self.in_flight += 1
            self.requests += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _leave(self) -> None:
        with self._counter_lock:
            self.in_flight -= 1

    async def _slow(self, operation: Any, *args: Any) -> Any:
        # The operation is called after the wait: a request cancelled while waiting never starts.
        self._enter()
        try:
            await asyncio.sleep(self.delay)
            return await operation(*args)
        finally:
            self._leave()

    async def get(self, key: str, byte_range: Any = None) -> bytes | None:
        return await self._slow(super().get, key, byte_range)

    async def set(self, key: str, value: bytes) -> None:
        return await self._slow(super().set, key, value)

    async def delete(self, key: str) -> None:
        return await self._slow(super().delete, key)

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state.pop("_counter_lock", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._counter_lock = threading.Lock()


class SlowMemoryStore(LatencyMixin, MemoryStore):
    """A MemoryStore whose requests each take ``delay`` seconds."""


class SlowLocalStore(LatencyMixin, LocalStore):
    """A LocalStore whose requests each take ``delay`` seconds."""


class ClosingMemoryStore(MemoryStore):
    """A MemoryStore that records whether it was closed."""

    closed = False

    async def close(self) -> None:
        self.closed = True
        await super().close()


def store_contents(store: Any) -> dict[str, bytes]:
    """Every key of ``store`` with its value (read through the store's own async interface)."""

    async def collect() -> dict[str, bytes]:
        keys = [key async for key in store.list_prefix("")]
        return {key: await store.get(key) for key in keys}

    return asyncio.run(collect())


def directory_contents(root: str | os.PathLike[str]) -> dict[str, bytes]:
    """Every file below ``root`` (relative path -> bytes); empty if ``root`` does not exist."""
    root = pathlib.Path(root)
    if not root.exists():
        return {}
    return {path.relative_to(root).as_posix(): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


def chunk_keys(store: Any, prefix: str = "") -> list[str]:
    """The keys of ``store`` below ``prefix`` that are not metadata documents."""
    return sorted(
        key for key in store_contents(store) if key.startswith(prefix) and key.rsplit("/", 1)[-1] not in METADATA_NAMES
    )
