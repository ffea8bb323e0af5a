"""The one thread pool that encodes and decodes chunks, shared by every array and event loop.

The pool has ``config.codec_threads`` threads (None: one per CPU). It is created on first use,
replaced when that setting changes (the old pool finishes what it was given, then its idle
threads exit), and forgotten in a child process after ``os.fork()``, whose copy of the pool
has no threads.

Blosc: numcodecs' default ``numcodecs.blosc.use_threads = None`` already runs Blosc in its
single-threaded "contextual" mode when called from any thread but the main one, so each of our
pool threads decompresses one chunk with the GIL released and the pool as a whole keeps every
core busy without Blosc's own threads oversubscribing them. We leave that global alone (unlike
zarr-python, which sets it to False at import): it belongs to the user, who may set it to True
to have Blosc's internal threads split single large chunks instead. The one exception is
`blosc_in_this_thread_alone`: a blocking read in the main thread, where numcodecs would wake
Blosc's own threads, sets it to False (what None means in every other thread) for as long as
it decodes beside the pool, and back to None after.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from numcodecs import blosc as numcodecs_blosc

from asyncarr import config

__all__ = [
    "blosc_in_this_thread_alone",
    "blosc_threads_requested",
    "codec_executor",
    "codec_thread_count",
    "run_in_codec_pool",
]

_T = TypeVar("_T")

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_pool_size = 0


# Read once: os.cpu_count() reads a file in /sys on Linux, and this is asked on every read.
_CPU_COUNT = os.cpu_count() or 1


def codec_thread_count() -> int:
    """Return how many codec threads the current settings ask for."""
    return config.get("codec_threads") or _CPU_COUNT


def blosc_threads_requested() -> bool:
    """Whether the user set ``numcodecs.blosc.use_threads`` to True: numcodecs then decodes Blosc
    on Blosc's own threads in every thread, and decoding in the caller beside the pool's threads
    would oversubscribe the cores. (With None, numcodecs' default, only the main thread would,
    and `blosc_in_this_thread_alone` keeps it from doing so.)"""
    return bool(numcodecs_blosc.use_threads)


@contextlib.contextmanager
def blosc_in_this_thread_alone() -> Iterator[None]:
    """Within the block, numcodecs decodes Blosc on the calling thread alone, as it does on every
    thread but the main one: there, with ``numcodecs.blosc.use_threads`` None (its default), the
    setting reads False until the block ends. Other threads see no change (None and False mean
    the same off the main thread); a value the user set is left as it is."""
    if numcodecs_blosc.use_threads is not None or threading.current_thread() is not threading.main_thread():
        yield
        return
    numcodecs_blosc.use_threads = False
    try:
        yield
    finally:
        if numcodecs_blosc.use_threads is False:  # unless the user set it meanwhile
            numcodecs_blosc.use_threads = None


def codec_executor() -> ThreadPoolExecutor:
    """Return the shared codec thread pool, creating or resizing it to match the settings."""
    global _pool, _pool_size
    size = codec_thread_count()
    with _lock:
        if _pool is None or _pool_size != size:
            # The replaced pool is not shut down: a caller may still hold it and submit to it.
            # Once unreferenced, its worker threads see the executor gone and exit.
            _pool = ThreadPoolExecutor(max_workers=size, thread_name_prefix="asyncarr-codec")
            _pool_size = size
        return _pool


async def run_in_codec_pool(fn: Callable[..., _T], *args: Any) -> _T:
    """Run ``fn(*args)`` on the codec thread pool and await its result from the running loop."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(codec_executor(), functools.partial(fn, *args))


def _forget_pool_in_child() -> None:
    global _lock, _pool, _pool_size
    _lock = threading.Lock()
    _pool = None
    _pool_size = 0


os.register_at_fork(after_in_child=_forget_pool_in_child)
