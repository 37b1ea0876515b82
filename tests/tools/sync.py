"""One source of truth: a notebook's *marked cell* (first line ``# helpers/<module>.py``, after
the ``#@title`` of a collapsed reference cell) holds definitions copied verbatim from that module
(:data:`MANIFEST`); ``--check`` shows a diff per drifted cell, ``--write`` rewrites them."""

import ast
import difflib
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^# helpers/((?:exercises/)?\w+)\.py$")  # module, or exercises/nbNN
TITLE = "#@title Reference answer: {}"  # the first line of a reference cell (a Colab form)
COLLAPSED = {"cellView": "form", "jupyter": {"source_hidden": True}}
LONG_CELL = 25  # a visible code cell with more lines needs a reason in the markdown above it
REASON = re.compile(r"\*Why the next cell is long \((\d+) lines\):\*")

# notebook -> its marked cells in order: (module, names of the definitions the cell holds) or
# (module, names, the exercise the learner writes before this reference cell)
MANIFEST = {
    "01_attention": [
        ("exercises/nb01", ["masked_softmax"], "masked_softmax"),
        ("attention", ["scaled_dot_product_attention"], "scaled_dot_product_attention"),
    ],
    "02_positional_encoding": [
        ("positional", ["sinusoidal_encoding"], "sinusoidal_encoding"),
        ("exercises/nb02", ["add_positional_encoding"], "add_positional_encoding"),
        ("positional", ["PositionalEncoding"]), ("exercises/nb02", ["pe_rotation"], "pe_rotation"),
    ],
    "03_multi_head_attention": [("attention", ["split_heads"], "split_heads"),
                                ("attention", ["merge_heads"], "merge_heads"),
                                ("attention", ["MultiHeadAttention"], "multi_head_attention")],
    "04_add_norm_and_feed_forward": [("layers", ["layer_norm"], "layer_norm"),
                                     ("layers", ["LayerNorm"]),
                                     ("exercises/nb04", ["feed_forward"], "feed_forward"),
                                     ("layers", ["FeedForward"]),
                                     ("layers", ["residual_sublayer"], "residual_sublayer")],
    "05_encoder": [("layers", ["EncoderLayer"], "encoder_layer"), ("layers", ["layer_stack"]),
                   ("layers", ["Encoder"])],
    "06_masks": [("masks", ["causal_mask"], "causal_mask"),
                 ("masks", ["padding_mask"], "padding_mask")],
    "07_decoder": [("exercises/nb07", ["cross_attention"], "cross_attention"),
                   ("layers", ["DecoderLayer"], "decoder_layer"), ("layers", ["Decoder"])],
    "08_transformer": [("model", ["TransformerConfig"]), ("model", ["PAPER"]),
                       ("model", ["init_weights"]),
                       ("model", ["Transformer"], "transformer_decode"),
                       ("exercises/nb08", ["output_projection"], "output_projection"),
                       ("exercises/nb08", ["count_parameters"], "count_parameters")],
    "09_training": [("training", ["label_smoothed_nll"], "label_smoothed_nll"),
                    ("training", ["transformer_lr", "warmup_schedule"], "transformer_lr"),
                    ("training", ["train_step"], "train_step")],
    "10_decoding": [("decoding", ["greedy_decode"], "greedy_decode"),
                    ("decoding", ["beam_step"], "beam_step"), ("decoding", ["cannot_improve"]),
                    ("decoding", ["beam_search"], "beam_search"), ("attention", ["KVCache"]),
                    ("attention", ["MultiHeadAttention"], "kv_cache_decode")],
    "11_inspecting_attention": [("ablation", ["zero_head"], "zero_head"),
                                ("ablation", ["ablated"])],
    "12_decoder_only": [
        ("continuation", ["continuation_example", "ContinuationBatch", "continuation_batch"],
         "continuation_example"),
        ("gpt", ["GPT_CHOICES"]), ("gpt", ["GPTConfig"]), ("gpt", ["Block"]),
        ("gpt", ["GPT"], "gpt"), ("continuation", ["continuation_loss"]),
        ("generation", ["filter_logits"], "filter_logits"), ("generation", ["sample_next"]),
        ("generation", ["generate_tokens"], "generate_tokens"),
        ("layers", ["rms_norm", "RMSNorm"], "rms_norm"), ("layers", ["SwiGLU"]),
        ("positional", ["rope_angles"]), ("positional", ["apply_rope"], "apply_rope"),
    ],
    "13_scaling_up": [("distributed", ["rank_loss"], "rank_loss"),
                      ("distributed", ["process_group", "wrap_model"]),
                      ("distributed", ["pieces_and_token_count"]),
                      ("distributed", ["gradient_sync"]), ("distributed", ["forward_backward"]),
                      ("distributed", ["average_gradients"], "average_gradients")],
    "14_subword_tokens": [("tokens", ["pair_counts"], "pair_counts"),
                          ("tokens", ["merge_pair"], "merge_pair"),
                          ("tokens", ["best_pair", "train_bpe"], "train_bpe"),
                          ("tokens", ["encode_word"], "encode_word"), ("tokens", ["decode"])],
    "15_pretrained_translator": [
        ("pretrained", ["marian_key", "load_marian"], "load_marian"),
        ("exercises/nb15", ["interleave_halves"], "interleave_halves"),
        ("exercises/nb15", ["marian_decoder_inputs"], "marian_decoder_inputs"),
    ],
}

