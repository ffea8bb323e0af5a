"""The plain encoder: whole chunks of Blosc-compressed raw bytes encoded without the codec layers.

It must store exactly the bytes the general path (`CodecPipeline.encode`) stores, for every
layout a caller's chunk may come in, and be absent for every chain it does not cover.
"""

from __future__ import annotations

import json
from typing import Any

import numcodecs
import numpy as np
import pytest
from numcodecs import blosc

import asyncarr.sync as za
from asyncarr.codecs import CodecPipeline
from asyncarr.codecs.blosc_compression import BLOSC_MAX_OVERHEAD, blosc_compressor, blosc_compressor_into
from asyncarr.errors import CodecError
from asyncarr.stores import MemoryStore

CHUNKS = (6, 5)


def _blosc_v3(shuffle: str, typesize: int | None = None, cname: str = "zstd") -> dict[str, Any]:
    configuration: dict[str, Any] = {"cname": cname, "clevel": 3, "shuffle": shuffle, "blocksize": 0}
    if typesize is not None:
        configuration["typesize"] = typesize
    return {"name": "blosc", "configuration": configuration}


def _v2(dtype: str, **options: Any) -> CodecPipeline:
    options.setdefault("compressor", numcodecs.Blosc("zstd", 3, numcodecs.Blosc.SHUFFLE))
    z = za.create(shape=(12, 10), chunks=CHUNKS, dtype=dtype, zarr_format=2, store=MemoryStore(), **options)
    return z.async_array._pipeline


def _v3(dtype: str, codecs: list[dict[str, Any]]) -> CodecPipeline:
    z = za.create(shape=(12, 10), chunks=CHUNKS, dtype=dtype, zarr_format=3, codecs=codecs, store=MemoryStore())
    return z.async_array._pipeline


def _layouts(dtype: str) -> list[np.ndarray]:
    """One chunk's values as a caller may hold them: C-ordered, Fortran-ordered, a strided view."""
    rng = np.random.default_rng(4)
    values = (rng.integers(0, 200, size=(12, 10)) + rng.random((12, 10))).astype(dtype)
    return [np.ascontiguousarray(values[:6, :5]), np.asfortranarray(values[:6, :5]), values[::2, ::2][:6, :5]]


@pytest.mark.parametrize("dtype", ["u2", ">u2", "i4", "f8", "<c8", "S3", "bool"])
@pytest.mark.parametrize("shuffle", [numcodecs.Blosc.NOSHUFFLE, numcodecs.Blosc.SHUFFLE, numcodecs.Blosc.BITSHUFFLE])
def test_v2_plain_encoder_stores_the_bytes_of_the_general_path(dtype: str, shuffle: int) -> None:
    pipeline = _v2(dtype, compressor=numcodecs.Blosc("lz4", 5, shuffle))
    assert pipeline.plain_encoder is not None
    for chunk in _layouts(dtype):
        assert bytes(pipeline.plain_encoder(chunk)) == pipeline.encode(chunk, "k")


@pytest.mark.parametrize("dtype", ["u2", "i4", "f8", "<c8", "bool"])
@pytest.mark.parametrize(
    "blosc",
    [_blosc_v3("noshuffle"), _blosc_v3("shuffle", 4), _blosc_v3("bitshuffle", 2), _blosc_v3("noshuffle", 1, "lz4")],
)
def test_v3_plain_encoder_stores_the_bytes_of_the_general_path(dtype: str, blosc: dict[str, Any]) -> None:
    pipeline = _v3(dtype, [{"name": "bytes", "configuration": {"endian": "little"}}, blosc])
    assert pipeline.plain_encoder is not None
    for chunk in _layouts(dtype):
        assert bytes(pipeline.plain_encoder(chunk)) == pipeline.encode(chunk, "k")


