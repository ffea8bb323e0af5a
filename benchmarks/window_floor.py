"""The floor of W4 on local files in Python: a row and a window with no Zarr library at all.

``python -m benchmarks.window_floor [--repeats N]`` writes W1's array (8192 x 8192 float32,
chunks 512 x 512, Blosc lz4 5 with shuffle, v2 keys) once with asyncarr, then times W4's row
(row 4096: 16 chunks, one row of each) and window (rows and columns 1000-2000: 9 chunks, parts
of 8) beside asyncarr's facade, tensorstore (with and without fsync; they read alike) and
zarr-python with zarrs, interleaved, on the same files. The bare floor reads each chunk file whole
(``os.readv`` into a reused buffer), decodes it with ``numcodecs.blosc.decompress`` into a chunk-sized
scratch array of its thread, and copies the selected part into the output; on one thread and
on two (each a share of the chunks). The floor with duties (`read_floors.read_part_with_duties`,
the one the full run times beside W4) reads only the Blosc blocks each part lies in, as asyncarr
does, with a library's checks. Every result is checked against the data.

``--idle-ms 5`` sleeps that long before each timed call, so every call starts as a data service's
request does after a pause, on idle cores: on this project's 2-core VM a call then costs more
for every engine, and asyncarr's codec thread is woken onto the caller's CPU in about half the
calls (docs/performance.md, round 8).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from numcodecs import blosc

from .engines import ENGINES, ArraySpec
from .read_floors import chunk_pieces, read_part_with_duties
from .workloads import field

__all__ = ["main"]

SPEC = ArraySpec((8192, 8192), (512, 512), "float32", 2)
SELECTIONS = {"row": (4096, slice(None)), "window": (slice(1000, 2000), slice(1000, 2000))}
ENGINE_NAMES = ["asyncarr-sync", "tensorstore", "tensorstore-nosync", "zarr-python-zarrs"]


_scratch = threading.local()


def _read_pieces(root: str, pieces: list[Any], out: np.ndarray) -> None:
    chunk = getattr(_scratch, "chunk", None)
    if chunk is None:  # a chunk-sized array and a file-sized buffer per thread, reused: no new memory per chunk
        chunk = _scratch.chunk = np.empty(SPEC.chunks, dtype=SPEC.dtype)
        _scratch.raw = bytearray(2 * chunk.nbytes)
    raw = _scratch.raw
    for key, inside, target in pieces:
        fd = os.open(f"{root}/{key}", os.O_RDONLY)
        try:
            size = os.readv(fd, [raw])
        finally:
            os.close(fd)
        blosc.decompress(memoryview(raw)[:size], chunk)
        out[target] = chunk[inside]


def _floor(root: str, selection: Any, threads: int, pool: ThreadPoolExecutor) -> np.ndarray:
    shape, pieces = chunk_pieces(SPEC, selection)
    out = np.empty(shape, dtype=SPEC.dtype)
    if threads == 1:
        _read_pieces(root, pieces, out)
    else:
        shares = [pieces[start::threads] for start in range(threads)]
        helpers = [pool.submit(_read_pieces, root, share, out) for share in shares[1:]]
        _read_pieces(root, shares[0], out)
        for helper in helpers:
            helper.result()
    return out[0] if isinstance(selection[0], int) else out


def main() -> None:
    """Print W4's local floors beside the engines, as medians of interleaved repeats and ratios to tensorstore."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=40)
    parser.add_argument("--idle-ms", type=float, default=0.0, help="sleep this long before each timed call")
    arguments = parser.parse_args()
    repeats, idle_seconds = arguments.repeats, arguments.idle_ms / 1000
    data = field(SPEC.shape, SPEC.dtype)
    with tempfile.TemporaryDirectory(prefix="asyncarr-window-floor-") as directory:
        root = os.path.join(directory, "w1")
        ENGINES["asyncarr-sync"].write(root, data, SPEC)
        handles = {name: ENGINES[name].open(root) for name in ENGINE_NAMES}
        with ThreadPoolExecutor(2) as pool:
            for kind, selection in SELECTIONS.items():
                expected = data[selection]
                runners: dict[str, Callable[[], Any]] = {
                    "Python floor, one thread": lambda s=selection: _floor(root, s, 1, pool),
                    "Python floor, two threads": lambda s=selection: _floor(root, s, 2, pool),
                    "Python floor with duties, by the block": lambda s=selection: read_part_with_duties(root, SPEC, s),
                } | {name: (lambda n=name, s=selection: ENGINES[n].read(handles[n], s)) for name in ENGINE_NAMES}
                times: dict[str, list[float]] = {name: [] for name in runners}
                for name, run in runners.items():  # warm-up, and the check
                    if not np.array_equal(np.asarray(run()), expected):
                        raise AssertionError(f"{name} read other data than was written")
                for _ in range(repeats):
                    for name, run in runners.items():
                        if idle_seconds:
                            time.sleep(idle_seconds)
                        started = time.perf_counter()
                        run()
                        times[name].append(time.perf_counter() - started)
                print(f"| W4 local v2 {kind} | ms | / tensorstore | / tensorstore-nosync |")
                print("|---|---|---|---|")
                for name, measured in times.items():
                    ratios = [
                        statistics.median(a / b for a, b in zip(measured, times[anchor], strict=True))
                        for anchor in ("tensorstore", "tensorstore-nosync")
                    ]
                    print(f"| {name} | {statistics.median(measured) * 1e3:.2f} | {ratios[0]:.2f} | {ratios[1]:.2f} |")
                print()


if __name__ == "__main__":
    main()
