"""GCSStore: keys are objects in a Google Cloud Storage bucket, reached through gcsfs's async API.

Every request goes through ``call_with_retries``: gcsfs's own retry loop is taken out (a
subclass calls the undecorated request method), so the attempt counts are asyncarr's, and
every failure is classified once, in ``_classify`` at the end of this module. Each event loop
gets its own gcsfs filesystem (its aiohttp session belongs to that loop), made on first use
and closed by ``close()``, by ``asyncio.run`` when that loop shuts down, or at interpreter
exit. Credentials live in the configuration only: never in a repr, an error or a log line.
"""

from __future__ import annotations

import os

# gcsfs >= 2025 otherwise asks the Storage Control gRPC API for each bucket's type on first use;
# against an emulator (and behind some proxies) each such call hangs for 60 s (EMULATORS.md).
os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any, TypeVar
from urllib.parse import quote

import aiohttp
import google.auth.credentials
import google.auth.exceptions
import requests.exceptions
from gcsfs.core import GCSFileSystem
from gcsfs.retry import HttpError, NonRetryableError

from .. import config
from .base import ByteRange, _normalize_prefix
from .buckets import BucketStore, check_storage_options, split_bucket_url
from .clients import PerLoopClients
from .retry import Failure, connect_failure
from .url import STORE_SCHEMES, check_endpoint_url

__all__ = ["GCSStore"]

_log = logging.getLogger(__name__)
_T = TypeVar("_T")

_OPTIONS = ("token", "project", "endpoint_url")
_RESERVED_GCSFS_OPTIONS = ("asynchronous", "loop", "skip_instance_cache", "use_listings_cache", "listings_expiry_time")
_PAGE_SIZE = 1000  # the most entries GCS returns in one listing page
_LIST_FIELDS = "items(name),prefixes,nextPageToken"
_PUBLIC_HINT = 'For public data pass storage_options={"token": "anon"}.'
_ANON_HINT = (
    'The request was anonymous (token="anon"): for private data pass credentials as storage_options={"token": ...}.'
)


# -- options ----------------------------------------------------------------------------------


def _emulator_endpoint(endpoint_url: str | None) -> str | None:
    """``endpoint_url`` (which must be ``http(s)://host[:port]``), else ``STORAGE_EMULATOR_HOST`` as gcsfs
    reads it (``host:port`` means ``http://host:port``), without a trailing '/'."""
    if endpoint_url:
        return check_endpoint_url(endpoint_url, "endpoint_url").rstrip("/")
    endpoint = os.environ.get("STORAGE_EMULATOR_HOST", "")
    if endpoint in ("", "default"):
        return None
    if not endpoint.startswith(("http://", "https://")):
        endpoint = f"http://{endpoint}"
    return check_endpoint_url(endpoint, "STORAGE_EMULATOR_HOST").rstrip("/")


def _check_token(token: Any) -> None:
    if token is None or isinstance(token, (str, dict, google.auth.credentials.Credentials)):
        return
    raise TypeError(
        "GCSStore token must be None (default credentials), 'anon', 'google_default', 'cloud', a path to a "
        f"credentials JSON file, a dict of such JSON or a google.auth Credentials object, not {type(token).__name__}"
    )


class _SingleAttemptFileSystem(GCSFileSystem):
    """gcsfs with one attempt per request: asyncarr's ``call_with_retries`` is the only retry loop."""

    _request = getattr(GCSFileSystem._request, "__wrapped__", GCSFileSystem._request)


