"""Process-wide settings: concurrency, codec threads, retries, timeouts and defaults.

Read a value with ``asyncarr.config.get("concurrency")`` or ``asyncarr.config.current()``;
change values with ``asyncarr.config.set(...)``, which applies at once and, used as a
context manager, restores the previous values on exit. ``ASYNCARR_<NAME>`` environment
variables set the defaults when asyncarr is imported.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from typing import Any

__all__ = ["Settings", "current", "get", "set"]


@dataclasses.dataclass(frozen=True)
class Settings:
    """One immutable snapshot of every setting."""

    concurrency: int = 64
    """Most store requests in flight at once, per store (shared by every call using it)."""
    codec_threads: int | None = None
    """Threads that encode and decode chunks; None means one per CPU."""
    retries: int = 10
    """Retries after the first attempt of a failed store request."""
    timeout: float = 30.0
    """Seconds one attempt of a store request may take."""
    default_zarr_format: int = 3
    """Format of newly created nodes when ``zarr_format`` is not given."""
    write_empty_chunks: bool = False
    """Store chunks that equal the fill value (False deletes them instead)."""
    shard_coalesce_gap: int = 65536
    """Byte ranges in one shard closer than this are fetched with one request."""
    codec_batch_bytes: int = 4 * 1024 * 1024
    """Chunks are decoded in batches of about this many bytes per thread-pool hop."""
    allow_pickle: bool = False
    """Build the ``pickle`` codec from metadata: unpickling runs code the data's author chose."""
    trusted_codecs: tuple[str, ...] = ()
    max_probed_chunks: int = 100_000
    """Most chunk keys probed one by one where a store cannot list (HTTP); past it, counting refuses."""
    """numcodecs ids beyond the built-in allowlist that metadata may build: codecs you registered and trust."""
    variable_chunk_max_bytes: int = 256 * 1024 * 1024
    """Most bytes a chunk may decompress to when its shape does not fix its size (variable-length
    strings and bytes, shards inside a compressor); a chunk that would inflate further is refused."""


_VALIDATORS = {
    "concurrency": lambda v: isinstance(v, int) and v >= 1,
    "codec_threads": lambda v: v is None or (isinstance(v, int) and v >= 1),
    "retries": lambda v: isinstance(v, int) and v >= 0,
    "timeout": lambda v: isinstance(v, (int, float)) and v > 0,
    "default_zarr_format": lambda v: v in (2, 3),
    "write_empty_chunks": lambda v: isinstance(v, bool),
    "shard_coalesce_gap": lambda v: isinstance(v, int) and v >= 0,
    "codec_batch_bytes": lambda v: isinstance(v, int) and v >= 1,
    "allow_pickle": lambda v: isinstance(v, bool),
    "max_probed_chunks": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
    "trusted_codecs": lambda v: isinstance(v, (tuple, list, frozenset)) and all(isinstance(i, str) for i in v),
    "variable_chunk_max_bytes": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1,
}


def _parse_env(name: str, raw: str) -> Any:
    field_type = {f.name: f.type for f in dataclasses.fields(Settings)}[name]
    if raw.lower() in ("none", "") and "None" in str(field_type):
        return None
    if "bool" in str(field_type):
        return raw.strip().lower() in ("1", "true", "yes", "on")
    if "float" in str(field_type):
        return float(raw)
    if "tuple" in str(field_type):
        return tuple(part.strip() for part in raw.split(",") if part.strip())
    return int(raw)


def _from_environment() -> Settings:
    values = {}
    for field in dataclasses.fields(Settings):
        raw = os.environ.get(f"ASYNCARR_{field.name.upper()}")
        if raw is not None:
            try:
                values[field.name] = _parse_env(field.name, raw)
            except ValueError as exc:
                raise ValueError(
                    f"environment variable ASYNCARR_{field.name.upper()}={raw!r} is not a valid {field.name}: {exc}"
                ) from None
    return _validated(Settings(), values)


def _validated(base: Settings, changes: dict[str, Any]) -> Settings:
    for name, value in changes.items():
        if name not in _VALIDATORS:
            known = ", ".join(sorted(_VALIDATORS))
            raise TypeError(f"unknown asyncarr setting {name!r}; known settings: {known}")
        if not _VALIDATORS[name](value):
            raise ValueError(f"invalid value for asyncarr setting {name!r}: {value!r}")
    if "trusted_codecs" in changes:
        changes = {**changes, "trusted_codecs": tuple(changes["trusted_codecs"])}
    return dataclasses.replace(base, **changes)


_lock = threading.Lock()
_settings = _from_environment()


def current() -> Settings:
    """Return the settings in force now."""
    return _settings


def get(name: str) -> Any:
    """Return the value of one setting."""
    return getattr(_settings, name)


class _Restore:
    """Returned by `set`: a context manager that puts the previous settings back on exit."""

    def __init__(self, previous: Settings) -> None:
        self._previous = previous

    def __enter__(self) -> Settings:
        return _settings

    def __exit__(self, *exc_info: object) -> None:
        global _settings
        with _lock:
            _settings = self._previous


def set(**changes: Any) -> _Restore:  # noqa: A001 - mirrors the documented `config.set`
    """Change settings now; use as a context manager to restore them afterwards."""
    global _settings
    with _lock:
        previous = _settings
        _settings = _validated(_settings, changes)
    return _Restore(previous)
