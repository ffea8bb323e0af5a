"""zarr-python 3's top-level functions on both APIs, compared with zarr-python itself; keyword mistakes.

Each comparison makes the same zarr 3 call on zarr-python (its own LocalStore, in another
directory) and on asyncarr, then compares the metadata documents (parsed JSON), the data read
back, and what each opens. Errors are checked by their documented class.
"""

from __future__ import annotations

import asyncio
import inspect

import pytest

import asyncarr
import asyncarr.sync as za
from asyncarr.api import PUBLIC_FUNCTIONS, accepted_keywords

# -- a keyword mistake names the function the user called -------------------------------------


def misspelt(name: str) -> tuple[str, str]:
    """A misspelling of one of the keywords ``name`` accepts (its last letter dropped), and that keyword."""
    keywords = accepted_keywords(name)
    assert keywords, name
    keyword = max(sorted(keywords), key=len)
    return keyword[:-1], keyword


@pytest.mark.parametrize("name", sorted(set(PUBLIC_FUNCTIONS) - {"save"}))
def test_a_misspelt_keyword_names_the_blocking_function_and_the_keyword_meant(name: str) -> None:
    typo, meant = misspelt(name)
    with pytest.raises(TypeError) as raised:
        getattr(za, name)(**{typo: None})
    assert str(raised.value) == (
        f"asyncarr.sync.{name}() got an unexpected keyword argument {typo!r}; did you mean {meant!r}?"
    )


@pytest.mark.parametrize("name", sorted(set(PUBLIC_FUNCTIONS) - {"save"}))
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
