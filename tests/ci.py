"""One rule for "this is CI": where a missing tool must fail a test instead of skipping it."""

import os


def in_ci() -> bool:
    """True when the variable ``CI`` says so (``.ci/run`` runs with ``CI=true``; other CI
    services set ``true`` or ``1``); unset, empty, ``false`` or ``0``: a developer's machine."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
