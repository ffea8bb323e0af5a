"""Data types and fill values: their JSON forms in Zarr v2 and v3 and the NumPy dtypes behind them.

v2 spells a data type as a NumPy typestr (``"<f8"``, ``"|S5"``) and keeps its byte order; v3 uses
names (``"float64"``) and extension objects (``{"name": "numpy.datetime64", ...}``) whose NumPy
dtype is native-endian, since in v3 the byte order on disk is the ``bytes`` codec's business.
Errors are `MetadataError`s that say what is wrong; callers add the document key.

Variable-length data, as zarr-python 3 keeps it in memory: UTF-8 strings are NumPy's
``StringDType()`` (`STRING_DTYPE`; elements are ``str``) and byte strings are ``object`` arrays
of ``bytes`` (`BYTES_DTYPE`). v3 names them ``"string"`` and ``"bytes"``. v2 writes both as
``"|O"`` and tells them apart by the object codec among the filters (``vlen-utf8`` or
``vlen-bytes``), so `parse_dtype` takes that codec's id for ``"|O"``. `normalize_dtype` maps
what users write (``str``, ``bytes``, ``"T"``) onto these two.
"""

from __future__ import annotations

import base64
import binascii
import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from asyncarr.errors import MetadataError
from asyncarr.metadata._json import short_repr

__all__ = [
    "BYTES_DTYPE",
    "DEFAULT_FILL_VALUE",
    "OBJECT_CODEC_IDS",
    "PYTHON_OBJECT_CODEC_IDS",
    "STRING_DTYPE",
    "coerce_fill_value",
    "default_fill_value",
    "dtype_for_object_codec",
    "dtype_to_json",
    "fill_value_to_json",
    "find_object_codec_id",
    "is_variable_length",
    "normalize_dtype",
    "object_codec_id",
    "parse_dtype",
    "parse_fill_value",
    "pop_fields",
    "python_object_fill_value",
    "select_fields",
]

_HAS_STRING_DTYPE = hasattr(np.dtypes, "StringDType")
STRING_DTYPE: np.dtype = np.dtypes.StringDType() if _HAS_STRING_DTYPE else np.dtype(object)
"""In-memory dtype of variable-length UTF-8 strings (v3 ``"string"``; v2 ``"|O"`` + ``vlen-utf8``)."""
BYTES_DTYPE: np.dtype = np.dtype(object)
"""In-memory dtype of variable-length byte strings (v3 ``"bytes"``; v2 ``"|O"`` + ``vlen-bytes``)."""
OBJECT_CODEC_IDS = ("vlen-utf8", "vlen-bytes", "vlen-array", "pickle", "json2", "msgpack2")
"""numcodecs ids of the codecs that serialize v2 object arrays (zarr-python's list)."""
PYTHON_OBJECT_CODEC_IDS = frozenset({"json2", "msgpack2", "vlen-array", "pickle"})
"""Object codecs of v2 ``"|O"`` arrays of arbitrary Python objects (lists, dicts, numbers, ndarrays),
whose fill value is any JSON scalar, kept as written (zarr-python 2 writes ``0``)."""
_DTYPE_OF_OBJECT_CODEC = {
    "vlen-utf8": STRING_DTYPE,
    "vlen-bytes": BYTES_DTYPE,
    **{codec_id: np.dtype(object) for codec_id in PYTHON_OBJECT_CODEC_IDS},
}

_V3_CORE_NAMES = {
    "bool": "bool",
    "int8": "i1",
    "int16": "i2",
    "int32": "i4",
    "int64": "i8",
    "uint8": "u1",
    "uint16": "u2",
    "uint32": "u4",
    "uint64": "u8",
    "float16": "f2",
    "float32": "f4",
    "float64": "f8",
    "complex64": "c8",
    "complex128": "c16",
}
_V3_NAME_OF_TYPESTR = {np.dtype(code).str[1:]: name for name, code in _V3_CORE_NAMES.items()}
_V3_TIME_NAMES = {"numpy.datetime64": "M8", "numpy.timedelta64": "m8"}
_V3_FIXED_LENGTH_NAMES = {"null_terminated_bytes": "S", "fixed_length_utf32": "U", "raw_bytes": "V"}
# "bytes" is the registered extension name; zarr-python 3.1 writes "variable_length_bytes".
_V3_STRING_NAMES = ("string", "variable_length_utf8")
_V3_BYTES_NAMES = ("bytes", "variable_length_bytes")
_TIME_UNITS = ("Y", "M", "W", "D", "h", "m", "s", "ms", "us", "ns", "ps", "fs", "as")
_SUPPORTED_KINDS = "biufcMmSUV"
_SPECIAL_FLOATS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
# The NaN each float width writes as "NaN" in v3; any other NaN bit pattern is written as hex.
_CANONICAL_NAN_BITS = {2: 0x7E00, 4: 0x7FC00000, 8: 0x7FF8000000000000}


