"""The codec pipeline: turns a chunk's stored bytes into an array and back, for v2 and v3.

`CodecPipeline.from_metadata` reads only these attributes of the metadata it is given:
``zarr_format``, ``dtype``, ``chunks``, ``fill_value``; for v2 ``order``, ``compressor`` and
``filters`` (numcodecs config dicts); for v3 ``codecs`` (codec JSON). Every failure while
encoding or decoding raises `CodecError` naming the chunk key, with the cause chained; that
includes a chunk whose length disagrees with its codec's header and a chunk that decodes to
the wrong number of bytes. The methods are synchronous: run them on the codec thread pool
(`asyncarr.codecs.executor`).

Metadata is untrusted: only codecs on the allowlist are built from it
(`asyncarr.codecs.allowlist`), and every compressor decodes into at most the bytes the chunk
needs (`asyncarr.codecs.bounded`). Callers that know the chunk's URL put it into messages
with `naming_url`.
"""

from __future__ import annotations

import abc
import functools
import math
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numcodecs import blosc
from numcodecs.abc import Codec
from numcodecs.compat import ensure_bytes, ensure_contiguous_ndarray

from asyncarr.codecs.allowlist import DATA_OBJECT_CODEC_IDS, OBJECT_LIST_CODEC_IDS, VARIABLE_LENGTH_CODEC_IDS
from asyncarr.codecs.blosc_blocks import BlockReader, FramePart, selection_byte_span
from asyncarr.codecs.blosc_compression import CompressInto, blosc_compressor, blosc_compressor_into
from asyncarr.codecs.blosc_frames import decompress_into_address, fast_decoder_available
from asyncarr.codecs.bounded import check_vlen_count
from asyncarr.codecs.objects import decode_categories, decode_object_list
from asyncarr.codecs.registry import codec_from_v2_config
from asyncarr.codecs.v3 import (
    ArrayArrayCodec,
    ArrayBytesCodec,
    BloscCodec,
    Buffer,
    BytesBytesCodec,
    BytesCodec,
    ChunkSpec,
    V3Codec,
    check_blosc_frame,
    codec_from_json,
    decode_checked,
    shown,
)
from asyncarr.errors import CodecError, MetadataError
from asyncarr.metadata.dtypes import (
    OBJECT_CODEC_IDS,
    PYTHON_OBJECT_CODEC_IDS,
    find_object_codec_id,
    is_variable_length,
    object_codec_id,
)

__all__ = ["CodecPipeline", "PlainChainDecoder", "naming_url"]

Selection = tuple[Any, ...] | Any
"""A NumPy basic selection (tuple of slices and ints) into a chunk or an output array."""


