"""Retrying store requests: exponential backoff with full jitter, a timeout per attempt, a deadline per request.

A store driver classifies each failure once, in its own error-mapping function, as one of
`Failure`'s kinds; `call_with_retries` does the rest and raises asyncarr's errors, naming
the user's URL of the key and chaining the transport's exception. It also records every
attempt in the store's metrics, tells the location's limiter about throttling answers and
successes (AIMD, see ``limiter.py``), logs each retry at INFO on ``asyncarr.stores.retry``
and each attempt at DEBUG on ``asyncarr.stores.requests``.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import random
import re
import socket
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, TypeVar

import aiohttp

from .. import config
from ..errors import AccessDeniedError, StoreError
from .counting import log_request, request_log

if TYPE_CHECKING:
    from .limiter import AdaptiveLimiter
    from .metrics import MetricsRecorder

__all__ = ["Failure", "ShortBodyError", "backoff_delay", "call_with_retries", "connect_failure"]

T = TypeVar("T")

retry_log = logging.getLogger("asyncarr.stores.retry")
"""One INFO line per retry: the URL, the cause, the attempt and the wait before the next one."""

BASE_DELAY = 0.05
"""Seconds before the first retry; doubled each attempt (before jitter)."""
MAX_DELAY = 5.0
"""No single wait between attempts is longer than this."""
MIN_ATTEMPT = 0.1
"""Seconds an attempt gets at least: none starts closer than this to the request deadline."""
_READS = frozenset({"get", "get_range"})


class Failure(enum.Enum):
    """How a driver classifies one failed attempt."""

    TRANSIENT = "transient"
    """500/502/503/504, timeouts, dropped connections, short bodies: retried ``config.retries`` times."""
    THROTTLED = "throttled"
    """429, 503 SlowDown and the like: retried, and the store's limit of requests in flight shrinks."""
    CONNECT = "connect"
    """A refused connection, a failed DNS lookup or a connect timeout: retried ``config.connect_retries`` times."""
    DENIED = "denied"
    """401/403: credentials missing or not allowed; retrying does not help."""
    FATAL = "fatal"
    """Anything else (400, 416, ...): a bug or a bad request; raised at once."""


_RETRIED = frozenset({Failure.TRANSIENT, Failure.THROTTLED, Failure.CONNECT})


class ShortBodyError(Exception):
    """A response body ended before the length its headers announced."""


def backoff_delay(attempt: int) -> float:
    """Seconds to wait before retry number ``attempt`` (1-based): full jitter over an exponential cap."""
    return random.uniform(0.0, min(MAX_DELAY, BASE_DELAY * 2 ** (attempt - 1)))


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and what it wraps: causes, contexts, SDKs' ``inner_exception`` and botocore's ``error``, each once."""
    seen: list[BaseException] = []
    pending: list[object] = [exc]
    while pending:
        current = pending.pop()
        if not isinstance(current, BaseException) or any(current is s for s in seen):
            continue
        seen.append(current)
        yield current
        kwargs = getattr(current, "kwargs", None)
        wrapped = kwargs.get("error") if isinstance(kwargs, dict) else None
        pending += [current.__cause__, current.__context__, getattr(current, "inner_exception", None), wrapped]


_CONNECT_ERRORS: tuple[type[BaseException], ...] = (
    aiohttp.ClientConnectorError,  # refused, unreachable, DNS (ClientConnectorDNSError)
    aiohttp.ConnectionTimeoutError,  # no connection within config.connect_timeout
    ConnectionRefusedError,
    socket.gaierror,
)
_NOT_CONNECT_ERRORS: tuple[type[BaseException], ...] = (
    aiohttp.ClientConnectorCertificateError,  # the server answered: its certificate is the problem
    aiohttp.ClientConnectorSSLError,
)

_BOTOCORE_CONNECT_ERRORS = frozenset({"EndpointConnectionError", "ConnectTimeoutError"})
"""botocore's names for the same (matched by name: botocore is imported only by the S3 driver)."""


