"""Notebook 14's exercises: byte-pair encoding written by the learner, step by step
(``pair_counts``, ``merge_pair``, ``train_bpe``, ``encode_word``), with the slips K1-K8 as
buggy variants.

Answers are Python values (a dict of counts, a tuple of symbols, a list of merges), not tensors:
each exercise compares them with its own ``compare``, which names the first thing that differs.
"""

from collections import Counter
from itertools import pairwise

from ..tokens import (
    END,
    best_pair,
    encode_word,
    initial_vocab,
    merge_pair,
    pair_counts,
    split_word,
    train_bpe,
)
from .compare import Problem, no_addresses
from .engine import Case, Exercise, Pitfall

# ----------------------------------------------------------------------------------------------
# Comparing answers
# ----------------------------------------------------------------------------------------------

def _compare_counts(expected: dict, given) -> Problem | None:
    if not isinstance(given, dict):
        return Problem(f"expected a dict {{(left, right): count}}, got a {type(given).__name__}",
                       "return a dict (or a collections.Counter) of pair counts")
    given = {tuple(pair) if isinstance(pair, (tuple, list)) else pair: n
             for pair, n in given.items() if n}
    for pair, n in expected.items():
        if given.get(pair) != n:
            return Problem(no_addresses(f"the pair {pair} should count {n}, yours counts "
                                        f"{given.get(pair, 0)}"))
    extra = [pair for pair in given if pair not in expected]
    if extra:
        return Problem(no_addresses(f"your counts hold {extra[0]!r}, which is not two "
                                    "neighbours inside a word"))
    return None


def _compare_sequence(what: str, item: str):
    """A comparison of tuples or lists: ``what`` names the answer, ``item`` one element."""

    def compare(expected, given) -> Problem | None:
        if not isinstance(given, (tuple, list)):
            return Problem(f"expected {what} (a tuple or list), got a {type(given).__name__}")
        given = [tuple(x) if isinstance(x, list) else x for x in given]
        for i, (exp, got) in enumerate(zip(expected, given, strict=False)):  # then lengths
            if exp != got:
                return Problem(no_addresses(f"{item} {i} should be {exp!r}, yours is {_show(got)} "
                                            f"(expected {_short(expected)}, got {_short(given)})"))
        if len(given) != len(expected):
            return Problem(no_addresses(f"expected {len(expected)} {item}s ({_short(expected)}), "
                                        f"got {len(given)} ({_short(given)})"))
        return None

    return compare


def _show(value) -> str:
    """``repr`` for the values an answer holds (strings, tuples, numbers), else the type."""
    if isinstance(value, (str, int, float, tuple)) and "object at" not in repr(value):
        return repr(value)
    return f"a {type(value).__name__}"


def _short(values) -> str:
    values = list(values)
    text = ", ".join(_show(v) for v in values[:6])
    return f"[{text}{', ...' if len(values) > 6 else ''}]"


# ----------------------------------------------------------------------------------------------
# Buggy variants, each with the learner's signature
# ----------------------------------------------------------------------------------------------

def _counts_per_distinct_word(words):
    """K1: each word counted once, whatever its frequency."""
    return dict(Counter(pair for symbols in words for pair in pairwise(symbols)))


def _counts_once_per_word(words):
    """K8: a pair that occurs twice in a word counted once (a set of the word's pairs)."""
    counts = Counter()
    for symbols, freq in words.items():
        for pair in set(pairwise(symbols)):
            counts[pair] += freq
    return dict(counts)


def _counts_across_words(words):
    """K4: the table flattened into one long sequence: pairs across two words counted too."""
    sequence = [s for symbols, freq in words.items() for _ in range(freq) for s in symbols]
    return dict(Counter(pairwise(sequence)))


def _merge_overlapping(symbols, pair):
    """K2: one step after a merge instead of two: ``a a a`` becomes ``aa aa a``."""
    merged, i = [], 0
    while i < len(symbols):
        if tuple(symbols[i:i + 2]) == tuple(pair):
            merged.append(pair[0] + pair[1])
        else:
            merged.append(symbols[i])
        i += 1
    return tuple(merged)


def _reverse_merge(symbols, pair):
    """K2: occurrences merged from the right: ``a a a`` becomes ``a aa``."""
    merged, i = [], len(symbols) - 1
    while i >= 0:
        if i > 0 and (symbols[i - 1], symbols[i]) == tuple(pair):
            merged.append(pair[0] + pair[1])
            i -= 2
        else:
            merged.append(symbols[i])
            i -= 1
    return tuple(reversed(merged))


def _merge_by_replace(symbols, pair):
    """K7: the merge done on the joined string, which crosses symbol boundaries."""
    return tuple(" ".join(symbols).replace(" ".join(pair), "".join(pair)).split())


def _merge_first_only(symbols, pair):
    """Only the first occurrence merged."""
    symbols = list(symbols)
    for i in range(len(symbols) - 1):
        if (symbols[i], symbols[i + 1]) == tuple(pair):
            return tuple(symbols[:i] + [pair[0] + pair[1]] + symbols[i + 2:])
    return tuple(symbols)


