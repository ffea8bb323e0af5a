"""Running many chunk tasks at once: bounded task pools and batched hops to the codec threads."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import Executor
from typing import TypeVar

__all__ = ["CodecBatcher", "for_each_concurrently"]

T = TypeVar("T")


async def for_each_concurrently(items: Iterable[T], process: Callable[[T], Awaitable[None]], limit: int) -> None:
    """Await ``process(item)`` for every item with at most ``limit`` running at once.

    Uses ``limit`` worker tasks pulling from one shared iterator instead of one task per
    item, so a million-chunk selection costs a million awaits, not a million tasks. The
    first failure cancels the rest and is raised as itself (not wrapped in a group).
    """
    iterator = iter(items)

    async def worker() -> None:
        for item in iterator:
            await process(item)

    workers = [asyncio.ensure_future(worker()) for _ in range(max(1, limit))]
    try:
        done, _pending = await asyncio.wait(workers, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            if task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
    finally:
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)


def _run_jobs(jobs: list[Callable[[], None]]) -> None:
    first_error: BaseException | None = None
    for job in jobs:
        try:
            job()
        except BaseException as exc:  # keep decoding the rest; report the first failure
            if first_error is None:
                first_error = exc
    if first_error is not None:
        raise first_error


class CodecBatcher:
    """Groups small codec jobs into one thread-pool hop each, sending at once when threads are idle.

    A job is a callable doing its own decode-and-copy. While every codec thread is busy,
    jobs accumulate until ``batch_bytes`` of input is pending; when a thread is idle the
    pending jobs go straight away, so a slow network never leaves decoded work waiting.
    """

    def __init__(self, executor: Executor, threads: int, batch_bytes: int) -> None:
        self._executor = executor
        self._threads = threads
        self._batch_bytes = batch_bytes
        self._pending: list[Callable[[], None]] = []
        self._pending_bytes = 0
        self._running = 0
        self._futures: list[asyncio.Future[None]] = []

    def add(self, job: Callable[[], None], nbytes: int) -> None:
        """Queue one job whose input is ``nbytes`` long."""
        self._pending.append(job)
        self._pending_bytes += nbytes
        if self._running < self._threads or self._pending_bytes >= self._batch_bytes:
            self.flush()

    def flush(self) -> None:
        """Send the pending jobs to the pool as one batch."""
        if not self._pending:
            return
        jobs, self._pending, self._pending_bytes = self._pending, [], 0
        self._running += 1
        future = asyncio.get_running_loop().run_in_executor(self._executor, _run_jobs, jobs)
        future.add_done_callback(self._batch_done)
        self._futures.append(future)

    def _batch_done(self, _future: asyncio.Future[None]) -> None:
        self._running -= 1
        if self._running < self._threads:
            self.flush()

    async def wait(self) -> None:
        """Send what is pending and wait for every batch; raise the first failure."""
        self.flush()
        index = 0
        # Batches finishing may send further batches, so walk the growing list.
        while index < len(self._futures):
            await asyncio.wait(self._futures[index:])
            index = len(self._futures)
            self.flush()
        for future in self._futures:
            if future.exception() is not None:
                raise future.exception()  # type: ignore[misc]
