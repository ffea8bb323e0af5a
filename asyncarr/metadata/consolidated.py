"""Consolidated metadata: the documents of every node below a group, gathered into one place.

Both formats share one in-memory form, *entries*: a dict from a document key relative to the
consolidating group to that document's decoded JSON object, e.g.
``{".zgroup": {...}, "a/.zarray": {...}, "a/.zattrs": {...}}`` for v2 (stored in ``.zmetadata``) and
``{"a/zarr.json": {...}, "g/b/zarr.json": {...}}`` for v3 (stored inline in the group's
``zarr.json`` under ``consolidated_metadata``, keyed there by node path). `consolidated_documents`
turns entries into the documents dict that `asyncarr.metadata.parse_node` takes, so the group layer
can open every child without a store read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from asyncarr.errors import MetadataError
from asyncarr.metadata._json import document_path, dump_json, load_json_object

__all__ = [
    "NODE_DOCUMENT_NAMES",
    "consolidated_children",
    "consolidated_documents",
    "consolidated_subtree",
    "consolidated_v2_document",
    "consolidated_v3_metadata",
    "parse_consolidated_v2",
    "parse_consolidated_v3",
]

NODE_DOCUMENT_NAMES = ("zarr.json", ".zarray", ".zgroup", ".zattrs")
"""The metadata documents a node can have; `parse_node` takes a dict with these keys."""


# Names a node cannot have: they are the documents (and the consolidated document) of its parent.
_DOCUMENT_NAMES = frozenset({*NODE_DOCUMENT_NAMES, ".zmetadata"})


def _split_document_key(key: Any, where: str) -> tuple[str, str]:
    if not isinstance(key, str):
        raise MetadataError(f"{where}: entry key {key!r} is not a string")
    node_path, _, name = key.rpartition("/")
    if name not in NODE_DOCUMENT_NAMES:
        raise MetadataError(f"{where}: entry {key!r} is not a metadata document ({', '.join(NODE_DOCUMENT_NAMES)})")
    if node_path and not all(_is_node_name(part) for part in node_path.split("/")):
        raise MetadataError(
            f"{where}: entry {key!r} does not name a node: every part of its path must be a non-empty name, "
            "not '.', '..' or a metadata document, without backslashes, NUL characters or lone surrogates"
        )
    return node_path, name


def _is_node_name(part: str) -> bool:
    """Whether `part` can be one segment of a node path (the stores would refuse the rest, or worse)."""
    if part in ("", ".", "..") or part in _DOCUMENT_NAMES or "\\" in part or "\x00" in part:
        return False
    try:
        part.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _checked_entries(entries: Mapping[str, Any], where: str) -> dict[str, dict[str, Any]]:
    checked = {}
    for key, document in entries.items():
        _split_document_key(key, where)
        if not isinstance(document, Mapping):
            raise MetadataError(f"{where}: entry {key!r} must be a JSON object, got {type(document).__name__}")
        checked[key] = dict(document)
    return checked


def _depth_then_name(node_path: str) -> tuple[int, str]:
    return node_path.count("/"), node_path


def consolidated_v2_document(entries: Mapping[str, Mapping[str, Any]]) -> bytes:
    """Return the ``.zmetadata`` document holding v2 `entries` (keys like ``"a/.zarray"``)."""
    checked = _checked_entries(entries, ".zmetadata")
    ordered = {key: checked[key] for key in sorted(checked, key=_depth_then_name)}
    return dump_json({"metadata": ordered, "zarr_consolidated_format": 1}, indent=4)


def parse_consolidated_v2(raw: bytes, path: str) -> dict[str, dict[str, Any]]:
    """Parse the ``.zmetadata`` document of the group at `path` into entries; MetadataError if invalid."""
    doc_path = document_path(path, ".zmetadata")
    document = load_json_object(raw, doc_path)
    if document.get("zarr_consolidated_format") != 1:
        found = document.get("zarr_consolidated_format")
        raise MetadataError(f"{doc_path}: 'zarr_consolidated_format' must be 1, got {found!r}")
    metadata = document.get("metadata")
    if not isinstance(metadata, dict):
        raise MetadataError(f"{doc_path}: 'metadata' must be a JSON object, got {type(metadata).__name__}")
    return _checked_entries(metadata, doc_path)


def consolidated_v3_metadata(entries: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Return the ``consolidated_metadata`` object of a v3 group's ``zarr.json`` holding `entries`."""
    checked = _checked_entries(entries, "consolidated_metadata")
    by_node = {}
    for key, document in checked.items():
        node_path, name = _split_document_key(key, "consolidated_metadata")
        if name != "zarr.json":
            raise MetadataError(f"consolidated_metadata: entry {key!r} is not a Zarr v3 'zarr.json' document")
        if node_path:  # the consolidating group's own document is not an entry
            by_node[node_path] = document
    ordered = {node: by_node[node] for node in sorted(by_node, key=_depth_then_name)}
    return {"kind": "inline", "must_understand": False, "metadata": ordered}


