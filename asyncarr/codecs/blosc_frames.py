"""Small Blosc frames decoded by c-blosc2, when the optional ``blosc2`` package is installed.

numcodecs decodes Blosc with c-blosc 1, which sets up a new Zstandard context on every call:
12 us for a 2 KiB chunk, of which the decoding proper is about 2 us. c-blosc2 reads the same
Blosc 1 frames and keeps its context between calls, so for arrays of many small chunks it is
the difference between decoding and setting up to decode (``docs/performance.md``, round 4).

The library is called through ctypes, not through python-blosc2's Python module: that module
takes 0.2 s to import, its ``decompress`` holds the GIL while it works, and it passes no
length for the source, so the library would trust the frame's own header for how far to read.
Here ``blosc2_decompress`` gets the real length of the bytes (a frame whose offsets point
past its end is refused, not read beyond), runs without the GIL, and serializes callers on
c-blosc2's own lock.

Only frames whose result cannot differ from numcodecs' are sent to it: Blosc 1 headers
(format version 2, codec format version 1), one block (c-blosc2 then decodes on the calling thread and never
wakes its thread pool), no flag that c-blosc2 reads differently from c-blosc 1 (delta, or
shuffle and bitshuffle together, which it takes for its extended header), a codec both
know, and compressed streams of positive sizes (c-blosc2 takes a size of zero or below for
a run of one byte, where c-blosc 1 refuses the frame). Anything else, and any frame c-blosc2
refuses, goes to numcodecs, whose answer (the chunk, or its error) is then the answer.

The same library's LZ4 also decodes the first bytes of a compressed stream alone
(`lz4_prefix_decoder`), for reads of the first items of a block (`asyncarr.codecs.blosc_blocks`).
"""

from __future__ import annotations

import ctypes
import glob
import importlib.util
import os
import struct
import sys
import threading
from typing import Any

__all__ = ["decompress_into_address", "fast_decoder_available", "lz4_prefix_decoder"]

_START = struct.Struct("<BBBBIIIi")
"""The 16-byte header (format, codec format, flags, item size, sizes) and the first block's offset."""
_INT32 = struct.Struct("<i")
_SHUFFLE, _MEMCPYED, _BITSHUFFLE, _DELTA = 0x01, 0x02, 0x04, 0x08
_SNAPPY = 2  # the codec code c-blosc2 no longer builds


def _both_read_alike(flags: int) -> bool:
    """Whether c-blosc 1 and c-blosc2 read a Blosc 1 header with these flags the same way."""
    codec = flags >> 5
    return not (flags & _DELTA or (flags & _SHUFFLE and flags & _BITSHUFFLE) or codec == _SNAPPY or codec > 4)


_FLAGS_BOTH_READ_ALIKE = tuple(_both_read_alike(flags) for flags in range(256))
_BLOSC1_FORMATS = (2,)  # what c-blosc 1 writes; older frames are left to it

_load_lock = threading.Lock()
_decompress: Any = None
_lz4_prefix: Any = None
_loaded = False


def _library_paths() -> list[str]:
    """Where the blosc2 package's wheels put libblosc2 (in the package since 3.x, beside the environment before)."""
    try:
        spec = importlib.util.find_spec("blosc2")
    except (ImportError, ValueError):
        return []
    if spec is None or spec.origin is None:
        return []
    package = os.path.dirname(spec.origin)
    places = [os.path.join(package, "lib"), os.path.join(package, "lib64")]
    places += [os.path.join(sys.prefix, "lib64"), os.path.join(sys.prefix, "lib")]
    names = ("libblosc2.so*", "libblosc2*.dylib", "blosc2.dll", "libblosc2.dll")
    return [path for place in places for name in names for path in sorted(glob.glob(os.path.join(place, name)))]


