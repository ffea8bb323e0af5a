"""A part of a chunk read from a local file decodes only the Blosc blocks it lies in, to the bytes
that decoding the whole frame gives, and a damaged frame never reads as anything else.

The reference is numcodecs decoding the whole frame (and NumPy, for what arrays return). The
reader answers False for anything it leaves to a whole read; the tests check both sides of that
line, and count the bytes a read takes from the file to show the blocks not needed stay unread.
"""

from __future__ import annotations

import struct
import threading

import numcodecs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numcodecs import blosc

import asyncarr.sync as za
from asyncarr.codecs.blosc_blocks import BlockReader, selection_byte_span
from asyncarr.errors import CodecError
from asyncarr.stores import LocalStore

CODECS = [("lz4", blosc.SHUFFLE), ("zstd", blosc.BITSHUFFLE), ("blosclz", blosc.SHUFFLE), ("zlib", blosc.NOSHUFFLE)]
# c-blosc 1 makes blocks of at least 64 KiB for the codecs it splits (all but zstd here): chunks
# of 1 MiB have several.


class _Stored:
    """A stored frame held in memory, read the way `LocalStore.open_sync` reads a file."""

    def __init__(self, data: bytes) -> None:
        self._data = bytes(data)
        self.size = len(self._data)
        self.bytes_read = 0

    def read(self, offset: int, nbytes: int) -> bytes:
        part = self._data[offset : offset + nbytes]
        self.bytes_read += len(part)
        return part

    def read_into(self, offset: int, buffer: memoryview) -> int:
        part = self._data[offset : offset + len(buffer)]
        buffer[: len(part)] = part
        self.bytes_read += len(part)
        return len(part)


