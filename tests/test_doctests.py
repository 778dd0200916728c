"""The examples in the docstrings of wire/, controller/, hosts/ and inclib/ run as shown."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

PACKAGES = ("wire", "controller", "hosts", "inclib", "examples")


def modules() -> list[str]:
    """Every module of PACKAGES whose docstrings hold at least one example."""
    names = []
    for package in PACKAGES:
        pkg = importlib.import_module(package)
        for info in pkgutil.iter_modules(pkg.__path__, f"{package}."):
            tests = doctest.DocTestFinder().find(importlib.import_module(info.name))
            if any(t.examples for t in tests):
                names.append(info.name)
    return sorted(names)


@pytest.mark.parametrize("name", modules())
def test_docstring_examples_hold(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed"
