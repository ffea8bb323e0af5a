"""AzureStore against a real azurite: ranges, paging, anonymous access, credentials, errors, pickling, closing.

The behaviour every store shares is in tests/test_stores.py (STORE_CASES); these are the Azure specifics.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import datetime
import logging
import os
import pickle
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from azure.storage.blob import ContainerSasPermissions, generate_container_sas
from emulators import azure as emulator
from emulators.proxy import FAULT_KINDS, FaultProxy

import asyncarr.sync as za
from asyncarr import config
from asyncarr.errors import AccessDeniedError, ReadOnlyError, StoreError
from asyncarr.stores import ByteRange, from_url
from asyncarr.stores.azure import AzureStore

ROOT = Path(__file__).resolve().parents[1]


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


async def collect(keys: Any) -> list[str]:
    return [key async for key in keys]


def keyed_store(container: str, prefix: str = "", **options: Any) -> AzureStore:
    """A store on azurite authenticated by account name, key and URL (not the connection string)."""
    return AzureStore(
        container,
        prefix,
        account_name=emulator.ACCOUNT,
        account_key=emulator.KEY,
        account_url=emulator.azurite_account_url(),
        **options,
    )


def sas_token(container: str) -> str:
    return generate_container_sas(
        emulator.ACCOUNT,
        container,
        account_key=emulator.KEY,
        permission=ContainerSasPermissions(read=True, write=True, delete=True, list=True),
        expiry=datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1),
    )


def full_text(error: BaseException) -> str:
    """Everything a traceback of ``error`` prints, chained causes included, plus its repr."""
    return "".join(traceback.format_exception(error)) + repr(error)


@pytest.fixture
def store(tmp_path: Path) -> Any:
    created = emulator.make_store(tmp_path)
    yield created
    run(created.close())


# -- data ----------------------------------------------------------------------------------------


def test_values_round_trip_including_empty_large_and_overwritten(store: AzureStore) -> None:
    values = {"zarr.json": b"{}", "a/c/0": os.urandom(5 * 1024 * 1024 + 3), "empty": b"", "view": b"abc"}
    run(store.set_many(list(values.items())))
    run(store.set("view", memoryview(b"replaced")))
    values["view"] = b"replaced"
    assert run(store.get_many([(key, None) for key in values])) == list(values.values())
    assert run(store.getsize("a/c/0")) == len(values["a/c/0"])


def test_byte_ranges_match_python_slicing_including_suffixes_and_ranges_past_the_end(store: AzureStore) -> None:
    value = bytes(range(256)) * 40
    n = len(value)
    run(store.set("v", value))
    run(store.set("empty", b""))
    cases = {
        ByteRange(0, 10): value[:10],
        ByteRange(5): value[5:],
        ByteRange(n - 3, 10): value[n - 3 :],
        ByteRange(n): b"",
        ByteRange(n + 5, 4): b"",
        ByteRange(100, 0): b"",
        ByteRange.last(7): value[-7:],
        ByteRange.last(0): b"",
        ByteRange.last(n + 100): value,
    }
    for byte_range, expected in cases.items():
        assert run(store.get("v", byte_range)) == expected, byte_range
    for byte_range in (ByteRange(0, 4), ByteRange(3), ByteRange.last(2), None):
        assert run(store.get("empty", byte_range)) == b""
        assert run(store.get("absent", byte_range)) is None


def test_missing_blobs_read_as_none_and_deleting_them_is_fine(store: AzureStore) -> None:
    run(store.set("a/b", b"x"))
    assert run(store.get("a")) is None
    assert run(store.exists("a")) is False and run(store.exists("a/b")) is True
    assert run(store.getsize("nothing")) is None
    run(store.delete("nothing/here"))
    run(store.delete("a/b"))
    assert run(store.exists("a/b")) is False


def test_listings_page_through_more_than_a_thousand_blobs_and_prefixes(store: AzureStore) -> None:
    blobs = [f"big/{i:04d}" for i in range(510)]
    dirs = [f"big/d{i:04d}/0" for i in range(510)]
    run(store.set_many([(key, b"") for key in [*blobs, *dirs, "big.json", "other/x"]]))
    assert sorted(run(collect(store.list_prefix("big")))) == sorted([*blobs, *dirs])
    children = run(collect(store.list_dir("big/")))
    assert len(children) == 1020  # more than one page of 1000
    assert sorted(children) == sorted([key.split("/")[1] for key in blobs + dirs])
    assert sorted(run(collect(store.list_dir("")))) == ["big", "big.json", "other"]


def test_delete_prefix_removes_only_the_blobs_below_it(store: AzureStore) -> None:
    keys = [f"a/c/{i}" for i in range(60)] + ["ab/x", "b"]
    run(store.set_many([(key, b"1") for key in keys]))
    run(store.delete_prefix("a"))
    assert sorted(run(collect(store.list_prefix("")))) == ["ab/x", "b"]
    run(store.delete_prefix(""))
    assert run(collect(store.list_prefix(""))) == []


def test_prefix_keeps_the_store_inside_its_part_of_the_container() -> None:
    container = emulator.new_container()
    whole = keyed_store(container)
    run(whole.set_many([("data/zarr.json", b"in"), ("data2/x", b"sibling"), ("top", b"root")]))
    inner = keyed_store(container, "/data/")
    assert inner.location == f"az://{container}/data"
    assert run(collect(inner.list_prefix(""))) == ["zarr.json"]
    assert run(collect(inner.list_dir(""))) == ["zarr.json"]
    run(inner.delete_prefix(""))
    assert sorted(run(collect(whole.list_prefix("")))) == ["data2/x", "top"]
    assert whole.location == f"az://{container}" and whole.key_url("top") == f"az://{container}/top"
    run(whole.close())
    run(inner.close())


def test_read_only_store_refuses_writes_before_any_request() -> None:
    store = AzureStore("nonexistent-container", read_only=True, connection_string=emulator.connection_string())
    for attempt in (store.set("k", b"v"), store.delete("k"), store.delete_prefix("")):
        with pytest.raises(ReadOnlyError, match="read-only"):
            run(attempt)


# -- URLs and options ---------------------------------------------------------------------------


def test_az_and_abfs_urls_open_the_same_container_and_prefix() -> None:
    container = emulator.new_container()
    options = {"account_key": emulator.KEY, "account_url": emulator.azurite_account_url()}
    writer = from_url(f"az://{container}/arr", account_name=emulator.ACCOUNT, **options)
    run(writer.set("zarr.json", b"{}"))
    reader = from_url(f"abfs://{container}@{emulator.ACCOUNT}.dfs.core.windows.net/arr/", read_only=True, **options)
    assert isinstance(reader, AzureStore) and reader.read_only
    assert (reader.container, reader.prefix, reader.account_name) == (container, "arr", emulator.ACCOUNT)
    assert run(reader.get("zarr.json")) == b"{}"
    run(writer.close())
    run(reader.close())


def test_abfs_url_defaults_to_the_accounts_blob_endpoint() -> None:
    store = from_url("abfs://ctr@acct.dfs.core.windows.net/p", anon=True)
    assert (store.container, store.prefix, store.account_name) == ("ctr", "p", "acct")
    assert store._account_url == "https://acct.blob.core.windows.net"
    assert store.location == "az://ctr/p"


def test_urls_take_missing_options_from_adlfs_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    container = emulator.new_container(public=True)
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", emulator.connection_string())
    with from_url(f"az://{container}/p") as store:  # type: ignore[attr-defined]
        run(store.set("k", b"from the environment"))
    monkeypatch.delenv("AZURE_STORAGE_CONNECTION_STRING")
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_NAME", emulator.ACCOUNT)
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_KEY", emulator.KEY)
    store = from_url(f"az://{container}/p", account_url=emulator.azurite_account_url())
    assert (store.account_name, store._account_key) == (emulator.ACCOUNT, emulator.KEY)
    assert run(store.get("k")) == b"from the environment"
    run(store.close())
    anonymous = from_url(f"az://{container}/p", anon=True, account_url=emulator.azurite_account_url())
    assert anonymous._account_key is None  # explicit credentials win over the environment's
    run(anonymous.close())


def test_a_url_without_an_account_says_how_to_name_one(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_ACCOUNT_NAME"):
        monkeypatch.delenv(variable, raising=False)
    store = from_url("az://container/data.zarr")  # like other cloud stores: opening never fails, the first request does
    with pytest.raises(StoreError, match=r"az://container/data.zarr/k: .*no storage account named: pass account_name"):
        run(store.get("k"))
    run(store.close())


def test_bad_urls_and_options_are_refused_with_the_reason() -> None:
    with pytest.raises(TypeError, match=r"unknown storage_options .*: region; Azure stores accept account_name"):
        from_url("az://ctr/p", anon=True, account_name="a", region="x")
    with pytest.raises(ValueError, match="names no container"):
        from_url("az:///p", anon=True, account_name="a")
    with pytest.raises(ValueError, match="connection_string already holds the endpoint and credentials"):
        AzureStore("ctr", connection_string=emulator.connection_string(), anon=True)
    with pytest.raises(ValueError, match="pass only one of"):
        AzureStore("ctr", account_name="a", account_key="k", sas_token="s")
    with pytest.raises(ValueError, match="account_key needs account_name"):
        AzureStore("ctr", account_key="k", account_url="http://127.0.0.1:1/a")
    with pytest.raises(ValueError, match="store key"):
        AzureStore("ctr", "../up", anon=True, account_name="a")


# -- anonymous access and refusals ----------------------------------------------------------------


def test_public_container_reads_and_lists_anonymously_but_refuses_anonymous_writes() -> None:
    container = emulator.new_container(public=True)
    writer = keyed_store(container, "data")
    value = os.urandom(1000)
    run(writer.set_many([("zarr.json", b"{}"), ("c/0", value)]))
    for reader in (
        from_url(f"az://{container}/data", anon=True, account_url=emulator.azurite_account_url()),
        from_url(f"az://{container}/data", connection_string=emulator.connection_string(anon=True)),
    ):
        assert run(reader.get("c/0")) == value
        assert run(reader.get("c/0", ByteRange.last(10))) == value[-10:]
        assert run(reader.get("missing")) is None
        assert sorted(run(collect(reader.list_prefix("")))) == ["c/0", "zarr.json"]
        with pytest.raises(AccessDeniedError, match=rf"az://{container}/data/c/1: access denied .*Anonymous"):
            run(reader.set("c/1", b"x"))
        run(reader.close())
    run(writer.close())


def test_anonymous_read_of_a_private_container_is_access_denied_naming_the_url() -> None:
    container = emulator.new_container()
    run(keyed_store(container).set("k", b"secret data"))
    with FaultProxy(emulator.azurite_account_url()) as proxy, config.set(retries=3):
        reader = from_url(f"az://{container}/", anon=True, account_url=proxy.url)
        with pytest.raises(AccessDeniedError, match=rf"az://{container}/k: access denied") as refused:
            run(reader.get("k"))
        assert proxy.counts()["requests"] == 1  # a refusal is final: not retried
        assert "pass account_key (with account_name), sas_token or connection_string" in str(refused.value)
        with pytest.raises(AccessDeniedError, match=rf"az://{container}: access denied"):
            run(collect(reader.list_prefix("")))
        assert proxy.counts()["requests"] == 2
        run(reader.close())


def test_wrong_account_key_is_access_denied_without_showing_the_key(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    container = emulator.new_container()
    wrong_key = base64.b64encode(os.urandom(64)).decode()
    store = AzureStore(
        container,
        account_name=emulator.ACCOUNT,
        account_key=wrong_key,
        account_url=emulator.azurite_account_url(),
    )
    for attempt in (store.get("k"), store.set("k", b"v"), collect(store.list_dir(""))):
        with pytest.raises(AccessDeniedError, match=r"access denied .*403.*the container may be public") as refused:
            run(attempt)
        assert isinstance(refused.value, PermissionError)
        assert wrong_key not in full_text(refused.value)
    run(store.close())
    assert wrong_key not in repr(store) and wrong_key not in caplog.text


def test_missing_container_is_a_store_error_naming_it_and_is_not_retried() -> None:
    with FaultProxy(emulator.azurite_account_url()) as proxy, config.set(retries=5):
        store = proxied_store(proxy, "no-such-container")
        for attempt in (store.get("k"), store.set("k", b"v"), store.exists("k"), collect(store.list_prefix(""))):
            before = proxy.counts()["requests"]
            with pytest.raises(StoreError, match="the container 'no-such-container' does not exist") as failed:
                run(attempt)
            assert not isinstance(failed.value, AccessDeniedError)
            assert proxy.counts()["requests"] == before + 1  # the answer is final: not retried
        run(store.close())


def test_refused_connections_are_retried_then_reported_with_the_attempt_count() -> None:
    store = AzureStore("ctr", anon=True, account_url=f"http://127.0.0.1:{emulator._free_port()}/acct")
    with (
        config.set(retries=2),
        pytest.raises(StoreError, match=r"az://ctr/k: read failed after 3 attempts: ") as failed,
    ):
        run(store.get("k"))
    assert not isinstance(failed.value, AccessDeniedError)
    run(store.close())


def proxied_store(proxy: FaultProxy, container: str) -> AzureStore:
    """A store whose requests pass through ``proxy`` (shared-key signatures do not cover the host)."""
    return AzureStore(container, account_name=emulator.ACCOUNT, account_key=emulator.KEY, account_url=proxy.url)


def test_a_flaky_network_is_invisible_to_reads_writes_and_listings() -> None:
    container = emulator.new_container()
    values = {f"c/{i}": os.urandom(2000 + i) for i in range(30)}
    with FaultProxy(emulator.azurite_account_url(), failure_rate=0.3, failures=FAULT_KINDS, seed=3) as proxy:
        store = proxied_store(proxy, container)
        with config.set(retries=15):
            run(store.set_many(list(values.items())))
            assert run(store.get_many([(key, None) for key in values])) == list(values.values())
            ranges = [(key, ByteRange.last(5)) for key in values] + [(key, ByteRange(7, 9)) for key in values]
            assert run(store.get_many(ranges)) == [v[-5:] for v in values.values()] + [v[7:16] for v in values.values()]
            assert sorted(run(collect(store.list_prefix("c")))) == sorted(values)
            assert len(run(collect(store.list_dir("c")))) == len(values)
        run(store.close())
        assert set(proxy.counts()["faults"]) == set(FAULT_KINDS)


@pytest.mark.parametrize("fault", FAULT_KINDS)
def test_every_attempt_is_exactly_one_request_so_retry_counts_are_honest(fault: str) -> None:
    container = emulator.new_container()
    run(keyed_store(container).set("k", b"x" * 5000))
    with FaultProxy(emulator.azurite_account_url(), failure_rate=1.0, failures=(fault,)) as proxy:
        store = proxied_store(proxy, container)
        with config.set(retries=2), pytest.raises(StoreError, match=r"/k: read failed after 3 attempts") as failed:
            run(store.get("k"))
        assert proxy.counts()["requests"] == 3  # no retries inside the SDK or aiohttp
        assert not isinstance(failed.value, AccessDeniedError)
        run(store.close())


def test_an_attempt_without_an_answer_times_out_and_is_retried() -> None:
    container = emulator.new_container()
    run(keyed_store(container).set("k", b"v"))
    with FaultProxy(emulator.azurite_account_url(), latency=1.0) as proxy:
        store = proxied_store(proxy, container)
        with config.set(retries=1, timeout=0.2), pytest.raises(StoreError, match=r"after 2 attempts: no answer within"):
            run(store.get("k"))
        proxy.latency = 0.0
        assert run(store.get("k")) == b"v"
        run(store.close())


def test_requests_run_concurrently_up_to_config_concurrency() -> None:
    container = emulator.new_container()
    keys = [f"c/{i}" for i in range(150)]
    run(keyed_store(container).set_many([(key, b"v") for key in keys]))
    with FaultProxy(emulator.azurite_account_url(), latency=0.5) as proxy, config.set(concurrency=150):
        store = proxied_store(proxy, container)
        assert run(store.get_many([(key, None) for key in keys])) == [b"v"] * len(keys)
        assert proxy.counts()["max_in_flight"] > 100  # more than aiohttp's default pool of 100
        run(store.close())


# -- credentials stay secret ------------------------------------------------------------------------


def test_sas_token_store_reads_writes_and_lists() -> None:
    container = emulator.new_container()
    store = from_url(
        f"az://{container}/p", sas_token="?" + sas_token(container), account_url=emulator.azurite_account_url()
    )
    run(store.set_many([("a/b", b"1"), ("c", b"2")]))
    assert run(store.get("a/b")) == b"1" and run(store.get("c", ByteRange.last(1))) == b"2"
    assert sorted(run(collect(store.list_dir("")))) == ["a", "c"]
    run(store.delete_prefix(""))
    assert run(collect(store.list_prefix(""))) == []
    run(store.close())


def test_credentials_never_appear_in_reprs_errors_or_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    container = emulator.new_container()
    url = emulator.azurite_account_url()
    token = sas_token(container)
    signature = token.split("sig=")[1].split("&")[0]
    forged_signature = base64.b64encode(os.urandom(32)).decode().replace("+", "%2B").replace("/", "%2F")
    forged = token.replace(signature, forged_signature)
    wrong_key = base64.b64encode(os.urandom(64)).decode()
    wrong_connection = emulator.connection_string().replace(emulator.KEY, wrong_key)

    working = AzureStore(container, sas_token=token, account_url=url)
    run(working.set("k", b"v"))  # the SDK logs these requests, SAS in the URL
    assert run(working.get("k")) == b"v" and run(working.get("missing")) is None
    texts = [repr(working), str(working), working.location]
    run(working.close())

    refused_stores = [
        AzureStore(container, sas_token=forged, account_url=url),
        AzureStore(container, connection_string=wrong_connection),
        AzureStore(container, account_name=emulator.ACCOUNT, account_key=wrong_key, account_url=url),
    ]
    for store in refused_stores:
        texts += [repr(store), str(store)]
        for attempt in (store.get("k"), store.get("k", ByteRange.last(2)), store.set("k", b"v"), store.exists("k")):
            with pytest.raises(AccessDeniedError) as refused:
                run(attempt)
            texts.append(full_text(refused.value))
        run(store.close())

    assert any(record.name.startswith("azure") for record in caplog.records)  # the SDK did log its requests
    texts.append(caplog.text)
    for secret in (token, signature, forged, forged_signature, wrong_key, wrong_connection, emulator.KEY):
        assert all(secret not in text for text in texts), secret


# -- lifecycle ------------------------------------------------------------------------------------


def test_store_pickles_without_its_clients_and_reconnects_in_another_process(store: AzureStore) -> None:
    run(store.set_many([("zarr.json", b"{}"), ("c/0", b"chunk")]))
    restored = pickle.loads(pickle.dumps(store))
    assert restored.location == store.location and "_connections" not in store.__getstate__()
    assert run(restored.get("c/0")) == b"chunk"
    run(restored.close())
    script = (
        "import asyncio, pickle, sys\n"
        "store = pickle.loads(sys.stdin.buffer.read())\n"
        "async def main():\n"
        "    await store.set('from/child', b'hello')\n"
        "    values = {k: await store.get(k) async for k in store.list_prefix('')}\n"
        "    await store.close()\n"
        "    return values\n"
        "sys.stdout.buffer.write(pickle.dumps(asyncio.run(main())))\n"
    )
    child = subprocess.run(
        [sys.executable, "-c", script], input=pickle.dumps(store), capture_output=True, env=_child_env(), timeout=60
    )
    assert child.returncode == 0, child.stderr.decode()
    assert pickle.loads(child.stdout) == {"zarr.json": b"{}", "c/0": b"chunk", "from/child": b"hello"}


def test_one_store_serves_threads_that_each_run_their_own_event_loop(store: AzureStore) -> None:
    values = {f"k/{i}": os.urandom(100) for i in range(16)}
    run(store.set_many(list(values.items())))

    def read_half(offset: int) -> list[bytes | None]:
        return run(store.get_many([(key, None) for key in list(values)[offset::2]]))

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        halves = list(pool.map(read_half, [0, 1, 0, 1]))
    assert halves == [list(values.values())[0::2], list(values.values())[1::2]] * 2


def test_clients_close_without_unclosed_session_warnings() -> None:
    container = emulator.new_container()
    script = f"""
