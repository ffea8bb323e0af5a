"""HTTPStore: read-only Zarr data on any HTTP(S) server (static hosts, CDNs, object-store websites).

HTTP cannot list keys, so ``supports_listing`` is False: groups are read through their
consolidated metadata and arrays by path, and ``list_prefix``/``list_dir`` raise StoreError
saying so rather than yielding nothing. Byte ranges become ``Range`` headers (``bytes=a-b``,
``bytes=a-``, ``bytes=-n``); a server that ignores them (200 and the whole body) is sliced
locally, and a range wholly past the end (416) reads as ``b""``, like Python slicing.

Redirects are followed here, not by aiohttp: at most ``MAX_REDIRECTS`` hops, to http(s) URLs
only, and a hop to another origin (scheme, host or port) carries none of the caller's headers
or URL credentials, which belong to the base URL's origin alone (aiohttp itself would drop
only ``Authorization``, not an API key in a header of another name).

Every request runs through `call_with_retries`. One aiohttp session per event loop, with as
many pooled connections as ``config.concurrency``; ``close()`` closes the running loop's.
A session a store leaves open is closed when its loop shuts down (``asyncio.run`` does that)
or at interpreter exit (``clients.py``), so scripts see no "Unclosed client session" warnings.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, TypeVar
from urllib.parse import quote

import aiohttp
from yarl import URL

from .. import config
from ..errors import ReadOnlyError, StoreError
from .base import ByteRange, Store, _range_header, validate_key
from .clients import PerLoopClients
from .counting import recorder_of
from .retry import Failure, ShortBodyError, call_with_retries, connect_failure
from .url import STORE_SCHEMES

__all__ = ["MAX_REDIRECTS", "HTTPStore"]

_log = logging.getLogger(__name__)
T = TypeVar("T")
_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)")
_HEAD_REFUSED = (405, 501)
_UNSET = -1
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
MAX_REDIRECTS = 10
"""Redirects one request may follow; one more is a StoreError naming the URL."""


# -- options ---------------------------------------------------------------------------------


def _split_base_url(base_url: str) -> tuple[str, dict[str, str]]:
    """The base URL without credentials, and the Authorization header its user:password part gave."""
    if not isinstance(base_url, str):
        raise TypeError(f"the HTTP base URL must be a str, got {type(base_url).__name__}")
    url = URL(base_url)
    if url.scheme not in ("http", "https") or not url.host:
        shown = url.with_user(None) if url.is_absolute() else url
        raise ValueError(f"{shown!s}: an HTTP store needs an http:// or https:// URL with a host")
    if url.query_string or url.fragment:
        raise ValueError(
            f"{url.with_user(None).with_query(None).with_fragment(None)!s}: an HTTP store's base URL cannot "
            "carry a query or fragment; pass tokens as storage_options={'headers': {...}}"
        )
    credentials: dict[str, str] = {}
    if url.user is not None:
        token = base64.b64encode(f"{url.user}:{url.password or ''}".encode()).decode()
        credentials["Authorization"] = f"Basic {token}"
    return str(url.with_user(None)).rstrip("/"), credentials


def _checked_headers(headers: Mapping[str, str] | None) -> dict[str, str]:
    if headers is None:
        return {}
    if not isinstance(headers, Mapping):
        raise TypeError(f"headers must be a mapping of header names to values, got {type(headers).__name__}")
    for name, value in headers.items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise TypeError(f"header names and values must be strings; the header {name!r} is not")
    return dict(headers)


# -- client lifecycle ------------------------------------------------------------------------


@dataclasses.dataclass
class _LoopSession:
    """One event loop's aiohttp session and its request slots."""

    session: aiohttp.ClientSession
    slots: asyncio.Semaphore


