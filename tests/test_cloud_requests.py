"""Requests counted at a proxy: consolidated groups open with one GET, chunk reads are one GET each, in flight together.

A FaultProxy with no faults sits between asyncarr and each store's server and counts every
request by method and path; test data is written straight to the server beforehand, so only
the reads under test are counted. The stores and their emulators are those of
tests/test_cloud_stores.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from emulators.proxy import FaultProxy
from test_cloud_stores import CLOUDS, Cloud, Place

import asyncarr
from asyncarr import config

DOCUMENT_NAMES = {"zarr.json", ".zarray", ".zattrs", ".zgroup"}

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


# Opening asks for every document a node of the given format may have at once: one round trip
# whatever the format. With a latency on every answer, one round trip means every GET was in
# flight together (counted by the proxy, not timed).
_ALL_DOCUMENTS = [".zarray", ".zattrs", ".zgroup", ".zmetadata", "zarr.json"]
_OPEN_LATENCY = 0.3  # long beside the time the drivers take to send five requests


def together(cloud: Cloud, requests: int) -> int:
    """How many of ``requests`` sent at once are in flight together (the GCS emulator's tests cap connections)."""
    return min(requests, cloud.concurrency or requests)


@pytest.mark.parametrize(
    ("zarr_format", "documents"), [(None, _ALL_DOCUMENTS), (3, ["zarr.json"])], ids=["format-detected", "zarr_format=3"]
)
def test_consolidated_v3_group_of_20_arrays_opens_in_one_round_trip_and_lists_its_members_for_free(
    cloud: Cloud, tmp_path: Path, zarr_format: int | None, documents: list[str]
) -> None:
    place = cloud.place(tmp_path)
    write_consolidated_group(cloud, place, 3, 20)
    with FaultProxy(place.upstream, latency=_OPEN_LATENCY) as proxy:
        url, options = cloud.through(proxy, place)
        shapes = asyncio.run(open_and_describe_members(url, options, zarr_format))
        counts = proxy.counts()
    assert shapes == {f"a{i:02d}": (10 + i,) for i in range(20)}
    # zarr.json of the group holds every member's metadata: nothing else is fetched or listed.
    assert sorted(path.rsplit("/", 1)[1] for path in counts["requests_by_path"]) == documents
    assert counts["requests_by_method"] == {"GET": len(documents)}, counts
    assert counts["max_in_flight"] == together(cloud, len(documents))  # one round trip


@pytest.mark.parametrize(
    ("zarr_format", "documents"),
    [(None, _ALL_DOCUMENTS), (2, [".zarray", ".zattrs", ".zgroup", ".zmetadata"])],
    ids=["format-detected", "zarr_format=2"],
)
def test_consolidated_v2_group_of_20_arrays_opens_in_one_round_trip(
    cloud: Cloud, tmp_path: Path, zarr_format: int | None, documents: list[str]
) -> None:
    # .zmetadata holds everything; it is asked for with the group's own documents, so a v2 group
    # costs one round trip too (it cost two, zarr.json first, when the format was not given).
    place = cloud.place(tmp_path)
    write_consolidated_group(cloud, place, 2, 20)
    with FaultProxy(place.upstream, latency=_OPEN_LATENCY) as proxy:
        url, options = cloud.through(proxy, place)
        shapes = asyncio.run(open_and_describe_members(url, options, zarr_format))
        counts = proxy.counts()
    assert shapes == {f"a{i:02d}": (10 + i,) for i in range(20)}
    assert sorted(path.rsplit("/", 1)[1] for path in counts["requests_by_path"]) == documents
    assert counts["requests_by_method"] == {"GET": len(documents)}, counts
    assert counts["max_in_flight"] == together(cloud, len(documents))


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

    async def read(url: str, options: dict[str, Any]) -> np.ndarray:
        array = await asyncarr.open_array(url, mode="r", storage_options=options)
        try:
            proxy.reset_counters()  # count the chunk reads only, not the metadata
            return await array.getitem(Ellipsis)
        finally:
            await array.store.close()

    with FaultProxy(place.upstream, latency=LATENCY) as proxy:
        result = asyncio.run(read(*cloud.through(proxy, place)))
        counts = proxy.counts()
    np.testing.assert_array_equal(result, data)
    assert counts["requests_by_method"] == {"GET": 64}, counts
    chunk_paths = counts["requests_by_path"]
    assert len(chunk_paths) == 64 and set(chunk_paths.values()) == {1}, "each chunk fetched once"
    if cloud.concurrency is None:
        assert counts["max_in_flight"] >= 16, counts  # one after another would be 1
    else:
        # The GCS emulator takes only a few connections at once (tests/emulators/gcs.py), so the
        # store is capped there; every slot is still used.
        assert counts["max_in_flight"] == cloud.concurrency, counts


def test_reading_a_row_of_a_v2_array_of_unknown_format_is_two_round_trips(cloud: Cloud, tmp_path: Path) -> None:
    place = cloud.place(tmp_path)
    data = np.arange(64 * 64, dtype="i4").reshape(64, 64)

    async def write() -> None:
        a = await asyncarr.create_array(
            place.write_url,
            shape=data.shape,
            chunks=(16, 16),
            dtype="i4",
            zarr_format=2,
            storage_options=place.write_options,
        )
        await a.setitem(Ellipsis, data)
        await a.store.close()

    asyncio.run(write())
    cloud.publish(place)
    with FaultProxy(place.upstream, latency=_OPEN_LATENCY) as proxy:
        url, options = cloud.through(proxy, place)

        async def read_row() -> np.ndarray:
            a = await asyncarr.open_array(url, mode="r", storage_options=options)
            try:
                return await a.getitem(5)
            finally:
                await a.store.close()

        row = asyncio.run(read_row())
        counts = proxy.counts()
    np.testing.assert_array_equal(row, data[5])
    fetched = sorted(path.rsplit("/", 1)[1] for path in counts["requests_by_path"])
    # The documents of both formats at once (one round trip), then the row's 4 chunks together.
    assert fetched == [".zarray", ".zattrs", ".zgroup", "0.0", "0.1", "0.2", "0.3", "zarr.json"]
    assert counts["max_in_flight"] == together(cloud, 4)


def test_mode_w_over_an_array_on_s3_learns_what_is_there_from_one_listing(tmp_path: Path) -> None:
    # 'w' must remove the old array before writing. One listing says both whether a node is there
    # (its documents are among the keys) and what to delete: no GET of the old documents at all.
    cloud = next(c for c in CLOUDS if c.name == "s3")
    place = cloud.place(tmp_path)

    async def write_old() -> None:
        z = await asyncarr.open_array(
            place.write_url, mode="w", shape=(40,), chunks=(10,), dtype="i4", storage_options=place.write_options
        )
        await z.setitem(slice(None), np.arange(40, dtype="i4"))
        await z.store.close()

    asyncio.run(write_old())
    with FaultProxy(place.upstream, latency=_OPEN_LATENCY) as proxy:
        url, options = cloud.through(proxy, place)

        async def replace() -> np.ndarray:
            z = await asyncarr.open_array(url, mode="w", shape=(8,), chunks=(4,), dtype="i4", storage_options=options)
            try:
                return await z.getitem(slice(None))
            finally:
                await z.store.close()

        replaced = asyncio.run(replace())
        counts = proxy.counts()
    np.testing.assert_array_equal(replaced, np.zeros(8, dtype="i4"))  # nothing of the old array is left
    old_documents = [path for path in counts["requests_by_path"] if path.rsplit("/", 1)[-1] in DOCUMENT_NAMES]
    # zarr.json is PUT once (the new array) and read by nobody; no v2 document is asked for.
    assert counts["requests_by_method"]["GET"] == 1 + 2  # the listing, then the new array's two chunks
    assert [counts["requests_by_path"][path] for path in old_documents] == [1], old_documents
    assert counts["requests_by_method"]["POST"] == 1  # one DeleteObjects for the old array's five objects
