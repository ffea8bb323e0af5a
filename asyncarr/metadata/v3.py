"""Zarr v3 metadata: the ``zarr.json`` document of arrays and groups."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np

from asyncarr.errors import MetadataError
from asyncarr.metadata._json import (
    canonical_json,
    document_path,
    dump_json,
    load_json_object,
    parse_int_tuple,
    short_repr,
)
from asyncarr.metadata.dtypes import (
    coerce_fill_value,
    dtype_to_json,
    fill_value_to_json,
    normalize_dtype,
    parse_dtype,
    parse_fill_value,
)

__all__ = ["DEFAULT_CHUNK_KEY_ENCODING", "ArrayMetadataV3", "GroupMetadataV3", "normalize_named_config"]

DEFAULT_CHUNK_KEY_ENCODING: dict[str, Any] = {"name": "default", "configuration": {"separator": "/"}}
_ARRAY_REQUIRED = ("shape", "data_type", "chunk_grid", "chunk_key_encoding", "fill_value", "codecs")
_ARRAY_KNOWN = {"zarr_format", "node_type", "attributes", "storage_transformers", "dimension_names", *_ARRAY_REQUIRED}
_GROUP_KNOWN = {"zarr_format", "node_type", "attributes", "consolidated_metadata"}


def normalize_named_config(value: Any, field: str) -> dict[str, Any]:
    """Return a v3 extension-point value (``"name"`` or ``{"name", "configuration"}``) as a dict with both keys."""
    if isinstance(value, str):
        return {"name": value, "configuration": {}}
    if not isinstance(value, Mapping) or not isinstance(value.get("name"), str):
        raise ValueError(f"{field!r} entries must be a name or an object with a string 'name', got {short_repr(value)}")
    result = copy.deepcopy(dict(value))
    configuration = result.setdefault("configuration", {})
    if configuration is None:
        result["configuration"] = {}
    elif not isinstance(configuration, Mapping):
        shown = short_repr(configuration)
        raise ValueError(f"{field!r}: 'configuration' of {short_repr(value['name'])} must be an object, got {shown}")
    return result


_KEEPS_EMPTY_CONFIGURATION = frozenset({"vlen-utf8", "vlen-bytes"})
"""Codecs zarr-python writes with ``"configuration": {}`` (every other empty one it leaves out)."""


def _named_config_json(value: dict[str, Any]) -> dict[str, Any] | str:
    """Write a codec or extension as zarr-python does: an empty configuration is left out, but for the vlen codecs."""
    result = copy.deepcopy(value)
    if not result.get("configuration") and result.get("name") not in _KEEPS_EMPTY_CONFIGURATION:
        result.pop("configuration", None)
    return result


def _check_extensions(document: Mapping[str, Any], known: set[str], doc_path: str) -> None:
    for key, value in document.items():
        if key in known:
            continue
        # The spec lets readers skip unknown fields only when they say {"must_understand": false}.
        if not (isinstance(value, Mapping) and value.get("must_understand") is False):
            raise MetadataError(f"{doc_path}: unknown field {key!r} must be understood and is not supported")


def _check_header(document: Mapping[str, Any], node_type: str, doc_path: str) -> None:
    for field in ("zarr_format", "node_type"):
        if field not in document:
            raise MetadataError(f"{doc_path}: {field!r} is missing")
    if document.get("zarr_format") != 3:
        raise MetadataError(f"{doc_path}: 'zarr_format' must be 3, got {document.get('zarr_format')!r}")
    if document.get("node_type") != node_type:
        raise MetadataError(f"{doc_path}: 'node_type' must be {node_type!r}, got {document.get('node_type')!r}")


def _parse_chunk_grid(value: Any) -> tuple[int, ...]:
    grid = normalize_named_config(value, "chunk_grid")
    if grid["name"] != "regular":
        raise ValueError(f"'chunk_grid' {grid['name']!r} is not supported (only 'regular')")
    return parse_int_tuple(grid["configuration"].get("chunk_shape"), "chunk_grid.chunk_shape", minimum=1)


def _normalize_chunk_key_encoding(value: Any) -> dict[str, Any]:
    encoding = normalize_named_config(value, "chunk_key_encoding")
    name = encoding["name"]
    if name not in ("default", "v2"):
        raise ValueError(f"'chunk_key_encoding' {name!r} is not supported (only 'default' and 'v2')")
    separator = encoding["configuration"].get("separator", "/" if name == "default" else ".")
    if separator not in ("/", "."):
        raise ValueError(f"'chunk_key_encoding' separator must be '/' or '.', got {short_repr(separator)}")
    return {"name": name, "configuration": {"separator": separator}}


def _first_codec_order(codecs: Sequence[dict[str, Any]], ndim: int) -> Literal["C", "F"]:
    if not codecs:
        return "C"
    first = codecs[0]
    if first["name"] == "sharding_indexed":
        inner = first["configuration"].get("codecs") or []
        return _first_codec_order([normalize_named_config(c, "codecs") for c in inner], ndim)
    if first["name"] == "transpose":
        order = first["configuration"].get("order")
        if order == "F" or (isinstance(order, list) and order == list(range(ndim))[::-1] and ndim > 1):
            return "F"
    return "C"


@dataclasses.dataclass(frozen=True, eq=False)
class ArrayMetadataV3:
    """The metadata of one Zarr v3 array: its ``zarr.json`` document."""

    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    dtype: np.dtype
    fill_value: Any
    codecs: tuple[dict[str, Any], ...]
    chunk_key_encoding: dict[str, Any] = dataclasses.field(
        default_factory=lambda: copy.deepcopy(DEFAULT_CHUNK_KEY_ENCODING)
    )
    dimension_names: tuple[str | None, ...] | None = None
    attributes: dict[str, Any] = dataclasses.field(default_factory=dict)
    storage_transformers: tuple[dict[str, Any], ...] = ()

    def __post_init__(self) -> None:
        shape = parse_int_tuple(self.shape, "shape", minimum=0)
        chunks = parse_int_tuple(self.chunks, "chunk_grid.chunk_shape", minimum=1)
        if len(chunks) != len(shape):
            raise ValueError(
                f"chunk shape {list(chunks)} has {len(chunks)} dimensions but 'shape' {list(shape)} has {len(shape)}"
            )
        dtype = parse_dtype(3, dtype_to_json(3, normalize_dtype(self.dtype)))
        if isinstance(self.codecs, Mapping | str) or not isinstance(self.codecs, Sequence):
            raise ValueError(f"'codecs' must be a list, got {short_repr(self.codecs)}")
        codecs = tuple(normalize_named_config(codec, "codecs") for codec in self.codecs)
        if not codecs:
            raise ValueError("'codecs' must not be empty: it needs at least an array-to-bytes codec such as 'bytes'")
        if isinstance(self.storage_transformers, Mapping | str) or not isinstance(self.storage_transformers, Sequence):
            raise ValueError(f"'storage_transformers' must be a list, got {short_repr(self.storage_transformers)}")
        transformers = tuple(normalize_named_config(t, "storage_transformers") for t in self.storage_transformers)
        for transformer in transformers:
            if transformer.get("must_understand", True) is not False:
                raise ValueError(f"storage transformer {transformer['name']!r} is not supported")
        dimension_names = self.dimension_names
        if dimension_names is not None:
            if isinstance(dimension_names, str) or not isinstance(dimension_names, Sequence):
                raise ValueError(f"'dimension_names' must be a list or null, got {short_repr(dimension_names)}")
            dimension_names = tuple(dimension_names)
            if len(dimension_names) != len(shape) or not all(n is None or isinstance(n, str) for n in dimension_names):
                raise ValueError(
                    f"'dimension_names' must hold a string or null for each of the {len(shape)} dimensions, "
                    f"got {short_repr(list(dimension_names))}"
                )
        if not isinstance(self.attributes, Mapping):
            raise ValueError(f"'attributes' must be a JSON object, got {type(self.attributes).__name__}")
        fill_value = coerce_fill_value(self.fill_value, dtype)
        if fill_value is None:
            raise ValueError("'fill_value' must not be null in Zarr v3")
        set_field = object.__setattr__
        set_field(self, "shape", shape)
        set_field(self, "chunks", chunks)
        set_field(self, "dtype", dtype)
        set_field(self, "fill_value", fill_value)
        set_field(self, "codecs", codecs)
        set_field(self, "chunk_key_encoding", _normalize_chunk_key_encoding(self.chunk_key_encoding))
        set_field(self, "dimension_names", dimension_names)
        set_field(self, "attributes", copy.deepcopy(dict(self.attributes)))
        set_field(self, "storage_transformers", transformers)

    @property
    def zarr_format(self) -> Literal[3]:
        """The Zarr format version: 3."""
        return 3

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    @property
    def order(self) -> Literal["C", "F"]:
        """ "F" when the chain (or a shard's inner chain) starts by transposing to reversed axes, else "C"."""
        return _first_codec_order(self.codecs, self.ndim)

    @property
    def dimension_separator(self) -> Literal[".", "/"]:
        """The chunk-key separator of the chunk-key encoding."""
        return self.chunk_key_encoding["configuration"]["separator"]

    def chunk_key(self, coords: tuple[int, ...]) -> str:
        """Return the key of the chunk at grid position `coords`, relative to the array ("c/0/0"; "0.0" for v2)."""
        if len(coords) != len(self.shape):
            raise ValueError(f"chunk coordinates {tuple(coords)} do not match the array's {len(self.shape)} dimensions")
        separator = self.chunk_key_encoding["configuration"]["separator"]
        if self.chunk_key_encoding["name"] == "v2":
            return separator.join(map(str, coords)) if coords else "0"
        return separator.join(("c", *map(str, coords)))

    def to_json(self) -> dict[str, Any]:
        """Return the ``zarr.json`` document as a JSON-ready dict."""
        document: dict[str, Any] = {
            "zarr_format": 3,
            "node_type": "array",
            "shape": list(self.shape),
            "data_type": dtype_to_json(3, self.dtype),
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(self.chunks)}},
            "chunk_key_encoding": copy.deepcopy(self.chunk_key_encoding),
            "fill_value": fill_value_to_json(3, self.fill_value, self.dtype),
            "codecs": [_named_config_json(codec) for codec in self.codecs],
            "attributes": copy.deepcopy(self.attributes),
            "storage_transformers": [_named_config_json(t) for t in self.storage_transformers],
        }
        if self.dimension_names is not None:
            document["dimension_names"] = list(self.dimension_names)
        return document

    def to_documents(self) -> dict[str, bytes]:
        """Return the documents to write, keyed relative to the array: ``zarr.json``."""
        return {"zarr.json": dump_json(self.to_json(), indent=2)}

    @classmethod
    def from_documents(cls, documents: Mapping[str, bytes | None], path: str) -> ArrayMetadataV3:
        """Parse the ``zarr.json`` of the array at `path`; MetadataError naming the key if invalid."""
        doc_path = document_path(path, "zarr.json")
        raw = documents.get("zarr.json")
        if raw is None:
            raise MetadataError(f"{doc_path}: document is missing")
        return cls.from_json(load_json_object(raw, doc_path), doc_path)

    @classmethod
    def from_json(cls, document: Mapping[str, Any], doc_path: str) -> ArrayMetadataV3:
        """Build from a decoded array ``zarr.json`` object; `doc_path` names it in errors."""
        _check_header(document, "array", doc_path)
        for field in _ARRAY_REQUIRED:
            if field not in document:
                raise MetadataError(f"{doc_path}: {field!r} is missing")
        _check_extensions(document, _ARRAY_KNOWN, doc_path)
        try:
            dtype = parse_dtype(3, document["data_type"])
        except MetadataError as exc:
            raise MetadataError(f"{doc_path}: 'data_type': {exc}") from None
        try:
            fill_value = parse_fill_value(3, document["fill_value"], dtype)
        except MetadataError as exc:
            raise MetadataError(f"{doc_path}: {exc}") from None
        attributes = document.get("attributes", {})
        try:
            return cls(
                shape=document["shape"],
                chunks=_parse_chunk_grid(document["chunk_grid"]),
                dtype=dtype,
                fill_value=fill_value,
                codecs=document["codecs"],
                chunk_key_encoding=document["chunk_key_encoding"],
                dimension_names=document.get("dimension_names"),
                attributes={} if attributes is None else attributes,
                storage_transformers=document.get("storage_transformers") or (),
            )
        except (ValueError, TypeError) as exc:
            raise MetadataError(f"{doc_path}: {exc}") from None

    def with_shape(self, shape: tuple[int, ...]) -> ArrayMetadataV3:
        """Return a copy with a new shape of the same number of dimensions."""
        shape = tuple(shape)
        if len(shape) != self.ndim:
            raise ValueError(f"new shape {shape} must have {self.ndim} dimensions like the array's shape {self.shape}")
        return dataclasses.replace(self, shape=shape)

    def with_attributes(self, attributes: Mapping[str, Any]) -> ArrayMetadataV3:
        """Return a copy whose attributes are replaced by `attributes`."""
        return dataclasses.replace(self, attributes=dict(attributes))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ArrayMetadataV3):
            return NotImplemented
        return canonical_json(self.to_json()) == canonical_json(other.to_json())

    __hash__ = None  # type: ignore[assignment]


