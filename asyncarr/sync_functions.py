"""The blocking facade's zarr-style module functions (``open``, ``zeros``, ``save``, ...), made from the async ones.

Every name in `asyncarr.api.PUBLIC_FUNCTIONS` gets a blocking twin here with the same parameters
and docstring: it runs the coroutine on the facade's loop thread and returns an array or group
as `asyncarr.sync.Array` / `asyncarr.sync.Group`, also in ``create_hierarchy``'s ``(path, node)``
pairs (anything else, as it is). Import them from
`asyncarr.sync`, which re-exports every one.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from . import api
from .array import AsyncArray
from .facade import facade_of
from .group import AsyncGroup
from .sync_loop import _run

__all__ = list(api.PUBLIC_FUNCTIONS)


def _facade_annotation(annotation: Any) -> Any:
    """The async function's return annotation with the facade's classes in place of the async ones."""
    if not isinstance(annotation, str):  # api uses postponed annotations: they are strings
        return annotation
    return annotation.replace("AsyncArray", "Array").replace("AsyncGroup", "Group")


def _as_facade(result: Any) -> Any:
    """Arrays and groups as facade objects, also inside a list of ``(path, node)`` pairs (``create_hierarchy``)."""
    if isinstance(result, AsyncArray | AsyncGroup):
        return facade_of(result)
    if isinstance(result, list) and all(isinstance(item, tuple) and len(item) == 2 for item in result):
        return [(path, _as_facade(node)) for path, node in result]
    return result


def blocking_twin(name: str) -> Callable[..., Any]:
    """The blocking twin of ``asyncarr.api.<name>``: same parameters and docstring, facade objects returned."""
    coroutine_function = getattr(api, name)

    def run_blocking(*args: Any, **kwargs: Any) -> Any:
        api.check_keywords(f"asyncarr.sync.{name}", name, kwargs)  # a typo names what the user called
        return _as_facade(_run(coroutine_function(*args, **kwargs)))

    signature = inspect.signature(coroutine_function)
    run_blocking.__name__ = run_blocking.__qualname__ = name
    run_blocking.__module__ = "asyncarr.sync"  # where users import it from (and where pickle finds it)
    run_blocking.__doc__ = coroutine_function.__doc__
    run_blocking.__signature__ = signature.replace(  # type: ignore[attr-defined]
        return_annotation=_facade_annotation(signature.return_annotation)
    )
    return run_blocking


globals().update({name: blocking_twin(name) for name in __all__})
