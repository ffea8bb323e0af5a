"""The ``asyncarr`` command line: a demo on a local directory; info, tree, get, consolidate and cp for any store."""

from __future__ import annotations

import argparse
import ast
import contextlib
import logging
import os
import re
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from . import sync as za
from .cli_copy import add_copy_command, run_copy
from .cli_output import (
    CommandLineError,
    describe_node,
    dumps,
    error_line,
    metrics_table,
    parse_storage_options,
    redact_url,
    secrets_of,
    tree_of,
    url_secrets,
)

__all__ = ["main", "parse_selection"]

#: Options that take a value: the token after one is that value, never a positional.
_VALUE_OPTIONS = frozenset({"--path", "--dest-path", "-o", "--option", "-O", "--dest-option", "--concurrency"})
#: A token like ``-5:``, ``-1`` or ``-3,::2`` is a selection, not an option: no option starts with a digit.
_LOOKS_LIKE_A_SELECTION = re.compile(r"-[0-9.:,]")
#: argparse takes a token that does not start with ``-`` for a positional; this mark (never in a real argv, where
#: arguments are C strings) is removed after parsing.
_MARK = "\x00"
_ASSIGNMENT = re.compile(r"([A-Za-z_][\w.-]*)=[^\s']+")
_POSITIONALS = ("url", "selection", "src", "dst", "directory")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("asyncarr")
    except PackageNotFoundError:  # a checkout on sys.path, not installed
        from . import __version__

        return __version__


def parse_selection(text: str) -> tuple[Any, ...]:
    """Parse a NumPy-style selection such as ``'0:10, ::-1, 5'`` or ``'...'``."""
    parts = [part.strip() for part in text.split(",")] if text.strip() else []
    selection: list[Any] = []
    for part in parts:
        if part in ("...", "Ellipsis"):
            selection.append(Ellipsis)
        elif ":" in part:
            bounds = part.split(":")
            if len(bounds) > 3:
                raise CommandLineError(f"selection {part!r} is not a slice (write start:stop:step, e.g. 0:10:2)")
            selection.append(slice(*(_integer(bound, part) if bound.strip() else None for bound in bounds)))
        else:
            selection.append(_integer(part, part))
    return tuple(selection)


def _integer(text: str, part: str) -> int:
    try:
        value = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError):
        value = None
    if not isinstance(value, int) or isinstance(value, bool):
        raise CommandLineError(
            f"selection {part!r} is not an index: use integers, slices like 0:10:2 or -5:, and ... "
            "separated by commas, e.g. '0, 10:20, ::-1'"
        )
    return value


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


# -- commands ------------------------------------------------------------------------------------


def _open(args: argparse.Namespace) -> za.Array | za.Group:
    return za.open(args.url, mode="r", path=args.path, storage_options=parse_storage_options(args.option))


def _store_metrics(node: Any) -> dict[str, Any]:
    """The store's request counters, or ``{}`` for a store that keeps none."""
    metrics = getattr(node.store, "metrics", None)
    return dict(metrics().as_dict()) if callable(metrics) else {}


def _emit(args: argparse.Namespace, document: dict[str, Any] | None, text: str | None, node: Any) -> None:
    """Print the command's result: JSON (with the store's metrics inside under --stats) or text (metrics on stderr)."""
    if args.json:
        if args.stats:
            document = {**(document or {}), "metrics": _store_metrics(node)}
        print(dumps(document))
        return
    if text is not None:
        print(text)
    if args.stats:
        print(metrics_table(_store_metrics(node)), file=sys.stderr)


def _run_demo(args: argparse.Namespace) -> int:
    if args.directory:
        _demo(Path(args.directory))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            _demo(Path(tmp))
    return 0


def _run_info(args: argparse.Namespace) -> int:
    node = _open(args)
    _emit(args, describe_node(node) if args.json else None, None if args.json else str(node.info).rstrip("\n"), node)
    return 0


def _run_tree(args: argparse.Namespace) -> int:
    node = _open(args)
    if not isinstance(node, za.Group):
        raise CommandLineError(f"{_where(args)} is an array, not a group: use 'asyncarr info' to describe it")
    _emit(args, tree_of(node) if args.json else None, None if args.json else str(node.tree()), node)
    return 0


