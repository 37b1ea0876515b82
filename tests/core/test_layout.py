"""The shape of ``helpers/``: a small core a learner can read, no module too long to read, and
every module's imports at its top (the lazy ones inside the functions that need them)."""

import ast
from pathlib import Path

import pytest

HELPERS = Path(__file__).resolve().parents[2] / "helpers"
# The 2017 Transformer and what trains and saves it: what notebooks 01-10 build.
CORE = ["__init__", "attention", "checks", "data", "decoding", "interop", "layers", "masks",
        "model", "positional", "training", "utils"]
# helpers/*.py beyond the core: the benchmark, and the modules of the two notebooks past the
# paper (12: gpt and modern, 13: distributed and fsdp). The subpackages (course, exercises,
# figures, translation) are the course around the model.
BEYOND = ["bench", "distributed", "fsdp", "gpt", "modern"]
MODULES = sorted(HELPERS.rglob("*.py"))


def lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def test_every_top_level_module_is_core_or_named_beyond_it():
    assert sorted(p.stem for p in HELPERS.glob("*.py")) == sorted(CORE + BEYOND)


def test_the_core_is_about_1500_lines():
    sizes = {name: lines(HELPERS / f"{name}.py") for name in CORE}
    assert sum(sizes.values()) <= 1550, sizes


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(HELPERS)))
def test_no_module_is_over_400_lines(path):
    assert lines(path) <= 400


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(HELPERS)))
def test_imports_come_first(path):
    """Top-level imports all come before the first definition; a lazy import sits inside the
    function that needs it (so that importing the module stays light)."""
    body = ast.parse(path.read_text()).body
    first = next((n.lineno for n in body if isinstance(
        n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))), None)
    late = [n.lineno for n in body if isinstance(n, (ast.Import, ast.ImportFrom))
            and first is not None and n.lineno > first]
    assert late == [], f"{path.name}: imports on lines {late}, below the first definition"
