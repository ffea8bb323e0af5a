"""asyncarr and zarr-python 3 read each other's arrays, groups and consolidated metadata on disk, both formats."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import zarr
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
    partially_written,
    sample,
    selections,
    summarize_v2,
    summarize_v3,
    transpose_json,
)

import asyncarr
import asyncarr.sync as za

pytestmark = [
    # zarr-python flags S/U/M8/m8 in v3 and v3 consolidated metadata as not yet specified; that is its own caveat.
    pytest.mark.filterwarnings("ignore::zarr.errors.UnstableSpecificationWarning"),
    pytest.mark.filterwarnings("ignore::zarr.errors.ZarrUserWarning"),
]

FORMATS = [2, 3]
DTYPE_CASES = [(fmt, dtype) for fmt in FORMATS for dtype in DTYPES] + [(2, dtype) for dtype in BIG_ENDIAN_V2_DTYPES]


def _json(value):
    """Normalize tuples to lists so metadata compares as JSON."""
    return json.loads(json.dumps(value))


def _chunk_key(zarr_format: int, coords: tuple[int, ...]) -> str:
    """The key of a chunk with each format's default chunk key encoding."""
    return ".".join(map(str, coords)) if zarr_format == 2 else "c/" + "/".join(map(str, coords))


# --- data types and fill values ----------------------------------------------


@pytest.mark.parametrize(("zarr_format", "dtype"), DTYPE_CASES)
def test_zarr_python_reads_partially_written_asyncarr_array_of_every_dtype(tmp_path, zarr_format, dtype):
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

    b = zarr.open_array(str(tmp_path), mode="r")
    assert b.metadata.zarr_format == zarr_format
    assert b.shape == SHAPE_2D
    assert b.chunks == CHUNKS_2D
    assert b.dtype == np.dtype(dtype)
    assert_same_fill_value(b.fill_value, fill_value, dtype)
    np.testing.assert_array_equal(b[...], partially_written(data, fill_value, REGION_2D))


@pytest.mark.parametrize(("zarr_format", "dtype"), DTYPE_CASES)
def test_asyncarr_reads_partially_written_zarr_python_array_of_every_dtype(tmp_path, zarr_format, dtype):
    data = sample(dtype, SHAPE_2D)
    fill_value = FILL_VALUES[dtype]
    b = zarr.create_array(
        store=str(tmp_path),
        shape=SHAPE_2D,
        chunks=CHUNKS_2D,
        dtype=dtype,
        fill_value=fill_value,
        zarr_format=zarr_format,
    )
    b[REGION_2D] = data[REGION_2D]

    z = za.open_array(str(tmp_path), mode="r")
    assert z.zarr_format == zarr_format
    assert z.shape == SHAPE_2D
    assert z.chunks == CHUNKS_2D
    assert z.dtype == np.dtype(dtype)
    assert_same_fill_value(z.fill_value, fill_value, dtype)
    assert_reads_like_numpy(z, partially_written(data, fill_value, REGION_2D))


@pytest.mark.parametrize(("zarr_format", "dtype"), [(fmt, dtype) for fmt in FORMATS for dtype in DTYPES])
def test_default_fill_value_of_asyncarr_array_is_what_zarr_python_reads_for_missing_chunks(
    tmp_path, zarr_format, dtype
):
    z = za.open_array(str(tmp_path), mode="w", shape=SHAPE_2D, chunks=CHUNKS_2D, dtype=dtype, zarr_format=zarr_format)
    z[0, 0] = sample(dtype, SHAPE_2D)[0, 0]
    document = json.loads((tmp_path / (".zarray" if zarr_format == 2 else "zarr.json")).read_text())
    if np.dtype(dtype).kind in "biufc":
        # DESIGN: fill_value=None means the dtype's default, written explicitly into the metadata
        assert document["fill_value"] is not None
        assert z.fill_value == 0

    b = zarr.open_array(str(tmp_path), mode="r")
    assert_same_fill_value(b.fill_value, z.fill_value, dtype)
    expected = np.full(SHAPE_2D, z.fill_value, dtype=dtype)
    expected[0, 0] = sample(dtype, SHAPE_2D)[0, 0]
    np.testing.assert_array_equal(b[...], expected)


