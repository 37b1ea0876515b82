"""How long each notebook takes, for ``conftest.py``: the longest groups of tests go first, so that
the pytest-xdist workers finish together (and ``tests/shortened.py``: its estimate of the slow
suites' time on a notebook). A notebook's time is read from the notebook itself:
``tests.tools --execute`` (nbclient) stores when each cell started and replied in the cell's
metadata.
"""

from __future__ import annotations

import json
from datetime import datetime
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
UNTIMED = 10.0  # seconds, for a notebook stored without timings


@cache
def cell_seconds(name: str) -> tuple[tuple[str, float], ...]:
    """(source, seconds) of each code cell of notebook ``name`` (``09_training`` or its file
    name) in its stored run: the time from the cell's start to its reply; ``()`` when the notebook
    has no stored timings."""
    path = NOTEBOOKS / f"{Path(name).stem}.ipynb"
    try:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    except (OSError, ValueError, KeyError):
        return ()
    timed = []
    for cell in cells:
        times = cell.get("metadata", {}).get("execution", {})
        start, end = times.get("iopub.execute_input"), times.get("shell.execute_reply")
        if cell.get("cell_type") == "code" and start and end:
            source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
            timed.append((source, (_time(end) - _time(start)).total_seconds()))
    return tuple(timed)


def _time(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def notebook_seconds(name: str) -> float:
    """Seconds that the stored run of notebook ``name`` spent in its cells (``UNTIMED`` for a
    notebook stored without timings)."""
    timed = cell_seconds(name)
    return sum(seconds for _, seconds in timed) if timed else UNTIMED
