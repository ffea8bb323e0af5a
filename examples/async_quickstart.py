"""Async quickstart: many concurrent reads from one event loop (async API)."""

import asyncio
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import asyncarr


async def main(root: Path) -> None:
    """Write an array, then serve 200 concurrent window reads from one event loop."""
    data = np.random.default_rng(0).standard_normal((2048, 2048)).astype("f4")
    z = await asyncarr.open_array(str(root / "field.zarr"), mode="w", shape=data.shape, chunks=(256, 256), dtype="f4")
    await z.setitem(..., data)

    windows = [(i * 7 % 1800, i * 13 % 1800) for i in range(200)]
    started = time.perf_counter()
    results = await asyncio.gather(*(z.getitem((slice(r, r + 200), slice(c, c + 200))) for r, c in windows))
    elapsed = time.perf_counter() - started
    for (r, c), window in zip(windows, results, strict=True):
        assert np.array_equal(window, data[r : r + 200, c : c + 200])
    print(f"{len(windows)} concurrent 200x200 window reads in {elapsed:.3f} s, all equal to the source")
    print(await z.info())


if __name__ == "__main__":
    if len(sys.argv) > 1:
        asyncio.run(main(Path(sys.argv[1])))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            asyncio.run(main(Path(tmp)))
