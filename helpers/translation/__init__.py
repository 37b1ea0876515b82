"""The course's toy task: translating a small grammar's English into French. Notebook 09 on.

The Transformer in :mod:`helpers` knows nothing of it; this package is what it learns:

================  ============================================================
module            what it holds
================  ============================================================
``lexicon``       the words and the grammar (agreement, word order, negation)
``corpus``        :func:`make_corpus`: the train, valid and test splits
``evaluation``    :func:`translate` strings, :func:`exact_match`, :func:`bleu`
``translator``    :func:`train_translator`, :func:`load_translator`: the
                  shipped models in ``assets/``, and the arguments they used
``names``         notebook 14: the corpus with names, its three translators
                  (``assets/nb14_*.pt``)
================  ============================================================
"""

from .corpus import Corpus, choose_held_out_pairs, lookahead_split, make_corpus
from .evaluation import bleu, evaluate, exact_match, translate
from .translator import (
    ASSET_PATH,
    ASSET_STEPS,
    CORPUS_ARGS,
    NEGATION_ASSET_PATH,
    NEGATION_CORPUS_ARGS,
    NEGATION_STEPS,
    load_translator,
    train_translator,
)

__all__ = ["ASSET_PATH", "ASSET_STEPS", "CORPUS_ARGS", "Corpus", "NEGATION_ASSET_PATH",
           "NEGATION_CORPUS_ARGS", "NEGATION_STEPS", "bleu", "choose_held_out_pairs", "evaluate",
           "exact_match", "load_translator", "lookahead_split", "make_corpus", "train_translator",
           "translate"]
