"""The floors of W2 and W1 in Python: the least any Python client using numcodecs (or c-blosc2) can take.

``python -m benchmarks.python_floor [--repeats N] [--zarr-format 3] [--workload W1]`` times, on
W2's data (2048 x 2048 uint16, chunks 32 x 32, Blosc zstd 1; v2 keys in one directory, or v3's
under ``c/i/j``), a bare loop with no Zarr library at all, beside asyncarr's facade, tensorstore
(without fsync) and zarr-python with zarrs, interleaved, on the same data. ``--workload W1``
times the writes alone on W1's data (8192 x 8192 float32, chunks 512 x 512, Blosc lz4 5):

- reading: ``os.open``/``os.read`` of each chunk file and ``numcodecs.blosc.decompress``
  straight into the output, on one thread and pipelined over two (a reader and a decoder), and
  on one thread with c-blosc2's ``blosc2_decompress`` in place of numcodecs (the library
  asyncarr's ``fast`` extra uses for small frames). The floors decode each chunk into a
  contiguous slot of their own, skipping the copy into the array's layout every engine makes,
  so they sit a little below any real client. asyncarr and tensorstore read tensorstore's files.
- writing: numcodecs' Blosc compression of each chunk (``numcodecs.blosc.compress`` itself, as
  asyncarr's plain encoders call it: ``Blosc.encode``'s checks cost about 4 us a chunk), then a
  temporary file renamed over the key (the atomic write asyncarr and tensorstore make; zarrs writes
  chunk files in place), on one thread,
  on two (each thread half of the chunks: the encoder and the file system calls release the
  GIL), and on two with one thread preferring to encode and the other to write (asyncarr's way
  for small chunks, since round 7), and with a library's duties per chunk
  (`write_floors.write_with_duties`: its values copied out of the caller's array, its lock, fill
  check, key check and request count, with asyncarr's own pieces; the full run times the same
  floor); and the encoding alone, on two threads, with no file written.

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

import numpy as np
from numcodecs import blosc

from asyncarr.codecs.blosc_frames import decompress_into_address, fast_decoder_available

from .engines import ENGINES, ArraySpec
from .workloads import field
from .write_floors import chunk_items, floor_workers, write_encoded, write_encoder_and_writer, write_with_duties

__all__ = ["main"]

SPEC = ArraySpec((2048, 2048), (32, 32), "uint16", 2, cname="zstd", clevel=1)
SPECS = {"W1": ArraySpec((8192, 8192), (512, 512), "float32", 2), "W2": SPEC}
ANCHORS = ("tensorstore-nosync", "zarr-python-zarrs")


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


def _write(root: str, chunks: list[tuple[str, np.ndarray]], encode_chunk: Callable[[np.ndarray], bytes]) -> None:
    write_encoded(root, ((key, encode_chunk(chunk)) for key, chunk in chunks))


def _write_two_threads(
    root: str, chunks: list[tuple[str, np.ndarray]], encode_chunk: Callable[[np.ndarray], bytes]
) -> None:
    # On two worker threads, not the main thread and a helper: the main thread's heap may be given
    # back and faulted in again for each large chunk's encoded bytes (`write_floors.write_with_duties`).
    os.makedirs(root, exist_ok=True)
    halves = [floor_workers().submit(_write, root, chunks[start::2], encode_chunk) for start in (0, 1)]
    for half in halves:
        half.result()


def _encode_two_threads(chunks: list[tuple[str, np.ndarray]], encode_chunk: Callable[[np.ndarray], bytes]) -> None:
    """Only the encoding of the write, on two threads: the floor of any client using c-blosc 1's
    encoder (tensorstore and zarrs build c-blosc 1 too), whatever it does with the files."""

    def encode(part: list[tuple[str, np.ndarray]]) -> None:
        for _, chunk in part:
            encode_chunk(chunk)

    halves = [floor_workers().submit(encode, chunks[start::2]) for start in (0, 1)]
    for half in halves:
        half.result()


def _median_seconds(run: Callable[[], object], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return times


def main() -> None:
    """Print the Python floors beside asyncarr, tensorstore and zarrs, as ratios of interleaved repeats."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--zarr-format", type=int, choices=(2, 3), default=2, help="the chunk key layout")
    parser.add_argument("--workload", choices=sorted(SPECS), default="W2", help="W1: the writes alone")
    arguments = parser.parse_args()
    repeats = arguments.repeats
    spec = dataclasses.replace(SPECS[arguments.workload], zarr_format=arguments.zarr_format)
    reads = arguments.workload == "W2"  # the read floors read each file in one 64 KiB read
    data = field(spec.shape, spec.dtype)
    chunks = chunk_items(data, spec)
    keys = [key for key, _ in chunks]
    encode_chunk = spec.blosc_compress()
    engines = {name: ENGINES[name] for name in ("asyncarr-sync", *ANCHORS)}
    times: dict[str, list[float]] = {}

    def timed(label: str, run: Callable[[], object]) -> None:
        times.setdefault(label, []).extend(_median_seconds(run, 1))

    out = np.empty((len(keys), *spec.chunks), dtype=spec.dtype)
    with tempfile.TemporaryDirectory(prefix="asyncarr-floor-") as directory:
        for repeat in range(repeats):
            # Fresh directories each repeat, removed after it: a directory of 4096 files just
            # deleted costs several times a first write on this file system, whoever writes, and
            # a file system holding tens of thousands of files creates more slowly.
            names = ("floor", "floor2", "floor-pipe", "floor-duties", *engines)
            places = {name: os.path.join(directory, f"{name}-{repeat}") for name in names}
            timed("write: Python floor, one thread", lambda: _write(places["floor"], chunks, encode_chunk))  # noqa: B023
            timed(
                "write: Python floor, two threads",
                lambda: _write_two_threads(places["floor2"], chunks, encode_chunk),  # noqa: B023
            )
            timed(
                "write: Python floor, encoder and writer threads",
                lambda: write_encoder_and_writer(places["floor-pipe"], chunks, encode_chunk),  # noqa: B023
            )
            timed(
                "write: Python floor with a library's duties (as the full run's)",
                lambda: write_with_duties(places["floor-duties"], data, spec),  # noqa: B023
            )
            timed("write: encoding alone, two threads", lambda: _encode_two_threads(chunks, encode_chunk))
            for name, engine in engines.items():
                timed(f"write: {name}", lambda e=engine, n=name: e.write(places[n], data, spec))  # noqa: B023
            if reads:
                floor = places["floor"]
                timed("read: Python floor, one thread", lambda f=floor: _read_one_thread(f, keys, out))
                timed("read: Python floor, reader and decoder threads", lambda f=floor: _read_pipelined(f, keys, out))
                if fast_decoder_available():
                    timed(
                        "read: Python floor, one thread, c-blosc2",
                        lambda f=floor: _read_one_thread_blosc2(f, keys, out),
                    )
                shared = places["tensorstore-nosync"]  # every engine reads tensorstore's files
                for name, engine in engines.items():
                    handle = engine.open(shared)
                    timed(f"read: {name}", lambda e=engine, h=handle: e.read(h))
            for place in places.values():
                shutil.rmtree(place)
    print(f"| {arguments.workload} (v{spec.zarr_format}) | s | / tensorstore-nosync | / zarr-python-zarrs |")
    print("|---|---|---|---|")
    for label, measured in times.items():
        kind = label.split(":")[0]
        ratios = [
            statistics.median(a / b for a, b in zip(measured, times[f"{kind}: {anchor}"], strict=True))
            for anchor in ANCHORS
        ]
        print(f"| {label} | {statistics.median(measured):.4f} | {ratios[0]:.2f} | {ratios[1]:.2f} |")


if __name__ == "__main__":
    main()
