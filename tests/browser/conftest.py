"""Fixtures for the browser tests: one JupyterLab server and one Chromium per pytest process.

Both are started by these fixtures when a worker runs its first browser test, and stopped by them,
by process id, when the worker's session ends (pytest-xdist's --dist loadgroup runs each group of
tests on one worker, in a row; a worker that runs both test files starts them once). Screenshots of every widget before and after each change go to $BROWSER_SCREENSHOTS, or to
a new temporary folder (one per run); the folder and each notebook's timings are printed: in the
terminal summary of a plain run, or on stderr by each xdist worker when its module is done.
"""

import os
import sys
import tempfile
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import lab_harness  # noqa: E402

# Lines for the end of the run: the screenshot folder, each notebook's timings and changes.
REPORT = lab_harness.REPORT


_FOLDER: list[Path] = []  # this process's screenshot folder, made once


@pytest.fixture(scope="module")
def screenshot_dir(request):
    """$BROWSER_SCREENSHOTS, or one new temporary folder per run (shared by the xdist workers)."""
    configured = os.environ.get("BROWSER_SCREENSHOTS")
    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if configured:
        folder = Path(configured).resolve()
    elif run_id:
        folder = Path(tempfile.gettempdir()) / f"tfs-browser-screenshots-{run_id[:12]}"
    else:
        if not _FOLDER:
            _FOLDER.append(Path(tempfile.mkdtemp(prefix="tfs-browser-screenshots-")))
        folder = _FOLDER[0]
    folder.mkdir(parents=True, exist_ok=True)
    module = request.module.__name__
    start = len(REPORT)
    REPORT.append(f"browser tests ({module}): widget screenshots (before/after each change) "
                  f"in {folder}")
    yield folder
    (folder / f"report-{module}.txt").write_text("\n".join(REPORT[start:]) + "\n")
    _announce(request.config, start)


@pytest.fixture(scope="session")
def lab_server():
    started = time.monotonic()
    server = lab_harness.LabServer()
    REPORT.append(f"  JupyterLab up in {time.monotonic() - started:.1f} s "
                  f"(pid {server.pid}, {server.url})")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def chromium(lab_server):
    started = time.monotonic()
    browser = lab_harness.ChromiumBrowser(lab_server.url)
    REPORT.append(f"  Chromium up in {time.monotonic() - started:.1f} s (pid {browser.pid})")
    yield browser
    if browser.blocked:
        REPORT.append(f"  answered offline (not fetched): {sorted(set(browser.blocked))}")
    browser.stop()


def _announce(config, start):
    """On an xdist worker, print this module's REPORT lines now (a plain run prints them all in
    the terminal summary)."""
    if not os.environ.get("PYTEST_XDIST_WORKER") or len(REPORT) <= start:
        return
    # A worker's stdout is not shown, but its stderr reaches the terminal.
    capman = config.pluginmanager.getplugin("capturemanager")
    with capman.global_and_fixture_disabled():
        sys.stderr.write("\n" + "\n".join(REPORT[start:]) + "\n")
        sys.stderr.flush()
    del REPORT[start:]


@pytest.hookimpl(trylast=True)  # after the session's fixtures are torn down
def pytest_sessionfinish(session):
    """A worker's last lines (Chromium's offline answers, written when it stops)."""
    _announce(session.config, 0)


def pytest_terminal_summary(terminalreporter):
    if REPORT:
        terminalreporter.section("browser tests")
        for line in REPORT:
            terminalreporter.write_line(line)
