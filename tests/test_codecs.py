"""The codec pipeline reads chunks zarr-python writes and writes chunks zarr-python reads, for v2 and v3."""

from __future__ import annotations

import json
import lzma
import warnings
from types import SimpleNamespace
from typing import Any

import numcodecs
import numpy as np
import pytest
import zarr
import zarr.codecs
import zarr.codecs.numcodecs as zarr_numcodecs
from hypothesis import given, settings
from hypothesis import strategies as st
from zarr.core.buffer import cpu

from asyncarr.codecs import (
    CodecPipeline,
    normalize_compression,
    v3_codec_chain,
)
from asyncarr.errors import CodecError, MetadataError

# zarr-python warns when its numcodecs wrappers are built, also while the case tables load
warnings.filterwarnings("ignore", message="Numcodecs codecs are not in the Zarr version 3 specification")
pytestmark = [
    pytest.mark.filterwarnings("ignore:Numcodecs codecs are not in the Zarr version 3 specification"),
    pytest.mark.filterwarnings("ignore::zarr.errors.UnstableSpecificationWarning"),
]

SHAPE = (12, 10)
CHUNKS = (4, 5)
TUTORIAL_LZMA_FILTERS = [{"id": lzma.FILTER_DELTA, "dist": 4}, {"id": lzma.FILTER_LZMA2, "preset": 1}]


def random_data(dtype: str, shape: tuple[int, ...] = SHAPE, seed: int = 0) -> np.ndarray:
    """Compressible random data of `dtype`."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind in "iu":
        return rng.integers(0, 100, shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.normal(size=shape) + 1j * rng.normal(size=shape)).astype(dtype)
    if dtype.kind == "U":
        return rng.choice(np.array(["a", "bc", "xyz", ""], dtype=dtype), shape)
    if dtype.kind == "S":
        return rng.choice(np.array([b"a", b"bc", b"xyz", b""], dtype=dtype), shape)
    if dtype.kind in "mM":
        return rng.integers(-1000, 1000, shape).astype(dtype)
    return rng.normal(size=shape).astype(dtype)


def chunk_grid(shape: tuple[int, ...], chunks: tuple[int, ...]):
    """(chunk coords, slice of the array) for every chunk."""
    for coords in np.ndindex(*(-(-s // c) for s, c in zip(shape, chunks, strict=True))):
        region = tuple(slice(i * c, min((i + 1) * c, s)) for i, c, s in zip(coords, chunks, shape, strict=True))
        yield coords, region


def padded(data: np.ndarray, region: tuple[slice, ...], chunks: tuple[int, ...], fill: Any) -> np.ndarray:
    chunk = np.full(chunks, fill, dtype=data.dtype)
    chunk[tuple(slice(0, r.stop - r.start) for r in region)] = data[region]
    return chunk


class ZarrPythonArray:
    """An array written by zarr-python into a dict we can read and write chunk bytes in."""

    def __init__(self, zarr_format: int, dtype: str, shape=SHAPE, chunks=CHUNKS, **kwargs: Any) -> None:
        self.store_dict: dict[str, Any] = {}
        self.zarr_format = zarr_format
        self.array = zarr.create_array(
            store=zarr.storage.MemoryStore(self.store_dict),
            shape=shape,
            chunks=chunks,
            dtype=dtype,
            zarr_format=zarr_format,
            **kwargs,
        )
        self.shape, self.chunks = shape, chunks

    def metadata(self) -> SimpleNamespace:
        """The duck-typed metadata the pipeline reads, built from zarr-python's JSON document."""
        if self.zarr_format == 2:
            doc = json.loads(self.store_dict[".zarray"].to_bytes())
            return SimpleNamespace(
                zarr_format=2,
                dtype=np.dtype(doc["dtype"]),
                chunks=tuple(doc["chunks"]),
                fill_value=doc["fill_value"],
                order=doc["order"],
                compressor=doc["compressor"],
                filters=tuple(doc["filters"]) if doc["filters"] is not None else None,
            )
        doc = json.loads(self.store_dict["zarr.json"].to_bytes())
        return SimpleNamespace(
            zarr_format=3,
            dtype=self.array.dtype,
            chunks=tuple(doc["chunk_grid"]["configuration"]["chunk_shape"]),
            fill_value=doc["fill_value"],
            codecs=tuple(doc["codecs"]),
        )

    def key(self, coords: tuple[int, ...]) -> str:
        """The store key of a chunk."""
        if self.zarr_format == 2:
            return ".".join(map(str, coords)) or "0"
        return "/".join(["c", *map(str, coords)])

    def get(self, coords: tuple[int, ...]) -> bytes:
        """The stored bytes of a chunk."""
        return self.store_dict[self.key(coords)].to_bytes()

    def put(self, coords: tuple[int, ...], data: bytes) -> None:
        """Store chunk bytes for zarr-python to read."""
        self.store_dict[self.key(coords)] = cpu.Buffer.from_bytes(data)


