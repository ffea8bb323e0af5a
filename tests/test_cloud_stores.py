"""Issue 3's acceptance tests, run once per cloud store: S3 (moto), GCS, Azure (azurite), HTTP.

Each store reads the tutorials' public "Hello from the cloud!" group anonymously, round-trips
v2 and v3 hierarchies, lists more than 1,000 chunk keys, reports missing nodes, refusals and
read-only modes with asyncarr's errors, and hides a flaky network (a FaultProxy failing a
quarter of the requests) from full writes and reads. What one store alone does (ranges,
credentials, lifecycle) is tested in tests/test_<store>_store.py.

HTTP cannot write or list: its "writes" go to a local directory (with asyncarr), which is then
consolidated and served, and reads go through the HTTP store.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import dataclasses
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import textwrap
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from emulators import azure, gcs, http, s3
from emulators.proxy import FAULT_KINDS, FaultProxy
from numcodecs import Blosc

import asyncarr
import asyncarr.sync as za
from asyncarr import config
from asyncarr.errors import (
    AccessDeniedError,
    ArrayNotFoundError,
    GroupNotFoundError,
    NodeNotFoundError,
    ReadOnlyError,
)

HELLO = b"Hello from the cloud!"
TESTS = Path(__file__).resolve().parent
DEMO_BUCKET = "zarr-demo"


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def info_fields(array: Any) -> dict[str, str]:
    """The ``Key : value`` rows of an ``info`` table."""
    rows = (line.split(":", 1) for line in str(array.info).splitlines() if ":" in line)
    return {key.strip(): value.strip() for key, value in rows}


def write_demo_group(root: Path) -> Path:
    """The tutorials' public 'zarr-demo/store' group, by zarr-python: foo/bar/baz, |S1, 21 in chunks of 7, Blosc lz4."""
    group = zarr.open_group(root, mode="w", zarr_format=2)
    baz = group.create_array(
        "foo/bar/baz", shape=(21,), chunks=(7,), dtype="|S1", compressors=Blosc(cname="lz4", clevel=5, shuffle=1)
    )
    baz[:] = np.frombuffer(HELLO, dtype="S1")
    return root


def _files_below(root: Path, prefix: str) -> dict[str, bytes]:
    """``prefix/relative/path`` -> contents of every file below ``root``."""
    files = sorted(path for path in root.rglob("*") if path.is_file())
    return {f"{prefix}/{path.relative_to(root).as_posix()}": path.read_bytes() for path in files}


# -- one class per store: where test data goes and how to reach it -----------------------------------


@dataclasses.dataclass
class Place:
    """A fresh, empty node location on one store: how writers and readers reach it."""

    url: str
    """What readers open."""
    options: dict[str, Any]
    """Readers' storage options."""
    write_url: str
    """What writers open (a local directory for HTTP, which is read-only)."""
    write_options: dict[str, Any]
    upstream: str
    """The base URL a FaultProxy in front of this place forwards to."""
    bucket: str = ""


