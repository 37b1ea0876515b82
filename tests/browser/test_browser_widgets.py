"""Browser tests: every widget notebook in JupyterLab and Chromium (see widget_checks.py), a
slow tier (``-m slow``; .ci/run runs it after the README's test command).

Each notebook is its own ``xdist_group``: pytest-xdist's ``--dist loadgroup`` hands them out one
at a time, the longest first (conftest.py), to whichever worker is free; a worker starts its own
JupyterLab and browser at its first notebook (conftest.py here). JupyterLab serves shortened
copies of the notebooks (tests/shortened.py).
"""

import pytest
import widget_checks


def _params():
    return [pytest.param(name, marks=pytest.mark.xdist_group(f"browser {name}"))
            for name in sorted(widget_checks.WIDGET_NOTEBOOKS)]


def test_widget_notebooks_are_found():
    """The discovery is not vacuous, and every widget notebook is tested, in a group of its own."""
    found = set(widget_checks.WIDGET_NOTEBOOKS)
    assert {"01_attention", "02_positional_encoding", "06_masks"} <= found
    assert sorted(p.values[0] for p in _params()) == sorted(found)
    assert len({p.marks[0].args[0] for p in _params()}) == len(found)
    for facts in widget_checks.WIDGET_NOTEBOOKS.values():
        assert facts["widget_cells"] and facts["code_cells"] >= len(facts["widget_cells"])


@pytest.mark.slow
@pytest.mark.parametrize("name", _params())
def test_widgets_in_jupyterlab(name, request):
    widget_checks.check_notebook_widgets(name, request)
