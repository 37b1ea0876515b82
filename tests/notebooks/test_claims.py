"""Every claim about a trained model holds on every CPU, with a margin: the thresholds that the
notebooks assert and the ranges that the prose quotes agree with ``assets/sweep.json``, the
sweep that retrained those models under emulated CPUs, thread counts and seeds
(``python -m tests.tools --sweep``, :mod:`tests.tools.sweep`).

The conventions the notebooks follow, and this test reads:

- a code line that asserts a trained model's result ends with ``# sweep: <metric>``: ``assert
  value > T`` (or ``>=``) needs ``T`` below the smallest measured value by a margin, the larger
  of the measured spread (max - min: the sweep saw that much, a CPU it did not emulate may see
  as much again) and :data:`MARGIN` of the value; ``assert value < T`` (or ``<=``) ``T`` that
  much above the largest; an assert without a number claims a yes/no metric about the
  notebook's model, which must be 1 in every run of the notebooks' seed, 0 (every CPU);
- prose (markdown, or the README) that quotes a measured range writes ``A to B`` (``%`` may
  follow each number) right before ``<!-- sweep: <metric> -->``: ``A`` and ``B`` must enclose
  the measured range, rounded outwards to whole numbers at most one step away.
"""

import json
import math
import re
from pathlib import Path

import pytest

from tests.tools.sweep import METRICS, SWEEP_PATH

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
MARGIN = 0.05  # at least 5% of the measured bound between it and a threshold
NUMERIC = re.compile(r"assert\s+.+?\s(?P<op>>=|<=|>|<)\s*(?P<value>-?[\d.]+)\s*(?:,[^#]*)?"
                     r"#\s*sweep:\s*(?P<metric>[\w.]+)")  # assert <value> > T  # sweep: m
YES_NO = re.compile(r"assert\s+.+#\s*sweep:\s*(?P<metric>[\w.]+)")  # assert <claim>  # sweep: m
QUOTED = re.compile(r"(?P<low>-?[\d.]+)%?\s+to\s+(?P<high>-?[\d.]+)%?\s*"
                    r"<!--\s*sweep:\s*(?P<metric>[\w.]+)\s*-->")
MARKED = re.compile(r"sweep:\s*([\w.]+)")


def measured() -> dict:
    return json.loads(SWEEP_PATH.read_text())["metrics"]


def claims() -> list:
    """``(where, kind, match)`` for every marked assert (code) and quoted range (markdown,
    README)."""
    found = []
    for path in NOTEBOOKS:
        for index, cell in enumerate(json.loads(path.read_text())["cells"]):
            source = "".join(cell["source"])
            where = f"{path.stem} cell {index}"
            if cell["cell_type"] == "code":
                found += [(where, "assert", line) for line in source.splitlines()
                          if re.search(r"#\s*sweep:", line)]
            else:
                found += [(where, "quoted", m) for m in QUOTED.finditer(source)]
                assert len(QUOTED.findall(source)) == source.count("<!-- sweep:"), (
                    f"{where}: a <!-- sweep: ... --> comment without 'A to B' just before it")
    readme = (ROOT / "README.md").read_text()
    found += [("README.md", "quoted", m) for m in QUOTED.finditer(readme)]
    return found


def check_assert(line: str, metrics: dict) -> str | None:
    """What is wrong with one marked assert line (None: it holds with the margin)."""
    match = NUMERIC.search(line) or YES_NO.search(line)
    if match is None:
        return f"cannot read the marked assert {line.strip()!r}"
    row = metrics[match["metric"]]
    if "op" not in match.groupdict():  # a yes/no claim: it held on every CPU, the notebooks' seed
        return None if row["seed_0_min"] == 1 else (
            f"held in only some runs of seed 0 (min {row['seed_0_min']})")
    threshold, spread = float(match["value"]), row["max"] - row["min"]
    if match["op"] in (">", ">="):
        limit = row["min"] - max(spread, MARGIN * abs(row["min"]))
        return None if threshold <= limit else (
            f"asserts > {threshold}, but the sweep measured as little as {row['min']:.3f}: the "
            f"threshold must be at most {limit:.3f}")
    limit = row["max"] + max(spread, MARGIN * abs(row["max"]))
    return None if threshold >= limit else (
        f"asserts < {threshold}, but the sweep measured as much as {row['max']:.3f}: the "
        f"threshold must be at least {limit:.3f}")


