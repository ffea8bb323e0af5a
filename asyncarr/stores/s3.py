"""S3Store: keys are objects in an S3 bucket (AWS, or MinIO/R2/moto through ``endpoint_url``).

The chunk requests -- GET (whole or a byte range), PUT, HEAD and DELETE of one object -- go
straight to aiohttp, signed by asyncarr's own SigV4 (``sigv4.py``): about a tenth of the
client CPU that a botocore call spends on its event hooks, request model and response
parser. Listing and batch deletes go through aiobotocore (with botocore's retries off).
Every request goes through ``call_with_retries``, and every failure is classified once, by
``s3_errors.classify``. Each event loop gets its own aiohttp session (and, on first use,
aiobotocore client), shared by every S3Store of the same bucket and configuration, so arrays
opened one after another reuse warm connections. They close when the last store that used
them is closed, when ``asyncio.run`` shuts that loop down, or at interpreter exit
(``clients.py``). Credentials live in the configuration only: never in a repr, an error or
a log line.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import hashlib
import io
import logging
import os
import re
import ssl
import threading
from collections.abc import AsyncIterator, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import aiohttp
from aiobotocore.config import AioConfig
from aiobotocore.httpsession import AIOHTTPSession
from aiobotocore.session import AioSession
from botocore import UNSIGNED
from botocore.exceptions import ClientError, NoCredentialsError
from botocore.loaders import Loader, create_loader
from yarl import URL

from .. import config
from .base import ByteRange, _normalize_prefix, _range_header
from .buckets import BucketStore, check_storage_options, split_bucket_url
from .clients import shared_clients
from .retry import Failure, ShortBodyError
from .s3_errors import REGION_REDIRECTS, RedirectNotFollowedError, S3ResponseError, classify
from .sigv4 import EMPTY_SHA256, UNSIGNED_PAYLOAD, Signer, canonical_uri
from .url import STORE_SCHEMES, check_endpoint_url

__all__ = ["HashedBody", "S3Store"]

_log = logging.getLogger(__name__)
_T = TypeVar("_T")

_OPTIONS = ("anon", "region", "endpoint_url", "key", "secret", "token", "profile", "client_kwargs")
_CLIENT_KWARGS = {
    "endpoint_url": "endpoint_url",
    "region_name": "region",
    "aws_access_key_id": "key",
    "aws_secret_access_key": "secret",
    "aws_session_token": "token",
}
"""botocore client arguments (as s3fs users pass them) and the store options they stand for; plus ``verify``."""
_DELETE_BATCH = 1000  # the most keys one DeleteObjects request accepts
_PUBLIC_HINT = 'The bucket may be public: pass storage_options={"anon": True}.'
_PRIVATE_HINT = "The bucket is not public: pass credentials (key/secret or profile)."
_STREAMED_BODY = 1 << 16  # bodies larger than this are sent piece by piece
_REGION_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")


class HashedBody:
    """An object's body and the hex SHA-256 its signed PUT carries (``x-amz-content-sha256``)."""

    __slots__ = ("body", "sha256")

    def __init__(self, value: bytes | bytearray | memoryview) -> None:
        self.body = value if isinstance(value, (bytes, bytearray)) else bytes(value)
        # hashlib releases the GIL for bodies over 2 KiB: codec threads hash side by side.
        self.sha256 = hashlib.sha256(self.body).hexdigest() if self.body else EMPTY_SHA256

    def __len__(self) -> int:
        return len(self.body)


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


def _default_region() -> str | None:
    """The region the environment names: ``AWS_DEFAULT_REGION`` (botocore's), then ``AWS_REGION`` (None: neither)."""
    return os.environ.get("AWS_DEFAULT_REGION") or os.environ.get("AWS_REGION") or None


_TRUE = frozenset({"true", "1", "yes", "on"})


