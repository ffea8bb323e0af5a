"""Request metrics of one store: counters and latency histograms, and the snapshot `Store.metrics()` returns.

A `MetricsRecorder` belongs to one store object. Every request the store makes is recorded
once, when it ends: its operation (`OPERATIONS`), how long it took, the bytes it read or
wrote, and whether it failed. Network drivers record each HTTP attempt (a retry is a request
too, and is also counted in ``retries``); local, memory, zip and mapping stores record each
call of the store interface. Latencies go into a fixed log-scale histogram per operation
(`LatencyHistogram`), so memory stays bounded however many requests a store makes.
"""

from __future__ import annotations

import array
import dataclasses
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

__all__ = ["OPERATIONS", "LatencyHistogram", "LatencySummary", "MetricsRecorder", "StoreMetrics"]

_T = TypeVar("_T")

OPERATIONS = ("get", "get_range", "set", "delete", "head", "list")
"""What requests are counted as: a whole-value read, a byte-range read, a write, a delete,
an existence or size probe (HEAD, ``exists``, ``getsize``) and a listing (one page for clouds)."""

_SUBBUCKETS = 8  # per power of two: a bucket spans at most 1/8 of its lower bound
_MIN_EXPONENT = -20  # 2**-20 s, about 1 microsecond: faster requests share the first bucket
_BUCKETS = (20 + 13) * _SUBBUCKETS  # up to 2**12 s, about 68 minutes; slower ones share the last
_FASTEST, _SLOWEST = 2.0**_MIN_EXPONENT, 2.0**12
_INDEX_OFFSET = -_SUBBUCKETS - _MIN_EXPONENT * _SUBBUCKETS
"""Makes ``(exponent << 3) + int(mantissa * 16)`` the bucket ``(exponent - _MIN_EXPONENT) * 8 + sub-bucket``."""
_FOLD_AT = 4096
"""Durations a thread keeps before sorting them into buckets (32 KiB per thread and operation at most)."""


@dataclasses.dataclass(frozen=True)
class LatencySummary:
    """Latency percentiles of one operation, in milliseconds (each at most 12.5 % above the true value)."""

    count: int
    p50: float
    p90: float
    p99: float
    max: float
    mean: float

    def as_dict(self) -> dict[str, float | int]:
        """The summary as a JSON-serialisable dict."""
        return dataclasses.asdict(self)


class LatencyHistogram:
    """Request durations in fixed log-scale buckets: constant memory, quantiles at most 12.5 % high."""

    __slots__ = ("_counts", "count", "max", "total")

    def __init__(self) -> None:
        self._counts = [0] * _BUCKETS
        self.count = 0
        self.total = 0.0
        self.max = 0.0

    def add(self, seconds: float) -> None:
        """Count one request that took ``seconds``."""
        if seconds > 0.0:
            mantissa, exponent = math.frexp(seconds)  # seconds = mantissa * 2**exponent, 0.5 <= mantissa < 1
            index = (exponent - _MIN_EXPONENT) * _SUBBUCKETS + int((mantissa - 0.5) * 2 * _SUBBUCKETS)
            index = 0 if index < 0 else _BUCKETS - 1 if index >= _BUCKETS else index
        else:
            index = 0
        self._counts[index] += 1
        self.count += 1
        self.total += seconds
        if seconds > self.max:
            self.max = seconds

    def quantile(self, q: float) -> float:
        """Seconds below which a fraction ``q`` of the requests finished (the bucket's upper bound, capped by max)."""
        if not self.count:
            return 0.0
        rank = max(1, math.ceil(q * self.count))
        seen = 0
        for index, n in enumerate(self._counts):
            seen += n
            if seen >= rank:
                exponent, sub = divmod(index, _SUBBUCKETS)
                upper = math.ldexp(0.5 + (sub + 1) / (2 * _SUBBUCKETS), exponent + _MIN_EXPONENT)
                return min(upper, self.max)
        return self.max  # pragma: no cover - the counts always reach the rank

    def summary(self) -> LatencySummary:
        """Percentiles, maximum and mean, in milliseconds."""
        ms = 1000.0
        mean = self.total / self.count if self.count else 0.0
        return LatencySummary(
            self.count,
            round(self.quantile(0.5) * ms, 4),
            round(self.quantile(0.9) * ms, 4),
            round(self.quantile(0.99) * ms, 4),
            round(self.max * ms, 4),
            round(mean * ms, 4),
        )

    def merge(self, other: LatencyHistogram) -> None:
        """Add ``other``'s counts to these."""
        self._add(other._counts, other.count, other.total, other.max)

    def add_counts(self, counts: Sequence[int], total: float, longest: float) -> None:
        """Add requests already sorted into buckets (``counts``), which took ``total`` seconds, at most ``longest``."""
        self._add(counts, int(sum(counts)), total, longest)

    def _add(self, counts: Sequence[int], count: int, total: float, longest: float) -> None:
        for index, n in enumerate(list(counts)):
            if n:
                self._counts[index] += n
        self.count += count
        self.total += total
        self.max = max(self.max, longest)


