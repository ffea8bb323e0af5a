"""A store's limit of requests in flight adapts to throttling (AIMD): halved on 503 SlowDown, regrown on success."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest
from emulators import s3 as s3_emulator
from emulators.proxy import FaultProxy

import asyncarr.sync as za
from asyncarr import config
from asyncarr.stores import MemoryStore
from asyncarr.stores.limiter import AdaptiveLimiter
from asyncarr.stores.s3 import S3Store


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def test_a_throttling_answer_halves_the_limit_once_per_window_and_never_below_one() -> None:
    limiter = AdaptiveLimiter(64)

    async def scenario() -> list[int]:
        limits = []
        for _ in range(64):
            await limiter.acquire()
        assert limiter.throttled() and limiter.limit == 32
        # Answers to the other requests already in flight belong to the same window: no further cut.
        assert not any(limiter.throttled() for _ in range(40)) and limiter.limit == 32
        for _ in range(64):
            limiter.release()
        while limiter.limit > 1:
            for _ in range(limiter.limit):  # a window's worth of requests let in since the last cut
                await limiter.acquire()
                limiter.release()
            assert limiter.throttled()
            limits.append(limiter.limit)
        for _ in range(3):
            await limiter.acquire()
            limiter.release()
            limiter.throttled()
        return limits

    assert run(scenario()) == [16, 8, 4, 2, 1]
    assert limiter.limit == 1 and limiter.lowest == 1 and limiter.cuts == 6


def test_successes_grow_the_limit_by_one_per_window_up_to_the_ceiling() -> None:
    limiter = AdaptiveLimiter(8)

    async def scenario() -> list[int]:
        await limiter.acquire()
        limiter.throttled()
        limiter.release()
        seen = [limiter.limit]
        for _ in range(200):
            limiter.succeeded()
            if limiter.limit != seen[-1]:
                seen.append(limiter.limit)
        return seen

    assert run(scenario()) == [4, 5, 6, 7, 8]
    assert limiter.lowest == 4


def test_a_cut_limit_admits_no_more_requests_than_it_says_and_a_raised_one_lets_waiters_in() -> None:
    limiter = AdaptiveLimiter(4)
    most = 0

    async def request(index: int) -> None:
        nonlocal most
        async with limiter:
            most = max(most, limiter.in_flight)
            if index == 0:
                limiter.throttled()  # 4 -> 2 while the first four are in flight
            await asyncio.sleep(0.001)

    async def scenario() -> None:
        nonlocal most
        await asyncio.gather(*(request(i) for i in range(4)))
        most = 0
        await asyncio.gather(*(request(i + 1) for i in range(20)))

    run(scenario())
    assert most <= 2 and limiter.in_flight == 0


def test_cancelled_waiters_give_their_slot_back() -> None:
    limiter = AdaptiveLimiter(1)

    async def scenario() -> int:
        await limiter.acquire()
        waiting = asyncio.ensure_future(limiter.acquire())
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        limiter.release()
        async with limiter:
            return limiter.in_flight

    assert run(scenario()) == 1 and limiter.in_flight == 0


def test_with_adaptive_concurrency_off_the_limit_stays_fixed() -> None:
    limiter = AdaptiveLimiter(16)
    with config.set(adaptive_concurrency=False):
        assert not limiter.throttled()
    assert limiter.limit == 16 and limiter.lowest == 16


def test_store_limiter_is_adaptive_and_shared_by_handles_on_one_location() -> None:
    async def limiters() -> tuple[Any, Any]:
        return MemoryStore(name="aimd-shared").limiter, MemoryStore(name="aimd-shared").limiter

    one, two = run(limiters())
    assert one is two, "two handles on one location share one limiter"
    assert isinstance(one, AdaptiveLimiter) and one.limit == config.get("concurrency")


def _read_through_throttling_proxy(bucket: str, adaptive: bool, in_flight: int) -> tuple[np.ndarray, Any, Any]:
    """Read the array ``arr`` of ``bucket`` through a proxy that throttles above ``in_flight`` requests."""
    # Enough retries that even the fixed limit gets every chunk: the point is how many answers were throttled.
    with (
        FaultProxy(s3_emulator.moto_endpoint(), throttle_above=in_flight) as proxy,
        config.set(adaptive_concurrency=adaptive, concurrency=64, retries=100, request_deadline=300.0),
    ):
        # The two reads open the array through different locations, so each has a limiter of its own.
        prefix, path = ("", "arr") if adaptive else ("arr", "")
        store = S3Store(bucket, prefix, **{**s3_emulator.store_options(), "endpoint_url": proxy.url})
        read = za.open_array(store, path=path, mode="r")[:]
        counts = proxy.counts()
    return read, counts, store.metrics()


def test_throttling_cuts_requests_in_flight_so_few_answers_are_throttled_compared_with_a_fixed_limit() -> None:
    data = np.arange(400 * 8, dtype="i8")
    bucket = s3_emulator.new_bucket()
    writer = S3Store(bucket, **s3_emulator.store_options())
    za.open_array(writer, path="arr", mode="w", shape=data.shape, chunks=(8,), dtype=data.dtype)[:] = data
    read, adaptive, adaptive_metrics = _read_through_throttling_proxy(bucket, True, in_flight=8)
    fixed_read, fixed, fixed_metrics = _read_through_throttling_proxy(bucket, False, in_flight=8)
    assert np.array_equal(read, data) and np.array_equal(fixed_read, data)
    # The store's own counts agree with what the server answered.
    assert adaptive_metrics.throttled == adaptive["throttled"] and fixed_metrics.throttled == fixed["throttled"]
    assert adaptive_metrics.total_requests == adaptive["requests"]
    # A fixed limit of 64 keeps provoking throttling answers; the adaptive limit soon stops doing so.
    assert fixed["throttled"] > 400
    assert adaptive["throttled"] < fixed["throttled"] / 3
    # The limit came down to about what the server serves, and only the adaptive one moved.
    assert adaptive_metrics.concurrency_limit_min is not None and adaptive_metrics.concurrency_limit_min <= 8
    assert adaptive_metrics.concurrency_limit is not None and adaptive_metrics.concurrency_limit < 64
    assert fixed_metrics.concurrency_limit == fixed_metrics.concurrency_limit_min == 64


def test_drivers_classify_throttling_answers_apart_from_other_server_errors() -> None:
    from azure.core.exceptions import HttpResponseError
    from gcsfs.retry import HttpError

    from asyncarr.stores import azure, gcs, http, s3_errors
    from asyncarr.stores.retry import Failure

    s3 = s3_errors.S3ResponseError
    assert s3_errors.classify(s3(503, "SlowDown", "Please reduce your request rate.", "b")) is Failure.THROTTLED
    assert s3_errors.classify(s3(429, "429", "", "b")) is Failure.THROTTLED
    assert s3_errors.classify(s3(503, "ServiceUnavailable", "", "b")) is Failure.TRANSIENT
    assert s3_errors.classify(s3(500, "InternalError", "", "b")) is Failure.TRANSIENT
    assert http._classify(http._HTTPStatusError(429, "Too Many Requests")) is Failure.THROTTLED
    assert http._classify(http._HTTPStatusError(503, "Service Unavailable")) is Failure.TRANSIENT
    assert gcs._classify(HttpError({"code": 429, "message": "rate limit"})) is Failure.THROTTLED
    assert gcs._classify(HttpError({"code": 503, "message": "backend"})) is Failure.TRANSIENT

    def azure_error(status: int, code: str) -> HttpResponseError:
        error = HttpResponseError(message=code)
        error.status_code, error.error_code = status, code
        return error

    assert azure._failure(azure_error(503, "ServerBusy"), False) is Failure.THROTTLED
    assert azure._failure(azure_error(429, "TooManyRequests"), False) is Failure.THROTTLED
    assert azure._failure(azure_error(500, "InternalError"), False) is Failure.TRANSIENT
