"""Decompression that never produces more bytes than the chunk needs.

A chunk's stored bytes come from whoever wrote the store; a few hundred KiB of zlib can
inflate to gigabytes. Every numcodecs compressor is decoded here with a bound: the chunk's
exact decoded size where its shape and data type fix it, else ``config.variable_chunk_max_bytes``.
Formats with a size header (Blosc, Zstandard, LZ4) are checked against the bound before
anything is allocated; stream formats (zlib, gzip, bz2, lzma) are inflated by the standard
library with ``max_length`` and stopped one byte past the bound. Violations raise ValueError,
which the pipeline turns into `CodecError` naming the chunk.
"""

from __future__ import annotations

import bz2
import lzma
import struct
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

from asyncarr import config

__all__ = [
    "check_blosc_frame",
    "check_vlen_count",
    "decode_checked",
    "zstd_frame_content_size",
]

Buffer = bytes | bytearray | memoryview | np.ndarray

_BLOSC_HEADER = struct.Struct("<BBBBIII")


def check_blosc_frame(data: Buffer, decoded_size: int | None, limit: int | None = None) -> Buffer:
    """Return the Blosc frame in `data` (trailing bytes cut off, as zarr-python reads z5py's
    padded frames); raise ValueError if it is truncated or declares a size other than
    `decoded_size` (or, when that is None, more than `limit`)."""
    view = data if type(data) is bytes else memoryview(data).cast("B")
    if len(view) < _BLOSC_HEADER.size:
        raise ValueError(f"Blosc frame of {len(view)} bytes is shorter than its 16-byte header")
    _, _, _, _, nbytes, _, cbytes = _BLOSC_HEADER.unpack_from(view)
    if decoded_size is not None:
        if nbytes != decoded_size:
            raise ValueError(f"Blosc header declares {nbytes} decoded bytes, expected {decoded_size}")
    elif limit is not None and nbytes > limit:
        raise ValueError(f"Blosc header declares {nbytes} decoded bytes, more than the limit of {limit}")
    if cbytes == len(view):
        return data
    if cbytes > len(view) or cbytes < _BLOSC_HEADER.size:
        raise ValueError(f"Blosc header declares {cbytes} compressed bytes, got {len(view)} (truncated frame)")
    return memoryview(view)[:cbytes]


_ZSTD_MAGIC = 0xFD2FB528


def zstd_frame_content_size(data: Buffer) -> int | None:
    """Return the decoded size a Zstandard frame header declares, or None if it has none."""
    view = memoryview(data).cast("B")
    if len(view) < 5 or int.from_bytes(view[:4], "little") != _ZSTD_MAGIC:
        return None
    descriptor = view[4]
    size_flag = descriptor >> 6
    single_segment = (descriptor >> 5) & 1
    dictionary_id_bytes = (0, 1, 2, 4)[descriptor & 3]
    size_bytes = (single_segment, 2, 4, 8)[size_flag]
    if size_bytes == 0:
        return None
    start = 5 + (0 if single_segment else 1) + dictionary_id_bytes
    if len(view) < start + size_bytes:
        return None
    size = int.from_bytes(view[start : start + size_bytes], "little")
    return size + 256 if size_bytes == 2 else size


def check_vlen_count(data: Buffer, count: int) -> None:
    """Raise ValueError unless numcodecs' variable-length header declares `count` elements
    (numcodecs allocates the declared number of objects before reading any of them)."""
    view = memoryview(data).cast("B")
    if len(view) < 4:
        raise ValueError(f"variable-length chunk of {len(view)} bytes is shorter than its 4-byte header")
    declared = int.from_bytes(view[:4], "little")
    if declared != count:
        raise ValueError(f"variable-length chunk declares {declared} elements, expected {count}")


def decode_checked(
    codec: Any, data: Buffer, decoded_size: int | None, out: np.ndarray | None = None, limit: int | None = None
) -> Buffer:
    """Decode `data` with a numcodecs bytes->bytes codec into at most the bytes the chunk needs.

    `decoded_size` is the exact expected size when the chunk's shape fixes it; otherwise the
    result may not exceed `limit` (default ``config.variable_chunk_max_bytes``). `out` (a uint8
    buffer of `decoded_size` bytes) is filled directly where the codec can; otherwise a new
    buffer is returned and the caller copies. Too much output, a size header that disagrees
    and a truncated stream raise ValueError.
    """
    codec_id = codec.codec_id
    if decoded_size is None and limit is None:
        limit = config.get("variable_chunk_max_bytes")
    if codec_id == "blosc":
        data = check_blosc_frame(data, decoded_size, limit)
        return codec.decode(data) if out is None else codec.decode(data, out=out)
    if codec_id == "zstd":
        return _zstd(codec, data, decoded_size, limit, out)
    if codec_id == "lz4":
        _check_declared("LZ4", _lz4_declared_size(data), decoded_size, limit)
        return codec.decode(data)
    inflate = _STREAM_INFLATERS.get(codec_id)
    if inflate is not None:
        bound = decoded_size if decoded_size is not None else limit
        decoded = inflate(codec, memoryview(data).cast("B"), bound)
        if decoded_size is not None and len(decoded) != decoded_size:
            raise ValueError(f"{codec_id} stream decodes to {len(decoded)} bytes, expected {decoded_size}")
        return decoded
    # Checksums, shuffle and the like: the output is no larger than the input.
    return codec.decode(data)


