"""The blocking facade's classes: `Array`, `Group`, `Attributes`, `OIndex` and `VIndex`.

Each forwards to its async twin (``.async_array`` / ``.async_group``) and runs the coroutine
through `asyncarr.sync_loop`; all behaviour lives in the async classes. Import them from
`asyncarr.sync`, the public module.

Dependencies point down only: this module imports `asyncarr.array` and `asyncarr.group`, never
the reverse. When imported (the package's ``__init__`` imports it, so before any user code
runs) it tells `AsyncArray` and `AsyncGroup` their facade classes, which their ``.sync()``
methods return.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, MutableMapping
from typing import Any, TypeVar

import numpy as np

from . import api
from .array import ArrayConfig, AsyncArray, with_fields
from .group import AsyncGroup
from .indexing import block_result
from .sync_loop import _opened_stores, _read, _run, _write

__all__ = ["Array", "Attributes", "BlockIndex", "Group", "OIndex", "VIndex", "facade_of"]

T = TypeVar("T")
_MISSING = object()  # what `Group.get` asks the core for, told apart from a caller's default


async def _collect(iterator: AsyncIterator[T]) -> list[T]:
    return [item async for item in iterator]


def _blocking_iteration(iterator: AsyncIterator[T]) -> Iterator[T]:
    """Drive an async iterator from the caller's thread: each step runs on the facade's loop, where
    anything the iterator started (read-ahead) goes on while the caller works."""
    try:
        while True:
            try:
                yield _run(iterator.__anext__())
            except StopAsyncIteration:
                return
    finally:
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            _run(aclose())


class Attributes(MutableMapping[str, Any]):
    """User attributes of an array or group; assignments write through to the store."""

    def __init__(self, node: AsyncArray | AsyncGroup) -> None:
        self._node = node

    def __getitem__(self, key: str) -> Any:
        return self._node.metadata.attributes[key]

    def __setitem__(self, key: str, value: Any) -> None:
        _run(self._node.update_attributes({key: value}))

    def __delitem__(self, key: str) -> None:
        remaining = dict(self._node.metadata.attributes)
        del remaining[key]
        _run(self._node.set_attributes(remaining))

    def __iter__(self) -> Iterator[str]:
        return iter(dict(self._node.metadata.attributes))

    def __len__(self) -> int:
        return len(self._node.metadata.attributes)

    def update(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        """Set several attributes with one write."""
        _run(self._node.update_attributes(dict(*args, **kwargs)))

    def asdict(self) -> dict[str, Any]:
        """A plain dict copy of the attributes."""
        return dict(self._node.metadata.attributes)

    def __repr__(self) -> str:
        return repr(self.asdict())


def _forward(name: str, doc: str) -> property:
    return property(lambda self: getattr(self._node, name), doc=doc)


class Array:
    """A Zarr array with NumPy-style indexing; ``Array(store)`` opens the array in ``store``."""

    def __init__(
        self,
        store: Any = None,
        path: str | None = None,
        read_only: bool = False,
        synchronizer: Any = None,
        *,
        storage_options: dict[str, Any] | None = None,
        write_empty_chunks: bool | None = None,
    ) -> None:
        if isinstance(store, AsyncArray):
            self.async_array = store
        else:
            mode = "r" if read_only else "r+"
            opened = _run(
                api.open_array(
                    store,
                    mode,
                    path=path,
                    synchronizer=synchronizer,
                    storage_options=storage_options,
                    write_empty_chunks=write_empty_chunks,
                )
            )
            self.async_array = opened
            _opened_stores.add(opened.store)

    @property
    def _node(self) -> AsyncArray:
        return self.async_array

    shape = _forward("shape", "The array's shape.")
    chunks = _forward("chunks", "The shape of one chunk (inner chunks of a sharded array).")
    shards = _forward("shards", "The shape of one shard, or None without sharding.")
    dtype = _forward("dtype", "The NumPy data type.")
    ndim = _forward("ndim", "Number of dimensions.")
    size = _forward("size", "Number of elements.")
    nbytes = _forward("nbytes", "Uncompressed size in bytes.")
    fill_value = _forward("fill_value", "Value of elements never written.")
    order = _forward("order", "Memory layout inside chunks: 'C' or 'F'.")
    zarr_format = _forward("zarr_format", "2 or 3.")
    path = _forward("path", "Path inside the store.")
    name = _forward("name", "Absolute name in the hierarchy, e.g. '/foo/bar'.")
    basename = _forward("basename", "Last part of the name.")
    store = _forward("store", "The store holding the array.")
    metadata = _forward("metadata", "The parsed metadata.")
    compressor = _forward("compressor", "The compressor codec, or None.")
    filters = _forward("filters", "Filter codecs applied before compression, as a tuple (zarr 3's form).")
    compressors = _forward("compressors", "zarr 3 form: v2 the compressor in a tuple, v3 the bytes->bytes codecs.")
    serializer = _forward("serializer", "The v3 array->bytes codec (inner chunks when sharded); None for v2.")
    read_only = _forward("read_only", "Whether writes are refused.")
    nchunks = _forward("nchunks", "Number of chunks in the grid.")
    cdata_shape = _forward("cdata_shape", "Number of chunks along each dimension.")
    synchronizer = _forward("synchronizer", "The process synchronizer, if any.")
    write_empty_chunks = _forward(
        "write_empty_chunks", "Whether writes store chunks equal to the fill value; None follows asyncarr.config."
    )
    config = _forward("config", "zarr 3's runtime settings of this handle: order and write_empty_chunks.")
    store_path = _forward("store_path", "zarr 3's store_path: the store, and the array's path inside it.")

    def with_config(self, config: dict[str, Any] | ArrayConfig) -> Array:
        """A new handle on this array with zarr 3's runtime settings ``config``; keys not given are kept."""
        return Array(self.async_array.with_config(config))

    @classmethod
    def open(cls, store: Any) -> Array:
        """Open the existing array in ``store`` (a Store or any store-like), as zarr 3's ``Array.open``."""
        return cls(_tracked(_run(AsyncArray.open(store))))

    @classmethod
    def create(
        cls,
        store: Any,
        *,
        shape: Any,
        dtype: Any,
        zarr_format: int = 3,
        chunk_shape: Any = None,
        chunks: Any = None,
        overwrite: bool = False,
        **kwargs: Any,
    ) -> Array:
        """zarr 3's (deprecated) ``Array.create``: a new array in ``store``; ``chunk_shape`` is v3's ``chunks``."""
        created = api.create(
            shape,
            store=store,
            dtype=dtype,
            zarr_format=zarr_format,
            chunks=chunk_shape or chunks or True,
            overwrite=overwrite,
            **kwargs,
        )
        return cls(_tracked(_run(created)))

    @property
    def attrs(self) -> Attributes:
        """User attributes; assignments write through."""
        return Attributes(self.async_array)

    @property
    def info(self) -> Any:
        """The summary table shown by the Zarr tutorials."""
        return _run(self.async_array.info("asyncarr.sync.Array"))

    @property
    def nchunks_initialized(self) -> int:
        """How many chunks are stored."""
        return _run(self.async_array.nchunks_initialized())

    @property
    def nbytes_stored(self) -> int:
        """Bytes stored for this array, metadata included."""
        return _run(self.async_array.nbytes_stored())

    def __getitem__(self, selection: Any) -> Any:
        return _read(self.async_array, "getitem", selection)

    def __setitem__(self, selection: Any, value: Any) -> None:
        _write(self.async_array, selection, value)

    @property
    def oindex(self) -> OIndex:
        """Orthogonal selection: ``z.oindex[[0, 2], :]`` indexes each axis on its own."""
        return OIndex(self.async_array)

    @property
    def vindex(self) -> VIndex:
        """Pointwise selection: ``z.vindex[[0, 1], [2, 3]]`` or ``z.vindex[mask]``."""
        return VIndex(self.async_array)

    # ``fields=`` (zarr-python 2's keyword): the record fields to read or write; reads carry it
    # inside the selection (`with_fields`), as `_read` hands the core a selection only.

    def get_orthogonal_selection(self, selection: Any, *, fields: Any = None) -> Any:
        """Read an orthogonal selection."""
        return _read(self.async_array, "orthogonal", with_fields(selection, fields, self.dtype))

    def set_orthogonal_selection(self, selection: Any, value: Any, *, fields: Any = None) -> None:
        """Write an orthogonal selection."""
        _run(self.async_array.set_orthogonal_selection(selection, value, fields=fields))

    def get_coordinate_selection(self, selection: Any, *, fields: Any = None) -> Any:
        """Read the points of a coordinate selection."""
        return _read(self.async_array, "coordinate", with_fields(selection, fields, self.dtype))

    def set_coordinate_selection(self, selection: Any, value: Any, *, fields: Any = None) -> None:
        """Write the points of a coordinate selection."""
        _run(self.async_array.set_coordinate_selection(selection, value, fields=fields))

    def get_mask_selection(self, mask: Any, *, fields: Any = None) -> Any:
        """Read where a boolean mask of the array's shape is true."""
        return _read(self.async_array, "mask", with_fields(mask, fields, self.dtype))

    def set_mask_selection(self, mask: Any, value: Any, *, fields: Any = None) -> None:
        """Write where a boolean mask of the array's shape is true."""
        _run(self.async_array.set_mask_selection(mask, value, fields=fields))

    def get_basic_selection(self, selection: Any = Ellipsis, *, fields: Any = None) -> Any:
        """Read a NumPy basic selection (ints, slices, Ellipsis) only."""
        return _read(self.async_array, "basic", with_fields(selection, fields, self.dtype))

    def set_basic_selection(self, selection: Any, value: Any, *, fields: Any = None) -> None:
        """Write a NumPy basic selection only."""
        _run(self.async_array.set_basic_selection(selection, value, fields=fields))

    def iter_blocks(self, prefetch: int = 2) -> Iterator[tuple[tuple[int, ...], np.ndarray]]:
        """``for index, block in z.iter_blocks(prefetch=2)``: every block (shards when sharded, else
        chunks) in C order; the next ``prefetch`` are read while the caller works on the current one."""
        return _blocking_iteration(self.async_array.iter_blocks(prefetch))

    @property
    def blocks(self) -> BlockIndex:
        """Block selection: ``z.blocks[1, :2]`` reads whole chunks (shards when sharded) by grid index."""
        return BlockIndex(self.async_array)

    def get_block_selection(self, selection: Any) -> Any:
        """Read whole chunks (shards when sharded) by their grid indices."""
        return block_result(_read(self.async_array, "basic", self.async_array.block_slices(selection)), self.dtype)

    def set_block_selection(self, selection: Any, value: Any) -> None:
        """Write whole chunks (shards when sharded) by their grid indices."""
        _run(self.async_array.set_block_selection(selection, value))

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        data = np.asarray(self[...])
        return data if dtype is None else data.astype(dtype, copy=False)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __iter__(self) -> Iterator[Any]:
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        step = self.chunks[0] or 1
        for start in range(0, self.shape[0], step):
            yield from self[start : start + step]

    def resize(self, *shape: int | tuple[int, ...]) -> None:
        """Change the shape; chunks wholly outside it are deleted."""
        _run(self.async_array.resize(*shape))

    def append(self, data: Any, axis: int = 0) -> tuple[int, ...]:
        """Grow along ``axis`` with ``data``; return the new shape."""
        return _run(self.async_array.append(data, axis))

    def update_attributes(self, attributes: dict[str, Any]) -> Array:
        """Merge ``attributes`` into the stored attributes; return this array (``z = z.update_attributes(...)``)."""
        _run(self.async_array.update_attributes(attributes))
        return self

    def info_complete(self) -> Any:
        """zarr 3's info with stored bytes: the same table as ``info``, which has them already."""
        return _run(self.async_array.info_complete("asyncarr.sync.Array"))

    def __repr__(self) -> str:
        name = f" {self.name!r}" if self.path else ""
        return f"<asyncarr.sync.Array{name} {self.shape} {self.dtype}>"

    def __enter__(self) -> Array:
        return self

    def __exit__(self, *exc_info: object) -> None:
        _run(self.store.close())

    def __dask_tokenize__(self) -> tuple[Any, ...]:
        """What dask names this array by: where it is and its metadata (so dask need not pickle it)."""
        return ("asyncarr.sync.Array", *self.async_array.__dask_tokenize__())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Array):
            return NotImplemented
        return self.store.location == other.store.location and self.path == other.path

    __hash__ = None  # type: ignore[assignment]


