"""S3Store against a real moto server: ranges, paging, anonymous access, errors, credentials, lifecycle.

The behaviour every store shares is in tests/test_stores.py (the conformance suite, which
runs on S3 through tests/emulators/s3.py); this module holds what is specific to S3.
"""

from __future__ import annotations

import asyncio
import logging
import os
import pickle
import subprocess
import sys
import textwrap
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from emulators import s3 as emulator
from emulators.proxy import FaultProxy

import asyncarr
import asyncarr.sync as za
from asyncarr.errors import AccessDeniedError, ReadOnlyError, StoreError
from asyncarr.stores import ByteRange, from_url
from asyncarr.stores.s3 import S3Store

REPO = Path(__file__).resolve().parents[1]
SECRET = "Sup3r-Secret-Do-Not-Print-4f9c1e"
PUBLIC_HINT = 'The bucket may be public: pass storage_options={"anon": True}.'
PRIVATE_HINT = "The bucket is not public: pass credentials (key/secret or profile)."


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


async def collect(keys: AsyncIterator[str]) -> list[str]:
    return sorted([key async for key in keys])


def anonymous(bucket: str, prefix: str = "") -> S3Store:
    return S3Store(bucket, prefix, anon=True, endpoint_url=emulator.moto_endpoint(), region=emulator.REGION)


@pytest.fixture
def store(tmp_path: Path) -> Any:
    created = emulator.make_store(tmp_path)
    yield created
    run(created.close())


# -- reading and writing ------------------------------------------------------------------------


def test_values_round_trip_byte_for_byte(store: S3Store) -> None:
    values = {"zarr.json": b"{}", "a/c/0/0": os.urandom(3 * 1024 * 1024 + 17), "empty": b"", "x/y/z": b"\x00" * 10}

    async def round_trip() -> list[bytes | None]:
        await store.set_many(list(values.items()))
        return await store.get_many([(key, None) for key in values])

    assert run(round_trip()) == list(values.values())
    assert run(store.getsize("a/c/0/0")) == len(values["a/c/0/0"])
    run(store.set("memoryview", memoryview(b"abc")))  # any buffer is accepted
    assert run(store.get("memoryview")) == b"abc"


def test_byte_ranges_match_python_slicing_including_suffix_and_past_the_end(store: S3Store) -> None:
    value = os.urandom(5000)
    n = len(value)
    cases = [
        (ByteRange(0, 10), value[0:10]),
        (ByteRange(4990, 100), value[4990:]),
        (ByteRange(17), value[17:]),
        (ByteRange(0), value),
        (ByteRange(n - 1, 1), value[-1:]),
        (ByteRange(n), b""),
        (ByteRange(n + 10, 5), b""),
        (ByteRange(n + 10), b""),
        (ByteRange(3, 0), b""),
        (ByteRange.last(1), value[-1:]),
        (ByteRange.last(100), value[-100:]),
        (ByteRange.last(n), value),
        (ByteRange.last(n + 1000), value),
        (ByteRange.last(0), b""),
    ]
    run(store.set_many([("v", value), ("empty", b"")]))
    requests = [(key, byte_range) for byte_range, _ in cases for key in ("v", "empty", "missing")]
    expected = [result for _, reference in cases for result in (reference, b"", None)]
    assert run(store.get_many(requests)) == expected


def test_more_than_1000_keys_are_listed_across_pages_and_deleted_in_batches(store: S3Store) -> None:
    files = [f"many/k{i:04d}" for i in range(1000)]
    directories = [f"many/dir{i:03d}/x" for i in range(200)]
    emulator.seed_objects(store.bucket, {key: b"" for key in [*files, *directories, "other"]})

    assert run(collect(store.list_prefix("many"))) == sorted(files + directories)
    expected_children = sorted([key.split("/")[1] for key in files + directories])
    assert run(collect(store.list_dir("many"))) == expected_children
    assert len(run(collect(store.list_dir("many")))) == 1200  # each child once, across two pages

    run(store.delete_prefix("many"))
    assert run(collect(store.list_prefix(""))) == ["other"]


