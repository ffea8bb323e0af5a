"""The blocking facade's zarr-style module functions (``open``, ``zeros``, ``save``, ...).

Each runs its `asyncarr.api` coroutine on the facade's loop thread and wraps the node it
returns in `asyncarr.sync.Array` or `asyncarr.sync.Group`. Import them from `asyncarr.sync`,
which re-exports every one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import api
from .sync_loop import _opened_stores, _run

if TYPE_CHECKING:
    from .array import AsyncArray
    from .group import AsyncGroup
    from .sync import Array, Group

__all__ = [
    "array",
    "consolidate_metadata",
    "create",
    "empty",
    "empty_like",
    "full",
    "full_like",
    "group",
    "load",
    "ones",
    "ones_like",
    "open",
    "open_array",
    "open_group",
    "save",
    "zeros",
    "zeros_like",
]


def _wrap(node: AsyncArray | AsyncGroup) -> Array | Group:
    _opened_stores.add(node.store)
    # node.sync() builds the facade class; importing asyncarr.sync here would be circular.
    return node.sync()


def open(store: Any = None, mode: str = "a", **kwargs: Any) -> Array | Group:  # noqa: A001
    """Open an array or group; create an array if ``shape`` is given, else a group."""
    return _wrap(_run(api.open(store, mode, **kwargs)))


def open_array(store: Any = None, mode: str = "a", **kwargs: Any) -> Array:
    """Open an array, creating it in modes 'a', 'w' and 'w-'."""
    return _wrap(_run(api.open_array(store, mode, **kwargs)))  # type: ignore[return-value]


def open_group(store: Any = None, mode: str = "a", **kwargs: Any) -> Group:
    """Open a group, creating it in modes 'a', 'w' and 'w-'."""
    return _wrap(_run(api.open_group(store, mode, **kwargs)))  # type: ignore[return-value]


def create(shape: Any, **kwargs: Any) -> Array:
    """Create a new array (in memory unless ``store`` is given)."""
    return _wrap(_run(api.create(shape, **kwargs)))  # type: ignore[return-value]


def zeros(shape: Any, **kwargs: Any) -> Array:
    """Create an array of zeros."""
    return _wrap(_run(api.zeros(shape, **kwargs)))  # type: ignore[return-value]


def ones(shape: Any, **kwargs: Any) -> Array:
    """Create an array of ones."""
    return _wrap(_run(api.ones(shape, **kwargs)))  # type: ignore[return-value]


def full(shape: Any, fill_value: Any, **kwargs: Any) -> Array:
    """Create an array filled with ``fill_value``."""
    return _wrap(_run(api.full(shape, fill_value, **kwargs)))  # type: ignore[return-value]


def empty(shape: Any, **kwargs: Any) -> Array:
    """Create an array whose unwritten elements read as the default fill value."""
    return _wrap(_run(api.empty(shape, **kwargs)))  # type: ignore[return-value]


def array(data: Any, **kwargs: Any) -> Array:
    """Create an array holding a copy of ``data``."""
    return _wrap(_run(api.array(data, **kwargs)))  # type: ignore[return-value]


def zeros_like(a: Any, **kwargs: Any) -> Array:
    """A new array of zeros shaped like ``a``."""
    return _wrap(_run(api.zeros_like(a, **kwargs)))  # type: ignore[return-value]


def ones_like(a: Any, **kwargs: Any) -> Array:
    """A new array of ones shaped like ``a``."""
    return _wrap(_run(api.ones_like(a, **kwargs)))  # type: ignore[return-value]


def full_like(a: Any, fill_value: Any = None, **kwargs: Any) -> Array:
    """A new array shaped like ``a`` filled with ``fill_value``."""
    return _wrap(_run(api.full_like(a, fill_value, **kwargs)))  # type: ignore[return-value]


def empty_like(a: Any, **kwargs: Any) -> Array:
    """A new empty array with the shape, chunks, dtype and codecs of ``a``."""
    return _wrap(_run(api.empty_like(a, **kwargs)))  # type: ignore[return-value]


def group(store: Any = None, **kwargs: Any) -> Group:
    """Open the group in ``store``, creating it if missing."""
    return _wrap(_run(api.group(store, **kwargs)))  # type: ignore[return-value]


def save(store: Any, *arrays: Any, **kwargs: Any) -> None:
    """Save one array as an array, or several as a group."""
    _run(api.save(store, *arrays, **kwargs))


def load(store: Any, **kwargs: Any) -> Any:
    """Read an array into an ndarray, or a group into ``{name: ndarray}``."""
    return _run(api.load(store, **kwargs))


def consolidate_metadata(store: Any, **kwargs: Any) -> Group:
    """Gather every node's metadata below a group into one document."""
    return _wrap(_run(api.consolidate_metadata(store, **kwargs)))  # type: ignore[return-value]
