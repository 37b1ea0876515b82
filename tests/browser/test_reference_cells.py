"""Browser test: a reference answer is collapsed in JupyterLab, and opens when clicked.

Write first, then see the answer (tests/notebooks/test_write_first.py checks the notebooks' JSON):
here JupyterLab itself, in a real Chromium, must show each reference cell of the first notebook
that has one as a one-line placeholder (its ``#@title Reference answer`` line and an ellipsis),
with no code on the page, and show the code once the placeholder is clicked. Screenshots of the
cell before and after the click go to the browser tests' screenshot folder.
"""

import ast
import json
import re

import lab_harness
import pytest

from tests.shortened import up_to_the_last_widget

TITLE = "#@title Reference answer"


def _source(cell) -> str:
    return "".join(cell["source"])


def first_notebook_with_references():
    """(path relative to the course, number of cells, [(index, title, a definition's line)]) of
    the first notebook whose copy in the tests' JupyterLab (which ends at the last widget,
    tests/shortened.py) has a reference cell."""
    for path in sorted((lab_harness.ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        cells = up_to_the_last_widget(json.loads(path.read_text())["cells"])
        found = []
        for index, cell in enumerate(cells):
            text = _source(cell)
            if cell["cell_type"] == "code" and text.startswith(TITLE):
                node = next(n for n in ast.parse(text).body
                            if isinstance(n, (ast.FunctionDef, ast.ClassDef)))
                kind = "class" if isinstance(node, ast.ClassDef) else "def"
                found.append((index, text.split("\n", 1)[0], f"{kind} {node.name}"))
        if found:
            return path.relative_to(lab_harness.ROOT).as_posix(), len(cells), found
    return None


def test_a_notebook_has_reference_cells():
    """The browser test below is not vacuous."""
    found = first_notebook_with_references()
    assert found is not None and found[2], "no notebook has a '#@title Reference answer' cell"


@pytest.mark.slow
def test_reference_cells_are_collapsed_and_open_on_click(request):
    lab_harness.require_browser()
    shots = request.getfixturevalue("screenshot_dir") / "reference-cells"  # first: torn down last
    lab = request.getfixturevalue("lab_server")
    browser = request.getfixturevalue("chromium")
    shots.mkdir(parents=True, exist_ok=True)
    path, count, references = first_notebook_with_references()
    lab.delete_sessions()
    page = browser.context.new_page()
    try:
        page.goto(f"{lab.url}/lab/workspaces/tfs-reference-cells/tree/{path}?reset")
        page.wait_for_function(
            "n => document.querySelectorAll('.jp-Notebook .jp-Cell').length === n",
            arg=count, timeout=90_000)
        cells = page.locator(".jp-Notebook .jp-Cell")
        for index, title, definition in references:  # every one collapsed
            cell = cells.nth(index)
            placeholder = cell.locator(".jp-InputPlaceholder")
            assert placeholder.count() == 1 and placeholder.is_visible(), (
                f"{path} cell {index}: no collapsed-input placeholder")
            assert placeholder.inner_text().strip() == title, placeholder.inner_text()
            assert cell.locator(".jp-InputArea-editor").filter(visible=True).count() == 0
            assert definition not in cell.inner_text(), f"{path} cell {index} shows its code"

        index, title, definition = references[0]
        cell = cells.nth(index)
        cell.scroll_into_view_if_needed()
        cell.screenshot(path=shots / f"cell{index:02d}_collapsed.png")
        cell.locator(".jp-InputPlaceholder .jp-Placeholder-content").click()
        editor = cell.locator(".jp-InputArea-editor")
        editor.wait_for(state="visible", timeout=10_000)
        assert cell.locator(".jp-InputPlaceholder").count() == 0
        text = editor.inner_text()
        assert text.startswith(title) and re.search(rf"^{definition}\b", text, re.M), text[:300]
        cell.screenshot(path=shots / f"cell{index:02d}_opened.png")
        lab_harness.REPORT.append(f"  {path} cell {index}: collapsed, opened by a click; "
                                  f"screenshots in {shots}")
    finally:
        page.close()
        lab.delete_sessions()
