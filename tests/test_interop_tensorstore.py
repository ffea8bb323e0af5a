"""asyncarr and tensorstore read each other's arrays on disk in both Zarr formats (tensorstore has no groups)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import interop_cases as interop
import numpy as np
import pytest
import tensorstore as ts
from interop_cases import CHUNKS_2D, CHUNKS_3D, REGION_2D, SHAPE_2D, SHAPE_3D

_DRIVERS = {2: "zarr", 3: "zarr3"}

# tensorstore's data types: neither of its drivers knows datetime64/timedelta64 or
# fixed-length unicode, and zarr3 has no fixed-length bytes type.
_NOT_IN_TENSORSTORE = {"M8[ns]", "m8[s]", "U3", "S5"}
# Its zarr (v2) driver opens `|S5` as a "char" array with an extra dimension of 5, which
# its Python binding converts to zero-width `S0` NumPy arrays: tensorstore writes S5
# (asyncarr reads it back) but its reads of S5 cannot be compared.
TS_WRITES_DTYPE_CASES = (
    [(fmt, dtype) for fmt in interop.FORMATS for dtype in interop.DTYPES if dtype not in _NOT_IN_TENSORSTORE]
    + [(2, "S5")]
    + [(2, dtype) for dtype in interop.BIG_ENDIAN_V2_DTYPES]
)
TS_READS_DTYPE_CASES = [case for case in TS_WRITES_DTYPE_CASES if case != (2, "S5")]
TS_CODEC_CASES = [case for case in interop.CODEC_CASES if "tensorstore" not in case.unsupported_by]


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


def v2_metadata(
    shape: tuple[int, ...],
    chunks: tuple[int, ...],
    dtype: str,
    fill_value: Any,
    *,
    order: str = "C",
    separator: str = ".",
    compressor: dict | None = None,
) -> dict:
    """A complete `.zarray` document without filters."""
    return {
        "zarr_format": 2,
        "shape": list(shape),
        "chunks": list(chunks),
        "dtype": np.dtype(dtype).str,
        "fill_value": None if fill_value is None else interop.fill_value_json(fill_value, dtype),
        "order": order,
        "compressor": compressor,
        "filters": None,
        "dimension_separator": separator,
    }


def v3_metadata(
    shape: tuple[int, ...],
    chunks: tuple[int, ...],
    dtype: str,
    fill_value: Any,
    *,
    codecs: list[dict],
    chunk_key_encoding: dict | None = None,
) -> dict:
    """A complete v3 array `zarr.json` on a regular chunk grid (default chunk keys unless given)."""
    return {
        "zarr_format": 3,
        "node_type": "array",
        "shape": list(shape),
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks)}},
        "chunk_key_encoding": chunk_key_encoding or {"name": "default", "configuration": {"separator": "/"}},
        "data_type": np.dtype(dtype).name,
        "fill_value": interop.fill_value_json(fill_value, dtype),
        "codecs": codecs,
    }


def _bytes_codec(dtype: str) -> dict:
    if np.dtype(dtype).itemsize == 1:
        return {"name": "bytes"}
    return {"name": "bytes", "configuration": {"endian": "little"}}


def _uncompressed_2d_metadata(zarr_format: int, dtype: str, fill_value: Any) -> dict:
    """A SHAPE_2D/CHUNKS_2D array's metadata in `zarr_format`, with no codec but the serializer."""
    if zarr_format == 2:
        return v2_metadata(SHAPE_2D, CHUNKS_2D, dtype, fill_value)
    return v3_metadata(SHAPE_2D, CHUNKS_2D, dtype, fill_value, codecs=[_bytes_codec(dtype)])


def _write(t: ts.TensorStore, region: Any, values: np.ndarray) -> None:
    if values.dtype.kind == "S":
        # tensorstore's v2 driver stores |Sn as chars along an extra last dimension
        values = np.frombuffer(values.tobytes(), dtype="S1").reshape(*values.shape, values.dtype.itemsize)
    t[region].write(values).result()


# --- data types and fill values ------------------------------------------------------


@pytest.mark.parametrize(("zarr_format", "dtype"), TS_READS_DTYPE_CASES)
def test_tensorstore_reads_partially_written_asyncarr_array_of_every_supported_dtype(tmp_path, zarr_format, dtype):
    fill_value = interop.FILL_VALUES[dtype]
    data = interop.write_partial_2d_with_asyncarr(tmp_path, dtype=dtype, fill_value=fill_value, zarr_format=zarr_format)

    t = ts_open(tmp_path, zarr_format)
    assert t.shape == SHAPE_2D
    assert t.chunk_layout.read_chunk.shape == CHUNKS_2D
    assert t.dtype.numpy_dtype == np.dtype(dtype).newbyteorder("=")
    interop.assert_same_fill_value(t.fill_value, fill_value, dtype)
    np.testing.assert_array_equal(t.read().result(), interop.partially_written(data, fill_value, REGION_2D))


