"""Every notebook opens in Colab the same way, from the one address in helpers/course.py.

- the first cell carries the notebook's own "Open in Colab" badge;
- the second cell is exactly ``helpers.course.SETUP_CELL``, whose REPO_URL is the course's;
- the setup cell, run with a fake Colab, clones the course, enables the custom widget manager
  and makes ``helpers`` importable; a failed clone stops it with the address; run anywhere else,
  it clones, installs and enables nothing;
- ``check_environment()`` checks the supported ranges and never advises an upgrade on Colab.
The whole notebooks on Colab's package set are run by tests/colab/test_colab_like.py.
"""

import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

from helpers import course
from tests.tools import commands as tools

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _cells(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    for cell in cells:
        if isinstance(cell["source"], list):
            cell["source"] = "".join(cell["source"])
    return cells


def test_there_are_notebooks_to_check():
    assert (ROOT / "notebooks" / "00_introduction.ipynb") in NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_first_cell_has_the_badge_for_this_notebook(path):
    first = _cells(path)[0]
    assert first["cell_type"] == "markdown"
    assert first["source"].startswith("# "), "the first cell starts with the title"
    assert course.colab_badge(path.name) in first["source"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_second_cell_is_the_setup_cell(path):
    second = _cells(path)[1]
    assert second["cell_type"] == "code"
    assert second["source"] == course.SETUP_CELL


def test_setup_cell_uses_the_course_address():
    (url,) = re.findall(r'^REPO_URL = "([^"]+)"$', course.SETUP_CELL, flags=re.M)
    assert url == course.REPO_URL
    assert course.REPO_URL == "https://github.com/transformers-from-scratch/course"


def test_colab_link_and_badge():
    url = ("https://colab.research.google.com/github/transformers-from-scratch/course/blob/main/"
           "notebooks/06_masks.ipynb")
    assert course.colab_url("06_masks.ipynb") == url
    assert course.colab_url("notebooks/06_masks.ipynb") == url
    assert course.colab_badge("06_masks.ipynb") == (
        "[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
        f"({url})")


class _Commands(list):
    """The commands run, and ``.fake``, the stand-in for ``subprocess.run``."""


@pytest.fixture
def isolated(monkeypatch):
    """Restore sys.path afterwards and record ``git clone`` instead of running it."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    commands = _Commands()

    def fake_run(command, *args, **kwargs):
        commands.append(command)
        if command[:2] == ["git", "clone"] and not fake_run.fail:
            os.makedirs(os.path.join(command[-1], "helpers"))  # what the clone would bring
        return subprocess.CompletedProcess(command, 128 if fake_run.fail else 0)

    fake_run.fail = False
    monkeypatch.setattr(subprocess, "run", fake_run)
    commands.fake = fake_run
    return commands


def _fake_colab(monkeypatch):
    calls = []
    colab = types.ModuleType("google.colab")
    colab.output = types.SimpleNamespace(enable_custom_widget_manager=lambda: calls.append(1))
    google = types.ModuleType("google")
    google.colab = colab
    monkeypatch.setitem(sys.modules, "google", google)
    monkeypatch.setitem(sys.modules, "google.colab", colab)
    return calls


CLONE = ["git", "clone", "--quiet", "--depth", "1", course.REPO_URL, "course"]


def _without_sacrebleu(monkeypatch):
    """``importlib.util.find_spec`` (what ``_install_missing`` asks) says sacrebleu is missing,
    as on Colab."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == "sacrebleu" else real(name, *args))


def test_setup_cell_on_colab_clones_and_enables_widgets(isolated, monkeypatch, tmp_path):
    widget_calls = _fake_colab(monkeypatch)
    _without_sacrebleu(monkeypatch)
    monkeypatch.chdir(tmp_path)
    namespace = {}
    exec(course.SETUP_CELL, namespace)
    assert isolated == [CLONE]  # nothing installed: only notebook 09 needs sacrebleu (bleu)
    assert widget_calls == [1]
    assert sys.path[0] == os.path.join(os.getcwd(), "course")
    assert str(namespace["device"]) in {"cpu", "cuda", "mps"}
    assert callable(namespace["set_seed"]) and callable(namespace["get_device"])

    exec(course.SETUP_CELL, {})  # running the cell again clones nothing more
    assert len(isolated) == 1
    assert sys.path.count(os.path.join(os.getcwd(), "course")) == 1
    # but after a runtime restart the widget manager must be switched on again
    assert widget_calls == [1, 1]


def test_setup_cell_on_colab_stops_clearly_when_the_clone_fails(isolated, monkeypatch, tmp_path):
    _fake_colab(monkeypatch)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "course").mkdir()  # left behind by an earlier failed clone: no helpers inside
    isolated.fake.fail = True
    with pytest.raises(RuntimeError, match="Could not download the course from "
                       + re.escape(course.REPO_URL)):
        exec(course.SETUP_CELL, {})
    assert isolated == [CLONE]  # the empty folder did not stop it from trying
    isolated.fake.fail = False
    exec(course.SETUP_CELL, {})  # connected again: the same cell now works
    assert isolated == [CLONE, CLONE]
    assert (tmp_path / "course" / "helpers").is_dir()


def test_setup_cell_elsewhere_only_sets_the_path(isolated, monkeypatch):
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    monkeypatch.chdir(ROOT / "notebooks")  # where Jupyter runs a notebook
    monkeypatch.setattr(sys, "path", [p for p in sys.path if Path(p or ".").resolve() != ROOT])
    exec(course.SETUP_CELL, {})
    exec(course.SETUP_CELL, {})
    assert isolated == []  # no clone, no install
    assert not (ROOT / "notebooks" / "course").exists()
    assert [p for p in sys.path if Path(p or ".").resolve() == ROOT] == [str(ROOT)]  # once


PIP_SACREBLEU = [sys.executable, "-m", "pip", "install", "--quiet", "sacrebleu==2.6.0"]


@pytest.mark.parametrize("colab", [True, False])
def test_bleu_installs_sacrebleu_on_colab_the_first_time(isolated, monkeypatch, capsys,
                                                           colab):
    """What Colab lacks is installed by the one notebook that needs it, when it needs it: BLEU
    (notebook 09). Elsewhere requirements.txt has it, and nothing is installed."""
    from helpers.translation import bleu

    if colab:
        _fake_colab(monkeypatch)
    else:
        monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    _without_sacrebleu(monkeypatch)
    assert bleu(["the cat is black"], ["the cat is black"]) == pytest.approx(100.0)
    assert isolated == ([PIP_SACREBLEU] if colab else [])
    printed = capsys.readouterr().out
    assert ("Installing sacrebleu==2.6.0" in printed) == colab  # why the cell takes longer


def test_install_missing_installs_only_what_is_missing(isolated, monkeypatch):
    import importlib.util

    present = {"sacrebleu": False, "torch": True}
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name: object() if present[name] else None)
    course._install_missing({"sacrebleu": "2.6.0", "torch": "2.13.0"})
    assert isolated == [PIP_SACREBLEU]
    present["sacrebleu"] = True
    course._install_missing({"sacrebleu": "2.6.0"})
    assert len(isolated) == 1


