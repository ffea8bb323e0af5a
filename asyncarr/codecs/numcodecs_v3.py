"""numcodecs codecs in Zarr v3 arrays, under zarr-python 3's ``numcodecs.<id>`` names.

zarr-python 3 writes numcodecs codecs that have no v3 spec name (Delta, Zlib, LZMA, BZ2...) as
``{"name": "numcodecs.<id>", "configuration": <numcodecs config without "id">}``; these wrappers
read and write them the same way, as array->array, array->bytes or bytes->bytes codecs.

The ``vlen-utf8`` and ``vlen-bytes`` array->bytes codecs (zarr-extensions names, numcodecs'
VLenUTF8/VLenBytes format) serialize the ``string`` and ``bytes`` data types; `codec_class`
imports this module when a chain names them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import numcodecs
import numpy as np
from numcodecs.abc import Codec as NumcodecsAbcCodec
from numcodecs.compat import ensure_contiguous_ndarray

from asyncarr import config
from asyncarr.codecs.allowlist import check_codec_allowed, validated_v2_config
from asyncarr.codecs.bounded import check_vlen_count
from asyncarr.codecs.v3 import (
    ArrayArrayCodec,
    ArrayBytesCodec,
    Buffer,
    BytesBytesCodec,
    ChunkSpec,
    V3Codec,
    _configuration,
    decode_checked,
    register_codec,
    shown,
)
from asyncarr.errors import MetadataError
from asyncarr.metadata.dtypes import object_codec_id

__all__ = [
    "NumcodecsArrayArrayCodec",
    "NumcodecsArrayBytesCodec",
    "NumcodecsBytesBytesCodec",
    "NumcodecsCodec",
    "VLenBytesCodec",
    "VLenUTF8Codec",
    "numcodecs_codec_class",
]


# zarr-python 3.1.6's `zarr.codecs.numcodecs`: which `numcodecs.<id>` codecs map arrays to arrays,
# and which serialize arrays; every other id it registers is bytes->bytes.
_NUMCODECS_ARRAY_ARRAY = frozenset({"delta", "bitround", "fixedscaleoffset", "quantize", "packbits", "astype"})
_NUMCODECS_ARRAY_BYTES = frozenset({"pcodec", "zfpy"})
_NUMCODECS_BYTES_BYTES = frozenset(
    {
        "blosc", "lz4", "zstd", "zlib", "gzip", "bz2", "lzma", "shuffle",
        "crc32", "crc32c", "adler32", "fletcher32", "jenkins_lookup3",
    }
)  # fmt: skip


# numcodecs checksums that add a 4-byte checksum to the bytes they encode.
_CHECKSUM_IDS = frozenset({"crc32", "crc32c", "adler32", "fletcher32", "jenkins_lookup3"})


class NumcodecsCodec(V3Codec):
    """A numcodecs codec under its zarr-python 3 name ``numcodecs.<id>``; see its subclasses."""

    prefix: ClassVar[str] = "numcodecs."

    def __init__(self, codec_id: str, configuration: Mapping[str, Any]) -> None:
        self.codec_id = codec_id
        self.name = self.prefix + codec_id  # type: ignore[misc]
        self.configuration = dict(configuration)
        validated = validated_v2_config({**self.configuration, "id": codec_id}, f"codec {self.name!r}")
        try:
            self.numcodecs_codec = numcodecs.get_codec(validated)
        except Exception as exc:
            raise MetadataError(
                f"codec {self.name!r}: invalid configuration {shown(self.configuration)}: {exc}"
            ) from exc

    @classmethod
    def from_json(cls, json: Mapping[str, Any], spec: ChunkSpec) -> NumcodecsCodec:  # type: ignore[override]
        """Build the array->array, array->bytes or bytes->bytes wrapper the id calls for."""
        name = json.get("name") if isinstance(json, Mapping) else None
        if not isinstance(name, str) or not name.startswith(cls.prefix):
            raise MetadataError(f"invalid codec {shown(json)}: expected an object with a 'numcodecs.<id>' name")
        codec_id = name.removeprefix(cls.prefix)
        config = json.get("configuration", {})
        if not isinstance(config, Mapping):
            raise MetadataError(f"codec {shown(name)}: configuration must be an object, got {shown(config)}")
        wrapper = numcodecs_codec_class(name)
        config = {k: v for k, v in config.items() if k != "id"}
        # zarr-python fills these from the array's data type when they are absent.
        if codec_id == "shuffle":
            config.setdefault("elementsize", spec.dtype.itemsize)
        elif codec_id in ("fixedscaleoffset", "quantize"):
            config.setdefault("dtype", spec.dtype.str)
        elif codec_id == "astype":
            config.setdefault("decode_dtype", spec.dtype.str)
        return wrapper(codec_id, config)

    def to_json(self) -> dict[str, Any]:
        """Return the codec's v3 JSON, as zarr-python writes it."""
        return {"name": self.name, "configuration": dict(self.configuration)}

    def __repr__(self) -> str:
        return repr(self.numcodecs_codec)

    def as_numcodecs(self) -> NumcodecsAbcCodec:
        """Return the wrapped numcodecs codec."""
        return self.numcodecs_codec


