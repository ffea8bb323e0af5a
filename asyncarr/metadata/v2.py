"""Zarr v2 metadata: ``.zarray``, ``.zgroup`` and ``.zattrs`` documents."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
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
    PYTHON_OBJECT_CODEC_IDS,
    coerce_fill_value,
    dtype_for_object_codec,
    dtype_to_json,
    fill_value_to_json,
    find_object_codec_id,
    is_variable_length,
    normalize_dtype,
    object_codec_id,
    parse_dtype,
    parse_fill_value,
    python_object_fill_value,
)

__all__ = ["ArrayMetadataV2", "GroupMetadataV2", "holds_python_objects"]

_ARRAY_FIELDS = ("zarr_format", "shape", "chunks", "dtype", "compressor", "fill_value", "order", "filters")


def _check_codec(value: Any, field: str) -> dict[str, Any]:
    if not isinstance(value, Mapping) or not isinstance(value.get("id"), str):
        shown = short_repr(value)
        raise ValueError(f"{field!r} must be an object with a string 'id' (a numcodecs config), got {shown}")
    return copy.deepcopy(dict(value))


def _check_attributes(value: Any, field: str = "attributes") -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise ValueError(f"{field!r} must be a JSON object, got {type(value).__name__}")
    return copy.deepcopy(dict(value))


def _load_attributes(documents: Mapping[str, bytes | None], path: str) -> dict[str, Any]:
    raw = documents.get(".zattrs")
    return {} if raw is None else load_json_object(raw, document_path(path, ".zattrs"))


def _codecs_of(filters: Any, compressor: Any) -> list[Any]:
    """The filters and compressor of a (maybe malformed) document, in search order for an object codec."""
    codecs = list(filters) if isinstance(filters, list | tuple) else []
    return [*codecs, compressor]


def _with_object_codec(
    dtype: np.dtype, filters: tuple[dict[str, Any], ...] | None, compressor: dict[str, Any] | None
) -> tuple[np.dtype, tuple[dict[str, Any], ...]]:
    """Resolve a variable-length dtype against the object codec: a plain object dtype takes the
    codec's meaning (``dtype=object`` with a ``VLenUTF8`` filter holds strings); a missing codec is
    added as the first filter, where zarr-python puts it."""
    found = find_object_codec_id(_codecs_of(filters, compressor))
    if found is None:
        return dtype, ({"id": object_codec_id(dtype)}, *(filters or ()))
    resolved = dtype_for_object_codec(found)
    if dtype.kind != "O" and resolved != dtype:
        raise ValueError(f"data type {dtype} cannot be stored with the object codec {found!r}")
    return resolved, tuple(filters or ())


def holds_python_objects(dtype: Any, filters: Any, compressor: Any) -> bool:
    """Whether a v2 array of `dtype` with these codec configs holds arbitrary Python objects
    (``"|O"`` with ``json2``, ``msgpack2``, ``vlen-array`` or ``pickle``) rather than strings or bytes."""
    return np.dtype(dtype).kind == "O" and find_object_codec_id(_codecs_of(filters, compressor)) in (
        PYTHON_OBJECT_CODEC_IDS
    )


def _attributes_documents(attributes: dict[str, Any]) -> dict[str, bytes]:
    return {".zattrs": dump_json(attributes, indent=4, sort_keys=True)} if attributes else {}


@dataclasses.dataclass(frozen=True, eq=False)
class ArrayMetadataV2:
    """The metadata of one Zarr v2 array: its ``.zarray`` document plus its ``.zattrs`` attributes."""

    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    dtype: np.dtype
    fill_value: Any
    order: Literal["C", "F"]
    compressor: dict[str, Any] | None
    filters: tuple[dict[str, Any], ...] | None
    dimension_separator: Literal[".", "/"] = "."
    attributes: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        shape = parse_int_tuple(self.shape, "shape", minimum=0)
        chunks = parse_int_tuple(self.chunks, "chunks", minimum=1)
        if len(chunks) != len(shape):
            raise ValueError(
                f"'chunks' {list(chunks)} has {len(chunks)} dimensions but 'shape' {list(shape)} has {len(shape)}"
            )
        dtype = normalize_dtype(self.dtype)
        if self.order not in ("C", "F"):
            raise ValueError(f"'order' must be 'C' or 'F', got {short_repr(self.order)}")
        if self.dimension_separator not in (".", "/"):
            raise ValueError(f"'dimension_separator' must be '.' or '/', got {short_repr(self.dimension_separator)}")
        compressor = None if self.compressor is None else _check_codec(self.compressor, "compressor")
        filters = None
        if self.filters is not None:
            if isinstance(self.filters, Mapping | str) or not hasattr(self.filters, "__iter__"):
                raise ValueError(f"'filters' must be a list of codec configs or null, got {short_repr(self.filters)}")
            filters = tuple(_check_codec(item, "filters") for item in self.filters) or None
        if is_variable_length(dtype):
            dtype, filters = _with_object_codec(dtype, filters, compressor)
        dtype = parse_dtype(2, dtype_to_json(2, dtype), object_codec_id(dtype))
        set_field = object.__setattr__
        set_field(self, "shape", shape)
        set_field(self, "chunks", chunks)
        set_field(self, "dtype", dtype)
        if holds_python_objects(dtype, filters, compressor):
            set_field(self, "fill_value", python_object_fill_value(self.fill_value))
        else:
            set_field(self, "fill_value", coerce_fill_value(self.fill_value, dtype))
        set_field(self, "compressor", compressor)
        set_field(self, "filters", filters)
        set_field(self, "attributes", _check_attributes(self.attributes))

    @property
    def zarr_format(self) -> Literal[2]:
        """The Zarr format version: 2."""
        return 2

    @property
    def holds_python_objects(self) -> bool:
        """Whether the array holds arbitrary Python objects (``json2``, ``msgpack2``, ``vlen-array``, ``pickle``)."""
        return holds_python_objects(self.dtype, self.filters, self.compressor)

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    def chunk_key(self, coords: tuple[int, ...]) -> str:
        """Return the key of the chunk at grid position `coords`, relative to the array ("0.0" or "0/0")."""
        if len(coords) != len(self.shape):
            raise ValueError(f"chunk coordinates {tuple(coords)} do not match the array's {len(self.shape)} dimensions")
        if not coords:
            return "0"
        return self.dimension_separator.join(map(str, coords))

    def to_json(self) -> dict[str, Any]:
        """Return the ``.zarray`` document as a JSON-ready dict."""
        return {
            "chunks": list(self.chunks),
            "compressor": copy.deepcopy(self.compressor),
            "dimension_separator": self.dimension_separator,
            "dtype": dtype_to_json(2, self.dtype),
            "fill_value": self.fill_value
            if self.holds_python_objects
            else fill_value_to_json(2, self.fill_value, self.dtype),
            "filters": None if self.filters is None else copy.deepcopy(list(self.filters)),
            "order": self.order,
            "shape": list(self.shape),
            "zarr_format": 2,
        }

    def to_documents(self) -> dict[str, bytes]:
        """Return the documents to write, keyed relative to the array: ``.zarray`` (+ ``.zattrs`` if any)."""
        return {
            ".zarray": dump_json(self.to_json(), indent=4, sort_keys=True),
            **_attributes_documents(self.attributes),
        }

    @classmethod
    def from_documents(cls, documents: Mapping[str, bytes | None], path: str) -> ArrayMetadataV2:
        """Parse ``.zarray`` (and ``.zattrs`` if present) of the array at `path`; MetadataError if invalid."""
        doc_path = document_path(path, ".zarray")
        raw = documents.get(".zarray")
        if raw is None:
            raise MetadataError(f"{doc_path}: document is missing")
        document = load_json_object(raw, doc_path)
        return cls.from_json(document, doc_path, attributes=_load_attributes(documents, path))

    @classmethod
    def from_json(cls, document: Mapping[str, Any], doc_path: str, *, attributes: Any = None) -> ArrayMetadataV2:
        """Build from a decoded ``.zarray`` object; `doc_path` names it in errors."""
        for field in _ARRAY_FIELDS:
            if field not in document:
                raise MetadataError(f"{doc_path}: {field!r} is missing")
        if document["zarr_format"] != 2:
            raise MetadataError(f"{doc_path}: 'zarr_format' must be 2, got {document['zarr_format']!r}")
        try:
            object_codec = find_object_codec_id(_codecs_of(document["filters"], document["compressor"]))
            dtype = parse_dtype(2, document["dtype"], object_codec)
        except MetadataError as exc:
            raise MetadataError(f"{doc_path}: 'dtype': {exc}") from None
        try:
            if holds_python_objects(dtype, document["filters"], document["compressor"]):
                fill_value = python_object_fill_value(document["fill_value"])
            else:
                fill_value = parse_fill_value(2, document["fill_value"], dtype)
        except ValueError as exc:
            raise MetadataError(f"{doc_path}: {exc}") from None
        try:
            return cls(
                shape=document["shape"],
                chunks=document["chunks"],
                dtype=dtype,
                fill_value=fill_value,
                order=document["order"],
                compressor=document["compressor"],
                filters=document["filters"],
                dimension_separator=document.get("dimension_separator") or ".",
                attributes={} if attributes is None else attributes,
            )
        except (ValueError, TypeError) as exc:
            raise MetadataError(f"{doc_path}: {exc}") from None

    def with_shape(self, shape: tuple[int, ...]) -> ArrayMetadataV2:
        """Return a copy with a new shape of the same number of dimensions."""
        shape = tuple(shape)
        if len(shape) != self.ndim:
            raise ValueError(f"new shape {shape} must have {self.ndim} dimensions like the array's shape {self.shape}")
        return dataclasses.replace(self, shape=shape)

    def with_attributes(self, attributes: Mapping[str, Any]) -> ArrayMetadataV2:
        """Return a copy whose attributes are replaced by `attributes`."""
        return dataclasses.replace(self, attributes=dict(attributes))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ArrayMetadataV2):
            return NotImplemented
        return canonical_json([self.to_json(), self.attributes]) == canonical_json([other.to_json(), other.attributes])

    __hash__ = None  # type: ignore[assignment]


@dataclasses.dataclass(frozen=True, eq=False)
class GroupMetadataV2:
    """The metadata of one Zarr v2 group: its ``.zgroup`` marker plus its ``.zattrs`` attributes."""

    attributes: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "attributes", _check_attributes(self.attributes))

    @property
    def zarr_format(self) -> Literal[2]:
        """The Zarr format version: 2."""
        return 2

    def to_documents(self) -> dict[str, bytes]:
        """Return ``.zgroup`` and, if any attributes, ``.zattrs``, keyed relative to the group."""
        return {".zgroup": dump_json({"zarr_format": 2}, indent=4), **_attributes_documents(self.attributes)}

    @classmethod
    def from_documents(cls, documents: Mapping[str, bytes | None], path: str) -> GroupMetadataV2:
        """Parse ``.zgroup`` (and ``.zattrs`` if present) of the group at `path`; MetadataError if invalid."""
        doc_path = document_path(path, ".zgroup")
        raw = documents.get(".zgroup")
        if raw is None:
            raise MetadataError(f"{doc_path}: document is missing")
        document = load_json_object(raw, doc_path)
        # v2 tolerates extra keys here; zarr-python 3 even writes "consolidated_metadata" into it.
        if "zarr_format" not in document:
            raise MetadataError(f"{doc_path}: 'zarr_format' is missing")
        if document["zarr_format"] != 2:
            raise MetadataError(f"{doc_path}: 'zarr_format' must be 2, got {document['zarr_format']!r}")
        return cls(attributes=_load_attributes(documents, path))

    def with_attributes(self, attributes: Mapping[str, Any]) -> GroupMetadataV2:
        """Return a copy whose attributes are replaced by `attributes`."""
        return dataclasses.replace(self, attributes=dict(attributes))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, GroupMetadataV2):
            return NotImplemented
        return canonical_json(self.attributes) == canonical_json(other.attributes)

    __hash__ = None  # type: ignore[assignment]
