"""What opening, resizing and describing a stranger's array cost: what is stored, not what is declared.

Every store here is written with plain file writes, as a stranger would. Costs are asserted as
COUNTS (requests by operation through `CountingStore`, requests an HTTP server received, peak
memory of a child process), never as seconds; each test also has a timeout, so a return of
one request per declared cell shows up as a failure, not as a slow suite.
"""

from __future__ import annotations

import collections
import json
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from emulators.http import request_log, serve_directory
from strangers import write_documents

import asyncarr.sync as za
from asyncarr import config
from asyncarr.codecs.sharding import MAX_SHARD_INDEX_NBYTES
from asyncarr.errors import CodecError, StoreError
from asyncarr.stores import ByteRange, LocalStore, Store

pytestmark = pytest.mark.timeout(120)

BILLION_SHAPE = (1_000_000, 1_000_000)
BILLION_CHUNKS = (100, 10)  # a grid of 10_000 x 100_000 = 10**9 chunks
STORED_CHUNKS = ((0, 0), (5, 7), (9_000, 90_000))


class CountingStore(Store):
    """A real store behind a count of every request made through it, by operation."""

    def __init__(self, inner: Store) -> None:
        super().__init__(read_only=inner.read_only)
        self.inner = inner
        self.supports_listing = inner.supports_listing
        self.requests: collections.Counter[str] = collections.Counter()

    @property
    def location(self) -> str:
        """The wrapped store's location (so locks and limiters are the ones it would use)."""
        return self.inner.location

    async def get(self, key: str, byte_range: ByteRange | None = None) -> bytes | None:
        self.requests["get"] += 1
        return await self.inner.get(key, byte_range)

    async def set(self, key: str, value: bytes) -> None:
        self.requests["set"] += 1
        await self.inner.set(key, value)

    async def delete(self, key: str) -> None:
        self.requests["delete"] += 1
        await self.inner.delete(key)

    async def exists(self, key: str) -> bool:
        self.requests["exists"] += 1
        return await self.inner.exists(key)

    async def getsize(self, key: str) -> int | None:
        self.requests["getsize"] += 1
        return await self.inner.getsize(key)

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        self.requests["list"] += 1
        async for key in self.inner.list_prefix(prefix):
            yield key

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        self.requests["list"] += 1
        async for name in self.inner.list_dir(prefix):
            yield name

    def take(self) -> dict[str, int]:
        """The requests counted since the last call, then start counting afresh."""
        counted = dict(self.requests)
        self.requests.clear()
        return counted


def disk_sizes(root: Path) -> dict[str, int]:
    """Every file below `root` (relative key -> size in bytes)."""
    return {path.relative_to(root).as_posix(): path.stat().st_size for path in root.rglob("*") if path.is_file()}


def v3_document(shape: tuple[int, ...], chunks: tuple[int, ...], codecs: list[dict], **extra: Any) -> dict:
    return {
        "zarr_format": 3,
        "node_type": "array",
        "shape": list(shape),
        "data_type": extra.pop("data_type", "int32"),
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks)}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": extra.pop("fill_value", 0),
        "codecs": codecs,
        **extra,
    }


def sharding(inner_chunks: tuple[int, ...], *, endian: bool = True) -> list[dict]:
    """The codec chain of a sharded array: uncompressed inner chunks, a bytes + crc32c index at the end
    (``endian=False``: inner ``bytes`` without a configuration, enough for one-byte data types)."""
    index_codecs = [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]
    inner_codecs = [{"name": "bytes", "configuration": {"endian": "little"}} if endian else {"name": "bytes"}]
    configuration = {"chunk_shape": list(inner_chunks), "codecs": inner_codecs, "index_codecs": index_codecs}
    return [{"name": "sharding_indexed", "configuration": configuration}]


def chunk_data(coords: tuple[int, ...]) -> np.ndarray:
    """The contents of the stored chunk at `coords`: distinct, nonzero values per chunk."""
    start = 1 + 1000 * (coords[0] % 97 + 3 * (coords[1] % 89))
    return np.arange(start, start + 1000, dtype="<i4").reshape(BILLION_CHUNKS)


