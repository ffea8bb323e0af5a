"""The ``info`` table of arrays and groups, printed as the Zarr tutorials show it."""

from __future__ import annotations

import dataclasses

__all__ = ["Info", "human_readable_size"]


def human_readable_size(size: int) -> str:
    """Bytes as zarr prints them: ``21``, ``2.2M``, ``1.5G``."""
    for exponent, suffix in ((50, "P"), (40, "T"), (30, "G"), (20, "M"), (10, "K")):
        if size >= 2**exponent:
            return f"{size / 2**exponent:.1f}{suffix}"
    return str(size)


def bytes_with_human_size(size: int) -> str:
    """``800000000 (762.9M)``, or just ``21`` below one KiB."""
    human = human_readable_size(size)
    return str(size) if human == str(size) else f"{size} ({human})"


@dataclasses.dataclass(frozen=True)
class Info:
    """Rows of ``name : value``; ``str()`` renders the aligned table."""

    rows: tuple[tuple[str, str], ...]

    def __str__(self) -> str:
        width = max(len(name) for name, _ in self.rows)
        width = max(width, 18)
        return "\n".join(f"{name:<{width}} : {value}" for name, value in self.rows) + "\n"

    __repr__ = __str__

    def __getitem__(self, name: str) -> str:
        for row_name, value in self.rows:
            if row_name == name:
                return value
        raise KeyError(name)
