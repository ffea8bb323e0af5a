"""Structured data types (records): zarr-python 2's v2 field lists and zarr-python 3's v3 ``structured``.

v2 writes ``"dtype": [["x", "<i4"], ["y", "<f8"]]`` (nested records and sub-array fields too);
v3 writes ``{"name": "structured", "configuration": {"fields": [["x", "int32"], ...]}}`` with a
``bytes`` codec without ``endian``; both store a fill value as the base64 of the record's bytes.
"""

from __future__ import annotations

import asyncio
import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import zarr
from strangers import v2_array, write_documents

import asyncarr
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


# -- field selection: zarr-python 2's semantics, compared with NumPy's ``data[field][selection]`` ----

SUB = np.dtype([("x", "<i4"), ("y", "<f8", (2,)), ("s", "S3")])
SUB_DATA = np.array([(i, (i * 1.5, -i), str(i).encode()) for i in range(7)], dtype=SUB)


def _packed(data: np.ndarray, names: list[str]) -> np.ndarray:
    """NumPy's multi-field selection, packed as zarr-python 2 returns it."""
    return np.array(data[names], dtype=np.dtype([(name, data.dtype.fields[name][0]) for name in names]))


def _record_array(tmp_path: Path, zarr_format: int, data: np.ndarray = DATA) -> za.Array:
    z = za.open_array(
        str(tmp_path / f"records-{zarr_format}.zarr"), mode="w", shape=data.shape, chunks=(3,), dtype=data.dtype,
        zarr_format=zarr_format,
    )  # fmt: skip
    z[:] = data
    return z


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_field_names_in_a_selection_read_those_fields_as_numpy_does(tmp_path: Path, zarr_format: int) -> None:
    z = _record_array(tmp_path, zarr_format)

    for got, expected in [
        (z["x"], DATA["x"]),
        (z["y", 1:4], DATA["y"][1:4]),
        (z[1:4, "y"], DATA["y"][1:4]),
        (z["s", 3], DATA["s"][3]),
        (z["x", [0, 4]], DATA["x"][[0, 4]]),
        (z["x", DATA["x"] > 0], DATA["x"][DATA["x"] > 0]),
        (z[["x", "s"]], _packed(DATA, ["x", "s"])),
        (z[["s", "x"], 1:3], _packed(DATA, ["s", "x"])[1:3]),
        (z["x", "y", ::2], _packed(DATA, ["x", "y"])[::2]),
        (z.oindex[[4, 0], "y"], DATA["y"][[4, 0]]),
        (z.vindex[[4, 0], "x"], DATA["x"][[4, 0]]),
    ]:
        np.testing.assert_array_equal(got, expected)
        assert np.asarray(got).dtype == np.asarray(expected).dtype
    assert isinstance(z["x", 1], np.int32) and z["x", 1] == 3
    assert z[["x", "s"]].dtype == np.dtype([("x", "<i4"), ("s", "S3")])  # packed, as zarr-python 2


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_the_fields_keyword_reads_as_zarr_python_2_documents_it(tmp_path: Path, zarr_format: int) -> None:
    z = _record_array(tmp_path, zarr_format)
    mask = DATA["x"] % 2 == 1

    np.testing.assert_array_equal(z.get_basic_selection(slice(0, 2), fields="x"), DATA["x"][:2])
    np.testing.assert_array_equal(z.get_basic_selection(slice(0, 2), fields=["x", "s"]), _packed(DATA, ["x", "s"])[:2])
    assert z.get_basic_selection(slice(0, 2), fields=["x"]).dtype == np.dtype([("x", "<i4")])
    assert z.get_basic_selection(fields="y").tolist() == DATA["y"].tolist()
    np.testing.assert_array_equal(z.get_orthogonal_selection([3, 1], fields="s"), DATA["s"][[3, 1]])
    np.testing.assert_array_equal(z.get_coordinate_selection([3, 1], fields="y"), DATA["y"][[3, 1]])
    np.testing.assert_array_equal(z.get_mask_selection(mask, fields="x"), DATA["x"][mask])
    # The keyword wins over names in the selection; an empty one is the whole records.
    np.testing.assert_array_equal(z.get_basic_selection(("x", slice(1)), fields="y"), DATA["y"][:1])
    np.testing.assert_array_equal(z.get_basic_selection(slice(2), fields=[]), DATA[:2])


