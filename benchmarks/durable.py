"""Durable writes: asyncarr with ``fsync`` on beside tensorstore's default (which fsyncs), W1 and W2.

``python -m benchmarks.durable [--quick] [--repeats N]`` writes each array afresh per repeat,
interleaving three writers: asyncarr's blocking facade over ``LocalStore(fsync=True)``,
tensorstore with its default context, and a Python floor with no Zarr library (each chunk
encoded with numcodecs on the calling thread and handed to as many writer threads as
asyncarr's local store has, each of which writes a temporary file, fsyncs it, renames it over
the key and fsyncs the directory: the same flushes, and as many in flight). It prints the
median of the per-repeat ratios to tensorstore.
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

import asyncarr.sync as za
from asyncarr.stores import LocalStore
from asyncarr.stores.local import _IO_THREADS

from .engines import ENGINES, ArraySpec
from .run import _specs

__all__ = ["main"]


def _write_durably(where: str, data: np.ndarray, spec: ArraySpec) -> None:
    """asyncarr's facade writing ``spec``'s array with every chunk and directory flushed to disk."""
    z = za.create_array(
        LocalStore(where, fsync=True),
        shape=spec.shape,
        chunks=spec.chunks,
        dtype=spec.dtype,
        compressors=[spec.numcodecs_blosc()],
        zarr_format=spec.zarr_format,
        overwrite=True,
    )
    z[...] = data


def _chunk_keys(spec: ArraySpec) -> list[tuple[str, tuple[slice, ...]]]:
    """Each chunk's key (v2 dotted, v3 under ``c/``) and its region of the array."""
    grid = [range(0, size, chunk) for size, chunk in zip(spec.shape, spec.chunks, strict=True)]
    separator, prefix = (".", "") if spec.zarr_format == 2 else ("/", "c/")
    return [
        (
            prefix + separator.join(str(o // c) for o, c in zip(origin, spec.chunks, strict=True)),
            tuple(slice(o, o + c) for o, c in zip(origin, spec.chunks, strict=True)),
        )
        for origin in itertools.product(*grid)
    ]


def _write_floor(where: str, data: np.ndarray, spec: ArraySpec) -> None:
    """The Python floor of a durable write: encode here, flush on writer threads, nothing else."""
    codec = spec.numcodecs_blosc()
    os.makedirs(where)

    def flush(key: str, body: bytes) -> None:
        path = os.path.join(where, key)
        directory = os.path.dirname(path)
        os.makedirs(directory, exist_ok=True)
        temporary = f"{path}.tmp"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, body)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
        directory_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(directory_fd)
        finally:
            os.close(directory_fd)

    with ThreadPoolExecutor(_IO_THREADS) as writers:
        pending = [
            writers.submit(flush, key, codec.encode(np.ascontiguousarray(data[region])))
            for key, region in _chunk_keys(spec)
        ]
        for future in pending:
            future.result()


def _timed(write: object, root: Path, label: str, data: np.ndarray, spec: ArraySpec) -> float:
    where = str(root / label)
    shutil.rmtree(where, ignore_errors=True)
    started = time.perf_counter()
    write(where, data, spec)  # type: ignore[operator]
    return time.perf_counter() - started


def main() -> None:
    """Run the durable-write comparison and print one line per array."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller arrays, v3 only")
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats per engine")
    arguments = parser.parse_args()
    tensorstore = ENGINES["tensorstore"]
    rng = np.random.default_rng(0)
    print("| task | asyncarr fsync s | tensorstore s | Python floor s | asyncarr / tensorstore | floor / tensorstore |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="asyncarr-durable-") as directory:
        root = Path(directory)
        for workload, specs in _specs(arguments.quick).items():
            for spec in specs:
                data = rng.integers(0, 1000, size=spec.shape).astype(spec.dtype)
                ours, theirs, floor = [], [], []
                for _ in range(arguments.repeats):
                    ours.append(_timed(_write_durably, root, "asyncarr", data, spec))
                    theirs.append(_timed(tensorstore.write, root, "tensorstore", data, spec))
                    floor.append(_timed(_write_floor, root, "floor", data, spec))
                ratio = statistics.median(a / b for a, b in zip(ours, theirs, strict=True))
                floor_ratio = statistics.median(a / b for a, b in zip(floor, theirs, strict=True))
                print(
                    f"| {workload} v{spec.zarr_format} write | {statistics.median(ours):.3f} | "
                    f"{statistics.median(theirs):.3f} | {statistics.median(floor):.3f} | {ratio:.2f} | "
                    f"{floor_ratio:.2f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
