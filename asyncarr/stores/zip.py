"""ZipStore: keys are members of one zip file, written once each, uncompressed (chunks already are).

The zip file is opened lazily on first use and guarded by a lock; its I/O runs on threads.
Members cannot be rewritten or deleted (the stdlib ``zipfile`` only appends), so write each
key once, or write to a ``LocalStore`` and zip the directory afterwards. ``close()`` writes the
central directory; until then other readers cannot open the file. An unclosed writable store
is finalised when it is garbage collected or at interpreter exit.

Modes: ``"r"`` read-only; ``"w"`` create or truncate; ``"a"`` append (create if missing);
``"x"`` create, failing if the file exists. Once a ``"w"``/``"x"`` store has opened its file,
any reopen (after ``close()``, or in a process that unpickled the store) uses ``"a"``, so an
already-written file is never truncated.
"""

from __future__ import annotations

import asyncio
import os
import struct
import threading
import weakref
import zipfile
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

from ..errors import AccessDeniedError, StoreError
from .base import ByteRange, Store, _normalize_prefix, validate_key
from .closing import AlreadyClosed

__all__ = ["ZipStore"]

_MODES = ("r", "w", "a", "x")
_LOCAL_HEADER = struct.Struct("<4s22xHH")  # signature, then file name and extra field lengths
_LOCAL_HEADER_SIGNATURE = b"PK\x03\x04"
_T = TypeVar("_T")


