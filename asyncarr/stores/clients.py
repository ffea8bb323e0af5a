"""One store's network clients, one set per running event loop, for the cloud store drivers.

aiohttp sessions and the SDK clients built on them belong to the event loop that made them,
so a store used from several loops (``asyncio.run`` after ``asyncio.run``, the sync facade's
loop thread, threads running their own loops) needs a set of clients for each. The driver
says how to open each client: a coroutine function that opens it and pushes onto the exit
stack it is given whatever closes it. `PerLoopClients` opens each client on first use
(once, however many requests ask at the same time) and closes the set:

- on ``close()`` for the running loop (and, on their own loops, for other running loops);
- when ``asyncio.run`` shuts the loop down: an async generator suspended for the set's life
  is finalised by the loop's ``shutdown_asyncgens``, even if the store is never closed;
- at interpreter exit, for loops still open (the sync facade's daemon loop never shuts down).

Stores with the same configuration share one `PerLoopClients` through `shared_clients`, so
arrays opened one after another on one bucket reuse its connections instead of each opening
(and keeping) a pool of its own. Each store holds a `ClientsLease`: the shared clients close,
and leave the registry, when the last store that used them closes. The registry is keyed by
an HMAC (with a key made at import) of the configuration, never by the configuration itself:
it holds no credential, and a memory dump of it reveals none.

Open sets are held here strongly, so a dropped store's sessions are still closed by one of
these rather than left to the garbage collector. After ``os.fork`` the child keeps but never
uses or closes what it inherited: those loops do not run in the child, and their sockets
are the parent's.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import hashlib
import hmac
import logging
import os
import threading
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable, Hashable
from typing import Any, TypeAlias, TypeVar

__all__ = ["ClientOpener", "ClientsLease", "PerLoopClients", "shared_clients"]

T = TypeVar("T")

# An opener pushes callbacks rather than being an async context manager: one made from an async
# generator would be closed a second time, concurrently, by the loop's shutdown_asyncgens.
ClientOpener: TypeAlias = Callable[[contextlib.AsyncExitStack], Awaitable[T]]
"""Opens one client for the running loop, pushing what closes it onto the exit stack it is given."""

_open_sets: set[_LoopClients] = set()
"""Every open client set of every store, held until it is closed."""
_inherited_sets: list[_LoopClients] = []
"""Sets inherited over fork: kept so that nothing finalises them here, never used or closed."""
_fork_generation = 0
"""Counts the forks between the importing process and this one: a set of an older generation is a parent's."""
_shared: dict[bytes, PerLoopClients] = {}
"""The clients of every store configuration in use, by `_digest` of the configuration; removed on last close."""
_shared_lock = threading.Lock()
_DIGEST_KEY = os.urandom(32)
"""Keys `_digest`: without it, a digest of a short secret could be checked against guesses."""


class PerLoopClients:
    """A store's clients, one set per running event loop, each client opened on first use (thread-safe)."""

    def __init__(self, service: str, location: str, log: logging.Logger) -> None:
        self._service = service
        self._location = location
        self._log = log
        self._lock = threading.Lock()
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopClients] = weakref.WeakKeyDictionary()
        self._leases = 0  # stores holding these clients (see ClientsLease); the last to close closes them

    def __repr__(self) -> str:
        return f"PerLoopClients({self._service} {self._location})"

    async def get(self, name: str, open_client: ClientOpener[T]) -> T:
        """The running loop's client ``name``, opened by ``open_client`` the first time it is asked for."""
        loop = asyncio.get_running_loop()
        with self._lock:
            clients = self._by_loop.get(loop)
            if clients is None or clients.closed or clients.generation != _fork_generation:
                clients = self._by_loop[loop] = _LoopClients(loop, self._service, self._location, self._log)
        return await clients.get(name, open_client)

    def lease(self) -> None:
        """Count one more store holding these clients."""
        with self._lock:
            self._leases += 1

    def release(self) -> bool:
        """Count one store fewer; True when it was the last, and the clients should close."""
        with self._lock:
            self._leases -= 1
            return self._leases == 0

    async def close(self) -> None:
        """Close the running loop's clients; those of other running loops are closed on their own loops."""
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        with self._lock:
            taken = list(self._by_loop.items())
            self._by_loop.clear()
        for loop, clients in taken:
            if clients.generation != _fork_generation:
                continue  # the parent process's
            if loop is running:
                await clients.close()
            elif loop.is_running():
                asyncio.run_coroutine_threadsafe(clients.close(), loop)
            # A stopped loop's clients close when it shuts down its async generators, or at exit.