class GCSStore(BucketStore):
    """Objects under ``prefix`` in a GCS bucket; key ``a/b`` is the object ``prefix/a/b``.

    ``token="anon"`` reads public data without credentials; otherwise ``token`` is anything
    gcsfs accepts (None: the default credentials chain; a service-account JSON file or dict;
    a google.auth Credentials object). ``endpoint_url`` (or ``STORAGE_EMULATOR_HOST``) reaches
    emulators. ``max_connections`` caps the connections of one event loop's client (default
    ``config.concurrency``); other keyword arguments go to ``gcsfs.GCSFileSystem``.
    """

    _service = "GCS"
    _scheme = "gs"

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        read_only: bool = False,
        token: Any = None,
        project: str | None = None,
        endpoint_url: str | None = None,
        max_connections: int | None = None,
        **gcsfs_kwargs: Any,
    ) -> None:
        super().__init__(bucket, prefix, read_only=read_only)
        _check_token(token)
        reserved = sorted(set(gcsfs_kwargs) & set(_RESERVED_GCSFS_OPTIONS))
        if reserved:
            raise TypeError(f"GCSStore sets {', '.join(reserved)} itself; do not pass them")
        if max_connections is not None and (not isinstance(max_connections, int) or max_connections < 1):
            raise ValueError(f"max_connections must be a positive int or None, got {max_connections!r}")
        self._token = token
        self._project = project
        self._endpoint_url = _emulator_endpoint(endpoint_url)
        self._max_connections = max_connections
        self._gcsfs_kwargs = gcsfs_kwargs
        self._clients = PerLoopClients("GCS", self._location, _log)

    @classmethod
    def from_url(cls, url: str, *, read_only: bool = False, **storage_options: Any) -> GCSStore:
        """Open ``gs://bucket/prefix`` (or ``gcs://``) with storage options token, project, endpoint_url."""
        check_storage_options(url, storage_options, _OPTIONS, "GCS")
        bucket, prefix = split_bucket_url(url, ("gs", "gcs"), "a GCS URL")
        return cls(bucket, prefix, read_only=read_only, **storage_options)

    @property
    def anonymous(self) -> bool:
        """Whether requests carry no credentials (``token="anon"``)."""
        return self._token == "anon"

    @property
    def endpoint_url(self) -> str | None:
        """The emulator or private endpoint requests go to (None: Google's)."""
        return self._endpoint_url

    def __repr__(self) -> str:
        flags = [repr(self._location)]
        if self.anonymous:
            flags.append("token='anon'")
        if self._endpoint_url:
            flags.append(f"endpoint_url={self._endpoint_url!r}")
        if self.read_only:
            flags.append("read_only=True")
        return f"GCSStore({', '.join(flags)})"

    def __getstate__(self) -> dict[str, Any]:
        return {
            "bucket": self._bucket,
            "prefix": self._root,
            "read_only": self.read_only,
            "token": self._token,
            "project": self._project,
            "endpoint_url": self._endpoint_url,
            "max_connections": self._max_connections,
            "gcsfs_kwargs": self._gcsfs_kwargs,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        self.__init__(**state.pop("gcsfs_kwargs"), **state)  # type: ignore[misc]

    # -- client lifecycle --------------------------------------------------------------------

    def _new_filesystem(self) -> GCSFileSystem:
        """A gcsfs filesystem for one event loop (its session is created on its first request)."""
        options = dict(self._gcsfs_kwargs)
        if self._project is not None:
            options["project"] = self._project
        # call_with_retries bounds each attempt; opening a connection has a shorter bound of its own.
        options.setdefault(
            "requests_timeout", aiohttp.ClientTimeout(total=None, sock_connect=config.get("connect_timeout"))
        )
        try:
            return _SingleAttemptFileSystem(
                token=self._token,
                endpoint_url=self._endpoint_url,
                asynchronous=True,
                skip_instance_cache=True,
                use_listings_cache=False,  # every listing asks the bucket: other writers' changes show at once
                **options,
            )
        except Exception as exc:
            # Messages of failed credential lookups can quote the token (a raw token goes into a URL).
            reason = _redact(f"{type(exc).__name__}: {exc}", self._token)
            raise _CredentialsError(f"the Google credentials could not be set up ({reason})") from None

    async def _open_filesystem(self, closing: contextlib.AsyncExitStack) -> GCSFileSystem:
        """A gcsfs filesystem for the running event loop; ``closing`` closes its aiohttp session."""
        # Finding default credentials reads files and may ask a metadata server: not on the loop.
        filesystem = await asyncio.to_thread(self._new_filesystem)
        if "connector" not in filesystem.session_kwargs and not filesystem._use_client_cert:
            # gcsfs's session would get aiohttp's default pool of 100 connections.
            connector = aiohttp.TCPConnector(limit=self._max_connections or config.get("concurrency"))
            filesystem.session_kwargs = {**filesystem.session_kwargs, "connector": connector}
        closing.push_async_callback(_close_session, filesystem)
        return filesystem

    async def _filesystem(self) -> GCSFileSystem:
        return await self._clients.get("filesystem", self._open_filesystem)

    async def close(self) -> None:
        """Close this event loop's session; sessions of other running loops are closed on their loops."""
        await self._clients.close()

    # -- the Store interface -----------------------------------------------------------------

    async def get(self, key: str, byte_range: ByteRange | None = None) -> bytes | None:
        """Return the object at ``key`` (or the requested range of it), or None if there is none."""
        name = self._object_name(key)

        async def attempt() -> bytes | None:
            filesystem = await self._filesystem()
            try:
                return await _read(filesystem, self._bucket, name, byte_range)
            except FileNotFoundError:
                return None

        return await self._retrying(attempt, key, "get", "get" if byte_range is None else "get_range")

    async def set(self, key: str, value: bytes) -> None:
        """Store ``value`` as the object at ``key``."""
        self._check_writable()
        name = self._object_name(key)

        async def attempt() -> None:
            try:
                await _upload(await self._filesystem(), self._bucket, name, value)
            except FileNotFoundError:
                raise _MissingBucketError(self._bucket) from None

        await self._retrying(attempt, key, "put", "set", sent=len(value))

    async def delete(self, key: str) -> None:
        """Delete the object at ``key``; a missing object is not an error."""
        self._check_writable()
        await self._delete_object(self._object_name(key), key)

    async def exists(self, key: str) -> bool:
        """Whether an object is stored at ``key`` (a metadata request)."""
        return await self._metadata(key) is not None

    async def getsize(self, key: str) -> int | None:
        """Size of the object at ``key`` from its metadata, or None if missing."""
        metadata = await self._metadata(key)
        return None if metadata is None else int(metadata["size"])

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        """Yield the names of the objects and 'directories' directly inside ``prefix``, each once."""
        start = len(self._root) + len(_normalize_prefix(prefix))
        seen: set[str] = set()
        async for names, prefixes in self._list_pages(_normalize_prefix(prefix), delimiter="/"):
            children = [common[start:-1] for common in prefixes] + [name[start:] for name in names]
            for child in children:
                if child and child not in seen:  # '' is the folder marker of ``prefix`` itself
                    seen.add(child)
                    yield child

    async def delete_listed(self, prefix: str, names: list[str]) -> None:
        """Delete the objects of the keys ``names`` below ``prefix``, each its own request, under the store's limit."""
        self._check_writable()
        limiter = self.limiter

        async def remove(name: str) -> None:
            async with limiter:
                await self._delete_object(self._root + name, name)

        await asyncio.gather(*(remove(name) for name in names))

    # -- requests ------------------------------------------------------------------------------

    def _classify_failure(self, exc: BaseException) -> Failure:
        """gcsfs's and aiohttp's errors as retry kinds (``_classify``, below)."""
        return _classify(exc)

    def _denied_hint(self) -> str:
        """What to pass for public data, or that an anonymous request was refused."""
        return _ANON_HINT if self.anonymous else _PUBLIC_HINT

    async def _metadata(self, key: str) -> dict[str, Any] | None:
        name = self._object_name(key)

        async def attempt() -> dict[str, Any] | None:
            filesystem = await self._filesystem()
            try:
                return await filesystem._call("GET", "b/{}/o/{}", self._bucket, name, json_out=True)
            except FileNotFoundError:
                return None

        return await self._retrying(attempt, key, "metadata request", "head")

    async def _delete_object(self, name: str, key: str) -> None:
        async def attempt() -> None:
            filesystem = await self._filesystem()
            try:
                await filesystem._call("DELETE", "b/{}/o/{}", self._bucket, name)
            except FileNotFoundError:
                pass

        await self._retrying(attempt, key, "delete", "delete")

    async def _list_pages(self, below: str, delimiter: str | None = None) -> AsyncIterator[tuple[list[str], list[str]]]:
        """Yield the object names and common prefixes of each listing page below the root and ``below``."""
        page_token: str | None = None
        while True:

            async def attempt(page_token: str | None = page_token) -> dict[str, Any]:
                filesystem = await self._filesystem()
                try:
                    return await filesystem._call(
                        "GET",
                        "b/{}/o",
                        self._bucket,
                        json_out=True,
                        prefix=(self._root + below) or None,
                        delimiter=delimiter,
                        maxResults=_PAGE_SIZE,
                        pageToken=page_token,
                        fields=_LIST_FIELDS,
                    )
                except FileNotFoundError:
                    raise _MissingBucketError(self._bucket) from None

            page = await self._retrying(attempt, below.rstrip("/"), "list", "list")
            yield [item["name"] for item in page.get("items", ())], page.get("prefixes", [])
            page_token = page.get("nextPageToken")
            if not page_token:
                return


async def _close_session(filesystem: GCSFileSystem) -> None:
    """Close the filesystem's aiohttp session, or only its connector if it never made one."""
    session = filesystem._session  # None until the first request
    if session is not None:
        await session.close()
    else:
        connector = filesystem.session_kwargs.get("connector")
        if connector is not None:
            await connector.close()


async def _read(filesystem: GCSFileSystem, bucket: str, name: str, byte_range: ByteRange | None) -> bytes:
    """One attempt at reading an object (or part of it); FileNotFoundError if it is missing."""
    url = filesystem.url(f"{bucket}/{name}")
    if byte_range is None:
        _, data = await filesystem._call("GET", url)
        return data
    if byte_range.suffix is not None or byte_range.length == 0:
        # Resolve suffixes from the size: the emulator ignores 'bytes=-N', and HTTP cannot ask for 0 bytes.
        metadata = await filesystem._call("GET", "b/{}/o/{}", bucket, name, json_out=True)
        start, stop = byte_range.resolve(int(metadata["size"]))
        if start >= stop:
            return b""
    else:
        start = byte_range.offset
        stop = None if byte_range.length is None else start + byte_range.length
    header = f"bytes={start}-" if stop is None else f"bytes={start}-{stop - 1}"
    try:
        headers, data = await filesystem._call("GET", url, headers={"Range": header})
    except HttpError as exc:
        if _status(exc) == 416:
            return b""  # the range starts past the end, as LocalStore and Python slicing say
        raise
    if "Content-Range" not in headers:
        data = data[start:stop]  # the server ignored the Range header and sent everything
    return data


async def _upload(filesystem: GCSFileSystem, bucket: str, name: str, value: bytes) -> None:
    """One attempt at storing an object, in one request."""
    if not value:
        # The emulator fails on empty media uploads; gcsfs's multipart upload has nothing to mangle here.
        await filesystem._pipe_file(f"{bucket}/{name}", b"")
        return
    # A media upload sends the bytes as they are. gcsfs's multipart body frames the value with bare
    # '\n's, and MIME parsers take a value's trailing '\r' as part of the boundary's line break.
    await filesystem._call(
        "POST",
        f"{filesystem._location}/upload/storage/v1/b/{quote(bucket, safe='')}/o",
        uploadType="media",
        name=name,
        data=value,
        headers={"Content-Type": "application/octet-stream"},
    )


def _redact(text: str, token: Any) -> str:
    """``text`` with every secret string of ``token`` replaced by '<hidden>'."""
    secrets: list[str] = []
    if isinstance(token, str) and token not in ("anon", "google_default", "cloud", "cache", "browser"):
        secrets.append(token)
    elif isinstance(token, dict):
        secrets.extend(value for value in token.values() if isinstance(value, str) and len(value) >= 4)
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, "<hidden>")
    return text


