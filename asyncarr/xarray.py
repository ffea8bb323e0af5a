"""The xarray backend (``engine="asyncarr"``) and `to_zarr` for datasets.

Reading follows xarray's own zarr engine: dimension names from ``_ARRAY_DIMENSIONS`` (v2)
or ``dimension_names`` (v3), the Zarr ``fill_value`` as the mask in v2 and kept in the
encoding in v3, CF decoding left to xarray (`StoreBackendEntrypoint`). Variables are lazy:
opening reads metadata only, and indexing reads only the chunks a selection touches, through
`AsyncarrBackendArray` and the blocking facade (`asyncarr.sync`), which is thread-safe, so dask
worker threads may read at once. Writing CF-encodes with xarray's own encoders and writes dask
variables chunk by chunk with `dask.array.store`.
"""

from __future__ import annotations

import base64
import os
import struct
from collections.abc import Hashable, Iterable, Mapping
from typing import Any

import numpy as np
import xarray as xr
from xarray import coding, conventions
from xarray.backends import AbstractDataStore, BackendArray, BackendEntrypoint
from xarray.backends.common import ensure_dtype_not_object
from xarray.backends.store import StoreBackendEntrypoint
from xarray.core import indexing

import asyncarr.sync as za
from asyncarr import config
from asyncarr.dask import blocks_align
from asyncarr.errors import ContainsArrayError, ContainsGroupError, NodeNotFoundError
from asyncarr.stores import Store

__all__ = ["AsyncarrBackendArray", "AsyncarrBackendEntrypoint", "AsyncarrDataStore", "to_zarr"]

DIMENSION_KEY = "_ARRAY_DIMENSIONS"
"""The v2 attribute holding an array's dimension names (xarray's convention)."""

# v3 codecs that turn an array into bytes: what comes before one is a filter, after one a compressor.
_ARRAY_TO_BYTES_CODECS = {"bytes", "vlen-utf8", "vlen-bytes", "sharding_indexed"}
# Encoding keys of a variable that describe where it came from, not how to write it.
_SOURCE_ENCODINGS = {"source", "original_shape", "preferred_chunks"}
_WRITE_ENCODINGS = {
    "chunks",
    "shards",
    "compressors",
    "filters",
    "serializer",
    "fill_value",
    "write_empty_chunks",
    "chunk_key_encoding",
    "cache_metadata",
}


# -- reading ---------------------------------------------------------------------------------------


class AsyncarrBackendArray(BackendArray):
    """A lazily indexed asyncarr array: each indexing call reads only the chunks it touches."""

    __slots__ = ("_array", "dtype", "shape")

    def __init__(self, array: za.Array) -> None:
        self._array = array
        self.shape = tuple(array.shape)
        self.dtype = _variable_length_dtype(array) or array.dtype

    def get_array(self) -> za.Array:
        """The asyncarr array behind this variable."""
        return self._array

    def __getitem__(self, key: indexing.ExplicitIndexer) -> Any:
        if isinstance(key, indexing.BasicIndexer):
            support, read = indexing.IndexingSupport.BASIC, self._array.__getitem__
        elif _is_pointwise(key):
            support, read = indexing.IndexingSupport.VECTORIZED, self._vindex
        else:
            # Outer keys, and vectorized keys mixing slices with arrays: read the outer product of
            # the arrays, and let xarray pick the points from it in memory.
            support, read = indexing.IndexingSupport.OUTER, self._oindex
        return indexing.explicit_indexing_adapter(key, self.shape, support, read)

    async def async_getitem(self, key: indexing.ExplicitIndexer) -> Any:
        """`__getitem__` on the caller's event loop (``Dataset.load_async``), with asyncarr's async API."""
        if isinstance(key, indexing.BasicIndexer):
            support, read = indexing.IndexingSupport.BASIC, self._array.async_array.getitem
        elif _is_pointwise(key):
            support, read = indexing.IndexingSupport.VECTORIZED, self._array.async_array.get_coordinate_selection
        else:
            support, read = indexing.IndexingSupport.OUTER, self._async_oindex
        return await indexing.async_explicit_indexing_adapter(key, self.shape, support, read)

    def _oindex(self, key: tuple[Any, ...]) -> np.ndarray:
        if _is_basic(key):
            return self._array[key]
        return self._array.oindex[key]

    async def _async_oindex(self, key: tuple[Any, ...]) -> np.ndarray:
        if _is_basic(key):
            return await self._array.async_array.getitem(key)
        return await self._array.async_array.get_orthogonal_selection(key)

    def _vindex(self, key: tuple[Any, ...]) -> np.ndarray:
        return self._array.vindex[key]