class CodecPipeline(abc.ABC):
    """Encodes and decodes the chunks of one array, as its metadata describes."""

    def __init__(self, metadata: Any) -> None:
        self.zarr_format: int = metadata.zarr_format
        self.dtype: np.dtype = np.dtype(metadata.dtype)
        self.chunk_shape: tuple[int, ...] = tuple(metadata.chunks)
        self.fill_value = metadata.fill_value
        # Variable-length strings (StringDType) and bytes (object): chunks hold Python objects,
        # so they are never decoded straight into the output's memory.
        self.variable_length = is_variable_length(self.dtype)
        # Object arrays of arbitrary Python objects (v2 json2, msgpack2, vlen-array, pickle), not bytes.
        self.python_objects = False
        self._whole_chunk_decoders: dict[tuple[int, ...], PlainChainDecoder | None] = {}

    @staticmethod
    def from_metadata(metadata: Any) -> CodecPipeline:
        """Build the pipeline for an array's metadata; codecs that are unknown, refused (see
        `asyncarr.codecs.allowlist`) or invalid raise `MetadataError`, and nothing else."""
        try:
            if metadata.zarr_format == 2:
                return _V2Pipeline(metadata)
            if metadata.zarr_format == 3:
                return _V3Pipeline(metadata)
        except MetadataError:
            raise
        except Exception as exc:  # the codec JSON is a stranger's: whatever it trips over is a metadata error
            raise MetadataError(f"invalid codecs: {type(exc).__name__}: {exc}") from exc
        raise MetadataError(f"unsupported zarr_format {shown(metadata.zarr_format)}")

    @property
    @abc.abstractmethod
    def compressor(self) -> Any:
        """The compressor as a numcodecs codec (v3: the first bytes->bytes codec), or None."""

    @property
    @abc.abstractmethod
    def filters(self) -> list[Any]:
        """The filters as numcodecs codecs (v3: the array->array codecs); empty if none."""

    def decode(self, data: Buffer, chunk_shape: Sequence[int], key: str) -> np.ndarray:
        """Decode one chunk into a new C-contiguous, writable array of `chunk_shape` and the array's dtype."""
        chunk_shape = tuple(chunk_shape)
        chunk = np.empty(chunk_shape, dtype=self.dtype)
        self.decode_into(data, chunk_shape, key, chunk, (), ())
        return chunk

    def decode_into(
        self,
        data: Buffer,
        chunk_shape: Sequence[int],
        key: str,
        out: np.ndarray,
        out_selection: Selection,
        chunk_selection: Selection,
    ) -> None:
        """Decode one chunk and copy ``chunk[chunk_selection]`` into ``out[out_selection]``.

        A whole chunk bound for a contiguous region of `out` is decompressed straight into it
        where the codecs allow, skipping the intermediate chunk array.
        """
        chunk_shape = tuple(chunk_shape)
        try:
            fast = self._whole_chunk_decoder(chunk_shape)
            if fast is not None:
                # Per-chunk cost matters for small chunks: the cheapest tests come first.
                whole = _selects_whole_chunk(chunk_selection, chunk_shape)
                if whole:
                    destination = out[out_selection]
                    if (
                        type(destination) is np.ndarray
                        and destination.shape == chunk_shape
                        and destination.dtype == self.dtype
                        and np.may_share_memory(destination, out)  # a view of `out`, not a fancy-indexed copy
                    ):
                        fast.into_block(data, destination)
                        return
                if whole:
                    out[out_selection] = fast.array(data)
                else:  # a part of the chunk: decoded in this thread's scratch chunk, the part copied out
                    out[out_selection] = fast.scratch_decode(data)[chunk_selection]
                return
            if _selects_whole_chunk(chunk_selection, chunk_shape):
                destination = out[out_selection]
                if (
                    isinstance(destination, np.ndarray)
                    and destination.shape == chunk_shape
                    and destination.dtype == self.dtype
                    and np.may_share_memory(destination, out)
                    and self._decode_straight_into(data, chunk_shape, destination)
                ):
                    return
            chunk = self._decode_array(data, chunk_shape)
        except Exception as exc:
            raise CodecError(f"chunk {key}: cannot decode: {exc}") from exc
        out[out_selection] = chunk[chunk_selection]

    def plain_decoder(self, chunk_shape: tuple[int, ...]) -> PlainChainDecoder | None:
        """The decoder of chunks of ``chunk_shape`` for chains of raw or Blosc-framed bytes and
        nothing else (cached), or None for other chains: for reads of many small chunks, whose
        cost is mostly per chunk, and of parts of chunks held open (`scratch_read_part`)."""
        return self._whole_chunk_decoder(chunk_shape)

    def encode(self, chunk: np.ndarray, key: str) -> bytes:
        """Encode one chunk (an array of the chunk's shape) into the bytes to store."""
        chunk = np.asarray(chunk)
        plain = self.plain_encoder
        try:
            if plain is not None and chunk.dtype == self.dtype and chunk.shape == self.chunk_shape:
                return plain(chunk)
            if self.dtype.kind == "O" and not self.python_objects:
                chunk = _exact_bytes(chunk)
            return ensure_bytes(self._encode(chunk))
        except Exception as exc:
            raise CodecError(f"chunk {key}: cannot encode: {exc}") from exc

    def encode_buffer(self, chunk: np.ndarray, key: str) -> Buffer:
        """`encode`, but any buffer may come back rather than `bytes`: a whole shard is the buffer it
        was laid out in, with no copy into `bytes` (for stores that write any buffer)."""
        encoder = self._buffer_encoder()
        if encoder is None:
            return self.encode(chunk, key)
        try:
            return encoder(np.asarray(chunk).astype(self.dtype, copy=False), self._specs(self.chunk_shape)[-1])
        except Exception as exc:
            raise CodecError(f"chunk {key}: cannot encode: {exc}") from exc

    def _buffer_encoder(self) -> Any:
        """The array->bytes codec's ``encode_buffer`` when it is the whole chain, else None."""
        return None

    def _whole_chunk_decoder(self, chunk_shape: tuple[int, ...]) -> PlainChainDecoder | None:
        """A cached decoder of whole chunks into a C-contiguous array of the chunk, for the common chains."""
        try:
            return self._whole_chunk_decoders[chunk_shape]
        except KeyError:
            decoder = self._whole_chunk_decoders[chunk_shape] = self._plain_chain_decoder(chunk_shape)
            return decoder

    def _plain_chain_decoder(self, chunk_shape: tuple[int, ...]) -> PlainChainDecoder | None:
        """Subclasses return a fast decoder when the chain is just raw bytes, optionally Blosc-compressed."""
        return None

    @functools.cached_property
    def plain_encoder(self) -> Callable[[np.ndarray], Buffer] | None:
        """For chains of Blosc-compressed raw bytes and nothing else: a function encoding one whole
        chunk (an array of the chunk's shape and the array's dtype, in any memory layout) into the
        very bytes the general path stores, without its layers of codec objects; None for other
        chains. `encode` takes it where it applies: for writes of many small chunks, whose cost is
        mostly per chunk. Its failures are the compressor's own; `encode` names the chunk."""
        return self._plain_chain_encoder()

    def _plain_chain_encoder(self) -> Callable[[np.ndarray], Buffer] | None:
        """Subclasses return a fast encoder when the chain is just raw bytes, Blosc-compressed."""
        return None

    @functools.cached_property
    def plain_encoder_into(self) -> CompressInto | None:
        """`plain_encoder`, writing into memory the caller gives: ``compress(chunk, address,
        capacity)`` takes a C-contiguous chunk of the chunk's shape and the array's dtype and
        returns the length of what it wrote; None where the chain is not Blosc over raw bytes, or
        numcodecs' Blosc cannot be called so (`blosc_compressor_into`). For shards, whose inner
        chunks are laid end to end in one buffer."""
        return self._plain_chain_encoder_into()

    def _plain_chain_encoder_into(self) -> CompressInto | None:
        """Subclasses return `plain_encoder_into` where their chain allows it."""
        return None

    @abc.abstractmethod
    def _decode_array(self, data: Buffer, chunk_shape: tuple[int, ...]) -> np.ndarray:
        """Decode into an array of the logical shape and dtype (may be a read-only view)."""

    @abc.abstractmethod
    def _decode_straight_into(self, data: Buffer, chunk_shape: tuple[int, ...], destination: np.ndarray) -> bool:
        """Decode into `destination` if the layout allows; False (untouched) if it does not."""

    @abc.abstractmethod
    def _encode(self, chunk: np.ndarray) -> Buffer:
        """Encode a chunk array."""

    def _expected_nbytes(self, chunk_shape: tuple[int, ...]) -> int:
        return math.prod(chunk_shape) * self.dtype.itemsize


