"""Issue 11's store guarantees, against real servers and a real filesystem (no mocks).

- Redirects: the caller's headers and URL credentials never reach another origin (two aiohttp
  servers on 127.0.0.1, different ports); loops end; non-http(s) targets are refused; S3 and
  Azure follow no redirect at all; GCS's bearer token stays behind (aiohttp drops it).
- Shared S3 clients: their registry holds keyed digests, never a secret, and empties on close.
- LocalStore and symbolic links: overwriting, deleting and resizing never touch a file outside
  the root; reads and writes through a link that leaves the root are refused.
- The Store ABC: a store implementing only the six documented methods works end to end.
"""

from __future__ import annotations

import asyncio
import base64
import gc
import os
import pickle
import threading
import types
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import google.oauth2.credentials
import numpy as np
import pytest
from aiohttp import web
from emulators import s3 as s3_emulator
from emulators.http import BackgroundServer
from strangers import snapshot

import asyncarr
import asyncarr.sync as za
from asyncarr.errors import ReadOnlyError, StoreError
from asyncarr.stores import ByteRange, LocalStore, Store, base, clients, validate_key
from asyncarr.stores.azure import AzureStore
from asyncarr.stores.gcs import GCSStore
from asyncarr.stores.http import MAX_REDIRECTS, HTTPStore
from asyncarr.stores.s3 import S3Store

API_KEY = "key-" + "7d1e0c5b9a44-never-cross-origin"
PAYLOAD = bytes(range(256)) * 4


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


async def using(store: Store, operation: Any) -> Any:
    try:
        return await operation(store)
    finally:
        await store.close()


# -- two origins -----------------------------------------------------------------------------------


