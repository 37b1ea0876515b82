"""Plausible slips in the exercises of notebooks 08 to 10, written as a learner would write them
(not copied from the registry's variants): each must fail its check with the hint of that slip,
never another's, and right answers written differently from the references must pass.

``SLIPS`` holds, per exercise, (label, the wrong function, what the hint must contain: a pitfall
id such as "[T2]" or a phrase of the hint). ``RIGHT`` holds other spellings of right answers.
"""

import contextlib
import io
import math

import pytest
import torch
import torch.nn.functional as F

from helpers.attention import KVCache, MultiHeadAttention, scaled_dot_product_attention
from helpers.decoding import beam_step
from helpers.exercises import check
from helpers.masks import causal_mask
from helpers.model import Transformer

GENERIC = "Compare your code with the equation"


@pytest.fixture(autouse=True, scope="module")
def optimizers_loaded():
    """The first optimizer.step() of a process imports a part of torch (seconds on a busy
    machine): done once here, so that no check's time limit pays for it."""
    layer = torch.nn.Linear(1, 1)
    layer(torch.ones(1)).sum().backward()
    torch.optim.SGD(layer.parameters(), lr=0.1).step()


def run_check(name, fn):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        ok = check(name, fn)
    return ok, out.getvalue()


# ----------------------------------------------------------------------------------------------
# 08: transformer_decode (MyTransformer.decode)
# ----------------------------------------------------------------------------------------------

def _decoder(body):
    return type("MyTransformer", (Transformer,), {"decode": body})


def _d_no_scale(self, tgt, memory, src_mask=None, tgt_mask=None):
    x = self.positional(self.tgt_embed(tgt))
    if tgt_mask is None:
        tgt_mask = causal_mask(tgt.shape[1])[None, None]
    return self.generator(self.decoder(x, memory, tgt_mask, src_mask))


def _d_scale_after_positions(self, tgt, memory, src_mask=None, tgt_mask=None):
    x = self.positional(self.tgt_embed(tgt)) * math.sqrt(self.d_model)
    if tgt_mask is None:
        tgt_mask = causal_mask(tgt.shape[1])[None, None]
    return self.generator(self.decoder(x, memory, tgt_mask, src_mask))


def _d_scale_by_d_model(self, tgt, memory, src_mask=None, tgt_mask=None):
    x = self.positional(self.tgt_embed(tgt) * self.d_model)
    if tgt_mask is None:
        tgt_mask = causal_mask(tgt.shape[1])[None, None]
    return self.generator(self.decoder(x, memory, tgt_mask, src_mask))


def _d_no_causal(self, tgt, memory, src_mask=None, tgt_mask=None):
    x = self.embed(self.tgt_embed, tgt, "tgt")
    return self.generator(self.decoder(x, memory, tgt_mask, src_mask))


def _d_mask_2d(self, tgt, memory, src_mask=None, tgt_mask=None):
    x = self.embed(self.tgt_embed, tgt, "tgt")
    if tgt_mask is None:
        tgt_mask = causal_mask(tgt.shape[1])
    return self.generator(self.decoder(x, memory, tgt_mask, src_mask))


def _d_mask_inverted(self, tgt, memory, src_mask=None, tgt_mask=None):
    x = self.embed(self.tgt_embed, tgt, "tgt")
    if tgt_mask is None:
        tgt_mask = ~causal_mask(tgt.shape[1])[None, None]
    return self.generator(self.decoder(x, memory, tgt_mask, src_mask))


def _d_given_mask_ignored(self, tgt, memory, src_mask=None, tgt_mask=None):
    x = self.embed(self.tgt_embed, tgt, "tgt")
    tgt_mask = causal_mask(tgt.shape[1])[None, None]
    return self.generator(self.decoder(x, memory, tgt_mask, src_mask))


def _d_no_src_mask(self, tgt, memory, src_mask=None, tgt_mask=None):
    x = self.embed(self.tgt_embed, tgt, "tgt")
    if tgt_mask is None:
        tgt_mask = causal_mask(tgt.shape[1])[None, None]
    return self.generator(self.decoder(x, memory, tgt_mask))


def _d_masks_swapped(self, tgt, memory, src_mask=None, tgt_mask=None):
    x = self.embed(self.tgt_embed, tgt, "tgt")
    if tgt_mask is None:
        tgt_mask = causal_mask(tgt.shape[1])[None, None]
    return self.generator(self.decoder(x, memory, src_mask, tgt_mask))


def _d_no_generator(self, tgt, memory, src_mask=None, tgt_mask=None):
    x = self.embed(self.tgt_embed, tgt, "tgt")
    if tgt_mask is None:
        tgt_mask = causal_mask(tgt.shape[1])[None, None]
    return self.decoder(x, memory, tgt_mask, src_mask)


def _d_softmax(self, tgt, memory, src_mask=None, tgt_mask=None):
    x = self.embed(self.tgt_embed, tgt, "tgt")
    if tgt_mask is None:
        tgt_mask = causal_mask(tgt.shape[1])[None, None]
    return self.generator(self.decoder(x, memory, tgt_mask, src_mask)).softmax(dim=-1)


def _d_log_softmax(self, tgt, memory, src_mask=None, tgt_mask=None):
    x = self.embed(self.tgt_embed, tgt, "tgt")
    if tgt_mask is None:
        tgt_mask = causal_mask(tgt.shape[1])[None, None]
    return F.log_softmax(self.generator(self.decoder(x, memory, tgt_mask, src_mask)), dim=-1)


def _d_src_embedding(self, tgt, memory, src_mask=None, tgt_mask=None):
    x = self.embed(self.src_embed, tgt, "tgt")
    if tgt_mask is None:
        tgt_mask = causal_mask(tgt.shape[1])[None, None]
    return self.generator(self.decoder(x, memory, tgt_mask, src_mask))


