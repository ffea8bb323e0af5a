"""Variable-length strings and bytes (v2 ``|O`` + vlen-utf8/vlen-bytes, v3 ``string``/``bytes``)
and fixed-length ``S``/``U`` in v3, read and written both ways with zarr-python 3.

tensorstore 0.1.86 supports none of these data types (its ``zarr`` driver rejects ``"|O"`` and
``"<U"``; its ``zarr3`` driver rejects ``string``, ``bytes``/``variable_length_bytes``,
``null_terminated_bytes`` and ``fixed_length_utf32``), so it has no part in these tests.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import pytest
import zarr
from interop_cases import (
    CHUNKS_2D,
    FORMATS,
    REGION_2D,
    SHAPE_2D,
    ZARR_PYTHON_WARNING_FILTERS,
    assert_reads_like_numpy,
    metadata_document,
    partially_written,
)
from zarr.core.dtype import VariableLengthBytes

import asyncarr
import asyncarr.sync as za
from asyncarr.errors import CodecError, MetadataError
from asyncarr.metadata.dtypes import (
    BYTES_DTYPE,
    STRING_DTYPE,
    dtype_to_json,
    fill_value_to_json,
    normalize_dtype,
    parse_dtype,
    parse_fill_value,
)

pytestmark = ZARR_PYTHON_WARNING_FILTERS

KINDS = ["str", "bytes"]
CASES = [(fmt, kind) for fmt in FORMATS for kind in KINDS]

#: Empty, non-ASCII, astral-plane, control characters, embedded NUL and a 40 000-character string.
TEXTS = [
    "",
    "a",
    "é",
    "zé日",
    "日本語テキスト",
    "🎉 party",
    "tab\tnew\nline",
    "nul\x00inside",
    "ß" * 3,
    "long" * 10_000,
]
#: Byte strings, including ones that are not UTF-8.
BLOBS = [b"", b"a", b"\x00", b"\xff\xfe\x00\x01", "é日".encode(), b"\x00" * 7, bytes(range(256)) * 40]
FILL_VALUES = {"str": "n/a", "bytes": b"\xff\x00fill"}
DEFAULT_FILL_VALUES = {"str": "", "bytes": b""}


def _dtype(kind: str) -> np.dtype:
    return STRING_DTYPE if kind == "str" else BYTES_DTYPE


def _zarr_dtype(kind: str) -> Any:
    """How zarr-python 3 is asked for the same data type."""
    return str if kind == "str" else VariableLengthBytes()


def sample(kind: str, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Deterministic strings (StringDType) or byte strings (object) drawn from TEXTS or BLOBS."""
    rng = np.random.default_rng(seed)
    pool = TEXTS if kind == "str" else BLOBS
    flat = np.empty(int(np.prod(shape)), dtype=object)
    flat[:] = [pool[i] for i in rng.integers(0, len(pool), flat.size)]
    return flat.astype(_dtype(kind)).reshape(shape)


def _create(path: Path, zarr_format: int, kind: str, **kwargs: Any) -> za.Array:
    """An asyncarr array of strings or bytes, created as users write it: ``dtype=str`` / ``bytes``."""
    dtype = str if kind == "str" else bytes
    if zarr_format == 3:
        # The v3 chain named without its serializer: asyncarr inserts vlen-utf8 / vlen-bytes.
        kwargs.setdefault("codecs", [{"name": "zstd", "configuration": {"level": 1, "checksum": False}}])
    return za.open_array(str(path), mode="w", dtype=dtype, zarr_format=zarr_format, **kwargs)


# --- data types and fill values as JSON ----------------------------------------


@pytest.mark.parametrize(
    ("spelling", "expected"),
    [(str, STRING_DTYPE), ("U", STRING_DTYPE), ("T", STRING_DTYPE), (np.dtypes.StringDType(), STRING_DTYPE),
     (bytes, BYTES_DTYPE), ("S", BYTES_DTYPE), (object, BYTES_DTYPE), ("U5", np.dtype("<U5")), ("S5", np.dtype("S5"))],
)  # fmt: skip
def test_users_spell_variable_length_types_as_python_and_numpy_types(spelling, expected):
    assert normalize_dtype(spelling) == expected


