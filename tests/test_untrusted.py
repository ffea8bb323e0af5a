"""Issue 11's attacks, each a stranger's store on disk: a named error naming the key, nothing run or changed.

These are the reproductions as a new user met them. The deeper suites sit beside this one:
``test_untrusted_codecs.py`` (allowlist, bounded decoders, chunk-bytes fuzz),
``test_untrusted_metadata.py`` (JSON limits, node kinds, metadata fuzz, odd-but-honest data),
``test_untrusted_costs.py`` (what opening, resizing and describing cost) and
``test_untrusted_stores.py`` (redirects, secrets, symlinks, third-party stores).
``docs/security.md`` maps each guarantee to its tests.
"""

from __future__ import annotations

import base64
import json
import pickle
import zlib
from pathlib import Path

import numpy as np
import pytest
from strangers import WritesAMarkerWhenUnpickled, snapshot, v2_array, write_documents

import asyncarr.sync as za
from asyncarr import config
from asyncarr.errors import CodecError, ContainsArrayError, MetadataError

# -- no code from data ---------------------------------------------------------------------------


def test_a_pickle_filter_on_a_numeric_array_is_refused_before_any_chunk_is_unpickled(tmp_path: Path) -> None:
    root = tmp_path / "stranger.zarr"
    marker = tmp_path / "code-ran"
    payload = pickle.dumps(WritesAMarkerWhenUnpickled(marker))
    write_documents(root, {".zarray": v2_array(4, "<i4", filters=[{"id": "pickle"}]), "0": payload})
    before = snapshot(tmp_path)

    with pytest.raises(MetadataError) as caught:
        za.open_array(str(root), mode="r")[:]

    message = str(caught.value)
    assert ".zarray" in message and "pickle" in message and "allow_pickle" in message
    assert not marker.exists()
    assert snapshot(tmp_path) == before


def test_a_v3_numcodecs_pickle_codec_is_refused_too(tmp_path: Path) -> None:
    root = tmp_path / "stranger.zarr"
    document = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [4],
        "data_type": "int32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "numcodecs.pickle"}],
    }
    write_documents(root, {"zarr.json": document})

    with pytest.raises(MetadataError) as caught:
        za.open_array(str(root), mode="r")[:]

    assert "zarr.json" in str(caught.value) and "pickle" in str(caught.value)


def test_allow_pickle_is_off_by_default() -> None:
    assert config.get("allow_pickle") is False


# -- bounded decompression ------------------------------------------------------------------------


def test_a_zlib_bomb_for_a_1000_byte_chunk_is_a_codec_error_naming_the_chunk(tmp_path: Path) -> None:
    root = tmp_path / "bomb.zarr"
    bomb = zlib.compress(bytes(256 * 1024 * 1024), 9)  # ~255 KiB that inflate to 256 MiB
    write_documents(root, {".zarray": v2_array(1000, "|u1", compressor={"id": "zlib", "level": 9})})
    (root / "0").write_bytes(bomb)

    with pytest.raises(CodecError) as caught:
        za.open_array(str(root), mode="r")[:]

    assert f"{root.as_uri()}/0" in str(caught.value)


# -- metadata costs what is stored ----------------------------------------------------------------


def test_a_430_byte_zarr_json_declaring_4_million_inner_chunks_per_shard_opens_and_reads(tmp_path: Path) -> None:
    root = tmp_path / "sharded.zarr"
    document = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [4_000_000],
        "data_type": "uint8",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4_000_000]}},
        "chunk_key_encoding": {"name": "default"},
        "fill_value": 7,
        "codecs": [
            {
                "name": "sharding_indexed",
                "configuration": {
                    "chunk_shape": [1],
                    "codecs": [{"name": "bytes"}],
                    "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
                },
            }
        ],
    }
    raw = json.dumps(document, separators=(",", ":"))
    assert len(raw) < 430
    write_documents(root, {"zarr.json": raw})

    z = za.open_array(str(root), mode="r")

    assert z[123_456] == 7  # no shard stored: the fill value, without building 4 million entries


# -- JSON with limits -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        "[" * 100_000 + "]" * 100_000,
        '{"zarr_format": 3, "node_type": "array", "shape": [' + "9" * 5000 + "]}",
    ],
    ids=["deeply-nested", "5000-digit-number"],
)
def test_hostile_json_is_a_metadata_error_naming_the_document(tmp_path: Path, raw: str) -> None:
    root = tmp_path / "hostile.zarr"
    write_documents(root, {"zarr.json": raw})

    with pytest.raises(MetadataError) as caught:
        za.open(str(root), mode="r")

    assert "zarr.json" in str(caught.value)


# -- node kinds from parsed JSON ------------------------------------------------------------------


def test_an_array_whose_attributes_say_group_is_still_an_array_and_nothing_is_created_in_it(tmp_path: Path) -> None:
    root = tmp_path / "tricky.zarr"
    data = np.arange(4, dtype="<i4")
    document = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [4],
        "data_type": "int32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        "attributes": {"description": "this array belongs to the group of sensors"},
    }
    write_documents(root, {"zarr.json": document, "c/0": data.tobytes()})
    before = snapshot(tmp_path)

    np.testing.assert_array_equal(za.open(str(root), mode="r")[:], data)
    with pytest.raises(ContainsArrayError):
        za.open_group(str(root), mode="a").create_group("inside")
    with pytest.raises(ContainsArrayError):
        za.open_array(str(root / "inside" / "x"), mode="w", shape=(2,), dtype="i4")

    assert snapshot(tmp_path) == before


# -- odd but honest ------------------------------------------------------------------------------


def test_a_blosc_frame_with_z5pys_16_trailing_zero_bytes_reads_like_zarr_python_reads_it(tmp_path: Path) -> None:
    import numcodecs

    root = tmp_path / "z5py.zarr"
    data = np.arange(100, dtype="<f8")
    frame = numcodecs.Blosc(cname="lz4", clevel=5).encode(data)
    compressor = {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0}
    write_documents(root, {".zarray": v2_array(100, "<f8", compressor=compressor)})
    (root / "0").write_bytes(bytes(frame) + bytes(16))

    np.testing.assert_array_equal(za.open_array(str(root), mode="r")[:], data)


def test_the_v3_bytes_data_type_takes_an_integer_array_fill_value_as_well_as_base64(tmp_path: Path) -> None:
    def bytes_array(fill_value: object) -> dict:
        return {
            "zarr_format": 3,
            "node_type": "array",
            "shape": [2],
            "data_type": "bytes",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
            "chunk_key_encoding": {"name": "default"},
            "fill_value": fill_value,
            "codecs": [{"name": "vlen-bytes"}],
        }

    write_documents(tmp_path / "ints.zarr", {"zarr.json": bytes_array([104, 105])})
    write_documents(tmp_path / "b64.zarr", {"zarr.json": bytes_array(base64.b64encode(b"hi").decode())})

    for name in ("ints.zarr", "b64.zarr"):
        assert list(za.open_array(str(tmp_path / name), mode="r")[:]) == [b"hi", b"hi"]
