"""S3Store's own request path: SigV4 signatures, addressing, credentials and answers, against real servers.

Signatures are checked three ways: against the worked example in AWS's documentation, against
botocore's signer on the same request, and by the credential-checking moto, which refuses a
request whose signature it cannot reproduce. What a request carried (User-Agent, signed
headers, payload hash) is read from the request log of the static test server, and scripted
answers come from a small real HTTP server on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import calendar
import hashlib
import json
import logging
import os
import sys
import textwrap
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from emulators import s3 as emulator
from emulators.http import request_log, serve_directory

import asyncarr
from asyncarr.errors import AccessDeniedError, StoreError
from asyncarr.stores import ByteRange
from asyncarr.stores.s3 import S3Store, _addressing
from asyncarr.stores.sigv4 import EMPTY_SHA256, Signer, canonical_uri

AWKWARD_KEYS = [
    "with space/a b",
    "ünïcödé/日本語",
    "plus+sign",
    "percent%25literal%",
    "tilde~x",
    "eq=amp&q?hash#",
    "star*paren()!'",
    "comma,semi;colon:@dollar$",
    'brackets[]{}^|`"<>',
]
SECRET = "Sup3r-Secret-Do-Not-Print-77ab"


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


async def collect(keys: AsyncIterator[str]) -> list[str]:
    return sorted([key async for key in keys])


def signed_names(headers: dict[str, str]) -> list[str]:
    return headers["Authorization"].split("SignedHeaders=")[1].split(",")[0].split(";")


# -- the signature itself ---------------------------------------------------------------------------------


def test_signer_reproduces_the_worked_example_of_the_aws_documentation() -> None:
    # "Example: GET Object" in the S3 API reference (signature calculations, header auth).
    headers = Signer("s3").sign(
        "GET",
        "/test.txt",
        {"host": "examplebucket.s3.amazonaws.com", "range": "bytes=0-9"},
        access_key="AKIAIOSFODNN7EXAMPLE",
        secret_key="wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        token=None,
        region="us-east-1",
        payload_hash=EMPTY_SHA256,
        now=calendar.timegm((2013, 5, 24, 0, 0, 0)),
    )
    assert headers["Authorization"] == (
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
        "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
    )
    assert headers["x-amz-date"] == "20130524T000000Z"


@pytest.mark.parametrize("token", [None, "session/token+with=odd chars"])
@pytest.mark.parametrize(("method", "body"), [("GET", None), ("HEAD", None), ("PUT", b"payload \x00\xff")])
def test_signatures_equal_botocores_for_awkward_keys(method: str, body: bytes | None, token: str | None) -> None:
    signer = Signer("s3")
    for key in AWKWARD_KEYS:
        path = canonical_uri(f"/bucket/{key}")
        reference = AWSRequest(method=method, url=f"http://127.0.0.1:9000{path}", data=body)
        S3SigV4Auth(Credentials("AKIDEXAMPLE", SECRET, token), "s3", "eu-west-3").add_auth(reference)
        now = calendar.timegm(time.strptime(reference.headers["X-Amz-Date"], "%Y%m%dT%H%M%SZ"))
        mine = signer.sign(
            method,
            path,
            {"host": "127.0.0.1:9000"},
            access_key="AKIDEXAMPLE",
            secret_key=SECRET,
            token=token,
            region="eu-west-3",
            payload_hash=reference.headers["X-Amz-Content-SHA256"],
            now=now,
        )
        assert mine["Authorization"] == reference.headers["Authorization"], key
    assert SECRET not in repr(signer)


def test_paths_are_encoded_once_per_segment_keeping_unreserved_characters_and_slashes() -> None:
    assert canonical_uri("/b/a b/ü+%~-_.x") == "/b/a%20b/%C3%BC%2B%25~-_.x"
    assert canonical_uri("/b/k=v&w?#") == "/b/k%3Dv%26w%3F%23"


# -- signed requests against the credential-checking moto ---------------------------------------------------


def test_credential_checking_moto_accepts_every_request_for_awkward_keys() -> None:
    server = emulator.authenticating_moto()
    bucket = server.new_bucket()
    values = {key: os.urandom(50) + key.encode() for key in AWKWARD_KEYS}

    async def round_trip() -> list[Any]:
        async with S3Store(bucket, endpoint_url=server.endpoint, key=server.key, secret=server.secret) as store:
            await store.set_many(list(values.items()))
            whole = await store.get_many([(key, None) for key in values])
            ranges = await store.get_many([(key, ByteRange(3, 10)) for key in values])
            suffixes = await store.get_many([(key, ByteRange.last(7)) for key in values])
            sizes = [await store.getsize(key) for key in values]
            listed = await collect(store.list_prefix(""))
            await store.delete(AWKWARD_KEYS[0])
            return [whole, ranges, suffixes, sizes, listed, await store.exists(AWKWARD_KEYS[0])]

    whole, ranges, suffixes, sizes, listed, still_there = run(round_trip())
    assert whole == list(values.values())
    assert ranges == [value[3:13] for value in values.values()]
    assert suffixes == [value[-7:] for value in values.values()]
    assert sizes == [len(value) for value in values.values()]
    assert listed == sorted(AWKWARD_KEYS) and still_there is False
    # The objects have the names asked for, not a mis-encoded variant: botocore reads them back.
    reference = emulator.client(server.endpoint, server.key, server.secret)
    for key in AWKWARD_KEYS[1:]:
        assert reference.get_object(Bucket=bucket, Key=key)["Body"].read() == values[key]


def test_a_session_token_is_sent_signed_and_checked_by_the_server(tmp_path: Path) -> None:
    token = "FwoGZXIvYXdzEBYaDH+session/token=="
    (tmp_path / "bucket").mkdir()
    (tmp_path / "bucket" / "k").write_bytes(b"served")
    served = serve_directory(tmp_path)
    store = S3Store("bucket", endpoint_url=served, key="AKIDEXAMPLE", secret=SECRET, token=token)
    assert run(store.get("k")) == b"served"
    [sent] = [dict(record.headers) for record in request_log(served)]
    assert sent["x-amz-security-token"] == token
    assert signed_names(sent) == ["host", "x-amz-content-sha256", "x-amz-date", "x-amz-security-token"]
    assert sent["x-amz-content-sha256"] == "UNSIGNED-PAYLOAD"

    # moto, like AWS, refuses a session token that does not belong to the access key.
    server = emulator.authenticating_moto()
    bucket = server.new_bucket()
    with_token = S3Store(bucket, endpoint_url=server.endpoint, key=server.key, secret=server.secret, token=token)
    for attempt in (with_token.get("k"), with_token.set("k", b"v")):
        with pytest.raises(
            AccessDeniedError, match=rf"^s3://{bucket}/k: access denied \(HTTP 400 InvalidToken"
        ) as denied:
            run(attempt)
        assert token not in str(denied.value) and server.secret not in str(denied.value)


CREDENTIAL_PROCESS = textwrap.dedent(
    """
    import datetime, json, sys
    state = json.load(open(sys.argv[1]))
    with open(sys.argv[1] + ".calls", "a") as calls:
        calls.write("call\\n")
    expires = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=state["lifetime"])
    print(json.dumps({"Version": 1, "AccessKeyId": state["key"], "SecretAccessKey": state["secret"],
                      "Expiration": expires.isoformat()}))
    """
)


@pytest.fixture
def credential_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A profile whose credentials come from a process; set the state it answers with by calling it."""
    script, state = tmp_path / "credentials.py", tmp_path / "state.json"
    script.write_text(CREDENTIAL_PROCESS)
    (tmp_path / "config").write_text(
        f'[profile rotating]\ncredential_process = "{sys.executable}" "{script}" "{state}"\n'
    )
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))

    def answer_with(key: str, secret: str, lifetime: int) -> int:
        state.write_text(json.dumps({"key": key, "secret": secret, "lifetime": lifetime}))
        calls = Path(f"{state}.calls")
        return len(calls.read_text().splitlines()) if calls.exists() else 0

    return answer_with


