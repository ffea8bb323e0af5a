"""asyncarr's core works with its core dependencies alone (numpy, numcodecs, google-crc32c, tqdm):
the README's first command installs only those. Optional packages (the extras, and what the test
environment brings along, such as msgpack) are hidden from a child interpreter, which must still
import every core module, write and read an array, and run the command line."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

OPTIONAL = [
    "msgpack",
    "aiohttp",
    "aiobotocore",
    "botocore",
    "gcsfs",
    "azure",
    "xarray",
    "dask",
    "distributed",
    "zarr",
    "tensorstore",
    "zict",
    "fsspec",
    "zarrs",
    "obstore",
    "blosc2",
]

_CHILD = textwrap.dedent(
    """
    import importlib.abc, sys

    hidden = set(sys.argv[1].split(","))

    class Hide(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in hidden:
                raise ModuleNotFoundError(f"No module named {name!r} (hidden by the test)", name=name)
            return None

    sys.meta_path.insert(0, Hide())
    import numpy as np
    import asyncarr, asyncarr.sync as za, asyncarr.cli, asyncarr.copy  # noqa: F401
    z = za.create_array(sys.argv[2], shape=(6, 4), chunks=(3, 2), dtype="i4")
    z[...] = np.arange(24).reshape(6, 4)
    assert (za.open_array(sys.argv[2], mode="r")[...] == np.arange(24).reshape(6, 4)).all()
    from asyncarr.codecs.blosc_frames import fast_decoder_available
    assert not fast_decoder_available()  # small Blosc chunks then decode with numcodecs alone
    small = za.create_array(sys.argv[2] + "-blosc", shape=(64, 64), chunks=(8, 8), dtype="u2",
                            compressors=[za.codecs.BloscCodec(cname="zstd", clevel=1)])
    small[...] = np.arange(4096, dtype="u2").reshape(64, 64)
    assert (small[...] == np.arange(4096, dtype="u2").reshape(64, 64)).all()
    za.copy(sys.argv[2], sys.argv[2] + "-copy")
    assert asyncarr.cli.main(["info", sys.argv[2] + "-copy", "--json"]) in (0, None)
    print("core ok")
    """
)


def test_the_core_needs_none_of_the_optional_packages(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, ",".join(OPTIONAL), str(tmp_path / "a.zarr")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "core ok" in done.stdout
