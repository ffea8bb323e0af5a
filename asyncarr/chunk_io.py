"""Moving chunks between a store and NumPy arrays: concurrent reads into an output, writes from a value.

Two engines do the same work. The async engine issues every chunk request of a call at once
(bounded by the store's limiter) and batches decodes onto the codec threads. For stores with
``supports_sync_io`` (local files, memory) the fast engine hands whole batches of chunks to
the codec threads, each job reading, decoding and copying its chunks without a round trip
through the event loop per chunk — most of the cost when chunks are small. Those stores can
also be read with no event loop at all (``read_into_blocking``): the sync facade's calls then
run in the caller's thread, helped by the codec threads when there is more than one batch.
Parts of shards are the exception: they take ranged reads, which only the async engine does.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import dataclasses
import functools
import math
import threading
import weakref
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

import numpy as np

from . import config
from .chunk_cache import ABSENT, ChunkCache, active_cache
from .codecs.executor import (
    blosc_in_this_thread_alone,
    blosc_threads_requested,
    codec_executor,
    codec_thread_count,
    run_in_codec_pool,
)
from .codecs.pipeline import CodecPipeline, PlainChainDecoder, naming_url
from .codecs.sharding import ShardingCodec, inner_chunks_written_when_empty
from .concurrency import CodecBatcher, for_each_concurrently
from .errors import CodecError
from .indexing import ChunkProjection, side_by_side_chunks
from .locks import ProcessSynchronizer, chunk_lock, release_chunk_locks, try_chunk_lock, try_chunk_locks
from .shards import open_shard_sync, partial_read_codec, read_shard_region, read_shard_region_blocking
from .small_writes import BATCH_CHUNKS, EncodeChunk, EncodeThenWrite, EncodeWhole, StagedEncoding
from .stores.base import Store

__all__ = ["ChunkIO"]

PieceOf = Callable[[ChunkProjection], Awaitable[Any]]

# Each fast-engine batch takes this many workers' shares of the chunks not yet batched: batches
# shrink towards the end, so the threads finish within about one chunk's work of each other.
_SHARES_PER_WORKER = 2
# Decoded bytes below which a batch is not split further: handing a job to another thread costs
# about as much as decoding this much (~50 us), so smaller reads run whole in one thread.
_MIN_BATCH_BYTES = 256 * 1024
# Chunks smaller than this are read by one thread. Their Python work outweighs the codec and file
# work that frees the GIL, and several threads then mostly trade the GIL back and forth: on 2
# cores, 1024 chunks of 2 KiB read in 49 ms on one codec thread and 76 ms on two. Writes of them
# follow the store (`Store.small_writes_in_parallel`): in memory (and on tmpfs) one thread is
# faster (4096 chunks of 2 KiB: 218 against 283 ms on tmpfs), but creating and renaming files on
# a disk waits in the kernel, which two threads overlap (the same write on this VM's ext4: 3.5 s
# on one thread against 1.7 s on two when the file system was slow, level when it was not).
_PARALLEL_MIN_CHUNK_BYTES = 128 * 1024
# Durable writes of small chunks are flushed this many at a time, on the store's I/O threads.
_DURABLE_FLUSH_CHUNKS = 256


@dataclasses.dataclass(frozen=True)
class ChunkIO:
    """Everything needed to read and write one array's chunks, as it is at the start of a call."""

    store: Store
    pipeline: CodecPipeline
    chunk_key: Callable[[tuple[int, ...]], str]
    grid: tuple[int, ...]
    shape: tuple[int, ...]
    dtype: np.dtype
    fill: Any
    synchronizer: Any = None
    #: The array handle's ``write_empty_chunks``; None follows ``config.write_empty_chunks``.
    write_empty_chunks: bool | None = None
    #: The array's metadata fingerprint for the decoded-chunk cache (what decoding depends on).
    cache_token: str = ""

    def write_empty(self) -> bool:
        """Whether chunks equal to the fill value are stored: the handle's setting, else the config's."""
        if self.write_empty_chunks is None:
            return bool(config.get("write_empty_chunks"))
        return self.write_empty_chunks

    # -- reading ------------------------------------------------------------------------------

    async def read_into(self, indexer: Any, out: np.ndarray) -> None:
        """Fill ``out`` with the selection ``indexer`` describes."""
        cache = self._cache()
        if cache is not None:
            await self._read_cached(cache, list(indexer), out)
            return
        if not self.store.supports_sync_io:
            await self._read_async(indexer, indexer.nchunks, out)
            return
        projections = list(indexer)
        if self.serves_blocking(projections):
            await self._read_fast(projections, out)
        else:
            await self._read_async(projections, len(projections), out)

    def serves_blocking(self, projections: Sequence[ChunkProjection]) -> bool:
        """Whether the blocking engine can read ``projections``: the store does blocking I/O and no
        projection takes part of a shard (those take ranged reads, on the async engine)."""
        if not self.store.supports_sync_io or self._cache() is not None:
            return False
        return partial_read_codec(self.pipeline) is None or all(p.is_complete_chunk for p in projections)

    def read_into_blocking(self, projections: list[ChunkProjection], out: np.ndarray) -> None:
        """Fill ``out`` in the calling thread, the codec threads helping with any further batches;
        only for projections the blocking engine `serves_blocking`.

        Without an event loop there is no hand-off per call: a one-chunk read costs its read and
        decode only. Concurrent calls decode shared chunks each on their own (the async engine
        shares them), which costs less than the hops would for the small reads that share.
        """
        workers = self._worker_count()
        batches = _batches(projections, workers, self._decoded_bytes_per_chunk(projections))
        queue = _BatchQueue(batches, self._read_batch, out, None)
        if queue.pending <= 1:
            queue.drain()
            queue.raise_first_error()
            return
        executor = codec_executor()
        if blosc_threads_requested():
            # The user asked numcodecs for Blosc's own threads: decoding here beside the codec
            # threads would oversubscribe the cores (a row of 16 chunks of 1 MiB took 6.8 ms,
            # against 3.9 ms left to the codec threads), so they take every batch.
            helpers = [executor.submit(queue.drain) for _ in range(min(queue.pending, workers))]
        else:
            # The caller is one of the workers: one helper fewer than codec threads keeps the
            # cores busy without more runnable threads than cores (on 2 cores, 3 ran slower),
            # and the read starts at once, with one thread fewer to wake. In the main thread,
            # numcodecs would decode on Blosc's own threads by default: not while this one works.
            helpers = [executor.submit(queue.drain) for _ in range(min(queue.pending - 1, workers - 1))]
            with blosc_in_this_thread_alone():
                queue.drain()
        # Threads cannot be cancelled: wait for every helper, then report the first failure.
        concurrent.futures.wait(helpers)
        queue.raise_first_error()

    async def _read_fast(self, projections: list[ChunkProjection], out: np.ndarray) -> None:
        # Concurrent calls reading parts of one chunk (many small reads from a data service)
        # share a single fetch and decode of it: the first call decodes, the others wait. The
        # first keeps the whole decoded chunk only if another call is waiting by the time it is
        # read; else it reads just its part, and a call that joins later reads its own.
        in_flight = _chunks_in_flight()
        waited_on = _chunks_waited_on()
        location = self.store.location
        mine: list[ChunkProjection] = []
        published: dict[str, asyncio.Future[Any]] = {}
        joined: list[tuple[ChunkProjection, asyncio.Future[Any]]] = []
        for projection in projections:
            if projection.is_complete_chunk:
                mine.append(projection)
                continue
            key = self.chunk_key(projection.chunk_coords)
            future = in_flight.get((location, key))
            if future is None:
                future = in_flight[(location, key)] = asyncio.get_running_loop().create_future()
                published[key] = future
                mine.append(projection)
            else:
                waited_on.add((location, key))
                joined.append((projection, future))
        decoded: dict[str, Any] = {}
        try:
            await self._run_batches(
                mine,
                self._worker_count(),
                self._read_batch,
                out,
                decoded,
                lambda key: (location, key) in waited_on,
                work_nbytes=self._decoded_bytes_per_chunk(mine),
            )
        except BaseException as exc:
            _settle(in_flight, waited_on, location, published, error=exc)
            raise
        _settle(in_flight, waited_on, location, published, results=decoded)
        rereads = []
        for projection, future in joined:
            chunk = await future
            if chunk is _NOT_KEPT:  # its reader took only its own part, before this call joined
                rereads.append(projection)
            else:
                out[projection.out_selection] = self.fill if chunk is None else chunk[projection.chunk_selection]
        if rereads:
            await self._run_batches(rereads, self._worker_count(), self._read_batch, out, None)

    def _read_batch(
        self,
        projections: Sequence[ChunkProjection],
        out: np.ndarray,
        decoded: dict[str, Any] | None,
        waited_on: Callable[[str], bool] | None = None,
    ) -> None:
        """Read, decode and copy out ``projections``. With ``decoded``, a chunk read in part goes
        into it: whole, decoded, if ``waited_on(key)`` says another call waits for it, else as
        `_NOT_KEPT` (that call then reads its own part)."""
        get, decode_into = self.store.get_sync, self.pipeline.decode_into
        shard_codec = partial_read_codec(self.pipeline)
        # The plainest chains (raw or Blosc bytes): the whole chunks go to the store in one call
        # (`_read_whole_plain_chunks`), and on a store that holds a chunk open for reads of parts
        # of it (local files), a part of a chunk reads and decodes only the Blosc blocks (or raw
        # bytes) it lies in.
        plain = self.pipeline.plain_decoder(self.grid) if shard_codec is None else None
        if plain is not None:
            whole = [projection for projection in projections if projection.is_complete_chunk]
            if whole:
                self._read_whole_plain_chunks(whole, out, plain)
                if len(whole) == len(projections):
                    return
                projections = [projection for projection in projections if not projection.is_complete_chunk]
        open_part = getattr(self.store, "open_sync", None) if plain is not None else None
        grid = self.grid
        for projection in projections:
            key = self.chunk_key(projection.chunk_coords)
            if decoded is not None and not projection.is_complete_chunk:
                if waited_on is not None and waited_on(key):
                    # Another call waits on this chunk: decode it whole, and keep it for that call too.
                    data = get(key)
                    chunk = None if data is None else self.pipeline.decode(data, grid, self.store.key_url(key))
                    decoded[key] = chunk  # one key per thread: dict assignment is atomic
                    out[projection.out_selection] = self.fill if chunk is None else chunk[projection.chunk_selection]
                    continue
                decoded[key] = _NOT_KEPT
            if shard_codec is not None:
                # A shard: its index, then its inner chunks in runs, never the whole of it at once.
                try:
                    with open_shard_sync(self.store, key) as shard:
                        if shard is None:
                            out[projection.out_selection] = self.fill
                        else:
                            read_shard_region_blocking(
                                shard, key, shard_codec, projection.chunk_selection, out, projection.out_selection
                            )
                except CodecError as exc:
                    raise naming_url(exc, key, self.store.key_url(key)) from exc.__cause__
                continue
            if open_part is not None and not projection.is_complete_chunk:
                with open_part(key) as stored:
                    chunk = None if stored is None else plain.scratch_read_part(stored, projection.chunk_selection)
                    if chunk is not None:
                        out[projection.out_selection] = chunk[projection.chunk_selection]
                        continue
                    data = None if stored is None else stored.read(0, stored.size)
            else:
                data = get(key)
            if data is None:
                out[projection.out_selection] = self.fill
                continue
            try:  # free unless raised: the chunk's URL is made only for the message
                decode_into(data, grid, key, out, projection.out_selection, projection.chunk_selection)
            except CodecError as exc:
                raise naming_url(exc, key, self.store.key_url(key)) from exc.__cause__

    def _decoded_bytes_per_chunk(self, projections: Sequence[ChunkProjection]) -> int:
        """About how many bytes reading each of ``projections`` decodes, on average: the work that
        frees the GIL, which decides how many threads share a read. A part of a chunk of a plain
        chain, read from a local file, may decode a little of it: W4's row decodes 2 KiB of each
        of its 16 chunks of 1 MiB, and on two threads took twice as long as on one (round 16)."""
        chunk_nbytes = self.chunk_nbytes
        if not projections or getattr(self.store, "open_sync", None) is None:
            return chunk_nbytes
        plain = self.pipeline.plain_decoder(self.grid) if partial_read_codec(self.pipeline) is None else None
        if plain is None:
            return chunk_nbytes
        parts = [projection.chunk_selection for projection in projections if not projection.is_complete_chunk]
        total = (len(projections) - len(parts)) * chunk_nbytes
        total += sum(plain.part_decoded_bytes(selection) for selection in parts)
        return max(1, total // len(projections))

    def _read_whole_plain_chunks(
        self, projections: Sequence[ChunkProjection], out: np.ndarray, plain: PlainChainDecoder
    ) -> None:
        """`_read_batch` of whole chunks of the plainest chains (raw or Blosc bytes): the store reads
        them in one call (`Store.get_many_sync`), and each chunk bound for a view of its shape in
        ``out`` is decoded with the per-chunk cost cut to the decode (W2's 4096 chunks of 2 KiB)."""
        chunk_key, grid, fill, decode_into = self.chunk_key, self.grid, self.fill, self.pipeline.decode_into
        write_block = plain.block_writer()
        keys = [chunk_key(projection.chunk_coords) for projection in projections]
        # Slices only (no integer, which drops an axis, nor an index array, which copies): each
        # chunk's destination is a view of `out`. One test for the batch rather than one a chunk.
        views = all(type(part) is slice for projection in projections for part in projection.out_selection)
        key = ""
        try:
            with contextlib.closing(self.store.get_many_sync(keys)) as stored:
                for projection, key, data in zip(projections, keys, stored, strict=True):
                    out_selection = projection.out_selection
                    if data is None:
                        out[out_selection] = fill
                        continue
                    destination = out[out_selection]
                    # A view of `out` (not the scalar a 0-d selection gives) of the chunk's shape: not an edge chunk.
                    if views and type(destination) is np.ndarray and destination.shape == grid:
                        write_block(data, key, destination)
                    else:
                        decode_into(data, grid, key, out, out_selection, projection.chunk_selection)
        except CodecError as exc:
            raise naming_url(exc, key, self.store.key_url(key)) from exc.__cause__

    async def _read_async(self, projections: Iterable[ChunkProjection], count: int, out: np.ndarray) -> None:
        store, pipeline = self.store, self.pipeline
        limiter = store.limiter
        settings = config.current()
        batcher = CodecBatcher(codec_executor(), codec_thread_count(), settings.codec_batch_bytes)
        shard_codec = partial_read_codec(pipeline)

        async def fetch(projection: ChunkProjection) -> None:
            key = self.chunk_key(projection.chunk_coords)
            if shard_codec is not None and not projection.is_complete_chunk:
                # Part of a shard: its index, then only the inner chunks needed.
                try:
                    await read_shard_region(
                        store, key, shard_codec, projection.chunk_selection, out, projection.out_selection
                    )
                except CodecError as exc:
                    raise naming_url(exc, key, store.key_url(key)) from exc.__cause__
                return
            async with limiter:
                data = await store.get(key)
            if data is None:
                out[projection.out_selection] = self.fill
            else:
                job = functools.partial(
                    pipeline.decode_into,
                    data,
                    self.grid,
                    store.key_url(key),
                    out,
                    projection.out_selection,
                    projection.chunk_selection,
                )
                batcher.add(job, len(data))

        try:
            await for_each_concurrently(projections, fetch, min(settings.concurrency, max(1, count)))
        finally:
            await batcher.wait()

    def _cache(self) -> ChunkCache | None:
        """The decoded-chunk cache, when it is on and serves this array (whole chunks, not parts of shards)."""
        cache = active_cache()
        if cache is None or not self.cache_token or partial_read_codec(self.pipeline) is not None:
            return None
        return cache

    async def _read_cached(self, cache: ChunkCache, projections: list[ChunkProjection], out: np.ndarray) -> None:
        """Read through the decoded-chunk cache: hits copied out at once, misses fetched, decoded whole and kept."""
        store, location, token = self.store, self.store.location, self.cache_token
        misses: list[tuple[ChunkProjection, str]] = []
        for projection in projections:
            key = self.chunk_key(projection.chunk_coords)
            chunk = cache.get(location, key, token)
            if chunk is None:
                misses.append((projection, key))
            else:
                self._copy_out(chunk, projection, out)
        if not misses:
            return
        epoch = cache.epoch(location)
        limiter = store.limiter

        async def fetch(miss: tuple[ChunkProjection, str]) -> None:
            projection, key = miss
            async with limiter:
                data = await store.get(key)
            chunk = (
                ABSENT
                if data is None
                else await run_in_codec_pool(self.pipeline.decode, data, self.grid, store.key_url(key))
            )
            cache.put(location, key, token, chunk, epoch)
            self._copy_out(chunk, projection, out)

        await for_each_concurrently(misses, fetch, min(config.get("concurrency"), len(misses)))

    def _copy_out(self, chunk: Any, projection: ChunkProjection, out: np.ndarray) -> None:
        out[projection.out_selection] = self.fill if chunk is ABSENT else chunk[projection.chunk_selection]

    def forget_cached(self, keys: Iterable[str]) -> None:
        """Drop ``keys`` from the decoded-chunk cache (a write changes them; no-op while the cache is off)."""
        cache = active_cache()
        if cache is not None:
            cache.forget(self.store.location, list(keys))

    # -- writing ------------------------------------------------------------------------------

    async def write(self, indexer: Any, value: np.ndarray | None, piece_of: PieceOf) -> None:
        """Write into the selection ``indexer`` describes: from ``value`` (laid out like the
        indexer's buffer), or, when ``value`` is None, from ``piece_of(projection)``."""
        projections = list(indexer)  # walked several times below: made once
        limit = min(config.get("concurrency"), max(1, len(projections)))
        self.forget_shared_decodes(projections)
        written = [self.chunk_key(p.chunk_coords) for p in projections] if active_cache() is not None else []
        # Dropped before the write and again after it: a read that fetched the old bytes meanwhile
        # cannot put them back (the cache's epoch moved on), and one that began before is gone.
        self.forget_cached(written)
        try:
            await self._write(projections, value, piece_of, limit)
        finally:
            self.forget_cached(written)

    async def _write(
        self, projections: list[ChunkProjection], value: np.ndarray | None, piece_of: PieceOf, limit: int
    ) -> None:
        if len(projections) > 1:
            await self._check_partial_chunks_decode(projections, limit)
        # Durable writes wait on the disk for each chunk: large chunks go through the store's own I/O
        # threads one task each, many flushes in flight; small ones take the batched path, which
        # hands each batch's files to those threads together (`Store.set_many_sync`).
        durable = getattr(self.store, "fsync", False) is True
        fast = (
            self.store.supports_sync_io
            and value is not None
            and not (durable and self.chunk_nbytes >= _PARALLEL_MIN_CHUNK_BYTES)
            and not isinstance(self.synchronizer, ProcessSynchronizer)
        )
        if fast:
            deferred: list[ChunkProjection] = []
            if self._encodes_then_writes:
                await self._encode_then_write(projections, value, deferred)
            else:
                workers = self._worker_count(writing=True)
                await self._run_batches(projections, workers, self._write_batch, value, deferred, durable)
            projections = deferred  # chunks another writer held: take turns on the async path

        async def write(projection: ChunkProjection) -> None:
            await self._write_chunk(projection, await piece_of(projection))

        await for_each_concurrently(projections, write, limit)

    async def _check_partial_chunks_decode(self, projections: list[ChunkProjection], limit: int) -> None:
        # A write touching several chunks must not leave some written when a damaged chunk it
        # has to read-modify-write fails to decode: decode those first, before writing any.
        store = self.store

        async def check(projection: ChunkProjection) -> None:
            key = self.chunk_key(projection.chunk_coords)
            async with store.limiter:
                data = await store.get(key)
            if data is not None:
                await run_in_codec_pool(self.pipeline.decode, data, self.grid, store.key_url(key))

        partial = [p for p in projections if not p.is_complete_chunk]
        await for_each_concurrently(partial, check, limit)

    def _write_batch(
        self,
        projections: Sequence[ChunkProjection],
        value: np.ndarray,
        deferred: list[ChunkProjection],
        durable: bool = False,
    ) -> None:
        if not durable:
            self._write_unflushed(projections, value, deferred)
            return
        write_empty = self.write_empty()
        # Durable: the encoded chunks wait here, their locks held, and are flushed together.
        flushing: list[tuple[str, Any]] = []
        held: list[Any] = []
        try:
            for projection in projections:
                key = self.chunk_key(projection.chunk_coords)
                lock = try_chunk_lock(self.store.location, key)
                if lock is None:
                    deferred.append(projection)  # list.append is atomic: safe from several threads
                    continue
                encoded = self._write_one(projection, key, value, write_empty, lock, held)
                if encoded is not None:
                    flushing.append((key, encoded))
                    if len(flushing) >= _DURABLE_FLUSH_CHUNKS:
                        self.store.set_many_sync(flushing)
                        flushing.clear()
                        _release_all(held)
            if flushing:
                self.store.set_many_sync(flushing)
        finally:
            _release_all(held)

    def _write_unflushed(
        self, projections: Sequence[ChunkProjection], value: np.ndarray, deferred: list[ChunkProjection]
    ) -> None:
        """`_write_batch` with no flush: each chunk encoded by `_chunk_encoder` and stored (its key
        deleted where it became fill), the batch's locks taken and released in one registry update each."""
        store = self.store
        encode_chunk = self._chunk_encoder(value, self.write_empty(), self._writes_buffers)
        keys = [self.chunk_key(projection.chunk_coords) for projection in projections]
        locks = try_chunk_locks(store.location, keys)
        try:
            for projection, key, lock in zip(projections, keys, locks, strict=True):
                if lock is None:
                    deferred.append(projection)  # list.append is atomic: safe from several threads
                    continue
                encoded = encode_chunk(projection, key)
                if encoded is None:
                    store.delete_sync(key)
                else:
                    store.set_sync(key, encoded)
        finally:
            release_chunk_locks([lock for lock in locks if lock is not None])

    def _chunk_encoder(self, value: np.ndarray, write_empty: bool, as_buffer: bool) -> EncodeChunk:
        """What to store for each chunk written from ``value``, its lock held (`_encoded_chunk`), with
        whole chunks handed straight to the pipeline's plain encoder where they lie, when it has one.

        The plain way takes the same steps (the fill check, the encoder `CodecPipeline.encode`
        would choose, the same error) without `_encoded_chunk`'s layers of calls: on two codec
        threads those microseconds a chunk are GIL the other thread waits for. Before it, W1 v3's
        chunks on ext4 took 1.04 of the time of a stand-in calling the encoder straight; after it,
        the two were level (round 11 in docs/performance.md).
        """

        def encoded_chunk(projection: ChunkProjection, key: str) -> Any:
            return self._encoded_chunk(projection, key, value, write_empty, as_buffer)

        encode_whole = self._whole_chunk_encoder(value, write_empty)
        if encode_whole is None:
            return encoded_chunk
        grid = self.grid

        def plainly_encoded_chunk(projection: ChunkProjection, key: str) -> Any:
            chunk = value[projection.out_selection]
            if not (projection.is_complete_chunk and chunk.shape == grid):
                return encoded_chunk(projection, key)  # at the array's edge, or written in part
            return encode_whole(chunk, key)

        return plainly_encoded_chunk

    def _whole_chunk_encoder(self, value: np.ndarray, write_empty: bool) -> EncodeWhole | None:
        """For writes from ``value`` whose chunks the pipeline's plain encoder can take: what to store
        for one whole chunk of values (any layout), or None to delete its key; else None."""
        encode = self.pipeline.plain_encoder
        if (
            encode is None
            or self._encodes_shards
            or type(value) is not np.ndarray
            or value.ndim == 0
            or value.dtype != self.dtype
            or self.dtype.kind == "O"
        ):
            return None
        is_fill, key_url = self._dtype_fill_test, self.store.key_url

        def encode_whole(chunk: np.ndarray, key: str) -> Any:
            if not write_empty and is_fill(chunk):
                return None
            try:
                return encode(chunk)
            except Exception as exc:
                raise CodecError(f"chunk {key_url(key)}: cannot encode: {exc}") from exc

        return encode_whole

    def _staged_encoding(self, value: np.ndarray, write_empty: bool) -> StagedEncoding | None:
        """For `small_writes`: each batch's whole chunks copied out of ``value`` in one go where they
        lie side by side (`side_by_side_chunks`), then encoded from that copy; None where the plain
        encoder does not apply.

        One copy a batch instead of one a chunk: NumPy lets go of the GIL for each copy of a 2 KiB
        chunk, and the writing thread, whose system calls return meanwhile, then takes it, so the
        encoding thread waits for it back before it reaches the compressor.
        """
        encode_whole = self._whole_chunk_encoder(value, write_empty)
        if encode_whole is None:
            return None
        grid, ndim = self.grid, len(self.grid)
        # (*grid[:-1], chunks in the run, grid[-1]) -> the run's chunks first, each in C order
        axes = (ndim - 1, *range(ndim - 1), ndim)

        def stage(projections: Sequence[ChunkProjection]) -> np.ndarray | None:
            selection = side_by_side_chunks(projections, grid)
            if selection is None:
                return None
            run = value[selection].reshape(*grid[:-1], len(projections), grid[-1])
            return np.ascontiguousarray(run.transpose(axes))

        return StagedEncoding(stage, encode_whole)

    async def _encode_then_write(
        self, projections: list[ChunkProjection], value: np.ndarray, deferred: list[ChunkProjection]
    ) -> None:
        """Small chunks to local files on two codec threads, one encoding and one writing (`small_writes`)."""
        write = self._small_chunk_write(projections, value, deferred)
        await self._run_on_codec_threads([write.encoding_first, write.writing_first])
        write.finish()

    def _small_chunk_write(
        self, projections: list[ChunkProjection], value: np.ndarray, deferred: list[ChunkProjection]
    ) -> EncodeThenWrite:
        write_empty = self.write_empty()
        encode_chunk = self._chunk_encoder(value, write_empty, self._writes_buffers)
        staged = self._staged_encoding(value, write_empty)
        return EncodeThenWrite(self.store, projections, self.chunk_key, encode_chunk, deferred, staged)

    @property
    def _writes_unflushed_in_process(self) -> bool:
        """Whether writes from an array value may run on this process's threads with the store's
        blocking I/O: a store that has it, not flushing each chunk to disk, with no lock across
        processes. `small_writes`' two threads and the large chunks' batches both ask this."""
        return (
            self.store.supports_sync_io
            and getattr(self.store, "fsync", False) is not True
            and not isinstance(self.synchronizer, ProcessSynchronizer)
        )

    @property
    def _encodes_then_writes(self) -> bool:
        """Whether writes from an array value take `small_writes`' two threads: small chunks, to a
        store whose small-chunk writes gain from two threads (local files), written unflushed."""
        return (
            self.chunk_nbytes < _PARALLEL_MIN_CHUNK_BYTES
            and self._worker_count(writing=True) > 1
            and self._writes_unflushed_in_process
        )

    def writes_blocking(self, projections: Sequence[ChunkProjection]) -> bool:
        """Whether `write_blocking` can write ``projections``: whole chunks, with no decoded-chunk
        cache to keep in step, of a write that takes `small_writes`' two threads (small chunks) or
        the codec threads' batches with no flush per chunk (large ones)."""
        return (
            (self._encodes_then_writes or self._writes_large_chunks_in_batches)
            and active_cache() is None
            and all(projection.is_complete_chunk for projection in projections)
        )

    @property
    def _writes_large_chunks_in_batches(self) -> bool:
        """Whether writes of chunks of at least 128 KiB from an array value take `_write_batch`'s
        batches on the codec threads, written unflushed (flushed ones go to the store's own I/O
        threads), as `_write` chooses."""
        return self.chunk_nbytes >= _PARALLEL_MIN_CHUNK_BYTES and self._writes_unflushed_in_process

    def write_blocking(self, projections: list[ChunkProjection], value: np.ndarray) -> list[ChunkProjection]:
        """Write whole chunks from ``value`` from the calling thread, with no event loop; only for
        projections `writes_blocking` accepts. Returns the chunks another writer held: write those
        with `write`, which waits its turn.

        The facade's way for whole chunks: small ones with the caller as `small_writes`' writing
        thread and one codec thread encoding beside it; large ones in `_write_batch`'s batches on the
        codec threads, as the event loop would run them, without the hops to the loop and back.
        Reads sharing a decode on an event loop (`_read_fast`) are not told to forget it, as with a
        write from another event loop's thread.
        """
        deferred: list[ChunkProjection] = []
        if self.chunk_nbytes >= _PARALLEL_MIN_CHUNK_BYTES:
            self._write_batches_blocking(projections, value, deferred)
            return deferred
        write = self._small_chunk_write(projections, value, deferred)
        helper = codec_executor().submit(write.encoding_first) if len(projections) > BATCH_CHUNKS else None
        with blosc_in_this_thread_alone():
            write.writing_first()
        if helper is not None:
            concurrent.futures.wait([helper])  # threads cannot be cancelled: its batches end first
        write.finish()
        return deferred

    def _write_batches_blocking(
        self, projections: list[ChunkProjection], value: np.ndarray, deferred: list[ChunkProjection]
    ) -> None:
        """`_write_batch` over ``projections`` on the codec threads, the caller waiting for them.

        The caller does not take batches itself, unlike reads: its encodes would allocate each
        chunk's copy and output in the main thread's heap, which glibc may give back and fault in
        again per chunk (21,000 page faults in one W1 write of 256 chunks of 1 MiB, 1.4 times as slow).
        """
        workers = self._worker_count(writing=True)
        queue = _BatchQueue(_batches(projections, workers, self.chunk_nbytes), self._write_batch, value, deferred)
        helpers = [codec_executor().submit(queue.drain) for _ in range(min(queue.pending, workers))]
        concurrent.futures.wait(helpers)  # threads cannot be cancelled: their batches end first
        queue.raise_first_error()

    def _encoded_chunk(
        self, projection: ChunkProjection, key: str, value: np.ndarray, write_empty: bool, as_buffer: bool
    ) -> Any:
        """What to store for one chunk written from ``value``, its lock held: the encoded bytes, or
        None where the chunk becomes fill and its key is deleted instead."""
        piece = value[()] if value.ndim == 0 else value[projection.out_selection]
        if self._encodes_in_place(projection, piece):
            # The caller's values are the whole chunk: encode them where they are (the
            # codecs copy what they must), not after a copy into a new chunk array.
            chunk = piece
        else:
            chunk = self._chunk_to_update(projection, piece, write_empty, self.store.get_sync)
            if chunk is None:
                return None
            chunk[projection.chunk_selection] = piece
        return self.encode_unless_fill(chunk, key, write_empty, as_buffer=as_buffer)

    def _write_one(
        self, projection: ChunkProjection, key: str, value: np.ndarray, write_empty: bool, lock: Any, held: list[Any]
    ) -> Any:
        """Encode one chunk of a durable batch under ``lock``: return its bytes for the caller to
        flush with others, the lock kept in ``held`` until then; or, where the chunk became fill,
        delete its key, release the lock and return None."""
        keep = False
        try:
            encoded = self._encoded_chunk(projection, key, value, write_empty, self._writes_buffers)
            if encoded is None:
                self.store.delete_sync(key)
                return None
            held.append(lock)
            keep = True
            return encoded
        finally:
            if not keep:
                lock.release()

    def _chunk_to_update(
        self, projection: ChunkProjection, piece: Any, write_empty: bool, get: Callable[[str], bytes | None]
    ) -> np.ndarray | None:
        """The chunk array to write ``piece`` into, or None when the chunk simply becomes fill."""
        if projection.is_complete_chunk:
            piece_array = np.asarray(piece)
            if piece_array.ndim == 0 and not write_empty and self.is_fill(piece_array.astype(self.dtype).reshape(1)):
                return None
            if self._is_edge_chunk(projection.chunk_coords):
                return np.full(self.grid, self.fill, dtype=self.dtype)
            return np.empty(self.grid, dtype=self.dtype)
        key = self.chunk_key(projection.chunk_coords)
        data = get(key)
        return np.full(self.grid, self.fill, dtype=self.dtype) if data is None else self.decode_writable(data, key)

    async def _write_chunk(self, projection: ChunkProjection, piece: Any) -> None:
        store = self.store
        key = self.chunk_key(projection.chunk_coords)
        write_empty = self.write_empty()
        async with chunk_lock(store.location, key, self.synchronizer):
            if self._encodes_in_place(projection, piece):
                # The caller's values are the whole chunk: the codec thread encodes them where they
                # are, rather than the event loop first copying them into a new chunk array.
                chunk = piece
            elif projection.is_complete_chunk:
                chunk = self._chunk_to_update(projection, piece, write_empty, _never_called)
                if chunk is not None:
                    chunk[projection.chunk_selection] = piece
            else:
                chunk = await self.stored_chunk(key)
                chunk[projection.chunk_selection] = piece
            encoded = None
            if chunk is not None:
                encoded = await run_in_codec_pool(self._encode_for_upload, chunk, key, write_empty)
            await self.put_chunk(key, encoded)

    def _encode_for_upload(self, chunk: np.ndarray, key: str, write_empty: bool) -> Any:
        """`encode_unless_fill`, then the store's `Store.prepare_upload` of the bytes, on the same codec thread."""
        encoded = self.encode_unless_fill(chunk, key, write_empty)
        return None if encoded is None else self.store.prepare_upload(encoded)

    def forget_shared_decodes(self, projections: Iterable[ChunkProjection]) -> None:
        """Reads starting from now must not join a decode of a chunk a write is about to change."""
        in_flight = _chunks_in_flight()
        if not in_flight:  # no read is sharing a decode: nothing to forget (the common case)
            return
        waited_on = _chunks_waited_on()
        for projection in projections:
            chunk = (self.store.location, self.chunk_key(projection.chunk_coords))
            in_flight.pop(chunk, None)
            waited_on.discard(chunk)

    async def stored_chunk(self, key: str) -> np.ndarray:
        """The chunk at ``key`` as a writable array to update (the fill value where none is stored)."""
        async with self.store.limiter:
            data = await self.store.get(key)
        if data is None:
            return np.full(self.grid, self.fill, dtype=self.dtype)
        return await run_in_codec_pool(self.decode_writable, data, key)

    async def put_chunk(self, key: str, encoded: Any) -> None:
        """Store an encoded chunk (bytes, or what the store's ``prepare_upload`` made of them), or
        delete the key where the chunk became fill (``encoded`` None)."""
        self.forget_cached([key])
        try:
            async with self.store.limiter:
                if encoded is None:
                    await self.store.delete(key)
                else:
                    await self.store.set(key, encoded)
        finally:
            self.forget_cached([key])

    # -- chunk-level helpers -------------------------------------------------------------------------

    def _worker_count(self, writing: bool = False) -> int:
        """How many threads should share a read or write of this array's chunks: one for small chunks
        (see above), unless they are written to a store whose writes wait on a disk."""
        if self.chunk_nbytes >= _PARALLEL_MIN_CHUNK_BYTES or (writing and self.store.small_writes_in_parallel):
            return codec_thread_count()
        return 1

    @property
    def chunk_nbytes(self) -> int:
        """Bytes of one decoded chunk."""
        return math.prod(self.grid) * self.dtype.itemsize

    def is_fill(self, chunk: np.ndarray) -> bool:
        """Whether every element of ``chunk`` equals the fill value (NaN equal to NaN)."""
        if chunk.size == 0:
            return True
        if chunk.dtype == self.dtype:
            return self._dtype_fill_test(chunk)
        return _fill_test(chunk.dtype, self.fill)(chunk)

    @functools.cached_property
    def _dtype_fill_test(self) -> Callable[[np.ndarray], bool]:
        """`is_fill` for non-empty chunks of this array's dtype, made once per array rather than once
        a chunk: the whole-chunk encoders call it for every chunk they write."""
        return _fill_test(self.dtype, self.fill)

    def encode_unless_fill(self, chunk: np.ndarray, key: str, write_empty: bool, as_buffer: bool = False) -> Any:
        """Encoded chunk bytes (any buffer if ``as_buffer``), or None when the chunk is all fill and
        empty chunks are not written."""
        if not write_empty and self.is_fill(chunk):
            return None
        encode = self.pipeline.encode_buffer if as_buffer else self.pipeline.encode
        if not self._encodes_shards:
            try:
                return encode(chunk, key)
            except CodecError as exc:  # the URL made only for the message: a write of many small chunks makes none
                raise naming_url(exc, key, self.store.key_url(key)) from exc.__cause__
        with inner_chunks_written_when_empty(write_empty):  # a sharded array's inner chunks follow it too
            return encode(chunk, self.store.key_url(key))

    @functools.cached_property
    def _encodes_shards(self) -> bool:
        """Whether this array's chunks are shards (whose inner chunks follow ``write_empty`` too)."""
        return isinstance(getattr(self.pipeline, "array_bytes", None), ShardingCodec)

    @property
    def _writes_buffers(self) -> bool:
        """Whether the store's ``set_sync`` takes any buffer, not only ``bytes`` (local files)."""
        return getattr(self.store, "writes_buffers", False) is True

    def _encodes_in_place(self, projection: ChunkProjection, piece: Any) -> bool:
        """Whether ``piece`` (the caller's values) is exactly a whole chunk, to encode without a copy."""
        return (
            projection.is_complete_chunk
            and type(piece) is np.ndarray
            and piece.shape == self.grid
            and piece.dtype == self.dtype
            and self.dtype.kind != "O"
        )

    def decode_writable(self, data: bytes, key: str) -> np.ndarray:
        """Decode a stored chunk into an array that may be modified."""
        chunk = self.pipeline.decode(data, self.grid, self.store.key_url(key))
        return chunk if chunk.flags.writeable else chunk.copy()

    def _is_edge_chunk(self, chunk_coords: tuple[int, ...]) -> bool:
        return any((c + 1) * n > s for c, n, s in zip(chunk_coords, self.grid, self.shape, strict=True))

    # -- the fast engine's batches ------------------------------------------------------------------

    async def _run_batches(
        self,
        projections: list[ChunkProjection],
        workers: int,
        job: Callable[..., None],
        *args: Any,
        work_nbytes: int | None = None,
    ) -> None:
        """Split ``projections`` into batches for ``workers`` threads; run ``job(batch, *args)`` on codec threads.

        The threads take batches from one queue and the last to finish wakes the event loop
        once, rather than once per batch. ``work_nbytes``: the bytes each chunk decodes or
        encodes, where that is not the chunk's size.
        """
        work = self.chunk_nbytes if work_nbytes is None else work_nbytes
        queue = _BatchQueue(_batches(projections, workers, work), job, *args)
        if not queue.pending:
            return
        await self._run_on_codec_threads([queue.drain] * min(queue.pending, workers))
        queue.raise_first_error()

    @staticmethod
    async def _run_on_codec_threads(jobs: list[Callable[[], None]]) -> None:
        """Run each job (which records its own failures) on a codec thread; the last to finish wakes
        the event loop once, rather than once per job."""
        if not jobs:
            return
        loop = asyncio.get_running_loop()
        finished = loop.create_future()
        running = len(jobs)
        count_lock = threading.Lock()

        def work(job: Callable[[], None]) -> None:
            nonlocal running
            try:
                job()
            finally:
                with count_lock:
                    running -= 1
                    last = running == 0
                if last:
                    loop.call_soon_threadsafe(_resolve, finished)

        executor = codec_executor()
        for job in jobs:
            executor.submit(work, job)
        # Threads cannot be cancelled: a cancelled call still lets them finish their batches.
        await asyncio.shield(finished)


def _release_all(locks: list[Any]) -> None:
    """Release every lock in ``locks`` and empty the list."""
    while locks:
        locks.pop().release()


class _BatchQueue:
    """Batches of chunks that several threads take turns at, each running ``job(batch, *args)``."""

    def __init__(self, batches: list[list[ChunkProjection]], job: Callable[..., None], *args: Any) -> None:
        self._batches = collections.deque(batches)
        self._job = job
        self._args = args
        self._errors: list[BaseException] = []

    @property
    def pending(self) -> int:
        """Batches not yet taken."""
        return len(self._batches)

    def drain(self) -> None:
        """Run batches until none is left; on a failure, record it and leave the rest undone."""
        while True:
            try:
                batch = self._batches.popleft()  # deque.popleft is atomic: safe from several threads
            except IndexError:
                return
            try:
                self._job(batch, *self._args)
            except BaseException as exc:
                self._errors.append(exc)
                self._batches.clear()  # the other threads stop at their next batch
                return

    def raise_first_error(self) -> None:
        """Raise the first failure any thread recorded."""
        if self._errors:
            raise self._errors[0]


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _batches(projections: list[ChunkProjection], workers: int, chunk_nbytes: int) -> list[list[ChunkProjection]]:
    """Contiguous batches of ``projections``: one for a single worker, else batches that shrink,
    each a share of the chunks left (guided self-scheduling), none smaller than worth handing to a
    thread. With equal batches (four a thread until round 14), whichever thread took the last one
    worked on alone: W1's writes (256 chunks of 1 MiB, batches of 32) ended with the two codec
    threads a median 1.5 ms apart."""
    if not projections:
        return []
    if workers == 1:
        return [projections]
    smallest = -(-_MIN_BATCH_BYTES // max(1, chunk_nbytes))
    shares = workers * _SHARES_PER_WORKER
    batches, start, total = [], 0, len(projections)
    while start < total:
        size = max(smallest, -(-(total - start) // shares))
        batches.append(projections[start : start + size])
        start += size
    return batches


_in_flight_by_loop: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[tuple[str, str], asyncio.Future[np.ndarray | None]]
] = weakref.WeakKeyDictionary()


def _chunks_in_flight() -> dict[tuple[str, str], asyncio.Future[Any]]:
    """Decodes of partly read chunks under way in this event loop, by (store location, chunk key)."""
    return _in_flight_by_loop.setdefault(asyncio.get_running_loop(), {})


_waited_on_by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, set[tuple[str, str]]] = (
    weakref.WeakKeyDictionary()
)


def _chunks_waited_on() -> set[tuple[str, str]]:
    """The chunks in flight in this event loop that another call has joined (only this loop's thread
    adds to it; the codec threads read it, and a join they miss costs that call a read of its own)."""
    return _waited_on_by_loop.setdefault(asyncio.get_running_loop(), set())


_NOT_KEPT = object()
"""What a call that read only its part of a chunk hands to the calls that joined it too late."""


def _settle(
    in_flight: dict[tuple[str, str], asyncio.Future[Any]],
    waited_on: set[tuple[str, str]],
    location: str,
    published: dict[str, asyncio.Future[Any]],
    *,
    results: dict[str, Any] | None = None,
    error: BaseException | None = None,
) -> None:
    """Hand the chunks this call decoded (or its failure) to the calls waiting on them."""
    for key, future in published.items():
        if in_flight.get((location, key)) is future:
            del in_flight[(location, key)]
            waited_on.discard((location, key))
        if future.done():
            continue
        if results is not None and key in results:
            future.set_result(results[key])
        else:
            future.set_exception(error or RuntimeError(f"the read of {key} stopped before decoding it"))
            future.exception()  # nobody may be waiting: never report it as unretrieved


# NaN and NaT never equal themselves: a fill value of either is matched by these tests instead.
_MISSING_TESTS: dict[str, Callable[[Any], Any]] = {"f": np.isnan, "c": np.isnan, "m": np.isnat, "M": np.isnat}


def _fill_test(dtype: np.dtype, fill: Any) -> Callable[[np.ndarray], bool]:
    """Whether a non-empty array of ``dtype`` is all ``fill`` (NaN equal to NaN), with what depends
    on the dtype alone (which test, whether the fill is NaN) worked out here, once."""
    if dtype.kind == "O":

        def all_same_objects(chunk: np.ndarray) -> bool:
            # Elements may be lists or arrays, whose == is elementwise: compare each as one object.
            return all(item is fill or _same_scalar(item, fill) for item in chunk.flat)

        return all_same_objects
    is_missing = _MISSING_TESTS.get(dtype.kind)
    if is_missing is not None and bool(is_missing(np.asarray(fill, dtype))):

        def all_missing(chunk: np.ndarray) -> bool:
            return bool(is_missing(chunk.flat[0])) and bool(is_missing(chunk).all())

        return all_missing

    def all_fill(chunk: np.ndarray) -> bool:  # real data almost always differs at the first element
        return bool(chunk.flat[0] == fill) and bool((chunk == fill).all())

    return all_fill


def _same_scalar(item: Any, fill: Any) -> bool:
    """Whether an object element equals the fill value and is of its type (False is not a fill of 0;
    ``np.bytes_`` is a fill of ``bytes``)."""
    same_type = type(item) is type(fill) or (isinstance(item, bytes) and isinstance(fill, bytes))
    if not same_type or isinstance(item, np.ndarray):
        return False
    try:
        return bool(item == fill)
    except (TypeError, ValueError):
        return False


def _never_called(key: str) -> bytes | None:
    raise AssertionError(f"a complete chunk write read {key}")  # pragma: no cover
