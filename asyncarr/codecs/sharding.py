"""The ``sharding_indexed`` codec: one stored object (a shard) holds a grid of inner chunks.

Layout (zarr-specs v3 ``sharding_indexed``): the inner chunks' encoded bytes, in any order,
plus an index of ``(offset, nbytes)`` uint64 pairs, one per inner chunk in C order of the inner
grid, encoded with ``index_codecs`` (normally ``bytes`` little-endian + ``crc32c``) and placed
at the ``end`` (default) or ``start`` of the shard. An entry of two ``2**64 - 1`` marks an inner
chunk that was never written, which reads as the fill value.

`ShardingCodec.decode` / `encode` turn whole shards into arrays and back (the array layer's
read-modify-write of a partial shard goes through them). Encoding writes inner chunks in Morton
order, as zarr-python does, so neighbouring inner chunks sit next to each other in the object,
and omits inner chunks equal to the fill value unless the array's ``write_empty_chunks`` (by default
``config.write_empty_chunks``) is set.
Reads of part of a shard use the helpers here (`index_byte_range`, `parse_index`,
`decode_inner_chunk_into`) from `asyncarr.shards`, which fetches only the byte ranges it needs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Self

import numpy as np

from asyncarr import config
from asyncarr.codecs.blosc_compression import BLOSC_MAX_OVERHEAD, CompressInto
from asyncarr.codecs.pipeline import CodecPipeline, Selection
from asyncarr.codecs.v3 import ArrayBytesCodec, Buffer, ChunkSpec, register_codec, shown
from asyncarr.errors import CodecError, MetadataError
from asyncarr.stores.base import ByteRange

__all__ = ["EMPTY_ENTRY", "MAX_SHARD_INDEX_NBYTES", "ShardingCodec", "morton_order"]

EMPTY_ENTRY = 2**64 - 1
"""Offset and nbytes of an index entry whose inner chunk is absent (reads as the fill value)."""

MAX_SHARD_INDEX_NBYTES = 64 * 2**20
"""Largest shard index read or written (64 MiB: about 4.2 million inner chunks per shard).