def write_billion_chunk_array(root: Path, zarr_format: int) -> Path:
    """An array declaring a grid of a billion chunks, of which three are stored."""
    if zarr_format == 3:
        raw = [{"name": "bytes", "configuration": {"endian": "little"}}]
        files: dict[str, bytes | str | dict] = {"zarr.json": v3_document(BILLION_SHAPE, BILLION_CHUNKS, raw)}
        key = "c/{}/{}"
    else:
        files = {
            ".zarray": {
                "zarr_format": 2,
                "shape": list(BILLION_SHAPE),
                "chunks": list(BILLION_CHUNKS),
                "dtype": "<i4",
                "compressor": None,
                "filters": None,
                "fill_value": 0,
                "order": "C",
                "dimension_separator": ".",
            }
        }
        key = "{}.{}"
    for coords in STORED_CHUNKS:
        files[key.format(*coords)] = chunk_data(coords).tobytes()
    return write_documents(root, files)


def stored_chunk_coords(root: Path, zarr_format: int) -> set[tuple[int, ...]]:
    """Coordinates of the chunk files on disk."""
    names = [name for name in disk_sizes(root) if name not in ("zarr.json", ".zarray")]
    split = (lambda name: name[2:].split("/")) if zarr_format == 3 else (lambda name: name.split("."))
    return {tuple(int(part) for part in split(name)) for name in names}


# -- opening ----------------------------------------------------------------------------------


def write_4_million_inner_chunks(root: Path) -> Path:
    """The issue's 430-byte zarr.json: one shard of 4 million one-element inner chunks, none stored."""
    document = v3_document((4_000_000,), (4_000_000,), sharding((1,), endian=False), data_type="uint8", fill_value=7)
    document["chunk_key_encoding"] = {"name": "default"}
    write_documents(root, {"zarr.json": document})
    assert (root / "zarr.json").stat().st_size < 430
    return root


def test_a_4_million_inner_chunk_shard_opens_with_one_metadata_round_trip_and_reads_a_missing_shard_with_one_request(
    tmp_path: Path,
) -> None:
    store = CountingStore(LocalStore(write_4_million_inner_chunks(tmp_path / "a.zarr")))

    z = za.open_array(store, mode="r")
    opening = store.take()
    value = z[123_456]

    assert value == 7
    # The documents of both formats, asked for at once: a fixed few, never one per inner chunk.
    assert opening.get("get", 0) <= 4 and not opening.keys() - {"get", "exists"}, opening
    assert store.take() == {"get": 1}  # the shard's index range: absent, so the fill value


# Peak memory in KiB. Linux's ru_maxrss survives exec: a child of a test process that once
# peaked at 400 MiB starts out "peaked" there and could not show its own growth. VmHWM is the
# peak of the child's own address space; ru_maxrss stands in where /proc is missing.
_MEMORY_PROBE = textwrap.dedent(
    """
    import json, resource, sys
    import asyncarr.sync as za

    def peak_kib():
        try:
            with open("/proc/self/status") as status:
                return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
        except OSError:
            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    warm_up, hostile = sys.argv[1], sys.argv[2]
    za.open_array(warm_up, mode="r")[5]  # imports, threads and caches: not the cost measured
    before = peak_kib()
    z = za.open_array(hostile, mode="r")
    value = int(z[123_456])
    after = peak_kib()
    print(json.dumps({"added_kib": after - before, "value": value}))
    """
)


def test_opening_and_reading_the_4_million_inner_chunk_array_adds_under_20_mib_of_peak_memory(
    tmp_path: Path,
) -> None:
    hostile = write_4_million_inner_chunks(tmp_path / "hostile.zarr")
    warm_up = tmp_path / "small.zarr"
    write_documents(warm_up, {"zarr.json": v3_document((16,), (16,), sharding((1,)), data_type="uint8", fill_value=7)})

    result = subprocess.run(
        [sys.executable, "-c", _MEMORY_PROBE, str(warm_up), str(hostile)],
        capture_output=True,
        text=True,
        check=True,
        timeout=100,
    )
    measured = json.loads(result.stdout)

    assert measured["value"] == 7
    assert measured["added_kib"] < 20 * 1024, measured  # it was 429 MiB: a write order of 4 million tuples


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_opening_an_array_declaring_a_billion_chunks_reads_only_its_metadata(tmp_path: Path, zarr_format: int) -> None:
    store = CountingStore(LocalStore(write_billion_chunk_array(tmp_path / "a.zarr", zarr_format)))

    z = za.open_array(store, mode="r")
    opening = store.take()

    assert z.nchunks == 10**9
    assert opening.get("get", 0) <= 4 and not opening.keys() - {"get", "exists"}, opening


# -- the shard index: capped, and never larger than what is stored ---------------------------------