def is_variable_length(dtype: Any) -> bool:
    """True for the variable-length string and bytes dtypes (`STRING_DTYPE`, `BYTES_DTYPE`)."""
    dtype = np.dtype(dtype)
    return dtype.kind == "O" or (_HAS_STRING_DTYPE and isinstance(dtype, np.dtypes.StringDType))


def _is_string(dtype: np.dtype) -> bool:
    return _HAS_STRING_DTYPE and isinstance(dtype, np.dtypes.StringDType)


def normalize_dtype(dtype: Any) -> np.dtype:
    """Return the in-memory dtype for a user's data type: ``str``, ``"U"`` (no length), ``"T"`` and
    ``StringDType()`` give `STRING_DTYPE`; ``bytes``, ``"S"`` (no length) and ``object`` give
    `BYTES_DTYPE`; everything else is ``np.dtype(dtype)``."""
    if dtype is str or dtype is np.str_:
        return _string_dtype()
    if dtype is bytes or dtype is np.bytes_ or dtype is object:
        return BYTES_DTYPE
    dtype = np.dtype(dtype)
    if dtype.kind == "U" and dtype.itemsize == 0:
        return _string_dtype()
    if dtype.kind == "S" and dtype.itemsize == 0:
        return BYTES_DTYPE
    if _is_string(dtype):
        if hasattr(dtype, "na_object"):
            raise MetadataError(f"data type {dtype}: StringDType with na_object cannot be stored in Zarr")
        return STRING_DTYPE
    return dtype


def _string_dtype() -> np.dtype:
    if not _HAS_STRING_DTYPE:
        raise MetadataError("variable-length strings need NumPy 2 (numpy.dtypes.StringDType)")
    return STRING_DTYPE


def object_codec_id(dtype: Any) -> str | None:
    """The numcodecs id of the codec that serializes `dtype` (``"vlen-utf8"``/``"vlen-bytes"``), or None."""
    dtype = normalize_dtype(dtype)
    if _is_string(dtype):
        return "vlen-utf8"
    if dtype.kind == "O":
        return "vlen-bytes"
    return None


def dtype_for_object_codec(codec_id: str) -> np.dtype:
    """The in-memory dtype of v2 ``"|O"`` arrays serialized by the object codec `codec_id`."""
    if codec_id == "vlen-utf8":
        return _string_dtype()
    if codec_id in _DTYPE_OF_OBJECT_CODEC:
        return _DTYPE_OF_OBJECT_CODEC[codec_id]
    raise MetadataError(
        f"object codec {codec_id!r} is not supported: asyncarr reads and writes object arrays with "
        f"the object codecs {sorted(_DTYPE_OF_OBJECT_CODEC)}"
    )


def find_object_codec_id(codecs: Iterable[Any]) -> str | None:
    """The id of the first object codec among v2 codec configs (filters, then compressor), or None."""
    for config in codecs:
        if isinstance(config, Mapping) and config.get("id") in OBJECT_CODEC_IDS:
            return config["id"]
    return None


def python_object_fill_value(value: Any) -> Any:
    """Return the fill value of an array of Python objects (a JSON scalar: None, bool, int, finite
    float or str, kept as is, as zarr-python 2 does); ValueError for anything else."""
    if isinstance(value, np.bool_ | np.integer | np.floating):
        value = value.item()
    for kind in (bool, int, str):  # bool before int: True is an int too
        if isinstance(value, kind):
            return kind(value)
    if value is None or (isinstance(value, float) and math.isfinite(value)):
        return value if value is None else float(value)
    raise ValueError(
        f"fill_value {short_repr(value)} is not valid for an array of Python objects: expected None, a bool, "
        "an int, a finite float or a str"
    )


