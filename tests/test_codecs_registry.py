"""The codec registry writes the v3 JSON zarr-python writes, accepts every spelling users pass,
and the codec thread pool follows the settings and survives fork."""

from __future__ import annotations

import asyncio
import json
import lzma
import os
import threading
import warnings

import numcodecs
import numpy as np
import pytest
import zarr
import zarr.codecs
import zarr.codecs.numcodecs as zarr_numcodecs
import zarr.metadata.migrate_v3
from numcodecs.compat import ensure_bytes

from asyncarr import config
from asyncarr.codecs import (
    codec_executor,
    codec_from_v2_config,
    codec_from_v3_json,
    normalize_codecs,
    normalize_compression,
    normalize_compressor,
    normalize_filters,
    run_in_codec_pool,
    to_v3_json,
    v3_codec_chain,
)
from asyncarr.errors import MetadataError

# zarr-python warns when its numcodecs wrappers are built, also while the case tables load
warnings.filterwarnings("ignore", message="Numcodecs codecs are not in the Zarr version 3 specification")
pytestmark = pytest.mark.filterwarnings("ignore:Numcodecs codecs are not in the Zarr version 3 specification")

TUTORIAL_LZMA_FILTERS = [{"id": lzma.FILTER_DELTA, "dist": 4}, {"id": lzma.FILTER_LZMA2, "preset": 1}]


def codecs_zarr_python_writes(dtype: str, **kwargs) -> list[dict]:
    """The codec JSON in the zarr.json of a v3 array zarr-python creates with `kwargs`."""
    store: dict = {}
    zarr.create_array(store=zarr.storage.MemoryStore(store), shape=(6, 4), chunks=(3, 2), dtype=dtype, **kwargs)
    return json.loads(store["zarr.json"].to_bytes())["codecs"]


# --- registry: v3 JSON and the spellings users pass ------------------------------------------

MIGRATION_CASES = {
    "blosc": ("i4", numcodecs.Blosc(cname="zstd", clevel=3, shuffle=numcodecs.Blosc.BITSHUFFLE), None, "C"),
    "blosc-1-byte": ("u1", numcodecs.Blosc(cname="lz4", shuffle=numcodecs.Blosc.NOSHUFFLE), None, "C"),
    "zstd": ("f4", numcodecs.Zstd(level=7, checksum=True), None, "C"),
    "gzip": ("i2", numcodecs.GZip(level=2), None, "C"),
    "zlib": ("i8", numcodecs.Zlib(level=4), None, "F"),
    "lzma": ("f8", numcodecs.LZMA(filters=TUTORIAL_LZMA_FILTERS), None, "C"),
    "bz2": ("u2", numcodecs.BZ2(level=3), None, "C"),
    "lz4": ("u2", numcodecs.LZ4(acceleration=2), None, "C"),
    "delta": ("i4", numcodecs.Zstd(), [numcodecs.Delta(dtype="<i4", astype="<i2")], "C"),
    "fixedscaleoffset": ("f8", None, [numcodecs.FixedScaleOffset(offset=1, scale=10, dtype="<f8", astype="<i4")], "C"),
}


@pytest.mark.parametrize(("dtype", "compressor", "filters", "order"), MIGRATION_CASES.values(), ids=MIGRATION_CASES)
def test_v3_json_matches_zarr_pythons_migration_of_v2_arrays(dtype, compressor, filters, order) -> None:
    v2_store, v3_store = zarr.storage.MemoryStore(), zarr.storage.MemoryStore()
    zarr.create_array(
        store=v2_store, shape=(6, 4), chunks=(3, 2), dtype=dtype, zarr_format=2,
        compressors=compressor, filters=filters, order=order,
    )  # fmt: skip
    zarr.metadata.migrate_v3.migrate_v2_to_v3(input_store=v2_store, output_store=v3_store)
    written = json.loads(v3_store._store_dict["zarr.json"].to_bytes())["codecs"]
    ours = v3_codec_chain(dtype=np.dtype(dtype), ndim=2, compressor=compressor, filters=filters, order=order)
    assert list(ours) == written
    if compressor is not None:
        assert to_v3_json(compressor, np.dtype(dtype)) == written[-1]


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        (numcodecs.Blosc(cname="lz4", clevel=5, shuffle=1), zarr.codecs.BloscCodec(cname="lz4", shuffle="shuffle")),
        (numcodecs.Zstd(level=0), zarr.codecs.ZstdCodec(level=0)),
        (numcodecs.GZip(level=5), zarr.codecs.GzipCodec(level=5)),
        (numcodecs.CRC32C(), zarr.codecs.Crc32cCodec()),
        (numcodecs.Zlib(level=1), zarr_numcodecs.Zlib(level=1)),
        (numcodecs.BZ2(level=1), zarr_numcodecs.BZ2(level=1)),
        (numcodecs.Shuffle(elementsize=4), zarr_numcodecs.Shuffle(elementsize=4)),
    ],
)
def test_to_v3_json_equals_what_zarr_python_writes(ours, theirs) -> None:
    written = codecs_zarr_python_writes("i4", compressors=theirs)[-1]
    assert to_v3_json(ours, np.dtype("i4")) == written
    back = codec_from_v3_json(written, np.dtype("i4"))
    assert back.get_config() == ours.get_config()
    # the typesize travels along (numcodecs keeps it privately, out of its config)
    data = np.arange(1000, dtype="i4")
    assert ensure_bytes(back.encode(data.view("u1"))) == ensure_bytes(ours.encode(data))