class PlainChainDecoder:
    """Decodes raw or Blosc-framed chunk bytes of one chunk shape, for chains with nothing else.

    The same checks as the general path (frame header against length and size), minus the
    layers of codec objects around them: this is the per-chunk cost that matters most for
    arrays of many small chunks.
    """

    def __init__(self, blosc_framed: bool, chunk_shape: tuple[int, ...], dtype: np.dtype) -> None:
        self._blosc_framed = blosc_framed
        self._shape = chunk_shape
        self._dtype = dtype
        self._nbytes = math.prod(chunk_shape) * dtype.itemsize
        # c-blosc2 for small frames when it is installed (`asyncarr.codecs.blosc_frames`).
        self._blosc2 = blosc_framed and fast_decoder_available()
        self._scratch = threading.local()  # one chunk-sized array per thread, for `scratch_decode`
        self._blocks = BlockReader(self._nbytes)

    def into(self, data: Buffer, destination: np.ndarray, address: int | None = None) -> None:
        """Decode into ``destination``, a C-contiguous writable array of the chunk's shape and dtype
        (``address``: its memory's address, where the caller already knows it)."""
        if self._blosc_framed:
            frame = check_blosc_frame(data, self._nbytes)
            if not (
                self._blosc2
                and decompress_into_address(
                    frame, destination.ctypes.data if address is None else address, self._nbytes
                )
            ):
                blosc.decompress(frame, destination)
        else:
            destination.reshape(-1).view(np.uint8)[...] = self._raw(data)

    def into_block(self, data: Buffer, destination: np.ndarray) -> None:
        """Decode a whole chunk into ``destination``, a view of the chunk's shape and dtype in a
        larger output: straight into it where it is contiguous, else through the scratch chunk."""
        if destination.flags.c_contiguous and destination.flags.writeable:
            self.into(data, destination)
        else:  # a block of a larger output: decoded in a scratch chunk, then copied in
            destination[...] = self.scratch_decode(data)

    def block_writer(self) -> Callable[[Buffer, str, np.ndarray], None]:
        """`into_block` as a function for one thread's batch of chunks, a failure raising `CodecError`
        naming the chunk's ``key`` as `decode_into` does. This thread's scratch chunk and its
        address are looked up once a batch (made at the first chunk that needs one: a batch may
        hold none), not once a chunk: W2 reads 4096 chunks of 2 KiB, where 2 us a chunk is 8 ms."""
        into = self.into
        scratch: np.ndarray | None = None
        address = 0

        def write(data: Buffer, key: str, destination: np.ndarray) -> None:
            nonlocal scratch, address
            try:
                flags = destination.flags
                if flags.c_contiguous and flags.writeable:
                    into(data, destination)
                    return
                if scratch is None:
                    scratch, address = self._scratch_chunk(), self._scratch.address
                into(data, scratch, address)
                destination[...] = scratch
            except Exception as exc:
                raise CodecError(f"chunk {key}: cannot decode: {exc}") from exc

        return write

    def scratch_decode(self, data: Buffer) -> np.ndarray:
        """The chunk decoded into this thread's scratch array, valid until the thread's next call:
        copy out what is needed at once. No new memory per chunk (on this VM, faulting in a new
        MiB costs about what decoding one does)."""
        scratch = self._scratch_chunk()
        self.into(data, scratch, self._scratch.address)
        return scratch

    def scratch_read_part(self, source: FramePart, selection: Selection) -> np.ndarray | None:
        """What ``selection`` reads of the chunk stored in ``source``, read and decoded into this
        thread's scratch array, the rest of which is undefined (only the Blosc blocks, or for raw
        chunks the bytes, it lies in); None when the chunk should be read whole instead."""
        span = selection_byte_span(selection, self._shape, self._dtype.itemsize)
        if span is None:
            return None
        if self._blosc_framed and not self._blocks.may_save(*span):
            return None
        scratch = self._scratch_chunk()
        flat = self._scratch.bytes
        if self._blosc_framed:
            return scratch if self._blocks.read_into(source, span[0], span[1], flat) else None
        if source.size != self._nbytes:
            return None  # the whole read names the wrong size
        part = memoryview(flat[span[0] : span[1] + 1])
        return scratch if source.read_into(span[0], part) == len(part) else None

    def part_decoded_bytes(self, selection: Selection) -> int:
        """About how many bytes `scratch_read_part` decodes for ``selection`` (the work a second thread could share)."""
        span = selection_byte_span(selection, self._shape, self._dtype.itemsize)
        if span is None:
            return self._nbytes
        if not self._blosc_framed:
            return 0  # raw bytes: read, not decoded
        return self._blocks.decoded_bytes(*span)

    def _scratch_chunk(self) -> np.ndarray:
        scratch = getattr(self._scratch, "chunk", None)
        if scratch is None:
            scratch = self._scratch.chunk = np.empty(self._shape, dtype=self._dtype)
            self._scratch.address = scratch.ctypes.data
            self._scratch.bytes = scratch.reshape(-1).view(np.uint8)
        return scratch

    def array(self, data: Buffer) -> np.ndarray:
        """Decode into a new array of the chunk, read-only where it is the raw bytes themselves (not copied)."""
        if self._blosc_framed:
            frame = check_blosc_frame(data, self._nbytes)
            if self._blosc2:
                chunk = np.empty(self._shape, dtype=self._dtype)
                if decompress_into_address(frame, chunk.ctypes.data, self._nbytes):
                    return chunk
            # Without a destination numcodecs allocates the bytes itself, and skips the checks
            # it makes of a destination array: cheaper for small chunks that are copied anyway.
            return np.frombuffer(blosc.decompress(frame), dtype=self._dtype).reshape(self._shape)
        return self._raw(data).view(self._dtype).reshape(self._shape)

    def _raw(self, data: Buffer) -> np.ndarray:
        source = np.frombuffer(data, dtype=np.uint8)
        if source.nbytes != self._nbytes:
            raise ValueError(f"decoded chunk has {source.nbytes} bytes, expected {self._nbytes}")
        return source


