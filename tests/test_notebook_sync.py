"""One source of truth: each notebook's marked cell defines exactly what ``helpers/`` holds.

A code cell whose first line is ``# helpers/<module>.py`` holds the finished definitions of that
module's functions and classes. Each top-level ``def``/``class`` in it must equal the same-named one
in ``helpers/<module>.py`` once parsed (comments, formatting and docstrings aside).

Also: no notebook imports a helper module that a later notebook teaches (no forward references).
"""

import ast
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
MARKER = re.compile(r"^#\s*helpers/(\w+)\.py\s*$")

# The notebook that first teaches each helper module. Utilities may be used anywhere.
TAUGHT_IN = {"attention": 1, "positional": 2, "interop": 3, "layers": 4, "masks": 6,
             "model": 8, "data": 9, "training": 9, "decoding": 10}
ALWAYS_ALLOWED = {"utils", "plotting", "exercises", "course"}


def _without_docstrings(node: ast.AST) -> ast.AST:
    for child in ast.walk(node):
        body = getattr(child, "body", None)
        if (isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            child.body = body[1:] or [ast.Pass()]
    return node


def definitions(source: str) -> dict:
    """Top-level functions and classes of ``source``, as comparable AST dumps."""
    tree = ast.parse(source)
    return {node.name: ast.dump(_without_docstrings(node), include_attributes=False)
            for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


def differences(cell_source: str, module_source: str) -> list:
    """Names defined in the cell that are missing from, or differ from, the module."""
    ours, reference = definitions(cell_source), definitions(module_source)
    problems = []
    for name, dump in ours.items():
        if name not in reference:
            problems.append(f"{name}: not defined in the helpers module")
        elif dump != reference[name]:
            problems.append(f"{name}: differs from the helpers module")
    return problems


def code_cells(path: Path):
    notebook = json.loads(path.read_text())
    for index, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] == "code":
            yield index, "".join(cell["source"])


def marked_cells():
    for path in NOTEBOOKS:
        for index, source in code_cells(path):
            lines = source.splitlines()
            match = MARKER.match(lines[0]) if lines else None
            if match:
                yield pytest.param(path, index, match.group(1), source,
                                   id=f"{path.stem}-cell{index}-{match.group(1)}")


@pytest.mark.parametrize("path, index, module, source", list(marked_cells()))
def test_marked_cell_equals_helpers(path, index, module, source):
    module_file = ROOT / "helpers" / f"{module}.py"
    assert module_file.exists(), f"{path.name} cell {index} names a missing helpers/{module}.py"
    assert definitions(source), f"{path.name} cell {index} is marked but defines nothing"
    problems = differences(source, module_file.read_text())
    assert not problems, f"{path.name} cell {index} vs helpers/{module}.py: " + "; ".join(problems)


def test_every_taught_notebook_has_a_marked_cell():
    """Notebooks 01-04 each build at least one helper in the open."""
    marked = {p.name for p, *_ in (param.values for param in marked_cells())}
    for path in NOTEBOOKS:
        number = int(path.name[:2])
        if 1 <= number <= 4:
            assert path.name in marked, f"{path.name} has no cell marked '# helpers/<module>.py'"


# ---------------------------------------------------------------- the check can fail
REFERENCE = '''
def layer_norm(x, weight, bias, eps=1e-5):
    """Normalise."""
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True, unbiased=False)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias
'''


def test_same_code_with_other_comments_and_docstring_passes():
    cell = '''# helpers/layers.py
def layer_norm(x, weight, bias, eps=1e-5):
    # a comment the module does not have
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1,   keepdim=True, unbiased=False)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias
'''
    assert differences(cell, REFERENCE) == []


@pytest.mark.parametrize("drift", [
    "unbiased=True",                      # N1 crept into the notebook
    "torch.sqrt(var) + eps",              # N2
    "def layer_norm(x, weight, bias, eps=1e-6)",  # a changed default
])
def test_a_drifted_definition_is_caught(drift):
    original = {"unbiased=True": "unbiased=False",
                "torch.sqrt(var) + eps": "torch.sqrt(var + eps)",
                "def layer_norm(x, weight, bias, eps=1e-6)":
                    "def layer_norm(x, weight, bias, eps=1e-5)"}
    cell = "# helpers/layers.py\n" + REFERENCE.replace(original[drift], drift)
    assert cell != "# helpers/layers.py\n" + REFERENCE
    assert differences(cell, REFERENCE) == ["layer_norm: differs from the helpers module"]


def test_a_name_missing_from_helpers_is_caught():
    assert differences("def layer_norm_v2(x):\n    return x\n", REFERENCE) == [
        "layer_norm_v2: not defined in the helpers module"]


# ---------------------------------------------------------------- no forward references
IMPORT = re.compile(r"^\s*(?:from\s+helpers\.(\w+)\s+import|import\s+helpers\.(\w+))", re.M)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_forward_references(path):
    number = int(path.name[:2])
    for index, source in code_cells(path):
        for match in IMPORT.finditer(source):
            module = match.group(1) or match.group(2)
            if module in ALWAYS_ALLOWED:
                continue
            assert module in TAUGHT_IN, f"{path.name} cell {index} imports unknown helpers.{module}"
            assert TAUGHT_IN[module] <= number, (
                f"{path.name} cell {index} imports helpers.{module}, taught later in notebook "
                f"{TAUGHT_IN[module]:02d}")