# -- error mapping ----------------------------------------------------------------------------------


class _CredentialsError(Exception):
    """The configured credentials could not be loaded or used (the message never quotes them)."""


class _MissingBucketError(Exception):
    """GCS answered 404 to a listing or an upload: the bucket does not exist (a fatal failure)."""

    def __init__(self, bucket: str) -> None:
        super().__init__(
            f"the bucket {bucket!r} does not exist (HTTP 404); check the bucket name, and endpoint_url for emulators"
        )


_TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})
_THROTTLING_STATUS = frozenset({429})  # GCS's "rate limit exceeded"; its 503 is a backend error
_TRANSIENT_TRANSPORT = (
    aiohttp.ClientConnectionError,  # refused, reset or dropped connections, ServerDisconnectedError
    aiohttp.ClientPayloadError,  # a body shorter than its Content-Length
    requests.exceptions.ConnectionError,  # gcsfs turns 502 into ProxyError; token refreshes use requests
    requests.exceptions.Timeout,
    google.auth.exceptions.TransportError,  # the token endpoint could not be reached
    ConnectionError,
)


def _status(exc: HttpError) -> int | None:
    try:
        return int(exc.code)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def _by_status(status: int | None) -> Failure:
    if status in (401, 403):
        return Failure.DENIED
    if status in _THROTTLING_STATUS:
        return Failure.THROTTLED
    return Failure.TRANSIENT if status in _TRANSIENT_STATUS else Failure.FATAL


def _classify(exc: BaseException) -> Failure:
    """How ``call_with_retries`` treats a failed GCS attempt."""
    if isinstance(exc, HttpError):
        status = _status(exc)
        return _by_status(status)
    if isinstance(exc, aiohttp.ClientResponseError):
        return _by_status(exc.status)
    if type(exc) is OSError and str(exc).startswith("Forbidden"):
        return Failure.DENIED  # gcsfs raises a bare OSError('Forbidden: ...') for 403
    if isinstance(exc, (_CredentialsError, NonRetryableError, google.auth.exceptions.RefreshError)):
        return Failure.DENIED
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return Failure.FATAL
    if connect_failure(exc):
        return Failure.CONNECT
    if isinstance(exc, _TRANSIENT_TRANSPORT):
        return Failure.TRANSIENT
    return Failure.FATAL


STORE_SCHEMES["gs"] = GCSStore.from_url
STORE_SCHEMES["gcs"] = GCSStore.from_url
