"""The words and the grammar of the course's English -> French corpus (notebook 09): word order
("the big red car" -> "la grande voiture rouge"), agreement in gender and number, conjugation,
and smaller rules (j'aime, "de grands chiens"). Each sentence has one correct translation:
"you" is "tu", "you all" is "vous", "they" is "ils"."""

import random
from dataclasses import dataclass, replace

# The longest English sentence: subject and object of 4 words ("the big red car"), "listen to"
LONGEST_SENTENCE = 10


@dataclass(frozen=True)
class Noun:
    english: str         # singular, e.g. "horse"
    english_plural: str  # "horses"
    french: str          # "cheval"
    french_plural: str   # "chevaux"
    gender: str          # "m" or "f": decides the article and the adjective forms
    animate: bool        # animate nouns may be subjects ("the horse watches ...")


def _noun(english, french, gender, animate=False, english_plural=None, french_plural=None):
    return Noun(english, english_plural or english + "s", french, french_plural or french + "s",
                gender, animate)


NOUNS = [
    _noun("dog", "chien", "m", True), _noun("cat", "chat", "m", True),
    _noun("boy", "garçon", "m", True), _noun("horse", "cheval", "m", True, None, "chevaux"),
    _noun("bird", "oiseau", "m", True, None, "oiseaux"), _noun("rabbit", "lapin", "m", True),
    _noun("wolf", "loup", "m", True, "wolves"), _noun("king", "roi", "m", True),
    _noun("monkey", "singe", "m", True), _noun("tiger", "tigre", "m", True),
    _noun("duck", "canard", "m", True),
    _noun("girl", "fille", "f", True), _noun("woman", "femme", "f", True, "women"),
    _noun("cow", "vache", "f", True), _noun("hen", "poule", "f", True),
    _noun("queen", "reine", "f", True), _noun("mouse", "souris", "f", True, "mice", "souris"),
    _noun("turtle", "tortue", "f", True), _noun("frog", "grenouille", "f", True),
    _noun("goat", "chèvre", "f", True), _noun("mother", "mère", "f", True),
    _noun("book", "livre", "m"), _noun("cake", "gâteau", "m", False, None, "gâteaux"),
    _noun("boat", "bateau", "m", False, None, "bateaux"), _noun("bike", "vélo", "m"),
    _noun("truck", "camion", "m"), _noun("pen", "stylo", "m"), _noun("bag", "sac", "m"),
    _noun("hat", "chapeau", "m", False, None, "chapeaux"),
    _noun("coat", "manteau", "m", False, None, "manteaux"), _noun("ball", "ballon", "m"),
    _noun("knife", "couteau", "m", False, "knives", "couteaux"), _noun("pencil", "crayon", "m"),
    _noun("basket", "panier", "m"), _noun("piano", "piano", "m"),
    _noun("newspaper", "journal", "m", False, None, "journaux"), _noun("cheese", "fromage", "m"),
    _noun("car", "voiture", "f"), _noun("house", "maison", "f"), _noun("table", "table", "f"),
    _noun("chair", "chaise", "f"), _noun("apple", "pomme", "f"), _noun("flower", "fleur", "f"),
    _noun("letter", "lettre", "f"), _noun("dress", "robe", "f", False, "dresses"),
    _noun("cup", "tasse", "f"), _noun("lamp", "lampe", "f"), _noun("door", "porte", "f"),
    _noun("window", "fenêtre", "f"), _noun("shirt", "chemise", "f"), _noun("key", "clé", "f"),
    _noun("box", "boîte", "f", False, "boxes"), _noun("song", "chanson", "f"),
    _noun("bottle", "bouteille", "f"), _noun("map", "carte", "f"),
    _noun("banana", "banane", "f"), _noun("pie", "tarte", "f"),
]
FOODS = ("apple", "cake", "cheese", "banana", "pie")  # the only things one may "eat"


@dataclass(frozen=True)
class Adjective:
    english: str
    forms: tuple  # French (masculine singular, feminine singular, masculine plural, fem. plural)
    before_noun: bool  # French position: "un grand chien" (True), "un chien rouge" (False)
    rank: int  # English order: opinion 1, size 2, quality 3, age 4, colour 5 ("big old red")
    describes: str = "any"  # "animate", "thing" or "any": keeps random sentences sensible


