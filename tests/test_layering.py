"""asyncarr's modules depend one way, as DESIGN.md draws it, and import in any order.

    cli, xarray, dask -> sync -> array/group -> indexing, metadata, codecs -> stores

`LAYERS` names every module's layer, top to bottom, with docs/internals.md's extra floor
(errors, config and other leaves below the stores). The imports are read from the source
(ast), lazy ones inside functions included: a module may import its own layer or any
lower one, never a higher one. Imports under ``if TYPE_CHECKING:`` are left out: they never
run (array.py names the facade's ``Array`` as the return type of ``.sync()`` that way).
"""

from __future__ import annotations

import ast
import os
import pathlib
import subprocess
import sys
import textwrap
from dataclasses import dataclass

import pytest

PACKAGE_ROOT = pathlib.Path(__file__).resolve().parents[1] / "asyncarr"

#: Top to bottom. A name covers that module and, for a package, every module inside it; the
#: package root ``asyncarr`` covers only its ``__init__``.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "entry points",
        (
            "asyncarr",
            "asyncarr.__main__",
            "asyncarr.cli",
            "asyncarr.cli_copy",
            "asyncarr.cli_output",
            "asyncarr.xarray",
            "asyncarr.dask",
        ),
    ),
    ("blocking facade", ("asyncarr.sync", "asyncarr.sync_functions", "asyncarr.sync_loop", "asyncarr.facade")),
    (
        "arrays and groups",
        (
            "asyncarr.api",
            "asyncarr.block_iteration",
            "asyncarr.copy",  # the engine of `asyncarr cp` and of za.copy: below the facade, which forwards to it
            "asyncarr.array",
            "asyncarr.array_storage",
            "asyncarr.group",
            "asyncarr.creation",
            "asyncarr.nodes",
            "asyncarr.chunk_io",
            "asyncarr.small_writes",
            "asyncarr.shards",
        ),
    ),
    (
        "indexing, metadata, codecs",
        ("asyncarr.indexing", "asyncarr.indexing_points", "asyncarr.metadata", "asyncarr.codecs"),
    ),
    ("stores", ("asyncarr.stores",)),
    (
        "leaves",
        (
            "asyncarr.errors",
            "asyncarr._version",
            "asyncarr.chunk_cache",
            "asyncarr.config",
            "asyncarr.concurrency",
            "asyncarr.locks",
            "asyncarr.info",
            "asyncarr.tree",
        ),
    ),
]

#: Pairs the layers allow but docs/internals.md rules out: (importer prefix, imported prefix).
KNOWS_NOTHING_OF = [
    ("asyncarr.metadata", "asyncarr.stores"),  # "metadata knows nothing of stores or codec objects"
    ("asyncarr.metadata", "asyncarr.codecs"),
]

#: Upward imports kept on purpose, each with its reason.
ALLOWED_UPWARD = {
    # A name defined in the package root itself, read inside a function when a request is signed;
    # the root is always loaded by then (it is loaded before any of its modules).
    ("asyncarr.stores.s3", "asyncarr"): "the User-Agent carries asyncarr.__version__",
}


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(path): path for path in sorted(PACKAGE_ROOT.rglob("*.py"))}


def _covers(prefix: str, module: str) -> bool:
    return module == prefix or (prefix != "asyncarr" and module.startswith(prefix + "."))


def layer_of(module: str) -> int:
    """The index in LAYERS (0 is the top) of the layer holding ``module``."""
    for index, (_, prefixes) in enumerate(LAYERS):
        if any(_covers(prefix, module) for prefix in prefixes):
            return index
    raise LookupError(f"{module} is in no layer: add it to LAYERS in {__file__}")


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    line: int
    at_import_time: bool  # at module level, not inside a function


def _is_type_checking_block(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The asyncarr modules an import statement loads (for ``from X import name``: X.name if that is a module)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names if alias.name.split(".")[0] == "asyncarr"]
    if node.level:
        package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
        base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
        source = ".".join(base + ([node.module] if node.module else []))
    else:
        source = node.module or ""
    if source.split(".")[0] != "asyncarr":
        return []
    submodules = [f"{source}.{alias.name}" for alias in node.names if f"{source}.{alias.name}" in MODULES]
    names_that_are_not_modules = len(submodules) < len(node.names)
    return submodules + ([source] if names_that_are_not_modules or not submodules else [])


def imports_of(module: str) -> list[Import]:
    """Every asyncarr import in ``module``'s source that can run (``if TYPE_CHECKING:`` blocks left out)."""
    found: list[Import] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if _is_type_checking_block(child):
                for orelse in child.orelse:  # type: ignore[attr-defined]
                    visit(orelse, in_function)
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                for target in _targets(module, child):
                    found.append(Import(module, target, child.lineno, not in_function))
            visit(child, in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda))

    visit(ast.parse(MODULES[module].read_text(), str(MODULES[module])), in_function=False)
    return found


ALL_IMPORTS = [imp for module in MODULES for imp in imports_of(module)]


def test_every_module_has_a_layer() -> None:
    unplaced = []
    for module in MODULES:
        try:
            layer_of(module)
        except LookupError as exc:
            unplaced.append(str(exc))
    assert not unplaced, "\n".join(unplaced)


