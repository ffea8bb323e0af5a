"""``iter_blocks(prefetch=N)``: every block in C order equal to NumPy's, at most N blocks read
ahead, read-ahead that hides the caller's work, and writes made while iterating seen by every
block not yet started."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Coroutine
from pathlib import Path

import numpy as np
import pytest
from slow_store import SlowMemoryStore

import asyncarr.sync as za
from asyncarr import AsyncArray


def expected_blocks(data: np.ndarray, block: tuple[int, ...]) -> list[tuple[tuple[int, ...], np.ndarray]]:
    counts = [-(-s // b) for s, b in zip(data.shape, block, strict=True)]
    return [
        (index, data[tuple(slice(i * b, (i + 1) * b) for i, b in zip(index, block, strict=True))])
        for index in itertools.product(*map(range, counts))
    ]


@pytest.mark.parametrize(("zarr_format", "shards"), [(2, None), (3, None), (3, (8, 6))], ids=["v2", "v3", "v3-sharded"])
@pytest.mark.parametrize("prefetch", [0, 1, 3])
def test_blocks_come_in_c_order_equal_to_numpy(
    tmp_path: Path, zarr_format: int, shards: tuple | None, prefetch: int
) -> None:
    data = np.arange(19 * 13, dtype="i4").reshape(19, 13)  # edge blocks on both axes
    z = za.create_array(
        str(tmp_path / "a.zarr"), shape=data.shape, chunks=(4, 3), shards=shards, dtype="i4", zarr_format=zarr_format
    )
    z[...] = data
    got = list(z.iter_blocks(prefetch=prefetch))
    want = expected_blocks(data, shards or (4, 3))
    assert [index for index, _ in got] == [index for index, _ in want]
    for (_, block), (_, expected) in zip(got, want, strict=True):
        np.testing.assert_array_equal(block, expected)
    for index, block in got:
        np.testing.assert_array_equal(block, z.blocks[index])


def test_at_most_prefetch_blocks_are_read_ahead() -> None:
    store = SlowMemoryStore(delay=0.01)
    data = np.arange(64, dtype="u1").reshape(8, 8)
    za.create_array(store, shape=(8, 8), chunks=(2, 8), dtype="u1")[...] = data
    z = za.open_array(store, mode="r")
    store.reset_counters()
    blocks = z.iter_blocks(prefetch=2)
    next(blocks)
    asyncio.run(asyncio.sleep(0.2))  # time for anything started to finish, in the facade's loop
    assert store.requests == 1 + 2  # the block handed out and the two read ahead, no more
    rest = list(blocks)
    assert len(rest) == 3 and store.requests == 4
    assert store.max_in_flight <= 3


def test_read_ahead_overlaps_the_callers_work() -> None:
    # 8 blocks, 50 ms to read each and 50 ms of work on each: one after the other 800 ms; overlapped about 450.
    store = SlowMemoryStore(delay=0.05)
    za.create_array(store, shape=(8,), chunks=(1,), dtype="u1")[...] = np.arange(8)
    array = AsyncArray  # the async API, as a data service uses it

    async def iterate(prefetch: int) -> tuple[int, float]:
        a = await array.open(store, read_only=True)
        started = asyncio.get_running_loop().time()
        count = 0
        async for _index, _block in a.iter_blocks(prefetch=prefetch):
            await asyncio.sleep(0.05)  # the caller's work
            count += 1
        return count, asyncio.get_running_loop().time() - started

    store.reset_counters()
    count, _ = asyncio.run(iterate(2))
    assert count == 8
    # Counted, not timed: while the caller worked, reads were in flight.
    assert store.max_in_flight >= 2


def test_writes_while_iterating_are_seen_by_blocks_not_yet_started(tmp_path: Path) -> None:
    z = za.create_array(str(tmp_path / "a.zarr"), shape=(12,), chunks=(2,), dtype="i2")
    z[...] = 0
    seen = {}
    for index, block in z.iter_blocks(prefetch=1):
        seen[index[0]] = block.copy()
        if index == (0,):
            z[6:12] = 9  # blocks 3, 4 and 5: none started yet (block 1 is the one read ahead)
    for i in range(3, 6):
        np.testing.assert_array_equal(seen[i], [9, 9])
    np.testing.assert_array_equal(seen[0], [0, 0])


def test_prefetch_must_be_a_whole_number(tmp_path: Path) -> None:
    z = za.create_array(str(tmp_path / "a.zarr"), shape=(4,), chunks=(2,), dtype="i2")
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="prefetch"):
            next(z.iter_blocks(prefetch=bad))


def test_stopping_early_cancels_what_was_read_ahead() -> None:
    store = SlowMemoryStore(delay=0.05)
    za.create_array(store, shape=(20,), chunks=(1,), dtype="u1")[...] = np.arange(20)
    z = za.open_array(store, mode="r")
    store.reset_counters()
    for index, _ in z.iter_blocks(prefetch=4):
        if index == (1,):
            break
    asyncio.run(asyncio.sleep(0.3))
    assert store.in_flight == 0
    assert store.requests <= 2 + 4


def test_read_ahead_runs_prefetch_reads_while_the_caller_holds_a_value() -> None:
    """The schedule the W9 floor shares: ``prefetch`` reads ahead while the caller holds a value,
    ``prefetch + 1`` running while it waits for the first, values in the order given."""
    from asyncarr.block_iteration import read_ahead

    started: list[int] = []
    running: set[int] = set()
    ahead_while_held: list[int] = []
    most_running = 0

    async def read(key: int) -> int:
        nonlocal most_running
        running.add(key)
        most_running = max(most_running, len(running))
        await asyncio.sleep(0.03 if key % 3 == 0 else 0.01)  # later reads may end first
        running.discard(key)
        return key * 10

    def start(key: int) -> Coroutine[None, None, int]:
        started.append(key)  # counted when read_ahead starts the read, before it first runs
        return read(key)

    async def consume() -> list[tuple[int, int]]:
        got = []
        async for key, value in read_ahead(((key, lambda key=key: start(key)) for key in range(12)), prefetch=3):
            got.append((key, value))
            ahead_while_held.append(len(started) - len(got))
            await asyncio.sleep(0.05)  # the caller's work: the reads ahead end meanwhile
        return got

    got = asyncio.run(consume())
    assert got == [(key, key * 10) for key in range(12)]
    assert ahead_while_held == [3] * 9 + [2, 1, 0]  # three ahead, none more, until the end
    assert most_running == 4  # the first wait: the value asked for and three ahead
