"""Zarr v3 codecs: each turns a chunk into its stored form and back, as the v3 specs define.

A v3 chunk passes through array->array codecs (``transpose``, ``numcodecs.delta``...), one
array->bytes codec (``bytes``; ``sharding_indexed`` registers itself from ``sharding.py``,
``vlen-utf8``/``vlen-bytes`` from ``numcodecs_v3.py``) and
bytes->bytes codecs (``blosc``, ``gzip``, ``zstd``, ``crc32c``, ``numcodecs.zlib``...; the
``numcodecs.<id>`` wrappers live in ``numcodecs_v3.py``). `codec_from_json` builds the right
class from a codec's JSON. Codecs raise ordinary exceptions; the pipeline turns them into
`CodecError` naming the chunk key.
"""

from __future__ import annotations

import abc
import importlib
import math
import reprlib
from collections.abc import Collection, Mapping
from typing import Any, ClassVar, NamedTuple, Self, TypeVar

import google_crc32c
import numcodecs
import numpy as np
from numcodecs.abc import Codec as NumcodecsAbcCodec

from asyncarr.codecs.bounded import check_blosc_frame, decode_checked, zstd_frame_content_size
from asyncarr.errors import MetadataError
from asyncarr.metadata.dtypes import is_variable_length, object_codec_id

__all__ = [
    "ArrayArrayCodec",
    "ArrayBytesCodec",
    "BloscCodec",
    "BytesBytesCodec",
    "BytesCodec",
    "ChunkSpec",
    "Crc32cCodec",
    "GzipCodec",
    "TransposeCodec",
    "V3Codec",
    "ZstdCodec",
    "check_blosc_frame",
    "codec_class",
    "codec_from_json",
    "decode_checked",
    "register_codec",
    "shown",
    "zstd_frame_content_size",
]

Buffer = bytes | bytearray | memoryview | np.ndarray
"""What codecs accept and return as bytes: anything exposing the buffer protocol."""


class ChunkSpec(NamedTuple):
    """Shape, data type and fill value of a chunk as one codec receives it when encoding."""

    shape: tuple[int, ...]
    dtype: np.dtype
    # The array's fill value (None: unknown); `sharding_indexed` fills missing inner chunks with it.
    fill_value: Any = None


class V3Codec(abc.ABC):
    """One codec of a v3 chain, built from its JSON with `from_json`."""

    name: ClassVar[str]

    @classmethod
    @abc.abstractmethod
    def from_json(cls, json: Mapping[str, Any], spec: ChunkSpec) -> Self:
        """Build the codec from ``{"name": ..., "configuration": {...}}``; `spec` is its input."""

    @abc.abstractmethod
    def to_json(self) -> dict[str, Any]:
        """Return the codec's v3 JSON."""

    def __repr__(self) -> str:
        config = self.to_json().get("configuration", {})
        args = ", ".join(f"{k}={v!r}" for k, v in config.items())
        return f"{type(self).__name__}({args})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.to_json() == self.to_json()

    def __hash__(self) -> int:
        return hash(repr(self))


class ArrayArrayCodec(V3Codec):
    """A codec that maps an array to another array (``transpose``, ``numcodecs.delta``)."""

    def resolve(self, spec: ChunkSpec) -> ChunkSpec:
        """Return the spec of the encoded array for an input of `spec`."""
        return spec

    @abc.abstractmethod
    def encode(self, array: np.ndarray, spec: ChunkSpec) -> np.ndarray:
        """Encode `array` (of `spec`) into an array of ``resolve(spec)``."""

    @abc.abstractmethod
    def decode(self, array: np.ndarray, spec: ChunkSpec) -> np.ndarray:
        """Decode `array` back into an array of `spec` (the decoded spec)."""


class ArrayBytesCodec(V3Codec):
    """The codec that serializes an array to bytes (``bytes``; ``sharding_indexed``)."""

    @abc.abstractmethod
    def encode(self, array: np.ndarray, spec: ChunkSpec) -> Buffer:
        """Serialize `array` of `spec`."""

    @abc.abstractmethod
    def decode(self, data: Buffer, spec: ChunkSpec) -> np.ndarray:
        """Deserialize `data` into an array of `spec` (may be a read-only view of `data`)."""

    def encoded_size(self, spec: ChunkSpec) -> int | None:
        """Return the exact serialized size for `spec`, or None if it varies."""
        return None

    def decode_into(self, data: Buffer, spec: ChunkSpec, destination: np.ndarray) -> bool:
        """Deserialize `data` straight into `destination` (an array of `spec`'s shape and dtype, any
        layout) and return True, or return False, untouched, if this codec cannot."""
        return False


