"""Object arrays with the object codecs that describe data (JSON, MsgPack, VLenArray) and Categorize.

zarr-python 2 wrote these as v2 ``"|O"`` arrays with the object codec as the first filter, each
chunk run through the filters and then the compressor (`_zarr2_chunk` does exactly that);
zarr-python 3.1.6 can neither write nor read them (it finds no data type for ``"|O"`` with
``json2``), so the layout is checked against numcodecs itself. Categorize arrays of fixed-length
strings zarr-python 3 reads and writes, so those round-trip through it.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import pytest
import zarr
from strangers import v2_array, write_documents

import asyncarr.sync as za
from asyncarr import config
from asyncarr.errors import CodecError, MetadataError

_JSON = numcodecs.JSON()
_MSGPACK = numcodecs.MsgPack()
_OBJECT_CODECS = [_JSON, _MSGPACK]


def _objects(items: list[Any], shape: tuple[int, ...] | None = None) -> np.ndarray:
    """An object array holding `items` as they are (lists stay list elements)."""
    array = np.empty(len(items), dtype=object)
    for index, item in enumerate(items):
        array[index] = item
    return array.reshape(shape or (len(items),))


MIXED = _objects([{"a": [1, 2]}, [1, "b"], "é☃", None, 3.5, True, -7, {"nested": {"x": None}}, "", [], 0, "z"], (3, 4))


def _zarr2_chunk(chunk: np.ndarray, filters: list[Any], compressor: Any) -> bytes:
    """The bytes zarr-python 2 stores for a chunk: its filters in order, then the compressor."""
    encoded: Any = chunk
    for codec in filters:
        encoded = codec.encode(encoded)
    if compressor is not None:
        encoded = compressor.encode(encoded)
    return bytes(encoded)


def _zarr2_decode(data: bytes, filters: list[Any], compressor: Any) -> Any:
    """What zarr-python 2 decodes a chunk's bytes into: the compressor, then the filters in reverse."""
    decoded: Any = data if compressor is None else compressor.decode(data)
    for codec in reversed(filters):
        decoded = codec.decode(decoded)
    return decoded


