"""AsyncArray: one Zarr array — metadata, indexing, the codec pipeline and a store, glued together."""

from __future__ import annotations

import dataclasses
import math
import types
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

import numpy as np

from . import config
from .array_storage import StoredChunks
from .block_iteration import iter_blocks
from .chunk_cache import active_cache
from .chunk_io import ChunkIO
from .codecs.executor import run_in_codec_pool
from .codecs.pipeline import CodecPipeline
from .concurrency import for_each_concurrently
from .errors import ArrayNotFoundError, ContainsGroupError, MetadataError, ReadOnlyError
from .indexing import BasicIndexer, ChunkProjection, OrthogonalIndexer, block_result, block_selection_slices
from .indexing_points import CoordinateIndexer, Indexer, MaskIndexer, indexer_for
from .locks import ProcessSynchronizer, ThreadSynchronizer, chunk_lock
from .metadata import ArrayMetadataV2, ArrayMetadataV3, default_fill_value, parse_node
from .metadata._json import canonical_json
from .metadata.dtypes import pop_fields, select_fields
from .nodes import (
    PickledByConfiguration,
    describe_missing,
    join_path,
    node_key,
    normalize_path,
    read_documents,
    write_documents,
)
from .shards import partial_read_codec
from .stores.base import Store
from .stores.url import as_store

if TYPE_CHECKING:  # type-only: the facade imports this module at run time, not the reverse
    from .facade import Array

__all__ = [
    "ArrayConfig",
    "AsyncArray",
    "AsyncOIndex",
    "AsyncVIndex",
    "StorePath",
    "split_fields",
    "store_and_path",
    "with_fields",
]

ArrayMetadata = ArrayMetadataV2 | ArrayMetadataV3
Synchronizer = ThreadSynchronizer | ProcessSynchronizer | None


# The indexer of each kind of read selection, by the name `AsyncArray.read_blocking` takes.
_READ_INDEXERS: dict[str, Any] = {
    "getitem": indexer_for,
    "basic": BasicIndexer,
    "orthogonal": OrthogonalIndexer,
    "coordinate": CoordinateIndexer,
    "mask": MaskIndexer,
}


Fields = str | list[str] | None


def _is_field_list(part: Any) -> bool:
    return isinstance(part, list) and bool(part) and all(isinstance(name, str) for name in part)


def split_fields(selection: Any, fields: Any = None) -> tuple[Fields, Any]:
    """(record fields, the rest of the selection), zarr-python 2's rule: a string anywhere in the
    selection tuple names a field; a list of strings (alone or in the tuple) names fields too,
    as in NumPy's ``a[["x", "y"]]``. An explicit ``fields`` replaces any names in the selection;
    no names (or an empty ``fields``) is None, the whole records. A ``fields`` that is not a
    string or a list of strings raises IndexError, as zarr-python 2."""
    if _is_field_list(selection):
        names: Any = list(selection)
        selection = ()
    elif isinstance(selection, tuple) and any(_is_field_list(part) for part in selection):
        named = [part for part in selection if isinstance(part, str) or _is_field_list(part)]
        rest = tuple(part for part in selection if not (isinstance(part, str) or _is_field_list(part)))
        names = [name for part in named for name in ([part] if isinstance(part, str) else part)]
        selection = rest[0] if len(rest) == 1 else rest
    else:
        names, selection = pop_fields(selection)
    if fields is not None:
        if not isinstance(fields, str | list | tuple) or not all(
            isinstance(name, str) for name in ([fields] if isinstance(fields, str) else fields)
        ):
            raise IndexError(f"'fields' must be a string or a list of strings, got {fields!r}")
        names = fields if isinstance(fields, str) else list(fields)
    return (names or None), selection


def with_fields(selection: Any, fields: Any, dtype: np.dtype) -> Any:
    """``selection`` carrying an explicit ``fields=`` the way `split_fields` reads it back (the
    names inside the selection tuple, replacing any already there): how the blocking facade
    hands ``fields=`` to reads that take a selection only. Names `dtype` lacks raise IndexError."""
    if fields is None:
        return selection
    names, rest = split_fields(selection, fields)
    if names is not None:
        select_fields(np.empty(0, dtype=dtype), names)
    if names is None:
        return rest
    return (*(rest if isinstance(rest, tuple) else (rest,)), names)


def _finalized(indexer: Indexer, buffer: np.ndarray, fields: Fields = None) -> Any:
    """The read's result from its filled buffer, only ``fields`` of its records when given
    (a field of sub-arrays adds their axes): a NumPy scalar for a 0-d result."""
    out = select_fields(indexer.finalize(buffer), fields)
    return out[()] if out.ndim == 0 else out


