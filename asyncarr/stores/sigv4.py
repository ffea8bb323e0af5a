"""AWS Signature Version 4 for S3 requests, in the Authorization header.

A few microseconds per request: the canonical request is built from the handful of headers
that are signed, and the signing key derived from the secret (four HMACs) is cached per
access key, date and region. Object paths are encoded as S3 expects: UTF-8, every byte
percent-encoded except the unreserved characters ``A-Z a-z 0-9 - _ . ~``, and ``/`` kept
(S3 does not encode twice and does not normalize ``.``/``..`` segments).
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Mapping
from urllib.parse import quote

__all__ = ["EMPTY_SHA256", "UNSIGNED_PAYLOAD", "Signer", "canonical_uri"]

ALGORITHM = "AWS4-HMAC-SHA256"
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
"""The ``x-amz-content-sha256`` value saying the body is not part of the signature."""
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
"""The hex SHA-256 of an empty body."""


def canonical_uri(path: str) -> str:
    """Percent-encode an S3 request path (``/bucket/key``) segment by segment, keeping ``/``."""
    # quote() never encodes A-Z a-z 0-9 _ . - ~ and encodes str as UTF-8: exactly RFC 3986's rule.
    return quote(path, safe="/")


class Signer:
    """Signs requests to one AWS service ("s3"); the repr shows no key material."""

    def __init__(self, service: str = "s3") -> None:
        self._service = service
        # (access key, secret, date, region) and the signing key derived from them: one date and
        # region at a time is all a store uses, and a refreshed secret replaces the entry.
        self._cached: tuple[str, str, str, str, bytes] | None = None

    def __repr__(self) -> str:
        return f"Signer(service={self._service!r})"

    def signing_key(self, secret_key: str, access_key: str, date: str, region: str) -> bytes:
        """The key that signs requests on ``date`` (YYYYMMDD) in ``region``, derived once per day."""
        cached = self._cached
        if cached is not None and cached[:4] == (access_key, secret_key, date, region):
            return cached[4]
        key = _hmac(("AWS4" + secret_key).encode(), date)
        for part in (region, self._service, "aws4_request"):
            key = _hmac(key, part)
        self._cached = (access_key, secret_key, date, region, key)
        return key

    def sign(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str],
        *,
        access_key: str,
        secret_key: str,
        token: str | None,
        region: str,
        payload_hash: str = UNSIGNED_PAYLOAD,
        query: str = "",
        now: float | None = None,
    ) -> dict[str, str]:
        """The headers to send: ``headers`` (all signed; ``host`` among them), x-amz-* and Authorization.

        ``path`` is the canonical (already encoded) request path and ``query`` the canonical
        query string (names and values encoded, sorted); ``now`` is a Unix time (tests).
        """
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
        date = stamp[:8]
        signed = dict(headers)
        signed["x-amz-content-sha256"] = payload_hash
        signed["x-amz-date"] = stamp
        if token:
            signed["x-amz-security-token"] = token
        canonical = sorted((name.lower(), " ".join(str(value).split())) for name, value in signed.items())
        names = ";".join(name for name, _ in canonical)
        lines = "".join(f"{name}:{value}\n" for name, value in canonical)
        request = f"{method}\n{path}\n{query}\n{lines}\n{names}\n{payload_hash}"
        scope = f"{date}/{region}/{self._service}/aws4_request"
        string_to_sign = f"{ALGORITHM}\n{stamp}\n{scope}\n{hashlib.sha256(request.encode()).hexdigest()}"
        key = self.signing_key(secret_key, access_key, date, region)
        signature = hmac.digest(key, string_to_sign.encode(), "sha256").hex()
        credential = f"Credential={access_key}/{scope}"
        signed["Authorization"] = f"{ALGORITHM} {credential}, SignedHeaders={names}, Signature={signature}"
        return signed


def _hmac(key: bytes, message: str) -> bytes:
    return hmac.digest(key, message.encode(), "sha256")
