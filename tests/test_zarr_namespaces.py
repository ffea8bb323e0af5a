"""zarr's namespaces on the blocking facade: ``asyncarr.sync.storage``, ``.codecs`` and ``.config``.

Each script runs on zarr-python 3 (its own store, in another directory) and on asyncarr; the
metadata documents must parse equal and each side must read the other's data.
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import pickle
import zipfile
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import Any

import numcodecs
import numpy as np
import pytest
import zarr
import zarr.codecs as zcodecs

import asyncarr
import asyncarr.sync as za
from asyncarr.stores import ByteRange, MemoryStore, Store, validate_key
from asyncarr.sync import codecs as acodecs
from asyncarr.sync import storage

DATA = np.arange(120, dtype="i4").reshape(10, 12)


def _documents(root: pathlib.Path) -> dict[str, Any]:
    """Every metadata document below a directory, parsed (an empty ``.zattrs``, which zarr-python 3
    writes and asyncarr leaves out, counts as none: both read it as no attributes)."""
    names = ("zarr.json", ".zarray", ".zgroup", ".zattrs")
    documents = {
        str(p.relative_to(root)): json.loads(p.read_text()) for p in sorted(root.rglob("*")) if p.name in names
    }
    return {name: document for name, document in documents.items() if not (name.endswith(".zattrs") and document == {})}


def _zip_documents(path: pathlib.Path) -> dict[str, Any]:
    with zipfile.ZipFile(path) as archive:
        return {
            n: json.loads(archive.read(n))
            for n in archive.namelist()
            if n.rpartition("/")[2] in ("zarr.json", ".zarray")
        }


# -- imports ---------------------------------------------------------------------------------


def test_the_namespaces_import_as_attributes_and_as_modules() -> None:
    from asyncarr.sync.codecs import BloscCodec
    from asyncarr.sync.storage import LocalStore, LRUStoreCache, ZipStore

    assert za.storage.LocalStore is LocalStore and za.storage.ZipStore is ZipStore
    assert za.storage.LRUStoreCache is LRUStoreCache and za.codecs.BloscCodec is BloscCodec
    assert za.config is asyncarr.config
    # zarr 2 had its store names at the top level
    assert (za.DirectoryStore, za.NestedDirectoryStore, za.ZipStore, za.LRUStoreCache, za.MemoryStore) == (
        storage.DirectoryStore,
        storage.NestedDirectoryStore,
        storage.ZipStore,
        storage.LRUStoreCache,
        storage.MemoryStore,
    )
    assert issubclass(LocalStore, asyncarr.stores.LocalStore) and issubclass(LRUStoreCache, Store)


# -- store constructors, compared with zarr-python 3 -----------------------------------------


def test_local_store_writes_what_zarr_writes(tmp_path: pathlib.Path) -> None:
    for fmt, our_codec, their_codec in [
        (2, numcodecs.Zstd(), numcodecs.Zstd()),
        (3, acodecs.ZstdCodec(), zcodecs.ZstdCodec()),
    ]:
        ours = za.create(
            shape=(10, 12),
            chunks=(4, 5),
            dtype="i4",
            fill_value=0,
            zarr_format=fmt,
            store=storage.LocalStore(tmp_path / f"ours{fmt}"),
            compressor=our_codec,
        )
        ours[:] = DATA
        theirs = zarr.create_array(
            zarr.storage.LocalStore(tmp_path / f"theirs{fmt}"),
            shape=(10, 12),
            chunks=(4, 5),
            dtype="i4",
            fill_value=0,
            zarr_format=fmt,
            compressors=their_codec,
        )
        theirs[:] = DATA
        assert _documents(tmp_path / f"ours{fmt}") == _documents(tmp_path / f"theirs{fmt}")
        np.testing.assert_array_equal(zarr.open_array(tmp_path / f"ours{fmt}", mode="r")[:], DATA)
        np.testing.assert_array_equal(za.open_array(str(tmp_path / f"theirs{fmt}"), mode="r")[:], DATA)


def test_memory_store_takes_zarr3s_dict_argument() -> None:
    store = storage.MemoryStore({})
    z = za.create(shape=(10, 12), chunks=(4, 5), dtype="i4", fill_value=0, store=store, codecs=[acodecs.ZstdCodec()])
    z[:] = DATA
    theirs = zarr.storage.MemoryStore({})
    t = zarr.create_array(
        theirs, shape=(10, 12), chunks=(4, 5), dtype="i4", fill_value=0, compressors=zcodecs.ZstdCodec()
    )
    t[:] = DATA
    assert json.loads(store.get_sync("zarr.json")) == json.loads(theirs._store_dict["zarr.json"].to_bytes())
    assert sorted(k for k in theirs._store_dict) == sorted(asyncio.run(_keys(store)))
    # zarr 3's dict of values seeds an asyncarr store: a copy of what zarr wrote reads the same
    seeded = storage.MemoryStore({k: v for k, v in theirs._store_dict.items()}, read_only=True)
    np.testing.assert_array_equal(za.open_array(seeded, mode="r")[:], DATA)
    copy = pickle.loads(pickle.dumps(seeded))
    assert seeded.read_only and copy.get_sync("zarr.json") == theirs._store_dict["zarr.json"].to_bytes()


async def _keys(store: Store) -> list[str]:
    return [key async for key in store.list_prefix("")]


def test_zip_store_close_blocks_and_leaves_a_zip_zarr_reads(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "ours.zip"
    store = storage.ZipStore(path, mode="w")
    z = za.create(shape=(10, 12), chunks=(4, 5), dtype="i4", fill_value=0, store=store, codecs=[acodecs.ZstdCodec()])
    z[:] = DATA
    assert not zipfile.is_zipfile(path)  # no central directory until close
    result = store.close()  # a plain call, as a zarr script makes it: the file is finished when it returns
    assert zipfile.is_zipfile(path)
    asyncio.run(_await(result))  # and what it returns can still be awaited by async code
    theirs_path = tmp_path / "theirs.zip"
    theirs = zarr.storage.ZipStore(theirs_path, mode="w")
    t = zarr.create_array(
        theirs, shape=(10, 12), chunks=(4, 5), dtype="i4", fill_value=0, compressors=zcodecs.ZstdCodec()
    )
    t[:] = DATA
    theirs.close()
    assert _zip_documents(path) == _zip_documents(theirs_path)
    reader = zarr.storage.ZipStore(path, mode="r")
    np.testing.assert_array_equal(zarr.open_array(reader, mode="r")[:], DATA)
    reader.close()
    with storage.ZipStore(theirs_path, read_only=True) as ours_reading:
        np.testing.assert_array_equal(za.open_array(ours_reading, mode="r")[:], DATA)


async def _await(awaitable: Any) -> Any:
    return await awaitable


def test_zip_store_close_awaited_in_async_code(tmp_path: pathlib.Path) -> None:
    async def main() -> None:
        store = storage.ZipStore(tmp_path / "a.zip", mode="w")
        z = await asyncarr.create((4,), chunks=(2,), dtype="i4", store=store)
        await z.setitem(..., np.arange(4))
        await store.close()

    asyncio.run(main())
    assert zipfile.is_zipfile(tmp_path / "a.zip")
    np.testing.assert_array_equal(zarr.open_array(zarr.storage.ZipStore(tmp_path / "a.zip"), mode="r")[:], np.arange(4))


@pytest.mark.filterwarnings("error::RuntimeWarning")  # a close() coroutine never awaited would warn
def test_a_zip_opened_by_path_closes_when_the_script_calls_close(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "by-path.zip"
    z = za.open(str(path), mode="w", shape=(10, 12), chunks=(4, 5), dtype="i4")
    z[:] = DATA
    assert not zipfile.is_zipfile(path)
    z.store.close()  # the store za.open made from the path: no await, yet the file is finished
    assert zipfile.is_zipfile(path)
    reader = zarr.storage.ZipStore(path, mode="r")
    np.testing.assert_array_equal(zarr.open_array(reader, mode="r")[:], DATA)
    reader.close()


def test_zip_store_refuses_what_it_cannot_do(tmp_path: pathlib.Path) -> None:
    with pytest.raises(ValueError, match="uncompressed"):
        storage.ZipStore(tmp_path / "x.zip", mode="w", compression=zipfile.ZIP_DEFLATED)
    assert storage.ZipStore(tmp_path / "x.zip", mode="w", read_only=True).read_only
    assert pickle.loads(pickle.dumps(storage.ZipStore(tmp_path / "x.zip", mode="w"))).mode == "a"


def test_directory_store_is_zarr2s_flat_layout(tmp_path: pathlib.Path) -> None:
    z = za.create(
        shape=(10, 12),
        chunks=(4, 5),
        dtype="i4",
        fill_value=0,
        zarr_format=2,
        store=storage.DirectoryStore(str(tmp_path / "flat")),
        compressor=None,
    )
    z[:] = DATA
    assert (tmp_path / "flat" / "0.0").is_file()
    np.testing.assert_array_equal(zarr.open_array(tmp_path / "flat", mode="r")[:], DATA)


def test_nested_directory_store_keeps_chunks_nested_and_says_so(tmp_path: pathlib.Path) -> None:
    store = storage.NestedDirectoryStore(str(tmp_path / "ours"))
    z = za.create(
        shape=(10, 12), chunks=(4, 5), dtype="i4", fill_value=0, zarr_format=2, store=store, compressor=numcodecs.Zlib()
    )
    z[:] = DATA
    theirs = zarr.create_array(
        zarr.storage.LocalStore(tmp_path / "theirs"),
        shape=(10, 12),
        chunks=(4, 5),
        dtype="i4",
        fill_value=0,
        zarr_format=2,
        compressors=numcodecs.Zlib(),
        chunk_key_encoding={"name": "v2", "separator": "/"},
    )
    theirs[:] = DATA
    assert _documents(tmp_path / "ours") == _documents(tmp_path / "theirs")
    files = {str(p.relative_to(tmp_path / "ours")) for p in (tmp_path / "ours").rglob("*") if p.is_file()}
    their_files = {str(p.relative_to(tmp_path / "theirs")) for p in (tmp_path / "theirs").rglob("*") if p.is_file()}
    assert files == their_files - {".zattrs"}
    assert "0/0" in files
    np.testing.assert_array_equal(zarr.open_array(tmp_path / "ours", mode="r")[:], DATA)
    again = za.open_array(storage.NestedDirectoryStore(str(tmp_path / "ours")), mode="r")
    np.testing.assert_array_equal(again[:], DATA)
    # zarr 2 before 2.8 wrote no separator: a dotted chunk key still finds its nested file
    assert store.get_sync("0.0") == (tmp_path / "ours" / "0" / "0").read_bytes()
    # Every way of writing a .zarray records the separator, the batched blocking one too.
    plain = json.dumps({k: v for k, v in json.loads(store.get_sync(".zarray")).items() if k != "dimension_separator"})
    store.set_many_sync([("b/.zarray", plain.encode())])
    assert json.loads(store.get_sync("b/.zarray"))["dimension_separator"] == "/"


def test_fsspec_store_from_url_opens_asyncarrs_store_and_closes_blocking(tmp_path: pathlib.Path) -> None:
    store = storage.FsspecStore.from_url((tmp_path / "ours").as_uri())
    z = za.create(shape=(10, 12), chunks=(4, 5), dtype="i4", fill_value=0, store=store, codecs=[acodecs.GzipCodec()])
    z[:] = DATA
    store.close()
    theirs = zarr.storage.FsspecStore.from_url((tmp_path / "theirs").as_uri(), storage_options={"auto_mkdir": True})
    t = zarr.create_array(
        theirs, shape=(10, 12), chunks=(4, 5), dtype="i4", fill_value=0, compressors=zcodecs.GzipCodec()
    )
    t[:] = DATA
    assert _documents(tmp_path / "ours") == _documents(tmp_path / "theirs")
    reader = storage.FsspecStore.from_url(str(tmp_path / "theirs"), read_only=True)
    assert reader.read_only and reader.url == (tmp_path / "theirs").as_uri()
    np.testing.assert_array_equal(za.open_array(reader, mode="r")[:], DATA)
    with pytest.raises(TypeError, match="from_url"):
        storage.FsspecStore(object())  # type: ignore[arg-type] - zarr's FsspecStore(fs, path=...) takes an fsspec filesystem


def test_fsspec_store_from_an_s3_url_closes_its_clients_when_close_returns(recwarn: pytest.WarningsRecorder) -> None:
    from emulators import s3 as emulator

    url = f"s3://{emulator.new_bucket()}/data.zarr"
    store = storage.FsspecStore.from_url(url, storage_options=emulator.store_options())
    z = za.create(shape=(10, 12), chunks=(4, 5), dtype="i4", store=store, codecs=[acodecs.ZstdCodec()])
    z[:] = DATA
    assert store.close() is not None  # blocks until the clients are closed; what it returns needs no await
    reader = storage.FsspecStore.from_url(url, storage_options=emulator.store_options(), read_only=True)
    with reader:
        np.testing.assert_array_equal(za.open_array(reader, mode="r")[:], DATA)
    assert not [w for w in recwarn if "nclosed" in str(w.message)]


def test_the_stores_pickle_by_configuration(tmp_path: pathlib.Path) -> None:
    for store in [
        storage.LocalStore(tmp_path / "a", read_only=True),
        storage.DirectoryStore(str(tmp_path / "b")),
        storage.NestedDirectoryStore(str(tmp_path / "c")),
        storage.FsspecStore.from_url(str(tmp_path / "d")),
        storage.LRUStoreCache(storage.LocalStore(tmp_path / "e"), max_size=100),
    ]:
        copy = pickle.loads(pickle.dumps(store))
        assert type(copy) is type(store) and copy.location == store.location and copy.read_only == store.read_only
    nested = pickle.loads(pickle.dumps(storage.NestedDirectoryStore(str(tmp_path / "c"))))
    assert nested.dimension_separator == "/"


# -- LRUStoreCache ---------------------------------------------------------------------------


class CountingStore(Store):
    """Passes every request to ``inner`` and counts them."""

    def __init__(self, inner: Store) -> None:
        super().__init__(read_only=inner.read_only)
        self.inner = inner
        self.calls: Counter[str] = Counter()

    async def get(self, key: str, byte_range: ByteRange | None = None) -> bytes | None:
        self.calls["get"] += 1
        return await self.inner.get(validate_key(key), byte_range)

    async def set(self, key: str, value: bytes) -> None:
        self.calls["set"] += 1
        await self.inner.set(validate_key(key), value)

    async def delete(self, key: str) -> None:
        self.calls["delete"] += 1
        await self.inner.delete(validate_key(key))

    async def exists(self, key: str) -> bool:
        self.calls["exists"] += 1
        return await self.inner.exists(validate_key(key))

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        self.calls["list"] += 1
        async for key in self.inner.list_prefix(prefix):
            yield key

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        self.calls["list"] += 1
        async for name in self.inner.list_dir(prefix):
            yield name


def test_lru_store_cache_serves_a_second_read_without_a_request() -> None:
    counting = CountingStore(MemoryStore())
    cache = storage.LRUStoreCache(counting, max_size=2**20)
    z = za.create(shape=(10, 12), chunks=(4, 5), dtype="i4", store=cache, zarr_format=2)
    z[:] = DATA
    reader = za.open_array(cache, mode="r")
    counting.calls.clear()
    np.testing.assert_array_equal(reader[0:4, 0:5], DATA[0:4, 0:5])
    first = counting.calls["get"]
    assert first == 1
    np.testing.assert_array_equal(reader[0:4, 0:5], DATA[0:4, 0:5])
    assert counting.calls["get"] == first and cache.hits >= 1  # the second read made no request
    z[0:4, 0:5] = -1  # a write through the cache invalidates the chunk
    np.testing.assert_array_equal(reader[0:4, 0:5], -np.ones((4, 5)))
    assert counting.calls["get"] == first + 1


def test_lru_store_cache_evicts_least_recently_used_and_caches_listings() -> None:
    counting = CountingStore(MemoryStore())
    cache = storage.LRUStoreCache(counting, max_size=10)

    async def main() -> None:
        for key in ("a", "b", "c"):
            await cache.set(key, b"12345")
        assert await cache.get("a") == b"12345" and await cache.get("b") == b"12345"
        await cache.get("a")  # a is now the most recently used
        await cache.get("c")  # evicts b
        assert cache.current_size == 10
        counting.calls.clear()
        assert await cache.get("a", ByteRange(1, 2)) == b"23" and counting.calls["get"] == 0
        await cache.get("b")
        assert counting.calls["get"] == 1
        assert sorted(await _keys(cache)) == ["a", "b", "c"] and sorted(await _keys(cache)) == ["a", "b", "c"]
        assert counting.calls["list"] == 1
        await cache.delete("c")  # invalidates the listing and the value
        assert sorted(await _keys(cache)) == ["a", "b"] and counting.calls["list"] == 2
        assert await cache.get("c") is None

    asyncio.run(main())
    copy = pickle.loads(pickle.dumps(cache))
    assert copy.max_size == 10 and copy.current_size == 0


class GatedStore(MemoryStore):
    """A memory store whose reads wait for ``gate`` after reading: a read that overlaps a write."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()

    async def get(self, key: str, byte_range: ByteRange | None = None) -> bytes | None:
        value = await super().get(key, byte_range)
        await self.gate.wait()
        return value


