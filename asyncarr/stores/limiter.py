"""The limit of requests in flight to one store location, adapted to the server's answers (AIMD).

Every handle on one location shares one `AdaptiveLimiter` per event loop (``Store.limiter``).
It starts at ``config.concurrency``. A throttling answer (429, 503 SlowDown) halves the limit,
not below 1 (multiplicative decrease); after a cut, further throttling answers count only once
as many new requests as the new limit have been let in, so a burst of answers to requests that
were already in flight counts once. Each run of successes as long as the limit raises it by one
(additive increase), up to ``config.concurrency``. With ``config.adaptive_concurrency=False``
the limit stays fixed. Used as ``async with store.limiter:``, like the semaphore it replaces.

A request that was throttled waits before its retry without its slot (`stepped_aside`), then
queues for one again: so the cut takes effect at once, not only when the requests that were in
flight during a burst of throttling answers have finished all their retries.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
from collections.abc import AsyncIterator

from .. import config

__all__ = ["AdaptiveLimiter"]

_held: contextvars.ContextVar[tuple[AdaptiveLimiter, ...]] = contextvars.ContextVar("asyncarr_limiter_held", default=())
"""The limiters whose slots the running task holds (entered with ``async with``)."""


class AdaptiveLimiter:
    """An asyncio semaphore whose size follows throttling answers: halved on each, regrown on successes."""

    def __init__(self, ceiling: int) -> None:
        if ceiling < 1:
            raise ValueError(f"the concurrency limit must be at least 1, got {ceiling}")
        self.ceiling = ceiling
        """The highest limit: ``config.concurrency`` when the limiter was made."""
        self._limit = ceiling
        self._lowest = ceiling
        self._in_flight = 0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._admitted = 0  # requests let in so far
        self._admitted_at_cut: int | None = None  # _admitted when the limit was last cut
        self._successes = 0  # since the limit last changed
        self.cuts = 0
        """How many times throttling cut the limit."""

    def __repr__(self) -> str:
        return f"AdaptiveLimiter(limit={self._limit}, ceiling={self.ceiling}, in_flight={self._in_flight})"

    @property
    def limit(self) -> int:
        """The most requests let in at once now."""
        return self._limit

    @property
    def lowest(self) -> int:
        """The lowest the limit has been."""
        return self._lowest

    @property
    def admitted(self) -> int:
        """Requests let in so far (a retry that queued again after a throttling answer counts again)."""
        return self._admitted

    @property
    def in_flight(self) -> int:
        """Requests holding a slot now."""
        return self._in_flight

    def locked(self) -> bool:
        """Whether a new request would have to wait (as ``asyncio.Semaphore.locked``)."""
        return self._in_flight >= self._limit or bool(self._waiters)

    async def acquire(self) -> bool:
        """Wait for a slot (first come, first served)."""
        if self._in_flight < self._limit and not self._waiters:
            self._in_flight += 1
            self._admitted += 1
            return True
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # the slot was handed over just as the wait was cancelled: pass it on
            else:
                try:
                    self._waiters.remove(waiter)
                except ValueError:
                    pass
            raise
        return True

    def release(self) -> None:
        """Give a slot back and let waiting requests in, as far as the limit allows."""
        self._in_flight -= 1
        self._wake()

    async def __aenter__(self) -> None:
        await self.acquire()
        _held.set((*_held.get(), self))

    async def __aexit__(self, *exc_info: object) -> None:
        held = list(_held.get())
        if self in held:
            held.reverse()
            held.remove(self)
            held.reverse()
            _held.set(tuple(held))
        self.release()

    def held(self) -> bool:
        """Whether the running task holds a slot of this limiter (inside ``async with``)."""
        return self in _held.get()

    @contextlib.asynccontextmanager
    async def stepped_aside(self) -> AsyncIterator[None]:
        """Give the running task's slot back for the block, then wait for one again (a retry's backoff)."""
        if not self.held():
            yield
            return
        self.release()
        try:
            yield
        finally:
            try:
                await self.acquire()
            except asyncio.CancelledError:
                self._in_flight += 1  # the task's ``async with`` gives it back on the way out
                raise

    def _wake(self) -> None:
        while self._waiters and self._in_flight < self._limit:
            waiter = self._waiters.popleft()
            if waiter.done():
                continue
            self._in_flight += 1
            self._admitted += 1
            waiter.set_result(None)

    # -- feedback from the requests --------------------------------------------------------

    def throttled(self) -> bool:
        """Record a throttling answer; True if it cut the limit."""
        if not config.get("adaptive_concurrency"):
            return False
        if self._admitted_at_cut is not None and self._admitted - self._admitted_at_cut < self._limit:
            return False  # an answer to a request sent before the last cut took effect
        if self._limit == 1:
            return False
        self._limit //= 2
        self._lowest = min(self._lowest, self._limit)
        self._admitted_at_cut = self._admitted
        self._successes = 0
        self.cuts += 1
        return True

    def succeeded(self) -> None:
        """Record a successful request: every run of ``limit`` successes raises the limit by one."""
        if self._limit >= self.ceiling:
            return
        self._successes += 1
        if self._successes >= self._limit:
            self._successes = 0
            self._limit += 1
            self._wake()
