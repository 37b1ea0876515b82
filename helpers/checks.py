"""Input checks shared by every module: a ValueError or TypeError naming what was expected and
what was given, before torch fails deep inside or broadcasts into a silent wrong answer. Only
shapes and dtypes are compared (microseconds); values are read only after a lookup failed.
"""

import contextlib
import functools

import torch

TOKEN_DTYPES = (torch.int64, torch.int32)  # the index dtypes nn.Embedding accepts


def describe(x) -> str:
    """What ``x`` is, for error messages: a tensor's shape and dtype, else its type."""
    if torch.is_tensor(x):
        return f"a {x.dtype} tensor of shape {tuple(x.shape)}"
    shape = getattr(x, "shape", None)
    return f"{type(x).__module__}.{type(x).__name__}" + (f" of shape {shape}" if shape else "")


def check_sizes(where: str, **sizes) -> None:
    """Each size must be a whole number >= 1 (a bool or a float like 2.0 is refused)."""
    for name, value in sizes.items():
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{where}: {name} must be a whole number (int), got {value!r}")
        if value < 1:
            raise ValueError(f"{where}: {name} must be at least 1, got {value}")


def head_size(d_model: int, num_heads: int, where: str) -> int:
    """``d_k = d_model / num_heads``, or a clear error when the heads cannot share d_model."""
    check_sizes(where, d_model=d_model, num_heads=num_heads)
    if d_model % num_heads != 0:
        raise ValueError(f"{where}: d_model={d_model} must be divisible by num_heads={num_heads} "
                         "so that every head gets d_k = d_model / num_heads features")
    return d_model // num_heads


@functools.lru_cache(maxsize=None)
def _axes(layout: str):
    """``"(B, 1, 1, L)"`` -> the axis names, and the sizes the layout itself fixes."""
    names = tuple(layout.strip("()").split(", "))
    return names, {name: int(name) for name in names if name.isdigit()}


def check_tensor(x, where: str, layout: str, dtype=None, **sizes) -> None:
    """``x`` must be a tensor with the axes of ``layout`` (``"(B, 1, 1, L)"``), none empty,
    some fixed by ``sizes`` (``d_model=64``; None: any); ``dtype``: None (any), ``"float"``, one
    ``torch.dtype`` or a tuple."""
    names, fixed = _axes(layout)
    if not torch.is_tensor(x):
        hint = "; convert it with torch.from_numpy(x)" if type(x).__module__ == "numpy" else ""
        raise TypeError(f"{where} must be a torch.Tensor {layout}, got {describe(x)}{hint}")
    shape = x.shape
    if len(shape) != len(names) or 0 in shape:
        raise ValueError(f"{where} must have shape {layout} with no empty axis, "
                         f"got {tuple(shape)}")
    for axis, name in enumerate(names):
        want = sizes.get(name, fixed.get(name))
        if want is not None and shape[axis] != want:
            expected = ", ".join(f"{n}={sizes[n]}" if sizes.get(n) is not None else n
                                 for n in names)
            raise ValueError(f"{where} must have shape ({expected}), got {tuple(shape)}")
    if dtype is None or x.dtype == dtype:
        return
    if isinstance(dtype, torch.dtype) and dtype.is_floating_point and _autocast(x):
        dtype = "float"  # under torch.autocast, layers hand on float16/bfloat16 activations
    allowed = dtype if isinstance(dtype, tuple) else (dtype,)
    if not (x.dtype in allowed or (dtype == "float" and x.is_floating_point())):
        wanted = "a floating-point" if dtype == "float" else " or ".join(map(str, allowed))
        hint = f"; convert it with .to({allowed[0]})" if dtype != "float" else ""
        raise TypeError(f"{where} must have dtype {wanted}, got {x.dtype}{hint}")


def check_projection_inputs(query, key, value, d_model: int, dtype) -> None:
    """``MultiHeadAttention``'s inputs: ``(B, L, d_model)`` tensors of ``dtype``, one batch size."""
    for name, x in (("query", query), ("key", key), ("value", value)):
        check_tensor(x, f"MultiHeadAttention: {name}", "(B, L, d_model)", dtype,
                     B=None if name == "query" else query.shape[0], d_model=d_model)


def check_token_ids(tokens, name: str) -> None:
    """``tokens (B, L)``: integer ids (shape and dtype only)."""
    check_tensor(tokens, f"Transformer: {name} (token ids)", "(B, L)", TOKEN_DTYPES)


