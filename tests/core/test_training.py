"""Label smoothing, the warm-up schedule, the training loop, checkpoints, evaluation and the
shipped translator (assets/translator.pt)."""

import dataclasses
import itertools

import pytest
import torch
import torch.nn.functional as F

from helpers.data import PAD_ID, batches, encode_pairs
from helpers.model import TransformerConfig, build_model
from helpers.training import (
    count_parameters,
    label_smoothed_nll,
    load_checkpoint,
    make_optimizer,
    save_checkpoint,
    train,
    transformer_lr,
    translation_loss,
    warmup_schedule,
)
from helpers.translation import (
    ASSET_PATH,
    NEGATION_ASSET_PATH,
    NEGATION_CORPUS_ARGS,
    NEGATION_STEPS,
    bleu,
    exact_match,
    load_translator,
    make_corpus,
    translate,
)

TINY = TransformerConfig(d_model=32, num_heads=4, num_layers=1, d_ff=64, dropout=0.0)


@pytest.fixture(scope="module")
def shipped_corpus(shipped):  # shipped: tests/conftest.py
    return make_corpus(**shipped.metadata["corpus"])


@pytest.fixture(scope="module")
def small_corpus():
    return make_corpus(seed=3, num_train=200, num_valid=20, num_test=20)


# ---- label smoothing ---------------------------------------------------------------------------


@pytest.mark.parametrize("epsilon", [0.0, 0.1, 0.3, 1.0])
def test_label_smoothing_equals_cross_entropy(epsilon):
    logits = torch.randn(3, 5, 11, requires_grad=True)
    labels = torch.randint(1, 11, (3, 5))
    labels[0, 3:] = PAD_ID
    labels[2, 1:] = PAD_ID
    ours = label_smoothed_nll(logits, labels, epsilon, ignore_index=PAD_ID)
    (grad_ours,) = torch.autograd.grad(ours, logits)
    theirs = F.cross_entropy(logits.reshape(-1, 11), labels.reshape(-1),  # (B*T, V), (B*T,)
                             label_smoothing=epsilon, ignore_index=PAD_ID)
    (grad_theirs,) = torch.autograd.grad(theirs, logits)
    assert torch.allclose(ours, theirs, atol=1e-6)
    assert torch.allclose(grad_ours, grad_theirs, atol=1e-7)


def test_padding_positions_carry_no_loss():
    """T3: what the model predicts at a padded position changes nothing."""
    logits = torch.randn(2, 4, 7)
    labels = torch.tensor([[3, 4, PAD_ID, PAD_ID], [5, 6, 3, PAD_ID]])
    changed = logits.clone()
    changed[labels == PAD_ID] = 100.0 * torch.randn(3, 7)
    a = label_smoothed_nll(logits, labels, 0.1, PAD_ID)
    b = label_smoothed_nll(changed, labels, 0.1, PAD_ID)
    assert torch.equal(a, b)


def test_label_smoothing_stays_finite():
    """T3: no inf or NaN with huge logits, nor when every position is padding."""
    logits = torch.tensor([[[1e4, -1e4, 0.0], [-1e4, 1e4, 0.0]]])
    loss = label_smoothed_nll(logits, torch.tensor([[1, 0]]), 0.1, ignore_index=-100)
    assert torch.isfinite(loss) and loss > 100  # confidently wrong: a large but finite loss
    all_pad = label_smoothed_nll(torch.randn(2, 3, 5), torch.zeros(2, 3, dtype=torch.long), 0.1, 0)
    assert all_pad.item() == 0.0


def test_label_smoothing_errors():
    with pytest.raises(ValueError, match="logits"):
        label_smoothed_nll(torch.randn(2, 3, 5), torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="epsilon"):
        label_smoothed_nll(torch.randn(2, 5), torch.zeros(2, dtype=torch.long), epsilon=1.5)


# ---- the learning-rate schedule ----------------------------------------------------------------


