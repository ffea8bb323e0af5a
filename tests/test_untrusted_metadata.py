"""Metadata strangers wrote: JSON within limits, node kinds from parsed JSON, a metadata fuzz, and
odd-but-honest data that still reads.

Every store here is written with plain file writes, as a stranger would; opening it either works
(and then reads like NumPy says it should) or raises `MetadataError` naming the document's key.
"""

from __future__ import annotations

import base64
import copy
import json
import math
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strangers import snapshot, write_documents

import asyncarr.sync as za
from asyncarr.errors import ContainsArrayError, ContainsGroupError, MetadataError
from asyncarr.metadata import _json, default_fill_value

# -- helpers -------------------------------------------------------------------------------------


def v3_array(data_type: Any = "int32", shape: list = [4], chunks: list = [2], fill_value: Any = 0, **extra) -> dict:  # noqa: B006
    """A valid v3 array ``zarr.json`` (codecs: little-endian bytes)."""
    return {
        "zarr_format": 3,
        "node_type": "array",
        "shape": shape,
        "data_type": data_type,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": fill_value,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        "attributes": {},
        **extra,
    }


def v3_group(attributes: dict | None = None, **extra) -> dict:
    """A valid v3 group ``zarr.json``."""
    return {"zarr_format": 3, "node_type": "group", "attributes": attributes or {}, **extra}


def v2_array(dtype: str = "<i4", shape: list = [4], chunks: list = [2], fill_value: Any = 0, **extra) -> dict:  # noqa: B006
    """A valid v2 ``.zarray``."""
    return {
        "zarr_format": 2,
        "shape": shape,
        "chunks": chunks,
        "dtype": dtype,
        "compressor": None,
        "fill_value": fill_value,
        "filters": None,
        "order": "C",
        "dimension_separator": ".",
        **extra,
    }


def nested(depth: int, leaf: Any = 0) -> Any:
    """A JSON value of arrays nested `depth` deep around `leaf`."""
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


# -- JSON within limits --------------------------------------------------------------------------


HOSTILE_JSON = {
    "nested-100000-deep": "[" * 100_000 + "]" * 100_000,
    "objects-nested-deep": '{"a":' * 5000 + "0" + "}" * 5000,
    "deep-in-the-attributes": json.dumps(v3_array(attributes={"x": nested(_json.MAX_NESTING_DEPTH)})),
    "5000-digit-shape": '{"zarr_format": 3, "node_type": "array", "shape": [' + "9" * 5000 + "]}",
    "5000-digit-float": json.dumps(v3_array(data_type="float64"))[:-1] + ', "x": 1.' + "5" * 5000 + "}",
    "401-digit-attribute": json.dumps(v3_array(attributes={"n": 10**400})),
    "unbalanced-deep": "{" + "[" * 10_000 + "}",
    "unterminated-string": '{"a": "' + "[" * 1000,
}


@pytest.mark.parametrize("raw", HOSTILE_JSON.values(), ids=HOSTILE_JSON.keys())
def test_hostile_json_in_zarr_json_is_a_metadata_error_naming_the_document(tmp_path: Path, raw: str) -> None:
    root = tmp_path / "hostile.zarr"
    write_documents(root, {"zarr.json": raw})

    with pytest.raises(MetadataError) as caught:
        za.open(str(root), mode="r")

    assert f"{root.as_uri()}/zarr.json" in str(caught.value)


@pytest.mark.parametrize("name", [".zarray", ".zattrs", ".zgroup"])
def test_hostile_json_in_v2_documents_names_that_document(tmp_path: Path, name: str) -> None:
    root = tmp_path / "hostile.zarr"
    documents: dict[str, Any] = {".zarray": v2_array()} if name != ".zgroup" else {}
    documents[name] = '{"a": ' + "[" * 1000 + "]" * 1000 + "}"
    write_documents(root, documents)

    with pytest.raises(MetadataError) as caught:
        za.open(str(root), mode="r")

    assert f"{root.as_uri()}/{name}" in str(caught.value)


def test_hostile_json_in_zmetadata_names_it(tmp_path: Path) -> None:
    root = tmp_path / "consolidated.zarr"
    zmetadata = '{"zarr_consolidated_format": 1, "metadata": {".zgroup": {"zarr_format": 2}, "x": ' + "9" * 500 + "}}"
    write_documents(root, {".zgroup": {"zarr_format": 2}, ".zmetadata": zmetadata})

    with pytest.raises(MetadataError) as caught:
        za.open_group(str(root), mode="r")

    assert f"{root.as_uri()}/.zmetadata" in str(caught.value) and "digits" in str(caught.value)


def test_a_document_over_the_size_limit_is_refused_before_it_is_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "big.zarr"
    raw = json.dumps(v3_array(attributes={"padding": "x" * 5000}))
    write_documents(root, {"zarr.json": raw})
    monkeypatch.setattr(_json, "MAX_DOCUMENT_BYTES", len(raw) - 1)

    with pytest.raises(MetadataError) as caught:
        za.open(str(root), mode="r")

    assert f"{root.as_uri()}/zarr.json" in str(caught.value) and "larger than" in str(caught.value)


