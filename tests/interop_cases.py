"""Parameter tables and helpers shared by the zarr-python and tensorstore interop tests."""

from __future__ import annotations

import asyncio
import base64
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import pytest

import asyncarr
import asyncarr.sync as za

FORMATS = [2, 3]

#: Module marks for tests that run zarr-python: it flags S/U/M8/m8 and variable-length strings in v3,
#: and v3 consolidated metadata, as not yet specified; that is its own caveat, not what the tests check.
ZARR_PYTHON_WARNING_FILTERS = [
    pytest.mark.filterwarnings("ignore::zarr.errors.UnstableSpecificationWarning"),
    pytest.mark.filterwarnings("ignore::zarr.errors.ZarrUserWarning"),
]

# --- data types -------------------------------------------------------------

#: Every data type of the contract except variable-length strings (a later issue).
DTYPES = [
    "bool",
    "i1",
    "i2",
    "i4",
    "i8",
    "u1",
    "u2",
    "u4",
    "u8",
    "f2",
    "f4",
    "f8",
    "c8",
    "c16",
    "M8[ns]",
    "m8[s]",
    "S5",
    "U3",
]

#: Zarr v2 stores the byte order in the dtype string; v3 keeps it in the `bytes` codec.
BIG_ENDIAN_V2_DTYPES = [">i2", ">u8", ">f8", ">c16"]

#: A non-default fill value per data type, chosen to survive a JSON round trip in every
#: engine (the `S5` fill is five bytes long: tensorstore insists on the full item size).
FILL_VALUES: dict[str, Any] = {
    "bool": True,
    "i1": -7,
    "i2": -300,
    "i4": 123456,
    "i8": -(2**40),
    "u1": 200,
    "u2": 60000,
    "u4": 4_000_000_000,
    "u8": 2**63 + 5,
    "f2": -1.5,
    "f4": -np.inf,
    "f8": 2.5e300,
    "c8": complex(1.0, -2.0),
    "c16": complex(-0.5, 1e10),
    "M8[ns]": np.datetime64("2001-02-03T04:05:06.123456789", "ns"),
    "m8[s]": np.timedelta64(-5, "s"),
    "S5": b"xyzzy",
    "U3": "zé日",
    ">i2": -2,
    ">u8": 2**64 - 1,
    ">f8": 0.25,
    ">c16": complex(3.0, 4.0),
}


