"""The sync facade reads local and memory stores in the calling thread, with no event-loop hop."""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numcodecs
import numpy as np
import pytest

import asyncarr.sync as za
from asyncarr import config
from asyncarr.errors import CodecError
from asyncarr.stores import MemoryStore

DATA = np.arange(96 * 80, dtype="f8").reshape(96, 80)


@pytest.fixture(params=["local", "memory"])
def array(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> za.Array:
    """DATA in 12x10 chunks (64 of them), on a local directory or in memory."""
    store = str(tmp_path / "a.zarr") if request.param == "local" else MemoryStore()
    z = za.open_array(store, mode="w", shape=DATA.shape, chunks=(12, 10), dtype=DATA.dtype)
    z[...] = DATA
    return z


@contextlib.contextmanager
def _loop_thread_blocked() -> Iterator[None]:
    """Hold the facade's event-loop thread blocked for the block's duration (at most 30 s); on
    leaving, fail if anything in the block had to wait for that thread.

    A read that went through the loop would wait until the loop gave up its 30 s hold; then the
    hold ends by time rather than by the block's end, which the check below sees.
    """
    blocked, release, held_to_the_end = threading.Event(), threading.Event(), threading.Event()

    async def block() -> None:
        blocked.set()
        if release.wait(30):  # deliberately blocking: nothing else may run on that loop meanwhile
            held_to_the_end.set()

    done = asyncio.run_coroutine_threadsafe(block(), za._loop_thread._ensure_running())
    assert blocked.wait(5)
    try:
        yield
    finally:
        release.set()
        done.result(35)
    assert held_to_the_end.is_set(), "the reads waited for the blocked event loop"


SELECTIONS = [
    ("getitem", lambda z: z[5, 7], lambda a: a[5, 7]),
    ("getitem", lambda z: z[3:70, 11:59], lambda a: a[3:70, 11:59]),
    ("getitem", lambda z: z[...], lambda a: a[...]),
    ("oindex", lambda z: z.oindex[[1, 50, 90], 2:40], lambda a: a[[1, 50, 90], 2:40]),
    ("vindex", lambda z: z.vindex[[0, 95, 40], [79, 0, 41]], lambda a: a[[0, 95, 40], [79, 0, 41]]),
    ("mask", lambda z: z.get_mask_selection(DATA > 7000), lambda a: a[a > 7000]),
    ("basic", lambda z: z.get_basic_selection((slice(None, None, 7), 3)), lambda a: a[::7, 3]),
]


def test_reads_finish_while_the_loop_thread_is_busy(array: za.Array) -> None:
    # With the loop thread blocked, reads through the loop would wait; in-thread they do not.
    with _loop_thread_blocked():
        for kind, read, expected in SELECTIONS:
            np.testing.assert_array_equal(read(array), expected(DATA), err_msg=kind)


def test_many_threads_read_what_numpy_reads(array: za.Array) -> None:
    rng = np.random.default_rng(3)
    windows = [tuple(sorted(rng.integers(0, n, 2)) for n in DATA.shape) for _ in range(200)]

    def read(window: tuple) -> bool:
        (r0, r1), (c0, c1) = window
        return np.array_equal(array[r0 : r1 + 1, c0 : c1 + 1], DATA[r0 : r1 + 1, c0 : c1 + 1])

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(read, windows))