def test_metadata_at_the_limits_opens_reads_and_keeps_its_attributes(tmp_path: Path) -> None:
    """Depth 128, 400-digit numbers, brackets and digits inside strings, escapes: all honest, all read."""
    attributes = {
        "deep": nested(_json.MAX_NESTING_DEPTH - 2),  # inside the document and attributes objects
        "big": 10**399,
        "brackets in text": "[" * 10_000 + "{" * 10_000,
        "digits in text": "7" * 10_000,
        "escapes": 'a \\" [ \\\\" ] \\',
        "nan": math.nan,
    }
    document = {**v3_array(), "attributes": attributes}
    root = tmp_path / "limits.zarr"
    write_documents(root, {"zarr.json": document, "c/0": np.array([1, 2], "<i4").tobytes()})

    z = za.open_array(str(root), mode="r")

    np.testing.assert_array_equal(z[:], [1, 2, 0, 0])
    assert json.dumps(dict(z.attrs), allow_nan=True) == json.dumps(attributes, allow_nan=True)


def test_a_consolidated_hierarchy_of_tens_of_mib_opens(tmp_path: Path) -> None:
    """The size limit is far above what big honest hierarchies consolidate to."""
    root = tmp_path / "big.zarr"
    children = {
        f"g{i}/a{j}": {**v3_array(), "attributes": {"long_name": "x" * 300}} for i in range(100) for j in range(300)
    }
    children.update({f"g{i}": v3_group() for i in range(100)})
    consolidated = {"kind": "inline", "must_understand": False, "metadata": children}
    raw = json.dumps(v3_group(consolidated_metadata=consolidated), indent=2)
    assert len(raw) > 20 * 2**20
    write_documents(root, {"zarr.json": raw})

    group = za.open_group(str(root), mode="r")

    assert group["g99/a299"].shape == (4,)
    assert len(group["g3"].keys()) == 300


# -- absurd and large-but-legal shapes -------------------------------------------------------------

ABSURD_GRIDS = {
    "negative-extent": ([-1], [1]),
    "zero-chunk": ([4], [0]),
    "negative-chunk": ([4], [-2]),
    "extent-2**63": ([2**63], [1]),
    "chunk-2**64": ([4], [2**64]),
    "65-dimensions": ([1] * 65, [1] * 65),
    "chunks-of-other-rank": ([4, 4], [2]),
    "float-extent": ([4.0], [2]),
    "bool-chunk": ([4], [True]),
}


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize(("shape", "chunks"), ABSURD_GRIDS.values(), ids=ABSURD_GRIDS.keys())
def test_absurd_shapes_and_chunks_are_metadata_errors(
    tmp_path: Path, zarr_format: int, shape: list, chunks: list
) -> None:
    root = tmp_path / "absurd.zarr"
    if zarr_format == 3:
        documents: dict[str, Any] = {"zarr.json": v3_array(shape=shape, chunks=chunks)}
    else:
        documents = {".zarray": v2_array(shape=shape, chunks=chunks)}
    write_documents(root, documents)

    with pytest.raises(MetadataError) as caught:
        za.open_array(str(root), mode="r")

    assert f"{root.as_uri()}/{next(iter(documents))}" in str(caught.value)


@pytest.mark.parametrize("field", ["shape", "data_type", "fill_value", "dimension_names", "codecs"])
def test_an_error_quotes_a_huge_bad_value_briefly(tmp_path: Path, field: str) -> None:
    root = tmp_path / "huge.zarr"
    write_documents(root, {"zarr.json": {**v3_array(), field: [{"x": "y" * 100}] * 100_000}})

    with pytest.raises(MetadataError) as caught:
        za.open_array(str(root), mode="r")

    assert f"{root.as_uri()}/zarr.json" in str(caught.value) and len(str(caught.value)) < 1000


@pytest.mark.parametrize(
    ("shape", "chunks"),
    [([2**63 - 1], [2**63 - 1]), ([2**62], [1]), ([2**40, 2**40], [1, 1]), ([3], [2**62]), ([1] * 64, [1] * 64)],
    ids=["largest-extent", "2**62-chunks", "2**80-chunks", "chunk-larger-than-shape", "64-dimensions"],
)
def test_large_but_legal_grids_open_and_read_the_fill_value(tmp_path: Path, shape: list, chunks: list) -> None:
    root = tmp_path / "large.zarr"
    write_documents(root, {"zarr.json": v3_array(shape=shape, chunks=chunks, fill_value=7)})

    z = za.open_array(str(root), mode="r")

    assert z.shape == tuple(shape)
    np.testing.assert_array_equal(z[tuple(slice(0, 2) for _ in shape)], np.full([min(2, n) for n in shape], 7, "i4"))
    assert z[tuple(n - 1 for n in shape)] == 7


# -- node kinds from parsed JSON -----------------------------------------------------------------

