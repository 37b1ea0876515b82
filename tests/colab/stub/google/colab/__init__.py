"""A stand-in for Colab's ``google.colab`` package, for the Colab-like test (tests/colab).

On Colab, ``google.colab`` is imported before the first cell runs, which is how the setup cell
knows where it is. The test's kernel imports this package at start-up for the same reason.
"""

from . import output  # noqa: F401
