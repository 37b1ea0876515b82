"""Notebook 09's exercises, in its order: label-smoothed cross-entropy
(``label_smoothed_nll``), the warm-up learning rate (``transformer_lr``) and one optimisation
step in the right order (``train_step``, with T4-T6).
"""

import numbers
import warnings
from dataclasses import dataclass

import torch
from torch import nn

from ..training import label_smoothed_nll, train_step, transformer_lr
from .compare import is_blank
from .engine import Case, Exercise, NumberCase, Pitfall, randn, tensor_reference


# ----------------------------------------------------------------------------------------------
# Buggy variants, each with the learner's signature
# ----------------------------------------------------------------------------------------------

def _lr_with(offset=0, pick=min, step_exponent=-0.5, warmup_exponent=-1.5, d_exponent=-0.5):
    """``transformer_lr`` with one mistake: the keyword that differs from its default."""

    def lr(step, d_model, warmup):
        step = step + offset
        return d_model ** d_exponent * pick(step ** step_exponent, step * warmup ** warmup_exponent)

    return lr


def _lr_swapped(step, d_model, warmup):
    """The two exponents swapped: ``min(step^-1.5, step * warmup^-0.5)``."""
    return d_model ** -0.5 * min(step ** -1.5, step * warmup ** -0.5)


def _ls_parts(logits, labels, ignore_index):
    """Per position, as in the reference: the log-probabilities ``(N, V)``, the labels with
    padding read as token 0, -log p[label], and keep (False on padding)."""
    log_probs = logits.reshape(-1, logits.shape[-1]).log_softmax(dim=-1)
    labels = labels.reshape(-1)
    keep = labels != ignore_index
    labels = labels.masked_fill(~keep, 0)
    nll = -log_probs.gather(1, labels[:, None]).squeeze(1)
    return log_probs, labels, nll, keep


def _ls_target(log_probs, labels, epsilon):
    """The smoothed target q: epsilon / V on every token, plus 1 - epsilon on the label."""
    V = log_probs.shape[-1]
    q = torch.full_like(log_probs, epsilon / V)
    return q.scatter_(1, labels[:, None], 1 - epsilon + epsilon / V)


def _ls_spread_over_others(logits, labels, epsilon, ignore_index):
    """epsilon spread over the V - 1 wrong tokens only (1 - epsilon on the right one)."""
    log_probs, _, nll, keep = _ls_parts(logits, labels, ignore_index)
    others = (-log_probs.sum(dim=-1) - nll) / (log_probs.shape[-1] - 1)
    per_token = (1 - epsilon) * nll + epsilon * others
    return per_token[keep].sum() / keep.sum()


def _ls_smoothing_on_pads(logits, labels, epsilon, ignore_index):
    """T3: the right-token term is masked on padding, the smoothing term is not."""
    log_probs, _, nll, keep = _ls_parts(logits, labels, ignore_index)
    uniform = -log_probs.mean(dim=-1)
    return ((1 - epsilon) * nll * keep + epsilon * uniform).sum() / keep.sum()


def _ls_per_position(logits, labels, epsilon, ignore_index):
    """The reference's loss at every position, and keep (False on padding)."""
    log_probs, _, nll, keep = _ls_parts(logits, labels, ignore_index)
    return (1 - epsilon) * nll + epsilon * -log_probs.mean(dim=-1), keep


def _ls_pads_not_ignored(logits, labels, epsilon, ignore_index):
    """Padding scored like a real label (``ignore_index`` unused): the mean over every position."""
    labels = labels.clamp(min=0)  # -100 is no index: scored as token 0
    loss, _ = _ls_per_position(logits, labels, epsilon, ignore_index=-1)  # -1: nothing ignored
    return loss.mean()


def _ls_divided_by_all(logits, labels, epsilon, ignore_index):
    """Padding masked out of the sum, but the sum divided by every position, pads included."""
    loss, keep = _ls_per_position(logits, labels, epsilon, ignore_index)
    return loss[keep].sum() / keep.numel()


def _ls_summed(logits, labels, epsilon, ignore_index):
    """Summed over the real tokens instead of averaged."""
    loss, keep = _ls_per_position(logits, labels, epsilon, ignore_index)
    return loss[keep].sum()


def _ls_kl_log_of_zero(logits, labels, epsilon, ignore_index):
    """T3: KL(q || p) with ``q * log(q)``: 0 * log(0) = NaN wherever the target is 0."""
    log_probs, labels, _, keep = _ls_parts(logits, labels, ignore_index)
    q = _ls_target(log_probs, labels, epsilon)
    return (q * (q.log() - log_probs)).sum(dim=-1)[keep].mean()


def _ls_kl(logits, labels, epsilon, ignore_index):
    """A KL divergence (``F.kl_div``): finite, but lower than cross-entropy by H(q)."""
    log_probs, labels, _, keep = _ls_parts(logits, labels, ignore_index)
    q = _ls_target(log_probs, labels, epsilon)
    kl = torch.nn.functional.kl_div(log_probs, q, reduction="none").sum(dim=-1)
    return kl[keep].mean()


