"""MemoryStore: values in a dict, reachable by name (``memory://NAME``) from anywhere in the process.

Stores created with a ``name`` share one dict per name for the life of the process, so
``from_url("memory://scratch")`` reaches what an earlier ``memory://scratch`` wrote even after
that handle is gone. Anonymous stores get a unique name and live only while a handle does.

Pickling copies the values. Unpickled in this process, a store finds the live dict by its name
and the copy is dropped; in another process the copy seeds a dict of that name, and whatever is
written there stays in that process. So arrays and groups warn when they are pickled writable
on a MemoryStore (`asyncarr.nodes.warn_if_pickled_writes_stay_behind`); the store alone pickles
silently, as every store does.
"""

from __future__ import annotations

import threading
import uuid
import weakref
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any

from .base import ByteRange, Store, _normalize_prefix, validate_key

__all__ = ["MemoryStore"]


class _Contents(dict[str, bytes]):
    """The values of one memory store (a dict subclass, so the anonymous registry can hold it weakly)."""


_registry_lock = threading.Lock()
_named_contents: dict[str, _Contents] = {}
_anonymous_contents: weakref.WeakValueDictionary[str, _Contents] = weakref.WeakValueDictionary()


def _contents_for(name: str, anonymous: bool, initial: dict[str, bytes] | None = None) -> _Contents:
    """Return the live contents registered under ``name``, registering ``initial`` if there are none."""
    with _registry_lock:
        contents = _named_contents.get(name)
        if contents is None:
            contents = _anonymous_contents.get(name)
        if contents is None:
            contents = _Contents(initial or {})
            if anonymous:
                _anonymous_contents[name] = contents
            else:
                _named_contents[name] = contents
        return contents


class MemoryStore(Store):
    """Keys and values in memory; handles with the same ``name`` share the same data."""

    def __init__(self, *, read_only: bool = False, name: str | None = None) -> None:
        super().__init__(read_only=read_only)
        if name is not None and (not isinstance(name, str) or not name.strip("/")):
            raise ValueError(f"MemoryStore name must be a non-empty string, got {name!r}")
        self._anonymous = name is None
        self._name = uuid.uuid4().hex if name is None else name.strip("/")
        self._contents = _contents_for(self._name, self._anonymous)

    @property
    def name(self) -> str:
        """The name under which ``memory://NAME`` reaches this store's data."""
        return self._name

    @property
    def location(self) -> str:
        """``memory://`` followed by the store's name."""
        return f"memory://{self._name}"

    def __getstate__(self) -> dict[str, Any]:
        return {
            "name": self._name,
            "anonymous": self._anonymous,
            "read_only": self.read_only,
            "contents": dict(self._contents),
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        # In the same process the live data wins; in another process the pickled copy seeds it.
        Store.__init__(self, read_only=state["read_only"])
        self._name = state["name"]
        self._anonymous = state["anonymous"]
        self._contents = _contents_for(self._name, self._anonymous, state["contents"])

    # -- the Store interface -----------------------------------------------------------

    supports_sync_io = True

    async def get(self, key: str, byte_range: ByteRange | None = None) -> bytes | None:
        """Return the value at ``key`` (or part of it), or None if there is none."""
        return self.get_sync(key, byte_range)

    def get_sync(self, key: str, byte_range: ByteRange | None = None) -> bytes | None:
        """Blocking ``get`` (a dict lookup)."""
        value = self._contents.get(validate_key(key))
        if value is None or byte_range is None:
            return value
        return byte_range.apply(value)

    def set_sync(self, key: str, value: bytes) -> None:
        """Blocking ``set`` (a dict assignment)."""
        self._check_writable()
        self._contents[validate_key(key)] = value if type(value) is bytes else bytes(value)

    def delete_sync(self, key: str) -> None:
        """Blocking ``delete`` (a dict removal)."""
        self._check_writable()
        self._contents.pop(validate_key(key), None)

    async def get_many(self, requests: Iterable[tuple[str, ByteRange | None]]) -> list[bytes | None]:
        """Return many values; nothing to wait for, so no tasks are spawned."""
        return [await self.get(key, byte_range) for key, byte_range in requests]

    async def set(self, key: str, value: bytes) -> None:
        """Store a copy of ``value`` at ``key``."""
        self.set_sync(key, value)

    async def set_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        """Store many values."""
        for key, value in items:
            await self.set(key, value)

    async def delete(self, key: str) -> None:
        """Remove ``key``; a missing key is not an error."""
        self.delete_sync(key)

    async def exists(self, key: str) -> bool:
        """Whether a value is stored at ``key``."""
        return validate_key(key) in self._contents

    async def getsize(self, key: str) -> int | None:
        """Length of the value at ``key``, or None if missing."""
        value = self._contents.get(validate_key(key))
        return None if value is None else len(value)

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        """Yield every key below ``prefix``."""
        prefix = _normalize_prefix(prefix)
        for key in list(self._contents):
            if key.startswith(prefix):
                yield key

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        """Yield the names of the immediate children of ``prefix``, each once."""
        prefix = _normalize_prefix(prefix)
        children = {key[len(prefix) :].split("/", 1)[0]: None for key in list(self._contents) if key.startswith(prefix)}
        for child in children:
            yield child

    async def delete_prefix(self, prefix: str) -> None:
        """Delete every key below ``prefix`` ('' deletes everything)."""
        self._check_writable()
        prefix = _normalize_prefix(prefix)
        if not prefix:
            self._contents.clear()
            return
        for key in [key for key in list(self._contents) if key.startswith(prefix)]:
            self._contents.pop(key, None)