def parse_consolidated_v3(consolidated: Any, path: str) -> dict[str, dict[str, Any]]:
    """Parse the ``consolidated_metadata`` object of the v3 group at `path` into entries."""
    where = f"{document_path(path, 'zarr.json')}: 'consolidated_metadata'"
    if not isinstance(consolidated, Mapping):
        raise MetadataError(f"{where} must be a JSON object, got {type(consolidated).__name__}")
    if consolidated.get("kind") != "inline":
        raise MetadataError(f"{where}: kind {consolidated.get('kind')!r} is not supported (only 'inline')")
    metadata = consolidated.get("metadata")
    if not isinstance(metadata, Mapping):
        raise MetadataError(f"{where}: 'metadata' must be a JSON object, got {type(metadata).__name__}")
    entries = {}
    for node_path, document in metadata.items():
        if not isinstance(node_path, str) or not node_path.strip("/"):
            raise MetadataError(f"{where}: entry key {node_path!r} is not a node path")
        entries[f"{node_path.strip('/')}/zarr.json"] = document
    return _checked_entries(entries, where)


def consolidated_documents(entries: Mapping[str, Mapping[str, Any]], node_path: str) -> dict[str, bytes | None]:
    """Return the documents of the node at `node_path` (relative to the consolidating group) for `parse_node`.

    Every name in `NODE_DOCUMENT_NAMES` is a key; a document absent from `entries` is None, so an
    unknown node makes `parse_node` raise `NodeNotFoundError`. A child group's own nested
    ``consolidated_metadata`` is dropped: zarr-python writes it empty, so the children of a group
    come from `consolidated_subtree` of the root entries instead.
    """
    node_path = node_path.strip("/")
    documents: dict[str, bytes | None] = {}
    for name in NODE_DOCUMENT_NAMES:
        document = entries.get(document_path(node_path, name))
        if document is not None and name in ("zarr.json", ".zgroup"):
            document = {key: value for key, value in document.items() if key != "consolidated_metadata"}
        documents[name] = None if document is None else json.dumps(document, allow_nan=True).encode()
    return documents


def consolidated_subtree(entries: Mapping[str, Mapping[str, Any]], node_path: str) -> dict[str, dict[str, Any]]:
    """Return the entries below `node_path`, re-keyed relative to it (its own documents keep bare names)."""
    node_path = node_path.strip("/")
    if not node_path:
        return dict(entries)
    prefix = node_path + "/"
    return {key[len(prefix) :]: document for key, document in entries.items() if key.startswith(prefix)}


def consolidated_children(entries: Mapping[str, Mapping[str, Any]], node_path: str) -> list[str]:
    """Return the sorted names of the immediate children of `node_path` that have documents in `entries`."""
    children = set()
    for key in consolidated_subtree(entries, node_path):
        child_path, _, _ = key.rpartition("/")
        if child_path:
            children.add(child_path.split("/", 1)[0])
    return sorted(children)
