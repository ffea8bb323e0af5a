"""W8 (the decoded-chunk cache) and W9 (the block iterator with read-ahead), both on S3 through the proxy.

Both measure asyncarr's async API against itself: W8 with the cache on and off, W9 the
iteration with caller work against the caller's work alone and the I/O alone. Either
feature may not have landed yet: its workload then gives one "not available yet" row, so the
runner works either way.

W9 has a floor: bare GETs of the same chunk keys (`BareS3.fetch`, no signing, no decoding)
driven by asyncarr's own read-ahead schedule (`asyncarr.block_iteration.read_ahead`), with
and without the same work. Under that schedule ``prefetch`` reads run while the caller works
and ``prefetch + 1`` while it waits, so with a request latency L and work w a block costs at
least (L + w) / (prefetch + 1), against L / (prefetch + 1) for the I/O alone: a ratio of
1 + w / L that no reader keeping the iterator's bound can beat. Where the floor's own ratio is
over the limit, the verdict says so, with the floor's figure.
"""

from __future__ import annotations

import asyncio
import statistics
import zlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import numpy as np

import asyncarr

from .bare_s3 import BareS3, chunk_keys
from .engines import ENGINES, ArraySpec, S3Location, service_loop
from .measure import Measurement, interleaved
from .workloads import ASYNCARR, field

__all__ = ["FEATURE_HEADER", "block_iteration", "hot_windows"]

FEATURE_HEADER = [
    "| workload | run | median s | min-max s | requests | peak RSS +MiB | ratio | target | met |",
    "|---|---|---|---|---|---|---|---|---|",
]
"""The header of the features table; `hot_windows` and `block_iteration` give its rows."""

WINDOW = 64
HOT_SIDE = 1024
CALLER_WORK_S = 0.005
"""W9's caller work per block: ``await asyncio.sleep(0.005)``, which holds neither a core nor the GIL."""


def _has_cache_setting() -> bool:
    try:
        asyncarr.config.get("chunk_cache_bytes")
    except (KeyError, TypeError, AttributeError, ValueError):
        return False
    return True


def _empty_cache() -> None:
    """Start each cache-on repeat cold (untimed): a warm cache would answer everything from memory."""
    try:
        from asyncarr.chunk_cache import chunk_cache
    except ImportError:
        return
    chunk_cache.clear()


def _cache_nbytes() -> int | None:
    """Bytes the process's chunk cache holds now (None where asyncarr does not say)."""
    try:
        from asyncarr.chunk_cache import chunk_cache
    except ImportError:
        return None
    return chunk_cache.nbytes


def _crc(block: np.ndarray) -> int:
    return zlib.crc32(np.ascontiguousarray(block))


def _missing_row(workload: str, what: str) -> str:
    return f"| {workload} | not available yet: {what} |  |  |  |  |  |  |  |"


def _row(m: Measurement, requests: str, ratio: str = "", target: str = "", met: str = "") -> str:
    return (
        f"| {m.task} | {m.engine} | {m.median:.3f} | {min(m.seconds):.3f}-{max(m.seconds):.3f} | {requests} "
        f"| {m.peak_rss / 2**20:.1f} | {ratio} | {target} | {met} |"
    )


