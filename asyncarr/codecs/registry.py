"""Codec names and forms: numcodecs objects, v2 config dicts and v3 codec JSON, in both directions.

v2 metadata stores numcodecs configs (``{"id": "blosc", ...}``); v3 metadata stores codec JSON
(``{"name": "blosc", "configuration": {...}}``). Codecs with a v3 spec name (blosc, zstd, gzip,
crc32c) use it; every other numcodecs codec is written as ``numcodecs.<id>``, exactly as
zarr-python 3 writes it, so each reads the other's arrays. The ``normalize_*`` functions turn
what users pass to ``create``/``open_array`` (``compressor=``, ``filters=``, ``codecs=``, and the
zarr-2 tutorial's ``compression=``/``compression_opts=``) into the form the metadata holds.
"""

from __future__ import annotations

import json
import pickle
import sys
from collections.abc import Iterable, Mapping
from typing import Any

import numcodecs
import numpy as np
from numcodecs.abc import Codec

from asyncarr import config
from asyncarr.codecs.allowlist import check_codec_allowed, validated_v2_config
from asyncarr.codecs.v3 import (
    ArrayArrayCodec,
    ArrayBytesCodec,
    BytesBytesCodec,
    ChunkSpec,
    V3Codec,
    codec_class,
    codec_from_json,
    shown,
)
from asyncarr.errors import MetadataError
from asyncarr.metadata.dtypes import is_variable_length, normalize_dtype, object_codec_id

__all__ = [
    "DEFAULT_COMPRESSOR",
    "bytes_codec_json",
    "check_codec_allowed",
    "codec_from_v2_config",
    "codec_from_v3_json",
    "default_compressor",
    "normalize_codecs",
    "normalize_compression",
    "normalize_compressor",
    "normalize_filters",
    "serializer_json",
    "to_v3_json",
    "v3_codec_chain",
]

DEFAULT_COMPRESSOR: dict[str, Any] = {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0}
"""The v2 config of ``compressor="default"``: ``Blosc(cname="lz4", clevel=5, shuffle=SHUFFLE)``."""

_BLOSC_SHUFFLE_NAMES = {0: "noshuffle", 1: "shuffle", 2: "bitshuffle"}
_BLOSC_SHUFFLE_NUMBERS = {name: number for number, name in _BLOSC_SHUFFLE_NAMES.items()}


def default_compressor() -> Codec | None:
    """Return a new codec of ``config.default_compressor`` (``Blosc(cname="lz4", clevel=5, shuffle=SHUFFLE)``
    unless changed), or None where it was set to no compression."""
    default = config.get("default_compressor")
    return None if default is None else numcodecs.get_codec(dict(default))


class _TrustedPickle(numcodecs.Pickle):
    """numcodecs' Pickle, built only when the user set ``config.allow_pickle``: that switch is their
    word that they trust the data, so it unpickles even where numcodecs' own switch is off."""

    def decode(self, buf: Any, out: Any = None) -> Any:
        """Unpickle `buf` (runs code the data's author chose: only for data the user trusts)."""
        decoded = pickle.loads(memoryview(buf).cast("B"))
        if out is not None:
            np.copyto(out, decoded)
            return out
        return decoded


def codec_from_v2_config(config: Mapping[str, Any], where: str = "codec") -> Codec:
    """Build the numcodecs codec a v2 config dict describes, if it is on the allowlist
    (`check_codec_allowed`) and its fields are valid; otherwise raise `MetadataError` naming
    `where` (the metadata field, e.g. ``filters[0]``)."""
    config = validated_v2_config(config, where)
    if config["id"] == "pickle":
        return _TrustedPickle(**{k: v for k, v in config.items() if k != "id"})
    try:
        return numcodecs.get_codec(dict(config))
    except Exception as exc:  # numcodecs raises what its constructors raise; none may escape as another type
        raise MetadataError(f"{where}: invalid config for codec {config['id']!r}: {shown(config)}: {exc}") from exc


