"""Network stores fail fast and never hang silently: connect retries, a request deadline, checked endpoint URLs."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest

from asyncarr import config
from asyncarr.errors import StoreError
from asyncarr.stores import from_url
from asyncarr.stores.azure import AzureStore
from asyncarr.stores.gcs import GCSStore
from asyncarr.stores.http import HTTPStore
from asyncarr.stores.s3 import S3Store

TESTS = Path(__file__).resolve().parent


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class SilentServer:
    """Accepts connections and reads requests but never answers; counts the connections."""

    def __init__(self) -> None:
        self.connections = 0
        self._ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        self._ready.wait(10)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.connections += 1
            while await reader.read(65536):
                pass  # never a byte back
            writer.close()

        self._server = self._loop.run_until_complete(asyncio.start_server(handle, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._server.close)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


@pytest.fixture
def silent_server() -> Any:
    server = SilentServer()
    yield server
    server.stop()


# -- endpoint URLs ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda url: S3Store("bucket", endpoint_url=url, anon=True),
        lambda url: from_url("s3://bucket/x", endpoint_url=url, anon=True),
        lambda url: GCSStore("bucket", endpoint_url=url, token="anon"),
        lambda url: AzureStore("container", account_url=url, anon=True),
        lambda url: HTTPStore(url),
    ],
    ids=["S3Store", "s3-url", "GCSStore", "AzureStore", "HTTPStore"],
)
def test_an_endpoint_without_a_scheme_is_refused_at_construction_saying_what_to_write(make: Any) -> None:
    with pytest.raises(ValueError, match=r"http") as caught:
        make("127.0.0.1:9")
    assert "127.0.0.1:9" in str(caught.value)
    make("http://127.0.0.1:9")  # the same endpoint, written as a URL, is accepted


@pytest.mark.parametrize("endpoint", ["ftp://host", "http://", "http://host:99999", "https://host/path?token=abc"])
def test_malformed_s3_endpoints_are_value_errors_that_never_quote_a_query(endpoint: str) -> None:
    with pytest.raises(ValueError, match=r"http\(s\)://host\[:port\]") as caught:
        S3Store("bucket", endpoint_url=endpoint, anon=True)
    assert "token=abc" not in str(caught.value)


def test_an_endpoint_from_the_environment_is_checked_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "localhost:9000")
    with pytest.raises(ValueError, match="did you mean 'http://localhost:9000'"):
        S3Store("bucket", anon=True)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "localhost:9023")  # gcsfs's own convention: http:// is implied
    assert GCSStore("bucket", token="anon").endpoint_url == "http://localhost:9023"


# -- settings ---------------------------------------------------------------------------------


def test_network_settings_have_bounded_defaults_and_are_validated() -> None:
    settings = config.current()
    assert settings.connect_timeout < settings.timeout
    assert settings.connect_retries <= 2 and settings.request_deadline <= 120
    assert settings.adaptive_concurrency is True
    for name, bad in [
        ("connect_timeout", 0),
        ("connect_retries", -1),
        ("request_deadline", "1"),
        ("adaptive_concurrency", 1),
    ]:
        with pytest.raises(ValueError, match=name):
            config.set(**{name: bad})


def test_network_settings_come_from_asyncarr_environment_variables() -> None:
    environment = {
        **os.environ,
        "ASYNCARR_CONNECT_TIMEOUT": "2.5",
        "ASYNCARR_CONNECT_RETRIES": "1",
        "ASYNCARR_REQUEST_DEADLINE": "30",
        "ASYNCARR_ADAPTIVE_CONCURRENCY": "false",
    }
    script = (
        "import asyncarr; s = asyncarr.config.current(); "
        "print(s.connect_timeout, s.connect_retries, s.request_deadline, s.adaptive_concurrency)"
    )
    out = subprocess.run([sys.executable, "-c", script], env=environment, capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["2.5", "1", "30.0", "False"], out.stderr


# -- failing fast -----------------------------------------------------------------------------

_REFUSED_SCRIPT = """
import asyncio, json, sys, time
sys.path.insert(0, sys.argv[2])
from emulators import s3  # credentials and region for the S3 client, no metadata service
from asyncarr.errors import StoreError
from asyncarr.stores.azure import AzureStore
from asyncarr.stores.gcs import GCSStore
from asyncarr.stores.http import HTTPStore
from asyncarr.stores.s3 import S3Store

endpoint = sys.argv[1]
stores = {
    "s3": S3Store("bucket", endpoint_url=endpoint, key="testing", secret="testing", region="us-east-1"),
    "gcs": GCSStore("bucket", endpoint_url=endpoint, token="anon"),
    "azure": AzureStore("container", account_url=endpoint + "/devstoreaccount1", anon=True),
    "http": HTTPStore(endpoint + "/data.zarr"),
}

async def main():
    report = {}
    for name, store in stores.items():
        started = time.perf_counter()
        try:
            await store.get("zarr.json")
            error = None
        except StoreError as exc:
            error = str(exc)
        report[name] = {"seconds": time.perf_counter() - started, "error": error, **store.metrics().as_dict()}
        await store.close()
    print(json.dumps(report))

