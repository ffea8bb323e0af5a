"""Reading and decoding only the Blosc blocks that a part of a chunk lies in, from a local file.

A Blosc 1 frame is a 16-byte header, one offset per block, then each block compressed on its
own (c-blosc 1 cuts a 1 MiB float32 chunk into two blocks of 512 KiB). One row of such a chunk
lies in one block: reading and decoding the other is half the work of the read, for nothing.

For each block needed, the block's bytes are read from the file into a buffer behind a header
of their own, making a frame of one block, which numcodecs (c-blosc 1, the library that decodes
whole frames) decodes. That frame holds every byte the library reads for the block (the block's
compressed streams, as many as c-blosc 1 reads, are checked to lie inside it, and the library
checks the same against the length in the header), and its header gives the library the same
item size, flags and block size as the whole frame does. So a block decoded here is, byte for
byte, the block that decoding the whole frame gives.

A part that lies in the first three quarters of one block of LZ4 streams, shuffled by byte (or of
one-byte items), is read closer still: c-blosc 1 compresses byte ``j`` of every item of a block
as stream ``j``, so items ``low`` to ``high`` are bytes ``low`` to ``high`` of each stream. Each
stream is read only up to its ``high``-th byte and decoded only that far (LZ4's partial decode,
from the LZ4 in libblosc2; `asyncarr.codecs.blosc_frames.lz4_prefix_decoder`), and its bytes
from ``low`` go to their items. The bytes decoded are the first bytes of the stream that the
whole decode gives; a stream LZ4 cannot decode that far leaves the block to the way above.

What is not read is not checked: damage in a block that a read does not need is found by the
reads that need it, as with a part of a shard. Anything this module does not recognize (frames
stored uncompressed, format versions other than c-blosc 1's, a last block shorter than the
others, streams that do not fit, a frame the library refuses) makes it answer False, and the
caller reads and decodes the whole frame, whose result or error is then the answer.
"""

from __future__ import annotations

import struct
import threading
from typing import Any, Protocol

import numpy as np
from numcodecs import blosc

from asyncarr.codecs.blosc_frames import lz4_prefix_decoder
from asyncarr.codecs.v3 import Buffer

__all__ = ["BlockReader", "FramePart", "selection_byte_span"]

_HEADER = struct.Struct("<BBBBiii")
_ONE_BLOCK_HEADER = struct.Struct("<BBBBiiii")
"""A frame of one block: the 16-byte header and the block's offset (always 20)."""
_INT32 = struct.Struct("<i")
_HEAD_BYTES = 4096  # the header and the offsets of up to 1020 blocks, in one read
_KEPT_FRAME_BYTES = 4 * 2**20  # c-blosc 1 blocks are at most 1 MiB: a larger "block" is a stranger's
_SHUFFLE, _MEMCPYED, _BITSHUFFLE, _FUTURE_FLAGS, _DONT_SPLIT = 0x01, 0x02, 0x04, 0x08, 0x10
_LZ4_FORMAT = 1  # the compressor code (the flags' top three bits) of LZ4 and LZ4HC blocks
_VERSION_FORMAT = 2  # what c-blosc 1 writes and reads
_MAX_SPLITS, _MIN_BUFFERSIZE = 16, 128  # c-blosc 1's rule for splitting a block into streams

_frames = threading.local()  # per thread: a reusable buffer for the one-block frames


def selection_byte_span(selection: Any, shape: tuple[int, ...], itemsize: int) -> tuple[int, int] | None:
    """The first and last byte, in a C-ordered chunk of ``shape``, that ``selection`` reads;
    None when it reads nothing or is not a tuple of slices, integers and integer arrays."""
    if not isinstance(selection, tuple) or len(selection) != len(shape):
        return None
    first = last = 0
    stride = itemsize
    for part, size in zip(reversed(selection), reversed(shape), strict=True):
        if type(part) is slice:
            start, stop = part.start, part.stop
            if part.step == 1 and type(start) is int and type(stop) is int and 0 <= start < stop <= size:
                # The form the indexers make, asked twice for each part of a chunk a read takes:
                # both ends inside the axis need no normalizing.
                low, high = start, stop - 1
            else:
                low, high = _slice_ends(part, size)
                if low < 0:
                    return None
        elif isinstance(part, (int, np.integer)):
            low = high = int(part) % size if -size <= part < size else -1
            if low < 0:
                return None
        elif isinstance(part, np.ndarray) and part.dtype.kind in "iu" and part.size:
            low, high = int(part.min()), int(part.max())
            if low < 0 or high >= size:
                return None
        else:
            return None
        first += low * stride
        last += high * stride
        stride *= size
    return first, last + itemsize - 1


