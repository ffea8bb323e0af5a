"""The codec stage on strangers' data: the allowlist, bounded decompression and chunk-bytes fuzz.

Every store here is written with plain file writes, as whoever wrote a public bucket could
write it; asyncarr only reads it. Errors are asserted by class and by the URL or metadata
key they name. ``docs/security.md`` maps each guarantee to these tests.
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import math
import os
import pickle
import subprocess
import sys
import zlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import google_crc32c
import numcodecs
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strangers import WritesAMarkerWhenUnpickled, v2_array, write_documents

import asyncarr.sync as za
from asyncarr import config
from asyncarr.codecs import registry
from asyncarr.codecs.allowlist import BYTES_CODEC_IDS, DATA_OBJECT_CODEC_IDS
from asyncarr.codecs.numcodecs_v3 import NumcodecsCodec, VLenBytesCodec, VLenUTF8Codec
from asyncarr.codecs.pipeline import CodecPipeline
from asyncarr.codecs.sharding import ShardingCodec
from asyncarr.codecs.v3 import (
    BloscCodec,
    BytesCodec,
    ChunkSpec,
    Crc32cCodec,
    GzipCodec,
    TransposeCodec,
    ZstdCodec,
    codec_from_json,
)
from asyncarr.errors import CodecError, MetadataError
from asyncarr.metadata.dtypes import find_object_codec_id, parse_dtype

MiB = 1024 * 1024


def v3_array(shape: int, codecs: list, data_type: str = "uint8") -> dict:
    return {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [shape],
        "data_type": data_type,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [shape]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0 if data_type != "string" else "",
        "codecs": codecs,
    }


def chunk_url(root: Path, zarr_format: int) -> str:
    """The URL errors must name for the only chunk of a one-chunk array."""
    return f"{root.as_uri()}/{'0' if zarr_format == 2 else 'c/0'}"


# -- no code from data: the allowlist ----------------------------------------------------------------


@pytest.mark.parametrize("position", ["compressor", "filters"])
def test_pickle_in_v2_metadata_is_refused_naming_the_document_the_codec_and_the_switch(
    tmp_path: Path, position: str
) -> None:
    root = tmp_path / "stranger.zarr"
    marker = tmp_path / "code-ran"
    codec = {"id": "pickle", "protocol": 4}
    metadata = v2_array(4, "<i4", compressor=codec) if position == "compressor" else v2_array(4, "<i4", filters=[codec])
    write_documents(root, {".zarray": metadata, "0": pickle.dumps(WritesAMarkerWhenUnpickled(marker))})

    with pytest.raises(MetadataError) as caught:
        za.open_array(str(root), mode="r")[:]

    message = str(caught.value)
    assert f"{root.as_uri()}/.zarray" in message and position in message
    assert "'pickle'" in message and "allow_pickle=True" in message
    assert not marker.exists()


@pytest.mark.parametrize(
    "codec",
    [
        {"id": "json2", "encoding": "utf-8"},
        {"id": "msgpack2"},
        {"id": "categorize", "labels": ["a"], "dtype": "<U1"},
        {"id": "base64"},
        {"id": "vlen-utf8"},
        {"id": "no-such-codec"},
    ],
    ids=lambda codec: codec["id"],
)
def test_object_and_unknown_codecs_in_v2_metadata_of_a_numeric_array_are_refused(tmp_path: Path, codec: dict) -> None:
    root = tmp_path / "stranger.zarr"
    write_documents(root, {".zarray": v2_array(4, "<i4", filters=[codec]), "0": bytes(16)})

    with pytest.raises(MetadataError) as caught:
        za.open_array(str(root), mode="r")

    assert f"{root.as_uri()}/.zarray" in str(caught.value) and codec["id"] in str(caught.value)


@pytest.mark.parametrize("name", ["numcodecs.pickle", "numcodecs.json2", "numcodecs.msgpack2", "numcodecs.pcodec"])
def test_codecs_off_the_allowlist_in_v3_metadata_are_refused(tmp_path: Path, name: str) -> None:
    root = tmp_path / "stranger.zarr"
    write_documents(root, {"zarr.json": v3_array(4, [{"name": "bytes"}, {"name": name, "configuration": {}}])})

    with pytest.raises(MetadataError) as caught:
        za.open_array(str(root), mode="r")

    assert f"{root.as_uri()}/zarr.json" in str(caught.value) and name in str(caught.value)


def test_allow_pickle_reads_a_pickled_v2_chunk_the_user_trusts(tmp_path: Path) -> None:
    root = tmp_path / "mine.zarr"
    data = np.arange(4, dtype="<i4")
    write_documents(root, {".zarray": v2_array(4, "<i4", filters=[{"id": "pickle"}]), "0": pickle.dumps(data)})

    with config.set(allow_pickle=True):
        np.testing.assert_array_equal(za.open_array(str(root), mode="r")[:], data)


class _UserRegisteredCodec(numcodecs.abc.Codec):
    """A pass-through codec the user registered: not on the allowlist until they trust it."""

    codec_id = "asyncarr_test_user_registered"

    def encode(self, buf: Any) -> bytes:
        return bytes(np.ascontiguousarray(buf))

    def decode(self, buf: Any, out: Any = None) -> Any:
        return numcodecs.compat.ndarray_copy(numcodecs.compat.ensure_contiguous_ndarray(buf), out)


numcodecs.register_codec(_UserRegisteredCodec)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_a_codec_the_user_registered_is_built_from_metadata_only_once_they_trust_it(
    tmp_path: Path, zarr_format: int
) -> None:
    root = tmp_path / "mine.zarr"
    data = np.arange(4, dtype="<i4")
    codec_id = _UserRegisteredCodec.codec_id
    with config.set(trusted_codecs=[codec_id]):
        z = za.open_array(
            str(root),
            mode="w",
            shape=(4,),
            chunks=(4,),
            dtype="<i4",
            zarr_format=zarr_format,
            compressor=_UserRegisteredCodec(),
        )
        z[:] = data
        np.testing.assert_array_equal(za.open_array(str(root), mode="r")[:], data)

    with pytest.raises(MetadataError) as caught:
        za.open_array(str(root), mode="r")

    assert codec_id in str(caught.value) and f"trusted_codecs=['{codec_id}']" in str(caught.value)


def test_trusted_codecs_come_from_the_environment_as_a_comma_separated_list() -> None:
    child = subprocess.run(
        [sys.executable, "-c", "from asyncarr import config; print(config.get('trusted_codecs'))"],
        env={**os.environ, "ASYNCARR_TRUSTED_CODECS": "first, second"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert child.stdout.strip() == "('first', 'second')"


def test_creating_an_array_with_an_object_codec_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    # Such an array could not be read back without the same switch, so it is not created.
    root = tmp_path / "new.zarr"
    for kwargs in ({"compressor": numcodecs.Pickle()}, {"filters": [numcodecs.JSON()]}):
        # Pickle is refused outright; JSON describes data but only of object arrays, not int32.
        with pytest.raises(MetadataError, match=r"refused|serializes object arrays"):
            za.open_array(str(root), mode="w", shape=(4,), chunks=(4,), dtype="i4", zarr_format=2, **kwargs)
        assert not root.exists() or not any(root.iterdir())

    with config.set(allow_pickle=True):
        z = za.open_array(
            str(root), mode="w", shape=(4,), chunks=(4,), dtype="i4", zarr_format=2, filters=[numcodecs.Pickle()]
        )
        z[:] = np.arange(4)
        np.testing.assert_array_equal(z[:], np.arange(4))


@pytest.mark.parametrize(
    ("codec", "field"),
    [
        ({"id": "zlib", "level": "9"}, "level"),
        ({"id": "blosc", "cname": ["lz4"]}, "cname"),
        ({"id": "blosc", "shuffle": {"a": 1}}, "shuffle"),
        ({"id": "delta", "dtype": "|O"}, "dtype"),
        ({"id": "delta", "dtype": "<i4", "astype": "i4,i4"}, "astype"),
        ({"id": "shuffle", "elementsize": 0}, "elementsize"),
        ({"id": "zstd", "level": 10**40}, "level"),
        ({"id": "lzma", "format": 3, "filters": [{"id": 10**30}]}, "filters"),
        ({"id": "fixedscaleoffset", "offset": float("nan"), "scale": 1, "dtype": "<f8"}, "offset"),
        ({"id": "zlib", "level": 1, "exec": "print('hi')"}, "exec"),
    ],
)
def test_invalid_codec_fields_in_metadata_are_a_metadata_error_naming_the_field(
    tmp_path: Path, codec: dict, field: str
) -> None:
    root = tmp_path / "stranger.zarr"
    write_documents(root, {".zarray": v2_array(4, "<f8", compressor=codec)})

    with pytest.raises(MetadataError) as caught:
        za.open_array(str(root), mode="r")

    assert ".zarray" in str(caught.value) and field in str(caught.value)


# -- bounded decompression -----------------------------------------------------------------------------

BOMB_SIZE = 256 * MiB
PEAK_LIMIT = 48 * MiB
_ONE_MIB_OF_ZEROS = bytes(MiB)


def _stream_bomb(compressor: Any) -> bytes:
    """256 MiB of zeros, compressed a MiB at a time (the test never holds 256 MiB itself)."""
    pieces = [compressor.compress(_ONE_MIB_OF_ZEROS) for _ in range(BOMB_SIZE // MiB)]
    return b"".join([*pieces, compressor.flush()])


def _zstd_frame_without_content_size(total: int, byte: int = 0) -> bytes:
    """A Zstandard frame of RLE blocks that declares no content size (as streaming writers make)."""
    block = 128 * 1024
    header = (0xFD2FB528).to_bytes(4, "little") + bytes([0x00, 0x58])  # no size; 2 MiB window
    blocks = []
    for index in range(total // block):
        last = 1 if index == total // block - 1 else 0
        blocks.append((last | (1 << 1) | (block << 3)).to_bytes(3, "little") + bytes([byte]))
    return header + b"".join(blocks)


def _numcodecs_bomb(codec: Any) -> bytes:
    return bytes(codec.encode(np.zeros(BOMB_SIZE, dtype=np.uint8)))


_BOMBS = {
    "zlib": lambda: _stream_bomb(zlib.compressobj(9)),
    "gzip": lambda: _stream_bomb(zlib.compressobj(9, wbits=16 + zlib.MAX_WBITS)),
    "bz2": lambda: _stream_bomb(bz2.BZ2Compressor(9)),
    "lzma": lambda: _stream_bomb(lzma.LZMACompressor(lzma.FORMAT_XZ, preset=1)),
    "zstd": lambda: _numcodecs_bomb(numcodecs.Zstd(level=1)),
    "zstd-no-size": lambda: _zstd_frame_without_content_size(BOMB_SIZE),
    "blosc": lambda: _numcodecs_bomb(numcodecs.Blosc(cname="lz4", clevel=9, shuffle=0)),
    "lz4": lambda: _numcodecs_bomb(numcodecs.LZ4()),
}
_V2_COMPRESSORS = {
    "zlib": {"id": "zlib", "level": 9},
    "gzip": {"id": "gzip", "level": 9},
    "bz2": {"id": "bz2", "level": 9},
    "lzma": {"id": "lzma", "format": 1, "check": -1, "preset": None, "filters": None},
    "zstd": {"id": "zstd", "level": 1},
    "zstd-no-size": {"id": "zstd", "level": 1},
    "blosc": {"id": "blosc", "cname": "lz4", "clevel": 9, "shuffle": 0, "blocksize": 0},
    "lz4": {"id": "lz4", "acceleration": 1},
}
_V3_COMPRESSORS = {
    "gzip": {"name": "gzip", "configuration": {"level": 9}},
    "zstd": {"name": "zstd", "configuration": {"level": 1, "checksum": False}},
    "zstd-no-size": {"name": "zstd", "configuration": {"level": 1, "checksum": False}},
    "blosc": {
        "name": "blosc",
        "configuration": {"cname": "lz4", "clevel": 9, "shuffle": "noshuffle", "typesize": 1, "blocksize": 0},
    },
    "zlib": {"name": "numcodecs.zlib", "configuration": {"level": 9}},
    "bz2": {"name": "numcodecs.bz2", "configuration": {"level": 9}},
    "lzma": {"name": "numcodecs.lzma", "configuration": {"format": 1, "check": -1, "preset": None, "filters": None}},
    "lz4": {"name": "numcodecs.lz4", "configuration": {"acceleration": 1}},
}


@pytest.fixture(scope="module")
def bombs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each compressor's 256 MiB bomb, made once and kept on disk."""
    folder = tmp_path_factory.mktemp("bombs")
    made: dict[str, Path] = {}

    class _Lazy(dict):
        def __missing__(self, name: str) -> Path:
            path = folder / name
            path.write_bytes(_BOMBS[name]())
            self[name] = path
            return path

    return _Lazy(made)