def _d_no_positions(self, tgt, memory, src_mask=None, tgt_mask=None):
    x = self.tgt_embed(tgt) * math.sqrt(self.d_model)
    if tgt_mask is None:
        tgt_mask = causal_mask(tgt.shape[1])[None, None]
    return self.generator(self.decoder(x, memory, tgt_mask, src_mask))


def _d_memory_swapped(self, tgt, memory, src_mask=None, tgt_mask=None):
    x = self.embed(self.tgt_embed, tgt, "tgt")
    if tgt_mask is None:
        tgt_mask = causal_mask(tgt.shape[1])[None, None]
    return self.generator(self.decoder(memory, x, tgt_mask, src_mask))


def _d_mask_and_padding(self, tgt, memory, src_mask=None, tgt_mask=None):
    """None: causal mask AND a target padding mask (not asked: the mask alone)."""
    x = self.embed(self.tgt_embed, tgt, "tgt")
    if tgt_mask is None:
        tgt_mask = causal_mask(tgt.shape[1])[None, None] & (tgt != 0)[:, None, None, :]
    return self.generator(self.decoder(x, memory, tgt_mask, src_mask))


# ----------------------------------------------------------------------------------------------
# 08: count_parameters
# ----------------------------------------------------------------------------------------------

def _count(d, h, dff, n, sv, tv, *, attn_mats=4, attn_bias=True, ff_bias=True, enc_norms=2,
           dec_norms=3, dec_attn=2, stacks=2, src_emb=True, tgt_emb=True, gen=True,
           gen_bias=True, pe=0, per_head=False, ff=2):
    attention = attn_mats * (d * d + (d if attn_bias else 0)) * (h if per_head else 1)
    second = (dff * d + (d if ff_bias else 0)) if ff == 2 else 0
    feed = (d * dff + (dff if ff_bias else 0)) + second
    enc = attention + feed + enc_norms * 2 * d
    dec = dec_attn * attention + feed + dec_norms * 2 * d
    layers = n * enc + (n * dec if stacks == 2 else 0)
    emb = (sv * d if src_emb else 0) + (tv * d if tgt_emb else 0)
    out = (tv * d if gen else 0) + (tv if gen and gen_bias else 0)
    return emb + layers + out + pe


def _counter(**slip):
    return lambda d, h, dff, n, sv, tv: _count(d, h, dff, n, sv, tv, **slip)


# ----------------------------------------------------------------------------------------------
# 08: output_projection
# ----------------------------------------------------------------------------------------------

def _p_last_position(x, weight, bias):
    return x[..., -1, :] @ weight.T + bias


def _p_flattened(x, weight, bias):
    return x.reshape(-1, x.shape[-1]) @ weight.T + bias


def _p_normalised(x, weight, bias):
    return F.normalize(x, dim=-1) @ F.normalize(weight, dim=-1).T + bias


def _p_argmax(x, weight, bias):
    return (x @ weight.T + bias).argmax(dim=-1)


# ----------------------------------------------------------------------------------------------
# 09: label_smoothed_nll
# ----------------------------------------------------------------------------------------------

def _flat(logits, labels):
    return logits.reshape(-1, logits.shape[-1]), labels.reshape(-1)


def _ls_log_of_softmax(logits, labels, epsilon, ignore_index):
    logits, labels = _flat(logits, labels)
    log_p = torch.log(torch.softmax(logits, dim=-1))
    keep = labels != ignore_index
    safe = torch.where(keep, labels, torch.zeros_like(labels))
    nll = -log_p.gather(1, safe[:, None]).squeeze(1)
    loss = (1 - epsilon) * nll - epsilon * log_p.mean(dim=-1)
    return loss[keep].mean()


def _ls_gather_raw(logits, labels, epsilon, ignore_index):
    logits, labels = _flat(logits, labels)
    log_p = logits.log_softmax(dim=-1)
    nll = -log_p.gather(1, labels[:, None]).squeeze(1)  # -100 is no index
    loss = (1 - epsilon) * nll - epsilon * log_p.mean(dim=-1)
    keep = labels != ignore_index
    return loss[keep].mean()


def _ls_index_raw(logits, labels, epsilon, ignore_index):
    logits, labels = _flat(logits, labels)
    log_p = logits.log_softmax(dim=-1)
    nll = -log_p[torch.arange(len(labels)), labels]
    loss = (1 - epsilon) * nll - epsilon * log_p.mean(dim=-1)
    keep = labels != ignore_index
    return (loss * keep).sum() / keep.sum()


def _ls_parts(logits, labels, ignore_index, dim=-1):
    logits, labels = _flat(logits, labels)
    log_p = logits.log_softmax(dim=dim)
    keep = labels != ignore_index
    nll = -log_p.gather(1, labels.masked_fill(~keep, 0)[:, None]).squeeze(1)
    return log_p, nll, keep


def _ls_formula(nll_weight, uniform, *, dim=-1, denominator="keep", pad_test=None):
    def loss_fn(logits, labels, epsilon, ignore_index):
        log_p, nll, keep = _ls_parts(logits, labels, ignore_index, dim)
        if pad_test is not None:
            keep = pad_test(labels.reshape(-1), ignore_index)
        loss = nll_weight(epsilon) * nll + uniform(log_p, epsilon)
        total = loss[keep].sum()
        return total / {"keep": keep.sum(), "all": keep.numel(), "none": 1}[denominator]
    return loss_fn


