"""Notebook 09's exercises, in its order: label-smoothed cross-entropy
(``label_smoothed_nll``), the warm-up learning rate (``transformer_lr``) and one optimisation
step in the right order (``train_step``, with T4-T6).
"""

import numbers
import warnings
from dataclasses import dataclass
from unittest import mock

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


def _lr_inverse_d_model(step, d_model, warmup):
    """1 / d_model instead of 1 / sqrt(d_model)."""
    return min(step ** -0.5, step * warmup ** -1.5) / d_model


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


def _ls_log_of_softmax(logits, labels, epsilon, ignore_index):
    """log(softmax(...)): -inf where a probability underflows to 0, so the loss is inf."""
    flat = logits.reshape(-1, logits.shape[-1])
    log_probs = flat.softmax(dim=-1).log()
    labels = labels.reshape(-1)
    keep = labels != ignore_index
    nll = -log_probs.gather(1, labels.masked_fill(~keep, 0)[:, None]).squeeze(1)
    per_token = (1 - epsilon) * nll + epsilon * -log_probs.mean(dim=-1)
    return per_token[keep].sum() / keep.sum()


def _ls_gather_unmasked(logits, labels, epsilon, ignore_index):
    """``gather`` on the labels as they are, masked only afterwards: ignore_index=-100 is no
    index, and gather raises (IndexError with indexing instead: see below)."""
    log_probs = logits.reshape(-1, logits.shape[-1]).log_softmax(dim=-1)
    labels = labels.reshape(-1)
    nll = -log_probs.gather(1, labels[:, None]).squeeze(1)
    keep = labels != ignore_index
    per_token = (1 - epsilon) * nll + epsilon * -log_probs.mean(dim=-1)
    return per_token[keep].sum() / keep.sum()


def _ls_index_unmasked(logits, labels, epsilon, ignore_index):
    """``log_probs[range(N), labels]`` on the labels as they are: IndexError on -100."""
    log_probs = logits.reshape(-1, logits.shape[-1]).log_softmax(dim=-1)
    labels = labels.reshape(-1)
    nll = -log_probs[torch.arange(len(labels)), labels]
    keep = labels != ignore_index
    per_token = (1 - epsilon) * nll + epsilon * -log_probs.mean(dim=-1)
    return per_token[keep].sum() / keep.sum()


def _ls_with(nll_weight=lambda e: 1 - e, smoothing=lambda log_probs, e: -e * log_probs.mean(-1),
             dim=-1, pad_id=None):
    """The per-position loss ``nll_weight(epsilon) * nll + smoothing(log_probs, epsilon)`` with
    one mistake, the log-softmax over ``dim`` of the flat (N, V) logits, and the positions whose
    label is ``pad_id`` (ignore_index when None) left out."""

    def loss(logits, labels, epsilon, ignore_index):
        log_probs = logits.reshape(-1, logits.shape[-1]).log_softmax(dim=dim)
        labels = labels.reshape(-1)
        keep = labels != (ignore_index if pad_id is None else pad_id)
        nll = -log_probs.gather(1, labels.masked_fill(~keep, 0).clamp(min=0)[:, None]).squeeze(1)
        per_token = nll_weight(epsilon) * nll + smoothing(log_probs, epsilon)
        return per_token[keep].sum() / keep.sum()

    return loss


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
        case("PyTorch's padding label -100: B=2, T=4, V=7", (2, 4), 7, 0.1, -100,
             [(0, 3), (1, 2), (1, 3)]),
        Case("logits [200, 0, -200]: a probability underflows to 0, epsilon=0.1, "
             "ignore_index=0", (torch.tensor([[200.0, 0.0, -200.0, 5.0, 1.0],
                                             [-200.0, 200.0, 0.0, 3.0, 1.0]]),
                                torch.tensor([3, 4]), 0.1, 0)),
    ]


_HINT_LOG = ("use log_softmax, never log(softmax(...)): a logit far below the others (-200 next "
             "to 200) gets probability 0 in float32, log(0) = -inf, and the loss is inf; "
             "log_softmax computes log p without forming p.")
