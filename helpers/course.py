"""The course itself: where it lives, how each notebook starts (``SETUP_CELL``, ``setup()``, the
Colab badge), and which package versions it is tested with (``check_environment()``)."""

import importlib.util
import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

# The repository; SETUP_CELL repeats it, and a test holds the two equal.
REPO_URL = "https://github.com/transformers-from-scratch/course"

ROOT = Path(__file__).resolve().parents[1]  # the repository root (the ``course`` folder on Colab)
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
    colab = REPO_URL.replace("https://github.com/", "https://colab.research.google.com/github/")
    return f"{colab}/blob/main/notebooks/{name}"


def colab_badge(notebook_filename: str) -> str:
    """The markdown "Open in Colab" badge line that each notebook's first cell carries."""
    return f"[![Open In Colab]({_BADGE_SVG})]({colab_url(notebook_filename)})"


# The versions the course is tested with: the oldest is Colab's runtime (tests/colab runs every
# notebook on it), the newest requirements.txt; no upper bound: newer releases should work.
SUPPORTED_VERSIONS = {  # package: (oldest supported "major.minor", first unsupported or None)
    "torch": ("2.11", None),  # Colab's 2.11.0 ran every notebook of tests/colab (README)
    "ipywidgets": ("7.7", "9"),  # 7.7 for Colab's front end, 8 for JupyterLab 4 and VS Code
    "matplotlib": ("3.10", None), "seaborn": ("0.13", None), "numpy": ("2.1", None),
}
CHECKED_PACKAGES = tuple(SUPPORTED_VERSIONS)
# Releases that install fine but break a front end: (package, version) -> what to do instead.
KNOWN_BAD = {
    ("ipywidgets", "8.1.9"): "VS Code shows no widgets with 8.1.9 (vscode-jupyter #17504): "
                             "pip install 'ipywidgets==8.1.8' 'jupyterlab_widgets==3.0.16'",
}
COLAB_MISSING = {"sacrebleu": "2.6.0"}  # what Colab lacks (for bleu): see install_on_colab


def _read_tested_versions(requirements: Path = ROOT / "requirements.txt") -> dict:
    """``{"torch": "2.13.0", ...}`` from the ``name==version`` lines of requirements.txt."""
    lines = re.findall(r"^[ \t]*([\w.-]+)[ \t]*==[ \t]*([^\s#;]+)", requirements.read_text(), re.M)
    pins = {name.lower(): version for name, version in lines}
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
    """Print one line per package, ``ok`` or what to do (on Colab, never an upgrade of what Colab
    ships), and return True when all are ok."""
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
    missing = [f"{name}=={version}" for name, version in packages.items()
               if importlib.util.find_spec(name) is None]
    if missing:
        print(f"Installing {' '.join(missing)} (this runtime lacks it; a few seconds, once)")
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", *missing])
        importlib.invalidate_caches()
        if done.returncode:
            print(f"Could not install {' '.join(missing)}: only BLEU in notebook 09 needs it.")


def install_on_colab(package: str) -> None:
    """On Colab, install ``package`` (of :data:`COLAB_MISSING`) where a notebook first needs it."""
    if on_colab():
        _install_missing({package: COLAB_MISSING[package]})


def _choose_threads() -> int:
    """One torch thread on two cores or fewer (unless ``OMP_NUM_THREADS`` is set): beside one busy
    process, a second thread makes a training step 1.9 times slower (README)."""
    import torch

    if "OMP_NUM_THREADS" not in os.environ and (os.cpu_count() or 1) <= 2:
        torch.set_num_threads(1)
    return torch.get_num_threads()


def setup(seed: int = 0):
    """The setup cell's work (Colab's widgets, torch threads, seeds); returns the fastest device."""
    from .utils import get_device, set_seed

    if on_colab():
        from google.colab import output

        output.enable_custom_widget_manager()
    _choose_threads()
    set_seed(seed)
    return get_device()