# ----------------------------------------------------------------------------------------------
# Test cases
# ----------------------------------------------------------------------------------------------

def _lr_cases(g):
    def case(step, d_model, warmup, note=""):
        return NumberCase(f"step={step}, d_model={d_model}, warmup={warmup}{note}",
                          (step, d_model, warmup))

    return [
        case(1, 512, 4000, " (the first step)"),
        case(4000, 512, 4000, " (the peak, the paper's setting)"),
        case(100000, 512, 4000, " (long after the peak)"),
        case(50, 64, 200),
        case(200, 64, 200, " (the peak)"),
        case(1000, 64, 200),
        case(7, 16, 3),
    ]


def _ls_cases(g):
    def case(label, shape, V, epsilon, ignore_index, pads=()):
        logits = 2.0 * randn(g, *shape, V)
        labels = torch.randint(4, V, shape, generator=g)  # 4..V-1: never a special id
        for index in pads:
            labels[index] = ignore_index
        return Case(f"{label}, epsilon={epsilon}, ignore_index={ignore_index}",
                    (logits, labels, epsilon, ignore_index))

    return [
        case("B=2, T=5, V=7, padding at the end of sentence 1", (2, 5), 7, 0.1, 0,
             [(1, 3), (1, 4)]),
        case("2-D logits (N, V) = (6, 9), nothing ignored", (6,), 9, 0.2, -100),
        case("epsilon=0 is plain cross-entropy; B=2, T=4, V=6", (2, 4), 6, 0.0, 0,
             [(0, 3), (1, 2), (1, 3)]),
        case("mostly padding: B=3, T=6, V=8", (3, 6), 8, 0.1, 0,
             [(0, 2), (0, 3), (0, 4), (0, 5), (1, 4), (1, 5), (2, 1), (2, 2), (2, 3), (2, 4),
              (2, 5)]),
        case("pad id 2: B=2, T=3, V=10", (2, 3), 10, 0.3, 2, [(0, 2)]),
    ]


_HINT_PADS = ("a padded position is not a word to predict: leave out every position whose label "
              "is ignore_index, then average over the real tokens only.")

# ----------------------------------------------------------------------------------------------
# train_step: three steps on a fresh small model, the same for every function checked
# ----------------------------------------------------------------------------------------------

def _step_with(zero_grad=True, scheduler_first=False, clip_after=False):
    """``train_step`` with one mistake: no zero_grad (T4: every step also applies the earlier
    gradients), the scheduler stepped first (T5: each update uses the next step's rate) or the
    gradients clipped after optimizer.step(), which has already used them (T6)."""

    def step(model, batch, loss_fn, optimizer, scheduler, clip_norm):
        if zero_grad:
            optimizer.zero_grad()
        loss = loss_fn(model, batch)
        loss.backward()
        def clip():
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)

        order = [optimizer.step, clip] if clip_after else [clip, optimizer.step]
        order = [scheduler.step, *order] if scheduler_first else [*order, scheduler.step]
        for action in order:
            action()
        return loss.item()

    return step


def _mse(model, batch):
    x, y = batch
    return ((model(x) - y) ** 2).mean()


@dataclass(frozen=True)
class _TrainingCase(Case):
    """Three calls of the learner's step on a fresh seeded model (SGD with momentum, a learning
    rate that changes every step, clipping that really clips). The answer is the tuple
    ``(losses (3,), weights after (n,), learning rate after)``."""

    sizes: tuple = (4, 8)
    clip_norm: float = 0.5
    rates: tuple = (1.0, 0.5, 0.25, 0.125)  # LambdaLR factors of steps 0, 1, 2, 3
    seed: int = 0

    def run(self, fn):
        with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch warns about T5's order
            torch.manual_seed(self.seed)
            d_in, hidden = self.sizes
            model = nn.Sequential(nn.Linear(d_in, hidden), nn.Tanh(), nn.Linear(hidden, 1))
            batches = [(torch.randn(16, d_in), 5 * torch.randn(16, 1)) for _ in range(3)]
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
            scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: self.rates[s])
            losses = []
            for batch in batches:
                loss = fn(model, batch, _mse, optimizer, scheduler, self.clip_norm)
                if torch.is_tensor(loss) and loss.numel() == 1:
                    loss = loss.item()
                if is_blank(loss) or not isinstance(loss, numbers.Real):
                    return loss  # None, a tuple, a string...: reported as it is
                losses.append(float(loss))
        weights = torch.cat([p.detach().flatten() for p in model.parameters()])
        return (torch.tensor(losses), weights,
                torch.tensor(optimizer.param_groups[0]["lr"], dtype=torch.float32))


