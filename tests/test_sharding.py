"""The sharding_indexed codec: shards read and written like zarr-python 3 and tensorstore, partial
shard reads that fetch only the index and the inner chunks they need."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorstore as ts
import zarr
import zarr.codecs

import asyncarr
import asyncarr.sync as za
from asyncarr.codecs.pipeline import CodecPipeline
from asyncarr.codecs.sharding import EMPTY_ENTRY, ShardingCodec, morton_order
from asyncarr.errors import CodecError, MetadataError
from asyncarr.indexing import OrthogonalIndexer
from asyncarr.indexing_points import indexer_for
from asyncarr.shards import coalesce_ranges, partial_read_codec, plan_inner_reads, read_shard_region
from asyncarr.stores import ByteRange, LocalStore, MemoryStore, Store

SHAPE = (20, 30)
SHARDS = (8, 10)  # edge shards along both axes
INNER = (4, 5)
FILL = -1
WRITTEN = (slice(2, 17), slice(0, 23))  # leaves some inner chunks and a whole shard unwritten

LITTLE = {"name": "bytes", "configuration": {"endian": "little"}}
INNER_CHAINS = {
    "bytes": [LITTLE],
    "bytes+blosc": [
        LITTLE,
        {
            "name": "blosc",
            "configuration": {"typesize": 4, "cname": "lz4", "clevel": 5, "shuffle": "shuffle", "blocksize": 0},
        },
    ],
    "transpose+bytes+zstd": [
        {"name": "transpose", "configuration": {"order": [1, 0]}},
        LITTLE,
        {"name": "zstd", "configuration": {"level": 3, "checksum": False}},
    ],
    "bytes+gzip+crc32c": [LITTLE, {"name": "gzip", "configuration": {"level": 5}}, {"name": "crc32c"}],
}
# The same inner chains as zarr-python's create_array arguments.
ZARR_PYTHON_CHAINS = {
    "bytes": {"compressors": None},
    "bytes+blosc": {"compressors": [zarr.codecs.BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")]},
    "transpose+bytes+zstd": {
        "filters": [zarr.codecs.TransposeCodec(order=(1, 0))],
        "compressors": [zarr.codecs.ZstdCodec(level=3)],
    },
    "bytes+gzip+crc32c": {"compressors": [zarr.codecs.GzipCodec(level=5), zarr.codecs.Crc32cCodec()]},
}
LOCATIONS = ["end", "start"]
CASES = [(chain, location) for chain in INNER_CHAINS for location in LOCATIONS]
CASE_IDS = [f"{chain}-index-at-{location}" for chain, location in CASES]


def sharding_json(chain: str, location: str, inner: tuple[int, ...] = INNER) -> dict[str, Any]:
    """The sharding_indexed codec JSON with one of the inner chains."""
    configuration = {
        "chunk_shape": list(inner),
        "codecs": INNER_CHAINS[chain],
        "index_codecs": [LITTLE, {"name": "crc32c"}],
        "index_location": location,
    }
    return {"name": "sharding_indexed", "configuration": configuration}


def sample(shape: tuple[int, ...] = SHAPE, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 1000, size=shape, dtype="i4")


def expected_after_write(data: np.ndarray, region: Any = WRITTEN, fill: Any = FILL) -> np.ndarray:
    expected = np.full(data.shape, fill, dtype=data.dtype)
    expected[region] = data[region]
    return expected


def create_asyncarr(path: Path, chain: str, location: str, **kwargs: Any) -> za.Array:
    """A new sharded array written by asyncarr, its codecs given as JSON."""
    return za.open_array(
        str(path),
        mode="w",
        shape=kwargs.pop("shape", SHAPE),
        chunks=kwargs.pop("shards", SHARDS),
        dtype=kwargs.pop("dtype", "i4"),
        fill_value=kwargs.pop("fill_value", FILL),
        codecs=[sharding_json(chain, location, kwargs.pop("inner", INNER))],
        **kwargs,
    )


def create_zarr_python(path: Path, chain: str, location: str, **kwargs: Any) -> zarr.Array:
    """A new sharded array written by zarr-python 3."""
    return zarr.create_array(
        store=str(path),
        shape=kwargs.pop("shape", SHAPE),
        chunks=kwargs.pop("inner", INNER),
        shards={"shape": kwargs.pop("shards", SHARDS), "index_location": location},
        dtype=kwargs.pop("dtype", "i4"),
        fill_value=kwargs.pop("fill_value", FILL),
        **ZARR_PYTHON_CHAINS[chain],
        **kwargs,
    )


def ts_spec(path: Path) -> dict[str, Any]:
    return {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}}


async def read_shards_partially(store: Store, path: str, selection: Any, *, orthogonal: bool = False) -> np.ndarray:
    """Read ``z[selection]`` (or ``z.oindex[selection]``) the way the array layer's hook does:
    every shard through read_shard_region."""
    array = await asyncarr.open_array(store, mode="r", path=path)
    metadata = array.metadata
    codec = partial_read_codec(CodecPipeline.from_metadata(metadata))
    assert codec is not None
    if orthogonal:
        indexer = OrthogonalIndexer(selection, metadata.shape, metadata.chunks)
    else:
        indexer = indexer_for(selection, metadata.shape, metadata.chunks)
    out = np.empty(indexer.buffer_shape, dtype=metadata.dtype)
    prefix = f"{path}/" if path else ""
    await asyncio.gather(
        *(
            read_shard_region(
                store,
                prefix + metadata.chunk_key(p.chunk_coords),
                codec,
                p.chunk_selection,
                out,
                p.out_selection,
            )
            for p in indexer
        )
    )
    return indexer.finalize(out)


PARTIAL_SELECTIONS = [
    (slice(None), slice(None)),
    (3, slice(None)),
    (slice(1, 19, 3), slice(29, 0, -4)),
    (slice(None, None, -1), 7),
    (slice(5, 6), slice(12, 14)),
    (slice(18, 20), slice(25, 30)),
]


def assert_partial_reads_match(path: Path, expected: np.ndarray) -> None:
    store = LocalStore(str(path))
    for selection in PARTIAL_SELECTIONS:
        np.testing.assert_array_equal(asyncio.run(read_shards_partially(store, "", selection)), expected[selection])


# --- interop -----------------------------------------------------------------------------


@pytest.mark.parametrize(("chain", "location"), CASES, ids=CASE_IDS)
def test_zarr_python_reads_what_asyncarr_writes(tmp_path, chain, location):
    data = sample()
    z = create_asyncarr(tmp_path, chain, location)
    z[WRITTEN] = data[WRITTEN]

    reference = zarr.open_array(str(tmp_path), mode="r")
    codec = reference.metadata.codecs[0]
    assert isinstance(codec, zarr.codecs.ShardingCodec)
    assert codec.index_location.value == location
    np.testing.assert_array_equal(reference[:], expected_after_write(data))


@pytest.mark.parametrize(("chain", "location"), CASES, ids=CASE_IDS)
def test_asyncarr_reads_what_zarr_python_writes_whole_and_in_parts(tmp_path, chain, location):
    data = sample()
    reference = create_zarr_python(tmp_path, chain, location)
    reference[WRITTEN] = data[WRITTEN]
    expected = expected_after_write(data)

    z = za.open_array(str(tmp_path), mode="r")
    assert z.metadata.codecs[0]["configuration"]["index_location"] == location
    np.testing.assert_array_equal(z[:], expected)
    assert_partial_reads_match(tmp_path, expected)


@pytest.mark.parametrize(("chain", "location"), CASES, ids=CASE_IDS)
def test_tensorstore_reads_what_asyncarr_writes(tmp_path, chain, location):
    data = sample()
    z = create_asyncarr(tmp_path, chain, location)
    z[WRITTEN] = data[WRITTEN]

    t = ts.open(ts_spec(tmp_path), open=True).result()
    np.testing.assert_array_equal(t.read().result(), expected_after_write(data))
    np.testing.assert_array_equal(t[5:6, 12:14].read().result(), expected_after_write(data)[5:6, 12:14])


@pytest.mark.parametrize(("chain", "location"), CASES, ids=CASE_IDS)
def test_asyncarr_reads_what_tensorstore_writes_whole_and_in_parts(tmp_path, chain, location):
    data = sample()
    metadata = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": list(SHAPE),
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(SHARDS)}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "data_type": "int32",
        "fill_value": FILL,
        "codecs": [sharding_json(chain, location)],
    }
    t = ts.open({**ts_spec(tmp_path), "metadata": metadata}, create=True, delete_existing=True).result()
    t[WRITTEN].write(data[WRITTEN]).result()
    expected = expected_after_write(data)

    np.testing.assert_array_equal(za.open_array(str(tmp_path), mode="r")[:], expected)
    assert_partial_reads_match(tmp_path, expected)


@pytest.mark.parametrize("location", LOCATIONS)
def test_shards_are_byte_identical_to_zarr_python_ones(tmp_path, location):
    # Same inner-chunk order (Morton), same omission of inner chunks that equal the fill value.
    data = sample((16, 20))
    data[0:4, 0:5] = FILL  # one inner chunk of nothing but fill
    ours = create_asyncarr(tmp_path / "ours", "bytes", location, shape=(16, 20))
    ours[:] = data
    reference = create_zarr_python(tmp_path / "ref", "bytes", location, shape=(16, 20))
    reference[:] = data
    keys = sorted(
        p.relative_to(tmp_path / "ref").as_posix() for p in (tmp_path / "ref" / "c").rglob("*") if p.is_file()
    )
    assert len(keys) == 4
    for key in keys:
        assert (tmp_path / "ours" / key).read_bytes() == (tmp_path / "ref" / key).read_bytes(), key


def test_shards_argument_creates_what_zarr_python_reads_with_inner_chunks(tmp_path):
    data = sample()
    z = za.open_array(str(tmp_path), mode="w", shape=SHAPE, chunks=INNER, shards=SHARDS, dtype="i4", fill_value=FILL)
    z[WRITTEN] = data[WRITTEN]
    reference = zarr.open_array(str(tmp_path), mode="r")
    assert reference.shards == SHARDS
    assert reference.chunks == INNER
    np.testing.assert_array_equal(reference[:], expected_after_write(data))


def test_nan_fill_of_float_shards_reads_back_in_zarr_python(tmp_path):
    data = np.random.default_rng(1).random(SHAPE)
    z = za.open_array(str(tmp_path), mode="w", shape=SHAPE, chunks=INNER, shards=SHARDS, dtype="f8", fill_value=np.nan)
    z[WRITTEN] = data[WRITTEN]
    expected = expected_after_write(data, fill=np.nan)
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path), mode="r")[:], expected)
    np.testing.assert_array_equal(z[:], expected)
    assert_partial_reads_match(tmp_path, expected)


def test_nested_shards_round_trip_with_zarr_python(tmp_path):
    inner_sharding = {
        "name": "sharding_indexed",
        "configuration": {"chunk_shape": [2, 5], "codecs": [LITTLE], "index_codecs": [LITTLE]},
    }
    outer = {"name": "sharding_indexed", "configuration": {"chunk_shape": list(INNER), "codecs": [inner_sharding]}}
    data = sample()
    z = za.open_array(str(tmp_path), mode="w", shape=SHAPE, chunks=SHARDS, dtype="i4", fill_value=FILL, codecs=[outer])
    z[WRITTEN] = data[WRITTEN]
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path), mode="r")[:], expected_after_write(data))
    np.testing.assert_array_equal(z[1:19, 3:7], expected_after_write(data)[1:19, 3:7])


def test_variable_length_strings_in_shards_round_trip_with_zarr_python(tmp_path):
    texts = np.array([["a", "bb", "", "cccc", "dé", "xyz" * 20]] * 3, dtype=object)
    z = za.open_array(str(tmp_path), mode="w", shape=(10, 6), chunks=(2, 3), shards=(4, 6), dtype=str)
    z[1:4, :] = texts
    expected = np.full((10, 6), "", dtype=object)
    expected[1:4, :] = texts
    assert zarr.open_array(str(tmp_path), mode="r")[:].tolist() == expected.tolist()
    assert z[2, 1:5].tolist() == expected[2, 1:5].tolist()
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == ["0"]


# --- writes --------------------------------------------------------------------------------


def test_partial_writes_then_reads_match_numpy_and_zarr_python(tmp_path):
    z = create_asyncarr(tmp_path, "bytes+blosc", "end")
    expected = np.full(SHAPE, FILL, dtype="i4")
    rng = np.random.default_rng(2)
    for step in range(12):
        start = rng.integers(0, 18, size=2)
        stop = start + rng.integers(1, 9, size=2)
        region = (slice(int(start[0]), int(stop[0])), slice(int(start[1]), int(stop[1])))
        values = rng.integers(0, 1000, size=expected[region].shape, dtype="i4")
        if step % 4 == 3:
            values[...] = FILL  # writing fill back empties inner chunks (and maybe whole shards)
        z[region] = values
        expected[region] = values
        np.testing.assert_array_equal(z[:], expected)
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path), mode="r")[:], expected)
    assert_partial_reads_match(tmp_path, expected)


def test_inner_chunks_equal_to_fill_are_left_out_and_fill_only_shards_deleted(tmp_path):
    z = create_asyncarr(tmp_path, "bytes", "end")
    z[0:8, 0:10] = 7
    z[0:4, 0:5] = FILL  # empties inner chunk (0, 0) of shard (0, 0)
    z[8:16, 10:20] = 3
    z[8:16, 10:20] = FILL  # empties every inner chunk of shard (1, 1)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in (tmp_path / "c").rglob("*") if p.is_file()) == ["c/0/0"]
    codec = partial_read_codec(CodecPipeline.from_metadata(z.metadata))
    shard = (tmp_path / "c" / "0" / "0").read_bytes()
    index = codec.parse_index(shard[-codec.index_nbytes :], "c/0/0")
    assert tuple(index[0, 0]) == (EMPTY_ENTRY, EMPTY_ENTRY)
    assert (index[..., 0] != EMPTY_ENTRY).sum() == 3
    assert len(shard) == 3 * 4 * 5 * 4 + codec.index_nbytes


def test_write_empty_chunks_keeps_inner_chunks_equal_to_fill(tmp_path):
    z = create_asyncarr(tmp_path, "bytes", "end")
    with asyncarr.config.set(write_empty_chunks=True):
        z[0:8, 0:10] = FILL
    codec = partial_read_codec(CodecPipeline.from_metadata(z.metadata))
    index = codec.parse_index((tmp_path / "c" / "0" / "0").read_bytes()[-codec.index_nbytes :], "c/0/0")
    assert (index[..., 0] != EMPTY_ENTRY).all()
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path), mode="r")[0:8, 0:10], FILL)


# --- missing pieces and damage ---------------------------------------------------------------


def test_missing_inner_chunks_and_missing_shards_read_as_fill(tmp_path):
    z = create_asyncarr(tmp_path, "bytes+gzip+crc32c", "start")
    z[9, 11] = 5  # one inner chunk of shard (1, 1); the other shards do not exist
    expected = np.full(SHAPE, FILL, dtype="i4")
    expected[9, 11] = 5
    np.testing.assert_array_equal(z[:], expected)
    assert_partial_reads_match(tmp_path, expected)
    np.testing.assert_array_equal(asyncio.run(read_shards_partially(LocalStore(str(tmp_path)), "", (9, 11))), 5)


def corrupt_byte(path: Path, position: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("location", LOCATIONS)
def test_index_checksum_mismatch_raises_codec_error_naming_the_shard(tmp_path, location):
    z = create_asyncarr(tmp_path, "bytes", location)
    z[:] = sample()
    codec = partial_read_codec(CodecPipeline.from_metadata(z.metadata))
    shard_path = tmp_path / "c" / "1" / "2"
    index_start = len(shard_path.read_bytes()) - codec.index_nbytes if location == "end" else 0
    corrupt_byte(shard_path, index_start + 3)
    with pytest.raises(CodecError, match=r"c/1/2.*CRC-32C"):
        z[8:16, 20:30]
    with pytest.raises(CodecError, match=r"c/1/2.*CRC-32C"):
        asyncio.run(read_shards_partially(LocalStore(str(tmp_path)), "", (9, 21)))
    np.testing.assert_array_equal(z[0:8, :], sample()[0:8, :])


def test_inner_chunk_checksum_mismatch_raises_codec_error_naming_the_shard_and_inner_chunk(tmp_path):
    z = create_asyncarr(tmp_path, "bytes+gzip+crc32c", "end")
    z[:] = sample()
    codec = partial_read_codec(CodecPipeline.from_metadata(z.metadata))
    shard_path = tmp_path / "c" / "0" / "1"
    shard = shard_path.read_bytes()
    offset, nbytes = (int(n) for n in codec.parse_index(shard[-codec.index_nbytes :], "c/0/1")[1, 0])
    corrupt_byte(shard_path, offset + nbytes - 1)  # the inner chunk's own checksum
    with pytest.raises(CodecError, match=r"c/0/1.*inner chunk \(1, 0\).*CRC-32C"):
        z[:]
    with pytest.raises(CodecError, match=r"c/0/1.*inner chunk \(1, 0\).*CRC-32C"):
        asyncio.run(read_shards_partially(LocalStore(str(tmp_path)), "", (5, 12)))
    # the other inner chunks of that shard still read
    np.testing.assert_array_equal(
        asyncio.run(read_shards_partially(LocalStore(str(tmp_path)), "", (1, 12))), sample()[1, 12]
    )


def test_truncated_shard_raises_codec_error(tmp_path):
    z = create_asyncarr(tmp_path, "bytes", "start")
    z[:] = sample()
    shard_path = tmp_path / "c" / "0" / "0"
    shard_path.write_bytes(shard_path.read_bytes()[:-30])
    with pytest.raises(CodecError, match="c/0/0"):
        z[0:8, 0:10]
    with pytest.raises(CodecError, match="c/0/0"):
        asyncio.run(read_shards_partially(LocalStore(str(tmp_path)), "", (7, 9)))


@pytest.mark.parametrize(
    ("configuration", "message"),
    [
        ({"chunk_shape": [3, 5], "codecs": [LITTLE]}, "not a multiple"),
        ({"chunk_shape": [4], "codecs": [LITTLE]}, "dimensions"),
        ({"chunk_shape": [4, 0], "codecs": [LITTLE]}, "positive integers"),
        ({"chunk_shape": [4, 5], "codecs": [LITTLE], "index_location": "middle"}, "index_location"),
        (
            {
                "chunk_shape": [4, 5],
                "codecs": [LITTLE],
                "index_codecs": [LITTLE, {"name": "gzip", "configuration": {"level": 1}}],
            },
            "fixed encoded size",
        ),
        ({"chunk_shape": [4, 5]}, "missing"),
        ({"chunk_shape": [4, 5], "codecs": [LITTLE], "extra": 1}, "unknown"),
    ],
)
def test_invalid_sharding_configuration_raises_metadata_error(configuration, message):
    with pytest.raises(MetadataError, match=message):
        za.open_array(
            MemoryStore(),
            mode="w",
            shape=SHAPE,
            chunks=SHARDS,
            dtype="i4",
            codecs=[{"name": "sharding_indexed", "configuration": configuration}],
        )


# --- requests: what a partial read fetches ---------------------------------------------------


class CountingStore(MemoryStore):
    """A memory store that records every GET of a shard: (key, byte range, bytes returned)."""

    def __init__(self) -> None:
        super().__init__()
        self.gets: list[tuple[str, ByteRange | None, int]] = []

    async def get(self, key: str, byte_range: ByteRange | None = None) -> bytes | None:
        value = await super().get(key, byte_range)
        if key.startswith("c/"):
            self.gets.append((key, byte_range, 0 if value is None else len(value)))
        return value


BIG_DATA = sample((64, 64), seed=3)


def big_shard_store(chain: str = "bytes+blosc", location: str = "end") -> tuple[CountingStore, ShardingCodec, bytes]:
    """One 64x64 shard of 8x8 inner chunks of 8x8 int32 values (64 inner chunks)."""
    store = CountingStore()
    z = za.open_array(
        store, mode="w", shape=(64, 64), chunks=(64, 64), dtype="i4", codecs=[sharding_json(chain, location, (8, 8))]
    )
    z[:] = BIG_DATA
    codec = partial_read_codec(CodecPipeline.from_metadata(z.metadata))
    shard = asyncio.run(store.get("c/0/0"))
    store.gets.clear()
    return store, codec, shard


def inner_nbytes(codec: ShardingCodec, shard: bytes, coords: tuple[int, int], location: str = "end") -> int:
    index_bytes = shard[-codec.index_nbytes :] if location == "end" else shard[: codec.index_nbytes]
    return int(codec.parse_index(index_bytes, "c/0/0")[coords][1])


@pytest.mark.parametrize("location", LOCATIONS)
def test_reading_one_inner_chunk_costs_the_index_and_one_range(location):
    store, codec, shard = big_shard_store(location=location)
    store.gets.clear()
    result = asyncio.run(read_shards_partially(store, "", (slice(17, 23), slice(41, 47))))
    np.testing.assert_array_equal(result, BIG_DATA[17:23, 41:47])
    assert len(store.gets) == 2
    (_, index_range, index_size), (_, chunk_range, chunk_size) = store.gets
    assert index_range == codec.index_byte_range()
    assert index_size == codec.index_nbytes == 64 * 16 + 4
    assert chunk_range is not None and chunk_range.suffix is None
    assert chunk_size < 2 * inner_nbytes(codec, shard, (2, 5), location)


def test_reading_a_block_of_adjacent_inner_chunks_is_one_range_request():
    store, _, shard = big_shard_store()
    result = asyncio.run(read_shards_partially(store, "", (slice(8, 24), slice(16, 32))))  # inner (1..2, 2..3)
    np.testing.assert_array_equal(result, BIG_DATA[8:24, 16:32])
    assert len(store.gets) == 2
    assert store.gets[1][2] < len(shard) / 4


def test_inner_chunks_farther_apart_than_the_coalesce_gap_are_separate_requests():
    store, _, _ = big_shard_store(chain="bytes")  # 256-byte inner chunks
    selection = (slice(0, 64, 16), 0)  # inner chunks (0, 0), (2, 0), (4, 0), (6, 0)
    expected = BIG_DATA[selection]
    with asyncarr.config.set(shard_coalesce_gap=0):
        np.testing.assert_array_equal(asyncio.run(read_shards_partially(store, "", selection)), expected)
    assert len(store.gets) == 1 + 4
    store.gets.clear()
    np.testing.assert_array_equal(asyncio.run(read_shards_partially(store, "", selection)), expected)
    assert len(store.gets) == 2


def test_reading_every_inner_chunk_is_one_get_of_the_whole_shard():
    store, _, shard = big_shard_store()
    result = asyncio.run(read_shards_partially(store, "", (slice(None), slice(None, None, 9))))
    np.testing.assert_array_equal(result, BIG_DATA[:, ::9])
    assert store.gets == [("c/0/0", None, len(shard))]


def test_reading_a_missing_shard_costs_one_request():
    store = CountingStore()
    za.open_array(
        store,
        mode="w",
        shape=(64, 64),
        chunks=(64, 64),
        dtype="i4",
        fill_value=4,
        codecs=[sharding_json("bytes", "end", (8, 8))],
    )
    np.testing.assert_array_equal(asyncio.run(read_shards_partially(store, "", (slice(3, 9), 2))), 4)
    assert len(store.gets) == 1


# --- selection planning --------------------------------------------------------------------------


def test_morton_order_matches_zarr_python():
    from zarr.core.indexing import morton_order_iter

    for grid in [(4, 4), (3, 5), (2, 3, 4), (1, 7), (8,)]:
        assert [tuple(int(i) for i in c) for c in morton_order(grid)] == list(morton_order_iter(grid))


def test_coalesce_ranges_merges_runs_within_the_gap():
    extents = [(100, 10), (0, 50), (60, 20), (500, 5)]
    assert coalesce_ranges(extents, 10) == [(0, 80, [1, 2]), (100, 10, [0]), (500, 5, [3])]
    assert coalesce_ranges(extents, 20) == [(0, 110, [1, 2, 0]), (500, 5, [3])]


@pytest.mark.parametrize(
    "selection",
    [
        (np.array([5, 1, 1, 30]), slice(None)),
        (slice(2, 40, 7), np.array([63, 0, 8])),
        (3, np.array([9, 2])),
        (np.array([True, False] * 64), slice(5, 9)),
        (np.array([5, 1, 1, 100]), np.array([127, 0, 8])),
        (np.array([False, True] * 64), 70),
    ],
)
def test_orthogonal_selections_into_shards_read_like_numpy(selection):
    data = np.arange(128 * 128, dtype="i4").reshape(128, 128)
    store = MemoryStore()
    z = za.open_array(
        store,
        mode="w",
        shape=(128, 128),
        chunks=(64, 64),
        dtype="i4",
        codecs=[sharding_json("bytes+blosc", "start", (8, 8))],
    )
    z[:] = data
    axes = [
        np.array([s]) if isinstance(s, int) else np.arange(n)[s] for s, n in zip(selection, data.shape, strict=True)
    ]
    expected = data[np.ix_(*axes)].reshape(
        [len(a) for a, s in zip(axes, selection, strict=True) if not isinstance(s, int)]
    )
    np.testing.assert_array_equal(asyncio.run(read_shards_partially(store, "", selection, orthogonal=True)), expected)


@pytest.mark.parametrize(
    "selection",
    [
        (np.array([0, 15, 3, 3, 9]), np.array([19, 0, 4, 4, 10])),
        (np.array([2, 14]), 7),
        np.arange(16 * 20).reshape(16, 20) % 7 == 0,
    ],
)
def test_pointwise_selections_and_masks_plan_reads_like_numpy(selection):
    shard = np.arange(16 * 20).reshape(16, 20)
    indexer = plan_inner_reads(selection, (16, 20), (4, 5))
    buffer = np.empty(indexer.buffer_shape, dtype=shard.dtype)
    for p in indexer:
        inner = shard[tuple(slice(c * n, (c + 1) * n) for c, n in zip(p.chunk_coords, (4, 5), strict=True))]
        buffer[p.out_selection] = inner[p.chunk_selection]
    np.testing.assert_array_equal(indexer.finalize(buffer), shard[selection])


@pytest.mark.parametrize(
    "selection",
    [
        (np.array([5, 100, 5, 64, 127]), np.array([0, 127, 3, 64, 1])),
        (np.array([[1, 70], [127, 3]]), slice(60, 70)),
        (slice(2, 100, 9), np.array([3, 90])),
        (np.array([[3], [90]]), np.array([4, 1])),
        np.arange(128 * 128).reshape(128, 128) % 97 == 0,
    ],
)
def test_pointwise_selections_across_shards_read_like_numpy(selection):
    data = np.arange(128 * 128, dtype="i4").reshape(128, 128)
    store = MemoryStore()
    z = za.open_array(
        store, mode="w", shape=(128, 128), chunks=(64, 64), dtype="i4", codecs=[sharding_json("bytes", "end", (8, 8))]
    )
    z[:] = data
    np.testing.assert_array_equal(asyncio.run(read_shards_partially(store, "", selection)), data[selection])


def test_point_arrays_apart_among_slices_read_like_numpy_in_three_dimensions():
    data = sample((16, 12, 10), seed=5)
    store = MemoryStore()
    z = za.open_array(store, mode="w", shape=data.shape, chunks=(4, 3, 5), shards=(8, 6, 10), dtype="i4")
    z[:] = data
    for selection in [
        (np.array([15, 0, 9]), slice(1, 11, 2), np.array([9, 0, 4])),
        (slice(None, None, -3), np.array([11, 2]), np.array([0, 7])),
        (np.array([3, 12]), np.array([[1], [10]]), slice(2, 9)),
    ]:
        np.testing.assert_array_equal(asyncio.run(read_shards_partially(store, "", selection)), data[selection])


# --- through the array API -------------------------------------------------------------------


def test_sync_reads_of_sharded_arrays_match_numpy_for_steps_and_negative_steps():
    data = sample((45, 50), seed=4)
    z = za.open_array(MemoryStore(), mode="w", shape=(45, 50), chunks=(4, 5), shards=(8, 20), dtype="i4")
    z[:] = data
    for selection in [
        (slice(None, None, -1), slice(None, None, -3)),
        (slice(40, 2, -7), 13),
        (-1, slice(49, None, -1)),
        (slice(3, 44, 2), slice(1, 50, 4)),
        (Ellipsis, slice(17, 18)),
    ]:
        np.testing.assert_array_equal(z[selection], data[selection])


def test_partial_shard_writes_from_eight_threads_lose_nothing():
    from concurrent.futures import ThreadPoolExecutor

    z = za.open_array(MemoryStore(), mode="w", shape=(16, 16), chunks=(2, 2), shards=(16, 16), dtype="i4")

    def write_row(row: int) -> None:
        z[row, :] = np.arange(16) + 100 * row

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(write_row, range(16)))
    np.testing.assert_array_equal(z[:], np.arange(16)[None, :] + 100 * np.arange(16)[:, None])


def test_sync_read_of_one_inner_chunk_costs_the_index_and_one_range():
    store = CountingStore()
    z = za.open_array(store, mode="w", shape=(64, 64), chunks=(8, 8), shards=(64, 64), dtype="i4")
    z[:] = BIG_DATA
    shard = asyncio.run(store.get("c/0/0"))
    store.gets.clear()
    np.testing.assert_array_equal(z[17:23, 41:47], BIG_DATA[17:23, 41:47])
    assert len(store.gets) == 2
    codec = partial_read_codec(CodecPipeline.from_metadata(z.metadata))
    assert store.gets[0][1:] == (codec.index_byte_range(), codec.index_nbytes)
    assert store.gets[1][2] < 2 * inner_nbytes(codec, shard, (2, 5))


def test_sync_read_of_a_block_of_inner_chunks_is_one_range_and_of_a_whole_shard_one_get():
    store = CountingStore()
    z = za.open_array(store, mode="w", shape=(60, 64), chunks=(8, 8), shards=(64, 64), dtype="i4")
    z[:] = BIG_DATA[:60]
    size = len(asyncio.run(store.get("c/0/0")))
    store.gets.clear()
    np.testing.assert_array_equal(z[8:24, 16:32], BIG_DATA[8:24, 16:32])
    assert len(store.gets) == 2
    store.gets.clear()
    np.testing.assert_array_equal(z[:], BIG_DATA[:60])  # the edge shard's in-bounds part: complete
    assert store.gets == [("c/0/0", None, size)]


def test_sharded_arrays_report_inner_chunks_and_shards_like_zarr_python(tmp_path):
    import zarr

    z = za.open_array(
        str(tmp_path / "s.zarr"), mode="w", shape=(100, 100), chunks=(10, 10), shards=(50, 50), dtype="f4"
    )
    reference = zarr.open_array(str(tmp_path / "s.zarr"), mode="r")
    assert (z.chunks, z.shards) == (reference.chunks, reference.shards) == ((10, 10), (50, 50))
    assert "Shard shape        : (50, 50)" in str(z.info)
    assert za.open_array(None, mode="w", shape=(4,), chunks=(2,), dtype="i1").shards is None


def test_sharded_chunk_counts_match_zarr_python(tmp_path):
    import zarr

    path = str(tmp_path / "counts.zarr")
    z = za.open_array(path, mode="w", shape=(100, 100), chunks=(10, 10), shards=(50, 50), dtype="f4")
    z[:10, :10] = 1
    reference = zarr.open_array(path, mode="r")
    assert (z.nchunks, z.cdata_shape, z.nchunks_initialized) == (
        reference.nchunks,
        reference.cdata_shape,
        reference.nchunks_initialized,
    )


def test_like_functions_keep_the_shard_shape_of_a_sharded_source():
    source = za.open_array(None, mode="w", shape=(100, 100), chunks=(10, 10), shards=(50, 50), dtype="f4")
    for copy in (za.zeros_like(source), za.empty_like(source), za.empty_like(source, compressor=None)):
        assert (copy.chunks, copy.shards) == ((10, 10), (50, 50))


def test_shards_without_chunks_guesses_inner_chunks_within_one_shard():
    z = za.open_array(None, mode="w", shape=(100,), shards=(50,), dtype="f4")
    assert z.shards == (50,) and 50 % z.chunks[0] == 0
    z[:] = np.arange(100)
    np.testing.assert_array_equal(z[:], np.arange(100))
