"""Notebook 14's exercises: byte-pair encoding (``pair_counts``, ``merge_pair``, ``train_bpe``,
``encode_word``), whose answers are Python values, compared by each exercise's own ``compare``."""

from collections import Counter
from functools import reduce
from itertools import pairwise

from ..tokens import (
    best_pair,
    encode_word,
    initial_vocab,
    merge_pair,
    pair_counts,
    split_word,
    train_bpe,
)
from .compare import Problem, no_addresses
from .engine import Case, Exercise, Pitfall, slip


def _compare_counts(expected: dict, given) -> Problem | None:
    if not isinstance(given, dict):
        return Problem(f"expected a dict {{(left, right): count}}, got a {type(given).__name__}",
                       "return a dict (or a collections.Counter) of pair counts")
    given = {tuple(pair) if isinstance(pair, (tuple, list)) else pair: n
             for pair, n in given.items() if n}
    wrong = [f"the pair {pair} should count {n}, yours counts {given.get(pair, 0)}"
             for pair, n in expected.items() if given.get(pair) != n] + [
        f"your counts hold {pair!r}, which is not two neighbours inside a word"
        for pair in given if pair not in expected]
    return Problem(no_addresses(wrong[0])) if wrong else None


def _compare_sequence(what: str, item: str):
    """A comparison of tuples or lists: ``what`` names the answer, ``item`` one element."""

    def compare(expected, given) -> Problem | None:
        if not isinstance(given, (tuple, list)):
            return Problem(f"expected {what} (a tuple or list), got a {type(given).__name__}")
        given = [tuple(x) if isinstance(x, list) else x for x in given]
        both = f"(expected {_short(expected)}, got {_short(given)})"
        i = next((i for i, pair in enumerate(zip(expected, given)) if pair[0] != pair[1]), None)
        if i is not None:
            return Problem(no_addresses(f"{item} {i} should be {expected[i]!r}, yours is "
                                        f"{_short([given[i]])[1:-1]} {both}"))
        if len(given) != len(expected):
            return Problem(no_addresses(f"expected {len(expected)} {item}s, got {len(given)} "
                                        f"{both}"))
        return None

    return compare


def _short(values) -> str:
    """Up to six values: ``repr`` for strings, tuples and numbers, else the type."""
    shown = [repr(v) if isinstance(v, (str, int, float, tuple)) and "object at" not in repr(v)
             else f"a {type(v).__name__}" for v in list(values)[:6]]
    return f"[{', '.join(shown)}{', ...' if len(values) > 6 else ''}]"


# Slips: small edits of helpers/tokens.py, a few written the learner's way
COUNTS_K1 = slip(pair_counts, ("counts[pair] += freq", "counts[pair] += 1"))  # freq forgotten


def _counts_across_words(words):  # K4: the words as one sequence, pairs across two counted too
    return dict(Counter(pairwise(s for symbols, freq in words.items()
                                 for _ in range(freq) for s in symbols)))


def _merge_from_right(symbols, pair):
    """K2: merged from the right (``a a a`` gives ``a aa``): the reference on the mirror image."""
    mirror = merge_pair(tuple(s[::-1] for s in reversed(symbols)), (pair[1][::-1], pair[0][::-1]))
    return tuple(s[::-1] for s in reversed(mirror))


def _recounting(count, choose=best_pair):
    """A learner's training loop: ``count`` every word again each round and ``choose`` a pair
    (the reference updates its counts instead, which keeps them in another order)."""

    def train(words, num_merges):
        rank, merges = {t: i for i, t in enumerate(initial_vocab(words))}, []
        while len(merges) < num_merges and (counts := count(words)):
            merges.append(choose(counts, rank))
            rank.setdefault("".join(merges[-1]), len(rank))
            words = {merge_pair(symbols, merges[-1]): n for symbols, n in words.items()}
        return merges

    return train


def _ties(new: str):
    """``train_bpe`` with another tie-break among the most frequent pairs (``tied``)."""
    rule = slip(best_pair, ("min(tied, key=lambda pair: (rank[pair[0]], rank[pair[1]]))", new))
    return slip(train_bpe, names={"best_pair": rule})


_table = lambda **words: {split_word(word): n for word, n in words.items()}
# Sennrich et al.'s example, a word with a repeated pair, and a tie to break.
SENNRICH = _table(low=5, lower=2, newest=6, widest=3)
REPEATS = _table(banana=3, bandana=2, aaa=4, an=1)
TIES = _table(ab=3, azc=3, zc=1)  # (a, z) and (a, b</w>) tie: z comes before b</w>
FIRST_SEEN = {**_table(cd=2), **_table(ab=2)}  # a tie where the first pair seen is not the rule's
MERGES, BANANA = train_bpe(SENNRICH, 10), train_bpe(REPEATS, 6)
# Two merge lists typed by hand, where the order decides: by rank, ('b', 'a') comes first.
ORDER, RIGHT_FIRST = [("b", "a"), ("a", "b")], [("b", "c</w>"), ("a", "b")]
SYMBOLS = [(("l", "o", "w</w>"), ("l", "o")), (("a", "a", "a"), ("a", "a")),
           (("b", "an", "an", "a</w>"), ("an", "a</w>")), (("x", "ab", "c</w>"), ("b", "c</w>")),
           (("a", "a", "a", "a"), ("a", "a"))]  # ('b', 'c</w>') is no pair of the fourth
