"""The offline corpus (grammar, splits), the vocabularies and the padded batches."""

import itertools
import random

import pytest
import torch

from helpers.data import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    SPECIAL_TOKENS,
    UNK_ID,
    Vocab,
    batches,
    encode_pairs,
    make_batch,
)
from helpers.translation import lookahead_split, make_corpus
from helpers.translation.lexicon import (
    ADJECTIVES,
    NOUNS,
    NounPhrase,
    Sentence,
    conjugate,
    fits,
    gender_comes_later,
    random_sentence,
    render,
)


@pytest.fixture(scope="module")
def corpus():
    return make_corpus()


# ---- the grammar -------------------------------------------------------------------------------

KNOWN = [
    (Sentence("I", "like", NounPhrase("car", "the", False, ("big", "red"))),
     "I like the big red car", "j'aime la grande voiture rouge"),
    (Sentence("she", "watch", NounPhrase("dog", "a", False, ("big",))),
     "she watches a big dog", "elle regarde un grand chien"),
    (Sentence("we", "eat", NounPhrase("apple", "a", True, ("good",))),
     "we eat some good apples", "nous mangeons de bonnes pommes"),
    (Sentence("you all", "listen to", NounPhrase("bird", "my", True, ("white",))),
     "you all listen to my white birds", "vous écoutez mes oiseaux blancs"),
    (Sentence(NounPhrase("box", "the", True, ("old", "heavy")), "be", "white"),
     "the heavy old boxes are white", "les vieilles boîtes lourdes sont blanches"),
    (Sentence(NounPhrase("girl", "this", True), "be", "happy"),
     "these girls are happy", "ces filles sont heureuses"),
    (Sentence("I", "have", NounPhrase("apple", "a", False, ("red",))),
     "I have a red apple", "j'ai une pomme rouge"),
    (Sentence("you", "have", NounPhrase("horse", "a", True, ("beautiful",))),
     "you have some beautiful horses", "tu as de beaux chevaux"),
    (Sentence(NounPhrase("wolf", "the", True, ("grey",)), "look for",
              NounPhrase("knife", "a", True)),
     "the grey wolves look for some knives", "les loups gris cherchent des couteaux"),
    (Sentence(NounPhrase("cow", "a", False, ("old",)), "push", NounPhrase("truck", "this")),
     "an old cow pushes this truck", "une vieille vache pousse ce camion"),
    (Sentence("they", "share", NounPhrase("pie", "my", False, ("new", "yellow"))),
     "they share my new yellow pie", "ils partagent ma nouvelle tarte jaune"),
    (Sentence("he", "be", "sad"), "he is sad", "il est triste"),
]


@pytest.mark.parametrize("sentence, english, french", KNOWN)
def test_known_sentences(sentence, english, french):
    assert render(sentence) == (english, french)


NEGATED = [  # ne ... pas around the verb, n' before a vowel, "a"/"some" -> "de"
    (Sentence("I", "like", NounPhrase("car", "a", True, ("big", "red")), True),
     "I do not like any big red cars", "je n'aime pas de grandes voitures rouges"),
    (Sentence("he", "have", NounPhrase("car", "a"), True),
     "he does not have a car", "il n'a pas de voiture"),
    (Sentence("I", "watch", NounPhrase("dog", "a", False, ("old",)), True),
     "I do not watch an old dog", "je ne regarde pas de vieux chien"),
    (Sentence("she", "carry", NounPhrase("door", "a", False, ("old", "dirty")), True),
     "she does not carry a dirty old door", "elle ne porte pas de vieille porte sale"),
    (Sentence("you all", "listen to", NounPhrase("song", "my"), True),
     "you all do not listen to my song", "vous n'écoutez pas ma chanson"),
    (Sentence("we", "eat", NounPhrase("cake", "the", True), True),
     "we do not eat the cakes", "nous ne mangeons pas les gâteaux"),
    (Sentence(NounPhrase("dog", "the", True), "be", "happy", True),
     "the dogs are not happy", "les chiens ne sont pas heureux"),
    (Sentence("she", "be", "sad", True), "she is not sad", "elle n'est pas triste"),
]