@dataclasses.dataclass(frozen=True, eq=False)
class GroupMetadataV3:
    """The metadata of one Zarr v3 group: its ``zarr.json`` document, with consolidated metadata if any."""

    attributes: dict[str, Any] = dataclasses.field(default_factory=dict)
    consolidated_metadata: dict[str, Any] | None = None
    """The raw ``consolidated_metadata`` object; read it with `asyncarr.metadata.parse_consolidated_v3`."""

    def __post_init__(self) -> None:
        if not isinstance(self.attributes, Mapping):
            raise ValueError(f"'attributes' must be a JSON object, got {type(self.attributes).__name__}")
        consolidated = self.consolidated_metadata
        if consolidated is not None and not isinstance(consolidated, Mapping):
            raise ValueError(f"'consolidated_metadata' must be an object or null, got {short_repr(consolidated)}")
        object.__setattr__(self, "attributes", copy.deepcopy(dict(self.attributes)))
        object.__setattr__(
            self, "consolidated_metadata", None if consolidated is None else copy.deepcopy(dict(consolidated))
        )

    @property
    def zarr_format(self) -> Literal[3]:
        """The Zarr format version: 3."""
        return 3

    def to_json(self) -> dict[str, Any]:
        """Return the ``zarr.json`` document as a JSON-ready dict."""
        document: dict[str, Any] = {
            "zarr_format": 3,
            "node_type": "group",
            "attributes": copy.deepcopy(self.attributes),
        }
        if self.consolidated_metadata is not None:
            document["consolidated_metadata"] = copy.deepcopy(self.consolidated_metadata)
        return document

    def to_documents(self) -> dict[str, bytes]:
        """Return the documents to write, keyed relative to the group: ``zarr.json``."""
        return {"zarr.json": dump_json(self.to_json(), indent=2)}

    @classmethod
    def from_documents(cls, documents: Mapping[str, bytes | None], path: str) -> GroupMetadataV3:
        """Parse the ``zarr.json`` of the group at `path`; MetadataError naming the key if invalid."""
        doc_path = document_path(path, "zarr.json")
        raw = documents.get("zarr.json")
        if raw is None:
            raise MetadataError(f"{doc_path}: document is missing")
        return cls.from_json(load_json_object(raw, doc_path), doc_path)

    @classmethod
    def from_json(cls, document: Mapping[str, Any], doc_path: str) -> GroupMetadataV3:
        """Build from a decoded group ``zarr.json`` object; `doc_path` names it in errors.

        Its ``consolidated_metadata`` is kept, not copied (deep-copying tens of MiB of entries costs
        several times parsing them): pass a freshly decoded document that nothing else changes.
        """
        _check_header(document, "group", doc_path)
        _check_extensions(document, _GROUP_KNOWN, doc_path)
        attributes = document.get("attributes", {})
        consolidated = document.get("consolidated_metadata")
        try:
            metadata = cls(attributes={} if attributes is None else attributes)
        except ValueError as exc:
            raise MetadataError(f"{doc_path}: {exc}") from None
        if consolidated is not None:
            if not isinstance(consolidated, Mapping):
                found = type(consolidated).__name__
                raise MetadataError(f"{doc_path}: 'consolidated_metadata' must be an object or null, got {found}")
            object.__setattr__(metadata, "consolidated_metadata", dict(consolidated))
        return metadata

    def with_attributes(self, attributes: Mapping[str, Any]) -> GroupMetadataV3:
        """Return a copy whose attributes are replaced by `attributes`."""
        return dataclasses.replace(self, attributes=dict(attributes))

    def with_consolidated_metadata(self, consolidated_metadata: dict[str, Any] | None) -> GroupMetadataV3:
        """Return a copy carrying `consolidated_metadata` (the raw object, or None to drop it)."""
        return dataclasses.replace(self, consolidated_metadata=consolidated_metadata)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, GroupMetadataV3):
            return NotImplemented
        return canonical_json(self.to_json()) == canonical_json(other.to_json())

    __hash__ = None  # type: ignore[assignment]
