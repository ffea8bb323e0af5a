"""Every code example of the five Zarr tutorials in seeds/ runs with ``asyncarr.sync`` in place of ``zarr``."""

from __future__ import annotations

import json
import lzma
import os
import subprocess
import sys
import textwrap
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numcodecs
import numpy as np
import pytest
import zarr
import zarr.storage
import zict
from numcodecs import LZMA, Blosc, Delta, Zlib

import asyncarr
import asyncarr.sync as za

# Lines of the tutorials that are not Zarr API get no test: np.savetxt / np.save / np.memmap
# (pure NumPy), `! stat` / `du -h` shell lines (the byte counts are checked from Python
# instead), and the Dask / Coiled cluster examples (da.from_zarr, coiled.Cluster, Client).
# The public S3 bucket example is reproduced on a local directory here; the S3 version
# belongs with the cloud stores.

DEFAULT_COMPRESSOR = Blosc(cname="lz4", clevel=5, shuffle=Blosc.SHUFFLE)


# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    """Run the tutorial's relative paths ('example.zarr', 'data/...') inside tmp_path."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def info_fields(array) -> dict[str, str]:
    """Parse the `z.info` table (``Key : value`` lines) into a dict."""
    fields = {}
    for line in str(array.info).splitlines():
        if ":" in line:
            key, value = line.split(":", 1)
            fields[key.strip()] = value.strip()
    return fields


def byte_text(n: int) -> str:
    """How the tutorials' info table prints a byte count: ``800000000 (762.9M)``, or ``21``."""
    if n <= 2**10:
        return str(n)
    for unit, power in (("K", 1), ("M", 2), ("G", 3), ("T", 4)):
        if n < 2 ** (10 * (power + 1)):
            return f"{n} ({n / 2 ** (10 * power):.1f}{unit})"
    return f"{n} ({n / 2**50:.1f}P)"


def chunk_files_v2(directory: Path) -> set[str]:
    """What `ls` shows in a v2 array directory: every file except the dot-files."""
    return {name for name in os.listdir(directory) if not name.startswith(".")}


def chunk_keys_v3(directory: Path) -> set[str]:
    """Every stored key of a v3 array except its zarr.json, relative to the array."""
    return {p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file() and p.name != "zarr.json"}


