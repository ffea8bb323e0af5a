"""asyncarr and zarr-python 3 read each other's arrays, groups and consolidated metadata on disk, both formats."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import ModuleType
from typing import Any

import interop_cases as interop
import numpy as np
import pytest
import zarr
from interop_cases import CHUNKS_2D, CHUNKS_3D, REGION_2D, SHAPE_2D, SHAPE_3D

import asyncarr.sync as za

pytestmark = interop.ZARR_PYTHON_WARNING_FILTERS

DTYPE_CASES = [(fmt, dtype) for fmt in interop.FORMATS for dtype in interop.DTYPES] + [
    (2, dtype) for dtype in interop.BIG_ENDIAN_V2_DTYPES
]


def _json(value: Any) -> Any:
    """Normalize tuples to lists so metadata compares as JSON."""
    return json.loads(json.dumps(value))


def _chunk_key(zarr_format: int, coords: tuple[int, ...]) -> str:
    """The key of a chunk with each format's default chunk key encoding."""
    return ".".join(map(str, coords)) if zarr_format == 2 else "c/" + "/".join(map(str, coords))


def _write_with_zarr_python(path: Path, data: np.ndarray, region: Any = Ellipsis, **create_kwargs: Any) -> zarr.Array:
    """Create a zarr-python array at `path` shaped like `data` and write only `data[region]` into it."""
    array = zarr.create_array(store=str(path), shape=data.shape, **create_kwargs)
    array[region] = data[region]
    return array


def _write_partial_2d_with_zarr_python(path: Path, *, dtype: str, fill_value: Any, zarr_format: int) -> np.ndarray:
    """Write REGION_2D of a SHAPE_2D sample into a new CHUNKS_2D zarr-python array; return the sample."""
    data = interop.sample(dtype, SHAPE_2D)
    _write_with_zarr_python(
        path, data, REGION_2D, chunks=CHUNKS_2D, dtype=dtype, fill_value=fill_value, zarr_format=zarr_format
    )
    return data


# --- data types and fill values ----------------------------------------------


@pytest.mark.parametrize(("zarr_format", "dtype"), DTYPE_CASES)
def test_zarr_python_reads_partially_written_asyncarr_array_of_every_dtype(tmp_path, zarr_format, dtype):
    fill_value = interop.FILL_VALUES[dtype]
    data = interop.write_partial_2d_with_asyncarr(tmp_path, dtype=dtype, fill_value=fill_value, zarr_format=zarr_format)

    b = zarr.open_array(str(tmp_path), mode="r")
    assert b.metadata.zarr_format == zarr_format
    assert b.shape == SHAPE_2D
    assert b.chunks == CHUNKS_2D
    assert b.dtype == np.dtype(dtype)
    interop.assert_same_fill_value(b.fill_value, fill_value, dtype)
    np.testing.assert_array_equal(b[...], interop.partially_written(data, fill_value, REGION_2D))


@pytest.mark.parametrize(("zarr_format", "dtype"), DTYPE_CASES)
def test_asyncarr_reads_partially_written_zarr_python_array_of_every_dtype(tmp_path, zarr_format, dtype):
    fill_value = interop.FILL_VALUES[dtype]
    data = _write_partial_2d_with_zarr_python(tmp_path, dtype=dtype, fill_value=fill_value, zarr_format=zarr_format)

    interop.assert_asyncarr_reads_partial_2d(tmp_path, data, fill_value, zarr_format=zarr_format, dtype=dtype)


@pytest.mark.parametrize(
    ("zarr_format", "dtype"), [(fmt, dtype) for fmt in interop.FORMATS for dtype in interop.DTYPES]
)
def test_default_fill_value_of_asyncarr_array_is_what_zarr_python_reads_for_missing_chunks(
    tmp_path, zarr_format, dtype
):
    z = za.open_array(str(tmp_path), mode="w", shape=SHAPE_2D, chunks=CHUNKS_2D, dtype=dtype, zarr_format=zarr_format)
    z[0, 0] = interop.sample(dtype, SHAPE_2D)[0, 0]
    document = interop.metadata_document(tmp_path, zarr_format)
    if np.dtype(dtype).kind in "biufc":
        # No fill_value given: the dtype's default, written explicitly in both formats (as zarr-python 3)
        assert document["fill_value"] is not None
        assert z.fill_value == 0

    b = zarr.open_array(str(tmp_path), mode="r")
    interop.assert_same_fill_value(b.fill_value, z.fill_value, dtype)
    expected = np.full(SHAPE_2D, z.fill_value, dtype=dtype)
    expected[0, 0] = interop.sample(dtype, SHAPE_2D)[0, 0]
    np.testing.assert_array_equal(b[...], expected)


