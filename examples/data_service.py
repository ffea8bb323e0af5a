"""A web service answering slice requests from Zarr arrays, all on one event loop (async API, aiohttp).

    python examples/data_service.py STORE_URL [--port 8080] [--option KEY=VALUE ...]
    python examples/data_service.py s3://my-bucket/data.zarr --option anon=true --option region=eu-west-2
    curl 'http://127.0.0.1:8080/arrays'                          # every array: shape, chunks, dtype
    curl 'http://127.0.0.1:8080/arrays/grid/temperature?slice=0:10,5'

STORE_URL names a group (every array below it is served, by its path) or one array. The
arrays are opened once, at startup; a request then costs only the chunk reads of its slice,
and requests run concurrently on the one event loop, their chunk requests sharing the store's
connection pool (``asyncarr.config`` concurrency). ``slice`` takes NumPy's basic indexing,
one item per dimension separated by commas: ``3``, ``-1``, ``2:8``, ``::-2``, ``...``.
Over HTTP(S), which cannot list, the group needs consolidated metadata.
"""

import argparse
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import numpy as np
from aiohttp import web

import asyncarr

ARRAYS = web.AppKey("arrays", dict)
"""name -> AsyncArray, filled at startup."""
MAX_ELEMENTS = web.AppKey("max_elements", int)


def make_app(
    store_url: str, storage_options: Mapping[str, Any] | None = None, *, max_elements: int = 10_000_000
) -> web.Application:
    """The web application serving the arrays at ``store_url`` (opened when the app starts)."""
    app = web.Application()
    app[ARRAYS] = {}
    app[MAX_ELEMENTS] = max_elements

    async def open_arrays(app: web.Application) -> AsyncIterator[None]:
        node = await asyncarr.open(store_url, mode="r", storage_options=dict(storage_options or {}))
        try:
            if isinstance(node, asyncarr.AsyncArray):
                app[ARRAYS][node.basename or "array"] = node
            else:
                app[ARRAYS].update({name: array async for name, array in _arrays_below(node, "")})
            yield
        finally:
            await node.store.close()

    app.cleanup_ctx.append(open_arrays)
    app.router.add_get("/arrays", list_arrays)
    app.router.add_get("/arrays/{name:.+}", read_slice)
    return app


async def _arrays_below(group: asyncarr.AsyncGroup, prefix: str) -> AsyncIterator[tuple[str, asyncarr.AsyncArray]]:
    async for name, node in group.members():
        if isinstance(node, asyncarr.AsyncArray):
            yield prefix + name, node
        else:
            async for item in _arrays_below(node, f"{prefix}{name}/"):
                yield item


async def list_arrays(request: web.Request) -> web.Response:
    """GET /arrays: every array's shape, chunks and dtype."""
    arrays = request.app[ARRAYS]
    described = {
        name: {"shape": list(a.shape), "chunks": list(a.chunks), "dtype": str(a.dtype)}
        for name, a in sorted(arrays.items())
    }
    return web.json_response({"arrays": described})


async def read_slice(request: web.Request) -> web.Response:
    """GET /arrays/{name}?slice=...: the selected values as nested JSON lists."""
    name = request.match_info["name"]
    array = request.app[ARRAYS].get(name)
    if array is None:
        return _error(404, f"no array named {name!r}; GET /arrays lists them")
    text = request.query.get("slice", "...")
    try:
        selection = parse_selection(text)
        size = _selection_size(array.shape, selection)
    except (ValueError, IndexError, TypeError) as exc:
        return _error(400, f"slice={text!r}: {exc}")
    if size > request.app[MAX_ELEMENTS]:
        return _error(413, f"slice={text!r} selects {size} elements; the limit is {request.app[MAX_ELEMENTS]}")
    values = await array.getitem(selection)
    answer = {"name": name, "slice": text, "shape": list(np.shape(values)), "dtype": str(array.dtype)}
    answer["data"] = to_json(values)
    return web.json_response(answer, dumps=json.dumps)


def parse_selection(text: str) -> tuple[Any, ...]:
    """``"0:10, 5"`` -> ``(slice(0, 10), 5)``; ``...`` and negative steps as in NumPy."""
    items: list[Any] = []
    for part in (p.strip() for p in text.split(",")):
        if part == "...":
            items.append(Ellipsis)
        elif ":" in part:
            bounds = part.split(":")
            if len(bounds) > 3:
                raise ValueError(f"{part!r} is not a slice (start:stop:step)")
            items.append(slice(*(int(b) if b.strip() else None for b in bounds)))
        elif part:
            items.append(int(part))
        else:
            raise ValueError("an empty item between commas")
    return tuple(items)


def _selection_size(shape: tuple[int, ...], selection: tuple[Any, ...]) -> int:
    """Elements ``selection`` picks from an array of ``shape`` (raises IndexError as NumPy would)."""
    return int(np.empty(shape, dtype=[])[selection].size)  # a zero-byte dtype: no memory, NumPy's own rules


def to_json(values: np.ndarray) -> Any:
    """Nested lists of JSON values: bytes as text, dates as ISO strings, complex numbers as [real, imag]."""
    values = np.asarray(values)
    if values.dtype.kind == "S":
        return np.char.decode(values, "latin-1").tolist()
    if values.dtype.kind in "mM":
        return values.astype(str).tolist()
    if values.dtype.kind == "c":
        return np.stack([values.real, values.imag], axis=-1).tolist()
    return values.tolist()


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


def _option(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` -> (key, value), the value read as JSON when it is JSON (true, 3, {...}), else as text."""
    key, separator, value = text.partition("=")
    if not separator or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def main() -> None:
    """Serve the arrays at STORE_URL until interrupted."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store_url", help="a group or array: s3://..., gs://..., az://..., https://..., or a path")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument(
        "--option", "-o", type=_option, action="append", default=[], metavar="KEY=VALUE", help="a storage option"
    )
    parser.add_argument("--max-elements", type=int, default=10_000_000, help="the most elements one request gets")
    args = parser.parse_args()
    app = make_app(args.store_url, dict(args.option), max_elements=args.max_elements)
    web.run_app(app, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
