"""AsyncGroup: a node holding arrays and groups, with attributes and a printable tree."""

from __future__ import annotations

import asyncio
import types
import warnings
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from . import config
from .array import AsyncArray, StorePath, store_and_path
from .chunk_cache import forget_node
from .concurrency import for_each_concurrently
from .creation import array_config_write_empty_chunks, build_array_metadata
from .errors import (
    ContainsArrayError,
    ContainsGroupError,
    GroupNotFoundError,
    MetadataError,
    NodeNotFoundError,
    ReadOnlyError,
)
from .metadata import (
    GroupMetadataV2,
    GroupMetadataV3,
    consolidated_children,
    consolidated_documents,
    consolidated_subtree,
    node_kind,
    parse_consolidated_v2,
    parse_consolidated_v3,
    parse_node,
)
from .nodes import (
    METADATA_NAMES,
    PickledByConfiguration,
    describe_missing,
    join_path,
    node_key,
    normalize_path,
    read_documents,
    write_documents,
)
from .stores.base import Store
from .tree import Tree, TreeNode

if TYPE_CHECKING:  # type-only: the facade imports this module at run time, not the reverse
    from .facade import Group

__all__ = ["AsyncGroup", "ensure_parent_groups", "open_node"]

GroupMetadata = GroupMetadataV2 | GroupMetadataV3
# The documents whose presence makes a node (a lone v2 ``.zattrs`` does not).
_NODE_MARKERS = ("zarr.json", ".zarray", ".zgroup")
# Longest error message shown for an unreadable member in a tree() line.
_TREE_ERROR_CHARS = 300


def _node_from_documents(
    store: Store, path: str, documents: Mapping[str, bytes | None], *, read_only: bool, consolidated: dict | None = None
) -> AsyncArray | AsyncGroup:
    if not any(value is not None for value in documents.values()):
        raise NodeNotFoundError(describe_missing(store, path))
    metadata = parse_node(dict(documents), store.key_url(path) if path else store.location)
    if isinstance(metadata, GroupMetadataV2 | GroupMetadataV3):
        return AsyncGroup(store, path, metadata, read_only=read_only, consolidated=consolidated)
    return AsyncArray(store, path, metadata, read_only=read_only)


async def open_node(
    store: Store,
    path: str = "",
    *,
    read_only: bool = False,
    zarr_format: int | None = None,
    documents: Mapping[str, bytes | None] | None = None,
) -> AsyncArray | AsyncGroup:
    """Open whatever node is at ``path``: an AsyncArray or an AsyncGroup (one round trip for the
    documents, a v2 group's ``.zmetadata`` included; none when the caller fetched ``documents``
    with ``read_documents(..., consolidated=True)``)."""
    path = normalize_path(path)
    if documents is None:
        documents = await read_documents(store, path, zarr_format, consolidated=True)
    return _node_from_fetched(store, path, documents, read_only=read_only)


def _node_from_fetched(
    store: Store, path: str, fetched: Mapping[str, bytes | None], *, read_only: bool
) -> AsyncArray | AsyncGroup:
    """The node of documents fetched by ``read_documents(..., consolidated=True)``: a v2 group gets
    its consolidated entries, and is opened from them alone when its own documents are missing."""
    documents = dict(fetched)
    raw_consolidated = documents.pop(".zmetadata", None)
    if raw_consolidated is None or documents.get("zarr.json") is not None or documents.get(".zarray") is not None:
        return _node_from_documents(store, path, documents, read_only=read_only)
    entries = parse_consolidated_v2(raw_consolidated, store.key_url(path) if path else store.location)
    if documents.get(".zgroup") is None:
        own = consolidated_documents(entries, "")
        if own.get(".zgroup") is None:  # not a group's consolidation
            return _node_from_documents(store, path, documents, read_only=read_only)
        documents = own
    return _node_from_documents(store, path, documents, read_only=read_only, consolidated=entries)