class Origin:
    """An HTTP server on 127.0.0.1 that records every request; it redirects or serves per path."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.redirects: dict[str, tuple[int, str]] = {}
        self.received: list[tuple[str, str, dict[str, str]]] = []  # method, path, headers
        self._lock = threading.Lock()
        app = web.Application()
        app.router.add_route("*", "/{path:.*}", self._handle)
        self._server = BackgroundServer(app, name="asyncarr-test-origin")
        self.url = self._server.url
        self.port = self._server.port

    def stop(self) -> None:
        self._server.stop()

    def headers_for(self, path: str) -> list[dict[str, str]]:
        with self._lock:
            return [headers for _, seen, headers in self.received if seen == path]

    def paths(self) -> list[str]:
        with self._lock:
            return [path for _, path, _ in self.received]

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path = request.match_info["path"]
        with self._lock:
            self.received.append((request.method, path, dict(request.headers)))
        if path in self.redirects:
            status, location = self.redirects[path]
            return web.Response(status=status, headers={"Location": location})
        if path not in self.files:
            return web.Response(status=404)
        data = self.files[path]
        if request.headers.get("Range") == "bytes=0-0":
            return web.Response(status=206, body=data[:1], headers={"Content-Range": f"bytes 0-0/{len(data)}"})
        return web.Response(body=data, headers={"Content-Length": str(len(data))})


@pytest.fixture
def first() -> Any:
    origin = Origin()
    yield origin
    origin.stop()


@pytest.fixture
def second() -> Any:
    origin = Origin()
    yield origin
    origin.stop()


def secret_headers() -> dict[str, str]:
    return {"X-Api-Key": API_KEY, "Authorization": f"Bearer {API_KEY}"}


def assert_no_secret(headers: Mapping[str, str]) -> None:
    assert "X-Api-Key" not in headers and "Authorization" not in headers, headers
    assert not any(API_KEY in value for value in headers.values()), headers


# -- HTTP redirects --------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_to_another_port_carries_none_of_the_callers_headers(
    first: Origin, second: Origin, status: int
) -> None:
    first.redirects["data/k"] = (status, f"{second.url}/elsewhere/k")
    second.files["elsewhere/k"] = PAYLOAD
    store = HTTPStore(f"{first.url}/data", headers=secret_headers())
    assert run(using(store, lambda s: s.get("k"))) == PAYLOAD
    assert first.headers_for("data/k")[0]["X-Api-Key"] == API_KEY  # the caller's own origin got them
    (received,) = second.headers_for("elsewhere/k")
    assert_no_secret(received)


def test_heads_and_ranged_gets_drop_the_callers_headers_cross_origin_but_keep_the_range(
    first: Origin, second: Origin
) -> None:
    first.redirects["data/k"] = (307, f"{second.url}/elsewhere/k")
    second.files["elsewhere/k"] = PAYLOAD

    async def reads(store: HTTPStore) -> tuple[bool, int | None, bytes | None]:
        return await store.exists("k"), await store.getsize("k"), await store.get("k", ByteRange(0, 1))

    store = HTTPStore(f"{first.url}/data", headers=secret_headers())
    assert run(using(store, reads)) == (True, len(PAYLOAD), PAYLOAD[:1])
    received = second.headers_for("elsewhere/k")
    assert len(received) == 3
    for headers in received:
        assert_no_secret(headers)
    assert received[-1]["Range"] == "bytes=0-0"


def test_a_redirect_to_another_host_name_of_the_same_server_is_another_origin(first: Origin) -> None:
    first.redirects["data/k"] = (302, f"http://localhost:{first.port}/moved/k")
    first.files["moved/k"] = PAYLOAD
    assert run(using(HTTPStore(f"{first.url}/data", headers=secret_headers()), lambda s: s.get("k"))) == PAYLOAD
    (received,) = first.headers_for("moved/k")
    assert_no_secret(received)


def test_same_origin_redirects_keep_the_callers_headers(first: Origin) -> None:
    first.redirects["data/k"] = (301, "/moved/k")  # relative, as servers usually write it
    first.redirects["moved/k"] = (308, f"{first.url}/final/k")  # absolute, same origin
    first.files["final/k"] = PAYLOAD
    store = HTTPStore(f"{first.url}/data", headers=secret_headers())
    assert run(using(store, lambda s: s.get("k"))) == PAYLOAD
    for path in ("moved/k", "final/k"):
        (received,) = first.headers_for(path)
        assert received["X-Api-Key"] == API_KEY and received["Authorization"] == f"Bearer {API_KEY}"


def test_headers_once_dropped_do_not_come_back_on_a_redirect_home(first: Origin, second: Origin) -> None:
    first.redirects["data/k"] = (302, f"{second.url}/bounce/k")
    second.redirects["bounce/k"] = (302, f"{first.url}/home/k")
    first.files["home/k"] = PAYLOAD
    assert run(using(HTTPStore(f"{first.url}/data", headers=secret_headers()), lambda s: s.get("k"))) == PAYLOAD
    assert_no_secret(second.headers_for("bounce/k")[0])
    assert_no_secret(first.headers_for("home/k")[0])


def test_user_and_password_of_the_base_url_stay_with_its_origin(first: Origin, second: Origin) -> None:
    first.redirects["data/k"] = (307, f"{second.url}/elsewhere/k")
    second.files["elsewhere/k"] = PAYLOAD
    store = HTTPStore(f"http://alice:{API_KEY}@127.0.0.1:{first.port}/data")
    assert run(using(store, lambda s: s.get("k"))) == PAYLOAD
    expected = "Basic " + base64.b64encode(f"alice:{API_KEY}".encode()).decode()
    assert first.headers_for("data/k")[0]["Authorization"] == expected
    assert "Authorization" not in second.headers_for("elsewhere/k")[0]


def test_a_redirect_loop_ends_in_a_store_error_naming_the_url(first: Origin) -> None:
    first.redirects["data/loop"] = (302, "/data/loop")
    store = HTTPStore(f"{first.url}/data", headers=secret_headers())
    with pytest.raises(StoreError, match=rf"^{first.url}/data/loop: GET failed: more than {MAX_REDIRECTS} redirects"):
        run(using(store, lambda s: s.get("loop")))
    assert first.paths().count("data/loop") == MAX_REDIRECTS + 1  # refused at once, not retried


@pytest.mark.parametrize("target", ["file:///etc/passwd", "ftp://127.0.0.1/x", "data:,hello"])
def test_a_redirect_to_a_non_http_url_is_refused(first: Origin, target: str) -> None:
    first.redirects["data/k"] = (302, target)
    store = HTTPStore(f"{first.url}/data", headers=secret_headers())
    with pytest.raises(StoreError, match=r"/data/k: GET failed: the redirect to .* was refused") as caught:
        run(using(store, lambda s: s.get("k")))
    assert API_KEY not in str(caught.value)


def test_a_redirect_message_shows_no_query_or_password_of_the_target(first: Origin) -> None:
    first.redirects["data/loop"] = (302, f"http://u:pw-{API_KEY}@127.0.0.1:{first.port}/data/loop?sig={API_KEY}")
    with pytest.raises(StoreError) as caught:
        run(using(HTTPStore(f"{first.url}/data"), lambda s: s.get("loop")))
    assert API_KEY not in str(caught.value) and "more than" in str(caught.value)


# -- S3, Azure and GCS redirects -------------------------------------------------------------------


def test_s3_follows_no_redirect_for_object_requests_or_listings(first: Origin, second: Origin) -> None:
    secret = "s3-secret-" + API_KEY
    for path in ("bucket", "bucket/k"):
        first.redirects[path] = (307, f"{second.url}/{path}")
    store = S3Store("bucket", endpoint_url=first.url, region="us-east-1", key="AKIAEXAMPLE", secret=secret)

    async def attempts(store: S3Store) -> list[BaseException | Any]:
        async def listed() -> list[str]:
            return [key async for key in store.list_prefix("")]

        operations = (store.get("k"), store.set("k", b"v"), listed(), store.delete_prefix(""))
        return await asyncio.gather(*operations, return_exceptions=True)

    outcomes = run(using(store, attempts))
    assert all(isinstance(outcome, StoreError) for outcome in outcomes), outcomes
    assert second.received == []
    assert len(first.received) == 4  # one request each: refused at once, neither retried nor chased by botocore
    assert not any(secret in str(outcome) for outcome in outcomes)


def test_azure_follows_no_redirect(first: Origin, second: Origin) -> None:
    account_key = base64.b64encode(b"azure-account-key-" + API_KEY.encode()).decode()
    first.redirects["acct/ctr/k"] = (307, f"{second.url}/acct/ctr/k")
    store = AzureStore("ctr", account_url=f"{first.url}/acct", account_name="acct", account_key=account_key)
    with pytest.raises(StoreError, match=r"/k: ") as caught:
        run(using(store, lambda s: s.get("k")))
    assert first.paths() == ["acct/ctr/k"] and second.received == []
    assert account_key not in str(caught.value)


def test_gcs_bearer_token_stays_behind_on_a_cross_origin_redirect(first: Origin, second: Origin) -> None:
    token = google.oauth2.credentials.Credentials(token="ya29." + API_KEY)
    object_path = "download/storage/v1/b/bucket/o/k"
    first.redirects[object_path] = (302, f"{second.url}/elsewhere/k")
    second.files["elsewhere/k"] = PAYLOAD
    store = GCSStore("bucket", endpoint_url=first.url, token=token)
    assert run(using(store, lambda s: s.get("k"))) == PAYLOAD
    assert first.headers_for(object_path)[0]["Authorization"] == f"Bearer ya29.{API_KEY}"
    assert_no_secret(second.headers_for("elsewhere/k")[0])


# -- the shared S3 client registry ----------------------------------------------------------------


def strings_reachable_from(root: object, limit: int = 200_000) -> list[str | bytes]:
    """Every str and bytes reachable from ``root``, not entering modules, classes or functions."""
    opaque = (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType, types.CodeType, types.FrameType)
    found: list[str | bytes] = []
    seen: set[int] = set()
    pending = [root]
    while pending and len(seen) < limit:
        current = pending.pop()
        if id(current) in seen or isinstance(current, opaque):
            continue
        seen.add(id(current))
        if isinstance(current, (str, bytes)):
            found.append(current)
            continue
        pending.extend(gc.get_referents(current))
    return found


def test_the_shared_client_registry_holds_no_secret_and_empties_when_the_last_store_closes() -> None:
    secret = "registry-secret-" + API_KEY
    bucket = s3_emulator.new_bucket()
    options = {"endpoint_url": s3_emulator.moto_endpoint(), "region": s3_emulator.REGION}
    before = set(clients._shared)
    one = S3Store(bucket, "one", key="AKIAREGISTRY", secret=secret, **options)
    two = S3Store(bucket, "two", key="AKIAREGISTRY", secret=secret, **options)
    assert set(clients._shared) == before  # nothing is registered before a store is used

    async def scenario() -> None:
        await one.set("k", b"1")
        await two.set("k", b"2")
        assert [key async for key in one.list_prefix("")] == ["k"]
        added = set(clients._shared) - before
        assert len(added) == 1  # the two stores share one set of clients
        (digest,) = added
        assert isinstance(digest, bytes) and len(digest) == 32
        assert secret.encode() not in digest and "AKIAREGISTRY" not in repr(digest)
        assert secret not in repr(clients._shared) and secret not in repr(one._clients)
        assert secret not in str(vars(one._clients))  # the lease keeps the digest, not the configuration
        assert secret not in repr(one) and secret not in repr(two)
        await one.close()
        assert set(clients._shared) - before == added  # two still holds them
        assert await two.get("k") == b"2"
        await two.close()
        assert set(clients._shared) == before
        reachable = strings_reachable_from(clients._shared)
        assert not any(secret in text for text in reachable if isinstance(text, str))
        assert not any(secret.encode() in data for data in reachable if isinstance(data, bytes))

    run(scenario())
    # A closed store takes up its clients again on its next use, and gives them back on close.
    assert run(using(one, lambda s: s.get("k"))) == b"1"
    assert set(clients._shared) == before


def test_stores_with_other_secrets_get_other_clients() -> None:
    bucket = s3_emulator.new_bucket()
    options = {"endpoint_url": s3_emulator.moto_endpoint(), "region": s3_emulator.REGION, "key": "AKIAOTHER"}
    stores = [S3Store(bucket, secret="secret-a", **options), S3Store(bucket, secret="secret-b", **options)]

    async def scenario() -> int:
        before = set(clients._shared)
        for store in stores:
            await store.exists("k")
        added = len(set(clients._shared) - before)
        for store in stores:
            await store.close()
        return added

    assert run(scenario()) == 2


def test_a_pickled_s3_store_keeps_its_configuration() -> None:
    options = {"endpoint_url": s3_emulator.moto_endpoint(), "region": s3_emulator.REGION}
    store = S3Store("bucket", "p", key="AKIAPICKLE", secret="pickle-secret", client_kwargs={"verify": False}, **options)
    copy = pickle.loads(pickle.dumps(store))
    assert copy._client_configuration() == store._client_configuration()
    assert (copy.prefix, copy.read_only, repr(copy)) == (store.prefix, store.read_only, repr(store))
    assert copy._clients._digest == store._clients._digest


# -- LocalStore and symbolic links -----------------------------------------------------------------


@pytest.fixture
def planted(tmp_path: Path) -> tuple[Path, Path]:
    """A root holding a group and an array, with links a stranger planted to a directory and a file outside."""
    outside = tmp_path / "outside"
    (outside / "dir" / "nested").mkdir(parents=True)
    (outside / "dir" / "precious").write_bytes(b"keep me")
    (outside / "dir" / "nested" / "deep").write_bytes(b"keep me too")
    (outside / "private_key").write_bytes(b"-----BEGIN PRIVATE KEY-----")
    root = tmp_path / "root"
    group = za.open_group(str(root), mode="w")
    array = group.create_array("arr", shape=(4, 4), chunks=(2, 2), dtype="u1")
    array[...] = 1
    (root / "grp").mkdir()
    (root / "grp" / "linked").symlink_to(outside / "dir", target_is_directory=True)
    (root / "arr" / "c" / "1" / "1").unlink()
    (root / "arr" / "c" / "1" / "1").symlink_to(outside / "private_key")
    return root, outside


def test_open_with_mode_w_removes_links_and_nothing_they_point_to(planted: tuple[Path, Path]) -> None:
    root, outside = planted
    before = snapshot(outside)
    za.open_group(str(root), mode="w")
    assert snapshot(outside) == before
    assert not (root / "grp").exists() and not os.path.lexists(root / "grp" / "linked")
    assert not os.path.lexists(root / "arr" / "c" / "1" / "1")


def test_delete_prefix_and_delete_remove_links_themselves(planted: tuple[Path, Path]) -> None:
    root, outside = planted
    before = snapshot(outside)
    store = LocalStore(root)
    run(store.delete("arr/c/1/1"))  # a link to a file
    run(store.delete("grp/linked"))  # a link to a directory, deleted as a key
    assert snapshot(outside) == before
    assert not os.path.lexists(root / "arr" / "c" / "1" / "1") and not os.path.lexists(root / "grp" / "linked")


def test_delete_prefix_of_a_tree_holding_a_link_to_a_directory(planted: tuple[Path, Path]) -> None:
    root, outside = planted
    before = snapshot(outside)
    run(LocalStore(root).delete_prefix("grp"))
    assert snapshot(outside) == before and not os.path.lexists(root / "grp")
    (root / "grp").mkdir()
    (root / "grp" / "linked").symlink_to(outside / "dir", target_is_directory=True)
    run(LocalStore(root).delete_prefix("grp/linked"))  # the prefix is the link itself
    assert snapshot(outside) == before and not os.path.lexists(root / "grp" / "linked")


def test_deleting_below_a_linked_directory_is_refused(planted: tuple[Path, Path]) -> None:
    root, outside = planted
    before = snapshot(outside)
    store = LocalStore(root)
    for attempt in (store.delete("grp/linked/precious"), store.delete_prefix("grp/linked/nested")):
        with pytest.raises(StoreError, match=r"grp/linked/.*: the path leads outside the store root"):
            run(attempt)
    assert snapshot(outside) == before


def test_resize_deletes_a_linked_chunk_as_a_link(planted: tuple[Path, Path]) -> None:
    root, outside = planted
    before = snapshot(outside)
    array = za.open_array(str(root / "arr"), mode="r+")
    array.resize((2, 4))
    assert snapshot(outside) == before
    assert not os.path.lexists(root / "arr" / "c" / "1" / "1")
    assert array[...].tolist() == [[1] * 4] * 2


def test_writing_a_linked_chunk_replaces_the_link_not_its_target(planted: tuple[Path, Path]) -> None:
    root, outside = planted
    before = snapshot(outside)
    array = za.open_array(str(root / "arr"), mode="r+")
    array[...] = 7
    assert snapshot(outside) == before
    chunk = root / "arr" / "c" / "1" / "1"
    assert chunk.is_file() and not chunk.is_symlink()
    assert np.all(array[...] == 7)


def test_writing_below_a_linked_directory_is_refused(planted: tuple[Path, Path]) -> None:
    root, outside = planted
    before = snapshot(outside)
    store = LocalStore(root)
    for key in ("grp/linked/precious", "grp/linked/new/file"):
        with pytest.raises(StoreError, match=r"the path leads outside the store root .*does not write"):
            run(store.set(key, b"overwritten"))
    assert snapshot(outside) == before


def test_writing_through_links_is_judged_at_each_link_below_the_root(planted: tuple[Path, Path]) -> None:
    root, outside = planted
    before = snapshot(outside)
    (root / "grp" / "inner").symlink_to(root / "arr", target_is_directory=True)  # stays in the root
    (root / "arr" / "away").symlink_to(outside / "dir", target_is_directory=True)  # leaves it, one link deeper
    store = LocalStore(root)
    store.set_sync("grp/inner/c/new/file", b"kept inside")  # directories made below a link that stays inside
    assert (root / "arr" / "c" / "new" / "file").read_bytes() == b"kept inside"
    for key in ("grp/inner/away/precious", "grp/inner/away/made/file", "arr/away/nested/deep"):
        with pytest.raises(StoreError, match=r"the path leads outside the store root .*does not write"):
            store.set_sync(key, b"overwritten")
    assert snapshot(outside) == before


def test_batched_writes_below_a_linked_directory_are_refused_and_write_nothing_outside(
    planted: tuple[Path, Path],
) -> None:
    # set_many_sync opens each key's directory once and names its files relative to it: the
    # directory is judged before it is opened, as a single write's would be.
    root, outside = planted
    before = snapshot(outside)
    store = LocalStore(root)
    for items in (
        [("grp/linked/precious", b"overwritten")],
        [("grp/kept", b"inside"), ("grp/linked/precious", b"overwritten"), ("grp/linked/new", b"made")],
        [("grp/linked/made/file", b"made")],
    ):
        with pytest.raises(StoreError, match=r"grp/linked/.*: the path leads outside the store root .*does not write"):
            store.set_many_sync(items)
    assert snapshot(outside) == before
    assert (root / "grp" / "kept").read_bytes() == b"inside"  # the batch's files before the refused one


def test_batched_writes_below_a_planted_fifo_fail_at_once(tmp_path: Path) -> None:
    # Opening the directory a batch writes into must not wait for a writer that never comes.
    os.makedirs(tmp_path / "c")
    os.mkfifo(tmp_path / "c" / "0")
    store = LocalStore(tmp_path)
    with pytest.raises(StoreError, match=r"c/0/0"):
        store.set_many_sync([("c/0/0", b"chunk"), ("c/0/1", b"chunk")])
    assert sorted(os.listdir(tmp_path / "c")) == ["0"]


def test_reading_through_a_link_out_of_the_root_is_refused_and_inside_it_allowed(planted: tuple[Path, Path]) -> None:
    root, _ = planted
    store = LocalStore(root)
    (root / "inside").symlink_to(root / "arr" / "zarr.json")  # a link that stays in the root
    (root / "grp" / "inner").symlink_to(root / "arr", target_is_directory=True)
    for key in ("arr/c/1/1", "grp/linked/precious", "grp/linked/nested/deep"):
        for read in (store.get(key), store.get(key, ByteRange(0, 4)), store.exists(key), store.getsize(key)):
            with pytest.raises(StoreError, match=rf"{key}: the path leads outside the store root .*does not read"):
                run(read)
        with pytest.raises(StoreError, match="outside the store root"):
            store.get_sync(key)
    assert run(store.get("inside")) == (root / "arr" / "zarr.json").read_bytes()
    assert run(store.get("grp/inner/zarr.json")) == (root / "arr" / "zarr.json").read_bytes()
    with pytest.raises(StoreError, match=r"arr/c/1/1: the path leads outside"):
        za.open_array(str(root / "arr"), mode="r")[...]


def test_links_are_listed_as_entries_and_listing_through_one_out_of_the_root_is_refused(
    planted: tuple[Path, Path],
) -> None:
    root, _ = planted
    store = LocalStore(root)

    async def listings() -> tuple[list[str], list[str]]:
        everything = sorted([key async for key in store.list_prefix("")])
        grp = sorted([name async for name in store.list_dir("grp")])
        return everything, grp

    everything, grp = run(listings())
    assert "arr/c/1/1" in everything  # a key (so resize and overwrites delete it), which reads refuse
    assert not any(key.startswith("grp/") for key in everything)  # a link to a directory is not descended into
    assert grp == ["linked"]

    async def list_prefix() -> list[str]:
        return [key async for key in store.list_prefix("grp/linked")]

    async def list_dir() -> list[str]:
        return [name async for name in store.list_dir("grp/linked/nested")]

    for listing in (list_prefix, list_dir):
        with pytest.raises(StoreError, match=r"grp/linked.*: the path leads outside the store root .*does not list"):
            run(listing())


def test_a_planted_fifo_does_not_block_a_read(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    store = LocalStore(tmp_path)
    assert run(asyncio.wait_for(store.get("fifo"), timeout=10)) in (b"", None)


@pytest.mark.parametrize("key", ["x" * 300, "g/" + "x" * 300 + "/c/0"], ids=["top", "nested"])
def test_a_key_too_long_for_the_file_system_names_nothing_there(tmp_path: Path, key: str) -> None:
    # Consolidated metadata may name members whose names no file system holds: they are missing, not broken.
    store = LocalStore(tmp_path)
    run(store.set("g/zarr.json", b"{}"))

    async def look() -> tuple[Any, ...]:
        listed = [k async for k in store.list_prefix(key)], [k async for k in store.list_dir(key)]
        await store.delete(key)
        await store.delete_prefix(key)
        return await store.get(key), await store.exists(key), await store.getsize(key), *listed

    assert run(look()) == (None, False, None, [], [])
    with pytest.raises(StoreError, match="too long"):
        run(store.set(key, b"1"))


# -- the Store ABC as documented -------------------------------------------------------------------


class DictStore(Store):
    """The six methods DESIGN.md lists, over a dict: nothing else."""

    def __init__(self, *, read_only: bool = False) -> None:
        super().__init__(read_only=read_only)
        self.values: dict[str, bytes] = {}

    async def get(self, key: str, byte_range: ByteRange | None = None) -> bytes | None:
        value = self.values.get(validate_key(key))
        return value if value is None or byte_range is None else byte_range.apply(value)

    async def set(self, key: str, value: bytes) -> None:
        self._check_writable()
        self.values[validate_key(key)] = bytes(value)

    async def delete(self, key: str) -> None:
        self._check_writable()
        self.values.pop(validate_key(key), None)

    async def exists(self, key: str) -> bool:
        return validate_key(key) in self.values

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        below = prefix.strip("/") + "/" if prefix.strip("/") else ""
        for key in list(self.values):
            if key.startswith(below):
                yield key

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        below = prefix.strip("/") + "/" if prefix.strip("/") else ""
        names = {key[len(below) :].split("/")[0] for key in list(self.values) if key.startswith(below)}
        for name in sorted(names):
            yield name


def test_a_store_with_only_the_documented_methods_works_end_to_end() -> None:
    store = DictStore()

    async def scenario() -> None:
        root = await asyncarr.open_group(store, mode="w", attributes={"title": "dict"})
        child = await root.create_group("child")
        array = await child.create_array("values", shape=(6, 4), chunks=(4, 3), dtype="i4", fill_value=-1)
        await array.setitem((slice(0, 5), slice(None)), np.arange(20).reshape(5, 4))
        expected = np.full((6, 4), -1)
        expected[:5] = np.arange(20).reshape(5, 4)
        assert np.array_equal(await array.getitem(...), expected)
        assert await array.nchunks_initialized() == 4
        tree = str(await root.tree())
        assert "child" in tree and "values (6, 4) int32" in tree
        info = str(await array.info())
        assert "DictStore" in info and "Chunks initialized : 4/4" in info
        await array.resize(2, 4)
        assert sorted(k for k in store.values if "/c/" in k) == ["child/values/c/0/0", "child/values/c/0/1"]
        reopened = await asyncarr.open_array(store, path="child/values", mode="r")
        assert np.array_equal(await reopened.getitem(...), np.arange(8).reshape(2, 4))
        assert [name async for name, _ in root.members()] == ["child"]
        await root.delitem("child")
        assert [k for k in store.values if k.startswith("child")] == []
        await store.close()  # the default close

    run(scenario())
    assert store.supports_sync_io is False and store.supports_listing is True


def limiters_of(location: str) -> int:
    return sum(1 for per_loop in base._limiters.values() for key in per_loop if key[0] == location)


def test_the_default_location_is_unique_and_stable_and_the_defaults_work() -> None:
    one, two = DictStore(), DictStore()
    assert one.location == one.location and one.location != two.location
    assert one.location.startswith("DictStore://") and repr(one) == f"DictStore({one.location!r})"
    assert one.key_url("a/b") == f"{one.location}/a/b"

    async def scenario() -> int:
        assert one.limiter is one.limiter and one.limiter is not two.limiter
        assert await one.get_many([("missing", None)]) == [None]
        await one.set_many([("a", b"1"), ("b", b"2")])
        assert await one.getsize("a") == 1
        await one.delete_many(["a"])
        await one.delete_prefix("")
        return limiters_of(one.location)

    assert run(scenario()) == 1 and one.values == {}


def test_the_limiters_of_a_store_with_the_default_location_go_with_it() -> None:
    async def use_and_drop() -> str:
        store = DictStore()
        await store.get_many([("k", None)])
        assert limiters_of(store.location) == 1
        return store.location

    async def after_collection(location: str) -> int:
        gc.collect()
        await DictStore().get_many([("k", None)])  # the next limiter lookup drops those of collected stores
        return limiters_of(location)

    async def scenario() -> int:
        return await after_collection(await use_and_drop())

    assert run(scenario()) == 0


def test_the_sync_facade_and_read_only_mode_work_on_a_minimal_store() -> None:
    store = DictStore()
    array = za.open_array(store, mode="w", shape=(5,), chunks=(2,), dtype="f8")
    array[:] = np.arange(5.0)
    assert array[1:4].tolist() == [1.0, 2.0, 3.0]
    read_only = DictStore(read_only=True)
    read_only.values = dict(store.values)
    assert za.open_array(read_only, mode="r")[...].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    with pytest.raises(ReadOnlyError):
        run(read_only.set("k", b"v"))
