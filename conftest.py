"""Shared test setup (unit tests and notebooks): keep Jupyter, IPython and matplotlib out of
$HOME, one thread per pytest worker, and seed everything."""

import atexit
import os
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
# Notebook 14 takes its offline path (a stand-in for the real translator) even where the internet
# is reachable: its stored outputs come from that path (helpers/pretrained.py, OFFLINE_VARIABLE).
os.environ.setdefault("COURSE_OFFLINE", "1")
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """``--dist loadgroup``: a test file is one group (a notebook's cells run in order in one
    kernel, a module's fixtures are built once), unless its tests name their own ``xdist_group``
    (the browser tests deal their notebooks into two groups, one per worker)."""
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.path.name))



@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    """Fail loudly where xdist cannot group: pytest 9.2 made node ids read-only, so xdist 3.8's
    ``--dist loadgroup`` silently drops the group suffix and spreads a notebook's cells over
    both workers (pytest-xdist issue 1386), where they fail with NameErrors far from the cause.
    The hook above gives every test a group, so every id must carry one."""
    if node.config.getoption("dist") == "loadgroup" and ids and "@" not in ids[0]:
        raise pytest.UsageError(
            f"pytest {pytest.__version__} with this pytest-xdist does not group tests "
            f"(--dist loadgroup; pytest-xdist issue 1386): pip install -r requirements.txt")