def _write_zarr2_array(
    root: Path, data: np.ndarray, chunks: tuple[int, ...], filters: list[Any], **zarray: Any
) -> None:
    """Write `data` in zarr-python 2's layout, chunk by chunk, as it would."""
    compressor = numcodecs.Zlib(level=1)
    document = {
        "zarr_format": 2,
        "shape": list(data.shape),
        "chunks": list(chunks),
        "dtype": data.dtype.str,
        "compressor": compressor.get_config(),
        "filters": [codec.get_config() for codec in filters],
        "fill_value": 0,
        "order": "C",
        **zarray,
    }
    documents: dict[str, Any] = {".zarray": document}
    grid = [range(-(-size // chunk)) for size, chunk in zip(data.shape, chunks, strict=True)]
    for coords in np.ndindex(*(len(axis) for axis in grid)):
        region = tuple(slice(c * n, (c + 1) * n) for c, n in zip(coords, chunks, strict=True))
        chunk = np.full(chunks, 0, dtype=data.dtype)
        piece = data[region]
        chunk[tuple(slice(0, n) for n in piece.shape)] = piece
        documents[".".join(map(str, coords))] = _zarr2_chunk(chunk, filters, compressor)
    write_documents(root, documents)


def _same(actual: np.ndarray, expected: np.ndarray) -> None:
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    as_lists = [(x.dtype.str, x.tolist()) if isinstance(x, np.ndarray) else x for x in actual.flat]
    wanted = [(x.dtype.str, x.tolist()) if isinstance(x, np.ndarray) else x for x in expected.flat]
    assert as_lists == wanted


@pytest.mark.parametrize("codec", _OBJECT_CODECS, ids=lambda codec: codec.codec_id)
def test_object_arrays_zarr_python_2_wrote_read_as_the_objects_it_stored(tmp_path: Path, codec: Any) -> None:
    root = tmp_path / "zarr2.zarr"
    _write_zarr2_array(root, MIXED, (2, 3), [codec])  # edge chunks are partial in both dimensions

    z = za.open_array(str(root), mode="r")

    assert z.dtype == np.dtype(object) and z.fill_value == 0
    _same(z[:], MIXED)
    _same(z[1:, 2:], MIXED[1:, 2:])


@pytest.mark.parametrize("codec", _OBJECT_CODECS, ids=lambda codec: codec.codec_id)
def test_object_arrays_asyncarr_writes_are_zarr_python_2_chunks(tmp_path: Path, codec: Any) -> None:
    root = tmp_path / "ours.zarr"
    z = za.open_array(
        str(root), mode="w", shape=MIXED.shape, chunks=(2, 4), dtype=object, filters=[codec], zarr_format=2
    )
    z[:] = MIXED

    document = json.loads((root / ".zarray").read_text())
    assert document["dtype"] == "|O" and document["fill_value"] == 0
    assert document["filters"] == [json.loads(json.dumps(codec.get_config()))]
    compressor = numcodecs.get_codec(document["compressor"])
    stored = _zarr2_decode((root / "0.0").read_bytes(), [codec], compressor)
    _same(stored, MIXED[:2])
    assert (root / "0.0").read_bytes() == _zarr2_chunk(MIXED[:2], [codec], compressor)
    _same(za.open_array(str(root), mode="r")[:], MIXED)


def test_missing_chunks_of_an_object_array_read_as_its_fill_value_kept_as_written(tmp_path: Path) -> None:
    for fill_value in (0, "none", 2.5):
        root = tmp_path / f"fill-{fill_value}.zarr"
        z = za.open_array(
            str(root), mode="w", shape=(4,), chunks=(2,), dtype=object, filters=[_JSON], fill_value=fill_value,
            zarr_format=2,
        )  # fmt: skip
        z[:2] = _objects([[1], {"a": 1}])
        assert json.loads((root / ".zarray").read_text())["fill_value"] == fill_value
        _same(za.open_array(str(root), mode="r")[:], _objects([[1], {"a": 1}, fill_value, fill_value]))
        assert not (root / "1").exists()  # all fill: not written


def test_a_fill_value_that_is_not_a_json_scalar_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "bad.zarr"
    write_documents(root, {".zarray": {**v2_array(4, "|O", filters=[{"id": "json2"}]), "fill_value": [1, 2]}})
    with pytest.raises(MetadataError, match="fill_value"):
        za.open_array(str(root), mode="r")


def test_variable_length_numeric_arrays_round_trip_with_zarr_python_2_chunks(tmp_path: Path) -> None:
    codec = numcodecs.VLenArray("<i4")
    data = _objects([np.arange(n, dtype="<i4") * 3 for n in (0, 1, 5, 2, 0, 7)])
    theirs = tmp_path / "zarr2.zarr"
    _write_zarr2_array(theirs, data, (4,), [codec])
    _same(za.open_array(str(theirs), mode="r")[:], data)

    ours = tmp_path / "ours.zarr"
    z = za.open_array(
        str(ours), mode="w", shape=(6,), chunks=(4,), dtype=object, filters=[codec], compressor=numcodecs.Zlib(level=1),
        zarr_format=2,
    )  # fmt: skip
    z[:] = data
    assert (ours / "0").read_bytes() == (theirs / "0").read_bytes()
    _same(za.open_array(str(ours), mode="r")[:], data)


def test_zarr_python_3_has_no_data_type_for_json_object_arrays(tmp_path: Path) -> None:
    # Why the interop above is with numcodecs: zarr-python 3.1 writes and reads none of these.
    root = tmp_path / "zarr2.zarr"
    _write_zarr2_array(root, MIXED, (2, 3), [_JSON])
    with pytest.raises(ValueError, match="No Zarr data type"):
        zarr.open_array(str(root), mode="r")


def test_categorized_strings_round_trip_with_zarr_python_3(tmp_path: Path) -> None:
    codec = numcodecs.Categorize(["ab", "c", "é☃"], dtype="<U3", astype="<u2")
    data = np.array(["ab", "c", "é☃", "ab", "", "c", "é☃"], dtype="<U3")
    theirs = tmp_path / "zarr3.zarr"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zarr-python's notes about v2 codecs
        written = zarr.create_array(
            theirs, shape=data.shape, chunks=(3,), dtype="<U3", filters=[codec], compressors=None, zarr_format=2
        )
        written[:] = data
    np.testing.assert_array_equal(za.open_array(str(theirs), mode="r")[:], data)

    ours = tmp_path / "ours.zarr"
    z = za.open_array(
        str(ours), mode="w", shape=data.shape, chunks=(3,), dtype="<U3", filters=[codec], compressor=None, zarr_format=2
    )
    z[:] = data
    np.testing.assert_array_equal(zarr.open_array(str(ours), mode="r")[:], data)
    assert (ours / "0").read_bytes() == (theirs / "0").read_bytes()


def test_codes_outside_the_labels_read_as_empty_strings_as_numcodecs_decodes_them(tmp_path: Path) -> None:
    root = tmp_path / "codes.zarr"
    categorize = {"id": "categorize", "labels": ["ab", "c"], "dtype": "<U2", "astype": "|u1"}
    metadata = {**v2_array(5, "<U2", filters=[categorize]), "fill_value": ""}
    write_documents(root, {".zarray": metadata, "0": bytes([1, 2, 0, 3, 255])})

    np.testing.assert_array_equal(za.open_array(str(root), mode="r")[:], ["ab", "c", "", "", ""])


@pytest.mark.parametrize(
    ("filters", "dtype", "message"),
    [
        ([{"id": "categorize", "labels": ["a"] * 70_000, "dtype": "<U1"}], "<U1", "labels"),
        ([{"id": "categorize", "labels": ["a" * 5_000_000], "dtype": "<U1"}], "<U1", "labels"),
        ([{"id": "categorize", "labels": [1], "dtype": "<U1"}], "<U1", "labels"),
        ([{"id": "categorize", "labels": ["a"], "dtype": "<U2"}], "<U1", "categorize"),
        ([{"id": "categorize", "labels": ["a"], "dtype": "|O"}], "|O", "dtype"),
        ([{"id": "json2", "encoding": "rot13"}], "|O", "encoding"),
        ([{"id": "json2", "object_hook": "os.system"}], "|O", "object_hook"),
        ([{"id": "msgpack2", "ext_hook": "x"}], "|O", "ext_hook"),
        ([{"id": "zlib"}, {"id": "json2"}], "|O", "first filter"),
        ([{"id": "json2"}, {"id": "vlen-bytes"}], "|O", "only object codec"),
    ],
    ids=[
        "too-many-labels", "too-long-labels", "non-string-label", "other-dtype", "object-labels",
        "encoding", "json-hook", "msgpack-hook", "json-not-first", "two-object-codecs",
    ],
)  # fmt: skip
def test_invalid_object_codec_metadata_is_a_metadata_error_naming_what_is_wrong(
    tmp_path: Path, filters: list[dict], dtype: str, message: str
) -> None:
    root = tmp_path / "stranger.zarr"
    write_documents(root, {".zarray": {**v2_array(4, dtype, filters=filters), "fill_value": None}})
    with pytest.raises(MetadataError, match=message):
        za.open_array(str(root), mode="r")[:]


def test_an_object_codec_as_the_compressor_is_refused(tmp_path: Path) -> None:
    # numcodecs would decode it unbounded: zarr-python 2 only ever wrote object codecs as filters.
    root = tmp_path / "stranger.zarr"
    write_documents(root, {".zarray": {**v2_array(4, "|O", compressor={"id": "json2"}), "fill_value": None}})
    with pytest.raises(MetadataError, match="belongs among the 'filters'"):
        za.open_array(str(root), mode="r")


def test_pickled_object_arrays_stay_refused_unless_the_user_allows_pickle(tmp_path: Path) -> None:
    root = tmp_path / "pickled.zarr"
    _write_zarr2_array(root, MIXED, (2, 3), [numcodecs.Pickle()])
    with pytest.raises(MetadataError, match="allow_pickle"):
        za.open_array(str(root), mode="r")
    with config.set(allow_pickle=True):
        _same(za.open_array(str(root), mode="r")[:], MIXED)


@pytest.mark.parametrize("codec", _OBJECT_CODECS, ids=lambda codec: codec.codec_id)
def test_a_chunk_of_another_element_count_is_a_codec_error_naming_the_chunk(tmp_path: Path, codec: Any) -> None:
    root = tmp_path / "stranger.zarr"
    metadata = {**v2_array(4, "|O", filters=[codec.get_config()]), "fill_value": None}
    write_documents(root, {".zarray": metadata, "0": bytes(codec.encode(_objects([1, 2, 3])))})
    with pytest.raises(CodecError, match=f"{root.as_uri()}/0"):
        za.open_array(str(root), mode="r")[:]


def test_values_json_cannot_hold_are_a_codec_error_when_written(tmp_path: Path) -> None:
    z = za.open_array(
        str(tmp_path / "a.zarr"), mode="w", shape=(2,), chunks=(2,), dtype=object, filters=[_JSON], zarr_format=2
    )
    with pytest.raises(CodecError, match="cannot encode"):
        z[:] = _objects([{1, 2}, None])


def test_zarr_2s_object_codec_keyword_makes_the_object_codec_the_first_filter(tmp_path: Path) -> None:
    root = tmp_path / "keyword.zarr"
    z = za.open_array(str(root), mode="w", shape=(3,), chunks=(2,), dtype=object, object_codec=_MSGPACK, zarr_format=2)
    z[:] = MIXED.reshape(-1)[:3]

    assert json.loads((root / ".zarray").read_text())["filters"] == [_MSGPACK.get_config()]
    _same(za.open_array(str(root), mode="r")[:], MIXED.reshape(-1)[:3])


def test_elements_equal_to_the_fill_value_but_of_another_type_are_stored(tmp_path: Path) -> None:
    # False == 0 and 0.0 == 0 in Python, but a chunk of them is not a chunk of the fill value 0.
    root = tmp_path / "typed.zarr"
    z = za.open_array(str(root), mode="w", shape=(4,), chunks=(2,), dtype=object, object_codec=_JSON, zarr_format=2)
    z[:] = _objects([False, 0.0, 0, 0])

    assert (root / "0").exists() and not (root / "1").exists()
    read = za.open_array(str(root), mode="r")[:]
    assert [type(item) for item in read] == [bool, float, int, int]


@pytest.mark.parametrize("codec", _OBJECT_CODECS, ids=["json2", "msgpack2"])
def test_missing_chunks_of_an_object_array_with_a_null_fill_read_as_none_as_in_zarr_python_2(
    tmp_path: Path, codec: Any
) -> None:
    root = tmp_path / "null.zarr"
    write_documents(root, {".zarray": {**v2_array(4, "|O", filters=[codec.get_config()]), "fill_value": None}})
    z = za.open_array(str(root), mode="r+")

    assert z.fill_value is None
    _same(z[:], _objects([None, None, None, None]))
    z[:2] = _objects([{"a": 1}, None])
    _same(z[:], _objects([{"a": 1}, None, None, None]))
    assert z[3] is None

    created = za.open_array(
        str(tmp_path / "created.zarr"), mode="w", shape=(3,), chunks=(2,), dtype=object, filters=[codec],
        fill_value=None, zarr_format=2,
    )  # fmt: skip
    assert json.loads((tmp_path / "created.zarr" / ".zarray").read_text())["fill_value"] is None
    _same(created[:], _objects([None, None, None]))
