"""``test_write_first`` fails on every way of showing an answer before the learner writes it.

Each test takes a real notebook (15, whose exercises are the last of the course, and 01), puts
one doctored cell in front of an exercise's learner cell (or moves one there), writes the copy
to a temporary folder, reads it back and asserts that ``problems`` names that cell. The notebooks
as stored pass (``test_write_first.test_no_answer_before_the_learner_writes_it``).
"""

import ast
import contextlib
import copy
import inspect
import io
import json
import re
import textwrap
from pathlib import Path

import pytest

from tests.tools import sync
from helpers.exercises import engine
from tests.notebooks.test_write_first import exercises, problems, source

ROOT = Path(__file__).resolve().parents[2]
NB15 = ROOT / "notebooks" / "15_pretrained_translator.ipynb"
NB01 = ROOT / "notebooks" / "01_attention.ipynb"


def original(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def learner_cell(notebook: dict, exercise: str) -> int:
    return next(learner for name, learner, _ in exercises(notebook) if name == exercise)


def code(text: str, outputs=()) -> dict:
    return {"cell_type": "code", "metadata": {}, "execution_count": None,
            "outputs": list(outputs), "source": text.splitlines(keepends=True)}


def markdown(text: str) -> dict:
    return {"cell_type": "markdown", "metadata": {}, "source": text.splitlines(keepends=True)}


def doctored(tmp_path, path: Path, exercise: str, cell: dict) -> tuple:
    """The notebook with ``cell`` inserted just before the learner's cell of ``exercise``,
    written to and read back from ``tmp_path``; with the index the cell landed at."""
    notebook = copy.deepcopy(original(path))
    at = learner_cell(notebook, exercise)
    notebook["cells"].insert(at, cell)
    copied = tmp_path / path.name
    copied.write_text(json.dumps(notebook, indent=1, ensure_ascii=False), encoding="utf-8")
    return json.loads(copied.read_text(encoding="utf-8")), at


def reference(exercise: str) -> str:
    """The first source ``solution(exercise)`` prints, as text."""
    return textwrap.dedent(inspect.getsource(engine.lookup(exercise).sources[0]))


def renamed(text: str, names: dict) -> str:
    for old, new in names.items():
        text = re.sub(rf"\b{old}\b", new, text)
    return text


def fails_at(tmp_path, path, exercise, cell, *words):
    notebook, at = doctored(tmp_path, path, exercise, cell)
    found = problems(notebook, path.stem)
    assert any(f"cell {at} " in text and all(w in text for w in words) for text in found), found
    return found


@pytest.mark.parametrize("path", [NB15, NB01], ids=lambda p: p.stem)
def test_the_notebooks_as_stored_pass(path):
    assert problems(original(path), path.stem) == []


# ---------------------------------------------------------------- the doctored forms
def test_a_collapsed_reference_before_the_learner_fails(tmp_path):
    notebook = copy.deepcopy(original(NB15))
    cells = notebook["cells"]
    titled = next(i for i, c in enumerate(cells)
                  if source(c).startswith("#@title Reference answer: load_marian"))
    assert sync.is_collapsed(cells[titled])
    at = learner_cell(notebook, "load_marian")
    cells.insert(at, cells.pop(titled))  # still collapsed, now above the stub
    path = tmp_path / NB15.name
    path.write_text(json.dumps(notebook), encoding="utf-8")
    found = problems(json.loads(path.read_text(encoding="utf-8")))
    assert any(f"cell {at} shows load_marian" in text and "collapsed" in text
               for text in found), found


@pytest.mark.parametrize("path, exercise", [(NB15, "marian_decoder_inputs"),
                                            (NB01, "masked_softmax")],
                         ids=["15", "01"])
def test_a_copy_with_renamed_locals_fails(tmp_path, path, exercise):
    text = reference(exercise)
    tree_locals = sorted({node.id for node in ast.walk(ast.parse(text))
                          if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)})
    assert tree_locals, "the reference has a local to rename"
    changed = renamed(text, {name: f"my_{name}_2" for name in tree_locals})
    changed = changed.replace(f"def {engine.lookup(exercise).sources[0].__name__}(", "def other(")
    assert changed != text
    fails_at(tmp_path, path, exercise, code(changed), "shows other")


@pytest.mark.parametrize("path, exercise", [(NB15, "marian_decoder_inputs"),
                                            (NB15, "interleave_halves"),
                                            (NB01, "masked_softmax")],
                         ids=["15-inputs", "15-interleave", "01"])
