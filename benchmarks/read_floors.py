"""A floor of local whole-array reads in Python, beside `write_floors`' floor of writes.

`read_with_duties` reads an array's chunk files and decodes them into one output with the least
Python a client needs and the checks a library owes its caller (in the run's tables it is the
write floor's column, `FLOOR_DUTIES`, in the read rows): each key checked before it
becomes a path (`validate_key`), each file named relative to its directory (opened once, as a
careful client does), each Blosc frame checked against the chunk's size before anything is
decoded (`check_blosc_frame`: a stranger's frame cannot make it allocate), a missing chunk read as
the fill value, each read counted with its latency (store metrics). Decoding is the fastest
asyncarr has: c-blosc2 for frames of one block, numcodecs' c-blosc otherwise, into a scratch chunk
per thread, then one copy into the output. Where even this floor is above a target, no Python
client with asyncarr's checks meets that target.

`read_part_with_duties` is W4's floor: a row or a window, each part of a chunk read the cheapest
way asyncarr knows, only the Blosc blocks it lies in (`asyncarr.codecs.blosc_blocks.BlockReader`),
with the same duties, on the caller's thread and one worker taking chunks from one queue (the
way asyncarr's facade shares a read), or the caller's alone when the parts are small.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
from numcodecs import blosc

from asyncarr.codecs.blosc_blocks import BlockReader, selection_byte_span
from asyncarr.codecs.blosc_frames import decompress_into_address
from asyncarr.codecs.bounded import check_blosc_frame
from asyncarr.codecs.executor import blosc_in_this_thread_alone
from asyncarr.stores.base import validate_key
from asyncarr.stores.metrics import MetricsRecorder

from .engines import ArraySpec
from .write_floors import chunk_items, floor_workers, has_small_chunks

__all__ = ["chunk_pieces", "read_part_with_duties", "read_with_duties"]

Piece = tuple[str, tuple[slice, slice], tuple[slice, slice]]
"""A chunk a selection touches: its key, its part to read, and where that part goes in the output."""

_TWO_THREADS_BYTES = 512 * 1024
"""Parts spanning fewer bytes in all are read on the caller's thread alone: handing chunks to a
second thread costs more than it saves (asyncarr splits no batch below 256 KiB)."""


def read_with_duties(root: str, spec: ArraySpec) -> np.ndarray:
    """Read ``spec``'s whole array from ``root`` (chunks that divide its shape): small chunks on the
    calling thread, as asyncarr reads them (two threads would trade the GIL a chunk at a time);
    large ones on two long-lived worker threads, each taking the next chunk as it finishes one (an
    equal half each left one thread idle at the end: asyncarr's facade read W1 in 0.85-0.95 of
    such a floor's time)."""
    out = np.empty(spec.shape, dtype=spec.dtype)
    jobs = chunk_items(out, spec, copied=False)  # each chunk's key and its view of `out`
    recorder = MetricsRecorder()
    if has_small_chunks(spec):
        with blosc_in_this_thread_alone():
            _read_chunks(root, spec, jobs, recorder)
        return out
    remaining = iter(jobs)  # shared: each chunk taken once, by whichever thread is free
    for outcome in [floor_workers().submit(_read_chunks, root, spec, remaining, recorder) for _ in range(2)]:
        outcome.result()
    return out


def _read_chunks(
    root: str,
    spec: ArraySpec,
    jobs: Iterable[tuple[str, np.ndarray]],
    recorder: MetricsRecorder,
) -> None:
    scratch = np.empty(spec.chunks, dtype=spec.dtype)
    address = scratch.ctypes.data
    directory, directory_fd = None, -1
    try:
        for key, destination in jobs:
            started = time.perf_counter()
            validate_key(key)
            parent, _, name = key.rpartition("/")
            if parent != directory:
                if directory_fd >= 0:
                    os.close(directory_fd)
                directory_fd = -1
                directory_fd = os.open(os.path.join(root, parent), os.O_RDONLY | os.O_DIRECTORY)
                directory = parent
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=directory_fd)
            except FileNotFoundError:
                recorder.record("get", time.perf_counter() - started)
                destination[...] = 0  # the benchmark arrays' fill value
                continue
            try:
                data = os.read(fd, os.fstat(fd).st_size + 1)
            finally:
                os.close(fd)
            recorder.record("get", time.perf_counter() - started, len(data))
            _decode_whole(data, scratch, address)
            destination[...] = scratch
    finally:
        if directory_fd >= 0:
            os.close(directory_fd)


def _decode_whole(data: bytes, scratch: np.ndarray, address: int) -> None:
    """Decode the stored Blosc frame ``data`` into ``scratch`` (at ``address``), checked first
    against the chunk's size: c-blosc2 for a frame of one block, numcodecs' c-blosc otherwise."""
    frame = check_blosc_frame(data, scratch.nbytes)
    if not decompress_into_address(frame, address, scratch.nbytes):
        blosc.decompress(frame, scratch)


