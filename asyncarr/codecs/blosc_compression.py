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
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numcodecs import blosc

__all__ = ["blosc_compressor"]

_PROBE_ITEMS = 257
"""Items in the probe: enough for Blosc to shuffle and compress them, few enough to cost nothing."""


def blosc_compressor(codec: Any, dtype: np.dtype, typesize: int | None) -> Callable[[np.ndarray], Any]:
    """A function compressing an array of ``dtype`` (any layout: its C-ordered bytes) as
    ``codec.encode`` (a numcodecs Blosc codec whose typesize is ``typesize``, None for the
    buffer's item size) would its C-contiguous copy, byte for byte. Where the direct call does not
    give ``codec.encode``'s bytes on a probe, ``codec.encode`` of that copy."""
    config = codec.get_config()
    try:
        settings = (str(config["cname"]).encode("ascii"), config["clevel"], config["shuffle"], config["blocksize"])
    except (KeyError, TypeError, UnicodeEncodeError):
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


def _probe(dtype: np.dtype) -> np.ndarray:
    """An array of ``dtype`` whose bytes vary, so that shuffling and the type size show in the output."""
    pattern = bytes(range(251))  # a prime length: items of any size see different bytes
    nbytes = _PROBE_ITEMS * dtype.itemsize
    return np.frombuffer((pattern * (nbytes // len(pattern) + 1))[:nbytes], dtype=dtype)
