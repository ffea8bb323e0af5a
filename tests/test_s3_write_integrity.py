"""What asyncarr's S3 writes promise about their bodies, checked through a recording proxy in front of moto.

Every PUT signs the SHA-256 of its body (``x-amz-content-sha256`` among the signed headers), so
S3 refuses a body damaged on the way (XAmzContentSHA256Mismatch). moto 5 checks no body digest
at all (neither this one nor ``x-amz-checksum-*`` nor ``Content-MD5``), so what can be checked
here is that the signed digest is the digest of the bytes the server received and stored, for
chunk-sized bodies too, which go out in 64 KiB pieces.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from typing import Any

import numpy as np
from aiohttp import web
from emulators import s3 as emulator
from emulators.proxy import FaultProxy

import asyncarr
from asyncarr.stores import s3 as s3_module
from asyncarr.stores.s3 import S3Store


class RecordingProxy(FaultProxy):
    """The tests' proxy, also keeping each PUT's headers and the SHA-256 of the body it received."""

    def __init__(self, target_base_url: str) -> None:
        self.puts: list[tuple[str, dict[str, str], str, int]] = []
        self._puts_lock = threading.Lock()
        super().__init__(target_base_url)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if request.method == "PUT":
            body = await request.read()  # aiohttp keeps it: the forwarding reads the same bytes
            with self._puts_lock:
                self.puts.append((request.path, dict(request.headers), hashlib.sha256(body).hexdigest(), len(body)))
        return await super()._handle(request)


def _signed_names(headers: dict[str, str]) -> list[str]:
    authorization = headers["Authorization"]
    return authorization.split("SignedHeaders=")[1].split(",")[0].split(";")


def test_every_put_of_an_array_write_signs_the_sha256_of_the_body_the_server_stored() -> None:
    bucket = emulator.new_bucket()
    data = np.random.default_rng(0).random((512, 384), dtype="f8")  # 256 KiB chunks: streamed bodies
    with RecordingProxy(emulator.moto_endpoint()) as proxy:
        options = {**emulator.store_options(), "endpoint_url": proxy.url}

        async def write() -> None:
            z = await asyncarr.open_array(
                f"s3://{bucket}/a", mode="w", shape=data.shape, chunks=(256, 128), dtype="f8", storage_options=options
            )
            await z.setitem(Ellipsis, data)

        asyncio.run(write())
        puts = list(proxy.puts)
    assert len(puts) == 1 + 6  # zarr.json and the 2 x 3 chunks
    assert max(size for *_, size in puts) > 1 << 16  # some bodies went out in pieces
    stored = emulator.client()
    for path, headers, received, _ in puts:
        lower = {name.lower(): value for name, value in headers.items()}
        assert lower["x-amz-content-sha256"] == received, path
        assert "x-amz-content-sha256" in _signed_names(headers)
        key = path.split(f"/{bucket}/", 1)[1]
        body = stored.get_object(Bucket=bucket, Key=key)["Body"].read()
        assert hashlib.sha256(body).hexdigest() == received, path

    async def read() -> np.ndarray:
        z = await asyncarr.open_array(f"s3://{bucket}/a", mode="r", storage_options=emulator.store_options())
        return await z.getitem(Ellipsis)

    assert np.array_equal(asyncio.run(read()), data)


def test_listings_leave_timestamps_as_sent_and_still_yield_every_key() -> None:
    store = S3Store(emulator.new_bucket(), "p", **emulator.store_options())
    keys = [f"c/{i}/{j}" for i in range(12) for j in range(12)]

    async def scenario() -> tuple[list[str], Any]:
        await asyncio.gather(*(store.set(key, b"x") for key in keys))
        listed = [key async for key in store.list_prefix("")]
        client = await store._clients.get("aiobotocore client", store._open_client)
        page = await client.list_objects_v2(Bucket=store.bucket, Prefix="p/", MaxKeys=1)
        await store.close()
        return listed, page["Contents"][0]["LastModified"]

    listed, last_modified = asyncio.run(scenario())
    assert sorted(listed) == sorted(keys)
    # The dateutil parse of every key's LastModified was most of a listing's client CPU.
    assert isinstance(last_modified, str) and last_modified[:2] == "20"


def test_an_array_write_hashes_its_chunks_on_codec_threads_and_stores_strided_values_exactly(monkeypatch) -> None:
    # The event loop is shared by every request of a service: the chunks' SHA-256 (and the copy of
    # whole chunks into new arrays) happen on the codec threads that encode them, not on the loop.
    hashed_on: list[str] = []
    original = s3_module.HashedBody.__init__

    def recording(self: Any, value: Any) -> None:
        hashed_on.append(threading.current_thread().name)
        original(self, value)

    monkeypatch.setattr(s3_module.HashedBody, "__init__", recording)
    bucket = emulator.new_bucket()
    source = np.random.default_rng(1).random((300, 520), dtype="f8")
    data = source[::-1, ::2]  # a strided view: each whole chunk is encoded from the caller's memory as it lies

    async def write_and_read() -> tuple[np.ndarray, str]:
        z = await asyncarr.open_array(
            f"s3://{bucket}/a",
            mode="w",
            shape=data.shape,
            chunks=(100, 130),
            dtype="f8",
            storage_options=emulator.store_options(),
        )
        loop_thread = threading.current_thread().name
        hashed_on.clear()  # zarr.json above is written by the store's own set, on the loop
        await z.setitem(Ellipsis, data)
        return await z.getitem(Ellipsis), loop_thread

    read, loop_thread = asyncio.run(write_and_read())
    assert np.array_equal(read, data)
    assert len(hashed_on) == 3 * 2  # one hash per chunk, none twice
    assert all(name.startswith("asyncarr-codec") for name in hashed_on), hashed_on
    assert loop_thread not in hashed_on
