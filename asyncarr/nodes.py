"""Reading and writing the metadata documents of one node (array or group) in a store."""

from __future__ import annotations

import asyncio
import copy
import os
import stat
import warnings
from collections.abc import Mapping
from typing import Any

from .errors import ContainsArrayError, MetadataError
from .metadata import node_kind
from .stores.base import Store, validate_key
from .stores.local import LocalStore
from .stores.memory import MemoryStore

__all__ = [
    "V2_DOCUMENTS",
    "V3_DOCUMENTS",
    "check_not_inside_local_array",
    "join_path",
    "node_key",
    "normalize_path",
    "read_documents",
    "warn_if_pickled_writes_stay_behind",
    "write_documents",
]

V3_DOCUMENTS = ("zarr.json",)
V2_DOCUMENTS = (".zarray", ".zgroup", ".zattrs")
METADATA_NAMES = frozenset({"zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata"})


def normalize_path(path: str | None) -> str:
    """Return a node path without leading/trailing slashes ('' is the root); reject unsafe paths."""
    if path is None:
        return ""
    if not isinstance(path, str):
        raise TypeError(f"node paths are strings, got {type(path).__name__}: {path!r}")
    stripped = "/".join(part for part in path.replace("\\", "/").split("/") if part)
    if stripped and ("\\" in path or any(part in (".", "..") for part in stripped.split("/"))):
        raise ValueError(f"node path {path!r} contains '.', '..' or a backslash; it could escape the store root")
    if stripped:
        validate_key(stripped)
    return stripped


def join_path(*parts: str) -> str:
    """Join node path parts with '/', normalizing each."""
    return normalize_path("/".join(p for p in parts if p))


def node_key(path: str, name: str) -> str:
    """The store key of document or chunk ``name`` of the node at ``path``."""
    return f"{path}/{name}" if path else name


async def read_documents(
    store: Store, path: str, zarr_format: int | None = None, *, consolidated: bool = False
) -> dict[str, bytes | None]:
    """Fetch the metadata documents of the node at ``path``; missing ones map to None.

    All the documents a node of the given format may have are asked for at once, so a node
    costs one round trip whatever its format: with an unknown format ``zarr.json`` and the v2
    documents together (the v2 ones are dropped when ``zarr.json`` is there, as it wins).
    ``consolidated=True`` also asks for a v2 group's ``.zmetadata`` in the same round trip.
    """
    names: tuple[str, ...] = V3_DOCUMENTS if zarr_format == 3 else ()
    if zarr_format in (None, 2):
        names = (*V3_DOCUMENTS, *V2_DOCUMENTS) if zarr_format is None else V2_DOCUMENTS
        if consolidated:
            names = (*names, ".zmetadata")
    values = await store.get_many([(node_key(path, name), None) for name in names])
    documents = dict(zip(names, values, strict=True))
    if documents.get("zarr.json") is not None:
        return {"zarr.json": documents["zarr.json"]}
    return documents


async def write_documents(store: Store, path: str, documents: Mapping[str, bytes]) -> None:
    """Write a node's metadata documents (e.g. ``.zarray`` and ``.zattrs``) concurrently."""
    await asyncio.gather(*(store.set(node_key(path, name), value) for name, value in documents.items()))


def describe_missing(store: Store, path: str) -> str:
    """A message saying no node exists at ``path`` of ``store``."""
    where = store.key_url(path) if path else store.location
    return f"no array or group at {where}"


def ensure_documents_decodable(documents: Mapping[str, bytes | None], store: Store, path: str) -> None:
    """Raise MetadataError if a fetched document is not UTF-8 (the parser then names the key)."""
    for name, raw in documents.items():
        if raw is None:
            continue
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MetadataError(f"{store.key_url(node_key(path, name))}: not valid UTF-8 JSON ({exc})") from exc


_KIND_DOCUMENTS = ("zarr.json", ".zarray", ".zgroup")
# Enough for any array's document that tells its kind; these directories lie outside the store,
# where anyone may have left anything, so a larger one is not read (and not judged).
_KIND_DOCUMENT_MAX_BYTES = 1 << 20