TRICKY_ATTRIBUTES = [
    {"description": "this array belongs to the group of sensors"},
    {"node_type": "group"},
    {"nested": {"zarr_format": 3, "node_type": "group"}},
]


@pytest.mark.parametrize("attributes", TRICKY_ATTRIBUTES, ids=["word", "node_type-key", "nested-document"])
def test_an_array_whose_attributes_say_group_gets_nothing_created_inside(tmp_path: Path, attributes: dict) -> None:
    root = tmp_path / "hierarchy.zarr"
    # node_type written after the attributes, so the first "node_type" in the bytes is the attribute's.
    array_document = {key: value for key, value in v3_array().items() if key != "node_type"}
    array_document = {"attributes": attributes, **array_document, "node_type": "array"}
    write_documents(
        root,
        {"zarr.json": v3_group(), "arr/zarr.json": array_document, "arr/c/0": np.array([5, 6], "<i4").tobytes()},
    )
    before = snapshot(tmp_path)
    group = za.open_group(str(root), mode="a")

    np.testing.assert_array_equal(group["arr"][:], [5, 6, 0, 0])
    with pytest.raises(ContainsArrayError):
        group.create_group("arr/inside")
    with pytest.raises(ContainsArrayError):
        group.create_array("arr/inside/x", shape=(2,), dtype="i4")
    with pytest.raises(ContainsArrayError):
        group.require_group("arr")
    with pytest.raises(ContainsArrayError):
        za.open_group(str(root / "arr"), mode="a")
    with pytest.raises(ContainsArrayError):
        za.open_array(str(root), mode="w", path="arr/inside", shape=(2,), dtype="i4")

    assert snapshot(tmp_path) == before


def test_a_local_path_inside_an_array_directory_is_refused_and_its_chunks_survive(tmp_path: Path) -> None:
    root = tmp_path / "arr.zarr"
    write_documents(
        root, {"zarr.json": v3_array(attributes={"about": "group"}), "c/0": np.array([1, 2], "<i4").tobytes()}
    )
    before = snapshot(tmp_path)

    with pytest.raises(ContainsArrayError) as caught:
        za.open_array(str(root / "c"), mode="w", shape=(2,), dtype="i4")  # 'w' would delete the chunks
    with pytest.raises(ContainsArrayError):
        za.open_group(str(root / "c" / "deeper"), mode="w")

    assert root.as_uri() in str(caught.value)
    assert snapshot(tmp_path) == before


def test_what_lies_in_parent_directories_neither_blocks_nor_floods_the_inside_an_array_check(tmp_path: Path) -> None:
    # Above a local store anyone may have left anything: a FIFO that would block a read, a huge file.
    os.mkfifo(tmp_path / "zarr.json")
    (tmp_path / ".zarray").write_bytes(b"[" * (4 << 20))
    (tmp_path / ".zgroup").mkdir()

    z = za.open_array(str(tmp_path / "new.zarr"), mode="w", shape=(2,), dtype="i4")
    z[:] = [1, 2]

    assert list(za.open_array(str(tmp_path / "new.zarr"), mode="r")[:]) == [1, 2]


def test_a_v3_member_is_not_created_inside_a_v2_array(tmp_path: Path) -> None:
    root = tmp_path / "mixed.zarr"
    write_documents(root, {"zarr.json": v3_group(), "old/.zarray": v2_array(), "old/.zattrs": {"kind": "group"}})
    before = snapshot(tmp_path)
    group = za.open_group(str(root), mode="a")

    with pytest.raises(ContainsArrayError):
        group.create_group("old/inside")
    with pytest.raises(ContainsArrayError):
        group.create_array("old", shape=(2,), dtype="i4")

    assert snapshot(tmp_path) == before


def test_a_group_whose_attributes_say_array_is_a_group(tmp_path: Path) -> None:
    root = tmp_path / "group.zarr"
    write_documents(root, {"zarr.json": {"attributes": {"node_type": "array"}, "zarr_format": 3, "node_type": "group"}})

    group = za.open_group(str(root), mode="a")
    group.create_group("child")

    assert group.keys() == ["child"]
    with pytest.raises(ContainsGroupError):
        za.open_array(str(root), mode="r")


@pytest.mark.parametrize("bad", ["{broken", '{"zarr_format": 3, "node_type": "banana"}', "[]"])
def test_nothing_is_created_under_a_parent_whose_zarr_json_cannot_be_read(tmp_path: Path, bad: str) -> None:
    root = tmp_path / "broken.zarr"
    write_documents(root, {"zarr.json": v3_group(), "mid/zarr.json": bad})
    before = snapshot(tmp_path)
    group = za.open_group(str(root), mode="a")

    with pytest.raises(MetadataError) as caught:
        group.create_array("mid/x", shape=(2,), dtype="i4")

    assert f"{root.as_uri()}/mid/zarr.json" in str(caught.value)
    assert snapshot(tmp_path) == before


# -- odd but honest: the v3 bytes fill value -------------------------------------------------------


