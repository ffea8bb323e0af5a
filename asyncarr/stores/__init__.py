"""Storage backends: one async key/value interface over local files, memory, zip files and clouds."""

from .base import ByteRange, Store, validate_key
from .local import LocalStore
from .mapping import MappingStore
from .memory import MemoryStore
from .metrics import StoreMetrics
from .url import STORE_SCHEMES, as_store, from_url
from .zip import ZipStore

__all__ = [
    "STORE_SCHEMES",
    "ByteRange",
    "LocalStore",
    "MappingStore",
    "MemoryStore",
    "Store",
    "StoreMetrics",
    "ZipStore",
    "as_store",
    "from_url",
    "validate_key",
]