def _plain_decoder(compressor: Any, chunk_shape: tuple[int, ...], dtype: np.dtype) -> PlainChainDecoder | None:
    """The fast decoder for chunks of ``chunk_shape`` when ``compressor`` is None or Blosc, else None."""
    if compressor is not None and getattr(compressor, "codec_id", None) != "blosc":
        return None
    return PlainChainDecoder(compressor is not None, chunk_shape, dtype)


def _selects_whole_chunk(chunk_selection: Selection, chunk_shape: tuple[int, ...]) -> bool:
    if chunk_selection == () or chunk_selection is Ellipsis:
        return True
    if not isinstance(chunk_selection, tuple):
        chunk_selection = (chunk_selection,)
    if len(chunk_selection) != len(chunk_shape):
        return False
    for part, size in zip(chunk_selection, chunk_shape, strict=True):
        if type(part) is not slice:
            return False
        if part.start == 0 and part.stop == size and part.step == 1:
            continue  # the form indexers produce, known without slice.indices
        if part.indices(size) != (0, size, 1):
            return False
    return True


def _flat_bytes(array: np.ndarray, order: str) -> np.ndarray | None:
    """A writable uint8 view of `array`'s memory in `order`, or None if it is not laid out so."""
    contiguous = array.flags.c_contiguous if order == "C" else array.flags.f_contiguous
    if not contiguous or not array.flags.writeable:
        return None
    return array.reshape(-1, order=order).view(np.uint8)


def _fill(buffer: np.ndarray, decoded: Buffer) -> None:
    """Copy `decoded` into `buffer` unless it already is `buffer`; sizes must agree."""
    if decoded is buffer:
        return
    source = ensure_contiguous_ndarray(decoded).view(np.uint8)
    if source.nbytes != buffer.nbytes:
        raise ValueError(f"decoded chunk has {source.nbytes} bytes, expected {buffer.nbytes}")
    buffer[...] = source


