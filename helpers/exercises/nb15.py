"""Notebook 15's exercises: a Marian translator's weights in the course's ``Transformer``
(``load_marian``: the mapping's pitfalls R1-R7, checked on small random ``MarianMTModel``s
with the published conventions), the way back from Marian's positional layout to the paper's
(``interleave_halves``), and Marian's decoder input, started with the pad id
(``marian_decoder_inputs``: R8, T1).
"""

import functools
import math
import re
from dataclasses import dataclass

import torch
from torch import nn

from ..masks import padding_mask
from ..model import Transformer
from ..positional import sinusoidal_encoding
from ..pretrained import check_marian, load_marian, marian_key, standin_marian
from .engine import Case, Exercise, Pitfall, randn

# ----------------------------------------------------------------------------------------------
# load_marian: the reference is helpers/pretrained.py's; the cases run the model it returns
# ----------------------------------------------------------------------------------------------

class TrainingMode(ValueError):
    """A model handed back in training mode (the exercise asks for eval mode)."""

    whole = True  # check shows the message whole: it says what to do


@dataclass(frozen=True)
class LoadCase(Case):
    """Calls the learner's ``load_marian(config, state_dict)`` (torch's random generator seeded
    with 0), then runs the model it returns on a padded batch. The answer is the logits
    ``(B, T, V)``; anything but a module is handed back as it is, for the usual messages, and a
    module in training mode raises :class:`TrainingMode`.

    An output bias that is not ``final_logits_bias`` is replaced by the bias that the reference's
    ``Transformer`` starts with: a bias left out (R4) then gives the same logits in every answer,
    however the learner's code used the random generator before, and a wrong bias stays wrong."""

    def run(self, fn):
        config, state_dict, src, tgt = self.args
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            model = fn(config, {key: value.clone() for key, value in state_dict.items()})
        if not isinstance(model, nn.Module):
            return model
        if model.training:
            raise TrainingMode("the model you return is in training mode: end with "
                               "return model.eval() (dropout off, as the exercise asks)")
        bias = getattr(getattr(model, "generator", None), "bias", None)
        wanted = state_dict["final_logits_bias"][0]
        if torch.is_tensor(bias) and bias.shape == wanted.shape and \
                not torch.allclose(bias, wanted):
            with torch.no_grad():
                bias.copy_(_initial_bias(config))
        with torch.no_grad():
            return model(src.clone(), tgt.clone(), padding_mask(src, config.pad_token_id))


def _initial_bias(config) -> torch.Tensor:
    """The output projection's bias as the reference's ``Transformer`` starts it (seed 0)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return _marian_model(config).generator.bias.detach().clone()


@functools.cache
def _stand_in(vocab, d_model, heads, layers, ffn, seed):
    """A small random MarianMTModel's config and state dict, built once (the cases hand the
    learner copies)."""
    marian = standin_marian(vocab, seed=seed, d_model=d_model, heads=heads, layers=layers,
                            ffn=ffn, max_positions=16)
    return marian.config, marian.state_dict()


def _load_cases(g):
    def case(label, vocab, d_model, heads, layers, ffn, seed, lengths):
        config, state_dict = _stand_in(vocab, d_model, heads, layers, ffn, seed)
        pad = vocab - 1
        src = torch.full((len(lengths), max(lengths)), pad)
        for row, length in enumerate(lengths):  # real pieces, then </s> (0), then padding
            src[row, :length - 1] = torch.randint(1, pad, (length - 1,), generator=g)
            src[row, length - 1] = 0
        tgt = torch.randint(1, pad, (len(lengths), 4), generator=g)
        tgt[:, 0] = pad  # the decoder starts with the pad id
        return LoadCase(label, (config, state_dict, src, tgt))

    return [case("V=11, d_model=8, 2 heads, 1 layer, a padded batch", 11, 8, 2, 1, 16, 1, [5, 3]),
            case("V=17, d_model=16, 4 heads, 2 layers", 17, 16, 4, 2, 32, 2, [4, 6, 2]),
            case("V=23, d_model=12, 3 heads, 2 layers", 23, 12, 3, 2, 24, 3, [7, 7])]


def _marian_model(config, **changes) -> Transformer:
    """The course's Transformer that ``load_marian`` builds, with ``changes`` to its arguments."""
    check_marian(config)
    sizes = dict(d_model=config.d_model, num_heads=config.encoder_attention_heads,
                 num_layers=config.encoder_layers, d_ff=config.encoder_ffn_dim, dropout=0.0,
                 max_len=config.max_position_embeddings, tie_weights=True, activation="silu",
                 interleaved_positions=False)
    return Transformer(config.vocab_size, config.vocab_size, **{**sizes, **changes})


