"""Notebook 14's checkers (pair_counts, merge_pair, train_bpe, encode_word): the reference and
answers written independently of it pass, buggy answers get the hint of their pitfall (K1-K8);
and the reference BPE gives Hugging Face tokenizers' merges and ids on the course's text."""

import json
from collections import defaultdict
from itertools import pairwise

import pytest

from helpers import tokens
from helpers.exercises.nb14 import EXERCISES

# ---- answers written another way ------------------------------------------------------------


def counts_with_defaultdict(words):
    counts = defaultdict(int)
    for symbols, freq in words.items():
        for i in range(len(symbols) - 1):
            counts[symbols[i], symbols[i + 1]] += freq
    return counts


def merge_with_a_list(symbols, pair):
    out = list(symbols)
    i = 0
    while i < len(out) - 1:
        if out[i] == pair[0] and out[i + 1] == pair[1]:
            out[i:i + 2] = [pair[0] + pair[1]]  # the merged symbol is never matched again
        i += 1
    return out  # a list is accepted too


def train_the_slow_way(words, num_merges):
    """Recount everything each round; ties by the starting vocabulary's order."""
    order = tokens.initial_vocab(words)
    merges = []
    for _ in range(num_merges):
        counts = counts_with_defaultdict(words)
        if not counts:
            break
        top = max(counts.values())
        pair = sorted(p for p, n in counts.items() if n == top)
        pair = min(pair, key=lambda p: (order.index(p[0]), order.index(p[1])))
        merges.append(pair)
        if pair[0] + pair[1] not in order:
            order.append(pair[0] + pair[1])
        words = {tuple(merge_with_a_list(s, pair)): f for s, f in words.items()}
    return merges


def encode_in_learned_order(word, merges):
    """Apply every merge once, in the order learned: the same as the lowest rank first."""
    symbols = list(word[:-1]) + [word[-1] + "</w>"]
    for pair in merges:
        symbols = merge_with_a_list(symbols, pair)
    return symbols


@pytest.mark.parametrize("name, answer", [
    ("pair_counts", counts_with_defaultdict), ("merge_pair", merge_with_a_list),
    ("train_bpe", train_the_slow_way), ("encode_word", encode_in_learned_order)])
def test_answers_written_differently_pass(run_check, name, answer):
    for fn in (EXERCISES[name].reference, answer):
        passed, text = run_check(name, fn)
        assert passed, text


# ---- buggy answers, each named ------------------------------------------------------------


@pytest.mark.parametrize("name", list(EXERCISES))
def test_each_variant_fails_with_its_own_hint(run_check, name):
    for pitfall in EXERCISES[name].pitfalls:
        passed, text = run_check(name, pitfall.variant)
        assert not passed, pitfall.name
        assert pitfall.hint.split(":")[0] in text, (pitfall.name, text)
        if pitfall.id:
            assert f"[{pitfall.id}]" in text, (pitfall.name, text)


def counts_ignoring_frequency(words):  # K1, written as a learner would
    counts = {}
    for symbols in words:
        for pair in pairwise(symbols):
            counts[pair] = counts.get(pair, 0) + 1
    return counts


def merge_without_skipping(symbols, pair):  # K2: i += 1 after a merge
    out, i = [], 0
    while i < len(symbols):
        if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
            out.append(symbols[i] + symbols[i + 1])
        else:
            out.append(symbols[i])
        i += 1
    return tuple(out)


def merge_with_replace(symbols, pair):  # K7
    return tuple(" ".join(symbols).replace(f"{pair[0]} {pair[1]}", pair[0] + pair[1]).split())


def train_minbpe_style(words, num_merges):  # K6: max over a dict breaks ties by insertion
    merges = []
    for _ in range(num_merges):
        counts = counts_with_defaultdict(words)
        if not counts:
            break
        pair = max(counts, key=counts.get)
        merges.append(pair)
        words = {tokens.merge_pair(s, pair): f for s, f in words.items()}
    return merges


def encode_without_marker(word, merges):  # K5
    symbols = list(word)
    for pair in merges:
        symbols = merge_with_a_list(symbols, pair)
    return symbols


def encode_newest_first(word, merges):  # K3
    return encode_in_learned_order(word, merges[::-1])


