"""Issue 12, xarray: ``engine="asyncarr"`` and ``asyncarr.xarray.to_zarr``, checked against xarray's zarr engine.

The reference is always xarray reading with its own zarr engine (zarr-python): files written by
``ds.to_zarr`` are opened both ways and must be identical (values, dims, coordinates, attributes,
and the encodings a round trip relies on); files written by ``asyncarr.xarray.to_zarr`` must read
back through ``xr.open_zarr`` as what xarray itself would have written.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import pickle
import warnings
from pathlib import Path
from typing import Any

import dask.array as da
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from dask.delayed import Delayed
from emulators import azure, gcs, http, s3

import asyncarr.sync as za
from asyncarr import config
from asyncarr.errors import ContainsGroupError
from asyncarr.stores import LocalStore
from asyncarr.xarray import AsyncarrBackendEntrypoint, to_zarr

FORMATS = [2, 3]
# What a reader or a writer acts on: CF keys, the chunking, and the Zarr fill value.
ENCODINGS_THAT_MATTER = (
    "chunks",
    "preferred_chunks",
    "shards",
    "fill_value",
    "_FillValue",
    "dtype",
    "units",
    "calendar",
    "scale_factor",
    "add_offset",
    "coordinates",
)
METADATA_NAMES = ("zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata")


def make_dataset() -> xr.Dataset:
    """Datetime and string coordinates, NaNs, a real 0.0 in a coordinate, attributes and CF encodings."""
    temperature = np.arange(24, dtype="f8").reshape(6, 4) / 4
    temperature[1, 2] = np.nan
    dataset = xr.Dataset(
        {
            "temp": (("time", "x"), temperature, {"long_name": "temperature", "units": "K"}),
            "counts": (("time",), np.arange(6, dtype="i4"), {"note": "starts at a real 0"}),
            "flag": ((), np.float32(2.5)),
        },
        coords={
            "time": pd.date_range("2000-01-01", periods=6, freq="D"),
            "x": np.array([0.0, 1.5, np.nan, 4.5]),
            "station": ("x", np.array(["a", "bb", "ccc", "d"])),
        },
        attrs={"title": "test", "levels": np.array([1, 2, 3])},
    )
    dataset["temp"].encoding = {"scale_factor": 0.25, "add_offset": 10.0, "dtype": "i2", "_FillValue": -999}
    dataset["temp"].encoding["chunks"] = (2, 2)
    dataset["time"].encoding = {"units": "days since 1999-12-31", "calendar": "proleptic_gregorian"}
    dataset["counts"].encoding = {"chunks": (3,)}
    return dataset


def make_dataset_of_other_types() -> xr.Dataset:
    """Variable-length strings, bytes, booleans, timedeltas, complex, small ints and float32 with a NaN."""
    return xr.Dataset(
        {
            "names": ("n", np.array(["alpha", "b", "", "delta"], dtype=object)),
            "flags": ("n", np.array([True, False, True, False])),
            "durations": ("n", pd.to_timedelta([1, 2, 3, 4], unit="h")),
            "raw": ("n", np.array([b"x", b"yy", b"z", b""])),
            "small": ("n", np.array([1, 2, 3, 4], dtype="u1")),
            "complex": ("n", np.array([1 + 2j, 0, 3, 4j])),
            "single": ("n", np.array([0.0, np.nan, 1, 2], dtype="f4")),
        },
        coords={"n": [10, 20, 30, 40]},
    )


def write_with_xarray(dataset: xr.Dataset, path: Path, zarr_format: int, consolidated: bool, **kwargs: Any) -> Path:
    """``dataset.to_zarr`` through zarr-python, without zarr's notices about v3 extensions."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*(does not have a Zarr V3 specification|Consolidated metadata).*")
        dataset.to_zarr(path, mode="w", zarr_format=zarr_format, consolidated=consolidated, **kwargs)
    return path


