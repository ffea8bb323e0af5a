"""asyncarr and tensorstore read each other's arrays on disk in both Zarr formats (tensorstore has no groups)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorstore as ts
from interop_cases import (
    BIG_ENDIAN_V2_DTYPES,
    CHUNKS_2D,
    CHUNKS_3D,
    CODEC_CASES,
    CODEC_DTYPE,
    DTYPES,
    FILL_VALUES,
    FLOAT_DTYPES,
    LAYOUT_CASES,
    LAYOUT_DTYPE,
    ORDERS,
    REGION_2D,
    SHAPE_2D,
    SHAPE_3D,
    V3_CODEC_CHAINS,
    CodecCase,
    LayoutCase,
    assert_reads_like_numpy,
    assert_same_fill_value,
    fill_value_json,
    partially_written,
    sample,
    summarize_v2,
    summarize_v3,
    transpose_json,
)

import asyncarr
import asyncarr.sync as za

FORMATS = [2, 3]
_DRIVERS = {2: "zarr", 3: "zarr3"}

# tensorstore's data types: neither of its drivers knows datetime64/timedelta64 or
# fixed-length unicode, and zarr3 has no fixed-length bytes type.
_NOT_IN_TENSORSTORE = {"M8[ns]", "m8[s]", "U3", "S5"}
# Its zarr (v2) driver opens `|S5` as a "char" array with an extra dimension of 5, which
# its Python binding converts to zero-width `S0` NumPy arrays: tensorstore writes S5
# (asyncarr reads it back) but its reads of S5 cannot be compared.
TS_WRITES_DTYPE_CASES = (
    [(fmt, dtype) for fmt in FORMATS for dtype in DTYPES if dtype not in _NOT_IN_TENSORSTORE]
    + [(2, "S5")]
    + [(2, dtype) for dtype in BIG_ENDIAN_V2_DTYPES]
)
TS_READS_DTYPE_CASES = [case for case in TS_WRITES_DTYPE_CASES if case != (2, "S5")]
TS_CODEC_CASES = [case for case in CODEC_CASES if "tensorstore" not in case.unsupported_by]


def _kvstore(path: Path) -> dict:
    return {"driver": "file", "path": str(path)}


def ts_open(path: Path, zarr_format: int) -> ts.TensorStore:
    """Open an existing array with tensorstore's driver for the format."""
    return ts.open({"driver": _DRIVERS[zarr_format], "kvstore": _kvstore(path)}, open=True).result()


def ts_create(path: Path, zarr_format: int, metadata: dict) -> ts.TensorStore:
    """Create an array with tensorstore from a complete metadata document."""
    spec = {"driver": _DRIVERS[zarr_format], "kvstore": _kvstore(path), "metadata": metadata}
    return ts.open(spec, create=True, delete_existing=True).result()


def ts_metadata(t: ts.TensorStore) -> dict:
    """The metadata document tensorstore parsed."""
    return t.spec().to_json()["metadata"]


def v2_metadata(shape, chunks, dtype, fill_value, *, order="C", separator=".", compressor=None) -> dict:
    return {
        "zarr_format": 2,
        "shape": list(shape),
        "chunks": list(chunks),
        "dtype": np.dtype(dtype).str,
        "fill_value": None if fill_value is None else fill_value_json(fill_value, dtype),
        "order": order,
        "compressor": compressor,
        "filters": None,
        "dimension_separator": separator,
    }


def v3_metadata(shape, chunks, dtype, fill_value, *, codecs, chunk_key_encoding=None) -> dict:
    return {
        "zarr_format": 3,
        "node_type": "array",
        "shape": list(shape),
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks)}},
        "chunk_key_encoding": chunk_key_encoding or {"name": "default", "configuration": {"separator": "/"}},
        "data_type": np.dtype(dtype).name,
        "fill_value": fill_value_json(fill_value, dtype),
        "codecs": codecs,
    }


def _bytes_codec(dtype: str) -> dict:
    if np.dtype(dtype).itemsize == 1:
        return {"name": "bytes"}
    return {"name": "bytes", "configuration": {"endian": "little"}}


