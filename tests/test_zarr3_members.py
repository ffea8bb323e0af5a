"""zarr 3's remaining Group and Array members on both APIs, each beside zarr-python 3 on its own LocalStore.

Every test runs the zarr spelling on asyncarr and on zarr-python 3 (same calls, a directory
each under ``tmp_path``) and compares what they give: data with NumPy, member names, the
metadata documents on disk, errors by class (asyncarr's own where zarr raises its own).
``Group.move`` has no reference (zarr-python 3.1.6 raises NotImplementedError): zarr-python
reads what it moved instead.
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import zarr
import zarr.api.asynchronous as zarr_async
from zarr.core.group import GroupMetadata

import asyncarr
import asyncarr.sync as za
from asyncarr.errors import ContainsArrayError, ContainsGroupError, NodeNotFoundError
from asyncarr.stores.memory import MemoryStore

Library = Any  # the zarr module or asyncarr.sync: the same spellings on each
METADATA_NAMES = ("zarr.json", ".zarray", ".zgroup", ".zattrs")


def documents(root: pathlib.Path) -> dict[str, Any]:
    """Every metadata document below ``root`` (relative path -> parsed JSON); an empty v2 ``.zattrs``
    (zarr-python writes one, asyncarr does not) counts as none."""
    found = {
        str(p.relative_to(root)): json.loads(p.read_text()) for p in sorted(root.rglob("*")) if p.name in METADATA_NAMES
    }
    return {key: value for key, value in found.items() if not (key.endswith(".zattrs") and value == {})}


def stored_keys(root: pathlib.Path) -> list[str]:
    """Every file below ``root``, relative to it."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def chunk_keys(root: pathlib.Path) -> list[str]:
    """The stored keys below ``root`` that are not metadata documents."""
    return [key for key in stored_keys(root) if pathlib.PurePath(key).name not in METADATA_NAMES]


def same_documents(ours: pathlib.Path, theirs: pathlib.Path, *members: str) -> None:
    """The metadata documents below both roots are the same files with the same JSON (only those of
    ``members`` and below, when given: the fixture's own arrays differ in their default codecs)."""

    def kept(found: dict[str, Any]) -> dict[str, Any]:
        return {key: doc for key, doc in found.items() if not members or key.split("/")[0] in members}

    assert kept(documents(ours)) == kept(documents(theirs))


def hierarchy(lib: Library, root: pathlib.Path, zarr_format: int) -> Any:
    """A group holding an array ``a``, a group ``s`` with an array ``b`` and a group ``t``: on ``lib``."""
    group = lib.open_group(str(root), mode="w", zarr_format=zarr_format)
    group.create_array("a", shape=(6,), chunks=(2,), dtype="i4", fill_value=0)[:] = np.arange(6)
    sub = group.create_group("s")
    sub.create_array("b", shape=(2, 3), chunks=(1, 3), dtype="f8", fill_value=0.0)[:] = np.ones((2, 3))
    sub.create_group("t")
    return group


def both(tmp_path: pathlib.Path, zarr_format: int) -> tuple[Any, Any, pathlib.Path, pathlib.Path]:
    """(our group, zarr's group, our root, zarr's root): the same hierarchy on each library."""
    ours_root, theirs_root = tmp_path / "ours.zarr", tmp_path / "theirs.zarr"
    return hierarchy(za, ours_root, zarr_format), hierarchy(zarr, theirs_root, zarr_format), ours_root, theirs_root


def error_kind(call: Callable[[], Any]) -> str:
    """The class name of what ``call`` raises (asyncarr's and zarr's errors share their names)."""
    with pytest.raises(Exception) as caught:
        call()
    return type(caught.value).__name__


FORMATS = pytest.mark.parametrize("zarr_format", [2, 3])


# -- Group: members ---------------------------------------------------------------------------------


@FORMATS
def test_array_values_and_group_values_give_the_child_nodes_as_zarr(tmp_path: pathlib.Path, zarr_format: int) -> None:
    ours, theirs, _, _ = both(tmp_path, zarr_format)
    assert [a.path for a in ours.array_values()] == [a.path for a in theirs.array_values()] == ["a"]
    assert [g.path for g in ours.group_values()] == [g.path for g in theirs.group_values()] == ["s"]
    assert all(isinstance(a, za.Array) for a in ours.array_values())
    assert all(isinstance(g, za.Group) for g in ours.group_values())