def test_schedule_values_of_the_paper():
    d_model, warmup = 512, 4000
    assert transformer_lr(1, d_model, warmup) == pytest.approx(512 ** -0.5 * 4000 ** -1.5)
    peak = transformer_lr(warmup, d_model, warmup)
    assert peak == pytest.approx(6.9877e-4, rel=1e-4)  # 1 / sqrt(512 * 4000)
    assert transformer_lr(2000, d_model, warmup) == pytest.approx(peak / 2)  # linear warm-up
    assert transformer_lr(16000, d_model, warmup) == pytest.approx(peak / 2)  # 1/sqrt decay
    steps = range(1, 20000, 7)
    assert max(steps, key=lambda s: transformer_lr(s, d_model, warmup)) in range(3994, 4001)
    assert transformer_lr(warmup, d_model, warmup, scale=2.0) == pytest.approx(2 * peak)
    with pytest.raises(ValueError, match="count from 1"):
        transformer_lr(0, d_model, warmup)


def test_lambda_lr_follows_the_schedule():
    model = torch.nn.Linear(2, 2)
    optimizer, scheduler = make_optimizer(model, d_model=64, warmup=10, scale=0.5)
    assert optimizer.defaults["betas"] == (0.9, 0.98) and optimizer.defaults["eps"] == 1e-9
    seen = []
    for _ in range(30):
        seen.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert seen == pytest.approx([transformer_lr(s, 64, 10, 0.5) for s in range(1, 31)])
    assert max(range(30), key=seen.__getitem__) == 9  # the 10th update has the peak
    assert warmup_schedule(64, 10)(0) == transformer_lr(1, 64, 10)


# ---- the training loop -------------------------------------------------------------------------


def tiny_run(corpus, steps, **kwargs):
    torch.manual_seed(0)
    model = build_model(TINY, len(corpus.src_vocab), len(corpus.tgt_vocab))
    optimizer, scheduler = make_optimizer(model, TINY.d_model, warmup=10, scale=0.5)
    encoded = encode_pairs(corpus.train, corpus.src_vocab, corpus.tgt_vocab)
    stream = batches(encoded, batch_size=32, seed=0, repeat=True)
    history = train(model, stream, translation_loss, optimizer, scheduler, max_steps=steps,
                    **kwargs)
    return model, history


def test_loss_decreases(small_corpus):
    model, history = tiny_run(small_corpus, 30, progress=False)
    assert len(history) == 30 and all(isinstance(x, float) for x in history)
    assert sum(history[-5:]) / 5 < 0.85 * sum(history[:5]) / 5


def test_progress_bar_can_be_disabled(small_corpus, capsys):
    tiny_run(small_corpus, 2, progress=False)
    assert capsys.readouterr().err == ""
    tiny_run(small_corpus, 2, progress=True)
    assert "training" in capsys.readouterr().err


def test_loop_stops_and_restores_the_mode(small_corpus):
    model = build_model(TINY, len(small_corpus.src_vocab), len(small_corpus.tgt_vocab)).eval()
    optimizer, _ = make_optimizer(model, TINY.d_model, warmup=10)
    encoded = encode_pairs(small_corpus.train[:64], small_corpus.src_vocab, small_corpus.tgt_vocab)
    modes = []

    def loss_fn(model, batch):
        modes.append(model.training)
        return translation_loss(model, batch)

    history = train(model, batches(encoded, 32), loss_fn, optimizer, progress=False)
    assert len(history) == 2  # the iterable ran out after one epoch
    assert modes == [True, True] and not model.training
    timed = train(model, batches(encoded, 8, repeat=True), loss_fn, optimizer, max_seconds=0,
                  progress=False)
    assert len(timed) == 1


class RecordingSGD(torch.optim.SGD):
    """SGD that records the gradients' global norm it is asked to apply."""

    norms = []

    def step(self, closure=None):
        grads = [p.grad for group in self.param_groups for p in group["params"]]
        self.norms.append(torch.linalg.vector_norm(torch.stack(
            [torch.linalg.vector_norm(g) for g in grads if g is not None])).item())
        return super().step(closure)