def _write(t: ts.TensorStore, region: Any, values: np.ndarray) -> None:
    if values.dtype.kind == "S":
        # tensorstore's v2 driver stores |Sn as chars along an extra last dimension
        values = np.frombuffer(values.tobytes(), dtype="S1").reshape(*values.shape, values.dtype.itemsize)
    t[region].write(values).result()


# --- data types and fill values ------------------------------------------------------


@pytest.mark.parametrize(("zarr_format", "dtype"), TS_READS_DTYPE_CASES)
def test_tensorstore_reads_partially_written_asyncarr_array_of_every_supported_dtype(tmp_path, zarr_format, dtype):
    data = sample(dtype, SHAPE_2D)
    fill_value = FILL_VALUES[dtype]
    z = za.open_array(
        str(tmp_path),
        mode="w",
        shape=SHAPE_2D,
        chunks=CHUNKS_2D,
        dtype=dtype,
        fill_value=fill_value,
        zarr_format=zarr_format,
    )
    z[REGION_2D] = data[REGION_2D]

    t = ts_open(tmp_path, zarr_format)
    assert t.shape == SHAPE_2D
    assert t.chunk_layout.read_chunk.shape == CHUNKS_2D
    assert t.dtype.numpy_dtype == np.dtype(dtype).newbyteorder("=")
    assert_same_fill_value(t.fill_value, fill_value, dtype)
    np.testing.assert_array_equal(t.read().result(), partially_written(data, fill_value, REGION_2D))


@pytest.mark.parametrize(("zarr_format", "dtype"), TS_WRITES_DTYPE_CASES)
def test_asyncarr_reads_partially_written_tensorstore_array_of_every_supported_dtype(tmp_path, zarr_format, dtype):
    data = sample(dtype, SHAPE_2D)
    fill_value = FILL_VALUES[dtype]
    if zarr_format == 2:
        metadata = v2_metadata(SHAPE_2D, CHUNKS_2D, dtype, fill_value)
    else:
        metadata = v3_metadata(SHAPE_2D, CHUNKS_2D, dtype, fill_value, codecs=[_bytes_codec(dtype)])
    _write(ts_create(tmp_path, zarr_format, metadata), REGION_2D, data[REGION_2D])

    z = za.open_array(str(tmp_path), mode="r")
    assert z.zarr_format == zarr_format
    assert z.shape == SHAPE_2D
    assert z.chunks == CHUNKS_2D
    assert z.dtype == np.dtype(dtype)
    assert_same_fill_value(z.fill_value, fill_value, dtype)
    assert_reads_like_numpy(z, partially_written(data, fill_value, REGION_2D))