@pytest.mark.parametrize("zarr_format", FORMATS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_zarr_python_reads_nan_fill_of_partially_written_asyncarr_array(tmp_path, zarr_format, dtype):
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
    # chunk (2, 0) lies wholly outside the written region: it was never stored
    assert not (tmp_path / _chunk_key(zarr_format, (2, 0))).exists()

    b = zarr.open_array(str(tmp_path), mode="r")
    assert np.isnan(b.fill_value)
    result = b[...]
    np.testing.assert_array_equal(result, partially_written(data, np.nan, REGION_2D))
    assert np.isnan(result[4:, :]).all()


@pytest.mark.parametrize("zarr_format", FORMATS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_asyncarr_reads_nan_fill_of_partially_written_zarr_python_array(tmp_path, zarr_format, dtype):
    data = sample(dtype, SHAPE_2D)
    b = zarr.create_array(
        store=str(tmp_path),
        shape=SHAPE_2D,
        chunks=CHUNKS_2D,
        dtype=dtype,
        fill_value=np.nan,
        zarr_format=zarr_format,
    )
    b[REGION_2D] = data[REGION_2D]

    z = za.open_array(str(tmp_path), mode="r")
    assert np.isnan(z.fill_value)
    expected = partially_written(data, np.nan, REGION_2D)
    assert_reads_like_numpy(z, expected)
    assert np.isnan(z[4:, :]).all()


# --- codecs ---------------------------------------------------------------------


@pytest.mark.parametrize("zarr_format", FORMATS)
@pytest.mark.parametrize("case", CODEC_CASES, ids=lambda case: case.id)
def test_zarr_python_reads_asyncarr_array_with_each_compressor_and_filter(tmp_path, zarr_format, case: CodecCase):
    data = sample(CODEC_DTYPE, SHAPE_2D)
    z = za.open_array(
        str(tmp_path),
        mode="w",
        shape=SHAPE_2D,
        chunks=CHUNKS_2D,
        dtype=CODEC_DTYPE,
        compressor=case.compressor,
        filters=list(case.filters) or None,
        zarr_format=zarr_format,
    )
    z[...] = data

    b = zarr.open_array(str(tmp_path), mode="r")
    metadata = _json(b.metadata.to_dict())
    assert (summarize_v2(metadata) if zarr_format == 2 else summarize_v3(metadata)) == case.summary()
    np.testing.assert_array_equal(b[...], data)


@pytest.mark.parametrize("zarr_format", FORMATS)
@pytest.mark.parametrize("case", CODEC_CASES, ids=lambda case: case.id)
def test_asyncarr_reads_zarr_python_array_with_each_compressor_and_filter(tmp_path, zarr_format, case: CodecCase):
    data = sample(CODEC_DTYPE, SHAPE_2D)
    if zarr_format == 2:
        codec_kwargs = {"compressors": case.compressor, "filters": list(case.filters) or None}
    else:
        codec_kwargs = {"compressors": case.v3_compressors_json() or None, "filters": case.v3_filters_json() or None}
    b = zarr.create_array(
        store=str(tmp_path),
        shape=SHAPE_2D,
        chunks=CHUNKS_2D,
        dtype=CODEC_DTYPE,
        zarr_format=zarr_format,
        **codec_kwargs,
    )
    b[...] = data
    metadata = _json(b.metadata.to_dict())
    assert (summarize_v2(metadata) if zarr_format == 2 else summarize_v3(metadata)) == case.summary()

    z = za.open_array(str(tmp_path), mode="r")
    assert_reads_like_numpy(z, data)


@pytest.mark.parametrize("chain_id", sorted(V3_CODEC_CHAINS))
def test_zarr_python_reads_asyncarr_array_written_with_v3_codec_chain(tmp_path, chain_id):
    chain = V3_CODEC_CHAINS[chain_id]
    data = sample("<i4", SHAPE_2D)
    z = za.open_array(
        str(tmp_path), mode="w", shape=SHAPE_2D, chunks=CHUNKS_2D, dtype="<i4", codecs=chain, zarr_format=3
    )
    z[...] = data

    b = zarr.open_array(str(tmp_path), mode="r")
    codecs = _json(b.metadata.to_dict()["codecs"])
    assert [c["name"] for c in codecs] == [c["name"] for c in chain]
    assert [c.get("configuration", {}).get("endian") for c in codecs] == [
        c.get("configuration", {}).get("endian") for c in chain
    ]
    np.testing.assert_array_equal(b[...], data)


@pytest.mark.parametrize("chain_id", sorted(V3_CODEC_CHAINS))
def test_asyncarr_reads_zarr_python_array_written_with_v3_codec_chain(tmp_path, chain_id):
    chain = V3_CODEC_CHAINS[chain_id]
    serializer_at = next(i for i, c in enumerate(chain) if c["name"] == "bytes")
    data = sample("<i4", SHAPE_2D)
    b = zarr.create_array(
        store=str(tmp_path),
        shape=SHAPE_2D,
        chunks=CHUNKS_2D,
        dtype="<i4",
        filters=chain[:serializer_at] or None,
        serializer=chain[serializer_at],
        compressors=chain[serializer_at + 1 :] or None,
        zarr_format=3,
    )
    b[...] = data
    assert [c["name"] for c in _json(b.metadata.to_dict()["codecs"])] == [c["name"] for c in chain]

    z = za.open_array(str(tmp_path), mode="r")
    assert_reads_like_numpy(z, data)


# --- layouts: order x chunk key encoding -----------------------------------------


def _layout_ids(case: LayoutCase) -> str:
    return case.id


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("case", LAYOUT_CASES, ids=_layout_ids)
def test_zarr_python_reads_asyncarr_array_in_each_order_and_chunk_key_layout(tmp_path, case: LayoutCase, order):
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

    b = zarr.open_array(str(tmp_path), mode="r")
    metadata = _json(b.metadata.to_dict())
    if case.zarr_format == 2:
        assert metadata["order"] == order
        assert metadata["dimension_separator"] == case.encoding
    else:
        assert metadata["chunk_key_encoding"] == case.encoding
        # v3 records Fortran order as a leading transpose codec
        assert (metadata["codecs"][0] == transpose_json(3)) == (order == "F")
    np.testing.assert_array_equal(b[...], data)


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("case", LAYOUT_CASES, ids=_layout_ids)
def test_asyncarr_reads_zarr_python_array_in_each_order_and_chunk_key_layout(tmp_path, case: LayoutCase, order):
    data = sample(LAYOUT_DTYPE, SHAPE_3D)
    if case.zarr_format == 2:
        layout_kwargs = {"order": order, "chunk_key_encoding": {"name": "v2", "separator": case.encoding}}
    else:
        layout_kwargs = {
            "chunk_key_encoding": {"name": case.encoding["name"], **case.encoding["configuration"]},
            "filters": [transpose_json(3)] if order == "F" else None,
        }
    b = zarr.create_array(
        store=str(tmp_path),
        shape=SHAPE_3D,
        chunks=CHUNKS_3D,
        dtype=LAYOUT_DTYPE,
        zarr_format=case.zarr_format,
        **layout_kwargs,
    )
    b[...] = data
    assert (tmp_path / case.key_of_chunk_101).is_file()

    z = za.open_array(str(tmp_path), mode="r")
    assert z.order == order
    assert z.chunks == CHUNKS_3D
    assert_reads_like_numpy(z, data)


# --- the async API ------------------------------------------------------------------


@pytest.mark.parametrize("zarr_format", FORMATS)
def test_zarr_python_reads_array_written_through_async_api(tmp_path, zarr_format):
    data = sample("f4", SHAPE_2D)

    async def write() -> None:
        z = await asyncarr.open_array(
            str(tmp_path),
            mode="w",
            shape=SHAPE_2D,
            chunks=CHUNKS_2D,
            dtype="f4",
            fill_value=-1.0,
            zarr_format=zarr_format,
        )
        await z.setitem(REGION_2D, data[REGION_2D])

    asyncio.run(write())
    b = zarr.open_array(str(tmp_path), mode="r")
    np.testing.assert_array_equal(b[...], partially_written(data, -1.0, REGION_2D))


@pytest.mark.parametrize("zarr_format", FORMATS)
def test_async_api_reads_zarr_python_array_like_numpy(tmp_path, zarr_format):
    data = sample("c16", SHAPE_2D)
    b = zarr.create_array(
        store=str(tmp_path), shape=SHAPE_2D, chunks=CHUNKS_2D, dtype="c16", fill_value=2j, zarr_format=zarr_format
    )
    b[REGION_2D] = data[REGION_2D]
    expected = partially_written(data, 2j, REGION_2D)

    async def read_all() -> list[np.ndarray]:
        z = await asyncarr.open_array(str(tmp_path), mode="r")
        assert z.zarr_format == zarr_format
        return [await z.getitem(selection) for selection in selections(2)]

    for selection, result in zip(selections(2), asyncio.run(read_all()), strict=True):
        np.testing.assert_array_equal(result, expected[selection], err_msg=f"selection {selection!r}")


# --- groups and consolidated metadata ---------------------------------------------

ROOT_ATTRS = {"title": "interop ✓", "version": 3, "ratio": 0.5, "flags": [True, False, None], "nested": {"a": [1, 2]}}
G1_ATTRS = {"description": "first group", "empty": {}}
X_ATTRS = {"units": "m", "scale": [1.5, -2]}
Y_ATTRS = {"_ARRAY_DIMENSIONS": ["row", "col"]}
X_DATA = np.arange(10, dtype="i4") * 3
Y_DATA = sample("f8", (3, 4))
#: every node below the root, by path
MEMBERS = ["g1", "g1/sub", "g1/x", "y"]


def _build_tree_with_asyncarr(path: Path, zarr_format: int) -> None:
    root = za.open_group(str(path), mode="w", zarr_format=zarr_format)
    root.attrs.update(ROOT_ATTRS)
    g1 = root.create_group("g1")
    g1.attrs.update(G1_ATTRS)
    g1.create_group("sub")
    x = g1.create_array("x", shape=X_DATA.shape, chunks=(4,), dtype=X_DATA.dtype)
    x[...] = X_DATA
    x.attrs.update(X_ATTRS)
    y = root.create_array("y", shape=Y_DATA.shape, chunks=(2, 3), dtype=Y_DATA.dtype, fill_value=np.nan)
    y[:2] = Y_DATA[:2]
    y.attrs.update(Y_ATTRS)


def _build_tree_with_zarr_python(path: Path, zarr_format: int) -> None:
    root = zarr.open_group(str(path), mode="w", zarr_format=zarr_format)
    root.attrs.update(ROOT_ATTRS)
    g1 = root.create_group("g1")
    g1.attrs.update(G1_ATTRS)
    g1.create_group("sub")
    x = g1.create_array("x", shape=X_DATA.shape, chunks=(4,), dtype=X_DATA.dtype)
    x[...] = X_DATA
    x.attrs.update(X_ATTRS)
    y = root.create_array("y", shape=Y_DATA.shape, chunks=(2, 3), dtype=Y_DATA.dtype, fill_value=np.nan)
    y[:2] = Y_DATA[:2]
    y.attrs.update(Y_ATTRS)


def _expected_y() -> np.ndarray:
    return partially_written(Y_DATA, np.nan, (slice(0, 2),))


def _assert_zarr_python_sees_tree(root) -> None:
    assert sorted(root.group_keys()) == ["g1"]
    assert sorted(root.array_keys()) == ["y"]
    assert dict(root.attrs) == ROOT_ATTRS
    g1 = root["g1"]
    assert sorted(g1.group_keys()) == ["sub"]
    assert sorted(g1.array_keys()) == ["x"]
    assert dict(g1.attrs) == G1_ATTRS
    assert dict(root["g1/sub"].attrs) == {}
    assert dict(root["g1/x"].attrs) == X_ATTRS
    assert dict(root["y"].attrs) == Y_ATTRS
    np.testing.assert_array_equal(root["g1/x"][...], X_DATA)
    np.testing.assert_array_equal(root["y"][...], _expected_y())


def _assert_asyncarr_sees_tree(root) -> None:
    assert sorted(root.group_keys()) == ["g1"]
    assert sorted(root.array_keys()) == ["y"]
    assert sorted(root.keys()) == ["g1", "y"]
    assert dict(root.attrs) == ROOT_ATTRS
    g1 = root["g1"]
    assert sorted(g1.group_keys()) == ["sub"]
    assert sorted(g1.array_keys()) == ["x"]
    assert dict(g1.attrs) == G1_ATTRS
    assert dict(root["g1/sub"].attrs) == {}
    assert dict(root["g1/x"].attrs) == X_ATTRS
    assert dict(root["y"].attrs) == Y_ATTRS
    np.testing.assert_array_equal(root["g1/x"][...], X_DATA)
    np.testing.assert_array_equal(root["y"][...], _expected_y())


@pytest.mark.parametrize("zarr_format", FORMATS)
def test_zarr_python_sees_members_attributes_and_data_of_asyncarr_group_tree(tmp_path, zarr_format):
    _build_tree_with_asyncarr(tmp_path, zarr_format)

    root = zarr.open_group(str(tmp_path), mode="r", use_consolidated=False)
    assert root.metadata.zarr_format == zarr_format
    _assert_zarr_python_sees_tree(root)


@pytest.mark.parametrize("zarr_format", FORMATS)
def test_asyncarr_sees_members_attributes_and_data_of_zarr_python_group_tree(tmp_path, zarr_format):
    _build_tree_with_zarr_python(tmp_path, zarr_format)

    root = za.open_group(str(tmp_path), mode="r")
    _assert_asyncarr_sees_tree(root)


@pytest.mark.parametrize("zarr_format", FORMATS)
def test_zarr_python_opens_consolidated_metadata_written_by_asyncarr(tmp_path, zarr_format):
    _build_tree_with_asyncarr(tmp_path, zarr_format)
    za.consolidate_metadata(str(tmp_path))
    if zarr_format == 2:
        assert (tmp_path / ".zmetadata").is_file()
    else:
        assert json.loads((tmp_path / "zarr.json").read_text())["consolidated_metadata"] is not None

    root = zarr.open_consolidated(str(tmp_path), zarr_format=zarr_format)
    assert sorted(root.metadata.consolidated_metadata.flattened_metadata) == MEMBERS
    _assert_zarr_python_sees_tree(root)


@pytest.mark.parametrize("zarr_format", FORMATS)
def test_zarr_python_reads_members_from_asyncarr_consolidated_metadata_alone(tmp_path, zarr_format):
    _build_tree_with_asyncarr(tmp_path, zarr_format)
    za.consolidate_metadata(str(tmp_path))
    # Without its own metadata document, g1/x is described only by the consolidated metadata.
    for name in (".zarray", ".zattrs", "zarr.json"):
        (tmp_path / "g1" / "x" / name).unlink(missing_ok=True)

    root = zarr.open_consolidated(str(tmp_path), zarr_format=zarr_format)
    assert dict(root["g1/x"].attrs) == X_ATTRS
    np.testing.assert_array_equal(root["g1/x"][...], X_DATA)


@pytest.mark.parametrize("zarr_format", FORMATS)
def test_asyncarr_lists_members_of_zarr_python_consolidated_group(tmp_path, zarr_format):
    _build_tree_with_zarr_python(tmp_path, zarr_format)
    zarr.consolidate_metadata(str(tmp_path))

    root = za.open_group(str(tmp_path), mode="r")
    _assert_asyncarr_sees_tree(root)


@pytest.mark.parametrize("zarr_format", FORMATS)
def test_asyncarr_reads_members_from_zarr_python_consolidated_metadata_alone(tmp_path, zarr_format):
    _build_tree_with_zarr_python(tmp_path, zarr_format)
    zarr.consolidate_metadata(str(tmp_path))
    # Consolidated metadata is read when present (DESIGN): member documents are then not needed.
    shutil.rmtree(tmp_path / "g1" / "sub")
    for name in (".zarray", ".zattrs", "zarr.json"):
        (tmp_path / "g1" / "x" / name).unlink(missing_ok=True)

    root = za.open_group(str(tmp_path), mode="r")
    assert sorted(root["g1"].group_keys()) == ["sub"]
    assert sorted(root["g1"].array_keys()) == ["x"]
    assert dict(root["g1/x"].attrs) == X_ATTRS
    np.testing.assert_array_equal(root["g1/x"][...], X_DATA)
