"""``write_empty_chunks`` per array handle (zarr 2's keyword, zarr 3's ``config={...}``).

The setting belongs to the handle, not to the stored metadata: True stores chunks equal to the
fill value, False deletes them, None (the default) follows ``asyncarr.config`` at each write.
What is stored is counted by the chunk files on disk, and compared with zarr-python 3.
"""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
import zarr.storage

import asyncarr
import asyncarr.sync as za
from asyncarr.api import accepted_keywords

_DOCUMENTS = {".zarray", ".zattrs", ".zgroup", ".zmetadata", "zarr.json"}
SHAPE, CHUNKS = (6, 6), (3, 3)
NCHUNKS = 4


def chunk_files(root: Path) -> set[str]:
    """The stored chunk keys below ``root``: every file that is not a metadata document."""
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and p.name not in _DOCUMENTS}


def expected_files(per_array: bool | None, global_setting: bool) -> int:
    return NCHUNKS if (global_setting if per_array is None else per_array) else 0


# -- the handle's setting overrides the config, either way ------------------------------------------


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("per_array", [True, False, None])
@pytest.mark.parametrize("global_setting", [True, False])
def test_sync_api_per_array_setting_overrides_the_config(
    tmp_path: Path, zarr_format: int, per_array: bool | None, global_setting: bool
) -> None:
    with asyncarr.config.set(write_empty_chunks=global_setting):
        z = za.zeros(
            SHAPE, chunks=CHUNKS, dtype="i4", store=tmp_path, zarr_format=zarr_format, write_empty_chunks=per_array
        )
        assert z.write_empty_chunks is per_array
        z[:] = 0
        assert len(chunk_files(tmp_path)) == expected_files(per_array, global_setting)
        assert z.nchunks_initialized == expected_files(per_array, global_setting)
        z[:] = 7
        assert len(chunk_files(tmp_path)) == NCHUNKS
        z[:3, :3] = 0  # a whole chunk back to the fill value
        z[3, 3] = 0  # and part of another, the rest staying 7
        expected = np.full(SHAPE, 7, dtype="i4")
        expected[:3, :3] = 0
        expected[3, 3] = 0
        kept = global_setting if per_array is None else per_array
        assert len(chunk_files(tmp_path)) == NCHUNKS - (0 if kept else 1)
        np.testing.assert_array_equal(z[:], expected)
        assert z.nchunks_initialized == len(chunk_files(tmp_path))


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("per_array", [True, False])
@pytest.mark.parametrize("global_setting", [True, False])
def test_async_api_per_array_setting_overrides_the_config(
    tmp_path: Path, zarr_format: int, per_array: bool, global_setting: bool
) -> None:
    async def main() -> None:
        z = await asyncarr.create(
            SHAPE, chunks=CHUNKS, dtype="f8", store=tmp_path, zarr_format=zarr_format, write_empty_chunks=per_array
        )
        assert z.write_empty_chunks is per_array
        await z.setitem(Ellipsis, 0.0)
        assert len(chunk_files(tmp_path)) == expected_files(per_array, global_setting)
        assert await z.nchunks_initialized() == expected_files(per_array, global_setting)
        data = np.arange(36, dtype="f8").reshape(SHAPE)
        data[:3, 3:] = 0
        await z.setitem(Ellipsis, data)
        assert len(chunk_files(tmp_path)) == (NCHUNKS if per_array else NCHUNKS - 1)
        np.testing.assert_array_equal(await z.getitem(Ellipsis), data)

    with asyncarr.config.set(write_empty_chunks=global_setting):
        asyncio.run(main())


def test_the_default_follows_the_config_at_write_time(tmp_path: Path) -> None:
    z = za.zeros(SHAPE, chunks=CHUNKS, dtype="i4", store=tmp_path)  # made before the config changes
    assert z.write_empty_chunks is None
    with asyncarr.config.set(write_empty_chunks=True):
        z[:] = 0
    assert len(chunk_files(tmp_path)) == NCHUNKS
    z[:] = 0
    assert chunk_files(tmp_path) == set()


def test_the_setting_is_not_stored_in_the_metadata(tmp_path: Path) -> None:
    z = za.zeros(SHAPE, chunks=CHUNKS, dtype="i4", store=tmp_path, zarr_format=3, write_empty_chunks=True)
    assert "write_empty_chunks" not in (tmp_path / "zarr.json").read_text()
    assert za.open_array(tmp_path).write_empty_chunks is None
    z[:] = 0
    assert len(chunk_files(tmp_path)) == NCHUNKS


