"""The maintainers' tools (tests/tools) import what exists: every import in them, at the top or
inside a function (most are lazy, so running a test of one command would not reach them all),
names a module that is found and names that module has. They moved out of helpers/, and a lazy
``from . import tokens`` left behind failed only when the benchmark reached its fifth section."""

import ast
import importlib
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[1] / "tools"


def imports(path: Path) -> list:
    """``(module, name or None)`` for every import in ``path``, relative ones resolved."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = "tests.tools" if node.level == 1 else "tests" if node.level == 2 else ""
            module = ".".join(part for part in (base, node.module) if part)
            found += [(module, alias.name) for alias in node.names]
    return found


MODULES = sorted(p for p in TOOLS.glob("*.py") if p.name != "__init__.py")  # __init__: a docstring


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_every_import_of_the_tools_resolves(path):
    assert imports(path), "no import found: the parser is not reading this file"
    missing = []
    for module, name in imports(path):
        try:
            imported = importlib.import_module(module)
        except ImportError as error:
            missing.append(f"{module}: {error}")
            continue
        if name and not hasattr(imported, name):
            try:
                importlib.import_module(f"{module}.{name}")  # a submodule
            except ImportError:
                missing.append(f"from {module} import {name}")
    assert not missing, missing


def test_a_broken_import_is_found(tmp_path):
    """Not vacuous: the relative import that broke the benchmark is reported."""
    broken = tmp_path / "bench.py"
    broken.write_text("def f():\n    from . import tokens\n")
    assert imports(broken) == [("tests.tools", "tokens")]
    assert not hasattr(importlib.import_module("tests.tools"), "tokens")
