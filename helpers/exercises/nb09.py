"""Notebook 09's exercises: ``label_smoothed_nll``, ``transformer_lr`` and ``train_step``."""

import numbers
import warnings
from dataclasses import dataclass
from unittest import mock

import torch
from torch import nn

from ..training import label_smoothed_nll, train_step, transformer_lr
from .cases import exercise, randn, slips
from .engine import Case, Exercise, NumberCase, tensor_reference

_MIX = "per_token = (1.0 - epsilon) * nll + epsilon * uniform"
_GUARD = ("with labels_in_vocabulary(safe_labels, V, ignore_index):", "if True:")
_Q = ("q = torch.full_like(log_probs, epsilon / V).scatter(1, safe_labels[:, None], "
      "1 - epsilon + epsilon / V)\n    per_token = ")
LABEL_SMOOTHING_ROWS = (  # slips of label_smoothed_nll: (id, name, edits, hint)
    ("T7", "log of softmax", ("log_softmax(dim=-1)", "softmax(dim=-1).log()"), None),
    ("T8", "gather on unmasked labels", [_GUARD, ("safe_labels[:, None]", "labels[:, None]")],
     None),
    ("T8", "indexing with unmasked labels",
     [_GUARD, ("log_probs.gather(1, safe_labels[:, None].long()).squeeze(1)",
               "log_probs[torch.arange(len(labels)), labels]")], None),
    ("T3", "smoothing term kept on padding",
     [(_MIX, _MIX.replace("* nll", "* nll * keep")), ("per_token[keep].sum()", "per_token.sum()")],
     None),
    ("T3", "KL divergence with log(0)", (_MIX, _Q + "(q * (q.log() - log_probs)).sum(-1)"),
     "q * log(q) is 0 * log(0) = NaN where the target is 0 (epsilon = 0). Compute the "
     "cross-entropy -sum q log p with log_softmax, which stays finite."),
    (None, "KL divergence instead of cross-entropy",
     [(_MIX, _Q + "torch.nn.functional.kl_div(log_probs, q, reduction='none').sum(-1)")],
     "a KL divergence has the same gradients but is not the loss F.cross_entropy reports: "
     "return the cross-entropy -sum_v q_v log p_v."),
    (None, "epsilon spread over V - 1 tokens",
     [("epsilon * uniform", "epsilon * (-log_probs.sum(-1) - nll) / (V - 1)")],
     "F.cross_entropy(label_smoothing=epsilon) spreads epsilon over all V tokens, the right one "
     "included: q = (1 - epsilon) one-hot + epsilon / V."),
    (None, "padding not ignored", [("labels = labels.reshape(-1)",
                                    "labels = labels.reshape(-1).clamp(min=0)"),
                                   ("keep = labels != ignore_index", "keep = labels >= 0")],
     "a padded position is not a word to predict: leave out every label equal to ignore_index."),
    (None, "divided by every position", ("keep.sum().clamp(min=1)", "keep.numel()"),
     "divide by the number of real (non-ignored) tokens, not by every position."),
    (None, "summed instead of averaged", (" / keep.sum().clamp(min=1)", ""),
     "average over the real tokens (as F.cross_entropy does), do not sum."),
    (None, "no smoothing", (_MIX, "per_token = nll"), "that is the plain cross-entropy: mix in "
     "the uniform target, (1 - epsilon) * (-log p[label]) + epsilon * mean over v of (-log p[v])."),
    (None, "no 1 - epsilon", ("(1.0 - epsilon) * nll", "nll"),
     "weigh -log p[label] by 1 - epsilon: the other epsilon is spread over the V tokens."),
    (None, "epsilon times the sum", ("-log_probs.mean(dim=-1)", "-log_probs.sum(dim=-1)"),
     "each token gets epsilon / V: epsilon times the MEAN of -log p over the vocabulary."),
    (None, "epsilon and 1 - epsilon swapped",
     [(_MIX, "per_token = epsilon * nll + (1.0 - epsilon) * uniform")],
     "the weights are swapped: (1 - epsilon) on -log p[label], epsilon on the mean of -log p."),
    (None, "the smoothing term's sign", ("-log_probs.mean", "log_probs.mean"),
     "both terms are -log p (positive): + epsilon * mean(-log p), not + epsilon * mean(log p)."),
    (None, "log-softmax over the positions", ("log_softmax(dim=-1)", "log_softmax(dim=0)"),
     "log_softmax over the vocabulary, the last axis (dim=-1)."),
    (None, "pad id 0 written in", [("keep = labels != ignore_index", "keep = labels != 0"),
                                   ("labels.masked_fill(~keep, 0)",
                                    "labels.masked_fill(~keep, 0).clamp(min=0)")],
     "compare the labels with ignore_index, the argument, not with 0 (PyTorch's default is -100)."),
)


