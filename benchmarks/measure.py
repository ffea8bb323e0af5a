"""Timing engines side by side: interleaved repeats, medians, ratios and peak memory."""

from __future__ import annotations

import dataclasses
import gc
import os
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["Measurement", "PeakRSS", "interleaved"]

_PAGE = os.sysconf("SC_PAGE_SIZE")


def current_rss() -> int:
    """Resident set size of this process in bytes (Linux /proc)."""
    with open("/proc/self/statm", "rb") as statm:
        return int(statm.read().split()[1]) * _PAGE


def _reset_peak_rss() -> bool:
    """Reset the kernel's record of this process's peak RSS (VmHWM) to its RSS now; False where refused."""
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")  # Linux 4.0+: "5" resets the peak resident set size
        return True
    except OSError:
        return False


def _peak_rss_since_reset() -> int:
    """This process's peak RSS in bytes since `_reset_peak_rss` (VmHWM of /proc/self/status)."""
    with open("/proc/self/status", "rb") as status:
        for line in status:
            if line.startswith(b"VmHWM:"):
                return int(line.split()[1]) * 1024
    raise OSError("no VmHWM in /proc/self/status")


class PeakRSS:
    """This process's peak RSS while active: ``peak`` and ``growth`` above the level at entry.

    The kernel keeps the peak itself (VmHWM, reset at entry through ``/proc/self/clear_refs``), so
    nothing runs beside the timed call. Until round 10 a thread sampled RSS every millisecond:
    it took the GIL a thousand times a second, which slowed the engines running Python beside
    their I/O (asyncarr's codec threads, zarr-python) and not those releasing the GIL throughout,
    and missed peaks shorter than a millisecond. Where the reset is refused, that thread samples.
    """

    def __init__(self, interval: float = 0.001) -> None:
        self._interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.baseline = 0
        self.peak = 0

    def __enter__(self) -> PeakRSS:
        gc.collect()
        self.baseline = self.peak = current_rss()
        if not _reset_peak_rss():
            self._stop.clear()
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, current_rss())
            time.sleep(self._interval)

    def __exit__(self, *exc_info: object) -> None:
        if self._thread is None:
            self.peak = max(self.peak, _peak_rss_since_reset())
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        self.peak = max(self.peak, current_rss())

    @property
    def growth(self) -> int:
        """Peak RSS above the level at entry."""
        return self.peak - self.baseline


class _NoRSS:
    """`PeakRSS`'s stand-in when RSS is not sampled: no thread, growth 0."""

    growth = 0

    def __enter__(self) -> _NoRSS:
        gc.collect()  # as PeakRSS does: a collection is never timed
        return self

    def __exit__(self, *exc_info: object) -> None:
        pass


@dataclasses.dataclass
class Measurement:
    """Every repeat of one engine on one task."""

    engine: str
    task: str
    seconds: list[float]
    rss_growth: list[int]
    nbytes: int
    server_cpu: list[float] = dataclasses.field(default_factory=list)

    @property
    def median(self) -> float:
        """Median seconds."""
        return statistics.median(self.seconds)

    @property
    def throughput(self) -> float:
        """MB/s of uncompressed data at the median time."""
        return self.nbytes / 1e6 / self.median if self.median else float("inf")

    @property
    def peak_rss(self) -> int:
        """Largest RSS growth seen over the repeats."""
        return max(self.rss_growth)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready summary."""
        return {
            "engine": self.engine,
            "task": self.task,
            "median_s": self.median,
            "min_s": min(self.seconds),
            "max_s": max(self.seconds),
            "mb_per_s": self.throughput,
            "peak_rss_growth_mib": self.peak_rss / 2**20,
            "seconds": self.seconds,
            "server_cpu_s": self.server_cpu,
        }


def interleaved(
    task: str,
    runners: dict[str, Callable[[], Any]],
    *,
    repeats: int,
    nbytes: int,
    check: Callable[[str, Any], None] | None = None,
    setup: Callable[[str], None] | None = None,
    server_cpu: Callable[[], float] | None = None,
    sample_rss: bool = True,
) -> dict[str, Measurement]:
    """Warm each engine up once, then time ``repeats`` rounds of A B C ... so drift hits all alike.

    ``check(engine, result)`` verifies each result (raise to void the figure); ``setup(engine)``
    runs untimed before every call (e.g. removing what a write made); ``server_cpu()``, if given,
    reads a server's CPU seconds, recorded per call so each engine's cost to the server shows.
    ``sample_rss=False`` leaves out `PeakRSS` (growth is then recorded as 0): W4's latencies of a
    few milliseconds, timed so since round 6, when `PeakRSS` was a thread taking the GIL every
    millisecond; now it reads the kernel's peak and adds two small file operations per call.
    """
    names: Sequence[str] = list(runners)
    results = {name: Measurement(name, task, [], [], nbytes) for name in names}
    for name in names:  # warm-up: imports, thread pools, connection pools, page cache
        if setup:
            setup(name)
        outcome = runners[name]()
        if check:
            check(name, outcome)
    for _ in range(repeats):
        for name in names:
            if setup:
                setup(name)
            cpu_before = server_cpu() if server_cpu else 0.0
            with PeakRSS() if sample_rss else _NoRSS() as rss:
                started = time.perf_counter()
                outcome = runners[name]()
                elapsed = time.perf_counter() - started
            if server_cpu:
                results[name].server_cpu.append(server_cpu() - cpu_before)
            if check:
                check(name, outcome)
            del outcome
            results[name].seconds.append(elapsed)
            results[name].rss_growth.append(rss.growth)
    return results


def ratios_to(reference: Measurement, other: Measurement) -> list[float]:
    """Per-repeat ratios reference/other (below 1 means the reference engine was faster)."""
    return [a / b for a, b in zip(reference.seconds, other.seconds, strict=True)]