def _configured_endpoint(profile: str | None) -> str | None:
    """The S3 endpoint botocore would configure itself: environment first, then the shared config file.

    ``AWS_ENDPOINT_URL_S3`` (this service's variable) wins over ``AWS_ENDPOINT_URL``, and both over
    the profile's ``services`` section and its ``endpoint_url``; ``AWS_IGNORE_CONFIGURED_ENDPOINT_URLS``
    turns every one of them off. Resolved once, here, so object requests, listings and pickles use one.
    """
    if os.environ.get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "").strip().lower() in _TRUE:
        return None
    for variable in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"):
        if os.environ.get(variable):
            return os.environ[variable]
    config_file = Path(os.environ.get("AWS_CONFIG_FILE") or "~/.aws/config").expanduser()
    try:
        modified = config_file.stat().st_mtime_ns
    except OSError:
        return None  # no shared config file: nothing more to find
    return _config_file_endpoint(str(config_file), modified, profile or os.environ.get("AWS_PROFILE"))


@functools.lru_cache(maxsize=32)
def _config_file_endpoint(config_file: str, modified: int, profile: str | None) -> str | None:
    """The profile's S3 endpoint in the shared config file (its ``services`` section, else ``endpoint_url``)."""
    import botocore.session
    from botocore.configprovider import ConfiguredEndpointProvider
    from botocore.exceptions import BotoCoreError

    try:
        session = botocore.session.Session(profile=profile)
        provider = ConfiguredEndpointProvider(session.full_config, session.get_scoped_config(), "s3", environ={})
        return provider.provide()
    except BotoCoreError:  # a missing profile: the credential lookup reports it, naming the profile
        return None


def _addressing(bucket: str, endpoint_url: str | None, region: str) -> tuple[str, str, str]:
    """(origin, Host header, path before the object key) of the bucket's objects."""
    if endpoint_url:  # S3-compatible servers: path-style
        parts = urlsplit(endpoint_url)
        scheme = parts.scheme or "http"
        host = parts.netloc.rpartition("@")[2]
        host = host.removesuffix({"http": ":80", "https": ":443"}.get(scheme, ":"))
        return f"{scheme}://{host}", host, f"{parts.path.rstrip('/')}/{bucket}/"
    if "." in bucket:  # a dotted name would not match the certificate of *.s3.<region>.amazonaws.com
        host = f"s3.{region}.amazonaws.com"
        return f"https://{host}", host, f"/{bucket}/"
    host = f"{bucket}.s3.{region}.amazonaws.com"
    return f"https://{host}", host, "/"


# -- aiobotocore -------------------------------------------------------------------------------------

_loader: Loader | None = None
_loader_lock = threading.Lock()


def _shared_loader() -> Loader:
    """One botocore data loader for every client: parsing S3's service model once saves ~0.1 s per client."""
    global _loader
    with _loader_lock:
        if _loader is None:
            _loader = create_loader()
        return _loader


_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})


class _RefuseRedirects:
    """An aiohttp session whose requests never follow a redirect (the rest passes through)."""

    def __init__(self, session: aiohttp.ClientSession) -> None:
        self._session = session

    async def request(self, *args: Any, **kwargs: Any) -> aiohttp.ClientResponse:
        response = await self._session.request(*args, **kwargs, allow_redirects=False)
        if response.status in _REDIRECT_STATUSES and "x-amz-bucket-region" not in response.headers:
            # botocore would ask HeadBucket for the region, get redirected again, and recurse.
            response.release()
            raise RedirectNotFollowedError(f"HTTP {response.status} {response.reason or ''}: a redirect, not followed")
        return response

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)


class _RedirectRefusingSession(AIOHTTPSession):
    """aiobotocore's HTTP session, refusing redirects as asyncarr's own object requests do.

    aiobotocore lets aiohttp follow redirects, which drops ``Authorization`` on another origin
    but would carry ``X-Amz-Security-Token`` (a session token) there. S3's answer to a request
    for the wrong region (301/307 with ``x-amz-bucket-region``) is left to botocore, which signs
    the request again for that region and sends it to the bucket's endpoint, never to Location.
    """

    # A private hook of aiobotocore's; tests/test_untrusted_stores.py fails if it stops being called.
    async def _get_session(self, proxy_url: Any) -> Any:
        return _RefuseRedirects(await super()._get_session(proxy_url))


