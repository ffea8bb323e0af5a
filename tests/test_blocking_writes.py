"""The sync facade writes whole chunks with no event-loop hop (`AsyncArray.write_blocking`): small
chunks of local files in the calling thread, large ones (128 KiB and more) of any store with blocking
I/O on the codec threads; every other write goes through the loop, as before."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_blocking_reads import _loop_thread_blocked

import asyncarr
import asyncarr.sync as za
from asyncarr import chunk_io, config, locks
from asyncarr.errors import CodecError, ReadOnlyError
from asyncarr.stores import LocalStore, MemoryStore

SHAPE, CHUNKS = (256, 192), (16, 16)  # 192 chunks of 512 bytes: six batches of 32
LARGE: dict[str, Any] = {"shape": (1024, 768), "chunks": (256, 256), "dtype": "u2"}  # 12 chunks of 128 KiB


@pytest.fixture(autouse=True)
def two_codec_threads():
    with config.set(codec_threads=2):  # small chunks to local files take the two-thread path with two
        yield


def _data(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(1, 1000, SHAPE, dtype="u2")


def _chunk_files(root: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in root.rglob("*")
        if path.is_file() and path.name not in ("zarr.json", ".zarray", ".zattrs")
    }


WHOLE_CHUNK_WRITES: dict[str, tuple[dict[str, Any], slice, slice]] = {
    # the array's options, rows of whole chunks to write again, the last column of chunks
    "small": ({"shape": SHAPE, "chunks": CHUNKS, "dtype": "u2"}, slice(32, 64), slice(176, None)),
    "large": (LARGE, slice(256, 512), slice(512, None)),
}


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize(("chunks", "store"), [("small", "local"), ("large", "local"), ("large", "memory")])
def test_whole_chunk_writes_finish_while_the_loop_is_busy_and_store_the_loops_bytes(
    tmp_path: Path, zarr_format: int, chunks: str, store: str
) -> None:
    layout, rows, columns = WHOLE_CHUNK_WRITES[chunks]
    options = {**layout, "zarr_format": zarr_format}
    data = np.random.default_rng(5).integers(1, 1000, options["shape"], dtype="u2")
    where: Any = str(tmp_path / "facade.zarr") if store == "local" else MemoryStore()
    facade = za.open_array(where, mode="w", **options)
    assert facade.async_array.write_blocking(Ellipsis, data) is None  # written without the loop
    with _loop_thread_blocked():  # a write through the loop would wait for it, and fail the check
        facade[...] = data
        facade[rows, :] = data[: rows.stop - rows.start]
        facade[:, columns] = 0  # back to fill: deleted, not written

    async def through_the_loop() -> None:
        z = await asyncarr.open_array(str(tmp_path / "loop.zarr"), mode="w", **options)
        await z.setitem(Ellipsis, data)
        await z.setitem((rows, slice(None)), data[: rows.stop - rows.start])
        await z.setitem((slice(None), columns), 0)

    asyncio.run(through_the_loop())
    expected = data.copy()
    expected[rows, :] = data[: rows.stop - rows.start]
    expected[:, columns] = 0
    np.testing.assert_array_equal(facade[...], expected)
    if store == "local":
        assert _chunk_files(tmp_path / "facade.zarr") == _chunk_files(tmp_path / "loop.zarr")  # byte for byte
    assert locks._process_locks == {}


def _refusals(tmp_path: Path) -> dict[str, tuple[za.Array, Any, Any]]:
    """Writes the blocking path hands to the event loop: (array, selection, value) each."""
    local = str(tmp_path / "plain.zarr")
    plain = za.open_array(local, mode="w", shape=SHAPE, chunks=CHUNKS, dtype="u2")
    records = za.open_array(
        str(tmp_path / "records.zarr"), mode="w", shape=SHAPE, chunks=CHUNKS, dtype=[("x", "u2"), ("y", "f4")]
    )
    durable = za.open_array(
        LocalStore(str(tmp_path / "durable.zarr"), fsync=True), mode="w", shape=SHAPE, chunks=CHUNKS
    )
    locked = za.open_array(
        str(tmp_path / "locked.zarr"),
        mode="w",
        shape=SHAPE,
        chunks=CHUNKS,
        dtype="u2",
        synchronizer=za.ProcessSynchronizer(str(tmp_path / "sync")),
    )
    large = za.open_array(str(tmp_path / "large.zarr"), mode="w", **LARGE)
    memory = za.open_array(MemoryStore(), mode="w", shape=SHAPE, chunks=CHUNKS, dtype="u2")
    return {
        "parts of chunks": (plain, (slice(3, 40), slice(None)), 7),
        "an orthogonal selection": (plain, ([0, 5], slice(None)), 7),
        "another array as the value": (plain, Ellipsis, memory),
        "fields": (records, Ellipsis, 7),
        "files flushed to disk": (durable, Ellipsis, 7),
        "a lock across processes": (locked, Ellipsis, 7),
        "parts of chunks of 128 KiB": (large, (slice(0, 300), slice(None)), 7),
        "a store without two writing threads": (memory, Ellipsis, 7),
    }


@pytest.mark.parametrize(
    "case",
    [
        "parts of chunks",
        "an orthogonal selection",
        "another array as the value",
        "fields",
        "files flushed to disk",
        "a lock across processes",
        "parts of chunks of 128 KiB",
        "a store without two writing threads",
    ],
)
def test_other_writes_are_left_to_the_event_loop_and_still_match_numpy(tmp_path: Path, case: str) -> None:
    z, selection, value = _refusals(tmp_path)[case]
    assert z.async_array.write_blocking(selection, value) is NotImplemented
    expected = np.array(z[...])
    expected[selection] = np.asarray(value[...] if isinstance(value, za.Array) else value).astype(z.dtype)
    if case == "an orthogonal selection":
        z.oindex[selection] = value
    else:
        z[selection] = value
    np.testing.assert_array_equal(z[...], expected)


def test_with_the_chunk_cache_on_a_write_goes_through_the_loop_and_reads_see_it(tmp_path: Path) -> None:
    z = za.open_array(str(tmp_path / "a.zarr"), mode="w", shape=SHAPE, chunks=CHUNKS, dtype="u2")
    z[...] = 1
    with config.set(chunk_cache_bytes=1 << 20):
        assert z[0, 0] == 1  # the chunk is now cached
        assert z.async_array.write_blocking(Ellipsis, 2) is NotImplemented
        z[...] = 2
        np.testing.assert_array_equal(z[...], np.full(SHAPE, 2, dtype="u2"))


def test_a_read_only_array_refuses_the_write_and_nothing_changes(tmp_path: Path) -> None:
    path = str(tmp_path / "a.zarr")
    za.open_array(path, mode="w", shape=SHAPE, chunks=CHUNKS, dtype="u2")[...] = 3
    read_only = za.open_array(path, mode="r")
    with pytest.raises(ReadOnlyError, match="read-only"):
        read_only[...] = 4
    np.testing.assert_array_equal(read_only[...], np.full(SHAPE, 3, dtype="u2"))


def test_a_value_of_the_wrong_shape_is_refused_before_any_chunk_is_written(tmp_path: Path) -> None:
    path = tmp_path / "a.zarr"
    z = za.open_array(str(path), mode="w", shape=SHAPE, chunks=CHUNKS, dtype="u2")
    with pytest.raises(ValueError, match="could not broadcast"):
        z[...] = np.ones((3, 3), dtype="u2")
    assert _chunk_files(path) == {}


def test_threads_writing_rows_of_whole_chunks_at_once_match_numpy(tmp_path: Path) -> None:
    z = za.open_array(str(tmp_path / "a.zarr"), mode="w", shape=SHAPE, chunks=CHUNKS, dtype="u2")
    data = _data(4)

    def write_rows(first: int) -> None:
        for start in range(first, SHAPE[0], 64):  # each thread its own rows of chunks, 16 rows at a time
            z[start : start + 16, :] = data[start : start + 16]

    threads = [threading.Thread(target=write_rows, args=(first,)) for first in range(0, 64, 16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    np.testing.assert_array_equal(z[...], data)
    assert locks._process_locks == {}


def test_chunks_another_writer_holds_are_written_on_the_loop_once_it_lets_go(tmp_path: Path) -> None:
    path = str(tmp_path / "a.zarr")
    z = za.open_array(path, mode="w", shape=SHAPE, chunks=CHUNKS, dtype="u2", zarr_format=2)
    held = locks.try_chunk_lock(z.store.location, "5.7")
    assert held is not None
    writer = threading.Thread(target=z.__setitem__, args=(Ellipsis, 9))
    writer.start()
    writer.join(timeout=0.5)
    assert writer.is_alive()  # every other chunk is written in the thread; 5.7 waits its turn on the loop
    assert os.path.exists(os.path.join(path, "0.0")) and not os.path.exists(os.path.join(path, "5.7"))
    held.release()
    writer.join(timeout=30)
    assert not writer.is_alive()
    np.testing.assert_array_equal(z[...], np.full(SHAPE, 9, dtype="u2"))
    assert locks._process_locks == {}


def test_threads_writing_the_same_chunks_lose_none_and_leave_each_whole_from_one_writer(tmp_path: Path) -> None:
    # Whole-chunk writes from two threads over the same chunks, each taking the other's held
    # chunks to the loop when they meet: every chunk is stored (none left as fill), whole, from one
    # writer, and no call hangs or leaves a lock behind.
    z = za.open_array(str(tmp_path / "a.zarr"), mode="w", shape=SHAPE, chunks=CHUNKS, dtype="u2")

    def write(value: int) -> None:
        for _ in range(10):
            z[...] = value

    threads = [threading.Thread(target=write, args=(value,)) for value in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    written = np.asarray(z[...])
    for row in range(0, SHAPE[0], CHUNKS[0]):
        for column in range(0, SHAPE[1], CHUNKS[1]):
            chunk = written[row : row + CHUNKS[0], column : column + CHUNKS[1]]
            assert chunk.min() == chunk.max() and chunk.min() in (1, 2), (row, column)
    assert locks._process_locks == {}


def test_a_large_chunk_another_writer_holds_is_written_on_the_loop_once_it_lets_go(tmp_path: Path) -> None:
    path = str(tmp_path / "a.zarr")
    z = za.open_array(path, mode="w", zarr_format=2, **LARGE)
    held = locks.try_chunk_lock(z.store.location, "2.1")
    assert held is not None
    writer = threading.Thread(target=z.__setitem__, args=(Ellipsis, 9))
    writer.start()
    writer.join(timeout=0.5)
    assert writer.is_alive()  # every other chunk is written on the codec threads; 2.1 waits its turn
    assert os.path.exists(os.path.join(path, "0.0")) and not os.path.exists(os.path.join(path, "2.1"))
    held.release()
    writer.join(timeout=30)
    assert not writer.is_alive()
    np.testing.assert_array_equal(z[...], np.full(LARGE["shape"], 9, dtype="u2"))
    assert locks._process_locks == {}


def test_a_large_chunk_failing_to_encode_raises_and_leaves_every_stored_chunk_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "a.zarr"
    z = za.open_array(str(path), mode="w", zarr_format=2, **LARGE)
    z[...] = 1
    before = _chunk_files(path)
    pipeline = z.async_array._chunk_io().pipeline
    encode = pipeline.encode

    def failing_encode(chunk: np.ndarray, key: str) -> bytes:
        if key.endswith("1.1"):
            raise CodecError(f"chunk {key}: cannot encode: broken on purpose")
        return encode(chunk, key)

    monkeypatch.setattr(pipeline, "encode", failing_encode)
    with pytest.raises(CodecError, match="broken on purpose"):
        z[...] = 2
    after = _chunk_files(path)
    assert after.keys() == before.keys()  # no chunk lost, no temporary file left
    stored = np.asarray(za.open_array(str(path), mode="r")[...])
    for row in range(0, LARGE["shape"][0], 256):
        for column in range(0, LARGE["shape"][1], 256):
            chunk = stored[row : row + 256, column : column + 256]
            assert chunk.min() == chunk.max() and chunk.min() in (1, 2), (row, column)  # whole, old or new
    assert stored[256, 256] == 1
    assert locks._process_locks == {}


class _LoopOnlyMemoryStore(MemoryStore):
    """A MemoryStore without blocking I/O: every chunk is written by the general path, one task each."""

    supports_sync_io = False


def _stored_chunks(store: Any) -> dict[str, bytes]:
    """The chunk keys and bytes of ``store`` (a local path or a MemoryStore), metadata left out."""
    if isinstance(store, str):
        stored = {key.replace(os.sep, "/"): value for key, value in _chunk_files(Path(store)).items()}
    else:

        async def keys() -> list[str]:
            return [key async for key in store.list_prefix("")]

        stored = {key: bytes(store.get_sync(key)) for key in asyncio.run(keys())}
    return {key: value for key, value in stored.items() if not key.endswith(("zarr.json", ".zarray", ".zattrs"))}


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("write_empty_chunks", [False, True])
def test_whole_large_chunks_store_the_general_paths_bytes_edges_and_fill_included(
    tmp_path: Path, zarr_format: int, write_empty_chunks: bool
) -> None:
    # 5 x 4 chunks of 128 KiB, the last row and column cut by the array's edge, one of them all fill.
    options: dict[str, Any] = {"shape": (1200, 900), "chunks": (256, 256), "dtype": "u2", "zarr_format": zarr_format}
    data = np.random.default_rng(9).integers(1, 1000, options["shape"], dtype="u2")
    data[256:512, 512:768] = 0
    reference = _LoopOnlyMemoryStore()
    za.create(store=reference, write_empty_chunks=write_empty_chunks, **options)[...] = data
    expected = _stored_chunks(reference)
    assert len(expected) == 20 - (not write_empty_chunks)
    for store in (str(tmp_path / "local.zarr"), MemoryStore()):
        array = za.create(store=store, write_empty_chunks=write_empty_chunks, **options)
        array[...] = data  # the facade's way: no event loop
        assert _stored_chunks(store) == expected
        again = za.open_array(store, mode="r+", write_empty_chunks=write_empty_chunks).async_array
        asyncio.run(again.setitem(Ellipsis, data[::-1]))  # the event loop's batches
        asyncio.run(again.setitem(Ellipsis, data))
        assert _stored_chunks(store) == expected
        np.testing.assert_array_equal(array[...], data)


RUNS_OF_SMALL_CHUNKS: dict[str, dict[str, Any]] = {
    # 64 chunks a row of chunks: `small_writes`' batches of 32 each lie side by side in one copy
    "2-d": {"shape": (64, 1024), "chunks": (16, 16), "dtype": "u2", "fill_value": 0},
    "3-d": {"shape": (4, 16, 512), "chunks": (2, 8, 8), "dtype": "i4", "fill_value": 0},
    "1-d": {"shape": (8192,), "chunks": (64,), "dtype": "u2", "fill_value": 0},
    "NaN fill": {"shape": (64, 1024), "chunks": (16, 16), "dtype": "f4", "fill_value": float("nan")},
}


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("write_empty_chunks", [False, True])
@pytest.mark.parametrize("layout", list(RUNS_OF_SMALL_CHUNKS))
def test_runs_of_small_chunks_copied_at_once_store_the_general_paths_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, zarr_format: int, write_empty_chunks: bool, layout: str
) -> None:
    options = {**RUNS_OF_SMALL_CHUNKS[layout], "zarr_format": zarr_format}
    shape, chunks = options["shape"], options["chunks"]
    data = np.random.default_rng(4).integers(1, 1000, shape).astype(options["dtype"])
    fill_chunk = tuple(slice(c, 2 * c) for c in chunks)  # the second chunk along each axis: all fill
    data[fill_chunk] = options["fill_value"]
    reference = _LoopOnlyMemoryStore()
    za.create(store=reference, write_empty_chunks=write_empty_chunks, **options)[...] = data
    expected = _stored_chunks(reference)
    assert len(expected) == np.prod([s // c for s, c in zip(shape, chunks, strict=True)]) - (not write_empty_chunks)
    runs: list[Any] = []
    real_runs = asyncarr.chunk_io.side_by_side_chunks

    def counted(projections: Any, grid: tuple[int, ...]) -> Any:
        runs.append(real_runs(projections, grid))
        return runs[-1]

    monkeypatch.setattr(asyncarr.chunk_io, "side_by_side_chunks", counted)
    for writer in ("facade", "event loop"):
        path = str(tmp_path / f"{writer}.zarr")
        array = za.create(store=path, write_empty_chunks=write_empty_chunks, **options)
        if writer == "facade":
            array[...] = data  # the caller and one codec thread, no event loop
        else:
            asyncio.run(array.async_array.setitem(Ellipsis, data))  # `small_writes` on two codec threads
        assert _stored_chunks(path) == expected, writer
        np.testing.assert_array_equal(array[...], data)
    assert runs and all(run is not None for run in runs)  # every batch was one copy


@pytest.mark.parametrize(("count", "chunk_nbytes"), [(256, 1 << 20), (12, 128 * 1024), (3, 1 << 20), (4096, 2048)])
def test_two_threads_batches_shrink_to_the_smallest_worth_a_thread_and_cover_each_chunk_once(
    count: int, chunk_nbytes: int
) -> None:
    projections: list[Any] = list(range(count))
    batches = chunk_io._batches(projections, 2, chunk_nbytes)
    assert [projection for batch in batches for projection in batch] == projections  # in order, each once
    sizes = [len(batch) for batch in batches]
    smallest = -(-chunk_io._MIN_BATCH_BYTES // chunk_nbytes)
    assert sizes == sorted(sizes, reverse=True)
    assert sizes[0] <= max(smallest, -(-count // 4))  # the first takes a quarter of the chunks at most
    # The threads end within one small batch of each other: the last two are the smallest there are.
    assert all(size <= smallest for size in sizes[-2:])


@pytest.mark.parametrize("operation", ["write", "read"])
def test_large_chunks_reach_the_codec_threads_in_shrinking_batches_ending_in_single_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, operation: str
) -> None:
    options: dict[str, Any] = {"shape": (2048, 2048), "chunks": (256, 512), "dtype": "u2"}  # 32 chunks of 256 KiB
    data = np.random.default_rng(3).integers(1, 1000, options["shape"], dtype="u2")
    array = za.create(store=str(tmp_path / "large.zarr"), **options)
    if operation == "read":
        array[...] = data
    job_name = "_write_batch" if operation == "write" else "_read_batch"
    job = getattr(chunk_io.ChunkIO, job_name)
    sizes: list[int] = []

    def recorded(self: Any, projections: Any, *args: Any, **kwargs: Any) -> Any:
        sizes.append(len(projections))
        return job(self, projections, *args, **kwargs)

    monkeypatch.setattr(chunk_io.ChunkIO, job_name, recorded)
    if operation == "write":
        array[...] = data
        monkeypatch.undo()
        np.testing.assert_array_equal(array[...], data)
    else:
        np.testing.assert_array_equal(array[...], data)
    assert sum(sizes) == 32
    assert sorted(sizes)[:2] == [1, 1]  # with equal batches (before round 14) the smallest was 4
