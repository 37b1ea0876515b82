"""The contributor's commands (``python -m helpers.course ...``): redraw the assets, store a
notebook's outputs, retrain the shipped translator. Learners never need them."""

import os
from pathlib import Path

from . import ASSETS


def write_assets(folder: Path = ASSETS) -> list:
    """Redraw the figures kept in ``assets/`` and return their paths."""
    import matplotlib.pyplot as plt

    from ..figures import architecture_figure

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    fig = architecture_figure()
    path = folder / "architecture.png"
    fig.savefig(path, dpi=120, facecolor="white")
    plt.close(fig)
    return [path]


def execute_in_place(paths) -> None:
    """Re-execute each notebook top to bottom in a new kernel (one torch thread, at most 300 s a
    cell) and store its outputs, as a contributor must after changing one. It uses
    :func:`helpers.bench.execute_notebook`, which does not stall at an ``interact`` cell the way
    ``jupyter nbconvert --execute`` can. Notebook 15 runs offline (its stand-in, not the real
    translator), as the tests do."""
    paths = [Path(path) for path in paths]
    for path in paths:  # every path first, before seconds of imports
        if path.suffix != ".ipynb" or not path.is_file():
            raise SystemExit(f"not a notebook file: {path}")
    import nbformat

    from ..bench import execute_notebook
    from ..pretrained import OFFLINE_VARIABLE

    for path in paths:
        notebook = nbformat.read(path, as_version=4)
        one_thread = {**os.environ, "OMP_NUM_THREADS": "1", OFFLINE_VARIABLE: "1"}
        execute_notebook(notebook, path.resolve().parent, env=one_thread)
        nbformat.write(notebook, path)
        print(f"executed and saved {path}")


def retrain_asset(which: str = "translator", path=None, progress: bool = True) -> dict:
    """Retrain a shipped translator from scratch, save it to ``path`` and return its metadata:
    ``train_translator``'s defaults, and for ``which="translator"`` (``assets/translator.pt``)
    ``ASSET_STEPS`` steps on the course's corpus, for ``which="negation"``
    (``assets/translator_negation.pt``) ``NEGATION_STEPS`` on the corpus with negations."""
    import inspect
    import time

    from .. import translation as task
    from ..model import TransformerConfig
    from ..training import save_checkpoint

    parameters = inspect.signature(task.train_translator).parameters.values()
    defaults = {p.name: p.default for p in parameters
                if isinstance(p.default, (int, float)) and not isinstance(p.default, bool)}
    shipped = {"translator": (task.CORPUS_ARGS, task.ASSET_STEPS, task.ASSET_PATH),
               "negation": (task.NEGATION_CORPUS_ARGS, task.NEGATION_STEPS,
                            task.NEGATION_ASSET_PATH)}
    if which not in shipped:
        raise ValueError(f"expected one of {sorted(shipped)}, got {which!r}")
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