def _adjective(english, masculine, before_noun, rank, feminine=None, plurals=None,
               describes="any"):
    """Regular forms are derived: + "e" for the feminine (unless it ends in "e"), + "s" for
    the plural (unless it ends in "s" or "x"); irregular ones are given."""
    feminine = feminine or (masculine if masculine.endswith("e") else masculine + "e")
    if plurals is None:
        plurals = tuple(w if w[-1] in "sx" else w + "s" for w in (masculine, feminine))
    return Adjective(english, (masculine, feminine, *plurals), before_noun, rank, describes)


ADJECTIVES = [
    # before the noun in French (beauty, age, goodness, size)
    _adjective("good", "bon", True, 1, "bonne"), _adjective("bad", "mauvais", True, 1),
    _adjective("beautiful", "beau", True, 1, "belle", ("beaux", "belles")),
    _adjective("big", "grand", True, 2), _adjective("small", "petit", True, 2),
    _adjective("young", "jeune", True, 4, describes="animate"),
    _adjective("old", "vieux", True, 4, "vieille", ("vieux", "vieilles")),
    _adjective("new", "nouveau", True, 4, "nouvelle", ("nouveaux", "nouvelles"), "thing"),
    # after the noun
    _adjective("happy", "heureux", False, 1, "heureuse", describes="animate"),
    _adjective("sad", "triste", False, 1, describes="animate"),
    _adjective("heavy", "lourd", False, 3), _adjective("clean", "propre", False, 3),
    _adjective("dirty", "sale", False, 3), _adjective("empty", "vide", False, 3, describes="thing"),
    _adjective("fast", "rapide", False, 3), _adjective("slow", "lent", False, 3),
    _adjective("strong", "fort", False, 3, describes="animate"),
    _adjective("red", "rouge", False, 5), _adjective("blue", "bleu", False, 5),
    _adjective("green", "vert", False, 5), _adjective("black", "noir", False, 5),
    _adjective("white", "blanc", False, 5, "blanche"), _adjective("yellow", "jaune", False, 5),
    _adjective("grey", "gris", False, 5),
]

# Verbs: English base form -> (he / she / it form, French infinitive of a regular -er verb)
VERBS = {"watch": ("watches", "regarder"), "look for": ("looks for", "chercher"),
         "find": ("finds", "trouver"), "carry": ("carries", "porter"),
         "wash": ("washes", "laver"), "pull": ("pulls", "tirer"),
         "push": ("pushes", "pousser"), "draw": ("draws", "dessiner"),
         "keep": ("keeps", "garder"), "hide": ("hides", "cacher"),
         "touch": ("touches", "toucher"), "prepare": ("prepares", "préparer"),
         "repair": ("repairs", "réparer"), "count": ("counts", "compter"),
         "like": ("likes", "aimer"), "love": ("loves", "adorer"),
         "listen to": ("listens to", "écouter"), "eat": ("eats", "manger"),
         "share": ("shares", "partager"), "tidy": ("tidies", "ranger"),
         "leave": ("leaves", "quitter"), "visit": ("visits", "visiter")}
# Subject pronouns: English -> (French, person index 0..5 = je, tu, il/elle, nous, vous, ils)
PRONOUNS = {"I": ("je", 0), "you": ("tu", 1), "he": ("il", 2), "she": ("elle", 2),
            "we": ("nous", 3), "you all": ("vous", 4), "they": ("ils", 5)}
AVOIR = ("ai", "as", "a", "avons", "avez", "ont")
ETRE = ("suis", "es", "est", "sommes", "êtes", "sont")
_ER_ENDINGS = ("e", "es", "e", "ons", "ez", "ent")
# Determiners: English key -> (English singular, English plural, French m., f., plural)
DETERMINERS = {"the": ("the", "the", "le", "la", "les"),
               "a": ("a", "some", "un", "une", "des"),
               "my": ("my", "my", "mon", "ma", "mes"),
               "this": ("this", "these", "ce", "cette", "ces")}

_NOUNS = {n.english: n for n in NOUNS}
_ADJECTIVES = {a.english: a for a in ADJECTIVES}
_VOWELS = "aeiouéèêâîôû"  # the lexicon has no word starting with h


def _lookup(table: dict, key: str, what: str):
    if key not in table:
        raise ValueError(f"unknown {what} {key!r}; expected one of {sorted(table)}")
    return table[key]


@dataclass(frozen=True)
class NounPhrase:
    noun: str                  # English singular noun, a key of NOUNS: "car"
    determiner: str = "the"    # "the", "a", "my" or "this" ("a" -> "some", "this" -> "these")
    plural: bool = False
    adjectives: tuple = ()     # English adjectives, at most one per French side of the noun