class Cloud:
    """One store's emulator, as the tests need it."""

    name = ""
    listable = True
    writable = True
    concurrency: int | None = None
    """A cap on config.concurrency the emulator needs (None: the default)."""

    def place(self, tmp_path: Path) -> Place:
        """A fresh, empty location."""
        raise NotImplementedError

    def publish(self, place: Place) -> None:
        """Make what writers put at ``place`` readable at ``place.url`` (HTTP: consolidate it)."""

    def through(self, proxy: FaultProxy, place: Place) -> tuple[str, dict[str, Any]]:
        """The URL and storage options reaching ``place`` through ``proxy``."""
        raise NotImplementedError

    def publish_demo(self, demo: Path, tmp_path: Path) -> tuple[str, dict[str, Any]]:
        """Put the demo group at ``DEMO_BUCKET/store`` for anonymous readers; their URL and storage options."""
        raise NotImplementedError

    def copy_in(self, local_root: Path, place: Place) -> None:
        """Copy every file below ``local_root`` to ``place``, by the emulator's fastest route."""
        raise NotImplementedError

    def refusing(self, tmp_path: Path) -> tuple[str, dict[str, Any]]:
        """A URL and storage options whose requests the server refuses (401/403)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.name


class S3(Cloud):
    name = "s3"

    def place(self, tmp_path: Path) -> Place:
        bucket = s3.new_bucket()
        url = f"s3://{bucket}/data.zarr"
        return Place(url, s3.store_options(), url, s3.store_options(), s3.moto_endpoint(), bucket)

    def through(self, proxy: FaultProxy, place: Place) -> tuple[str, dict[str, Any]]:
        return place.url, {**place.options, "endpoint_url": proxy.url}

    def publish_demo(self, demo: Path, tmp_path: Path) -> tuple[str, dict[str, Any]]:
        client = s3.client()
        with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
            client.create_bucket(Bucket=DEMO_BUCKET, ACL="public-read")
        s3.upload_directory(demo, DEMO_BUCKET, "store")
        return f"s3://{DEMO_BUCKET}/store", {"anon": True, "endpoint_url": s3.moto_endpoint(), "region": s3.REGION}

    def copy_in(self, local_root: Path, place: Place) -> None:
        files = sorted(p for p in local_root.rglob("*") if p.is_file())
        s3.seed_objects(
            place.bucket, {f"data.zarr/{p.relative_to(local_root).as_posix()}": p.read_bytes() for p in files}
        )

    def refusing(self, tmp_path: Path) -> tuple[str, dict[str, Any]]:
        place = self.place(tmp_path)
        za.open_array(place.url, mode="w", shape=(4,), chunks=(2,), dtype="i4", storage_options=place.options)[:] = 1
        return place.url, {"anon": True, "endpoint_url": s3.moto_endpoint(), "region": s3.REGION}


class GCS(Cloud):
    name = "gcs"
    concurrency = gcs.EMULATOR_CONNECTIONS  # its listen backlog is 5 (tests/emulators/gcs.py)

    def place(self, tmp_path: Path) -> Place:
        bucket = gcs.make_store(tmp_path).bucket  # wipes the emulator once per test: writes stay fast
        url = f"gs://{bucket}/data.zarr"
        return Place(url, gcs.store_options(), url, gcs.store_options(), gcs.gcs_endpoint(), bucket)

    def through(self, proxy: FaultProxy, place: Place) -> tuple[str, dict[str, Any]]:
        return place.url, {**place.options, "endpoint_url": proxy.url}

    def publish_demo(self, demo: Path, tmp_path: Path) -> tuple[str, dict[str, Any]]:
        gcs.make_store(tmp_path)  # the per-test wipe, which also removes an earlier test's demo bucket
        request = urllib.request.Request(
            f"{gcs.gcs_endpoint()}/storage/v1/b?project=test",
            data=json.dumps({"name": DEMO_BUCKET}).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with contextlib.suppress(urllib.error.HTTPError):  # 409: made earlier in this test
            urllib.request.urlopen(request, timeout=30).close()
        gcs.upload_directory(demo, DEMO_BUCKET, "store")
        return f"gs://{DEMO_BUCKET}/store", {"token": "anon", "endpoint_url": gcs.gcs_endpoint()}

    def copy_in(self, local_root: Path, place: Place) -> None:
        files = sorted(p for p in local_root.rglob("*") if p.is_file())
        gcs.seed_objects(
            place.bucket, {f"data.zarr/{p.relative_to(local_root).as_posix()}": p.read_bytes() for p in files}
        )

    def refusing(self, tmp_path: Path) -> tuple[str, dict[str, Any]]:
        # The emulator checks no credentials: a server refusing everything with GCS's 403 stands in.
        return f"gs://{DEMO_BUCKET}/private", {"token": "anon", "endpoint_url": _refusing_server().url}


class Azure(Cloud):
    name = "azure"

    def place(self, tmp_path: Path) -> Place:
        container = azure.new_container()
        url = f"az://{container}/data.zarr"
        options = {"connection_string": azure.connection_string()}
        return Place(url, options, url, options, azure.azurite_account_url(), container)

    def through(self, proxy: FaultProxy, place: Place) -> tuple[str, dict[str, Any]]:
        # Shared-key signatures do not cover the host, so the key signs requests to the proxy as well.
        return place.url, {"account_name": azure.ACCOUNT, "account_key": azure.KEY, "account_url": proxy.url}

    def publish_demo(self, demo: Path, tmp_path: Path) -> tuple[str, dict[str, Any]]:
        from azure.core.exceptions import ResourceExistsError
        from azure.storage.blob.aio import BlobServiceClient

        async def create() -> None:
            async with BlobServiceClient.from_connection_string(azure.connection_string()) as service:
                with contextlib.suppress(ResourceExistsError):
                    await service.create_container(DEMO_BUCKET, public_access="container")

        azure._run(create())
        azure.upload_directory(demo, DEMO_BUCKET, "store")
        return f"az://{DEMO_BUCKET}/store", {"anon": True, "account_url": azure.azurite_account_url()}

    def copy_in(self, local_root: Path, place: Place) -> None:
        azure.upload_directory(local_root, place.bucket, "data.zarr")

    def refusing(self, tmp_path: Path) -> tuple[str, dict[str, Any]]:
        place = self.place(tmp_path)  # a private container
        za.open_array(place.url, mode="w", shape=(4,), chunks=(2,), dtype="i4", storage_options=place.options)[:] = 1
        return place.url, {"anon": True, "account_url": azure.azurite_account_url()}


class HTTP(Cloud):
    name = "http"
    listable = False
    writable = False

    def place(self, tmp_path: Path) -> Place:
        served = tmp_path / "served"
        served.mkdir(exist_ok=True)
        base = http.serve_directory(served)
        return Place(f"{base}/data.zarr", {}, str(served / "data.zarr"), {}, base)

    def publish(self, place: Place) -> None:
        if isinstance(run(asyncarr.open(place.write_url, mode="r")), asyncarr.AsyncGroup):
            run(asyncarr.consolidate_metadata(place.write_url))

    def through(self, proxy: FaultProxy, place: Place) -> tuple[str, dict[str, Any]]:
        return f"{proxy.url}/data.zarr", {}

    def publish_demo(self, demo: Path, tmp_path: Path) -> tuple[str, dict[str, Any]]:
        served = tmp_path / "http-root"
        shutil.copytree(demo, served / "store")
        zarr.consolidate_metadata(str(served / "store"), zarr_format=2)  # HTTP cannot list: members come from here
        return f"{http.serve_directory(served)}/store", {}

    def refusing(self, tmp_path: Path) -> tuple[str, dict[str, Any]]:
        write_demo_group(tmp_path / "private")
        base = http.serve_directory(tmp_path, required_headers={"Authorization": "Bearer let-me-in"})
        return f"{base}/private", {"headers": {"Authorization": "Bearer wrong"}}


CLOUDS = [S3(), GCS(), Azure(), HTTP()]
LISTABLE = [cloud for cloud in CLOUDS if cloud.listable]


@pytest.fixture(params=CLOUDS, ids=repr)
def cloud(request: pytest.FixtureRequest) -> Iterator[Cloud]:
    """Each store in turn, with config.concurrency within what its emulator can take."""
    with config.set(concurrency=request.param.concurrency or config.get("concurrency")):
        yield request.param


@pytest.fixture(params=LISTABLE, ids=repr)
def listable(request: pytest.FixtureRequest) -> Iterator[Cloud]:
    """Each store that can list keys."""
    with config.set(concurrency=request.param.concurrency or config.get("concurrency")):
        yield request.param


_refusing: http.BackgroundServer | None = None


def _refusing_server() -> http.BackgroundServer:
    """A server answering every request with GCS's JSON 403 (started once)."""
    global _refusing
    if _refusing is None:
        from aiohttp import web

        async def refuse(request: web.Request) -> web.Response:
            error = {"error": {"code": 403, "message": "Anonymous caller does not have storage.objects.get access."}}
            return web.json_response(error, status=403)

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", refuse)
        _refusing = http.BackgroundServer(app, name="asyncarr-test-refusing-server")
        atexit.register(_refusing.stop)
    return _refusing