class OIndex:
    """``z.oindex[...]``: orthogonal selection, each axis indexed on its own."""

    def __init__(self, async_array: AsyncArray) -> None:
        self._async_array = async_array

    def __getitem__(self, selection: Any) -> Any:
        return _read(self._async_array, "orthogonal", selection)

    def __setitem__(self, selection: Any, value: Any) -> None:
        _run(self._async_array.set_orthogonal_selection(selection, value))


class VIndex:
    """``z.vindex[...]``: coordinate selection (an integer array per axis) or one full-shape mask."""

    def __init__(self, async_array: AsyncArray) -> None:
        self._async_array = async_array

    def __getitem__(self, selection: Any) -> Any:
        return _read(self._async_array, "coordinate", selection)

    def __setitem__(self, selection: Any, value: Any) -> None:
        _run(self._async_array.set_coordinate_selection(selection, value))


class BlockIndex:
    """``z.blocks[...]``: whole chunks (shards when sharded) picked by ints and step-1 slices over the grid."""

    def __init__(self, async_array: AsyncArray) -> None:
        self._async_array = async_array

    def __getitem__(self, selection: Any) -> Any:
        selected = _read(self._async_array, "basic", self._async_array.block_slices(selection))
        return block_result(selected, self._async_array.dtype)

    def __setitem__(self, selection: Any, value: Any) -> None:
        _run(self._async_array.set_block_selection(selection, value))