def test_string_dtype_with_na_object_is_refused():
    with pytest.raises(MetadataError, match="na_object"):
        normalize_dtype(np.dtypes.StringDType(na_object=None))


@pytest.mark.parametrize(
    ("zarr_format", "json_value", "codec_id", "expected"),
    [(2, "|O", "vlen-utf8", STRING_DTYPE), (2, "|O", "vlen-bytes", BYTES_DTYPE), (3, "string", None, STRING_DTYPE),
     (3, "bytes", None, BYTES_DTYPE), (3, "variable_length_bytes", None, BYTES_DTYPE),
     (3, {"name": "bytes", "configuration": {}}, None, BYTES_DTYPE)],
)  # fmt: skip
def test_variable_length_data_type_json_parses_to_string_or_object_dtype(zarr_format, json_value, codec_id, expected):
    assert parse_dtype(zarr_format, json_value, codec_id) == expected


@pytest.mark.parametrize(("kind", "v3_name"), [("str", "string"), ("bytes", "bytes")])
def test_variable_length_dtypes_are_written_as_o_in_v2_and_by_name_in_v3(kind, v3_name):
    assert dtype_to_json(2, _dtype(kind)) == "|O"
    assert dtype_to_json(3, _dtype(kind)) == v3_name


def test_v2_object_dtype_without_an_object_codec_is_a_metadata_error():
    with pytest.raises(MetadataError, match="needs an object codec"):
        parse_dtype(2, "|O", None)


@pytest.mark.parametrize("codec_id", ["json2", "msgpack2", "vlen-array", "pickle"])
def test_v2_object_dtype_with_a_python_object_codec_is_an_object_array(codec_id):
    # Whether the codec may be built (pickle) is the allowlist's question, asked when the pipeline is built.
    assert parse_dtype(2, "|O", codec_id) == np.dtype(object)


@pytest.mark.parametrize("zarr_format", FORMATS)
@pytest.mark.parametrize(("kind", "value", "json_value"), [("str", "zé日", "zé日"), ("bytes", b"\xff\x00", "/wA=")])
def test_fill_values_round_trip_through_json_as_zarr_python_spells_them(zarr_format, kind, value, json_value):
    assert fill_value_to_json(zarr_format, value, _dtype(kind)) == json_value
    assert parse_fill_value(zarr_format, json_value, _dtype(kind)) == value


def test_numeric_v2_fill_value_of_a_string_array_reads_as_its_text_like_zarr_python():
    # zarr-python 2 wrote its default fill value 0 into string arrays; zarr-python 3 reads "0".
    assert parse_fill_value(2, 0, STRING_DTYPE) == "0"


# --- metadata documents ------------------------------------------------------------------


@pytest.mark.parametrize(("zarr_format", "kind"), CASES)
def test_metadata_of_new_string_and_bytes_arrays_matches_zarr_python(tmp_path, zarr_format, kind):
    ours = _create(tmp_path / "ours", zarr_format, kind, shape=(4,), chunks=(2,))
    zarr.create_array(tmp_path / "theirs", shape=(4,), chunks=(2,), dtype=_zarr_dtype(kind), zarr_format=zarr_format)
    mine = metadata_document(tmp_path / "ours", zarr_format)
    theirs = metadata_document(tmp_path / "theirs", zarr_format)
    assert mine["fill_value"] == theirs["fill_value"] == ""
    if zarr_format == 2:
        assert mine["dtype"] == theirs["dtype"] == "|O"
        assert mine["filters"] == theirs["filters"] == [{"id": f"vlen-{'utf8' if kind == 'str' else 'bytes'}"}]
    else:
        # zarr-python writes "variable_length_bytes"; asyncarr the registered name "bytes", which it reads too.
        assert mine["data_type"] == ("string" if kind == "str" else "bytes")
        assert mine["codecs"][0]["name"] == theirs["codecs"][0]["name"]
        assert zarr.open_array(tmp_path / "ours", mode="r").dtype == ours.dtype
    assert ours.dtype == _dtype(kind)


