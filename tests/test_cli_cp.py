"""``asyncarr cp SRC DST``, run as the installed executable: identical copies between local directories and S3
(moto), resumable re-runs, --verify, the progress bar, the JSON summary and its metrics, one-line errors."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from emulators import s3
from emulators.http import serve_directory
from test_cli import EXECUTABLE, assert_one_error_line, run_cli

import asyncarr
import asyncarr.sync as za
from asyncarr.cli import main
from asyncarr.copy import CopyResult

METADATA_NAMES = {"zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata"}
SUMMARY_KEYS = ["chunks_copied", "chunks_skipped", "bytes_copied", "seconds"]


def files_below(root: Path) -> dict[str, bytes]:
    """``relative/path`` -> contents of every file below ``root``."""
    return {path.relative_to(root).as_posix(): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


def chunk_files(root: Path) -> dict[str, bytes]:
    """The stored chunks below ``root`` (every file but the metadata documents)."""
    return {key: value for key, value in files_below(root).items() if key.rpartition("/")[2] not in METADATA_NAMES}


@pytest.fixture(params=[2, 3], ids=["v2", "v3"])
def source(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    """A hierarchy by zarr-python: a 12x10 float grid in 6 chunks and a nested int16 array in 2, with attributes."""
    root = zarr.open_group(tmp_path / "source.zarr", mode="w", zarr_format=request.param, attributes={"title": "t"})
    grid = np.random.default_rng(1).random((12, 10))
    counts = np.arange(1, 8, dtype="i2")
    root.create_array("grid", shape=grid.shape, chunks=(5, 5), dtype="f8", attributes={"units": "K"})[:] = grid
    root.create_array("a/b/counts", shape=counts.shape, chunks=(4,), dtype="i2")[:] = counts
    path = tmp_path / "source.zarr"
    return {"path": path, "url": str(path), "grid": grid, "counts": counts, "nchunks": 8}


def summary(result: Any) -> dict[str, Any]:
    """The JSON line ``cp --json`` printed, after checking the command succeeded."""
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # no bar in a pipe, no warning, no unclosed connection
    printed = json.loads(result.stdout)
    assert list(printed)[:4] == SUMMARY_KEYS
    return printed


def assert_same_hierarchy(copied: Path, source: dict[str, Any]) -> None:
    """zarr-python reads the copy as the data written, with the attributes."""
    root = zarr.open_group(copied, mode="r")
    assert dict(root.attrs) == {"title": "t"}
    np.testing.assert_array_equal(root["grid"][:], source["grid"])
    np.testing.assert_array_equal(root["a/b/counts"][:], source["counts"])
    assert dict(root["grid"].attrs) == {"units": "K"}


def test_cp_copies_a_hierarchy_byte_for_byte(source: dict[str, Any], tmp_path: Path) -> None:
    dest = tmp_path / "dest.zarr"
    printed = summary(run_cli("cp", source["url"], dest, "--json"))
    stored = chunk_files(source["path"])
    assert len(stored) == source["nchunks"]
    assert printed["chunks_copied"] == source["nchunks"] and printed["chunks_skipped"] == 0
    assert printed["bytes_copied"] == sum(len(value) for value in stored.values())
    assert chunk_files(dest) == stored  # stored bytes moved, not re-encoded
    assert_same_hierarchy(dest, source)


def test_a_second_run_copies_only_the_deleted_chunks(source: dict[str, Any], tmp_path: Path) -> None:
    dest = tmp_path / "dest.zarr"
    summary(run_cli("cp", source["url"], dest, "--json"))
    deleted = sorted(chunk_files(dest))[::3]
    for key in deleted:
        (dest / key).unlink()
    printed = summary(run_cli("cp", source["url"], dest, "--json"))
    assert printed["chunks_copied"] == len(deleted)
    assert printed["chunks_skipped"] == source["nchunks"] - len(deleted)
    assert printed["bytes_copied"] == sum(len(source["path"].joinpath(key).read_bytes()) for key in deleted)
    assert chunk_files(dest) == chunk_files(source["path"])
    again = summary(run_cli("cp", source["url"], dest, "--json"))
    assert (again["chunks_copied"], again["chunks_skipped"]) == (0, source["nchunks"])


def test_verify_recopies_a_chunk_altered_without_changing_its_size(source: dict[str, Any], tmp_path: Path) -> None:
    dest = tmp_path / "dest.zarr"
    summary(run_cli("cp", source["url"], dest, "--json"))
    key = sorted(chunk_files(dest))[0]
    original = (dest / key).read_bytes()
    (dest / key).write_bytes(bytes(255 - byte for byte in original))
    by_size = summary(run_cli("cp", source["url"], dest, "--json"))
    assert by_size["chunks_copied"] == 0  # same sizes: a plain resume trusts them
    verified = summary(run_cli("cp", source["url"], dest, "--json", "--verify"))
    assert (verified["chunks_copied"], verified["chunks_skipped"]) == (1, source["nchunks"] - 1)
    assert (dest / key).read_bytes() == original


def test_the_progress_bar_ends_at_done_over_total_and_stays_out_of_pipes(
    source: dict[str, Any], tmp_path: Path
) -> None:
    total = source["nchunks"]
    forced = run_cli("cp", source["url"], tmp_path / "one.zarr", "--progress")
    assert forced.returncode == 0, forced.stderr
    drawn = [frame.strip() for frame in re.split(r"[\r\n]", forced.stderr) if frame.strip()]
    assert drawn and f"{total}/{total}" in drawn[-1], forced.stderr
    assert forced.stdout.startswith(f"copied {total} chunks")
    resumed = run_cli("cp", source["url"], tmp_path / "one.zarr", "--progress")  # nothing left: still N/N
    drawn = [frame.strip() for frame in re.split(r"[\r\n]", resumed.stderr) if frame.strip()]
    assert drawn and f"{total}/{total}" in drawn[-1], resumed.stderr
    for flags in ([], ["--no-progress"]):  # stderr is a pipe here: no bar unless asked
        quiet = run_cli("cp", source["url"], tmp_path / f"quiet{len(flags)}.zarr", *flags)
        assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr


def test_without_json_one_summary_line(source: dict[str, Any], tmp_path: Path) -> None:
    result = run_cli("cp", source["url"], tmp_path / "dest.zarr", "--concurrency", "1")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"copied {source['nchunks']} chunks ("), lines
    assert "skipped 0" in lines[0]
    assert_same_hierarchy(tmp_path / "dest.zarr", source)


def test_path_and_dest_path_copy_one_array_to_a_new_place(source: dict[str, Any], tmp_path: Path) -> None:
    dest = tmp_path / "dest.zarr"
    printed = summary(run_cli("cp", "--path", "a/b/counts", source["url"], dest, "--dest-path", "copies/c", "--json"))
    assert printed["chunks_copied"] == 2
    np.testing.assert_array_equal(zarr.open_array(dest / "copies" / "c", mode="r")[:], source["counts"])
    assert not (dest / "grid").exists()


def test_dry_run_writes_nothing(source: dict[str, Any], tmp_path: Path) -> None:
    dest = tmp_path / "dest.zarr"
    printed = summary(run_cli("cp", source["url"], dest, "--json", "--dry-run"))
    # What a run would copy, counted with sizes from the source; nothing written.
    assert printed["chunks_copied"] == source["nchunks"] and printed["chunks_skipped"] == 0
    assert printed["bytes_copied"] > 0
    assert not dest.exists() or files_below(dest) == {}
    summary(run_cli("cp", source["url"], dest, "--json"))
    again = summary(run_cli("cp", source["url"], dest, "--json", "--dry-run"))
    assert (again["chunks_copied"], again["chunks_skipped"]) == (0, source["nchunks"])


def test_overwrite_replaces_an_array_whose_metadata_differs(source: dict[str, Any], tmp_path: Path) -> None:
    dest = tmp_path / "dest.zarr"
    za.open_array(str(dest), mode="w", shape=(3,), chunks=(3,), dtype="i1")[:] = 7
    refused = run_cli("cp", source["url"], dest, "--path", "a/b/counts", "--json")
    assert_one_error_line(refused)
    np.testing.assert_array_equal(za.open_array(str(dest), mode="r")[:], [7, 7, 7])  # left as it was
    summary(run_cli("cp", source["url"], dest, "--path", "a/b/counts", "--json", "--overwrite"))
    np.testing.assert_array_equal(zarr.open_array(dest, mode="r")[:], source["counts"])


def test_local_to_s3_and_back_with_separate_storage_options(source: dict[str, Any], tmp_path: Path) -> None:
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/copies/data.zarr"
    options = [f"endpoint_url={s3.moto_endpoint()}", f"region={s3.REGION}"]
    up = summary(run_cli("cp", source["url"], url, *(w for o in options for w in ("-O", o)), "--json", "--stats"))
    assert up["chunks_copied"] == source["nchunks"]
    listed = s3.client().list_objects_v2(Bucket=bucket, Prefix="copies/data.zarr/")["Contents"]
    expected = files_below(source["path"])
    assert {entry["Key"].removeprefix("copies/data.zarr/") for entry in listed} >= set(chunk_files(source["path"]))
    for entry in listed:
        key = entry["Key"].removeprefix("copies/data.zarr/")
        if key in chunk_files(source["path"]):
            assert s3.client().get_object(Bucket=bucket, Key=entry["Key"])["Body"].read() == expected[key]
    assert set(up["metrics"]) == {"source", "dest"}

    back = tmp_path / "back.zarr"
    down = summary(run_cli("cp", url, back, *(w for o in options for w in ("-o", o)), "--json"))
    assert (down["chunks_copied"], down["chunks_skipped"]) == (source["nchunks"], 0)
    assert chunk_files(back) == chunk_files(source["path"])
    assert_same_hierarchy(back, source)


def test_stats_counts_the_requests_of_both_stores(source: dict[str, Any], tmp_path: Path) -> None:
    dest = tmp_path / "dest.zarr"
    printed = summary(run_cli("cp", source["url"], dest, "--json", "--stats"))
    metrics = printed["metrics"]
    assert metrics["dest"]["requests"]["set"] >= source["nchunks"]
    assert metrics["source"]["requests"]["get"] >= source["nchunks"]
    assert metrics["source"]["bytes_read"] >= printed["bytes_copied"]
    table = run_cli("cp", source["url"], tmp_path / "other.zarr", "--stats")
    assert table.returncode == 0, table.stderr
    assert re.search(r"^dest\.requests\s+.*\bset=\d+", table.stderr, re.MULTILINE), table.stderr


COPY_ERRORS = {
    "a source that is not there": (["{tmp}/missing.zarr", "{tmp}/dest.zarr"], "no array or group"),
    "an -O without =": (["{src}", "{tmp}/dest.zarr", "-O", "s3cr3t-value"], "-O option number 1 is not KEY=VALUE"),
    "a copy into itself": (["{src}", "{src}"], "itself"),
}


@pytest.mark.parametrize("words, expected", COPY_ERRORS.values(), ids=COPY_ERRORS.keys())
def test_a_failed_copy_is_one_line(source: dict[str, Any], tmp_path: Path, words: list[str], expected: str) -> None:
    line = assert_one_error_line(run_cli("cp", *(w.format(tmp=tmp_path, src=source["url"]) for w in words)))
    assert expected in line
    assert "s3cr3t-value" not in line


def test_a_read_only_destination_is_one_line(source: dict[str, Any], tmp_path: Path) -> None:
    (tmp_path / "served").mkdir()
    line = assert_one_error_line(run_cli("cp", source["url"], serve_directory(tmp_path / "served")))
    assert "read-only" in line


def test_every_flag_reaches_the_engine_as_its_keyword(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    seen: dict[str, Any] = {}

    async def copy(source: Any, dest: Any, **keywords: Any) -> CopyResult:
        seen.update(source=source, dest=dest, **keywords)
        return CopyResult((1, 0, 80), chunks_copied=2, chunks_skipped=3, bytes_copied=40, seconds=0.25)

    monkeypatch.setattr(asyncarr, "copy", copy)
    status = main(["--path", "in/x", "cp", "s3://a/b.zarr", "gs://c/d.zarr", "--dest-path", "out/y", "-o", "anon=true",
                   "-o", "region=eu-west-2", "-O", "project=0123", "--verify", "--overwrite", "--concurrency", "3",
                   "--dry-run", "--no-progress", "--json"])  # fmt: skip
    assert status == 0
    progress = seen.pop("progress")
    assert seen == {
        "source": "s3://a/b.zarr",
        "dest": "gs://c/d.zarr",
        "source_path": "in/x",
        "dest_path": "out/y",
        "source_storage_options": {"anon": True, "region": "eu-west-2"},
        "dest_storage_options": {"project": "0123"},
        "if_exists": "replace",
        "verify": True,
        "dry_run": True,
        "concurrency": 3,
    }
    assert callable(progress) and not progress.enabled
    assert json.loads(capsys.readouterr().out) == {"chunks_copied": 2, "chunks_skipped": 3, "bytes_copied": 40,
                                                   "seconds": 0.25}  # fmt: skip

    seen.clear()
    assert main(["cp", "a.zarr", "b.zarr"]) == 0
    assert (seen["if_exists"], seen["verify"], seen["dry_run"], seen["concurrency"]) == (None, False, False, None)
    assert (seen["source_storage_options"], seen["dest_storage_options"]) == (None, None)
    assert capsys.readouterr().out == "copied 2 chunks (40 bytes), skipped 3 already at the destination, in 0.2 s\n"


def test_the_progress_bar_is_on_by_default_when_stderr_is_a_terminal(source: dict[str, Any], tmp_path: Path) -> None:
    controller, terminal = pty.openpty()
    try:
        command = [str(EXECUTABLE)] if EXECUTABLE.exists() else [sys.executable, "-m", "asyncarr"]
        child = subprocess.run(
            [*command, "cp", source["url"], str(tmp_path / "dest.zarr")],
            stdout=subprocess.PIPE,
            stderr=terminal,
            timeout=120,
        )
        os.close(terminal)
        drawn = b""
        while True:
            try:
                piece = os.read(controller, 65536)
            except OSError:  # EIO: the terminal's other end is closed and everything was read
                break
            if not piece:
                break
            drawn += piece
    finally:
        os.close(controller)
    assert child.returncode == 0
    total = source["nchunks"]
    frames = [frame.strip() for frame in re.split(r"[\r\n]", drawn.decode(errors="replace")) if frame.strip()]
    assert frames and f"{total}/{total}" in frames[-1], drawn


def test_through_a_zip_file_and_back(source: dict[str, Any], tmp_path: Path) -> None:
    zipped = tmp_path / "archive.zip"
    assert summary(run_cli("cp", source["url"], zipped, "--json"))["chunks_copied"] == source["nchunks"]
    back = tmp_path / "back.zarr"
    assert summary(run_cli("cp", zipped, back, "--json"))["chunks_copied"] == source["nchunks"]
    assert chunk_files(back) == chunk_files(source["path"])
    assert_same_hierarchy(back, source)


def test_from_an_http_server_once_consolidated(source: dict[str, Any], tmp_path: Path) -> None:
    assert run_cli("consolidate", source["url"]).returncode == 0  # HTTP cannot list: the copy reads the index
    url = serve_directory(source["path"])
    dest = tmp_path / "dest.zarr"
    assert summary(run_cli("cp", url, dest, "--json"))["chunks_copied"] == source["nchunks"]
    assert chunk_files(dest) == chunk_files(source["path"])
    assert_same_hierarchy(dest, source)
    again = summary(run_cli("cp", url, dest, "--json"))
    assert (again["chunks_copied"], again["chunks_skipped"]) == (0, source["nchunks"])
