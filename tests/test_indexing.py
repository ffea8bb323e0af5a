"""Selections -> chunk projections, checked against NumPy on a chunked emulation of the array."""

from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from asyncarr.indexing import BasicIndexer, ChunkProjection, OrthogonalIndexer, side_by_side_chunks

# Padding of edge chunks beyond the array: a projection that reads it shows up as a wrong value.
PAD = -1


def split_into_chunks(a: np.ndarray, chunks: tuple[int, ...]) -> dict[tuple[int, ...], np.ndarray]:
    """Every chunk of ``a`` at the full chunk shape, edge chunks padded with PAD."""
    grid = [math.ceil(dim_len / chunk_len) for dim_len, chunk_len in zip(a.shape, chunks, strict=True)]
    stored = {}
    for coords in itertools.product(*(range(n) for n in grid)):
        region = tuple(slice(c * k, (c + 1) * k) for c, k in zip(coords, chunks, strict=True))
        chunk = np.full(chunks, PAD, dtype=a.dtype)
        piece = a[region]
        chunk[tuple(slice(0, n) for n in piece.shape)] = piece
        stored[coords] = chunk
    return stored


def assemble(stored: dict[tuple[int, ...], np.ndarray], shape: tuple[int, ...], chunks: tuple[int, ...]) -> np.ndarray:
    """The array of ``shape`` that the chunks hold."""
    a = np.empty(shape, dtype=np.int64)
    for coords, chunk in stored.items():
        region = tuple(slice(c * k, (c + 1) * k) for c, k in zip(coords, chunks, strict=True))
        target = a[(*region, Ellipsis)]  # a view, even of a 0-d array
        target[...] = chunk[tuple(slice(0, n) for n in target.shape)]
    return a


def chunked_read(a: np.ndarray, chunks: tuple[int, ...], indexer: Any) -> np.ndarray:
    """Read a selection the way the array layer does: projection by projection."""
    stored = split_into_chunks(a, chunks)
    out = np.full(indexer.buffer_shape, -2, dtype=a.dtype)
    for projection in indexer:
        out[projection.out_selection] = stored[projection.chunk_coords][projection.chunk_selection]
    return indexer.finalize(out)


def chunked_write(a: np.ndarray, chunks: tuple[int, ...], indexer: Any, value: Any) -> np.ndarray:
    """Write ``value`` through the projections into the chunks, then reassemble the array."""
    stored = split_into_chunks(a, chunks)
    value = indexer.value_buffer(np.broadcast_to(np.asarray(value), indexer.shape))
    for projection in indexer:
        # As the array layer does: a 0-d value (a scalar) goes to every chunk whole.
        piece = value if value.ndim == 0 else value[projection.out_selection]
        stored[projection.chunk_coords][projection.chunk_selection] = piece
    return assemble(stored, a.shape, chunks)


def in_bounds_region(coords: tuple[int, ...], shape: tuple[int, ...], chunks: tuple[int, ...]) -> tuple[slice, ...]:
    """The part of the full chunk array that lies inside the array."""
    return tuple(slice(0, min(k, n - c * k)) for c, k, n in zip(coords, chunks, shape, strict=True))


def numpy_error(a: np.ndarray, selection: Any) -> type[BaseException] | None:
    """The exception class NumPy raises for ``a[selection]``, or None."""
    try:
        a[selection]
    except Exception as exc:
        return type(exc)
    return None


# --- strategies ---------------------------------------------------------------------------


@st.composite
def shapes_and_chunks(draw: st.DrawFn, max_ndim: int = 4) -> tuple[tuple[int, ...], tuple[int, ...]]:
    ndim = draw(st.integers(0, max_ndim))
    shape = tuple(draw(st.lists(st.integers(0, 9), min_size=ndim, max_size=ndim)))
    chunks = tuple(draw(st.integers(1, max(1, n + 2))) for n in shape)
    return shape, chunks