def hot_windows(
    where: str,
    spec: ArraySpec,
    s3: S3Location,
    proxy: Any,
    repeats: int,
    windows: int = 2000,
    budget: int = 16 * 2**20,
    workers: int = 8,
) -> tuple[list[Measurement], list[str]]:
    """W8: ``windows`` random 64x64 windows inside a hot 1024x1024 region, cache on (``budget``) and off.

    The windows are read as a service with ``workers`` requests in flight would: each worker
    reads its share one after another. Each cache-on repeat starts with an empty cache.
    Requests are the proxy's count over one extra, untimed pass of each mode. Peak RSS growth
    understates what the cache holds (memory freed by earlier runs is reused), so the row also
    gives the bytes the cache held after that pass.
    """
    task = f"W8 {windows} hot windows"
    if not _has_cache_setting():
        return [], [_missing_row(task, "asyncarr.config has no chunk_cache_bytes")]
    data = field(spec.shape, spec.dtype)
    origin = spec.shape[0] // 4
    rng = np.random.default_rng(8)
    corners = rng.integers(origin, origin + HOT_SIDE - WINDOW + 1, size=(windows, 2)).tolist()
    expected = [_crc(data[i : i + WINDOW, j : j + WINDOW]) for i, j in corners]
    handle = ENGINES[ASYNCARR].open(where, s3)

    async def read_all() -> list[int]:
        crcs: list[int] = [0] * windows

        async def worker(first: int) -> None:
            for index in range(first, windows, workers):
                i, j = corners[index]
                crcs[index] = _crc(await handle.getitem((slice(i, i + WINDOW), slice(j, j + WINDOW))))

        await asyncio.gather(*(worker(first) for first in range(workers)))
        return crcs

    modes = {f"cache {budget // 2**20} MiB": budget, "cache off": 0}

    def runner(cache_bytes: int) -> Callable[[], list[int]]:
        def run() -> list[int]:
            with asyncarr.config.set(chunk_cache_bytes=cache_bytes):
                return service_loop.run(read_all())

        return run

    def check(mode: str, crcs: list[int]) -> None:
        if crcs != expected:
            raise AssertionError(f"W8 {mode}: windows differ from the data written: figure void")

    measured = interleaved(
        task,
        {mode: runner(cache_bytes) for mode, cache_bytes in modes.items()},
        repeats=repeats,
        nbytes=windows * WINDOW * WINDOW * np.dtype(spec.dtype).itemsize,
        check=check,
        setup=lambda _mode: _empty_cache(),
    )
    requests, held = {}, {}
    for mode, cache_bytes in modes.items():
        _empty_cache()
        proxy.reset()
        runner(cache_bytes)()
        requests[mode] = proxy.counts()["requests"]
        held[mode] = _cache_nbytes()
    _empty_cache()
    on, off = measured.values()
    on_mode, off_mode = modes
    speedup = statistics.median(b / a for a, b in zip(on.seconds, off.seconds, strict=True))
    fewer = requests[off_mode] / max(requests[on_mode], 1)
    within = on.peak_rss <= budget and (held[on_mode] or 0) <= budget
    kept = f", cache held {held[on_mode] / 2**20:.1f} MiB after a pass" if held[on_mode] is not None else ""
    rows = [
        _row(
            on,
            str(requests[on_mode]),
            f"{fewer:.1f}x fewer requests, {speedup:.1f}x faster{kept}",
            ">= 5x fewer, >= 3x faster; RSS <= budget",
            "met" if fewer >= 5 and speedup >= 3 and within else "missed",
        ),
        _row(off, str(requests[off_mode])),
    ]
    return list(measured.values()), rows


def _overlap_ratio(with_work: Measurement, io_alone: Measurement, work_alone: Measurement) -> float:
    """The median over repeats of the time with work over the longer of the I/O alone and the work alone."""
    return statistics.median(
        t / max(i, w) for t, i, w in zip(with_work.seconds, io_alone.seconds, work_alone.seconds, strict=True)
    )