@pytest.mark.parametrize("clip_norm", [0.01, None])
def test_gradient_clipping(clip_norm):
    model = torch.nn.Linear(4, 3)
    optimizer = RecordingSGD(model.parameters(), lr=0.1)
    RecordingSGD.norms = []
    data = [(torch.randn(8, 4), torch.randint(0, 3, (8,))) for _ in range(3)]

    def loss_fn(model, batch):  # the loop is model-agnostic: any model, any batch
        x, y = batch
        return F.cross_entropy(model(x), y) * 100.0

    train(model, data, loss_fn, optimizer, clip_norm=clip_norm, progress=False)
    assert len(RecordingSGD.norms) == 3
    if clip_norm is None:
        assert min(RecordingSGD.norms) > 1.0
    else:
        assert max(RecordingSGD.norms) <= clip_norm * (1 + 1e-4)


# ---- config, checkpoints -----------------------------------------------------------------------


def test_config_and_build_model():
    base = TransformerConfig()
    assert (base.d_model, base.num_heads, base.num_layers, base.d_ff) == (512, 8, 6, 2048)
    small = TransformerConfig.small()
    model = build_model(small, 200, 300)
    assert model.d_model == small.d_model and len(model.encoder.layers) == small.num_layers
    assert model.generator.out_features == 300 and model.src_embed.num_embeddings == 200
    assert 100_000 < count_parameters(model) < 1_000_000


def test_checkpoint_round_trip(tmp_path, small_corpus):
    model, _ = tiny_run(small_corpus, 3, progress=False)
    model.eval()
    path = tmp_path / "tiny.pt"
    save_checkpoint(path, model, TINY, small_corpus.src_vocab, small_corpus.tgt_vocab,
                    {"note": "tiny", "steps": 3})
    raw = torch.load(path, weights_only=True)  # plain types only
    assert raw["config"] == dataclasses.asdict(TINY)
    loaded = load_checkpoint(path, config=TINY)
    assert loaded.config == TINY and loaded.metadata == {"note": "tiny", "steps": 3}
    assert loaded.src_vocab.tokens == small_corpus.src_vocab.tokens
    assert loaded.tgt_vocab.tokens == small_corpus.tgt_vocab.tokens
    assert not loaded.model.training
    src, tgt = torch.randint(4, 20, (2, 6)), torch.randint(4, 20, (2, 5))
    with torch.no_grad():
        assert torch.equal(model(src, tgt), loaded.model(src, tgt))


def test_loading_into_a_different_config_names_the_fields(tmp_path, small_corpus):
    model = build_model(TINY, len(small_corpus.src_vocab), len(small_corpus.tgt_vocab))
    path = tmp_path / "tiny.pt"
    save_checkpoint(path, model, TINY, small_corpus.src_vocab, small_corpus.tgt_vocab)
    other = dataclasses.replace(TINY, d_model=64, num_layers=2)
    with pytest.raises(ValueError, match="d_model: checkpoint 32, given 64") as error:
        load_checkpoint(path, config=other)
    assert "num_layers: checkpoint 1, given 2" in str(error.value)
    assert "num_heads" not in str(error.value)


# ---- evaluation --------------------------------------------------------------------------------


def test_exact_match_and_bleu():
    refs = ["le chien rouge mange", "la grande voiture bleue"]
    assert exact_match(refs, refs) == 100.0 and bleu(refs, refs) == pytest.approx(100.0)
    hyps = ["le chien rouge mange", "la grande voiture rouge"]
    assert exact_match(hyps, refs) == 50.0 and 0.0 < bleu(hyps, refs) < 100.0
    with pytest.raises(ValueError, match="as many hypotheses as references"):
        exact_match(hyps, refs[:1])
    with pytest.raises(ValueError, match="as many hypotheses as references"):
        bleu([], [])


