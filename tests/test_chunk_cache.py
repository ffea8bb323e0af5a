"""The decoded-chunk cache: reads equal NumPy's, repeated reads cost no requests, this process's
writes invalidate (also while reads run in other threads), and the bytes held never pass the budget."""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from emulators import s3

import asyncarr
import asyncarr.sync as za
from asyncarr.chunk_cache import chunk_cache
from asyncarr.stores.s3 import S3Store

CHUNK = (32, 32)
SHAPE = (128, 128)


@pytest.fixture
def cache_on() -> Iterator[int]:
    """The cache switched on with room for 8 chunks of float64, emptied before and after."""
    budget = 8 * 32 * 32 * 8
    chunk_cache.clear()
    with asyncarr.config.set(chunk_cache_bytes=budget):
        yield budget
    chunk_cache.clear()


def gets(store: asyncarr.stores.Store) -> int:
    return store.metrics().requests.get("get", 0)


def make_array(tmp_path: Path) -> tuple[za.Array, np.ndarray]:
    data = np.random.default_rng(1).random(SHAPE)
    z = za.create_array(str(tmp_path / "a.zarr"), shape=SHAPE, chunks=CHUNK, dtype="f8")
    z[...] = data
    return za.open_array(str(tmp_path / "a.zarr"), mode="r+"), data


def test_a_repeated_read_costs_no_requests_and_equals_numpy(tmp_path: Path, cache_on: int) -> None:
    z, data = make_array(tmp_path)
    before = gets(z.store)
    np.testing.assert_array_equal(z[10:50, 20:60], data[10:50, 20:60])  # 4 chunks
    assert gets(z.store) - before == 4
    np.testing.assert_array_equal(z[12:40, 30:50], data[12:40, 30:50])  # inside the same 4
    np.testing.assert_array_equal(z.oindex[[11, 45], [25, 59]], data[np.ix_([11, 45], [25, 59])])
    np.testing.assert_array_equal(z.vindex[[11, 45], [25, 59]], data[[11, 45], [25, 59]])
    assert gets(z.store) - before == 4
    assert chunk_cache.hits >= 4


def test_another_handle_on_the_same_array_shares_the_entries(tmp_path: Path, cache_on: int) -> None:
    z, data = make_array(tmp_path)
    z[0:32, 0:32]
    other = za.open_array(str(tmp_path / "a.zarr"), mode="r")
    before = gets(other.store)
    np.testing.assert_array_equal(other[0:32, 0:32], data[0:32, 0:32])
    assert gets(other.store) == before


def test_a_missing_chunk_is_remembered_as_fill(tmp_path: Path, cache_on: int) -> None:
    z = za.create_array(str(tmp_path / "sparse.zarr"), shape=SHAPE, chunks=CHUNK, dtype="i4", fill_value=7)
    np.testing.assert_array_equal(z[0:10, 0:10], np.full((10, 10), 7))
    before = gets(z.store)
    np.testing.assert_array_equal(z[0:10, 0:10], np.full((10, 10), 7))
    assert gets(z.store) == before


def test_writes_in_this_process_invalidate(tmp_path: Path, cache_on: int) -> None:
    z, data = make_array(tmp_path)
    z[0:64, 0:64]
    z[5, 5] = -1.0  # a partial write of one chunk
    data[5, 5] = -1.0
    z[32:64, 32:64] = 0.5  # a whole chunk
    data[32:64, 32:64] = 0.5
    z[0:32, 32:64] = 0.0  # becomes fill: deleted, not stored
    data[0:32, 32:64] = 0.0
    np.testing.assert_array_equal(z[0:64, 0:64], data[0:64, 0:64])
    z.resize((40, 40))  # cuts and deletes chunks
    z.resize(SHAPE)
    expected = np.zeros(SHAPE)
    expected[:40, :40] = data[:40, :40]
    np.testing.assert_array_equal(z[...], expected)


def test_an_array_replaced_with_mode_w_is_never_read_from_the_cache(tmp_path: Path, cache_on: int) -> None:
    z, _ = make_array(tmp_path)
    z[...]
    replaced = za.open_array(str(tmp_path / "a.zarr"), mode="w", shape=SHAPE, chunks=CHUNK, dtype="f8")
    np.testing.assert_array_equal(replaced[...], np.zeros(SHAPE))
    group = za.open_group(str(tmp_path / "g.zarr"), mode="w")
    member = group.create_array("x", shape=(64,), chunks=(32,), dtype="i2")
    member[...] = np.arange(64)
    member[...]
    del group["x"]
    again = group.create_array("x", shape=(64,), chunks=(32,), dtype="i2")
    np.testing.assert_array_equal(again[...], np.zeros(64))