def slices(dim_len: int) -> st.SearchStrategy[slice]:
    bound = st.none() | st.integers(-dim_len - 3, dim_len + 3)
    small_step = st.sampled_from([None, 1, -1, 2, -2, 3, -3])
    any_step = st.integers(-dim_len - 2, dim_len + 2).filter(lambda s: s != 0)
    return st.builds(slice, bound, bound, small_step | any_step)


def dim_selections(dim_len: int) -> st.SearchStrategy[Any]:
    if dim_len == 0:
        return slices(dim_len)
    ints = st.integers(-dim_len, dim_len - 1)
    any_int = ints | ints.map(np.int32) | ints.map(np.int64)
    # Slices twice as often as integers: they are where chunks and steps interact.
    return slices(dim_len) | slices(dim_len) | any_int


@st.composite
def basic_selections(draw: st.DrawFn, shape: tuple[int, ...]) -> Any:
    """A valid basic selection: maybe short, maybe with an Ellipsis, maybe bare."""
    nitems = draw(st.integers(0, len(shape)))
    use_ellipsis = draw(st.booleans())
    if use_ellipsis:
        # The Ellipsis stands for the axes between the leading and trailing items.
        nleading = draw(st.integers(0, nitems))
        axes = list(range(nleading)) + list(range(len(shape) - (nitems - nleading), len(shape)))
        items: list[Any] = [draw(dim_selections(shape[axis])) for axis in axes]
        items.insert(nleading, Ellipsis)
    else:
        items = [draw(dim_selections(shape[axis])) for axis in range(nitems)]
    if len(items) == 1 and draw(st.booleans()):
        return items[0]
    return tuple(items)


@st.composite
def arrays_and_basic_selections(draw: st.DrawFn) -> tuple[np.ndarray, tuple[int, ...], Any]:
    shape, chunks = draw(shapes_and_chunks())
    a = np.arange(math.prod(shape), dtype=np.int64).reshape(shape)
    return a, chunks, draw(basic_selections(shape))


# --- basic selections: reads, writes, completeness ------------------------------------------


@given(arrays_and_basic_selections())
@settings(max_examples=200, deadline=None)
def test_basic_selection_reads_what_numpy_reads(case: tuple[np.ndarray, tuple[int, ...], Any]) -> None:
    a, chunks, selection = case
    indexer = BasicIndexer(selection, a.shape, chunks)
    expected = a[selection]
    assert indexer.shape == expected.shape
    np.testing.assert_array_equal(chunked_read(a, chunks, indexer), expected)


@given(arrays_and_basic_selections(), st.booleans())
@settings(max_examples=120, deadline=None)
def test_basic_selection_writes_what_numpy_writes(
    case: tuple[np.ndarray, tuple[int, ...], Any], scalar_value: bool
) -> None:
    a, chunks, selection = case
    indexer = BasicIndexer(selection, a.shape, chunks)
    value: Any = 10_000 if scalar_value else 10_000 + np.arange(math.prod(indexer.shape)).reshape(indexer.shape)
    expected = a.copy()
    expected[selection] = value
    np.testing.assert_array_equal(chunked_write(a, chunks, indexer, value), expected)


@given(arrays_and_basic_selections())
@settings(max_examples=120, deadline=None)
def test_projections_are_complete_exactly_when_they_cover_the_chunk(
    case: tuple[np.ndarray, tuple[int, ...], Any],
) -> None:
    a, chunks, selection = case
    for projection in BasicIndexer(selection, a.shape, chunks):
        touched = np.zeros(chunks, dtype=bool)
        touched[projection.chunk_selection] = True
        region = in_bounds_region(projection.chunk_coords, a.shape, chunks)
        assert projection.is_complete_chunk == touched[region].all()
        touched[region] = False
        assert not touched.any(), "a projection reaches past the array's edge"


@given(arrays_and_basic_selections())
@settings(max_examples=100, deadline=None)
def test_nchunks_counts_the_projections_yielded_once_each_in_c_order(
    case: tuple[np.ndarray, tuple[int, ...], Any],
) -> None:
    a, chunks, selection = case
    indexer = BasicIndexer(selection, a.shape, chunks)
    coords = [projection.chunk_coords for projection in indexer]
    assert indexer.nchunks == len(coords)
    assert coords == sorted(set(coords))


