"""Copying arrays and hierarchies: `asyncarr.copy` (the engine of `asyncarr cp`) and zarr 2's
``copy``, ``copy_all`` and ``copy_store``.

zarr-python 3 has no copy functions (they raise NotImplementedError), so zarr 2's documented
examples are the reference for the log lines and counts, and zarr-python 3 reads every copy
back to check the result is the source, value for value.
"""

from __future__ import annotations

import asyncio
import io
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from emulators import s3
from emulators.http import request_log, serve_directory
from test_cloud_stores import CLOUDS, Cloud

import asyncarr
import asyncarr.sync as za
from asyncarr.copy import CopyResult
from asyncarr.errors import CopyError, StoreError
from asyncarr.stores import LocalStore, MemoryStore

pytestmark = pytest.mark.filterwarnings("ignore::zarr.errors.ZarrUserWarning")


def lines(log: io.StringIO) -> list[str]:
    return log.getvalue().splitlines()


def make_hierarchy(path: Path, zarr_format: int = 2) -> dict[str, np.ndarray]:
    """A small hierarchy with attributes, a 2-d array with a partial edge chunk and a missing chunk."""
    root = za.open_group(str(path), mode="w", zarr_format=zarr_format)
    root.attrs["title"] = "source"
    grid = np.arange(30 * 20, dtype="f4").reshape(30, 20)
    grid[20:, :10] = 0  # one chunk all fill value: never stored
    a = root.create_array("foo/grid", shape=grid.shape, chunks=(10, 10), dtype="f4", fill_value=0)
    a[...] = grid
    a.attrs["units"] = "m"
    b = root.create_array("foo/bar/ints", shape=(100,), chunks=(30,), dtype="i8")
    b[...] = np.arange(100)
    root.create_group("empty")
    return {"foo/grid": grid, "foo/bar/ints": np.arange(100)}


def chunk_files(path: Path) -> dict[str, bytes]:
    """Every stored file below ``path`` that is not a metadata document, by relative key."""
    names = {".zarray", ".zattrs", ".zgroup", "zarr.json", ".zmetadata"}
    return {
        p.relative_to(path).as_posix(): p.read_bytes() for p in path.rglob("*") if p.is_file() and p.name not in names
    }


def assert_same_in_zarr_python(path: Path, expected: dict[str, np.ndarray], attrs: dict[str, Any]) -> None:
    """zarr-python 3 reads the copy back as the source wrote it."""
    group = zarr.open_group(str(path), mode="r")
    assert dict(group.attrs) == attrs
    for name, values in expected.items():
        np.testing.assert_array_equal(group[name][...], values)


# -- zarr 2's documented examples ---------------------------------------------------------------


def test_copy_into_group_logs_and_counts_as_zarr2_documents() -> None:
    source, dest = za.group(), za.group()
    source.create_dataset("foo/bar/baz", data=np.arange(100), chunks=(50,))
    source.create_dataset("spam", data=np.arange(100, 200), chunks=(30,))
    log = io.StringIO()
    result = za.copy(source["foo"], dest, log=log)
    assert lines(log) == [
        "copy /foo",
        "copy /foo/bar",
        "copy /foo/bar/baz (100,) int64",
        "all done: 3 copied, 0 skipped, 800 bytes copied",
    ]
    assert result == (3, 0, 800)
    assert sorted(dest.group_keys()) == ["foo"]  # no spam
    np.testing.assert_array_equal(dest["foo/bar/baz"][:], np.arange(100))


def test_copy_if_exists_choices_in_a_dry_run_as_zarr2_documents() -> None:
    source, dest = za.group(), za.group()
    source.create_dataset("foo/bar/baz", data=np.arange(100))
    source.create_dataset("foo/spam", data=np.arange(1000))
    dest.create_dataset("foo/spam", data=np.arange(1000))
    log = io.StringIO()
    with pytest.raises(CopyError, match="already exists"):
        za.copy(source["foo"], dest, log=log, dry_run=True)
    assert lines(log) == ["copy /foo", "copy /foo/bar", "copy /foo/bar/baz (100,) int64"]

    log = io.StringIO()
    assert za.copy(source["foo"], dest, log=log, if_exists="replace", dry_run=True) == (4, 0, 0)
    assert lines(log)[-2:] == ["copy /foo/spam (1000,) int64", "dry run: 4 copied, 0 skipped"]
    log = io.StringIO()
    assert za.copy(source["foo"], dest, log=log, if_exists="skip", dry_run=True) == (3, 1, 0)
    assert lines(log)[-2:] == ["skip /foo/spam (1000,) int64", "dry run: 3 copied, 1 skipped"]
    assert sorted(dest["foo"].array_keys()) == ["spam"]  # the dry runs wrote nothing
    assert "bar" not in dest["foo"]


