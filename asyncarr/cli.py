"""The ``asyncarr`` command line: a demo on a local directory, and info/tree/get/consolidate for any store."""

from __future__ import annotations

import argparse
import ast
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from . import sync as za

__all__ = ["main", "parse_selection"]


def _storage_options(pairs: Sequence[str]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for pair in pairs:
        key, separator, raw = pair.partition("=")
        if not separator:
            raise SystemExit(f"asyncarr: storage option {pair!r} is not KEY=VALUE")
        try:
            options[key] = json.loads(raw)
        except json.JSONDecodeError:
            options[key] = raw
    return options


def parse_selection(text: str) -> Any:
    """Parse a NumPy-style selection such as ``'0:10, ::-1, 5'`` or ``'...'``."""
    parts = [part.strip() for part in text.split(",")] if text.strip() else []
    selection: list[Any] = []
    for part in parts:
        if part in ("...", "Ellipsis"):
            selection.append(Ellipsis)
        elif ":" in part:
            bounds = [int(b) if b.strip() else None for b in part.split(":")]
            if len(bounds) > 3:
                raise SystemExit(f"asyncarr: {part!r} is not a slice")
            selection.append(slice(*bounds))
        else:
            try:
                selection.append(int(ast.literal_eval(part)))
            except (ValueError, SyntaxError):
                raise SystemExit(f"asyncarr: {part!r} is not an index (use ints, slices like 0:10:2, or ...)") from None
    return tuple(selection)


def _demo(directory: Path) -> None:
    """Write, read back and describe a small hierarchy in a local directory store."""
    path = directory / "asyncarr-demo.zarr"
    root = za.open_group(str(path), mode="w")
    rng = np.random.default_rng(42)
    y, x = np.mgrid[0:2048, 0:2048]
    field = (np.sin(x / 200) * np.cos(y / 150) + rng.normal(0, 0.01, x.shape)).astype("f4")

    started = time.perf_counter()
    temperature = root.create_dataset("climate/temperature", data=field, chunks=(256, 256))
    written = time.perf_counter() - started
    started = time.perf_counter()
    read_back = temperature[:]
    read = time.perf_counter() - started
    if not np.array_equal(read_back, field):
        raise SystemExit("asyncarr demo: data read back differs from data written")

    root.create_dataset("counts", data=np.arange(10_000, dtype="i8").reshape(100, 100), chunks=(25, 25))
    root.attrs["description"] = "asyncarr demo hierarchy"
    temperature.attrs["units"] = "arbitrary"
    megabytes = field.nbytes / 2**20
    print(f"wrote {megabytes:.0f} MiB in {written:.3f} s, read it back in {read:.3f} s (equal: True)")
    print(f"window [1000:1010, 1000:1005] mean: {temperature[1000:1010, 1000:1005].mean():.4f}")
    print(root.tree())
    print(temperature.info)
    print(f"stored at {path}")


def _open(args: argparse.Namespace) -> Any:
    return za.open(args.url, mode="r", path=args.path, storage_options=_storage_options(args.option))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = argparse.ArgumentParser(prog="asyncarr", description=__doc__)
    commands = parser.add_subparsers(dest="command")
    demo = commands.add_parser("demo", help="write and read a demo hierarchy in a local directory (the default)")
    demo.add_argument("directory", nargs="?", help="where to write it (default: a temporary directory)")
    for name, text in (("info", "print an array's or group's info table"), ("tree", "print a group's hierarchy")):
        sub = commands.add_parser(name, help=text)
        sub.add_argument("url", help="a path or URL of a store")
    get = commands.add_parser("get", help="print a selection of an array")
    get.add_argument("url", help="a path or URL of a store")
    get.add_argument("selection", nargs="?", default="...", help="e.g. '0:10, ::-1' (default: everything)")
    consolidate = commands.add_parser("consolidate", help="write consolidated metadata for a group")
    consolidate.add_argument("url", help="a path or URL of a store")
    for sub in (*commands.choices.values(),):
        if sub is not demo:
            sub.add_argument("--path", default=None, help="node path inside the store")
            sub.add_argument("-o", "--option", action="append", default=[], help="storage option KEY=VALUE")
    args = parser.parse_args(argv)

    if args.command in (None, "demo"):
        directory = getattr(args, "directory", None)
        if directory:
            _demo(Path(directory))
        else:
            with tempfile.TemporaryDirectory() as tmp:
                _demo(Path(tmp))
    elif args.command == "info":
        print(_open(args).info)
    elif args.command == "tree":
        node = _open(args)
        if not isinstance(node, za.Group):
            raise SystemExit(f"asyncarr: {args.url} is an array, not a group")
        print(node.tree())
    elif args.command == "get":
        node = _open(args)
        if not isinstance(node, za.Array):
            raise SystemExit(f"asyncarr: {args.url} is a group, not an array")
        with np.printoptions(threshold=200):
            print(node[parse_selection(args.selection)])
    elif args.command == "consolidate":
        za.consolidate_metadata(args.url, path=args.path, storage_options=_storage_options(args.option))
        print(f"consolidated metadata written for {args.url}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
