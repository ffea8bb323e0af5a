"""AzureStore: blobs in an Azure Blob Storage container, over azure-storage-blob's asyncio client.

The SDK's ``ContainerClient`` is used directly, not adlfs: adlfs's anonymous mode always builds
``https://`` endpoints (it cannot reach emulators or plain-HTTP endpoints), and its filesystem
layer adds nothing a key/value store needs. Every request goes through `call_with_retries`
and is one HTTP request per attempt: the SDK's retry policy is off (``retry_total=0``), so is
aiohttp's resend on a dropped keep-alive connection, and downloads hand the SDK a wrapper of
the body stream (``cls=``) so that a body which breaks off ends the attempt instead of being
re-requested by the SDK's own hard-coded loop. Azure has no suffix ranges: the last N bytes
cost a HEAD for the size, then a ranged GET; a range from or past the end reads ``b""``.

Credentials (account key, SAS token, connection string, a SAS in ``account_url``) never appear
in a repr or an error: SDK exceptions are cut to status, error code and first line and
scrubbed of every secret the store holds before they are chained. The SDK's request log
(``azure.core.pipeline.policies.http_logging_policy``) redacts query strings itself.
Clients belong to an event loop: one per loop, created on first use, closed by ``close()``,
when the loop shuts down (``asyncio.run``) or at interpreter exit (``clients.py``).
"""

from __future__ import annotations

import contextlib
import enum
import logging
import os
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import aiohttp
from azure.core.exceptions import (
    AzureError,
    ClientAuthenticationError,
    HttpResponseError,
    IncompleteReadError,
    ResourceNotFoundError,
    ServiceRequestError,
    ServiceResponseError,
)
from azure.core.pipeline.transport import AioHttpTransport
from azure.storage.blob.aio import ContainerClient

try:  # what a download hands back; wrapped by _fail_fast_body
    from azure.storage.blob._deserialize import deserialize_blob_stream
except ImportError:  # pragma: no cover - an SDK without it keeps its own re-reads of broken bodies
    deserialize_blob_stream = None

from .. import config
from .base import ByteRange, Store, _normalize_prefix, validate_key
from .buckets import check_storage_options
from .clients import PerLoopClients
from .counting import recorder_of
from .retry import Failure, ShortBodyError, call_with_retries, connect_failure
from .url import STORE_SCHEMES, check_endpoint_url

__all__ = ["STORAGE_OPTIONS", "AzureStore"]

_log = logging.getLogger(__name__)
T = TypeVar("T")

_LIST_PAGE_SIZE = 1000  # Azure allows 5000; smaller pages let the first keys arrive early
_MIN_POOL = 100  # aiohttp's default connection limit; raised to config.concurrency when that is larger
_TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})

# -- options ----------------------------------------------------------------------------------

STORAGE_OPTIONS = ("account_name", "account_key", "sas_token", "connection_string", "account_url", "anon")
"""The ``storage_options`` an ``az://`` or ``abfs://`` URL accepts."""


def _parse_url(url: str) -> tuple[str, str, str | None, str | None]:
    """``(container, prefix, account_name, account_url)`` of ``az://container/prefix`` or
    ``abfs://container@account.dfs.core.windows.net/prefix`` (the last two from the ``@`` form only)."""
    scheme, separator, rest = url.partition("://")
    if not separator or scheme.lower() not in ("az", "abfs"):
        raise ValueError(f"{url!r} is not an az:// or abfs:// URL")
    netloc, _, prefix = rest.partition("/")
    container, at, host = netloc.partition("@")
    if not container:
        raise ValueError(f"{url!r} names no container; write az://container/path")
    account_name = account_url = None
    if at:
        account_name = host.split(".", 1)[0]
        if not account_name:
            raise ValueError(f"{url!r}: expected container@account.dfs.core.windows.net")
        if "." in host:  # the Data Lake endpoint's blob twin serves the same data
            account_url = "https://" + host.replace(".dfs.", ".blob.", 1)
    return container, prefix.strip("/"), account_name, account_url


_ENVIRONMENT = {
    "connection_string": "AZURE_STORAGE_CONNECTION_STRING",
    "account_name": "AZURE_STORAGE_ACCOUNT_NAME",
    "account_key": "AZURE_STORAGE_ACCOUNT_KEY",
    "sas_token": "AZURE_STORAGE_SAS_TOKEN",
}