class BytesBytesCodec(V3Codec):
    """A codec that maps bytes to bytes (compressors, checksums)."""

    @abc.abstractmethod
    def encode(self, data: Buffer) -> Buffer:
        """Encode `data`."""

    @abc.abstractmethod
    def decode(self, data: Buffer, decoded_size: int | None, out: np.ndarray | None = None) -> Buffer:
        """Decode `data`; `decoded_size` is the expected result size when known. May fill `out`
        (a uint8 buffer of `decoded_size` bytes) and return it, or return a new buffer."""

    def encoded_size(self, decoded_size: int | None) -> int | None:
        """Return the exact encoded size for an input of `decoded_size`, or None if it varies."""
        return None

    def as_numcodecs(self) -> Any:
        """Return an equivalent numcodecs codec for display (`z.compressor`), or self."""
        return self


_CodecClass = TypeVar("_CodecClass", bound=type[V3Codec])
_CODEC_CLASSES: dict[str, type[V3Codec]] = {}
# Codecs whose module registers them on import, loaded only when an array uses them.
_LAZY_CODEC_MODULES = {
    "sharding_indexed": "asyncarr.codecs.sharding",
    "vlen-utf8": "asyncarr.codecs.numcodecs_v3",
    "vlen-bytes": "asyncarr.codecs.numcodecs_v3",
}


def register_codec(cls: _CodecClass) -> _CodecClass:
    """Class decorator: make `cls` the implementation of the v3 codec named ``cls.name``."""
    _CODEC_CLASSES[cls.name] = cls
    return cls


def codec_class(name: str) -> type[V3Codec]:
    """Return the class that implements the v3 codec `name`; unknown names raise `MetadataError`."""
    if name.startswith("numcodecs."):
        # imported here: the wrappers build on the base classes of this module
        from asyncarr.codecs.numcodecs_v3 import numcodecs_codec_class

        return numcodecs_codec_class(name)
    if name not in _CODEC_CLASSES and name in _LAZY_CODEC_MODULES:
        module = _LAZY_CODEC_MODULES[name]
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            raise MetadataError(f"codec {shown(name)} is not supported by this version of asyncarr") from exc
    cls = _CODEC_CLASSES.get(name)
    if cls is None:
        known = ", ".join(sorted([*_CODEC_CLASSES, "numcodecs.<id>"]))
        raise MetadataError(f"unknown codec {shown(name)}; known codecs: {known}")
    return cls


def codec_from_json(json: Mapping[str, Any] | str, spec: ChunkSpec) -> V3Codec:
    """Build the codec described by v3 codec JSON; unknown names raise `MetadataError`."""
    if isinstance(json, str):  # the spec allows a bare name for codecs without configuration
        json = {"name": json}
    if not isinstance(json, Mapping) or not isinstance(json.get("name"), str):
        raise MetadataError(f"invalid codec {shown(json)}: expected an object with a string 'name'")
    return codec_class(json["name"]).from_json(json, spec)


_SHORT_REPR = reprlib.Repr()
_SHORT_REPR.maxstring = 80  # reprlib's 30 cut ordinary codec names in half


def shown(value: Any, limit: int = 160) -> str:
    """A short repr of a value from untrusted metadata, for error messages."""
    try:
        text = _SHORT_REPR.repr(value)
    except ValueError:  # an integer too long to print
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[:limit] + "..."


def _configuration(json: Mapping[str, Any], allowed: Collection[str], required: Collection[str] = ()) -> dict[str, Any]:
    if not isinstance(json, Mapping):
        raise MetadataError(f"invalid codec {shown(json)}: expected an object with a string 'name'")
    name = json.get("name")
    config = json.get("configuration", {})
    if not isinstance(config, Mapping):
        raise MetadataError(f"codec {shown(name)}: configuration must be an object, got {shown(config)}")
    unknown = set(config) - set(allowed)
    if unknown:
        raise MetadataError(f"codec {shown(name)}: unknown configuration field(s) {shown(sorted(unknown))}")
    missing = set(required) - set(config)
    if missing:
        raise MetadataError(f"codec {shown(name)}: missing configuration field(s) {sorted(missing)}")
    return dict(config)


