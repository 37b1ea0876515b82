"""The benchmark's measuring tools (``tests.tools.bench``), without timing anything that matters:
``Ratio`` pairs its two sides in time and reports the median and spread of their ratios; the
notebook limits are the ones issue-sized for the course (a minute; 09 and 13 a minute and a
half)."""

import itertools

import pytest

from tests.tools import bench


def test_ratio_alternates_the_sides_and_pairs_them(monkeypatch):
    calls = []
    clock = itertools.count()  # each _seconds call "takes" the next number of seconds
    monkeypatch.setattr(bench, "_seconds", lambda fn: (fn(), float(next(clock) + 1))[1])
    ratio = bench.Ratio(lambda: calls.append("a"), lambda: calls.append("b"), repeats=4,
                        warmup=1)
    # warm-up a b, then a b | b a | a b | b a: neither side always runs first
    assert calls == ["a", "b", "a", "b", "b", "a", "a", "b", "b", "a"]
    assert ratio.a_times == [1.0, 4.0, 5.0, 8.0] and ratio.b_times == [2.0, 3.0, 6.0, 7.0]
    ratios = sorted([1 / 2, 4 / 3, 5 / 6, 8 / 7])
    assert ratio.low == ratios[0] and ratio.high == ratios[-1]
    assert ratio.ratio == pytest.approx((ratios[1] + ratios[2]) / 2)
    assert "median of 4 paired runs" in str(ratio)


@pytest.mark.parametrize("name, limit", [("09_training.ipynb", 90), ("13_scaling_up.ipynb", 90),
                                         ("14_subword_tokens.ipynb", 60), ("00", 60)])
def test_notebook_limits(name, limit):
    assert bench.notebook_limit(name) == limit