def block_iteration(
    where: str, spec: ArraySpec, s3: S3Location, repeats: int, prefetches: tuple[int, ...] = (2, 8)
) -> tuple[list[Measurement], list[str]]:
    """W9: ``async for index, block in a.iter_blocks(prefetch=N)`` with 5 ms of caller work per block.

    Per N, five runs interleaved: the iteration with the work, the iteration alone (I/O
    alone), the work alone (one sleep per block, no I/O), and the floor (bare GETs on the
    same read-ahead schedule) with the work and alone. The ratio is the median over repeats
    of total / max(work alone, I/O alone); the floor's ratio is the same for its runs.
    """
    handle = ENGINES[ASYNCARR].open(where, s3)
    if not hasattr(handle, "iter_blocks"):
        return [], [_missing_row("W9 iter_blocks", "asyncarr.AsyncArray has no iter_blocks")]
    from asyncarr.block_iteration import read_ahead

    data = field(spec.shape, spec.dtype)
    grid = [-(-extent // side) for extent, side in zip(spec.shape, spec.chunks, strict=True)]
    blocks = int(np.prod(grid))
    bare = BareS3(s3, where)
    keys = chunk_keys(spec)  # C order, as the blocks come

    def bare_blocks(prefetch: int) -> AsyncIterator[tuple[str, bytes]]:
        return read_ahead(((key, lambda key=key: bare.fetch(key)) for key in keys), prefetch)

    def region(index: tuple[int, ...]) -> tuple[slice, ...]:
        return tuple(slice(i * c, (i + 1) * c) for i, c in zip(index, spec.chunks, strict=True))

    async def iterate(blocks_read: AsyncIterator[tuple[Any, Any]], work: float) -> int:
        seen = 0
        async for _index, block in blocks_read:
            seen += 1
            if work:
                await asyncio.sleep(work)
            del block
        return seen

    async def verify(prefetch: int) -> None:
        order = []
        async for index, block in handle.iter_blocks(prefetch=prefetch):
            if not np.array_equal(block, data[region(index)]):
                raise AssertionError(f"W9 block {index} differs from the data written: figure void")
            order.append(tuple(index))
        if order != sorted(order) or len(order) != blocks:
            raise AssertionError(f"W9: {len(order)} blocks, not the {blocks} of the grid in C order: figure void")

    async def verify_bare(prefetch: int) -> None:
        codec = spec.numcodecs_blosc()
        fetched = [body async for _, body in bare_blocks(prefetch)]
        for index, body in zip(np.ndindex(*grid), fetched, strict=True):
            decoded = np.frombuffer(codec.decode(body), dtype=spec.dtype).reshape(spec.chunks)
            if not np.array_equal(decoded, data[region(index)]):
                raise AssertionError(f"W9 floor: the body of chunk {index} is not its chunk: figure void")

    async def work_alone() -> int:
        for _ in range(blocks):
            await asyncio.sleep(CALLER_WORK_S)
        return blocks

    def check(run: str, seen: int) -> None:
        if seen != blocks:
            raise AssertionError(f"W9 {run}: {seen} blocks, expected {blocks}: figure void")

    results: list[Measurement] = []
    rows: list[str] = []
    try:
        for prefetch in prefetches:
            service_loop.run(verify(prefetch))
            service_loop.run(verify_bare(prefetch))
            total, io, work = "blocks + 5 ms work each", "blocks alone (I/O)", "5 ms work alone"
            floor_total, floor_io = "floor: bare GETs + 5 ms work each", "floor: bare GETs alone (I/O)"
            measured = interleaved(
                f"W9 iter_blocks(prefetch={prefetch}), {blocks} blocks",
                {
                    total: lambda p=prefetch: service_loop.run(iterate(handle.iter_blocks(prefetch=p), CALLER_WORK_S)),
                    io: lambda p=prefetch: service_loop.run(iterate(handle.iter_blocks(prefetch=p), 0.0)),
                    work: lambda: service_loop.run(work_alone()),
                    floor_total: lambda p=prefetch: service_loop.run(iterate(bare_blocks(p), CALLER_WORK_S)),
                    floor_io: lambda p=prefetch: service_loop.run(iterate(bare_blocks(p), 0.0)),
                },
                repeats=repeats,
                nbytes=spec.nbytes,
                check=check,
            )
            ratio = _overlap_ratio(measured[total], measured[io], measured[work])
            floor_ratio = _overlap_ratio(measured[floor_total], measured[floor_io], measured[work])
            to_floor = statistics.median(
                t / f for t, f in zip(measured[total].seconds, measured[floor_total].seconds, strict=True)
            )
            if ratio <= 1.2:
                verdict = "met"
            elif floor_ratio > 1.2:
                verdict = f"unreachable: floor {floor_ratio:.2f}"
            else:
                verdict = "missed"
            rows.append(
                _row(
                    measured[total],
                    str(blocks),
                    f"{ratio:.2f} of max(work, I/O); {to_floor:.2f} of the floor's time",
                    "<= 1.2",
                    verdict,
                )
            )
            rows.extend(_row(measured[name], str(blocks) if name == io else "0") for name in (io, work))
            rows.append(_row(measured[floor_total], str(blocks), f"{floor_ratio:.2f} of max(work, its I/O)"))
            rows.append(_row(measured[floor_io], str(blocks)))
            results.extend(measured.values())
    finally:
        bare.close()
    return results, rows