# v2 filters whose output has as many elements as their input, in another data type.
_RETYPING_FILTERS = {
    "delta": "astype",
    "fixedscaleoffset": "astype",
    "quantize": "astype",
    "astype": "encode_dtype",
    "categorize": "astype",
}
_CHECKSUM_FILTERS = frozenset({"crc32", "crc32c", "adler32", "fletcher32", "jenkins_lookup3"})


def _v2_filter_output_nbytes(codec: Codec, nbytes: int | None) -> int | None:
    """Bytes a v2 filter encodes `nbytes` bytes into, or None where that is not fixed."""
    if nbytes is None:
        return None
    codec_id = codec.codec_id
    if codec_id in _RETYPING_FILTERS:
        config = codec.get_config()
        source = np.dtype(config["decode_dtype"] if codec_id == "astype" else config["dtype"])
        target = np.dtype(config.get(_RETYPING_FILTERS[codec_id]) or source)
        count, remainder = divmod(nbytes, source.itemsize)
        return None if remainder else count * target.itemsize
    if codec_id in ("bitround", "shuffle"):
        return nbytes
    if codec_id == "packbits":
        return 1 + math.ceil(nbytes / 8)  # one byte of padding count, then 8 booleans a byte
    if codec_id in _CHECKSUM_FILTERS:
        return nbytes + 4
    return None


def naming_url(error: CodecError, key: str, url: str) -> CodecError:
    """The same failure, naming the chunk by the user's `url` rather than its store `key`."""
    message = str(error)
    prefix = f"chunk {key}"
    message = f"chunk {url}{message[len(prefix) :]}" if message.startswith(prefix) else f"{url}: {message}"
    renamed = CodecError(message)
    renamed.__cause__ = error.__cause__
    return renamed


# numcodecs' VLenBytes takes exact bytes only; bytes subclasses such as np.bytes_ become bytes.
_bytes_of_subclass = np.frompyfunc(lambda item: bytes(item) if isinstance(item, bytes) else item, 1, 1)


def _exact_bytes(chunk: np.ndarray) -> np.ndarray:
    """`chunk` with every bytes-like element as exact ``bytes`` (other elements are left to the codec)."""
    if all(type(item) is bytes or item is None for item in chunk.flat):
        return chunk
    text = next((item for item in chunk.flat if isinstance(item, str)), None)
    if text is not None:
        raise TypeError(f"an array of bytes cannot hold the str {text[:40]!r}; create it with dtype=str for strings")
    return _bytes_of_subclass(chunk).astype(object, copy=False)


def _object_chunk(decoded: Any, chunk_shape: tuple[int, ...], order: str, dtype: np.dtype) -> np.ndarray:
    """Shape the object array an object codec (VLenUTF8, VLenBytes, JSON, ...) decoded into a chunk of `dtype`."""
    items = np.asarray(decoded)
    expected = math.prod(chunk_shape)
    if items.dtype != object or items.size != expected:
        raise ValueError(f"decoded chunk holds {items.size} {items.dtype} elements, expected {expected} objects")
    return items.reshape(chunk_shape, order=order).astype(dtype, copy=False)


