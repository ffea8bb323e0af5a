"""Concurrent reads of parts of one chunk share a single fetch and decode, and never outlive a write."""

import asyncio
import threading

import numpy as np

import asyncarr
from asyncarr.stores import MemoryStore


class CountingMemoryStore(MemoryStore):
    """A MemoryStore counting reads on both its async and its blocking path (so the fast path stays on)."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0
        self._lock = threading.Lock()

    def _count(self) -> None:
        with self._lock:
            self.reads += 1

    async def get(self, key, byte_range=None):
        self._count()
        return await super().get(key, byte_range)

    def get_sync(self, key, byte_range=None):
        self._count()
        return super().get_sync(key, byte_range)


def test_a_hundred_concurrent_point_reads_in_one_chunk_fetch_it_far_fewer_times():
    store = CountingMemoryStore()
    assert store.supports_sync_io
    data = np.arange(256 * 256, dtype="f4").reshape(256, 256)
    points = [(i, (7 * i) % 256) for i in range(100)]

    async def scenario() -> list:
        z = await asyncarr.open_array(store, mode="w", shape=data.shape, chunks=(256, 256), dtype="f4")
        await z.setitem(..., data)
        store.reads = 0
        return await asyncio.gather(*(z.getitem(p) for p in points))

    values = asyncio.run(scenario())
    assert values == [data[p] for p in points]
    assert store.reads < 20, f"{store.reads} reads of one chunk for 100 concurrent point reads"


def test_a_read_started_after_a_write_sees_the_written_data():
    store = CountingMemoryStore()

    async def scenario() -> tuple:
        z = await asyncarr.open_array(store, mode="w", shape=(64, 64), chunks=(64, 64), dtype="i4")
        await z.setitem(..., 1)
        before = asyncio.ensure_future(z.getitem((3, 3)))
        await z.setitem((slice(0, 10), slice(0, 10)), 2)
        after = await z.getitem((3, 3))
        return await before, after

    before, after = asyncio.run(scenario())
    assert before in (1, 2)  # raced with the write: either is allowed
    assert after == 2


class _ForgetfulSet(set):
    """A set of chunks waited on that never hears of a join: every reader takes only its own part."""

    def add(self, item) -> None:
        pass


def test_calls_that_join_too_late_for_the_whole_chunk_read_their_own_part(monkeypatch):
    monkeypatch.setattr("asyncarr.chunk_io._chunks_waited_on", _ForgetfulSet)
    store = CountingMemoryStore()
    data = np.arange(256 * 256, dtype="f4").reshape(256, 256)
    points = [(i, (7 * i) % 256) for i in range(40)]
    windows = [(slice(i, i + 30), slice(2 * i, 2 * i + 9)) for i in range(0, 200, 25)]

    async def scenario() -> tuple:
        z = await asyncarr.open_array(store, mode="w", shape=data.shape, chunks=(128, 128), dtype="f4")
        await z.setitem(..., data)
        store.reads = 0
        values = await asyncio.gather(*(z.getitem(p) for p in points), *(z.getitem(w) for w in windows))
        return values, store.reads

    values, reads = asyncio.run(scenario())
    for got, selection in zip(values, points + windows, strict=True):
        np.testing.assert_array_equal(got, data[selection])
    assert reads >= len(points)  # each joiner read its own part: none was handed a chunk nobody kept


def test_an_async_read_of_a_row_of_local_chunks_reads_only_the_blocks_it_lies_in(tmp_path):
    import numcodecs

    data = np.random.default_rng(3).normal(size=(512, 512)).astype("f4").cumsum(axis=1)
    compressor = numcodecs.Blosc("lz4", 5, numcodecs.Blosc.SHUFFLE, blocksize=16 * 1024)

    async def scenario() -> tuple:
        path = str(tmp_path / "a.zarr")
        z = await asyncarr.open_array(
            path, mode="w", shape=data.shape, chunks=(256, 512), dtype="f4", compressor=compressor, zarr_format=2
        )
        await z.setitem(..., data)
        reader = await asyncarr.open_array(path, mode="r")
        reader.store.reset_metrics()
        row = await reader.getitem(300)
        return row, reader.store.metrics().bytes_read

    row, bytes_read = asyncio.run(scenario())
    np.testing.assert_array_equal(row, data[300])
    assert bytes_read < (tmp_path / "a.zarr" / "1.0").stat().st_size / 4  # one block of eight, and the header