def test_copy_all_copies_every_member(tmp_path: Path) -> None:
    source = za.group()
    source.create_dataset("foo/bar/baz", data=np.arange(100), chunks=(50,))
    source.create_dataset("spam", data=np.arange(100, 200), chunks=(30,))
    dest = za.open_group(str(tmp_path / "dest.zarr"), mode="w")
    log = io.StringIO()
    assert za.copy_all(source, dest, log=log) == (4, 0, 1600)
    assert lines(log)[-1] == "all done: 4 copied, 0 skipped, 1,600 bytes copied"
    group = zarr.open_group(str(tmp_path / "dest.zarr"), mode="r")
    np.testing.assert_array_equal(group["foo/bar/baz"][...], np.arange(100))
    np.testing.assert_array_equal(group["spam"][...], np.arange(100, 200))


def test_copy_store_copies_keys_as_stored_as_zarr2_documents(tmp_path: Path) -> None:
    store1 = za.DirectoryStore(str(tmp_path / "example.zarr"))
    root = za.group(store1, overwrite=True, zarr_format=2)
    baz = root.create_group("foo").create_group("bar").create_dataset("baz", shape=100, chunks=50, dtype="i8")
    baz[:] = np.arange(100)
    store2 = za.ZipStore(str(tmp_path / "example.zip"), mode="w")
    log = io.StringIO()
    result = za.copy_store(store1, store2, log=log)
    store2.close()
    copied = lines(log)[:-1]
    assert copied == [  # zarr 2's documented lines; its byte count differs with the default compressor
        "copy .zgroup",
        "copy foo/.zgroup",
        "copy foo/bar/.zgroup",
        "copy foo/bar/baz/.zarray",
        "copy foo/bar/baz/0",
        "copy foo/bar/baz/1",
    ]
    stored = sum(p.stat().st_size for p in (tmp_path / "example.zarr").rglob("*") if p.is_file())
    assert result == (len(copied), 0, stored)
    assert lines(log)[-1] == f"all done: {len(copied)} copied, 0 skipped, {stored:,} bytes copied"
    zipped = zarr.storage.ZipStore(tmp_path / "example.zip", mode="r")
    np.testing.assert_array_equal(zarr.open_group(zipped, mode="r")["foo/bar/baz"][...], baz[:])
    zipped.close()


def test_copy_store_paths_filters_and_if_exists(tmp_path: Path) -> None:
    source = MemoryStore()
    root = za.group(source, zarr_format=2)
    root.create_dataset("a/x", data=np.arange(10), chunks=(5,))
    root.create_dataset("b/y", data=np.arange(10), chunks=(5,))
    dest = MemoryStore()
    result = za.copy_store(source, dest, source_path="a", dest_path="moved", excludes=["x/1$"], includes=[])
    keys = sorted(asyncio.run(_keys(dest)))
    assert "moved/x/0" in keys and "moved/x/1" not in keys and not any(k.startswith("b/") for k in keys)
    assert result.n_copied == len(keys)
    with pytest.raises(CopyError, match=r"'moved/\.zgroup' exists in the destination"):
        za.copy_store(source, dest, source_path="a", dest_path="moved")
    again = za.copy_store(source, dest, source_path="a", dest_path="moved", if_exists="skip")
    assert again.n_skipped == len(keys) and again.n_copied == 1  # only the excluded x/1 is new
    with pytest.raises(ValueError, match="if_exists"):
        za.copy_store(source, dest, if_exists="skip_initialized")


async def _keys(store: Any) -> list[str]:
    return [key async for key in store.list_prefix("")]


