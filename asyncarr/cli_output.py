"""What the ``asyncarr`` command line prints: node descriptions as JSON, metrics tables, one-line errors."""

from __future__ import annotations

import json
import math
import re
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from . import config
from . import sync as za
from .errors import AsyncarrError, NodeNotFoundError

__all__ = [
    "CommandLineError",
    "describe_node",
    "dumps",
    "error_line",
    "json_safe",
    "metrics_table",
    "parse_storage_options",
    "redact_url",
    "secrets_of",
    "tree_of",
    "url_secrets",
]

#: Storage options whose values are never secret, so an error message may show them.
_PUBLIC_OPTIONS = frozenset({"anon", "region", "endpoint_url", "profile", "project", "account_name", "account_url"})


class CommandLineError(AsyncarrError, ValueError):
    """A mistake on the command line that argparse cannot see (a bad ``-o`` pair, a group where an array is needed)."""


def parse_storage_options(pairs: Sequence[str], flag: str = "-o") -> dict[str, Any]:
    """``KEY=VALUE`` pairs as storage options: ``true``/``false``/``null`` and JSON objects as such, the rest text."""
    options: dict[str, Any] = {}
    for number, pair in enumerate(pairs, start=1):
        key, separator, raw = pair.partition("=")
        key = key.strip()
        if not separator or not key:
            # The pair is not echoed: it may be a credential typed without its KEY=.
            raise CommandLineError(
                f"{flag} option number {number} is not KEY=VALUE; write e.g. {flag} anon=true or "
                f"{flag} endpoint_url=http://127.0.0.1:9000"
            )
        options[key] = _option_value(raw)
    return options


def _option_value(raw: str) -> Any:
    """``true``/``false``/``null`` and JSON objects or lists as such; anything else, numbers too, stays a string
    (a project id or a key made of digits must not turn into an int)."""
    words = {"true": True, "false": False, "null": None}
    if raw.strip().lower() in words:
        return words[raw.strip().lower()]
    if raw.lstrip().startswith(("{", "[")):
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            pass
    return raw


def secrets_of(*option_sets: Mapping[str, Any]) -> list[str]:
    """The option values an error message must never show: all but the few known to be public."""
    found = []
    for options in option_sets:
        for key, value in options.items():
            text = str(value)
            if key not in _PUBLIC_OPTIONS and len(text) >= 4 and not isinstance(value, bool | int | float):
                found.append(text)
    return sorted(found, key=len, reverse=True)


def url_secrets(url: str) -> list[str]:
    """The parts of a URL an error message must not show: a password, query values (an Azure SAS token)."""
    parts = urllib.parse.urlsplit(url)
    found = [parts.password] if parts.password else []
    found += [value for _, value in urllib.parse.parse_qsl(parts.query) if len(value) >= 4]
    return found


def redact_url(url: str) -> str:
    """``url`` without its password and query string, fit for a message."""
    parts = urllib.parse.urlsplit(url)
    if not parts.scheme or not (parts.password or parts.query):
        return url
    host = parts.netloc.rpartition("@")[2]
    user = f"{parts.username}@" if parts.username else ""
    return urllib.parse.urlunsplit((parts.scheme, user + host, parts.path, "", ""))


_API_OPTION = re.compile(r"""storage_options=\{["'](\w+)["']: (True|False|["'](\w+)["'])\}""")


def _as_flag(match: re.Match[str], copying: bool) -> str:
    value = match[3] if match[3] is not None else match[2].lower()
    return f"-o {match[1]}={value}" + (" (-O for the destination)" if copying else "")


def error_line(exc: BaseException, secrets: Iterable[str] = (), command: str | None = None) -> str:
    """``asyncarr: <message>``: one line naming what went wrong and, where it helps, what to do."""
    if isinstance(exc, KeyboardInterrupt):
        return "asyncarr: interrupted"
    if isinstance(exc, NodeNotFoundError | CommandLineError) or not isinstance(exc, KeyError):
        message = str(exc)
    else:  # KeyError's str() is the repr of its key
        message = f"not found: {exc.args[0] if exc.args else ''}"
    message = " ".join(message.split()) or type(exc).__name__
    if isinstance(exc, NodeNotFoundError):
        message += " (check the URL, and --path for a node inside the store)"
    elif isinstance(exc, ImportError):
        message += " (install the extra for this store, e.g. pip install 'asyncarr[s3]')"
    elif not isinstance(exc, AsyncarrError | OSError | ValueError | LookupError | TypeError):
        message = f"internal error: {type(exc).__name__}: {message} (run again with --debug for the traceback)"
    # The stores' hints speak Python (storage_options={"anon": True}); on the command line that is -o anon=true.
    message = _API_OPTION.sub(lambda match: _as_flag(match, command == "cp"), message)
    for secret in secrets:
        message = message.replace(secret, "***")
    return f"asyncarr: {message}"