def to_v3_json(codec: Codec, dtype: np.dtype) -> dict[str, Any]:
    """Return the v3 JSON of a numcodecs codec used on arrays of `dtype` (its item size sets
    Blosc's ``typesize`` and resolves ``AUTOSHUFFLE``, as zarr-python does)."""
    config = codec.get_config()
    codec_id = config.pop("id")
    if codec_id in ("vlen-utf8", "vlen-bytes"):
        return {"name": codec_id, "configuration": {}}
    if codec_id == "blosc":
        # Variable-length data reaches the compressor as bytes: zarr-python gives it typesize 1.
        typesize = 1 if is_variable_length(normalize_dtype(dtype)) else np.dtype(dtype).itemsize
        shuffle = config["shuffle"]
        if shuffle == numcodecs.Blosc.AUTOSHUFFLE:
            shuffle = numcodecs.Blosc.BITSHUFFLE if typesize == 1 else numcodecs.Blosc.SHUFFLE
        configuration = {
            "typesize": typesize,
            "cname": config["cname"],
            "clevel": config["clevel"],
            "shuffle": _BLOSC_SHUFFLE_NAMES[shuffle],
            "blocksize": config.get("blocksize", 0),
        }
        return {"name": "blosc", "configuration": configuration}
    if codec_id == "zstd":
        return {"name": "zstd", "configuration": {"level": config["level"], "checksum": config.get("checksum", False)}}
    if codec_id == "gzip":
        return {"name": "gzip", "configuration": {"level": config["level"]}}
    if codec_id == "crc32c" and config.get("location", "end") == "end":
        return {"name": "crc32c"}
    return {"name": f"numcodecs.{codec_id}", "configuration": config}


def codec_from_v3_json(json: Mapping[str, Any], dtype: np.dtype) -> Codec:
    """Return the numcodecs codec equivalent to v3 codec JSON (``bytes``/``transpose`` have none)."""
    if isinstance(json, Mapping) and json.get("name") == "blosc":
        config = json.get("configuration", {})
        return numcodecs.Blosc(
            cname=config.get("cname", "lz4"),
            clevel=config.get("clevel", 5),
            shuffle=_BLOSC_SHUFFLE_NUMBERS.get(config.get("shuffle"), numcodecs.Blosc.SHUFFLE),
            blocksize=config.get("blocksize", 0),
            typesize=config.get("typesize"),
        )
    codec = codec_from_json(json, ChunkSpec((), normalize_dtype(dtype)))
    numcodecs_codec = getattr(codec, "numcodecs_codec", None)
    if numcodecs_codec is None:
        if codec.name == "crc32c":
            return numcodecs.CRC32C()
        raise MetadataError(f"codec {codec.name!r} has no numcodecs equivalent")
    return numcodecs_codec


def normalize_compression(compression: Any, compression_opts: Any = None) -> Codec | None:
    """Map the zarr-2 spellings ``compression="blosc"|"zlib"|"gzip"|"lzma"|"zstd"|"bz2"|None`` plus
    ``compression_opts`` (codec kwargs as a dict, positional args as a list, or one value such as
    a zlib level) onto a numcodecs codec, or None for no compression."""
    if compression is None or (isinstance(compression, str) and compression.lower() == "none"):
        return None
    if isinstance(compression, Codec):
        return compression
    if compression == "default":
        return default_compressor()
    if not isinstance(compression, str):
        raise TypeError(f"compression must be a codec name or a numcodecs codec, got {compression!r}")
    try:
        codec_class = numcodecs.registry.codec_registry[compression]
    except KeyError:
        raise ValueError(
            f"unknown compression {compression!r}; try 'blosc', 'zstd', 'zlib', 'gzip', 'lzma' or 'bz2'"
        ) from None
    try:
        if compression_opts is None:
            return codec_class()
        if isinstance(compression_opts, Mapping):
            return codec_class(**compression_opts)
        if isinstance(compression_opts, (list, tuple)):
            return codec_class(*compression_opts)
        return codec_class(compression_opts)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"cannot build codec {compression!r} from compression_opts={compression_opts!r}: {exc}"
        ) from exc


def _as_numcodecs(value: Any, dtype: np.dtype | None) -> Codec | None:
    """Turn one user-given codec (object, v2 config, v3 JSON, name) into a numcodecs codec."""
    if value is None or isinstance(value, Codec):
        return value
    if isinstance(value, str):
        return normalize_compression(value)
    if isinstance(value, Mapping) and "id" in value:
        return codec_from_v2_config(value)
    return codec_from_v3_json(_as_v3_json(value, dtype), _require_dtype(dtype))


