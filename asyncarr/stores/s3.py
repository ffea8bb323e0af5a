"""S3Store: keys are objects in an S3 bucket (AWS, or MinIO/R2/moto through ``endpoint_url``).

Every request goes through ``call_with_retries`` (botocore's own retries are off, so the
attempt counts are ours) and every failure is classified once, in ``_classify`` at the end of
this module. Each event loop gets its own aiobotocore client, opened on first use and closed
by ``close()``, by ``asyncio.run`` when that loop shuts down, or at interpreter exit.
Credentials live in the configuration only: never in a repr, an error or a log line.
"""

from __future__ import annotations

import asyncio
import atexit
import dataclasses
import functools
import logging
import os
import threading
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any, TypeVar
from urllib.parse import urlsplit

import aiohttp
from aiobotocore.session import AioSession
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import (
    ClientError,
    HTTPClientError,
    IncompleteReadError,
    NoCredentialsError,
    SSLError,
)
from botocore.exceptions import (
    ConnectionError as BotocoreConnectionError,
)
from botocore.loaders import Loader, create_loader

from .. import config
from .base import ByteRange, Store, _normalize_prefix, validate_key
from .retry import Failure, ShortBodyError, call_with_retries
from .url import STORE_SCHEMES

__all__ = ["S3Store"]

_log = logging.getLogger(__name__)
_T = TypeVar("_T")

_OPTIONS = ("anon", "region", "endpoint_url", "key", "secret", "token", "profile", "client_kwargs")
_DELETE_BATCH = 1000  # the most keys one DeleteObjects request accepts
_PUBLIC_HINT = 'The bucket may be public: pass storage_options={"anon": True}.'
_PRIVATE_HINT = "The bucket is not public: pass credentials (key/secret or profile)."


# -- options ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Credentials:
    """Explicit credentials; the repr hides them so no log or traceback can show them."""

    key: str | None = None
    secret: str | None = None
    token: str | None = None

    def __repr__(self) -> str:
        return "_Credentials(<hidden>)"

    def client_arguments(self) -> dict[str, str]:
        names = {"key": "aws_access_key_id", "secret": "aws_secret_access_key", "token": "aws_session_token"}
        return {names[f.name]: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name)}


# -- one client per event loop ------------------------------------------------------------------------

_open_connections: set[_Connection] = set()
"""Open clients, held strongly so a dropped store cannot leave its client to the garbage collector."""
_forked_connections: list[_Connection] = []
"""Clients inherited over fork: their loops do not run here, so they are kept, never used or closed."""
_loader: Loader | None = None
_loader_lock = threading.Lock()


def _shared_loader() -> Loader:
    """One botocore data loader for every client: parsing S3's service model once saves ~0.1 s per client."""
    global _loader
    with _loader_lock:
        if _loader is None:
            _loader = create_loader()
        return _loader


