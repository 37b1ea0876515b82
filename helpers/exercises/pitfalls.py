"""The classic Transformer bugs the course teaches, by id: the one registry.

Each notebook's "Common pitfalls" section shows some of them failing and then fixed, the exercise
checkers (the other modules of ``helpers.exercises``) name them in their hints, and the tests
keep them out of ``helpers/``. The README's table "The classic bugs" is :func:`readme_table`'s
output, and ``tests/exercises/test_pitfalls.py`` checks that every id a notebook or a checker
uses is here.

Ids: A attention, P positional encoding, E embeddings, H heads, N LayerNorm, M masks, L layers
(residual paths and LayerNorms), T training, D decoding, W the whole model,
I inspecting attention, G GPT and the modern block, S scaling up (data parallelism), K subword
tokens, R a real model's weights.
"""

# id: (the bug, in a few words; the notebooks that show it failing and fixed)
PITFALLS = {
    "A1": ("scaling by sqrt(d_model) instead of sqrt(d_k), or not at all", ("01", "03")),
    "A2": ("masking after the softmax", ("01",)),
    "A3": ("an inverted mask", ("01",)),
    "A4": ("softmax over the queries", ("01",)),
    "A5": ("NaN for a query whose keys are all masked", ("01",)),
    "A6": ("the scores scaled twice: by hand, then again inside attention", ("03",)),
    "P1": ("a doubled exponent", ("02",)),
    "P2": ("sines and cosines in halves instead of interleaved", ("02",)),
    "P3": ("the first frequency off by one", ("02",)),
    "P4": ("slicing features instead of positions", ("02",)),
    "P5": ("sin and cos swapped", ("02",)),
    "E1": ("the positional table not cut to the sentence's length L", ("05",)),
    "E2": ("positions looked up by token id: pe[tokens] instead of pe[:L]", ("05",)),
    "H1": ("splitting heads with `view(B, L, d_k, h)` (invisible when d_k == h)", ("03",)),
    "H2": ("merging without transposing back", ("03",)),
    "H3": ("the output projection W_O forgotten", ("03",)),
    "N1": ("unbiased variance", ("04",)),
    "N2": ("epsilon outside the square root", ("04",)),
    "N3": ("one scalar gain and bias", ("04",)),
    "N4": ("statistics over the wrong axis", ("04",)),
    "N5": ("the shift under the root", ("04",)),
    "N6": ("dividing by the variance instead of the standard deviation", ("04",)),
    "N7": ("gain and bias swapped, or the bias added before the gain", ("04",)),
    "N8": ("the mean not subtracted (from x, or inside the variance)", ("04",)),
    "M1": ("`triu`/`tril` mixed up", ("06",)),
    "M2": ("the diagonal excluded", ("06",)),
    "M3": ("padding hiding queries instead of keys", ("06",)),
    "M4": ("padding polarity inverted", ("06",)),
    "M5": ("no look-ahead mask on the decoder's self-attention", ("07", "08")),
    "M6": ("padding found with `>` or a fixed id instead of `tokens != pad_id`", ("06",)),
    "L1": ("pre-norm written where post-norm is asked, or the reverse", ("05", "07")),
    "L2": ("a missing residual path around a sub-layer", ("05", "07")),
    "L3": ("LayerNorm on the sub-layer's output only: x + LN(sublayer(x))", ("05",)),
    "L4": ("cross-attention with the decoder and the memory swapped", ("07",)),
    "L5": ("the sub-layers in the wrong order", ("05", "07")),
    "L6": ("LayerNorms swapped between sub-layers", ("05", "07")),
    "L7": ("cross-attention queries from the layer's input instead of the first sub-layer's "
           "output", ("07",)),
    "L8": ("the look-ahead and memory masks swapped between the two attentions", ("07",)),
    "T1": ("no shift right: the decoder reads the answer", ("07", "09")),
    "T2": ("embeddings not scaled by sqrt(d_model), or the positional encoding scaled too",
           ("05", "08")),
    "T3": ("label-smoothing mass on padding, or NaN from a KL loss with log(0)", ("09",)),
    "T4": ("a missing zero_grad: gradients pile up", ("09",)),
    "T5": ("scheduler.step() before optimizer.step()", ("09",)),
    "T6": ("clipping after optimizer.step()", ("09",)),
    "T7": ("log(softmax(...)) instead of log_softmax: inf where a probability underflows",
           ("09",)),
    "T8": ("gather on labels that hold ignore_index (-100 is no class id)", ("09",)),
    "T9": ("scheduler.step() left out (or called twice): the learning rate never follows the "
           "schedule", ("09",)),
    "T10": ("optimizer.step() left out, or the gradients zeroed right before it", ("09",)),
    "T11": ("shift right with a fixed BOS id instead of bos_id", ("07",)),
    "T12": ("shift right without BOS: the input one token short", ("07",)),
    "T13": ("shift right that turns the token ids into floats", ("07",)),
    "T14": ("BOS written over a token instead of shifting", ("07",)),
    "D1": ("adding or multiplying probabilities instead of summing log-probabilities", ("10",)),
    "D2": ("finished hypotheses extended or dropped", ("10",)),
    "D3": ("stopping when the best hypothesis ends instead of when none can improve", ("10",)),
    "D4": ("forgetting the padding mask", ("05", "08", "10")),
    "D5": ("the next token read from the first position's logits instead of the last", ("10",)),
    "D6": ("finished rows not padded after EOS, or decoding not stopped", ("10",)),
    "D7": ("BOS dropped from the output", ("10",)),
    "D8": ("the KV cache replaced by the new keys and values instead of extended", ("10",)),
    "D9": ("no look-ahead mask among several new tokens fed to the KV cache at once", ("10",)),
    "D10": ("beam search keeping the best candidates beam by beam instead of overall", ("10",)),
    "D11": ("finished hypotheses ranked without the length penalty", ("10",)),
    "D12": ("a 2-D look-ahead mask where the attention takes four axes", ("10",)),
    "D13": ("the memory's keys and values projected again at every cached step", ("10",)),
    "I1": ("0 * log 0 taken as NaN: a masked key poisons the entropy", ("11",)),
    "I2": ("a head's entropy summed over the queries instead of each query's keys", ("11",)),
    "I3": ("an alignment read along the target words instead of the source words", ("11",)),
    "I4": ("a head's features taken as interleaved instead of side by side", ("11",)),
    "W1": ("probabilities (softmax) or vectors returned where the model returns logits",
           ("08",)),
    "W2": ("the decoder's target mask: a given tgt_mask replaced, or the look-ahead mask not "
           "alone or without its four axes", ("08",)),
    "W3": ("a piece left out of the parameter count (biases, LayerNorms, W_O, a stack)",
           ("08",)),
    "G1": ("RMSNorm subtracting the mean", ("12",)),
    "G2": ("rotary positions rotating the wrong pairs of features", ("12",)),
    "G3": ("the top-p filter applied before the temperature", ("12",)),
    "G4": ("top-p dropping the token that crosses the threshold", ("12",)),
    "G5": ("the prompt's labels kept: the loss also scores the English sentence", ("12",)),
    "G6": ("a GPT without its causal mask by default: each position sees what it predicts",
           ("12",)),
    "G7": ("a cached step at the wrong position: start is not the tokens before it", ("12",)),
    "G8": ("no prefill: the prompt never goes through the KV cache", ("12",)),
    "G9": ("the prompt fed to the KV cache one token at a time instead of one prefill", ("12",)),
    "G10": ("generation that recomputes the whole sequence at every step: the cache unused",
            ("12",)),
    "S1": ("each rank's loss averaged over its own tokens: a mean of means", ("13",)),
    "S2": ("the loss not multiplied by the world size, though DDP averages the gradients",
           ("13",)),
    "S3": ("no DistributedSampler: every rank trains on the same pairs", ("13",)),
    "S4": ("a step's start advanced by one rank's share instead of the global batch", ("13",)),
    "S5": ("gradients all-reduced (summed) but not divided by the world size", ("13",)),
    "K1": ("pairs counted once per distinct word, without its frequency", ("14",)),
    "K2": ("overlapping pairs merged wrongly (`a a a` with (a, a) must give `aa a`)", ("14",)),
    "K3": ("merges applied in the wrong order when encoding: not by rank", ("14",)),
    "K4": ("pairs counted or merged across two words", ("14",)),
    "K5": ("the end-of-word marker forgotten", ("14",)),
    "K6": ("ties broken by another rule: the pair seen first, or alphabetical order", ("14",)),
    "K7": ("a merge done on the joined string, across symbol boundaries", ("14",)),
    "K8": ("a pair that occurs twice in a word counted once", ("14",)),
    "R1": ("query, key and value projections swapped when loading a real model", ("15",)),
    "R2": ("the decoder's self- and cross-attention weights swapped", ("15",)),
    "R3": ("the paper's interleaved positions kept where the model's are in halves", ("15",)),
    "R4": ("the final logits bias left out", ("15",)),
    "R5": ("embeddings scaled twice, or not at all, when loading them", ("15",)),
    "R6": ("LayerNorm weights loaded into the wrong sub-layer", ("15",)),
    "R7": ("ReLU kept where the model's feed-forward uses swish", ("15",)),
    "R8": ("the decoder started with </s> (the published bos_token_id) instead of the pad id",
           ("15",)),
    "R9": ("a layer loaded from another layer's weights (layer 0, or the encoder's)", ("15",)),
}

FAMILIES = {"A": "attention", "P": "positional encoding", "E": "embeddings", "H": "heads",
            "N": "LayerNorm",
            "M": "masks", "L": "layers (residual paths and LayerNorms)", "T": "training",
            "D": "decoding", "W": "the whole model", "I": "inspecting attention",
            "G": "GPT and the modern block",
            "S": "scaling up (data parallelism)",
            "K": "subword tokens (byte-pair encoding)",
            "R": "a real model's weights (Marian)"}


def readme_table() -> str:
    """The README's table: one row per family (A1-A5, ...), its bugs in order, its notebooks."""
    rows = ["| id | bug | notebook |", "|---|---|---|"]
    for letter in FAMILIES:
        ids = [pid for pid in PITFALLS if pid[0] == letter]
        bugs = "; ".join(PITFALLS[pid][0] for pid in ids)
        notebooks = sorted({nb for pid in ids for nb in PITFALLS[pid][1]})
        rows.append(f"| {ids[0]}-{ids[-1]} | {bugs} | {', '.join(notebooks)} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(readme_table())