def _int_field(name: str, config: Mapping[str, Any], field: str, low: int, high: int) -> int:
    value = config[field]
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise MetadataError(f"codec {name!r}: {field} must be an integer from {low} to {high}, got {shown(value)}")
    return value


def _has_byte_order(dtype: np.dtype) -> bool:
    return dtype.byteorder != "|"


@register_codec
class BytesCodec(ArrayBytesCodec):
    """The ``bytes`` codec: the array's elements in C order with the given endianness."""

    name = "bytes"

    def __init__(self, endian: str | None = "little") -> None:
        if endian not in ("little", "big", None):
            raise MetadataError(f"codec 'bytes': endian must be 'little' or 'big', got {shown(endian)}")
        self.endian = endian

    @classmethod
    def from_json(cls, json: Mapping[str, Any], spec: ChunkSpec) -> Self:
        """Build from JSON; a multi-byte data type needs ``endian``."""
        config = _configuration(json, {"endian"})
        if is_variable_length(spec.dtype):
            raise MetadataError(
                f"codec 'bytes' cannot serialize the variable-length data type {spec.dtype}; "
                f"use {object_codec_id(spec.dtype)!r}"
            )
        endian = config.get("endian")
        if endian is None and _has_byte_order(spec.dtype) and spec.dtype.itemsize > 1:
            raise MetadataError(f"codec 'bytes': data type {spec.dtype} needs an 'endian' configuration")
        return cls(endian)

    def to_json(self) -> dict[str, Any]:
        """Return the codec's v3 JSON."""
        if self.endian is None:
            return {"name": "bytes"}
        return {"name": "bytes", "configuration": {"endian": self.endian}}

    def stored_dtype(self, dtype: np.dtype) -> np.dtype:
        """Return `dtype` with the byte order of the stored elements."""
        if self.endian is None or not _has_byte_order(dtype):
            return dtype
        return dtype.newbyteorder("<" if self.endian == "little" else ">")

    def encode(self, array: np.ndarray, spec: ChunkSpec) -> Buffer:
        """Serialize `array` in C order."""
        stored = np.ascontiguousarray(array, dtype=self.stored_dtype(spec.dtype))
        return stored.reshape(-1).view(np.uint8)

    def decode(self, data: Buffer, spec: ChunkSpec) -> np.ndarray:
        """View `data` as an array of `spec`, converting byte order only if it differs."""
        array = np.frombuffer(data, dtype=self.stored_dtype(spec.dtype)).reshape(spec.shape)
        if array.dtype != spec.dtype:
            array = array.astype(spec.dtype)
        return array

    def encoded_size(self, spec: ChunkSpec) -> int:
        """Return the element count times the item size."""
        return math.prod(spec.shape) * spec.dtype.itemsize


@register_codec
class TransposeCodec(ArrayArrayCodec):
    """The ``transpose`` codec: encoded axis ``i`` is decoded axis ``order[i]``."""

    name = "transpose"

    def __init__(self, order: tuple[int, ...]) -> None:
        self.order = tuple(order)
        self.inverse_order = tuple(int(i) for i in np.argsort(self.order))

    @classmethod
    def from_json(cls, json: Mapping[str, Any], spec: ChunkSpec) -> Self:
        """Build from JSON; ``order`` must permute the chunk's axes."""
        config = _configuration(json, {"order"}, {"order"})
        ndim = len(spec.shape)
        order = config["order"]
        # Early v3 drafts wrote "C"/"F"; read them as the permutations they meant.
        if order == "C":
            order = list(range(ndim))
        elif order == "F":
            order = list(range(ndim - 1, -1, -1))
        if (
            not isinstance(order, (list, tuple))
            or not all(isinstance(i, int) and not isinstance(i, bool) for i in order)
            or sorted(order) != list(range(ndim))
        ):
            raise MetadataError(f"codec 'transpose': order {shown(order)} is not a permutation of {ndim} axes")
        return cls(tuple(order))

    def to_json(self) -> dict[str, Any]:
        """Return the codec's v3 JSON."""
        return {"name": "transpose", "configuration": {"order": list(self.order)}}

    def resolve(self, spec: ChunkSpec) -> ChunkSpec:
        """Permute the shape."""
        return spec._replace(shape=tuple(spec.shape[i] for i in self.order))

    def encode(self, array: np.ndarray, spec: ChunkSpec) -> np.ndarray:
        """Transpose (a view; the serializer makes it contiguous)."""
        return np.transpose(array, self.order)

    def decode(self, array: np.ndarray, spec: ChunkSpec) -> np.ndarray:
        """Apply the inverse permutation (a view)."""
        return np.transpose(array, self.inverse_order)