@pytest.mark.parametrize("use_threads", [None, False, True])
def test_a_read_of_many_batches_uses_the_codec_threads_and_matches_numpy(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, use_threads: bool | None
) -> None:
    # 1 MiB chunks: every chunk is its own batch. The caller shares the work with the codec
    # threads. In the main thread numcodecs would decode Blosc on Blosc's own threads by default
    # (use_threads None): while the caller decodes, the setting reads False, and None again after.
    # Only a user's True leaves every batch to the codec threads.
    monkeypatch.setattr(numcodecs.blosc, "use_threads", use_threads)
    data = np.random.default_rng(0).normal(size=(1024, 2048)).astype("f4")
    z = za.open_array(str(tmp_path / "big.zarr"), mode="w", shape=data.shape, chunks=(512, 512), dtype="f4")
    z[...] = data
    seen: set[str] = set()
    store = z.async_array.store
    get = store.get_sync

    settings_in_caller: set[bool | None] = set()

    def recording_get(*args, **kwargs):  # each chunk is read and decoded on the thread that reads it
        name = threading.current_thread().name
        seen.add(name)
        if threading.current_thread() is threading.main_thread():
            settings_in_caller.add(numcodecs.blosc.use_threads)
        if not name.startswith("asyncarr-codec"):
            # A slow caller: the codec threads surely take batches before it has done them all,
            # however the OS schedules them (a fast caller on a busy machine sometimes did all 8).
            time.sleep(0.005)
        return get(*args, **kwargs)

    store.get_sync = recording_get
    np.testing.assert_array_equal(z[...], data)
    assert any(name.startswith("asyncarr-codec") for name in seen), seen
    if use_threads:  # the user asked for Blosc's own threads: the codec threads take every batch
        assert threading.current_thread().name not in seen, seen
    else:
        assert threading.current_thread().name in seen, seen
        assert settings_in_caller == {False}  # never Blosc's own threads beside the codec threads
    assert numcodecs.blosc.use_threads is use_threads  # the user's setting, as it was

    seen.clear()
    with ThreadPoolExecutor(1, thread_name_prefix="caller") as pool:
        np.testing.assert_array_equal(pool.submit(lambda: z[...]).result(), data)
    assert any(name.startswith("caller") for name in seen) == (not use_threads), seen
    assert any(name.startswith("asyncarr-codec") for name in seen), seen


