"""Durable writes: asyncarr with ``fsync`` on beside tensorstore's default (which fsyncs), W1 and W2.

``python -m benchmarks.durable [--quick] [--repeats N]`` writes each array afresh per repeat,
interleaving the two engines (asyncarr's blocking facade over ``LocalStore(fsync=True)``, and
tensorstore with its default context), and prints the median of the per-repeat ratios.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

import asyncarr.sync as za
from asyncarr.stores import LocalStore

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
    print("| task | asyncarr fsync s | tensorstore s | asyncarr fsync / tensorstore |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="asyncarr-durable-") as directory:
        root = Path(directory)
        for workload, specs in _specs(arguments.quick).items():
            for spec in specs:
                data = rng.integers(0, 1000, size=spec.shape).astype(spec.dtype)
                ours, theirs = [], []
                for _ in range(arguments.repeats):
                    ours.append(_timed(_write_durably, root, "asyncarr", data, spec))
                    theirs.append(_timed(tensorstore.write, root, "tensorstore", data, spec))
                ratio = statistics.median(a / b for a, b in zip(ours, theirs, strict=True))
                print(
                    f"| {workload} v{spec.zarr_format} write | {statistics.median(ours):.3f} | "
                    f"{statistics.median(theirs):.3f} | {ratio:.2f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
