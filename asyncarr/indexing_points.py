"""Pointwise selections -> per-chunk projections: NumPy advanced indexing over a chunk grid.

Coordinate selection (``a[idx0, idx1, ...]``), mask selection (``a[mask]``) and NumPy's
general advanced indexing (index arrays and masks broadcast together, mixed with slices)
cannot be a product of per-axis selections: the selected points are grouped by chunk
instead (one ``np.ravel_multi_index`` of their chunk coordinates and one stable argsort),
so each touched chunk is one ``ChunkProjection``, however many points fall in it.

The buffer. A pointwise indexer's projections fill a *buffer* of ``indexer.buffer_shape``,
not the result: the buffer holds the selected points along one axis, in selection order,
where the result has NumPy's broadcast shape. The array layer allocates
``np.empty(indexer.buffer_shape)``, runs ``out[p.out_selection] = chunk[p.chunk_selection]``
for every projection, and returns ``indexer.finalize(out)`` (a reshape, no copy). A write
lays its value out with ``indexer.value_buffer(value)`` and runs
``chunk[p.chunk_selection] = value[p.out_selection]``. The basic and orthogonal indexers
have the same three names (there the buffer is the result), so one code path serves all.

In a projection, ``chunk_selection`` holds, per pointwise axis, the points' positions inside
the chunk (1-D integer arrays, all of one length, in selection order) and chunk slices on the
other axes; ``out_selection`` holds the points' positions in the buffer (a slice, or an
index array when the points were reordered) and the output slices of the other axes. Points
keep their selection order inside a chunk, so of repeated points the last one wins a write,
as in NumPy.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from typing import Any, Self

import numpy as np

from .indexing import (
    _INVALID_INDEX_MESSAGE,
    BasicIndexer,
    ChunkProjection,
    OrthogonalIndexer,
    SliceDimIndexer,
    _check_grid,
    _is_int,
    _normalize_items,
)

__all__ = ["AdvancedIndexer", "CoordinateIndexer", "Indexer", "MaskIndexer", "indexer_for"]


class AdvancedIndexer:
    """NumPy advanced indexing: integer arrays and masks broadcast together, mixed with slices.

    The result's ``shape`` is NumPy's. The projections write into a *buffer* of
    ``buffer_shape``, which holds all selected points along one axis (in selection order)
    where the result holds the broadcast shape; ``finalize(buffer)`` reshapes it into the
    result (a view) and ``value_buffer(value)`` lays a write's value out the same way.
    """

    def __init__(self, selection: Any, shape: tuple[int, ...], chunks: tuple[int, ...]) -> None:
        """Normalize ``selection`` (NumPy's rules) for an array of ``shape`` split into ``chunks``."""
        shape, chunks = tuple(shape), tuple(chunks)
        _check_grid(shape, chunks)
        items = _normalize_items(selection, shape, accept_arrays=True, masks_span_axes=True)
        self._build(_expand_masks(items, shape), shape, chunks, _advanced_indices_adjacent(selection))

    @classmethod
    def _from_items(
        cls, items: Sequence[Any], shape: tuple[int, ...], chunks: tuple[int, ...], adjacent: bool = True
    ) -> Self:
        indexer = cls.__new__(cls)
        indexer._build(items, shape, chunks, adjacent)
        return indexer

    def _build(
        self, items: Sequence[Any], shape: tuple[int, ...], chunks: tuple[int, ...], adjacent: bool = True
    ) -> None:
        """Group the selected points by chunk; ``items`` holds one int, slice or int array per axis.

        NumPy puts the broadcast axes where the advanced indices (arrays, and integers among
        them) are when those are ``adjacent`` in the selection as written, first otherwise.
        """
        self._dim_lens, self.chunks = shape, chunks
        point_axes = self._point_axes = [axis for axis, item in enumerate(items) if not isinstance(item, slice)]
        self._slice_axes = [axis for axis, item in enumerate(items) if isinstance(item, slice)]
        # NumPy reports a bad slice before a bad integer, and that before unbroadcastable arrays.
        self._slice_dims = [SliceDimIndexer(items[axis], shape[axis], chunks[axis]) for axis in self._slice_axes]
        arrays = [np.asarray(items[axis]) for axis in point_axes]
        for array, axis in zip(arrays, point_axes, strict=True):
            if array.ndim == 0:
                _wrapped_indices(array, shape[axis], axis)
        try:
            point_shape = np.broadcast_shapes(*(array.shape for array in arrays))
        except ValueError:
            shapes = " ".join(str(array.shape) for array in arrays)
            raise IndexError(
                f"shape mismatch: indexing arrays could not be broadcast together with shapes {shapes}"
            ) from None
        self.npoints = npoints = math.prod(point_shape)
        # NumPy checks only the indices it uses: none when the arrays broadcast to nothing.
        coords = [
            np.broadcast_to(_wrapped_indices(array, shape[axis], axis), point_shape).reshape(-1)
            if npoints
            else np.zeros(0, dtype=np.intp)
            for array, axis in zip(arrays, point_axes, strict=True)
        ]
        self._group_points(coords, npoints)

        slice_lens = tuple(dim.nitems for dim in self._slice_dims)
        # In a chunk, NumPy sees the point arrays adjacent exactly when their axes are; only an
        # Ellipsis standing for no axis makes the written selection differ, and then the
        # buffer's points axis moves to the front in `finalize`.
        axes_adjacent = not point_axes or point_axes[-1] - point_axes[0] + 1 == len(point_axes)
        at = sum(axis < point_axes[0] for axis in self._slice_axes) if point_axes and axes_adjacent else 0
        self._points_position = at
        self._points_moved = not adjacent and at != 0
        self._point_shape = tuple(point_shape)
        result_at = 0 if self._points_moved else at
        self.shape: tuple[int, ...] = slice_lens[:result_at] + self._point_shape + slice_lens[result_at:]
        points_axis = (npoints,) if point_axes else ()
        self.buffer_shape: tuple[int, ...] = slice_lens[:at] + points_axis + slice_lens[at:]
        self.nchunks: int = len(self._group_coords) * math.prod(dim.nchunks for dim in self._slice_dims)

    def _group_points(self, coords: list[np.ndarray], npoints: int) -> None:
        """Sort the points by chunk (stably) and find, per chunk, its points and whether they cover it."""
        point_chunks = [self.chunks[axis] for axis in self._point_axes]
        dim_lens = [self._dim_lens[axis] for axis in self._point_axes]
        chunk_coords = [c // n for c, n in zip(coords, point_chunks, strict=True)]
        within = [c - cc * n for c, cc, n in zip(coords, chunk_coords, point_chunks, strict=True)]
        chunk_ids = _chunk_ids(chunk_coords, [math.ceil(d / n) for d, n in zip(dim_lens, point_chunks, strict=True)])
        self._order: np.ndarray | None = None
        if npoints > 1 and bool(np.any(chunk_ids[1:] < chunk_ids[:-1])):
            self._order = _stable_order(chunk_ids)
            chunk_ids = chunk_ids[self._order]
            within = [w[self._order] for w in within]
        self._within = within
        starts = np.flatnonzero(np.diff(chunk_ids)) + 1 if npoints else np.zeros(0, dtype=np.intp)
        group_starts = np.concatenate([[0], starts]) if npoints else starts
        self._edges = [*group_starts.tolist(), npoints]
        first_points = group_starts if self._order is None else self._order[group_starts]
        group_coords = [cc[first_points] for cc in chunk_coords]
        self._group_coords = list(zip(*(c.tolist() for c in group_coords), strict=True)) or [()] * len(group_starts)
        # Elements of each chunk inside the array; a chunk with fewer points is not covered.
        needed = np.ones(len(group_starts), dtype=np.int64)
        for c, n, d in zip(group_coords, point_chunks, dim_lens, strict=True):
            needed *= np.minimum(n, d - c * n)
        counts = np.diff(self._edges)
        complete = counts >= needed
        chunk_size = math.prod(point_chunks)
        if within and complete.any():
            # Distinct points per candidate chunk, from one sort of (chunk number, place in chunk).
            group_of_point = np.repeat(np.arange(len(counts)), counts)
            candidate = complete[group_of_point]
            local = np.ravel_multi_index([w[candidate] for w in within], point_chunks)
            if len(counts) * chunk_size <= np.iinfo(np.int64).max:
                keys = np.sort(group_of_point[candidate] * chunk_size + local)
                # Sorting, not np.unique: NumPy 2's hash-based unique is many times slower here.
                distinct = keys[np.concatenate([[True], keys[1:] != keys[:-1]])]
                complete &= np.bincount(distinct // chunk_size, minlength=len(counts)) == needed
            else:
                pairs = np.unique(np.stack([group_of_point[candidate], local], axis=1), axis=0)
                complete &= np.bincount(pairs[:, 0], minlength=len(counts)) == needed
        self._complete = complete.tolist()

    def finalize(self, buffer: np.ndarray) -> np.ndarray:
        """The result (shape ``shape``) from the filled buffer (shape ``buffer_shape``), as a view."""
        if not self._points_moved:
            return buffer.reshape(self.shape)
        at, point_ndim = self._points_position, len(self._point_shape)
        grouped = buffer.reshape(self.buffer_shape[:at] + self._point_shape + self.buffer_shape[at + 1 :])
        return np.moveaxis(grouped, range(at, at + point_ndim), range(point_ndim))

    def value_buffer(self, value: np.ndarray) -> np.ndarray:
        """A write's value broadcast to ``shape`` and laid out like the buffer; 0-d values stay 0-d."""
        value = np.asarray(value)
        if value.ndim == 0:
            return value
        value = np.broadcast_to(value, self.shape)
        if self._points_moved:
            at, point_ndim = self._points_position, len(self._point_shape)
            value = np.moveaxis(value, range(point_ndim), range(at, at + point_ndim))
        return value.reshape(self.buffer_shape)

    def __iter__(self) -> Iterator[ChunkProjection]:
        """Yield one projection per touched chunk."""
        ndim, point_axes, slice_axes = len(self._dim_lens), self._point_axes, self._slice_axes
        slice_projections = [list(dim) for dim in self._slice_dims]
        groups = zip(itertools.pairwise(self._edges), self._group_coords, self._complete, strict=True)
        for (lo, hi), group_coords, points_complete in groups:
            within = tuple(w[lo:hi] for w in self._within)
            points_out = slice(lo, hi) if self._order is None else self._order[lo:hi]
            if not slice_axes:
                # Points on every axis (coordinate and mask selections): the common, fast case.
                out = (points_out,) if point_axes else ()
                yield ChunkProjection(group_coords, within, out, points_complete)
                continue
            for slice_part in itertools.product(*slice_projections):
                chunk_coords: list[int] = [0] * ndim
                chunk_selection: list[Any] = [None] * ndim
                for axis, c, w in zip(point_axes, group_coords, within, strict=True):
                    chunk_coords[axis], chunk_selection[axis] = c, w
                for axis, p in zip(slice_axes, slice_part, strict=True):
                    chunk_coords[axis], chunk_selection[axis] = p.dim_chunk_index, p.dim_chunk_selection
                out_selection: list[Any] = [p.dim_out_selection for p in slice_part]
                if point_axes:
                    out_selection.insert(self._points_position, points_out)
                complete = points_complete and all(p.is_complete for p in slice_part)
                yield ChunkProjection(tuple(chunk_coords), tuple(chunk_selection), tuple(out_selection), complete)


class CoordinateIndexer(AdvancedIndexer):
    """Pointwise selection ``a[idx0, idx1, ...]``: one integer or integer array per axis, broadcast.

    A single boolean mask of the array's shape is accepted too, as its ``np.nonzero``.
    """

    def __init__(self, selection: Any, shape: tuple[int, ...], chunks: tuple[int, ...]) -> None:
        """Check ``selection`` holds one integer (array) per axis, then group its points by chunk."""
        shape, chunks = tuple(shape), tuple(chunks)
        _check_grid(shape, chunks)
        items = selection if isinstance(selection, tuple) else (selection,)
        if len(items) == 1 and len(shape) > 0 and _is_bool_array(items[0]):
            self._build(_mask_items(items[0], shape), shape, chunks)
            return
        if len(items) != len(shape):
            raise IndexError(
                f"coordinate selection needs one integer array per dimension: the array is "
                f"{len(shape)}-dimensional, but {len(items)} were given"
            )
        self._build([_coordinate_item(item, axis) for axis, item in enumerate(items)], shape, chunks)


class MaskIndexer(AdvancedIndexer):
    """Pointwise selection by a boolean mask of the array's full shape (``a[mask]``)."""

    def __init__(self, selection: Any, shape: tuple[int, ...], chunks: tuple[int, ...]) -> None:
        """Check the mask's shape and dtype, then select where it is true."""
        shape, chunks = tuple(shape), tuple(chunks)
        _check_grid(shape, chunks)
        if isinstance(selection, tuple):
            if len(selection) != 1:
                raise IndexError(f"mask selection takes one boolean array; got {len(selection)} items")
            selection = selection[0]
        self._build(_mask_items(selection, shape), shape, chunks)


def _is_bool_array(item: Any) -> bool:
    return isinstance(item, np.ndarray | list) and np.asarray(item).dtype.kind == "b"


def _mask_items(mask: Any, shape: tuple[int, ...]) -> list[np.ndarray]:
    """The coordinates a full-shape boolean mask selects; IndexError for any other array."""
    if not isinstance(mask, np.ndarray | list):
        raise IndexError(f"mask selection needs a boolean array; got {type(mask).__name__}")
    array = np.asarray(mask)
    if array.dtype.kind != "b":
        raise IndexError(f"mask selection needs a boolean array; got dtype {array.dtype}")
    if array.shape != shape or not shape:
        raise IndexError(f"mask selection needs a boolean array of the array's shape {shape}; got shape {array.shape}")
    return list(np.nonzero(array))


def _coordinate_item(item: Any, axis: int) -> int | np.ndarray:
    """One axis of a coordinate selection: an integer or an integer array of any shape."""
    if isinstance(item, slice) or item is Ellipsis or item is None:
        raise IndexError(
            f"coordinate selection takes integers and integer arrays only; got {item!r} on axis {axis}. "
            "Use oindex (or z[...]) to combine slices with index arrays"
        )
    if _is_int(item):
        return int(item)
    try:
        array = np.asarray(item)
    except ValueError:
        raise IndexError(_INVALID_INDEX_MESSAGE) from None
    if array.dtype.kind == "b":
        raise IndexError(
            f"coordinate selection takes integer arrays; got a boolean array on axis {axis}. "
            "Pass one mask of the array's full shape, or use oindex for a mask along one axis"
        )
    if array.size == 0 and array.dtype.kind not in "iu" and not isinstance(item, np.ndarray):
        array = array.astype(np.intp)  # an empty list: NumPy's empty integer index
    if array.dtype.kind not in "iu":
        raise IndexError(_INVALID_INDEX_MESSAGE)
    return array


def _expand_masks(items: Sequence[int | slice | np.ndarray], shape: tuple[int, ...]) -> list[int | slice | np.ndarray]:
    """Replace each boolean array by the integer arrays of its ``np.nonzero`` (one per axis it covers)."""
    expanded: list[int | slice | np.ndarray] = []
    for item in items:
        axis = len(expanded)
        if isinstance(item, np.ndarray) and item.dtype.kind == "b":
            for offset, (mask_len, dim_len) in enumerate(zip(item.shape, shape[axis:], strict=False)):
                # NumPy lets a mask axis of length 0 stand against an axis of any length.
                if mask_len not in (dim_len, 0):
                    raise IndexError(
                        f"boolean index did not match indexed array along axis {axis + offset}; "
                        f"size of axis is {dim_len} but size of corresponding boolean axis is {mask_len}"
                    )
            expanded.extend(np.nonzero(item))
        else:
            expanded.append(item)
    return expanded


def _wrapped_indices(array: np.ndarray, dim_len: int, axis: int) -> np.ndarray:
    """The indices as ``intp``, negatives counted from the end; IndexError if any is out of bounds."""
    if array.dtype.kind == "u":
        out_of_bounds = array >= dim_len
    else:
        out_of_bounds = (array < -dim_len) | (array >= dim_len)
    if out_of_bounds.any():
        bad = array.reshape(-1)[np.argmax(out_of_bounds)]
        raise IndexError(f"index {bad} is out of bounds for axis {axis} with size {dim_len}")
    indices = array.astype(np.intp, copy=False)
    if array.dtype.kind == "u" or array.size == 0 or indices.min() >= 0:
        return indices
    return np.where(indices < 0, indices + dim_len, indices)


def _stable_order(chunk_ids: np.ndarray) -> np.ndarray:
    """The permutation sorting points by chunk that keeps each chunk's points in selection order.

    Stable, so that of repeated points the last one still wins a write, as in NumPy. NumPy's
    stable sort is a radix sort for 16-bit keys and a much slower merge sort for wider ones;
    wider keys get the point's position appended, which makes every key unique, so the fast
    unstable sort gives the stable order.
    """
    npoints = len(chunk_ids)
    largest = int(chunk_ids.max())
    if largest <= np.iinfo(np.uint16).max:
        return np.argsort(chunk_ids.astype(np.uint16), kind="stable")
    if largest < np.iinfo(np.int64).max // npoints:
        return np.argsort(chunk_ids.astype(np.int64) * npoints + np.arange(npoints))
    return np.argsort(chunk_ids, kind="stable")


def _chunk_ids(chunk_coords: list[np.ndarray], grid: list[int]) -> np.ndarray:
    """A number per point that orders chunks like C order of their coordinates."""
    if not chunk_coords:
        return np.zeros(1, dtype=np.intp)
    if len(chunk_coords[0]) == 0:
        return np.zeros(0, dtype=np.intp)
    if math.prod(grid) <= np.iinfo(np.intp).max:
        return np.ravel_multi_index(chunk_coords, grid)
    # A grid too large to number: number the distinct chunks instead (np.unique sorts them).
    return np.unique(np.stack(chunk_coords, axis=1), axis=0, return_inverse=True)[1].reshape(-1)


Indexer = BasicIndexer | OrthogonalIndexer | AdvancedIndexer


def indexer_for(selection: Any, shape: tuple[int, ...], chunks: tuple[int, ...]) -> Indexer:
    """The indexer for ``z[selection]`` with NumPy's semantics, whichever kind of selection it is.

    No index arrays: ``BasicIndexer``. One 1-D integer array or mask on one axis, whose
    result NumPy lays out as an orthogonal selection would: ``OrthogonalIndexer``. One
    mask of the full shape: ``MaskIndexer``. Only integers and arrays: ``CoordinateIndexer``.
    Anything else (several arrays among slices, arrays of several dimensions, masks over
    some axes): ``AdvancedIndexer``, which also moves the broadcast axes first where NumPy does.
    """
    shape, chunks = tuple(shape), tuple(chunks)
    _check_grid(shape, chunks)
    items = _normalize_items(selection, shape, accept_arrays=True, masks_span_axes=True)
    array_axes = [axis for axis, item in enumerate(items) if isinstance(item, np.ndarray)]
    if not array_axes:
        return BasicIndexer.from_items(items, shape, chunks)
    expanded = _expand_masks(items, shape)
    adjacent = _advanced_indices_adjacent(selection)
    (array_axis, *others) = array_axes
    # One 1-D array keeps its place in NumPy's result unless it moves first past a slice.
    keeps_place = adjacent or not any(isinstance(item, slice) for item in items[:array_axis])
    if not others and items[array_axis].ndim == 1 and keeps_place:
        # NumPy checks the integers and slices left to right and the first bad one wins (an
        # out-of-range int is an IndexError, a float slice bound a TypeError); the orthogonal
        # indexer checks the array axis before the others, so check here first.
        for axis, (item, dim_len) in enumerate(zip(items, shape, strict=True)):
            if isinstance(item, slice):
                item.indices(dim_len)
            elif isinstance(item, int | np.integer) and not -dim_len <= item < dim_len:
                raise IndexError(f"index {item} is out of bounds for axis {axis} with size {dim_len}")
        return OrthogonalIndexer(tuple(items), shape, chunks)
    if len(items) == 1 and items[0].dtype.kind == "b":
        return MaskIndexer._from_items(expanded, shape, chunks)
    if not any(isinstance(item, slice) for item in expanded):
        return CoordinateIndexer._from_items(expanded, shape, chunks)
    return AdvancedIndexer._from_items(expanded, shape, chunks, adjacent)


def _advanced_indices_adjacent(selection: Any) -> bool:
    """Whether no slice or Ellipsis separates the advanced indices in the selection as written.

    NumPy decides by the written items: ``a[:, 0, ..., [0]]`` puts the broadcast axes first
    even where the Ellipsis stands for no axis at all.
    """
    items = selection if isinstance(selection, tuple) else (selection,)
    advanced = [at for at, item in enumerate(items) if not isinstance(item, slice) and item is not Ellipsis]
    return not advanced or advanced[-1] - advanced[0] + 1 == len(advanced)