def test_a_corrupt_chunk_raises_codec_error_naming_it_and_the_reader_returns(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "c.zarr"
    z = za.open_array(str(path), mode="w", shape=(2048, 1024), chunks=(256, 256), dtype="f4", zarr_format=3)
    z[...] = 1.0
    (path / "c" / "5" / "2").write_bytes(b"not a blosc frame")
    with pytest.raises(CodecError, match=r"c/5/2"):
        z[...]
    np.testing.assert_array_equal(z[:256, :], 1.0)  # the other chunks still read


def test_missing_chunks_read_as_the_fill_value(tmp_path: pathlib.Path) -> None:
    z = za.open_array(str(tmp_path / "f.zarr"), mode="w", shape=(30, 30), chunks=(10, 10), dtype="i4", fill_value=-3)
    z[10:20, 10:20] = 7
    expected = np.full((30, 30), -3, dtype="i4")
    expected[10:20, 10:20] = 7
    np.testing.assert_array_equal(z[...], expected)
    np.testing.assert_array_equal(z[5:15, 15:25], expected[5:15, 15:25])


def test_whole_shards_read_in_thread_and_parts_of_shards_through_the_loop(tmp_path: pathlib.Path) -> None:
    # Whole shards are chunks like any other; parts of shards take ranged reads, async only.
    data = np.arange(64 * 64, dtype="i2").reshape(64, 64)
    z = za.open_array(str(tmp_path / "s.zarr"), mode="w", shape=(64, 64), chunks=(8, 8), shards=(32, 32), dtype="i2")
    z[...] = data
    assert z.async_array.read_blocking("getitem", (3, 9)) is NotImplemented
    with _loop_thread_blocked():
        np.testing.assert_array_equal(z[...], data)
        np.testing.assert_array_equal(z[32:, :32], data[32:, :32])
    np.testing.assert_array_equal(z[3:40, 9], data[3:40, 9])  # through the loop, once it is free again


def test_sharded_edge_shards_and_missing_inner_chunks_read_in_thread(tmp_path: pathlib.Path) -> None:
    z = za.open_array(
        str(tmp_path / "e.zarr"), mode="w", shape=(50, 45), chunks=(8, 8), shards=(16, 16), dtype="f4", fill_value=-1
    )
    z[3:20, 30:41] = 5.0
    expected = np.full((50, 45), -1, dtype="f4")
    expected[3:20, 30:41] = 5.0
    assert z.async_array.read_blocking("getitem", Ellipsis) is not NotImplemented
    np.testing.assert_array_equal(z[...], expected)


def test_the_in_thread_path_follows_the_codec_thread_setting(array: za.Array) -> None:
    with config.set(codec_threads=1):
        np.testing.assert_array_equal(array[...], DATA)
    with config.set(codec_threads=4):
        np.testing.assert_array_equal(array[...], DATA)


def test_reads_from_inside_a_running_event_loop(array: za.Array) -> None:
    async def inside() -> np.ndarray:
        return array[10:20, 10:20]

    np.testing.assert_array_equal(asyncio.run(inside()), DATA[10:20, 10:20])


@pytest.mark.parametrize("where", ["local", "memory"])
def test_in_thread_reads_never_see_a_torn_chunk_while_the_loop_writes(tmp_path: pathlib.Path, where: str) -> None:
    # Writes replace whole chunk files (local) or values (memory) at once: a concurrent read
    # sees each chunk entirely before or entirely after a write, never a mix.
    store = str(tmp_path / "t.zarr") if where == "local" else MemoryStore()
    z = za.open_array(store, mode="w", shape=(40, 40), chunks=(20, 20), dtype="i4", fill_value=0)
    stop = threading.Event()

    def write_generations() -> None:
        generation = 1
        while not stop.is_set():
            z[...] = generation
            generation += 1

    writer = threading.Thread(target=write_generations)
    writer.start()
    try:
        for _ in range(300):
            snapshot = z[...]
            for rows in (slice(0, 20), slice(20, 40)):
                for cols in (slice(0, 20), slice(20, 40)):
                    assert len(np.unique(snapshot[rows, cols])) == 1, "a chunk mixed two writes"
    finally:
        stop.set()
        writer.join()
    assert z[0, 0] >= 1


def test_stores_without_blocking_io_read_through_the_loop(tmp_path: pathlib.Path) -> None:
    with za.open_array(str(tmp_path / "z.zip"), mode="w", shape=(10, 10), chunks=(5, 5), dtype="i4") as z:
        z[...] = np.arange(100, dtype="i4").reshape(10, 10)
        assert not z.async_array.reads_blocking
        assert z.async_array.read_blocking("getitem", (1, 2)) is NotImplemented
        np.testing.assert_array_equal(z[2:7, 3], np.arange(100).reshape(10, 10)[2:7, 3])


@pytest.mark.parametrize("compressor", ["blosc", None])
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_whole_small_chunks_are_read_a_batch_a_store_call_and_match_numpy(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, compressor: str | None, zarr_format: int
) -> None:
    # Reads of many whole small chunks cost mostly per chunk: the store reads a batch's files in
    # one call (get_many_sync: checks and bookkeeping once, files named relative to their
    # directory), never one get_sync a chunk. Edge chunks, missing chunks and a 0-d array too.
    from asyncarr.stores import LocalStore

    calls: list[int] = []
    real_many, real_get = LocalStore.get_many_sync, LocalStore.get_sync

    def many(self: LocalStore, keys: list[str]) -> Iterator[bytes | None]:
        calls.append(len(keys))
        return real_many(self, keys)

    data = np.arange(100 * 70, dtype="u2").reshape(100, 70)
    options = {} if compressor else {"compressor": None}
    z = za.open_array(
        str(tmp_path / "s.zarr"), mode="w", shape=data.shape, chunks=(16, 16), dtype="u2", fill_value=7,
        zarr_format=zarr_format, **options,
    )  # fmt: skip
    z[...] = data
    (tmp_path / "s.zarr" / ("1.1" if zarr_format == 2 else "c/1/1")).unlink()
    data[16:32, 16:32] = 7  # a missing chunk reads as the fill value
    monkeypatch.setattr(LocalStore, "get_many_sync", many)
    monkeypatch.setattr(LocalStore, "get_sync", lambda *a, **k: pytest.fail("a chunk read one get_sync at a time"))
    np.testing.assert_array_equal(z[...], data)
    assert calls == [7 * 5]
    np.testing.assert_array_equal(z[16:48, 32:64], data[16:48, 32:64])
    assert calls[1:] == [2 * 2]
    monkeypatch.setattr(LocalStore, "get_sync", real_get)
    scalar = za.open_array(str(tmp_path / "0d.zarr"), mode="w", shape=(), dtype="u2", zarr_format=zarr_format)
    scalar[...] = 5
    assert scalar[()] == 5 and scalar[...] == 5


@pytest.mark.parametrize("stored", [b"not a blosc frame", b"\x02\x01\x21\x02" + b"\x00" * 12])
def test_a_corrupt_small_chunk_raises_codec_error_naming_its_url(tmp_path: pathlib.Path, stored: bytes) -> None:
    path = tmp_path / "c.zarr"
    z = za.open_array(str(path), mode="w", shape=(256, 256), chunks=(32, 32), dtype="u2", zarr_format=3)
    z[...] = 3
    (path / "c" / "5" / "2").write_bytes(stored)
    with pytest.raises(CodecError, match=rf"^chunk file://{path}/c/5/2: cannot decode: "):
        z[...]
    np.testing.assert_array_equal(z[:160, :], 3)  # the other chunks still read
