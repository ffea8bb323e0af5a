"""The blocking facade works from scripts, running event loops, many threads and forked children, and pickles."""

from __future__ import annotations

import asyncio
import copy
import inspect
import os
import pathlib
import pickle
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings
import zipfile
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from slow_store import ClosingMemoryStore

import asyncarr
import asyncarr.sync as za
from asyncarr.stores import MemoryStore

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]


def run_script(source: str, cwd: pathlib.Path) -> subprocess.CompletedProcess[str]:
    """Run ``source`` in a fresh interpreter (asyncarr importable from this checkout)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(source)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


# -- (a) plain scripts ------------------------------------------------------------------------


def test_a_plain_script_uses_the_facade_and_exits_cleanly(tmp_path: pathlib.Path) -> None:
    result = run_script(
        """
        import numpy as np
        import asyncarr.sync as za

        z = za.open("data/example.zarr", mode="w", shape=(100, 100), chunks=(10, 10), dtype="i4")
        z[:] = 42
        z[0, :] = np.arange(100)
        print(int(z[:].sum()), z[-1, -1], z[0, 99])
        # Left open on purpose: the facade closes what it opened at interpreter exit.
        zipped = za.open_array("packed.zip", mode="w", shape=(20,), chunks=(5,), dtype="f8")
        zipped[:] = np.arange(20) / 2
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    expected_sum = 42 * 99 * 100 + sum(range(100))
    assert result.stdout.split() == [str(expected_sum), "42", "99"]
    assert "Traceback" not in result.stderr
    z = za.open(str(tmp_path / "data" / "example.zarr"), mode="r")
    assert z[0, 5] == 5 and z[5, 5] == 42
    with zipfile.ZipFile(tmp_path / "packed.zip") as archive:
        assert archive.testzip() is None
    np.testing.assert_array_equal(za.open_array(str(tmp_path / "packed.zip"), mode="r")[:], np.arange(20) / 2)


# -- (b) inside a running event loop ----------------------------------------------------------


def test_the_facade_works_inside_a_running_event_loop() -> None:
    async def notebook_cell() -> tuple[np.ndarray, np.ndarray, dict]:
        z = za.zeros((10, 10), chunks=(5, 5), dtype="i4")
        before = z[:]
        z[:] = 1
        z[2, 3] = 7
        g = za.group()
        g.create_dataset("x", data=np.arange(6))
        g.attrs["k"] = "v"
        await asyncio.sleep(0)  # the user's loop is still alive around facade calls
        return before, z[:], {"x": g["x"][:].tolist(), "attrs": dict(g.attrs)}

    before, after, group = asyncio.run(notebook_cell())
    np.testing.assert_array_equal(before, np.zeros((10, 10), dtype="i4"))
    expected = np.ones((10, 10), dtype="i4")
    expected[2, 3] = 7
    np.testing.assert_array_equal(after, expected)
    assert group == {"x": [0, 1, 2, 3, 4, 5], "attrs": {"k": "v"}}


def test_the_facade_works_from_a_worker_thread_of_a_running_loop() -> None:
    async def handler() -> np.ndarray:
        z = za.full((8, 8), 3.0, chunks=(4, 4))
        return await asyncio.wait_for(asyncio.to_thread(lambda: z[:]), timeout=30)

    np.testing.assert_array_equal(asyncio.run(handler()), np.full((8, 8), 3.0))


# -- (c) many threads -------------------------------------------------------------------------


def test_the_facade_works_from_eight_threads_at_once() -> None:
    shared = za.open_array(MemoryStore(), mode="w", shape=(8, 40), chunks=(1, 40), dtype="i8")
    start = threading.Barrier(8)

    def work(thread_index: int) -> tuple[np.ndarray, np.ndarray]:
        start.wait()
        own = za.open_array(MemoryStore(), mode="w", shape=(30, 30), chunks=(7, 7), dtype="i8")
        mine = np.arange(900, dtype="i8").reshape(30, 30) * (thread_index + 1)
        own[:] = mine
        shared[thread_index] = np.arange(40) + thread_index * 1000
        for _ in range(5):
            own[thread_index, :] = -thread_index
            mine[thread_index, :] = -thread_index
        return own[:], mine

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(work, range(8)))
    for read, expected in results:
        np.testing.assert_array_equal(read, expected)
    np.testing.assert_array_equal(shared[:], np.arange(40)[None, :] + np.arange(8)[:, None] * 1000)


