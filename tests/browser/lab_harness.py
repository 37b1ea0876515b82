"""Support code for the browser tests: a private JupyterLab server and a headless Chromium.

Everything here is started by the tests and stopped by them, by process id:

* `LabServer` copies the course (notebooks/, helpers/, assets/, requirements.txt) into a temporary
  root, shortens the long trainings of the copied notebooks (tests/shortened.py), and starts
  JupyterLab on 127.0.0.1 on a free port, without a token, with every Jupyter, IPython and
  matplotlib folder in a temporary directory (nothing is written to $HOME) and the
  news/announcement pop-ups switched off.
* `ChromiumBrowser` starts Debian's Chromium headless with a fresh profile and a DevTools port,
  and drives it with Playwright's sync API over that port (`connect_over_cdp`), so the browser's
  process id is ours to stop. Every request that does not go to 127.0.0.1 (the "Open in Colab"
  badge, for example) is answered locally with an empty response: the tests never touch the
  network, and an offline machine does not log "failed to load resource" errors.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.ci import in_ci
from tests.shortened import SHORTER, end_at_the_last_widget, shorten_file

ROOT = Path(__file__).resolve().parents[2]
# Lines printed at the end of the run (conftest.py): screenshot folder, timings, changes.
REPORT: list[str] = []

# Debian's package; another build can be named with TFS_CHROMIUM (a path that does not exist
# hides the browser, which is how the skip path is tested).
CHROMIUM = os.environ.get("TFS_CHROMIUM", "/usr/bin/chromium")
PLAYWRIGHT_VERSION = "1.65.2"
ENABLE_HINT = (
    f"to run them, install Debian's Chromium and Playwright's Python package: "
    f"`apt-get install chromium && pip install playwright=={PLAYWRIGHT_VERSION}` "
    f"(do not run `playwright install`: the tests use /usr/bin/chromium, or the browser named "
    f"by TFS_CHROMIUM)"
)
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
VIEWPORT = {"width": 1600, "height": 1200}
# `jupyter lab`, started without jsonschema's optional rfc3987_syntax (as tests/fast_start.py
# does for pytest): importing it compiles a grammar, 2 s of CPU at every start, for a URI format
# that no schema of the server uses.
LAB_MAIN = ("import sys; sys.modules['rfc3987_syntax'] = None; sys.argv[0] = 'jupyter-lab'; "
            "from jupyterlab.labapp import main; sys.exit(main())")
# What the copy of the course holds: the notebooks' setup cell puts ".." (the copy's root) on
# sys.path, so helpers/ must sit next to notebooks/.
COURSE_PARTS = ("notebooks", "helpers", "assets", "requirements.txt")
# Turned off in the temporary JupyterLab configuration: the "news" and "check for updates"
# notifications, which would cover the page and fetch from the internet.
DISABLED_LAB_PLUGINS = ("@jupyterlab/apputils-extension:announcements",)


def missing_requirements() -> str | None:
    """None when Chromium and Playwright are both there, else a sentence saying what is missing."""
    missing = []
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        missing.append(f"no Chromium at {CHROMIUM}")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("the Python package playwright is not installed")
    if not missing:
        return None
    return ("the browser tests need Chromium and Playwright: " + " and ".join(missing) + "; "
            + ENABLE_HINT)


# .ci/run installs Chromium in the background while the test command installs .venv; this file
# exists until apt-get is done (its log: .chromium-install.log).
INSTALLING = ROOT / ".chromium.installing"
INSTALL_WAIT = 600.0


def wait_for_install(timeout: float = INSTALL_WAIT) -> None:
    """Wait while .ci/run's background apt-get of Chromium is still running."""
    deadline = time.monotonic() + timeout
    while INSTALLING.exists() and time.monotonic() < deadline:
        time.sleep(1)


