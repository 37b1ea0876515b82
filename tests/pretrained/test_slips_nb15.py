"""Plausible slips in notebook 15's exercises, written as a learner would write them (not the
registry's variants): each must fail its check with the hint of that slip, never another's, and
right answers written differently from the references must pass.

``SLIPS`` holds, per exercise, (label, the wrong function, what the output must contain: a
pitfall id such as "[R4]" or a phrase of the hint). ``RIGHT`` holds other ways to be right.
The load_marian slips are written two ways: a loop that translates our names into Marian's
(``translated``), and copies module by module (``copied``).
"""

import contextlib
import io
import math

import pytest
import torch

from helpers.model import Transformer
from helpers.positional import sinusoidal_encoding

GENERIC = "Compare your code with the equation"


def run_check(name, fn):
    from helpers.exercises import check

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        ok = check(name, fn)
    return ok, out.getvalue()


# ----------------------------------------------------------------------------------------------
# load_marian
# ----------------------------------------------------------------------------------------------

def build(config, **changes):
    """The Transformer a learner builds from the config (keyword by keyword)."""
    options = dict(d_model=config.d_model, num_heads=config.encoder_attention_heads,
                   num_layers=config.encoder_layers, d_ff=config.encoder_ffn_dim, dropout=0.0,
                   max_len=config.max_position_embeddings, tie_weights=True,
                   activation="silu", interleaved_positions=False)
    options.update(changes)
    return Transformer(config.vocab_size, config.vocab_size, **options)


def their_name(name, attention=None, decoder_norms=None, encoder_norms=None, prefix="model.",
               layer=None, stack=None):
    """A learner's translation of one of our names into Marian's, with knobs for slips."""
    if name == "generator.bias":
        return "final_logits_bias"
    if name in ("src_embed.weight", "tgt_embed.weight", "generator.weight"):
        return "model.shared.weight"
    parts = name.split(".")  # encoder.layers.0.self_attn.w_q.weight
    side, index, rest = parts[0], parts[2], parts[3:]
    if stack:
        side = stack(side, rest)
    if layer is not None:
        index = layer
    projections = attention or {"w_q": "q_proj", "w_k": "k_proj", "w_v": "v_proj",
                                "w_o": "out_proj"}
    norms = (decoder_norms or {"norm1": "self_attn_layer_norm",
                               "norm2": "encoder_attn_layer_norm",
                               "norm3": "final_layer_norm"}) if side == "decoder" else \
        (encoder_norms or {"norm1": "self_attn_layer_norm", "norm2": "final_layer_norm"})
    out = []
    for piece in rest:
        if piece == "feed_forward":
            continue
        piece = {"cross_attn": "encoder_attn", "linear1": "fc1", "linear2": "fc2",
                 **projections, **norms}.get(piece, piece)
        out.append(piece)
    return f"{prefix}{side}.layers.{index}." + ".".join(out)


def translated(model_changes=None, scale=1.0, keep=(), transform=None, **naming):
    """A learner's load_marian: build, translate every name, load, eval."""
    def load(config, state_dict):
        model = build(config, **(model_changes or {}))
        weights = {}
        for name, ours in model.state_dict().items():
            if name in keep:
                weights[name] = ours
                continue
            tensor = state_dict[their_name(name, **naming)]
            if name == "generator.bias":
                tensor = tensor[0]
            if name.endswith("embed.weight") or name == "generator.weight":
                tensor = tensor * scale
            weights[name] = transform(name, tensor) if transform else tensor
        model.load_state_dict(weights)
        return model.eval()
    return load


