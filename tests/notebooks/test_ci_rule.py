"""The Colab-like and the browser suites decide "this is CI" by one rule (tests/ci.py): there, a
missing environment or browser fails instead of skipping."""

import pytest

from tests.ci import in_ci


@pytest.mark.parametrize("value, expected", [
    ("true", True), ("1", True), ("True", True), ("yes", True),
    ("", False), ("0", False), ("false", False), ("no", False), (None, False),
])
def test_one_rule_reads_ci(monkeypatch, value, expected):
    if value is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", value)
    assert in_ci() is expected


def test_both_suites_use_it():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    for suite in ("colab/test_colab_like.py", "browser/lab_harness.py"):
        text = (root / suite).read_text()
        assert "in_ci()" in text and 'environ.get("CI")' not in text, suite