#: The fill value a creation call gives, by what the caller passed: zarr-python 3 writes the
#: dtype's default when given nothing, and v2 ``null`` (v3: the default) when given None.
FILL_VALUE_ARGUMENTS = {"not-given": {}, "None": {"fill_value": None}}


@pytest.mark.parametrize("given", list(FILL_VALUE_ARGUMENTS))
@pytest.mark.parametrize(("zarr_format", "dtype"), DTYPE_CASES + [(fmt, str) for fmt in interop.FORMATS])
def test_fill_value_written_at_creation_is_what_zarr_python_writes(tmp_path, zarr_format, dtype, given):
    fill = FILL_VALUE_ARGUMENTS[given]
    ours = za.create(
        SHAPE_2D, chunks=CHUNKS_2D, dtype=dtype, zarr_format=zarr_format, compressor=None,
        store=str(tmp_path / "ours"), **fill,
    )  # fmt: skip
    theirs = zarr.create_array(
        str(tmp_path / "theirs"), shape=SHAPE_2D, chunks=CHUNKS_2D, dtype=dtype, zarr_format=zarr_format,
        compressors=None, **fill,
    )  # fmt: skip
    our_document = interop.metadata_document(tmp_path / "ours", zarr_format)
    their_document = interop.metadata_document(tmp_path / "theirs", zarr_format)
    assert our_document["fill_value"] == their_document["fill_value"]
    if dtype is not str:  # zarr-python spells a variable-length string codec's empty configuration out
        assert our_document == their_document
    assert (zarr_format == 2 and given == "None") == (our_document["fill_value"] is None)
    assert (ours.fill_value is None) == (theirs.fill_value is None)
    if ours.fill_value is not None:
        interop.assert_same_fill_value(ours.fill_value, theirs.fill_value, dtype)


@pytest.mark.parametrize("dtype", interop.DTYPES + interop.BIG_ENDIAN_V2_DTYPES)
def test_missing_chunks_of_a_null_fill_v2_array_read_as_zarr_python_reads_them(tmp_path, dtype):
    data = interop.sample(dtype, SHAPE_2D)
    ours = za.create(SHAPE_2D, chunks=CHUNKS_2D, dtype=dtype, zarr_format=2, fill_value=None, store=str(tmp_path / "a"))
    ours[REGION_2D] = data[REGION_2D]
    theirs = _write_with_zarr_python(
        tmp_path / "z", data, REGION_2D, chunks=CHUNKS_2D, dtype=dtype, zarr_format=2, fill_value=None
    )
    # Missing chunks read as the dtype's default (zero, False, empty, NaT) in both libraries, either way round.
    default = np.zeros((), dtype=dtype) if np.dtype(dtype).kind not in "Mm" else np.array("NaT", dtype=dtype)
    expected = interop.partially_written(data, default, REGION_2D)
    for path in (tmp_path / "a", tmp_path / "z"):
        read_by_zarr, read_by_us = zarr.open_array(str(path), mode="r"), za.open_array(str(path), mode="r")
        assert read_by_zarr.fill_value is None and read_by_us.fill_value is None
        np.testing.assert_array_equal(read_by_zarr[...], expected)
        interop.assert_reads_like_numpy(read_by_us, expected)
    assert "Chunks initialized" in str(ours.info)
    # Both store the same chunks, and both drop a chunk that becomes all default (chunk 0.0 here).
    assert _chunk_names(tmp_path / "a") == _chunk_names(tmp_path / "z")
    ours[0:3, 0:2] = default
    theirs[0:3, 0:2] = default
    assert _chunk_names(tmp_path / "a") == _chunk_names(tmp_path / "z")
    assert "0.0" not in _chunk_names(tmp_path / "a")


def _chunk_names(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir() if not p.name.startswith("."))


