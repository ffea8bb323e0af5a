"""LocalStore specifics: files on disk, atomic writes, safety of the root, error mapping.

The behaviour every store shares is tested once, in test_stores.py.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import re
import stat
import subprocess
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from asyncarr.errors import AccessDeniedError, StoreError
from asyncarr.stores import ByteRange, LocalStore

NESTED = {"zarr.json": b"{}", "a/zarr.json": b"{}", "a/c/0/0": b"chunk 0 0", "a/c/1/0": b"chunk 1 0", "b": b""}
UNSAFE_KEYS = ["../escape", "a/../../escape", "/etc/escape", "a/./b", "./a", "a\\..\\b", "C:/escape"]


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def listing(store: LocalStore, prefix: str = "") -> list[str]:
    async def collect() -> list[str]:
        return [key async for key in store.list_prefix(prefix)]

    return run(collect())


def children(store: LocalStore, prefix: str = "") -> list[str]:
    async def collect() -> list[str]:
        return [name async for name in store.list_dir(prefix)]

    return run(collect())


def fill(store: LocalStore, items: dict[str, bytes]) -> None:
    run(store.set_many(list(items.items())))


def files_under(directory: Path) -> dict[str, bytes]:
    """Every regular file below ``directory`` (relative path -> content): the reference for LocalStore."""
    return {
        str(path.relative_to(directory)): path.read_bytes() for path in sorted(directory.rglob("*")) if path.is_file()
    }


def test_local_keys_are_nested_files_under_the_root(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "root")
    fill(store, NESTED)
    assert files_under(tmp_path / "root") == NESTED
    (tmp_path / "root" / "made" / "by").mkdir(parents=True)
    (tmp_path / "root" / "made" / "by" / "hand").write_bytes(b"outside write")
    assert run(store.get("made/by/hand")) == b"outside write"
    assert store.location == "file://" + str(tmp_path / "root")


def test_local_root_is_created_by_the_first_write_not_by_reads(tmp_path: Path) -> None:
    root = tmp_path / "missing" / "root"
    store = LocalStore(root, read_only=False)
    assert run(store.get("zarr.json")) is None and listing(store) == [] and children(store) == []
    assert not root.parent.exists()
    run(store.set("zarr.json", b"{}"))
    assert (root / "zarr.json").read_bytes() == b"{}"


def test_local_unsafe_keys_write_nothing_outside_the_root(tmp_path: Path) -> None:
    parent = tmp_path / "parent"
    parent.mkdir()
    (parent / "neighbour").write_bytes(b"keep")
    store = LocalStore(parent / "root")
    before = files_under(tmp_path)
    escaping = [*UNSAFE_KEYS, "../neighbour", "a/../../neighbour"]
    for key in [*escaping, "", "a//b", "trailing/"]:
        for operation in (store.set(key, b"overwritten"), store.delete(key)):
            with pytest.raises(ValueError, match="store key"):
                run(operation)
    for prefix in [key for key in escaping if not key.startswith("/")]:  # prefixes may start with '/'
        with pytest.raises(ValueError, match="store key"):
            run(store.delete_prefix(prefix))
    assert files_under(tmp_path) == before
    assert not (parent / "root").exists()


def test_local_directory_at_a_key_reads_as_missing(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    run(store.set("group/array/zarr.json", b"{}"))
    assert run(store.get("group")) is None
    assert run(store.exists("group")) is False
    assert run(store.getsize("group/array")) is None
    run(store.delete("group"))  # a directory is not a key: nothing happens
    assert run(store.get("group/array/zarr.json")) == b"{}"


@pytest.mark.parametrize("size", [0, 1, 65535, 65536, 65537, 3 * 65536, 1 << 20])
def test_local_whole_reads_return_every_byte_around_the_small_file_size(tmp_path: Path, size: int) -> None:
    # Whole reads ask the size, then read it and one byte more: every size must come back exactly
    # as it is on disk, written by hand or by the store.
    value = bytes(range(256)) * (size // 256) + bytes(range(size % 256))
    (tmp_path / "by-hand").write_bytes(value)
    store = LocalStore(tmp_path)
    fill(store, {"by-store": value})
    for key in ("by-hand", "by-store"):
        assert store.get_sync(key) == value
        assert run(store.get(key)) == value


def test_whole_reads_ask_the_size_first_only_after_a_large_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # W1's chunks of 1 MiB were read 64 KiB first, then whole again from the start: a seek, a
    # stat and two more reads a chunk. Asking every file's size first costs small files more
    # than the read that finds their end (W2's 4,096 files of 2 KiB), so the store asks it only
    # while the files it reads are large.
    values = {"small": os.urandom(2048), "large": os.urandom(1 << 20), "empty": b""}
    for key, value in values.items():
        (tmp_path / key).write_bytes(value)
    store = LocalStore(tmp_path)
    calls: list[str] = []
    for name in ("read", "lseek", "fstat"):
        real = getattr(os, name)
        monkeypatch.setattr(os, name, lambda *args, name=name, real=real: calls.append(name) or real(*args))

    def read(key: str) -> list[str]:
        calls.clear()
        assert store.get_sync(key) == values[key]
        return list(calls)

    assert read("small") == ["read", "read"]
    assert read("large") == ["read", "fstat", "read", "read"]  # the first large one: read on to its end
    assert read("large") == ["fstat", "read"]
    assert read("large") == ["fstat", "read"]
    assert read("small") == ["fstat", "read"]
    assert read("small") == ["read", "read"]
    assert read("empty") == ["read", "read"]


@pytest.mark.parametrize("told", [0, 1, 4095, 4097, 1 << 20])
def test_a_whole_read_of_a_file_whose_size_changed_since_it_was_asked_returns_every_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, told: int
) -> None:
    # fstat's answer can be stale: a file that grew is read on to its end, one read short of the
    # size is read on too.
    value = os.urandom(4096)
    (tmp_path / "chunk").write_bytes(value)
    (tmp_path / "large").write_bytes(bytes(1 << 20))
    store = LocalStore(tmp_path)
    store.get_sync("large")  # the store now asks each file's size first
    real_fstat = os.fstat

    def stale_fstat(fd: int) -> Any:
        status = real_fstat(fd)
        return status if not stat.S_ISREG(status.st_mode) else SimpleNamespace(st_size=told, st_mode=status.st_mode)

    monkeypatch.setattr(os, "fstat", stale_fstat)
    assert store.get_sync("chunk") == value
    assert store.get_sync("large") == bytes(1 << 20)
    assert run(store.get("chunk")) == value


def test_local_range_read_of_a_huge_sparse_file_reads_only_the_range(tmp_path: Path) -> None:
    huge = tmp_path / "shard"
    with open(huge, "wb") as file:
        file.truncate(8 << 30)  # 8 GiB of holes: reading it whole would exhaust memory
        file.seek((8 << 30) - 4)
        file.write(b"tail")
    store = LocalStore(tmp_path)
    assert run(store.get("shard", ByteRange.last(6))) == b"\0\0tail"
    assert run(store.get("shard", ByteRange((8 << 30) - 2, 100))) == b"il"
    assert run(store.getsize("shard")) == 8 << 30


def test_local_reader_never_sees_a_torn_value_while_another_thread_rewrites(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    versions = [bytes([n]) * (4 << 20) for n in (1, 2)]
    run(store.set("chunk", versions[0]))
    stop = threading.Event()
    torn: list[int] = []

    async def rewrite() -> None:
        for i in range(40):
            await store.set("chunk", versions[i % 2])

    async def read() -> None:
        while not stop.is_set():
            value = await store.get("chunk")
            if value not in versions:
                torn.append(len(value or b""))

    writer = threading.Thread(target=lambda: run(rewrite()))
    reader = threading.Thread(target=lambda: run(read()))
    reader.start()
    writer.start()
    writer.join()
    stop.set()
    reader.join()
    assert torn == []
    assert [p.name for p in tmp_path.iterdir()] == ["chunk"]  # no temp file left behind


def test_local_temp_files_are_never_listed_and_their_names_are_not_keys(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    fill(store, {"a/b": b"1", "c": b"2"})
    # Leftovers of a writer that crashed between creating and renaming its temp file.
    (tmp_path / ".asyncarr-tmp-0123").write_bytes(b"partial")
    (tmp_path / "a" / ".asyncarr-tmp-4567").write_bytes(b"partial")
    assert sorted(listing(store)) == ["a/b", "c"]
    assert sorted(children(store)) == ["a", "c"] and children(store, "a") == ["b"]
    with pytest.raises(ValueError, match="reserved for temporary files"):
        run(store.set("a/.asyncarr-tmp-4567", b"x"))


def test_local_failed_write_keeps_the_old_value_and_leaves_no_temp_file(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    fill(store, {"blocked/inner": b"old", "file": b"plain"})
    with pytest.raises(StoreError, match=f"file://{tmp_path}/blocked"):
        run(store.set("blocked", b"a directory is in the way"))
    with pytest.raises(StoreError, match=f"file://{tmp_path}/file/below"):
        run(store.set("file/below", b"a file is in the way"))
    assert files_under(tmp_path) == {"blocked/inner": b"old", "file": b"plain"}


def _make_unwritable(directory: Path) -> bool:
    """Make ``directory`` refuse new files; False if this user cannot be refused (root on a plain fs)."""
    directory.chmod(0o555)
    probe = directory / "probe"
    try:
        probe.write_bytes(b"")
    except PermissionError:
        return True
    probe.unlink()
    # Root ignores permission bits but not the immutable attribute, where the filesystem has it.
    chattr = subprocess.run(["chattr", "+i", str(directory)], capture_output=True, check=False)
    return chattr.returncode == 0


def test_local_permission_error_is_access_denied_naming_the_url(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    store = LocalStore(locked)
    try:
        refused = _make_unwritable(locked)
        if refused:
            with pytest.raises(AccessDeniedError, match=f"file://{locked}/zarr.json: permission denied"):
                run(store.set("zarr.json", b"{}"))
            assert isinstance(AccessDeniedError(), PermissionError)
        else:
            # No way to refuse this user; at least a root that cannot be a directory is a StoreError.
            (tmp_path / "not_a_dir").write_bytes(b"")
            with pytest.raises(StoreError, match=re.escape(f"file://{tmp_path}/not_a_dir/zarr.json")):
                run(LocalStore(tmp_path / "not_a_dir").set("zarr.json", b"{}"))
    finally:
        subprocess.run(["chattr", "-i", str(locked)], capture_output=True, check=False)
        locked.chmod(0o755)
    assert list(locked.iterdir()) == []


def test_local_delete_prunes_empty_directories_but_keeps_the_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    store = LocalStore(root)
    fill(store, {"a/c/0/0": b"x", "a/zarr.json": b"{}"})
    run(store.delete("a/c/0/0"))
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*")) == ["a", "a/zarr.json"]
    run(store.delete("a/zarr.json"))
    assert root.is_dir() and list(root.iterdir()) == []


def test_local_delete_prefix_does_not_follow_symlinks_out_of_the_root(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_bytes(b"keep")
    root = tmp_path / "root"
    store = LocalStore(root)
    run(store.set("a/b", b"x"))
    (root / "link").symlink_to(outside, target_is_directory=True)
    (root / "a" / "link").symlink_to(outside, target_is_directory=True)
    run(store.delete_prefix("a"))
    run(store.delete_prefix("link"))
    assert (outside / "precious").read_bytes() == b"keep"
    assert not (root / "link").exists() and not (root / "a").exists()
    (root / "link").symlink_to(outside, target_is_directory=True)
    run(store.delete_prefix(""))
    assert (outside / "precious").read_bytes() == b"keep"
    assert root.is_dir() and list(root.iterdir()) == []


def test_local_store_pickles_as_root_read_only_and_fsync(tmp_path: Path) -> None:
    store = LocalStore(tmp_path, read_only=True)
    assert store.__getstate__() == {"root": str(tmp_path), "read_only": True, "fsync": None}
    restored = pickle.loads(pickle.dumps(store))
    assert restored.root == str(tmp_path) and restored.read_only is True


# -- durable writes (fsync) -----------------------------------------------------------------------


class FsyncCounter:
    """Counts what ``os.fsync`` is called on (file or directory), calling the real one."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import os
        import stat

        self.files = 0
        self.directories = 0
        real_fsync = os.fsync

        def counting_fsync(fd: int) -> None:
            if stat.S_ISDIR(os.fstat(fd).st_mode):
                self.directories += 1
            else:
                self.files += 1
            real_fsync(fd)

        monkeypatch.setattr(os, "fsync", counting_fsync)