async def _open_session(closing: contextlib.AsyncExitStack) -> _LoopSession:
    """A session for the running event loop, with as many connections and slots as config.concurrency."""
    limit = config.get("concurrency")
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=limit),
        # call_with_retries bounds each attempt; opening a connection has a shorter bound of its own.
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=config.get("connect_timeout")),
        headers={"Accept-Encoding": "identity"},  # byte ranges of the stored bytes, never of a gzip stream
    )
    # aiohttp resends an idempotent request once when a reused connection drops; call_with_retries
    # is the only retry loop, so that every attempt is counted against config.retries.
    session._retry_connection = False
    closing.push_async_callback(session.close)
    return _LoopSession(session, asyncio.Semaphore(limit))


class HTTPStore(Store):
    """Zarr data below an HTTP(S) base URL, read-only; ``headers`` go with every request."""

    supports_listing = False
    counts_calls = False  # each HTTP attempt is counted by call_with_retries

    def __init__(self, base_url: str, *, headers: Mapping[str, str] | None = None, read_only: bool = True) -> None:
        if not read_only:
            raise ValueError("HTTP stores are read-only: construct HTTPStore with read_only=True (the default)")
        super().__init__(read_only=True)
        self._base_url, credentials = _split_base_url(base_url)
        self._headers = {**credentials, **_checked_headers(headers)}
        self._init_clients()

    def _init_clients(self) -> None:
        self._clients = PerLoopClients("HTTP", self._base_url, _log)
        self._head_refused = False

    @property
    def location(self) -> str:
        """The base URL (without any user:password part)."""
        return self._base_url

    async def close(self) -> None:
        """Close this event loop's session; sessions of other running loops are closed on their loops."""
        await self._clients.close()

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        for name in ("_clients", "_head_refused"):
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._init_clients()

    # -- the Store interface -----------------------------------------------------------

    async def get(self, key: str, byte_range: ByteRange | None = None) -> bytes | None:
        """The value at ``key`` (or part of it), or None if the server answers 404."""
        validate_key(key)
        if byte_range is not None and (byte_range.length == 0 or byte_range.suffix == 0):
            return b"" if await self.exists(key) else None  # HTTP cannot ask for zero bytes
        range_header = None if byte_range is None else _range_header(byte_range)
        headers = {} if range_header is None else {"Range": range_header}

        async def attempt(session: aiohttp.ClientSession) -> bytes | None:
            async with self._send(session, "GET", key, headers) as response:
                if response.status == 404:
                    return None
                if response.status == 416 and range_header is not None:
                    return b""  # the range starts past the end
                _raise_for_status(response)
                body = await response.read()
                _check_length(response, body)
                if byte_range is None or range_header is None:
                    return body
                if response.status == 206:
                    return _cut_partial(response, body, byte_range)
                return byte_range.apply(body)  # the server ignored Range

        return await self._call(key, "GET", attempt, "get" if range_header is None else "get_range")

    async def exists(self, key: str) -> bool:
        """Whether the server has ``key`` (HEAD; a 1-byte GET where HEAD is refused)."""
        return await self._size(validate_key(key), need_size=False) is not None

    async def getsize(self, key: str) -> int | None:
        """Size of the value at ``key`` from HEAD's Content-Length, or None if missing."""
        return await self._size(validate_key(key), need_size=True)

    async def set(self, key: str, value: bytes) -> None:
        """Refused: HTTP stores are read-only."""
        self._check_writable()

    async def delete(self, key: str) -> None:
        """Refused: HTTP stores are read-only."""
        self._check_writable()

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        """Refused with StoreError: HTTP servers do not list keys."""
        raise self._cannot_list(prefix)
        yield  # pragma: no cover - makes this an async generator

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        """Refused with StoreError: HTTP servers do not list keys."""
        raise self._cannot_list(prefix)
        yield  # pragma: no cover - makes this an async generator

    # -- requests ----------------------------------------------------------------------

    def _request_url(self, key: str) -> URL:
        return URL(f"{self._base_url}/{quote(key, safe='/')}", encoded=True)

    @contextlib.asynccontextmanager
    async def _send(
        self, session: aiohttp.ClientSession, method: str, key: str, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        """The final response to ``method`` of ``key``, following redirects (see the module docstring)."""
        url = self._request_url(key)
        origin = _origin(url)
        request_headers = {**self._headers, **(headers or {})}
        for _ in range(MAX_REDIRECTS + 1):
            async with session.request(method, url, headers=request_headers, allow_redirects=False) as response:
                location = response.headers.get("Location") if response.status in _REDIRECT_STATUSES else None
                if location is None:
                    yield response
                    return
            url = _redirect_target(url, location)
            if _origin(url) != origin:
                # Once off the origin, never back on: only the request's own headers (Range) go on.
                request_headers = dict(headers or {})
            _log.debug("%s %s: redirected to %s", method, self.key_url(key), _shown(url))
        raise _RedirectError(f"more than {MAX_REDIRECTS} redirects; the last was to {_shown(url)}")

    async def _call(
        self, key: str, action: str, attempt: Callable[[aiohttp.ClientSession], Awaitable[T]], op: str
    ) -> T:
        loop_session = await self._clients.get("session", _open_session)
        # Waiting for a slot happens outside the per-attempt timeout: a queue is not a slow server.
        async with loop_session.slots:
            return await call_with_retries(
                lambda: attempt(loop_session.session),
                url=self.key_url(key),
                classify=_classify,
                action=action,
                denied_hint=self._denied_hint(),
                op=op,
                metrics=recorder_of(self),
                limiter=self.limiter,
            )

    async def _size(self, key: str, *, need_size: bool) -> int | None:
        """Size of ``key`` (``_UNSET`` if unknown and not needed), or None if it is missing."""
        if not self._head_refused:

            async def head(session: aiohttp.ClientSession) -> int | None:
                async with self._send(session, "HEAD", key) as r:
                    if r.status == 404:
                        return None
                    if r.status in _HEAD_REFUSED:
                        self._head_refused = True
                        return _UNSET
                    _raise_for_status(r)
                    if r.content_length is None or r.headers.get("Content-Encoding", "identity") != "identity":
                        return _UNSET
                    return r.content_length

            size = await self._call(key, "HEAD", head, "head")
            if size != _UNSET or not (need_size or self._head_refused):
                return size

        async def first_byte(session: aiohttp.ClientSession) -> int | None:
            async with self._send(session, "GET", key, {"Range": "bytes=0-0"}) as response:
                if response.status == 404:
                    return None
                if response.status == 416:
                    return 0  # only an empty value has no first byte
                _raise_for_status(response)
                if response.status == 206:
                    match = _CONTENT_RANGE.fullmatch(response.headers.get("Content-Range", "").strip())
                    return int(match.group(3)) if match and match.group(3) != "*" else _UNSET
                body = await response.read()  # the server ignored Range: this is the whole value
                _check_length(response, body)
                return len(body)

        size = await self._call(key, "GET", first_byte, "get_range")
        if size == _UNSET and need_size:  # no total size in Content-Range: count the bytes
            value = await self.get(key)
            return None if value is None else len(value)
        return size

    def _check_writable(self) -> None:
        raise ReadOnlyError(f"{self.location}: HTTP stores are read-only; write the data with another store")

    def _cannot_list(self, prefix: str) -> StoreError:
        where = self.key_url(prefix.strip("/"))
        return StoreError(
            f"{where}: HTTP servers cannot list keys. Open groups that have consolidated metadata "
            "(asyncarr.consolidate_metadata(store) where the data is written), or open arrays by their path"
        )

    def _denied_hint(self) -> str:
        if self._headers:
            return "The server did not accept the headers given (storage_options={'headers': ...})."
        return "If the server needs credentials, pass storage_options={'headers': {'Authorization': ...}}."


class _HTTPStatusError(Exception):
    """A response whose status is neither success nor a 'missing' answer."""

    def __init__(self, status: int, reason: str | None) -> None:
        super().__init__(f"HTTP {status} {reason or ''}".rstrip())
        self.status = status


class _RedirectError(Exception):
    """A redirect not followed: to a URL that is not http(s), malformed, or one hop too many."""


def _shown(url: URL) -> str:
    """``url`` fit for a message: no user:password, no query (a redirect's may hold a signed token)."""
    url = url.with_query(None).with_fragment(None)
    return str(url.with_user(None) if url.host else url)


def _origin(url: URL) -> tuple[str, str | None, int | None]:
    """Scheme, host and port (the scheme's default when none is written): what a secret is bound to."""
    return url.scheme, url.host, url.port


def _redirect_target(current: URL, location: str) -> URL:
    """The absolute URL a Location header names, relative to ``current``; only http(s) is followed."""
    try:
        target = current.join(URL(location))
    except ValueError as exc:
        raise _RedirectError(f"a redirect to a malformed URL ({exc})") from None
    if target.scheme not in ("http", "https") or not target.host:
        raise _RedirectError(
            f"the redirect to {_shown(target)} was refused: HTTP stores follow redirects to http(s) URLs only"
        )
    # A user:password in a Location is the server's, not the caller's: never turned into Basic auth.
    return target.with_user(None)


def _raise_for_status(response: aiohttp.ClientResponse) -> None:
    if not 200 <= response.status < 300:
        raise _HTTPStatusError(response.status, response.reason)


def _check_length(response: aiohttp.ClientResponse, body: bytes) -> None:
    """Raise ShortBodyError if ``body`` is shorter than the response announced."""
    announced = response.content_length
    if announced is not None and response.headers.get("Content-Encoding", "identity") == "identity":
        if len(body) < announced:
            raise ShortBodyError(f"the body has {len(body)} of the {announced} bytes announced")


def _cut_partial(response: aiohttp.ClientResponse, body: bytes, byte_range: ByteRange) -> bytes:
    """The bytes of ``byte_range`` from a 206 body, which may cover more than was asked."""
    match = _CONTENT_RANGE.fullmatch(response.headers.get("Content-Range", "").strip())
    if match is None:
        return body
    first, last, total = int(match.group(1)), int(match.group(2)), match.group(3)
    if len(body) < last - first + 1:
        raise ShortBodyError(f"the body has {len(body)} of the {last - first + 1} bytes of its Content-Range")
    if total == "*":
        return body[: last - first + 1]
    start, stop = byte_range.resolve(int(total))
    if start < first or stop > last + 1:
        raise _HTTPStatusError(206, f"with Content-Range bytes {first}-{last}/{total}, not the range asked for")
    return body[start - first : stop - first]


# -- error mapping ---------------------------------------------------------------------------


def _classify(exc: BaseException) -> Failure:
    """How one failed attempt counts: refused, worth retrying, or final."""
    if isinstance(exc, (_HTTPStatusError, aiohttp.ClientResponseError)):
        status = exc.status
        if status in (401, 403):
            return Failure.DENIED
        if status == 429:
            return Failure.THROTTLED
        if status == 408 or status >= 500:
            return Failure.TRANSIENT
        return Failure.FATAL
    if isinstance(exc, (_RedirectError, aiohttp.ClientConnectorCertificateError)):
        return Failure.FATAL
    if connect_failure(exc):
        return Failure.CONNECT
    if isinstance(exc, (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, TimeoutError, ConnectionError)):
        return Failure.TRANSIENT
    return Failure.FATAL


# -- URL scheme registration -----------------------------------------------------------------


def _from_url(url: str, *, read_only: bool = True, **storage_options: Any) -> HTTPStore:
    """``http(s)://`` URLs: the URL is the base URL; the only storage option is ``headers``."""
    headers = storage_options.pop("headers", None)
    if storage_options:
        raise TypeError(
            f"unknown storage_options for the HTTP store {URL(url).with_user(None)!s}: "
            f"{', '.join(sorted(storage_options))}; HTTP stores accept only 'headers'"
        )
    return HTTPStore(url, headers=headers)  # read-only whatever was asked: writable modes are refused later


STORE_SCHEMES["http"] = _from_url
STORE_SCHEMES["https"] = _from_url