@pytest.mark.parametrize("zarr_format", interop.FORMATS)
@pytest.mark.parametrize("dtype", interop.FLOAT_DTYPES)
def test_zarr_python_reads_nan_fill_of_partially_written_asyncarr_array(tmp_path, zarr_format, dtype):
    data = interop.write_partial_2d_with_asyncarr(tmp_path, dtype=dtype, fill_value=np.nan, zarr_format=zarr_format)
    # chunk (2, 0) lies wholly outside the written region: it was never stored
    assert not (tmp_path / _chunk_key(zarr_format, (2, 0))).exists()

    b = zarr.open_array(str(tmp_path), mode="r")
    assert np.isnan(b.fill_value)
    interop.assert_nan_filled_outside_region_2d(b[...], data)


@pytest.mark.parametrize("zarr_format", interop.FORMATS)
@pytest.mark.parametrize("dtype", interop.FLOAT_DTYPES)
def test_asyncarr_reads_nan_fill_of_partially_written_zarr_python_array(tmp_path, zarr_format, dtype):
    data = _write_partial_2d_with_zarr_python(tmp_path, dtype=dtype, fill_value=np.nan, zarr_format=zarr_format)

    interop.assert_asyncarr_reads_nan_fill_2d(tmp_path, data)


# --- codecs ---------------------------------------------------------------------


@pytest.mark.parametrize("zarr_format", interop.FORMATS)
@pytest.mark.parametrize("case", interop.CODEC_CASES, ids=interop.case_id)
def test_zarr_python_reads_asyncarr_array_with_each_compressor_and_filter(
    tmp_path, zarr_format, case: interop.CodecCase
):
    data = interop.write_codec_case_with_asyncarr(tmp_path, case, zarr_format)

    b = zarr.open_array(str(tmp_path), mode="r")
    assert interop.summarize_codecs(_json(b.metadata.to_dict()), zarr_format) == case.summary()
    np.testing.assert_array_equal(b[...], data)


@pytest.mark.parametrize("zarr_format", interop.FORMATS)
@pytest.mark.parametrize("case", interop.CODEC_CASES, ids=interop.case_id)
def test_asyncarr_reads_zarr_python_array_with_each_compressor_and_filter(
    tmp_path, zarr_format, case: interop.CodecCase
):
    data = interop.sample(interop.CODEC_DTYPE, SHAPE_2D)
    if zarr_format == 2:
        codec_kwargs = {"compressors": case.compressor, "filters": list(case.filters) or None}
    else:
        codec_kwargs = {"compressors": case.v3_compressors_json() or None, "filters": case.v3_filters_json() or None}
    b = _write_with_zarr_python(
        tmp_path, data, chunks=CHUNKS_2D, dtype=interop.CODEC_DTYPE, zarr_format=zarr_format, **codec_kwargs
    )
    assert interop.summarize_codecs(_json(b.metadata.to_dict()), zarr_format) == case.summary()

    interop.assert_asyncarr_reads(tmp_path, data)


@pytest.mark.parametrize("chain_id", sorted(interop.V3_CODEC_CHAINS))
def test_zarr_python_reads_asyncarr_array_written_with_v3_codec_chain(tmp_path, chain_id):
    chain = interop.V3_CODEC_CHAINS[chain_id]
    data = interop.write_codec_chain_with_asyncarr(tmp_path, chain)

    b = zarr.open_array(str(tmp_path), mode="r")
    codecs = _json(b.metadata.to_dict()["codecs"])
    assert interop.codec_names(codecs) == interop.codec_names(chain)
    assert [c.get("configuration", {}).get("endian") for c in codecs] == [
        c.get("configuration", {}).get("endian") for c in chain
    ]
    np.testing.assert_array_equal(b[...], data)


@pytest.mark.parametrize("chain_id", sorted(interop.V3_CODEC_CHAINS))
def test_asyncarr_reads_zarr_python_array_written_with_v3_codec_chain(tmp_path, chain_id):
    chain = interop.V3_CODEC_CHAINS[chain_id]
    serializer_at = interop.codec_names(chain).index("bytes")
    data = interop.sample("<i4", SHAPE_2D)
    b = _write_with_zarr_python(
        tmp_path,
        data,
        chunks=CHUNKS_2D,
        dtype="<i4",
        filters=chain[:serializer_at] or None,
        serializer=chain[serializer_at],
        compressors=chain[serializer_at + 1 :] or None,
        zarr_format=3,
    )
    assert interop.codec_names(_json(b.metadata.to_dict()["codecs"])) == interop.codec_names(chain)

    interop.assert_asyncarr_reads(tmp_path, data)


