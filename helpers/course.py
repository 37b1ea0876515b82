"""The course itself: where it lives, how each notebook starts, which versions it is tested with.

Everything a notebook needs to find the course is kept here, in one place:

- ``REPO_URL``: the repository address (the setup cell of every notebook repeats it; a test
  checks that the two agree);
- ``colab_url(name)`` and ``colab_badge(name)``: the "Open in Colab" link and the badge line of
  each notebook's first cell;
- ``SETUP_CELL``: the exact code of each notebook's second cell;
- ``TESTED_VERSIONS`` and ``check_environment()``: the pinned versions of ``requirements.txt``
  and a check of the installed ones.

Regenerate the figures kept in ``assets/`` (``assets/architecture.png``) from the repository root::

    python -m helpers.course --write-assets

which calls :func:`write_assets`.
"""

import re
import sys
from importlib import metadata
from pathlib import Path

REPO_URL = "https://github.com/transformers-from-scratch/course"

ROOT = Path(__file__).resolve().parents[1]  # the repository root (the ``course`` folder on Colab)
ASSETS = ROOT / "assets"

_BADGE_SVG = "https://colab.research.google.com/assets/colab-badge.svg"

SETUP_CELL = '''\
# Setup: makes `helpers` importable here, in JupyterLab or on Colab (where it fetches the course).
import os, sys
REPO_URL = "https://github.com/transformers-from-scratch/course"
if "google.colab" in sys.modules:  # on Colab: fetch the course once, and turn sliders on
    if not os.path.isdir("course"):
        os.system(f"git clone --depth 1 {REPO_URL} course")
    from google.colab import output
    output.enable_custom_widget_manager()
for root in ("course", ".."):
    if os.path.isdir(os.path.join(root, "helpers")) and os.path.abspath(root) not in sys.path:
        sys.path.insert(0, os.path.abspath(root))
from helpers.utils import set_seed, get_device
set_seed(0)
device = get_device()'''


def colab_url(notebook_filename: str) -> str:
    """The Colab link that opens ``notebooks/<notebook_filename>`` straight from GitHub."""
    name = Path(notebook_filename).name  # "notebooks/00_introduction.ipynb" works too
    colab_repo = REPO_URL.replace("https://github.com/", "https://colab.research.google.com/github/")
    return f"{colab_repo}/blob/main/notebooks/{name}"


def colab_badge(notebook_filename: str) -> str:
    """The markdown "Open in Colab" badge line that each notebook's first cell carries."""
    return f"[![Open In Colab]({_BADGE_SVG})]({colab_url(notebook_filename)})"


# The packages a learner's environment is checked for (the rest of requirements.txt is tooling).
CHECKED_PACKAGES = ("torch", "ipywidgets", "matplotlib", "seaborn", "numpy")


def _read_tested_versions(requirements: Path = ROOT / "requirements.txt") -> dict:
    """``{"torch": "2.13.0", ...}`` from the ``name==version`` lines of requirements.txt."""
    pins = {}
    for line in requirements.read_text().splitlines():
        match = re.match(r"\s*([A-Za-z0-9_.-]+)\s*==\s*([^\s#;]+)", line)
        if match and match.group(1).lower() in CHECKED_PACKAGES:
            pins[match.group(1).lower()] = match.group(2)
    return {name: pins[name] for name in CHECKED_PACKAGES if name in pins}


TESTED_VERSIONS = _read_tested_versions()


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


def check_environment() -> bool:
    """Print one line per package: ok, newer (fine), older or missing (with the fix).

    Compares the installed major.minor version with ``TESTED_VERSIONS``. Returns True when no
    package is older than tested or missing.
    """
    all_good = True
    for package, tested in TESTED_VERSIONS.items():
        installed = _installed_version(package)
        if installed is None:
            status = f"not installed: pip install '{package}=={tested}'"
            all_good = False
        elif _major_minor(installed) < _major_minor(tested):
            status = f"older than tested: upgrade with pip install '{package}=={tested}'"
            all_good = False
        elif _major_minor(installed) > _major_minor(tested):
            status = f"ok (newer than the tested {tested}: should work)"
        else:
            status = "ok"
        print(f"{package:<11} {installed or '-':<12} {status}")
    return all_good


def write_assets(folder: Path = ASSETS) -> list:
    """Redraw the figures kept in ``assets/`` and return their paths."""
    import matplotlib.pyplot as plt

    from .plotting import architecture_figure

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    fig = architecture_figure()
    path = folder / "architecture.png"
    fig.savefig(path, dpi=120, facecolor="white")
    plt.close(fig)
    return [path]


if __name__ == "__main__":
    if sys.argv[1:] == ["--write-assets"]:
        import matplotlib

        matplotlib.use("Agg")  # draw to files only, no window
        for written in write_assets():
            print(f"wrote {written}")
    else:
        print("usage: python -m helpers.course --write-assets")
        sys.exit(2)
