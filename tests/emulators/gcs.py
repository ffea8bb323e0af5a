"""GCS on gcp-storage-emulator for the tests: one in-process server per session, a fresh bucket per store.

``gcs_endpoint()`` starts the server on first use (127.0.0.1, a free port, in memory) and
stops it at exit. Two emulator limits shape the helpers (EMULATORS.md):

- it serves one connection at a time with a listen backlog of 5, and answers each request on
  a new connection, so more than a few connections at once overflow the backlog and stall on
  TCP retransmits (64 concurrent PUTs: a minute instead of a second). Test stores therefore
  cap their pool at ``EMULATOR_CONNECTIONS``;
- every write rewrites one metadata document covering all stored objects (soft-deleted ones
  included), so it slows down as objects accumulate. ``make_store`` wipes the emulator when a
  new test asks for a store (a new ``tmp_path``), never within one test. ``seed_objects``
  puts many objects straight into its storage, saving the metadata once.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import threading
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
from typing import Any

# gcsfs must not look for the bucket type over gRPC (a 60 s hang per write against the emulator),
# nor ask the GCE metadata server for credentials (EMULATORS.md).
os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
os.environ.setdefault("NO_GCE_CHECK", "true")

from asyncarr.stores.gcs import GCSStore

__all__ = [
    "EMULATOR_CONNECTIONS",
    "gcs_endpoint",
    "make_store",
    "new_bucket",
    "reopen_read_only",
    "seed_objects",
    "store_options",
    "upload_directory",
    "wipe",
]

EMULATOR_CONNECTIONS = 4
"""Connections a test store opens at once: the emulator's listen backlog is 5."""
PROJECT = "test"

_lock = threading.Lock()
_server: Any = None
_endpoint: str | None = None
_last_test_path: Path | None = None


def gcs_endpoint() -> str:
    """The URL of the session's in-process gcp-storage-emulator, started on first call."""
    global _server, _endpoint
    with _lock:
        if _endpoint is None:
            logging.getLogger("gcp_storage_emulator").setLevel(logging.WARNING)  # one INFO line per request
            from gcp_storage_emulator.server import create_server

            _server = create_server("127.0.0.1", 0, in_memory=True)
            _server._api.daemon = True  # its thread is not a daemon: the interpreter would wait for it forever
            _server.start()
            port = _server._api._httpd.server_address[1]  # the real port when 0 was passed
            _endpoint = f"http://127.0.0.1:{port}"
            atexit.register(_server.stop)
        return _endpoint


def wipe() -> None:
    """Delete every bucket and object (soft-deleted ones too), so writes are fast again."""
    gcs_endpoint()
    _server.wipe()


def new_bucket() -> str:
    """Create a bucket with a unique name through the JSON API; the emulator lets anyone read and write it."""
    name = f"asyncarr-{uuid.uuid4().hex[:16]}"
    request = urllib.request.Request(
        f"{gcs_endpoint()}/storage/v1/b?project={PROJECT}",
        data=json.dumps({"name": name}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    urllib.request.urlopen(request, timeout=30).close()
    return name


def store_options() -> dict[str, Any]:
    """Storage options reaching the emulator anonymously (it checks no credentials)."""
    return {"endpoint_url": gcs_endpoint(), "token": "anon"}


def make_store(tmp_path: Path) -> GCSStore:
    """A writable GCSStore under the prefix 'root' of a fresh, empty bucket."""
    global _last_test_path
    with _lock:
        new_test = tmp_path != _last_test_path
        _last_test_path = tmp_path
    if new_test:
        wipe()
    return GCSStore(new_bucket(), "root", max_connections=EMULATOR_CONNECTIONS, **store_options())


def reopen_read_only(store: GCSStore) -> GCSStore:
    """A read-only GCSStore on the same bucket and prefix as ``store``."""
    return GCSStore(store.bucket, store.prefix, read_only=True, max_connections=EMULATOR_CONNECTIONS, **store_options())


def upload_directory(local_dir: str | os.PathLike[str], bucket: str, prefix: str = "") -> list[str]:
    """Copy every file below ``local_dir`` to ``bucket`` under ``prefix`` (plain JSON-API uploads); return the names."""
    root = Path(local_dir)
    names = []
    for path in sorted(root.rglob("*")):
        if path.is_file():
            name = "/".join(part for part in (prefix.strip("/"), path.relative_to(root).as_posix()) if part)
            query = urllib.parse.urlencode({"uploadType": "media", "name": name})
            request = urllib.request.Request(
                f"{gcs_endpoint()}/upload/storage/v1/b/{urllib.parse.quote(bucket, safe='')}/o?{query}",
                data=path.read_bytes(),
                headers={"Content-Type": "application/octet-stream"},
                method="POST",
            )
            urllib.request.urlopen(request, timeout=30).close()
            names.append(name)
    return names


def seed_objects(bucket: str, objects: dict[str, bytes]) -> None:
    """Put objects straight into the emulator's storage, saving its metadata once (1,000 PUTs take ~15 s)."""
    from gcp_storage_emulator.handlers.objects import _checksums, _make_object_resource

    endpoint = gcs_endpoint()
    storage = _server._storage
    listed = storage.objects.setdefault(bucket, {})
    for name, value in objects.items():
        resource = _make_object_resource(endpoint, bucket, name, "application/octet-stream", str(len(value)))
        storage._store.write_bytes(storage._object_path(bucket, name), value)
        listed[name] = _checksums(value, resource)
    storage._write_config_to_file()