def connect_failure(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it wraps) says no connection could be opened: refused, DNS, connect timeout."""
    for cause in _causes(exc):
        if isinstance(cause, _NOT_CONNECT_ERRORS):
            return False
        if isinstance(cause, _CONNECT_ERRORS) or type(cause).__name__ in _BOTOCORE_CONNECT_ERRORS:
            return True
    return False


async def call_with_retries(
    operation: Callable[[], Awaitable[T]],
    *,
    url: str,
    classify: Callable[[BaseException], Failure],
    action: str = "request",
    denied_hint: str = "",
    op: str | None = None,
    metrics: MetricsRecorder | None = None,
    limiter: AdaptiveLimiter | None = None,
    sent: int = 0,
) -> T:
    """Run ``operation`` until it succeeds, retrying transient failures ``config.retries`` times.

    Each attempt is bounded by ``config.timeout`` seconds (a timeout is transient) and all of
    them together by ``config.request_deadline``; failures to connect are retried only
    ``config.connect_retries`` times. Raises AccessDeniedError for refusals and StoreError
    otherwise, both naming ``url``. With ``metrics``, each attempt counts as one ``op``
    request (``sent`` bytes written when it succeeds); ``limiter`` hears of throttling and success.
    """
    settings = config.current()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + settings.request_deadline
    op = op or action
    attempt = 0  # retries so far
    connect_failures = 0
    while True:
        attempt_timeout = min(settings.timeout, max(0.0, deadline - loop.time()))
        started = time.perf_counter()
        cut_by_deadline = False
        try:
            async with asyncio.timeout(attempt_timeout):
                result = await operation()
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except TimeoutError as exc:
            failure, cause = Failure.TRANSIENT, exc
            cut_by_deadline = attempt_timeout < settings.timeout
        except ShortBodyError as exc:
            failure, cause = Failure.TRANSIENT, exc
        except Exception as exc:
            failure, cause = classify(exc), exc
        else:
            seconds = time.perf_counter() - started
            if metrics is not None:
                read = len(result) if op in _READS and isinstance(result, (bytes, bytearray)) else 0
                metrics.record(op, seconds, read=read, written=sent)
            if limiter is not None:
                limiter.succeeded()
            if request_log.isEnabledFor(logging.DEBUG):
                log_request(op, url, "missing" if op in _READS and result is None else "ok", seconds, attempt + 1)
            return result
        seconds = time.perf_counter() - started
        if request_log.isEnabledFor(logging.DEBUG):
            log_request(op, url, f"failed ({_describe(cause, attempt_timeout)})", seconds, attempt + 1)
        if metrics is not None:
            metrics.record(op, seconds)  # a failed attempt is a request too
            if failure is Failure.THROTTLED:
                metrics.record_throttled()
        if failure is Failure.THROTTLED and limiter is not None:
            limiter.throttled()
        if failure is Failure.CONNECT:
            connect_failures += 1
        if failure is Failure.DENIED:
            _count_failure(metrics)
            hint = f" {denied_hint}" if denied_hint else ""
            raise AccessDeniedError(f"{url}: access denied ({_describe(cause)}).{hint}") from cause
        tries = f" after {attempt + 1} attempts" if attempt else ""
        if cut_by_deadline:
            _count_failure(metrics)
            raise StoreError(_deadline_message(url, action, settings.request_deadline, attempt + 1, cause)) from cause
        if (
            failure not in _RETRIED
            or attempt >= settings.retries
            or (failure is Failure.CONNECT and connect_failures > settings.connect_retries)
        ):
            _count_failure(metrics)
            raise StoreError(f"{url}: {action} failed{tries}: {_describe(cause, attempt_timeout)}") from cause
        attempt += 1
        delay = backoff_delay(attempt)
        if loop.time() + delay + min(MIN_ATTEMPT, settings.timeout) >= deadline:  # no time left for an answer
            _count_failure(metrics)
            raise StoreError(_deadline_message(url, action, settings.request_deadline, attempt, cause)) from cause
        if metrics is not None:
            metrics.record_retry()
        retry_log.info(
            "%s: %s attempt %d failed (%s); retrying in %.2f s",
            url,
            action,
            attempt,
            _redact(_describe(cause, attempt_timeout)),
            delay,
            extra={"url": url, "attempt": attempt, "delay": delay, "cause": failure.value},
        )
        if failure is Failure.THROTTLED and limiter is not None:
            async with limiter.stepped_aside():  # others go first, within the limit the answer just cut
                await asyncio.sleep(delay)
        else:
            await asyncio.sleep(delay)


def _count_failure(metrics: MetricsRecorder | None) -> None:
    if metrics is not None:
        metrics.record_failure()


def _deadline_message(url: str, action: str, deadline: float, attempts: int, cause: BaseException) -> str:
    return (
        f"{url}: {action} failed: the request deadline of {deadline:g} s (config.request_deadline) was reached "
        f"after {attempts} attempt{'s' if attempts != 1 else ''}; the last failure: {_describe(cause)}"
    )


def _describe(exc: BaseException, attempt_timeout: float | None = None) -> str:
    text = str(exc) or type(exc).__name__
    if isinstance(exc, TimeoutError) and not str(exc):
        text = f"no answer within {attempt_timeout if attempt_timeout is not None else config.get('timeout'):g} s"
    return text


_QUERY = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^\s'\"?#]*)\?[^\s'\"#]*", re.IGNORECASE)
_USERINFO = re.compile(r"(\b[a-z][a-z0-9+.-]*://)[^\s/'\"@]+@", re.IGNORECASE)


def _redact(text: str) -> str:
    """``text`` without URL query strings (signed URLs carry tokens there) or user:password parts."""
    return _USERINFO.sub(r"\1", _QUERY.sub(r"\1?<redacted>", text))
