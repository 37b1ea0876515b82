"""Write first, then see the answer: in every notebook, no visible code cell before an exercise's
learner cell holds a definition that the exercise asks for, and every reference cell after it is
collapsed in JupyterLab and in Colab.

What an exercise asks for comes from the exercise registry (``helpers/exercises``): the functions
and methods that ``solution(name)`` prints (``Exercise.sources``, plus the name it shows them
under). A cell holds one of them when it defines it by name with a real body (a ``def``, or a
``class`` whose method of that name has a real body; a stub that only raises
``NotImplementedError`` is the learner's cell, not the answer), or when a function of any name
has the reference's body (docstring aside): the answer copied under another name. Calling
``solution(name)`` before the learner's cell prints the answer too.

The learner's cell is the code cell, at or before the first ``check("name", fn)``,
that defines ``fn``. A reference cell is one whose first line is a ``#@title Reference answer``
(the marked cells of ``tests/tools/sync.py``'s manifest that name an exercise), or the first
cell after the check that defines an asked-for definition; collapsed means
``sync.is_collapsed``: hidden in JupyterLab (``jupyter.source_hidden``) and a Colab form
(``cellView: "form"``, ``#@title``).
"""

import ast
import contextlib
import copy
import functools
import html
import inspect
import json
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.tools import sync
from helpers.exercises import engine
from helpers.exercises.stubs import is_stub_body

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
MAGIC = re.compile(r"^\s*[%!]")  # IPython magics and shell lines: not Python
COPY = "a function with the reference's body"


@dataclass(frozen=True)
class Asked:
    """What one exercise asks the learner to write."""

    names: frozenset  # "layer_norm", "MultiHeadAttention.forward", ...
    bodies: frozenset  # each reference body, names normalised (see ``_body``)
    expressions: frozenset  # each reference body as one expression, where it is one (a lambda's)


FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _without_docstring(body: list) -> list:
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        return body[1:]
    return body


def _argument_names(args: ast.arguments) -> list:
    every = [*args.posonlyargs, *args.args, *([args.vararg] if args.vararg else []),
             *args.kwonlyargs, *([args.kwarg] if args.kwarg else [])]
    return [a.arg for a in every]


class _Renamed(ast.NodeTransformer):
    """Every name in ``names`` replaced by its placeholder; annotations dropped."""

    def __init__(self, names: dict):
        self.names = names

    def visit_Name(self, node):
        return ast.copy_location(ast.Name(self.names.get(node.id, node.id), node.ctx), node)

    def visit_arg(self, node):
        return ast.copy_location(ast.arg(self.names.get(node.arg, node.arg), None), node)

    def _function(self, node):
        node.returns = None
        node.name = self.names.get(node.name, node.name)
        self.generic_visit(node)
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = _function


def _bound(node) -> list:
    """The names a function binds, in a fixed order: its arguments, then every name it assigns
    (locals, loop and comprehension variables, nested functions' names and arguments)."""
    names = _argument_names(node.args)
    for sub in ast.walk(node):
        if sub is node:
            continue
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
            names.append(sub.id)
        elif isinstance(sub, ast.arg):
            names.append(sub.arg)
        elif isinstance(sub, (*FUNCTIONS, ast.ClassDef)):
            names.append(sub.name)
        elif isinstance(sub, ast.ExceptHandler) and sub.name:
            names.append(sub.name)
    return list(dict.fromkeys(names))


def _body(node) -> str:
    """A function's body without its docstring, as ``ast.dump`` after every argument and local
    name is replaced by a placeholder in order of appearance: a copy with renamed parameters or
    locals gives the same text."""
    node = copy.deepcopy(node)
    names = {name: f"_{i}" for i, name in enumerate(_bound(node))}
    node = _Renamed(names).visit(node)
    return ast.dump(ast.Module(body=_without_docstring(node.body), type_ignores=[]))


class _Inlined(ast.NodeTransformer):
    def __init__(self, values: dict):
        self.values = values

    def visit_Name(self, node):
        if isinstance(node.ctx, ast.Load) and node.id in self.values:
            return copy.deepcopy(self.values[node.id])
        return node


def _expression(node) -> str | None:
    """A function (or lambda) as one expression, its arguments as placeholders: a lambda's
    body, or a body of single-name assignments (each name assigned once) and a return, the
    assignments substituted into the return. None for any other body."""
    node = copy.deepcopy(node)
    args = {name: f"_{i}" for i, name in enumerate(_argument_names(node.args))}
    if isinstance(node, ast.Lambda):
        result = node.body
    else:
        body, values = _without_docstring(node.body), {}
        if not body or not isinstance(body[-1], ast.Return) or body[-1].value is None:
            return None
        for statement in body[:-1]:
            if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1
                    and isinstance(statement.targets[0], ast.Name)) \
                    or statement.targets[0].id in values or statement.targets[0].id in args:
                return None
            values[statement.targets[0].id] = _Inlined(values).visit(statement.value)
        result = _Inlined(values).visit(body[-1].value)
    return ast.dump(_Renamed(args).visit(result))


