"""asyncarr: an asyncio-first client for chunked, compressed N-dimensional arrays in the Zarr format.

Every function that touches a store is a coroutine; ``asyncarr.sync`` is the blocking facade.
"""

# `facade` is imported for its effect: it gives AsyncArray and AsyncGroup the facade classes
# their .sync() returns, which array.py and group.py cannot import (the facade imports them).
from . import api, config, errors, facade, stores  # noqa: F401
from ._version import __version__
from .api import *  # noqa: F403 - the functions of asyncarr.api.PUBLIC_FUNCTIONS and the synchronizers
from .array import AsyncArray
from .group import AsyncGroup

__all__ = ["AsyncArray", "AsyncGroup", "__version__", "config", "errors", "stores"]
__all__ += api.__all__
