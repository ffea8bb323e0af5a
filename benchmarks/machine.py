"""What the machine did during a run that moves every engine's times: memory given back to the host.

On a VM whose balloon device offers free page reporting (this project's VM does), the guest
kernel hands free blocks of memory back to the host, and the next use of such memory faults on
the host: about 3 ms a MiB here, against 0.15 ms for memory freed a moment before (round 14 in
docs/performance.md). A run that reported much memory timed engines partly on the host's faults.
"""

from __future__ import annotations

from pathlib import Path

REPORTED_KIB = Path("/sys/module/page_reporting/parameters/reported_kib")


def reported_to_host_kib() -> int | None:
    """KiB of free memory this guest has reported to its host since boot, or None where it does not report."""
    try:
        return int(REPORTED_KIB.read_text())
    except (OSError, ValueError):
        return None


def page_reporting_note(before: int | None, after: int | None) -> str | None:
    """A report line on the memory given back to the host between two readings, if the guest reports any."""
    if before is None or after is None:
        return None
    return (
        f"free page reporting: the guest gave {(after - before) / 1024**2:.1f} GiB of free memory back to the host "
        "during the run; using such memory again costs a fault on the host (docs/performance.md, round 14)"
    )