# -- the engine of `asyncarr cp`: stores and URLs ------------------------------------------------


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_url_copy_moves_stored_bytes_and_zarr_python_reads_the_copy(tmp_path: Path, zarr_format: int) -> None:
    expected = make_hierarchy(tmp_path / "src.zarr", zarr_format)
    calls: list[tuple[int, int]] = []
    result = asyncio.run(
        asyncarr.copy(
            str(tmp_path / "src.zarr"), str(tmp_path / "dst.zarr"), progress=lambda d, t: calls.append((d, t))
        )
    )
    source_chunks = chunk_files(tmp_path / "src.zarr")
    assert chunk_files(tmp_path / "dst.zarr") == source_chunks  # byte for byte: no decode, no encode
    assert result.chunks_copied == len(source_chunks) == 5 + 4  # grid: 6 chunks, one never stored; ints: 4
    assert result.chunks_skipped == 0
    assert result.bytes_copied == sum(map(len, source_chunks.values()))
    assert result.summary().keys() == {"chunks_copied", "chunks_skipped", "bytes_copied", "seconds"}
    assert calls[0] == (0, 9) and calls[-1] == (9, 9) and [d for d, _ in calls] == sorted(d for d, _ in calls)
    assert_same_in_zarr_python(tmp_path / "dst.zarr", expected, {"title": "source"})
    assert zarr.open_group(str(tmp_path / "dst.zarr"), mode="r")["foo/grid"].attrs["units"] == "m"
    assert "empty" in zarr.open_group(str(tmp_path / "dst.zarr"), mode="r")


def test_a_second_run_copies_only_what_is_missing_or_differs(tmp_path: Path) -> None:
    expected = make_hierarchy(tmp_path / "src.zarr")
    src, dst = str(tmp_path / "src.zarr"), str(tmp_path / "dst.zarr")
    first = za.copy(src, dst)
    (tmp_path / "dst.zarr/foo/grid/0.0").unlink()
    (tmp_path / "dst.zarr/foo/bar/ints/2").unlink()
    with open(tmp_path / "dst.zarr/foo/bar/ints/1", "ab") as f:
        f.write(b"!")  # a torn write: another size
    (tmp_path / "dst.zarr/foo/grid/2.0").write_bytes(b"stale")  # a chunk the source does not have
    (tmp_path / "dst.zarr/foo/grid/notes.txt").write_bytes(b"someone's file")
    second = za.copy(src, dst)
    assert second.chunks_copied == 3
    assert second.chunks_skipped == first.chunks_copied - 3
    assert not (tmp_path / "dst.zarr/foo/grid/2.0").exists()  # stale chunk of the grid removed
    assert (tmp_path / "dst.zarr/foo/grid/notes.txt").exists()  # anything else left alone
    assert_same_in_zarr_python(tmp_path / "dst.zarr", expected, {"title": "source"})
    third = za.copy(src, dst)
    assert (third.chunks_copied, third.chunks_skipped) == (0, first.chunks_copied)


def test_verify_compares_content_not_just_size(tmp_path: Path) -> None:
    make_hierarchy(tmp_path / "src.zarr")
    src, dst = str(tmp_path / "src.zarr"), str(tmp_path / "dst.zarr")
    za.copy(src, dst)
    target = tmp_path / "dst.zarr/foo/bar/ints/0"
    target.write_bytes(bytes(len(target.read_bytes())))  # same size, other bytes
    assert za.copy(src, dst).chunks_copied == 0  # sizes agree: not noticed without verify
    assert za.copy(src, dst, verify=True).chunks_copied == 1
    assert target.read_bytes() == (tmp_path / "src.zarr/foo/bar/ints/0").read_bytes()