async def ensure_parent_groups(store: Store, path: str, zarr_format: int) -> None:
    """Create group metadata for every missing ancestor of ``path``, the root included.

    Every ancestor is checked before anything is written: one that is an array (of either format,
    decided from its parsed metadata) raises ContainsArrayError, one whose ``zarr.json`` cannot be
    read raises its MetadataError, and then nothing is created.
    """
    parts = normalize_path(path).split("/")[:-1]
    ancestors = [""] + ["/".join(parts[: i + 1]) for i in range(len(parts))] if path else []
    found = await asyncio.gather(*(read_documents(store, p) for p in ancestors))
    missing = []
    for ancestor, documents in zip(ancestors, found, strict=True):
        where = store.key_url(ancestor) if ancestor else store.location
        kind = node_kind(documents, where)
        if kind == "array":
            raise ContainsArrayError(f"{where}: an array is here, not a group")
        if kind is None:
            missing.append(ancestor)
    metadata = GroupMetadataV3({}) if zarr_format == 3 else GroupMetadataV2({})
    for ancestor in missing:
        await write_documents(store, ancestor, metadata.to_documents())


class AsyncGroup(PickledByConfiguration):
    """A Zarr group in a store; every method that touches the store is a coroutine."""

    _node_kind = "group"

    def __init__(
        self,
        store: Store,
        path: str,
        metadata: GroupMetadata,
        *,
        read_only: bool = False,
        consolidated: dict[str, dict] | None = None,
    ) -> None:
        self._store = store
        self._path = normalize_path(path)
        self._metadata = metadata
        self._read_only = read_only or store.read_only
        # Consolidated entries (document keys relative to this group -> JSON), when available.
        if consolidated is None and isinstance(metadata, GroupMetadataV3) and metadata.consolidated_metadata:
            where = store.key_url(self._path) if self._path else store.location
            consolidated = parse_consolidated_v3(metadata.consolidated_metadata, where)
        self._consolidated = consolidated

    @classmethod
    async def open(
        cls, store: Store | Any, path: str = "", *, read_only: bool = False, zarr_format: int | None = None
    ) -> AsyncGroup:
        """Open the existing group at ``path`` of ``store`` (a Store or any store-like, as zarr 3's ``open``);
        raise GroupNotFoundError or ContainsArrayError.

        One round trip: the documents of either format (or of ``zarr_format``) and a v2 group's
        ``.zmetadata`` are asked for at once; a consolidated group's members then cost nothing more.
        """
        store, path = store_and_path(store, path)
        documents = await read_documents(store, path, zarr_format, consolidated=True)
        if not any(value is not None for value in documents.values()):
            raise GroupNotFoundError(describe_missing(store, path))
        node = _node_from_fetched(store, path, documents, read_only=read_only)
        if not isinstance(node, AsyncGroup):
            raise ContainsArrayError(f"{store.key_url(path) or store.location}: an array is here, not a group")
        return node

    @classmethod
    async def create(
        cls, store: Store, path: str = "", *, zarr_format: int = 3, attributes: Mapping[str, Any] | None = None
    ) -> AsyncGroup:
        """Write a new group at ``path`` (the caller has checked for conflicts)."""
        store._check_writable()
        metadata_class = GroupMetadataV3 if zarr_format == 3 else GroupMetadataV2
        metadata = metadata_class(dict(attributes or {}))
        path = normalize_path(path)
        await write_documents(store, path, metadata.to_documents())
        return cls(store, path, metadata)

    @classmethod
    async def from_store(
        cls,
        store: Any,
        *,
        attributes: Mapping[str, Any] | None = None,
        overwrite: bool = False,
        zarr_format: int = 3,
    ) -> AsyncGroup:
        """Create a new group at the root of ``store`` (zarr 3's); ContainsGroupError/ContainsArrayError
        if a node is there, unless ``overwrite``."""
        from . import api  # api imports this module: it cannot be imported at module level

        return await api.create_group(store, zarr_format=zarr_format, overwrite=overwrite, attributes=attributes)

    # -- properties -------------------------------------------------------------------------

    store = property(lambda self: self._store, doc="The store holding the group.")
    path = property(lambda self: self._path, doc="Path of the group inside its store ('' for the root).")
    metadata = property(lambda self: self._metadata, doc="The parsed group metadata.")
    read_only = property(lambda self: self._read_only, doc="Whether writes are refused.")
    zarr_format = property(lambda self: self._metadata.zarr_format, doc="2 or 3.")

    synchronizer = property(lambda self: None, doc="zarr 2's group synchronizer: always None, as in zarr 3.")

    @property
    def store_path(self) -> StorePath:
        """zarr 3's ``store_path``: the store and the path of the group inside it."""
        return StorePath(self._store, self._path)

    @property
    def name(self) -> str:
        """The group's absolute name, e.g. '/foo/bar' ('/' for the root)."""
        return "/" + self._path

    @property
    def basename(self) -> str:
        """The last part of the name ('' for the root)."""
        return self._path.rsplit("/", 1)[-1]

    @property
    def attrs(self) -> Mapping[str, Any]:
        """A read-only snapshot of the user attributes; change them with ``update_attributes``."""
        return types.MappingProxyType(dict(self._metadata.attributes))

    def __repr__(self) -> str:
        return f"<AsyncGroup {self.name!r}>"

    async def __aenter__(self) -> AsyncGroup:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._store.close()

    # The facade's class, set by `asyncarr.facade` when it is imported (asyncarr's __init__ imports
    # it): the facade depends on this module, so this module cannot import it to find the class.
    _facade_class: ClassVar[type[Group]]

    def sync(self) -> Group:
        """Return the blocking facade (``asyncarr.sync.Group``) over this group."""
        return self._facade_class(self)

    def _check_writable(self) -> None:
        if self._read_only:
            where = self._store.key_url(self._path) if self._path else self._store.location
            raise ReadOnlyError(f"{where}: the group is read-only; open it with mode 'r+' or 'a' to change it")

    def _child_path(self, name: str) -> str:
        child = join_path(self._path, normalize_path(name))
        if not normalize_path(name):
            raise ValueError(f"a member name cannot be empty, got {name!r}")
        return child

    # -- members ------------------------------------------------------------------------------

    async def _child_documents(self, relative: str) -> dict[str, bytes | None]:
        if self._consolidated is not None:
            documents = consolidated_documents(self._consolidated, relative)
            if any(value is not None for value in documents.values()) or not self._store.supports_listing:
                return documents
        return await read_documents(self._store, join_path(self._path, relative), self.zarr_format)

    async def getitem(self, name: str) -> AsyncArray | AsyncGroup:
        """The array or group at ``name`` (a path like 'a/b' below this group); KeyError if missing."""
        path = self._child_path(name)
        relative = normalize_path(name)
        documents = await self._child_documents(relative)
        sub_consolidated = None if self._consolidated is None else consolidated_subtree(self._consolidated, relative)
        return _node_from_documents(
            self._store, path, documents, read_only=self._read_only, consolidated=sub_consolidated
        )

    async def contains(self, name: str) -> bool:
        """Whether an array or group exists at ``name``, readable or not (its metadata is not parsed)."""
        self._child_path(name)
        documents = await self._child_documents(normalize_path(name))
        return any(documents.get(marker) is not None for marker in _NODE_MARKERS)

    async def _child_names(self) -> list[str]:
        if self._consolidated is not None:
            return consolidated_children(self._consolidated, "")
        names = [name async for name in self._store.list_dir(self._path) if name not in METADATA_NAMES]
        return sorted(names)

    async def members(self, max_depth: int | None = 0) -> AsyncIterator[tuple[str, AsyncArray | AsyncGroup]]:
        """Yield ``(name, node)`` for every child, then (``max_depth`` > 0 or None) theirs, level by level.

        As in zarr 3, ``max_depth=0`` (the default) gives the direct children, ``n`` goes ``n``
        levels deeper and ``None`` has no limit; deeper names are paths from this group
        (``"a/b/x"``), each level sorted by name. A child whose metadata cannot be read is
        skipped with a warning naming it (``getitem`` raises its MetadataError; ``tree()``
        shows it), so one broken child hides no other.
        """
        if max_depth is not None and max_depth < 0:
            raise ValueError(f"max_depth must be None or >= 0. Got '{max_depth}' instead")
        level: list[tuple[str, AsyncGroup]] = [("", self)]
        depth = 0
        while level:
            children = await asyncio.gather(*(group._children() for _, group in level))
            next_level: list[tuple[str, AsyncGroup]] = []
            for (prefix, _), named_children in zip(level, children, strict=True):
                for name, node in named_children:
                    path = f"{prefix}{name}"
                    if isinstance(node, MetadataError):
                        warnings.warn(f"skipped the unreadable member {path!r}: {node}", UserWarning, stacklevel=2)
                        continue
                    yield path, node
                    if isinstance(node, AsyncGroup):
                        next_level.append((f"{path}/", node))
            depth += 1
            level = next_level if max_depth is None or depth <= max_depth else []

    async def _children(self) -> list[tuple[str, AsyncArray | AsyncGroup | MetadataError]]:
        """Every direct child, sorted by name: its node, or the MetadataError that opening it raised."""
        names = await self._child_names()
        nodes = await asyncio.gather(*(self._try_child(name) for name in names))
        return [(name, node) for name, node in zip(names, nodes, strict=True) if node is not None]

    async def _try_child(self, name: str) -> AsyncArray | AsyncGroup | MetadataError | None:
        try:
            return await self.getitem(name)
        except NodeNotFoundError:
            return None  # a directory without metadata, e.g. chunks
        except MetadataError as exc:
            return exc

    async def keys(self) -> AsyncIterator[str]:
        """Yield the names of the direct children."""
        async for name, _ in self.members():
            yield name

    async def arrays(self) -> AsyncIterator[tuple[str, AsyncArray]]:
        """Yield ``(name, array)`` for the child arrays."""
        async for name, node in self.members():
            if isinstance(node, AsyncArray):
                yield name, node

    async def groups(self) -> AsyncIterator[tuple[str, AsyncGroup]]:
        """Yield ``(name, group)`` for the child groups."""
        async for name, node in self.members():
            if isinstance(node, AsyncGroup):
                yield name, node

    async def array_keys(self) -> AsyncIterator[str]:
        """Yield the names of the child arrays."""
        async for name, _ in self.arrays():
            yield name

    async def group_keys(self) -> AsyncIterator[str]:
        """Yield the names of the child groups."""
        async for name, _ in self.groups():
            yield name

    async def array_values(self) -> AsyncIterator[AsyncArray]:
        """Yield the child arrays."""
        async for _, array in self.arrays():
            yield array

    async def group_values(self) -> AsyncIterator[AsyncGroup]:
        """Yield the child groups."""
        async for _, group in self.groups():
            yield group

    async def get(self, name: str, default: Any = None) -> AsyncArray | AsyncGroup | Any:
        """The member at ``name`` (a path like 'a/b'), or ``default`` if nothing is there."""
        try:
            return await self.getitem(name)
        except KeyError:
            return default

    async def nmembers(self, max_depth: int | None = 0) -> int:
        """How many members ``members(max_depth)`` yields: the children, ``max_depth`` levels deeper too (None: all)."""
        return len([name async for name, _ in self.members(max_depth)])

    async def delitem(self, name: str) -> None:
        """Delete the member at ``name`` and everything below it."""
        self._check_writable()
        path = self._child_path(name)
        if not await self.contains(name):
            raise NodeNotFoundError(describe_missing(self._store, path))
        await self._store.delete_prefix(path)
        forget_node(self._store.location, path)
        if self._consolidated is not None:
            self._consolidated = {k: v for k, v in self._consolidated.items() if not _is_under(k, normalize_path(name))}

    async def move(self, source: str, dest: str) -> None:
        """Rename the member ``source`` to ``dest`` (both below this group): every key copied, then the source deleted.

        Refused before anything is written when nothing is at ``source``, when anything is
        stored at ``dest`` (ContainsArrayError / ContainsGroupError for a node, FileExistsError
        for other keys) or when ``dest`` is inside ``source``. Chunks are copied before metadata
        documents and the destination is complete before the source is deleted: a failure
        midway leaves the source whole and removes what was copied.
        """
        self._check_writable()
        source_path, dest_path = self._child_path(source), self._child_path(dest)
        if not await self.contains(source):
            raise NodeNotFoundError(describe_missing(self._store, source_path))
        if _is_under(dest_path, source_path):
            raise ValueError(f"cannot move {source!r} to {dest!r}: the destination is inside the source")
        await self._refuse_occupied(dest_path)
        keys = [key async for key in self._store.list_prefix(source_path)]
        await ensure_parent_groups(self._store, dest_path, self.zarr_format)
        try:
            await _copy_keys(self._store, keys, source_path, dest_path)
        except BaseException:
            await self._store.delete_prefix(dest_path)
            raise
        await self._store.delete_many(keys)
        forget_node(self._store.location, source_path)
        self._consolidated = None  # the hierarchy changed: consolidated entries are stale

    async def _refuse_occupied(self, path: str) -> None:
        """Raise if a node, or any other key, is stored at ``path``."""
        documents = await read_documents(self._store, path)
        where = self._store.key_url(path)
        kind = node_kind(documents, where) if any(value is not None for value in documents.values()) else None
        if kind is not None:
            error = ContainsArrayError if kind == "array" else ContainsGroupError
            raise error(f"{where}: {'an' if kind == 'array' else 'a'} {kind} is there already; move never overwrites")
        async for _ in self._store.list_prefix(path):
            raise FileExistsError(f"{where}: keys are stored there already; move never overwrites")

    # -- creating members -------------------------------------------------------------------------

    async def _prepare_new_member(self, name: str, overwrite: bool) -> str:
        self._check_writable()
        path = self._child_path(name)
        # Both formats are looked for: a v3 member must not be written into a v2 array either.
        existing = await read_documents(self._store, path)
        if any(value is not None for value in existing.values()):
            if overwrite:
                await self._store.delete_prefix(path)
                forget_node(self._store.location, path)
            else:
                kind = node_kind(existing, self._store.key_url(path))  # unreadable: its MetadataError
                if kind is not None:
                    error = ContainsArrayError if kind == "array" else ContainsGroupError
                    raise error(
                        f"{self._store.key_url(path)}: {'an' if kind == 'array' else 'a'} {kind} already exists; "
                        "pass overwrite=True to replace it"
                    )
        await ensure_parent_groups(self._store, path, self.zarr_format)
        self._consolidated = None  # the hierarchy changed: consolidated entries are stale
        return path

    async def create_group(
        self, name: str, *, overwrite: bool = False, attributes: Mapping[str, Any] | None = None
    ) -> AsyncGroup:
        """Create a child group (intermediate groups too); ContainsGroupError if one exists."""
        path = await self._prepare_new_member(name, overwrite)
        return await AsyncGroup.create(self._store, path, zarr_format=self.zarr_format, attributes=attributes)

    async def require_group(self, name: str) -> AsyncGroup:
        """Open the child group ``name``, creating it if missing."""
        try:
            node = await self.getitem(name)
        except NodeNotFoundError:
            return await self.create_group(name)
        if not isinstance(node, AsyncGroup):
            raise ContainsArrayError(f"{self._store.key_url(node.path)}: an array is here, not a group")
        return node

    async def create_array(
        self, name: str, *, shape: Any = None, data: Any = None, overwrite: bool = False, **kwargs: Any
    ) -> AsyncArray:
        """Create a child array (intermediate groups too), optionally filled from ``data``.

        ``write_empty_chunks=`` (or zarr 3's ``config={"write_empty_chunks": ...}``) is the returned
        handle's, not stored; None follows ``asyncarr.config``."""
        write_empty_chunks = array_config_write_empty_chunks(
            kwargs.pop("write_empty_chunks", None), kwargs.pop("config", None)
        )
        shape, dtype, data = _shape_and_dtype(shape, kwargs.pop("dtype", None), data)
        kwargs.setdefault("zarr_format", self.zarr_format)
        metadata = build_array_metadata(shape=shape, dtype=dtype, **kwargs)
        path = await self._prepare_new_member(name, overwrite)
        array = await AsyncArray.create(self._store, path, metadata, write_empty_chunks=write_empty_chunks)
        if data is not None:
            await array.setitem(Ellipsis, data)
        return array

    create_dataset = create_array

    async def require_array(self, name: str, *, shape: Any, dtype: Any = None, **kwargs: Any) -> AsyncArray:
        """Open the child array ``name`` if it matches ``shape`` (and ``dtype``), else create it."""
        try:
            node = await self.getitem(name)
        except NodeNotFoundError:
            return await self.create_array(name, shape=shape, dtype=dtype, **kwargs)
        if not isinstance(node, AsyncArray):
            raise ContainsGroupError(f"{self._store.key_url(node.path)}: a group is here, not an array")
        wanted = tuple(shape) if isinstance(shape, tuple | list) else (int(shape),)
        if node.shape != wanted:
            raise TypeError(f"{self._store.key_url(node.path)}: existing shape {node.shape} differs from {wanted}")
        if dtype is not None and node.dtype != __import__("numpy").dtype(dtype):
            raise TypeError(f"{self._store.key_url(node.path)}: existing dtype {node.dtype} differs from {dtype}")
        write_empty_chunks = array_config_write_empty_chunks(kwargs.get("write_empty_chunks"), kwargs.get("config"))
        if write_empty_chunks is not None:  # the handle's setting, as when creating
            node = AsyncArray(
                self._store, node.path, node.metadata, read_only=node.read_only, write_empty_chunks=write_empty_chunks
            )
        return node

    require_dataset = require_array

    async def zeros(self, name: str, **kwargs: Any) -> AsyncArray:
        """Create a child array of zeros."""
        return await self.create_array(name, fill_value=0, **kwargs)

    async def ones(self, name: str, **kwargs: Any) -> AsyncArray:
        """Create a child array of ones."""
        return await self.create_array(name, fill_value=1, **kwargs)

    async def full(self, name: str, fill_value: Any, **kwargs: Any) -> AsyncArray:
        """Create a child array filled with ``fill_value``."""
        return await self.create_array(name, fill_value=fill_value, **kwargs)

    async def empty(self, name: str, **kwargs: Any) -> AsyncArray:
        """Create a child array with the default fill value."""
        return await self.create_array(name, **kwargs)

    async def array(self, name: str, data: Any, **kwargs: Any) -> AsyncArray:
        """Create a child array holding ``data``."""
        return await self.create_array(name, data=data, **kwargs)

    async def require_groups(self, *names: str) -> tuple[AsyncGroup, ...]:
        """``require_group`` for each name at once; the groups in the order of ``names``."""
        return tuple(await asyncio.gather(*(self.require_group(name) for name in names)))

    async def create_hierarchy(
        self, nodes: Mapping[str, Any], *, overwrite: bool = False
    ) -> AsyncIterator[tuple[str, AsyncArray | AsyncGroup]]:
        """Create the nodes ``nodes`` describes (paths below this group -> zarr metadata or dicts), as
        ``asyncarr.create_hierarchy`` does; yield ``(path, node)`` for each, paths relative to this group.

        Every node takes this group's format (ValueError for one of the other); this group is the
        root, so a node at '' is a ValueError."""
        from . import api  # api imports this module: it cannot be imported at module level

        self._check_writable()
        below = {self._child_path(path): _in_format(spec, self.zarr_format, path) for path, spec in nodes.items()}
        self._consolidated = None
        for path, node in await api.create_hierarchy(store=self._store, nodes=below, overwrite=overwrite):
            yield path[len(self._path) + 1 :] if self._path else path, node

    async def empty_like(self, name: str, data: Any, **kwargs: Any) -> AsyncArray:
        """Create the child array ``name`` shaped, chunked and encoded like ``data``, unwritten."""
        return await self._create_like("empty_like", name, data, kwargs)

    async def zeros_like(self, name: str, data: Any, **kwargs: Any) -> AsyncArray:
        """Create the child array ``name`` of zeros, like ``data``."""
        return await self._create_like("zeros_like", name, data, kwargs)

    async def ones_like(self, name: str, data: Any, **kwargs: Any) -> AsyncArray:
        """Create the child array ``name`` of ones, like ``data``."""
        return await self._create_like("ones_like", name, data, kwargs)

    async def full_like(self, name: str, data: Any, **kwargs: Any) -> AsyncArray:
        """Create the child array ``name`` like ``data``, filled with ``fill_value=`` (default: ``data``'s)."""
        return await self._create_like("full_like", name, data, kwargs)

    async def _create_like(self, function: str, name: str, data: Any, kwargs: dict[str, Any]) -> AsyncArray:
        """``asyncarr.<function>(data, ...)`` creating the child ``name``, in this group's format unless told."""
        from . import api  # api imports this module: it cannot be imported at module level

        self._check_writable()
        kwargs.setdefault("zarr_format", self.zarr_format)
        self._consolidated = None
        return await getattr(api, function)(data, store=self._store, path=self._child_path(name), **kwargs)

    async def setitem(self, name: str, value: Any) -> None:
        """Store ``value`` (array-like, or an array of either API) as the child array ``name``, replacing
        whatever is there, with zarr 3's defaults (``group[name] = value``)."""
        from . import api  # api imports this module: it cannot be imported at module level

        self._check_writable()
        self._consolidated = None
        await api.create_array(
            self._store,
            name=self._child_path(name),
            data=value,
            chunks=value.chunks if isinstance(getattr(value, "async_array", value), AsyncArray) else "auto",
            zarr_format=self.zarr_format,
            overwrite=True,
        )

    # -- attributes and tree ---------------------------------------------------------------------

    async def update_attributes(self, attributes: Mapping[str, Any]) -> AsyncGroup:
        """Merge ``attributes`` into the stored user attributes; return this group, as zarr 3 does."""
        await self.set_attributes({**self._metadata.attributes, **attributes})
        return self

    async def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        """Replace all user attributes with ``attributes``."""
        self._check_writable()
        metadata = self._metadata.with_attributes(dict(attributes))
        old_documents = self._metadata.to_documents()
        new_documents = metadata.to_documents()
        changed = {name: doc for name, doc in new_documents.items() if old_documents.get(name) != doc}
        await write_documents(self._store, self._path, changed)
        await self._store.delete_many([node_key(self._path, n) for n in old_documents if n not in new_documents])
        self._metadata = metadata

    async def tree(self, expand: bool | None = None, level: int | None = None) -> Tree:
        """The hierarchy below this group, ``level`` levels below the children at most (zarr 3's ``level``)."""
        if expand is not None:
            raise NotImplementedError("'expand' is not yet implemented.")
        return Tree(await self._tree_node(self.basename or "/", level))

    async def _tree_node(self, label: str, levels_below: int | None = None) -> TreeNode:
        children = []
        for name, node in await self._children():
            if isinstance(node, MetadataError):
                children.append(TreeNode(f"{name} (unreadable: {_short_error(node)})", ()))
            elif isinstance(node, AsyncGroup):
                if levels_below is None or levels_below > 0:
                    deeper = None if levels_below is None else levels_below - 1
                    children.append(await node._tree_node(name, deeper))
                else:
                    children.append(TreeNode(name, ()))
            else:
                children.append(TreeNode(f"{name} {node.shape} {node.dtype}", ()))
        return TreeNode(label, tuple(children))

    async def info(self, type_name: str = "asyncarr.AsyncGroup") -> Any:
        """A summary table of the group: name, type, store and its direct members."""
        return await self._info(type_name, max_depth=0)

    async def info_complete(self, type_name: str = "asyncarr.AsyncGroup") -> Any:
        """zarr 3's complete table: as ``info``, counting every member of the hierarchy below the group."""
        return await self._info(type_name, max_depth=None)

    async def _info(self, type_name: str, max_depth: int | None) -> Any:
        from .info import Info

        members = [(name, node) async for name, node in self.members(max_depth)]
        arrays = [name for name, node in members if isinstance(node, AsyncArray)]
        groups = [name for name, node in members if isinstance(node, AsyncGroup)]
        store_type = type(self._store)
        rows = [
            ("Name", self.name),
            ("Type", type_name),
            ("Zarr format", str(self.zarr_format)),
            ("Read-only", str(self.read_only)),
            ("Store type", f"{store_type.__module__}.{store_type.__qualname__}"),
            ("No. members", str(len(members))),
            ("No. arrays", str(len(arrays))),
            ("No. groups", str(len(groups))),
        ]
        if arrays:
            rows.append(("Arrays", ", ".join(arrays)))
        if groups:
            rows.append(("Groups", ", ".join(groups)))
        return Info(tuple(rows))

    # -- pickling: configuration only ---------------------------------------------------------------

    def _configuration(self) -> dict[str, Any]:
        return {"store": self._store, "path": self._path, "metadata": self._metadata, "read_only": self._read_only}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["store"], state["path"], state["metadata"], read_only=state["read_only"])  # type: ignore[misc]


