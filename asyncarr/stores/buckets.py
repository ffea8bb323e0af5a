"""What the cloud drivers share: their URLs and storage options, and keys as object names under a prefix.

`BucketStore` sits between `Store` and the S3 and GCS drivers; the Azure driver, whose URLs
have forms of their own, shares only `check_storage_options`.
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, ClassVar, TypeVar

from .base import Store, _normalize_prefix, validate_key
from .counting import recorder_of
from .retry import Failure, call_with_retries

_T = TypeVar("_T")

__all__ = ["BucketStore", "check_storage_options", "split_bucket_url"]


def check_storage_options(url: str, storage_options: Mapping[str, Any], accepted: Sequence[str], service: str) -> None:
    """Raise TypeError naming the ``storage_options`` of ``url`` that ``service``'s stores do not accept."""
    unknown = sorted(set(storage_options) - set(accepted))
    if unknown:
        raise TypeError(
            f"unknown storage_options for {url!r}: {', '.join(unknown)}; {service} stores accept {', '.join(accepted)}"
        )


def split_bucket_url(url: str, schemes: tuple[str, ...], kind: str) -> tuple[str, str]:
    """``(bucket, prefix)`` of ``scheme://bucket/prefix``; else ValueError saying ``url`` is not ``kind``."""
    scheme, separator, rest = url.partition("://")
    bucket, _, prefix = rest.partition("/")
    if scheme.lower() not in schemes or not separator or not bucket:
        example = f"{schemes[0]}://bucket"
        raise ValueError(f"{url!r} is not {kind}; write {example} or {example}/prefix")
    return bucket, prefix


class BucketStore(Store):
    """Objects under ``prefix`` in one bucket of an object store; key ``a/b`` is the object ``prefix/a/b``.

    A subclass names its service and URL scheme and lists object names page by page
    (`_list_pages`, full names, as the service sends them); keys become object names
    through `_object_name`.
    """

    counts_calls = False  # each HTTP attempt is counted by call_with_retries
    _service: ClassVar[str]
    """The service's name in messages: ``"S3"``."""
    _scheme: ClassVar[str]
    """The URL scheme of the store's location: ``"s3"``."""

    def __init__(self, bucket: str, prefix: str = "", *, read_only: bool = False) -> None:
        super().__init__(read_only=read_only)
        if not isinstance(bucket, str) or not bucket or "/" in bucket:
            raise ValueError(f"{self._service} bucket names are non-empty and contain no '/', got {bucket!r}")
        self._bucket = bucket
        self._root = _normalize_prefix(prefix)  # '' or the object-name prefix with its trailing '/'
        where = f"{self._scheme}://{bucket}"
        self._location = f"{where}/{self._root[:-1]}" if self._root else where

    @property
    def bucket(self) -> str:
        """The bucket holding the keys."""
        return self._bucket

    @property
    def prefix(self) -> str:
        """The object-name prefix of the store root ('' for the whole bucket), without a trailing '/'."""
        return self._root[:-1]

    @property
    def location(self) -> str:
        """``scheme://bucket`` or ``scheme://bucket/prefix``."""
        return self._location

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        """Yield every key below ``prefix`` (every page of the listing, streamed)."""
        start = len(self._root)
        async for names, _ in self._list_pages(_normalize_prefix(prefix)):
            for name in names:
                if not name.endswith("/"):  # folder markers made by other tools are not keys
                    yield name[start:]

    @abc.abstractmethod
    def _classify_failure(self, exc: BaseException) -> Failure:
        """How the driver's retry policy counts one failed attempt."""

    @abc.abstractmethod
    def _denied_hint(self) -> str:
        """What to say after "access denied": how to pass credentials, or to read anonymously."""

    def _retrying(
        self, attempt: Callable[[], Awaitable[_T]], key: str, action: str, op: str, *, sent: int = 0
    ) -> Awaitable[_T]:
        """``attempt`` run under the network policy: retried, bounded, counted and limited, errors naming ``key``."""
        return call_with_retries(
            attempt,
            url=self.key_url(key),
            classify=self._classify_failure,
            action=action,
            denied_hint=self._denied_hint(),
            op=op,
            metrics=recorder_of(self),
            limiter=self.limiter,
            sent=sent,
        )

    def _object_name(self, key: str) -> str:
        """The name of the object holding ``key``."""
        return self._root + validate_key(key)

    async def names_to_delete(self, prefix: str) -> list[str]:
        """The key of every object below ``prefix``, folder markers included: what `delete_prefix` removes."""
        start = len(self._root)
        return [name[start:] for name in await self._object_names_below(_normalize_prefix(prefix))]

    async def delete_prefix(self, prefix: str) -> None:
        """Delete every object below ``prefix`` ('' empties the store root)."""
        self._check_writable()
        await self.delete_listed(prefix, await self.names_to_delete(prefix))

    @abc.abstractmethod
    async def delete_listed(self, prefix: str, names: list[str]) -> None:
        """Delete the objects of the keys ``names`` (as `names_to_delete(prefix)` returned them)."""

    async def _object_names_below(self, below: str) -> list[str]:
        """The names of all objects below ``below`` (a normalized prefix relative to the root)."""
        return [name async for names, _ in self._list_pages(below) for name in names]

    @abc.abstractmethod
    def _list_pages(self, below: str, delimiter: str | None = None) -> AsyncIterator[tuple[list[str], list[str]]]:
        """Yield ``(object names, common prefixes)`` of each listing page below the root and ``below``."""
