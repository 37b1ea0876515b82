"""Fixtures shared by every test folder (the repository's conftest.py sets up the environment).

- ``run_check``: call ``helpers.exercises.check`` and capture what it printed;
- figures are closed after every test that opened one.
"""

import sys

import pytest


@pytest.fixture
def run_check(capsys):
    """``run_check(name, fn, **kwargs) -> (passed, printed_text)``."""
    from helpers.exercises import check

    def run(name, fn, **kwargs):
        passed = check(name, fn, **kwargs)
        return passed, capsys.readouterr().out

    return run


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    pyplot = sys.modules.get("matplotlib.pyplot")  # only when a test drew something
    if pyplot is not None:
        pyplot.close("all")
