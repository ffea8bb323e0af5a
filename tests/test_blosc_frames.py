"""c-blosc2 decodes small Blosc frames exactly as numcodecs does, and refuses what it should leave to numcodecs.

The reference is numcodecs (c-blosc 1) on the same frame. A frame the fast path refuses or
cannot take returns False, and the pipeline then decodes it with numcodecs; these tests check
both sides of that line, and that damaged frames never crash the process or read past the bytes.
"""

from __future__ import annotations

import struct

import numcodecs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numcodecs import blosc

import asyncarr.sync as za
from asyncarr.codecs import blosc_frames
from asyncarr.codecs.blosc_frames import decompress_into_address, fast_decoder_available
from asyncarr.errors import CodecError

pytestmark = pytest.mark.skipif(not fast_decoder_available(), reason="needs the fast extra (blosc2)")


def _decode_fast(frame: bytes, nbytes: int) -> np.ndarray | None:
    out = np.full(nbytes, 0xAB, dtype=np.uint8)
    return out if decompress_into_address(frame, out.ctypes.data, nbytes) else None


def _field(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    values = np.random.default_rng(7).normal(0, 50, shape).cumsum(axis=-1)
    return values.astype(dtype)


@pytest.mark.parametrize("cname", ["blosclz", "lz4", "lz4hc", "zlib", "zstd"])
@pytest.mark.parametrize("shuffle", [blosc.NOSHUFFLE, blosc.SHUFFLE, blosc.BITSHUFFLE])
@pytest.mark.parametrize("dtype", ["u1", "<u2", "<f4", "<f8"])
def test_small_frames_decode_as_numcodecs_does(cname: str, shuffle: int, dtype: str) -> None:
    chunk = _field((32, 32), dtype)
    frame = numcodecs.Blosc(cname, 5, shuffle=shuffle).encode(chunk)
    fast = _decode_fast(frame, chunk.nbytes)
    assert fast is not None, "a one-block Blosc 1 frame should take the fast path"
    assert fast.tobytes() == blosc.decompress(frame) == chunk.tobytes()


def test_frames_of_several_blocks_are_left_to_numcodecs() -> None:
    chunk = _field((1024, 1024), "<f4")  # 4 MiB: Blosc splits it into many blocks
    frame = numcodecs.Blosc("zstd", 1).encode(chunk)
    nbytes, blocksize = struct.unpack_from("<II", frame, 4)
    assert blocksize < nbytes
    assert _decode_fast(frame, chunk.nbytes) is None


@pytest.mark.parametrize(
    ("byte", "value", "why"),
    [
        (0, 3, "a Blosc 2 format version: c-blosc 1 (numcodecs) refuses those"),
        (2, 0x08 | 0x01, "the delta flag, which c-blosc 1 ignores and c-blosc2 applies"),
        (2, 0x04 | 0x01, "shuffle and bitshuffle together: c-blosc2's extended header"),
        (2, 2 << 5, "snappy, which c-blosc2 does not build"),
        (2, 6 << 5, "a codec number neither library knows"),
    ],
)
def test_headers_read_differently_by_the_two_libraries_go_to_numcodecs(byte: int, value: int, why: str) -> None:
    chunk = _field((16, 16), "<u2")
    frame = bytearray(numcodecs.Blosc("lz4", 5, shuffle=blosc.NOSHUFFLE).encode(chunk))
    frame[byte] = value if byte == 0 else (frame[byte] & 0x02) | value  # keep the memcpyed bit only
    assert _decode_fast(bytes(frame), chunk.nbytes) is None, why


@pytest.mark.parametrize("fill", [0x00, 0xFF, 0x80])
def test_streams_c_blosc2_would_read_as_runs_of_one_byte_go_to_numcodecs(fill: int) -> None:
    chunk = _field((32, 32), "<u2")
    frame = bytearray(numcodecs.Blosc("zstd", 1).encode(chunk))
    frame[20:] = bytes([fill]) * (len(frame) - 20)
    assert _decode_fast(bytes(frame), chunk.nbytes) is None
    with pytest.raises(RuntimeError):
        blosc.decompress(bytes(frame))


def test_a_frame_whose_offsets_point_past_its_end_is_refused_not_read_beyond() -> None:
    chunk = _field((32, 32), "<u2")
    frame = bytearray(numcodecs.Blosc("zstd", 1).encode(chunk))
    struct.pack_into("<i", frame, 16, len(frame) + 4096)  # the first block starts past the end
    assert _decode_fast(bytes(frame), chunk.nbytes) is None
    with pytest.raises(RuntimeError):
        blosc.decompress(bytes(frame))  # and numcodecs, which the pipeline then asks, refuses it too


@settings(max_examples=1500, deadline=None)
@given(
    codec=st.sampled_from([("zstd", 0), ("zstd", 1), ("lz4", 1), ("lz4", 2), ("blosclz", 1), ("zlib", 0)]),
    damage=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=3),
)
def test_a_damaged_frame_the_fast_path_decodes_is_one_numcodecs_decodes_the_same(
    codec: tuple[str, int], damage: list[tuple[int, int]]
) -> None:
    chunk = _field((32, 32), "<u2")
    frame = bytearray(numcodecs.Blosc(codec[0], 5, shuffle=codec[1]).encode(chunk))
    for position, value in damage:
        frame[position % len(frame)] = value
    # The declared sizes are checked before either library sees the frame (check_blosc_frame).
    struct.pack_into("<I", frame, 4, chunk.nbytes)
    struct.pack_into("<I", frame, 12, len(frame))
    fast = _decode_fast(bytes(frame), chunk.nbytes)
    if fast is not None:  # what the fast path decodes, numcodecs decodes to the same bytes
        assert fast.tobytes() == blosc.decompress(bytes(frame))


