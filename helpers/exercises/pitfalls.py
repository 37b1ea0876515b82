"""The classic Transformer bugs the course teaches, by id, and the hint ``check`` prints for each.
The notebooks' "Common pitfalls" sections show them, the checkers name them, and the README's
table "The classic bugs" is generated from them (``tests/exercises/test_pitfalls.py``)."""

# The families of ids, by letter.
FAMILIES = {"A": "attention", "P": "positional encoding", "E": "embeddings", "H": "heads",
            "N": "LayerNorm", "M": "masks", "L": "layers (residual paths and LayerNorms)",
            "T": "training", "D": "decoding", "W": "the whole model", "I": "inspecting attention",
            "G": "GPT and the modern block", "S": "scaling up (data parallelism)",
            "K": "subword tokens (byte-pair encoding)", "R": "a real model's weights (Marian)"}

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
    "T7": ("log(softmax(...)) instead of log_softmax: inf where a probability underflows", ("09",)),
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
    "W1": ("probabilities (softmax) or vectors returned where the model returns logits", ("08",)),
    "W2": ("the decoder's target mask: a given tgt_mask replaced, or the look-ahead mask not "
           "alone or without its four axes", ("08",)),
    "W3": ("a piece left out of the parameter count (biases, LayerNorms, W_O, a stack)", ("08",)),
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
    "S2": ("the loss not multiplied by the world size, though DDP averages the gradients", ("13",)),
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