def same_value(a: Any, b: Any) -> bool:
    """Equality where NaN equals NaN and a tuple of numbers equals the same tuple."""
    if isinstance(a, float | np.floating) and isinstance(b, float | np.floating) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, np.dtype) or isinstance(b, np.dtype):
        return np.dtype(a) == np.dtype(b)
    return bool(a == b) if not isinstance(a, dict | tuple | list) else a == b


def assert_same_encodings(expected: xr.Dataset, actual: xr.Dataset) -> None:
    for name in expected.variables:
        want, got = expected[name].encoding, actual[name].encoding
        for key in ENCODINGS_THAT_MATTER:
            assert (key in want) == (key in got), (name, key, want.get(key), got.get(key))
            if key in want:
                assert same_value(want[key], got[key]), (name, key, want[key], got[key])
                assert type(want[key]) is type(got[key]) or isinstance(want[key], np.dtype), (name, key)


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[int, bool], Path]:
    """The test dataset written by xarray: v2 and v3, consolidated and not."""
    root = tmp_path_factory.mktemp("xarray-written")
    return {
        (zarr_format, consolidated): write_with_xarray(
            make_dataset(), root / f"v{zarr_format}-{'c' if consolidated else 'u'}.zarr", zarr_format, consolidated
        )
        for zarr_format in FORMATS
        for consolidated in (True, False)
    }


class CountingStore(LocalStore):
    """A LocalStore that records every key read (thread-safe: list appends)."""

    def __init__(self, root: str | Path) -> None:
        super().__init__(root, read_only=True)
        self.read: list[str] = []

    async def get(self, key: str, byte_range: Any = None) -> bytes | None:
        self.read.append(key)
        return await super().get(key, byte_range)

    def get_sync(self, key: str, byte_range: Any = None) -> bytes | None:
        self.read.append(key)
        return super().get_sync(key, byte_range)

    async def get_many(self, requests: Any) -> list[bytes | None]:
        requests = list(requests)
        self.read.extend(key for key, _ in requests)
        return await super().get_many(requests)

    def data_keys(self) -> set[str]:
        return {key for key in self.read if key.rsplit("/", 1)[-1] not in METADATA_NAMES}


# -- reading ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("chunks", [None, {}], ids=["lazy", "dask"])
@pytest.mark.parametrize("consolidated", [True, False], ids=["consolidated", "unconsolidated"])
@pytest.mark.parametrize("zarr_format", FORMATS, ids=["v2", "v3"])
def test_open_dataset_is_identical_to_open_zarr(
    written: dict[tuple[int, bool], Path], zarr_format: int, consolidated: bool, chunks: dict | None
) -> None:
    path = written[zarr_format, consolidated]
    expected = xr.open_zarr(path, consolidated=consolidated, chunks=chunks)
    actual = xr.open_dataset(path, engine="asyncarr", consolidated=consolidated, chunks=chunks)
    xr.testing.assert_identical(expected, actual)
    assert_same_encodings(expected, actual)
    assert actual["x"].values[0] == 0.0 and np.isnan(actual["x"].values[2])  # a real 0.0 is not a fill value
    assert np.isnan(actual["temp"].values[1, 2])
    for name, variable in actual.variables.items():
        if chunks is None:
            assert variable.chunks is None
        elif name not in actual.indexes and variable.ndim:
            zarr_chunks = za.open_array(str(path), mode="r", path=str(name)).chunks
            assert variable.chunks == expected[name].chunks
            assert all(axis[0] == size for axis, size in zip(variable.chunks, zarr_chunks, strict=True))