# Definitions shown again in a later notebook, and why (each is written once, in helpers/).
SHOWN_AGAIN = {
    "attention.MultiHeadAttention": "notebook 03 teaches it; notebook 10 shows it again for the "
    "lines the KV cache adds (its exercise)",
}

# Public definitions of the core that no notebook shows, and why.
NOT_TAUGHT = {
    "checks": "input checks: shapes and dtypes with clear errors; notebooks 01, 03 and 08 show "
              "what they catch, not their code",
    "interop": "conversion to torch.nn modules: notebooks 03, 05, 07 and 08 use it for parity "
               "checks and explain what it converts",
    "utils": "seeding and device choice, used by every notebook's setup cell",
    "model.build_model": "one line: Transformer(**asdict(config)), used from notebook 09 on",
    "decoding.check_source": "input checks of the decoders (see checks)",
    "decoding.check_limits": "input checks of the decoders (see checks)",
    "decoding.check_beam_source": "input checks of the decoders (see checks)",
    "decoding.check_special_ids": "input checks of the decoders (see checks)",
    "decoding.append_tokens": "one step of a decoding loop (append, finished rows stay at EOS), "
                              "shared by greedy_decode and generate_tokens, which notebooks 10 "
                              "and 12 show",
    "positional.check_rope": "the input check of apply_rope (see checks)",
    "masks.mask_explorer_data": "the numbers of notebook 06's mask explorer, drawn by its figure",
    "decoding.eval_mode": "eval mode plus torch.no_grad, restored afterwards; notebook 10 says so",
    "data": "vocabularies and padded batches: notebook 09 shows what they produce (tokens, ids, "
            "padded batches, masks), not their code",
    "training": "besides label smoothing, the warm-up schedule and the training step: the "
                "loop around the step, the teacher-forcing loss and checkpoints, described and "
                "used in notebook 09",
    "generation": "besides the sampling filters and the generation loop: their input checks "
                  "and generate (the loop run on lists of prompts), used in notebook 12",
    "continuation": "besides the labels and the loss: the joint vocabulary and prompts, the "
                    "endless shuffled batches, train_gpt (notebook 09's loop), "
                    "continue_translations, the shipped models and compare_blocks (the block "
                    "variants trained), described and used in notebook 12",
    "distributed": "besides the process group, the DDP wrap, the rank's loss, the step and the "
                   "all-reduce by hand: the command line, the data sharding (its output is "
                   "drawn), training, spawn/launch and the benchmark, run in notebook 13",
    "fsdp": "FSDP sharding and the sharded (DCP) checkpoints: notebook 13 runs them (--fsdp, "
            "--save), draws what they do and loads a checkpoint",
    "tokens": "besides the four steps of BPE and decode: cutting text into words and the word "
              "table (words_of, split_word, word_table, initial_vocab), the BPE class, byte "
              "symbols and the prose snapshot, shown and used in notebook 14",
}


def definitions(module: str, root: Path = ROOT) -> dict:
    """``helpers/<module>.py``'s top-level definitions: name -> source, decorators included."""
    source = (root / "helpers" / f"{module}.py").read_text()
    lines = source.splitlines()
    found = {}
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = node.name
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
        else:
            continue
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        found[name] = "\n".join(lines[first - 1:node.end_lineno])
    return found


def entry(item) -> tuple:
    """A manifest entry as ``(module, names, exercise)`` (exercise None: shown, not asked)."""
    module, names, *rest = item
    return module, names, (rest[0] if rest else None)


def _lines(source: str) -> list:
    """A cell's lines without its Colab title: the marker is then the first line."""
    lines = source.split("\n")
    return lines[1:] if lines[0].startswith("#@title") else lines


def marked_cells(notebook: dict) -> list:
    """``(cell, module)`` for each code cell whose first line (after a ``#@title``) is a marker."""
    code = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
    matches = [(cell, MARKER.match(_lines("".join(cell["source"]))[0])) for cell in code]
    return [(cell, match.group(1)) for cell, match in matches if match]


def is_collapsed(cell: dict) -> bool:
    """Collapsed in JupyterLab (``jupyter.source_hidden``) and in Colab (a ``#@title`` form)."""
    meta = cell.get("metadata", {})
    first = "".join(cell["source"]).split("\n", 1)[0]
    return (meta.get("jupyter", {}).get("source_hidden") is True
            and meta.get("cellView") == "form" and first.startswith("#@title"))


