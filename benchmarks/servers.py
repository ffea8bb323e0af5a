"""S3 for the benchmarks: moto's server and a latency-adding, request-counting proxy, each in its own process.

Separate processes keep the servers' Python work out of the timed process, so they slow
every engine alike instead of competing with the one being measured for its GIL.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

__all__ = ["LatencyProxy", "MotoServer"]

_TESTS = Path(__file__).resolve().parent.parent / "tests"


def process_cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds used so far by process ``pid`` (Linux /proc)."""
    with open(f"/proc/{pid}/stat", "rb") as stat:
        # Fields after the parenthesised command name; utime and stime are the 14th and 15th.
        fields = stat.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_until_answering(url: str, process: subprocess.Popen[Any], what: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited early with status {process.returncode}")
        try:
            urllib.request.urlopen(url, timeout=1)
            return
        except OSError as exc:
            if getattr(exc, "code", None):  # any HTTP answer means it is up
                return
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not answer at {url} within 30 s")


class MotoServer:
    """moto's S3 server on a free port of 127.0.0.1, in a subprocess."""

    def __init__(self) -> None:
        for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing")):
            os.environ.setdefault(name, value)
        os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
        os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
        port = _free_port()
        self.url = f"http://127.0.0.1:{port}"
        command = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
        self._process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_until_answering(self.url + "/moto-api/", self._process, "moto_server")

    def cpu_seconds(self) -> float:
        """CPU seconds the server has used so far: how much work each engine's requests cost it."""
        return process_cpu_seconds(self._process.pid)

    def create_bucket(self, name: str) -> str:
        """Create ``name`` (PUT on the bucket URL) and return it."""
        import boto3

        client = boto3.client(
            "s3",
            endpoint_url=self.url,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        client.create_bucket(Bucket=name)
        return name

    def stop(self) -> None:
        """Terminate the server."""
        self._process.terminate()
        self._process.wait(timeout=10)


_PROXY_SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
from emulators.proxy import FaultProxy
proxy = FaultProxy(sys.argv[2], latency=float(sys.argv[3]))
print(json.dumps({"url": proxy.url}), flush=True)
for line in sys.stdin:
    command = line.strip()
    if command == "counts":
        print(json.dumps(proxy.counts(), default=str), flush=True)
    elif command == "reset":
        proxy.reset_counters()
        print("{}", flush=True)
    else:
        break
proxy.stop()
"""


class LatencyProxy:
    """The tests' FaultProxy (no faults, ``latency`` seconds per request) in a subprocess."""

    def __init__(self, target: str, latency: float) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-c", _PROXY_SCRIPT, str(_TESTS), target, str(latency)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.url = json.loads(self._ask(None))["url"]

    def _ask(self, command: str | None) -> str:
        assert self._process.stdin is not None and self._process.stdout is not None
        if command is not None:
            self._process.stdin.write(command + "\n")
            self._process.stdin.flush()
        return self._process.stdout.readline()

    def counts(self) -> dict[str, Any]:
        """Requests seen, by method, and the most in flight at once since the last reset."""
        return json.loads(self._ask("counts"))

    def reset(self) -> None:
        """Zero the counters."""
        self._ask("reset")

    def stop(self) -> None:
        """Stop the proxy process."""
        self._ask("stop")
        self._process.wait(timeout=10)
