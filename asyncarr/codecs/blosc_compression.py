"""Blosc compression of whole chunks through numcodecs' compression function, without its codec wrapper.

``numcodecs.Blosc.encode`` first passes its input through ``ensure_contiguous_ndarray`` (type
checks, a flattening reshape, a size check): about 4 us of Python a call on this project's VM,
against 16 us for compressing a 2 KiB chunk with Zstandard. When many small chunks are written
on two threads, that Python holds the GIL while the other thread waits for it (round 11 in
``docs/performance.md``). The plain encoders of `asyncarr.codecs.pipeline` hand each chunk
(made C-contiguous first, as ``Blosc.encode`` requires) straight to ``numcodecs.blosc.compress``
with the codec's own settings: the same function ``Blosc.encode`` ends in, so the same bytes.

Whether the direct call gives those bytes is checked once, on a probe, before it is used: a
setting the codec keeps out of its configuration (numcodecs' ``typesize``), a dtype the buffer
protocol refuses (datetimes), or another numcodecs version's signature sends every chunk back
through ``Blosc.encode``.

`blosc_compressor_into` compresses into memory the caller owns, through the C function that
numcodecs' extension module exports (c-blosc 1's ``blosc_compress_ctx``, the one numcodecs
itself calls off the main thread). A shard's inner chunks are laid end to end in one buffer:
compressed straight there, they skip a copy of every compressed byte and the fresh memory of
each chunk's own `bytes` (W6's local write, round 17 in ``docs/performance.md``). It is checked
on the same probe, byte for byte against ``codec.encode``; a numcodecs built another way (no such
symbol, or another Blosc behind it) gives None, and the caller keeps `blosc_compressor`.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
from numcodecs import blosc

__all__ = ["BLOSC_MAX_OVERHEAD", "CompressInto", "blosc_compressor", "blosc_compressor_into"]

BLOSC_MAX_OVERHEAD = 16
"""Bytes a Blosc frame may add to its input: a destination this much larger always holds it."""
_AUTOSHUFFLE, _SHUFFLE, _BITSHUFFLE = -1, 1, 2

CompressInto = Callable[[np.ndarray, int, int], int]
"""``compress(chunk, address, capacity)``: the frame's length, written at ``address``."""

_PROBE_ITEMS = 257
"""Items in the probe: enough for Blosc to shuffle and compress them, few enough to cost nothing."""


def blosc_compressor(codec: Any, dtype: np.dtype, typesize: int | None) -> Callable[[np.ndarray], Any]:
    """A function compressing an array of ``dtype`` (any layout: its C-ordered bytes) as
    ``codec.encode`` (a numcodecs Blosc codec whose typesize is ``typesize``, None for the
    buffer's item size) would its C-contiguous copy, byte for byte. Where the direct call does not
    give ``codec.encode``'s bytes on a probe, ``codec.encode`` of that copy."""
    settings = _settings(codec)
    if settings is None:
        return codec.encode
    compress, contiguous = blosc.compress, np.ascontiguousarray
    largest = getattr(codec, "max_buffer_size", 2**31 - 1)
    encode_checked = codec.encode

    def compress_chunk(chunk: np.ndarray) -> Any:
        if not chunk.flags.c_contiguous:
            chunk = contiguous(chunk)
        if chunk.nbytes > largest:  # Blosc.encode's own error for what Blosc cannot take
            return encode_checked(chunk)
        return compress(chunk, *settings, typesize)

    def encode_copy(chunk: np.ndarray) -> Any:
        return encode_checked(contiguous(chunk))

    probe = _probe(dtype)
    try:
        same = bytes(compress_chunk(probe)) == bytes(codec.encode(probe))
    except Exception:  # the direct call refuses what Blosc.encode takes (or both refuse): keep Blosc.encode
        same = False
    return compress_chunk if same else encode_copy


def _settings(codec: Any) -> tuple[bytes, Any, Any, Any] | None:
    """A numcodecs Blosc codec's compressor name (as bytes), level, shuffle and block size, as its
    configuration gives them; None where it lacks one or names its compressor outside ASCII."""
    config = codec.get_config()
    try:
        return str(config["cname"]).encode("ascii"), config["clevel"], config["shuffle"], config["blocksize"]
    except (KeyError, TypeError, UnicodeEncodeError):
        return None


