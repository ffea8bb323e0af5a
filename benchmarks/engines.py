"""The engines compared: asyncarr (async API and sync facade), zarr-python 3 and tensorstore.

Each engine writes and reads arrays described by one `ArraySpec`, with the library's
default settings (what a user gets), on a local path or an S3 URL with storage options.
Bench-only extras add the anchors of the fourth round: zarr-python with the zarrs Rust
codec pipeline, zarr-python over obstore, and tensorstore without fsync.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numcodecs
import numpy as np

import asyncarr
import asyncarr.sync as za
from asyncarr.codecs.blosc_compression import blosc_compressor

__all__ = ["ENGINES", "LOCAL_ONLY", "S3_ONLY", "ArraySpec", "Engine", "S3Location", "service_loop"]


@dataclasses.dataclass(frozen=True)
class ArraySpec:
    """Shape, chunking, dtype, format and Blosc settings of one benchmark array."""

    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    dtype: str
    zarr_format: int
    cname: str = "lz4"
    clevel: int = 5
    shards: tuple[int, ...] | None = None

    @property
    def nbytes(self) -> int:
        """Uncompressed size."""
        return int(np.prod(self.shape)) * np.dtype(self.dtype).itemsize

    def numcodecs_blosc(self) -> numcodecs.Blosc:
        """The compressor as a numcodecs object."""
        return numcodecs.Blosc(cname=self.cname, clevel=self.clevel, shuffle=numcodecs.Blosc.SHUFFLE)

    def blosc_compress(self) -> Callable[[np.ndarray], bytes]:
        """`numcodecs_blosc`'s ``encode`` as asyncarr's plain encoders call it (`blosc_compressor`:
        numcodecs' compression function itself, without ``Blosc.encode``'s checks, about 4 us a
        call). The floors encode with this, so they pay what asyncarr pays and no more."""
        return blosc_compressor(self.numcodecs_blosc(), np.dtype(self.dtype), None)


@dataclasses.dataclass(frozen=True)
class S3Location:
    """Where S3 data lives and how to reach it (moto, optionally through a proxy)."""

    endpoint_url: str
    bucket: str
    key: str = "testing"
    secret: str = "testing"
    region: str = "us-east-1"


class _LoopThread:
    """One long-lived event loop, as an async service would have, for the async engines."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()

    def run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()


service_loop = _LoopThread()


class Engine:
    """One library's way of writing and reading a whole array or a selection."""

    name = ""

    def write(self, where: str, data: np.ndarray, spec: ArraySpec, s3: S3Location | None = None) -> None:
        """Create the array at ``where`` and write all of ``data``."""
        raise NotImplementedError

    def open(self, where: str, s3: S3Location | None = None) -> Any:
        """Open an existing array for reading."""
        raise NotImplementedError

    def read(self, handle: Any, selection: Any = Ellipsis) -> np.ndarray:
        """Read a basic selection from an opened array."""
        raise NotImplementedError

    def many_points(self, handle: Any, points: Sequence[tuple[int, int]]) -> list[Any]:
        """Read single elements: concurrently where the engine allows it."""
        raise NotImplementedError


def _asyncarr_options(s3: S3Location | None) -> dict[str, Any] | None:
    if s3 is None:
        return None
    return {"endpoint_url": s3.endpoint_url, "key": s3.key, "secret": s3.secret, "region": s3.region}


def _asyncarr_create_options(spec: ArraySpec, s3: S3Location | None) -> dict[str, Any]:
    """The arguments both asyncarr APIs create ``spec``'s array with (mode "w": replacing any)."""
    return {
        "mode": "w",
        "shape": spec.shape,
        "chunks": spec.chunks,
        "shards": spec.shards,
        "dtype": spec.dtype,
        "compressor": spec.numcodecs_blosc(),
        "zarr_format": spec.zarr_format,
        "storage_options": _asyncarr_options(s3),
    }


def _url(where: str, s3: S3Location | None) -> str:
    return f"s3://{s3.bucket}/{where}" if s3 else where


