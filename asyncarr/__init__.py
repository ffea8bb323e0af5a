"""asyncarr: an asyncio-first client for chunked, compressed N-dimensional arrays in the Zarr format.

Every function that touches a store is a coroutine; ``asyncarr.sync`` is the blocking facade.
"""

from . import config, errors, stores
from .api import (
    array,
    consolidate_metadata,
    create,
    empty,
    empty_like,
    full,
    full_like,
    group,
    load,
    ones,
    ones_like,
    open,  # noqa: A004 - zarr's documented name
    open_array,
    open_group,
    save,
    zeros,
    zeros_like,
)
from .array import AsyncArray
from .group import AsyncGroup
from .locks import ProcessSynchronizer, ThreadSynchronizer

__version__ = "0.1.0"

__all__ = [
    "AsyncArray",
    "AsyncGroup",
    "ProcessSynchronizer",
    "ThreadSynchronizer",
    "__version__",
    "array",
    "config",
    "consolidate_metadata",
    "create",
    "empty",
    "empty_like",
    "errors",
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
    "stores",
    "zeros",
    "zeros_like",
]
