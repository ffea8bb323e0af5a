"""Arrays behave like NumPy arrays: random shapes, chunks, dtypes and basic selections, read and written."""

from __future__ import annotations

import asyncio
import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as npst
from slow_store import chunk_keys, store_contents

import asyncarr
import asyncarr.sync as za
from asyncarr.stores import MemoryStore

DTYPES = ["bool", "int8", "uint16", "int32", "int64", "float32", "float64", "complex64"]

PROPERTY_SETTINGS = settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def random_values(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Values of ``dtype`` spread over its range, about a third of them zero (the default fill value)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        values = rng.integers(0, 2, size=shape).astype(bool)
    elif dtype.kind in "iu":
        info = np.iinfo(dtype)
        values = rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=dtype)
    elif dtype.kind == "f":
        values = (rng.standard_normal(size=shape) * 1000).astype(dtype)
    else:
        values = (rng.standard_normal(size=shape) + 1j * rng.standard_normal(size=shape)).astype(dtype)
    zero = rng.random(size=shape) < 0.3
    values = np.asarray(values)
    values[zero] = 0
    return values


@st.composite
def array_specs(draw: st.DrawFn) -> dict:
    """Shape (ndim 0-3, dims 0-30), chunk shape (at most 8 chunks per dimension), dtype, format, order."""
    ndim = draw(st.integers(0, 3))
    shape = tuple(draw(st.integers(0, 30)) for _ in range(ndim))
    chunks = tuple(draw(st.integers(max(1, math.ceil(n / 8)), max(1, n) + 3)) for n in shape)
    return {
        "shape": shape,
        "chunks": chunks,
        "dtype": np.dtype(draw(st.sampled_from(DTYPES))),
        "zarr_format": draw(st.sampled_from([2, 3])),
        "order": draw(st.sampled_from(["C", "F"])),
        "compressor": draw(st.sampled_from(["default", None])),
        "seed": draw(st.integers(0, 2**32 - 1)),
    }


