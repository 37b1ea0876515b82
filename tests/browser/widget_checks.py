"""What the browser tests do to each notebook with a widget (JupyterLab + Chromium + Playwright).

The test file (test_browser_widgets.py) is thin: one test per notebook, each its own
``xdist_group``, handed to whichever pytest-xdist worker is free; each worker has its own
JupyterLab and Chromium (conftest.py).
For every notebook with an interactive cell (a code cell that starts with `# NBVAL_IGNORE_OUTPUT`
and builds ipywidgets), found automatically so that new notebooks are covered,
`check_notebook_widgets`:

1. opens it in JupyterLab (a copy, shortened by tests/shortened.py, that ends at its last widget
   cell: what comes after cannot change a widget, and nbval runs it), runs JupyterLab's own
   "Run All" command (`runmenu:run-all`) and waits
   until every code cell has run (execution counts 1, 2, ... in order, read from JupyterLab's
   notebook model: a collapsed reference cell shows no prompt) and the status bar's kernel
   indicator says "Idle" (not the toolbar's indicator);
2. checks there is no error output (a traceback or stderr) and no browser console error;
3. moves each slider with the keyboard on its focused handle, and changes each dropdown, checkbox
   and toggle; waits until the picture stops changing (a slider fires several redraws); asserts
   the picture (the PNG in the widget's Output) differs, the readout shows the new value, and no
   error appeared; then puts the control back and asserts the picture is the first one again
   (the figure depends on the controls only);
4. saves a screenshot of the widget before and after each change (folder printed at the end).

Without Chromium or Playwright the tests are skipped with a message saying how to enable them;
with CI=true they fail instead.
"""

import base64
import json
import re
import time

import lab_harness
import pytest

from tests.shortened import is_widget_cell, up_to_the_last_widget

ROOT = lab_harness.ROOT
NOTEBOOKS_DIR = ROOT / "notebooks"

# Controls the test changes, in the widget's output area (ipywidgets 8 class names).
CONTROLS = (".widget-slider, .widget-dropdown, .widget-checkbox, .widget-toggle-buttons, "
            ".widget-toggle-button, .widget-radio")
STDERR = "application/vnd.jupyter.stderr"  # JupyterLab renders tracebacks and stderr with it
# Browser console errors that are not the course's fault. Empty on purpose: external requests
# are answered locally (lab_harness), so an offline machine logs nothing. Add an entry only with
# the reason next to it.
IGNORED_CONSOLE_ERRORS: tuple[re.Pattern, ...] = ()

KEY_PRESSES = 1  # per slider move: one step, one redraw
STABLE_FOR = 0.5  # seconds without a new picture before a redraw counts as finished
REDRAW_TIMEOUT = 60.0
RUN_ALL_TIMEOUT = 240.0
# Each code cell's execution count (None until it has run), from JupyterLab's notebook model: a
# collapsed cell (a reference answer) shows an empty placeholder instead of its "[n]:" prompt.
EXECUTION_COUNTS = ("() => window.jupyterapp.shell.currentWidget.content.widgets"
                    ".filter(w => w.model.type === 'code').map(w => w.model.executionCount)")


def widget_notebooks() -> dict:
    """{name: facts} for each notebook in notebooks/ with at least one widget cell; the facts
    are those of the copy the JupyterLab of the tests serves, which ends at the last widget."""
    found = {}
    for path in sorted(NOTEBOOKS_DIR.glob("*.ipynb")):
        try:
            cells = up_to_the_last_widget(json.loads(path.read_text(encoding="utf-8"))["cells"])
        except (OSError, ValueError, KeyError):
            continue  # a broken notebook is nbval's to report
        widget_cells = [index for index, cell in enumerate(cells) if is_widget_cell(cell)]
        if widget_cells:
            found[path.stem] = {
                "path": path.relative_to(ROOT).as_posix(),
                "cells": len(cells),
                "code_cells": sum(cell.get("cell_type") == "code" for cell in cells),
                "widget_cells": widget_cells,
                # A stderr stream stored in the notebook is expected there (a warning shown on
                # purpose); anywhere else, stderr or a traceback is an error.
                "stderr_ok": {
                    index for index, cell in enumerate(cells)
                    for output in cell.get("outputs", [])
                    if output.get("output_type") == "stream" and output.get("name") == "stderr"},
            }
    return found


