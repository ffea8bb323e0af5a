"""``asyncarr cp SRC DST``: the command line of the copy engine, with a progress bar and a summary."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

from .cli_output import dumps, metrics_table, parse_storage_options
from .info import human_readable_size

__all__ = ["ProgressBar", "add_copy_command", "run_copy", "summary_line"]


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive number of requests")
    return value


def add_copy_command(parser: argparse.ArgumentParser) -> None:
    """Declare ``cp``'s arguments on its sub-parser."""
    parser.add_argument("src", help="the source: a path or URL (s3://, gs://, az://, https://, file.zip, ...)")
    parser.add_argument("dst", help="the destination: a path or URL (not https://, which is read-only)")
    parser.add_argument("--dest-path", default="", help="node path inside the destination (default: its root)")
    parser.add_argument(
        "-o", "--option", action="append", default=[], metavar="KEY=VALUE", help="source storage option (repeatable)"
    )
    parser.add_argument(
        "-O",
        "--dest-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="destination storage option (repeatable)",
    )
    parser.add_argument("--verify", action="store_true", help="compare chunk contents, not only sizes, when resuming")
    parser.add_argument("--overwrite", action="store_true", help="replace what is at the destination")
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar on stderr (default: only when stderr is a terminal)",
    )
    parser.add_argument("--concurrency", type=_positive_int, default=None, help="chunk requests in flight")
    parser.add_argument("--dry-run", action="store_true", help="count what would be copied; write nothing")


def _screen() -> dict[str, Any]:
    """Follow the terminal's size; one that reports none (a bare pty) gets 80x24: tqdm would draw nothing on 0 rows."""
    try:
        columns, lines = os.get_terminal_size(sys.stderr.fileno())
    except (OSError, ValueError):
        columns = lines = 0
    return {**({"dynamic_ncols": True} if columns > 0 else {"ncols": 80}), **({} if lines > 0 else {"nrows": 24})}


class ProgressBar:
    """The engine's ``progress(done, total)`` callback drawing a tqdm bar of chunks on stderr."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._bar: Any = None

    def __call__(self, done: int, total: int) -> None:
        """Move the bar to ``done`` of ``total`` chunks."""
        if not self.enabled:
            return
        if self._bar is None:
            from tqdm import tqdm

            self._bar = tqdm(
                total=total,
                unit="chunk",
                file=sys.stderr,
                **_screen(),
                bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} chunks [{elapsed}<{remaining}, {rate_fmt}]",
            )
        elif total != self._bar.total:
            self._bar.total = total
        self._bar.update(done - self._bar.n)

    def finish(self, done: int) -> None:
        """End at ``done/done`` after a copy that succeeded (the engine reports nothing when nothing is left to do)."""
        if self.enabled and (self._bar is None or self._bar.n != done):
            self(done, done)

    def close(self) -> None:
        """Draw the bar a last time (``done/total``) and end its line."""
        if self._bar is not None:
            self._bar.close()


def summary_line(result: Any, dry_run: bool) -> str:
    """One human line: what was copied, what was skipped, how long it took."""
    copied, skipped = result.chunks_copied, result.chunks_skipped
    nbytes = int(result.bytes_copied)
    human = human_readable_size(nbytes)  # "9.5K"
    size = f"{nbytes} bytes" if nbytes < 1024 else f"{human[:-1]} {human[-1]}iB"
    verb = "would copy" if dry_run else "copied"
    return (
        f"{verb} {copied} chunk{'s' * (copied != 1)} ({size}), skipped {skipped} already at the destination, "
        f"in {result.seconds:.1f} s"
    )


def run_copy(args: argparse.Namespace) -> int:
    """Run ``asyncarr cp``: copy, then print the summary (JSON under --json)."""
    import asyncarr

    source_options = parse_storage_options(args.option, "-o")
    dest_options = parse_storage_options(args.dest_option, "-O")
    progress = ProgressBar(args.progress if args.progress is not None else sys.stderr.isatty())
    try:
        result = asyncio.run(
            asyncarr.copy(
                args.src,
                args.dst,
                source_path=args.path or "",
                dest_path=args.dest_path or "",
                source_storage_options=source_options or None,
                dest_storage_options=dest_options or None,
                if_exists="replace" if args.overwrite else None,
                verify=args.verify,
                dry_run=args.dry_run,
                progress=progress,
                concurrency=args.concurrency,
            )
        )
        progress.finish(result.chunks_copied + result.chunks_skipped)
    finally:
        progress.close()
    metrics = dict(getattr(result, "metrics", None) or {})
    if args.json:
        document = dict(result.summary())
        if args.stats:
            document["metrics"] = metrics
        print(dumps(document))
        return 0
    print(summary_line(result, args.dry_run))
    if args.stats:
        print(metrics_table(metrics), file=sys.stderr)
    return 0