# -- the tutorials' public bucket -------------------------------------------------------------------


@pytest.fixture
def demo(cloud: Cloud, tmp_path: Path) -> tuple[str, dict[str, Any]]:
    """The demo group, public on ``cloud``: its URL and anonymous storage options."""
    return cloud.publish_demo(write_demo_group(tmp_path / "demo"), tmp_path)


def test_hello_from_the_cloud_reads_anonymously_with_the_sync_api(
    cloud: Cloud, demo: tuple[str, dict[str, Any]], tmp_path: Path
) -> None:
    url, options = demo
    if cloud.writable:
        zarr_root = za.group(store=url, storage_options=options)
    else:
        with pytest.raises(ReadOnlyError, match="open with mode='r'"):
            za.group(store=url, storage_options=options)  # mode 'a' on a read-only store
        zarr_root = za.open_group(url, mode="r", storage_options=options)
    z_array = zarr_root["foo/bar/baz"]
    assert z_array[:].tobytes() == HELLO
    info = info_fields(z_array)
    assert info["Name"] == "/foo/bar/baz"
    assert info["Chunks initialized"] == "3/3"
    assert (info["Data type"], info["Shape"], info["Chunk shape"]) == ("|S1", "(21,)", "(7,)")
    assert info["Compressor"] == repr(Blosc(cname="lz4", clevel=5, shuffle=1))
    reference = zarr.open_array(tmp_path / "demo", path="foo/bar/baz", mode="r")
    assert info["No. bytes stored"] == str(reference.nbytes_stored())
    assert info["Read-only"] == str(not cloud.writable)
    assert zarr_root["foo"]["bar"]["baz"][7:14].tobytes() == HELLO[7:14]


