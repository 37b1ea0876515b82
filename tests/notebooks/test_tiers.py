"""The two tiers of tests. The slow tier (tests marked slow, left out of the README's test command)
holds every test that needs several processes, a second venv or a browser; the Colab-like and
browser suites run shortened copies of the notebooks (tests/shortened.py), where every
replacement still finds its piece of code, once, and a lost piece is an error that names it; and
notebooks are dealt into groups of about equal time (tests/scheduling.py)."""

import ast
import json
import shutil

import nbformat
import pytest

from tests.scheduling import ROOT, notebook_seconds
from tests.shortened import (
    NOTEBOOKS,
    SHORTER,
    end_at_the_last_widget,
    is_widget_cell,
    shorten,
    shorten_file,
    shorten_source,
    shortened_seconds,
    up_to_the_last_widget,
)


def code_sources(path):
    nb = nbformat.read(path, as_version=4)
    return [cell.source for cell in nb.cells if cell.cell_type == "code"]


@pytest.mark.parametrize("name", sorted(SHORTER))
def test_every_replacement_finds_its_code_once(name):
    path = NOTEBOOKS / f"{name}.ipynb"
    before = code_sources(path)
    after = shorten_source(path.name, before)
    changed = [(old, new) for old, new in zip(before, after, strict=True) if old != new]
    assert changed, f"{name}: nothing was shortened"
    for old_piece, new_piece in SHORTER[name]:
        assert sum(new_piece in source for source in after) >= 1
        assert not any(old_piece in source for source in after) or old_piece in new_piece
    for _, source in changed:
        ast.parse(source)  # still Python


def test_a_lost_piece_is_an_error_naming_it():
    name = "09_training"
    sources = code_sources(NOTEBOOKS / f"{name}.ipynb")
    old, _ = SHORTER[name][0]
    edited = [source.replace(old, "STEPS = 400") for source in sources]
    with pytest.raises(LookupError, match=r"09_training\.ipynb has 0 copies of 'STEPS, WARMUP"):
        shorten_source(name, edited)
    twice = [*sources, old]
    with pytest.raises(LookupError, match="has 2 copies"):
        shorten_source(name, twice)


def test_shortened_files_and_nodes_agree(tmp_path):
    name = "12_decoder_only.ipynb"
    copy = tmp_path / name
    shutil.copy(NOTEBOOKS / name, copy)
    shorten_file(copy)
    node = nbformat.read(NOTEBOOKS / name, as_version=4)
    shorten(name, node)
    written = nbformat.read(copy, as_version=4)
    nbformat.validate(written)
    assert [c.source for c in written.cells] == [c.source for c in node.cells]
    assert len(json.loads(copy.read_text())["cells"]) == len(node.cells)
    assert "corpus.test[:20]" in "".join(c.source for c in node.cells)


def test_the_longest_notebooks_are_handed_out_first():
    """conftest.py orders the groups by the notebooks' stored times (the slow suites by
    ``shortened_seconds``): the times are there and tell the notebooks apart."""
    names = [path.stem for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))]
    assert all(notebook_seconds(name) > 0 for name in names)
    assert notebook_seconds("09_training") > notebook_seconds("00_introduction")
    assert shortened_seconds("09_training") < notebook_seconds("09_training")  # 20 steps, not 350


def _marked_slow(function: ast.FunctionDef) -> bool:
    return any("pytest.mark.slow" in ast.unparse(d) for d in function.decorator_list)


@pytest.mark.parametrize("path, needs", [
    ("tests/distributed/test_distributed.py",
     {"spawn", "launch", "two_process_steps"}),  # processes
    ("tests/colab/test_colab_like.py", {"colab_env"}),  # the second venv
    ("tests/browser/test_browser_widgets.py", {"check_notebook_widgets"}),  # Chromium
])
def test_what_needs_processes_a_venv_or_a_browser_is_slow(path, needs):
    """The README's test command leaves out the tests marked slow: every test that starts
    several processes, or needs .venv-colab or Chromium, carries the mark."""
    tree = ast.parse((ROOT / path).read_text())
    tests = [node for node in tree.body
             if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")]
    heavy = [test for test in tests
             if needs & ({n.id for n in ast.walk(test) if isinstance(n, ast.Name)}
                         | {n.attr for n in ast.walk(test) if isinstance(n, ast.Attribute)}
                         | {a.arg for a in test.args.args})]
    assert heavy, f"{path}: no test uses {needs}"
    unmarked = [test.name for test in heavy if not _marked_slow(test)]
    assert not unmarked, f"{path}: not marked slow: {unmarked}"


def test_the_browser_copies_end_at_their_last_widget(tmp_path):
    """The browser suite runs each notebook up to its last widget cell; nothing is cut from a
    notebook without widgets."""
    name = "10_decoding.ipynb"
    copy = tmp_path / name
    shutil.copy(NOTEBOOKS / name, copy)
    end_at_the_last_widget(copy)
    full = json.loads((NOTEBOOKS / name).read_text())["cells"]
    cut = json.loads(copy.read_text())["cells"]
    widgets = [index for index, cell in enumerate(full) if is_widget_cell(cell)]
    assert widgets and len(cut) == widgets[-1] + 1 < len(full)
    assert cut == full[:len(cut)]
    plain = json.loads((NOTEBOOKS / "05_encoder.ipynb").read_text())["cells"]
    assert not any(map(is_widget_cell, plain)) and up_to_the_last_widget(plain) == plain