@FORMATS
def test_get_gives_the_member_or_the_default_as_zarr(tmp_path: pathlib.Path, zarr_format: int) -> None:
    ours, theirs, _, _ = both(tmp_path, zarr_format)
    np.testing.assert_array_equal(ours.get("s/b")[:], theirs.get("s/b")[:])
    assert isinstance(ours.get("s"), za.Group) and ours.get("s").path == theirs.get("s").path
    assert ours.get("missing") is None and theirs.get("missing") is None
    sentinel = object()
    assert ours.get("missing", sentinel) is sentinel and theirs.get("missing", sentinel) is sentinel


@FORMATS
@pytest.mark.parametrize("max_depth", [0, 1, None])
def test_nmembers_counts_as_zarr(tmp_path: pathlib.Path, zarr_format: int, max_depth: int | None) -> None:
    ours, theirs, _, _ = both(tmp_path, zarr_format)
    assert ours.nmembers(max_depth=max_depth) == theirs.nmembers(max_depth=max_depth)
    assert ours.nmembers() == theirs.nmembers() == 2


@FORMATS
def test_info_complete_counts_the_whole_hierarchy_as_zarr(tmp_path: pathlib.Path, zarr_format: int) -> None:
    ours, theirs, _, _ = both(tmp_path, zarr_format)

    def counts(info: Any) -> dict[str, str]:
        rows = {
            name.strip(): value.strip() for name, _, value in (line.partition(":") for line in str(info).splitlines())
        }
        return {name: rows[name] for name in ("Zarr format", "Read-only", "No. members", "No. arrays", "No. groups")}

    assert counts(ours.info_complete()) == counts(theirs.info_complete())
    assert counts(ours.info_complete())["No. members"] == "4"


@FORMATS
def test_a_group_has_no_synchronizer_as_in_zarr(tmp_path: pathlib.Path, zarr_format: int) -> None:
    ours, theirs, _, _ = both(tmp_path, zarr_format)
    assert ours.synchronizer is None and theirs.synchronizer is None
    assert ours.async_group.synchronizer is None


@FORMATS
def test_store_path_names_the_store_and_the_path(tmp_path: pathlib.Path, zarr_format: int) -> None:
    ours, theirs, _, _ = both(tmp_path, zarr_format)
    for name in ("a", "s"):
        assert ours[name].store_path.path == theirs[name].store_path.path == name
        assert ours[name].store_path.store is ours.store
    assert str(ours["a"].store_path).endswith("ours.zarr/a")


# -- Group: creating members ---------------------------------------------------------------------------


@FORMATS
def test_require_groups_opens_or_creates_each_as_zarr(tmp_path: pathlib.Path, zarr_format: int) -> None:
    ours, theirs, ours_root, theirs_root = both(tmp_path, zarr_format)
    mine, reference = ours.require_groups("s", "new", "deep/er"), theirs.require_groups("s", "new", "deep/er")
    assert isinstance(mine, tuple) and all(isinstance(g, za.Group) for g in mine)
    assert [g.path for g in mine] == [g.path for g in reference] == ["s", "new", "deep/er"]
    assert ours.require_groups() == theirs.require_groups() == ()
    same_documents(ours_root, theirs_root, "new", "deep")
    # An array in the way: zarr raises TypeError, asyncarr its require_group's ContainsArrayError.
    assert error_kind(lambda: theirs.require_groups("a")) == "TypeError"
    assert error_kind(lambda: ours.require_groups("a")) == "ContainsArrayError"


def hierarchy_nodes(zarr_format: int) -> dict[str, Any]:
    """create_hierarchy's input: zarr's own metadata objects, as its docs show."""
    template = zarr.create_array({}, shape=(4,), chunks=(2,), dtype="i2", zarr_format=zarr_format, fill_value=3)
    return {
        "x": GroupMetadata(attributes={"k": 1}, zarr_format=zarr_format),
        "x/arr": template.metadata,
        "y": GroupMetadata(zarr_format=zarr_format),
    }


