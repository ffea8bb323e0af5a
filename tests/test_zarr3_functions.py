"""zarr-python 3's top-level functions on both APIs, compared with zarr-python itself; keyword mistakes.

Each comparison makes the same zarr 3 call on zarr-python (its own LocalStore, in another
directory) and on asyncarr, then compares the metadata documents (parsed JSON), the data read
back, and what each opens. Errors are checked by their documented class.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import pytest
import zarr
import zarr.codecs
import zarr.storage
from zarr.core.group import GroupMetadata

import asyncarr
import asyncarr.sync as za
from asyncarr.api import PUBLIC_FUNCTIONS, accepted_keywords
from asyncarr.errors import ContainsArrayError, ContainsGroupError
from asyncarr.stores import LocalStore

# -- a keyword mistake names the function the user called -------------------------------------


def misspelt(name: str) -> tuple[str, str]:
    """A misspelling of one of the keywords ``name`` accepts (its last letter dropped), and that keyword."""
    keywords = accepted_keywords(name)
    assert keywords, name
    keyword = max(sorted(keywords), key=len)
    return keyword[:-1], keyword


@pytest.mark.parametrize("name", sorted(set(PUBLIC_FUNCTIONS) - {"save", "save_group", "print_debug_info"}))
def test_a_misspelt_keyword_names_the_blocking_function_and_the_keyword_meant(name: str) -> None:
    typo, meant = misspelt(name)
    with pytest.raises(TypeError) as raised:
        getattr(za, name)(**{typo: None})
    assert str(raised.value) == (
        f"asyncarr.sync.{name}() got an unexpected keyword argument {typo!r}; did you mean {meant!r}?"
    )


@pytest.mark.parametrize("name", sorted(set(PUBLIC_FUNCTIONS) - {"save", "save_group", "print_debug_info"}))
def test_a_misspelt_keyword_names_the_async_function_and_the_keyword_meant(name: str) -> None:
    typo, meant = misspelt(name)
    with pytest.raises(TypeError) as raised:
        asyncio.run(getattr(asyncarr, name)(**{typo: None}))
    expected = f"asyncarr.{name}() got an unexpected keyword argument {typo!r}; did you mean {meant!r}?"
    assert str(raised.value) == expected


def test_keywords_that_reach_array_creation_are_accepted_and_suggested() -> None:
    with pytest.raises(TypeError, match=r"^asyncarr\.sync\.zeros\(\) got an unexpected keyword argument 'chunk'; "):
        za.zeros((4,), chunk=2)
    with pytest.raises(TypeError, match=r"did you mean 'compressor'\?$"):
        za.open_array(None, mode="w", shape=(2,), compresor=None)
    with pytest.raises(TypeError) as raised:
        za.zeros((4,), xyzzy=1)
    assert str(raised.value) == "asyncarr.sync.zeros() got an unexpected keyword argument 'xyzzy'"
    # What the functions forward stays accepted: creation options through zeros, create and open.
    z = za.zeros((4,), chunks=2, dtype="i2", compressor=None, dimension_separator="/", zarr_format=2)
    assert (z.chunks, z.dtype, z.compressor) == ((2,), "i2", None)
    assert za.open(None, mode="w", shape=(3,), chunks=(3,), attributes={"a": 1}).attrs["a"] == 1


def test_save_takes_any_name_for_the_arrays_it_saves() -> None:
    store = asyncarr.stores.MemoryStore()
    za.save(store, chunk=[1, 2], other=[3])
    assert sorted(za.load(store)) == ["chunk", "other"]


def test_the_checked_functions_keep_their_signatures_and_stay_coroutine_functions() -> None:
    for name in PUBLIC_FUNCTIONS:
        function = getattr(asyncarr, name)
        assert inspect.iscoroutinefunction(function), name
        assert inspect.signature(function) == inspect.signature(function.__wrapped__), name


# -- comparisons with zarr-python 3 --------------------------------------------------------------

METADATA_FILES = ("zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata")


def _without_empty_configurations(value: Any) -> Any:
    """JSON with ``"configuration": {}`` dropped: the v3 spec makes an empty configuration optional."""
    if isinstance(value, dict):
        return {k: _without_empty_configurations(v) for k, v in value.items() if not (k == "configuration" and v == {})}
    if isinstance(value, list):
        return [_without_empty_configurations(v) for v in value]
    return value


def metadata_documents(root: Path) -> dict[str, Any]:
    """Every metadata document below ``root``, parsed; an empty ``.zattrs`` counts as none."""
    documents = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.name in METADATA_FILES:
            document = json.loads(path.read_text())
            if path.name == ".zattrs" and document == {}:
                continue
            documents[path.relative_to(root).as_posix()] = _without_empty_configurations(document)
    return documents


def info_fields(info: Any) -> dict[str, str]:
    """The ``name : value`` lines of an info table, for the names zarr and asyncarr both print alike."""
    fields = {}
    for line in str(info).splitlines():
        name, _, value = line.partition(":")
        fields[name.strip()] = value.strip()
    return {
        name: fields.get(name) for name in ("Zarr format", "Shape", "Chunk shape", "Shard shape", "Order", "No. bytes")
    }


CREATE_ARRAY_CASES = {
    "defaults": {"shape": (1000, 500), "dtype": "i4"},
    "strings": {"shape": (100,), "dtype": str},
    "v2 defaults": {"shape": (100, 50), "dtype": "i4", "zarr_format": 2},
    "shards, no codecs": {
        "shape": (100, 50),
        "dtype": "f8",
        "chunks": (10, 10),
        "shards": (50, 50),
        "compressors": None,
        "filters": None,
    },
    "blosc, attributes, names": {
        "shape": (10, 10),
        "dtype": "u1",
        "chunks": (5, 5),
        "compressors": [zarr.codecs.BloscCodec(cname="zstd", clevel=3, shuffle="bitshuffle")],
        "attributes": {"a": 1},
        "dimension_names": ["y", "x"],
    },
    "every codec slot": {
        "shape": (10, 10),
        "dtype": "f4",
        "chunks": (5, 5),
        "compressors": zarr.codecs.GzipCodec(level=4),
        "serializer": zarr.codecs.BytesCodec(endian="big"),
        "filters": [zarr.codecs.TransposeCodec(order=(1, 0))],
    },
    "NaN, v2 keys": {
        "shape": (10,),
        "dtype": "f8",
        "fill_value": float("nan"),
        "chunk_key_encoding": {"name": "v2", "separator": "."},
    },
    "v2, F order, no compressor": {
        "shape": (10, 10),
        "dtype": "i2",
        "zarr_format": 2,
        "chunks": (5, 5),
        "order": "F",
        "compressors": None,
        "chunk_key_encoding": {"name": "v2", "separator": "/"},
    },
    "v3, F order in memory only": {"shape": (10, 10), "dtype": "i2", "order": "F"},
}


def sample(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """Values of ``dtype`` to write, different in every cell."""
    values = np.arange(int(np.prod(shape))).reshape(shape)
    return values.astype(str) if dtype is str else values.astype(dtype)


@pytest.mark.parametrize("case", list(CREATE_ARRAY_CASES))
def test_create_array_writes_what_zarr_python_writes(tmp_path: Path, case: str) -> None:
    arguments = CREATE_ARRAY_CASES[case]
    theirs = zarr.create_array(str(tmp_path / "zarr"), **arguments)
    ours = za.create_array(str(tmp_path / "asyncarr"), **arguments)
    assert isinstance(ours, za.Array)
    assert metadata_documents(tmp_path / "asyncarr") == metadata_documents(tmp_path / "zarr")
    values = sample(arguments["shape"], arguments["dtype"])
    theirs[...] = values
    ours[...] = values
    np.testing.assert_array_equal(ours[...], theirs[...])
    # Each reads what the other wrote.
    np.testing.assert_array_equal(za.open_array(str(tmp_path / "zarr"), mode="r")[...], values)
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "asyncarr"), mode="r")[...], values)
    assert info_fields(ours.info) == info_fields(theirs.info)


def test_create_array_on_the_async_api_and_with_data(tmp_path: Path) -> None:
    data = np.arange(12, dtype="i8").reshape(3, 4)

    async def create() -> np.ndarray:
        created = await asyncarr.create_array(str(tmp_path / "asyncarr"), name="g/a", data=data, chunks=(2, 2))
        assert isinstance(created, asyncarr.AsyncArray)
        return await created.getitem(Ellipsis)

    np.testing.assert_array_equal(asyncio.run(create()), data)
    zarr.create_array(str(tmp_path / "zarr"), name="g/a", data=data, chunks=(2, 2))
    assert metadata_documents(tmp_path / "asyncarr") == metadata_documents(tmp_path / "zarr")
    for arguments in ({"data": data, "shape": (3, 4)}, {"shape": (3,)}, {"dtype": "i4"}):
        with pytest.raises(ValueError):
            zarr.create_array(zarr.storage.MemoryStore(), **arguments)
        with pytest.raises(ValueError):
            za.create_array(None, **arguments)
    with pytest.raises(ValueError):
        za.create_array(None, shape=(3,), dtype="i4", zarr_format=2, dimension_names=["a"])


def test_create_array_refuses_to_replace_a_node_unless_told_to(tmp_path: Path) -> None:
    za.create_array(str(tmp_path / "a"), shape=(2,), dtype="i1")
    with pytest.raises(ContainsArrayError):
        za.create_array(str(tmp_path / "a"), shape=(3,), dtype="i1")
    za.create_group(str(tmp_path / "g"))
    with pytest.raises(ContainsGroupError):
        za.create_array(str(tmp_path / "g"), shape=(3,), dtype="i1")
    assert za.create_array(str(tmp_path / "a"), shape=(3,), dtype="i1", overwrite=True).shape == (3,)
    with pytest.raises(ValueError, match="serializer"):
        za.create_array(None, shape=(3,), dtype="i1", zarr_format=2, serializer=zarr.codecs.BytesCodec())
    with pytest.raises(ValueError, match="at most one compressor"):
        za.create_array(None, shape=(3,), dtype="i1", zarr_format=2, compressors=[{"id": "zlib"}, {"id": "gzip"}])


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_create_group_writes_what_zarr_python_writes(tmp_path: Path, zarr_format: int) -> None:
    options = {"zarr_format": zarr_format, "attributes": {"title": "t"}, "path": "a/b"}
    zarr.create_group(str(tmp_path / "zarr"), **options)
    created = za.create_group(str(tmp_path / "asyncarr"), **options)
    assert isinstance(created, za.Group) and created.attrs["title"] == "t"
    assert metadata_documents(tmp_path / "asyncarr") == metadata_documents(tmp_path / "zarr")
    with pytest.raises(ContainsGroupError):
        za.create_group(str(tmp_path / "asyncarr"), path="a/b")
    assert dict(za.create_group(str(tmp_path / "asyncarr"), path="a/b", overwrite=True).attrs) == {}


def test_from_array_of_an_ndarray_and_of_an_array_keeps_what_zarr_python_keeps(tmp_path: Path) -> None:
    data = np.arange(200, dtype="i4").reshape(20, 10)
    zarr.from_array(str(tmp_path / "zarr-plain"), data=data)
    za.from_array(str(tmp_path / "asyncarr-plain"), data=data)
    assert metadata_documents(tmp_path / "asyncarr-plain") == metadata_documents(tmp_path / "zarr-plain")

    source = zarr.create_array(
        str(tmp_path / "source"),
        shape=(20, 10),
        dtype="i4",
        chunks=(5, 5),
        shards=(10, 10),
        compressors=zarr.codecs.GzipCodec(level=2),
        attributes={"k": 1},
        dimension_names=["a", "b"],
        fill_value=7,
    )
    source[...] = data
    theirs = zarr.from_array(str(tmp_path / "zarr-copy"), data=source)
    ours = za.from_array(str(tmp_path / "asyncarr-copy"), data=za.open_array(str(tmp_path / "source"), mode="r"))
    assert metadata_documents(tmp_path / "asyncarr-copy") == metadata_documents(tmp_path / "zarr-copy")
    np.testing.assert_array_equal(ours[...], theirs[...])
    # "keep" gives way to what is passed.
    rechunked = za.from_array(None, data=ours, chunks=(4, 5), shards=None, compressors=None)
    assert (rechunked.chunks, rechunked.shards) == ((4, 5), None)
    np.testing.assert_array_equal(rechunked[...], data)
    assert za.from_array(None, data=data, write_data=False).nchunks_initialized == 0


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_open_consolidated_opens_a_consolidated_group_and_refuses_one_without(tmp_path: Path, zarr_format: int) -> None:
    root = zarr.create_group(str(tmp_path / "g"), zarr_format=zarr_format)
    root.create_array("x", shape=(3,), dtype="i1")
    with pytest.raises(ValueError):
        zarr.open_consolidated(str(tmp_path / "g"), zarr_format=zarr_format)
    with pytest.raises(ValueError, match="no consolidated metadata"):
        za.open_consolidated(str(tmp_path / "g"), zarr_format=zarr_format)
    zarr.consolidate_metadata(str(tmp_path / "g"), zarr_format=zarr_format)
    opened = za.open_consolidated(str(tmp_path / "g"), zarr_format=zarr_format)
    assert isinstance(opened, za.Group) and list(opened.array_keys()) == ["x"]
    # A read-only store (HTTP, a bucket opened read-only) opens read-only in the default mode.
    read_only = za.open_consolidated(LocalStore(str(tmp_path / "g"), read_only=True), zarr_format=zarr_format)
    assert read_only.read_only and list(read_only.array_keys()) == ["x"]


def test_tree_draws_the_hierarchy_as_the_group_does_and_cuts_it_at_a_level(tmp_path: Path) -> None:
    root = za.create_group(str(tmp_path / "t"))
    root.create_group("a").create_array("x", shape=(3,), dtype="i4")
    root.create_array("y", shape=(2, 2), dtype="f8")
    assert str(za.tree(root)) == str(root.tree())
    # zarr-python 3.1's level: how many levels below the children to draw.
    assert str(za.tree(root, level=0)).splitlines() == ["/", " ├── a", " └── y (2, 2) float64"]
    assert str(za.tree(root, level=1)) == str(root.tree())
    assert str(asyncio.run(asyncarr.tree(root.async_group, level=0))) == str(root.tree(level=0))
    with pytest.raises(NotImplementedError):  # as zarr-python 3.1 (rich's Jupyter widget)
        za.tree(root, expand=True)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_create_hierarchy_from_zarr_metadata_objects_writes_what_zarr_python_writes(
    tmp_path: Path, zarr_format: int
) -> None:
    array_metadata = zarr.create_array(
        zarr.storage.MemoryStore(),
        shape=(4,),
        dtype="f4",
        fill_value=float("nan"),
        attributes={"q": 2},
        zarr_format=zarr_format,
    ).metadata
    nodes = {"": GroupMetadata(attributes={"r": 1}, zarr_format=zarr_format), "a/x": array_metadata}
    dict(zarr.create_hierarchy(store=zarr.storage.LocalStore(str(tmp_path / "zarr")), nodes=nodes))
    created = dict(za.create_hierarchy(store=str(tmp_path / "asyncarr"), nodes=nodes))
    assert metadata_documents(tmp_path / "asyncarr") == metadata_documents(tmp_path / "zarr")
    assert isinstance(created[""], za.Group) and isinstance(created["a/x"], za.Array)
    assert np.isnan(created["a/x"][...]).all() and created[""].attrs["r"] == 1
    with pytest.raises(ContainsArrayError):
        za.create_hierarchy(store=str(tmp_path / "asyncarr"), nodes={"a/x": array_metadata})
    assert za.create_hierarchy(store=str(tmp_path / "asyncarr"), nodes={"a/x": array_metadata}, overwrite=True)
    with pytest.raises(ValueError, match="one zarr_format"):
        za.create_hierarchy(store=None, nodes={"a": GroupMetadata(zarr_format=2), "b": GroupMetadata(zarr_format=3)})


def test_create_hierarchy_from_short_descriptions() -> None:
    store = asyncarr.stores.MemoryStore()
    nodes = {
        "raw": {"node_type": "group", "attributes": {"source": "sensor"}},
        "raw/t": {"node_type": "array", "shape": (6,), "dtype": "i2", "chunks": (3,)},
    }
    created = dict(za.create_hierarchy(store=store, nodes=nodes))
    assert created["raw/t"].chunks == (3,) and created["raw"].attrs["source"] == "sensor"
    assert sorted(za.open_group(store, mode="r").group_keys()) == ["raw"]
    with pytest.raises(ValueError, match="node_type"):
        za.create_hierarchy(store=store, nodes={"b": {"shape": (2,)}})


def test_zarr_2_object_codec_is_the_first_filter_of_an_object_array(tmp_path: Path) -> None:
    data = np.empty(3, dtype=object)
    data[:] = [{"a": 1}, [1, 2], "text"]
    spelled = za.create((3,), dtype=object, object_codec=numcodecs.JSON(), chunks=(2,), zarr_format=2)
    as_filter = za.create((3,), dtype=object, filters=[numcodecs.JSON()], chunks=(2,), zarr_format=2)
    assert spelled.metadata == as_filter.metadata
    spelled[:] = data
    assert list(spelled[:]) == list(data)
    with pytest.raises(ValueError, match="zarr_format=2"):
        za.create((3,), dtype=object, object_codec=numcodecs.JSON(), zarr_format=3)


@pytest.mark.parametrize(
    "slots",
    [
        {"compressors": ("BloscCodec", {"cname": "zstd", "clevel": 3})},
        {
            "serializer": ("BytesCodec", {"endian": "big"}),
            "compressors": [("GzipCodec", {"level": 4})],
            "filters": [("TransposeCodec", {"order": (1, 0)})],
        },
        {"compressors": [("ZstdCodec", {"level": 2}), ("Crc32cCodec", {})]},
    ],
)
def test_create_array_takes_the_codec_classes_of_asyncarr_sync_codecs_as_zarr_takes_its_own(
    tmp_path: Path, slots: dict[str, Any]
) -> None:
    from asyncarr.sync import codecs as asyncarr_codecs

    def built(module: Any, value: Any) -> Any:
        if isinstance(value, list):
            return [built(module, item) for item in value]
        name, arguments = value
        return getattr(module, name)(**arguments)

    ours = {slot: built(asyncarr_codecs, value) for slot, value in slots.items()}
    theirs = {slot: built(zarr.codecs, value) for slot, value in slots.items()}
    common = {"shape": (10, 10), "dtype": "f4", "chunks": (5, 5)}
    za.create_array(str(tmp_path / "asyncarr"), **common, **ours)[...] = np.ones((10, 10), "f4")
    zarr.create_array(str(tmp_path / "zarr"), **common, **theirs)
    assert metadata_documents(tmp_path / "asyncarr") == metadata_documents(tmp_path / "zarr")
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "asyncarr"), mode="r")[...], np.ones((10, 10)))


# -- the rest of zarr 3's top-level names, and zarr's older keyword spellings ----------------------


def test_every_top_level_zarr_name_exists_on_the_facade_with_every_keyword() -> None:
    assert [name for name in zarr.__all__ if not hasattr(za, name)] == []
    for name in zarr.__all__:
        theirs = getattr(zarr, name)
        if name not in PUBLIC_FUNCTIONS or inspect.isclass(theirs):
            continue
        keywords = {p.name for p in inspect.signature(theirs).parameters.values() if p.kind is not p.VAR_KEYWORD}
        accepted = accepted_keywords(name)
        if accepted is not None:
            assert keywords - {"args"} <= accepted, name


@pytest.mark.filterwarnings("ignore:zarr_version is deprecated:DeprecationWarning")
def test_zarr_version_is_zarr_format_and_caches_are_accepted(tmp_path: Path) -> None:
    ours = za.create((6,), chunks=(3,), dtype="i4", store=str(tmp_path / "ours"), zarr_version=2, cache_attrs=False)
    theirs = zarr.create((6,), chunks=(3,), dtype="i4", store=str(tmp_path / "theirs"), zarr_version=2)
    assert ours.metadata.zarr_format == theirs.metadata.zarr_format == 2
    assert json.loads((tmp_path / "ours/.zarray").read_text())["chunks"] == [3]
    with pytest.raises(TypeError, match="pass only zarr_format"):
        za.create((6,), store=str(tmp_path / "x"), zarr_version=2, zarr_format=3)
    with pytest.raises(ValueError, match="chunk_store"):
        za.create((6,), store=str(tmp_path / "y"), chunk_store=za.MemoryStore())
    group = za.group(str(tmp_path / "g"), zarr_version=2, synchronizer=za.ThreadSynchronizer(), cache_attrs=True)
    assert group.metadata.zarr_format == 2


def test_chunk_shape_and_read_only_in_create(tmp_path: Path) -> None:
    ours = za.create((8, 8), chunk_shape=(4, 2), dtype="u1", store=str(tmp_path / "ours"), read_only=True)
    assert ours.chunks == (4, 2) and ours.metadata.zarr_format == 3
    assert ours.read_only
    with pytest.raises(asyncarr.errors.ReadOnlyError):
        ours[0, 0] = 1


def test_use_consolidated_chooses_what_open_group_reads(tmp_path: Path) -> None:
    root = za.open_group(str(tmp_path / "g"), mode="w", zarr_format=2)
    root.create_array("a", shape=(2,), dtype="i1")
    za.consolidate_metadata(str(tmp_path / "g"), zarr_format=2)
    root.create_array("late", shape=(2,), dtype="i1")  # written after consolidation
    assert sorted(za.open_group(str(tmp_path / "g"), mode="r").keys()) == ["a"]
    assert sorted(za.open_group(str(tmp_path / "g"), mode="r", use_consolidated=False).keys()) == ["a", "late"]
    theirs = zarr.open_group(str(tmp_path / "g"), mode="r", use_consolidated=False)
    assert sorted(theirs.keys()) == ["a", "late"]
    za.open_group(str(tmp_path / "plain"), mode="w")
    with pytest.raises(ValueError, match="no consolidated metadata"):
        za.open_group(str(tmp_path / "plain"), mode="r", use_consolidated=True)


def test_save_array_save_group_and_load_as_zarr(tmp_path: Path) -> None:
    za.save_array(str(tmp_path / "ours_a"), np.arange(6))
    zarr.save_array(str(tmp_path / "theirs_a"), np.arange(6))  # (zarr 3.1 fails on chunks= here)
    ours_doc, theirs_doc = _document(tmp_path / "ours_a"), _document(tmp_path / "theirs_a")
    # Everything but the compressor, which is asyncarr's default (docs/zarr-compat.md, "Defaults").
    assert {k: v for k, v in ours_doc.items() if k != "codecs"} == {
        k: v for k, v in theirs_doc.items() if k != "codecs"
    }
    za.save_array(str(tmp_path / "chunked"), np.arange(6), chunks=(2,))
    assert _document(tmp_path / "chunked")["chunk_grid"]["configuration"]["chunk_shape"] == [2]
    za.save_group(str(tmp_path / "ours_g"), np.arange(3), named=np.ones(2))
    zarr.save_group(str(tmp_path / "theirs_g"), np.arange(3), named=np.ones(2))
    ours = za.load(str(tmp_path / "ours_g"))  # zarr 3.1's load() of a group raises NotImplementedError
    theirs = zarr.open_group(str(tmp_path / "theirs_g"), mode="r")
    assert sorted(ours) == sorted(theirs.array_keys()) == ["arr_0", "named"]
    for name in ours:
        np.testing.assert_array_equal(ours[name], theirs[name][...])
    np.testing.assert_array_equal(za.load(str(tmp_path / "theirs_a"), zarr_format=3), np.arange(6))
    with pytest.raises(ValueError):
        za.save_group(str(tmp_path / "none"))


def _document(path: Path) -> dict[str, Any]:
    return json.loads((path / "zarr.json").read_text())


def test_open_like_takes_shape_chunks_dtype_and_fill_value_from_the_array(tmp_path: Path) -> None:
    source = za.create_array(str(tmp_path / "src"), shape=(10, 4), chunks=(5, 2), dtype="f4", fill_value=1.5)
    ours = za.open_like(source, str(tmp_path / "ours"))
    # zarr 3's open_like takes the same from zarr's array (its own str path is taken as a memory path in 3.1).
    theirs = zarr.open_array(str(tmp_path / "src"), mode="r")
    assert (ours.shape, ours.chunks, ours.dtype, ours.fill_value) == (
        theirs.shape,
        theirs.chunks,
        theirs.dtype,
        theirs.fill_value,
    )
    assert za.open_array(str(tmp_path / "ours"), mode="r").shape == (10, 4)


def test_print_debug_info_names_the_versions(capsys: pytest.CaptureFixture[str]) -> None:
    za.print_debug_info()
    printed = capsys.readouterr().out
    assert f"asyncarr: {asyncarr.__version__}" in printed and "numcodecs:" in printed
    assert za.__version__ == asyncarr.__version__ and za.AsyncArray is asyncarr.AsyncArray


@pytest.mark.parametrize("name", ["VLenUTF8Codec", "VLenBytesCodec"])
def test_vlen_serializers_write_zarrs_metadata(tmp_path: Path, name: str) -> None:
    values = np.array(["a", "bcd", "", "éé"], dtype=object)
    dtype: Any = str
    if name == "VLenBytesCodec":
        values, dtype = np.array([v.encode() for v in values], dtype=object), bytes
    ours = za.create_array(
        str(tmp_path / "ours"), shape=(4,), chunks=(2,), dtype=dtype, serializer=getattr(za.codecs, name)()
    )
    ours[:] = values
    assert _document(tmp_path / "ours")["codecs"][0] == getattr(zarr.codecs, name)().to_dict()
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "ours"), mode="r")[:], values)


@pytest.mark.parametrize(("first", "then"), [(2, 3), (3, 2)])
def test_creating_modes_see_a_node_of_the_other_format(tmp_path: Path, first: int, then: int) -> None:
    za.open_group(str(tmp_path / "g"), mode="w", zarr_format=first).create_array("a", shape=(2,), dtype="i1")
    with pytest.raises(ContainsGroupError):
        za.open_group(str(tmp_path / "g"), mode="w-", zarr_format=then)
    with pytest.raises(ContainsGroupError):
        za.create_array(str(tmp_path / "g"), shape=(2,), dtype="i1", zarr_format=then)
    za.open_group(str(tmp_path / "g"), mode="w", zarr_format=then)
    left = sorted(p.name for p in (tmp_path / "g").rglob("*"))
    assert left == (["zarr.json"] if then == 3 else [".zattrs", ".zgroup"] if ".zattrs" in left else [".zgroup"])
    assert zarr.open_group(str(tmp_path / "g"), mode="r").metadata.zarr_format == then