_MAX_STRUCTURED_FIELDS = 1024
_MAX_STRUCTURED_NESTING = 8
_MAX_FIELD_ELEMENTS = 1 << 16
_MAX_FIELD_NAME = 256


def _check_structured(dtype: np.dtype, shown: Any, depth: int = 0) -> None:
    """Raise MetadataError unless `dtype` is a packed record of supported fields (numbers, bools,
    times, fixed-length strings and bytes, nested records, fixed-shape sub-arrays of these)."""
    if depth > _MAX_STRUCTURED_NESTING or len(dtype.names) > _MAX_STRUCTURED_FIELDS:
        raise MetadataError(f"data type {short_repr(shown)}: more fields or nesting than a structured type may have")
    offset = 0
    for name in dtype.names:
        field, field_offset = dtype.fields[name][:2]
        if not name or len(name) > _MAX_FIELD_NAME or field_offset != offset or len(dtype.fields[name]) > 2:
            raise MetadataError(
                f"data type {short_repr(shown)}: field {short_repr(name)}: fields need names of 1 to "
                f"{_MAX_FIELD_NAME} characters, no titles and no padding between them"
            )
        offset += field.itemsize
        base = field
        if field.subdtype is not None:
            base, shape = field.subdtype
            if math.prod(shape) > _MAX_FIELD_ELEMENTS or base.subdtype is not None:
                raise MetadataError(f"data type {short_repr(shown)}: field {name!r} has too large a sub-array")
        if base.fields is not None:
            _check_structured(base, shown, depth + 1)
        elif base.hasobject or is_variable_length(base):
            raise MetadataError(f"data type {short_repr(shown)}: field {name!r}: objects cannot be record fields")
        else:
            _check_supported(base, shown)
    if offset != dtype.itemsize or offset == 0:
        raise MetadataError(f"data type {short_repr(shown)}: a structured type must be packed and not empty")


def _check_supported(dtype: np.dtype, shown: Any) -> np.dtype:
    if is_variable_length(dtype):
        return normalize_dtype(dtype)
    if dtype.fields is not None:
        _check_structured(dtype, shown)
        return dtype
    if dtype.subdtype is not None:
        raise MetadataError(f"data type {shown!r}: sub-array data types are not supported")
    if dtype.kind not in _SUPPORTED_KINDS:
        raise MetadataError(f"data type {shown!r} is not supported")
    if dtype.kind in "Mm" and np.datetime_data(dtype)[0] == "generic":
        raise MetadataError(f"data type {shown!r}: datetime64/timedelta64 needs a unit such as [ns]")
    if dtype.kind == "V" and dtype.itemsize == 0:
        raise MetadataError(f"data type {shown!r}: fixed-length data types need a length of at least 1")
    return dtype


def parse_dtype(zarr_format: int, value: Any, object_codec_id: str | None = None) -> np.dtype:
    """Return the NumPy dtype that a metadata ``dtype`` (v2) or ``data_type`` (v3) value names.

    A v2 ``"|O"`` needs `object_codec_id`, the id of the array's object codec (`find_object_codec_id`).
    """
    if zarr_format == 2:
        return _parse_dtype_v2(value, object_codec_id)
    if zarr_format == 3:
        return _parse_dtype_v3(value)
    raise ValueError(f"zarr_format must be 2 or 3, got {zarr_format!r}")


def _v2_fields(value: Any, depth: int = 0) -> list[tuple[Any, ...]]:
    """NumPy's field list for zarr-python 2's structured ``dtype``: ``[name, type]`` or
    ``[name, type, shape]`` items, the type a typestr or such a list again."""
    if not isinstance(value, list) or not value or len(value) > _MAX_STRUCTURED_FIELDS:
        raise MetadataError(f"data type {short_repr(value)}: expected a list of [name, type] fields")
    if depth > _MAX_STRUCTURED_NESTING:
        raise MetadataError(f"data type {short_repr(value)}: structured types nest too deep")
    fields = []
    for item in value:
        if not isinstance(item, list) or len(item) not in (2, 3) or not isinstance(item[0], str):
            raise MetadataError(f"data type field {short_repr(item)}: expected [name, type] or [name, type, shape]")
        name, kind = item[0], item[1]
        if not name or len(name) > _MAX_FIELD_NAME:
            raise MetadataError(
                f"data type field {short_repr(item)}: fields need names of 1 to {_MAX_FIELD_NAME} characters"
            )
        if isinstance(kind, list):
            field: Any = np.dtype(_v2_fields(kind, depth + 1))
        elif isinstance(kind, str) and len(kind) <= 32:
            field = kind
        else:
            raise MetadataError(f"data type field {short_repr(item)}: the type must be a typestr or a list of fields")
        if len(item) == 3:
            shape = item[2]
            if not isinstance(shape, list) or not shape or not all(type(n) is int and n >= 1 for n in shape):
                raise MetadataError(f"data type field {short_repr(item)}: the shape must be a list of positive ints")
            if math.prod(shape) > _MAX_FIELD_ELEMENTS:
                raise MetadataError(f"data type field {short_repr(item)}: sub-array too large")
            fields.append((name, field, tuple(shape)))
        else:
            fields.append((name, field))
    return fields


