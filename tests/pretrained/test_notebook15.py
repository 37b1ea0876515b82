"""Notebook 15's write-first exercise: the learner's stub, the check, how to open the reference,
and the collapsed reference, whose code is helpers/pretrained.py's (the marker sits on the line
below the ``#@title`` line, so tests.tools.sync, which reads first lines, does not see it yet).
"""

import json
from pathlib import Path

from tests.tools import sync

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "15_pretrained_translator.ipynb"
CELLS = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
TITLE = "#@title Reference answer: load_marian\n"


def source(cell):
    return "".join(cell["source"])


def reference_index():
    found = [i for i, cell in enumerate(CELLS) if source(cell).startswith(TITLE)]
    assert len(found) == 1
    return found[0]


def test_stub_check_note_then_the_collapsed_reference():
    i = reference_index()
    stub, checked, note, reference = CELLS[i - 3:i + 1]
    assert source(stub).startswith("def my_load_marian(config, state_dict):")
    assert source(stub).rstrip().endswith("raise NotImplementedError  # your code here")
    assert source(checked) == 'load = check("load_marian", my_load_marian, use=True)'
    assert note["cell_type"] == "markdown" and "Show code" in source(note)
    assert reference["metadata"]["cellView"] == "form"
    assert reference["metadata"]["jupyter"] == {"source_hidden": True}


def test_the_reference_cell_is_helpers_code():
    body = source(CELLS[reference_index()]).removeprefix(TITLE)
    assert body.startswith("# helpers/pretrained.py\n")
    assert body == sync.expected_cell("pretrained", ["marian_key", "load_marian"], body)


def test_no_code_before_the_stub_defines_the_answer():
    stub = reference_index() - 3
    earlier = [source(c) for c in CELLS[:stub] if c["cell_type"] == "code"]
    assert not [s for s in earlier if "def load_marian" in s or "def marian_key" in s
                or "import load_marian" in s or "load_marian," in s]


def test_stored_outputs_come_from_the_offline_path():
    printed = ["".join(o.get("text", "")) for c in CELLS if c["cell_type"] == "code"
               for o in c.get("outputs", [])]
    assert any(text.startswith("The real Helsinki-NLP/opus-mt-en-fr could not be downloaded "
                               "(no connection to huggingface.co)") for text in printed)
    assert not [o for c in CELLS for o in c.get("outputs", []) if o["output_type"] == "error"]