def test_an_interrupted_copy_shows_no_node_and_resumes(tmp_path: Path) -> None:
    expected = make_hierarchy(tmp_path / "src.zarr")

    class FailingAfter(LocalStore):
        """A local store whose writes fail after ``budget`` of them (a network that drops)."""

        budget = 4

        async def set(self, key: str, value: bytes) -> None:
            if FailingAfter.budget <= 0:
                raise StoreError(f"{self.key_url(key)}: connection reset")
            FailingAfter.budget -= 1
            await super().set(key, value)

    with pytest.raises(StoreError, match="connection reset"):
        za.copy(str(tmp_path / "src.zarr"), FailingAfter(str(tmp_path / "dst.zarr")), concurrency=1)
    written = [p.name for p in (tmp_path / "dst.zarr").rglob("*") if p.is_file()]
    assert ".zarray" not in written and written  # chunks landed, no array metadata: no torn node visible
    resumed = za.copy(str(tmp_path / "src.zarr"), str(tmp_path / "dst.zarr"))
    assert resumed.chunks_skipped == len([n for n in written if n not in (".zgroup", ".zattrs")])
    assert_same_in_zarr_python(tmp_path / "dst.zarr", expected, {"title": "source"})


def test_existing_array_with_other_metadata_is_refused_then_replaced(tmp_path: Path) -> None:
    expected = make_hierarchy(tmp_path / "src.zarr")
    other = za.open_group(str(tmp_path / "dst.zarr"), mode="w", zarr_format=2)
    other.create_array("foo/grid", shape=(5,), chunks=(5,), dtype="i1")
    with pytest.raises(CopyError, match="other metadata"):
        za.copy(str(tmp_path / "src.zarr"), str(tmp_path / "dst.zarr"))
    assert zarr.open_array(str(tmp_path / "dst.zarr/foo/grid"), mode="r").shape == (5,)  # nothing touched
    za.copy(str(tmp_path / "src.zarr"), str(tmp_path / "dst.zarr"), if_exists="replace")
    assert_same_in_zarr_python(tmp_path / "dst.zarr", expected, {"title": "source"})


def test_reencoding_keywords_convert_format_and_codecs(tmp_path: Path) -> None:
    expected = make_hierarchy(tmp_path / "src.zarr", zarr_format=2)
    result = za.copy(str(tmp_path / "src.zarr"), str(tmp_path / "v3.zarr"), zarr_format=3, compressor=None)
    group = zarr.open_group(str(tmp_path / "v3.zarr"), mode="r")
    assert group.metadata.zarr_format == 3
    assert group["foo/grid"].compressors == ()
    assert group["foo/grid"].fill_value == 0 and dict(group["foo/grid"].attrs) == {"units": "m"}
    assert_same_in_zarr_python(tmp_path / "v3.zarr", expected, {"title": "source"})
    assert result.chunks_copied == 6 + 4  # counted on the new grid


def test_copy_into_a_group_of_the_other_format_converts(tmp_path: Path) -> None:
    expected = make_hierarchy(tmp_path / "src.zarr", zarr_format=2)
    dest = za.open_group(str(tmp_path / "dst.zarr"), mode="w", zarr_format=3)
    za.copy(za.open_group(str(tmp_path / "src.zarr"), mode="r")["foo"], dest)
    group = zarr.open_group(str(tmp_path / "dst.zarr"), mode="r")
    assert group["foo"].metadata.zarr_format == 3
    np.testing.assert_array_equal(group["foo/grid"][...], expected["foo/grid"])


def test_shallow_and_without_attrs(tmp_path: Path) -> None:
    make_hierarchy(tmp_path / "src.zarr", zarr_format=3)
    source = za.open_group(str(tmp_path / "src.zarr"), mode="r")
    dest = za.group()
    assert za.copy(source["foo"], dest, shallow=True, without_attrs=True) == (2, 0, 2400)
    assert list(dest["foo"].array_keys()) == ["grid"] and "bar" not in dest["foo"]
    assert dict(dest["foo/grid"].attrs) == {}


def test_copies_a_sharded_array_shard_by_shard(tmp_path: Path) -> None:
    data = np.arange(64 * 64, dtype="u2").reshape(64, 64)
    array = za.create_array(str(tmp_path / "src.zarr"), shape=data.shape, chunks=(8, 8), shards=(32, 32), dtype="u2")
    array[...] = data
    result = za.copy(str(tmp_path / "src.zarr"), str(tmp_path / "dst.zarr"))
    assert result.chunks_copied == 4  # shards are the stored objects
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "dst.zarr"), mode="r")[...], data)