def _parse_dtype_v2(value: Any, object_codec_id: str | None) -> np.dtype:
    if isinstance(value, list):
        try:
            dtype = np.dtype(_v2_fields(value))
        except (TypeError, ValueError) as exc:
            raise MetadataError(f"data type {short_repr(value)}: {exc}") from None
        return _check_supported(dtype, value)
    if not isinstance(value, str):
        raise MetadataError(f"data type must be a string such as '<f8', got {short_repr(value)}")
    try:
        dtype = np.dtype(value)
    except TypeError as exc:
        raise MetadataError(f"unknown data type {short_repr(value)}") from exc
    if dtype.kind == "O":
        if object_codec_id is None:
            raise MetadataError(
                f"data type {short_repr(value)} needs an object codec in 'filters' ('vlen-utf8' for strings, "
                "'vlen-bytes' for bytes, 'json2', 'msgpack2' or 'vlen-array' for other Python objects)"
            )
        return dtype_for_object_codec(object_codec_id)
    if dtype.kind in "SU" and dtype.itemsize == 0:
        raise MetadataError(f"data type {short_repr(value)}: fixed-length data types need a length of at least 1")
    return _check_supported(dtype, value)


def _parse_dtype_v3(value: Any) -> np.dtype:
    if isinstance(value, str):
        name, configuration = value, None
    elif isinstance(value, dict) and isinstance(value.get("name"), str):
        name, configuration = value["name"], value.get("configuration")
        if configuration is not None and not isinstance(configuration, dict):
            raise MetadataError(f"data type {short_repr(value)}: 'configuration' must be an object")
    else:
        raise MetadataError(
            f"data type must be a name or a {{'name', 'configuration'}} object, got {short_repr(value)}"
        )

    if name in _V3_CORE_NAMES:
        return np.dtype(_V3_CORE_NAMES[name])
    if name.startswith("r") and name[1:].isdigit():
        bits = int(name[1:])
        if bits == 0 or bits % 8:
            raise MetadataError(f"data type {name!r}: raw data types need a positive multiple of 8 bits")
        return np.dtype(f"V{bits // 8}")
    if name in _V3_STRING_NAMES:
        return _string_dtype()
    if name in _V3_BYTES_NAMES:
        return BYTES_DTYPE
    if name in ("structured", "struct"):
        return _parse_structured_v3(value, configuration)
    if name in _V3_TIME_NAMES:
        unit = (configuration or {}).get("unit")
        scale = (configuration or {}).get("scale_factor", 1)
        if unit not in _TIME_UNITS:
            raise MetadataError(f"data type {short_repr(value)}: 'unit' must be one of {', '.join(_TIME_UNITS)}")
        if isinstance(scale, bool) or not isinstance(scale, int) or not 1 <= scale < 2**31:
            raise MetadataError(f"data type {short_repr(value)}: 'scale_factor' must be a positive integer")
        return np.dtype(f"{_V3_TIME_NAMES[name]}[{scale}{unit}]")
    if name in _V3_FIXED_LENGTH_NAMES:
        length = (configuration or {}).get("length_bytes")
        if isinstance(length, bool) or not isinstance(length, int) or length < 1:
            raise MetadataError(f"data type {short_repr(value)}: 'length_bytes' must be a positive integer")
        kind = _V3_FIXED_LENGTH_NAMES[name]
        if kind == "U":
            if length % 4:
                raise MetadataError(f"data type {short_repr(value)}: 'length_bytes' must be a multiple of 4 for UTF-32")
            return np.dtype(f"<U{length // 4}")
        return np.dtype(f"{kind}{length}")
    raise MetadataError(f"unknown data type {name!r}")


