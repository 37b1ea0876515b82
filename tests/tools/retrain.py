"""Retraining the shipped models (``python -m tests.tools --retrain-asset NAME``): each trains
with the recipe whose constants sit beside the model in ``helpers/`` and saves the file that the
notebook loads, with its metadata."""

import dataclasses
import json
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch

from helpers import continuation, pretrained
from helpers.data import shuffled_chunks
from helpers.gpt import GPTConfig
from helpers.model import TransformerConfig
from helpers.training import label_smoothed_nll, make_optimizer, save_checkpoint, train
from helpers.translation import CORPUS_ARGS, make_corpus, names, train_translator


def retrain_models(path=None, progress: bool = True) -> dict:
    """Retrain notebook 12's GPT and encoder-decoder (no dropout, one budget), save them as plain
    types to ``path`` (default :data:`continuation.MODELS_PATH`) and return their metadata."""
    corpus = make_corpus(**CORPUS_ARGS)
    start = time.perf_counter()
    gpt, vocab, gpt_losses = continuation.train_gpt(
        corpus, GPTConfig(dropout=0.0), **continuation.MODELS_BUDGET, progress=progress
    )
    ed_config = dataclasses.replace(TransformerConfig.small(), dropout=0.0)
    encoder_decoder, ed_losses = train_translator(
        corpus, ed_config, **continuation.MODELS_BUDGET, progress=progress
    )
    metadata = {
        "corpus": dict(CORPUS_ARGS),
        "budget": dict(continuation.MODELS_BUDGET),
        "train_seconds": round(time.perf_counter() - start, 1),
        "torch_threads": torch.get_num_threads(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),  # ATEN_CPU_CAPABILITY
        "gpt_final_loss": gpt_losses[-1],
        "ed_final_loss": ed_losses[-1],
    }

    def weights(model):
        return {k: v.detach().cpu() for k, v in model.state_dict().items()}

    torch.save(
        {
            "format": 1,
            "gpt": {
                "config": dataclasses.asdict(gpt.config),
                "vocab": list(vocab.tokens),
                "state_dict": weights(gpt),
                "losses": [float(v) for v in gpt_losses],
            },
            "encoder_decoder": {
                "config": dataclasses.asdict(ed_config),
                "src_vocab": list(corpus.src_vocab.tokens),
                "tgt_vocab": list(corpus.tgt_vocab.tokens),
                "state_dict": weights(encoder_decoder),
                "losses": [float(v) for v in ed_losses],
            },
            "metadata": metadata,
        },
        path or continuation.MODELS_PATH,
    )
    return metadata


def retrain_named(kind: str, path=None, progress: bool = True) -> dict:
    """Train and save notebook 14's ``kind`` translator as the notebook does: its metadata."""
    named = names.name_corpus(make_corpus(**CORPUS_ARGS))
    vocabularies = names.named_vocabularies(named)
    start = time.perf_counter()
    model, history = names.train_named(
        kind, named, vocabularies, steps=names.NAMED_STEPS, progress=progress
    )
    src, tgt = vocabularies[kind]
    metadata = {
        "kind": kind,
        "corpus": dict(CORPUS_ARGS),
        "merges": names.NAMED_MERGES,
        "training": {"steps": names.NAMED_STEPS, "batch_size": 128, "warmup": 200, "seed": 0},
        "train_seconds": round(time.perf_counter() - start, 1),
        "final_loss": history[-1],
        "scores": {
            test: list(score) for test, score in names.named_scores(model, src, tgt, named).items()
        },
    }
    config = replace(TransformerConfig.small(), tie_weights=kind == "tied")
    save_checkpoint(path or names.NAMED_ASSETS[kind], model, config, src, tgt, metadata)
    return metadata


def _marian_batches(pairs, tokenizer, batch_size: int, pad_id: int, seed: int):
    """Endless batches ``(input_ids, attention_mask, labels)`` of ``(english, french)`` pairs."""
    sources = tokenizer([en for en, _ in pairs]).input_ids  # each ends with </s>
    targets = tokenizer(text_target=[fr for _, fr in pairs]).input_ids
    encoded = list(zip(sources, targets, strict=True))
    for chosen in shuffled_chunks(encoded, batch_size, seed):
        padded = [
            torch.nn.utils.rnn.pad_sequence(
                [torch.tensor(ids[k]) for ids in chosen], batch_first=True, padding_value=pad_id
            )
            for k in (0, 1)
        ]
        yield padded[0], padded[0] != pad_id, padded[1]


