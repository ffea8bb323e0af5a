"""GCSStore on gcp-storage-emulator, plus small real servers for what the emulator cannot show.

The emulator checks no credentials, answers no errors on demand and never paginates, so a
scripted GCS JSON-API server (aiohttp on 127.0.0.1, below) answers 403/401, 503-then-200,
dropped connections and slow answers, pages listings, and honours or ignores Range headers.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import pickle
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import numpy as np
import pytest
from aiohttp import web
from emulators import gcs as emulator
from emulators.http import BackgroundServer
from google.oauth2.credentials import Credentials

import asyncarr
import asyncarr.sync as za
from asyncarr.errors import AccessDeniedError, ReadOnlyError, StoreError
from asyncarr.stores import ByteRange, from_url
from asyncarr.stores.gcs import GCSStore

ROOT = Path(__file__).resolve().parents[1]
SECRET = "ya29.secret-access-token-never-shown"


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


async def keys_of(iterator: Any) -> list[str]:
    return sorted([key async for key in iterator])


def fresh_store(tmp_path: Path, prefix: str = "root", **options: Any) -> GCSStore:
    """A store on a new bucket of a freshly wiped emulator (for this test)."""
    store = emulator.make_store(tmp_path)
    return GCSStore(
        store.bucket,
        prefix,
        max_connections=emulator.EMULATOR_CONNECTIONS,
        **{**emulator.store_options(), **options},
    )


# -- a scripted GCS JSON-API server ------------------------------------------------------------


class ScriptedGCS:
    """A tiny GCS JSON API on 127.0.0.1: objects in a dict, faults from a script, every request logged.

    Each request takes the next entry of ``script`` (then ``default``): "ok", "401", "403",
    "429", "503", "drop" (close the connection without answering) or "slow" (answer after 1 s).
    """

    def __init__(self, *, default: str = "ok", page_size: int = 1000, honour_range: bool = True) -> None:
        self.objects: dict[str, bytes] = {}
        self.script: list[str] = []
        self.default = default
        self.page_size = page_size
        self.honour_range = honour_range
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self._lock = threading.Lock()
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._server = BackgroundServer(app, name="asyncarr-test-scripted-gcs")
        self.url = self._server.url

    def stop(self) -> None:
        self._server.stop()

    def count(self, method: str = "") -> int:
        with self._lock:
            return sum(1 for m, _, _ in self.requests if not method or m == method)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        with self._lock:
            self.requests.append((request.method, request.path_qs, dict(request.headers)))
            behaviour = self.script.pop(0) if self.script else self.default
        body = await request.read()
        if behaviour == "drop":
            assert request.transport is not None
            request.transport.close()
            return web.Response(status=500)  # never sent: the connection is gone
        if behaviour == "slow":
            await asyncio.sleep(1)
        elif behaviour != "ok":
            status = int(behaviour)
            error = {"error": {"code": status, "message": f"scripted {status} for {request.path}"}}
            return web.json_response(error, status=status)
        return self._serve(request, body)

    def _serve(self, request: web.Request, body: bytes) -> web.Response:
        path = request.rel_url.raw_path  # object names arrive %-encoded, '/' as %2F
        if request.method == "POST" and path.startswith("/upload/"):
            if request.query.get("uploadType") == "media":
                name, data = request.query["name"], body
            else:  # gcsfs's multipart upload (of an empty value)
                name, data = json.loads(body.split(b"\n\n", 2)[1].split(b"\n")[0])["name"], b""
            self.objects[name] = data
            return web.json_response({"name": name, "size": str(len(data))})
        if path.endswith("/o"):
            return self._list(request)
        name = unquote(path.split("/o/", 1)[1])
        if name not in self.objects:
            return web.json_response({"error": {"code": 404, "message": "No such object"}}, status=404)
        if request.method == "DELETE":
            del self.objects[name]
            return web.Response(status=204)
        data = self.objects[name]
        if request.query.get("alt") != "media":
            return web.json_response({"name": name, "size": str(len(data))})
        header = request.headers.get("Range")
        if header is None or not self.honour_range:
            return web.Response(body=data)
        first, _, last = header.removeprefix("bytes=").partition("-")
        start, stop = int(first), len(data) if not last else min(len(data), int(last) + 1)
        if start >= len(data):
            return web.Response(status=416, headers={"Content-Range": f"bytes */{len(data)}"})
        return web.Response(
            status=206, body=data[start:stop], headers={"Content-Range": f"bytes {start}-{stop - 1}/{len(data)}"}
        )

    def _list(self, request: web.Request) -> web.Response:
        prefix = request.query.get("prefix", "")
        delimiter = request.query.get("delimiter")
        assert int(request.query["maxResults"]) <= 1000
        entries: list[tuple[str, str]] = []  # (kind, name), in name order like GCS
        seen_prefixes = set()
        for name in sorted(self.objects):
            if not name.startswith(prefix):
                continue
            rest = name[len(prefix) :]
            if delimiter and delimiter in rest:
                common = prefix + rest.split(delimiter)[0] + delimiter
                if common not in seen_prefixes:
                    seen_prefixes.add(common)
                    entries.append(("prefix", common))
            else:
                entries.append(("item", name))
        start = int(request.query.get("pageToken", "0"))
        page = entries[start : start + self.page_size]
        answer: dict[str, Any] = {
            "kind": "storage#objects",
            "items": [{"name": name} for kind, name in page if kind == "item"],
            "prefixes": [name for kind, name in page if kind == "prefix"],
        }
        if start + self.page_size < len(entries):
            answer["nextPageToken"] = str(start + self.page_size)
        return web.json_response(answer)


@pytest.fixture
def scripted() -> Iterator[ScriptedGCS]:
    server = ScriptedGCS()
    yield server
    server.stop()


def scripted_store(server: ScriptedGCS, **options: Any) -> GCSStore:
    return GCSStore("bkt", "data", endpoint_url=server.url, **{"token": "anon", **options})


# -- round trips on the emulator -------------------------------------------------------------------


def test_values_round_trip_byte_for_byte_including_empty_large_and_unusual_key_names(tmp_path: Path) -> None:
    store = fresh_store(tmp_path)
    values = {
        "zarr.json": b'{"zarr_format": 3}',
        "arr/c/0/0": os.urandom(3 * 1024 * 1024 + 7),
        "empty": b"",
        "with space/and+plus": b"1",
        "per%cent/hash#and?query": b"2",
        "unicodé/ключ": b"3",
        "ends/with/cr": b"line\r",  # a multipart upload framed with bare newlines would lose the '\r'
        "looks/like/multipart": b"\n--==0==\nContent-Type: text/plain\n\n--==0==--\r\n",
    }

    async def scenario() -> None:
        await store.set_many(list(values.items()))
        for key, value in values.items():
            assert await store.get(key) == value, key
            assert await store.getsize(key) == len(value)
            assert await store.exists(key) is True
        assert await keys_of(store.list_prefix("")) == sorted(values)
        await store.set("empty", b"now filled")
        assert await store.get("empty") == b"now filled"
        await store.close()

    run(scenario())
    raw = GCSStore(store.bucket, max_connections=4, **emulator.store_options())
    assert run(raw.get("root/arr/c/0/0")) == values["arr/c/0/0"]  # keys live under the prefix
    assert store.location == f"gs://{store.bucket}/root" and store.key_url("a/b") == f"gs://{store.bucket}/root/a/b"


def test_missing_keys_read_as_none_and_deleting_them_is_fine(tmp_path: Path) -> None:
    store = fresh_store(tmp_path, prefix="")
    run(store.set("present", b"x"))
    for byte_range in (None, ByteRange(0, 4), ByteRange(3), ByteRange.last(2), ByteRange.last(0), ByteRange(1, 0)):
        assert run(store.get("absent", byte_range)) is None
    assert run(store.get("present/below")) is None
    assert run(store.exists("absent")) is False and run(store.getsize("absent")) is None
    run(store.delete("absent"))
    run(store.delete("present"))
    assert run(store.get("present")) is None


def test_byte_ranges_match_python_slicing_including_suffixes_and_past_the_end(tmp_path: Path) -> None:
    store = fresh_store(tmp_path)
    value = bytes(range(256)) * 40
    n = len(value)
    cases = {
        ByteRange(0, 10): value[0:10],
        ByteRange(1000, 1): value[1000:1001],
        ByteRange(5): value[5:],
        ByteRange(100, 0): b"",
        ByteRange(n - 3, 10): value[n - 3 :],
        ByteRange(n, 4): b"",
        ByteRange(n + 5, 4): b"",
        ByteRange(n + 5): b"",
        ByteRange.last(7): value[-7:],  # the emulator ignores 'bytes=-7': the store resolves it
        ByteRange.last(0): b"",
        ByteRange.last(n): value,
        ByteRange.last(n + 100): value,
    }
    run(store.set("v", value))
    for byte_range, expected in cases.items():
        assert run(store.get("v", byte_range)) == expected, byte_range
    assert run(store.get_many([("v", r) for r in cases])) == list(cases.values())
    run(store.set("empty", b""))
    assert [run(store.get("empty", r)) for r in (ByteRange(0, 3), ByteRange(2), ByteRange.last(3))] == [b""] * 3


def test_listings_of_more_than_1000_keys_are_complete(tmp_path: Path) -> None:
    store = fresh_store(tmp_path)
    flat = {f"many/k{i:04d}": b"" for i in range(1000)}
    nested = {f"many/d{i:03d}/x": b"" for i in range(100)}
    run(store.set_many(list({**flat, **nested}.items())))  # ~15 s: the emulator slows as objects pile up
    assert run(keys_of(store.list_prefix("many"))) == sorted({**flat, **nested})
    names = run(keys_of(store.list_dir("many")))
    assert len(names) == 1100
    assert names == sorted([key.split("/")[1] for key in flat] + [f"d{i:03d}" for i in range(100)])
    assert run(keys_of(store.list_dir(""))) == ["many"]


def test_objects_seeded_into_the_emulator_read_list_and_size_like_uploaded_ones(tmp_path: Path) -> None:
    store = fresh_store(tmp_path)
    objects = {f"seeded/{i // 100}/{i % 100}": os.urandom(i % 50) for i in range(1200)}
    emulator.seed_objects(store.bucket, {f"root/{key}": value for key, value in objects.items()})
    assert run(keys_of(store.list_prefix("seeded"))) == sorted(objects)
    assert run(keys_of(store.list_dir("seeded"))) == sorted(str(i) for i in range(12))
    assert run(store.get_many([(key, None) for key in objects])) == list(objects.values())
    assert run(store.getsize("seeded/3/49")) == 49
    assert run(store.get("seeded/3/49", ByteRange.last(5))) == objects["seeded/3/49"][-5:]


def test_list_dir_yields_child_names_and_delete_prefix_removes_only_what_is_below(tmp_path: Path) -> None:
    store = fresh_store(tmp_path)
    nested = {
        "zarr.json": b"{}",
        "a/zarr.json": b"{}",
        "a/c/0/0": b"00",
        "a/c/0/1": b"01",
        "a/c/1/0": b"10",
        "ab/x": b"sibling with a common prefix",
        "b": b"",
    }
    outside = GCSStore(store.bucket, "rootless", max_connections=4, **emulator.store_options())
    run(outside.set("a/zarr.json", b"not below the store root"))
    run(store.set_many(list(nested.items())))
    assert run(keys_of(store.list_dir(""))) == ["a", "ab", "b", "zarr.json"]
    assert run(keys_of(store.list_dir("a/"))) == ["c", "zarr.json"]
    assert run(keys_of(store.list_dir("a/c/0"))) == ["0", "1"]
    assert run(keys_of(store.list_dir("missing"))) == []
    assert run(keys_of(store.list_prefix("a"))) == ["a/c/0/0", "a/c/0/1", "a/c/1/0", "a/zarr.json"]
    run(store.delete_prefix("not/there"))
    run(store.delete_prefix("a"))
    assert run(keys_of(store.list_prefix(""))) == ["ab/x", "b", "zarr.json"]
    run(store.delete_prefix(""))
    assert run(keys_of(store.list_prefix(""))) == []
    assert run(outside.get("a/zarr.json")) == b"not below the store root"


def test_a_missing_bucket_fails_listings_and_writes_at_once_and_reads_as_missing(tmp_path: Path) -> None:
    emulator.make_store(tmp_path)
    store = GCSStore("no-such-bucket", "p", max_connections=4, **emulator.store_options())
    expected = "gs://no-such-bucket/p/k: put failed: the bucket 'no-such-bucket' does not exist"
    with pytest.raises(StoreError, match=expected):
        run(store.set("k", b"v"))
    with pytest.raises(StoreError, match="gs://no-such-bucket/p/a: list failed: the bucket 'no-such-bucket'"):
        run(keys_of(store.list_dir("a")))
    assert run(store.get("k")) is None and run(store.exists("k")) is False


def test_read_only_store_refuses_writes_before_sending_anything(tmp_path: Path) -> None:
    store = fresh_store(tmp_path)
    run(store.set("k", b"v"))
    read_only = emulator.reopen_read_only(store)
    for attempt in (read_only.set("k", b"x"), read_only.delete("k"), read_only.delete_prefix("")):
        with pytest.raises(ReadOnlyError, match=f"gs://{store.bucket}/root: the store is read-only"):
            run(attempt)
    assert run(read_only.get("k")) == b"v"


def test_unsafe_and_empty_keys_are_rejected_with_value_error(tmp_path: Path) -> None:
    store = fresh_store(tmp_path, prefix="")
    for key in ("../escape", "/abs", "a/./b", "", "dir/", "a//b"):
        for operation in (store.set(key, b"x"), store.get(key), store.delete(key), store.exists(key)):
            with pytest.raises(ValueError, match="store key"):
                run(operation)


def test_anonymous_reads_of_uploaded_public_data_through_the_url(tmp_path: Path) -> None:
    local = tmp_path / "local.zarr"
    data = np.arange(120, dtype="f8").reshape(10, 12)
    za.save(str(local), data)
    bucket = emulator.make_store(tmp_path).bucket
    names = emulator.upload_directory(local, bucket, "public/arr.zarr")
    assert "public/arr.zarr/zarr.json" in names
    url = f"gs://{bucket}/public/arr.zarr"
    store = from_url(url, token="anon", endpoint_url=emulator.gcs_endpoint())
    assert isinstance(store, GCSStore) and store.anonymous and repr(store).startswith(f"GCSStore({url!r}")
    with asyncarr.config.set(concurrency=4):
        array = za.open_array(url, mode="r", storage_options={"token": "anon", "endpoint_url": emulator.gcs_endpoint()})
        np.testing.assert_array_equal(array[:], data)
        np.testing.assert_array_equal(array[2:7:2, -3:], data[2:7:2, -3:])


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_sync_arrays_and_groups_round_trip_through_a_gs_url(tmp_path: Path, zarr_format: int) -> None:
    bucket = emulator.make_store(tmp_path).bucket
    options = emulator.store_options()
    url = f"gs://{bucket}/experiment.zarr"
    data = np.random.default_rng(0).integers(0, 1000, size=(30, 20), dtype="i4")
    with asyncarr.config.set(concurrency=4):
        root = za.open_group(url, mode="w", zarr_format=zarr_format, storage_options=options)
        root.attrs["title"] = "gcs"
        root.create_dataset("g/x", data=data, chunks=(10, 10))
        array = za.open(f"{url}/g/x", mode="r+", storage_options=options)
        array[0, :] = -1
        expected = data.copy()
        expected[0, :] = -1
        reopened = za.open_group(f"gcs://{bucket}/experiment.zarr", mode="r", storage_options=options)
        assert reopened.attrs["title"] == "gcs"
        assert reopened["g/x"].zarr_format == zarr_format
        np.testing.assert_array_equal(reopened["g/x"][:], expected)
        assert sorted(reopened.group_keys()) == ["g"]
    stored = run(keys_of(GCSStore(bucket, max_connections=4, **options).list_prefix("experiment.zarr")))
    metadata = "zarr.json" if zarr_format == 3 else ".zarray"
    assert f"experiment.zarr/g/x/{metadata}" in stored


# -- URLs, options, pickling ------------------------------------------------------------------


def test_gs_and_gcs_urls_open_gcs_stores_and_unknown_options_raise_type_error() -> None:
    store = from_url("gcs://bkt/some/prefix/", token="anon", endpoint_url="http://127.0.0.1:1/")
    assert isinstance(store, GCSStore)
    assert (store.bucket, store.prefix, store.location) == ("bkt", "some/prefix", "gs://bkt/some/prefix")
    assert store.endpoint_url == "http://127.0.0.1:1"
    assert from_url("gs://bkt", read_only=True, token="anon").read_only is True
    with pytest.raises(TypeError, match=r"unknown storage_options .* anon"):
        from_url("gs://bkt", anon=True)
    with pytest.raises(ValueError, match="write gs://bucket"):
        from_url("gs:///prefix-without-bucket")
    with pytest.raises(TypeError, match="token must be"):
        GCSStore("bkt", token=42)


def test_storage_emulator_host_is_honoured_when_no_endpoint_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = emulator.make_store(tmp_path).bucket
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator.gcs_endpoint().removeprefix("http://"))
    store = GCSStore(bucket, token="anon", max_connections=4)
    assert store.endpoint_url == emulator.gcs_endpoint()
    run(store.set("k", b"through the emulator"))
    monkeypatch.delenv("STORAGE_EMULATOR_HOST")
    assert run(pickle.loads(pickle.dumps(store)).get("k")) == b"through the emulator"  # resolved at creation


def test_pickled_store_reconnects_lazily_in_another_process(tmp_path: Path) -> None:
    store = fresh_store(tmp_path)
    run(store.set("a/b", b"written before pickling"))
    payload = pickle.dumps(store)  # after use: the live session is not part of the state
    run(store.close())
    script = (
        "import asyncio, pickle, sys\n"
        "store = pickle.loads(sys.stdin.buffer.read())\n"
        "async def main():\n"
        "    value = await store.get('a/b')\n"
        "    await store.set('from/child', b'child')\n"
        "    return value, sorted([k async for k in store.list_prefix('')])\n"
        "print(asyncio.run(main()))\n"
    )
    child = subprocess.run(
        [sys.executable, "-W", "error", "-c", script], input=payload, capture_output=True, cwd=ROOT, timeout=60
    )
    assert child.returncode == 0, child.stderr.decode()
    assert child.stdout.decode().strip() == "(b'written before pickling', ['a/b', 'from/child'])"
    assert child.stderr == b""
    restored = pickle.loads(payload)
    assert restored.location == store.location and restored.read_only is False
    assert run(restored.get("from/child")) == b"child"


# -- failures, retries and credentials (the scripted server) -----------------------------------------


def test_403_raises_access_denied_naming_the_url_with_a_hint_and_never_the_credentials(
    scripted: ScriptedGCS, caplog: pytest.LogCaptureFixture
) -> None:
    scripted.default = "403"
    store = scripted_store(scripted, token=Credentials(token=SECRET))
    caplog.set_level(logging.DEBUG)
    operations = {
        "get": store.get("c/0"),
        "range get": store.get("c/0", ByteRange.last(4)),
        "set": store.set("c/0", b"x"),
        "delete": store.delete("c/0"),
        "exists": store.exists("c/0"),
        "list": keys_of(store.list_prefix("c")),
    }
    for name, operation in operations.items():
        with pytest.raises(AccessDeniedError, match=r"gs://bkt/data/c(/0)?: access denied") as caught:
            run(operation)
        message = str(caught.value)
        assert 'For public data pass storage_options={"token": "anon"}.' in message, name
        assert isinstance(caught.value, PermissionError) and isinstance(caught.value, StoreError)
        assert SECRET not in message and SECRET not in repr(caught.value.__cause__)
    assert scripted.count() == len(operations)  # refusals are not retried
    assert {headers.get("Authorization") for _, _, headers in scripted.requests} == {f"Bearer {SECRET}"}
    assert SECRET not in repr(store) and SECRET not in caplog.text


def test_401_and_anonymous_refusals_say_the_request_was_anonymous(scripted: ScriptedGCS) -> None:
    scripted.default = "401"
    with pytest.raises(AccessDeniedError, match=r'gs://bkt/data/k: access denied .*token="anon"') as caught:
        run(scripted_store(scripted).get("k"))
    assert "Authorization" not in scripted.requests[0][2]
    assert "For public data" not in str(caught.value)


def test_unusable_credentials_raise_access_denied_without_quoting_them(scripted: ScriptedGCS) -> None:
    token = {"type": "service_account", "private_key": "-----SECRET KEY MATERIAL-----", "client_email": "a@b.c"}
    store = scripted_store(scripted, token=token)
    with pytest.raises(AccessDeniedError, match=r"gs://bkt/data/k: access denied .*credentials could not be set up"):
        run(store.get("k"))
    with pytest.raises(AccessDeniedError) as caught:
        run(store.set("k", b"x"))
    assert "SECRET" not in str(caught.value) and caught.value.__cause__ is not None
    assert "SECRET" not in repr(caught.value.__cause__) and caught.value.__cause__.__cause__ is None
    assert "SECRET" not in repr(store) and scripted.count() == 0


def test_throttling_server_errors_dropped_and_slow_connections_are_retried(scripted: ScriptedGCS) -> None:
    scripted.objects["data/c/0"] = b"chunk bytes"
    store = scripted_store(scripted)
    scripted.script = ["503", "429", "drop", "500"]
    assert run(store.get("c/0")) == b"chunk bytes"
    assert scripted.count() == 5
    scripted.script = ["503", "503"]
    run(store.set("c/1", b"x"))
    assert scripted.count("POST") == 3 and scripted.objects["data/c/1"] == b"x"
    scripted.script = ["503"]
    assert run(keys_of(store.list_prefix(""))) == ["c/0", "c/1"]
    with asyncarr.config.set(timeout=0.3):
        scripted.script = ["slow"]
        assert run(store.get("c/0", ByteRange(0, 5))) == b"chunk"


def test_persistent_failures_raise_store_error_after_exactly_the_configured_attempts(scripted: ScriptedGCS) -> None:
    store = scripted_store(scripted)
    scripted.default = "503"
    with asyncarr.config.set(retries=3):
        with pytest.raises(
            StoreError, match=r"gs://bkt/data/c/0: get failed after 4 attempts: .*scripted 503"
        ) as caught:
            run(store.get("c/0"))
    assert not isinstance(caught.value, AccessDeniedError) and caught.value.__cause__ is not None
    assert scripted.count() == 4  # gcsfs's own retry loop is off: every attempt is ours
    scripted.default = "ok"
    with asyncarr.config.set(retries=0):
        with pytest.raises(StoreError, match="gs://nowhere-bucket: list failed"):
            run(keys_of(GCSStore("nowhere-bucket", endpoint_url="http://127.0.0.1:9", token="anon").list_dir("")))


def test_listings_follow_page_tokens_across_pages_of_keys_and_prefixes(scripted: ScriptedGCS) -> None:
    scripted.page_size = 7
    keys = [f"k{i:02d}" for i in range(23)] + [f"d{i:02d}/x" for i in range(12)] + ["d00/y"]
    scripted.objects.update({f"data/{key}": b"" for key in keys})
    scripted.objects["outside/k"] = b""
    store = scripted_store(scripted)
    assert run(keys_of(store.list_prefix(""))) == sorted(keys)
    assert run(keys_of(store.list_dir(""))) == sorted(
        [f"k{i:02d}" for i in range(23)] + [f"d{i:02d}" for i in range(12)]
    )
    assert scripted.count() == 6 + 5  # 36 keys in pages of 7; 35 names in pages of 7
    run(store.delete_prefix("d00"))
    assert run(keys_of(store.list_prefix("d00"))) == []
    assert len(scripted.objects) == len(keys) - 2 + 1


def test_servers_that_ignore_range_or_refuse_ranges_past_the_end_read_like_slicing(scripted: ScriptedGCS) -> None:
    value = bytes(range(100))
    scripted.objects["data/v"] = value
    store = scripted_store(scripted)
    for honour_range in (True, False):
        scripted.honour_range = honour_range
        for byte_range in (ByteRange(10, 5), ByteRange(95), ByteRange(200), ByteRange(100, 3), ByteRange.last(3)):
            assert run(store.get("v", byte_range)) == byte_range.apply(value), (honour_range, byte_range)


# -- sessions close cleanly -------------------------------------------------------------------------

_CLOSE_SCRIPT = """
import asyncio, gc, sys
import asyncarr, asyncarr.sync as za
from asyncarr.stores.gcs import GCSStore
emulator, scripted, bucket = sys.argv[1:4]
store = GCSStore(bucket, "p", endpoint_url=emulator, token="anon", max_connections=4)
keep_alive = GCSStore("bkt", "data", endpoint_url=scripted, token="anon")
asyncio.run(store.set("k", b"v"))                       # never closed: the loop's shutdown closes it
asyncio.run(keep_alive.exists("v"))                     # a keep-alive connection, never closed either
async def closes():
    assert await store.get("k") == b"v" and await keep_alive.get("v") == b"scripted"
    await store.close(); await keep_alive.close()