WIDGET_NOTEBOOKS = widget_notebooks()


# --- reading the page ----------------------------------------------------------------------------

def kernel_status(page) -> str:
    """The status bar's kernel item, e.g. "Python 3 (ipykernel) | Idle" (not the toolbar's)."""
    item = page.locator("#jp-main-statusbar .jp-StatusBar-TextItem").filter(
        has_text=re.compile(r"\s\|\s"))
    return item.first.inner_text(timeout=10_000).strip() if item.count() else ""


def kernel_is_idle(page) -> bool:
    return re.search(r"\|\s*Idle$", kernel_status(page)) is not None


def wait_for_idle(page, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not kernel_is_idle(page):
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: the status bar's kernel never said Idle within {timeout:.0f} s "
                        f"(it says {kernel_status(page)!r})")
        time.sleep(0.2)


def notebook_problems(page, stderr_ok) -> list[str]:
    """Error outputs (tracebacks, stderr) and widgets that failed to display, with their cell."""
    problems = page.evaluate(
        """([mime]) => {
            const out = [];
            document.querySelectorAll('.jp-Notebook .jp-Cell').forEach((cell, index) => {
                cell.querySelectorAll(`.jp-OutputArea-output[data-mime-type="${mime}"]`)
                    .forEach(o => out.push([index, 'error output: ' + o.innerText.slice(0, 1500)]));
                const text = cell.querySelector('.jp-Cell-outputArea')?.innerText || '';
                if (text.includes('Error displaying widget'))
                    out.push([index, 'widget failed to display: ' + text.slice(0, 300)]);
            });
            return out;
        }""", [STDERR])
    return [f"cell {index}: {text}" for index, text in problems
            if not (index in stderr_ok and text.startswith("error output") and
                    "Traceback" not in text and "Error" not in text)]


def pictures(area) -> list[str]:
    """The src of every picture in the widget's Output (data: URLs of the kernel's PNGs)."""
    return area.locator(".widget-output img").evaluate_all("imgs => imgs.map(i => i.src)")


def png_bytes(srcs: list[str]) -> list[bytes]:
    decoded = []
    for src in srcs:
        assert src.startswith("data:image/png;base64,"), f"picture is not an inline PNG: {src[:80]}"
        data = base64.b64decode(src.split(",", 1)[1])
        assert data.startswith(b"\x89PNG\r\n\x1a\n"), "picture is not a PNG"
        decoded.append(data)
    return decoded


def wait_for_new_picture(page, area, old: list[str], what: str,
                         stderr_ok=frozenset()) -> tuple[list[str], float]:
    """Wait until the picture differs from `old` and then stays the same for STABLE_FOR seconds
    with the kernel idle (a slider fires several redraws). Returns (srcs, seconds waited).
    Fails at once on an error output (a callback that raised), and when the picture is gone."""
    started = time.monotonic()
    last, last_change = None, started
    while True:
        now = time.monotonic()
        current = pictures(area)
        if current != last:
            last, last_change = current, now
        elif now - last_change >= STABLE_FOR and kernel_is_idle(page):
            if current and current != old:
                return current, now - started
            problems = notebook_problems(page, stderr_ok)
            assert not problems, f"{what}: error output:\n" + "\n".join(problems)
            assert current, f"{what}: the widget shows no picture"
        if now - started > REDRAW_TIMEOUT:
            state = "never changed" if last == old else "kept changing or the kernel stayed busy"
            pytest.fail(f"{what}: the picture {state} within {REDRAW_TIMEOUT:.0f} s "
                        f"(kernel: {kernel_status(page)!r})")
        time.sleep(0.15)