def test_fsync_flushes_each_file_and_its_directory_before_a_write_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncarr.sync as za

    counter = FsyncCounter(monkeypatch)
    store = LocalStore(str(tmp_path / "durable"), fsync=True)
    z = za.create_array(store, shape=(8,), chunks=(4,), dtype="i4", fill_value=0)
    documents_and_dirs = (counter.files, counter.directories)
    assert documents_and_dirs[0] >= 1 and documents_and_dirs[1] >= 1
    z[...] = np.arange(1, 9)  # two chunks, in a new directory c/
    assert counter.files - documents_and_dirs[0] == 2
    assert counter.directories - documents_and_dirs[1] >= 2
    before = counter.directories
    z[0:4] = 0  # the chunk becomes fill: deleted, and the deletion flushed too
    assert counter.directories > before
    np.testing.assert_array_equal(za.open_array(str(tmp_path / "durable"), mode="r")[...], [0, 0, 0, 0, 5, 6, 7, 8])


def test_fsync_is_off_by_default_and_follows_the_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncarr
    import asyncarr.sync as za

    counter = FsyncCounter(monkeypatch)
    plain = LocalStore(str(tmp_path / "plain"))
    za.create_array(plain, shape=(4,), chunks=(4,), dtype="i4")[...] = 1
    assert (counter.files, counter.directories) == (0, 0)
    with asyncarr.config.set(fsync=True):
        za.create_array(plain, shape=(4,), chunks=(4,), dtype="i4", overwrite=True)[...] = 2
        assert counter.files >= 2
        seen = counter.files
        za.create_array(LocalStore(str(tmp_path / "off"), fsync=False), shape=(4,), dtype="i4")[...] = 3
        assert counter.files == seen  # the store's own setting wins
    assert pickle.loads(pickle.dumps(LocalStore(str(tmp_path), fsync=True))).fsync is True
    with pytest.raises(TypeError, match="fsync"):
        LocalStore(str(tmp_path), fsync="yes")  # type: ignore[arg-type]


