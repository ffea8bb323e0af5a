"""The floor of W6 in Python: the least any Python client using numcodecs can take for it.

``python -m benchmarks.sharded_floor [--repeats N]`` times, on W6's data (8192 x 8192 float32,
shards 4096 x 4096 of inner chunks 512 x 512, Blosc lz4 5 with shuffle: four shards of 64
inner chunks), bare loops with no Zarr library at all, the four shards shared by two threads as
every engine here does on this 2-core machine:

- writing = each inner chunk copied out contiguous and ``Blosc.encode``-d (first checking one
  element for the fill value, as the byte-identical shard requires) and copied into one buffer,
  then the index of little-endian uint64 pairs and its CRC-32C, all written with ``os.write``
  to a temporary file renamed over the key (the atomic write asyncarr and tensorstore make; zarrs
  writes shard files in place);
- reading = the index read and checked, then the inner chunks in runs of at most 4 MiB
  (``os.pread``), each ``blosc.decompress``-ed into one reused array and copied into the
  output; and, beside it, the same with the shard read whole first.

``--s3`` times W6's S3 window instead (rows and columns 1000-2000, through the benchmark's 20 ms
proxy to moto): the floor is the same requests every engine makes, bare (`BareS3.get_sharded`:
aiohttp, no decoding): the index as a suffix range, then the needed inner chunks as ranges merged
within 64 KiB, all at once. The full run times the same floor beside W6's S3 window.

asyncarr's facade, tensorstore (without fsync) and zarr-python with zarrs run beside it,
interleaved, on the same data; the floor's shards are checked byte-identical to asyncarr's
(which the tests check against zarr-python's). Where the floor's ratio to an engine is above a
target, no Python client on numcodecs meets it on this machine.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import google_crc32c
import numcodecs
import numpy as np
from numcodecs import blosc

from .engines import ENGINES, ArraySpec, S3Location
from .workloads import field

__all__ = ["main"]

SPEC = ArraySpec((8192, 8192), (512, 512), "float32", 3, shards=(4096, 4096))
INNER = SPEC.chunks
SHARD = SPEC.shards or SPEC.shape
GRID = tuple(s // i for s, i in zip(SHARD, INNER, strict=True))  # inner chunks per shard, per axis
SHARD_GRID = tuple(a // s for a, s in zip(SPEC.shape, SHARD, strict=True))
INDEX_NBYTES = GRID[0] * GRID[1] * 16 + 4
EMPTY = 2**64 - 1
RUN_BYTES = 4 * 2**20
THREADS = 2


def _morton(grid: tuple[int, int]) -> list[tuple[int, int]]:
    """Inner chunk coordinates in Morton order, the first axis's bit lowest (zarr-python's order)."""
    bits = max(n - 1 for n in grid).bit_length()

    def code(i: int, j: int) -> int:
        return sum((((i >> b) & 1) << (2 * b)) | (((j >> b) & 1) << (2 * b + 1)) for b in range(bits))

    return sorted(((i, j) for i in range(grid[0]) for j in range(grid[1])), key=lambda c: code(*c))


ORDER = _morton(GRID)


def _shard_keys() -> list[tuple[str, tuple[int, int]]]:
    return [(f"c/{i}/{j}", (i, j)) for i in range(SHARD_GRID[0]) for j in range(SHARD_GRID[1])]


def _write_shard(root: str, key: str, shard: np.ndarray, codec: numcodecs.Blosc) -> None:
    index = np.full((*GRID, 2), EMPTY, dtype="<u8")
    scratch = np.empty(INNER, dtype=shard.dtype)
    # The encoded inner chunks copied into one buffer as they come, each then freed for the next
    # to reuse: cheaper than keeping them for os.writev (0.88x, from fewer new pages).
    body = np.empty(shard.nbytes + 16 * len(ORDER) + INDEX_NBYTES, dtype=np.uint8)
    offset = 0
    for i, j in ORDER:
        inner = shard[i * INNER[0] : (i + 1) * INNER[0], j * INNER[1] : (j + 1) * INNER[1]]
        if inner[0, 0] == 0 and not inner.any():  # the fill value: left out, as zarr-python does
            continue
        np.copyto(scratch, inner)
        encoded = codec.encode(scratch)
        index[i, j] = (offset, len(encoded))
        body[offset : offset + len(encoded)] = np.frombuffer(encoded, dtype=np.uint8)
        offset += len(encoded)
        del encoded
    index_bytes = index.tobytes()
    body[offset : offset + INDEX_NBYTES - 4] = np.frombuffer(index_bytes, dtype=np.uint8)
    body[offset + INDEX_NBYTES - 4 : offset + INDEX_NBYTES] = np.frombuffer(
        google_crc32c.value(index_bytes).to_bytes(4, "little"), dtype=np.uint8
    )
    view = memoryview(body)[: offset + INDEX_NBYTES]
    path = f"{root}/{key}"
    temporary = f"{path}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
    os.replace(temporary, path)


def _each_shard(job: Callable[..., None], root: str, array: np.ndarray, *args: Any) -> None:
    """``job(root, key, array's part under that shard, *args)`` for every shard, on ``THREADS`` threads."""
    with concurrent.futures.ThreadPoolExecutor(THREADS) as pool:
        jobs = [
            pool.submit(
                job, root, key, array[i * SHARD[0] : (i + 1) * SHARD[0], j * SHARD[1] : (j + 1) * SHARD[1]], *args
            )
            for key, (i, j) in _shard_keys()
        ]
        for done in jobs:
            done.result()


def _write(root: str, data: np.ndarray, codec: numcodecs.Blosc) -> None:
    for i in range(SHARD_GRID[0]):
        os.makedirs(f"{root}/c/{i}", exist_ok=True)
    _each_shard(_write_shard, root, data, codec)


def _read_shard(root: str, key: str, out: np.ndarray, whole: bool) -> None:
    fd = os.open(f"{root}/{key}", os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        data = os.read(fd, size) if whole else None
        raw = data[size - INDEX_NBYTES :] if data is not None else os.pread(fd, INDEX_NBYTES, size - INDEX_NBYTES)
        if google_crc32c.value(raw[:-4]) != int.from_bytes(raw[-4:], "little"):
            raise ValueError(f"{key}: index checksum mismatch")
        index = np.frombuffer(raw[:-4], dtype="<u8").reshape(*GRID, 2)
        extents = sorted((int(index[i, j, 0]), int(index[i, j, 1]), i, j) for i, j in ORDER if index[i, j, 0] != EMPTY)
        scratch = np.empty(INNER, dtype=out.dtype)
        position = 0
        while position < len(extents):
            start = extents[position][0]
            end = position + 1
            while end < len(extents) and extents[end][0] + extents[end][1] - start <= RUN_BYTES:
                end += 1
            stop = extents[end - 1][0] + extents[end - 1][1]
            run = memoryview(data)[start:stop] if data is not None else memoryview(os.pread(fd, stop - start, start))
            for offset, nbytes, i, j in extents[position:end]:
                blosc.decompress(run[offset - start : offset - start + nbytes], scratch)
                out[i * INNER[0] : (i + 1) * INNER[0], j * INNER[1] : (j + 1) * INNER[1]] = scratch
            position = end
    finally:
        os.close(fd)


def _read(root: str, whole: bool) -> np.ndarray:
    out = np.empty(SPEC.shape, dtype=SPEC.dtype)
    _each_shard(_read_shard, root, out, whole)
    return out


WINDOW = (slice(1000, 2000), slice(1000, 2000))


def s3_window(repeats: int) -> None:
    """Print W6's S3 window beside the bare requests it needs, through the 20 ms proxy to moto."""
    from .bare_s3 import BareS3
    from .servers import LatencyProxy, MotoServer

    moto = MotoServer()
    proxy = LatencyProxy(moto.url, latency=0.02)
    try:
        s3 = S3Location(proxy.url, moto.create_bucket("w6-sharded-floor"))
        data = field(SPEC.shape, SPEC.dtype)
        ENGINES["asyncarr-async"].write("w6", data, SPEC, s3)
        bare = BareS3(s3, "w6")
        names = ("asyncarr-sync", "tensorstore", "zarr-python-zarrs")
        handles = {name: ENGINES[name].open("w6", s3) for name in names}
        runners: dict[str, Callable[[], object]] = {"floor: bare requests": lambda: bare.get_sharded(SPEC, WINDOW)}
        for name in names:
            runners[name] = lambda n=name: ENGINES[n].read(handles[n], WINDOW)
        counts = {}
        for name, run in runners.items():
            proxy.reset()
            result = run()
            if name != "floor: bare requests" and not np.array_equal(np.asarray(result), data[WINDOW]):
                raise AssertionError(f"{name} read other values than were written: figure void")
            answer = proxy.counts()
            counts[name] = f"{answer['requests']} requests, {answer['response_bytes']} bytes"
        times: dict[str, list[float]] = {name: [] for name in runners}
        order = list(runners.items())
        for repeat in range(repeats):
            for name, run in order[repeat % len(order) :] + order[: repeat % len(order)]:
                times[name].append(_seconds(run))
        bare.close()
    finally:
        proxy.stop()
        moto.stop()
    print(f"W6 S3 window {WINDOW[0].start}-{WINDOW[0].stop} x {WINDOW[1].start}-{WINDOW[1].stop}, 20 ms proxy")
    print("| W6 S3 window | requests | median s | / tensorstore | / floor: bare requests |")
    print("|---|---|---|---|---|")
    for name, seconds in times.items():
        cells = [
            f"{statistics.median(a / b for a, b in zip(seconds, times[other], strict=True)):.2f}"
            for other in ("tensorstore", "floor: bare requests")
        ]
        print(f"| {name} | {counts[name]} | {statistics.median(seconds):.4f} | {cells[0]} | {cells[1]} |")


def _seconds(run: Callable[[], object]) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def main() -> None:
    """Print W6's Python floor beside asyncarr, tensorstore and zarr-python+zarrs, as medians of
    interleaved repeats and medians of per-repeat ratios."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--dir", default=None, help="where to write (default: a temporary directory)")
    parser.add_argument("--s3", action="store_true", help="the S3 window through the 20 ms proxy instead")
    options = parser.parse_args()
    if options.s3:
        s3_window(max(options.repeats, 15))
        return
    data = field(SPEC.shape, SPEC.dtype)
    codec = SPEC.numcodecs_blosc()
    engines = {name: ENGINES[name] for name in ("asyncarr-sync", "tensorstore-nosync", "zarr-python-zarrs")}
    writes: dict[str, list[float]] = {name: [] for name in ("floor", *engines)}
    reads: dict[str, list[float]] = {name: [] for name in ("floor: runs", "floor: whole shard", *engines)}
    with tempfile.TemporaryDirectory(prefix="asyncarr-sharded-floor-", dir=options.dir) as directory:
        root = Path(directory)
        for repeat in range(options.repeats):
            where = {name: str(root / f"{name}-{repeat}") for name in writes}
            writers = [
                (name, lambda e=engine, w=where[name]: e.write(w, data, SPEC)) for name, engine in engines.items()
            ]
            writers.append(("floor", lambda w=where["floor"]: _write(w, data, codec)))
            for name, run in writers[repeat % len(writers) :] + writers[: repeat % len(writers)]:  # rotated
                writes[name].append(_seconds(run))
            if repeat == 0:
                for key, _ in _shard_keys():
                    ours = (Path(where["asyncarr-sync"]) / key).read_bytes()
                    if (Path(where["floor"]) / key).read_bytes() != ours:
                        raise AssertionError(f"the floor's shard {key} differs from asyncarr's: figure void")
                if not np.array_equal(_read(where["asyncarr-sync"], whole=False), data):
                    raise AssertionError("the floor read other values than were written: figure void")
            # Every engine reads asyncarr's copy (byte-identical to zarr-python's).
            handles = {name: engine.open(where["asyncarr-sync"]) for name, engine in engines.items()}
            readers = [(name, lambda e=engine, h=handles[name]: e.read(h)) for name, engine in engines.items()]
            readers.append(("floor: runs", lambda w=where["asyncarr-sync"]: _read(w, whole=False)))
            readers.append(("floor: whole shard", lambda w=where["asyncarr-sync"]: _read(w, whole=True)))
            for name, run in readers[repeat % len(readers) :] + readers[: repeat % len(readers)]:
                reads[name].append(_seconds(run))
            for path in where.values():
                shutil.rmtree(path, ignore_errors=True)
    print(f"W6: {SPEC.shape} {SPEC.dtype}, shards {SHARD}, inner chunks {INNER}, {THREADS} threads")
    print("| W6 (v3, sharded) | median s | / tensorstore-nosync | / zarr-python-zarrs |")
    print("|---|---|---|---|")
    for kind, times in (("write", writes), ("read", reads)):
        for name, seconds in times.items():
            cells = [
                f"{statistics.median(a / b for a, b in zip(seconds, times[other], strict=True)):.2f}"
                for other in ("tensorstore-nosync", "zarr-python-zarrs")
            ]
            print(f"| {kind}: {name} | {statistics.median(seconds):.4f} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
