"""The Store ABC: a small async key/value interface every storage backend implements."""

from __future__ import annotations

import abc
import asyncio
import contextlib
import dataclasses
import threading
import weakref
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from typing import Any, ClassVar

from .. import config
from ..errors import ReadOnlyError
from .counting import install_counting, recorder_of
from .limiter import AdaptiveLimiter
from .metrics import StoreMetrics

__all__ = ["ByteRange", "Store", "validate_key"]


@dataclasses.dataclass(frozen=True, slots=True)
class ByteRange:
    """Part of a value: ``offset`` and ``length`` (None: to the end), or the last ``suffix`` bytes."""

    offset: int = 0
    length: int | None = None
    suffix: int | None = None

    def __post_init__(self) -> None:
        if self.suffix is not None:
            if self.suffix < 0:
                raise ValueError(f"suffix length must be >= 0, got {self.suffix}")
        elif self.offset < 0 or (self.length is not None and self.length < 0):
            raise ValueError(f"invalid byte range offset={self.offset} length={self.length}")

    @classmethod
    def last(cls, n: int) -> ByteRange:
        """The last ``n`` bytes of a value (an HTTP suffix range)."""
        return cls(suffix=n)

    def resolve(self, size: int) -> tuple[int, int]:
        """Return ``(start, stop)`` of this range within a value of ``size`` bytes, clamped."""
        if self.suffix is not None:
            return max(0, size - self.suffix), size
        start = min(self.offset, size)
        stop = size if self.length is None else min(size, self.offset + self.length)
        return start, stop

    def apply(self, data: bytes) -> bytes:
        """Cut this range out of a whole value."""
        start, stop = self.resolve(len(data))
        return data[start:stop]


def _range_header(byte_range: ByteRange) -> str | None:
    """The HTTP Range header asking for ``byte_range`` (None: the whole value)."""
    if byte_range.suffix is not None:
        return f"bytes=-{byte_range.suffix}"
    if byte_range.length is None:
        return f"bytes={byte_range.offset}-" if byte_range.offset else None
    return f"bytes={byte_range.offset}-{byte_range.offset + byte_range.length - 1}"


def validate_key(key: str) -> str:
    """Return ``key`` if it is a safe store key, else raise ValueError saying why."""
    if not isinstance(key, str):
        raise TypeError(f"store keys are strings, got {type(key).__name__}: {key!r}")
    if not key:
        raise ValueError("store keys cannot be empty")
    if key.startswith("/"):
        raise ValueError(f"store key {key!r} is absolute; keys are relative to the store root")
    if "\\" in key:
        raise ValueError(f"store key {key!r} contains a backslash; keys are '/'-separated")
    if "\x00" in key:
        raise ValueError(f"store key {key!r} contains a NUL character")
    if "//" in key or key.endswith("/"):
        raise ValueError(f"store key {key!r} has an empty segment ('//' or a trailing '/')")
    # Only a segment starting with '.' can be '.' or '..'; chunk keys rarely have one, so look closer only then.
    if key[0] == "." or "/." in key:
        if any(part in ("..", ".") for part in key.split("/")):
            raise ValueError(f"store key {key!r} contains a '.' or '..' segment; it could escape the store root")
    if key[1:2] == ":" and (len(key) == 2 or key[2] == "/") and key[0].isalpha():
        raise ValueError(f"store key {key!r} looks like a Windows drive path")
    return key


def _normalize_prefix(prefix: str) -> str:
    """'' stays ''; anything else ends with exactly one '/'."""
    prefix = prefix.strip("/")
    if prefix:
        validate_key(prefix)
        return prefix + "/"
    return ""


_limiters_lock = threading.Lock()
_limiters: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, int], AdaptiveLimiter]] = (
    weakref.WeakKeyDictionary()
)


_default_locations: set[str] = set()
"""Default locations (unique to one store object) whose limiters go when that object does."""
_gone_locations: list[str] = []
"""Default locations of stores collected since: a finalizer may run inside _limiters_lock, so it only appends."""