def _as_v3_json(value: Any, dtype: np.dtype | None) -> dict[str, Any]:
    """Turn one user-given codec into v3 codec JSON."""
    json_for_dtype = getattr(value, "v3_json_for_dtype", None)
    if callable(json_for_dtype) and not isinstance(value, type):
        # zarr 3's codec classes (asyncarr.sync.codecs): Blosc's typesize, bytes' endianness follow the dtype
        return json_for_dtype(_require_dtype(dtype))
    if isinstance(value, V3Codec):
        return value.to_json()
    if isinstance(value, Mapping) and isinstance(value.get("name"), str):
        return {k: v for k, v in value.items() if k in ("name", "configuration")}
    if hasattr(value, "to_dict") and not isinstance(value, (Codec, Mapping)):
        # a zarr-python 3 codec object (zarr.codecs.BloscCodec, zarr.codecs.numcodecs.Delta...)
        return _as_v3_json(json.loads(json.dumps(value.to_dict())), dtype)
    if value == "bytes":
        return bytes_codec_json(_require_dtype(dtype))
    if value == "crc32c":
        return {"name": "crc32c"}
    codec = _as_numcodecs(value, dtype)
    if codec is None:
        raise ValueError("None is not a codec")
    return to_v3_json(codec, _require_dtype(dtype))


def _is_one_codec(value: Any) -> bool:
    """True for a single codec (rather than a list of them) in any accepted form."""
    return isinstance(value, (Codec, Mapping, V3Codec, str)) or hasattr(value, "to_dict")


def _require_dtype(dtype: np.dtype | None) -> np.dtype:
    if dtype is None:
        raise TypeError("dtype is required to express a codec in Zarr v3 form")
    return normalize_dtype(dtype)


def _codec_kind(codec_json: Mapping[str, Any]) -> type[V3Codec]:
    cls = codec_class(codec_json["name"])
    for kind in (ArrayArrayCodec, ArrayBytesCodec, BytesBytesCodec):
        if issubclass(cls, kind):
            return kind
    raise MetadataError(f"codec {codec_json.get('name')!r} is of no known kind")  # pragma: no cover - defensive


def v2_config(codec: Codec) -> dict[str, Any]:
    """The ``.zarray`` form of a numcodecs codec, written as zarr-python writes it."""
    config = codec.get_config()
    # numcodecs >= 0.13 adds Zstd's "checksum": false, which tensorstore rejects as an unknown member.
    if config.get("id") == "zstd" and not config.get("checksum", False):
        config.pop("checksum", None)
    return config


def normalize_compressor(value: Any, zarr_format: int, dtype: np.dtype | None = None) -> dict | None:
    """Turn a ``compressor=`` argument into metadata form: a v2 config dict, or for v3 the codec
    JSON of a bytes->bytes codec (`dtype` required for v3). Accepts a numcodecs codec, a v2
    config dict, v3 JSON or codec object, a codec name such as ``"zstd"``, ``"default"``
    (``Blosc(cname="lz4", clevel=5, shuffle=SHUFFLE)``) and None (no compression)."""
    if value is None:
        return None
    if isinstance(value, str) and value == "default":
        value = default_compressor()
        if value is None:
            return None
    if zarr_format == 2:
        codec = _as_numcodecs(value, dtype)
        return None if codec is None else v2_config(codec)
    if zarr_format != 3:
        raise ValueError(f"zarr_format must be 2 or 3, got {zarr_format!r}")
    if isinstance(value, str) and value.lower() == "none":
        return None
    codec_json = _as_v3_json(value, dtype)
    if _codec_kind(codec_json) is not BytesBytesCodec:
        raise ValueError(f"compressor {value!r} is not a bytes->bytes codec; pass it in filters= or codecs=")
    return codec_json