@pytest.mark.parametrize(
    "pipeline",
    [
        pytest.param(lambda: _v2("u2", compressor=numcodecs.Zlib(1)), id="v2 zlib"),
        pytest.param(lambda: _v2("u2", compressor=None), id="v2 raw"),
        pytest.param(lambda: _v2("u2", order="F"), id="v2 order F"),
        pytest.param(lambda: _v2("u2", filters=[numcodecs.Delta("u2")]), id="v2 filters"),
        pytest.param(
            lambda: _v3("u2", [{"name": "bytes", "configuration": {"endian": "big"}}, _blosc_v3("shuffle", 2)]),
            id="v3 big-endian bytes",
        ),
        pytest.param(
            lambda: _v3(
                "u2",
                [
                    {"name": "transpose", "configuration": {"order": [1, 0]}},
                    {"name": "bytes", "configuration": {"endian": "little"}},
                    _blosc_v3("shuffle", 2),
                ],
            ),
            id="v3 transpose",
        ),
        pytest.param(
            lambda: _v3(
                "u2",
                [{"name": "bytes", "configuration": {"endian": "little"}}, _blosc_v3("shuffle", 2), {"name": "crc32c"}],
            ),
            id="v3 blosc then crc32c",
        ),
        pytest.param(lambda: _v3("u2", [{"name": "bytes", "configuration": {"endian": "little"}}]), id="v3 raw"),
    ],
)
def test_other_chains_have_no_plain_encoder(pipeline: Any) -> None:
    assert pipeline().plain_encoder is None


def test_chunks_written_through_the_plain_encoder_read_back_and_fail_by_key(tmp_path: Any) -> None:
    data = np.arange(120, dtype="u2").reshape(12, 10)
    codecs = [{"name": "bytes", "configuration": {"endian": "little"}}, _blosc_v3("shuffle", 2)]
    z = za.create(
        shape=(12, 10), chunks=CHUNKS, dtype="u2", zarr_format=3, codecs=codecs, store=str(tmp_path / "a.zarr")
    )
    assert z.async_array._pipeline.plain_encoder is not None
    z[...] = data
    np.testing.assert_array_equal(za.open_array(str(tmp_path / "a.zarr"), mode="r")[...], data)

    def refuse(chunk: np.ndarray) -> bytes:
        raise ValueError("the compressor refused")

    z.async_array._pipeline.__dict__["plain_encoder"] = refuse
    with pytest.raises(CodecError, match=r"chunk .*a\.zarr/c/1/0: cannot encode: the compressor refused"):
        z[6:, :5] = 7
    np.testing.assert_array_equal(za.open_array(str(tmp_path / "a.zarr"), mode="r")[...], data)  # nothing torn


def test_blosc_compressor_calls_numcodecs_directly_with_the_same_bytes() -> None:
    rng = np.random.default_rng(7)
    for dtype in ["u1", "<u2", ">i4", "f8", "<c16", "bool", "S3", [("a", "<i4"), ("b", "<f8")]]:
        chunk = np.frombuffer(rng.integers(0, 5, 600 * np.dtype(dtype).itemsize, dtype="u1").tobytes(), dtype=dtype)
        for shuffle in (numcodecs.Blosc.NOSHUFFLE, numcodecs.Blosc.SHUFFLE, numcodecs.Blosc.BITSHUFFLE):
            codec = numcodecs.Blosc("zstd", 1, shuffle)
            compress = blosc_compressor(codec, np.dtype(dtype), None)
            assert compress != codec.encode, dtype  # the direct call, not the fallback
            assert bytes(compress(chunk)) == codec.encode(chunk), (dtype, shuffle)
            wide = np.zeros((len(chunk), 2), dtype=chunk.dtype)
            wide[:, 0] = chunk
            strided = wide[:, 0]  # not contiguous: compressed as its contiguous copy
            assert bytes(compress(strided)) == codec.encode(chunk), (dtype, shuffle)