class _V2Pipeline(CodecPipeline):
    """Zarr v2: filters, then the compressor, on the chunk's bytes in ``order``."""

    def __init__(self, metadata: Any) -> None:
        super().__init__(metadata)
        self.order: str = metadata.order
        if self.order not in ("C", "F"):
            raise MetadataError(f"order must be 'C' or 'F', got {shown(self.order)}")
        filters = metadata.filters or ()
        if not isinstance(filters, Sequence) or isinstance(filters, (str, bytes)):
            raise MetadataError(f"'filters' must be a list of codec configs or null, got {shown(filters)}")
        self._compressor: Codec | None = None
        self._compressor_typesize: int | None = None
        if metadata.compressor is not None:
            self._compressor = codec_from_v2_config(metadata.compressor, "'compressor'")
            typesize = metadata.compressor.get("typesize")
            self._compressor_typesize = typesize if isinstance(typesize, int) else None
        self._filters: list[Codec] = [
            codec_from_v2_config(config, f"'filters'[{position}]") for position, config in enumerate(filters)
        ]
        if self._compressor is not None and self._compressor.codec_id in OBJECT_CODEC_IDS:
            raise MetadataError(
                f"'compressor': the object codec {self._compressor.codec_id!r} serializes object arrays; "
                "it belongs among the 'filters'"
            )
        if not self.variable_length:
            for where, codec in [("'compressor'", self._compressor), *(("'filters'", f) for f in self._filters)]:
                if codec is not None and codec.codec_id in DATA_OBJECT_CODEC_IDS:
                    raise MetadataError(
                        f"{where}: the object codec {codec.codec_id!r} serializes object arrays, "
                        f"but the data type is {self.dtype}"
                    )
        for position, codec in enumerate(self._filters):
            if codec.codec_id == "categorize" and (position != 0 or codec.dtype != self.dtype):
                raise MetadataError(
                    f"'filters'[{position}]: 'categorize' of {codec.dtype} strings must be the first filter of an "
                    f"array of that data type; the array's is {self.dtype}"
                )
        if self.variable_length:
            configs = [*(metadata.filters or ()), metadata.compressor]
            found = find_object_codec_id(configs)
            self.python_objects = self.dtype.kind == "O" and found in PYTHON_OBJECT_CODEC_IDS
            if self.python_objects:
                ids = [config.get("id") for config in configs if isinstance(config, dict)]
                first_filter = self._filters[0].codec_id if self._filters else None
                if first_filter != found or sum(codec_id in OBJECT_CODEC_IDS for codec_id in ids) != 1:
                    raise MetadataError(
                        f"the object codec {found!r} must be the first filter and the only object codec, "
                        f"got {shown(ids)}"
                    )
            elif found != object_codec_id(self.dtype):
                raise MetadataError(
                    f"data type {self.dtype} needs the object codec {object_codec_id(self.dtype)!r} among the "
                    f"filters, found {found!r}"
                )

    @property
    def compressor(self) -> Codec | None:
        """The numcodecs compressor, or None."""
        return self._compressor

    @property
    def filters(self) -> list[Codec]:
        """The numcodecs filters, in encoding order."""
        return list(self._filters)

    def _plain_chain_decoder(self, chunk_shape: tuple[int, ...]) -> PlainChainDecoder | None:
        if self._filters or self.variable_length or self.order != "C":
            return None
        return _plain_decoder(self._compressor, chunk_shape, self.dtype)

    def _plain_chain_encoder(self) -> Callable[[np.ndarray], Buffer] | None:
        if self._filters or self.variable_length or self.order != "C" or self.dtype.hasobject:
            return None
        if getattr(self._compressor, "codec_id", None) != "blosc":
            return None
        # What `_encode` ends in, given the C-ordered typed array: numcodecs' compression function,
        # called directly (`blosc_compressor`), with the typesize the configuration gave the codec.
        return blosc_compressor(self._compressor, self.dtype, self._compressor_typesize)

    def _filtered_nbytes(self, chunk_shape: tuple[int, ...]) -> int | None:
        """Bytes the filters turn a chunk into (what the compressor decodes to), where fixed."""
        if self.variable_length:
            return None
        nbytes: int | None = self._expected_nbytes(chunk_shape)
        for codec in self._filters:
            nbytes = _v2_filter_output_nbytes(codec, nbytes)
        return nbytes

    def _decompress(self, data: Buffer, chunk_shape: tuple[int, ...], out: np.ndarray | None = None) -> Buffer:
        if self._compressor is None:
            return data
        return decode_checked(self._compressor, data, self._filtered_nbytes(chunk_shape), out)

    def _decode_array(self, data: Buffer, chunk_shape: tuple[int, ...]) -> np.ndarray:
        decoded = self._decompress(data, chunk_shape)
        if self._filters:
            filtered_nbytes = self._filtered_nbytes(chunk_shape)
            if filtered_nbytes is not None and ensure_contiguous_ndarray(decoded).nbytes != filtered_nbytes:
                raise ValueError(
                    f"chunk holds {ensure_contiguous_ndarray(decoded).nbytes} bytes before its filters, "
                    f"expected {filtered_nbytes}"
                )
        for codec in reversed(self._filters):
            if codec.codec_id in OBJECT_LIST_CODEC_IDS:
                decoded = decode_object_list(codec, decoded, math.prod(chunk_shape))
                continue
            if codec.codec_id == "categorize":
                decoded = decode_categories(codec, decoded)
                continue
            if codec.codec_id in VARIABLE_LENGTH_CODEC_IDS:
                check_vlen_count(decoded, math.prod(chunk_shape))
            decoded = codec.decode(decoded)
        if self.variable_length:
            return _object_chunk(decoded, chunk_shape, self.order, self.dtype)
        flat = ensure_contiguous_ndarray(decoded)
        if flat.dtype.hasobject:
            raise ValueError("filters produced an object array, but the data type holds no objects")
        expected = self._expected_nbytes(chunk_shape)
        if flat.nbytes != expected:
            raise ValueError(f"decoded chunk has {flat.nbytes} bytes, expected {expected}")
        return flat.view(self.dtype).reshape(chunk_shape, order=self.order)

    def _decode_straight_into(self, data: Buffer, chunk_shape: tuple[int, ...], destination: np.ndarray) -> bool:
        if self._filters or self.variable_length:
            return False
        buffer = _flat_bytes(destination, self.order)
        if buffer is None:
            return False
        _fill(buffer, self._decompress(data, chunk_shape, out=buffer))
        return True

    def _encode(self, chunk: np.ndarray) -> Buffer:
        if chunk.shape != self.chunk_shape:
            raise ValueError(f"chunk has shape {chunk.shape}, expected {self.chunk_shape}")
        # Like zarr-python: the compressor sees the typed array (Blosc takes its typesize from it).
        encoded = chunk.astype(self.dtype, order=self.order, copy=False)
        for codec in self._filters:
            encoded = codec.encode(encoded)
        # Without filters the encoded array has the array's own dtype: the check is known for free.
        if (
            not self.variable_length
            and (self._filters or self.dtype.hasobject)
            and ensure_contiguous_ndarray(encoded).dtype.hasobject
        ):
            raise ValueError("cannot store an object array without an object codec")
        if self._compressor is not None:
            encoded = self._compressor.encode(encoded)
        return encoded


