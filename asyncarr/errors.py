"""The exception hierarchy: every error asyncarr raises on purpose is one of these."""

from __future__ import annotations

__all__ = [
    "AccessDeniedError",
    "ArrayNotFoundError",
    "AsyncarrError",
    "CodecError",
    "ContainsArrayError",
    "ContainsGroupError",
    "CopyError",
    "GroupNotFoundError",
    "MetadataError",
    "NodeNotFoundError",
    "ReadOnlyError",
    "StoreError",
]


class AsyncarrError(Exception):
    """Base class of every asyncarr error."""


class NodeNotFoundError(AsyncarrError, KeyError):
    """No array or group exists at the requested path."""

    def __str__(self) -> str:
        # KeyError.__str__ repr()s its argument; show the message as written.
        return str(self.args[0]) if self.args else ""


class ArrayNotFoundError(NodeNotFoundError):
    """No array exists at the requested path."""


class GroupNotFoundError(NodeNotFoundError):
    """No group exists at the requested path."""


class ContainsArrayError(AsyncarrError, ValueError):
    """An array already exists where a group (or a new node) was requested."""


class ContainsGroupError(AsyncarrError, ValueError):
    """A group already exists where an array (or a new node) was requested."""


class ReadOnlyError(AsyncarrError, PermissionError):
    """A write was attempted on a read-only store, array or group."""


class MetadataError(AsyncarrError, ValueError):
    """Metadata is missing, corrupt or invalid; the message names the key and the problem."""


class CodecError(AsyncarrError, ValueError):
    """A chunk could not be encoded or decoded; the message names the chunk key."""


class StoreError(AsyncarrError, OSError):
    """A store request failed after its retries; the cause is chained."""


class AccessDeniedError(StoreError, PermissionError):
    """The store refused the request (HTTP 401/403 or a filesystem permission error)."""


class CopyError(AsyncarrError, RuntimeError):
    """A copy would overwrite or mix with what is at its destination (zarr 2's ``zarr.CopyError``)."""
