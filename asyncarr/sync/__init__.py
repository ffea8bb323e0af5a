"""The blocking facade: zarr's familiar API, each call run on asyncarr's own event-loop thread.

All behaviour lives in the async classes; the facade only forwards. This module is where
users import it from: the classes live in `asyncarr.facade`, the functions (one blocking twin
of each name in `asyncarr.api.PUBLIC_FUNCTIONS`) in `asyncarr.sync_functions`. One daemon thread
runs one event loop for the whole process, so the facade works from plain scripts, from
many threads at once and from inside a running event loop (a Jupyter cell, an async web
handler). After ``os.fork`` the child starts a fresh loop thread on first use.

zarr's namespaces live here too: `asyncarr.sync.storage` (zarr's store constructors, whose
``close()`` blocks), `asyncarr.sync.codecs` (zarr 3's codec classes) and ``config`` (which is
`asyncarr.config`, taking zarr's dotted keys as well). zarr 2's store names were top-level
(``zarr.DirectoryStore``), so they are here as well as in ``storage``.

Reads from local and memory stores skip the loop: they run in the calling thread (see
`AsyncArray.read_blocking`), so a small read costs no thread hand-offs and reads from many
threads decode in parallel.
"""

from __future__ import annotations

from numcodecs import blosc

from .. import config, sync_functions
from .._version import __version__
from ..array import AsyncArray
from ..errors import CopyError
from ..facade import Array, Attributes, Group, OIndex, VIndex
from ..group import AsyncGroup
from ..locks import ProcessSynchronizer, ThreadSynchronizer
from ..sync_functions import *  # noqa: F403 - one blocking twin of each name in asyncarr.api.PUBLIC_FUNCTIONS
from ..sync_loop import _loop_thread as _loop_thread  # tests reach the loop thread as asyncarr.sync._loop_thread
from ..sync_loop import _run as _run
from . import codecs, storage
from .storage import (
    ABSStore,
    DirectoryStore,
    FSStore,
    KVStore,
    LRUStoreCache,
    MemoryStore,
    NestedDirectoryStore,
    TempStore,
    ZipStore,
)

__all__ = [
    "ABSStore",
    "Array",
    "AsyncArray",
    "AsyncGroup",
    "Attributes",
    "CopyError",
    "DirectoryStore",
    "FSStore",
    "Group",
    "KVStore",
    "LRUStoreCache",
    "MemoryStore",
    "NestedDirectoryStore",
    "OIndex",
    "ProcessSynchronizer",
    "TempStore",
    "ThreadSynchronizer",
    "VIndex",
    "ZipStore",
    "__version__",
    "blosc",
    "codecs",
    "config",
    "storage",
]
__all__ += sync_functions.__all__