def write_over_cap_shard(root: Path, *, stored: bool) -> Path:
    """A shard of 2**23 inner chunks (a 128 MiB index, over the cap) whose stored object, if any, is 100 bytes."""
    files: dict[str, bytes | str | dict] = {
        "zarr.json": v3_document((2**23,), (2**23,), sharding((1,)), data_type="uint8", fill_value=7)
    }
    if stored:
        files["c/0"] = bytes(100)
    return write_documents(root, files)


def test_a_declared_index_over_the_cap_is_refused_naming_the_shard_without_requesting_it(tmp_path: Path) -> None:
    assert 2**23 * 16 + 4 > MAX_SHARD_INDEX_NBYTES
    root = write_over_cap_shard(tmp_path / "a.zarr", stored=True)
    store = CountingStore(LocalStore(root))
    z = za.open_array(store, mode="r")
    store.take()

    with pytest.raises(CodecError) as caught:
        z[5]

    message = str(caught.value)
    assert "c/0" in message and "MAX_SHARD_INDEX_NBYTES" in message and str(2**23) in message
    assert store.take() == {"exists": 1}  # no ranged GET of 128 MiB, no allocation of it


def test_a_whole_shard_read_with_an_index_over_the_cap_is_refused_naming_the_shard(tmp_path: Path) -> None:
    z = za.open_array(str(write_over_cap_shard(tmp_path / "a.zarr", stored=True)), mode="r")

    with pytest.raises(CodecError) as caught:
        z[:]

    assert "c/0" in str(caught.value) and "MAX_SHARD_INDEX_NBYTES" in str(caught.value)


def test_an_absent_shard_with_an_index_over_the_cap_reads_as_the_fill_value(tmp_path: Path) -> None:
    store = CountingStore(LocalStore(write_over_cap_shard(tmp_path / "a.zarr", stored=False)))
    z = za.open_array(store, mode="r")
    store.take()

    assert z[5] == 7
    assert store.take() == {"exists": 1}


def test_writing_a_shard_whose_index_is_over_the_cap_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    root = write_over_cap_shard(tmp_path / "a.zarr", stored=False)
    before = disk_sizes(root)
    z = za.open_array(str(root), mode="r+")

    with pytest.raises(CodecError) as caught:
        z[0:4] = 1

    assert "c/0" in str(caught.value) and "MAX_SHARD_INDEX_NBYTES" in str(caught.value)
    assert disk_sizes(root) == before


def test_a_declared_index_larger_than_the_stored_shard_is_a_codec_error_naming_the_shard(tmp_path: Path) -> None:
    # 1000 inner chunks: a 16004-byte index, declared for a shard of 100 bytes.
    root = write_documents(
        tmp_path / "a.zarr",
        {"zarr.json": v3_document((1000,), (1000,), sharding((1,)), data_type="uint8"), "c/0": bytes(100)},
    )
    store = CountingStore(LocalStore(root))
    z = za.open_array(store, mode="r")
    store.take()

    with pytest.raises(CodecError) as caught:
        z[5]

    assert "c/0" in str(caught.value) and "16004" in str(caught.value)
    assert store.take() == {"get": 1}


def test_opening_a_shard_of_2_to_the_40_inner_chunks_costs_nothing_and_its_absent_shard_reads_as_fill(
    tmp_path: Path,
) -> None:
    document = v3_document((2**40,), (2**40,), sharding((1,)), data_type="uint8", fill_value=7)
    store = CountingStore(LocalStore(write_documents(tmp_path / "a.zarr", {"zarr.json": document})))

    z = za.open_array(store, mode="r")
    store.take()

    assert z.shards == (2**40,) and z[2**39] == 7
    assert store.take() == {"exists": 1}


# -- counting and sizing what is stored, on a store that lists -------------------------------------


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_nchunks_initialized_of_a_billion_chunk_grid_is_one_listing(tmp_path: Path, zarr_format: int) -> None:
    store = CountingStore(LocalStore(write_billion_chunk_array(tmp_path / "a.zarr", zarr_format)))
    z = za.open_array(store, mode="r")
    store.take()

    assert z.nchunks_initialized == len(STORED_CHUNKS)
    assert store.take() == {"list": 1}


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_nbytes_stored_and_info_are_one_listing_and_one_size_per_stored_key(tmp_path: Path, zarr_format: int) -> None:
    root = write_billion_chunk_array(tmp_path / "a.zarr", zarr_format)
    store = CountingStore(LocalStore(root))
    z = za.open_array(store, mode="r")
    store.take()
    on_disk = disk_sizes(root)

    assert z.nbytes_stored == sum(on_disk.values())
    assert store.take() == {"list": 1, "getsize": len(on_disk)}

    info = z.info
    assert info["Chunks initialized"] == f"{len(STORED_CHUNKS)}/{10**9}"
    assert info["No. bytes stored"].startswith(f"{sum(on_disk.values())} ")
    assert store.take() == {"list": 1, "getsize": len(on_disk)}