def test_the_import_reader_sees_what_it_must() -> None:
    """The reader itself: relative, absolute, package and lazy imports, and TYPE_CHECKING skipped."""
    by_module = {module: {imp.imported for imp in imports_of(module)} for module in ("asyncarr.array", "asyncarr")}
    assert {"asyncarr.metadata", "asyncarr.nodes", "asyncarr.stores.base"} <= by_module["asyncarr.array"]
    assert "asyncarr.facade" not in by_module["asyncarr.array"]  # type-only, under TYPE_CHECKING
    assert {"asyncarr.api", "asyncarr.config", "asyncarr.facade", "asyncarr.stores"} <= by_module["asyncarr"]
    lazy = [imp for imp in imports_of("asyncarr.codecs.v3") if imp.imported == "asyncarr.codecs.numcodecs_v3"]
    assert lazy and not any(imp.at_import_time for imp in lazy)
    assert any(imp.imported == "asyncarr" for imp in imports_of("asyncarr.stores.s3"))


def test_no_module_imports_a_higher_layer() -> None:
    upward = [
        f"{imp.importer} (layer {LAYERS[layer_of(imp.importer)][0]!r}) imports {imp.imported} "
        f"(layer {LAYERS[layer_of(imp.imported)][0]!r}) at {MODULES[imp.importer].name}:{imp.line}"
        for imp in ALL_IMPORTS
        if imp.imported in MODULES
        and layer_of(imp.imported) < layer_of(imp.importer)
        and (imp.importer, imp.imported) not in ALLOWED_UPWARD
    ]
    assert not upward, "\n".join(upward)


def test_the_allowed_upward_imports_still_exist() -> None:
    present = {(imp.importer, imp.imported) for imp in ALL_IMPORTS}
    assert set(ALLOWED_UPWARD) <= present, "drop the entries of ALLOWED_UPWARD that no longer happen"


def test_metadata_knows_nothing_of_stores_or_codecs() -> None:
    crossings = [
        f"{imp.importer} imports {imp.imported} (line {imp.line})"
        for imp in ALL_IMPORTS
        for importer, imported in KNOWS_NOTHING_OF
        if _covers(importer, imp.importer) and _covers(imported, imp.imported)
    ]
    assert not crossings, "\n".join(crossings)


def test_the_core_never_imports_the_blocking_facade() -> None:
    """The case that started this test: array.py and group.py used to import asyncarr.sync for .sync()."""
    facade = {"asyncarr.sync", "asyncarr.sync_functions", "asyncarr.facade"}
    offenders = [
        f"{imp.importer}:{imp.line} imports {imp.imported}"
        for imp in ALL_IMPORTS
        if imp.imported in facade and layer_of(imp.importer) > layer_of("asyncarr.sync")
    ]
    assert not offenders, "\n".join(offenders)


def test_module_level_imports_form_no_cycle() -> None:
    """Lazy imports inside functions may close a loop (a registry loading its plug-ins); import-time ones may not."""
    graph: dict[str, set[str]] = {module: set() for module in MODULES}
    for imp in ALL_IMPORTS:
        if imp.at_import_time and imp.imported in MODULES and imp.imported != imp.importer:
            graph[imp.importer].add(imp.imported)
    cycles = _cycles(graph)
    assert not cycles, "\n".join(" <-> ".join(cycle) for cycle in cycles)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The modules of each strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for neighbour in sorted(graph[node]):
            if neighbour not in index:
                connect(neighbour)
                low[node] = min(low[node], low[neighbour])
            elif neighbour in on_stack:
                low[node] = min(low[node], index[neighbour])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return components


def test_every_module_imports_first_in_a_fresh_interpreter() -> None:
    """Import each module as the first asyncarr import of the interpreter (the package root then loads
    first, then the module), and check `.sync()` finds its facade whichever module came first."""
    modules = sorted(set(MODULES) - {"asyncarr.__main__"})  # importing it runs the command line
    script = textwrap.dedent(
        f"""
        import importlib, sys
        failures = []
        for name in {modules!r}:
            for loaded in [m for m in sys.modules if m == "asyncarr" or m.startswith("asyncarr.")]:
                del sys.modules[loaded]
            try:
                importlib.import_module(name)
            except ModuleNotFoundError as exc:
                if (exc.name or "").split(".")[0] == "asyncarr":
                    failures.append(f"{{name}}: {{exc!r}}")
                continue  # an optional SDK that is not installed
            except Exception as exc:
                failures.append(f"{{name}}: {{exc!r}}")
                continue
            array = importlib.import_module("asyncarr.array").AsyncArray
            facade = importlib.import_module("asyncarr.facade")
            if array._facade_class is not facade.Array:
                failures.append(f"{{name}}: AsyncArray.sync() would not find asyncarr.facade.Array")
        print("\\n".join(failures))
        """
    )
    env = _environment()
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env, cwd=PACKAGE_ROOT.parent
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", result.stdout


def _environment() -> dict[str, str]:
    """This process's environment with this checkout first on the import path."""
    paths = [str(PACKAGE_ROOT.parent), os.environ.get("PYTHONPATH", "")]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(path for path in paths if path))


@pytest.mark.parametrize(
    "statement",
    [
        "import asyncarr.sync as za; za.zeros(3).async_array.sync()",
        "from asyncarr.array import AsyncArray; import asyncarr; asyncarr.AsyncArray is AsyncArray",
        "import asyncarr.stores.memory, asyncarr.sync; asyncarr.sync.group().async_group.sync()",
    ],
)
def test_documented_entry_points_import_cleanly_on_their_own(statement: str) -> None:
    """A fresh interpreter per entry point, with warnings as errors: no import order of ours leaks anything."""
    env = _environment()
    result = subprocess.run(
        [sys.executable, "-W", "error", "-c", statement], capture_output=True, text=True, timeout=120, env=env
    )
    assert result.returncode == 0 and not result.stderr, result.stderr