class Group:
    """A Zarr group: a mapping of names to arrays and groups; ``Group(store)`` opens one."""

    def __init__(self, store: Any = None, path: str | None = None, read_only: bool = False) -> None:
        if isinstance(store, AsyncGroup):
            self.async_group = store
        else:
            opened = _run(api.open_group(store, "r" if read_only else "r+", path=path))
            self.async_group = opened
            _opened_stores.add(opened.store)

    @property
    def _node(self) -> AsyncGroup:
        return self.async_group

    path = _forward("path", "Path inside the store.")
    name = _forward("name", "Absolute name in the hierarchy.")
    basename = _forward("basename", "Last part of the name.")
    store = _forward("store", "The store holding the group.")
    metadata = _forward("metadata", "The parsed metadata.")
    read_only = _forward("read_only", "Whether writes are refused.")
    zarr_format = _forward("zarr_format", "2 or 3.")
    synchronizer = _forward("synchronizer", "zarr 2's group synchronizer: always None, as in zarr 3.")
    store_path = _forward("store_path", "zarr 3's store_path: the store, and the group's path inside it.")

    @classmethod
    def open(cls, store: Any, zarr_format: int | None = None) -> Group:
        """Open the existing group in ``store`` (a Store or any store-like), as zarr 3's ``Group.open``."""
        return cls(_tracked(_run(AsyncGroup.open(store, zarr_format=zarr_format))))

    @classmethod
    def from_store(
        cls, store: Any, *, attributes: dict[str, Any] | None = None, zarr_format: int = 3, overwrite: bool = False
    ) -> Group:
        """Create a new group in ``store`` (zarr 3's); ContainsGroupError/ContainsArrayError unless ``overwrite``."""
        created = AsyncGroup.from_store(store, attributes=attributes, zarr_format=zarr_format, overwrite=overwrite)
        return cls(_tracked(_run(created)))

    @property
    def attrs(self) -> Attributes:
        """User attributes; assignments write through."""
        return Attributes(self.async_group)

    def info_complete(self) -> Any:
        """zarr 3's complete table: as ``info``, counting every member of the hierarchy below the group."""
        return _run(self.async_group.info_complete("asyncarr.sync.Group"))

    @property
    def info(self) -> Any:
        """A summary table of the group."""
        return _run(self.async_group.info("asyncarr.sync.Group"))

    def __getitem__(self, name: str) -> Array | Group:
        return facade_of(_run(self.async_group.getitem(name)))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and _run(self.async_group.contains(name))

    def __setitem__(self, name: str, value: Any) -> None:
        _run(self.async_group.setitem(name, value))

    def __delitem__(self, name: str) -> None:
        _run(self.async_group.delitem(name))

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.keys())

    def keys(self) -> list[str]:
        """Names of the direct children, sorted."""
        return _run(_collect(self.async_group.keys()))

    def members(self, max_depth: int | None = 0) -> tuple[tuple[str, Array | Group], ...]:
        """``(name, node)`` for the children, ``max_depth`` levels deeper too (None: all), as zarr 3 returns them."""
        found = _run(_collect(self.async_group.members(max_depth)))
        return tuple((name, facade_of(node)) for name, node in found)

    def values(self) -> list[Array | Group]:
        """The direct children."""
        return [node for _, node in self.members()]

    def items(self) -> list[tuple[str, Array | Group]]:
        """``(name, node)`` for every direct child."""
        return list(self.members())

    def arrays(self) -> list[tuple[str, Array]]:
        """``(name, array)`` for the child arrays."""
        return [(name, Array(node)) for name, node in _run(_collect(self.async_group.arrays()))]

    def groups(self) -> list[tuple[str, Group]]:
        """``(name, group)`` for the child groups."""
        return [(name, Group(node)) for name, node in _run(_collect(self.async_group.groups()))]

    def array_keys(self) -> list[str]:
        """Names of the child arrays."""
        return _run(_collect(self.async_group.array_keys()))

    def group_keys(self) -> list[str]:
        """Names of the child groups."""
        return _run(_collect(self.async_group.group_keys()))

    def array_values(self) -> Iterator[Array]:
        """The child arrays."""
        return (array for _, array in self.arrays())

    def group_values(self) -> Iterator[Group]:
        """The child groups."""
        return (group for _, group in self.groups())

    def get(self, name: str, default: Any = None) -> Array | Group | Any:
        """The member at ``name`` (a path like 'a/b'), or ``default`` if nothing is there."""
        node = _run(self.async_group.get(name, _MISSING))
        return default if node is _MISSING else facade_of(node)

    def nmembers(self, max_depth: int | None = 0) -> int:
        """How many members ``members(max_depth)`` gives: the children, ``max_depth`` levels deeper too (None: all)."""
        return _run(self.async_group.nmembers(max_depth))

    def move(self, source: str, dest: str) -> None:
        """Rename the member ``source`` to ``dest``: copied in full first, then the source deleted."""
        _run(self.async_group.move(source, dest))

    def create_group(self, name: str, overwrite: bool = False, **kwargs: Any) -> Group:
        """Create a child group (and missing intermediate groups)."""
        return Group(_run(self.async_group.create_group(name, overwrite=overwrite, **kwargs)))

    def require_group(self, name: str) -> Group:
        """Open the child group ``name``, creating it if missing."""
        return Group(_run(self.async_group.require_group(name)))

    def create_array(self, name: str, **kwargs: Any) -> Array:
        """Create a child array; ``data=`` fills it."""
        return Array(_run(self.async_group.create_array(name, **kwargs)))

    create_dataset = create_array

    def require_groups(self, *names: str) -> tuple[Group, ...]:
        """``require_group`` for each name; the groups in the order of ``names``."""
        return tuple(Group(group) for group in _run(self.async_group.require_groups(*names)))

    def create_hierarchy(
        self, nodes: dict[str, Any], *, overwrite: bool = False
    ) -> Iterator[tuple[str, Array | Group]]:
        """Create the nodes ``nodes`` describes below this group now; ``(path, node)`` for each."""
        created = _run(_collect(self.async_group.create_hierarchy(nodes, overwrite=overwrite)))
        return iter([(path, facade_of(node)) for path, node in created])

    def require_array(self, name: str, **kwargs: Any) -> Array:
        """Open the child array ``name`` if it matches, else create it."""
        return Array(_run(self.async_group.require_array(name, **kwargs)))

    require_dataset = require_array

    def zeros(self, name: str, **kwargs: Any) -> Array:
        """Create a child array of zeros."""
        return Array(_run(self.async_group.zeros(name, **kwargs)))

    def ones(self, name: str, **kwargs: Any) -> Array:
        """Create a child array of ones."""
        return Array(_run(self.async_group.ones(name, **kwargs)))

    def full(self, name: str, fill_value: Any, **kwargs: Any) -> Array:
        """Create a child array filled with ``fill_value``."""
        return Array(_run(self.async_group.full(name, fill_value, **kwargs)))

    def empty(self, name: str, **kwargs: Any) -> Array:
        """Create a child array with the default fill value."""
        return Array(_run(self.async_group.empty(name, **kwargs)))

    def array(self, name: str, data: Any, **kwargs: Any) -> Array:
        """Create a child array holding ``data``."""
        return Array(_run(self.async_group.array(name, data, **kwargs)))

    def empty_like(self, name: str, data: Any, **kwargs: Any) -> Array:
        """Create the child array ``name`` shaped, chunked and encoded like ``data``, unwritten."""
        return Array(_run(self.async_group.empty_like(name, data, **kwargs)))

    def zeros_like(self, name: str, data: Any, **kwargs: Any) -> Array:
        """Create the child array ``name`` of zeros, like ``data``."""
        return Array(_run(self.async_group.zeros_like(name, data, **kwargs)))

    def ones_like(self, name: str, data: Any, **kwargs: Any) -> Array:
        """Create the child array ``name`` of ones, like ``data``."""
        return Array(_run(self.async_group.ones_like(name, data, **kwargs)))

    def full_like(self, name: str, data: Any, **kwargs: Any) -> Array:
        """Create the child array ``name`` like ``data``, filled with ``fill_value=`` (default: ``data``'s)."""
        return Array(_run(self.async_group.full_like(name, data, **kwargs)))

    def tree(self, expand: bool | None = None, level: int | None = None) -> Any:
        """The hierarchy below this group, ``level`` levels below the children at most; printable."""
        return _run(self.async_group.tree(expand, level))

    def update_attributes(self, attributes: dict[str, Any]) -> Group:
        """Merge ``attributes`` into the stored attributes; return this group (``g = g.update_attributes(...)``)."""
        _run(self.async_group.update_attributes(attributes))
        return self

    def __repr__(self) -> str:
        return f"<asyncarr.sync.Group {self.name!r}>"

    def __dask_tokenize__(self) -> tuple[Any, ...]:
        """What dask names this group by: where it is and its metadata (so dask need not pickle it)."""
        return ("asyncarr.sync.Group", *self.async_group.__dask_tokenize__())

    def __enter__(self) -> Group:
        return self

    def __exit__(self, *exc_info: object) -> None:
        _run(self.store.close())


def facade_of(node: AsyncArray | AsyncGroup) -> Array | Group:
    """The facade object over ``node``; its store is closed at interpreter exit with the others the facade opened."""
    return Array(_tracked(node)) if isinstance(node, AsyncArray) else Group(_tracked(node))


_NodeT = TypeVar("_NodeT", AsyncArray, AsyncGroup)


def _tracked(node: _NodeT) -> _NodeT:
    """``node``, its store to be closed at interpreter exit with the others the facade opened."""
    _opened_stores.add(node.store)
    return node


# The async classes cannot import this module (it imports them): they learn their facades here.
AsyncArray._facade_class = Array
AsyncGroup._facade_class = Group
