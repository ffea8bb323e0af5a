"""Requests counted at a proxy: consolidated groups open with one GET, chunk reads are one GET each, in flight together.

A FaultProxy with no faults sits between asyncarr and each store's server and counts every
request by method and path; test data is written straight to the server beforehand, so only
the reads under test are counted. The stores and their emulators are those of
tests/test_cloud_stores.py.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from emulators.proxy import FaultProxy
from test_cloud_stores import CLOUDS, Cloud, Place

import asyncarr
from asyncarr import config

LATENCY = 0.05


@pytest.fixture(params=CLOUDS, ids=repr)
def cloud(request: pytest.FixtureRequest) -> Iterator[Cloud]:
    """Each store in turn, with config.concurrency within what its emulator can take."""
    with config.set(concurrency=request.param.concurrency or config.get("concurrency")):
        yield request.param


def write_consolidated_group(cloud: Cloud, place: Place, zarr_format: int, members: int) -> None:
    """A consolidated group of ``members`` small arrays at ``place``, written directly (not counted)."""

    async def write() -> None:
        root = await asyncarr.open_group(
            place.write_url, mode="w", zarr_format=zarr_format, storage_options=place.write_options
        )
        await asyncio.gather(
            *(root.create_array(f"a{i:02d}", shape=(10 + i,), chunks=(5,), dtype="i4") for i in range(members))
        )
        await root.store.close()
        await asyncarr.consolidate_metadata(place.write_url, storage_options=place.write_options)

    asyncio.run(write())
    cloud.publish(place)


async def open_and_describe_members(url: str, options: dict[str, Any], zarr_format: int | None) -> dict[str, tuple]:
    """Open the group, list its members and read each array's metadata: name -> shape."""
    root = await asyncarr.open_group(url, mode="r", zarr_format=zarr_format, storage_options=options)
    try:
        shapes = {name: node.shape async for name, node in root.members()}
        for name in shapes:
            assert (await root.getitem(name)).shape == shapes[name]
        return shapes
    finally:
        await root.store.close()


def test_consolidated_v3_group_of_20_arrays_opens_and_lists_its_members_with_one_get(
    cloud: Cloud, tmp_path: Path
) -> None:
    place = cloud.place(tmp_path)
    write_consolidated_group(cloud, place, 3, 20)
    with FaultProxy(place.upstream) as proxy:
        url, options = cloud.through(proxy, place)
        shapes = asyncio.run(open_and_describe_members(url, options, None))
        counts = proxy.counts()
    assert shapes == {f"a{i:02d}": (10 + i,) for i in range(20)}
    # zarr.json of the group holds every member's metadata: nothing else is fetched or listed.
    assert counts["requests_by_method"] == {"GET": 1}, counts


@pytest.mark.parametrize(("zarr_format", "gets"), [(None, 2), (2, 1)], ids=["format-detected", "zarr_format=2"])
def test_consolidated_v2_group_of_20_arrays_opens_with_a_fixed_number_of_gets(
    cloud: Cloud, tmp_path: Path, zarr_format: int | None, gets: int
) -> None:
    # .zmetadata holds everything, the group's own .zgroup and .zattrs included: told
    # zarr_format=2 that is the one GET; with the format unknown, zarr.json (a miss) comes
    # first. Nothing is listed and the members cost nothing more.
    place = cloud.place(tmp_path)
    write_consolidated_group(cloud, place, 2, 20)
    with FaultProxy(place.upstream) as proxy:
        url, options = cloud.through(proxy, place)
        shapes = asyncio.run(open_and_describe_members(url, options, zarr_format))
        counts = proxy.counts()
    assert shapes == {f"a{i:02d}": (10 + i,) for i in range(20)}
    assert counts["requests_by_method"] == {"GET": gets}, counts
    fetched = sorted(path.rsplit("/", 1)[1] for path in counts["requests_by_path"])
    expected = [".zmetadata"] + (["zarr.json"] if zarr_format is None else [])
    assert fetched == expected


def test_reading_64_chunks_sends_64_gets_in_flight_together(cloud: Cloud, tmp_path: Path) -> None:
    place = cloud.place(tmp_path)
    data = np.random.default_rng(64).integers(0, 2**31, size=(64, 64), dtype="u4")

    async def write() -> None:
        array = await asyncarr.open_array(
            place.write_url, mode="w", shape=data.shape, chunks=(8, 8), dtype="u4", storage_options=place.write_options
        )
        await array.setitem(Ellipsis, data)
        await array.store.close()

    asyncio.run(write())
    cloud.publish(place)

    async def read(url: str, options: dict[str, Any]) -> tuple[np.ndarray, float]:
        array = await asyncarr.open_array(url, mode="r", storage_options=options)
        try:
            proxy.reset_counters()  # count the chunk reads only, not the metadata
            started = time.perf_counter()
            result = await array.getitem(Ellipsis)
            return result, time.perf_counter() - started
        finally:
            await array.store.close()

    with FaultProxy(place.upstream, latency=LATENCY) as proxy:
        result, elapsed = asyncio.run(read(*cloud.through(proxy, place)))
        counts = proxy.counts()
    np.testing.assert_array_equal(result, data)
    assert counts["requests_by_method"] == {"GET": 64}, counts
    chunk_paths = counts["requests_by_path"]
    assert len(chunk_paths) == 64 and set(chunk_paths.values()) == {1}, "each chunk fetched once"
    if cloud.concurrency is None:
        assert counts["max_in_flight"] >= 16, counts
        assert elapsed < 64 * LATENCY / 2, f"{elapsed:.2f} s: one after another would take {64 * LATENCY:.1f} s"
    else:
        # The GCS emulator takes only a few connections at once (tests/emulators/gcs.py), so the
        # store is capped there; every slot is still used.
        assert counts["max_in_flight"] == cloud.concurrency, counts