def _field(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """A field that compresses at every item size: a random walk held for runs of eight items."""
    count = int(np.prod(shape))
    values = np.random.default_rng(7).normal(0, 50, -(-count // 8)).cumsum().repeat(8)[:count]
    return values.reshape(shape).astype(dtype)


def _frame(chunk: np.ndarray, cname: str, shuffle: int, blocksize: int) -> bytes:
    return numcodecs.Blosc(cname, 5, shuffle=shuffle, blocksize=blocksize).encode(chunk)


def _read_part(frame: bytes, nbytes: int, first: int, last: int) -> np.ndarray | None:
    out = np.full(nbytes, 0xAB, dtype=np.uint8)
    return out if BlockReader(nbytes).read_into(_Stored(frame), first, last, out) else None


@pytest.mark.parametrize(("cname", "shuffle"), CODECS)
@pytest.mark.parametrize("dtype", ["u1", "<u2", "<f4", "<f8"])
def test_every_single_block_decodes_to_the_bytes_of_the_whole_decode(cname: str, shuffle: int, dtype: str) -> None:
    chunk = _field((512, 2048 // np.dtype(dtype).itemsize), dtype)
    frame = _frame(chunk, cname, shuffle, blocksize=4096)
    whole = np.frombuffer(blosc.decompress(frame), dtype=np.uint8)
    _, _, flags, _, nbytes, blocksize, _ = struct.unpack_from("<BBBBiii", frame)
    assert nbytes // blocksize >= 4 and not flags & 0x02  # several compressed blocks, or nothing here is tested
    for block in range(nbytes // blocksize):
        start = block * blocksize
        part = _read_part(frame, nbytes, start + 3, start + blocksize - 5)
        assert part is not None, f"block {block} was left to a whole read"
        np.testing.assert_array_equal(part[start : start + blocksize], whole[start : start + blocksize])


@settings(max_examples=150, deadline=None)
@given(
    codec=st.sampled_from(CODECS),
    dtype=st.sampled_from(["u1", "<u2", "<f4", "<f8"]),
    rows=st.integers(1, 64),
    blocksize=st.sampled_from([256, 1000, 4096, 10000, 70000]),
    span=st.tuples(st.floats(0, 1), st.floats(0, 1)),
)
def test_any_span_reads_as_the_whole_decode_or_is_left_to_it(
    codec: tuple[str, int], dtype: str, rows: int, blocksize: int, span: tuple[float, float]
) -> None:
    chunk = _field((rows, 2048), dtype)
    frame = _frame(chunk, codec[0], codec[1], blocksize)
    whole = np.frombuffer(blosc.decompress(frame), dtype=np.uint8)
    first, last = sorted(int(f * (chunk.nbytes - 1)) for f in span)
    part = _read_part(frame, chunk.nbytes, first, last)
    if part is not None:
        np.testing.assert_array_equal(part[first : last + 1], whole[first : last + 1])


def test_what_is_left_to_a_whole_read() -> None:
    chunk = _field((64, 256), "<f4")
    several = _frame(chunk, "zstd", blosc.SHUFFLE, 8192)
    assert _read_part(several, chunk.nbytes, 0, 10) is not None
    assert _read_part(several, chunk.nbytes, 0, chunk.nbytes - 1) is None  # every block
    assert _read_part(_frame(chunk, "zstd", blosc.SHUFFLE, chunk.nbytes), chunk.nbytes, 0, 10) is None  # one block
    assert _read_part(numcodecs.Blosc("zstd", 0).encode(chunk), chunk.nbytes, 0, 10) is None  # stored uncompressed
    uneven = _frame(_field((61, 256), "<f4"), "zstd", blosc.SHUFFLE, 8192)  # its last block is shorter
    assert _read_part(uneven, 61 * 1024, 61 * 1024 - 8, 61 * 1024 - 1) is None
    assert _read_part(uneven, 61 * 1024, 0, 8) is not None
    assert _read_part(several, chunk.nbytes + 4, 0, 10) is None  # not the size the array expects


def _damaged(frame: bytes, changes: list[tuple[int, int]]) -> bytes:
    damaged = bytearray(frame)
    for position, value in changes:
        damaged[position % len(damaged)] = value
    return bytes(damaged)


def _agrees_with_whole_decode(frame: bytes, nbytes: int, first: int, last: int) -> None:
    """A part read of ``frame`` is either left to a whole read or is what the whole decode gives there."""
    part = _read_part(frame, nbytes, first, last)
    if part is None:
        return
    try:
        whole = np.frombuffer(blosc.decompress(frame), dtype=np.uint8)
    except (RuntimeError, ValueError):
        return  # damage outside the blocks read: those reads find it, this one needs none of it
    if whole.nbytes == nbytes:
        np.testing.assert_array_equal(part[first : last + 1], whole[first : last + 1])


@pytest.mark.parametrize(("cname", "shuffle"), CODECS)
def test_every_header_and_offset_byte_set_to_telling_values_reads_as_the_whole_decode(cname: str, shuffle: int) -> None:
    chunk = _field((256, 1024), "<f4")
    frame = _frame(chunk, cname, shuffle, 16384)
    blocksize = struct.unpack_from("<i", frame, 8)[0]
    nblocks = chunk.nbytes // blocksize
    for position in range(16 + 4 * nblocks + 8):  # the header, every block's offset, the first stream's size
        for value in {0, 1, 2, 0x10, 0x7F, 0x80, 0xFF, frame[position] ^ 1, frame[position] + 1 & 0xFF}:
            damaged = _damaged(frame, [(position, value)])
            _agrees_with_whole_decode(damaged, chunk.nbytes, blocksize * 3 + 10, blocksize * 4 + 10)
            _agrees_with_whole_decode(damaged, chunk.nbytes, 100, 200)


@settings(max_examples=300, deadline=None)
@given(
    codec=st.sampled_from(CODECS),
    changes=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=4),
    span=st.tuples(st.integers(0, 2**18 - 1), st.integers(0, 2**18 - 1)),
)
def test_damaged_frames_read_as_the_whole_decode_or_are_left_to_it(
    codec: tuple[str, int], changes: list[tuple[int, int]], span: tuple[int, int]
) -> None:
    chunk = _field((64, 1024), "<f4")
    frame = _damaged(_frame(chunk, codec[0], codec[1], 4096), changes)
    first, last = sorted(span)
    _agrees_with_whole_decode(frame, chunk.nbytes, first, last)


def test_a_truncated_frame_is_left_to_the_whole_read() -> None:
    chunk = _field((256, 1024), "<f4")
    frame = _frame(chunk, "lz4", blosc.SHUFFLE, 4096)
    for cut in (len(frame) - 1, len(frame) // 2, 40, 17):
        assert _read_part(frame[:cut], chunk.nbytes, 2**18 * 3, 2**18 * 3 + 100) is None


@pytest.mark.parametrize(
    ("selection", "expected"),
    [
        ((slice(None), slice(None)), (0, 4 * 12 * 10 - 1)),
        ((3, slice(None)), (4 * 30, 4 * 40 - 1)),
        ((slice(2, 5), slice(1, 3)), (4 * 21, 4 * 43 - 1)),
        ((slice(None, None, -1), 0), (0, 4 * 110 + 3)),
        ((slice(1, 10, 4), slice(9, None)), (4 * 19, 4 * 99 + 3)),
        ((np.array([7, 2]), np.array([0])), (4 * 20, 4 * 70 + 3)),
        ((-1, -1), (4 * 119, 4 * 119 + 3)),
        ((slice(3, 3), slice(None)), None),  # nothing
        ((np.array([True, False]), 0), None),  # not an integer array
        ((slice(None),), None),  # not one entry per dimension
    ],
)
def test_selection_byte_span(selection: tuple, expected: tuple[int, int] | None) -> None:
    assert selection_byte_span(selection, (12, 10), 4) == expected


_bounds = st.one_of(st.none(), st.integers(-14, 14))


@settings(max_examples=400, deadline=None)
@given(
    shape=st.lists(st.integers(1, 7), min_size=1, max_size=3),
    parts=st.lists(
        st.one_of(st.builds(slice, _bounds, _bounds, st.sampled_from([None, 1, 1, 2, -1, -3])), st.integers(-8, 8)),
        min_size=3,
        max_size=3,
    ),
)
def test_selection_byte_span_is_where_numpy_finds_the_elements(shape: list[int], parts: list) -> None:
    # Every form an indexer or a user gives: unit-step slices inside the axis (the fast way),
    # ends outside it, other steps, integers; the reference is NumPy's own selection of the offsets.
    selection = tuple(
        part if isinstance(part, slice) or -size <= part < size else part % size
        for part, size in zip(parts[: len(shape)], shape, strict=True)
    )
    offsets = np.arange(int(np.prod(shape))).reshape(shape)[selection]
    expected = (int(offsets.min()) * 4, int(offsets.max()) * 4 + 3) if np.size(offsets) else None
    assert selection_byte_span(selection, tuple(shape), 4) == expected


def _array(tmp_path, compressor, shape=(512, 512), chunks=(256, 512), dtype="<f4", zarr_format=2):
    data = _field(shape, dtype)
    path = str(tmp_path / "a.zarr")
    if zarr_format == 2:
        z = za.open_array(path, mode="w", shape=shape, chunks=chunks, dtype=dtype, compressor=compressor, zarr_format=2)
    else:
        z = za.create_array(path, shape=shape, chunks=chunks, dtype=dtype, compressors=compressor, zarr_format=3)
    z[...] = data
    return path, data


def _bytes_read(path: str, read) -> int:
    store = LocalStore(path, read_only=True)
    z = za.open_array(store, mode="r")
    store.reset_metrics()
    read(z)
    return store.metrics().bytes_read


def test_a_row_of_a_chunk_reads_only_the_block_it_lies_in(tmp_path) -> None:
    path, data = _array(tmp_path, numcodecs.Blosc("lz4", 5, blosc.SHUFFLE, blocksize=16 * 1024))
    z = za.open_array(path, mode="r")
    np.testing.assert_array_equal(z[300], data[300])
    np.testing.assert_array_equal(z[300:302, 7:500], data[300:302, 7:500])
    whole_chunk = (tmp_path / "a.zarr" / "1.0").stat().st_size
    row = _bytes_read(path, lambda a: a[300])
    # One of 8 blocks of 64 KiB (c-blosc 1 multiplies the 16 KiB asked for by the item size), and the header.
    assert row < whole_chunk / 4, (row, whole_chunk)
    assert _bytes_read(path, lambda a: a[256:512]) == whole_chunk  # a whole chunk is read whole, once


def test_a_row_of_an_uncompressed_chunk_reads_only_its_bytes(tmp_path) -> None:
    path, data = _array(tmp_path, None)
    np.testing.assert_array_equal(za.open_array(path, mode="r")[300, 5:9], data[300, 5:9])
    assert _bytes_read(path, lambda a: a[300, 5:9]) == 16


@pytest.mark.parametrize("zarr_format", [2, 3])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_parts_of_chunks_read_as_numpy_does(tmp_path_factory, zarr_format: int, data: st.DataObject) -> None:
    tmp_path = tmp_path_factory.mktemp("parts")
    # Chunks of 10 KiB in five Zstandard blocks (c-blosc 1 keeps small blocks for the codec it does not split).
    if zarr_format == 2:
        compressor = numcodecs.Blosc("zstd", 3, blosc.BITSHUFFLE, blocksize=2048)
    else:
        compressor = [za.codecs.BloscCodec(cname="zstd", clevel=3, shuffle="shuffle", blocksize=2048)]
    path, expected = _array(
        tmp_path, compressor, shape=(100, 90), chunks=(40, 64), dtype="<i4", zarr_format=zarr_format
    )
    z = za.open_array(path, mode="r")
    selection = tuple(
        data.draw(
            st.one_of(
                st.integers(-size, size - 1),
                st.builds(
                    slice,
                    st.none() | st.integers(-size, size),
                    st.none() | st.integers(-size, size),
                    st.none() | st.integers(1, 7) | st.integers(-7, -1),
                ),
            )
        )
        for size in expected.shape
    )
    np.testing.assert_array_equal(z[selection], expected[selection])
    rows = data.draw(st.lists(st.integers(0, 99), min_size=1, max_size=5, unique=True))
    np.testing.assert_array_equal(z.oindex[rows, 10:50], expected[rows][:, 10:50])


def _chunk_path(tmp_path) -> tuple[str, np.ndarray, object]:
    path, data = _array(tmp_path, numcodecs.Blosc("lz4", 5, blosc.SHUFFLE, blocksize=16 * 1024))
    return path, data, tmp_path / "a.zarr" / "1.0"


def test_damage_in_a_block_a_read_needs_names_the_chunk(tmp_path) -> None:
    path, data, chunk = _chunk_path(tmp_path)
    frame = bytearray(chunk.read_bytes())
    offsets = struct.unpack_from("<8i", frame, 16)
    frame[offsets[4] + 4 : offsets[4] + 64] = bytes(60)  # the first stream of block 4 (rows 384-415)
    chunk.write_bytes(bytes(frame))
    z = za.open_array(path, mode="r")
    with pytest.raises(CodecError, match=r"a\.zarr/1\.0"):
        z[400]
    with pytest.raises(CodecError, match=r"a\.zarr/1\.0"):
        z[256:]
    # Rows in other blocks need none of the damaged bytes, as a part of a shard needs none of another's.
    np.testing.assert_array_equal(z[300], data[300])


def test_a_truncated_chunk_file_names_the_chunk(tmp_path) -> None:
    path, _, chunk = _chunk_path(tmp_path)
    chunk.write_bytes(chunk.read_bytes()[:-1000])
    with pytest.raises(CodecError, match=r"a\.zarr/1\.0"):
        za.open_array(path, mode="r")[500]


def test_a_thread_keeps_no_frame_buffer_larger_than_the_cap_between_reads() -> None:
    from asyncarr.codecs import blosc_blocks

    small = blosc_blocks._frame_buffer(1000)
    assert blosc_blocks._frame_buffer(500) is small  # reused
    huge = blosc_blocks._frame_buffer(blosc_blocks._KEPT_FRAME_BYTES + 1)  # a stranger's "block"
    assert len(huge) == blosc_blocks._KEPT_FRAME_BYTES + 1
    kept = blosc_blocks._frame_buffer(1000)
    assert kept is not huge and len(kept) <= blosc_blocks._KEPT_FRAME_BYTES


def _stream_bytes_read(frame: bytes, nbytes: int, first: int, last: int) -> tuple[np.ndarray | None, int]:
    stored = _Stored(frame)
    out = np.full(nbytes, 0xAB, dtype=np.uint8)
    return (out if BlockReader(nbytes).read_into(stored, first, last, out) else None), stored.bytes_read


@pytest.mark.parametrize("dtype", ["u1", "<u2", "<f4", "<f8"])
@pytest.mark.parametrize("cname", ["lz4", "lz4hc"])
def test_items_early_in_an_lz4_block_decode_from_its_streams_alone(dtype: str, cname: str) -> None:
    itemsize = np.dtype(dtype).itemsize
    chunk = _field((256, 4096 // itemsize), dtype)  # 1 MiB
    frame = _frame(chunk, cname, blosc.SHUFFLE, 256 * 1024 // itemsize)  # c-blosc 1 multiplies it by the item size
    whole = np.frombuffer(blosc.decompress(frame), dtype=np.uint8)
    blocksize = struct.unpack_from("<i", frame, 8)[0]
    nblocks = chunk.nbytes // blocksize
    assert nblocks == 4
    offsets = [*struct.unpack_from(f"<{nblocks}i", frame, 16), len(frame)]
    for block in range(nblocks):
        start = block * blocksize
        for first, last in [(0, 4095), (100, 9000), (blocksize // 2, blocksize // 2 + 7), (4096 * 40, 4096 * 41 - 1)]:
            part, read = _stream_bytes_read(frame, chunk.nbytes, start + first, start + last)
            assert part is not None
            span = slice(start + first, start + last + 1)
            np.testing.assert_array_equal(part[span], whole[span])
            if last < 10_000:  # the streams' first bytes, not the block's (compressed) bytes
                assert read < 4096 + (offsets[block + 1] - offsets[block]) / 4, (read, offsets)


def test_items_of_streams_stored_uncompressed_read_as_the_whole_decode() -> None:
    # Smooth values with noise in their low bytes: LZ4 shrinks the streams of the high bytes, not those of the low.
    noise = (np.linspace(0, 1, 256 * 1024) + np.random.default_rng(3).normal(0, 1e-4, 256 * 1024)).astype("<f4")
    noise = noise.reshape(256, 1024)
    frame = _frame(noise, "lz4", blosc.SHUFFLE, 256 * 1024 // 4)
    whole = np.frombuffer(blosc.decompress(frame), dtype=np.uint8)
    position, sizes = struct.unpack_from("<i", frame, 16)[0], []
    for _ in range(4):
        sizes.append(struct.unpack_from("<i", frame, position)[0])
        position += 4 + sizes[-1]
    assert 256 * 1024 // 4 in sizes and min(sizes) < 256 * 1024 // 4, sizes  # stored as it is, and compressed
    for first, last in [(0, 3), (5, 4000), (256 * 1024 + 17, 256 * 1024 + 9000)]:
        part, read = _stream_bytes_read(frame, noise.nbytes, first, last)
        assert part is not None
        np.testing.assert_array_equal(part[first : last + 1], whole[first : last + 1])
        assert read < 4096 + 4 * (4 + 9000 // 4 + 64 + 255)


def test_a_stream_longer_than_its_first_read_is_read_whole(monkeypatch) -> None:
    from asyncarr.codecs import blosc_blocks

    monkeypatch.setattr(blosc_blocks, "_lz4_bytes_for", lambda decoded_bytes: 8)  # always too few
    smooth = _field((256, 1024), "<f4")
    noisy = (np.linspace(0, 1, 256 * 1024) + np.random.default_rng(3).normal(0, 1e-4, 256 * 1024)).astype("<f4")
    for chunk in (smooth, noisy.reshape(256, 1024)):  # streams all compressed; some stored as they are
        frame = _frame(chunk, "lz4", blosc.SHUFFLE, 256 * 1024 // 4)
        whole = np.frombuffer(blosc.decompress(frame), dtype=np.uint8)
        for first, last in [(256 * 1024 + 4096, 256 * 1024 + 8191), (0, 3), (100, 50_000)]:
            part = _read_part(frame, chunk.nbytes, first, last)
            assert part is not None
            np.testing.assert_array_equal(part[first : last + 1], whole[first : last + 1])


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_a_row_across_many_chunks_is_read_on_the_calling_thread_alone(tmp_path, monkeypatch, zarr_format: int) -> None:
    from asyncarr.chunk_io import ChunkIO

    compressor = (
        numcodecs.Blosc("lz4", 5, blosc.SHUFFLE)
        if zarr_format == 2
        else [za.codecs.BloscCodec(cname="lz4", clevel=5, shuffle="shuffle", typesize=4)]
    )
    path, data = _array(tmp_path, compressor, shape=(1024, 4096), chunks=(512, 512), zarr_format=zarr_format)
    z = za.open_array(path, mode="r")
    threads: list[int] = []
    read_batch = ChunkIO._read_batch

    def recording(self, *args, **kwargs):
        threads.append(threading.get_ident())
        return read_batch(self, *args, **kwargs)

    monkeypatch.setattr(ChunkIO, "_read_batch", recording)
    np.testing.assert_array_equal(z[512], data[512])  # the first read learns the frames' block size
    threads.clear()
    np.testing.assert_array_equal(z[512], data[512])  # 8 chunks, 2 KiB decoded of each
    assert threads == [threading.get_ident()]
    threads.clear()
    np.testing.assert_array_equal(z[...], data)  # 16 whole chunks of 1 MiB: the codec threads share them
    assert len(threads) > 1