class S3Store(BucketStore):
    """Objects under ``prefix`` in an S3 bucket; key ``a/b`` is the object ``prefix/a/b``.

    ``anon=True`` sends unsigned requests (public data, no credentials needed or looked
    for); otherwise ``key``/``secret``/``token``, a ``profile``, or botocore's default chain.
    ``endpoint_url`` reaches S3-compatible servers (path-style addressing); without it, as
    botocore does, ``AWS_ENDPOINT_URL_S3``, then ``AWS_ENDPOINT_URL``, then the shared config
    file's endpoint; without any, requests go to ``https://{bucket}.s3.{region}.amazonaws.com``.
    ``region`` defaults to ``AWS_DEFAULT_REGION``, then ``AWS_REGION``, then the profile's,
    then us-east-1, and follows S3 when it names the bucket's region. ``client_kwargs`` may hold ``endpoint_url``,
    ``region_name``, ``aws_access_key_id``, ``aws_secret_access_key``,
    ``aws_session_token`` and ``verify`` (False, or a CA bundle path).
    """

    _service = "S3"
    _scheme = "s3"

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
        super().__init__(bucket, prefix, read_only=read_only)
        extra = dict(client_kwargs or {})
        unknown = sorted(set(extra) - set(_CLIENT_KWARGS) - {"verify"})
        if unknown:
            raise TypeError(
                f"S3Store: unknown client_kwargs {', '.join(unknown)}; "
                f"it accepts {', '.join([*_CLIENT_KWARGS, 'verify'])}"
            )
        options = {"region": region, "endpoint_url": endpoint_url, "key": key, "secret": secret, "token": token}
        for name, option in _CLIENT_KWARGS.items():
            if name in extra:
                value = extra.pop(name)  # popped even when the option is given: no secret stays behind
                options[option] = options[option] or value
        region, endpoint_url, key, secret, token = options.values()
        if anon and (key or secret or token or profile):
            raise ValueError("S3Store: anon=True sends unsigned requests; do not also pass key/secret/token/profile")
        if bool(key) != bool(secret):
            raise ValueError("S3Store: pass both key and secret (or neither, to use the profile or environment)")
        self._anon = bool(anon)
        # Resolved here, once: every request (aiohttp's and aiobotocore's) goes to this endpoint and
        # region, and a pickle carries them to workers whose environment may say something else.
        self._region = region or _default_region()
        if endpoint_url:
            check_endpoint_url(endpoint_url, "endpoint_url")
        self._endpoint_url = endpoint_url or _configured_endpoint(profile)
        if self._endpoint_url and not endpoint_url:
            check_endpoint_url(self._endpoint_url, "the S3 endpoint configured in the environment or profile")
        self._credentials = _Credentials(key, secret, token)
        self._profile = profile
        self._client_kwargs = extra  # at most {"verify": ...}
        # The session, aiobotocore client and credentials, shared by every store of this bucket and
        # configuration; shared_clients keeps only a keyed digest of it, never the secrets.
        identity = tuple(
            (name, dataclasses.astuple(value) if isinstance(value, _Credentials) else value)
            for name, value in self._client_configuration().items()
        )
        self._clients = shared_clients(("S3", *identity), "S3", f"s3://{bucket}", _log)
        self._signer = Signer("s3")
        self._credential_source: Any = None  # botocore's (possibly refreshable) credentials, found once
        self._bucket_region = self._region or "us-east-1"
        self._address = (self._bucket_region, _addressing(self._bucket, self._endpoint_url, self._bucket_region))

    @classmethod
    def from_url(cls, url: str, *, read_only: bool = False, **storage_options: Any) -> S3Store:
        """Open ``s3://bucket/prefix`` with storage options (anon, region, endpoint_url, key, ...)."""
        check_storage_options(url, storage_options, _OPTIONS, "S3")
        bucket, prefix = split_bucket_url(url, ("s3",), "an S3 URL")
        return cls(bucket, prefix, read_only=read_only, **storage_options)

    @property
    def anon(self) -> bool:
        """Whether requests are sent unsigned (anonymous access to public data)."""
        return self._anon

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

    def _client_configuration(self) -> dict[str, Any]:
        """Everything the clients depend on: stores that agree on it share clients, and pickles carry it."""
        return {
            "bucket": self._bucket,
            "anon": self._anon,
            "region": self._region,
            "endpoint_url": self._endpoint_url,
            "credentials": self._credentials,
            "profile": self._profile,
            "client_kwargs": tuple(sorted(self._client_kwargs.items())),
        }

    def __getstate__(self) -> dict[str, Any]:
        return {"prefix": self._root, "read_only": self.read_only, **self._client_configuration()}

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        credentials = state.pop("credentials")
        state["client_kwargs"] = dict(state["client_kwargs"])
        self.__init__(  # type: ignore[misc]
            **state, key=credentials.key, secret=credentials.secret, token=credentials.token
        )

    # -- client lifecycle --------------------------------------------------------------------

    async def _open_session(self, closing: contextlib.AsyncExitStack) -> aiohttp.ClientSession:
        """A fresh aiohttp session for this event loop's object requests."""
        from .. import __version__

        verify = self._client_kwargs.get("verify", True)
        context: ssl.SSLContext | bool = ssl.create_default_context(cafile=verify) if isinstance(verify, str) else True
        session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=max(config.get("concurrency"), 10), ssl=context if verify else False),
            # call_with_retries bounds each attempt; opening a connection has a shorter bound of its own.
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=config.get("connect_timeout")),
            auto_decompress=False,  # an object stored with Content-Encoding: gzip is read as stored
            headers={"User-Agent": f"asyncarr/{__version__}", "Accept-Encoding": "identity"},
        )
        # aiohttp resends an idempotent request once when a reused connection drops; call_with_retries
        # is the only retry loop, so that every attempt is counted against config.retries.
        session._retry_connection = False
        closing.push_async_callback(session.close)
        return session

    async def _find_credentials(self) -> tuple[Any, str | None]:
        """botocore's credential chain (environment, profile, config files, ...) and the profile's region."""
        session = AioSession(profile=self._profile)
        source = await session.get_credentials()
        if source is None:
            raise NoCredentialsError()
        return source, session.get_config_variable("region")

    async def _open_client(self, closing: contextlib.AsyncExitStack) -> Any:
        """A fresh aiobotocore client for the running event loop (listing, batch deletes)."""
        settings = config.current()
        options: dict[str, Any] = {
            "max_pool_connections": max(settings.concurrency, 10),
            "connect_timeout": settings.connect_timeout,
            "read_timeout": settings.timeout,
            # asyncarr's call_with_retries is the only retry loop: one attempt per botocore call.
            "retries": {"total_max_attempts": 1, "mode": "standard"},
            # The endpoint was resolved once, in __init__: botocore must not find another of its own.
            "ignore_configured_endpoint_urls": True,
        }
        if self._anon:
            options["signature_version"] = UNSIGNED
        if self._endpoint_url:
            # S3-compatible servers want path-style URLs, and many reject botocore's default
            # aws-chunked checksum uploads.
            options["s3"] = {"addressing_style": "path"}
            options["request_checksum_calculation"] = "when_required"
            options["response_checksum_validation"] = "when_required"
        options["http_session_cls"] = _RedirectRefusingSession
        arguments: dict[str, Any] = {"config": AioConfig(**options), "region_name": self._bucket_region}
        if "verify" in self._client_kwargs:
            arguments["verify"] = self._client_kwargs["verify"]
        if self._endpoint_url:
            arguments["endpoint_url"] = self._endpoint_url
        if not self._anon:
            arguments.update(self._credentials.client_arguments())
        session = AioSession(profile=self._profile)
        session.register_component("data_loader", _shared_loader())
        # Listings are read for their keys alone, so LastModified stays the text S3 sent: botocore's
        # dateutil parse of it was most of a listing's client CPU (15 -> 6 ms for 257 keys on moto).
        session.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=_unparsed_timestamp)
        return await closing.enter_async_context(session.create_client("s3", **arguments))

    async def close(self) -> None:
        """Close this event loop's sessions; those of other running loops are closed on their loops."""
        await self._clients.close()

    # -- the Store interface -----------------------------------------------------------------

    async def get(self, key: str, byte_range: ByteRange | None = None) -> bytes | None:
        """Return the object at ``key`` (or the requested range of it), or None if there is none."""
        object_key = self._object_name(key)
        if byte_range is not None and (byte_range.length == 0 or byte_range.suffix == 0):
            return b"" if await self.exists(key) else None  # HTTP cannot ask for zero bytes
        range_header = None if byte_range is None else _range_header(byte_range)
        headers = None if range_header is None else {"Range": range_header}

        async def attempt() -> bytes | None:
            status, answer, data = await self._exchange("GET", object_key, headers)
            if status in (200, 206):
                _check_length(answer, data)
                if byte_range is None or range_header is None:
                    return data
                if status == 206:
                    return _cut_partial(answer.get("Content-Range", ""), data, byte_range, self._bucket)
                return byte_range.apply(data)  # the server ignored the Range header and sent everything
            if status == 416 and range_header is not None:
                return b""  # the range starts past the end, as LocalStore and Python slicing say
            return self._missing_or_raise(status, answer, data)

        return await self._retrying(attempt, key, "get", "get" if byte_range is None else "get_range")

    def prepare_upload(self, value: bytes) -> HashedBody:
        """``value`` with the SHA-256 its PUT signs, hashed on the codec thread that encoded it."""
        return HashedBody(value)

    async def set(self, key: str, value: bytes | HashedBody) -> None:
        """Store ``value`` (bytes, or a `HashedBody` from `prepare_upload`) as the object at ``key``."""
        self._check_writable()
        object_key = self._object_name(key)
        # The SHA-256 of the body, not UNSIGNED-PAYLOAD: S3 checks it (a body damaged or altered on
        # the way is refused: XAmzContentSHA256Mismatch), and S3-compatible servers accept it over
        # plain HTTP as well as HTTPS; over HTTP a checksum such as CRC32C could be forged to match.
        # moto checks no body digest at all, so tests/test_s3_write_integrity.py checks what is sent.
        # Array writes hash each chunk on its codec thread (`prepare_upload`): here, on the event
        # loop, it cost 25 ms of loop time for W3's 52 MB, time a service's other requests wait for.
        hashed = value if isinstance(value, HashedBody) else HashedBody(value)
        body, payload_hash = hashed.body, hashed.sha256

        async def attempt() -> None:
            status, answer, data = await self._exchange("PUT", object_key, body=body, payload_hash=payload_hash)
            if not 200 <= status < 300:
                raise S3ResponseError.from_answer(status, answer, data, self._bucket)

        await self._retrying(attempt, key, "put", "set", sent=len(body))

    async def delete(self, key: str) -> None:
        """Delete the object at ``key``; a missing object is not an error."""
        self._check_writable()
        object_key = self._object_name(key)

        async def attempt() -> None:
            status, answer, data = await self._exchange("DELETE", object_key)
            if not 200 <= status < 300:
                self._missing_or_raise(status, answer, data)

        await self._retrying(attempt, key, "delete", "delete")

    async def delete_many(self, keys: Iterable[str]) -> None:
        """Delete many objects with DeleteObjects, 1000 per request; missing keys are ignored."""
        self._check_writable()
        await self._delete_objects([self._object_name(key) for key in keys], "")

    async def exists(self, key: str) -> bool:
        """Whether an object is stored at ``key`` (a HEAD request)."""
        return await self._head(key) is not None

    async def getsize(self, key: str) -> int | None:
        """Size of the object at ``key`` from a HEAD request, or None if missing."""
        return await self._head(key)

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        """Yield the names of the objects and 'directories' directly inside ``prefix``."""
        start = len(self._root) + len(_normalize_prefix(prefix))
        async for names, prefixes in self._list_pages(_normalize_prefix(prefix), delimiter="/"):
            for common in prefixes:
                yield common[start:-1]
            for name in names:
                child = name[start:]
                if child:  # '' is the folder marker of ``prefix`` itself
                    yield child

    async def delete_listed(self, prefix: str, names: list[str]) -> None:
        """Delete the objects of the keys ``names`` below ``prefix`` in batched DeleteObjects requests."""
        self._check_writable()
        await self._delete_objects([self._root + name for name in names], _normalize_prefix(prefix).rstrip("/"))

    # -- object requests: aiohttp and sigv4 ---------------------------------------------------------

    def _classify_failure(self, exc: BaseException) -> Failure:
        """S3's answers and aiohttp's errors as retry kinds (`asyncarr.stores.s3_errors.classify`)."""
        return classify(exc)

    def _denied_hint(self) -> str:
        """Credentials for a private bucket; for a public one, that it may be read anonymously."""
        return _PRIVATE_HINT if self._anon else _PUBLIC_HINT

    async def _exchange(
        self,
        method: str,
        object_key: str,
        headers: Mapping[str, str] | None = None,
        *,
        body: bytes | bytearray | None = None,
        payload_hash: str = UNSIGNED_PAYLOAD,
    ) -> tuple[int, Any, bytes]:
        """Send one request for ``object_key`` and read the whole answer: status, headers, body."""
        session = await self._clients.get("http session", self._open_session)
        credentials = await self._current_credentials()
        for resend in (False, True):
            region = self._bucket_region
            if self._address[0] != region:
                self._address = (region, _addressing(self._bucket, self._endpoint_url, region))
            origin, host, base = self._address[1]
            path = canonical_uri(base + object_key)
            request_headers = {"host": host}
            if credentials is not None:
                access_key, secret_key, token = credentials
                request_headers = self._signer.sign(
                    method,
                    path,
                    request_headers,
                    access_key=access_key,
                    secret_key=secret_key,
                    token=token,
                    region=region,
                    payload_hash=payload_hash,
                )
            if headers:
                request_headers.update(headers)
            url = URL(origin + path, encoded=True)
            # A large body goes in 64 KiB pieces, each waiting for the socket: written whole, what the
            # socket cannot take at once is copied into the transport's buffer, for every request in flight.
            payload = io.BytesIO(body) if body is not None and len(body) > _STREAMED_BODY else body
            async with session.request(method, url, headers=request_headers, data=payload, allow_redirects=False) as r:
                status, answer, data = r.status, r.headers, await r.read()
            found = answer.get("x-amz-bucket-region")
            if resend or status not in REGION_REDIRECTS or not found or found == region:
                break
            if not _REGION_NAME.fullmatch(found):
                break  # the region becomes part of a host name: nothing but a region name may
            _log.debug("S3 says the bucket of %s is in %s, not %s", self._location, found, region)
            self._bucket_region = found  # and send the request again (once), signed for that region
        return status, answer, data

    async def _current_credentials(self) -> tuple[str, str, str | None] | None:
        """(access key, secret key, session token) to sign with now, or None for unsigned requests."""
        if self._anon:
            return None
        explicit = self._credentials
        if explicit.key and explicit.secret:
            return explicit.key, explicit.secret, explicit.token
        source = self._credential_source
        if source is None:
            source, profile_region = await self._clients.get("credentials", lambda _: self._find_credentials())
            if not self._region and self._bucket_region == "us-east-1":
                self._bucket_region = profile_region or "us-east-1"
            self._credential_source = source
        frozen = await source.get_frozen_credentials()  # refreshable credentials renew themselves here
        return frozen.access_key, frozen.secret_key, frozen.token

    async def _head(self, key: str) -> int | None:
        """The size of the object at ``key``, or None if there is none."""
        object_key = self._object_name(key)

        async def attempt() -> int | None:
            status, answer, data = await self._exchange("HEAD", object_key)
            if status != 200:
                return self._missing_or_raise(status, answer, data)
            size = answer.get("Content-Length", "")
            if not size.isdigit():
                raise S3ResponseError(status, "", "the answer to HEAD has no Content-Length", self._bucket)
            return int(size)

        return await self._retrying(attempt, key, "head", "head")

    def _missing_or_raise(self, status: int, answer: Any, data: bytes) -> None:
        """None for S3's answer that there is no such key, else raise the error it describes."""
        error = S3ResponseError.from_answer(status, answer, data, self._bucket)
        if status == 404 and error.missing:
            return None
        raise error

    # -- other requests: aiobotocore -----------------------------------------------------------------

    async def _request(self, operation: str, **arguments: Any) -> Any:
        """Call one S3 operation on this bucket; S3's error answers become ``S3ResponseError``."""
        client = await self._clients.get("aiobotocore client", self._open_client)
        try:
            return await getattr(client, operation)(Bucket=self._bucket, **arguments)
        except ClientError as exc:
            raise S3ResponseError.from_client_error(exc, self._bucket) from exc

    async def _list_pages(self, below: str, delimiter: str | None = None) -> AsyncIterator[tuple[list[str], list[str]]]:
        """Yield the object names and common prefixes of each ListObjectsV2 page below the root and ``below``."""
        arguments: dict[str, Any] = {"Prefix": self._root + below}
        if delimiter:
            arguments["Delimiter"] = delimiter
        while True:
            page = await self._retrying(
                functools.partial(self._request, "list_objects_v2", **arguments), below.rstrip("/"), "list", "list"
            )
            yield (
                [entry["Key"] for entry in page.get("Contents", ())],
                [common["Prefix"] for common in page.get("CommonPrefixes", ())],
            )
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
                    raise S3ResponseError(None, first.get("Code", ""), first.get("Message", ""), self._bucket)

            async with self.limiter:
                await self._retrying(attempt, url_key, f"delete of {len(batch)} keys", "delete")

        batches = [object_keys[i : i + _DELETE_BATCH] for i in range(0, len(object_keys), _DELETE_BATCH)]
        await asyncio.gather(*(delete_batch(batch) for batch in batches))