def _with_environment(options: dict[str, Any]) -> dict[str, Any]:
    """adlfs's ``AZURE_STORAGE_*`` variables fill in what a URL's storage options leave out."""
    env = {name: os.environ[variable] for name, variable in _ENVIRONMENT.items() if os.environ.get(variable)}
    filled, credentials = dict(options), ("connection_string", "account_key", "sas_token", "anon")
    named = any(filled.get(name) for name in ("account_name", "account_url", *credentials))
    if env.get("connection_string") and not named:
        return {**filled, "connection_string": env["connection_string"]}
    if not filled.get("account_name") and not filled.get("connection_string"):
        filled["account_name"] = env.get("account_name")
    secret = next((name for name in ("account_key", "sas_token") if name in env), None)
    if secret and not any(filled.get(name) for name in credentials):
        filled[secret] = env[secret]
    return filled


def _connection_fields(connection_string: str) -> dict[str, str]:
    pairs = (part.partition("=") for part in connection_string.split(";"))
    return {name.strip().lower(): value.strip() for name, _, value in pairs if name.strip()}


def _url_sas(account_url: str | None) -> str:
    """The SAS query an ``account_url`` carries, or ''."""
    query = (account_url or "").partition("?")[2]
    return query if "sig=" in query else ""


def _check_credentials(options: dict[str, Any]) -> None:
    """Reject contradictory credential options (what is missing is reported on first use)."""
    given = [name for name in ("account_key", "sas_token", "credential", "anon") if options[name]]
    if options["connection_string"]:
        extra = given + ["account_url"] * bool(options["account_url"])
        if extra:
            raise ValueError(
                f"connection_string already holds the endpoint and credentials; do not also pass {', '.join(extra)}"
            )
    elif len(given) > 1:
        raise ValueError(f"pass only one of account_key, sas_token, credential and anon (got {', '.join(given)})")
    elif options["account_key"] and not options["account_name"]:
        raise ValueError("account_key needs account_name (the storage account it belongs to)")


_NO_ACCOUNT = (
    "no storage account named: pass account_name (or account_url, or connection_string) in "
    "storage_options, or set AZURE_STORAGE_ACCOUNT_NAME or AZURE_STORAGE_CONNECTION_STRING"
)
_NO_CREDENTIALS = (
    "no Azure credentials given: pass account_key, sas_token or connection_string in storage_options, "
    'or {"anon": True} for a public container (or install azure-identity to use DefaultAzureCredential)'
)


