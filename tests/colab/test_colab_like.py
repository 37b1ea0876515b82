"""Every notebook on Colab's package set, opened alone, the way the "Open in Colab" badge opens it.

For each notebook, in a kernel of ``.venv-colab`` (built by ``tests/colab/build_env.py`` from
Colab's versions: ipywidgets 7.7.1, ipykernel 6.17.1, IPython 7.34, numpy 2.1.3, ...):

- ``google.colab`` (a stand-in, ``tests/colab/stub``) is imported when the kernel starts, as on
  Colab, so the setup cell takes its Colab branch;
- the notebook is copied alone into an empty folder (Colab opens it straight from GitHub);
- the setup cell's ``git clone REPO_URL course`` fetches a repository made from this checkout
  (committed or not): git's ``url.<base>.insteadOf`` in a temporary HOME, never the machine's
  own git config;
- sacrebleu, which Colab lacks, is removed before each notebook; the notebook that computes BLEU
  (09) must install it, and no other may (from a local wheelhouse, standing in for the package
  registry). It goes into a small venv
  of the worker's own, layered on ``.venv-colab`` (a ``.pth`` file adds its site-packages), so
  that the workers never install or remove it under each other's feet;
- after each ``interact`` cell, an added cell moves every slider, dropdown and checkbox to its
  ends and fails if a widget callback raised;
- a last added cell checks where ``helpers`` came from, that the widget manager was turned on,
  that sacrebleu is there exactly where BLEU was computed, that ``check_environment()`` is happy
  with Colab's versions, and that the notebook imported nothing that only a later notebook
  teaches (notebook 01 loads neither the training code nor tqdm's progress bar nor sacrebleu).

Outputs are not compared with the stored ones (Colab's versions print some things differently);
every cell must run without error, none may run longer than 300 s. So the copies run shortened
trainings (tests/shortened.py): the README's test command runs them in full under nbval.

A slow tier (``-m slow``; .ci/run runs it after the README's test command): each notebook is handed
to whichever pytest-xdist worker is free (one ``colab_env`` per worker). Without ``.venv-colab``
the tests are skipped with the command that builds it; in CI (``CI`` set) that is a failure.
"""

import importlib.util
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import nbformat
import pytest

from tests.tools.bench import execute_notebook
from helpers.course import REPO_URL
from tests.ci import in_ci
from tests.shortened import shorten

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

_spec = importlib.util.spec_from_file_location("build_env", HERE / "build_env.py")
build_env = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build_env)

KERNEL = "colab-like"

MOVE_WIDGETS = '''\
# Added by the Colab-like test: move every control of the interact above to both ends.
import sys as _sys
_ip, _errors = get_ipython(), []
_show = _ip.showtraceback
_ip.showtraceback = lambda *a, **k: (_errors.append(repr(_sys.exc_info()[1])), _show(*a, **k))
_controls = _.widget.kwargs_widgets
for _c in _controls:
    if hasattr(_c, "options"):
        _c.index = len(_c.options) - 1
        _c.index = 0
    elif isinstance(_c.value, bool):
        _c.value = not _c.value
    else:
        _c.value = _c.max
        _c.value = _c.min
_ip.showtraceback = _show
assert _controls and not _errors, f"a widget callback failed: {_errors}"
print("COLAB-LIKE moved", [type(_c).__name__ for _c in _controls])'''

FACTS = '''\
# Added by the Colab-like test: what the notebook ran on, and what it imported.
import sys as _sys
_modules = sorted(m for m in _sys.modules if m.split(".")[0] in ("helpers", "tqdm", "sacrebleu"))
import importlib.util as _util, json as _json, io as _io, contextlib as _ctx
import google.colab.output as _out, helpers as _helpers, ipykernel as _ipk, ipywidgets as _ipw
from helpers.course import check_environment as _check
with _ctx.redirect_stdout(_io.StringIO()) as _printed:
    _env_ok = _check()
print("COLAB-LIKE", _json.dumps({
    "helpers": _helpers.__file__, "widget_manager": _out.custom_widget_manager_calls,
    "ipywidgets": _ipw.__version__, "ipykernel": _ipk.__version__,
    "sacrebleu": _util.find_spec("sacrebleu") is not None,
    "environment_ok": _env_ok, "environment": _printed.getvalue(), "modules": _modules}))'''