@pytest.mark.parametrize("zarr_format", FORMATS, ids=["v2", "v3"])
def test_other_data_types_read_and_write_as_xarray_does(tmp_path: Path, zarr_format: int) -> None:
    reference = write_with_xarray(make_dataset_of_other_types(), tmp_path / "by-xarray.zarr", zarr_format, True)
    expected = xr.open_zarr(reference, chunks=None)
    actual = xr.open_dataset(reference, engine="asyncarr")
    xr.testing.assert_identical(expected, actual)
    assert actual["names"].dtype == object  # zarr-python gives NumPy's StringDType; the values are the same
    ours = tmp_path / "by-asyncarr.zarr"
    to_zarr(make_dataset_of_other_types(), ours, zarr_format=zarr_format)
    xr.testing.assert_identical(expected, xr.open_zarr(ours, chunks=None))
    xr.testing.assert_identical(make_dataset_of_other_types(), xr.open_dataset(ours, engine="asyncarr").compute())


def test_consolidated_true_needs_consolidated_metadata(written: dict[tuple[int, bool], Path]) -> None:
    with pytest.raises(FileNotFoundError, match="no consolidated metadata"):
        xr.open_dataset(written[3, False], engine="asyncarr", consolidated=True)
    xr.testing.assert_identical(
        xr.open_zarr(written[3, True], chunks=None),
        xr.open_dataset(written[3, True], engine="asyncarr", consolidated=True),
    )


@pytest.mark.filterwarnings("ignore:Failed to open Zarr store with consolidated metadata:RuntimeWarning")
@pytest.mark.parametrize("zarr_format", FORMATS, ids=["v2", "v3"])
def test_consolidated_false_reads_members_written_after_consolidation(tmp_path: Path, zarr_format: int) -> None:
    path = tmp_path / "stale.zarr"
    xr.Dataset({"a": ("x", np.arange(3))}).to_zarr(path, zarr_format=zarr_format, consolidated=True)
    xr.Dataset({"late": ("x", np.arange(3) * 2)}).to_zarr(path, mode="a", consolidated=False)
    for consolidated in (None, False):
        expected = xr.open_zarr(path, consolidated=consolidated, chunks=None)
        actual = xr.open_dataset(path, engine="asyncarr", consolidated=consolidated)
        xr.testing.assert_identical(expected, actual)
    assert "late" in xr.open_dataset(path, engine="asyncarr", consolidated=False)


@pytest.mark.parametrize("zarr_format", FORMATS, ids=["v2", "v3"])
def test_decoding_switches_match_open_zarr(written: dict[tuple[int, bool], Path], zarr_format: int) -> None:
    path = written[zarr_format, True]
    for options in [
        {"decode_times": False},
        {"mask_and_scale": False},
        {"drop_variables": ["counts"]},
        {"decode_coords": False},
    ]:
        expected = xr.open_zarr(path, consolidated=True, chunks=None, **options)
        actual = xr.open_dataset(path, engine="asyncarr", chunks=None, **options)
        xr.testing.assert_identical(expected, actual)


@pytest.mark.parametrize("zarr_format", FORMATS, ids=["v2", "v3"])
def test_opening_reads_metadata_only_and_a_selection_reads_its_chunks(
    written: dict[tuple[int, bool], Path], zarr_format: int
) -> None:
    store = CountingStore(written[zarr_format, False])
    # (Decoding times reads a time's first and last values to pick a dtype, with either engine.)
    dataset = xr.open_dataset(store, engine="asyncarr", create_default_indexes=False, decode_times=False)
    assert store.data_keys() == set()
    separator = "." if zarr_format == 2 else "/"
    prefix = "temp/" if zarr_format == 2 else "temp/c/"
    rows = dataset["temp"][0:2].values  # chunks are 2x2: row block 0, column blocks 0 and 1
    assert store.data_keys() == {f"{prefix}0{separator}0", f"{prefix}0{separator}1"}
    expected = xr.open_zarr(written[zarr_format, False], consolidated=False, chunks=None)
    np.testing.assert_array_equal(rows, expected["temp"][0:2].values)

    # Default indexes (and time decoding) load the dimension coordinates, and nothing else.
    store = CountingStore(written[zarr_format, False])
    xr.open_dataset(store, engine="asyncarr")
    assert {key.split("/")[0] for key in store.data_keys()} == {"time", "x"}