@pytest.mark.parametrize(
    ("fill_value", "expected"),
    [([0, 1, 2], b"\x00\x01\x02"), ([], b""), (base64.b64encode(b"hi").decode(), b"hi"), ("", b"")],
)
def test_the_v3_bytes_fill_value_is_a_byte_value_list_or_base64(
    tmp_path: Path, fill_value: Any, expected: bytes
) -> None:
    root = tmp_path / "bytes.zarr"
    write_documents(
        root, {"zarr.json": {**v3_array("bytes", fill_value=fill_value), "codecs": [{"name": "vlen-bytes"}]}}
    )

    z = za.open_array(str(root), mode="r")

    assert z.fill_value == expected
    assert list(z[:3]) == [expected] * 3


@pytest.mark.parametrize("fill_value", [[256], [-1], [1.5], [True], ["a"], "not base64!", 7])
def test_a_bad_v3_bytes_fill_value_is_a_metadata_error(tmp_path: Path, fill_value: Any) -> None:
    root = tmp_path / "bytes.zarr"
    write_documents(
        root, {"zarr.json": {**v3_array("bytes", fill_value=fill_value), "codecs": [{"name": "vlen-bytes"}]}}
    )

    with pytest.raises(MetadataError) as caught:
        za.open_array(str(root), mode="r")

    assert f"{root.as_uri()}/zarr.json" in str(caught.value) and "fill_value" in str(caught.value)


def test_a_bytes_array_round_trips_its_fill_value_with_zarr_python(tmp_path: Path) -> None:
    import zarr

    theirs = tmp_path / "theirs.zarr"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zarr-python calls its variable-length bytes data type unstable
        written = zarr.create_array(
            str(theirs), shape=(3,), chunks=(2,), dtype=zarr.dtype.VariableLengthBytes(), fill_value=b"\x00ab"
        )
    written[:1] = np.array([b"xyz"], dtype=object)
    # Whatever form zarr-python writes (base64 since 3.1; byte values in 3.0), asyncarr reads it.
    z = za.open_array(str(theirs), mode="r")
    assert z.fill_value == b"\x00ab"
    assert list(z[:]) == [b"xyz", b"\x00ab", b"\x00ab"]

    ours = tmp_path / "ours.zarr"
    write_documents(
        ours, {"zarr.json": {**v3_array("bytes", [3], [2], [0, 97, 98]), "codecs": [{"name": "vlen-bytes"}]}}
    )
    assert list(za.open_array(str(ours), mode="r")[:]) == [b"\x00ab"] * 3
    copy_ = za.open_array(
        str(tmp_path / "copy.zarr"), mode="w", shape=(3,), chunks=(2,), dtype=bytes, fill_value=b"\x00ab"
    )
    copy_[0] = b"xyz"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert list(zarr.open_array(str(tmp_path / "copy.zarr"), mode="r")[:]) == [b"xyz", b"\x00ab", b"\x00ab"]


# -- odd but honest: a group with one unreadable member ---------------------------------------------


def _group_with_one_bad_member(root: Path, zarr_format: int, bad: str) -> None:
    if zarr_format == 3:
        write_documents(
            root,
            {
                "zarr.json": v3_group(),
                "good/zarr.json": v3_array(),
                "good/c/0": np.array([1, 2], "<i4").tobytes(),
                "sub/zarr.json": v3_group(),
                "bad/zarr.json": bad,
            },
        )
    else:
        write_documents(
            root,
            {
                ".zgroup": {"zarr_format": 2},
                "good/.zarray": v2_array(),
                "good/0": np.array([1, 2], "<i4").tobytes(),
                "sub/.zgroup": {"zarr_format": 2},
                "bad/.zarray": bad,
            },
        )