@pytest.mark.parametrize("dtype", ["u1", "f8"])
def test_blosc_autoshuffle_becomes_the_shuffle_zarr_python_picks_for_the_item_size(dtype: str) -> None:
    written = codecs_zarr_python_writes(dtype, compressors=zarr.codecs.BloscCodec(cname="zstd", clevel=5))[-1]
    autoshuffle = numcodecs.Blosc(cname="zstd", clevel=5, shuffle=numcodecs.Blosc.AUTOSHUFFLE)
    assert to_v3_json(autoshuffle, np.dtype(dtype)) == written


def test_codec_from_v2_config_and_unknown_ids() -> None:
    assert codec_from_v2_config({"id": "zlib", "level": 3}) == numcodecs.Zlib(level=3)
    with pytest.raises(MetadataError, match="'nonesuch'"):
        codec_from_v2_config({"id": "nonesuch"})
    with pytest.raises(MetadataError):
        codec_from_v2_config({"level": 3})


@pytest.mark.parametrize(
    ("compression", "compression_opts", "expected"),
    [
        ("blosc", {"cname": "lz4", "clevel": 3, "shuffle": 2}, numcodecs.Blosc(cname="lz4", clevel=3, shuffle=2)),
        ("blosc", None, numcodecs.Blosc()),
        ("zlib", 1, numcodecs.Zlib(level=1)),
        ("gzip", 6, numcodecs.GZip(level=6)),
        ("lzma", {"filters": TUTORIAL_LZMA_FILTERS}, numcodecs.LZMA(filters=TUTORIAL_LZMA_FILTERS)),
        ("zstd", {"level": 3}, numcodecs.Zstd(level=3)),
        ("bz2", 9, numcodecs.BZ2(level=9)),
        ("default", None, numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE)),
        (None, None, None),
        ("none", None, None),
        (numcodecs.Zstd(level=2), None, numcodecs.Zstd(level=2)),
    ],
)
def test_normalize_compression_accepts_the_tutorial_spellings(compression, compression_opts, expected) -> None:
    codec = normalize_compression(compression, compression_opts)
    assert (codec.get_config() if codec else None) == (expected.get_config() if expected else None)


def test_normalize_compression_rejects_unknown_names_and_options() -> None:
    with pytest.raises(ValueError, match="unknown compression 'snappy-ish'"):
        normalize_compression("snappy-ish")
    with pytest.raises(ValueError, match="compression_opts"):
        normalize_compression("zlib", {"nonsense": 1})


@pytest.mark.parametrize(
    "compressor",
    [numcodecs.Blosc(), numcodecs.Zstd(level=1), numcodecs.Zstd(checksum=True), numcodecs.GZip(3), numcodecs.LZMA()],
    ids=repr,
)
def test_normalize_compressor_v2_writes_the_zarray_form_zarr_python_writes(compressor) -> None:
    store: dict = {}
    zarr.create_array(
        store=zarr.storage.MemoryStore(store), shape=(4,), chunks=(2,), dtype="i4", zarr_format=2,
        compressors=compressor, filters=[numcodecs.Delta(dtype="<i4")],
    )  # fmt: skip
    written = json.loads(store[".zarray"].to_bytes())
    assert normalize_compressor(compressor, 2) == written["compressor"]
    assert normalize_compressor(compressor.get_config(), 2) == written["compressor"]
    assert list(normalize_filters([numcodecs.Delta(dtype="<i4")], 2)) == written["filters"]