def test_lru_store_cache_never_keeps_a_value_read_before_its_own_write() -> None:
    async def main() -> None:
        inner = GatedStore()
        await inner.set("k", b"old")
        cache = storage.LRUStoreCache(inner, max_size=None)
        slow_read = asyncio.create_task(cache.get("k"))
        await asyncio.sleep(0)  # the read has fetched b"old" and waits
        inner.gate.set()
        await cache.set("k", b"new")
        assert await slow_read == b"old"
        assert await cache.get("k") == b"new"  # the old value was not cached behind the write

    asyncio.run(main())


def test_lru_store_cache_close_blocks_and_closes_what_it_wraps(tmp_path: pathlib.Path) -> None:
    cache = za.LRUStoreCache(za.ZipStore(tmp_path / "a.zip", mode="w"), max_size=None)
    z = za.create(shape=(4,), chunks=(2,), dtype="i4", store=cache)
    z[:] = np.arange(4)
    np.testing.assert_array_equal(z[:], np.arange(4))
    cache.close()
    assert zipfile.is_zipfile(tmp_path / "a.zip")
    np.testing.assert_array_equal(zarr.open_array(zarr.storage.ZipStore(tmp_path / "a.zip"), mode="r")[:], np.arange(4))

    async def main() -> None:  # in async code, close() hands back the close to await
        cache = storage.LRUStoreCache(str(tmp_path / "local.zarr"), max_size=100)
        pending = cache.close()
        assert asyncio.iscoroutine(pending)
        await pending

    asyncio.run(main())


