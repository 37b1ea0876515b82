"""Fixtures for the browser tests: one JupyterLab server and one Chromium per test module.

Both are started by these fixtures and stopped by them, by process id, when the module's tests are
done (pytest-xdist's --dist loadfile keeps a module's tests on one worker, in a row). Screenshots of
every widget before and after each change go to $BROWSER_SCREENSHOTS, or to a new temporary folder;
the folder is printed at the end of the run.
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


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "browser: drives the course's widgets in JupyterLab with a real Chromium "
        "(skipped without Chromium and Playwright; a failure when CI=true)")


@pytest.fixture(scope="module")
def screenshot_dir(request):
    configured = os.environ.get("BROWSER_SCREENSHOTS")
    if configured:
        folder = Path(configured).resolve()
        folder.mkdir(parents=True, exist_ok=True)
    else:
        folder = Path(tempfile.mkdtemp(prefix="tfs-browser-screenshots-"))
    REPORT.insert(0, f"browser tests: widget screenshots (before/after each change) in {folder}")
    yield folder
    (folder / "report.txt").write_text("\n".join(REPORT) + "\n")
    _announce(request.config)


@pytest.fixture(scope="module")
def lab_server():
    started = time.monotonic()
    server = lab_harness.LabServer()
    REPORT.append(f"  JupyterLab up in {time.monotonic() - started:.1f} s "
                  f"(pid {server.pid}, {server.url})")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def chromium(lab_server):
    started = time.monotonic()
    browser = lab_harness.ChromiumBrowser(lab_server.url)
    REPORT.append(f"  Chromium up in {time.monotonic() - started:.1f} s (pid {browser.pid})")
    yield browser
    if browser.blocked:
        REPORT.append(f"  answered offline (not fetched): {sorted(set(browser.blocked))}")
    browser.stop()


def _announce(config):
    """Print REPORT where it can be seen: at the end of a plain run, or now on an xdist worker."""
    if not REPORT:
        return
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # A worker's stdout is not shown, but its stderr reaches the terminal.
        capman = config.pluginmanager.getplugin("capturemanager")
        with capman.global_and_fixture_disabled():
            sys.stderr.write("\n" + "\n".join(REPORT) + "\n")
            sys.stderr.flush()
        REPORT.clear()


def pytest_terminal_summary(terminalreporter):
    if REPORT:
        terminalreporter.section("browser tests")
        for line in REPORT:
            terminalreporter.write_line(line)