def _unparsed_timestamp(text: str) -> str:
    """A timestamp in an aiobotocore answer, kept as the text S3 sent (nothing here reads one)."""
    return text


def _check_length(answer: Any, data: bytes) -> None:
    """Raise ShortBodyError if ``data`` is shorter than the answer's Content-Length."""
    announced = answer.get("Content-Length", "")
    if announced.isdigit() and len(data) < int(announced):
        raise ShortBodyError(f"received {len(data)} of {announced} bytes")


_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)")


def _cut_partial(content_range: str, data: bytes, byte_range: ByteRange, bucket: str) -> bytes:
    """The bytes of ``byte_range`` from a 206 answer, after checking its Content-Range covers them."""
    match = _CONTENT_RANGE.fullmatch(content_range.strip())
    if match is None:
        raise S3ResponseError(206, "", f"the partial answer has no valid Content-Range ({content_range!r})", bucket)
    first, last = int(match.group(1)), int(match.group(2))
    if len(data) < last - first + 1:
        raise ShortBodyError(f"received {len(data)} of the {last - first + 1} bytes of Content-Range {content_range}")
    total = match.group(3)
    if total == "*":  # size unknown: a suffix cannot be checked; an offset must be where it starts
        start, stop = (first, last + 1) if byte_range.suffix is not None else (byte_range.offset, last + 1)
        if byte_range.length is not None:
            stop = min(stop, byte_range.offset + byte_range.length)
    else:
        start, stop = byte_range.resolve(int(total))
    if (start, stop) == (first, last + 1) and len(data) == stop - start:
        return data
    if start < first or stop > last + 1:
        raise S3ResponseError(206, "", f"the answer holds bytes {content_range}, not the range asked for", bucket)
    return data[start - first : stop - first]


def _without_userinfo(url: str) -> str:
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()


STORE_SCHEMES["s3"] = S3Store.from_url