def test_a_store_with_a_prefix_sees_only_the_objects_below_it(store: S3Store) -> None:
    inner = S3Store(store.bucket, "/outer/inner/", **emulator.store_options())
    assert inner.location == f"s3://{store.bucket}/outer/inner"
    assert inner.key_url("a/b") == f"s3://{store.bucket}/outer/inner/a/b"
    run(store.set_many([("outer/inner/a/b", b"1"), ("outer/inner/c", b"2"), ("outer/innermost", b"3")]))

    assert run(collect(inner.list_prefix(""))) == ["a/b", "c"]
    assert run(collect(inner.list_dir(""))) == ["a", "c"]
    assert run(inner.get("a/b")) == b"1"
    run(inner.delete_prefix(""))
    assert run(collect(store.list_prefix(""))) == ["outer/innermost"]
    run(inner.close())


def test_folder_marker_objects_made_by_other_tools_are_not_listed_as_keys(store: S3Store) -> None:
    emulator.client().put_object(Bucket=store.bucket, Key="folder/", Body=b"")
    emulator.client().put_object(Bucket=store.bucket, Key="folder/value", Body=b"v")
    assert run(collect(store.list_prefix(""))) == ["folder/value"]
    assert run(collect(store.list_dir("folder"))) == ["value"]
    assert run(collect(store.list_dir(""))) == ["folder"]


def test_read_only_store_refuses_writes_before_sending_anything(store: S3Store) -> None:
    run(store.set("k", b"v"))
    read_only = emulator.reopen_read_only(store)
    for attempt in (read_only.set("k", b"x"), read_only.delete("k"), read_only.delete_prefix("")):
        with pytest.raises(ReadOnlyError, match=rf"s3://{store.bucket}: the store is read-only"):
            run(attempt)
    assert run(read_only.get("k")) == b"v"
    assert "read_only=True" in repr(read_only)