@dataclasses.dataclass(frozen=True)
class ArrayConfig:
    """zarr 3's runtime settings of an array handle (``z.config``); never stored in the metadata."""

    order: str
    write_empty_chunks: bool

    def to_dict(self) -> dict[str, Any]:
        """``{"order": ..., "write_empty_chunks": ...}``, as zarr 3's ``ArrayConfig.to_dict()``."""
        return dataclasses.asdict(self)


class StorePath(NamedTuple):
    """Where a node lives (zarr 3's ``store_path``): its store and its path inside it."""

    store: Store
    path: str

    def __str__(self) -> str:
        return self.store.key_url(self.path) if self.path else self.store.location


def store_and_path(store: Any, path: str = "") -> tuple[Store, str]:
    """The Store a store-like names (path, URL, mapping, None or a Store) and ``path`` inside it."""
    if isinstance(store, Store):
        return store, normalize_path(path)
    resolved, inner = as_store(store)
    return resolved, join_path(inner, normalize_path(path))


def _array_config_settings(array_config: Any) -> dict[str, Any]:
    """The settings a ``with_config`` argument gives (a dict or an ArrayConfig of either library), checked."""
    to_dict = getattr(array_config, "to_dict", None)
    settings = dict(to_dict() if callable(to_dict) else array_config)
    unknown = sorted(settings.keys() - {"order", "write_empty_chunks"})
    if unknown:
        raise TypeError(f"unknown array config keys {unknown}; zarr 3's has 'order' and 'write_empty_chunks'")
    if "order" in settings and settings["order"] not in ("C", "F"):
        raise ValueError(f"Expected one of ('C', 'F'), got {settings['order']!r} instead.")
    return settings