def _preamble(source: str) -> str:
    """The lines between the marker and the first definition: imports and comments only."""
    kept = []
    for line in _lines(source)[1:]:
        if line.strip() and not line.startswith(("import ", "from ", "#")):
            break
        kept.append(line)
    return "\n".join(kept).strip("\n")


def expected_cell(module: str, names: list, current: str, root: Path = ROOT, exercise=None) -> str:
    """The text a marked cell must have: the title (of a reference cell), the marker, its own
    imports, and the definitions from ``helpers/<module>.py`` two blank lines apart."""
    defined = definitions(module, root)
    missing = [n for n in names if n not in defined]
    if missing:
        raise KeyError(f"helpers/{module}.py defines no {', '.join(missing)} (see MANIFEST)")
    parts = [TITLE.format(exercise)] if exercise else []
    parts.append(f"# helpers/{module}.py")
    if preamble := _preamble(current):
        parts.append(preamble + "\n\n")
    return "\n".join(parts) + "\n" + "\n\n\n".join(defined[n] for n in names)


def long_cells(notebook: dict, stem: str, write: bool = False) -> list:
    """Code cells over ``LONG_CELL`` lines without ``*Why the next cell is long (N lines):*``
    and the true N in the markdown cell above them; ``write`` corrects a wrong N."""
    found, cells = [], notebook["cells"]
    for index, cell in enumerate(cells):
        lines = len("".join(cell["source"]).splitlines())
        above = cells[index - 1] if index else {"cell_type": "code", "source": []}
        text = "".join(above["source"]) if above["cell_type"] == "markdown" else ""
        match = REASON.search(text)
        if cell["cell_type"] != "code" or not match and (lines <= LONG_CELL or is_collapsed(cell)):
            continue  # short, or a reference cell (read when opened)
        if match is None:
            found.append(f"{stem} cell {index}: {lines} lines, and the markdown above does not "
                         "say why (*Why the next cell is long (N lines):* ...)")
        elif int(match.group(1)) != lines:
            found.append(f"{stem} cell {index}: {lines} lines, the note above says {match[1]}")
            if write:
                note = f"*Why the next cell is long ({lines} lines):*"
                above["source"] = text.replace(match.group(0), note).splitlines(keepends=True)
    return found


def problems(write: bool = False, root: Path = ROOT, manifest: dict = MANIFEST) -> list:
    """Marked cells that differ from ``helpers/`` or the manifest, and long cells' notes (fixed if
    ``write``)."""
    found = []
    stems = {p.stem for p in (root / "notebooks").glob("[0-9][0-9]_*.ipynb")}
    for stem in sorted(stems | set(manifest)):
        path = root / "notebooks" / f"{stem}.ipynb"
        if not path.exists():
            found.append(f"{stem}: in MANIFEST but notebooks/{stem}.ipynb does not exist")
            continue
        notebook = json.loads(path.read_text())
        cells, wanted = marked_cells(notebook), manifest.get(stem, [])
        modules, wanted = [m for _, m in cells], [entry(item) for item in wanted]
        if modules != [m for m, _, _ in wanted]:
            found.append(f"{stem}: MANIFEST expects marked cells for {[m for m, _, _ in wanted]}, "
                         f"the notebook has {modules}: a '# helpers/<module>.py' first line was "
                         "removed, moved or added")
            continue
        before = len(found)
        for (cell, module), (_, names, exercise) in zip(cells, wanted, strict=True):
            current = "".join(cell["source"])
            expected = expected_cell(module, names, current, root, exercise)
            if exercise and not is_collapsed({**cell, "source": [expected]}):
                found.append(f"{stem}: the reference cell of {exercise!r} ({module}: "
                             f"{', '.join(names)}) is not collapsed (metadata {COLLAPSED})")
                cell["metadata"] = {**cell.get("metadata", {}), **COLLAPSED}
            if current != expected:
                diff = difflib.unified_diff(
                    current.splitlines(), expected.splitlines(), lineterm="",
                    fromfile=f"notebooks/{stem}.ipynb ({module}: {', '.join(names)})",
                    tofile=f"helpers/{module}.py")
                found.append("\n".join(diff))
                cell["source"] = expected.splitlines(keepends=True)
        found += long_cells(notebook, stem, write)
        if write and len(found) > before:  # a cell or a note above one was corrected
            path.write_text(json.dumps(notebook, sort_keys=True, indent=1, ensure_ascii=False)
                            + "\n")
    return found


def main(argv: list, root: Path = ROOT, manifest: dict = MANIFEST) -> int:
    if argv not in (["--check"], ["--write"]):
        print("usage: python -m tests.tools.sync --check | --write")
        return 2
    write = argv == ["--write"]
    found = problems(write, root, manifest)
    for text in found:
        print(text, end="\n\n")
    summary = f"rewrote {len(found)} cell(s)" if write else f"{len(found)} problem(s)"
    print(summary if found else "every marked cell is in sync")
    return 1 if found and not write else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
