"""A floor of local whole-array reads in Python, beside `write_floors`' floor of writes.

`read_with_duties` reads an array's chunk files and decodes them into one output with the least
Python a client needs and the checks a library owes its caller (in the run's tables it is the
write floor's column, `FLOOR_DUTIES`, in the read rows): each key checked before it
becomes a path (`validate_key`), each file named relative to its directory (opened once, as a
careful client does), each Blosc frame checked against the chunk's size before anything is
decoded (`check_blosc_frame`: a stranger's frame cannot make it allocate), a missing chunk read as
the fill value, each read counted with its latency (store metrics). Decoding is the fastest
asyncarr has: c-blosc2 for frames of one block, numcodecs' c-blosc otherwise, into a scratch chunk
per thread, then one copy into the output. Where even this floor is above a target, no Python
client with asyncarr's checks meets that target.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable

import numpy as np
from numcodecs import blosc

from asyncarr.codecs.blosc_frames import decompress_into_address
from asyncarr.codecs.bounded import check_blosc_frame
from asyncarr.codecs.executor import blosc_in_this_thread_alone
from asyncarr.stores.base import validate_key
from asyncarr.stores.metrics import MetricsRecorder

from .engines import ArraySpec
from .write_floors import chunk_items, floor_workers, has_small_chunks

__all__ = ["read_with_duties"]


def read_with_duties(root: str, spec: ArraySpec) -> np.ndarray:
    """Read ``spec``'s whole array from ``root`` (chunks that divide its shape): small chunks on the
    calling thread, as asyncarr reads them (two threads would trade the GIL a chunk at a time);
    large ones on two long-lived worker threads, each taking the next chunk as it finishes one (an
    equal half each left one thread idle at the end: asyncarr's facade read W1 in 0.85-0.95 of
    such a floor's time)."""
    out = np.empty(spec.shape, dtype=spec.dtype)
    jobs = chunk_items(out, spec, copied=False)  # each chunk's key and its view of `out`
    recorder = MetricsRecorder()
    if has_small_chunks(spec):
        with blosc_in_this_thread_alone():
            _read_chunks(root, spec, jobs, recorder)
        return out
    remaining = iter(jobs)  # shared: each chunk taken once, by whichever thread is free
    for outcome in [floor_workers().submit(_read_chunks, root, spec, remaining, recorder) for _ in range(2)]:
        outcome.result()
    return out


def _read_chunks(
    root: str,
    spec: ArraySpec,
    jobs: Iterable[tuple[str, np.ndarray]],
    recorder: MetricsRecorder,
) -> None:
    scratch = np.empty(spec.chunks, dtype=spec.dtype)
    address, nbytes = scratch.ctypes.data, scratch.nbytes
    directory, directory_fd = None, -1
    try:
        for key, destination in jobs:
            started = time.perf_counter()
            validate_key(key)
            parent, _, name = key.rpartition("/")
            if parent != directory:
                if directory_fd >= 0:
                    os.close(directory_fd)
                directory_fd = -1
                directory_fd = os.open(os.path.join(root, parent), os.O_RDONLY | os.O_DIRECTORY)
                directory = parent
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=directory_fd)
            except FileNotFoundError:
                recorder.record("get", time.perf_counter() - started)
                destination[...] = 0  # the benchmark arrays' fill value
                continue
            try:
                data = os.read(fd, os.fstat(fd).st_size + 1)
            finally:
                os.close(fd)
            recorder.record("get", time.perf_counter() - started, len(data))
            frame = check_blosc_frame(data, nbytes)
            if not decompress_into_address(frame, address, nbytes):
                blosc.decompress(frame, scratch)
            destination[...] = scratch
    finally:
        if directory_fd >= 0:
            os.close(directory_fd)