def check_quoted(low: float, high: float, row: dict) -> str | None:
    """What is wrong with a quoted range ``low to high`` (None: it agrees with the sweep)."""
    if not (math.floor(row["min"]) - 1 <= low <= row["min"]
            and row["max"] <= high <= math.ceil(row["max"]) + 1):
        return (f"quotes {low:g} to {high:g}, but the sweep measured {row['min']:.2f} to "
                f"{row['max']:.2f}")
    return None


def test_the_sweep_covers_every_metric_with_its_runs():
    sweep = json.loads(SWEEP_PATH.read_text())
    assert set(sweep["metrics"]) == set(METRICS)
    assert len(sweep["runs"]) >= 5
    switches = {json.dumps(run["switches"], sort_keys=True) for run in sweep["runs"]}
    assert len(switches) >= 3 and {run["threads"] for run in sweep["runs"]} >= {1, 2}
    assert len({run["seed"] for run in sweep["runs"]}) >= 3
    for name, row in sweep["metrics"].items():
        # a sweep of some notebooks (sweep(notebooks=[...])) adds runs with their metrics only
        values = [run["metrics"][name] for run in sweep["runs"] if name in run["metrics"]]
        assert (row["min"], row["max"]) == (min(values), max(values)), name


def test_every_marked_claim_holds_with_its_margin():
    metrics, problems = measured(), []
    for where, kind, item in claims():
        if kind == "assert":
            metric = MARKED.search(item).group(1)
            problem = metric not in metrics and "no such metric" or check_assert(item, metrics)
        else:
            metric = item["metric"]
            problem = metric not in metrics and "no such metric" or check_quoted(
                float(item["low"]), float(item["high"]), metrics[metric])
        if problem:
            problems.append(f"{where}: {metric}: {problem}")
    assert not problems, "\n".join(problems)


def test_every_metric_is_claimed_somewhere():
    """A metric that no notebook asserts or quotes is not worth an hour of sweeping."""
    used = {MARKED.search(item).group(1) if kind == "assert" else item["metric"]
            for _, kind, item in claims()}
    assert used == set(METRICS), set(METRICS) - used


@pytest.mark.parametrize("line, problem", [
    ("assert score > 5  # sweep: m", None),
    ("assert score > 54  # sweep: m", None),  # 60 - the spread, 6
    ("assert score > 55  # sweep: m", "at most 54.000"),  # inside the noise: within the spread
    ("assert score > 95  # sweep: m", "at most"),  # a doctored threshold
    ("assert gap < 3.0  # sweep: m", "at least"),
    ("assert gap < 72  # sweep: m", None),
    ("assert ok  # sweep: m", "only some runs"),
    ("assert f(a, [b for _, b in c]) > 50  # sweep: m", None),  # commas before the number
    ("assert f(a, [b for _, b in c]) > 58  # sweep: m", "at most"),
])
def test_a_doctored_threshold_is_caught(line, problem):
    metrics = {"m": {"min": 60.0, "median": 62.0, "max": 66.0, "seed_0_min": 0,
                     "seed_0_max": 1}}
    found = check_assert(line, metrics)
    assert (found is None) if problem is None else (problem in found)


def test_a_doctored_quoted_range_is_caught():
    row = {"min": 48.9, "max": 65.6}
    assert check_quoted(48, 66, row) is None
    assert "quotes 50 to 66" in check_quoted(50, 66, row)  # narrower than measured
    assert check_quoted(30, 66, row) is not None  # much wider than measured
