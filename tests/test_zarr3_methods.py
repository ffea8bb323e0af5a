"""zarr 3's Array and Group methods on both APIs, compared with zarr-python 3 on the same nodes."""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import numcodecs
import numpy as np
import pytest
import zarr

import asyncarr
import asyncarr.sync as za


def info_rows(info: Any) -> dict[str, str]:
    """The ``name : value`` rows of an info table as a dict."""
    rows = {}
    for line in str(info).splitlines():
        name, _, value = line.partition(":")
        rows[name.strip().lower()] = value.strip()
    return rows


def pair(zarr_format: int, **kwargs: Any) -> tuple[za.Array, zarr.Array]:
    """The same array, half written, in asyncarr and in zarr-python, each in its own memory store."""
    data = np.arange(100, dtype="i8").reshape(10, 10)
    common = {"shape": (10, 10), "chunks": (3, 4), "dtype": "i8", "zarr_format": zarr_format, **kwargs}
    ours = za.create_array(store=None, **common)
    theirs = zarr.create_array(store={}, **common)
    ours[:5] = data[:5]
    theirs[:5] = data[:5]
    return ours, theirs


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_info_complete_has_zarr_3s_stored_fields(zarr_format: int) -> None:
    ours, theirs = pair(zarr_format)  # both default to Zstd(level=0)
    mine, reference = info_rows(ours.info_complete()), info_rows(theirs.info_complete())
    for field in ["zarr format", "shape", "chunk shape", "order", "read-only", "no. bytes"]:
        assert mine[field] == reference[field], field
    assert mine["chunks initialized"] == f"{reference['chunks initialized']}/12"
    # The same chunk bytes; the metadata documents differ a little in their JSON layout.
    stored = [int(rows["no. bytes stored"].split()[0]) for rows in (mine, reference)]
    assert stored[0] == pytest.approx(stored[1], rel=0.2)
    assert str(ours.info_complete()) == str(ours.info)


def test_v2_codecs_in_zarr_3s_form() -> None:
    ours, theirs = pair(2, compressors=numcodecs.Zlib(level=2), filters=[numcodecs.Delta(dtype="<i8")])
    assert ours.compressors == theirs.compressors == (numcodecs.Zlib(level=2),)
    assert ours.filters == theirs.filters == (numcodecs.Delta(dtype="<i8"),)
    assert ours.serializer is None and theirs.serializer is None
    assert ours.compressor == numcodecs.Zlib(level=2)  # zarr 2's name keeps its meaning
    bare, bare_reference = pair(2, compressors=None)
    assert bare.compressors == bare_reference.compressors == ()
    assert bare.filters == bare_reference.filters == ()


@pytest.mark.parametrize("shards", [None, (6, 8)])
def test_v3_codecs_in_zarr_3s_form(shards: tuple[int, ...] | None) -> None:
    compressors = [zarr.codecs.ZstdCodec(level=3), zarr.codecs.Crc32cCodec()]
    theirs = zarr.create_array(
        store={}, shape=(10, 10), chunks=(3, 4), shards=shards, dtype="i8", compressors=compressors
    )
    ours = za.create_array(
        store=None,
        shape=(10, 10),
        chunks=(3, 4),
        shards=shards,
        dtype="i8",
        compressors=[numcodecs.Zstd(level=3), numcodecs.CRC32C()],
    )
    assert [c.codec_id for c in ours.compressors] == [c.to_dict()["name"] for c in theirs.compressors]
    assert ours.compressors[0].level == theirs.compressors[0].level == 3
    assert type(ours.serializer).__name__ == type(theirs.serializer).__name__ == "BytesCodec"
    assert ours.filters == theirs.filters == ()
    plain_ours, plain_theirs = pair(3, compressors=None)
    assert plain_ours.compressors == plain_theirs.compressors == ()