class AzureStore(Store):
    """A container (and a path prefix in it) of Azure Blob Storage; key ``k`` is the blob ``prefix/k``.

    Credentials, one of: ``connection_string``; ``account_key`` (with ``account_name``);
    ``sas_token``; ``credential`` (an azure-identity async credential); ``anon=True`` for public
    containers; none of these: azure-identity's ``DefaultAzureCredential``, if it is installed.
    ``account_url`` points at emulators and sovereign clouds (default
    ``https://{account_name}.blob.core.windows.net``).
    """

    counts_calls = False  # each HTTP attempt is counted by call_with_retries

    def __init__(
        self,
        container: str,
        prefix: str = "",
        *,
        read_only: bool = False,
        account_name: str | None = None,
        account_key: str | None = None,
        sas_token: str | None = None,
        connection_string: str | None = None,
        account_url: str | None = None,
        anon: bool = False,
        credential: Any = None,
    ) -> None:
        super().__init__(read_only=read_only)
        if not container or "/" in container:
            raise ValueError(f"invalid Azure container name {container!r}")
        self.container = container
        self.prefix = prefix.strip("/")
        self._root = _normalize_prefix(self.prefix)  # validates the prefix like a key
        _check_credentials(dict(locals()))
        if account_url:  # a SAS query may follow the endpoint; it is checked as a credential, not here
            check_endpoint_url(account_url.split("?", 1)[0], "account_url")
        self.account_name = account_name
        self.anon = bool(anon)
        self._account_key = account_key
        self._sas_token = sas_token.lstrip("?") if sas_token else None
        self._connection_string = connection_string
        self._account_url = account_url.rstrip("/") if account_url else None
        self._credential = credential
        self._clients = PerLoopClients("Azure", self.location, _log)

    @classmethod
    def from_url(cls, url: str, *, read_only: bool = False, **storage_options: Any) -> AzureStore:
        """Open ``az://container/prefix`` or ``abfs://container@account.dfs.core.windows.net/prefix``.

        Options not given come from adlfs's environment variables ``AZURE_STORAGE_CONNECTION_STRING``,
        ``AZURE_STORAGE_ACCOUNT_NAME``, ``AZURE_STORAGE_ACCOUNT_KEY`` and ``AZURE_STORAGE_SAS_TOKEN``.
        """
        check_storage_options(url, storage_options, STORAGE_OPTIONS, "Azure")
        container, prefix, account_name, account_url = _parse_url(url)
        options = dict(storage_options)
        if account_name and options.get("account_name", account_name) != account_name:
            raise ValueError(f"{url!r} names the account {account_name!r} but account_name={options['account_name']!r}")
        if account_name and not options.get("connection_string"):
            options.setdefault("account_name", account_name)
            if account_url:
                options.setdefault("account_url", account_url)
        return cls(container, prefix, read_only=read_only, **_with_environment(options))

    @property
    def location(self) -> str:
        """``az://container/prefix``."""
        return f"az://{self.container}/{self.prefix}".rstrip("/")

    def _anonymous(self) -> bool:
        if self._connection_string:
            return not {"accountkey", "sharedaccesssignature"} & set(_connection_fields(self._connection_string))
        return self.anon

    def _secrets(self) -> list[str]:
        fields = _connection_fields(self._connection_string or "")
        secrets = [self._account_key, self._sas_token, self._connection_string, _url_sas(self._account_url)]
        return [s for s in (*secrets, fields.get("accountkey"), fields.get("sharedaccesssignature")) if s]

    # -- client lifecycle -------------------------------------------------------------------

    async def _client(self) -> ContainerClient:
        """This event loop's client, created on first use."""
        return await self._clients.get("container client", self._open_client)

    async def _open_client(self, closing: contextlib.AsyncExitStack) -> ContainerClient:
        """A ContainerClient over a session of its own, for the running event loop."""
        if not (self._account_url or self.account_name or self._connection_string):
            raise ValueError(_NO_ACCOUNT)
        credential = self._credential
        if self._account_key:
            credential = {"account_name": self.account_name, "account_key": self._account_key}
        elif self._sas_token:
            credential = self._sas_token
        elif not (credential or self.anon or self._connection_string or _url_sas(self._account_url)):
            try:
                from azure.identity.aio import DefaultAzureCredential
            except ImportError:
                raise ValueError(_NO_CREDENTIALS) from None
            credential = DefaultAzureCredential()
            closing.push_async_callback(credential.close)  # after the client's, which is pushed later
        session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=max(_MIN_POOL, config.get("concurrency"))),
            cookie_jar=aiohttp.DummyCookieJar(),
            auto_decompress=False,
            trust_env=True,
        )
        session._retry_connection = False  # aiohttp would resend once on a dropped keep-alive connection
        # Blob Storage never redirects: refusing to follow one keeps a redirect from sending a signed or
        # bearer-authorized request elsewhere (the SDK signs each hop again, after its redirect policy).
        settings = config.current()
        transport = AioHttpTransport(
            session=session,
            session_owner=True,
            connection_timeout=settings.connect_timeout,  # opening a connection has a shorter bound
            read_timeout=settings.timeout,  # call_with_retries bounds each attempt as a whole
        )
        options = {
            "transport": transport,
            "retry_total": 0,
            "permit_redirects": False,
        }
        if self._connection_string:
            client = ContainerClient.from_connection_string(self._connection_string, self.container, **options)
        else:
            account_url = self._account_url or f"https://{self.account_name}.blob.core.windows.net"
            client = ContainerClient(account_url, self.container, credential=credential, **options)
        closing.push_async_callback(client.close)
        return client

    async def close(self) -> None:
        """Close this event loop's client; clients of other running loops are closed on their loops."""
        await self._clients.close()

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state.pop("_clients", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._clients = PerLoopClients("Azure", self.location, _log)

    # -- the Store interface ------------------------------------------------------------------

    async def get(self, key: str, byte_range: ByteRange | None = None) -> bytes | None:
        """The blob's bytes (or a range of them), or None if the blob does not exist."""
        name = self._root + validate_key(key)
        if byte_range is None:
            return await self._request(key, "read", lambda client: _download(client, name, None, None), op="get")
        if byte_range.suffix is not None or byte_range.length == 0:
            size = await self._size(key)
            if size is None:
                return None
            start, stop = byte_range.resolve(size)
            if start == stop:
                return b""
            offset, length = start, stop - start
        else:
            offset, length = byte_range.offset, byte_range.length
        read = lambda client: _download(client, name, offset, length)  # noqa: E731
        return await self._request(key, "read", read, past_end=b"", op="get_range")

    async def set(self, key: str, value: bytes) -> None:
        """Upload ``value`` as the blob ``key``, replacing any previous one."""
        self._check_writable()
        name = self._root + validate_key(key)
        data = value if isinstance(value, bytes) else bytes(value)
        upload = lambda client: client.upload_blob(name, data, overwrite=True)  # noqa: E731
        await self._request(key, "write", upload, op="set", sent=len(data))

    async def delete(self, key: str) -> None:
        """Delete the blob ``key`` (and its snapshots); a missing blob is fine."""
        self._check_writable()
        name = self._root + validate_key(key)
        remove = lambda client: client.delete_blob(name, delete_snapshots="include")  # noqa: E731
        await self._request(key, "delete", remove, op="delete")

    async def exists(self, key: str) -> bool:
        """Whether the blob ``key`` exists."""
        return await self._size(validate_key(key)) is not None

    async def getsize(self, key: str) -> int | None:
        """Size in bytes of the blob ``key``, or None if missing (one HEAD request)."""
        return await self._size(validate_key(key))

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        """Yield every key below ``prefix``, fetched a page of up to 1000 at a time."""
        start = self._root + _normalize_prefix(prefix)
        async for item in self._list(prefix, lambda c: c.list_blobs(name_starts_with=start or None, **_PAGED)):
            key = item.name[len(self._root) :]
            if key and not key.endswith("/"):  # "dir/" marker blobs made by other tools are not keys
                yield key

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        """Yield the names of the immediate children of ``prefix`` (blobs and 'directories')."""
        start = self._root + _normalize_prefix(prefix)
        seen: set[str] = set()
        walk = lambda c: c.walk_blobs(name_starts_with=start or None, delimiter="/", **_PAGED)  # noqa: E731
        async for item in self._list(prefix, walk):
            child = item.name[len(start) :].rstrip("/")
            if child and child not in seen:
                seen.add(child)
                yield child

    # -- requests -------------------------------------------------------------------------------

    async def _size(self, key: str) -> int | None:
        async def properties(client: ContainerClient) -> int:
            return (await client.get_blob_client(self._root + key).get_blob_properties()).size

        return await self._request(key, "read", properties, op="head")

    async def _request(
        self,
        key: str,
        action: str,
        operation: Callable[[ContainerClient], Awaitable[T]],
        *,
        missing: Any = None,
        past_end: Any = None,
        op: str,
        sent: int = 0,
    ) -> Any:
        """Run one request with retries; a missing blob gives ``missing``, a range past its end ``past_end``."""
        anonymous, secrets = self._anonymous(), self._secrets()

        async def attempt() -> Any:
            client = await self._client()
            try:
                return await operation(client)
            except AzureError as exc:
                outcome = _classify(exc, anonymous)
                if outcome is _Absent.BLOB:
                    return missing
                if outcome is _Absent.RANGE:
                    return past_end
                _tidy(exc, secrets, self.container)
                raise

        return await call_with_retries(
            attempt,
            url=self.key_url(key),
            classify=lambda exc: _failure(exc, anonymous),
            action=action,
            denied_hint=_DENIED_HINTS[anonymous],
            op=op,
            metrics=recorder_of(self),
            limiter=self.limiter,
            sent=sent,
        )

    async def _list(self, prefix: str, pager: Callable[[ContainerClient], Any]) -> AsyncIterator[Any]:
        """The items of a listing, page by page; each page is retried on its own."""
        token: str | None = None
        while True:

            async def page(client: ContainerClient, token: str | None = token) -> tuple[list[Any], str | None]:
                pages = pager(client).by_page(continuation_token=token)
                try:
                    items = [item async for item in await pages.__anext__()]
                except StopAsyncIteration:
                    return [], None
                return items, pages.continuation_token

            items, token = await self._request(prefix.strip("/"), "list", page, missing=([], None), op="list")
            for item in items:
                yield item
            if not token:
                return


_PAGED = {"results_per_page": _LIST_PAGE_SIZE}


async def _download(client: ContainerClient, name: str, offset: int | None, length: int | None) -> bytes:
    body = {"cls": _fail_fast_body} if deserialize_blob_stream is not None else {}
    downloader = await client.download_blob(name, offset=offset, length=length, max_concurrency=1, **body)
    data = await downloader.readall()
    if len(data) != downloader.size:
        raise ShortBodyError(f"got {len(data)} of {downloader.size} bytes")
    return data


def _fail_fast_body(response: Any, stream: Any, headers: Any) -> tuple[Any, _FailFastBody]:
    location_mode, stream = deserialize_blob_stream(response, stream, headers)
    return location_mode, _FailFastBody(stream)


class _FailFastBody:
    """The SDK's download stream, except that a body which breaks off raises ShortBodyError.

    The SDK catches its own IncompleteReadError and re-requests (its hidden retry loop); it
    lets ShortBodyError through, so call_with_retries sees, counts and retries the failure.
    """

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def __aiter__(self) -> _FailFastBody:
        return self

    async def __anext__(self) -> bytes:
        try:
            return await self._stream.__anext__()
        except (IncompleteReadError, ServiceResponseError) as exc:
            raise ShortBodyError(f"the response body broke off: {exc}") from exc


# -- error mapping ----------------------------------------------------------------------------

_DENIED_HINTS = {
    True: "Anonymous requests only reach public containers: pass account_key (with account_name), "
    "sas_token or connection_string in storage_options.",
    False: "Check the account key, SAS token or connection string and its permissions; "
    'the container may be public: pass storage_options={"anon": True}.',
}


class _Absent(enum.Enum):
    """Failures that are answers: the blob is not there, or the range starts past its end."""

    BLOB = "blob"
    RANGE = "range"


def _classify(exc: BaseException, anonymous: bool) -> Failure | _Absent:
    """How one failed SDK call counts: an absent blob or range, or a `Failure` kind for the retry loop."""
    status = getattr(exc, "status_code", None)
    code = _error_code(exc)
    if isinstance(exc, ResourceNotFoundError) or status == 404:
        if code == "ContainerNotFound":
            return Failure.FATAL
        if code == "ResourceNotFound" and anonymous:
            return Failure.DENIED  # Azure's answer to anonymous requests for private containers
        return _Absent.BLOB
    if isinstance(exc, ClientAuthenticationError) or status in (401, 403):
        return Failure.DENIED
    if status == 409 and code == "PublicAccessNotPermitted":
        return Failure.DENIED
    if status == 416:
        return _Absent.RANGE
    if status == 429 or (status == 503 and code == "ServerBusy"):
        return Failure.THROTTLED  # Azure's answers when an account or a blob is over its request rate
    if status in _TRANSIENT_STATUS:
        return Failure.TRANSIENT
    if connect_failure(exc):
        return Failure.CONNECT
    transient = (IncompleteReadError, ServiceRequestError, ServiceResponseError, aiohttp.ClientError, OSError)
    if any(isinstance(cause, transient) for cause in _chain(exc)):  # OSError covers timeouts and resets
        return Failure.TRANSIENT
    return Failure.FATAL


def _failure(exc: BaseException, anonymous: bool) -> Failure:
    outcome = _classify(exc, anonymous)
    return outcome if isinstance(outcome, Failure) else Failure.FATAL


def _error_code(exc: BaseException) -> str:
    """Azure's error code (``BlobNotFound``), whether the SDK left it a string or a StorageErrorCode."""
    code = getattr(exc, "error_code", None) or ""
    return str(getattr(code, "value", code))


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc``, its causes, contexts and the SDK's ``inner_exception``s, each once."""
    found: list[BaseException] = []
    pending: list[BaseException | None] = [exc]
    while pending:
        current = pending.pop()
        if current is None or any(current is seen for seen in found):
            continue
        found.append(current)
        pending += [current.__cause__, current.__context__, getattr(current, "inner_exception", None)]
    return found


_SAS_SIGNATURE = re.compile(r"(sig=)[^&\s'\"]+", re.IGNORECASE)


def _scrub(text: str, secrets: list[str]) -> str:
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, "***")
    return _SAS_SIGNATURE.sub(r"\1***", text)


