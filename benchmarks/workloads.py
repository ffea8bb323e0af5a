"""The benchmark workloads (W1-W6 of the performance issue) and the floors they are compared with."""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np

from .bare_s3 import FLOOR, FLOOR_REPLACE, BareS3, chunk_keys, encoded_chunks
from .engines import ENGINES, ArraySpec, S3Location
from .measure import Measurement, interleaved
from .read_floors import read_part_with_duties, read_with_duties
from .write_floors import FLOOR_DUTIES, write_with_duties

__all__ = ["field", "floors", "full_write_and_read", "many_small_reads", "partial_reads"]

ASYNCARR = "asyncarr-async"


def field(shape: tuple[int, ...], dtype: str, seed: int = 0) -> np.ndarray:
    """A smooth field plus small noise: compresses like real measurements, not like zeros or noise."""
    rng = np.random.default_rng(seed)
    y = np.linspace(0, 8 * np.pi, shape[0], dtype="f4")[:, None]
    x = np.linspace(0, 6 * np.pi, shape[1], dtype="f4")[None, :]
    smooth = np.sin(y) * np.cos(x) + 0.5 * np.sin(0.3 * x + y)
    noisy = smooth + rng.normal(0, 0.01, shape).astype("f4")
    if np.dtype(dtype).kind in "ui":
        return ((noisy + 2) * 1000).astype(dtype)
    return noisy.astype(dtype)


def _equal_check(expected: np.ndarray) -> Callable[[str, Any], None]:
    def check(engine: str, result: Any) -> None:
        if engine == FLOOR:  # raw chunk bodies, not an array; BareS3 checked every answer was a 200
            return
        if not np.array_equal(np.asarray(result), expected):
            raise AssertionError(f"{engine} read data that differs from what was written: figure void")

    return check


def full_write_and_read(
    label: str,
    root: Path,
    spec: ArraySpec,
    engines: list[str],
    repeats: int,
    s3: S3Location | None = None,
    server_cpu: Callable[[], float] | None = None,
) -> list[Measurement]:
    """Each engine writes the whole array to its own place; then every engine reads one copy.

    On S3, the bare-request floor (`BareS3`) runs interleaved with the engines: the same PUTs
    and GETs with nothing else around them. Locally, the floors with a library's duties
    (`write_floors.write_with_duties`, `read_floors.read_with_duties`) do, for arrays without shards.
    """
    data = field(spec.shape, spec.dtype)
    # The floor writes a file per chunk (not a sharded array's work). Round 9 timed it for small
    # chunks only: for W1's chunks of 1 MiB asyncarr took 0.74-1.09 of it, because the floor wrote
    # half of them on the main thread, whose heap glibc gave back and faulted in again per chunk.
    # On two worker threads since round 10, it is a floor for large chunks too.
    duties_floor = not s3 and not spec.shards
    names = [*engines, FLOOR_DUTIES] if duties_floor else engines
    places = {name: f"{label}-{name}" if s3 else str(root / f"{label}-{name}") for name in names}

    def clear(name: str) -> None:
        if not s3:
            shutil.rmtree(places[name], ignore_errors=True)
            # Untimed: the last write's dirty pages (256 MiB for W1) and the removal reach the disk
            # now, not during the next engine's write, which would pay for them (the kernel makes
            # whoever writes next wait for writeback).
            os.sync()

    write_runners = {name: (lambda n=name: ENGINES[n].write(places[n], data, spec, s3)) for name in engines}
    read_floor: dict[str, Callable[[], Any]] = {}
    floor_clients: list[BareS3] = []
    if s3 and not spec.shards:
        bodies = encoded_chunks(spec, data)
        writer, reader = BareS3(s3, f"{label}-floor"), BareS3(s3, places[ASYNCARR])
        replacer = BareS3(s3, f"{label}-replace")
        floor_clients = [writer, reader, replacer]
        write_runners[FLOOR] = lambda: writer.put_all(bodies)
        write_runners[FLOOR_REPLACE] = lambda: replacer.replace_all(bodies)
        read_floor[FLOOR] = lambda: reader.get_all(list(bodies))
    if duties_floor:
        write_runners[FLOOR_DUTIES] = lambda: write_with_duties(places[FLOOR_DUTIES], data, spec)
    writes = interleaved(
        f"{label} write",
        write_runners,
        repeats=repeats,
        nbytes=spec.nbytes,
        setup=clear,
        server_cpu=server_cpu,
    )
    shared = places[ASYNCARR]
    ENGINES[ASYNCARR].write(shared, data, spec, s3)
    if duties_floor:
        read_floor[FLOOR_DUTIES] = lambda: read_with_duties(shared, spec)
    handles = {name: ENGINES[name].open(shared, s3) for name in engines}
    reads = interleaved(
        f"{label} read",
        {name: (lambda n=name: ENGINES[n].read(handles[n])) for name in engines} | read_floor,
        repeats=repeats,
        nbytes=spec.nbytes,
        check=_equal_check(data),
        server_cpu=server_cpu,
    )
    for client in floor_clients:
        client.close()
    return [*writes.values(), *reads.values()]