def chunk_pieces(spec: ArraySpec, selection: tuple[int | slice, slice]) -> tuple[tuple[int, int], list[Piece]]:
    """The output's shape (a row as one row of two dimensions) and the pieces of a 2-D
    ``selection`` (an integer or a slice of rows, a slice of columns; steps of 1) of ``spec``'s array."""
    rows = slice(selection[0], selection[0] + 1) if isinstance(selection[0], int) else selection[0]
    (row_start, row_stop, _), (column_start, column_stop, _) = (
        part.indices(size) for part, size in zip((rows, selection[1]), spec.shape, strict=True)
    )
    side_rows, side_columns = spec.chunks
    key = "{}.{}" if spec.zarr_format == 2 else "c/{}/{}"
    pieces = []
    for i in range(row_start // side_rows, (row_stop - 1) // side_rows + 1):
        for j in range(column_start // side_columns, (column_stop - 1) // side_columns + 1):
            top, left = i * side_rows, j * side_columns
            r0, r1 = max(row_start, top), min(row_stop, top + side_rows)
            c0, c1 = max(column_start, left), min(column_stop, left + side_columns)
            inside = (slice(r0 - top, r1 - top), slice(c0 - left, c1 - left))
            target = (slice(r0 - row_start, r1 - row_start), slice(c0 - column_start, c1 - column_start))
            pieces.append((key.format(i, j), inside, target))
    return (row_stop - row_start, column_stop - column_start), pieces


def read_part_with_duties(root: str, spec: ArraySpec, selection: tuple[int | slice, slice]) -> np.ndarray:
    """Read ``selection`` of ``spec``'s array (Blosc chunks) from ``root``: each whole chunk read and
    decoded as `read_with_duties` does, each part of one read and decoded by the Blosc block (the
    header first, then the blocks the part lies in; a part in every block is read whole at once),
    then copied out. Two threads share the chunks when the parts span 512 KiB or more."""
    shape, pieces = chunk_pieces(spec, selection)
    out = np.empty(shape, dtype=spec.dtype)
    itemsize = out.itemsize
    spans = [selection_byte_span(inside, spec.chunks, itemsize) for _, inside, _ in pieces]
    jobs = iter(list(zip(pieces, spans, strict=True)))  # shared: each chunk taken once, by whichever thread is free
    reader, recorder = _block_reader(spec), MetricsRecorder()
    if sum(last - first + 1 for first, last in spans) < _TWO_THREADS_BYTES:  # type: ignore[misc]
        _read_parts(root, spec, reader, jobs, out, recorder)
    else:
        helper = floor_workers().submit(_read_parts, root, spec, reader, jobs, out, recorder)
        try:
            with blosc_in_this_thread_alone():
                _read_parts(root, spec, reader, jobs, out, recorder)
        finally:
            helper.result()
    return out[0] if isinstance(selection[0], int) else out


_block_readers: dict[tuple[tuple[int, ...], str], BlockReader] = {}
_part_scratch = threading.local()


def _block_reader(spec: ArraySpec) -> BlockReader:
    """One reader per chunk layout, kept across calls as an array keeps its own: it remembers the
    block size of the last frame read, which spares a header read for parts that lie in every block."""
    layout = (spec.chunks, spec.dtype)
    reader = _block_readers.get(layout)
    if reader is None:
        reader = _block_readers[layout] = BlockReader(int(np.prod(spec.chunks)) * np.dtype(spec.dtype).itemsize)
    return reader


class _OpenChunk:
    """A chunk file held open, read at offsets (`asyncarr.codecs.blosc_blocks.FramePart`)."""

    __slots__ = ("bytes_read", "fd", "size")

    def __init__(self, fd: int) -> None:
        self.fd, self.size, self.bytes_read = fd, os.fstat(fd).st_size, 0

    def read(self, offset: int, nbytes: int) -> bytes:
        """``nbytes`` bytes from ``offset`` (fewer past the end)."""
        data = os.pread(self.fd, nbytes, offset)
        self.bytes_read += len(data)
        return data

    def read_into(self, offset: int, buffer: memoryview) -> int:
        """Fill ``buffer`` from ``offset``; the count read."""
        count = os.preadv(self.fd, [buffer], offset)
        self.bytes_read += count
        return count


def _read_parts(
    root: str,
    spec: ArraySpec,
    reader: BlockReader,
    jobs: Iterator[tuple[Piece, Any]],
    out: np.ndarray,
    recorder: MetricsRecorder,
) -> None:
    scratch = getattr(_part_scratch, "chunk", None)
    if scratch is None or scratch.shape != spec.chunks or scratch.dtype != out.dtype:
        scratch = _part_scratch.chunk = np.empty(spec.chunks, dtype=out.dtype)
    address, nbytes = scratch.ctypes.data, scratch.nbytes
    flat = scratch.reshape(-1).view(np.uint8)
    for (key, inside, target), (first, last) in jobs:
        started = time.perf_counter()
        validate_key(key)
        try:
            fd = os.open(os.path.join(root, key), os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            recorder.record("get", time.perf_counter() - started)
            out[target] = 0  # the benchmark arrays' fill value
            continue
        try:
            chunk = _OpenChunk(fd)
            whole = (first, last) == (0, nbytes - 1) or not reader.may_save(first, last)
            if whole or not reader.read_into(chunk, first, last, flat):
                _decode_whole(chunk.read(0, chunk.size + 1), scratch, address)
        finally:
            os.close(fd)
        recorder.record("get", time.perf_counter() - started, chunk.bytes_read)
        out[target] = scratch[inside]
