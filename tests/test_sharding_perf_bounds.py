"""Bounds of the whole-shard paths (issue 15, W6): the blocking shard reader asks for bounded runs,
never the whole shard, and its peak memory stays near the output; shard encoding, which now lays
inner chunks into one growing buffer, stays byte-identical to zarr-python's for every chain."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import zarr
import zarr.codecs

import asyncarr.sync as za
from asyncarr import shards
from asyncarr.codecs.pipeline import CodecPipeline
from asyncarr.codecs.sharding import _Body
from asyncarr.errors import CodecError
from asyncarr.shards import RUN_BYTES, open_shard_sync, partial_read_codec, read_shard_region_blocking
from asyncarr.stores import MemoryStore

LITTLE = {"name": "bytes", "configuration": {"endian": "little"}}
CHAINS: dict[str, tuple[list[dict[str, Any]], dict[str, Any]]] = {
    # Inner codec JSON for asyncarr, the same chain as zarr-python's create_array arguments.
    "bytes": ([LITTLE], {"compressors": None}),
    "bytes+blosc": (
        [
            LITTLE,
            {
                "name": "blosc",
                "configuration": {"typesize": 1, "cname": "lz4", "clevel": 5, "shuffle": "shuffle", "blocksize": 0},
            },
        ],
        {"compressors": [zarr.codecs.BloscCodec(cname="lz4", clevel=5, shuffle="shuffle", typesize=1)]},
    ),
    "transpose+bytes+zstd": (
        [
            {"name": "transpose", "configuration": {"order": [1, 0]}},
            LITTLE,
            {"name": "zstd", "configuration": {"level": 3, "checksum": False}},
        ],
        {"filters": [zarr.codecs.TransposeCodec(order=(1, 0))], "compressors": [zarr.codecs.ZstdCodec(level=3)]},
    ),
    "bytes+gzip+crc32c": (
        [LITTLE, {"name": "gzip", "configuration": {"level": 5}}, {"name": "crc32c"}],
        {"compressors": [zarr.codecs.GzipCodec(level=5), zarr.codecs.Crc32cCodec()]},
    ),
}


def sharding_json(chain: str, location: str, inner: tuple[int, ...]) -> dict[str, Any]:
    """The sharding_indexed codec JSON with one of the inner chains."""
    configuration = {
        "chunk_shape": list(inner),
        "codecs": CHAINS[chain][0],
        "index_codecs": [LITTLE, {"name": "crc32c"}],
        "index_location": location,
    }
    return {"name": "sharding_indexed", "configuration": configuration}


class RecordingShard:
    """A shard in memory that records every read asked of it."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self.size = len(data)
        self.reads: list[tuple[int, int]] = []

    def read(self, offset: int, nbytes: int) -> bytes:
        self.reads.append((offset, nbytes))
        return self._data[offset : offset + nbytes]


def stored_shard(chain: str = "bytes", location: str = "end", fill: int = -1) -> tuple[Any, bytes, np.ndarray]:
    """One 64x64 int32 shard of 8x8 inner chunks (64 of 256 bytes raw), its inner chunk (1, 2) absent."""
    data = np.random.default_rng(7).integers(0, 1000, size=(64, 64), dtype="i4")
    data[8:16, 16:24] = fill
    store = MemoryStore()
    z = za.open_array(
        store,
        mode="w",
        shape=(64, 64),
        chunks=(64, 64),
        dtype="i4",
        fill_value=fill,
        codecs=[sharding_json(chain, location, (8, 8))],
    )
    z[:] = data
    codec = partial_read_codec(CodecPipeline.from_metadata(z.metadata))
    with open_shard_sync(store, "c/0/0") as shard:
        assert shard is not None
        whole = bytes(shard.read(0, shard.size))
    return codec, whole, data


