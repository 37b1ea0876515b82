"""Notebook 15's checkers on answers a learner could write: an independently written correct
answer passes, each pitfall written the learner's way gets its hint (R1-R8), and a
``load_marian`` that returns no model is told so. (tests/exercises/test_exercise_registry.py
runs the reference and the registered buggy variants of every exercise.)"""

import math

import pytest
import torch

from helpers.model import Transformer


def course_model(config, **changes):
    sizes = dict(d_model=config.d_model, num_heads=config.encoder_attention_heads,
                 num_layers=config.encoder_layers, d_ff=config.encoder_ffn_dim, dropout=0.0,
                 max_len=config.max_position_embeddings, tie_weights=True, activation="silu",
                 interleaved_positions=False)
    return Transformer(config.vocab_size, config.vocab_size, **{**sizes, **changes})


def explicit_load(config, sd, attention=("q", "k", "v"),
                  decoder_norms=("self_attn", "encoder_attn", "final"), scale=1.0,
                  copy_bias=True, **changes):
    """A learner's answer written module by module, with the names it copies as arguments."""
    model = course_model(config, **changes)

    def copy(module, key):
        module.weight.copy_(sd[f"{key}.weight"])
        module.bias.copy_(sd[f"{key}.bias"])

    def copy_attention(ours, key):
        for mine, theirs in zip(("w_q", "w_k", "w_v"), attention, strict=True):
            copy(getattr(ours, mine), f"{key}.{theirs}_proj")
        copy(ours.w_o, f"{key}.out_proj")

    with torch.no_grad():
        model.src_embed.weight.copy_(sd["model.encoder.embed_tokens.weight"] * scale)
        model.tgt_embed.weight.copy_(sd["model.decoder.embed_tokens.weight"] * scale)
        model.generator.weight.copy_(sd["lm_head.weight"] * scale)  # tied: the same matrix
        if copy_bias:
            model.generator.bias.copy_(sd["final_logits_bias"].squeeze(0))
        for i, layer in enumerate(model.encoder.layers):
            key = f"model.encoder.layers.{i}"
            copy_attention(layer.self_attn, f"{key}.self_attn")
            copy(layer.norm1, f"{key}.self_attn_layer_norm")
            copy(layer.feed_forward.linear1, f"{key}.fc1")
            copy(layer.feed_forward.linear2, f"{key}.fc2")
            copy(layer.norm2, f"{key}.final_layer_norm")
        for i, layer in enumerate(model.decoder.layers):
            key = f"model.decoder.layers.{i}"
            copy_attention(layer.self_attn, f"{key}.self_attn")
            copy_attention(layer.cross_attn, f"{key}.encoder_attn")
            for norm, name in zip((layer.norm1, layer.norm2, layer.norm3), decoder_norms,
                                  strict=True):
                copy(norm, f"{key}.{name}_layer_norm")
            copy(layer.feed_forward.linear1, f"{key}.fc1")
            copy(layer.feed_forward.linear2, f"{key}.fc2")
    return model.eval()  # the exercise asks for eval mode


def test_an_independent_answer_passes(run_check):
    ok, out = run_check("load_marian", explicit_load)
    assert ok, out


@pytest.mark.parametrize("pid, learner", [
    ("R1", lambda c, sd: explicit_load(c, sd, attention=("k", "q", "v"))),
    ("R1", lambda c, sd: explicit_load(c, sd, attention=("q", "v", "k"))),
    ("R3", lambda c, sd: explicit_load(c, sd, interleaved_positions=True)),
    ("R4", lambda c, sd: explicit_load(c, sd, copy_bias=False)),
    ("R5", lambda c, sd: explicit_load(c, sd, scale=math.sqrt(c.d_model))),
    ("R6", lambda c, sd: explicit_load(c, sd, decoder_norms=("self_attn", "final",
                                                             "encoder_attn"))),
    ("R7", lambda c, sd: explicit_load(c, sd, activation="relu")),
])
def test_a_learners_bug_gets_its_hint(run_check, pid, learner):
    ok, out = run_check("load_marian", learner)
    assert not ok
    assert f"Hint [{pid}]" in out, out


def test_self_and_cross_attention_swapped_gets_its_hint(run_check):
    def swapped(config, sd):  # the decoder's self_attn from encoder_attn and the reverse
        model = explicit_load(config, sd)
        reference = explicit_load(config, sd)
        with torch.no_grad():
            for mine, theirs in zip(model.decoder.layers, reference.decoder.layers, strict=True):
                mine.self_attn.load_state_dict(theirs.cross_attn.state_dict())
                mine.cross_attn.load_state_dict(theirs.self_attn.state_dict())
        return model

    ok, out = run_check("load_marian", swapped)
    assert not ok and "Hint [R2]" in out, out


def test_a_strict_load_without_the_bias_reports_its_error(run_check):
    """load_state_dict (strict) without generator.bias raises: the learner is shown the error
    (its first line) and told to run the function to see the whole of it."""
    from helpers.pretrained import marian_key

    def learner(config, sd):
        model = course_model(config)
        weights = {n: sd[marian_key(n)] for n in model.state_dict() if n != "generator.bias"}
        model.load_state_dict(weights)
        return model

    ok, out = run_check("load_marian", learner)
    assert not ok and "your function raised RuntimeError: Error(s) in loading state_dict" in out
    assert "Run it on a small input to see the whole error" in out


def test_a_loader_that_forgets_to_return_is_asked_about_return(run_check):
    def learner(config, sd):
        explicit_load(config, sd)

    ok, out = run_check("load_marian", learner)
    assert not ok and "did you forget `return`?" in out


def test_an_independent_interleave_passes(run_check):
    def learner(pe):
        d = pe.shape[1]
        out = torch.empty_like(pe)
        out[:, 0::2], out[:, 1::2] = pe[:, :d // 2], pe[:, d // 2:]
        return out

    assert run_check("interleave_halves", learner)[0]


def test_an_independent_decoder_input_passes_and_roll_is_caught(run_check):
    def learner(labels, pad_id):
        out = labels.roll(1, dims=1)
        out[:, 0] = pad_id
        return out

    assert run_check("marian_decoder_inputs", learner)[0]

    def started_with_bos(labels, pad_id):  # the published bos_token_id is 0
        out = labels.roll(1, dims=1)
        out[:, 0] = 0
        return out

    ok, out = run_check("marian_decoder_inputs", started_with_bos)
    assert not ok and "Hint [R8]" in out