def _slice_ends(part: slice, size: int) -> tuple[int, int]:
    """The lowest and highest index ``part`` takes on an axis of ``size``; (-1, -1) when it takes none."""
    start, stop, step = part.indices(size)
    count = len(range(start, stop, step))
    if not count:
        return -1, -1
    last = start + (count - 1) * step
    return (start, last) if step > 0 else (last, start)


class FramePart(Protocol):
    """A stored frame to read parts of (`asyncarr.stores.local.LocalStore.open_sync`): its size,
    bytes at an offset, and bytes at an offset read into a caller's buffer."""

    size: int

    def read(self, offset: int, nbytes: int) -> Buffer:
        """``nbytes`` bytes from ``offset`` (fewer only past the end)."""
        ...

    def read_into(self, offset: int, buffer: memoryview) -> int:
        """Fill ``buffer`` from ``offset``; the count read (less only past the end)."""
        ...


class BlockReader:
    """Reads the parts of one array's stored Blosc frames that parts of its chunks lie in.

    It remembers the block size of the last frame it read: a part that lies in every block of
    a frame like that one is left to a whole read at once, without a read of the header first.
    """

    def __init__(self, nbytes: int) -> None:
        self._nbytes = nbytes
        # Of the last frame seen (hints, so no lock): its block size (0 before any), and whether
        # its blocks' first items can be decoded alone (`_read_items_of_block`).
        self._blocksize = 0
        self._items_alone = False

    def may_save(self, first_byte: int, last_byte: int) -> bool:
        """Whether bytes ``first_byte`` to ``last_byte`` of a chunk are likely to lie in fewer than all its blocks."""
        blocksize = self._blocksize
        return not blocksize or first_byte >= blocksize or last_byte < (self._nbytes - 1) // blocksize * blocksize

    def decoded_bytes(self, first_byte: int, last_byte: int) -> int:
        """About how many bytes a read of bytes ``first_byte`` to ``last_byte`` of a chunk decodes,
        judged by the last frame read (the whole chunk before any): the work that frees the GIL,
        which is what a second thread could share."""
        blocksize = self._blocksize
        if not blocksize or not self.may_save(first_byte, last_byte):
            return self._nbytes
        first_block, last_block = first_byte // blocksize, last_byte // blocksize
        block_start = first_block * blocksize
        through = last_byte - block_start + 1  # bytes of the block up to the last one read
        if first_block == last_block and self._items_alone and _items_alone_save(through, blocksize):
            return through
        return min(self._nbytes, (last_block - first_block + 1) * blocksize)

    def read_into(self, source: FramePart, first_byte: int, last_byte: int, destination: np.ndarray) -> bool:
        """Read and decode the blocks of the Blosc frame stored in ``source`` that hold bytes
        ``first_byte`` to ``last_byte`` of the decoded chunk, into the same places of
        ``destination`` (a writable uint8 view of the whole decoded chunk); False, with
        ``destination`` undefined, when the frame should be read and decoded whole instead (it
        has one block, the bytes span all of them, or it is not a frame this module reads in part).
        """
        head = source.read(0, min(source.size, _HEAD_BYTES))
        if len(head) < _HEADER.size:
            return False
        version, codec_version, flags, typesize, nbytes, blocksize, cbytes = _HEADER.unpack_from(head)
        if version != _VERSION_FORMAT or flags & (_MEMCPYED | _FUTURE_FLAGS) or blocksize <= 0 or not typesize:
            return False
        if nbytes != destination.nbytes or not _HEADER.size <= cbytes <= source.size:
            return False  # the whole read names what is wrong
        self._blocksize = blocksize
        nblocks = -(-nbytes // blocksize)
        first_block, last_block = first_byte // blocksize, last_byte // blocksize
        if last_block >= nblocks or (first_block == 0 and last_block == nblocks - 1):
            return False
        if last_block == nblocks - 1 and nbytes % blocksize:
            return False  # the shorter last block: c-blosc 1 refuses a one-block frame of it
        offsets_end = _HEADER.size + 4 * nblocks
        if offsets_end > len(head):
            return False
        starts = struct.unpack_from(f"<{nblocks}i", head, _HEADER.size)
        splits = _splits(flags, typesize, blocksize)
        self._items_alone = _items_alone(flags, typesize, blocksize, splits)
        if first_block == last_block and self._items_alone:
            start = starts[first_block]
            end = _block_end(starts, start, cbytes)
            offset = first_block * blocksize
            first, last = first_byte - offset, last_byte - offset
            if offsets_end <= start < end <= cbytes and _read_items_of_block(
                source, flags, typesize, blocksize, start, end, first, last, destination[offset:]
            ):
                return True
        for block in range(first_block, last_block + 1):
            start = starts[block]
            end = _block_end(starts, start, cbytes)
            if not offsets_end <= start < end <= cbytes:
                return False
            frame = _frame_buffer(_ONE_BLOCK_HEADER.size + end - start)
            body = memoryview(frame)[_ONE_BLOCK_HEADER.size : _ONE_BLOCK_HEADER.size + end - start]
            if source.read_into(start, body) != len(body):
                return False
            length = _streams_end(frame, _ONE_BLOCK_HEADER.size, splits, len(body))
            if length is None:
                return False
            _ONE_BLOCK_HEADER.pack_into(
                frame, 0, version, codec_version, flags, typesize, blocksize, blocksize, length, _ONE_BLOCK_HEADER.size
            )
            try:
                blosc.decompress(memoryview(frame)[:length], destination[block * blocksize : (block + 1) * blocksize])
            except (RuntimeError, ValueError):
                return False
        return True


def _block_end(starts: tuple[int, ...], start: int, cbytes: int) -> int:
    """Where the block stored from ``start`` ends: blocks lie one after another, in any order, so
    where the next one begins, or at the frame's end (``cbytes``) for the last."""
    return min((other for other in starts if other > start), default=cbytes)


def _read_items_of_block(
    source: FramePart,
    flags: int,
    typesize: int,
    blocksize: int,
    start: int,
    end: int,
    first_byte: int,
    last_byte: int,
    destination: np.ndarray,
) -> bool:
    """Read bytes ``first_byte`` to ``last_byte`` of one LZ4 block, stored from ``start`` to ``end``
    of ``source``, into the same places of ``destination`` (the block's decoded bytes from 0),
    decoding each stream only up to the last item needed; False when that is not how the block
    is stored or would not save work (the caller then decodes the whole block).

    c-blosc 1 shuffles a block (byte ``j`` of every item to stream ``j``) and compresses each
    stream on its own, so items ``low`` to ``high`` are bytes ``low`` to ``high`` of every stream:
    one row of a float32 chunk of 512 x 512, at the start of its block, takes 4 x 2 KiB decoded
    and read instead of the block's 512 KiB (docs/performance.md, round 16).
    """
    decode = lz4_prefix_decoder()  # not None: `_items_alone` said so of this frame
    stream_bytes = blocksize // typesize
    low, high = first_byte // typesize, last_byte // typesize + 1
    if not _items_alone_save(high * typesize, blocksize):
        return False  # most of the block: c-blosc 1 decodes and unshuffles all of it faster
    reading, reading_address, decoded, decoded_address = _item_buffers(4 + stream_bytes, high)
    items = destination[low * typesize : high * typesize].reshape(high - low, typesize)
    position = start
    for stream in range(typesize):
        room = end - position - 4  # the most bytes this stream can have
        if room <= 0:
            return False
        got = source.read_into(position, memoryview(reading)[: 4 + min(_lz4_bytes_for(high), room)])
        if got < 4:
            return False
        size = _INT32.unpack_from(reading)[0]
        if not 0 < size <= min(stream_bytes, room):
            return False
        if size == stream_bytes:  # stored as it is (c-blosc 1 does so when LZ4 does not shrink it)
            if got < 4 + high:  # the items needed lie past what was read: read just them
                got = source.read_into(position + 4 + low, memoryview(reading)[4 + low : 4 + high]) + 4 + low
                if got < 4 + high:
                    return False
            items[:, stream] = reading[4 + low : 4 + high]
        else:
            count = decode(reading_address + 4, decoded_address, min(size, got - 4), high, high)
            if count != high and got - 4 < size:  # the stream needed more than was read: read all of it
                got = source.read_into(position + 4, memoryview(reading)[4 : 4 + size]) + 4
                count = decode(reading_address + 4, decoded_address, size, high, high) if got == 4 + size else -1
            if count != high:
                return False  # damaged, or short: the whole decode says which
            items[:, stream] = decoded[low:high]
        position += 4 + size
    return True


def _items_alone(flags: int, typesize: int, blocksize: int, splits: int) -> bool:
    """Whether a block of a frame with this header, compressed as ``splits`` streams, keeps item
    ``i``'s bytes at place ``i`` of each LZ4 stream: `_read_items_of_block` then reads it."""
    if splits != typesize or flags >> 5 != _LZ4_FORMAT or blocksize % typesize or lz4_prefix_decoder() is None:
        return False
    return typesize == 1 or (bool(flags & _SHUFFLE) and not flags & _BITSHUFFLE)


def _items_alone_save(through: int, blocksize: int) -> bool:
    """Whether decoding a block's streams only as far as its first ``through`` bytes saves work:
    up to three quarters of it; past that, c-blosc 1 decodes and unshuffles the whole block faster."""
    return 4 * through <= 3 * blocksize


def _lz4_bytes_for(decoded_bytes: int) -> int:
    """How many bytes of an LZ4 stream to read first for its first ``decoded_bytes``: enough for
    all of them unless the stream is longer than LZ4's worst case makes it (literals, with one
    length byte per 255 of them, and a little for the sequence that ends there)."""
    return decoded_bytes + decoded_bytes // 255 + 64


def _item_buffers(read_nbytes: int, decode_nbytes: int) -> tuple[np.ndarray, int, np.ndarray, int]:
    """This thread's buffers for reading a block's streams and decoding their first items, with
    their addresses; new ones, dropped after the read, when they would exceed what a thread keeps."""
    if read_nbytes + decode_nbytes > _KEPT_FRAME_BYTES:
        reading, decoded = np.empty(read_nbytes, np.uint8), np.empty(decode_nbytes, np.uint8)
        return reading, reading.ctypes.data, decoded, decoded.ctypes.data
    kept = getattr(_frames, "items", None)
    if kept is None or len(kept[0]) < read_nbytes or len(kept[2]) < decode_nbytes:
        reading = np.empty(max(read_nbytes, len(kept[0]) if kept else 0), np.uint8)
        decoded = np.empty(max(decode_nbytes, len(kept[2]) if kept else 0), np.uint8)
        kept = _frames.items = (reading, reading.ctypes.data, decoded, decoded.ctypes.data)
    return kept


def _splits(flags: int, typesize: int, blocksize: int) -> int:
    """How many compressed streams c-blosc 1 reads for a full-sized block."""
    if not flags & _DONT_SPLIT and typesize <= _MAX_SPLITS and blocksize // typesize >= _MIN_BUFFERSIZE:
        return typesize
    return 1


def _streams_end(frame: bytearray, position: int, splits: int, nbytes: int) -> int | None:
    """Where the ``splits`` size-prefixed streams from ``position`` end, or None unless they
    have sizes above zero and end within ``nbytes`` of it."""
    size = position + nbytes
    for _ in range(splits):
        if position + 4 > size:
            return None
        stream = _INT32.unpack_from(frame, position)[0]
        position += 4 + stream
        if stream <= 0 or position > size:
            return None
    return position


def _frame_buffer(nbytes: int) -> bytearray:
    """A buffer for a one-block frame of ``nbytes``: this thread's reusable one, up to a size a
    thread may keep between reads; a new one, dropped after the read, above it."""
    if nbytes > _KEPT_FRAME_BYTES:
        return bytearray(nbytes)
    buffer = getattr(_frames, "buffer", None)
    if buffer is None or len(buffer) < nbytes:
        buffer = _frames.buffer = bytearray(min(_KEPT_FRAME_BYTES, max(nbytes, 2 * len(buffer or b""))))
    return buffer
