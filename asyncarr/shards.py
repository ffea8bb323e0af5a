"""Partial shard reads: fetch a shard's index, then only the inner chunks a selection needs.

A read touching part of a ``sharding_indexed`` shard costs one ranged GET for the index (a
suffix range when the index is at the end, a prefix range at the start) and one ranged GET per
run of needed inner chunks, where runs closer than ``config.shard_coalesce_gap`` bytes are
merged into one request. A selection needing every inner chunk fetches the whole shard in one
GET instead. Inner chunks are decoded on the codec thread pool, straight into the output where
the output selection is a view of it.

`plan_inner_reads` splits a selection into one shard (the ``chunk_selection`` any of the
array layer's indexers gives, read with NumPy's semantics) into inner-chunk projections;
`read_shard_region` performs the read.

The blocking engine (local files, memory) reads shards with `read_shard_region_blocking` from a
`ShardBytes` that `open_shard_sync` gives: the index, then the inner chunks needed in runs of at
most `RUN_BYTES`, decoded as each run arrives. From a store that reads parts of one open file
(``open_sync``) no whole shard is held in memory beside the output (reading one of W6's 49 MiB
shards in one piece faulted in 49 MiB of new pages per shard and per thread: 85 of the read's
150 ms of CPU, and a shard per thread above the output in peak memory), and every part comes from
the same version of the shard however a writer replaces it meanwhile. Other stores' shards are
read whole and their parts taken as views.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import numpy as np

from asyncarr import config
from asyncarr.codecs.executor import codec_thread_count, run_in_codec_pool
from asyncarr.codecs.sharding import EMPTY_ENTRY, ShardingCodec
from asyncarr.codecs.v3 import Buffer
from asyncarr.errors import CodecError
from asyncarr.indexing import BasicIndexer, ChunkProjection
from asyncarr.indexing_points import Indexer, indexer_for
from asyncarr.stores.base import ByteRange, Store

__all__ = [
    "RUN_BYTES",
    "ShardBytes",
    "coalesce_ranges",
    "open_shard_sync",
    "partial_read_codec",
    "plan_inner_reads",
    "read_shard_region",
    "read_shard_region_blocking",
]

RUN_BYTES = 4 * 2**20
"""Most bytes a blocking shard read asks for at once (an inner chunk larger than this alone).