def _ls_pad_zero(logits, labels, epsilon, ignore_index):
    logits, labels = _flat(logits, labels)
    log_p = logits.log_softmax(-1)
    keep = labels != 0
    nll = -log_p.gather(1, labels.masked_fill(~keep, 0)[:, None]).squeeze(1)
    return ((1 - epsilon) * nll - epsilon * log_p.mean(-1))[keep].mean()


def _ls_one_hot_kl(logits, labels, epsilon, ignore_index):
    logits, labels = _flat(logits, labels)
    V = logits.shape[-1]
    keep = labels != ignore_index
    q = F.one_hot(labels.clamp(min=0), V).float() * (1 - epsilon) + epsilon / V
    log_p = logits.log_softmax(-1)
    return (q * (torch.log(q) - log_p)).sum(-1)[keep].mean()


def _ls_kl_div(logits, labels, epsilon, ignore_index):
    logits, labels = _flat(logits, labels)
    V = logits.shape[-1]
    keep = labels != ignore_index
    q = F.one_hot(labels[keep], V).float() * (1 - epsilon) + epsilon / V
    return F.kl_div(logits[keep].log_softmax(-1), q, reduction="batchmean")


def _ls_others(logits, labels, epsilon, ignore_index):
    log_p, nll, keep = _ls_parts(logits, labels, ignore_index)
    V = log_p.shape[-1]
    others = (-log_p.sum(-1) - nll) / (V - 1)
    return ((1 - epsilon) * nll + epsilon * others)[keep].mean()


def _ls_smoothing_on_pads(logits, labels, epsilon, ignore_index):
    log_p, nll, keep = _ls_parts(logits, labels, ignore_index)
    loss = (1 - epsilon) * nll * keep - epsilon * log_p.mean(-1)
    return loss.sum() / keep.sum()


def _ls_no_ignore(logits, labels, epsilon, ignore_index):
    return F.cross_entropy(*_flat(logits, labels.clamp(min=0)), label_smoothing=epsilon)


# ----------------------------------------------------------------------------------------------
# 09: transformer_lr
# ----------------------------------------------------------------------------------------------

def _lr(step, d_model, warmup):
    return d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


# ----------------------------------------------------------------------------------------------
# 09: train_step
# ----------------------------------------------------------------------------------------------

def _clip(model, clip_norm):
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)


def _ts_no_scheduler(model, batch, loss_fn, optimizer, scheduler, clip_norm):
    optimizer.zero_grad()
    loss = loss_fn(model, batch)
    loss.backward()
    _clip(model, clip_norm)
    optimizer.step()
    return loss.item()


def _ts_no_optimizer(model, batch, loss_fn, optimizer, scheduler, clip_norm):
    optimizer.zero_grad()
    loss = loss_fn(model, batch)
    loss.backward()
    _clip(model, clip_norm)
    scheduler.step()
    return loss.item()


def _ts_no_clip(model, batch, loss_fn, optimizer, scheduler, clip_norm):
    optimizer.zero_grad()
    loss = loss_fn(model, batch)
    loss.backward()
    optimizer.step()
    scheduler.step()
    return loss.item()


def _ts_clip_before_backward(model, batch, loss_fn, optimizer, scheduler, clip_norm):
    optimizer.zero_grad()
    loss = loss_fn(model, batch)
    _clip(model, clip_norm)
    loss.backward()
    optimizer.step()
    scheduler.step()
    return loss.item()


def _ts_zero_before_step(model, batch, loss_fn, optimizer, scheduler, clip_norm):
    loss = loss_fn(model, batch)
    loss.backward()
    _clip(model, clip_norm)
    optimizer.zero_grad()
    optimizer.step()
    scheduler.step()
    return loss.item()


def _ts_no_zero(model, batch, loss_fn, optimizer, scheduler, clip_norm):
    loss = loss_fn(model, batch)
    loss.backward()
    _clip(model, clip_norm)
    optimizer.step()
    scheduler.step()
    return loss.item()


def _ts_scheduler_first(model, batch, loss_fn, optimizer, scheduler, clip_norm):
    optimizer.zero_grad()
    loss = loss_fn(model, batch)
    loss.backward()
    _clip(model, clip_norm)
    scheduler.step()
    optimizer.step()
    return loss.item()


def _ts_clip_after(model, batch, loss_fn, optimizer, scheduler, clip_norm):
    optimizer.zero_grad()
    loss = loss_fn(model, batch)
    loss.backward()
    optimizer.step()
    _clip(model, clip_norm)
    scheduler.step()
    return loss.item()


def _ts_scheduler_twice(model, batch, loss_fn, optimizer, scheduler, clip_norm):
    optimizer.zero_grad()
    loss = loss_fn(model, batch)
    loss.backward()
    _clip(model, clip_norm)
    optimizer.step()
    scheduler.step()
    scheduler.step()
    return loss.item()


def _ts_loss_after(model, batch, loss_fn, optimizer, scheduler, clip_norm):
    optimizer.zero_grad()
    loss_fn(model, batch).backward()
    _clip(model, clip_norm)
    optimizer.step()
    scheduler.step()
    return loss_fn(model, batch).item()  # the loss after the update


def _ts_clip_value(model, batch, loss_fn, optimizer, scheduler, clip_norm):
    optimizer.zero_grad()
    loss = loss_fn(model, batch)
    loss.backward()
    torch.nn.utils.clip_grad_value_(model.parameters(), clip_norm)
    optimizer.step()
    scheduler.step()
    return loss.item()


def _ts_zero_at_end(model, batch, loss_fn, optimizer, scheduler, clip_norm):
    loss = loss_fn(model, batch)
    loss.backward()
    _clip(model, clip_norm)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()
    return float(loss)