def _forget_gone_locations() -> None:
    """Drop the limiters of collected stores (call with _limiters_lock held)."""
    while _gone_locations:
        location = _gone_locations.pop()
        _default_locations.discard(location)
        for per_loop in _limiters.values():
            for limiter_key in [k for k in per_loop if k[0] == location]:
                del per_loop[limiter_key]


def _shared_limiter(location: str) -> AdaptiveLimiter:
    """The limiter for ``location`` in the running loop, of at most the current ``config.concurrency``."""
    loop = asyncio.get_running_loop()
    concurrency = config.get("concurrency")
    with _limiters_lock:
        if _gone_locations:
            _forget_gone_locations()
        per_loop = _limiters.setdefault(loop, {})
        limiter = per_loop.get((location, concurrency))
        if limiter is None:
            limiter = per_loop[(location, concurrency)] = AdaptiveLimiter(concurrency)
        return limiter


def _limiter_fields(location: str) -> dict[str, int]:
    """The ``concurrency_*`` fields of `StoreMetrics` for ``location`` (its busiest loop's limiter now)."""
    concurrency = config.get("concurrency")
    with _limiters_lock:
        found = [per_loop.get((location, concurrency)) for per_loop in list(_limiters.values())]
    limiters = [limiter for limiter in found if limiter is not None]
    fields = {"concurrency_max": concurrency}
    if limiters:
        busiest = max(limiters, key=lambda limiter: limiter.admitted)
        fields.update(concurrency_limit=busiest.limit, concurrency_limit_min=busiest.lowest)
    return fields


