"""The course's benchmark: ratios measured side by side in one run, on the current machine.

    python -m tests.tools.bench                   # everything (the notebooks take minutes)
    python -m tests.tools.bench --skip-notebooks  # only the model measurements (about a minute)
    python -m tests.tools.bench --notebooks       # only the notebook table (--notebooks 09 14)

Each comparison times its two sides in turn (:class:`Ratio`) and prints the median ratio with its
spread: compare ratios, not absolute numbers, between machines. A script, not a test: shared
machines are too noisy for timed tests.
"""

import argparse
import json
import resource
import statistics
import time
from pathlib import Path

import torch
from torch import nn

from helpers.data import BOS_ID, EOS_ID, PAD_ID, batches, encode_pairs
from helpers.decoding import beam_search, greedy_decode
from helpers.interop import to_torch, torch_attn_mask, torch_key_padding_mask
from helpers.model import TransformerConfig, build_model
from helpers.training import label_smoothed_nll
from helpers.translation import CORPUS_ARGS, load_translator, make_corpus
from helpers.utils import get_device, set_seed

ROOT = Path(__file__).resolve().parents[2]
# Seconds that "run all" of a notebook may take on one core (09 trains live, 13 starts processes)
NOTEBOOK_LIMITS = {"09": 90, "13": 90}
DEFAULT_NOTEBOOK_LIMIT = 60


def notebook_limit(name: str) -> int:
    """The limit in seconds of notebook ``name`` (``"09_training.ipynb"``, or its number)."""
    return NOTEBOOK_LIMITS.get(name[:2], DEFAULT_NOTEBOOK_LIMIT)


def _seconds(fn) -> float:
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - start


class Ratio:
    """Two sides timed in turn: the median of each, and the median and spread of ``a / b``."""

    def __init__(self, a, b, repeats: int = 10, warmup: int = 2):
        for _ in range(warmup):
            a(), b()
        self.a_times, self.b_times = [], []
        for i in range(repeats):  # a first, then b first: neither always runs on a warm cache
            if i % 2:
                self.b_times.append(_seconds(b))
                self.a_times.append(_seconds(a))
            else:
                self.a_times.append(_seconds(a))
                self.b_times.append(_seconds(b))
        self.a = statistics.median(self.a_times)
        self.b = statistics.median(self.b_times)
        ratios = sorted(x / y for x, y in zip(self.a_times, self.b_times, strict=True))
        self.ratio, self.low, self.high = statistics.median(ratios), ratios[0], ratios[-1]

    def __str__(self):
        return (f"{self.ratio:.2f} (median of {len(self.a_times)} paired runs; "
                f"spread {self.low:.2f} to {self.high:.2f})")


class TorchCore(nn.Module):
    """Our embeddings, positions and projection around PyTorch's encoder and decoder stacks."""

    def __init__(self, model):
        super().__init__()
        self.ours = model
        self.encoder = to_torch(model.encoder)
        self.decoder = to_torch(model.decoder)
        self.num_heads = model.encoder.layers[0].self_attn.num_heads

    def forward(self, src, tgt, src_mask, tgt_mask):
        ours = self.ours
        src_pad = torch_key_padding_mask(src_mask)  # (B, S), True = pad
        memory = self.encoder(ours.embed(ours.src_embed, src, "src"), src_key_padding_mask=src_pad)
        x = ours.embed(ours.tgt_embed, tgt, "tgt")
        attn_mask = torch_attn_mask(tgt_mask, tgt.shape[0], self.num_heads)  # (B*h, T, T)
        x = self.decoder(x, memory, tgt_mask=attn_mask, memory_key_padding_mask=src_pad)
        return ours.generator(x)


def training_step_fn(model, batch):
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)

    def step():
        logits = model(batch.src, batch.tgt_in, batch.src_mask, batch.tgt_mask)
        loss = label_smoothed_nll(logits, batch.tgt_out, 0.1, ignore_index=PAD_ID)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return step


