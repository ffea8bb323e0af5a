"""zarr's store constructors for blocking scripts: ``import asyncarr.sync as za; za.storage.LocalStore(...)``.

zarr-python 3's names (`LocalStore`, `MemoryStore`, `ZipStore`, `FsspecStore.from_url`) and
zarr 2's (`DirectoryStore`, `NestedDirectoryStore`, `ZipStore`, `LRUStoreCache`,
``default_compressor``), each an asyncarr `Store`, so every asyncarr function takes them. The
difference from `asyncarr.stores` is ``close()``: here it blocks until the store is closed (a
zip file is valid once ``store.close()`` returns), and it still returns an awaitable, so async
code that awaits a store's ``close()`` works unchanged.

``storage.default_compressor`` is what ``compressor="default"`` means for new arrays (zarr 2's
spelling); it reads and writes the setting ``asyncarr.config.get("default_compressor")``.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import re
import shutil
import sys
import tempfile
import types
import zipfile
from collections.abc import Coroutine, Mapping, MutableMapping, Sequence
from typing import Any

import numcodecs
from numcodecs.abc import Codec

from .. import config
from ..metadata._json import dump_json, load_json_object
from ..stores import LocalStore as _LocalStore
from ..stores import MemoryStore as _MemoryStore
from ..stores import Store
from ..stores import ZipStore as _ZipStore
from ..stores import as_store as _as_store
from ..stores import from_url as _from_url
from ..stores.cache import LRUStoreCache as _LRUStoreCache
from ..stores.cache import WrapperStore as _WrapperStore
from ..stores.closing import AlreadyClosed
from ..stores.logged import LoggingStore as _LoggingStore
from ..stores.mapping import MappingStore as _MappingStore
from ..sync_loop import _opened_stores, _run

__all__ = [
    "ABSStore",
    "DirectoryStore",
    "FSStore",
    "FsspecStore",
    "KVStore",
    "LRUStoreCache",
    "LocalStore",
    "LoggingStore",
    "MemoryStore",
    "NestedDirectoryStore",
    "Store",
    "TempStore",
    "WrapperStore",
    "ZipStore",
]


def _close_now(close: Coroutine[Any, Any, None]) -> Coroutine[Any, Any, None]:
    """Close on the facade's loop and return `AlreadyClosed`; inside a running event loop, return ``close`` to await."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        _run(close)
        return AlreadyClosed()
    return close


class LocalStore(_LocalStore):
    """zarr 3's ``LocalStore(root, *, read_only=False)``: a directory; atomic writes, links kept inside."""

    def __init__(self, root: str | os.PathLike[str], *, read_only: bool = False, fsync: bool | None = None) -> None:
        super().__init__(root, read_only=read_only, fsync=fsync)

    def close(self) -> Coroutine[Any, Any, None]:  # type: ignore[override]
        """Nothing to release; returns an awaitable that is already done."""
        return AlreadyClosed()


class MemoryStore(_MemoryStore):
    """zarr 3's ``MemoryStore(store_dict=None, *, read_only=False)``; ``store_dict``'s items seed the store."""

    def __init__(self, store_dict: Mapping[str, Any] | None = None, *, read_only: bool = False) -> None:
        super().__init__(read_only=read_only)
        # The values live in asyncarr's own dict (reachable as memory://NAME and picklable), so the
        # given dict seeds the store rather than becoming it: later writes do not appear in it.
        for key, value in (store_dict or {}).items():
            self._seed(key, value)

    def _seed(self, key: str, value: Any) -> None:
        """Store one seed value (zarr 3's Buffer objects, or anything bytes-like) even when read-only."""
        to_bytes = getattr(value, "to_bytes", None)
        data = to_bytes() if callable(to_bytes) else bytes(value)
        read_only, self.read_only = self.read_only, False
        try:
            self.set_sync(key, data)
        finally:
            self.read_only = read_only

    def close(self) -> Coroutine[Any, Any, None]:  # type: ignore[override]
        """Nothing to release; returns an awaitable that is already done."""
        return AlreadyClosed()