def _loaded(config, state_dict, rename=None, keep=(), scale=1.0, **changes) -> Transformer:
    """A buggy ``load_marian``: each course name passed through ``rename`` before its Marian key
    is looked up, the parameters in ``keep`` left as initialised, the embeddings multiplied by
    ``scale``, and ``changes`` to the model's arguments."""
    model = _marian_model(config, **changes)
    weights = {}
    for name, ours in model.state_dict().items():
        key = marian_key(rename(name) if rename else name)
        weights[name] = ours if name in keep else state_dict[key].reshape(ours.shape)
    model.load_state_dict(weights)
    with torch.no_grad():
        for embedding in (model.src_embed, model.tgt_embed):  # tgt_embed: the projection too
            embedding.weight.mul_(scale)
    return model.eval()


def _swapping(a: str, b: str, within: str = ""):
    """A rename that exchanges the pieces ``a`` and ``b`` in the names that start with
    ``within``."""
    def rename(name):
        if not name.startswith(within):
            return name
        return ".".join({a: b, b: a}.get(piece, piece) for piece in name.split("."))
    return rename


def _load_qk_swapped(config, state_dict):
    """R1: the query and key projections exchanged."""
    return _loaded(config, state_dict, _swapping("w_q", "w_k"))


def _load_kv_swapped(config, state_dict):
    """R1: the key and value projections exchanged."""
    return _loaded(config, state_dict, _swapping("w_k", "w_v"))


def _load_qv_swapped(config, state_dict):
    """R1: the query and value projections exchanged."""
    return _loaded(config, state_dict, _swapping("w_q", "w_v"))


def _load_first_layer_only(config, state_dict):
    """R9: every layer of a stack loaded from its layer 0 (an index written as 0)."""
    return _loaded(config, state_dict, lambda name: re.sub(r"layers\.\d+\.", "layers.0.", name))


def _load_decoder_from_encoder(config, state_dict):
    """R9: the decoder's self-attention and feed-forward loaded from the encoder's layer."""
    def rename(name):
        own = name.startswith("decoder.") and (".self_attn." in name or ".feed_forward." in name)
        return "encoder." + name.removeprefix("decoder.") if own else name
    return _loaded(config, state_dict, rename)


def _load_in_training_mode(config, state_dict):
    """The right weights, the model handed back in training mode."""
    return load_marian(config, state_dict).train()


def _load_attention_blocks_swapped(config, state_dict):
    """R2: the decoder's self-attention given the cross-attention's weights, and the reverse."""
    return _loaded(config, state_dict, _swapping("self_attn", "cross_attn", "decoder."))


def _load_interleaved(config, state_dict):
    """R3: the paper's positional layout kept (sin and cos interleaved)."""
    return _loaded(config, state_dict, interleaved_positions=True)


def _load_without_bias(config, state_dict):
    """R4: the final logits bias never copied: the output projection's bias as initialised."""
    return _loaded(config, state_dict, keep=["generator.bias"])


def _load_scaled_twice(config, state_dict):
    """R5: the embeddings multiplied by sqrt(d_model) on loading, then again in the model."""
    return _loaded(config, state_dict, scale=math.sqrt(config.d_model))


def _load_unscaled(config, state_dict):
    """R5: the embeddings divided by sqrt(d_model) on loading, undoing the model's scale."""
    return _loaded(config, state_dict, scale=1 / math.sqrt(config.d_model))


def _load_decoder_norms_swapped(config, state_dict):
    """R6: the decoder's norm2 (after cross-attention) and norm3 (after the feed-forward)."""
    return _loaded(config, state_dict, _swapping("norm2", "norm3", "decoder."))


def _load_encoder_norms_swapped(config, state_dict):
    """R6: the encoder's norm1 (after self-attention) and norm2 (after the feed-forward)."""
    return _loaded(config, state_dict, _swapping("norm1", "norm2", "encoder."))


def _load_relu(config, state_dict):
    """R7: the paper's ReLU kept in the feed-forward networks."""
    return _loaded(config, state_dict, activation="relu")


HINT_R5 = ("copy the embedding matrix as it is: Marian multiplies the looked-up rows by "
           "sqrt(d_model) in its forward pass, and so does the course's Transformer.embed, so "
           "the stored weights are unscaled in both.")
HINT_R6 = ("a LayerNorm is named after the sub-layer it closes: norm1 <- self_attn_layer_norm; "
           "in the decoder norm2 <- encoder_attn_layer_norm, norm3 <- final_layer_norm; in the "
           "encoder norm2 <- final_layer_norm.")
HINT_R9 = ("each layer has weights of its own: decoder.layers.i <- model.decoder.layers.i, "
           "encoder.layers.i <- model.encoder.layers.i (loop over i, and keep the stack's name: "
           "the decoder's self-attention and feed-forward are not the encoder's).")
