"""S3 endpoints and regions from the environment, resolved as botocore does, for every request.

botocore's order for the endpoint: the client's ``endpoint_url``, then ``AWS_ENDPOINT_URL_S3``,
then ``AWS_ENDPOINT_URL``, then the shared config file (a ``services`` section, then the
profile's ``endpoint_url``); ``AWS_IGNORE_CONFIGURED_ENDPOINT_URLS`` turns the configured ones
off. Region: the ``region`` option, then ``AWS_DEFAULT_REGION`` (botocore's), then ``AWS_REGION``.

Every test puts a counting FaultProxy in front of moto and points the environment at the proxy,
with the other variables at a closed port: a request that went anywhere else would fail, and
the proxy's counts show the writes, the reads and the listings all arrived there.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from emulators import s3 as emulator
from emulators.proxy import FaultProxy

import asyncarr
import asyncarr.sync as za
from asyncarr.stores.s3 import S3Store

REPO = Path(__file__).resolve().parents[1]
CLOSED_PORT = "http://127.0.0.1:9"  # the discard port: nothing listens there, a request is refused at once
VARIABLES = (
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
    "AWS_REGION",
    "AWS_CONFIG_FILE",
    "AWS_PROFILE",
)


@pytest.fixture
def proxy(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FaultProxy]:
    """A request-counting proxy in front of moto, and an environment free of endpoint settings."""
    for variable in VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-such-config"))
    with FaultProxy(emulator.moto_endpoint()) as counting:
        yield counting


def write_read_and_list(url: str, storage_options: dict[str, Any]) -> tuple[np.ndarray, list[str]]:
    """Write an array into a group at ``url``, read it back, and list the group's members."""
    root = za.open_group(url, mode="w", storage_options=storage_options)
    z = root.create_array("x", shape=(6,), chunks=(3,), dtype="i4")
    z[:] = np.arange(6)
    reopened = za.open_group(url, mode="r", storage_options=storage_options)
    values = reopened["x"][:]
    names = sorted(reopened.keys())
    return values, names


def assert_all_reached(proxy: FaultProxy, bucket: str) -> None:
    """PUTs, object GETs and a ListObjectsV2 (a GET of the bucket itself) all came through ``proxy``."""
    counts = proxy.counts()
    assert counts["requests_by_method"].get("PUT", 0) >= 3, counts  # two zarr.json and two chunks
    assert counts["requests_by_path"].get(f"/{bucket}/x/c/0", 0) >= 1, counts
    assert counts["requests_by_path"].get(f"/{bucket}", 0) >= 1, counts  # the listing


