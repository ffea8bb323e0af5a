"""The async convenience functions: open, create, save and load arrays and groups."""

from __future__ import annotations

import dataclasses
import difflib
import functools
import inspect
import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from .array import AsyncArray
from .chunk_cache import forget_node
from .copy import copy, copy_all, copy_store, creation_keywords  # noqa: F401 - public: in PUBLIC_FUNCTIONS
from .creation import array_config_write_empty_chunks, build_array_metadata, zarr3_creation_arguments
from .errors import (
    ArrayNotFoundError,
    ContainsArrayError,
    ContainsGroupError,
    GroupNotFoundError,
    ReadOnlyError,
)
from .group import AsyncGroup, ensure_parent_groups, open_node
from .locks import ProcessSynchronizer, ThreadSynchronizer
from .metadata import (
    DEFAULT_FILL_VALUE,
    GroupMetadataV3,
    consolidated_v2_document,
    consolidated_v3_metadata,
    parse_node,
)
from .nodes import (
    V2_DOCUMENTS,
    V3_DOCUMENTS,
    check_not_inside_local_array,
    join_path,
    node_key,
    normalize_path,
    read_documents,
    write_documents,
)
from .stores.base import Store
from .stores.url import as_store
from .tree import Tree

#: The public functions, listed once: `asyncarr` re-exports them and `asyncarr.sync` makes a
#: blocking twin of each (`asyncarr.sync_functions`).
PUBLIC_FUNCTIONS = (
    "array",
    "consolidate_metadata",
    "copy",
    "copy_all",
    "copy_store",
    "create",
    "create_array",
    "create_group",
    "create_hierarchy",
    "empty",
    "empty_like",
    "from_array",
    "full",
    "full_like",
    "group",
    "load",
    "ones",
    "ones_like",
    "open",
    "open_array",
    "open_consolidated",
    "open_group",
    "open_like",
    "print_debug_info",
    "save",
    "save_array",
    "save_group",
    "tree",
    "zeros",
    "zeros_like",
)

__all__ = [*PUBLIC_FUNCTIONS, "ProcessSynchronizer", "ThreadSynchronizer"]

MODES = ("r", "r+", "a", "w", "w-", "x")
StoreLike = Store | str | Mapping[str, bytes] | None | Any


def _check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(repr(m) for m in MODES)}; got {mode!r}")
    return "w-" if mode == "x" else mode


def _resolve(
    store: StoreLike, mode: str, storage_options: Mapping[str, Any] | None, path: str | None = None
) -> tuple[Store, str]:
    """The store a store-like names, and the node path in it (a URL's inner path joined with ``path``)."""
    resolved, inner_path = as_store(store, read_only=(mode == "r"), storage_options=dict(storage_options or {}))
    if resolved.read_only and mode != "r":
        raise ReadOnlyError(
            f"{resolved.location}: the store is read-only, so mode {mode!r} cannot be used; open with mode='r'"
        )
    return resolved, join_path(inner_path, normalize_path(path))


def _node_exists(documents: Mapping[str, bytes | None]) -> bool:
    return any(value is not None for value in documents.values())


async def _clear_for_create(store: Store, path: str, mode: str, zarr_format: int | None, want: str) -> None:
    """Apply the creating modes: 'w' removes what is there, 'w-' refuses to touch it."""
    store._check_writable()
    # Whatever format the new node has, a node of either format there counts: 'w' must remove a v2
    # node before writing a v3 one (or the path would hold both), and 'w-' must refuse either.
    names = await store.names_to_delete(path) if mode == "w" else None
    if names is not None:
        # An object store lists what 'w' removes; the listing also says whether a node is there, so
        # its documents cost no requests of their own. The delete ends before anything is written.
        listed = set(names)
        if any(node_key(path, name) in listed for name in (*V3_DOCUMENTS, *V2_DOCUMENTS)):
            await store.delete_listed(path, names)
            forget_node(store.location, path)
        return
    documents = await read_documents(store, path)
    if not _node_exists(documents):
        return
    if mode == "w-":
        node = await open_node(store, path, read_only=True)
        what, error = (
            ("an array", ContainsArrayError) if isinstance(node, AsyncArray) else ("a group", ContainsGroupError)
        )
        raise error(f"{store.key_url(path) or store.location}: {what} already exists (mode 'w-' never overwrites)")
    await store.delete_prefix(path)
    forget_node(store.location, path)


