"""The command line: the demo on a local directory, info/tree/get/consolidate on stored data, and the installed
executable behaving as a Unix tool (--version, --json, one-line errors and exit statuses, selections like -5:)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from emulators import s3
from emulators.http import serve_directory
from numcodecs import Delta, Zstd

import asyncarr.sync as za
from asyncarr.cli import main, parse_selection
from asyncarr.cli_output import error_line, parse_storage_options
from asyncarr.errors import AccessDeniedError


def test_demo_writes_a_hierarchy_that_reads_back_equal(tmp_path, capsys):
    assert main(["demo", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "(equal: True)" in out
    root = za.open_group(str(tmp_path / "asyncarr-demo.zarr"), mode="r")
    assert sorted(root.keys()) == ["climate", "counts"]
    np.testing.assert_array_equal(root["counts"][:], np.arange(10_000).reshape(100, 100))


def test_no_arguments_runs_the_demo_in_a_temporary_directory(capsys):
    assert main([]) == 0
    assert "climate" in capsys.readouterr().out


def test_get_prints_the_selection_numpy_gives(tmp_path, capsys):
    data = np.arange(60).reshape(6, 10)
    za.save(str(tmp_path / "a.zarr"), data)
    main(["get", str(tmp_path / "a.zarr"), "1:4, ::-3"])
    assert capsys.readouterr().out.strip() == str(data[1:4, ::-3])


def test_parse_selection_matches_python_slices():
    assert parse_selection("0:10:2, ..., -1") == (slice(0, 10, 2), Ellipsis, -1)
    assert parse_selection("") == ()


def test_tree_info_and_consolidate_on_a_group(tmp_path, capsys):
    root = za.open_group(str(tmp_path / "g.zarr"), mode="w", zarr_format=2)
    root.create_dataset("x/y", data=np.ones(5))
    main(["tree", str(tmp_path / "g.zarr")])
    assert "y (5,) float64" in capsys.readouterr().out
    main(["info", str(tmp_path / "g.zarr"), "--path", "x/y"])
    assert "Chunks initialized : 1/1" in capsys.readouterr().out
    main(["consolidate", str(tmp_path / "g.zarr")])
    consolidated = json.loads((tmp_path / "g.zarr" / ".zmetadata").read_text())
    assert "x/y/.zarray" in consolidated["metadata"]


# -- the installed executable: a Unix tool -------------------------------------------------------

EXECUTABLE = Path(sys.executable).with_name("asyncarr")


def run_cli(*args: object, timeout: float = 120, **environment: str) -> subprocess.CompletedProcess[str]:
    """Run the installed ``asyncarr`` (``python -m asyncarr`` where no script is installed) in a subprocess."""
    command = [str(EXECUTABLE)] if EXECUTABLE.exists() else [sys.executable, "-m", "asyncarr"]
    env = {**os.environ, **environment}
    return subprocess.run([*command, *map(str, args)], capture_output=True, text=True, timeout=timeout, env=env)


def assert_one_error_line(result: subprocess.CompletedProcess[str], status: int = 1) -> str:
    """The command failed with ``status`` and said why in exactly one ``asyncarr: ...`` line on stderr."""
    assert result.returncode == status, (result.returncode, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("asyncarr: "), result.stderr
    assert result.stdout == ""
    return lines[0]


@pytest.fixture
def written(tmp_path: Path) -> dict[str, Any]:
    """A v3 group by zarr-python: attributes, a nested group, an array at ``grid`` with part of its chunks."""
    root = zarr.open_group(tmp_path / "g.zarr", mode="w", zarr_format=3, attributes={"title": "test", "n": 3})
    data = np.arange(120, dtype="f8").reshape(12, 10)
    grid = root.create_array("grid", shape=data.shape, chunks=(5, 5), dtype="f8", attributes={"units": "K"})
    grid[:] = data
    root.create_array("a/b/counts", shape=(7,), chunks=(4,), dtype="i2")[:] = np.arange(7, dtype="i2")
    root.create_group("empty")
    return {"url": str(tmp_path / "g.zarr"), "data": data}


def test_version_prints_the_installed_distribution_version() -> None:
    result = run_cli("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"asyncarr {importlib.metadata.version('asyncarr')}\n"


ARRAY_KEYS = ["name", "kind", "zarr_format", "shape", "dtype", "chunks", "shards", "order", "fill_value", "codecs",
              "attributes", "nbytes", "nbytes_stored", "nchunks", "nchunks_initialized"]  # fmt: skip


@pytest.mark.parametrize("layout", ["v2", "v3", "v3-sharded"])
def test_info_json_gives_the_metadata_zarr_python_wrote_and_the_stored_sizes(tmp_path: Path, layout: str) -> None:
    path = tmp_path / "a.zarr"
    options: dict[str, Any] = {"zarr_format": 3, "chunks": (5, 5)}
    if layout == "v2":
        options = {"zarr_format": 2, "chunks": (5, 5), "compressors": Zstd(level=1), "filters": [Delta(dtype="f4")]}
    elif layout == "v3-sharded":
        options["shards"] = (10, 10)
    z = zarr.create_array(path, shape=(12, 10), dtype="f4", fill_value=np.nan, attributes={"units": "m"}, **options)
    z[:5] = np.arange(50, dtype="f4").reshape(5, 10)

    result = run_cli("info", path, "--json")
    assert result.returncode == 0, result.stderr
    described = json.loads(result.stdout)
    assert list(described) == ARRAY_KEYS  # a fixed order: scripts and diffs see the same document every time
    stored = json.loads((path / ("zarr.json" if layout != "v2" else ".zarray")).read_text())
    codecs = stored["codecs"] if layout != "v2" else [*stored["filters"], stored["compressor"]]
    files = [file for file in path.rglob("*") if file.is_file()]
    metadata_names = {"zarr.json", ".zarray", ".zattrs"}
    assert described == {
        "name": "/",
        "kind": "array",
        "zarr_format": 2 if layout == "v2" else 3,
        "shape": [12, 10],
        "dtype": "float32",
        "chunks": [5, 5],
        "shards": [10, 10] if layout == "v3-sharded" else None,
        "order": "C",
        "fill_value": "NaN",
        "codecs": codecs,
        "attributes": {"units": "m"},
        "nbytes": 12 * 10 * 4,
        "nbytes_stored": sum(file.stat().st_size for file in files),
        "nchunks": z.nchunks,
        "nchunks_initialized": z.nchunks_initialized,
    }
    assert described["nchunks_initialized"] < described["nchunks"]
    assert sum(file.name not in metadata_names for file in files) == (1 if layout == "v3-sharded" else 2)


def test_info_json_of_a_group_lists_its_attributes_and_members(written: dict[str, Any]) -> None:
    result = run_cli("info", "--json", written["url"])
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "name": "/",
        "kind": "group",
        "zarr_format": 3,
        "attributes": {"title": "test", "n": 3},
        "members": [
            {"name": "a", "kind": "group"},
            {"name": "empty", "kind": "group"},
            {"name": "grid", "kind": "array"},
        ],
    }


def test_tree_json_nests_every_member_with_array_shapes(written: dict[str, Any]) -> None:
    result = run_cli("tree", written["url"], "--json")
    assert result.returncode == 0, result.stderr
    counts = {"name": "counts", "kind": "array", "shape": [7], "dtype": "int16", "chunks": [4]}
    assert json.loads(result.stdout) == {
        "name": "/",
        "kind": "group",
        "members": [
            {"name": "a", "kind": "group", "members": [{"name": "b", "kind": "group", "members": [counts]}]},
            {"name": "empty", "kind": "group", "members": []},
            {"name": "grid", "kind": "array", "shape": [12, 10], "dtype": "float64", "chunks": [5, 5]},
        ],
    }
    below = run_cli("--path", "a", "tree", written["url"], "--json")
    assert json.loads(below.stdout)["members"][0]["members"] == [counts]


@pytest.mark.parametrize(
    "words",
    [["-5:"], ["-1"], ["--", "-5:"], ["-1, -3:"], ["-3:,::-4"], ["2:-1, -2"], ["--", "-1,-2"]],
    ids=" ".join,
)
def test_selections_starting_with_a_dash_are_selections(written: dict[str, Any], words: list[str]) -> None:
    result = run_cli("get", "--path", "grid", written["url"], "--json", *words)
    assert result.returncode == 0, result.stderr
    text = words[-1]
    expected = written["data"][eval(f"np.s_[{text}]")]
    printed = json.loads(result.stdout)
    assert printed["shape"] == list(expected.shape)
    np.testing.assert_array_equal(np.array(printed["data"], dtype="f8").reshape(expected.shape), expected)


def test_after_a_double_dash_everything_is_a_positional(written: dict[str, Any]) -> None:
    result = run_cli("get", written["url"], "--path", "grid", "--", "-2:", "--json")
    assert_one_error_line(result, status=2)  # '--json' is a third positional here
    assert "--json" in result.stderr


@pytest.mark.parametrize(
    "line",
    [
        ["--path", "grid", "--json", "get", "{url}", "-2:"],
        ["get", "--path", "grid", "{url}", "--json", "-2:"],
        ["get", "{url}", "--path", "grid", "-2:", "--json"],
        ["--json", "get", "{url}", "-2:", "--path", "grid"],
        ["get", "{url}", "-2:", "--path=grid", "--json"],
        ["--path", "grid", "get", "--json", "--", "{url}", "-2:"],
    ],
    ids=" ".join,
)
def test_path_and_json_work_anywhere_on_the_line(written: dict[str, Any], line: list[str]) -> None:
    words = [word.format(url=written["url"]) for word in line]
    result = run_cli(*words)
    assert result.returncode == 0, result.stderr
    np.testing.assert_array_equal(json.loads(result.stdout)["data"], written["data"][-2:])


def test_get_prints_the_selection_as_numpy_does(written: dict[str, Any]) -> None:
    result = run_cli("get", written["url"], "--path", "grid", "-3:, ::-4")
    assert result.returncode == 0, result.stderr
    assert result.stdout == str(written["data"][-3:, ::-4]) + "\n"


SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"

USER_ERRORS = {
    "a path that does not exist": (["info", "{tmp}/missing.zarr"], "no array or group"),
    "a folder that is not Zarr": (["tree", "{tmp}/plain"], "no array or group"),
    "a node path that is not there": (["info", "{url}", "--path", "nope"], "nope"),
    "an index out of range": (["get", "{url}", "--path", "grid", "12"], "out of bounds"),
    "a slice out of range is fine, a row is not": (["get", "{url}", "--path", "grid", "3, -11"], "out of bounds"),
    "a selection that is not one": (["get", "{url}", "--path", "grid", "abc"], "not an index"),
    "a float index": (["get", "{url}", "--path", "grid", "1.5"], "not an index"),
    "a zero step": (["get", "{url}", "--path", "grid", "::0"], "step"),
    "too many indices": (["get", "{url}", "--path", "grid", "0, 0, 0"], "too many"),
    "get on a group": (["get", "{url}"], "is a group"),
    "tree of an array": (["tree", "{url}", "--path", "grid"], "is an array"),
    "an -o without =": (["info", "{url}", "-o", SECRET], "KEY=VALUE"),
    "an option the store does not take": (["info", "{url}", "-o", "colour=blue"], "colour"),
    "a corrupt zarr.json": (["info", "{tmp}/corrupt.zarr"], "zarr.json"),
    "a token in the URL's query": (["info", "{tmp}/missing.zarr?sig=" + SECRET], "sig=***"),
}


@pytest.mark.parametrize("words, expected", USER_ERRORS.values(), ids=USER_ERRORS.keys())
def test_a_user_error_is_one_line_on_stderr_with_status_1(
    written: dict[str, Any], tmp_path: Path, words: list[str], expected: str
) -> None:
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "notes.txt").write_text("not zarr")
    (tmp_path / "corrupt.zarr").mkdir()
    (tmp_path / "corrupt.zarr" / "zarr.json").write_text('{"zarr_format": 3, "node_type": "arr')
    result = run_cli(*(word.format(tmp=tmp_path, url=written["url"]) for word in words))
    line = assert_one_error_line(result)
    assert expected in line
    assert SECRET not in line


def test_an_unreachable_endpoint_is_one_line_naming_the_url_and_no_credential() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = run_cli(
        "info", "s3://bucket/data.zarr", "-o", f"endpoint_url=http://127.0.0.1:{port}", "-o", "key=AKIDEXAMPLE",
        "-o", f"secret={SECRET}", "-o", "region=us-east-1",
    )  # fmt: skip
    line = assert_one_error_line(result)
    assert "s3://bucket/data.zarr" in line
    assert SECRET not in result.stderr and "AKIDEXAMPLE" not in result.stderr


def test_a_read_only_store_is_one_line(written: dict[str, Any]) -> None:
    url = serve_directory(written["url"])
    line = assert_one_error_line(run_cli("consolidate", url))
    assert "read-only" in line


@pytest.mark.parametrize(
    "words",
    [
        ["frobnicate"],
        ["get"],
        ["cp", "only-a-source"],
        ["info", "x", "--no-such-flag"],
        ["cp", "a", "b", "--concurrency", "0"],
        ["info", "s3://bucket/x", f"secret={SECRET}"],  # a storage option that lost its -o
    ],
    ids=lambda words: " ".join(words).replace(SECRET, "SECRET"),
)
def test_a_usage_error_is_one_line_with_status_2(words: list[str]) -> None:
    line = assert_one_error_line(run_cli(*words), status=2)
    assert "--help" in line
    assert SECRET not in line


def test_debug_adds_the_traceback_before_the_line(tmp_path: Path) -> None:
    result = run_cli("info", tmp_path / "missing.zarr", "--debug")
    assert result.returncode == 1
    assert "Traceback (most recent call last)" in result.stderr
    assert "NodeNotFoundError" in result.stderr
    assert result.stderr.splitlines()[-1].startswith("asyncarr: no array or group")


@pytest.mark.parametrize("command", [["info", "s3://bucket/x.zarr"], ["cp", "s3://bucket/x.zarr", "copy.zarr"]])
def test_an_interrupt_is_one_line_with_status_130(command: list[str], tmp_path: Path) -> None:
    """Ctrl-C while a request hangs (a server that accepts and never answers): no traceback, status 130."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.settimeout(60)
        endpoint = f"http://127.0.0.1:{server.getsockname()[1]}"
        executable = [str(EXECUTABLE)] if EXECUTABLE.exists() else [sys.executable, "-m", "asyncarr"]
        child = subprocess.Popen(
            [*executable, *command, "-o", f"endpoint_url={endpoint}", "-o", "anon=true"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
        )
        connection, _ = server.accept()  # the request is in flight
        with connection:
            child.send_signal(signal.SIGINT)
            out, err = child.communicate(timeout=60)
    assert child.returncode == 130
    assert out == ""
    assert err == "asyncarr: interrupted\n"


def test_stats_puts_the_store_metrics_in_the_json_or_a_table_on_stderr(written: dict[str, Any]) -> None:
    result = run_cli("info", written["url"], "--path", "grid", "--json", "--stats")
    assert result.returncode == 0, result.stderr
    described = json.loads(result.stdout)
    assert described["shape"] == [12, 10]
    metrics = described["metrics"]
    assert metrics["requests"]["get"] >= 1  # the metadata document at least
    assert metrics["bytes_read"] >= (Path(written["url"]) / "grid" / "zarr.json").stat().st_size
    table = run_cli("--stats", "get", written["url"], "--path", "grid", "0")
    assert table.returncode == 0, table.stderr
    assert table.stdout == str(written["data"][0]) + "\n"  # the table goes to stderr, the data alone to stdout
    gets = re.search(r"^requests\s+.*\bget=(\d+)", table.stderr, re.MULTILINE)
    assert gets and int(gets[1]) >= 2, table.stderr  # metadata and the chunks of row 0


def test_get_json_is_strict_json_for_values_json_has_no_literal_for(tmp_path: Path) -> None:
    data = np.array([1.5, np.nan, np.inf, -np.inf])
    za.save(str(tmp_path / "f.zarr"), data)
    result = run_cli("get", tmp_path / "f.zarr", "--json")
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout, parse_constant=lambda name: pytest.fail(f"bare {name} in the JSON"))
    assert printed == {"name": "/", "selection": "...", "shape": [4], "dtype": "float64",
                       "data": [1.5, "NaN", "Infinity", "-Infinity"]}  # fmt: skip


