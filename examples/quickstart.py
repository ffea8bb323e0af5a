"""Quickstart: write, read, resize and inspect an array in a local directory store (sync API)."""

import sys
import tempfile
from pathlib import Path

import numpy as np

import asyncarr.sync as za


def main(root: Path) -> None:
    """Run the tutorial's basic steps on a directory under ``root``."""
    path = root / "example.zarr"
    z = za.open(str(path), mode="w", shape=(2000, 2000), chunks=(500, 500), dtype="i4")
    z[:] = 42
    z[0, :] = np.arange(2000)
    z[:, 0] = np.arange(2000)
    print(z)
    print(z.info)

    again = za.open(str(path), mode="r")
    assert np.array_equal(again[:], z[:]), "data read back differs from data written"
    print("corner values:", again[0, 0], again[-1, -1], "reversed row head:", again[0, ::-1][:5])

    z.resize(3000, 2000)
    z.append(np.ones((500, 2000), dtype="i4"))
    z.attrs["description"] = "quickstart array"
    print("after resize and append:", z.shape, "attrs:", dict(z.attrs))

    root_group = za.open_group(str(root / "hierarchy.zarr"), mode="w")
    root_group.create_dataset("group_1/array_1D_1", data=np.arange(1000))
    root_group.create_dataset("array_2D", data=np.random.default_rng(0).random((100, 100)))
    print(root_group.tree())


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(Path(tmp))