# -- codec classes, compared with zarr-python 3 ----------------------------------------------

CODEC_CASES: list[tuple[str, str, Callable[[], list[Any]], Callable[[], dict[str, Any]]]] = [
    ("blosc default f8", "f8", lambda: [acodecs.BloscCodec()], lambda: {"compressors": zcodecs.BloscCodec()}),
    ("blosc default u1", "u1", lambda: [acodecs.BloscCodec()], lambda: {"compressors": zcodecs.BloscCodec()}),
    (
        "blosc named",
        "i2",
        lambda: [acodecs.BloscCodec(cname="lz4", clevel=3, shuffle="bitshuffle")],
        lambda: {"compressors": zcodecs.BloscCodec(cname="lz4", clevel=3, shuffle="bitshuffle")},
    ),
    (
        "blosc enum",
        "f4",
        lambda: [acodecs.BloscCodec(shuffle=acodecs.BloscShuffle.noshuffle)],
        lambda: {"compressors": zcodecs.BloscCodec(shuffle=zcodecs.BloscShuffle.noshuffle)},
    ),
    (
        "zstd",
        "i4",
        lambda: [acodecs.ZstdCodec(level=5, checksum=True)],
        lambda: {"compressors": zcodecs.ZstdCodec(level=5, checksum=True)},
    ),
    ("gzip", "i4", lambda: [acodecs.GzipCodec()], lambda: {"compressors": zcodecs.GzipCodec()}),
    (
        "bytes big crc32c",
        "f8",
        lambda: [acodecs.BytesCodec(endian="big"), acodecs.Crc32cCodec()],
        lambda: {"serializer": zcodecs.BytesCodec(endian="big"), "compressors": zcodecs.Crc32cCodec()},
    ),
    (
        "transpose",
        "i4",
        lambda: [acodecs.TransposeCodec(order=(1, 0)), acodecs.BytesCodec(), acodecs.ZstdCodec()],
        lambda: {"filters": zcodecs.TransposeCodec(order=(1, 0)), "compressors": zcodecs.ZstdCodec()},
    ),
    (
        "sharding",
        "i4",
        lambda: [acodecs.ShardingCodec(chunk_shape=(2, 5), codecs=[acodecs.BytesCodec(), acodecs.GzipCodec()])],
        lambda: {
            "serializer": zcodecs.ShardingCodec(chunk_shape=(2, 5), codecs=[zcodecs.BytesCodec(), zcodecs.GzipCodec()]),
            "compressors": None,
        },
    ),
    (
        "sharding start",
        "i4",
        lambda: [acodecs.ShardingCodec(chunk_shape=(2, 5), index_location="start")],
        lambda: {"serializer": zcodecs.ShardingCodec(chunk_shape=(2, 5), index_location="start"), "compressors": None},
    ),
]


