"""Chunk requests overlap under a per-store bound, concurrent partial writes lose nothing, decoding is off the loop."""

from __future__ import annotations

import asyncio
import pathlib
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import ClassVar

import numcodecs
import numpy as np
import pytest
from numcodecs.abc import Codec
from numcodecs.compat import ensure_contiguous_ndarray, ndarray_copy
from slow_store import SlowLocalStore, SlowMemoryStore

import asyncarr
import asyncarr.sync as za

LATENCY = 0.05
CHUNKS_64 = {"shape": (32, 32), "chunks": (4, 4)}  # an 8 x 8 grid of chunks


class SleepyCodec(Codec):
    """A pass-through numcodecs codec whose decode sleeps and records the thread it ran on."""

    codec_id = "asyncarr_test_sleepy"
    decode_threads: ClassVar[list[int]] = []

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay

    def encode(self, buf: object) -> bytes:
        return bytes(ensure_contiguous_ndarray(buf))

    def decode(self, buf: object, out: object = None) -> object:
        SleepyCodec.decode_threads.append(threading.get_ident())
        time.sleep(self.delay)
        return ndarray_copy(ensure_contiguous_ndarray(buf), out)


numcodecs.register_codec(SleepyCodec)


@pytest.fixture
def trusted_sleepy_codec():
    """Metadata builds only allowlisted codecs; a codec the user registered is built once they trust it."""
    with asyncarr.config.set(trusted_codecs=[SleepyCodec.codec_id]):
        yield


# -- overlapping requests ---------------------------------------------------------------------


def test_a_64_chunk_read_and_write_overlap_their_requests() -> None:
    data = np.arange(32 * 32, dtype="i4").reshape(32, 32) + 1
    store = SlowMemoryStore(delay=LATENCY)  # each request held long enough for the others to meet it

    async def main() -> dict[str, int | np.ndarray]:
        z = await asyncarr.open_array(store, mode="w", dtype="i4", **CHUNKS_64)
        store.reset_counters()
        await z.setitem(..., data)
        write_in_flight, write_requests = store.max_in_flight, store.requests
        store.reset_counters()
        result = await z.getitem(...)
        return {
            "write_in_flight": write_in_flight,
            "write_requests": write_requests,
            "read_in_flight": store.max_in_flight,
            "read_requests": store.requests,
            "result": result,
        }

    outcome = asyncio.run(main())
    np.testing.assert_array_equal(outcome["result"], data)
    assert outcome["write_requests"] >= 64
    assert outcome["read_requests"] >= 64
    # One request at a time would keep 1 in flight.
    assert outcome["write_in_flight"] >= 16
    assert outcome["read_in_flight"] >= 16


def test_the_facade_overlaps_requests_too() -> None:
    data = np.arange(32 * 32, dtype="f8").reshape(32, 32) + 0.5
    store = SlowMemoryStore(delay=LATENCY)
    z = za.open_array(store, mode="w", dtype="f8", **CHUNKS_64)
    store.reset_counters()
    z[:] = data
    assert store.max_in_flight >= 16
    store.reset_counters()
    np.testing.assert_array_equal(z[:], data)
    assert store.max_in_flight >= 16


def test_concurrency_setting_bounds_requests_in_flight_per_store() -> None:
    data = np.arange(32 * 32, dtype="i4").reshape(32, 32) + 1

    async def main(store: SlowMemoryStore) -> tuple[int, int, list[np.ndarray]]:
        z = await asyncarr.open_array(store, mode="w", dtype="i4", **CHUNKS_64)
        await z.setitem(..., data)
        write_in_flight = store.max_in_flight
        store.reset_counters()
        # Two calls at once, through two handles on the same store, share its bound.
        other = await asyncarr.open_array(store, mode="r")
        results = await asyncio.gather(z.getitem((slice(0, 16),)), other.getitem((slice(16, 32),)))
        return write_in_flight, store.max_in_flight, list(results)

    with asyncarr.config.set(concurrency=4):
        store = SlowMemoryStore(delay=0.02)
        write_in_flight, read_in_flight, (top, bottom) = asyncio.run(main(store))
    np.testing.assert_array_equal(np.concatenate([top, bottom]), data)
    assert 2 <= write_in_flight <= 4
    assert 2 <= read_in_flight <= 4


def test_concurrency_bound_is_shared_by_facade_calls_from_several_threads() -> None:
    data = np.arange(32 * 32, dtype="i4").reshape(32, 32) + 1
    with asyncarr.config.set(concurrency=4):
        store = SlowMemoryStore(delay=0.02)
        z = za.open_array(store, mode="w", dtype="i4", **CHUNKS_64)
        z[:] = data
        store.reset_counters()
        handles = [z, za.open_array(store, mode="r"), z, za.open_array(store, mode="r")]
        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(lambda handle: handle[:], handles))
    for result in results:
        np.testing.assert_array_equal(result, data)
    assert 2 <= store.max_in_flight <= 4


# -- concurrent partial-chunk writes ----------------------------------------------------------