def test_fields_of_nested_records_and_sub_arrays_read_as_numpy_has_them(tmp_path: Path) -> None:
    z = _record_array(tmp_path, 2, SUB_DATA)

    np.testing.assert_array_equal(z["y"], SUB_DATA["y"])  # a sub-array field adds its axis
    np.testing.assert_array_equal(z["y", 2:5], SUB_DATA["y"][2:5])
    np.testing.assert_array_equal(z.vindex[[6, 0], "y"], SUB_DATA["y"][[6, 0]])
    np.testing.assert_array_equal(
        z.get_coordinate_selection([1, 5], fields=["s", "y"]), _packed(SUB_DATA, ["s", "y"])[[1, 5]]
    )
    np.testing.assert_array_equal(z["y", 3], SUB_DATA["y"][3])

    nested = _record_array(tmp_path / "n", 2, np.array([(1, (2, 3.5), [4, 5]), (6, (7, 8.5), [9, 10])], dtype=NESTED))
    np.testing.assert_array_equal(nested["b"], np.array([(2, 3.5), (7, 8.5)], dtype=NESTED["b"]))
    np.testing.assert_array_equal(nested["e", 1], [9, 10])


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_writing_a_field_keeps_the_other_fields(tmp_path: Path, zarr_format: int) -> None:
    z = _record_array(tmp_path, zarr_format)
    expected = DATA.copy()

    z["x"] = np.arange(5) * 10
    expected["x"] = np.arange(5) * 10
    z["y", 1:4] = -2.0
    expected["y"][1:4] = -2.0
    z[["x", "s"], 4] = (99, b"new")
    expected[["x", "s"]][4] = (99, b"new")
    z.set_basic_selection(slice(0, 1), b"a", fields="s")
    expected["s"][0] = b"a"
    z.set_orthogonal_selection([2], 7, fields=["x"])
    expected["x"][2] = 7
    z.set_coordinate_selection([3, 0], [1.25, 2.25], fields="y")
    expected["y"][[3, 0]] = [1.25, 2.25]
    z.set_mask_selection(DATA["x"] == 5, 55, fields="x")
    expected["x"][DATA["x"] == 5] = 55
    z.oindex[[1], "s"] = b"o"
    expected["s"][1] = b"o"
    z.vindex[[4], "y"] = 4.5
    expected["y"][4] = 4.5

    np.testing.assert_array_equal(z[:], expected)
    np.testing.assert_array_equal(za.open_array(str(tmp_path / f"records-{zarr_format}.zarr"), mode="r")[:], expected)


def test_writing_a_field_of_missing_chunks_fills_the_other_fields(tmp_path: Path) -> None:
    root = tmp_path / "fresh.zarr"
    z = za.open_array(str(root), mode="w", shape=(5,), chunks=(2,), dtype=RECORD, fill_value=FILL, zarr_format=2)

    z["y", 1:3] = [0.25, 0.75]

    expected = np.array([FILL] * 5, dtype=RECORD)
    expected["y"][1:3] = [0.25, 0.75]
    np.testing.assert_array_equal(z[:], expected)
    assert sorted(p.name for p in root.iterdir() if not p.name.startswith(".")) == ["0", "1"]
    z["y", 1:3] = FILL["y"]  # back to all fill: the chunks are removed, as other writes remove them
    assert sorted(p.name for p in root.iterdir() if not p.name.startswith(".")) == []


def test_field_writes_from_many_tasks_into_one_chunk_all_land(tmp_path: Path) -> None:

    async def main() -> np.ndarray:
        z = await asyncarr.open_array(
            str(tmp_path / "racing.zarr"), mode="w", shape=(8,), chunks=(8,), dtype=RECORD, zarr_format=2
        )
        await asyncio.gather(
            *(z.setitem(("x", i), i + 1) for i in range(8)), *(z.setitem(("y", i), i / 2) for i in range(8))
        )
        return await z.getitem(Ellipsis)

    result = asyncio.run(main())
    np.testing.assert_array_equal(result["x"], np.arange(8) + 1)
    np.testing.assert_array_equal(result["y"], np.arange(8) / 2)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_a_field_name_the_array_lacks_is_an_index_error_as_in_zarr_python_2(tmp_path: Path, zarr_format: int) -> None:
    z = _record_array(tmp_path, zarr_format)
    plain = za.open_array(str(tmp_path / "plain.zarr"), mode="w", shape=(3,), dtype="f8", zarr_format=zarr_format)

    for read in (
        lambda: z["nope"],
        lambda: z[["x", "nope"], 1],
        lambda: z.get_basic_selection(fields="nope"),
        lambda: plain.get_orthogonal_selection([0], fields="x"),
        lambda: plain.get_basic_selection(slice(1), fields=["x"]),
        lambda: asyncio.run(plain.async_array.getitem(0, fields="x")),
    ):
        with pytest.raises(IndexError, match="no field"):
            read()
    # A name in the selection of an array without fields is refused as NumPy refuses it.
    for selection in ("x", ("x", 0)):
        with pytest.raises(IndexError) as ours:
            plain[selection]
        with pytest.raises(IndexError) as numpys:
            np.zeros(3)[selection]
        assert str(ours.value) == str(numpys.value)
    with pytest.raises(IndexError):
        plain[["x", "y"]]
    with pytest.raises(IndexError, match="only integers, slices"):
        plain["x"] = 1.0
    with pytest.raises(IndexError, match="string or a list of strings"):
        z.get_basic_selection(slice(1), fields=3)
    with pytest.raises(IndexError, match="no field"):
        z["nope", 0] = 1
    np.testing.assert_array_equal(z[:], DATA)
    np.testing.assert_array_equal(plain[:], np.zeros(3))


def test_a_record_given_as_a_tuple_is_one_element(tmp_path: Path) -> None:
    z = za.open_array(str(tmp_path / "tuple.zarr"), mode="w", shape=(3,), chunks=(2,), dtype=NESTED, zarr_format=2)

    z[1] = (1, (2, 3.5), [4, 5])
    z[2:] = [(6, (7, 8.5), [9, 10])]

    expected = np.zeros(3, dtype=NESTED)
    expected[1] = (1, (2, 3.5), [4, 5])
    expected[2] = (6, (7, 8.5), [9, 10])
    np.testing.assert_array_equal(z[:], expected)