@pytest.mark.parametrize(("zarr_format", "dtype"), TS_WRITES_DTYPE_CASES)
def test_asyncarr_reads_partially_written_tensorstore_array_of_every_supported_dtype(tmp_path, zarr_format, dtype):
    data = interop.sample(dtype, SHAPE_2D)
    fill_value = interop.FILL_VALUES[dtype]
    t = ts_create(tmp_path, zarr_format, _uncompressed_2d_metadata(zarr_format, dtype, fill_value))
    _write(t, REGION_2D, data[REGION_2D])

    interop.assert_asyncarr_reads_partial_2d(tmp_path, data, fill_value, zarr_format=zarr_format, dtype=dtype)


@pytest.mark.parametrize("zarr_format", interop.FORMATS)
@pytest.mark.parametrize("dtype", interop.FLOAT_DTYPES)
def test_tensorstore_reads_nan_fill_of_partially_written_asyncarr_array(tmp_path, zarr_format, dtype):
    data = interop.write_partial_2d_with_asyncarr(tmp_path, dtype=dtype, fill_value=np.nan, zarr_format=zarr_format)

    t = ts_open(tmp_path, zarr_format)
    assert np.isnan(t.fill_value)
    interop.assert_nan_filled_outside_region_2d(t.read().result(), data)


@pytest.mark.parametrize("zarr_format", interop.FORMATS)
@pytest.mark.parametrize("dtype", interop.FLOAT_DTYPES)
def test_asyncarr_reads_nan_fill_of_partially_written_tensorstore_array(tmp_path, zarr_format, dtype):
    data = interop.sample(dtype, SHAPE_2D)
    t = ts_create(tmp_path, zarr_format, _uncompressed_2d_metadata(zarr_format, dtype, np.nan))
    _write(t, REGION_2D, data[REGION_2D])

    interop.assert_asyncarr_reads_nan_fill_2d(tmp_path, data)


# --- codecs -----------------------------------------------------------------------------


@pytest.mark.parametrize("zarr_format", interop.FORMATS)
@pytest.mark.parametrize("case", TS_CODEC_CASES, ids=interop.case_id)
def test_tensorstore_reads_asyncarr_array_with_each_compressor(tmp_path, zarr_format, case: interop.CodecCase):
    data = interop.write_codec_case_with_asyncarr(tmp_path, case, zarr_format)

    t = ts_open(tmp_path, zarr_format)
    assert interop.summarize_codecs(ts_metadata(t), zarr_format) == case.summary()
    np.testing.assert_array_equal(t.read().result(), data)


@pytest.mark.parametrize("zarr_format", interop.FORMATS)
@pytest.mark.parametrize("case", TS_CODEC_CASES, ids=interop.case_id)
def test_asyncarr_reads_tensorstore_array_with_each_compressor(tmp_path, zarr_format, case: interop.CodecCase):
    data = interop.sample(interop.CODEC_DTYPE, SHAPE_2D)
    if zarr_format == 2:
        metadata = v2_metadata(SHAPE_2D, CHUNKS_2D, interop.CODEC_DTYPE, 0, compressor=case.v2_compressor_json())
    else:
        metadata = v3_metadata(
            SHAPE_2D,
            CHUNKS_2D,
            interop.CODEC_DTYPE,
            0,
            codecs=case.v3_codecs_json(np.dtype(interop.CODEC_DTYPE)),
        )
    t = ts_create(tmp_path, zarr_format, metadata)
    t.write(data).result()
    assert interop.summarize_codecs(ts_metadata(t), zarr_format) == case.summary()

    interop.assert_asyncarr_reads(tmp_path, data)


@pytest.mark.parametrize("chain_id", sorted(interop.V3_CODEC_CHAINS))
def test_tensorstore_reads_asyncarr_array_written_with_v3_codec_chain(tmp_path, chain_id):
    chain = interop.V3_CODEC_CHAINS[chain_id]
    data = interop.write_codec_chain_with_asyncarr(tmp_path, chain)

    t = ts_open(tmp_path, 3)
    assert interop.codec_names(ts_metadata(t)["codecs"]) == interop.codec_names(chain)
    np.testing.assert_array_equal(t.read().result(), data)