# -- (d) fork ---------------------------------------------------------------------------------


def _wait_for_child(pid: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    pytest.fail(f"the forked child did not finish within {timeout} s (facade deadlocked after fork?)")


def test_the_facade_survives_fork(tmp_path: pathlib.Path) -> None:
    parent_path = str(tmp_path / "parent.zarr")
    child_path = str(tmp_path / "child.zarr")
    parent = za.open_array(parent_path, mode="w", shape=(20,), chunks=(5,), dtype="i4")
    parent[:] = np.arange(20)  # the facade's loop thread is running when we fork
    assert parent[3] == 3

    pid = os.fork()
    if pid == 0:  # child: never return into pytest
        code = 1
        try:
            inherited = parent[:]  # a handle opened before the fork
            reopened = za.open_array(parent_path, mode="r")[:]
            child = za.open_array(child_path, mode="w", shape=(20,), chunks=(5,), dtype="i4")
            child[:] = inherited * 2
            if np.array_equal(reopened, inherited) and np.array_equal(child[:], np.arange(20) * 2):
                code = 0
        finally:
            os._exit(code)

    assert _wait_for_child(pid, timeout=60) == 0
    np.testing.assert_array_equal(za.open_array(child_path, mode="r")[:], np.arange(20) * 2)
    # The parent's facade still works after forking.
    parent[0] = 100
    assert parent[0] == 100


# -- (f) async twins --------------------------------------------------------------------------


def test_facade_objects_expose_their_async_twins_and_back() -> None:
    z = za.open_array(MemoryStore(), mode="w", shape=(6,), chunks=(3,), dtype="i4")
    z[:] = np.arange(6)
    twin = z.async_array
    assert inspect.iscoroutinefunction(twin.getitem)
    assert twin.shape == (6,)
    np.testing.assert_array_equal(asyncio.run(twin.getitem(...)), np.arange(6))
    back = twin.sync()
    assert isinstance(back, za.Array)
    np.testing.assert_array_equal(back[:], np.arange(6))

    g = za.group()
    g.create_dataset("x", data=np.arange(4))
    group_twin = g.async_group
    assert asyncio.run(group_twin.contains("x"))
    group_back = group_twin.sync()
    assert isinstance(group_back, za.Group)
    np.testing.assert_array_equal(group_back["x"][:], np.arange(4))


def test_async_objects_return_facade_objects_from_sync() -> None:
    store = MemoryStore()

    async def create() -> tuple[object, object]:
        g = await asyncarr.group(store)
        a = await g.create_array("a", shape=(4,), chunks=(2,), dtype="f8")
        await a.setitem(..., np.arange(4.0))
        return a.sync(), g.sync()

    array, group = asyncio.run(create())
    assert isinstance(array, za.Array)
    assert isinstance(group, za.Group)
    np.testing.assert_array_equal(array[:], np.arange(4.0))
    np.testing.assert_array_equal(group["a"][:], np.arange(4.0))


def test_every_public_function_has_one_blocking_twin_with_its_parameters_and_docstring() -> None:
    from asyncarr.api import PUBLIC_FUNCTIONS

    assert set(PUBLIC_FUNCTIONS) <= set(asyncarr.__all__) and set(PUBLIC_FUNCTIONS) <= set(za.__all__)
    for name in PUBLIC_FUNCTIONS:
        coroutine_function, blocking = getattr(asyncarr, name), getattr(za, name)
        assert inspect.iscoroutinefunction(coroutine_function) and not inspect.iscoroutinefunction(blocking)
        async_parameters = inspect.signature(coroutine_function).parameters
        assert inspect.signature(blocking).parameters == async_parameters, name
        assert blocking.__doc__ == coroutine_function.__doc__ and blocking.__doc__, name
        assert (blocking.__name__, blocking.__module__) == (name, "asyncarr.sync")
        assert pickle.loads(pickle.dumps(blocking)) is blocking
    assert "AsyncArray" not in str(inspect.signature(za.open_array).return_annotation)


def test_blocking_functions_return_facade_objects_and_plain_values(tmp_path: pathlib.Path) -> None:
    z = za.full((4,), 2.5, chunks=(2,), store=str(tmp_path / "a.zarr"))
    assert isinstance(z, za.Array) and isinstance(za.open(str(tmp_path / "a.zarr")), za.Array)
    assert isinstance(za.group(str(tmp_path / "g.zarr")), za.Group)
    assert za.save(str(tmp_path / "s.zarr"), np.arange(3)) is None
    np.testing.assert_array_equal(za.load(str(tmp_path / "a.zarr")), np.full(4, 2.5))


# -- (g) pickling -----------------------------------------------------------------------------


def test_facade_arrays_and_groups_pickle_and_reopen(tmp_path: pathlib.Path) -> None:
    data = np.arange(24, dtype="i2").reshape(4, 6)
    z = za.open_array(str(tmp_path / "a.zarr"), mode="w", shape=data.shape, chunks=(2, 3), dtype=data.dtype)
    z[:] = data
    z.attrs["units"] = "K"
    clone = pickle.loads(pickle.dumps(z))
    assert isinstance(clone, za.Array)
    assert clone.shape == z.shape and clone.chunks == z.chunks and clone.dtype == z.dtype
    np.testing.assert_array_equal(clone[:], data)
    assert clone.attrs["units"] == "K"
    clone[0, 0] = -1  # the clone writes to the same storage
    assert z[0, 0] == -1

    root = za.open_group(str(tmp_path / "g.zarr"), mode="w")
    root.create_dataset("sub/x", data=data)
    root.attrs["title"] = "t"
    root_clone = pickle.loads(pickle.dumps(root))
    assert isinstance(root_clone, za.Group)
    assert root_clone.attrs["title"] == "t"
    np.testing.assert_array_equal(root_clone["sub/x"][:], data)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(root["sub"]))["x"][:], data)


