"""Storage backends: one async key/value interface over local files, memory, zip files and clouds."""

from .base import ByteRange, Store, validate_key

__all__ = ["ByteRange", "Store", "validate_key"]