@pytest.mark.parametrize(("zarr_format", "kind"), CASES)
def test_dtype_str_and_bytes_create_variable_length_arrays_with_the_default_codecs(tmp_path, zarr_format, kind):
    z = za.open_array(str(tmp_path), mode="w", shape=(5,), chunks=(2,), dtype=str if kind == "str" else bytes,
                      zarr_format=zarr_format)  # fmt: skip
    data = sample(kind, (5,))
    z[:] = data
    np.testing.assert_array_equal(zarr.open_array(tmp_path, mode="r")[:], data)
    if zarr_format == 3:
        assert metadata_document(tmp_path, 3)["codecs"][0]["name"] == ("vlen-utf8" if kind == "str" else "vlen-bytes")
        assert metadata_document(tmp_path, 3)["codecs"][1]["configuration"]["typesize"] == 1  # as zarr-python's Blosc


def test_v2_object_dtype_with_a_vlen_utf8_filter_holds_strings(tmp_path):
    z = za.open_array(str(tmp_path), mode="w", shape=(3,), dtype=object, filters=[numcodecs.VLenUTF8()], zarr_format=2)
    assert z.dtype == STRING_DTYPE
    z[:] = ["x", "é", ""]
    assert metadata_document(tmp_path, 2)["filters"] == [{"id": "vlen-utf8"}]
    np.testing.assert_array_equal(zarr.open_array(tmp_path, mode="r")[:], np.array(["x", "é", ""], dtype="T"))


# --- data, both directions -------------------------------------------------------------


@pytest.mark.parametrize("fill", ["default", "custom"])
@pytest.mark.parametrize(("zarr_format", "kind"), CASES)
def test_zarr_python_reads_partially_written_asyncarr_arrays(tmp_path, zarr_format, kind, fill):
    # No fill_value given: the default, written explicitly (fill_value=None would be a v2 null).
    fill_kwargs = {"fill_value": FILL_VALUES[kind]} if fill == "custom" else {}
    z = _create(tmp_path, zarr_format, kind, shape=SHAPE_2D, chunks=CHUNKS_2D, **fill_kwargs)
    data = sample(kind, SHAPE_2D)
    z[REGION_2D] = data[REGION_2D]
    expected = partially_written(data, z.fill_value, REGION_2D)
    theirs = zarr.open_array(tmp_path, mode="r")
    result = theirs[:]
    assert result.dtype == _dtype(kind)
    np.testing.assert_array_equal(result, expected)
    assert theirs.fill_value == z.fill_value == (FILL_VALUES if fill == "custom" else DEFAULT_FILL_VALUES)[kind]


@pytest.mark.parametrize("fill", ["default", "custom"])
@pytest.mark.parametrize(("zarr_format", "kind"), CASES)
def test_asyncarr_reads_partially_written_zarr_python_arrays_like_numpy(tmp_path, zarr_format, kind, fill):
    fill_value = FILL_VALUES[kind] if fill == "custom" else None
    theirs = zarr.create_array(tmp_path, shape=SHAPE_2D, chunks=CHUNKS_2D, dtype=_zarr_dtype(kind),
                               zarr_format=zarr_format, fill_value=fill_value)  # fmt: skip
    data = sample(kind, SHAPE_2D, seed=1)
    theirs[REGION_2D] = data[REGION_2D]
    expected = theirs[:]
    # zarr-python writes a v2 fill_value of None as null; missing chunks then read as "" (b"").
    reads_as = DEFAULT_FILL_VALUES[kind] if theirs.fill_value is None else theirs.fill_value
    np.testing.assert_array_equal(expected, partially_written(data, reads_as, REGION_2D))
    z = za.open_array(str(tmp_path), mode="r")
    assert z.dtype == expected.dtype
    assert z.fill_value == theirs.fill_value
    assert_reads_like_numpy(z, expected)


@pytest.mark.parametrize(("zarr_format", "kind"), CASES)
def test_asyncarr_updates_zarr_python_arrays_in_place_and_zarr_python_sees_it(tmp_path, zarr_format, kind):
    theirs = zarr.create_array(tmp_path, shape=(9,), chunks=(4,), dtype=_zarr_dtype(kind), zarr_format=zarr_format)
    expected = sample(kind, (9,), seed=2)
    theirs[:] = expected
    z = za.open_array(str(tmp_path), mode="r+")
    update = sample(kind, (3,), seed=3)
    z[3:6] = update
    expected[3:6] = update
    np.testing.assert_array_equal(theirs[:], expected)


