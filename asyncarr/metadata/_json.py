"""JSON plumbing shared by the v2 and v3 metadata documents."""

from __future__ import annotations

import json
import numbers
from collections.abc import Mapping
from typing import Any

from asyncarr.errors import MetadataError

__all__ = ["canonical_json", "document_path", "dump_json", "load_json_object", "parse_int_tuple"]


def document_path(node_path: str, name: str) -> str:
    """Return the store key of document `name` of the node at `node_path` (for error messages)."""
    node_path = node_path.strip("/")
    return f"{node_path}/{name}" if node_path else name


def load_json_object(raw: bytes | str | Mapping[str, Any], doc_path: str) -> dict[str, Any]:
    """Decode one metadata document that must hold a JSON object; raise MetadataError naming `doc_path`."""
    if isinstance(raw, Mapping):
        return dict(raw)
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes | bytearray | memoryview) else raw
        value = json.loads(text)
    except UnicodeDecodeError as exc:
        raise MetadataError(f"{doc_path}: not valid UTF-8 ({exc})") from exc
    except (json.JSONDecodeError, TypeError) as exc:
        raise MetadataError(f"{doc_path}: not valid JSON ({exc})") from exc
    if not isinstance(value, dict):
        raise MetadataError(f"{doc_path}: expected a JSON object, got {type(value).__name__}")
    return value


def dump_json(document: Any, *, indent: int = 4, sort_keys: bool = False) -> bytes:
    """Encode a document as UTF-8 JSON; NaN in attributes stays bare NaN, as zarr-python writes it."""
    return json.dumps(document, indent=indent, sort_keys=sort_keys, ensure_ascii=True, allow_nan=True).encode()


def canonical_json(document: Any) -> str:
    """Return one text per JSON value, for equality that treats NaN attributes as equal."""
    return json.dumps(document, sort_keys=True, allow_nan=True)


def parse_int_tuple(value: Any, field: str, *, minimum: int) -> tuple[int, ...]:
    """Return `value` (a JSON list of ints >= minimum) as a tuple; raise ValueError naming `field`."""
    if not isinstance(value, list | tuple):
        raise ValueError(f"{field!r} must be a list of integers, got {value!r}")
    for item in value:
        if isinstance(item, bool) or not isinstance(item, numbers.Integral):
            raise ValueError(f"{field!r} must be a list of integers, got {value!r}")
        if item < minimum:
            raise ValueError(f"{field!r} entries must be >= {minimum}, got {value!r}")
    return tuple(int(item) for item in value)