@dataclass(frozen=True)
class Sentence:
    subject: object    # a pronoun (a key of PRONOUNS) or a NounPhrase
    verb: str          # an English verb of VERBS, or "have", or "be"
    complement: object  # the object NounPhrase, or an adjective (a string) after "be"
    negated: bool = False  # "the dog does not eat the apple" -> "le chien ne mange pas la pomme"


def conjugate(infinitive: str, person: int) -> str:
    """Present tense of a regular -er verb; person 0..5 = je, tu, il/elle, nous, vous, ils."""
    if not infinitive.endswith("er"):
        raise ValueError(f"expected a regular -er verb, got {infinitive!r}")
    stem = infinitive[:-2]
    if stem.endswith("g") and person == 3:
        stem += "e"  # nous mangeons: keeps the soft g before o
    return stem + _ER_ENDINGS[person]


def _check_adjectives(phrase: NounPhrase):
    adjectives = [_lookup(_ADJECTIVES, a, "adjective") for a in phrase.adjectives]
    sides = [a.before_noun for a in adjectives]
    if len(adjectives) > 2 or len(set(sides)) != len(sides):
        raise ValueError("a noun phrase takes at most one adjective placed before the noun in "
                         f"French and one placed after it, got {phrase.adjectives}")
    return adjectives


def _english_phrase(phrase: NounPhrase, negated: bool = False) -> list:
    noun = _lookup(_NOUNS, phrase.noun, "noun")
    singular, plural = _lookup(DETERMINERS, phrase.determiner, "determiner")[:2]
    adjectives = sorted(_check_adjectives(phrase), key=lambda a: (a.rank, not a.before_noun))
    words = [a.english for a in adjectives]
    words.append(noun.english_plural if phrase.plural else noun.english)
    determiner = plural if phrase.plural else singular
    if negated and determiner == "some":
        determiner = "any"  # we do not have any cars
    if determiner == "a" and words[0][0] in "aeiou":
        determiner = "an"  # an apple, an old dog
    return [determiner, *words]


def _agree(adjective: Adjective, gender: str, plural: bool) -> str:
    return adjective.forms[(gender == "f") + 2 * plural]


def _french_phrase(phrase: NounPhrase, negated: bool = False) -> list:
    noun = _lookup(_NOUNS, phrase.noun, "noun")
    adjectives = _check_adjectives(phrase)
    before = [_agree(a, noun.gender, phrase.plural) for a in adjectives if a.before_noun]
    after = [_agree(a, noun.gender, phrase.plural) for a in adjectives if not a.before_noun]
    forms = _lookup(DETERMINERS, phrase.determiner, "determiner")[2:]
    determiner = forms[2] if phrase.plural else forms[noun.gender == "f"]
    if determiner == "des" and before or negated and determiner in ("un", "une", "des"):
        determiner = "de"  # de grands chiens; after a negation: je n'ai pas de voiture
    return [determiner, *before, noun.french_plural if phrase.plural else noun.french, *after]


def _verb_words(sentence: Sentence, person: int, gender: str, plural: bool):
    """(English verb words, French verb form, French and English complement words)."""
    third_singular, negated = person == 2, sentence.negated
    if sentence.verb == "be":
        if person not in (2, 5) or not isinstance(sentence.complement, str):
            raise ValueError("'be' takes a third-person subject (he, she, they or a noun phrase: "
                             "French agrees the adjective with its gender) and an adjective, got "
                             f"subject {sentence.subject!r} and complement {sentence.complement!r}")
        adjective = _lookup(_ADJECTIVES, sentence.complement, "adjective")
        english = ["is" if third_singular else "are"] + ["not"] * negated
        return english, ETRE[person], [_agree(adjective, gender, plural)], [adjective.english]
    if not isinstance(sentence.complement, NounPhrase):
        raise ValueError(f"the verb {sentence.verb!r} takes a NounPhrase as its object, got "
                         f"{sentence.complement!r}")
    if sentence.verb == "have":
        english, french = ["has" if third_singular else "have"], AVOIR[person]
    else:
        english_3s, infinitive = _lookup(VERBS, sentence.verb, "verb")
        english = (english_3s if third_singular else sentence.verb).split()
        french = conjugate(infinitive, person)
    if negated:  # do-support: "she does not have", "they do not listen to"
        english = ["does" if third_singular else "do", "not", sentence.verb.split()[0],
                   *english[1:]]
    phrase = sentence.complement
    return english, french, _french_phrase(phrase, negated), _english_phrase(phrase, negated)


