"""The floor of W2 in Python: the least any Python client using numcodecs (or c-blosc2) can take for it.

``python -m benchmarks.python_floor [--repeats N] [--zarr-format 3]`` times, on W2's data
(2048 x 2048 uint16, chunks 32 x 32, Blosc zstd 1; v2 keys in one directory, or v3's under
``c/i/j``), a bare loop with no Zarr library at all, beside asyncarr's facade and tensorstore
(without fsync), interleaved, on the same data:

- reading: ``os.open``/``os.read`` of each chunk file and ``numcodecs.blosc.decompress``
  straight into the output, on one thread and pipelined over two (a reader and a decoder), and
  on one thread with c-blosc2's ``blosc2_decompress`` in place of numcodecs (the library
  asyncarr's ``fast`` extra uses for small frames). The floors decode each chunk into a
  contiguous slot of their own, skipping the copy into the array's layout every engine makes,
  so they sit a little below any real client. asyncarr and tensorstore read tensorstore's files.
- writing: ``Blosc.encode`` of each chunk, then a temporary file renamed over the key (the
  atomic write every client here does), on one thread and on two (each thread half of the
  chunks: the encoder and the file system calls release the GIL).

Where a floor's ratio to tensorstore is above a target, no Python client built that way meets it.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import queue
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable

import numcodecs
import numpy as np
from numcodecs import blosc

from asyncarr.codecs.blosc_frames import decompress_into_address, fast_decoder_available

from .engines import ENGINES, ArraySpec
from .workloads import field

__all__ = ["main"]

SPEC = ArraySpec((2048, 2048), (32, 32), "uint16", 2, cname="zstd", clevel=1)


def _chunks(data: np.ndarray, zarr_format: int = 2) -> list[tuple[str, np.ndarray]]:
    rows, columns = (s // c for s, c in zip(SPEC.shape, SPEC.chunks, strict=True))
    step = SPEC.chunks[0]
    key = "{}.{}" if zarr_format == 2 else "c/{}/{}"
    return [
        (key.format(i, j), np.ascontiguousarray(data[i * step : (i + 1) * step, j * step : (j + 1) * step]))
        for i in range(rows)
        for j in range(columns)
    ]


def _read_file(path: str) -> bytes:
    # One read of at most 64 KiB: W2's chunk files are about 1 KiB. A larger request is not free:
    # os.read(fd, 1 MiB) allocates the whole MiB before it shrinks it, 12 us a file here.
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, 1 << 16)
    finally:
        os.close(fd)


def _read_one_thread(root: str, keys: list[str], out: np.ndarray) -> None:
    for index, key in enumerate(keys):
        blosc.decompress(_read_file(f"{root}/{key}"), out[index])


def _read_one_thread_blosc2(root: str, keys: list[str], out: np.ndarray) -> None:
    for index, key in enumerate(keys):
        slot = out[index]
        if not decompress_into_address(_read_file(f"{root}/{key}"), slot.ctypes.data, slot.nbytes):
            raise RuntimeError(f"c-blosc2 refused chunk {key}")


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
    made = set()
    for key, chunk in chunks:
        directory, _, name = f"{root}/{key}".rpartition("/")
        if directory not in made:
            os.makedirs(directory, exist_ok=True)
            made.add(directory)
        temporary = f"{directory}/.tmp-{name}"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # no file object: cheaper
        try:
            os.write(fd, codec.encode(chunk))
        finally:
            os.close(fd)
        os.replace(temporary, f"{directory}/{name}")


def _write_two_threads(root: str, chunks: list[tuple[str, np.ndarray]], codec: numcodecs.Blosc) -> None:
    os.makedirs(root, exist_ok=True)
    helper = threading.Thread(target=_write, args=(root, chunks[1::2], codec))
    helper.start()
    _write(root, chunks[::2], codec)
    helper.join()


def _median_seconds(run: Callable[[], object], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return times


def main() -> None:
    """Print W2's Python floors beside asyncarr and tensorstore, as ratios of medians of interleaved repeats."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--zarr-format", type=int, choices=(2, 3), default=2, help="the chunk key layout")
    arguments = parser.parse_args()
    repeats, spec = arguments.repeats, dataclasses.replace(SPEC, zarr_format=arguments.zarr_format)
    data = field(spec.shape, spec.dtype)  # W2's own data
    chunks = _chunks(data, spec.zarr_format)
    keys = [key for key, _ in chunks]
    codec = SPEC.numcodecs_blosc()
    tensorstore, asyncarr = ENGINES["tensorstore-nosync"], ENGINES["asyncarr-sync"]
    times: dict[str, list[float]] = {}

    def timed(label: str, run: Callable[[], object]) -> None:
        times.setdefault(label, []).extend(_median_seconds(run, 1))

    out = np.empty((len(keys), *SPEC.chunks), dtype=SPEC.dtype)
    with tempfile.TemporaryDirectory(prefix="asyncarr-floor-") as directory:
        for repeat in range(repeats):
            # Fresh directories each repeat, removed after it: a directory of 4096 files just
            # deleted costs several times a first write on this file system, whoever writes, and
            # a file system holding tens of thousands of files creates more slowly.
            names = ("floor", "floor2", "ts", "ours")
            floor_dir, floor2_dir, ts_dir, ours_dir = (os.path.join(directory, f"{n}-{repeat}") for n in names)
            timed("write: Python floor, one thread", lambda: _write(floor_dir, chunks, codec))  # noqa: B023
            timed("write: Python floor, two threads", lambda: _write_two_threads(floor2_dir, chunks, codec))  # noqa: B023
            timed("write: asyncarr-sync", lambda: asyncarr.write(ours_dir, data, spec))  # noqa: B023
            timed("write: tensorstore-nosync", lambda: tensorstore.write(ts_dir, data, spec))  # noqa: B023
            timed("read: Python floor, one thread", lambda: _read_one_thread(floor_dir, keys, out))  # noqa: B023
            timed("read: Python floor, reader and decoder threads", lambda: _read_pipelined(floor_dir, keys, out))  # noqa: B023
            if fast_decoder_available():
                timed("read: Python floor, one thread, c-blosc2", lambda: _read_one_thread_blosc2(floor_dir, keys, out))  # noqa: B023
            handle, ours = tensorstore.open(ts_dir), asyncarr.open(ts_dir)
            timed("read: asyncarr-sync", lambda: asyncarr.read(ours))  # noqa: B023
            timed("read: tensorstore-nosync", lambda: tensorstore.read(handle))  # noqa: B023
            for name in (floor_dir, floor2_dir, ts_dir, ours_dir):
                shutil.rmtree(name)
    print(f"| W2 (v{spec.zarr_format}) | s | / tensorstore-nosync |")
    print("|---|---|---|")
    for label, measured in times.items():
        anchor = times["write: tensorstore-nosync" if label.startswith("write") else "read: tensorstore-nosync"]
        ratio = statistics.median(a / b for a, b in zip(measured, anchor, strict=True))
        print(f"| {label} | {statistics.median(measured):.4f} | {ratio:.2f} |")


if __name__ == "__main__":
    main()