@given(arrays_and_basic_selections())
@settings(max_examples=100, deadline=None)
def test_selections_hold_no_negative_stop_and_chunk_slices_ascend(
    case: tuple[np.ndarray, tuple[int, ...], Any],
) -> None:
    a, chunks, selection = case
    for projection in BasicIndexer(selection, a.shape, chunks):
        for item in projection.chunk_selection:
            if isinstance(item, slice):
                assert item.step > 0 and 0 <= item.start < item.stop
        for item in projection.out_selection:
            assert isinstance(item, slice)
            assert item.start >= 0 and (item.stop is None or item.stop >= 0)


def test_negative_steps_across_ragged_chunks() -> None:
    a = np.arange(23 * 7).reshape(23, 7)
    for selection in [np.s_[::-1], np.s_[::-3, ::-2], np.s_[20:2:-4, 5::-1], np.s_[-1:-24:-7, 3], np.s_[::-25]]:
        indexer = BasicIndexer(selection, a.shape, (5, 3))
        np.testing.assert_array_equal(chunked_read(a, (5, 3), indexer), a[selection])
        expected = a.copy()
        value = -np.arange(math.prod(indexer.shape)).reshape(indexer.shape)
        expected[selection] = value
        np.testing.assert_array_equal(chunked_write(a, (5, 3), indexer, value), expected)


def test_zero_dimensional_array_is_one_chunk_with_empty_coords() -> None:
    for selection in [(), Ellipsis]:
        indexer = BasicIndexer(selection, (), ())
        assert indexer.shape == ()
        assert indexer.nchunks == 1
        assert list(indexer) == [ChunkProjection((), (), (), True)]
    with pytest.raises(IndexError):
        BasicIndexer(0, (), ())
    with pytest.raises(IndexError):
        BasicIndexer(slice(None), (), ())


def test_zero_length_selection_yields_no_projections() -> None:
    for selection, shape in [(np.s_[5:5], (10,)), (np.s_[:, 3:1], (4, 6)), (np.s_[::-1, 2], (0, 4))]:
        indexer = BasicIndexer(selection, shape, (3,) * len(shape))
        assert list(indexer) == []
        assert indexer.nchunks == 0
        assert indexer.shape == np.empty(shape)[selection].shape


def test_chunk_larger_than_array_is_one_chunk() -> None:
    a = np.arange(12).reshape(3, 4)
    indexer = BasicIndexer(np.s_[::-1, 1:], a.shape, (10, 10))
    (projection,) = list(indexer)
    assert projection.chunk_coords == (0, 0)
    assert not projection.is_complete_chunk
    assert BasicIndexer(np.s_[:], a.shape, (10, 10)).nchunks == 1
    assert next(iter(BasicIndexer(np.s_[::-1], a.shape, (10, 10)))).is_complete_chunk
    np.testing.assert_array_equal(chunked_read(a, (10, 10), indexer), a[::-1, 1:])


def test_integers_of_every_kind_index_like_ints() -> None:
    class Position:
        def __index__(self) -> int:
            return 2

    a = np.arange(30).reshape(5, 6)
    for item in [2, np.int8(2), np.uint64(2), np.intp(-3), np.array(2), Position()]:
        indexer = BasicIndexer((item, slice(None)), a.shape, (2, 4))
        np.testing.assert_array_equal(chunked_read(a, (2, 4), indexer), a[item, :])


# --- errors -------------------------------------------------------------------------------

BAD_ITEMS = [
    "abc",
    1.5,
    np.float64(1.0),
    b"x",
    {},
    slice(0, 2.5),
    slice(0, "a"),
    slice(None, None, 0),
    slice(0, 2.5, 0),
    slice(1, 2, 1.0),
    Ellipsis,
    10,
    -10,
    2**70,
]


@st.composite
def shapes_and_error_prone_selections(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...], Any]:
    shape, chunks = draw(shapes_and_chunks(max_ndim=3))
    good = st.one_of(*(dim_selections(n) for n in shape)) if shape else st.just(slice(None))
    items = draw(st.lists(st.sampled_from(BAD_ITEMS) | good | good, max_size=len(shape) + 2))
    return shape, chunks, tuple(items) if len(items) != 1 or draw(st.booleans()) else items[0]