class _Connection:
    """One event loop's aiobotocore client for one store.

    An async generator keeps the client open: the loop's async-generator hooks (installed by
    ``run_forever``) close it when ``asyncio.run`` shuts the loop down, even if the store is
    never closed; ``close()`` closes it earlier.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, open_client: Callable[[], Any], location: str) -> None:
        self._loop = weakref.ref(loop)  # a strong one would keep the store's per-loop entry alive forever
        self.closed = False
        self._open_client = open_client
        self._location = location
        self._client: Any = None
        self._opening: asyncio.Future[Any] | None = None
        self._keeper: Any = None

    def loop(self) -> asyncio.AbstractEventLoop | None:
        return self._loop()

    async def client(self) -> Any:
        if self._client is not None:
            return self._client
        if self._opening is None:
            self._opening = asyncio.ensure_future(self._open())
            # Every waiter may be cancelled: mark a failure as retrieved so asyncio does not report it.
            self._opening.add_done_callback(lambda opening: opening.cancelled() or opening.exception())
        return await asyncio.shield(self._opening)

    async def _open(self) -> Any:
        try:
            context = self._open_client()
            client = await context.__aenter__()
        except BaseException:
            self._opening = None  # the next request tries again
            raise
        keeper = self._keep_open(context)
        await keeper.__anext__()
        self._client, self._keeper = client, keeper
        _open_connections.add(self)
        _log.debug("opened an S3 client for %s", self._location)
        return client

    async def _keep_open(self, context: Any) -> AsyncIterator[None]:
        try:
            yield
        finally:
            self.closed = True
            self._client = self._opening = self._keeper = None
            _open_connections.discard(self)
            await context.__aexit__(None, None, None)
            _log.debug("closed the S3 client for %s", self._location)

    async def close(self) -> None:
        self.closed = True
        opening = self._opening
        if self._keeper is None and opening is not None:
            try:
                await asyncio.shield(opening)
            except Exception:
                return  # it never opened
        keeper = self._keeper
        if keeper is not None:
            await keeper.aclose()


def _close_connections_at_exit() -> None:
    for connection in list(_open_connections):
        loop = connection.loop()
        try:
            if loop is None or loop.is_closed():
                continue
            if loop.is_running():
                asyncio.run_coroutine_threadsafe(connection.close(), loop).result(timeout=5)
            else:
                loop.run_until_complete(connection.close())
        except Exception:  # exiting anyway: a client that cannot close is left to the OS
            pass


def _forget_connections_after_fork() -> None:
    _forked_connections.extend(_open_connections)
    _open_connections.clear()


atexit.register(_close_connections_at_exit)
os.register_at_fork(after_in_child=_forget_connections_after_fork)


class S3Store(Store):
    """Objects under ``prefix`` in an S3 bucket; key ``a/b`` is the object ``prefix/a/b``.

    ``anon=True`` sends unsigned requests (public data, no credentials needed or looked
    for); otherwise ``key``/``secret``/``token``, a ``profile``, or botocore's default chain.
    ``endpoint_url`` reaches S3-compatible servers (path-style addressing).
    """

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        read_only: bool = False,
        anon: bool = False,
        region: str | None = None,
        endpoint_url: str | None = None,
        key: str | None = None,
        secret: str | None = None,
        token: str | None = None,
        profile: str | None = None,
        client_kwargs: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(read_only=read_only)
        if not isinstance(bucket, str) or not bucket or "/" in bucket:
            raise ValueError(f"S3 bucket names are non-empty and contain no '/', got {bucket!r}")
        if anon and (key or secret or token or profile):
            raise ValueError("S3Store: anon=True sends unsigned requests; do not also pass key/secret/token/profile")
        self._bucket = bucket
        self._root = _normalize_prefix(prefix)
        self._anon = bool(anon)
        self._region = region
        self._endpoint_url = endpoint_url
        self._credentials = _Credentials(key, secret, token)
        self._profile = profile
        self._client_kwargs = dict(client_kwargs or {})
        self._location = f"s3://{bucket}/{self._root[:-1]}" if self._root else f"s3://{bucket}"
        self._connections_lock = threading.Lock()
        self._connections: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Connection] = (
            weakref.WeakKeyDictionary()
        )

    @classmethod
    def from_url(cls, url: str, *, read_only: bool = False, **storage_options: Any) -> S3Store:
        """Open ``s3://bucket/prefix`` with storage options (anon, region, endpoint_url, key, ...)."""
        unknown = sorted(set(storage_options) - set(_OPTIONS))
        if unknown:
            raise TypeError(
                f"unknown storage_options for {url!r}: {', '.join(unknown)}; S3 stores accept {', '.join(_OPTIONS)}"
            )
        scheme, separator, rest = url.partition("://")
        bucket, _, prefix = rest.partition("/")
        if scheme.lower() != "s3" or not separator or not bucket:
            raise ValueError(f"{url!r} is not an S3 URL; write s3://bucket or s3://bucket/prefix")
        return cls(bucket, prefix, read_only=read_only, **storage_options)

    @property
    def bucket(self) -> str:
        """The bucket holding the keys."""
        return self._bucket

    @property
    def prefix(self) -> str:
        """The object-name prefix of the store root ('' for the whole bucket), without a trailing '/'."""
        return self._root[:-1]

    @property
    def anon(self) -> bool:
        """Whether requests are sent unsigned (anonymous access to public data)."""
        return self._anon

    @property
    def location(self) -> str:
        """``s3://bucket`` or ``s3://bucket/prefix``."""
        return self._location

    def __repr__(self) -> str:
        flags = [repr(self._location)]
        if self._anon:
            flags.append("anon=True")
        if self._region:
            flags.append(f"region={self._region!r}")
        if self._endpoint_url:
            flags.append(f"endpoint_url={_without_userinfo(self._endpoint_url)!r}")
        if self._profile:
            flags.append(f"profile={self._profile!r}")
        if self.read_only:
            flags.append("read_only=True")
        return f"S3Store({', '.join(flags)})"

    def __getstate__(self) -> dict[str, Any]:
        return {
            "bucket": self._bucket,
            "prefix": self._root,
            "read_only": self.read_only,
            "anon": self._anon,
            "region": self._region,
            "endpoint_url": self._endpoint_url,
            "credentials": self._credentials,
            "profile": self._profile,
            "client_kwargs": self._client_kwargs,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        credentials = state.pop("credentials")
        self.__init__(  # type: ignore[misc]
            **state, key=credentials.key, secret=credentials.secret, token=credentials.token
        )

    # -- client lifecycle --------------------------------------------------------------------

    def _open_client(self) -> Any:
        """A fresh aiobotocore client context for the running event loop."""
        settings = config.current()
        options: dict[str, Any] = {
            "max_pool_connections": max(settings.concurrency, 10),
            "connect_timeout": settings.timeout,
            "read_timeout": settings.timeout,
        }
        if self._anon:
            options["signature_version"] = UNSIGNED
        if self._endpoint_url:
            # S3-compatible servers want path-style URLs, and many reject botocore's default
            # aws-chunked checksum uploads.
            options["s3"] = {"addressing_style": "path"}
            options["request_checksum_calculation"] = "when_required"
            options["response_checksum_validation"] = "when_required"
        arguments = dict(self._client_kwargs)
        botocore_config = Config(**options)
        if arguments.get("config") is not None:
            botocore_config = botocore_config.merge(arguments["config"])
        # asyncarr's call_with_retries is the only retry loop: one attempt per botocore call.
        arguments["config"] = botocore_config.merge(Config(retries={"total_max_attempts": 1, "mode": "standard"}))
        if self._region:
            arguments["region_name"] = self._region
        if self._endpoint_url:
            arguments["endpoint_url"] = self._endpoint_url
        if not self._anon:
            arguments.update(self._credentials.client_arguments())
        session = AioSession(profile=self._profile)
        session.register_component("data_loader", _shared_loader())
        return session.create_client("s3", **arguments)

    async def _client(self) -> Any:
        loop = asyncio.get_running_loop()
        with self._connections_lock:
            connection = self._connections.get(loop)
            if connection is None or connection.closed:
                connection = self._connections[loop] = _Connection(loop, self._open_client, self._location)
        return await connection.client()

    async def close(self) -> None:
        """Close this event loop's client; clients of other running loops are closed on their loops."""
        loop = asyncio.get_running_loop()
        with self._connections_lock:
            connections = list(self._connections.items())
            self._connections.clear()
        for owner, connection in connections:
            if owner is loop:
                await connection.close()
            elif owner.is_running():
                asyncio.run_coroutine_threadsafe(connection.close(), owner)
            # A stopped loop's client closes when that loop shuts down its async generators.

    # -- the Store interface -----------------------------------------------------------------

    async def get(self, key: str, byte_range: ByteRange | None = None) -> bytes | None:
        """Return the object at ``key`` (or the requested range of it), or None if there is none."""
        object_key = self._object_key(key)
        if byte_range is not None and (byte_range.length == 0 or byte_range.suffix == 0):
            return b"" if await self.exists(key) else None  # HTTP cannot ask for zero bytes
        arguments = {"Key": object_key}
        if byte_range is not None:
            arguments["Range"] = _range_header(byte_range)

        async def attempt() -> bytes | None:
            try:
                response = await self._request("get_object", **arguments)
            except _S3ResponseError as exc:
                if exc.missing:
                    return None
                if exc.range_not_satisfiable:
                    return b""  # the range starts past the end, as LocalStore and Python slicing say
                raise
            async with response["Body"] as body:
                data = await body.read()
            expected = response.get("ContentLength")
            if expected is not None and len(data) < expected:
                raise ShortBodyError(f"received {len(data)} of {expected} bytes")
            if byte_range is not None and "ContentRange" not in response:
                data = byte_range.apply(data)  # the server ignored the Range header and sent everything
            return data

        return await self._retrying(attempt, key, "get")

    async def set(self, key: str, value: bytes) -> None:
        """Store ``value`` as the object at ``key``."""
        self._check_writable()
        object_key = self._object_key(key)
        body = value if isinstance(value, (bytes, bytearray)) else bytes(value)
        await self._retrying(functools.partial(self._request, "put_object", Key=object_key, Body=body), key, "put")

    async def delete(self, key: str) -> None:
        """Delete the object at ``key``; a missing object is not an error."""
        self._check_writable()
        object_key = self._object_key(key)

        async def attempt() -> None:
            try:
                await self._request("delete_object", Key=object_key)
            except _S3ResponseError as exc:
                if not exc.missing:
                    raise

        await self._retrying(attempt, key, "delete")

    async def delete_many(self, keys: Iterable[str]) -> None:
        """Delete many objects with DeleteObjects, 1000 per request; missing keys are ignored."""
        self._check_writable()
        await self._delete_objects([self._object_key(key) for key in keys], "")

    async def exists(self, key: str) -> bool:
        """Whether an object is stored at ``key`` (a HEAD request)."""
        return await self._head(key) is not None

    async def getsize(self, key: str) -> int | None:
        """Size of the object at ``key`` from a HEAD request, or None if missing."""
        head = await self._head(key)
        return None if head is None else int(head["ContentLength"])

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        """Yield every key below ``prefix`` (ListObjectsV2, every page)."""
        start = len(self._root)
        async for page in self._pages(_normalize_prefix(prefix)):
            for entry in page.get("Contents", ()):
                if not entry["Key"].endswith("/"):  # folder markers made by other tools are not keys
                    yield entry["Key"][start:]

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        """Yield the names of the objects and 'directories' directly inside ``prefix``."""
        start = len(self._root) + len(_normalize_prefix(prefix))
        async for page in self._pages(_normalize_prefix(prefix), delimiter="/"):
            for common in page.get("CommonPrefixes", ()):
                yield common["Prefix"][start:-1]
            for entry in page.get("Contents", ()):
                name = entry["Key"][start:]
                if name:  # the folder marker of ``prefix`` itself
                    yield name

    async def delete_prefix(self, prefix: str) -> None:
        """Delete every object below ``prefix`` ('' empties the store root)."""
        self._check_writable()
        below = _normalize_prefix(prefix)
        object_keys = [entry["Key"] async for page in self._pages(below) for entry in page.get("Contents", ())]
        await self._delete_objects(object_keys, below.rstrip("/"))

    # -- requests ------------------------------------------------------------------------------

    def _object_key(self, key: str) -> str:
        return self._root + validate_key(key)

    async def _request(self, operation: str, **arguments: Any) -> Any:
        """Call one S3 operation on this bucket; S3's error answers become ``_S3ResponseError``."""
        client = await self._client()
        try:
            return await getattr(client, operation)(Bucket=self._bucket, **arguments)
        except ClientError as exc:
            raise _S3ResponseError.from_client_error(exc, self._bucket) from exc

    def _retrying(self, attempt: Callable[[], Awaitable[_T]], key: str, action: str) -> Awaitable[_T]:
        hint = _PRIVATE_HINT if self._anon else _PUBLIC_HINT
        return call_with_retries(attempt, url=self.key_url(key), classify=_classify, action=action, denied_hint=hint)

    async def _head(self, key: str) -> dict[str, Any] | None:
        object_key = self._object_key(key)

        async def attempt() -> dict[str, Any] | None:
            try:
                return await self._request("head_object", Key=object_key)
            except _S3ResponseError as exc:
                if exc.missing:
                    return None
                raise

        return await self._retrying(attempt, key, "head")

    async def _pages(self, below: str, delimiter: str | None = None) -> AsyncIterator[dict[str, Any]]:
        """Yield the ListObjectsV2 pages of object names starting with ``below`` (relative to the root)."""
        arguments: dict[str, Any] = {"Prefix": self._root + below}
        if delimiter:
            arguments["Delimiter"] = delimiter
        while True:
            page = await self._retrying(
                functools.partial(self._request, "list_objects_v2", **arguments), below.rstrip("/"), "list"
            )
            yield page
            if not page.get("IsTruncated"):
                return
            arguments = {**arguments, "ContinuationToken": page["NextContinuationToken"]}

    async def _delete_objects(self, object_keys: list[str], url_key: str) -> None:
        async def delete_batch(batch: list[str]) -> None:
            request = {"Objects": [{"Key": name} for name in batch], "Quiet": True}

            async def attempt() -> None:
                response = await self._request("delete_objects", Delete=request)
                failures = [error for error in response.get("Errors", ()) if error.get("Code") != "NoSuchKey"]
                if failures:
                    first = failures[0]
                    raise _S3ResponseError(None, first.get("Code", ""), first.get("Message", ""), self._bucket)

            async with self.limiter:
                await self._retrying(attempt, url_key, f"delete of {len(batch)} keys")

        batches = [object_keys[i : i + _DELETE_BATCH] for i in range(0, len(object_keys), _DELETE_BATCH)]
        await asyncio.gather(*(delete_batch(batch) for batch in batches))


def _range_header(byte_range: ByteRange) -> str:
    if byte_range.suffix is not None:
        return f"bytes=-{byte_range.suffix}"
    if byte_range.length is None:
        return f"bytes={byte_range.offset}-"
    return f"bytes={byte_range.offset}-{byte_range.offset + byte_range.length - 1}"


def _without_userinfo(url: str) -> str:
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()


# -- error mapping ----------------------------------------------------------------------------------

_MISSING_CODES = frozenset({"NoSuchKey", "NotFound", "404"})
_DENIED_CODES = frozenset(
    "AccessDenied AllAccessDisabled InvalidAccessKeyId SignatureDoesNotMatch ExpiredToken InvalidToken "
    "TokenRefreshRequired AccountProblem Forbidden 401 403".split()
)
_TRANSIENT_CODES = frozenset(
    "SlowDown RequestTimeout InternalError ServiceUnavailable Throttling ThrottlingException "
    "RequestLimitExceeded TooManyRequests 500 502 503 504".split()
)
_TRANSIENT_STATUS = frozenset({429, 500, 502, 503, 504})
_TRANSIENT_TRANSPORT = (
    BotocoreConnectionError,  # EndpointConnectionError, ConnectTimeoutError, ...
    HTTPClientError,  # ConnectionClosedError, ReadTimeoutError, ResponseStreamingError
    IncompleteReadError,
    aiohttp.ClientConnectionError,  # ServerDisconnectedError included
    aiohttp.ClientPayloadError,
    ConnectionError,
)


class _S3ResponseError(Exception):
    """S3 answered a request with an error: its HTTP status, error code and message."""

    def __init__(self, status: int | None, code: str, message: str, bucket: str) -> None:
        self.status, self.code, self.message, self.bucket = status, code, message, bucket
        super().__init__(self._describe())

    @classmethod
    def from_client_error(cls, exc: ClientError, bucket: str) -> _S3ResponseError:
        error = exc.response.get("Error", {})
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return cls(status, str(error.get("Code") or status or ""), str(error.get("Message") or ""), bucket)

    @property
    def missing(self) -> bool:
        """No object has this key (NoSuchBucket is a different, fatal, failure)."""
        return self.code in _MISSING_CODES

    @property
    def range_not_satisfiable(self) -> bool:
        """The requested range starts past the end of the object."""
        return self.code == "InvalidRange" or self.status == 416

    def _describe(self) -> str:
        if self.code == "NoSuchBucket":
            return (
                f"the bucket {self.bucket!r} does not exist (HTTP 404 NoSuchBucket); "
                "check the bucket name, and endpoint_url for S3-compatible servers"
            )
        text = f"HTTP {self.status}" if self.status else "S3 error"
        if self.code and self.code != str(self.status):
            text += f" {self.code}"
        return f"{text}: {self.message}" if self.message else text


def _classify(exc: BaseException) -> Failure:
    """How ``call_with_retries`` treats a failed S3 attempt."""
    if isinstance(exc, _S3ResponseError):
        if exc.code in _DENIED_CODES or exc.status in (401, 403):
            return Failure.DENIED
        if exc.code in _TRANSIENT_CODES or exc.status in _TRANSIENT_STATUS:
            return Failure.TRANSIENT
        return Failure.FATAL
    if isinstance(exc, NoCredentialsError):
        return Failure.DENIED
    if isinstance(exc, SSLError):
        return Failure.FATAL  # a certificate problem does not go away by asking again
    if isinstance(exc, _TRANSIENT_TRANSPORT):
        return Failure.TRANSIENT
    return Failure.FATAL


STORE_SCHEMES["s3"] = S3Store.from_url