def test_one_store_serves_event_loops_in_several_threads_at_once(store: S3Store) -> None:
    values = {f"k/{i}": os.urandom(64) for i in range(40)}
    run(store.set_many(list(values.items())))
    results: dict[int, list[bytes | None]] = {}

    def read_in_own_loop(index: int) -> None:
        results[index] = run(store.get_many([(key, None) for key in values]))

    threads = [threading.Thread(target=read_in_own_loop, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == {i: list(values.values()) for i in range(3)}


# -- URLs and the facade ----------------------------------------------------------------------------


def test_s3_urls_open_the_bucket_and_prefix_and_unknown_options_are_named() -> None:
    opened = from_url("s3://some-bucket/a/b", read_only=True, anon=True, endpoint_url="http://127.0.0.1:9")
    assert isinstance(opened, S3Store)
    assert (opened.bucket, opened.prefix, opened.read_only, opened.anon) == ("some-bucket", "a/b", True, True)
    assert from_url("s3://some-bucket").location == "s3://some-bucket"
    with pytest.raises(TypeError, match=r"unknown storage_options .*: requester_pays, secret_key"):
        from_url("s3://some-bucket", secret_key="x", requester_pays=True)
    with pytest.raises(ValueError, match="anon=True sends unsigned requests"):
        from_url("s3://some-bucket", anon=True, key="k", secret="s")


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_sync_facade_round_trips_arrays_and_groups_through_s3_urls(zarr_format: int) -> None:
    url = f"s3://{emulator.new_bucket()}/data.zarr"
    options = emulator.store_options()
    data = np.arange(30 * 40, dtype="i4").reshape(30, 40)

    root = za.open_group(url, mode="w", zarr_format=zarr_format, storage_options=options)
    root.attrs["title"] = "on s3"
    array = root.create_dataset("g/x", data=data, chunks=(7, 9))
    array[3:5, :] = -1
    expected = data.copy()
    expected[3:5, :] = -1

    reopened = za.open_group(url, mode="r", storage_options=options)
    assert reopened.attrs["title"] == "on s3"
    assert reopened["g/x"].zarr_format == zarr_format
    np.testing.assert_array_equal(reopened["g/x"][:], expected)
    np.testing.assert_array_equal(
        za.open_array(f"{url}/g/x", mode="r", storage_options=options)[2:9, 5], expected[2:9, 5]
    )


def test_facade_opens_a_public_bucket_anonymously() -> None:
    bucket = emulator.new_bucket(public=True)
    data = np.linspace(0, 1, 100).reshape(10, 10)
    written = za.open_array(
        f"s3://{bucket}/arr",
        mode="w",
        shape=data.shape,
        chunks=(4, 4),
        dtype=data.dtype,
        storage_options=emulator.store_options(),
    )
    written[:] = data
    anonymous_options = {"anon": True, "endpoint_url": emulator.moto_endpoint(), "region": emulator.REGION}
    opened = za.open(f"s3://{bucket}/arr", mode="r", storage_options=anonymous_options)
    np.testing.assert_array_equal(opened[:], data)


def test_hierarchy_written_by_zarr_python_reads_through_an_s3_url(tmp_path: Path) -> None:
    data = np.random.default_rng(0).random((20, 12))
    group = zarr.open_group(tmp_path / "written.zarr", mode="w")
    group.create_array("arr", shape=data.shape, chunks=(8, 5), dtype=data.dtype)[:] = data
    bucket = emulator.new_bucket()
    emulator.upload_directory(tmp_path / "written.zarr", bucket, "copied.zarr")

    async def read() -> np.ndarray:
        node = await asyncarr.open_array(
            f"s3://{bucket}/copied.zarr", mode="r", path="arr", storage_options=emulator.store_options()
        )
        return await node.getitem(slice(None))

    np.testing.assert_array_equal(run(read()), data)


# -- access and errors --------------------------------------------------------------------------------


def test_anonymous_store_reads_a_public_bucket_with_no_credentials_anywhere(
    store: S3Store, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    bucket = emulator.new_bucket(public=True)
    emulator.client().put_object(Bucket=bucket, Key="dir/value", Body=b"public bytes")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))

    public = anonymous(bucket)
    assert run(public.get("dir/value")) == b"public bytes"
    assert run(public.get("dir/value", ByteRange.last(5))) == b"bytes"
    assert run(public.exists("dir/value")) is True
    assert run(collect(public.list_dir("dir"))) == ["value"]
    run(public.close())

    signed = S3Store(bucket, endpoint_url=emulator.moto_endpoint(), region=emulator.REGION)
    with pytest.raises(AccessDeniedError) as denied:
        run(signed.get("dir/value"))
    assert str(denied.value).startswith(f"s3://{bucket}/dir/value: access denied")
    assert str(denied.value).endswith(PUBLIC_HINT)
    run(signed.close())


def test_anonymous_read_of_a_private_bucket_is_access_denied_naming_the_url_and_what_to_do(store: S3Store) -> None:
    run(store.set("secret/value", b"private"))
    private = anonymous(store.bucket, "secret")
    for attempt in (private.get("value"), private.get("value", ByteRange(0, 3)), private.exists("value")):
        with pytest.raises(AccessDeniedError) as denied:
            run(attempt)
        assert isinstance(denied.value, PermissionError) and isinstance(denied.value, StoreError)
        assert str(denied.value).startswith(f"s3://{store.bucket}/secret/value: access denied (HTTP 403")
        assert str(denied.value).endswith(PRIVATE_HINT)
        assert denied.value.__cause__ is not None
    run(private.close())


def test_wrong_credentials_are_access_denied_and_never_shown() -> None:
    server = emulator.authenticating_moto()
    bucket = server.new_bucket()
    valid = S3Store(bucket, endpoint_url=server.endpoint, region=emulator.REGION, key=server.key, secret=server.secret)
    run(valid.set("k", b"v"))
    assert run(valid.get("k")) == b"v"
    run(valid.close())

    stores = {
        "SignatureDoesNotMatch": S3Store(bucket, endpoint_url=server.endpoint, key=server.key, secret=SECRET),
        "InvalidAccessKeyId": S3Store(bucket, endpoint_url=server.endpoint, key="AKIANOSUCHKEY", secret=SECRET),
    }
    for code, wrong in stores.items():
        for attempt in (wrong.get("k"), wrong.set("k", b"x"), collect(wrong.list_prefix(""))):
            with pytest.raises(AccessDeniedError, match=code) as denied:
                run(attempt)
            assert str(denied.value).endswith(PUBLIC_HINT)
            assert SECRET not in str(denied.value) and SECRET not in repr(denied.value)
        run(wrong.close())
    assert run(S3Store(bucket, endpoint_url=server.endpoint, key=server.key, secret=server.secret).get("k")) == b"v"


def test_a_missing_bucket_is_a_store_error_naming_the_bucket() -> None:
    missing = S3Store("asyncarr-no-such-bucket", "root", **emulator.store_options())
    attempts = {
        "get": missing.get("a/b"),
        "put": missing.set("a/b", b"x"),
        "list": collect(missing.list_prefix("a")),
    }
    for action, attempt in attempts.items():
        with pytest.raises(StoreError) as failed:
            run(attempt)
        assert not isinstance(failed.value, AccessDeniedError)
        message = str(failed.value)
        assert message.startswith(
            f"s3://asyncarr-no-such-bucket/root/a{'/b' if action != 'list' else ''}: {action} failed"
        )
        assert "the bucket 'asyncarr-no-such-bucket' does not exist" in message
    run(missing.close())


def test_credentials_never_appear_in_reprs_errors_or_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="asyncarr")
    secret_store = S3Store(
        "asyncarr-no-such-bucket", endpoint_url=emulator.moto_endpoint(), key="AKIDISTINCT", secret=SECRET, token=SECRET
    )
    assert SECRET not in repr(secret_store) and SECRET not in str(secret_store)
    assert SECRET not in repr(vars(secret_store))
    raised = []
    for attempt in (secret_store.get("k"), secret_store.set("k", b"v"), secret_store.exists("k")):
        try:
            run(attempt)
        except Exception as exc:
            raised.append(exc)
    assert [type(exc) for exc in raised] == [StoreError, StoreError]  # exists() is a HEAD: no body, no bucket error
    for exc in raised:
        chain: BaseException | None = exc
        while chain is not None:
            assert SECRET not in str(chain) and SECRET not in repr(chain)
            chain = chain.__cause__
    run(secret_store.close())
    assert caplog.records, "the store logs its client lifecycle at DEBUG"
    assert all(SECRET not in record.getMessage() for record in caplog.records)


