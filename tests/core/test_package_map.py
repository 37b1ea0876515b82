"""The map of ``helpers/`` in its ``__init__`` docstring is true: it lists every module and
subpackage once, and nothing else, and each row's notebooks include every notebook that shows
that module's code in a marked cell (``tests.tools.sync.MANIFEST``)."""

import pkgutil
import re

import helpers
from tests.tools.sync import MANIFEST

ROW = re.compile(r"^``(\w+)``\s.*?\s(all|none|[\d, -]+)$")


def map_rows() -> dict:
    """module -> the set of notebook numbers of its row ("all": every one, "none": no notebook)."""
    rows = {}
    for line in helpers.__doc__.splitlines():
        found = ROW.match(line.rstrip())
        if not found:
            continue
        name, notebooks = found.groups()
        numbers = set()
        if notebooks == "all":
            numbers = {f"{n:02d}" for n in range(16)}
        elif notebooks != "none":
            for part in notebooks.split(","):
                low, _, high = part.strip().partition("-")
                numbers |= {f"{n:02d}" for n in range(int(low), int(high or low) + 1)}
        assert name not in rows, f"{name} is listed twice"
        rows[name] = numbers
    return rows


def test_the_map_lists_every_module_once_and_nothing_else():
    modules = {info.name for info in pkgutil.iter_modules(helpers.__path__)}
    assert set(map_rows()) == modules, (
        f"missing from the map: {sorted(modules - set(map_rows()))}; "
        f"listed but absent: {sorted(set(map_rows()) - modules)}")


def test_each_row_names_the_notebooks_that_show_the_module():
    rows = map_rows()
    for notebook, entries in MANIFEST.items():
        for module, *_ in entries:
            top = module.split("/")[0]
            assert notebook[:2] in rows[top], (
                f"notebook {notebook[:2]} shows helpers/{module}.py; the map's row for {top} "
                f"says {sorted(rows[top]) or 'none'}")


def test_the_row_reader_can_fail():
    assert ROW.match("``gpt``             the decoder-only model, translation by      12")
    assert not ROW.match("                    continuation, sampling, the ablation")
