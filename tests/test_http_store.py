"""HTTPStore against a real static file server on 127.0.0.1: reads, ranges, errors, Zarr data over HTTP."""

from __future__ import annotations

import asyncio
import base64
import os
import pickle
import socket
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from emulators.http import request_log, serve_directory

import asyncarr
import asyncarr.sync as za
from asyncarr import config
from asyncarr.errors import AccessDeniedError, ReadOnlyError, StoreError
from asyncarr.stores import ByteRange, from_url
from asyncarr.stores.http import HTTPStore

VALUE = bytes(range(256)) * 40
FILES = {"v": VALUE, "empty": b"", "a/b/c": b"nested", "with space/and%percent": b"quoted", "zarr.json": b"{}"}
TESTS_DIR = Path(__file__).resolve().parent


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def write_files(root: Path, files: dict[str, bytes]) -> Path:
    for key, value in files.items():
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_bytes(value)
    return root


@pytest.fixture
def served(tmp_path: Path) -> str:
    return serve_directory(write_files(tmp_path, FILES))


async def read_with(store: HTTPStore, operation: Any) -> Any:
    try:
        return await operation(store)
    finally:
        await store.close()


def expected_ranges(value: bytes) -> dict[ByteRange, bytes]:
    n = len(value)
    return {
        ByteRange(0, 10): value[0:10],
        ByteRange(1000, 1): value[1000:1001],
        ByteRange(5): value[5:],
        ByteRange(0): value,
        ByteRange(100, 0): b"",
        ByteRange(max(0, n - 3), 10): value[n - 3 :],
        ByteRange(n + 5, 4): b"",
        ByteRange(n): b"",
        ByteRange(n + 5): b"",
        ByteRange.last(7): value[-7:],
        ByteRange.last(0): b"",
        ByteRange.last(n + 100): value,
    }


# -- reads ------------------------------------------------------------------------------------


def test_get_returns_each_served_file_byte_for_byte(served: str) -> None:
    store = HTTPStore(served)
    got = run(read_with(store, lambda s: s.get_many([(key, None) for key in FILES])))
    assert got == list(FILES.values())


@pytest.mark.parametrize("ignore_range", [False, True], ids=["server-ranges", "server-ignores-range"])
def test_byte_ranges_match_python_slicing(tmp_path: Path, ignore_range: bool) -> None:
    url = serve_directory(write_files(tmp_path, FILES), ignore_range=ignore_range)
    for key in ("v", "empty"):
        expected = expected_ranges(FILES[key])
        got = run(read_with(HTTPStore(url), lambda s, key=key, e=expected: s.get_many([(key, r) for r in e])))
        assert dict(zip(expected, got, strict=True)) == expected, key


def test_ranges_are_sent_as_single_range_headers(served: str) -> None:
    requests = [ByteRange(2, 3), ByteRange(7), ByteRange.last(4), ByteRange(0), None]
    run(read_with(HTTPStore(served), lambda s: s.get_many([("v", r) for r in requests])))
    sent = sorted(str(record.headers.get("Range")) for record in request_log(served))
    assert sent == sorted(["bytes=2-4", "bytes=7-", "bytes=-4", "None", "None"])


def test_missing_keys_read_as_none_and_do_not_exist(served: str) -> None:
    async def probe(store: HTTPStore) -> list[Any]:
        return [
            await store.get("absent"),
            await store.get("absent", ByteRange(0, 4)),
            await store.get("absent", ByteRange.last(3)),
            await store.get("absent", ByteRange(3, 0)),
            await store.get("a/b"),  # a directory is not a key
            await store.exists("absent"),
            await store.exists("a/b"),
            await store.getsize("absent"),
        ]

    assert run(read_with(HTTPStore(served), probe)) == [None, None, None, None, None, False, False, None]


def test_exists_and_getsize_use_head(served: str) -> None:
    async def probe(store: HTTPStore) -> list[Any]:
        return [
            await store.exists("v"),
            await store.exists("empty"),
            await store.getsize("v"),
            await store.getsize("empty"),
        ]

    assert run(read_with(HTTPStore(served), probe)) == [True, True, len(VALUE), 0]
    assert {record.method for record in request_log(served)} == {"HEAD"}