@given(shapes_and_error_prone_selections())
@settings(max_examples=200, deadline=None)
def test_errors_match_the_class_numpy_raises(case: tuple[tuple[int, ...], tuple[int, ...], Any]) -> None:
    shape, chunks, selection = case
    expected = numpy_error(np.zeros(shape), selection)
    if expected is None:
        BasicIndexer(selection, shape, chunks)
    else:
        with pytest.raises(expected):
            BasicIndexer(selection, shape, chunks)


@pytest.mark.parametrize(
    ("selection", "error", "message"),
    [
        (5, IndexError, "index 5 is out of bounds for axis 0 with size 4"),
        ((0, 0, 0), IndexError, "too many indices"),
        ("abc", IndexError, "only integers"),
        (1.5, IndexError, "only integers"),
        (slice(0, 2.5), TypeError, "slice indices must be integers"),
        (slice(None, None, 0), ValueError, "slice step cannot be zero"),
        ((Ellipsis, Ellipsis), IndexError, "single ellipsis"),
        (True, IndexError, "boolean scalar indexing is not supported"),
        (np.True_, IndexError, "boolean scalar indexing is not supported"),
        (None, IndexError, "newaxis"),
        ([0, 1], IndexError, "orthogonal"),
    ],
)
def test_error_messages_name_the_problem(selection: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        BasicIndexer(selection, (4, 4), (2, 2))


def test_chunks_must_fit_the_shape() -> None:
    with pytest.raises(ValueError):
        BasicIndexer(0, (4, 4), (2,))
    with pytest.raises(ValueError):
        BasicIndexer(0, (4,), (0,))


# --- performance --------------------------------------------------------------------------


def python_calls(work: Callable[[], object]) -> int:
    """How many Python functions ``work()`` calls: a count of the per-item Python work that makes
    indexing slow, the same on any machine (NumPy's own C loops are not counted)."""
    calls = 0

    def count(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        if event == "call":
            calls += 1

    sys.setprofile(count)
    try:
        work()
    finally:
        sys.setprofile(None)
    return calls


def test_full_selection_of_4096_chunks_builds_with_a_few_python_calls_per_chunk() -> None:
    def build() -> None:
        assert len(list(BasicIndexer(np.s_[:], (6400, 6400), (100, 100)))) == 4096

    assert python_calls(build) < 4 * 4096  # about 2.1 a chunk


def test_wide_step_touches_only_the_chunks_it_selects() -> None:
    indexer = BasicIndexer(np.s_[::100_000], (10**9,), (1,))
    assert indexer.nchunks == 10_000
    assert len(list(indexer)) == 10_000


# --- orthogonal selections ----------------------------------------------------------------


def orthogonal_items(dim_len: int, unique: bool) -> st.SearchStrategy[Any]:
    """Per-axis items of an orthogonal selection: ints, slices, index arrays or lists, masks."""
    positions = st.lists(st.integers(0, dim_len - 1), max_size=2 * dim_len, unique=unique) if dim_len else st.just([])
    index_arrays = st.tuples(positions, st.randoms()).map(
        # Any index may be written as its negative twin.
        lambda drawn: np.array([p - dim_len if drawn[1].random() < 0.3 else p for p in drawn[0]], dtype=np.int64)
    )
    masks = st.lists(st.booleans(), min_size=dim_len, max_size=dim_len).map(lambda bits: np.array(bits, dtype=bool))
    arrays = index_arrays | index_arrays.map(list) | masks
    return dim_selections(dim_len) | arrays | arrays


@st.composite
def arrays_and_orthogonal_selections(draw: st.DrawFn, unique: bool = False) -> tuple[np.ndarray, tuple[int, ...], Any]:
    shape, chunks = draw(shapes_and_chunks(max_ndim=3))
    a = np.arange(math.prod(shape), dtype=np.int64).reshape(shape)
    nitems = draw(st.integers(0, len(shape)))
    return a, chunks, tuple(draw(orthogonal_items(shape[axis], unique)) for axis in range(nitems))


def orthogonal_reference(
    shape: tuple[int, ...], selection: tuple[Any, ...]
) -> tuple[tuple[np.ndarray, ...], tuple[int, ...]]:
    """The selection as np.ix_ index arrays, and the integer-indexed axes that the result drops."""
    index_arrays, int_axes = [], []
    for axis, dim_len in enumerate(shape):
        item = selection[axis] if axis < len(selection) else slice(None)
        if isinstance(item, slice):
            index_arrays.append(np.arange(*item.indices(dim_len)))
        elif isinstance(item, int | np.integer):
            index_arrays.append(np.array([item]))
            int_axes.append(axis)
        else:
            item = np.asarray(item, dtype=None if len(item) else np.int64)
            index_arrays.append(np.flatnonzero(item) if item.dtype == bool else item)
    return np.ix_(*index_arrays), tuple(int_axes)


@given(arrays_and_orthogonal_selections())
@settings(max_examples=150, deadline=None)
def test_orthogonal_selection_reads_each_axis_independently(case: tuple[np.ndarray, tuple[int, ...], Any]) -> None:
    a, chunks, selection = case
    index_arrays, int_axes = orthogonal_reference(a.shape, selection)
    expected = a[index_arrays].squeeze(axis=int_axes)
    indexer = OrthogonalIndexer(selection, a.shape, chunks)
    assert indexer.shape == expected.shape
    assert indexer.nchunks == len(list(indexer))
    np.testing.assert_array_equal(chunked_read(a, chunks, indexer), expected)
    for projection in indexer:
        touched = np.zeros(chunks, dtype=bool)
        touched[projection.chunk_selection] = True
        assert projection.is_complete_chunk == touched[in_bounds_region(projection.chunk_coords, a.shape, chunks)].all()


@pytest.mark.parametrize(
    "selection",
    [
        (0, slice(None), [2, 0, 5]),
        ([3, 1], 2, slice(None, None, -2)),
        ([3, 1], slice(1, None), [0, 4]),
        (slice(None, None, -1), [True, False, True, True, False, True], -1),
        (-1, [0], 4),
        ([4, 0, 2], [5, 1], [6, 0, 3]),
    ],
)
def test_orthogonal_selection_mixing_arrays_with_integers(selection: tuple[Any, ...]) -> None:
    a = np.arange(5 * 6 * 7).reshape(5, 6, 7)
    chunks = (2, 4, 3)
    index_arrays, int_axes = orthogonal_reference(a.shape, selection)
    indexer = OrthogonalIndexer(selection, a.shape, chunks)
    np.testing.assert_array_equal(chunked_read(a, chunks, indexer), a[index_arrays].squeeze(axis=int_axes))
    value = -np.arange(math.prod(indexer.shape)).reshape(indexer.shape)
    expected = a.copy()
    expected[index_arrays] = np.expand_dims(value, int_axes)
    np.testing.assert_array_equal(chunked_write(a, chunks, indexer, value), expected)


def test_orthogonal_write_with_repeated_indices_keeps_the_last_value_like_numpy() -> None:
    rng = np.random.default_rng(0)
    a = np.zeros(10, dtype=np.int64)
    indices = rng.integers(-10, 10, size=1000)
    value = np.arange(1000)
    expected = a.copy()
    expected[indices] = value
    indexer = OrthogonalIndexer((indices,), a.shape, (4,))
    np.testing.assert_array_equal(chunked_write(a, (4,), indexer, value), expected)


@given(arrays_and_orthogonal_selections(unique=True))
@settings(max_examples=100, deadline=None)
def test_orthogonal_selection_writes_each_axis_independently(case: tuple[np.ndarray, tuple[int, ...], Any]) -> None:
    a, chunks, selection = case
    indexer = OrthogonalIndexer(selection, a.shape, chunks)
    value = 10_000 + np.arange(math.prod(indexer.shape)).reshape(indexer.shape)
    index_arrays, int_axes = orthogonal_reference(a.shape, selection)
    expected = a.copy()
    expected[index_arrays] = np.expand_dims(value, int_axes)
    np.testing.assert_array_equal(chunked_write(a, chunks, indexer, value), expected)
    for projection in indexer:
        touched = np.zeros(chunks, dtype=bool)
        touched[projection.chunk_selection] = True
        assert projection.is_complete_chunk == touched[in_bounds_region(projection.chunk_coords, a.shape, chunks)].all()


def test_orthogonal_selection_groups_unsorted_repeated_indices_by_chunk() -> None:
    a = np.arange(50).reshape(10, 5)
    selection = ([7, 0, 9, 0, -1, 3], np.array([True, False, True, True, False]))
    indexer = OrthogonalIndexer(selection, a.shape, (3, 2))
    assert [p.chunk_coords for p in indexer] == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1), (3, 0), (3, 1)]
    np.testing.assert_array_equal(chunked_read(a, (3, 2), indexer), a[np.ix_([7, 0, 9, 0, 9, 3], [0, 2, 3])])