def require_browser() -> None:
    """Skip (locally) or fail (in CI: tests/ci.py) when Chromium or Playwright is missing."""
    import pytest

    wait_for_install()
    missing = missing_requirements()
    if missing and INSTALLING.with_name(".chromium-install.log").exists():
        missing += " (see .chromium-install.log for .ci/run's apt-get)"
    if missing is None:
        return
    if in_ci():
        pytest.fail(f"{missing}. CI is set, so a missing browser is a failure, not a skip.",
                    pytrace=False)
    pytest.skip(missing)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def stop_process(proc: subprocess.Popen, name: str, grace: float = 10.0) -> None:
    """SIGTERM the process we started (by its pid), then SIGKILL its process group if it lingers."""
    if proc.poll() is None:
        try:
            os.kill(proc.pid, signal.SIGTERM)
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            # Started with start_new_session=True: the group id is the pid, and the group holds
            # only what this process started (Chromium's renderers, a server's kernels).
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=grace)
        except ProcessLookupError:
            pass


def _tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


class LabServer:
    """JupyterLab on 127.0.0.1 serving a temporary copy of the course."""

    def __init__(self, start_timeout: float = 90.0):
        self.tmp = Path(tempfile.mkdtemp(prefix="tfs-browser-lab-"))
        self.root = self.tmp / "course"
        self.root.mkdir()
        for part in COURSE_PARTS:
            src = ROOT / part
            if src.is_dir():
                shutil.copytree(src, self.root / part,
                                ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
            elif src.is_file():
                shutil.copy2(src, self.root / part)
        # The widgets are tested, not the long trainings nor the cells after the last widget
        # (nbval and the Colab-like suite run those).
        for name in SHORTER:
            shorten_file(self.root / "notebooks" / f"{name}.ipynb")
        for path in (self.root / "notebooks").glob("[0-9][0-9]_*.ipynb"):
            end_at_the_last_widget(path)
        env = dict(os.environ)
        for var in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR",
                    "MPLCONFIGDIR", "JUPYTERLAB_SETTINGS_DIR", "JUPYTERLAB_WORKSPACES_DIR"):
            env[var] = str(self.tmp / var.lower())
            Path(env[var]).mkdir()
        env.setdefault("OMP_NUM_THREADS", "1")
        env.pop("JUPYTER_TOKEN", None)
        labconfig = Path(env["JUPYTER_CONFIG_DIR"]) / "labconfig"
        labconfig.mkdir()
        (labconfig / "page_config.json").write_text(json.dumps(
            {"disabledExtensions": {name: True for name in DISABLED_LAB_PLUGINS}}))
        # Keep every cell in the DOM (no virtual scrolling), so the tests see all prompts.
        tracker = Path(env["JUPYTERLAB_SETTINGS_DIR"]) / "@jupyterlab" / "notebook-extension"
        tracker.mkdir(parents=True)
        (tracker / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = self.tmp / "jupyterlab.log"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", LAB_MAIN, "--no-browser", "--allow-root",
             "--ServerApp.token=", "--ServerApp.password=", "--ServerApp.ip=127.0.0.1",
             f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0",
             f"--ServerApp.root_dir={self.root}",
             # window.jupyterapp: the tests run JupyterLab's "Run All" command (runmenu:run-all).
             "--LabApp.expose_app_in_browser=True"],
            cwd=self.root, env=env, stdin=subprocess.DEVNULL, stdout=self._log,
            stderr=subprocess.STDOUT, start_new_session=True)
        self.pid = self.proc.pid
        self._xsrf: str | None = None
        try:
            self._wait_until_up(start_timeout)
        except BaseException:
            self.stop()
            raise

    def _wait_until_up(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with code {self.proc.returncode}; its log "
                                   f"({self.log_path}) ends with:\n{_tail(self.log_path)}")
            try:
                with urllib.request.urlopen(self.url + "/api/status", timeout=5) as response:
                    json.load(response)
                return
            except (OSError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"JupyterLab did not answer {self.url}/api/status within "
                                   f"{timeout:.0f} s; log:\n{_tail(self.log_path)}")
            time.sleep(0.25)

    def xsrf(self) -> str:
        """The server's `_xsrf` cookie (fetched once from /lab), echoed in X-XSRFToken."""
        if self._xsrf is None:
            with urllib.request.urlopen(self.url + "/lab", timeout=30) as response:
                cookies = response.headers.get_all("Set-Cookie") or []
            for cookie in cookies:
                match = re.match(r"\s*_xsrf=([^;]+)", cookie)
                if match:
                    self._xsrf = match.group(1)
            if self._xsrf is None:
                raise RuntimeError("JupyterLab set no _xsrf cookie on /lab")
        return self._xsrf

    def api(self, method: str, path: str):
        token = self.xsrf()
        request = urllib.request.Request(
            self.url + path, method=method,
            headers={"Cookie": f"_xsrf={token}", "X-XSRFToken": token})
        with urllib.request.urlopen(request, timeout=30) as response:
            body = response.read()
        return json.loads(body) if body else None

    def delete_sessions(self) -> list[str]:
        """Shut down every kernel session (DELETE /api/sessions/<id>); returns the paths."""
        paths = []
        for session in self.api("GET", "/api/sessions"):
            self.api("DELETE", f"/api/sessions/{session['id']}")
            paths.append(session.get("path", "?"))
        return paths

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                self.delete_sessions()
            except (OSError, urllib.error.URLError, RuntimeError, ValueError):
                pass  # the server is going down anyway; SIGTERM shuts its kernels down
        stop_process(self.proc, "JupyterLab")
        self._log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