def _tidy(exc: AzureError, secrets: list[str], container: str) -> None:
    """Cut the SDK's exception (and those it chains) down to one line without any secret, in place.

    The SDK's messages carry the XML error body, which for a refused signature can quote the
    request's SAS signature; ``HttpResponseError.__str__`` re-reads the body from the response,
    so that is dropped too (status, reason and error code stay as attributes).
    """
    for item in _chain(exc):
        for link in ("__cause__", "__context__", "inner_exception", "exc_value"):
            linked = getattr(item, link, None)  # aiohttp's exceptions format their own text: unchain leaks
            if isinstance(linked, BaseException) and not isinstance(linked, AzureError) and linked is not item:
                if _scrub(str(linked), secrets) != str(linked):
                    setattr(item, link, None)
        if isinstance(item, HttpResponseError) and item.status_code is not None:
            code = _error_code(item)
            text = item.message.strip().splitlines()[0] if item.message and item.message.strip() else ""
            if text.startswith("Operation returned an invalid status") or not text:
                text = item.reason or ""  # HEAD requests have no body to quote
            if code == "ContainerNotFound":
                text = f"the container {container!r} does not exist"
            text = f"{item.status_code}{' ' + code if code else ''}: {text}"
            item.response = None
        else:
            text = str(item)
        item.args = (_scrub(text, secrets),)
        if isinstance(item, AzureError):
            item.message = item.exc_msg = item.args[0]


STORE_SCHEMES["az"] = AzureStore.from_url
STORE_SCHEMES["abfs"] = AzureStore.from_url