@pytest.mark.parametrize("name, answer, pitfall", [
    ("pair_counts", counts_ignoring_frequency, "[K1]"),
    ("merge_pair", merge_without_skipping, "[K2]"),
    ("merge_pair", merge_with_replace, "[K7]"),
    ("train_bpe", train_minbpe_style, "[K6]"),
    ("encode_word", encode_without_marker, "[K5]"),
    ("encode_word", encode_newest_first, "[K3]")])
def test_learner_style_slips_are_named(run_check, name, answer, pitfall):
    passed, text = run_check(name, answer)
    assert not passed and pitfall in text, text


def test_an_untouched_stub_is_not_attempted(run_check):
    def my_pair_counts(words):
        raise NotImplementedError

    passed, text = run_check("pair_counts", my_pair_counts)
    assert not passed and "not attempted" in text


# ---- the reference itself -------------------------------------------------------------------


def test_merge_pair_does_not_overlap():
    assert tokens.merge_pair(("a", "a", "a"), ("a", "a")) == ("aa", "a")
    assert tokens.merge_pair(("a",) * 4, ("a", "a")) == ("aa", "aa")


def test_the_fast_trainer_equals_the_slow_one_on_the_course_corpus():
    from helpers.translation import CORPUS_ARGS, make_corpus

    corpus = make_corpus(**CORPUS_ARGS)
    words = tokens.word_table(s for pair in corpus.train[:3000] for s in pair)
    assert tokens.train_bpe(words, 60) == train_the_slow_way(words, 60)


def test_decode_inverts_tokenize():
    text = "the cats eat cake les chats mangent du gâteau"
    merges = tokens.train_bpe(tokens.word_table([text] * 3), 20)
    assert tokens.decode(tokens.tokenize(text, merges)) == text


# ---- parity with Hugging Face tokenizers ---------------------------------------------------


def library_bpe(texts, vocab_size):
    """tokenizers' BpeTrainer with the settings that match helpers/tokens.py."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>", end_of_word_suffix=tokens.END))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=0, show_progress=False,
                                  special_tokens=list(tokens.SPECIALS),
                                  end_of_word_suffix=tokens.END)
    tokenizer.train_from_iterator(texts, trainer)
    return tokenizer


@pytest.mark.parametrize("vocab_size", [200, 1000])
def test_same_merges_and_ids_as_tokenizers_on_the_course_corpus(vocab_size):
    from helpers.translation import CORPUS_ARGS, make_corpus

    corpus = make_corpus(**CORPUS_ARGS)
    texts = [s for pair in corpus.train for s in pair]
    library = library_bpe(texts, vocab_size)
    model = json.loads(library.to_str())["model"]
    their_merges = [tuple(pair) for pair in model["merges"]]
    their_tokens = sorted(model["vocab"], key=model["vocab"].get)
    # The library numbers the marked symbols (s</w>, ...) in the order of a hash map, which
    # changes from run to run: read its starting vocabulary, which breaks its ties.
    start = their_tokens[len(tokens.SPECIALS):min(model["vocab"][a + b] for a, b in their_merges)]
    assert sorted(start) == sorted(tokens.initial_vocab(tokens.word_table(texts)))
    ours = tokens.BPE(texts, len(their_merges), vocab=start)
    assert ours.merges == their_merges
    assert ours.tokens == their_tokens
    for sentence in texts[:300] + [s for pair in corpus.test[:300] for s in pair]:
        assert ours.encode(sentence) == library.encode(sentence).ids


def test_same_merges_as_tokenizers_on_the_course_prose():
    texts = tokens.course_prose()
    library = library_bpe(texts, 400)
    model = json.loads(library.to_str())["model"]
    their_merges = [tuple(pair) for pair in model["merges"]]
    their_tokens = sorted(model["vocab"], key=model["vocab"].get)
    start = their_tokens[len(tokens.SPECIALS):min(model["vocab"][a + b] for a, b in their_merges)]
    ours = tokens.BPE(texts, len(their_merges), vocab=start)
    assert ours.merges == their_merges and ours.tokens == their_tokens
    # The prose writes `<pad>` and `<eos>`: both tokenizers keep a special token whole.
    assert any("<pad>" in text for text in texts)
    for text in texts[:300]:
        assert ours.encode(text) == library.encode(text).ids
