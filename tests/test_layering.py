"""The layers import only downwards, and no module imports itself round a circle.

- wire/ (the protocol), p4rt_config/ (the runtime-JSON format) and cbuild/ (C compiled on
  first use and cached) import nothing of ours;
- p4sim/ (the switch) imports nothing of ours but p4rt_config/, a data format it shares with
  the controller, so that neither imports the other, and cbuild/, which it shares with the
  hosts' native data path;
- controller/ imports neither p4sim/ nor end-host code (hosts/, inclib/, topologies/): it
  reaches switches over P4Runtime only;
- hosts/ reach the controller only through its API client (and build C with cbuild/);
- inclib/ (the application library) sits above hosts/ and the API client;
- topologies/ and tests/ sit on top and may import anything (the in-process switch,
  topologies/local_switch.py, is where p4sim meets the controller).

Cycles: the import graph of the project's modules has no circle. Imports under
``if TYPE_CHECKING:`` count too: a module that names another's type depends on it as much as
one that calls it (where only a few members are needed, a ``Protocol`` states them). An
import of a module's own enclosing package does not count, since Python has already
started loading it.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROJECT = (
    "wire",
    "cbuild",
    "p4rt_config",
    "controller",
    "hosts",
    "inclib",
    "topologies",
    "p4sim",
    "examples",
    "tests",
)

#: package -> the project packages (or single modules) it may import
ALLOWED: dict[str, set[str]] = {
    "wire": {"wire"},
    "p4rt_config": {"p4rt_config"},
    "cbuild": {"cbuild"},
    "p4sim": {"p4sim", "p4rt_config", "cbuild"},
    "controller": {"wire", "p4rt_config", "controller"},
    "hosts": {"wire", "cbuild", "hosts", "controller.api_client"},
    "inclib": {"wire", "cbuild", "hosts", "inclib", "controller.api_client"},
}

#: Folders that keep their modules in subpackages by layer or system (the rest: a few).
MAX_DIRECT_MODULES = {"controller": 12, "hosts": 12}


def module_name(path: Path) -> str:
    if not path.is_relative_to(ROOT):
        return path.stem  # a module written by a test of this checker
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def project_modules() -> dict[str, Path]:
    return {
        module_name(p): p
        for package in PROJECT
        for p in sorted((ROOT / package).rglob("*.py"))
        if "__pycache__" not in p.parts
    }


def imported_names(path: Path) -> set[str]:
    """Every dotted name ``path`` imports, at any depth in the file (``from a import b``
    gives ``a`` and ``a.b``), ``if TYPE_CHECKING:`` blocks included."""
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            visit_one(child)

    def visit_one(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([node.module] if node.module else []))
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
        visit(node)

    visit(ast.parse(path.read_text(), str(path)))
    return found


def project_imports(path: Path) -> set[str]:
    """Every project module or package ``path`` imports (as written)."""
    names = imported_names(path)
    modules = project_modules()
    out = set()
    for n in names:
        if n.split(".")[0] not in PROJECT:
            continue
        parent = n.rpartition(".")[0]
        # ``from a import b``: b is a name in a unless a.b is a module
        out.add(n if n in modules or parent not in names or not parent else parent)
    return out


def import_graph() -> dict[str, set[str]]:
    """module -> the project modules it imports (not its own packages)."""
    modules = project_modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for n in imported_names(path):
            while n and n not in modules:
                n = n.rpartition(".")[0]
            if n and n != name and not name.startswith(n + "."):
                targets.add(n)
        graph[name] = targets
    return graph


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    component.add(m)
                    if m == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def allowed(name: str, rules: set[str]) -> bool:
    return any(name == r or name.startswith(r + ".") for r in rules)


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_each_layer_imports_only_the_layers_below_it(package: str) -> None:
    wrong = {
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sorted((ROOT / package).rglob("*.py"))
        for name in project_imports(path)
        if not allowed(name, ALLOWED[package])
    }
    assert not wrong, sorted(wrong)


def test_no_module_imports_itself_round_a_circle() -> None:
    found = circles(import_graph())
    assert not found, [sorted(c) for c in found]


@pytest.mark.parametrize("package", sorted(MAX_DIRECT_MODULES))
def test_a_layered_package_holds_few_modules_directly(package: str) -> None:
    direct = sorted(p.name for p in (ROOT / package).glob("*.py"))
    assert len(direct) <= MAX_DIRECT_MODULES[package], direct


def test_the_checker_sees_a_forbidden_import(tmp_path: Path) -> None:
    bad = tmp_path / "m.py"
    bad.write_text("def f():\n    from hosts.protocol import X\n")
    assert "hosts.protocol" in imported_names(bad)
    assert not allowed("hosts.protocol", ALLOWED["controller"])


def test_the_cycle_detector_finds_a_circle_and_ignores_a_chain() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert circles(graph) == [{"a", "b", "c"}]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_an_import_for_type_checking_only_counts(tmp_path: Path) -> None:
    mod = tmp_path / "m.py"
    mod.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from controller.job_manager import JobManager\n"
        "else:\n    import json\n"
    )
    assert {"controller.job_manager", "json"} <= imported_names(mod)
