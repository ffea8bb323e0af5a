"""Run asyncarr beside zarr-python 3 and tensorstore on the same data and report ratios.

    python -m benchmarks.run --quick            # smaller arrays, v3 only
    python -m benchmarks.run                     # the full suite
    python -m benchmarks.run --only W1,W5 --json results.json
    python -m benchmarks.run --engines tensorstore,zarr-python-zarrs --markdown round.md

Every figure is a median of interleaved repeats (A B C A B C ...) after a warm-up; every
read is checked equal to the data written, and a wrong result voids the run.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .engines import ENGINES, LOCAL_ONLY, S3_ONLY, ArraySpec, S3Location
from .features import FEATURE_HEADER, block_iteration, hot_windows
from .machine import page_reporting_note, reported_to_host_kib
from .measure import Measurement
from .targets import by_task, rss_notes, targets
from .workloads import ASYNCARR, field, floors, full_write_and_read, many_small_reads, median_ratio, partial_reads

ASYNCARR_ENGINES = [ASYNCARR, "asyncarr-sync"]
ALL_ENGINES = [
    ASYNCARR,
    "asyncarr-sync",
    "zarr-python",
    "zarr-python-obstore",
    "zarr-python-zarrs",
    "tensorstore",
    "tensorstore-nosync",
]
"""Every engine of the whole-array and partial workloads, in report order."""
LOCAL_ENGINES = [name for name in ALL_ENGINES if name not in S3_ONLY]
S3_ENGINES = [name for name in ALL_ENGINES if name not in LOCAL_ONLY]
SYNC_ENGINES = ["asyncarr-sync", "zarr-python", "tensorstore"]
"""W5 from 8 threads: the blocking APIs."""
ASYNC_ENGINES = [ASYNCARR, "zarr-python-async", "tensorstore-futures"]
"""W5 concurrently: the async APIs (and tensorstore's futures)."""


W4_LOCAL_REPEATS = 60
"""W4's local reads take milliseconds and vary by a third between calls on this VM: more repeats
than the other tasks, for medians that hold still (60 rounds of 9 engines is under 5 s)."""
LOCAL_WRITE_REPEATS = 15
"""Repeats of the local whole-array tasks (W1, W2, W6): on this VM a local write of tens of
milliseconds now and then takes two to four times as long, for any engine and for the floor.
With 5 repeats two such repeats moved a median (round 10); with 9, two of one engine's nine W1 v3
writes took 215 and 265 ms against its 60, and its median ratio to zarrs was 1.06 with them and
1.02 without (round 14). 15 hold it, for about two minutes more a full run (round 13's took 866 s,
round 14's 977 s, both on 2026-11-28)."""
_STARTED = time.perf_counter()


def _stage(message: str) -> None:
    """Say on stderr what runs next, and how long the run has taken so far."""
    print(f"[{time.perf_counter() - _STARTED:4.0f} s] {message}", file=sys.stderr, flush=True)


def _specs(quick: bool) -> dict[str, list[ArraySpec]]:
    formats = (3,) if quick else (2, 3)
    w1_shape = (4096, 4096) if quick else (8192, 8192)
    w2_shape = (1024, 1024) if quick else (2048, 2048)
    return {
        "W1": [ArraySpec(w1_shape, (512, 512), "float32", f) for f in formats],
        "W2": [ArraySpec(w2_shape, (32, 32), "uint16", f, cname="zstd", clevel=1) for f in formats],
    }


def _chosen(names: list[str], engines: set[str] | None) -> list[str]:
    """``names`` kept by the ``--engines`` filter; asyncarr's async API always stays (the reference)."""
    return [n for n in names if engines is None or n in engines or n == ASYNCARR]


def run(quick: bool, only: set[str], repeats: int, root: Path, engines: set[str] | None = None) -> list[Measurement]:
    """Run the selected local workloads and return every measurement."""
    results: list[Measurement] = []
    specs = _specs(quick)
    local = _chosen(LOCAL_ENGINES, engines)
    for workload in ("W1", "W2"):
        if workload not in only:
            continue
        for spec in specs[workload]:
            label = f"{workload} v{spec.zarr_format}"
            _stage(f"running {label} {spec.shape} chunks {spec.chunks} ...")
            measured = full_write_and_read(label, root, spec, local, max(repeats, LOCAL_WRITE_REPEATS))
            results.extend(measured)
            shared = str(root / f"{label}-{ASYNCARR}")
            results.extend(floors(label, shared, spec, repeats))
            if workload == "W1" and "W4" in only:
                _stage(f"running W4 local on {label} ...")
                results.extend(partial_reads(f"W4 local v{spec.zarr_format}", shared, spec, local, W4_LOCAL_REPEATS))
            if workload == "W1" and "W5" in only:
                _stage(f"running W5 on {label} ...")
                results.extend(
                    many_small_reads(
                        f"W5 async v{spec.zarr_format}",
                        shared,
                        spec,
                        _chosen(ASYNC_ENGINES, engines),
                        repeats,
                    )
                )
                results.extend(
                    many_small_reads(
                        f"W5 8 threads v{spec.zarr_format}", shared, spec, _chosen(SYNC_ENGINES, engines), repeats
                    )
                )
    return results


def run_s3(
    quick: bool,
    only: set[str],
    repeats: int,
    root: Path,
    notes: list[str],
    engines: set[str] | None = None,
    features: list[str] | None = None,
) -> list[Measurement]:
    """W3 (S3 direct and through a 20 ms proxy), W4 on S3, W6 (sharded), W8 and W9, on moto's server.

    W8's and W9's table rows are appended to ``features``.
    """
    from .servers import LatencyProxy, MotoServer

    results: list[Measurement] = []
    on_s3 = _chosen(S3_ENGINES, engines)
    local = _chosen(LOCAL_ENGINES, engines)
    moto = MotoServer()
    proxy = LatencyProxy(moto.url, latency=0.02)
    try:
        side = 2048 if quick else 4096
        # Latencies on S3 are medians of 20 reads; quick mode takes 10 to stay under 3 minutes.
        s3_latency_repeats = 10 if quick else 20
        spec = ArraySpec((side, side), (256, 256), "float32", 3)
        if "W3" in only:
            for label, endpoint in (("W3 S3 direct", moto.url), ("W3 S3 via 20 ms proxy", proxy.url)):
                _stage(f"running {label} {spec.shape} chunks {spec.chunks} ...")
                s3 = S3Location(endpoint, moto.create_bucket(label.lower().replace(" ", "-")))
                results.extend(full_write_and_read(label, root, spec, on_s3, repeats, s3, server_cpu=moto.cpu_seconds))
                if endpoint == proxy.url:
                    notes.extend(_request_counts(label, on_s3, s3, proxy))
        if "W4" in only:
            _stage("running W4 S3 via 20 ms proxy ...")
            s3 = S3Location(proxy.url, moto.create_bucket("w4-s3"))
            ENGINES[ASYNCARR].write("w4", field(spec.shape, spec.dtype), spec, s3)
            results.extend(
                partial_reads(
                    "W4 S3 via 20 ms proxy",
                    "w4",
                    spec,
                    on_s3,
                    s3_latency_repeats,
                    s3,
                    server_cpu=moto.cpu_seconds,
                )
            )
        if "W6" in only:
            # W1's array (and chunks, now inner chunks) in shards of half its side: 4 shards.
            w1 = _specs(quick)["W1"][-1]
            shard_side = w1.shape[0] // 2
            sharded = dataclasses.replace(w1, zarr_format=3, shards=(shard_side, shard_side))
            _stage(f"running W6 sharded {sharded.shape} shards {sharded.shards} ...")
            results.extend(
                full_write_and_read("W6 sharded local", root, sharded, local, max(repeats, LOCAL_WRITE_REPEATS))
            )
            s3 = S3Location(proxy.url, moto.create_bucket("w6-s3"))
            ENGINES[ASYNCARR].write("w6", field(sharded.shape, sharded.dtype), sharded, s3)
            results.extend(
                partial_reads(
                    "W6 sharded S3 via 20 ms proxy",
                    "w6",
                    sharded,
                    on_s3,
                    s3_latency_repeats,
                    s3,
                    server_cpu=moto.cpu_seconds,
                    kinds=("window",),
                )
            )
        if only & {"W8", "W9"}:
            # W3's array, through the proxy, in a bucket of its own.
            s3 = S3Location(proxy.url, moto.create_bucket("w8-w9-s3"))
            ENGINES[ASYNCARR].write("w3", field(spec.shape, spec.dtype), spec, s3)
            rows = features if features is not None else []
            if "W8" in only:
                _stage("running W8 hot windows, chunk cache on and off ...")
                measured, new_rows = hot_windows("w3", spec, s3, proxy, repeats, windows=500 if quick else 2000)
                results.extend(measured)
                rows.extend(new_rows)
            if "W9" in only:
                _stage("running W9 iter_blocks with 5 ms of caller work per block ...")
                measured, new_rows = block_iteration("w3", spec, s3, repeats)
                results.extend(measured)
                rows.extend(new_rows)
    finally:
        proxy.stop()
        moto.stop()
    return results


def _request_counts(label: str, engines: list[str], s3: S3Location, proxy: Any) -> list[str]:
    """One counted full read per engine: how many requests it made and how many were in flight at once."""
    lines = []
    for name in engines:
        handle = ENGINES[name].open(f"{label}-{ASYNCARR}", s3)
        proxy.reset()
        ENGINES[name].read(handle)
        counts = proxy.counts()
        methods = ", ".join(f"{n} {method}" for method, n in sorted(counts["requests_by_method"].items()))
        lines.append(
            f"{label} read, {name}: {counts['requests']} requests ({methods}), "
            f"at most {counts['max_in_flight']} in flight"
        )
    return lines


def report(results: list[Measurement]) -> str:
    """A markdown table: each engine's median, spread, throughput, peak RSS and its ratios to asyncarr.

    Both asyncarr APIs are references: "async / engine" is the median over repeats of the
    async API's time over the engine's, "sync / engine" the same for the blocking facade.
    """
    lines = [
        "| task | engine | median s | min-max s | MB/s | peak RSS +MiB | server CPU s | async / engine "
        "| sync / engine |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for task, measured in by_task(results).items():
        by_engine = {m.engine: m for m in measured}
        for m in measured:
            cells = []
            for reference_name in ASYNCARR_ENGINES:
                reference = by_engine.get(reference_name)
                compared = reference is not None and m is not reference and not m.engine.startswith("floor")
                cells.append(f"{median_ratio(reference, m):.2f}" if compared else "")
            server = f"{statistics.median(m.server_cpu):.3f}" if m.server_cpu else ""
            lines.append(
                f"| {task} | {m.engine} | {m.median:.4f} | {min(m.seconds):.4f}-{max(m.seconds):.4f} "
                f"| {m.throughput:.0f} | {m.peak_rss / 2**20:.0f} | {server} | {cells[0]} | {cells[1]} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run, print the report (and optionally save JSON and the markdown tables)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller arrays, v3 only")
    parser.add_argument("--only", default="W1,W2,W3,W4,W5,W6,W8,W9", help="comma-separated workloads (default: all)")
    parser.add_argument(
        "--engines",
        help=f"comma-separated engines to run (default: all of {', '.join(ALL_ENGINES)}); "
        f"{ASYNCARR} always runs: it writes the shared copy and is the reference",
    )
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats per engine (at least 5)")
    parser.add_argument("--json", type=Path, help="also write every measurement here")
    parser.add_argument("--markdown", type=Path, help="also write the targets and features tables here")
    parser.add_argument("--dir", type=Path, help="where to write the arrays (default: a temporary directory)")
    parser.add_argument(
        "--zarrs-threads",
        type=int,
        help="size of zarrs' rayon pool (RAYON_NUM_THREADS), which also bounds its requests in flight; "
        "default: zarrs' own, one per CPU",
    )
    args = parser.parse_args(argv)
    if args.repeats < 5:
        parser.error("--repeats must be at least 5")
    only = {w.strip().upper() for w in args.only.split(",")}
    engines = None
    if args.engines:
        engines = {e.strip() for e in args.engines.split(",")}
        unknown = engines - set(ALL_ENGINES) - set(ASYNC_ENGINES)
        if unknown:
            parser.error(f"unknown engines: {', '.join(sorted(unknown))}")
    if args.zarrs_threads:
        # Read by rayon when zarrs first uses its global pool, which is after this point.
        os.environ["RAYON_NUM_THREADS"] = str(args.zarrs_threads)
    started = time.perf_counter()
    reported_before = reported_to_host_kib()
    notes: list[str] = []
    features: list[str] = []
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        results = run(args.quick, only, args.repeats, Path(tmp), engines)
        if only & {"W3", "W4", "W6", "W8", "W9"}:
            results.extend(run_s3(args.quick, only, args.repeats, Path(tmp), notes, engines, features))
    notes.extend(rss_notes(results))
    reporting = page_reporting_note(reported_before, reported_to_host_kib())
    if reporting:
        notes.append(reporting)
    print(report(results))
    summary = [targets(results), ""]
    if features:
        summary.extend([*FEATURE_HEADER, *features, ""])
    summary.extend(f"- {note}" for note in notes)
    print()
    print("\n".join(summary))
    elapsed = time.perf_counter() - started
    print(f"\n{len(results)} measurements in {elapsed:.0f} s", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps([m.as_dict() for m in results], indent=2))
    if args.markdown:
        command = shlex.join(["python", "-m", "benchmarks.run", *(sys.argv[1:] if argv is None else argv)])
        header = f"`{command}` ({len(results)} measurements, {elapsed:.0f} s):"
        args.markdown.write_text("\n".join([header, "", *summary]) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
