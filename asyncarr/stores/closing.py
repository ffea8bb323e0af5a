"""`AlreadyClosed`: what a ``close()`` that finishes on the call returns, so awaiting it is optional."""

from __future__ import annotations

from collections.abc import Coroutine, Generator
from typing import Any

__all__ = ["AlreadyClosed"]


class AlreadyClosed(Coroutine[Any, Any, None]):
    """An awaitable that is already done: ``await store.close()`` and a script's bare ``store.close()``
    both work, and one never awaited raises no "coroutine was never awaited" warning."""

    def send(self, value: Any) -> Any:
        """Finish at once."""
        raise StopIteration(None)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        """Raise what is thrown in."""
        raise typ if val is None else val

    def close(self) -> None:
        """Nothing to stop."""

    def __await__(self) -> Generator[Any, None, None]:
        return
        yield