def test_dask_reads_only_the_blocks_computed(written: dict[tuple[int, bool], Path]) -> None:
    store = CountingStore(written[3, True])
    dataset = xr.open_dataset(store, engine="asyncarr", chunks={})
    before = set(store.data_keys())
    dataset["temp"].variable[4:6, 2:4].compute()
    assert store.data_keys() - before == {"temp/c/2/1"}


@pytest.mark.parametrize("zarr_format", FORMATS, ids=["v2", "v3"])
def test_outer_vectorized_and_mixed_indexing_match_open_zarr(
    written: dict[tuple[int, bool], Path], zarr_format: int
) -> None:
    path = written[zarr_format, True]
    expected = xr.open_zarr(path, chunks=None)["temp"]
    actual = xr.open_dataset(path, engine="asyncarr")["temp"]
    points = {"time": xr.Variable("p", [5, 0, 2]), "x": xr.Variable("p", [3, 1, 1])}
    selections = [
        {"time": [4, 0, 1], "x": 2},  # outer: an array and an int
        {"time": slice(None, None, -2), "x": [3, 0]},  # a negative step with an array
        points,  # vectorized: points
        {"time": xr.Variable("p", [1, 3]), "x": slice(1, 3)},  # vectorized mixed with a slice
        {"time": -1, "x": -1},
    ]
    for selection in selections:
        xr.testing.assert_identical(expected.isel(selection), actual.isel(selection))


@pytest.mark.parametrize("zarr_format", FORMATS, ids=["v2", "v3"])
def test_load_async_reads_on_the_callers_loop(written: dict[tuple[int, bool], Path], zarr_format: int) -> None:
    path = written[zarr_format, True]
    expected = xr.open_zarr(path, chunks=None).compute()
    points = {"time": xr.Variable("p", [5, 0]), "x": xr.Variable("p", [3, 1])}

    async def load() -> list[xr.DataArray]:
        lazy = xr.open_dataset(path, engine="asyncarr")
        temp = lazy["temp"]
        return await asyncio.gather(
            lazy.load_async(), temp.isel(time=[4, 1], x=2).load_async(), temp.isel(points).load_async()
        )

    whole, outer, pointwise = asyncio.run(load())
    xr.testing.assert_identical(expected, whole)
    xr.testing.assert_identical(expected["temp"].isel(time=[4, 1], x=2), outer)
    xr.testing.assert_identical(
        expected["temp"].isel(time=xr.Variable("p", [5, 0]), x=xr.Variable("p", [3, 1])), pointwise
    )


def test_lazy_variables_pickle_for_dask_workers(written: dict[tuple[int, bool], Path]) -> None:
    path = written[3, False]
    lazy = xr.open_dataset(path, engine="asyncarr", chunks={})
    revived = pickle.loads(pickle.dumps(lazy))
    xr.testing.assert_identical(xr.open_zarr(path, consolidated=False).compute(), revived.compute())


def test_read_and_written_by_a_distributed_cluster_of_processes(
    written: dict[tuple[int, bool], Path], tmp_path: Path
) -> None:
    from distributed import Client, LocalCluster

    path = written[3, True]
    expected = xr.open_zarr(path).compute()
    with (
        LocalCluster(n_workers=2, threads_per_worker=2, processes=True, dashboard_address=None) as cluster,
        Client(cluster),
    ):
        lazy = xr.open_dataset(path, engine="asyncarr", chunks={})
        xr.testing.assert_identical(expected, lazy.compute())  # each worker process reopens the arrays
        to_zarr(lazy, tmp_path / "by-workers.zarr", zarr_format=3)  # and writes its blocks
    xr.testing.assert_identical(expected, xr.open_zarr(tmp_path / "by-workers.zarr").compute())