def copied(copy_bias=True, scratch_first=False, untie=False, eval_mode=True,
           bias_zero=False, **model_changes):
    """A learner's load_marian that copies module by module (the bias handled by the flags)."""
    def load(config, sd):
        if scratch_first:  # a throwaway model first, to look at its names
            build(config).state_dict()
        model = build(config, tie_weights=not untie, **model_changes)

        def copy(module, key):
            module.weight.copy_(sd[f"{key}.weight"])
            module.bias.copy_(sd[f"{key}.bias"])

        with torch.no_grad():
            for embedding in (model.src_embed, model.tgt_embed):
                embedding.weight.copy_(sd["model.shared.weight"])
            if untie:
                model.generator.weight.copy_(sd["lm_head.weight"])
            if copy_bias:
                model.generator.bias.copy_(sd["final_logits_bias"].squeeze(0))
            elif bias_zero:
                model.generator.bias.zero_()
            for side in ("encoder", "decoder"):
                for i, block in enumerate(getattr(model, side).layers):
                    key = f"model.{side}.layers.{i}"
                    blocks = [("self_attn", "self_attn")]
                    if side == "decoder":
                        blocks.append(("cross_attn", "encoder_attn"))
                    for ours, theirs in blocks:
                        for a, b in zip(("w_q", "w_k", "w_v", "w_o"),
                                        ("q_proj", "k_proj", "v_proj", "out_proj"), strict=True):
                            copy(getattr(getattr(block, ours), a), f"{key}.{theirs}.{b}")
                    copy(block.feed_forward.linear1, f"{key}.fc1")
                    copy(block.feed_forward.linear2, f"{key}.fc2")
                    names = ["self_attn", "final"] if side == "encoder" else \
                        ["self_attn", "encoder_attn", "final"]
                    for n, norm in enumerate(names, start=1):
                        copy(getattr(block, f"norm{n}"), f"{key}.{norm}_layer_norm")
        return model.eval() if eval_mode else model
    return load


def swap(a, b):
    base = {"w_q": "q_proj", "w_k": "k_proj", "w_v": "v_proj", "w_o": "out_proj"}
    base[a], base[b] = base[b], base[a]
    return base


def _decoder_reads_encoder(side, rest):
    return "encoder" if side == "decoder" and rest[0] in ("self_attn", "feed_forward") else side


def _self_attention_from_cross(config, sd):
    model = translated()(config, sd)
    with torch.no_grad():
        for layer in model.decoder.layers:
            self_attn = {k: v.clone() for k, v in layer.self_attn.state_dict().items()}
            layer.self_attn.load_state_dict(layer.cross_attn.state_dict())
            layer.cross_attn.load_state_dict(self_attn)
    return model


def _marian_table_copied_into_positions(config, sd):  # right weights, paper's positions
    model = translated()(config, sd)
    model.positional.pe.copy_(sinusoidal_encoding(model.positional.pe.shape[0], config.d_model))
    return model


def _scaled(factor_of):
    def load(config, sd):
        return translated(scale=factor_of(config.d_model))(config, sd)
    return load


LOAD_SLIPS = [
    ("embeddings times sqrt(d_model)", _scaled(math.sqrt), "[R5]"),
    ("embeddings divided by sqrt(d_model)", _scaled(lambda d: d ** -0.5), "[R5]"),
    ("q and k swapped (translated)", translated(attention=swap("w_q", "w_k")), "[R1]"),
    ("k and v swapped (translated)", translated(attention=swap("w_k", "w_v")), "[R1]"),
    ("q and v swapped (translated)", translated(attention=swap("w_q", "w_v")), "[R1]"),
    ("self- and cross-attention swapped", _self_attention_from_cross, "[R2]"),
    ("interleaved_positions left at its default",
     translated(model_changes={"interleaved_positions": True}), "[R3]"),
    ("the paper's table written into the buffer", _marian_table_copied_into_positions, "[R3]"),
    ("bias left as initialised (strict=False style)", translated(keep=("generator.bias",)),
     "[R4]"),
    ("bias forgotten, module by module", copied(copy_bias=False), "[R4]"),
    ("bias forgotten after a throwaway model", copied(copy_bias=False, scratch_first=True),
     "[R4]"),
    ("bias forgotten, untied output layer", copied(copy_bias=False, untie=True), "[R4]"),
    ("bias zeroed", copied(copy_bias=False, bias_zero=True), "[R4]"),
    ("ReLU kept (translated)", translated(model_changes={"activation": "relu"}), "[R7]"),
    ("ReLU kept (copied)", copied(activation="relu"), "[R7]"),
    ("decoder norm2 <- final, norm3 <- encoder_attn",
     translated(decoder_norms={"norm1": "self_attn_layer_norm", "norm2": "final_layer_norm",
                               "norm3": "encoder_attn_layer_norm"}), "[R6]"),
    ("encoder norm1/norm2 swapped",
     translated(encoder_norms={"norm1": "final_layer_norm", "norm2": "self_attn_layer_norm"}),
     "[R6]"),
    ("every layer from layer 0", translated(layer="0"), "[R9]"),
    ("decoder self-attention and feed-forward from the encoder",
     translated(stack=_decoder_reads_encoder), "[R9]"),
    ("returned in training mode", copied(eval_mode=False), "model.eval()"),
]

