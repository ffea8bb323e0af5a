"""Every documented failure raises its documented error class, names what is wrong, and leaves the store untouched."""

from __future__ import annotations

import asyncio
import json
import pathlib
import re
from collections.abc import Callable

import numpy as np
import pytest
from slow_store import directory_contents, store_contents

import asyncarr
import asyncarr.sync as za
from asyncarr.errors import (
    AccessDeniedError,
    ArrayNotFoundError,
    AsyncarrError,
    CodecError,
    ContainsArrayError,
    ContainsGroupError,
    GroupNotFoundError,
    MetadataError,
    NodeNotFoundError,
    ReadOnlyError,
    StoreError,
)
from asyncarr.stores import LocalStore, MemoryStore

METADATA_KEY = {2: ".zarray", 3: "zarr.json"}


class Unchanged:
    """Asserts on exit that a directory (every file below it) or a store holds exactly what it held on entry."""

    def __init__(self, where: pathlib.Path | MemoryStore) -> None:
        self._where = where
        self._before = self._snapshot()

    def _snapshot(self) -> dict[str, bytes]:
        if isinstance(self._where, pathlib.Path):
            return directory_contents(self._where)
        return store_contents(self._where)

    def __enter__(self) -> Unchanged:
        return self

    def __exit__(self, *exc_info: object) -> None:
        assert self._snapshot() == self._before, "the failing call changed the store"


def make_array(
    path: pathlib.Path, zarr_format: int, shape: tuple = (1000,), chunks: tuple = (500,), **kwargs: object
) -> np.ndarray:
    """Write random int32 data (two chunks by default) at ``path`` and return it."""
    data = np.random.default_rng(0).integers(-(2**30), 2**30, size=shape, dtype="i4")
    z = za.open_array(str(path), mode="w", shape=shape, chunks=chunks, dtype="i4", zarr_format=zarr_format, **kwargs)
    z[:] = data
    return data


# -- error classes ----------------------------------------------------------------------------


def test_error_classes_inherit_as_documented() -> None:
    assert issubclass(NodeNotFoundError, KeyError)
    assert issubclass(ArrayNotFoundError, NodeNotFoundError)
    assert issubclass(GroupNotFoundError, NodeNotFoundError)
    assert issubclass(ReadOnlyError, PermissionError)
    assert issubclass(MetadataError, ValueError)
    assert issubclass(StoreError, OSError)
    assert issubclass(AccessDeniedError, StoreError)
    assert issubclass(AccessDeniedError, PermissionError)
    for error in (
        NodeNotFoundError,
        ArrayNotFoundError,
        GroupNotFoundError,
        ContainsArrayError,
        ContainsGroupError,
        ReadOnlyError,
        MetadataError,
        CodecError,
        StoreError,
        AccessDeniedError,
    ):
        assert issubclass(error, AsyncarrError)


# -- corrupt or incomplete metadata -----------------------------------------------------------


def _json_edit(edit: Callable[[dict], None]) -> Callable[[bytes], bytes]:
    def apply(raw: bytes) -> bytes:
        document = json.loads(raw)
        edit(document)
        return json.dumps(document).encode()

    return apply


def _set_chunks(zarr_format: int, value: object) -> Callable[[dict], None]:
    def edit(document: dict) -> None:
        if zarr_format == 2:
            document["chunks"] = value
        else:
            document["chunk_grid"]["configuration"]["chunk_shape"] = value

    return edit


def _set_dtype(zarr_format: int, value: str) -> Callable[[dict], None]:
    def edit(document: dict) -> None:
        document["dtype" if zarr_format == 2 else "data_type"] = value

    return edit


def _add_unknown_codec(zarr_format: int) -> Callable[[dict], None]:
    def edit(document: dict) -> None:
        if zarr_format == 2:
            document["compressor"] = {"id": "no-such-codec", "level": 1}
        else:
            document["codecs"].append({"name": "no-such-codec", "configuration": {}})

    return edit


