"""Subword tokens: byte-pair encoding (BPE) from scratch (Sennrich et al., 2016). Notebook 14.

A word is a tuple of symbols, the last marked ``</w>``: ``("c", "a", "t", "s</w>")``. Ties go to
the pair whose left, then right, token came first in the vocabulary: the rule of Hugging Face's
``BpeTrainer``, whose merges :func:`train_bpe` reproduces given its starting vocabulary.
"""

import re
from collections import Counter
from functools import lru_cache
from itertools import pairwise
from pathlib import Path

END = "</w>"  # the end-of-word marker, glued to a word's last character
WORD = re.compile(r"\w+|[^\w\s]+")  # the words of a text: Hugging Face's Whitespace pre-tokenizer
ROOT = Path(__file__).resolve().parents[1]
PROSE = ROOT / "assets" / "course_prose.txt"


def words_of(text: str) -> list:
    """The words of ``text``: runs of letters and digits, and runs of punctuation."""
    return WORD.findall(text)


def split_word(word: str, end: str = END) -> tuple:
    """A word as its starting symbols: its characters, the last one marked: ``c a t s</w>``."""
    return (*word[:-1], word[-1] + end)


SPECIALS = ("<pad>", "<bos>", "<eos>", "<unk>")  # ids 0-3, as in helpers/data.py
SPECIAL = re.compile(f"({'|'.join(map(re.escape, SPECIALS))})")  # a special token in a text


def word_table(texts, end: str = END, split=words_of) -> dict:
    """``{symbols of a word: how often it occurs}`` over texts cut into words by ``split``."""
    counts = Counter(word for text in texts for word in split(text))
    return {split_word(word, end): n for word, n in counts.items()}


def initial_vocab(words: dict) -> list:
    """The starting tokens: every character in code-point order, then every marked last
    symbol (``s</w>``, ...) in code-point order. A token's place here breaks ties."""
    chars = sorted({c for symbols in words for symbol in symbols for c in symbol.replace(END, "")})
    last = sorted({symbols[-1] for symbols in words if len(symbols[-1]) > 1})
    return chars + [s for s in last if s not in chars]


def pair_counts(words: dict) -> dict:
    """``{(left, right): count}``: adjacent pairs inside each word, weighted by its frequency."""
    counts = Counter()
    for symbols, freq in words.items():
        for pair in pairwise(symbols):  # pairs inside one word: never across two
            counts[pair] += freq
    return dict(counts)


def merge_pair(symbols: tuple, pair: tuple) -> tuple:
    """``symbols`` with each occurrence of ``pair`` merged into one symbol, left to right:
    ``a a a`` with ``(a, a)`` gives ``aa a``."""
    merged, i = [], 0
    while i < len(symbols):
        if symbols[i:i + 2] == pair:  # a tuple slice: compares two whole symbols
            merged.append(pair[0] + pair[1])
            i += 2  # both symbols used: an overlapping occurrence is not merged again
        else:
            merged.append(symbols[i])
            i += 1
    return tuple(merged)


def best_pair(counts: dict, rank: dict) -> tuple:
    """The most frequent pair; on a tie, the one whose tokens came first in the vocabulary."""
    top = max(counts.values())
    tied = [pair for pair, n in counts.items() if n == top]
    return min(tied, key=lambda pair: (rank[pair[0]], rank[pair[1]]))


def train_bpe(words: dict, num_merges: int, min_frequency: int = 1, vocab=None) -> list:
    """The merges, in the order learned: at most ``num_merges`` pairs ``(left, right)``.

    Stops early when no pair occurs ``min_frequency`` times. ``vocab``: the starting tokens
    in the order that breaks ties (default :func:`initial_vocab`).
    """
    rank = {token: i for i, token in enumerate(vocab or initial_vocab(words))}
    words, counts, merges = dict(words), Counter(pair_counts(words)), []
    while len(merges) < num_merges and counts:
        pair = best_pair(counts, rank)
        if counts[pair] < min_frequency:
            break
        merges.append(pair)
        rank.setdefault(pair[0] + pair[1], len(rank))  # a new token goes last
        # Only the words that hold the pair change: recount their pairs, not everyone's.
        holding = [symbols for symbols in words  # `pair[0] in symbols` first: a fast filter
                   if pair[0] in symbols and pair in pairwise(symbols)]
        for symbols in holding:
            freq = words.pop(symbols)
            merged = merge_pair(symbols, pair)
            words[merged] = freq
            counts.subtract(pair_counts({symbols: freq}))
            counts.update(pair_counts({merged: freq}))
        for gone in [p for p in counts if counts[p] <= 0 and (pair[0] in p or pair[1] in p)]:
            del counts[gone]  # a pair that no longer occurs
    return merges


