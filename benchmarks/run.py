"""Run asyncarr beside zarr-python 3 and tensorstore on the same data and report ratios.

    python -m benchmarks.run --quick            # under 3 minutes on 2 cores
    python -m benchmarks.run                     # the full suite
    python -m benchmarks.run --only W1,W5 --json results.json

Every figure is a median of interleaved repeats (A B C A B C ...) after a warm-up; every
read is checked equal to the data written, and a wrong result voids the run.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .bare_s3 import FLOOR
from .engines import ENGINES, ArraySpec, S3Location
from .measure import Measurement
from .workloads import ASYNCARR, field, floors, full_write_and_read, many_small_reads, median_ratio, partial_reads

SYNC_ENGINES = ["asyncarr-sync", "zarr-python", "tensorstore"]
ASYNCARR_ENGINES = [ASYNCARR, "asyncarr-sync"]
ALL_ENGINES = [ASYNCARR, *SYNC_ENGINES]


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


def run(quick: bool, only: set[str], repeats: int, root: Path) -> list[Measurement]:
    """Run the selected local workloads and return every measurement."""
    results: list[Measurement] = []
    specs = _specs(quick)
    for workload in ("W1", "W2"):
        if workload not in only:
            continue
        for spec in specs[workload]:
            label = f"{workload} v{spec.zarr_format}"
            _stage(f"running {label} {spec.shape} chunks {spec.chunks} ...")
            measured = full_write_and_read(label, root, spec, ALL_ENGINES, repeats)
            results.extend(measured)
            shared = str(root / f"{label}-{ASYNCARR}")
            results.extend(floors(label, shared, spec, repeats))
            if workload == "W1" and "W4" in only:
                _stage(f"running W4 local on {label} ...")
                results.extend(partial_reads(f"W4 local v{spec.zarr_format}", shared, spec, ALL_ENGINES, 20))
            if workload == "W1" and "W5" in only:
                _stage(f"running W5 on {label} ...")
                results.extend(
                    many_small_reads(
                        f"W5 async v{spec.zarr_format}",
                        shared,
                        spec,
                        [ASYNCARR, "zarr-python-async", "tensorstore-futures"],
                        repeats,
                    )
                )
                results.extend(
                    many_small_reads(f"W5 8 threads v{spec.zarr_format}", shared, spec, SYNC_ENGINES, repeats)
                )
    return results


def run_s3(quick: bool, only: set[str], repeats: int, root: Path, notes: list[str]) -> list[Measurement]:
    """W3 (S3 direct and through a 20 ms proxy), W4 on S3 and W6 (sharded), on moto's server."""
    from .servers import LatencyProxy, MotoServer

    results: list[Measurement] = []
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
                results.extend(
                    full_write_and_read(label, root, spec, ALL_ENGINES, repeats, s3, server_cpu=moto.cpu_seconds)
                )
                if endpoint == proxy.url:
                    notes.extend(_request_counts(label, spec, s3, proxy))
        if "W4" in only:
            _stage("running W4 S3 via 20 ms proxy ...")
            s3 = S3Location(proxy.url, moto.create_bucket("w4-s3"))
            ENGINES[ASYNCARR].write("w4", field(spec.shape, spec.dtype), spec, s3)
            results.extend(
                partial_reads(
                    "W4 S3 via 20 ms proxy",
                    "w4",
                    spec,
                    ALL_ENGINES,
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
            results.extend(full_write_and_read("W6 sharded local", root, sharded, ALL_ENGINES, repeats))
            s3 = S3Location(proxy.url, moto.create_bucket("w6-s3"))
            ENGINES[ASYNCARR].write("w6", field(sharded.shape, sharded.dtype), sharded, s3)
            results.extend(
                partial_reads(
                    "W6 sharded S3 via 20 ms proxy",
                    "w6",
                    sharded,
                    ALL_ENGINES,
                    s3_latency_repeats,
                    s3,
                    server_cpu=moto.cpu_seconds,
                    kinds=("window",),
                )
            )
    finally:
        proxy.stop()
        moto.stop()
    return results


def _request_counts(label: str, spec: ArraySpec, s3: S3Location, proxy: Any) -> list[str]:
    """One counted full read per engine: how many requests it made and how many were in flight at once."""
    lines = []
    for name in ALL_ENGINES:
        handle = ENGINES[name].open(f"{label}-{ASYNCARR}", s3)
        proxy.reset()
        ENGINES[name].read(handle)
        counts = proxy.counts()
        lines.append(
            f"{label} read, {name}: {counts['requests']} requests, at most {counts['max_in_flight']} in flight"
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
    for task, measured in _by_task(results).items():
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


# The performance issue's targets: (task prefix, task suffix, engine, highest asyncarr/engine ratio).
TARGETS = [
    ("W1", "write", "tensorstore", 1.0),
    ("W1", "write", "zarr-python", 0.45),
    ("W1", "read", "tensorstore", 1.0),
    ("W1", "read", "zarr-python", 0.45),
    ("W2", "write", "tensorstore", 1.0),
    ("W2", "write", "zarr-python", 0.4),
    ("W2", "read", "tensorstore", 2.0),
    ("W2", "read", "zarr-python", 0.15),
    ("W3 S3 via", "write", "tensorstore", 1.0),
    ("W3 S3 via", "write", "zarr-python", 0.5),
    ("W3 S3 via", "read", "tensorstore", 1.0),
    ("W3 S3 via", "read", "zarr-python", 0.5),
    ("W4", "row", "tensorstore", 1.0),
    ("W4", "row", "zarr-python", 0.5),
    ("W4", "window", "tensorstore", 1.0),
    ("W4", "window", "zarr-python", 0.5),
    ("W5 async", "", "zarr-python-async", 0.5),
    ("W5 8 threads", "", "zarr-python", 0.5),
]


def targets(results: list[Measurement]) -> str:
    """The targets table: each task's ratios (async API, sync facade) against its limit, met or missed.

    Where the task has a bare-request floor (S3), "floor / engine" is the best ratio any client
    could reach against that server; a missed target whose floor ratio is above the limit is
    marked "unreachable": no client can meet it there.
    """
    lines = [
        "| task | against | limit | async / engine | sync / engine | floor / engine | met |",
        "|---|---|---|---|---|---|---|",
    ]
    for task, measured in _by_task(results).items():
        by_engine = {m.engine: m for m in measured}
        for prefix, suffix, engine, limit in TARGETS:
            if not task.startswith(prefix + " ") or not task.endswith(suffix) or engine not in by_engine:
                continue
            ratios = [
                median_ratio(by_engine[name], by_engine[engine]) if name in by_engine else None
                for name in ASYNCARR_ENGINES
            ]
            shown = [f"{r:.2f}" if r is not None else "" for r in ratios]
            floor = median_ratio(by_engine[FLOOR], by_engine[engine]) if FLOOR in by_engine else None
            met = min(r for r in ratios if r is not None) <= limit
            verdict = "met" if met else "unreachable" if floor is not None and floor > limit else "missed"
            floor_shown = f"{floor:.2f}" if floor is not None else ""
            lines.append(f"| {task} | {engine} | <= {limit} | {shown[0]} | {shown[1]} | {floor_shown} | {verdict} |")
    return "\n".join(lines)


def _by_task(results: list[Measurement]) -> dict[str, list[Measurement]]:
    by_task: dict[str, list[Measurement]] = {}
    for m in results:
        by_task.setdefault(m.task, []).append(m)
    return by_task


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run, print the report (and optionally save JSON)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller arrays, v3 only: under 3 minutes")
    parser.add_argument("--only", default="W1,W2,W3,W4,W5,W6", help="comma-separated workloads (default: all)")
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats per engine (at least 5)")
    parser.add_argument("--json", type=Path, help="also write every measurement here")
    parser.add_argument("--dir", type=Path, help="where to write the arrays (default: a temporary directory)")
    args = parser.parse_args(argv)
    if args.repeats < 5:
        parser.error("--repeats must be at least 5")
    only = {w.strip().upper() for w in args.only.split(",")}
    started = time.perf_counter()
    notes: list[str] = []
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        results = run(args.quick, only, args.repeats, Path(tmp))
        if only & {"W3", "W4", "W6"}:
            results.extend(run_s3(args.quick, only, args.repeats, Path(tmp), notes))
    print(report(results))
    print()
    print(targets(results))
    print()
    for note in notes:
        print(f"- {note}")
    print(f"\n{len(results)} measurements in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps([m.as_dict() for m in results], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
