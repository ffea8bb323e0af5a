"""Zarr v2 and v3 metadata: parse, validate and serialize the documents of arrays and groups.

Pure data: nothing here touches a store or a codec object (codecs stay JSON dicts).
`parse_node` reads whichever documents a node has; `create_array_metadata` builds the metadata of
a new array from user arguments; `normalize_chunks` turns a ``chunks=`` argument into a chunk shape.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeAlias

import numpy as np

from asyncarr.errors import MetadataError, NodeNotFoundError
from asyncarr.metadata._json import document_path, load_json_object
from asyncarr.metadata.consolidated import (
    NODE_DOCUMENT_NAMES,
    consolidated_children,
    consolidated_documents,
    consolidated_subtree,
    consolidated_v2_document,
    consolidated_v3_metadata,
    parse_consolidated_v2,
    parse_consolidated_v3,
)
from asyncarr.metadata.dtypes import (
    DEFAULT_FILL_VALUE,
    DefaultFillValue,
    coerce_fill_value,
    default_fill_value,
    dtype_to_json,
    fill_value_to_json,
    is_variable_length,
    normalize_dtype,
    object_codec_id,
    parse_dtype,
    parse_fill_value,
    python_object_fill_value,
)
from asyncarr.metadata.v2 import ArrayMetadataV2, GroupMetadataV2, holds_python_objects
from asyncarr.metadata.v3 import DEFAULT_CHUNK_KEY_ENCODING, ArrayMetadataV3, GroupMetadataV3

__all__ = [
    "DEFAULT_CHUNK_KEY_ENCODING",
    "DEFAULT_FILL_VALUE",
    "NODE_DOCUMENT_NAMES",
    "ArrayMetadata",
    "ArrayMetadataV2",
    "ArrayMetadataV3",
    "GroupMetadata",
    "GroupMetadataV2",
    "GroupMetadataV3",
    "NodeMetadata",
    "coerce_fill_value",
    "consolidated_children",
    "consolidated_documents",
    "consolidated_subtree",
    "consolidated_v2_document",
    "consolidated_v3_metadata",
    "create_array_metadata",
    "default_fill_value",
    "dtype_to_json",
    "fill_value_to_json",
    "guess_chunks",
    "node_kind",
    "normalize_chunks",
    "parse_consolidated_v2",
    "parse_consolidated_v3",
    "parse_dtype",
    "parse_fill_value",
    "parse_node",
]

ArrayMetadata: TypeAlias = ArrayMetadataV2 | ArrayMetadataV3
GroupMetadata: TypeAlias = GroupMetadataV2 | GroupMetadataV3
NodeMetadata: TypeAlias = ArrayMetadata | GroupMetadata

# The automatic chunk guess of zarr-python (after h5py): aim for a chunk of about
# 256 KiB * 2**log10(array MiB), kept between 128 KiB and 64 MiB.
_CHUNK_INCREMENT_BYTES = 256 * 1024
_CHUNK_MIN_BYTES = 128 * 1024
_CHUNK_MAX_BYTES = 64 * 1024 * 1024


def _v3_node_type(document: Mapping[str, Any], doc_path: str) -> Literal["array", "group"]:
    node_type = document.get("node_type")
    if node_type not in ("array", "group"):
        raise MetadataError(f"{doc_path}: 'node_type' must be 'array' or 'group', got {node_type!r}")
    return node_type


def node_kind(documents: Mapping[str, bytes | None], path: str) -> Literal["array", "group"] | None:
    """Return whether the documents of the node at `path` make an array or a group (None: no node).

    Decided as `parse_node` decides, from parsed JSON and never from bytes in the documents: the
    ``node_type`` of ``zarr.json``; else ``.zarray`` an array, ``.zgroup`` a group. Only the node
    type is checked, so an array with, say, an unknown codec is still an array; a ``zarr.json``
    that is not JSON, or names no node type, is a MetadataError naming its key.
    """
    raw = documents.get("zarr.json")
    if raw is not None:
        doc_path = document_path(path, "zarr.json")
        return _v3_node_type(load_json_object(raw, doc_path), doc_path)
    if documents.get(".zarray") is not None:
        return "array"
    if documents.get(".zgroup") is not None:
        return "group"
    return None


def parse_node(documents: Mapping[str, bytes | None], path: str) -> NodeMetadata:
    """Return the metadata of the node at `path` from whichever of its documents are present.

    ``zarr.json`` means v3 (its ``node_type`` decides array or group); else ``.zarray`` a v2 array;
    else ``.zgroup`` a v2 group; with none of them, `NodeNotFoundError`.
    """
    raw = documents.get("zarr.json")
    if raw is not None:
        doc_path = document_path(path, "zarr.json")
        document = load_json_object(raw, doc_path)
        if _v3_node_type(document, doc_path) == "array":
            return ArrayMetadataV3.from_json(document, doc_path)
        return GroupMetadataV3.from_json(document, doc_path)
    if documents.get(".zarray") is not None:
        return ArrayMetadataV2.from_documents(documents, path)
    if documents.get(".zgroup") is not None:
        return GroupMetadataV2.from_documents(documents, path)
    raise NodeNotFoundError(f"no array or group at {path!r}")


def guess_chunks(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """Return zarr-python's automatic chunk shape for an array of `shape` and `itemsize`-byte elements."""
    if not shape:
        return ()
    chunk = [max(int(extent), 1) for extent in shape]
    itemsize = max(int(itemsize), 1)
    array_bytes = math.prod(chunk) * itemsize
    target = _CHUNK_INCREMENT_BYTES * 2 ** math.log10(array_bytes / 2**20)
    target = min(max(target, _CHUNK_MIN_BYTES), _CHUNK_MAX_BYTES)
    axis = 0
    while True:
        chunk_elements = math.prod(chunk)
        chunk_bytes = chunk_elements * itemsize
        near_target = chunk_bytes < target or abs(chunk_bytes - target) / target < 0.5
        if (near_target and chunk_bytes < _CHUNK_MAX_BYTES) or chunk_elements == 1:
            return tuple(chunk)
        # Halve the axes in turn, first axis first.
        chunk[axis] = math.ceil(chunk[axis] / 2)
        axis = (axis + 1) % len(chunk)


