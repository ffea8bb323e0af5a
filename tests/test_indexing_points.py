"""Pointwise selections (coordinate, mask, NumPy's advanced indexing) checked against NumPy on chunked data."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from test_indexing import (
    BAD_ITEMS,
    chunked_read,
    chunked_write,
    in_bounds_region,
    numpy_error,
    python_calls,
    shapes_and_chunks,
    slices,
)

from asyncarr.indexing import BasicIndexer, OrthogonalIndexer
from asyncarr.indexing_points import AdvancedIndexer, CoordinateIndexer, MaskIndexer, indexer_for


def assert_each_chunk_once_and_completeness_exact(
    indexer: Any, shape: tuple[int, ...], chunks: tuple[int, ...]
) -> None:
    """nchunks counts the projections, no chunk comes twice, and is_complete_chunk is exact."""
    projections = list(indexer)
    coords = [p.chunk_coords for p in projections]
    assert indexer.nchunks == len(coords) == len(set(coords))
    for projection in projections:
        touched = np.zeros(chunks, dtype=bool)
        touched[projection.chunk_selection] = True
        region = in_bounds_region(projection.chunk_coords, shape, chunks)
        assert projection.is_complete_chunk == touched[region].all()
        touched[region] = False
        assert not touched.any(), "a projection reaches past the array's edge"


def assert_reads_and_writes_like_numpy(a: np.ndarray, chunks: tuple[int, ...], selection: Any, indexer: Any) -> None:
    expected = a[selection]
    assert indexer.shape == expected.shape
    np.testing.assert_array_equal(chunked_read(a, chunks, indexer), expected)
    for value in [10_000 + np.arange(expected.size).reshape(expected.shape), np.int64(-5)]:
        written = a.copy()
        written[selection] = value
        np.testing.assert_array_equal(chunked_write(a, chunks, indexer, value), written)


# --- strategies ---------------------------------------------------------------------------


def broadcastable_shapes(target: tuple[int, ...]) -> st.SearchStrategy[tuple[int, ...]]:
    """Shapes that broadcast to ``target``: trailing axes of it, each kept or set to 1."""

    @st.composite
    def build(draw: st.DrawFn) -> tuple[int, ...]:
        ndim = draw(st.integers(0 if math.prod(target) else len(target), len(target)))
        tail = target[len(target) - ndim :]
        return tuple(n if n == 0 or draw(st.booleans()) else 1 for n in tail)

    return build()


def index_arrays(dim_len: int, target: tuple[int, ...]) -> st.SearchStrategy[Any]:
    """Integer indices for one axis broadcasting to ``target``: repeats, any order, negatives."""
    if dim_len == 0:
        return st.just(np.zeros(target, dtype=np.int64))
    elements = st.integers(-dim_len, dim_len - 1)
    as_arrays = broadcastable_shapes(target).flatmap(lambda shape: arrays(np.int64, shape, elements=elements))
    # An empty nested list would lose its shape, so empty arrays stay arrays.
    return as_arrays | as_arrays.map(lambda array: array.tolist() if array.size else array)


@st.composite
def coordinate_cases(draw: st.DrawFn) -> tuple[np.ndarray, tuple[int, ...], tuple[Any, ...]]:
    shape, chunks = draw(shapes_and_chunks(max_ndim=3).filter(lambda case: len(case[0]) > 0))
    target = tuple(draw(st.lists(st.integers(0, 5), max_size=2)))
    if 0 in shape and math.prod(target):
        target = (0,)
    a = np.arange(math.prod(shape), dtype=np.int64).reshape(shape)
    return a, chunks, tuple(draw(index_arrays(n, target)) for n in shape)


@st.composite
def mask_cases(draw: st.DrawFn) -> tuple[np.ndarray, tuple[int, ...], np.ndarray]:
    shape, chunks = draw(shapes_and_chunks(max_ndim=3).filter(lambda case: len(case[0]) > 0))
    density = draw(st.sampled_from([0.0, 0.2, 0.7, 1.0]))
    mask = draw(arrays(np.float64, shape, elements=st.floats(0, 1))) < density
    return np.arange(math.prod(shape), dtype=np.int64).reshape(shape), chunks, mask


@st.composite
def numpy_selections(draw: st.DrawFn) -> tuple[np.ndarray, tuple[int, ...], Any]:
    """Any NumPy selection without newaxis: ints, slices, index arrays of any shape, masks over
    one or several axes, an Ellipsis; index arrays mostly broadcast together."""
    shape, chunks = draw(shapes_and_chunks(max_ndim=4))
    target = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    items: list[Any] = []
    axis, used_ellipsis = 0, False
    while axis < len(shape) and draw(st.integers(0, 5)) > 0:
        if not used_ellipsis and draw(st.integers(0, 6)) == 0:
            used_ellipsis = True
            items.append(Ellipsis)
            axis += draw(st.integers(0, len(shape) - axis))
            continue
        if axis == len(shape):
            break
        kind = draw(st.sampled_from(["int", "slice", "slice", "array", "array", "mask"]))
        dim_len = shape[axis]
        if kind == "int" and dim_len:
            items.append(draw(st.integers(-dim_len, dim_len - 1)))
        elif kind == "array":
            items.append(draw(index_arrays(dim_len, target if dim_len else (0,))))
        elif kind == "mask":
            span = draw(st.integers(1, len(shape) - axis))
            mask_shape = shape[axis : axis + span]
            items.append(draw(arrays(np.bool_, mask_shape)))
            axis += span - 1
        else:
            items.append(draw(slices(dim_len)))
        axis += 1
    a = np.arange(math.prod(shape), dtype=np.int64).reshape(shape)
    selection = items[0] if len(items) == 1 and draw(st.booleans()) else tuple(items)
    return a, chunks, selection


# --- coordinate selections ----------------------------------------------------------------


@given(coordinate_cases())
@settings(max_examples=200, deadline=None)
def test_coordinate_selection_reads_and_writes_like_numpy(case: tuple[np.ndarray, tuple[int, ...], Any]) -> None:
    a, chunks, selection = case
    indexer = CoordinateIndexer(selection, a.shape, chunks)
    assert_reads_and_writes_like_numpy(a, chunks, selection, indexer)
    assert_each_chunk_once_and_completeness_exact(indexer, a.shape, chunks)


def test_coordinate_write_of_repeated_unsorted_points_keeps_the_last_value_like_numpy() -> None:
    rng = np.random.default_rng(1)
    a = np.zeros((6, 7), dtype=np.int64)
    selection = (rng.integers(-6, 6, size=2000), rng.integers(-7, 7, size=2000))
    value = np.arange(2000)
    expected = a.copy()
    expected[selection] = value
    indexer = CoordinateIndexer(selection, a.shape, (4, 3))
    assert indexer.nchunks == 6
    np.testing.assert_array_equal(chunked_write(a, (4, 3), indexer, value), expected)


def test_coordinate_selection_result_takes_the_broadcast_shape() -> None:
    a = np.arange(60).reshape(5, 12)
    rows = np.array([[4], [0], [2]])
    columns = np.array([11, -1, 0, 5])
    indexer = CoordinateIndexer((rows, columns), a.shape, (2, 5))
    assert indexer.shape == (3, 4)
    assert indexer.buffer_shape == (12,)
    np.testing.assert_array_equal(chunked_read(a, (2, 5), indexer), a[rows, columns])
    scalar_point = CoordinateIndexer((np.int64(3), -1), a.shape, (2, 5))
    assert scalar_point.shape == ()
    np.testing.assert_array_equal(chunked_read(a, (2, 5), scalar_point), a[3, -1])


def test_coordinate_projection_selects_the_points_of_its_chunk_in_selection_order() -> None:
    indexer = CoordinateIndexer(([5, 0, 4, 1, 5], [1, 2, 0, 0, 3]), (6, 4), (2, 2))
    by_chunk = {p.chunk_coords: p for p in indexer}
    assert sorted(by_chunk) == [(0, 0), (0, 1), (2, 0), (2, 1)]
    # Points 0 and 2, (5, 1) and (4, 0), share chunk (2, 0).
    np.testing.assert_array_equal(by_chunk[(2, 0)].chunk_selection[0], [1, 0])
    np.testing.assert_array_equal(by_chunk[(2, 0)].chunk_selection[1], [1, 0])
    np.testing.assert_array_equal(by_chunk[(2, 0)].out_selection[0], [0, 2])


def test_coordinate_selection_of_a_zero_dimensional_array() -> None:
    a = np.array(7)
    indexer = CoordinateIndexer((), (), ())
    assert indexer.shape == () and indexer.nchunks == 1
    np.testing.assert_array_equal(chunked_read(a, (), indexer), a[()])
    np.testing.assert_array_equal(chunked_write(a, (), indexer, 3), np.array(3))


def test_empty_coordinate_selection_touches_no_chunk() -> None:
    indexer = CoordinateIndexer(([], []), (4, 4), (2, 2))
    assert indexer.shape == (0,) and indexer.nchunks == 0 and list(indexer) == []


def test_chunk_grid_too_large_to_number_still_groups_by_chunk() -> None:
    shape = (10**7, 10**7, 10**7)
    selection = ([9_999_999, 0, 9_999_999, 5], [0, 0, 0, 5], [1, 2, 1, 5])
    indexer = CoordinateIndexer(selection, shape, (1, 1, 1))
    assert [p.chunk_coords for p in indexer] == [(0, 0, 2), (5, 5, 5), (9_999_999, 0, 1)]
    assert [p.out_selection[0].tolist() for p in indexer] == [[1], [3], [0, 2]]


# --- mask selections ----------------------------------------------------------------------


@given(mask_cases())
@settings(max_examples=120, deadline=None)
def test_mask_selection_reads_and_writes_like_numpy(case: tuple[np.ndarray, tuple[int, ...], np.ndarray]) -> None:
    a, chunks, mask = case
    for indexer in [MaskIndexer(mask, a.shape, chunks), MaskIndexer((mask,), a.shape, chunks)]:
        assert_reads_and_writes_like_numpy(a, chunks, mask, indexer)
        assert_each_chunk_once_and_completeness_exact(indexer, a.shape, chunks)
    np.testing.assert_array_equal(chunked_read(a, chunks, CoordinateIndexer(mask, a.shape, chunks)), a[mask])


def test_full_mask_covers_every_chunk_completely() -> None:
    indexer = MaskIndexer(np.ones((5, 5), dtype=bool), (5, 5), (2, 3))
    assert indexer.nchunks == 6
    assert all(p.is_complete_chunk for p in indexer)


# --- z[...]: NumPy's semantics through indexer_for ----------------------------------------


@given(numpy_selections())
@settings(max_examples=400, deadline=None)
def test_any_selection_reads_writes_and_fails_like_numpy(case: tuple[np.ndarray, tuple[int, ...], Any]) -> None:
    a, chunks, selection = case
    error = numpy_error(a, selection)
    if error is not None:
        with pytest.raises(error):
            indexer_for(selection, a.shape, chunks)
        return
    indexer = indexer_for(selection, a.shape, chunks)
    assert_reads_and_writes_like_numpy(a, chunks, selection, indexer)
    assert_each_chunk_once_and_completeness_exact(indexer, a.shape, chunks)


BAD_ARRAY_ITEMS = [np.array([0.5]), np.array([], dtype=float), np.array([True]), [99], np.array([[-99]]), [0, 1, 2]]


@st.composite
def error_prone_numpy_selections(draw: st.DrawFn) -> tuple[np.ndarray, tuple[int, ...], Any]:
    """A NumPy selection with one item replaced or added: a bad scalar, a bad or unbroadcastable array."""
    a, chunks, selection = draw(numpy_selections())
    items = list(selection) if isinstance(selection, tuple) else [selection]
    bad = draw(st.sampled_from(BAD_ITEMS + BAD_ARRAY_ITEMS))
    items.insert(draw(st.integers(0, len(items))), bad)
    if len(items) > 1 and draw(st.booleans()):
        del items[draw(st.integers(0, len(items) - 1))]
    return a, chunks, tuple(items)


@given(error_prone_numpy_selections())
@settings(max_examples=300, deadline=None)
def test_bad_selections_raise_the_class_numpy_raises(case: tuple[np.ndarray, tuple[int, ...], Any]) -> None:
    a, chunks, selection = case
    error = numpy_error(a, selection)
    if error is None:
        np.testing.assert_array_equal(chunked_read(a, chunks, indexer_for(selection, a.shape, chunks)), a[selection])
    else:
        with pytest.raises(error):
            indexer_for(selection, a.shape, chunks)


@pytest.mark.parametrize(
    ("selection", "kind"),
    [
        (np.s_[1:, ::-2], BasicIndexer),
        (np.s_[[0, 2], :], OrthogonalIndexer),
        (np.s_[:, [True, False, True, True, False, True, False]], OrthogonalIndexer),
        (np.s_[[4, 0, 4], 3, :], OrthogonalIndexer),
        (np.s_[2, [0, 3], :], OrthogonalIndexer),
        (np.s_[[0, 1], [2, 3], [1, 0]], CoordinateIndexer),
        (np.s_[[0, 1], [2, 3]], AdvancedIndexer),
        (np.s_[[[0], [4]], [2, 3], 1], CoordinateIndexer),
        (np.s_[np.arange(5 * 7 * 3).reshape(5, 7, 3) % 3 == 0], MaskIndexer),
        (np.s_[2, :, [0, 2]], AdvancedIndexer),
        (np.s_[[0, 1], :, [0, 2]], AdvancedIndexer),
        (np.s_[:, [[0, 6], [1, 1]]], AdvancedIndexer),
        (np.s_[np.arange(35).reshape(5, 7) > 20, 1:], AdvancedIndexer),
    ],
)
def test_dispatch_picks_the_simplest_indexer_that_gives_numpys_result(selection: Any, kind: type) -> None:
    a = np.arange(5 * 7 * 3).reshape(5, 7, 3)
    indexer = indexer_for(selection, a.shape, (2, 3, 2))
    assert type(indexer) is kind
    assert_reads_and_writes_like_numpy(a, (2, 3, 2), selection, indexer)


def test_arrays_separated_by_a_slice_put_the_broadcast_axes_first_like_numpy() -> None:
    a = np.arange(4 * 5 * 6).reshape(4, 5, 6)
    indexer = indexer_for((0, slice(None), [1, 2]), a.shape, (3, 2, 4))
    assert indexer.shape == a[0, :, [1, 2]].shape == (2, 5)
    np.testing.assert_array_equal(chunked_read(a, (3, 2, 4), indexer), a[0, :, [1, 2]])


# --- errors -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "selection", "message"),
    [
        (CoordinateIndexer, ([0, 4], [0, 0]), "index 4 is out of bounds for axis 0 with size 4"),
        (CoordinateIndexer, ([0], [-6]), "index -6 is out of bounds for axis 1 with size 5"),
        (CoordinateIndexer, ([0, 1, 2], [0, 1]), "shape mismatch"),
        (CoordinateIndexer, ([0, 1],), "one integer array per dimension"),
        (CoordinateIndexer, ([0, 1], slice(None)), "oindex"),
        (CoordinateIndexer, ([0.5], [0]), "only integers"),
        (CoordinateIndexer, ([True, False, True, True], [0, 1, 2]), "boolean"),
        (MaskIndexer, np.ones((4, 4), dtype=bool), r"shape \(4, 5\)"),
        (MaskIndexer, np.ones((4, 5), dtype=int), "boolean array; got dtype int64"),
        (MaskIndexer, (np.ones((4, 5), dtype=bool), 0), "one boolean array"),
        (MaskIndexer, [0, 1], "dtype int64"),
        (indexer_for, (Ellipsis, [0, 1, 2], [0, 1]), "shape mismatch"),
        (indexer_for, (np.ones((4, 4), dtype=bool),), "boolean index did not match"),
        (indexer_for, (np.ones((4, 5, 1), dtype=bool),), "too many indices"),
    ],
)
def test_bad_pointwise_selections_raise_index_errors(build: Any, selection: Any, message: str) -> None:
    with pytest.raises(IndexError, match=message):
        build(selection, (4, 5), (3, 2))


def test_a_bad_slice_is_reported_before_a_bad_index_like_numpy() -> None:
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        indexer_for(([0, 10], slice(None, None, 0)), (4, 5), (3, 2))
    with pytest.raises(TypeError):
        indexer_for((slice(0, 2.5), [0, 10, 1], [1]), (4, 5, 6), (3, 2, 2))


# --- performance --------------------------------------------------------------------------


def test_a_million_points_over_4096_chunks_group_with_python_calls_per_chunk_not_per_point() -> None:
    rng = np.random.default_rng(2)
    selection = (rng.integers(0, 6400, size=10**6), rng.integers(-6400, 6400, size=10**6))

    def group(points: int) -> int:
        part = (selection[0][:points], selection[1][:points])
        return python_calls(lambda: len(list(CoordinateIndexer(part, (6400, 6400), (100, 100)))))

    calls = group(10**6)
    assert calls < 10 * 4096  # about 5 a chunk
    assert calls < 1.5 * group(10**4)  # a hundred times the points, not a hundred times the work


def test_a_dense_mask_of_a_million_points_finds_its_complete_chunks_with_few_python_calls() -> None:
    mask = np.ones((1000, 1000), dtype=bool)
    mask[5, 5] = False

    def build() -> None:
        projections = list(MaskIndexer(mask, mask.shape, (100, 100)))
        assert sum(not p.is_complete_chunk for p in projections) == 1

    assert python_calls(build) < 10 * 100  # about 6 a chunk