def test_async_api_reads_strings_written_by_zarr_python(tmp_path):
    theirs = zarr.create_array(tmp_path, shape=(6,), chunks=(4,), dtype=str, zarr_format=3)
    theirs[:] = TEXTS[:6]

    async def read() -> np.ndarray:
        z = await asyncarr.open_array(str(tmp_path), mode="r")
        return await z.getitem(slice(1, None, 2))

    np.testing.assert_array_equal(asyncio.run(read()), np.array(TEXTS[1:6:2], dtype="T"))


@pytest.mark.parametrize("kind", KINDS)
def test_v2_order_f_variable_length_arrays_read_both_ways(tmp_path, kind):
    data = sample(kind, SHAPE_2D, seed=4)
    ours = _create(tmp_path / "ours", 2, kind, shape=SHAPE_2D, chunks=CHUNKS_2D, order="F")
    ours[:] = data
    np.testing.assert_array_equal(zarr.open_array(tmp_path / "ours", mode="r")[:], data)
    theirs = zarr.create_array(tmp_path / "theirs", shape=SHAPE_2D, chunks=CHUNKS_2D, dtype=_zarr_dtype(kind),
                               zarr_format=2, order="F")  # fmt: skip
    theirs[:] = data
    assert_reads_like_numpy(za.open_array(str(tmp_path / "theirs"), mode="r"), data)


@pytest.mark.parametrize("kind", KINDS)
def test_v3_transposed_variable_length_arrays_are_serialized_in_c_order_as_the_spec_says(tmp_path, kind):
    # Only this direction: zarr-python 3.1.6 flattens a transposed chunk in memory order before
    # vlen-utf8, so it does not read back its own transposed string arrays.
    data = sample(kind, SHAPE_2D, seed=5)
    transpose = {"name": "transpose", "configuration": {"order": [1, 0]}}
    z = _create(tmp_path, 3, kind, shape=SHAPE_2D, chunks=CHUNKS_2D, order="F", codecs=[transpose])
    z[:] = data
    assert metadata_document(tmp_path, 3)["codecs"][0]["name"] == "transpose"
    np.testing.assert_array_equal(zarr.open_array(tmp_path, mode="r")[:], data)
    assert_reads_like_numpy(za.open_array(str(tmp_path), mode="r"), data)


@pytest.mark.parametrize(("zarr_format", "kind"), CASES)
def test_none_elements_are_stored_as_zarr_python_stores_them(tmp_path, zarr_format, kind):
    values = np.array(["a", None, "c"] if kind == "str" else [b"a", None, b"c"], dtype=object)
    ours = _create(tmp_path / "ours", zarr_format, kind, shape=(3,))
    ours[:] = values
    theirs = zarr.create_array(tmp_path / "theirs", shape=(3,), dtype=_zarr_dtype(kind), zarr_format=zarr_format)
    theirs[:] = values
    np.testing.assert_array_equal(ours[:], theirs[:])
    np.testing.assert_array_equal(zarr.open_array(tmp_path / "ours", mode="r")[:], theirs[:])


@pytest.mark.parametrize("kind", KINDS)
def test_sharded_variable_length_arrays_read_both_ways(tmp_path, kind):
    data = sample(kind, SHAPE_2D, seed=6)
    ours = _create(tmp_path / "ours", 3, kind, shape=SHAPE_2D, chunks=(2, 2), shards=(4, 4))
    ours[REGION_2D] = data[REGION_2D]
    expected = partially_written(data, DEFAULT_FILL_VALUES[kind], REGION_2D)
    np.testing.assert_array_equal(zarr.open_array(tmp_path / "ours", mode="r")[:], expected)
    theirs = zarr.create_array(tmp_path / "theirs", shape=SHAPE_2D, chunks=(2, 2), shards=(4, 4),
                               dtype=_zarr_dtype(kind), zarr_format=3)  # fmt: skip
    theirs[REGION_2D] = data[REGION_2D]
    assert_reads_like_numpy(za.open_array(str(tmp_path / "theirs"), mode="r"), expected)


