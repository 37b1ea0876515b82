"""Browser tests, first shard: every other widget notebook from the first (see widget_checks.py).

Two files, so that pytest-xdist (--dist loadfile) runs the two shards on its two workers.
"""

import pytest
import widget_checks


def test_widget_notebooks_are_found():
    """The discovery is not vacuous, and the two shards cover every widget notebook once."""
    found = set(widget_checks.WIDGET_NOTEBOOKS)
    assert {"01_attention", "02_positional_encoding", "06_masks"} <= found
    shards = widget_checks.shard(0, 2) + widget_checks.shard(1, 2)
    assert sorted(shards) == sorted(found)
    for facts in widget_checks.WIDGET_NOTEBOOKS.values():
        assert facts["widget_cells"] and facts["code_cells"] >= len(facts["widget_cells"])


@pytest.mark.browser
@pytest.mark.parametrize("name", widget_checks.shard(0, 2))
def test_widgets_in_jupyterlab(name, request):
    widget_checks.check_notebook_widgets(name, request)
