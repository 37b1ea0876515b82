"""One source of truth (tests/tools/sync.py): every marked notebook cell is generated from
helpers/, the manifest covers every public definition of the core, and the check can fail: it
prints a diff on drift and fails when a marker disappears."""

import ast
import json
import re
import shutil
from pathlib import Path

import pytest

from tests.tools import sync

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
# The core: what a learner reads (not the course's scaffolding: exercises, figures, course,
# bench; nor the toy task it learns, translation).
CORE = ["attention", "checks", "data", "decoding", "interop", "layers", "masks", "model",
        "positional", "training", "utils", "ablation", "gpt", "generation", "continuation",
        "distributed", "fsdp", "tokens"]


def test_every_marked_cell_equals_helpers():
    found = sync.problems()
    assert not found, "run python -m tests.tools.sync --write:\n\n" + "\n\n".join(found)


def _public(module: str) -> list:
    tree = ast.parse((ROOT / "helpers" / f"{module}.py").read_text())
    return [node.name for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_")]


@pytest.mark.parametrize("module", CORE)
def test_every_public_definition_is_taught_once_or_listed(module):
    taught = [(stem, name) for stem, cells in sync.MANIFEST.items()
              for mod, names, _ in map(sync.entry, cells) if mod == module for name in names]
    names = [name for _, name in taught]
    again = [name for name in set(names) if names.count(name) > 1]
    assert all(f"{module}.{name}" in sync.SHOWN_AGAIN for name in again), (
        f"helpers/{module}.py: taught twice without a reason in SHOWN_AGAIN: {taught}")
    for name in _public(module):
        listed = f"{module}.{name}" in sync.NOT_TAUGHT
        assert not (name in names and listed), f"{module}.{name}: both taught and NOT_TAUGHT"
        assert name in names or listed or module in sync.NOT_TAUGHT, (
            f"helpers/{module}.py: {name} is neither taught (MANIFEST) nor in NOT_TAUGHT with "
            "the reason (a whole module's entry covers the names no notebook teaches)")


def test_not_taught_entries_exist_and_say_why():
    for key, why in sync.NOT_TAUGHT.items():
        module, _, name = key.partition(".")
        assert module in CORE, key
        assert not name or name in _public(module), f"NOT_TAUGHT names a missing {key}"
        assert len(why) > 20, f"NOT_TAUGHT[{key!r}] must give a reason"


# ---------------------------------------------------------------- the check can fail
@pytest.fixture
def copy(tmp_path):
    """A project holding notebook 01 and the modules its marked cells come from."""
    (tmp_path / "helpers" / "exercises").mkdir(parents=True)
    (tmp_path / "notebooks").mkdir()
    shutil.copy(ROOT / "helpers" / "attention.py", tmp_path / "helpers")
    shutil.copy(ROOT / "helpers" / "exercises" / "nb01.py", tmp_path / "helpers" / "exercises")
    shutil.copy(ROOT / "notebooks" / "01_attention.ipynb", tmp_path / "notebooks")
    return tmp_path, {"01_attention": sync.MANIFEST["01_attention"]}


def test_the_copy_starts_in_sync(copy):
    root, manifest = copy
    assert sync.problems(root=root, manifest=manifest) == []


def test_drift_prints_a_unified_diff_and_write_fixes_it(copy):
    root, manifest = copy
    module = root / "helpers" / "attention.py"
    text = module.read_text()
    assert "/ math.sqrt(d_k)" in text
    module.write_text(text.replace("/ math.sqrt(d_k)", "/ d_k"))  # pitfall A1 in the library
    found = sync.problems(root=root, manifest=manifest)
    assert len(found) == 1
    diff = found[0].splitlines()
    assert diff[0].startswith("--- notebooks/01_attention.ipynb") and diff[1].startswith("+++")
    assert any(line.startswith("-") and "/ math.sqrt(d_k)" in line for line in diff)
    assert any(line.startswith("+") and "/ d_k" in line for line in diff)
    sync.problems(write=True, root=root, manifest=manifest)
    assert sync.problems(root=root, manifest=manifest) == []
    assert "/ d_k" in (root / "notebooks" / "01_attention.ipynb").read_text()


def test_a_removed_marker_fails(copy):
    root, manifest = copy
    path = root / "notebooks" / "01_attention.ipynb"
    notebook = json.loads(path.read_text())
    cell = next(c for c, module in sync.marked_cells(notebook) if module == "attention")
    assert cell["source"][1] == "# helpers/attention.py\n"  # below the reference cell's title
    cell["source"][1] = "# the final version\n"  # the marker line is gone
    path.write_text(json.dumps(notebook))
    found = sync.problems(root=root, manifest=manifest)
    assert len(found) == 1, found
    assert "MANIFEST expects marked cells for ['exercises/nb01', 'attention']" in found[0]
    assert "the notebook has ['exercises/nb01']" in found[0]


def test_a_long_cell_needs_its_reason(copy):
    root, manifest = copy
    path = root / "notebooks" / "01_attention.ipynb"
    notebook = json.loads(path.read_text())
    notebook["cells"].append({"cell_type": "code", "metadata": {}, "outputs": [],
                              "execution_count": None, "source": ["x = 1\n"] * 30})
    path.write_text(json.dumps(notebook))
    found = sync.problems(root=root, manifest=manifest)
    assert len(found) == 1 and "30 lines, and the markdown above does not say why" in found[0]


def test_command_line_exit_codes(copy, capsys):
    root, manifest = copy
    assert sync.main(["--check"], root, manifest) == 0
    module = root / "helpers" / "attention.py"
    module.write_text(module.read_text().replace("weights = scores.softmax(dim=-1)",
                                                 "weights = scores.softmax(dim=-2)"))
    assert sync.main(["--check"], root, manifest) == 1
    out = capsys.readouterr().out
    assert "+    weights = scores.softmax(dim=-2)" in out and out.rstrip().endswith("1 problem(s)")
    assert sync.main(["--bogus"]) == 2


# ---------------------------------------------------------------- no forward references
# The notebook that first teaches each helpers module; the others may be used anywhere.
TAUGHT_IN = {"attention": 1, "positional": 2, "interop": 3, "layers": 4, "masks": 6,
             "model": 8, "data": 9, "training": 9, "translation": 9, "decoding": 10,
             "distributed": 13, "fsdp": 13, "gpt": 12, "generation": 12, "continuation": 12,
             "tokens": 14, "pretrained": 15}
ALWAYS_ALLOWED = {"utils", "checks", "figures", "exercises", "course"}
IMPORT = re.compile(r"^\s*(?:from\s+helpers\.(\w+)\s+import|import\s+helpers\.(\w+))", re.M)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_forward_references(path):
    number = int(path.name[:2])
    notebook = json.loads(path.read_text())
    for index, cell in enumerate(notebook["cells"]):
        for match in IMPORT.finditer("".join(cell["source"]) if cell["cell_type"] == "code"
                                     else ""):
            module = match.group(1) or match.group(2)
            if module in ALWAYS_ALLOWED:
                continue
            assert module in TAUGHT_IN, f"{path.name} cell {index} imports unknown helpers.{module}"
            assert TAUGHT_IN[module] <= number, (
                f"{path.name} cell {index} imports helpers.{module}, taught later in notebook "
                f"{TAUGHT_IN[module]:02d}")


NBVAL_MARKERS = {"NBVAL_IGNORE_OUTPUT", "NBVAL_CHECK_OUTPUT", "NBVAL_SKIP",
                 "NBVAL_RAISES_EXCEPTION", "PYTEST_VALIDATE_IGNORE_OUTPUT"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_nbval_markers_are_whole_lines(path):
    """nbval only obeys a comment that is exactly its marker: "# NBVAL_IGNORE_OUTPUT (why)" is
    silently ignored, and the cell's output is compared after all. The reason goes on the next
    line."""
    for index, cell in enumerate(json.loads(path.read_text())["cells"]):
        for line in "".join(cell["source"]).splitlines() if cell["cell_type"] == "code" else []:
            comment = line.strip().lstrip("#").strip() if line.strip().startswith("#") else ""
            if "NBVAL" in comment:
                assert comment in NBVAL_MARKERS, (
                    f"{path.name} cell {index}: {line.strip()!r} is not a marker nbval obeys; "
                    "put the marker alone on its line")


def test_a_reference_cell_gets_its_title_and_is_collapsed_by_write(copy):
    """An entry that names its exercise makes a reference cell: ``--check`` reports one without
    its title or collapsed metadata until ``--write`` adds the Colab title and collapses it in both
    front ends."""
    root, manifest = copy
    assert sync.entry(manifest["01_attention"][1])[2] == "scaled_dot_product_attention"
    path = root / "notebooks" / "01_attention.ipynb"
    notebook = json.loads(path.read_text())
    (cell, _), = [(c, m) for c, m in sync.marked_cells(notebook) if m == "attention"]
    cell["source"] = cell["source"][1:]  # an ordinary marked cell: no title,
    cell["metadata"] = {}  # not collapsed
    path.write_text(json.dumps(notebook))
    found = sync.problems(root=root, manifest=manifest)
    assert any("is not collapsed" in text for text in found), found
    sync.problems(write=True, root=root, manifest=manifest)
    assert sync.problems(root=root, manifest=manifest) == []
    notebook = json.loads(path.read_text())
    (cell, _), = [(c, m) for c, m in sync.marked_cells(notebook) if m == "attention"]
    source = "".join(cell["source"]).split("\n")
    assert source[0] == "#@title Reference answer: scaled_dot_product_attention"
    assert source[1] == "# helpers/attention.py"
    assert sync.is_collapsed(cell)
    cell["metadata"]["jupyter"]["source_hidden"] = False
    assert not sync.is_collapsed(cell)