def test_durable_writes_of_small_chunks_flush_every_file_on_several_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Small chunks take the batched path; their files are handed to the store's I/O threads a
    # batch at a time, so the disk waits overlap instead of one thread flushing file after file.
    import os
    import stat
    import threading

    import asyncarr.sync as za

    flushed_by: dict[int, int] = {}
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            flushed_by[threading.get_ident()] = flushed_by.get(threading.get_ident(), 0) + 1
        real_fsync(fd)

    store = LocalStore(str(tmp_path / "durable"), fsync=True)
    z = za.create_array(store, shape=(64, 64), chunks=(8, 8), dtype="u2", fill_value=0)
    monkeypatch.setattr(os, "fsync", counting_fsync)
    data = np.arange(1, 64 * 64 + 1, dtype="u2").reshape(64, 64)
    z[...] = data
    assert sum(flushed_by.values()) == 64  # every chunk file flushed before the write returned
    assert len(flushed_by) > 1  # by more than one thread
    assert store.metrics().requests.get("set", 0) >= 64  # each file still counts as a request
    np.testing.assert_array_equal(za.open_array(str(tmp_path / "durable"), mode="r")[...], data)


def test_batched_writes_without_fsync_are_written_on_the_calling_thread_each_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Handing a 2 KiB file to another thread costs more than writing it: set_many_sync writes
    # here, one file after another, each as atomic as set_sync's and each one request.
    store = LocalStore(tmp_path)
    written_by: set[int] = set()
    real_write_file = LocalStore._write_file

    def watched(self: LocalStore, *args: Any) -> None:
        written_by.add(threading.get_ident())
        real_write_file(self, *args)

    monkeypatch.setattr(LocalStore, "_write_file", watched)
    items = [(f"c/{i}/{j}", bytes([i, j]) * 1000) for i in range(4) for j in range(4)]
    store.set_many_sync(items)
    assert written_by == {threading.get_ident()}
    assert files_under(tmp_path) == dict(items)
    metrics = store.metrics()
    assert metrics.requests == {"set": 16} and metrics.bytes_written == 16 * 2000