class AsyncarrAsync(Engine):
    """asyncarr's async API on one long-lived event loop."""

    name = "asyncarr-async"

    def write(self, where: str, data: np.ndarray, spec: ArraySpec, s3: S3Location | None = None) -> None:
        async def write() -> None:
            z = await asyncarr.open_array(_url(where, s3), **_asyncarr_create_options(spec, s3))
            await z.setitem(Ellipsis, data)

        service_loop.run(write())

    def open(self, where: str, s3: S3Location | None = None) -> Any:
        return service_loop.run(asyncarr.open_array(_url(where, s3), mode="r", storage_options=_asyncarr_options(s3)))

    def read(self, handle: Any, selection: Any = Ellipsis) -> np.ndarray:
        return service_loop.run(handle.getitem(selection))

    def many_points(self, handle: Any, points: Sequence[tuple[int, int]]) -> list[Any]:
        async def gather() -> list[Any]:
            return await asyncio.gather(*(handle.getitem(point) for point in points))

        return service_loop.run(gather())


class AsyncarrSync(Engine):
    """asyncarr's blocking facade, as scripts use it."""

    name = "asyncarr-sync"

    def write(self, where: str, data: np.ndarray, spec: ArraySpec, s3: S3Location | None = None) -> None:
        z = za.open_array(_url(where, s3), **_asyncarr_create_options(spec, s3))
        z[...] = data

    def open(self, where: str, s3: S3Location | None = None) -> Any:
        return za.open_array(_url(where, s3), mode="r", storage_options=_asyncarr_options(s3))

    def read(self, handle: Any, selection: Any = Ellipsis) -> np.ndarray:
        return handle[selection]

    def many_points(self, handle: Any, points: Sequence[tuple[int, int]]) -> list[Any]:
        return _in_eight_threads(lambda point: handle[point], points)