def _run_get(args: argparse.Namespace) -> int:
    node = _open(args)
    if not isinstance(node, za.Array):
        names = ", ".join(node.keys()) or "none"
        raise CommandLineError(f"{_where(args)} is a group, not an array: pick one with --path NAME (members: {names})")
    selection = parse_selection(args.selection)
    try:
        data = np.asarray(node[selection])
    except IndexError as exc:
        raise IndexError(f"{exc} (the array's shape is {node.shape})") from exc
    if args.json:
        document = {"name": node.name, "selection": args.selection, "shape": list(data.shape),
                    "dtype": str(data.dtype), "data": data}  # fmt: skip
        _emit(args, document, None, node)
    else:
        with np.printoptions(threshold=200):
            _emit(args, None, str(data), node)
    return 0


def _run_consolidate(args: argparse.Namespace) -> int:
    group = za.consolidate_metadata(args.url, path=args.path, storage_options=parse_storage_options(args.option))
    document = {"consolidated": redact_url(args.url), "path": args.path or ""}
    _emit(args, document, f"consolidated metadata written for {_where(args)}", group)
    return 0


def _where(args: argparse.Namespace) -> str:
    url = redact_url(args.url)
    return f"{url} (path {args.path!r})" if args.path else url


_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "demo": _run_demo,
    "info": _run_info,
    "tree": _run_tree,
    "get": _run_get,
    "consolidate": _run_consolidate,
    "cp": run_copy,
}


# -- parsing -------------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """argparse with usage errors as one line, ``asyncarr: <message> (see 'asyncarr cmd --help')``, exit 2."""

    def error(self, message: str) -> NoReturn:
        """Print the usage mistake as one line and exit with status 2."""
        # A word like secret=... is a storage option that lost its -o: never echo its value.
        message = _ASSIGNMENT.sub(r"\1=***", message.replace(_MARK, ""))
        self.exit(2, f"asyncarr: {message} (see '{self.prog} --help')\n")


def _flags() -> argparse.ArgumentParser:
    """Flags accepted anywhere on the line, before or after the command (defaults are filled in later)."""
    flags = argparse.ArgumentParser(add_help=False)
    hidden = argparse.SUPPRESS  # unset unless given, so the command's parser does not overwrite the main one's
    flags.add_argument("--path", default=hidden, help="node path inside the store (default: its root)")
    flags.add_argument("--json", action="store_true", default=hidden, help="print the result as JSON on stdout")
    flags.add_argument("--stats", action="store_true", default=hidden, help="print the store's request metrics")
    flags.add_argument("--debug", action="store_true", default=hidden, help="tracebacks and DEBUG logs on stderr")
    flags.add_argument(
        "-v", "--verbose", action="store_true", default=hidden, help="INFO logs (retries, waits) on stderr"
    )
    return flags