@pytest.mark.parametrize("location", ["end", "start"])
def test_a_whole_shard_is_read_in_runs_of_at_most_run_bytes(monkeypatch, location):
    codec, whole, data = stored_shard(location=location)
    monkeypatch.setattr(shards, "RUN_BYTES", 4 * 256)
    shard = RecordingShard(whole)
    out = np.empty((64, 64), dtype="i4")
    read_shard_region_blocking(shard, "c/0/0", codec, (slice(0, 64), slice(0, 64)), out, (slice(0, 64), slice(0, 64)))
    np.testing.assert_array_equal(out, data)
    index_read, *runs = shard.reads
    assert index_read[1] == codec.index_nbytes
    assert max(nbytes for _, nbytes in runs) <= 4 * 256
    # 63 stored inner chunks of 256 bytes, adjacent: four to a run.
    assert len(runs) == -(-63 // 4)
    assert sum(nbytes for _, nbytes in runs) == 63 * 256


def test_the_default_run_is_a_few_mebibytes_not_a_shard():
    assert 2**20 <= RUN_BYTES <= 16 * 2**20


def test_an_inner_chunk_larger_than_a_run_is_read_alone(monkeypatch):
    codec, whole, data = stored_shard()
    monkeypatch.setattr(shards, "RUN_BYTES", 100)
    shard = RecordingShard(whole)
    out = np.empty((64, 64), dtype="i4")
    read_shard_region_blocking(shard, "c/0/0", codec, (), out, ())
    np.testing.assert_array_equal(out, data)
    assert [nbytes for _, nbytes in shard.reads[1:]] == [256] * 63


@pytest.mark.parametrize(
    "selection",
    [
        (slice(3, 50), slice(10, 61)),
        (slice(None, None, 7), slice(60, 2, -3)),
        (5, slice(None)),
        (slice(8, 16), slice(16, 24)),  # only the absent inner chunk
        (np.array([1, 40, 9]), slice(0, 30)),
    ],
)
def test_parts_of_a_shard_read_like_numpy_and_ask_only_for_inner_chunks_they_need(selection):
    codec, whole, data = stored_shard(chain="bytes+blosc")
    shard = RecordingShard(whole)
    expected = data[selection]
    out = np.full(expected.shape, 12345, dtype="i4")
    read_shard_region_blocking(shard, "c/0/0", codec, selection, out, tuple(slice(None) for _ in expected.shape))
    np.testing.assert_array_equal(out, expected)
    needed = {p.chunk_coords for p in shards.plan_inner_reads(selection, (64, 64), (8, 8))}
    if len(needed) < 64:
        assert sum(nbytes for _, nbytes in shard.reads) < len(whole)
    else:
        assert sum(nbytes for _, nbytes in shard.reads) == len(whole)  # each byte once


def test_a_truncated_or_damaged_shard_raises_codec_error_naming_the_key():
    codec, whole, _ = stored_shard()
    out = np.empty((64, 64), dtype="i4")
    damaged = bytearray(whole)
    damaged[-2] ^= 0xFF  # the index checksum
    with pytest.raises(CodecError, match="c/0/0"):
        read_shard_region_blocking(RecordingShard(bytes(damaged)), "c/0/0", codec, (), out, ())
    with pytest.raises(CodecError, match=r"c/0/0.*shorter than its"):
        read_shard_region_blocking(RecordingShard(whole[:10]), "c/0/0", codec, (), out, ())

    class Shrinking(RecordingShard):
        """A shard whose file was cut short after its size was taken."""

        def read(self, offset: int, nbytes: int) -> bytes:
            data = super().read(offset, nbytes)
            return data if nbytes == codec.index_nbytes else data[: nbytes // 2]

    with pytest.raises(CodecError, match=r"c/0/0.*before its index says"):
        read_shard_region_blocking(Shrinking(whole), "c/0/0", codec, (), out, ())


def test_open_shard_sync_reads_a_store_without_open_sync_whole_and_a_missing_shard_as_none():
    codec, whole, data = stored_shard()
    store = MemoryStore()
    store.set_sync("c/0/0", whole)
    with open_shard_sync(store, "c/0/1") as missing:
        assert missing is None
    with open_shard_sync(store, "c/0/0") as shard:
        assert shard is not None and shard.size == len(whole)
        out = np.empty((64, 64), dtype="i4")
        read_shard_region_blocking(shard, "c/0/0", codec, (), out, ())
    np.testing.assert_array_equal(out, data)


def test_encoded_body_grows_past_its_first_guess_and_keeps_every_byte():
    pieces = [bytes([n]) * n for n in range(1, 60)]
    body = _Body(7)
    for piece in pieces:
        body.append(piece)
    assert bytes(body.view()) == b"".join(pieces)


@pytest.mark.parametrize("location", ["end", "start"])
@pytest.mark.parametrize("chain", list(CHAINS))
def test_shards_are_byte_identical_to_zarr_python_ones_for_every_chain(tmp_path, chain, location, monkeypatch):
    # gzip writes the current second into each stream's header: two writers a second boundary
    # apart differ there alone. Both get one clock (gzip reads it as `time.time()` in its module).
    monkeypatch.setattr(gzip, "time", SimpleNamespace(time=lambda: 1_700_000_000.0))
    # Random bytes: gzip and zstd output is larger than its input, past the body's first guess of its size.
    data = np.random.default_rng(1).integers(0, 256, size=(48, 64), dtype="u1")
    data[0:8, 0:16] = 0  # an inner chunk of nothing but fill: left out by both
    ours = za.open_array(
        str(tmp_path / "ours"),
        mode="w",
        shape=data.shape,
        chunks=(24, 32),
        dtype="u1",
        fill_value=0,
        codecs=[sharding_json(chain, location, (8, 16))],
    )
    ours[:] = data
    reference = zarr.create_array(
        store=str(tmp_path / "ref"),
        shape=data.shape,
        chunks=(8, 16),
        shards={"shape": (24, 32), "index_location": location},
        dtype="u1",
        fill_value=0,
        **CHAINS[chain][1],
    )
    reference[:] = data
    keys = sorted(
        p.relative_to(tmp_path / "ref").as_posix() for p in (tmp_path / "ref" / "c").rglob("*") if p.is_file()
    )
    assert len(keys) == 4
    for key in keys:
        assert (tmp_path / "ours" / key).read_bytes() == (tmp_path / "ref" / key).read_bytes(), key


# --- peak memory, measured in a child process ------------------------------------------------------

_CHILD = textwrap.dedent(
    """
    import json, os, sys
    import numpy as np
    import asyncarr.sync as za
    from asyncarr.codecs.pipeline import CodecPipeline
    from asyncarr.codecs.v3 import ChunkSpec
    from asyncarr.shards import partial_read_codec, read_shard_region_blocking

    path, mode = sys.argv[1], sys.argv[2]
    z = za.open_array(path, mode="r")
    codec = partial_read_codec(CodecPipeline.from_metadata(z.metadata))
    shard_file = os.path.join(path, "c", "0", "0")

    class FileShard:
        def __init__(self, fd):
            self._fd = fd
            self.size = os.fstat(fd).st_size

        def read(self, offset, nbytes):
            return os.pread(self._fd, nbytes, offset)

    def peak_kib():
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))

    out = np.ones(z.shape, dtype=z.dtype)  # touched: part of the baseline
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")  # resets the peak to the present size (Linux 4.0 on)
    baseline = peak_kib()
    if mode == "runs":
        fd = os.open(shard_file, os.O_RDONLY)
        read_shard_region_blocking(FileShard(fd), "c/0/0", codec, (), out, ())
        os.close(fd)
    else:  # the shard read whole first, as a control that the measure sees a shard-sized buffer
        with open(shard_file, "rb") as f:
            data = f.read()
        codec.decode_into(data, ChunkSpec(z.shape, z.dtype), out)
    grown = peak_kib() - baseline
    print(json.dumps({"grown_kib": grown, "shard_bytes": os.path.getsize(shard_file), "sum": float(out.sum())}))
    """
)


def _child_peak(path: Path, mode: str) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), mode], capture_output=True, text=True, check=True, timeout=120
    )
    return json.loads(result.stdout)