def _small_regular_file(path: str) -> bytes | None:
    """The bytes of a regular file of at most `_KIND_DOCUMENT_MAX_BYTES`, else None: a FIFO or device
    left in a parent directory must not block or flood the check."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > _KIND_DOCUMENT_MAX_BYTES:
            return None
        return os.read(fd, _KIND_DOCUMENT_MAX_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)


def _nearest_local_node(directory: str) -> tuple[str, str | None]:
    """Walk up from `directory` to the first one holding node metadata: (that directory, its kind).

    The kind comes from the parsed documents; an unreadable one ends the walk with kind None (what
    lies outside the store is not ours to judge, only not to write into an array).
    """
    while True:
        documents = {name: _small_regular_file(os.path.join(directory, name)) for name in _KIND_DOCUMENTS}
        if any(value is not None for value in documents.values()):
            try:
                return directory, node_kind(documents, "file://" + directory.replace(os.sep, "/"))
            except MetadataError:
                return directory, None
        parent = os.path.dirname(directory)
        if parent == directory:
            return directory, None
        directory = parent


async def check_not_inside_local_array(store: Store) -> None:
    """Raise ContainsArrayError if `store` is a directory inside a local array's directory.

    A local path opens a store rooted exactly there, so the hierarchy above it is invisible to the
    store; creating a node in an array's directory (``arr.zarr/c``, say) would mix it with the chunks.
    """
    if not isinstance(store, LocalStore):
        return
    directory, kind = await asyncio.to_thread(_nearest_local_node, os.path.dirname(store.root))
    if kind == "array":
        where = "file://" + directory.replace(os.sep, "/")
        raise ContainsArrayError(f"{store.location}: it is inside the array at {where}; nothing is created there")


def warn_if_pickled_writes_stay_behind(store: Store, path: str, *, read_only: bool, kind: str) -> None:
    """Warn (UserWarning) that a writable node on a MemoryStore is being pickled: a copy unpickled in
    another process holds its own memory, so what it writes there never comes back."""
    if read_only or not isinstance(store, MemoryStore):
        return
    where = store.key_url(path) if path else store.location
    warnings.warn(
        f"{where}: pickling a writable {kind} on a MemoryStore. A copy unpickled in another process "
        "(a dask or multiprocessing worker) has its own memory, so what it writes never comes back to this "
        "process. Write to a store every process reaches (a local directory, a bucket), or open the "
        f"{kind} read-only (mode='r') to pickle it without this warning",
        UserWarning,
        stacklevel=3,  # past this function and __getstate__: the line that pickled
    )


class PickledByConfiguration:
    """Pickling, copying and dask tokens for a node (array or group) that travels as its configuration.

    Subclasses provide ``_configuration()`` (what ``__setstate__`` rebuilds the node from) and the
    ``_store``, ``_path``, ``_metadata`` and ``_read_only`` attributes; ``_node_kind`` names the node
    in the warning for writable nodes on a MemoryStore.
    """

    _node_kind = "node"
    _store: Store
    _path: str
    _metadata: Any
    _read_only: bool

    def _configuration(self) -> dict[str, Any]:
        raise NotImplementedError

    def __getstate__(self) -> dict[str, Any]:
        warn_if_pickled_writes_stay_behind(self._store, self._path, read_only=self._read_only, kind=self._node_kind)
        return self._configuration()

    def __dask_tokenize__(self) -> tuple[Any, ...]:
        """What dask names this node by: where it is and its metadata (so dask need not pickle it)."""
        documents = sorted(self._metadata.to_documents().items())
        return (f"asyncarr.{type(self).__name__}", self._store.location, self._path, self._read_only, documents)

    # Copies stay in this process, where a MemoryStore's data is shared: they copy without the warning.
    def __copy__(self) -> Any:
        copied = object.__new__(type(self))
        copied.__setstate__(self._configuration())
        return copied

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        copied = object.__new__(type(self))
        copied.__setstate__(copy.deepcopy(self._configuration(), memo))
        return copied