@pytest.mark.parametrize("ignore_range", [False, True], ids=["server-ranges", "server-ignores-range"])
def test_exists_and_getsize_fall_back_to_a_one_byte_get_where_head_is_refused(
    tmp_path: Path, ignore_range: bool
) -> None:
    url = serve_directory(write_files(tmp_path, FILES), refuse_head=True, ignore_range=ignore_range)

    async def probe(store: HTTPStore) -> list[Any]:
        keys = ["v", "empty", "absent", "a/b/c"]
        return [await store.exists(k) for k in keys] + [await store.getsize(k) for k in keys]

    assert run(read_with(HTTPStore(url), probe)) == [True, True, False, True, len(VALUE), 0, None, 6]
    methods = [record.method for record in request_log(url)]
    assert methods.count("HEAD") == 1, "a refused HEAD is not asked again"
    assert {r.headers.get("Range") for r in request_log(url) if r.method == "GET"} == {"bytes=0-0"}


def test_unsafe_keys_are_rejected_before_any_request(served: str) -> None:
    store = HTTPStore(served)
    for key in ["../escape", "a/../../escape", "/etc/passwd", "a/./b"]:
        for operation in (store.get(key), store.exists(key), store.getsize(key)):
            with pytest.raises(ValueError, match="store key"):
                run(operation)
    assert request_log(served) == []


# -- read-only, listing, URLs -------------------------------------------------------------------


def test_writes_raise_read_only_error_and_read_only_false_is_refused(served: str) -> None:
    store = HTTPStore(served)
    for attempt in (
        store.set("v", b"x"),
        store.set_many([("new", b"x")]),
        store.delete("v"),
        store.delete_many(["v"]),
        store.delete_prefix(""),
    ):
        with pytest.raises(ReadOnlyError, match="HTTP stores are read-only"):
            run(attempt)
    assert all(record.method in ("GET", "HEAD") for record in request_log(served))
    with pytest.raises(ValueError, match="HTTP stores are read-only"):
        HTTPStore(served, read_only=False)


def test_listing_raises_store_error_instead_of_yielding_nothing(served: str) -> None:
    store = HTTPStore(served)
    assert store.supports_listing is False
    for listing in (store.list_prefix("a"), store.list_dir("")):
        with pytest.raises(StoreError, match=r"HTTP servers cannot list keys.*consolidated metadata"):
            run(anext(listing))


def test_from_url_gives_a_read_only_store_with_headers_and_refuses_unknown_options(tmp_path: Path) -> None:
    url = serve_directory(write_files(tmp_path, FILES), required_headers={"X-Token": "t0ken"})
    for read_only in (True, False):
        store = from_url(url, read_only=read_only, headers={"X-Token": "t0ken"})
        assert isinstance(store, HTTPStore) and store.read_only and store.location == url
        assert run(read_with(store, lambda s: s.get("v"))) == VALUE
    with pytest.raises(TypeError, match=r"unknown storage_options.*anon"):
        from_url(url, anon=True)
    with pytest.raises(ReadOnlyError, match="mode 'a' cannot be used"):
        za.open_array(url, mode="a", storage_options={"headers": {"X-Token": "t0ken"}})


def test_base_urls_must_be_plain_http_or_https() -> None:
    for bad in ("ftp://host/x", "http:///no-host"):
        with pytest.raises(ValueError, match="http:// or https://"):
            HTTPStore(bad)
    with pytest.raises(ValueError, match="cannot carry a query"):
        HTTPStore("https://host/data?sig=secret")
    assert HTTPStore("https://host/data/").location == "https://host/data"
    assert HTTPStore("https://host/data").key_url("a/zarr.json") == "https://host/data/a/zarr.json"


# -- errors and credentials -----------------------------------------------------------------------