@FORMATS
def test_create_hierarchy_below_a_group_writes_what_zarr_writes(tmp_path: pathlib.Path, zarr_format: int) -> None:
    ours, theirs, ours_root, theirs_root = both(tmp_path, zarr_format)
    mine = dict(ours.create_group("sub").create_hierarchy(hierarchy_nodes(zarr_format)))
    reference = dict(theirs.create_group("sub").create_hierarchy(hierarchy_nodes(zarr_format)))
    assert sorted(mine) == sorted(reference) == ["x", "x/arr", "y"]
    assert {k: type(v).__name__ for k, v in mine.items()} == {k: type(v).__name__ for k, v in reference.items()}
    assert mine["x/arr"].path == reference["x/arr"].path == "sub/x/arr"
    np.testing.assert_array_equal(mine["x/arr"][:], reference["x/arr"][:])
    same_documents(ours_root, theirs_root, "sub")


@FORMATS
def test_create_hierarchy_refusals_are_zarrs(tmp_path: pathlib.Path, zarr_format: int) -> None:
    ours, theirs, ours_root, theirs_root = both(tmp_path, zarr_format)
    other = 2 if zarr_format == 3 else 3
    for nodes in ({"": GroupMetadata(zarr_format=zarr_format)}, {"q": GroupMetadata(zarr_format=other)}):
        assert error_kind(lambda nodes=nodes: list(ours.create_hierarchy(nodes))) == "ValueError"
        assert error_kind(lambda nodes=nodes: list(theirs.create_hierarchy(nodes))) == "ValueError"
    existing = {"s": GroupMetadata(zarr_format=zarr_format)}
    assert error_kind(lambda: list(ours.create_hierarchy(existing))) == "ContainsGroupError"
    assert error_kind(lambda: list(theirs.create_hierarchy(existing))) == "ContainsGroupError"
    assert sorted(documents(ours_root)) == sorted(documents(theirs_root))  # nothing written by any refusal


LIKE_FILLS = {"empty_like": {}, "zeros_like": {}, "ones_like": {}, "full_like": {"fill_value": 7}}


@FORMATS
@pytest.mark.parametrize("method", sorted(LIKE_FILLS))
@pytest.mark.parametrize("source", ["ndarray", "array"])
def test_like_methods_create_a_member_like_the_data_as_zarr(
    tmp_path: pathlib.Path, zarr_format: int, method: str, source: str
) -> None:
    ours, theirs, _, _ = both(tmp_path, zarr_format)
    data_ours = np.ones((5, 4), dtype="i2") if source == "ndarray" else ours["a"]
    data_theirs = np.ones((5, 4), dtype="i2") if source == "ndarray" else theirs["a"]
    mine = getattr(ours, method)(name="new", data=data_ours, **LIKE_FILLS[method])
    assert mine.zarr_format == zarr_format  # the group's format
    if zarr_format == 2 and source == "array":
        # zarr-python 3.1.6 makes a v3 array with the v2 source's compressor here, and refuses it:
        # the reference is zarr's function told the format.
        reference = getattr(zarr, method)(data_theirs, store={}, zarr_format=2, **LIKE_FILLS[method])
        assert mine.compressor == data_ours.compressor
    else:
        reference = getattr(theirs, method)(name="new", data=data_theirs, **LIKE_FILLS[method])
        assert mine.path == reference.path
    assert isinstance(mine, za.Array) and mine.path == "new"
    assert (mine.shape, mine.dtype, mine.chunks) == (reference.shape, reference.dtype, reference.chunks)
    if method != "empty_like":  # empty contents are undefined
        assert mine.fill_value == reference.fill_value
        np.testing.assert_array_equal(mine[:], reference[:])
    assert "new" in ours and error_kind(lambda: getattr(ours, method)(name="a", data=data_ours)) == "ContainsArrayError"


@FORMATS
def test_setitem_stores_an_array_from_the_value_as_zarr(tmp_path: pathlib.Path, zarr_format: int) -> None:
    ours, theirs, ours_root, theirs_root = both(tmp_path, zarr_format)
    values = np.arange(2000, dtype="f4").reshape(40, 50)
    ours["x"] = values
    theirs["x"] = values
    ours["s"] = np.arange(3)  # zarr 3 replaces what is there, a group too
    theirs["s"] = np.arange(3)
    np.testing.assert_array_equal(ours["x"][:], theirs["x"][:])
    np.testing.assert_array_equal(ours["s"][:], theirs["s"][:])
    same_documents(ours_root, theirs_root, "x", "s")
    assert chunk_keys(ours_root) == chunk_keys(theirs_root)