_READ_IN_A_CHILD = """
import json, resource, sys
import asyncarr.sync as za
from asyncarr.errors import CodecError
z = za.open_array(sys.argv[1], mode="r")
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    z[:]
    outcome = "read without an error"
except CodecError as exc:
    outcome = "CodecError: " + str(exc)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"before_kib": before, "after_kib": after, "outcome": outcome}))
"""


def read_in_a_child(root: Path, **environment: str) -> dict[str, Any]:
    """Read every element of the array at `root` in a fresh Python; report peak RSS before and after."""
    import os

    env = {**os.environ, **environment}
    done = subprocess.run(
        [sys.executable, "-c", _READ_IN_A_CHILD, str(root)], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("zarr_format", "compressor"),
    [(2, name) for name in _V2_COMPRESSORS] + [(3, name) for name in _V3_COMPRESSORS],
    ids=lambda value: str(value),
)
def test_a_16_byte_chunk_stored_as_a_256_mib_bomb_is_refused_within_48_mib(
    tmp_path: Path, bombs: dict[str, Path], zarr_format: int, compressor: str
) -> None:
    root = tmp_path / "bomb.zarr"
    if zarr_format == 2:
        write_documents(
            root, {".zarray": v2_array(16, compressor=_V2_COMPRESSORS[compressor]), "0": bombs[compressor].read_bytes()}
        )
    else:
        codecs = [{"name": "bytes"}, _V3_COMPRESSORS[compressor]]
        write_documents(root, {"zarr.json": v3_array(16, codecs), "c/0": bombs[compressor].read_bytes()})

    report = read_in_a_child(root)

    assert report["outcome"].startswith("CodecError: ") and chunk_url(root, zarr_format) in report["outcome"]
    assert (report["after_kib"] - report["before_kib"]) * 1024 < PEAK_LIMIT, report