def test_hello_from_the_cloud_reads_anonymously_with_the_async_api(
    cloud: Cloud, demo: tuple[str, dict[str, Any]]
) -> None:
    url, options = demo

    async def main() -> tuple[bytes, bytes, int, list[str]]:
        root = await asyncarr.open_group(url, mode="r", storage_options=options)
        try:
            baz = await root.getitem("foo/bar/baz")
            everything, backwards = await asyncio.gather(baz.getitem(slice(None)), baz.getitem(slice(None, None, -1)))
            members = [name async for name in (await root.getitem("foo/bar")).array_keys()]
            return everything.tobytes(), backwards.tobytes(), await baz.nchunks_initialized(), members
        finally:
            await root.store.close()

    assert run(main()) == (HELLO, HELLO[::-1], 3, ["baz"])
    baz = za.open_array(f"{url}/foo/bar/baz", mode="r", storage_options=options)  # the array by its full URL
    assert baz[:].tobytes() == HELLO and baz.shape == (21,)


# -- round trips --------------------------------------------------------------------------------------

SELECTIONS = [
    (slice(None), slice(None)),
    (slice(2, 29, 3), slice(None, None, -2)),
    (slice(None, None, -1), 5),
    (slice(-5, None), slice(-7, -1, 2)),
    (slice(25, 3, -4), slice(38, None, -13)),
    (-1, -1),
]


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_arrays_and_groups_round_trip_with_partial_reads_matching_numpy(
    cloud: Cloud, tmp_path: Path, zarr_format: int
) -> None:
    place = cloud.place(tmp_path)
    rng = np.random.default_rng(zarr_format)
    grid = rng.normal(size=(30, 40)).astype("f4")
    counts = np.arange(95, dtype="i8")

    async def write() -> None:
        root = await asyncarr.open_group(
            place.write_url, mode="w", zarr_format=zarr_format, storage_options=place.write_options
        )
        await root.update_attributes({"title": f"v{zarr_format} on {cloud.name}"})
        temperature = await root.create_array("grid/temperature", shape=grid.shape, chunks=(7, 9), dtype="f4")
        await temperature.setitem(Ellipsis, grid)
        await temperature.setitem((slice(3, 5), slice(None)), -1.0)
        await root.create_array("counts", data=counts, chunks=(10,))
        await root.store.close()

    run(write())
    cloud.publish(place)
    grid[3:5, :] = -1.0

    root = za.open_group(place.url, mode="r", storage_options=place.options)
    assert root.attrs["title"] == f"v{zarr_format} on {cloud.name}"
    assert sorted(root.group_keys()) == ["grid"] and sorted(root.array_keys()) == ["counts"]
    temperature = root["grid/temperature"]
    assert (temperature.zarr_format, temperature.shape, temperature.chunks) == (zarr_format, (30, 40), (7, 9))
    for selection in SELECTIONS:
        np.testing.assert_array_equal(temperature[selection], grid[selection])
    np.testing.assert_array_equal(root["counts"][::-3], counts[::-3])
    assert temperature.nchunks_initialized == 5 * 5 and root["counts"].nchunks_initialized == 10

    async def read_async() -> list[np.ndarray]:
        array = await asyncarr.open_array(place.url, mode="r", path="grid/temperature", storage_options=place.options)
        try:
            return await asyncio.gather(*(array.getitem(selection) for selection in SELECTIONS))
        finally:
            await array.store.close()

    for selection, result in zip(SELECTIONS, run(read_async()), strict=True):
        np.testing.assert_array_equal(result, grid[selection])