@pytest.mark.parametrize(
    ("selection", "message"),
    [
        (([0, 10],), "index 10 is out of bounds for axis 0 with size 4"),
        ((slice(None), [-5]), "index -5 is out of bounds for axis 1 with size 4"),
        ((np.array([True, False]),), "boolean index did not match"),
        ((np.zeros((2, 2), dtype=int),), "1-D"),
        (([0.5],), "integer"),
    ],
)
def test_orthogonal_errors_are_index_errors(selection: Any, message: str) -> None:
    with pytest.raises(IndexError, match=message):
        OrthogonalIndexer(selection, (4, 4), (2, 2))


def test_orthogonal_selection_with_an_index_array_before_an_ellipsis() -> None:
    a = np.arange(60).reshape(3, 4, 5)
    indexer = OrthogonalIndexer(([2, 0], Ellipsis, [True, False, False, True, True]), a.shape, (2, 3, 2))
    np.testing.assert_array_equal(chunked_read(a, (2, 3, 2), indexer), a[np.ix_([2, 0], range(4), [0, 3, 4])])


def test_side_by_side_chunks_finds_runs_one_copy_can_take_and_nothing_else() -> None:
    grid = (8, 10)
    whole = list(BasicIndexer((slice(None), slice(None)), (64, 100), grid))
    assert side_by_side_chunks(whole[:10], grid) == (slice(0, 8), slice(0, 100))  # one row of chunks
    assert side_by_side_chunks(whole[3:7], grid) == (slice(0, 8), slice(30, 70))
    assert side_by_side_chunks(whole[8:12], grid) is None  # across two rows
    assert side_by_side_chunks(whole[:3] + whole[4:6], grid) is None  # a gap
    edge = list(BasicIndexer((slice(None), slice(None)), (64, 95), grid))
    assert side_by_side_chunks(edge[:9], grid) == (slice(0, 8), slice(0, 90))
    assert side_by_side_chunks(edge[:10], grid) is None  # the last is cut by the array's edge
    part = list(BasicIndexer((slice(0, 7), slice(None)), (64, 100), grid))
    assert side_by_side_chunks(part[:3], grid) is None  # parts of chunks
    dropped = list(BasicIndexer((3, slice(None)), (64, 100), grid))
    assert side_by_side_chunks(dropped[:3], grid) is None  # an integer-indexed axis
    stepped = list(BasicIndexer((slice(None), slice(None, None, 2)), (64, 100), (8, 1)))
    # Every other chunk of one column: side by side in the value all the same.
    assert side_by_side_chunks(stepped[:3], (8, 1)) == (slice(0, 8), slice(0, 3))
    # The run's values, reshaped and its chunk axis moved first, are the chunks in order.
    values = np.arange(64 * 100).reshape(64, 100)
    run = values[side_by_side_chunks(whole[12:17], grid)].reshape(8, 5, 10).transpose(1, 0, 2)
    for projection, chunk in zip(whole[12:17], run, strict=True):
        np.testing.assert_array_equal(chunk, values[projection.out_selection])