class ZipStore(Store):
    """A zip file holding one member per key (stored uncompressed, each written once)."""

    def __init__(self, path: str | os.PathLike[str], mode: str = "r") -> None:
        if mode not in _MODES:
            raise ValueError(f"ZipStore mode must be one of 'r', 'w', 'a', 'x', got {mode!r}")
        super().__init__(read_only=mode == "r")
        self._path = os.path.abspath(os.fspath(path))
        self._mode = mode
        self._open_mode = mode
        if mode == "x" and os.path.exists(self._path):
            raise FileExistsError(
                f"{self._path}: mode 'x' creates a new zip file but one exists; "
                "use mode 'a' to add to it or 'w' to replace it"
            )
        self._lock = threading.Lock()
        self._zip_file: zipfile.ZipFile | None = None
        self._finalizer: weakref.finalize | None = None

    @property
    def path(self) -> str:
        """The absolute path of the zip file."""
        return self._path

    @property
    def mode(self) -> str:
        """The mode the store was opened with ('r', 'w', 'a' or 'x')."""
        return self._mode

    @property
    def location(self) -> str:
        """``zip://`` followed by the absolute path of the zip file."""
        return "zip://" + self._path.replace(os.sep, "/")

    def __getstate__(self) -> dict[str, Any]:
        # A writable store reopens in "a": unpickling must never truncate what was written.
        return {"path": self._path, "mode": "r" if self._mode == "r" else "a"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"], state["mode"])  # type: ignore[misc]

    # -- file lifecycle ------------------------------------------------------------------

    def _opened(self, for_write: bool) -> zipfile.ZipFile | None:
        """The open zip file, opening it if needed; None if there is nothing to read yet.

        Reads open the file in mode "r", so reading never changes it (mode "a" would append a
        directory to a file that is not a zip); the first write reopens it for appending.
        The caller holds ``self._lock``.
        """
        zip_file = self._zip_file
        if zip_file is not None and (not for_write or zip_file.mode != "r"):
            return zip_file
        if not for_write and (self._open_mode in ("w", "x") or not os.path.exists(self._path)):
            return None  # reads never create or truncate the file
        if zip_file is not None:
            self._close_file()
        if for_write:
            os.makedirs(os.path.dirname(self._path), exist_ok=True)
        mode = self._open_mode if for_write else "r"
        zip_file = zipfile.ZipFile(self._path, mode=mode, compression=zipfile.ZIP_STORED, allowZip64=True)
        if mode in ("w", "x"):
            self._open_mode = "a"
        self._zip_file = zip_file
        self._finalizer = weakref.finalize(self, zip_file.close)
        return zip_file

    def _close_file(self) -> None:
        """Finalise and close the zip file if it is open; the caller holds ``self._lock``."""
        finalizer, self._finalizer, self._zip_file = self._finalizer, None, None
        if finalizer is not None:
            finalizer()

    def close(self) -> AlreadyClosed:  # type: ignore[override]
        """Write the central directory and close the file now, awaited or not; later use reopens it.

        Done on the call (under the lock, as every member write is), so a script's bare
        ``z.store.close()`` on a zip that ``za.open("x.zip")`` opened finishes the file, as
        zarr's does, and ``await store.close()`` still works.
        """
        with self._lock:
            try:
                self._close_file()
            except OSError as exc:
                raise self._error("", exc) from exc
        return AlreadyClosed()

    async def _locked(self, key: str, function: Callable[..., _T], *args: Any) -> _T:
        """Run ``function(*args)`` on a thread under the lock, mapping errors to ones naming ``key``."""
        return await asyncio.to_thread(self._run_locked, key, function, *args)

    def _run_locked(self, key: str, function: Callable[..., _T], *args: Any) -> _T:
        with self._lock:
            try:
                return function(*args)
            except zipfile.BadZipFile as exc:
                raise StoreError(f"{self.location}: not a valid zip file ({exc})") from exc
            except OSError as exc:
                raise self._error(key, exc) from exc

    # -- the Store interface -----------------------------------------------------------

    async def get(self, key: str, byte_range: ByteRange | None = None) -> bytes | None:
        """Return the member ``key`` (or part of it), or None if there is none."""
        return await self._locked(key, self._read_member, validate_key(key), byte_range)

    async def set(self, key: str, value: bytes) -> None:
        """Add the member ``key``; raises ValueError if it already exists (members are write-once)."""
        self._check_writable()
        await self._locked(key, self._write_member, validate_key(key), value)

    async def delete(self, key: str) -> None:
        """A missing key is a no-op; deleting an existing member raises ValueError (zip cannot)."""
        self._check_writable()
        await self._locked(key, self._refuse_delete, validate_key(key))

    async def exists(self, key: str) -> bool:
        """Whether the member ``key`` exists."""
        return await self._locked(key, self._member_info, validate_key(key)) is not None

    async def getsize(self, key: str) -> int | None:
        """Uncompressed size of the member ``key``, or None if missing."""
        info = await self._locked(key, self._member_info, validate_key(key))
        return None if info is None else info.file_size

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        """Yield every member name below ``prefix``."""
        prefix = _normalize_prefix(prefix)
        for name in await self._locked(prefix, self._member_names):
            if name.startswith(prefix) and not name.endswith("/"):
                yield name

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        """Yield the names of the immediate children of ``prefix``, each once."""
        prefix = _normalize_prefix(prefix)
        children: dict[str, None] = {}
        for name in await self._locked(prefix, self._member_names):
            if name.startswith(prefix) and len(name) > len(prefix):
                children[name[len(prefix) :].split("/", 1)[0]] = None
        for child in children:
            yield child

    async def delete_prefix(self, prefix: str) -> None:
        """Deleting everything ('') starts the zip afresh; a smaller prefix with members raises ValueError.

        A zip file cannot drop single members, but emptying the whole store is rewriting the
        file, which is what opening with mode 'w' over an existing zip asks for.
        """
        self._check_writable()
        prefix = _normalize_prefix(prefix)
        if not prefix:
            await self._locked("", self._start_afresh)
            return
        names = [name async for name in self.list_prefix(prefix)]
        if names:
            shown = ", ".join(repr(name) for name in names[:3]) + (", ..." if len(names) > 3 else "")
            raise ValueError(
                f"{self.location}: cannot delete {len(names)} members under {prefix!r} ({shown}): "
                "zip files cannot delete members; write to a LocalStore and zip it afterwards"
            )

    # -- blocking work, run on a thread under the lock -----------------------------------------

    def _start_afresh(self) -> None:
        """Close the file and truncate it on the next write; reads see an empty store until then."""
        self._close_file()
        self._open_mode = "w"

    def _member_info(self, key: str) -> zipfile.ZipInfo | None:
        zip_file = self._opened(for_write=False)
        if zip_file is None:
            return None
        try:
            info = zip_file.getinfo(key)
        except KeyError:
            return None
        return None if info.is_dir() else info

    def _member_names(self) -> list[str]:
        zip_file = self._opened(for_write=False)
        return [] if zip_file is None else zip_file.namelist()

    def _read_member(self, key: str, byte_range: ByteRange | None) -> bytes | None:
        info = self._member_info(key)
        if info is None:
            return None
        zip_file = self._zip_file
        assert zip_file is not None
        if byte_range is None:
            return zip_file.read(info)
        if info.compress_type != zipfile.ZIP_STORED or info.flag_bits & 0x1:
            return byte_range.apply(zip_file.read(info))
        # A stored member's bytes sit right after its local header: read only the range.
        start, stop = byte_range.resolve(info.file_size)
        file = zip_file.fp
        assert file is not None
        file.seek(info.header_offset)
        signature, name_length, extra_length = _LOCAL_HEADER.unpack(file.read(_LOCAL_HEADER.size))
        if signature != _LOCAL_HEADER_SIGNATURE:
            raise zipfile.BadZipFile(f"bad local header for member {key!r}")
        file.seek(info.header_offset + _LOCAL_HEADER.size + name_length + extra_length + start)
        return file.read(stop - start)

    def _write_member(self, key: str, value: bytes) -> None:
        zip_file = self._opened(for_write=True)
        assert zip_file is not None
        if key in zip_file.NameToInfo:
            raise ValueError(
                f"{self.key_url(key)}: the key already exists and zip members cannot be rewritten; "
                "write each key once, or write to a LocalStore and zip the directory afterwards"
            )
        zip_file.writestr(key, value, compress_type=zipfile.ZIP_STORED)

    def _refuse_delete(self, key: str) -> None:
        if self._member_info(key) is not None:
            raise ValueError(
                f"{self.key_url(key)}: zip members cannot be deleted or rewritten; "
                "write to a LocalStore and zip the directory afterwards"
            )

    def _error(self, key: str, exc: OSError) -> StoreError:
        """Map an error on the zip file to the asyncarr error naming the URL."""
        url = self.key_url(key)
        reason = exc.strerror or str(exc)
        if isinstance(exc, PermissionError):
            return AccessDeniedError(f"{url}: permission denied ({reason}); check the permissions of {self._path}")
        return StoreError(f"{url}: {reason}")