def test_blosc_compressor_keeps_blosc_encode_where_the_direct_call_differs_or_refuses() -> None:
    chunk = np.arange(4000, dtype="u1")
    # A typesize the codec holds but its configuration does not show: given, the direct call makes
    # the codec's bytes; not given, it would not, and Blosc.encode makes them.
    hidden = numcodecs.Blosc("lz4", 5, numcodecs.Blosc.SHUFFLE, typesize=4)
    assert bytes(blosc_compressor(hidden, np.dtype("u1"), None)(chunk)) == hidden.encode(chunk)
    assert bytes(blosc_compressor(hidden, np.dtype("u1"), 4)(chunk)) == hidden.encode(chunk)
    assert blosc.compress(chunk, b"lz4", 5, numcodecs.Blosc.SHUFFLE, 0, None) != hidden.encode(chunk)
    # Datetimes have no buffer of their own: numcodecs' Blosc.encode views them as integers first.
    plain = numcodecs.Blosc("lz4", 5, numcodecs.Blosc.SHUFFLE)
    dates = np.arange(0, 600, dtype="M8[s]").reshape(20, 30)[:, ::2]  # a strided view, copied first
    assert bytes(blosc_compressor(plain, dates.dtype, None)(dates)) == plain.encode(np.ascontiguousarray(dates))


def test_blosc_compressor_refuses_what_blosc_encode_refuses() -> None:
    codec = numcodecs.Blosc("lz4", 5, numcodecs.Blosc.SHUFFLE)
    codec.max_buffer_size = 1000  # as a chunk over Blosc's 2 GiB would, without allocating one
    compress = blosc_compressor(codec, np.dtype("f8"), None)
    assert bytes(compress(np.arange(100.0))) == codec.encode(np.arange(100.0))
    with pytest.raises(ValueError, match="1000") as direct:
        compress(np.arange(200.0))
    with pytest.raises(ValueError) as wrapped:
        codec.encode(np.arange(200.0))
    assert str(direct.value) == str(wrapped.value)


def test_v2_compressor_typesize_from_the_metadata_reaches_the_plain_encoder() -> None:
    store = MemoryStore()
    za.create(shape=(12, 10), chunks=CHUNKS, dtype="u1", zarr_format=2, store=store)
    metadata = json.loads(store.get_sync(".zarray"))
    metadata["compressor"] = {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0, "typesize": 4}
    store.set_sync(".zarray", json.dumps(metadata).encode())
    pipeline = za.open_array(store).async_array._pipeline
    assert pipeline.plain_encoder is not None
    for chunk in _layouts("u1"):
        assert bytes(pipeline.plain_encoder(chunk)) == pipeline.encode(chunk, "k")
        unshown = numcodecs.Blosc("lz4", 5, 1).encode(np.ascontiguousarray(chunk))
        assert bytes(pipeline.plain_encoder(chunk)) != unshown  # typesize 4 shows


@pytest.mark.parametrize("dtype", ["u1", "u2", "i4", "f8", "<c8", "bool"])
@pytest.mark.parametrize(
    "blosc",
    [_blosc_v3("noshuffle"), _blosc_v3("shuffle", 4), _blosc_v3("bitshuffle", 2), _blosc_v3("noshuffle", None, "lz4")],
)
def test_v3_plain_encoder_into_writes_the_bytes_of_the_general_path_where_it_is_told(
    dtype: str, blosc: dict[str, Any]
) -> None:
    pipeline = _v3(dtype, [{"name": "bytes", "configuration": {"endian": "little"}}, blosc])
    compress_into = pipeline.plain_encoder_into
    assert compress_into is not None
    for chunk in _layouts(dtype):
        chunk = np.ascontiguousarray(chunk)
        expected = pipeline.encode(chunk, "k")
        capacity = chunk.nbytes + BLOSC_MAX_OVERHEAD
        room = np.full(7 + capacity + 5, 0xAB, dtype=np.uint8)
        length = compress_into(chunk, room.ctypes.data + 7, capacity)
        assert room[7 : 7 + length].tobytes() == expected
        # Blosc may use all of its room while it works, and nothing outside it.
        assert (room[:7] == 0xAB).all() and (room[7 + capacity :] == 0xAB).all()


