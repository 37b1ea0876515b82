"""How long each notebook takes, and dealing notebooks into groups that take about as long.

Used by ``conftest.py`` (the longest notebooks go first, so that two pytest-xdist workers finish
together) and by the Colab-like and browser suites (their notebooks are dealt into two groups, one
per worker). A notebook's time is read from the notebook itself: ``helpers.course --execute``
(nbclient) stores when each cell started and replied in the cell's metadata.
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
def notebook_seconds(name: str) -> float:
    """Seconds that the stored run of notebook ``name`` (``09_training`` or its file name) spent
    in its cells: the sum over code cells of their reply time minus their start time."""
    path = NOTEBOOKS / f"{Path(name).stem}.ipynb"
    try:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    except (OSError, ValueError, KeyError):
        return UNTIMED
    total, timed = 0.0, False
    for cell in cells:
        times = cell.get("metadata", {}).get("execution", {})
        start, end = times.get("iopub.execute_input"), times.get("shell.execute_reply")
        if start and end:
            total += (datetime.fromisoformat(end.replace("Z", "+00:00"))
                      - datetime.fromisoformat(start.replace("Z", "+00:00"))).total_seconds()
            timed = True
    return total if timed else UNTIMED


def deal(names, count: int) -> list[list[str]]:
    """``names`` (notebooks) in ``count`` groups of about equal time: longest first, each to the
    group with the least time so far. Every group is sorted by name."""
    groups: list[list[str]] = [[] for _ in range(count)]
    load = [0.0] * count
    for name in sorted(names, key=lambda n: (-notebook_seconds(n), n)):
        lightest = load.index(min(load))
        groups[lightest].append(name)
        load[lightest] += notebook_seconds(name)
    return [sorted(group) for group in groups]
