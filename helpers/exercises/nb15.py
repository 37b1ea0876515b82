"""Notebook 15's exercises: ``load_marian`` (checked on small random ``MarianMTModel``s),
``interleave_halves`` and ``marian_decoder_inputs``."""

import functools
import re

import torch
from torch import nn

from ..masks import padding_mask
from ..positional import sinusoidal_encoding
from ..pretrained import load_marian, marian_key, standin_marian
from .cases import swaps
from .engine import Case, Exercise, Pitfall, randn, slip


def interleave_halves(pe: torch.Tensor) -> torch.Tensor:
    """Marian's ``(L, d_model)`` positional table (the d_model / 2 sine columns, then the cosine
    ones) rearranged into the paper's layout: sine and cosine of each frequency side by side,
    the sines in the even columns."""
    L, d = pe.shape
    sines, cosines = pe[:, :d // 2], pe[:, d // 2:]  # (L, d/2) each, in order of frequency
    return torch.stack([sines, cosines], dim=-1).reshape(L, d)  # (L, d/2, 2) -> (L, d)


def marian_decoder_inputs(labels: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Teacher forcing's decoder input for a Marian translator: the labels ``(B, T)`` (the
    target's pieces, then ``</s>`` = 0, then padding) shifted right behind the decoder's start
    token, which is the pad id (not the published ``bos_token_id`` 0, which is ``</s>``)."""
    start = torch.full_like(labels[:, :1], pad_id)  # (B, 1)
    return torch.cat([start, labels[:, :-1]], dim=1)  # (B, T)


class LoadCase(Case):
    """The logits ``(B, T, V)`` of the learner's ``load_marian(config, state_dict)`` (seed 0) on a
    padded batch. An output bias that is not ``final_logits_bias`` is zeroed, so that a bias left
    out (R4) gives the same logits however it was initialised."""

    def run(self, fn):
        config, state_dict, src, tgt = self.args
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            model = fn(config, {key: value.clone() for key, value in state_dict.items()})
        if not isinstance(model, nn.Module):
            return model
        if model.training:
            error = ValueError("the model you return is in training mode: end with return "
                               "model.eval() (dropout off, as the exercise asks)")
            error.whole = True  # check shows the message whole: it says what to do
            raise error
        bias = getattr(getattr(model, "generator", None), "bias", None)
        wanted = state_dict["final_logits_bias"][0]
        with torch.no_grad():
            if torch.is_tensor(bias) and bias.shape == wanted.shape and \
                    not torch.allclose(bias, wanted):
                bias.zero_()
            return model(src.clone(), tgt.clone(), padding_mask(src, config.pad_token_id))


_standin = functools.cache(standin_marian)  # each small random MarianMTModel built once


def _load_cases(g):
    def case(label, vocab, d_model, heads, layers, ffn, seed, lengths):
        marian = _standin(vocab, seed=seed, d_model=d_model, heads=heads, layers=layers, ffn=ffn,
                          max_positions=16)
        pad = vocab - 1
        src = torch.full((len(lengths), max(lengths)), pad)
        for row, length in enumerate(lengths):  # real pieces, then </s> (0), then padding
            src[row, :length - 1] = torch.randint(1, pad, (length - 1,), generator=g)
            src[row, length - 1] = 0
        tgt = torch.randint(1, pad, (len(lengths), 4), generator=g)
        tgt[:, 0] = pad  # the decoder starts with the pad id
        return LoadCase(label, (marian.config, marian.state_dict(), src, tgt))

    return [case("V=11, d_model=8, 2 heads, 1 layer, a padded batch", 11, 8, 2, 1, 16, 1, [5, 3]),
            case("V=17, d_model=16, 4 heads, 2 layers", 17, 16, 4, 2, 32, 2, [4, 6, 2]),
            case("V=23, d_model=12, 3 heads, 2 layers", 23, 12, 3, 2, 24, 3, [7, 7])]


WEIGHT = "marian_weight(state_dict, marian_key(name, tied), ours.shape)"
KEY_Q, KEY_K, KEY_V = '"w_q": "q_proj"', '"w_k": "k_proj"', '"w_v": "v_proj"'
STACK = ("pair each sine with its cosine along the feature axis: torch.stack([sines, cosines], "
         "dim=-1) is (L, d_model/2, 2), and its rows reshaped to (L, d_model) hold the pairs.")
START = "torch.full_like(labels[:, :1], pad_id)"
RIGHT = "torch.cat([start, labels[:, :-1]], dim=1)"


def _scaled(op: str):  # R5: the embedding matrix multiplied or divided while loading
    return slip(load_marian, (WEIGHT, f'{WEIGHT} {op} (config.d_model ** 0.5 if "embed" in '
                                      'name or name == "generator.weight" else 1)'))


def _keys(*edits, rename=None):
    """``load_marian`` with ``marian_key`` edited, or each name passed through ``rename``."""
    key = slip(marian_key, *edits)
    return slip(load_marian, names={"marian_key": lambda name, tied=True: key(
        rename(name) if rename else name, tied)})


EXERCISES = {
    "load_marian": Exercise(
        reference=load_marian, make_cases=_load_cases, sources=(load_marian, marian_key),
        pitfalls=(
            Pitfall("R1", "queries and keys swapped",
                    _keys((KEY_Q, '"w_q": "k_proj"'), (KEY_K, '"w_k": "q_proj"'))),
            Pitfall("R1", "keys and values swapped",
                    _keys((KEY_K, '"w_k": "v_proj"'), (KEY_V, '"w_v": "k_proj"'))),
            Pitfall("R1", "queries and values swapped",
                    _keys((KEY_Q, '"w_q": "v_proj"'), (KEY_V, '"w_v": "q_proj"'))),
            Pitfall("R2", "self- and cross-attention swapped", _keys((
                '"cross_attn": "encoder_attn"', '"cross_attn": "self_attn", '
                '"self_attn": "encoder_attn" if decoder else "self_attn"'))),
            Pitfall("R3", "positions interleaved", slip(
                load_marian, ("interleaved_positions=False", "interleaved_positions=True"))),
            Pitfall("R4", "logits bias missing", slip(  # strict=False "makes the error go away"
                load_marian, ("items()}", 'items() if name != "generator.bias"}'),
                ("load_state_dict(weights)", "load_state_dict(weights, strict=False)"))),
            Pitfall("R5", "embeddings scaled twice", _scaled("*")),
            Pitfall("R5", "embeddings not scaled", _scaled("/")),
            Pitfall("R6", "decoder's norm2 and norm3 swapped", _keys(
                ('"encoder_attn_layer_norm" if', '"final_layer_norm" if'),
                ('"norm3": "final_layer_norm"', '"norm3": "encoder_attn_layer_norm"'))),
            Pitfall("R6", "encoder's norm1 and norm2 swapped", _keys(
                ('else "final_layer_norm"', 'else "self_attn_layer_norm"'),
                ('"norm1": "self_attn_layer_norm"',
                 '"norm1": "self_attn_layer_norm" if decoder else "final_layer_norm"'))),
            Pitfall("R7", "ReLU kept", slip(load_marian, ('"silu"', '"relu"'))),
            Pitfall("R9", "every layer from layer 0",
                    _keys(rename=lambda name: re.sub(r"layers\.\d+\.", "layers.0.", name))),
            Pitfall("R9", "decoder layers from the encoder's", _keys(rename=lambda name: re.sub(
                r"^decoder(\.layers\.\d+\.(self_attn|feed_forward)\.)", r"encoder\1", name))),
            Pitfall(None, "returned in training mode",
                    slip(load_marian, ("return model.eval()", "return model")),
                    "call model.eval() before returning it: in training mode dropout is on, "
                    "and a translator is used for inference."))),
    "interleave_halves": Exercise(
        reference=interleave_halves, sources=(interleave_halves,), make_cases=lambda g: [
            Case("Marian's table, 6 positions x d_model=8",
                 (sinusoidal_encoding(6, 8, interleaved=False),)),
            Case("random values, 4 x 6 (each column is different)", (randn(g, 4, 6),)),
            Case("random values, 3 x 12", (randn(g, 3, 12),)),
            Case("d_model=2: one sine and one cosine", (randn(g, 5, 2),))],
        pitfalls=(
            Pitfall(None, "the other way", lambda pe: torch.cat([pe[:, 0::2], pe[:, 1::2]], -1),
                    "that is the way from the paper's layout to Marian's: here column i of the "
                    "first half (a sine) goes to column 2i, its cosine to column 2i + 1."),
            Pitfall(None, "cosines first",
                    slip(interleave_halves, ("[sines, cosines]", "[cosines, sines]")),
                    "the sine comes first in each pair: the even columns hold the sines."),
            Pitfall(None, "nothing rearranged", torch.clone,
                    "Marian's first half holds only sines: interleave it with the second half."),
            *swaps(interleave_halves, ", dim=-1)", (
                (None, "stacked on the first axis", ")", STACK),
                (None, "stacked, then transposed", ").permute(2, 1, 0)", STACK))))),
    "marian_decoder_inputs": Exercise(
        reference=marian_decoder_inputs, sources=(marian_decoder_inputs,), make_cases=lambda g: [
            Case("two targets ending with </s> (0), padded with 9",
                 (torch.tensor([[4, 7, 3, 0, 9], [5, 2, 0, 9, 9]]), 9)),
            Case("B=3, T=6, pad_id=30", (torch.randint(1, 30, (3, 6), generator=g), 30)),
            Case("length 1", (torch.tensor([[0], [0]]), 5))],
        pitfalls=(
            Pitfall("R8", "started with </s>",
                    slip(marian_decoder_inputs, (START, "torch.zeros_like(labels[:, :1])"))),
            Pitfall("T1", "no shift", lambda labels, pad_id: labels.clone(),
                    f"shift the labels right behind the start token: {RIGHT}; fed the labels "
                    "themselves, position t reads the token it must predict."),
            *swaps(marian_decoder_inputs, "[start, labels[:, :-1]]", (
                (None, "one position too many", "[start, labels]", "keep the length T: the start "
                 "token goes first, the last label is dropped."),
                (None, "the first label dropped", "[start, labels[:, 1:]]", "drop the last "
                 f"label, not the first: position t reads label t - 1: {RIGHT}."),
                (None, "shifted left", "[labels[:, 1:], start]", "shift right, not left: every "
                 f"label moves one position later: {RIGHT}."))),
            Pitfall(None, "rolled", lambda labels, pad_id: labels.roll(1, dims=1),
                    "torch.roll wraps the last label round to position 0: put the start token "
                    "(the pad id) there instead."),
            Pitfall(None, "started with the first label",
                    slip(marian_decoder_inputs, (START, "labels[:, :1]")), "position 0 holds the "
                    "start token, the pad id, not a copy of the first label."))),
}