# --- chunks: missing, partial, emptied ---------------------------------------------------


@pytest.mark.parametrize(("zarr_format", "kind"), CASES)
def test_missing_chunks_read_as_the_fill_value_and_fill_chunks_are_not_stored(tmp_path, zarr_format, kind):
    z = _create(tmp_path, zarr_format, kind, shape=(10,), chunks=(4,), fill_value=FILL_VALUES[kind])
    np.testing.assert_array_equal(z[:], np.full(10, FILL_VALUES[kind], dtype=_dtype(kind)))
    assert z.nchunks_initialized == 0
    z[5:6] = ["x"] if kind == "str" else [b"x"]
    assert z.nchunks_initialized == 1
    z[4:8] = FILL_VALUES[kind]
    assert z.nchunks_initialized == 0
    expected = np.full(10, FILL_VALUES[kind], dtype=_dtype(kind))
    np.testing.assert_array_equal(zarr.open_array(tmp_path, mode="r")[:], expected)


@pytest.mark.parametrize(("zarr_format", "kind"), CASES)
def test_one_element_assigned_by_integer_index_reads_back_as_itself(tmp_path, zarr_format, kind):
    z = _create(tmp_path, zarr_format, kind, shape=(5,), chunks=(2,))
    value = TEXTS[5] if kind == "str" else BLOBS[3]
    z[3] = value
    assert z[3] == value
    assert zarr.open_array(tmp_path, mode="r")[3] == value


@pytest.mark.parametrize(("zarr_format", "kind"), CASES)
def test_partial_writes_keep_the_other_elements_of_each_chunk(tmp_path, zarr_format, kind):
    z = _create(tmp_path, zarr_format, kind, shape=SHAPE_2D, chunks=CHUNKS_2D)
    expected = np.full(SHAPE_2D, DEFAULT_FILL_VALUES[kind], dtype=_dtype(kind))
    regions = [(slice(0, 2), slice(0, 3)), (1, slice(None)), (slice(None, None, -3), 4), (slice(2, 7), slice(1, 2))]
    for seed, region in enumerate(regions):
        value = sample(kind, expected[region].shape, seed=10 + seed)
        z[region] = value
        expected[region] = value
        assert_reads_like_numpy(z, expected)
    np.testing.assert_array_equal(zarr.open_array(tmp_path, mode="r")[:], expected)


@pytest.mark.parametrize(("zarr_format", "kind"), CASES)
def test_a_scalar_broadcast_over_a_selection_reads_back_everywhere(tmp_path, zarr_format, kind):
    z = _create(tmp_path, zarr_format, kind, shape=SHAPE_2D, chunks=CHUNKS_2D)
    value = TEXTS[-1] if kind == "str" else BLOBS[-1]
    z[1:6, ::2] = value
    expected = np.full(SHAPE_2D, DEFAULT_FILL_VALUES[kind], dtype=_dtype(kind))
    expected[1:6, ::2] = value
    assert_reads_like_numpy(z, expected)


def test_resizing_a_string_array_clears_what_was_cut_off(tmp_path):
    z = _create(tmp_path, 3, "str", shape=(10,), chunks=(4,))
    z[:] = sample("str", (10,))
    z.resize(6)
    z.resize(10)
    np.testing.assert_array_equal(zarr.open_array(tmp_path, mode="r")[6:], np.full(4, "", dtype="T"))


# --- damaged data and invalid metadata -----------------------------------------------------


@pytest.mark.parametrize(("zarr_format", "kind"), CASES)
def test_truncated_or_misshapen_chunks_raise_codec_error_naming_the_key(tmp_path, zarr_format, kind):
    uncompressed = {"compressor": None} if zarr_format == 2 else {"codecs": []}
    z = _create(tmp_path, zarr_format, kind, shape=(8,), chunks=(4,), **uncompressed)
    z[:] = sample(kind, (8,))
    key = "0" if zarr_format == 2 else "c/0"
    chunk = (tmp_path / key).read_bytes()
    (tmp_path / key).write_bytes(chunk[:-3])
    with pytest.raises(CodecError, match=key):
        z[:]
    # A well-formed chunk of three elements where the chunk shape holds four.
    codec = numcodecs.VLenUTF8() if kind == "str" else numcodecs.VLenBytes()
    (tmp_path / key).write_bytes(codec.encode(sample(kind, (3,)).astype(object)))
    with pytest.raises(CodecError, match=r"3 .*elements, expected 4"):
        z[:4]