_BLOSC_SHUFFLES = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}
_BLOSC_CNAMES = ("lz4", "lz4hc", "blosclz", "zstd", "snappy", "zlib")


def _crc32c(view: memoryview) -> int:
    """CRC-32C of a byte view; google_crc32c takes arrays but not writable memoryviews, so wrap, not copy."""
    return google_crc32c.value(np.frombuffer(view, dtype=np.uint8))


@register_codec
class BloscCodec(BytesBytesCodec):
    """The ``blosc`` codec; the frame header is checked against the chunk before decoding."""

    name = "blosc"

    def __init__(self, cname: str, clevel: int, shuffle: str, typesize: int | None, blocksize: int) -> None:
        self.cname, self.clevel, self.shuffle = cname, clevel, shuffle
        self.typesize, self.blocksize = typesize, blocksize
        self.numcodecs_codec = numcodecs.Blosc(
            cname=cname, clevel=clevel, shuffle=_BLOSC_SHUFFLES[shuffle], blocksize=blocksize, typesize=typesize
        )

    @classmethod
    def from_json(cls, json: Mapping[str, Any], spec: ChunkSpec) -> Self:
        """Build from JSON; ``typesize`` is required unless shuffle is ``noshuffle``."""
        fields = {"cname", "clevel", "shuffle", "typesize", "blocksize"}
        config = _configuration(json, fields, {"cname", "clevel", "shuffle"})
        if not isinstance(config["cname"], str) or config["cname"] not in _BLOSC_CNAMES:
            raise MetadataError(
                f"codec 'blosc': unknown cname {shown(config['cname'])}; expected one of {_BLOSC_CNAMES}"
            )
        if not isinstance(config["shuffle"], str) or config["shuffle"] not in _BLOSC_SHUFFLES:
            raise MetadataError(f"codec 'blosc': unknown shuffle {shown(config['shuffle'])}")
        typesize = None
        if "typesize" in config:
            typesize = _int_field("blosc", config, "typesize", 1, 255)
        elif config["shuffle"] != "noshuffle":
            raise MetadataError("codec 'blosc': typesize is required when shuffle is not 'noshuffle'")
        clevel = _int_field("blosc", config, "clevel", 0, 9)
        blocksize = _int_field("blosc", {"blocksize": config.get("blocksize", 0)}, "blocksize", 0, 2**31 - 1)
        return cls(config["cname"], clevel, config["shuffle"], typesize, blocksize)

    def to_json(self) -> dict[str, Any]:
        """Return the codec's v3 JSON (field order as zarr-python writes it)."""
        config: dict[str, Any] = {}
        if self.typesize is not None:
            config["typesize"] = self.typesize
        config.update(cname=self.cname, clevel=self.clevel, shuffle=self.shuffle, blocksize=self.blocksize)
        return {"name": "blosc", "configuration": config}

    def encode(self, data: Buffer) -> Buffer:
        """Compress."""
        return self.numcodecs_codec.encode(data)

    def decode(self, data: Buffer, decoded_size: int | None, out: np.ndarray | None = None) -> Buffer:
        """Check the frame header, then decompress."""
        return decode_checked(self.numcodecs_codec, data, decoded_size, out)

    def as_numcodecs(self) -> numcodecs.Blosc:
        """Return the numcodecs Blosc codec."""
        return self.numcodecs_codec


