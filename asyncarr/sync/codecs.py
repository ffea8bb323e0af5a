"""zarr-python 3's codec classes, with its constructors and defaults: ``from asyncarr.sync.codecs import BloscCodec``.

Every asyncarr creation argument that takes codecs (``codecs=``, ``compressor=``, ``filters=``)
takes these, and the metadata written is zarr-python 3's for the same script.

- The bytes->bytes codecs (`BloscCodec`, `ZstdCodec`, `GzipCodec`, `Crc32cCodec`) are numcodecs
  codecs underneath, so the array's data type completes them when an array is created, as in
  zarr-python 3: Blosc's ``typesize`` is the item size and ``shuffle=None`` becomes
  ``"bitshuffle"`` for 1-byte types, ``"shuffle"`` otherwise.
- `BytesCodec` and `TransposeCodec` are asyncarr's own v3 codecs with keyword constructors.
- `ShardingCodec(chunk_shape=..., codecs=..., index_codecs=..., index_location="end")` describes a
  ``sharding_indexed`` codec; its inner chains are written out when the array is created.

Each class also has zarr's ``to_dict()`` (the v3 JSON) and ``v3_json_for_dtype(dtype)`` (the v3
JSON completed for an array's data type).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from typing import Any

import numcodecs
import numpy as np

from ..codecs import numcodecs_v3 as _numcodecs_v3
from ..codecs import v3 as _v3
from ..codecs.registry import to_v3_json

__all__ = [
    "BloscCname",
    "BloscCodec",
    "BloscShuffle",
    "BytesCodec",
    "Crc32cCodec",
    "Endian",
    "GzipCodec",
    "ShardingCodec",
    "ShardingCodecIndexLocation",
    "TransposeCodec",
    "VLenBytesCodec",
    "VLenUTF8Codec",
    "ZstdCodec",
]


class BloscShuffle(enum.StrEnum):
    """zarr's names for Blosc's shuffle modes."""

    noshuffle = "noshuffle"
    shuffle = "shuffle"
    bitshuffle = "bitshuffle"


class BloscCname(enum.StrEnum):
    """zarr's names for Blosc's compressors."""

    lz4 = "lz4"
    lz4hc = "lz4hc"
    blosclz = "blosclz"
    zstd = "zstd"
    snappy = "snappy"
    zlib = "zlib"


class Endian(enum.StrEnum):
    """zarr's byte orders for `BytesCodec`."""

    big = "big"
    little = "little"


class ShardingCodecIndexLocation(enum.StrEnum):
    """Where a shard keeps its index."""

    start = "start"
    end = "end"


_SHUFFLE_NUMBERS = {
    "noshuffle": numcodecs.Blosc.NOSHUFFLE,
    "shuffle": numcodecs.Blosc.SHUFFLE,
    "bitshuffle": numcodecs.Blosc.BITSHUFFLE,
}
_SHUFFLE_NAMES = {number: name for name, number in _SHUFFLE_NUMBERS.items()}


def _plain(value: Any) -> Any:
    """An enum member as its value (zarr takes ``BloscShuffle.shuffle`` or ``"shuffle"`` alike)."""
    return value.value if isinstance(value, enum.Enum) else value