@pytest.mark.timeout(300)
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_a_string_chunk_inflating_past_variable_chunk_max_bytes_is_refused_within_it(
    tmp_path: Path, bombs: dict[str, Path], zarr_format: int
) -> None:
    # Strings have no fixed size: the bound is the documented setting, here 16 MiB.
    root = tmp_path / "strings.zarr"
    if zarr_format == 2:
        metadata = v2_array(16, "|O", compressor=_V2_COMPRESSORS["zlib"], filters=[{"id": "vlen-utf8"}])
        metadata["fill_value"] = None
        write_documents(root, {".zarray": metadata, "0": bombs["zlib"].read_bytes()})
    else:
        codecs = [{"name": "vlen-utf8", "configuration": {}}, _V3_COMPRESSORS["zlib"]]
        write_documents(root, {"zarr.json": v3_array(16, codecs, "string"), "c/0": bombs["zlib"].read_bytes()})

    report = read_in_a_child(root, ASYNCARR_VARIABLE_CHUNK_MAX_BYTES=str(16 * MiB))

    assert report["outcome"].startswith("CodecError: ") and chunk_url(root, zarr_format) in report["outcome"]
    assert (report["after_kib"] - report["before_kib"]) * 1024 < 32 * MiB, report


@pytest.mark.timeout(120)
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_a_string_chunk_declaring_four_billion_elements_is_refused_before_they_are_allocated(
    tmp_path: Path, zarr_format: int
) -> None:
    root = tmp_path / "strings.zarr"
    body = (2**32 - 1).to_bytes(4, "little")  # numcodecs would allocate 32 GiB of object pointers
    if zarr_format == 2:
        metadata = v2_array(16, "|O", filters=[{"id": "vlen-utf8"}])
        metadata["fill_value"] = None
        write_documents(root, {".zarray": metadata, "0": body})
    else:
        write_documents(root, {"zarr.json": v3_array(16, [{"name": "vlen-utf8"}], "string"), "c/0": body})

    report = read_in_a_child(root)

    assert report["outcome"].startswith("CodecError: ") and chunk_url(root, zarr_format) in report["outcome"]
    assert "4294967295 elements, expected 16" in report["outcome"]
    assert (report["after_kib"] - report["before_kib"]) * 1024 < PEAK_LIMIT, report


@pytest.mark.timeout(300)
@pytest.mark.parametrize("codec", [numcodecs.JSON(), numcodecs.MsgPack()], ids=lambda codec: codec.codec_id)
def test_an_object_chunk_inflating_past_variable_chunk_max_bytes_is_refused_within_it(
    tmp_path: Path, bombs: dict[str, Path], codec: Any
) -> None:
    # JSON and MessagePack chunks have no fixed size either: the same documented bound, here 16 MiB.
    root = tmp_path / "objects.zarr"
    metadata = v2_array(16, "|O", compressor=_V2_COMPRESSORS["zlib"], filters=[codec.get_config()])
    write_documents(root, {".zarray": metadata, "0": bombs["zlib"].read_bytes()})

    report = read_in_a_child(root, ASYNCARR_VARIABLE_CHUNK_MAX_BYTES=str(16 * MiB))

    assert report["outcome"].startswith("CodecError: ") and chunk_url(root, 2) in report["outcome"]
    assert (report["after_kib"] - report["before_kib"]) * 1024 < 32 * MiB, report