@contextlib.contextmanager
def ids_in_vocabulary(tokens, vocab_size: int, name: str):
    """Around ``embedding(tokens)``: an id outside ``0 .. vocab_size - 1`` gets a clear error,
    once ``nn.Embedding`` refused it (on a GPU, torch's device-side assert reports it)."""
    try:
        yield
    except IndexError:
        raise ValueError(f"{name} holds token ids from {int(tokens.min())} to {int(tokens.max())}, "
                         f"but the vocabulary has ids 0..{vocab_size - 1}") from None


def check_labels(logits, labels, epsilon: float) -> None:
    """``label_smoothed_nll``'s inputs: ``logits (..., V)`` floats for ``labels (...)`` integer
    ids, and a smoothing ``epsilon`` in [0, 1]."""
    if not torch.is_tensor(logits) or not logits.is_floating_point() or logits.dim() == 0:
        raise TypeError(f"label_smoothed_nll: logits must be a floating-point tensor (..., V), "
                        f"got {describe(logits)}")
    if not torch.is_tensor(labels) or labels.is_floating_point() or labels.is_complex() \
            or labels.dtype == torch.bool:
        hint = ".long()" if torch.is_tensor(labels) else "torch.tensor(labels)"
        raise TypeError(f"label_smoothed_nll: labels must be a tensor of integer class ids, got "
                        f"{describe(labels)}; convert it with {hint}")
    if logits.shape[:-1] != labels.shape:
        raise ValueError(f"expected logits (..., V) for labels (...), got logits "
                         f"{tuple(logits.shape)} and labels {tuple(labels.shape)}")
    if not 0.0 <= epsilon <= 1.0:
        raise ValueError(f"epsilon must be in [0, 1], got {epsilon}")


@contextlib.contextmanager
def labels_in_vocabulary(labels, vocab_size: int, ignore_index: int):
    """Around ``log_probs.gather(labels)``: a clear error for a label that it refused."""
    try:
        yield
    except RuntimeError as error:
        if "out of bounds" not in str(error):
            raise
        raise ValueError(f"label_smoothed_nll: labels must be class ids in 0..{vocab_size - 1} "
                         f"(the logits' last axis) or ignore_index={ignore_index}; got labels from "
                         f"{int(labels.min())} to {int(labels.max())}") from None


def check_memory(memory, batch: int) -> None:
    """``Transformer.decode``'s memory: ``(B, S, d_model)`` with the target's batch size."""
    if memory.dim() != 3 or memory.shape[0] != batch:
        raise ValueError(f"memory must be (B, S, d_model) with the batch size of tgt ({batch}), "
                         f"got {tuple(memory.shape)}")


def check_same_batch(src, tgt) -> None:
    """``Transformer.forward``: ``src (B, S)`` and ``tgt (B, T)`` with one batch size."""
    if src.dim() == 2 and tgt.dim() == 2 and src.shape[0] != tgt.shape[0]:
        raise ValueError(f"src and tgt must have the same batch size, got {src.shape[0]} and "
                         f"{tgt.shape[0]}")


def _autocast(x: torch.Tensor) -> bool:
    try:
        return torch.is_autocast_enabled(x.device.type)
    except (TypeError, RuntimeError):  # older torch, or a device type autocast does not know
        return False


def _broadcasts(shape, target) -> bool:
    """Does ``shape`` broadcast to ``target`` (sizes equal or 1, counted from the right)?"""
    if len(shape) > len(target):
        return False
    tail = target[len(target) - len(shape):]
    return all(s in (1, t) for s, t in zip(shape, tail, strict=True))


def _broadcast_shape(*shapes):
    """The shape that ``shapes`` broadcast to, or None (plain Python: torch.broadcast_shapes
    costs about a second on its first call)."""
    n = max(map(len, shapes))
    padded = [(1,) * (n - len(s)) + tuple(s) for s in shapes]
    out = tuple(max(sizes) for sizes in zip(*padded, strict=True))
    return out if all(_broadcasts(s, out) for s in shapes) else None


def _expected_masks(target, names) -> str:
    full = ", ".join(f"{n}={s}" for n, s in zip(names, target, strict=True))
    return (f"a bool mask with 4 axes ({full}), 1 where it broadcasts: a padding mask "
            f"(B, 1, 1, Lk) as padding_mask() returns it, a look-ahead mask (1, 1, Lq, Lk) "
            f"as causal_mask(Lq)[None, None], or both combined with & (B, 1, Lq, Lk)")