@pytest.mark.parametrize(
    ("dtype", "ours", "theirs"), [case[1:] for case in CODEC_CASES], ids=[c[0] for c in CODEC_CASES]
)
def test_codec_classes_write_what_zarr_writes(
    tmp_path: pathlib.Path, dtype: str, ours: Callable[[], list[Any]], theirs: Callable[[], dict[str, Any]]
) -> None:
    data = DATA.astype(dtype)
    z = za.create(shape=(10, 12), chunks=(4, 5), dtype=dtype, fill_value=0, store=str(tmp_path / "ours"), codecs=ours())
    z[:] = data
    t = zarr.create_array(tmp_path / "theirs", shape=(10, 12), chunks=(4, 5), dtype=dtype, fill_value=0, **theirs())
    t[:] = data
    assert _documents(tmp_path / "ours") == _documents(tmp_path / "theirs")
    np.testing.assert_array_equal(zarr.open_array(tmp_path / "ours", mode="r")[:], data)
    np.testing.assert_array_equal(za.open_array(str(tmp_path / "theirs"), mode="r")[:], data)


def test_codec_classes_as_compressor_and_with_zarr3_defaults() -> None:
    z = za.create(shape=(8,), chunks=(4,), dtype="f8", store={}, compressor=acodecs.ZstdCodec())
    assert z.metadata.codecs[-1] == {"name": "zstd", "configuration": {"level": 0, "checksum": False}}
    for ours, theirs in [
        (acodecs.BloscCodec(), zcodecs.BloscCodec()),
        (acodecs.ZstdCodec(), zcodecs.ZstdCodec()),
        (acodecs.GzipCodec(), zcodecs.GzipCodec()),
        (acodecs.BytesCodec(), zcodecs.BytesCodec()),
        (acodecs.Crc32cCodec(), zcodecs.Crc32cCodec()),
        (acodecs.TransposeCodec(order=[1, 0]), zcodecs.TransposeCodec(order=[1, 0])),
    ]:
        assert json.loads(json.dumps(ours.to_dict())) == json.loads(json.dumps(theirs.to_dict()))
    with pytest.raises(ValueError, match="shuffle"):
        acodecs.BloscCodec(shuffle="sideways")
    with pytest.raises(ValueError, match="typesize"):
        acodecs.ShardingCodec(chunk_shape=(2,), codecs=[acodecs.BytesCodec(), acodecs.BloscCodec()]).to_dict()