# ---- the shipped translator --------------------------------------------------------------------


def test_shipped_checkpoint_is_small_and_loads(shipped, shipped_corpus):
    assert ASSET_PATH.stat().st_size < 5 * 2 ** 20
    assert shipped.config == TransformerConfig.small()
    corpus = shipped_corpus
    assert shipped.src_vocab.tokens == corpus.src_vocab.tokens
    assert shipped.tgt_vocab.tokens == corpus.tgt_vocab.tokens


def test_shipped_translator_reaches_the_quality_target(shipped, shipped_corpus):
    corpus = shipped_corpus
    english = [en for en, _ in corpus.test]
    references = [fr for _, fr in corpus.test]
    hypotheses = translate(shipped.model, english, shipped.src_vocab, shipped.tgt_vocab)
    assert exact_match(hypotheses, references) >= 90.0
    assert bleu(hypotheses, references) >= 90.0
    assert translate(shipped.model, ["I like the big red car"], shipped.src_vocab,
                     shipped.tgt_vocab) == ["j'aime la grande voiture rouge"]


def test_translation_does_not_depend_on_the_batch(shipped, shipped_corpus):
    """D4: a sentence gets the same translation alone or padded next to longer ones."""
    english = [en for en, _ in itertools.islice(shipped_corpus.valid, 40)]
    together = translate(shipped.model, english, shipped.src_vocab, shipped.tgt_vocab)
    alone = [translate(shipped.model, [s], shipped.src_vocab, shipped.tgt_vocab)[0]
             for s in english[:8]]
    assert together[:8] == alone
    with pytest.raises(ValueError, match="list of sentences"):
        translate(shipped.model, "I like the car", shipped.src_vocab, shipped.tgt_vocab)


def test_negation_model_is_the_named_recipe():
    """Notebook 10's second model: notebook 09's recipe on the corpus with 3% negations. What it
    does there (unsure of the rare "pas de" + adjective + noun, repaired more often than broken by
    a width-4 beam: 418 and 426 of 600 sentences right, 11 repaired, 3 broken) is checked by strict
    nbval on notebook 10's cells 45 and 46, whose outputs and asserts say so."""
    checkpoint = load_translator(NEGATION_ASSET_PATH)
    assert checkpoint.metadata["corpus"] == NEGATION_CORPUS_ARGS
    assert checkpoint.metadata["training"]["steps"] == NEGATION_STEPS
    corpus = make_corpus(**NEGATION_CORPUS_ARGS)
    assert checkpoint.src_vocab.tokens == corpus.src_vocab.tokens
    assert checkpoint.tgt_vocab.tokens == corpus.tgt_vocab.tokens


@pytest.mark.filterwarnings("ignore:translate:UserWarning")  # 3 steps: it cannot translate yet
def test_retrain_asset_trains_the_named_model(tmp_path, monkeypatch):
    """A small version of ``--retrain-asset negation``: 3 steps on the negation corpus."""
    import helpers.translation
    from tests.tools.commands import retrain_asset

    monkeypatch.setattr(helpers.translation, "NEGATION_STEPS", 3)
    metadata = retrain_asset("negation", tmp_path / "neg.pt", progress=False)
    assert metadata["corpus"] == NEGATION_CORPUS_ARGS and metadata["training"]["steps"] == 3
    saved = load_checkpoint(tmp_path / "neg.pt")
    assert "n'aime" in saved.tgt_vocab.ids and saved.metadata == metadata
    with pytest.raises(ValueError, match="expected one of"):
        retrain_asset("gpt", tmp_path / "x.pt")


def test_retrain_command_is_documented():
    """``python -m tests.tools`` without a known flag prints its usage, which names the
    retrain command; the README gives the same command."""
    import subprocess
    import sys
    from pathlib import Path

    run = subprocess.run([sys.executable, "-m", "tests.tools"], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[2])
    assert run.returncode == 2 and "--retrain-asset" in run.stdout
