"""Process-wide settings: concurrency, codec threads, retries, timeouts and defaults.

Read a value with ``asyncarr.config.get("concurrency")`` or ``asyncarr.config.current()``;
change values with ``asyncarr.config.set(...)``, which applies at once and, used as a
context manager, restores the previous values on exit. ``ASYNCARR_<NAME>`` environment
variables set the defaults when asyncarr is imported.

zarr-python 3's dotted keys work where they mean the same thing (``ZARR_KEYS``):
``set({"async.concurrency": 16})``, ``set(async__concurrency=16)`` (donfig's spelling),
nested dicts (``set({"async": {"concurrency": 16}})``) and ``get("async.concurrency")``.
Keys in ``IGNORED_ZARR_KEYS`` are accepted and change nothing; any other zarr key raises
``TypeError`` naming it and saying why.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from typing import Any

__all__ = ["IGNORED_ZARR_KEYS", "ZARR_KEYS", "Settings", "current", "get", "set"]


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
    """Seconds one attempt of a store request may take (the read timeout)."""
    connect_timeout: float = 5.0
    """Seconds a network store may take to open a connection (TCP and TLS) before the attempt fails."""
    connect_retries: int = 2
    """Retries after a refused connection, a failed DNS lookup or a connect timeout (at most ``retries``):
    an unreachable endpoint fails within seconds instead of after every retry."""
    request_deadline: float = 120.0
    """Seconds one store request may take in all, across its retries and the waits between them."""
    adaptive_concurrency: bool = True
    """Throttling answers (429, 503 SlowDown) halve a store's limit of requests in flight and successes
    grow it back, up to ``concurrency``; False keeps the limit fixed at ``concurrency``."""
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
    """numcodecs ids beyond the built-in allowlist that metadata may build: codecs you registered and trust."""
    max_probed_chunks: int = 100_000
    """Most chunk keys probed one by one where a store cannot list (HTTP); past it, counting refuses."""
    fsync: bool = False
    """Local stores flush each written file and its directory to disk before a write returns, so a
    power cut loses nothing acknowledged (``LocalStore(fsync=...)`` decides for one store)."""
    chunk_cache_bytes: int = 0
    """Budget of the process's decoded-chunk cache, shared by every array and thread (0: off). Reads keep
    whole decoded chunks, least recently used out; this process's writes invalidate what they change."""
    variable_chunk_max_bytes: int = 256 * 1024 * 1024
    """Most bytes a chunk may decompress to when its shape does not fix its size (variable-length
    strings and bytes, shards inside a compressor); a chunk that would inflate further is refused."""
    default_compressor: dict[str, Any] | None = dataclasses.field(
        default_factory=lambda: {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0}
    )
    """The numcodecs config (``codec.get_config()``) that ``compressor="default"`` means; None: no
    compression. ``asyncarr.sync.storage.default_compressor = Zlib()`` (zarr 2's spelling) sets it."""


_VALIDATORS = {
    "concurrency": lambda v: isinstance(v, int) and v >= 1,
    "codec_threads": lambda v: v is None or (isinstance(v, int) and v >= 1),
    "retries": lambda v: isinstance(v, int) and v >= 0,
    "timeout": lambda v: isinstance(v, (int, float)) and v > 0,
    "connect_timeout": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0,
    "connect_retries": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
    "request_deadline": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0,
    "adaptive_concurrency": lambda v: isinstance(v, bool),
    "default_zarr_format": lambda v: v in (2, 3),
    "write_empty_chunks": lambda v: isinstance(v, bool),
    "shard_coalesce_gap": lambda v: isinstance(v, int) and v >= 0,
    "codec_batch_bytes": lambda v: isinstance(v, int) and v >= 1,
    "allow_pickle": lambda v: isinstance(v, bool),
    "max_probed_chunks": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
    "fsync": lambda v: isinstance(v, bool),
    "chunk_cache_bytes": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
    "trusted_codecs": lambda v: isinstance(v, (tuple, list, frozenset)) and all(isinstance(i, str) for i in v),
    "variable_chunk_max_bytes": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1,
    "default_compressor": lambda v: v is None or (isinstance(v, dict) and isinstance(v.get("id"), str)),
}

#: zarr-python 3's config keys that mean what an asyncarr setting means, and that setting.
ZARR_KEYS: dict[str, str] = {
    "async.concurrency": "concurrency",
    "threading.max_workers": "codec_threads",
    "array.write_empty_chunks": "write_empty_chunks",
    "default_zarr_format": "default_zarr_format",
}

#: zarr-python 3's config keys accepted and ignored, each with the reason nothing changes.
IGNORED_ZARR_KEYS: dict[str, str] = {
    "json_indent": "only the layout of metadata documents; their content is the same either way",
    "codec_pipeline.batch_size": "asyncarr batches chunks for its codec threads by bytes (codec_batch_bytes)",
}