def test_nchunks_initialized_of_a_sharded_billion_shard_grid_is_one_listing(tmp_path: Path) -> None:
    document = v3_document(BILLION_SHAPE, (100, 10), sharding((10, 5)))
    files: dict[str, bytes | str | dict] = {"zarr.json": document}
    root = write_documents(tmp_path / "a.zarr", files)
    z = za.open_array(str(root), mode="r+")
    z[0:100, 0:10] = chunk_data((0, 0))  # shards written by us, the grid declared by a stranger
    z[-100:, -10:] = chunk_data((1, 1))
    store = CountingStore(LocalStore(root))
    z = za.open_array(store, mode="r")
    store.take()

    assert z.nchunks_initialized == 2 * 20  # two stored shards of 10 x 2 inner chunks each
    assert store.take() == {"list": 1}
    np.testing.assert_array_equal(z[-100:, -10:], chunk_data((1, 1)))


# -- resize: deletes what exists, clears what is cut ----------------------------------------------


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_shrinking_a_billion_chunk_grid_deletes_and_clears_only_the_stored_chunks(
    tmp_path: Path, zarr_format: int
) -> None:
    root = write_billion_chunk_array(tmp_path / "a.zarr", zarr_format)
    store = CountingStore(LocalStore(root))
    z = za.open_array(store, mode="r+")
    store.take()

    z.resize(550, 75)  # keeps chunk rows 0-5 and columns 0-7; cuts chunk (5, 7) on both axes
    resizing = store.take()

    assert resizing["list"] == 1 and resizing["delete"] == 1  # (9000, 90000), the only stored chunk outside
    assert resizing.get("get", 0) <= 2 and resizing["set"] <= 3  # chunk (5, 7) cleared twice, then the metadata
    assert not resizing.keys() - {"list", "delete", "get", "set"}, resizing
    assert stored_chunk_coords(root, zarr_format) == {(0, 0), (5, 7)}

    expected = np.zeros((550, 75), dtype="<i4")
    expected[0:100, 0:10] = chunk_data((0, 0))
    expected[500:550, 70:75] = chunk_data((5, 7))[:50, :5]
    np.testing.assert_array_equal(z[:], expected)

    z.resize(600, 80)  # growing shows the fill value where the cut chunk held data past the boundary
    assert store.take().keys() <= {"get", "set"}  # no listing, no deletes: growing touches no chunk
    grown = np.zeros((600, 80), dtype="<i4")
    grown[:550, :75] = expected
    np.testing.assert_array_equal(z[:], grown)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_growing_a_billion_chunk_grid_only_rewrites_the_metadata(tmp_path: Path, zarr_format: int) -> None:
    root = write_billion_chunk_array(tmp_path / "a.zarr", zarr_format)
    store = CountingStore(LocalStore(root))
    z = za.open_array(store, mode="r+")
    store.take()

    z.resize(2_000_000, 1_000_000)

    assert store.take() == {"set": 1}
    assert stored_chunk_coords(root, zarr_format) == set(STORED_CHUNKS)
    np.testing.assert_array_equal(z[900_000:900_100, 900_000:900_010], chunk_data((9_000, 90_000)))


def test_shrinking_to_nothing_deletes_exactly_the_stored_chunks(tmp_path: Path) -> None:
    root = write_billion_chunk_array(tmp_path / "a.zarr", 3)
    store = CountingStore(LocalStore(root))
    z = za.open_array(store, mode="r+")
    store.take()

    z.resize(0, 1_000_000)

    assert store.take() == {"list": 1, "delete": len(STORED_CHUNKS), "set": 1}
    assert list(disk_sizes(root)) == ["zarr.json"]
    assert z.nchunks_initialized == 0


# -- stores that cannot list (HTTP) ---------------------------------------------------------------