@pytest.mark.parametrize("sentence, english, french", NEGATED)
def test_negated_sentences(sentence, english, french):
    assert render(sentence) == (english, french)


def test_gender_comes_later_only_after_a_negation_with_de_and_an_adjective_before_the_noun():
    later = [s for s, _, _ in NEGATED if gender_comes_later(s)]
    assert [render(s)[1] for s in later] == ["je n'aime pas de grandes voitures rouges",
                                             "je ne regarde pas de vieux chien",
                                             "elle ne porte pas de vieille porte sale"]
    affirmative = Sentence("I", "watch", NounPhrase("dog", "a", False, ("old",)))
    assert not gender_comes_later(affirmative)  # "un vieux chien": the article shows the gender


def test_negation_off_draws_the_same_random_numbers_as_before():
    """negation=0 must leave the course's corpus (and the shipped model's data) unchanged."""
    a, b = random.Random(5), random.Random(5)
    plain = [random_sentence(a) for _ in range(300)]
    assert [random_sentence(b, 0.0) for _ in range(300)] == plain
    assert not any(s.negated for s in plain)
    some = [random_sentence(random.Random(i), 0.5).negated for i in range(300)]
    assert 100 < sum(some) < 200


def test_a_corpus_with_negations(corpus):
    negated = make_corpus(num_train=3000, num_valid=50, num_test=100, negation=0.1)
    share = sum(" not " in en for en, _ in negated.train) / len(negated.train)
    assert 0.07 < share < 0.13
    for en, fr in negated.train:
        assert (" not " in en) == (" pas " in fr), (en, fr)
    assert not any(" not " in en for en, _ in corpus.train + corpus.valid + corpus.test)
    assert {"not", "does", "any"} <= set(negated.src_vocab.ids)
    assert {"pas", "ne", "n'aime"} <= set(negated.tgt_vocab.ids)


def test_lookahead_split():
    small = make_corpus(num_train=2000, num_valid=20, num_test=20, negation=0.1)
    split = lookahead_split(small, size=50, seed=2)
    assert len(set(split)) == 50 and not set(split) & set(small.train)
    before_noun = {form for a in ADJECTIVES if a.before_noun for form in a.forms}
    for en, fr in split:
        assert " not " in en and fr.partition(" pas de ")[2].split(" ")[0] in before_noun, fr
    assert lookahead_split(small, size=50, seed=2) == split


def test_conjugation_of_regular_er_verbs():
    forms = [conjugate("regarder", person) for person in range(6)]
    assert forms == ["regarde", "regardes", "regarde", "regardons", "regardez", "regardent"]
    assert conjugate("manger", 3) == "mangeons" and conjugate("manger", 4) == "mangez"
    with pytest.raises(ValueError, match="-er verb"):
        conjugate("avoir", 0)


def test_every_adjective_has_four_distinct_or_shared_forms_that_agree():
    agreed = {a.english: a.forms for a in ADJECTIVES}
    assert agreed["white"] == ("blanc", "blanche", "blancs", "blanches")
    assert agreed["red"] == ("rouge", "rouge", "rouges", "rouges")
    assert agreed["grey"] == ("gris", "grise", "gris", "grises")
    assert agreed["old"] == ("vieux", "vieille", "vieux", "vieilles")
    assert all(len(forms) == 4 for forms in agreed.values())


@pytest.mark.parametrize("sentence, message", [
    (Sentence("I", "like", NounPhrase("car", "the", False, ("red", "blue"))), "at most one"),
    (Sentence("I", "be", "happy"), "third-person"),
    (Sentence("he", "like", "red"), "NounPhrase"),
    (Sentence("he", "like", NounPhrase("spaceship")), "unknown noun 'spaceship'; expected"),
    (Sentence("he", "fly", NounPhrase("car")), "unknown verb 'fly'"),
    (Sentence("it", "like", NounPhrase("car")), "unknown subject pronoun 'it'"),
    (Sentence("he", "like", NounPhrase("car", "an")), "unknown determiner 'an'"),
])
def test_bad_sentence_specs_give_clear_errors(sentence, message):
    with pytest.raises(ValueError, match=message):
        render(sentence)


# ---- the splits --------------------------------------------------------------------------------