def _probe(dtype: np.dtype) -> np.ndarray:
    """An array of ``dtype`` whose bytes vary, so that shuffling and the type size show in the output."""
    pattern = bytes(range(251))  # a prime length: items of any size see different bytes
    nbytes = _PROBE_ITEMS * dtype.itemsize
    return np.frombuffer((pattern * (nbytes // len(pattern) + 1))[:nbytes], dtype=dtype)


_load_lock = threading.Lock()
_compress_ctx: Any = None
_loaded = False


def _blosc_compress_ctx() -> Any:
    """c-blosc 1's ``blosc_compress_ctx`` from numcodecs' extension module, or None where it has none."""
    global _compress_ctx, _loaded
    with _load_lock:
        if not _loaded:
            _loaded = True
            try:
                function = ctypes.CDLL(blosc.__file__).blosc_compress_ctx
            except (OSError, AttributeError, TypeError):
                return None
            # int blosc_compress_ctx(int clevel, int doshuffle, size_t typesize, size_t nbytes,
            #     const void* src, void* dest, size_t destsize, const char* compressor,
            #     size_t blocksize, int numinternalthreads); ctypes releases the GIL for the call.
            function.argtypes = [
                ctypes.c_int,
                ctypes.c_int,
                ctypes.c_size_t,
                ctypes.c_size_t,
                ctypes.c_void_p,
                ctypes.c_void_p,
                ctypes.c_size_t,
                ctypes.c_char_p,
                ctypes.c_size_t,
                ctypes.c_int,
            ]
            function.restype = ctypes.c_int
            _compress_ctx = function
        return _compress_ctx


def blosc_compressor_into(codec: Any, dtype: np.dtype, typesize: int | None) -> CompressInto | None:
    """A function compressing a C-contiguous array of ``dtype`` into ``capacity`` bytes at
    ``address`` (at least its size plus `BLOSC_MAX_OVERHEAD`), returning the frame's length: the
    bytes `blosc_compressor` gives for the same codec. None where that cannot be had this way."""
    compress_ctx, settings = _blosc_compress_ctx(), _settings(codec)
    if compress_ctx is None or settings is None:
        return None
    cname = settings[0]
    try:  # C ints for ctypes
        clevel, shuffle, blocksize = (int(value) for value in settings[1:])
    except (TypeError, ValueError):
        return None
    if blocksize < 0:
        return None
    itemsize = typesize if typesize is not None else dtype.itemsize
    if shuffle == _AUTOSHUFFLE:  # what numcodecs' compress does with it
        shuffle = _BITSHUFFLE if itemsize == 1 else _SHUFFLE
    largest = getattr(codec, "max_buffer_size", 2**31 - 1)

    def compress_into(chunk: np.ndarray, address: int, capacity: int) -> int:
        if not chunk.flags.c_contiguous:  # Blosc reads ``nbytes`` from the first element's address
            raise ValueError("Blosc compresses C-contiguous arrays only")
        nbytes = chunk.nbytes
        if nbytes > largest:
            raise ValueError(f"Codec does not support buffers of > {largest} bytes")
        if capacity < nbytes + BLOSC_MAX_OVERHEAD:
            raise ValueError(f"{capacity} bytes cannot hold a Blosc frame of {nbytes} bytes")
        written = compress_ctx(
            clevel, shuffle, itemsize, nbytes, chunk.ctypes.data, address, capacity, cname, blocksize, 1
        )
        if written <= 0:
            raise RuntimeError(f"error during blosc compression: {written}")
        return int(written)

    probe = _probe(dtype)
    frame = np.empty(probe.nbytes + BLOSC_MAX_OVERHEAD, dtype=np.uint8)
    try:
        length = compress_into(probe, frame.ctypes.data, frame.nbytes)
        same = frame[:length].tobytes() == bytes(codec.encode(probe))
    except Exception:  # refused here or by Blosc.encode: the caller keeps the other way
        same = False
    return compress_into if same else None