def check_scores_mask(mask, scores_shape, where: str, names=None) -> None:
    """``mask`` (or None) must be a bool tensor with as many axes as the attention scores
    ``(..., Lq, Lk)``, each size equal to the scores' or 1. Exactly as many: a ``(B, L)`` padding
    mask would read as ``(Lq, Lk)`` whenever B equals Lq, and hide the wrong keys."""
    if mask is None:
        return
    scores_shape = tuple(scores_shape)
    names = names or ("...",) * (len(scores_shape) - 2) + ("Lq", "Lk")
    if not torch.is_tensor(mask):
        raise TypeError(f"{where}: mask must be a bool torch.Tensor (True = may attend), "
                        f"got {describe(mask)}")
    if mask.dtype != torch.bool:
        raise TypeError(f"{where}: mask must be a bool tensor (True = may attend), got dtype "
                        f"{mask.dtype}; convert a 0/1 mask with mask.bool(), an additive float "
                        "mask with mask == 0")
    shape = tuple(mask.shape)
    if 0 in shape:
        raise ValueError(f"{where}: mask of shape {shape} has an empty axis; expected sizes "
                         f"that broadcast to the attention scores {scores_shape}")
    if mask.dim() != len(scores_shape):
        hint = (" A 2-D mask is refused whatever its sizes: (Lq, Lk) and a (B, Lk) padding "
                "mask look alike." if mask.dim() == 2 else "")
        raise ValueError(
            f"{where}: mask of shape {shape} has {mask.dim()} axes, but the attention scores "
            f"{scores_shape} have {len(scores_shape)}: expected "
            + (_expected_masks(scores_shape, names) if len(scores_shape) == 4 else
               f"a bool mask with {len(scores_shape)} axes like the scores, 1 where it "
               f"broadcasts") + "." + hint
        )
    if not _broadcasts(shape, scores_shape):
        raise ValueError(
            f"{where}: mask of shape {shape} does not broadcast to the attention scores "
            + (f"{scores_shape}; expected {_expected_masks(scores_shape, names)}"
               if len(scores_shape) == 4 else
               f"(..., Lq, Lk) = {scores_shape}: expected each size equal to the scores' or 1")
        )


def check_mask(mask, batch: int, lq: int, lk, where: str, heads=None) -> None:
    """``mask`` (or None) must suit attention scores ``(batch, heads, lq, lk)``; ``heads=None``
    accepts any head axis, ``lk=None`` any number of keys (a KV cache adds keys)."""
    if mask is None:
        return
    own = tuple(mask.shape) if torch.is_tensor(mask) else ()
    heads = heads if heads is not None else (own[1] if len(own) == 4 else 1)
    lk = lk if lk is not None else (own[-1] if own else 1)
    check_scores_mask(mask, (batch, heads, lq, lk), where, ("B", "h", "Lq", "Lk"))


def check_attention_inputs(query, key, value, mask):
    """Clear errors for bad shapes, dtypes or masks, before torch would fail deep inside."""
    for name, x in (("query", query), ("key", key), ("value", value)):
        if not torch.is_tensor(x):
            raise TypeError(f"attention: {name} must be a torch.Tensor, got {describe(x)}")
    qs, ks, vs = query.shape, key.shape, value.shape
    if len(qs) < 2 or len(ks) < 2 or len(vs) < 2:
        raise ValueError("attention expects query (..., Lq, d_k), key (..., Lk, d_k) and value "
                         f"(..., Lk, d_v), got {tuple(qs)}, {tuple(ks)}, {tuple(vs)}")
    dtype = query.dtype
    if not (dtype.is_floating_point and key.dtype == dtype and value.dtype == dtype):
        raise TypeError("attention: query, key and value must share one floating-point dtype, got "
                        f"{query.dtype}, {key.dtype}, {value.dtype}; convert them, e.g. with "
                        ".float()")
    if qs[-1] != ks[-1] or qs[-1] == 0:
        raise ValueError(f"query and key must share their last size d_k (at least 1), got query "
                         f"{tuple(qs)} and key {tuple(ks)}")
    if ks[-2] != vs[-2] or ks[-2] == 0:
        raise ValueError("key and value must have the same number of positions Lk (at least 1), "
                         f"got key {tuple(ks)} and value {tuple(vs)}")
    lead = qs[:-2]
    if not lead == ks[:-2] == vs[:-2]:  # the usual case skips the broadcasting rules
        lead = _broadcast_shape(qs[:-2], ks[:-2], vs[:-2])
    if lead is None:
        raise ValueError(
            "attention: the batch axes (all but the last two) of query, key and value must "
            f"match, got query {tuple(qs)}, key {tuple(ks)} and value {tuple(vs)}"
        )
    if mask is not None:
        check_scores_mask(mask, (*lead, qs[-2], ks[-2]), "attention")
