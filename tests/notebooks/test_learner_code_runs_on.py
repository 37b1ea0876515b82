"""The learner's code runs on: once an answer passes its check, the cells after it use it.

A notebook hands an answer on with ``name = check("exercise", my_answer, use=True)``: the
answer if it passes, the course's definition otherwise. Here
each answer's cell is followed by a correct answer that counts its calls (the course's definition,
wrapped), the notebook runs top to bottom, and the later cells must have called it. With the
stored stubs, the same cells run the course's definition (the stored outputs, under nbval).
"""

import ast
import json
import os
import re
from pathlib import Path

import nbformat
import pytest

from helpers.exercises.engine import MODULES

ROOT = Path(__file__).resolve().parents[2]
USE = re.compile(r'^(\w+) = check\("(\w+)", (\w+), use=True\)', re.MULTILINE)
# Notebooks cheap enough for the README's command; every other notebook runs in the slow tier.
FAST = {"01_attention", "03_multi_head_attention"}


def handed_on(notebook: dict) -> list:
    """``(cell index, name below, exercise, learner's name)`` of each ``check(..., use=True)``."""
    found = []
    for index, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] == "code":
            found += [(index, *m.groups()) for m in USE.finditer("".join(cell["source"]))]
    return found


NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
CASES = [pytest.param(path, marks=[] if path.stem in FAST else [pytest.mark.slow], id=path.stem)
         for path in NOTEBOOKS if handed_on(json.loads(path.read_text()))]

RECORDER = '''\
from helpers.exercises.engine import lookup as _lookup
_course = _lookup({exercise!r}).runs_as or _lookup({exercise!r}).reference
if isinstance(_course, type):  # a class exercise: the learner writes one method
    _method = getattr(_lookup({exercise!r}).cases()[0], "method", "forward")

    def _counted(self, *args, _inner=getattr(_course, _method), **kwargs):
        CALLS[{exercise!r}] += 1
        return _inner(self, *args, **kwargs)

    {learner} = type({learner!r}, (_course,), {{_method: _counted}})  # counts its calls
else:
    def {learner}(*args, _inner=_course, **kwargs):  # a correct answer that counts its calls
        CALLS[{exercise!r}] += 1
        return _inner(*args, **kwargs)
'''


def defining_cell(notebook: dict, name: str, before: int) -> int:
    """The last code cell before ``before`` that defines ``name`` (the learner's answer)."""
    for index in range(before - 1, -1, -1):
        cell = notebook["cells"][index]
        if cell["cell_type"] != "code":
            continue
        try:
            tree = ast.parse("".join(cell["source"]))
        except SyntaxError:  # a cell with IPython magics
            continue
        if any(isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name
               for node in tree.body):
            return index
    raise AssertionError(f"no cell before cell {before} defines {name}")


# At least these answers run on in their notebooks (issue 39): notebook -> exercises.
REQUIRED = {
    "01_attention": {"scaled_dot_product_attention"},
    "03_multi_head_attention": {"multi_head_attention"},
    "05_encoder": {"encoder_layer"},
    "07_decoder": {"decoder_layer"},
    "08_transformer": {"transformer_decode"},
    "09_training": {"train_step"},
    "10_decoding": {"beam_search"},
    "12_decoder_only": {"gpt"},
    "14_subword_tokens": {"train_bpe"},
    "15_pretrained_translator": {"load_marian"},
}


@pytest.mark.parametrize("stem", REQUIRED)
def test_required_answers_run_on(stem):
    notebook = json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text())
    used = {exercise for _, _, exercise, _ in handed_on(notebook)}
    assert REQUIRED[stem] <= used, f"{stem}: hand {sorted(REQUIRED[stem] - used)} on with " \
                                   "`name = check(\"exercise\", my_answer, use=True)`"


def test_every_use_names_a_known_exercise():
    for path in NOTEBOOKS:
        for index, below, exercise, learner in handed_on(json.loads(path.read_text())):
            assert exercise in MODULES, f"{path.name} cell {index}: unknown exercise {exercise}"
            assert below != learner, f"{path.name} cell {index}: hand the answer on under a new " \
                                     "name, so that re-running the check cannot check the course's"


@pytest.mark.parametrize("path", CASES)
def test_later_cells_call_the_learners_answer(path, tmp_path):
    from tests.tools.bench import execute_notebook  # does not stall at an interact cell
    from helpers.pretrained import OFFLINE_VARIABLE  # notebook 15 offline, as the tests run it

    notebook = nbformat.read(path, as_version=4)
    uses = handed_on(notebook)
    inserts = {}  # cell index -> cells to insert after it
    for index, below, exercise, learner in uses:
        definer = defining_cell(notebook, learner, index)
        inserts.setdefault(definer, []).append(nbformat.v4.new_code_cell(RECORDER.format(
            exercise=exercise, learner=learner)))
        inserts.setdefault(index, []).append(nbformat.v4.new_code_cell(
            f"CALLS[{exercise!r}] = 0  # from here on, only the later cells' calls count"))
    cells = [nbformat.v4.new_code_cell("import collections\nCALLS = collections.Counter()")]
    for index, cell in enumerate(notebook.cells):
        cells += [cell, *inserts.get(index, [])]
    exercises = sorted({exercise for _, _, exercise, _ in uses})
    cells.append(nbformat.v4.new_code_cell(
        f"import json\nprint('CALLS=' + json.dumps({{e: CALLS[e] for e in {exercises!r}}}))"))
    notebook.cells = cells
    execute_notebook(notebook, path.parent, timeout=120,
                     env={**os.environ, "OMP_NUM_THREADS": "1", OFFLINE_VARIABLE: "1"})
    printed = "".join(out.get("text", "") for out in notebook.cells[-1].outputs)
    calls = json.loads(printed.split("CALLS=", 1)[1])
    unused = [exercise for exercise, n in calls.items() if n == 0]
    assert not unused, f"{path.name}: no cell after the check calls the learner's answer to " \
                       f"{unused} (calls: {calls})"
