"""Retrying store requests: exponential backoff with full jitter, a timeout per attempt.

A store driver classifies each failure once, in its own error-mapping function, as one of
`Failure`'s kinds; `call_with_retries` does the rest and raises asyncarr's errors, naming
the user's URL of the key and chaining the transport's exception.
"""

from __future__ import annotations

import asyncio
import enum
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from .. import config
from ..errors import AccessDeniedError, StoreError

__all__ = ["Failure", "ShortBodyError", "backoff_delay", "call_with_retries"]

T = TypeVar("T")

BASE_DELAY = 0.05
"""Seconds before the first retry; doubled each attempt (before jitter)."""
MAX_DELAY = 5.0
"""No single wait between attempts is longer than this."""


class Failure(enum.Enum):
    """How a driver classifies one failed attempt."""

    TRANSIENT = "transient"
    """Throttling (429, 503 SlowDown), 500/502/503/504, timeouts, dropped or refused connections."""
    DENIED = "denied"
    """401/403: credentials missing or not allowed; retrying does not help."""
    FATAL = "fatal"
    """Anything else (400, 416, ...): a bug or a bad request; raised at once."""


class ShortBodyError(Exception):
    """A response body ended before the length its headers announced."""


def backoff_delay(attempt: int) -> float:
    """Seconds to wait before retry number ``attempt`` (1-based): full jitter over an exponential cap."""
    return random.uniform(0.0, min(MAX_DELAY, BASE_DELAY * 2 ** (attempt - 1)))


async def call_with_retries(
    operation: Callable[[], Awaitable[T]],
    *,
    url: str,
    classify: Callable[[BaseException], Failure],
    action: str = "request",
    denied_hint: str = "",
) -> T:
    """Run ``operation`` until it succeeds, retrying transient failures ``config.retries`` times.

    Each attempt is bounded by ``config.timeout`` seconds (a timeout is transient). Raises
    AccessDeniedError for refusals and StoreError otherwise, both naming ``url``.
    """
    settings = config.current()
    attempt = 0
    while True:
        try:
            async with asyncio.timeout(settings.timeout):
                return await operation()
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except TimeoutError as exc:
            failure, cause = Failure.TRANSIENT, exc
        except ShortBodyError as exc:
            failure, cause = Failure.TRANSIENT, exc
        except Exception as exc:
            failure, cause = classify(exc), exc
        if failure is Failure.DENIED:
            hint = f" {denied_hint}" if denied_hint else ""
            raise AccessDeniedError(f"{url}: access denied ({_describe(cause)}).{hint}") from cause
        if failure is Failure.FATAL or attempt >= settings.retries:
            tries = f" after {attempt + 1} attempts" if attempt else ""
            raise StoreError(f"{url}: {action} failed{tries}: {_describe(cause)}") from cause
        attempt += 1
        await asyncio.sleep(backoff_delay(attempt))


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    if isinstance(exc, TimeoutError) and not str(exc):
        text = f"no answer within {config.get('timeout')} s"
    return text