def broadcastable_shapes(draw: st.DrawFn, target: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that NumPy broadcasts to ``target``: trailing dimensions, some of them set to 1."""
    keep = draw(st.integers(0, len(target)))
    trailing = target[len(target) - keep :]
    return tuple(1 if draw(st.booleans()) else n for n in trailing)


def new_array(spec: dict) -> tuple[za.Array, MemoryStore, np.ndarray]:
    """A facade array on a fresh MemoryStore holding random data, and that data."""
    rng = np.random.default_rng(spec["seed"])
    data = random_values(rng, spec["shape"], spec["dtype"])
    store = MemoryStore()
    z = za.open_array(
        store,
        mode="w",
        shape=spec["shape"],
        chunks=spec["chunks"],
        dtype=spec["dtype"],
        zarr_format=spec["zarr_format"],
        order=spec["order"],
        compressor=spec["compressor"],
    )
    z[...] = data
    return z, store, data


def assert_same_as_numpy(actual: object, expected: np.ndarray) -> None:
    actual = np.asarray(actual)
    assert actual.shape == expected.shape
    assert actual.dtype == expected.dtype
    np.testing.assert_array_equal(actual, expected)


# -- hypothesis: reads and writes match NumPy ------------------------------------------------


@PROPERTY_SETTINGS
@given(spec=array_specs(), data=st.data())
def test_basic_selection_reads_equal_numpy(spec: dict, data: st.DataObject) -> None:
    z, _, a = new_array(spec)
    selection = data.draw(npst.basic_indices(spec["shape"], allow_newaxis=False, allow_ellipsis=True))
    assert_same_as_numpy(z[selection], a[selection])
    assert_same_as_numpy(z[...], a)


@PROPERTY_SETTINGS
@given(spec=array_specs(), data=st.data())
def test_basic_selection_writes_of_arrays_and_scalars_equal_numpy(spec: dict, data: st.DataObject) -> None:
    z, _, a = new_array(spec)
    selection = data.draw(npst.basic_indices(spec["shape"], allow_newaxis=False, allow_ellipsis=True))
    target_shape = a[selection].shape
    rng = np.random.default_rng(spec["seed"] + 1)
    kind = data.draw(st.sampled_from(["array", "numpy scalar", "python scalar"]), label="value kind")
    if kind == "array":
        value = random_values(rng, broadcastable_shapes(data.draw, target_shape), spec["dtype"])
    else:
        value = random_values(rng, (), spec["dtype"])[()]
        if kind == "python scalar":
            value = value.item()
    expected = a.copy()
    expected[selection] = value
    z[selection] = value
    assert_same_as_numpy(z[...], expected)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=array_specs(), data=st.data())
def test_async_getitem_and_setitem_equal_numpy(spec: dict, data: st.DataObject) -> None:
    read_selection = data.draw(npst.basic_indices(spec["shape"], allow_newaxis=False, allow_ellipsis=True))
    write_selection = data.draw(npst.basic_indices(spec["shape"], allow_newaxis=False, allow_ellipsis=True))
    rng = np.random.default_rng(spec["seed"])
    a = random_values(rng, spec["shape"], spec["dtype"])
    value = random_values(rng, broadcastable_shapes(data.draw, a[write_selection].shape), spec["dtype"])

    async def main() -> tuple[np.ndarray, np.ndarray]:
        z = await asyncarr.open_array(
            MemoryStore(),
            mode="w",
            shape=spec["shape"],
            chunks=spec["chunks"],
            dtype=spec["dtype"],
            zarr_format=spec["zarr_format"],
            order=spec["order"],
        )
        await z.setitem(..., a)
        read = await z.getitem(read_selection)
        await z.setitem(write_selection, value)
        return read, await z.getitem(...)

    read, after_write = asyncio.run(main())
    assert_same_as_numpy(read, a[read_selection])
    expected = a.copy()
    expected[write_selection] = value
    assert_same_as_numpy(after_write, expected)


# -- resize and append ------------------------------------------------------------------------


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_resize_smaller_deletes_chunks_wholly_outside_the_new_shape(zarr_format: int) -> None:
    store = MemoryStore()
    z = za.open_array(store, mode="w", shape=(20, 20), chunks=(5, 5), dtype="i4", zarr_format=zarr_format)
    a = np.arange(400, dtype="i4").reshape(20, 20) + 1
    z[:] = a
    assert len(chunk_keys(store)) == 16
    z.resize(8, 8)
    assert z.shape == (8, 8)
    # Chunk rows/columns 0 and 1 still overlap [0, 8); the other 12 chunks lie wholly outside.
    assert len(chunk_keys(store)) == 4
    assert_same_as_numpy(z[:], a[:8, :8])
    assert za.open_array(store, mode="r").shape == (8, 8)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_resize_bigger_reads_fill_value_in_the_new_area(zarr_format: int) -> None:
    store = MemoryStore()
    z = za.open_array(
        store, mode="w", shape=(7, 7), chunks=(5, 5), dtype="f8", fill_value=-1.5, zarr_format=zarr_format
    )
    a = np.arange(49, dtype="f8").reshape(7, 7)
    z[:] = a
    z.resize((12, 13))
    expected = np.full((12, 13), -1.5)
    expected[:7, :7] = a
    assert z.shape == (12, 13)
    assert_same_as_numpy(z[:], expected)
    assert_same_as_numpy(za.open_array(store, mode="r")[:], expected)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_append_along_axis_0_and_1_equals_numpy_concatenate(zarr_format: int) -> None:
    rng = np.random.default_rng(0)
    a = rng.integers(0, 100, size=(10, 4)).astype("i8")
    z = za.open_array(MemoryStore(), mode="w", shape=a.shape, chunks=(3, 3), dtype=a.dtype, zarr_format=zarr_format)
    z[:] = a
    rows = rng.integers(0, 100, size=(5, 4)).astype("i8")
    assert tuple(z.append(rows)) == (15, 4)
    a = np.concatenate([a, rows], axis=0)
    assert_same_as_numpy(z[:], a)
    columns = rng.integers(0, 100, size=(15, 7)).astype("i8")
    assert tuple(z.append(columns, axis=1)) == (15, 11)
    a = np.concatenate([a, columns], axis=1)
    assert z.shape == (15, 11)
    assert_same_as_numpy(z[:], a)


# -- fill values and empty chunks -------------------------------------------------------------


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize(("dtype", "fill_value"), [("f8", np.nan), ("i2", -7), ("f4", 0.0), ("bool", True)])
def test_missing_chunks_read_as_fill_value(zarr_format: int, dtype: str, fill_value: object) -> None:
    store = MemoryStore()
    z = za.open_array(
        store, mode="w", shape=(10, 10), chunks=(3, 3), dtype=dtype, fill_value=fill_value, zarr_format=zarr_format
    )
    expected = np.full((10, 10), fill_value, dtype=dtype)
    assert chunk_keys(store) == []
    assert_same_as_numpy(z[:], expected)
    value = 0 if fill_value == 1 else 1
    z[2:5, 0] = value
    expected[2:5, 0] = value
    assert_same_as_numpy(z[:], expected)
    assert len(chunk_keys(store)) == 2


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize(("dtype", "fill_value"), [("i4", 0), ("f8", np.nan), ("f4", 2.5)])
def test_chunks_equal_to_fill_value_are_not_stored(zarr_format: int, dtype: str, fill_value: object) -> None:
    store = MemoryStore()
    z = za.open_array(
        store, mode="w", shape=(9, 9), chunks=(3, 3), dtype=dtype, fill_value=fill_value, zarr_format=zarr_format
    )
    z[:] = 1
    assert len(chunk_keys(store)) == 9
    z[:] = fill_value
    assert chunk_keys(store) == []
    z[0:3, 0:3] = 1
    z[0:3, 0:3] = fill_value  # a full-chunk write of the fill value deletes the stored chunk
    assert chunk_keys(store) == []
    z[0, 0] = 1
    z[0, 0] = fill_value  # so does a partial write that leaves the chunk equal to the fill value
    assert chunk_keys(store) == []
    assert_same_as_numpy(z[:], np.full((9, 9), fill_value, dtype=dtype))


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_write_empty_chunks_setting_stores_chunks_equal_to_fill_value(zarr_format: int) -> None:
    store = MemoryStore()
    with asyncarr.config.set(write_empty_chunks=True):
        z = za.open_array(store, mode="w", shape=(9, 9), chunks=(3, 3), dtype="i4", zarr_format=zarr_format)
        z[:] = 0
        assert len(chunk_keys(store)) == 9
    assert_same_as_numpy(z[:], np.zeros((9, 9), dtype="i4"))


# -- properties -------------------------------------------------------------------------------


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_nchunks_initialized_counts_stored_chunks(zarr_format: int) -> None:
    store = MemoryStore()
    z = za.open_array(store, mode="w", shape=(20, 20), chunks=(5, 5), dtype="i4", zarr_format=zarr_format)
    assert z.nchunks_initialized == 0
    z[0, 0] = 1
    z[19, 19] = 1
    z[7, 12] = 1
    assert z.nchunks_initialized == 3
    z[:] = 1
    assert z.nchunks_initialized == 16
    z[:10] = 0
    assert z.nchunks_initialized == 8


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_nbytes_stored_counts_the_bytes_in_the_store(zarr_format: int) -> None:
    store = MemoryStore()
    z = za.open_array(store, mode="w", shape=(100,), chunks=(10,), dtype="f8", compressor=None, zarr_format=zarr_format)
    z[:25] = np.arange(25) + 1.0
    contents = store_contents(store)
    chunk_bytes = sum(len(contents[key]) for key in chunk_keys(store))
    assert chunk_bytes == 3 * 10 * 8
    # zarr counts every document under the array (metadata included); counting chunks only is also accepted.
    assert z.nbytes_stored in (chunk_bytes, sum(map(len, contents.values())))
    z[:] = 2.0
    assert z.nbytes_stored > chunk_bytes


def test_len_shape_and_numpy_conversion() -> None:
    a = np.arange(60, dtype="i2").reshape(6, 10)
    z = za.open_array(MemoryStore(), mode="w", shape=a.shape, chunks=(4, 4), dtype=a.dtype)
    z[:] = a
    assert len(z) == 6
    assert z.shape == (6, 10)
    assert z.ndim == 2
    assert z.size == 60
    assert z.nbytes == a.nbytes
    assert z.dtype == a.dtype
    assert z.chunks == (4, 4)
    assert_same_as_numpy(np.asarray(z), a)
    assert_same_as_numpy(np.asarray(z, dtype="f8"), a.astype("f8"))


# -- attributes -------------------------------------------------------------------------------


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_attrs_write_through_and_persist(zarr_format: int) -> None:
    store = MemoryStore()
    z = za.open_array(store, mode="w", shape=(4,), chunks=(2,), dtype="i4", zarr_format=zarr_format)
    z.attrs["foo"] = "bar"
    z.attrs.update({"n": 3, "nested": {"a": [1, 2]}})
    z.attrs["gone"] = 1
    del z.attrs["gone"]
    expected = {"foo": "bar", "n": 3, "nested": {"a": [1, 2]}}
    assert dict(z.attrs) == expected
    assert dict(za.open_array(store, mode="r").attrs) == expected
    contents = store_contents(store)
    if zarr_format == 3:
        assert json.loads(contents["zarr.json"])["attributes"] == expected
    else:
        assert json.loads(contents[".zattrs"]) == expected


def test_async_update_attributes_persists() -> None:
    store = MemoryStore()

    async def main() -> dict:
        z = await asyncarr.open_array(store, mode="w", shape=(4,), chunks=(2,), dtype="i4")
        await z.update_attributes({"units": "m", "scale": 0.5})
        reopened = await asyncarr.open_array(store, mode="r")
        return dict(reopened.attrs)

    assert asyncio.run(main()) == {"units": "m", "scale": 0.5}


# -- assigning one array to another -----------------------------------------------------------


@pytest.mark.parametrize(("source_format", "target_format"), [(3, 3), (2, 3), (3, 2)])
def test_assigning_another_array_copies_equal_data(source_format: int, target_format: int) -> None:
    rng = np.random.default_rng(1)
    a = rng.standard_normal((23, 17)).astype("f4")
    z1 = za.open_array(MemoryStore(), mode="w", shape=a.shape, chunks=(5, 4), dtype=a.dtype, zarr_format=source_format)
    z1[:] = a
    z2 = za.empty_like(z1)
    z2[:] = z1
    assert_same_as_numpy(z2[:], a)
    z3 = za.open_array(
        MemoryStore(), mode="w", shape=a.shape, chunks=(7, 9), dtype=a.dtype, order="F", zarr_format=target_format
    )
    z3[:] = z1
    assert_same_as_numpy(z3[:], a)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_shrinking_two_axes_then_growing_shows_fill_values_not_stale_data(zarr_format):
    z = za.zeros((10, 10), chunks=(4, 4), dtype="i4", zarr_format=zarr_format)
    z[:] = 1
    z.resize(6, 6)
    z.resize(10, 10)
    expected = np.zeros((10, 10), dtype="i4")
    expected[:6, :6] = 1
    np.testing.assert_array_equal(z[:], expected)