def _parse_structured_v3(value: Any, configuration: Any) -> np.dtype:
    """zarr-python 3's ``{"name": "structured", "configuration": {"fields": [[name, data_type], ...]}}``;
    fields are stored little-endian (the ``bytes`` codec has no ``endian`` for records)."""
    fields = (configuration or {}).get("fields")
    if not isinstance(fields, list) or not fields or len(fields) > _MAX_STRUCTURED_FIELDS:
        raise MetadataError(f"data type {short_repr(value)}: 'fields' must be a list of [name, data_type] pairs")
    pairs = []
    for item in fields:
        if not isinstance(item, list) or len(item) != 2 or not isinstance(item[0], str):
            raise MetadataError(
                f"data type {short_repr(value)}: field {short_repr(item)} is not a [name, data_type] pair"
            )
        field = _parse_dtype_v3(item[1])
        if field.fields is not None or is_variable_length(field):
            raise MetadataError(f"data type {short_repr(value)}: field {item[0]!r} must be a fixed-size scalar type")
        pairs.append((item[0], field.newbyteorder("<") if field.byteorder not in "|" else field))
    try:
        dtype = np.dtype(pairs)
    except (TypeError, ValueError) as exc:
        raise MetadataError(f"data type {short_repr(value)}: {exc}") from None
    return _check_supported(dtype, value)


def _v2_descr(dtype: np.dtype) -> list[list[Any]]:
    """zarr-python 2's JSON of a record type: ``[name, typestr]``, ``[name, fields]``, ``[name, typestr, shape]``."""
    items: list[list[Any]] = []
    for name in dtype.names:
        field = dtype.fields[name][0]
        base, shape = field.subdtype if field.subdtype is not None else (field, ())
        kind: Any = _v2_descr(base) if base.fields is not None else base.str
        items.append([name, kind, list(shape)] if shape else [name, kind])
    return items


def dtype_to_json(zarr_format: int, dtype: Any) -> Any:
    """Return the JSON form of `dtype`: a v2 typestr, or a v3 name or extension object."""
    dtype = _check_supported(normalize_dtype(dtype), dtype)
    if zarr_format not in (2, 3):
        raise ValueError(f"zarr_format must be 2 or 3, got {zarr_format!r}")
    if is_variable_length(dtype):
        if zarr_format == 2:
            return "|O"
        return "string" if _is_string(dtype) else "bytes"
    if dtype.fields is not None:
        if zarr_format == 2:
            return _v2_descr(dtype)
        fields = []
        for name in dtype.names:
            field = dtype.fields[name][0]
            if field.fields is not None or field.subdtype is not None:
                raise MetadataError(
                    f"data type {dtype}: field {name!r}: Zarr v3 structured types hold scalar fields only "
                    "(zarr-python 3.1 writes no nested records or sub-arrays); use zarr_format=2"
                )
            if field.byteorder == ">":
                raise MetadataError(f"data type {dtype}: field {name!r}: v3 stores record fields little-endian")
            fields.append([name, dtype_to_json(3, field)])
        return {"name": "structured", "configuration": {"fields": fields}}
    if zarr_format == 2:
        return dtype.str
    typestr = dtype.str[1:]
    if typestr in _V3_NAME_OF_TYPESTR:
        return _V3_NAME_OF_TYPESTR[typestr]
    if dtype.kind in "Mm":
        unit, scale = np.datetime_data(dtype)
        name = "numpy.datetime64" if dtype.kind == "M" else "numpy.timedelta64"
        return {"name": name, "configuration": {"unit": unit, "scale_factor": int(scale)}}
    name = {"S": "null_terminated_bytes", "U": "fixed_length_utf32", "V": "raw_bytes"}[dtype.kind]
    return {"name": name, "configuration": {"length_bytes": dtype.itemsize}}


class DefaultFillValue:
    """The type of `DEFAULT_FILL_VALUE`, the ``fill_value`` of a creation call that was given none."""

    def __repr__(self) -> str:
        return "DEFAULT_FILL_VALUE"