@dataclasses.dataclass(frozen=True)
class StoreMetrics:
    """What one store did since it was made (or reset): a snapshot, safe to keep and print.

    ``requests`` counts requests by operation (see `OPERATIONS`); ``retries`` the attempts
    that were sent again after a failure, ``throttled`` the throttling answers among those
    failures (429, 503 SlowDown), and ``failures`` the requests that raised an error to their
    caller. ``latency_ms`` has a `LatencySummary` per operation and one for ``"all"``.
    ``concurrency_limit`` is the current limit of requests in flight of the store's location
    (None before its first limited request), ``concurrency_limit_min`` the lowest it has been
    and ``concurrency_max`` the ceiling (``config.concurrency``). ``cache_hits`` and
    ``cache_misses`` are set by caching wrappers only.
    """

    location: str
    requests: Mapping[str, int]
    bytes_read: int
    bytes_written: int
    retries: int
    failures: int
    throttled: int
    latency_ms: Mapping[str, LatencySummary]
    concurrency_limit: int | None = None
    concurrency_limit_min: int | None = None
    concurrency_max: int | None = None
    cache_hits: int | None = None
    cache_misses: int | None = None

    @property
    def total_requests(self) -> int:
        """Requests of every operation."""
        return sum(self.requests.values())

    def as_dict(self) -> dict[str, Any]:
        """The snapshot as plain, JSON-serialisable data (fields that do not apply are left out)."""
        data: dict[str, Any] = {
            "location": self.location,
            "requests": dict(self.requests),
            "total_requests": self.total_requests,
            "bytes_read": self.bytes_read,
            "bytes_written": self.bytes_written,
            "retries": self.retries,
            "failures": self.failures,
            "throttled": self.throttled,
            "latency_ms": {op: summary.as_dict() for op, summary in self.latency_ms.items()},
        }
        for name in ("concurrency_limit", "concurrency_limit_min", "concurrency_max", "cache_hits", "cache_misses"):
            value = getattr(self, name)
            if value is not None:
                data[name] = value
        return data


class _OpStats:
    """One operation's counts as recorded by one thread.

    Only the owning thread appends (no lock on the hot path): a request's duration goes into
    ``pending`` and is sorted into ``buckets`` with NumPy a few thousand at a time; ``fold_lock``
    keeps that sorting and a snapshot from another thread from seeing a value twice or not at all.
    """

    __slots__ = ("buckets", "count", "failed", "fold_lock", "max", "pending", "read", "total", "written")

    def __init__(self) -> None:
        self.pending = array.array("d")  # durations not yet in buckets: at most _FOLD_AT of them
        self.buckets = np.zeros(_BUCKETS, dtype=np.int64)
        self.count = 0  # requests in buckets
        self.total = 0.0
        self.max = 0.0
        self.read = 0
        self.written = 0
        self.failed = 0
        self.fold_lock = threading.Lock()

    def fold(self) -> None:
        """Sort the pending durations into buckets (called by the owning thread)."""
        with self.fold_lock:
            values = np.array(self.pending, dtype=np.float64)
            del self.pending[:]
            self.buckets += _bucket_counts(values)
            self.count += len(values)
            self.total += float(values.sum())
            self.max = max(self.max, float(values.max(initial=0.0)))

    def histogram(self) -> LatencyHistogram:
        """Everything recorded so far, as a histogram (safe from any thread)."""
        with self.fold_lock:
            values = np.array(self.pending[:], dtype=np.float64)  # a copy: the owner may append meanwhile
            buckets, total, longest = self.buckets.copy(), self.total, self.max
        histogram = LatencyHistogram()
        histogram.add_counts(
            buckets + _bucket_counts(values), total + float(values.sum()), max(longest, float(values.max(initial=0.0)))
        )
        return histogram