def test_batched_writes_name_files_relative_to_their_directory_opened_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The kernel walks a key's whole path once per directory, not three times a file (open,
    # rename's two names): each directory is opened once, or twice where its first file made it.
    store = LocalStore(tmp_path)
    store.set_sync("c/0/0", b"old")  # one directory there before the batch
    opened: list[str] = []
    relative: list[str] = []
    real_open, real_write_file = LocalStore._open_directory, LocalStore._write_file

    def watched_open(self: LocalStore, directory: str, key: str) -> int | None:
        opened.append(os.path.relpath(directory, tmp_path))
        return real_open(self, directory, key)

    def watched_write(self: LocalStore, path: str, key: str, value: Any, durable: Any, directory_fd: Any) -> None:
        if directory_fd is not None:
            relative.append(key)
        real_write_file(self, path, key, value, durable, directory_fd)

    monkeypatch.setattr(LocalStore, "_open_directory", watched_open)
    monkeypatch.setattr(LocalStore, "_write_file", watched_write)
    items = [(f"c/{i}/{j}", bytes([i, j]) * 100) for i in range(3) for j in range(4)]
    store.set_many_sync(items)
    assert files_under(tmp_path) == dict(items)
    assert opened == ["c/0", "c/1", "c/1", "c/2", "c/2"]  # c/1 and c/2 made by their first file
    assert relative == [key for key, _ in items if key not in ("c/1/0", "c/2/0")]
    assert not [name for name in files_under(tmp_path) if ".asyncarr-tmp-" in name]