asyncio.run(main())
"""


def test_a_refused_connection_fails_within_seconds_after_a_couple_of_attempts() -> None:
    port = closed_port()
    environment = {key: value for key, value in os.environ.items() if not key.startswith("ASYNCARR_")}
    done = subprocess.run(
        [sys.executable, "-c", _REFUSED_SCRIPT, f"http://127.0.0.1:{port}", str(TESTS)],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    attempts = config.current().connect_retries + 1
    for name, outcome in report.items():
        assert outcome["error"] and f"127.0.0.1:{port}" in outcome["error"], name
        assert f"after {attempts} attempts" in outcome["error"], (name, outcome["error"])
        assert outcome["total_requests"] == attempts and outcome["retries"] == attempts - 1, name
        assert outcome["failures"] == 1, name
        # Measured in the child process: not every retry of config.retries, and well under 5 s.
        assert outcome["seconds"] < 5.0, (name, outcome["seconds"])


def test_a_server_that_never_answers_ends_at_the_request_deadline_saying_so(silent_server: SilentServer) -> None:
    store = HTTPStore(f"http://127.0.0.1:{silent_server.port}/data.zarr")

    async def read() -> None:
        async with store:
            await store.get("zarr.json")

    with config.set(timeout=0.3, request_deadline=1.0, retries=50), pytest.raises(StoreError) as caught:
        asyncio.run(read())
    message = str(caught.value)
    assert "request deadline of 1 s (config.request_deadline) was reached" in message, message
    assert "/data.zarr/zarr.json" in message and "no answer within" in message
    metrics = store.metrics()
    # Bounded by the deadline, not by config.retries: a few 0.3 s attempts, each on a connection of its own.
    assert 2 <= metrics.total_requests <= 4 and metrics.failures == 1
    assert silent_server.connections == metrics.total_requests


def test_a_deadline_shorter_than_one_attempt_cuts_that_attempt(silent_server: SilentServer) -> None:
    store = S3Store("bucket", endpoint_url=f"http://127.0.0.1:{silent_server.port}", anon=True)

    async def read() -> None:
        async with store:
            await store.get("k")

    with config.set(timeout=30.0, request_deadline=0.5), pytest.raises(StoreError, match="request deadline") as caught:
        asyncio.run(read())
    assert "after 1 attempt;" in str(caught.value)
    assert store.metrics().total_requests == 1 == silent_server.connections


# -- how each driver classifies failures --------------------------------------------------------


def _dns_failure() -> aiohttp.ClientConnectorDNSError:
    key = SimpleNamespace(host="bucket.invalid", port=443, ssl=True)
    return aiohttp.ClientConnectorDNSError(key, socket.gaierror(socket.EAI_NONAME, "Name or service not known"))  # type: ignore[arg-type]


def _refused() -> aiohttp.ClientConnectorError:
    key = SimpleNamespace(host="127.0.0.1", port=9, ssl=True)
    return aiohttp.ClientConnectorError(key, ConnectionRefusedError(111, "Connection refused"))  # type: ignore[arg-type]


def test_every_driver_classifies_refused_connections_dns_failures_and_connect_timeouts_as_connect_failures() -> None:
    from azure.core.exceptions import ServiceRequestError
    from botocore.exceptions import ConnectTimeoutError, EndpointConnectionError

    from asyncarr.stores import azure, gcs, http, s3_errors
    from asyncarr.stores.retry import Failure

    failures = [_dns_failure(), _refused(), aiohttp.ConnectionTimeoutError("connect timed out")]
    for exc in failures:
        assert s3_errors.classify(exc) is Failure.CONNECT
        assert http._classify(exc) is Failure.CONNECT
        assert gcs._classify(exc) is Failure.CONNECT
        assert azure._failure(ServiceRequestError(exc, error=exc), False) is Failure.CONNECT
    assert s3_errors.classify(EndpointConnectionError(endpoint_url="http://x", error=_refused())) is Failure.CONNECT
    assert s3_errors.classify(ConnectTimeoutError(endpoint_url="http://x")) is Failure.CONNECT
    # A dropped connection or a read timeout is an ordinary transient failure, retried config.retries times.
    assert http._classify(aiohttp.ServerDisconnectedError()) is Failure.TRANSIENT
    assert s3_errors.classify(aiohttp.ServerDisconnectedError()) is Failure.TRANSIENT


def test_the_connect_timeout_reaches_every_drivers_http_client() -> None:
    from asyncarr.stores import http

    endpoint = f"http://127.0.0.1:{closed_port()}"

    async def timeouts() -> dict[str, Any]:
        s3 = S3Store("bucket", endpoint_url=endpoint, key="testing", secret="testing", region="us-east-1")
        gcs = GCSStore("bucket", endpoint_url=endpoint, token="anon")
        azure = AzureStore("container", account_url=endpoint + "/devstoreaccount1", anon=True)
        web = HTTPStore(endpoint)
        found = {
            "s3 objects": (await s3._clients.get("http session", s3._open_session)).timeout.sock_connect,
            "s3 listings": (await s3._clients.get("aiobotocore client", s3._open_client)).meta.config.connect_timeout,
            "gcs": (await gcs._filesystem()).requests_timeout.sock_connect,
            "azure": (await azure._client())._config.transport.connection_config.timeout,
            "http": (await web._clients.get("session", http._open_session)).session.timeout.sock_connect,
        }
        for store in (s3, gcs, azure, web):
            await store.close()
        return found

    with config.set(connect_timeout=2.5):
        found = asyncio.run(timeouts())
    assert found == dict.fromkeys(found, 2.5)