def stored_size(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


def read_json(path: Path) -> dict:
    return json.loads(path.read_text())


def tutorial_row_col_array(n: int) -> np.ndarray:
    """The array of 002/003 'Reading and writing data': 42 everywhere, arange in row 0 and column 0."""
    expected = np.full((n, n), 42, dtype="i4")
    expected[0, :] = np.arange(n)
    expected[:, 0] = np.arange(n)
    return expected


# --------------------------------------------------------------------------------------
# 000 "Why You Should Save NumPy Arrays with Zarr"
# --------------------------------------------------------------------------------------


def test_save_small_2d_array_and_load_returns_equal_ndarray(in_tmp):
    array_XS = np.random.default_rng(0).random((3, 2))
    za.save("array_XS.zarr", array_XS)
    loaded = za.load("array_XS.zarr")
    assert type(loaded) is np.ndarray
    np.testing.assert_array_equal(loaded, array_XS)
    # zarr-python reads the very same files identically
    np.testing.assert_array_equal(zarr.load("array_XS.zarr"), array_XS)


def test_save_several_arrays_makes_a_group_that_loads_as_a_dict_like_zarr_python(in_tmp):
    rng = np.random.default_rng(0)
    a, b = rng.random((3, 2)), np.arange(10)

    za.save("positional.zarr", a, b)
    zarr.save("positional_reference.zarr", a, b)
    reference = zarr.open_group("positional_reference.zarr", mode="r")
    loaded = za.load("positional.zarr")
    assert sorted(loaded) == sorted(reference.array_keys())  # zarr names them arr_0, arr_1
    for name in reference.array_keys():
        assert type(loaded[name]) is np.ndarray
        np.testing.assert_array_equal(loaded[name], reference[name][:])

    za.save("named.zarr", xs=a, steps=b)
    assert type(za.open("named.zarr", mode="r")) is za.Group
    loaded = za.load("named.zarr")
    assert sorted(loaded) == ["steps", "xs"]
    np.testing.assert_array_equal(loaded["xs"], a)
    np.testing.assert_array_equal(loaded["steps"], b)
    from_zarr_python = zarr.open_group("named.zarr", mode="r")
    np.testing.assert_array_equal(from_zarr_python["xs"][:], a)
    np.testing.assert_array_equal(from_zarr_python["steps"][:], b)


def test_save_large_random_3d_array_is_smaller_on_disk_with_default_compression(in_tmp):
    array_L = np.random.default_rng(1).random((100, 100, 10))
    za.save("array_L.zarr", array_L)
    # `du -h array_L.zarr` -> 693M for 800M of float64: the default Blosc saves ~15%
    assert stored_size(in_tmp / "array_L.zarr") < array_L.nbytes
    array_zarr = za.load("array_L.zarr")
    assert type(array_zarr) is np.ndarray
    np.testing.assert_array_equal(array_zarr, array_L)


# --------------------------------------------------------------------------------------
# 001 / 004 "Zarr - or: How to save NumPy arrays" (004 is the complete copy of 001)
# --------------------------------------------------------------------------------------

# (1000, 1000, 100) scaled to (100, 100, 100): chunks (100, 100, 1) still give 100 chunks.
SHAPE_3D = (100, 100, 100)
CHUNKS_PER_Z = (100, 100, 1)


@pytest.fixture
def array_3D():
    return np.random.default_rng(1).random(SHAPE_3D)


def test_convenience_save_and_load_roundtrip_3d_array(in_tmp, array_3D):
    za.save("zarr_out_3D_convenient.zarr", array_3D)
    zarr_in_3D_convenient = za.load("zarr_out_3D_convenient.zarr")
    assert type(zarr_in_3D_convenient) is np.ndarray
    np.testing.assert_array_equal(zarr_in_3D_convenient, array_3D)


def test_open_mode_w_writes_and_default_mode_a_reopens_without_overwriting(in_tmp, array_3D):
    zarr_out_3D = za.open("zarr_out_3D.zarr", mode="w", shape=array_3D.shape, chunks=CHUNKS_PER_Z, dtype=array_3D.dtype)
    zarr_out_3D[:] = array_3D

    zarr_in_3D = za.open("zarr_out_3D.zarr")
    assert type(zarr_in_3D) is za.Array
    assert type(zarr_in_3D[:]) is np.ndarray
    assert zarr_in_3D.shape == array_3D.shape
    assert zarr_in_3D.chunks == CHUNKS_PER_Z
    assert zarr_in_3D.dtype == array_3D.dtype
    np.testing.assert_array_equal(zarr_in_3D[:], array_3D)
    np.testing.assert_array_equal(zarr.open_array("zarr_out_3D.zarr", mode="r")[:], array_3D)


def test_slice_mean_matches_numpy_and_overwritten_slice_is_flushed_to_disk(in_tmp, array_3D):
    zarr_out_3D = za.open("zarr_out_3D.zarr", mode="w", shape=array_3D.shape, chunks=CHUNKS_PER_Z, dtype=array_3D.dtype)
    zarr_out_3D[:] = array_3D
    zarr_in_3D = za.open("zarr_out_3D.zarr")

    assert zarr_in_3D[:, :, 10].mean() == array_3D[:, :, 10].mean()
    zarr_in_3D[:, :, 10] = np.ones((SHAPE_3D[0], SHAPE_3D[1]))
    assert zarr_in_3D[:, :, 10].mean() == 1.0

    expected = array_3D.copy()
    expected[:, :, 10] = 1.0
    # no close needed: a fresh handle and zarr-python both see the new slice
    np.testing.assert_array_equal(za.open("zarr_out_3D.zarr", mode="r")[:], expected)
    np.testing.assert_array_equal(zarr.open_array("zarr_out_3D.zarr", mode="r")[:], expected)


def test_array_has_no_mean_method_but_numpy_functions_and_loaded_slices_work(in_tmp, array_3D):
    zarr_in_3D = za.open("zarr_out_3D.zarr", mode="w", shape=SHAPE_3D, chunks=CHUNKS_PER_Z, dtype=array_3D.dtype)
    zarr_in_3D[:] = array_3D

    with pytest.raises(AttributeError):
        zarr_in_3D.mean()
    assert zarr_in_3D[:].mean() == array_3D.mean()
    numpy_in_3d = zarr_in_3D[:]
    assert numpy_in_3d.mean() == array_3D.mean()
    assert np.mean(zarr_in_3D) == array_3D.mean()
    np.testing.assert_array_equal(np.asarray(zarr_in_3D), array_3D)


def test_info_table_reports_shape_chunks_bytes_and_100_of_100_chunks(in_tmp, array_3D):
    z = za.open("zarr_out_3D.zarr", mode="w", shape=SHAPE_3D, chunks=CHUNKS_PER_Z, dtype=array_3D.dtype)
    z[:] = array_3D
    info = info_fields(z)

    for field in ("Type", "Store type"):
        assert info[field]
    assert info["Data type"] == str(array_3D.dtype) == "float64"
    assert info["Shape"] == str(SHAPE_3D)
    assert info["Chunk shape"] == str(CHUNKS_PER_Z)
    assert info["Order"] == "C"
    assert info["Read-only"] == "False"
    assert info["Compressor"] == repr(DEFAULT_COMPRESSOR)
    assert z.nbytes == array_3D.nbytes
    assert info["No. bytes"] == byte_text(array_3D.nbytes) == "8000000 (7.6M)"
    assert z.nbytes_stored == zarr.open_array("zarr_out_3D.zarr", mode="r").nbytes_stored()
    assert info["No. bytes stored"] == byte_text(z.nbytes_stored)
    assert info["Storage ratio"] == f"{array_3D.nbytes / z.nbytes_stored:.1f}"
    assert z.nchunks_initialized == 100
    assert info["Chunks initialized"] == "100/100"


def test_v2_array_chunked_per_z_slice_stores_one_file_per_chunk_named_like_ls(in_tmp, array_3D):
    z = za.open("zarr_out_3D.zarr", mode="w", shape=SHAPE_3D, chunks=CHUNKS_PER_Z, dtype=array_3D.dtype, zarr_format=2)
    z[:] = array_3D
    listing = os.listdir("zarr_out_3D.zarr")
    assert ".zarray" in listing
    # `ls zarr_out_3D.zarr` -> 0.0.0 ... 0.0.99, and `ls | wc -l` -> 100
    assert chunk_files_v2(in_tmp / "zarr_out_3D.zarr") == {f"0.0.{k}" for k in range(100)}

    reference = zarr.create_array(
        store="reference.zarr", shape=SHAPE_3D, chunks=CHUNKS_PER_Z, dtype=array_3D.dtype, zarr_format=2
    )
    reference[:] = array_3D
    assert chunk_files_v2(in_tmp / "zarr_out_3D.zarr") == chunk_files_v2(in_tmp / "reference.zarr")
    np.testing.assert_array_equal(zarr.open_array("zarr_out_3D.zarr", mode="r")[:], array_3D)


def test_v3_array_chunked_per_z_slice_stores_one_chunk_key_per_z_slice(in_tmp, array_3D):
    z = za.open("zarr_out_3D.zarr", mode="w", shape=SHAPE_3D, chunks=CHUNKS_PER_Z, dtype=array_3D.dtype)
    z[:] = array_3D
    assert z.zarr_format == 3
    assert (in_tmp / "zarr_out_3D.zarr" / "zarr.json").is_file()
    assert chunk_keys_v3(in_tmp / "zarr_out_3D.zarr") == {f"c/0/0/{k}" for k in range(100)}

    reference = zarr.create_array(store="reference.zarr", shape=SHAPE_3D, chunks=CHUNKS_PER_Z, dtype=array_3D.dtype)
    reference[:] = array_3D
    assert chunk_keys_v3(in_tmp / "zarr_out_3D.zarr") == chunk_keys_v3(in_tmp / "reference.zarr")


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_one_big_chunk_holds_the_entire_array(in_tmp, array_3D, zarr_format):
    zarr_out_3D_one_chunk = za.open(
        "zarr_out_3D_one_big_chunk.zarr",
        mode="w",
        shape=array_3D.shape,
        chunks=SHAPE_3D,
        dtype=array_3D.dtype,
        zarr_format=zarr_format,
    )
    zarr_out_3D_one_chunk[:] = array_3D
    root = in_tmp / "zarr_out_3D_one_big_chunk.zarr"
    if zarr_format == 2:
        assert chunk_files_v2(root) == {"0.0.0"}
    else:
        assert chunk_keys_v3(root) == {"c/0/0/0"}
    assert zarr_out_3D_one_chunk.nchunks_initialized == 1
    np.testing.assert_array_equal(zarr.open_array(str(root), mode="r")[:], array_3D)


def test_blosc_zstd_bitshuffle_compressor_is_reported_by_info_and_roundtrips(in_tmp, array_3D):
    compressor = Blosc(cname="zstd", clevel=5, shuffle=Blosc.BITSHUFFLE)
    zarr_out_3D = za.open(
        "zarr_out_3D_compressed.zarr",
        mode="w",
        shape=array_3D.shape,
        chunks=CHUNKS_PER_Z,
        dtype=array_3D.dtype,
        compressor=compressor,
    )
    zarr_out_3D[:] = array_3D
    info = info_fields(zarr_out_3D)
    assert info["Compressor"] == repr(compressor) == "Blosc(cname='zstd', clevel=5, shuffle=BITSHUFFLE, blocksize=0)"
    assert info["Chunks initialized"] == "100/100"
    assert zarr_out_3D.compressor == compressor
    np.testing.assert_array_equal(za.open("zarr_out_3D_compressed.zarr", mode="r")[:], array_3D)
    np.testing.assert_array_equal(zarr.open_array("zarr_out_3D_compressed.zarr", mode="r")[:], array_3D)


def test_small_integers_compress_far_better_than_random_floats(in_tmp, array_3D):
    array_3D_int = np.random.default_rng(1).integers(low=1, high=10, size=SHAPE_3D, dtype="int64")
    compressor = Blosc(cname="zstd", clevel=5, shuffle=Blosc.BITSHUFFLE)
    ratios = {}
    for name, data in (("float", array_3D), ("int", array_3D_int)):
        z = za.open(
            f"zarr_out_3D_compressed_{name}.zarr",
            mode="w",
            shape=data.shape,
            chunks=CHUNKS_PER_Z,
            dtype=data.dtype,
            compressor=compressor,
        )
        z[:] = data
        info = info_fields(z)
        assert info["Data type"] == str(data.dtype)
        assert info["No. bytes"] == byte_text(data.nbytes)
        assert info["Storage ratio"] == f"{data.nbytes / z.nbytes_stored:.1f}"
        ratios[name] = data.nbytes / z.nbytes_stored
        np.testing.assert_array_equal(z[:], data)
    # the tutorial: Storage ratio 16.3 for the integers against 1.2 for the floats
    assert ratios["int"] > 5 * ratios["float"]


def _build_tutorial_hierarchy(array_3D: np.ndarray, array_2D: np.ndarray):
    zarr_out_root = za.open("zarr_out_3D.zarr", mode="w")
    zarr_out_root.create_dataset("array_3D", data=array_3D)
    zarr_out_root.create_dataset("array_2D", data=array_2D)
    zarr_out_root.create_group("group_1")
    zarr_out_root["group_1"].create_dataset("array_1D_1", data=np.arange(1000))
    zarr_out_root.create_dataset("group_2/array_1D_2", data=np.arange(100))
    zarr_out_root.create_dataset("group_2/array_1D_3", data=np.arange(10))
    return zarr_out_root


def test_groups_hold_arrays_and_tree_renders_the_tutorial_hierarchy(in_tmp):
    rng = np.random.default_rng(1)
    array_2D = rng.random((100, 100))
    array_3D = rng.random((100, 100, 10))

    zarr_out_root = za.open("zarr_out_3Ds.zarr", mode="w")
    zarr_out_3D = zarr_out_root.create_dataset("array_3D", data=array_3D)
    zarr_out_2D = zarr_out_root.create_dataset("array_2D", data=array_2D)
    assert type(zarr_out_root) is za.Group
    assert type(zarr_out_root["array_3D"]) is za.Array
    assert type(zarr_out_root["array_2D"]) is za.Array
    np.testing.assert_array_equal(zarr_out_3D[:], array_3D)
    np.testing.assert_array_equal(zarr_out_root["array_2D"][:], array_2D)
    np.testing.assert_array_equal(zarr_out_2D[:], array_2D)

    root = _build_tutorial_hierarchy(array_3D, array_2D)
    int_dtype = np.arange(10).dtype
    expected = textwrap.dedent(f"""\
        /
         ├── array_2D (100, 100) {array_2D.dtype}
         ├── array_3D (100, 100, 10) {array_3D.dtype}
         ├── group_1
         │   └── array_1D_1 (1000,) {int_dtype}
         └── group_2
             ├── array_1D_2 (100,) {int_dtype}
             └── array_1D_3 (10,) {int_dtype}""")
    rendered = "\n".join(line.rstrip() for line in str(root.tree()).strip("\n").splitlines())
    assert rendered == expected

    assert type(root["group_2"]) is za.Group  # created on the way by "group_2/array_1D_2"
    np.testing.assert_array_equal(
        zarr.open_group("zarr_out_3D.zarr", mode="r")["group_2/array_1D_2"][:], np.arange(100)
    )


def test_array_in_group_opens_by_group_key_and_by_full_path(in_tmp):
    rng = np.random.default_rng(1)
    _build_tutorial_hierarchy(rng.random((10, 10, 10)), rng.random((10, 10)))

    zarr_in_root = za.open("zarr_out_3D.zarr", mode="r")
    assert type(zarr_in_root) is za.Group
    zarr_in_group_1 = zarr_in_root["group_1/array_1D_1"]
    assert type(zarr_in_group_1) is za.Array
    np.testing.assert_array_equal(zarr_in_group_1[:], np.arange(1000))

    zarr_in_group_1 = za.open("zarr_out_3D.zarr/group_1/array_1D_1", mode="r")
    assert type(zarr_in_group_1) is za.Array
    assert zarr_in_group_1.shape == (1000,)
    np.testing.assert_array_equal(zarr_in_group_1[:], np.arange(1000))


ROOT_ATTRS = {
    "author": "Pixel Tracker",
    "date": "Oct 13, 2022",
    "description": "A Zarr file containing some NumPy arrays",
}


def _assign_tutorial_attributes(zarr_out_root) -> None:
    zarr_out_root.attrs["author"] = "Pixel Tracker"
    zarr_out_root.attrs["date"] = "Oct 13, 2022"
    zarr_out_root.attrs["description"] = "A Zarr file containing some NumPy arrays"
    zarr_out_root["group_1"].attrs["description"] = "A test sub-group"
    zarr_out_root["group_1/array_1D_1"].attrs["description"] = "A test array"


def test_attributes_on_root_group_and_array_are_listed_and_stored_in_zarr_json(in_tmp):
    rng = np.random.default_rng(1)
    zarr_out_root = _build_tutorial_hierarchy(rng.random((10, 10, 10)), rng.random((10, 10)))
    _assign_tutorial_attributes(zarr_out_root)

    printed = [f"{key}: {zarr_out_root.attrs[key]}" for key in zarr_out_root.attrs.keys()]
    assert printed == [f"{key}: {value}" for key, value in ROOT_ATTRS.items()]
    assert zarr_out_root["group_1"].attrs["description"] == "A test sub-group"
    assert zarr_out_root["group_1/array_1D_1"].attrs["description"] == "A test array"

    base = in_tmp / "zarr_out_3D.zarr"
    assert read_json(base / "zarr.json")["attributes"] == ROOT_ATTRS
    assert read_json(base / "group_1" / "zarr.json")["attributes"] == {"description": "A test sub-group"}
    assert read_json(base / "group_1" / "array_1D_1" / "zarr.json")["attributes"] == {"description": "A test array"}
    reopened = za.open("zarr_out_3D.zarr", mode="r")
    assert dict(reopened.attrs) == ROOT_ATTRS
    assert zarr.open_group("zarr_out_3D.zarr", mode="r").attrs.asdict() == ROOT_ATTRS


def test_v2_hierarchy_writes_the_tutorials_zattrs_and_zarray_json(in_tmp):
    rng = np.random.default_rng(1)
    array_3D = rng.random((100, 100, 10))
    with asyncarr.config.set(default_zarr_format=2):
        zarr_out_root = _build_tutorial_hierarchy(array_3D, rng.random((100, 100)))
        _assign_tutorial_attributes(zarr_out_root)

    base = in_tmp / "zarr_out_3D.zarr"
    # cat zarr_out_3D.zarr/.zattrs
    assert read_json(base / ".zattrs") == ROOT_ATTRS
    assert read_json(base / "group_1" / ".zattrs") == {"description": "A test sub-group"}
    assert read_json(base / "group_1" / "array_1D_1" / ".zattrs") == {"description": "A test array"}

    # cat zarr_out_3D.zarr/array_3D/.zarray; chunks are zarr's automatic guess for the shape
    guess = zarr.create_array(store=zarr.storage.MemoryStore(), shape=array_3D.shape, dtype="f8", zarr_format=2)
    zarray = read_json(base / "array_3D" / ".zarray")
    tutorial_fields = {
        "chunks": list(guess.chunks),
        "compressor": {"blocksize": 0, "clevel": 5, "cname": "lz4", "id": "blosc", "shuffle": 1},
        "dtype": "<f8",
        "fill_value": 0.0,
        "filters": None,
        "order": "C",
        "shape": list(array_3D.shape),
        "zarr_format": 2,
    }
    assert {key: zarray.get(key) for key in tutorial_fields} == tutorial_fields
    np.testing.assert_array_equal(zarr.open_array(str(base / "array_3D"), mode="r")[:], array_3D)


def test_automatic_chunks_of_the_tutorials_3d_float_array_are_125_125_13(in_tmp):
    # the tutorial's (1000, 1000, 100) float64 array; nothing is written, so full size is cheap
    z = za.create(shape=(1000, 1000, 100), dtype="f8", zarr_format=2, store="auto_chunks.zarr")
    reference = zarr.create_array(store=zarr.storage.MemoryStore(), shape=(1000, 1000, 100), dtype="f8", zarr_format=2)
    assert z.chunks == reference.chunks == (125, 125, 13)
    zarray = read_json(in_tmp / "auto_chunks.zarr" / ".zarray")
    assert zarray["chunks"] == [125, 125, 13]
    assert zarray["shape"] == [1000, 1000, 100]
    assert zarray["compressor"] == DEFAULT_COMPRESSOR.get_config()
    assert z.nchunks_initialized == 0


HELLO = b"Hello from the cloud!"


@pytest.fixture
def cloud_like_store(tmp_path):
    """The public 'zarr-demo/store' group (foo/bar/baz, |S1, 21 chunked by 7), written by zarr-python."""
    path = str(tmp_path / "zarr-demo-store")
    group = zarr.open_group(path, mode="w", zarr_format=2)
    baz = group.create_array(
        "foo/bar/baz", shape=(21,), chunks=(7,), dtype="|S1", compressors=Blosc(cname="lz4", clevel=5, shuffle=1)
    )
    baz[:] = np.frombuffer(HELLO, dtype="S1")
    return path


def test_group_on_existing_v2_store_reads_hello_from_the_cloud(cloud_like_store, capsys):
    zarr_root = za.group(store=cloud_like_store)
    z_array = zarr_root["foo/bar/baz"]
    print(z_array)
    shown = capsys.readouterr().out
    assert "foo/bar/baz" in shown
    assert "(21,)" in shown

    info = info_fields(z_array)
    assert info["Name"] == "/foo/bar/baz"
    assert info["Data type"] == str(np.dtype("S1")) == "|S1"
    assert info["Shape"] == "(21,)"
    assert info["Chunk shape"] == "(7,)"
    assert info["Order"] == "C"
    assert info["Read-only"] == "False"
    assert info["Compressor"] == repr(DEFAULT_COMPRESSOR)
    assert info["No. bytes"] == "21"
    reference = zarr.open_array(cloud_like_store, path="foo/bar/baz", mode="r")
    assert z_array.nbytes_stored == reference.nbytes_stored()
    assert info["No. bytes stored"] == byte_text(reference.nbytes_stored())
    assert info["Storage ratio"] == f"{21 / reference.nbytes_stored():.1f}"
    assert info["Chunks initialized"] == "3/3"
    assert z_array[:].tobytes() == HELLO


def test_group_opened_read_only_reads_hello_from_the_cloud(cloud_like_store):
    zarr_root = za.open_group(cloud_like_store, mode="r")
    z_array = zarr_root["foo/bar/baz"]
    assert z_array.name == "/foo/bar/baz"
    assert z_array.dtype == np.dtype("S1")
    assert info_fields(z_array)["Read-only"] == "True"
    assert z_array[:].tobytes() == HELLO


# --------------------------------------------------------------------------------------
# 002 Zarr tutorial (zarr 2.0 era): creating, reading/writing, persistence, resize, ...
# --------------------------------------------------------------------------------------


def test_zeros_creates_an_array_with_no_chunk_initialized(capsys):
    # nothing is written, so the tutorial's full (10000, 10000) shape costs nothing
    z = za.zeros((10000, 10000), chunks=(1000, 1000), dtype="i4")
    print(z)
    assert "(10000, 10000)" in capsys.readouterr().out
    assert type(z) is za.Array
    assert z.shape == (10000, 10000)
    assert z.chunks == (1000, 1000)
    assert z.dtype == np.dtype("i4")
    assert z.nbytes == 10000 * 10000 * 4
    assert z.nchunks_initialized == 0
    info = info_fields(z)
    assert info["No. bytes"] == byte_text(400_000_000) == "400000000 (381.5M)"
    assert info["Chunks initialized"] == "0/100"
    assert z[-1, -1] == 0


def test_scalar_fill_row_and_column_writes_read_back_like_numpy():
    # (10000, 10000) chunked (1000, 1000) scaled to (1000, 1000) chunked (100, 100): still 100 chunks
    z = za.zeros((1000, 1000), chunks=(100, 100), dtype="i4")
    z[:] = 42
    assert z.nchunks_initialized == 100
    assert info_fields(z)["Chunks initialized"] == "100/100"
    z[0, :] = np.arange(1000)
    z[:, 0] = np.arange(1000)

    expected = tutorial_row_col_array(1000)
    assert z[0, 0] == expected[0, 0] == 0
    assert z[-1, -1] == expected[-1, -1] == 42
    np.testing.assert_array_equal(z[0, :], expected[0, :])
    np.testing.assert_array_equal(z[:, 0], expected[:, 0])
    result = z[:]
    assert result.dtype == np.dtype("i4")
    np.testing.assert_array_equal(result, expected)
    assert repr(z)  # `>>> z` shows the array


@pytest.mark.parametrize("path", ["example.zarr", "data/example.zarr"])
def test_persistent_array_reopened_read_only_holds_the_same_data(in_tmp, path):
    z1 = za.open(path, mode="w", shape=(1000, 1000), chunks=(100, 100), dtype="i4", fill_value=0)
    assert z1.nchunks_initialized == 0
    z1[:] = 42
    z1[0, :] = np.arange(1000)
    z1[:, 0] = np.arange(1000)

    z2 = za.open(path, mode="r")
    assert type(z2) is za.Array
    assert np.all(z1[:] == z2[:])
    assert z2.nchunks_initialized == 100
    np.testing.assert_array_equal(z2[:], tutorial_row_col_array(1000))
    np.testing.assert_array_equal(zarr.open_array(path, mode="r")[:], tutorial_row_col_array(1000))
    assert z2.read_only
    with pytest.raises(asyncarr.errors.ReadOnlyError):
        z2[0, 0] = 1


def test_resize_grows_with_fill_value_and_shrinking_deletes_chunks_outside(in_tmp):
    z = za.zeros(shape=(1000, 1000), chunks=(100, 100), store="resized.zarr")
    reference = zarr.zeros(shape=(1000, 1000), chunks=(100, 100), store="reference.zarr")
    assert z.dtype == reference.dtype == np.zeros(1).dtype
    z[:] = 42
    reference[:] = 42

    z.resize(2000, 1000)
    reference.resize((2000, 1000))
    assert z.shape == (2000, 1000)
    assert info_fields(z)["Chunks initialized"] == "100/200"
    np.testing.assert_array_equal(z[:], reference[:])

    z.resize((550, 1000))
    reference.resize((550, 1000))
    assert z.shape == (550, 1000)
    # chunk rows 6..9 lie wholly outside: deleted; chunk row 5 is partly inside: kept
    assert chunk_keys_v3(in_tmp / "resized.zarr") == {f"c/{i}/{j}" for i in range(6) for j in range(10)}
    assert chunk_keys_v3(in_tmp / "resized.zarr") == chunk_keys_v3(in_tmp / "reference.zarr")
    assert z.nchunks_initialized == 60
    np.testing.assert_array_equal(z[:], np.full((550, 1000), 42.0))
    np.testing.assert_array_equal(zarr.open_array("resized.zarr", mode="r")[:], np.full((550, 1000), 42.0))


def test_append_along_axis_0_then_axis_1_matches_numpy_concatenate():
    a = np.arange(100000, dtype="i4").reshape(1000, 100)
    z = za.array(a, chunks=(100, 10))
    assert z.shape == (1000, 100)
    assert z.nchunks_initialized == 100

    assert tuple(z.append(a)) == (2000, 100)
    assert z.shape == (2000, 100)
    assert info_fields(z)["Chunks initialized"] == "200/200"

    assert tuple(z.append(np.vstack([a, a]), axis=1)) == (2000, 200)
    assert z.shape == (2000, 200)
    assert info_fields(z)["Chunks initialized"] == "400/400"
    expected = np.concatenate([np.concatenate([a, a], axis=0), np.vstack([a, a])], axis=1)
    np.testing.assert_array_equal(z[:], expected)


ARANGE_2D = np.arange(1_000_000, dtype="i4").reshape(1000, 1000)

LZMA_FILTERS = [dict(id=lzma.FILTER_DELTA, dist=4), dict(id=lzma.FILTER_LZMA2, preset=1)]


@pytest.mark.parametrize(
    ("compression", "compression_opts", "expected_codec", "reference_decompress"),
    [
        (
            "blosc",
            dict(cname="lz4", clevel=3, shuffle=2),
            Blosc(cname="lz4", clevel=3, shuffle=Blosc.BITSHUFFLE),
            Blosc().decode,  # a Blosc frame describes itself
        ),
        ("zlib", 1, Zlib(level=1), zlib.decompress),
        # an .xz stream names its own filter chain; numcodecs' LZMA(filters=...) cannot decode
        # it (Python rejects filters= outside FORMAT_RAW), so the standard library is the reference
        ("lzma", dict(filters=LZMA_FILTERS), LZMA(filters=LZMA_FILTERS), lzma.decompress),
    ],
    ids=["blosc-lz4-bitshuffle", "zlib-1", "lzma-delta-filters"],
)
def test_compression_and_compression_opts_select_the_compressor(
    in_tmp, compression, compression_opts, expected_codec, reference_decompress
):
    # on disk (v2) the .zarray names exactly that codec, and its chunks decompress to the data
    za.array(
        ARANGE_2D,
        chunks=(100, 100),
        compression=compression,
        compression_opts=compression_opts,
        store="compressed.zarr",
        zarr_format=2,
    )
    assert read_json(in_tmp / "compressed.zarr" / ".zarray")["compressor"] == expected_codec.get_config()
    for i, j in [(0, 0), (3, 7), (9, 9)]:
        raw = (in_tmp / "compressed.zarr" / f"{i}.{j}").read_bytes()
        chunk = np.frombuffer(bytes(reference_decompress(raw)), dtype="i4").reshape(100, 100)
        np.testing.assert_array_equal(chunk, ARANGE_2D[i * 100 : (i + 1) * 100, j * 100 : (j + 1) * 100])

    z = za.array(ARANGE_2D, chunks=(100, 100), compression=compression, compression_opts=compression_opts)
    assert z.compressor == expected_codec
    assert info_fields(z)["Compressor"] == repr(expected_codec)
    assert z.nchunks_initialized == 100
    np.testing.assert_array_equal(z[:], ARANGE_2D)


def test_thread_synchronizer_array_starts_empty():
    z = za.zeros((10000, 10000), chunks=(1000, 1000), dtype="i4", synchronizer=za.ThreadSynchronizer())
    assert type(z) is za.Array
    assert z.nchunks_initialized == 0
    assert info_fields(z)["Chunks initialized"] == "0/100"


def test_threads_writing_regions_that_share_chunks_lose_no_updates():
    # the tutorial's 60-element array in chunks of 20, written one element per task
    z = za.zeros(60, chunks=20, dtype="i4", synchronizer=za.ThreadSynchronizer())
    order = np.random.default_rng(2).permutation(60)

    def write_one(i: int) -> None:
        z[int(i)] = int(i) + 1

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(write_one, order))
    np.testing.assert_array_equal(z[:], np.arange(1, 61, dtype="i4"))

    # row bands not aligned to chunks; the second batch overlaps the first with the same values
    big = za.zeros((1000, 1000), chunks=(100, 100), dtype="i4", synchronizer=za.ThreadSynchronizer())
    expected = ARANGE_2D
    bands = [(start, min(start + 30, 1000)) for start in range(0, 1000, 30)]
    bands += [(start, min(start + 45, 1000)) for start in range(15, 1000, 45)]

    def write_band(band: tuple[int, int]) -> None:
        start, stop = band
        big[start:stop, :] = expected[start:stop, :]

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(write_band, bands))
    np.testing.assert_array_equal(big[:], expected)