def test_chunks_follow_shards_where_sharded(tmp_path: Path) -> None:
    dataset = make_dataset()[["temp", "counts"]]
    dataset["temp"].encoding.update(chunks=(1, 2), shards=(2, 4))
    path = write_with_xarray(dataset, tmp_path / "sharded.zarr", 3, True)
    expected = xr.open_zarr(path, chunks=None)
    actual = xr.open_dataset(path, engine="asyncarr", chunks={})
    xr.testing.assert_identical(expected, actual.compute())
    assert actual["temp"].encoding["chunks"] == (1, 2)
    assert actual["temp"].encoding["shards"] == (2, 4)
    assert actual["temp"].encoding["preferred_chunks"] == {"time": 2, "x": 4}
    assert actual["temp"].chunks == ((2, 2, 2), (4,))  # one dask block per shard, one request each


def test_a_store_object_is_claimed_without_naming_the_engine(written: dict[tuple[int, bool], Path]) -> None:
    path = written[3, True]
    assert AsyncarrBackendEntrypoint().guess_can_open(LocalStore(path))
    assert not AsyncarrBackendEntrypoint().guess_can_open(str(path))  # paths stay with xarray's zarr engine
    xr.testing.assert_identical(xr.open_zarr(path, chunks=None), xr.open_dataset(LocalStore(path)))


def test_a_group_inside_the_store(tmp_path: Path) -> None:
    path = tmp_path / "nested.zarr"
    write_with_xarray(make_dataset(), path, 3, False, group="inner/level")
    expected = xr.open_zarr(path, group="inner/level", consolidated=False, chunks=None)
    actual = xr.open_dataset(path, engine="asyncarr", group="/inner/level")
    xr.testing.assert_identical(expected, actual)


@pytest.mark.parametrize("zarr_format", FORMATS, ids=["v2", "v3"])
def test_open_datatree_matches_the_zarr_engine(tmp_path: Path, zarr_format: int) -> None:
    tree = xr.DataTree.from_dict(
        {
            "/": make_dataset()[["counts"]],
            "/child": make_dataset()[["temp"]],
            "/child/grandchild": xr.Dataset({"y": ("z", np.arange(3.0))}, attrs={"depth": 2}),
        }
    )
    path = tmp_path / "tree.zarr"
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*(does not have a Zarr V3 specification|Consolidated metadata).*")
        tree.to_zarr(path, mode="w", zarr_format=zarr_format)
    expected = xr.open_datatree(path, engine="zarr", chunks=None)
    actual = xr.open_datatree(path, engine="asyncarr")
    xr.testing.assert_identical(expected, actual)
    child = xr.open_datatree(path, engine="asyncarr", group="child")
    xr.testing.assert_identical(xr.open_datatree(path, engine="zarr", group="child", chunks=None), child)


def test_s3_and_http_read_what_local_reads(written: dict[tuple[int, bool], Path]) -> None:
    path = written[3, True]
    expected = xr.open_zarr(path, chunks=None)
    bucket = s3.new_bucket()
    s3.upload_directory(path, bucket, "data/ds.zarr")
    from_s3 = xr.open_dataset(
        f"s3://{bucket}/data/ds.zarr", engine="asyncarr", storage_options=s3.store_options(), chunks={}
    )
    xr.testing.assert_identical(expected, from_s3.compute())

    base = http.serve_directory(path.parent)  # HTTP cannot list: the consolidated copy is what is read
    from_http = xr.open_dataset(f"{base}/{path.name}", engine="asyncarr")
    xr.testing.assert_identical(expected, from_http)


def cloud_place(cloud: str) -> tuple[str, dict[str, Any], Any]:
    """A fresh bucket or container: its URL root, the storage options, and its upload function."""
    if cloud == "gcs":
        bucket = gcs.new_bucket()
        return f"gs://{bucket}", gcs.store_options(), lambda path, prefix: gcs.upload_directory(path, bucket, prefix)
    container = azure.new_container()
    options = {"connection_string": azure.connection_string()}
    return f"az://{container}", options, lambda path, prefix: azure.upload_directory(path, container, prefix)


