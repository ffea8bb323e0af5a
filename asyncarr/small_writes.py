"""Writes of many small chunks to local files, shared by two codec threads: one prefers to encode, one to write.

Split evenly, each thread would encode its own chunks and write their files, and the two would
trade the GIL at every system call: a file write is five short calls (open, write, close,
rename, each releasing the GIL) around a few microseconds of Python, and the thread whose call
returns waits for the other's next one. On this project's 2-core VM, 4096 chunks of 2 KiB then
wrote no faster on two threads than on one. Here the encoding thread spends long stretches in the
compressor, which holds no GIL, while the writing thread makes the file system calls, so the GIL
changes hands about once a chunk instead of at every call.

The encoding thread copies a batch's chunks out of the written value in one go where they lie
side by side (`StagedEncoding`): NumPy lets go of the GIL for every copy, and a copy per chunk was
one more hand-over per chunk.

Neither thread ever waits for the other: the writing thread encodes when nothing is ready to
write, and the encoding thread writes when enough encoded chunks wait (which bounds their memory)
or nothing is left to encode. So one thread alone finishes everything, and a codec pool busy with
other work never stalls the write.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from .indexing import ChunkProjection
from .locks import release_chunk_locks, try_chunk_locks
from .stores.base import Store

__all__ = ["EncodeThenWrite", "EncodeWhole", "StagedEncoding"]

BATCH_CHUNKS = 32
"""Chunks encoded (or written) in one go: a few hundred microseconds of work, so the writing
thread starts soon and the hand-over costs little per chunk."""
MOST_ENCODED_BATCHES = 8
"""Encoded batches waiting to be written before the encoding thread writes some itself."""

EncodeChunk = Callable[[ChunkProjection, str], Any]
"""Encode one chunk whose lock the caller holds: its bytes to store, or None to delete its key."""
EncodeWhole = Callable[[np.ndarray, str], Any]
"""Encode one whole chunk of values (any memory layout) for its key: its bytes, or None to delete the key."""
Encoded = list[tuple[str, Any, Any]]
"""One encoded batch: (chunk key, bytes or None, the chunk's lock)."""


class StagedEncoding(NamedTuple):
    """A batch's chunks copied out of the written value at once, then each encoded from that copy."""

    stage: Callable[[Sequence[ChunkProjection]], np.ndarray | None]
    """The batch's chunks, one after another in a new array, or None where one copy cannot take them."""
    encode: EncodeWhole
    """Encode one of those chunks."""


class EncodeThenWrite:
    """One write of small chunks: batches to encode, batches encoded and not yet written, failures."""

    def __init__(
        self,
        store: Store,
        projections: Sequence[ChunkProjection],
        chunk_key: Callable[[tuple[int, ...]], str],
        encode_chunk: EncodeChunk,
        deferred: list[ChunkProjection],
        staged: StagedEncoding | None = None,
    ) -> None:
        self._store = store
        self._staged = staged  # batches copied at once where they can be, else `encode_chunk` each
        self._chunk_key = chunk_key
        self._encode_chunk = encode_chunk
        self._deferred = deferred  # chunks another writer holds: the caller writes them after, taking turns
        self._to_encode = collections.deque(
            projections[start : start + BATCH_CHUNKS] for start in range(0, len(projections), BATCH_CHUNKS)
        )
        self._to_write: collections.deque[Encoded] = collections.deque()
        self._errors: list[BaseException] = []

    def encoding_first(self) -> None:
        """Run on one codec thread: encode, writing only when enough waits or nothing is left to encode."""
        self._run(prefer_writing=False)

    def writing_first(self) -> None:
        """Run on another codec thread: write what is encoded, encoding only when nothing is ready."""
        self._run(prefer_writing=True)

    def finish(self) -> None:
        """After every thread has returned: release what a failure left unwritten, and raise that failure."""
        while self._to_write:
            release_chunk_locks([lock for _, _, lock in self._to_write.popleft()])
        if self._errors:
            raise self._errors[0]

    def _run(self, prefer_writing: bool) -> None:
        # deque's append and popleft are atomic: the two threads share the queues without a lock.
        try:
            while not self._errors:
                if self._to_write and (prefer_writing or len(self._to_write) >= MOST_ENCODED_BATCHES):
                    if self._write_next():
                        continue
                try:
                    projections = self._to_encode.popleft()
                except IndexError:
                    if self._write_next():
                        continue
                    return  # nothing left to encode, nothing waiting: the other thread writes what it encodes
                self._to_write.append(self._encode(projections))
        except BaseException as exc:
            self._errors.append(exc)

    def _encode(self, projections: Sequence[ChunkProjection]) -> Encoded:
        # The batch's locks in one registry update (`try_chunk_locks`), released together once its
        # files are written: a lock per chunk cost these writes about 6% on two threads (round 9).
        chunk_key, encode_chunk = self._chunk_key, self._encode_chunk
        keys = [chunk_key(projection.chunk_coords) for projection in projections]
        locks = try_chunk_locks(self._store.location, keys)
        encoded: Encoded = []
        staged = self._staged
        try:
            chunks = None if staged is None else staged.stage(projections)
            for index, (projection, key, lock) in enumerate(zip(projections, keys, locks, strict=True)):
                if lock is None:
                    self._deferred.append(projection)
                elif staged is None or chunks is None:
                    encoded.append((key, encode_chunk(projection, key), lock))
                else:
                    encoded.append((key, staged.encode(chunks[index], key), lock))
        except BaseException:
            release_chunk_locks([lock for lock in locks if lock is not None])
            raise
        return encoded

    def _write_next(self) -> bool:
        """Write the oldest encoded batch, releasing its locks; False if none was waiting."""
        try:
            batch = self._to_write.popleft()
        except IndexError:
            return False
        store = self._store
        try:
            # One call for the batch's files: a local store writes them here with its per-call
            # checks made once (`LocalStore.set_many_sync`). Chunks that became fill are deleted.
            store.set_many_sync([(key, value) for key, value, _ in batch if value is not None])
            for key, value, _ in batch:
                if value is None:
                    store.delete_sync(key)
        finally:
            release_chunk_locks([lock for _, _, lock in batch])
        return True
