"""Browser tests: every widget notebook in JupyterLab and Chromium (see widget_checks.py), a
slow tier (``-m slow``; .ci/run runs it after the README's test command).

The notebooks are dealt into two groups of about equal time (``xdist_group``), so that
pytest-xdist's ``--dist loadgroup`` runs the two on its two workers, each with its own JupyterLab
and browser. JupyterLab serves shortened copies of the notebooks (tests/shortened.py).
"""

import pytest
import widget_checks

SHARDS = 2


def _params():
    return [pytest.param(name, marks=pytest.mark.xdist_group(f"browser-{index}"))
            for index in range(SHARDS) for name in widget_checks.shard(index, SHARDS)]


def test_widget_notebooks_are_found():
    """The discovery is not vacuous, and the groups cover every widget notebook once."""
    found = set(widget_checks.WIDGET_NOTEBOOKS)
    assert {"01_attention", "02_positional_encoding", "06_masks"} <= found
    assert sorted(p.values[0] for p in _params()) == sorted(found)
    for facts in widget_checks.WIDGET_NOTEBOOKS.values():
        assert facts["widget_cells"] and facts["code_cells"] >= len(facts["widget_cells"])


@pytest.mark.slow
@pytest.mark.parametrize("name", _params())
def test_widgets_in_jupyterlab(name, request):
    widget_checks.check_notebook_widgets(name, request)
