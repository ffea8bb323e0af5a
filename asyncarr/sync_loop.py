"""Where the blocking facade's calls run: one event-loop thread per process, or the calling thread.

`asyncarr.sync` forwards every call to a coroutine and hands it to `_run`, which runs it on
one daemon thread holding one event loop for the whole process; after ``os.fork`` the child
starts a fresh loop thread on first use. `_read` lets reads of local and memory stores skip
the loop and run in the calling thread (see `AsyncArray.read_blocking`). Stores the facade
opened are remembered in `_opened_stores` and closed at interpreter exit.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import threading
import weakref
from collections.abc import Coroutine
from typing import Any, TypeVar

from .array import AsyncArray
from .stores.base import Store

T = TypeVar("T")


class _LoopThread:
    """The facade's one event loop, running forever in a daemon thread of this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def _ensure_running(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="asyncarr-sync-loop", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the loop thread and block until it finishes."""
        loop = self._ensure_running()
        if threading.current_thread() is self._thread:
            coroutine.close()
            raise RuntimeError(
                "asyncarr.sync was called from asyncarr's own event-loop thread, which would deadlock; "
                "inside async code use the async API (await asyncarr.open_array(...), await z.getitem(...))"
            )
        future = asyncio.run_coroutine_threadsafe(coroutine, loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    def is_current_thread(self) -> bool:
        """Whether the caller is the loop thread itself."""
        return threading.current_thread() is self._thread

    def forget_after_fork(self) -> None:
        """In a forked child the loop thread does not exist: start a new one on next use."""
        self._lock = threading.Lock()
        self._loop = None
        self._thread = None


_loop_thread = _LoopThread()
os.register_at_fork(after_in_child=_loop_thread.forget_after_fork)
_opened_stores: weakref.WeakSet[Store] = weakref.WeakSet()


def _run(coroutine: Coroutine[Any, Any, T]) -> T:
    return _loop_thread.run(coroutine)


_READ_COROUTINES = {
    "getitem": AsyncArray.getitem,
    "basic": AsyncArray.get_basic_selection,
    "orthogonal": AsyncArray.get_orthogonal_selection,
    "coordinate": AsyncArray.get_coordinate_selection,
    "mask": AsyncArray.get_mask_selection,
}


def _read(array: AsyncArray, kind: str, selection: Any) -> Any:
    """One read: in this thread when the store does blocking I/O, on the loop thread otherwise."""
    if not _loop_thread.is_current_thread():
        result = array.read_blocking(kind, selection)  # NotImplemented when the loop must read
        if result is not NotImplemented:
            return result
    return _run(_READ_COROUTINES[kind](array, selection))


def _write(array: AsyncArray, selection: Any, value: Any) -> None:
    """One ``z[selection] = value``: in this thread for whole chunks (`AsyncArray.write_blocking`), on
    the loop thread otherwise (and for any chunk another writer held meanwhile)."""
    if not _loop_thread.is_current_thread():
        rest = array.write_blocking(selection, value)  # NotImplemented when the loop must write
        if rest is not NotImplemented:
            if rest is not None:
                _run(rest)
            return
    _run(array.setitem(selection, value))


def _close_opened_stores() -> None:
    # Finalises zip files and closes cloud sessions that scripts never closed themselves.
    for store in list(_opened_stores):
        try:
            _run(store.close())
        except Exception:
            pass


atexit.register(_close_opened_stores)