def test_async_arrays_pickle_and_reopen(tmp_path: pathlib.Path) -> None:
    path = str(tmp_path / "a.zarr")
    data = np.linspace(0, 1, 12)

    async def roundtrip() -> np.ndarray:
        z = await asyncarr.open_array(path, mode="w", shape=(12,), chunks=(5,), dtype="f8")
        await z.setitem(..., data)
        clone = pickle.loads(pickle.dumps(z))
        return await clone.getitem(...)

    np.testing.assert_array_equal(asyncio.run(roundtrip()), data)


PICKLE_WARNING = r"pickling a writable (array|group) on a MemoryStore.*has its own memory"


def _nodes_on(store: object, *, mode: str = "a") -> dict[str, object]:
    """A facade array, async array, facade group and async group in ``store``, opened with ``mode``
    (the array ``x`` is created first when the mode may write)."""
    if mode != "r":
        za.open_group(store, mode=mode).require_array("x", shape=(4,), chunks=(2,), dtype="i4")
    group = za.open_group(store, mode=mode)
    array = za.open_array(store, mode=mode, path="x")
    return {
        "facade-array": array,
        "async-array": array.async_array,
        "facade-group": group,
        "async-group": group.async_group,
    }


@pytest.mark.parametrize("kind", ["facade-array", "async-array", "facade-group", "async-group"])
def test_pickling_a_writable_node_on_a_memory_store_warns_at_the_line_that_pickles(kind: str) -> None:
    node = _nodes_on(MemoryStore())[kind]
    with pytest.warns(UserWarning, match=PICKLE_WARNING) as caught:
        pickle.dumps(node)
    assert len(caught) == 1
    assert caught[0].filename == __file__  # points at the caller's pickle.dumps, not into asyncarr
    assert node.store.location in str(caught[0].message)


def test_a_writable_memory_array_unpickled_in_another_process_writes_only_there(tmp_path: pathlib.Path) -> None:
    """What the warning says, for real: a worker's writes to a MemoryStore copy never come back; a local store's do."""
    in_memory = za.zeros((4,), chunks=(2,), dtype="i4")
    on_disk = za.zeros((4,), chunks=(2,), dtype="i4", store=str(tmp_path / "a.zarr"))
    with pytest.warns(UserWarning, match=PICKLE_WARNING):
        (tmp_path / "memory.pickle").write_bytes(pickle.dumps(in_memory))
    (tmp_path / "local.pickle").write_bytes(pickle.dumps(on_disk))
    worker = run_script(
        """
        import pathlib, pickle
        for name in ("memory.pickle", "local.pickle"):
            array = pickle.loads(pathlib.Path(name).read_bytes())
            array[:] = 7
            assert list(array[:]) == [7, 7, 7, 7]
        """,
        tmp_path,
    )
    assert worker.returncode == 0, worker.stderr
    np.testing.assert_array_equal(in_memory[:], np.zeros(4))
    np.testing.assert_array_equal(on_disk[:], np.full(4, 7))