@functools.cache
def asked(exercise: str) -> Asked:
    """The definitions exercise ``exercise`` asks for, from the registry."""
    entry = engine.lookup(exercise)
    names, bodies, expressions = set(), set(), set()
    for fn in entry.sources:
        names.add(fn.__qualname__)
        node = ast.parse(textwrap.dedent(inspect.getsource(fn))).body[0]
        bodies.add(_body(node))
        if _expression(node) is not None:
            expressions.add(_expression(node))
    if entry.shown_name:
        names.add(entry.shown_name)
    return Asked(frozenset(names), frozenset(bodies), frozenset(expressions))


def source(cell) -> str:
    return "".join(cell["source"])


def _python(text: str) -> ast.Module:
    """``text``'s syntax tree (magic and shell lines blanked out)."""
    return ast.parse("\n".join("" if MAGIC.match(line) else line for line in text.split("\n")))


def parse(cell) -> ast.Module:
    """A code cell's syntax tree (magic and shell lines blanked out)."""
    return _python(source(cell))


def definitions(tree) -> list:
    """``(qualified name, function node)`` for every function with a real body in the tree: a
    method as ``Class.method``; a lambda as the name it is assigned to, or ``lambda``."""
    named = {}  # node -> qualified name; a method is named by its class
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            named.update({item: f"{node.name}.{item.name}" for item in node.body
                          if isinstance(item, FUNCTIONS)})
        elif isinstance(node, FUNCTIONS):
            named.setdefault(node, node.name)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda):
            target = node.targets[0]
            if isinstance(target, ast.Name):
                named[node.value] = target.id
            elif isinstance(target, ast.Attribute):
                named[node.value] = target.attr
        elif isinstance(node, ast.Lambda):
            named.setdefault(node, "lambda")
    return [(name, node) for node, name in named.items()
            if isinstance(node, ast.Lambda) or not is_stub_body(node.body)]


def reveals(tree, wanted: Asked) -> list:
    """What in ``tree`` gives away the answer: asked-for names with a real body, and functions
    or lambdas (any name) that are a reference with other names (see ``_body``,
    ``_expression``)."""
    found = []
    for name, node in definitions(tree):
        if name in wanted.names or _expression(node) in wanted.expressions or (
                not isinstance(node, ast.Lambda) and _body(node) in wanted.bodies):
            found.append(name)
    return found


def calls(tree, function: str) -> list:
    """The string first arguments (or ``name=``) of every call of ``function`` in the tree, by
    its name, an alias it was imported as, or a module's attribute (``ex.solution("...")``),
    with the name of the second argument (or None)."""
    aliases = {function} | {alias.asname for node in ast.walk(tree)
                            if isinstance(node, ast.ImportFrom) for alias in node.names
                            if alias.name == function and alias.asname}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if not ((isinstance(func, ast.Name) and func.id in aliases)
                or (isinstance(func, ast.Attribute) and func.attr == function)):
            continue
        first = node.args[0] if node.args else next(
            (k.value for k in node.keywords if k.arg == "name"), None)
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            second = node.args[1] if len(node.args) > 1 else None
            found.append((first.value, second.id if isinstance(second, ast.Name) else None))
    return found


FENCE = re.compile(r"^\s*(```|~~~)[^\n]*\n(.*?)^\s*\1", re.S | re.M)
STARTS = re.compile(r"^(\s*)(def |class |async def |@|\w+\s*=\s*lambda\b)")


def code_in_markdown(cell) -> list:
    """The syntax trees of a markdown cell's fenced code blocks (those that parse)."""
    trees = []
    for match in FENCE.finditer(source(cell)):
        with contextlib.suppress(SyntaxError, ValueError):
            trees.append(_python(textwrap.dedent(match.group(2))))
    return trees


def printed(cell) -> str:
    """The text of a code cell's stored outputs (streams, plain text, markdown, HTML)."""
    texts = []
    for output in cell.get("outputs", []):
        if "text" in output:
            texts.append("".join(output["text"]))
        data = output.get("data", {})
        for kind in ("text/plain", "text/markdown", "text/x-python"):
            if kind in data:
                texts.append("".join(data[kind]))
        if "text/html" in data:
            texts.append(html.unescape(re.sub(r"<[^>]+>", "", "".join(data["text/html"]))))
    return "\n".join(texts)


