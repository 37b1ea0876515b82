"""Every notebook opens in Colab the same way, from the one address in helpers/course.py.

- the first cell carries the notebook's own "Open in Colab" badge;
- the second cell is exactly ``helpers.course.SETUP_CELL``, whose REPO_URL is the course's;
- the setup cell, run with a fake Colab, clones the course, enables the custom widget manager
  and makes ``helpers`` importable; run anywhere else, it clones and enables nothing;
- ``check_environment()`` reports older, matching, newer and missing packages.
"""

import json
import os
import re
import sys
import types
from pathlib import Path

import pytest

from helpers import course

ROOT = Path(__file__).resolve().parents[1]
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


@pytest.fixture
def isolated(monkeypatch):
    """Restore sys.path afterwards and record os.system instead of running it."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    commands = []

    def fake_system(command):
        commands.append(command)
        os.makedirs(os.path.join("course", "helpers"))  # what the clone would bring
        return 0

    monkeypatch.setattr(os, "system", fake_system)
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


def test_setup_cell_on_colab_clones_and_enables_widgets(isolated, monkeypatch, tmp_path):
    widget_calls = _fake_colab(monkeypatch)
    monkeypatch.chdir(tmp_path)
    namespace = {}
    exec(course.SETUP_CELL, namespace)
    assert isolated == [f"git clone --depth 1 {course.REPO_URL} course"]
    assert widget_calls == [1]
    assert sys.path[0] == os.path.join(os.getcwd(), "course")
    assert str(namespace["device"]) in {"cpu", "cuda", "mps"}

    exec(course.SETUP_CELL, {})  # running the cell again clones nothing more
    assert len(isolated) == 1
    assert sys.path.count(os.path.join(os.getcwd(), "course")) == 1
    # but after a runtime restart the widget manager must be switched on again
    assert widget_calls == [1, 1]


def test_setup_cell_elsewhere_only_sets_the_path(isolated, monkeypatch):
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    monkeypatch.chdir(ROOT / "notebooks")  # where Jupyter runs a notebook
    monkeypatch.setattr(sys, "path", [p for p in sys.path if Path(p or ".").resolve() != ROOT])
    exec(course.SETUP_CELL, {})
    exec(course.SETUP_CELL, {})
    assert isolated == []  # no clone
    assert not (ROOT / "notebooks" / "course").exists()
    assert [p for p in sys.path if Path(p or ".").resolve() == ROOT] == [str(ROOT)]  # once


# ---- versions
def test_tested_versions_come_from_requirements():
    assert set(course.TESTED_VERSIONS) == {"torch", "ipywidgets", "matplotlib", "seaborn",
                                           "numpy"}
    requirements = (ROOT / "requirements.txt").read_text()
    for package, version in course.TESTED_VERSIONS.items():
        assert re.search(rf"^{package}=={re.escape(version)}\s", requirements, flags=re.M)


def test_major_minor():
    assert course._major_minor("2.13.0+cpu") == (2, 13)
    assert course._major_minor("8.1.9") == (8, 1)
    assert course._major_minor("3") == (3, 0)


def _lines(capsys):
    return dict(line.split(maxsplit=1) for line in capsys.readouterr().out.splitlines())


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
    fix = f"older than tested: upgrade with pip install 'torch=={torch_pin}'"
    assert lines["torch"].endswith(fix)
    assert "newer" in lines["numpy"] and lines["numpy"].split()[1] == "ok"
    assert "not installed" in lines["seaborn"]
    assert lines["matplotlib"].endswith(" ok")


def test_check_environment_same_minor_is_ok(monkeypatch, capsys):
    major, minor = course._major_minor(course.TESTED_VERSIONS["torch"])
    fake = {**course.TESTED_VERSIONS, "torch": f"{major}.{minor}.99+cu121"}
    monkeypatch.setattr(course, "_installed_version", fake.get)
    assert course.check_environment() is True
    assert _lines(capsys)["torch"].endswith(" ok")


def test_write_assets(tmp_path):
    (path,) = course.write_assets(tmp_path)
    assert path == tmp_path / "architecture.png"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert 20_000 < path.stat().st_size < 400_000
