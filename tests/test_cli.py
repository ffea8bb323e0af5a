"""The command line: the demo on a local directory, and info/tree/get/consolidate on stored data."""

import json

import numpy as np

import asyncarr.sync as za
from asyncarr.cli import main, parse_selection


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