# Each case: id -> (zarr-python create_array kwargs for v2, for v3).
V2_CASES: dict[str, dict[str, Any]] = {
    "blosc-lz4-shuffle": {"compressors": numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE)},
    "blosc-zstd-bitshuffle": {
        "compressors": numcodecs.Blosc(cname="zstd", clevel=3, shuffle=numcodecs.Blosc.BITSHUFFLE)
    },
    "blosc-lz4-noshuffle": {"compressors": numcodecs.Blosc(cname="lz4", clevel=1, shuffle=numcodecs.Blosc.NOSHUFFLE)},
    "blosc-autoshuffle": {"compressors": numcodecs.Blosc(cname="zstd", shuffle=numcodecs.Blosc.AUTOSHUFFLE)},
    "zstd": {"compressors": numcodecs.Zstd(level=3)},
    "zstd-checksum": {"compressors": numcodecs.Zstd(level=1, checksum=True)},
    "gzip": {"compressors": numcodecs.GZip(level=5)},
    "zlib": {"compressors": numcodecs.Zlib(level=1)},
    "lzma-raw-delta-filters": {"compressors": numcodecs.LZMA(format=lzma.FORMAT_RAW, filters=TUTORIAL_LZMA_FILTERS)},
    "bz2": {"compressors": numcodecs.BZ2(level=9)},
    "crc32c": {"compressors": numcodecs.CRC32C()},
    "no-compressor": {"compressors": None},
    "delta-blosc": {"filters": [numcodecs.Delta(dtype="<i4")], "compressors": numcodecs.Blosc()},
    "order-F-zstd": {"order": "F", "compressors": numcodecs.Zstd()},
    "order-F-blosc": {"order": "F", "compressors": numcodecs.Blosc()},
    "order-F-none": {"order": "F", "compressors": None},
}
V2_DTYPES = {"delta-blosc": "<i4"}

