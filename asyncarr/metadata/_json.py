"""JSON plumbing shared by the v2 and v3 metadata documents."""

from __future__ import annotations

import json
import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np

from asyncarr.errors import MetadataError

__all__ = [
    "MAX_DIMENSIONS",
    "MAX_DOCUMENT_BYTES",
    "MAX_NESTING_DEPTH",
    "MAX_NUMBER_DIGITS",
    "canonical_json",
    "document_path",
    "dump_json",
    "load_json_object",
    "parse_int_tuple",
    "short_repr",
]

# Limits on metadata documents, which strangers write (docs/security.md). Each is far above what
# honest metadata needs and far below what makes parsing fail or cost more than the document's size.
MAX_DOCUMENT_BYTES = 256 * 2**20
"""Largest document parsed: consolidated metadata of 100,000-node hierarchies is tens of MiB."""
MAX_NESTING_DEPTH = 128
"""Deepest nesting of arrays and objects: real zarr.json documents (sharding in sharding, consolidated
groups, nested attributes) stay under 20; Python's json parser recurses and fails near 1000."""
MAX_NUMBER_DIGITS = 400
"""Most digits in one number: a uint64 has 20, a float64 needs 17 plus its exponent; Python's int()
refuses more than 4300 and takes quadratic time approaching that."""

MAX_DIMENSIONS = 64
"""Most dimensions of an array: NumPy's own limit (``numpy.ndarray`` cannot have more)."""
_MAX_INDEX = 2**63 - 1

_DIGITS_AS_ZEROS = bytes.maketrans(b"123456789", b"000000000")
_TOO_MANY_DIGITS = b"0" * (MAX_NUMBER_DIGITS + 1)
_NOT_BRACKETS_OR_QUOTES = bytes(b for b in range(256) if b not in b'"[]{}')
_BRACKET_STEP = np.zeros(256, dtype=np.int8)
_BRACKET_STEP[list(b"[{")] = 1
_BRACKET_STEP[list(b"]}")] = -1


def document_path(node_path: str, name: str) -> str:
    """Return the store key of document `name` of the node at `node_path` (for error messages)."""
    node_path = node_path.strip("/")
    return f"{node_path}/{name}" if node_path else name


def _outside_strings(raw: bytes, *, brackets_only: bool = False) -> bytes:
    """The bytes of `raw` outside its JSON strings (only the brackets among them, if `brackets_only`).

    Escapes are dropped first (backslashes pair up from the left, as in a JSON string), so every
    quote left opens or closes a string, and the text outside strings is every other piece.
    """
    unescaped = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    if brackets_only:
        unescaped = unescaped.translate(None, _NOT_BRACKETS_OR_QUOTES)
    return b"".join(unescaped.split(b'"')[::2])


def _check_limits(raw: bytes, doc_path: str) -> None:
    """Raise MetadataError if `raw` is too large, nested too deeply, or holds a number too long.

    Runs without recursion, in time linear in the document, at C speed (bytes methods and NumPy):
    the nesting depth is the running sum of +1/-1 per bracket outside strings.
    """
    if len(raw) > MAX_DOCUMENT_BYTES:
        raise MetadataError(
            f"{doc_path}: document of {len(raw):,} bytes is larger than the {MAX_DOCUMENT_BYTES:,} bytes "
            "asyncarr parses (asyncarr.metadata._json.MAX_DOCUMENT_BYTES)"
        )
    if raw.translate(_DIGITS_AS_ZEROS).find(_TOO_MANY_DIGITS) != -1:
        # A long digit run somewhere; only one outside strings is a number.
        if _outside_strings(raw).translate(_DIGITS_AS_ZEROS).find(_TOO_MANY_DIGITS) != -1:
            raise MetadataError(f"{doc_path}: a number has more than {MAX_NUMBER_DIGITS} digits")
    if raw.count(b"[") + raw.count(b"{") <= MAX_NESTING_DEPTH:
        return  # too few brackets to nest too deeply: the common case of a small document
    brackets = np.frombuffer(_outside_strings(raw, brackets_only=True), dtype=np.uint8)
    depth = np.cumsum(_BRACKET_STEP[brackets], dtype=np.int32)
    if depth.size and int(depth.max()) > MAX_NESTING_DEPTH:
        raise MetadataError(f"{doc_path}: arrays and objects are nested deeper than {MAX_NESTING_DEPTH} levels")


