"""Partial shard reads: fetch a shard's index, then only the inner chunks a selection needs.

A read touching part of a ``sharding_indexed`` shard costs one ranged GET for the index (a
suffix range when the index is at the end, a prefix range at the start) and one ranged GET per
run of needed inner chunks, where runs closer than ``config.shard_coalesce_gap`` bytes are
merged into one request. A selection needing every inner chunk fetches the whole shard in one
GET instead. Inner chunks are decoded on the codec thread pool, straight into the output where
the output selection is a view of it.

`plan_inner_reads` splits a selection into one shard (the ``chunk_selection`` the array
layer's indexers give: basic, orthogonal, or pointwise index arrays) into inner-chunk
projections; `read_shard_region` performs the read.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import numpy as np

from asyncarr import config
from asyncarr.codecs.executor import codec_thread_count, run_in_codec_pool
from asyncarr.codecs.sharding import EMPTY_ENTRY, ShardingCodec
from asyncarr.errors import CodecError
from asyncarr.indexing import BasicIndexer, ChunkProjection, OrthogonalIndexer
from asyncarr.stores.base import ByteRange, Store

__all__ = ["coalesce_ranges", "partial_read_codec", "plan_inner_reads", "read_shard_region"]


def partial_read_codec(pipeline: Any) -> ShardingCodec | None:
    """The sharding codec of `pipeline` if shards can be read in parts, else None.

    That takes sharding as the whole chain: an array->array codec before it would change the
    coordinates inside a shard, a bytes->bytes codec after it the bytes.
    """
    codec = getattr(pipeline, "array_bytes", None)
    if not isinstance(codec, ShardingCodec) or pipeline.array_array or pipeline.bytes_bytes:
        return None
    return codec


def _is_pointwise(items: tuple[Any, ...]) -> bool:
    arrays = [item for item in items if isinstance(item, np.ndarray)]
    # Orthogonal selections over several axes arrive expanded with np.ix_ (each array n-D);
    # pointwise ones as one 1-D index array per axis.
    return len(arrays) >= 2 and all(array.ndim == 1 for array in arrays)


def _pointwise_plan(
    items: tuple[Any, ...], shard_shape: tuple[int, ...], inner_shape: tuple[int, ...]
) -> tuple[tuple[int, ...], list[ChunkProjection]]:
    points = np.broadcast_arrays(*(np.asarray(item, dtype=np.intp) for item in items))
    result_shape = points[0].shape
    points = [p.reshape(-1) for p in points]
    for axis, (p, n) in enumerate(zip(points, shard_shape, strict=True)):
        if p.size and (p.min() < 0 or p.max() >= n):
            raise IndexError(f"index out of bounds for axis {axis} of a shard of size {n}")
    chunks_per_shard = tuple(s // c for s, c in zip(shard_shape, inner_shape, strict=True))
    inner_of_point = np.ravel_multi_index([p // n for p, n in zip(points, inner_shape, strict=True)], chunks_per_shard)
    order = np.argsort(inner_of_point, kind="stable")
    flat_inner, starts = np.unique(inner_of_point[order], return_index=True)
    stops = [*starts[1:], len(order)]
    projections = []
    for flat, start, stop in zip(flat_inner, starts, stops, strict=True):
        coords = tuple(int(c) for c in np.unravel_index(int(flat), chunks_per_shard))
        positions = order[start:stop]
        chunk_selection = tuple(p[positions] - c * n for p, c, n in zip(points, coords, inner_shape, strict=True))
        projections.append(ChunkProjection(coords, chunk_selection, (positions,), False))
    return result_shape, projections


def plan_inner_reads(
    selection: Any, shard_shape: Sequence[int], inner_shape: Sequence[int]
) -> tuple[tuple[int, ...], list[ChunkProjection]]:
    """Split a selection into one shard into inner-chunk projections.

    Returns the shape of ``shard[selection]`` and, for each inner chunk it touches, a projection
    whose ``out_selection`` indexes an array of that shape. `selection` is basic (ints, slices),
    orthogonal (1-D index arrays, or arrays expanded with ``np.ix_``) or pointwise (one 1-D
    index array per axis).
    """
    shard_shape, inner_shape = tuple(shard_shape), tuple(inner_shape)
    items = selection if isinstance(selection, tuple) else (selection,)
    if any(isinstance(item, np.ndarray) and item.dtype == bool and item.ndim > 1 for item in items):
        items = tuple(np.nonzero(items[0]))  # a mask over the whole shard
    if not any(isinstance(item, np.ndarray) for item in items):
        indexer: Any = BasicIndexer(items, shard_shape, inner_shape)
    elif _is_pointwise(items):
        return _pointwise_plan(items, shard_shape, inner_shape)
    else:
        # Undo np.ix_: each expanded array holds its axis' indices along its own dimension.
        items = tuple(item.reshape(-1) if isinstance(item, np.ndarray) else item for item in items)
        indexer = OrthogonalIndexer(items, shard_shape, inner_shape)
    return tuple(indexer.shape), list(indexer)


def coalesce_ranges(extents: Sequence[tuple[int, int]], gap: int) -> list[tuple[int, int, list[int]]]:
    """Merge ``(offset, nbytes)`` extents whose gaps are at most `gap` bytes.

    Returns ``(offset, nbytes, members)`` per merged range, members being positions in `extents`.
    """
    merged: list[tuple[int, int, list[int]]] = []
    for position in sorted(range(len(extents)), key=lambda i: extents[i][0]):
        offset, nbytes = extents[position]
        if merged and offset - (merged[-1][0] + merged[-1][1]) <= gap:
            start, length, members = merged[-1]
            merged[-1] = (start, max(length, offset + nbytes - start), [*members, position])
        else:
            merged.append((offset, nbytes, [position]))
    return merged


def _decode_group(
    codec: ShardingCodec, key: str, jobs: list[tuple[ChunkProjection, memoryview]], target: np.ndarray
) -> None:
    for projection, data in jobs:
        codec.decode_inner_chunk_into(
            data, key, projection.chunk_coords, target, projection.out_selection, projection.chunk_selection
        )


async def _decode_all(
    codec: ShardingCodec, key: str, jobs: list[tuple[ChunkProjection, memoryview]], target: np.ndarray
) -> None:
    """Decode inner chunks on the codec pool, spread over at most one job per codec thread."""
    if not jobs:
        return
    groups = min(len(jobs), codec_thread_count())
    await asyncio.gather(
        *(run_in_codec_pool(_decode_group, codec, key, jobs[i::groups], target) for i in range(groups))
    )


def _output_target(out: np.ndarray, out_selection: Any, result_shape: tuple[int, ...]) -> tuple[np.ndarray, bool]:
    """Where to decode: a view of ``out[out_selection]`` if basic indexing gives one, else a
    new array to copy in afterwards (the bool)."""
    items = out_selection if isinstance(out_selection, tuple) else (out_selection,)
    if all(isinstance(item, slice | int) for item in items):
        view = out[out_selection]
        if isinstance(view, np.ndarray) and view.shape == result_shape:
            return view, False
    return np.empty(result_shape, dtype=out.dtype), True


def _extent(index: np.ndarray, coords: tuple[int, ...], key: str, shard_nbytes: int | None) -> tuple[int, int] | None:
    offset, nbytes = (int(n) for n in index[coords])
    if offset == EMPTY_ENTRY:
        return None
    if shard_nbytes is not None and offset + nbytes > shard_nbytes:
        raise CodecError(
            f"chunk {key}: the index places inner chunk {coords} at bytes {offset}-{offset + nbytes}, "
            f"past the end of the {shard_nbytes}-byte shard"
        )
    return offset, nbytes


async def read_shard_region(
    store: Store,
    key: str,
    codec: ShardingCodec,
    shard_selection: Any,
    out: np.ndarray,
    out_selection: Any,
) -> None:
    """Read ``shard[shard_selection]`` of the shard stored at `key` into ``out[out_selection]``,
    fetching only the index and the inner chunks needed (a missing shard or inner chunk reads
    as the fill value); a damaged index or inner chunk raises `CodecError` naming the key."""
    result_shape, projections = plan_inner_reads(shard_selection, codec.shard_shape, codec.inner_chunk_shape)
    target, copy_back = _output_target(out, out_selection, result_shape)
    if projections:
        if len(projections) == codec.nchunks_per_shard:
            found = await _read_from_whole_shard(store, key, codec, projections, target)
        else:
            found = await _read_from_ranges(store, key, codec, projections, target)
        if not found:
            target[...] = codec.fill_value
    if copy_back:
        out[out_selection] = target


async def _read_from_whole_shard(
    store: Store, key: str, codec: ShardingCodec, projections: list[ChunkProjection], target: np.ndarray
) -> bool:
    async with store.limiter:
        data = await store.get(key)
    if data is None:
        return False
    view = memoryview(data).cast("B")
    if len(view) < codec.index_nbytes:
        raise CodecError(f"chunk {key}: shard of {len(view)} bytes is shorter than its {codec.index_nbytes}-byte index")
    start, stop = codec.index_byte_range().resolve(len(view))
    index = codec.parse_index(view[start:stop], key)
    jobs = []
    for projection in projections:
        extent = _extent(index, projection.chunk_coords, key, len(view))
        if extent is None:
            target[projection.out_selection] = codec.fill_value
        else:
            jobs.append((projection, view[extent[0] : extent[0] + extent[1]]))
    await _decode_all(codec, key, jobs, target)
    return True


async def _read_from_ranges(
    store: Store, key: str, codec: ShardingCodec, projections: list[ChunkProjection], target: np.ndarray
) -> bool:
    async with store.limiter:
        index_bytes = await store.get(key, codec.index_byte_range())
    if index_bytes is None:
        return False
    index = codec.parse_index(index_bytes, key)
    present: list[ChunkProjection] = []
    extents: list[tuple[int, int]] = []
    for projection in projections:
        extent = _extent(index, projection.chunk_coords, key, None)
        if extent is None:
            target[projection.out_selection] = codec.fill_value
        else:
            present.append(projection)
            extents.append(extent)

    async def fetch_and_decode(offset: int, nbytes: int, members: list[int]) -> None:
        async with store.limiter:
            data = await store.get(key, ByteRange(offset, nbytes))
        if data is None:
            raise CodecError(f"chunk {key}: the shard disappeared while it was being read")
        view = memoryview(data).cast("B")
        jobs = []
        for member in members:
            start = extents[member][0] - offset
            stop = start + extents[member][1]
            if stop > len(view):
                raise CodecError(
                    f"chunk {key}: the index places inner chunk {present[member].chunk_coords} at bytes "
                    f"{extents[member][0]}-{extents[member][0] + extents[member][1]}, past the end of the shard"
                )
            jobs.append((present[member], view[start:stop]))
        await _decode_all(codec, key, jobs, target)

    merged = coalesce_ranges(extents, config.get("shard_coalesce_gap"))
    await asyncio.gather(*(fetch_and_decode(*piece) for piece in merged))
    return True
