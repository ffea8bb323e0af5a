"""AsyncArray and the sync facade: orthogonal, coordinate and mask selections against NumPy and zarr-python."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest
import zarr

import asyncarr
import asyncarr.sync as za
from asyncarr.stores.memory import MemoryStore


class CountingStore(MemoryStore):
    """A memory store that counts reads per key."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: dict[str, int] = {}

    async def get(self, key: str, byte_range: Any = None) -> bytes | None:
        self.reads[key] = self.reads.get(key, 0) + 1
        return await super().get(key, byte_range)


def test_each_chunk_is_read_once_however_many_points_fall_in_it() -> None:
    async def main() -> None:
        store = CountingStore()
        data = np.arange(40 * 30).reshape(40, 30)
        z = await asyncarr.array(data, store=store, chunks=(10, 10))
        rng = np.random.default_rng(0)
        rows, cols = rng.integers(-40, 40, 5000), rng.integers(0, 30, 5000)
        store.reads.clear()
        np.testing.assert_array_equal(await z.get_coordinate_selection((rows, cols)), data[rows, cols])
        assert len(store.reads) == 12 and set(store.reads.values()) == {1}

    asyncio.run(main())


@pytest.mark.parametrize("shards", [None, (6, 6, 8)])
def test_async_selections_read_and_write_like_numpy(shards: Any) -> None:
    async def main() -> None:
        data = np.arange(7 * 8 * 9, dtype="i4").reshape(7, 8, 9)
        z = await asyncarr.array(data, chunks=(3, 3, 4), shards=shards)
        rows, cols, deps = [6, 0, 6, -1], [1, 2, 1, 7], [0, 8, 0, 3]
        mask = data % 7 == 0
        np.testing.assert_array_equal(
            await z.get_orthogonal_selection(([4, 0, 4], slice(None), 2)), data[[4, 0, 4]][:, :, 2]
        )
        np.testing.assert_array_equal(await z.get_coordinate_selection((rows, cols, deps)), data[rows, cols, deps])
        np.testing.assert_array_equal(await z.get_mask_selection(mask), data[mask])
        for selection in [
            np.s_[[0, 2], :],
            np.s_[0, :, [1, 2]],
            np.s_[[[0], [6]], 1:5, [3, 4]],
            np.s_[mask],
            np.s_[data[:, :, 0] > 300, ::2],
            np.s_[:, 0, ..., [0, 5]],
        ]:
            np.testing.assert_array_equal(await z.getitem(selection), data[selection])
        expected = data.copy()
        value = np.arange(4) + 1000
        expected[rows, cols, deps] = value
        await z.set_coordinate_selection((rows, cols, deps), value)
        expected[mask] = -1
        await z.set_mask_selection(mask, -1)
        expected[0, :, [1, 2]] = np.arange(16).reshape(2, 8)
        await z.setitem(np.s_[0, :, [1, 2]], np.arange(16).reshape(2, 8))
        expected[[1, 1, 5], 2:4, [8, 8, 0]] = np.arange(6).reshape(3, 2)
        await z.setitem(np.s_[[1, 1, 5], 2:4, [8, 8, 0]], np.arange(6).reshape(3, 2))
        np.testing.assert_array_equal(await z.getitem(Ellipsis), expected)
        with pytest.raises(IndexError):
            await z.get_coordinate_selection(([0, 99], [0, 0], [0, 0]))

    asyncio.run(main())


def test_sync_oindex_and_vindex_match_zarr_python(tmp_path: Any) -> None:
    data = np.arange(20 * 12, dtype="f8").reshape(20, 12)
    ours = za.open(str(tmp_path / "a.zarr"), mode="w", shape=data.shape, chunks=(6, 5), dtype="f8")
    ours[:] = data
    theirs = zarr.open_array(str(tmp_path / "a.zarr"), mode="r")
    mask = data % 3 == 0
    for selection in [np.s_[[0, 2], :], np.s_[[19, 0, 3], [11, 0]], np.s_[:, [True] * 6 + [False] * 6]]:
        np.testing.assert_array_equal(ours.oindex[selection], theirs.oindex[selection])
    for selection in [np.s_[[0, 1], [2, 3]], np.s_[[19, 0, 19], [-1, 0, 11]], np.s_[mask]]:
        np.testing.assert_array_equal(ours.vindex[selection], theirs.vindex[selection])
    np.testing.assert_array_equal(ours[[0, 1], [2, 3]], data[[0, 1], [2, 3]])
    np.testing.assert_array_equal(ours[mask], data[mask])
    ours.vindex[[0, 0, 5], [1, 1, 2]] = [7, 8, 9]
    ours.oindex[[3, 1], :] = 0
    expected = data.copy()
    expected[[0, 0, 5], [1, 1, 2]] = [7, 8, 9]
    expected[[3, 1], :] = 0
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "a.zarr"), mode="r")[:], expected)


def test_copying_another_array_into_a_coordinate_selection() -> None:
    source = za.array(np.arange(5.0))
    target = za.zeros((4, 6), chunks=(2, 2))
    target.vindex[[0, 1, 2, 3, 3], [0, 2, 4, 5, 1]] = source
    expected = np.zeros((4, 6))
    expected[[0, 1, 2, 3, 3], [0, 2, 4, 5, 1]] = np.arange(5.0)
    np.testing.assert_array_equal(target[:], expected)