_HINT_GATHER = ("mask the labels before gather (or indexing): ignore_index is often -100, which "
                "is no class id, so gather raises on real data. Replace them with any valid id "
                "first, labels.masked_fill(labels == ignore_index, 0), then drop those "
                "positions.")
_HINT_PADS = ("a padded position is not a word to predict: leave out every position whose label "
              "is ignore_index, then average over the real tokens only.")

# ----------------------------------------------------------------------------------------------
# train_step: three steps on a fresh small model, the same for every function checked
# ----------------------------------------------------------------------------------------------

def _step_with(zero_grad=True, scheduler_first=False, clip_after=False, schedule=True,
               update=True, clip="norm", clip_before_backward=False, zero_before_update=False,
               schedule_twice=False, loss_after=False):
    """``train_step`` with one mistake: no zero_grad (T4: every step also applies the earlier
    gradients), the scheduler stepped first (T5: each update uses the next step's rate), the
    gradients clipped after optimizer.step(), which has already used them (T6); or one of the
    five calls left out, twice, or in another wrong place; or the loss of after the update."""

    def step(model, batch, loss_fn, optimizer, scheduler, clip_norm):
        if zero_grad and not zero_before_update:
            optimizer.zero_grad()
        loss = loss_fn(model, batch)

        def clipper():
            if clip == "norm":
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
            elif clip == "value":
                torch.nn.utils.clip_grad_value_(model.parameters(), clip_norm)

        if clip_before_backward:
            clipper()
        loss.backward()
        order = [optimizer.step] if update else []
        if not clip_before_backward:
            order = [*order, clipper] if clip_after else [clipper, *order]
        if zero_before_update:
            order.insert(-1, optimizer.zero_grad)
        schedule_calls = ([scheduler.step] * (2 if schedule_twice else 1)) if schedule else []
        order = [*schedule_calls, *order] if scheduler_first else [*order, *schedule_calls]
        for action in order:
            action()
        return loss_fn(model, batch).item() if loss_after else loss.item()

    return step


def _mse(model, batch):
    x, y = batch
    return ((model(x) - y) ** 2).mean()


@dataclass(frozen=True)
class _TrainingCase(Case):
    """Three calls of the learner's step on a fresh seeded model (SGD with momentum, a learning
    rate that changes every step, clipping that really clips). The answer is the tuple
    ``(losses (3,), weights after (n,), learning rate after, where the clipping was (3,))``.

    The last says, per step, where the gradients were clipped, which the weights cannot tell
    when the clipping changed nothing the update used: 0 the update applied gradients of norm
    at most ``clip_norm`` (clipped in time), 1 no clip_grad_norm_ call saw them, 2 it ran
    before backward() (nothing to clip), 3 after optimizer.step(), -1 no update at all."""

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
            rates = self.rates  # past the last: halved at every step (a step taken twice)
            scheduler = torch.optim.lr_scheduler.LambdaLR(
                optimizer, lambda s: rates[s] if s < len(rates) else rates[-1] / 2 ** (s - 3))
            losses, clipping = [], []
            events = []  # ("clip", gradients there?) and ("step", norm of what it applied)

            def recorded_update(optimizer, args, kwargs):  # a pre-hook of optimizer.step
                grads = [p.grad for p in model.parameters() if p.grad is not None]
                norm = torch.cat([g.flatten() for g in grads]).norm().item() if grads else 0.0
                events.append(("step", norm))

            clip_norm_ = torch.nn.utils.clip_grad_norm_

            def recorded_clip(parameters, *args, **kwargs):
                parameters = list(parameters)
                events.append(("clip", any(p.grad is not None and bool(p.grad.any())
                                           for p in parameters)))
                return clip_norm_(parameters, *args, **kwargs)

            optimizer.register_step_pre_hook(recorded_update)
            with mock.patch.object(torch.nn.utils, "clip_grad_norm_", recorded_clip):
                for batch in batches:
                    events.clear()
                    loss = fn(model, batch, _mse, optimizer, scheduler, self.clip_norm)
                    if torch.is_tensor(loss) and loss.numel() == 1:
                        loss = loss.item()
                    if is_blank(loss) or not isinstance(loss, numbers.Real):
                        return loss  # None, a tuple, a string...: reported as it is
                    losses.append(float(loss))
                    clipping.append(_where_clipped(events, self.clip_norm))
        weights = torch.cat([p.detach().flatten() for p in model.parameters()])
        return (torch.tensor(losses), weights,
                torch.tensor(optimizer.param_groups[0]["lr"], dtype=torch.float32),
                torch.tensor(clipping))


