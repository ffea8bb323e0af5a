"""The fault-injecting proxy forwards faithfully, fails as asked and counts; HTTPStore's retries hide its faults."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from emulators import s3 as s3_emulator
from emulators.http import request_log, serve_directory
from emulators.proxy import FAULT_KINDS, FaultProxy

from asyncarr import config
from asyncarr.errors import AccessDeniedError, StoreError
from asyncarr.stores import ByteRange
from asyncarr.stores.http import HTTPStore

FILES = {f"arr/c/{i}": os.urandom(37 * i + 1) for i in range(120)} | {"zarr.json": b'{"zarr_format": 3}'}


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


@pytest.fixture
def served(tmp_path: Path) -> str:
    for key, value in FILES.items():
        (tmp_path / key).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / key).write_bytes(value)
    return serve_directory(tmp_path)


async def read_all(url: str, requests: list[tuple[str, ByteRange | None]]) -> list[bytes | None]:
    async with HTTPStore(url) as store:
        return await store.get_many(requests)


async def raw_requests(url: str, requests: list[tuple[str, str, dict[str, str]]]) -> list[tuple[int, bytes, Any]]:
    """(status, body, headers) of each request, sent one after another, or (-1, b"", error) if it failed."""
    answers = []
    async with aiohttp.ClientSession(auto_decompress=False) as session:
        for method, path, headers in requests:
            try:
                async with session.request(method, url + path, headers=headers) as response:
                    answers.append((response.status, await response.read(), dict(response.headers)))
            except aiohttp.ClientError as exc:
                answers.append((-1, b"", type(exc).__name__))
    return answers


def test_failure_free_proxy_passes_requests_and_responses_through_unchanged(served: str) -> None:
    requests = [
        ("GET", "/arr/c/7", {"Authorization": "Bearer abc", "X-Amz-Date": "20260101T000000Z"}),
        ("GET", "/arr/c/9", {"Range": "bytes=3-10"}),
        ("GET", "/arr/c/9?x-id=GetObject&a=%2F", {"Range": "bytes=-5"}),
        ("HEAD", "/arr/c/100", {}),
        ("GET", "/missing", {}),
        ("PUT", "/upload", {"Content-Type": "application/x-test"}),
    ]
    direct = run(raw_requests(served, requests))
    before = len(request_log(served))
    with FaultProxy(served) as proxy:
        assert proxy.url.endswith(served[served.rindex("/") :])
        through = run(raw_requests(proxy.url, requests))
    counts = proxy.counts()  # after stop(), which lets handlers still finishing their responses end
    drop = {"Date", "Server"}
    assert [(s, b, {k: v for k, v in h.items() if k not in drop}) for s, b, h in through] == [
        (s, b, {k: v for k, v in h.items() if k not in drop}) for s, b, h in direct
    ]
    assert [status for status, _, _ in through] == [200, 206, 206, 200, 404, 405]
    assert counts["requests"] == 6 and counts["faults"] == {}
    assert counts["requests_by_method"] == {"GET": 4, "HEAD": 1, "PUT": 1}
    assert counts["in_flight"] == 0
    proxied = request_log(served)[before:]
    assert proxied[0].headers["Authorization"] == "Bearer abc" and proxied[0].headers["X-Amz-Date"].startswith("2026")
    assert proxied[0].headers["Host"] == proxy.url.split("/")[2], "the Host header is forwarded as the client sent it"
    assert proxied[2].key == "arr/c/9" and proxied[5].headers["Content-Type"] == "application/x-test"


def test_forwarded_request_bodies_arrive_byte_for_byte(served: str) -> None:
    body = os.urandom(300_000)

    async def put() -> int:
        async with aiohttp.ClientSession() as session, session.put(proxy.url + "/upload", data=body) as response:
            return response.status

    with FaultProxy(served) as proxy:
        assert run(put()) == 405
    assert request_log(served)[-1].body == body


def test_sigv4_signed_s3_requests_verify_upstream_through_the_proxy() -> None:
    moto = s3_emulator.authenticating_moto()
    bucket = moto.new_bucket()
    payload = os.urandom(50_000)
    with FaultProxy(moto.endpoint) as proxy:
        signed = s3_emulator.client(proxy.url, moto.key, moto.secret)
        signed.put_object(Bucket=bucket, Key="k/object", Body=payload)
        assert signed.get_object(Bucket=bucket, Key="k/object", Range="bytes=10-19")["Body"].read() == payload[10:20]
        assert [o["Key"] for o in signed.list_objects_v2(Bucket=bucket)["Contents"]] == ["k/object"]
        forged = s3_emulator.client(proxy.url, moto.key, "not-the-secret")
        with pytest.raises(forged.exceptions.ClientError, match="SignatureDoesNotMatch"):
            forged.get_object(Bucket=bucket, Key="k/object")
        assert proxy.counts()["requests_by_method"] == {"PUT": 1, "GET": 3}


def test_flaky_proxy_still_lets_the_http_store_read_every_key_exactly(served: str) -> None:
    requests = [(key, None) for key in FILES] + [(key, ByteRange(2, 30)) for key in FILES]
    requests += [(key, ByteRange.last(9)) for key in list(FILES)[:40]]
    expected = [r.apply(FILES[key]) if r else FILES[key] for key, r in requests]
    with FaultProxy(served, failure_rate=0.3, failures=FAULT_KINDS, seed=1) as proxy:
        assert run(read_all(proxy.url, requests)) == expected
        counts = proxy.counts()
    assert set(counts["faults"]) == set(FAULT_KINDS)
    assert counts["requests"] == len(requests) + sum(counts["faults"].values()), "one retry per injected fault"


def test_flaky_proxy_still_reads_missing_keys_as_none(served: str) -> None:
    # Not counted like the above: a truncated 404 is still a complete answer (the status line arrived).
    requests: list[tuple[str, ByteRange | None]] = [(f"missing/{i}", None) for i in range(30)] + [("zarr.json", None)]
    with FaultProxy(served, failure_rate=0.3, failures=FAULT_KINDS, seed=2) as proxy:
        assert run(read_all(proxy.url, requests)) == [None] * 30 + [FILES["zarr.json"]]
    assert sum(proxy.counts()["faults"].values()) > 0


def test_requests_of_one_call_are_in_flight_together(served: str) -> None:
    keys = [(f"arr/c/{i}", None) for i in range(32)]
    with FaultProxy(served, latency=0.05) as proxy:  # each request held long enough for all to meet
        assert run(read_all(proxy.url, keys)) == [FILES[key] for key, _ in keys]
        counts = proxy.counts()
    assert counts["max_in_flight"] == 32 and counts["requests"] == 32


def test_requests_queued_behind_the_concurrency_limit_do_not_time_out(served: str) -> None:
    keys = [(f"arr/c/{i}", None) for i in range(10)]
    with FaultProxy(served, latency=0.2) as proxy, config.set(concurrency=2, timeout=0.5, retries=0):
        assert run(read_all(proxy.url, keys)) == [FILES[key] for key, _ in keys]
        counts = proxy.counts()
    assert counts["max_in_flight"] == 2 and counts["requests"] == 10


@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_always_failing_proxy_makes_reads_raise_store_error_after_exactly_the_configured_attempts(
    served: str, kind: str
) -> None:
    with FaultProxy(served, failure_rate=1.0, failures=(kind,)) as proxy, config.set(retries=2):
        with pytest.raises(StoreError, match=f"{proxy.url}/arr/c/3: GET failed after 3 attempts") as caught:
            run(read_all(proxy.url, [("arr/c/3", None)]))
        counts = proxy.counts()
    assert not isinstance(caught.value, AccessDeniedError)
    assert caught.value.__cause__ is not None
    assert counts["requests"] == 3 and counts["faults"] == {kind: 3}


def test_proxies_with_one_seed_fail_the_same_requests(served: str) -> None:
    requests = [("GET", f"/arr/c/{i}", {}) for i in range(40)]
    outcomes = []
    for _ in range(2):
        with FaultProxy(served, failure_rate=0.5, failures=("503", "500"), seed=7) as proxy:
            outcomes.append([status for status, _, _ in run(raw_requests(proxy.url, requests))])
    assert outcomes[0] == outcomes[1]
    assert {200, 500, 503} == set(outcomes[0])


def test_counters_reset_and_settings_change_while_running(served: str) -> None:
    with FaultProxy(served) as proxy:
        run(raw_requests(proxy.url, [("GET", "/zarr.json", {})]))
        proxy.reset_counters()
        assert proxy.counts()["requests"] == 0
        proxy.failure_rate = 1.0
        [(status, body, _)] = run(raw_requests(proxy.url, [("GET", "/zarr.json", {})]))
    assert status in (500, 503, -1) and b"zarr_format" not in body
    with pytest.raises(ValueError, match="failures must be"):
        FaultProxy(served, failures=("timeout",))
