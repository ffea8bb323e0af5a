"""The store conformance suite (every store, one class) and the local, memory, zip and mapping specifics.

A new store joins the suite by adding a `StoreCase` to `STORE_CASES`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import pickle
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import hypothesis
import pytest
import zict
from emulators import azure as azure_emulator
from emulators import gcs as gcs_emulator
from emulators import http as http_emulator
from emulators import s3 as s3_emulator
from hypothesis import strategies as st

from asyncarr.errors import ReadOnlyError, StoreError
from asyncarr.stores import ByteRange, LocalStore, MappingStore, MemoryStore, Store, ZipStore


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


async def collect(keys: AsyncIterator[str]) -> list[str]:
    return [key async for key in keys]


def listing(store: Store, prefix: str = "") -> list[str]:
    return run(collect(store.list_prefix(prefix)))


def children(store: Store, prefix: str = "") -> list[str]:
    return run(collect(store.list_dir(prefix)))


def fill(store: Store, items: dict[str, bytes]) -> None:
    run(store.set_many(list(items.items())))


# -- the stores under test --------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class StoreCase:
    """How to make one kind of store for the suite, and what it can do."""

    kind: str
    make: Callable[[Path], Store]
    reopen_read_only: Callable[[Store], Store]
    rewrites: bool = True
    """False: existing keys cannot be overwritten or deleted (zip); doing so raises ValueError."""
    pickles_by_reference: bool = True
    """False: unpickling copies the data (a MappingStore pickles its dict), so the location differs."""


def _zip_read_only(store: Store) -> Store:
    assert isinstance(store, ZipStore)
    run(store.close())
    return ZipStore(store.path, mode="r")


STORE_CASES = [
    StoreCase("memory", lambda tmp: MemoryStore(), lambda s: MemoryStore(name=s.name, read_only=True)),  # type: ignore[attr-defined]
    StoreCase("local", lambda tmp: LocalStore(tmp / "root"), lambda s: LocalStore(s.root, read_only=True)),  # type: ignore[attr-defined]
    StoreCase("zip", lambda tmp: ZipStore(tmp / "data.zip", mode="w"), _zip_read_only, rewrites=False),
    StoreCase(
        "mapping",
        lambda tmp: MappingStore({}),
        lambda s: MappingStore(s.mapping, read_only=True),  # type: ignore[attr-defined]
        pickles_by_reference=False,
    ),
    # Real servers on 127.0.0.1, started once per session (see tests/emulators/).
    StoreCase("s3", s3_emulator.make_store, s3_emulator.reopen_read_only),
    StoreCase("azure", azure_emulator.make_store, azure_emulator.reopen_read_only),
    StoreCase("gcs", gcs_emulator.make_store, gcs_emulator.reopen_read_only),
    StoreCase("http", http_emulator.make_store, http_emulator.reopen_read_only),
]


@pytest.fixture(params=STORE_CASES, ids=lambda case: case.kind)
def store_case(request: pytest.FixtureRequest) -> StoreCase:
    return request.param


@pytest.fixture
def store(store_case: StoreCase, tmp_path: Path) -> Any:
    created = store_case.make(tmp_path)
    yield created
    run(created.close())


NESTED = {
    "zarr.json": b"{}",
    "a/zarr.json": b'{"node_type": "array"}',
    "a/c/0/0": b"chunk 0 0",
    "a/c/0/1": b"chunk 0 1",
    "a/c/1/0": b"chunk 1 0",
    "ab/x": b"sibling with a common prefix",
    "b": b"",
}
UNSAFE_KEYS = ["../escape", "a/../../escape", "/etc/escape", "a/./b", "./a", "a\\..\\b", "C:/escape"]


# Leaf names never double as directory names: a filesystem cannot hold both "a" and "a/x".
_RANDOM_KEYS = st.builds(
    lambda dirs, leaf: "/".join([*dirs, leaf]),
    st.lists(st.sampled_from(["a", "b"]), max_size=2),
    st.sampled_from(["x", "y", "zarr.json"]),
)
_RANDOM_PREFIXES = ["", "a", "b", "a/a", "a/b", "b/a"]
_RANDOM_OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("set"), _RANDOM_KEYS, st.binary(max_size=16)),
        st.tuples(st.just("delete"), _RANDOM_KEYS),
        st.tuples(st.just("delete_prefix"), st.sampled_from(_RANDOM_PREFIXES)),
    ),
    max_size=25,
)


def _children_in(model: dict[str, bytes], prefix: str) -> list[str]:
    start = prefix + "/" if prefix else ""
    return sorted({key[len(start) :].split("/")[0] for key in model if key.startswith(start)})


class TestStoreConformance:
    """Behaviour every store shares; parametrised over `STORE_CASES`."""

    @hypothesis.settings(
        max_examples=15, deadline=None, suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture]
    )
    @hypothesis.given(operations=_RANDOM_OPERATIONS)
    def test_random_writes_and_deletes_read_and_list_like_a_dict(
        self, store_case: StoreCase, operations: list[tuple[Any, ...]]
    ) -> None:
        model: dict[str, bytes] = {}

        async def apply_and_compare(store: Store) -> None:
            for name, target, *value in operations:
                below = [k for k in model if k == target or k.startswith(target + "/") or not target]
                if name == "delete_prefix":
                    below = [k for k in below if k != target]
                if below and not store_case.rewrites:
                    continue  # zip members cannot be rewritten or deleted
                if name == "set":
                    await store.set(target, value[0])
                    model[target] = value[0]
                elif name == "delete":
                    await store.delete(target)
                    model.pop(target, None)
                else:
                    await store.delete_prefix(target)
                    for key in below:
                        del model[key]
            assert sorted([key async for key in store.list_prefix("")]) == sorted(model)
            for prefix in _RANDOM_PREFIXES:
                assert sorted([name async for name in store.list_dir(prefix)]) == _children_in(model, prefix)
            assert await store.get_many([(key, None) for key in model]) == list(model.values())

        with tempfile.TemporaryDirectory() as scratch:
            store = store_case.make(Path(scratch))
            try:
                run(apply_and_compare(store))
            finally:
                run(store.close())

    def test_set_then_get_returns_the_same_bytes(self, store: Store) -> None:
        values = {"zarr.json": b'{"zarr_format": 3}', ".zattrs": b"{}", "g/c/0/0": os.urandom(100_000), "empty": b""}
        fill(store, values)
        for key, value in values.items():
            assert run(store.get(key)) == value

    def test_overwrite_replaces_the_value_or_is_refused_where_rewrites_are_impossible(
        self, store: Store, store_case: StoreCase
    ) -> None:
        run(store.set("k", b"old"))
        if store_case.rewrites:
            run(store.set("k", b"new value"))
            assert run(store.get("k")) == b"new value"
        else:
            with pytest.raises(ValueError, match=r"/k: the key already exists and zip members cannot be rewritten"):
                run(store.set("k", b"new value"))
            assert run(store.get("k")) == b"old"

    def test_missing_key_reads_as_none(self, store: Store) -> None:
        run(store.set("present", b"x"))
        assert run(store.get("absent")) is None
        assert run(store.get("absent", ByteRange(0, 4))) is None
        assert run(store.get("present/below")) is None
        assert run(store.exists("absent")) is False
        assert run(store.getsize("absent")) is None

    def test_byte_ranges_match_python_slicing(self, store: Store) -> None:
        value = bytes(range(256)) * 40
        run(store.set("v", value))
        n = len(value)
        expected = {
            ByteRange(0, 10): value[0:10],
            ByteRange(1000, 1): value[1000:1001],
            ByteRange(5): value[5:],
            ByteRange(100, 0): b"",
            ByteRange(n - 3, 10): value[n - 3 :],
            ByteRange(n + 5, 4): b"",
            ByteRange(n + 5): b"",
            ByteRange.last(7): value[-7:],
            ByteRange.last(0): b"",
            ByteRange.last(n + 100): value,
        }
        for byte_range, reference in expected.items():
            assert run(store.get("v", byte_range)) == reference, byte_range
        fetched = run(store.get_many([("v", r) for r in expected]))
        assert fetched == list(expected.values())

    def test_exists_and_getsize_follow_writes(self, store: Store) -> None:
        run(store.set("a/b", b"12345"))
        assert run(store.exists("a/b")) is True
        assert run(store.exists("a")) is False  # a 'directory' is not a key
        assert run(store.getsize("a/b")) == 5

    def test_delete_removes_the_key_and_a_missing_key_is_fine(self, store: Store, store_case: StoreCase) -> None:
        run(store.set("a/b", b"x"))
        run(store.delete("never/written"))
        if store_case.rewrites:
            run(store.delete("a/b"))
            assert run(store.get("a/b")) is None
            assert run(store.exists("a/b")) is False
            assert listing(store) == [] and children(store) == []
        else:
            with pytest.raises(ValueError, match="cannot be deleted"):
                run(store.delete("a/b"))
            assert run(store.get("a/b")) == b"x"

    def test_list_prefix_yields_full_keys_below_the_prefix(self, store: Store) -> None:
        fill(store, NESTED)
        below = {prefix: {k for k in NESTED if k.startswith(prefix + "/")} for prefix in ("a", "a/c/0", "ab")}
        assert sorted(listing(store)) == sorted(NESTED)
        assert sorted(listing(store, "a")) == sorted(below["a"])
        assert sorted(listing(store, "a/")) == sorted(below["a"])
        assert sorted(listing(store, "a/c/0")) == sorted(below["a/c/0"])
        assert sorted(listing(store, "ab")) == sorted(below["ab"])
        assert listing(store, "nothing/here") == []

    def test_list_dir_yields_each_child_once(self, store: Store) -> None:
        fill(store, NESTED)
        assert sorted(children(store)) == ["a", "ab", "b", "zarr.json"]
        assert sorted(children(store, "a")) == ["c", "zarr.json"]
        assert sorted(children(store, "a/c/")) == ["0", "1"]
        assert sorted(children(store, "a/c/0")) == ["0", "1"]
        assert children(store, "missing") == []

    def test_delete_prefix_removes_only_keys_below_it(self, store: Store, store_case: StoreCase) -> None:
        fill(store, NESTED)
        run(store.delete_prefix("not/there"))
        if not store_case.rewrites:
            with pytest.raises(ValueError, match="cannot delete"):
                run(store.delete_prefix("a"))
            assert sorted(listing(store)) == sorted(NESTED)
            return
        run(store.delete_prefix("a"))
        assert sorted(listing(store)) == ["ab/x", "b", "zarr.json"]
        assert sorted(children(store)) == ["ab", "b", "zarr.json"]
        run(store.delete_prefix(""))
        assert listing(store) == []

    def test_get_many_and_set_many_handle_many_keys(self, store: Store) -> None:
        items = {f"arr/c/{i // 30}/{i % 30}": os.urandom(i % 97) for i in range(600)}
        run(store.set_many(list(items.items())))
        requests = [(key, None) for key in items] + [("arr/c/missing", None), ("arr/c/0/5", ByteRange(1, 2))]
        expected = [*items.values(), None, items["arr/c/0/5"][1:3]]
        assert run(store.get_many(requests)) == expected
        assert sorted(listing(store, "arr")) == sorted(items)

    def test_blocking_many_reads_yield_what_gets_do_each_counted(self, store: Store) -> None:
        # get_many_sync, the blocking read of a batch of whole chunks: for stores with blocking I/O;
        # the others refuse it as they refuse get_sync, naming what is missing.
        if not store.supports_sync_io:
            with pytest.raises(NotImplementedError, match="has no blocking get"):
                list(store.get_many_sync(["arr/c/0/0"]))
            return
        items = {f"arr/c/{i // 7}/{i % 7}": os.urandom(i % 97) for i in range(40)}
        run(store.set_many(list(items.items())))
        keys = [*items, "arr/c/missing", "arr/c/0/0", "elsewhere/x"]
        before = store.metrics().requests.get("get", 0)
        assert list(store.get_many_sync(keys)) == [*items.values(), None, items["arr/c/0/0"], None]
        assert store.metrics().requests.get("get", 0) - before == len(keys)
        for key in UNSAFE_KEYS:
            with pytest.raises(ValueError, match="store key"):
                list(store.get_many_sync(["arr/c/0/0", key]))

    def test_pickled_store_reads_the_same_data_and_accepts_writes(self, store: Store, store_case: StoreCase) -> None:
        fill(store, NESTED)
        payload = pickle.dumps(store)
        run(store.close())
        restored = pickle.loads(payload)
        try:
            assert type(restored) is type(store)
            assert (restored.location == store.location) is store_case.pickles_by_reference
            assert sorted(listing(restored)) == sorted(NESTED)
            assert run(restored.get_many([(k, None) for k in NESTED])) == list(NESTED.values())
            run(restored.set("after/unpickle", b"new"))
            assert run(restored.get("after/unpickle")) == b"new"
        finally:
            run(restored.close())

    def test_read_only_store_rejects_writes_and_stays_unchanged(self, store: Store, store_case: StoreCase) -> None:
        fill(store, NESTED)
        read_only = store_case.reopen_read_only(store)
        attempts = [
            read_only.set("zarr.json", b"changed"),
            read_only.set("new", b"x"),
            read_only.set_many([("new2", b"x")]),
            read_only.delete("a/zarr.json"),
            read_only.delete_prefix("a"),
            read_only.delete_prefix(""),
        ]
        for attempt in attempts:
            with pytest.raises(ReadOnlyError, match="read-only"):
                run(attempt)
        assert sorted(listing(read_only)) == sorted(NESTED)
        assert run(read_only.get_many([(k, None) for k in NESTED])) == list(NESTED.values())
        run(read_only.close())

    def test_unsafe_keys_are_rejected_with_value_error(self, store: Store) -> None:
        for key in UNSAFE_KEYS:
            for operation in (store.set(key, b"x"), store.get(key), store.delete(key), store.exists(key)):
                with pytest.raises(ValueError, match="store key"):
                    run(operation)
        assert listing(store) == []

    def test_location_names_the_store_by_a_url(self, store: Store, store_case: StoreCase) -> None:
        scheme = {
            "memory": "memory://",
            "local": "file:///",
            "zip": "zip:///",
            "mapping": "mapping://dict-",
            "s3": "s3://",
            "azure": "az://",
            "gcs": "gs://",
            "http": "http://127.0.0.1:",
        }
        assert store.location.startswith(scheme[store_case.kind])
        assert store.key_url("a/b") == store.location + "/a/b"


# -- MemoryStore ------------------------------------------------------------------------------


def test_memory_stores_with_one_name_share_their_data() -> None:
    writer = MemoryStore(name="test-shared-name")
    run(writer.set("k", b"v"))
    del writer
    reader = MemoryStore(name="test-shared-name", read_only=True)
    assert reader.location == "memory://test-shared-name"
    assert run(reader.get("k")) == b"v"
    run(MemoryStore(name="test-shared-name").delete_prefix(""))


def test_anonymous_memory_stores_are_distinct_and_reachable_by_location_while_alive() -> None:
    first, second = MemoryStore(), MemoryStore()
    assert first.location != second.location
    run(first.set("k", b"first"))
    assert run(second.get("k")) is None
    assert run(MemoryStore(name=first.name).get("k")) == b"first"


def test_memory_store_unpickled_in_another_process_has_the_data() -> None:
    store = MemoryStore(name="test-cross-process")
    fill(store, NESTED)
    script = (
        "import asyncio, pickle, sys\n"
        "store = pickle.loads(sys.stdin.buffer.read())\n"
        "async def dump():\n"
        "    return {k: await store.get(k) async for k in store.list_prefix('')}\n"
        "sys.stdout.buffer.write(pickle.dumps(asyncio.run(dump())))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    child = subprocess.run([sys.executable, "-c", script], input=pickle.dumps(store), capture_output=True, env=env)
    assert child.returncode == 0, child.stderr.decode()
    assert pickle.loads(child.stdout) == NESTED


# -- ZipStore ---------------------------------------------------------------------------------


def test_zip_store_writes_a_standard_uncompressed_zip_readable_after_close(tmp_path: Path) -> None:
    path = tmp_path / "data.zip"
    store = ZipStore(path, mode="w")
    fill(store, NESTED)
    run(store.close())
    with zipfile.ZipFile(path) as reference:
        assert reference.testzip() is None
        assert {info.compress_type for info in reference.infolist()} == {zipfile.ZIP_STORED}
        assert {name: reference.read(name) for name in reference.namelist()} == NESTED
    assert run(store.get("a/c/0/1")) == NESTED["a/c/0/1"]  # reopens without truncating
    assert run(ZipStore(path, mode="r").get("a/zarr.json")) == NESTED["a/zarr.json"]
    assert store.location == f"zip://{path}"


def test_zip_range_reads_between_writes_keep_the_archive_valid(tmp_path: Path) -> None:
    path = tmp_path / "data.zip"
    values = {f"c/{i}": os.urandom(1000 + i) for i in range(20)}
    with ZipStore(path, mode="w") as store:
        for key, value in values.items():
            run(store.set(key, value))
            assert run(store.get("c/0", ByteRange.last(10))) == values["c/0"][-10:]
            assert run(store.get(key, ByteRange(3, 5))) == value[3:8]
    with zipfile.ZipFile(path) as reference:
        assert reference.testzip() is None
        assert {name: reference.read(name) for name in reference.namelist()} == values


def test_zip_store_reads_compressed_members_and_directory_entries_from_other_tools(tmp_path: Path) -> None:
    path = tmp_path / "made_elsewhere.zip"
    value = b"compressible " * 1000
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.mkdir("only_dir")
        archive.writestr("arr/c/0", value)
    store = ZipStore(path)
    assert run(store.get("arr/c/0")) == value
    assert run(store.get("arr/c/0", ByteRange(5, 20))) == value[5:25]
    assert run(store.get("arr/c/0", ByteRange.last(3))) == value[-3:]
    assert sorted(children(store)) == ["arr", "only_dir"]
    assert listing(store) == ["arr/c/0"]
    assert run(store.exists("only_dir")) is False


def test_zip_modes_r_is_read_only_w_truncates_x_refuses_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "data.zip"
    assert run(ZipStore(path, mode="r").get("anything")) is None and not path.exists()
    with ZipStore(path, mode="x") as store:
        run(store.set("first", b"1"))
    with pytest.raises(FileExistsError, match="mode 'x'"):
        ZipStore(path, mode="x")
    with pytest.raises(ReadOnlyError):
        run(ZipStore(path, mode="r").set("second", b"2"))
    with ZipStore(path, mode="a") as store:
        assert run(store.get("first")) == b"1"  # read through a read-only handle ...
        run(store.set("second", b"2"))  # ... which the first write reopens for appending
        assert run(store.get_many([("first", None), ("second", None)])) == [b"1", b"2"]
    assert sorted(listing(ZipStore(path))) == ["first", "second"]
    with ZipStore(path, mode="w") as store:
        assert run(store.get("first")) is None  # "w" starts empty even before the file is touched
        run(store.set("third", b"3"))
    assert listing(ZipStore(path)) == ["third"]
    with pytest.raises(ValueError, match="mode must be one of"):
        ZipStore(path, mode="rw")


def test_zip_store_unpickled_from_mode_w_appends_instead_of_truncating(tmp_path: Path) -> None:
    path = tmp_path / "data.zip"
    store = ZipStore(path, mode="w")
    run(store.set("before", b"1"))
    run(store.close())
    restored = pickle.loads(pickle.dumps(store))
    assert restored.mode == "a"
    run(restored.set("after", b"2"))
    run(restored.close())
    assert sorted(listing(ZipStore(path))) == ["after", "before"]


def test_zip_garbage_file_raises_store_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "garbage.zip"
    path.write_bytes(b"this is not a zip file")
    for mode in ("r", "a"):
        with pytest.raises(StoreError, match=f"zip://{path}: not a valid zip file"):
            run(ZipStore(path, mode=mode).get("zarr.json"))
    assert path.read_bytes() == b"this is not a zip file"  # reading never appends a zip to it


# -- MappingStore -----------------------------------------------------------------------------


def test_mapping_store_returns_bytes_for_any_buffer_and_none_for_key_error() -> None:
    mapping: dict[str, Any] = {"a": bytearray(b"abc"), "b": memoryview(b"xyz")}
    store = MappingStore(mapping)
    assert run(store.get("a")) == b"abc" and type(run(store.get("a"))) is bytes
    assert run(store.get("b", ByteRange.last(1))) == b"z"
    assert run(store.get("c")) is None
    assert store.location == f"mapping://dict-{id(mapping):x}"


def test_mapping_store_over_zict_zip_writes_a_zip_that_reads_back_after_close(tmp_path: Path) -> None:
    path = tmp_path / "example.zip"
    store = MappingStore(zict.Zip(str(path), mode="w"))
    fill(store, NESTED)
    assert sorted(children(store, "a")) == ["c", "zarr.json"]
    run(store.close())
    assert store.mapping.mode == "closed"  # type: ignore[attr-defined]
    reopened = MappingStore(zict.Zip(str(path), mode="r"), read_only=True)
    assert run(reopened.get_many([(k, None) for k in NESTED])) == list(NESTED.values())