def _json_listing(count: int) -> bytes:
    return b"[" + b"0," * count + b'"|O",[' + str(count).encode() + b"]]"


def _msgpack_listing(count: int) -> bytes:
    # array32 header of count + 2 items, count zeros, then the dtype and shape numcodecs appends
    trailer = bytes(numcodecs.MsgPack().encode(np.zeros(0, object)))[1:]  # without its own array header
    return b"\xdd" + (count + 2).to_bytes(4, "big") + bytes(count) + trailer


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("codec", "listing"),
    [(numcodecs.JSON(), _json_listing), (numcodecs.MsgPack(), _msgpack_listing)],
    ids=["json2", "msgpack2"],
)
def test_an_object_chunk_listing_millions_of_elements_is_refused_before_they_are_parsed(
    tmp_path: Path, codec: Any, listing: Any
) -> None:
    # Six million elements in a 16-element chunk: parsed whole they would take 48 MiB of list; the
    # element count is checked after the chunk's 16 + 2 items instead (numcodecs would allocate
    # whatever shape the chunk declares).
    root = tmp_path / "objects.zarr"
    metadata = v2_array(16, "|O", compressor={"id": "zlib", "level": 1}, filters=[codec.get_config()])
    write_documents(root, {".zarray": metadata, "0": zlib.compress(listing(6_000_000), 1)})

    report = read_in_a_child(root)

    assert report["outcome"].startswith("CodecError: ") and chunk_url(root, 2) in report["outcome"]
    assert "more than the 18" in report["outcome"]
    assert (report["after_kib"] - report["before_kib"]) * 1024 < 40 * MiB, report


@pytest.mark.parametrize(
    "body",
    [b'[0,"|O",[4294967296]]', b'[0,"|O",[65536,65536]]', b'[0,"|O",[1]]', b'[0,"<i8",[16]]', b"[]"],
    ids=["four-billion", "2-d-four-billion", "too-few", "not-objects", "empty"],
)
def test_a_json_chunk_declaring_another_shape_or_dtype_is_a_codec_error_before_allocating(
    tmp_path: Path, body: bytes
) -> None:
    root = tmp_path / "objects.zarr"
    write_documents(root, {".zarray": v2_array(16, "|O", filters=[{"id": "json2"}]), "0": body})

    with pytest.raises(CodecError, match=chunk_url(root, 2)):
        za.open_array(str(root), mode="r")[:]


# -- honest data that is slightly odd still reads --------------------------------------------------------

DATA = np.arange(1000, dtype="<u2") * 7


def _gzip_members(raw: bytes) -> bytes:
    half = len(raw) // 2
    return gzip.compress(raw[:half]) + gzip.compress(raw[half:]) + bytes(8)  # zero padding after


def _bz2_streams(raw: bytes) -> bytes:
    half = len(raw) // 2
    return bz2.compress(raw[:half]) + bz2.compress(raw[half:])


_HONEST_V2 = {
    "zlib": ({"id": "zlib", "level": 1}, lambda raw: zlib.compress(raw) + b"trailing bytes zlib ignores"),
    "gzip-two-members": ({"id": "gzip", "level": 1}, _gzip_members),
    "bz2-two-streams": ({"id": "bz2", "level": 1}, _bz2_streams),
    "lzma-xz": ({"id": "lzma", "format": 1, "check": -1, "preset": None, "filters": None}, lzma.compress),
    "lzma-raw-delta": (
        {
            "id": "lzma",
            "format": 3,
            "check": -1,
            "preset": None,
            "filters": [{"id": 3, "dist": 2}, {"id": 33, "preset": 1}],
        },
        lambda raw: lzma.compress(raw, format=lzma.FORMAT_RAW, filters=[{"id": 3, "dist": 2}, {"id": 33, "preset": 1}]),
    ),
    "zstd": ({"id": "zstd", "level": 3}, lambda raw: bytes(numcodecs.Zstd(level=3).encode(raw))),
    "lz4": ({"id": "lz4", "acceleration": 1}, lambda raw: bytes(numcodecs.LZ4().encode(raw))),
    "blosc-z5py-padding": (
        {"id": "blosc", "cname": "zstd", "clevel": 3, "shuffle": 2, "blocksize": 0},
        lambda raw: (
            bytes(numcodecs.Blosc(cname="zstd", clevel=3, shuffle=2).encode(np.frombuffer(raw, "<u2"))) + bytes(16)
        ),
    ),
}


@pytest.mark.parametrize("case", list(_HONEST_V2))
def test_honest_v2_chunks_written_by_other_tools_read_as_numpy_has_them(tmp_path: Path, case: str) -> None:
    compressor, encode = _HONEST_V2[case]
    root = tmp_path / "honest.zarr"
    write_documents(root, {".zarray": v2_array(1000, "<u2", compressor=compressor), "0": encode(DATA.tobytes())})

    np.testing.assert_array_equal(za.open_array(str(root), mode="r")[:], DATA)


def test_a_zstd_frame_without_a_content_size_reads_when_it_holds_exactly_the_chunk(tmp_path: Path) -> None:
    root = tmp_path / "streamed.zarr"
    size = 256 * 1024
    codecs = [{"name": "bytes"}, _V3_COMPRESSORS["zstd"]]
    write_documents(root, {"zarr.json": v3_array(size, codecs), "c/0": _zstd_frame_without_content_size(size, byte=7)})

    np.testing.assert_array_equal(za.open_array(str(root), mode="r")[:], np.full(size, 7, dtype=np.uint8))


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_a_truncated_blosc_frame_is_a_codec_error_naming_the_url(tmp_path: Path, zarr_format: int) -> None:
    root = tmp_path / "truncated.zarr"
    frame = bytes(numcodecs.Blosc(cname="lz4", clevel=5, shuffle=1).encode(DATA))
    if zarr_format == 2:
        compressor = {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0}
        write_documents(root, {".zarray": v2_array(1000, "<u2", compressor=compressor), "0": frame[:-1]})
    else:
        blosc = {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 2}}
        codecs = [{"name": "bytes", "configuration": {"endian": "little"}}, blosc]
        write_documents(root, {"zarr.json": v3_array(1000, codecs, "uint16"), "c/0": frame[:-1]})

    with pytest.raises(CodecError, match="truncated") as caught:
        za.open_array(str(root), mode="r")[:]

    assert chunk_url(root, zarr_format) in str(caught.value)


