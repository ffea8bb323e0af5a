"""Copying arrays and hierarchies between stores: `asyncarr.copy` (and `asyncarr cp`), zarr 2's
``copy``, ``copy_all`` and ``copy_store``.

Chunks travel as the bytes stored (no decode, no encode) unless the caller asks for another
encoding: zarr 2's ``**create_kws`` (``compressor=``, ``chunks=``, ``zarr_format=``, ...) or a
destination group of the other Zarr format. The work is planned first (every node, every
chunk key, what the destination already holds), so the progress total is known before the
first chunk moves. Then the chunks move, many in flight under each store's limiter, and a
node's metadata is written after all chunks, so an interrupted copy never shows a node whose
chunks are missing: running it again resumes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import re
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, TextIO

from . import config
from .array import AsyncArray
from .chunk_cache import forget_node
from .concurrency import for_each_concurrently
from .errors import CopyError
from .group import AsyncGroup, ensure_parent_groups, open_node
from .metadata import GroupMetadataV2, GroupMetadataV3, load_json_object, node_kind, parse_node
from .nodes import join_path, node_key, normalize_path, read_documents, write_documents
from .stores.base import Store
from .stores.url import as_store

__all__ = ["CopyResult", "copy", "copy_all", "copy_store"]

IfExists = Literal["raise", "replace", "skip", "skip_initialized"]
_IF_EXISTS = ("raise", "replace", "skip", "skip_initialized")
Progress = Callable[[int, int], None]
Log = Callable[..., None] | str | TextIO | None


class CopyResult(tuple):
    """``(n_copied, n_skipped, n_bytes_copied)`` as zarr 2 returns it, with the chunk counts of ``asyncarr cp``.

    The tuple counts nodes (arrays and groups; keys for ``copy_store``) and the uncompressed
    bytes of the arrays copied, as zarr 2 does. The attributes count what moved: stored chunk
    objects (shards, for a sharded array) copied and skipped, the stored bytes written, and
    the seconds taken; ``metrics`` holds each store's request counts where the store has them.
    """

    chunks_copied: int
    chunks_skipped: int
    bytes_copied: int
    seconds: float
    metrics: dict[str, dict[str, Any]]

    def __new__(
        cls,
        counts: tuple[int, int, int],
        *,
        chunks_copied: int = 0,
        chunks_skipped: int = 0,
        bytes_copied: int = 0,
        seconds: float = 0.0,
        metrics: dict[str, dict[str, Any]] | None = None,
    ) -> CopyResult:
        result = super().__new__(cls, counts)
        result.chunks_copied = chunks_copied
        result.chunks_skipped = chunks_skipped
        result.bytes_copied = bytes_copied
        result.seconds = seconds
        result.metrics = metrics or {}
        return result

    n_copied = property(lambda self: self[0], doc="Nodes (or, for copy_store, keys) copied.")
    n_skipped = property(lambda self: self[1], doc="Nodes (or keys) skipped because they exist.")
    n_bytes_copied = property(lambda self: self[2], doc="zarr 2's count: uncompressed bytes of the arrays copied.")

    def summary(self) -> dict[str, Any]:
        """The JSON summary ``asyncarr cp --json`` prints."""
        return {
            "chunks_copied": self.chunks_copied,
            "chunks_skipped": self.chunks_skipped,
            "bytes_copied": self.bytes_copied,
            "seconds": round(self.seconds, 3),
        }

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_result, (tuple(self), self.__dict__))


def _rebuild_result(counts: tuple[int, int, int], attributes: dict[str, Any]) -> CopyResult:
    return CopyResult(counts, **attributes)


class _LogWriter:
    """zarr 2's ``log=``: a callable, a file path (opened, written, closed) or a file-like object."""

    def __init__(self, log: Log) -> None:
        self._call: Callable[..., None] | None = None
        self._file: TextIO | None = None
        self._owned = False
        if log is None:
            return
        if callable(log):
            self._call = log
        elif isinstance(log, str):
            self._file, self._owned = open(log, "w"), True  # closed by close()
        elif hasattr(log, "write"):
            self._file = log
        else:
            raise TypeError(f"log must be a callable, a file path or a file-like object, got {log!r}")

    def __call__(self, message: str) -> None:
        if self._call is not None:
            self._call(message)
        elif self._file is not None:
            print(message, file=self._file)
            if hasattr(self._file, "flush"):
                self._file.flush()

    def close(self) -> None:
        if self._owned and self._file is not None:
            self._file.close()