class AsyncArray(StoredChunks, PickledByConfiguration):
    """A Zarr array in a store; every method that touches the store is a coroutine."""

    # zarr 3's runtime order, set by `with_config`: reported by `config` only (reads return C-ordered arrays).
    _config_order: str | None = None

    _node_kind = "array"

    def __init__(
        self,
        store: Store,
        path: str,
        metadata: ArrayMetadata,
        *,
        read_only: bool = False,
        synchronizer: Synchronizer = None,
        write_empty_chunks: bool | None = None,
    ) -> None:
        self._store = store
        self._path = normalize_path(path)
        self._metadata = metadata
        self._read_only = read_only or store.read_only
        self._synchronizer = synchronizer
        self._write_empty_chunks = _checked_write_empty_chunks(write_empty_chunks)
        try:
            self._pipeline = CodecPipeline.from_metadata(metadata)
        except MetadataError as exc:
            document = "zarr.json" if metadata.zarr_format == 3 else ".zarray"
            raise MetadataError(f"{store.key_url(node_key(self._path, document))}: {exc}") from exc

    # -- opening and creating ---------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        store: Store | Any,
        path: str = "",
        *,
        read_only: bool = False,
        zarr_format: int | None = None,
        synchronizer: Synchronizer = None,
        write_empty_chunks: bool | None = None,
    ) -> AsyncArray:
        """Open the existing array at ``path`` of ``store`` (a Store or any store-like, as zarr 3's ``open``);
        raise ArrayNotFoundError or ContainsGroupError."""
        store, path = store_and_path(store, path)
        documents = await read_documents(store, path, zarr_format)
        return cls.from_documents(
            store,
            path,
            documents,
            read_only=read_only,
            synchronizer=synchronizer,
            write_empty_chunks=write_empty_chunks,
        )

    @classmethod
    def from_documents(
        cls,
        store: Store,
        path: str,
        documents: Mapping[str, bytes | None],
        *,
        read_only: bool = False,
        synchronizer: Synchronizer = None,
        write_empty_chunks: bool | None = None,
    ) -> AsyncArray:
        """Build the array from already-fetched metadata documents (e.g. consolidated ones)."""
        if not any(value is not None for value in documents.values()):
            raise ArrayNotFoundError(describe_missing(store, path))
        metadata = parse_node(dict(documents), store.key_url(path) if path else store.location)
        if not isinstance(metadata, ArrayMetadataV2 | ArrayMetadataV3):
            raise ContainsGroupError(
                f"{store.key_url(path) if path else store.location}: a group is here, not an array"
            )
        return cls(
            store, path, metadata, read_only=read_only, synchronizer=synchronizer, write_empty_chunks=write_empty_chunks
        )

    @classmethod
    async def create(
        cls,
        store: Store,
        path: str,
        metadata: ArrayMetadata,
        *,
        synchronizer: Synchronizer = None,
        write_empty_chunks: bool | None = None,
    ) -> AsyncArray:
        """Write ``metadata`` as a new array at ``path`` (the caller has checked for conflicts)."""
        array = cls(store, path, metadata, synchronizer=synchronizer, write_empty_chunks=write_empty_chunks)
        array._check_writable()
        await write_documents(store, array._path, metadata.to_documents())
        return array

    # -- properties -------------------------------------------------------------------------

    store = property(lambda self: self._store, doc="The store holding the array.")
    path = property(lambda self: self._path, doc="Path of the array inside its store ('' for the root).")
    metadata = property(lambda self: self._metadata, doc="The parsed metadata (ArrayMetadataV2 or V3).")
    read_only = property(lambda self: self._read_only, doc="Whether writes are refused.")
    write_empty_chunks = property(
        lambda self: self._write_empty_chunks,
        doc="Whether this handle stores chunks equal to the fill value (False: deletes them); "
        "None follows ``config.write_empty_chunks`` at each write. A property of the handle, not stored.",
    )
    shape = property(lambda self: self._metadata.shape, doc="The array's shape.")
    _grid = property(lambda self: self._metadata.chunks, doc="Shape of one stored object: a chunk, or a shard.")

    @property
    def chunks(self) -> tuple[int, ...]:
        """The shape of one chunk (for sharded arrays: of the inner chunks, as zarr-python reports)."""
        shard_codec = partial_read_codec(self._pipeline)
        return shard_codec.inner_chunk_shape if shard_codec is not None else self._metadata.chunks

    @property
    def shards(self) -> tuple[int, ...] | None:
        """The shape of one shard, or None for an array without sharding."""
        return self._metadata.chunks if partial_read_codec(self._pipeline) is not None else None

    dtype = property(lambda self: self._metadata.dtype, doc="The NumPy data type.")
    fill_value = property(lambda self: self._metadata.fill_value, doc="Value of elements never written.")
    order = property(lambda self: self._metadata.order, doc="Memory layout inside chunks: 'C' or 'F'.")
    zarr_format = property(lambda self: self._metadata.zarr_format, doc="2 or 3.")

    @property
    def _chunk_pipeline(self) -> CodecPipeline:
        """The codecs each chunk goes through: the inner chain of a sharded array."""
        shard_codec = partial_read_codec(self._pipeline)
        return shard_codec.inner_pipeline if shard_codec is not None else self._pipeline

    compressor = property(lambda self: self._chunk_pipeline.compressor, doc="The compressor codec, or None.")

    @property
    def filters(self) -> tuple[Any, ...]:
        """Filter codecs applied before compression, as a tuple (zarr 3's form, for v2 arrays too)."""
        return tuple(self._chunk_pipeline.filters)

    @property
    def compressors(self) -> tuple[Any, ...]:
        """The compressors, zarr 3's form: v2 the compressor in a tuple, v3 the bytes->bytes codecs."""
        pipeline = self._chunk_pipeline
        if self.zarr_format == 2:
            return () if pipeline.compressor is None else (pipeline.compressor,)
        return tuple(pipeline.compressors)

    @property
    def serializer(self) -> Any:
        """The array->bytes codec of a v3 array (of its inner chunks when sharded); None for v2."""
        return getattr(self._chunk_pipeline, "array_bytes", None) if self.zarr_format == 3 else None

    synchronizer = property(lambda self: self._synchronizer, doc="The process synchronizer, if any.")

    @property
    def config(self) -> ArrayConfig:
        """zarr 3's runtime settings: ``order``, and the ``write_empty_chunks`` writes use now."""
        write_empty = self._write_empty_chunks
        return ArrayConfig(
            order=self._config_order or self.order,
            write_empty_chunks=config.get("write_empty_chunks") if write_empty is None else write_empty,
        )

    def with_config(self, array_config: Mapping[str, Any] | Any) -> AsyncArray:
        """A new handle on this array with zarr 3's runtime settings ``array_config``; keys not given are kept."""
        settings = _array_config_settings(array_config)
        handle = AsyncArray(
            self._store,
            self._path,
            self._metadata,
            read_only=self._read_only,
            synchronizer=self._synchronizer,
            write_empty_chunks=settings.get("write_empty_chunks", self._write_empty_chunks),
        )
        handle._config_order = settings.get("order", self._config_order)
        return handle

    @property
    def store_path(self) -> StorePath:
        """zarr 3's ``store_path``: the store and the path of the array inside it."""
        return StorePath(self._store, self._path)

    @property
    def oindex(self) -> AsyncOIndex:
        """Orthogonal selection as coroutines: ``await z.oindex.getitem(([0, 2], slice(None)))``."""
        return AsyncOIndex(self)

    @property
    def vindex(self) -> AsyncVIndex:
        """Pointwise selection as coroutines: ``await z.vindex.getitem(([0, 1], [2, 3]))`` or a full-shape mask."""
        return AsyncVIndex(self)

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Uncompressed size of the whole array in bytes."""
        return self.size * self.dtype.itemsize

    @property
    def name(self) -> str:
        """The array's absolute name in its hierarchy, e.g. '/foo/bar/baz'."""
        return "/" + self._path

    @property
    def basename(self) -> str:
        """The last part of the name, e.g. 'baz'."""
        return self._path.rsplit("/", 1)[-1]

    @property
    def attrs(self) -> Mapping[str, Any]:
        """A read-only snapshot of the user attributes; change them with ``update_attributes``."""
        return types.MappingProxyType(dict(self._metadata.attributes))

    @property
    def cdata_shape(self) -> tuple[int, ...]:
        """Number of chunks along each dimension (inner chunks for a sharded array, as zarr-python counts)."""
        return tuple(-(-s // c) for s, c in zip(self.shape, self.chunks, strict=True))

    @property
    def nchunks(self) -> int:
        """Number of chunks in the grid (inner chunks for a sharded array)."""
        return math.prod(self.cdata_shape)

    @property
    def _stored_grid_shape(self) -> tuple[int, ...]:
        """Number of stored objects (chunks, or shards) along each dimension."""
        return tuple(-(-s // c) for s, c in zip(self.shape, self._grid, strict=True))

    def __repr__(self) -> str:
        name = f" {self.name!r}" if self._path else ""
        return f"<AsyncArray{name} {self.shape} {self.dtype}>"

    async def __aenter__(self) -> AsyncArray:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._store.close()

    # The facade's class, set by `asyncarr.facade` when it is imported (asyncarr's __init__ imports
    # it): the facade depends on this module, so this module cannot import it to find the class.
    _facade_class: ClassVar[type[Array]]

    def sync(self) -> Array:
        """Return the blocking facade (``asyncarr.sync.Array``) over this array."""
        return self._facade_class(self)

    # -- reading ------------------------------------------------------------------------------

    def _chunk_key(self, chunk_coords: tuple[int, ...]) -> str:
        return node_key(self._path, self._metadata.chunk_key(chunk_coords))

    def _chunk_key_function(self) -> Callable[[tuple[int, ...]], str]:
        """`_chunk_key` with the key layout looked up once: calls run it for every chunk they touch."""
        if not self.shape:
            key = self._chunk_key(())
            return lambda chunk_coords: key
        prefix, separator = self._chunk_key_layout()
        head = node_key(self._path, prefix)
        return lambda chunk_coords: head + separator.join(map(str, chunk_coords))

    def _fill_scalar(self) -> Any:
        fill = self._metadata.fill_value
        if fill is None and getattr(self._metadata, "holds_python_objects", False):
            return None  # a v2 object array's `null`: missing elements read as None, as in zarr-python 2
        return default_fill_value(self.dtype) if fill is None else fill

    def _fields_of(self, selection: Any, fields: Any) -> tuple[Fields, Any]:
        """`split_fields`, with the names checked against the data type before any chunk is read.

        Without ``fields=``, a selection of an array without fields is left whole: a name in it
        is then refused by the indexer with NumPy's IndexError, as ``a["x"]`` is in NumPy."""
        if fields is None and self.dtype.names is None:
            return None, selection
        names, selection = split_fields(selection, fields)
        if names is not None:
            select_fields(np.empty(0, dtype=self.dtype), names)  # IndexError for a name it lacks
        return names, selection

    async def getitem(self, selection: Any, *, fields: Any = None) -> Any:
        """Read a selection with NumPy's semantics (ints, slices, index arrays, masks) into a new ndarray.

        Of a structured array, a field name (``"x"``) or names (``["x", "y"]``) anywhere in the
        selection, or ``fields=``, read only those fields, as zarr-python 2 does."""
        fields, selection = self._fields_of(selection, fields)
        return await self._get_selection(indexer_for(selection, self.shape, self._grid), fields)

    async def get_basic_selection(self, selection: Any = Ellipsis, *, fields: Any = None) -> Any:
        """Read a basic selection only (ints, slices, Ellipsis); index arrays raise IndexError."""
        fields, selection = self._fields_of(selection, fields)
        return await self._get_selection(BasicIndexer(selection, self.shape, self._grid), fields)

    async def set_basic_selection(self, selection: Any, value: Any, *, fields: Any = None) -> None:
        """Write a basic selection only (ints, slices, Ellipsis); ``fields=`` writes only those fields."""
        fields, selection = self._fields_of(selection, fields)
        await self._set_selection(BasicIndexer(selection, self.shape, self._grid), value, fields)

    def block_slices(self, selection: Any) -> tuple[slice, ...]:
        """The basic selection of the whole blocks ``selection`` picks on the block grid (shards when sharded)."""
        return block_selection_slices(selection, self.shape, self.shards or self.chunks)

    async def get_block_selection(self, selection: Any) -> Any:
        """Read whole chunks by their grid indices (shards when sharded, as zarr-python does), edge ones truncated."""
        return block_result(await self.get_basic_selection(self.block_slices(selection)), self.dtype)

    def iter_blocks(self, prefetch: int = 2) -> AsyncIterator[tuple[tuple[int, ...], np.ndarray]]:
        """``async for index, block in a.iter_blocks(prefetch=2)``: every block (shards when sharded,
        else chunks) in C order, edge blocks truncated; the next ``prefetch`` are read while the
        caller works on the current one. ``index`` is the block's grid index (`block_slices` gives its region)."""
        return iter_blocks(self, prefetch)

    async def set_block_selection(self, selection: Any, value: Any) -> None:
        """Write whole chunks by their grid indices (shards when sharded); ``value`` broadcasts to their data."""
        await self.set_basic_selection(self.block_slices(selection), value)

    async def get_orthogonal_selection(self, selection: Any, *, fields: Any = None) -> Any:
        """Read an orthogonal selection: ints, slices, integer arrays or masks, each axis on its own."""
        fields, selection = self._fields_of(selection, fields)
        return await self._get_selection(OrthogonalIndexer(selection, self.shape, self._grid), fields)

    async def get_coordinate_selection(self, selection: Any, *, fields: Any = None) -> Any:
        """Read the points ``a[idx0, idx1, ...]`` (integer arrays, broadcast) or those of one full-shape mask."""
        fields, selection = self._fields_of(selection, fields)
        return await self._get_selection(CoordinateIndexer(selection, self.shape, self._grid), fields)

    async def get_mask_selection(self, mask: Any, *, fields: Any = None) -> Any:
        """Read, as a 1-D array, the elements where a boolean mask of the array's shape is true."""
        fields, mask = self._fields_of(mask, fields)
        return await self._get_selection(MaskIndexer(mask, self.shape, self._grid), fields)

    async def _get_selection(self, indexer: Indexer, fields: Fields = None) -> Any:
        # Pointwise indexers fill a buffer (all points along one axis) that finalize() reshapes.
        buffer = np.empty(indexer.buffer_shape, dtype=self.dtype)
        await self._read_into(indexer, buffer)
        return _finalized(indexer, buffer, fields)

    @property
    def reads_blocking(self) -> bool:
        """Whether `read_blocking` may serve reads here: stores with blocking I/O (local, memory)."""
        return self._store.supports_sync_io

    def read_blocking(self, kind: str, selection: Any, *, fields: Any = None) -> Any:
        """Read in the calling thread, with no event loop: the sync facade's path for local and memory stores.

        ``kind`` names the selection as the coroutines do: ``"getitem"``, ``"basic"``,
        ``"orthogonal"``, ``"coordinate"`` or ``"mask"``. Returns ``NotImplemented`` when the
        read needs the event loop (a store without blocking I/O, or part of a shard): await the
        coroutine instead.
        """
        if not self.reads_blocking:
            return NotImplemented
        fields, selection = self._fields_of(selection, fields)
        indexer = _READ_INDEXERS[kind](selection, self.shape, self._grid)
        chunk_io = self._chunk_io()
        projections = list(indexer)
        if not chunk_io.serves_blocking(projections):
            return NotImplemented
        buffer = np.empty(indexer.buffer_shape, dtype=self.dtype)
        chunk_io.read_into_blocking(projections, buffer)
        return _finalized(indexer, buffer, fields)

    def _chunk_io(self) -> ChunkIO:
        """The chunk mover for this array as it is now (shape and metadata can change between calls)."""
        return ChunkIO(
            store=self._store,
            pipeline=self._pipeline,
            chunk_key=self._chunk_key_function(),
            grid=self._grid,
            shape=self.shape,
            dtype=self.dtype,
            fill=self._fill_scalar(),
            synchronizer=self._synchronizer,
            write_empty_chunks=self._write_empty_chunks,
            cache_token=self._cache_token() if active_cache() is not None else "",
        )

    def _cache_token(self) -> str:
        """What decoding this array's chunks depends on (all of the metadata but shape and attributes),
        as the decoded-chunk cache's key: handles on one array share entries, a recreated array never
        sees another's. Kept until the metadata object changes."""
        memo = self.__dict__.get("_cache_token_memo")
        if memo is None or memo[0] is not self._metadata:
            document = {k: v for k, v in self._metadata.to_json().items() if k not in ("shape", "attributes")}
            memo = self.__dict__["_cache_token_memo"] = (self._metadata, canonical_json(document))
        return memo[1]

    async def _read_into(self, indexer: Any, out: np.ndarray) -> None:
        await self._chunk_io().read_into(indexer, out)

    # -- writing ------------------------------------------------------------------------------

    def _check_writable(self) -> None:
        if self._read_only:
            where = self._store.key_url(self._path) if self._path else self._store.location
            raise ReadOnlyError(f"{where}: the array is read-only; open it with mode 'r+' or 'a' to change it")

    async def setitem(self, selection: Any, value: Any, *, fields: Any = None) -> None:
        """Write ``value`` (scalar, broadcastable array, or another array) into a selection, as NumPy would.

        A field name (or names, or ``fields=``) writes only those fields of a structured array,
        the others kept: ``z["x"] = values``."""
        fields, selection = self._fields_of(selection, fields)
        await self._set_selection(indexer_for(selection, self.shape, self._grid), value, fields)

    def write_blocking(self, selection: Any, value: Any) -> Any:
        """`setitem` in the calling thread, with no event loop: the sync facade's path for writes of
        whole chunks, small ones to local files and large ones to any store with blocking I/O
        (`ChunkIO.write_blocking`).

        Returns ``NotImplemented`` when the write needs the event loop (any other store, selection
        or value, or fields): await `setitem` instead. Otherwise the write is done, but for chunks
        another writer of this process held: then it returns a coroutine writing those, taking
        turns with that writer, to await on the event loop; else None.
        """
        if not self._store.supports_sync_io or self.dtype.names is not None:
            return NotImplemented
        if isinstance(getattr(value, "async_array", value), AsyncArray):
            return NotImplemented
        indexer = indexer_for(selection, self.shape, self._grid)
        if not isinstance(indexer, BasicIndexer):
            return NotImplemented
        self._check_writable()
        chunk_io = self._chunk_io()
        projections = list(indexer)
        if not projections or not chunk_io.writes_blocking(projections):
            return NotImplemented
        array_value = indexer.value_buffer(_broadcast_value(value, tuple(indexer.shape), self.dtype))
        deferred = chunk_io.write_blocking(projections, array_value)
        return chunk_io.write(deferred, array_value, _pieces_of(array_value)) if deferred else None

    async def set_orthogonal_selection(self, selection: Any, value: Any, *, fields: Any = None) -> None:
        """Write ``value`` into an orthogonal selection (each axis indexed on its own)."""
        fields, selection = self._fields_of(selection, fields)
        await self._set_selection(OrthogonalIndexer(selection, self.shape, self._grid), value, fields)

    async def set_coordinate_selection(self, selection: Any, value: Any, *, fields: Any = None) -> None:
        """Write ``value`` at the points ``a[idx0, idx1, ...]``; of repeated points the last value wins."""
        fields, selection = self._fields_of(selection, fields)
        await self._set_selection(CoordinateIndexer(selection, self.shape, self._grid), value, fields)

    async def set_mask_selection(self, mask: Any, value: Any, *, fields: Any = None) -> None:
        """Write ``value`` where a boolean mask of the array's shape is true."""
        fields, mask = self._fields_of(mask, fields)
        await self._set_selection(MaskIndexer(mask, self.shape, self._grid), value, fields)

    async def _set_selection(self, indexer: Indexer, value: Any, fields: Fields = None) -> None:
        self._check_writable()
        if fields is not None:
            await self._set_fields(indexer, value, fields)
            return
        source = getattr(value, "async_array", value)
        if isinstance(source, AsyncArray):
            if source.shape != tuple(indexer.shape):
                raise ValueError(
                    f"cannot copy an array of shape {source.shape} into a selection of shape {tuple(indexer.shape)}"
                )
            if not isinstance(indexer, BasicIndexer):
                # Only basic out selections are slices of the source itself: read it whole.
                value, source = await source.getitem(Ellipsis), None
        array_value = None
        if isinstance(source, AsyncArray):

            async def piece_of(projection: ChunkProjection) -> Any:
                return await source.getitem(projection.out_selection)
        else:
            array_value = indexer.value_buffer(_broadcast_value(value, tuple(indexer.shape), self.dtype))
            piece_of = _pieces_of(array_value)

        await self._chunk_io().write(indexer, array_value, piece_of)

    async def _set_fields(self, indexer: Indexer, value: Any, fields: str | list[str]) -> None:
        """Write only ``fields`` of the selected records: each chunk read, changed and written
        back under its chunk lock, as partial writes are, so other fields stay as they were."""
        field_dtype = select_fields(np.empty(0, dtype=self.dtype), fields).dtype
        source = getattr(value, "async_array", value)
        if isinstance(source, AsyncArray):
            value = await source.getitem(Ellipsis)
        array_value = indexer.value_buffer(_broadcast_value(value, tuple(indexer.shape), field_dtype))
        chunk_io, store = self._chunk_io(), self._store
        projections = list(indexer)
        chunk_io.forget_shared_decodes(projections)
        limit = min(config.get("concurrency"), max(1, len(projections)))
        write_empty = chunk_io.write_empty()

        if len(projections) > 1:
            # As other writes: a damaged chunk fails the write before any chunk is changed.
            await for_each_concurrently(
                projections, lambda p: chunk_io.stored_chunk(chunk_io.chunk_key(p.chunk_coords)), limit
            )

        async def write(projection: ChunkProjection) -> None:
            piece = array_value[()] if array_value.ndim == 0 else array_value[projection.out_selection]
            key = chunk_io.chunk_key(projection.chunk_coords)
            async with chunk_lock(store.location, key, self._synchronizer):
                chunk = await chunk_io.stored_chunk(key)
                chunk[fields][projection.chunk_selection] = piece  # a view of the fields: writes through
                encoded = await run_in_codec_pool(chunk_io.encode_unless_fill, chunk, key, write_empty)
                await chunk_io.put_chunk(key, encoded)

        await for_each_concurrently(projections, write, limit)

    # -- metadata changes ---------------------------------------------------------------------

    async def _replace_metadata(self, metadata: ArrayMetadata) -> None:
        old_documents = self._metadata.to_documents()
        new_documents = metadata.to_documents()
        changed = {name: doc for name, doc in new_documents.items() if old_documents.get(name) != doc}
        await write_documents(self._store, self._path, changed)
        removed = [node_key(self._path, name) for name in old_documents if name not in new_documents]
        await self._store.delete_many(removed)
        self._metadata = metadata

    async def update_attributes(self, attributes: Mapping[str, Any]) -> AsyncArray:
        """Merge ``attributes`` into the stored user attributes; return this array, as zarr 3 does."""
        self._check_writable()
        merged = {**self._metadata.attributes, **attributes}
        await self._replace_metadata(self._metadata.with_attributes(merged))
        return self

    async def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        """Replace all user attributes with ``attributes``."""
        self._check_writable()
        await self._replace_metadata(self._metadata.with_attributes(dict(attributes)))

    async def resize(self, *shape: int | tuple[int, ...]) -> None:
        """Change the shape; chunks wholly outside it are deleted, cut edge chunks are cleared."""
        self._check_writable()
        new_shape = _as_shape(shape)
        if len(new_shape) != self.ndim:
            raise ValueError(f"cannot resize a {self.ndim}-d array to {len(new_shape)}-d shape {new_shape}")
        old_shape, grid = self.shape, self._grid
        new_grid = tuple(-(-s // c) for s, c in zip(new_shape, grid, strict=True))
        # Chunks cut by the new boundary keep data past it: that part is reset to the fill value
        # so growing the array again shows fill values, not stale data.
        cut_axes = (
            []
            if 0 in new_shape
            else [d for d in range(self.ndim) if new_shape[d] < old_shape[d] and new_shape[d] % grid[d]]
        )
        shrinks_grid = any(new < old for new, old in zip(new_grid, self._stored_grid_shape, strict=True))
        # What is stored decides the work (one listing), never the declared grid: growing an
        # array touches no chunk, shrinking a billion-chunk grid holding three chunks costs three.
        stored = await self._stored_chunks("resize") if cut_axes or shrinks_grid else []
        await self._clear_cut_chunks(stored, old_shape, new_shape, new_grid, cut_axes)
        await self._replace_metadata(self._metadata.with_shape(new_shape))
        outside = [key for coords, key in stored if any(c >= g for c, g in zip(coords, new_grid, strict=True))]
        chunk_io = self._chunk_io()
        chunk_io.forget_cached(outside)
        try:
            await self._store.delete_many(outside)
        finally:
            chunk_io.forget_cached(outside)

    async def _clear_cut_chunks(
        self,
        stored: list[tuple[tuple[int, ...], str]],
        old_shape: tuple[int, ...],
        new_shape: tuple[int, ...],
        new_grid: tuple[int, ...],
        cut_axes: list[int],
    ) -> None:
        """Reset to the fill value the parts past `new_shape` of stored chunks the new boundary cuts."""
        grid, fill = self._grid, self._fill_scalar()
        regions: list[list[tuple[slice, ...]]] = []
        for coords, _key in stored:
            if any(c >= g for c, g in zip(coords, new_grid, strict=True)):
                continue  # wholly outside: deleted instead
            extent = [slice(c * n, min((c + 1) * n, s)) for c, n, s in zip(coords, grid, old_shape, strict=True)]
            chunk_regions = []
            for axis in cut_axes:
                if coords[axis] == new_grid[axis] - 1:
                    region = list(extent)
                    region[axis] = slice(new_shape[axis], extent[axis].stop)
                    chunk_regions.append(tuple(region))
            if chunk_regions:
                regions.append(chunk_regions)

        async def clear(chunk_regions: list[tuple[slice, ...]]) -> None:
            for region in chunk_regions:  # one chunk's regions in turn: they share its lock
                await self.setitem(region, fill)

        if regions:
            await for_each_concurrently(regions, clear, config.get("concurrency"))

    async def append(self, data: Any, axis: int = 0) -> tuple[int, ...]:
        """Grow the array along ``axis`` and write ``data`` there; return the new shape."""
        self._check_writable()
        data = np.asanyarray(getattr(data, "async_array", data)) if not isinstance(data, AsyncArray) else data
        if not -self.ndim <= axis < self.ndim:
            raise np.exceptions.AxisError(axis, self.ndim)
        axis %= self.ndim
        if data.ndim != self.ndim or any(d != axis and data.shape[d] != self.shape[d] for d in range(self.ndim)):
            raise ValueError(
                f"cannot append data of shape {data.shape} to an array of shape {self.shape} along axis {axis}: "
                "every other dimension must match"
            )
        old_length = self.shape[axis]
        new_shape = tuple(s + data.shape[axis] if d == axis else s for d, s in enumerate(self.shape))
        await self.resize(new_shape)
        region = tuple(slice(old_length, None) if d == axis else slice(None) for d in range(self.ndim))
        await self.setitem(region, data)
        return new_shape

    # -- pickling: configuration only ---------------------------------------------------------------

    def _configuration(self) -> dict[str, Any]:
        return {
            "store": self._store,
            "path": self._path,
            "metadata": self._metadata,
            "read_only": self._read_only,
            "synchronizer": self._synchronizer,
            "write_empty_chunks": self._write_empty_chunks,
            "config_order": self._config_order,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(  # type: ignore[misc]
            state["store"],
            state["path"],
            state["metadata"],
            read_only=state["read_only"],
            synchronizer=state["synchronizer"],
            write_empty_chunks=state.get("write_empty_chunks"),
        )
        self._config_order = state.get("config_order")


class _AsyncSelector:
    """zarr 3's async indexer objects (``z.oindex``, ``z.vindex``): one kind of selection, as coroutines."""

    _read: ClassVar[str]  # the AsyncArray coroutines this kind of selection reads and writes with
    _write: ClassVar[str]

    def __init__(self, array: AsyncArray) -> None:
        self.array = array

    async def getitem(self, selection: Any) -> Any:
        """Read the selection (zarr 3's ``await z.oindex.getitem(selection)``)."""
        return await getattr(self.array, self._read)(selection)

    async def setitem(self, selection: Any, value: Any) -> None:
        """Write ``value`` into the selection."""
        await getattr(self.array, self._write)(selection, value)


class AsyncOIndex(_AsyncSelector):
    """``z.oindex`` of an AsyncArray: orthogonal selection, each axis indexed on its own, as coroutines."""

    _read, _write = "get_orthogonal_selection", "set_orthogonal_selection"


class AsyncVIndex(_AsyncSelector):
    """``z.vindex`` of an AsyncArray: coordinate selection or one full-shape mask, as coroutines."""

    _read, _write = "get_coordinate_selection", "set_coordinate_selection"


def _checked_write_empty_chunks(value: Any) -> bool | None:
    if value is not None and not isinstance(value, bool | np.bool_):
        raise TypeError(f"write_empty_chunks must be True, False or None, got {value!r}")
    return None if value is None else bool(value)


def _as_shape(shape: tuple[Any, ...]) -> tuple[int, ...]:
    if len(shape) == 1 and isinstance(shape[0], tuple | list):
        shape = tuple(shape[0])
    try:
        result = tuple(int(s) for s in shape)
    except (TypeError, ValueError):
        raise TypeError(f"a shape is a tuple of non-negative ints, got {shape!r}") from None
    if any(s < 0 for s in result):
        raise ValueError(f"a shape cannot have negative lengths, got {result}")
    return result


def _pieces_of(array_value: np.ndarray) -> Callable[[ChunkProjection], Awaitable[Any]]:
    """``piece_of`` for `ChunkIO.write` from a value laid out like the selection: each chunk's part of it."""

    async def piece_of(projection: ChunkProjection) -> Any:
        return array_value[()] if array_value.ndim == 0 else array_value[projection.out_selection]

    return piece_of


def _broadcast_value(value: Any, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    # A record given as a tuple, e.g. (1, (2, 3.5), [4, 5]), is one element only under the record dtype.
    array_value = np.asarray(value, dtype=dtype) if dtype.fields else np.asarray(value)
    if array_value.dtype.kind == "O" and dtype.kind != "O":
        array_value = np.asarray(value, dtype=dtype)
    if array_value.ndim == 0 or array_value.shape == shape:
        return array_value
    try:
        return np.broadcast_to(array_value, shape)
    except ValueError:
        raise ValueError(
            f"could not broadcast a value of shape {array_value.shape} into a selection of shape {shape}"
        ) from None