def _variable_length_dtype(array: za.Array) -> np.dtype | None:
    """xarray's object dtype tagged with ``str`` or ``bytes`` for variable-length strings, else None."""
    if array.dtype != object:
        return None
    if array.zarr_format == 2:
        names = [codec.codec_id for codec in array.filters or ()]
    else:
        names = [(_v3_codec_encoding(array.metadata.codecs)["serializer"] or {}).get("name")]
    if "vlen-utf8" in names:
        return coding.strings.create_vlen_dtype(str)
    if "vlen-bytes" in names:
        return coding.strings.create_vlen_dtype(bytes)
    return None


def _is_basic(key: tuple[Any, ...]) -> bool:
    return all(isinstance(k, slice | int | np.integer) for k in key)


def _is_pointwise(key: indexing.ExplicitIndexer) -> bool:
    """A vectorized key of integer arrays only: asyncarr's coordinate selection reads just those points."""
    return isinstance(key, indexing.VectorizedIndexer) and all(isinstance(k, np.ndarray) for k in key.tuple)


def _dimensions_and_attributes(array: za.Array, name: str) -> tuple[tuple[str, ...], dict[str, Any]]:
    """An array's dimension names and its attributes without the dimension bookkeeping."""
    attributes = array.attrs.asdict()
    if array.zarr_format == 3:
        dimensions = tuple(array.metadata.dimension_names or ())
        if len(dimensions) != array.ndim:
            raise KeyError(
                f"{name}: the Zarr array has no `dimension_names` metadata, which xarray needs "
                "to know the variable's dimensions."
            )
        return dimensions, attributes
    if DIMENSION_KEY not in attributes:
        raise KeyError(
            f"{name}: the Zarr array has no `{DIMENSION_KEY}` attribute, which xarray needs "
            "to know the variable's dimensions."
        )
    dimensions = tuple(attributes.pop(DIMENSION_KEY))
    return dimensions, {k: v for k, v in attributes.items() if not k.lower().startswith("_nc")}


def _decode_fill_value_attribute(value: Any, dtype: np.dtype) -> Any:
    """A v3 ``_FillValue`` attribute as xarray writes it (floats as base64 of a little-endian double)."""
    if dtype.kind == "f":
        return struct.unpack("<d", base64.standard_b64decode(value))[0]
    if dtype.kind == "c":
        real, imag = (struct.unpack("<d", base64.standard_b64decode(part))[0] for part in value)
        return complex(real, imag)
    if dtype.kind == "S":
        return base64.standard_b64decode(value)
    if dtype.kind == "b":
        return bool(value)
    if dtype.kind in "iu":
        return int(value)
    return value


def _encode_fill_value_attribute(value: Any, dtype: np.dtype) -> Any:
    """The JSON form of a v3 ``_FillValue`` attribute, the inverse of `_decode_fill_value_attribute`."""
    if dtype.kind == "f":
        return base64.standard_b64encode(struct.pack("<d", float(value))).decode()
    if dtype.kind == "c":
        return [base64.standard_b64encode(struct.pack("<d", float(part))).decode() for part in (value.real, value.imag)]
    if dtype.kind == "S":
        return base64.standard_b64encode(bytes(value)).decode()
    if dtype.kind == "b":
        return bool(value)
    if dtype.kind in "iu":
        return int(value)
    return str(value)