# -- storage.default_compressor ----------------------------------------------------------------


def test_default_compressor_reads_and_writes_the_setting() -> None:
    assert storage.default_compressor == numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE)
    with asyncarr.config.set():  # restores the setting afterwards
        storage.default_compressor = numcodecs.Zlib(level=1)
        assert asyncarr.config.get("default_compressor") == {"id": "zlib", "level": 1}
        assert storage.default_compressor == numcodecs.Zlib(level=1)
        storage.default_compressor = None
        assert storage.default_compressor is None
        with pytest.raises(TypeError, match="numcodecs codec"):
            storage.default_compressor = "zlib"  # type: ignore[assignment]
    assert asyncarr.config.get("default_compressor")["id"] == "blosc"


def test_new_arrays_use_the_default_compressor_set_on_storage() -> None:
    with asyncarr.config.set():
        storage.default_compressor = numcodecs.Zlib(level=1)
        z = za.create(shape=(4,), chunks=(2,), dtype="i4", store={}, zarr_format=2)
        assert z.metadata.compressor == {"id": "zlib", "level": 1}
        storage.default_compressor = None
        assert za.create(shape=(4,), chunks=(2,), dtype="i4", store={}, zarr_format=2).metadata.compressor is None


# -- config: zarr's dotted keys ----------------------------------------------------------------