asyncio.run(closes())
with asyncarr.config.set(concurrency=4):
    z = za.open_array(f"gs://{bucket}/arr", mode="w", shape=(8,), chunks=(4,), dtype="i2",
                      storage_options={"endpoint_url": emulator, "token": "anon"})
    z[:] = 7
unused = GCSStore(bucket, endpoint_url=emulator, token="anon")
left_open = GCSStore(bucket, "p", endpoint_url=emulator, token="anon", max_connections=4)
za._run(left_open.get("k"))                             # open on the facade's loop at exit: atexit closes it
del store, keep_alive
gc.collect()
print("done")
"""


def test_sessions_close_without_unclosed_warnings_in_every_lifecycle(tmp_path: Path, scripted: ScriptedGCS) -> None:
    scripted.objects["data/v"] = b"scripted"
    bucket = emulator.make_store(tmp_path).bucket
    child = subprocess.run(
        [
            sys.executable,
            "-X",
            "dev",
            "-W",
            "error",
            "-c",
            _CLOSE_SCRIPT,
            emulator.gcs_endpoint(),
            scripted.url,
            bucket,
        ],
        capture_output=True,
        cwd=ROOT,
        timeout=60,
    )
    stderr = child.stderr.decode()
    assert child.returncode == 0, stderr
    assert child.stdout.decode().strip() == "done"
    for warning in ("Unclosed", "unclosed", "Exception ignored", "Task was destroyed", "ResourceWarning"):
        assert warning not in stderr, stderr
    assert run(GCSStore(bucket, "arr", max_connections=4, **emulator.store_options()).exists("c/0")) is True


def test_close_is_idempotent_and_a_closed_store_reopens_on_next_use(tmp_path: Path) -> None:
    store = fresh_store(tmp_path)

    async def scenario() -> None:
        await store.set("k", b"1")
        await store.close()
        await store.close()
        assert await store.get("k") == b"1"
        await asyncio.gather(*(store.exists("k") for _ in range(20)))  # one client, opened once
        await store.close()

    run(scenario())
    assert run(store.get("k")) == b"1"  # a new event loop gets its own client
