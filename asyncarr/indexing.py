"""Selections -> per-chunk projections: which chunks a selection touches and where each piece goes.

Design. A selection is normalized into one *dimension indexer* per array axis. Each dimension
indexer knows its output length (``nitems``), whether it drops its axis (an integer index),
how many chunks it touches along its axis (``nchunks``), and iterates ``DimProjection``
tuples ``(dim_chunk_index, dim_chunk_selection, dim_out_selection, is_complete)``, one per
touched chunk, in ascending chunk order. An array indexer is the Cartesian product of its
dimension indexers (``itertools.product``), so the per-chunk work is per touched chunk,
never per element. Kinds of dimension indexer:

- ``IntDimIndexer``: one integer; drops its axis (``dim_out_selection`` is None).
- ``SliceDimIndexer``: a slice with any step. A descending selection (negative step) is
  mapped per chunk to the equivalent ascending chunk slice (positive step) and written
  into the output through a reversed slice, whose stop is None where it runs to index 0.
- ``IntArrayDimIndexer`` / ``BoolArrayDimIndexer``: integer arrays (any order, repeats
  allowed) and boolean masks along one axis, for ``OrthogonalIndexer``. Chunk and output
  selections are then index arrays; where NumPy would combine several advanced indices
  pointwise, the projection is expanded with ``np.ix_`` so that plain
  ``out[p.out_selection] = chunk[p.chunk_selection]`` is still orthogonal.

Coordinate and mask selections and NumPy's general advanced indexing (``indexer_for``, the
dispatcher behind ``z[...]``) live in ``indexing_points.py``: they group points by chunk.

The protocol every indexer follows: ``indexer.shape`` is the result shape; for each
projection ``p``, ``out[p.out_selection] = chunk[p.chunk_selection]`` fills the result
from the full chunk array (``chunk.shape == chunks``, even for edge chunks), and a write of
``value`` broadcast to ``indexer.shape`` does ``chunk[p.chunk_selection] = value[p.out_selection]``.
Pointwise indexers fill a buffer of ``indexer.buffer_shape`` that ``indexer.finalize`` turns
into the result, and lay a write's value out with ``indexer.value_buffer``; here these are
the identity, so one code path in the array layer serves every indexer.

Boolean scalars (``z[True]``) are rejected with ``IndexError``: NumPy reads them as a
new-axis mask, which a Zarr array cannot represent. ``None`` (newaxis) is rejected too.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import numpy as np

__all__ = [
    "BasicIndexer",
    "BoolArrayDimIndexer",
    "ChunkProjection",
    "DimIndexer",
    "DimProjection",
    "IntArrayDimIndexer",
    "IntDimIndexer",
    "OrthogonalIndexer",
    "SliceDimIndexer",
    "block_result",
    "block_selection_slices",
    "side_by_side_chunks",
]

_INVALID_INDEX_MESSAGE = (
    "only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) "
    "and integer or boolean arrays are valid indices"
)


@dataclass(slots=True)  # not frozen: a frozen dataclass sets each field through object.__setattr__,
class ChunkProjection:  # 1.4 ms for W2's 4096 chunks against 0.4 (each read or write makes them anew)
    """How one chunk contributes to a selection: what to take from it and where it goes (never
    changed once made)."""

    chunk_coords: tuple[int, ...]
    # Applied to the full chunk array (shape == chunks, even for a chunk on the array's edge).
    chunk_selection: tuple[int | slice | np.ndarray, ...]
    # Where those elements go in the output; integer-indexed axes are already dropped.
    out_selection: tuple[slice | np.ndarray, ...]
    # The selection covers every in-bounds element of the chunk: a write needs no read first.
    is_complete_chunk: bool


class DimProjection(NamedTuple):
    """How one chunk along one axis contributes to that axis of the selection."""

    dim_chunk_index: int
    dim_chunk_selection: int | slice | np.ndarray
    # None: the axis is dropped from the output (integer index).
    dim_out_selection: slice | np.ndarray | None
    is_complete: bool


class DimIndexer(Protocol):
    """The per-axis half of an indexer: the chunks one axis selection touches."""

    nitems: int
    nchunks: int
    drops_axis: bool

    def __iter__(self) -> Iterator[DimProjection]: ...


def _chunk_extent(dim_chunk_index: int, dim_len: int, dim_chunk_len: int) -> int:
    """How many elements of the chunk lie inside the array along this axis."""
    return min(dim_chunk_len, dim_len - dim_chunk_index * dim_chunk_len)


class IntDimIndexer:
    """One integer along one axis (negative counts from the end); the axis is dropped."""

    drops_axis = True
    nitems = 1
    nchunks = 1

    def __init__(self, dim_sel: int, dim_len: int, dim_chunk_len: int, axis: int = 0) -> None:
        """Check the index against the axis length, as NumPy does."""
        index = dim_sel + dim_len if dim_sel < 0 else dim_sel
        if not 0 <= index < dim_len:
            raise IndexError(f"index {dim_sel} is out of bounds for axis {axis} with size {dim_len}")
        self.index = index
        self.dim_len = dim_len
        self.dim_chunk_len = dim_chunk_len

    def __iter__(self) -> Iterator[DimProjection]:
        """Yield the single chunk holding the index."""
        chunk_index, offset = divmod(self.index, self.dim_chunk_len)
        complete = _chunk_extent(chunk_index, self.dim_len, self.dim_chunk_len) == 1
        yield DimProjection(chunk_index, offset, None, complete)


class SliceDimIndexer:
    """A slice with any step along one axis; descending slices map to ascending chunk slices."""

    drops_axis = False

    def __init__(self, dim_sel: slice, dim_len: int, dim_chunk_len: int) -> None:
        """Resolve the slice against the axis length (TypeError/ValueError as for NumPy)."""
        start, stop, step = dim_sel.indices(dim_len)
        nitems = len(range(start, stop, step))
        self.nitems = nitems
        self.dim_len = dim_len
        self.dim_chunk_len = dim_chunk_len
        self.descending = step < 0
        # The same elements in ascending order: first index and positive step.
        self.first = start + (nitems - 1) * step if self.descending else start
        self.step = -step if self.descending else step
        if nitems == 0:
            self.nchunks = 0
        elif self.step >= dim_chunk_len:
            # Consecutive elements are at least a chunk apart: each one in its own chunk.
            self.nchunks = nitems
        else:
            last = self.first + (nitems - 1) * self.step
            self.nchunks = last // dim_chunk_len - self.first // dim_chunk_len + 1

    def _projection(self, chunk_index: int, lo: int, hi: int) -> DimProjection:
        """The projection for ascending element numbers ``lo:hi``, which lie in ``chunk_index``."""
        chunk_start = chunk_index * self.dim_chunk_len
        first_in_chunk = self.first + lo * self.step - chunk_start
        last_in_chunk = self.first + (hi - 1) * self.step - chunk_start
        chunk_sel = slice(first_in_chunk, last_in_chunk + 1, self.step)
        if not self.descending:
            out_sel = slice(lo, hi)
        elif hi - lo == 1:
            out_sel = slice(self.nitems - 1 - lo, self.nitems - lo)
        else:
            # Ascending element j goes to output position nitems - 1 - j.
            out_stop = self.nitems - hi - 1
            out_sel = slice(self.nitems - 1 - lo, out_stop if out_stop >= 0 else None, -1)
        complete = hi - lo == _chunk_extent(chunk_index, self.dim_len, self.dim_chunk_len)
        return DimProjection(chunk_index, chunk_sel, out_sel, complete)

    def __iter__(self) -> Iterator[DimProjection]:
        """Yield one projection per touched chunk, in ascending chunk order."""
        if self.nitems == 0:
            return
        first, step, nitems, chunk_len = self.first, self.step, self.nitems, self.dim_chunk_len
        if step >= chunk_len:
            for element in range(nitems):
                yield self._projection((first + element * step) // chunk_len, element, element + 1)
            return
        last = first + (nitems - 1) * step
        for chunk_index in range(first // chunk_len, last // chunk_len + 1):
            chunk_start = chunk_index * chunk_len
            chunk_stop = min(chunk_start + chunk_len, self.dim_len)
            # Element numbers j with chunk_start <= first + j * step < chunk_stop (ceil divisions).
            lo = max(0, -((first - chunk_start) // step))
            hi = min(nitems, -((first - chunk_stop) // step))
            yield self._projection(chunk_index, lo, hi)


class IntArrayDimIndexer:
    """A 1-D integer array along one axis: any order, repeats allowed, negative from the end."""

    drops_axis = False

    def __init__(self, dim_sel: np.ndarray, dim_len: int, dim_chunk_len: int, axis: int = 0) -> None:
        """Check the indices against the axis length and group them by chunk."""
        indices = np.asarray(dim_sel)
        if indices.ndim != 1:
            raise IndexError(f"orthogonal selection needs 1-D index arrays; got {indices.ndim}-D on axis {axis}")
        indices = indices.astype(np.intp, copy=True)
        out_of_bounds = (indices < -dim_len) | (indices >= dim_len)
        if out_of_bounds.any():
            bad = int(indices[np.argmax(out_of_bounds)])
            raise IndexError(f"index {bad} is out of bounds for axis {axis} with size {dim_len}")
        indices[indices < 0] += dim_len
        self.nitems = len(indices)
        self.dim_len = dim_len
        self.dim_chunk_len = dim_chunk_len
        chunk_indices = indices // dim_chunk_len
        if np.all(chunk_indices[1:] >= chunk_indices[:-1]):
            self.order: np.ndarray | None = None
        else:
            # Stable, so that of repeated indices the last one still wins a write.
            self.order = np.argsort(chunk_indices, kind="stable")
            indices = indices[self.order]
            chunk_indices = chunk_indices[self.order]
        self.indices = indices
        self.chunk_indices = chunk_indices
        self.boundaries = np.flatnonzero(np.diff(chunk_indices)) + 1
        self.nchunks = 0 if self.nitems == 0 else len(self.boundaries) + 1

    def __iter__(self) -> Iterator[DimProjection]:
        """Yield one projection per touched chunk, in ascending chunk order."""
        if self.nitems == 0:
            return
        edges = [0, *self.boundaries.tolist(), self.nitems]
        for lo, hi in itertools.pairwise(edges):
            chunk_index = int(self.chunk_indices[lo])
            chunk_sel = self.indices[lo:hi] - chunk_index * self.dim_chunk_len
            out_sel = slice(lo, hi) if self.order is None else self.order[lo:hi]
            extent = _chunk_extent(chunk_index, self.dim_len, self.dim_chunk_len)
            complete = hi - lo >= extent and len(np.unique(chunk_sel)) == extent
            yield DimProjection(chunk_index, chunk_sel, out_sel, complete)


class BoolArrayDimIndexer(IntArrayDimIndexer):
    """A boolean mask along one axis, the length of that axis."""

    def __init__(self, dim_sel: np.ndarray, dim_len: int, dim_chunk_len: int, axis: int = 0) -> None:
        """Check the mask length and select where it is true."""
        mask = np.asarray(dim_sel)
        # NumPy takes an empty mask against an axis of any length (it selects nothing).
        if mask.ndim != 1 or len(mask) not in (dim_len, 0):
            raise IndexError(
                f"boolean index did not match indexed array along axis {axis}; "
                f"size of axis is {dim_len} but size of corresponding boolean axis is {mask.size}"
            )
        super().__init__(np.flatnonzero(mask), dim_len, dim_chunk_len, axis)


def _check_grid(shape: tuple[int, ...], chunks: tuple[int, ...]) -> None:
    if len(chunks) != len(shape):
        raise ValueError(f"chunks {chunks} and shape {shape} have different numbers of dimensions")
    if any(chunk_len < 1 for chunk_len in chunks):
        raise ValueError(f"chunk lengths must be positive; got {chunks}")


def _is_int(item: Any) -> bool:
    """True for Python and NumPy integers (not bools)."""
    return isinstance(item, int | np.integer) and not isinstance(item, bool)


def _normalize_items(
    selection: Any, shape: tuple[int, ...], accept_arrays: bool, masks_span_axes: bool = False
) -> list[int | slice | np.ndarray]:
    """Expand a selection to one item per axis, raising what NumPy raises for a bad one.

    With ``masks_span_axes`` a boolean array covers as many axes as it has dimensions (NumPy's
    rule), so the list holds one item per axis only once such masks are expanded.
    """
    items = selection if isinstance(selection, tuple) else (selection,)
    normalized: list[Any] = []
    has_ellipsis = False
    for item in items:
        if item is Ellipsis:
            if has_ellipsis:
                raise IndexError("an index can only have a single ellipsis ('...')")
            has_ellipsis = True
            normalized.append(item)
        elif isinstance(item, slice):
            normalized.append(item)
        elif item is None:
            raise IndexError("newaxis (None) is not supported in array selections")
        elif isinstance(item, bool | np.bool_):
            raise IndexError("boolean scalar indexing is not supported")
        elif _is_int(item):
            normalized.append(int(item))
        elif isinstance(item, np.ndarray | list):
            normalized.append(_normalize_array_item(item, accept_arrays))
        else:
            try:
                normalized.append(operator.index(item))
            except TypeError:
                raise IndexError(_INVALID_INDEX_MESSAGE) from None
    nindexed = sum(
        item.ndim if masks_span_axes and isinstance(item, np.ndarray) and item.dtype.kind == "b" else 1
        for item in normalized
        if item is not Ellipsis
    )
    if nindexed > len(shape):
        raise IndexError(f"too many indices for array: array is {len(shape)}-dimensional, but {nindexed} were indexed")
    fill = [slice(None)] * (len(shape) - nindexed)
    if not has_ellipsis:
        return normalized + fill
    # By identity: `list.index` would compare index arrays with `==`.
    at = next(position for position, item in enumerate(normalized) if item is Ellipsis)
    return normalized[:at] + fill + normalized[at + 1 :]


def _normalize_array_item(item: np.ndarray | list, accept_arrays: bool) -> int | np.ndarray:
    """A 0-d integer array is an integer; other arrays only in orthogonal selections."""
    array = np.asarray(item)
    if array.ndim == 0 and array.dtype.kind in "iu":
        return int(array)
    if array.dtype.kind == "b" and array.ndim == 0:
        raise IndexError("boolean scalar indexing is not supported")
    if not accept_arrays:
        raise IndexError(
            "basic selection takes integers, slices and Ellipsis; "
            "use an orthogonal selection (oindex) for index arrays and masks"
        )
    if array.size == 0 and array.dtype.kind not in "iub" and not isinstance(item, np.ndarray):
        # An empty list is an empty integer index to NumPy; an empty float array is an error.
        array = array.astype(np.intp)
    if array.dtype.kind not in "iub":
        raise IndexError("arrays used as indices must be of integer (or boolean) type")
    return array


class _GridIndexer:
    """Combines one dimension indexer per axis into chunk projections (C order of chunk coords)."""

    def __init__(self, dim_indexers: Sequence[DimIndexer], chunks: tuple[int, ...], needs_ix: bool = False) -> None:
        self.dim_indexers = tuple(dim_indexers)
        self.chunks = chunks
        # Selections NumPy would not combine orthogonally are expanded with np.ix_.
        self._needs_ix = needs_ix
        self.shape: tuple[int, ...] = tuple(dim.nitems for dim in self.dim_indexers if not dim.drops_axis)
        self.nchunks: int = math.prod(dim.nchunks for dim in self.dim_indexers)
        self._kept_axes = [axis for axis, dim in enumerate(self.dim_indexers) if not dim.drops_axis]
        self.buffer_shape: tuple[int, ...] = self.shape

    def finalize(self, buffer: np.ndarray) -> np.ndarray:
        """The result from the filled buffer: here the buffer is the result."""
        return buffer

    def value_buffer(self, value: np.ndarray) -> np.ndarray:
        """A value broadcast to ``shape``, laid out like the buffer: here unchanged."""
        return value

    def __iter__(self) -> Iterator[ChunkProjection]:
        """Yield one projection per touched chunk, in C order of chunk coordinates."""
        if self.nchunks == 1:
            # One chunk (a point, or a small window): most small reads, built without products.
            only = [next(iter(dim)) for dim in self.dim_indexers]
            chunk_selection = tuple(p.dim_chunk_selection for p in only)
            out_selection = tuple(only[axis].dim_out_selection for axis in self._kept_axes)
            if self._needs_ix:
                chunk_selection, out_selection = _ix(chunk_selection, self.chunks), _ix(out_selection, self.shape)
            coords = tuple(p.dim_chunk_index for p in only)
            yield ChunkProjection(coords, chunk_selection, out_selection, all(p.is_complete for p in only))
            return
        per_dim = [list(dim) for dim in self.dim_indexers]
        # One product per field keeps the per-chunk work in C; the single projection of a
        # dropped axis does not change the order, so its out product can simply omit it.
        coords = itertools.product(*([p.dim_chunk_index for p in dim] for dim in per_dim))
        chunk_selections = itertools.product(*([p.dim_chunk_selection for p in dim] for dim in per_dim))
        out_selections = itertools.product(*([p.dim_out_selection for p in per_dim[axis]] for axis in self._kept_axes))
        completes = itertools.product(*([p.is_complete for p in dim] for dim in per_dim))
        if not self._needs_ix:
            # map() in C rather than a loop in this generator: W2's 4096 projections in 0.91 ms, not 1.0.
            yield from map(ChunkProjection, coords, chunk_selections, out_selections, map(all, completes))
            return
        chunks, shape = self.chunks, self.shape
        for chunk_coords, chunk_selection, out_selection, complete in zip(
            coords, chunk_selections, out_selections, completes, strict=True
        ):
            yield ChunkProjection(chunk_coords, _ix(chunk_selection, chunks), _ix(out_selection, shape), all(complete))


class BasicIndexer(_GridIndexer):
    """NumPy basic indexing (ints, slices with any step, Ellipsis) over a chunk grid."""

    def __init__(self, selection: Any, shape: tuple[int, ...], chunks: tuple[int, ...]) -> None:
        """Normalize ``selection`` for an array of ``shape`` split into ``chunks``."""
        shape, chunks = tuple(shape), tuple(chunks)
        _check_grid(shape, chunks)
        self._index_axes(_normalize_items(selection, shape, accept_arrays=False), shape, chunks)

    @classmethod
    def from_items(cls, items: Sequence[int | slice], shape: tuple[int, ...], chunks: tuple[int, ...]) -> BasicIndexer:
        """The indexer for a selection already normalized to one int or slice per axis, grid checked."""
        indexer = cls.__new__(cls)
        indexer._index_axes(items, shape, chunks)
        return indexer

    def _index_axes(self, items: Sequence[int | slice], shape: tuple[int, ...], chunks: tuple[int, ...]) -> None:
        dims: list[DimIndexer] = []
        for axis, (item, dim_len, chunk_len) in enumerate(zip(items, shape, chunks, strict=True)):
            if isinstance(item, slice):
                dims.append(SliceDimIndexer(item, dim_len, chunk_len))
            else:
                dims.append(IntDimIndexer(item, dim_len, chunk_len, axis))
        super().__init__(dims, chunks)


class OrthogonalIndexer(_GridIndexer):
    """Orthogonal (outer) indexing: ints, slices, integer arrays and boolean masks per axis."""

    def __init__(self, selection: Any, shape: tuple[int, ...], chunks: tuple[int, ...]) -> None:
        """Normalize ``selection`` for an array of ``shape`` split into ``chunks``."""
        shape, chunks = tuple(shape), tuple(chunks)
        _check_grid(shape, chunks)
        items = _normalize_items(selection, shape, accept_arrays=True)
        dims: list[DimIndexer] = []
        for axis, (item, dim_len, chunk_len) in enumerate(zip(items, shape, chunks, strict=True)):
            if isinstance(item, slice):
                dims.append(SliceDimIndexer(item, dim_len, chunk_len))
            elif isinstance(item, np.ndarray) and item.dtype.kind == "b":
                dims.append(BoolArrayDimIndexer(item, dim_len, chunk_len, axis))
            elif isinstance(item, np.ndarray):
                dims.append(IntArrayDimIndexer(item, dim_len, chunk_len, axis))
            else:
                dims.append(IntDimIndexer(item, dim_len, chunk_len, axis))
        narrays = sum(isinstance(dim, IntArrayDimIndexer) for dim in dims)
        nints = sum(isinstance(dim, IntDimIndexer) for dim in dims)
        # NumPy indexes one array among slices orthogonally; several advanced indices
        # (arrays or integers) it would broadcast together instead.
        super().__init__(dims, chunks, needs_ix=narrays > 1 or (narrays == 1 and nints > 0))


def _ix(selection: tuple[Any, ...], shape: tuple[int, ...]) -> tuple[Any, ...]:
    """Like ``np.ix_`` over the non-integer items, with slices as ranges and integers kept as scalars."""
    ranges = [
        np.arange(*item.indices(dim_len)) if isinstance(item, slice) else item
        for item, dim_len in zip(selection, shape, strict=True)
        if not isinstance(item, int)
    ]
    expanded = iter(np.ix_(*ranges))
    return tuple(item if isinstance(item, int) else next(expanded) for item in selection)


def block_selection_slices(selection: Any, shape: tuple[int, ...], block_shape: tuple[int, ...]) -> tuple[slice, ...]:
    """The element slices covering the blocks (chunks, or shards when sharded) that ``selection`` picks.

    ``selection`` indexes the block grid as zarr-python's ``blocks`` does: an int or a
    step-1 slice of block indices per axis (negative counts from the end), Ellipsis, missing
    axes meaning all blocks. Ints keep their axis. A block whose first element lies outside
    the array raises IndexError; a slice's end is not checked, so it is clipped. The result
    is a basic selection: edge blocks come out truncated at the array's bounds.
    """
    items = selection if isinstance(selection, tuple) else (selection,)
    ellipses = sum(item is Ellipsis for item in items)
    if ellipses > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    nindexed = sum(item is not Ellipsis for item in items)
    if nindexed > len(shape):
        raise IndexError(f"too many indices for array: array is {len(shape)}-dimensional, but {nindexed} were indexed")
    fill = (slice(None),) * (len(shape) - nindexed)
    if ellipses:
        at = next(position for position, item in enumerate(items) if item is Ellipsis)
        items = items[:at] + fill + items[at + 1 :]
    else:
        items = items + fill
    slices = []
    for item, dim_len, block_len in zip(items, shape, block_shape, strict=True):
        nblocks = -(-dim_len // block_len)
        if _is_int(item):
            index = int(item)
            first_block = index + nblocks if index < 0 else index
            start, stop = first_block * block_len, (first_block + 1) * block_len
        elif isinstance(item, slice):
            if item.step not in (1, None):
                raise IndexError(f"block indexing takes only slices with step 1; got step {item.step!r}")
            first_block = _block_bound(item.start, 0, nblocks)
            start, stop = first_block * block_len, _block_bound(item.stop, nblocks, nblocks) * block_len
        else:
            raise IndexError(f"block indexing takes ints and slices with step 1; got {type(item).__name__}")
        if not 0 <= start < dim_len:
            raise IndexError(f"block index out of bounds for an axis of {nblocks} blocks (length {dim_len})")
        # A stop still negative after wrapping is read as Python reads a negative stop, as zarr-python does.
        slices.append(slice(start, stop))
    return tuple(slices)


def _block_bound(bound: Any, default: int, nblocks: int) -> int:
    if bound is None:
        return default
    if not _is_int(bound):
        raise IndexError(f"block indexing takes integer slice bounds; got {type(bound).__name__}")
    return int(bound) + nblocks if bound < 0 else int(bound)


def block_result(selected: Any, dtype: np.dtype) -> np.ndarray:
    """A block read as an ndarray always: a 0-d array's block is a 0-d array, as zarr-python returns it."""
    if isinstance(selected, np.ndarray):
        return selected
    result = np.empty((), dtype=dtype)
    result[()] = selected
    return result