# --- changing one control ------------------------------------------------------------------------

class Slider:
    """Moved with the arrow keys on its focused noUiSlider handle."""

    def __init__(self, page, control):
        self.page, self.control = page, control
        self.handle = control.locator(".noUi-handle").first

    def _position(self) -> float:
        return float(self.handle.get_attribute("aria-valuenow"))

    def readout(self) -> str:
        return self.control.locator(".widget-readout").first.inner_text().strip()

    def _press(self, key: str, times: int) -> None:
        self.handle.focus()
        assert self.handle.evaluate("h => document.activeElement === h"), "handle has no focus"
        for _ in range(times):
            self.page.keyboard.press(key)

    def change(self) -> bool:
        low = float(self.handle.get_attribute("aria-valuemin"))
        high = float(self.handle.get_attribute("aria-valuemax"))
        self.start, self.start_readout = self._position(), self.readout()
        if low == high:
            return False  # one possible value: nothing to move
        self.key, self.back = ("ArrowRight", "ArrowLeft") if self.start < high else (
            "ArrowLeft", "ArrowRight")
        self._press(self.key, KEY_PRESSES)
        return True

    def check_changed(self, before_readout: str) -> str:
        position, readout = self._position(), self.readout()
        moved = position > self.start if self.key == "ArrowRight" else position < self.start
        assert moved, f"{self.key} x{KEY_PRESSES} did not move the handle (at {position})"
        assert readout != before_readout, f"readout still shows {readout!r}"
        try:  # a number slider's readout is its value (a selection slider's is the option label)
            numeric = float(before_readout) == self.start
        except ValueError:
            numeric = False
        if numeric:
            assert float(readout) == position, f"readout {readout!r}, handle at {position}"
        return readout

    def restore(self) -> None:
        for _ in range(40):
            if self._position() == self.start:
                return
            self._press(self.back, 1)
        pytest.fail(f"could not move the slider back to {self.start}")


class Dropdown:
    def __init__(self, page, control):
        self.select = control.locator("select").first

    def readout(self) -> str:
        return self.select.evaluate("s => s.options[s.selectedIndex]?.text ?? ''")

    def change(self) -> bool:
        count = self.select.evaluate("s => s.options.length")
        self.start = self.select.evaluate("s => s.selectedIndex")
        if count < 2:
            return False
        target = self.start + 1 if self.start + 1 < count else self.start - 1
        self.select.select_option(index=target)
        return True

    def check_changed(self, before_readout: str) -> str:
        readout = self.readout()
        assert readout != before_readout, f"dropdown still shows {readout!r}"
        return readout

    def restore(self) -> None:
        self.select.select_option(index=self.start)


class Checkbox:
    def __init__(self, page, control):
        self.box = control.locator("input[type=checkbox]").first

    def readout(self) -> str:
        return "checked" if self.box.is_checked() else "unchecked"

    def change(self) -> bool:
        self.box.click()
        return True

    def check_changed(self, before_readout: str) -> str:
        readout = self.readout()
        assert readout != before_readout, "clicking the checkbox did not toggle it"
        return readout

    def restore(self) -> None:
        self.box.click()


class ToggleButtons:
    """ToggleButtons (pick one of several) or a single ToggleButton."""

    def __init__(self, page, control):
        self.control = control
        single = control.evaluate("c => c.classList.contains('widget-toggle-button')")
        self.buttons = control if single else control.locator("button")
        self.single = single

    def readout(self) -> str:
        if self.single:
            active = self.control.evaluate("c => c.classList.contains('mod-active')")
            return "on" if active else "off"
        return self.control.locator("button.mod-active").first.inner_text().strip()

    def change(self) -> bool:
        if self.single:
            self.control.click()
            return True
        count = self.buttons.count()
        active = self.buttons.evaluate_all(
            "bs => bs.findIndex(b => b.classList.contains('mod-active'))")
        if count < 2:
            return False
        self.start = active
        self.buttons.nth((active + 1) % count).click()
        return True

    def check_changed(self, before_readout: str) -> str:
        readout = self.readout()
        assert readout != before_readout, f"toggle still shows {readout!r}"
        return readout

    def restore(self) -> None:
        (self.control if self.single else self.buttons.nth(self.start)).click()


