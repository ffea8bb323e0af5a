"""Which numcodecs codecs metadata may build, and which configurations of them are valid.

Metadata is written by whoever wrote the store, so it chooses the codecs a read runs. Only
codecs that describe bytes are built from it: compressors, filters and checksums, each with
its configuration checked field by field (types and ranges) before numcodecs sees it. Object
codecs are built only where they describe data and run no code (``vlen-utf8``, ``vlen-bytes``,
``vlen-array``, ``json2``, ``msgpack2``, for object arrays only, each decoded with a bound:
`asyncarr.codecs.objects`); ``pickle`` only when the user sets
``config.allow_pickle``, since unpickling runs code the data's author chose. Every refusal is a
`MetadataError` naming the metadata field.
"""

from __future__ import annotations

import lzma
import math
import pickle
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from asyncarr import config
from asyncarr.codecs.v3 import shown
from asyncarr.errors import MetadataError

__all__ = [
    "BYTES_CODEC_IDS",
    "DATA_OBJECT_CODEC_IDS",
    "MAX_CATEGORY_LABELS",
    "OBJECT_LIST_CODEC_IDS",
    "VARIABLE_LENGTH_CODEC_IDS",
    "check_codec_allowed",
    "validated_v2_config",
]

Check = Callable[[Any], bool]


def _int_in(low: int, high: int) -> Check:
    return lambda value: type(value) is int and low <= value <= high


def _optional(check: Check) -> Check:
    return lambda value: value is None or check(value)


def _one_of(*choices: Any) -> Check:
    return lambda value: isinstance(value, str) and value in choices


def _finite_number(value: Any) -> bool:
    return type(value) in (int, float) and math.isfinite(value)


def _short_dtype(value: Any) -> np.dtype | None:
    """The NumPy data type a short type string such as ``"<i4"`` names, or None for anything else."""
    if not isinstance(value, str) or len(value) > 16:
        return None
    try:
        return np.dtype(value)
    except Exception:
        return None


def _numeric_dtype(value: Any) -> bool:
    """A plain numeric data type string such as ``"<i4"`` (no objects, records or sub-arrays)."""
    dtype = _short_dtype(value)
    return dtype is not None and dtype.kind in "biufc" and dtype.fields is None and dtype.subdtype is None


def _lzma_filters(value: Any) -> bool:
    if value is None:
        return True
    if not isinstance(value, list) or not 1 <= len(value) <= 4:
        return False
    for spec in value:
        if not isinstance(spec, Mapping) or "id" not in spec:
            return False
        if not all(isinstance(k, str) and _int_in(0, 2**62)(v) for k, v in spec.items()):
            return False
    try:  # liblzma knows which filter ids and options exist
        lzma.LZMADecompressor(lzma.FORMAT_RAW, filters=list(value))
    except (ValueError, TypeError, OverflowError, lzma.LZMAError, MemoryError):
        return False
    return True


MAX_CATEGORY_LABELS = 65536
"""Most labels a ``categorize`` filter's metadata may list."""
_MAX_CATEGORY_LABEL_CHARACTERS = 1 << 22


def _category_labels(value: Any) -> bool:
    """A list of at most `MAX_CATEGORY_LABELS` strings with at most 4 Mi characters in all."""
    if not isinstance(value, list) or len(value) > MAX_CATEGORY_LABELS:
        return False
    return all(isinstance(label, str) for label in value) and sum(map(len, value)) <= _MAX_CATEGORY_LABEL_CHARACTERS


def _unicode_dtype(value: Any) -> bool:
    """A fixed-length Unicode data type string such as ``"<U5"`` (what ``categorize`` decodes to)."""
    dtype = _short_dtype(value)
    return dtype is not None and dtype.kind == "U" and dtype.itemsize > 0


def _unsigned_dtype(value: Any) -> bool:
    return isinstance(value, str) and value in ("|u1", "<u2", "<u4", "<u8", ">u2", ">u4", ">u8", "u1", "uint8")


_BLOSC_CNAMES = ("lz4", "lz4hc", "blosclz", "zstd", "snappy", "zlib")
_CHECKSUM_FIELDS: dict[str, Check] = {"location": _one_of("start", "end")}

# Each allowed codec id and the fields its configuration may hold (all optional, as numcodecs
# gives each a default), with what each field must be.
_BYTES_CODEC_FIELDS: dict[str, dict[str, Check]] = {
    # compressors
    "blosc": {
        "cname": _one_of(*_BLOSC_CNAMES),
        "clevel": _int_in(0, 9),
        "shuffle": _int_in(-1, 2),
        "blocksize": _int_in(0, 2**31 - 1),
        "typesize": _optional(_int_in(1, 255)),
    },
    "zstd": {"level": _int_in(-(2**17), 22), "checksum": lambda v: type(v) is bool},
    "lz4": {"acceleration": _int_in(-(2**31), 2**31 - 1)},
    "zlib": {"level": _int_in(-1, 9)},
    "gzip": {"level": _int_in(-1, 9)},
    "bz2": {"level": _int_in(1, 9)},
    "lzma": {
        "format": _int_in(0, 3),
        "check": _int_in(-1, 15),
        "preset": _optional(_int_in(0, 9 | lzma.PRESET_EXTREME)),
        "filters": _lzma_filters,
    },
    # filters
    "delta": {"dtype": _numeric_dtype, "astype": _optional(_numeric_dtype)},
    "fixedscaleoffset": {
        "offset": _finite_number,
        "scale": _finite_number,
        "dtype": _numeric_dtype,
        "astype": _optional(_numeric_dtype),
    },
    "quantize": {"digits": _int_in(0, 100), "dtype": _numeric_dtype, "astype": _optional(_numeric_dtype)},
    "bitround": {"keepbits": _int_in(0, 64)},
    "packbits": {},
    "astype": {"encode_dtype": _numeric_dtype, "decode_dtype": _numeric_dtype},
    "shuffle": {"elementsize": _int_in(1, 2**16)},
    # fixed-length strings as small integers; the labels come from the metadata, so are bounded
    "categorize": {"labels": _category_labels, "dtype": _unicode_dtype, "astype": _unsigned_dtype},
    # checksums
    "crc32": _CHECKSUM_FIELDS,
    "crc32c": _CHECKSUM_FIELDS,
    "adler32": _CHECKSUM_FIELDS,
    "fletcher32": {},
    "jenkins_lookup3": {"initval": _int_in(0, 2**32 - 1), "prefix": lambda v: v is None},
}
# Fields numcodecs requires (it has no default for them).
_REQUIRED_FIELDS = {
    "delta": ("dtype",),
    "fixedscaleoffset": ("offset", "scale", "dtype"),
    "quantize": ("digits", "dtype"),
    "bitround": ("keepbits",),
    "astype": ("encode_dtype", "decode_dtype"),
    "categorize": ("labels", "dtype"),
}