def test_more_than_1000_chunk_keys_are_listed_and_counted(listable: Cloud, tmp_path: Path) -> None:
    place = listable.place(tmp_path)
    data = np.arange(1, 1101, dtype="u2") * 3
    local = tmp_path / "local.zarr"
    root = za.open_group(str(local), mode="w")
    root.create_dataset("many/values", data=data, chunks=(1,))  # 1,100 chunk keys: two listing pages
    listable.copy_in(local, place)

    values = za.open_group(place.url, mode="r", storage_options=place.options)["many/values"]
    assert values.nchunks_initialized == 1100
    np.testing.assert_array_equal(values[::97], data[::97])
    np.testing.assert_array_equal(values[1095:990:-7], data[1095:990:-7])


def test_pickled_arrays_reopen_their_store_from_its_configuration(cloud: Cloud, tmp_path: Path) -> None:
    place = cloud.place(tmp_path)
    data = np.arange(60, dtype="i4").reshape(6, 10)
    za.open_array(place.write_url, mode="w", shape=data.shape, chunks=(4, 4), dtype="i4",
                  storage_options=place.write_options)[:] = data  # fmt: skip
    cloud.publish(place)
    array = za.open_array(place.url, mode="r", storage_options=place.options)
    restored = pickle.loads(pickle.dumps(array))
    np.testing.assert_array_equal(restored[::-1, 3], data[::-1, 3])
    assert repr(restored.store) == repr(array.store)


# -- errors --------------------------------------------------------------------------------------------


def test_missing_nodes_raise_not_found_errors_naming_the_url(cloud: Cloud, tmp_path: Path) -> None:
    place = cloud.place(tmp_path)
    za.open_group(place.write_url, mode="w", storage_options=place.write_options).create_dataset("present", data=[1])
    cloud.publish(place)
    missing = f"{place.url}/absent"
    for opener, error in [
        (asyncarr.open_array, ArrayNotFoundError),
        (asyncarr.open_group, GroupNotFoundError),
        (asyncarr.open, NodeNotFoundError),
    ]:
        with pytest.raises(error, match="absent") as caught:
            run(opener(missing, mode="r", storage_options=place.options))
        assert isinstance(caught.value, KeyError)
        assert f"{place.url}/absent" in str(caught.value)
    group = za.open_group(place.url, mode="r", storage_options=place.options)
    with pytest.raises(KeyError):
        group["absent"]
    assert "absent" not in group and "present" in group


def test_refused_requests_raise_access_denied_naming_the_url(cloud: Cloud, tmp_path: Path) -> None:
    url, options = cloud.refusing(tmp_path)
    with pytest.raises(AccessDeniedError) as denied:
        za.open_array(url, mode="r", storage_options=options)
    message = str(denied.value)
    assert message.startswith(f"{url}/"), message  # the URL of the key that was refused
    assert "access denied" in message and denied.value.__cause__ is not None
    assert isinstance(denied.value, PermissionError)


def test_read_only_modes_refuse_writes_before_anything_is_written(cloud: Cloud, tmp_path: Path) -> None:
    place = cloud.place(tmp_path)
    data = np.arange(8, dtype="i2")
    za.open_array(place.write_url, mode="w", shape=(8,), chunks=(4,), dtype="i2",
                  storage_options=place.write_options)[:] = data  # fmt: skip
    cloud.publish(place)
    array = za.open_array(place.url, mode="r", storage_options=place.options)
    for write in (lambda: array.__setitem__(slice(None), 0), lambda: array.resize(4), lambda: array.attrs.update(x=1)):
        with pytest.raises(ReadOnlyError):
            write()
    refused_modes = ["a", "r+", "w", "w-"] if not cloud.writable else []
    for mode in refused_modes:  # a read-only store (HTTP) refuses writable modes at once
        with pytest.raises(ReadOnlyError, match=re.escape(f"mode '{mode}' cannot be used")):
            za.open_array(place.url, mode=mode, shape=(8,), dtype="i2", storage_options=place.options)
    np.testing.assert_array_equal(za.open_array(place.url, mode="r", storage_options=place.options)[:], data)


