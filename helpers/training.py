"""Training the Transformer, and saving it. Taught in notebook 09: label smoothing, Adam with
the paper's warm-up schedule, a training loop that takes any ``loss_fn(model, batch)``, the
teacher-forcing loss and checkpoints (config + vocabularies + weights in one file).
"""

import dataclasses
import math
import time
from pathlib import Path
from typing import Callable, NamedTuple, Optional

import torch
from tqdm.auto import tqdm

from .checks import check_labels, check_sizes, labels_in_vocabulary
from .data import PAD_ID, Vocab
from .model import Transformer, TransformerConfig, build_model


def count_parameters(model: torch.nn.Module) -> int:
    """Trainable parameters (a tied matrix counts once)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def label_smoothed_nll(logits: torch.Tensor, labels: torch.Tensor, epsilon: float = 0.1,
                       ignore_index: int = -100) -> torch.Tensor:
    """Cross-entropy against smoothed targets (section 5.4), equal to ``F.cross_entropy(logits,
    labels, label_smoothing=epsilon, ignore_index=ignore_index)``: ``(1 - epsilon) * (-log
    p[label]) + epsilon * mean over v of (-log p[v])``, averaged over the labels that are not
    ``ignore_index`` (padding adds nothing, not even smoothing mass)."""
    check_labels(logits, labels, epsilon)  # shapes, an integer dtype, epsilon in [0, 1]
    V = logits.shape[-1]
    log_probs = logits.reshape(-1, V).log_softmax(dim=-1)  # (..., V) -> (N, V)
    labels = labels.reshape(-1)  # (...) -> (N,)
    keep = labels != ignore_index  # (N,) False on padding
    safe_labels = labels.masked_fill(~keep, 0)  # any valid index; those rows are dropped below
    with labels_in_vocabulary(safe_labels, V, ignore_index):
        nll = -log_probs.gather(1, safe_labels[:, None].long()).squeeze(1)  # (N,) -log p[label]
    uniform = -log_probs.mean(dim=-1)  # (N,) cross-entropy with the uniform distribution
    per_token = (1.0 - epsilon) * nll + epsilon * uniform  # (N,)
    return per_token[keep].sum() / keep.sum().clamp(min=1)  # 0, not NaN, if all is padding


def transformer_lr(step: int, d_model: int, warmup: int, scale: float = 1.0) -> float:
    """Equation (3) of the paper: ``scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)``.

    It grows linearly for ``warmup`` steps, peaks at ``step == warmup`` with
    ``scale / sqrt(d_model * warmup)``, then decays as ``1 / sqrt(step)``. Steps count from 1.
    """
    if step < 1 or warmup < 1:
        raise ValueError(f"step and warmup count from 1, got step={step}, warmup={warmup}")
    return scale * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def warmup_schedule(d_model: int, warmup: int, scale: float = 1.0) -> Callable[[int], float]:
    """A ``lr_lambda`` for ``torch.optim.lr_scheduler.LambdaLR`` (with the optimizer's lr = 1).

    LambdaLR counts from 0 (the lr of the first update is ``lr_lambda(0)``), the paper from 1.
    """
    return lambda step: transformer_lr(step + 1, d_model, warmup, scale)


def make_optimizer(model: torch.nn.Module, d_model: int, warmup: int, scale: float = 1.0):
    """``(optimizer, scheduler)``: Adam with ``betas=(0.9, 0.98), eps=1e-9`` (section 5.3) and
    the warm-up schedule; call ``scheduler.step()`` after every ``optimizer.step()``."""
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    schedule = warmup_schedule(d_model, warmup, scale)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    return optimizer, scheduler


def train_step(model: torch.nn.Module, batch, loss_fn: Callable, optimizer, scheduler=None,
               clip_norm: Optional[float] = 1.0) -> float:
    """One optimisation step on ``batch``; returns its loss (a float, before the update).

    ``loss_fn(model, batch)`` returns a 0-d loss; ``clip_norm=None``: no clipping. A loss of inf
    or NaN raises a ``ValueError`` before the update, so the weights stay as they were.
    """
    optimizer.zero_grad(set_to_none=True)  # backward() adds to .grad: clear the last step's
    loss = loss_fn(model, batch)
    if not math.isfinite(loss.item()):  # before the update spreads it into every weight
        raise ValueError(f"the loss is {loss.item()}: inf or NaN in the inputs, a log of 0, or a "
                         "learning rate so high that training diverged; the model keeps the "
                         "weights of the step before")
    loss.backward()
    if clip_norm is not None:  # the gradients that optimizer.step() is about to apply
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
    optimizer.step()
    if scheduler is not None:
        scheduler.step()  # after the update: it sets the rate of the next one
    return loss.item()


def train(model: torch.nn.Module, batches, loss_fn: Callable, optimizer, scheduler=None,
          max_steps: Optional[int] = None, clip_norm: Optional[float] = 1.0,
          max_seconds: Optional[float] = None, device=None, progress: bool = True,
          on_step: Optional[Callable[[int, float], None]] = None,
          step: Optional[Callable] = None) -> list:
    """Every step's loss of :func:`train_step` (or ``step``) on each of ``batches``, until they
    run out, ``max_steps`` or ``max_seconds``; ``on_step(step, loss)`` after each. The model's
    mode is restored at the end; an inf or NaN loss raises a ``ValueError`` naming the step."""
    if max_steps is not None:
        check_sizes("train", max_steps=max_steps)  # 0 or less would never stop an endless stream
    step_fn, was_training, history = step or train_step, model.training, []
    model.train()
    start = time.perf_counter()
    bar = tqdm(total=max_steps, disable=not progress, desc="training", unit="step")
    try:
        for number, batch in enumerate(batches, start=1):
            if device is not None:
                batch = batch.to(device)
            try:
                history.append(step_fn(model, batch, loss_fn, optimizer, scheduler, clip_norm))
            except ValueError as error:  # a clear message (ours), with the step it happened at
                raise ValueError(f"train, step {number}: {error}") from None
            bar.update(1)
            bar.set_postfix(loss=f"{history[-1]:.3f}", refresh=False)
            if on_step is not None:
                on_step(number, history[-1])
            out_of_time = max_seconds is not None and time.perf_counter() - start >= max_seconds
            if number == max_steps or out_of_time:
                break
    finally:
        bar.close()
        model.train(was_training)
    if not history:  # nothing was trained: an empty data set, or an exhausted generator
        raise ValueError("train: `batches` yielded no batch, so no step was taken (an empty "
                         "data set, or a generator that was already used up?)")
    return history


def translation_loss(model: Transformer, batch, label_smoothing: float = 0.1) -> torch.Tensor:
    """Teacher forcing: the decoder reads ``tgt_in`` and is scored against ``tgt_out``."""
    logits = model(batch.src, batch.tgt_in, batch.src_mask, batch.tgt_mask)  # (B, T, V)
    return label_smoothed_nll(logits, batch.tgt_out, label_smoothing, ignore_index=PAD_ID)


class Checkpoint(NamedTuple):
    model: Transformer
    config: TransformerConfig
    src_vocab: Vocab
    tgt_vocab: Vocab
    metadata: dict


def save_checkpoint(path, model: Transformer, config: TransformerConfig, src_vocab: Vocab,
                    tgt_vocab: Vocab, metadata: Optional[dict] = None) -> None:
    """Save config, vocabularies and weights as plain types, for ``weights_only`` loading."""
    torch.save({
        "format": 1,
        "config": dataclasses.asdict(config),
        "src_vocab": list(src_vocab.tokens),
        "tgt_vocab": list(tgt_vocab.tokens),
        "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "metadata": dict(metadata or {}),
    }, path)


def load_checkpoint(path, config: Optional[TransformerConfig] = None, device="cpu") -> Checkpoint:
    """Rebuild the model saved by :func:`save_checkpoint`, in eval mode, on ``device``; with
    ``config``, a ``ValueError`` names every field that differs from the saved one. Any other
    file is a ``ValueError`` saying why it is not such a checkpoint."""
    if config is not None and not isinstance(config, TransformerConfig):
        raise TypeError(f"config must be a TransformerConfig, got {type(config).__name__}; "
                        "build one with TransformerConfig(**your_dict)")
    saved = _read_checkpoint(path)
    try:
        saved_config = TransformerConfig(**saved["config"])
        src_vocab, tgt_vocab = Vocab(saved["src_vocab"]), Vocab(saved["tgt_vocab"])
    except (TypeError, ValueError) as error:
        raise _not_a_checkpoint(path, f"its config or vocabularies are damaged: {error}") from None
    if config is not None and config != saved_config:
        differ = [f"{f.name}: checkpoint {getattr(saved_config, f.name)!r}, given "
                  f"{getattr(config, f.name)!r}" for f in dataclasses.fields(TransformerConfig)
                  if getattr(saved_config, f.name) != getattr(config, f.name)]
        raise ValueError(f"the checkpoint {path} was saved with a different TransformerConfig: "
                         + "; ".join(differ))
    model = build_model(saved_config, len(src_vocab), len(tgt_vocab))
    try:
        model.load_state_dict(saved["state_dict"])
    except (RuntimeError, TypeError, AttributeError) as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise _not_a_checkpoint(path, f"its weights do not fit its config: {reason}") from None
    return Checkpoint(model.to(device).eval(), saved_config, src_vocab, tgt_vocab,
                      saved["metadata"])


_CHECKPOINT_KEYS = ("format", "config", "src_vocab", "tgt_vocab", "state_dict", "metadata")


def _not_a_checkpoint(path, why: str) -> ValueError:
    return ValueError(f"{path} is not a checkpoint saved by save_checkpoint ({why})")


def _read_checkpoint(path) -> dict:
    """The dict that :func:`save_checkpoint` wrote, or a ValueError saying why ``path`` is not
    one. Not torch's messages: some advise turning safe loading off."""
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
    except (FileNotFoundError, IsADirectoryError, PermissionError):  # their message says it
        raise
    except Exception as error:  # torch raises many kinds for a damaged file
        empty = isinstance(path, (str, Path)) and Path(path).stat().st_size == 0
        why = ("the file is empty" if empty else
               "torch.load cannot read it safely: the file is truncated or damaged, was not "
               "written by torch.save, or holds Python objects other than tensors and plain "
               f"types ({type(error).__name__})")
        raise _not_a_checkpoint(path, why) from None
    if not isinstance(saved, dict):
        raise _not_a_checkpoint(path, f"it holds a {type(saved).__name__}, not a dict")
    if saved and all(torch.is_tensor(v) for v in saved.values()):
        raise _not_a_checkpoint(path, "it holds a plain state_dict, weights only; "
                                "save_checkpoint also stores the config and the vocabularies")
    missing = [key for key in _CHECKPOINT_KEYS if key not in saved]
    if missing:
        raise _not_a_checkpoint(path, f"it lacks the keys {', '.join(missing)}")
    if saved["format"] != 1 or not isinstance(saved["config"], dict):
        raise _not_a_checkpoint(path, f"format {saved['format']!r} with config "
                                f"{type(saved['config']).__name__}; expected format 1, a dict")
    return saved