def _in_eight_threads(read_one: Callable[[Any], Any], points: Sequence[Any]) -> list[Any]:
    results: list[Any] = [None] * len(points)

    def work(offset: int) -> None:
        for index in range(offset, len(points), 8):
            results[index] = read_one(points[index])

    threads = [threading.Thread(target=work, args=(offset,)) for offset in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def _zarr_store(where: str, s3: S3Location | None) -> Any:
    if s3 is None:
        return where
    from zarr.storage import FsspecStore

    options = {
        "key": s3.key,
        "secret": s3.secret,
        "client_kwargs": {"endpoint_url": s3.endpoint_url, "region_name": s3.region},
        "asynchronous": True,
    }
    return FsspecStore.from_url(f"s3://{s3.bucket}/{where}", storage_options=options)


class ZarrPython(Engine):
    """zarr-python 3 with its default codec pipeline (sync API; async for single points)."""

    name = "zarr-python"

    def _store(self, where: str, s3: S3Location | None) -> Any:
        return _zarr_store(where, s3)

    def write(self, where: str, data: np.ndarray, spec: ArraySpec, s3: S3Location | None = None) -> None:
        import zarr

        if spec.zarr_format == 3:
            compressors: Any = zarr.codecs.BloscCodec(cname=spec.cname, clevel=spec.clevel, shuffle="shuffle")
        else:
            compressors = spec.numcodecs_blosc()
        z = zarr.create_array(
            store=self._store(where, s3),
            shape=spec.shape,
            chunks=spec.chunks,
            shards=spec.shards,
            dtype=spec.dtype,
            compressors=compressors,
            zarr_format=spec.zarr_format,
            fill_value=0,
            overwrite=True,
        )
        z[...] = data

    def open(self, where: str, s3: S3Location | None = None) -> Any:
        import zarr

        return zarr.open_array(self._store(where, s3), mode="r")

    def read(self, handle: Any, selection: Any = Ellipsis) -> np.ndarray:
        return handle[selection]

    def many_points(self, handle: Any, points: Sequence[tuple[int, int]]) -> list[Any]:
        return _in_eight_threads(lambda point: handle[point], points)


class ZarrPythonAsync(ZarrPython):
    """zarr-python 3's async API, for the many-small-calls workload."""

    name = "zarr-python-async"

    def open(self, where: str, s3: S3Location | None = None) -> Any:
        import zarr.api.asynchronous as zasync

        return service_loop.run(zasync.open_array(store=self._store(where, s3), mode="r"))

    def read(self, handle: Any, selection: Any = Ellipsis) -> np.ndarray:
        return service_loop.run(handle.getitem(selection))

    def many_points(self, handle: Any, points: Sequence[tuple[int, int]]) -> list[Any]:
        async def gather() -> list[Any]:
            return await asyncio.gather(*(handle.getitem(point) for point in points))

        return service_loop.run(gather())


def _obstore_store(where: str, s3: S3Location) -> Any:
    """zarr's ObjectStore over an obstore S3Store at the same endpoint, with the same credentials."""
    from obstore.store import S3Store
    from zarr.storage import ObjectStore

    store = S3Store(
        s3.bucket,
        prefix=where.strip("/"),
        endpoint=s3.endpoint_url,
        access_key_id=s3.key,
        secret_access_key=s3.secret,
        region=s3.region,
        client_options={"allow_http": True},  # moto and the proxy speak plain http on loopback
    )
    return ObjectStore(store)


class ZarrPythonObstore(ZarrPython):
    """zarr-python 3 (default pipeline) with `zarr.storage.ObjectStore` over obstore; S3 only."""

    name = "zarr-python-obstore"

    def _store(self, where: str, s3: S3Location | None) -> Any:
        if s3 is None:
            raise ValueError(f"{self.name} is measured on S3 only: locally it would be zarr-python's LocalStore")
        return _obstore_store(where, s3)


ZARRS_SETTINGS: dict[str, Any] = {"codec_pipeline.path": "zarrs.ZarrsCodecPipeline", "codec_pipeline.strict": True}
"""zarr settings of the zarrs engine: its Rust pipeline, and an error instead of a silent fallback.

Every other zarrs setting keeps its default (checksum validation on, chunk concurrency and
threads from rayon's global pool, i.e. one per CPU). ``strict`` changes no speed: without it
zarrs hands what it cannot do to zarr-python's own pipeline with only a warning, and the
figure would be zarr-python's under zarrs' name.
"""


@contextlib.contextmanager
def _zarrs_pipeline() -> Iterator[None]:
    import zarr

    with zarr.config.set(ZARRS_SETTINGS), warnings.catch_warnings():
        # "Successfully reconstructed a store ...": zarrs rebuilding obstore's S3Store in Rust.
        warnings.filterwarnings("ignore", message="Successfully reconstructed a store", category=RuntimeWarning)
        yield


def _slices_only(selection: Any) -> tuple[Any, tuple[int, ...]]:
    """``selection`` with each integer as a one-element slice, and the axes those integers drop."""
    if not isinstance(selection, tuple):
        return selection, ()
    parts, dropped = [], []
    for axis, part in enumerate(selection):
        if isinstance(part, int):
            parts.append(slice(part, part + 1))
            dropped.append(axis)
        else:
            parts.append(part)
    return tuple(parts), tuple(dropped)


class ZarrPythonZarrs(ZarrPython):
    """zarr-python 3 with the zarrs Rust codec pipeline, switched on around each call only.

    The pipeline is fixed when an array is opened, so opening, writing and reading all run
    inside the setting; other zarr-python engines in the same run keep the default pipeline.
    On S3 the store is zarr's ObjectStore over obstore: zarrs does its own I/O in Rust for
    that store (and for LocalStore), not for s3fs.
    """

    name = "zarr-python-zarrs"

    def _store(self, where: str, s3: S3Location | None) -> Any:
        return _obstore_store(where, s3) if s3 else where

    def write(self, where: str, data: np.ndarray, spec: ArraySpec, s3: S3Location | None = None) -> None:
        with _zarrs_pipeline():
            super().write(where, data, spec, s3)

    def open(self, where: str, s3: S3Location | None = None) -> Any:
        with _zarrs_pipeline():
            return super().open(where, s3)

    def read(self, handle: Any, selection: Any = Ellipsis) -> np.ndarray:
        # zarrs 0.2 does not serve an integer index (UnsupportedVIndexingError; zarr-python's own
        # pipeline would run instead): the same row is read as a one-row slice, the axis dropped.
        slices, dropped = _slices_only(selection)
        with _zarrs_pipeline():
            result = handle[slices]
        return result.squeeze(axis=dropped) if dropped else result


def _tensorstore_kvstore(where: str, s3: S3Location | None) -> dict[str, Any]:
    if s3 is None:
        return {"driver": "file", "path": where}
    return {
        "driver": "s3",
        "bucket": s3.bucket,
        "path": where.rstrip("/") + "/",
        "endpoint": s3.endpoint_url,
        "aws_region": s3.region,
    }


class TensorStore(Engine):
    """tensorstore's zarr (v2) and zarr3 drivers."""

    name = "tensorstore"

    local_context: dict[str, Any] = {}
    """Context resources for the file kvstore (none: tensorstore's defaults)."""

    def _context(self, s3: S3Location | None) -> Any:
        import tensorstore as ts

        return ts.Context({"aws_credentials": {"type": "environment"}}) if s3 else ts.Context(self.local_context)

    def write(self, where: str, data: np.ndarray, spec: ArraySpec, s3: S3Location | None = None) -> None:
        import tensorstore as ts

        itemsize = np.dtype(spec.dtype).itemsize
        if spec.zarr_format == 2:
            metadata: dict[str, Any] = {
                "shape": list(spec.shape),
                "chunks": list(spec.chunks),
                "dtype": np.dtype(spec.dtype).str,
                "compressor": {"id": "blosc", "cname": spec.cname, "clevel": spec.clevel, "shuffle": 1},
                "order": "C",
                "fill_value": 0,
            }
            driver = "zarr"
        else:
            blosc = {
                "name": "blosc",
                "configuration": {
                    "cname": spec.cname,
                    "clevel": spec.clevel,
                    "shuffle": "shuffle",
                    "typesize": itemsize,
                    "blocksize": 0,
                },
            }
            inner = [{"name": "bytes", "configuration": {"endian": "little"}}, blosc]
            codecs = inner
            grid = spec.chunks
            if spec.shards:
                grid = spec.shards
                codecs = [
                    {"name": "sharding_indexed", "configuration": {"chunk_shape": list(spec.chunks), "codecs": inner}}
                ]
            metadata = {
                "shape": list(spec.shape),
                "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(grid)}},
                "data_type": np.dtype(spec.dtype).name,
                "codecs": codecs,
                "fill_value": 0,
            }
            driver = "zarr3"
        store = ts.open(
            {"driver": driver, "kvstore": _tensorstore_kvstore(where, s3), "metadata": metadata},
            create=True,
            delete_existing=True,
            context=self._context(s3),
        ).result()
        store.write(data).result()

    def open(self, where: str, s3: S3Location | None = None) -> Any:
        import tensorstore as ts

        for driver in ("zarr3", "zarr"):
            try:
                return ts.open(
                    {"driver": driver, "kvstore": _tensorstore_kvstore(where, s3)},
                    read=True,
                    context=self._context(s3),
                ).result()
            except ValueError:
                continue
        raise ValueError(f"tensorstore cannot open {where}")

    def read(self, handle: Any, selection: Any = Ellipsis) -> np.ndarray:
        return handle[selection].read().result()

    def many_points(self, handle: Any, points: Sequence[tuple[int, int]]) -> list[Any]:
        return _in_eight_threads(lambda point: handle[point].read().result(), points)


class TensorStoreFutures(TensorStore):
    """tensorstore with every read issued at once as futures: its counterpart of an async API."""

    name = "tensorstore-futures"

    def many_points(self, handle: Any, points: Sequence[tuple[int, int]]) -> list[Any]:
        futures = [handle[point].read() for point in points]
        return [future.result() for future in futures]


class TensorStoreNoSync(TensorStore):
    """tensorstore with the file kvstore's fsync off (context resource ``file_io_sync: false``).

    tensorstore fsyncs each chunk file (and its directory) by default; asyncarr does not, so
    this is the like-for-like anchor for local writes. Reads and S3 are the same as `TensorStore`.
    """

    name = "tensorstore-nosync"
    local_context = {"file_io_sync": False}


ENGINES: dict[str, Engine] = {
    engine.name: engine
    for engine in (
        AsyncarrAsync(),
        AsyncarrSync(),
        ZarrPython(),
        ZarrPythonAsync(),
        ZarrPythonObstore(),
        ZarrPythonZarrs(),
        TensorStore(),
        TensorStoreNoSync(),
        TensorStoreFutures(),
    )
}

LOCAL_ONLY = frozenset({"tensorstore-nosync"})
"""Engines that differ from another only in local files (on S3 they would repeat it)."""
S3_ONLY = frozenset({"zarr-python-obstore"})
"""Engines measured on S3 only (locally: n/a)."""
