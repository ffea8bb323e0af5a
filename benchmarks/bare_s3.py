"""The S3 floor: the object requests an engine makes, sent by a client that does nothing else.

A full write PUTs every encoded chunk and a read GETs every chunk key. `BareS3` sends the
same PUTs and GETs with the same bodies: encoded beforehand, no signing, no metadata, no
decoding, connections kept alive and up to 64 requests in flight (asyncarr's default).
Its time is the least any client can take against the same server. Where that floor divided
by another engine's time is above a target's limit, no client can meet that target on this
server. moto does not check signatures, so the requests carry only the Authorization
header's credential scope, which moto reads to route them to S3.

A write with mode ``"w"`` also replaces what is there: ``FLOOR_REPLACE`` is the same client
doing the least that asks, in the order safety needs (nothing new is written before the old
array is gone): list the prefix, delete what is listed (DeleteObjects), PUT the metadata, then
the chunks. It is the floor of a write that replaces an array, where ``FLOOR`` is that of one
that overwrites chunks already there.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import itertools
import re
from collections.abc import Iterable, Iterator
from typing import Any

import aiohttp
import numpy as np

from .engines import ArraySpec, S3Location, service_loop

__all__ = ["FLOOR", "FLOOR_REPLACE", "BareS3", "chunk_keys", "encoded_chunks"]

FLOOR = "floor: bare requests"
"""The engine name the floor's rows carry in the report."""
FLOOR_REPLACE = "floor: replace (list, delete, metadata, chunks)"
"""The engine name of the replacing write's floor."""
METADATA = b'{"zarr_format": 3, "node_type": "array"}' + b" " * 600
"""A metadata body of about the size of a W3 array's zarr.json."""
_LISTED_KEY = re.compile(rb"<Key>([^<]*)</Key>")
_NEXT_TOKEN = re.compile(rb"<NextContinuationToken>([^<]*)</NextContinuationToken>")


def _chunk_indices(spec: ArraySpec, selection: Any = Ellipsis) -> Iterator[tuple[int, ...]]:
    """The grid indices of the chunks a basic selection (ints and slices) touches, in C order."""
    if selection is Ellipsis:
        selection = tuple(slice(None) for _ in spec.shape)
    ranges = []
    for part, extent, side in zip(selection, spec.shape, spec.chunks, strict=True):
        if isinstance(part, int):
            ranges.append(range(part // side, part // side + 1))
        else:
            start, stop, _ = part.indices(extent)
            ranges.append(range(start // side, (stop - 1) // side + 1))
    return itertools.product(*ranges)


def _key(index: tuple[int, ...]) -> str:
    return "c/" + "/".join(map(str, index))


def chunk_keys(spec: ArraySpec, selection: Any = Ellipsis) -> list[str]:
    """The v3 default-encoded keys (``c/i/j``) of the chunks a basic selection touches."""
    return [_key(index) for index in _chunk_indices(spec, selection)]


def encoded_chunks(spec: ArraySpec, data: np.ndarray) -> dict[str, bytes]:
    """Every chunk of ``data`` encoded with ``spec``'s Blosc, by its v3 default key."""
    codec = spec.numcodecs_blosc()
    bodies = {}
    for index in _chunk_indices(spec):
        block = data[tuple(slice(i * side, (i + 1) * side) for i, side in zip(index, spec.chunks, strict=True))]
        bodies[_key(index)] = codec.encode(np.ascontiguousarray(block))
    return bodies


class BareS3:
    """PUTs and GETs of whole objects under ``prefix``, on the benchmarks' service event loop."""

    def __init__(self, s3: S3Location, prefix: str, concurrency: int = 64) -> None:
        self._base = f"{s3.endpoint_url.rstrip('/')}/{s3.bucket}/{prefix.strip('/')}/"
        self._bucket_url = f"{s3.endpoint_url.rstrip('/')}/{s3.bucket}"
        self._prefix = prefix.strip("/") + "/"
        self._headers = {
            "Authorization": f"AWS4-HMAC-SHA256 Credential={s3.key}/20260101/{s3.region}/s3/aws4_request, "
            "SignedHeaders=host, Signature=0"
        }
        self._concurrency = concurrency
        self._session: aiohttp.ClientSession | None = None

    async def _open(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=self._concurrency)
            self._session = aiohttp.ClientSession(connector=connector, headers=self._headers)
        return self._session

    async def _each(self, requests: Iterable[tuple[str, str, bytes | None]]) -> list[bytes]:
        session = await self._open()

        async def send(method: str, key: str, body: bytes | None) -> bytes:
            async with session.request(method, self._base + key, data=body) as response:
                answer = await response.read()
                if response.status != 200:
                    raise RuntimeError(f"bare {method} of {key} answered {response.status}: figure void")
                return answer

        return await asyncio.gather(*(send(*request) for request in requests))

    async def _replace(self, bodies: dict[str, bytes], metadata: bytes) -> None:
        session = await self._open()
        bucket_url, prefix = self._bucket_url, self._prefix
        keys: list[str] = []
        token = b""
        while True:  # list the prefix, page by page
            query = {"list-type": "2", "prefix": prefix}
            if token:
                query["continuation-token"] = token.decode()
            async with session.get(bucket_url, params=query) as response:
                page = await response.read()
                if response.status != 200:
                    raise RuntimeError(f"bare listing answered {response.status}: figure void")
            keys += [key.decode() for key in _LISTED_KEY.findall(page)]
            found = _NEXT_TOKEN.search(page)
            if found is None:
                break
            token = found.group(1)
        for start in range(0, len(keys), 1000):  # DeleteObjects takes 1000 keys a request
            objects = "".join(f"<Object><Key>{key}</Key></Object>" for key in keys[start : start + 1000])
            document = f"<Delete><Quiet>true</Quiet>{objects}</Delete>".encode()
            digest = base64.b64encode(hashlib.md5(document).digest()).decode()
            async with session.post(
                bucket_url, params={"delete": ""}, data=document, headers={"Content-MD5": digest}
            ) as response:
                await response.read()
                if response.status != 200:
                    raise RuntimeError(f"bare DeleteObjects answered {response.status}: figure void")
        await self._each([("PUT", "zarr.json", metadata)])
        await self._each(("PUT", key, body) for key, body in bodies.items())

    def replace_all(self, bodies: dict[str, bytes], metadata: bytes = METADATA) -> None:
        """Replace what is under the prefix: list it, delete what is listed, PUT ``metadata``, then every body."""
        service_loop.run(self._replace(bodies, metadata))

    def put_all(self, bodies: dict[str, bytes]) -> None:
        """PUT every body at its key, all at once (the connector bounds how many are in flight)."""
        service_loop.run(self._each(("PUT", key, body) for key, body in bodies.items()))

    def get_all(self, keys: list[str]) -> list[bytes]:
        """GET every key, all at once; the bodies in key order."""
        return service_loop.run(self._each(("GET", key, None) for key in keys))

    def close(self) -> None:
        """Close the connections."""
        if self._session is not None:
            service_loop.run(self._session.close())
            self._session = None