def test_refused_requests_raise_access_denied_naming_the_url_never_the_header(tmp_path: Path) -> None:
    secret = "Bearer very-secret-token"
    url = serve_directory(write_files(tmp_path, FILES), required_headers={"Authorization": secret})
    with pytest.raises(AccessDeniedError, match=r"/v: access denied \(HTTP 401 Unauthorized\)\. If the server"):
        run(read_with(HTTPStore(url), lambda s: s.get("v")))
    wrong = HTTPStore(url, headers={"Authorization": "Bearer wrong-secret"})
    with pytest.raises(AccessDeniedError, match=r"HTTP 403 Forbidden\)\. The server did not accept") as caught:
        run(read_with(wrong, lambda s: s.exists("v")))
    assert "wrong-secret" not in str(caught.value) and "wrong-secret" not in repr(wrong)
    right = HTTPStore(url, headers={"Authorization": secret})
    assert "very-secret" not in repr(right) and "very-secret" not in str(right)
    assert run(read_with(right, lambda s: s.get("v"))) == VALUE


def test_user_and_password_in_the_url_become_basic_auth_and_stay_out_of_the_location(tmp_path: Path) -> None:
    basic = "Basic " + base64.b64encode(b"alice:pa55word").decode()
    url = serve_directory(write_files(tmp_path, FILES), required_headers={"Authorization": basic})
    store = HTTPStore(url.replace("http://", "http://alice:pa55word@"))
    assert store.location == url and "pa55word" not in repr(store)
    assert run(read_with(store, lambda s: s.get("a/b/c"))) == b"nested"


def test_unreachable_server_raises_store_error_naming_the_url_after_the_retries() -> None:
    with socket.socket() as probe:  # bind and release: nothing listens on this port afterwards
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    store = HTTPStore(f"http://127.0.0.1:{port}/data")
    with config.set(retries=2), pytest.raises(StoreError, match=rf":{port}/data/k: GET failed after 3 attempts"):
        run(read_with(store, lambda s: s.get("k")))


# -- lifecycle ----------------------------------------------------------------------------------


def test_pickled_store_reads_the_same_here_and_in_another_process(tmp_path: Path) -> None:
    url = serve_directory(write_files(tmp_path, FILES), required_headers={"X-Token": "abc"})
    store = HTTPStore(url, headers={"X-Token": "abc"})
    assert run(read_with(store, lambda s: s.get("v", ByteRange(3, 4)))) == VALUE[3:7]
    restored = pickle.loads(pickle.dumps(store))
    assert restored.location == store.location
    assert run(read_with(restored, lambda s: s.get("a/b/c"))) == b"nested"
    script = (
        "import asyncio, pickle, sys\n"
        "store = pickle.loads(sys.stdin.buffer.read())\n"
        "async def main():\n"
        "    try:\n"
        "        return await store.get('v')\n"
        "    finally:\n"
        "        await store.close()\n"
        "sys.stdout.buffer.write(asyncio.run(main()))\n"
    )
    child = subprocess.run(
        [sys.executable, "-W", "error", "-c", script], input=pickle.dumps(store), capture_output=True, env=_child_env()
    )
    assert child.returncode == 0 and child.stderr == b"", child.stderr.decode()
    assert child.stdout == VALUE


UNCLOSED_SCRIPT = """
import asyncio, gc, os, sys, warnings
warnings.filterwarnings("ignore", "This process .* is multi-threaded", DeprecationWarning)  # Python >= 3.12
import numpy as np
import asyncarr.sync as za
from asyncarr.stores.http import HTTPStore
url = sys.argv[1]

async def closed_explicitly():
    async with HTTPStore(url) as store:
        assert await store.get("v") is not None

async def left_open():  # asyncio.run shuts the loop down, which closes the session
    store = HTTPStore(url)
    assert await store.exists("v")

async def dropped_while_the_loop_runs():
    store = HTTPStore(url)
    await store.get("v")
    del store
    gc.collect()
    await asyncio.sleep(0.05)

asyncio.run(closed_explicitly())
asyncio.run(left_open())
asyncio.run(dropped_while_the_loop_runs())
store = HTTPStore(url)
for _ in range(3):
    asyncio.run(store.get("v"))  # a session per loop, each closed with its loop
z = za.open_array(url + "/arr", mode="r")  # the facade closes what it opened at exit
assert np.asarray(z[:]).sum() == 45
child = os.fork()  # the child inherits a live session of the facade's loop: it must leave it alone
if child == 0:
    assert np.asarray(z[3:]).sum() == 42
    gc.collect()
    sys.exit(0)
assert os.waitpid(child, 0)[1] == 0
assert np.asarray(z[:5]).sum() == 10
gc.collect()
print("done")
"""