async def open_array(
    store: StoreLike = None,
    mode: str = "a",
    *,
    path: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    synchronizer: Any = None,
    zarr_format: int | None = None,
    shape: Any = None,
    write_empty_chunks: bool | None = None,
    config: Mapping[str, Any] | None = None,
    **create_kwargs: Any,
) -> AsyncArray:
    """Open an array, creating it in modes 'a', 'w' and 'w-' (which need ``shape``).

    ``write_empty_chunks`` (or zarr 3's ``config={"write_empty_chunks": ...}``) belongs to the
    returned handle, not to the stored metadata; None follows ``asyncarr.config`` at each write."""
    mode = _check_mode(mode)
    write_empty_chunks = array_config_write_empty_chunks(write_empty_chunks, config)
    resolved, path = _resolve(store, mode, storage_options, path)
    synchronizer = None if isinstance(synchronizer, ThreadSynchronizer) else synchronizer
    if mode in ("r", "r+", "a"):
        try:
            return await AsyncArray.open(
                resolved,
                path,
                read_only=(mode == "r"),
                zarr_format=zarr_format,
                synchronizer=synchronizer,
                write_empty_chunks=write_empty_chunks,
            )
        except ArrayNotFoundError:
            if mode != "a" or shape is None:
                raise
    if shape is None:
        raise TypeError(
            f"creating an array needs shape= (mode {mode!r} on {resolved.key_url(path) or resolved.location})"
        )
    metadata = build_array_metadata(shape=shape, zarr_format=zarr_format, **create_kwargs)
    await check_not_inside_local_array(resolved)
    await _clear_for_create(resolved, path, mode, zarr_format, "array")
    await ensure_parent_groups(resolved, path, metadata.zarr_format)
    return await AsyncArray.create(
        resolved, path, metadata, synchronizer=synchronizer, write_empty_chunks=write_empty_chunks
    )


async def open_group(
    store: StoreLike = None,
    mode: str = "a",
    *,
    path: str | None = None,
    zarr_format: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
    attributes: Mapping[str, Any] | None = None,
    use_consolidated: bool | None = None,
) -> AsyncGroup:
    """Open a group, creating it in modes 'a', 'w' and 'w-'.

    ``use_consolidated`` (zarr 3): None reads consolidated metadata where the group has it,
    True requires it (ValueError if missing), False ignores it and reads each member's own."""
    mode = _check_mode(mode)
    resolved, path = _resolve(store, mode, storage_options, path)
    if mode in ("r", "r+", "a"):
        try:
            opened = await AsyncGroup.open(resolved, path, read_only=(mode == "r"), zarr_format=zarr_format)
        except GroupNotFoundError:
            if mode != "a":
                raise
        else:
            return _with_consolidation(opened, use_consolidated)
    await check_not_inside_local_array(resolved)
    await _clear_for_create(resolved, path, mode, zarr_format, "group")
    zarr_format = _default_format(zarr_format)
    await ensure_parent_groups(resolved, path, zarr_format)
    return await AsyncGroup.create(resolved, path, zarr_format=zarr_format, attributes=attributes)


def _with_consolidation(opened: AsyncGroup, use_consolidated: bool | None) -> AsyncGroup:
    """``opened`` as ``use_consolidated`` asks: as it is (None), checked to have consolidated
    metadata (True), or reopened without it (False)."""
    if use_consolidated is None:
        return opened
    if use_consolidated:
        if opened._consolidated is None:
            where = opened.store.key_url(opened.path) or opened.store.location
            raise ValueError(
                f"{where}: the group has no consolidated metadata; write it with consolidate_metadata(), "
                "or open the group with use_consolidated=None"
            )
        return opened
    metadata = opened.metadata
    if isinstance(metadata, GroupMetadataV3):
        metadata = dataclasses.replace(metadata, consolidated_metadata=None)
    return AsyncGroup(opened.store, opened.path, metadata, read_only=opened.read_only)


def _default_format(zarr_format: int | None) -> int:
    from . import config

    return config.get("default_zarr_format") if zarr_format is None else zarr_format