BAD_DOCUMENTS = {
    "not-json": "{this is not json",
    "not-utf8": b'{"zarr_format": \xff}'.decode("latin-1"),
    "missing-fields": '{"zarr_format": 3, "node_type": "array"}',
    "too-deep": "[" * 1000 + "]" * 1000,
}


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("bad", BAD_DOCUMENTS.values(), ids=BAD_DOCUMENTS.keys())
def test_one_unreadable_member_hides_no_other(tmp_path: Path, zarr_format: int, bad: str) -> None:
    root = tmp_path / "g.zarr"
    _group_with_one_bad_member(root, zarr_format, bad)
    document = "zarr.json" if zarr_format == 3 else ".zarray"
    group = za.open_group(str(root), mode="r")

    with pytest.warns(UserWarning, match="unreadable member 'bad'"):
        assert group.keys() == ["good", "sub"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert [name for name, _ in group.members()] == ["good", "sub"]
        assert group.array_keys() == ["good"] and group.group_keys() == ["sub"]
    np.testing.assert_array_equal(group["good"][:], [1, 2, 0, 0])
    assert "bad" in group
    with pytest.raises(MetadataError) as caught:
        group["bad"]
    assert f"{root.as_uri()}/bad/{document}" in str(caught.value)

    lines = str(group.tree()).splitlines()
    assert lines[0] == "/"
    assert lines[1].startswith(f" ├── bad (unreadable: MetadataError: {root.as_uri()}/bad/{document}: ")
    assert lines[1].endswith(")")
    assert lines[2:] == [" ├── good (4,) int32", " └── sub"]


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_an_unreadable_member_of_consolidated_metadata_hides_no_other(tmp_path: Path, zarr_format: int) -> None:
    root = tmp_path / "g.zarr"
    if zarr_format == 3:
        entries = {"good": v3_array(), "bad": {**v3_array(), "shape": "four"}}
        consolidated = {"kind": "inline", "must_understand": False, "metadata": entries}
        write_documents(root, {"zarr.json": v3_group(consolidated_metadata=consolidated)})
    else:
        entries = {".zgroup": {"zarr_format": 2}, "good/.zarray": v2_array(), "bad/.zarray": v2_array(shape="four")}
        zmetadata = {"zarr_consolidated_format": 1, "metadata": entries}
        write_documents(root, {".zgroup": {"zarr_format": 2}, ".zmetadata": zmetadata})
    group = za.open_group(str(root), mode="r")

    with pytest.warns(UserWarning, match="unreadable member 'bad'"):
        assert group.keys() == ["good"]
    with pytest.raises(MetadataError, match="shape"):
        group["bad"]
    assert "bad (unreadable: MetadataError: " in str(group.tree())


def test_an_unreadable_member_can_be_replaced_or_deleted(tmp_path: Path) -> None:
    root = tmp_path / "g.zarr"
    _group_with_one_bad_member(root, 3, "{broken")
    group = za.open_group(str(root), mode="a")

    with pytest.raises(MetadataError):
        group.create_group("bad")  # without overwrite, the broken member is not silently replaced
    group.create_array("bad", shape=(2,), dtype="i4", fill_value=3, overwrite=True)
    np.testing.assert_array_equal(group["bad"][:], [3, 3])
    del group["bad"]
    assert group.keys() == ["good", "sub"]


# -- the whole-metadata fuzz -----------------------------------------------------------------------

V3_ARRAYS = [
    v3_array(),
    v3_array("float64", [5, 3], [2, 2], "NaN"),
    v3_array("uint64", [3], [3], 2**64 - 1),
    v3_array("complex128", [2], [1], [1.0, "-Infinity"]),
    v3_array("bool", [], [], True),
    v3_array({"name": "numpy.datetime64", "configuration": {"unit": "ns", "scale_factor": 1}}, [2], [2], "NaT"),
    v3_array({"name": "fixed_length_utf32", "configuration": {"length_bytes": 8}}, [2], [2], "ab"),
    v3_array("r16", [2], [2], [1, 2]),
    {**v3_array("string", [3], [2], "s"), "codecs": [{"name": "vlen-utf8"}]},
    {**v3_array("bytes", [3], [2], [0, 1]), "codecs": [{"name": "vlen-bytes"}]},
    {
        **v3_array("int16", [8, 8], [4, 4], 1),
        "codecs": [
            {
                "name": "sharding_indexed",
                "configuration": {
                    "chunk_shape": [2, 2],
                    "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
                    "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
                },
            }
        ],
        "dimension_names": ["y", None],
    },
    {
        **v3_array("float32", [4, 6], [3, 3], 0.5),
        "codecs": [
            {"name": "transpose", "configuration": {"order": [1, 0]}},
            {"name": "bytes", "configuration": {"endian": "big"}},
            {"name": "zstd", "configuration": {"level": 1, "checksum": False}},
        ],
        "chunk_key_encoding": {"name": "v2", "configuration": {"separator": "."}},
    },
]
V2_ARRAYS = [
    v2_array(),
    v2_array("<f8", [5, 3], [2, 2], "NaN"),
    v2_array(">u2", [3], [2], None, compressor={"id": "zlib", "level": 1}),
    v2_array("|S3", [2], [2], base64.b64encode(b"ab").decode()),
    v2_array("<U2", [2], [1], "x"),
    v2_array("<M8[s]", [2], [2], 0),
    v2_array("<c8", [2], [2], [0.0, 1.0]),
    v2_array("|O", [3], [2], "", filters=[{"id": "vlen-utf8"}]),
    v2_array("|b1", [2, 2], [1, 2], False, order="F"),
]

# fmt: off
WEIRD_VALUES = st.one_of(
    st.sampled_from(
        [
            None, True, False, 0, -1, 1, 2**31, 2**63 - 1, 2**63, 2**64, -(2**63) - 1, 10**300, 10**399,
            0.5, -0.0, 1e308, math.nan, math.inf, -math.inf, "", "NaN", "Infinity", "NaT", "0x7fc00000",
            "abc", "\x00", "\ud800", [], {}, [0], [-1], [0, 0], [2**63], [2**64, 1], [1, 1, 1, 1, 1],
            {"name": "no.such.codec"}, {"name": "bytes", "configuration": []}, {"name": "bytes", "configuration": None},
            {"id": "no-such-codec"}, {"name": "regular", "configuration": {"chunk_shape": [0]}},
            {"name": "default", "configuration": {"separator": "|"}}, {"must_understand": True},
            "|O", "<f8", "float64", "bytes", "string", "r0", "r7", "<U0", "|S0", "<M8", "|V0",
            {"name": "numpy.datetime64", "configuration": {"unit": "fortnight", "scale_factor": 1}},
            {"name": "structured", "configuration": {"fields": [["a", "int8"]]}},
            [104, 105], [256], "aGk=", ["y", None, 3], nested(60), nested(200),
        ]
    ),
    st.integers(),
    st.integers(0, 5),  # plausible values too, so that many mutated documents still open and read
    st.lists(st.integers(0, 5), min_size=1, max_size=3),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6),
    st.lists(st.integers(-3, 300), max_size=4),
    st.dictionaries(st.text(max_size=3), st.integers(-2, 2), max_size=2),
)
# fmt: on