# -- a flaky network --------------------------------------------------------------------------------------


def test_a_flaky_network_is_invisible_to_full_writes_and_reads(cloud: Cloud, tmp_path: Path) -> None:
    place = cloud.place(tmp_path)
    data = np.random.default_rng(7).integers(-(2**30), 2**30, size=(48, 40), dtype="i4")  # 30 chunks of (8, 8)
    with (
        FaultProxy(place.upstream, failure_rate=0.25, failures=FAULT_KINDS, seed=11) as proxy,
        config.set(retries=20),
    ):
        url, options = cloud.through(proxy, place)
        if cloud.writable:
            write_url, write_options = url, options
        else:
            write_url, write_options = place.write_url, place.write_options  # HTTP: reads only
        root = za.open_group(write_url, mode="w", storage_options=write_options)
        root.attrs["flaky"] = True
        root.create_dataset("x", shape=data.shape, chunks=(8, 8), dtype="i4")[:] = data
        cloud.publish(place)

        again = za.open_group(url, mode="r", storage_options=options)
        assert dict(again.attrs) == {"flaky": True}
        np.testing.assert_array_equal(again["x"][:], data)
        np.testing.assert_array_equal(again["x"][::-3, 5:37:4], data[::-3, 5:37:4])
        assert again["x"].nchunks_initialized == 30
        counts = proxy.counts()
    assert {kind: counts["faults"].get(kind, 0) > 0 for kind in FAULT_KINDS} == dict.fromkeys(FAULT_KINDS, True), counts
    np.testing.assert_array_equal(za.open_array(place.url, path="x", mode="r", storage_options=place.options)[:], data)


# -- sessions close ---------------------------------------------------------------------------------------

_CLOSE_SCRIPT = """
import gc, sys
import numpy as np
import asyncarr, asyncarr.sync as za
from emulators import azure, gcs, s3

asyncarr.config.set(concurrency=gcs.EMULATOR_CONNECTIONS)
stores = {
    "s3": (f"s3://{s3.new_bucket()}/x", s3.store_options()),
    "gcs": (f"gs://{gcs.new_bucket()}/x", gcs.store_options()),
    "azure": (f"az://{azure.new_container()}/x", {"connection_string": azure.connection_string()}),
}
kept = []
for name, (url, options) in stores.items():
    print(f"--- {name}", file=sys.stderr, flush=True)
    array = za.open_array(url, mode="w", shape=(6,), chunks=(2,), dtype="i4", storage_options=options)
    array[:] = np.arange(6)
    kept.append(za.open_array(url, mode="r", storage_options=options))   # closed by the facade at exit
    dropped = za.open_array(url, mode="r", storage_options=options)
    assert dropped[::-1].tolist() == [5, 4, 3, 2, 1, 0]
    del array, dropped                                                     # dropped while the loop runs
    gc.collect()
print("--- http", file=sys.stderr, flush=True)
served = za.open_array(sys.argv[1], mode="r")
assert served[:].tolist() == [0, 1, 2, 3]
del served
gc.collect()
print("--- exit", file=sys.stderr, flush=True)
print("done")
"""


def test_sessions_close_without_warnings_when_nodes_are_dropped_or_left_to_the_facade(tmp_path: Path) -> None:
    za.open_array(str(tmp_path / "a"), mode="w", shape=(4,), chunks=(2,), dtype="i4")[:] = np.arange(4)
    served = http.serve_directory(tmp_path) + "/a"
    child = subprocess.run(
        [sys.executable, "-W", "error::ResourceWarning", "-c", textwrap.dedent(_CLOSE_SCRIPT), served],
        capture_output=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent), str(TESTS)])},
        timeout=120,
    )
    stderr = child.stderr.decode()
    assert child.returncode == 0 and child.stdout.decode().strip() == "done", stderr
    sections = dict(part.split("\n", 1) for part in stderr.split("--- ")[1:])  # stage -> what it printed
    leaks = ("Unclosed client session", "Unclosed connector", "unclosed transport", "Task was destroyed")
    leaking = {stage: [leak for leak in leaks if leak in text] for stage, text in sections.items()}
    assert {stage: found for stage, found in leaking.items() if found} == {}, stderr