def test_read_only_nodes_and_nodes_on_other_stores_pickle_silently(tmp_path: pathlib.Path) -> None:
    memory = MemoryStore(name=f"pickle-test-{os.getpid()}")
    _nodes_on(memory)
    read_only_store = MemoryStore(name=memory.name, read_only=True)
    nodes = {
        **{f"mode r, {k}": v for k, v in _nodes_on(memory, mode="r").items()},
        **{f"read-only store, {k}": v for k, v in _nodes_on(read_only_store, mode="r").items()},
        **{f"local store, {k}": v for k, v in _nodes_on(str(tmp_path / "g.zarr")).items()},
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name, node in nodes.items():
            clone = pickle.loads(pickle.dumps(node))
            assert clone.store.location == node.store.location, name


def test_copies_in_this_process_and_dask_tokens_do_not_warn() -> None:
    import dask.base as dask_base  # dask is in .[test]; imported here to keep it off the facade tests' start-up

    nodes = _nodes_on(MemoryStore())
    other = _nodes_on(MemoryStore())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for kind, node in nodes.items():
            for clone in (copy.copy(node), copy.deepcopy(node)):
                assert type(clone) is type(node) and clone.store.location == node.store.location
            assert dask_base.tokenize(node) == dask_base.tokenize(node)
            assert dask_base.tokenize(node) != dask_base.tokenize(other[kind]), kind
    deep = copy.deepcopy(nodes["facade-array"])
    deep[:] = 3  # a copy in this process shares the MemoryStore's data
    np.testing.assert_array_equal(nodes["facade-array"][:], np.full(4, 3))


# -- (h) context managers ---------------------------------------------------------------------


def test_context_managers_close_the_store() -> None:
    store = ClosingMemoryStore()
    with za.open_array(store, mode="w", shape=(4,), chunks=(2,), dtype="i4") as z:
        z[:] = 5
        np.testing.assert_array_equal(z[:], np.full(4, 5))
    assert store.closed

    group_store = ClosingMemoryStore()
    with za.open_group(group_store, mode="w") as g:
        g.create_group("sub")
    assert group_store.closed


def test_leaving_the_context_finalises_a_zip_store(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "a.zip"
    data = np.arange(30, dtype="u2").reshape(5, 6)
    with za.open_array(str(path), mode="w", shape=data.shape, chunks=(2, 2), dtype=data.dtype) as z:
        z[:] = data
    with zipfile.ZipFile(path) as archive:
        assert archive.testzip() is None
        assert "zarr.json" in archive.namelist()
    np.testing.assert_array_equal(za.open_array(str(path), mode="r")[:], data)


# -- (e) re-entry from the facade's own loop thread (last: a deadlock here would stall later tests) --


class ReentrantStore(MemoryStore):
    """A store whose first chunk read calls back into the facade, from the facade's own loop thread."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = False
        self.outcomes: list[BaseException | str] = []

    async def get(self, key: str, byte_range: object = None) -> bytes | None:
        if self.armed and key.rsplit("/", 1)[-1] not in ("zarr.json", ".zarray", ".zattrs", ".zgroup"):
            self.armed = False
            try:
                za.zeros((2,), chunks=(1,))
            except BaseException as exc:  # record whatever the facade does, judge it in the test
                self.outcomes.append(exc)
            else:
                self.outcomes.append("no error")
        return await super().get(key, byte_range)


@pytest.mark.timeout(60)
def test_a_facade_call_from_the_facade_loop_thread_raises_runtime_error() -> None:
    store = ReentrantStore()
    z = za.open_array(store, mode="w", shape=(4,), chunks=(2,), dtype="i4")
    z[:] = np.arange(4)
    store.armed = True
    np.testing.assert_array_equal(z[:], np.arange(4))  # the outer call still completes
    assert len(store.outcomes) == 1
    (outcome,) = store.outcomes
    assert isinstance(outcome, RuntimeError), f"expected RuntimeError, got {outcome!r}"
    assert "loop" in str(outcome).lower() or "await" in str(outcome).lower(), str(outcome)