@pytest.mark.parametrize("cloud", ["gcs", "azure"])
def test_gcs_and_azure_read_and_write_through_urls(written: dict[tuple[int, bool], Path], cloud: str) -> None:
    path = written[2, True]
    expected = xr.open_zarr(path, chunks=None)
    root, options, upload = cloud_place(cloud)
    # The GCS emulator's listen backlog is 5 (tests/emulators/gcs.py): keep fewer requests in flight.
    limit = config.set(concurrency=gcs.EMULATOR_CONNECTIONS) if cloud == "gcs" else contextlib.nullcontext()
    with limit:
        check_cloud_round_trip(expected, path, root, options, upload)


def check_cloud_round_trip(expected: xr.Dataset, path: Path, root: str, options: dict[str, Any], upload: Any) -> None:
    """Files written by xarray, uploaded, read through the URL; a dataset written to the URL by to_zarr, read back."""
    upload(path, "in/ds.zarr")
    xr.testing.assert_identical(
        expected, xr.open_dataset(f"{root}/in/ds.zarr", engine="asyncarr", storage_options=options)
    )
    to_zarr(make_dataset().chunk({"time": 2}), f"{root}/out.zarr", zarr_format=2, storage_options=options)
    xr.testing.assert_identical(
        expected, xr.open_dataset(f"{root}/out.zarr", engine="asyncarr", storage_options=options, chunks={}).compute()
    )


# -- writing ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("zarr_format", FORMATS, ids=["v2", "v3"])
def test_to_zarr_writes_what_xarray_writes(tmp_path: Path, zarr_format: int) -> None:
    reference = write_with_xarray(make_dataset(), tmp_path / "by-xarray.zarr", zarr_format, True)
    ours = tmp_path / "by-asyncarr.zarr"
    assert to_zarr(make_dataset(), ours, zarr_format=zarr_format) is None
    expected = xr.open_zarr(reference, chunks=None)
    actual = xr.open_zarr(ours, chunks=None)
    xr.testing.assert_identical(expected, actual)
    assert_same_encodings(expected, actual)
    xr.testing.assert_identical(expected, xr.open_dataset(ours, engine="asyncarr"))
    for other_format in FORMATS:
        with pytest.raises(ContainsGroupError, match="already exists"):
            to_zarr(make_dataset(), ours, zarr_format=other_format)  # mode "w-" never overwrites either format
    xr.testing.assert_identical(expected, xr.open_zarr(ours, chunks=None))


@pytest.mark.parametrize("zarr_format", FORMATS, ids=["v2", "v3"])
def test_to_zarr_round_trips_a_dataset_identically(tmp_path: Path, zarr_format: int) -> None:
    dataset = make_dataset()
    dataset["temp"].encoding = {"chunks": (2, 2)}  # no lossy packing: values come back exactly
    path = tmp_path / "round.zarr"
    to_zarr(dataset, path, zarr_format=zarr_format, consolidated=False)
    xr.testing.assert_identical(dataset, xr.open_zarr(path, consolidated=False).compute())
    xr.testing.assert_identical(dataset, xr.open_dataset(path, engine="asyncarr").compute())


@pytest.mark.parametrize("engine", ["asyncarr", "zarr"])
@pytest.mark.parametrize("zarr_format", FORMATS, ids=["v2", "v3"])
def test_a_dataset_read_by_either_engine_is_written_back_with_its_layout(
    written: dict[tuple[int, bool], Path], tmp_path: Path, zarr_format: int, engine: str
) -> None:
    source = written[zarr_format, True]
    opened = xr.open_dataset(source, engine=engine, chunks={})
    copy = tmp_path / "copy.zarr"
    to_zarr(opened, copy, zarr_format=zarr_format)
    xr.testing.assert_identical(xr.open_zarr(source, chunks=None), xr.open_zarr(copy, chunks=None))
    for name in ("temp", "counts", "station"):
        original = za.open_array(str(source), mode="r", path=name)
        written_back = za.open_array(str(copy), mode="r", path=name)
        assert written_back.chunks == original.chunks
        if zarr_format == 2:
            assert written_back.compressor == original.compressor
        else:
            assert written_back.metadata.codecs == original.metadata.codecs