# -- lifecycle ------------------------------------------------------------------------------------------


def test_pickled_store_reconnects_in_a_new_event_loop_and_in_another_process(store: S3Store) -> None:
    run(store.set("k", b"value"))
    payload = pickle.dumps(store)
    run(store.close())

    restored = pickle.loads(payload)
    assert repr(restored) == repr(store)
    assert run(restored.get("k")) == b"value"
    run(restored.close())

    script = textwrap.dedent(
        """
        import asyncio, pickle, sys
        store = pickle.loads(sys.stdin.buffer.read())
        async def main():
            await store.set("from/child", b"written by the child")
            data = await store.get("k")
            await store.close()
            return data
        sys.stdout.buffer.write(asyncio.run(main()))
        """
    )
    child = subprocess.run(
        [sys.executable, "-W", "error::ResourceWarning", "-c", script],
        input=payload,
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=60,
    )
    assert child.returncode == 0, child.stderr.decode()
    assert child.stdout == b"value"
    assert run(store.get("from/child")) == b"written by the child"


def test_arrays_opened_one_after_another_on_a_bucket_reuse_its_connections() -> None:
    bucket = emulator.new_bucket()
    with FaultProxy(emulator.moto_endpoint()) as proxy:
        options = {**emulator.store_options(), "endpoint_url": proxy.url}

        async def open_write_and_read(count: int) -> list[np.ndarray]:
            read = []
            for i in range(count):
                url = f"s3://{bucket}/array-{i}"
                z = await asyncarr.open_array(
                    url, mode="w", shape=(8,), chunks=(4,), dtype="i4", storage_options=options
                )
                await z.setitem(slice(None), np.arange(8) + i)
                reader = await asyncarr.open_array(url, mode="r", storage_options=options)
                read.append(await reader.getitem(slice(None)))
            return read

        read = run(open_write_and_read(5))
        counts = proxy.counts()
    assert all(np.array_equal(values, np.arange(8) + i) for i, values in enumerate(read))
    # The ten opens made ten stores; sharing their clients, they need no more connections than
    # one open has requests in flight at once (mode 'w': its metadata reads, 4, and the listing
    # of what it replaces). Unshared, they took 25.
    assert counts["requests"] > 30
    assert counts["connections"] <= 5, counts


