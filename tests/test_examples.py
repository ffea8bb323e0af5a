"""The cloud examples against the emulators: the public-bucket script, and data service answers that match NumPy."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from aiohttp.test_utils import TestClient, TestServer
from emulators import s3
from test_cloud_stores import CLOUDS, HELLO, Cloud, write_demo_group

import asyncarr
from asyncarr import config

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
TESTS = ROOT / "tests"


def child_environment(**changes: str | None) -> dict[str, str]:
    """This process's environment for an example's subprocess, with ``changes`` (None removes a variable)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS)])}
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def load_example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- public_s3_anonymous.py ------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["arguments", "defaults-and-environment"])
def test_public_bucket_example_prints_the_array_its_info_and_hello_from_the_cloud(tmp_path: Path, how: str) -> None:
    url, _ = CLOUDS[0].publish_demo(write_demo_group(tmp_path / "demo"), tmp_path)
    no_credentials = dict.fromkeys(["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"])
    if how == "arguments":
        command = [url, "--endpoint-url", s3.moto_endpoint(), "--region", s3.REGION, "--array", "foo/bar/baz"]
        env = child_environment(**no_credentials)
    else:  # s3://zarr-demo/store, eu-west-2, foo/bar/baz; the endpoint from the environment
        command = []
        env = child_environment(**no_credentials, AWS_ENDPOINT_URL_S3=s3.moto_endpoint())
    child = subprocess.run(
        [sys.executable, "-W", "error::ResourceWarning", str(EXAMPLES / "public_s3_anonymous.py"), *command],
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert child.returncode == 0, child.stderr.decode()
    lines = child.stdout.decode().splitlines()
    assert lines[0] == "<asyncarr.sync.Array '/foo/bar/baz' (21,) |S1>"
    assert "Name               : /foo/bar/baz" in lines and "Chunks initialized : 3/3" in lines
    assert lines[-1] == repr(HELLO)
    assert "Unclosed" not in child.stderr.decode()


# -- data_service.py ---------------------------------------------------------------------------------

REQUESTS = [
    ("grid/temperature", "0:10,5"),
    ("grid/temperature", "..."),
    ("grid/temperature", "::-3, 7:31:4"),
    ("grid/temperature", "-1, -1"),
    ("grid/temperature", "25:3:-4, ::-13"),
    ("counts", "::-7"),
    ("counts", "90:"),
    ("counts", "3"),
    ("labels", "2:9"),
    ("labels", "::-1"),
]


@pytest.fixture
def served_group(tmp_path: Path) -> tuple[Cloud, str, dict[str, Any], dict[str, np.ndarray]]:
    """A group of three arrays on S3 (moto): its URL, storage options and the reference data."""
    cloud = CLOUDS[0]
    place = cloud.place(tmp_path)
    rng = np.random.default_rng(5)
    references = {
        "grid/temperature": rng.normal(size=(30, 40)).astype("f4"),
        "counts": np.arange(95, dtype="i8") * -3,
        "labels": np.array([b"a", b"bc", b"def", b"", b"zz"] * 3, dtype="S3"),
    }

    async def write() -> None:
        root = await asyncarr.open_group(place.write_url, mode="w", storage_options=place.write_options)
        for name, data in references.items():
            await root.create_array(name, data=data, chunks=(7,) * data.ndim)
        await root.store.close()

    asyncio.run(write())
    return cloud, place.url, place.options, references


def test_data_service_answers_50_concurrent_slice_requests_like_numpy(
    served_group: tuple[Cloud, str, dict[str, Any], dict[str, np.ndarray]],
) -> None:
    _, url, options, references = served_group
    service = load_example("data_service")
    requests = [REQUESTS[i % len(REQUESTS)] for i in range(50)]

    async def main() -> tuple[list[Any], dict[str, Any], list[tuple[int, Any]]]:
        async with TestClient(TestServer(service.make_app(url, options, max_elements=2000))) as client:

            async def get(path: str, params: dict[str, str] | None = None) -> tuple[int, Any]:
                async with client.get(path, params=params) as response:
                    return response.status, await response.json()

            answers = await asyncio.gather(*(get(f"/arrays/{name}", {"slice": text}) for name, text in requests))
            _, listing = await get("/arrays")
            refusals = [
                await get("/arrays/absent"),
                await get("/arrays/counts", {"slice": "1:2:3:4"}),
                await get("/arrays/counts", {"slice": "95"}),
                await get("/arrays/grid/temperature", {"slice": "...,::1"}),  # 1,200 elements: allowed
                await get("/arrays/counts", {"slice": "0:10,"}),
            ]
            return answers, listing, refusals

    answers, listing, refusals = asyncio.run(main())
    for (name, text), (status, answer) in zip(requests, answers, strict=True):
        assert status == 200, answer
        reference = references[name][service.parse_selection(text)]
        assert answer["shape"] == list(np.shape(reference)) and answer["dtype"] == str(references[name].dtype)
        assert answer["data"] == service.to_json(reference), (name, text)
    assert listing["arrays"]["grid/temperature"] == {"shape": [30, 40], "chunks": [7, 7], "dtype": "float32"}
    assert sorted(listing["arrays"]) == ["counts", "grid/temperature", "labels"]
    assert [status for status, _ in refusals] == [404, 400, 400, 200, 400]
    assert "no array named 'absent'" in refusals[0][1]["error"]


def test_data_service_runs_as_a_script_and_refuses_oversized_requests(
    served_group: tuple[Cloud, str, dict[str, Any], dict[str, np.ndarray]],
) -> None:
    _, url, options, references = served_group
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # Credentials come from the environment (AWS_ACCESS_KEY_ID, ...), never from the command line.
    given = [f"--option={key}={value}" for key, value in options.items() if key in ("endpoint_url", "region")]
    server = subprocess.Popen(
        [sys.executable, str(EXAMPLES / "data_service.py"), url, "--port", str(port), "--max-elements", "100", *given],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=child_environment(),
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{base}/arrays/counts?slice=::-7", timeout=5) as response:
                    answer = response.read()
                break
            except (urllib.error.URLError, ConnectionError):
                assert server.poll() is None and time.monotonic() < deadline, server.stderr.read().decode()
                time.sleep(0.1)
        assert json.loads(answer)["data"] == references["counts"][::-7].tolist()
        with pytest.raises(urllib.error.HTTPError) as too_big:
            urllib.request.urlopen(f"{base}/arrays/grid/temperature", timeout=5)
        assert too_big.value.code == 413
    finally:
        server.terminate()
        _, stderr = server.communicate(timeout=30)
    assert "Unclosed" not in stderr.decode(), stderr.decode()


@pytest.mark.parametrize("cloud", CLOUDS, ids=repr)
def test_data_service_serves_the_demo_group_from_every_store(cloud: Cloud, tmp_path: Path) -> None:
    url, options = cloud.publish_demo(write_demo_group(tmp_path / "demo"), tmp_path)
    service = load_example("data_service")

    async def main() -> list[Any]:
        async with TestClient(TestServer(service.make_app(url, options))) as client:

            async def get(text: str) -> Any:
                async with client.get("/arrays/foo/bar/baz", params={"slice": text}) as response:
                    assert response.status == 200
                    return (await response.json())["data"]

            return await asyncio.gather(*(get(text) for text in ("...", "::-1", "7:14", "-1")))

    with config.set(concurrency=cloud.concurrency or config.get("concurrency")):
        everything, backwards, middle, last = asyncio.run(main())
    assert "".join(everything).encode() == HELLO and "".join(backwards).encode() == HELLO[::-1]
    assert "".join(middle).encode() == HELLO[7:14] and last == "!"