def test_refuses_to_copy_a_group_into_itself(tmp_path: Path) -> None:
    make_hierarchy(tmp_path / "src.zarr")
    with pytest.raises(ValueError, match="into itself"):
        za.copy(str(tmp_path / "src.zarr"), str(tmp_path / "src.zarr"), dest_path="foo/again")
    root = za.open_group(str(tmp_path / "src.zarr"))
    with pytest.raises(ValueError, match="into itself"):
        za.copy(root["foo"], root["foo"], name="inner")


def test_a_keyword_typo_names_the_function_called() -> None:
    with pytest.raises(TypeError, match=r"asyncarr\.sync\.copy\(\).*'compresor'.*did you mean 'compressor'"):
        za.copy(za.group(), za.group(), name="x", compresor=None)


def test_root_group_needs_a_name() -> None:
    with pytest.raises(TypeError, match="name="):
        za.copy(za.group(), za.group())


def test_result_is_zarr2s_tuple_and_pickles() -> None:
    import pickle

    result = CopyResult((1, 2, 3), chunks_copied=4, bytes_copied=5, seconds=0.5)
    n_copied, n_skipped, n_bytes = result
    assert (n_copied, n_skipped, n_bytes) == (1, 2, 3)
    again = pickle.loads(pickle.dumps(result))
    assert again == (1, 2, 3) and again.chunks_copied == 4 and again.summary()["bytes_copied"] == 5


def test_log_to_a_file_path_and_a_callable(tmp_path: Path) -> None:
    source = za.group()
    source.create_dataset("a", data=np.arange(3))
    seen: list[str] = []
    za.copy(source["a"], za.group(), log=seen.append)
    za.copy(source["a"], za.group(), log=str(tmp_path / "copy.log"))
    assert seen[0] == "copy /a (3,) int64"
    assert (tmp_path / "copy.log").read_text().splitlines() == seen


# -- between clouds --------------------------------------------------------------------------


def test_local_to_s3_and_back(tmp_path: Path) -> None:
    expected = make_hierarchy(tmp_path / "src.zarr", zarr_format=3)
    bucket = s3.new_bucket()
    options = s3.store_options()
    up = za.copy(str(tmp_path / "src.zarr"), f"s3://{bucket}/data.zarr", dest_storage_options=options)
    keys = sorted(o["Key"] for o in s3.client().list_objects_v2(Bucket=bucket)["Contents"])
    assert len([k for k in keys if not k.endswith("zarr.json")]) == up.chunks_copied == 9
    for key in keys:
        relative = key.removeprefix("data.zarr/")
        if not relative.endswith("zarr.json"):
            body = s3.client().get_object(Bucket=bucket, Key=key)["Body"].read()
            assert body == (tmp_path / "src.zarr" / relative).read_bytes()
    again = za.copy(str(tmp_path / "src.zarr"), f"s3://{bucket}/data.zarr", dest_storage_options=options)
    assert (again.chunks_copied, again.chunks_skipped) == (0, 9)
    down = za.copy(f"s3://{bucket}/data.zarr", str(tmp_path / "back.zarr"), source_storage_options=options)
    assert down.chunks_copied == 9
    assert_same_in_zarr_python(tmp_path / "back.zarr", expected, {"title": "source"})


def test_http_source_that_cannot_list_copies_through_consolidated_metadata(tmp_path: Path) -> None:
    expected = make_hierarchy(tmp_path / "src.zarr", zarr_format=2)
    za.consolidate_metadata(str(tmp_path / "src.zarr"))
    base = serve_directory(tmp_path / "src.zarr")
    result = za.copy(base, str(tmp_path / "dst.zarr"))
    assert result.chunks_copied == 9
    assert_same_in_zarr_python(tmp_path / "dst.zarr", expected, {"title": "source"})
    gets = [r for r in request_log(base) if r.method == "GET"]
    assert len(gets) <= 40  # documents, one probe per grid cell (10), and the 9 chunks: no listing walk