def test_partial_writes_from_eight_threads_lose_nothing() -> None:
    # 4 chunks of 8 x 32; thread t writes every column c with c % 8 == t, so all 8 threads share every chunk.
    store = SlowMemoryStore(delay=0.003)
    z = za.open_array(store, mode="w", shape=(16, 64), chunks=(8, 32), dtype="i4", fill_value=-1)
    expected = np.full((16, 64), -1, dtype="i4")
    start = threading.Barrier(8)

    def writer(thread_index: int) -> None:
        start.wait()
        for column in range(thread_index, 64, 8):
            z[:, column] = np.arange(16) * 100 + column

    for column in range(64):
        expected[:, column] = np.arange(16) * 100 + column
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(writer, range(8)))
    np.testing.assert_array_equal(z[:], expected)


def test_partial_writes_from_a_hundred_tasks_lose_nothing() -> None:
    store = SlowMemoryStore(delay=0.003)
    expected = (np.arange(10)[:, None] * 1000 + np.arange(100)[None, :]).astype("i8")

    async def main() -> np.ndarray:
        z = await asyncarr.open_array(store, mode="w", shape=(10, 100), chunks=(10, 25), dtype="i8")
        await asyncio.gather(*(z.setitem((slice(None), column), expected[:, column]) for column in range(100)))
        return await z.getitem(...)

    np.testing.assert_array_equal(asyncio.run(main()), expected)


def test_partial_writes_through_two_handles_on_one_local_path_lose_nothing(tmp_path: pathlib.Path) -> None:
    root = str(tmp_path / "shared.zarr")
    first = za.open_array(SlowLocalStore(root, delay=0.003), mode="w", shape=(12, 48), chunks=(12, 24), dtype="i4")
    second = za.open_array(SlowLocalStore(root, delay=0.003), mode="r+")
    expected = (np.arange(12)[:, None] * 100 + np.arange(48)[None, :]).astype("i4")
    start = threading.Barrier(8)

    def writer(thread_index: int) -> None:
        handle = first if thread_index % 2 else second
        start.wait()
        for column in range(thread_index, 48, 8):
            handle[:, column] = expected[:, column]

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(writer, range(8)))
    np.testing.assert_array_equal(za.open_array(root, mode="r")[:], expected)


def test_async_partial_writes_through_two_handles_on_one_local_path_lose_nothing(tmp_path: pathlib.Path) -> None:
    root = str(tmp_path / "shared.zarr")
    expected = (np.arange(6)[:, None] * 100 + np.arange(40)[None, :]).astype("i4")

    async def main() -> np.ndarray:
        first = await asyncarr.open_array(
            SlowLocalStore(root, delay=0.003), mode="w", shape=(6, 40), chunks=(6, 20), dtype="i4"
        )
        second = await asyncarr.open_array(SlowLocalStore(root, delay=0.003), mode="r+")
        await asyncio.gather(
            *(
                (first if column % 2 else second).setitem((slice(None), column), expected[:, column])
                for column in range(40)
            )
        )
        return await first.getitem(...)

    np.testing.assert_array_equal(asyncio.run(main()), expected)


# -- decoding off the event loop --------------------------------------------------------------


def _sleepy_array(store: SlowMemoryStore, delay: float, shape: tuple[int, ...], chunks: tuple[int, ...]) -> np.ndarray:
    data = np.arange(int(np.prod(shape)), dtype="f8").reshape(shape) + 1
    z = za.open_array(
        store, mode="w", shape=shape, chunks=chunks, dtype="f8", zarr_format=2, compressor=SleepyCodec(delay)
    )
    z[:] = data
    return data


def test_chunks_decode_on_threads_other_than_the_event_loop_thread(trusted_sleepy_codec: None) -> None:
    store = SlowMemoryStore(delay=0.0)
    data = _sleepy_array(store, 0.0, (40,), (5,))

    async def main() -> tuple[int, np.ndarray]:
        z = await asyncarr.open_array(store, mode="r")
        SleepyCodec.decode_threads.clear()
        return threading.get_ident(), await z.getitem(...)

    loop_thread, result = asyncio.run(main())
    np.testing.assert_array_equal(result, data)
    assert SleepyCodec.decode_threads, "the array's codec was never used"
    assert loop_thread not in SleepyCodec.decode_threads


def test_a_slow_decode_does_not_stall_other_coroutines(trusted_sleepy_codec: None) -> None:
    # Six chunks whose decode sleeps 0.3 s each: run on the loop, they would stop the ticker for >= 0.3 s.
    store = SlowMemoryStore(delay=0.0)
    data = _sleepy_array(store, 0.3, (60,), (10,))

    async def main() -> tuple[list[float], np.ndarray]:
        z = await asyncarr.open_array(store, mode="r")
        ticks: list[float] = []
        done = asyncio.Event()

        async def ticker() -> None:
            while not done.is_set():
                ticks.append(time.perf_counter())
                await asyncio.sleep(0.01)

        ticking = asyncio.create_task(ticker())
        await asyncio.sleep(0.05)
        try:
            result = await z.getitem(...)
        finally:
            done.set()
            ticks.append(time.perf_counter())
            await ticking
        return ticks, result

    ticks, result = asyncio.run(main())
    np.testing.assert_array_equal(result, data)
    longest_gap = max(np.diff(ticks))
    assert longest_gap < 0.2, f"the event loop was blocked for {longest_gap:.3f} s during the read"
