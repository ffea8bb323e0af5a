"""A static file server on 127.0.0.1 for the HTTP store tests: GET/HEAD with byte ranges, 404, opt-in quirks.

One server (an aiohttp application on a free port, run by an event loop in a daemon thread)
is started lazily per test session; ``serve_directory(path)`` mounts a directory under a
unique prefix and returns its base URL. Ranges follow RFC 9110 for one range: ``bytes=a-b``,
``bytes=a-`` and ``bytes=-n`` answer 206 with Content-Range, a range starting past the end
(or any range of an empty file) answers 416 with ``Content-Range: bytes */size``, and several
ranges or a malformed header are ignored (200 with the whole file). Quirks of real hosts are
opt-in per mount: refusing HEAD (405), ignoring Range (200), requiring headers (401/403).

``make_store`` and ``reopen_read_only`` give the store conformance suite a store whose reads
go through HTTP (an HTTPStore over the served directory) and whose writes and listings go to
the directory itself, since HTTP can neither write nor list.
"""

from __future__ import annotations

import asyncio
import atexit
import dataclasses
import itertools
import os
import re
import threading
from collections.abc import AsyncIterator, Coroutine, Mapping
from pathlib import Path
from typing import Any, TypeVar

for _name, _value in {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
    "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false",
}.items():
    os.environ.setdefault(_name, _value)

from aiohttp import web  # noqa: E402 - the hygiene variables above come first

from asyncarr.stores import ByteRange, LocalStore, Store  # noqa: E402
from asyncarr.stores.http import HTTPStore  # noqa: E402

__all__ = [
    "BackgroundServer",
    "RequestRecord",
    "ServedDirectoryStore",
    "make_store",
    "reopen_read_only",
    "request_log",
    "serve_directory",
]

T = TypeVar("T")
_SINGLE_RANGE = re.compile(r"bytes=(\d*)-(\d*)")


