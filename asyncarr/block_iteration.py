"""Iterating an array block by block with read-ahead: data services and training loops.

Blocks are the array's write units (shards when sharded, else chunks), in C order, edge
blocks truncated to the array. While the caller works on one block, the next ``prefetch``
blocks are already being fetched and decoded, so I/O and decoding hide behind the caller's
work; at most ``prefetch + 1`` blocks are held at once.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, TypeVar

import numpy as np

if TYPE_CHECKING:  # type-only: array.py imports this module
    from .array import AsyncArray

__all__ = ["iter_blocks", "read_ahead"]

BlockIndex = tuple[int, ...]
Key = TypeVar("Key")
Value = TypeVar("Value")


async def iter_blocks(array: AsyncArray, prefetch: int = 2) -> AsyncIterator[tuple[BlockIndex, np.ndarray]]:
    """Yield ``(block_index, block)`` for every block of ``array`` in C order, reading ``prefetch`` ahead."""
    grid = array.shards or array.chunks
    counts = [-(-size // block) for size, block in zip(array.shape, grid, strict=True)]
    reads = (
        (index, lambda index=index: array.get_block_selection(index))
        for index in itertools.product(*map(range, counts))
    )
    async for index, block in read_ahead(reads, prefetch):
        yield index, block


async def read_ahead(
    reads: Iterable[tuple[Key, Callable[[], Awaitable[Value]]]], prefetch: int
) -> AsyncIterator[tuple[Key, Value]]:
    """Yield ``(key, await read())`` in order, with the next ``prefetch`` reads running while the caller works.

    The read after those starts when the caller asks for the next value, so at most ``prefetch``
    reads run while the caller holds a value, and ``prefetch + 1`` while it waits for one. An
    early stop cancels the reads still running. The benchmarks' W9 floor drives bare requests
    through this same schedule.
    """
    if not isinstance(prefetch, int) or isinstance(prefetch, bool) or prefetch < 0:
        raise ValueError(f"prefetch must be a whole number >= 0, got {prefetch!r}")
    pending = iter(reads)
    in_flight: collections.deque[tuple[Key, asyncio.Future[Value]]] = collections.deque()

    def start_next() -> None:
        step = next(pending, None)
        if step is not None:
            key, read = step
            in_flight.append((key, asyncio.ensure_future(read())))

    for _ in range(prefetch + 1):
        start_next()
    try:
        while in_flight:
            key, reading = in_flight.popleft()
            value = await reading
            yield key, value  # the caller works; `prefetch` reads stay in flight meanwhile
            start_next()
    finally:
        for _, reading in in_flight:
            reading.cancel()
        await asyncio.gather(*(reading for _, reading in in_flight), return_exceptions=True)
