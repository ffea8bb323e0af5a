"""Dask arrays from and to Zarr arrays, aligned to the arrays' write units.

`from_zarr` gives a dask array whose blocks are the array's write units (shards where the
array is sharded, else chunks) unless told otherwise. `to_zarr` writes a dask array so that
no two tasks ever read-modify-write the same stored object: where the dask blocks cut
through the target's write units it rechunks first (`align_to_write_units`). asyncarr's
chunk locks live in one process and a `ProcessSynchronizer`'s file locks on one machine,
while dask workers may be other processes on other machines; alignment is the one rule that
holds for every scheduler and every store, so it is applied always.

The graphs hold the array by configuration (store settings and path, a few hundred bytes),
never its data: each worker reopens the array when it unpickles a task.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np

from . import AsyncArray
from .errors import ReadOnlyError
from .stores import MemoryStore, Store
from .sync import Array
from .sync import open_array as _open_array

if TYPE_CHECKING:
    import dask.array as da
    from dask.delayed import Delayed

__all__ = ["ArrayOrStore", "align_to_write_units", "blocks_align", "from_zarr", "to_zarr", "write_unit"]

_WRITE_MODES = ("w-", "w", "a", "r+")

ArrayOrStore: TypeAlias = Array | AsyncArray | Store | str | os.PathLike[str] | MutableMapping[str, bytes]
"""An open array (either API), or what `asyncarr.sync.open_array` opens: a store, a path or URL, a mapping."""


def write_unit(array: Array | AsyncArray) -> tuple[int, ...]:
    """The shape of one stored object: the shard shape of a sharded array, else the chunk shape."""
    return tuple(array.shards or array.chunks)


def from_zarr(
    store_or_array: ArrayOrStore,
    *,
    path: str | None = None,
    chunks: Any = None,
    storage_options: Mapping[str, Any] | None = None,
) -> da.Array:
    """A dask array reading a Zarr array; ``chunks=None`` makes each block one write unit (shard, else chunk)."""
    import dask.array as da
    from dask.array.core import normalize_chunks
    from dask.base import tokenize

    if isinstance(store_or_array, Array | AsyncArray):
        _refuse_location_options("from_zarr", path=path, storage_options=storage_options)
        array = _as_sync(store_or_array)
    else:
        array = _open_array(store_or_array, mode="r", path=path, storage_options=storage_options)
    unit = write_unit(array)
    # Reads are safe whatever the blocks: explicit chunks are honoured ("auto" picks multiples of the unit).
    dask_chunks = normalize_chunks(
        unit if chunks is None else chunks, array.shape, dtype=array.dtype, previous_chunks=unit
    )
    name = "from-zarr-" + tokenize(_identity(array), dask_chunks)
    meta = np.empty((0,) * array.ndim, dtype=array.dtype)
    return da.from_array(array, chunks=dask_chunks, name=name, lock=False, asarray=False, fancy=False, meta=meta)


def blocks_align(chunks: tuple[tuple[int, ...], ...], unit: tuple[int, ...]) -> bool:
    """Whether every boundary between dask blocks ``chunks`` falls on a boundary of the write unit ``unit``."""
    return all(_boundaries_on_multiples(blocks, step) for blocks, step in zip(chunks, unit, strict=True))


def align_to_write_units(x: da.Array, unit: tuple[int, ...]) -> da.Array:
    """``x`` rechunked, where needed, so that every block covers whole write units of shape ``unit``.

    An axis whose block boundaries all fall on multiples of the unit keeps its blocks (blocks
    ending at the array's end may be shorter); any other axis gets blocks of the multiple of
    the unit nearest to its largest block. Returns ``x`` itself when nothing needs to change.
    """
    if len(unit) != x.ndim:
        raise ValueError(f"a write unit of {len(unit)} dimensions cannot align an array of {x.ndim}")
    aligned: list[tuple[int, ...]] = []
    for blocks, size, step in zip(x.chunks, x.shape, unit, strict=True):
        if _boundaries_on_multiples(blocks, step):
            aligned.append(blocks)
            continue
        block = min(size, step * max(1, round(max(blocks) / step)))
        aligned.append(tuple(block for _ in range(size // block)) + ((size % block,) if size % block else ()))
    aligned_chunks = tuple(aligned)
    return x if aligned_chunks == x.chunks else x.rechunk(aligned_chunks)


def to_zarr(
    x: da.Array,
    store_or_array: ArrayOrStore,
    *,
    path: str | None = None,
    chunks: Any = None,
    shards: Any = None,
    zarr_format: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
    compute: bool = True,
    mode: str = "w-",
    overwrite: bool = False,
    **create_kwargs: Any,
) -> Delayed | None:
    """Write ``x`` to a Zarr array (created from a path or URL), never losing an update; Delayed if not ``compute``.

    Given a store, path or URL, the array is created with ``x``'s shape and dtype, ``chunks``
    (default: ``x``'s blocks when regular, else its first block per axis), ``shards``,
    ``zarr_format`` and ``create_kwargs`` (``compressor``, ``fill_value``, ``attributes``, ...).
    ``mode`` is ``"w-"`` (fail if something is there, the default), ``"w"`` (overwrite; also
    ``overwrite=True``), ``"a"`` (use the array there, else create it) or ``"r+"`` (it must exist).
    Given an array (`asyncarr.sync.Array` or `AsyncArray`), ``x`` is written into it whole.
    ``x`` is first rechunked where its blocks cut through the target's write units.
    """
    if any(np.isnan(size) for size in x.shape):
        raise ValueError(f"cannot write a dask array of unknown shape {x.shape}: call x.compute_chunk_sizes() first")
    if isinstance(store_or_array, Array | AsyncArray):
        _refuse_location_options(
            "to_zarr",
            path=path,
            storage_options=storage_options,
            chunks=chunks,
            shards=shards,
            zarr_format=zarr_format,
            **create_kwargs,
        )
        target = _as_sync(store_or_array)
    else:
        target = _open_target(
            x, store_or_array, path, chunks, shards, zarr_format, storage_options, mode, overwrite, create_kwargs
        )
    if target.read_only:
        raise ReadOnlyError(f"{_where(target)}: the array is read-only; open it with mode 'r+' to write to it")
    if tuple(target.shape) != tuple(x.shape):
        raise ValueError(f"{_where(target)}: the array's shape {target.shape} differs from the dask array's {x.shape}")
    if compute:
        _refuse_memory_store_on_other_processes(target)
    import dask.array as da

    aligned = align_to_write_units(x, write_unit(target))
    stored = da.store(aligned, _WriteTarget(target), lock=False, compute=compute, return_stored=False)
    if compute:
        return None
    # dask.array.store(compute=False) hands back an array of per-block results; one Delayed is what callers compute.
    from dask.base import tokenize
    from dask.core import flatten
    from dask.delayed import Delayed
    from dask.highlevelgraph import HighLevelGraph

    name = "to-zarr-" + tokenize(stored.name)
    final_task = {name: (_all_written, list(flatten(stored.__dask_keys__())))}
    return Delayed(name, HighLevelGraph.from_collections(name, final_task, dependencies=[stored]))


def _all_written(block_results: list[Any]) -> None:
    """The final task of a deferred `to_zarr`: every block is stored once its inputs are done."""
    return None


class _WriteTarget:
    """What `dask.array.store` writes into: the array, tokenized by its identity rather than by pickling it."""

    def __init__(self, array: Array) -> None:
        self.array = array

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.array.shape)

    @property
    def dtype(self) -> np.dtype:
        return self.array.dtype

    def __setitem__(self, selection: Any, value: Any) -> None:
        self.array[selection] = value

    def __dask_tokenize__(self) -> object:
        return ("asyncarr-write-target", _identity(self.array))

    def __repr__(self) -> str:
        return f"_WriteTarget({_where(self.array)})"


def _open_target(
    x: da.Array,
    store: ArrayOrStore,
    path: str | None,
    chunks: Any,
    shards: Any,
    zarr_format: int | None,
    storage_options: Mapping[str, Any] | None,
    mode: str,
    overwrite: bool,
    create_kwargs: dict[str, Any],
) -> Array:
    mode = "w-" if mode == "x" else mode
    if mode not in _WRITE_MODES:
        raise ValueError(f"to_zarr writes with mode 'w-', 'w', 'a' or 'r+'; got {mode!r}")
    if overwrite:
        mode = "w"
    if chunks is None and shards is None:
        chunks = _default_chunks(x.chunks)
    target = _open_array(
        store,
        mode=mode,
        path=path,
        storage_options=storage_options,
        shape=x.shape,
        dtype=x.dtype,
        chunks=chunks,
        shards=shards,
        zarr_format=zarr_format,
        **create_kwargs,
    )
    if np.dtype(target.dtype) != np.dtype(x.dtype):
        raise ValueError(f"{_where(target)}: the array's dtype {target.dtype} differs from the dask array's {x.dtype}")
    return target


def _default_chunks(blocks: tuple[tuple[int, ...], ...]) -> tuple[int, ...]:
    """The target chunks that match dask blocks: the first block per axis (zarr needs at least 1)."""
    return tuple(max(axis_blocks[0], 1) if axis_blocks else 1 for axis_blocks in blocks)


def _boundaries_on_multiples(blocks: tuple[int, ...], step: int) -> bool:
    """Whether every block boundary inside the axis falls on a multiple of ``step``."""
    boundary = 0
    for block in blocks[:-1]:
        boundary += block
        if boundary % step:
            return False
    return True


def _as_sync(array: Array | AsyncArray) -> Array:
    return array if isinstance(array, Array) else array.sync()


def _identity(array: Array) -> tuple[Any, ...]:
    """What names an array's content for dask: where it is and what its metadata says, not its bytes."""
    return (
        array.store.location,
        array.path,
        tuple(array.shape),
        np.dtype(array.dtype).str,
        tuple(array.chunks),
        array.shards,
        array.zarr_format,
    )


def _where(array: Array) -> str:
    store = array.store
    return store.key_url(array.path) if array.path else store.location


def _refuse_location_options(function: str, **options: Any) -> None:
    given = sorted(name for name, value in options.items() if value is not None)
    if given:
        raise TypeError(f"{function}() given an array takes no {', '.join(given)}: they apply when opening a store")


def _refuse_memory_store_on_other_processes(target: Array) -> None:
    """Raise if the target lives in this process's memory while the dask workers are other processes."""
    if not isinstance(target.store, MemoryStore):
        return
    client = _distributed_client()
    if client is None:
        return
    worker_pids = client.run(os.getpid)
    if any(pid != os.getpid() for pid in worker_pids.values()):
        raise ValueError(
            f"{_where(target)}: a MemoryStore lives in this process, and the dask workers of {client} run in "
            "other processes: their writes would land in copies there and never come back. Write to a local "
            "path or an object store, or compute with threads (scheduler='threads', LocalCluster(processes=False))."
        )


def _distributed_client() -> Any:
    """The distributed Client that would run a compute now, or None (threads, processes, synchronous)."""
    from dask.base import get_scheduler

    try:
        from distributed import Client
    except ImportError:
        return None
    client = getattr(get_scheduler(), "__self__", None)
    return client if isinstance(client, Client) else None
