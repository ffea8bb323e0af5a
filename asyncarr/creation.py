"""Turning the arguments users pass to ``create``/``open_array`` into array metadata."""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from . import config
from .codecs import registry
from .metadata import DEFAULT_FILL_VALUE, ArrayMetadataV2, ArrayMetadataV3, create_array_metadata, normalize_chunks
from .metadata.dtypes import normalize_dtype

__all__ = ["build_array_metadata", "normalize_shape"]


def normalize_shape(shape: Any) -> tuple[int, ...]:
    """An int or a sequence of ints as a shape tuple; reject negatives and non-integers."""
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    if not isinstance(shape, Sequence) or isinstance(shape, str | bytes):
        raise TypeError(f"shape must be an int or a tuple of ints, got {shape!r}")
    if not all(isinstance(s, numbers.Integral) for s in shape):
        raise TypeError(f"shape must contain only ints, got {tuple(shape)!r}")
    result = tuple(int(s) for s in shape)
    if any(s < 0 for s in result):
        raise ValueError(f"shape cannot have negative lengths, got {result}")
    return result


def build_array_metadata(
    *,
    shape: Any,
    dtype: Any = None,
    chunks: Any = True,
    fill_value: Any = DEFAULT_FILL_VALUE,
    compressor: Any = "default",
    filters: Sequence[Any] | None = None,
    codecs: Sequence[Any] | None = None,
    order: str | None = None,
    zarr_format: int | None = None,
    attributes: Mapping[str, Any] | None = None,
    dimension_separator: str | None = None,
    chunk_key_encoding: Mapping[str, Any] | None = None,
    dimension_names: Sequence[str | None] | None = None,
    compression: Any = None,
    compression_opts: Any = None,
    shards: Any = None,
    object_codec: Any = None,
) -> ArrayMetadataV2 | ArrayMetadataV3:
    """Validate creation arguments and build v2 or v3 metadata from them.

    ``object_codec`` is zarr 2's spelling for the codec of an object array: the first filter.
    """
    zarr_format = config.get("default_zarr_format") if zarr_format is None else zarr_format
    if zarr_format not in (2, 3):
        raise ValueError(f"zarr_format must be 2 or 3, got {zarr_format!r}")
    if object_codec is not None:
        if zarr_format != 2:
            raise ValueError("object_codec= is zarr 2's filter for object arrays: it needs zarr_format=2")
        given = [] if filters is None else list(filters) if isinstance(filters, list | tuple) else [filters]
        filters = [object_codec, *given]
    shape = normalize_shape(shape)
    dtype = normalize_dtype("f8" if dtype is None else dtype)
    order = "C" if order is None else order
    if order not in ("C", "F"):
        raise ValueError(f"order must be 'C' or 'F', got {order!r}")
    if shards is not None:
        if zarr_format != 3:
            raise ValueError("shards= needs zarr_format=3: sharding is a Zarr v3 codec")
        shards = normalize_shape(shards)
    # With shards, an automatic inner chunk shape is guessed within one shard, not the array.
    chunks = normalize_chunks(True if chunks is None else chunks, shards or shape, dtype.itemsize)
    if compression is not None or compression_opts is not None:
        compressor = registry.normalize_compression(compression, compression_opts)
    if codecs is not None:
        if zarr_format == 2:
            raise ValueError("codecs= describes a Zarr v3 codec chain; for zarr_format=2 use compressor= and filters=")
        codec_json = list(registry.normalize_codecs(codecs, dtype))
        compressor_json, filters_json = None, None
    else:
        codec_json = None
        compressor_json = registry.normalize_compressor(compressor, zarr_format, dtype)
        filters_json = registry.normalize_filters(filters, zarr_format, dtype) or None
    return create_array_metadata(
        zarr_format=zarr_format,
        shape=shape,
        chunks=chunks,
        dtype=dtype,
        fill_value=fill_value,
        order=order,
        compressor=compressor_json,
        filters=filters_json,
        codecs=codec_json,
        dimension_separator=dimension_separator,
        chunk_key_encoding=dict(chunk_key_encoding) if chunk_key_encoding is not None else None,
        dimension_names=dimension_names,
        attributes=dict(attributes or {}),
        shards=shards,
    )


# -- zarr-python 3's creation arguments ---------------------------------------------------------

AUTO = "auto"
ZSTD_V3 = {"name": "zstd", "configuration": {"level": 0, "checksum": False}}
"""zarr-python 3's default compressor for new v3 arrays (``compressors="auto"``)."""
ZSTD_V2 = {"id": "zstd", "level": 0}
"""zarr-python 3's default compressor for new v2 arrays."""


