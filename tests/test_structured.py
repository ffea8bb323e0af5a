"""Structured data types (records): zarr-python 2's v2 field lists and zarr-python 3's v3 ``structured``.

v2 writes ``"dtype": [["x", "<i4"], ["y", "<f8"]]`` (nested records and sub-array fields too);
v3 writes ``{"name": "structured", "configuration": {"fields": [["x", "int32"], ...]}}`` with a
``bytes`` codec without ``endian``; both store a fill value as the base64 of the record's bytes.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import zarr
from strangers import v2_array, write_documents

import asyncarr.sync as za
from asyncarr.errors import MetadataError
from asyncarr.metadata.dtypes import dtype_to_json, parse_dtype, pop_fields, select_fields

RECORD = np.dtype([("x", "<i4"), ("y", "<f8"), ("s", "S3")])
DATA = np.array([(1, 2.5, b"ab"), (3, -1.0, b"c"), (5, 0.0, b""), (-7, 1e300, b"xyz"), (0, -0.5, b"q")], dtype=RECORD)
FILL = np.array((7, 1.5, b"q"), dtype=RECORD)[()]
NESTED = np.dtype([("a", ">i2"), ("b", [("c", "u1"), ("d", "<f4")]), ("e", "<i4", (2,))])


def _zarr_python(root: Path, zarr_format: int) -> zarr.Array:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zarr-python's notes that structured types are not in the v3 spec
        written = zarr.create_array(
            root, shape=DATA.shape, chunks=(2,), dtype=RECORD, fill_value=FILL, zarr_format=zarr_format,
        )  # fmt: skip
        written[:4] = DATA[:4]
    return written


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_records_zarr_python_3_wrote_read_as_numpy_has_them(tmp_path: Path, zarr_format: int) -> None:
    root = tmp_path / "theirs.zarr"
    _zarr_python(root, zarr_format)

    z = za.open_array(str(root), mode="r")

    assert z.dtype == RECORD and z.fill_value == FILL
    expected = DATA.copy()
    expected[4] = FILL  # never written: the fill value
    np.testing.assert_array_equal(z[:], expected)
    np.testing.assert_array_equal(z[1:3], expected[1:3])


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_records_asyncarr_writes_are_the_documents_and_bytes_zarr_python_3_writes(
    tmp_path: Path, zarr_format: int
) -> None:
    theirs = tmp_path / "theirs.zarr"
    _zarr_python(theirs, zarr_format)
    ours = tmp_path / "ours.zarr"
    z = za.open_array(
        str(ours), mode="w", shape=DATA.shape, chunks=(2,), dtype=RECORD, fill_value=(7, 1.5, b"q"),
        zarr_format=zarr_format,
    )  # fmt: skip
    z[:4] = DATA[:4]

    document = "zarr.json" if zarr_format == 3 else ".zarray"
    mine, zarrs = (json.loads((root / document).read_text()) for root in (ours, theirs))
    for key in ("dtype", "data_type", "fill_value"):
        assert mine.get(key) == zarrs.get(key)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        read_back = zarr.open_array(str(ours), mode="r")[:]
    expected = DATA.copy()
    expected[4] = FILL
    np.testing.assert_array_equal(read_back, expected)
    assert read_back.dtype == RECORD


def test_the_v3_data_type_and_fill_value_are_zarr_python_3s() -> None:
    assert dtype_to_json(3, RECORD) == {
        "name": "structured",
        "configuration": {
            "fields": [
                ["x", "int32"],
                ["y", "float64"],
                ["s", {"name": "null_terminated_bytes", "configuration": {"length_bytes": 3}}],
            ]
        },
    }
    assert parse_dtype(3, dtype_to_json(3, RECORD)) == RECORD


def test_nested_records_and_sub_array_fields_round_trip_in_v2_as_zarr_python_2_writes_them(tmp_path: Path) -> None:
    root = tmp_path / "nested.zarr"
    z = za.open_array(str(root), mode="w", shape=(3,), chunks=(2,), dtype=NESTED, zarr_format=2)
    value = np.array([(1, (2, 3.5), [4, 5])], dtype=NESTED)
    z[1:2] = value

    document = json.loads((root / ".zarray").read_text())
    assert document["dtype"] == [["a", ">i2"], ["b", [["c", "|u1"], ["d", "<f4"]]], ["e", "<i4", [2]]]
    assert document["fill_value"] == "A" * 20  # 15 zero bytes, base64, as zarr-python 2 writes
    back = za.open_array(str(root), mode="r")
    assert back.dtype == NESTED
    expected = np.zeros(3, dtype=NESTED)
    expected[1] = value[0]
    np.testing.assert_array_equal(back[:], expected)


def test_nested_records_are_refused_in_v3_which_zarr_python_cannot_write_either(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="use zarr_format=2"):
        za.open_array(str(tmp_path / "a.zarr"), mode="w", shape=(3,), dtype=NESTED.newbyteorder("<"), zarr_format=3)


def test_fields_select_one_field_or_a_record_of_several() -> None:
    np.testing.assert_array_equal(select_fields(DATA, "y"), DATA["y"])
    several = select_fields(DATA, ["s", "x"])
    assert several.dtype == np.dtype([("s", "S3"), ("x", "<i4")]) and several.dtype.itemsize == 7
    np.testing.assert_array_equal(several["x"], DATA["x"])
    with pytest.raises(IndexError, match="no field 'z'"):
        select_fields(DATA, "z")


@pytest.mark.parametrize(
    ("selection", "fields", "rest"),
    [
        ("x", "x", ()),
        (("x", slice(1, 3)), "x", slice(1, 3)),
        ((0, "x", "y"), ["x", "y"], 0),
        (slice(2), None, slice(2)),
    ],
)
def test_field_names_split_from_a_selection_as_zarr_python_2_splits_them(selection, fields, rest) -> None:
    assert pop_fields(selection) == (fields, rest)


@pytest.mark.parametrize(
    ("dtype", "message"),
    [
        ([["a", "|O"]], "objects cannot be record fields"),
        ([["a", "<i4"], ["a", "<f8"]], "more than once"),
        ([["", "<i4"]], "names of 1 to"),
        ([["a", ">i4"], ["b", "<M8"]], "needs a unit"),
        ([["a", "<i4", [10**9]]], "sub-array too large"),
        ([["a", 5]], "typestr"),
        ([], "list of"),
        ([[["a"], "<i4"]], "name, type"),
    ],
)
def test_invalid_v2_record_types_are_a_metadata_error(tmp_path: Path, dtype: list, message: str) -> None:
    root = tmp_path / "stranger.zarr"
    write_documents(root, {".zarray": {**v2_array(4), "dtype": dtype, "fill_value": None}})
    with pytest.raises(MetadataError, match=message):
        za.open_array(str(root), mode="r")


def test_deeply_nested_v2_record_types_are_refused(tmp_path: Path) -> None:
    dtype: list = [["a", "<i4"]]
    for _ in range(20):
        dtype = [["n", dtype]]
    root = tmp_path / "deep.zarr"
    write_documents(root, {".zarray": {**v2_array(4), "dtype": dtype, "fill_value": None}})
    with pytest.raises(MetadataError, match="nest"):
        za.open_array(str(root), mode="r")