DEFAULT_FILL_VALUE = DefaultFillValue()
"""``fill_value`` not given: the dtype's default, written explicitly in both formats.

Distinct from None, which zarr-python 3 writes as v2 ``null`` (its ``DefaultFillValue`` sentinel
draws the same line), and which v3, having no ``null``, writes as the dtype's default too.
"""


def default_fill_value(dtype: Any) -> Any:
    """Return the fill value written when none is given: zero, False, empty, or NaT (as zarr-python 3)."""
    dtype = normalize_dtype(dtype)
    if is_variable_length(dtype):
        return "" if _is_string(dtype) else b""
    if dtype.kind in "Mm":
        return np.array("NaT", dtype=dtype)[()]
    if dtype.kind == "V":
        return np.zeros((), dtype=dtype)[()]
    if dtype.kind == "S":
        return np.bytes_(b"")
    if dtype.kind == "U":
        return np.str_("")
    return dtype.type(0)


def coerce_fill_value(value: Any, dtype: Any) -> Any:
    """Return a user's fill value as a NumPy scalar of `dtype` (None stays None); ValueError if it does not fit."""
    if value is None:
        return None
    dtype = normalize_dtype(dtype)
    if is_variable_length(dtype):
        return _coerce_variable_length(value, dtype)
    kind = dtype.kind
    if isinstance(value, np.generic) and value.dtype == dtype:
        return value
    given = value
    if kind in "fc" and isinstance(value, str) and value in _SPECIAL_FLOATS:
        value = _SPECIAL_FLOATS[value]  # the JSON spellings are accepted from users too
    problem = None
    if kind == "b" and not (
        isinstance(value, bool | np.bool_) or (isinstance(value, numbers.Integral) and value in (0, 1))
    ):
        problem = "expected True or False"
    elif kind in "iu" and isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral):
        if not float(value).is_integer():
            problem = "expected an integer"
    elif kind in "iufc" and isinstance(value, str | bytes):
        problem = "expected a number"
    elif kind == "S" and isinstance(value, str):
        try:
            value = value.encode("ascii")
        except UnicodeEncodeError:
            problem = "expected bytes or an ASCII string"
    elif kind == "V" and isinstance(value, bytes | np.bytes_) and len(value) > dtype.itemsize:
        problem = f"longer than {dtype.itemsize} bytes"
    if kind in "SU" and isinstance(value, str | bytes) and len(value) > dtype.itemsize // (4 if kind == "U" else 1):
        problem = "longer than the data type allows"
    if problem is None:
        try:
            array = np.array(value, dtype=dtype)
        except (TypeError, ValueError, OverflowError) as exc:
            problem = str(exc)
        else:
            if array.ndim == 0:
                return array[()]
            problem = "expected a scalar"
    raise ValueError(f"fill_value {given!r} is not valid for data type {dtype}: {problem}")


def _coerce_variable_length(value: Any, dtype: np.dtype) -> str | bytes:
    if _is_string(dtype):
        if isinstance(value, str):
            return str(value)
        if isinstance(value, bytes):
            try:
                return value.decode("utf-8")
            except UnicodeDecodeError:
                pass
        elif isinstance(value, numbers.Number) and not isinstance(value, bool | np.bool_):
            return str(value)  # zarr-python 2 wrote numbers (0) as fill values of string arrays
        raise ValueError(f"fill_value {short_repr(value)} is not valid for variable-length strings: expected a str")
    if isinstance(value, bytes):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    raise ValueError(f"fill_value {short_repr(value)} is not valid for variable-length bytes: expected bytes")