def test_closing_one_of_two_stores_sharing_connections_leaves_the_other_its_pool() -> None:
    bucket = emulator.new_bucket()
    with FaultProxy(emulator.moto_endpoint()) as proxy:
        options = {**emulator.store_options(), "endpoint_url": proxy.url}
        first, second = S3Store(bucket, "first", **options), S3Store(bucket, "second", **options)

        async def scenario() -> tuple[bytes | None, int, int]:
            await first.set("k", b"1")
            await second.set("k", b"2")
            before = proxy.counts()["connections"]
            await first.close()  # second still holds the shared clients: nothing closes
            value = await second.get("k")
            after = proxy.counts()["connections"]
            await second.close()  # the last holder: now they close
            return value, before, after

        value, before, after = run(scenario())
        assert (value, after) == (b"2", before)
        # Closed stores reopen on their next use.
        assert run(first.get("k")) == b"1"
        run(first.close())


def test_a_store_with_other_credentials_never_borrows_a_valid_stores_clients() -> None:
    server = emulator.authenticating_moto()
    bucket = server.new_bucket()
    common = {"endpoint_url": server.endpoint, "region": emulator.REGION, "key": server.key}
    valid, wrong = S3Store(bucket, secret=server.secret, **common), S3Store(bucket, secret=SECRET, **common)

    async def scenario() -> None:
        await valid.set("k", b"v")
        assert await collect(valid.list_prefix("")) == ["k"]  # valid's aiobotocore client is open
        for attempt in (wrong.get("k"), collect(wrong.list_prefix("")), wrong.delete_prefix("")):
            with pytest.raises(AccessDeniedError, match="SignatureDoesNotMatch"):
                await attempt
        assert await valid.get("k") == b"v"
        await valid.close()
        await wrong.close()

    run(scenario())