def _bucket_counts(values: np.ndarray) -> np.ndarray:
    """How many of ``values`` (seconds) fall in each latency bucket."""
    mantissas, exponents = np.frexp(values)
    index = (exponents.astype(np.int64) << 3) + (mantissas * 16.0).astype(np.int64) + _INDEX_OFFSET
    index[values < _FASTEST] = 0
    index[values >= _SLOWEST] = _BUCKETS - 1
    return np.bincount(index, minlength=_BUCKETS)


class MetricsRecorder:
    """The counters of one store object, safe to update from many threads at once.

    Each thread records into counters of its own (codec threads record blocking reads without
    taking a lock), so counts are exact; `snapshot` adds them up.
    """

    __slots__ = ("_lock", "_retries", "_shards", "_throttled", "_unattributed_failures")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def __reduce__(self) -> tuple[type[MetricsRecorder], tuple[()]]:
        # A pickled or copied store starts counting afresh: counts belong to the object that made the requests.
        return (MetricsRecorder, ())

    def reset(self) -> None:
        """Forget every count."""
        with self._lock:
            self._shards: dict[int, dict[str, _OpStats]] = {}
            self._retries = 0
            self._throttled = 0
            self._unattributed_failures = 0

    def record(self, op: str, seconds: float, read: int = 0, written: int = 0, failed: bool = False) -> None:
        """Count one request of operation ``op`` that took ``seconds`` (the hot path: kept flat on purpose)."""
        try:
            stats = self._shards[_get_ident()][op]
        except KeyError:
            stats = self._new_stats(op)
        pending = stats.pending
        pending.append(seconds)
        if len(pending) >= _FOLD_AT:
            stats.fold()
        if read:
            stats.read += read
        if written:
            stats.written += written
        if failed:
            stats.failed += 1

    def _new_stats(self, op: str) -> _OpStats:
        """The running thread's counts of ``op``, made on its first request."""
        with self._lock:
            shard = self._shards.setdefault(_get_ident(), {})
            return shard.setdefault(op, _OpStats())

    def record_retry(self) -> None:
        """Count one attempt that is sent again after a failure."""
        with self._lock:
            self._retries += 1

    def record_failure(self) -> None:
        """Count one request that raised an error to its caller (its attempts are recorded on their own)."""
        with self._lock:
            self._unattributed_failures += 1

    def record_throttled(self) -> None:
        """Count one throttling answer (429, 503 SlowDown)."""
        with self._lock:
            self._throttled += 1

    def timed(self, op: str, function: Callable[..., _T], *args: Any, written: int = 0) -> _T:
        """Call ``function(*args)`` and record it as one ``op`` request (bytes read: a bytes result's length)."""
        start = time.perf_counter()
        try:
            result = function(*args)
        except Exception:
            self.record(op, time.perf_counter() - start, failed=True)
            raise
        read = len(result) if type(result) is bytes else 0
        self.record(op, time.perf_counter() - start, read, written)
        return result

    def snapshot(self, location: str, **extra: Any) -> StoreMetrics:
        """The counts now, as a `StoreMetrics` (``extra`` fills its optional fields)."""
        with self._lock:
            shards = list(self._shards.values())
            retries, throttled, failures = self._retries, self._throttled, self._unattributed_failures
        histograms: dict[str, LatencyHistogram] = {}
        bytes_read = bytes_written = 0
        for shard in shards:
            for op, stats in list(shard.items()):
                histograms.setdefault(op, LatencyHistogram()).merge(stats.histogram())
                bytes_read += stats.read
                bytes_written += stats.written
                failures += stats.failed
        latency = {op: histograms[op].summary() for op in sorted(histograms)}
        combined = LatencyHistogram()
        for histogram in histograms.values():
            combined.merge(histogram)
        if combined.count:
            latency["all"] = combined.summary()
        requests = {op: histograms[op].count for op in sorted(histograms)}
        return StoreMetrics(
            location, requests, bytes_read, bytes_written, retries, failures, throttled, latency, **extra
        )


_get_ident = threading.get_ident
