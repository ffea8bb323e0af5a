"""The blocking facade: zarr's familiar API, each call run on asyncarr's own event-loop thread.

All behaviour lives in the async classes; this module only forwards. One daemon thread
runs one event loop for the whole process, so the facade works from plain scripts, from
many threads at once and from inside a running event loop (a Jupyter cell, an async web
handler). After ``os.fork`` the child starts a fresh loop thread on first use.

Reads from local and memory stores skip the loop: they run in the calling thread (see
`AsyncArray.read_blocking`), so a small read costs no thread hand-offs and reads from many
threads decode in parallel.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import threading
import weakref
from collections.abc import AsyncIterator, Coroutine, Iterator, MutableMapping
from typing import Any, TypeVar

import numpy as np
from numcodecs import blosc

from . import api
from .array import AsyncArray
from .group import AsyncGroup
from .locks import ProcessSynchronizer, ThreadSynchronizer
from .stores.base import Store

__all__ = [
    "Array",
    "Attributes",
    "Group",
    "ProcessSynchronizer",
    "ThreadSynchronizer",
    "array",
    "blosc",
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

T = TypeVar("T")


class _LoopThread:
    """The facade's one event loop, running forever in a daemon thread of this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def _ensure_running(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="asyncarr-sync-loop", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the loop thread and block until it finishes."""
        loop = self._ensure_running()
        if threading.current_thread() is self._thread:
            coroutine.close()
            raise RuntimeError(
                "asyncarr.sync was called from asyncarr's own event-loop thread, which would deadlock; "
                "inside async code use the async API (await asyncarr.open_array(...), await z.getitem(...))"
            )
        future = asyncio.run_coroutine_threadsafe(coroutine, loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    def is_current_thread(self) -> bool:
        """Whether the caller is the loop thread itself."""
        return threading.current_thread() is self._thread

    def forget_after_fork(self) -> None:
        """In a forked child the loop thread does not exist: start a new one on next use."""
        self._lock = threading.Lock()
        self._loop = None
        self._thread = None


_loop_thread = _LoopThread()
os.register_at_fork(after_in_child=_loop_thread.forget_after_fork)
_opened_stores: weakref.WeakSet[Store] = weakref.WeakSet()


def _run(coroutine: Coroutine[Any, Any, T]) -> T:
    return _loop_thread.run(coroutine)


_READ_COROUTINES = {
    "getitem": AsyncArray.getitem,
    "basic": AsyncArray.get_basic_selection,
    "orthogonal": AsyncArray.get_orthogonal_selection,
    "coordinate": AsyncArray.get_coordinate_selection,
    "mask": AsyncArray.get_mask_selection,
}


def _read(array: AsyncArray, kind: str, selection: Any) -> Any:
    """One read: in this thread when the store does blocking I/O, on the loop thread otherwise."""
    if array.reads_blocking and not _loop_thread.is_current_thread():
        result = array.read_blocking(kind, selection)
        if result is not NotImplemented:
            return result
    return _run(_READ_COROUTINES[kind](array, selection))


def _close_opened_stores() -> None:
    # Finalises zip files and closes cloud sessions that scripts never closed themselves.
    for store in list(_opened_stores):
        try:
            _run(store.close())
        except Exception:
            pass


atexit.register(_close_opened_stores)


async def _collect(iterator: AsyncIterator[T]) -> list[T]:
    return [item async for item in iterator]


def _wrap(node: AsyncArray | AsyncGroup) -> Array | Group:
    _opened_stores.add(node.store)
    return Array(node) if isinstance(node, AsyncArray) else Group(node)


class Attributes(MutableMapping[str, Any]):
    """User attributes of an array or group; assignments write through to the store."""

    def __init__(self, node: AsyncArray | AsyncGroup) -> None:
        self._node = node

    def __getitem__(self, key: str) -> Any:
        return self._node.metadata.attributes[key]

    def __setitem__(self, key: str, value: Any) -> None:
        _run(self._node.update_attributes({key: value}))

    def __delitem__(self, key: str) -> None:
        remaining = dict(self._node.metadata.attributes)
        del remaining[key]
        _run(self._node.set_attributes(remaining))

    def __iter__(self) -> Iterator[str]:
        return iter(dict(self._node.metadata.attributes))

    def __len__(self) -> int:
        return len(self._node.metadata.attributes)

    def update(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        """Set several attributes with one write."""
        _run(self._node.update_attributes(dict(*args, **kwargs)))

    def asdict(self) -> dict[str, Any]:
        """A plain dict copy of the attributes."""
        return dict(self._node.metadata.attributes)

    def __repr__(self) -> str:
        return repr(self.asdict())


def _forward(name: str, doc: str) -> property:
    return property(lambda self: getattr(self._node, name), doc=doc)


class Array:
    """A Zarr array with NumPy-style indexing; ``Array(store)`` opens the array in ``store``."""

    def __init__(
        self,
        store: Any = None,
        path: str | None = None,
        read_only: bool = False,
        synchronizer: Any = None,
        *,
        storage_options: dict[str, Any] | None = None,
    ) -> None:
        if isinstance(store, AsyncArray):
            self.async_array = store
        else:
            mode = "r" if read_only else "r+"
            opened = _run(
                api.open_array(store, mode, path=path, synchronizer=synchronizer, storage_options=storage_options)
            )
            self.async_array = opened
            _opened_stores.add(opened.store)

    @property
    def _node(self) -> AsyncArray:
        return self.async_array

    shape = _forward("shape", "The array's shape.")
    chunks = _forward("chunks", "The shape of one chunk (inner chunks of a sharded array).")
    shards = _forward("shards", "The shape of one shard, or None without sharding.")
    dtype = _forward("dtype", "The NumPy data type.")
    ndim = _forward("ndim", "Number of dimensions.")
    size = _forward("size", "Number of elements.")
    nbytes = _forward("nbytes", "Uncompressed size in bytes.")
    fill_value = _forward("fill_value", "Value of elements never written.")
    order = _forward("order", "Memory layout inside chunks: 'C' or 'F'.")
    zarr_format = _forward("zarr_format", "2 or 3.")
    path = _forward("path", "Path inside the store.")
    name = _forward("name", "Absolute name in the hierarchy, e.g. '/foo/bar'.")
    basename = _forward("basename", "Last part of the name.")
    store = _forward("store", "The store holding the array.")
    metadata = _forward("metadata", "The parsed metadata.")
    compressor = _forward("compressor", "The compressor codec, or None.")
    filters = _forward("filters", "Filter codecs applied before compression.")
    read_only = _forward("read_only", "Whether writes are refused.")
    nchunks = _forward("nchunks", "Number of chunks in the grid.")
    cdata_shape = _forward("cdata_shape", "Number of chunks along each dimension.")
    synchronizer = _forward("synchronizer", "The process synchronizer, if any.")

    @property
    def attrs(self) -> Attributes:
        """User attributes; assignments write through."""
        return Attributes(self.async_array)

    @property
    def info(self) -> Any:
        """The summary table shown by the Zarr tutorials."""
        return _run(self.async_array.info("asyncarr.sync.Array"))

    @property
    def nchunks_initialized(self) -> int:
        """How many chunks are stored."""
        return _run(self.async_array.nchunks_initialized())

    @property
    def nbytes_stored(self) -> int:
        """Bytes stored for this array, metadata included."""
        return _run(self.async_array.nbytes_stored())

    def __getitem__(self, selection: Any) -> Any:
        return _read(self.async_array, "getitem", selection)

    def __setitem__(self, selection: Any, value: Any) -> None:
        _run(self.async_array.setitem(selection, value))

    @property
    def oindex(self) -> OIndex:
        """Orthogonal selection: ``z.oindex[[0, 2], :]`` indexes each axis on its own."""
        return OIndex(self.async_array)

    @property
    def vindex(self) -> VIndex:
        """Pointwise selection: ``z.vindex[[0, 1], [2, 3]]`` or ``z.vindex[mask]``."""
        return VIndex(self.async_array)

    def get_orthogonal_selection(self, selection: Any) -> Any:
        """Read an orthogonal selection."""
        return _read(self.async_array, "orthogonal", selection)

    def set_orthogonal_selection(self, selection: Any, value: Any) -> None:
        """Write an orthogonal selection."""
        _run(self.async_array.set_orthogonal_selection(selection, value))

    def get_coordinate_selection(self, selection: Any) -> Any:
        """Read the points of a coordinate selection."""
        return _read(self.async_array, "coordinate", selection)

    def set_coordinate_selection(self, selection: Any, value: Any) -> None:
        """Write the points of a coordinate selection."""
        _run(self.async_array.set_coordinate_selection(selection, value))

    def get_mask_selection(self, mask: Any) -> Any:
        """Read where a boolean mask of the array's shape is true."""
        return _read(self.async_array, "mask", mask)

    def set_mask_selection(self, mask: Any, value: Any) -> None:
        """Write where a boolean mask of the array's shape is true."""
        _run(self.async_array.set_mask_selection(mask, value))

    def get_basic_selection(self, selection: Any = Ellipsis) -> Any:
        """Read a NumPy basic selection (ints, slices, Ellipsis) only."""
        return _read(self.async_array, "basic", selection)

    def set_basic_selection(self, selection: Any, value: Any) -> None:
        """Write a NumPy basic selection only."""
        _run(self.async_array.set_basic_selection(selection, value))

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        data = np.asarray(self[...])
        return data if dtype is None else data.astype(dtype, copy=False)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __iter__(self) -> Iterator[Any]:
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        step = self.chunks[0] or 1
        for start in range(0, self.shape[0], step):
            yield from self[start : start + step]

    def resize(self, *shape: int | tuple[int, ...]) -> None:
        """Change the shape; chunks wholly outside it are deleted."""
        _run(self.async_array.resize(*shape))

    def append(self, data: Any, axis: int = 0) -> tuple[int, ...]:
        """Grow along ``axis`` with ``data``; return the new shape."""
        return _run(self.async_array.append(data, axis))

    def update_attributes(self, attributes: dict[str, Any]) -> None:
        """Merge ``attributes`` into the stored attributes."""
        _run(self.async_array.update_attributes(attributes))

    def __repr__(self) -> str:
        name = f" {self.name!r}" if self.path else ""
        return f"<asyncarr.sync.Array{name} {self.shape} {self.dtype}>"

    def __enter__(self) -> Array:
        return self

    def __exit__(self, *exc_info: object) -> None:
        _run(self.store.close())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Array):
            return NotImplemented
        return self.store.location == other.store.location and self.path == other.path

    __hash__ = None  # type: ignore[assignment]


class OIndex:
    """``z.oindex[...]``: orthogonal selection, each axis indexed on its own."""

    def __init__(self, async_array: AsyncArray) -> None:
        self._async_array = async_array

    def __getitem__(self, selection: Any) -> Any:
        return _read(self._async_array, "orthogonal", selection)

    def __setitem__(self, selection: Any, value: Any) -> None:
        _run(self._async_array.set_orthogonal_selection(selection, value))


class VIndex:
    """``z.vindex[...]``: coordinate selection (an integer array per axis) or one full-shape mask."""

    def __init__(self, async_array: AsyncArray) -> None:
        self._async_array = async_array

    def __getitem__(self, selection: Any) -> Any:
        return _read(self._async_array, "coordinate", selection)

    def __setitem__(self, selection: Any, value: Any) -> None:
        _run(self._async_array.set_coordinate_selection(selection, value))


class Group:
    """A Zarr group: a mapping of names to arrays and groups; ``Group(store)`` opens one."""

    def __init__(self, store: Any = None, path: str | None = None, read_only: bool = False) -> None:
        if isinstance(store, AsyncGroup):
            self.async_group = store
        else:
            opened = _run(api.open_group(store, "r" if read_only else "r+", path=path))
            self.async_group = opened
            _opened_stores.add(opened.store)

    @property
    def _node(self) -> AsyncGroup:
        return self.async_group

    path = _forward("path", "Path inside the store.")
    name = _forward("name", "Absolute name in the hierarchy.")
    basename = _forward("basename", "Last part of the name.")
    store = _forward("store", "The store holding the group.")
    metadata = _forward("metadata", "The parsed metadata.")
    read_only = _forward("read_only", "Whether writes are refused.")
    zarr_format = _forward("zarr_format", "2 or 3.")

    @property
    def attrs(self) -> Attributes:
        """User attributes; assignments write through."""
        return Attributes(self.async_group)

    @property
    def info(self) -> Any:
        """A summary table of the group."""
        return _run(self.async_group.info("asyncarr.sync.Group"))

    def __getitem__(self, name: str) -> Array | Group:
        return _wrap(_run(self.async_group.getitem(name)))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and _run(self.async_group.contains(name))

    def __delitem__(self, name: str) -> None:
        _run(self.async_group.delitem(name))

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.keys())

    def keys(self) -> list[str]:
        """Names of the direct children, sorted."""
        return _run(_collect(self.async_group.keys()))

    def members(self) -> list[tuple[str, Array | Group]]:
        """``(name, node)`` for every direct child."""
        return [(name, _wrap(node)) for name, node in _run(_collect(self.async_group.members()))]

    def values(self) -> list[Array | Group]:
        """The direct children."""
        return [node for _, node in self.members()]

    def items(self) -> list[tuple[str, Array | Group]]:
        """``(name, node)`` for every direct child."""
        return self.members()

    def arrays(self) -> list[tuple[str, Array]]:
        """``(name, array)`` for the child arrays."""
        return [(name, Array(node)) for name, node in _run(_collect(self.async_group.arrays()))]

    def groups(self) -> list[tuple[str, Group]]:
        """``(name, group)`` for the child groups."""
        return [(name, Group(node)) for name, node in _run(_collect(self.async_group.groups()))]

    def array_keys(self) -> list[str]:
        """Names of the child arrays."""
        return _run(_collect(self.async_group.array_keys()))

    def group_keys(self) -> list[str]:
        """Names of the child groups."""
        return _run(_collect(self.async_group.group_keys()))

    def create_group(self, name: str, overwrite: bool = False, **kwargs: Any) -> Group:
        """Create a child group (and missing intermediate groups)."""
        return Group(_run(self.async_group.create_group(name, overwrite=overwrite, **kwargs)))

    def require_group(self, name: str) -> Group:
        """Open the child group ``name``, creating it if missing."""
        return Group(_run(self.async_group.require_group(name)))

    def create_array(self, name: str, **kwargs: Any) -> Array:
        """Create a child array; ``data=`` fills it."""
        return Array(_run(self.async_group.create_array(name, **kwargs)))

    create_dataset = create_array

    def require_array(self, name: str, **kwargs: Any) -> Array:
        """Open the child array ``name`` if it matches, else create it."""
        return Array(_run(self.async_group.require_array(name, **kwargs)))

    require_dataset = require_array

    def zeros(self, name: str, **kwargs: Any) -> Array:
        """Create a child array of zeros."""
        return Array(_run(self.async_group.zeros(name, **kwargs)))

    def ones(self, name: str, **kwargs: Any) -> Array:
        """Create a child array of ones."""
        return Array(_run(self.async_group.ones(name, **kwargs)))

    def full(self, name: str, fill_value: Any, **kwargs: Any) -> Array:
        """Create a child array filled with ``fill_value``."""
        return Array(_run(self.async_group.full(name, fill_value, **kwargs)))

    def empty(self, name: str, **kwargs: Any) -> Array:
        """Create a child array with the default fill value."""
        return Array(_run(self.async_group.empty(name, **kwargs)))

    def array(self, name: str, data: Any, **kwargs: Any) -> Array:
        """Create a child array holding ``data``."""
        return Array(_run(self.async_group.array(name, data, **kwargs)))

    def tree(self) -> Any:
        """The hierarchy below this group, printable as the Zarr tutorials show."""
        return _run(self.async_group.tree())

    def update_attributes(self, attributes: dict[str, Any]) -> None:
        """Merge ``attributes`` into the stored attributes."""
        _run(self.async_group.update_attributes(attributes))

    def __repr__(self) -> str:
        return f"<asyncarr.sync.Group {self.name!r}>"

    def __enter__(self) -> Group:
        return self

    def __exit__(self, *exc_info: object) -> None:
        _run(self.store.close())


# -- module functions: the async API, blocking ------------------------------------------------------


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