@pytest.mark.skipif(sys.platform != "linux", reason="the peak is read from /proc/self/status")
def test_reading_a_whole_shard_in_runs_keeps_peak_memory_near_the_output(tmp_path):
    # One 32 MiB shard of 1 MiB inner chunks that do not compress: a shard held whole is ~32 MiB more.
    data = np.random.default_rng(0).random((2048, 2048), dtype="f8")
    z = za.open_array(
        str(tmp_path / "a"),
        mode="w",
        shape=data.shape,
        chunks=data.shape,
        dtype="f8",
        codecs=[sharding_json("bytes", "end", (256, 512))],
    )
    z[:] = data
    expected_sum = float(data.sum())
    runs = _child_peak(tmp_path / "a", "runs")
    whole = _child_peak(tmp_path / "a", "whole")
    assert runs["sum"] == whole["sum"] == pytest.approx(expected_sum)
    shard_kib = runs["shard_bytes"] // 1024
    assert whole["grown_kib"] > shard_kib * 3 // 4  # the measure sees a shard-sized buffer
    assert runs["grown_kib"] < (RUN_BYTES // 1024) * 3  # a run or two, not the shard


_FACADE_CHILD = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import asyncarr
    import asyncarr.sync as za

    asyncarr.config.set(codec_threads=2)  # two shards read at once, whatever the machine

    def peak_kib():
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))

    z = za.open_array(sys.argv[1], mode="r")
    z[:8, :8]  # the codec threads and their first buffers, outside the measure
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")
    baseline = peak_kib()
    out = z[...]
    print(json.dumps({"grown_kib": peak_kib() - baseline, "out_kib": out.nbytes // 1024, "sum": float(out.sum())}))
    """
)


@pytest.mark.skipif(sys.platform != "linux", reason="the peak is read from /proc/self/status")
def test_a_full_read_of_a_sharded_local_array_peaks_near_its_output(tmp_path):
    # Four 16 MiB shards of 1 MiB inner chunks that do not compress, read by two codec threads:
    # whole shards held by each would be 32 MiB above the 64 MiB output; a run and an inner
    # chunk each, about 10 MiB.
    data = np.random.default_rng(0).random((2048, 4096), dtype="f8")
    z = za.open_array(
        str(tmp_path / "a"),
        mode="w",
        shape=data.shape,
        chunks=(1024, 2048),
        dtype="f8",
        codecs=[sharding_json("bytes", "end", (256, 512))],
    )
    z[:] = data
    result = subprocess.run(
        [sys.executable, "-c", _FACADE_CHILD, str(tmp_path / "a")], capture_output=True, text=True, check=True
    )
    measured = json.loads(result.stdout)
    assert measured["sum"] == pytest.approx(float(data.sum()))
    assert measured["grown_kib"] <= measured["out_kib"] + 4 * RUN_BYTES // 1024