def test_config_takes_zarrs_dotted_keys() -> None:
    before = asyncarr.config.current()
    with za.config.set({"async.concurrency": 16, "array.write_empty_chunks": True, "default_zarr_format": 2}):
        assert za.config.get("async.concurrency") == 16 == asyncarr.config.get("concurrency")
        assert za.config.get("array.write_empty_chunks") is True
        assert za.config.get("async") == {"concurrency": 16} and za.config.get("array") == {"write_empty_chunks": True}
        z = za.zeros(shape=(4,), chunks=(2,), dtype="i4", store={})
        assert z.metadata.zarr_format == 2  # default_zarr_format took effect
        z[:] = 0
        assert z.nchunks_initialized == 2  # write_empty_chunks took effect
    assert asyncarr.config.current() == before
    with za.config.set({"async": {"concurrency": 3}, "threading": {"max_workers": 2}}):
        assert asyncarr.config.get("concurrency") == 3 and asyncarr.config.get("codec_threads") == 2
    with za.config.set(async__concurrency=5, retries=2):  # donfig's keyword spelling, and asyncarr's own names
        assert asyncarr.config.get("concurrency") == 5 and asyncarr.config.get("retries") == 2
    assert asyncarr.config.current() == before


def test_config_says_which_zarr_keys_it_ignores_and_which_it_refuses() -> None:
    before = asyncarr.config.current()
    with za.config.set({"json_indent": 4, "codec_pipeline.batch_size": 8}):
        assert asyncarr.config.current() == before
    with pytest.raises(KeyError, match="json_indent"):
        za.config.get("json_indent")
    for key, value in [("async.timeout", 5), ("array.order", "F"), ("buffer", "x"), ("codecs.blosc", "x")]:
        with pytest.raises(TypeError, match=key.replace(".", r"\.")):
            za.config.set({key: value})
    with pytest.raises(TypeError, match=r"'array\.nonsense'"):
        za.config.set({"array.nonsense": 1})
    with pytest.raises(ValueError, match="concurrency"):
        za.config.set({"async.concurrency": 0})
    assert asyncarr.config.current() == before