Metadata may declare any number of inner chunks at no cost to its author; a larger index is
refused with `CodecError` naming the shard before anything of its size is requested or allocated.
"""

_INDEX_LOCATIONS = ("start", "end")
# The writing array handle's write_empty_chunks, for the shards it encodes in this thread (None: the config's).
_writing = threading.local()


@contextlib.contextmanager
def inner_chunks_written_when_empty(write_empty: bool | None) -> Iterator[None]:
    """Within the block, shards encoded in this thread keep (True) or leave out (False) inner chunks
    equal to the fill value, as the array handle doing the write says."""
    previous = getattr(_writing, "write_empty", None)
    _writing.write_empty = write_empty
    try:
        yield
    finally:
        _writing.write_empty = previous


def _write_empty_inner_chunks() -> bool:
    write_empty = getattr(_writing, "write_empty", None)
    return bool(config.get("write_empty_chunks")) if write_empty is None else write_empty


_CONFIG_FIELDS = {"chunk_shape", "codecs", "index_codecs", "index_location"}
_DEFAULT_INDEX_CODECS = ({"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"})


@dataclasses.dataclass(frozen=True)
class _ChainMetadata:
    """The few metadata attributes `CodecPipeline.from_metadata` reads, for an inner chain."""

    chunks: tuple[int, ...]
    dtype: np.dtype
    fill_value: Any
    codecs: tuple[Any, ...]
    zarr_format: int = 3


def morton_order(grid_shape: Sequence[int]) -> np.ndarray:
    """Coordinates of every cell of `grid_shape`, shape ``(n, ndim)``, in Morton (Z-curve) order.

    Axes interleave their bits from the lowest up, an axis dropping out once its bits are used
    up, which is the order zarr-python writes inner chunks in.
    """
    grid_shape = tuple(int(n) for n in grid_shape)
    order = _morton_flat_order(grid_shape)
    return np.stack(np.unravel_index(order, grid_shape), axis=-1) if grid_shape else np.zeros((1, 0), dtype=np.intp)


def _morton_flat_order(grid_shape: tuple[int, ...]) -> np.ndarray:
    """C-order flat positions of every cell of `grid_shape`, in Morton order (one intp per cell)."""
    ncells = math.prod(grid_shape)
    bits = [(n - 1).bit_length() for n in grid_shape]
    if ncells <= 1 or sum(bits) > 63:  # pragma: no cover - over 2**63 cells cannot be allocated anyway
        return np.arange(ncells, dtype=np.intp)
    codes = np.zeros(grid_shape, dtype=np.uint64)
    code_bit = 0
    for bit in range(max(bits)):
        for axis, axis_bits in enumerate(bits):
            if bit < axis_bits:
                # This axis's bit `bit`, broadcast along the others: no per-cell coordinate arrays.
                axis_bit = (np.arange(grid_shape[axis], dtype=np.uint64) >> np.uint64(bit)) & np.uint64(1)
                shape = [1] * len(grid_shape)
                shape[axis] = grid_shape[axis]
                codes |= axis_bit.reshape(shape) << np.uint64(code_bit)
                code_bit += 1
    return np.argsort(codes.ravel(), kind="stable")


def _fill_scalar(dtype: np.dtype, fill_value: Any) -> Any:
    if fill_value is None:
        return np.zeros((), dtype=dtype)[()]
    return np.asarray(fill_value).astype(dtype)[()]


def _fill_mask(array: np.ndarray, fill: Any, inner_shape: tuple[int, ...]) -> np.ndarray:
    """For each inner chunk of `array` (a whole shard), whether all its elements equal `fill`.

    Only inner chunks whose first element is the fill value are compared whole: for most data
    that is none of them, and the check costs one element per inner chunk instead of a boolean
    copy of the whole shard (76 ms for four 64 MiB shards).
    """
    blocked_shape = [n for cells, inner in zip(array.shape, inner_shape, strict=True) for n in (cells // inner, inner)]
    blocks = array.reshape(blocked_shape)
    firsts = blocks[tuple(slice(None) if axis % 2 == 0 else 0 for axis in range(2 * array.ndim))]
    mask = _equals_fill(firsts, fill)
    for coords in np.argwhere(mask):
        region = tuple(slice(c * inner, (c + 1) * inner) for c, inner in zip(coords.tolist(), inner_shape, strict=True))
        mask[tuple(coords)] = _equals_fill(array[region], fill).all()
    return mask


def _equals_fill(values: np.ndarray, fill: Any) -> np.ndarray:
    """Element-wise: equal to `fill`, NaN matching a NaN fill and NaT a NaT fill."""
    equal = np.asarray(values == fill)
    if values.dtype.kind in "fc" and np.isnan(fill):
        equal |= np.isnan(values)
    elif values.dtype.kind in "mM" and np.isnat(fill):
        equal |= np.isnat(values)
    return equal


@register_codec
class ShardingCodec(ArrayBytesCodec):
    """The ``sharding_indexed`` array->bytes codec for shards of one shape (its input spec)."""

    name = "sharding_indexed"

    def __init__(
        self,
        *,
        chunk_shape: Sequence[int],
        codecs: Sequence[Any],
        index_codecs: Sequence[Any] = _DEFAULT_INDEX_CODECS,
        index_location: str = "end",
        shard_spec: ChunkSpec,
    ) -> None:
        shard_shape = tuple(shard_spec.shape)
        inner_shape = tuple(chunk_shape)
        if len(inner_shape) != len(shard_shape):
            raise MetadataError(
                f"codec 'sharding_indexed': chunk_shape {list(inner_shape)} has {len(inner_shape)} dimensions, "
                f"the shard {list(shard_shape)} has {len(shard_shape)}"
            )
        if any(shard % inner for shard, inner in zip(shard_shape, inner_shape, strict=True)):
            raise MetadataError(
                f"codec 'sharding_indexed': the shard shape {list(shard_shape)} is not a multiple of "
                f"the inner chunk_shape {list(inner_shape)}"
            )
        if index_location not in _INDEX_LOCATIONS:
            raise MetadataError(
                f"codec 'sharding_indexed': index_location must be 'start' or 'end', got {index_location!r}"
            )
        self.shard_shape: tuple[int, ...] = shard_shape
        self.inner_chunk_shape: tuple[int, ...] = inner_shape
        self.chunks_per_shard: tuple[int, ...] = tuple(s // c for s, c in zip(shard_shape, inner_shape, strict=True))
        self.index_location: str = index_location
        self.dtype: np.dtype = np.dtype(shard_spec.dtype)
        self.fill_value: Any = _fill_scalar(self.dtype, shard_spec.fill_value)
        self.inner_pipeline: Any = CodecPipeline.from_metadata(
            _ChainMetadata(inner_shape, self.dtype, self.fill_value, tuple(codecs))
        )
        self.index_pipeline: Any = CodecPipeline.from_metadata(
            _ChainMetadata((*self.chunks_per_shard, 2), np.dtype(np.uint64), EMPTY_ENTRY, tuple(index_codecs))
        )
        # Everything sized by the number of inner chunks (the write order, the index itself) is
        # built only when a shard is read or written: opening costs the same for any count.
        self.index_nbytes: int = self._fixed_index_size()

    @classmethod
    def from_json(cls, json: Mapping[str, Any], spec: ChunkSpec) -> Self:
        """Build from JSON for shards of `spec`; an invalid configuration raises `MetadataError`."""
        configuration = json.get("configuration") if isinstance(json, Mapping) else None
        if not isinstance(configuration, Mapping):
            raise MetadataError(
                f"codec 'sharding_indexed': configuration must be an object, got {shown(configuration)}"
            )
        unknown = set(configuration) - _CONFIG_FIELDS
        missing = {"chunk_shape", "codecs"} - set(configuration)
        if unknown or missing:
            problem = f"unknown field(s) {sorted(unknown)}" if unknown else f"missing field(s) {sorted(missing)}"
            raise MetadataError(f"codec 'sharding_indexed': configuration has {problem}")
        chunk_shape = configuration["chunk_shape"]
        if (
            not isinstance(chunk_shape, Sequence)
            or isinstance(chunk_shape, str)
            or not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in chunk_shape)
        ):
            raise MetadataError(
                f"codec 'sharding_indexed': chunk_shape must be a list of positive integers, got {chunk_shape!r}"
            )
        for field in ("codecs", "index_codecs"):
            value = configuration.get(field, ())
            if not isinstance(value, Sequence) or isinstance(value, str):
                raise MetadataError(f"codec 'sharding_indexed': {field} must be a list of codecs, got {value!r}")
        return cls(
            chunk_shape=chunk_shape,
            codecs=configuration["codecs"],
            index_codecs=configuration.get("index_codecs", _DEFAULT_INDEX_CODECS),
            index_location=configuration.get("index_location", "end"),
            shard_spec=spec,
        )

    def to_json(self) -> dict[str, Any]:
        """Return the codec's v3 JSON (field order as zarr-python writes it)."""
        configuration = {
            "chunk_shape": list(self.inner_chunk_shape),
            "codecs": [codec.to_json() for codec in self.inner_pipeline.codecs],
            "index_codecs": [codec.to_json() for codec in self.index_pipeline.codecs],
            "index_location": self.index_location,
        }
        return {"name": self.name, "configuration": configuration}

    def _fixed_index_size(self) -> int:
        index = self.index_pipeline
        spec = ChunkSpec((*self.chunks_per_shard, 2), np.dtype(np.uint64))
        for codec in index.array_array:
            spec = codec.resolve(spec)
        size = index.array_bytes.encoded_size(spec)
        for codec in index.bytes_bytes:
            size = None if size is None else codec.encoded_size(size)
        if size is None:
            names = [codec.name for codec in index.codecs]
            raise MetadataError(
                f"codec 'sharding_indexed': index_codecs {names} do not have a fixed encoded size; "
                "use 'bytes' optionally followed by 'crc32c'"
            )
        return size

    # -- helpers for partial reads ---------------------------------------------------------

    @property
    def nchunks_per_shard(self) -> int:
        """Number of inner chunks in one shard."""
        return math.prod(self.chunks_per_shard)

    def index_byte_range(self) -> ByteRange:
        """Where the index lies in a stored shard: its last (``end``) or first (``start``) bytes."""
        if self.index_location == "end":
            return ByteRange.last(self.index_nbytes)
        return ByteRange(0, self.index_nbytes)

    @property
    def index_within_cap(self) -> bool:
        """Whether the declared index is at most `MAX_SHARD_INDEX_NBYTES`, so shards can be read and written."""
        return self.index_nbytes <= MAX_SHARD_INDEX_NBYTES

    def _index_too_large(self) -> str:
        return (
            f"the metadata declares {self.nchunks_per_shard} inner chunks per shard, a "
            f"{self.index_nbytes}-byte shard index, above the cap of {MAX_SHARD_INDEX_NBYTES} bytes "
            "(asyncarr.codecs.sharding.MAX_SHARD_INDEX_NBYTES)"
        )

    def index_too_large_error(self, key: str) -> CodecError:
        """The `CodecError` refusing the shard at `key` because its declared index is over the cap."""
        return CodecError(f"chunk {key}: {self._index_too_large()}")

    def parse_index(self, data: Buffer, key: str) -> np.ndarray:
        """Decode the index bytes of the shard at `key` into uint64 ``(*chunks_per_shard, 2)``
        (offset, nbytes) pairs; a wrong length, checksum or malformed entry raises `CodecError`."""
        try:
            return self._parse_index(data)
        except ValueError as exc:
            raise CodecError(f"chunk {key}: {exc}") from exc

    def _parse_index(self, data: Buffer) -> np.ndarray:
        if not self.index_within_cap:
            raise ValueError(self._index_too_large())
        nbytes = memoryview(data).nbytes
        if nbytes != self.index_nbytes:
            raise ValueError(f"the shard index has {nbytes} bytes, expected {self.index_nbytes} (truncated shard?)")
        try:
            index = self.index_pipeline.decode(data, (*self.chunks_per_shard, 2), "index")
        except CodecError as exc:
            raise ValueError(f"cannot decode the shard index: {exc.__cause__}") from exc.__cause__
        offsets, lengths = index[..., 0], index[..., 1]
        half_empty = (offsets == EMPTY_ENTRY) != (lengths == EMPTY_ENTRY)
        if half_empty.any():
            coords = tuple(int(i) for i in np.argwhere(half_empty)[0])
            raise ValueError(f"the shard index entry of inner chunk {coords} is half empty")
        present = offsets != EMPTY_ENTRY
        if (offsets[present] > EMPTY_ENTRY - lengths[present]).any():
            raise ValueError("a shard index entry overflows 64 bits")
        return index

    def decode_inner_chunk_into(
        self,
        data: Buffer,
        key: str,
        inner_coords: tuple[int, ...],
        out: np.ndarray,
        out_selection: Selection,
        chunk_selection: Selection,
    ) -> None:
        """Decode one inner chunk of the shard at `key` and copy ``chunk[chunk_selection]`` into
        ``out[out_selection]``; failures raise `CodecError` naming the key and inner chunk."""
        label = f"{key} (inner chunk {tuple(inner_coords)})"
        self.inner_pipeline.decode_into(data, self.inner_chunk_shape, label, out, out_selection, chunk_selection)

    def decode_inner_chunk(self, data: Buffer, key: str, inner_coords: tuple[int, ...]) -> np.ndarray:
        """Decode one inner chunk of the shard at `key` into a new array of `inner_chunk_shape`."""
        return self.inner_pipeline.decode(data, self.inner_chunk_shape, f"{key} (inner chunk {tuple(inner_coords)})")

    def inner_region(self, inner_coords: Sequence[int]) -> tuple[slice, ...]:
        """The part of the shard array that inner chunk `inner_coords` covers."""
        return tuple(slice(c * n, (c + 1) * n) for c, n in zip(inner_coords, self.inner_chunk_shape, strict=True))

    # -- whole shards -------------------------------------------------------------------------

    @functools.cached_property
    def _write_order(self) -> np.ndarray:
        """Flat C-order positions of the inner chunks in the order they are written (Morton)."""
        return _morton_flat_order(self.chunks_per_shard)

    def _check_spec(self, spec: ChunkSpec) -> None:
        if tuple(spec.shape) != self.shard_shape:
            raise ValueError(f"shard has shape {tuple(spec.shape)}, the codec was built for {self.shard_shape}")

    def decode(self, data: Buffer, spec: ChunkSpec) -> np.ndarray:
        """Decode a whole shard; absent inner chunks read as the fill value."""
        shard = np.empty(self.shard_shape, dtype=spec.dtype)
        self.decode_into(data, spec, shard)
        return shard

    def decode_into(self, data: Buffer, spec: ChunkSpec, destination: np.ndarray) -> bool:
        """Decode a whole shard into `destination` (the caller's output: no shard-sized copy)."""
        self._check_spec(spec)
        if not self.index_within_cap:
            raise ValueError(self._index_too_large())
        view = memoryview(data).cast("B")
        if len(view) < self.index_nbytes:
            raise ValueError(f"shard of {len(view)} bytes is shorter than its {self.index_nbytes}-byte index")
        if self.index_location == "end":
            index = self._parse_index(view[len(view) - self.index_nbytes :])
        else:
            index = self._parse_index(view[: self.index_nbytes])
        present = index[..., 0] != EMPTY_ENTRY
        ends = index[..., 0][present] + index[..., 1][present]
        if ends.size and int(ends.max()) > len(view):
            raise ValueError(f"the shard index points past the end of the shard ({len(view)} bytes)")
        if not present.all():
            destination[...] = self.fill_value
        for coords in (tuple(int(i) for i in row) for row in np.argwhere(present)):
            offset, nbytes = (int(n) for n in index[coords])
            try:
                self.inner_pipeline.decode_into(
                    view[offset : offset + nbytes],
                    self.inner_chunk_shape,
                    "",
                    destination,
                    self.inner_region(coords),
                    (),
                )
            except CodecError as exc:
                raise ValueError(f"inner chunk {coords}: {exc.__cause__}") from exc.__cause__
        return True

    def encode(self, array: np.ndarray, spec: ChunkSpec) -> Buffer:
        """Encode a whole shard; inner chunks equal to the fill value are left out (as absent)
        unless the writing array's ``write_empty_chunks`` (by default ``config.write_empty_chunks``) is set.
        A shard of nothing but fill is just an index."""
        return bytes(self.encode_buffer(array, spec))

    def encode_buffer(self, array: np.ndarray, spec: ChunkSpec) -> memoryview:
        """`encode`, as a view of the one buffer the shard was laid out in (no copy into `bytes`).

        For a caller that can write any buffer (a local file): the copy into `bytes` faults in a
        shard's worth of new pages, about a third of the CPU of encoding one of W6's shards.
        """
        self._check_spec(spec)
        if not self.index_within_cap:
            raise ValueError(self._index_too_large())
        index = np.full((*self.chunks_per_shard, 2), EMPTY_ENTRY, dtype=np.uint64)
        entries = index.reshape(-1, 2)
        order = self._write_order
        if not _write_empty_inner_chunks():
            kept = ~_fill_mask(array, self.fill_value, self.inner_chunk_shape).ravel()
            order = order[kept[order]]
        stored_coords = np.stack(np.unravel_index(order, self.chunks_per_shard), axis=-1).tolist()
        at_start = self.index_location == "start"
        body = _Body(array.nbytes + 16 * len(order) + self.index_nbytes)
        if at_start:
            body.reserve(self.index_nbytes)  # the index goes here once the offsets are known
        offset = body.size
        # Inner chunks not laid out contiguously in the shard go through one reused buffer: a new
        # array per inner chunk costs the page faults of fresh memory, more than the copy itself.
        scratch: np.ndarray | None = None
        # Blosc over raw bytes compresses each inner chunk straight into the body, which holds
        # every inner chunk's worst case (its size plus Blosc's overhead) from the start.
        compress_into = self.inner_pipeline.plain_encoder_into if array.dtype == self.inner_pipeline.dtype else None
        for position, coords in zip(order.tolist(), stored_coords, strict=True):
            inner = array[self.inner_region(coords)]
            if not inner.flags.c_contiguous:
                if scratch is None:
                    scratch = np.empty(self.inner_chunk_shape, dtype=array.dtype)
                np.copyto(scratch, inner)
                inner = scratch
            if compress_into is not None:
                try:
                    length = body.append_written(inner.nbytes + BLOSC_MAX_OVERHEAD, compress_into, inner)
                except Exception as exc:
                    raise ValueError(f"inner chunk {tuple(coords)}: {exc}") from exc
                entries[position] = (offset, length)
                offset += length
                continue
            try:
                encoded = self.inner_pipeline.encode(inner, "")
            except CodecError as exc:
                raise ValueError(f"inner chunk {tuple(coords)}: {exc.__cause__}") from exc.__cause__
            entries[position] = (offset, len(encoded))
            offset += len(encoded)
            body.append(encoded)
            del encoded  # freed now, so the next inner chunk's encoding reuses its memory
        index_bytes = self.index_pipeline.encode(index, "index")
        if at_start:
            body.write_at(0, index_bytes)
        else:
            body.append(index_bytes)
        return body.view()


