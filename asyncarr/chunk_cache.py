"""The decoded-chunk cache: one per process, shared by every array and thread, bounded in bytes.

Off unless ``asyncarr.config`` ``chunk_cache_bytes`` is above 0. Entries are whole decoded
chunks (read-only arrays), or a marker for a chunk that is not stored (it reads as the fill
value), keyed by the store's location, the chunk key and the array's metadata fingerprint, so
two handles on one array share entries and an array recreated with other metadata never sees
the old ones. Least recently used entries go first when the budget is exceeded; a chunk larger
than the whole budget is not kept.

Writes in this process invalidate: a chunk a write changes is dropped before and after the
write (found through an index by chunk: a write costs its own chunks, not a scan of the
cache), and the location's *epoch* moves on, so a read that fetched the old bytes while the
write ran cannot put them back (`put` refuses an entry whose read began in an older epoch).
Writes by other processes are not seen: a cached chunk stays until evicted or invalidated here.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Final

import numpy as np

from . import config

__all__ = ["ABSENT", "ChunkCache", "active_cache", "chunk_cache", "forget_node"]


class _Absent:
    """A chunk that is not stored: it reads as the fill value."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Final = _Absent()
"""What `ChunkCache.get` returns for a chunk known not to be stored."""
_ABSENT_NBYTES = 64
"""What an absent-chunk entry counts against the budget (its key and bookkeeping)."""

CacheKey = tuple[str, str, str]


class ChunkCache:
    """An LRU map of decoded chunks, bounded by ``config.chunk_cache_bytes``; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: OrderedDict[CacheKey, np.ndarray | _Absent] = OrderedDict()
        # The metadata fingerprints held for each chunk: a write drops its chunks without a scan.
        self._tokens: dict[tuple[str, str], set[str]] = {}
        self._nbytes = 0
        self._epochs: dict[str, int] = {}
        self.hits = 0
        self.misses = 0

    @property
    def nbytes(self) -> int:
        """Bytes held now (never above the budget after a `put` returns)."""
        return self._nbytes

    def __len__(self) -> int:
        return len(self._entries)

    def epoch(self, location: str) -> int:
        """The write epoch of ``location``: read it before fetching a chunk, hand it to `put`."""
        return self._epochs.get(location, 0)

    def get(self, location: str, key: str, token: str) -> np.ndarray | _Absent | None:
        """The cached chunk (`ABSENT` for one not stored), or None on a miss; a hit becomes most recent."""
        with self._lock:
            entry = self._entries.get((location, key, token))
            if entry is None:
                self.misses += 1
                return None
            self._entries.move_to_end((location, key, token))
            self.hits += 1
            return entry

    def put(self, location: str, key: str, token: str, chunk: np.ndarray | _Absent, epoch: int) -> None:
        """Keep ``chunk`` unless a write to ``location`` happened since ``epoch``, or it exceeds the budget."""
        budget = config.get("chunk_cache_bytes")
        size = _ABSENT_NBYTES if chunk is ABSENT else chunk.nbytes  # type: ignore[union-attr]
        if size > budget:
            return
        if isinstance(chunk, np.ndarray):
            chunk.flags.writeable = False  # shared by every reader: nobody may change it
        with self._lock:
            if self._epochs.get(location, 0) != epoch:
                return
            cache_key = (location, key, token)
            previous = self._entries.pop(cache_key, None)
            if previous is not None:
                self._nbytes -= _size(previous)
            self._entries[cache_key] = chunk
            self._tokens.setdefault((location, key), set()).add(token)
            self._nbytes += size
            while self._nbytes > budget:
                evicted_key, evicted = self._entries.popitem(last=False)
                self._nbytes -= _size(evicted)
                self._unindex(evicted_key)

    def forget(self, location: str, keys: list[str]) -> None:
        """Drop ``keys`` of ``location`` (every metadata fingerprint) and move its epoch on; O(len(keys))."""
        with self._lock:
            self._epochs[location] = self._epochs.get(location, 0) + 1
            if not self._entries:
                return
            for key in keys:
                for token in self._tokens.pop((location, key), ()):
                    self._nbytes -= _size(self._entries.pop((location, key, token)))

    def forget_prefix(self, location: str, prefix: str) -> None:
        """Drop every chunk of ``location`` under node path ``prefix`` ('' for all) and move its epoch on."""
        below = f"{prefix.strip('/')}/" if prefix.strip("/") else ""
        self._drop(location, lambda key: key.startswith(below))

    def clear(self) -> None:
        """Drop everything (every epoch moves on)."""
        with self._lock:
            for location in {entry[0] for entry in self._entries} | set(self._epochs):
                self._epochs[location] = self._epochs.get(location, 0) + 1
            self._entries.clear()
            self._tokens.clear()
            self._nbytes = 0

    def _drop(self, location: str, matches: Callable[[str], bool]) -> None:
        with self._lock:
            self._epochs[location] = self._epochs.get(location, 0) + 1
            if not self._entries:
                return
            doomed = [k for k in self._entries if k[0] == location and matches(k[1])]
            for cache_key in doomed:
                self._nbytes -= _size(self._entries.pop(cache_key))
                self._unindex(cache_key)

    def _unindex(self, cache_key: CacheKey) -> None:
        location, key, token = cache_key
        tokens = self._tokens.get((location, key))
        if tokens is not None:
            tokens.discard(token)
            if not tokens:
                del self._tokens[(location, key)]


def _size(entry: np.ndarray | _Absent) -> int:
    return _ABSENT_NBYTES if entry is ABSENT else entry.nbytes  # type: ignore[union-attr]


chunk_cache = ChunkCache()
"""The process's cache (empty and unused while ``chunk_cache_bytes`` is 0)."""


def active_cache() -> ChunkCache | None:
    """The process's cache when ``config.chunk_cache_bytes`` is above 0, else None (and emptied)."""
    if config.get("chunk_cache_bytes") > 0:
        return chunk_cache
    if chunk_cache.nbytes:  # switched off: give the memory back
        chunk_cache.clear()
    return None


def forget_node(location: str, path: str) -> None:
    """Drop the cached chunks below node ``path`` of ``location``: the node was deleted, replaced or moved."""
    chunk_cache.forget_prefix(location, path)