@pytest.mark.parametrize("zarr_format", FORMATS)
def test_storing_str_in_a_bytes_array_says_to_use_dtype_str(tmp_path, zarr_format):
    z = _create(tmp_path, zarr_format, "bytes", shape=(2,))
    with pytest.raises(CodecError, match="dtype=str"):
        z[:] = np.array(["text", b"ok"], dtype=object)


def test_strings_are_refused_by_the_bytes_codec_with_the_codec_to_use(tmp_path):
    theirs = zarr.create_array(tmp_path, shape=(2,), dtype=str, zarr_format=3)
    document = metadata_document(tmp_path, 3)
    document["codecs"] = [{"name": "bytes", "configuration": {"endian": "little"}}]
    (tmp_path / "zarr.json").write_text(json.dumps(document))
    with pytest.raises(MetadataError, match="use 'vlen-utf8'"):
        za.open_array(str(tmp_path), mode="r")
    assert theirs.dtype == STRING_DTYPE


@pytest.mark.parametrize(("filters", "message"), [(None, "needs an object codec"), ([{"id": "pickle"}], "'pickle'")])
def test_v2_object_arrays_of_other_python_objects_are_refused(tmp_path, filters, message):
    zarr.create_array(tmp_path, shape=(2,), dtype=str, zarr_format=2)
    document = metadata_document(tmp_path, 2)
    document["filters"] = filters
    (tmp_path / ".zarray").write_text(json.dumps(document))
    with pytest.raises(MetadataError, match=message):
        za.open_array(str(tmp_path), mode="r")


def test_a_zarr_2_string_array_with_fill_value_0_reads_its_missing_chunks_like_zarr_python(tmp_path):
    theirs = zarr.create_array(tmp_path, shape=(6,), chunks=(3,), dtype=str, zarr_format=2)
    theirs[:3] = ["a", "b", "c"]
    document = metadata_document(tmp_path, 2)
    document["fill_value"] = 0
    (tmp_path / ".zarray").write_text(json.dumps(document))
    np.testing.assert_array_equal(za.open_array(str(tmp_path), mode="r")[:], zarr.open_array(tmp_path, mode="r")[:])


# --- fixed-length S and U in v3 ------------------------------------------------------------


FIXED = {
    "S6": np.array([b"", b"a", b"abcdef", b"\x00x", b"\xff\xfe", b"ab cd"], dtype="S6"),
    "U4": np.array(["", "é", "日本語!", "🎉🎉", "a\tb", "abcd"], dtype="U4"),
    ">U4": np.array(["", "é", "日本語!", "🎉🎉", "a\tb", "abcd"], dtype=">U4"),
}


@pytest.mark.parametrize("dtype", list(FIXED))
def test_v3_fixed_length_strings_written_by_asyncarr_read_in_zarr_python(tmp_path, dtype):
    data = FIXED[dtype]
    fill_value = data[-1]
    z = za.open_array(
        str(tmp_path), mode="w", shape=(9,), chunks=(4,), dtype=dtype, fill_value=fill_value, zarr_format=3
    )
    z[:6] = data
    expected = np.concatenate([data, np.full(3, fill_value, dtype=dtype)])
    result = zarr.open_array(tmp_path, mode="r")[:]
    np.testing.assert_array_equal(result, expected)
    assert result.dtype.kind == np.dtype(dtype).kind


@pytest.mark.parametrize("dtype", ["S6", "U4"])
def test_v3_fixed_length_strings_written_by_zarr_python_read_in_asyncarr(tmp_path, dtype):
    data = FIXED[dtype]
    theirs = zarr.create_array(tmp_path, shape=(9,), chunks=(4,), dtype=dtype, fill_value=data[2], zarr_format=3)
    theirs[1:7] = data
    z = za.open_array(str(tmp_path), mode="r")
    assert z.dtype == np.dtype(dtype)
    assert z.fill_value == data[2]
    assert_reads_like_numpy(z, theirs[:])