# The notebook that first teaches (or first needs) each module; modules named "...nbNN..." (a
# notebook's exercises or figures) belong to notebook NN; the rest may be imported anywhere.
# Notebook 09 needs greedy decoding (taught in 10) to score its translations. "tqdm.auto" is
# the training loop's progress bar; plain "tqdm" is imported by torch itself (torch.hub).
FIRST_NEEDED_IN = {"helpers.attention": 1, "helpers.positional": 2, "helpers.interop": 3,
                   "helpers.layers": 4, "helpers.masks": 6, "helpers.model": 8,
                   "helpers.data": 9, "helpers.training": 9, "helpers.decoding": 9,
                   "helpers.translation": 9, "tqdm.auto": 9, "sacrebleu": 9,
                   "helpers.ablation": 11, "helpers.distributed": 13, "helpers.fsdp": 13,
                   "helpers.gpt": 12, "helpers.generation": 12, "helpers.continuation": 12,
                   "helpers.tokens": 14,
                   "helpers.pretrained": 15}
# Notebook 00 shows how exercises are checked on a warm-up of its own (helpers/exercises/nb00.py),
# so that no later notebook's answer is given away: nothing is allowed early.
ALLOWED_EARLY: dict = {}


def first_needed_in(module: str):
    match = re.search(r"\.nb(\d\d)", module)
    if match:
        return int(match.group(1))
    return _first_of_package(FIRST_NEEDED_IN, module)


def _first_of_package(table: dict, module: str, default=None):
    """``table``'s entry for ``module`` or, failing that, for the nearest package holding it
    (``helpers.translation.lexicon`` -> ``helpers.translation``, ``sacrebleu.metrics`` ->
    ``sacrebleu``)."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in table:
            return table[".".join(parts[:end])]
    return default


def imported_too_early(modules: list, number: int) -> list:
    """The modules a notebook imported that only a later notebook teaches or needs."""
    return [m for m in modules if (first_needed_in(m) or 0) > number
            and m not in ALLOWED_EARLY.get(number, ())]


def _snapshot_repository(folder: Path) -> Path:
    """A git repository holding this checkout's files as they are now (what a push would hold)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = ROOT / name
        if source.is_file():  # a file deleted but not yet committed is skipped
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, folder / name)
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@localhost"]
    subprocess.run([*git, "init", "--quiet", "--initial-branch=main"], cwd=folder, check=True)
    subprocess.run([*git, "add", "--all"], cwd=folder, check=True)
    subprocess.run([*git, "commit", "--quiet", "-m", "snapshot"], cwd=folder, check=True)
    return folder


def _layered_venv(folder: Path) -> Path:
    """A venv at ``folder`` that sees every package of ``.venv-colab`` and installs into its own
    site-packages (``sys.prefix`` is ``folder``); returns its python."""
    subprocess.run([str(build_env.PYTHON), "-m", "venv", "--without-pip", str(folder)], check=True)
    (site,) = folder.glob("lib/python*/site-packages")
    (colab,) = build_env.VENV.glob("lib/python*/site-packages")
    # addsitedir, not a plain path: .venv-colab's own .pth files must be read too
    (site / "colab_like.pth").write_text(f"import site; site.addsitedir({str(colab)!r})\n")
    return folder / "bin" / "python"


