"""Loaded by pytest before its plugins (``-p tests.fast_start`` in pyproject.toml).

nbval imports nbformat, nbformat imports jsonschema, and jsonschema imports ``rfc3987_syntax``
(installed for JupyterLab's event schemas) to check the "iri" string format, which compiles a
grammar at import: 2.6 s in every pytest process (the main one and each worker, measured with
``python -X importtime``), for a format that no notebook schema uses. Marking the module as
absent makes jsonschema skip that format, as it does when the package is not installed. Only
pytest's processes are affected, and the browser suite's JupyterLab, started the same way
(tests/browser/lab_harness.py, ``LAB_MAIN``: jupyter_events' schemas use "uri", never "iri"); the
kernels import what they import.
"""

import sys

sys.modules.setdefault("rfc3987_syntax", None)
