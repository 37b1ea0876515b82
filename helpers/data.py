"""Vocabularies and padded batches of sentence pairs, for any corpus. Taught in notebook 09."""

import random
from collections import Counter
from dataclasses import dataclass

import torch

from .checks import check_sizes
from .masks import causal_mask, padding_mask

PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
SPECIAL_TOKENS = ("<pad>", "<bos>", "<eos>", "<unk>")


def split_words(sentence: str) -> list:
    """Word-level tokens: the corpus has no punctuation, so splitting on spaces is enough."""
    if not isinstance(sentence, str) or not sentence.split():
        raise ValueError(f"expected a non-empty sentence (a string with words), got {sentence!r}")
    return sentence.split()


class Vocab:
    """Word <-> id table. Ids 0..3 are always ``<pad>``, ``<bos>``, ``<eos>``, ``<unk>``."""

    def __init__(self, tokens: list):
        tokens = list(tokens)
        if tuple(tokens[:4]) != SPECIAL_TOKENS or len(set(tokens)) != len(tokens):
            raise ValueError("a vocabulary is a list of distinct tokens starting with "
                             f"{SPECIAL_TOKENS}, got {tokens[:6]}...")
        self.tokens = tokens
        self.ids = {token: i for i, token in enumerate(tokens)}
        self._by_lower = {}  # lowercase -> the vocabulary's spelling, for normalize()
        for token in tokens[len(SPECIAL_TOKENS):]:
            self._by_lower.setdefault(token.lower(), token)

    @classmethod
    def build(cls, sentences) -> "Vocab":
        """Specials first, then every word of ``sentences``, most frequent first (ties: A-Z)."""
        counts = Counter(word for sentence in sentences for word in split_words(sentence))
        words = sorted(counts, key=lambda word: (-counts[word], word))
        return cls([*SPECIAL_TOKENS, *words])

    def __len__(self) -> int:
        return len(self.tokens)

    def __repr__(self):
        return f"Vocab({len(self)} tokens: {' '.join(self.tokens[:8])} ...)"

    def encode(self, sentence: str) -> list:
        """Word ids of a sentence, without BOS or EOS; unknown words become ``UNK_ID``."""
        return [self.ids.get(word, UNK_ID) for word in split_words(sentence)]

    def normalize(self, sentence: str) -> str:
        """``sentence`` as the corpus writes it: no final ``.!?``, each word in the vocabulary's
        case ("The cat eats a cake." -> "the cat eats a cake", "i" -> "I")."""
        if not isinstance(sentence, str):
            raise ValueError(f"expected a sentence (a string), got {sentence!r}")
        words = sentence.strip().rstrip(".!?").split()
        return " ".join(w if w in self.ids else self._by_lower.get(w.lower(), w) for w in words)

    def unknown_words(self, sentence: str) -> list:
        """The words of ``sentence`` that the vocabulary lacks (they would become ``<unk>``)."""
        return [word for word in split_words(sentence) if word not in self.ids]

    def decode(self, ids) -> str:
        """Ids (a list or a 1-D tensor) -> a sentence. Skips BOS and PAD, stops at EOS."""
        ids = ids.tolist() if hasattr(ids, "tolist") else list(ids)  # a tensor or NumPy array
        words = []
        for i in ids:
            if isinstance(i, bool) or not hasattr(i, "__index__"):  # an int or a NumPy integer
                raise TypeError(f"token ids must be whole numbers (int), got {i!r} "
                                f"({type(i).__name__}) in {ids!r}")
            i = int(i)
            if not 0 <= i < len(self):
                raise ValueError(f"token id {i} is not in the vocabulary: its ids are "
                                 f"0..{len(self) - 1}")
            if i == EOS_ID:
                break
            if i not in (PAD_ID, BOS_ID):
                words.append(self.tokens[i])
        return " ".join(words)


@dataclass
class Batch:
    """A padded batch for teacher forcing (notebook 07's shift right)."""

    src: torch.Tensor       # (B, S) source ids, padded with PAD_ID
    tgt_in: torch.Tensor    # (B, T) decoder input: BOS + target (shifted right)
    tgt_out: torch.Tensor   # (B, T) labels: target + EOS, PAD_ID where there is no token
    src_mask: torch.Tensor  # (B, 1, 1, S) True on real source tokens
    tgt_mask: torch.Tensor  # (B, 1, T, T) causal and padding, True = may attend

    def to(self, device) -> "Batch":
        return Batch(*(t.to(device) for t in (self.src, self.tgt_in, self.tgt_out,
                                              self.src_mask, self.tgt_mask)))

    def __len__(self) -> int:
        return self.src.shape[0]


def pad(sequences: list) -> torch.Tensor:
    """Lists of ids -> one ``(B, L)`` tensor, padded on the right with ``PAD_ID``."""
    if not sequences or not all(len(s) for s in sequences):
        raise ValueError(f"expected a non-empty list of non-empty id lists, got {sequences!r}")
    length = max(map(len, sequences))
    # One call on the padded lists: about eight times faster than filling the tensor row by row
    return torch.tensor([[*ids, *[PAD_ID] * (length - len(ids))] for ids in sequences],
                        dtype=torch.long)  # (B, L)


def make_batch(src_ids: list, tgt_ids: list) -> Batch:
    """Source and target id lists (no BOS/EOS) -> a :class:`Batch` with its masks."""
    if len(src_ids) != len(tgt_ids):
        raise ValueError(f"expected as many targets as sources, got {len(src_ids)} "
                         f"sources and {len(tgt_ids)} targets")
    src = pad(src_ids)  # (B, S)
    tgt_in = pad([[BOS_ID, *ids] for ids in tgt_ids])  # (B, T)
    tgt_out = pad([[*ids, EOS_ID] for ids in tgt_ids])  # (B, T): tgt_in moved one step left
    T = tgt_in.shape[1]
    # (T, T) & (B, 1, 1, T) -> (B, 1, T, T): no future tokens, no padded ones
    tgt_mask = causal_mask(T) & padding_mask(tgt_in, PAD_ID)
    return Batch(src, tgt_in, tgt_out, padding_mask(src, PAD_ID), tgt_mask)


def encode_pairs(pairs: list, src_vocab: Vocab, tgt_vocab: Vocab) -> list:
    """``(english, french)`` strings -> ``(source ids, target ids)`` lists."""
    return [(src_vocab.encode(en), tgt_vocab.encode(fr)) for en, fr in pairs]


def batches(encoded: list, batch_size: int, shuffle: bool = True, seed: int = 0,
            repeat: bool = False):
    """Batches of ``encoded`` pairs, reshuffled with ``shuffle``, endless with ``repeat``."""
    check_sizes("batches", batch_size=batch_size)
    if not encoded:  # nothing to train on (and with repeat, a loop that would never yield)
        raise ValueError(f"batches: no sentence pairs to batch, got {encoded!r} "
                         f"(batch_size={batch_size})")
    rng = random.Random(seed)
    order = list(range(len(encoded)))
    while True:
        if shuffle:
            rng.shuffle(order)
        for start in range(0, len(order), batch_size):
            chosen = [encoded[i] for i in order[start:start + batch_size]]
            yield make_batch([s for s, _ in chosen], [t for _, t in chosen])
        if not repeat:
            return


def shuffled_chunks(items: list, size: int, seed: int = 0):
    """Endless lists of ``size`` of ``items``, reshuffled every epoch (seeded); full ones only."""
    rng, order = random.Random(seed), list(range(len(items)))
    while True:
        rng.shuffle(order)
        for start in range(0, len(order) - size + 1, size):
            yield [items[i] for i in order[start:start + size]]