# -- chunk-bytes fuzz: every supported codec, v2 and v3 ----------------------------------------------------

CHUNK = (4, 5)
_V2_CHAINS: dict[str, tuple[str, dict | None, list | None]] = {
    "raw": ("<i4", None, None),
    "blosc-lz4": ("<i4", {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0}, None),
    "blosc-zstd-bitshuffle": ("<f8", {"id": "blosc", "cname": "zstd", "clevel": 3, "shuffle": 2, "blocksize": 0}, None),
    "blosc-zlib": ("<i2", {"id": "blosc", "cname": "zlib", "clevel": 1, "shuffle": 0, "blocksize": 0}, None),
    "zstd": ("<i4", {"id": "zstd", "level": 1}, None),
    "lz4": ("<i4", {"id": "lz4", "acceleration": 1}, None),
    "zlib": ("<i4", {"id": "zlib", "level": 1}, None),
    "gzip": ("<i4", {"id": "gzip", "level": 1}, None),
    "bz2": ("<i4", {"id": "bz2", "level": 1}, None),
    "lzma-xz": ("<i4", {"id": "lzma", "format": 1, "check": -1, "preset": 1, "filters": None}, None),
    "lzma-alone": ("<i4", {"id": "lzma", "format": 2, "check": -1, "preset": 1, "filters": None}, None),
    "delta-astype+zlib": ("<i8", {"id": "zlib", "level": 1}, [{"id": "delta", "dtype": "<i8", "astype": "<i2"}]),
    "fixedscaleoffset": (
        "<f8",
        None,
        [{"id": "fixedscaleoffset", "offset": 1, "scale": 10, "dtype": "<f8", "astype": "<i4"}],
    ),
    "quantize+bz2": ("<f8", {"id": "bz2", "level": 1}, [{"id": "quantize", "digits": 2, "dtype": "<f8"}]),
    "bitround": ("<f4", None, [{"id": "bitround", "keepbits": 6}]),
    "packbits+gzip": ("|b1", {"id": "gzip", "level": 1}, [{"id": "packbits"}]),
    "astype": ("<f8", None, [{"id": "astype", "encode_dtype": "<f4", "decode_dtype": "<f8"}]),
    "shuffle+lz4": ("<i4", {"id": "lz4", "acceleration": 1}, [{"id": "shuffle", "elementsize": 4}]),
    "crc32+adler32": ("<i4", None, [{"id": "crc32"}, {"id": "adler32"}]),
    "fletcher32+jenkins": ("<i2", None, [{"id": "fletcher32"}, {"id": "jenkins_lookup3"}]),
    "crc32c+zstd": ("<i4", {"id": "zstd", "level": 1}, [{"id": "crc32c"}]),
    "vlen-utf8+zlib": ("|O", {"id": "zlib", "level": 1}, [{"id": "vlen-utf8"}]),
    "vlen-bytes+blosc": (
        "|O",
        {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 0, "blocksize": 0},
        [{"id": "vlen-bytes"}],
    ),
    "vlen-utf8": ("|O", None, [{"id": "vlen-utf8"}]),
    "json2+zlib": ("|O", {"id": "zlib", "level": 1}, [numcodecs.JSON().get_config()]),
    "msgpack2": ("|O", None, [numcodecs.MsgPack().get_config()]),
    "vlen-array+zstd": ("|O", {"id": "zstd", "level": 1}, [{"id": "vlen-array", "dtype": "<i4"}]),
    "record+blosc": (
        [["x", "<i4"], ["y", [["z", ">f8"]]], ["s", "|S2", [2]]],
        {"id": "blosc", "cname": "zstd", "clevel": 1, "shuffle": 1, "blocksize": 0},
        None,
    ),
    "categorize+gzip": (
        "<U3",
        {"id": "gzip", "level": 1},
        [{"id": "categorize", "labels": ["ab", "c", "é☃"], "dtype": "<U3", "astype": "|u1"}],
    ),
}
_LE = {"name": "bytes", "configuration": {"endian": "little"}}
_V3_CHAINS: dict[str, tuple[str, list]] = {
    "bytes": ("<i4", [_LE]),
    "bytes-big": ("<i4", [{"name": "bytes", "configuration": {"endian": "big"}}]),
    "transpose+blosc": (
        "<i4",
        [{"name": "transpose", "configuration": {"order": [1, 0]}}, _LE, _V3_COMPRESSORS["blosc"]],
    ),
    "gzip": ("<f8", [_LE, _V3_COMPRESSORS["gzip"]]),
    "zstd+crc32c": ("<i4", [_LE, _V3_COMPRESSORS["zstd"], {"name": "crc32c"}]),
    "numcodecs.zlib": ("<i4", [_LE, _V3_COMPRESSORS["zlib"]]),
    "numcodecs.bz2": ("<i4", [_LE, _V3_COMPRESSORS["bz2"]]),
    "numcodecs.lzma": ("<i4", [_LE, _V3_COMPRESSORS["lzma"]]),
    "numcodecs.lz4": ("<i4", [_LE, _V3_COMPRESSORS["lz4"]]),
    "numcodecs.delta+shuffle": (
        "<i8",
        [
            {"name": "numcodecs.delta", "configuration": {"dtype": "<i8"}},
            _LE,
            {"name": "numcodecs.shuffle", "configuration": {}},
        ],
    ),
    "numcodecs.packbits": ("|b1", [{"name": "numcodecs.packbits", "configuration": {}}, {"name": "bytes"}]),
    "numcodecs checksums": (
        "<i2",
        [_LE, {"name": "numcodecs.crc32", "configuration": {}}, {"name": "numcodecs.fletcher32", "configuration": {}}],
    ),
    "vlen-utf8+zstd": ("string", [{"name": "vlen-utf8"}, _V3_COMPRESSORS["zstd"]]),
    "vlen-bytes": ("bytes", [{"name": "vlen-bytes"}]),
    "structured+zstd": (
        {"name": "structured", "configuration": {"fields": [["x", "int16"], ["t", "float32"], ["b", "bool"]]}},
        [{"name": "bytes"}, _V3_COMPRESSORS["zstd"]],
    ),
    "sharding": (
        "<i4",
        [
            {
                "name": "sharding_indexed",
                "configuration": {"chunk_shape": [2, 5], "codecs": [_LE, _V3_COMPRESSORS["gzip"]]},
            }
        ],
    ),
}


