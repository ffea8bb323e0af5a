"""FaultProxy: a reverse proxy on 127.0.0.1 that adds latency, injects failures and counts requests.

Put it between a store and its server (``endpoint_url=proxy.url`` for S3/GCS/Azure, or the
HTTPStore base URL) to check that retries make flaky networks invisible and that requests run
concurrently. Every request is forwarded unchanged (method, path, query, body and headers,
including ``Host`` -- so an AWS SigV4 signature made for the proxy's address still verifies
upstream, and Authorization headers pass through) and the response is streamed back unchanged.
With probability ``failure_rate`` a request fails instead, with one of ``failures``:

- ``"503"``: 503 with an S3 ``SlowDown`` XML body (throttling);
- ``"500"``: 500 with an S3 ``InternalError`` XML body;
- ``"drop"``: the connection is closed before any response byte;
- ``"truncate"``: the upstream response's headers and half its body, then the connection closes.

With ``throttle_above=N`` the proxy also acts as a server that throttles: a request arriving
while N others are in flight is answered at once with 503 and an S3 ``SlowDown`` body
(counted in ``throttled``, not in ``faults``), as S3 answers a prefix asked for more than it serves.

``counts()`` also says how many client connections the requests came on (keep-alive reuse).
Fault choices come from ``random.Random(seed)`` in request order, so one sequential run
always fails the same requests. Counters are thread-safe and readable from the test thread.
"""

from __future__ import annotations

import asyncio
import collections
import random
import threading
from typing import Any

from aiohttp import ClientSession, ClientTimeout, TCPConnector, web

from .http import BackgroundServer

__all__ = ["FAULT_KINDS", "FaultProxy"]

FAULT_KINDS = ("503", "500", "drop", "truncate")
_HOP_BY_HOP = frozenset(
    name.lower()
    for name in (
        "Connection",
        "Keep-Alive",
        "Proxy-Authenticate",
        "Proxy-Authorization",
        "TE",
        "Trailer",
        "Transfer-Encoding",
        "Upgrade",
        "Expect",  # the proxy's own server answers 100-continue; the upstream request has its body at once
    )
)
# Headers aiohttp's client would add on its own: suppressed unless the original request had them.
_AUTO_HEADERS = ("Accept", "Accept-Encoding", "User-Agent", "Content-Type")
_SLOW_DOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message><RequestId>fault-proxy</RequestId></Error>"
)
_INTERNAL_ERROR = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>InternalError</Code>'
    b"<Message>We encountered an internal error. Please try again.</Message><RequestId>fault-proxy</RequestId></Error>"
)