def _bool(value: Any) -> bool:
    return type(value) is bool


def _separators(value: Any) -> bool:
    return (
        isinstance(value, list | tuple)
        and len(value) == 2
        and all(isinstance(part, str) and len(part) <= 8 for part in value)
    )


_OBJECT_CODEC_FIELDS: dict[str, dict[str, Check]] = {
    # JSON and MessagePack describe data: decoding them builds lists, dicts, numbers and strings.
    "json2": {
        "encoding": _one_of("utf-8", "utf8", "ascii", "utf-16", "utf-32", "latin-1"),
        "skipkeys": _bool,
        "ensure_ascii": _bool,
        "check_circular": _bool,
        "allow_nan": _bool,
        "indent": _optional(_int_in(0, 16)),
        "separators": _optional(_separators),
        "sort_keys": _bool,
        "strict": _bool,
    },
    "msgpack2": {"raw": _bool, "use_single_float": _bool, "use_bin_type": _bool},
    "vlen-utf8": {},
    "vlen-bytes": {},
    "vlen-array": {"dtype": _numeric_dtype},
    "pickle": {"protocol": _int_in(0, pickle.HIGHEST_PROTOCOL)},
}

BYTES_CODEC_IDS = frozenset(_BYTES_CODEC_FIELDS)
"""numcodecs ids metadata may always build: compressors, filters and checksums of bytes."""
VARIABLE_LENGTH_CODEC_IDS = frozenset({"vlen-utf8", "vlen-bytes", "vlen-array"})
"""Object codecs with numcodecs' variable-length layout (an element count, then length-prefixed items)."""
OBJECT_LIST_CODEC_IDS = frozenset({"json2", "msgpack2"})
"""Object codecs that store a chunk as one list of its elements, then its dtype and shape."""
DATA_OBJECT_CODEC_IDS = VARIABLE_LENGTH_CODEC_IDS | OBJECT_LIST_CODEC_IDS
"""Object codecs metadata may build (for object data types only): they describe data and run no code."""


def check_codec_allowed(codec_id: str, where: str) -> None:
    """Raise `MetadataError` naming `where` unless metadata may build the numcodecs codec `codec_id`."""
    if codec_id in BYTES_CODEC_IDS or codec_id in DATA_OBJECT_CODEC_IDS:
        return
    if codec_id in config.get("trusted_codecs"):
        return
    if codec_id == "pickle":
        if config.get("allow_pickle"):
            return
        raise MetadataError(
            f"{where}: codec 'pickle' is refused: unpickling a chunk runs code chosen by whoever wrote "
            "the data. If you trust this data, allow it explicitly with "
            "asyncarr.config.set(allow_pickle=True) (or ASYNCARR_ALLOW_PICKLE=1)"
        )
    allowed = ", ".join(sorted(BYTES_CODEC_IDS | DATA_OBJECT_CODEC_IDS))
    raise MetadataError(
        f"{where}: codec {shown(codec_id)} is refused: metadata may only name codecs that describe data "
        f"({allowed}); other object codecs are never built from it. "
        f"If you registered this codec yourself and trust it, add it with "
        f"asyncarr.config.set(trusted_codecs=[{shown(codec_id)}])"
    )


def validated_v2_config(codec_config: Any, where: str) -> dict[str, Any]:
    """Return a numcodecs config dict from metadata once it is allowed and every field is valid;
    raise `MetadataError` naming `where` otherwise."""
    if not isinstance(codec_config, Mapping) or not isinstance(codec_config.get("id"), str):
        raise MetadataError(
            f"{where}: invalid codec config {shown(codec_config)}: expected an object with a string 'id'"
        )
    codec_id = codec_config["id"]
    check_codec_allowed(codec_id, where)
    fields = _BYTES_CODEC_FIELDS.get(codec_id)
    if fields is None:
        fields = _OBJECT_CODEC_FIELDS.get(codec_id)
    if fields is None:  # a codec the user registered and trusts: its configuration is theirs to check
        return dict(codec_config)
    validated = {"id": codec_id}
    for name, value in codec_config.items():
        if name == "id":
            continue
        check = fields.get(name) if isinstance(name, str) else None
        if check is None:
            raise MetadataError(f"{where}: codec {codec_id!r} has no configuration field {shown(name)}")
        if not check(value):
            raise MetadataError(f"{where}: codec {codec_id!r}: invalid {name} {shown(value)}")
        validated[name] = value
    missing = [name for name in _REQUIRED_FIELDS.get(codec_id, ()) if name not in validated]
    if missing:
        raise MetadataError(f"{where}: codec {codec_id!r} is missing configuration field(s) {missing}")
    return validated
