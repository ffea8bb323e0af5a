"""Block selection (``z.blocks``, ``get/set_block_selection``) against NumPy and zarr-python 3."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest
import zarr
from hypothesis import given, settings
from hypothesis import strategies as st

import asyncarr
import asyncarr.sync as za
from asyncarr.indexing import block_selection_slices


@st.composite
def grids(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A shape (no empty axes) and a chunk shape over it."""
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 9), min_size=ndim, max_size=ndim)))
    chunks = tuple(draw(st.integers(1, length + 1)) for length in shape)
    return shape, chunks


@st.composite
def block_items(draw: st.DrawFn, nblocks: int) -> int | slice:
    """One valid item of a block selection on an axis of ``nblocks`` blocks (first block inside the array)."""
    if draw(st.booleans()):
        return draw(st.integers(-nblocks, nblocks - 1))
    start = draw(st.one_of(st.none(), st.integers(-nblocks, nblocks - 1)))
    stop = draw(st.one_of(st.none(), st.integers(-nblocks - 2, nblocks + 2)))
    return slice(start, stop, draw(st.sampled_from([None, 1])))


def expected_slices(selection: tuple[Any, ...], shape: tuple[int, ...], block_shape: tuple[int, ...]) -> tuple:
    """The element slices from chunk boundaries, built independently of asyncarr."""
    slices = []
    for item, length, block in zip(selection, shape, block_shape, strict=True):
        nblocks = -(-length // block)
        if isinstance(item, int):
            index = item % nblocks
            slices.append(slice(index * block, (index + 1) * block))
        else:
            start = 0 if item.start is None else item.start % nblocks
            stop = nblocks if item.stop is None else (item.stop + nblocks if item.stop < 0 else item.stop)
            slices.append(slice(start * block, stop * block))
    return tuple(slices)


def make_pair(
    data: np.ndarray, chunks: tuple[int, ...], zarr_format: int, shards: tuple[int, ...] | None = None
) -> tuple[za.Array, zarr.Array]:
    """The same data in an asyncarr array and a zarr-python array, each in its own memory store."""
    ours = za.create_array(
        store=None, shape=data.shape, chunks=chunks, shards=shards, dtype=data.dtype, zarr_format=zarr_format
    )
    ours[...] = data
    theirs = zarr.create_array(
        store={}, shape=data.shape, chunks=chunks, shards=shards, dtype=data.dtype, zarr_format=zarr_format
    )
    theirs[...] = data
    return ours, theirs


@settings(max_examples=80, deadline=None)
@given(grid=grids(), zarr_format=st.sampled_from([2, 3]), data=st.data())
def test_blocks_read_as_numpy_and_zarr_python(grid: tuple, zarr_format: int, data: st.DataObject) -> None:
    shape, chunks = grid
    values = np.arange(int(np.prod(shape)), dtype="i4").reshape(shape)
    ours, theirs = make_pair(values, chunks, zarr_format)
    nblocks = [-(-length // chunk) for length, chunk in zip(shape, chunks, strict=True)]
    selection = tuple(data.draw(block_items(n)) for n in nblocks)
    expected = values[expected_slices(selection, shape, chunks)]
    np.testing.assert_array_equal(ours.blocks[selection], expected)
    np.testing.assert_array_equal(ours.get_block_selection(selection), expected)
    np.testing.assert_array_equal(ours.blocks[selection], theirs.blocks[selection])


@settings(max_examples=40, deadline=None)
@given(grid=grids(), data=st.data())
def test_sharded_blocks_are_shards_as_in_zarr_python(grid: tuple, data: st.DataObject) -> None:
    shape, inner = grid
    shards = tuple(chunk * data.draw(st.integers(1, 3)) for chunk in inner)
    values = np.arange(int(np.prod(shape)), dtype="i4").reshape(shape)
    ours, theirs = make_pair(values, inner, 3, shards=shards)
    nblocks = [-(-length // shard) for length, shard in zip(shape, shards, strict=True)]
    selection = tuple(data.draw(block_items(n)) for n in nblocks)
    expected = values[expected_slices(selection, shape, shards)]
    np.testing.assert_array_equal(ours.blocks[selection], expected)
    np.testing.assert_array_equal(ours.blocks[selection], theirs.blocks[selection])


@settings(max_examples=60, deadline=None)
@given(grid=grids(), zarr_format=st.sampled_from([2, 3]), sharded=st.booleans(), data=st.data())
def test_setting_blocks_reads_back_as_numpy(grid: tuple, zarr_format: int, sharded: bool, data: st.DataObject) -> None:
    shape, chunks = grid
    shards = chunks if sharded and zarr_format == 3 else None
    block_shape = shards or chunks
    ours = za.create_array(store=None, shape=shape, chunks=chunks, shards=shards, dtype="i4", zarr_format=zarr_format)
    expected = np.zeros(shape, dtype="i4")
    nblocks = [-(-length // block) for length, block in zip(shape, block_shape, strict=True)]
    selection = tuple(data.draw(block_items(n)) for n in nblocks)
    region = expected_slices(selection, shape, block_shape)
    value = np.arange(expected[region].size, dtype="i4").reshape(expected[region].shape) + 1
    if data.draw(st.booleans()):
        ours.blocks[selection] = value
    else:
        ours.set_block_selection(selection, value)
    expected[region] = value
    np.testing.assert_array_equal(ours[...], expected)


def test_async_block_selection() -> None:
    async def run() -> None:
        values = np.arange(70, dtype="f8").reshape(7, 10)
        z = await asyncarr.array(values, chunks=(3, 4))
        np.testing.assert_array_equal(await z.get_block_selection((-1, slice(1, None))), values[6:, 4:])
        await z.set_block_selection((0, 0), -1.0)
        assert (await z.getitem((slice(0, 3), slice(0, 4))) == -1).all()
        assert (await z.getitem((slice(3, None), slice(None)))).min() >= 0

    asyncio.run(run())


def test_scalar_broadcast_and_ellipsis() -> None:
    ours, theirs = make_pair(np.arange(100, dtype="i8").reshape(10, 10), (3, 4), 3)
    ours.blocks[..., 1] = 7
    theirs.blocks[..., 1] = 7
    np.testing.assert_array_equal(ours[...], theirs[...])
    np.testing.assert_array_equal(ours.blocks[1, ...], theirs.blocks[1, ...])


BAD_SELECTIONS = [
    (4, 0),  # first block past the end
    (-5,),  # before the start
    (slice(4, 5),),
    (slice(-10, 2),),
    (slice(0, 4, 2),),  # step other than 1
    (slice(None, None, -1),),
    ([0, 1],),  # lists and arrays are not block indices
    (np.array([0, 1]),),
    (1.0,),
    (True,),
    (None,),
    (0, 0, 0),  # too many indices
    (..., ...),
]


@pytest.mark.parametrize("selection", BAD_SELECTIONS, ids=repr)
def test_errors_are_index_errors_as_in_zarr_python(selection: Any) -> None:
    ours, theirs = make_pair(np.arange(100, dtype="i8").reshape(10, 10), (3, 4), 3)
    with pytest.raises(IndexError):
        theirs.blocks[selection]
    with pytest.raises(IndexError):
        ours.blocks[selection]
    with pytest.raises(IndexError):
        ours.blocks[selection] = 1


def test_wrong_value_shape_is_a_value_error() -> None:
    ours, theirs = make_pair(np.arange(100, dtype="i8").reshape(10, 10), (3, 4), 3)
    with pytest.raises(ValueError):
        theirs.blocks[0, 0] = np.zeros((2, 2))
    with pytest.raises(ValueError):
        ours.blocks[0, 0] = np.zeros((2, 2))


def test_slices_are_chunk_boundaries() -> None:
    assert block_selection_slices((1, slice(None)), (10, 10), (3, 4)) == (slice(3, 6), slice(0, 12))


@pytest.mark.parametrize("selection", [(), ...])
def test_zero_dimensional_block_is_a_zero_dimensional_array(selection: Any) -> None:
    ours = za.create_array(store=None, shape=(), dtype="i4", fill_value=3)
    theirs = zarr.create_array(store={}, shape=(), dtype="i4", fill_value=3)
    mine, reference = ours.blocks[selection], theirs.blocks[selection]
    assert isinstance(mine, np.ndarray) and isinstance(reference, np.ndarray)
    assert mine.shape == reference.shape == () and mine == reference == 3
    assert isinstance(asyncio.run(ours.async_array.get_block_selection(selection)), np.ndarray)


@pytest.mark.parametrize("selection", [(slice(None),), (0,)])
def test_empty_axis_has_no_blocks_as_in_zarr_python(selection: Any) -> None:
    ours = za.create_array(store=None, shape=(0, 4), chunks=(2, 2), dtype="i4")
    theirs = zarr.create_array(store={}, shape=(0, 4), chunks=(2, 2), dtype="i4")
    with pytest.raises(IndexError):
        theirs.blocks[selection]
    with pytest.raises(IndexError):
        ours.blocks[selection]