def _check_declared(what: str, declared: int, decoded_size: int | None, limit: int | None) -> None:
    if decoded_size is not None and declared != decoded_size:
        raise ValueError(f"{what} header declares {declared} decoded bytes, expected {decoded_size}")
    if decoded_size is None and limit is not None and declared > limit:
        raise ValueError(f"{what} header declares {declared} decoded bytes, more than the limit of {limit}")


def _lz4_declared_size(data: Buffer) -> int:
    # numcodecs' LZ4 format: a little-endian uint32 of the decoded size, then one LZ4 block.
    view = memoryview(data).cast("B")
    if len(view) < 4:
        raise ValueError(f"LZ4 chunk of {len(view)} bytes is shorter than its 4-byte size header")
    return int.from_bytes(view[:4], "little")


def _zstd(codec: Any, data: Buffer, decoded_size: int | None, limit: int | None, out: np.ndarray | None) -> Buffer:
    # numcodecs decodes into a destination no larger than it is given: frames that declare more
    # are refused before anything is allocated, frames that declare nothing are streamed and
    # stopped at its end. Frames that declare less would leave its tail unwritten: refused here.
    declared = zstd_frame_content_size(data)
    if decoded_size is None:
        if declared is None:
            raise ValueError("Zstandard frame declares no content size, so its decoded size cannot be bounded")
        _check_declared("Zstandard frame", declared, None, limit)
        decoded_size = declared
    elif declared is not None and declared != decoded_size:
        raise ValueError(f"Zstandard frame declares {declared} decoded bytes, expected {decoded_size}")
    if out is None:
        out = np.empty(decoded_size, dtype=np.uint8)
    return codec.decode(data, out=out)


def _inflate_streams(
    new_decompressor: Callable[[], Any], data: memoryview, bound: int, what: str, *, skip_zero_padding: bool = False
) -> bytes:
    """Inflate one or more concatenated streams, stopping one byte past `bound`."""
    pieces: list[bytes] = []
    produced = 0
    rest: Any = data
    while True:
        decompressor = new_decompressor()
        piece = decompressor.decompress(rest, bound - produced + 1)
        produced += len(piece)
        if produced > bound:
            raise ValueError(f"{what} stream decodes to more than the {bound} bytes the chunk may hold")
        pieces.append(piece)
        if not decompressor.eof:
            raise ValueError(f"{what} stream is truncated")
        rest = decompressor.unused_data
        if skip_zero_padding:
            rest = rest.lstrip(b"\0")
        if not rest:
            break
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)


def _zlib(codec: Any, data: memoryview, bound: int) -> bytes:
    # Like zlib.decompress (numcodecs' Zlib): one stream, any bytes after it ignored.
    decompressor = zlib.decompressobj()
    decoded = decompressor.decompress(data, bound + 1)
    if len(decoded) > bound:
        raise ValueError(f"zlib stream decodes to more than the {bound} bytes the chunk may hold")
    if not decompressor.eof:
        raise ValueError("zlib stream is truncated")
    return decoded


def _gzip(codec: Any, data: memoryview, bound: int) -> bytes:
    # Like gzip.GzipFile (numcodecs' GZip): several members, zero padding between them.
    def new_member() -> Any:
        return zlib.decompressobj(16 + zlib.MAX_WBITS)

    return _inflate_streams(new_member, data, bound, "gzip", skip_zero_padding=True)


def _bz2(codec: Any, data: memoryview, bound: int) -> bytes:
    # Like bz2.decompress (numcodecs' BZ2): several streams.
    return _inflate_streams(bz2.BZ2Decompressor, data, bound, "bz2")


def _lzma(codec: Any, data: memoryview, bound: int) -> bytes:
    # Like lzma.decompress (numcodecs' LZMA): raw streams take the codec's filters; .xz and .lzma
    # streams carry their own filter chain, which Python refuses to be given as well.
    def new_stream() -> lzma.LZMADecompressor:
        if codec.format == lzma.FORMAT_RAW:
            return lzma.LZMADecompressor(lzma.FORMAT_RAW, filters=codec.filters)
        return lzma.LZMADecompressor(codec.format)

    return _inflate_streams(new_stream, data, bound, "lzma")


_STREAM_INFLATERS: dict[str, Callable[[Any, memoryview, int], bytes]] = {
    "zlib": _zlib,
    "gzip": _gzip,
    "bz2": _bz2,
    "lzma": _lzma,
}