def _where_clipped(events, clip_norm):
    """The code of one step's clipping (see :class:`_TrainingCase`) from its events."""
    steps = [i for i, (kind, _) in enumerate(events) if kind == "step"]
    if not steps:
        return -1
    first = steps[0]
    if events[first][1] <= clip_norm * (1 + 1e-4):
        return 0  # what the update applied was within the norm
    clips = [(i, grads) for i, (kind, grads) in enumerate(events) if kind == "clip"]
    if any(i > first for i, _ in clips):
        return 3
    if any(not grads for _, grads in clips):
        return 2
    return 1


def _train_step_cases(g):
    # The first optimizer.step() of a process imports a part of torch (seconds on a busy
    # machine): done here, before the learner's timed calls, not inside the first of them.
    layer = nn.Linear(1, 1)
    layer(torch.ones(1)).sum().backward()
    torch.optim.SGD(layer.parameters(), lr=0.1).step()
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
            Pitfall(None, "step + 1", _lr_with(offset=1),
                    "use step as it is: it already counts from 1. The + 1 belongs to "
                    "warmup_schedule, because LambdaLR counts from 0."),
            Pitfall(None, "max instead of min", _lr_with(pick=max),
                    "take the min of the two arms: the linear warm-up (step * warmup^-1.5) is the "
                    "smaller one until step = warmup, the 1/sqrt(step) decay after it."),
            Pitfall(None, "exponents swapped", _lr_swapped,
                    "step^-0.5 is the decay and step * warmup^-1.5 the linear warm-up; with the "
                    "exponents swapped the two arms no longer meet at step = warmup."),
            Pitfall(None, "warmup^-0.5", _lr_with(warmup_exponent=-0.5),
                    "the warm-up arm is step * warmup^-1.5, so that it meets step^-0.5 exactly at "
                    "step = warmup (warmup * warmup^-1.5 = warmup^-0.5)."),
            Pitfall(None, "warmup^1.5", _lr_with(warmup_exponent=1.5),
                    "the rate grows during the warm-up: min(step^-0.5, step * warmup^-1.5), whose "
                    "second arm, step * warmup ** -1.5 (a negative exponent), is the smaller "
                    "one until step = warmup."),
            Pitfall(None, "step^0.5", _lr_with(step_exponent=0.5),
                    "after the warm-up the rate falls as step^-0.5 = 1 / sqrt(step) (a negative "
                    "exponent): min(step ** -0.5, step * warmup ** -1.5)."),
            Pitfall(None, "d_model^-1.5", _lr_with(d_exponent=-1.5),
                    "the factor is d_model^-0.5 = 1 / sqrt(d_model); -1.5 is the warm-up's "
                    "exponent."),
            Pitfall(None, "1 / d_model", _lr_inverse_d_model,
                    "the factor is d_model^-0.5 = 1 / sqrt(d_model), not 1 / d_model."),
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
            Pitfall("T7", "log of softmax", _ls_log_of_softmax, _HINT_LOG),
            Pitfall("T8", "gather on unmasked labels", _ls_gather_unmasked, _HINT_GATHER),
            Pitfall("T8", "indexing with unmasked labels", _ls_index_unmasked, _HINT_GATHER),
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
            Pitfall(None, "no smoothing", _ls_with(nll_weight=lambda e: 1.0,
                                                   smoothing=lambda log_probs, e: 0.0),
                    "that is the plain cross-entropy: epsilon is ignored. Mix in the uniform "
                    "target: (1 - epsilon) * (-log p[label]) + epsilon * mean over v of "
                    "(-log p[v])."),
            Pitfall(None, "no 1 - epsilon", _ls_with(nll_weight=lambda e: 1.0),
                    "weigh -log p[label] by 1 - epsilon: the right token keeps 1 - epsilon of "
                    "the target, the other epsilon is spread evenly over the V tokens."),
            Pitfall(None, "epsilon times the sum", _ls_with(
                smoothing=lambda log_probs, e: -e * log_probs.sum(-1)),
                    "each token gets epsilon / V: the smoothing term is epsilon times the MEAN "
                    "of -log p over the vocabulary, not the sum."),
            Pitfall(None, "epsilon and 1 - epsilon swapped", _ls_with(
                nll_weight=lambda e: e,
                smoothing=lambda log_probs, e: -(1 - e) * log_probs.mean(-1)),
                    "the weights are swapped: (1 - epsilon) on -log p[label], epsilon on the "
                    "mean of -log p."),
            Pitfall(None, "the smoothing term's sign", _ls_with(
                smoothing=lambda log_probs, e: e * log_probs.mean(-1)),
                    "both terms are -log p (positive): + epsilon * mean(-log p), not + epsilon "
                    "* mean(log p)."),
            Pitfall(None, "log-softmax over the positions", _ls_with(dim=0),
                    "log_softmax over the vocabulary, the last axis (dim=-1): each position's "
                    "probabilities sum to 1."),
            Pitfall(None, "pad id 0 written in", _ls_with(pad_id=0),
                    "compare the labels with ignore_index, the argument, not with 0: the padding "
                    "id may be any number (-100 is PyTorch's default)."),
        ),
    ),
    "train_step": Exercise(
        reference=train_step,
        make_cases=_train_step_cases,
        sources=(train_step,),
        outputs=("losses", "weights", "learning rate",
                 "where the gradients were clipped (0: between backward and step)"),
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
            Pitfall("T9", "no scheduler.step()", _step_with(schedule=False),
                    "call scheduler.step() after optimizer.step(): without it the learning rate "
                    "never changes (it stays at the first step's rate; optimizer.param_groups[0]"
                    "['lr'] shows it)."),
            Pitfall("T9", "scheduler.step() twice", _step_with(schedule_twice=True),
                    "call scheduler.step() once per step: each call moves the schedule on by one "
                    "step, so two calls skip every other rate."),
            Pitfall("T10", "no optimizer.step()", _step_with(update=False),
                    "call optimizer.step() after clipping: it is the call that updates the "
                    "weights (backward() only computes the gradients)."),
            Pitfall("T10", "zero_grad between backward and step",
                    _step_with(zero_before_update=True),
                    "call optimizer.zero_grad() before loss.backward() (or after "
                    "optimizer.step()), never between them: it throws away the gradients the "
                    "step was about to apply."),
            Pitfall("T6", "clipping before backward", _step_with(clip_before_backward=True),
                    "clip after loss.backward(), which computes the gradients, and before "
                    "optimizer.step(), which applies them: clipping before backward clips last "
                    "step's (cleared) gradients."),
            Pitfall("T6", "no clipping", _step_with(clip=None),
                    "clip the gradients' global norm to clip_norm with "
                    "torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm), between "
                    "backward() and optimizer.step()."),
            Pitfall("T6", "clip_grad_value_", _step_with(clip="value"),
                    "clip the global norm of all gradients together with clip_grad_norm_; "
                    "clip_grad_value_ clips each number on its own and changes the direction."),
            Pitfall(None, "the loss after the update", _step_with(loss_after=True),
                    "return the loss computed before the update, the one backward() used: "
                    "loss.item() of the loss_fn call at the start of the step."),
        ),
    ),
}