def _corruptions(zarr_format: int) -> dict[str, Callable[[bytes], bytes]]:
    return {
        "invalid JSON": lambda raw: raw[: len(raw) // 2],
        "empty document": lambda raw: b"",
        "not UTF-8": lambda raw: b"\xff\xfe" + raw,
        "JSON list instead of object": lambda raw: b"[1, 2, 3]",
        "missing shape": _json_edit(lambda d: d.pop("shape")),
        "shape of the wrong type": _json_edit(lambda d: d.update(shape="one thousand")),
        "shape with a string entry": _json_edit(lambda d: d.update(shape=[1000, "x"])),
        "negative shape": _json_edit(lambda d: d.update(shape=[-1000])),
        "chunks of the wrong type": _json_edit(_set_chunks(zarr_format, "five hundred")),
        "zero chunk length": _json_edit(_set_chunks(zarr_format, [0])),
        "chunks with more dimensions than shape": _json_edit(_set_chunks(zarr_format, [500, 2])),
        "unknown dtype": _json_edit(_set_dtype(zarr_format, "float99")),
        "unknown codec": _json_edit(_add_unknown_codec(zarr_format)),
        "fill value that is not a number": _json_edit(lambda d: d.update(fill_value="not a number")),
        "unsupported zarr_format": _json_edit(lambda d: d.update(zarr_format=7)),
    }


CORRUPTION_NAMES = list(_corruptions(3))


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("corruption", CORRUPTION_NAMES)
def test_corrupt_array_metadata_raises_metadata_error_naming_the_key(
    tmp_path: pathlib.Path, zarr_format: int, corruption: str
) -> None:
    path = tmp_path / "a.zarr"
    make_array(path, zarr_format)
    key = METADATA_KEY[zarr_format]
    document = path / key
    document.write_bytes(_corruptions(zarr_format)[corruption](document.read_bytes()))
    for mode in ("r", "r+", "a"):
        with Unchanged(tmp_path), pytest.raises(MetadataError, match=re.escape(key)):
            za.open_array(str(path), mode=mode)[:]


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_corrupt_metadata_raises_metadata_error_from_open_and_the_async_api(
    tmp_path: pathlib.Path, zarr_format: int
) -> None:
    path = tmp_path / "a.zarr"
    make_array(path, zarr_format)
    key = METADATA_KEY[zarr_format]
    (path / key).write_bytes(b'{"zarr_format": ')
    with Unchanged(tmp_path), pytest.raises(MetadataError, match=re.escape(key)):
        za.open(str(path), mode="r")
    with Unchanged(tmp_path), pytest.raises(MetadataError, match=re.escape(key)):
        asyncio.run(asyncarr.open_array(str(path), mode="r"))


def test_corrupt_v2_attributes_raise_metadata_error_naming_zattrs(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "a.zarr"
    make_array(path, 2)
    (path / ".zattrs").write_bytes(b'{"units": ')
    with Unchanged(tmp_path), pytest.raises(MetadataError, match=re.escape(".zattrs")):
        dict(za.open_array(str(path), mode="r").attrs)


@pytest.mark.parametrize(
    "document",
    [
        b"{not json",
        b'{"zarr_format": 3, "node_type": "banana", "attributes": {}}',
        b'{"zarr_format": 3, "node_type": "group", "attributes": "not a mapping"}',
        b'{"node_type": "group", "attributes": {}}',
    ],
)
def test_corrupt_v3_group_metadata_raises_metadata_error(tmp_path: pathlib.Path, document: bytes) -> None:
    path = tmp_path / "g.zarr"
    za.open_group(str(path), mode="w", zarr_format=3)
    (path / "zarr.json").write_bytes(document)
    with Unchanged(tmp_path), pytest.raises(MetadataError, match=re.escape("zarr.json")):
        g = za.open_group(str(path), mode="r")
        dict(g.attrs)
    with Unchanged(tmp_path), pytest.raises(MetadataError, match=re.escape("zarr.json")):
        za.open(str(path), mode="a")


def test_corrupt_v2_group_metadata_raises_metadata_error(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "g.zarr"
    za.open_group(str(path), mode="w", zarr_format=2)
    (path / ".zgroup").write_bytes(b'{"zarr_format": 2')
    with Unchanged(tmp_path), pytest.raises(MetadataError, match=re.escape(".zgroup")):
        za.open_group(str(path), mode="r")


# -- undecodable chunks -----------------------------------------------------------------------

# The damaged chunk is (1, 0) of a (1000, 2) array in (500, 1) chunks: rows 500-999 of column 0.
CHUNK_KEY = {2: "1.0", 3: "c/1/0"}


def _garbage(raw: bytes) -> bytes:
    return b"this is not a compressed chunk at all" * 4


def _truncated(raw: bytes) -> bytes:
    return raw[: len(raw) // 2]


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("damage", [_garbage, _truncated], ids=["garbage", "truncated blosc frame"])
def test_undecodable_chunk_raises_codec_error_naming_the_chunk_key(
    tmp_path: pathlib.Path, zarr_format: int, damage: Callable[[bytes], bytes]
) -> None:
    path = tmp_path / "a.zarr"
    data = make_array(path, zarr_format, shape=(1000, 2), chunks=(500, 1))  # default compressor: Blosc
    chunk = path / CHUNK_KEY[zarr_format]
    assert len(chunk.read_bytes()) > 1000  # random data: a real Blosc frame worth truncating
    chunk.write_bytes(damage(chunk.read_bytes()))
    z = za.open_array(str(path), mode="r+")
    with Unchanged(tmp_path), pytest.raises(CodecError, match=re.escape(CHUNK_KEY[zarr_format])):
        z[:]
    with Unchanged(tmp_path), pytest.raises(CodecError, match=re.escape(CHUNK_KEY[zarr_format])):
        z[700, 0]
    # The undamaged chunks still read.
    np.testing.assert_array_equal(z[:, 1], data[:, 1])
    np.testing.assert_array_equal(z[:500, 0], data[:500, 0])


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_partial_write_over_an_undecodable_chunk_raises_codec_error_and_writes_nothing(
    tmp_path: pathlib.Path, zarr_format: int
) -> None:
    path = tmp_path / "a.zarr"
    make_array(path, zarr_format, shape=(1000, 2), chunks=(500, 1))
    chunk = path / CHUNK_KEY[zarr_format]
    chunk.write_bytes(_truncated(chunk.read_bytes()))
    z = za.open_array(str(path), mode="r+")
    # Touches the good chunk (0, 0) completely and the damaged chunk (1, 0) partially.
    with Unchanged(tmp_path), pytest.raises(CodecError, match=re.escape(CHUNK_KEY[zarr_format])):
        z[:600, 0] = 7
    with Unchanged(tmp_path), pytest.raises(CodecError, match=re.escape(CHUNK_KEY[zarr_format])):
        z[700, 0] = 7


# -- selections -------------------------------------------------------------------------------


@pytest.fixture
def small_array() -> tuple[za.Array, MemoryStore]:
    store = MemoryStore()
    z = za.open_array(store, mode="w", shape=(10, 6), chunks=(4, 4), dtype="f8")
    z[:] = np.arange(60, dtype="f8").reshape(10, 6)
    return z, store


OUT_OF_BOUNDS = [10, -11, (0, 6), (0, -7), (slice(None), 6), (0, 0, 0), (Ellipsis, 0, 0, 0)]


@pytest.mark.parametrize("selection", OUT_OF_BOUNDS, ids=repr)
def test_out_of_bounds_selection_raises_index_error(small_array: tuple, selection: object) -> None:
    z, store = small_array
    with Unchanged(store), pytest.raises(IndexError):
        z[selection]
    with Unchanged(store), pytest.raises(IndexError):
        z[selection] = 1.0


@pytest.mark.parametrize(
    ("selection", "error"),
    [("abc", IndexError), (1.5, IndexError), ((0, 1.5), IndexError), (slice(0, 2.5), TypeError)],
    ids=repr,
)
def test_selections_numpy_rejects_raise_what_numpy_raises(small_array: tuple, selection: object, error: type) -> None:
    z, store = small_array
    reference = np.zeros((10, 6))
    with pytest.raises(error):
        reference[selection]
    with Unchanged(store), pytest.raises(error):
        z[selection]
    with Unchanged(store), pytest.raises(error):
        z[selection] = 1.0


@pytest.mark.parametrize(
    ("selection", "value_shape"),
    [(slice(0, 2), (3, 6)), (Ellipsis, (6, 10)), ((0, slice(None)), (5,)), ((slice(None), 0), (10, 2))],
    ids=repr,
)
def test_wrong_shape_assignment_raises_value_error(small_array: tuple, selection: object, value_shape: tuple) -> None:
    z, store = small_array
    value = np.ones(value_shape)
    with pytest.raises(ValueError):
        np.zeros((10, 6))[selection] = value
    with Unchanged(store), pytest.raises(ValueError):
        z[selection] = value

    async def assign() -> None:
        await z.async_array.setitem(selection, value)

    with Unchanged(store), pytest.raises(ValueError):
        asyncio.run(assign())


def test_append_of_mismatched_shape_raises_value_error(small_array: tuple) -> None:
    z, store = small_array
    with Unchanged(store), pytest.raises(ValueError):
        z.append(np.ones((3, 5)))
    assert z.shape == (10, 6)


# -- read-only --------------------------------------------------------------------------------


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_writing_through_a_read_only_array_raises_read_only_error(tmp_path: pathlib.Path, zarr_format: int) -> None:
    path = tmp_path / "a.zarr"
    make_array(path, zarr_format, attributes={"a": 1})
    z = za.open_array(str(path), mode="r")
    attempts = {
        "setitem": lambda: z.__setitem__(slice(None), 1),
        "partial setitem": lambda: z.__setitem__(3, 1),
        "attrs set": lambda: z.attrs.__setitem__("b", 2),
        "attrs delete": lambda: z.attrs.__delitem__("a"),
        "attrs update": lambda: z.attrs.update({"c": 3}),
        "resize": lambda: z.resize(10),
        "append": lambda: z.append(np.ones(10, dtype="i4")),
    }
    for name, attempt in attempts.items():
        with Unchanged(tmp_path), pytest.raises(ReadOnlyError):
            attempt()
        assert z.shape == (1000,), name


def test_writing_through_a_read_only_group_raises_read_only_error(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "g.zarr"
    root = za.open_group(str(path), mode="w")
    root.create_group("sub")
    g = za.open_group(str(path), mode="r")
    attempts = [
        lambda: g.create_group("x"),
        lambda: g.require_group("y"),
        lambda: g.create_dataset("z", shape=(4,), dtype="i4"),
        lambda: g.zeros("w", shape=(4,)),
        lambda: g.attrs.__setitem__("a", 1),
        lambda: g.__delitem__("sub"),
    ]
    for attempt in attempts:
        with Unchanged(tmp_path), pytest.raises(ReadOnlyError):
            attempt()


@pytest.mark.parametrize("mode", ["a", "r+", "w", "w-"])
def test_writable_modes_on_a_read_only_store_raise_read_only_error(tmp_path: pathlib.Path, mode: str) -> None:
    path = tmp_path / "a.zarr"
    make_array(path, 3)
    store = LocalStore(str(path), read_only=True)
    with Unchanged(tmp_path), pytest.raises(ReadOnlyError):
        za.open_array(store, mode=mode, shape=(1000,), chunks=(500,), dtype="i4")


# -- missing and existing nodes ---------------------------------------------------------------


@pytest.mark.parametrize("mode", ["r", "r+"])
def test_opening_a_missing_path_raises_node_not_found(tmp_path: pathlib.Path, mode: str) -> None:
    missing = str(tmp_path / "missing.zarr")
    with Unchanged(tmp_path), pytest.raises(ArrayNotFoundError):
        za.open_array(missing, mode=mode)
    with Unchanged(tmp_path), pytest.raises(GroupNotFoundError):
        za.open_group(missing, mode=mode)
    with Unchanged(tmp_path), pytest.raises(NodeNotFoundError):
        za.open(missing, mode=mode)
    with Unchanged(tmp_path), pytest.raises(KeyError):
        asyncio.run(asyncarr.open_array(missing, mode=mode))


def test_missing_group_member_raises_key_error(tmp_path: pathlib.Path) -> None:
    g = za.open_group(str(tmp_path / "g.zarr"), mode="w")
    with Unchanged(tmp_path), pytest.raises(KeyError):
        g["nope"]
    with Unchanged(tmp_path), pytest.raises(KeyError):
        g["nope/deeper"]


@pytest.mark.parametrize("mode", ["w-", "x"])
def test_create_only_mode_on_an_existing_node_raises_contains_error(tmp_path: pathlib.Path, mode: str) -> None:
    array_path = tmp_path / "a.zarr"
    make_array(array_path, 3)
    group_path = tmp_path / "g.zarr"
    za.open_group(str(group_path), mode="w")
    with Unchanged(tmp_path), pytest.raises(ContainsArrayError):
        za.open_array(str(array_path), mode=mode, shape=(3,), dtype="i4")
    with Unchanged(tmp_path), pytest.raises(ContainsArrayError):
        za.open_group(str(array_path), mode=mode)
    with Unchanged(tmp_path), pytest.raises(ContainsGroupError):
        za.open_group(str(group_path), mode=mode)
    with Unchanged(tmp_path), pytest.raises(ContainsGroupError):
        za.open_array(str(group_path), mode=mode, shape=(3,), dtype="i4")


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("mode", ["r", "r+", "a"])
def test_opening_a_group_where_an_array_is_and_the_reverse(tmp_path: pathlib.Path, zarr_format: int, mode: str) -> None:
    array_path = tmp_path / "a.zarr"
    make_array(array_path, zarr_format)
    group_path = tmp_path / "g.zarr"
    za.open_group(str(group_path), mode="w", zarr_format=zarr_format)
    with Unchanged(tmp_path), pytest.raises(ContainsArrayError):
        za.open_group(str(array_path), mode=mode)
    with Unchanged(tmp_path), pytest.raises(ContainsGroupError):
        za.open_array(str(group_path), mode=mode, shape=(3,), dtype="i4")


def test_group_members_of_the_other_kind_raise_contains_errors(tmp_path: pathlib.Path) -> None:
    g = za.open_group(str(tmp_path / "g.zarr"), mode="w")
    g.create_dataset("arr", shape=(4,), chunks=(2,), dtype="i4")
    g.create_group("grp")
    with Unchanged(tmp_path), pytest.raises(ContainsArrayError):
        g.require_group("arr")
    with Unchanged(tmp_path), pytest.raises(ContainsArrayError):
        g.create_group("arr")
    with Unchanged(tmp_path), pytest.raises(ContainsGroupError):
        g.require_array("grp", shape=(4,), dtype="i4")
    with Unchanged(tmp_path), pytest.raises(ContainsGroupError):
        g.create_array("grp", shape=(4,), dtype="i4")


# -- path escapes -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["../x", "a/../../x", "..", "sub/../.."])
def test_group_member_names_that_escape_the_store_raise_value_error(tmp_path: pathlib.Path, name: str) -> None:
    root = tmp_path / "deep" / "g.zarr"
    g = za.open_group(str(root), mode="w")
    with Unchanged(tmp_path), pytest.raises(ValueError):
        g.create_group(name)
    with Unchanged(tmp_path), pytest.raises(ValueError):
        g.create_dataset(name, shape=(4,), dtype="i4")
    with Unchanged(tmp_path), pytest.raises(ValueError):
        g.zeros(name, shape=(4,))


@pytest.mark.parametrize("path", ["../../etc", "../x", "a/../../b", ".."])
def test_node_paths_that_escape_the_store_raise_value_error(tmp_path: pathlib.Path, path: str) -> None:
    root = tmp_path / "deep" / "store.zarr"
    root.mkdir(parents=True)
    with Unchanged(tmp_path), pytest.raises(ValueError):
        za.open_array(LocalStore(str(root)), mode="w", path=path, shape=(4,), dtype="i4")
    with Unchanged(tmp_path), pytest.raises(ValueError):
        za.open_group(LocalStore(str(root)), mode="w", path=path)
    with Unchanged(tmp_path), pytest.raises(ValueError):
        za.open_array(str(root), mode="w", path=path, shape=(4,), dtype="i4")


def test_stores_reject_keys_that_escape_their_root(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "store"
    root.mkdir()
    store = LocalStore(str(root))
    for key in ["../x", "/etc/passwd", "a/../../x", "a/./b"]:
        with Unchanged(tmp_path), pytest.raises(ValueError):
            asyncio.run(store.set(key, b"x"))
        with pytest.raises(ValueError):
            asyncio.run(store.get(key))