def _load() -> Any:
    """``blosc2_decompress`` from libblosc2, or None when the package (or its library) is not there;
    also ``LZ4_decompress_safe_partial``, which libblosc2 exports from the LZ4 it is built with."""
    global _decompress, _lz4_prefix, _loaded
    with _load_lock:
        if _loaded:
            return _decompress
        _loaded = True
        for path in _library_paths():
            try:
                library = ctypes.CDLL(path)
                function = library.blosc2_decompress
                library.blosc2_init.argtypes = []
                library.blosc2_init.restype = None
            except (OSError, AttributeError):
                continue
            function.argtypes = [ctypes.c_char_p, ctypes.c_int32, ctypes.c_void_p, ctypes.c_int32]
            function.restype = ctypes.c_int
            library.blosc2_init()  # idempotent; python-blosc2, if imported too, shares this library's state
            _decompress = function
            _lz4_prefix = getattr(library, "LZ4_decompress_safe_partial", None)
            if _lz4_prefix is not None:
                _lz4_prefix.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int]
                _lz4_prefix.restype = ctypes.c_int
            break
        return _decompress


def _forget_in_child() -> None:
    # c-blosc2 serializes callers on a lock of its own: one held by another thread when the
    # process forked stays held in the child forever. A forked child decodes with numcodecs.
    global _decompress, _loaded
    _decompress, _loaded = None, True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


def fast_decoder_available() -> bool:
    """Whether c-blosc2 was found (the ``fast`` extra installs it)."""
    return (_decompress if _loaded else _load()) is not None


def lz4_prefix_decoder() -> Any:
    """LZ4's ``LZ4_decompress_safe_partial(src, dst, src_size, target_size, dst_capacity)`` from
    libblosc2, or None without it: it decodes the first ``target_size`` bytes of an LZ4 block and
    stops, reading no more than ``src_size`` bytes nor writing more than ``dst_capacity``. It keeps
    no state, so unlike `decompress_into_address` it serves forked children too."""
    if not _loaded:
        _load()
    return _lz4_prefix


def decompress_into_address(frame: bytes, address: int, nbytes: int) -> bool:
    """Decode the Blosc frame ``frame`` into the ``nbytes`` writable bytes at ``address``;
    False, with the bytes there undefined, when the frame is not one for c-blosc2 or it refused
    it (the caller then decodes with numcodecs).

    ``frame`` must already have been checked to declare ``nbytes`` decoded bytes and exactly
    ``len(frame)`` compressed ones (`asyncarr.codecs.bounded.check_blosc_frame`).
    """
    decompress = _decompress if _loaded else _load()
    if decompress is None or type(frame) is not bytes or len(frame) < _START.size:
        return False
    version, codec_version, flags, typesize, _, blocksize, _, first_block = _START.unpack_from(frame)
    if (
        version not in _BLOSC1_FORMATS
        or codec_version != 1  # c-blosc 1 knows only format 1 of every codec
        or not _FLAGS_BOTH_READ_ALIKE[flags]
        or blocksize != nbytes  # one block: c-blosc 1 sets its size to the chunk's
        or not typesize
        or nbytes % typesize  # an item size that does not divide the chunk: the two libraries' leftovers differ
        or not (flags & _MEMCPYED or _streams_tile(frame, first_block))
    ):
        return False
    return decompress(frame, len(frame), address, nbytes) == nbytes


def _streams_tile(frame: bytes, position: int) -> bool:
    """Whether the one block of ``frame``, from ``position``, is compressed streams of positive
    sizes that end where the frame does.

    c-blosc2 reads a stream size of zero or below as a run of one byte value, which Blosc 1 never
    writes: c-blosc 1 refuses such a frame, c-blosc2 would fill the chunk with that byte.
    """
    if position < _START.size:
        return False
    end = len(frame)
    while position < end:
        if position + 4 > end:
            return False
        size = _INT32.unpack_from(frame, position)[0]
        if size <= 0:
            return False
        position += 4 + size
    return position == end