class Radio:
    def __init__(self, page, control):
        self.inputs = control.locator("input[type=radio]")

    def readout(self) -> str:
        return str(self.inputs.evaluate_all("rs => rs.findIndex(r => r.checked)"))

    def change(self) -> bool:
        count = self.inputs.count()
        self.start = int(self.readout())
        if count < 2:
            return False
        self.inputs.nth((self.start + 1) % count).check()
        return True

    def check_changed(self, before_readout: str) -> str:
        readout = self.readout()
        assert readout != before_readout, "radio selection did not change"
        return readout

    def restore(self) -> None:
        self.inputs.nth(self.start).check()


def control_for(page, control):
    classes = control.evaluate("c => [...c.classList]")
    for css, kind in (("widget-slider", Slider), ("widget-dropdown", Dropdown),
                      ("widget-checkbox", Checkbox), ("widget-toggle-buttons", ToggleButtons),
                      ("widget-toggle-button", ToggleButtons), ("widget-radio", Radio)):
        if css in classes:
            return kind(page, control)
    raise AssertionError(f"unknown control {classes}")


# A control's description: in .widget-label, or next to a checkbox in .widget-label-basic.
LABEL_JS = """c => [...c.querySelectorAll('.widget-label, .widget-label-basic')]
    .map(l => l.textContent.replace(/[\\u200b\\s]+/g, ' ').trim()).find(t => t) || ''"""


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-")[:30] or "control"


# --- the whole check of one notebook ------------------------------------------------------------