def test_clients_close_cleanly_whether_closed_explicitly_by_asyncio_run_or_at_exit(store: S3Store) -> None:
    script = textwrap.dedent(
        """
        import asyncio, gc, sys
        import numpy as np
        import asyncarr.sync as za
        from asyncarr.stores.s3 import S3Store

        bucket, endpoint = sys.argv[1], sys.argv[2]
        options = dict(endpoint_url=endpoint, region="us-east-1", key="testing", secret="testing")

        async def use(store, key):
            await store.set(key, b"x")
            assert await store.get(key) == b"x"

        closed = S3Store(bucket, "closed", **options)
        async def use_and_close():
            await use(closed, "k")
            await closed.close()
        asyncio.run(use_and_close())

        never_closed = S3Store(bucket, "never-closed", **options)
        asyncio.run(use(never_closed, "k"))   # asyncio.run closes this loop's client
        asyncio.run(use(never_closed, "k2"))
        del never_closed

        dropped = S3Store(bucket, "dropped", **options)
        asyncio.run(use(dropped, "k"))
        del dropped
        gc.collect()

        facade = za.open_array(f"s3://{bucket}/facade", mode="w", shape=(4,), chunks=(2,), dtype="i4",
                               storage_options=options)
        facade[:] = np.arange(4)             # the facade's loop keeps this client until exit
        loop = asyncio.new_event_loop()      # a loop left open: its client is closed at exit
        loop.run_until_complete(use(S3Store(bucket, "manual-loop", **options), "k"))
        print("done")
        """
    )
    child = subprocess.run(
        [sys.executable, "-W", "error::ResourceWarning", "-c", script, store.bucket, emulator.moto_endpoint()],
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=60,
    )
    stderr = child.stderr.decode()
    assert child.returncode == 0, stderr
    assert child.stdout.decode().strip() == "done"
    # The script leaves its manual event loop open on purpose (asyncio warns about that loop itself).
    for leak in ("Unclosed client session", "Unclosed connector", "unclosed transport", "Task was destroyed"):
        assert leak not in stderr, stderr
    assert run(collect(store.list_prefix(""))) == sorted(
        [
            "closed/k",
            "never-closed/k",
            "never-closed/k2",
            "dropped/k",
            "facade/zarr.json",
            "facade/c/0",
            "facade/c/1",
            "manual-loop/k",
        ]
    )


# -- retries: asyncarr's loop is the only one ---------------------------------------------------------


def _s3_error(status: str, code: str, message: str) -> bytes:
    body = f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code><Message>{message}</Message></Error>'
    return (
        f"HTTP/1.1 {status}\r\nContent-Type: application/xml\r\nContent-Length: {len(body)}\r\n"
        f"Connection: close\r\n\r\n{body}"
    ).encode()


SLOW_DOWN = _s3_error("503 Slow Down", "SlowDown", "Please reduce your request rate.")
FORBIDDEN = _s3_error("403 Forbidden", "AccessDenied", "Access Denied")
SHORT_BODY = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\nonly 19 bytes here."
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello"


class ScriptedS3:
    """A real HTTP server on 127.0.0.1 answering each request with the next scripted response."""

    def __init__(self, responses: list[bytes]) -> None:
        self.responses = responses
        self.requests = 0

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._answer, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def __aexit__(self, *exc_info: object) -> None:
        self.server.close()
        await self.server.wait_closed()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            (int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")), 0
        )
        await reader.readexactly(length)
        response = self.responses[min(self.requests, len(self.responses) - 1)]
        self.requests += 1
        writer.write(response)
        await writer.drain()
        writer.close()


@pytest.mark.parametrize(
    ("responses", "outcome", "requests"),
    [
        ([SLOW_DOWN, SLOW_DOWN, OK], b"hello", 3),
        ([SLOW_DOWN], StoreError, 3),
        ([SHORT_BODY, OK], b"hello", 2),
        ([SHORT_BODY], StoreError, 3),
        ([FORBIDDEN], AccessDeniedError, 1),
    ],
    ids=["throttled-then-ok", "throttled-always", "short-body-then-ok", "short-body-always", "forbidden"],
)
def test_failures_are_retried_by_asyncarr_alone_as_configured(
    responses: list[bytes], outcome: Any, requests: int
) -> None:
    async def get_through(scripted: ScriptedS3) -> Any:
        async with scripted as endpoint:
            store = S3Store("bucket", endpoint_url=endpoint, region="us-east-1", key="k", secret=SECRET)
            try:
                return await store.get("key")
            finally:
                await store.close()

    scripted = ScriptedS3(responses)
    with asyncarr.config.set(retries=2, timeout=10):
        if isinstance(outcome, bytes):
            assert run(get_through(scripted)) == outcome
        else:
            with pytest.raises(outcome, match=r"^s3://bucket/key: ") as failed:
                run(get_through(scripted))
            assert type(failed.value) is outcome
            if requests > 1:
                assert f"after {requests} attempts" in str(failed.value)
    assert scripted.requests == requests
