"""Counting the requests of stores that do not count their own: wrappers `Store` puts around their methods.

When a `Store` subclass is defined (with ``counts_calls`` True), each of its interface methods
(``get``, ``set``, ``delete``, ``exists``, ``getsize``, ``list_prefix``, ``list_dir`` and the
blocking ``*_sync`` twins) is wrapped once, so that local, memory, zip and mapping stores,
third-party backends and test doubles all report requests without a line of their own. A
call made from outside the store counts as one request; calls the store makes to itself while
serving it (MemoryStore's ``get`` calling ``get_sync``, a subclass's ``get`` calling
``super().get``) are not counted again: a context variable says which store is being served.
Each finished request is also logged at DEBUG on ``asyncarr.stores.requests``.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import logging
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable
from typing import Any

from .metrics import MetricsRecorder

__all__ = ["install_counting", "log_request", "recorder_of"]

request_log = logging.getLogger("asyncarr.stores.requests")
"""Every finished request, at DEBUG: operation, URL of the key, outcome and duration."""

_DEBUG = logging.DEBUG
_serving: contextvars.ContextVar[object] = contextvars.ContextVar("asyncarr_store_serving", default=None)
"""The store whose counted call is running in this context (its own inner calls are not counted)."""

_serving_get, _serving_set, _serving_reset = _serving.get, _serving.set, _serving.reset
_perf_counter = time.perf_counter
_debug_enabled = request_log.isEnabledFor

_OPERATION_OF = {
    "get": "get",
    "get_sync": "get",
    "set": "set",
    "set_sync": "set",
    "delete": "delete",
    "delete_sync": "delete",
    "exists": "head",
    "getsize": "head",
    "list_prefix": "list",
    "list_dir": "list",
}
_COUNTED_MARK = "__asyncarr_counted__"

_recorders_lock = threading.Lock()
_slotted_recorders: weakref.WeakKeyDictionary[Any, MetricsRecorder] = weakref.WeakKeyDictionary()


def recorder_of(store: Any) -> MetricsRecorder:
    """The `MetricsRecorder` of ``store``, made on first use (stores need not call ``Store.__init__``)."""
    try:
        recorder = store.__dict__.get("_metrics_recorder")
    except AttributeError:  # a class with __slots__ only
        try:
            recorder = _slotted_recorders.get(store)
        except TypeError:  # and no __weakref__ either: nowhere to keep counts, so none are kept
            return MetricsRecorder()
    if recorder is None:
        with _recorders_lock:
            try:
                recorder = store.__dict__.setdefault("_metrics_recorder", MetricsRecorder())
            except AttributeError:
                recorder = _slotted_recorders.setdefault(store, MetricsRecorder())
    return recorder


def log_request(op: str, url: str, outcome: str, seconds: float, attempt: int | None = None) -> None:
    """Log one finished request at DEBUG (callers check ``request_log.isEnabledFor(DEBUG)`` first)."""
    suffix = f" (attempt {attempt})" if attempt and attempt > 1 else ""
    request_log.debug("%s %s: %s in %.2f ms%s", op, url, outcome, seconds * 1000.0, suffix)


def _key_url(store: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    key = args[0] if args else kwargs.get("key", kwargs.get("prefix", ""))
    try:
        return store.key_url(key) if isinstance(key, str) else f"{store.location} {key!r}"
    except Exception:  # a key_url that refuses the key: still say which store
        return f"{store.location} {key!r}"


def _operation(kind: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    if kind == "get":
        byte_range = args[1] if len(args) > 1 else kwargs.get("byte_range")
        return "get" if byte_range is None else "get_range"
    return kind


def _written(kind: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    if kind != "set":
        return 0
    value = args[1] if len(args) > 1 else kwargs.get("value", b"")
    try:
        return len(value)
    except TypeError:
        return 0


def _count_coroutine(function: Callable[..., Any], kind: str) -> Callable[..., Any]:
    @functools.wraps(function)
    async def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _serving.get() is self:
            return await function(self, *args, **kwargs)
        token = _serving.set(self)
        start = time.perf_counter()
        try:
            result = await function(self, *args, **kwargs)
        except Exception as exc:
            _finish(self, kind, args, kwargs, start, None, exc)
            raise
        finally:
            _serving.reset(token)
        _finish(self, kind, args, kwargs, start, result, None)
        return result

    return counted


def _count_get_sync(function: Callable[..., Any]) -> Callable[..., Any]:
    # The array layer's fast path for local files and memory: one call per chunk, so kept flat. A
    # blocking read calls nothing else of its store, so instead of marking the context it only checks
    # that it is not nested in a counted call (MemoryStore.get) nor reached through super().
    @functools.wraps(function)
    def counted(self: Any, key: str, byte_range: Any = None) -> Any:
        if _serving_get() is self or type(self).get_sync is not counted:
            return function(self, key, byte_range)
        start = _perf_counter()
        try:
            result = function(self, key, byte_range)
        except Exception as exc:
            _finish(self, "get", (key, byte_range), {}, start, None, exc)
            raise
        seconds = _perf_counter() - start
        recorder = self.__dict__.get("_metrics_recorder") or recorder_of(self)
        op = "get" if byte_range is None else "get_range"
        recorder.record(op, seconds, len(result) if result.__class__ is bytes else 0)
        if _debug_enabled(_DEBUG):
            log_request(op, _key_url(self, (key,), {}), "missing" if result is None else "ok", seconds)
        return result

    return counted


def _count_set_sync(function: Callable[..., Any]) -> Callable[..., Any]:
    # The blocking write of the same fast path, kept flat for the same reason as _count_get_sync.
    @functools.wraps(function)
    def counted(self: Any, key: str, value: Any) -> Any:
        if _serving_get() is self or type(self).set_sync is not counted:
            return function(self, key, value)
        start = _perf_counter()
        try:
            function(self, key, value)
        except Exception as exc:
            _finish(self, "set", (key, value), {}, start, None, exc)
            raise
        seconds = _perf_counter() - start
        recorder = self.__dict__.get("_metrics_recorder") or recorder_of(self)
        recorder.record("set", seconds, written=_written("set", (key, value), {}))
        if _debug_enabled(_DEBUG):
            log_request("set", _key_url(self, (key,), {}), "ok", seconds)

    return counted


def _count_blocking(function: Callable[..., Any], kind: str) -> Callable[..., Any]:
    @functools.wraps(function)
    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _serving.get() is self:
            return function(self, *args, **kwargs)
        token = _serving.set(self)
        start = time.perf_counter()
        try:
            result = function(self, *args, **kwargs)
        except Exception as exc:
            _finish(self, kind, args, kwargs, start, None, exc)
            raise
        finally:
            _serving.reset(token)
        _finish(self, kind, args, kwargs, start, result, None)
        return result

    return counted


def _count_listing(function: Callable[..., AsyncIterator[Any]], kind: str) -> Callable[..., AsyncIterator[Any]]:
    @functools.wraps(function)
    async def counted(self: Any, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        outermost = _serving.get() is not self
        listing = function(self, *args, **kwargs)
        start = time.perf_counter()
        error: BaseException | None = None
        try:
            while True:
                # Marked only while the listing itself runs: a value set here must not leak to the
                # consumer between items, where its own calls of this store are requests of their own.
                token = _serving.set(self)
                try:
                    item = await listing.__anext__()
                except StopAsyncIteration:
                    break
                finally:
                    _serving.reset(token)
                yield item
        except Exception as exc:
            error = exc
            raise
        finally:
            aclose = getattr(listing, "aclose", None)
            if aclose is not None:
                await aclose()
            if outermost:
                _finish(self, kind, args, kwargs, start, None, error)

    return counted


def _finish(
    store: Any,
    kind: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    start: float,
    result: Any,
    error: BaseException | None,
) -> None:
    seconds = time.perf_counter() - start
    op = _operation(kind, args, kwargs)
    if error is None:
        read = len(result) if type(result) is bytes else 0
        recorder_of(store).record(op, seconds, read=read, written=_written(kind, args, kwargs))
    else:
        recorder_of(store).record(op, seconds, failed=True)
    if request_log.isEnabledFor(_DEBUG):
        outcome = "ok" if error is None else f"failed ({type(error).__name__})"
        if error is None and kind == "get" and result is None:
            outcome = "missing"
        log_request(op, _key_url(store, args, kwargs), outcome, seconds)


def install_counting(cls: type, base: type) -> None:
    """Wrap ``cls``'s interface methods (those not wrapped yet and not ``base``'s own defaults) to count calls."""
    for name, kind in _OPERATION_OF.items():
        function = getattr(cls, name, None)
        if function is None or getattr(function, _COUNTED_MARK, False):
            continue
        if getattr(function, "__isabstractmethod__", False) or function is getattr(base, name, None):
            continue  # not implemented yet, or the ABC's default built on the counted methods
        if inspect.isasyncgenfunction(function):
            wrapper = _count_listing(function, kind)
        elif inspect.iscoroutinefunction(function):
            wrapper = _count_coroutine(function, kind)
        elif callable(function) and not isinstance(function, type):
            if name == "get_sync":
                wrapper = _count_get_sync(function)
            elif name == "set_sync":
                wrapper = _count_set_sync(function)
            elif name.endswith("_sync"):
                wrapper = _count_blocking(function, kind)
            else:
                continue  # a plain function returning an iterator or awaitable: left as it is
        else:
            continue
        setattr(wrapper, _COUNTED_MARK, True)
        setattr(cls, name, wrapper)