def test_setitem_takes_another_array_with_its_chunks(tmp_path: pathlib.Path) -> None:
    ours, _, _, _ = both(tmp_path, 3)
    ours["copy"] = ours["a"]  # zarr's docs show it; zarr-python 3.1.6 refuses a zarr Array here (TypeError)
    np.testing.assert_array_equal(ours["copy"][:], np.arange(6))
    assert ours["copy"].chunks == (2,)


# -- Group: opening and creating ------------------------------------------------------------------------


@FORMATS
def test_group_open_opens_what_is_there_as_zarr(tmp_path: pathlib.Path, zarr_format: int) -> None:
    _, _, ours_root, theirs_root = both(tmp_path, zarr_format)
    mine, reference = (
        za.Group.open(str(ours_root), zarr_format=zarr_format),
        zarr.Group.open(str(theirs_root), zarr_format=zarr_format),
    )
    assert isinstance(mine, za.Group) and mine.keys() == sorted(reference.keys())
    assert error_kind(lambda: za.Group.open(str(ours_root / "a"))) == "ContainsArrayError"
    assert isinstance(za.Group.open(str(ours_root)), za.Group)  # the format found when not given


@FORMATS
def test_group_from_store_creates_a_group_as_zarr(tmp_path: pathlib.Path, zarr_format: int) -> None:
    ours_root, theirs_root = tmp_path / "ours.zarr", tmp_path / "theirs.zarr"
    mine = za.Group.from_store(str(ours_root), attributes={"a": 1}, zarr_format=zarr_format)
    reference = zarr.Group.from_store(str(theirs_root), attributes={"a": 1}, zarr_format=zarr_format)
    assert isinstance(mine, za.Group) and dict(mine.attrs) == dict(reference.attrs) == {"a": 1}
    same_documents(ours_root, theirs_root)
    for lib, root in ((za, ours_root), (zarr, theirs_root)):
        again = lib.Group.from_store
        assert (
            error_kind(lambda again=again, root=root: again(str(root), zarr_format=zarr_format)) == "ContainsGroupError"
        )
    assert error_kind(lambda: za.Group.from_store(str(ours_root))) == "ContainsGroupError"  # either format there
    za.Group.from_store(str(ours_root), zarr_format=zarr_format, overwrite=True)
    zarr.Group.from_store(str(theirs_root), zarr_format=zarr_format, overwrite=True)
    same_documents(ours_root, theirs_root)


# -- Group.move -------------------------------------------------------------------------------------------


@FORMATS
def test_move_renames_a_member_with_its_data(tmp_path: pathlib.Path, zarr_format: int) -> None:
    ours, _, ours_root, _ = both(tmp_path, zarr_format)
    before = {key: (ours_root / key).read_bytes() for key in stored_keys(ours_root) if key.startswith("s/")}
    ours.move("s", "moved/here")
    assert "s" not in ours and not any(key.startswith("s/") for key in stored_keys(ours_root))
    after = {key: (ours_root / key).read_bytes() for key in stored_keys(ours_root) if key.startswith("moved/here/")}
    assert after == {key.replace("s/", "moved/here/", 1): value for key, value in before.items()}
    # zarr-python reads the moved member as it read the original.
    reference = zarr.open_group(str(ours_root), mode="r")
    np.testing.assert_array_equal(reference["moved/here/b"][:], np.ones((2, 3)))
    assert sorted(reference["moved/here"].keys()) == ["b", "t"]
    assert isinstance(reference["moved"], zarr.Group)


@FORMATS
def test_move_of_an_array_keeps_its_chunks(tmp_path: pathlib.Path, zarr_format: int) -> None:
    ours, _, ours_root, _ = both(tmp_path, zarr_format)
    ours.move("a", "renamed")
    np.testing.assert_array_equal(ours["renamed"][:], np.arange(6))
    np.testing.assert_array_equal(zarr.open_array(str(ours_root / "renamed"), mode="r")[:], np.arange(6))
    assert ours.get("a") is None


