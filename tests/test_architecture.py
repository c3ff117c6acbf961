"""The package's shape: layers import downwards only, no module imports another in a cycle, no operation
package in ops/ imports another (only its own package and ops/common), and the library imports no cloud SDK
until an adapter asks for one."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

LIBRARY = Path(__file__).resolve().parent.parent / "shared"
# Lower layers first: a module may import its own layer and the layers before it, never one after.
LAYERS = ("errors", "version", "core", "expr", "ops", "app")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(LIBRARY).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(["deltaextras", *parts])


def _imports(path: Path) -> set[str]:
    """Modules of deltaextras that ``path`` imports (at any depth in the file, lazily or not)."""
    name = _module_name(path)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "deltaextras":
                continue
            for alias in node.names:
                found.add(f"{target}.{alias.name}")
            found.add(target)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "deltaextras")
    return found


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in LIBRARY.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        if path.name == "__init__.py":
            continue  # package initialisers re-export; they are not part of the layering
        graph[name] = {t for t in _imports(path) if t in modules and t != name and not t.endswith("__init__")}
        graph[name] = {t for t in graph[name] if modules[t].name != "__init__.py"}
    return graph


def _layer(module: str) -> int:
    top = module.split(".")[1] if "." in module else ""
    return LAYERS.index(top) if top in LAYERS else -1


def find_cycles(graph: dict[str, set[str]]) -> list[str]:
    """Every cycle met by a depth-first walk of ``graph`` (module -> modules it imports)."""
    cycles: list[str] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join([*stack[stack.index(nxt) :], nxt]))
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return cycles


def test_no_import_cycles() -> None:
    graph = _graph()
    assert len(graph) > 30 and sum(map(len, graph.values())) > 50  # the walk really sees the package
    cycles = find_cycles(graph)
    assert not cycles, f"import cycles: {cycles[:5]}"


def test_cycle_finder_reports_a_cycle() -> None:
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a -> b -> c -> a"]
    assert find_cycles({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []


def test_layers_import_downwards_only() -> None:
    upward = [
        f"{src} imports {dst}"
        for src, targets in _graph().items()
        for dst in targets
        if _layer(src) >= 0 and _layer(dst) > _layer(src)
    ]
    assert not upward, f"imports against the layering {LAYERS}: {sorted(upward)[:10]}"


# Inside ops/, one package per operation; an operation imports its own package and SHARED_OPS, never another.
OPERATIONS = "deltaextras.ops."
SHARED_OPS = ("common",)


def _operation(module: str) -> str | None:
    """The operation package of an ops module (``rorder`` for ``deltaextras.ops.rorder.commit.carry``)."""
    if not module.startswith(OPERATIONS):
        return None
    rest = module[len(OPERATIONS) :].split(".")
    return rest[0] if len(rest) > 1 else None  # a module directly in ops/ belongs to no operation


def sideways_imports(graph: dict[str, set[str]]) -> list[str]:
    """Imports from one operation package into another (``common`` is shared by all, and imports none)."""
    found = []
    for src, targets in graph.items():
        own = _operation(src)
        for dst in targets:
            other = _operation(dst)
            if own and other and other != own and other not in SHARED_OPS:
                found.append(f"{src} imports {dst}")
    return sorted(found)


def test_operations_import_no_sibling_operation() -> None:
    graph = _graph()
    operations = {_operation(m) for m in graph} - {None}
    assert {"rorder", "delete", "maintenance", "common"} <= operations  # the check sees the packages
    assert not [m for m in graph if m.startswith(OPERATIONS) and _operation(m) is None], "modules loose in ops/"
    sideways = sideways_imports(graph)
    assert not sideways, f"operations importing each other: {sideways[:10]}"


def test_sideways_finder_reports_a_sibling_import() -> None:
    graph = {
        "deltaextras.ops.rorder.tiers": {"deltaextras.ops.delete.scan", "deltaextras.ops.common.bounds"},
        "deltaextras.ops.rorder.commit.carry": {"deltaextras.ops.rorder.rewrite.output", "deltaextras.core.dv"},
        "deltaextras.ops.common.table": {"deltaextras.ops.maintenance.vacuum"},
    }
    assert sideways_imports(graph) == [
        "deltaextras.ops.common.table imports deltaextras.ops.maintenance.vacuum",
        "deltaextras.ops.rorder.tiers imports deltaextras.ops.delete.scan",
    ]


MAX_FUNCTION_LINES = 80


def long_functions(source: str, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """The functions of ``source`` longer than ``limit`` lines (docstring included), as ``name (lines)``."""
    return [
        f"{n.name} ({n.end_lineno - n.lineno + 1})"
        for n in ast.walk(ast.parse(source))
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > limit
    ]


def test_no_function_is_longer_than_80_lines() -> None:
    found = [
        f"{path.relative_to(LIBRARY)}: {name}"
        for path in sorted(LIBRARY.rglob("*.py"))
        for name in long_functions(path.read_text())
    ]
    assert not found, "split these functions: " + ", ".join(found)


def test_long_function_finder_counts_lines() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(80))
    assert long_functions(f"def f():\n{body}\n") == ["f (81)"]
    assert long_functions(f"def g():\n{body}\n", limit=81) == []


def test_every_subpackage_is_in_the_wheel() -> None:
    """setuptools ships only the packages pyproject.toml lists: each folder of the library must be there."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    listed = set(tomllib.loads((LIBRARY.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {_module_name(p) for p in LIBRARY.rglob("__init__.py")}
    assert found == listed, f"missing from pyproject.toml: {sorted(found - listed)}; stale: {sorted(listed - found)}"


def test_import_loads_no_cloud_sdk_or_spark() -> None:
    code = (
        "import sys, deltaextras; "
        "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('azure', 'boto3', 'botocore', 'pyspark', 'pandas', 'polars'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "", f"import deltaextras loaded {done.stdout.strip()}"