@pytest.fixture(scope="session")
def colab_env(tmp_path_factory):
    """The environment of the Colab-like kernel (``VIRTUAL_ENV``: this worker's layered venv),
    and its kernel spec on JUPYTER_PATH."""
    deadline = time.monotonic() + 600
    while build_env.BUILDING.exists() and time.monotonic() < deadline:  # CI builds it meanwhile
        time.sleep(2)
    if not build_env.up_to_date():
        message = ("the Colab-like environment is missing or out of date: build it with "
                   "`python3 tests/colab/build_env.py` (in CI, see its log .venv-colab.log)")
        if in_ci():
            pytest.fail(message)
        pytest.skip(message)
    base = tmp_path_factory.mktemp("colab")
    _remove_what_colab_lacks(build_env.VENV)  # left there by an older version of this test
    python = _layered_venv(base / "venv")
    origin = _snapshot_repository(base / "origin")
    home = base / "home"
    home.mkdir()
    subprocess.run(["git", "config", "--file", str(home / ".gitconfig"),
                    f"url.{origin.as_uri()}.insteadOf", REPO_URL], check=True)
    spec = base / "jupyter" / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}",
                 "--IPKernelApp.exec_lines=['import google.colab']"],
        "display_name": "Colab-like", "language": "python"}))
    env = {key: value for key, value in os.environ.items()
           if key not in {"VIRTUAL_ENV", "PYTHONPATH", "JUPYTER_PATH", "GIT_CONFIG_GLOBAL"}}
    env.update(HOME=str(home), PYTHONPATH=str(HERE / "stub"), GIT_CONFIG_NOSYSTEM="1",
               VIRTUAL_ENV=str(python.parent.parent),
               PIP_NO_INDEX="1", PIP_FIND_LINKS=str(build_env.WHEELHOUSE),
               PIP_DISABLE_PIP_VERSION_CHECK="1", OMP_NUM_THREADS="1",
               MPLCONFIGDIR=str(base / "matplotlib"), IPYTHONDIR=str(base / "ipython"),
               PATH=f"{python.parent}{os.pathsep}{os.environ['PATH']}")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("JUPYTER_PATH", str(base / "jupyter"))
        yield env


def _remove_what_colab_lacks(venv: Path):
    """Uninstall what Colab lacks from ``venv`` as ``pip uninstall`` does (every file its RECORD
    lists, then its folders), without starting pip: that takes a second and a half, once per
    notebook."""
    for name in build_env.COLAB_LACKS:
        for info in venv.glob(f"lib/python*/site-packages/{name}-*.dist-info"):
            site, folders = info.parent, {info}
            for line in (info / "RECORD").read_text().splitlines():
                relative = Path(line.split(",", 1)[0])
                (site / relative).unlink(missing_ok=True)
                if relative.parts[0] != "..":  # a console script lives in bin/
                    folders.add(site / relative.parts[0])
            for folder in folders:
                shutil.rmtree(folder, ignore_errors=True)
        left = list(venv.glob(f"lib/python*/site-packages/{name}*"))
        assert not left, f"{name} is still installed: {left}"


def _with_checks(cells):
    checked = []
    for cell in cells:
        checked.append(cell)
        if cell.cell_type == "code" and "interact(" in cell.source:
            checked.append(nbformat.v4.new_code_cell(MOVE_WIDGETS))
    return [*checked, nbformat.v4.new_code_cell(FACTS)]


def _printed(cell) -> str:
    return "".join(out.get("text", "") for out in cell.outputs if out.output_type == "stream")


def test_every_notebook_is_checked():
    assert len(NOTEBOOKS) == 16
    assert "interact(" in (ROOT / "notebooks" / "06_masks.ipynb").read_text()
    assert sorted(p.values[0] for p in _params()) == [p.name for p in NOTEBOOKS]
    groups = [p.marks[0].args[0] for p in _params()]
    assert len(set(groups)) == len(NOTEBOOKS)  # one each: handed out one at a time


def _params():
    """One ``xdist_group`` per notebook: the notebooks are handed out one at a time, the longest
    first (conftest.py), to whichever worker is free, and the group keeps the file's tests from
    being one group because they share the session's ``colab_env``."""
    return [pytest.param(path.name, marks=pytest.mark.xdist_group(f"colab {path.name}"))
            for path in NOTEBOOKS]