def _pipeline(zarr_format: int, case: str) -> tuple[CodecPipeline, np.dtype]:
    if zarr_format == 2:
        dtype_json, compressor, filters = _V2_CHAINS[case]
        dtype = np.dtype("T") if "utf8" in case else parse_dtype(2, dtype_json, find_object_codec_id(filters or ()))
        metadata = SimpleNamespace(
            zarr_format=2, dtype=dtype, chunks=CHUNK, fill_value=0, order="C", compressor=compressor, filters=filters
        )
    else:
        dtype_json, codecs = _V3_CHAINS[case]
        if isinstance(dtype_json, dict):  # an extension data type such as "structured"
            dtype = parse_dtype(3, dtype_json)
        else:
            dtype = {"string": np.dtype("T"), "bytes": np.dtype(object)}.get(dtype_json) or np.dtype(dtype_json)
        metadata = SimpleNamespace(zarr_format=3, dtype=dtype, chunks=CHUNK, fill_value=0, codecs=codecs)
    return CodecPipeline.from_metadata(metadata), dtype


def _chunk_of(dtype: np.dtype, seed: int, case: str = "") -> np.ndarray:
    rng = np.random.default_rng(seed)
    if "json2" in case or "msgpack2" in case:
        values = [None, True, 7, -2.5, "é☃", [1, "a"], {"k": [None]}, ""]
        return _objects([values[i] for i in rng.integers(0, len(values), 20)])
    if "vlen-array" in case:
        return _objects([rng.integers(-9, 9, rng.integers(0, 4)).astype("<i4") for _ in range(20)])
    if dtype.kind == "U":
        return rng.choice(np.array(["ab", "c", "é☃", ""], dtype=dtype), CHUNK)
    if dtype.fields is not None:  # records: random bytes, with NaN-free floats so that == compares them
        chunk = np.frombuffer(rng.integers(0, 256, 20 * dtype.itemsize, dtype=np.uint8).tobytes(), dtype=dtype)
        return _without_nan(chunk.copy()).reshape(CHUNK)
    if dtype.kind == "T":
        return np.array(
            ["".join(rng.choice(list("abcé☃"), rng.integers(0, 6))) for _ in range(20)], dtype=dtype
        ).reshape(CHUNK)
    if dtype.kind == "O":
        return np.array(
            [bytes(rng.integers(0, 256, rng.integers(0, 6), dtype=np.uint8)) for _ in range(20)], dtype=object
        ).reshape(CHUNK)
    if dtype.kind == "b":
        return rng.integers(0, 2, CHUNK).astype(bool)
    if dtype.kind == "f":
        return np.round(rng.normal(size=CHUNK), 2).astype(dtype)
    return rng.integers(-1000, 1000, CHUNK).astype(dtype)


def _without_nan(records: np.ndarray) -> np.ndarray:
    """`records` with every NaN float field (nested ones too) set to zero."""
    for name in records.dtype.names or ():
        field = records[name]
        if field.dtype.names:
            records[name] = _without_nan(field.copy())
        elif field.dtype.kind == "f":
            field[np.isnan(field)] = 0
    return records


def _objects(items: list[Any]) -> np.ndarray:
    """A chunk-shaped object array holding `items` as they are (lists stay list elements)."""
    chunk = np.empty(len(items), dtype=object)
    for index, item in enumerate(items):
        chunk[index] = item
    return chunk.reshape(CHUNK)


def _comparable(chunk: np.ndarray) -> Any:
    """`chunk` in a form ``==`` compares whole: object elements that are arrays become their lists."""
    if chunk.dtype.kind != "O":
        return chunk
    return [(item.dtype.str, item.tolist()) if isinstance(item, np.ndarray) else item for item in chunk.flat]


def assert_same_chunk(actual: np.ndarray, expected: np.ndarray) -> None:
    """Assert two chunks hold equal elements, object arrays of arrays included."""
    assert actual.shape == expected.shape
    if expected.dtype.kind == "O":
        assert _comparable(actual) == _comparable(expected)
    else:
        np.testing.assert_array_equal(actual, expected)


_CASES = [(2, case) for case in _V2_CHAINS] + [(3, case) for case in _V3_CHAINS]


