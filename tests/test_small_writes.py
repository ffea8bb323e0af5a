"""Writes of many small chunks to local files on two codec threads, one encoding and one writing
(`asyncarr.small_writes`): results against NumPy, chunks held by other writers, failures."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import asyncarr.sync as za
from asyncarr import config, locks
from asyncarr.errors import CodecError, StoreError
from asyncarr.stores import LocalStore


@pytest.fixture(autouse=True)
def two_codec_threads():
    with config.set(codec_threads=2):  # small chunks to local files take the two-thread path with two
        yield


class _RecordingStore(LocalStore):
    """A LocalStore noting the thread of every file it writes, and failing at ``fail_at`` if set."""

    def __init__(self, root: str, fail_at: str | None = None) -> None:
        super().__init__(root)
        self.fail_at = fail_at
        self.writers: list[str] = []

    def _write_file(self, path: str, key: str, value: Any, *args: Any) -> None:  # every file's write
        if key == self.fail_at:
            raise self._error(key, OSError(28, "No space left on device"))  # as LocalStore reports one
        if not key.startswith("."):  # chunks, not the metadata documents (written on the store's I/O threads)
            self.writers.append(threading.current_thread().name)
        super()._write_file(path, key, value, *args)


def _files(root: Path) -> list[str]:
    return sorted(str(path.relative_to(root)) for path in root.rglob("*") if path.is_file())


def test_whole_and_partial_small_chunk_writes_match_numpy_and_fill_chunks_are_not_stored(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    expected = np.zeros((300, 410), dtype="u2")
    store = _RecordingStore(str(tmp_path / "a.zarr"))
    z = za.open_array(store, mode="w", shape=expected.shape, chunks=(16, 16), dtype="u2", fill_value=0, zarr_format=2)
    writes = [
        (slice(None), slice(None), rng.integers(1, 500, expected.shape, dtype="u2")),  # every chunk whole
        (slice(7, 251), slice(3, 390), rng.integers(1, 500, (244, 387), dtype="u2")),  # partial edges
        (slice(32, 64), slice(None), np.uint16(0)),  # two rows of chunks back to fill: deleted
        (slice(100, 300, 3), slice(None, None, -2), rng.integers(1, 500, (67, 205), dtype="u2")),
    ]
    for rows, columns, value in writes:
        z[rows, columns] = value
        expected[rows, columns] = value
        np.testing.assert_array_equal(z[:], expected)
    # Partial writes run on the two codec threads; whole chunks on the caller and one codec thread
    # (`AsyncArray.write_blocking`): each way, two threads wrote files.
    assert set(store.writers) <= {"MainThread", *(f"asyncarr-codec_{i}" for i in range(2))}
    assert len(set(store.writers)) >= 2
    stored = {name for name in _files(tmp_path / "a.zarr") if not name.startswith(".")}
    assert not any(name.startswith(("2.", "3.")) for name in stored)  # the fill rows of chunks
    assert locks._process_locks == {}


def test_a_chunk_held_by_another_writer_waits_its_turn_and_loses_no_update(tmp_path: Path) -> None:
    path = str(tmp_path / "a.zarr")
    z = za.open_array(path, mode="w", shape=(64, 64), chunks=(8, 8), dtype="i4", zarr_format=2)
    held = locks.try_chunk_lock(z.store.location, "3.3")
    assert held is not None
    writer = threading.Thread(target=z.__setitem__, args=(Ellipsis, 7))
    writer.start()
    writer.join(timeout=0.5)
    assert writer.is_alive()  # every other chunk is written; 3.3 waits for the lock
    assert os.path.exists(os.path.join(path, "0.0")) and not os.path.exists(os.path.join(path, "3.3"))
    held.release()
    writer.join(timeout=30)
    assert not writer.is_alive()
    np.testing.assert_array_equal(z[:], np.full((64, 64), 7, dtype="i4"))
    assert locks._process_locks == {}


def test_a_failing_file_write_is_raised_with_its_key_and_leaves_no_lock_or_temporary_file(tmp_path: Path) -> None:
    store = _RecordingStore(str(tmp_path / "a.zarr"), fail_at="20.5")
    z = za.open_array(store, mode="w", shape=(512, 512), chunks=(16, 16), dtype="f4", zarr_format=2)
    with pytest.raises(StoreError, match="No space left") as raised:
        z[:] = np.arange(512 * 512, dtype="f4").reshape(512, 512)
    assert str(raised.value).endswith("a.zarr/20.5: No space left on device")
    assert locks._process_locks == {}
    assert not [name for name in _files(tmp_path / "a.zarr") if ".asyncarr-tmp-" in name]
    written: Any = z[:]
    # What was written is whole chunks of the new values; the failed chunk and any not reached are fill.
    assert np.all((written == 0) | (written == np.arange(512 * 512, dtype="f4").reshape(512, 512)))
    assert np.all(written[320:336, 80:96] == 0)


def test_a_chunk_failing_to_encode_mid_batch_releases_every_lock_of_its_batch(tmp_path: Path) -> None:
    # Locks are taken a batch at a time (`locks.try_chunk_locks`): a failure on the batch's 9th
    # chunk must release the 8 encoded before it and the 23 not yet reached, not only its own.
    path = str(tmp_path / "a.zarr")
    z = za.open_array(path, mode="w", shape=(256, 256), chunks=(16, 16), dtype="u2", zarr_format=2)
    pipeline = z.async_array._pipeline
    assert pipeline.plain_encoder is not None
    encode, calls = pipeline.plain_encoder, []

    def fail_at_the_41st(chunk: np.ndarray) -> Any:
        calls.append(None)
        if len(calls) == 41:  # the second batch of 32, chunk 9
            raise ValueError("the compressor refused")
        return encode(chunk)

    pipeline.__dict__["plain_encoder"] = fail_at_the_41st
    with pytest.raises(CodecError, match=r"a\.zarr/\d+\.\d+: cannot encode: the compressor refused"):
        z[...] = np.arange(256 * 256, dtype="u2").reshape(256, 256)
    assert locks._process_locks == {}
    pipeline.__dict__["plain_encoder"] = encode
    z[...] = 5  # every chunk free to write again
    np.testing.assert_array_equal(z[...], np.full((256, 256), 5, dtype="u2"))


def test_locks_taken_a_batch_at_a_time_skip_held_chunks_and_leave_no_entry_behind() -> None:
    held = locks.try_chunk_lock("somewhere", "1.0")
    taken = locks.try_chunk_locks("somewhere", ["0.0", "1.0", "2.0"])
    assert [lock is None for lock in taken] == [False, True, False]  # the held chunk is refused, the rest taken
    assert locks.try_chunk_locks("somewhere", ["0.0", "2.0"]) == [None, None]  # now held by this batch
    locks.release_chunk_locks([lock for lock in taken if lock is not None])
    assert set(locks._process_locks) == {("somewhere", "1.0")}
    assert held is not None
    held.release()
    assert locks._process_locks == {}
