"""Every store reports what it did: requests by operation, bytes, retries, failures and latency percentiles."""

from __future__ import annotations

import asyncio
import json
import os
import pickle
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from emulators import s3 as s3_emulator
from emulators.http import serve_directory
from emulators.proxy import FaultProxy

import asyncarr
import asyncarr.sync as za
from asyncarr import config
from asyncarr.stores import ByteRange, LocalStore, MemoryStore, Store
from asyncarr.stores.cache import LRUStoreCache, WrapperStore
from asyncarr.stores.http import HTTPStore
from asyncarr.stores.metrics import LatencyHistogram, StoreMetrics
from asyncarr.stores.s3 import S3Store


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


class DictStore(Store):
    """A third-party backend: only the six abstract methods, nothing about metrics."""

    def __init__(self) -> None:
        super().__init__()
        self.values: dict[str, bytes] = {}

    async def get(self, key: str, byte_range: ByteRange | None = None) -> bytes | None:
        value = self.values.get(key)
        return value if value is None or byte_range is None else byte_range.apply(value)

    async def set(self, key: str, value: bytes) -> None:
        self.values[key] = bytes(value)

    async def delete(self, key: str) -> None:
        self.values.pop(key, None)

    async def exists(self, key: str) -> bool:
        return key in self.values

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        for key in list(self.values):
            if key.startswith(prefix):
                yield key

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        for key in sorted({key[len(prefix) :].split("/")[0] for key in self.values if key.startswith(prefix)}):
            yield key