def test_held_bytes_never_pass_the_budget(tmp_path: Path, cache_on: int) -> None:
    z, _ = make_array(tmp_path)
    for row in range(0, SHAPE[0], 32):
        for column in range(0, SHAPE[1], 32):
            z[row : row + 1, column : column + 1]
            assert chunk_cache.nbytes <= cache_on
    assert len(chunk_cache) == 8  # 16 chunks read, the 8 most recent kept
    with asyncarr.config.set(chunk_cache_bytes=1000):  # smaller than one chunk: nothing kept
        chunk_cache.clear()
        z[0:1, 0:1]
        assert chunk_cache.nbytes == 0
    with asyncarr.config.set(chunk_cache_bytes=0):  # switched off: the memory goes
        z[0:1, 0:1]
        assert chunk_cache.nbytes == 0


def test_cached_chunks_cannot_be_changed_through_a_read(tmp_path: Path, cache_on: int) -> None:
    z, data = make_array(tmp_path)
    first = z[0:32, 0:32]
    first[...] = 99.0  # the caller's copy, not the cached chunk
    np.testing.assert_array_equal(z[0:32, 0:32], data[0:32, 0:32])


def test_reads_in_threads_during_writes_see_no_stale_chunk_after_the_write(tmp_path: Path, cache_on: int) -> None:
    z, _ = make_array(tmp_path)
    z[...] = 0.0
    stop = threading.Event()

    def read_forever() -> None:
        reader = za.open_array(str(tmp_path / "a.zarr"), mode="r")
        while not stop.is_set():
            block = reader[0:64, 0:64]
            assert set(np.unique(block)) <= set(range(0, 50))  # some written value, never garbage

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        readers = [pool.submit(read_forever) for _ in range(3)]
        for value in range(1, 50):
            z[0:64, 0:64] = float(value)
            # Once the write has returned, every read in this process sees it.
            np.testing.assert_array_equal(za.open_array(str(tmp_path / "a.zarr"), mode="r")[0:64, 0:64], value)
        stop.set()
        for reader in readers:
            reader.result()


def test_on_s3_a_hot_window_is_fetched_once(cache_on: int) -> None:
    bucket = s3.new_bucket()
    store = S3Store(bucket, "hot.zarr", **s3.store_options())
    data = np.arange(SHAPE[0] * SHAPE[1], dtype="f8").reshape(SHAPE)
    za.create_array(store, shape=SHAPE, chunks=CHUNK, dtype="f8")[...] = data
    reader_store = S3Store(bucket, "hot.zarr", read_only=True, **s3.store_options())
    z = za.open_array(reader_store, mode="r")
    rng = np.random.default_rng(0)
    for _ in range(50):
        row, column = rng.integers(0, 48, size=2)
        np.testing.assert_array_equal(
            z[row : row + 16, column : column + 16], data[row : row + 16, column : column + 16]
        )
    # The metadata documents (both formats asked for at once), then the 4 chunks of the hot corner once each.
    assert reader_store.metrics().requests["get"] <= 4 + 4


def test_the_index_by_chunk_agrees_with_the_entries_through_puts_evictions_and_forgets() -> None:
    # A write finds its chunks through the index, not by scanning: the index must name exactly
    # the entries held, whatever mix of puts, evictions and drops came before.
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from asyncarr.chunk_cache import ABSENT, ChunkCache

    operation = st.tuples(
        st.sampled_from(["put", "put", "put", "forget", "forget_prefix"]),
        st.sampled_from(["file:///a", "file:///b"]),
        st.sampled_from(["x/c/0", "x/c/1", "y/c/0", "y/c/1", "y/c/2"]),
        st.sampled_from(["t1", "t2"]),
        st.integers(0, 3),
    )

    @settings(max_examples=200, deadline=None)
    @given(st.lists(operation, max_size=40))
    def check(operations: list) -> None:
        cache = ChunkCache()
        with asyncarr.config.set(chunk_cache_bytes=3 * 8 * 16):  # room for three of the larger chunks
            for kind, location, key, token, size in operations:
                if kind == "put":
                    chunk = ABSENT if size == 0 else np.zeros(size * 16 // 8 + 1)
                    cache.put(location, key, token, chunk, cache.epoch(location))
                elif kind == "forget":
                    cache.forget(location, [key])
                    assert cache.get(location, key, "t1") is None and cache.get(location, key, "t2") is None
                else:
                    cache.forget_prefix(location, key.split("/")[0])
                indexed = {(loc, k, t) for (loc, k), tokens in cache._tokens.items() for t in tokens}
                assert indexed == set(cache._entries)
                assert all(cache._tokens.values())  # no empty sets left behind
                sizes = sum(64 if e is ABSENT else e.nbytes for e in cache._entries.values())
                assert cache.nbytes == sizes <= 3 * 8 * 16

    check()