def sample(dtype: str, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Deterministic data spanning the dtype's range (extremes, inf and NaN for floats)."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    n = int(np.prod(shape))
    if dt.kind == "b":
        flat = rng.integers(0, 2, n).astype(bool)
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        flat = rng.integers(info.min, info.max, n, dtype=dt.newbyteorder("="), endpoint=True)
        flat[:2] = [info.min, info.max]
    elif dt.kind == "f":
        flat = rng.standard_normal(n) * 1000
        flat[:3] = [np.inf, -np.inf, np.nan]
    elif dt.kind == "c":
        flat = rng.standard_normal(n) + 1j * rng.standard_normal(n)
        flat[0] = complex(np.inf, -1.0)
    elif dt.kind == "M":
        flat = rng.integers(-(2**62), 2**62, n).astype(dt)
    elif dt.kind == "m":
        flat = rng.integers(-(2**40), 2**40, n).astype(dt)
    elif dt.kind == "S":
        letters = np.frombuffer(b"abcxyz09", dtype="S1")
        flat = np.array([b"".join(rng.choice(letters, k)) for k in rng.integers(0, dt.itemsize + 1, n)])
    elif dt.kind == "U":
        letters = np.array(list("aZé日ß\u00a0"))
        flat = np.array(["".join(rng.choice(letters, k)) for k in rng.integers(0, dt.itemsize // 4 + 1, n)])
    else:  # pragma: no cover - the tables hold no other kinds
        raise AssertionError(dtype)
    return np.asarray(flat).astype(dt).reshape(shape)


def partially_written(data: np.ndarray, fill_value: Any, region: tuple[slice, ...]) -> np.ndarray:
    """What an array reads as after only `region` of `data` was written into it."""
    expected = np.full(data.shape, fill_value, dtype=data.dtype)
    expected[region] = data[region]
    return expected


#: 2-d arrays: 7x5 in 3x2 chunks, a 3x3 chunk grid with ragged edge chunks.
SHAPE_2D = (7, 5)
CHUNKS_2D = (3, 2)
#: Rows 0-3, columns 1-4: whole chunks, partial chunks, and the last chunk row never written.
REGION_2D = (slice(0, 4), slice(1, 5))

#: 3-d arrays for the layout tables, so a transpose is not its own inverse trick.
SHAPE_3D = (5, 4, 6)
CHUNKS_3D = (2, 3, 4)

# --- selections compared against NumPy ---------------------------------------


def selections(ndim: int) -> list[Any]:
    """Selections every engine must read like NumPy: full, stepped, reversed, mixed, one element."""
    return [
        Ellipsis,
        tuple(slice(1, None, 2) for _ in range(ndim)),
        tuple(slice(None, None, -1) for _ in range(ndim)),
        (slice(-2, 0, -2), *(slice(None) for _ in range(ndim - 1))),
        (1, *(slice(None, None, -2) for _ in range(ndim - 1))),
        tuple(-1 for _ in range(ndim)),
        tuple(1 for _ in range(ndim)),
    ]


def assert_reads_like_numpy(array, expected: np.ndarray) -> None:
    """Every selection of `selections` reads from `array` what NumPy reads from `expected`."""
    for selection in selections(expected.ndim):
        np.testing.assert_array_equal(array[selection], expected[selection], err_msg=f"selection {selection!r}")


def assert_same_fill_value(actual: Any, expected: Any, dtype: str) -> None:
    """Fill values agree as values of `dtype` (NaN equals NaN)."""
    np.testing.assert_array_equal(np.asarray(actual, dtype=dtype), np.asarray(expected, dtype=dtype))


def assert_nan_filled_outside_region_2d(result: np.ndarray, data: np.ndarray) -> None:
    """A full read of a NaN-filled array with only REGION_2D of `data` written; the unwritten rows are NaN."""
    np.testing.assert_array_equal(result, partially_written(data, np.nan, REGION_2D))
    assert np.isnan(result[4:, :]).all()


def metadata_document(path: Path, zarr_format: int) -> dict:
    """The metadata document stored at `path`: `.zarray` for a v2 array, `zarr.json` for any v3 node."""
    return json.loads((path / (".zarray" if zarr_format == 2 else "zarr.json")).read_text())


def _float_json(value: float) -> float | str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return float(value)


def fill_value_json(value: Any, dtype: str) -> Any:
    """A fill value as the Zarr specs spell it in JSON (v2 and v3 agree for the tables' dtypes)."""
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return bool(value)
    if dt.kind in "iu":
        return int(value)
    if dt.kind == "f":
        return _float_json(float(value))
    if dt.kind == "c":
        return [_float_json(complex(value).real), _float_json(complex(value).imag)]
    if dt.kind == "S":
        return base64.standard_b64encode(np.asarray(value, dtype=dt).tobytes()).decode()
    raise AssertionError(dtype)


# --- codecs -----------------------------------------------------------------

_SHUFFLE_NAMES = {numcodecs.Blosc.NOSHUFFLE: "noshuffle", numcodecs.Blosc.SHUFFLE: "shuffle", 2: "bitshuffle"}


@dataclass(frozen=True)
class CodecCase:
    """One compressor/filter configuration in its three spellings: numcodecs, v2 JSON, v3 JSON."""

    id: str
    compressor: numcodecs.abc.Codec | None
    filters: tuple[numcodecs.abc.Codec, ...] = ()
    #: engines that cannot write or read this configuration
    unsupported_by: frozenset[str] = field(default_factory=frozenset)

    def v2_compressor_json(self) -> dict | None:
        """The v2 `compressor` member."""
        if self.compressor is None:
            return None
        config = self.compressor.get_config()
        if config["id"] == "zstd" and not config.get("checksum"):
            # the spelling zarr-python writes; tensorstore rejects the extra `checksum` member
            config.pop("checksum", None)
        return config

    def v2_filters_json(self) -> list[dict] | None:
        """The v2 `filters` member."""
        return [f.get_config() for f in self.filters] or None

    def v3_filters_json(self) -> list[dict]:
        """The filters as v3 array-to-array codecs."""
        return [_v3_json(f) for f in self.filters]

    def v3_compressors_json(self) -> list[dict]:
        """The compressor as v3 bytes-to-bytes codecs (none or one)."""
        return [] if self.compressor is None else [_v3_json(self.compressor)]

    def v3_codecs_json(self, dtype: np.dtype) -> list[dict]:
        """The full v3 chain: filters, the `bytes` serializer, compressors."""
        endian = {"<": "little", ">": "big", "=": "little", "|": None}[np.dtype(dtype).byteorder]
        serializer = {"name": "bytes"} if endian is None else {"name": "bytes", "configuration": {"endian": endian}}
        return [*self.v3_filters_json(), serializer, *self.v3_compressors_json()]

    def summary(self) -> list[str]:
        """Engine-neutral names of the filters and compressor, e.g. ['delta', 'blosc:lz4:shuffle']."""
        return [_summarize(f.get_config()) for f in self.filters] + (
            [] if self.compressor is None else [_summarize(self.compressor.get_config())]
        )


def _v3_json(codec: numcodecs.abc.Codec) -> dict:
    config = codec.get_config()
    codec_id = config.pop("id")
    if codec_id == "blosc":
        config["shuffle"] = _SHUFFLE_NAMES[config["shuffle"]]
        config["typesize"] = 4  # the tables' codec cases all use 4-byte items
        return {"name": "blosc", "configuration": config}
    if codec_id == "zstd":
        return {"name": "zstd", "configuration": {"level": config["level"], "checksum": False}}
    if codec_id == "gzip":
        return {"name": "gzip", "configuration": {"level": config["level"]}}
    return {"name": f"numcodecs.{codec_id}", "configuration": config}


def _summarize(config: dict) -> str:
    """Name a codec from its v2 (`id`) or v3 (`name`) JSON, ignoring spelling differences."""
    if "id" in config:
        name, conf = config["id"], config
    else:
        name, conf = config["name"].removeprefix("numcodecs."), config.get("configuration", {})
    if name == "blosc":
        shuffle = conf["shuffle"]
        return f"blosc:{conf['cname']}:{_SHUFFLE_NAMES.get(shuffle, shuffle)}"
    if name in ("zstd", "gzip"):
        return f"{name}:{conf['level']}"
    return name


def summarize_v2(metadata: dict) -> list[str]:
    """Filter and compressor names from a parsed `.zarray` document."""
    filters = metadata.get("filters") or []
    compressor = metadata.get("compressor")
    return [_summarize(f) for f in filters] + ([] if compressor is None else [_summarize(compressor)])


def summarize_v3(metadata: dict) -> list[str]:
    """Filter and compressor names from a parsed v3 `zarr.json`, leaving out layout codecs."""
    return [_summarize(c) for c in metadata["codecs"] if c["name"] not in ("bytes", "transpose")]


def summarize_codecs(metadata: dict, zarr_format: int) -> list[str]:
    """Filter and compressor names from a parsed metadata document of either format."""
    return summarize_v2(metadata) if zarr_format == 2 else summarize_v3(metadata)


def codec_names(codecs: list[dict]) -> list[str]:
    """The names of a v3 codec chain, in order."""
    return [codec["name"] for codec in codecs]


_DELTA = numcodecs.Delta(dtype="<i4")
_LZ4 = numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE)

#: Codec configurations, all on `<i4` data (CODEC_DTYPE).
CODEC_CASES = [
    CodecCase("none", None),
    CodecCase("blosc-lz4-shuffle", _LZ4),
    CodecCase("blosc-lz4-noshuffle", numcodecs.Blosc(cname="lz4", clevel=1, shuffle=numcodecs.Blosc.NOSHUFFLE)),
    CodecCase("blosc-zstd-bitshuffle", numcodecs.Blosc(cname="zstd", clevel=7, shuffle=numcodecs.Blosc.BITSHUFFLE)),
    CodecCase("zstd", numcodecs.Zstd(level=3)),
    CodecCase("gzip", numcodecs.GZip(level=5)),
    # tensorstore supports no filters: neither v2 `filters` nor v3 `numcodecs.delta`.
    CodecCase("delta+blosc", _LZ4, (_DELTA,), unsupported_by=frozenset({"tensorstore"})),
    CodecCase("delta-only", None, (_DELTA,), unsupported_by=frozenset({"tensorstore"})),
]
CODEC_DTYPE = "<i4"

#: Whole v3 codec chains in their JSON form, as passed to `codecs=` (int32 data).
V3_CODEC_CHAINS = {
    "bytes-big-endian": [{"name": "bytes", "configuration": {"endian": "big"}}],
    "bytes+crc32c": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
    "transpose+bytes+zstd": [
        {"name": "transpose", "configuration": {"order": [1, 0]}},
        {"name": "bytes", "configuration": {"endian": "little"}},
        {"name": "zstd", "configuration": {"level": 1, "checksum": False}},
    ],
    "bytes+gzip+crc32c": [
        {"name": "bytes", "configuration": {"endian": "little"}},
        {"name": "gzip", "configuration": {"level": 1}},
        {"name": "crc32c"},
    ],
    "bytes-big+blosc-bitshuffle": [
        {"name": "bytes", "configuration": {"endian": "big"}},
        {
            "name": "blosc",
            "configuration": {"cname": "zstd", "clevel": 3, "shuffle": "bitshuffle", "typesize": 4, "blocksize": 0},
        },
    ],
}

# --- layouts: format x chunk key encoding, crossed with order ---------------


@dataclass(frozen=True)
class LayoutCase:
    """A chunk key layout: asyncarr's keyword arguments and the key chunk (1, 0, 1) lands at."""

    id: str
    zarr_format: int
    asyncarr_kwargs: dict
    #: v2: the `dimension_separator`; v3: the `chunk_key_encoding` JSON
    encoding: Any
    key_of_chunk_101: str


LAYOUT_CASES = [
    LayoutCase("v2-dot", 2, {"dimension_separator": "."}, ".", "1.0.1"),
    LayoutCase("v2-slash", 2, {"dimension_separator": "/"}, "/", "1/0/1"),
    LayoutCase("v3-default", 3, {}, {"name": "default", "configuration": {"separator": "/"}}, "c/1/0/1"),
    LayoutCase(
        "v3-default-dot-by-separator",
        3,
        {"dimension_separator": "."},
        {"name": "default", "configuration": {"separator": "."}},
        "c.1.0.1",
    ),
    LayoutCase(
        "v3-default-slash-by-encoding",
        3,
        {"chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}}},
        {"name": "default", "configuration": {"separator": "/"}},
        "c/1/0/1",
    ),
    LayoutCase(
        "v3-v2-dot",
        3,
        {"chunk_key_encoding": {"name": "v2", "configuration": {"separator": "."}}},
        {"name": "v2", "configuration": {"separator": "."}},
        "1.0.1",
    ),
    LayoutCase(
        "v3-v2-slash",
        3,
        {"chunk_key_encoding": {"name": "v2", "configuration": {"separator": "/"}}},
        {"name": "v2", "configuration": {"separator": "/"}},
        "1/0/1",
    ),
]
LAYOUT_DTYPE = "<u2"
ORDERS = ["C", "F"]


def transpose_json(ndim: int) -> dict:
    """The v3 codec that stores chunks in Fortran order."""
    return {"name": "transpose", "configuration": {"order": list(range(ndim))[::-1]}}


def case_id(case: CodecCase | LayoutCase) -> str:
    """The test id of a codec or layout case."""
    return case.id


#: Float dtypes for the NaN-fill tables.
FLOAT_DTYPES = ["f2", "f4", "f8"]


# --- asyncarr's half of each round trip ----------------------------------------
#
# A `write_*_with_asyncarr` helper writes one table case and returns the sample it wrote, for the
# other library's reads to be compared with; an `assert_asyncarr_*` helper reads the other
# library's writes back.


def write_sample_with_asyncarr(
    path: Path, dtype: str, shape: tuple[int, ...], region: Any = Ellipsis, **create_kwargs: Any
) -> np.ndarray:
    """Create an asyncarr array like `sample(dtype, shape)`, write `region` of the sample into it, return the sample."""
    data = sample(dtype, shape)
    array = za.open_array(str(path), mode="w", shape=shape, dtype=dtype, **create_kwargs)
    array[region] = data[region]
    return data


def write_partial_2d_with_asyncarr(path: Path, *, dtype: str, fill_value: Any, zarr_format: int) -> np.ndarray:
    """Write REGION_2D of a SHAPE_2D sample into a new CHUNKS_2D asyncarr array; return the sample."""
    return write_sample_with_asyncarr(
        path, dtype, SHAPE_2D, REGION_2D, chunks=CHUNKS_2D, fill_value=fill_value, zarr_format=zarr_format
    )


def write_partial_2d_with_async_api(path: Path, *, dtype: str, fill_value: Any, zarr_format: int) -> np.ndarray:
    """`write_partial_2d_with_asyncarr` through asyncarr's async API."""
    data = sample(dtype, SHAPE_2D)

    async def write() -> None:
        array = await asyncarr.open_array(
            str(path),
            mode="w",
            shape=SHAPE_2D,
            chunks=CHUNKS_2D,
            dtype=dtype,
            fill_value=fill_value,
            zarr_format=zarr_format,
        )
        await array.setitem(REGION_2D, data[REGION_2D])

    asyncio.run(write())
    return data


def write_codec_case_with_asyncarr(path: Path, case: CodecCase, zarr_format: int) -> np.ndarray:
    """Write all of a CODEC_DTYPE sample with `case`'s compressor and filters into a new asyncarr array."""
    codec_kwargs = {"compressor": case.compressor, "filters": list(case.filters) or None}
    return write_sample_with_asyncarr(
        path, CODEC_DTYPE, SHAPE_2D, chunks=CHUNKS_2D, zarr_format=zarr_format, **codec_kwargs
    )


def write_codec_chain_with_asyncarr(path: Path, chain: list[dict]) -> np.ndarray:
    """Write all of a CODEC_DTYPE sample through the v3 codec `chain` into a new asyncarr array."""
    return write_sample_with_asyncarr(path, CODEC_DTYPE, SHAPE_2D, chunks=CHUNKS_2D, codecs=chain, zarr_format=3)


def write_layout_case_with_asyncarr(path: Path, case: LayoutCase, order: str) -> np.ndarray:
    """Write all of a 3-d sample in `order` and `case`'s layout, and check chunk (1, 0, 1) is under its key."""
    layout_kwargs = {"order": order, "zarr_format": case.zarr_format, **case.asyncarr_kwargs}
    data = write_sample_with_asyncarr(path, LAYOUT_DTYPE, SHAPE_3D, chunks=CHUNKS_3D, **layout_kwargs)
    assert (path / case.key_of_chunk_101).is_file()
    return data


def assert_asyncarr_reads(path: Path, expected: np.ndarray) -> None:
    """asyncarr opens the array at `path` and reads `expected` from it like NumPy."""
    assert_reads_like_numpy(za.open_array(str(path), mode="r"), expected)


def assert_asyncarr_reads_partial_2d(
    path: Path, data: np.ndarray, fill_value: Any, *, zarr_format: int, dtype: str
) -> None:
    """asyncarr opens a SHAPE_2D/CHUNKS_2D array of `dtype` with only REGION_2D of `data` written, and reads it."""
    array = za.open_array(str(path), mode="r")
    assert array.zarr_format == zarr_format
    assert array.shape == SHAPE_2D
    assert array.chunks == CHUNKS_2D
    assert array.dtype == np.dtype(dtype)
    assert_same_fill_value(array.fill_value, fill_value, dtype)
    assert_reads_like_numpy(array, partially_written(data, fill_value, REGION_2D))


def assert_asyncarr_reads_nan_fill_2d(path: Path, data: np.ndarray) -> None:
    """asyncarr reads a NaN-filled array with only REGION_2D of `data` written like NumPy, NaN where unwritten."""
    array = za.open_array(str(path), mode="r")
    assert np.isnan(array.fill_value)
    assert_reads_like_numpy(array, partially_written(data, np.nan, REGION_2D))
    assert np.isnan(array[4:, :]).all()


def assert_asyncarr_reads_layout(path: Path, data: np.ndarray, order: str) -> None:
    """asyncarr opens a CHUNKS_3D array stored in `order` and reads `data` from it like NumPy."""
    array = za.open_array(str(path), mode="r")
    assert array.order == order
    assert array.chunks == CHUNKS_3D
    assert_reads_like_numpy(array, data)


def assert_async_api_reads_like_numpy(path: Path, expected: np.ndarray, zarr_format: int, wanted: list[Any]) -> None:
    """asyncarr's async API opens the array at `path` in `zarr_format` and reads each `wanted` selection like NumPy."""

    async def read_all() -> list[np.ndarray]:
        array = await asyncarr.open_array(str(path), mode="r")
        assert array.zarr_format == zarr_format
        return [await array.getitem(selection) for selection in wanted]

    for selection, result in zip(wanted, asyncio.run(read_all()), strict=True):
        np.testing.assert_array_equal(result, expected[selection], err_msg=f"selection {selection!r}")