class Store(abc.ABC):
    """An async key/value store of bytes; keys are '/'-separated and relative to the store root.

    Subclasses implement the abstract coroutines; the defaults (``get_many``, ``set_many``,
    ``delete_prefix``, ``getsize``) are built on them and may be overridden for speed.
    Stores pickle their configuration (override ``__getstate__`` to drop connections).
    Every store counts its requests for ``metrics()`` without doing anything for it (see
    ``counts_calls``).
    """

    counts_calls: ClassVar[bool] = True
    """Count each call of ``get``, ``set``, ``delete``, ``exists``, ``getsize``, the listings and the
    blocking twins made from outside the store as one request in ``metrics()`` (a call the store makes
    to itself while serving one is not counted again). Network drivers set it False and count each
    HTTP attempt themselves; wrappers set it False and report the wrapped store's requests."""
    read_only: bool = False
    supports_listing: bool = True
    """False for stores that cannot list keys (HTTP): listings then come from consolidated metadata."""
    supports_sync_io: bool = False
    """True when ``get_sync``/``set_sync``/``delete_sync`` do what the coroutines do, cheaply and
    thread-safely, without an event loop (local files, memory). The array layer then reads or
    writes a batch of chunks inside one codec-thread job instead of one loop round trip each.
    A subclass that overrides ``get``, ``set`` or ``delete`` without their ``_sync`` twins is
    switched off automatically, so its own behaviour (latency, counting) is never bypassed."""

    small_writes_in_parallel: ClassVar[bool] = False
    """True when blocking writes of small chunks gain from several threads: each ``set_sync``
    spends most of its time in system calls that release the GIL and wait on a disk (local
    files). False where a write is Python work (memory), which more threads only contend for."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "supports_sync_io" not in cls.__dict__:
            for name in ("get", "set", "delete"):
                owner = next(k for k in cls.__mro__ if name in k.__dict__)
                sync_owner = next(k for k in cls.__mro__ if f"{name}_sync" in k.__dict__)
                if owner is not sync_owner:
                    cls.supports_sync_io = False
                    break
        if cls.counts_calls:
            install_counting(cls, Store)

    def __init__(self, *, read_only: bool = False) -> None:
        self.read_only = read_only

    # -- identity -----------------------------------------------------------------

    @property
    def location(self) -> str:
        """A URL-like string naming where the data lives (keys of shared chunk locks use it).

        The default, ``TypeName://<id in hex>``, is unique to this object and stable for its
        life: a store that does not say where its data lives shares no limiter or lock with
        any other handle. Override it so that two handles on the same data agree.
        """
        return f"{type(self).__name__}://{id(self):x}"

    def key_url(self, key: str) -> str:
        """The user-facing URL of ``key`` (used in error messages)."""
        return f"{self.location.rstrip('/')}/{key}" if key else self.location

    def __repr__(self) -> str:
        mode = ", read_only=True" if self.read_only else ""
        return f"{type(self).__name__}({self.location!r}{mode})"

    # -- the abstract interface ---------------------------------------------------------

    @abc.abstractmethod
    async def get(self, key: str, byte_range: ByteRange | None = None) -> bytes | None:
        """Return the value (or part of it) stored at ``key``, or None if there is none."""

    @abc.abstractmethod
    async def set(self, key: str, value: bytes) -> None:
        """Store ``value`` at ``key``, replacing any previous value."""

    @abc.abstractmethod
    async def delete(self, key: str) -> None:
        """Remove ``key``; a missing key is not an error."""

    @abc.abstractmethod
    async def exists(self, key: str) -> bool:
        """Whether a value is stored at ``key``."""

    @abc.abstractmethod
    def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        """Yield every key below ``prefix`` (full keys, in no particular order)."""

    @abc.abstractmethod
    def list_dir(self, prefix: str) -> AsyncIterator[str]:
        """Yield the names of the immediate children of ``prefix`` (keys and 'directories')."""

    # -- optional blocking twins (see ``supports_sync_io``) ------------------------------

    def get_sync(self, key: str, byte_range: ByteRange | None = None) -> bytes | None:
        """Blocking ``get``, for stores with ``supports_sync_io``."""
        raise NotImplementedError(f"{type(self).__name__} has no blocking get")

    def get_many_sync(self, keys: Iterable[str]) -> Iterator[bytes | None]:
        """Blocking ``get`` of each of ``keys`` in turn, each value yielded as soon as it is read
        (so a caller holds one at a time). Stores that can do the per-read bookkeeping once for many
        keys override it; each key still counts as one ``get`` request."""
        for key in keys:
            yield self.get_sync(key)

    def set_sync(self, key: str, value: bytes) -> None:
        """Blocking ``set``, for stores with ``supports_sync_io``."""
        raise NotImplementedError(f"{type(self).__name__} has no blocking set")

    def delete_sync(self, key: str) -> None:
        """Blocking ``delete``, for stores with ``supports_sync_io``."""
        raise NotImplementedError(f"{type(self).__name__} has no blocking delete")

    def prepare_upload(self, value: bytes) -> Any:
        """``value`` made ready for ``set``, on a codec thread right after the chunk was encoded.

        The default returns ``value`` itself. A store that does CPU work on every body before it
        sends it (S3: the SHA-256 its request signature covers) does that work here, off the event
        loop, and returns something its own ``set`` accepts beside bytes."""
        return value

    def set_many_sync(self, items: Sequence[tuple[str, bytes]]) -> None:
        """Blocking ``set`` of many values, returning when all are stored (one after another here;
        a store whose writes wait on a disk spreads them over threads of its own)."""
        for key, value in items:
            self.set_sync(key, value)

    # -- defaults built on the interface ------------------------------------------------

    async def get_many(self, requests: Iterable[tuple[str, ByteRange | None]]) -> list[bytes | None]:
        """Fetch many keys concurrently, bounded by ``config.concurrency`` for this store."""
        limiter = self.limiter

        async def fetch(key: str, byte_range: ByteRange | None) -> bytes | None:
            async with limiter:
                return await self.get(key, byte_range)

        return list(await asyncio.gather(*(fetch(k, r) for k, r in requests)))

    async def set_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        """Store many values concurrently, bounded by ``config.concurrency`` for this store."""
        limiter = self.limiter

        async def store(key: str, value: bytes) -> None:
            async with limiter:
                await self.set(key, value)

        await asyncio.gather(*(store(k, v) for k, v in items))

    async def delete_many(self, keys: Iterable[str]) -> None:
        """Delete many keys concurrently; missing keys are ignored."""
        limiter = self.limiter

        async def remove(key: str) -> None:
            async with limiter:
                await self.delete(key)

        await asyncio.gather(*(remove(k) for k in keys))

    async def delete_prefix(self, prefix: str) -> None:
        """Delete every key below ``prefix`` ('' deletes everything)."""
        self._check_writable()
        keys = [key async for key in self.list_prefix(prefix)]
        await self.delete_many(keys)

    async def names_to_delete(self, prefix: str) -> list[str] | None:
        """The keys `delete_listed` would remove below ``prefix`` (relative to the store root, as
        listed now: folder markers made by other tools end in '/'); None (the default) when this
        store deletes a prefix as a whole, with `delete_prefix`.

        A store whose listing is a round trip (object stores) answers it, so that opening with
        mode ``'w'`` learns from that one listing both whether a node is there (its documents are
        among the keys) and what to delete."""
        return None

    async def delete_listed(self, prefix: str, names: list[str]) -> None:
        """Delete the keys ``names``, as `names_to_delete(prefix)` returned them (stores that answer it)."""
        raise NotImplementedError(f"{type(self).__name__} deletes a prefix whole: use delete_prefix")

    async def getsize(self, key: str) -> int | None:
        """Size in bytes of the value at ``key``, or None if missing."""
        value = await self.get(key)
        return None if value is None else len(value)

    async def close(self) -> None:  # noqa: B027 - an optional hook: most stores hold nothing to release
        """Release connections and files; the store may not be used afterwards."""

    # -- helpers for subclasses and callers ---------------------------------------------

    def metrics(self) -> StoreMetrics:
        """A snapshot of the requests this store object made: counts by operation, bytes, retries, latency.

        Counts belong to this object (not to every handle on its location); a pickled or copied
        store starts from zero. The ``concurrency_*`` fields describe the location's shared limiter.
        """
        return recorder_of(self).snapshot(self.location, **_limiter_fields(self.location))

    def reset_metrics(self) -> None:
        """Start counting this store's requests from zero."""
        recorder_of(self).reset()

    @property
    def limiter(self) -> AdaptiveLimiter:
        """The limiter bounding requests to this store's location in the running event loop.

        Shared by every handle on the same location (two opens of one path share one bound)
        and at most ``config.concurrency`` as it is now: changing the setting takes effect
        for calls made afterwards. Throttling answers shrink it and successes grow it back
        (see `asyncarr.stores.limiter`).
        """
        location = self.location
        if type(self).location is _DEFAULT_LOCATION and location not in _default_locations:
            # No other handle can share this location, so its limiters would only pile up after it is gone.
            with contextlib.suppress(TypeError):  # a class with __slots__ and no __weakref__
                weakref.finalize(self, _gone_locations.append, location)
                _default_locations.add(location)
        return _shared_limiter(location)

    def _check_writable(self) -> None:
        if self.read_only:
            raise ReadOnlyError(f"{self.location}: the store is read-only; open it with a writable mode to change it")

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc_info: object) -> None:
        # Synchronous stores (local, memory, zip) close without awaiting anything real.
        close = self.close()
        try:
            close.send(None)
        except StopIteration:
            pass
        else:  # pragma: no cover - a store whose close really awaits must be closed async
            close.close()
            raise RuntimeError(f"{type(self).__name__} must be closed with 'async with' or 'await store.close()'")

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_metrics_recorder", None)  # counts stay with the object that made the requests
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)


_DEFAULT_LOCATION = Store.__dict__["location"]