def test_refreshable_credentials_are_read_again_when_they_expire(credential_process: Any) -> None:
    server = emulator.authenticating_moto()
    bucket = server.new_bucket()
    store = S3Store(bucket, endpoint_url=server.endpoint, profile="rotating")
    # Five minutes left is inside botocore's refresh window: every request asks the process again.
    credential_process(server.key, server.secret, 300)
    run(store.set("k", b"value"))
    calls = credential_process(server.key, SECRET, 300)  # the next answer is a wrong secret ...
    with pytest.raises(AccessDeniedError, match="SignatureDoesNotMatch"):
        run(store.get("k"))
    credential_process(server.key, server.secret, 300)  # ... and then a right one again
    assert run(store.get("k")) == b"value"
    assert credential_process(server.key, server.secret, 300) == calls + 2
    assert SECRET not in repr(vars(store))


def test_credentials_from_the_chain_are_found_once_per_store(credential_process: Any) -> None:
    server = emulator.authenticating_moto()
    bucket = server.new_bucket()
    credential_process(server.key, server.secret, 7200)
    store = S3Store(bucket, endpoint_url=server.endpoint, profile="rotating")
    run(store.set_many([(f"k{i}", b"v") for i in range(20)]))
    assert run(store.get_many([(f"k{i}", None) for i in range(20)])) == [b"v"] * 20  # another event loop
    assert credential_process(server.key, server.secret, 7200) == 1