def _log_summary(log: _LogWriter, dry_run: bool, n_copied: int, n_skipped: int, n_bytes: int) -> None:
    message = f"{'dry run' if dry_run else 'all done'}: {n_copied:,} copied, {n_skipped:,} skipped"
    if not dry_run:
        message += f", {n_bytes:,} bytes copied"
    log(message)


@dataclasses.dataclass
class _ChunkTask:
    """One stored chunk object to bring over; ``check``: the destination has the key already."""

    source_store: Store
    source_key: str
    dest_store: Store
    dest_key: str
    check: bool


@dataclasses.dataclass
class _NodeWrite:
    """What finishes one node after its chunks: stale keys to delete, then its documents."""

    dest_store: Store
    dest_path: str
    documents: dict[str, bytes]
    stale_keys: list[str] = dataclasses.field(default_factory=list)
    there: Mapping[str, bytes | None] = dataclasses.field(default_factory=dict)
    """The node's documents at the destination when planned: one already identical is not rewritten
    (a zip file cannot rewrite a member, and it saves a request)."""

    def changed_documents(self) -> dict[str, bytes]:
        """The documents to write: those not already there byte for byte."""
        return {name: value for name, value in self.documents.items() if self.there.get(name) != value}


@dataclasses.dataclass
class _Reencode:
    """An array copied by reading and writing values (another encoding or Zarr format)."""

    source: AsyncArray
    dest_store: Store
    dest_path: str
    create_kws: dict[str, Any]
    attributes: dict[str, Any]