def check_notebook_widgets(name: str, request) -> None:
    """Open, run all, change every control of every widget; `request` is the test's."""
    lab_harness.require_browser()
    shots_root = request.getfixturevalue("screenshot_dir")  # first: torn down last
    lab = request.getfixturevalue("lab_server")
    browser = request.getfixturevalue("chromium")
    facts = WIDGET_NOTEBOOKS[name]
    shots = shots_root / name
    shots.mkdir(parents=True, exist_ok=True)
    lab.delete_sessions()  # a clean start, whatever ran before
    console_errors: list[str] = []
    page = browser.context.new_page()

    def on_console(message):
        if message.type == "error" and not any(p.search(message.text)
                                                for p in IGNORED_CONSOLE_ERRORS):
            console_errors.append(f"console error: {message.text} "
                                  f"(at {message.location.get('url', '?')})")

    page.on("console", on_console)
    page.on("pageerror", lambda error: console_errors.append(f"uncaught exception: {error}"))
    timings, changes = {}, []
    started = time.monotonic()
    try:
        # 1. Open the notebook in a fresh workspace and wait for its kernel.
        page.goto(f"{lab.url}/lab/workspaces/tfs-{name}/tree/{facts['path']}?reset")
        page.wait_for_function(
            "n => document.querySelectorAll('.jp-Notebook .jp-Cell').length === n",
            arg=facts["cells"], timeout=90_000)
        wait_for_idle(page, 90, f"{name}: kernel start")
        timings["open"] = time.monotonic() - started

        # 2. Run All (JupyterLab's menu command) and wait for every code cell.
        phase = time.monotonic()
        assert page.evaluate("() => window.jupyterapp.commands.hasCommand('runmenu:run-all')")
        page.evaluate("() => { window.jupyterapp.commands.execute('runmenu:run-all'); }")
        deadline = phase + RUN_ALL_TIMEOUT
        while True:
            prompts = page.evaluate(EXECUTION_COUNTS)
            problems = notebook_problems(page, facts["stderr_ok"])
            assert not problems, f"{name}: error output while running all cells:\n" + "\n".join(
                problems)
            if len(prompts) == facts["code_cells"] and all(
                    isinstance(p, int) for p in prompts):
                break
            assert time.monotonic() < deadline, (
                f"{name}: not every cell ran within {RUN_ALL_TIMEOUT:.0f} s: prompts {prompts}")
            time.sleep(0.25)
        wait_for_idle(page, 60, f"{name}: after Run All")
        counts = prompts
        assert counts == list(range(1, len(counts) + 1)), f"{name}: execution order {counts}"
        problems = notebook_problems(page, facts["stderr_ok"])
        assert not problems, f"{name}: error output after Run All:\n" + "\n".join(problems)
        timings["run all"] = time.monotonic() - phase

        # 3. Change every control of every widget.
        phase = time.monotonic()
        cells = page.locator(".jp-Notebook .jp-Cell")
        for index in facts["widget_cells"]:
            area = cells.nth(index).locator(".jp-Cell-outputArea")
            area.locator(".widget-output img").first.wait_for(state="visible", timeout=60_000)
            wait_for_new_picture(page, area, [], f"{name} cell {index}: first drawing",
                                 facts["stderr_ok"])
            sizes = area.locator(".widget-output img").evaluate_all(
                "imgs => imgs.map(i => [i.naturalWidth, i.getBoundingClientRect().width])")
            for natural, shown in sizes:
                assert natural > 0 and shown > 100, f"{name} cell {index}: picture {sizes}"
            controls = area.locator(CONTROLS)
            assert controls.count() > 0, f"{name} cell {index}: no slider, dropdown or toggle"
            moved = 0
            for number in range(controls.count()):
                control = controls.nth(number)
                label = control.evaluate(LABEL_JS)
                what = f"{name} cell {index} control {number} ({label or 'no label'})"
                handler = control_for(page, control)
                stem = f"cell{index:02d}_{number}_{slug(label)}"
                original = pictures(area)
                before_readout = handler.readout()
                area.screenshot(path=shots / f"{stem}_before.png")
                if not handler.change():
                    changes.append(f"{what}: only one value, not changed")
                    continue
                changed, waited = wait_for_new_picture(page, area, original, what,
                                                       facts["stderr_ok"])
                after_readout = handler.check_changed(before_readout)
                assert png_bytes(changed) != png_bytes(original), f"{what}: same PNG"
                area.screenshot(path=shots / f"{stem}_after.png")
                assert (shots / f"{stem}_after.png").read_bytes() != (
                    shots / f"{stem}_before.png").read_bytes(), f"{what}: same screenshot"
                problems = notebook_problems(page, facts["stderr_ok"])
                assert not problems, f"{what}: error output:\n" + "\n".join(problems)
                # Back to where it was: the first picture again.
                handler.restore()
                restored, _ = wait_for_new_picture(page, area, changed, f"{what} (put back)",
                                                   facts["stderr_ok"])
                assert handler.readout() == before_readout, f"{what}: readout not restored"
                assert png_bytes(restored) == png_bytes(original), (
                    f"{what}: putting the control back did not redraw the first picture")
                changes.append(f"{what}: {before_readout} -> {after_readout} "
                               f"(redrawn in {waited:.1f} s)")
                moved += 1
            assert moved, f"{name} cell {index}: no control could be changed"
        timings["widgets"] = time.monotonic() - phase
        problems = notebook_problems(page, facts["stderr_ok"])
        assert not problems, f"{name}: error output:\n" + "\n".join(problems)
        assert not console_errors, f"{name}: browser console errors:\n" + "\n".join(console_errors)
    finally:
        timings["total"] = time.monotonic() - started
        lab_harness.REPORT.append(
            f"  {name}: " + ", ".join(f"{key} {value:.1f} s" for key, value in timings.items())
            + f"; screenshots in {shots}")
        lab_harness.REPORT.extend(f"    {line}" for line in changes)
        page.close()
        lab.delete_sessions()