def test_over_http_a_billion_chunk_grid_refuses_to_count_and_info_says_unknown_without_a_request(
    tmp_path: Path,
) -> None:
    url = serve_directory(write_billion_chunk_array(tmp_path / "a.zarr", 3))
    z = za.open_array(url, mode="r")
    sent = len(request_log(url))

    with pytest.raises(StoreError) as counting:
        _ = z.nchunks_initialized
    with pytest.raises(StoreError) as sizing:
        _ = z.nbytes_stored
    info = z.info

    for caught in (counting, sizing):
        message = str(caught.value)
        assert url in message and "max_probed_chunks" in message and str(10**9) in message
    assert info["Chunks initialized"] == f"unknown/{10**9}" and info["No. bytes stored"] == "unknown"
    assert len(request_log(url)) == sent  # not one probe
    np.testing.assert_array_equal(z[500:600, 70:80], chunk_data((5, 7)))


def write_small_v2_array(root: Path) -> Path:
    """A 4 x 3 grid of chunks, three of them stored."""
    files: dict[str, bytes | str | dict] = {
        ".zarray": {
            "zarr_format": 2,
            "shape": [40, 30],
            "chunks": [10, 10],
            "dtype": "<i4",
            "compressor": None,
            "filters": None,
            "fill_value": 0,
            "order": "C",
        },
    }
    for i, j in ((0, 0), (1, 2), (3, 1)):
        files[f"{i}.{j}"] = np.full((10, 10), 10 * i + j + 1, dtype="<i4").tobytes()
    return write_documents(root, files)


def test_over_http_a_small_grid_is_probed_once_per_chunk_key(tmp_path: Path) -> None:
    root = write_small_v2_array(tmp_path / "a.zarr")
    url = serve_directory(root)
    z = za.open_array(url, mode="r")
    sent = len(request_log(url))

    assert z.nchunks_initialized == 3
    probes = request_log(url)[sent:]
    assert len(probes) == 12 and {record.method for record in probes} == {"HEAD"}

    assert z.nbytes_stored == sum(disk_sizes(root).values())
    assert len(request_log(url)) - sent == 12 + 12 + 2  # every chunk key, then .zarray and .zattrs


def test_over_http_a_grid_one_past_the_probe_cap_is_refused_before_any_request(tmp_path: Path) -> None:
    url = serve_directory(write_small_v2_array(tmp_path / "a.zarr"))
    z = za.open_array(url, mode="r")
    sent = len(request_log(url))
    with config.set(max_probed_chunks=11), pytest.raises(StoreError, match="11"):
        _ = z.nchunks_initialized

    assert len(request_log(url)) == sent


@pytest.mark.parametrize("shards", [None, (4, 6, 4)], ids=["chunks", "shards"])
@pytest.mark.parametrize("write_empty_chunks", [False, True])
def test_resizing_by_what_is_stored_matches_numpy_through_shrinks_and_regrowth(
    tmp_path: Path, shards: tuple[int, ...] | None, write_empty_chunks: bool
) -> None:
    rng = np.random.default_rng(11)
    shape = (13, 17, 9)
    model = np.full(shape, -1, dtype="i4")
    with config.set(write_empty_chunks=write_empty_chunks):
        z = za.open_array(
            str(tmp_path / "a.zarr"), mode="w", shape=shape, chunks=(2, 3, 2), shards=shards, dtype="i4", fill_value=-1
        )
        for _ in range(12):  # scattered blocks: some chunks stored, some never written
            start = [int(rng.integers(0, n)) for n in shape]
            region = tuple(slice(s, s + int(rng.integers(1, 5))) for s in start)
            value = rng.integers(0, 100, size=model[region].shape, dtype="i4")
            model[region] = value
            z[region] = value
        # Each shrink that cuts chunks is followed by growth, which shows anything left past the cut.
        shapes = [(11, 17, 9), (13, 17, 9), (7, 10, 5), (12, 16, 9), (3, 20, 4), (13, 17, 9), (7, 10, 0), (13, 17, 9)]
        for new_shape in shapes:
            z.resize(new_shape)
            grown = np.full(new_shape, -1, dtype="i4")
            overlap = tuple(slice(0, min(a, b)) for a, b in zip(model.shape, new_shape, strict=True))
            grown[overlap] = model[overlap]
            model = grown
            np.testing.assert_array_equal(z[...], model, err_msg=f"after resize to {new_shape}")
            grid = z.shards or z.chunks
            outside = {
                coords
                for coords in stored_chunk_coords(tmp_path / "a.zarr", 3)
                if any(c * g >= n for c, g, n in zip(coords, grid, new_shape, strict=True))
            }
            assert outside == set(), f"chunks left outside {new_shape}: {outside}"