class _LoopClients:
    """One event loop's clients of one store, entered into one exit stack and closed together."""

    def __init__(self, loop: asyncio.AbstractEventLoop, service: str, location: str, log: logging.Logger) -> None:
        self._loop = weakref.ref(loop)  # a strong one would keep the store's per-loop entry alive forever
        self.generation = _fork_generation
        self.closed = False
        self._service = service
        self._location = location
        self._log = log
        self._clients: dict[str, Any] = {}
        self._opening: dict[str, asyncio.Future[Any]] = {}
        self._stack = contextlib.AsyncExitStack()
        self._keeper: AsyncGenerator[None, None] | None = None

    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop the clients belong to, if it still exists."""
        return self._loop()

    async def get(self, name: str, open_client: ClientOpener[T]) -> T:
        """The client ``name``, opened by ``open_client`` on first use."""
        client = self._clients.get(name)
        if client is not None:
            return client
        opening = self._opening.get(name)
        if opening is None:
            opening = self._opening[name] = asyncio.ensure_future(self._open(name, open_client))
            # Every waiter may be cancelled: mark a failure as retrieved so asyncio does not report it.
            opening.add_done_callback(lambda done: done.cancelled() or done.exception())
        return await asyncio.shield(opening)

    async def _open(self, name: str, open_client: ClientOpener[T]) -> T:
        try:
            if self._keeper is None:
                keeper = self._keep_open()
                await keeper.__anext__()  # registers the generator with the running loop
                self._keeper = keeper
                _open_sets.add(self)
            # What a failing opener pushed is closed at once; a client that opened joins the set's stack.
            async with contextlib.AsyncExitStack() as closing:
                client = await open_client(closing)
                self._stack.push_async_exit(closing.pop_all())
        except BaseException:
            self._opening.pop(name, None)  # the next request tries again
            raise
        self._clients[name] = client
        self._log.debug("opened the %s %s for %s", self._service, name, self._location)
        return client

    async def _keep_open(self) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            self.closed = True
            self._clients.clear()
            self._opening.clear()
            self._keeper = None
            _open_sets.discard(self)
            await self._stack.aclose()
            self._log.debug("closed the %s clients for %s", self._service, self._location)

    async def close(self) -> None:
        """Close every client of this loop, after waiting for those still being opened."""
        self.closed = True
        for opening in list(self._opening.values()):
            with contextlib.suppress(Exception):
                await asyncio.shield(opening)  # one that failed never opened
        keeper = self._keeper
        if keeper is not None:
            await keeper.aclose()


class ClientsLease:
    """One store's hold on shared `PerLoopClients`: taken on first use, given back by ``close()``.

    It keeps the digest of the store's configuration, not the configuration, so a store used
    again after ``close()`` finds (or starts) the shared clients of its configuration anew.
    """

    def __init__(self, digest: bytes, service: str, location: str, log: logging.Logger) -> None:
        self._digest = digest
        self._service = service
        self._location = location
        self._log = log
        self._clients: PerLoopClients | None = None  # set while held
        self._lock = threading.Lock()  # one store may be used from several threads' loops

    def __repr__(self) -> str:
        return f"ClientsLease({self._service} {self._location}, held={self._clients is not None})"

    async def get(self, name: str, open_client: ClientOpener[T]) -> T:
        """The running loop's client ``name`` of the shared set, opened by ``open_client`` if no store has yet."""
        clients = self._clients
        if clients is None:
            with self._lock:
                clients = self._clients
                if clients is None:
                    clients = self._clients = _take_shared(self._digest, self._service, self._location, self._log)
        return await clients.get(name, open_client)

    async def close(self) -> None:
        """Give the clients back; they close when no other store holds them (every loop's, as `PerLoopClients`)."""
        with self._lock:
            clients, self._clients = self._clients, None
        if clients is not None and _give_back_shared(self._digest, clients):
            await clients.close()


def _digest(identity: Hashable) -> bytes:
    """A keyed digest of a store configuration (a tuple of str, int, bool, None and such tuples)."""
    return hmac.new(_DIGEST_KEY, repr(identity).encode(), hashlib.sha256).digest()


def _take_shared(digest: bytes, service: str, location: str, log: logging.Logger) -> PerLoopClients:
    with _shared_lock:
        clients = _shared.get(digest)
        if clients is None:
            clients = _shared[digest] = PerLoopClients(service, location, log)
        clients.lease()
        return clients


def _give_back_shared(digest: bytes, clients: PerLoopClients) -> bool:
    """Count one holder fewer; True (and the entry gone from the registry) when it was the last."""
    with _shared_lock:
        if not clients.release():
            return False
        if _shared.get(digest) is clients:
            del _shared[digest]
        return True


def shared_clients(identity: Hashable, service: str, location: str, log: logging.Logger) -> ClientsLease:
    """A lease on the clients every store with ``identity`` (its whole client configuration) shares.

    ``identity`` is digested at once and not kept: the lease and the registry hold only the digest.
    ``location`` (shown in logs and reprs) must hold no secret.
    """
    return ClientsLease(_digest(identity), service, location, log)


def _close_open_sets_at_exit() -> None:
    for clients in list(_open_sets):
        loop = clients.loop()
        try:
            if loop is None or loop.is_closed():
                continue
            if loop.is_running():
                asyncio.run_coroutine_threadsafe(clients.close(), loop).result(timeout=5)
            else:
                loop.run_until_complete(clients.close())
        except Exception:  # exiting anyway: a client that cannot close is left to the OS
            pass


def _forget_open_sets_after_fork() -> None:
    global _fork_generation
    _fork_generation += 1
    _inherited_sets.extend(_open_sets)
    _open_sets.clear()


atexit.register(_close_open_sets_at_exit)
os.register_at_fork(after_in_child=_forget_open_sets_after_fork)
