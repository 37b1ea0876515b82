"""Shortened copies of the notebooks, for the two suites that run them without comparing outputs.

The README's test command runs every notebook in full under strict nbval: every stored output is
reproduced and every assert holds. The Colab-like suite (``tests/colab``: does each cell run on
Colab's versions?) and the browser suite (``tests/browser``: does each widget work in JupyterLab?)
run every notebook again, and compare no output; running the long trainings and searches in full a
second and a third time would test nothing new. So they run copies in which ``SHORTER`` replaces
exact pieces of code: fewer steps, seeds or sentences. An assert that only a full run can satisfy
(the score of a trained model) is replaced by the same line commented out in the copy; nbval
checks it on the full run.

``shorten`` fails when a piece is not found exactly once, so a notebook edit that moves one is
reported by name instead of being run in full without anyone noticing
(``tests/notebooks/test_shortened.py`` checks every entry on every run of the test command).
The notebooks themselves never contain any of this.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.scheduling import cell_seconds, notebook_seconds

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"


def _drop(line: str) -> tuple[str, str]:
    """An assert that needs the full run: commented out in the copy."""
    return line, "pass  # shortened copy, checked on the full run by nbval: " + line


SHORTER: dict[str, list[tuple[str, str]]] = {
    # Most of the notebook's time: three seeds of three 60-step trainings; the asserts hold for
    # seed 0 alone.
    "04_add_norm_and_feed_forward": [
        ("seeds = range(3)", "seeds = range(1)"),
    ],
    # 350 steps of 128 pairs (about 35 s): 20 steps, then the shipped translator's weights (the
    # same recipe trained longer: it makes no mistake on the test split), so that the cells
    # after it have a trained model to evaluate.
    "09_training": [
        ("STEPS, WARMUP, BATCH_SIZE = 350, 200, 128", "STEPS, WARMUP, BATCH_SIZE = 20, 200, 128"),
        ("model.eval()  # dropout off from here on",
         "from helpers.translation import load_translator  # shortened copy: the shipped weights\n"
         "model.load_state_dict(load_translator(device=device).model.state_dict())\n"
         "model.eval()  # dropout off from here on"),
        _drop("assert floor < sum(history[-25:]) / 25 < 1.3"),
        # The run without warm-up (80 steps): 20, compared with the 20 steps above.
        ("NO_WARMUP_STEPS = 80", "NO_WARMUP_STEPS = 20"),
        _drop("assert abs(mean(rushed_history[last]) - blind) < 0.2"
              "  # stalled at the input-blind level"),
        _drop("assert mean(history[last]) < blind - 0.3  # with warm-up, already well below it"),
    ],
    # Beam search on 100 test sentences and 600 negated ones (about 15 s); 20 and 150 (the first
    # sentence that beam search repairs is among them).
    "10_decoding": [
        ("N_SENTENCES = 100", "N_SENTENCES = 20"),
        ("hard = lookahead_split(neg_corpus, size=600)",
         "hard = lookahead_split(neg_corpus, size=600)[:150]"),
        _drop("assert len(wins) >= 3 and len(wins) > len(losses)"),
    ],
    # The head ablation translates 250 sentences 55 times (7 s); 100 keep its asserts true.
    "11_inspecting_attention": [
        ("ablation_en = [en for en, _ in corpus.test[:250]]",
         "ablation_en = [en for en, _ in corpus.test[:100]]"),
        ("ablation_ref = [fr for _, fr in corpus.test[:250]]",
         "ablation_ref = [fr for _, fr in corpus.test[:100]]"),
    ],
    # The two trained models come from assets/; the sampling table draws 5 x 100 translations for
    # each of 6 settings (about 4 s): 5 x 20.
    "12_decoder_only": [
        ("subset = corpus.test[:100]", "subset = corpus.test[:20]"),
        _drop('assert falls and matches["T = 1.5, top-k 3"] > ordered[-1] + 5'
              '  # sweep: 12.sampling_order'),
    ],
    # Three trainings of 100 steps (torchrun's, one process, one in two pieces); 30 steps each.
    "13_scaling_up": [
        ('OPTIONS = ["--steps", 100,', 'OPTIONS = ["--steps", 30,'),
    ],
}


OPENING = 15.0  # seconds a suite spends on a notebook outside its cells (start, open, widgets)


def shortened_seconds(name: str) -> float:
    """A rough guess of the seconds that the Colab-like or browser suite spends on the shortened
    copy of notebook ``name``, to hand out the longest first (conftest.py): ``OPENING``, plus the
    cell times of the stored run, the cells that ``SHORTER`` changes counted as 1 s each."""
    olds = [old for old, _ in SHORTER.get(Path(name).stem, [])]
    timed = cell_seconds(name)
    if not timed:
        return OPENING + notebook_seconds(name)
    return OPENING + sum(1.0 if any(old in source for old in olds) else seconds
                         for source, seconds in timed)


def shorten_source(name: str, sources: list[str]) -> list[str]:
    """The code cells' ``sources`` of notebook ``name`` (its file name, with or without
    ``.ipynb``) with ``SHORTER``'s replacements. Raises ``LookupError`` naming the notebook and
    the piece of code when a piece is not found exactly once."""
    stem = Path(name).stem
    out = list(sources)
    for old, new in SHORTER.get(stem, []):
        found = [i for i, source in enumerate(out) if old in source]
        count = sum(source.count(old) for source in out)
        if count != 1:
            raise LookupError(
                f"tests/shortened.py: {stem}.ipynb has {count} copies of {old!r} (expected "
                f"exactly one): the notebook changed; update SHORTER for it")
        out[found[0]] = out[found[0]].replace(old, new)
    return out


def shorten(name: str, nb) -> None:
    """Apply ``SHORTER`` to ``nb`` (an ``nbformat`` node of notebook ``name``), in place."""
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    for cell, source in zip(code, shorten_source(name, [c.source for c in code]), strict=True):
        cell.source = source


# A widget cell builds ipywidgets (interact(...) or explicit controls) and starts with
# `# NBVAL_IGNORE_OUTPUT` (its output depends on the front end).
WIDGET_CODE = re.compile(
    r"\binteract(?:ive|_manual)?\s*\(|\b(?:Int|Float|Selection)(?:Range)?Slider\s*\(|"
    r"\b(?:Dropdown|Checkbox|ToggleButtons?|RadioButtons)\s*\(")


def _text(cell) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def is_widget_cell(cell) -> bool:
    """Whether ``cell`` (a notebook's JSON cell) is an interactive cell."""
    return (cell.get("cell_type") == "code"
            and _text(cell).lstrip().startswith("# NBVAL_IGNORE_OUTPUT")
            and WIDGET_CODE.search(_text(cell)) is not None)


def up_to_the_last_widget(cells: list) -> list:
    """The cells the browser suite runs: up to the notebook's last widget cell (the cells after
    it cannot change a widget; nbval and the Colab-like suite run them). All of them when the
    notebook has no widget."""
    last = max((i for i, cell in enumerate(cells) if is_widget_cell(cell)), default=None)
    return cells if last is None else cells[:last + 1]


def shorten_file(path: Path) -> None:
    """Apply ``SHORTER`` to the notebook file at ``path`` (a copy), in place."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    code = [cell for cell in nb["cells"] if cell["cell_type"] == "code"]
    sources = ["".join(c["source"]) if isinstance(c["source"], list) else c["source"]
               for c in code]
    for cell, source in zip(code, shorten_source(path.name, sources), strict=True):
        cell["source"] = source
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def end_at_the_last_widget(path: Path) -> None:
    """Cut the notebook file at ``path`` (a copy) after its last widget cell, in place."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    nb["cells"] = up_to_the_last_widget(nb["cells"])
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