def test_no_credentials_anywhere_is_access_denied_naming_the_url(credential_process: Any) -> None:
    store = S3Store("some-bucket", endpoint_url=emulator.moto_endpoint())
    with pytest.raises(AccessDeniedError, match=r"^s3://some-bucket/k: access denied \(Unable to locate credentials"):
        run(store.get("k"))


# -- what goes on the wire -------------------------------------------------------------------------------


@pytest.fixture
def served(tmp_path: Path) -> tuple[str, bytes]:
    """A static server with the object ``bucket/a/b`` (its base URL stands in for an S3 endpoint)."""
    value = os.urandom(1000)
    (tmp_path / "bucket" / "a").mkdir(parents=True)
    (tmp_path / "bucket" / "a" / "b").write_bytes(value)
    return serve_directory(tmp_path), value


def test_object_requests_go_through_asyncarrs_own_client_not_aiobotocore(
    served: tuple[str, bytes], caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    caplog.set_level(logging.DEBUG, logger="asyncarr.stores.s3")
    url, value = served
    store = S3Store("bucket", endpoint_url=url, key="AKIDEXAMPLE", secret=SECRET)

    async def read() -> list[Any]:
        results = [await store.get("a/b"), await store.get("a/b", ByteRange.last(10)), await store.getsize("a/b")]
        return [*results, await store.exists("a/missing"), await store.get("a/missing")]

    assert run(read()) == [value, value[-10:], 1000, False, None]
    log = request_log(url)
    assert [(record.method, record.key) for record in log] == [
        ("GET", "bucket/a/b"),
        ("GET", "bucket/a/b"),
        ("HEAD", "bucket/a/b"),
        ("HEAD", "bucket/a/missing"),
        ("GET", "bucket/a/missing"),
    ]
    assert {record.headers["User-Agent"] for record in log} == {f"asyncarr/{asyncarr.__version__}"}
    assert all(record.headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/") for record in log)
    assert log[1].headers["Range"] == "bytes=-10"

    # On moto too: chunk reads and writes open an aiohttp session and no aiobotocore client.
    moto_store = emulator.make_store(tmp_path)
    caplog.clear()

    async def use_moto() -> list[str]:
        await moto_store.set("k", b"v")
        assert (await moto_store.get("k"), await moto_store.exists("k")) == (b"v", True)
        await moto_store.delete("k")
        opened_for_objects = store_log()
        await collect(moto_store.list_prefix(""))
        await moto_store.close()
        return opened_for_objects

    def store_log() -> list[str]:
        return [r.getMessage().split(" for ")[0] for r in caplog.records if r.name == "asyncarr.stores.s3"]

    assert run(use_moto()) == ["opened the S3 http session"]
    assert "opened the S3 aiobotocore client" in store_log()


def test_anonymous_requests_carry_no_signature(served: tuple[str, bytes]) -> None:
    url, value = served
    store = S3Store("bucket", endpoint_url=url, anon=True)
    assert run(store.get("a/b", ByteRange(10, 5))) == value[10:15]
    [sent] = request_log(url)
    assert not [name for name in sent.headers if name.lower() == "authorization" or name.lower().startswith("x-amz")]

    bucket = emulator.new_bucket(public=True)
    emulator.client().put_object(Bucket=bucket, Key="public", Body=b"open data")
    public = S3Store(bucket, anon=True, endpoint_url=emulator.moto_endpoint())
    assert run(public.get("public")) == b"open data"
    assert run(public.getsize("public")) == 9


def test_a_put_is_signed_with_the_sha256_of_its_body(served: tuple[str, bytes]) -> None:
    url, _ = served
    body = os.urandom(3000)
    store = S3Store("bucket", endpoint_url=url, key="AKIDEXAMPLE", secret=SECRET)
    with pytest.raises(StoreError, match=r"^s3://bucket/new: put failed: HTTP 405"):
        run(store.set("new", body))  # the static server refuses writes, after logging them
    [sent] = request_log(url)
    assert sent.body == body
    assert sent.headers["x-amz-content-sha256"] == hashlib.sha256(body).hexdigest()
    assert "x-amz-content-sha256" in signed_names(dict(sent.headers))


def test_a_server_that_ignores_ranges_is_sliced_locally(tmp_path: Path) -> None:
    value = os.urandom(100)
    (tmp_path / "bucket").mkdir()
    (tmp_path / "bucket" / "v").write_bytes(value)
    url = serve_directory(tmp_path, ignore_range=True)
    store = S3Store("bucket", endpoint_url=url, anon=True)
    assert run(store.get("v", ByteRange(5, 10))) == value[5:15]
    assert run(store.get("v", ByteRange.last(3))) == value[-3:]


@pytest.mark.parametrize(
    ("option", "environment", "scope"),
    [
        ("ap-south-1", {"AWS_DEFAULT_REGION": "eu-west-1"}, "ap-south-1"),
        (None, {"AWS_DEFAULT_REGION": "eu-west-1", "AWS_REGION": "eu-west-2"}, "eu-west-1"),
        (None, {"AWS_REGION": "eu-west-2"}, "eu-west-2"),
        (None, {}, "us-east-1"),
    ],
)
def test_the_signing_region_is_the_option_then_the_environment_then_us_east_1(
    served: tuple[str, bytes],
    monkeypatch: pytest.MonkeyPatch,
    option: str | None,
    environment: dict[str, str],
    scope: str,
) -> None:
    url, _ = served
    for name in ("AWS_DEFAULT_REGION", "AWS_REGION"):
        monkeypatch.delenv(name, raising=False)
    for name, region in environment.items():
        monkeypatch.setenv(name, region)
    store = S3Store("bucket", endpoint_url=url, region=option, key="AKIDEXAMPLE", secret=SECRET)
    run(store.getsize("a/b"))
    assert f"/{scope}/s3/aws4_request," in request_log(url)[0].headers["Authorization"]


def test_buckets_are_virtual_hosts_on_aws_and_paths_elsewhere() -> None:
    host = "data.s3.eu-west-1.amazonaws.com"
    assert _addressing("data", None, "eu-west-1") == (f"https://{host}", host, "/")
    host = "s3.us-east-1.amazonaws.com"  # a dotted name would not match the wildcard certificate
    assert _addressing("my.data", None, "us-east-1") == (f"https://{host}", host, "/my.data/")
    assert _addressing("b", "http://127.0.0.1:9000", "x") == ("http://127.0.0.1:9000", "127.0.0.1:9000", "/b/")
    minio = "https://user:pw@minio.example:443/s3/"
    assert _addressing("b", minio, "x") == ("https://minio.example", "minio.example", "/s3/b/")


# -- answers: a scripted server ------------------------------------------------------------------------------


def _answer(status: str, body: bytes = b"", headers: dict[str, str] | None = None) -> bytes:
    lines = [f"HTTP/1.1 {status}", f"Content-Length: {len(body)}", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def _s3_error(status: str, code: str, headers: dict[str, str] | None = None) -> bytes:
    return _answer(status, f"<Error><Code>{code}</Code><Message>{code} &amp; more</Message></Error>".encode(), headers)


class ScriptedServer:
    """A real HTTP server on 127.0.0.1 answering each request with the next answer; it keeps the request heads."""

    def __init__(self, answers: list[bytes]) -> None:
        self.answers = answers
        self.heads: list[dict[str, str]] = []

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._answer, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def __aexit__(self, *exc_info: object) -> None:
        self.server.close()
        await self.server.wait_closed()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        lines = (await reader.readuntil(b"\r\n\r\n")).decode().split("\r\n")
        head = {
            "": lines[0],
            **{k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)},
        }
        await reader.readexactly(int(head.get("content-length", 0)))
        self.heads.append(head)
        writer.write(self.answers[min(len(self.heads) - 1, len(self.answers) - 1)])
        await writer.drain()
        writer.close()


def through(answers: list[bytes], request: Any, **options: Any) -> tuple[Any, list[dict[str, str]]]:
    """What ``request(store)`` gives (or raises) against the scripted answers, and the requests sent."""
    scripted = ScriptedServer(answers)

    async def go() -> Any:
        async with (
            scripted as url,
            S3Store("bucket", endpoint_url=url, key="AKIDEXAMPLE", secret=SECRET, **options) as store,
        ):
            try:
                return await request(store)
            except StoreError as exc:
                return exc

    with asyncarr.config.set(retries=2, timeout=10):
        return run(go()), scripted.heads


def test_a_request_signed_for_the_wrong_region_is_sent_again_for_the_bucket_region() -> None:
    moved = _s3_error("301 Moved Permanently", "PermanentRedirect", {"x-amz-bucket-region": "eu-north-1"})
    result, heads = through([moved, _answer("200 OK", b"hello")], lambda store: store.get("k"), region="us-east-1")
    assert result == b"hello"
    assert ["/us-east-1/s3/" in h["authorization"] for h in heads] == [True, False]
    assert "/eu-north-1/s3/" in heads[1]["authorization"]


@pytest.mark.parametrize(
    ("answer", "outcome", "requests"),
    [
        (_s3_error("404 Not Found", "NoSuchKey"), None, 1),
        (_answer("404 Not Found"), None, 1),
        (_s3_error("404 Not Found", "NoSuchBucket"), "the bucket 'bucket' does not exist", 1),
        (_s3_error("403 Forbidden", "ExpiredToken"), AccessDeniedError, 1),
        (_s3_error("401 Unauthorized", "Unauthorized"), AccessDeniedError, 1),
        (_s3_error("400 Bad Request", "InvalidArgument"), "HTTP 400 InvalidArgument: InvalidArgument & more", 1),
        (_s3_error("429 Too Many Requests", "TooManyRequests"), "after 3 attempts", 3),
        (_s3_error("500 Internal Server Error", "InternalError"), "after 3 attempts", 3),
        (_answer("502 Bad Gateway"), "after 3 attempts", 3),
        (_s3_error("503 Slow Down", "SlowDown"), "after 3 attempts", 3),
        (_answer("504 Gateway Timeout"), "after 3 attempts", 3),
        (_answer("206 Partial Content", b"0123", {"Content-Range": "bytes 50-53/100"}), "not the range asked for", 1),
        (_answer("206 Partial Content", b"0123", {"Content-Range": "bytes 9-12/100"}), b"123", 1),
        (_answer("416 Range Not Satisfiable", b"", {"Content-Range": "bytes */5"}), b"", 1),
    ],
)
def test_answers_map_to_values_missing_keys_and_errors(answer: bytes, outcome: Any, requests: int) -> None:
    result, heads = through([answer], lambda store: store.get("k", ByteRange(10, 3)))
    if isinstance(outcome, str):
        assert type(result) is StoreError and str(result).startswith("s3://bucket/k: get failed")
        assert outcome in str(result)
    elif isinstance(outcome, type):
        assert type(result) is outcome and str(result).startswith("s3://bucket/k: access denied")
    else:
        assert result == outcome
    assert len(heads) == requests
    assert SECRET not in str(result) and "AKIDEXAMPLE" not in str(result)


def test_client_kwargs_take_the_botocore_names_and_refuse_others() -> None:
    botocore_style = {"endpoint_url": "http://127.0.0.1:9", "region_name": "eu-west-1"}
    store = S3Store("b", client_kwargs={**botocore_style, "aws_access_key_id": "A", "aws_secret_access_key": SECRET})
    assert repr(store) == "S3Store('s3://b', region='eu-west-1', endpoint_url='http://127.0.0.1:9')"
    assert SECRET not in repr(vars(store))
    both = S3Store("b", key="A", secret="B", client_kwargs={"aws_access_key_id": "A", "aws_secret_access_key": SECRET})
    assert SECRET not in repr(vars(both)) and SECRET not in repr(both.__getstate__())
    with pytest.raises(TypeError, match="unknown client_kwargs config; it accepts endpoint_url, region_name"):
        S3Store("b", client_kwargs={"config": None})
    with pytest.raises(ValueError, match="pass both key and secret"):
        S3Store("b", key="A")