def test_process_synchronizer_array_opened_with_mode_w_starts_empty(in_tmp):
    synchronizer = za.ProcessSynchronizer("example.zarr")
    z = za.open(
        "example.zarr", mode="w", shape=(10000, 10000), chunks=(1000, 1000), dtype="i4", synchronizer=synchronizer
    )
    assert type(z) is za.Array
    assert z.shape == (10000, 10000)
    assert z.nchunks_initialized == 0
    assert info_fields(z)["Chunks initialized"] == "0/100"
    z[0, :5] = np.arange(5)
    np.testing.assert_array_equal(za.open("example.zarr", mode="r")[0, :6], [0, 1, 2, 3, 4, 0])


_PROCESS_WRITER = """
import pathlib, sys, time
import asyncarr.sync as za

worker, nworkers = int(sys.argv[1]), int(sys.argv[2])
synchronizer = za.ProcessSynchronizer("example.zarr")
z = za.open("example.zarr", mode="r+", synchronizer=synchronizer)
pathlib.Path(f"ready-{worker}").touch()
while not pathlib.Path("go").exists():
    time.sleep(0.005)
for i in range(worker, z.shape[0], nworkers):
    z[i] = i + 1
"""


def test_processes_writing_interleaved_elements_lose_no_updates(in_tmp):
    za.open(
        "example.zarr",
        mode="w",
        shape=(600,),
        chunks=(200,),
        dtype="i4",
        synchronizer=za.ProcessSynchronizer("example.zarr"),
    )
    nworkers = 2
    workers = [
        subprocess.Popen([sys.executable, "-c", _PROCESS_WRITER, str(k), str(nworkers)], cwd=in_tmp)
        for k in range(nworkers)
    ]
    try:
        deadline = time.monotonic() + 60
        while not all((in_tmp / f"ready-{k}").exists() for k in range(nworkers)):
            assert time.monotonic() < deadline, "writer processes did not start"
            assert all(w.poll() is None for w in workers), "a writer process died"
            time.sleep(0.01)
        (in_tmp / "go").touch()  # both start writing into the same chunks at once
        assert [w.wait(timeout=60) for w in workers] == [0] * nworkers
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
    np.testing.assert_array_equal(za.open("example.zarr", mode="r")[:], np.arange(1, 601, dtype="i4"))