class NumcodecsArrayArrayCodec(NumcodecsCodec, ArrayArrayCodec):
    """A numcodecs filter (delta, fixedscaleoffset...) used as a v3 array->array codec."""

    def resolve(self, spec: ChunkSpec) -> ChunkSpec:
        """Account for the data type or shape the filter produces."""
        config = self.configuration
        if self.codec_id in ("delta", "fixedscaleoffset") and config.get("astype"):
            return ChunkSpec(spec.shape, np.dtype(config["astype"]))
        if self.codec_id == "astype":
            return ChunkSpec(spec.shape, np.dtype(config["encode_dtype"]))
        if self.codec_id == "packbits":
            return ChunkSpec((1 + math.ceil(math.prod(spec.shape) / 8),), np.dtype(np.uint8))
        return spec

    def encode(self, array: np.ndarray, spec: ChunkSpec) -> np.ndarray:
        """Apply the filter."""
        encoded_spec = self.resolve(spec)
        encoded = np.asarray(self.numcodecs_codec.encode(np.ascontiguousarray(array)))
        return encoded.reshape(encoded_spec.shape)

    def decode(self, array: np.ndarray, spec: ChunkSpec) -> np.ndarray:
        """Undo the filter."""
        decoded = np.asarray(self.numcodecs_codec.decode(np.ascontiguousarray(array)))
        return decoded.reshape(spec.shape)


class NumcodecsArrayBytesCodec(NumcodecsCodec, ArrayBytesCodec):
    """A numcodecs serializer (pcodec, zfpy) used as the v3 array->bytes codec."""

    def encode(self, array: np.ndarray, spec: ChunkSpec) -> Buffer:
        """Serialize."""
        return self.numcodecs_codec.encode(np.ascontiguousarray(array))

    def decode(self, data: Buffer, spec: ChunkSpec) -> np.ndarray:
        """Deserialize."""
        decoded = ensure_contiguous_ndarray(self.numcodecs_codec.decode(data))
        return decoded.view(spec.dtype).reshape(spec.shape)


class NumcodecsBytesBytesCodec(NumcodecsCodec, BytesBytesCodec):
    """A numcodecs compressor or checksum (zlib, lzma, bz2, lz4...) used as a v3 bytes->bytes codec."""

    def encode(self, data: Buffer) -> Buffer:
        """Encode."""
        return self.numcodecs_codec.encode(data)

    def decode(self, data: Buffer, decoded_size: int | None, out: np.ndarray | None = None) -> Buffer:
        """Decode into at most the bytes the chunk needs (`asyncarr.codecs.bounded`)."""
        return decode_checked(self.numcodecs_codec, data, decoded_size, out)

    def encoded_size(self, decoded_size: int | None) -> int | None:
        """Checksums add four bytes and shuffle none; compressors vary."""
        if decoded_size is None:
            return None
        if self.codec_id in _CHECKSUM_IDS:
            return decoded_size + 4
        if self.codec_id == "shuffle":
            return decoded_size
        return None