def normalize_filters(value: Any, zarr_format: int, dtype: np.dtype | None = None) -> tuple[dict, ...] | None:
    """Turn a ``filters=`` argument (one codec or a list of them, or None) into metadata form:
    v2: a tuple of config dicts, or None for no filters; v3: a tuple of array->array codec JSON
    (empty for none; `dtype` required)."""
    if value is None:
        return None if zarr_format == 2 else ()
    items = [value] if _is_one_codec(value) else list(value)
    if zarr_format == 2:
        codecs = [_as_numcodecs(item, dtype) for item in items]
        return tuple(v2_config(codec) for codec in codecs if codec is not None) or None
    if zarr_format != 3:
        raise ValueError(f"zarr_format must be 2 or 3, got {zarr_format!r}")
    codec_jsons = tuple(_as_v3_json(item, dtype) for item in items)
    for item, codec_json in zip(items, codec_jsons, strict=True):
        if _codec_kind(codec_json) is not ArrayArrayCodec:
            raise ValueError(f"filter {item!r} is not an array->array codec; pass it as compressor= or in codecs=")
    return codec_jsons


def serializer_json(dtype: Any) -> dict[str, Any]:
    """Return the default array->bytes codec JSON for `dtype`: ``vlen-utf8`` for variable-length
    strings, ``vlen-bytes`` for variable-length bytes, else ``bytes`` (as zarr-python chooses)."""
    dtype = normalize_dtype(dtype)
    if is_variable_length(dtype):
        return {"name": object_codec_id(dtype), "configuration": {}}
    return bytes_codec_json(dtype)


def bytes_codec_json(dtype: np.dtype) -> dict[str, Any]:
    """Return the ``bytes`` codec JSON for `dtype` (no ``endian`` for single-byte types)."""
    dtype = np.dtype(dtype)
    if dtype.itemsize == 1 or dtype.byteorder == "|":
        return {"name": "bytes"}
    byteorder = dtype.byteorder if dtype.byteorder != "=" else ("<" if sys.byteorder == "little" else ">")
    return {"name": "bytes", "configuration": {"endian": "little" if byteorder == "<" else "big"}}


def v3_codec_chain(
    *, dtype: np.dtype, ndim: int, compressor: Any = "default", filters: Any = None, order: str = "C"
) -> tuple[dict[str, Any], ...]:
    """Build a full v3 codec chain from v2-style arguments: ``transpose`` (for ``order="F"``),
    the filters, the serializer (`serializer_json`) and the compressor."""
    dtype = normalize_dtype(dtype)
    chain: list[dict[str, Any]] = []
    if order == "F" and ndim > 1:
        chain.append({"name": "transpose", "configuration": {"order": list(range(ndim - 1, -1, -1))}})
    elif order not in ("C", "F"):
        raise ValueError(f"order must be 'C' or 'F', got {order!r}")
    chain.extend(normalize_filters(filters, 3, dtype) or ())
    chain.append(serializer_json(dtype))
    compressor_json = normalize_compressor(compressor, 3, dtype)
    if compressor_json is not None:
        chain.append(compressor_json)
    return tuple(chain)


def normalize_codecs(codecs: Iterable[Any] | Any, dtype: np.dtype) -> tuple[dict[str, Any], ...]:
    """Turn a ``codecs=`` argument into a v3 codec chain; a chain without an array->bytes codec
    gets ``bytes`` inserted after its array->array codecs. Raises `ValueError` if out of order."""
    dtype = normalize_dtype(dtype)
    items = [codecs] if _is_one_codec(codecs) else list(codecs)
    codec_jsons = [_as_v3_json(item, dtype) for item in items]
    kinds = [_codec_kind(codec_json) for codec_json in codec_jsons]
    if ArrayBytesCodec not in kinds:
        position = sum(1 for kind in kinds if kind is ArrayArrayCodec)
        codec_jsons.insert(position, serializer_json(dtype))
        kinds.insert(position, ArrayBytesCodec)
    rank = {ArrayArrayCodec: 0, ArrayBytesCodec: 1, BytesBytesCodec: 2}
    ranks = [rank[kind] for kind in kinds]
    if ranks != sorted(ranks) or ranks.count(1) != 1:
        names = [codec_json["name"] for codec_json in codec_jsons]
        raise ValueError(
            f"invalid codec chain {names}: expected array->array codecs, then exactly one array->bytes "
            "codec, then bytes->bytes codecs"
        )
    return tuple(codec_jsons)
