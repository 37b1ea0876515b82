"""The course itself: where it lives, how each notebook starts (``SETUP_CELL``, ``setup()``, the
Colab badge), and which package versions it is tested with (``check_environment()``).

The contributor's tooling lives beside it: :mod:`helpers.course.tools` (``python -m
helpers.course --write-assets | --execute notebooks/NN_name.ipynb | --retrain-asset``) and
:mod:`helpers.course.sync` (``python -m helpers.course.sync --check | --write``: the marked
notebook cells generated from ``helpers/``).
"""

import os
import re
import sys
from importlib import metadata
from pathlib import Path

# The repository; SETUP_CELL repeats it, and a test holds the two equal.
REPO_URL = "https://github.com/transformers-from-scratch/course"

ROOT = Path(__file__).resolve().parents[2]  # the repository root (the ``course`` folder on Colab)
ASSETS = ROOT / "assets"

_BADGE_SVG = "https://colab.research.google.com/assets/colab-badge.svg"

SETUP_CELL = '''\
# Setup: makes `helpers` importable in JupyterLab, VS Code or Colab (where it fetches the course).
import os, shutil, subprocess, sys
REPO_URL = "https://github.com/transformers-from-scratch/course"
if "google.colab" in sys.modules and not os.path.isdir("course/helpers"):  # Colab: fetch it once
    shutil.rmtree("course", ignore_errors=True)  # what a failed download may have left behind
    if subprocess.run(["git", "clone", "--quiet", "--depth", "1", REPO_URL, "course"]).returncode:
        raise RuntimeError(f"Could not download the course from {REPO_URL}. Check that the "
                           "runtime is connected (Runtime > Connect), then run this cell again.")
for root in ("course", ".."):
    if os.path.isdir(os.path.join(root, "helpers")) and os.path.abspath(root) not in sys.path:
        sys.path.insert(0, os.path.abspath(root))
from helpers.course import setup
from helpers.utils import set_seed, get_device
device = setup(seed=0)  # seeds; on Colab also turns the sliders on'''


def colab_url(notebook_filename: str) -> str:
    """The Colab link that opens ``notebooks/<notebook_filename>`` straight from GitHub."""
    name = Path(notebook_filename).name  # "notebooks/00_introduction.ipynb" works too
    colab_repo = REPO_URL.replace("https://github.com/", "https://colab.research.google.com/github/")
    return f"{colab_repo}/blob/main/notebooks/{name}"


def colab_badge(notebook_filename: str) -> str:
    """The markdown "Open in Colab" badge line that each notebook's first cell carries."""
    return f"[![Open In Colab]({_BADGE_SVG})]({colab_url(notebook_filename)})"


# ---------------------------------------------------------------------------------------------
# Versions. requirements.txt pins one tested set for local installs; a learner's kernel may have
# others (Colab ships its own and must not be changed). The ranges below are what the course is
# tested with, in one place: the oldest end is Colab's runtime (tests/colab runs every notebook
# on it), the newest is requirements.txt; no upper bound means newer releases are expected to work.
CHECKED_PACKAGES = ("torch", "ipywidgets", "matplotlib", "seaborn", "numpy")
SUPPORTED_VERSIONS = {  # package: (oldest supported "major.minor", first unsupported or None)
    "torch": ("2.11", None),  # Colab's 2.11.0 ran every notebook of tests/colab (README)
    "ipywidgets": ("7.7", "9"),  # 7.7 for Colab's front end, 8 for JupyterLab 4 and VS Code
    "matplotlib": ("3.10", None),
    "seaborn": ("0.13", None),
    "numpy": ("2.1", None),
}
# Releases that install fine but break a front end: (package, version) -> what to do instead.
KNOWN_BAD = {
    ("ipywidgets", "8.1.9"): "VS Code shows no widgets with 8.1.9 (vscode-jupyter #17504): "
                             "pip install 'ipywidgets==8.1.8' 'jupyterlab_widgets==3.0.16'",
}
# What Colab's runtime lacks, installed there where a notebook first needs it (never an upgrade
# of what it has): install_on_colab.
COLAB_MISSING = {"sacrebleu": "2.6.0"}  # BLEU in notebook 09: helpers.translation.bleu


def _read_tested_versions(requirements: Path = ROOT / "requirements.txt") -> dict:
    """``{"torch": "2.13.0", ...}`` from the ``name==version`` lines of requirements.txt."""
    pins = {}
    for line in requirements.read_text().splitlines():
        match = re.match(r"\s*([A-Za-z0-9_.-]+)\s*==\s*([^\s#;]+)", line)
        if match and match.group(1).lower() in CHECKED_PACKAGES:
            pins[match.group(1).lower()] = match.group(2)
    return {name: pins[name] for name in CHECKED_PACKAGES if name in pins}