import asyncio, gc, sys, warnings
warnings.simplefilter("always")
import numpy as np
import asyncarr.sync as za
from asyncarr.stores.azure import AzureStore
options = {{"connection_string": {emulator.connection_string()!r}}}
explicit = AzureStore({container!r}, "explicit", **options)
asyncio.run(explicit.set("k", b"v"))           # one loop: closed when asyncio.run shuts it down
assert asyncio.run(explicit.get("k")) == b"v"  # another loop, another client
async def closed_explicitly():
    await explicit.get("k")
    await explicit.close()
asyncio.run(closed_explicitly())
dropped = AzureStore({container!r}, "dropped", **options)
asyncio.run(dropped.set("k", b"v"))
del dropped, explicit
gc.collect()
z = za.open_array("az://{container}/facade", mode="w", shape=(4,), chunks=(2,), dtype="i4", storage_options=options)
z[:] = np.arange(4)                            # never closed by the script: the facade closes it at exit
print("done")
"""
    child = subprocess.run(
        [sys.executable, "-X", "dev", "-W", "error::ResourceWarning", "-c", script],
        capture_output=True,
        env=_child_env(),
        timeout=60,
    )
    stderr = child.stderr.decode()
    assert child.returncode == 0 and child.stdout.decode().strip() == "done", stderr
    for noise in ("Unclosed", "unclosed", "ResourceWarning", "Exception ignored", "Task was destroyed"):
        assert noise not in stderr, stderr


def _child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


# -- through the sync facade ----------------------------------------------------------------------


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("auth", ["connection_string", "account_key"])
def test_sync_arrays_and_groups_round_trip_through_az_urls(zarr_format: int, auth: str) -> None:
    container = emulator.new_container()
    if auth == "connection_string":
        options: dict[str, Any] = {"connection_string": emulator.connection_string()}
    else:
        options = {
            "account_name": emulator.ACCOUNT,
            "account_key": emulator.KEY,
            "account_url": emulator.azurite_account_url(),
        }
    data = np.arange(35 * 17, dtype="f8").reshape(35, 17)
    url = f"az://{container}/data/arr.zarr"
    with za.open_array(url, mode="w", shape=data.shape, chunks=(8, 8), dtype=data.dtype, zarr_format=zarr_format,
                       storage_options=options) as z:  # fmt: skip
        z[:] = data
        z.attrs["units"] = "m"
    with za.open_array(url, mode="r", storage_options=options) as z:
        np.testing.assert_array_equal(z[:], data)
        np.testing.assert_array_equal(z[3:30:4, -5:], data[3:30:4, -5:])
        assert z.attrs["units"] == "m" and z.zarr_format == zarr_format
    with za.open_group(
        f"az://{container}/data/tree.zarr", mode="w", zarr_format=zarr_format, storage_options=options
    ) as g:
        g.create_dataset("a/b", data=data[:5])
        g.attrs["title"] = "tree"
    with za.open_group(f"az://{container}/data/tree.zarr", mode="r", storage_options=options) as g:
        np.testing.assert_array_equal(g["a/b"][:], data[:5])
        assert g.attrs["title"] == "tree" and sorted(g.group_keys()) == ["a"]
    listing = AzureStore(container, "data", connection_string=emulator.connection_string())
    keys = set(run(collect(listing.list_prefix(""))))
    metadata = {2: {"arr.zarr/.zarray", "arr.zarr/.zattrs"}, 3: {"arr.zarr/zarr.json"}}[zarr_format]
    chunks = {key for key in keys if key.startswith("arr.zarr/")} - metadata
    assert metadata <= keys and len(chunks) == 5 * 3  # every chunk of the 35 x 17 array in 8 x 8 chunks
    run(listing.close())
