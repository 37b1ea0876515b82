"""The sweep (``python -m tests.tools --sweep``): every trained-model result that a notebook
asserts or quotes (:data:`METRICS`), retrained in fresh processes under the emulated CPUs
(``ATEN_CPU_CAPABILITY``, ``MKL_CBWR``), thread counts and seeds of :data:`RUNS`; its ranges go
to ``assets/sweep.json``, which ``tests/notebooks/test_claims.py`` checks the notebooks against."""

import json
import os
import statistics
import subprocess
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SWEEP_PATH = ROOT / "assets" / "sweep.json"

# The CPUs a learner may have (emulated), one and two torch threads, and seeds 1 and 2 beside the
# notebooks' seed 0. Each run takes about as long as notebooks 09 and 12 together.
RUNS = [
    {"switches": {}, "threads": 1, "seed": 0},  # the sweeping machine's own CPU (AVX-512 here)
    {"switches": {"ATEN_CPU_CAPABILITY": "avx2"}, "threads": 1, "seed": 0},
    {"switches": {"ATEN_CPU_CAPABILITY": "default"}, "threads": 1, "seed": 0},
    {"switches": {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"}, "threads": 2,
     "seed": 0},
    {"switches": {}, "threads": 1, "seed": 1},
    {"switches": {}, "threads": 1, "seed": 2},
]

# metric -> what it measures (the notebook cell that asserts or quotes it)
METRICS = {
    "09.test_exact_match": "notebook 09: % of the test split translated exactly (350 steps)",
    "09.test_bleu": "notebook 09: BLEU on the test split",
    "09.valid_exact_match": "notebook 09: % of the validation split translated exactly",
    "09.sample_correct": "notebook 09: of the five sample translations, how many are exact",
    "09.t1_loss_gap": "notebook 09, pitfall T1: loss with the shift minus loss without it",
    "12.gpt_exact_match": "notebook 12: the decoder-only model's test exact match (200 steps)",
    "12.ed_exact_match": "notebook 12: the encoder-decoder's test exact match (200 steps)",
    "12.attention_share": "notebook 12: block 2's attention on the English words",
    "12.black_rabbits_top2": "notebook 12: 1 if 'noirs' and 'noires' are the two likeliest words",
    "12.sampling_order": "notebook 12: 1 if exact match falls as the temperature rises (greedy, "
                         "0.5, 1, 1.5) and top-k 3 recovers over 5 points at 1.5",
    **{f"14.{kind}_exact_match": f"notebook 14: the {what} translator's exact match on the "
                                  "test split (sentences without names)"
       for kind, what in [("words", "word-level"), ("subwords", "subword"),
                          ("tied", "tied subword")]},
    **{f"14.{kind}_{test}_{score}": f"notebook 14: the {what} translator's {measure} on the "
                                    f"{sentences}"
       for kind, what in [("subwords", "subword"), ("tied", "tied subword")]
       for test, sentences in [("names", "sentences with unseen names (training syllables)"),
                               ("new", "sentences with unseen names made of new syllables")]
       for score, measure in [("copied", "% of names copied"), ("exact_match", "exact match")]},
}


def _notebook_09(seed: int) -> dict:
    """Notebook 09's training (350 steps of 128 pairs) and its scores; pitfall T1's two runs."""
    from helpers.data import PAD_ID, batches, encode_pairs
    from helpers.model import TransformerConfig, build_model
    from helpers.training import label_smoothed_nll, make_optimizer, train, translation_loss
    from helpers.translation import CORPUS_ARGS, make_corpus, train_translator
    from helpers.translation.evaluation import bleu, exact_match, translate
    from helpers.utils import set_seed

    corpus = make_corpus(**CORPUS_ARGS)
    src, tgt = corpus.src_vocab, corpus.tgt_vocab
    model, _ = train_translator(corpus, steps=350, batch_size=128, warmup=200, seed=seed,
                                progress=False)
    test = translate(model, [en for en, _ in corpus.test], src, tgt)
    valid = translate(model, [en for en, _ in corpus.valid], src, tgt)
    references = [fr for _, fr in corpus.test]
    samples = corpus.test[:5]
    sample_guesses = translate(model, [en for en, _ in samples], src, tgt)

    encoded = encode_pairs(corpus.train, src, tgt)
    loss_fn = partial(translation_loss, label_smoothing=0.1)

    def tiny_run(shift, steps=60):  # notebook 09's pitfall T1, as the notebook runs it
        set_seed(seed)
        tiny = build_model(TransformerConfig(32, 2, 1, 64, dropout=0.0), len(src), len(tgt))
        opt, sched = make_optimizer(tiny, 32, warmup=20)

        def leaky_loss(m, b):
            return label_smoothed_nll(m(b.src, b.tgt_out, b.src_mask, b.tgt_mask), b.tgt_out,
                                      0.1, PAD_ID)

        losses = train(tiny, batches(encoded, 64, seed=1, repeat=True),
                       loss_fn if shift else leaky_loss, opt, sched, max_steps=steps,
                       progress=False)
        return sum(losses[-10:]) / 10

    return {"09.test_exact_match": exact_match(test, references),
            "09.test_bleu": bleu(test, references),
            "09.valid_exact_match": exact_match(valid, [fr for _, fr in corpus.valid]),
            "09.sample_correct": sum(guess == fr for guess, (_, fr)
                                     in zip(sample_guesses, samples, strict=True)),
            "09.t1_loss_gap": tiny_run(True) - tiny_run(False)}


def _notebook_12(seed: int) -> dict:
    """Notebook 12's two models (200 steps of 64 pairs, no dropout) and the cells that read them."""
    import torch

    from helpers.continuation import continue_translations, prompt_ids, train_gpt
    from helpers.generation import generate
    from helpers.gpt import GPTConfig
    from helpers.model import TransformerConfig
    from helpers.translation import (
        CORPUS_ARGS,
        exact_match,
        make_corpus,
        train_translator,
        translate,
    )

    corpus = make_corpus(**CORPUS_ARGS)
    budget = dict(steps=200, batch_size=64, seed=seed, progress=False)
    gpt, vocab, _ = train_gpt(corpus, GPTConfig(dropout=0.0), **budget)
    encoder_decoder, _ = train_translator(corpus, replace(TransformerConfig.small(), dropout=0.0),
                                          **budget)
    english, french = [en for en, _ in corpus.test], [fr for _, fr in corpus.test]
    with warnings.catch_warnings():  # translate names the sentences cut at max_len
        warnings.simplefilter("ignore")
        ed = exact_match(translate(encoder_decoder, english, corpus.src_vocab,
                                   corpus.tgt_vocab), french)
    prompt = prompt_ids(["my blue baskets are dirty"], vocab)[0]
    sequence = prompt + generate(gpt, [prompt], 20)[0]
    sep = len(prompt) - 1
    so_far = prompt_ids(["these black rabbits love these birds"], vocab)[0] + [
        vocab.ids["ces"], vocab.ids["lapins"]]
    with torch.no_grad():
        gpt(torch.tensor([sequence]))
        share = gpt.blocks[1].self_attn.attention_weights[0].mean(dim=0)[sep:, 1:sep].sum(-1).mean()
        top2 = gpt(torch.tensor([so_far]))[0, -1].topk(2).indices.tolist()
    subset = corpus.test[:100]  # the sampling table: 5 samples of 100 sentences
    prompts = prompt_ids([en for en, _ in subset], vocab) * 5
    settings = [{}, {"temperature": 0.5}, {"temperature": 1.0}, {"temperature": 1.5},
                {"temperature": 1.5, "top_k": 3}]
    matches = [exact_match([vocab.decode(ids) for ids in generate(
        gpt, prompts, 20, generator=torch.Generator().manual_seed(0), **options)],
        [fr for _, fr in subset] * 5) for options in settings]
    ordered = matches[0] >= matches[1] > matches[2] > matches[3] and matches[4] > matches[3] + 5
    return {"12.gpt_exact_match": exact_match(continue_translations(gpt, english, vocab), french),
            "12.sampling_order": float(ordered),
            "12.ed_exact_match": ed,
            "12.attention_share": share.item(),
            "12.black_rabbits_top2": float({vocab.tokens[i] for i in top2} == {"noirs", "noires"})}


def _notebook_14(seed: int) -> dict:
    """Notebook 14's three translators and their scores on the three test sets."""
    from helpers.translation import CORPUS_ARGS, make_corpus, names

    named = names.name_corpus(make_corpus(**CORPUS_ARGS))
    vocabularies = names.named_vocabularies(named)
    metrics = {}
    for kind in names.NAMED_KINDS:
        model, _ = names.train_named(kind, named, vocabularies, seed=seed)
        scores = names.named_scores(model, *vocabularies[kind], named)
        metrics[f"14.{kind}_exact_match"] = scores["ordinary"][0]
        if kind != "words":
            for test, name in [("names", "names"), ("new_syllables", "new")]:
                metrics[f"14.{kind}_{name}_exact_match"], metrics[f"14.{kind}_{name}_copied"] = \
                    scores[test]
    return metrics


NOTEBOOKS = {"09": _notebook_09, "12": _notebook_12, "14": _notebook_14}


def run_one(threads: int, seed: int, notebooks=None) -> dict:
    """Every metric of this process, or those of ``notebooks`` only (keys of :data:`NOTEBOOKS`)."""
    import torch

    torch.set_num_threads(threads)
    return {name: value for notebook in notebooks or NOTEBOOKS
            for name, value in NOTEBOOKS[notebook](seed).items()}


def _start(run: dict) -> dict:
    """One run of :data:`RUNS` in a fresh process; its metrics and its time."""
    env = {k: v for k, v in os.environ.items() if k not in ("ATEN_CPU_CAPABILITY", "MKL_CBWR")}
    env.update(run["switches"], OMP_NUM_THREADS=str(run["threads"]), PYTHONHASHSEED="0",
               OMP_WAIT_POLICY="PASSIVE")  # two runs share the cores: no thread spins idle
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "tests.tools.sweep", "--one",
                           json.dumps(run)], cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"sweep run {run} failed:\n{done.stderr[-3000:]}")
    result = {**run, "metrics": json.loads(done.stdout.strip().splitlines()[-1]),
              "seconds": round(time.perf_counter() - start, 1)}
    print(json.dumps(result), flush=True)  # each run as it ends: a long sweep loses none
    return result