def test_a_sharded_array_keeps_inner_chunks_as_its_handle_says(tmp_path: Path) -> None:
    def stored_bytes(per_array: bool | None, global_setting: bool, where: Path) -> int:
        with asyncarr.config.set(write_empty_chunks=global_setting):
            z = za.zeros((4, 4), chunks=(2, 2), shards=(4, 4), dtype="i4", store=where, write_empty_chunks=per_array)
            z[0, :] = 5  # the shard is stored; its inner chunks equal to the fill value only when kept
            np.testing.assert_array_equal(z[:], np.array([[5] * 4, [0] * 4, [0] * 4, [0] * 4], dtype="i4"))
        return sum((where / key).stat().st_size for key in chunk_files(where))

    kept = stored_bytes(True, False, tmp_path / "kept")
    left_out = stored_bytes(False, True, tmp_path / "left_out")
    assert kept == stored_bytes(None, True, tmp_path / "config_kept")
    assert left_out == stored_bytes(None, False, tmp_path / "config_left_out")
    assert kept > left_out


# -- every creation and open function takes it ------------------------------------------------------------


def _creators(where: Path) -> dict[str, Callable[[bool], Any]]:
    source = np.zeros(SHAPE, dtype="i4")
    return {
        "create": lambda w: za.create(SHAPE, chunks=CHUNKS, dtype="i4", store=where, write_empty_chunks=w),
        "zeros": lambda w: za.zeros(SHAPE, chunks=CHUNKS, store=where, write_empty_chunks=w),
        "ones": lambda w: za.ones(SHAPE, chunks=CHUNKS, store=where, write_empty_chunks=w),
        "full": lambda w: za.full(SHAPE, 3, chunks=CHUNKS, store=where, write_empty_chunks=w),
        "empty": lambda w: za.empty(SHAPE, chunks=CHUNKS, dtype="i4", store=where, write_empty_chunks=w),
        "array": lambda w: za.array(source, chunks=CHUNKS, store=where, write_empty_chunks=w),
        "open_array": lambda w: za.open_array(where, mode="w", shape=SHAPE, chunks=CHUNKS, write_empty_chunks=w),
        "open": lambda w: za.open(where, mode="w", shape=SHAPE, chunks=CHUNKS, write_empty_chunks=w),
        "zeros_like": lambda w: za.zeros_like(source, chunks=CHUNKS, store=where, write_empty_chunks=w),
        "ones_like": lambda w: za.ones_like(source, chunks=CHUNKS, store=where, write_empty_chunks=w),
        "full_like": lambda w: za.full_like(source, 3, chunks=CHUNKS, store=where, write_empty_chunks=w),
        "empty_like": lambda w: za.empty_like(source, chunks=CHUNKS, store=where, write_empty_chunks=w),
        "create_array": lambda w: za.create_array(
            where, shape=SHAPE, chunks=CHUNKS, dtype="i4", config={"write_empty_chunks": w}
        ),
        "Group.create_dataset": lambda w: za.group(where).create_dataset(
            "x", shape=SHAPE, chunks=CHUNKS, dtype="i4", write_empty_chunks=w
        ),
        "Group.create_array": lambda w: za.group(where).create_array(
            "x", shape=SHAPE, chunks=CHUNKS, dtype="i4", config={"write_empty_chunks": w}
        ),
        "Group.zeros": lambda w: za.group(where).zeros("x", shape=SHAPE, chunks=CHUNKS, write_empty_chunks=w),
        "Group.require_dataset": lambda w: za.group(where).require_dataset(
            "x", shape=SHAPE, chunks=CHUNKS, dtype="i4", write_empty_chunks=w
        ),
    }


@pytest.mark.parametrize("name", sorted(_creators(Path())))
@pytest.mark.parametrize("per_array", [True, False])
def test_every_creation_function_takes_it(tmp_path: Path, name: str, per_array: bool) -> None:
    with asyncarr.config.set(write_empty_chunks=not per_array):
        z = _creators(tmp_path)[name](per_array)
        assert z.write_empty_chunks is per_array
        z[:] = z.fill_value
        assert z.nchunks_initialized == (NCHUNKS if per_array else 0)


@pytest.mark.parametrize("mode", ["r+", "a"])
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_opening_an_existing_array_takes_it(tmp_path: Path, mode: str, zarr_format: int) -> None:
    za.zeros(SHAPE, chunks=CHUNKS, dtype="i4", store=tmp_path, zarr_format=zarr_format)
    for opened in (
        za.open_array(tmp_path, mode=mode, write_empty_chunks=True),
        za.open(tmp_path, mode=mode, write_empty_chunks=True),
        za.open_array(tmp_path, mode=mode, config={"write_empty_chunks": True}),
        za.Array(tmp_path, write_empty_chunks=True),
    ):
        assert opened.write_empty_chunks is True
        opened[:] = 0
        assert len(chunk_files(tmp_path)) == NCHUNKS
        za.open_array(tmp_path, mode=mode, write_empty_chunks=False)[:] = 0
        assert chunk_files(tmp_path) == set()