def _ls_cases(g):
    def case(label, shape, V, epsilon, ignore_index, pads=None):
        logits, labels = 2.0 * randn(g, *shape, V), torch.randint(4, V, shape, generator=g)
        for row, start in (pads or {}).items():  # {sentence: its first padded position}
            labels[row, start:] = ignore_index  # labels 4..V-1 elsewhere: never a special id
        return Case(f"{label}, epsilon={epsilon}, ignore_index={ignore_index}",
                    (logits, labels, epsilon, ignore_index))

    underflow = torch.tensor([[200.0, 0.0, -200.0, 5.0, 1.0], [-200.0, 200.0, 0.0, 3.0, 1.0]])
    return [
        case("B=2, T=5, V=7, padding at the end of sentence 1", (2, 5), 7, 0.1, 0, {1: 3}),
        case("2-D logits (N, V) = (6, 9), nothing ignored", (6,), 9, 0.2, -100),
        case("epsilon=0 is plain cross-entropy; B=2, T=4, V=6", (2, 4), 6, 0.0, 0, {0: 3, 1: 2}),
        case("mostly padding: B=3, T=6, V=8", (3, 6), 8, 0.1, 0, {0: 2, 1: 4, 2: 1}),
        case("pad id 2: B=2, T=3, V=10", (2, 3), 10, 0.3, 2, {0: 2}),
        case("PyTorch's padding label -100: B=2, T=4, V=7", (2, 4), 7, 0.1, -100, {0: 3, 1: 2}),
        Case("logits [200, 0, -200]: a probability underflows to 0, epsilon=0.1, ignore_index=0",
             (underflow, torch.tensor([3, 4]), 0.1, 0)),
    ]


_ARMS = "min(step ** -0.5, step * warmup ** -1.5)"
_D = "the factor is d_model^-0.5 = 1 / sqrt(d_model)"
LR_PITFALLS = slips(transformer_lr, [
    (None, "steps counted from 0", ("    return", "    step = step - 1\n    return"),
     "the paper counts steps from 1 (step^-0.5 divides by zero at step 0); warmup_schedule "
     "passes step + 1 to it because LambdaLR counts from 0."),
    (None, "step + 1", ("    return", "    step = step + 1\n    return"),
     "use step as it is: it counts from 1 (the + 1 belongs to warmup_schedule)."),
    (None, "max instead of min", (_ARMS, _ARMS.replace("min", "max")),
     "take the min of the two arms: the warm-up step * warmup^-1.5, then the decay step^-0.5."),
    (None, "exponents swapped", (_ARMS, "min(step ** -1.5, step * warmup ** -0.5)"),
     "step^-0.5 is the decay and step * warmup^-1.5 the linear warm-up; with the exponents "
     "swapped the two arms no longer meet at step = warmup."),
    (None, "warmup^-0.5", ("warmup ** -1.5", "warmup ** -0.5"),
     "the warm-up arm is step * warmup^-1.5: it meets step^-0.5 at step = warmup."),
    (None, "warmup^1.5", ("warmup ** -1.5", "warmup ** 1.5"),
     "the rate grows during the warm-up as step * warmup^-1.5 (a negative exponent)."),
    (None, "step^0.5", ("step ** -0.5", "step ** 0.5"),
     "after the warm-up the rate falls as step^-0.5 = 1 / sqrt(step) (a negative exponent)."),
    (None, "d_model factor d_model ** -1.5", ("d_model ** -0.5", "d_model ** -1.5"),
     _D + "; -1.5 is the warm-up's exponent."),
    (None, "d_model factor d_model ** -1.0", ("d_model ** -0.5", "d_model ** -1.0"),
     _D + ", not 1 / d_model."),
    (None, "d_model factor 1", ("d_model ** -0.5", "1"),
     "multiply by d_model^-0.5: wider models get smaller steps."),
    (None, "d_model factor d_model ** 0.5", ("d_model ** -0.5", "d_model ** 0.5"),
     _D + ", not sqrt(d_model)."),
])