def summarise(results: list) -> dict:
    """``{metric: {"min", "median", "max", "seed_0_min", "seed_0_max", "description"}}`` over the
    runs' results; a yes/no claim about a notebook's model needs its own seed 0's range."""
    return {name: {"min": min(values), "median": statistics.median(values), "max": max(values),
                   "seed_0_min": min(seed_0), "seed_0_max": max(seed_0),
                   "description": METRICS[name]}
            for name in METRICS if all(name in r["metrics"] for r in results)
            for values in [[r["metrics"][name] for r in results]]
            for seed_0 in [[r["metrics"][name] for r in results if r["seed"] == 0]]}


def _without(runs: list, notebooks) -> list:
    """``runs`` of an earlier sweep without what they measured of ``notebooks``."""
    prefixes = tuple(f"{number}." for number in notebooks)
    kept = []
    for run in runs:
        if set(run.get("notebooks", ())) & set(notebooks):
            continue
        others = {name: value for name, value in run["metrics"].items()
                  if not name.startswith(prefixes)}
        if others:
            kept.append({**run, "metrics": others})
    return kept


def sweep(runs=RUNS, jobs: int = 2, path: Path = SWEEP_PATH, notebooks=None) -> dict:
    """Every run of ``runs`` (``jobs`` at a time), summarised and written to ``path``; with
    ``notebooks`` (such as ``["14"]``), only their metrics are redone in ``path``."""
    start = time.perf_counter()
    runs = [{**run, "notebooks": list(notebooks)} for run in runs] if notebooks else runs
    with ThreadPoolExecutor(jobs) as pool:
        results = list(pool.map(_start, runs))
    metrics = summarise(results)
    minutes = (time.perf_counter() - start) / 60
    if notebooks and path.exists():
        kept = json.loads(path.read_text())
        metrics = {name: row for name, row in {**kept["metrics"], **metrics}.items()
                   if name in METRICS}  # a metric no longer measured goes
        results = [*_without(kept["runs"], notebooks), *results]
        minutes += kept.get("minutes", 0)  # the time of the whole sweep, in parts
    summary = {"metrics": metrics, "runs": results, "minutes": round(minutes, 1),
               "machine": {"cpu_count": os.cpu_count(), "jobs": jobs}}
    path.write_text(json.dumps(summary, indent=1) + "\n")
    return summary


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:
        run = json.loads(sys.argv[2])
        print(json.dumps(run_one(run["threads"], run["seed"], run.get("notebooks"))))