#: zarr-python 3's config keys with no asyncarr meaning, each with why (named in the error).
_UNSUPPORTED_ZARR_KEYS: dict[str, str] = {
    "async.timeout": "zarr bounds a whole blocking call; asyncarr's 'timeout' bounds one store request attempt",
    "array.order": "asyncarr has no process-wide default order; pass order='F' when creating an array",
    "array.target_shard_size_bytes": "pass shards= explicitly when creating an array",
    "codec_pipeline.path": "asyncarr's codec pipeline is not pluggable",
    "buffer": "asyncarr's buffers are NumPy arrays and bytes, not pluggable classes",
    "ndbuffer": "asyncarr's buffers are NumPy arrays and bytes, not pluggable classes",
    "codecs": "codec implementations come from asyncarr's registry and the numcodecs allowlist (trusted_codecs)",
}


def _parse_env(name: str, raw: str) -> Any:
    field_type = {f.name: f.type for f in dataclasses.fields(Settings)}[name]
    if raw.lower() in ("none", "") and "None" in str(field_type):
        return None
    if "bool" in str(field_type):
        return raw.strip().lower() in ("1", "true", "yes", "on")
    if "float" in str(field_type):
        return float(raw)
    if "dict" in str(field_type):
        return json.loads(raw)
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
    if callable(getattr(changes.get("default_compressor"), "get_config", None)):
        changes = {**changes, "default_compressor": changes["default_compressor"].get_config()}
    for name, value in changes.items():
        if name not in _VALIDATORS:
            known = ", ".join(sorted(_VALIDATORS))
            raise TypeError(f"unknown asyncarr setting {name!r}; known settings: {known}")
        if not _VALIDATORS[name](value):
            raise ValueError(f"invalid value for asyncarr setting {name!r}: {value!r}")
    if "trusted_codecs" in changes:
        changes = {**changes, "trusted_codecs": tuple(changes["trusted_codecs"])}
    if changes.get("default_compressor") is not None:  # a copy: settings are a snapshot
        changes = {**changes, "default_compressor": dict(changes["default_compressor"])}
    return dataclasses.replace(base, **changes)


_lock = threading.Lock()
_settings = _from_environment()


def current() -> Settings:
    """Return the settings in force now."""
    return _settings


def _flatten(mapping: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"async": {"concurrency": 16}}`` as ``{"async.concurrency": 16}`` (asyncarr names stay as given)."""
    flat: dict[str, Any] = {}
    for key, value in mapping.items():
        if not isinstance(key, str):
            raise TypeError(f"config keys must be strings, got {key!r}")
        name = f"{prefix}{key}"
        if isinstance(value, dict) and name not in _VALIDATORS and not name.startswith("codecs"):
            flat.update(_flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


def _setting_name(key: str) -> str | None:
    """The asyncarr setting a key names (its own name or a zarr dotted key); None for an ignored zarr key."""
    if key in _VALIDATORS:
        return key
    if key in ZARR_KEYS:
        return ZARR_KEYS[key]
    if key in IGNORED_ZARR_KEYS:
        return None
    unsupported = _UNSUPPORTED_ZARR_KEYS.get(key) or _UNSUPPORTED_ZARR_KEYS.get(key.split(".", 1)[0])
    if unsupported is not None:
        raise TypeError(f"zarr config key {key!r} has no asyncarr equivalent: {unsupported}")
    if "." in key:
        zarr_keys = ", ".join(sorted(ZARR_KEYS))
        raise TypeError(f"unknown config key {key!r}; zarr keys asyncarr understands: {zarr_keys}")
    known = ", ".join(sorted(_VALIDATORS))
    raise TypeError(f"unknown asyncarr setting {key!r}; known settings: {known}")


def get(name: str) -> Any:
    """Return the value of one setting, by asyncarr name or zarr dotted key (``"async.concurrency"``);
    a zarr section (``"async"``) gives the dict of its keys that asyncarr understands."""
    if name in _VALIDATORS:  # asyncarr's own names, read per chunk on hot paths: no scan of the zarr keys
        return getattr(_settings, name)
    section = {key[len(name) + 1 :]: value for key, value in ZARR_KEYS.items() if key.startswith(name + ".")}
    if section and name not in _VALIDATORS:
        return {key: getattr(_settings, setting) for key, setting in section.items()}
    setting = _setting_name(name)
    if setting is None:
        raise KeyError(f"zarr config key {name!r} is accepted but ignored by asyncarr: {IGNORED_ZARR_KEYS[name]}")
    return getattr(_settings, setting)


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


def set(arg: dict[str, Any] | None = None, /, **changes: Any) -> _Restore:  # noqa: A001 - mirrors `config.set`
    """Change settings now (keywords, or a dict with zarr's dotted keys); a context manager restores them."""
    global _settings
    given = dict(arg) if arg is not None else {}
    given.update({key.replace("__", "."): value for key, value in changes.items()})
    given = _flatten(given)
    changes = {}
    for key, value in given.items():
        setting = _setting_name(key)
        if setting is not None:
            changes[setting] = value
    with _lock:
        previous = _settings
        _settings = _validated(_settings, changes)
    return _Restore(previous)