# id: the one hint ``check`` prints for it (a Pitfall without a hint of its own gets this one).
HINTS: dict[str, str] = {
    "A1": "divide the scores by the square root of the key dimension of one head: scores = "
          "q @ k^T / sqrt(d_k), with d_k = query.shape[-1] (in multi-head attention, d_model / h).",
    "A2": "mask the scores before softmax (masked_fill on the scores), so each row still sums "
          "to 1.",
    "A3": "in this course True means may attend (the F.scaled_dot_product_attention convention): "
          "fill the scores where the mask is False.",
    "A4": "each query's weights over the keys must sum to 1: softmax over the last axis (dim=-1), "
          "whatever the number of axes before it.",
    "A5": "what happens when a whole row is masked? A row of -inf gives 0/0 = NaN, and a row of "
          "equal fills spreads 1/Lk over keys it must not see: fill with torch.finfo(dtype).min, "
          "then set the blocked weights to 0.",
    "A6": "scaled_dot_product_attention already divides by sqrt(d_k): do not scale the scores (or "
          "the queries) again before calling it.",
    "P1": "the exponent is 2i/d_model where 2i is the even column index (0, 2, 4, ...): do not "
          "double it again.",
    "P2": "even columns sin, odd columns cos (interleaved, not two halves): columns 2i and 2i+1 "
          "share one angle, so a 2x2 block couples them.",
    "P3": "column 0 should be sin(position): the first pair has frequency 1.",
    "P4": "slice positions, not features: pe[:L] keeps the first L rows (positions).",
    "P5": "PE[0] should be 0, 1, 0, 1, ...: sin on even columns, cos on odd ones.",
    "H1": "did you split as view(B, L, h, d_k) and then transpose(1, 2)? Each head needs a "
          "contiguous block of d_k features.",
    "H2": "transpose heads back next to d_k before reshaping: (B, h, L, d_k) -> (B, L, h, d_k) -> "
          "(B, L, h * d_k).",
    "H3": "after merging the heads, mix them with the output projection w_o: MultiHead = "
          "Concat(head_1, ..., head_h) W_O.",
    "N1": "use the biased variance (divide by d, not d-1), as nn.LayerNorm does: "
          "x.var(dim=-1, unbiased=False).",
    "N2": "is your epsilon inside the square root? (x - mean) / sqrt(var + eps).",
    "N3": "gain and bias have one value per feature: multiply by weight and add bias elementwise.",
    "N4": "normalise each token's vector over its d_model features (dim=-1).",
    "N5": "only epsilon goes under the root, and it is added: sqrt(var + eps); the bias is "
          "added after normalising.",
    "N6": "divide by the standard deviation, the square root of the variance: "
          "(x - mean) / torch.sqrt(var + eps).",
    "N7": "weight is the gain (it multiplies) and bias the shift (it is added last): "
          "x_hat * weight + bias, not (x_hat + bias) * weight.",
    "N8": "subtract each token's mean before dividing: (x - mean) / sqrt(var + eps).",
    "M1": "position t may see positions 0..t: True on and below the diagonal (tril).",
    "M2": "the diagonal must be allowed: a token may attend to itself.",
    "M3": "hide the padded keys: shape (B, 1, 1, L), which broadcasts over heads and queries.",
    "M4": "True means a real token you may attend to: tokens != pad_id.",
    "M6": "compare with !=: a real token may have a smaller id than pad_id (tokens != pad_id, "
          "not tokens > pad_id).",
    "T3": "padded positions carry no loss at all, not even the epsilon share of the smoothing: "
          "mask the whole per-position loss, not only the -log p[label] term.",
    "T4": "zero the gradients first (optimizer.zero_grad()): backward() adds to .grad, so without "
          "it every step also applies all the earlier gradients.",
    "T5": "step the optimizer first, then the scheduler: scheduler.step() sets the rate of the "
          "*next* step, so calling it first skips the current step's rate.",
    "T6": "clip before optimizer.step(): the step has already used the unclipped gradients, and "
          "clipping afterwards changes nothing.",
    "T7": "use log_softmax, never log(softmax(...)): a logit far below the others (-200 next to "
          "200) gets probability 0 in float32, log(0) = -inf, and the loss is inf; log_softmax "
          "computes log p without forming p.",
    "T8": "mask the labels before gather (or indexing): ignore_index is often -100, which is no "
          "class id, so gather raises on real data. Replace them with any valid id first, "
          "labels.masked_fill(labels == ignore_index, 0), then drop those positions.",
    "T9": "call scheduler.step() after optimizer.step(): without it the learning rate never "
          "changes (it stays at the first step's rate; optimizer.param_groups[0]['lr'] shows it).",
    "T10": "call optimizer.step() after clipping: it is the call that updates the weights "
           "(backward() only computes the gradients).",
    "E1": ("add only the first L rows of the table, pe[:L] with L = tokens.shape[1]: pe has "
           "max_len rows, one per position."),
    "E2": ("position p gets row p of pe: add pe[:L] (the positions 0..L-1), not pe[tokens] "
           "(rows picked by the token ids)."),
    "T2": ("multiply the embeddings by sqrt(d_model) (section 3.4), then add the positions as "
           "they are: E[tokens] * math.sqrt(d_model) + PE. Without the factor the tokens are "
           "sqrt(d_model) times quieter than the positions."),
    "T1": ("shift the target right behind BOS: torch.cat([bos, target[:, :-1]], dim=1). Fed the "
           "target itself, position t sees the very token it must predict and the model learns "
           "to copy it (a teacher-forcing leak)."),
    "T11": ("use the bos_id argument, not the notebook's BOS or a fixed 0 (0 is often the "
            "padding id): torch.full_like(target[:, :1], bos_id)."),
    "T12": ("put bos_id in front: without it the input has T - 1 tokens and position 0 has "
            "nothing to start from."),
    "T13": ("token ids stay integers: build the BOS column with target's dtype, "
            "torch.full_like(target[:, :1], bos_id)."),
    "T14": ("shift every token one place right; writing bos_id over one token leaves the others "
            "where they were, so position t still reads its own label."),
    "L1": ("follow self.norm_first: post-norm is LayerNorm(x + sublayer(x)), pre-norm is "
           "x + sublayer(LayerNorm(x))."),
    "L2": "add the sublayer's input back: each sub-layer sits on a residual path, x + ...",
    "L3": ("normalise the sum, LayerNorm(x + sublayer(x)), not only the sub-layer's output: "
           "x + LayerNorm(sublayer(x)) lets the residual stream grow unnormalised."),
    "L4": ("in cross-attention the queries come from the decoder, keys and values from the "
           "memory: self.cross_attn(x, memory, memory, memory_mask)."),
    "L5": ("self-attention comes first, then the feed-forward network; in a decoder layer the "
           "order is masked self-attention, cross-attention, feed-forward."),
    "L6": ("each sub-layer has its own LayerNorm: norm1 with the first sub-layer, norm2 with the "
           "second (and norm3 with the third), in the order of the __init__."),
    "L7": ("the cross-attention's queries are the first sub-layer's output (h1 in the "
           "equations), not the layer's input x: update x after each sub-layer and pass the "
           "updated x (normalised by norm2 in pre-norm) as the query."),
    "L8": ("tgt_mask (look-ahead) goes to the self-attention, memory_mask (source padding) to "
           "the cross-attention."),
    "M5": ("the decoder's self-attention needs the look-ahead mask: pass tgt_mask to "
           "self.self_attn (decode: causal_mask(T)[None, None] when tgt_mask is None), or "
           "position t reads the tokens after it."),
    "W1": ("return the logits themselves (any real numbers, one per vocabulary entry): the loss "
           "(notebook 09) and decoding (notebook 10) apply the (log-)softmax."),
    "W2": ("when tgt_mask is None, the decoder gets the look-ahead mask alone, with its four "
           "axes: causal_mask(T)[None, None], (1, 1, T, T); use a given tgt_mask as it is (it "
           "may hide target padding too)."),
    "W3": ("every nn.Linear has a bias besides its weight: 4 d_model per attention block, "
           "d_ff + d_model per feed-forward network, tgt_vocab for the output projection."),
    "D1": ("work with log-probabilities: a hypothesis' score is the SUM of its tokens' log p "
           "(the log of the product of probabilities), and log p(prefix) + log p(token | prefix) "
           "never underflows."),
    "D2": ("a candidate whose token is eos_id is a finished translation: it goes to ended (if "
           "among the beam_size best), never into kept, where it would grow past its end."),
    "D3": ("do not stop when a hypothesis ends: the others may still end better. Stop when none "
           "is left (or when none can beat the beam_size best finished ones: cannot_improve)."),
    "D5": ("the next token comes from the last position's logits, logits[:, -1]: position 0 "
           "always predicts the first word."),
    "D6": ("after EOS a row only gets padding (EOS again, as helpers.decoding does), and "
           "decoding stops as soon as every row has finished."),
    "D7": "the output starts with BOS, like the decoder's input: return the whole (B, 1 + steps).",
    "D8": ("append the new keys and values to the cache (torch.cat along the positions, dim=2): "
           "replacing them lets each new token see only itself."),
    "D9": ("the new token may see every stored position, but several new tokens at once (a "
           "prefill) see each other causally: keep the mask decode passes you, the last T rows "
           "of causal_mask(t + T)."),
    "D10": ("rank the candidates of all hypotheses together (flatten the (n, V) table, then "
            "topk): one strong hypothesis may supply every survivor."),
    "D11": ("compare finished hypotheses with the same length penalty: score = sum of log p / "
            "length ** length_penalty, for every finished hypothesis."),
    "D12": ("give the mask four axes, (1, 1, T, t + T): causal_mask(t + T)[None, None, t:] (the "
            "course's attention refuses a 2-D mask, which could pass for a (B, L) padding mask)."),
    "D13": ("project the memory's keys and values once, at the first call, keep them in the "
            "cache and reuse them at every later call (self.cross): that is half of what the "
            "cache saves."),
    "I1": "0 * log(0) is NaN in floating point: a masked key (weight 0) must add 0. Clamp the "
          "weights to a tiny positive number before the log (or use torch.xlogy).",
    "I2": "each query has its own distribution over the KEYS (the last axis): sum there.",
    "I3": "each row of a cross-attention map is one TARGET word's weights over the source "
          "words: take the argmax along the last axis (dim=-1).",
    "I4": "merge_heads (notebook 03) puts the heads side by side, not interleaved: head i owns "
          "the d_k features i * d_k to (i + 1) * d_k - 1.",
    "S1": "each rank divided by its OWN tokens: averaged by DDP, that is a mean of means, which "
          "weighs a token of a rank with fewer tokens more. Divide the rank's SUM by "
          "global_tokens (the real tokens of the whole global batch), then multiply by "
          "world_size to undo DDP's averaging.",
    "S2": "right for one process, but DDP AVERAGES the gradients of the W ranks, so this "
          "gradient ends up W times too small: multiply by world_size.",
    "S3": "every rank took the same items (the whole block, or the same part of it): the W "
          "copies train on the same pairs and the run is no faster than one process (what "
          "happens without a DistributedSampler). Rank r takes every W-th item of the block, "
          "from r: order[s * B + r:(s + 1) * B:W].",
    "S4": "step s starts at s * (B / W): a step overlaps the one before, so pairs are seen twice "
          "and others never. The global batch B moves on by B every step.",
    "S5": "dist.all_reduce ADDS the tensors of all ranks (its default op is SUM): divide by the "
          "world size, dist.get_world_size(), to get DDP's average.",
    "G1": "RMSNorm does NOT subtract the mean: that is LayerNorm's first step, which RMSNorm "
          "drops. Divide x itself by sqrt(mean(x^2) + eps).",
    "G2": "you rotated the pairs (x[i], x[i + d/2]), the 'rotate half' layout of some libraries. "
          "The course pairs ADJACENT features (x[2i], x[2i+1]), as notebook 02 interleaves sine "
          "and cosine: even, odd = x[..., 0::2], x[..., 1::2]; angle i belongs to that pair.",
    "G3": "divide by the temperature FIRST: it reshapes the distribution, and the filter "
          "(top-p's nucleus, min-p's bar) must choose on that new shape, the one sampled from.",
    "G4": "keep the token that crosses top_p: the nucleus is the smallest set of most likely "
          "tokens whose probabilities reach top_p, so remove a token only when the tokens ranked "
          "above it already reach top_p.",
    "G5": "your labels also ask the model to predict the English words and <sep>: the loss must "
          "count the continuation only. The label of a position whose next token is still the "
          "prompt's is PAD_ID, which the loss ignores.",
    "G6": "with mask=None every position attends to the tokens after it, the ones it must "
          "predict: build the causal mask, causal_mask(L)[None, None] (four axes, True = may "
          "attend), when none is given.",
    "G7": "a cached step sits at position start = cache.length, the tokens already in the cache "
          "(prompt included): start = 0 if cache is None else cache.length, the positions "
          "self.positional(x, start), and cache.length += L at the end of forward. The loop "
          "keeps ONE KVCache from the prefill to the last step.",
    "G8": "the first call must feed the whole prompt (the prefill) into the new KVCache, so that "
          "it holds the keys and values of every prompt token; then one token per step.",
    "G9": "your tokens are right, but the prompt went through the model one token per call: the "
          "prefill feeds the WHOLE prompt in one call, model(prompt, cache=cache), so its P "
          "tokens are computed together. The calls show (tokens fed, start) of each.",
    "G10": "your tokens are right, but every step ran the whole sequence through the model "
           "(model(out), or a fresh KVCache each time): that is the loop WITHOUT the cache. "
           "After the prefill, feed only the newest token, model(out[:, -1:], cache=cache).",
    "K1": "weight each word's pairs by its frequency: counts[pair] += freq.",
    "K2": "after a merge, skip both symbols (i += 2): ('a', 'a', 'a') with ('a', 'a') gives "
          "('aa', 'a').",
    "K3": "apply the merges in the order they were learned: the lowest rank first.",
    "K4": "count the pairs inside each word only: two words never merge.",
    "K5": "start from split_word(word): the last character carries '</w>', as in training.",
    "K6": "break a tie by the vocabulary's order, not by which pair was counted first: min over "
          "(-count, rank[left], rank[right]).",
    "K7": "compare whole symbols, not characters of the joined string: ('x', 'ab', 'c</w>') "
          "holds no pair ('b', 'c</w>').",
    "K8": "count every occurrence: 'banana' holds ('a', 'n') twice.",
    "R1": "match the projections by name: w_q <- q_proj, w_k <- k_proj, w_v <- v_proj, w_o <- "
          "out_proj (all four have the same shape, so a swap raises no error).",
    "R2": "the decoder's self_attn <- self_attn, its cross_attn <- encoder_attn (Marian's name "
          "for the cross-attention): the two blocks have the same shapes, so a swap raises no "
          "error.",
    "R3": "Marian's positional table is in halves: build the Transformer with "
          "interleaved_positions=False (all sines, then all cosines; notebook 02's P2 is here "
          "the right layout).",
    "R4": "copy final_logits_bias into the output projection's bias (generator.bias, reshaped "
          "from (1, V) to (V,)): Marian adds it to every logit.",
    "R5": "copy the embedding matrix as it is: Marian multiplies the looked-up rows by "
          "sqrt(d_model) in its forward pass, and so does the course's Transformer.embed, so the "
          "stored weights are unscaled in both.",
    "R6": "a LayerNorm is named after the sub-layer it closes: norm1 <- self_attn_layer_norm; in "
          "the decoder norm2 <- encoder_attn_layer_norm, norm3 <- final_layer_norm; in the "
          "encoder norm2 <- final_layer_norm.",
    "R7": "Marian's feed-forward networks use swish, x * sigmoid(x) (torch's silu): build the "
          "Transformer with activation=\"silu\".",
    "R8": "Marian's decoder starts with the pad id (decoder_start_token_id), not with the "
          "published bos_token_id 0, which is </s>.",
    "R9": "each layer has weights of its own: decoder.layers.i <- model.decoder.layers.i, "
          "encoder.layers.i <- model.encoder.layers.i (loop over i, and keep the stack's name: "
          "the decoder's self-attention and feed-forward are not the encoder's).",
}