def render(sentence: Sentence) -> tuple:
    """The ``(english, french)`` strings of a sentence spec, such as ``Sentence("I", "like",
    NounPhrase("car", adjectives=("big", "red")))``: "I like the big red car", "j'aime la grande
    voiture rouge"."""
    subject = sentence.subject
    if isinstance(subject, NounPhrase):
        gender, plural = _lookup(_NOUNS, subject.noun, "noun").gender, subject.plural
        subject_en, subject_fr = _english_phrase(subject), _french_phrase(subject)
        person = 5 if plural else 2
    else:
        french, person = _lookup(PRONOUNS, subject, "subject pronoun")
        subject_en, subject_fr = subject.split(), [french]
        gender, plural = "f" if subject == "she" else "m", person >= 3
    verb_en, verb, complement_fr, complement_en = _verb_words(sentence, person, gender, plural)
    vowel = verb[0] in _VOWELS
    if sentence.negated:  # ne ... pas around the verb; n'aime, n'ai: one word
        verb_fr = ["n'" + verb if vowel else "ne", *([] if vowel else [verb]), "pas"]
    elif subject_fr == ["je"] and vowel:
        subject_fr, verb_fr = [], ["j'" + verb]  # j'aime, j'ai: one word
    else:
        verb_fr = [verb]
    return (" ".join([*subject_en, *verb_en, *complement_en]),
            " ".join([*subject_fr, *verb_fr, *complement_fr]))


def gender_comes_later(sentence: Sentence) -> bool:
    """Whether the French object is "de" + adjective + noun after a negation ("pas de grand
    panier"): the decoder must choose "grand" or "grande" before it writes the noun."""
    phrase = sentence.complement
    return sentence.negated and isinstance(phrase, NounPhrase) and phrase.determiner == "a" \
        and any(_lookup(_ADJECTIVES, a, "adjective").before_noun for a in phrase.adjectives)


def noun_adjective_pairs(sentence: Sentence) -> list:
    """Every (noun, adjective) combination in the sentence, "the car is red" included."""
    pairs = [(part.noun, adjective) for part in (sentence.subject, sentence.complement)
             if isinstance(part, NounPhrase) for adjective in part.adjectives]
    if sentence.verb == "be" and isinstance(sentence.subject, NounPhrase):
        pairs.append((sentence.subject.noun, sentence.complement))
    return pairs


def fits(adjective: Adjective, animate: bool) -> bool:
    """Whether random sentences may use ``adjective`` for an animate noun or a thing (no "empty
    dog": the grammar itself would render one)."""
    return adjective.describes in ("any", "animate" if animate else "thing")


def _random_phrase(rng: random.Random, nouns: list) -> NounPhrase:
    noun = rng.choice(nouns)
    fitting = [a for a in ADJECTIVES if fits(a, _NOUNS[noun].animate)]
    before = [a.english for a in fitting if a.before_noun]
    after = [a.english for a in fitting if not a.before_noun]
    roll = rng.random()  # no adjective 30%, one before the noun 20%, one after 30%, both 20%
    adjectives = ()
    if 0.3 <= roll < 0.5 or roll >= 0.8:
        adjectives += (rng.choice(before),)
    if roll >= 0.5:
        adjectives += (rng.choice(after),)
    return NounPhrase(noun, rng.choice(list(DETERMINERS)), rng.random() < 0.4, adjectives)


def random_sentence(rng: random.Random, negation: float = 0.0) -> Sentence:
    """One random sentence spec: 70% subject-verb-object, 15% "have", 15% "be"; a share
    ``negation`` of them negated (with 0, the random numbers drawn are those of no negation)."""
    sentence = _random_affirmative(rng)
    if negation and rng.random() < negation:
        sentence = replace(sentence, negated=True)
    return sentence


def _random_affirmative(rng: random.Random) -> Sentence:
    animate = [n.english for n in NOUNS if n.animate]
    roll = rng.random()
    if roll < 0.15:  # "be" needs a third-person subject
        if rng.random() < 0.3:
            subject, is_animate = rng.choice(["he", "she", "they"]), True
        else:
            subject = _random_phrase(rng, [n.english for n in NOUNS])
            is_animate = _NOUNS[subject.noun].animate
        adjective = rng.choice([a for a in ADJECTIVES if fits(a, is_animate)])
        return Sentence(subject, "be", adjective.english)
    subject = rng.choice(list(PRONOUNS)) if rng.random() < 0.5 else _random_phrase(rng, animate)
    verb = "have" if roll < 0.3 else rng.choice(list(VERBS))
    objects = list(FOODS) if verb == "eat" else [n.english for n in NOUNS]
    return Sentence(subject, verb, _random_phrase(rng, objects))