def _short_error(error: Exception) -> str:
    """``"MetadataError: <message>"`` on one line, cut to `_TREE_ERROR_CHARS` characters."""
    text = f"{type(error).__name__}: {' '.join(str(error).split())}"
    return text if len(text) <= _TREE_ERROR_CHARS else text[: _TREE_ERROR_CHARS - 1] + "…"


def _is_under(key: str, path: str) -> bool:
    return key == path or key.startswith(path + "/")


def _shape_and_dtype(shape: Any, dtype: Any, data: Any) -> tuple[Any, Any, Any]:
    """Take shape and dtype from ``data`` when they are not given."""
    if data is None:
        if shape is None:
            raise TypeError("create_array needs shape= (or data=)")
        return shape, dtype, None
    source = getattr(data, "async_array", data)
    if not isinstance(source, AsyncArray):
        import numpy as np

        source = np.asanyarray(data)
    return (source.shape if shape is None else shape), (source.dtype if dtype is None else dtype), source


def _in_format(spec: Any, zarr_format: int, path: str) -> Any:
    """A create_hierarchy node in ``zarr_format``: a dict without one gets it; another format is a ValueError."""
    given = spec.get("zarr_format") if isinstance(spec, Mapping) else getattr(spec, "zarr_format", None)
    if given is None and isinstance(spec, Mapping):
        return {**spec, "zarr_format": zarr_format}
    if given != zarr_format:
        raise ValueError(
            f"The zarr_format of the nodes must be the same as the parent group. The node at {path} has "
            f"zarr_format {given}, but the parent group has zarr_format {zarr_format}."
        )
    return spec


async def _copy_keys(store: Store, keys: list[str], source_path: str, dest_path: str) -> None:
    """Copy ``keys`` (below ``source_path``) to the same places below ``dest_path``: chunks first, then the
    metadata documents, so the destination shows no node before its data is there."""
    limiter = store.limiter

    async def copy_one(key: str) -> None:
        async with limiter:
            value = await store.get(key)
        if value is not None:  # gone since the listing: nothing to move
            async with limiter:
                await store.set(dest_path + key[len(source_path) :], value)

    documents = [key for key in keys if key.rsplit("/", 1)[-1] in METADATA_NAMES]
    chunks = [key for key in keys if key.rsplit("/", 1)[-1] not in METADATA_NAMES]
    for batch in (chunks, documents):
        await for_each_concurrently(batch, copy_one, config.get("concurrency"))