def test_sessions_close_without_unclosed_warnings(tmp_path: Path) -> None:
    write_files(tmp_path, FILES)
    za.save(str(tmp_path / "arr"), np.arange(10))
    url = serve_directory(tmp_path)
    child = subprocess.run(
        [sys.executable, "-W", "error", "-c", UNCLOSED_SCRIPT, url],
        capture_output=True,
        env=_child_env(),
        timeout=60,
    )
    assert child.returncode == 0, child.stderr.decode()
    assert child.stdout == b"done\n"
    assert child.stderr == b"", child.stderr.decode()


def _child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS_DIR.parent), str(TESTS_DIR)])}


# -- Zarr data over HTTP ------------------------------------------------------------------------


def write_zarr_python_group(root: Path, zarr_format: int) -> dict[str, np.ndarray]:
    """A nested group written by zarr-python, with partly written arrays; returns path -> reference."""
    rng = np.random.default_rng(zarr_format)
    group = zarr.open_group(root, mode="w", zarr_format=zarr_format, attributes={"title": "served"})
    dense = rng.integers(-1000, 1000, size=(10, 7)).astype("i4")
    partial = np.full((20,), np.nan)
    partial[:9] = rng.random(9)
    scalars = np.arange(6, dtype="u2").reshape(2, 3)
    group.create_array("dense", shape=dense.shape, chunks=(4, 3), dtype=dense.dtype)[:] = dense
    sub = group.create_group("sub/deeper")
    sub.create_array("partial", shape=partial.shape, chunks=(6,), dtype="f8", fill_value=np.nan)[:9] = partial[:9]
    group.create_array("scalars", shape=scalars.shape, chunks=(1, 3), dtype="u2")[:] = scalars
    return {"dense": dense, "sub/deeper/partial": partial, "scalars": scalars}


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_consolidated_zarr_python_group_reads_over_http_without_listing(tmp_path: Path, zarr_format: int) -> None:
    references = write_zarr_python_group(tmp_path, zarr_format)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Consolidated metadata is currently not part", UserWarning)
        zarr.consolidate_metadata(str(tmp_path))
    url = serve_directory(tmp_path)
    group = za.open_group(url, mode="r")
    assert group.attrs["title"] == "served"
    assert sorted(group.group_keys()) == ["sub"] and sorted(group.array_keys()) == ["dense", "scalars"]
    for path, reference in references.items():
        np.testing.assert_array_equal(group[path][...], reference)
    assert "partial" in str(group.tree())
    np.testing.assert_array_equal(group["sub"]["deeper"]["partial"][2:8], references["sub/deeper/partial"][2:8])
    with pytest.raises(ReadOnlyError):
        za.open_group(url, mode="r+")


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_unconsolidated_array_reads_by_path_and_counts_chunks_by_probing(tmp_path: Path, zarr_format: int) -> None:
    references = write_zarr_python_group(tmp_path, zarr_format)
    url = serve_directory(tmp_path)
    array = za.open_array(url + "/sub/deeper/partial", mode="r")
    np.testing.assert_array_equal(array[:], references["sub/deeper/partial"])  # missing chunks: fill value
    reference = zarr.open_array(tmp_path / "sub" / "deeper" / "partial", mode="r")
    assert array.nchunks_initialized == reference.nchunks_initialized == 2
    dense = za.open_array(url, path="dense", mode="r")
    np.testing.assert_array_equal(dense[3:9, ::2], references["dense"][3:9, ::2])


def test_members_of_an_unconsolidated_group_raise_instead_of_looking_empty(tmp_path: Path) -> None:
    write_zarr_python_group(tmp_path, 3)
    group = za.open_group(serve_directory(tmp_path), mode="r")
    assert group.attrs["title"] == "served"
    with pytest.raises(StoreError, match="cannot list keys"):
        list(group.keys())


def test_async_api_reads_through_an_http_store(tmp_path: Path) -> None:
    references = write_zarr_python_group(tmp_path, 3)
    url = serve_directory(tmp_path)

    async def main() -> np.ndarray:
        async with HTTPStore(url) as store:
            array = await asyncarr.open_array(store, mode="r", path="dense")
            return await array.getitem(slice(None))

    np.testing.assert_array_equal(run(main()), references["dense"])