def test_async_api_and_read_only_destination(tmp_path: Path) -> None:
    make_hierarchy(tmp_path / "src.zarr")

    async def main() -> CopyResult:
        return await asyncarr.copy(str(tmp_path / "src.zarr"), str(tmp_path / "dst.zarr"), dest_path="nested/copy")

    result = asyncio.run(main())
    assert result.chunks_copied == 9
    assert zarr.open_group(str(tmp_path / "dst.zarr"), mode="r")["nested/copy/foo/grid"].shape == (30, 20)
    with pytest.raises(asyncarr.errors.ReadOnlyError):
        za.copy(str(tmp_path / "src.zarr"), LocalStore(str(tmp_path / "ro.zarr"), read_only=True))
    assert not os.path.exists(tmp_path / "ro.zarr/.zgroup")


def test_a_dry_run_counts_what_a_run_would_copy_and_writes_nothing(tmp_path: Path) -> None:
    make_hierarchy(tmp_path / "src.zarr")
    seen: list[tuple[int, int]] = []
    planned = za.copy(
        str(tmp_path / "src.zarr"), str(tmp_path / "dst.zarr"), dry_run=True, progress=lambda *p: seen.append(p)
    )
    assert (planned.chunks_copied, planned.chunks_skipped) == (9, 0) and seen[-1] == (9, 9)
    assert planned.bytes_copied == sum(map(len, chunk_files(tmp_path / "src.zarr").values()))
    assert not (tmp_path / "dst.zarr").exists()
    za.copy(str(tmp_path / "src.zarr"), str(tmp_path / "dst.zarr"))
    (tmp_path / "dst.zarr/foo/bar/ints/3").unlink()
    again = za.copy(str(tmp_path / "src.zarr"), str(tmp_path / "dst.zarr"), dry_run=True)
    assert (again.chunks_copied, again.chunks_skipped) == (1, 8)
    assert not (tmp_path / "dst.zarr/foo/bar/ints/3").exists()


def test_a_group_is_not_completed_over_an_array(tmp_path: Path) -> None:
    make_hierarchy(tmp_path / "src.zarr")
    za.create_array(str(tmp_path / "dst.zarr"), shape=(4,), dtype="i1")[...] = 5
    with pytest.raises(CopyError, match="an array is there"):
        za.copy(str(tmp_path / "src.zarr"), str(tmp_path / "dst.zarr"))
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "dst.zarr"), mode="r")[...], [5, 5, 5, 5])
    za.copy(str(tmp_path / "src.zarr"), str(tmp_path / "dst.zarr"), if_exists="replace")
    assert zarr.open_group(str(tmp_path / "dst.zarr"), mode="r").attrs["title"] == "source"


def test_resuming_into_a_zip_rewrites_nothing_already_there(tmp_path: Path) -> None:
    expected = make_hierarchy(tmp_path / "src.zarr", zarr_format=3)
    target = str(tmp_path / "copy.zip")
    first = za.copy(str(tmp_path / "src.zarr"), target)
    again = za.copy(str(tmp_path / "src.zarr"), target)  # a zip cannot rewrite a member: nothing may be rewritten
    assert (again.chunks_copied, again.chunks_skipped) == (0, first.chunks_copied)
    zipped = zarr.storage.ZipStore(target, mode="r")
    group = zarr.open_group(zipped, mode="r")
    for name, values in expected.items():
        np.testing.assert_array_equal(group[name][...], values)
    zipped.close()


@pytest.mark.parametrize("cloud", CLOUDS, ids=[c.name for c in CLOUDS])
def test_copy_to_every_cloud_and_back(tmp_path: Path, cloud: Cloud) -> None:
    # Up with the writers' URL and options, back down from what readers open (HTTP: a served directory).
    expected = make_hierarchy(tmp_path / "src.zarr", zarr_format=3)
    place = cloud.place(tmp_path)
    up = za.copy(str(tmp_path / "src.zarr"), place.write_url, dest_storage_options=place.write_options)
    cloud.publish(place)
    down = za.copy(place.url, str(tmp_path / "back.zarr"), source_storage_options=place.options)
    assert up.chunks_copied == down.chunks_copied == 9
    assert chunk_files(tmp_path / "back.zarr") == chunk_files(tmp_path / "src.zarr")
    assert_same_in_zarr_python(tmp_path / "back.zarr", expected, {"title": "source"})
