"""Floors of local writes in Python, shared by `benchmarks.python_floor` and the full run.

A floor is the least a client built a given way can take: here numcodecs' Blosc compression of
each chunk (its compression function, as asyncarr calls it: `ArraySpec.blosc_compress`) and a
temporary file renamed over its key: the atomic write asyncarr and tensorstore make (zarr-python
with zarrs writes chunk files in place, truncating them first: round 12 in docs/performance.md).
`write_with_duties` adds, per chunk, what a library owes its caller (see
`write_encoder_and_writer`), so where even it is above a target, no Python client with
asyncarr's guarantees meets that target.
"""

from __future__ import annotations

import collections
import concurrent.futures
import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from asyncarr.codecs.executor import blosc_in_this_thread_alone
from asyncarr.locks import release_chunk_locks, try_chunk_locks
from asyncarr.stores.base import validate_key
from asyncarr.stores.metrics import MetricsRecorder

from .engines import ArraySpec

__all__ = [
    "FLOOR_DUTIES",
    "chunk_items",
    "floor_workers",
    "has_small_chunks",
    "write_encoded",
    "write_encoder_and_writer",
    "write_with_duties",
]

FLOOR_DUTIES = "floor: Python with a library's duties"
"""The name of `write_with_duties` in the run's tables."""
SMALL_CHUNK_BYTES = 128 * 1024
"""Below this, chunks are written by an encoding and a writing thread, as asyncarr writes them."""