# --- layouts: order x chunk key encoding -----------------------------------------


@pytest.mark.parametrize("order", interop.ORDERS)
@pytest.mark.parametrize("case", interop.LAYOUT_CASES, ids=interop.case_id)
def test_zarr_python_reads_asyncarr_array_in_each_order_and_chunk_key_layout(tmp_path, case: interop.LayoutCase, order):
    data = interop.write_layout_case_with_asyncarr(tmp_path, case, order)

    b = zarr.open_array(str(tmp_path), mode="r")
    metadata = _json(b.metadata.to_dict())
    if case.zarr_format == 2:
        assert metadata["order"] == order
        assert metadata["dimension_separator"] == case.encoding
    else:
        assert metadata["chunk_key_encoding"] == case.encoding
        # v3 records Fortran order as a leading transpose codec
        assert (metadata["codecs"][0] == interop.transpose_json(3)) == (order == "F")
    np.testing.assert_array_equal(b[...], data)


@pytest.mark.parametrize("order", interop.ORDERS)
@pytest.mark.parametrize("case", interop.LAYOUT_CASES, ids=interop.case_id)
def test_asyncarr_reads_zarr_python_array_in_each_order_and_chunk_key_layout(tmp_path, case: interop.LayoutCase, order):
    data = interop.sample(interop.LAYOUT_DTYPE, SHAPE_3D)
    if case.zarr_format == 2:
        layout_kwargs = {"order": order, "chunk_key_encoding": {"name": "v2", "separator": case.encoding}}
    else:
        layout_kwargs = {
            "chunk_key_encoding": {"name": case.encoding["name"], **case.encoding["configuration"]},
            "filters": [interop.transpose_json(3)] if order == "F" else None,
        }
    _write_with_zarr_python(
        tmp_path, data, chunks=CHUNKS_3D, dtype=interop.LAYOUT_DTYPE, zarr_format=case.zarr_format, **layout_kwargs
    )
    assert (tmp_path / case.key_of_chunk_101).is_file()

    interop.assert_asyncarr_reads_layout(tmp_path, data, order)


# --- the async API ------------------------------------------------------------------


@pytest.mark.parametrize("zarr_format", interop.FORMATS)
def test_zarr_python_reads_array_written_through_async_api(tmp_path, zarr_format):
    data = interop.write_partial_2d_with_async_api(tmp_path, dtype="f4", fill_value=-1.0, zarr_format=zarr_format)

    b = zarr.open_array(str(tmp_path), mode="r")
    np.testing.assert_array_equal(b[...], interop.partially_written(data, -1.0, REGION_2D))


@pytest.mark.parametrize("zarr_format", interop.FORMATS)
def test_async_api_reads_zarr_python_array_like_numpy(tmp_path, zarr_format):
    data = _write_partial_2d_with_zarr_python(tmp_path, dtype="c16", fill_value=2j, zarr_format=zarr_format)

    interop.assert_async_api_reads_like_numpy(
        tmp_path, interop.partially_written(data, 2j, REGION_2D), zarr_format, interop.selections(2)
    )


# --- groups and consolidated metadata ---------------------------------------------

ROOT_ATTRS = {"title": "interop ✓", "version": 3, "ratio": 0.5, "flags": [True, False, None], "nested": {"a": [1, 2]}}
G1_ATTRS = {"description": "first group", "empty": {}}
X_ATTRS = {"units": "m", "scale": [1.5, -2]}
Y_ATTRS = {"_ARRAY_DIMENSIONS": ["row", "col"]}
X_DATA = np.arange(10, dtype="i4") * 3
Y_DATA = interop.sample("f8", (3, 4))
#: every node below the root, by path
MEMBERS = ["g1", "g1/sub", "g1/x", "y"]