def _v3_codec_encoding(codecs: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Split a v3 codec chain (the inner chain of a sharded array) into filters, serializer, compressors."""
    chain = [dict(codec) for codec in codecs]
    if len(chain) == 1 and chain[0].get("name") == "sharding_indexed":
        chain = [dict(codec) for codec in chain[0].get("configuration", {}).get("codecs", [])]
    position = next((i for i, codec in enumerate(chain) if codec.get("name") in _ARRAY_TO_BYTES_CODECS), None)
    if position is None:
        return {"filters": (), "serializer": None, "compressors": tuple(chain)}
    return {
        "filters": tuple(chain[:position]),
        "serializer": chain[position],
        "compressors": tuple(chain[position + 1 :]),
    }


class AsyncarrDataStore(AbstractDataStore):
    """One Zarr group seen by xarray: its arrays as lazy variables, its attributes."""

    __slots__ = ("_use_fill_value_as_mask", "group")

    def __init__(self, group: za.Group, use_zarr_fill_value_as_mask: bool | None = None) -> None:
        self.group = group
        if use_zarr_fill_value_as_mask is None:
            use_zarr_fill_value_as_mask = group.zarr_format == 2  # xarray's default for each format
        self._use_fill_value_as_mask = use_zarr_fill_value_as_mask

    @classmethod
    def open(
        cls,
        filename_or_obj: str | os.PathLike[str] | Store | Any,
        *,
        group: str | None = None,
        consolidated: bool | None = None,
        zarr_format: int | None = None,
        storage_options: Mapping[str, Any] | None = None,
        use_zarr_fill_value_as_mask: bool | None = None,
    ) -> AsyncarrDataStore:
        """Open the group at ``group`` in a path, URL or asyncarr Store, read-only.

        ``consolidated``: None uses consolidated metadata where there is some, True requires it
        (FileNotFoundError if missing, as xarray's zarr engine), False reads every member's own."""
        try:
            opened = za.open_group(
                _normalize_store(filename_or_obj),
                mode="r",
                path=(group or "").strip("/") or None,
                zarr_format=zarr_format,
                storage_options=dict(storage_options or {}),
                use_consolidated=consolidated,
            )
        except ValueError as exc:
            if consolidated and "no consolidated metadata" in str(exc):
                raise FileNotFoundError(f"consolidated=True, but {exc}") from exc
            raise
        return cls(opened, use_zarr_fill_value_as_mask)

    def children(self) -> list[tuple[str, AsyncarrDataStore]]:
        """``(name, data store)`` of each child group, sorted by name."""
        return [(name, type(self)(child, self._use_fill_value_as_mask)) for name, child in self.group.groups()]

    def _variable(self, name: str, array: za.Array) -> xr.Variable:
        dimensions, attributes = _dimensions_and_attributes(array, name)
        data = indexing.LazilyIndexedArray(AsyncarrBackendArray(array))
        chunks = tuple(array.chunks)
        shards = tuple(array.shards) if array.shards else None
        encoding: dict[str, Any] = {
            "chunks": chunks,
            # dask chunks follow what one request reads: a whole shard where the array is sharded.
            "preferred_chunks": dict(zip(dimensions, shards or chunks, strict=True)),
        }
        if array.zarr_format == 2:
            encoding["compressors"] = (array.compressor,) if array.compressor is not None else ()
            encoding["filters"] = tuple(array.filters or ())
            encoding["shards"] = None
        else:
            encoding.update(_v3_codec_encoding(array.metadata.codecs))
            encoding["shards"] = shards
        if self._use_fill_value_as_mask:
            if array.fill_value is not None:
                attributes["_FillValue"] = array.fill_value
        else:
            if array.zarr_format == 3:
                encoding["fill_value"] = array.fill_value
            if "_FillValue" in attributes:
                attributes["_FillValue"] = _decode_fill_value_attribute(attributes["_FillValue"], array.dtype)
        return xr.Variable(dimensions, data, attributes, encoding)

    def get_variables(self) -> dict[str, xr.Variable]:
        """Every child array as a lazy, not yet CF-decoded variable."""
        return {name: self._variable(name, array) for name, array in self.group.arrays()}

    def get_attrs(self) -> dict[str, Any]:
        """The group's attributes (NCZarr's bookkeeping left out)."""
        return {k: v for k, v in self.group.attrs.asdict().items() if not k.lower().startswith("_nc")}

    def get_dimensions(self) -> dict[str, int]:
        """Every dimension's length; ValueError where two arrays disagree."""
        lengths: dict[str, int] = {}
        for name, array in self.group.arrays():
            dimensions, _ = _dimensions_and_attributes(array, name)
            for dimension, length in zip(dimensions, array.shape, strict=True):
                if lengths.setdefault(dimension, length) != length:
                    raise ValueError(f"conflicting lengths for dimension {dimension}: {length} != {lengths[dimension]}")
        return lengths

    def close(self) -> None:
        """Nothing to release: the facade closes the stores it opened at exit."""


def _normalize_store(filename_or_obj: Any) -> Any:
    if isinstance(filename_or_obj, os.PathLike):
        return os.fspath(filename_or_obj)
    return filename_or_obj


def _open_group_datasets(
    filename_or_obj: Any,
    *,
    group: str | None,
    consolidated: bool | None,
    zarr_format: int | None,
    storage_options: Mapping[str, Any] | None,
    use_zarr_fill_value_as_mask: bool | None,
    decoders: dict[str, Any],
) -> dict[str, xr.Dataset]:
    """``{"/": root dataset, "/child": ...}`` for the group at ``group`` and every group below it."""
    root = AsyncarrDataStore.open(
        filename_or_obj,
        group=group,
        consolidated=consolidated,
        zarr_format=zarr_format,
        storage_options=storage_options,
        use_zarr_fill_value_as_mask=use_zarr_fill_value_as_mask,
    )
    datasets: dict[str, xr.Dataset] = {}

    def walk(store: AsyncarrDataStore, path: str) -> None:
        datasets[path] = StoreBackendEntrypoint().open_dataset(store, **decoders)
        for name, child in store.children():
            walk(child, f"{path.rstrip('/')}/{name}")

    walk(root, "/")
    return datasets


class AsyncarrBackendEntrypoint(BackendEntrypoint):
    """``xr.open_dataset(url, engine="asyncarr")``: Zarr v2 and v3 read by asyncarr, lazily."""

    description = "Open Zarr v2/v3 stores (local, S3, GCS, Azure, HTTP) with asyncarr"
    supports_groups = True
    open_dataset_parameters = (
        "filename_or_obj",
        "mask_and_scale",
        "decode_times",
        "concat_characters",
        "decode_coords",
        "drop_variables",
        "use_cftime",
        "decode_timedelta",
        "group",
        "consolidated",
        "zarr_format",
        "storage_options",
        "use_zarr_fill_value_as_mask",
    )

    def guess_can_open(self, filename_or_obj: Any) -> bool:
        """Claim asyncarr Stores only: paths ending in .zarr belong to xarray's own zarr engine."""
        return isinstance(filename_or_obj, Store)

    def open_dataset(  # type: ignore[override]
        self,
        filename_or_obj: Any,
        *,
        mask_and_scale: bool = True,
        decode_times: bool = True,
        concat_characters: bool = True,
        decode_coords: bool | str = True,
        drop_variables: str | Iterable[str] | None = None,
        use_cftime: bool | None = None,
        decode_timedelta: bool | None = None,
        group: str | None = None,
        consolidated: bool | None = None,
        zarr_format: int | None = None,
        storage_options: Mapping[str, Any] | None = None,
        use_zarr_fill_value_as_mask: bool | None = None,
    ) -> xr.Dataset:
        """The group at ``group`` as a Dataset of lazy variables, CF-decoded by xarray."""
        store = AsyncarrDataStore.open(
            filename_or_obj,
            group=group,
            consolidated=consolidated,
            zarr_format=zarr_format,
            storage_options=storage_options,
            use_zarr_fill_value_as_mask=use_zarr_fill_value_as_mask,
        )
        return StoreBackendEntrypoint().open_dataset(
            store,
            mask_and_scale=mask_and_scale,
            decode_times=decode_times,
            concat_characters=concat_characters,
            decode_coords=decode_coords,
            drop_variables=drop_variables,
            use_cftime=use_cftime,
            decode_timedelta=decode_timedelta,
        )

    def open_groups_as_dict(  # type: ignore[override]
        self,
        filename_or_obj: Any,
        *,
        group: str | None = None,
        consolidated: bool | None = None,
        zarr_format: int | None = None,
        storage_options: Mapping[str, Any] | None = None,
        use_zarr_fill_value_as_mask: bool | None = None,
        **decoders: Any,
    ) -> dict[str, xr.Dataset]:
        """``{"/": ..., "/a": ..., "/a/b": ...}``: the group at ``group`` and every group below it."""
        return _open_group_datasets(
            filename_or_obj,
            group=group,
            consolidated=consolidated,
            zarr_format=zarr_format,
            storage_options=storage_options,
            use_zarr_fill_value_as_mask=use_zarr_fill_value_as_mask,
            decoders=decoders,
        )

    def open_datatree(  # type: ignore[override]
        self, filename_or_obj: Any, **kwargs: Any
    ) -> xr.DataTree:
        """The group at ``group`` and everything below it as a DataTree of lazy variables."""
        datasets = self.open_groups_as_dict(filename_or_obj, **kwargs)
        return xr.DataTree.from_dict(datasets)


# -- writing ---------------------------------------------------------------------------------------


def _encode_attribute(value: Any) -> Any:
    """An attribute value as JSON can hold it: arrays as lists, NumPy scalars as Python ones."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def _encode_variable(variable: xr.Variable, name: Hashable) -> xr.Variable:
    """CF-encode one variable with xarray's own coders, as xarray's zarr engine does."""
    variable = conventions.encode_cf_variable(variable, name=name, coders=conventions.ZARR_CODERS)
    variable = ensure_dtype_not_object(variable, name=name)
    variable = coding.strings.EncodedStringCoder(allows_unicode=True).encode(variable, name=name)
    return coding.strings.ensure_fixed_length_bytes(variable)


def _is_numcodecs(codec: Any) -> bool:
    return hasattr(codec, "codec_id") and hasattr(codec, "get_config")


def _codec_json(codec: Any) -> dict[str, Any] | None:
    """A v3 codec's JSON (from a dict or a zarr-python codec object), or None for anything else."""
    if isinstance(codec, Mapping):
        return dict(codec)
    if hasattr(codec, "to_dict") and not _is_numcodecs(codec):
        return dict(codec.to_dict())
    return None


def _codec_arguments(encoding: Mapping[str, Any], zarr_format: int, dtype: np.dtype) -> dict[str, Any]:
    """asyncarr creation arguments for the codecs an encoding names; codecs the format cannot hold are dropped."""
    compressors = encoding.get("compressors")
    filters = encoding.get("filters")
    serializer = encoding.get("serializer")
    if compressors is not None and not isinstance(compressors, list | tuple):
        compressors = (compressors,)
    arguments: dict[str, Any] = {}
    numcodecs_only = all(_is_numcodecs(c) for c in [*(compressors or ()), *(filters or ())])
    if numcodecs_only and serializer is None:
        if compressors is not None:
            if len(compressors) > 1:
                raise ValueError(f"one numcodecs compressor at most, got {list(compressors)}")
            arguments["compressor"] = compressors[0] if compressors else None
        if filters:
            arguments["filters"] = list(filters)
        return arguments
    if zarr_format != 3 or encoding.get("shards"):
        return arguments  # v3 codec JSON has no v2 spelling; a sharded chain keeps asyncarr's default
    chain_filters = [_codec_json(c) for c in filters or ()]
    chain_compressors = [_codec_json(c) for c in compressors or ()]
    chain_serializer = _codec_json(serializer) if serializer is not None else None
    if chain_serializer is None:
        if dtype.kind == "O":
            chain_serializer = {"name": "vlen-utf8"}
        else:
            chain_serializer = {"name": "bytes", "configuration": {"endian": "little"}}
    chain = [*chain_filters, chain_serializer, *chain_compressors]
    if all(codec is not None for codec in chain):
        arguments["codecs"] = chain
    return arguments


def _write_chunks(encoding: Mapping[str, Any], variable: xr.Variable) -> tuple[int, ...] | None:
    """The chunk shape to write: the encoding's, else the dask chunks' (first block of each axis)."""
    chunks = encoding.get("chunks")
    if isinstance(chunks, int):
        return (chunks,) * variable.ndim
    if chunks is not None and chunks != "auto":
        return tuple(int(c) for c in chunks)
    if variable.chunks is not None and variable.ndim:
        return tuple(max(axis[0], 1) for axis in variable.chunks)
    return None


def _open_target_group(
    store: Any, path: str | None, mode: str, zarr_format: int | None, storage_options: dict[str, Any]
) -> za.Group:
    """The group to write into, checked against whatever node of either Zarr format is already there.

    (asyncarr's ``open_group`` told a format looks for that format's documents only; this looks for both.)
    """
    try:
        existing = za.open(store, mode="r", path=path, storage_options=storage_options)
    except NodeNotFoundError:
        existing = None
    if existing is not None:
        where = existing.store.location + (f"/{path}" if path else "")
        is_array = isinstance(existing, za.Array)
        if mode == "w-" or (mode == "a" and is_array):
            what, error = ("an array", ContainsArrayError) if is_array else ("a group", ContainsGroupError)
            raise error(f"{where}: {what} already exists (mode {mode!r} does not replace it; pass mode='w')")
        if mode == "a":
            if zarr_format not in (None, existing.zarr_format):
                raise ValueError(f"{where}: mode 'a' adds to a Zarr v{existing.zarr_format} group, not v{zarr_format}")
            zarr_format = existing.zarr_format
        elif existing.zarr_format != (zarr_format := zarr_format or config.get("default_zarr_format")):
            if not path:
                raise ValueError(
                    f"{where}: a Zarr v{existing.zarr_format} node is at the store's root; "
                    f"delete it before writing v{zarr_format} there"
                )
            parent_path, _, name = path.rpartition("/")
            parent = za.open_group(store, mode="r+", path=parent_path or None, storage_options=storage_options)
            del parent[name]
    if zarr_format is None:
        zarr_format = config.get("default_zarr_format")
    return za.open_group(store, mode=mode, path=path, zarr_format=zarr_format, storage_options=storage_options)


def to_zarr(
    ds: xr.Dataset,
    store: str | os.PathLike[str] | Store | Any,
    *,
    mode: str = "w-",
    group: str | None = None,
    zarr_format: int | None = None,
    consolidated: bool = True,
    encoding: Mapping[Hashable, Mapping[str, Any]] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    compute: bool = True,
) -> Any:
    """Write ``ds`` as a Zarr group that ``xr.open_zarr`` reads back identical; a dask Delayed if not ``compute``."""
    import dask.array

    if mode not in ("w", "w-", "a"):
        raise ValueError(f"mode must be 'w', 'w-' or 'a', got {mode!r}")
    encoding = dict(encoding or {})
    missing = [name for name in encoding if name not in ds.variables]
    if missing:
        raise ValueError(f"encoding names variables not in the dataset: {missing}")
    path = (group or "").strip("/") or None
    target = _open_target_group(_normalize_store(store), path, mode, zarr_format, dict(storage_options or {}))
    zarr_format = target.zarr_format

    dataset = ds.copy(deep=False)  # copies each variable's encoding dict too
    for name, extra in encoding.items():
        dataset.variables[name].encoding.update(extra)
    coordinates_encoded, attributes = conventions.encode_dataset_coordinates(dataset)
    target.update_attributes({k: _encode_attribute(v) for k, v in attributes.items()})

    sources: list[Any] = []
    targets: list[Any] = []
    for name, variable in coordinates_encoded.items():
        encoded = _encode_variable(variable, name)
        attrs = dict(encoded.attrs)
        var_encoding = {k: v for k, v in encoded.encoding.items() if k not in _SOURCE_ENCODINGS}
        unknown = sorted(set(var_encoding) - _WRITE_ENCODINGS)
        if name in encoding and unknown:
            raise ValueError(f"{name}: unexpected encoding parameters for zarr: {unknown}")
        if "_FillValue" in var_encoding:
            raise ValueError(f"{name}: Zarr does not support _FillValue in encoding")
        dtype = encoded.dtype
        if zarr_format == 2:
            fill_value = attrs.pop("_FillValue", None)
        else:
            fill_value = var_encoding.get("fill_value")
            if fill_value is None and dtype.kind == "f":
                fill_value = np.nan  # xarray's default for floats, so missing chunks read as NaN
            if attrs.get("_FillValue") is not None:
                attrs["_FillValue"] = _encode_fill_value_attribute(attrs["_FillValue"], dtype)
            else:
                attrs.pop("_FillValue", None)
        create_dtype: Any = str if coding.strings.check_vlen_dtype(dtype) is str else dtype
        chunks = _write_chunks(var_encoding, encoded)
        shards = var_encoding.get("shards") if zarr_format == 3 else None
        if isinstance(shards, int):
            shards = (shards,) * encoded.ndim
        arguments: dict[str, Any] = {
            "shape": encoded.shape,
            "dtype": create_dtype,
            "fill_value": fill_value,
            "chunks": chunks if chunks is not None else True,
            **_codec_arguments(var_encoding, zarr_format, dtype),
        }
        encoded_attrs = {k: _encode_attribute(v) for k, v in attrs.items()}
        if zarr_format == 3:
            arguments["dimension_names"] = list(encoded.dims)
            if shards:
                arguments["shards"] = tuple(shards)
            if var_encoding.get("chunk_key_encoding"):
                arguments["chunk_key_encoding"] = var_encoding["chunk_key_encoding"]
        else:
            encoded_attrs[DIMENSION_KEY] = list(encoded.dims)
        array = target.create_array(str(name), attributes=encoded_attrs, overwrite=True, **arguments)

        data = encoded.data
        if isinstance(data, dask.array.Array):
            unit = tuple(array.shards or array.chunks)
            if encoded.ndim and not blocks_align(data.chunks, unit):
                data = data.rechunk(unit)  # one dask block per write unit: no two tasks share a chunk
            sources.append(data)
            targets.append(array)
        elif encoded.size:
            array[...] = np.asarray(data)

    if consolidated:
        # At the store's root, as xarray does: open_zarr(group=...) looks for it there.
        za.consolidate_metadata(target.store)
    if compute:
        if sources:
            dask.array.store(sources, targets, lock=False)  # aligned blocks: no two tasks share a chunk
        return None
    return _delayed_store(sources, targets)


def _finished(_written: Any) -> None:
    return None


def _delayed_store(sources: list[Any], targets: list[Any]) -> Any:
    """One dask Delayed that writes every block when computed."""
    import dask
    import dask.array
    from dask.delayed import Delayed

    if not sources:
        return dask.delayed(_finished)(None)
    stored = dask.array.store(sources, targets, lock=False, compute=False)
    if isinstance(stored, Delayed):
        return stored
    # Newer dask returns one lazy array per source instead: depend on each of its blocks.
    arrays = stored if isinstance(stored, list | tuple) else [stored]
    blocks = [block for array in arrays for block in array.to_delayed().ravel().tolist()]
    return dask.delayed(_finished)(blocks)