def test_a_directory_removed_after_it_was_opened_is_made_again(tmp_path: Path) -> None:
    # Deleting a directory's last key prunes the directory: a batch holding it open then writes
    # by the whole path, making the directory again, rather than failing.
    store = LocalStore(tmp_path)
    store.set_sync("c/0/0", b"old")
    directory = str(tmp_path / "c" / "0")
    directory_fd = store._open_directory(directory, "c/0/1")
    assert directory_fd is not None
    try:
        store.delete_sync("c/0/0")  # prunes c/0 and c, now empty
        assert not (tmp_path / "c").exists()
        store._write_file(os.path.join(directory, "1"), "c/0/1", b"new", False, directory_fd)
    finally:
        os.close(directory_fd)
    assert files_under(tmp_path) == {"c/0/1": b"new"}


def test_batched_writes_stop_at_the_first_failure_naming_its_key(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    fill(store, {"file": b"plain"})
    with pytest.raises(StoreError, match=f"file://{tmp_path}/file/below"):
        store.set_many_sync([("a", b"1"), ("file/below", b"a file is in the way"), ("b", b"2")])
    assert files_under(tmp_path) == {"a": b"1", "file": b"plain"}  # no temporary file left either
    metrics = store.metrics()
    assert metrics.requests == {"set": 3} and metrics.failures == 1  # the fill, "a", and the failed one
    with pytest.raises(ValueError, match=r"'\.\.' segment"):
        store.set_many_sync([("../escape", b"x")])
    assert not (tmp_path.parent / "escape").exists()


def test_a_subclass_changing_set_sync_alone_sees_every_file_of_a_batched_write(tmp_path: Path) -> None:
    # Small-chunk writes hand the store whole batches (set_many_sync); a subclass that changed
    # only set_sync must still see each file, as it did when they came one set_sync at a time.
    import asyncarr.sync as za

    class Stamping(LocalStore):
        seen: list[str] = []

        async def set(self, key: str, value: bytes) -> None:
            await super().set(key, value)

        def set_sync(self, key: str, value: bytes) -> None:
            self.seen.append(key)
            super().set_sync(key, value)

    store = Stamping(str(tmp_path / "a"))
    z = za.create_array(store, shape=(64, 64), chunks=(8, 8), dtype="u2", fill_value=0)
    data = np.arange(1, 64 * 64 + 1, dtype="u2").reshape(64, 64)
    z[...] = data
    assert sorted(key for key in Stamping.seen if key.startswith("c/")) == sorted(
        f"c/{i}/{j}" for i in range(8) for j in range(8)
    )
    np.testing.assert_array_equal(za.open_array(str(tmp_path / "a"), mode="r")[...], data)


def test_a_nodes_metadata_documents_are_read_in_one_thread_hop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from asyncarr.nodes import read_documents
    from asyncarr.stores import local

    store = LocalStore(str(tmp_path))
    run(store.set(".zarray", b"{}"))
    hops: list[int] = []
    batch = local._LoopBatcher._run
    monkeypatch.setattr(local._LoopBatcher, "_run", lambda self, jobs: (hops.append(len(jobs)), batch(self, jobs)))
    documents = run(read_documents(store, ""))  # zarr.json and the three v2 documents, asked for at once
    assert documents == {"zarr.json": None, ".zarray": b"{}", ".zgroup": None, ".zattrs": None}
    assert hops == [4]  # one thread for all four, not one each (before round 14: [1, 1, 1, 1])


def test_many_reads_yield_what_single_reads_do_each_counted(tmp_path: Path) -> None:
    # get_many_sync, the blocking read of a batch of whole chunks, against get_sync key by key:
    # present and missing keys, a directory at a key, a link that stays in the root (to a file,
    # and to a directory, whose files are then read by their whole paths), nested directories.
    root = tmp_path / "root"
    store = LocalStore(root)
    fill(store, {"0.0": b"a" * 70_000, "0.1": b"b", "c/0/0": b"c00", "c/0/1": b"", "c/1/0": b"c10", "d/x": b"dx"})
    (root / "dir_at_key").mkdir()
    (root / "link_to_file").symlink_to(root / "0.1")
    (root / "linked_dir").symlink_to(root / "c" / "0", target_is_directory=True)
    keys = [
        "0.0", "0.1", "0.2", "dir_at_key", "link_to_file", "c/0/0", "c/0/1", "c/0/2", "c/1/0",
        "linked_dir/0", "linked_dir/1", "missing/0", "c/0/0", "d/x",
    ]  # fmt: skip
    expected = [store.get_sync(key) for key in keys]
    assert expected[0] == b"a" * 70_000 and expected[2] is None and expected[3] is None and expected[9] == b"c00"
    before = store.metrics()
    assert list(store.get_many_sync(keys)) == expected
    after = store.metrics()
    assert after.requests["get"] - before.requests["get"] == len(keys)
    assert after.bytes_read - before.bytes_read == sum(len(value) for value in expected if value is not None)


def test_many_reads_refuse_what_single_reads_refuse(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_bytes(b"private")
    store = LocalStore(root)
    fill(store, {"a/0": b"0"})
    (root / "a" / "escape").symlink_to(outside / "secret")
    (root / "away").symlink_to(outside, target_is_directory=True)
    for key in ("a/escape", "away/secret"):
        with pytest.raises(StoreError, match="outside its root"):
            list(store.get_many_sync(["a/0", key]))
    for key in [*UNSAFE_KEYS, ".asyncarr-tmp-x", "a/.asyncarr-tmp-x"]:
        with pytest.raises(ValueError):
            list(store.get_many_sync(["a/0", key]))
    assert store.metrics().failures == 2 + len(UNSAFE_KEYS) + 2


def test_many_reads_open_each_directory_once_and_its_files_relative_to_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The kernel walks a directory's path once for a batch of its files, not once a file.
    store = LocalStore(tmp_path)
    items = {f"c/{i}/{j}": bytes([i, j]) for i in range(3) for j in range(4)}
    fill(store, items)
    opened: list[str] = []
    relative: list[str] = []
    real_open, real_read_in = LocalStore._open_directory, LocalStore._read_file_in

    def watched_open(self: LocalStore, directory: str, *args: Any) -> int | None:
        opened.append(os.path.relpath(directory, tmp_path))
        return real_open(self, directory, *args)

    def watched_read_in(self: LocalStore, directory_fd: int, name: str, path: str, key: str) -> bytes | None:
        relative.append(key)
        return real_read_in(self, directory_fd, name, path, key)

    monkeypatch.setattr(LocalStore, "_open_directory", watched_open)
    monkeypatch.setattr(LocalStore, "_read_file_in", watched_read_in)
    assert list(store.get_many_sync(list(items))) == list(items.values())
    assert opened == ["c/0", "c/1", "c/2"]
    assert relative == list(items)


def test_many_reads_go_through_get_sync_where_a_subclass_or_the_caller_changed_it(tmp_path: Path) -> None:
    class Stamping(LocalStore):
        seen: list[str] = []

        def get_sync(self, key: str, byte_range: ByteRange | None = None) -> bytes | None:
            self.seen.append(key)
            return super().get_sync(key, byte_range)

    fill(LocalStore(tmp_path), {"a": b"1", "b": b"2"})
    assert list(Stamping(tmp_path).get_many_sync(["a", "b", "c"])) == [b"1", b"2", None]
    assert Stamping.seen == ["a", "b", "c"]
    store = LocalStore(tmp_path)
    seen: list[str] = []
    real_get = store.get_sync
    store.get_sync = lambda key, byte_range=None: seen.append(key) or real_get(key, byte_range)  # type: ignore[method-assign]
    assert list(store.get_many_sync(["b", "a"])) == [b"2", b"1"] and seen == ["b", "a"]


def test_many_reads_of_a_root_that_is_a_link_name_files_relative_to_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The user may name the root by a link (/data -> /mnt/data): its files are still read relative
    # to it, while a link below the root is read by whole paths, each checked.
    (tmp_path / "real").mkdir()
    (tmp_path / "root").symlink_to(tmp_path / "real", target_is_directory=True)
    store = LocalStore(tmp_path / "root")
    fill(store, {"0.0": b"a", "0.1": b"b"})
    relative: list[str] = []
    real_read_in = LocalStore._read_file_in

    def watched_read_in(self: LocalStore, directory_fd: int, name: str, path: str, key: str) -> bytes | None:
        relative.append(key)
        return real_read_in(self, directory_fd, name, path, key)

    monkeypatch.setattr(LocalStore, "_read_file_in", watched_read_in)
    assert list(store.get_many_sync(["0.0", "0.1", "0.2"])) == [b"a", b"b", None]
    assert relative == ["0.0", "0.1", "0.2"]