class BloscCodec(numcodecs.Blosc):
    """zarr 3's ``BloscCodec(*, typesize=None, cname="zstd", clevel=5, shuffle=None, blocksize=0)``."""

    def __init__(
        self,
        *,
        typesize: int | None = None,
        cname: BloscCname | str = "zstd",
        clevel: int = 5,
        shuffle: BloscShuffle | str | None = None,
        blocksize: int = 0,
    ) -> None:
        shuffle = _plain(shuffle)
        if shuffle is not None and shuffle not in _SHUFFLE_NUMBERS:
            raise ValueError(f"shuffle must be one of {sorted(_SHUFFLE_NUMBERS)} or None, got {shuffle!r}")
        number = numcodecs.Blosc.AUTOSHUFFLE if shuffle is None else _SHUFFLE_NUMBERS[shuffle]
        super().__init__(cname=_plain(cname), clevel=clevel, shuffle=number, blocksize=blocksize, typesize=typesize)
        self.typesize = typesize

    def v3_json_for_dtype(self, dtype: Any) -> dict[str, Any]:
        """The v3 JSON for arrays of ``dtype`` (typesize its item size, shuffle resolved), as zarr writes it."""
        json = to_v3_json(self, np.dtype(dtype))
        if self.typesize is not None:
            json["configuration"]["typesize"] = self.typesize
        return json

    def to_dict(self) -> dict[str, Any]:
        """The v3 JSON with no data type known (typesize 1), as zarr's ``to_dict()`` gives it."""
        return self.v3_json_for_dtype(np.uint8)


class ZstdCodec(numcodecs.Zstd):
    """zarr 3's ``ZstdCodec(*, level=0, checksum=False)``."""

    def __init__(self, *, level: int = 0, checksum: bool = False) -> None:
        super().__init__(level=level, checksum=checksum)

    def v3_json_for_dtype(self, dtype: Any) -> dict[str, Any]:
        """The v3 JSON (the same for every data type)."""
        return {"name": "zstd", "configuration": {"level": self.level, "checksum": self.checksum}}

    def to_dict(self) -> dict[str, Any]:
        """The v3 JSON."""
        return self.v3_json_for_dtype(np.uint8)


class GzipCodec(numcodecs.GZip):
    """zarr 3's ``GzipCodec(*, level=5)``."""

    def __init__(self, *, level: int = 5) -> None:
        super().__init__(level=level)

    def v3_json_for_dtype(self, dtype: Any) -> dict[str, Any]:
        """The v3 JSON (the same for every data type)."""
        return {"name": "gzip", "configuration": {"level": self.level}}

    def to_dict(self) -> dict[str, Any]:
        """The v3 JSON."""
        return self.v3_json_for_dtype(np.uint8)


class Crc32cCodec(numcodecs.CRC32C):
    """zarr 3's ``Crc32cCodec()``: a CRC-32C checksum appended to each chunk."""

    def __init__(self) -> None:
        super().__init__(location="end")

    def v3_json_for_dtype(self, dtype: Any) -> dict[str, Any]:
        """The v3 JSON."""
        return {"name": "crc32c"}

    def to_dict(self) -> dict[str, Any]:
        """The v3 JSON."""
        return {"name": "crc32c"}


class BytesCodec(_v3.BytesCodec):
    """zarr 3's ``BytesCodec(*, endian="little")``: the array->bytes serializer."""

    def __init__(self, *, endian: Endian | str | None = "little") -> None:
        super().__init__(_plain(endian))

    def v3_json_for_dtype(self, dtype: Any) -> dict[str, Any]:
        """The v3 JSON for ``dtype``: no ``endian`` for 1-byte types, as zarr writes it."""
        dtype = np.dtype(dtype)
        if self.endian is None or dtype.itemsize == 1 or dtype.byteorder == "|":
            return {"name": "bytes"}
        return {"name": "bytes", "configuration": {"endian": self.endian}}

    def to_dict(self) -> dict[str, Any]:
        """The v3 JSON."""
        return self.to_json()


class TransposeCodec(_v3.TransposeCodec):
    """zarr 3's ``TransposeCodec(*, order)``: encoded axis ``i`` is the array's axis ``order[i]``."""

    def __init__(self, *, order: Iterable[int]) -> None:
        super().__init__(tuple(int(axis) for axis in order))

    def v3_json_for_dtype(self, dtype: Any) -> dict[str, Any]:
        """The v3 JSON."""
        return self.to_json()

    def to_dict(self) -> dict[str, Any]:
        """The v3 JSON."""
        return self.to_json()


