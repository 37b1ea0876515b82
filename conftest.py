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
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield
