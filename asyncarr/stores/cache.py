"""Stores that wrap another store: `WrapperStore` passes every request on, `LRUStoreCache` caches reads.

Wrappers make no requests of their own: ``metrics()`` reports the wrapped store's, and an
`LRUStoreCache` adds its ``cache_hits`` and ``cache_misses`` (reads answered without a request,
and reads passed on).

`LRUStoreCache(store, max_size)` is zarr 2's caching wrapper: values read through it are kept,
least recently used first out, up to ``max_size`` bytes (None: no limit), and so are listings.
Its own ``set`` and ``delete`` invalidate what they change (a value, and every listing); a
change made to the wrapped store by anyone else is not seen until `invalidate` is called, as in
zarr 2. Missing keys are not cached: a chunk written later by another writer then reads at once.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any

from .base import ByteRange, Store, _normalize_prefix, validate_key
from .metrics import StoreMetrics

__all__ = ["LRUStoreCache", "WrapperStore"]


class WrapperStore(Store):
    """A store that passes every request to ``inner``; subclasses change what they need."""

    counts_calls = False  # the wrapped store counts the requests

    def __init__(self, inner: Store, *, read_only: bool | None = None) -> None:
        if not isinstance(inner, Store):
            raise TypeError(f"{type(self).__name__} wraps an asyncarr Store, got {type(inner).__name__}")
        super().__init__(read_only=inner.read_only if read_only is None else read_only)
        self.inner = inner
        self.supports_listing = inner.supports_listing

    @property
    def location(self) -> str:
        """The wrapped store's location: the same data, so the same chunk locks and limiter."""
        return self.inner.location

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r})"

    def metrics(self) -> StoreMetrics:
        """The wrapped store's metrics: every request goes through it."""
        return self.inner.metrics()

    def reset_metrics(self) -> None:
        """Start counting the wrapped store's requests from zero."""
        self.inner.reset_metrics()

    async def get(self, key: str, byte_range: ByteRange | None = None) -> bytes | None:
        """The wrapped store's value at ``key``."""
        return await self.inner.get(validate_key(key), byte_range)

    async def get_many(self, requests: Iterable[tuple[str, ByteRange | None]]) -> list[bytes | None]:
        """Many values, through ``get``."""
        return await Store.get_many(self, requests)

    async def set(self, key: str, value: bytes) -> None:
        """Store ``value`` in the wrapped store."""
        self._check_writable()
        await self.inner.set(validate_key(key), value)

    async def delete(self, key: str) -> None:
        """Delete ``key`` from the wrapped store."""
        self._check_writable()
        await self.inner.delete(validate_key(key))

    async def delete_prefix(self, prefix: str) -> None:
        """Delete everything under ``prefix`` in the wrapped store."""
        self._check_writable()
        await self.inner.delete_prefix(prefix)

    async def exists(self, key: str) -> bool:
        """Whether the wrapped store holds ``key``."""
        return await self.inner.exists(validate_key(key))

    async def getsize(self, key: str) -> int | None:
        """The size of the value at ``key`` in the wrapped store."""
        return await self.inner.getsize(validate_key(key))

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        """The wrapped store's keys under ``prefix``."""
        async for key in self.inner.list_prefix(prefix):
            yield key

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        """The wrapped store's children of ``prefix``."""
        async for name in self.inner.list_dir(prefix):
            yield name

    async def close(self) -> None:
        """Close the wrapped store."""
        await self.inner.close()

    def __getstate__(self) -> dict[str, Any]:
        return {"inner": self.inner, "read_only": self.read_only}

    def __setstate__(self, state: dict[str, Any]) -> None:
        WrapperStore.__init__(self, state["inner"], read_only=state["read_only"])