def train_standin(
    pairs,
    tokenizer,
    steps: int,
    batch_size: int,
    warmup: int,
    label_smoothing: float,
    clip_norm: float,
    seed: int,
    progress: bool = True,
):
    """``(model in eval mode, losses)``: a small ``MarianMTModel`` trained on ``pairs`` as
    notebook 09 trains its model. ``final_logits_bias``, a buffer in ``transformers``, is a
    parameter while training, as in Marian."""
    transformers = pretrained._transformers()
    config = pretrained.marian_config(len(tokenizer), **pretrained.STANDIN_SIZES)
    pad = config.pad_token_id
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = transformers.MarianMTModel(config)
    bias = model.final_logits_bias
    del model._buffers["final_logits_bias"]
    model.final_logits_bias = torch.nn.Parameter(bias)  # trained, as in Marian

    def loss_fn(model, batch):
        input_ids, attention_mask, labels = batch
        start = torch.full_like(labels[:, :1], pad)  # the decoder starts from the pad id
        decoder_inputs = torch.cat([start, labels[:, :-1]], dim=1)  # the labels shifted right
        logits = model(
            input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_inputs
        ).logits
        return label_smoothed_nll(logits, labels, label_smoothing, ignore_index=pad)

    optimizer, scheduler = make_optimizer(model, config.d_model, warmup)
    batches = _marian_batches(pairs, tokenizer, batch_size, pad, seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)  # dropout's masks
        losses = train(
            model,
            batches,
            loss_fn,
            optimizer,
            scheduler,
            max_steps=steps,
            clip_norm=clip_norm,
            progress=progress,
        )
    trained = model.final_logits_bias.detach()
    del model._parameters["final_logits_bias"]
    model.register_buffer("final_logits_bias", trained)  # back to transformers' layout
    return pretrained.published_generation(model).eval(), losses


def standin_exact_match(model, tokenizer, pairs, batch_size: int = 100) -> float:
    """The share of ``pairs`` whose greedy translation is exactly the French sentence."""
    right = 0
    for start in range(0, len(pairs), batch_size):
        chunk = pairs[start : start + batch_size]
        batch = tokenizer([en for en, _ in chunk], padding=True, return_tensors="pt")
        with torch.no_grad():
            out = model.generate(**batch, num_beams=1, max_new_tokens=32, **pretrained.MATCHING)
        said = tokenizer.batch_decode(out, skip_special_tokens=True)
        right += sum(a == fr for a, (_, fr) in zip(said, chunk, strict=True))
    return right / len(pairs)


def retrain_standin(path=None, progress: bool = True) -> dict:
    """Retrain notebook 15's offline stand-in on the corpus in sentence case and save it, with
    ``training.json`` (the metadata returned), to ``path`` (default: ``STANDIN_PATH``)."""
    corpus = make_corpus(**pretrained.STANDIN_CORPUS_ARGS)
    train, valid, test = (
        [(pretrained.sentence_case(en), pretrained.sentence_case(fr)) for en, fr in split]
        for split in (corpus.train, corpus.valid, corpus.test)
    )
    with tempfile.TemporaryDirectory() as folder:
        tokenizer = pretrained.train_marian_tokenizer(
            [s for pair in train for s in pair], folder, vocab_size=pretrained.STANDIN_VOCAB_SIZE
        )
    begin = time.perf_counter()
    model, losses = train_standin(
        train, tokenizer, progress=progress, **pretrained.STANDIN_TRAINING
    )
    seconds = time.perf_counter() - begin
    metadata = {
        "corpus": dict(pretrained.STANDIN_CORPUS_ARGS),
        "sentence_case": True,
        "vocab_size": len(tokenizer),
        "sizes": dict(pretrained.STANDIN_SIZES),
        "training": dict(pretrained.STANDIN_TRAINING),
        "train_seconds": round(seconds, 1),
        "torch_threads": torch.get_num_threads(),
        "final_loss": round(losses[-1], 4),
        "valid_exact_match": standin_exact_match(model, tokenizer, valid),
        "test_exact_match": standin_exact_match(model, tokenizer, test),
    }
    path = Path(path or pretrained.STANDIN_PATH)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    (path / "training.json").write_text(json.dumps(metadata, indent=1) + "\n", encoding="utf-8")
    return metadata