@FORMATS
@pytest.mark.parametrize(
    ("source", "dest", "error"), [("a", "s", "ContainsGroupError"), ("s", "a", "ContainsArrayError")]
)
def test_move_onto_an_existing_member_changes_nothing(
    tmp_path: pathlib.Path, zarr_format: int, source: str, dest: str, error: str
) -> None:
    ours, _, ours_root, _ = both(tmp_path, zarr_format)
    before = {key: (ours_root / key).read_bytes() for key in stored_keys(ours_root)}
    assert error_kind(lambda: ours.move(source, dest)) == error
    assert error_kind(lambda: ours.move("s", "s/inside")) == "ValueError"
    with pytest.raises(NodeNotFoundError):
        ours.move("missing", "elsewhere")
    assert {key: (ours_root / key).read_bytes() for key in stored_keys(ours_root)} == before


def test_move_refuses_a_destination_holding_other_keys(tmp_path: pathlib.Path) -> None:
    ours, _, ours_root, _ = both(tmp_path, 3)
    (ours_root / "stray").mkdir()
    (ours_root / "stray" / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError):
        ours.move("a", "stray")
    np.testing.assert_array_equal(ours["a"][:], np.arange(6))


class FailingMemoryStore(MemoryStore):
    """A MemoryStore whose writes below ``fail_under`` fail after ``allowed`` of them."""

    def __init__(self, fail_under: str, allowed: int) -> None:
        super().__init__()
        self.fail_under, self.allowed = fail_under, allowed

    async def set(self, key: str, value: bytes) -> None:
        if key.startswith(self.fail_under):
            if self.allowed <= 0:
                raise OSError(f"injected failure writing {key}")
            self.allowed -= 1
        await super().set(key, value)


def test_move_failing_midway_keeps_the_source_whole() -> None:
    async def scenario() -> None:
        store = FailingMemoryStore("dest/", allowed=3)
        group = await asyncarr.open_group(store, mode="w")
        array = await group.create_array("src", shape=(8, 8), chunks=(2, 2), dtype="i4")
        await array.setitem(Ellipsis, np.arange(64).reshape(8, 8))
        keys_before = sorted([key async for key in store.list_prefix("")])
        with pytest.raises(OSError, match="injected failure"):
            await group.move("src", "dest")
        assert sorted([key async for key in store.list_prefix("")]) == keys_before  # copied part removed
        np.testing.assert_array_equal(await (await group.getitem("src")).getitem(Ellipsis), np.arange(64).reshape(8, 8))
        assert await group.get("dest") is None

    asyncio.run(scenario())


