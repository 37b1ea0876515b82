"""Shared test setup (unit tests and notebooks): keep Jupyter, IPython and matplotlib out of
$HOME, one thread per pytest worker, seed everything, and hand the work to the pytest-xdist
workers."""

import atexit
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent
_TMP = Path(tempfile.mkdtemp(prefix="tfs-tests-"))
atexit.register(shutil.rmtree, _TMP, ignore_errors=True)
for var, sub in [("JUPYTER_RUNTIME_DIR", "jupyter-runtime"), ("JUPYTER_DATA_DIR", "jupyter-data"),
                 ("IPYTHONDIR", "ipython"), ("MPLCONFIGDIR", "matplotlib")]:
    os.environ.setdefault(var, str(_TMP / sub))
    Path(os.environ[var]).mkdir(parents=True, exist_ok=True)
# Two pytest workers share two cores: one thread each (kernels started by nbval inherit this).
# Tiny tensors are much slower when every op wakes a thread pool on a busy machine.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# Notebook 15 takes its offline path (a stand-in for the real translator) even where the internet
# is reachable: its stored outputs come from that path (helpers/pretrained.py, OFFLINE_VARIABLE).
os.environ.setdefault("COURSE_OFFLINE", "1")
# Where a cell measures two threads (notebook 13), a thread with nothing to do sleeps instead of
# spinning on the core the other worker needs: measured on a loaded 2-core machine, 65 ms per
# training step instead of 152. OpenMP reads it once, when torch is loaded: here, and by kernels.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# What helpers.utils.set_seed(0) sets, and what the tests' seeding keeps: set from the start, it is
# also the value of the fork server that helpers.distributed.spawn starts once per worker, whose
# processes then need no fresh start when the tests seed (helpers.distributed.start_method).
os.environ.setdefault("PYTHONHASHSEED", "0")
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import pytest  # noqa: E402
import torch  # noqa: E402

from tests.scheduling import notebook_seconds  # noqa: E402
from tests.shortened import shortened_seconds  # noqa: E402

torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield


def _group(item):
    marker = item.get_closest_marker("xdist_group")
    if marker is None:
        return None
    return marker.args[0] if marker.args else marker.kwargs.get("name")


def _shares_a_fixture(item) -> bool:
    """Whether the test asks for a fixture that lives longer than one test (not an autouse one)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(definitions[-1].scope != "function"
               for name in info.argnames
               if (definitions := info.name2fixturedefs.get(name)))


NOTEBOOK_NAME = re.compile(r"\b\d\d_\w+?(?=\.ipynb|[\]\-:]|$)")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """``--dist loadgroup``, with xdist's own order (by group size) turned off (pyproject.toml):

    - each notebook is one group: its cells run in order, in one kernel;
    - tests that name their own ``xdist_group`` keep it (the Colab-like and browser suites make
      one group per notebook, so that a free worker takes the next one);
    - the tests of a file that ask for a module- or session-scoped fixture are one group, so that
      the fixture is built once;
    - every other test is handed out alone, so a unit-test file is spread over the workers.

    The groups go first, the longest first (a group's time: its notebooks' stored runs, see
    tests/scheduling.py, or ``_estimate``'s guess for the slow suites), then the unit tests fill
    in, so that the workers end together."""
    for item in items:
        if _group(item) is not None:
            continue
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.xdist_group(item.path.name))
        elif _shares_a_fixture(item):
            item.add_marker(pytest.mark.xdist_group(f"{item.path.name} (shared fixtures)"))
    notebooks: dict[str, set] = {}
    for item in items:
        group = _group(item)
        if group is not None:
            found = set(NOTEBOOK_NAME.findall(item.nodeid.split("::", 1)[-1]))
            if item.path.suffix == ".ipynb":
                found.add(item.path.stem)
            notebooks.setdefault(group, set()).update(found)
    seconds = {group: sum(map(_estimate(group), names)) for group, names in notebooks.items()}
    items.sort(key=lambda item: -seconds.get(_group(item), -1.0))


def _estimate(group: str):
    """How a group's time is guessed from its notebooks: the Colab-like and browser suites (slow
    tiers) run shortened copies and spend seconds on each notebook before its first cell."""
    return shortened_seconds if group.startswith(("colab ", "browser ")) else notebook_seconds


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    """Fail loudly where xdist cannot group: pytest 9.2 made node ids read-only, so xdist 3.8's
    ``--dist loadgroup`` silently drops the group suffix and spreads a notebook's cells over
    both workers (pytest-xdist issue 1386), where they fail with NameErrors far from the cause.
    The hook above gives every notebook cell a group, so every cell's id must carry one."""
    ungrouped = [i for i in ids if ".ipynb::" in i and "@" not in i]
    if node.config.getoption("dist") == "loadgroup" and ungrouped:
        raise pytest.UsageError(
            f"pytest {pytest.__version__} with this pytest-xdist does not group tests "
            f"(--dist loadgroup; pytest-xdist issue 1386): pip install -r requirements.txt")
