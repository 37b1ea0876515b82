"""The course's toy task from notebook 09 on: translating a small grammar's English into French
(``lexicon``: the grammar, ``corpus``: the splits, ``evaluation``, ``translator``, ``names``)."""

from .corpus import Corpus, lookahead_split, make_corpus
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
           "NEGATION_CORPUS_ARGS", "NEGATION_STEPS", "bleu", "evaluate", "exact_match",
           "load_translator", "lookahead_split", "make_corpus", "train_translator", "translate"]