Reads of this size or less reuse the allocator's memory from one to the next, where a read of a
whole shard faults in new pages for all of it; 1 to 8 MiB all read W6's shards about ten times
cheaper than one read of each (6-9 ms of CPU for 196 MiB against 85-100 ms).
"""


def partial_read_codec(pipeline: Any) -> ShardingCodec | None:
    """The sharding codec of `pipeline` if shards can be read in parts, else None.

    That takes sharding as the whole chain: an array->array codec before it would change the
    coordinates inside a shard, a bytes->bytes codec after it the bytes.
    """
    codec = getattr(pipeline, "array_bytes", None)
    if not isinstance(codec, ShardingCodec) or pipeline.array_array or pipeline.bytes_bytes:
        return None
    return codec


def plan_inner_reads(selection: Any, shard_shape: Sequence[int], inner_shape: Sequence[int]) -> Indexer:
    """The indexer splitting ``shard[selection]`` (NumPy's semantics) into inner-chunk projections.

    `selection` is a projection's ``chunk_selection``: ints and slices, orthogonal index arrays
    (1-D, or expanded with ``np.ix_``) or pointwise ones. Its projections fill a buffer of
    ``buffer_shape``; ``finalize(buffer)`` is ``shard[selection]``.
    """
    return indexer_for(selection, tuple(shard_shape), tuple(inner_shape))


class ShardBytes(Protocol):
    """A stored shard to read parts of: its size, and bytes at an offset (fewer only past its end)."""

    size: int

    def read(self, offset: int, nbytes: int) -> Buffer:
        """``nbytes`` bytes from ``offset``."""
        ...


class _ShardInMemory:
    """A shard already read whole (or kept in memory by its store): parts are views, not copies."""

    def __init__(self, data: Buffer) -> None:
        self._view = memoryview(data).cast("B")
        self.size = len(self._view)

    def read(self, offset: int, nbytes: int) -> Buffer:
        return self._view[offset : offset + nbytes]


@contextlib.contextmanager
def open_shard_sync(store: Store, key: str) -> Iterator[ShardBytes | None]:
    """The shard at `key` of a store with blocking I/O, for `read_shard_region_blocking`; None when absent.

    A store with ``open_sync(key)`` (a context manager giving a `ShardBytes` or None) is read in
    parts from one open object; any other store's ``get_sync`` reads the shard whole.
    """
    opener = getattr(store, "open_sync", None)
    if opener is not None:
        with opener(key) as shard:
            yield shard
        return
    data = store.get_sync(key)
    yield None if data is None else _ShardInMemory(data)


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


def _capped_runs(extents: Sequence[tuple[int, int]], gap: int, cap: int) -> list[tuple[int, int, list[int]]]:
    """`coalesce_ranges`, but a run stops growing before it would pass `cap` bytes."""
    runs: list[tuple[int, int, list[int]]] = []
    for position in sorted(range(len(extents)), key=lambda i: extents[i][0]):
        offset, nbytes = extents[position]
        if runs:
            start, length, members = runs[-1]
            stop = max(start + length, offset + nbytes)
            if offset - (start + length) <= gap and stop - start <= cap:
                runs[-1] = (start, stop - start, [*members, position])
                continue
        runs.append((offset, nbytes, [position]))
    return runs


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


def _output_buffer(out: np.ndarray, out_selection: Any, indexer: Indexer) -> tuple[np.ndarray, bool]:
    """The buffer to decode into: ``out[out_selection]`` itself where that is a view of the right
    shape, else a new array to copy in afterwards (the bool)."""
    items = out_selection if isinstance(out_selection, tuple) else (out_selection,)
    if isinstance(indexer, BasicIndexer) and all(isinstance(item, slice | int) for item in items):
        view = out[out_selection]
        if isinstance(view, np.ndarray) and view.shape == tuple(indexer.buffer_shape):
            return view, False
    return np.empty(indexer.buffer_shape, dtype=out.dtype), True


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
    indexer = plan_inner_reads(shard_selection, codec.shard_shape, codec.inner_chunk_shape)
    projections = list(indexer)
    target, copy_back = _output_buffer(out, out_selection, indexer)
    if projections:
        if len({p.chunk_coords for p in projections}) == codec.nchunks_per_shard:
            found = await _read_from_whole_shard(store, key, codec, projections, target)
        else:
            found = await _read_from_ranges(store, key, codec, projections, target)
        if not found:
            target[...] = codec.fill_value
    if copy_back:
        out[out_selection] = indexer.finalize(target)


async def _refuse_oversized_index(store: Store, key: str, codec: ShardingCodec) -> bool:
    """For a declared index over the cap: False if the shard at `key` is absent (it reads as the
    fill value, as on every other path), else raise `CodecError`. Nothing of the index's size is
    requested, so no store allocates it."""
    async with store.limiter:
        stored = await store.exists(key)
    if not stored:
        return False
    raise codec.index_too_large_error(key)


async def _read_from_whole_shard(
    store: Store, key: str, codec: ShardingCodec, projections: list[ChunkProjection], target: np.ndarray
) -> bool:
    if not codec.index_within_cap:
        return await _refuse_oversized_index(store, key, codec)
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
    if not codec.index_within_cap:
        return await _refuse_oversized_index(store, key, codec)
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


def read_shard_region_blocking(
    shard: ShardBytes, key: str, codec: ShardingCodec, shard_selection: Any, out: np.ndarray, out_selection: Any
) -> None:
    """Read ``shard[shard_selection]`` into ``out[out_selection]`` in the calling thread: the index,
    then only the inner chunks needed, in runs of at most `RUN_BYTES` decoded one run at a time
    (absent inner chunks read as the fill value); a damaged shard raises `CodecError` naming `key`."""
    indexer = plan_inner_reads(shard_selection, codec.shard_shape, codec.inner_chunk_shape)
    projections = list(indexer)
    target, copy_back = _output_buffer(out, out_selection, indexer)
    if projections:
        if not codec.index_within_cap:
            raise codec.index_too_large_error(key)
        if shard.size < codec.index_nbytes:
            raise CodecError(
                f"chunk {key}: shard of {shard.size} bytes is shorter than its {codec.index_nbytes}-byte index"
            )
        start, stop = codec.index_byte_range().resolve(shard.size)
        index = codec.parse_index(shard.read(start, stop - start), key)
        present: list[ChunkProjection] = []
        extents: list[tuple[int, int]] = []
        for projection in projections:
            extent = _extent(index, projection.chunk_coords, key, shard.size)
            if extent is None:
                target[projection.out_selection] = codec.fill_value
            else:
                present.append(projection)
                extents.append(extent)
        for offset, nbytes, members in _capped_runs(extents, config.get("shard_coalesce_gap"), RUN_BYTES):
            run = memoryview(shard.read(offset, nbytes)).cast("B")
            if len(run) < nbytes:
                raise CodecError(f"chunk {key}: the shard ends at byte {offset + len(run)}, before its index says")
            jobs = [(present[m], run[extents[m][0] - offset : extents[m][0] - offset + extents[m][1]]) for m in members]
            _decode_group(codec, key, jobs, target)
            del jobs, run  # this run's memory is the next one's
    if copy_back:
        out[out_selection] = indexer.finalize(target)