def encode_word(word: str, merges: list, end: str = END) -> list:
    """A new word's tokens: its marked characters, then the merges applied by rank (the
    earliest-learned pair present goes first), never by how often a pair occurs here."""
    rank = {pair: i for i, pair in enumerate(merges)}
    symbols = split_word(word, end)
    while len(symbols) > 1:
        pairs = [pair for pair in pairwise(symbols) if pair in rank]
        if not pairs:
            break
        symbols = merge_pair(symbols, min(pairs, key=rank.get))
    return list(symbols)


def tokenize(text: str, merges: list, end: str = END) -> list:
    """The tokens of a text: each word encoded alone, so a merge never crosses two words."""
    return [token for word in words_of(text) for token in encode_word(word, merges, end)]


def decode(tokens: list, end: str = END) -> str:
    """Tokens back to text: glue them, and a marker ends a word."""
    return "".join(tokens).replace(end, " ").strip()


class BPE:
    """A trained BPE tokenizer: merges, ids, ``encode`` (text -> ids), ``decode`` (ids -> text);
    an unseen character becomes ``<unk>``. It stands in for a :class:`~helpers.data.Vocab`."""

    def __init__(self, texts, num_merges: int, min_frequency: int = 1, vocab=None,
                 split=words_of):
        self.split = split
        words = word_table(texts, split=split)
        self.merges = train_bpe(words, num_merges, min_frequency, vocab)
        self.tokens = [*SPECIALS, *(vocab or initial_vocab(words))]  # then one per new merge
        for left, right in self.merges:
            if left + right not in self.tokens:  # two merges may spell the same token
                self.tokens.append(left + right)
        self.ids = {token: i for i, token in enumerate(self.tokens)}
        self._encode_word = lru_cache(maxsize=None)(
            lambda word: tuple(encode_word(word, self.merges)))

    def __len__(self) -> int:
        return len(self.tokens)

    def tokenize(self, text: str) -> list:
        """The tokens of ``text``; a special token written in it (``<eos>``) stays one token."""
        return [token for part in SPECIAL.split(text) for token in (
            [part] if part in SPECIALS else
            [t for word in self.split(part) for t in self._encode_word(word)])]

    def encode(self, text: str) -> list:
        unk = self.ids["<unk>"]
        return [self.ids.get(token, unk) for token in self.tokenize(text)]

    def decode(self, ids) -> str:
        """Ids -> text: skips ``<pad>`` and ``<bos>``, stops at ``<eos>``."""
        ids = ids.tolist() if hasattr(ids, "tolist") else list(ids)
        ids = ids[:ids.index(2)] if 2 in ids else ids  # 2: <eos>
        return decode([self.tokens[i] for i in ids if i != 0 and i != 1])

    def normalize(self, sentence: str) -> str:
        """As :meth:`Vocab.normalize <helpers.data.Vocab.normalize>`: no final ``.!?``."""
        return " ".join(sentence.strip().rstrip(".!?").split())

    def unknown_words(self, sentence: str) -> list:
        """The words holding a character never seen in training (it becomes ``<unk>``)."""
        return [w for w in self.split(sentence) if any(c not in self.ids for c in w[:-1])
                or w[-1] + END not in self.ids and w[-1] not in self.ids]


@lru_cache(maxsize=None)
def byte_alphabet() -> dict:
    """GPT-2's ``{byte: printable character}``: the others (space, control bytes) past 255."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
            *range(ord("®"), ord("ÿ") + 1)]
    shifted = iter(range(256, 512))
    return {b: chr(b) if b in keep else chr(next(shifted)) for b in range(256)}


def byte_symbols(word: str) -> str:
    """A word as one printable character per UTF-8 byte: ``é`` is two bytes, ``Ã©``."""
    table = byte_alphabet()
    return "".join(table[b] for b in word.encode("utf-8"))


def attention_cost(lengths) -> int:
    """Query-key pairs that self-attention scores over sentences of these lengths: sum L^2."""
    return sum(length * length for length in lengths)


def course_prose(path: Path = PROSE) -> list:
    """The course's own English prose, one paragraph per item (the snapshot in ``assets/``)."""
    return path.read_text(encoding="utf-8").splitlines()