class BackgroundServer:
    """Serves an aiohttp application on 127.0.0.1 (a free port) from an event loop in a daemon thread."""

    def __init__(self, app: web.Application, *, name: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
        self.port: int = self.call(self._start())
        self.url = f"http://127.0.0.1:{self.port}"
        self._stopped = False

    async def _start(self) -> int:
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        return int(self._runner.addresses[0][1])

    async def _shutdown(self) -> None:
        await self._runner.cleanup()
        # Handlers whose client already hung up are not awaited by cleanup(); let them finish.
        pending = asyncio.all_tasks() - {asyncio.current_task()}
        if pending:
            _, unfinished = await asyncio.wait(pending, timeout=5)
            for task in unfinished:
                task.cancel()
            await asyncio.gather(*unfinished, return_exceptions=True)

    def call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the server's loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=60)

    def stop(self) -> None:
        """Close the listening socket and every connection, let handlers finish, then end the loop thread."""
        if self._stopped:
            return
        self._stopped = True
        self.call(self._shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()


@dataclasses.dataclass(frozen=True)
class RequestRecord:
    """One request a mount received: method, key (path below the mount), headers and body."""

    method: str
    key: str
    headers: Mapping[str, str]
    body: bytes = b""


@dataclasses.dataclass
class _Mount:
    root: Path
    refuse_head: bool = False
    ignore_range: bool = False
    required_headers: Mapping[str, str] = dataclasses.field(default_factory=dict)
    log: list[RequestRecord] = dataclasses.field(default_factory=list)


class _FileServer:
    """The aiohttp application behind ``serve_directory``: directories mounted under unique prefixes."""

    def __init__(self) -> None:
        self._mounts: dict[str, _Mount] = {}
        self._names = itertools.count()
        self._lock = threading.Lock()
        app = web.Application()
        app.router.add_route("*", "/{mount}/{key:.*}", self._handle)
        self._server = BackgroundServer(app, name="asyncarr-test-http-server")

    def mount(self, mount: _Mount) -> str:
        with self._lock:
            name = f"m{next(self._names)}"
            self._mounts[name] = mount
        return f"{self._server.url}/{name}"

    def mount_of(self, base_url: str) -> _Mount:
        return self._mounts[base_url.rstrip("/").rsplit("/", 1)[1]]

    def stop(self) -> None:
        self._server.stop()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        mount = self._mounts.get(request.match_info["mount"])
        if mount is None:
            return web.Response(status=404, text="no such mount")
        key = request.match_info["key"]
        body = await request.read()
        mount.log.append(RequestRecord(request.method, key, dict(request.headers), body))
        if request.method not in ("GET", "HEAD"):
            return web.Response(status=405, headers={"Allow": "GET, HEAD"})
        for name, value in mount.required_headers.items():
            if name not in request.headers:
                return web.Response(status=401, text=f"missing header {name}")
            if request.headers[name] != value:
                return web.Response(status=403, text=f"wrong header {name}")
        if request.method == "HEAD" and mount.refuse_head:
            return web.Response(status=405, headers={"Allow": "GET"})
        path = (mount.root / key).resolve()
        if not key or not path.is_relative_to(mount.root) or not path.is_file():
            return web.Response(status=404, text="not found")
        data = path.read_bytes()
        headers = {"Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"}
        span = None if mount.ignore_range else _parse_range(request.headers.get("Range"), len(data))
        if span is None:  # Content-Length even for an empty file's HEAD, which aiohttp would leave out
            return web.Response(body=data, headers={**headers, "Content-Length": str(len(data))})
        if span == "unsatisfiable":
            return web.Response(status=416, headers={"Content-Range": f"bytes */{len(data)}"})
        start, stop = span
        headers["Content-Range"] = f"bytes {start}-{stop - 1}/{len(data)}"
        return web.Response(status=206, body=data[start:stop], headers=headers)


def _parse_range(header: str | None, size: int) -> tuple[int, int] | str | None:
    """(start, stop) of a single satisfiable range, "unsatisfiable", or None to answer with everything."""
    match = _SINGLE_RANGE.fullmatch(header.replace(" ", "")) if header else None
    if match is None or match.group(1) == match.group(2) == "":
        return None
    first, last = match.group(1), match.group(2)
    if first == "":
        suffix = int(last)
        return "unsatisfiable" if suffix == 0 or size == 0 else (max(0, size - suffix), size)
    start = int(first)
    if last and int(last) < start:
        return None  # an invalid range is ignored
    if start >= size:
        return "unsatisfiable"
    return start, size if not last else min(size, int(last) + 1)


_server: _FileServer | None = None
_server_lock = threading.Lock()


def _file_server() -> _FileServer:
    global _server
    with _server_lock:
        if _server is None:
            _server = _FileServer()
            atexit.register(_server.stop)
        return _server


def serve_directory(
    path: str | os.PathLike[str],
    *,
    refuse_head: bool = False,
    ignore_range: bool = False,
    required_headers: Mapping[str, str] | None = None,
) -> str:
    """Serve the directory ``path`` over HTTP and return its base URL (no trailing slash).

    ``refuse_head``: HEAD answers 405. ``ignore_range``: Range headers are ignored (200 with the
    whole file). ``required_headers``: requests without them get 401, with other values 403.
    """
    mount = _Mount(Path(path).resolve(), refuse_head, ignore_range, dict(required_headers or {}))
    return _file_server().mount(mount)


def request_log(base_url: str) -> list[RequestRecord]:
    """The requests the mount at ``base_url`` has received so far, oldest first."""
    return list(_file_server().mount_of(base_url).log)


class ServedDirectoryStore(Store):
    """A directory served over HTTP: reads go through an HTTPStore, writes and listings to the directory.

    For the store conformance suite: what it checks of reads (ranges, missing keys, exists,
    getsize, key validation, pickling) then runs against the HTTP store.
    """

    supports_listing = True

    def __init__(self, root: str | os.PathLike[str], *, read_only: bool = False, base_url: str | None = None) -> None:
        super().__init__(read_only=read_only)
        self.directory = LocalStore(root, read_only=read_only)
        self.http = HTTPStore(base_url or serve_directory(self.directory.root))

    @property
    def location(self) -> str:
        """The base URL of the served directory."""
        return self.http.location

    async def get(self, key: str, byte_range: ByteRange | None = None) -> bytes | None:
        """Read through HTTP."""
        return await self.http.get(key, byte_range)

    async def exists(self, key: str) -> bool:
        """Ask the HTTP server."""
        return await self.http.exists(key)

    async def getsize(self, key: str) -> int | None:
        """Ask the HTTP server."""
        return await self.http.getsize(key)

    async def set(self, key: str, value: bytes) -> None:
        """Write the file."""
        self._check_writable()
        await self.directory.set(key, value)

    async def delete(self, key: str) -> None:
        """Delete the file."""
        self._check_writable()
        await self.directory.delete(key)

    def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        """List the directory."""
        return self.directory.list_prefix(prefix)

    def list_dir(self, prefix: str) -> AsyncIterator[str]:
        """List the directory."""
        return self.directory.list_dir(prefix)

    async def close(self) -> None:
        """Close the HTTP session of the running loop."""
        await self.http.close()


def make_store(tmp_path: Path) -> ServedDirectoryStore:
    """A fresh, empty served directory below ``tmp_path``."""
    root = tmp_path / "served"
    root.mkdir(parents=True, exist_ok=True)
    return ServedDirectoryStore(root)


def reopen_read_only(store: Store) -> ServedDirectoryStore:
    """The same served directory, read-only."""
    assert isinstance(store, ServedDirectoryStore)
    return ServedDirectoryStore(store.directory.root, read_only=True, base_url=store.http.location)