def side_by_side_chunks(projections: Sequence[ChunkProjection], chunks: tuple[int, ...]) -> tuple[slice, ...] | None:
    """The out selection holding all of ``projections`` when they are whole chunks of shape
    ``chunks`` lying side by side along the last axis of the output (each starting where the one
    before it stops, all alike along every other axis), so that one copy can take them all; else None.

    Its values, reshaped to ``(*chunks[:-1], len(projections), chunks[-1])`` with that third-last
    axis moved first, are the chunks in order."""
    first = projections[0].out_selection
    if len(first) != len(chunks) or not all(map(_is_plain_slice, first, chunks)):
        return None
    leading, stop, width = first[:-1], first[-1].start, chunks[-1]
    try:
        for projection in projections:  # kept lean: a batch of 32 small chunks is checked per write
            selection = projection.out_selection
            last = selection[-1]
            if (
                not projection.is_complete_chunk
                or type(last) is not slice
                or last.start != stop
                or last.stop - stop != width
                or last.step not in (None, 1)
                or selection[:-1] != leading
            ):
                return None
            stop = last.stop
    except (TypeError, ValueError):  # an index array where the first has a slice: NumPy's comparison
        return None
    return (*leading, slice(first[-1].start, stop))


def _is_plain_slice(selection: Any, extent: int) -> bool:
    """Whether ``selection`` is a slice of ``extent`` consecutive items, its bounds given."""
    return (
        type(selection) is slice
        and type(selection.start) is int
        and type(selection.stop) is int
        and selection.step in (None, 1)
        and selection.stop - selection.start == extent
    )