def code_in_text(text: str) -> list:
    """The syntax trees of the definitions printed in ``text``: from each line that starts a
    ``def``, a ``class``, a decorator or ``name = lambda``, the lines indented below it."""
    lines, trees = text.split("\n"), []
    for i, line in enumerate(lines):
        match = STARTS.match(line)
        if not match:
            continue
        indent, end = len(match.group(1)), i + 1
        while end < len(lines) and (not lines[end].strip() or lines[end].startswith("@") or
                                    len(lines[end]) - len(lines[end].lstrip()) > indent):
            end += 1
        with contextlib.suppress(SyntaxError, ValueError):
            trees.append(ast.parse(textwrap.dedent("\n".join(lines[i:end]))))
    return trees


def defines(tree, name: str) -> bool:
    return any(isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
               and node.name == name for node in tree.body)


def exercises(notebook) -> list:
    """``(exercise, learner cell, check cell)`` for the first check of each exercise."""
    cells, seen, found = notebook["cells"], set(), []
    trees = {i: parse(c) for i, c in enumerate(cells) if c["cell_type"] == "code"}
    for index in sorted(trees):
        for name, learner in calls(trees[index], "check"):
            if name in seen:
                continue
            seen.add(name)
            written = next((i for i in sorted(trees, reverse=True)
                            if i <= index and learner and defines(trees[i], learner)), index)
            found.append((name, written, index))
    return found


def problems(notebook, stem: str = "notebook") -> list:
    """Every way the notebook shows an answer before the learner has written it."""
    cells = notebook["cells"]
    code = {}
    for index, cell in enumerate(cells):
        if cell["cell_type"] == "code":
            try:
                code[index] = parse(cell)
            except SyntaxError as error:
                return [f"{stem} cell {index} is not valid Python: {error}"]
    found = []
    every = exercises(notebook)
    for exercise, learner, checked in every:
        wanted = asked(exercise)
        for index in range(learner):  # collapsed or not: a click away is too close
            where = f"before cell {learner}, where the learner writes {exercise!r}"
            collapsed = " (collapsed: move it after the check)" if sync.is_collapsed(
                cells[index]) else ""
            if index in code:
                trees = [code[index]]
                answered = {name for other, _, done in every if done < index
                            for name in reveals(code[index], asked(other))}  # their reference
                found += [f"{stem} cell {index} shows {name} {where}{collapsed}"
                          for name in reveals(code[index], wanted) if name not in answered]
                found += [f"{stem} cell {index} prints {name} in its stored output {where}"
                          for tree in code_in_text(printed(cells[index]))
                          for name in reveals(tree, wanted)]
            elif cells[index]["cell_type"] == "markdown":
                trees = code_in_markdown(cells[index])
                found += [f"{stem} cell {index} shows {name} in a markdown code block {where}"
                          for tree in trees for name in reveals(tree, wanted)]
            else:
                trees = []
            if any(exercise == name for tree in trees for name, _ in calls(tree, "solution")):
                found.append(f"{stem} cell {index} calls solution({exercise!r}) before cell "
                             f"{learner}, where the learner writes it")
        pending = set(wanted.names) | {COPY}  # revealed for the first time: the reference
        for index in (i for i in sorted(code) if i > checked):
            shown = {name if name in wanted.names else COPY
                     for name in reveals(code[index], wanted)}
            if shown & pending and not sync.is_collapsed(cells[index]):
                found.append(f"{stem} cell {index}, the reference of {exercise!r} after its "
                             f"check (cell {checked}), is not collapsed (metadata "
                             f"{sync.COLLAPSED} and a #@title first line)")
            pending -= shown
    for index in code:
        if source(cells[index]).startswith("#@title Reference answer") and \
                not sync.is_collapsed(cells[index]):
            found.append(f"{stem} cell {index}: a reference answer that is not collapsed "
                         f"(metadata {sync.COLLAPSED})")
    return sorted(set(found), key=found.index)


def load(path: Path) -> dict:
    return json.loads(path.read_text())


# ---------------------------------------------------------------- every notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_answer_before_the_learner_writes_it(path):
    found = problems(load(path), path.stem)
    assert not found, "\n".join(found)


def test_the_walk_is_not_vacuous():
    """Every notebook is walked, and every registered exercise is asked in some notebook and
    maps to the definitions it asks for."""
    assert len(NOTEBOOKS) >= 14
    asked_in = {name for path in NOTEBOOKS for name, _, _ in exercises(load(path))}
    assert set(engine.MODULES) <= asked_in, set(engine.MODULES) - asked_in
    assert asked("multi_head_attention").names == {"MultiHeadAttention.forward"}
    assert "count_parameters" in asked("count_parameters").names