def test_arrays_of_small_blosc_chunks_read_through_the_fast_path(tmp_path, monkeypatch) -> None:
    data = _field((96, 80), "<u2")
    z = za.create_array(
        str(tmp_path / "a.zarr"),
        shape=data.shape,
        chunks=(16, 16),
        dtype=data.dtype,
        compressors=[za.codecs.BloscCodec(cname="zstd", clevel=1, shuffle="shuffle")],
    )
    z[...] = data
    calls = []
    original = blosc_frames.decompress_into_address

    def counted(frame: bytes, address: int, nbytes: int) -> bool:
        calls.append(nbytes)
        return original(frame, address, nbytes)

    monkeypatch.setattr("asyncarr.codecs.pipeline.decompress_into_address", counted)
    reopened = za.open_array(str(tmp_path / "a.zarr"), mode="r")
    np.testing.assert_array_equal(reopened[...], data)
    np.testing.assert_array_equal(reopened[5:37, 3:70], data[5:37, 3:70])
    assert len(calls) >= 30  # every chunk of the full read went to c-blosc2


def test_a_corrupt_small_chunk_still_names_its_key(tmp_path) -> None:
    z = za.create_array(
        str(tmp_path / "a.zarr"),
        shape=(32, 32),
        chunks=(16, 16),
        dtype="<u2",
        compressors=[za.codecs.BloscCodec(cname="zstd", clevel=1)],
    )
    z[...] = _field((32, 32), "<u2")
    path = tmp_path / "a.zarr" / "c" / "1" / "0"
    frame = bytearray(path.read_bytes())
    frame[20:] = bytes(len(frame) - 20)  # the stream zeroed: c-blosc2 alone would read zeros from it
    path.write_bytes(bytes(frame))
    with pytest.raises(CodecError, match="c/1/0"):
        za.open_array(str(tmp_path / "a.zarr"), mode="r")[...]


@pytest.mark.parametrize(("cname", "shuffle"), [("zstd", 2), ("lz4", 1), ("blosclz", 0)])
def test_every_value_of_every_header_byte_decodes_as_numcodecs_or_goes_to_it(cname: str, shuffle: int) -> None:
    # The fuzz above samples; here the header and the first stream's size are tried exhaustively
    # (an exhaustive run over whole frames, 4.7 million of them, found the item-size rule).
    chunk = _field((17, 9), "<u2")
    original = numcodecs.Blosc(cname, 5, shuffle=shuffle).encode(chunk)
    out = np.empty(chunk.nbytes, dtype=np.uint8)
    for position in range(min(len(original), 28)):
        for value in range(256):
            frame = bytearray(original)
            frame[position] = value
            struct.pack_into("<I", frame, 4, chunk.nbytes)
            struct.pack_into("<I", frame, 12, len(frame))
            if decompress_into_address(bytes(frame), out.ctypes.data, chunk.nbytes):
                assert out.tobytes() == blosc.decompress(bytes(frame)), (position, value)


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs fork")
def test_a_forked_child_decodes_with_numcodecs(tmp_path) -> None:
    # c-blosc2's own lock may be held by another thread at the fork: the child must not wait on it.
    import os

    chunk = _field((32, 32), "<u2")
    frame = numcodecs.Blosc("zstd", 1).encode(chunk)
    assert _decode_fast(frame, chunk.nbytes) is not None
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report whether the fast path is off and numcodecs still decodes
        fast_off = _decode_fast(frame, chunk.nbytes) is None and not fast_decoder_available()
        same = blosc.decompress(frame) == chunk.tobytes()
        os.write(writer, b"ok" if fast_off and same else b"no")
        os._exit(0)
    os.close(writer)
    answer = os.read(reader, 2)
    os.waitpid(pid, 0)
    assert answer == b"ok"
    assert _decode_fast(frame, chunk.nbytes) is not None  # the parent keeps it