def _is_unicode(text: str) -> bool:
    """False for text holding lone surrogates (JSON's "\\ud800"), which NumPy strings cannot hold."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _bad_fill(json_value: Any, dtype: np.dtype, expected: str) -> MetadataError:
    shown = short_repr(json_value)
    return MetadataError(f"'fill_value' {shown} is not valid for data type {dtype}: expected {expected}")


def _float_from_json(zarr_format: int, json_value: Any, dtype: np.dtype, item: Any) -> float | np.floating:
    """Decode one float (or one half of a complex) of `dtype`'s float width."""
    width = dtype.itemsize // (2 if dtype.kind == "c" else 1)
    if isinstance(item, int | float) and not isinstance(item, bool):
        try:
            return float(item)
        except OverflowError:  # an integer beyond every float: infinite, as JSON's 1e400 reads
            return math.inf if item > 0 else -math.inf
    if isinstance(item, str):
        if item in _SPECIAL_FLOATS:
            return _SPECIAL_FLOATS[item]
        if item.startswith("0x") and zarr_format == 3:
            digits = item[2:]
            if len(digits) != 2 * width:
                raise _bad_fill(json_value, dtype, f"a hex bit pattern of {2 * width} digits")
            try:
                bits = int(digits, 16)
            except ValueError:
                raise _bad_fill(json_value, dtype, "a hex bit pattern such as '0x7fc00000'") from None
            return np.array(bits, dtype=f"u{width}").view(f"f{width}")[()]
        try:
            return float(item)
        except ValueError:
            pass
    raise _bad_fill(json_value, dtype, 'a number, "NaN", "Infinity" or "-Infinity"')


