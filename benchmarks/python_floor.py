"""The floor of W2 in Python: the least any Python client using numcodecs can take for it.

``python -m benchmarks.python_floor [--repeats N]`` times, on W2's data (2048 x 2048 uint16,
chunks 32 x 32, Blosc zstd 1, v2 keys in one directory), a bare loop with no Zarr library at
all: reading = ``os.open``/``os.read`` of each chunk file and ``numcodecs.blosc.decompress``
straight into the output, on one thread and pipelined over two (a reader and a decoder);
writing = ``Blosc.encode`` of each chunk then a temporary file renamed over the key (the same
atomic write every client here does). asyncarr's facade and tensorstore (without fsync) run
beside it, interleaved, on the same data; asyncarr and tensorstore read tensorstore's files.
Where the floor's ratio to tensorstore is above a target, no Python client on numcodecs meets it.
"""

from __future__ import annotations

import argparse
import os
import queue
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numcodecs
import numpy as np
from numcodecs import blosc

from .engines import ENGINES, ArraySpec

__all__ = ["main"]

SPEC = ArraySpec((2048, 2048), (32, 32), "uint16", 2, cname="zstd", clevel=1)


def _chunks(data: np.ndarray) -> list[tuple[str, np.ndarray]]:
    rows, columns = (s // c for s, c in zip(SPEC.shape, SPEC.chunks, strict=True))
    step = SPEC.chunks[0]
    return [
        (f"{i}.{j}", np.ascontiguousarray(data[i * step : (i + 1) * step, j * step : (j + 1) * step]))
        for i in range(rows)
        for j in range(columns)
    ]


def _read_file(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, 1 << 20)
    finally:
        os.close(fd)


def _read_one_thread(root: str, keys: list[str], out: np.ndarray) -> None:
    for index, key in enumerate(keys):
        blosc.decompress(_read_file(f"{root}/{key}"), out[index])


def _read_pipelined(root: str, keys: list[str], out: np.ndarray) -> None:
    batches: queue.SimpleQueue[list[tuple[int, bytes]] | None] = queue.SimpleQueue()

    def decode() -> None:
        while (batch := batches.get()) is not None:
            for index, data in batch:
                blosc.decompress(data, out[index])

    decoder = threading.Thread(target=decode)
    decoder.start()
    batch: list[tuple[int, bytes]] = []
    for index, key in enumerate(keys):
        batch.append((index, _read_file(f"{root}/{key}")))
        if len(batch) == 256:
            batches.put(batch)
            batch = []
    batches.put(batch)
    batches.put(None)
    decoder.join()


def _write(root: str, chunks: list[tuple[str, np.ndarray]], codec: numcodecs.Blosc) -> None:
    os.makedirs(root, exist_ok=True)
    for key, chunk in chunks:
        temporary = f"{root}/.tmp-{key}"
        with open(temporary, "wb") as file:
            file.write(codec.encode(chunk))
        os.replace(temporary, f"{root}/{key}")


def _median_seconds(run: Callable[[], object], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return times


def main() -> None:
    """Print W2's Python floor beside tensorstore, as ratios of medians of interleaved repeats."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    repeats = parser.parse_args().repeats
    data = np.random.default_rng(2).integers(0, 1000, size=SPEC.shape).astype(SPEC.dtype)
    chunks = _chunks(data)
    keys = [key for key, _ in chunks]
    codec = SPEC.numcodecs_blosc()
    tensorstore, asyncarr = ENGINES["tensorstore-nosync"], ENGINES["asyncarr-sync"]
    with tempfile.TemporaryDirectory(prefix="asyncarr-floor-") as directory:
        root = Path(directory)
        floor_write, ts_write, floor_read, piped_read, ts_read = [], [], [], [], []
        ours_write, ours_read = [], []
        out = np.empty((len(keys), *SPEC.chunks), dtype=SPEC.dtype)
        for repeat in range(repeats):
            # Fresh directories each repeat: rewriting a directory of 4096 files just deleted costs
            # several times a first write on this file system, whoever writes.
            floor_dir, ts_dir, ours_dir = (str(root / f"{name}-{repeat}") for name in ("floor", "ts", "ours"))
            floor_write += _median_seconds(lambda: _write(floor_dir, chunks, codec), 1)  # noqa: B023
            ours_write += _median_seconds(lambda: asyncarr.write(ours_dir, data, SPEC), 1)  # noqa: B023
            ts_write += _median_seconds(lambda: tensorstore.write(ts_dir, data, SPEC), 1)  # noqa: B023
            floor_read += _median_seconds(lambda: _read_one_thread(floor_dir, keys, out), 1)  # noqa: B023
            piped_read += _median_seconds(lambda: _read_pipelined(floor_dir, keys, out), 1)  # noqa: B023
            handle, ours = tensorstore.open(ts_dir), asyncarr.open(ts_dir)
            ts_read += _median_seconds(lambda: tensorstore.read(handle), 1)  # noqa: B023
            ours_read += _median_seconds(lambda: asyncarr.read(ours), 1)  # noqa: B023
    print("| W2 (v2) | s | / tensorstore-nosync |")
    print("|---|---|---|")
    for label, times, theirs in (
        ("write: Python floor (encode, then temporary file renamed)", floor_write, ts_write),
        ("write: asyncarr-sync", ours_write, ts_write),
        ("write: tensorstore-nosync", ts_write, ts_write),
        ("read: Python floor, one thread", floor_read, ts_read),
        ("read: Python floor, reader and decoder threads", piped_read, ts_read),
        ("read: asyncarr-sync", ours_read, ts_read),
        ("read: tensorstore-nosync", ts_read, ts_read),
    ):
        ratio = statistics.median(a / b for a, b in zip(times, theirs, strict=True))
        print(f"| {label} | {statistics.median(times):.4f} | {ratio:.2f} |")


if __name__ == "__main__":
    main()