@pytest.mark.parametrize("zarr_format", FORMATS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_tensorstore_reads_nan_fill_of_partially_written_asyncarr_array(tmp_path, zarr_format, dtype):
    data = sample(dtype, SHAPE_2D)
    z = za.open_array(
        str(tmp_path),
        mode="w",
        shape=SHAPE_2D,
        chunks=CHUNKS_2D,
        dtype=dtype,
        fill_value=np.nan,
        zarr_format=zarr_format,
    )
    z[REGION_2D] = data[REGION_2D]

    t = ts_open(tmp_path, zarr_format)
    assert np.isnan(t.fill_value)
    result = t.read().result()
    np.testing.assert_array_equal(result, partially_written(data, np.nan, REGION_2D))
    assert np.isnan(result[4:, :]).all()


@pytest.mark.parametrize("zarr_format", FORMATS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_asyncarr_reads_nan_fill_of_partially_written_tensorstore_array(tmp_path, zarr_format, dtype):
    data = sample(dtype, SHAPE_2D)
    if zarr_format == 2:
        metadata = v2_metadata(SHAPE_2D, CHUNKS_2D, dtype, np.nan)
    else:
        metadata = v3_metadata(SHAPE_2D, CHUNKS_2D, dtype, np.nan, codecs=[_bytes_codec(dtype)])
    _write(ts_create(tmp_path, zarr_format, metadata), REGION_2D, data[REGION_2D])

    z = za.open_array(str(tmp_path), mode="r")
    assert np.isnan(z.fill_value)
    assert_reads_like_numpy(z, partially_written(data, np.nan, REGION_2D))
    assert np.isnan(z[4:, :]).all()


# --- codecs -----------------------------------------------------------------------------


def _ts_codec_summary(t: ts.TensorStore, zarr_format: int) -> list[str]:
    metadata = ts_metadata(t)
    return summarize_v2(metadata) if zarr_format == 2 else summarize_v3(metadata)


@pytest.mark.parametrize("zarr_format", FORMATS)
@pytest.mark.parametrize("case", TS_CODEC_CASES, ids=lambda case: case.id)
def test_tensorstore_reads_asyncarr_array_with_each_compressor(tmp_path, zarr_format, case: CodecCase):
    data = sample(CODEC_DTYPE, SHAPE_2D)
    z = za.open_array(
        str(tmp_path),
        mode="w",
        shape=SHAPE_2D,
        chunks=CHUNKS_2D,
        dtype=CODEC_DTYPE,
        compressor=case.compressor,
        zarr_format=zarr_format,
    )
    z[...] = data

    t = ts_open(tmp_path, zarr_format)
    assert _ts_codec_summary(t, zarr_format) == case.summary()
    np.testing.assert_array_equal(t.read().result(), data)


@pytest.mark.parametrize("zarr_format", FORMATS)
@pytest.mark.parametrize("case", TS_CODEC_CASES, ids=lambda case: case.id)
def test_asyncarr_reads_tensorstore_array_with_each_compressor(tmp_path, zarr_format, case: CodecCase):
    data = sample(CODEC_DTYPE, SHAPE_2D)
    if zarr_format == 2:
        metadata = v2_metadata(SHAPE_2D, CHUNKS_2D, CODEC_DTYPE, 0, compressor=case.v2_compressor_json())
    else:
        metadata = v3_metadata(SHAPE_2D, CHUNKS_2D, CODEC_DTYPE, 0, codecs=case.v3_codecs_json(np.dtype(CODEC_DTYPE)))
    t = ts_create(tmp_path, zarr_format, metadata)
    t.write(data).result()
    assert _ts_codec_summary(t, zarr_format) == case.summary()

    z = za.open_array(str(tmp_path), mode="r")
    assert_reads_like_numpy(z, data)


@pytest.mark.parametrize("chain_id", sorted(V3_CODEC_CHAINS))
def test_tensorstore_reads_asyncarr_array_written_with_v3_codec_chain(tmp_path, chain_id):
    chain = V3_CODEC_CHAINS[chain_id]
    data = sample("<i4", SHAPE_2D)
    z = za.open_array(
        str(tmp_path), mode="w", shape=SHAPE_2D, chunks=CHUNKS_2D, dtype="<i4", codecs=chain, zarr_format=3
    )
    z[...] = data

    t = ts_open(tmp_path, 3)
    assert [c["name"] for c in ts_metadata(t)["codecs"]] == [c["name"] for c in chain]
    np.testing.assert_array_equal(t.read().result(), data)


@pytest.mark.parametrize("chain_id", sorted(V3_CODEC_CHAINS))
def test_asyncarr_reads_tensorstore_array_written_with_v3_codec_chain(tmp_path, chain_id):
    chain = V3_CODEC_CHAINS[chain_id]
    data = sample("<i4", SHAPE_2D)
    t = ts_create(tmp_path, 3, v3_metadata(SHAPE_2D, CHUNKS_2D, "<i4", 0, codecs=chain))
    t.write(data).result()
    stored = json.loads((tmp_path / "zarr.json").read_text())
    assert [c["name"] for c in stored["codecs"]] == [c["name"] for c in chain]

    z = za.open_array(str(tmp_path), mode="r")
    assert_reads_like_numpy(z, data)


# --- layouts: order x chunk key encoding ----------------------------------------------------


def _layout_ids(case: LayoutCase) -> str:
    return case.id


_INNER_ORDER = {"C": (0, 1, 2), "F": (2, 1, 0)}


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("case", LAYOUT_CASES, ids=_layout_ids)
def test_tensorstore_reads_asyncarr_array_in_each_order_and_chunk_key_layout(tmp_path, case: LayoutCase, order):
    data = sample(LAYOUT_DTYPE, SHAPE_3D)
    z = za.open_array(
        str(tmp_path),
        mode="w",
        shape=SHAPE_3D,
        chunks=CHUNKS_3D,
        dtype=LAYOUT_DTYPE,
        order=order,
        zarr_format=case.zarr_format,
        **case.asyncarr_kwargs,
    )
    z[...] = data
    assert (tmp_path / case.key_of_chunk_101).is_file()

    t = ts_open(tmp_path, case.zarr_format)
    assert t.chunk_layout.inner_order == _INNER_ORDER[order]
    assert t.chunk_layout.read_chunk.shape == CHUNKS_3D
    np.testing.assert_array_equal(t.read().result(), data)
    # and tensorstore finds chunk (1, 0, 1) where the layout puts it
    assert np.array_equal(t[2:4, 0:3, 4:6].read().result(), data[2:4, 0:3, 4:6])


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("case", LAYOUT_CASES, ids=_layout_ids)
def test_asyncarr_reads_tensorstore_array_in_each_order_and_chunk_key_layout(tmp_path, case: LayoutCase, order):
    data = sample(LAYOUT_DTYPE, SHAPE_3D)
    if case.zarr_format == 2:
        metadata = v2_metadata(SHAPE_3D, CHUNKS_3D, LAYOUT_DTYPE, 0, order=order, separator=case.encoding)
    else:
        codecs = ([transpose_json(3)] if order == "F" else []) + [_bytes_codec(LAYOUT_DTYPE)]
        metadata = v3_metadata(SHAPE_3D, CHUNKS_3D, LAYOUT_DTYPE, 0, codecs=codecs, chunk_key_encoding=case.encoding)
    ts_create(tmp_path, case.zarr_format, metadata).write(data).result()
    assert (tmp_path / case.key_of_chunk_101).is_file()

    z = za.open_array(str(tmp_path), mode="r")
    assert z.order == order
    assert z.chunks == CHUNKS_3D
    assert_reads_like_numpy(z, data)


# --- the async API --------------------------------------------------------------------------


@pytest.mark.parametrize("zarr_format", FORMATS)
def test_tensorstore_reads_array_written_through_async_api(tmp_path, zarr_format):
    data = sample("i8", SHAPE_2D)

    async def write() -> None:
        z = await asyncarr.open_array(
            str(tmp_path),
            mode="w",
            shape=SHAPE_2D,
            chunks=CHUNKS_2D,
            dtype="i8",
            fill_value=-9,
            zarr_format=zarr_format,
        )
        await z.setitem(REGION_2D, data[REGION_2D])

    asyncio.run(write())
    t = ts_open(tmp_path, zarr_format)
    np.testing.assert_array_equal(t.read().result(), partially_written(data, -9, REGION_2D))


@pytest.mark.parametrize("zarr_format", FORMATS)
def test_async_api_reads_tensorstore_array_like_numpy(tmp_path, zarr_format):
    data = sample("f4", SHAPE_3D)
    if zarr_format == 2:
        metadata = v2_metadata(SHAPE_3D, CHUNKS_3D, "f4", 0.5, order="F")
    else:
        metadata = v3_metadata(SHAPE_3D, CHUNKS_3D, "f4", 0.5, codecs=[transpose_json(3), _bytes_codec("f4")])
    region = (slice(1, 4), slice(None), slice(2, 6))
    ts_create(tmp_path, zarr_format, metadata)[region].write(data[region]).result()
    expected = partially_written(data, 0.5, region)
    wanted = [Ellipsis, (slice(None, None, -1), 1, slice(1, 6, 2)), (4, 3, 5), (slice(3, 0, -2), slice(None), 2)]

    async def read_all() -> list[np.ndarray]:
        z = await asyncarr.open_array(str(tmp_path), mode="r")
        assert z.zarr_format == zarr_format
        return [await z.getitem(selection) for selection in wanted]

    for selection, result in zip(wanted, asyncio.run(read_all()), strict=True):
        np.testing.assert_array_equal(result, expected[selection], err_msg=f"selection {selection!r}")