def test_user_attributes_behave_like_a_mapping_and_are_written_through():
    store = {}
    z = za.zeros((10000, 10000), chunks=(1000, 1000), dtype="i4", store=store)
    z.attrs["foo"] = "bar"
    z.attrs["baz"] = 42
    assert sorted(z.attrs) == ["baz", "foo"]
    assert "foo" in z.attrs
    assert z.attrs["foo"] == "bar"
    assert z.attrs["baz"] == 42
    reopened = za.open(store, mode="r")
    assert dict(reopened.attrs) == {"foo": "bar", "baz": 42}


def test_empty_like_then_assigning_an_array_copies_it():
    z1 = za.empty((1000, 1000), chunks=(100, 100), dtype="i4")
    z1[:] = 42
    z2 = za.empty_like(z1)
    assert (z2.shape, z2.chunks, z2.dtype) == (z1.shape, z1.chunks, z1.dtype)
    z2[:] = z1
    np.testing.assert_array_equal(z2[:], np.full((1000, 1000), 42, dtype="i4"))
    assert z2.nchunks_initialized == 100


def test_fortran_order_array_reads_back_like_the_c_order_one(in_tmp):
    a = ARANGE_2D.T
    c_order = za.array(a, chunks=(100, 100))
    f_order = za.array(a, chunks=(100, 100), order="F")
    assert c_order.order == "C"
    assert f_order.order == "F"
    assert info_fields(f_order)["Order"] == "F"
    np.testing.assert_array_equal(c_order[:], a)
    np.testing.assert_array_equal(f_order[:], a)

    on_disk = za.array(a, chunks=(100, 100), order="F", store="f_order.zarr", zarr_format=2)
    assert on_disk.order == "F"
    assert read_json(in_tmp / "f_order.zarr" / ".zarray")["order"] == "F"
    np.testing.assert_array_equal(zarr.open_array("f_order.zarr", mode="r")[:], a)