def chunk_items(data: np.ndarray, spec: ArraySpec, copied: bool = True) -> list[tuple[str, np.ndarray]]:
    """Each chunk's key and values: a contiguous copy, or with ``copied`` False a view of ``data``."""
    rows, columns = (s // c for s, c in zip(spec.shape, spec.chunks, strict=True))
    step, zarr_format = spec.chunks[0], spec.zarr_format
    key = "{}.{}" if zarr_format == 2 else "c/{}/{}"
    take = np.ascontiguousarray if copied else np.asarray
    return [
        (key.format(i, j), take(data[i * step : (i + 1) * step, j * step : (j + 1) * step]))
        for i in range(rows)
        for j in range(columns)
    ]


def write_encoder_and_writer(
    root: str, chunks: list[tuple[str, np.ndarray]], encode_chunk: Callable[[np.ndarray], bytes], duties: bool = False
) -> None:
    """Two threads, one encoding batches of 32 chunks and one writing their files, each doing the
    other's work rather than wait (the encoder writes too once 8 batches wait): the GIL changes
    hands about once a chunk instead of at every file call. asyncarr's small-chunk writes do this.

    With ``duties``, each chunk also gets what a library owes it and a bare loop skips, done with
    asyncarr's own pieces: its values copied out of the caller's array (``chunks`` are then views
    of it), its in-process lock taken before encoding and released once its file is written (no
    other writer in the process tears it; a batch's locks in one registry update, as asyncarr
    takes them), its fill check (a chunk of fill is not stored), its key checked before it
    becomes a path (none escapes the root), and its write counted as a request with its latency
    (store metrics)."""
    location = f"file://{root}"
    recorder = MetricsRecorder()
    to_encode = collections.deque(chunks[start : start + 32] for start in range(0, len(chunks), 32))
    to_write: collections.deque[list[tuple[str, bytes, Any]]] = collections.deque()

    def encode(batch: list[tuple[str, np.ndarray]]) -> list[tuple[str, bytes, Any]]:
        if not duties:
            return [(key, encode_chunk(chunk), None) for key, chunk in batch]
        encoded = []
        locks = try_chunk_locks(location, [key for key, _ in batch])
        for (key, chunk), lock in zip(batch, locks, strict=True):
            chunk = np.ascontiguousarray(chunk)
            if chunk.flat[0] == 0 and not chunk.any():
                raise AssertionError("W2's data has no chunk of fill")
            encoded.append((key, encode_chunk(chunk), lock))
        return encoded

    def write_next() -> bool:
        try:
            batch = to_write.popleft()
        except IndexError:
            return False
        if not duties:
            write_encoded(root, ((key, encoded) for key, encoded, _ in batch))
            return True
        for key, _, _ in batch:
            validate_key(key)
        write_encoded(root, ((key, encoded) for key, encoded, _ in batch), recorder)
        release_chunk_locks([lock for _, _, lock in batch])
        return True

    def run(prefer_writing: bool) -> None:
        while True:
            if to_write and (prefer_writing or len(to_write) >= 8) and write_next():
                continue
            try:
                batch = to_encode.popleft()
            except IndexError:
                if write_next():
                    continue
                return
            to_write.append(encode(batch))

    os.makedirs(root, exist_ok=True)
    helper = threading.Thread(target=run, args=(False,))
    helper.start()
    run(True)
    helper.join()


def write_encoded(root: str, items: Iterable[tuple[str, bytes]], recorder: MetricsRecorder | None = None) -> None:
    """Each encoded chunk to a temporary file renamed over its key, its directory made when
    missing; each file counted as a request by ``recorder`` if one is given."""
    for key, encoded in items:
        started = time.perf_counter() if recorder else 0.0
        directory, _, name = f"{root}/{key}".rpartition("/")
        temporary = f"{directory}/.tmp-{name}"
        try:
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # no file object: cheaper
        except FileNotFoundError:
            os.makedirs(directory, exist_ok=True)
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            os.write(fd, encoded)
        finally:
            os.close(fd)
        os.replace(temporary, f"{directory}/{name}")
        if recorder:
            recorder.record("set", time.perf_counter() - started, written=len(encoded))


def has_small_chunks(spec: ArraySpec) -> bool:
    """Whether ``spec``'s chunks are small enough for an encoding and a writing thread (asyncarr's way)."""
    return int(np.prod(spec.chunks)) * np.dtype(spec.dtype).itemsize < SMALL_CHUNK_BYTES


def write_with_duties(root: str, data: np.ndarray, spec: ArraySpec) -> None:
    """Write ``data`` as ``spec``'s chunks under ``root`` on two threads, each chunk with a library's
    duties: small chunks by an encoding and a writing thread (`write_encoder_and_writer`), the
    calling thread encoding as asyncarr's facade does (`blosc_in_this_thread_alone`: in the main
    thread numcodecs would wake Blosc's threads); large ones by two long-lived worker threads,
    each taking the next chunk as it finishes one, the caller waiting, as asyncarr's codec
    threads write them.

    Not the main thread for large chunks: its heap (glibc's main arena) may be given back to the
    system and faulted in again for each chunk's copy and encoded bytes, and with half the chunks
    there round 9's floor took up to 1.5 times zarr-python+zarrs' time: it timed the allocator.
    """
    views, encode_chunk = chunk_items(data, spec, copied=False), spec.blosc_compress()
    if has_small_chunks(spec):
        with blosc_in_this_thread_alone():
            write_encoder_and_writer(root, views, encode_chunk, duties=True)
        return
    location, recorder = f"file://{root}", MetricsRecorder()
    remaining = iter(views)

    def write_chunks() -> None:
        for key, view in remaining:  # a shared iterator over a list: each chunk taken once
            locks = try_chunk_locks(location, [key])
            chunk = np.ascontiguousarray(view)
            if chunk.flat[0] == 0 and not chunk.any():
                raise AssertionError("the benchmark's data has no chunk of fill")
            encoded = encode_chunk(chunk)
            validate_key(key)
            write_encoded(root, [(key, encoded)], recorder)
            release_chunk_locks([lock for lock in locks if lock is not None])

    os.makedirs(root, exist_ok=True)
    for outcome in [floor_workers().submit(write_chunks) for _ in range(2)]:
        outcome.result()


def floor_workers() -> concurrent.futures.ThreadPoolExecutor:
    """The two worker threads the floors write large chunks on, made once, as a library's codec threads are."""
    global _WORKERS
    if _WORKERS is None:
        _WORKERS = concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="floor-writer")
    return _WORKERS


_WORKERS: concurrent.futures.ThreadPoolExecutor | None = None