def test_modes_replace_or_add_to_a_group_of_either_format(tmp_path: Path) -> None:
    dataset = make_dataset()[["counts"]]
    path = tmp_path / "modes.zarr"
    to_zarr(dataset, path, group="sub", zarr_format=2, consolidated=False)
    to_zarr(dataset, path, group="sub", zarr_format=3, mode="w", consolidated=False)  # replaced, not shadowed
    assert za.open_group(str(path), mode="r", path="sub").zarr_format == 3
    assert not (path / "sub" / ".zgroup").exists()
    extra = xr.Dataset({"more": ("time", np.arange(6.0))})
    to_zarr(extra, path, group="sub", mode="a", consolidated=False)  # adds to the v3 group it finds
    expected = xr.merge([dataset, extra])
    xr.testing.assert_identical(expected, xr.open_zarr(path, group="sub", consolidated=False).compute())
    with pytest.raises(ValueError, match="adds to a Zarr v3 group"):
        to_zarr(extra, path, group="sub", mode="a", zarr_format=2)


def test_a_group_written_below_the_root_reads_back_consolidated(tmp_path: Path) -> None:
    path = tmp_path / "grouped.zarr"
    to_zarr(make_dataset(), path, group="inner/level", zarr_format=3)
    reference = write_with_xarray(make_dataset(), tmp_path / "reference.zarr", 3, True, group="inner/level")
    expected = xr.open_zarr(reference, group="inner/level", chunks=None)
    xr.testing.assert_identical(expected, xr.open_zarr(path, group="inner/level", chunks=None))
    xr.testing.assert_identical(expected, xr.open_dataset(path, engine="asyncarr", group="inner/level"))


def test_dask_variables_are_written_chunk_by_chunk(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    dataset = xr.Dataset(
        {
            "aligned": (("y", "x"), da.from_array(rng.random((8, 6)), chunks=(4, 3))),
            "misaligned": (("y", "x"), da.from_array(rng.random((8, 6)), chunks=(3, 5))),
        },
        coords={"y": np.arange(8), "x": np.arange(6.0)},
    )
    path = tmp_path / "dask.zarr"
    delayed = to_zarr(dataset, path, encoding={"misaligned": {"chunks": (2, 2)}}, zarr_format=3, compute=False)
    assert isinstance(delayed, Delayed)
    assert za.open_array(str(path), mode="r", path="aligned").nchunks_initialized == 0  # nothing written yet
    delayed.compute()
    aligned = za.open_array(str(path), mode="r", path="aligned")
    assert aligned.chunks == (4, 3) and aligned.nchunks_initialized == 4  # the dask blocks became the chunks
    assert za.open_array(str(path), mode="r", path="misaligned").chunks == (2, 2)  # rechunked to fit
    xr.testing.assert_identical(dataset.compute(), xr.open_zarr(path).compute())
    xr.testing.assert_identical(dataset.compute(), xr.open_dataset(path, engine="asyncarr").compute())


def test_to_zarr_refuses_encodings_zarr_has_no_use_for(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unexpected encoding"):
        to_zarr(make_dataset(), tmp_path / "bad.zarr", encoding={"counts": {"compression": "zlib"}})


def test_to_zarr_and_open_dataset_on_s3(tmp_path: Path) -> None:
    dataset = make_dataset()
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/out.zarr"
    to_zarr(dataset.chunk({"time": 2}), url, storage_options=s3.store_options(), zarr_format=3)
    local = tmp_path / "local.zarr"
    to_zarr(dataset, local, zarr_format=3)
    expected = xr.open_zarr(local, chunks=None)
    actual = xr.open_dataset(url, engine="asyncarr", storage_options=s3.store_options())
    xr.testing.assert_identical(expected, actual)