def _codec_items(value: Any) -> list[Any]:
    """One codec or a sequence of them as a list; zarr-python's codec objects become their JSON."""
    if value is None:
        return []
    items = [value] if isinstance(value, Mapping | str) or not isinstance(value, Sequence) else list(value)
    return [_plain_codec(item) for item in items]


def _plain_codec(codec: Any) -> Any:
    """zarr-python 3's codec objects (``zarr.codecs.ZstdCodec(...)``) as their v3 JSON; anything else as given."""
    to_dict = getattr(codec, "to_dict", None)
    if callable(to_dict) and type(codec).__module__.startswith("zarr."):
        return to_dict()
    return codec


def array_config_write_empty_chunks(write_empty_chunks: bool | None, array_config: Any) -> bool | None:
    """A handle's ``write_empty_chunks``: the keyword (zarr 2), else zarr 3's ``config={"write_empty_chunks": ...}``
    (an ArrayConfig or a dict); None follows ``asyncarr.config``. Not metadata: nothing is stored."""
    if array_config is not None and not isinstance(array_config, Mapping):
        to_dict = getattr(array_config, "to_dict", None)  # zarr's ArrayConfig
        if not callable(to_dict):
            raise TypeError(f"config= takes a dict such as {{'write_empty_chunks': True}}, got {array_config!r}")
        array_config = to_dict()
    from_config = None if array_config is None else array_config.get("write_empty_chunks")
    if write_empty_chunks is not None and from_config is not None and bool(write_empty_chunks) != bool(from_config):
        raise ValueError(
            f"write_empty_chunks={write_empty_chunks!r} and config={{'write_empty_chunks': {from_config!r}}} disagree"
        )
    chosen = from_config if write_empty_chunks is None else write_empty_chunks
    if chosen is not None and not isinstance(chosen, bool | np.bool_):
        raise TypeError(f"write_empty_chunks must be True, False or None, got {chosen!r}")
    return None if chosen is None else bool(chosen)


def zarr3_creation_arguments(
    *,
    dtype: Any,
    chunks: Any = AUTO,
    shards: Any = None,
    filters: Any = AUTO,
    compressors: Any = AUTO,
    serializer: Any = AUTO,
    zarr_format: int | None = 3,
    chunk_key_encoding: Any = None,
) -> dict[str, Any]:
    """``build_array_metadata`` arguments for zarr-python 3's ``compressors=``/``serializer=``/``filters=``.

    ``"auto"`` means what zarr-python 3 writes: v3 ``bytes`` (``vlen-utf8`` for strings) then
    ``zstd`` level 0, no filters; v2 a ``zstd`` level 0 compressor. None or ``()`` means none.
    """
    zarr_format = config.get("default_zarr_format") if zarr_format is None else zarr_format
    arguments: dict[str, Any] = {"chunks": True if isinstance(chunks, str) and chunks == AUTO else chunks}
    if isinstance(shards, Mapping):  # zarr's {"shape": ..., "index_location": ...}: only the shape is used
        shards = shards.get("shape")
    arguments["shards"] = shards
    if isinstance(chunk_key_encoding, Mapping) and zarr_format == 2:
        arguments["dimension_separator"] = chunk_key_encoding.get("separator", ".")
    elif chunk_key_encoding is not None:
        arguments["chunk_key_encoding"] = chunk_key_encoding
    auto = {
        name: isinstance(value, str) and value == AUTO
        for name, value in (("filters", filters), ("compressors", compressors), ("serializer", serializer))
    }
    if zarr_format == 2:
        if not auto["serializer"]:
            raise ValueError("serializer= needs zarr_format=3: Zarr v2 arrays have no array->bytes codec to choose")
        compressor_list = [ZSTD_V2] if auto["compressors"] else _codec_items(compressors)
        if len(compressor_list) > 1:
            raise ValueError(f"zarr_format=2 arrays take at most one compressor, got {len(compressor_list)}")
        arguments["compressor"] = compressor_list[0] if compressor_list else None
        arguments["filters"] = None if auto["filters"] else (_codec_items(filters) or None)
        return arguments
    chain = [] if auto["filters"] else _codec_items(filters)
    chain.append(registry.serializer_json(normalize_dtype(dtype)) if auto["serializer"] else _plain_codec(serializer))
    chain += [ZSTD_V3] if auto["compressors"] else _codec_items(compressors)
    arguments["codecs"] = chain
    return arguments