BY_RANK = "min(pairs, key=rank.get)"  # encode_word's choice of the next pair
EXERCISES: dict[str, Exercise] = {
    "pair_counts": Exercise(
        reference=pair_counts, sources=(pair_counts,), compare=_compare_counts,
        make_cases=lambda g: [Case("low 5, lower 2, newest 6, widest 3", (SENNRICH,)),
                              Case("banana 3, bandana 2, aaa 4, an 1", (REPEATS,)),
                              Case("one word of one symbol: a 7", (_table(a=7),))],
        pitfalls=(
            Pitfall("K1", "each distinct word counted once", COUNTS_K1),
            Pitfall("K8", "a pair counted once per word",
                    slip(pair_counts, ("in pairwise(symbols)", "in set(pairwise(symbols))"))),
            Pitfall("K4", "pairs across two words", _counts_across_words))),
    "merge_pair": Exercise(
        reference=merge_pair, sources=(merge_pair,),
        compare=_compare_sequence("the merged symbols", "symbol"),
        make_cases=lambda g: [Case(f"{s} with {p}{': no such pair' if s[0] == 'x' else ''}",
                                   (s, p)) for s, p in SYMBOLS],
        pitfalls=(
            Pitfall("K2", "overlapping occurrences merged", slip(merge_pair, ("i += 2", "i += 1"))),
            Pitfall("K2", "merged from the right", _merge_from_right, "merge from left to right: "
                    "('a', 'a', 'a') gives ('aa', 'a'), not ('a', 'aa')."),
            Pitfall("K7", "str.replace on the joined symbols", lambda symbols, pair: tuple(
                " ".join(symbols).replace(" ".join(pair), "".join(pair)).split())),
            Pitfall(None, "only the first occurrence", slip(merge_pair, (
                "i += 2", "return tuple(merged) + symbols[i + 2:]")),
                    "merge every occurrence of the pair, not just the first."))),
    "train_bpe": Exercise(
        reference=train_bpe, sources=(train_bpe, best_pair),
        compare=_compare_sequence("the list of merges", "merge"),
        make_cases=lambda g: [
            Case("low 5, lower 2, newest 6, widest 3; 10 merges", (SENNRICH, 10)),
            Case("banana 3, bandana 2, aaa 4, an 1; 6 merges", (REPEATS, 6)),
            Case("ab 3, azc 3, zc 1 (a tie); 2 merges", (TIES, 2)),
            Case("cd 2, ab 2 (a tie); 1 merge", (FIRST_SEEN, 1)),
            Case("more merges than pairs: ab 1; 5 merges", (_table(ab=1), 5))],
        pitfalls=(
            Pitfall("K6", "ties to the pair counted first",
                    _recounting(pair_counts, lambda counts, rank: max(counts, key=counts.get))),
            Pitfall("K6", "ties in alphabetical order", _ties("min(tied)"),
                    "break a tie by the tokens' places in initial_vocab (new tokens last), not "
                    "alphabetically: 'z' comes before 'b</w>'."),
            Pitfall("K6", "ties to the last pair in the vocabulary",
                    _ties("max(tied, key=lambda pair: (rank[pair[0]], rank[pair[1]]))"),
                    "on a tie, the pair whose tokens came FIRST in the vocabulary wins."),
            Pitfall("K1", "counts without the frequencies", _recounting(COUNTS_K1)),
            Pitfall("K4", "pairs across two words", _recounting(_counts_across_words)),
            Pitfall(None, "every merge from the first counts", slip(
                train_bpe, ("counts.subtract(pair_counts({symbols: freq}))", ""),
                ("counts.update(pair_counts({merged: freq}))", ""),
                ("merges.append(pair)", "merges.append(pair)\n        del counts[pair]")),
                    "merge the chosen pair in every word, then count again: each merge "
                    "changes the counts."))),
    "encode_word": Exercise(
        reference=encode_word, sources=(encode_word,),
        compare=_compare_sequence("the word's tokens", "token"),
        make_cases=lambda g: [
            Case("'lowest' with Sennrich's 10 merges", ("lowest", MERGES)),
            Case("'newer' with Sennrich's 10 merges", ("newer", MERGES)),
            Case("'low' with Sennrich's 10 merges (a word seen in training)", ("low", MERGES)),
            Case("'bananas' with 6 merges of banana/bandana", ("bananas", BANANA)),
            Case(f"'ababx' with the merges {ORDER}", ("ababx", ORDER)),
            Case(f"'abc' with the merges {RIGHT_FIRST}", ("abc", RIGHT_FIRST)),
            Case("'zoo': no merge applies", ("zoo", MERGES))],
        pitfalls=(
            Pitfall("K5", "no end-of-word marker",
                    slip(encode_word, ("split_word(word, end)", "tuple(word)"))),
            Pitfall("K5", "the marker as a symbol of its own",
                    slip(encode_word, ("split_word(word, end)", "(*word, end)")),
                    "glue '</w>' to the last character ('s</w>'), as split_word does."),
            Pitfall("K3", "merges applied newest first", lambda word, merges: list(
                reduce(merge_pair, reversed(merges), split_word(word)))),
            Pitfall("K3", "the leftmost pair first", slip(encode_word, (BY_RANK, "pairs[0]")),
                    "among the pairs in the word, merge the one learned earliest (lowest rank), "
                    "wherever it is."),
            Pitfall("K3", "the pair most frequent in the word first", slip(encode_word, (
                BY_RANK, "min(pairs, key=lambda p: (-pairs.count(p), rank[p]))")),
                    "the rank decides, not how often a pair occurs in this word."))),
}