def test_async_open_and_group_create_array_take_it(tmp_path: Path) -> None:
    async def main() -> None:
        z = await asyncarr.create_array(
            tmp_path / "a", shape=SHAPE, chunks=CHUNKS, dtype="i4", config={"write_empty_chunks": True}
        )
        assert z.write_empty_chunks is True
        reopened = await asyncarr.open_array(tmp_path / "a", mode="r+", write_empty_chunks=False)
        assert reopened.write_empty_chunks is False
        root = await asyncarr.group(tmp_path / "g")
        child = await root.create_dataset("x", shape=SHAPE, chunks=CHUNKS, dtype="i4", write_empty_chunks=True)
        await child.setitem(Ellipsis, 0)
        assert len(chunk_files(tmp_path / "g")) == NCHUNKS

    asyncio.run(main())


def test_keyword_and_config_must_agree_and_be_booleans(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="disagree"):
        za.open_array(tmp_path, mode="w", shape=SHAPE, write_empty_chunks=True, config={"write_empty_chunks": False})
    with pytest.raises(TypeError, match="write_empty_chunks must be"):
        za.zeros(SHAPE, store=tmp_path, write_empty_chunks="yes")


@pytest.mark.parametrize(
    "name",
    ["create", "zeros", "ones", "full", "empty", "array", "open_array", "open", "zeros_like", "ones_like",
     "full_like", "empty_like"],
)  # fmt: skip
def test_the_keyword_is_registered_and_a_typo_still_named(name: str) -> None:
    assert "write_empty_chunks" in accepted_keywords(name)
    with pytest.raises(TypeError, match="did you mean 'write_empty_chunks'"):
        za.open_array({}, mode="w", shape=SHAPE, write_empty_chunk=True)


# -- pickling keeps it ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("per_array", [True, False, None])
def test_a_pickled_array_keeps_it(tmp_path: Path, per_array: bool | None) -> None:
    z = za.zeros(SHAPE, chunks=CHUNKS, dtype="i4", store=tmp_path, write_empty_chunks=per_array)
    copy = pickle.loads(pickle.dumps(z))
    assert copy.write_empty_chunks is per_array
    assert pickle.loads(pickle.dumps(z.async_array)).write_empty_chunks is per_array
    with asyncarr.config.set(write_empty_chunks=not per_array):
        copy[:] = 0
    assert len(chunk_files(tmp_path)) == expected_files(per_array, not per_array)


# -- the same chunks stored as zarr-python 3 --------------------------------------------------------------


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("write_empty", [True, False])
def test_same_stored_chunks_as_zarr_python(tmp_path: Path, zarr_format: int, write_empty: bool) -> None:
    def writes(z: Any) -> None:
        z[:3, :] = 0  # two whole chunks of fill
        z[3:, :3] = 4
        z[3, 3] = 0  # a partial write of fill into a chunk never written

    options = {"shape": SHAPE, "chunks": CHUNKS, "dtype": "i4", "fill_value": 0, "zarr_format": zarr_format}
    theirs = zarr.create_array(
        store=zarr.storage.LocalStore(tmp_path / "zarr"), config={"write_empty_chunks": write_empty}, **options
    )
    writes(theirs)
    ours = za.create_array(tmp_path / "asyncarr", config={"write_empty_chunks": write_empty}, **options)
    writes(ours)
    assert chunk_files(tmp_path / "asyncarr") == chunk_files(tmp_path / "zarr")
    assert len(chunk_files(tmp_path / "asyncarr")) == (NCHUNKS if write_empty else 1)
    np.testing.assert_array_equal(ours[:], theirs[:])
    assert ours.nchunks_initialized == theirs.nchunks_initialized


@pytest.mark.parametrize("fill", [0.0, float("nan")])
def test_an_inner_chunk_starting_with_the_fill_value_is_still_stored(tmp_path: Path, fill: float) -> None:
    # The shard encoder screens inner chunks by their first element: one that starts with the fill
    # value but holds anything else must be kept; one that is all fill is left out, as zarr-python does.
    data = np.full((8, 8), fill, dtype="f4")
    data[0, 1] = 5.0  # inner chunk (0, 0): first element fill, one other value
    data[4:, 4:] = 2.0  # inner chunk (1, 1): no fill at all
    ours = za.create_array(
        str(tmp_path / "ours"), shape=(8, 8), chunks=(4, 4), shards=(8, 8), dtype="f4", fill_value=fill
    )
    ours[...] = data
    theirs = zarr.create_array(
        str(tmp_path / "theirs"), shape=(8, 8), chunks=(4, 4), shards=(8, 8), dtype="f4", fill_value=fill
    )
    theirs[...] = data
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "ours"), mode="r")[...], data)
    shard = (tmp_path / "ours/c/0/0").read_bytes()
    index = np.frombuffer(shard[-(4 * 16 + 4) : -4], dtype="<u8").reshape(2, 2, 2)
    stored = index[..., 0] != np.iinfo(np.uint64).max
    assert stored.tolist() == [[True, False], [False, True]]
    assert shard == (tmp_path / "theirs/c/0/0").read_bytes()