def _train_step_cases(g):
    return [
        _TrainingCase("a 4-8-1 network, clip_norm=0.5, rate halved every step"),
        _TrainingCase("a 6-16-1 network, clip_norm=1.0, warm-up rates", sizes=(6, 16),
                      clip_norm=1.0, rates=(0.25, 0.5, 1.0, 1.0), seed=1),
        _TrainingCase("a 3-4-1 network, clip_norm=0.1", sizes=(3, 4), clip_norm=0.1, seed=2),
    ]


EXERCISES: dict[str, Exercise] = {
    "transformer_lr": Exercise(
        reference=tensor_reference(transformer_lr, torch.float32),
        make_cases=_lr_cases,
        sources=(transformer_lr,),
        outputs=("lr",),
        atol=0.0,
        rtol=1e-5,
        pitfalls=(
            Pitfall(None, "steps counted from 0", _lr_with(offset=-1),
                    "the paper counts steps from 1 (step^-0.5 divides by zero at step 0). "
                    "LambdaLR starts at 0, so helpers.training.warmup_schedule passes step + 1."),
            Pitfall(None, "max instead of min", _lr_with(pick=max),
                    "take the min of the two arms: the linear warm-up (step * warmup^-1.5) is the "
                    "smaller one until step = warmup, the 1/sqrt(step) decay after it."),
            Pitfall(None, "exponents swapped", _lr_swapped,
                    "step^-0.5 is the decay and step * warmup^-1.5 the linear warm-up; with the "
                    "exponents swapped the two arms no longer meet at step = warmup."),
            Pitfall(None, "warmup^-0.5", _lr_with(warmup_exponent=-0.5),
                    "the warm-up arm is step * warmup^-1.5, so that it meets step^-0.5 exactly at "
                    "step = warmup (warmup * warmup^-1.5 = warmup^-0.5)."),
            Pitfall(None, "no d_model factor", _lr_with(d_exponent=0.0),
                    "multiply by d_model^-0.5: wider models get smaller steps."),
            Pitfall(None, "sqrt(d_model) instead of its inverse", _lr_with(d_exponent=0.5),
                    "the factor is d_model^-0.5 = 1 / sqrt(d_model), not sqrt(d_model)."),
        ),
    ),
    "label_smoothed_nll": Exercise(
        reference=label_smoothed_nll,
        make_cases=_ls_cases,
        sources=(label_smoothed_nll,),
        outputs=("loss",),
        pitfalls=(
            Pitfall("T3", "smoothing term kept on padding", _ls_smoothing_on_pads,
                    "padded positions carry no loss at all, not even the epsilon share of the "
                    "smoothing: mask the whole per-position loss, not only the -log p[label] "
                    "term."),
            Pitfall("T3", "KL divergence with log(0)", _ls_kl_log_of_zero,
                    "q * log(q) is 0 * log(0) = NaN where the target is 0 (epsilon = 0). Compute "
                    "the cross-entropy -sum q log p with log_softmax, which stays finite."),
            Pitfall(None, "KL divergence instead of cross-entropy", _ls_kl,
                    "a KL divergence is the cross-entropy minus the entropy of the smoothed "
                    "target: the same gradients, but not the loss F.cross_entropy reports. Return "
                    "the cross-entropy -sum_v q_v log p_v."),
            Pitfall(None, "epsilon spread over V - 1 tokens", _ls_spread_over_others,
                    "F.cross_entropy(label_smoothing=epsilon) spreads epsilon over all V tokens, "
                    "the right one included: q = (1 - epsilon) one-hot + epsilon / V."),
            Pitfall(None, "padding not ignored", _ls_pads_not_ignored, _HINT_PADS),
            Pitfall(None, "divided by every position", _ls_divided_by_all,
                    "divide by the number of real (non-ignored) tokens, not by every position: "
                    "otherwise a batch with more padding gets a smaller loss."),
            Pitfall(None, "summed instead of averaged", _ls_summed,
                    "average over the real tokens (as F.cross_entropy does with reduction='mean'), "
                    "so that the loss does not grow with the batch size."),
        ),
    ),
    "train_step": Exercise(
        reference=train_step,
        make_cases=_train_step_cases,
        sources=(train_step,),
        outputs=("losses", "weights", "learning rate"),
        pitfalls=(
            Pitfall("T4", "no zero_grad", _step_with(zero_grad=False),
                    "zero the gradients first (optimizer.zero_grad()): backward() adds to .grad, "
                    "so without it every step also applies all the earlier gradients."),
            Pitfall("T5", "scheduler before optimizer", _step_with(scheduler_first=True),
                    "step the optimizer first, then the scheduler: scheduler.step() sets the rate "
                    "of the *next* step, so calling it first skips the current step's rate."),
            Pitfall("T6", "clipping after the step", _step_with(clip_after=True),
                    "clip before optimizer.step(): the step has already used the unclipped "
                    "gradients, and clipping afterwards changes nothing."),
        ),
    ),
}