def _train_with(count, choose):
    """A training loop built from a way of counting and a way of choosing the pair."""

    def train(words, num_merges):
        rank = {token: i for i, token in enumerate(initial_vocab(words))}
        merges = []
        for _ in range(num_merges):
            counts = count(words)
            if not counts:
                break
            pair = choose(counts, rank)
            words = {merge_pair(symbols, pair): freq for symbols, freq in words.items()}
            merges.append(pair)
            rank.setdefault(pair[0] + pair[1], len(rank))
        return merges

    return train


def _first_seen(counts, rank):
    """K6: ``max(counts, key=counts.get)``: a tie goes to the pair counted first."""
    return max(counts, key=counts.get)


def _alphabetical(counts, rank):
    """K6: a tie goes to the pair first in alphabetical order."""
    return min(counts, key=lambda pair: (-counts[pair], pair))


def _last_in_vocab(counts, rank):
    """K6: a tie goes to the pair whose tokens came last in the vocabulary."""
    return max(counts, key=lambda pair: (counts[pair], rank[pair[0]], rank[pair[1]]))


def _train_from_first_counts(words, num_merges):
    """Every merge chosen from the first counts: the words never merged between two rounds."""
    counts, rank = pair_counts(words), {t: i for i, t in enumerate(initial_vocab(words))}
    order = sorted(counts, key=lambda pair: (-counts[pair], rank[pair[0]], rank[pair[1]]))
    return order[:num_merges]


def _encode_reversed(word, merges):
    """K3: the merges applied newest first."""
    symbols = split_word(word)
    for pair in reversed(merges):
        symbols = merge_pair(symbols, pair)
    return list(symbols)


def _encode_leftmost(word, merges):
    """K3: the leftmost pair that has a merge goes first, whatever its rank."""
    known, symbols = set(merges), split_word(word)
    while True:
        pairs = [pair for pair in pairwise(symbols) if pair in known]
        if not pairs:
            return list(symbols)
        symbols = merge_pair(symbols, pairs[0])


def _encode_most_frequent(word, merges):
    """K3: the pair most frequent in this word goes first (ties: the earlier merge)."""
    rank, symbols = {pair: i for i, pair in enumerate(merges)}, split_word(word)
    while True:
        counts = Counter(pair for pair in pairwise(symbols) if pair in rank)
        if not counts:
            return list(symbols)
        symbols = merge_pair(symbols, min(counts, key=lambda p: (-counts[p], rank[p])))


def _encode_without_marker(word, merges):
    """K5: the word split into plain characters, without the end-of-word marker."""
    symbols = tuple(word)
    for pair in merges:
        symbols = merge_pair(symbols, pair)
    return list(symbols)


def _encode_separate_marker(word, merges):
    """K5: the marker as a symbol of its own, where training glued it to the last character."""
    symbols = (*word, END)
    for pair in merges:
        symbols = merge_pair(symbols, pair)
    return list(symbols)


# ----------------------------------------------------------------------------------------------
# Test cases
# ----------------------------------------------------------------------------------------------

def _table(**words) -> dict:
    return {split_word(word): n for word, n in words.items()}


# Sennrich et al.'s example, a word with a repeated pair, and a tie to break.
SENNRICH = _table(low=5, lower=2, newest=6, widest=3)
REPEATS = _table(banana=3, bandana=2, aaa=4, an=1)
TIES = _table(ab=3, azc=3, zc=1)  # (a, z) and (a, b</w>) tie: z comes before b</w>
FIRST_SEEN = {**_table(cd=2), **_table(ab=2)}  # a tie where the first pair seen is not the rule's


def _counts_cases(g):
    return [Case("low 5, lower 2, newest 6, widest 3", (SENNRICH,)),
            Case("banana 3, bandana 2, aaa 4, an 1", (REPEATS,)),
            Case("one word of one symbol: a 7", (_table(a=7),))]


def _merge_cases(g):
    return [Case("('l', 'o', 'w</w>') with ('l', 'o')", (("l", "o", "w</w>"), ("l", "o"))),
            Case("('a', 'a', 'a') with ('a', 'a')", (("a", "a", "a"), ("a", "a"))),
            Case("('b', 'an', 'an', 'a</w>') with ('an', 'a</w>')",
                 (("b", "an", "an", "a</w>"), ("an", "a</w>"))),
            Case("('x', 'ab', 'c</w>') with ('b', 'c</w>'): no such pair",
                 (("x", "ab", "c</w>"), ("b", "c</w>"))),
            Case("('a', 'a', 'a', 'a') with ('a', 'a')", (("a", "a", "a", "a"), ("a", "a")))]


def _train_cases(g):
    return [Case("low 5, lower 2, newest 6, widest 3; 10 merges", (SENNRICH, 10)),
            Case("banana 3, bandana 2, aaa 4, an 1; 6 merges", (REPEATS, 6)),
            Case("ab 3, azc 3, zc 1 (a tie); 2 merges", (TIES, 2)),
            Case("cd 2, ab 2 (a tie); 1 merge", (FIRST_SEEN, 1)),
            Case("more merges than pairs: ab 1; 5 merges", (_table(ab=1), 5))]