def _lr_cases(g):
    return [NumberCase(f"step={s}, d_model={d}, warmup={w}{note}", (s, d, w)) for s, d, w, note in (
        (1, 512, 4000, " (the first step)"), (4000, 512, 4000, " (the peak, the paper's setting)"),
        (100000, 512, 4000, " (long after the peak)"), (50, 64, 200, ""),
        (200, 64, 200, " (the peak)"), (1000, 64, 200, ""), (7, 16, 3, ""))]

_CLIP = "torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)"
_ZERO = ("optimizer.zero_grad(set_to_none=True)", "pass")
_STEP = "    optimizer.step()\n"
_NO_CLIP = ("        " + _CLIP, "        pass")
TRAIN_STEP_PITFALLS = slips(train_step, [
    ("T4", "no zero_grad", [_ZERO], None),
    ("T5", "scheduler before optimizer", [(_STEP, "    scheduler.step()\n" + _STEP),
                                          ("        scheduler.step()", "        pass")], None),
    ("T6", "clipping after the step", [_NO_CLIP, (_STEP, _STEP + f"    {_CLIP}\n")], None),
    ("T9", "no scheduler.step()", ("scheduler.step()", "pass"), None),
    ("T9", "scheduler.step() twice", ("scheduler.step()", "scheduler.step(); scheduler.step()"),
     "call scheduler.step() once per step: two calls skip every other rate."),
    ("T10", "no optimizer.step()", (_STEP, "    pass\n"), None),
    ("T10", "zero_grad between backward and step",
     [_ZERO, (_STEP, "    optimizer.zero_grad()\n" + _STEP)],
     "call optimizer.zero_grad() before loss.backward(), never between it and the step: it "
     "throws away the gradients the step was about to apply."),
    ("T6", "clipping before backward",
     [_NO_CLIP, ("    loss.backward()", f"    {_CLIP}\n    loss.backward()")],
     "clip after loss.backward(), which computes the gradients, and before optimizer.step(), "
     "which applies them."),
    ("T6", "no clipping", (_CLIP, "pass"), "clip the gradients' global norm to clip_norm with "
     "clip_grad_norm_, between backward() and optimizer.step()."),
    ("T6", "clip_grad_value_", ("clip_grad_norm_", "clip_grad_value_"),
     "clip the global norm of all gradients together with clip_grad_norm_, not each number."),
    ("T6", "each parameter clipped on its own",
     [(_CLIP, "[torch.nn.utils.clip_grad_norm_(p, clip_norm) for p in model.parameters()]")],
     "clip the global norm of all gradients together: one clip_grad_norm_(model.parameters(), "
     "clip_norm) call."),
    (None, "a fixed clipping norm", (_CLIP, _CLIP.replace("clip_norm)", "1.0)")),
     "clip to clip_norm, the argument, not a fixed number: the cases clip to 0.5, 1.0 and 0.1."),
    (None, "the loss after the update",
     [("return loss.item()", "return loss_fn(model, batch).item()")],
     "return the loss computed before the update, the one backward() used."),
    (None, "the loss tensor returned", ("return loss.item()", "return loss"),
     "return loss.item(), a float, not the loss tensor, which keeps the step's graph alive."),
    (None, "loss.item() before backward",
     [("loss = loss_fn(model, batch)", "loss = loss_fn(model, batch).item()"),
      ("if not math.isfinite(loss.item()):", "if False:"), ("return loss.item()", "return loss")],
     "keep the loss a tensor until loss.backward() (a float has no backward()), then return "
     "loss.item()."),
])


