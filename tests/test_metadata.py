"""asyncarr.metadata against zarr-python 3: documents each one writes, the other reads the same."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import zarr
import zarr.storage
from hypothesis import given, settings
from hypothesis import strategies as st
from zarr.core.buffer import cpu
from zarr.core.chunk_grids import _guess_chunks

from asyncarr.errors import MetadataError, NodeNotFoundError
from asyncarr.metadata import (
    DEFAULT_FILL_VALUE,
    ArrayMetadataV2,
    ArrayMetadataV3,
    GroupMetadataV2,
    GroupMetadataV3,
    consolidated_children,
    consolidated_documents,
    consolidated_subtree,
    consolidated_v2_document,
    consolidated_v3_metadata,
    create_array_metadata,
    default_fill_value,
    fill_value_to_json,
    normalize_chunks,
    parse_consolidated_v2,
    parse_consolidated_v3,
    parse_fill_value,
    parse_node,
)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")

# dtype -> a fill value other than the default
DTYPES = {
    "bool": True,
    "|i1": -7,
    "|u1": 7,
    "<i2": -300,
    "<u2": 300,
    "<i4": -(2**31),
    "<u4": 2**32 - 1,
    "<i8": -(2**63),
    "<u8": 2**64 - 1,
    ">i4": 12,
    "<f2": 0.1,
    "<f4": -1.5,
    "<f8": math.pi,
    ">f8": -math.inf,
    "<c8": 1 + 2j,
    "<c16": complex(math.nan, -1.0),
    "<M8[ns]": np.datetime64(5, "ns"),
    "<M8[10s]": np.datetime64(3, "10s"),
    "<m8[s]": np.timedelta64(-4, "s"),
    ">M8[ns]": np.datetime64(-5, "ns"),
    "|S5": b"ab",
    "<U3": "hé",
    "|V4": b"\x01\x02\x03\x04",
}
NODE_DOCUMENTS = ("zarr.json", ".zarray", ".zgroup", ".zattrs")


def _documents_of(store: zarr.storage.MemoryStore, path: str = "") -> dict[str, bytes | None]:
    prefix = f"{path}/" if path else ""
    return {name: (b.to_bytes() if (b := store._store_dict.get(prefix + name)) else None) for name in NODE_DOCUMENTS}


def _store_with(documents: dict[str, bytes]) -> zarr.storage.MemoryStore:
    return zarr.storage.MemoryStore({key: cpu.Buffer.from_bytes(value) for key, value in documents.items()})


def _same_scalar(a, b, dtype) -> bool:
    """Bitwise equality, so NaN equals the same NaN and NaT equals NaT."""
    if a is None or b is None:
        return a is b
    return np.array(a, dtype=dtype).tobytes() == np.array(b, dtype=dtype).tobytes()


def _zarr_codecs(array: zarr.Array) -> list[dict]:
    codecs = json.loads(json.dumps(array.metadata.to_dict()["codecs"]))  # tuples -> lists
    return [{"configuration": {}, **codec} for codec in codecs]


def _native(dtype: str) -> np.dtype:
    return np.dtype(dtype).newbyteorder("=")


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("fill_given", ["default-fill", "custom-fill", "none-fill"])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_documents_zarr_python_writes_parse_to_the_same_fields(dtype, fill_given, zarr_format):
    store = zarr.storage.MemoryStore()
    fill = {"default-fill": {}, "custom-fill": {"fill_value": DTYPES[dtype]}, "none-fill": {"fill_value": None}}[
        fill_given
    ]
    reference = zarr.create_array(
        store=store, shape=(4, 6), chunks=(2, 3), dtype=dtype, zarr_format=zarr_format, **fill
    )
    metadata = parse_node(_documents_of(store), "arr")
    assert metadata.zarr_format == zarr_format
    assert (metadata.shape, metadata.chunks, metadata.ndim) == ((4, 6), (2, 3), 2)
    assert metadata.dtype == (np.dtype(dtype) if zarr_format == 2 else _native(dtype))
    assert _same_scalar(metadata.fill_value, reference.fill_value, metadata.dtype)
    assert metadata.order == "C"
    if zarr_format == 3:
        assert list(metadata.codecs) == _zarr_codecs(reference)
    else:
        assert metadata.compressor == reference.metadata.to_dict()["compressor"]


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_documents_asyncarr_writes_open_in_zarr_python_with_the_same_fields(dtype, order, zarr_format):
    fill_value = DTYPES[dtype]
    compressor = {"id": "zlib", "level": 1} if zarr_format == 2 else {"name": "gzip", "configuration": {"level": 1}}
    metadata = create_array_metadata(
        zarr_format=zarr_format,
        shape=(5, 7),
        chunks=(2, 3),
        dtype=dtype,
        fill_value=fill_value,
        order=order,
        compressor=compressor,
        attributes={"units": "m", "nan": math.nan},
    )
    reference = zarr.open_array(_store_with(metadata.to_documents()), mode="r")
    assert (reference.shape, reference.chunks) == ((5, 7), (2, 3))
    assert reference.dtype.newbyteorder("=") == _native(dtype)
    assert _same_scalar(reference.fill_value, fill_value, dtype)
    assert reference.attrs["units"] == "m" and math.isnan(reference.attrs["nan"])
    assert _same_scalar(reference[1, 2], fill_value, dtype)  # an unwritten chunk reads as the fill value
    if zarr_format == 2:
        assert reference.metadata.order == order
        assert reference.metadata.to_dict()["compressor"] == {"id": "zlib", "level": 1}
    else:
        assert _zarr_codecs(reference) == list(metadata.codecs)
        assert metadata.order == order
    assert parse_node(metadata.to_documents(), "arr") == metadata


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_data_written_through_asyncarr_metadata_round_trips_in_zarr_python(zarr_format):
    filters = [{"id": "delta", "dtype": "<i4"}] if zarr_format == 2 else None
    metadata = create_array_metadata(
        zarr_format=zarr_format, shape=(9, 4), chunks=(4, 3), dtype="<i4", order="F", filters=filters
    )
    store = _store_with(metadata.to_documents())
    data = np.arange(36, dtype="<i4").reshape(9, 4)
    zarr.open_array(store, mode="r+")[:] = data
    np.testing.assert_array_equal(zarr.open_array(store, mode="r")[:], data)
    separator = "." if zarr_format == 2 else "/"
    for key in (metadata.chunk_key((0, 0)), metadata.chunk_key((2, 1))):
        assert key in store._store_dict, (key, sorted(store._store_dict))
    assert metadata.chunk_key((2, 1)) == ("2.1" if zarr_format == 2 else f"c{separator}2{separator}1")


def test_sharded_metadata_matches_what_zarr_python_writes():
    store = zarr.storage.MemoryStore()
    zarr.create_array(store=store, shape=(8, 8), chunks=(2, 2), shards=(4, 4), dtype="f4", zarr_format=3)
    theirs = parse_node(_documents_of(store), "")
    zstd = {"name": "zstd", "configuration": {"level": 0, "checksum": False}}
    ours = create_array_metadata(zarr_format=3, shape=(8, 8), chunks=(2, 2), shards=(4, 4), dtype="f4", compressor=zstd)
    assert ours == theirs
    with pytest.raises(ValueError, match="multiple"):
        create_array_metadata(zarr_format=3, shape=(8,), chunks=(3,), shards=(4,), dtype="f4")


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_fill_value_none_is_null_in_v2_and_the_default_in_v3_but_not_given_is_the_default_in_both(dtype):
    def fill_json(zarr_format: int, **fill: object) -> object:
        metadata = create_array_metadata(zarr_format=zarr_format, shape=(4,), chunks=2, dtype=dtype, **fill)
        document = metadata.to_documents()[".zarray" if zarr_format == 2 else "zarr.json"]
        return json.loads(document)["fill_value"]

    default = fill_value_to_json(3, default_fill_value(np.dtype(dtype)), np.dtype(dtype))
    assert fill_json(2, fill_value=None) is None
    assert create_array_metadata(zarr_format=2, shape=(4,), chunks=2, dtype=dtype, fill_value=None).fill_value is None
    assert fill_json(3, fill_value=None) == default
    assert fill_json(3) == default
    assert fill_json(2) == fill_value_to_json(2, default_fill_value(np.dtype(dtype)), np.dtype(dtype)) is not None
    assert fill_json(2, fill_value=DEFAULT_FILL_VALUE) == fill_json(2)


def test_documents_tensorstore_style_minimal_v3_and_null_v2_fill_parse():
    v3 = {
        "zarr_format": 3, "node_type": "array", "shape": [4, 5], "data_type": "uint16",
        "chunk_grid": {"configuration": {"chunk_shape": [4, 5]}, "name": "regular"},
        "chunk_key_encoding": {"name": "default"}, "codecs": ["bytes"], "fill_value": 0,
    }  # fmt: skip
    metadata = parse_node({"zarr.json": json.dumps(v3).encode()}, "t")
    assert metadata.codecs == ({"name": "bytes", "configuration": {}},)
    assert metadata.chunk_key((1, 2)) == "c/1/2" and metadata.attributes == {}
    v2 = {"chunks": [4], "compressor": None, "dtype": "<f4", "fill_value": None, "filters": None,
          "order": "C", "shape": [4], "zarr_format": 2, "dimension_separator": None}  # fmt: skip
    metadata = parse_node({".zarray": json.dumps(v2).encode()}, "t")
    assert metadata.fill_value is None and metadata.dimension_separator == "."
    assert json.loads(metadata.to_documents()[".zarray"])["fill_value"] is None


FILL_VALUE_CASES = [
    (2, "<f8", "NaN"),
    (2, "<f8", "Infinity"),
    (2, "<f4", "-Infinity"),
    (3, "<f4", "NaN"),
    (3, "<f8", "-Infinity"),
    (3, "<f4", "0x7fc00000"),
    (3, "<f4", "0x3f800000"),
    (3, "<f8", "0x7ff8000000000001"),
    (3, "<f2", "0x7e00"),
    (3, "<c16", ["NaN", "0x3ff0000000000000"]),
    (2, "<c8", [1.5, "-Infinity"]),
    (2, "|S4", "YWI="),
    (3, "|S4", "YWJj"),
    (2, "|V2", "AQI="),
    (2, "bool", True),
    (3, "<u8", 2**64 - 1),
    (2, "<M8[ns]", 1234),
    (3, "<m8[s]", -9223372036854775808),
    (2, "<U2", "hé"),
]


@pytest.mark.parametrize(("zarr_format", "dtype", "json_value"), FILL_VALUE_CASES)
def test_fill_value_encodings_decode_like_zarr_python_and_encode_back(zarr_format, dtype, json_value):
    store = zarr.storage.MemoryStore()
    zarr.create_array(store=store, shape=(2,), dtype=dtype, zarr_format=zarr_format)
    key = "zarr.json" if zarr_format == 3 else ".zarray"
    document = json.loads(store._store_dict[key].to_bytes())
    document["fill_value"] = json_value
    documents = {key: json.dumps(document).encode()}
    reference = zarr.open_array(_store_with(documents), mode="r")
    metadata = parse_node(documents, "arr")
    assert _same_scalar(metadata.fill_value, reference.fill_value, metadata.dtype)
    encoded = fill_value_to_json(zarr_format, metadata.fill_value, metadata.dtype)
    json.dumps(encoded, allow_nan=False)  # never a bare NaN or Infinity
    assert _same_scalar(parse_fill_value(zarr_format, encoded, metadata.dtype), metadata.fill_value, metadata.dtype)


def test_user_fill_values_may_use_the_json_spellings_of_special_floats():
    metadata = create_array_metadata(zarr_format=3, shape=(2,), chunks=2, dtype="c8", fill_value="-Infinity")
    assert metadata.fill_value == complex(-math.inf, 0)
    assert json.loads(metadata.to_documents()["zarr.json"])["fill_value"] == ["-Infinity", 0.0]


def test_fill_value_nan_payloads_survive_only_as_v3_hex():
    dtype = np.dtype("<f8")
    odd_nan = np.array(0x7FF8000000000001, dtype="<u8").view(dtype)[()]
    assert fill_value_to_json(3, odd_nan, dtype) == "0x7ff8000000000001"
    assert fill_value_to_json(3, np.nan, dtype) == "NaN"
    assert fill_value_to_json(2, odd_nan, dtype) == "NaN"
    assert fill_value_to_json(2, None, dtype) is None


V2_ARRAY = {"chunks": [2, 2], "compressor": None, "dtype": "<f8", "fill_value": 0.0, "filters": None,
            "order": "C", "shape": [4, 4], "zarr_format": 2}  # fmt: skip
V3_ARRAY = json.loads(
    create_array_metadata(zarr_format=3, shape=(4, 4), chunks=(2, 2), dtype="<f8").to_documents()["zarr.json"]
)


def _changed(document: dict, **changes) -> bytes:
    document = {**document, **changes}
    return json.dumps({k: v for k, v in document.items() if v != "<drop>"}).encode()


CORRUPT_V2 = [
    ({".zarray": b"{not json"}, ".zarray: not valid JSON"),
    ({".zarray": b"[1, 2]"}, ".zarray: expected a JSON object"),
    ({".zarray": b"\xff\xfe"}, ".zarray: not valid UTF-8"),
    ({".zarray": _changed(V2_ARRAY, shape="<drop>")}, "'shape' is missing"),
    ({".zarray": _changed(V2_ARRAY, shape="abc")}, "'shape' must be a list of integers"),
    ({".zarray": _changed(V2_ARRAY, shape=[4, -1])}, "'shape' entries must be >= 0"),
    ({".zarray": _changed(V2_ARRAY, chunks=[0, 2])}, "'chunks' entries must be >= 1"),
    ({".zarray": _changed(V2_ARRAY, chunks=[2])}, "'chunks' [2] has 1 dimensions but 'shape' [4, 4] has 2"),
    ({".zarray": _changed(V2_ARRAY, dtype="<q9")}, "'dtype': unknown data type '<q9'"),
    ({".zarray": _changed(V2_ARRAY, dtype="|O")}, "'dtype': data type '|O' needs an object codec in 'filters'"),
    ({".zarray": _changed(V2_ARRAY, dtype=[["a", "|O"]])}, "objects cannot be record fields"),
    ({".zarray": _changed(V2_ARRAY, dtype="<M8")}, "needs a unit"),
    ({".zarray": _changed(V2_ARRAY, zarr_format=3)}, "'zarr_format' must be 2"),
    ({".zarray": _changed(V2_ARRAY, order="X")}, "'order' must be 'C' or 'F'"),
    ({".zarray": _changed(V2_ARRAY, compressor="blosc")}, "'compressor' must be an object"),
    ({".zarray": _changed(V2_ARRAY, filters=[1])}, "'filters' must be an object"),
    ({".zarray": _changed(V2_ARRAY, fill_value="abc")}, "'fill_value' 'abc' is not valid for data type float64"),
    ({".zarray": _changed(V2_ARRAY, dtype="|i1", fill_value=300)}, "'fill_value' 300 is not valid for data type int8"),
    ({".zarray": _changed(V2_ARRAY, dimension_separator="-")}, "'dimension_separator' must be '.' or '/'"),
    ({".zarray": _changed(V2_ARRAY), ".zattrs": b"[]"}, ".zattrs: expected a JSON object"),
    ({".zgroup": b"{}"}, ".zgroup: 'zarr_format' is missing"),
]
CORRUPT_V3 = [
    (b"{not json", "zarr.json: not valid JSON"),
    (_changed(V3_ARRAY, data_type="<drop>"), "'data_type' is missing"),
    (_changed(V3_ARRAY, node_type="banana"), "'node_type' must be 'array' or 'group', got 'banana'"),
    (_changed(V3_ARRAY, zarr_format=2), "'zarr_format' must be 3"),
    (_changed(V3_ARRAY, data_type="int128"), "'data_type': unknown data type 'int128'"),
    (_changed(V3_ARRAY, data_type="string", fill_value=[1]), "'fill_value' [1] is not valid for data type String"),
    (_changed(V3_ARRAY, fill_value=None), "'fill_value' must not be null"),
    (_changed(V3_ARRAY, fill_value="0x7fc0"), "hex bit pattern of 16 digits"),
    (_changed(V3_ARRAY, chunk_grid={"name": "rectilinear", "configuration": {}}), "'chunk_grid' 'rectilinear'"),
    (_changed(V3_ARRAY, chunk_grid={"name": "regular", "configuration": {"chunk_shape": [2]}}), "chunk shape [2]"),
    (_changed(V3_ARRAY, chunk_key_encoding={"name": "default", "configuration": {"separator": "-"}}), "separator"),
    (_changed(V3_ARRAY, codecs=[]), "'codecs' must not be empty"),
    (_changed(V3_ARRAY, codecs=[{"configuration": {}}]), "'codecs' entries must be a name"),
    (_changed(V3_ARRAY, dimension_names=["x"]), "'dimension_names' must hold a string or null"),
    (_changed(V3_ARRAY, storage_transformers=[{"name": "magic"}]), "storage transformer 'magic'"),
    (_changed(V3_ARRAY, future_feature={"must_understand": True}), "unknown field 'future_feature'"),
    (_changed(V3_ARRAY, future_feature=1), "unknown field 'future_feature'"),
    (_changed(V3_ARRAY, attributes=[1]), "'attributes' must be a JSON object"),
]


@pytest.mark.parametrize(("documents", "message"), CORRUPT_V2)
def test_corrupt_v2_documents_raise_metadata_error_naming_the_key(documents, message):
    with pytest.raises(MetadataError) as caught:
        parse_node(documents, "grp/arr")
    assert str(caught.value).startswith("grp/arr/."), str(caught.value)
    assert message in str(caught.value)


@pytest.mark.parametrize(("raw", "message"), CORRUPT_V3)
def test_corrupt_v3_documents_raise_metadata_error_naming_the_key(raw, message):
    with pytest.raises(MetadataError) as caught:
        parse_node({"zarr.json": raw}, "grp/arr")
    assert str(caught.value).startswith("grp/arr/zarr.json: "), str(caught.value)
    assert message in str(caught.value)


def test_v3_extension_fields_marked_must_understand_false_are_ignored():
    raw = _changed(V3_ARRAY, future_feature={"must_understand": False, "x": 1})
    assert parse_node({"zarr.json": raw}, "a").shape == (4, 4)


def test_parse_node_picks_format_and_kind_from_the_documents_present():
    assert isinstance(parse_node({".zgroup": b'{"zarr_format": 2}', ".zattrs": b'{"a": 1}'}, "g"), GroupMetadataV2)
    group = parse_node({"zarr.json": b'{"zarr_format": 3, "node_type": "group"}', ".zgroup": None}, "g")
    assert isinstance(group, GroupMetadataV3) and group.attributes == {}
    assert isinstance(parse_node({".zarray": json.dumps(V2_ARRAY).encode()}, "a"), ArrayMetadataV2)
    assert isinstance(parse_node({"zarr.json": json.dumps(V3_ARRAY).encode()}, "a"), ArrayMetadataV3)
    with pytest.raises(NodeNotFoundError, match="no array or group at 'missing'"):
        parse_node({"zarr.json": None, ".zarray": None}, "missing")


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_group_documents_round_trip_through_zarr_python(zarr_format):
    metadata = (GroupMetadataV2 if zarr_format == 2 else GroupMetadataV3)(attributes={"title": "t", "n": [1, 2]})
    reference = zarr.open_group(_store_with(metadata.to_documents()), mode="r")
    assert reference.metadata.zarr_format == zarr_format and dict(reference.attrs) == {"title": "t", "n": [1, 2]}
    store = zarr.storage.MemoryStore()
    zarr.create_group(store=store, zarr_format=zarr_format, attributes={"x": 1})
    assert parse_node(_documents_of(store), "") == metadata.with_attributes({"x": 1})
    assert ".zattrs" not in GroupMetadataV2().to_documents()


@pytest.mark.parametrize(
    ("encoding", "coords", "key"),
    [
        (None, (1, 2), "c/1/2"),
        ({"name": "default", "configuration": {"separator": "."}}, (1, 2), "c.1.2"),
        ({"name": "v2"}, (1, 2), "1.2"),
        ({"name": "v2", "configuration": {"separator": "/"}}, (1, 2), "1/2"),
    ],
)
def test_v3_chunk_keys_follow_the_chunk_key_encoding(encoding, coords, key):
    metadata = create_array_metadata(
        zarr_format=3, shape=(4, 6), chunks=(2, 3), dtype="i2", chunk_key_encoding=encoding
    )
    assert metadata.chunk_key(coords) == key
    scalar = create_array_metadata(zarr_format=3, shape=(), chunks=(), dtype="i2", chunk_key_encoding=encoding)
    assert scalar.chunk_key(()) == ("c" if encoding is None or encoding["name"] == "default" else "0")


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("separator", [".", "/"])
def test_dimension_separator_sets_chunk_keys_like_zarr_python(zarr_format, separator):
    metadata = create_array_metadata(zarr_format=zarr_format, shape=(4, 6), chunks=(2, 3), dtype="i2",
                                     dimension_separator=separator)  # fmt: skip
    store = _store_with(metadata.to_documents())
    zarr.open_array(store, mode="r+")[:] = 1
    written = sorted(k for k in store._store_dict if not k.endswith(("zarr.json", ".zarray")))
    assert written == sorted(metadata.chunk_key((i, j)) for i in range(2) for j in range(2))
    scalar = create_array_metadata(zarr_format=zarr_format, shape=(), chunks=(), dtype="i2")
    assert scalar.chunk_key(()) == ("0" if zarr_format == 2 else "c")


def test_chunk_key_rejects_coordinates_of_the_wrong_length():
    with pytest.raises(ValueError, match="2 dimensions"):
        create_array_metadata(zarr_format=2, shape=(4, 6), chunks=2, dtype="i2").chunk_key((0,))


@pytest.mark.parametrize(
    ("chunks", "shape", "expected"),
    [
        (None, (1000, 1000, 100), (125, 125, 13)),  # the zarr tutorial's float64 example
        (True, (1000, 1000, 100), (125, 125, 13)),
        (5, (10, 3), (5, 5)),
        ((None, 2), (10, 3), (10, 2)),
        ((-1, 2), (10, 3), (10, 2)),
        ((-1,), (0, 3), (1, 3)),
        ((100, 100), (10, 3), (100, 100)),
        (((4, 4, 2), (3,)), (10, 3), (4, 3)),
        (False, (10, 0), (10, 1)),
        ((), (), ()),
    ],
)
def test_normalize_chunks(chunks, shape, expected):
    assert normalize_chunks(chunks, shape, 8) == expected


@pytest.mark.parametrize("chunks", [0, (2, 0), (2, -3), ((4, 3, 4), (3,)), (1, 2, 3)])
def test_normalize_chunks_rejects_empty_negative_irregular_or_extra_chunks(chunks):
    with pytest.raises(ValueError):
        normalize_chunks(chunks, (10, 3), 8)


@pytest.mark.parametrize("chunks", ["abc", (2.5, 1), (True, 1)])
def test_normalize_chunks_rejects_non_integers(chunks):
    with pytest.raises(TypeError):
        normalize_chunks(chunks, (10, 3), 8)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 10**6), max_size=4).map(tuple), st.sampled_from([1, 2, 4, 8, 16]))
def test_automatic_chunks_match_zarr_python(shape, itemsize):
    assert normalize_chunks(None, shape, itemsize) == _guess_chunks(shape, itemsize)


def test_create_array_metadata_rejects_bad_arguments():
    base = {"shape": (4,), "chunks": 2, "dtype": "f8"}
    with pytest.raises(ValueError, match="zarr_format"):
        create_array_metadata(zarr_format=4, **base)
    with pytest.raises(ValueError, match="codecs= needs zarr_format=3"):
        create_array_metadata(zarr_format=2, codecs=[{"name": "bytes"}], **base)
    with pytest.raises(ValueError, match="not both"):
        create_array_metadata(zarr_format=3, codecs=[{"name": "bytes"}], compressor={"name": "gzip"}, **base)
    with pytest.raises(TypeError, match="codec JSON dicts"):
        create_array_metadata(zarr_format=2, filters=[object()], **base)
    with pytest.raises(ValueError, match=r"fill_value 1\.5 is not valid for data type int8"):
        create_array_metadata(zarr_format=3, shape=(4,), chunks=2, dtype="i1", fill_value=1.5)
    with pytest.raises(ValueError, match="fill_value 'abcdef'"):
        create_array_metadata(zarr_format=2, shape=(4,), chunks=2, dtype="S3", fill_value="abcdef")
    with pytest.raises(ValueError, match="contradicts"):
        create_array_metadata(zarr_format=3, dimension_separator=".", chunk_key_encoding={"name": "default"}, **base)
    with pytest.raises(ValueError, match="objects cannot be record fields"):
        create_array_metadata(zarr_format=3, shape=(4,), chunks=2, dtype=[("a", "O")])
    with pytest.raises(TypeError):
        create_array_metadata(zarr_format=3, shape=(4,), chunks=2, dtype="nonsense")


def test_resize_and_attribute_updates_keep_everything_else():
    metadata = create_array_metadata(zarr_format=3, shape=(4, 6), chunks=(2, 3), dtype="f4", dimension_names=["y", "x"])
    resized = metadata.with_shape((8, 1)).with_attributes({"a": 1})
    assert (resized.shape, resized.chunks, resized.dimension_names) == ((8, 1), (2, 3), ("y", "x"))
    assert resized.attributes == {"a": 1} and metadata.attributes == {}
    assert json.loads(resized.to_documents()["zarr.json"])["dimension_names"] == ["y", "x"]
    with pytest.raises(ValueError, match="2 dimensions"):
        metadata.with_shape((8,))


def _zarr_hierarchy(zarr_format: int) -> zarr.storage.MemoryStore:
    store = zarr.storage.MemoryStore()
    root = zarr.create_group(store=store, zarr_format=zarr_format, attributes={"root": True})
    root.create_array("a", shape=(4,), chunks=(2,), dtype="f8", fill_value=math.nan, attributes={"u": "m"})
    group = root.create_group("g", attributes={"level": 1})
    group.create_array("b", shape=(3, 2), dtype="i4")
    group.create_group("h").create_array("c", shape=(5,), dtype="u1")
    zarr.consolidate_metadata(store)
    return store


NODES = ["a", "g", "g/b", "g/h", "g/h/c"]


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_consolidated_metadata_from_zarr_python_opens_every_node_like_its_own_documents(zarr_format):
    store = _zarr_hierarchy(zarr_format)
    if zarr_format == 2:
        entries = parse_consolidated_v2(store._store_dict[".zmetadata"].to_bytes(), "")
    else:
        root = parse_node(_documents_of(store), "")
        entries = parse_consolidated_v3(root.consolidated_metadata, "")
    for node in NODES:
        assert parse_node(consolidated_documents(entries, node), node) == parse_node(_documents_of(store, node), node)
    assert consolidated_children(entries, "") == ["a", "g"]
    assert consolidated_children(entries, "g") == ["b", "h"]
    assert consolidated_children(consolidated_subtree(entries, "g"), "h") == ["c"]
    with pytest.raises(NodeNotFoundError):
        parse_node(consolidated_documents(entries, "nope"), "nope")


def _asyncarr_hierarchy(zarr_format: int) -> dict[str, bytes]:
    """Every document of a small hierarchy written by asyncarr, keyed from the root."""
    group_class = GroupMetadataV2 if zarr_format == 2 else GroupMetadataV3
    nodes = {
        "": group_class(attributes={"root": True}),
        "a": create_array_metadata(zarr_format=zarr_format, shape=(4,), chunks=2, dtype="f8", fill_value=math.nan),
        "g": group_class(attributes={"level": 1}),
        "g/b": create_array_metadata(zarr_format=zarr_format, shape=(3, 2), chunks=2, dtype="i4"),
        "g/h": group_class(),
        "g/h/c": create_array_metadata(zarr_format=zarr_format, shape=(5,), chunks=5, dtype="u1"),
    }
    return {
        f"{path}/{name}".lstrip("/"): raw for path, node in nodes.items() for name, raw in node.to_documents().items()
    }


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_consolidated_metadata_asyncarr_writes_is_all_zarr_python_needs(zarr_format):
    documents = _asyncarr_hierarchy(zarr_format)
    entries = {key: json.loads(raw) for key, raw in documents.items() if key not in ("zarr.json",)}
    root_documents = {key: raw for key, raw in documents.items() if "/" not in key}
    if zarr_format == 2:
        root_documents[".zmetadata"] = consolidated_v2_document(entries)
        assert parse_consolidated_v2(root_documents[".zmetadata"], "") == entries
    else:
        root = parse_node(root_documents, "").with_consolidated_metadata(consolidated_v3_metadata(entries))
        root_documents = root.to_documents()
        assert parse_consolidated_v3(parse_node(root_documents, "").consolidated_metadata, "") == entries
    # Only the root's documents are in the store: zarr-python must take the rest from the consolidation.
    reference = zarr.open_consolidated(_store_with(root_documents), zarr_format=zarr_format)
    assert reference.attrs["root"] is True
    assert sorted(name for name, _ in reference.members(max_depth=None)) == NODES
    assert reference["g/b"].shape == (3, 2) and reference["g/h/c"].dtype == np.dtype("u1")
    assert math.isnan(reference["a"].fill_value) and reference["g"].attrs["level"] == 1


def test_consolidated_documents_that_are_malformed_raise_metadata_error():
    with pytest.raises(MetadataError, match=r"^\.zmetadata: 'zarr_consolidated_format' must be 1"):
        parse_consolidated_v2(b'{"metadata": {}}', "")
    with pytest.raises(MetadataError, match=r"^g/\.zmetadata: entry 'a/.zarray' must be a JSON object"):
        parse_consolidated_v2(b'{"zarr_consolidated_format": 1, "metadata": {"a/.zarray": 3}}', "g")
    with pytest.raises(MetadataError, match="not a metadata document"):
        parse_consolidated_v2(b'{"zarr_consolidated_format": 1, "metadata": {"a/b": {}}}', "")
    with pytest.raises(MetadataError, match="kind 'remote' is not supported"):
        parse_consolidated_v3({"kind": "remote", "metadata": {}}, "")