class _Body:
    """The encoded inner chunks of a shard laid end to end in one buffer, which grows when it must.

    Each encoded inner chunk is copied in and can be released at once, so the allocator hands its
    memory to the next one: keeping every piece until a final join faulted in a shard's worth of
    new pages on top of the join's own (about a quarter of W6's encoding time, issue 15).
    """

    def __init__(self, capacity: int) -> None:
        # Pages of an np.empty are only faulted in where written; NumPy asks for huge pages.
        self._buffer = np.empty(max(capacity, 1), dtype=np.uint8)
        self._bytes = memoryview(self._buffer)  # slice assignment through it: ~0.1 us a piece
        self._used = 0

    @property
    def size(self) -> int:
        """Bytes laid out so far."""
        return self._used

    def reserve(self, nbytes: int) -> None:
        """Leave `nbytes` bytes to be written later with `write_at`."""
        self._grow_to(self._used + nbytes)
        self._used += nbytes

    def append(self, data: Buffer) -> None:
        """Copy `data` after what is there."""
        source = data if type(data) is bytes else memoryview(data).cast("B")
        end = self._used + len(source)
        self._grow_to(end)
        self._bytes[self._used : end] = source
        self._used = end

    def append_written(self, capacity: int, write: CompressInto, chunk: np.ndarray) -> int:
        """Have ``write(chunk, address, capacity)`` write at most ``capacity`` bytes after what is
        there, and keep the length it returns."""
        self._grow_to(self._used + capacity)
        length = write(chunk, self._buffer.ctypes.data + self._used, capacity)
        if not 0 < length <= capacity:  # never trusted blindly: the body's size depends on it
            raise ValueError(f"an encoder wrote {length} bytes into room for {capacity}")
        self._used += length
        return length

    def write_at(self, offset: int, data: Buffer) -> None:
        """Copy `data` over reserved bytes from `offset`."""
        source = data if type(data) is bytes else memoryview(data).cast("B")
        self._bytes[offset : offset + len(source)] = source

    def view(self) -> memoryview:
        """The bytes laid out so far, as a view of the buffer (no copy)."""
        return self._bytes[: self._used]

    def _grow_to(self, nbytes: int) -> None:
        if nbytes > len(self._buffer):
            grown = np.empty(max(2 * len(self._buffer), nbytes), dtype=np.uint8)
            grown[: self._used] = self._buffer[: self._used]
            self._buffer = grown
            self._bytes = memoryview(grown)