def test_install_missing_survives_a_failed_install(isolated, monkeypatch, capsys):
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    isolated.fake.fail = True
    course._install_missing({"sacrebleu": "2.6.0"})
    assert "Could not install sacrebleu==2.6.0" in capsys.readouterr().out


def test_colab_missing_is_what_requirements_pins():
    requirements = (ROOT / "requirements.txt").read_text()
    for package, version in course.COLAB_MISSING.items():
        assert re.search(rf"^{package}=={re.escape(version)}\s", requirements, flags=re.M)


@pytest.mark.parametrize("cores, omp, expected", [(1, None, 1), (2, None, 1), (8, None, None),
                                                  (2, "3", None)])
def test_threads_one_on_small_machines(monkeypatch, cores, omp, expected):
    import torch

    before = torch.get_num_threads()
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    if omp is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", omp)  # the user's own choice wins
    try:
        torch.set_num_threads(3)
        assert course._choose_threads() == (expected or 3)  # elsewhere torch's choice stays
    finally:
        torch.set_num_threads(before)


# ---- versions
def test_tested_versions_come_from_requirements():
    assert set(course.TESTED_VERSIONS) == set(course.CHECKED_PACKAGES) == set(
        course.SUPPORTED_VERSIONS)
    requirements = (ROOT / "requirements.txt").read_text()
    for package, version in course.TESTED_VERSIONS.items():
        assert re.search(rf"^{package}=={re.escape(version)}\s", requirements, flags=re.M)


def _pins(path):
    return dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", path.read_text(), flags=re.M))


def test_supported_ranges_are_the_tested_ones():
    """The oldest end of each range is Colab's version (run by tests/colab), the newest holds
    requirements.txt; torch's oldest is Colab's 2.11, run by hand (the test machine's stand-in
    is 2.13, see tests/colab/requirements-colab.txt)."""
    colab = _pins(ROOT / "tests" / "colab" / "requirements-colab.txt")
    for package, (oldest, too_new) in course.SUPPORTED_VERSIONS.items():
        pinned = course._major_minor(course.TESTED_VERSIONS[package])
        assert course._major_minor(oldest) <= pinned
        assert too_new is None or pinned < course._major_minor(too_new)
        if package != "torch":
            assert course._major_minor(colab[package]) == course._major_minor(oldest), package
    assert course._major_minor(colab["torch"]) >= course._major_minor("2.11")


def test_major_minor():
    assert course._major_minor("2.13.0+cpu") == (2, 13)
    assert course._major_minor("8.1.9") == (8, 1)
    assert course._major_minor("3") == (3, 0)


def _lines(capsys):
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("front end: ")
    return dict(line.split(maxsplit=1) for line in out[1:])


def test_check_environment_matching(monkeypatch, capsys):
    monkeypatch.setattr(course, "_installed_version", lambda pkg: course.TESTED_VERSIONS[pkg])
    assert course.check_environment() is True
    lines = _lines(capsys)
    assert set(lines) == set(course.TESTED_VERSIONS)
    assert all(line.endswith(" ok") for line in lines.values())