def _normalize_shape(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, np.ndarray):
        shape = shape.tolist()
    if isinstance(shape, numbers.Integral) and not isinstance(shape, bool | np.bool_):
        shape = (shape,)
    if not isinstance(shape, Sequence) or isinstance(shape, str):
        raise TypeError(f"shape must be an int or a tuple of ints, got {shape!r}")
    for extent in shape:
        if isinstance(extent, bool | np.bool_) or not isinstance(extent, numbers.Integral):
            raise TypeError(f"shape must be an int or a tuple of ints, got {shape!r}")
        if extent < 0:
            raise ValueError(f"shape must not be negative, got {tuple(shape)}")
    return tuple(int(extent) for extent in shape)


def normalize_chunks(chunks: Any, shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """Return the chunk shape a ``chunks=`` argument asks for on an array of `shape`.

    An int applies to every axis; None or -1 in a position means that axis's full extent (1 for an
    empty axis); a shorter tuple is padded with full extents; ``None``/``True`` guess (`guess_chunks`);
    ``False`` means one chunk. Chunks larger than the shape are allowed; 0 or negative is a ValueError.
    """
    shape = _normalize_shape(shape)
    if chunks is None or chunks is True:
        return guess_chunks(shape, itemsize)
    if chunks is False:
        return tuple(max(extent, 1) for extent in shape)
    if isinstance(chunks, numbers.Integral) and not isinstance(chunks, np.bool_):
        chunks = (chunks,) * len(shape)
    if isinstance(chunks, np.ndarray):
        chunks = chunks.tolist()
    if not isinstance(chunks, Sequence) or isinstance(chunks, str):
        raise TypeError(f"chunks must be an int, a tuple of ints, True or None, got {chunks!r}")
    if chunks and all(isinstance(c, tuple | list) for c in chunks):
        chunks = _regular_dask_chunks(chunks)
    if len(chunks) > len(shape):
        raise ValueError(f"chunks {tuple(chunks)} has more dimensions than shape {shape}")
    chunks = tuple(chunks) + (None,) * (len(shape) - len(chunks))
    result = []
    for extent, size in zip(shape, chunks, strict=True):
        if size is None or (isinstance(size, numbers.Integral) and not isinstance(size, bool) and size == -1):
            result.append(max(extent, 1))
        elif isinstance(size, bool | np.bool_) or not isinstance(size, numbers.Integral):
            raise TypeError(f"chunks must hold ints (or None/-1 for a full axis), got {chunks!r}")
        elif size <= 0:
            raise ValueError(f"chunk sizes must be positive (or -1/None for a full axis), got {chunks!r}")
        else:
            result.append(int(size))
    return tuple(result)


def _regular_dask_chunks(chunks: Sequence[Sequence[int]]) -> tuple[int, ...]:
    """Accept dask-style chunks ((2, 2, 1), ...) when every axis is regular; return one size per axis."""
    sizes = []
    for axis, blocks in enumerate(chunks):
        if not blocks or any(b != blocks[0] for b in blocks[:-1]) or blocks[-1] > blocks[0]:
            raise ValueError(f"irregular chunks {tuple(blocks)} on axis {axis}: only regular chunks are supported")
        sizes.append(blocks[0])
    return tuple(sizes)


def _codec_list(value: Any, argument: str) -> list[dict[str, Any]]:
    if value is None:
        return []
    items = [value] if isinstance(value, Mapping) else value
    if isinstance(items, str) or not isinstance(items, Sequence):
        raise TypeError(f"{argument}= must be a codec JSON dict or a list of them, got {value!r}")
    for item in items:
        if not isinstance(item, Mapping):
            raise TypeError(
                f"{argument}= must hold codec JSON dicts, got {item!r}; "
                "convert codec objects with asyncarr.codecs.registry first"
            )
    return [dict(item) for item in items]


def _bytes_codec(dtype: np.dtype) -> dict[str, Any]:
    if is_variable_length(dtype):
        return {"name": object_codec_id(dtype), "configuration": {}}
    if dtype.itemsize == 1 or dtype.kind in "SV":
        return {"name": "bytes", "configuration": {}}
    return {"name": "bytes", "configuration": {"endian": "big" if dtype.byteorder == ">" else "little"}}


def _sharding_codec(
    shards: Any, chunks: tuple[int, ...], inner_codecs: list[dict[str, Any]]
) -> tuple[tuple[int, ...], dict]:
    shards = _normalize_shape(shards)
    if len(shards) != len(chunks):
        raise ValueError(f"shards {shards} must have one size per dimension, like chunks {chunks}")
    for shard, chunk in zip(shards, chunks, strict=True):
        if shard == 0 or shard % chunk:
            raise ValueError(
                f"each shard size must be a positive multiple of the chunk size: shards {shards}, chunks {chunks}"
            )
    index_codecs = [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]
    configuration = {
        "chunk_shape": list(chunks),
        "codecs": inner_codecs,
        "index_codecs": index_codecs,
        "index_location": "end",
    }
    return shards, {"name": "sharding_indexed", "configuration": configuration}


def _v2_separator(dimension_separator: Any, chunk_key_encoding: Any) -> str:
    separator = dimension_separator
    if chunk_key_encoding is not None:
        encoding = chunk_key_encoding if isinstance(chunk_key_encoding, Mapping) else {"name": chunk_key_encoding}
        if encoding.get("name") != "v2":
            raise ValueError(
                f"zarr_format=2 arrays use 'v2' chunk keys; chunk_key_encoding={chunk_key_encoding!r} is not possible"
            )
        from_encoding = (encoding.get("configuration") or {}).get("separator", ".")
        if separator is not None and separator != from_encoding:
            raise ValueError(f"dimension_separator={separator!r} contradicts chunk_key_encoding={chunk_key_encoding!r}")
        separator = from_encoding
    return "." if separator is None else separator


def _v3_chunk_key_encoding(dimension_separator: Any, chunk_key_encoding: Any) -> Any:
    if chunk_key_encoding is None:
        return {"name": "default", "configuration": {"separator": dimension_separator or "/"}}
    if dimension_separator is not None:
        encoding = chunk_key_encoding if isinstance(chunk_key_encoding, Mapping) else {"name": chunk_key_encoding}
        default = "/" if encoding.get("name") == "default" else "."
        if (encoding.get("configuration") or {}).get("separator", default) != dimension_separator:
            raise ValueError(
                f"dimension_separator={dimension_separator!r} contradicts chunk_key_encoding={chunk_key_encoding!r}"
            )
    return chunk_key_encoding


def _creation_fill_value(zarr_format: int, fill_value: Any, dtype: np.dtype) -> Any:
    """The fill value a new array's metadata holds: None (v2 ``null``) only when asked for in v2."""
    if isinstance(fill_value, DefaultFillValue) or (fill_value is None and zarr_format == 3):
        return default_fill_value(dtype)
    return coerce_fill_value(fill_value, dtype)


def create_array_metadata(
    *,
    zarr_format: Literal[2, 3],
    shape: int | tuple[int, ...],
    chunks: Any,
    dtype: Any,
    fill_value: Any = DEFAULT_FILL_VALUE,
    order: Literal["C", "F"] = "C",
    compressor: dict[str, Any] | Sequence[dict[str, Any]] | None = None,
    filters: Sequence[dict[str, Any]] | None = None,
    codecs: Sequence[dict[str, Any]] | None = None,
    shards: tuple[int, ...] | None = None,
    dimension_separator: Literal[".", "/"] | None = None,
    chunk_key_encoding: dict[str, Any] | None = None,
    dimension_names: Sequence[str | None] | None = None,
    attributes: Mapping[str, Any] | None = None,
) -> ArrayMetadata:
    """Build and validate the metadata of a new array; bad arguments raise ValueError or TypeError.

    `chunks` goes through `normalize_chunks`. `fill_value` not given is the dtype's default, written
    explicitly; None is written as ``null`` in v2 (zarr-python 3 does the same) and as the default
    in v3, which has no ``null``. v2 takes `compressor`/`filters` as numcodecs JSON. v3 takes either a full `codecs`
    chain or builds one: `transpose` (for order "F"), `filters`, `bytes`, then `compressor` (v3 JSON);
    with `shards` that chain runs inside a ``sharding_indexed`` codec whose inner chunks are `chunks`.
    """
    if zarr_format not in (2, 3):
        raise ValueError(f"zarr_format must be 2 or 3, got {zarr_format!r}")
    if order not in ("C", "F"):
        raise ValueError(f"order must be 'C' or 'F', got {order!r}")
    if dimension_separator not in (None, ".", "/"):
        raise ValueError(f"dimension_separator must be '.' or '/', got {dimension_separator!r}")
    shape = _normalize_shape(shape)
    dtype = normalize_dtype(dtype)
    try:
        dtype_to_json(zarr_format, dtype)
    except MetadataError as exc:
        raise ValueError(str(exc)) from None
    chunks = normalize_chunks(chunks, shape, dtype.itemsize)
    attributes = {} if attributes is None else attributes
    if zarr_format == 2:
        for name, value in (("codecs", codecs), ("shards", shards), ("dimension_names", dimension_names)):
            if value is not None:
                raise ValueError(f"{name}= needs zarr_format=3; Zarr v2 arrays cannot have it")
        filters_json = _codec_list(filters, "filters")
        compressors = _codec_list(compressor, "compressor")
        if len(compressors) > 1:
            raise ValueError("zarr_format=2 arrays take at most one compressor")
        if holds_python_objects(dtype, filters_json, compressors[0] if compressors else None):
            # zarr-python 2's default fill value for object arrays is 0, kept as written.
            fill_value = 0 if isinstance(fill_value, DefaultFillValue) else python_object_fill_value(fill_value)
        else:
            fill_value = _creation_fill_value(zarr_format, fill_value, dtype)
        return ArrayMetadataV2(
            shape=shape,
            chunks=chunks,
            dtype=dtype,
            fill_value=fill_value,
            order=order,
            compressor=compressors[0] if compressors else None,
            filters=filters_json or None,
            dimension_separator=_v2_separator(dimension_separator, chunk_key_encoding),
            attributes=attributes,
        )

    fill_value = _creation_fill_value(zarr_format, fill_value, dtype)
    if codecs is not None:
        if compressor is not None or filters is not None:
            raise ValueError("pass either codecs= (the full v3 chain) or compressor=/filters=, not both")
        chain = _codec_list(codecs, "codecs")
        provisional = ArrayMetadataV3(shape=shape, chunks=chunks, dtype=dtype, fill_value=fill_value, codecs=chain)
        if order == "F" and len(shape) > 1 and provisional.order != "F":
            raise ValueError("order='F' needs the codecs= chain to start with a transpose to reversed axes")
    else:
        chain = []
        if order == "F" and len(shape) > 1:
            chain.append({"name": "transpose", "configuration": {"order": list(range(len(shape)))[::-1]}})
        chain += [*_codec_list(filters, "filters"), _bytes_codec(dtype), *_codec_list(compressor, "compressor")]
    if shards is not None:
        chunks, sharding = _sharding_codec(shards, chunks, chain)
        chain = [sharding]
    return ArrayMetadataV3(
        shape=shape,
        chunks=chunks,
        dtype=dtype,
        fill_value=fill_value,
        codecs=tuple(chain),
        chunk_key_encoding=_v3_chunk_key_encoding(dimension_separator, chunk_key_encoding),
        dimension_names=None if dimension_names is None else tuple(dimension_names),
        attributes=attributes,
    )