def _locations(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path (tuple of keys and indices) to a value inside a JSON document."""
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found += _locations(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += _locations(child, (*prefix, index))
    return found


# Names of at most 255 bytes: a longer one is legal metadata, but LocalStore then raises StoreError
# ("File name too long") for its chunks instead of reading them as missing (reported, stores/*).
WEIRD_KEYS = st.sampled_from(["", "\ud800", "../up", "a/b", "/", ".zarray", "zarr.json", "c/0", "x" * 200, "\x00", "é"])


def _set(document: Any, location: tuple, value: Any, *, action: str = "replace", new_key: str = "") -> Any:
    if not location:
        return value
    parent = document
    for key in location[:-1]:
        parent = parent[key]
    if action == "delete" and isinstance(parent, dict):
        del parent[location[-1]]
    elif action == "rename" and isinstance(parent, dict):
        parent[new_key] = parent.pop(location[-1])
    else:
        parent[location[-1]] = value
    return document


@st.composite
def mutated(draw: st.DrawFn, document: Any) -> bytes:
    """`document` with one to three changes (a value replaced or removed, a key added or renamed), as bytes;
    sometimes the bytes themselves are damaged (cut short, or a byte that is not UTF-8)."""
    document = copy.deepcopy(document)
    for _ in range(draw(st.sampled_from([1, 1, 1, 2, 3]))):
        location = draw(st.sampled_from(_locations(document)))
        action = draw(st.sampled_from(["replace", "replace", "replace", "delete", "add", "rename"]))
        if action == "add" and isinstance(document, dict):
            key = draw(st.sampled_from(["extra", "dimension_names", "dimension_names", "storage_transformers"]))
            document[key] = copy.deepcopy(draw(WEIRD_VALUES))  # sampled values are shared objects
        else:
            value = copy.deepcopy(draw(WEIRD_VALUES))
            document = _set(document, location, value, action=action, new_key=draw(WEIRD_KEYS))
    raw = json.dumps(document, allow_nan=True).encode()
    damage = draw(st.sampled_from(["none"] * 10 + ["truncate", "not-utf8"]))
    if damage != "none" and raw:
        at = draw(st.integers(0, len(raw) - 1))
        raw = raw[:at] if damage == "truncate" else raw[:at] + b"\xff\xfe" + raw[at:]
    return raw


def _expected_fill(z: za.Array) -> Any:
    fill = z.fill_value
    return default_fill_value(z.dtype) if fill is None else fill


def _read_a_little(node: za.Array | za.Group) -> None:
    """Read a small corner of an array and compare it with the fill value; walk a group's members."""
    if isinstance(node, za.Group):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            members = node.members()
            str(node.tree())
        for _, member in members:
            if isinstance(member, za.Array):
                _read_a_little(member)
        return
    selection = tuple(slice(0, min(extent, 2)) for extent in node.shape)
    expected = np.empty(tuple(min(extent, 2) for extent in node.shape), dtype=node.dtype)
    expected[...] = _expected_fill(node)
    actual = node[selection]
    if expected.ndim:
        assert actual.dtype == expected.dtype
    # Through the expected dtype: NumPy would read a 0-d b"\x00" as an S1 array, losing the byte.
    np.testing.assert_array_equal(np.asarray(actual, dtype=expected.dtype), expected)


def _check_stranger_store(documents: dict[str, bytes]) -> None:
    """Open what a stranger wrote: it opens and reads like NumPy, or raises MetadataError; nothing else."""
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory) / "fuzz.zarr"
        write_documents(root, documents)
        try:
            node = za.open(str(root), mode="r")
            _read_a_little(node)
        except MetadataError as exc:
            assert root.as_uri() in str(exc), f"the error does not name the key: {exc}"


FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.timeout(120)
@FUZZ
@given(st.data())
def test_fuzzed_v3_array_metadata_opens_and_reads_or_is_a_metadata_error(data: st.DataObject) -> None:
    base = data.draw(st.sampled_from(V3_ARRAYS))
    _check_stranger_store({"zarr.json": data.draw(mutated(base))})


