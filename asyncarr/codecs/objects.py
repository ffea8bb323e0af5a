"""Bounded decoding of the object codecs that store a chunk as one list: ``json2`` and ``msgpack2``.

numcodecs' ``JSON`` and ``MsgPack`` store a chunk as ``[*elements, dtype, shape]`` (elements nested
as ``ndarray.tolist()`` gives them) and decode it with ``np.empty(shape, dtype)``: the stranger who
wrote the chunk chooses the allocation. Here the stored bytes are bounded first (by
``config.variable_chunk_max_bytes``, so the parsed objects are bounded by a small multiple of
them), then the declared dtype must be ``"|O"`` and the declared shape must hold exactly the
chunk's number of elements, and every level of nesting must have the declared length, before
one object array of the chunk's size is filled. Violations raise ValueError, which the pipeline
turns into `CodecError` naming the chunk.

``categorize`` (fixed-length strings stored as small integers) is decoded here too: numcodecs
compares the chunk with each label in turn, a cost of labels times elements that the metadata's
author chooses; a lookup table costs one step per element.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import numpy as np

from asyncarr import config

__all__ = ["decode_categories", "decode_object_list"]

_MAX_NDIM = 64


def decode_object_list(codec: Any, data: Any, count: int) -> np.ndarray:
    """Decode a ``json2``/``msgpack2`` chunk of `count` elements into an object array of its
    stored shape; ValueError if it is too large, malformed or holds another number of elements."""
    raw = memoryview(data).cast("B")
    limit = config.get("variable_chunk_max_bytes")
    if raw.nbytes > limit:
        raise ValueError(f"{codec.codec_id} chunk of {raw.nbytes} bytes is larger than the limit of {limit}")
    settings = codec.get_config()
    if codec.codec_id == "json2":
        text = bytes(raw).decode(settings.get("encoding", "utf-8"))
        items = _json_list(text, json.JSONDecoder(strict=settings.get("strict", True)), count + 2)
    elif codec.codec_id == "msgpack2":
        items = _msgpack_list(raw, settings.get("raw", False), count + 2)
    else:
        raise ValueError(f"codec {codec.codec_id!r} does not store a chunk as a list")
    return _object_array(items, count)


_WHITESPACE = re.compile(r"[ \t\n\r]*")


def _json_list(text: str, decoder: json.JSONDecoder, most: int) -> list[Any]:
    """Parse a JSON array as ``json.loads`` does, one item at a time, refusing it past `most` items
    before they are parsed."""
    position = _WHITESPACE.match(text, 0).end()  # type: ignore[union-attr]
    if text[position : position + 1] != "[":
        raise ValueError("chunk is not a JSON array")
    position = _WHITESPACE.match(text, position + 1).end()  # type: ignore[union-attr]
    items: list[Any] = []
    if text[position : position + 1] == "]":
        position += 1
    else:
        while True:
            if len(items) == most:
                raise ValueError(f"chunk holds more than the {most} items of its elements, dtype and shape")
            item, position = decoder.raw_decode(text, position)
            items.append(item)
            position = _WHITESPACE.match(text, position).end()  # type: ignore[union-attr]
            separator = text[position : position + 1]
            position = _WHITESPACE.match(text, position + 1).end()  # type: ignore[union-attr]
            if separator == "]":
                break
            if separator != ",":
                raise ValueError(f"chunk's JSON array has {separator[:1]!r} where ',' or ']' belongs")
    if _WHITESPACE.match(text, position).end() != len(text):  # type: ignore[union-attr]
        raise ValueError("chunk has data after its JSON array")
    return items


def _msgpack_list(raw: memoryview, raw_strings: bool, most: int) -> list[Any]:
    """Unpack a MessagePack array, refusing one that declares more than `most` items before they are
    unpacked (msgpack bounds every container and string inside by the buffer's own length)."""
    try:
        import msgpack  # only MsgPack object arrays need it: not a dependency of asyncarr itself
    except ImportError as exc:
        raise ImportError("reading a MsgPack object array needs the msgpack package: pip install msgpack") from exc
    unpacker = msgpack.Unpacker(raw=raw_strings, use_list=True, max_buffer_size=max(raw.nbytes, 1))
    unpacker.feed(raw)
    declared = unpacker.read_array_header()
    if declared > most:
        raise ValueError(f"chunk declares {declared} items, more than the {most} of its elements, dtype and shape")
    items = [unpacker.unpack() for _ in range(declared)]
    try:
        unpacker.unpack()
    except msgpack.OutOfData:
        return items
    raise ValueError("chunk has data after its MessagePack array")


def _object_array(items: Any, count: int) -> np.ndarray:
    if not isinstance(items, list) or len(items) < 2:
        raise ValueError("chunk is not a list of its elements followed by their dtype and shape")
    elements, dtype, shape = items[:-2], items[-2], items[-1]
    if dtype != "|O":
        raise ValueError(f"chunk declares the data type {str(dtype)[:40]!r}, expected '|O'")
    if (
        not isinstance(shape, list)
        or len(shape) > _MAX_NDIM
        or not all(type(size) is int and 0 <= size <= count for size in shape)
    ):
        raise ValueError(f"chunk declares an invalid shape {str(shape)[:80]}")
    if math.prod(shape) != count:
        raise ValueError(f"chunk declares the shape {shape} of {math.prod(shape)} elements, expected {count}")
    flat = np.empty(count, dtype=object)
    if not shape:  # a 0-d chunk: one element
        if len(elements) != 1:
            raise ValueError(f"chunk holds {len(elements)} elements, expected 1")
        flat[0] = elements[0]
        return flat.reshape(())
    filled = _fill_flat(elements, shape, 0, flat, 0)
    if filled != count:  # pragma: no cover - every level's length was checked
        raise ValueError(f"chunk holds {filled} elements, expected {count}")
    return flat.reshape(shape)


def _fill_flat(nested: Any, shape: list[int], level: int, flat: np.ndarray, position: int) -> int:
    """Copy the elements of `nested` (lists `shape[level:]` deep) into `flat` from `position`; return
    the position after them. ValueError where a level's length differs from the shape's."""
    if not isinstance(nested, list) or len(nested) != shape[level]:
        length = len(nested) if isinstance(nested, list) else "no"
        raise ValueError(f"chunk holds {length} elements at nesting level {level}, expected {shape[level]}")
    if level == len(shape) - 1:
        flat[position : position + len(nested)] = _as_object_vector(nested)
        return position + len(nested)
    for sub in nested:
        position = _fill_flat(sub, shape, level + 1, flat, position)
    return position


def _as_object_vector(elements: list[Any]) -> np.ndarray:
    """A 1-d object array holding `elements` as they are (lists stay list objects)."""
    vector = np.empty(len(elements), dtype=object)
    for index, element in enumerate(elements):
        vector[index] = element
    return vector


def decode_categories(codec: Any, data: Any) -> np.ndarray:
    """Decode a ``categorize`` chunk as numcodecs does (codes outside the labels give ``""``), with
    one table lookup per element."""
    codes = np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8).view(codec.astype).reshape(-1)
    table = np.array(["", *codec.labels], dtype=codec.dtype)
    return table[np.where(codes < len(table), codes, 0)]