def test_normalize_compressor_and_filters_for_each_format() -> None:
    i4 = np.dtype("i4")
    default_v2 = {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0}
    assert normalize_compressor("default", 2) == default_v2
    assert normalize_compressor(None, 2) is None
    assert normalize_compressor({"id": "zstd", "level": 1}, 2) == {"id": "zstd", "level": 1}
    assert normalize_compressor(numcodecs.GZip(3), 2) == {"id": "gzip", "level": 3}
    assert normalize_compressor({"name": "gzip", "configuration": {"level": 3}}, 2, i4) == {"id": "gzip", "level": 3}
    default_v3 = {"typesize": 4, "cname": "lz4", "clevel": 5, "shuffle": "shuffle", "blocksize": 0}
    assert normalize_compressor("default", 3, i4) == {"name": "blosc", "configuration": default_v3}
    assert normalize_compressor(numcodecs.Zlib(2), 3, i4) == {"name": "numcodecs.zlib", "configuration": {"level": 2}}
    assert normalize_compressor(zarr.codecs.GzipCodec(level=4), 3, i4) == {
        "name": "gzip",
        "configuration": {"level": 4},
    }
    assert normalize_compressor(None, 3, i4) is None
    with pytest.raises(ValueError, match="not a bytes->bytes codec"):
        normalize_compressor(numcodecs.Delta(dtype="i4"), 3, i4)

    delta = numcodecs.Delta(dtype="<i4")
    assert normalize_filters(None, 2) is None
    assert normalize_filters([delta], 2) == ({"id": "delta", "dtype": "<i4", "astype": "<i4"},)
    assert normalize_filters(delta, 3, i4) == (
        {"name": "numcodecs.delta", "configuration": {"dtype": "<i4", "astype": "<i4"}},
    )
    assert normalize_filters(None, 3, i4) == ()
    with pytest.raises(ValueError, match="not an array->array codec"):
        normalize_filters([numcodecs.Zstd()], 3, i4)


def test_normalize_codecs_inserts_bytes_and_checks_the_order() -> None:
    i4 = np.dtype("i4")
    chain = normalize_codecs([{"name": "transpose", "configuration": {"order": [1, 0]}}, numcodecs.Zstd()], i4)
    assert chain == (
        {"name": "transpose", "configuration": {"order": [1, 0]}},
        {"name": "bytes", "configuration": {"endian": "little"}},
        {"name": "zstd", "configuration": {"level": 0, "checksum": False}},
    )
    assert normalize_codecs([], np.dtype("u1")) == ({"name": "bytes"},)
    with pytest.raises(ValueError, match="invalid codec chain"):
        normalize_codecs([numcodecs.Zstd(), numcodecs.Delta(dtype="<i4")], i4)


# --- the codec thread pool ---------------------------------------------------------------------


def test_codec_pool_is_shared_and_follows_the_codec_threads_setting() -> None:
    with config.set(codec_threads=3):
        pool = codec_executor()
        assert codec_executor() is pool
        assert pool._max_workers == 3
        with config.set(codec_threads=2):
            assert codec_executor()._max_workers == 2
    assert codec_executor()._max_workers == (os.cpu_count() or 1)


def test_run_in_codec_pool_runs_on_a_pool_thread() -> None:
    async def main() -> tuple[str, int]:
        return await run_in_codec_pool(lambda a, b: (threading.current_thread().name, a + b), 2, 3)

    thread_name, total = asyncio.run(main())
    assert thread_name.startswith("asyncarr-codec") and total == 5


def test_codec_pool_works_in_a_forked_child() -> None:
    parent_pool = codec_executor()
    assert parent_pool.submit(sum, [1, 2]).result() == 3  # the parent's pool has live, idle threads
    pid = os.fork()
    if pid == 0:  # child: the inherited pool has no threads; a fresh one must serve
        try:
            ok = codec_executor() is not parent_pool and codec_executor().submit(sum, [2, 3]).result(timeout=10) == 5
        except BaseException:
            ok = False
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