class _V3Pipeline(CodecPipeline):
    """Zarr v3: array->array codecs, one array->bytes codec, then bytes->bytes codecs."""

    def __init__(self, metadata: Any) -> None:
        super().__init__(metadata)
        if not isinstance(metadata.codecs, Sequence) or isinstance(metadata.codecs, (str, bytes)):
            raise MetadataError(f"codecs must be a list of codec objects, got {shown(metadata.codecs)}")
        self.array_array: list[ArrayArrayCodec] = []
        self.array_bytes: ArrayBytesCodec | None = None
        self.bytes_bytes: list[BytesBytesCodec] = []
        spec = ChunkSpec(self.chunk_shape, self.dtype, self.fill_value)
        for position, json in enumerate(metadata.codecs):
            try:
                codec = codec_from_json(json, spec)
            except MetadataError as exc:
                raise MetadataError(f"'codecs'[{position}]: {exc}") from exc
            if isinstance(codec, ArrayArrayCodec) and self.array_bytes is None:
                self.array_array.append(codec)
                spec = codec.resolve(spec)
            elif isinstance(codec, ArrayBytesCodec) and self.array_bytes is None:
                self.array_bytes = codec
            elif isinstance(codec, BytesBytesCodec) and self.array_bytes is not None:
                self.bytes_bytes.append(codec)
            else:
                names = [c.get("name") if isinstance(c, dict) else c for c in metadata.codecs]
                raise MetadataError(
                    f"invalid codec chain {shown(names)}: expected array->array codecs, then one array->bytes "
                    "codec, then bytes->bytes codecs"
                )
        if self.array_bytes is None:
            raise MetadataError("codec chain has no array->bytes codec (such as 'bytes')")
        self._specs_by_shape: dict[tuple[int, ...], list[ChunkSpec]] = {}

    @property
    def codecs(self) -> list[V3Codec]:
        """Every codec, in encoding order."""
        return [*self.array_array, self.array_bytes, *self.bytes_bytes]

    @property
    def compressors(self) -> list[Any]:
        """The bytes->bytes codecs, as numcodecs codecs where one exists."""
        return [codec.as_numcodecs() for codec in self.bytes_bytes]

    @property
    def compressor(self) -> Any:
        """The first bytes->bytes codec, as a numcodecs codec where one exists, or None."""
        compressors = self.compressors
        return compressors[0] if compressors else None

    @property
    def filters(self) -> list[Any]:
        """The array->array codecs, as numcodecs codecs where one exists."""
        return [getattr(codec, "numcodecs_codec", codec) for codec in self.array_array]

    def _specs(self, chunk_shape: tuple[int, ...]) -> list[ChunkSpec]:
        """The input spec of each array->array codec, then that of the array->bytes codec."""
        specs = self._specs_by_shape.get(chunk_shape)
        if specs is None:
            specs = [ChunkSpec(chunk_shape, self.dtype, self.fill_value)]
            for codec in self.array_array:
                specs.append(codec.resolve(specs[-1]))
            self._specs_by_shape[chunk_shape] = specs
        return specs

    def _plain_chain_encoder(self) -> Callable[[np.ndarray], Buffer] | None:
        if self.array_array or not isinstance(self.array_bytes, BytesCodec) or len(self.bytes_bytes) != 1:
            return None
        if self.array_bytes.stored_dtype(self.dtype) != self.dtype or self.dtype.hasobject:
            return None
        if not isinstance(self.bytes_bytes[0], BloscCodec):
            return None
        blosc_codec = self.bytes_bytes[0]
        # The bytes codec's output for an array already in the stored dtype is its C-ordered bytes.
        # numcodecs takes Blosc's typesize from the codec where it has one: the typed array's bytes
        # then compress as those bytes would. Without one, from the buffer: its bytes as uint8.
        if blosc_codec.typesize is not None:
            return blosc_compressor(blosc_codec.as_numcodecs(), self.dtype, blosc_codec.typesize)
        compress = blosc_compressor(blosc_codec.as_numcodecs(), np.dtype(np.uint8), None)

        def encode(chunk: np.ndarray) -> Buffer:
            return compress(np.ascontiguousarray(chunk).reshape(-1).view(np.uint8))

        return encode

    def _plain_chain_encoder_into(self) -> CompressInto | None:
        if self.plain_encoder is None:  # the same chains, and the same reading of the typesize
            return None
        blosc_codec = self.bytes_bytes[0]
        if blosc_codec.typesize is not None:
            return blosc_compressor_into(blosc_codec.as_numcodecs(), self.dtype, blosc_codec.typesize)
        compress = blosc_compressor_into(blosc_codec.as_numcodecs(), np.dtype(np.uint8), None)
        if compress is None:
            return None

        def compress_bytes(chunk: np.ndarray, address: int, capacity: int) -> int:
            return compress(chunk.reshape(-1).view(np.uint8), address, capacity)

        return compress_bytes

    def _plain_chain_decoder(self, chunk_shape: tuple[int, ...]) -> PlainChainDecoder | None:
        if self.array_array or not isinstance(self.array_bytes, BytesCodec) or len(self.bytes_bytes) > 1:
            return None
        if self.array_bytes.stored_dtype(self.dtype) != self.dtype:
            return None
        compressor = self.bytes_bytes[0].as_numcodecs() if self.bytes_bytes else None
        if self.bytes_bytes and not isinstance(self.bytes_bytes[0], BloscCodec):
            return None
        return _plain_decoder(compressor, chunk_shape, self.dtype)

    def _decoded_sizes(self, array_bytes_spec: ChunkSpec) -> list[int | None]:
        """The size each bytes->bytes codec should decode to, where it is fixed."""
        sizes = [self.array_bytes.encoded_size(array_bytes_spec)]
        for codec in self.bytes_bytes[:-1]:
            sizes.append(codec.encoded_size(sizes[-1]))
        return sizes

    def _buffer_encoder(self) -> Any:
        if self.array_array or self.bytes_bytes:
            return None
        return getattr(self.array_bytes, "encode_buffer", None)

    def _decode_bytes(self, data: Buffer, spec: ChunkSpec, out: np.ndarray | None = None) -> Buffer:
        if not self.bytes_bytes:
            return data
        sizes = self._decoded_sizes(spec)
        for codec, size in zip(reversed(self.bytes_bytes[1:]), reversed(sizes[1:]), strict=True):
            data = codec.decode(data, size)
        return self.bytes_bytes[0].decode(data, sizes[0], out)

    def _decode_array(self, data: Buffer, chunk_shape: tuple[int, ...]) -> np.ndarray:
        specs = self._specs(chunk_shape)
        decoded = self._decode_bytes(data, specs[-1])
        expected = self.array_bytes.encoded_size(specs[-1])
        if expected is not None:
            nbytes = memoryview(decoded).nbytes if not isinstance(decoded, np.ndarray) else decoded.nbytes
            if nbytes != expected:
                raise ValueError(f"decoded chunk has {nbytes} bytes, expected {expected}")
        array = self.array_bytes.decode(decoded, specs[-1])
        for codec, spec in zip(reversed(self.array_array), reversed(specs[:-1]), strict=True):
            array = codec.decode(array, spec)
        return array

    def _decode_straight_into(self, data: Buffer, chunk_shape: tuple[int, ...], destination: np.ndarray) -> bool:
        if self.array_array:
            return False
        if not isinstance(self.array_bytes, BytesCodec):
            # A serializer that fills arrays itself (sharding writes each inner chunk in place).
            spec = self._specs(chunk_shape)[-1]
            return not self.bytes_bytes and self.array_bytes.decode_into(data, spec, destination)
        if self.array_bytes.stored_dtype(self.dtype) != self.dtype:
            return False
        buffer = _flat_bytes(destination, "C")
        if buffer is None:
            return False
        _fill(buffer, self._decode_bytes(data, self._specs(chunk_shape)[-1], out=buffer))
        return True

    def _encode(self, chunk: np.ndarray) -> Buffer:
        if chunk.shape != self.chunk_shape:
            raise ValueError(f"chunk has shape {chunk.shape}, expected {self.chunk_shape}")
        specs = self._specs(self.chunk_shape)
        array = chunk.astype(self.dtype, copy=False)
        for codec, spec in zip(self.array_array, specs, strict=False):
            array = codec.encode(array, spec)
        encoded = self.array_bytes.encode(array, specs[-1])
        for codec in self.bytes_bytes:
            encoded = codec.encode(encoded)
        return encoded
