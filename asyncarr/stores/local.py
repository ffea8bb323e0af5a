"""LocalStore: keys are files in nested directories under a root; all disk I/O runs on threads.

Writes are atomic: each value goes to a temporary file in the key's directory (named
``.asyncarr-tmp-...``, never listed) and is renamed over the key with ``os.replace``, so a
reader or a crash sees the old value or the new one, never a torn one. Deleting a key also
removes the directories it leaves empty (below the root), so listings match object stores.

Symbolic links never take the store outside its root (a shared directory may hold links a
stranger planted): a link is followed only while its target stays below the root's real
path. Reading, writing or listing a path that resolves outside raises StoreError. A link is
listed like a file (a link to a directory is not descended into), and deleting a key, a
prefix or everything removes links themselves, never what they point to (``os.replace`` and
``os.unlink`` act on the link; ``shutil.rmtree`` neither follows links inside the tree nor
accepts one as its top). Each key's directory is resolved once per store (``realpath``, then
remembered), and a key that is itself a link is checked on the file actually opened
(``/proc/self/fd`` where there is one). What is not defended against is a stranger racing
the reader: swapping a checked directory for a link while the store is open.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import errno
import functools
import itertools
import logging
import os
import shutil
import stat
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from .. import config
from ..errors import AccessDeniedError, StoreError
from .base import ByteRange, Store, _normalize_prefix, validate_key
from .counting import log_request, recorder_of, request_log

__all__ = ["LocalStore"]

_TEMP_PREFIX = ".asyncarr-tmp-"
_temp_names = itertools.count()
"""Numbers temporary files; with `_temp_token` (random per process, anew after fork) a name no other
writer, thread or process, makes at the same time. Cheaper per file than random bytes from the OS."""
_temp_token = os.urandom(6).hex()
# Disk reads gain from a few requests in flight (page-cache misses, network filesystems)
# beyond the number of cores; more threads than this only add contention.
_IO_THREADS = min(32, 4 * (os.cpu_count() or 1) + 4)
# Big enough to amortise a thread hop and a loop wake-up, small enough that results of a
# large gather start arriving (and decoding) early.
_MAX_BATCH = 64
# At least this many jobs go to one thread: a few small file calls (a node's metadata documents,
# read together) take microseconds, less than waking a thread each on two cores. Creating an array
# read its four documents on four threads: 0.19 ms for mode 'w''s check, 0.11 ms on one.
_MIN_BATCH = 4
_CREATE_ATTEMPTS = 4
# What the first read of a whole file takes when its size is not asked first (`_read_whole`).
_FIRST_READ_BYTES = 64 * 1024
# O_BINARY: no newline translation on Windows. O_NONBLOCK: opening a FIFO someone planted does
# not wait for a writer forever (for regular files it changes nothing).
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_NONBLOCK", 0)
# O_NOFOLLOW: a link as the last part of a key's path fails the fast open (ELOOP; EMLINK on
# FreeBSD) and takes the checked path instead.
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
# Where files can be named relative to an open directory (not on Windows): `_write_files_here`.
# os.replace takes the dir_fd arguments too, but is not listed in os.supports_dir_fd: os.rename stands for it.
_WRITES_RELATIVE = {os.open, os.rename, os.unlink} <= os.supports_dir_fd and hasattr(os, "O_DIRECTORY")
_READS_RELATIVE = os.open in os.supports_dir_fd and hasattr(os, "O_DIRECTORY")
# O_DIRECTORY refuses anything else (a planted FIFO included) before opening it.
_DIRECTORY_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)  # what open(path, "xb") asks
_LINK_ERRNOS = frozenset({errno.ELOOP, errno.EMLINK})
# A key with a segment longer than the file system allows names no file: it reads as missing.
_NO_SUCH_NAME_ERRNOS = frozenset({errno.ENAMETOOLONG})
# Where the kernel names the file behind a descriptor (checking a link's target after opening it).
_FD_PATHS = "/proc/self/fd/" if os.path.isdir("/proc/self/fd") else None
# Directories known to resolve inside the root, per store; forgotten wholesale past this many.
_MAX_KNOWN_DIRECTORIES = 4096

_T = TypeVar("_T")
_perf_counter = time.perf_counter
_log_requests = request_log.isEnabledFor
_DEBUG = logging.DEBUG
_Job = tuple["asyncio.Future[Any]", Callable[..., Any], tuple[Any, ...]]
_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


def _io_executor() -> ThreadPoolExecutor:
    global _executor
    if _executor is None:
        with _executor_lock:
            if _executor is None:
                _executor = ThreadPoolExecutor(max_workers=_IO_THREADS, thread_name_prefix="asyncarr-file-io")
    return _executor


def _forget_executor_after_fork() -> None:
    # The parent's worker threads do not exist in a forked child; start a fresh pool on demand.
    global _executor, _executor_lock, _batchers_lock
    _executor = None
    _executor_lock = threading.Lock()
    _batchers_lock = threading.Lock()
    _batchers.clear()


class _LoopBatcher:
    """Hands one event loop's file jobs to the I/O threads in batches.

    Jobs submitted in one loop iteration (a gather of chunk reads) share a few thread hops and
    wake the loop once per batch instead of once per job: most of the cost of a small read.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop_ref = weakref.ref(loop)  # a strong reference would keep the registry's key alive
        self._pending: list[_Job] = []

    def submit(
        self, loop: asyncio.AbstractEventLoop, function: Callable[..., _T], args: tuple[Any, ...]
    ) -> asyncio.Future[_T]:
        future = loop.create_future()
        if not self._pending:
            loop.call_soon(self._flush)
        self._pending.append((future, function, args))
        return future

    def _flush(self) -> None:
        jobs, self._pending = self._pending, []
        executor = _io_executor()
        size = min(_MAX_BATCH, max(_MIN_BATCH, -(-len(jobs) // _IO_THREADS)))
        for start in range(0, len(jobs), size):
            batch = jobs[start : start + size]
            try:
                executor.submit(self._run, batch)
            except RuntimeError as exc:  # the interpreter is shutting down: fail, do not hang
                _deliver([(future, None, exc) for future, _, _ in batch])

    def _run(self, jobs: list[_Job]) -> None:
        outcomes = []
        for future, function, args in jobs:
            try:
                outcomes.append((future, function(*args), None))
            except BaseException as exc:  # delivered to the awaiting task, which re-raises it
                outcomes.append((future, None, exc))
        loop = self._loop_ref()
        if loop is not None:
            try:
                loop.call_soon_threadsafe(_deliver, outcomes)
            except RuntimeError:  # the loop closed meanwhile: nobody waits for these results
                pass


def _deliver(outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]]) -> None:
    for future, result, exc in outcomes:
        if future.done():  # cancelled while the job ran
            continue
        if exc is None:
            future.set_result(result)
        else:
            future.set_exception(exc)


_batchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopBatcher] = weakref.WeakKeyDictionary()
_batchers_lock = threading.Lock()
os.register_at_fork(after_in_child=_forget_executor_after_fork)


