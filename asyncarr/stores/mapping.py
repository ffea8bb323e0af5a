"""MappingStore: any MutableMapping of str to bytes (a dict, ``zict.Zip``, ...) as a store.

Calls run inline on the event loop: user mappings are rarely thread-safe, and most of them
(dicts) never block.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, MutableMapping
from typing import Any

from ..errors import AccessDeniedError, StoreError
from .base import ByteRange, Store, _normalize_prefix, validate_key

__all__ = ["MappingStore"]


class MappingStore(Store):
    """A store over a user's MutableMapping; values come back as bytes."""

    def __init__(self, mapping: MutableMapping[str, Any], *, read_only: bool = False) -> None:
        if not isinstance(mapping, MutableMapping):
            raise TypeError(f"MappingStore needs a MutableMapping, got {type(mapping).__name__}")
        super().__init__(read_only=read_only)
        self._mapping = mapping

    @property
    def mapping(self) -> MutableMapping[str, Any]:
        """The wrapped mapping."""
        return self._mapping

    @property
    def location(self) -> str:
        """``mapping://<TypeName>-<hex id>``: two stores over one mapping share it."""
        return f"mapping://{type(self._mapping).__name__}-{id(self._mapping):x}"

    async def close(self) -> None:
        """Close the mapping if it has ``close`` (e.g. ``zict.Zip``), else flush it if it has ``flush``."""
        finish = getattr(self._mapping, "close", None) or getattr(self._mapping, "flush", None)
        if callable(finish):
            try:
                finish()
            except OSError as exc:
                raise self._error("", exc) from exc

    # -- the Store interface -----------------------------------------------------------

    async def get(self, key: str, byte_range: ByteRange | None = None) -> bytes | None:
        """Return ``mapping[key]`` as bytes (or part of it), or None if the key is missing."""
        validate_key(key)
        try:
            value = self._mapping[key]
        except KeyError:
            return None
        except OSError as exc:
            raise self._error(key, exc) from exc
        if type(value) is not bytes:
            value = memoryview(value).tobytes()
        return value if byte_range is None else byte_range.apply(value)

    async def set(self, key: str, value: bytes) -> None:
        """Set ``mapping[key] = value``."""
        self._check_writable()
        validate_key(key)
        try:
            self._mapping[key] = value
        except OSError as exc:
            raise self._error(key, exc) from exc

    async def delete(self, key: str) -> None:
        """Delete ``mapping[key]``; a missing key is not an error."""
        self._check_writable()
        validate_key(key)
        try:
            if key in self._mapping:
                del self._mapping[key]
        except KeyError:
            pass
        except OSError as exc:
            raise self._error(key, exc) from exc

    async def exists(self, key: str) -> bool:
        """Whether ``key in mapping``."""
        validate_key(key)
        try:
            return key in self._mapping
        except OSError as exc:
            raise self._error(key, exc) from exc

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        """Yield every key of the mapping below ``prefix``."""
        prefix = _normalize_prefix(prefix)
        for key in self._keys(prefix):
            if key.startswith(prefix):
                yield key

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        """Yield the names of the immediate children of ``prefix``, each once."""
        prefix = _normalize_prefix(prefix)
        children = {key[len(prefix) :].split("/", 1)[0]: None for key in self._keys(prefix) if key.startswith(prefix)}
        for child in children:
            yield child

    # -- helpers -------------------------------------------------------------------------

    def _keys(self, prefix: str) -> list[str]:
        """A snapshot of the mapping's keys, so it may change while a listing is consumed."""
        try:
            return [key for key in list(self._mapping) if isinstance(key, str)]
        except OSError as exc:
            raise self._error(prefix, exc) from exc

    def _error(self, key: str, exc: OSError) -> StoreError:
        """Map an OSError raised by the mapping to the asyncarr error naming the URL."""
        url = self.key_url(key)
        reason = exc.strerror or str(exc)
        if isinstance(exc, PermissionError):
            return AccessDeniedError(f"{url}: permission denied ({reason})")
        return StoreError(f"{url}: {reason}")