def test_zict_zip_mapping_stores_an_array_that_reopens_with_array_constructor(in_tmp):
    store = zict.Zip("example.zip", mode="w")
    z = za.zeros((1000, 1000), chunks=(100, 100), dtype="i4", compression="zlib", compression_opts=1, store=store)
    assert z.nchunks_initialized == 0
    assert info_fields(z)["Chunks initialized"] == "0/100"
    z[:] = 42
    store.flush()  # only required for zict.Zip
    assert os.path.getsize("example.zip") > 0

    store = zict.Zip("example.zip", mode="r")
    z = za.Array(store)
    assert type(z) is za.Array
    assert (z.shape, z.chunks, z.dtype) == ((1000, 1000), (100, 100), np.dtype("i4"))
    assert z.compressor == Zlib(level=1)
    assert z.nchunks_initialized == 100
    np.testing.assert_array_equal(z[:], np.full((1000, 1000), 42, dtype="i4"))
    store.close()
    reference = zarr.open_array(zarr.storage.ZipStore("example.zip", mode="r"), mode="r")
    np.testing.assert_array_equal(reference[:], np.full((1000, 1000), 42, dtype="i4"))


def test_plain_dict_is_a_store():
    store = {}
    z = za.zeros((1000, 1000), chunks=(100, 100), dtype="i4", store=store)
    z[:] = 42
    assert len(store) > 100  # metadata + 100 chunk keys
    np.testing.assert_array_equal(za.open(store, mode="r")[:], np.full((1000, 1000), 42, dtype="i4"))