def test_python_dash_m_runs_the_same_command_line() -> None:
    result = subprocess.run([sys.executable, "-m", "asyncarr", "--version"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout.startswith("asyncarr "), result.stderr


def test_a_closed_pipe_ends_the_command_quietly(tmp_path: Path) -> None:
    za.save(str(tmp_path / "big.zarr"), np.arange(200_000))
    command = [str(EXECUTABLE)] if EXECUTABLE.exists() else [sys.executable, "-m", "asyncarr"]
    child = subprocess.Popen([*command, "get", str(tmp_path / "big.zarr"), "--json"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)  # fmt: skip
    assert child.stdout is not None and child.stderr is not None
    child.stdout.read(10)
    child.stdout.close()  # as `| head -c 10` does
    err = child.stderr.read().decode()
    assert child.wait(timeout=60) == 141
    assert err == ""


def test_storage_option_values_are_text_unless_they_are_true_false_null_or_json_objects() -> None:
    assert parse_storage_options(["anon=true", "project=0123", "token={\"a\": 1}", "k==v", "region=eu-west-1"]) == {
        "anon": True, "project": "0123", "token": {"a": 1}, "k": "=v", "region": "eu-west-1"}  # fmt: skip


def test_consolidate_json_names_what_it_consolidated(written: dict[str, Any]) -> None:
    result = run_cli("consolidate", written["url"], "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"consolidated": written["url"], "path": ""}
    consolidated = json.loads((Path(written["url"]) / "zarr.json").read_text())["consolidated_metadata"]
    assert {"grid", "a/b/counts"} <= set(consolidated["metadata"])


def test_a_warning_is_one_line_and_the_json_still_parses(written: dict[str, Any]) -> None:
    broken = Path(written["url"]) / "broken"
    broken.mkdir()
    (broken / "zarr.json").write_text("{not json")
    result = run_cli("info", written["url"], "--json")
    assert result.returncode == 0, result.stderr
    assert [member["name"] for member in json.loads(result.stdout)["members"]] == ["a", "empty", "grid"]
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("asyncarr: warning: ") and "broken" in lines[0], result.stderr


def test_verbose_logs_each_retry_before_the_error_line() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = run_cli(
        "info", "s3://bucket/x.zarr", "-o", f"endpoint_url=http://127.0.0.1:{port}", "-o", "anon=true", "-v"
    )
    assert result.returncode == 1
    *logs, last = result.stderr.splitlines()
    assert last.startswith("asyncarr: s3://bucket/x.zarr")
    assert logs and all(" INFO asyncarr" in line and "s3://bucket/x.zarr" in line for line in logs), result.stderr


def test_get_json_writes_datetimes_in_iso_8601_and_bytes_as_text(tmp_path: Path) -> None:
    times = np.array(["2020-01-01T06:00", "NaT"], dtype="M8[m]")
    za.save(str(tmp_path / "t.zarr"), times)
    za.save(str(tmp_path / "b.zarr"), np.array([b"ab", b"\xff"], dtype="S2"))
    printed = [json.loads(run_cli("get", tmp_path / name, "--json").stdout)["data"] for name in ("t.zarr", "b.zarr")]
    assert printed == [["2020-01-01T06:00", "NaT"], ["ab", "\u00ff"]]


def test_info_json_gives_null_sizes_where_a_store_cannot_list_and_probing_is_over_budget(
    written: dict[str, Any],
) -> None:
    url = serve_directory(written["url"]) + "/grid"
    local = json.loads(run_cli("info", written["url"], "--path", "grid", "--json").stdout)
    probed = json.loads(run_cli("info", url, "--json").stdout)
    assert (probed["nbytes_stored"], probed["nchunks_initialized"]) == (local["nbytes_stored"], 6)
    unknown = run_cli("info", url, "--json", ASYNCARR_MAX_PROBED_CHUNKS="1")
    assert unknown.returncode == 0, unknown.stderr
    described = json.loads(unknown.stdout)
    assert (described["nbytes_stored"], described["nchunks_initialized"]) == (None, None)
    assert described["shape"] == [12, 10] and described["name"] == "/"


def test_access_denied_is_one_line_with_the_hint_as_a_flag_and_no_credential() -> None:
    server = s3.authenticating_moto()
    url = f"s3://{server.new_bucket()}/x.zarr"
    options = [f"endpoint_url={server.endpoint}", "key=AKIDWRONG", f"secret={SECRET}", f"region={s3.REGION}"]
    line = assert_one_error_line(run_cli("info", url, *(word for option in options for word in ("-o", option))))
    assert line.startswith(f"asyncarr: {url}/") and ": access denied (HTTP 403" in line  # the first key tried
    assert line.endswith("pass -o anon=true.")  # the store's storage_options={"anon": True}, as a flag
    assert SECRET not in line


def test_python_spelled_hints_become_flags() -> None:
    denied = AccessDeniedError('gs://b/x: denied. For public data pass storage_options={"token": "anon"}.')
    assert error_line(denied, command="cp").endswith("pass -o token=anon (-O for the destination).")
    assert error_line(denied).endswith("pass -o token=anon.")