@pytest.mark.parametrize("chain_id", sorted(interop.V3_CODEC_CHAINS))
def test_asyncarr_reads_tensorstore_array_written_with_v3_codec_chain(tmp_path, chain_id):
    chain = interop.V3_CODEC_CHAINS[chain_id]
    data = interop.sample("<i4", SHAPE_2D)
    t = ts_create(tmp_path, 3, v3_metadata(SHAPE_2D, CHUNKS_2D, "<i4", 0, codecs=chain))
    t.write(data).result()
    assert interop.codec_names(interop.metadata_document(tmp_path, 3)["codecs"]) == interop.codec_names(chain)

    interop.assert_asyncarr_reads(tmp_path, data)


# --- layouts: order x chunk key encoding ----------------------------------------------------


_INNER_ORDER = {"C": (0, 1, 2), "F": (2, 1, 0)}


@pytest.mark.parametrize("order", interop.ORDERS)
@pytest.mark.parametrize("case", interop.LAYOUT_CASES, ids=interop.case_id)
def test_tensorstore_reads_asyncarr_array_in_each_order_and_chunk_key_layout(tmp_path, case: interop.LayoutCase, order):
    data = interop.write_layout_case_with_asyncarr(tmp_path, case, order)

    t = ts_open(tmp_path, case.zarr_format)
    assert t.chunk_layout.inner_order == _INNER_ORDER[order]
    assert t.chunk_layout.read_chunk.shape == CHUNKS_3D
    np.testing.assert_array_equal(t.read().result(), data)
    # and tensorstore finds chunk (1, 0, 1) where the layout puts it
    assert np.array_equal(t[2:4, 0:3, 4:6].read().result(), data[2:4, 0:3, 4:6])


@pytest.mark.parametrize("order", interop.ORDERS)
@pytest.mark.parametrize("case", interop.LAYOUT_CASES, ids=interop.case_id)
def test_asyncarr_reads_tensorstore_array_in_each_order_and_chunk_key_layout(tmp_path, case: interop.LayoutCase, order):
    data = interop.sample(interop.LAYOUT_DTYPE, SHAPE_3D)
    if case.zarr_format == 2:
        metadata = v2_metadata(SHAPE_3D, CHUNKS_3D, interop.LAYOUT_DTYPE, 0, order=order, separator=case.encoding)
    else:
        codecs = ([interop.transpose_json(3)] if order == "F" else []) + [_bytes_codec(interop.LAYOUT_DTYPE)]
        metadata = v3_metadata(
            SHAPE_3D,
            CHUNKS_3D,
            interop.LAYOUT_DTYPE,
            0,
            codecs=codecs,
            chunk_key_encoding=case.encoding,
        )
    ts_create(tmp_path, case.zarr_format, metadata).write(data).result()
    assert (tmp_path / case.key_of_chunk_101).is_file()

    interop.assert_asyncarr_reads_layout(tmp_path, data, order)


# --- the async API --------------------------------------------------------------------------


@pytest.mark.parametrize("zarr_format", interop.FORMATS)
def test_tensorstore_reads_array_written_through_async_api(tmp_path, zarr_format):
    data = interop.write_partial_2d_with_async_api(tmp_path, dtype="i8", fill_value=-9, zarr_format=zarr_format)

    t = ts_open(tmp_path, zarr_format)
    np.testing.assert_array_equal(t.read().result(), interop.partially_written(data, -9, REGION_2D))


@pytest.mark.parametrize("zarr_format", interop.FORMATS)
def test_async_api_reads_tensorstore_array_like_numpy(tmp_path, zarr_format):
    data = interop.sample("f4", SHAPE_3D)
    if zarr_format == 2:
        metadata = v2_metadata(SHAPE_3D, CHUNKS_3D, "f4", 0.5, order="F")
    else:
        metadata = v3_metadata(SHAPE_3D, CHUNKS_3D, "f4", 0.5, codecs=[interop.transpose_json(3), _bytes_codec("f4")])
    region = (slice(1, 4), slice(None), slice(2, 6))
    ts_create(tmp_path, zarr_format, metadata)[region].write(data[region]).result()
    wanted = [Ellipsis, (slice(None, None, -1), 1, slice(1, 6, 2)), (4, 3, 5), (slice(3, 0, -2), slice(None), 2)]

    interop.assert_async_api_reads_like_numpy(
        tmp_path, interop.partially_written(data, 0.5, region), zarr_format, wanted
    )