class ChromiumBrowser:
    """Headless Chromium (our process) driven by Playwright over the DevTools protocol."""

    def __init__(self, lab_url: str, start_timeout: float = 60.0):
        from playwright.sync_api import sync_playwright

        self.tmp = Path(tempfile.mkdtemp(prefix="tfs-browser-chromium-"))
        self.profile = self.tmp / "profile"
        self.profile.mkdir()
        self.log_path = self.tmp / "chromium.log"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", *CHROMIUM_ARGS, f"--user-data-dir={self.profile}",
             "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
             f"--window-size={VIEWPORT['width']},{VIEWPORT['height']}",
             "--force-device-scale-factor=1", "--hide-scrollbars", "--mute-audio",
             "--lang=en-US", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._log,
            start_new_session=True)
        self.pid = self.proc.pid
        self.playwright = self.browser = self.context = None
        self.blocked: list[str] = []
        try:
            port = self._devtools_port(start_timeout)
            self.playwright = sync_playwright().start()
            self.browser = self.playwright.chromium.connect_over_cdp(
                f"http://127.0.0.1:{port}", timeout=start_timeout * 1000)
            self.context = self.browser.new_context(
                viewport=VIEWPORT, device_scale_factor=1, locale="en-US", color_scheme="light")
            self.context.set_default_timeout(30_000)
            # Anything not served by our JupyterLab gets an empty local answer (no network).
            self.context.route(re.compile(r"^(?!" + re.escape(lab_url) + r"[/?#]|"
                                          + re.escape(lab_url) + r"$)(https?|wss?)://"),
                               self._answer_offline)
        except BaseException:
            self.stop()
            raise

    def _devtools_port(self, timeout: float) -> int:
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"Chromium ({CHROMIUM}) exited with code "
                                   f"{self.proc.returncode}:\n{_tail(self.log_path)}")
            try:
                first_line = port_file.read_text().splitlines()[0]
                return int(first_line)
            except (OSError, IndexError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"Chromium wrote no DevTools port within {timeout:.0f} s:\n"
                                   f"{_tail(self.log_path)}")
            time.sleep(0.1)

    # A 1x1 transparent PNG: what an external image (the Colab badge) becomes.
    _PIXEL = bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")

    def _answer_offline(self, route) -> None:
        request = route.request
        self.blocked.append(request.url)
        if request.resource_type == "image":
            route.fulfill(status=200, content_type="image/png", body=self._PIXEL)
        else:
            route.fulfill(status=200, content_type="text/plain", body="")

    def stop(self) -> None:
        for close in (lambda: self.context and self.context.close(),
                      lambda: self.browser and self.browser.close(),
                      lambda: self.playwright and self.playwright.stop()):
            try:
                close()
            except Exception:  # noqa: BLE001 - best effort; the process is killed below
                pass
        stop_process(self.proc, "Chromium")
        self._log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)
