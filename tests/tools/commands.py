"""The maintainers' commands (``python -m tests.tools``): assets, outputs, retraining."""

import inspect
import json
import os
import re
import time
from pathlib import Path

from helpers.course import ASSETS, ROOT
from helpers.tokens import PROSE


def write_assets(folder: Path = ASSETS) -> list:
    """Redraw the figures kept in ``assets/`` and return their paths."""
    import matplotlib.pyplot as plt

    from helpers.figures import architecture_figure

    path = Path(folder) / "architecture.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    fig = architecture_figure()
    fig.savefig(path, dpi=120, facecolor="white")
    plt.close(fig)
    return [path]


def drop_repeated_figures(notebook) -> None:
    """Keep only the widget in each ``interact`` cell's outputs: the cell above shows its figure."""
    for cell in notebook.cells:
        if cell.cell_type != "code" or "interact(" not in cell.source:
            continue
        widget = [out for out in cell.outputs
                  if "application/vnd.jupyter.widget-view+json" in out.get("data", {})]
        if widget:
            cell.outputs = [out for out in cell.outputs
                            if out in widget or not any(kind.startswith("image/")
                                                        for kind in out.get("data", {}))]


def execute_in_place(paths) -> None:
    """Re-execute and save each notebook in a new kernel (one torch thread, notebook 15 offline)."""
    paths = [Path(path) for path in paths]
    for path in paths:  # every path first, before seconds of imports
        if path.suffix != ".ipynb" or not path.is_file():
            raise SystemExit(f"not a notebook file: {path}")
    import nbformat

    from helpers.pretrained import OFFLINE_VARIABLE
    from tests.tools.bench import execute_notebook

    for path in paths:
        notebook = nbformat.read(path, as_version=4)
        one_thread = {**os.environ, "OMP_NUM_THREADS": "1", OFFLINE_VARIABLE: "1"}
        execute_notebook(notebook, path.resolve().parent, env=one_thread)
        drop_repeated_figures(notebook)
        nbformat.write(notebook, path)
        print(f"executed and saved {path}")


# What ``retrain_asset`` can retrain: name -> the shipped file and the notebook that loads it.
RETRAINABLE = {
    "translator": "assets/translator.pt: notebooks 10 and 11",
    "negation": "assets/translator_negation.pt: notebook 10's negation model",
    "nb12": "assets/nb12_models.pt: notebook 12's decoder-only and encoder-decoder models",
    "nb14_words": "notebook 14's word-level translator",
    "nb14_subwords": "notebook 14's subword translator",
    "nb14_tied": "notebook 14's subword translator with one tied embedding matrix",
    "marian": "assets/nb15_marian/: notebook 15's offline stand-in (a MarianMTModel)",
}


def retrain_asset(which: str = "translator", path=None, progress: bool = True) -> dict:
    """Retrain a shipped model (``which``: a name of :data:`RETRAINABLE`), save it to ``path``
    (default: the shipped file) and return its metadata."""
    if which not in RETRAINABLE:
        raise ValueError(f"expected one of {sorted(RETRAINABLE)}, got {which!r}")
    if which == "nb12":
        from .retrain import retrain_models

        return retrain_models(path, progress)
    if which == "marian":
        from .retrain import retrain_standin

        return retrain_standin(path, progress)
    if which.startswith("nb14_"):
        from .retrain import retrain_named

        return retrain_named(which.removeprefix("nb14_"), path, progress)
    from helpers import translation as task
    from helpers.model import TransformerConfig
    from helpers.training import save_checkpoint

    parameters = inspect.signature(task.train_translator).parameters.values()
    defaults = {p.name: p.default for p in parameters
                if isinstance(p.default, (int, float)) and not isinstance(p.default, bool)}
    shipped = {"translator": (task.CORPUS_ARGS, task.ASSET_STEPS, task.ASSET_PATH),
               "negation": (task.NEGATION_CORPUS_ARGS, task.NEGATION_STEPS,
                            task.NEGATION_ASSET_PATH)}
    corpus_args, steps, default_path = shipped[which]
    training = {**defaults, "steps": steps}
    corpus, config = task.make_corpus(**corpus_args), TransformerConfig.small()
    start = time.perf_counter()
    model, history = task.train_translator(corpus, config, progress=progress, **training)
    seconds = time.perf_counter() - start
    scores = task.evaluate(model, corpus.test, corpus.src_vocab, corpus.tgt_vocab)
    metadata = {"corpus": dict(corpus_args), "training": training,
                "train_seconds": round(seconds, 1), "final_loss": history[-1],
                "test_exact_match": scores["exact_match"], "test_bleu": scores["bleu"]}
    save_checkpoint(path or default_path, model, config, corpus.src_vocab, corpus.tgt_vocab,
                    metadata)
    return metadata


def write_prose_snapshot() -> None:
    """Rewrite ``assets/course_prose.txt``: the markdown of notebooks 00-13 without code blocks,
    formulas and link addresses, one paragraph per line."""
    paragraphs = []
    for path in sorted((ROOT / "notebooks").glob("[01][0-9]_*.ipynb")):
        if int(path.name[:2]) > 13:
            continue
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] != "markdown":
                continue
            text = re.sub(r"```.*?```|\$\$.*?\$\$", " ", "".join(cell["source"]), flags=re.S)
            text = re.sub(r"\]\([^)]*\)", "]", text)  # [words](address) -> [words]
            paragraphs += [" ".join(p.split()) for p in text.split("\n\n") if p.strip()]
    PROSE.write_text("\n".join(paragraphs) + "\n", encoding="utf-8")
