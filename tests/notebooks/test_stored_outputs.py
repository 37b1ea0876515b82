"""What a reader without a kernel sees: the stored outputs of the notebooks.

- each figure once: a slider cell stores its widget, not a second copy of the figure that the cell
  before it draws (``tests.tools.commands.drop_repeated_figures``, applied by ``--execute``);
- each notebook's first cell says how long running every cell takes, and the figure is true of
  the stored run (its cells' start and reply times), with a margin for another machine.
"""

import json
import re
from pathlib import Path

import nbformat
import pytest

from tests.tools.commands import drop_repeated_figures
from tests.scheduling import notebook_seconds

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
WIDGET = "application/vnd.jupyter.widget-view+json"
# "**Running every cell** takes about 20 seconds" (or "about a minute", "about 2 minutes")
RUN_TIME = re.compile(r"\*\*Running every cell\*\* takes about (?P<n>\d+|a) (?P<unit>seconds|minutes?)")


def test_drop_repeated_figures_keeps_the_widget_and_the_text():
    cell = nbformat.v4.new_code_cell("_ = interact(show, n=(1, 3))")
    figure = nbformat.v4.new_output("display_data", {"image/png": "iVBOR", "text/plain": "<Figure>"})
    widget = nbformat.v4.new_output("display_data", {WIDGET: {"model_id": "x"},
                                                     "text/plain": "interactive(...)"})
    printed = nbformat.v4.new_output("stream", name="stdout", text="n is 1\n")
    cell.outputs = [figure, printed, widget]
    plain = nbformat.v4.new_code_cell("show(1)")
    plain.outputs = [figure]
    notebook = nbformat.v4.new_notebook(cells=[plain, cell])
    drop_repeated_figures(notebook)
    assert cell.outputs == [printed, widget]
    assert plain.outputs == [figure]  # the static figure before the slider stays


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_slider_cell_stores_no_second_figure(path):
    for index, cell in enumerate(json.loads(path.read_text())["cells"]):
        if cell["cell_type"] != "code" or "interact(" not in "".join(cell["source"]):
            continue
        kinds = [kind for out in cell.get("outputs", []) for kind in out.get("data", {})]
        assert not any(kind.startswith("image/") for kind in kinds), (
            f"{path.name} cell {index}: the slider's stored output repeats a figure; re-execute "
            f"the notebook with `python -m tests.tools --execute {path.relative_to(ROOT)}`")


def stated_seconds(path) -> float:
    """The run time that a notebook's first cell states, in seconds."""
    first = "".join(json.loads(path.read_text())["cells"][0]["source"])
    found = RUN_TIME.findall(first)
    assert len(found) == 1, f"{path.name}: its first cell should say once '**Running every " \
                            f"cell** takes about N seconds' (or minutes)"
    n, unit = found[0]
    return (1 if n == "a" else int(n)) * (60 if unit.startswith("minute") else 1)


def test_stated_seconds_reads_both_units(tmp_path):
    path = tmp_path / "x.ipynb"
    for text, seconds in [("**Running every cell** takes about 20 seconds on", 20),
                          ("**Running every cell** takes about a minute.", 60),
                          ("**Running every cell** takes about 2 minutes.", 120)]:
        path.write_text(json.dumps({"cells": [{"cell_type": "markdown", "source": [text]}]}))
        assert stated_seconds(path) == seconds


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_first_cell_states_the_run_time_of_the_stored_run(path):
    """The stated time is within a factor of 1.5 of the stored run's, either way: a learner's
    machine may be slower or faster than the one that stored it, but not by a made-up factor."""
    stated, stored = stated_seconds(path), notebook_seconds(path.stem)
    assert stored / 1.5 <= stated <= stored * 1.5 + 5, (
        f"{path.name}: the first cell says about {stated:.0f} s; its stored run took {stored:.0f} s")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_stored_run_is_within_the_notebooks_limit(path):
    """``tests.tools.bench``'s limits (a minute; 09 and 13, whose training and processes are the
    lesson, a minute and a half), held against the run that stored the outputs (one torch
    thread). ``python -m tests.tools.bench --notebooks`` measures them afresh, side by side."""
    from tests.tools.bench import notebook_limit

    stored = notebook_seconds(path.stem)
    assert stored <= notebook_limit(path.name), (
        f"{path.name}: its stored run took {stored:.0f} s, over its limit of "
        f"{notebook_limit(path.name)} s")
