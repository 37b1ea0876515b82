"""Browser tests, second shard: every other widget notebook from the second (see widget_checks.py).

Two files, so that pytest-xdist (--dist loadfile) runs the two shards on its two workers.
"""

import pytest
import widget_checks


@pytest.mark.browser
@pytest.mark.parametrize("name", widget_checks.shard(1, 2))
def test_widgets_in_jupyterlab(name, request):
    widget_checks.check_notebook_widgets(name, request)