def numcodecs_codec_class(name: str) -> type[NumcodecsCodec]:
    """Return the wrapper class for ``numcodecs.<id>``, by the kind zarr-python gives that id;
    ids off the allowlist (`asyncarr.codecs.allowlist`) raise `MetadataError`."""
    codec_id = name.removeprefix(NumcodecsCodec.prefix)
    if codec_id == "pickle":
        raise MetadataError(
            f"codec {shown(name)} is refused: unpickling a chunk runs code chosen by whoever wrote the data, "
            "and Zarr v3 has no pickle codec (asyncarr unpickles only Zarr v2 chunks, and only with "
            "asyncarr.config.set(allow_pickle=True))"
        )
    # Off the allowlist for now: pcodec and zfpy (array->bytes), whose decoded size asyncarr cannot bound.
    check_codec_allowed(codec_id, f"codec {shown(name)}")
    if codec_id in _NUMCODECS_ARRAY_ARRAY:
        return NumcodecsArrayArrayCodec
    if codec_id in _NUMCODECS_ARRAY_BYTES:
        return NumcodecsArrayBytesCodec
    if codec_id in _NUMCODECS_BYTES_BYTES or codec_id in config.get("trusted_codecs"):
        # A codec the user registered and trusts is taken for a compressor, as numcodecs codecs mostly are.
        return NumcodecsBytesBytesCodec
    raise MetadataError(f"unknown codec {shown(name)}: numcodecs id {shown(codec_id)} has no zarr v3 mapping")


class _VLenCodec(ArrayBytesCodec):
    """Serializes variable-length elements as a u32le count, then each element's u32le length and bytes."""

    numcodecs_codec: ClassVar[NumcodecsAbcCodec]

    @classmethod
    def from_json(cls, json: Mapping[str, Any], spec: ChunkSpec) -> _VLenCodec:
        """Build from JSON (no configuration); the data type must be the one this codec serializes."""
        _configuration(json, set())
        if object_codec_id(spec.dtype) != cls.name:
            raise MetadataError(f"codec {cls.name!r} cannot serialize data type {spec.dtype}")
        return cls()

    def to_json(self) -> dict[str, Any]:
        """Return the codec's v3 JSON, as zarr-python writes it."""
        return {"name": self.name, "configuration": {}}

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def as_numcodecs(self) -> NumcodecsAbcCodec:
        """Return the numcodecs codec of the same format."""
        return self.numcodecs_codec

    def encode(self, array: np.ndarray, spec: ChunkSpec) -> Buffer:
        """Serialize the elements in C order (None is written as empty, as numcodecs does)."""
        # numcodecs flattens in the array's own memory order; the v3 format is C order.
        return self.numcodecs_codec.encode(np.ascontiguousarray(array))

    def decode(self, data: Buffer, spec: ChunkSpec) -> np.ndarray:
        """Deserialize into an array of `spec` (str elements in StringDType, bytes in object)."""
        expected = math.prod(spec.shape)
        check_vlen_count(data, expected)
        items = self.numcodecs_codec.decode(data)
        if items.size != expected:
            raise ValueError(f"chunk holds {items.size} variable-length elements, expected {expected}")
        return items.reshape(spec.shape).astype(spec.dtype, copy=False)


@register_codec
class VLenUTF8Codec(_VLenCodec):
    """The ``vlen-utf8`` codec: variable-length UTF-8 strings (the ``string`` data type)."""

    name = "vlen-utf8"
    numcodecs_codec = numcodecs.VLenUTF8()


@register_codec
class VLenBytesCodec(_VLenCodec):
    """The ``vlen-bytes`` codec: variable-length byte strings (the ``bytes`` data type)."""

    name = "vlen-bytes"
    numcodecs_codec = numcodecs.VLenBytes()