class _Copier:
    """Plans a copy (nodes, chunk keys, what exists), then runs it; counts everything."""

    def __init__(
        self,
        *,
        if_exists: IfExists,
        shallow: bool,
        without_attrs: bool,
        dry_run: bool,
        verify: bool,
        log: _LogWriter,
        create_kws: Mapping[str, Any],
    ) -> None:
        if if_exists not in _IF_EXISTS:
            raise ValueError(f"if_exists must be one of {', '.join(map(repr, _IF_EXISTS))}; got {if_exists!r}")
        self.if_exists = if_exists
        self.shallow = shallow
        self.without_attrs = without_attrs
        self.dry_run = dry_run
        self.verify = verify
        self.log = log
        self.create_kws = dict(create_kws)
        self.n_copied = self.n_skipped = self.n_bytes = 0
        self.chunks_copied = self.chunks_skipped = self.bytes_copied = 0
        self.tasks: list[_ChunkTask] = []
        self.clears: list[tuple[Store, str]] = []
        self.node_writes: list[_NodeWrite] = []
        self.reencodes: list[_Reencode] = []

    # -- planning ---------------------------------------------------------------------------------

    async def plan(
        self,
        source: AsyncArray | AsyncGroup,
        dest_store: Store,
        dest_path: str,
        *,
        root: bool,
        dest_format: int,
        where: str,
    ) -> None:
        """Plan copying ``source`` to ``dest_path`` of ``dest_store`` (``where`` names it in messages)."""
        documents = await read_documents(dest_store, dest_path)
        location = dest_store.key_url(dest_path) if dest_path else dest_store.location
        kind = node_kind(documents, location)
        if isinstance(source, AsyncArray):
            await self._plan_array(source, dest_store, dest_path, kind, documents, dest_format, where)
        elif root or not self.shallow:
            await self._plan_group(source, dest_store, dest_path, kind, documents, dest_format, where)

    async def _plan_array(
        self,
        source: AsyncArray,
        dest_store: Store,
        dest_path: str,
        kind: str | None,
        documents: Mapping[str, bytes | None],
        dest_format: int,
        where: str,
    ) -> None:
        label = f"{source.name} {source.shape} {source.dtype}"
        reencode = bool(self.create_kws) or dest_format != source.zarr_format
        resume = False
        if kind is not None:
            if self.if_exists == "raise":
                raise CopyError(
                    f"{where}: {'an array' if kind == 'array' else 'a group'} already exists there; pass "
                    "if_exists='replace' to replace it, 'skip' to keep it, or 'skip_initialized' to complete "
                    "an array copied before (asyncarr cp: --overwrite)"
                )
            if self.if_exists == "skip" or (
                self.if_exists == "skip_initialized"
                and kind == "array"
                and reencode
                and await _fully_initialized(dest_store, dest_path)
            ):
                self.log(f"skip {label}")
                self.n_skipped += 1
                return
            if self.if_exists == "skip_initialized" and kind == "array" and not reencode:
                _check_same_array(source, documents, dest_store, dest_path, where)
                resume = True
            elif kind == "group" and self.if_exists == "skip_initialized":
                raise CopyError(f"{where}: a group is there, so array {source.name} cannot be completed into it")
        self.log(f"copy {label}")
        self.n_copied += 1
        if not self.dry_run:
            self.n_bytes += source.nbytes
        if kind is not None and not resume:
            self.clears.append((dest_store, dest_path))
        attributes = {} if self.without_attrs else dict(source.attrs)
        if reencode:
            self.reencodes.append(_Reencode(source, dest_store, dest_path, self._reencode_kws(dest_format), attributes))
            return
        source_prefix = node_key(source.path, "") if source.path else ""
        existing: set[str] = set()
        if kind is not None and resume:
            existing = {key async for key in dest_store.list_prefix(dest_path)}
        elif kind is None and dest_store.supports_listing:
            # Keys under a path with no node: what an interrupted copy left. Resume over them.
            existing = {key async for key in dest_store.list_prefix(dest_path)}
        wanted: set[str] = set()
        for source_key in await source.stored_chunk_keys():
            dest_key = node_key(dest_path, source_key[len(source_prefix) :])
            wanted.add(dest_key)
            self.tasks.append(_ChunkTask(source.store, source_key, dest_store, dest_key, dest_key in existing))
        # Chunk keys of this layout that the source does not have (left by an earlier write); never other keys.
        dest_prefix, is_chunk_key = node_key(dest_path, ""), source._chunk_key_parser()
        stale = [key for key in existing - wanted if is_chunk_key(key[len(dest_prefix) :]) is not None]
        documents_now = await _array_documents(source, attributes, self.without_attrs)
        self.node_writes.append(_NodeWrite(dest_store, dest_path, documents_now, stale, there=documents))

    async def _plan_group(
        self,
        source: AsyncGroup,
        dest_store: Store,
        dest_path: str,
        kind: str | None,
        documents: Mapping[str, bytes | None],
        dest_format: int,
        where: str,
    ) -> None:
        if kind == "array":
            if self.if_exists == "raise":
                raise CopyError(
                    f"{where}: an array already exists there, so group {source.name} cannot be copied; "
                    "pass if_exists='replace' to replace it or 'skip' to keep it"
                )
            if self.if_exists == "skip":
                self.log(f"skip {source.name}")
                self.n_skipped += 1
                return
            if self.if_exists == "skip_initialized":
                raise CopyError(
                    f"{where}: an array is there, so group {source.name} cannot be completed into it; "
                    "pass if_exists='replace' (asyncarr cp: --overwrite) to replace the array"
                )
        self.log(f"copy {source.name}")
        self.n_copied += 1
        if kind == "array":
            self.clears.append((dest_store, dest_path))
        group_documents = await self._group_documents(source, kind, documents, dest_format)
        self.node_writes.append(_NodeWrite(dest_store, dest_path, group_documents, there=documents))
        # Every member is planned; under ``shallow`` a member group then copies nothing (zarr 2).
        async for name, child in source.members():
            await self.plan(
                child,
                dest_store,
                join_path(dest_path, name),
                root=False,
                dest_format=dest_format,
                where=f"{where.rstrip('/')}/{name}",
            )

    async def _group_documents(
        self, source: AsyncGroup, kind: str | None, documents: Mapping[str, bytes | None], dest_format: int
    ) -> dict[str, bytes]:
        """The group's documents at the destination: its own where nothing is there (consolidated
        metadata kept only for a whole copy of the same format), else the group there with the
        source's attributes added, as zarr 2's ``attrs.update``."""
        if kind == "group":
            there = parse_node(dict(documents), "")
            attributes = dict(there.attributes)
            if not self.without_attrs:
                attributes.update(source.attrs)
            if attributes == there.attributes and not getattr(there, "consolidated_metadata", None):
                return {name: value for name, value in documents.items() if value is not None}  # as it is
            kept = dataclasses.replace(there, attributes=attributes)
            if isinstance(kept, GroupMetadataV3):
                kept = dataclasses.replace(kept, consolidated_metadata=None)
            return kept.to_documents()
        attributes = {} if self.without_attrs else dict(source.attrs)
        whole = not self.shallow and not self.without_attrs and not self.create_kws
        if dest_format == source.zarr_format and whole:
            raw = {
                name: value
                for name, value in (await read_documents(source.store, source.path, source.zarr_format)).items()
                if value is not None
            }
            if raw:
                if source.zarr_format == 2:
                    consolidated = await source.store.get(node_key(source.path, ".zmetadata"))
                    if consolidated is not None:
                        raw[".zmetadata"] = consolidated
                return raw
        metadata = GroupMetadataV3(attributes) if dest_format == 3 else GroupMetadataV2(attributes)
        return metadata.to_documents()

    def _reencode_kws(self, dest_format: int) -> dict[str, Any]:
        """zarr 2's ``create_kws`` as `asyncarr.from_array`'s keywords (``compressor=`` -> ``compressors=``)."""
        kws = dict(self.create_kws)
        if "compressor" in kws:
            compressor = kws.pop("compressor")
            kws["compressors"] = None if compressor is None else [compressor]
        kws.setdefault("zarr_format", dest_format)
        return kws

    @property
    def total_chunks(self) -> int:
        """Chunk objects the run will bring over or check."""
        return len(self.tasks) + sum(_stored_objects(reencode.source) for reencode in self.reencodes)

    # -- running ------------------------------------------------------------------------------------

    async def run(self, progress: Progress | None, concurrency: int) -> None:
        """Copy the planned chunks, then finish each node; a dry run only counts what it would copy."""
        total, done = self.total_chunks, 0

        def advance(count: int = 1) -> None:
            nonlocal done
            done += count
            if progress is not None:
                progress(done, total)

        if progress is not None:
            progress(0, total)
        if not self.dry_run:
            for store, path in self.clears:
                store._check_writable()
                await store.delete_prefix(path)
                forget_node(store.location, path)
        bring_over = self._size_to_copy if self.dry_run else self._transfer

        async def transfer(task: _ChunkTask) -> None:
            copied = await bring_over(task)
            if copied is None:
                self.chunks_skipped += 1
            else:
                self.chunks_copied += 1
                self.bytes_copied += copied
            advance()

        await for_each_concurrently(self.tasks, transfer, concurrency)
        for reencode in self.reencodes:
            if not self.dry_run:
                await self._run_reencode(reencode)
            chunks = _stored_objects(reencode.source)
            self.chunks_copied += chunks
            advance(chunks)
        if self.dry_run:
            return
        for write in self.node_writes:
            if write.stale_keys:
                await write.dest_store.delete_many(write.stale_keys)
            forget_node(write.dest_store.location, write.dest_path)  # its chunks were rewritten
        for write in self.node_writes:  # parents before children: planned in that order
            await write_documents(write.dest_store, write.dest_path, write.changed_documents())

    async def _size_to_copy(self, task: _ChunkTask) -> int | None:
        """The stored size a run would copy for ``task`` (None: it would be skipped, the destination has it)."""
        differs, value = await self._differs(task)
        if not differs:
            return None
        return (
            len(value)
            if value is not None
            else await _limited(task.source_store, task.source_store.getsize(task.source_key))
        )

    async def _transfer(self, task: _ChunkTask) -> int | None:
        """Bring one chunk object over; its stored size if written, None if the destination had it."""
        differs, value = await self._differs(task)
        if not differs:
            return None
        source = task.source_store
        if value is None:
            value = await _limited(source, source.get(task.source_key))
            if value is None:  # deleted at the source since it was listed: nothing to copy
                return None
        await _limited(task.dest_store, task.dest_store.set(task.dest_key, value))
        return len(value)

    async def _differs(self, task: _ChunkTask) -> tuple[bool, bytes | None]:
        """Whether the destination lacks ``task``'s chunk or holds another size (another content with
        ``verify``), and the source's bytes when comparing them fetched those."""
        if not task.check:
            return True, None
        source, dest = task.source_store, task.dest_store
        if self.verify:
            value, there = await asyncio.gather(
                _limited(source, source.get(task.source_key)), _limited(dest, dest.get(task.dest_key))
            )
            return value is not None and value != there, value
        size, size_there = await asyncio.gather(
            _limited(source, source.getsize(task.source_key)), _limited(dest, dest.getsize(task.dest_key))
        )
        return size is not None and size != size_there, None

    async def _run_reencode(self, reencode: _Reencode) -> None:
        from . import api  # same layer; api imports this module, so not at import time

        source = reencode.source
        kws = dict(reencode.create_kws)
        kws.setdefault("fill_value", source.fill_value)
        created = await api.from_array(
            reencode.dest_store,
            data=source,
            name=reencode.dest_path or None,
            attributes=reencode.attributes,
            overwrite=True,
            **kws,
        )
        self.bytes_copied += await created.nbytes_stored()