TESTED_VERSIONS = _read_tested_versions()


def on_colab() -> bool:
    """True inside a Google Colab runtime (which imports ``google.colab`` before any cell runs)."""
    return "google.colab" in sys.modules


def _installed_version(package: str):
    """The installed version of ``package`` (e.g. "2.13.0+cpu"), or None if it is missing."""
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _major_minor(version: str) -> tuple:
    """``"2.13.0+cpu" -> (2, 13)``: the release numbers that matter for compatibility."""
    numbers = re.findall(r"\d+", version)[:2]
    return tuple(int(n) for n in numbers) + (0,) * (2 - len(numbers))


def _verdict(package: str, installed, colab: bool) -> tuple:
    """``(ok, message)`` for one package; the message never advises changing Colab's packages."""
    oldest, too_new = SUPPORTED_VERSIONS[package]
    tested = TESTED_VERSIONS.get(package, "")
    if installed is None:
        return False, f"not installed: pip install '{package}=={tested}'"
    if (package, installed.split("+")[0]) in KNOWN_BAD:
        return False, KNOWN_BAD[package, installed.split("+")[0]]
    wanted = f">={oldest}" + (f",<{too_new}" if too_new else "")
    out_of_range = _major_minor(installed) < _major_minor(oldest) or (
        too_new is not None and _major_minor(installed) >= _major_minor(too_new))
    if out_of_range and colab:
        return False, (f"not the version Colab ships: restart with a fresh runtime (Runtime > "
                       f"Disconnect and delete runtime); the course needs {package}{wanted}")
    if out_of_range:
        return False, f"the course needs {package}{wanted}: pip install '{package}=={tested}'"
    if colab:
        return True, "ok (Colab's own: keep it)"
    if _major_minor(installed) > _major_minor(tested):
        return True, f"ok (newer than the tested {tested}: should work)"
    return True, "ok"


def check_environment() -> bool:
    """Print one line per package, ``ok`` or what to do, and return True when all are ok.

    A version is ok when it lies in :data:`SUPPORTED_VERSIONS`. On Colab the advice never
    upgrades what Colab ships (its front end renders ipywidgets 7 only; a pip-installed torch
    would replace its build and break torchvision).
    """
    colab = on_colab()
    print("front end:", "Google Colab" if colab else "local (JupyterLab, VS Code, ...)")
    all_good = True
    for package in CHECKED_PACKAGES:
        installed = _installed_version(package)
        ok, message = _verdict(package, installed, colab)
        all_good &= ok
        print(f"{package:<11} {installed or '-':<12} {message}")
    return all_good


def _install_missing(packages: dict) -> None:
    """``pip install`` each missing ``{name: version}``, quietly; never touches installed ones."""
    import importlib.util
    import subprocess

    missing = [f"{name}=={version}" for name, version in packages.items()
               if importlib.util.find_spec(name) is None]
    if missing:
        print(f"Installing {' '.join(missing)} (this runtime lacks it; a few seconds, once)")
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", *missing])
        importlib.invalidate_caches()
        if done.returncode:
            print(f"Could not install {' '.join(missing)}: only BLEU in notebook 09 needs it.")


def install_on_colab(package: str) -> None:
    """On Colab, ``pip install`` ``package`` (one of :data:`COLAB_MISSING`) if the runtime lacks
    it: called where a notebook first needs it, so that only that notebook waits for the install
    (sacrebleu: ``bleu``, notebook 09). Elsewhere it does nothing: requirements.txt has it."""
    if on_colab():
        _install_missing({package: COLAB_MISSING[package]})


def _choose_threads() -> int:
    """One torch thread on a machine with two cores or fewer, torch's own choice elsewhere; a
    thread count set in ``OMP_NUM_THREADS`` is always left as it is.

    Measured on a 2-core CPU (README, "Open in Google Colab"): when the machine is idle a second
    thread takes notebook 09 from 55 s to 40 s; with one other busy process it makes a training
    step 1.9 times and a greedy decode 2.9 times slower than one thread.
    """
    import torch

    if "OMP_NUM_THREADS" not in os.environ and (os.cpu_count() or 1) <= 2:
        torch.set_num_threads(1)
    return torch.get_num_threads()


def setup(seed: int = 0):
    """What the setup cell of every notebook does once ``helpers`` is importable.

    On Colab: turns on Colab's widget manager (needed after every runtime restart); what Colab
    lacks is installed later, by the one notebook that needs it (:func:`install_on_colab`).
    Everywhere: chooses torch's thread count, seeds every random number generator and returns
    the fastest device.
    """
    from ..utils import get_device, set_seed

    if on_colab():
        from google.colab import output

        output.enable_custom_widget_manager()
    _choose_threads()
    set_seed(seed)
    return get_device()
