"""The layers import only downwards: wire/ imports nothing of the project; the controller
never imports end-host code (hosts/, inclib/, topologies/); hosts/ reach the controller only
through its API client; inclib/ (the application library) sits above hosts/ and the API
client and below the applications (examples/)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ("wire", "controller", "hosts", "inclib", "topologies", "p4sim", "examples", "tests")

#: package -> the project packages (or single modules) it may import
ALLOWED: dict[str, set[str]] = {
    "wire": {"wire"},
    "controller": {"wire", "controller", "p4sim"},
    "hosts": {"wire", "hosts", "controller.api_client"},
    "inclib": {"wire", "hosts", "inclib", "controller.api_client"},
}

#: Modules that stand in for a whole system in one process (no network), so they play the
#: controller's part themselves; each is named here with its reason. Not a worker agent.
IN_PROCESS_HARNESSES = {
    # an ASK job around an in-process p4sim switch, admitted by the controller's own code
    "topologies/ask_local.py": {"controller"},
}


def project_imports(path: Path) -> set[str]:
    """Every project module ``path`` imports (at any depth in the file)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        found |= {n for n in names if n.split(".")[0] in PROJECT}
    return found


def allowed(name: str, rules: set[str]) -> bool:
    return any(name == r or name.startswith(r + ".") for r in rules)


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_each_layer_imports_only_the_layers_below_it(package: str) -> None:
    wrong = {
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sorted((ROOT / package).rglob("*.py"))
        for name in project_imports(path)
        if not allowed(
            name, ALLOWED[package] | IN_PROCESS_HARNESSES.get(str(path.relative_to(ROOT)), set())
        )
    }
    assert not wrong, sorted(wrong)


def test_the_checker_sees_a_forbidden_import(tmp_path: Path) -> None:
    bad = tmp_path / "m.py"
    bad.write_text("def f():\n    from hosts.protocol import X\n")
    assert project_imports(bad) == {"hosts.protocol"}
    assert not allowed("hosts.protocol", ALLOWED["controller"])