def bench_training(corpus, config, device, batch_size=128) -> float:
    """Item 1: our training step vs ``to_torch``'s; returns our step's peak memory (MiB)."""
    encoded = encode_pairs(corpus.train, corpus.src_vocab, corpus.tgt_vocab)
    batch = next(iter(batches(encoded, batch_size, seed=0))).to(device)
    set_seed(0)
    ours = build_model(config, len(corpus.src_vocab), len(corpus.tgt_vocab)).to(device).train()
    theirs = TorchCore(build_model(config, len(corpus.src_vocab), len(corpus.tgt_vocab))
                       ).to(device).train()
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    step_ours = training_step_fn(ours, batch)
    step_ours()
    peak = (torch.cuda.max_memory_allocated() / 2**20 if device.type == "cuda"
            else (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024)
    step = Ratio(step_ours, training_step_fn(theirs, batch), repeats=15)
    print(f"\n1. training step (batch {batch_size}, {config.num_layers}+{config.num_layers} layers,"
          f" d_model {config.d_model})")
    print(f"   ours {step.a * 1e3:8.1f} ms   to_torch {step.b * 1e3:8.1f} ms   "
          f"ratio ours / torch = {step}  (target <= 1.05)")
    return peak


def bench_cache(model, corpus, device, batch_size=64):
    """Item 2: greedy decoding with vs without the KV cache, on a batch of sentences."""
    encoded = encode_pairs(corpus.test[:batch_size], corpus.src_vocab, corpus.tgt_vocab)
    batch = next(iter(batches(encoded, batch_size, shuffle=False))).to(device)
    print("\n2. greedy decoding, KV cache vs recomputation "
          f"(a batch of {batch_size} test sentences)")

    def run(n, cached):  # eos_id=-1 is never produced, so every one of the n steps runs
        return greedy_decode(model, batch.src, n, BOS_ID, -1, batch.src_mask, use_cache=cached)

    for n in (16, 32, 64):
        cache = Ratio(lambda n=n: run(n, False), lambda n=n: run(n, True), 7, 1)
        print(f"   {n:3d} tokens: cache {cache.b * 1e3:7.1f} ms   no cache "
              f"{cache.a * 1e3:7.1f} ms   speed-up {cache}"
              + ("  (target >= 8)" if n == 64 else ""))


def bench_beam(model, corpus, device, width=4, max_len=30):
    """Item 3: beam search vs greedy decoding, sentence by sentence."""
    sources = [torch.tensor([[*corpus.src_vocab.encode(en)]], device=device)
               for en, _ in corpus.test[:20]]
    beam = Ratio(lambda: [beam_search(model, s, width, max_len, BOS_ID, EOS_ID) for s in sources],
                 lambda: [greedy_decode(model, s, max_len, BOS_ID, EOS_ID) for s in sources], 5, 1)
    n = len(sources)
    print(f"\n3. beam search width {width} vs greedy (per sentence, {n} test sentences)")
    print(f"   greedy {beam.b / n * 1e3:7.1f} ms   beam {beam.a / n * 1e3:7.1f} ms   "
          f"cost ratio {beam}  (target <= 1.25)")


def bench_tokens(corpus, vocab_size=1000):
    """Item 5: our BPE (learner-style: no cache) vs ``tokenizers`` with the same merges."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    from helpers import tokens

    texts = [s for pair in corpus.train for s in pair]
    library = Tokenizer(models.BPE(unk_token="<unk>", end_of_word_suffix=tokens.END))
    library.pre_tokenizer = pre_tokenizers.Whitespace()
    library.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=0, show_progress=False,
        special_tokens=list(tokens.SPECIALS), end_of_word_suffix=tokens.END))
    vocab = library.get_vocab()
    merges = [tuple(p) for p in json.loads(library.to_str())["model"]["merges"]]
    first = min(vocab[a + b] for a, b in merges)
    start = sorted((t for t, i in vocab.items() if len(tokens.SPECIALS) <= i < first),
                   key=vocab.get)
    ours = tokens.BPE(texts, len(merges), vocab=start)
    sentences = [s for pair in corpus.test for s in pair]
    unk = ours.ids["<unk>"]

    def encode_ours():
        return [[ours.ids.get(t, unk) for t in tokens.tokenize(s, ours.merges)] for s in sentences]

    def encode_theirs():
        return [library.encode(s).ids for s in sentences]

    if encode_ours() != encode_theirs():
        raise AssertionError("our BPE and tokenizers disagree on the test split")
    encoding = Ratio(encode_ours, encode_theirs, repeats=3, warmup=1)
    print(f"\n5. subword tokens: encoding {len(sentences)} test sentences, the same merges and ids")
    print(f"   learner-style BPE {encoding.a * 1e3:7.1f} ms   tokenizers {encoding.b * 1e3:7.1f} ms"
          f"   ratio ours / tokenizers = {encoding}")


def execute_notebook(nb, cwd, kernel_name: str = "python3", timeout: int = 300, env=None):
    """Run every cell of the notebook ``nb`` in place, in a new kernel started in ``cwd``.
    ``widget_registry = {}``: nbclient sends no Output widget state back while it waits (which
    can swallow a reply and stall an ``interact`` cell), and keeps those outputs as the cell's."""
    from nbclient import NotebookClient

    client = NotebookClient(nb, timeout=timeout, kernel_name=kernel_name,
                            resources={"metadata": {"path": str(cwd)}})
    client.widget_registry = {}
    client.execute(env=env)
    return nb


def bench_notebooks(threads: int = 1, names=None):
    """``(name, seconds, ok)`` of each notebook named with one of ``names``, on ``threads``."""
    import os

    import nbformat

    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    rows = []
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        if names and not any(name in path.name for name in names):
            continue
        start = time.perf_counter()
        try:
            execute_notebook(nbformat.read(path, as_version=4), path.parent, env=env)
            ok = True
        except Exception as error:  # a failing or hanging cell: report it, go on with the rest
            print(f"   {path.name}: {type(error).__name__}: {str(error).strip()[-300:]}")
            ok = False
        rows.append((path.name, time.perf_counter() - start, ok))
    return rows


def print_notebook_table(names=None):
    """Item 6: each notebook's "run all" time on one torch thread, beside its limit."""
    print(f"\n6. executing {'the' if names else 'every'} notebook top to bottom (one torch thread,"
          " one kernel at a time)")
    total, over = 0.0, []
    for name, seconds, ok in bench_notebooks(names=names):
        total += seconds
        limit = notebook_limit(name)
        if seconds > limit:
            over.append(name)
        print(f"   {name:<40} {seconds:6.1f} s  {'OVER' if seconds > limit else 'within'} its "
              f"{limit} s  {'ok' if ok else 'FAILED'}")
    print(f"   {'all notebooks':<40} {total:6.1f} s;  over their limit: {over or 'none'}")


def main(argv=None):
    parser = argparse.ArgumentParser(description="Benchmarks of the course's model.")
    parser.add_argument("--skip-notebooks", action="store_true",
                        help="do not execute the notebooks (the slowest part)")
    parser.add_argument("--notebooks", nargs="*", metavar="NN",
                        help="only the notebook table: every notebook, or those whose file names "
                             "contain one of NN (09 14)")
    parser.add_argument("--threads", action="store_true",
                        help="also execute notebooks 09 and 10 with 1 and with 2 torch threads")
    args = parser.parse_args(argv)
    if args.notebooks is not None:
        print_notebook_table(args.notebooks)
        return
    device = get_device()
    print(f"device: {device}, torch {torch.__version__}, threads: {torch.get_num_threads()}")
    corpus = make_corpus(**CORPUS_ARGS)
    peak = bench_training(corpus, TransformerConfig.small(), device)
    model = load_translator(device=device).model.eval()  # the shipped, trained model
    bench_cache(model, corpus, device)
    bench_beam(model, corpus, device)
    kind = "CUDA allocated" if device.type == "cuda" else "growth of peak RSS"
    print(f"\n4. peak memory of training ({kind}): {peak:.0f} MiB")
    bench_tokens(corpus)
    if not args.skip_notebooks:
        print_notebook_table()
    if args.threads:
        print("\n7. notebooks 09 and 10 with 1 and 2 torch threads (one kernel at a time)")
        one, two = (bench_notebooks(n, ["09_", "10_"]) for n in (1, 2))
        for (name, t1, ok1), (_, t2, ok2) in zip(one, two, strict=True):
            status = "ok" if ok1 and ok2 else "FAILED"
            print(f"   {name:<32} 1 thread {t1:6.1f} s   2 threads {t2:6.1f} s   "
                  f"ratio 2/1 = {t2 / t1:.2f}  {status}")


if __name__ == "__main__":
    main()