def test_plain_encoder_into_is_absent_where_the_plain_encoder_is() -> None:
    assert _v2("u2").plain_encoder_into is None  # v2 has no shards to lay chunks into
    raw = _v3("u2", [{"name": "bytes", "configuration": {"endian": "little"}}])
    assert raw.plain_encoder is None and raw.plain_encoder_into is None
    big = _v3("u2", [{"name": "bytes", "configuration": {"endian": "big"}}, _blosc_v3("shuffle", 2)])
    assert big.plain_encoder_into is None


def test_blosc_compressor_into_refuses_small_rooms_and_what_blosc_encode_refuses() -> None:
    codec = numcodecs.Blosc("lz4", 5, numcodecs.Blosc.SHUFFLE)
    compress_into = blosc_compressor_into(codec, np.dtype("f8"), None)
    assert compress_into is not None
    values = np.arange(100.0)
    room = np.zeros(values.nbytes + BLOSC_MAX_OVERHEAD, dtype=np.uint8)
    with pytest.raises(ValueError, match="cannot hold"):
        compress_into(values, room.ctypes.data, values.nbytes)
    with pytest.raises(ValueError, match="C-contiguous"):
        compress_into(np.arange(200.0)[::2], room.ctypes.data, room.nbytes)
    codec.max_buffer_size = 500  # as a chunk over Blosc's 2 GiB would, without allocating one
    small_compress_into = blosc_compressor_into(codec, np.dtype("u1"), None)  # its probe is 257 bytes
    assert small_compress_into is not None
    with pytest.raises(ValueError, match="500"):
        small_compress_into(values.view("u1"), room.ctypes.data, room.nbytes)
    # A typesize the codec holds but does not show: the probe finds the bytes differ, so none.
    hidden = numcodecs.Blosc("lz4", 5, numcodecs.Blosc.SHUFFLE, typesize=4)
    assert blosc_compressor_into(hidden, np.dtype("u1"), None) is None
    assert blosc_compressor_into(hidden, np.dtype("u1"), 4) is not None


def _sharded(path: Any) -> Any:
    """An array of 4 shards of 3 x 2 inner chunks of Blosc over raw bytes, at ``path``."""
    return za.create(
        shape=(64, 48),
        chunks=(16, 16),
        shards=(32, 48),
        dtype="f4",
        zarr_format=3,
        store=str(path),
        compressor=numcodecs.Blosc("lz4", 5, numcodecs.Blosc.SHUFFLE),
    )


def test_shards_compress_inner_chunks_into_their_body_with_the_bytes_of_the_general_path(tmp_path: Any) -> None:
    data = np.random.default_rng(3).random((64, 48)).astype("f4")
    data[:16, :16] = 0  # one inner chunk of fill, left out of its shard
    into = _sharded(tmp_path / "into.zarr")
    inner = into.async_array._pipeline.codecs[0].inner_pipeline
    compress_into = inner.plain_encoder_into
    assert compress_into is not None
    calls: list[int] = []

    def counted(chunk: np.ndarray, address: int, capacity: int) -> int:
        calls.append(chunk.nbytes)
        return compress_into(chunk, address, capacity)

    inner.__dict__["plain_encoder_into"] = counted
    into[...] = data
    assert calls == [16 * 16 * 4] * 11  # 12 inner chunks, one of them fill

    general = _sharded(tmp_path / "general.zarr")
    general.async_array._pipeline.codecs[0].inner_pipeline.__dict__["plain_encoder_into"] = None
    general[...] = data
    for key in ("c/0/0", "c/1/0"):
        assert (tmp_path / "into.zarr" / key).read_bytes() == (tmp_path / "general.zarr" / key).read_bytes()
    np.testing.assert_array_equal(za.open_array(str(tmp_path / "into.zarr"), mode="r")[...], data)