LOAD_RIGHT = [
    ("translated", translated()),
    ("copied", copied()),
    ("copied after a throwaway model", copied(scratch_first=True)),
    ("untied, every matrix copied", copied(untie=True)),
    ("dropout 0.1 and the default max_len, in eval mode",
     translated(model_changes={"dropout": 0.1, "max_len": 5000})),
]


# ----------------------------------------------------------------------------------------------
# interleave_halves
# ----------------------------------------------------------------------------------------------

def _i_cat(pe):
    d = pe.shape[1]
    return torch.cat([pe[:, :d // 2], pe[:, d // 2:]], dim=-1)


def _i_stack_dim1(pe):
    L, d = pe.shape
    return torch.stack([pe[:, :d // 2], pe[:, d // 2:]], dim=1).reshape(L, d)


def _i_stack_dim0(pe):
    L, d = pe.shape
    return torch.stack((pe[:, :d // 2], pe[:, d // 2:])).reshape(L, d)


def _i_stack_T(pe):
    L, d = pe.shape
    return torch.stack((pe[:, :d // 2], pe[:, d // 2:])).permute(2, 1, 0).reshape(L, d)


def _i_strides_backwards(pe):  # reads the interleaved pairs as if pe were interleaved
    return torch.cat([pe[:, ::2], pe[:, 1::2]], dim=1)


def _i_cos_first_loop(pe):
    L, d = pe.shape
    out = torch.empty_like(pe)
    for i in range(d // 2):
        out[:, 2 * i] = pe[:, d // 2 + i]
        out[:, 2 * i + 1] = pe[:, i]
    return out


def _i_view_transpose_wrong(pe):  # (L, d/2, 2) read as pairs: Marian's layout from the paper's
    L, d = pe.shape
    return pe.view(L, d // 2, 2).transpose(1, 2).reshape(L, d)


def _i_right_loop(pe):
    L, d = pe.shape
    out = torch.empty_like(pe)
    for i in range(d // 2):
        out[:, 2 * i], out[:, 2 * i + 1] = pe[:, i], pe[:, d // 2 + i]
    return out


def _i_right_view(pe):
    L, d = pe.shape
    return pe.view(L, 2, d // 2).transpose(1, 2).reshape(L, d)


def _i_right_index(pe):
    d = pe.shape[1]
    order = torch.arange(d).view(2, d // 2).T.reshape(-1)  # 0, d/2, 1, d/2 + 1, ...
    return pe[:, order]


INTERLEAVE_SLIPS = [
    ("cat of the halves (nothing moves)", _i_cat, "interleave it with the second half"),
    ("stack on dim=1 (nothing moves)", _i_stack_dim1, "interleave it with the second half"),
    ("stack on dim=0", _i_stack_dim0, "pair each sine with its cosine"),
    ("stack then every axis reversed", _i_stack_T, "pair each sine with its cosine"),
    ("even and odd columns gathered", _i_strides_backwards, "that is the way from the paper's"),
    ("cosine first, in a loop", _i_cos_first_loop, "the sine comes first"),
    ("view (L, d/2, 2) transposed", _i_view_transpose_wrong, "that is the way from the paper's"),
]
INTERLEAVE_RIGHT = [("loop", _i_right_loop), ("view and transpose", _i_right_view),
                    ("an index", _i_right_index)]


# ----------------------------------------------------------------------------------------------
# marian_decoder_inputs
# ----------------------------------------------------------------------------------------------

def _m_bos_zero(labels, pad_id):
    start = torch.zeros(labels.shape[0], 1, dtype=labels.dtype)
    return torch.cat((start, labels[:, :-1]), 1)


def _m_eos_id(labels, pad_id):  # "the config's bos_token_id": 0
    out = torch.empty_like(labels)
    out[:, 0], out[:, 1:] = 0, labels[:, :-1]
    return out


def _m_labels(labels, pad_id):
    return labels


def _m_too_long(labels, pad_id):
    return torch.cat((torch.full((labels.shape[0], 1), pad_id), labels), dim=1)


def _m_first_dropped(labels, pad_id):
    out = labels.clone()
    out[:, 0] = pad_id
    return out


def _m_left(labels, pad_id):
    out = torch.full_like(labels, pad_id)
    out[:, :-1] = labels[:, 1:]
    return out


def _m_roll(labels, pad_id):
    return torch.roll(labels, shifts=1, dims=1)


def _m_first_label(labels, pad_id):
    out = labels.clone()
    out[:, 1:] = labels[:, :-1]
    return out


MARIAN_SLIPS = [
    ("started with 0 (torch.zeros)", _m_bos_zero, "[R8]"),
    ("started with the config's bos_token_id", _m_eos_id, "[R8]"),
    ("the labels themselves", _m_labels, "[T1]"),
    ("start added, last label kept", _m_too_long, "keep the length T"),
    ("first label overwritten by the start", _m_first_dropped, "drop the last label"),
    ("shifted left", _m_left, "shift right, not left"),
    ("rolled", _m_roll, "torch.roll wraps the last label"),
    ("first label repeated at the front", _m_first_label, "not a copy of the first label"),
]


def _m_right_roll(labels, pad_id):
    out = labels.roll(1, dims=1)
    out[:, 0] = pad_id
    return out


def _m_right_pad(labels, pad_id):
    return torch.nn.functional.pad(labels[:, :-1], (1, 0), value=pad_id)


MARIAN_RIGHT = [("roll, then the start", _m_right_roll), ("F.pad", _m_right_pad)]


# ----------------------------------------------------------------------------------------------
# The tests
# ----------------------------------------------------------------------------------------------

SLIPS = [("load_marian", *s) for s in LOAD_SLIPS] + \
    [("interleave_halves", *s) for s in INTERLEAVE_SLIPS] + \
    [("marian_decoder_inputs", *s) for s in MARIAN_SLIPS]
RIGHT = [("load_marian", *r) for r in LOAD_RIGHT] + \
    [("interleave_halves", *r) for r in INTERLEAVE_RIGHT] + \
    [("marian_decoder_inputs", *r) for r in MARIAN_RIGHT]


@pytest.mark.parametrize("exercise, label, fn, expected", SLIPS,
                         ids=[f"{e}: {label}" for e, label, _, _ in SLIPS])
def test_a_slip_fails_with_its_own_hint(exercise, label, fn, expected):
    ok, out = run_check(exercise, fn)
    assert not ok, out
    assert expected in out, out
    assert GENERIC not in out, out


@pytest.mark.parametrize("exercise, label, fn", RIGHT,
                         ids=[f"{e}: {label}" for e, label, _ in RIGHT])
def test_a_right_answer_written_differently_passes(exercise, label, fn):
    ok, out = run_check(exercise, fn)
    assert ok, out


def test_enough_slips_per_exercise():
    counts = {}
    for exercise, *_ in SLIPS:
        counts[exercise] = counts.get(exercise, 0) + 1
    assert counts["load_marian"] >= 15 and counts["interleave_halves"] >= 6
    assert counts["marian_decoder_inputs"] >= 6


# ----------------------------------------------------------------------------------------------
# A strict load that fails: torch's error reaches the learner with the keys it names
# ----------------------------------------------------------------------------------------------

def _strict(weights_of):
    """A learner's load_marian whose strict load_state_dict gets ``weights_of(config, sd)``."""
    def load(config, sd):
        model = build(config)
        model.load_state_dict(weights_of(config, sd, model))
        return model.eval()
    return load


def _all_but_bias(config, sd, model):
    return {name: sd[their_name(name)] for name in model.state_dict() if name != "generator.bias"}


STRICT = [
    ("the bias left out", _all_but_bias, ['Missing key(s) in state_dict: "generator.bias"']),
    ("the bias under Marian's name", lambda c, sd, m: {**_all_but_bias(c, sd, m),
                                                       "final_logits_bias": sd["final_logits_bias"]},
     ['Missing key(s) in state_dict: "generator.bias"',
      'Unexpected key(s) in state_dict: "final_logits_bias"']),
    ("the bias as (1, V)", lambda c, sd, m: {**_all_but_bias(c, sd, m),
                                             "generator.bias": sd["final_logits_bias"]},
     ["size mismatch for generator.bias: copying a param with shape torch.Size([1, 11])"]),
]


@pytest.mark.parametrize("label, weights_of, shown", STRICT, ids=[s[0] for s in STRICT])
def test_a_failed_strict_load_names_its_keys(label, weights_of, shown):
    ok, out = run_check("load_marian", _strict(weights_of))
    assert not ok and "RuntimeError: Error(s) in loading state_dict for Transformer:" in out, out
    for piece in shown:
        assert piece in out, out
