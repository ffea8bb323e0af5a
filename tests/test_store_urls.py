"""from_url and as_store: every form a user can pass as ``store``, and the errors for the rest."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
import zict

from asyncarr.stores import (
    STORE_SCHEMES,
    LocalStore,
    MappingStore,
    MemoryStore,
    Store,
    ZipStore,
    as_store,
    from_url,
)
from asyncarr.stores import url as url_module


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def test_plain_paths_and_file_urls_open_a_local_store_rooted_exactly_there(tmp_path: Path, monkeypatch: Any) -> None:
    root = tmp_path / "data" / "example.zarr"
    for url in (str(root), root, f"file://{root}", f"file://localhost{root}", f"{root}/"):
        store, path = as_store(url)
        assert isinstance(store, LocalStore) and store.root == str(root) and path == ""
        assert store.read_only is False
    monkeypatch.chdir(tmp_path)
    relative = from_url("data/example.zarr/group/arr", read_only=True)
    assert isinstance(relative, LocalStore) and relative.read_only is True
    assert relative.root == str(tmp_path / "data" / "example.zarr" / "group" / "arr")
    assert relative.location == f"file://{relative.root}"


def test_local_store_from_a_url_reaches_what_another_handle_wrote(tmp_path: Path) -> None:
    run(LocalStore(tmp_path).set("zarr.json", b"{}"))
    assert run(from_url(f"file://{tmp_path}", read_only=True).get("zarr.json")) == b"{}"


def test_zip_paths_and_zip_urls_open_a_zip_store(tmp_path: Path) -> None:
    archive = tmp_path / "data.zip"
    appending = from_url(str(archive))
    assert isinstance(appending, ZipStore) and appending.mode == "a" and appending.path == str(archive)
    reading = from_url(f"file://{archive}", read_only=True)
    assert isinstance(reading, ZipStore) and reading.mode == "r" and reading.read_only is True
    store, path = as_store(f"zip://{archive}")
    assert isinstance(store, ZipStore) and store.path == str(archive) and path == ""
    assert isinstance(from_url(str(tmp_path / "UPPER.ZIP")), ZipStore)


def test_zip_url_can_carry_a_path_inside_the_zip_which_only_as_store_returns(tmp_path: Path) -> None:
    archive = tmp_path / "data.zip"
    store, path = as_store(f"zip://{archive}/group/arr/", read_only=True)
    assert isinstance(store, ZipStore) and store.path == str(archive) and store.mode == "r" and path == "group/arr"
    with pytest.raises(ValueError, match="use as_store"):
        from_url(f"zip://{archive}/group/arr")
    with pytest.raises(ValueError, match="path inside the zip file is not valid"):
        as_store(f"zip://{archive}/../escape")
    with pytest.raises(ValueError, match="names no zip file"):
        from_url("zip://")


def test_a_directory_whose_name_ends_in_zip_stays_a_local_store(tmp_path: Path) -> None:
    (tmp_path / "odd.zip").mkdir()
    store = from_url(str(tmp_path / "odd.zip"))
    assert isinstance(store, LocalStore) and store.root == str(tmp_path / "odd.zip")


def test_memory_urls_reach_the_named_store(tmp_path: Path) -> None:
    run(MemoryStore(name="test-url-name").set("zarr.json", b"{}"))
    store = from_url("memory://test-url-name", read_only=True)
    assert isinstance(store, MemoryStore) and store.name == "test-url-name" and store.read_only is True
    assert run(store.get("zarr.json")) == b"{}"
    anonymous = MemoryStore()
    run(anonymous.set("k", b"v"))
    assert run(from_url(anonymous.location).get("k")) == b"v"
    fresh = from_url("memory://")
    assert isinstance(fresh, MemoryStore) and fresh.location not in (anonymous.location, store.location)


def test_as_store_wraps_mappings_none_and_returns_stores_as_they_are(tmp_path: Path) -> None:
    existing = MemoryStore()
    assert as_store(existing) == (existing, "")
    assert as_store(existing, read_only=True)[0] is existing
    mapping: dict[str, bytes] = {}
    wrapped, path = as_store(mapping, read_only=True)
    assert isinstance(wrapped, MappingStore) and wrapped.mapping is mapping and wrapped.read_only and path == ""
    zipped, _ = as_store(zict.Zip(str(tmp_path / "z.zip"), mode="w"))
    assert isinstance(zipped, MappingStore) and isinstance(zipped.mapping, zict.Zip)
    first, _ = as_store(None)
    second, _ = as_store(None)
    assert isinstance(first, MemoryStore) and first.location != second.location


def test_as_store_rejects_other_types_naming_them() -> None:
    for bad in (42, b"bytes/path", [("k", b"v")], object()):
        with pytest.raises(TypeError, match=f"cannot use a .*{type(bad).__qualname__} as a store"):
            as_store(bad)


def test_storage_options_for_stores_that_take_none_raise_type_error_naming_them(tmp_path: Path) -> None:
    for url in (str(tmp_path / "a.zarr"), f"file://{tmp_path}", f"{tmp_path}/a.zip", "zip:///x.zip", "memory://m"):
        with pytest.raises(TypeError, match=r"unknown storage_options .*: anon, region"):
            from_url(url, anon=True, region="eu")
    for store_like in (MemoryStore(), {}, None):
        with pytest.raises(TypeError, match=r"storage_options \['anon'\]"):
            as_store(store_like, storage_options={"anon": True})
    assert isinstance(as_store(str(tmp_path), storage_options={})[0], LocalStore)


def test_registered_schemes_are_opened_by_their_factory_with_the_options(monkeypatch: Any) -> None:
    calls: list[tuple[str, bool, dict[str, Any]]] = []

    def open_test_scheme(url: str, *, read_only: bool = False, **options: Any) -> Store:
        calls.append((url, read_only, options))
        return MemoryStore(read_only=read_only)

    monkeypatch.setitem(STORE_SCHEMES, "testscheme", open_test_scheme)
    store, path = as_store("testscheme://bucket/prefix", read_only=True, storage_options={"anon": True})
    assert isinstance(store, MemoryStore) and store.read_only and path == ""
    assert calls == [("testscheme://bucket/prefix", True, {"anon": True})]


def test_unknown_scheme_raises_value_error_listing_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown store URL scheme 'ftp'; known schemes: .*file.*memory.*s3.*zip"):
        from_url("ftp://host/data.zarr")


def test_remote_scheme_without_a_backend_says_it_is_not_supported_yet(monkeypatch: Any) -> None:
    monkeypatch.setitem(url_module._REMOTE_SCHEME_MODULES, "later", ("asyncarr.stores.not_written_yet", "later"))
    with pytest.raises(ValueError, match=r"later:// stores are not supported yet .*asyncarr\[later\]"):
        from_url("later://bucket/x")


def test_remote_scheme_with_a_missing_dependency_names_the_extra_to_install(tmp_path: Path, monkeypatch: Any) -> None:
    (tmp_path / "backend_needing_a_package.py").write_text("import package_that_is_not_installed\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(url_module._REMOTE_SCHEME_MODULES, "needy", ("backend_needing_a_package", "needy"))
    with pytest.raises(ValueError, match=r"'package_that_is_not_installed'.*pip install 'asyncarr\[needy\]'"):
        from_url("needy://bucket/x")
    sys.modules.pop("backend_needing_a_package", None)


@pytest.mark.parametrize("scheme", ["s3", "gs", "gcs", "az", "abfs", "http", "https"])
def test_cloud_schemes_are_known_and_never_opened_as_local_paths(scheme: str) -> None:
    try:
        store = from_url(f"{scheme}://bucket/data.zarr")
    except ValueError as exc:  # the backend for this scheme is not there yet, or its extra is not installed
        assert "unknown store URL scheme" not in str(exc)
        assert "pip install 'asyncarr[" in str(exc)
    else:
        assert not isinstance(store, (LocalStore, MemoryStore, ZipStore, MappingStore))
        assert "bucket" in store.location