def test_service_variable_alone_sends_puts_gets_and_listings_to_it(
    proxy: FaultProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = emulator.new_bucket()
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", proxy.url)
    values, names = write_read_and_list(f"s3://{bucket}/root", dict(emulator.CREDENTIALS))
    assert np.array_equal(values, np.arange(6)) and names == ["x"]
    counts = proxy.counts()
    assert counts["requests_by_path"].get(f"/{bucket}/root/x/c/0", 0) >= 1, counts
    assert counts["requests_by_path"].get(f"/{bucket}", 0) >= 1, counts
    assert counts["requests_by_method"].get("PUT", 0) >= 3, counts


def test_global_variable_alone_is_used(proxy: FaultProxy, monkeypatch: pytest.MonkeyPatch) -> None:
    bucket = emulator.new_bucket()
    monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
    values, names = write_read_and_list(f"s3://{bucket}", dict(emulator.CREDENTIALS))
    assert np.array_equal(values, np.arange(6)) and names == ["x"]
    assert_all_reached(proxy, bucket)


def test_service_variable_wins_over_the_global_one(proxy: FaultProxy, monkeypatch: pytest.MonkeyPatch) -> None:
    bucket = emulator.new_bucket()
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", proxy.url)
    monkeypatch.setenv("AWS_ENDPOINT_URL", CLOSED_PORT)
    values, _ = write_read_and_list(f"s3://{bucket}", dict(emulator.CREDENTIALS))
    assert np.array_equal(values, np.arange(6))
    assert_all_reached(proxy, bucket)


def test_explicit_endpoint_url_wins_over_both_variables(proxy: FaultProxy, monkeypatch: pytest.MonkeyPatch) -> None:
    bucket = emulator.new_bucket()
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", CLOSED_PORT)
    monkeypatch.setenv("AWS_ENDPOINT_URL", CLOSED_PORT)
    values, _ = write_read_and_list(f"s3://{bucket}", {**emulator.CREDENTIALS, "endpoint_url": proxy.url})
    assert np.array_equal(values, np.arange(6))
    assert_all_reached(proxy, bucket)
    # client_kwargs, as s3fs users pass the endpoint, wins too.
    store = S3Store(bucket, client_kwargs={"endpoint_url": proxy.url}, **emulator.CREDENTIALS)
    assert asyncio.run(_get_and_close(store, "zarr.json")) is not None


async def _get_and_close(store: S3Store, key: str) -> bytes | None:
    try:
        return await store.get(key)
    finally:
        await store.close()


def test_ignore_configured_endpoint_urls_turns_the_variables_off(
    proxy: FaultProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", proxy.url)
    monkeypatch.setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true")
    assert "endpoint_url" not in repr(S3Store("bucket", **emulator.CREDENTIALS))


def test_shared_config_file_services_section_names_the_endpoint(
    proxy: FaultProxy, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config_file = tmp_path / "config"
    config_file.write_text(
        "[profile local]\nregion = us-east-1\nservices = local-s3\n"
        "aws_access_key_id = testing\naws_secret_access_key = testing\n"
        f"[services local-s3]\ns3 =\n  endpoint_url = {proxy.url}\n"
        f"[profile other]\nendpoint_url = {CLOSED_PORT}\n"
    )
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config_file))
    bucket = emulator.new_bucket()
    values, _ = write_read_and_list(f"s3://{bucket}", {"profile": "local"})
    assert np.array_equal(values, np.arange(6))
    assert_all_reached(proxy, bucket)
    # The environment variable still wins over the file.
    monkeypatch.setenv("AWS_ENDPOINT_URL", CLOSED_PORT)
    assert f"endpoint_url='{CLOSED_PORT}'" in repr(S3Store(bucket, profile="local"))
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    assert f"endpoint_url='{CLOSED_PORT}'" in repr(S3Store(bucket, profile="other"))


def test_region_option_then_aws_default_region_then_aws_region(
    proxy: FaultProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.setenv("AWS_REGION", "eu-west-3")
    assert "region='eu-west-3'" in repr(S3Store("bucket", endpoint_url=proxy.url))
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")  # botocore's variable, first (test_s3_signing.py)
    assert "region='us-west-2'" in repr(S3Store("bucket", endpoint_url=proxy.url))
    assert "region='ap-south-1'" in repr(S3Store("bucket", endpoint_url=proxy.url, region="ap-south-1"))
    # Requests are signed for that region, and moto (which accepts any) answers them.
    bucket = emulator.new_bucket()
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", proxy.url)
    values, _ = write_read_and_list(f"s3://{bucket}", dict(emulator.CREDENTIALS))
    assert np.array_equal(values, np.arange(6))
    assert_all_reached(proxy, bucket)


def test_a_pickled_store_carries_the_resolved_endpoint_to_a_worker_without_the_variables(
    proxy: FaultProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = emulator.new_bucket()
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", proxy.url)
    monkeypatch.setenv("AWS_REGION", "us-east-1")

    async def write() -> bytes:
        z = await asyncarr.open_array(
            f"s3://{bucket}/a", mode="w", shape=(4,), chunks=(2,), dtype="i2", storage_options=emulator.CREDENTIALS
        )
        await z.setitem(slice(None), np.arange(4, dtype="i2"))
        await z.store.close()
        return pickle.dumps(z)

    payload = asyncio.run(write())
    proxy.reset_counters()
    # A worker whose environment names another endpoint (or none) still reaches the same server.
    worker_environment = {key: value for key, value in os.environ.items() if key not in VARIABLES}
    worker_environment |= {"AWS_ENDPOINT_URL": CLOSED_PORT, "PYTHONPATH": str(REPO)}
    script = (
        "import asyncio, pickle, sys\n"
        "z = pickle.loads(sys.stdin.buffer.read())\n"
        "async def main():\n"
        "    values = await z.getitem(slice(None))\n"
        "    await z.store.close()\n"
        "    return values\n"
        "print(asyncio.run(main()).tolist())\n"
    )
    child = subprocess.run(
        [sys.executable, "-c", script], input=payload, capture_output=True, env=worker_environment, timeout=60
    )
    assert child.returncode == 0, child.stderr.decode()
    assert child.stdout.decode().strip() == "[0, 1, 2, 3]"
    assert proxy.counts()["requests_by_path"].get(f"/{bucket}/a/c/0", 0) >= 1