def _decodes_to_chunk_or_codec_error(pipeline: CodecPipeline, body: bytes, dtype: np.dtype) -> np.ndarray | None:
    """Decode `body` both ways (new array, and into part of a larger output); None for a CodecError."""
    try:
        chunk = pipeline.decode(body, CHUNK, "c/0/0")
    except CodecError as exc:
        assert "c/0/0" in str(exc)
        return None
    assert chunk.shape == CHUNK and chunk.dtype == dtype
    out = np.zeros((8, 10), dtype=dtype) if dtype.kind not in "TO" else np.full((8, 10), "", dtype=dtype)
    try:
        pipeline.decode_into(body, CHUNK, "c/0/0", out, (slice(4, 8), slice(5, 10)), ())
    except CodecError:
        return chunk
    assert_same_chunk(out[4:8, 5:10], chunk)
    return chunk


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("zarr_format", "case"), _CASES, ids=[f"v{f}-{c}" for f, c in _CASES])
@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), cut=st.integers(0, 10**6), flips=st.lists(st.integers(0, 10**6), max_size=3))
def test_truncated_or_damaged_chunk_bodies_decode_correctly_or_raise_codec_error(
    zarr_format: int, case: str, seed: int, cut: int, flips: list[int]
) -> None:
    pipeline, dtype = _pipeline(zarr_format, case)
    chunk = _chunk_of(dtype, seed, case)
    encoded = pipeline.encode(chunk, "c/0/0")
    expected = pipeline.decode(encoded, CHUNK, "c/0/0")

    truncated = encoded[: cut % (len(encoded) + 1)]
    decoded = _decodes_to_chunk_or_codec_error(pipeline, truncated, dtype)
    if decoded is not None:
        assert_same_chunk(decoded, expected)

    damaged = bytearray(encoded)
    for flip in flips:
        damaged[flip % len(damaged)] ^= 1 << (flip % 8)
    _decodes_to_chunk_or_codec_error(pipeline, bytes(damaged), dtype)


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("zarr_format", "case"), _CASES, ids=[f"v{f}-{c}" for f, c in _CASES])
@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(body=st.binary(max_size=512), prefix_of_real_chunk=st.booleans())
def test_random_chunk_bodies_decode_or_raise_codec_error(
    zarr_format: int, case: str, body: bytes, prefix_of_real_chunk: bool
) -> None:
    pipeline, dtype = _pipeline(zarr_format, case)
    if prefix_of_real_chunk:  # a real header (Blosc, zstd, LZ4, gzip...) followed by junk
        body = bytes(pipeline.encode(_chunk_of(dtype, 0, case), "c/0/0"))[:16] + body
    _decodes_to_chunk_or_codec_error(pipeline, body, dtype)


# -- building codecs from any JSON raises only MetadataError --------------------------------------------

_json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(10**30), 10**30)
    | st.sampled_from([0, 1, -1, 2**31, 2**63, 2**64, -(2**63)])
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
    | st.sampled_from(["<i4", "|O", "i4,i4", "(2,)i4", "M8[ns]", "lz4", "zstd", "shuffle", "little", "big", "C", "F"])
)
any_json = st.recursive(
    _json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
_FIELD_NAMES = [
    "cname", "clevel", "shuffle", "blocksize", "typesize", "level", "checksum", "acceleration", "format", "check",
    "preset", "filters", "dtype", "astype", "offset", "scale", "digits", "keepbits", "encode_dtype", "decode_dtype",
    "elementsize", "location", "initval", "prefix", "protocol", "labels", "endian", "order", "chunk_shape", "codecs",
    "index_codecs", "index_location", "id", "name", "configuration",
]  # fmt: skip
_CODEC_IDS = [*sorted(numcodecs.registry.codec_registry), "pcodec", "zfpy", "", "numcodecs.zlib"]
_V3_NAMES = [
    "bytes", "transpose", "blosc", "gzip", "zstd", "crc32c", "vlen-utf8", "vlen-bytes", "sharding_indexed",
    *(f"numcodecs.{codec_id}" for codec_id in _CODEC_IDS),
]  # fmt: skip
_fields = st.dictionaries(st.sampled_from(_FIELD_NAMES) | st.text(max_size=6), any_json, max_size=5)
v2_codec_json = (
    st.builds(lambda codec_id, fields: {**fields, "id": codec_id}, st.sampled_from(_CODEC_IDS), _fields) | any_json
)
v3_codec_json = (
    st.builds(lambda name, fields: {"name": name, "configuration": fields}, st.sampled_from(_V3_NAMES), _fields)
    | st.builds(lambda name, fields: {"name": name, **fields}, st.sampled_from(_V3_NAMES), _fields)
    | any_json
)
_dtypes = st.sampled_from(
    [np.dtype("<i4"), np.dtype("<f8"), np.dtype("|u1"), np.dtype("|b1"), np.dtype("T"), np.dtype(object)]
)
_V3_CLASSES = [
    BytesCodec,
    TransposeCodec,
    BloscCodec,
    GzipCodec,
    ZstdCodec,
    Crc32cCodec,
    VLenUTF8Codec,
    VLenBytesCodec,
    NumcodecsCodec,
    ShardingCodec,
]


def _built_or_metadata_error(build: Any) -> Any:
    try:
        return build()
    except MetadataError:
        return None


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(codec_json=v2_codec_json)
def test_codec_from_v2_config_on_any_json_raises_only_metadata_error(codec_json: Any) -> None:
    codec = _built_or_metadata_error(lambda: registry.codec_from_v2_config(codec_json, "'compressor'"))
    if codec is not None:
        assert codec.codec_id in BYTES_CODEC_IDS | DATA_OBJECT_CODEC_IDS


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(codec_class=st.sampled_from(_V3_CLASSES), codec_json=v3_codec_json, dtype=_dtypes)
def test_every_v3_codecs_from_json_on_any_json_raises_only_metadata_error(
    codec_class: type, codec_json: Any, dtype: np.dtype
) -> None:
    _built_or_metadata_error(lambda: codec_class.from_json(codec_json, ChunkSpec(CHUNK, dtype, 0)))


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(codec_json=v3_codec_json, dtype=_dtypes)
def test_codec_from_json_on_any_json_raises_only_metadata_error(codec_json: Any, dtype: np.dtype) -> None:
    _built_or_metadata_error(lambda: codec_from_json(codec_json, ChunkSpec(CHUNK, dtype, 0)))


_known_v2_compressors = st.sampled_from([compressor for _, compressor, _ in _V2_CHAINS.values()])
_known_v2_filters = st.sampled_from([filters for _, _, filters in _V2_CHAINS.values()])
_known_v3_chains = st.sampled_from([codecs for _, codecs in _V3_CHAINS.values()])


@pytest.mark.timeout(600)
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(
    zarr_format=st.sampled_from([2, 3]),
    dtype=_dtypes,
    compressor=_known_v2_compressors | v2_codec_json | st.none(),
    filters=_known_v2_filters | st.lists(v2_codec_json, max_size=3) | any_json,
    codecs=_known_v3_chains | st.lists(v3_codec_json, max_size=4) | any_json,
    order=st.sampled_from(["C", "F"]) | any_json,
    body=st.binary(max_size=256),
)
def test_any_codec_json_builds_a_pipeline_or_raises_metadata_error_and_any_body_then_decodes_or_raises_codec_error(
    zarr_format: int, dtype: np.dtype, compressor: Any, filters: Any, codecs: Any, order: Any, body: bytes
) -> None:
    metadata = SimpleNamespace(
        zarr_format=zarr_format,
        dtype=dtype,
        chunks=CHUNK,
        fill_value=0,
        order=order,
        compressor=compressor,
        filters=filters,
        codecs=codecs,
    )
    with config.set(allow_pickle=False):
        pipeline = _built_or_metadata_error(lambda: CodecPipeline.from_metadata(metadata))
    if pipeline is None:
        return
    try:
        chunk = pipeline.decode(body, CHUNK, "c/0/0")
    except CodecError:
        return
    assert chunk.shape == CHUNK and math.prod(chunk.shape) == 20


# -- the same through the whole read path: a stranger's chunk file on disk ------------------------------

_V3_DATA_TYPES = {"<i4": "int32", "<i8": "int64", "<i2": "int16", "<f4": "float32", "<f8": "float64", "|b1": "bool"}
_V3_FILL_VALUES = {"bool": False, "string": "", "bytes": ""}


def _one_chunk_store(root: Path, zarr_format: int, case: str) -> str:
    """Write the metadata of a one-chunk array of `case`; return the chunk's file name."""
    if zarr_format == 2:
        dtype, compressor, filters = _V2_CHAINS[case]
        metadata = {**v2_array(0, dtype, compressor, filters), "shape": list(CHUNK), "chunks": list(CHUNK)}
        if dtype == "|O" or isinstance(dtype, list):
            metadata["fill_value"] = None
        elif dtype.startswith("<U"):
            metadata["fill_value"] = ""
        elif dtype == "|b1":
            metadata["fill_value"] = False
        write_documents(root, {".zarray": metadata})
        return "0.0"
    dtype, codecs = _V3_CHAINS[case]
    data_type = _V3_DATA_TYPES.get(dtype, dtype) if isinstance(dtype, str) else dtype
    metadata = {**v3_array(0, codecs, data_type), "shape": list(CHUNK)}
    metadata["chunk_grid"] = {"name": "regular", "configuration": {"chunk_shape": list(CHUNK)}}
    # a record's fill value is the base64 of its bytes: here 7 zero bytes
    metadata["fill_value"] = _V3_FILL_VALUES.get(data_type, 0) if isinstance(data_type, str) else "AAAAAAAAAA=="
    write_documents(root, {"zarr.json": metadata})
    return "c/0/0"


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("zarr_format", "case"), _CASES, ids=[f"v{f}-{c}" for f, c in _CASES])
def test_a_strangers_chunk_file_reads_as_an_array_or_a_codec_error_naming_its_url(
    tmp_path: Path, zarr_format: int, case: str
) -> None:
    root = tmp_path / "stranger.zarr"
    chunk_file = root / _one_chunk_store(root, zarr_format, case)
    chunk_file.parent.mkdir(parents=True, exist_ok=True)
    z = za.open_array(str(root), mode="r")
    pipeline, dtype = _pipeline(zarr_format, case)
    real = bytes(pipeline.encode(_chunk_of(dtype, 1, case), "c/0/0"))

    @settings(max_examples=30, suppress_health_check=list(HealthCheck), deadline=None)
    @given(body=st.binary(max_size=256), keep=st.integers(0, 64))
    def read(body: bytes, keep: int) -> None:
        chunk_file.write_bytes(real[:keep] + body)
        try:
            values = z[:]
        except CodecError as exc:
            assert f"{root.as_uri()}/{chunk_file.relative_to(root).as_posix()}" in str(exc)
            return
        assert values.shape == CHUNK

    read()
    chunk_file.write_bytes(real)
    assert_same_chunk(z[:], pipeline.decode(real, CHUNK, "c/0/0"))  # lossy filters round