@register_codec
class GzipCodec(BytesBytesCodec):
    """The ``gzip`` codec (RFC 1952 gzip format)."""

    name = "gzip"

    def __init__(self, level: int) -> None:
        self.level = level
        self.numcodecs_codec = numcodecs.GZip(level=level)

    @classmethod
    def from_json(cls, json: Mapping[str, Any], spec: ChunkSpec) -> Self:
        """Build from JSON."""
        config = _configuration(json, {"level"}, {"level"})
        return cls(_int_field("gzip", config, "level", 0, 9))

    def to_json(self) -> dict[str, Any]:
        """Return the codec's v3 JSON."""
        return {"name": "gzip", "configuration": {"level": self.level}}

    def encode(self, data: Buffer) -> Buffer:
        """Compress."""
        return self.numcodecs_codec.encode(data)

    def decode(self, data: Buffer, decoded_size: int | None, out: np.ndarray | None = None) -> Buffer:
        """Decompress."""
        return decode_checked(self.numcodecs_codec, data, decoded_size, out)

    def as_numcodecs(self) -> numcodecs.GZip:
        """Return the numcodecs GZip codec."""
        return self.numcodecs_codec


@register_codec
class ZstdCodec(BytesBytesCodec):
    """The ``zstd`` codec; a frame's declared content size is checked before decoding."""

    name = "zstd"

    def __init__(self, level: int, checksum: bool) -> None:
        self.level, self.checksum = level, checksum
        self.numcodecs_codec = numcodecs.Zstd(level=level, checksum=checksum)

    @classmethod
    def from_json(cls, json: Mapping[str, Any], spec: ChunkSpec) -> Self:
        """Build from JSON."""
        config = _configuration(json, {"level", "checksum"}, {"level"})
        level = _int_field("zstd", config, "level", -(2**17), 22)
        checksum = config.get("checksum", False)
        if not isinstance(checksum, bool):
            raise MetadataError(f"codec 'zstd': checksum must be true or false, got {shown(checksum)}")
        return cls(level, checksum)

    def to_json(self) -> dict[str, Any]:
        """Return the codec's v3 JSON."""
        return {"name": "zstd", "configuration": {"level": self.level, "checksum": self.checksum}}

    def encode(self, data: Buffer) -> Buffer:
        """Compress."""
        return self.numcodecs_codec.encode(data)

    def decode(self, data: Buffer, decoded_size: int | None, out: np.ndarray | None = None) -> Buffer:
        """Check the frame's declared size (if any), then decompress."""
        return decode_checked(self.numcodecs_codec, data, decoded_size, out)

    def as_numcodecs(self) -> numcodecs.Zstd:
        """Return the numcodecs Zstd codec."""
        return self.numcodecs_codec


@register_codec
class Crc32cCodec(BytesBytesCodec):
    """The ``crc32c`` codec: a 4-byte little-endian CRC-32C of the data, appended."""

    name = "crc32c"

    @classmethod
    def from_json(cls, json: Mapping[str, Any], spec: ChunkSpec) -> Self:
        """Build from JSON (no configuration)."""
        _configuration(json, set())
        return cls()

    def to_json(self) -> dict[str, Any]:
        """Return the codec's v3 JSON."""
        return {"name": "crc32c"}

    def __repr__(self) -> str:
        return "Crc32cCodec()"

    def as_numcodecs(self) -> NumcodecsAbcCodec:
        """Return numcodecs' CRC32C (the same format: checksum appended)."""
        return numcodecs.CRC32C()

    def encode(self, data: Buffer) -> Buffer:
        """Append the checksum."""
        view = memoryview(data).cast("B")
        return b"".join((view, _crc32c(view).to_bytes(4, "little")))

    def decode(self, data: Buffer, decoded_size: int | None, out: np.ndarray | None = None) -> Buffer:
        """Verify and strip the checksum (a view of `data`)."""
        view = memoryview(data).cast("B")
        if len(view) < 4:
            raise ValueError(f"chunk of {len(view)} bytes is too short to hold a CRC-32C checksum")
        payload = view[:-4]
        stored = int.from_bytes(view[-4:], "little")
        computed = _crc32c(payload)
        if stored != computed:
            raise ValueError(f"CRC-32C checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")
        return payload

    def encoded_size(self, decoded_size: int | None) -> int | None:
        """Four bytes more than the input."""
        return None if decoded_size is None else decoded_size + 4