class VLenUTF8Codec(_numcodecs_v3.VLenUTF8Codec):
    """zarr 3's ``VLenUTF8Codec()``: the serializer of variable-length strings (``dtype=str``)."""

    def v3_json_for_dtype(self, dtype: Any) -> dict[str, Any]:
        """The v3 JSON, as zarr writes it (an empty configuration)."""
        return {"name": self.name, "configuration": {}}

    def to_dict(self) -> dict[str, Any]:
        """The v3 JSON, as zarr writes it (an empty configuration)."""
        return {"name": self.name, "configuration": {}}


class VLenBytesCodec(_numcodecs_v3.VLenBytesCodec):
    """zarr 3's ``VLenBytesCodec()``: the serializer of variable-length byte strings (``dtype=bytes``)."""

    v3_json_for_dtype = VLenUTF8Codec.v3_json_for_dtype
    to_dict = VLenUTF8Codec.to_dict


def _codec_json(codec: Any, dtype: Any) -> dict[str, Any]:
    """One inner codec of a `ShardingCodec` as v3 JSON (``dtype`` None: not known yet)."""
    json_for_dtype = getattr(codec, "v3_json_for_dtype", None)
    if callable(json_for_dtype) and dtype is not None:
        return json_for_dtype(dtype)
    if isinstance(codec, BloscCodec) and (codec.typesize is None or codec.shuffle == numcodecs.Blosc.AUTOSHUFFLE):
        raise ValueError(
            "BloscCodec inside ShardingCodec needs typesize= and shuffle= here: asyncarr cannot see the "
            "array's data type at this point (or use shards= with compressors=BloscCodec())"
        )
    if callable(getattr(codec, "to_dict", None)) and not isinstance(codec, dict):
        return codec.to_dict()
    if isinstance(codec, _v3.V3Codec):
        return codec.to_json()
    if isinstance(codec, dict) and isinstance(codec.get("name"), str):
        return dict(codec)
    if dtype is not None and isinstance(codec, numcodecs.abc.Codec):
        return to_v3_json(codec, np.dtype(dtype))
    raise TypeError(f"ShardingCodec takes v3 codecs (asyncarr.sync.codecs classes or v3 JSON dicts), got {codec!r}")


class ShardingCodec:
    """zarr 3's ``ShardingCodec(*, chunk_shape, codecs=..., index_codecs=..., index_location="end")``."""

    def __init__(
        self,
        *,
        chunk_shape: Sequence[int] | int,
        codecs: Iterable[Any] = (BytesCodec(),),
        index_codecs: Iterable[Any] = (BytesCodec(), Crc32cCodec()),
        index_location: ShardingCodecIndexLocation | str = "end",
    ) -> None:
        self.chunk_shape = (int(chunk_shape),) if isinstance(chunk_shape, int) else tuple(int(n) for n in chunk_shape)
        self.codecs = tuple(codecs)
        self.index_codecs = tuple(index_codecs)
        self.index_location = _plain(index_location)
        if self.index_location not in ("start", "end"):
            raise ValueError(f"index_location must be 'start' or 'end', got {index_location!r}")

    def __repr__(self) -> str:
        return (
            f"ShardingCodec(chunk_shape={self.chunk_shape}, codecs={self.codecs}, "
            f"index_codecs={self.index_codecs}, index_location={self.index_location!r})"
        )

    def v3_json_for_dtype(self, dtype: Any) -> dict[str, Any]:
        """The v3 JSON for arrays of ``dtype`` (inner codecs completed for it; the index is uint64)."""
        return self._json(dtype)

    def to_dict(self) -> dict[str, Any]:
        """The v3 JSON (an inner `BloscCodec` must then give typesize= and shuffle= itself)."""
        return self._json(None)

    def _json(self, dtype: Any) -> dict[str, Any]:
        configuration = {
            "chunk_shape": list(self.chunk_shape),
            "codecs": [_codec_json(codec, dtype) for codec in self.codecs],
            "index_codecs": [_codec_json(codec, np.uint64) for codec in self.index_codecs],
            "index_location": self.index_location,
        }
        return {"name": "sharding_indexed", "configuration": configuration}