def test_none_in_chunks_means_the_full_extent_of_that_dimension():
    z1 = za.zeros((10000, 10000), chunks=(100, None), dtype="i4")
    assert z1.chunks == (100, 10000)
    z2 = za.zeros((10000, 10000), chunks=(None, 100), dtype="i4")
    assert z2.chunks == (10000, 100)
    z3 = za.zeros((10000, 10000), chunks=(1000, 1000), dtype="i4")
    assert z3.chunks == (1000, 1000)


def test_blosc_thread_settings_keep_reads_and_writes_correct():
    from asyncarr.sync import blosc

    saved_nthreads = numcodecs.blosc.get_nthreads()
    saved_use_threads = numcodecs.blosc.use_threads
    try:
        blosc.set_nthreads(2)
        for use_threads in (True, False, None):
            blosc.use_threads = use_threads
            assert blosc.use_threads is use_threads
            z = za.array(ARANGE_2D, chunks=(100, 100), compressor=Blosc())
            np.testing.assert_array_equal(z[:], ARANGE_2D)
            z[:, 0] = -1
            expected = ARANGE_2D.copy()
            expected[:, 0] = -1
            np.testing.assert_array_equal(z[:], expected)
    finally:
        numcodecs.blosc.set_nthreads(saved_nthreads)
        numcodecs.blosc.use_threads = saved_use_threads
        blosc.use_threads = saved_use_threads