def _build_parser() -> argparse.ArgumentParser:
    flags = _flags()
    parser = _Parser(
        prog="asyncarr",
        description=__doc__,
        parents=[flags],
        allow_abbrev=False,
        epilog="Exit status: 0 success, 1 error, 2 usage error, 130 interrupted. See docs/cli.md.",
    )
    parser.add_argument("--version", action="version", version=f"asyncarr {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(name: str, text: str) -> argparse.ArgumentParser:
        return commands.add_parser(name, help=text, description=text, parents=[flags], allow_abbrev=False)

    demo = command("demo", "write and read a demo hierarchy in a local directory (the default)")
    demo.add_argument("directory", nargs="?", help="where to write it (default: a temporary directory)")
    for name, text in (
        ("info", "describe an array or a group (metadata, sizes, members)"),
        ("tree", "print a group's hierarchy"),
        ("get", "print a selection of an array"),
        ("consolidate", "write consolidated metadata for a group"),
    ):
        sub = command(name, text)
        sub.add_argument("url", help="a path or URL of a store (s3://, gs://, az://, https://, file.zip, ...)")
        if name == "get":
            sub.add_argument(
                "selection", nargs="?", default="...", help="e.g. '0:10, ::-1' or -5: (default: everything)"
            )
        sub.add_argument(
            "-o", "--option", action="append", default=[], metavar="KEY=VALUE", help="storage option (repeatable)"
        )
    add_copy_command(command("cp", "copy an array or a hierarchy between stores, resumably"))
    return parser


def _arrange(argv: Sequence[str]) -> list[str]:
    """The command line with the command's options before its positionals, and positionals that start with ``-``
    (selections like ``-5:``, anything after ``--``) marked, so that argparse reads them as positionals wherever
    they stand."""
    head: list[str] = []  # the main parser's options and the command name
    options: list[str] = []
    positionals: list[str] = []
    in_command = after_dashes = value_expected = False
    for token in argv:
        if value_expected:
            (options if in_command else head).append(token)
            value_expected = False
        elif token == "--" and not after_dashes:
            after_dashes = True
        elif not after_dashes and token.startswith("-") and token != "-" and not _LOOKS_LIKE_A_SELECTION.match(token):
            (options if in_command else head).append(token)
            value_expected = token in _VALUE_OPTIONS
        elif not in_command:
            head.append(token)
            in_command = True
        else:
            positionals.append(_MARK + token if token.startswith("-") else token)
    return head + options + positionals


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    args = _build_parser().parse_args(_arrange(argv))
    for name in _POSITIONALS:
        value = getattr(args, name, None)
        if isinstance(value, str) and value.startswith(_MARK + "-"):
            setattr(args, name, value[len(_MARK) :])
    for name, default in (("path", None), ("json", False), ("stats", False), ("debug", False), ("verbose", False)):
        if not hasattr(args, name):
            setattr(args, name, default)
    args.command = args.command or "demo"
    for name, default in (("directory", None), ("option", []), ("dest_option", [])):
        if not hasattr(args, name):
            setattr(args, name, default)
    return args


@contextlib.contextmanager
def _logging_to_stderr(args: argparse.Namespace) -> Iterator[None]:
    """Under --verbose (INFO: retries) or --debug (DEBUG: every request), the ``asyncarr`` logs go to stderr."""
    if not (args.debug or args.verbose):
        yield
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("asyncarr")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if args.debug else logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _raw_option_values(args: argparse.Namespace) -> list[dict[str, str]]:
    pairs = [*args.option, *args.dest_option]
    return [{key.strip(): value} for key, separator, value in (pair.partition("=") for pair in pairs) if separator]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 1 error, 2 usage error, 130 interrupted)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    before_dashes = argv[: argv.index("--")] if "--" in argv else argv
    debug = "--debug" in before_dashes
    secrets: list[str] = []
    command = None
    try:
        args = _parse(argv)
        command = args.command
        urls = [getattr(args, name, None) for name in ("url", "src", "dst")]
        secrets = secrets_of(*_raw_option_values(args)) + [part for url in urls if url for part in url_secrets(url)]
        with _logging_to_stderr(args), warnings.catch_warnings():
            warnings.showwarning = _show_warning
            return _COMMANDS[args.command](args)
    except KeyboardInterrupt as exc:
        _report(exc, secrets, debug, command)
        return 130
    except BrokenPipeError:
        # The reader went away (``| head``): stop quietly, as a Unix tool killed by SIGPIPE does.
        _silence_stdout()
        return 141
    except Exception as exc:
        _report(exc, secrets, debug, command)
        return 1


def _show_warning(message: Warning | str, category: type[Warning], *_: Any, **__: Any) -> None:
    """A warning (a group member that cannot be read, say) as one line on stderr, like the errors."""
    print(f"asyncarr: warning: {' '.join(str(message).split())}", file=sys.stderr)


def _report(exc: BaseException, secrets: Sequence[str], debug: bool, command: str | None) -> None:
    if debug:
        traceback.print_exception(exc, file=sys.stderr)
    print(error_line(exc, secrets, command), file=sys.stderr, flush=True)


def _silence_stdout() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


if __name__ == "__main__":
    sys.exit(main())
