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

A read of a sharded array asks each shard it touches for its index (a suffix range), then for
the inner chunks it needs, as byte ranges merged across gaps of up to 64 KiB
(`BareS3.get_sharded`): the requests every sharded reader here makes, bare.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import itertools
import math
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
MERGE_GAP = 65536
"""Byte ranges of one shard closer than this are asked for in one request."""
_EMPTY = 2**64 - 1  # an inner chunk's offset and size in a shard index when it is not stored
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

    async def _send(self, method: str, key: str, body: bytes | None) -> bytes:
        session = await self._open()
        async with session.request(method, self._base + key, data=body) as response:
            answer = await response.read()
            if response.status != 200:
                raise RuntimeError(f"bare {method} of {key} answered {response.status}: figure void")
            return answer

    async def _each(self, requests: Iterable[tuple[str, str, bytes | None]]) -> list[bytes]:
        return await asyncio.gather(*(self._send(*request) for request in requests))

    async def fetch(self, key: str) -> bytes:
        """GET one key on the running (service) loop: its body."""
        return await self._send("GET", key, None)

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

    def get_sharded(self, spec: ArraySpec, selection: Any) -> int:
        """Read what a basic selection of a sharded array needs: each touched shard's index, then
        its touched inner chunks as merged byte ranges, all at once; the bytes received."""
        return service_loop.run(self._sharded(spec, selection))

    async def _sharded(self, spec: ArraySpec, selection: Any) -> int:
        session = await self._open()
        shards = spec.shards or spec.shape
        per_shard = tuple(shard // inner for shard, inner in zip(shards, spec.chunks, strict=True))
        wanted: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
        for index in _chunk_indices(spec, selection):  # inner chunk indices, grouped by shard
            shard = tuple(i // n for i, n in zip(index, per_shard, strict=True))
            wanted.setdefault(shard, []).append(tuple(i % n for i, n in zip(index, per_shard, strict=True)))
        index_nbytes = math.prod(per_shard) * 16 + 4  # (offset, size) uint64 pairs, then a CRC-32C

        async def ranged(url: str, header: str) -> bytes:
            async with session.get(url, headers={"Range": header}) as response:
                body = await response.read()
                if response.status != 206:
                    raise RuntimeError(f"bare ranged GET of {url} answered {response.status}: figure void")
                return body

        async def read_shard(shard: tuple[int, ...], inner: list[tuple[int, ...]]) -> int:
            url = self._base + _key(shard)
            table = np.frombuffer((await ranged(url, f"bytes=-{index_nbytes}"))[:-4], dtype="<u8")
            table = table.reshape(*per_shard, 2)
            extents = sorted((int(table[i][0]), int(table[i][1])) for i in inner if int(table[i][0]) != _EMPTY)
            runs: list[list[int]] = []
            for offset, nbytes in extents:
                if runs and offset - (runs[-1][0] + runs[-1][1]) <= MERGE_GAP:
                    runs[-1][1] = offset + nbytes - runs[-1][0]
                else:
                    runs.append([offset, nbytes])
            bodies = await asyncio.gather(*(ranged(url, f"bytes={o}-{o + n - 1}") for o, n in runs))
            return index_nbytes + sum(map(len, bodies))

        return sum(await asyncio.gather(*(read_shard(shard, inner) for shard, inner in wanted.items())))

    def close(self) -> None:
        """Close the connections."""
        if self._session is not None:
            service_loop.run(self._session.close())
            self._session = None