def _ts_model_zero_grad(model, batch, loss_fn, optimizer, scheduler, clip_norm):
    model.zero_grad()
    loss = loss_fn(model, batch)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(list(model.parameters()), max_norm=clip_norm)
    optimizer.step()
    scheduler.step()
    return float(loss.detach())


def _ts_returns(what):
    """A right step that returns ``what(loss)`` instead of loss.item()."""
    def step(model, batch, loss_fn, optimizer, scheduler, clip_norm):
        optimizer.zero_grad()
        loss = loss_fn(model, batch)
        loss.backward()
        _clip(model, clip_norm)
        optimizer.step()
        scheduler.step()
        return what(loss)
    return step


def _ts_item_first(model, batch, loss_fn, optimizer, scheduler, clip_norm):
    optimizer.zero_grad()
    loss = loss_fn(model, batch).item()
    loss.backward()
    _clip(model, clip_norm)
    optimizer.step()
    scheduler.step()
    return loss


def _ts_clip_each(model, batch, loss_fn, optimizer, scheduler, clip_norm):
    optimizer.zero_grad()
    loss = loss_fn(model, batch)
    loss.backward()
    for p in model.parameters():
        torch.nn.utils.clip_grad_norm_(p, clip_norm)
    optimizer.step()
    scheduler.step()
    return loss.item()


def _ts_clip_fixed(model, batch, loss_fn, optimizer, scheduler, clip_norm):
    optimizer.zero_grad()
    loss = loss_fn(model, batch)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    optimizer.step()
    scheduler.step()
    return loss.item()


# ----------------------------------------------------------------------------------------------
# 10: greedy_decode
# ----------------------------------------------------------------------------------------------

def _greedy(position=-1, fill="eos", stop="all", keep_bos=True, mask=True, steps=0,
            last_only=False, pick=lambda logits: logits.argmax(dim=-1)):
    def greedy(model, src, max_len, bos_id, eos_id, src_mask=None):
        m = src_mask if mask else None
        with torch.no_grad():
            memory = model.encode(src, m)
            ys = torch.full((src.shape[0], 1), bos_id, dtype=torch.long)
            done = torch.zeros(src.shape[0], dtype=torch.bool)
            for _ in range(max_len + steps):
                inputs = ys[:, -1:] if last_only else ys
                nxt = pick(model.decode(inputs, memory, m)[:, position])
                if fill == "eos":
                    nxt[done] = eos_id
                elif fill == "pad":
                    nxt[done] = 0
                ys = torch.cat([ys, nxt.unsqueeze(1)], dim=1)
                done = done | (nxt == eos_id)
                if stop == "all" and done.all() or stop == "any" and done.any():
                    break
        return ys if keep_bos else ys[:, 1:]
    return greedy


# ----------------------------------------------------------------------------------------------
# 10: beam_step
# ----------------------------------------------------------------------------------------------