@pytest.mark.slow
@pytest.mark.parametrize("name", _params())
def test_notebook_runs_alone_on_colabs_versions(colab_env, name, tmp_path):
    _remove_what_colab_lacks(Path(colab_env["VIRTUAL_ENV"]))
    content = tmp_path / "content"  # Colab's working folder: nothing but the notebook
    content.mkdir()
    shutil.copy(ROOT / "notebooks" / name, content / name)
    nb = nbformat.read(content / name, as_version=4)
    shorten(name, nb)
    nb.cells = _with_checks(nb.cells)
    execute_notebook(nb, content, kernel_name=KERNEL, timeout=300, env=colab_env)

    moved = [cell for cell in nb.cells if cell.source.startswith("# Added by the Colab-like "
                                                                 "test: move")]
    for cell in moved:
        assert "COLAB-LIKE moved" in _printed(cell)
    assert len(moved) == sum("interact(" in c.source for c in nb.cells if c.cell_type == "code")
    facts = json.loads(_printed(nb.cells[-1]).split("COLAB-LIKE ", 1)[1])
    assert Path(facts["helpers"]) == content / "course" / "helpers" / "__init__.py"
    assert facts["widget_manager"] == 1
    assert (facts["ipywidgets"], facts["ipykernel"]) == ("7.7.1", "6.17.1")
    # Installed where BLEU is computed (notebook 09), by bleu itself; nowhere else.
    computes_bleu = any("bleu(" in c.source for c in nb.cells if c.cell_type == "code")
    assert facts["sacrebleu"] == computes_bleu, (
        "sacrebleu installed without BLEU" if facts["sacrebleu"] else "bleu did not install it")
    assert facts["environment_ok"], facts["environment"]
    assert "pip install" not in facts["environment"]
    early = imported_too_early(facts["modules"], int(name[:2]))
    assert not early, f"{name} imported what only later notebooks teach: {early}"


PRETRAINED_ON_COLAB = '''
import sys
sys.path.append(sys.argv[1])  # pytest only: Colab's own packages come first on the path
import huggingface_hub as hub, pytest, sentencepiece, transformers
print("COLAB-LIKE", transformers.__version__, hub.__version__, sentencepiece.__version__)
sys.exit(pytest.main(["-q", "-o", "addopts=", "-p", "no:cacheprovider", "tests/pretrained"]))
'''


@pytest.mark.slow
def test_notebook_15s_parity_tests_on_colabs_versions(colab_env):
    """tests/pretrained (the conversion against transformers) run on Colab's transformers,
    huggingface_hub, tokenizers and sentencepiece; pytest comes from this environment, after
    Colab's packages on the path, without its plugins."""
    here = str(Path(pytest.__file__).resolve().parents[1])  # the site-packages holding pytest
    env = {**colab_env, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([str(build_env.PYTHON), "-c", PRETRAINED_ON_COLAB, here], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "COLAB-LIKE 5.15.0 1.27.0 0.2.2" in done.stdout
    assert " passed" in done.stdout and "skipped" not in done.stdout


def test_imported_too_early_can_fail():
    modules = ["helpers", "helpers.attention", "helpers.exercises", "helpers.exercises.nb01",
               "helpers.figures.nb09_training", "helpers.training", "tqdm", "tqdm.auto",
               "sacrebleu"]
    assert imported_too_early(modules, 1) == ["helpers.figures.nb09_training",
                                              "helpers.training", "tqdm.auto", "sacrebleu"]
    assert imported_too_early(modules, 9) == []
    assert imported_too_early(["helpers.exercises.nb00", "helpers.figures"], 0) == []
    assert imported_too_early(["helpers.exercises.nb06", "helpers.masks"], 0) == [
        "helpers.exercises.nb06", "helpers.masks"]  # notebook 00 gives no later answer away
    assert imported_too_early(["helpers.exercises.nb06", "helpers.masks"], 1) == [
        "helpers.exercises.nb06", "helpers.masks"]