def _decode_base64(json_value: Any, dtype: np.dtype) -> bytes:
    if not isinstance(json_value, str):
        raise _bad_fill(json_value, dtype, "a base64 string")
    try:
        return base64.b64decode(json_value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise _bad_fill(json_value, dtype, "a base64 string") from None


def _bytes_from_byte_values(json_value: list[Any], dtype: np.dtype) -> bytes:
    if not all(isinstance(b, int) and not isinstance(b, bool) and 0 <= b < 256 for b in json_value):
        raise _bad_fill(json_value, dtype, "a list of byte values 0-255")
    return bytes(json_value)


def parse_fill_value(zarr_format: int, json_value: Any, dtype: Any) -> Any:
    """Decode a metadata ``fill_value`` into a NumPy scalar of `dtype` (None only for v2's null);
    variable-length strings and bytes give ``str`` and ``bytes``."""
    dtype = normalize_dtype(dtype)
    kind = dtype.kind
    if json_value is None:
        if zarr_format == 2:
            return None
        raise MetadataError(f"'fill_value' must not be null in Zarr v3 (data type {dtype})")
    if _is_string(dtype):
        # zarr-python 3 reads the numbers zarr-python 2 wrote (0) as their text, and so do we.
        if isinstance(json_value, str | int | float) and not isinstance(json_value, bool):
            text = str(json_value)
            if not _is_unicode(text):
                raise _bad_fill(json_value, dtype, "a string of Unicode characters (not lone surrogates)")
            return text
        raise _bad_fill(json_value, dtype, "a string")
    if kind == "O":
        if zarr_format == 3 and isinstance(json_value, list):
            # zarr-python 3.0 wrote the v3 "bytes" fill value as its byte values; 3.1 writes base64.
            return _bytes_from_byte_values(json_value, dtype)
        return _decode_base64(json_value, dtype)
    if kind == "b":
        if isinstance(json_value, bool) or (isinstance(json_value, int) and json_value in (0, 1)):
            return np.bool_(bool(json_value))
        raise _bad_fill(json_value, dtype, "true or false")
    if kind in "iu":
        number = json_value
        if isinstance(number, float) and number.is_integer():
            number = int(number)
        elif isinstance(number, str):
            try:
                number = int(number)
            except ValueError:
                raise _bad_fill(json_value, dtype, "an integer") from None
        if isinstance(number, bool) or not isinstance(number, int):
            raise _bad_fill(json_value, dtype, "an integer")
        info = np.iinfo(dtype)
        if not info.min <= number <= info.max:
            raise _bad_fill(json_value, dtype, f"an integer in [{info.min}, {info.max}]")
        return dtype.type(number)
    if kind == "f":
        with np.errstate(over="ignore"):  # too large for a narrow float: infinite, as zarr-python reads it
            return np.array(_float_from_json(zarr_format, json_value, dtype, json_value), dtype=dtype)[()]
    if kind == "c":
        if not isinstance(json_value, list) or len(json_value) != 2:
            raise _bad_fill(json_value, dtype, "a [real, imaginary] pair")
        real, imag = (_float_from_json(zarr_format, json_value, dtype, part) for part in json_value)
        result = np.zeros((), dtype=dtype)
        with np.errstate(over="ignore"):
            result.real, result.imag = real, imag
        return result[()]
    if kind in "Mm":
        if json_value == "NaT":
            return np.array("NaT", dtype=dtype)[()]
        if isinstance(json_value, bool) or not isinstance(json_value, int) or not -(2**63) <= json_value < 2**63:
            raise _bad_fill(json_value, dtype, "a 64-bit integer count of time units")
        return np.array(json_value, dtype="i8").view(dtype.newbyteorder("="))[()]
    if kind == "U":
        if not isinstance(json_value, str):
            raise _bad_fill(json_value, dtype, "a string")
        if len(json_value) > dtype.itemsize // 4:
            raise _bad_fill(json_value, dtype, f"at most {dtype.itemsize // 4} characters")
        return np.str_(json_value)
    if kind == "V" and isinstance(json_value, list):
        # The v3 core r<N> types spell their fill value as a list of byte values.
        raw = _bytes_from_byte_values(json_value, dtype)
    else:
        raw = _decode_base64(json_value, dtype)
    if len(raw) > dtype.itemsize:
        raise _bad_fill(json_value, dtype, f"at most {dtype.itemsize} bytes")
    if kind == "S":
        return np.bytes_(raw)
    if dtype.fields is not None:  # a record's bytes, as zarr-python 2 and 3 write them
        return np.frombuffer(raw.ljust(dtype.itemsize, b"\0"), dtype=dtype).copy()[0]
    return np.array(raw.ljust(dtype.itemsize, b"\0"), dtype=dtype)[()]


def _float_to_json(zarr_format: int, value: Any) -> float | str:
    if math.isnan(value):
        width = value.dtype.itemsize
        bits = int(np.array(value).view(f"u{width}"))
        if zarr_format == 3 and bits != _CANONICAL_NAN_BITS[width]:
            return f"0x{bits:0{2 * width}x}"
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    # str() of a NumPy float is the shortest text that reads back to the same bits.
    return float(str(value))


def fill_value_to_json(zarr_format: int, value: Any, dtype: Any) -> Any:
    """Encode a fill value as the JSON the spec prescribes; never a bare NaN."""
    dtype = normalize_dtype(dtype)
    value = coerce_fill_value(value, dtype)
    if value is None:
        if zarr_format == 2:
            return None
        raise ValueError("fill_value must not be None in Zarr v3")
    if is_variable_length(dtype):
        return value if isinstance(value, str) else base64.b64encode(value).decode("ascii")
    kind = dtype.kind
    if kind == "b":
        return bool(value)
    if kind in "iu":
        return int(value)
    if kind == "f":
        return _float_to_json(zarr_format, value)
    if kind == "c":
        return [_float_to_json(zarr_format, value.real), _float_to_json(zarr_format, value.imag)]
    if kind in "Mm":
        return int(np.array(value, dtype=dtype.newbyteorder("=")).view("i8"))
    if kind == "U":
        return str(value)
    raw = bytes(value) if kind == "S" else np.array(value, dtype=dtype).tobytes()
    return base64.b64encode(raw).decode("ascii")


def pop_fields(selection: Any) -> tuple[str | list[str] | None, Any]:
    """Split a selection into its record field names and the rest, as zarr-python 2 does:
    ``"x"`` → ``("x", ())``; ``("x", 1:3)`` → ``("x", 1:3)``; ``(0, "x", "y")`` → ``(["x", "y"], 0)``."""
    if isinstance(selection, str):
        return selection, ()
    if not isinstance(selection, tuple):
        return None, selection
    names = [part for part in selection if isinstance(part, str)]
    if not names:
        return None, selection
    rest = tuple(part for part in selection if not isinstance(part, str))
    return (names[0] if len(names) == 1 else names), (rest[0] if len(rest) == 1 else rest)


def select_fields(array: np.ndarray, fields: str | Sequence[str] | None) -> np.ndarray:
    """The named field (its own dtype) or fields (a packed record of them) of a structured `array`;
    IndexError naming a field it does not have, as zarr-python 2 raises."""
    if fields is None:
        return array
    names = array.dtype.names or ()
    wanted = [fields] if isinstance(fields, str) else list(fields)
    for name in wanted:
        if not isinstance(name, str) or name not in names:
            raise IndexError(f"fields: the array's data type {array.dtype} has no field {name!r}")
    if isinstance(fields, str):
        return array[fields].copy()
    return np.array(array[wanted], dtype=np.dtype([(name, array.dtype.fields[name][0]) for name in wanted]))
