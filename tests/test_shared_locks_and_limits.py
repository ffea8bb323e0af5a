"""Chunk locks and request limits are shared by location across handles, threads and event loops."""

import asyncio
import threading
import zipfile

import numpy as np
from slow_store import SlowLocalStore, SlowMemoryStore

import asyncarr
import asyncarr.sync as za
from asyncarr import config


def _run_together(threads: list[threading.Thread]) -> None:
    """Start every thread, then wait for all of them."""
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_writers_on_separate_event_loops_in_threads_lose_no_update(tmp_path):
    path = str(tmp_path / "a.zarr")
    asyncio.run(asyncarr.open_array(path, mode="w", shape=(8, 100), chunks=(8, 100), dtype="i4"))

    def writer(row: int) -> None:
        async def write() -> None:
            z = await asyncarr.open_array(path, mode="r+")
            for start in range(0, 100, 20):
                await z.setitem((row, slice(start, start + 20)), row + 1)

        asyncio.run(write())

    threads = [threading.Thread(target=writer, args=(row,)) for row in range(8)]
    _run_together(threads)
    expected = np.repeat(np.arange(1, 9, dtype="i4")[:, None], 100, axis=1)
    np.testing.assert_array_equal(za.open_array(path, mode="r")[:], expected)


def test_chunk_locks_exclude_the_fast_path_and_leave_no_entry_behind(tmp_path):
    # Facade writes from a thread (the codec threads' try-locks) and partial writes of several
    # event loops (the async path's waiting locks) on the same chunks: no update is lost,
    # and once every writer is done the registry holds nothing (each entry counts its users).
    path = str(tmp_path / "a.zarr")
    za.open_array(path, mode="w", shape=(4, 400), chunks=(4, 100), dtype="i4")
    assert asyncarr.locks.try_chunk_lock("somewhere", "0.0") is not None  # taken...
    assert asyncarr.locks.try_chunk_lock("somewhere", "0.0") is None  # ...so the next one is refused
    asyncarr.locks._process_locks[("somewhere", "0.0")].release()

    def whole_rows(value: int) -> None:
        z = za.open_array(path, mode="r+")
        for _ in range(20):
            z[2:4, :] = value  # rows 2-3 of every chunk: partial chunks, read-modify-write

    def columns(row: int) -> None:
        async def write() -> None:
            z = await asyncarr.open_array(path, mode="r+")
            for start in range(0, 400, 50):
                await z.setitem((row, slice(start, start + 50)), row + 1)

        asyncio.run(write())

    threads = [threading.Thread(target=whole_rows, args=(9,))]
    threads += [threading.Thread(target=columns, args=(row,)) for row in (0, 1)]
    _run_together(threads)
    expected = np.array([[1] * 400, [2] * 400, [9] * 400, [9] * 400], dtype="i4")
    np.testing.assert_array_equal(za.open_array(path, mode="r")[:], expected)
    assert asyncarr.locks._process_locks == {}


class _SharedCounter:
    """Counts requests in flight across several store handles."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0


class _CountedLocalStore(SlowLocalStore):
    """A slow LocalStore whose requests are counted in a counter shared with other handles."""

    counter = _SharedCounter()

    def _enter(self) -> None:
        super()._enter()
        with self.counter.lock:
            self.counter.in_flight += 1
            self.counter.max_in_flight = max(self.counter.max_in_flight, self.counter.in_flight)

    def _leave(self) -> None:
        super()._leave()
        with self.counter.lock:
            self.counter.in_flight -= 1


def test_two_handles_on_one_location_share_one_request_limit(tmp_path):
    first = _CountedLocalStore(tmp_path / "s", delay=0.02)
    second = _CountedLocalStore(tmp_path / "s", delay=0.02)
    assert first.location == second.location

    async def both() -> None:
        a = await asyncarr.open_array(first, mode="w", shape=(64,), chunks=(1,), dtype="i1")
        await a.setitem(..., 1)
        b = await asyncarr.open_array(second, mode="r")
        _CountedLocalStore.counter = _SharedCounter()
        with config.set(concurrency=4):
            await asyncio.gather(a.getitem(...), b.getitem(...))

    asyncio.run(both())
    assert _CountedLocalStore.counter.max_in_flight == 4
    assert first.requests > 0 and second.requests > 0


def test_raising_concurrency_takes_effect_for_later_calls_on_a_store_in_use():
    store = SlowMemoryStore(delay=0.02)
    z = za.open_array(store, mode="w", shape=(128,), chunks=(1,), dtype="i1")
    with config.set(concurrency=8):
        store.max_in_flight = 0
        z[:]
        assert store.max_in_flight <= 8
    with config.set(concurrency=100):
        store.max_in_flight = 0
        z[:]
        assert store.max_in_flight > 8


def test_async_nodes_are_async_context_managers_that_close_their_store(tmp_path):
    async def use() -> None:
        async with await asyncarr.open_group(str(tmp_path / "g.zip"), mode="w") as group:
            await group.create_array("x", data=np.arange(3))
        async with await asyncarr.open_array(str(tmp_path / "g.zip"), mode="r", path="x") as array:
            np.testing.assert_array_equal(await array.getitem(...), np.arange(3))

    asyncio.run(use())
    assert "x/zarr.json" in zipfile.ZipFile(tmp_path / "g.zip").namelist()


def test_mode_w_over_an_existing_zip_path_replaces_its_contents(tmp_path):
    path = str(tmp_path / "a.zip")
    za.save(path, np.arange(10))
    za.save(path, np.arange(5))
    np.testing.assert_array_equal(za.load(path), np.arange(5))
    assert sorted(zipfile.ZipFile(path).namelist()) == ["c/0", "zarr.json"]