class LRUStoreCache(WrapperStore):
    """zarr 2's ``LRUStoreCache``: caches values (up to ``max_size`` bytes, least recently used out) and listings."""

    def __init__(self, store: Store, max_size: int | None) -> None:
        if max_size is not None and (not isinstance(max_size, int) or isinstance(max_size, bool) or max_size < 0):
            raise ValueError(f"max_size must be a number of bytes or None (no limit), got {max_size!r}")
        super().__init__(store)
        self.max_size = max_size
        self._lock = threading.Lock()
        self._values: OrderedDict[str, bytes] = OrderedDict()
        self._current_size = 0
        self._listings: dict[tuple[str, str], list[str]] = {}
        # Counts invalidations: a read that began before one does not cache what it read, so a
        # read racing this cache's own write never leaves the old value behind.
        self._generation = 0
        self.hits = 0
        """Reads answered from the cache."""
        self.misses = 0
        """Reads passed on to the wrapped store."""

    @property
    def current_size(self) -> int:
        """Bytes of values held now."""
        return self._current_size

    def __getstate__(self) -> dict[str, Any]:
        return {"inner": self.inner, "max_size": self.max_size}

    def __setstate__(self, state: dict[str, Any]) -> None:
        LRUStoreCache.__init__(self, state["inner"], state["max_size"])

    def __repr__(self) -> str:
        return f"LRUStoreCache({self.inner!r}, max_size={self.max_size!r})"

    def metrics(self) -> StoreMetrics:
        """The wrapped store's metrics, with this cache's hits and misses."""
        with self._lock:
            hits, misses = self.hits, self.misses
        return dataclasses.replace(self.inner.metrics(), cache_hits=hits, cache_misses=misses)

    def reset_metrics(self) -> None:
        """Start counting from zero: the wrapped store's requests and this cache's hits and misses."""
        with self._lock:
            self.hits = self.misses = 0
        self.inner.reset_metrics()

    # -- the cache ---------------------------------------------------------------------------

    def invalidate(self) -> None:
        """Forget every cached value and listing (after someone else changed the wrapped store)."""
        with self._lock:
            self._generation += 1
            self._values.clear()
            self._current_size = 0
            self._listings.clear()

    def invalidate_values(self) -> None:
        """Forget every cached value."""
        with self._lock:
            self._generation += 1
            self._values.clear()
            self._current_size = 0

    def invalidate_keys(self) -> None:
        """Forget every cached listing."""
        with self._lock:
            self._generation += 1
            self._listings.clear()

    def _cached(self, key: str) -> bytes | None:
        with self._lock:
            value = self._values.get(key)
            if value is None:
                self.misses += 1
                return None
            self._values.move_to_end(key)
            self.hits += 1
            return value

    def _remember(self, key: str, value: bytes, generation: int) -> None:
        size = len(value)
        with self._lock:
            if generation != self._generation:
                return  # invalidated while it was being read: it may be the old value
            if self.max_size is not None and size > self.max_size:
                return  # would push out everything and still not fit
            previous = self._values.pop(key, None)
            if previous is not None:
                self._current_size -= len(previous)
            while self.max_size is not None and self._values and self._current_size + size > self.max_size:
                _, evicted = self._values.popitem(last=False)
                self._current_size -= len(evicted)
            self._values[key] = value
            self._current_size += size

    def _forget(self, key: str | None = None, prefix: str | None = None) -> None:
        with self._lock:
            self._generation += 1
            self._listings.clear()
            keys = [key] if key is not None else [k for k in self._values if prefix is None or k.startswith(prefix)]
            for name in keys:
                value = self._values.pop(name, None)
                if value is not None:
                    self._current_size -= len(value)

    # -- the Store interface -----------------------------------------------------------------

    async def get(self, key: str, byte_range: ByteRange | None = None) -> bytes | None:
        """The value at ``key``: from the cache, or read whole from the wrapped store and cached."""
        key = validate_key(key)
        generation = self._generation
        value = self._cached(key)
        if value is None:
            value = await self.inner.get(key)
            if value is None:
                return None  # missing keys are not cached
            value = bytes(value)
            self._remember(key, value, generation)
        return value if byte_range is None else byte_range.apply(value)

    async def exists(self, key: str) -> bool:
        """Whether ``key`` exists (a cached value answers without a request)."""
        key = validate_key(key)
        with self._lock:
            if key in self._values:
                return True
        return await self.inner.exists(key)

    async def getsize(self, key: str) -> int | None:
        """The size of the value at ``key`` (a cached value answers without a request)."""
        key = validate_key(key)
        with self._lock:
            value = self._values.get(key)
        return len(value) if value is not None else await self.inner.getsize(key)

    async def set(self, key: str, value: bytes) -> None:
        """Write through to the wrapped store and invalidate ``key`` and every listing."""
        self._check_writable()
        key = validate_key(key)
        await self.inner.set(key, value)
        self._forget(key)

    async def set_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        """Write many values through ``set``."""
        await Store.set_many(self, items)

    async def delete(self, key: str) -> None:
        """Delete from the wrapped store and invalidate ``key`` and every listing."""
        self._check_writable()
        key = validate_key(key)
        await self.inner.delete(key)
        self._forget(key)

    async def delete_many(self, keys: Iterable[str]) -> None:
        """Delete many keys through ``delete``."""
        await Store.delete_many(self, keys)

    async def delete_prefix(self, prefix: str) -> None:
        """Delete everything under ``prefix`` and invalidate it and every listing."""
        self._check_writable()
        await self.inner.delete_prefix(prefix)
        self._forget(prefix=_normalize_prefix(prefix))

    async def _listing(self, kind: str, prefix: str) -> list[str]:
        with self._lock:
            names = self._listings.get((kind, prefix))
            generation = self._generation
        if names is None:
            source = self.inner.list_prefix(prefix) if kind == "prefix" else self.inner.list_dir(prefix)
            names = [name async for name in source]
            with self._lock:
                if generation == self._generation:
                    self._listings[(kind, prefix)] = names
        return list(names)

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        """The keys under ``prefix`` (cached)."""
        for key in await self._listing("prefix", prefix):
            yield key

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        """The children of ``prefix`` (cached)."""
        for name in await self._listing("dir", prefix):
            yield name