@pytest.mark.timeout(120)
@FUZZ
@given(st.data())
def test_fuzzed_v2_array_metadata_opens_and_reads_or_is_a_metadata_error(data: st.DataObject) -> None:
    base = data.draw(st.sampled_from(V2_ARRAYS))
    documents = {".zarray": data.draw(mutated(base))}
    if data.draw(st.booleans()):
        documents[".zattrs"] = data.draw(mutated({"units": "m", "scale": [1, 2], "_ARRAY_DIMENSIONS": ["x"]}))
    _check_stranger_store(documents)


@pytest.mark.timeout(120)
@FUZZ
@given(st.data())
def test_fuzzed_groups_and_their_members_open_and_read_or_are_metadata_errors(data: st.DataObject) -> None:
    if data.draw(st.booleans()):
        documents = {
            "zarr.json": data.draw(mutated(v3_group({"title": "t"}))),
            "a/zarr.json": data.draw(mutated(data.draw(st.sampled_from(V3_ARRAYS)))),
            "g/zarr.json": json.dumps(v3_group()).encode(),
        }
    else:
        documents = {
            ".zgroup": data.draw(mutated({"zarr_format": 2})),
            ".zattrs": data.draw(mutated({"title": "t"})),
            "a/.zarray": data.draw(mutated(data.draw(st.sampled_from(V2_ARRAYS)))),
            "g/.zgroup": b'{"zarr_format": 2}',
        }
    _check_stranger_store(documents)


@pytest.mark.timeout(120)
@FUZZ
@given(st.data())
def test_fuzzed_consolidated_metadata_opens_and_reads_or_is_a_metadata_error(data: st.DataObject) -> None:
    if data.draw(st.booleans()):
        entries = {"a": data.draw(st.sampled_from(V3_ARRAYS)), "g": v3_group(), "g/b": V3_ARRAYS[0]}
        consolidated = {"kind": "inline", "must_understand": False, "metadata": entries}
        documents = {"zarr.json": data.draw(mutated(v3_group(consolidated_metadata=consolidated)))}
    else:
        entries = {
            ".zgroup": {"zarr_format": 2},
            "a/.zarray": data.draw(st.sampled_from(V2_ARRAYS)),
            "a/.zattrs": {"x": 1},
            "g/.zgroup": {"zarr_format": 2},
        }
        documents = {
            ".zgroup": b'{"zarr_format": 2}',
            ".zmetadata": data.draw(mutated({"zarr_consolidated_format": 1, "metadata": entries})),
        }
    _check_stranger_store(documents)


EXTREME_FILL_VALUES = [
    10**399, -(10**399), 2**64, 2**63, -(2**63) - 1, 1e308, -1e308, [10**399, 0], ["NaN", 10**399], [1e308, 1e308],
    "0x" + "f" * 16, "0xzz", "0x7e00", "\ud800", "Infinity", "1e400", "1" * 300, [1, 2, 3], [], {}, True, 1.5, -0.0,
    "aGk=", [104, 105], "NaT",
]  # fmt: skip
EXTREME_V3_DATA_TYPES = [
    "float64", "float16", "complex64", "int8", "uint64", "bool", "string", "bytes", "r16",
    {"name": "numpy.datetime64", "configuration": {"unit": "ns", "scale_factor": 1}},
    {"name": "fixed_length_utf32", "configuration": {"length_bytes": 4}},
    {"name": "null_terminated_bytes", "configuration": {"length_bytes": 2}},
]  # fmt: skip
EXTREME_V2_DTYPES = ["<f8", "<f2", ">f4", "<c8", "<i1", "<u8", "|b1", "|S2", "<U2", "<M8[ns]", "|V2", "|O"]


def test_every_data_type_with_every_extreme_fill_value_reads_or_is_a_metadata_error() -> None:
    """The corners a random fuzz rarely meets: numbers beyond every float, hex NaNs, lone surrogates."""
    for data_type in EXTREME_V3_DATA_TYPES:
        codecs = {"string": [{"name": "vlen-utf8"}], "bytes": [{"name": "vlen-bytes"}]}.get(str(data_type))
        for fill_value in EXTREME_FILL_VALUES:
            document = v3_array(data_type, [3], [2], fill_value)
            document["codecs"] = codecs or document["codecs"]
            _check_stranger_store({"zarr.json": json.dumps(document).encode()})
    for dtype in EXTREME_V2_DTYPES:
        filters = [{"id": "vlen-utf8"}] if dtype == "|O" else None
        for fill_value in [*EXTREME_FILL_VALUES, None]:
            _check_stranger_store(
                {".zarray": json.dumps(v2_array(dtype, [3], [2], fill_value, filters=filters)).encode()}
            )


def test_every_base_document_of_the_fuzz_opens_and_reads(tmp_path: Path) -> None:
    """The fuzz mutates valid documents: check that they are."""
    for index, document in enumerate(V3_ARRAYS):
        write_documents(tmp_path / f"v3-{index}.zarr", {"zarr.json": document})
        _read_a_little(za.open(str(tmp_path / f"v3-{index}.zarr"), mode="r"))
    for index, document in enumerate(V2_ARRAYS):
        write_documents(tmp_path / f"v2-{index}.zarr", {".zarray": document})
        _read_a_little(za.open(str(tmp_path / f"v2-{index}.zarr"), mode="r"))