def test_a_bomb_inside_a_shard_is_bounded_by_the_inner_chunk_and_named_by_shard_url_and_inner_chunk(
    tmp_path: Path,
) -> None:
    root = tmp_path / "sharded.zarr"
    inner = {
        "name": "sharding_indexed",
        "configuration": {"chunk_shape": [2], "codecs": [{"name": "bytes"}, _V3_COMPRESSORS["gzip"]]},
    }
    bomb = gzip.compress(bytes(10 * MiB))
    index = np.array([[0, len(bomb)]] + [[2**64 - 1, 2**64 - 1]] * 3, dtype="<u8").tobytes()
    checksum = google_crc32c.value(index).to_bytes(4, "little")
    write_documents(root, {"zarr.json": v3_array(8, [inner]), "c/0": bomb + index + checksum})
    z = za.open_array(str(root), mode="r")

    for selection in (slice(0, 1), slice(None)):  # part of the shard (ranged reads), then all of it
        with pytest.raises(CodecError, match="more than the 2 bytes") as caught:
            z[selection]
        assert f"{root.as_uri()}/c/0" in str(caught.value) and "inner chunk (0,)" in str(caught.value)


def test_stores_without_blocking_io_name_the_chunk_url_too(tmp_path: Path) -> None:
    # Cloud stores take the async engine; a MappingStore over a dict does too.
    from asyncarr.stores.mapping import MappingStore

    documents: dict[str, bytes] = {}
    store = MappingStore(documents)
    assert not store.supports_sync_io
    z = za.open_array(store, mode="w", shape=(8,), chunks=(4,), dtype="u1", compressor=numcodecs.Zlib(), zarr_format=2)
    z[:] = 1
    documents["1"] = zlib.compress(bytes(10 * MiB))

    for action in (lambda: z[:], lambda: z.__setitem__(slice(5, 6), 3)):  # a read, and a partial write's read
        with pytest.raises(CodecError, match="more than the 4 bytes") as caught:
            action()
        assert store.key_url("1") in str(caught.value) and "mapping://" in str(caught.value)
