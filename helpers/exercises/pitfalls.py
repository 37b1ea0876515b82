"""The classic Transformer bugs the course teaches, by id: the one registry.

Each notebook's "Common pitfalls" section shows some of them failing and then fixed, the exercise
checkers (the other modules of ``helpers.exercises``) name them in their hints, and the tests
keep them out of ``helpers/``. The README's table "The classic bugs" is :func:`readme_table`'s
output, and ``tests/exercises/test_pitfalls.py`` checks that every id a notebook or a checker
uses is here.

Ids: A attention, P positional encoding, H heads, N LayerNorm, M masks, L layers (residual paths
and LayerNorms), T training, D decoding,
G GPT and the modern block, S scaling up (data parallelism), R a real model's weights.
"""

# id: (the bug, in a few words; the notebooks that show it failing and fixed)
PITFALLS = {
    "A1": ("scaling by sqrt(d_model) instead of sqrt(d_k)", ("01", "03")),
    "A2": ("masking after the softmax", ("01",)),
    "A3": ("an inverted mask", ("01",)),
    "A4": ("softmax over the queries", ("01",)),
    "A5": ("NaN for a query whose keys are all masked", ("01",)),
    "A6": ("no 1/sqrt(d_k) scaling at all", ("03",)),
    "P1": ("a doubled exponent", ("02",)),
    "P2": ("sines and cosines in halves instead of interleaved", ("02",)),
    "P3": ("the first frequency off by one", ("02",)),
    "P4": ("slicing features instead of positions", ("02",)),
    "P5": ("sin and cos swapped", ("02",)),
    "H1": ("splitting heads with `view(B, L, d_k, h)`", ("03",)),
    "H2": ("merging without transposing back (invisible when d_k == h)", ("03",)),
    "H3": ("the output projection W_O forgotten", ("03",)),
    "N1": ("unbiased variance", ("04",)),
    "N2": ("epsilon outside the square root", ("04",)),
    "N3": ("one scalar gain and bias", ("04",)),
    "N4": ("statistics over the wrong axis", ("04",)),
    "N5": ("the shift under the root", ("04",)),
    "M1": ("`triu`/`tril` mixed up", ("06",)),
    "M2": ("the diagonal excluded", ("06",)),
    "M3": ("padding hiding queries instead of keys", ("06",)),
    "M4": ("padding polarity inverted", ("06",)),
    "M5": ("no look-ahead mask on the decoder's self-attention", ("07", "08")),
    "L1": ("pre-norm written where post-norm is asked, or the reverse", ("05", "07")),
    "L2": ("a missing residual path around a sub-layer", ("05", "07")),
    "L3": ("LayerNorm on the sub-layer's output only: x + LN(sublayer(x))", ("05",)),
    "L4": ("cross-attention with the decoder and the memory swapped", ("07",)),
    "T1": ("no shift right: the decoder reads the answer", ("07", "09")),
    "T2": ("embeddings not scaled by sqrt(d_model), or the positional encoding scaled too",
           ("05", "08")),
    "T3": ("label-smoothing mass on padding, or NaN from a KL loss with log(0)", ("09",)),
    "T4": ("a missing zero_grad: gradients pile up", ("09",)),
    "T5": ("scheduler.step() before optimizer.step()", ("09",)),
    "T6": ("clipping after optimizer.step()", ("09",)),
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
    "G1": ("RMSNorm subtracting the mean", ("12",)),
    "G2": ("rotary positions rotating the wrong pairs of features", ("12",)),
    "G3": ("the top-p filter applied before the temperature", ("12",)),
    "G4": ("top-p dropping the token that crosses the threshold", ("12",)),
    "G5": ("the prompt's labels kept: the loss also scores the English sentence", ("12",)),
    "G6": ("a GPT without its causal mask by default: each position sees what it predicts",
           ("12",)),
    "G7": ("a cached step at the wrong position: start is not the tokens before it", ("12",)),
    "G8": ("no prefill: the prompt never goes through the KV cache", ("12",)),
    "S1": ("each rank's loss averaged over its own tokens: a mean of means", ("13",)),
    "S2": ("the loss not multiplied by the world size, though DDP averages the gradients",
           ("13",)),
    "S3": ("no DistributedSampler: every rank trains on the same pairs", ("13",)),
    "S4": ("a step's start advanced by one rank's share instead of the global batch", ("13",)),
    "S5": ("gradients all-reduced (summed) but not divided by the world size", ("13",)),
    "R1": ("query, key and value projections swapped when loading a real model", ("14",)),
    "R2": ("the decoder's self- and cross-attention weights swapped", ("14",)),
    "R3": ("the paper's interleaved positions kept where the model's are in halves", ("14",)),
    "R4": ("the final logits bias left out", ("14",)),
    "R5": ("embeddings scaled twice, or not at all, when loading them", ("14",)),
    "R6": ("LayerNorm weights loaded into the wrong sub-layer", ("14",)),
    "R7": ("ReLU kept where the model's feed-forward uses swish", ("14",)),
    "R8": ("the decoder started with </s> (the published bos_token_id) instead of the pad id",
           ("14",)),
}

FAMILIES = {"A": "attention", "P": "positional encoding", "H": "heads", "N": "LayerNorm",
            "M": "masks", "L": "layers (residual paths and LayerNorms)", "T": "training",
            "D": "decoding", "G": "GPT and the modern block", "S": "scaling up (data parallelism)",
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