class RecordingMemoryStore(MemoryStore):
    """A MemoryStore that records the keys it writes, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.written: list[str] = []

    async def set(self, key: str, value: bytes) -> None:
        self.written.append(key)
        await super().set(key, value)


def test_move_writes_the_metadata_documents_after_the_chunks() -> None:
    async def scenario() -> list[str]:
        store = RecordingMemoryStore()
        group = await asyncarr.open_group(store, mode="w")
        sub = await group.create_group("src")
        array = await sub.create_array("x", shape=(6, 6), chunks=(2, 2), dtype="i4")
        await array.setitem(Ellipsis, np.arange(36).reshape(6, 6))
        store.written.clear()
        await group.move("src", "dest")
        return [key for key in store.written if key.startswith("dest/")]

    written = asyncio.run(scenario())
    is_document = [pathlib.PurePath(key).name in METADATA_NAMES for key in written]
    assert len(written) == 9 + 2 and is_document == sorted(is_document)  # every chunk before any document


def test_move_on_a_read_only_group_is_refused(tmp_path: pathlib.Path) -> None:
    _, _, ours_root, _ = both(tmp_path, 3)
    with pytest.raises(PermissionError):
        za.open_group(str(ours_root), mode="r").move("a", "b")


# -- Array: config, with_config, open, create -------------------------------------------------------------


@FORMATS
def test_config_and_with_config_as_zarr(tmp_path: pathlib.Path, zarr_format: int) -> None:
    settings = {"shape": (8,), "chunks": (2,), "dtype": "i4", "fill_value": 0, "zarr_format": zarr_format}
    ours = za.create_array(str(tmp_path / "ours.zarr"), **settings)
    theirs = zarr.create_array(str(tmp_path / "theirs.zarr"), **settings)
    assert ours.config.to_dict() == theirs.config.to_dict() == {"order": "C", "write_empty_chunks": False}
    mine, reference = ours.with_config({"write_empty_chunks": True}), theirs.with_config({"write_empty_chunks": True})
    assert isinstance(mine, za.Array) and mine is not ours
    assert mine.config.to_dict() == reference.config.to_dict()
    assert ours.config.write_empty_chunks is False  # the original handle is unchanged
    mine[:] = 0  # equal to the fill value: stored only by the handle that writes empty chunks
    reference[:] = 0
    assert mine.nchunks_initialized == reference.nchunks_initialized == 4
    ours[:] = 0
    theirs[:] = 0
    assert ours.nchunks_initialized == theirs.nchunks_initialized == 0
    assert ours.with_config(theirs.config).config.to_dict() == theirs.config.to_dict()  # zarr's ArrayConfig too
    assert ours.with_config({"order": "F"}).config.order == theirs.with_config({"order": "F"}).config.order == "F"


def test_with_config_refuses_what_zarr_refuses(tmp_path: pathlib.Path) -> None:
    ours = za.create_array(str(tmp_path / "ours.zarr"), shape=(4,), dtype="i4")
    theirs = zarr.create_array(str(tmp_path / "theirs.zarr"), shape=(4,), dtype="i4")
    for bad in ({"order": "K"}, {"unknown": 1}):
        assert error_kind(lambda bad=bad: ours.with_config(bad)) == error_kind(lambda bad=bad: theirs.with_config(bad))


def test_with_config_survives_pickling(tmp_path: pathlib.Path) -> None:
    array = za.zeros((4,), store=str(tmp_path / "a.zarr")).async_array.with_config(
        {"order": "F", "write_empty_chunks": True}
    )
    restored = pickle.loads(pickle.dumps(array))
    assert restored.config == array.config and restored.config.order == "F"


@FORMATS
def test_array_open_opens_what_is_there_as_zarr(tmp_path: pathlib.Path, zarr_format: int) -> None:
    _, theirs, ours_root, theirs_root = both(tmp_path, zarr_format)
    mine = za.Array.open(str(ours_root / "s" / "b"))  # the format found, where zarr-python assumes 3
    reference = zarr.Array.open(str(theirs_root / "s" / "b")) if zarr_format == 3 else theirs["s/b"]
    assert isinstance(mine, za.Array)
    np.testing.assert_array_equal(mine[:], reference[:])
    assert (mine.shape, mine.chunks, mine.dtype) == (reference.shape, reference.chunks, reference.dtype)
    assert error_kind(lambda: za.Array.open(str(ours_root / "missing"))) == "ArrayNotFoundError"
    with pytest.raises(ValueError):  # a group is there: zarr's NodeTypeValidationError, our ContainsGroupError
        za.Array.open(str(ours_root / "s"))


def test_array_create_writes_zarrs_layout_with_asyncarrs_default_compressor(tmp_path: pathlib.Path) -> None:
    ours_root, theirs_root = tmp_path / "ours.zarr", tmp_path / "theirs.zarr"
    mine = za.Array.create(str(ours_root), shape=(6, 4), dtype="i4", chunk_shape=(3, 2), attributes={"k": "v"})
    with pytest.warns(DeprecationWarning):
        reference = zarr.Array.create(
            str(theirs_root), shape=(6, 4), dtype="i4", chunk_shape=(3, 2), attributes={"k": "v"}
        )
    assert isinstance(mine, za.Array)
    assert (mine.shape, mine.chunks, mine.dtype, mine.fill_value) == (
        reference.shape,
        reference.chunks,
        reference.dtype,
        reference.fill_value,
    )
    ours_doc, theirs_doc = documents(ours_root)["zarr.json"], documents(theirs_root)["zarr.json"]
    assert {k: v for k, v in ours_doc.items() if k != "codecs"} == {
        k: v for k, v in theirs_doc.items() if k != "codecs"
    }
    assert error_kind(lambda: za.Array.create(str(ours_root), shape=(2,), dtype="i4")) == "ContainsArrayError"
    assert za.Array.create(str(ours_root), shape=(2,), dtype="i4", overwrite=True).shape == (2,)


# -- the async API -----------------------------------------------------------------------------------------


@FORMATS
def test_async_group_members_are_coroutines_as_in_zarr(tmp_path: pathlib.Path, zarr_format: int) -> None:
    _, _, ours_root, theirs_root = both(tmp_path, zarr_format)

    async def scenario() -> None:
        ours = await asyncarr.open_group(str(ours_root), mode="r+")
        theirs = await zarr_async.open_group(str(theirs_root), mode="r+")
        for group in (ours, theirs):
            assert [a.path async for a in group.array_values()] == ["a"]
            assert [g.path async for g in group.group_values()] == ["s"]
            assert await group.nmembers(max_depth=None) == 4
            assert (await group.get("s/b")).path == "s/b" and await group.get("missing", 5) == 5
            assert [g.path for g in await group.require_groups("r1", "r2")] == ["r1", "r2"]
            await group.setitem("x", np.arange(5))
            assert [
                path async for path, _ in group.create_hierarchy({"h": GroupMetadata(zarr_format=zarr_format)})
            ] == ["h"]
        assert await ours.nmembers() == await theirs.nmembers() == 6
        for group in (ours, theirs):
            created = await group.zeros_like(name="z", data=np.ones((3,)))
            np.testing.assert_array_equal(await created.getitem(Ellipsis), np.zeros(3))
        assert isinstance(await ours.get("x"), asyncarr.AsyncArray)
        np.testing.assert_array_equal(await (await ours.getitem("x")).getitem(Ellipsis), np.arange(5))
        await ours.move("x", "y")
        assert await ours.get("x") is None and await ours.contains("y")

    asyncio.run(scenario())
    same_documents(ours_root / "r1", theirs_root / "r1")


def test_async_group_open_and_from_store_take_store_likes(tmp_path: pathlib.Path) -> None:
    async def scenario() -> None:
        created = await asyncarr.AsyncGroup.from_store(str(tmp_path / "g.zarr"), attributes={"a": 1})
        opened = await asyncarr.AsyncGroup.open(str(tmp_path / "g.zarr"))
        assert isinstance(opened, asyncarr.AsyncGroup) and dict(opened.attrs) == dict(created.attrs) == {"a": 1}
        with pytest.raises(ContainsGroupError):
            await asyncarr.AsyncGroup.from_store(str(tmp_path / "g.zarr"))
        await created.create_array("arr", shape=(2,), dtype="i1")
        with pytest.raises(ContainsArrayError):
            await asyncarr.AsyncGroup.open(str(tmp_path / "g.zarr" / "arr"))

    asyncio.run(scenario())


@FORMATS
def test_async_oindex_and_vindex_read_and_write_as_zarr(tmp_path: pathlib.Path, zarr_format: int) -> None:
    data = np.arange(30, dtype="i4").reshape(5, 6)

    async def scenario() -> None:
        settings = {"shape": (5, 6), "chunks": (2, 4), "dtype": "i4", "zarr_format": zarr_format}
        ours = await asyncarr.create_array(str(tmp_path / "ours.zarr"), **settings)
        theirs = await zarr_async.create_array(str(tmp_path / "theirs.zarr"), **settings)
        for array in (ours, theirs):
            await array.setitem(slice(None), data)
        orthogonal = ([0, 3, 4], slice(1, 5))
        points = (np.array([0, 2, 4]), np.array([5, 0, 3]))
        mask = data % 7 == 0
        np.testing.assert_array_equal(await ours.oindex.getitem(orthogonal), await theirs.oindex.getitem(orthogonal))
        np.testing.assert_array_equal(await ours.vindex.getitem(points), await theirs.vindex.getitem(points))
        np.testing.assert_array_equal(await ours.vindex.getitem(mask), await theirs.vindex.getitem(mask))
        expected = data.copy()
        expected[np.ix_([1, 2], [0, 5])] = -1
        expected[points] = -2
        await ours.oindex.setitem(([1, 2], [0, 5]), -1)
        await ours.vindex.setitem(points, -2)
        np.testing.assert_array_equal(await ours.getitem(Ellipsis), expected)
        assert (
            ours.with_config({"write_empty_chunks": True}).config
            == ours.with_config({"write_empty_chunks": True}).config
        )

    asyncio.run(scenario())