# -- zarr 3's wrappers and zarr 2's other store names ----------------------------------------------


def test_logging_store_logs_and_counts_every_call_as_zarr_does(
    tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    ours = storage.LoggingStore(storage.LocalStore(tmp_path / "ours"), log_handler=logging.NullHandler())
    theirs = zarr.storage.LoggingStore(zarr.storage.LocalStore(tmp_path / "theirs"), log_handler=logging.NullHandler())
    with caplog.at_level(logging.INFO):
        za.create_array(ours, shape=(4, 4), chunks=(2, 2), dtype="i2")[...] = np.arange(16).reshape(4, 4)
        zarr.create_array(theirs, shape=(4, 4), chunks=(2, 2), dtype="i2")[...] = np.arange(16).reshape(4, 4)
    # Both wrote the same objects: the metadata document and four chunks, each set logged and counted.
    assert ours.counter["set"] == theirs.counter["set"] == 5
    for name in (ours.logger.name, theirs.logger.name):
        lines = [r.getMessage() for r in caplog.records if r.name == name]
        assert " Calling LocalStore.set(c/0/0)" in lines
        assert any(line.startswith("Finished LocalStore.set(zarr.json) [") for line in lines)
    np.testing.assert_array_equal(zarr.open_array(tmp_path / "ours", mode="r")[...], np.arange(16).reshape(4, 4))
    ours.close()


def test_wrapper_store_passes_everything_through(tmp_path: pathlib.Path) -> None:
    wrapped = storage.WrapperStore(storage.LocalStore(tmp_path))
    za.create_array(wrapped, shape=(3,), chunks=(3,), dtype="u1")[...] = [1, 2, 3]
    np.testing.assert_array_equal(zarr.open_array(tmp_path, mode="r")[...], [1, 2, 3])
    assert wrapped.close() is not None  # blocking, and still awaitable


def test_zarr2_kvstore_keeps_keys_in_the_users_mapping() -> None:
    mapping: dict[str, bytes] = {}
    z = za.zeros((6,), chunks=(3,), dtype="i4", store=za.KVStore(mapping), zarr_format=2)
    z[:] = np.arange(6)
    assert {".zarray", "0", "1"} <= mapping.keys()
    theirs = zarr.open_array(
        zarr.storage.MemoryStore({k: zarr.core.buffer.cpu.Buffer.from_bytes(v) for k, v in mapping.items()}), mode="r"
    )
    np.testing.assert_array_equal(theirs[:], np.arange(6))


def test_zarr2_tempstore_is_a_directory_removed_at_exit(tmp_path: pathlib.Path) -> None:
    import subprocess
    import sys

    script = (
        "import asyncarr.sync as za, numpy as np\n"
        f"store = za.TempStore(dir={str(tmp_path)!r})\n"
        "z = za.zeros((4,), chunks=(2,), dtype='i4', store=store); z[:] = 7\n"
        "print(store.path); assert (za.open_array(store, mode='r')[:] == 7).all()\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120)
    path = pathlib.Path(done.stdout.strip())
    assert path.parent == tmp_path and not path.exists()


def test_zarr2_fsstore_opens_urls_with_asyncarrs_drivers(tmp_path: pathlib.Path) -> None:
    from emulators import s3

    bucket = s3.new_bucket()
    store = za.FSStore(f"s3://{bucket}/data.zarr", **s3.store_options())
    z = za.zeros((5,), chunks=(5,), dtype="f8", store=store, zarr_format=2)
    z[:] = np.linspace(0, 1, 5)
    store.close()
    keys = {o["Key"] for o in s3.client().list_objects_v2(Bucket=bucket)["Contents"]}
    assert {"data.zarr/.zarray", "data.zarr/0"} <= keys
    reader = za.FSStore(f"s3://{bucket}/data.zarr", mode="r", **s3.store_options())
    np.testing.assert_array_equal(za.open_array(reader, mode="r")[:], np.linspace(0, 1, 5))
    with pytest.raises(TypeError, match="fsspec"):
        za.FSStore(str(tmp_path), fs=object())


def test_zarr2_absstore_writes_an_azure_container() -> None:
    from emulators import azure

    container = azure.new_container()
    store = za.ABSStore(
        container,
        prefix="nested/data",
        account_name=azure.ACCOUNT,
        account_key=azure.KEY,
        blob_service_kwargs={"account_url": azure.azurite_account_url()},
    )
    z = za.zeros((4,), chunks=(2,), dtype="i2", store=store, zarr_format=2)
    z[:] = [1, 2, 3, 4]
    np.testing.assert_array_equal(za.open_array(store, mode="r")[:], [1, 2, 3, 4])
    store.close()