_NOUN_FORMS = {form: n.english for n in NOUNS for form in (n.english, n.english_plural)}
_ADJECTIVE_WORDS = {a.english for a in ADJECTIVES}


def english_pairs(sentence: str) -> set:
    """(noun, adjective) pairs read back from an English sentence, independently of the
    generator: adjectives right before a noun, and "is/are ADJ" with the first noun."""
    words, pairs, nouns = sentence.split(), set(), []
    for i, word in enumerate(words):
        if word in _NOUN_FORMS:
            nouns.append(_NOUN_FORMS[word])
            for before in words[max(0, i - 2):i]:
                if before in _ADJECTIVE_WORDS:
                    pairs.add((_NOUN_FORMS[word], before))
    if len(words) >= 2 and words[-2] in ("is", "are") and nouns:
        pairs.add((nouns[0], words[-1]))
    return pairs


def test_splits_are_disjoint_and_sized(corpus):
    train, valid, test = (set(split) for split in (corpus.train, corpus.valid, corpus.test))
    assert (len(train), len(valid), len(test)) == (20000, 500, 1000)  # no duplicates either
    assert not train & valid and not train & test and not valid & test
    english = [{en for en, _ in split} for split in (corpus.train, corpus.valid, corpus.test)]
    assert not english[0] & english[2] and not english[1] & english[2]


def test_test_split_holds_only_unseen_combinations(corpus):
    held_out = set(corpus.held_out_pairs)
    assert len(held_out) == 2 * len(NOUNS)
    seen = set().union(*(english_pairs(en) for en, _ in corpus.train + corpus.valid))
    assert not seen & held_out
    assert all(english_pairs(en) & held_out for en, _ in corpus.test)
    possible = {(n.english, a.english) for n in NOUNS for a in ADJECTIVES if fits(a, n.animate)}
    assert seen == possible - held_out  # every other combination is seen in training


def test_every_test_word_appears_in_training(corpus):
    for side, vocab in ((0, corpus.src_vocab), (1, corpus.tgt_vocab)):
        for pair in corpus.valid + corpus.test:
            assert UNK_ID not in vocab.encode(pair[side]), pair


def test_sentences_are_short(corpus):
    lengths = [len(s.split()) for pair in corpus.train + corpus.test for s in pair]
    assert min(lengths) >= 3 and max(lengths) <= 10


def test_corpus_is_deterministic_from_its_seed():
    a, b = make_corpus(seed=1, num_train=50), make_corpus(seed=1, num_train=50)
    c = make_corpus(seed=2, num_train=50)
    assert a.train == b.train and a.test == b.test and a.held_out_pairs == b.held_out_pairs
    assert a.src_vocab.tokens == b.src_vocab.tokens
    assert a.train != c.train


def test_vocabulary_sizes(corpus):
    assert 150 <= len(corpus.src_vocab) <= 300 and 250 <= len(corpus.tgt_vocab) <= 400
    assert "mangeons" in corpus.tgt_vocab.ids and "heureuses" in corpus.tgt_vocab.ids


# ---- the vocabulary ----------------------------------------------------------------------------


def test_special_tokens_have_fixed_ids(corpus):
    for vocab in (corpus.src_vocab, corpus.tgt_vocab):
        assert vocab.tokens[:4] == list(SPECIAL_TOKENS)
        assert [vocab.ids[t] for t in SPECIAL_TOKENS] == [PAD_ID, BOS_ID, EOS_ID, UNK_ID]
        assert (PAD_ID, BOS_ID, EOS_ID, UNK_ID) == (0, 1, 2, 3)


def test_encode_decode_round_trip(corpus):
    for en, fr in corpus.test:
        assert corpus.src_vocab.decode(corpus.src_vocab.encode(en)) == en
        assert corpus.tgt_vocab.decode(corpus.tgt_vocab.encode(fr)) == fr


def test_decode_skips_bos_and_pad_and_stops_at_eos():
    vocab = Vocab.build(["le chien", "la voiture"])
    ids = [BOS_ID, vocab.ids["le"], PAD_ID, vocab.ids["chien"], EOS_ID, vocab.ids["la"]]
    assert vocab.decode(ids) == "le chien"
    assert vocab.decode(torch.tensor(ids)) == "le chien"
    assert vocab.encode("le chat") == [vocab.ids["le"], UNK_ID]