async def open(  # noqa: A001 - the documented name
    store: StoreLike = None,
    mode: str = "a",
    *,
    path: str | None = None,
    zarr_format: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> AsyncArray | AsyncGroup:
    """Open whatever is there; create an array if ``shape`` is given, else a group."""
    mode = _check_mode(mode)
    resolved, path = _resolve(store, mode, storage_options, path)
    opening = mode in ("r", "r+", "a")  # the creating modes check what is there themselves
    documents = await read_documents(resolved, path, zarr_format, consolidated=True) if opening else {}
    if mode in ("r", "r+") or (mode == "a" and _node_exists(documents)):
        node = await open_node(resolved, path, read_only=(mode == "r"), documents=documents)
        synchronizer = kwargs.get("synchronizer")
        write_empty_chunks = array_config_write_empty_chunks(kwargs.get("write_empty_chunks"), kwargs.get("config"))
        process_locks = isinstance(synchronizer, ProcessSynchronizer)
        if isinstance(node, AsyncArray) and (process_locks or write_empty_chunks is not None):
            node = AsyncArray(
                resolved,
                path,
                node.metadata,
                read_only=node.read_only,
                synchronizer=synchronizer if process_locks else None,
                write_empty_chunks=write_empty_chunks,
            )
        return node
    if kwargs.get("shape") is not None:
        return await open_array(resolved, mode, path=path, zarr_format=zarr_format, **kwargs)
    attributes = kwargs.pop("attributes", None)
    if kwargs:
        raise TypeError(f"open() creating a group takes no {', '.join(sorted(kwargs))} (pass shape= for an array)")
    return await open_group(resolved, mode, path=path, zarr_format=zarr_format, attributes=attributes)


async def create(
    shape: Any,
    *,
    store: StoreLike = None,
    path: str | None = None,
    overwrite: bool = False,
    storage_options: Mapping[str, Any] | None = None,
    read_only: bool = False,
    **kwargs: Any,
) -> AsyncArray:
    """Create a new array (in memory unless ``store`` is given); ContainsArrayError if one exists.

    ``read_only=True`` (zarr 3) returns a handle that refuses writes to the array just created."""
    created = await open_array(
        store, "w" if overwrite else "w-", path=path, shape=shape, storage_options=storage_options, **kwargs
    )
    if not read_only:
        return created
    return AsyncArray(created.store, created.path, created.metadata, read_only=True)


async def zeros(shape: Any, **kwargs: Any) -> AsyncArray:
    """Create an array of zeros."""
    return await create(shape, fill_value=0, **kwargs)


async def ones(shape: Any, **kwargs: Any) -> AsyncArray:
    """Create an array of ones."""
    return await create(shape, fill_value=1, **kwargs)


async def full(shape: Any, fill_value: Any, **kwargs: Any) -> AsyncArray:
    """Create an array filled with ``fill_value``."""
    return await create(shape, fill_value=fill_value, **kwargs)


async def empty(shape: Any, **kwargs: Any) -> AsyncArray:
    """Create an array whose unwritten elements read as the default fill value."""
    return await create(shape, **kwargs)


async def array(data: Any, **kwargs: Any) -> AsyncArray:
    """Create an array holding a copy of ``data`` (an ndarray, array-like, or another array)."""
    source = getattr(data, "async_array", data)
    if not isinstance(source, AsyncArray):
        source = np.asanyarray(data)
    kwargs.setdefault("dtype", source.dtype)
    if isinstance(source, AsyncArray):
        kwargs.setdefault("chunks", source.chunks)
    created = await create(source.shape, **kwargs)
    await created.setitem(Ellipsis, source)
    return created


def _like_kwargs(a: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    source = getattr(a, "async_array", a)
    kwargs.setdefault("dtype", source.dtype)
    if isinstance(source, AsyncArray):
        kwargs.setdefault("order", source.order)
        kwargs.setdefault("zarr_format", source.zarr_format)
        kwargs.setdefault("fill_value", source.fill_value)
        copy_codecs = source.zarr_format == 3 and kwargs["zarr_format"] == 3
        if copy_codecs and not {"compressor", "filters", "shards"} & kwargs.keys():
            # The whole v3 chain, sharding included: the stored objects keep their shape too.
            kwargs.setdefault("codecs", list(source.metadata.codecs))
            kwargs.setdefault("chunks", source.metadata.chunks)
        else:
            kwargs.setdefault("chunks", source.chunks)
            kwargs.setdefault("compressor", source.compressor)
            kwargs.setdefault("filters", source.filters or None)
            if source.shards and kwargs["zarr_format"] == 3:
                kwargs.setdefault("shards", source.shards)
    return kwargs


async def empty_like(a: Any, **kwargs: Any) -> AsyncArray:
    """A new empty array with the shape, chunks, dtype and codecs of ``a``."""
    return await empty(kwargs.pop("shape", a.shape), **_like_kwargs(a, kwargs))


async def zeros_like(a: Any, **kwargs: Any) -> AsyncArray:
    """A new array of zeros shaped like ``a``."""
    kwargs["fill_value"] = 0
    return await create(kwargs.pop("shape", a.shape), **_like_kwargs(a, kwargs))


async def ones_like(a: Any, **kwargs: Any) -> AsyncArray:
    """A new array of ones shaped like ``a``."""
    kwargs["fill_value"] = 1
    return await create(kwargs.pop("shape", a.shape), **_like_kwargs(a, kwargs))


async def full_like(a: Any, fill_value: Any = None, **kwargs: Any) -> AsyncArray:
    """A new array shaped like ``a`` filled with ``fill_value`` (default: ``a``'s fill value)."""
    if fill_value is not None:
        kwargs["fill_value"] = fill_value
    return await create(kwargs.pop("shape", a.shape), **_like_kwargs(a, kwargs))


async def open_like(a: Any, path: StoreLike, **kwargs: Any) -> AsyncArray:
    """Open (creating if missing) the array at ``path`` shaped, chunked and encoded like ``a`` (zarr 3)."""
    kwargs.setdefault("shape", getattr(a, "shape", None))
    return await open_array(path, **_like_kwargs(a, kwargs))


async def group(
    store: StoreLike = None,
    *,
    overwrite: bool = False,
    path: str | None = None,
    zarr_format: int | None = None,
    attributes: Mapping[str, Any] | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> AsyncGroup:
    """Open the group in ``store``, creating it if missing (or replacing it with ``overwrite``)."""
    return await open_group(
        store,
        "w" if overwrite else "a",
        path=path,
        zarr_format=zarr_format,
        attributes=attributes,
        storage_options=storage_options,
    )


async def save(
    store: StoreLike,
    *arrays: Any,
    zarr_format: int | None = None,
    path: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    **named: Any,
) -> None:
    """Save one array as an array, or several (positional as arr_0, arr_1, ... and named) as a group."""
    if not arrays and not named:
        raise ValueError("save() needs at least one array")
    where = {"zarr_format": zarr_format, "path": path, "storage_options": storage_options}
    if len(arrays) == 1 and not named:
        await save_array(store, arrays[0], **where)
    else:
        await save_group(store, *arrays, **where, **named)


async def save_array(
    store: StoreLike,
    arr: Any,
    *,
    zarr_format: int | None = None,
    path: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> None:
    """Save one array at ``path`` (replacing what is there); ``kwargs`` go to array creation (zarr 3)."""
    resolved, path = _resolve(store, "w", storage_options, path)
    try:
        await array(arr, store=resolved, path=path, zarr_format=zarr_format, overwrite=True, **kwargs)
    finally:
        await _close_if_opened_here(store, resolved)


async def save_group(
    store: StoreLike,
    *args: Any,
    zarr_format: int | None = None,
    path: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> None:
    """Save arrays as members of a new group: positional ones as ``arr_0``, ``arr_1``, ..., named ones by name."""
    if not args and not kwargs:
        raise ValueError("save_group() needs at least one array")
    resolved, path = _resolve(store, "w", storage_options, path)
    try:
        root = await open_group(resolved, "w", path=path, zarr_format=zarr_format)
        for name, data in ({f"arr_{i}": a for i, a in enumerate(args)} | kwargs).items():
            await root.create_array(name, data=data)
    finally:
        await _close_if_opened_here(store, resolved)


async def print_debug_info() -> None:
    """Print the versions of Python, asyncarr and the libraries it uses (for bug reports)."""
    import importlib.metadata
    import platform

    print(f"platform: {platform.platform()}")
    print(f"python: {platform.python_version()}")
    for package in ("asyncarr", "numpy", "numcodecs", "google-crc32c", "aiobotocore", "gcsfs", "azure-storage-blob"):
        try:
            version = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            version = "not installed"
        print(f"{package}: {version}")


async def _close_if_opened_here(store_like: StoreLike, resolved: Store) -> None:
    """Close (and so finalise, for zip files) a store this call opened from a path or URL."""
    if isinstance(store_like, str) or hasattr(store_like, "__fspath__"):
        await resolved.close()


async def load(
    store: StoreLike,
    *,
    path: str | None = None,
    zarr_format: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> Any:
    """Read an array into an ndarray, or a group into ``{name: ndarray}`` of its arrays."""
    resolved, path = _resolve(store, "r", storage_options, path)
    try:
        node = await open(resolved, "r", path=path, zarr_format=zarr_format)
        if isinstance(node, AsyncArray):
            return await node.getitem(Ellipsis)
        return {name: await a.getitem(Ellipsis) async for name, a in node.arrays()}
    finally:
        await _close_if_opened_here(store, resolved)


async def consolidate_metadata(
    store: StoreLike,
    *,
    path: str | None = None,
    zarr_format: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> AsyncGroup:
    """Gather the metadata of every node below the group at ``path`` into one document."""
    resolved, path = _resolve(store, "r+", storage_options, path)
    root = await AsyncGroup.open(resolved, path, zarr_format=zarr_format)
    entries: dict[str, dict[str, Any]] = {}

    def add_documents(node_path: str, documents: Mapping[str, bytes]) -> None:
        for name, raw in documents.items():
            entries[f"{node_path}/{name}" if node_path else name] = json.loads(raw)

    async def walk(group_: AsyncGroup, prefix: str) -> None:
        group_._consolidated = None  # read the real hierarchy, not a stale consolidated copy
        async for name, node in group_.members():
            relative = f"{prefix}{name}"
            add_documents(relative, node.metadata.to_documents())
            if isinstance(node, AsyncGroup):
                await walk(node, relative + "/")

    await walk(root, "")
    if isinstance(root.metadata, GroupMetadataV3):
        updated = root.metadata.with_consolidated_metadata(consolidated_v3_metadata(entries))
        await write_documents(resolved, root.path, updated.to_documents())
    else:
        add_documents("", root.metadata.to_documents())
        await write_documents(resolved, root.path, {".zmetadata": consolidated_v2_document(entries)})
    return await AsyncGroup.open(resolved, root.path)


# -- zarr-python 3's top-level functions --------------------------------------------------------


def _array_source(data: Any) -> AsyncArray | np.ndarray:
    """``data`` as an AsyncArray (for either API's arrays) or an ndarray."""
    source = getattr(data, "async_array", data)
    return source if isinstance(source, AsyncArray) else np.asanyarray(data)


async def create_array(
    store: StoreLike,
    *,
    name: str | None = None,
    shape: Any = None,
    dtype: Any = None,
    data: Any = None,
    chunks: Any = "auto",
    shards: Any = None,
    filters: Any = "auto",
    compressors: Any = "auto",
    serializer: Any = "auto",
    fill_value: Any = DEFAULT_FILL_VALUE,
    order: str | None = None,
    zarr_format: int | None = 3,
    attributes: Mapping[str, Any] | None = None,
    chunk_key_encoding: Any = None,
    dimension_names: Any = None,
    storage_options: Mapping[str, Any] | None = None,
    overwrite: bool = False,
    config: Mapping[str, Any] | None = None,
    write_data: bool = True,
) -> AsyncArray:
    """Create an array with zarr-python 3's arguments and defaults (``compressors="auto"``: zstd level 0)."""
    source = None
    if data is not None:
        if shape is not None or dtype is not None:
            raise ValueError("create_array takes data= or shape= and dtype=, not both: data gives the shape and dtype")
        source = _array_source(data)
        shape, dtype = source.shape, source.dtype
    if shape is None or dtype is None:
        missing = "shape" if shape is None else "dtype"
        raise ValueError(f"create_array needs {missing}= (or data=, which gives the shape and dtype)")
    order = order if order is not None else dict(config or {}).get("order")
    write_empty_chunks = array_config_write_empty_chunks(None, config)
    arguments = zarr3_creation_arguments(
        dtype=dtype,
        chunks=chunks,
        shards=shards,
        filters=filters,
        compressors=compressors,
        serializer=serializer,
        zarr_format=zarr_format,
        chunk_key_encoding=chunk_key_encoding,
    )
    # v3: zarr-python 3 takes order as the layout of arrays in memory, never a transpose codec in the metadata.
    stored_order = order if _default_format(zarr_format) == 2 else None
    created = await open_array(
        store,
        "w" if overwrite else "w-",
        path=name,
        shape=shape,
        dtype=dtype,
        fill_value=fill_value,
        order=stored_order,
        zarr_format=zarr_format,
        attributes=attributes,
        dimension_names=dimension_names,
        storage_options=storage_options,
        write_empty_chunks=write_empty_chunks,
        **arguments,
    )
    if source is not None and write_data:
        await created.setitem(Ellipsis, source)
    return created


def _split_v3_chain(codecs: tuple[dict[str, Any], ...]) -> tuple[list[dict], dict, list[dict]]:
    """A v3 chain as (filters, serializer, compressors): before, at and after its array->bytes codec."""
    position = next(i for i, codec in enumerate(codecs) if codec["name"] in _SERIALIZERS)
    return list(codecs[:position]), codecs[position], list(codecs[position + 1 :])


_SERIALIZERS = frozenset({"bytes", "vlen-utf8", "vlen-bytes", "sharding_indexed"})
_KEEP = "keep"


def _kept(value: Any) -> bool:
    return isinstance(value, str) and value == _KEEP


async def from_array(
    store: StoreLike,
    *,
    data: Any,
    write_data: bool = True,
    name: str | None = None,
    chunks: Any = "keep",
    shards: Any = "keep",
    filters: Any = "keep",
    compressors: Any = "keep",
    serializer: Any = "keep",
    fill_value: Any = DEFAULT_FILL_VALUE,
    order: str | None = None,
    zarr_format: int | None = None,
    attributes: Mapping[str, Any] | None = None,
    chunk_key_encoding: Any = None,
    dimension_names: Any = None,
    storage_options: Mapping[str, Any] | None = None,
    overwrite: bool = False,
    config: Mapping[str, Any] | None = None,
) -> AsyncArray:
    """A new array holding ``data``; ``"keep"`` takes chunks, shards and codecs from an array source (else "auto")."""
    source = _array_source(data)
    settings: dict[str, Any] = {
        "chunks": chunks,
        "shards": shards,
        "filters": filters,
        "compressors": compressors,
        "serializer": serializer,
    }
    if isinstance(source, AsyncArray):
        metadata = source.metadata
        zarr_format = source.zarr_format if zarr_format is None else zarr_format
        order = source.order if order is None else order  # as zarr-python: not the fill value, not the attributes
        if source.zarr_format == zarr_format == 3:
            dimension_names = metadata.dimension_names if dimension_names is None else dimension_names
            chunk_key_encoding = metadata.chunk_key_encoding if chunk_key_encoding is None else chunk_key_encoding
        inner = metadata.codecs if source.zarr_format == 3 else ()
        if inner and inner[0]["name"] == "sharding_indexed":
            inner = tuple(inner[0]["configuration"]["codecs"])
        if source.zarr_format == 3:
            kept_filters, kept_serializer, kept_compressors = _split_v3_chain(inner)
        else:
            kept_filters, kept_serializer = list(source.filters or ()), "auto"
            kept_compressors = [source.compressor] if source.compressor is not None else []
        kept = {
            "chunks": source.chunks,
            "shards": source.shards,
            "filters": kept_filters,
            "compressors": kept_compressors,
            "serializer": kept_serializer if zarr_format == 3 else "auto",
        }
        settings = {key: kept[key] if _kept(value) else value for key, value in settings.items()}
    else:
        auto = {"chunks": "auto", "shards": None, "filters": "auto", "compressors": "auto", "serializer": "auto"}
        settings = {key: auto[key] if _kept(value) else value for key, value in settings.items()}
        zarr_format = 3 if zarr_format is None else zarr_format
    created = await create_array(
        store,
        name=name,
        shape=source.shape,
        dtype=source.dtype,
        fill_value=fill_value,
        order=order,
        zarr_format=zarr_format,
        attributes=attributes,
        chunk_key_encoding=chunk_key_encoding,
        dimension_names=dimension_names,
        storage_options=storage_options,
        overwrite=overwrite,
        config=config,
        **settings,
    )
    if write_data:
        await created.setitem(Ellipsis, source)
    return created


async def create_group(
    store: StoreLike,
    *,
    path: str | None = None,
    zarr_format: int | None = None,
    overwrite: bool = False,
    attributes: Mapping[str, Any] | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> AsyncGroup:
    """Create a group (ContainsGroupError/ContainsArrayError if a node is there, unless ``overwrite``)."""
    return await open_group(
        store,
        "w" if overwrite else "w-",
        path=path,
        zarr_format=zarr_format,
        attributes=attributes,
        storage_options=storage_options,
    )


async def open_consolidated(
    store: StoreLike,
    *,
    path: str | None = None,
    mode: str = "a",
    zarr_format: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
    use_consolidated: bool | str = True,
) -> AsyncGroup:
    """Open a group through its consolidated metadata; ValueError if it has none."""
    if use_consolidated is False:
        raise TypeError("open_consolidated(use_consolidated=False) contradicts itself; use open_group() instead")
    if mode == "a":  # open what is there (never create a group only to refuse it), writable if the store is
        try:
            opened = await open_group(store, "r+", path=path, zarr_format=zarr_format, storage_options=storage_options)
        except ReadOnlyError:
            opened = await open_group(store, "r", path=path, zarr_format=zarr_format, storage_options=storage_options)
    else:
        opened = await open_group(store, mode, path=path, zarr_format=zarr_format, storage_options=storage_options)
    if opened._consolidated is None:
        where = opened.store.key_url(opened.path) or opened.store.location
        raise ValueError(
            f"{where}: the group has no consolidated metadata; write it with consolidate_metadata(), "
            "or open the group with open_group()"
        )
    return opened


async def tree(grp: Any, expand: bool | None = None, level: int | None = None) -> Tree:
    """The hierarchy below group ``grp``, as ``grp.tree(expand, level)`` draws it (zarr 3's ``level``)."""
    return await getattr(grp, "async_group", grp).tree(expand=expand, level=level)


def _node_document(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A hierarchy node as a plain dict: zarr-python's metadata objects through their ``to_dict()``."""
    to_dict = getattr(spec, "to_dict", None)
    spec = to_dict() if callable(to_dict) else spec
    if not isinstance(spec, Mapping):
        raise TypeError(f"a create_hierarchy node is a dict or zarr metadata object, got {type(spec).__name__}")
    document = json.loads(json.dumps(dict(spec), default=_json_default))
    if "node_type" not in document and document.get("zarr_format") == 2 and {"shape", "dtype"} <= document.keys():
        document["node_type"] = "array"  # zarr-python's ArrayV2Metadata.to_dict() leaves it out (.zarray has none)
    return document


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _node_documents(spec: dict[str, Any]) -> dict[str, bytes] | None:
    """The documents of a complete metadata dict (zarr's ``to_dict()`` form); None for a short description."""
    kind, zarr_format = spec.get("node_type"), spec.get("zarr_format")
    if zarr_format == 3 and (kind == "group" or "data_type" in spec):
        return {"zarr.json": json.dumps(spec).encode()}
    if zarr_format == 2 and (kind == "group" or {"dtype", "chunks", "compressor"} <= spec.keys()):
        attributes = spec.get("attributes") or {}
        body = {k: v for k, v in spec.items() if k not in ("attributes", "node_type")}
        name = ".zarray" if kind != "group" else ".zgroup"
        documents = {name: json.dumps(body if kind != "group" else {"zarr_format": 2}).encode()}
        if attributes:
            documents[".zattrs"] = json.dumps(attributes).encode()
        return documents
    return None


async def create_hierarchy(
    *,
    store: StoreLike,
    nodes: Mapping[str, Any],
    overwrite: bool = False,
    storage_options: Mapping[str, Any] | None = None,
) -> list[tuple[str, AsyncArray | AsyncGroup]]:
    """Create the nodes ``nodes`` describes (path -> zarr metadata or ``{"node_type": ..., ...}``), parents first."""
    resolved, root = _resolve(store, "a", storage_options)
    specs = {normalize_path(path): _node_document(spec) for path, spec in nodes.items()}
    for path, spec in specs.items():
        if spec.get("node_type") not in ("array", "group"):
            raise ValueError(f"create_hierarchy: node {path!r} needs node_type 'array' or 'group', got {spec!r}")
    formats = {spec.get("zarr_format") for spec in specs.values()} - {None}
    if len(formats) > 1:
        raise ValueError(f"create_hierarchy: every node must have one zarr_format, got {sorted(formats)}")
    zarr_format = _default_format(formats.pop() if formats else None)
    created: list[tuple[str, AsyncArray | AsyncGroup]] = []
    for path in sorted(specs, key=lambda p: (p.count("/") + bool(p), p)):  # parents before children
        spec, where = specs[path], join_path(root, path)
        documents = _node_documents(spec)
        if documents is not None:
            parse_node(documents, where)  # refuse invalid metadata before writing anything
            await check_not_inside_local_array(resolved)
            await _clear_for_create(resolved, where, "w" if overwrite else "w-", zarr_format, spec["node_type"])
            await ensure_parent_groups(resolved, where, zarr_format)
            await write_documents(resolved, where, documents)
            created.append((path, await open_node(resolved, where)))
            continue
        options = {k: v for k, v in spec.items() if k != "node_type"}
        options.setdefault("zarr_format", zarr_format)
        if spec["node_type"] == "group":
            created.append((path, await create_group(resolved, path=where, overwrite=overwrite, **options)))
        else:
            created.append((path, await create_array(resolved, name=where, overwrite=overwrite, **options)))
    return created


# -- keyword mistakes name the function the user called -----------------------------------------

_FORWARDS_KEYWORDS_TO: dict[str, Any] = {
    "open_array": build_array_metadata,
    "open": "open_array",
    "create": "open_array",
    "zeros": "create",
    "ones": "create",
    "full": "create",
    "empty": "create",
    "array": "create",
    "empty_like": "create",
    "zeros_like": "create",
    "ones_like": "create",
    "full_like": "create",
    "open_like": "open_array",
    "save_array": "array",
    "copy": creation_keywords,
    "copy_all": creation_keywords,
}
"""Where each public function's ``**kwargs`` go; a function not named here takes only its own keywords.

``save`` and ``save_group`` are missing on purpose: their ``**named`` keywords are the names of the arrays they save."""
_ANY_KEYWORD = frozenset({"save", "save_group"})
_accepted_cache: dict[str, frozenset[str]] = {}

_RENAMED_KEYWORDS = {"zarr_version": "zarr_format", "chunk_shape": "chunks"}
"""zarr's older names (zarr 2's ``zarr_version``, zarr 3's v3 ``chunk_shape``) of asyncarr keywords."""
_NODE_OPENERS = frozenset(
    {"open", "open_array", "open_group", "group", "open_consolidated", "open_like", "create", "array"}
    | {"zeros", "ones", "full", "empty", "empty_like", "zeros_like", "ones_like", "full_like"}
)
_NOTHING_TO_DO = ("cache_attrs", "cache_metadata", "chunk_store", "meta_array", "synchronizer")
"""zarr 2 keywords of the functions that open nodes which change nothing in asyncarr (caches:
metadata is read once per handle; synchronizer: a group needs none) or take only their default
(chunk_store: chunks live beside their metadata; meta_array: results are NumPy arrays)."""


def _older_keywords(name: str, accepted: set[str]) -> set[str]:
    """The older zarr keyword names function ``name`` also takes, given the ones it takes now."""
    older = {old for old, new in _RENAMED_KEYWORDS.items() if new in accepted}
    return older | (set(_NOTHING_TO_DO) - accepted if name in _NODE_OPENERS else set())


def current_keywords(called_as: str, name: str, keywords: dict[str, Any]) -> dict[str, Any]:
    """``keywords`` with zarr's older names renamed, and those with nothing to do checked and dropped."""
    if not keywords.keys() & (_RENAMED_KEYWORDS.keys() | set(_NOTHING_TO_DO)):
        return keywords
    keywords, current = dict(keywords), _current_names(name)
    for old, new in _RENAMED_KEYWORDS.items():
        if old in keywords and old not in current:
            value = keywords.pop(old)
            if keywords.get(new, value) != value:
                raise TypeError(f"{called_as}() got {old}={value!r} and {new}={keywords[new]!r}; pass only {new}=")
            keywords[new] = value
    for old in set(_NOTHING_TO_DO) - current:
        if old not in keywords:
            continue
        value = keywords.pop(old)
        if old == "chunk_store" and value is not None:
            raise ValueError(
                f"{called_as}(chunk_store=...): asyncarr keeps chunks in the same store as their metadata; "
                "write to one store, or move chunks later with copy_store()"
            )
        if old == "meta_array" and value is not None and not isinstance(value, np.ndarray):
            raise ValueError(f"{called_as}(meta_array=...): asyncarr returns NumPy arrays, not {type(value).__name__}")
    return keywords


def _own_keywords(name: str) -> set[str]:
    """The keywords of function ``name``'s own signature (not those it forwards)."""
    parameters = inspect.signature(globals()[name]).parameters.values()
    return {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def accepted_keywords(name: str) -> frozenset[str] | None:
    """The keyword names public function ``name`` accepts, following its ``**kwargs``; None: any name."""
    if name in _ANY_KEYWORD:
        return None
    current = _current_names(name)
    return current | _older_keywords(name, current)


def _current_names(name: str) -> frozenset[str]:
    """The keywords function ``name`` takes under asyncarr's names: its own and those its ``**kwargs`` reach."""
    if name not in _accepted_cache:
        names = _own_keywords(name)
        target = _FORWARDS_KEYWORDS_TO.get(name)
        if isinstance(target, str):
            names |= _current_names(target)
        elif target is not None:
            names |= {p.name for p in inspect.signature(target).parameters.values() if p.kind is p.KEYWORD_ONLY}
        _accepted_cache[name] = frozenset(names)
    return _accepted_cache[name]


def check_keywords(called_as: str, name: str, keywords: Mapping[str, Any]) -> None:
    """Raise TypeError naming ``called_as`` (and the closest accepted name) for a keyword ``name`` does not take."""
    accepted = accepted_keywords(name)
    if accepted is None:
        return
    for keyword in keywords:
        if keyword not in accepted:
            close = difflib.get_close_matches(keyword, sorted(accepted), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise TypeError(f"{called_as}() got an unexpected keyword argument {keyword!r}{hint}")


def _reporting_keyword_mistakes(function: Any) -> Any:
    """``function`` checking its keywords first, so a typo names ``asyncarr.<name>()``, not an internal function."""
    name = function.__name__

    @functools.wraps(function)
    async def checked(*args: Any, **kwargs: Any) -> Any:
        check_keywords(f"asyncarr.{name}", name, kwargs)
        return await function(*args, **current_keywords(f"asyncarr.{name}", name, kwargs))

    return checked


globals().update({_name: _reporting_keyword_mistakes(globals()[_name]) for _name in PUBLIC_FUNCTIONS})