def test_a_copy_with_renamed_parameters_fails(tmp_path, path, exercise):
    fn = engine.lookup(exercise).sources[0]
    parameters = list(inspect.signature(fn).parameters)
    changed = renamed(reference(exercise), {p: f"arg{i}" for i, p in enumerate(parameters)})
    changed = changed.replace(f"def {fn.__name__}(", "def shifted_copy(")
    changed = re.sub(r"(def shifted_copy\([^)]*\))\s*->\s*[^:]+:", r"\1:", changed)  # no hints
    fails_at(tmp_path, path, exercise, code(changed), "shows shifted_copy")


@pytest.mark.parametrize("call", [
    'import helpers.exercises as ex\nex.solution("marian_decoder_inputs")\n',
    'from helpers import exercises\nexercises.solution("marian_decoder_inputs")\n',
    'from helpers.exercises import solution as show\nshow("marian_decoder_inputs")\n',
    'from helpers.exercises import engine\nengine.solution(name="marian_decoder_inputs")\n',
], ids=["module-as-ex", "module", "alias", "keyword"])
def test_a_qualified_or_aliased_solution_call_fails(tmp_path, call):
    fails_at(tmp_path, NB15, "marian_decoder_inputs", code(call),
             "calls solution('marian_decoder_inputs')")


def test_the_answer_as_a_lambda_fails(tmp_path):
    answer = ("shift = lambda y, p: torch.cat([torch.full_like(y[:, :1], p), y[:, :-1]], "
              "dim=1)\n")
    fails_at(tmp_path, NB15, "marian_decoder_inputs", code(answer), "shows shift")
    inline = "print((lambda y, p: torch.cat([torch.full_like(y[:, :1], p), y[:, :-1]], 1)))\n"
    inline = inline.replace(", 1)", ", dim=1)")
    fails_at(tmp_path, NB15, "marian_decoder_inputs", code(inline), "shows lambda")


def test_the_answer_under_its_own_name_as_a_lambda_fails(tmp_path):
    answer = "interleave_halves = lambda pe: pe\n"  # wrong, but named as the answer it gives
    fails_at(tmp_path, NB15, "interleave_halves", code(answer), "shows interleave_halves")


@pytest.mark.parametrize("fence", ["```python", "```", "~~~py"])
def test_the_answer_in_a_markdown_code_block_fails(tmp_path, fence):
    end = fence[:3]
    text = f"Here is how:\n\n{fence}\n{reference('interleave_halves')}{end}\n\nNow you.\n"
    fails_at(tmp_path, NB15, "interleave_halves", markdown(text),
             "shows interleave_halves in a markdown code block")


def test_solution_in_a_markdown_code_block_fails(tmp_path):
    text = "Stuck? Run\n\n```python\nsolution(\"interleave_halves\")\n```\n"
    fails_at(tmp_path, NB15, "interleave_halves", markdown(text),
             "calls solution('interleave_halves')")


def _printed_solution(exercise: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        engine.solution(exercise)
    return out.getvalue()


@pytest.mark.parametrize("kind", ["stream", "text/plain", "text/html"])
def test_the_answer_printed_in_a_stored_output_fails(tmp_path, kind):
    text = _printed_solution("marian_decoder_inputs")
    assert "def marian_decoder_inputs(" in text
    if kind == "stream":
        output = {"output_type": "stream", "name": "stdout", "text": text.splitlines(True)}
    elif kind == "text/plain":
        output = {"output_type": "execute_result", "execution_count": 1, "metadata": {},
                  "data": {"text/plain": text.splitlines(True)}}
    else:
        escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        output = {"output_type": "display_data", "metadata": {},
                  "data": {"text/html": [f"<pre><code>{escaped}</code></pre>"]}}
    harmless = code("show_the_way()\n", [output])  # the code itself shows nothing
    fails_at(tmp_path, NB15, "marian_decoder_inputs", harmless,
             "prints marian_decoder_inputs in its stored output")


def test_a_printed_copy_under_another_name_fails(tmp_path):
    text = renamed(reference("interleave_halves"), {"interleave_halves": "swap_columns",
                                                    "pe": "table"})
    output = {"output_type": "stream", "name": "stdout",
              "text": ["the function, for the curious:\n", *text.splitlines(True)]}
    fails_at(tmp_path, NB15, "interleave_halves", code("print(SECRET)\n", [output]),
             "prints swap_columns in its stored output")


# ---------------------------------------------------------------- no false alarms
def test_other_code_before_the_learner_passes(tmp_path):
    """A demonstration that shares a line with the answer, but is not the answer, passes."""
    demo = ("def show(labels, pad_id):\n"
            "    start = torch.full_like(labels[:, :1], pad_id)\n"
            "    return start.shape\n")
    notebook, _ = doctored(tmp_path, NB15, "marian_decoder_inputs", code(demo))
    assert problems(notebook) == []
    notebook, _ = doctored(tmp_path, NB15, "marian_decoder_inputs",
                           markdown("```python\nprint(labels[:, :-1])\n```\n"))
    assert problems(notebook) == []