def partial_reads(
    label: str,
    where: str,
    spec: ArraySpec,
    engines: list[str],
    repeats: int,
    s3: S3Location | None = None,
    server_cpu: Callable[[], float] | None = None,
    kinds: tuple[str, ...] = ("row", "window"),
) -> list[Measurement]:
    """W4: one row and one 1000x1000 window, each read ``repeats`` times per engine (median latency),
    beside a floor: on S3 the bare requests, locally Python with a library's duties
    (`read_floors.read_part_with_duties`)."""
    data = field(spec.shape, spec.dtype)
    handles = {name: ENGINES[name].open(where, s3) for name in engines}
    row = spec.shape[0] // 2
    selections = {"row": (row, slice(None)), "window": (slice(1000, 2000), slice(1000, 2000))}
    results = []
    floor = BareS3(s3, where) if s3 else None
    for kind in kinds:
        selection = selections[kind]
        runners = {name: (lambda n=name, s=selection: ENGINES[n].read(handles[n], s)) for name in engines}
        if floor and spec.shards:  # shard indexes, then merged ranges of the inner chunks
            runners[FLOOR] = lambda s=selection: floor.get_sharded(spec, s)
        elif floor:
            runners[FLOOR] = lambda keys=chunk_keys(spec, selection): floor.get_all(keys)
        elif not spec.shards:  # local: the least Python that reads the same blocks, with a library's duties
            runners[FLOOR_DUTIES] = lambda s=selection: read_part_with_duties(where, spec, s)
        measured = interleaved(
            f"{label} {kind}",
            runners,
            repeats=repeats,
            nbytes=data[selection].nbytes,
            check=_equal_check(data[selection]),
            server_cpu=server_cpu,
            sample_rss=False,  # latencies of a few milliseconds: see `interleaved`
        )
        results.extend(measured.values())
    if floor:
        floor.close()
    return results


def many_small_reads(
    label: str, where: str, spec: ArraySpec, engines: list[str], repeats: int, points: int = 1000
) -> list[Measurement]:
    """W5: ``points`` single-element reads, concurrently (async APIs) or from 8 threads (sync APIs)."""
    data = field(spec.shape, spec.dtype)
    rng = np.random.default_rng(5)
    coords = [tuple(int(c) for c in p) for p in zip(*(rng.integers(0, n, points) for n in spec.shape), strict=True)]
    expected = np.array([data[c] for c in coords])
    handles = {name: ENGINES[name].open(where) for name in engines}

    def check(engine: str, result: Any) -> None:
        got = np.array([np.asarray(v).item() for v in result])
        if not np.array_equal(got, expected):
            raise AssertionError(f"{engine} returned wrong elements: figure void")

    measured = interleaved(
        label,
        {name: (lambda n=name: ENGINES[n].many_points(handles[n], coords)) for name in engines},
        repeats=repeats,
        nbytes=points * np.dtype(spec.dtype).itemsize,
        check=check,
    )
    return list(measured.values())


def _chunk_files(where: str) -> list[str]:
    files = []
    for directory, _, names in os.walk(where):
        files.extend(os.path.join(directory, n) for n in names if n not in ("zarr.json", ".zarray", ".zattrs"))
    return files


def floors(label: str, where: str, spec: ArraySpec, repeats: int) -> list[Measurement]:
    """Reference limits: reading the raw chunk files alone, and decoding them alone, each on 1 thread
    and on several (for small chunks one thread is faster: the threads trade the GIL).

    Each thread takes an equal share of the chunks in one job, so the figures hold no per-chunk
    thread hand-offs.
    """
    files = _chunk_files(where)
    codec = numcodecs.Blosc(cname=spec.cname, clevel=spec.clevel, shuffle=numcodecs.Blosc.SHUFFLE)
    blobs = [Path(p).read_bytes() for p in files]

    def read_all(paths: list[str]) -> None:
        for path in paths:
            Path(path).read_bytes()

    def decode_all(chunks: list[bytes]) -> None:
        for chunk in chunks:
            codec.decode(chunk)

    def touch_new_output() -> None:
        np.empty(spec.shape, dtype=spec.dtype).fill(0)

    # What every engine pays before any chunk: the kernel faulting in and zeroing a new output.
    seconds = []
    for _ in range(repeats):
        started = time.perf_counter()
        touch_new_output()
        seconds.append(time.perf_counter() - started)
    results = [
        Measurement("floor: first touch of a new output array", f"{label} read", seconds, [0] * repeats, spec.nbytes)
    ]
    for threads in (1, 2, 8):
        tasks = [(f"raw chunk bytes, {threads} threads", read_all, files)]
        if threads <= 2:
            tasks.append((f"decode only, {threads} threads", decode_all, blobs))
        with concurrent.futures.ThreadPoolExecutor(threads) as pool:
            for task, work, items in tasks:
                shares = [items[i::threads] for i in range(threads)]

                def run(work: Callable[[Any], None] = work, shares: list[Any] = shares) -> None:
                    for future in [pool.submit(work, share) for share in shares]:
                        future.result()

                run()  # warm-up: starts the pool's threads
                seconds = []
                for _ in range(repeats):
                    started = time.perf_counter()
                    run()
                    seconds.append(time.perf_counter() - started)
                results.append(Measurement(f"floor: {task}", f"{label} read", seconds, [0] * repeats, spec.nbytes))
    return results


def median_ratio(reference: Measurement, other: Measurement) -> float:
    """Median over repeats of reference time / other time (below 1: the reference was faster)."""
    return statistics.median(a / b for a, b in zip(reference.seconds, other.seconds, strict=True))
