"""The shape of ``helpers/``: a core a learner can read on its own, built in layers, with no
import cycles, and every module's imports at its top (the lazy ones inside the functions that
need them).

No line counts: reference code is written as the clearest code, one straight-line class or
function per concept, and a notebook shows it in a collapsed reference cell, so a module is as
long as its concepts need. What a cap on lines used to stand for is checked directly: the core
carries none of the course's scaffolding, each core module builds only on the ones below it, and
nothing imports in a circle.
"""

import ast
from pathlib import Path

import pytest

HELPERS = Path(__file__).resolve().parents[2] / "helpers"
# The 2017 Transformer and what trains and saves it (what notebooks 01-10 build), in layers: a
# module may import the modules of earlier layers only.
CORE_LAYERS = [
    ["utils", "checks"],  # seeding and devices; input checks with clear errors
    ["positional"],  # notebook 02: the sinusoidal table, and rotary positions (12)
    ["attention"],  # notebooks 01, 03 and 10: the one attention path, rotary positions included
    ["masks", "layers"],  # notebooks 04-07
    ["interop", "model"],  # notebook 08: the model, and the same weights in torch.nn
    ["data", "decoding"],  # notebooks 09-10: batches; decoding a trained model
    ["training"],  # notebook 09
]
CORE = [name for layer in CORE_LAYERS for name in layer]
# helpers/*.py beyond the core: notebook 11's head ablation, and the modules of the
# notebooks past the paper (12: gpt, generation and continuation, 13: distributed and fsdp,
# 14: tokens, 15: pretrained).
# They build on the core and on the toy task (translation), not on the course's other scaffolding.
BEYOND = ["ablation", "continuation", "distributed", "fsdp", "generation", "gpt",
          "pretrained", "tokens"]
# The course around the model: the setup cell and version check (course.py), the checkers, the
# figures, and the toy task the model learns. The maintainers' tools are in tests/tools.
SCAFFOLDING = ["course", "exercises", "figures", "translation"]
PACKAGES = ["exercises", "figures", "translation"]
MODULES = sorted(HELPERS.rglob("*.py"))


def module_name(path: Path) -> str:
    """``helpers/exercises/nb01.py`` -> ``helpers.exercises.nb01``; a package is its folder."""
    parts = list(path.relative_to(HELPERS.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def helpers_imports(path: Path) -> set:
    """The ``helpers`` modules that ``path`` imports, at its top or inside a function
    (``from . import x`` names the module ``x`` when there is one)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.split(".")[0] == "helpers"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            elif (node.module or "").split(".")[0] == "helpers":
                target = node.module
            else:
                continue
            submodules = {f"{target}.{alias.name}" for alias in node.names}
            found |= (submodules & NAMES) or {target}
    return found - {name}


NAMES = {module_name(path) for path in MODULES}
GRAPH = {module_name(path): helpers_imports(path) for path in MODULES}


def top(name: str) -> str:
    """``helpers.exercises.nb01`` -> ``exercises``; ``helpers`` itself -> ``__init__``."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def cycle(graph: dict) -> list:
    """One import cycle of ``graph`` (name -> the names it imports) as a list that starts and
    ends with the same name, or [] when there is none."""
    state, stack = {}, []  # state: 1 on the current path, 2 done

    def visit(node):
        state[node], found = 1, []
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return stack[stack.index(target):] + [target]
            if target not in state and (found := visit(target)):
                return found
        stack.pop()
        state[node] = 2
        return found

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return []


def test_every_top_level_module_is_core_or_named_beyond_it():
    assert sorted(p.stem for p in HELPERS.glob("*.py")) == \
        sorted(["__init__", "course"] + CORE + BEYOND)
    assert sorted(p.name for p in HELPERS.iterdir() if (p / "__init__.py").is_file()) == PACKAGES


def test_the_import_graph_is_read():
    """Not vacuous: relative, absolute, lazy and ``from . import`` imports are all found."""
    assert "helpers.checks" in GRAPH["helpers.attention"]
    assert {"helpers.attention", "helpers.layers"} <= GRAPH["helpers.interop"]  # lazy
    assert "helpers.attention" in GRAPH["helpers.exercises.nb01"]
    assert all(target in NAMES for targets in GRAPH.values() for target in targets), GRAPH


@pytest.mark.parametrize("name", CORE)
def test_the_core_carries_no_course_scaffolding(name):
    """A learner reads the core alone: it imports no checker, figure, course tool or toy task,
    nor the notebooks past the paper."""
    imported = {top(target) for target in GRAPH[f"helpers.{name}"]}
    assert imported <= set(CORE), f"helpers/{name}.py imports {sorted(imported - set(CORE))}"


@pytest.mark.parametrize("name", CORE)
def test_each_core_module_builds_on_the_layers_below(name):
    layer = {module: rank for rank, modules in enumerate(CORE_LAYERS) for module in modules}
    later = sorted(top(t) for t in GRAPH[f"helpers.{name}"] if layer[top(t)] >= layer[name])
    assert later == [], (f"helpers/{name}.py (layer {layer[name]}) imports {later}, from its "
                         f"own layer or a later one: {CORE_LAYERS}")


@pytest.mark.parametrize("name", BEYOND)
def test_beyond_the_core_builds_on_the_core_and_the_task(name):
    """...and on the modules of its own notebook: generation and continuation on gpt (12),
    distributed on fsdp (13)."""
    imported = {top(target) for target in GRAPH[f"helpers.{name}"]}
    own = {"generation": {"gpt"}, "continuation": {"gpt", "generation"},
           "distributed": {"fsdp"}}.get(name, set())
    assert imported <= set(CORE) | {"translation"} | own, sorted(imported)


def test_no_import_cycles():
    assert cycle(GRAPH) == []


def test_a_cycle_is_found():
    """The cycle finder itself can fail."""
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


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