async def _limited(store: Store, request: Any) -> Any:
    """Await ``request`` under ``store``'s shared limiter (so copies respect what the store allows)."""
    async with store.limiter:
        return await request


def _stored_objects(array: AsyncArray) -> int:
    """How many stored objects (shards, or chunks) the array's grid has."""
    grid = array.shards or array.chunks
    return math.prod(-(-size // block) for size, block in zip(array.shape, grid, strict=True))


async def _fully_initialized(store: Store, path: str) -> bool:
    there = await open_node(store, path, read_only=True)
    return isinstance(there, AsyncArray) and await there.nchunks_initialized() == there.nchunks


def _comparable(document: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in document.items() if key != "attributes"}


def _check_same_array(
    source: AsyncArray, documents: Mapping[str, bytes | None], store: Store, path: str, where: str
) -> None:
    """Refuse to complete an array whose metadata (attributes aside) differs from the source's."""
    name = "zarr.json" if source.zarr_format == 3 else ".zarray"
    raw = documents.get(name)
    there = None if raw is None else load_json_object(raw, store.key_url(node_key(path, name)))
    if there is None or _comparable(there) != _comparable(source.metadata.to_json()):
        raise CopyError(
            f"{where}: an array with other metadata (shape, dtype, chunks or codecs) is there; "
            "pass if_exists='replace' (asyncarr cp: --overwrite) to replace it"
        )


async def _array_documents(source: AsyncArray, attributes: dict[str, Any], without_attrs: bool) -> dict[str, bytes]:
    """The array's documents as stored (so fields asyncarr does not model survive), unless
    attributes are dropped; rebuilt from the parsed metadata where the store has none (a
    consolidated-only source)."""
    if not without_attrs:
        raw = await read_documents(source.store, source.path, source.zarr_format)
        documents = {name: value for name, value in raw.items() if value is not None}
        if "zarr.json" in documents or ".zarray" in documents:
            return documents
    return source.metadata.with_attributes(attributes).to_documents()


def _as_node(value: Any) -> AsyncArray | AsyncGroup | None:
    """The async node of either API's array or group; None for anything else (a store, a URL)."""
    for attribute in ("async_array", "async_group"):
        inner = getattr(value, attribute, None)
        if isinstance(inner, AsyncArray | AsyncGroup):
            return inner
    return value if isinstance(value, AsyncArray | AsyncGroup) else None


def _result(copier: _Copier, started: float, stores: Iterable[tuple[str, Store]]) -> CopyResult:
    metrics: dict[str, dict[str, Any]] = {}
    for role, store in stores:
        snapshot = getattr(store, "metrics", None)
        if callable(snapshot):
            metrics[role] = snapshot().as_dict()
    return CopyResult(
        (copier.n_copied, copier.n_skipped, copier.n_bytes),
        chunks_copied=copier.chunks_copied,
        chunks_skipped=copier.chunks_skipped,
        bytes_copied=copier.bytes_copied,
        seconds=time.perf_counter() - started,
        metrics=metrics,
    )


def creation_keywords(
    *,
    chunks: Any = None,
    shards: Any = None,
    filters: Any = None,
    compressors: Any = None,
    compressor: Any = None,
    serializer: Any = None,
    fill_value: Any = None,
    order: Any = None,
    zarr_format: Any = None,
    chunk_key_encoding: Any = None,
    dimension_names: Any = None,
    config: Any = None,
) -> None:
    """The keywords ``copy`` and ``copy_all`` pass on to create each array anew (zarr 2's ``**create_kws``)."""


async def copy(
    source: Any,
    dest: Any,
    name: str | None = None,
    shallow: bool = False,
    without_attrs: bool = False,
    log: Log = None,
    if_exists: IfExists | None = None,
    dry_run: bool = False,
    *,
    verify: bool = False,
    progress: Progress | None = None,
    concurrency: int | None = None,
    source_path: str = "",
    dest_path: str = "",
    source_storage_options: Mapping[str, Any] | None = None,
    dest_storage_options: Mapping[str, Any] | None = None,
    **create_kws: Any,
) -> CopyResult:
    """Copy an array or a group with everything below it: into group ``dest`` (zarr 2), or to a store or URL.

    ``source``: an array or group of either API, or a store or URL (``source_path`` inside it).
    ``dest``: a group (the copy becomes its member ``name``, by default the source's name, as
    zarr 2's ``copy``), or a store or URL (the copy is at ``dest_path`` inside it, as
    ``asyncarr cp``). Chunks are copied as stored bytes unless ``create_kws`` (``compressor=``,
    ``chunks=``, ``zarr_format=``, ...) or a destination group of the other format ask for a new
    encoding. ``if_exists``: ``'raise'`` (the default into a group), ``'replace'``, ``'skip'``,
    or ``'skip_initialized'`` (the default to a store or URL): complete an array that is there
    with the same metadata, copying only the chunks missing or differing in size (in content,
    with ``verify=True``). ``progress(done, total)`` is called as chunk objects finish.
    """
    started = time.perf_counter()
    writer = _LogWriter(log)
    opened: list[Store] = []
    try:
        source_node = _as_node(source)
        if source_node is None:
            store, inner = as_store(source, read_only=True, storage_options=dict(source_storage_options or {}))
            if _is_path(source):
                opened.append(store)
            source_node = await open_node(store, join_path(inner, normalize_path(source_path)), read_only=True)
        dest_group = dest if isinstance(dest, AsyncGroup) else getattr(dest, "async_group", None)
        if dest_group is not None:
            if name is None:
                name = source_node.basename
                if not name:
                    raise TypeError("source has no name (it is a root group); pass name= to say what to call the copy")
            dest_store, target = dest_group.store, join_path(dest_group.path, normalize_path(name))
            dest_format = dest_group.zarr_format
            where = f"{dest_group.name.rstrip('/')}/{normalize_path(name)}"
            chosen: IfExists = if_exists or "raise"
        else:
            dest_store, inner = as_store(dest, read_only=False, storage_options=dict(dest_storage_options or {}))
            if _is_path(dest):
                opened.append(dest_store)
            target = join_path(inner, normalize_path(dest_path), normalize_path(name))
            dest_format = int(create_kws.get("zarr_format") or source_node.zarr_format)
            where = dest_store.key_url(target) if target else dest_store.location
            chosen = if_exists or "skip_initialized"
        _refuse_copy_into_itself(source_node, dest_store, target)
        if not dry_run:
            dest_store._check_writable()
        copier = _Copier(
            if_exists=chosen,
            shallow=shallow,
            without_attrs=without_attrs,
            dry_run=dry_run,
            verify=verify,
            log=writer,
            create_kws=create_kws,
        )
        await copier.plan(source_node, dest_store, target, root=True, dest_format=dest_format, where=where)
        if dest_group is None and target and not dry_run:
            await ensure_parent_groups(dest_store, target, dest_format)
        await copier.run(progress, concurrency or config.get("concurrency"))
        _log_summary(writer, dry_run, copier.n_copied, copier.n_skipped, copier.n_bytes)
        return _result(copier, started, [("source", source_node.store), ("dest", dest_store)])
    finally:
        writer.close()
        for store in opened:
            await store.close()


async def copy_all(
    source: Any,
    dest: Any,
    shallow: bool = False,
    without_attrs: bool = False,
    log: Log = None,
    if_exists: IfExists = "raise",
    dry_run: bool = False,
    **create_kws: Any,
) -> CopyResult:
    """Copy every member of group ``source`` into group ``dest`` (zarr 2's ``copy_all``)."""
    started = time.perf_counter()
    source_group, dest_group = _as_node(source), _as_node(dest)
    if not isinstance(source_group, AsyncGroup) or not isinstance(dest_group, AsyncGroup):
        raise TypeError("copy_all copies the members of one group into another: pass two groups")
    writer = _LogWriter(log)
    try:
        if not dry_run:
            dest_group.store._check_writable()
        copier = _Copier(
            if_exists=if_exists,
            shallow=shallow,
            without_attrs=without_attrs,
            dry_run=dry_run,
            verify=False,
            log=writer,
            create_kws=create_kws,
        )
        async for member_name, child in source_group.members():
            target = join_path(dest_group.path, member_name)
            _refuse_copy_into_itself(child, dest_group.store, target)
            where = f"{dest_group.name.rstrip('/')}/{member_name}"
            await copier.plan(
                child, dest_group.store, target, root=False, dest_format=dest_group.zarr_format, where=where
            )
        await copier.run(None, config.get("concurrency"))
        _log_summary(writer, dry_run, copier.n_copied, copier.n_skipped, copier.n_bytes)
        return _result(copier, started, [("source", source_group.store), ("dest", dest_group.store)])
    finally:
        writer.close()


async def copy_store(
    source: Any,
    dest: Any,
    source_path: str = "",
    dest_path: str = "",
    excludes: str | Iterable[str] | None = None,
    includes: str | Iterable[str] | None = None,
    flags: int = 0,
    if_exists: Literal["raise", "replace", "skip"] = "raise",
    dry_run: bool = False,
    log: Log = None,
) -> CopyResult:
    """Copy every key below ``source_path`` of one store to ``dest_path`` of another, as stored (zarr 2's).

    ``excludes`` and ``includes`` are regular expressions searched in each source key (an
    include overrides an exclude). Counts are keys; the bytes are the stored bytes.
    """
    started = time.perf_counter()
    if if_exists not in ("raise", "replace", "skip"):
        raise ValueError(f"if_exists must be one of 'raise', 'replace', 'skip'; got {if_exists!r}")
    source_store, source_inner = as_store(source, read_only=True)
    dest_store, dest_inner = as_store(dest)
    opened = [store for store, given in ((source_store, source), (dest_store, dest)) if _is_path(given)]
    source_prefix = node_key(join_path(source_inner, normalize_path(source_path)), "")
    dest_prefix = node_key(join_path(dest_inner, normalize_path(dest_path)), "")
    excluded = [re.compile(pattern, flags) for pattern in _patterns(excludes)]
    included = [re.compile(pattern, flags) for pattern in _patterns(includes)]
    writer = _LogWriter(log)
    n_copied = n_skipped = n_bytes = 0
    try:
        if not dry_run:
            dest_store._check_writable()
        keys = sorted([key async for key in source_store.list_prefix(source_prefix.rstrip("/"))])
        existing: set[str] = set()
        if if_exists != "replace":
            existing = {key async for key in dest_store.list_prefix(dest_prefix.rstrip("/"))}
        copies: list[tuple[str, str]] = []
        for source_key in keys:
            if not source_key.startswith(source_prefix):
                continue
            if any(p.search(source_key) for p in excluded) and not any(p.search(source_key) for p in included):
                continue
            dest_key = dest_prefix + source_key[len(source_prefix) :]
            label = source_key if dest_key == source_key else f"{source_key} -> {dest_key}"
            if dest_key in existing:
                if if_exists == "raise":
                    raise CopyError(f"{dest_store.key_url(dest_key)}: key {dest_key!r} exists in the destination")
                writer(f"skip {label}")
                n_skipped += 1
                continue
            writer(f"copy {label}")
            n_copied += 1
            copies.append((source_key, dest_key))

        async def transfer(pair: tuple[str, str]) -> None:
            nonlocal n_bytes
            value = await _limited(source_store, source_store.get(pair[0]))
            if value is not None:
                await _limited(dest_store, dest_store.set(pair[1], value))
                n_bytes += len(value)

        if not dry_run:
            await for_each_concurrently(copies, transfer, config.get("concurrency"))
        _log_summary(writer, dry_run, n_copied, n_skipped, n_bytes)
        copier = _Copier(
            if_exists="raise",
            shallow=False,
            without_attrs=False,
            dry_run=dry_run,
            verify=False,
            log=writer,
            create_kws={},
        )
        copier.n_copied, copier.n_skipped, copier.n_bytes = n_copied, n_skipped, n_bytes
        copier.chunks_copied, copier.chunks_skipped = (0 if dry_run else len(copies)), n_skipped
        copier.bytes_copied = n_bytes
        return _result(copier, started, [("source", source_store), ("dest", dest_store)])
    finally:
        writer.close()
        for store in opened:
            await store.close()


def _is_path(value: Any) -> bool:
    """Whether ``value`` is a path or URL (a store this call opens, and so closes)."""
    return isinstance(value, str) or hasattr(value, "__fspath__")


def _patterns(value: str | Iterable[str] | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def _refuse_copy_into_itself(source: AsyncArray | AsyncGroup, dest_store: Store, target: str) -> None:
    """ValueError for a copy onto its source, or of a group into itself (it would never end)."""
    if dest_store.location != source.store.location:
        return
    below = isinstance(source, AsyncGroup) and (source.path == "" or target.startswith(source.path + "/"))
    if target == source.path or below:
        raise ValueError(f"cannot copy {source.name} into itself ({dest_store.key_url(target) or dest_store.location})")
