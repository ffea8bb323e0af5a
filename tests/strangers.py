"""Stores a stranger wrote: plain files made without asyncarr, and a before/after view of a directory."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_documents(root: Path, documents: dict[str, Any]) -> Path:
    """Write each key as a plain file below ``root``: bytes as they are, str as UTF-8, JSON values compactly."""
    for key, value in documents.items():
        path = root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(value, dict | list):
            value = json.dumps(value, separators=(",", ":"))
        path.write_bytes(value.encode() if isinstance(value, str) else value)
    return root


def snapshot(directory: Path) -> dict[str, bytes | str]:
    """Every entry below ``directory``: file contents, link targets and directories, to show nothing changed."""
    entries: dict[str, bytes | str] = {}
    for path in sorted(directory.rglob("*")):
        name = str(path.relative_to(directory))
        if path.is_symlink():
            entries[name] = "link -> " + os.readlink(path)
        elif path.is_dir():
            entries[name] = "dir"
        else:
            entries[name] = path.read_bytes()
    return entries


def v2_array(shape: int, dtype: str = "|u1", compressor: dict | None = None, filters: list | None = None) -> dict:
    """A one-chunk, one-dimensional v2 ``.zarray`` document."""
    return {
        "zarr_format": 2,
        "shape": [shape],
        "chunks": [shape],
        "dtype": dtype,
        "compressor": compressor,
        "filters": filters,
        "fill_value": 0,
        "order": "C",
    }


class WritesAMarkerWhenUnpickled:
    """What an attacker pickles: unpickling it calls ``open(marker, "w")``, so the marker shows that code ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self) -> tuple:
        return (open, (self.marker, "w"))
