"""Turn what users pass as ``store`` (a path, a URL, a mapping, a Store or None) into a Store.

URL forms: a plain path or ``file://PATH`` -> LocalStore rooted exactly there; a path ending
in ``.zip`` (not an existing directory) or ``zip://PATH`` -> ZipStore, where ``zip://`` may
carry a path inside the zip after the ``.zip`` segment (``zip:///data/x.zip/group/arr``);
``memory://NAME`` -> the MemoryStore named NAME (``memory://`` alone: a new one); other
schemes are looked up in ``STORE_SCHEMES``.

``STORE_SCHEMES`` maps a scheme to a factory called as
``factory(url, read_only=read_only, **storage_options) -> Store``. Cloud store modules
register themselves there when imported; a scheme not yet registered makes ``from_url``
import its module (``asyncarr.stores.s3`` for ``s3://``, ...) and look again.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

from .base import Store, validate_key
from .local import LocalStore
from .mapping import MappingStore
from .memory import MemoryStore
from .zip import ZipStore

__all__ = ["STORE_SCHEMES", "as_store", "check_endpoint_url", "from_url"]

STORE_SCHEMES: dict[str, Callable[..., Store]] = {}
"""Factories for the URL schemes of remote stores, called as ``factory(url, read_only=..., **options)``."""

# scheme -> (module that registers it, pip extra that installs its dependencies)
_REMOTE_SCHEME_MODULES = {
    "s3": ("asyncarr.stores.s3", "s3"),
    "gs": ("asyncarr.stores.gcs", "gcs"),
    "gcs": ("asyncarr.stores.gcs", "gcs"),
    "az": ("asyncarr.stores.azure", "azure"),
    "abfs": ("asyncarr.stores.azure", "azure"),
    "http": ("asyncarr.stores.http", "http"),
    "https": ("asyncarr.stores.http", "http"),
}
_BUILTIN_SCHEMES = ("file", "memory", "zip")


def check_endpoint_url(value: Any, option: str, *, path_allowed: bool = True) -> str:
    """Return ``value`` if it is ``http(s)://host[:port][/path]``, else raise ValueError saying what to write.

    ``option`` names where the value came from (``"endpoint_url"``, an environment variable), for the message.
    """
    from urllib.parse import urlsplit

    example = "http(s)://host[:port]" + ("[/path]" if path_allowed else "")
    if not isinstance(value, str):
        raise TypeError(f"{option} must be a URL string like {example}, got {type(value).__name__}")
    # Shown without a query (a signed URL's token) or a user:password part.
    shown = re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://)?[^/@]*@", r"\1", value.split("?", 1)[0].split("#", 1)[0])
    try:
        parts = urlsplit(value)
        port = parts.port  # ValueError for a port that is not a number in range
    except ValueError as exc:
        raise ValueError(f"{option}={shown!r} is not a valid URL ({exc}); write {example}") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        hint = f"; did you mean 'http://{shown}'?" if "://" not in value and value else ""
        raise ValueError(f"{option}={shown!r} is not a URL of the form {example}{hint}")
    if parts.query or parts.fragment:
        raise ValueError(f"{option}={shown!r} cannot carry a query or fragment; write {example}")
    if parts.path.strip("/") and not path_allowed:
        raise ValueError(f"{option}={shown!r} cannot have a path; write {example}")
    del port
    return value


def from_url(url: str, *, read_only: bool = False, **storage_options: Any) -> Store:
    """Open the store a path or URL names; a URL that also names a path inside it raises ValueError."""
    store, path = _open_url(url, read_only, storage_options)
    if path:
        raise ValueError(
            f"{url!r} names the path {path!r} inside {store.location}; from_url opens whole stores: "
            "use as_store(url), which returns the store and that path"
        )
    return store


def as_store(
    store_like: Any, *, read_only: bool = False, storage_options: Mapping[str, Any] | None = None
) -> tuple[Store, str]:
    """Return ``(store, path inside it)`` for a Store, path or URL, MutableMapping or None (new MemoryStore)."""
    options = dict(storage_options or {})
    if isinstance(store_like, (str, os.PathLike)):
        url = os.fspath(store_like)
        if not isinstance(url, str):
            raise TypeError(f"store paths must be str, got {type(url).__name__}: {url!r}")
        return _open_url(url, read_only, options)
    if isinstance(store_like, Store):
        store: Store = store_like
    elif isinstance(store_like, MutableMapping):
        store = MappingStore(store_like, read_only=read_only)
    elif store_like is None:
        store = MemoryStore(read_only=read_only)
    else:
        raise TypeError(
            f"cannot use a {type(store_like).__module__}.{type(store_like).__qualname__} as a store; "
            "pass a path or URL string, a pathlib.Path, an asyncarr Store, a MutableMapping or None"
        )
    if options:
        raise TypeError(
            f"storage_options {sorted(options)} were given with a {type(store_like).__name__}; "
            "they only apply to store URLs such as 's3://bucket/path'"
        )
    return store, ""


def _open_url(url: str, read_only: bool, options: dict[str, Any]) -> tuple[Store, str]:
    scheme, separator, rest = url.partition("://")
    if not separator:
        scheme, rest = "file", url
    scheme = scheme.lower()
    if scheme == "file":
        path = _file_url_path(rest) if separator else rest
        _reject_options(url, "local", options)
        stripped = path.rstrip("/\\") or path
        if stripped.lower().endswith(".zip") and not os.path.isdir(stripped):
            return ZipStore(stripped, mode="r" if read_only else "a"), ""
        return LocalStore(path, read_only=read_only), ""
    if scheme == "memory":
        _reject_options(url, "memory", options)
        name = rest.strip("/")
        return MemoryStore(name=name or None, read_only=read_only), ""
    if scheme == "zip":
        _reject_options(url, "zip", options)
        zip_path, inner_path = _split_zip_url(url, rest)
        return ZipStore(zip_path, mode="r" if read_only else "a"), inner_path
    return _remote_store(scheme, url, read_only, options), ""


def _file_url_path(rest: str) -> str:
    """The local path of a ``file://`` URL's remainder (``/abs``, ``localhost/abs`` or relative)."""
    if rest.startswith("localhost/"):
        return rest[len("localhost") :]
    return rest