def _new_temp_token_after_fork() -> None:
    global _temp_token
    _temp_token = os.urandom(6).hex()  # else parent and child would name temporary files alike


os.register_at_fork(after_in_child=_new_temp_token_after_fork)


def _read_operation(byte_range: ByteRange | None) -> str:
    return "get" if byte_range is None else "get_range"


def _in_io_thread(function: Callable[..., _T], *args: Any) -> asyncio.Future[_T]:
    """Run ``function(*args)`` on an I/O thread, batched with the loop's other file jobs."""
    loop = asyncio.get_running_loop()
    batcher = _batchers.get(loop)
    if batcher is None:
        with _batchers_lock:
            batcher = _batchers.setdefault(loop, _LoopBatcher(loop))
    return batcher.submit(loop, function, args)


async def _all_of(futures: list[asyncio.Future[_T]]) -> list[_T]:
    """Wait for every future, then raise the first failure (so no exception goes unretrieved)."""
    results = await asyncio.gather(*futures, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results  # type: ignore[return-value]


class LocalStore(Store):
    """A directory on the local filesystem; key ``a/b/c`` is the file ``root/a/b/c``."""

    def __init__(self, root: str | os.PathLike[str], *, read_only: bool = False, fsync: bool | None = None) -> None:
        super().__init__(read_only=read_only)
        if fsync is not None and not isinstance(fsync, bool):
            raise TypeError(f"fsync must be True, False or None (follow asyncarr.config), got {fsync!r}")
        self._fsync = fsync
        self._root = os.path.abspath(os.fspath(root))
        self._location = "file://" + self._root.replace(os.sep, "/")
        self._real_root: str | None = None  # the root with its links resolved, found on first need
        # Key directories already resolved inside the root: the check costs one realpath per directory,
        # not per chunk. (A directory swapped for a link while the store is open is not noticed.)
        self._inside_directories: set[str] = set()
        # Whether the last file read whole was larger than a first read takes (`_read_whole`).
        self._large_files = False

    @property
    def root(self) -> str:
        """The absolute path of the directory holding the keys."""
        return self._root

    @property
    def location(self) -> str:
        """``file://`` followed by the absolute root path."""
        return self._location

    @property
    def fsync(self) -> bool:
        """Whether writes are made durable before they return: the store's ``fsync=``, else ``config.fsync``."""
        return bool(config.get("fsync")) if self._fsync is None else self._fsync

    def __getstate__(self) -> dict[str, Any]:
        return {"root": self._root, "read_only": self.read_only, "fsync": self._fsync}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["root"], read_only=state["read_only"], fsync=state.get("fsync"))  # type: ignore[misc]

    # -- the Store interface -----------------------------------------------------------

    supports_sync_io = True
    #: ``set_sync`` writes any buffer (a memoryview of a shard laid out in place), not only ``bytes``.
    writes_buffers = True
    small_writes_in_parallel = True

    async def get(self, key: str, byte_range: ByteRange | None = None) -> bytes | None:
        """Read the file at ``key`` (only the requested range), or None if there is none."""
        return await _in_io_thread(self._read_file, self._file_path(key), key, byte_range)

    def get_sync(self, key: str, byte_range: ByteRange | None = None) -> bytes | None:
        """Blocking ``get``: read the file at ``key`` on the calling thread."""
        return self._read_file(self._file_path(key), key, byte_range)

    def get_many_sync(self, keys: Iterable[str]) -> Iterator[bytes | None]:
        """Blocking reads of many whole files on the calling thread, each yielded as it is read.

        Small chunks cost mostly per file (W2's 4096 chunks of 2 KiB): the keys' checks and the
        store's bookkeeping are made here without `get_sync`'s layers, and files of one directory
        are opened relative to it, held open, so the kernel walks the directory's path once, not
        once a file. Each file counts as one ``get`` request, as through `get_sync`.
        """
        if getattr(self.get_sync, "__func__", None) is not LocalStore.get_sync:
            # Reads made another way (a subclass's, or one set on this store): every key through them.
            yield from super().get_many_sync(keys)
            return
        record = recorder_of(self).record
        logged = _log_requests(_DEBUG)
        read_file, file_path = self._read_file, self._file_path
        directory, directory_fd = None, None
        try:
            for key in keys:
                start = _perf_counter()
                try:
                    path = file_path(key)
                    if _READS_RELATIVE:
                        cut = path.rindex(os.sep)
                        if path[:cut] != directory:
                            if directory_fd is not None:
                                os.close(directory_fd)
                            # None first: a failing open below must not leave the closed descriptor to close again
                            directory, directory_fd = path[:cut], None
                            # The root may be a link (the user named it); a directory below it that is
                            # one is read by whole paths, each file's link checked as `get_sync` checks it.
                            nofollow = 0 if directory == self._root else _NOFOLLOW
                            directory_fd = self._open_directory(directory, key, "read", nofollow)
                    if directory_fd is None:
                        value = read_file(path, key, None)
                    else:
                        value = self._read_file_in(directory_fd, path[cut + 1 :], path, key)
                except Exception:
                    record("get", _perf_counter() - start, failed=True)
                    raise
                seconds = _perf_counter() - start
                record("get", seconds, len(value) if value is not None else 0)
                if logged:
                    log_request("get", self.key_url(key), "missing" if value is None else "ok", seconds)
                yield value
        finally:
            if directory_fd is not None:
                os.close(directory_fd)

    def set_sync(self, key: str, value: bytes) -> None:
        """Blocking ``set``: write the file at ``key`` atomically on the calling thread."""
        self._check_writable()
        self._write_file(self._file_path(key), key, value)

    def set_many_sync(self, items: Sequence[tuple[str, Any]]) -> None:
        """Blocking writes of many files, returning when all are written. Durable writes are spread
        over the store's I/O threads: each waits on the disk, and many flushes in flight wait
        together. Others are written on the calling thread, one after another, as `set_sync` would
        but with the per-call bookkeeping done once. Each file counts as one ``set`` request; the
        first failure is raised."""
        self._check_writable()
        cls = type(self)
        if cls.set_sync is not LocalStore.set_sync and cls.set_many_sync is LocalStore.set_many_sync:
            # A subclass that changes set_sync alone: every file goes through it, as it expects.
            for key, value in items:
                self.set_sync(key, value)
            return
        if not self.fsync:
            self._write_files_here(items)
            return
        timed, write = recorder_of(self).timed, self._write_file
        jobs = [(self._file_path(key), key, value) for key, value in items]

        def write_all(batch: list[tuple[str, str, Any]]) -> None:
            for job in batch:
                timed("set", write, *job, written=len(job[2]))

        size = max(1, -(-len(jobs) // _IO_THREADS))
        pending = [_io_executor().submit(write_all, jobs[start : start + size]) for start in range(0, len(jobs), size)]
        concurrent.futures.wait(pending)  # every file finished (or failed) before any error is raised
        for future in pending:
            future.result()

    def delete_sync(self, key: str) -> None:
        """Blocking ``delete`` on the calling thread."""
        self._check_writable()
        self._delete_file(self._file_path(key), key)

    async def get_many(self, requests: Iterable[tuple[str, ByteRange | None]]) -> list[bytes | None]:
        """Read many files in a few batched thread hops (no task per key)."""
        jobs = [(self._file_path(key), key, byte_range) for key, byte_range in requests]
        timed, read = recorder_of(self).timed, self._read_file  # each read counts as one request
        return await _all_of([_in_io_thread(timed, _read_operation(job[2]), read, *job) for job in jobs])

    async def set(self, key: str, value: bytes) -> None:
        """Write ``value`` to the file at ``key`` atomically, creating directories as needed."""
        self._check_writable()
        await _in_io_thread(self._write_file, self._file_path(key), key, value)

    async def set_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        """Write many files atomically in a few batched thread hops."""
        self._check_writable()
        jobs = [(self._file_path(key), key, value) for key, value in items]
        timed, write = recorder_of(self).timed, self._write_file
        await _all_of(
            [_in_io_thread(functools.partial(timed, written=len(job[2])), "set", write, *job) for job in jobs]
        )

    async def delete(self, key: str) -> None:
        """Remove the file at ``key`` and any directories that leaves empty; a missing key is fine."""
        self._check_writable()
        await _in_io_thread(self._delete_file, self._file_path(key), key)

    async def delete_many(self, keys: Iterable[str]) -> None:
        """Remove many files in a few batched thread hops."""
        self._check_writable()
        jobs = [(self._file_path(key), key) for key in keys]
        timed, remove = recorder_of(self).timed, self._delete_file
        await _all_of([_in_io_thread(timed, "delete", remove, *job) for job in jobs])

    async def exists(self, key: str) -> bool:
        """Whether a regular file is stored at ``key``."""
        return await _in_io_thread(self._stat_file, self._file_path(key), key) is not None

    async def getsize(self, key: str) -> int | None:
        """Size of the file at ``key`` from ``os.stat``, or None if missing."""
        file_stat = await _in_io_thread(self._stat_file, self._file_path(key), key)
        return None if file_stat is None else file_stat.st_size

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        """Yield every key below ``prefix`` (temporary files of writes in progress excluded)."""
        for key in await _in_io_thread(self._walk, _normalize_prefix(prefix)):
            yield key

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        """Yield the names of the files and directories directly inside ``prefix``."""
        for name in await _in_io_thread(self._children, _normalize_prefix(prefix)):
            yield name

    async def delete_prefix(self, prefix: str) -> None:
        """Delete the whole directory tree below ``prefix`` ('' empties the root, which stays)."""
        self._check_writable()
        await _in_io_thread(self._remove_tree, _normalize_prefix(prefix))

    # -- keys and paths ------------------------------------------------------------------

    def _file_path(self, key: str) -> str:
        validate_key(key)  # also rejects empty keys and empty segments
        if key.startswith(_TEMP_PREFIX) or "/" + _TEMP_PREFIX in key:
            raise ValueError(f"store key {key!r} uses the prefix {_TEMP_PREFIX!r}, reserved for temporary files")
        return self._root + os.sep + key

    def _dir_path(self, prefix: str) -> str:
        return self._root + os.sep + prefix[:-1] if prefix else self._root

    def _inside_root(self, real_path: str) -> bool:
        """Whether ``real_path`` (links resolved) is the root or below it."""
        for attempt in range(2):
            real_root = self._real_root
            if real_root is None or attempt:  # the root may have been created or moved since it was resolved
                real_root = self._real_root = os.path.realpath(self._root)
            if real_path == real_root or real_path.startswith(real_root.rstrip(os.sep) + os.sep):
                return True
        return False

    def _outside_root(self, key: str, real_path: str, action: str) -> StoreError:
        return StoreError(
            f"{self.key_url(key.rstrip('/'))}: the path leads outside the store root through a symbolic link "
            f"(to {real_path}); LocalStore does not {action} files outside its root"
        )

    def _check_parent_inside(self, path: str, key: str, action: str) -> None:
        """Raise StoreError if the directory of ``path`` resolves outside the root (``path`` itself may be a link)."""
        directory = path[: path.rindex(os.sep)]
        if directory not in self._inside_directories:  # the cache test, before a call: reads make one a file
            self._check_directory_inside(directory, key, action)

    def _check_directory_inside(self, directory: str, key: str, action: str) -> None:
        """Raise StoreError if ``directory`` (the root or a path below it) resolves outside the root.

        Walked down from the root one name at a time, each checked with one ``lstat``: a name that
        is not a link (or not there yet, to be made as a directory) keeps its parent's standing, and
        only a link is resolved in full. A whole ``os.path.realpath`` per new directory (five
        ``lstat`` calls for W1's ``c/i`` and a loop of Python) cost W1's v3 writes about 7% on ext4,
        taken while the other codec thread waited for the GIL (round 11).
        """
        if directory == self._root or directory in self._inside_directories:
            return
        parent, separator, _ = directory.rpartition(os.sep)
        if separator and parent.startswith(self._root):
            self._check_directory_inside(parent, key, action)
            try:
                is_link = stat.S_ISLNK(os.lstat(directory).st_mode)
            except OSError:  # not there (yet): this store makes it a directory, not a link
                is_link = False
        else:
            is_link = True  # not below the root as expected: resolve it in full
        if is_link:
            real_directory = os.path.realpath(directory)
            if not self._inside_root(real_directory):
                raise self._outside_root(key, real_directory, action)
        if len(self._inside_directories) >= _MAX_KNOWN_DIRECTORIES:
            self._inside_directories.clear()
        self._inside_directories.add(directory)

    def _check_opened_inside(self, fd: int, path: str, key: str) -> None:
        """Raise StoreError if the file open as ``fd`` lies outside the root."""
        if _FD_PATHS is not None:
            try:
                real_path = os.readlink(f"{_FD_PATHS}{fd}")
            except OSError:
                real_path = os.path.realpath(path)
        else:
            real_path = os.path.realpath(path)
        if not self._inside_root(real_path):
            raise self._outside_root(key, real_path, "read")

    def _error(self, key: str, exc: OSError) -> StoreError:
        """Map a filesystem error on ``key`` to the asyncarr error naming its URL."""
        url = self.key_url(key.rstrip("/"))
        reason = exc.strerror or str(exc)
        if isinstance(exc, PermissionError):
            return AccessDeniedError(
                f"{url}: permission denied ({reason}); check the permissions of the file and its directories"
            )
        return StoreError(f"{url}: {reason}")

    # -- blocking work, run on the I/O threads ---------------------------------------------

    def _read_file(self, path: str, key: str, byte_range: ByteRange | None) -> bytes | None:
        # os.open and os.read, not open(): a file object costs more than reading a small chunk.
        fd = self._open_for_reading(path, key)
        return None if fd is None else self._read_open_file(fd, key, byte_range)

    def _read_open_file(self, fd: int, key: str, byte_range: ByteRange | None) -> bytes | None:
        """What `_read_file` reads of the file open as ``fd``, which is closed here: None for a directory."""
        try:
            if byte_range is None:
                data = _read_whole(fd, self._large_files)
                self._large_files = len(data) > _FIRST_READ_BYTES  # a hint for the next read: no lock
                return data
            with open(fd, "rb", buffering=0, closefd=False) as file:
                return _read_range(file, byte_range)
        except IsADirectoryError:  # os.open opens directories; reading one fails
            return None
        except OSError as exc:
            raise self._error(key, exc) from exc
        finally:
            os.close(fd)

    def _read_file_in(self, directory_fd: int, name: str, path: str, key: str) -> bytes | None:
        """`_read_file` of a whole file named ``name`` in the open, checked directory ``directory_fd``
        (``path`` is its whole path): a link there takes `_read_file`'s checked way."""
        try:
            fd = os.open(name, _READ_FLAGS | _NOFOLLOW, dir_fd=directory_fd)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        except OSError as exc:
            if exc.errno in _LINK_ERRNOS:
                return self._read_file(path, key, None)
            if exc.errno in _NO_SUCH_NAME_ERRNOS:
                return None
            raise self._error(key, exc) from exc
        return self._read_open_file(fd, key, None)

    def _open_for_reading(self, path: str, key: str) -> int | None:
        """A descriptor of the file at ``path`` opened for reading, or None when there is none."""
        self._check_parent_inside(path, key, "read")
        try:
            try:
                fd = os.open(path, _READ_FLAGS | _NOFOLLOW)
            except OSError as exc:
                if exc.errno not in _LINK_ERRNOS:
                    raise
                fd = os.open(path, _READ_FLAGS)  # the key is a link: check where it led
                try:
                    self._check_opened_inside(fd, path, key)
                except BaseException:
                    os.close(fd)
                    raise
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        except StoreError:
            raise
        except OSError as exc:
            if exc.errno in _NO_SUCH_NAME_ERRNOS:
                return None
            raise self._error(key, exc) from exc
        return fd

    @contextlib.contextmanager
    def open_sync(self, key: str) -> Iterator[_OpenFile | None]:
        """The file at ``key`` held open for reads of parts of it (`asyncarr.shards.ShardBytes`), or
        None when missing: every part comes from the one file opened, whatever replaces it meanwhile."""
        started = time.perf_counter()
        path = self._file_path(key)
        fd = self._open_for_reading(path, key)
        if fd is None:
            recorder_of(self).record("get", time.perf_counter() - started)
            yield None
            return
        opened = None
        try:
            try:
                status = os.fstat(fd)
            except OSError as exc:
                raise self._error(key, exc) from exc
            # os.open opens directories: one at a key is no value, as for a whole read.
            if not stat.S_ISDIR(status.st_mode):
                opened = _OpenFile(fd, status.st_size, key, self)
            yield opened
        finally:
            os.close(fd)
            # One request per file opened, as a whole read of it would count, with the bytes read.
            recorder_of(self).record("get", time.perf_counter() - started, opened.bytes_read if opened else 0)

    def _write_files_here(self, items: Iterable[tuple[str, Any]]) -> None:
        # Unflushed writes only (`set_many_sync` sends durable ones to the I/O threads).
        # Small chunks cost mostly per file: on tmpfs a 2 KiB file is about 13.6 us of system calls
        # and the least Python around them; set_sync's wrappers add 2.4 us, this loop 1.6 (round 8).
        # Files of one directory are named relative to it, held open (`_open_directory`): the kernel
        # then walks the key's whole path once per directory rather than three times a file.
        record = recorder_of(self).record
        logged = _log_requests(_DEBUG)
        write, file_path = self._write_file, self._file_path
        directory, directory_fd, reopened = "", None, False
        try:
            for key, value in items:
                start = _perf_counter()
                try:
                    path = file_path(key)
                    if _WRITES_RELATIVE:
                        key_directory = path[: path.rindex(os.sep)]
                        if key_directory != directory:
                            if directory_fd is not None:
                                os.close(directory_fd)
                            # None first: a failing open below must not leave the closed descriptor to close again
                            directory, directory_fd, reopened = key_directory, None, False
                            directory_fd = self._open_directory(directory, key)
                        elif directory_fd is None and not reopened:  # the last file made the directory
                            directory_fd, reopened = self._open_directory(directory, key), True
                    write(path, key, value, False, directory_fd)
                except Exception:
                    record("set", _perf_counter() - start, failed=True)
                    raise
                seconds = _perf_counter() - start
                record("set", seconds, written=len(value))
                if logged:
                    log_request("set", self.key_url(key), "ok", seconds)
        finally:
            if directory_fd is not None:
                os.close(directory_fd)

    def _open_directory(self, directory: str, key: str, action: str = "write", flags: int = 0) -> int | None:
        """A descriptor of ``directory`` (checked to lie inside the root) to name its files by, or
        None where it cannot be opened (not there yet, not readable, or with ``flags`` O_NOFOLLOW a
        link): read or write by whole paths then."""
        self._check_directory_inside(directory, key, action)
        try:
            return os.open(directory, _DIRECTORY_FLAGS | flags)
        except OSError:
            return None

    def _write_file(
        self, path: str, key: str, value: bytes, durable: bool | None = None, directory_fd: int | None = None
    ) -> None:
        # os.replace swaps the directory entry: a link at ``path`` is replaced, its target left alone.
        # ``durable`` None: as the store says (`fsync`); callers writing many files ask it once.
        # ``directory_fd``: the key's directory, open and checked (`_open_directory`): its files are
        # then named relative to it.
        cut = path.rindex(os.sep)  # paths are root + os.sep + key: no need for os.path's generality
        directory = path[:cut]
        temp_name = f"{_TEMP_PREFIX}{_temp_token}-{next(_temp_names)}"
        if directory_fd is None:
            if directory not in self._inside_directories:  # `_check_parent_inside`, inline: once a file counts
                self._check_directory_inside(directory, key, "write")
            temp_path, target = f"{directory}{os.sep}{temp_name}", path
        else:
            temp_path, target = temp_name, path[cut + 1 :]
        if durable is None:
            durable = self.fsync
        new_directory = durable and not os.path.isdir(directory)
        try:
            # A descriptor, not a file object: open() costs an isatty ioctl and a seek per file.
            try:
                fd = os.open(temp_path, _CREATE_FLAGS, 0o666, dir_fd=directory_fd)
            except FileNotFoundError:  # the chunk's directory is not there (yet, or any more: pruned when empty)
                directory_fd, temp_path, target = None, f"{directory}{os.sep}{temp_name}", path
                fd = _create_temp_file(directory, temp_path)
            try:
                if type(value) is bytes:  # the common case, without a call: most chunks take one write
                    written = os.write(fd, value)
                    if written < len(value):
                        _write_all(fd, value, written)
                else:
                    _write_all(fd, value)
                if durable:  # the bytes on disk before the name points at them
                    os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(temp_path, target, src_dir_fd=directory_fd, dst_dir_fd=directory_fd)
            if durable:  # and the name itself (with any directory made for it) on disk before returning
                _fsync_directories(directory, self._root if new_directory else directory)
        except BaseException as exc:
            try:
                os.unlink(temp_path, dir_fd=directory_fd)
            except OSError:
                pass
            if isinstance(exc, OSError):
                raise self._error(key, exc) from exc
            raise

    def _delete_file(self, path: str, key: str) -> None:
        self._check_parent_inside(path, key, "delete")
        try:
            os.unlink(path)  # a link is removed itself, whatever it points to
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return
        except OSError as exc:
            if exc.errno in _NO_SUCH_NAME_ERRNOS or os.path.isdir(path):  # macOS: unlink() of a directory is EPERM
                return
            raise self._error(key, exc) from exc
        remaining = self._prune_empty_parents(path)
        if self.fsync:  # the removal on disk before returning: a power cut must not bring the key back
            with contextlib.suppress(FileNotFoundError):
                _fsync_directories(remaining, remaining)

    def _prune_empty_parents(self, path: str) -> str:
        """Remove the directories ``path`` leaves empty below the root; return the nearest one left."""
        directory = os.path.dirname(path)
        while len(directory) > len(self._root):
            try:
                os.rmdir(directory)
            except OSError:  # not empty (the usual case), or already gone
                return directory
            directory = os.path.dirname(directory)
        return directory

    def _stat_file(self, path: str, key: str) -> os.stat_result | None:
        self._check_parent_inside(path, key, "read")
        try:
            file_stat = os.lstat(path)
            if stat.S_ISLNK(file_stat.st_mode):
                real_path = os.path.realpath(path)
                if not self._inside_root(real_path):
                    raise self._outside_root(key, real_path, "read")
                file_stat = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except StoreError:
            raise
        except OSError as exc:
            if exc.errno in _NO_SUCH_NAME_ERRNOS:
                return None
            raise self._error(key, exc) from exc
        return file_stat if stat.S_ISREG(file_stat.st_mode) else None

    def _check_listable(self, directory: str, prefix: str) -> None:
        """Raise StoreError if the directory of ``prefix`` resolves outside the root (through a link)."""
        real_directory = os.path.realpath(directory)
        if not self._inside_root(real_directory):
            raise self._outside_root(prefix, real_directory, "list")

    def _walk(self, prefix: str) -> list[str]:
        keys: list[str] = []
        start = self._dir_path(prefix)
        if prefix:
            self._check_listable(start, prefix)
        pending = [(start, prefix)]
        while pending:
            directory, key_prefix = pending.pop()
            try:
                with os.scandir(directory) as entries:
                    for entry in entries:
                        if entry.name.startswith(_TEMP_PREFIX):
                            continue
                        if entry.is_dir(follow_symlinks=False):
                            pending.append((entry.path, key_prefix + entry.name + "/"))
                        # Links to files are keys (which reads refuse if they lead outside the root, and
                        # deletes remove); links to directories are neither followed nor listed.
                        elif entry.is_file():
                            keys.append(key_prefix + entry.name)
            except (FileNotFoundError, NotADirectoryError):
                continue
            except OSError as exc:
                if exc.errno in _NO_SUCH_NAME_ERRNOS:
                    continue
                raise self._error(key_prefix, exc) from exc
        return keys

    def _children(self, prefix: str) -> list[str]:
        directory = self._dir_path(prefix)
        if prefix:
            self._check_listable(directory, prefix)
        try:
            with os.scandir(directory) as entries:
                return [entry.name for entry in entries if not entry.name.startswith(_TEMP_PREFIX)]
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as exc:
            if exc.errno in _NO_SUCH_NAME_ERRNOS:
                return []
            raise self._error(prefix, exc) from exc

    def _remove_tree(self, prefix: str) -> None:
        def raise_unless_gone(function: Any, path: str, exc_info: Any) -> None:
            if not issubclass(exc_info[0], FileNotFoundError):
                raise exc_info[1]

        if prefix:
            self._check_parent_inside(self._dir_path(prefix), prefix, "delete")
        try:
            if not prefix:
                with os.scandir(self._root) as entries:
                    targets = [entry.path for entry in entries]
            else:
                targets = [self._dir_path(prefix)]
            # A link is unlinked, never followed; rmtree removes the links inside the tree the same way.
            for target in targets:
                if os.path.isdir(target) and not os.path.islink(target):
                    shutil.rmtree(target, onerror=raise_unless_gone)
                elif prefix == "" or os.path.islink(target):
                    os.unlink(target)
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno in _NO_SUCH_NAME_ERRNOS:
                return
            raise self._error(prefix, exc) from exc
        if prefix:
            self._prune_empty_parents(self._dir_path(prefix))


def _fsync_directories(directory: str, top: str) -> None:
    """fsync ``directory`` and each parent up to ``top`` (both included): their entries are then on disk."""
    while True:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        if os.path.samefile(directory, top) or len(directory) <= len(top):
            return
        directory = os.path.dirname(directory)


def _write_all(fd: int, value: Any, written: int = 0) -> None:
    """Write all of ``value`` (any buffer) to ``fd`` from offset ``written`` on, however many writes it takes."""
    view = value if type(value) is bytes else memoryview(value).cast("B")
    if written == 0:
        written = os.write(fd, view)
    while written < len(view):
        written += os.write(fd, memoryview(view)[written:])


def _create_temp_file(directory: str, temp_path: str) -> int:
    """Create ``temp_path`` (it must not exist) and return a descriptor open for writing it,
    creating ``directory`` (and the root) when missing."""
    for attempt in range(_CREATE_ATTEMPTS):
        try:
            return os.open(temp_path, _CREATE_FLAGS, 0o666)
        except FileNotFoundError:
            if attempt == _CREATE_ATTEMPTS - 1:
                raise
        try:
            os.makedirs(directory, exist_ok=True)
        except FileNotFoundError:
            pass  # a concurrent delete pruned a parent while we created it: try again
    raise AssertionError("unreachable")  # pragma: no cover


class _OpenFile:
    """An open file of a `LocalStore`, read in parts at offsets (``os.pread``: no shared position)."""

    def __init__(self, fd: int, size: int, key: str, store: LocalStore) -> None:
        self._fd = fd
        self.size = size
        self._key = key
        self._store = store
        self.bytes_read = 0

    def read(self, offset: int, nbytes: int) -> bytes:
        """``nbytes`` bytes from ``offset`` (fewer only where the file ends first)."""
        data = self._read(offset, nbytes)
        self.bytes_read += len(data)
        return data

    def read_into(self, offset: int, buffer: memoryview) -> int:
        """Fill ``buffer`` from ``offset``, with no new memory; the count read (less only where the file ends first)."""
        got = 0
        try:
            while got < len(buffer):
                count = _preadv(self._fd, buffer[got:], offset + got)
                if not count:
                    break
                got += count
        except OSError as exc:
            raise self._store._error(self._key, exc) from exc
        self.bytes_read += got
        return got

    def _read(self, offset: int, nbytes: int) -> bytes:
        try:
            data = _pread(self._fd, nbytes, offset)
            if len(data) == nbytes or not data:
                return data
            parts = [data]
            got = len(data)
            while got < nbytes:
                part = _pread(self._fd, nbytes - got, offset + got)
                if not part:
                    break
                parts.append(part)
                got += len(part)
            return b"".join(parts)
        except OSError as exc:
            raise self._store._error(self._key, exc) from exc


def _pread(fd: int, nbytes: int, offset: int) -> bytes:
    """``os.pread``, or a seek and a read where there is none (Windows; the descriptor is not shared)."""
    if hasattr(os, "pread"):
        return os.pread(fd, nbytes, offset)
    os.lseek(fd, offset, os.SEEK_SET)
    return os.read(fd, nbytes)


def _preadv(fd: int, buffer: memoryview, offset: int) -> int:
    """``os.preadv`` into one buffer, or a seek, a read and a copy where there is none (Windows)."""
    if hasattr(os, "preadv"):
        return os.preadv(fd, [buffer], offset)
    os.lseek(fd, offset, os.SEEK_SET)
    data = os.read(fd, len(buffer))
    buffer[: len(data)] = data
    return len(data)


def _read_whole(fd: int, large: bool) -> bytes:
    """Read all of the open file ``fd``.

    A small file, as most chunks are, takes two reads, the second finding the end. With ``large``
    (the store's last whole read was larger than a first read takes) the file's size is asked
    first and it takes one read: reading 64 KiB first cost W1's chunks of 1 MiB more system
    calls and copies (a seek, a stat and two reads a chunk while the start was read again), and
    asking the size first cost W2's 4,096 files of 2 KiB 6-10% of their read.
    A file larger than its first read, or whose size changed since it was asked, is read on to its end.
    """
    if large:
        size = os.fstat(fd).st_size
        data = os.read(fd, size + 1)  # one byte more: a file that grew since fstat shows it here
        if len(data) == size:
            return data
    else:
        data = os.read(fd, _FIRST_READ_BYTES)
        if len(data) < _FIRST_READ_BYTES:
            more = os.read(fd, _FIRST_READ_BYTES)  # a short read is almost always the end; an empty one proves it
            if not more:
                return data
            data += more
        size = os.fstat(fd).st_size
    parts = [data]
    while True:
        more = os.read(fd, max(size - len(data) + 1, _FIRST_READ_BYTES))
        if not more:
            return b"".join(parts)
        parts.append(more)


def _read_range(file: Any, byte_range: ByteRange) -> bytes:
    """Read only ``byte_range`` of an open unbuffered file."""
    if byte_range.suffix is not None:
        size = os.fstat(file.fileno()).st_size
        start = max(0, size - byte_range.suffix)
        length: int | None = size - start
    else:
        start, length = byte_range.offset, byte_range.length
    if start:
        file.seek(start)
    if length is None:
        return file.readall()
    parts = []
    while length > 0:
        part = file.read(length)
        if not part:
            break
        parts.append(part)
        length -= len(part)
    return b"".join(parts) if len(parts) != 1 else parts[0]