def _same_value(a: Any, b: Any) -> bool:
    return bool(np.array_equal(np.asarray(a), np.asarray(b), equal_nan=np.asarray(a).dtype.kind in "fc"))


LEGAL_FILLS = {
    # v3 data type -> (codecs, strategy of (JSON fill value, the value NumPy says it means))
    "int8": (None, st.integers(-128, 127).map(lambda v: (v, np.int8(v)))),
    "uint64": (None, st.integers(0, 2**64 - 1).map(lambda v: (v, np.uint64(v)))),
    "float32": (
        None,
        st.one_of(
            st.floats(width=32, allow_nan=False).map(lambda v: (v, np.float32(v))),
            st.sampled_from(
                [("NaN", np.float32("nan")), ("Infinity", np.float32("inf")), ("-Infinity", -np.float32("inf"))]
            ),
            st.just(("0x7fc00001", np.array(0x7FC00001, "<u4").view("<f4")[()])),
        ),
    ),
    "complex64": (
        None,
        st.tuples(st.floats(width=32), st.floats(width=32)).map(lambda p: (list(p), np.complex64(complex(*p)))),
    ),
    "bool": (None, st.booleans().map(lambda v: (v, np.bool_(v)))),
    "string": (
        [{"name": "vlen-utf8"}],
        st.text(st.characters(exclude_categories=["Cs"]), max_size=5).map(lambda v: (v, v)),
    ),
    "bytes": (
        [{"name": "vlen-bytes"}],
        st.binary(max_size=5).flatmap(lambda b: st.sampled_from([(list(b), b), (base64.b64encode(b).decode(), b)])),
    ),
}
EXTENTS = st.one_of(st.integers(0, 5), st.sampled_from([2**31, 2**62, 2**63 - 1]))


def _json_containers(inner: st.SearchStrategy) -> st.SearchStrategy:
    """Lists and objects of `inner` (a named function: Hypothesis cannot see a lambda's use of its argument here)."""
    return st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)


JSON_ATTRIBUTES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=4), _json_containers, max_leaves=10
)


@pytest.mark.timeout(120)
@FUZZ
@given(st.data())
def test_odd_but_legal_v3_arrays_open_and_read_their_fill_value_as_numpy_says(data: st.DataObject) -> None:
    data_type = data.draw(st.sampled_from(sorted(LEGAL_FILLS)))
    codecs, fills = LEGAL_FILLS[data_type]
    fill_json, fill = data.draw(fills)
    ndim = data.draw(st.integers(0, 3))
    shape = data.draw(st.lists(EXTENTS, min_size=ndim, max_size=ndim))
    chunks = data.draw(st.lists(EXTENTS.filter(bool), min_size=ndim, max_size=ndim))
    document = v3_array(
        data_type,
        shape,
        chunks,
        fill_json,
        attributes=data.draw(st.dictionaries(st.text(max_size=3), JSON_ATTRIBUTES, max_size=3)),
    )
    if codecs:
        document["codecs"] = codecs
    if data.draw(st.booleans()):
        document["dimension_names"] = data.draw(st.lists(st.none() | st.text(max_size=3), min_size=ndim, max_size=ndim))
    document["chunk_key_encoding"] = data.draw(
        st.sampled_from(
            [{"name": "default"}, {"name": "v2"}, {"name": "default", "configuration": {"separator": "."}}, "default"]
        )
    )

    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory) / "legal.zarr"
        write_documents(root, {"zarr.json": document})
        z = za.open_array(str(root), mode="r")

        assert _same_value(z.fill_value, fill) if data_type != "bytes" else z.fill_value == fill
        assert z.shape == tuple(shape) and z.chunks == tuple(chunks)
        _read_a_little(z)


def test_metadata_beyond_the_limits_is_never_written(tmp_path: Path) -> None:
    """What asyncarr writes it reads back: no attribute update or consolidation leaves an unreadable node."""
    root = tmp_path / "g.zarr"
    group = za.open_group(str(root), mode="w")
    array = group.create_array("a", shape=(2,), dtype="i4", attributes={"deep": nested(_json.MAX_NESTING_DEPTH - 2)})
    before = snapshot(tmp_path)

    with pytest.raises(MetadataError, match="nested deeper"):
        array.attrs["deeper"] = nested(_json.MAX_NESTING_DEPTH)
    with pytest.raises(MetadataError, match="digits"):
        group.attrs["huge"] = 10**_json.MAX_NUMBER_DIGITS
    with pytest.raises(MetadataError, match="nested deeper"):
        za.consolidate_metadata(str(root))  # the consolidated entry nests the array's attributes 3 levels deeper

    assert snapshot(tmp_path) == before
    assert za.open_group(str(root), mode="r")["a"].attrs["deep"] == nested(_json.MAX_NESTING_DEPTH - 2)
