"""One registry of the classic bugs (helpers/exercises/pitfalls.py): every pitfall id that a
notebook or an exercise checker uses is in it, every id in it is shown in the notebooks it names,
the README's table is generated from it, and no file points to a list the project does not have."""

import json
import re
from pathlib import Path

from helpers.exercises import all_exercises
from helpers.exercises.pitfalls import FAMILIES, PITFALLS

ROOT = Path(__file__).resolve().parents[2]
PITFALL_ID = re.compile(r"\b([" + "".join(FAMILIES) + r"][1-9][0-9]?)\b")


def readme_table() -> str:
    """The README's table "The classic bugs": one row per family (A1-A5, ...), its bugs in
    order, its notebooks."""
    rows = ["| id | bug | notebook |", "|---|---|---|"]
    for letter in FAMILIES:
        ids = [pid for pid in PITFALLS if pid[0] == letter]
        bugs = "; ".join(PITFALLS[pid][0] for pid in ids)
        notebooks = sorted({nb for pid in ids for nb in PITFALLS[pid][1]})
        rows.append(f"| {ids[0]}-{ids[-1]} | {bugs} | {', '.join(notebooks)} |")
    return "\n".join(rows)


def _notebook_ids() -> dict:
    """{notebook number: pitfall ids in its cells' source (outputs, such as images, left out)}"""
    found = {}
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        text = "\n".join("".join(cell["source"]) for cell in cells)
        found[path.name[:2]] = set(PITFALL_ID.findall(text))
    return found


def test_ids_are_well_formed_and_numbered_without_gaps():
    assert len(PITFALLS) >= 28
    for letter in FAMILIES:
        numbers = [int(pid[1:]) for pid in PITFALLS if pid[0] == letter]
        assert numbers == list(range(1, len(numbers) + 1)), (letter, numbers)
    assert {pid[0] for pid in PITFALLS} == set(FAMILIES)


def test_every_id_a_notebook_uses_is_registered():
    used = set().union(*_notebook_ids().values())
    assert used, "no pitfall id found in the notebooks"
    assert used <= set(PITFALLS), f"not in the registry: {sorted(used - set(PITFALLS))}"


def test_every_registered_id_appears_in_the_notebooks_it_names():
    ids = _notebook_ids()
    for pid, (bug, notebooks) in PITFALLS.items():
        assert bug and notebooks, pid
        for number in notebooks:
            assert pid in ids[number], f"{pid} is said to be shown in notebook {number}"


def test_every_checker_pitfall_is_registered():
    used = {pitfall.id for exercise in all_exercises().values() for pitfall in exercise.pitfalls
            if pitfall.id}
    assert {"A1", "H1", "N2", "M4", "T3", "D2"} <= used
    assert used <= set(PITFALLS), f"not in the registry: {sorted(used - set(PITFALLS))}"


def test_readme_table_is_the_registry():
    table = readme_table()
    assert table.count("\n") == len(FAMILIES) + 1
    assert table in (ROOT / "README.md").read_text(encoding="utf-8")


def test_no_file_points_to_a_missing_pitfall_list():
    names = ["README.md", "helpers", "tests", "notebooks"]
    files = [ROOT / "README.md"] + [p for name in names[1:] for p in (ROOT / name).rglob("*")
                                    if p.suffix in {".py", ".ipynb", ".md", ".cfg"}]
    assert len(files) > 20
    this = Path(__file__).resolve()
    offenders = [str(p.relative_to(ROOT)) for p in files
                 if p.resolve() != this and "PITFALLS.md" in p.read_text(encoding="utf-8")]
    assert not offenders
