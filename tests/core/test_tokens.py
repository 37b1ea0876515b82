"""helpers/tokens.py's tokenizer as the translator's vocabulary, and notebook 14's names corpus
(helpers/translation/names.py)."""

import random

from helpers.data import BOS_ID, EOS_ID, PAD_ID
from helpers.tokens import BPE, attention_cost, byte_symbols, course_prose, words_of
from helpers.translation import CORPUS_ARGS, make_corpus
from helpers.translation.corpus import Corpus
from helpers.translation.names import (
    NEW_SYLLABLES,
    PRONOUNS,
    SYLLABLES,
    make_names,
    name_corpus,
    train_shared_translator,
)


def test_bpe_stands_in_for_a_vocab():
    texts = ["kalo eats the cake", "kalo mange le gâteau", "mira eats the cakes"]
    bpe = BPE(texts, 20, split=str.split)
    ids = bpe.encode("mira mange le gâteau")
    assert min(ids) >= 4  # no special token inside a sentence
    assert bpe.decode([BOS_ID, *ids, EOS_ID, PAD_ID, *ids]) == "mira mange le gâteau"
    assert bpe.normalize(" kalo eats the cake. ") == "kalo eats the cake"
    assert bpe.unknown_words("kalo eats the pizza") == ["pizza"]  # z was never seen
    assert bpe.encode("z")[0] == 3  # <unk>


def test_names_are_new_words_and_test_names_are_unseen():
    corpus = make_corpus(**CORPUS_ARGS)
    named = name_corpus(corpus, test_size=200)
    assert len(named.train) == len(corpus.train) and named.ordinary == corpus.test
    assert len(named.names) == len(named.new_syllables) == 200
    train_words = {w for pair in named.train for s in pair for w in s.split()}
    assert not (set(named.test_names) | set(named.new_names)) & train_words
    taken = set(corpus.train) | set(corpus.valid) | set(corpus.test)
    for (english, french), (new_english, new_french) in zip(named.names, named.new_syllables,
                                                            strict=True):
        assert english.split()[0] == french.split()[0] in named.test_names
        assert new_english.split()[0] == new_french.split()[0] in named.new_names
        assert english.split()[1:] == new_english.split()[1:]  # the same sentence, renamed
        assert any((f"{pronoun} {english.split(' ', 1)[1]}",  # the sentence before its name
                    f"{french_pronoun} {french.split(' ', 1)[1]}") not in taken
                   for pronoun, french_pronoun in PRONOUNS.items())
    new_syllables = {name[i:i + 2] for name in named.new_names for i in (0, 2)}
    assert new_syllables <= set(NEW_SYLLABLES) and not new_syllables & set(SYLLABLES)
    assert len(make_names(random.Random(0), 50, syllables=(2,))) == 50
    # the test sets do not change the training pairs
    assert name_corpus(corpus, test_size=10).train == named.train


def test_the_shared_translator_uses_one_matrix_three_times():
    corpus = make_corpus(seed=0, num_train=200, num_valid=10, num_test=10)
    bpe = BPE([s for pair in corpus.train for s in pair], 50, split=str.split)
    model, history = train_shared_translator(
        Corpus(corpus.train, corpus.valid, corpus.test, [], bpe, bpe), steps=2, batch_size=8)
    assert model.src_embed.weight is model.tgt_embed.weight is model.generator.weight
    assert len(history) == 2  # one loss per step


def test_bytes_lengths_and_prose():
    assert byte_symbols("é") == "Ã©" and len(byte_symbols("😀")) == 4
    assert attention_cost([2, 3]) == 13
    assert words_of("It's 2 cats.") == ["It", "'", "s", "2", "cats", "."]
    prose = course_prose()
    assert len(prose) > 500 and all(line.strip() for line in prose)