def _bs(score=lambda sums, lp: sums[:, None] + lp, look=lambda k, n: k + n, ended_any_rank=False,
        ended_sorted=True, kept_limit=True, swap_divmod=False, swap_lists=False, eos="ends",
        last=True, split=lambda i, n, V: divmod(i, V), rank_by=None):
    def step(sums, log_probs, beam_size, eos_id, last_step=False):
        n, V = log_probs.shape
        table = score(sums, log_probs).flatten()
        ranking = table if rank_by is None else rank_by(sums, log_probs).flatten()
        _, idx = ranking.topk(min(look(beam_size, n), n * V))
        ended, kept = [], []
        for rank, i in enumerate(idx.tolist()):
            value = table[i].item()
            row, token = (i % n, i // n) if swap_divmod else split(i, n, V)
            if (token == eos_id and eos != "keeps") or (last_step and last):
                if eos == "drops" and not last_step:
                    continue
                if rank < beam_size or ended_any_rank:
                    ended.append((row, token, value))
            elif not kept_limit or len(kept) < beam_size:
                kept.append((row, token, value))
        if not ended_sorted:
            ended = ended[::-1]
        return (kept, ended) if swap_lists else (ended, kept)
    return step


def _bs_beam_by_beam(sums, log_probs, beam_size, eos_id, last_step=False):
    """D10 as a learner writes it: each hypothesis' best beam_size, one hypothesis after the
    other, then the rules of the exercise on that list."""
    candidates = []
    for row in range(len(sums)):
        values, tokens = (sums[row] + log_probs[row]).topk(beam_size)
        candidates += [(row, t, v) for v, t in zip(values.tolist(), tokens.tolist(), strict=True)]
    ended, kept = [], []
    for rank, (row, token, value) in enumerate(candidates):
        if token == eos_id or last_step:
            if rank < beam_size:
                ended.append((row, token, value))
        elif len(kept) < beam_size:
            kept.append((row, token, value))
    return ended, kept


def _bs_until_full(sums, log_probs, beam_size, eos_id, last_step=False):
    """Endings taken until the beam is full, wherever they rank."""
    table = (sums[:, None] + log_probs).flatten()
    ended, kept = [], []
    for i in table.argsort(descending=True).tolist():
        row, token = divmod(i, log_probs.shape[1])
        if len(kept) == beam_size or last_step and len(ended) == beam_size:
            break
        (ended if token == eos_id or last_step else kept).append((row, token, table[i].item()))
    return ended, kept


# ----------------------------------------------------------------------------------------------
# 10: beam_search
# ----------------------------------------------------------------------------------------------

def _search(length=lambda tokens: len(tokens), bos=False, order=True, limit=True, last=True,
            steps=0, eos_in=True, stop_first=False, step=beam_step, penalised_beam=False,
            best_first=True, stop_at=None):
    def search(model, src, beam_size, max_len, bos_id, eos_id, src_mask=None,
               length_penalty=0.0):
        done = []
        with torch.no_grad():
            memory = model.encode(src, src_mask)
            hyps, sums = [[bos_id]], torch.zeros(1)
            for t in range(1, max_len + 1 + steps):
                logits = model.decode(torch.tensor(hyps), memory.expand(len(hyps), -1, -1),
                                      src_mask)[:, -1]
                ended, kept = step(sums, logits.log_softmax(-1), beam_size, eos_id,
                                   last_step=(t == max_len) and last)
                for row, token, total in ended:
                    tokens = hyps[row] + [token]
                    tokens = tokens if bos else tokens[1:]
                    if not eos_in and token == eos_id:
                        tokens = tokens[:-1]
                    done.append((tokens, total / length(tokens) ** length_penalty
                                 if length(tokens) else total))
                enough = stop_at is not None and len(done) >= stop_at(beam_size)
                if not kept or (stop_first and ended) or enough:
                    break
                hyps = [hyps[row] + [token] for row, token, _ in kept]
                sums = torch.tensor([total / (t ** length_penalty if penalised_beam else 1)
                                     for *_, total in kept])
        if order:
            done.sort(key=lambda pair: pair[1], reverse=best_first)
        return done[:beam_size] if limit else done
    return search


def _search_cached(reorder=True, pick=lambda hyps, rows: hyps[rows]):
    """With the KV cache, as the reference: each step feeds only the newest tokens."""
    def search(model, src, beam_size, max_len, bos_id, eos_id, src_mask=None,
               length_penalty=0.0):
        done, cache = [], KVCache()
        with torch.no_grad():
            memory = model.encode(src, src_mask)
            hyps, sums = torch.tensor([[bos_id]]), torch.zeros(1)
            for t in range(1, max_len + 1):
                logits = model.decode(hyps[:, -1:], memory.expand(len(hyps), -1, -1), src_mask,
                                      cache=cache)[:, -1]
                ended, kept = beam_step(sums, logits.log_softmax(-1), beam_size, eos_id,
                                        last_step=t == max_len)
                done += [(hyps[row, 1:].tolist() + [token], total / t ** length_penalty)
                         for row, token, total in ended]
                if not kept:
                    break
                rows = torch.tensor([row for row, _, _ in kept])
                hyps = torch.cat([pick(hyps, rows), torch.tensor([[tok] for _, tok, _ in kept])],
                                 1)
                sums = torch.tensor([total for *_, total in kept])
                if reorder:
                    cache.reorder(rows)
        return sorted(done, key=lambda pair: -pair[1])[:beam_size]
    return search


# ----------------------------------------------------------------------------------------------
# 10: kv_cache_decode (the lines the cache adds to MultiHeadAttention.forward)
# ----------------------------------------------------------------------------------------------

def _kv(extend=True, store=True, dim=2, cross="once", mask="given", past_first=True,
        key=lambda attn: attn):
    """A learner's cached forward, written without the course's helpers."""
    class Cached(MultiHeadAttention):
        def forward(self, query, key_in, value, mask_in=None, cache=None):
            heads = lambda x: x.view(x.shape[0], -1, self.num_heads, self.d_k).transpose(1, 2)
            q = heads(self.w_q(query))
            past = None if cache is None else cache.kv.get(key(self))
            if self.cross and past is not None and cross == "once":
                k, v = past
            else:
                k, v = heads(self.w_k(key_in)), heads(self.w_v(value))
                if past is not None and extend and (cross == "concatenated" or not self.cross):
                    pairs = ((past[0], k), (past[1], v)) if past_first else ((k, past[0]),
                                                                              (v, past[1]))
                    k, v = (torch.cat(pair, dim=dim) for pair in pairs)
            if cache is not None and store:
                cache.kv[key(self)] = (k, v)
            t, T = k.shape[2], q.shape[2]
            m = mask_in
            if cache is not None and not self.cross:
                m = {"none": None, "2d": causal_mask(t)[t - T:],
                     "square": causal_mask(T)[None, None],
                     "first": causal_mask(t)[None, None, :T]}.get(mask, mask_in)
            if cache is not None and mask == "all dropped":
                m = None
            out, _ = scaled_dot_product_attention(q, k, v, m)  # the course's (notebook 01)
            out = out.transpose(1, 2)
            return self.w_o(out.reshape(out.shape[0], out.shape[1], self.d_model))
    return Cached


class _KVNoCache(MultiHeadAttention):
    """The cache ignored: forward as in notebook 03."""

    def forward(self, query, key, value, mask=None, cache=None):
        return super().forward(query, key, value, mask)

SLIPS = {
    "transformer_decode": [
        ("no sqrt(d_model)", _decoder(_d_no_scale), "[T2]"),
        ("positions scaled too", _decoder(_d_scale_after_positions), "[T2]"),
        ("scaled by d_model", _decoder(_d_scale_by_d_model), "[T2]"),
        ("no look-ahead mask", _decoder(_d_no_causal), "[M5]"),
        ("2-D look-ahead mask", _decoder(_d_mask_2d), "four axes"),
        ("inverted look-ahead mask", _decoder(_d_mask_inverted), "[A3]"),
        ("given tgt_mask ignored", _decoder(_d_given_mask_ignored), "given tgt_mask"),
        ("src_mask dropped", _decoder(_d_no_src_mask), "[D4]"),
        ("masks swapped", _decoder(_d_masks_swapped), "memory mask"),
        ("no output projection", _decoder(_d_no_generator), "self.generator"),
        ("softmax", _decoder(_d_softmax), "logits"),
        ("log-softmax", _decoder(_d_log_softmax), "logits"),
        ("source embedding", _decoder(_d_src_embedding), "tgt_embed"),
        ("no positions", _decoder(_d_no_positions), "positional"),
        ("memory and x swapped", _decoder(_d_memory_swapped), "decoder(x, memory"),
        ("padding added to the causal mask", _decoder(_d_mask_and_padding), "alone"),
    ],
    "count_parameters": [
        ("no biases", _counter(attn_bias=False, ff_bias=False, gen_bias=False), "bias"),
        ("no attention biases", _counter(attn_bias=False), "bias"),
        ("no LayerNorm", _counter(enc_norms=0, dec_norms=0), "LayerNorm"),
        ("two LayerNorms per decoder layer", _counter(dec_norms=2), "three in a decoder"),
        ("one attention per decoder layer", _counter(dec_attn=1), "two attention blocks"),
        ("positional encoding counted", lambda d, h, dff, n, sv, tv:
            _count(d, h, dff, n, sv, tv) + 5000 * d, "fixed table"),
        ("attention per head", _counter(per_head=True), "num_heads"),
        ("one linear layer", _counter(ff=1), "two linear layers"),
        ("W_O forgotten", _counter(attn_mats=3), "W_O"),
        ("no output projection", _counter(gen=False), "output projection"),
        ("output projection without bias", _counter(gen_bias=False), "bias"),
        ("decoder stack forgotten", _counter(stacks=1), "decoder"),
        ("source embedding forgotten", _counter(src_emb=False), "both embeddings"),
        ("tied: one matrix", _counter(gen=False, gen_bias=False) , "output projection"),
        ("num_layers counted once", lambda d, h, dff, n, sv, tv:
            _count(d, h, dff, 1, sv, tv), "num_layers"),
    ],
    "output_projection": [
        ("softmax", lambda x, w, b: (x @ w.T + b).softmax(-1), "logits"),
        ("log-softmax", lambda x, w, b: F.log_softmax(x @ w.T + b, dim=-1), "logits"),
        ("not transposed", lambda x, w, b: x @ w + b, "weight.T"),
        ("F.linear with weight.T", lambda x, w, b: F.linear(x, w.T, b), "weight.T"),
        ("scaled by sqrt(d_model)", lambda x, w, b: (x @ w.T + b) * math.sqrt(w.shape[1]),
         "sqrt(d_model)"),
        ("divided by sqrt(d_model)", lambda x, w, b: (x @ w.T + b) / math.sqrt(w.shape[1]),
         "no scaling"),
        ("no bias", lambda x, w, b: x @ w.T, "bias"),
        ("bias subtracted", lambda x, w, b: x @ w.T - b, "bias"),
        ("last position only", _p_last_position, "every position"),
        ("flattened", _p_flattened, "leading axes"),
        ("cosine similarity", _p_normalised, "dot product"),
        ("argmax", _p_argmax, "logits"),
    ],
}

SLIPS.update({
    "label_smoothed_nll": [
        ("log(softmax)", _ls_log_of_softmax, "log_softmax"),
        ("gather on the raw labels", _ls_gather_raw, "-100"),
        ("indexing with the raw labels", _ls_index_raw, "-100"),
        ("smoothing kept on padding", _ls_smoothing_on_pads, "[T3]"),
        ("KL with log(q)", _ls_one_hot_kl, "[T3]"),
        ("F.kl_div", _ls_kl_div, "KL divergence"),
        ("epsilon over V - 1 tokens", _ls_others, "all V tokens"),
        ("padding not ignored", _ls_no_ignore, "padded position"),
        ("divided by every position", _ls_formula(lambda e: 1 - e,
                                                  lambda lp, e: -e * lp.mean(-1),
                                                  denominator="all"), "real (non-ignored)"),
        ("summed", _ls_formula(lambda e: 1 - e, lambda lp, e: -e * lp.mean(-1),
                               denominator="none"), "average over the real tokens"),
        ("no (1 - epsilon)", _ls_formula(lambda e: 1, lambda lp, e: -e * lp.mean(-1)),
         "1 - epsilon"),
        ("epsilon times the sum", _ls_formula(lambda e: 1 - e, lambda lp, e: -e * lp.sum(-1)),
         "epsilon / V"),
        ("weights swapped", _ls_formula(lambda e: e, lambda lp, e: -(1 - e) * lp.mean(-1)),
         "swapped"),
        ("smoothing term with the wrong sign",
         _ls_formula(lambda e: 1 - e, lambda lp, e: e * lp.mean(-1)), "-log p"),
        ("log_softmax over the positions",
         _ls_formula(lambda e: 1 - e, lambda lp, e: -e * lp.mean(-1), dim=0), "last axis"),
        ("pad id 0 written in", _ls_pad_zero, "ignore_index"),
    ],
    "transformer_lr": [
        ("steps from 0", lambda s, d, w: _lr(s - 1, d, w), "from 1"),
        ("step + 1", lambda s, d, w: _lr(s + 1, d, w), "+ 1 belongs"),
        ("max", lambda s, d, w: d ** -0.5 * max(s ** -0.5, s * w ** -1.5), "min"),
        ("exponents swapped", lambda s, d, w: d ** -0.5 * min(s ** -1.5, s * w ** -0.5),
         "swapped"),
        ("warmup ** -0.5", lambda s, d, w: d ** -0.5 * min(s ** -0.5, s * w ** -0.5),
         "warmup^-1.5"),
        ("warmup ** 1.5", lambda s, d, w: d ** -0.5 * min(s ** -0.5, s * w ** 1.5),
         "warmup^-1.5"),
        ("no d_model factor", lambda s, d, w: min(s ** -0.5, s * w ** -1.5), "d_model^-0.5"),
        ("sqrt(d_model)", lambda s, d, w: math.sqrt(d) * min(s ** -0.5, s * w ** -1.5),
         "d_model^-0.5"),
        ("1 / d_model", lambda s, d, w: min(s ** -0.5, s * w ** -1.5) / d, "d_model^-0.5"),
        ("step ** 0.5", lambda s, d, w: d ** -0.5 * min(s ** 0.5, s * w ** -1.5), "step^-0.5"),
        ("step left out of the warm-up arm", lambda s, d, w: d ** -0.5 * min(s ** -0.5,
                                                                             w ** -1.5),
         "step * warmup^-1.5"),
        ("the warm-up arm alone", lambda s, d, w: d ** -0.5 * s * w ** -1.5, "falls"),
        ("the decay arm alone", lambda s, d, w: d ** -0.5 * s ** -0.5, "grows"),
    ],
    "train_step": [
        ("no scheduler.step()", _ts_no_scheduler, "scheduler.step()"),
        ("no optimizer.step()", _ts_no_optimizer, "optimizer.step()"),
        ("no clipping", _ts_no_clip, "clip"),
        ("clipping before backward", _ts_clip_before_backward, "after loss.backward()"),
        ("zero_grad between backward and step", _ts_zero_before_step, "zero_grad"),
        ("no zero_grad", _ts_no_zero, "[T4]"),
        ("scheduler first", _ts_scheduler_first, "[T5]"),
        ("clip after the step", _ts_clip_after, "[T6]"),
        ("scheduler stepped twice", _ts_scheduler_twice, "once"),
        ("loss after the update", _ts_loss_after, "before the update"),
        ("clip_grad_value_", _ts_clip_value, "clip_grad_norm_"),
        ("the loss tensor returned", _ts_returns(lambda loss: loss), "return loss.item()"),
        ("a detached tensor returned", _ts_returns(torch.Tensor.detach), "return loss.item()"),
        ("loss.item() before backward", _ts_item_first, "until loss.backward()"),
        ("each parameter clipped alone", _ts_clip_each, "all gradients together"),
        ("clipped to a fixed norm", _ts_clip_fixed, "clip_norm, the argument"),
    ],
})

SLIPS.update({
    "greedy_decode": [
        ("first position", _greedy(position=0), "[D5]"),
        ("not padded after EOS", _greedy(fill=None), "[D6]"),
        ("padded with 0", _greedy(fill="pad"), "eos_id"),
        ("no early stop", _greedy(stop=None), "[D6]"),
        ("stops when any row ends", _greedy(stop="any"), "every row"),
        ("BOS dropped", _greedy(keep_bos=False), "[D7]"),
        ("no padding mask", _greedy(mask=False), "[D4]"),
        ("one step short", _greedy(steps=-1), "max_len"),
        ("last token alone, no cache", _greedy(last_only=True), "tokens so far"),
        ("argmin", _greedy(pick=lambda logits: logits.argmin(dim=-1)), "argmax"),
    ],
    "beam_step": [
        ("probabilities added", _bs(score=lambda sums, lp: sums.exp()[:, None] + lp.exp()),
         "[D1]"),
        ("probabilities multiplied", _bs(score=lambda sums, lp: sums.exp()[:, None] * lp.exp()),
         "[D1]"),
        ("log-probabilities multiplied", _bs(score=lambda sums, lp: sums[:, None] * lp), "[D1]"),
        ("not cumulative", _bs(score=lambda sums, lp: lp + 0 * sums[:, None]), "PLUS"),
        ("ranked by the token alone", _bs(rank_by=lambda sums, lp: lp), "[D1]"),
        ("sums + log_probs", _bs(score=lambda sums, lp: sums + lp), "sums[:, None]"),
        ("EOS kept in the beam", _bs(eos="keeps"), "[D2]"),
        ("EOS dropped", _bs(eos="drops"), "[D2]"),
        ("beam by beam", _bs_beam_by_beam, "[D10]"),
        ("top beam_size only", _bs(look=lambda k, n: k), "further down"),
        ("endings from any rank", _bs(ended_any_rank=True), "among the beam_size best"),
        ("endings until the beam is full", _bs_until_full, "among the beam_size best"),
        ("last step ignored", _bs(last=False), "last_step"),
        ("ended worst first", _bs(ended_sorted=False), "best first"),
        ("kept not limited", _bs(kept_limit=False), "at most beam_size"),
        ("divmod swapped", _bs(swap_divmod=True), "divmod"),
        ("// V and % V swapped", _bs(split=lambda i, n, V: (i % V, i // V)), "the row first"),
        ("divmod by n", _bs(split=lambda i, n, V: divmod(i, n)), "not n"),
        ("lists swapped", _bs(swap_lists=True), "(ended, kept)"),
    ],
    "beam_search": [
        ("length without EOS", _search(length=lambda tokens: len(tokens) - 1), "counts the"),
        ("BOS kept in the tokens", _search(bos=True), "<bos>"),
        ("not sorted", _search(order=False), "best first"),
        ("more than beam_size", _search(limit=False), "beam_size of them"),
        ("no last step", _search(last=False), "last_step"),
        ("EOS left out of the tokens", _search(eos_in=False), "eos_id"),
        ("no length penalty on the ranking", _search(length=lambda tokens: 1), "[D11]"),
        ("stopped at the first ending", _search(stop_first=True), "[D3]"),
        ("stopped at beam_size endings", _search(stop_at=lambda k: k), "[D3]"),
        ("a step short", _search(steps=-1), "last_step"),
        ("length with BOS", _search(length=lambda tokens: len(tokens) + 1), "<bos> out"),
        ("worst first", _search(best_first=False), "highest first"),
        ("length penalty on the beam's sums", _search(penalised_beam=True), "plain sums"),
        ("finished hypotheses extended", _search(step=_bs(eos="keeps")), "[D2]"),
        ("probabilities added", _search(step=_bs(score=lambda sums, lp: sums.exp()[:, None]
                                                 + lp.exp())), "[D1]"),
        ("candidates beam by beam", _search(step=_bs_beam_by_beam), "[D10]"),
        ("divmod swapped", _search(step=_bs(swap_divmod=True)), "divmod"),
        ("endings from any rank", _search(step=_bs(ended_any_rank=True)), "beam_size best"),
        ("the cache not reordered", _search_cached(reorder=False), "cache.reorder"),
        ("the tokens not reordered", _search_cached(pick=lambda hyps, rows: hyps), "tokens[rows]"),
    ],
    "kv_cache_decode": [
        ("cache replaced", _kv(extend=False), "[D8]"),
        ("cache never stored", _kv(store=False), "cache.kv[self] = (k, v)"),
        ("the cache ignored", _KVNoCache, "cache.kv[self] = (k, v)"),
        ("concatenated on the wrong axis", _kv(dim=1), "dim=2"),
        ("the new keys first", _kv(past_first=False), "come first"),
        ("memory keys recomputed", _kv(cross="every call"), "[D13]"),
        ("memory keys recomputed and appended", _kv(cross="concatenated"), "[D13]"),
        ("one entry for all layers", _kv(key=lambda attn: attn.cross), "cache.kv[self]"),
        ("no mask with a cache", _kv(mask="none"), "[D9]"),
        ("every mask dropped with a cache", _kv(mask="all dropped"), "memory_mask"),
        ("2-D mask", _kv(mask="2d"), "[D12]"),
        ("square mask", _kv(mask="square"), "(1, 1, T, t + T)"),
        ("first rows of the mask", _kv(mask="first"), "LAST T"),
    ],
})

RIGHT = {
    "greedy_decode": [("written otherwise", _greedy())],
    "beam_step": [("written otherwise", _bs())],
    "beam_search": [("without the cache", _search()), ("with the cache", _search_cached())],
    "kv_cache_decode": [("written otherwise", _kv())],
    "label_smoothed_nll": [
        ("F.nll_loss and a mean", lambda logits, labels, epsilon, ignore_index: (
            lambda lp, y: (1 - epsilon) * F.nll_loss(lp, y, ignore_index=ignore_index)
            + epsilon * (-lp.mean(-1))[y != ignore_index].mean())(
                logits.reshape(-1, logits.shape[-1]).log_softmax(-1), labels.reshape(-1))),
        ("a smoothed target q", lambda logits, labels, epsilon, ignore_index: (
            lambda lp, y, keep: -(((1 - epsilon) * F.one_hot(y.where(keep, 0), lp.shape[-1])
                                   + epsilon / lp.shape[-1]) * lp).sum(-1)[keep].mean())(
                F.log_softmax(logits.flatten(0, -2), -1), labels.flatten(),
                labels.flatten() != ignore_index)),
    ],
    "transformer_lr": [
        ("math.sqrt", lambda s, d, w: 1 / math.sqrt(d) * min(1 / math.sqrt(s), s / w ** 1.5)),
        ("a tensor", lambda s, d, w: torch.tensor(_lr(s, d, w))),
    ],
    "train_step": [
        ("zero_grad at the end", _ts_zero_at_end),
        ("model.zero_grad, float(loss.detach())", _ts_model_zero_grad),
        ("loss.item() returned via a helper", _ts_returns(lambda loss: loss.item())),
    ],
    "transformer_decode": [
        ("embed, then decoder", _decoder(lambda self, tgt, memory, src_mask=None, tgt_mask=None:
            self.generator(self.decoder(
                self.embed(self.tgt_embed, tgt, "tgt"), memory,
                causal_mask(tgt.shape[1])[None, None] if tgt_mask is None else tgt_mask,
                src_mask)))),
        ("by hand, mask (1, 1, T, T) via view", _decoder(
            lambda self, tgt, memory, src_mask=None, tgt_mask=None: self.generator(self.decoder(
                self.positional(math.sqrt(self.d_model) * self.tgt_embed(tgt)), memory,
                tgt_mask if tgt_mask is not None else
                torch.tril(torch.ones(tgt.shape[1], tgt.shape[1], dtype=torch.bool)).view(
                    1, 1, tgt.shape[1], tgt.shape[1]),
                src_mask)))),
    ],
    "count_parameters": [
        ("per piece", lambda d, h, dff, n, sv, tv: (sv + tv) * d + n * (
            (4 * d * d + 4 * d) * 3 + 2 * (2 * d * dff + dff + d) + 5 * 2 * d) + tv * (d + 1)),
        ("a float", lambda *s: float(_count(*s))),
    ],
    "output_projection": [
        ("F.linear", lambda x, w, b: F.linear(x, w, b)),
        ("einsum", lambda x, w, b: torch.einsum("...d,vd->...v", x, w) + b),
        ("matmul with .t()", lambda x, w, b: torch.matmul(x, w.t()) + b),
    ],
}


def _cases(table):
    return [pytest.param(name, fn, want, id=f"{name}: {label}")
            for name, rows in table.items() for label, fn, want in rows]


@pytest.mark.parametrize("name, fn, want", _cases(SLIPS))
def test_a_slip_gets_its_own_hint(name, fn, want):
    ok, out = run_check(name, fn)
    assert not ok, out
    assert GENERIC not in out, out
    assert want in out, out


@pytest.mark.parametrize("name, fn", [pytest.param(name, fn, id=f"{name}: {label}")
                                      for name, rows in RIGHT.items() for label, fn in rows])
def test_a_right_answer_written_otherwise_passes(name, fn):
    ok, out = run_check(name, fn)
    assert ok, out
