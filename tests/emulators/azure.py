"""Azurite (the Azure Blob emulator) on 127.0.0.1 for the Azure store tests, started lazily once per session.

The server is a subprocess of azurite-blob from ``node/node_modules`` (see EMULATORS.md), in
memory, on a free port; it is terminated at interpreter exit. Each test gets a fresh
container from `new_container` or `make_store`; azurite has no reset endpoint.
"""

from __future__ import annotations

import os

for _name, _value in {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
    "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false",
}.items():
    os.environ.setdefault(_name, _value)

import asyncio  # noqa: E402
import atexit  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import urllib.error  # noqa: E402
import urllib.request  # noqa: E402
import uuid  # noqa: E402
from collections.abc import Coroutine  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, TypeVar  # noqa: E402

from azure.storage.blob.aio import BlobServiceClient  # noqa: E402

from asyncarr.stores import Store  # noqa: E402
from asyncarr.stores.azure import AzureStore  # noqa: E402

__all__ = [
    "ACCOUNT",
    "KEY",
    "azurite_account_url",
    "connection_string",
    "make_store",
    "new_container",
    "reopen_read_only",
    "upload_directory",
]

ACCOUNT = "devstoreaccount1"
"""Azurite's well-known development account."""
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
"""The development account's (public, well-known) key."""

_ROOT = Path(__file__).resolve().parents[2]
_AZURITE = _ROOT / "node" / "node_modules" / ".bin" / "azurite-blob"
_START_TIMEOUT = 30.0
_T = TypeVar("_T")


class _Azurite:
    """One azurite-blob subprocess, started on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._log: Any = None
        self.port = 0

    def url(self) -> str:
        with self._lock:
            if self._process is None or self._process.poll() is not None:
                self._start()
        return f"http://127.0.0.1:{self.port}/{ACCOUNT}"

    def _start(self) -> None:
        if not _AZURITE.exists():
            raise RuntimeError(f"azurite is not installed at {_AZURITE}: run npm install --prefix {_ROOT}/node azurite")
        for _ in range(3):  # another process may take the free port before azurite binds it
            self.port = _free_port()
            self._log = tempfile.TemporaryFile()
            command = [
                str(_AZURITE),
                "--blobHost", "127.0.0.1", "--blobPort", str(self.port),
                "--inMemoryPersistence", "--extentMemoryLimit", "512",
                "--skipApiVersionCheck", "--loose", "--disableTelemetry", "--silent",
            ]  # fmt: skip
            self._process = subprocess.Popen(
                command, stdout=self._log, stderr=subprocess.STDOUT, cwd=tempfile.gettempdir()
            )
            if self._wait_ready():
                atexit.register(self.stop)
                return
            output = self._output()
            self.stop()
        raise RuntimeError(f"azurite did not start; its output:\n{output}")

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + _START_TIMEOUT
        probe = f"http://127.0.0.1:{self.port}/{ACCOUNT}?comp=list"
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                return False
            try:
                urllib.request.urlopen(probe, timeout=1).close()
                return True
            except urllib.error.HTTPError:  # any HTTP answer (403 without credentials) means it is up
                return True
            except OSError:
                time.sleep(0.05)
        return False

    def _output(self) -> str:
        if self._log is None:
            return ""
        self._log.seek(0)
        return self._log.read().decode(errors="replace")

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        log, self._log = self._log, None
        if log is not None:
            log.close()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


_server = _Azurite()


def azurite_account_url() -> str:
    """The development account's blob endpoint, ``http://127.0.0.1:PORT/devstoreaccount1`` (starts azurite)."""
    return _server.url()


def connection_string(anon: bool = False) -> str:
    """A connection string for the development account; ``anon=True`` leaves out the key (no credential)."""
    key = "" if anon else f"AccountKey={KEY};"
    return f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};{key}BlobEndpoint={azurite_account_url()};"


def _run(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """Run a coroutine to completion on a fresh loop in a helper thread (works inside a running loop too)."""
    result: list[Any] = []

    def target() -> None:
        try:
            result.append((True, asyncio.run(coroutine)))
        except BaseException as exc:
            result.append((False, exc))

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    ok, value = result[0]
    if not ok:
        raise value
    return value


def new_container(public: bool = False) -> str:
    """Create a container with a fresh name; ``public=True`` allows anonymous reads and listing."""
    name = f"test-{uuid.uuid4().hex[:24]}"

    async def create() -> None:
        async with BlobServiceClient.from_connection_string(connection_string()) as service:
            await service.create_container(name, public_access="container" if public else None)

    _run(create())
    return name


def make_store(tmp_path: Path) -> AzureStore:
    """An empty store (prefix ``store`` in a fresh private container), opened with the connection string."""
    return AzureStore(new_container(), "store", connection_string=connection_string())


def reopen_read_only(store: Store) -> AzureStore:
    """The same container and prefix as ``store`` (made by `make_store`), read-only."""
    assert isinstance(store, AzureStore)
    return AzureStore(store.container, store.prefix, read_only=True, connection_string=connection_string())


def upload_directory(local_dir: str | os.PathLike[str], container: str, prefix: str = "") -> list[str]:
    """Upload every file below ``local_dir`` as ``prefix/relative/path`` blobs; returns the blob names."""
    root = Path(local_dir)
    files = sorted(path for path in root.rglob("*") if path.is_file())
    base = prefix.strip("/") + "/" if prefix.strip("/") else ""
    names = [base + path.relative_to(root).as_posix() for path in files]

    async def upload() -> None:
        async with BlobServiceClient.from_connection_string(connection_string()) as service:
            client = service.get_container_client(container)
            limit = asyncio.Semaphore(32)

            async def put(name: str, path: Path) -> None:
                async with limit:
                    await client.upload_blob(name, path.read_bytes(), overwrite=True)

            await asyncio.gather(*(put(name, path) for name, path in zip(names, files, strict=True)))

    _run(upload())
    return names