def json_safe(value: Any) -> Any:
    """``value`` as JSON values: NumPy's as Python's, non-finite floats as Zarr's strings, datetimes in ISO 8601,
    bytes as text of one character per byte (latin-1)."""
    if isinstance(value, np.ndarray | np.datetime64) and value.dtype.kind == "M":
        return json_safe(np.datetime_as_string(value))  # ISO 8601, NaT as "NaT"
    if isinstance(value, np.ndarray):
        return json_safe(value.tolist())
    if isinstance(value, np.generic):
        return json_safe(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, complex):
        return [json_safe(value.real), json_safe(value.imag)]
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, Mapping):
        return {str(key): json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(item) for item in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def dumps(document: Any) -> str:
    """Strict JSON (no NaN), keys in the order they were built."""
    return json.dumps(json_safe(document), allow_nan=False)


def _codecs(array: za.Array, stored: Mapping[str, Any]) -> list[Any]:
    if array.zarr_format == 3:
        return list(stored.get("codecs") or [])
    return [*(stored.get("filters") or []), *([stored["compressor"]] if stored.get("compressor") else [])]


def _stored_sizes(array: za.Array) -> tuple[int | None, int | None]:
    """``(nchunks_initialized, nbytes_stored)``, or Nones where ``info`` says "unknown" (a store that cannot list)."""
    grid = math.prod(
        -(-extent // chunk) for extent, chunk in zip(array.shape, array.shards or array.chunks, strict=True)
    )
    if getattr(array.store, "supports_listing", True) or grid <= config.get("max_probed_chunks"):
        return array.nchunks_initialized, array.nbytes_stored
    return None, None


def describe_node(node: za.Array | za.Group) -> dict[str, Any]:
    """The JSON ``info --json`` prints: an array's metadata and sizes, or a group's attributes and members."""
    if isinstance(node, za.Group):
        members = [{"name": name, "kind": _kind(child)} for name, child in node.members()]
        return {
            "name": node.name,
            "kind": "group",
            "zarr_format": node.zarr_format,
            "attributes": dict(node.attrs),
            "members": members,
        }
    stored = node.metadata.to_json()
    nchunks_initialized, nbytes_stored = _stored_sizes(node)
    return {
        "name": node.name,
        "kind": "array",
        "zarr_format": node.zarr_format,
        "shape": list(node.shape),
        "dtype": str(node.dtype),
        "chunks": list(node.chunks),
        "shards": list(node.shards) if node.shards else None,
        "order": node.order,
        "fill_value": stored.get("fill_value"),
        "codecs": _codecs(node, stored),
        "attributes": dict(node.attrs),
        "nbytes": int(node.nbytes),
        "nbytes_stored": nbytes_stored,
        "nchunks": int(node.nchunks),
        "nchunks_initialized": nchunks_initialized,
    }


def _kind(node: za.Array | za.Group) -> str:
    return "group" if isinstance(node, za.Group) else "array"


def _array_entry(name: str, array: za.Array) -> dict[str, Any]:
    return {"name": name, "kind": "array", "shape": list(array.shape), "dtype": str(array.dtype),
            "chunks": list(array.chunks)}  # fmt: skip


def _group_entry(name: str) -> dict[str, Any]:
    return {"name": name, "kind": "group", "members": []}


def tree_of(group: za.Group) -> dict[str, Any]:
    """The JSON ``tree --json`` prints: ``{name, kind, members}`` nested, arrays with shape, dtype and chunks."""
    root = _group_entry(group.basename or "/")
    groups = {"": root}
    # members(None) lists level by level, each level sorted: a parent always comes before its children.
    for path, node in group.members(max_depth=None):
        parent, _, name = path.rpartition("/")
        entry = _array_entry(name, node) if isinstance(node, za.Array) else _group_entry(name)
        groups[parent]["members"].append(entry)
        if entry["kind"] == "group":
            groups[path] = entry
    return root


def _scalar(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _flatten(prefix: str, value: Any, rows: list[tuple[str, str]]) -> None:
    if isinstance(value, Mapping) and prefix and not any(isinstance(item, Mapping) for item in value.values()):
        rows.append((prefix, " ".join(f"{key}={_scalar(item)}" for key, item in value.items()) or "-"))
    elif isinstance(value, Mapping):
        for key, item in value.items():
            _flatten(f"{prefix}.{key}" if prefix else str(key), item, rows)
    else:
        rows.append((prefix, _scalar(value)))


def metrics_table(metrics: Mapping[str, Any]) -> str:
    """A metrics dict as aligned ``name  value`` lines: nested names joined with dots, a dict of numbers on one
    line (``requests  get=3 list=1``)."""
    rows: list[tuple[str, str]] = []
    _flatten("", metrics, rows)
    if not rows:
        return "no store metrics"
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)
