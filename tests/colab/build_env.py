"""Build ``.venv-colab``: Colab's package set, for the Colab-like test of every notebook.

    python3 tests/colab/build_env.py        # about a minute and a half; does nothing if up to date

It creates a virtual environment from ``tests/colab/requirements-colab.txt`` (Colab's versions:
ipywidgets 7.7.1, ipykernel 6.17.1, IPython 7.34, numpy 2.1.3, matplotlib 3.10.0, ...) without
sacrebleu or anything else Colab lacks, and puts the wheels of what Colab lacks in
``.venv-colab/wheelhouse`` so that the notebooks' setup cell can install them there, as it does
on Colab, without reaching the network during the test. ``tests/colab/test_colab_like.py`` then
runs each notebook alone in an empty folder with a kernel of this environment.

It needs nothing but the Python it runs with (3.11 here: the CPU build of torch on this
machine is for 3.11) and the package registry.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# COLAB_LIKE_VENV points the test at another environment, e.g. one with Colab's real torch 2.11.
VENV = Path(os.environ.get("COLAB_LIKE_VENV", ROOT / ".venv-colab"))
REQUIREMENTS = Path(__file__).with_name("requirements-colab.txt")
PYTHON = VENV / "bin" / "python"
WHEELHOUSE = VENV / "wheelhouse"
# What Colab lacks: sacrebleu (helpers.course.COLAB_MISSING) and the two dependencies of it that
# Colab's runtime does not ship. Installed by the setup cell, removed by the test between notebooks.
COLAB_LACKS = {"sacrebleu": "2.6.0", "portalocker": "4.4.2", "colorama": "0.4.6"}
_STAMP = VENV / "built-from.txt"
BUILDING = ROOT / ".venv-colab.building"  # exists while a build runs (CI builds in the background)


def up_to_date() -> bool:
    """True when ``.venv-colab`` was built from the current requirements-colab.txt."""
    return (PYTHON.exists() and _STAMP.exists()
            and _STAMP.read_text() == REQUIREMENTS.read_text())


def build() -> None:
    if up_to_date():
        print(f"{VENV.name} is up to date")
        return
    BUILDING.touch()
    try:
        _build()
    finally:
        BUILDING.unlink(missing_ok=True)


def _build() -> None:
    shutil.rmtree(VENV, ignore_errors=True)
    print(f"building {VENV.name} from {REQUIREMENTS.relative_to(ROOT)}", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    pip = [str(PYTHON), "-m", "pip", "--disable-pip-version-check", "--quiet"]
    subprocess.run([*pip, "install", "--no-deps", "-r", str(REQUIREMENTS)], check=True)
    subprocess.run([*pip, "check"], check=True)  # the list is complete and consistent
    _write_bytecode()
    wanted = [f"{name}=={version}" for name, version in COLAB_LACKS.items()]
    subprocess.run([*pip, "download", "--no-deps", "-d", str(WHEELHOUSE), *wanted], check=True)
    _STAMP.write_text(REQUIREMENTS.read_text())
    print(f"built {VENV.name}")


# What every Colab-like kernel imports.
KERNEL_IMPORTS = ("torch", "matplotlib.pyplot", "seaborn", "ipykernel.kernelapp", "ipywidgets",
                  "IPython", "tqdm.auto")


def _write_bytecode() -> None:
    """Where pip was told not to byte-compile (``.ci/run`` does, see there), import what every
    kernel imports, once, so that Python writes its bytecode now, not the first kernels of each
    test worker together. Nothing to do where pip compiled, or where Python writes no bytecode."""
    compiled = any(VENV.glob("lib/python*/site-packages/torch/__pycache__/*.pyc"))
    if compiled or os.environ.get("PYTHONDONTWRITEBYTECODE"):
        return
    subprocess.run([str(PYTHON), "-c", "import " + ", ".join(KERNEL_IMPORTS)], check=True,
                   env={**os.environ, "MPLBACKEND": "agg"})


if __name__ == "__main__":
    build()