# --------------------------------------------------------------------------------------
# 003 "Why Use Zarr?" (the mmap examples are NumPy only)
# --------------------------------------------------------------------------------------


def test_open_mode_a_gives_an_array_whose_slices_are_ndarrays(in_tmp):
    z = za.open("example.zarr", mode="a", shape=(1024, 1024), chunks=(512, 512), dtype=np.int16)
    assert type(z) is za.Array
    assert type(z[100:200]) is np.ndarray
    assert z[100:200].shape == (100, 1024)
    assert z[100:200].dtype == np.int16
    # mode 'a' on the existing array opens it instead of recreating it
    z[0, 0] = 7
    again = za.open("example.zarr", mode="a", shape=(1024, 1024), chunks=(512, 512), dtype=np.int16)
    assert again[0, 0] == 7


def test_print_array_after_zeros_and_writes():
    z = za.zeros((1000, 1000), chunks=(100, 100), dtype="i4")
    print(z)
    z[:] = 42
    z[0, :] = np.arange(1000)
    z[:, 0] = np.arange(1000)
    print(z[0, 0], z[-1, -1], z[0, :], z[:, 0], z[:])
    np.testing.assert_array_equal(z[:], tutorial_row_col_array(1000))


def test_compressor_keyword_is_reported_back_by_the_compressor_property(capsys):
    compressor = Blosc(cname="zstd", clevel=3, shuffle=Blosc.BITSHUFFLE)
    data = ARANGE_2D
    z = za.array(data, chunks=(100, 100), compressor=compressor)
    print(z.compressor)
    assert capsys.readouterr().out.strip() == repr(compressor)
    assert z.compressor == compressor
    np.testing.assert_array_equal(z[:], data)


def test_delta_filter_with_blosc_is_shown_by_info_and_readable_by_zarr_python(in_tmp):
    filters = [Delta(dtype="i4")]
    compressor = Blosc(cname="zstd", clevel=1, shuffle=Blosc.SHUFFLE)
    data = ARANGE_2D
    z = za.array(data, chunks=(100, 100), filters=filters, compressor=compressor, store="delta.zarr")
    print(z.info)
    info = info_fields(z)
    filter_lines = [value for key, value in info.items() if key.startswith("Filter")]
    assert any(repr(Delta(dtype="i4")) in value for value in filter_lines)
    assert info["Compressor"] == repr(compressor)
    assert list(z.filters) == filters
    np.testing.assert_array_equal(z[:], data)
    np.testing.assert_array_equal(zarr.open_array("delta.zarr", mode="r")[:], data)


def test_nested_groups_hold_an_array_reachable_by_path(capsys):
    root = za.group()
    print(root)
    assert type(root) is za.Group
    foo = root.create_group("foo")
    bar = foo.create_group("bar")
    z1 = bar.zeros("baz", shape=(10000, 10000), chunks=(1000, 1000), dtype="i4")
    print(z1)
    assert "(10000, 10000)" in capsys.readouterr().out
    assert type(root["foo/bar"]) is za.Group
    assert z1.name == "/foo/bar/baz"
    assert z1.basename == "baz"
    baz = root["foo/bar/baz"]
    assert (baz.shape, baz.chunks, baz.dtype) == ((10000, 10000), (1000, 1000), np.dtype("i4"))
    assert baz[9999, 9999] == 0