def test_check_environment_older_newer_missing(monkeypatch, capsys):
    fake = {**course.TESTED_VERSIONS, "torch": "1.13.1", "numpy": "99.0.0", "seaborn": None}
    monkeypatch.setattr(course, "_installed_version", fake.get)
    assert course.check_environment() is False
    lines = _lines(capsys)
    torch_pin = course.TESTED_VERSIONS["torch"]
    fix = f"the course needs torch>=2.11: pip install 'torch=={torch_pin}'"
    assert lines["torch"].endswith(fix)
    assert "newer" in lines["numpy"] and lines["numpy"].split()[1] == "ok"
    assert "not installed" in lines["seaborn"]
    assert lines["matplotlib"].endswith(" ok")


def test_check_environment_widgets_range_and_known_bad(monkeypatch, capsys):
    fake = {**course.TESTED_VERSIONS, "ipywidgets": "9.0.0"}
    monkeypatch.setattr(course, "_installed_version", fake.get)
    assert course.check_environment() is False
    assert "the course needs ipywidgets>=7.7,<9" in _lines(capsys)["ipywidgets"]
    fake["ipywidgets"] = "8.1.9"
    assert course.check_environment() is False
    assert "VS Code" in _lines(capsys)["ipywidgets"]
    fake["ipywidgets"] = "7.7.1"
    assert course.check_environment() is True
    assert _lines(capsys)["ipywidgets"].endswith(" ok")


def test_check_environment_on_colab_never_advises_an_upgrade(monkeypatch, capsys):
    _fake_colab(monkeypatch)
    colab = _pins(ROOT / "tests" / "colab" / "requirements-colab.txt")
    fake = {package: colab[package] for package in course.CHECKED_PACKAGES}
    fake["torch"] = "2.11.0+cpu"  # what Colab really ships
    monkeypatch.setattr(course, "_installed_version", fake.get)
    assert course.check_environment() is True
    printed = capsys.readouterr().out
    assert "front end: Google Colab" in printed and "pip install" not in printed
    fake["torch"] = "2.9.0"  # an old runtime: no pip advice, a fresh runtime instead
    assert course.check_environment() is False
    line = _lines(capsys)["torch"]
    assert "fresh runtime" in line and "pip install" not in line


def test_check_environment_same_minor_is_ok(monkeypatch, capsys):
    major, minor = course._major_minor(course.TESTED_VERSIONS["torch"])
    fake = {**course.TESTED_VERSIONS, "torch": f"{major}.{minor}.99+cu121"}
    monkeypatch.setattr(course, "_installed_version", fake.get)
    assert course.check_environment() is True
    assert _lines(capsys)["torch"].endswith(" ok")


def test_write_assets(tmp_path):
    (path,) = tools.write_assets(tmp_path)
    assert path == tmp_path / "architecture.png"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert 20_000 < path.stat().st_size < 400_000


def test_only_bleu_needs_sacrebleu():
    """Colab lacks sacrebleu: every helpers module imports without it, and BLEU says what to do."""
    code = """
import importlib, pkgutil, sys
sys.modules["sacrebleu"] = None  # makes `import sacrebleu` fail, as where it is not installed
import helpers
for module in pkgutil.iter_modules(helpers.__path__):
    importlib.import_module(f"helpers.{module.name}")
from helpers.translation import bleu
try:
    bleu(["a b"], ["a b"])
except ModuleNotFoundError as error:
    print(error)
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "BLEU needs the sacrebleu package: pip install 'sacrebleu==2.6.0'" in done.stdout


def test_execute_in_place_stores_the_outputs_of_a_fresh_run(tmp_path):
    """`python -m tests.tools --execute` runs every cell (an interact cell included, where
    `jupyter nbconvert --execute` can stall) and saves the new outputs; a wrong path is refused."""
    import nbformat

    path = tmp_path / "tiny.ipynb"
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell("import os\nprint('threads', os.environ['OMP_NUM_THREADS'])"),
        nbformat.v4.new_code_cell("from ipywidgets import interact\n"
                                  "_ = interact(lambda n: print('n is', n), n=(1, 3))"),
        nbformat.v4.new_code_cell("print(6 * 7)")]
    nbformat.write(notebook, path)
    done = subprocess.run([sys.executable, "-m", "tests.tools", "--execute", str(path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    cells = nbformat.read(path, as_version=4).cells
    printed = ["".join(o.get("text", "") for o in c.outputs) for c in cells]
    assert printed[0] == "threads 1\n" and printed[2] == "42\n"
    assert [c.execution_count for c in cells] == [1, 2, 3]
    wrong = subprocess.run([sys.executable, "-m", "tests.tools", "--execute",
                            str(tmp_path / "missing.ipynb")], cwd=ROOT, capture_output=True,
                           text=True, timeout=60)
    assert wrong.returncode != 0 and "not a notebook file" in wrong.stderr
