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
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # type-only: array.py imports this module
    from .array import AsyncArray

__all__ = ["iter_blocks"]

BlockIndex = tuple[int, ...]


async def iter_blocks(array: AsyncArray, prefetch: int = 2) -> AsyncIterator[tuple[BlockIndex, np.ndarray]]:
    """Yield ``(block_index, block)`` for every block of ``array`` in C order, reading ``prefetch`` ahead."""
    if not isinstance(prefetch, int) or isinstance(prefetch, bool) or prefetch < 0:
        raise ValueError(f"prefetch must be a whole number >= 0, got {prefetch!r}")
    grid = array.shards or array.chunks
    counts = [-(-size // block) for size, block in zip(array.shape, grid, strict=True)]
    indices = iter(itertools.product(*map(range, counts)))
    in_flight: collections.deque[tuple[BlockIndex, asyncio.Future[np.ndarray]]] = collections.deque()

    def start_next() -> None:
        index = next(indices, None)
        if index is not None:
            in_flight.append((index, asyncio.ensure_future(array.get_block_selection(index))))

    for _ in range(prefetch + 1):
        start_next()
    try:
        while in_flight:
            index, reading = in_flight.popleft()
            block = await reading
            yield index, block  # the caller works; `prefetch` blocks stay in flight meanwhile
            start_next()
    finally:
        for _, reading in in_flight:
            reading.cancel()
        await asyncio.gather(*(reading for _, reading in in_flight), return_exceptions=True)