MERGES = train_bpe(SENNRICH, 10)
BANANA = train_bpe(REPEATS, 6)
# Two merge lists typed by hand, where the order decides: by rank, ('b', 'a') comes first.
ORDER = [("b", "a"), ("a", "b")]
RIGHT_FIRST = [("b", "c</w>"), ("a", "b")]


def _encode_cases(g):
    return [Case("'lowest' with Sennrich's 10 merges", ("lowest", MERGES)),
            Case("'newer' with Sennrich's 10 merges", ("newer", MERGES)),
            Case("'low' with Sennrich's 10 merges (a word seen in training)", ("low", MERGES)),
            Case("'bananas' with 6 merges of banana/bandana", ("bananas", BANANA)),
            Case(f"'ababx' with the merges {ORDER}", ("ababx", ORDER)),
            Case(f"'abc' with the merges {RIGHT_FIRST}", ("abc", RIGHT_FIRST)),
            Case("'zoo': no merge applies", ("zoo", MERGES))]


EXERCISES: dict[str, Exercise] = {
    "pair_counts": Exercise(
        reference=pair_counts,
        make_cases=_counts_cases,
        sources=(pair_counts,),
        compare=_compare_counts,
        pitfalls=(
            Pitfall("K1", "each distinct word counted once", _counts_per_distinct_word,
                    "weight each word's pairs by its frequency: counts[pair] += freq."),
            Pitfall("K8", "a pair counted once per word", _counts_once_per_word,
                    "count every occurrence: 'banana' holds ('a', 'n') twice."),
            Pitfall("K4", "pairs across two words", _counts_across_words,
                    "count the pairs inside each word only: two words never merge."),
        ),
    ),
    "merge_pair": Exercise(
        reference=merge_pair,
        make_cases=_merge_cases,
        sources=(merge_pair,),
        compare=_compare_sequence("the merged symbols", "symbol"),
        pitfalls=(
            Pitfall("K2", "overlapping occurrences merged", _merge_overlapping,
                    "after a merge, skip both symbols (i += 2): ('a', 'a', 'a') with ('a', 'a') "
                    "gives ('aa', 'a')."),
            Pitfall("K2", "merged from the right", _reverse_merge,
                    "merge from left to right: ('a', 'a', 'a') gives ('aa', 'a'), not "
                    "('a', 'aa')."),
            Pitfall("K7", "str.replace on the joined symbols", _merge_by_replace,
                    "compare whole symbols, not characters of the joined string: ('x', 'ab', "
                    "'c</w>') holds no pair ('b', 'c</w>')."),
            Pitfall(None, "only the first occurrence", _merge_first_only,
                    "merge every occurrence of the pair, not just the first."),
        ),
    ),
    "train_bpe": Exercise(
        reference=train_bpe,
        make_cases=_train_cases,
        sources=(train_bpe, best_pair),
        compare=_compare_sequence("the list of merges", "merge"),
        pitfalls=(
            Pitfall("K6", "ties to the pair counted first", _train_with(pair_counts, _first_seen),
                    "break a tie by the vocabulary's order, not by which pair was counted first: "
                    "min over (-count, rank[left], rank[right])."),
            Pitfall("K6", "ties in alphabetical order", _train_with(pair_counts, _alphabetical),
                    "break a tie by the tokens' places in initial_vocab (new tokens last), not "
                    "alphabetically: 'z' comes before 'b</w>'."),
            Pitfall("K6", "ties to the last pair in the vocabulary",
                    _train_with(pair_counts, _last_in_vocab),
                    "on a tie, the pair whose tokens came FIRST in the vocabulary wins."),
            Pitfall("K1", "counts without the frequencies",
                    _train_with(_counts_per_distinct_word, best_pair),
                    "weight each word's pairs by its frequency."),
            Pitfall("K4", "pairs across two words", _train_with(_counts_across_words, best_pair),
                    "count the pairs inside each word only."),
            Pitfall(None, "every merge from the first counts", _train_from_first_counts,
                    "merge the chosen pair in every word, then count again: each merge "
                    "changes the counts."),
        ),
    ),
    "encode_word": Exercise(
        reference=encode_word,
        make_cases=_encode_cases,
        sources=(encode_word,),
        compare=_compare_sequence("the word's tokens", "token"),
        pitfalls=(
            Pitfall("K5", "no end-of-word marker", _encode_without_marker,
                    "start from split_word(word): the last character carries '</w>', as in "
                    "training."),
            Pitfall("K5", "the marker as a symbol of its own", _encode_separate_marker,
                    "glue '</w>' to the last character ('s</w>'), as split_word does."),
            Pitfall("K3", "merges applied newest first", _encode_reversed,
                    "apply the merges in the order they were learned: the lowest rank first."),
            Pitfall("K3", "the leftmost pair first", _encode_leftmost,
                    "among the pairs in the word, merge the one learned earliest (lowest rank), "
                    "wherever it is."),
            Pitfall("K3", "the pair most frequent in the word first", _encode_most_frequent,
                    "the rank decides, not how often a pair occurs in this word."),
        ),
    ),
}
