"""Waits explain themselves: each retry is logged at INFO (URL, cause, attempt, delay), each request at DEBUG."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import Any

import pytest
from emulators import s3 as s3_emulator
from emulators.http import serve_directory
from emulators.proxy import FaultProxy

from asyncarr import config
from asyncarr.errors import StoreError
from asyncarr.stores import LocalStore
from asyncarr.stores.http import HTTPStore
from asyncarr.stores.s3 import S3Store

SECRET = "wJalrXUtnFEMI-not-a-real-secret-K7MDENG"


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


@pytest.fixture
def served(tmp_path: Path) -> str:
    (tmp_path / "data.zarr").mkdir()
    (tmp_path / "data.zarr" / "c0").write_bytes(os.urandom(64))
    return serve_directory(tmp_path) + "/data.zarr"


def retry_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "asyncarr.stores.retry"]


def test_every_retry_is_logged_at_info_with_url_cause_attempt_and_delay(
    served: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="asyncarr")
    with FaultProxy(served, failure_rate=1.0, failures=("503",)) as proxy, config.set(retries=3):
        store = HTTPStore(proxy.url)

        async def read() -> None:
            async with store:
                await store.get("c0")

        with pytest.raises(StoreError, match="after 4 attempts"):
            run(read())
    records = retry_records(caplog)
    assert [r.levelno for r in records] == [logging.INFO] * 3, "one line per retry, none for the final failure"
    assert [r.attempt for r in records] == [1, 2, 3]  # type: ignore[attr-defined]
    for record in records:
        message = record.getMessage()
        assert record.url == f"{proxy.url}/c0" and message.startswith(f"{proxy.url}/c0: GET attempt")  # type: ignore[attr-defined]
        assert "HTTP 503" in message and "retrying in" in message
        assert 0.0 <= record.delay <= 5.0 and f"{record.delay:.2f} s" in message  # type: ignore[attr-defined]
        assert record.cause == "transient"  # type: ignore[attr-defined]
    assert store.metrics().retries == len(records)


def test_retry_logs_of_s3_name_the_object_url_and_never_a_credential(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="asyncarr")
    bucket = s3_emulator.new_bucket()
    with FaultProxy(s3_emulator.moto_endpoint(), failure_rate=1.0, failures=("503",)) as proxy, config.set(retries=2):
        store = S3Store(bucket, "prefix", endpoint_url=proxy.url, key="AKIDLOGTEST", secret=SECRET, token=SECRET)

        async def read() -> None:
            async with store:
                await store.get("a/c/0")

        with pytest.raises(StoreError):
            run(read())
    records = retry_records(caplog)
    assert len(records) == 2
    assert all(r.getMessage().startswith(f"s3://{bucket}/prefix/a/c/0: get attempt") for r in records)
    assert all("SlowDown" in r.getMessage() and r.cause == "throttled" for r in records)  # type: ignore[attr-defined]
    everything = "\n".join(r.getMessage() for r in caplog.records)
    assert SECRET not in everything and "AKIDLOGTEST" not in everything and "Signature=" not in everything


def test_every_request_is_logged_at_debug_for_network_and_local_stores(
    served: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="asyncarr.stores.requests")
    store = HTTPStore(served)
    local = LocalStore(tmp_path / "local")

    async def work() -> None:
        async with store:
            assert await store.get("c0") is not None
            assert await store.get("missing") is None
        await local.set("k", b"1")
        assert local.get_sync("k") == b"1"

    run(work())
    lines = [r.getMessage() for r in caplog.records if r.name == "asyncarr.stores.requests"]
    assert any(line.startswith(f"get {served}/c0: ok in ") for line in lines), lines
    assert any(line.startswith(f"get {served}/missing: missing in ") for line in lines), lines
    assert any(line.startswith(f"set {local.location}/k: ok in ") for line in lines), lines
    assert any(line.startswith(f"get {local.location}/k: ok in ") for line in lines), lines
    assert all(r.levelno == logging.DEBUG for r in caplog.records if r.name == "asyncarr.stores.requests")


def test_nothing_is_logged_at_info_when_nothing_is_retried(served: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="asyncarr")

    async def read() -> bytes | None:
        async with HTTPStore(served) as store:
            return await store.get("c0")

    assert run(read()) is not None
    assert retry_records(caplog) == []


def test_signed_query_strings_and_userinfo_are_cut_from_logged_causes() -> None:
    from asyncarr.stores.retry import _redact

    text = "error for https://user:pw@host/key?X-Amz-Signature=abc&X-Amz-Credential=AKID%2F (boom)"
    assert _redact(text) == "error for https://host/key?<redacted> (boom)"