HINT_R1 = ("match the projections by name: w_q <- q_proj, w_k <- k_proj, w_v <- v_proj, w_o <- "
           "out_proj (all four have the same shape, so a swap raises no error).")

# ----------------------------------------------------------------------------------------------
# interleave_halves: the paper's positional table from Marian's
# ----------------------------------------------------------------------------------------------

def interleave_halves(pe: torch.Tensor) -> torch.Tensor:
    """Marian's ``(L, d_model)`` positional table (the d_model / 2 sine columns, then the cosine
    ones) rearranged into the paper's layout: sine and cosine of each frequency side by side,
    the sines in the even columns."""
    L, d = pe.shape
    sines, cosines = pe[:, :d // 2], pe[:, d // 2:]  # (L, d/2) each, in order of frequency
    return torch.stack([sines, cosines], dim=-1).reshape(L, d)  # (L, d/2, 2) -> (L, d)


def _interleave_the_other_way(pe):
    """The rearrangement that goes from the paper's layout to Marian's."""
    return torch.cat([pe[:, 0::2], pe[:, 1::2]], dim=-1)


def _interleave_cosines_first(pe):
    L, d = pe.shape
    return torch.stack([pe[:, d // 2:], pe[:, :d // 2]], dim=-1).reshape(L, d)


def _interleave_nothing(pe):
    return pe.clone()


def _interleave_stacked_first(pe):
    """torch.stack(..., dim=0): the two halves one above the other, then cut into rows."""
    L, d = pe.shape
    return torch.stack([pe[:, :d // 2], pe[:, d // 2:]]).reshape(L, d)


def _interleave_transposed(pe):
    """torch.stack(...).T (every axis reversed): (d/2, L, 2), then cut into rows."""
    L, d = pe.shape
    return torch.stack([pe[:, :d // 2], pe[:, d // 2:]]).permute(2, 1, 0).reshape(L, d)


HINT_STACK = ("pair each sine with its cosine along the feature axis: torch.stack([sines, "
              "cosines], dim=-1) is (L, d_model/2, 2); reshaping that to (L, d_model) puts each "
              "pair side by side in one row.")


def _interleave_cases(g):
    return [Case("Marian's table, 6 positions x d_model=8",
                 (sinusoidal_encoding(6, 8, interleaved=False),)),
            Case("random values, 4 x 6 (each column is different)", (randn(g, 4, 6),)),
            Case("random values, 3 x 12", (randn(g, 3, 12),)),
            Case("d_model=2: one sine and one cosine", (randn(g, 5, 2),))]


# ----------------------------------------------------------------------------------------------
# marian_decoder_inputs: teacher forcing with Marian's start token
# ----------------------------------------------------------------------------------------------

def marian_decoder_inputs(labels: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Teacher forcing's decoder input for a Marian translator: the labels ``(B, T)`` (the
    target's pieces, then ``</s>`` = 0, then padding) shifted right behind the decoder's start
    token, which is the pad id (not the published ``bos_token_id`` 0, which is ``</s>``)."""
    start = torch.full_like(labels[:, :1], pad_id)  # (B, 1)
    return torch.cat([start, labels[:, :-1]], dim=1)  # (B, T)


def _inputs_start_with_eos(labels, pad_id):
    return torch.cat([torch.zeros_like(labels[:, :1]), labels[:, :-1]], dim=1)


def _inputs_not_shifted(labels, pad_id):
    return labels.clone()


def _inputs_start_appended(labels, pad_id):
    """The start token put first, but the last label kept: one position too many."""
    return torch.cat([torch.full_like(labels[:, :1], pad_id), labels], dim=1)


def _inputs_first_label_dropped(labels, pad_id):
    return torch.cat([torch.full_like(labels[:, :1], pad_id), labels[:, 1:]], dim=1)


def _inputs_shifted_left(labels, pad_id):
    return torch.cat([labels[:, 1:], torch.full_like(labels[:, :1], pad_id)], dim=1)


def _inputs_rolled(labels, pad_id):
    """torch.roll without a start token: the last label wraps round to the front."""
    return labels.roll(1, dims=1)


def _inputs_start_with_first_label(labels, pad_id):
    return torch.cat([labels[:, :1], labels[:, :-1]], dim=1)


def _decoder_inputs_cases(g):
    return [Case("two targets ending with </s> (0), padded with 9", (
                torch.tensor([[4, 7, 3, 0, 9], [5, 2, 0, 9, 9]]), 9)),
            Case("B=3, T=6, pad_id=30", (torch.randint(1, 30, (3, 6), generator=g), 30)),
            Case("length 1", (torch.tensor([[0], [0]]), 5))]


# ----------------------------------------------------------------------------------------------
# The exercises
# ----------------------------------------------------------------------------------------------

EXERCISES = {
    "load_marian": Exercise(
        reference=load_marian,
        make_cases=_load_cases,
        sources=(load_marian, marian_key),
        pitfalls=(
            Pitfall("R1", "queries and keys swapped", _load_qk_swapped, HINT_R1),
            Pitfall("R1", "keys and values swapped", _load_kv_swapped, HINT_R1),
            Pitfall("R1", "queries and values swapped", _load_qv_swapped, HINT_R1),
            Pitfall("R2", "self- and cross-attention swapped", _load_attention_blocks_swapped,
                    "the decoder's self_attn <- self_attn, its cross_attn <- encoder_attn "
                    "(Marian's name for the cross-attention): the two blocks have the same "
                    "shapes, so a swap raises no error."),
            Pitfall("R3", "positions interleaved", _load_interleaved,
                    "Marian's positional table is in halves: build the Transformer with "
                    "interleaved_positions=False (all sines, then all cosines; notebook 02's P2 "
                    "is here the right layout)."),
            Pitfall("R4", "logits bias missing", _load_without_bias,
                    "copy final_logits_bias into the output projection's bias (generator.bias, "
                    "reshaped from (1, V) to (V,)): Marian adds it to every logit."),
            Pitfall("R5", "embeddings scaled twice", _load_scaled_twice, HINT_R5),
            Pitfall("R5", "embeddings not scaled", _load_unscaled, HINT_R5),
            Pitfall("R6", "decoder's norm2 and norm3 swapped", _load_decoder_norms_swapped,
                    HINT_R6),
            Pitfall("R6", "encoder's norm1 and norm2 swapped", _load_encoder_norms_swapped,
                    HINT_R6),
            Pitfall("R7", "ReLU kept", _load_relu,
                    "Marian's feed-forward networks use swish, x * sigmoid(x) (torch's silu): "
                    "build the Transformer with activation=\"silu\"."),
            Pitfall("R9", "every layer from layer 0", _load_first_layer_only, HINT_R9),
            Pitfall("R9", "decoder layers from the encoder's", _load_decoder_from_encoder,
                    HINT_R9),
            Pitfall(None, "returned in training mode", _load_in_training_mode,
                    "call model.eval() before returning it: in training mode dropout is on, "
                    "and a translator is used for inference."),
        ),
    ),
    "interleave_halves": Exercise(
        reference=interleave_halves,
        make_cases=_interleave_cases,
        sources=(interleave_halves,),
        pitfalls=(
            Pitfall(None, "the other way", _interleave_the_other_way,
                    "that is the way from the paper's layout to Marian's: here column i of the "
                    "first half (a sine) goes to column 2i, column i of the second half (its "
                    "cosine) to column 2i + 1."),
            Pitfall(None, "cosines first", _interleave_cosines_first,
                    "the sine comes first in each pair: the even columns hold the sines (the "
                    "first half of Marian's table)."),
            Pitfall(None, "nothing rearranged", _interleave_nothing,
                    "Marian's first half holds only sines: interleave it with the second half "
                    "(torch.stack([sines, cosines], dim=-1), then reshape to (L, d_model))."),
            Pitfall(None, "stacked on the first axis", _interleave_stacked_first, HINT_STACK),
            Pitfall(None, "stacked, then transposed", _interleave_transposed, HINT_STACK),
        ),
    ),
    "marian_decoder_inputs": Exercise(
        reference=marian_decoder_inputs,
        make_cases=_decoder_inputs_cases,
        sources=(marian_decoder_inputs,),
        pitfalls=(
            Pitfall("R8", "started with </s>", _inputs_start_with_eos,
                    "Marian's decoder starts with the pad id (decoder_start_token_id), not "
                    "with the published bos_token_id 0, which is </s>."),
            Pitfall("T1", "no shift", _inputs_not_shifted,
                    "shift the labels right behind the start token: torch.cat([start, "
                    "labels[:, :-1]], dim=1); fed the labels themselves, position t reads the "
                    "token it must predict."),
            Pitfall(None, "one position too many", _inputs_start_appended,
                    "keep the length T: the start token goes first and the last label "
                    "(labels[:, :-1]) is dropped."),
            Pitfall(None, "the first label dropped", _inputs_first_label_dropped,
                    "drop the last label, not the first: the input at position t is the label "
                    "of position t - 1, so torch.cat([start, labels[:, :-1]], dim=1)."),
            Pitfall(None, "shifted left", _inputs_shifted_left,
                    "shift right, not left: the start token goes first and every label moves "
                    "one position later (torch.cat([start, labels[:, :-1]], dim=1))."),
            Pitfall(None, "rolled", _inputs_rolled,
                    "torch.roll wraps the last label round to position 0: put the start token "
                    "(the pad id) there instead."),
            Pitfall(None, "started with the first label", _inputs_start_with_first_label,
                    "position 0 holds the start token, the pad id (decoder_start_token_id), "
                    "not a copy of the first label."),
        ),
    ),
}