class CountingDictStore(DictStore):
    """A test double that overrides get and calls super(): still one request per call."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    async def get(self, key: str, byte_range: ByteRange | None = None) -> bytes | None:
        self.calls += 1
        return await super().get(key, byte_range)


async def exercise(store: Store) -> dict[str, Any]:
    """A fixed mix of requests; returns what a correct count of them is."""
    values = {f"a/{i}": os.urandom(10 * i + 1) for i in range(12)}
    for key, value in values.items():
        await store.set(key, value)
    whole = [await store.get(f"a/{i}") for i in range(5)]
    parts = [await store.get(f"a/{i}", ByteRange(1, 3)) for i in range(5, 9)]
    assert await store.get("missing") is None
    assert await store.exists("a/0") and not await store.exists("nope")
    assert await store.getsize("a/1") == 11
    assert sorted([key async for key in store.list_prefix("a/")]) == sorted(values)
    assert [name async for name in store.list_dir("")] == ["a"]
    await store.delete("a/11")
    return {
        "requests": {"set": 12, "get": 6, "get_range": 4, "head": 3, "list": 2, "delete": 1},
        "bytes_written": sum(len(v) for v in values.values()),
        "bytes_read": sum(len(v) for v in whole) + sum(len(p) for p in parts),
    }


@pytest.mark.parametrize("make", [MemoryStore, DictStore, CountingDictStore, "local"])
def test_each_call_of_the_store_interface_counts_once_by_operation_with_its_bytes(make: Any, tmp_path: Path) -> None:
    store = LocalStore(tmp_path) if make == "local" else make()
    expected = run(exercise(store))
    metrics = store.metrics()
    requests = dict(metrics.requests)
    if isinstance(store, DictStore):  # the ABC's getsize reads the value: a get, not a head
        expected["requests"]["head"] -= 1
        expected["requests"]["get"] += 1
        expected["bytes_read"] += 11
    assert requests == expected["requests"]
    assert metrics.bytes_written == expected["bytes_written"]
    assert metrics.bytes_read == expected["bytes_read"]
    assert metrics.retries == metrics.failures == metrics.throttled == 0
    assert metrics.total_requests == sum(expected["requests"].values())
    assert set(metrics.latency_ms) == {*expected["requests"], "all"}
    assert metrics.latency_ms["all"].count == metrics.total_requests
    for summary in metrics.latency_ms.values():
        assert 0 <= summary.p50 <= summary.p90 <= summary.p99 <= summary.max
    if isinstance(store, CountingDictStore):
        assert store.calls == 11  # the override ran, and its super() call was not counted again


def test_the_snapshot_is_frozen_json_serialisable_and_stays_as_taken() -> None:
    store = MemoryStore()
    run(store.set("k", b"abc"))
    snapshot = store.metrics()
    run(store.set("k", b"abcdef"))
    assert snapshot.requests == {"set": 1} and store.metrics().requests == {"set": 2}
    with pytest.raises(AttributeError):
        snapshot.bytes_written = 0  # type: ignore[misc]
    data = json.loads(json.dumps(snapshot.as_dict()))
    assert data["requests"] == {"set": 1} and data["bytes_written"] == 3 and data["total_requests"] == 1
    assert data["location"] == store.location and set(data["latency_ms"]["set"]) >= {"p50", "p90", "p99"}


def test_failures_count_requests_that_raised_and_reset_starts_from_zero(tmp_path: Path) -> None:
    store = LocalStore(tmp_path, read_only=True)
    with pytest.raises(PermissionError):
        run(store.set("k", b"1"))
    assert store.metrics().failures == 1 and store.metrics().requests == {"set": 1}
    store.reset_metrics()
    assert store.metrics().total_requests == 0 and store.metrics().failures == 0


def test_blocking_reads_from_many_threads_are_counted_exactly(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    store.set_sync("k", b"x" * 100)
    store.reset_metrics()

    def read() -> None:
        for _ in range(2000):
            assert store.get_sync("k") == b"x" * 100

    threads = [threading.Thread(target=read) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    metrics = store.metrics()
    assert metrics.requests == {"get": 16000} and metrics.bytes_read == 1_600_000


def test_array_reads_through_either_api_show_in_z_store_metrics(tmp_path: Path) -> None:
    data = np.arange(400, dtype="i4").reshape(20, 20)
    z = za.open_array(str(tmp_path / "a.zarr"), mode="w", shape=data.shape, chunks=(5, 5), dtype="i4", compressor=None)
    z[:] = data
    written = z.store.metrics()
    assert written.requests["set"] == 16 + 1  # 16 chunks and the metadata document
    z.store.reset_metrics()
    assert np.array_equal(z[:], data)
    assert z.store.metrics().requests == {"get": 16} and z.store.metrics().bytes_read == data.nbytes

    async def read_async() -> StoreMetrics:
        array = await asyncarr.open_array(str(tmp_path / "a.zarr"), mode="r")
        assert np.array_equal(await array.getitem((slice(None), slice(None))), data)
        return array.store.metrics()

    metrics = run(read_async())
    # The chunks, and the documents of both formats asked for at once when opening (one round trip).
    assert metrics.requests["get"] == 16 + 4


def test_metrics_belong_to_the_store_object_and_a_pickled_store_starts_afresh() -> None:
    store = MemoryStore(name="metrics-per-object")
    other = MemoryStore(name="metrics-per-object")
    run(store.set("k", b"1"))
    assert store.metrics().requests == {"set": 1} and other.metrics().requests == {}
    assert pickle.loads(pickle.dumps(store)).metrics().requests == {}


def test_wrappers_report_the_wrapped_stores_requests_and_a_cache_its_hits() -> None:
    inner = MemoryStore()
    run(inner.set("k", b"value"))
    inner.reset_metrics()
    cache = LRUStoreCache(inner, max_size=None)

    async def reads() -> None:
        for _ in range(5):
            assert await cache.get("k") == b"value"
        assert await WrapperStore(inner).get("k") == b"value"

    run(reads())
    metrics = cache.metrics()
    assert metrics.requests == {"get": 2} and metrics.cache_hits == 4 and metrics.cache_misses == 1
    assert WrapperStore(inner).metrics().requests == {"get": 2}
    assert "cache_hits" in metrics.as_dict() and "cache_hits" not in inner.metrics().as_dict()


def test_latency_percentiles_come_from_a_fixed_histogram_within_its_resolution() -> None:
    rng = np.random.default_rng(1)
    seconds = rng.lognormal(-7, 2, 50_000)
    histogram = LatencyHistogram()
    for value in seconds:
        histogram.add(float(value))
    summary = histogram.summary()
    for q, reported in ((50, summary.p50), (90, summary.p90), (99, summary.p99)):
        exact = float(np.percentile(seconds, q, method="inverted_cdf")) * 1000
        assert exact <= reported <= exact * 1.125 + 1e-9
    assert summary.count == 50_000 and summary.max == pytest.approx(seconds.max() * 1000, rel=1e-6)
    assert len(histogram._counts) == len(LatencyHistogram()._counts), "memory does not grow with requests"


def test_s3_metrics_count_each_http_attempt_as_the_proxy_sees_it() -> None:
    bucket = s3_emulator.new_bucket()
    values = {f"c/{i}": os.urandom(100 + i) for i in range(40)}
    with FaultProxy(s3_emulator.moto_endpoint(), failure_rate=0.25, failures=("503", "500"), seed=3) as proxy:
        store = S3Store(bucket, **{**s3_emulator.store_options(), "endpoint_url": proxy.url})

        async def work() -> list[bytes | None]:
            await store.set_many(list(values.items()))
            read = await store.get_many([(key, None) for key in values])
            read += await store.get_many([(key, ByteRange(10, 20)) for key in values])
            assert await store.exists("c/0")
            assert sorted([key async for key in store.list_prefix("c")]) == sorted(values)
            await store.close()
            return read

        read = run(work())
        counts = proxy.counts()
    assert read == list(values.values()) + [value[10:30] for value in values.values()]
    metrics = store.metrics()
    faults = sum(counts["faults"].values())
    assert faults > 0
    assert metrics.total_requests == counts["requests"]
    assert metrics.retries == faults and metrics.throttled == counts["faults"].get("503", 0)
    assert metrics.requests["set"] == counts["requests_by_method"]["PUT"]
    assert metrics.requests["head"] == counts["requests_by_method"]["HEAD"] == 1
    gets = metrics.requests["get"] + metrics.requests["get_range"] + metrics.requests["list"]
    assert gets == counts["requests_by_method"]["GET"]
    assert metrics.bytes_written == sum(len(v) for v in values.values())
    assert metrics.bytes_read == sum(len(v) for v in read)
    assert metrics.failures == 0 and metrics.concurrency_max == config.get("concurrency")


def test_http_metrics_count_failures_that_outlive_their_retries(tmp_path: Path) -> None:
    (tmp_path / "k").write_bytes(b"payload")
    served = serve_directory(tmp_path)
    with FaultProxy(served, failure_rate=1.0, failures=("500",)) as proxy, config.set(retries=2):
        store = HTTPStore(proxy.url)

        async def fail() -> None:
            async with store:
                await store.get("k")

        with pytest.raises(OSError, match="after 3 attempts"):
            run(fail())
    metrics = store.metrics()
    assert metrics.requests == {"get": 3} and metrics.retries == 2 and metrics.failures == 1
    assert metrics.throttled == 0 and metrics.bytes_read == 0