def _mse(model, batch):
    x, y = batch
    return ((model(x) - y) ** 2).mean()


@dataclass(frozen=True)
class _TrainingCase(Case):
    """Three steps on a fresh seeded model (SGD with momentum, a rate that changes every step,
    clipping that really clips) -> ``(losses, weights, rate, where each step clipped)``, which
    shows even a clip that changed nothing; a step that returns no float ends the run with it."""

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
            losses, clipping, events = [], [], []  # events: ("clip", any gradient?), ("step", norm)

            def recorded_update(optimizer, args, kwargs):  # a pre-hook of optimizer.step
                grads = [p.grad.flatten() for p in model.parameters() if p.grad is not None]
                events.append(("step", torch.cat(grads).norm().item() if grads else 0.0))

            clip_norm_ = torch.nn.utils.clip_grad_norm_

            def recorded_clip(parameters, *args, **kwargs):
                parameters = [parameters] if torch.is_tensor(parameters) else list(parameters)
                events.append(("clip", any(p.grad is not None and bool(p.grad.any())
                                           for p in parameters)))
                return clip_norm_(parameters, *args, **kwargs)

            optimizer.register_step_pre_hook(recorded_update)
            with mock.patch.object(torch.nn.utils, "clip_grad_norm_", recorded_clip):
                for batch in batches:
                    events.clear()
                    loss = fn(model, batch, _mse, optimizer, scheduler, self.clip_norm)
                    if torch.is_tensor(loss):
                        return loss.detach()
                    if not isinstance(loss, numbers.Real):
                        return loss  # None, a tuple, a string...: reported as it is
                    losses.append(float(loss))
                    clipping.append(_where_clipped(events, self.clip_norm))
        weights = torch.cat([p.detach().flatten() for p in model.parameters()])
        return (torch.tensor(losses), weights,
                torch.tensor(optimizer.param_groups[0]["lr"], dtype=torch.float32),
                torch.tensor(clipping))


def _where_clipped(events, clip_norm):
    """0: the update applied gradients of norm <= clip_norm; 1: no clip saw them; 2: clipped
    before backward(); 3: after the update; -1: no update at all."""
    steps = [i for i, (kind, _) in enumerate(events) if kind == "step"]
    if not steps:
        return -1
    if events[steps[0]][1] <= clip_norm * (1 + 1e-4):
        return 0  # what the update applied was within the norm
    clips = [(i, grads) for i, (kind, grads) in enumerate(events) if kind == "clip"]
    if any(i > steps[0] for i, _ in clips):
        return 3
    return 2 if any(not grads for _, grads in clips) else 1


def _train_step_cases(g):  # one optimizer.step() first: it imports a part of torch (seconds)
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
        reference=tensor_reference(transformer_lr, torch.float32), make_cases=_lr_cases,
        sources=(transformer_lr,), outputs=("lr",), atol=0.0, rtol=1e-5, pitfalls=LR_PITFALLS),
    "label_smoothed_nll": exercise(label_smoothed_nll, _ls_cases, "loss", *LABEL_SMOOTHING_ROWS),
    "train_step": Exercise(
        reference=train_step, make_cases=_train_step_cases, sources=(train_step,),
        outputs=("losses", "weights", "learning rate",
                 "where the gradients were clipped (0: between backward and step)"),
        pitfalls=TRAIN_STEP_PITFALLS),
}