class ZipStore(_ZipStore):
    """zarr's ``ZipStore(path, *, mode="r", read_only=None, ...)``; ``close()`` finishes the zip file."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        mode: str = "r",
        read_only: bool | None = None,
        compression: int = zipfile.ZIP_STORED,
        allowZip64: bool = True,
        dimension_separator: str | None = None,
    ) -> None:
        if compression != zipfile.ZIP_STORED:
            raise ValueError(
                "asyncarr's ZipStore stores members uncompressed (compression=zipfile.ZIP_STORED): chunks are "
                "compressed by the array's codecs already, and stored members can be read by byte range"
            )
        if not allowZip64:
            raise ValueError("asyncarr's ZipStore always allows ZIP64 (files and members over 4 GiB)")
        if dimension_separator not in (None, "."):
            raise ValueError("pass dimension_separator= when creating the array, not to ZipStore")
        if read_only is True:
            mode = "r"
        elif read_only is False and mode == "r":
            mode = "a"
        super().__init__(path, mode)

    def __setstate__(self, state: dict[str, Any]) -> None:
        _ZipStore.__init__(self, state["path"], state["mode"])


_CHUNK_KEY = re.compile(r"^\d+(\.\d+)+$")


class DirectoryStore(_LocalStore):
    """zarr 2's ``DirectoryStore(path)``: a directory (an asyncarr `LocalStore`).

    ``dimension_separator="/"`` makes it a `NestedDirectoryStore`: v2 chunk keys such as ``0.0``
    are kept as ``0/0``, and v2 arrays created in it record ``"dimension_separator": "/"``.
    """

    def __init__(
        self, path: str | os.PathLike[str], normalize_keys: bool = False, dimension_separator: str | None = None
    ) -> None:
        if normalize_keys:
            raise ValueError("normalize_keys=True (lower-casing every key) is not supported; keys are kept as given")
        if dimension_separator not in (None, ".", "/"):
            raise ValueError(f"dimension_separator must be '.' or '/', got {dimension_separator!r}")
        super().__init__(path)
        self.dimension_separator = dimension_separator

    def __getstate__(self) -> dict[str, Any]:
        return {**super().__getstate__(), "dimension_separator": self.dimension_separator}

    def __setstate__(self, state: dict[str, Any]) -> None:
        DirectoryStore.__init__(self, state["root"], dimension_separator=state["dimension_separator"])
        self.read_only = state["read_only"]

    @property
    def path(self) -> str:
        """The absolute path of the directory (zarr 2's name for the root)."""
        return self.root

    def close(self) -> Coroutine[Any, Any, None]:  # type: ignore[override]
        """Nothing to release; returns an awaitable that is already done."""
        return AlreadyClosed()

    # zarr 2's nested layout: every path to a file goes through _file_path, so mapping the key there
    # covers reads, writes, deletes, sizes and the blocking twins alike.
    def _file_path(self, key: str) -> str:
        if self.dimension_separator == "/":
            directory, _, name = key.rpartition("/")
            if _CHUNK_KEY.match(name):
                key = (directory + "/" if directory else "") + name.replace(".", "/")
        return super()._file_path(key)

    def _recorded(self, key: str, value: bytes) -> bytes:
        """A v2 ``.zarray`` written to a nested store records the "/" separator its chunks are kept with."""
        if self.dimension_separator != "/" or key.rpartition("/")[2] != ".zarray":
            return value
        document = load_json_object(bytes(value), key)
        if document.get("dimension_separator", ".") == "/":
            return value
        return dump_json({**document, "dimension_separator": "/"}, indent=4, sort_keys=True)

    def set_sync(self, key: str, value: bytes) -> None:
        """Blocking ``set`` (a ``.zarray`` records the nested separator)."""
        super().set_sync(key, self._recorded(key, value))

    async def set(self, key: str, value: bytes) -> None:
        """Write ``value`` at ``key`` (a ``.zarray`` records the nested separator)."""
        await super().set(key, self._recorded(key, value))

    async def set_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        """Write many values (a ``.zarray`` records the nested separator)."""
        await super().set_many([(key, self._recorded(key, value)) for key, value in items])

    def set_many_sync(self, items: Sequence[tuple[str, bytes]]) -> None:
        """Blocking writes of many values (a ``.zarray`` records the nested separator)."""
        super().set_many_sync([(key, self._recorded(key, value)) for key, value in items])


class NestedDirectoryStore(DirectoryStore):
    """zarr 2's ``NestedDirectoryStore(path)``: v2 chunk ``0.0`` is the file ``0/0``, and ``.zarray`` says so."""

    def __init__(
        self, path: str | os.PathLike[str], normalize_keys: bool = False, dimension_separator: str | None = "/"
    ) -> None:
        if dimension_separator not in (None, "/"):
            raise ValueError("NestedDirectoryStore only supports dimension_separator='/'")
        super().__init__(path, normalize_keys=normalize_keys, dimension_separator="/")


class _ClosesWhatItWraps:
    """``close()`` of a wrapping store: closes the wrapped one now (in async code: returns the close to await)."""

    inner: Store

    def close(self) -> Coroutine[Any, Any, None]:
        """Close the wrapped store now (in async code: returns the close to await)."""
        return _close_now(self.inner.close())

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class FsspecStore(_ClosesWhatItWraps, _WrapperStore):
    """zarr 3's ``FsspecStore``, opened with ``FsspecStore.from_url``: asyncarr's own store for the URL."""

    def __init__(self, store: Store, *, read_only: bool | None = None) -> None:
        if not isinstance(store, Store):
            raise TypeError(
                f"FsspecStore wraps an asyncarr store, not {type(store).__name__}: open one with "
                "FsspecStore.from_url(url, storage_options=..., read_only=...), which uses asyncarr's own drivers"
            )
        super().__init__(store, read_only=read_only)

    @classmethod
    def from_url(
        cls, url: str, storage_options: Mapping[str, Any] | None = None, read_only: bool = False
    ) -> FsspecStore:
        """Open the store a URL names (``s3://``, ``gs://``, ``az://``, ``https://``, paths) with asyncarr's drivers."""
        store = cls(_from_url(url, read_only=read_only, **dict(storage_options or {})))
        _opened_stores.add(store)  # closed at interpreter exit if the script never does
        return store

    @property
    def url(self) -> str:
        """The URL of the store's root."""
        return self.inner.location


class LRUStoreCache(_ClosesWhatItWraps, _LRUStoreCache):
    """zarr 2's ``LRUStoreCache(store, max_size)``: values (up to ``max_size`` bytes) and listings cached."""

    def __init__(self, store: Store | MutableMapping[str, bytes] | str, max_size: int | None) -> None:
        if not isinstance(store, Store):
            store, path = _as_store(store)
            if path:
                raise ValueError("LRUStoreCache wraps a whole store; open the node inside it with path=")
        super().__init__(store, max_size)


class WrapperStore(_ClosesWhatItWraps, _WrapperStore):
    """zarr 3's ``WrapperStore(store)``: passes every call to ``store``; subclass it to change some."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)


class LoggingStore(_ClosesWhatItWraps, _LoggingStore):
    """zarr 3's ``LoggingStore(store, log_level="DEBUG", log_handler=None)``: every call logged and counted."""


class TempStore(DirectoryStore):
    """zarr 2's ``TempStore``: a `DirectoryStore` in a new temporary directory, removed at interpreter exit."""

    def __init__(
        self,
        suffix: str = "",
        prefix: str = "zarr",
        dir: str | os.PathLike[str] | None = None,  # noqa: A002 - zarr 2's (and tempfile's) name
        normalize_keys: bool = False,
        dimension_separator: str | None = None,
    ) -> None:
        path = tempfile.mkdtemp(suffix=suffix, prefix=prefix, dir=dir)
        atexit.register(shutil.rmtree, path, True)
        super().__init__(path, normalize_keys=normalize_keys, dimension_separator=dimension_separator)


class KVStore(_MappingStore):
    """zarr 2's ``KVStore(mutablemapping)``: any MutableMapping of str to bytes (a dict, ``dbm.open(...)``)."""

    def __init__(self, mutablemapping: MutableMapping[str, Any]) -> None:
        super().__init__(mutablemapping)

    def close(self) -> Coroutine[Any, Any, None]:  # type: ignore[override]
        """Close (or flush) the mapping now if it can be (in async code: returns the close to await)."""
        return _close_now(super().close())


class FSStore(FsspecStore):
    """zarr 2's ``FSStore(url, mode="w", **storage_options)``: the URL opened with asyncarr's own drivers."""

    def __init__(
        self,
        url: str,
        key_separator: str | None = None,
        mode: str = "w",
        dimension_separator: str | None = None,
        **storage_options: Any,
    ) -> None:
        if (key_separator or dimension_separator) not in (None, "."):
            raise ValueError("pass dimension_separator= when creating the array, not to FSStore")
        unsupported = sorted({"fs", "exceptions", "missing_exceptions", "check", "create"} & storage_options.keys())
        if unsupported:
            raise TypeError(
                f"FSStore({', '.join(unsupported)}=...) configures fsspec, which asyncarr does not use; "
                "pass storage options (anon=, key=, secret=, endpoint_url=, ...) for asyncarr's own drivers"
            )
        super().__init__(_from_url(url, read_only=(mode == "r"), **storage_options))
        _opened_stores.add(self)


class ABSStore(FsspecStore):
    """zarr 2's ``ABSStore(container, prefix="", account_name=None, account_key=None, ...)``: an Azure container."""

    def __init__(
        self,
        container: str,
        prefix: str = "",
        account_name: str | None = None,
        account_key: str | None = None,
        blob_service_kwargs: Mapping[str, Any] | None = None,
        dimension_separator: str | None = None,
        client: Any = None,
    ) -> None:
        if client is not None:
            raise TypeError("ABSStore(client=...) is not supported: pass account_name/account_key or a SAS token")
        if dimension_separator not in (None, "."):
            raise ValueError("pass dimension_separator= when creating the array, not to ABSStore")
        options = {**dict(blob_service_kwargs or {}), "account_name": account_name, "account_key": account_key}
        url = f"az://{container}/{prefix.strip('/')}".rstrip("/")
        super().__init__(_from_url(url, **{k: v for k, v in options.items() if v is not None}))
        _opened_stores.add(self)


class _StorageModule(types.ModuleType):
    """This module, with ``default_compressor`` read from and written to asyncarr's settings."""

    @property
    def default_compressor(self) -> Codec | None:
        """What ``compressor="default"`` means for new arrays (None: no compression)."""
        default = config.get("default_compressor")
        return None if default is None else numcodecs.get_codec(dict(default))

    @default_compressor.setter
    def default_compressor(self, codec: Codec | None) -> None:
        if codec is not None and not isinstance(codec, Codec):
            raise TypeError(f"default_compressor must be a numcodecs codec or None, got {codec!r}")
        config.set(default_compressor=None if codec is None else codec.get_config())


sys.modules[__name__].__class__ = _StorageModule