def build_hierarchies() -> tuple[za.Group, zarr.Group]:
    """The same small hierarchy in asyncarr and in zarr-python."""
    built = []
    for module, store in [(za, None), (zarr, {})]:
        root = module.group(store=store)
        root.create_group("a").create_group("b").create_array("x", shape=(2,), dtype="i1")
        root["a"].create_array("w", shape=(3, 1), dtype="f4")
        root.create_array("y", shape=(1,), dtype="i1")
        root.create_group("z")
        built.append(root)
    return built[0], built[1]


@pytest.mark.parametrize("max_depth", [0, 1, 2, None])
def test_members_by_depth_as_in_zarr_python(max_depth: int | None) -> None:
    ours, theirs = build_hierarchies()
    mine = ours.members(max_depth=max_depth)
    reference = theirs.members(max_depth=max_depth)
    assert isinstance(mine, tuple)
    assert sorted(name for name, _ in mine) == sorted(name for name, _ in reference)
    kinds = {name: isinstance(node, za.Array) for name, node in mine}
    assert kinds == {name: isinstance(node, zarr.Array) for name, node in reference}
    assert [name for name, _ in mine] == sorted((name for name, _ in mine), key=lambda n: (n.count("/"), n))


def test_members_default_and_bad_depth() -> None:
    ours, theirs = build_hierarchies()
    assert [name for name, _ in ours.members()] == ["a", "y", "z"]
    assert [name for name, _ in ours.items()] == [name for name, _ in ours.members()]
    with pytest.raises(ValueError):
        theirs.members(max_depth=-1)
    with pytest.raises(ValueError):
        ours.members(max_depth=-1)


@pytest.mark.parametrize("level", [None, 0, 1, 2])
def test_tree_levels_as_in_zarr_python(level: int | None) -> None:
    ours, theirs = build_hierarchies()
    # asyncarr draws one space before the branches, as zarr 2 did; the branches are the same.
    mine = [line.removeprefix(" ") for line in str(ours.tree(level=level)).strip().splitlines()]
    assert mine == str(theirs.tree(level=level, plain=True)).strip().splitlines()


def test_tree_expand_is_not_implemented_as_in_zarr_python() -> None:
    ours, theirs = build_hierarchies()
    with pytest.raises(NotImplementedError):
        theirs.tree(expand=True)
    with pytest.raises(NotImplementedError):
        ours.tree(expand=True)


def test_update_attributes_returns_the_node() -> None:
    ours, theirs = build_hierarchies()
    for root in (ours, theirs):
        group = root.update_attributes({"title": "t"})
        array = root["y"].update_attributes({"units": "m"})
        assert type(group) is type(root) and group.attrs["title"] == "t"
        assert array.attrs["units"] == "m"
    reopened = za.open_group(ours.store, mode="r")
    assert reopened.attrs["title"] == "t" and reopened["y"].attrs["units"] == "m"


def test_async_methods() -> None:
    async def run() -> None:
        root = await asyncarr.group()
        sub = await root.create_group("a")
        await sub.create_array("x", shape=(4,), dtype="i2")
        assert await root.update_attributes({"k": 1}) is root
        names = [name async for name, _ in root.members(max_depth=None)]
        assert names == ["a", "a/x"]
        x = await root.getitem("a/x")
        assert await x.update_attributes({"u": 2}) is x
        assert x.compressors == (x.compressor,) and x.filters == ()
        assert type(x.serializer).__name__ == "BytesCodec"
        assert info_rows(await x.info_complete())["no. bytes"] == "8"
        assert "x" not in str(await root.tree(level=0))

    asyncio.run(run())


def test_unreadable_member_is_skipped_at_depth() -> None:
    ours, _ = build_hierarchies()
    asyncio.run(ours.store.set("a/b/broken/zarr.json", b"{not json"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        names = [name for name, _ in ours.members(max_depth=None)]
    assert "a/b/broken" not in names and "a/b/x" in names
    assert any("a/b/broken" in str(w.message) for w in caught)