def load_json_object(raw: bytes | str | Mapping[str, Any], doc_path: str) -> dict[str, Any]:
    """Decode one metadata document that must hold a JSON object; raise MetadataError naming `doc_path`.

    Text documents are parsed within `MAX_DOCUMENT_BYTES`, `MAX_NESTING_DEPTH` and `MAX_NUMBER_DIGITS`;
    an already-decoded mapping (a consolidated entry, which passed those limits) is only copied.
    """
    if isinstance(raw, Mapping):
        return dict(raw)
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")
    elif not isinstance(raw, bytes):
        try:
            raw = bytes(raw)
        except TypeError:
            raise MetadataError(f"{doc_path}: expected document bytes, got {type(raw).__name__}") from None
    _check_limits(raw, doc_path)
    try:
        value = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise MetadataError(f"{doc_path}: not valid UTF-8 ({exc})") from exc
    except json.JSONDecodeError as exc:
        raise MetadataError(f"{doc_path}: not valid JSON ({exc})") from exc
    except (ValueError, RecursionError) as exc:  # the limits above should make these unreachable
        raise MetadataError(f"{doc_path}: not valid JSON within asyncarr's limits ({exc})") from exc
    if not isinstance(value, dict):
        raise MetadataError(f"{doc_path}: expected a JSON object, got {type(value).__name__}")
    return value


def dump_json(document: Any, *, indent: int = 4, sort_keys: bool = False) -> bytes:
    """Encode a document as UTF-8 JSON; NaN in attributes stays bare NaN, as zarr-python writes it.

    A document asyncarr would refuse to read back (over the limits above) is a MetadataError, raised
    before anything is written: consolidating a hierarchy, say, must not leave an unreadable group.
    """
    raw = json.dumps(document, indent=indent, sort_keys=sort_keys, ensure_ascii=True, allow_nan=True).encode()
    _check_limits(raw, "metadata to write (asyncarr would not read it back)")
    return raw


def canonical_json(document: Any) -> str:
    """Return one text per JSON value, for equality that treats NaN attributes as equal."""
    return json.dumps(document, sort_keys=True, allow_nan=True)


def parse_int_tuple(value: Any, field: str, *, minimum: int) -> tuple[int, ...]:
    """Return `value` (a JSON list of ints >= minimum) as a tuple; raise ValueError naming `field`.

    Entries must fit NumPy's index type (below 2**63) and there may be at most `MAX_DIMENSIONS`.
    """
    if not isinstance(value, list | tuple):
        raise ValueError(f"{field!r} must be a list of integers, got {short_repr(value)}")
    if len(value) > MAX_DIMENSIONS:
        raise ValueError(f"{field!r} has {len(value)} dimensions; NumPy arrays have at most {MAX_DIMENSIONS}")
    for item in value:
        if isinstance(item, bool) or not isinstance(item, numbers.Integral):
            raise ValueError(f"{field!r} must be a list of integers, got {short_repr(value)}")
        if item < minimum:
            raise ValueError(f"{field!r} entries must be >= {minimum}, got {short_repr(value)}")
        if item > _MAX_INDEX:
            raise ValueError(f"{field!r} entries must be below 2**63 (NumPy's index range), got {short_repr(value)}")
    return tuple(int(item) for item in value)


def short_repr(value: Any, limit: int = 200) -> str:
    """``repr(value)``, cut to `limit` characters: error messages quote what strangers wrote."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