class FaultProxy:
    """A reverse proxy to ``target_base_url`` that injects faults; ``.url`` mirrors the target's URL."""

    def __init__(
        self,
        target_base_url: str,
        *,
        failure_rate: float = 0.0,
        failures: tuple[str, ...] = ("503", "500", "drop"),
        latency: float = 0.0,
        seed: int = 0,
        throttle_above: int | None = None,
    ) -> None:
        unknown = sorted(set(failures) - set(FAULT_KINDS))
        if unknown or not failures:
            raise ValueError(f"failures must be a non-empty choice of {FAULT_KINDS}, got {failures!r}")
        if not 0.0 <= failure_rate <= 1.0:
            raise ValueError(f"failure_rate must be within [0, 1], got {failure_rate}")
        target = target_base_url.rstrip("/")
        scheme, _, rest = target.partition("://")
        origin, slash, path = rest.partition("/")
        self.target_origin = f"{scheme}://{origin}"
        self.failure_rate = failure_rate
        """Probability that a request fails instead of being forwarded (may be changed at any time)."""
        self.failures = tuple(failures)
        self.latency = latency
        """Seconds every request waits before it is forwarded (may be changed at any time)."""
        if throttle_above is not None and throttle_above < 1:
            raise ValueError(f"throttle_above must be at least 1 (or None), got {throttle_above}")
        self.throttle_above = throttle_above
        """Requests in flight beyond which new ones get 503 SlowDown (None: never; may be changed at any time)."""
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._session: ClientSession | None = None
        self.reset_counters()
        app = web.Application(client_max_size=1024**3)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        app.on_startup.append(self._open_session)
        app.on_cleanup.append(self._close_session)
        self._server = BackgroundServer(app, name="asyncarr-test-fault-proxy")
        self.url = f"{self._server.url}{slash}{path}"
        """The proxy's URL for the target's base URL (same path)."""

    # -- counters -----------------------------------------------------------------------

    def reset_counters(self) -> None:
        """Forget every count (in-flight requests stay counted as in flight)."""
        with self._lock:
            self.requests = 0
            self.requests_by_method: collections.Counter[str] = collections.Counter()
            self.requests_by_path: collections.Counter[str] = collections.Counter()
            self.faults: collections.Counter[str] = collections.Counter()
            self.throttled = 0
            self.response_bytes = 0
            self._client_connections: set[Any] = set()  # the transports requests arrived on
            self.in_flight = getattr(self, "in_flight", 0)
            self.max_in_flight = self.in_flight

    def counts(self) -> dict[str, Any]:
        """A consistent snapshot of every counter."""
        with self._lock:
            return {
                "requests": self.requests,
                "requests_by_method": dict(self.requests_by_method),
                "requests_by_path": dict(self.requests_by_path),
                "faults": dict(self.faults),
                "throttled": self.throttled,
                "response_bytes": self.response_bytes,
                "connections": len(self._client_connections),
                "in_flight": self.in_flight,
                "max_in_flight": self.max_in_flight,
            }

    def _arrive(self, request: web.Request) -> str | None:
        with self._lock:
            self.requests += 1
            self.requests_by_method[request.method] += 1
            self.requests_by_path[request.path] += 1
            self._client_connections.add(request.transport)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            if self.throttle_above is not None and self.in_flight > self.throttle_above:
                self.throttled += 1
                return "throttle"
            if self.failure_rate and self._random.random() < self.failure_rate:
                fault = self._random.choice(self.failures)
                self.faults[fault] += 1
                return fault
            return None

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1

    # -- lifecycle ----------------------------------------------------------------------

    def stop(self) -> None:
        """Stop serving and close every connection."""
        self._server.stop()

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"FaultProxy({self.url!r} -> {self.target_origin!r}, failure_rate={self.failure_rate})"

    async def _open_session(self, app: web.Application) -> None:
        self._session = ClientSession(
            connector=TCPConnector(limit=0),
            timeout=ClientTimeout(total=None),
            auto_decompress=False,  # pass bodies through byte for byte
        )

    async def _close_session(self, app: web.Application) -> None:
        if self._session is not None:
            await self._session.close()

    # -- forwarding ---------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        fault = self._arrive(request)
        try:
            if self.latency and fault != "throttle":  # a throttling server answers at once
                await asyncio.sleep(self.latency)
            if fault == "503" or fault == "throttle":
                return web.Response(status=503, body=_SLOW_DOWN, content_type="application/xml")
            if fault == "500":
                return web.Response(status=500, body=_INTERNAL_ERROR, content_type="application/xml")
            if fault == "drop":
                return _drop(request)
            return await self._forward(request, truncate=fault == "truncate")
        finally:
            self._leave()

    async def _forward(self, request: web.Request, *, truncate: bool) -> web.StreamResponse:
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
        body = await request.read()
        skip = [name for name in _AUTO_HEADERS if name not in request.headers]
        async with self._session.request(
            request.method,
            self.target_origin + request.raw_path,
            headers=headers,
            data=body if body or "Content-Length" in request.headers else None,
            skip_auto_headers=skip,
            allow_redirects=False,
        ) as upstream:
            response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
            for name, value in upstream.headers.items():
                if name.lower() not in _HOP_BY_HOP:
                    response.headers.add(name, value)
            if upstream.content_length is None and request.method != "HEAD" and upstream.status not in (204, 304):
                response.enable_chunked_encoding()
            if truncate:
                payload = await upstream.read()
                if len(payload) < 2:
                    return _drop(request)
                await response.prepare(request)
                await response.write(payload[: len(payload) // 2])
                return _drop(request)
            await response.prepare(request)
            async for chunk in upstream.content.iter_chunked(1 << 16):
                with self._lock:
                    self.response_bytes += len(chunk)
                await response.write(chunk)
            await response.write_eof()
            return response


def _drop(request: web.Request) -> web.StreamResponse:
    """Close the client's connection now; aiohttp ignores the response returned afterwards."""
    transport = request.transport
    if transport is not None:
        transport.close()
    return web.Response(status=599)
