"""Per-chunk locks for read-modify-write: in-process (always on) and across processes (opt-in)."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import os
import threading
import weakref
from collections.abc import AsyncIterator

__all__ = ["ProcessSynchronizer", "ThreadSynchronizer", "chunk_lock", "try_chunk_lock"]

_registry_lock = threading.Lock()
_loop_locks: weakref.WeakValueDictionary[tuple[str, str, int], asyncio.Lock] = weakref.WeakValueDictionary()
_process_locks: weakref.WeakValueDictionary[tuple[str, str], _ThreadLock] = weakref.WeakValueDictionary()


class _ThreadLock:
    """A threading.Lock that can live in a WeakValueDictionary (a bare Lock cannot be weakly referenced).

    Whoever holds the lock must hold this object too: the registry forgets it once unreferenced.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()

    def release(self) -> None:
        """Release the lock."""
        self.lock.release()


def _in_loop_lock(location: str, key: str) -> asyncio.Lock:
    loop_id = id(asyncio.get_running_loop())
    with _registry_lock:
        lock = _loop_locks.get((location, key, loop_id))
        if lock is None:
            lock = _loop_locks[(location, key, loop_id)] = asyncio.Lock()
        return lock


def _across_loops_lock(location: str, key: str) -> _ThreadLock:
    with _registry_lock:
        lock = _process_locks.get((location, key))
        if lock is None:
            lock = _process_locks[(location, key)] = _ThreadLock()
        return lock


async def _acquire_polling(lock: threading.Lock) -> None:
    # Only tasks of *other* event loops can hold it (tasks of this loop queue on the asyncio
    # lock first), so contention is rare: poll with a short backoff instead of parking a thread.
    delay = 0.0005
    while not lock.acquire(blocking=False):
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.01)


class ThreadSynchronizer:
    """Accepted for zarr compatibility: in-process chunk locking is always on, so this changes nothing."""

    def __repr__(self) -> str:
        return "ThreadSynchronizer()"


class ProcessSynchronizer:
    """File locks per chunk under ``path``, for several processes writing one local store."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.path.abspath(os.fspath(path))

    def __repr__(self) -> str:
        return f"ProcessSynchronizer({self.path!r})"

    def lock_file(self, location: str, key: str) -> str:
        """The lock file guarding ``key`` of the store at ``location``."""
        digest = hashlib.sha1(f"{location}\0{key}".encode()).hexdigest()
        # Lock files sit in a hidden folder whose name is never a valid node or chunk name.
        return os.path.join(self.path, ".asyncarr-locks", digest + ".lock")

    def acquire(self, location: str, key: str) -> int:
        """Block until this process holds the lock for ``key``; return the open descriptor."""
        lock_path = self.lock_file(location, key)
        os.makedirs(os.path.dirname(lock_path), exist_ok=True)
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        return fd

    @staticmethod
    def release(fd: int) -> None:
        """Release a lock taken with ``acquire``."""
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def try_chunk_lock(location: str, key: str) -> _ThreadLock | None:
    """Take the chunk's process-wide lock if it is free, from any thread; None if someone holds it.

    For the codec-thread fast path: it never blocks a thread that async writers may need, and
    chunks it cannot lock at once are handed back to the async path, which waits its turn.
    """
    held = _across_loops_lock(location, key)
    return held if held.lock.acquire(blocking=False) else None


@contextlib.asynccontextmanager
async def chunk_lock(
    location: str, key: str, synchronizer: ProcessSynchronizer | ThreadSynchronizer | None = None
) -> AsyncIterator[None]:
    """Hold the lock of one chunk for a read-modify-write.

    Keyed by the store's location and the chunk key, so every handle, task, thread and event
    loop of this process writing that chunk takes turns; a ProcessSynchronizer adds a file lock
    so other processes take turns too.
    """
    across_loops = _across_loops_lock(location, key)
    async with _in_loop_lock(location, key):
        await _acquire_polling(across_loops.lock)
        try:
            if isinstance(synchronizer, ProcessSynchronizer):
                fd = await asyncio.to_thread(synchronizer.acquire, location, key)
                try:
                    yield
                finally:
                    synchronizer.release(fd)
            else:
                yield
        finally:
            across_loops.lock.release()