@pytest.mark.parametrize("bad, kind, message", [
    ([4, 99], ValueError, r"token id 99 is not in the vocabulary: its ids are 0\.\.5"),
    ([-1], ValueError, r"token id -1 is not in the vocabulary: its ids are 0\.\.5"),
    ([2.0], TypeError, r"token ids must be whole numbers \(int\), got 2\.0 \(float\)"),
])
def test_bad_token_id_is_a_clear_error(bad, kind, message):
    vocab = Vocab.build(["le chien"])  # ids 0..5
    with pytest.raises(kind, match=message):
        vocab.decode(bad)


@pytest.mark.parametrize("empty", ["", "   ", None])
def test_empty_sentence_is_a_clear_error(empty):
    with pytest.raises(ValueError, match="expected a non-empty sentence"):
        Vocab.build(["le chien"]).encode(empty)


def test_vocab_rejects_a_token_list_without_the_specials():
    with pytest.raises(ValueError, match="starting with"):
        Vocab(["le", "chien"])


# ---- batches -----------------------------------------------------------------------------------


def test_batch_shift_right_labels_and_masks():
    batch = make_batch([[5, 6, 7], [8]], [[10, 11], [12, 13, 14]])
    assert batch.src.tolist() == [[5, 6, 7], [8, PAD_ID, PAD_ID]]
    assert batch.tgt_in.tolist() == [[BOS_ID, 10, 11, PAD_ID], [BOS_ID, 12, 13, 14]]
    assert batch.tgt_out.tolist() == [[10, 11, EOS_ID, PAD_ID], [12, 13, 14, EOS_ID]]
    assert batch.src_mask.shape == (2, 1, 1, 3) and batch.src_mask.dtype == torch.bool
    assert batch.src_mask[:, 0, 0].tolist() == [[True, True, True], [True, False, False]]
    assert batch.tgt_mask.shape == (2, 1, 4, 4) and batch.tgt_mask.dtype == torch.bool
    assert batch.tgt_mask[1, 0].tolist() == torch.ones(4, 4).tril().bool().tolist()
    assert batch.tgt_mask[0, 0, 3].tolist() == [True, True, True, False]  # padded key hidden
    assert len(batch) == 2 and batch.to("cpu").tgt_out.equal(batch.tgt_out)


def test_decoder_input_is_never_the_labels():
    """T1: the decoder reads the target shifted right, so it cannot copy the answer."""
    batch = make_batch([[5]], [[10, 11, 12]])
    assert not torch.equal(batch.tgt_in, batch.tgt_out)
    assert torch.equal(batch.tgt_in[:, 1:], batch.tgt_out[:, :-1])


def test_make_batch_errors():
    with pytest.raises(ValueError, match="as many targets as sources"):
        make_batch([[5]], [[6], [7]])
    with pytest.raises(ValueError, match="non-empty"):
        make_batch([[]], [[6]])


def test_batches_cover_an_epoch_and_repeat(corpus):
    encoded = encode_pairs(corpus.valid[:10], corpus.src_vocab, corpus.tgt_vocab)
    epoch = list(batches(encoded, batch_size=4, seed=0))
    assert [len(b) for b in epoch] == [4, 4, 2]
    rows = {tuple(r[r != PAD_ID].tolist()) for b in epoch for r in b.src}
    assert rows == {tuple(s) for s, _ in encoded}
    endless = list(itertools.islice(batches(encoded, 4, seed=0, repeat=True), 7))
    assert len(endless) == 7
    again = list(batches(encoded, batch_size=4, seed=0))
    assert all(torch.equal(a.src, b.src) for a, b in zip(epoch, again, strict=True))
    with pytest.raises(ValueError, match="batch_size"):
        next(batches(encoded, 0))


@pytest.mark.parametrize("repeat", [True, False])
def test_no_pairs_raise_at_once(repeat):
    """``repeat=True`` over an empty list would spin forever without yielding; one pass over
    nothing would train on nothing without a word."""
    with pytest.raises(ValueError, match=r"no sentence pairs to batch, got \[\] "
                                         r"\(batch_size=4\)"):
        next(batches([], 4, repeat=repeat))