def _split_zip_url(url: str, rest: str) -> tuple[str, str]:
    """Split ``zip://`` URL's remainder at its first ``.zip`` segment into (zip file, path inside)."""
    segments = rest.split("/")
    for index, segment in enumerate(segments):
        if segment.lower().endswith(".zip"):
            zip_path = "/".join(segments[: index + 1])
            inner_path = "/".join(segments[index + 1 :]).strip("/")
            if inner_path:
                try:
                    validate_key(inner_path)
                except ValueError as exc:
                    raise ValueError(f"{url!r}: the path inside the zip file is not valid: {exc}") from None
            return zip_path, inner_path
    if not rest:
        raise ValueError(f"{url!r} names no zip file; write zip:///path/to/file.zip")
    return rest, ""


def _reject_options(url: str, kind: str, options: dict[str, Any]) -> None:
    if options:
        raise TypeError(
            f"unknown storage_options for the {kind} store {url!r}: {', '.join(sorted(options))}; "
            "storage options only apply to remote stores (s3://, gs://, az://, http(s)://)"
        )


def _remote_store(scheme: str, url: str, read_only: bool, options: dict[str, Any]) -> Store:
    factory = STORE_SCHEMES.get(scheme)
    if factory is None and scheme in _REMOTE_SCHEME_MODULES:
        module_name, extra = _REMOTE_SCHEME_MODULES[scheme]
        try:
            importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise ValueError(
                    f"{url!r}: {scheme}:// stores need the package {exc.name!r}; "
                    f"install it with: pip install 'asyncarr[{extra}]'"
                ) from exc
        factory = STORE_SCHEMES.get(scheme)
        if factory is None:
            raise ValueError(
                f"{url!r}: {scheme}:// stores are not supported yet by this version of asyncarr "
                f"(they will need: pip install 'asyncarr[{extra}]')"
            )
    if factory is None:
        known = sorted({*_BUILTIN_SCHEMES, *_REMOTE_SCHEME_MODULES, *STORE_SCHEMES})
        raise ValueError(
            f"{url!r}: unknown store URL scheme {scheme!r}; known schemes: {', '.join(known)} "
            "(or pass a plain local path)"
        )
    return factory(url, read_only=read_only, **options)