# ---------------------------------------------------------------- the test can fail
def cell(text: str, collapsed: bool = False) -> dict:
    metadata = copy.deepcopy(sync.COLLAPSED) if collapsed else {}
    return {"cell_type": "code", "metadata": metadata, "outputs": [], "execution_count": None,
            "source": text.splitlines(keepends=True)}


STUB = ('def my_layer_norm(x, weight, bias, eps=1e-5):\n    """Yours."""\n'
        "    raise NotImplementedError\n")
CHECK = 'check("layer_norm", my_layer_norm)\n'
REFERENCE = "#@title Reference answer: layer_norm\n# helpers/layers.py\n" + \
    sync.definitions("layers")["layer_norm"] + "\n"


def notebook(*cells) -> dict:
    return {"cells": list(cells), "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def test_write_first_order_passes():
    assert problems(notebook(cell(STUB), cell(CHECK), cell(REFERENCE, collapsed=True))) == []


def test_a_stub_of_the_same_name_before_is_allowed():
    stub = STUB.replace("my_layer_norm", "layer_norm")
    assert problems(notebook(cell(stub), cell(STUB), cell(CHECK),
                             cell(REFERENCE, collapsed=True))) == []


def test_the_answer_before_the_learner_fails():
    found = problems(notebook(cell(REFERENCE), cell(STUB), cell(CHECK)))
    assert any("cell 0 shows layer_norm before cell 1" in text for text in found), found
    assert any("cell 0: a reference answer that is not collapsed" in text for text in found)


def test_the_answer_under_another_name_fails():
    renamed = sync.definitions("layers")["layer_norm"].replace("def layer_norm", "def normalise")
    found = problems(notebook(cell(renamed), cell(STUB), cell(CHECK)))
    assert found == ["notebook cell 0 shows normalise before cell 1, where the learner writes "
                     "'layer_norm'"]


def test_solution_before_the_learner_fails():
    found = problems(notebook(cell('solution("layer_norm")\n'), cell(STUB), cell(CHECK)))
    assert found == ["notebook cell 0 calls solution('layer_norm') before cell 1, where the "
                     "learner writes it"]


@pytest.mark.parametrize("missing", ["jupyter", "cellView", "title"])
def test_a_reference_that_is_not_collapsed_in_both_front_ends_fails(missing):
    reference = cell(REFERENCE, collapsed=True)
    if missing == "title":
        reference["source"] = reference["source"][1:]  # only the marker line left on top
    else:
        del reference["metadata"][missing]
    found = problems(notebook(cell(STUB), cell(CHECK), reference))
    assert any("cell 2, the reference of 'layer_norm' after its check (cell 1), is not "
               "collapsed" in text for text in found), found


def test_a_class_exercise_counts_its_method_not_the_given_init():
    given = ("class MultiHeadAttention(nn.Module):\n    def __init__(self, d_model, num_heads):\n"
             "        super().__init__()\n        self.w_q = nn.Linear(d_model, d_model)\n\n"
             "    def forward(self, query, key, value, mask=None):\n"
             "        raise NotImplementedError\n")
    answered = given.replace("        raise NotImplementedError\n",
                             "        return self.w_o(merge_heads(query))\n")
    learner = given.replace("class MultiHeadAttention", "class MyMultiHeadAttention")
    check = 'check("multi_head_attention", MyMultiHeadAttention)\n'
    assert problems(notebook(cell(given), cell(learner), cell(check))) == []
    found = problems(notebook(cell(answered), cell(learner), cell(check)))
    assert found == ["notebook cell 0 shows MultiHeadAttention.forward before cell 1, where the "
                     "learner writes 'multi_head_attention'"]


def test_a_doctored_copy_of_notebook_01_fails():
    """Notebook 01 as stored passes; with its first reference cell expanded, or moved above the
    learner's cell, it fails."""
    original = load(ROOT / "notebooks" / "01_attention.ipynb")
    assert problems(original) == []
    (exercise, learner, checked), *_ = exercises(original)
    titled = [i for i, c in enumerate(original["cells"])
              if source(c).startswith("#@title Reference answer")]
    reference = next(i for i in titled if i > checked)

    expanded = copy.deepcopy(original)
    expanded["cells"][reference]["metadata"]["jupyter"]["source_hidden"] = False
    found = problems(expanded)
    assert found and all(f"cell {reference}" in text for text in found), found

    moved = copy.deepcopy(original)
    cells = moved["cells"]
    shown = cells.pop(reference)
    shown["metadata"] = {}
    shown["source"] = shown["source"][1:]  # no title: an ordinary marked cell
    cells.insert(learner, shown)
    found = problems(moved)
    assert any(f"cell {learner} shows" in text and f"writes {exercise!r}" in text
               for text in found), found