def _build_tree(library: ModuleType, path: Path, zarr_format: int, *, consolidated: bool = False) -> None:
    """Write the test tree with `za` or `zarr`, whose group APIs agree on what it uses; consolidate it if asked."""
    root = library.open_group(str(path), mode="w", zarr_format=zarr_format)
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
    if consolidated:
        library.consolidate_metadata(str(path))


def _assert_sees_tree(root: Any) -> None:
    """The members, attributes and data of the `_build_tree` tree, read through either library's group API."""
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
    np.testing.assert_array_equal(root["y"][...], interop.partially_written(Y_DATA, np.nan, (slice(0, 2),)))


def _assert_asyncarr_sees_tree(path: Path) -> None:
    """asyncarr opens the group at `path` and sees the `_build_tree` tree in it."""
    root = za.open_group(str(path), mode="r")
    assert sorted(root.keys()) == ["g1", "y"]
    _assert_sees_tree(root)


def _delete_metadata_documents(node: Path) -> None:
    """Remove a node's own metadata documents of either format, leaving its chunks."""
    for name in (".zarray", ".zattrs", "zarr.json"):
        (node / name).unlink(missing_ok=True)


@pytest.mark.parametrize("zarr_format", interop.FORMATS)
def test_zarr_python_sees_members_attributes_and_data_of_asyncarr_group_tree(tmp_path, zarr_format):
    _build_tree(za, tmp_path, zarr_format)

    root = zarr.open_group(str(tmp_path), mode="r", use_consolidated=False)
    assert root.metadata.zarr_format == zarr_format
    _assert_sees_tree(root)


@pytest.mark.parametrize("zarr_format", interop.FORMATS)
def test_asyncarr_sees_members_attributes_and_data_of_zarr_python_group_tree(tmp_path, zarr_format):
    _build_tree(zarr, tmp_path, zarr_format)

    _assert_asyncarr_sees_tree(tmp_path)


@pytest.mark.parametrize("zarr_format", interop.FORMATS)
def test_zarr_python_opens_consolidated_metadata_written_by_asyncarr(tmp_path, zarr_format):
    _build_tree(za, tmp_path, zarr_format, consolidated=True)
    if zarr_format == 2:
        assert (tmp_path / ".zmetadata").is_file()
    else:
        assert interop.metadata_document(tmp_path, 3)["consolidated_metadata"] is not None

    root = zarr.open_consolidated(str(tmp_path), zarr_format=zarr_format)
    assert sorted(root.metadata.consolidated_metadata.flattened_metadata) == MEMBERS
    _assert_sees_tree(root)


@pytest.mark.parametrize("zarr_format", interop.FORMATS)
def test_zarr_python_reads_members_from_asyncarr_consolidated_metadata_alone(tmp_path, zarr_format):
    _build_tree(za, tmp_path, zarr_format, consolidated=True)
    # Without its own metadata document, g1/x is described only by the consolidated metadata.
    _delete_metadata_documents(tmp_path / "g1" / "x")

    root = zarr.open_consolidated(str(tmp_path), zarr_format=zarr_format)
    assert dict(root["g1/x"].attrs) == X_ATTRS
    np.testing.assert_array_equal(root["g1/x"][...], X_DATA)


@pytest.mark.parametrize("zarr_format", interop.FORMATS)
def test_asyncarr_lists_members_of_zarr_python_consolidated_group(tmp_path, zarr_format):
    _build_tree(zarr, tmp_path, zarr_format, consolidated=True)

    _assert_asyncarr_sees_tree(tmp_path)


@pytest.mark.parametrize("zarr_format", interop.FORMATS)
def test_asyncarr_reads_members_from_zarr_python_consolidated_metadata_alone(tmp_path, zarr_format):
    _build_tree(zarr, tmp_path, zarr_format, consolidated=True)
    # Consolidated metadata is read when present (DESIGN): member documents are then not needed.
    shutil.rmtree(tmp_path / "g1" / "sub")
    _delete_metadata_documents(tmp_path / "g1" / "x")

    root = za.open_group(str(tmp_path), mode="r")
    assert sorted(root["g1"].group_keys()) == ["sub"]
    assert sorted(root["g1"].array_keys()) == ["x"]
    assert dict(root["g1/x"].attrs) == X_ATTRS
    np.testing.assert_array_equal(root["g1/x"][...], X_DATA)