V3_CASES: dict[str, dict[str, Any]] = {
    "blosc-lz4-shuffle": {"compressors": zarr.codecs.BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")},
    "blosc-zstd-bitshuffle": {"compressors": zarr.codecs.BloscCodec(cname="zstd", clevel=3, shuffle="bitshuffle")},
    "blosc-noshuffle": {"compressors": zarr.codecs.BloscCodec(cname="lz4", shuffle="noshuffle")},
    "zstd": {"compressors": zarr.codecs.ZstdCodec(level=3)},
    "zstd-checksum": {"compressors": zarr.codecs.ZstdCodec(level=1, checksum=True)},
    "gzip": {"compressors": zarr.codecs.GzipCodec(level=5)},
    "numcodecs-zlib": {"compressors": zarr_numcodecs.Zlib(level=1)},
    "numcodecs-lzma-raw-delta-filters": {
        "compressors": zarr_numcodecs.LZMA(format=lzma.FORMAT_RAW, filters=TUTORIAL_LZMA_FILTERS)
    },
    "numcodecs-bz2": {"compressors": zarr_numcodecs.BZ2(level=9)},
    "no-compressor": {"compressors": None},
    "numcodecs-delta": {"filters": [zarr_numcodecs.Delta(dtype="<i4")], "compressors": zarr.codecs.BloscCodec()},
    "crc32c": {"compressors": [zarr.codecs.ZstdCodec(), zarr.codecs.Crc32cCodec()]},
    "transpose-order-F": {"filters": [zarr.codecs.TransposeCodec(order=(1, 0))]},
    "big-endian-bytes": {"serializer": zarr.codecs.BytesCodec(endian="big"), "compressors": zarr.codecs.GzipCodec()},
    "big-endian-blosc-transpose": {
        "filters": [zarr.codecs.TransposeCodec(order=(1, 0))],
        "serializer": zarr.codecs.BytesCodec(endian="big"),
        "compressors": zarr.codecs.BloscCodec(cname="zstd", shuffle="shuffle"),
    },
}
V3_DTYPES = {"numcodecs-delta": "<i4"}

CASES = [pytest.param(2, name, V2_DTYPES.get(name, "f8"), kw, id=f"v2-{name}") for name, kw in V2_CASES.items()] + [
    pytest.param(3, name, V3_DTYPES.get(name, "f8"), kw, id=f"v3-{name}") for name, kw in V3_CASES.items()
]

DTYPE_CASES = ["bool", "i1", "u2", "i4", "u8", "f2", "f4", "c8", "c16", "M8[ns]", "m8[s]", "S5", "U3"]


def reads_zarr_python_chunks(zarr_format: int, dtype: str, kwargs: dict[str, Any], shape=SHAPE, chunks=CHUNKS) -> None:
    z = ZarrPythonArray(zarr_format, dtype, shape=shape, chunks=chunks, **kwargs)
    data = random_data(dtype, shape)
    z.array[...] = data
    pipeline = CodecPipeline.from_metadata(z.metadata())
    for coords, region in chunk_grid(shape, chunks):
        chunk = pipeline.decode(z.get(coords), chunks, z.key(coords))
        assert chunk.shape == chunks and chunk.dtype == np.dtype(dtype)
        assert chunk.flags.c_contiguous and chunk.flags.writeable
        inside = tuple(slice(0, r.stop - r.start) for r in region)
        np.testing.assert_array_equal(chunk[inside], data[region])


def writes_chunks_zarr_python_reads(
    zarr_format: int, dtype: str, kwargs: dict[str, Any], shape=SHAPE, chunks=CHUNKS
) -> None:
    reference = ZarrPythonArray(zarr_format, dtype, shape=shape, chunks=chunks, **kwargs)
    data = random_data(dtype, shape, seed=1)
    reference.array[...] = data
    target = ZarrPythonArray(zarr_format, dtype, shape=shape, chunks=chunks, **kwargs)
    pipeline = CodecPipeline.from_metadata(target.metadata())
    fill = target.array.fill_value
    for coords, region in chunk_grid(shape, chunks):
        encoded = pipeline.encode(padded(data, region, chunks, fill), target.key(coords))
        assert isinstance(encoded, bytes)
        target.put(coords, encoded)
    np.testing.assert_array_equal(target.array[...], data)
    return reference, target


@pytest.mark.parametrize(("zarr_format", "name", "dtype", "kwargs"), CASES)
def test_decodes_chunks_written_by_zarr_python(zarr_format: int, name: str, dtype: str, kwargs: dict) -> None:
    reads_zarr_python_chunks(zarr_format, dtype, kwargs)


@pytest.mark.parametrize(("zarr_format", "name", "dtype", "kwargs"), CASES)
def test_encodes_chunks_that_zarr_python_reads(zarr_format: int, name: str, dtype: str, kwargs: dict) -> None:
    writes_chunks_zarr_python_reads(zarr_format, dtype, kwargs)


@pytest.mark.parametrize(("zarr_format", "name", "dtype", "kwargs"), CASES)
def test_encoded_chunks_are_byte_identical_to_zarr_python(zarr_format: int, name: str, dtype: str, kwargs) -> None:
    z = ZarrPythonArray(zarr_format, dtype, **kwargs)
    data = random_data(dtype, seed=2)
    z.array[...] = data
    pipeline = CodecPipeline.from_metadata(z.metadata())
    for coords, region in chunk_grid(SHAPE, CHUNKS):
        ours, theirs = pipeline.encode(data[region], z.key(coords)), z.get(coords)
        if name == "gzip":  # gzip's header carries the second it was written (MTIME, RFC 1952)
            ours, theirs = without_gzip_mtime(ours), without_gzip_mtime(theirs)
        assert ours == theirs, coords


def without_gzip_mtime(member: bytes) -> bytes:
    """A gzip member with its MTIME field (bytes 4-7) zeroed: two writers a second apart differ only there."""
    assert member[:3] == b"\x1f\x8b\x08", "not a gzip member"
    return member[:4] + bytes(4) + member[8:]


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("dtype", DTYPE_CASES)
def test_every_data_type_round_trips_with_zarr_python(zarr_format: int, dtype: str) -> None:
    compressor = numcodecs.Blosc() if zarr_format == 2 else zarr.codecs.BloscCodec(cname="lz4")
    reads_zarr_python_chunks(zarr_format, dtype, {"compressors": compressor})
    writes_chunks_zarr_python_reads(zarr_format, dtype, {"compressors": compressor})


@pytest.mark.parametrize("dtype", [">i2", ">u8", ">f8", ">c16"])
def test_v2_big_endian_data_types_round_trip_with_zarr_python(dtype: str) -> None:
    reads_zarr_python_chunks(2, dtype, {"compressors": numcodecs.Zstd()})
    writes_chunks_zarr_python_reads(2, dtype, {"compressors": numcodecs.Zstd()})


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_edge_chunks_and_three_dimensions(zarr_format: int) -> None:
    shape, chunks = (7, 5, 3), (3, 2, 2)
    reads_zarr_python_chunks(zarr_format, "u2", {}, shape=shape, chunks=chunks)
    writes_chunks_zarr_python_reads(zarr_format, "u2", {}, shape=shape, chunks=chunks)


def test_zero_dimensional_array_round_trips() -> None:
    for zarr_format in (2, 3):
        reads_zarr_python_chunks(zarr_format, "f4", {}, shape=(), chunks=())
        writes_chunks_zarr_python_reads(zarr_format, "f4", {}, shape=(), chunks=())


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_tutorial_lzma_with_delta_filter_chain_reads_back(zarr_format: int) -> None:
    # The zarr-2 tutorial's LZMA codec keeps the default .xz format with a custom filter chain.
    # zarr-python writes such chunks but cannot read them (numcodecs hands the filters to the
    # .xz decompressor, which refuses them); the .xz header carries the chain, so we can.
    codec = normalize_compression("lzma", {"filters": TUTORIAL_LZMA_FILTERS})
    compressor = codec if zarr_format == 2 else zarr_numcodecs.LZMA(**codec.get_config())
    z = ZarrPythonArray(zarr_format, "i4", compressors=compressor)
    data = random_data("i4")
    z.array[...] = data
    with pytest.raises(ValueError, match="Cannot specify filters"):
        codec.decode(z.get((0, 0)))
    pipeline = CodecPipeline.from_metadata(z.metadata())
    for coords, region in chunk_grid(SHAPE, CHUNKS):
        np.testing.assert_array_equal(pipeline.decode(z.get(coords), CHUNKS, z.key(coords)), data[region])
        encoded = pipeline.encode(data[region], z.key(coords))
        assert encoded == z.get(coords)
        assert np.array_equal(np.frombuffer(lzma.decompress(encoded), "i4").reshape(CHUNKS), data[region])


# --- integrity -------------------------------------------------------------------------------


def pipeline_and_chunk(zarr_format: int, **kwargs: Any) -> tuple[CodecPipeline, bytes, str]:
    z = ZarrPythonArray(zarr_format, "i4", **kwargs)
    z.array[...] = random_data("i4")
    return CodecPipeline.from_metadata(z.metadata()), z.get((1, 1)), z.key((1, 1))


BLOSC = {2: numcodecs.Blosc(), 3: zarr.codecs.BloscCodec(cname="lz4")}


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_a_truncated_blosc_chunk_is_a_codec_error(zarr_format: int) -> None:
    pipeline, data, key = pipeline_and_chunk(zarr_format, compressors=BLOSC[zarr_format])
    damaged = data[:-3]
    # numcodecs alone would decode the damaged frame into garbage without complaint
    numcodecs.Blosc().decode(damaged)
    with pytest.raises(CodecError, match=key.replace(".", r"\.")):
        pipeline.decode(damaged, CHUNKS, key)
    out = np.zeros(SHAPE, dtype="i4")
    with pytest.raises(CodecError, match="truncated"):
        pipeline.decode_into(damaged, CHUNKS, key, out, (slice(4, 8), slice(5, 10)), ())
    assert not out.any()


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_a_blosc_chunk_with_trailing_bytes_decodes_from_its_declared_length(zarr_format: int) -> None:
    # z5py writes 16 zero bytes after every frame; zarr-python reads such chunks (issue 11, 7a).
    pipeline, data, key = pipeline_and_chunk(zarr_format, compressors=BLOSC[zarr_format])
    padded = data + bytes(16)
    expected = pipeline.decode(data, CHUNKS, key)
    np.testing.assert_array_equal(pipeline.decode(padded, CHUNKS, key), expected)
    out = np.zeros(SHAPE, dtype="i4")
    pipeline.decode_into(padded, CHUNKS, key, out, (slice(4, 8), slice(5, 10)), ())
    np.testing.assert_array_equal(out[4:8, 5:10], expected)


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("compressor", ["blosc", "zstd", "gzip", "zlib", "lzma", "bz2", None])
def test_garbage_chunk_is_a_codec_error_naming_the_key(zarr_format: int, compressor: str | None) -> None:
    codec = normalize_compression(compressor)
    if zarr_format == 2:
        metadata = SimpleNamespace(
            zarr_format=2, dtype=np.dtype("i4"), chunks=CHUNKS, fill_value=0, order="C",
            compressor=None if codec is None else codec.get_config(), filters=None,
        )  # fmt: skip
    else:
        codecs = v3_codec_chain(dtype=np.dtype("i4"), ndim=2, compressor=codec)
        metadata = SimpleNamespace(zarr_format=3, dtype=np.dtype("i4"), chunks=CHUNKS, fill_value=0, codecs=codecs)
    pipeline = CodecPipeline.from_metadata(metadata)
    garbage = np.random.default_rng(3).bytes(57)
    with pytest.raises(CodecError, match="chunk data/c/9/9"):
        pipeline.decode(garbage, CHUNKS, "data/c/9/9")


def test_crc32c_mismatch_is_a_codec_error() -> None:
    pipeline, data, key = pipeline_and_chunk(3, compressors=[zarr.codecs.Crc32cCodec()])
    flipped = bytearray(data)
    flipped[10] ^= 0x01
    with pytest.raises(CodecError, match="CRC-32C checksum mismatch") as info:
        pipeline.decode(bytes(flipped), CHUNKS, key)
    assert key in str(info.value)
    assert isinstance(info.value.__cause__, ValueError)


def test_zstd_frame_declaring_another_size_is_a_codec_error() -> None:
    pipeline, _, key = pipeline_and_chunk(3, compressors=zarr.codecs.ZstdCodec())
    other_size = numcodecs.Zstd().encode(np.zeros(CHUNKS[0] * CHUNKS[1] + 1, dtype="i4"))
    with pytest.raises(CodecError, match="Zstandard frame declares"):
        pipeline.decode(other_size, CHUNKS, key)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_uncompressed_chunk_of_wrong_length_is_a_codec_error(zarr_format: int) -> None:
    pipeline, data, key = pipeline_and_chunk(zarr_format, compressors=None)
    with pytest.raises(CodecError, match="bytes, expected 80"):
        pipeline.decode(data[:-4], CHUNKS, key)
    with pytest.raises(CodecError, match="bytes, expected 80"):
        pipeline.decode_into(data + b"1234", CHUNKS, key, np.empty(CHUNKS, "i4"), (), ())


def test_gzip_chunk_that_decodes_short_is_a_codec_error() -> None:
    pipeline, _, key = pipeline_and_chunk(3, compressors=zarr.codecs.GzipCodec())
    short = numcodecs.GZip().encode(np.zeros(7, dtype="i4"))
    with pytest.raises(CodecError, match="bytes, expected 80"):
        pipeline.decode(short, CHUNKS, key)


def test_encode_failure_is_a_codec_error() -> None:
    pipeline, _, _ = pipeline_and_chunk(3)
    with pytest.raises(CodecError, match="chunk c/0/0: cannot encode"):
        pipeline.encode(np.zeros((3, 3), dtype="i4"), "c/0/0")


# --- decode_into -----------------------------------------------------------------------------


@pytest.mark.parametrize(("zarr_format", "name", "dtype", "kwargs"), CASES)
def test_decode_into_whole_and_partial_selections(zarr_format: int, name: str, dtype: str, kwargs: dict) -> None:
    z = ZarrPythonArray(zarr_format, dtype, **kwargs)
    data = random_data(dtype)
    z.array[...] = data
    pipeline = CodecPipeline.from_metadata(z.metadata())
    whole = np.zeros(SHAPE, dtype=dtype)
    fortran = np.zeros(SHAPE, dtype=dtype, order="F")
    for coords, region in chunk_grid(SHAPE, CHUNKS):
        pipeline.decode_into(z.get(coords), CHUNKS, z.key(coords), whole, region, ())
        pipeline.decode_into(z.get(coords), CHUNKS, z.key(coords), fortran, region, (slice(None), slice(None)))
    np.testing.assert_array_equal(whole, data)
    np.testing.assert_array_equal(fortran, data)
    # one full chunk into a contiguous destination row block, and a strided partial selection
    rows = np.zeros(CHUNKS, dtype=dtype)
    pipeline.decode_into(z.get((2, 1)), CHUNKS, z.key((2, 1)), rows, Ellipsis, Ellipsis)
    np.testing.assert_array_equal(rows, data[8:12, 5:10])
    picked = np.zeros((2, 2), dtype=dtype)
    pipeline.decode_into(z.get((2, 1)), CHUNKS, z.key((2, 1)), picked, (), (slice(3, 0, -2), slice(1, 5, 2)))
    np.testing.assert_array_equal(picked, data[8:12, 5:10][3:0:-2, 1:5:2])


@settings(max_examples=40, deadline=None)
@given(
    zarr_format=st.sampled_from([2, 3]),
    order=st.sampled_from(["C", "F"]),
    starts=st.tuples(st.integers(0, 3), st.integers(0, 4)),
    stops=st.tuples(st.integers(1, 4), st.integers(1, 5)),
    steps=st.tuples(st.integers(1, 3), st.integers(1, 3)),
)
def test_decode_into_matches_numpy_for_any_slice(zarr_format, order, starts, stops, steps) -> None:
    chunk = random_data("f4", CHUNKS, seed=4)
    if zarr_format == 2:
        metadata = SimpleNamespace(
            zarr_format=2, dtype=np.dtype("f4"), chunks=CHUNKS, fill_value=0.0, order=order,
            compressor=numcodecs.Blosc().get_config(), filters=None,
        )  # fmt: skip
    else:
        codecs = v3_codec_chain(dtype=np.dtype("f4"), ndim=2, order=order)
        metadata = SimpleNamespace(zarr_format=3, dtype=np.dtype("f4"), chunks=CHUNKS, fill_value=0.0, codecs=codecs)
    pipeline = CodecPipeline.from_metadata(metadata)
    data = pipeline.encode(chunk, "k")
    selection = tuple(slice(a, b, s) for a, b, s in zip(starts, stops, steps, strict=True))
    expected = chunk[selection]
    out = np.full((expected.shape[0] + 1, expected.shape[1] + 2), -1, dtype="f4")
    out_selection = (slice(1, 1 + expected.shape[0]), slice(0, expected.shape[1]))
    pipeline.decode_into(data, CHUNKS, "k", out, out_selection, selection)
    np.testing.assert_array_equal(out[out_selection], expected)
    assert (out[0] == -1).all()


# --- properties and errors of construction -----------------------------------------------------


def test_compressor_and_filters_properties_show_numcodecs_codecs() -> None:
    v2 = ZarrPythonArray(2, "i4", compressors=numcodecs.Blosc(), filters=[numcodecs.Delta(dtype="<i4")])
    pipeline = CodecPipeline.from_metadata(v2.metadata())
    assert repr(pipeline.compressor) == "Blosc(cname='lz4', clevel=5, shuffle=SHUFFLE, blocksize=0)"
    assert pipeline.filters == [numcodecs.Delta(dtype="<i4")]
    v3 = ZarrPythonArray(3, "i4", compressors=zarr.codecs.BloscCodec(cname="zstd", clevel=3, shuffle="bitshuffle"))
    pipeline = CodecPipeline.from_metadata(v3.metadata())
    assert repr(pipeline.compressor) == "Blosc(cname='zstd', clevel=3, shuffle=BITSHUFFLE, blocksize=0)"
    assert pipeline.filters == []
    none = CodecPipeline.from_metadata(ZarrPythonArray(3, "i4", compressors=None).metadata())
    assert none.compressor is None


def test_unknown_codecs_are_metadata_errors_naming_them() -> None:
    v3 = SimpleNamespace(
        zarr_format=3, dtype=np.dtype("i4"), chunks=CHUNKS, fill_value=0,
        codecs=({"name": "bytes", "configuration": {"endian": "little"}}, {"name": "frobnicate"}),
    )  # fmt: skip
    with pytest.raises(MetadataError, match="frobnicate"):
        CodecPipeline.from_metadata(v3)
    v3.codecs = ({"name": "numcodecs.nonesuch", "configuration": {}},)
    with pytest.raises(MetadataError, match=r"numcodecs\.nonesuch"):
        CodecPipeline.from_metadata(v3)
    v2 = SimpleNamespace(
        zarr_format=2, dtype=np.dtype("i4"), chunks=CHUNKS, fill_value=0, order="C",
        compressor={"id": "frobnicate"}, filters=None,
    )  # fmt: skip
    with pytest.raises(MetadataError, match="frobnicate"):
        CodecPipeline.from_metadata(v2)


@pytest.mark.parametrize(
    "codecs",
    [
        ({"name": "gzip", "configuration": {"level": 1}}, {"name": "bytes", "configuration": {"endian": "little"}}),
        ({"name": "transpose", "configuration": {"order": [0, 0]}}, {"name": "bytes"}),
        ({"name": "bytes"},),  # a 4-byte type needs an endian
        ({"name": "bytes", "configuration": {"endian": "little"}}, {"name": "blosc", "configuration": {"cname": "x"}}),
        ({"name": "gzip", "configuration": {"level": 1}},),
    ],
)
def test_invalid_v3_codec_chains_are_metadata_errors(codecs: tuple) -> None:
    metadata = SimpleNamespace(zarr_format=3, dtype=np.dtype("i4"), chunks=CHUNKS, fill_value=0, codecs=codecs)
    with pytest.raises(MetadataError):
        CodecPipeline.from_metadata(metadata)


def test_variable_length_data_types_need_their_own_object_codec() -> None:
    # dtype object holds bytes: the vlen-utf8 filter (strings) does not serialize it.
    metadata = SimpleNamespace(
        zarr_format=2, dtype=np.dtype("O"), chunks=CHUNKS, fill_value=None, order="C",
        compressor=None, filters=({"id": "vlen-utf8"},),
    )  # fmt: skip
    with pytest.raises(MetadataError, match="needs the object codec 'vlen-bytes'"):
        CodecPipeline.from_metadata(metadata)
