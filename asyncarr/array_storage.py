"""What an array has stored: its chunk keys, how many, how many bytes, and the ``info`` table.

A mixin of `AsyncArray`. Where the store lists keys this costs one listing plus a size request
per stored key; where it cannot (HTTP) every chunk key of the grid is probed, for grids of at
most ``config.max_probed_chunks`` cells: a larger declared grid raises `StoreError` instead of
sending one request per cell, and ``info`` shows those rows as unknown.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable
from typing import Any

from . import config
from .concurrency import for_each_concurrently
from .errors import StoreError
from .info import Info, bytes_with_human_size
from .metadata import ArrayMetadataV2
from .nodes import node_key

__all__ = ["StoredChunks"]

_DIGITS = re.compile(r"[0-9]+")


class StoredChunks:
    """The stored-chunk inspection of `AsyncArray` (it provides ``_store``, ``_path``, ``_metadata``, ...)."""

    _store: Any
    _path: str
    _metadata: Any

    def _chunk_key_layout(self) -> tuple[str, str]:
        """The (prefix, separator) of this array's chunk keys, e.g. ('c/', '/') or ('', '.')."""
        metadata = self._metadata
        if isinstance(metadata, ArrayMetadataV2):
            return "", metadata.dimension_separator
        encoding = metadata.chunk_key_encoding
        default_separator = "/" if encoding["name"] == "default" else "."
        separator = encoding.get("configuration", {}).get("separator", default_separator)
        return ("c" + separator if encoding["name"] == "default" else ""), separator

    def _chunk_key_parser(self) -> Callable[[str], tuple[int, ...] | None]:
        """Chunk coordinates (inside the current grid) of a key relative to the array, or None
        for any other key; the layout is looked up once, as listings run it for every key."""
        if self.ndim == 0:
            only_key = self._metadata.chunk_key(())
            return lambda relative_key: () if relative_key == only_key else None
        prefix, separator = self._chunk_key_layout()
        grid_shape, ndim = self._stored_grid_shape, self.ndim

        def parse(relative_key: str) -> tuple[int, ...] | None:
            if not relative_key.startswith(prefix):
                return None
            parts = relative_key[len(prefix) :].split(separator)
            if len(parts) != ndim or not all(_DIGITS.fullmatch(p) for p in parts):
                return None
            coords = tuple(int(p) for p in parts)
            if any(c >= g for c, g in zip(coords, grid_shape, strict=True)):
                return None
            return coords

        return parse

    def _check_probe_budget(self, operation: str) -> None:
        """Refuse, before any request, to probe more chunk keys than ``config.max_probed_chunks``."""
        ncells = math.prod(self._stored_grid_shape)
        cap = config.get("max_probed_chunks")
        if ncells > cap:
            where = self._store.key_url(self._path) if self._path else self._store.location
            raise StoreError(
                f"{where}: {operation} needs the stored chunks, and {type(self._store).__name__} cannot list "
                f"keys; probing them would take one request for each of the {ncells} chunks of the grid, "
                f"above the cap of {cap} (asyncarr.config max_probed_chunks). "
                "Count where the data is written, or on a copy in a store that can list"
            )

    async def _probe(self, keys: list[str], probe: Callable[[str], Any]) -> list[Any]:
        """``probe(key)`` for every key, at most ``config.concurrency`` at once under the store's limiter."""
        results: list[Any] = [None] * len(keys)
        limiter = self._store.limiter

        async def one(position: int) -> None:
            async with limiter:
                results[position] = await probe(keys[position])

        if keys:
            await for_each_concurrently(range(len(keys)), one, config.get("concurrency"))
        return results

    def _grid_keys(self) -> list[tuple[tuple[int, ...], str]]:
        chunk_key = self._chunk_key_function()
        return [(coords, chunk_key(coords)) for coords in itertools.product(*map(range, self._stored_grid_shape))]

    async def _stored_chunks(self, operation: str) -> list[tuple[tuple[int, ...], str]]:
        """(coordinates, key) of every stored chunk (shard): one listing, or where the store cannot
        list, one probe per chunk of a grid of at most ``config.max_probed_chunks`` (else `StoreError`)."""
        if not self._store.supports_listing:
            self._check_probe_budget(operation)
            cells = self._grid_keys()
            found = await self._probe([key for _, key in cells], self._store.exists)
            return [cell for cell, present in zip(cells, found, strict=True) if present]
        parse = self._chunk_key_parser()
        prefix = node_key(self._path, "") if self._path else ""
        stored = []
        async for key in self._store.list_prefix(self._path):
            coords = parse(key[len(prefix) :])
            if coords is not None:
                stored.append((coords, key))
        return stored

    async def stored_chunk_keys(self) -> list[str]:
        """The store keys of the stored chunks (shards, for a sharded array): one listing, or where the
        store cannot list, one probe per key of a grid of at most ``config.max_probed_chunks``."""
        return [key for _, key in await self._stored_chunks("stored_chunk_keys")]

    def _chunks_per_object(self) -> int:
        return math.prod(g // c for g, c in zip(self._grid, self.chunks, strict=True))

    async def nchunks_initialized(self) -> int:
        """How many chunks are stored (a sharded array counts every chunk of each stored shard, as zarr-python)."""
        return len(await self._stored_chunks("nchunks_initialized")) * self._chunks_per_object()

    async def _storage_summary(self, operation: str) -> tuple[int, int]:
        """(stored chunk objects, bytes stored with the metadata documents), from one listing plus
        one size request per stored key, or one size probe per chunk where the store cannot list."""
        if self._store.supports_listing:
            parse = self._chunk_key_parser()
            prefix = node_key(self._path, "") if self._path else ""
            keys = [key async for key in self._store.list_prefix(self._path)]
            nobjects = sum(parse(key[len(prefix) :]) is not None for key in keys)
            sizes = await self._probe(keys, self._store.getsize)
            return nobjects, sum(s for s in sizes if s is not None)
        self._check_probe_budget(operation)
        chunk_keys = [key for _, key in self._grid_keys()]
        # Every document an array of this format may have, not just those we would write
        # (zarr-python writes an empty .zattrs): a missing one has no size.
        names = ("zarr.json",) if self.zarr_format == 3 else (".zarray", ".zattrs")
        sizes = await self._probe(chunk_keys + [node_key(self._path, name) for name in names], self._store.getsize)
        nobjects = sum(size is not None for size in sizes[: len(chunk_keys)])
        return nobjects, sum(s for s in sizes if s is not None)

    async def nbytes_stored(self) -> int:
        """Bytes stored for this array: metadata documents plus chunks."""
        return (await self._storage_summary("nbytes_stored"))[1]

    async def info_complete(self, type_name: str = "asyncarr.AsyncArray") -> Info:
        """zarr 3's name for the table with stored bytes; asyncarr's ``info`` already has them, so the same table."""
        return await self.info(type_name)

    async def info(self, type_name: str = "asyncarr.AsyncArray") -> Info:
        """The summary table shown by the Zarr tutorials (stored sizes "unknown" past ``config.max_probed_chunks``
        on a store that cannot list)."""
        stored: int | None = None
        initialized: int | None = None
        if self._store.supports_listing or math.prod(self._stored_grid_shape) <= config.get("max_probed_chunks"):
            nobjects, stored = await self._storage_summary("info")
            initialized = nobjects * self._chunks_per_object()
        rows: list[tuple[str, str]] = []
        if self._path:
            rows.append(("Name", self.name))
        rows += [
            ("Type", type_name),
            ("Zarr format", str(self.zarr_format)),
            ("Data type", str(self.dtype)),
            ("Shape", str(self.shape)),
            ("Chunk shape", str(self.chunks)),
            *((("Shard shape", str(self.shards)),) if self.shards else ()),
            ("Order", self.order),
            ("Read-only", str(self.read_only)),
        ]
        rows += [(f"Filter [{i}]", repr(f)) for i, f in enumerate(self.filters or ())]
        rows.append(("Compressor", repr(self.compressor)))
        store_type = type(self._store)
        rows += [
            ("Store type", f"{store_type.__module__}.{store_type.__qualname__}"),
            ("No. bytes", bytes_with_human_size(self.nbytes)),
            ("No. bytes stored", "unknown" if stored is None else bytes_with_human_size(stored)),
            ("Storage ratio", f"{self.nbytes / stored:.1f}" if stored else "-"),
            ("Chunks initialized", f"{'unknown' if initialized is None else initialized}/{self.nchunks}"),
        ]
        return Info(tuple(rows))
