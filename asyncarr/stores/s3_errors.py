"""S3's error answers, and how each failed S3 request counts for ``call_with_retries``."""

from __future__ import annotations

import html
import re
from typing import Any

import aiohttp
from botocore.exceptions import (
    ClientError,
    HTTPClientError,
    IncompleteReadError,
    NoCredentialsError,
    SSLError,
)
from botocore.exceptions import (
    ConnectionError as BotocoreConnectionError,
)

from .retry import Failure, connect_failure

__all__ = ["REGION_REDIRECTS", "RedirectNotFollowedError", "S3ResponseError", "classify"]

REGION_REDIRECTS = frozenset({301, 307, 400, 403})
"""S3's answers to a request signed for the wrong region."""

_MISSING_CODES = frozenset({"NoSuchKey", "NotFound", "404"})
_DENIED_CODES = frozenset(
    "AccessDenied AllAccessDisabled InvalidAccessKeyId SignatureDoesNotMatch ExpiredToken InvalidToken "
    "TokenRefreshRequired AccountProblem Forbidden 401 403".split()
)
_TRANSIENT_CODES = frozenset(
    "SlowDown RequestTimeout InternalError ServiceUnavailable Throttling ThrottlingException "
    "RequestLimitExceeded TooManyRequests 500 502 503 504".split()
)
_TRANSIENT_STATUS = frozenset({429, 500, 502, 503, 504})
_THROTTLING_CODES = frozenset(
    "SlowDown Throttling ThrottlingException RequestLimitExceeded TooManyRequests RequestThrottled".split()
)
"""S3's (and S3-compatible servers') error codes that ask the client to send fewer requests."""
_TRANSIENT_TRANSPORT = (
    BotocoreConnectionError,  # EndpointConnectionError, ConnectTimeoutError, ...
    HTTPClientError,  # ConnectionClosedError, ReadTimeoutError, ResponseStreamingError
    IncompleteReadError,
    aiohttp.ClientConnectionError,  # ServerDisconnectedError, ServerTimeoutError, refused connections
    aiohttp.ClientPayloadError,  # a body cut short
    ConnectionError,
)
_ERROR_FIELD = re.compile(r"<(Code|Message)>([^<]*)</\1>")


class S3ResponseError(Exception):
    """S3 answered a request with an error: its HTTP status, error code and message."""

    def __init__(self, status: int | None, code: str, message: str, bucket: str) -> None:
        self.status, self.code, self.message, self.bucket = status, code, message, bucket
        super().__init__(self._describe())

    @classmethod
    def from_client_error(cls, exc: ClientError, bucket: str) -> S3ResponseError:
        """The error S3 answered to an aiobotocore call."""
        error = exc.response.get("Error", {})
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return cls(status, str(error.get("Code") or status or ""), str(error.get("Message") or ""), bucket)

    @classmethod
    def from_answer(cls, status: int, answer: Any, data: bytes, bucket: str) -> S3ResponseError:
        """The error in an S3 answer: the Code and Message of its XML body, else its status line."""
        fields = dict(_ERROR_FIELD.findall(data[:4096].decode("utf-8", "replace")))
        code = html.unescape(fields.get("Code", "")) or str(status)
        message = html.unescape(fields.get("Message", "")) or _reason(status)
        if status in REGION_REDIRECTS and answer.get("x-amz-bucket-region"):
            message += f" (the bucket is in {answer['x-amz-bucket-region']})"
        return cls(status, code, message, bucket)

    @property
    def missing(self) -> bool:
        """No object has this key (NoSuchBucket is a different, fatal, failure)."""
        return self.code in _MISSING_CODES

    def _describe(self) -> str:
        if self.code == "NoSuchBucket":
            return (
                f"the bucket {self.bucket!r} does not exist (HTTP 404 NoSuchBucket); "
                "check the bucket name, and endpoint_url for S3-compatible servers"
            )
        text = f"HTTP {self.status}" if self.status else "S3 error"
        if self.code and self.code != str(self.status):
            text += f" {self.code}"
        return f"{text}: {self.message}" if self.message else text


def _reason(status: int) -> str:
    from http import HTTPStatus

    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


class RedirectNotFollowedError(Exception):
    """A redirect without ``x-amz-bucket-region``: not S3 naming the bucket's region, so not followed."""


def classify(exc: BaseException) -> Failure:
    """How ``call_with_retries`` treats a failed S3 attempt."""
    # botocore wraps what the HTTP session raises in HTTPClientError(error=...), a transient kind.
    if isinstance(exc, RedirectNotFollowedError) or isinstance(
        getattr(exc, "kwargs", {}).get("error"), RedirectNotFollowedError
    ):
        return Failure.FATAL
    if isinstance(exc, S3ResponseError):
        if exc.code in _DENIED_CODES or exc.status in (401, 403):
            return Failure.DENIED
        if exc.code in _THROTTLING_CODES or exc.status == 429:
            return Failure.THROTTLED
        if exc.code in _TRANSIENT_CODES or exc.status in _TRANSIENT_STATUS:
            return Failure.TRANSIENT
        return Failure.FATAL
    if isinstance(exc, NoCredentialsError):
        return Failure.DENIED
    if isinstance(exc, (SSLError, aiohttp.ClientConnectorCertificateError)):
        return Failure.FATAL  # a certificate problem does not go away by asking again
    if connect_failure(exc):
        return Failure.CONNECT
    if isinstance(exc, _TRANSIENT_TRANSPORT):
        return Failure.TRANSIENT
    return Failure.FATAL
