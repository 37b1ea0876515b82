"""Notebook 13's exercises: the two things data parallelism asks of the learner, the loss of one
rank (``rank_loss``: S1, S2) and the rank's share of a step's batch (``rank_batch``: S3, S4).
"""

import torch

from .engine import Case, Exercise, Pitfall

# ----------------------------------------------------------------------------------------------
# rank_loss: what one of W processes must backpropagate
# ----------------------------------------------------------------------------------------------

def rank_loss(token_losses: torch.Tensor, mask: torch.Tensor, global_tokens: int,
              world_size: int) -> torch.Tensor:
    """The loss rank r backpropagates so that DDP's gradient equals one process's.

    ``token_losses`` ``(b, T)``: the loss of each target token of this rank's pairs; ``mask``
    ``(b, T)``: True on real tokens, False on padding; ``global_tokens``: N, the real tokens of
    the whole global batch (all ranks); ``world_size``: W. One process minimises (sum of all
    token losses) / N; DDP *averages* the W ranks' gradients, so each rank returns W S_r / N.
    """
    summed = token_losses.masked_fill(~mask, 0.0).sum()  # S_r: padding adds nothing
    return summed * world_size / global_tokens


def _rank_loss_cases(gen: torch.Generator) -> list:
    def rank(b, T, real, N, W):
        mask = torch.arange(T)[None, :] < torch.tensor(real)[:, None]  # (b, T) padding at the end
        losses = torch.rand(b, T, generator=gen) * 5
        losses[~mask] = torch.rand(int((~mask).sum()), generator=gen) * 5  # padding: not 0
        return (losses, mask, N, W)

    return [Case("rank 0 of 2: 3 pairs, 12 of all 30 tokens", rank(3, 6, [6, 4, 2], 30, 2)),
            Case("rank 1 of 2: 2 pairs, 18 of all 30 tokens", rank(2, 9, [9, 9], 30, 2)),
            Case("rank 3 of 4: 4 pairs, 11 of all 40 tokens", rank(4, 5, [5, 3, 2, 1], 40, 4)),
            Case("one process (W = 1): its own 14 tokens", rank(2, 7, [7, 7], 14, 1))]


# ----------------------------------------------------------------------------------------------
# rank_batch: which items of the shared order rank r trains on at a step
# ----------------------------------------------------------------------------------------------

def rank_batch(order: torch.Tensor, step: int, rank: int, world_size: int,
               batch_size: int) -> torch.Tensor:
    """Rank ``rank``'s items at step ``step`` (from 0), dealt as ``DistributedSampler`` deals.

    ``order``: the epoch's permutation of the dataset's indices, the same on every rank (same
    seed). Step s uses the block ``order[s*B : (s+1)*B]`` of the global batch B, dealt out in
    turn: rank r gets the block's items r, r + W, r + 2W, ... (B / W of them).
    """
    start = step * batch_size  # the global batch advances by B every step
    return order[start + rank:start + batch_size:world_size]


def _rank_batch_cases(gen: torch.Generator) -> list:
    def order(n):
        return torch.randperm(n, generator=gen)

    return [Case("rank 0 of 2, step 0, B = 8", (order(40), 0, 0, 2, 8)),
            Case("rank 1 of 2, step 3, B = 8", (order(40), 3, 1, 2, 8)),
            Case("rank 2 of 4, step 2, B = 12", (order(60), 2, 2, 4, 12)),
            Case("rank 0 of 1 (one process), step 1, B = 6", (order(20), 1, 0, 1, 6))]


EXERCISES: dict[str, Exercise] = {
    "rank_loss": Exercise(
        reference=rank_loss,
        make_cases=_rank_loss_cases,
        sources=(rank_loss,),
        outputs=("loss",),
        pitfalls=(
            Pitfall("S1", "the rank's own mean",
                    lambda loss, mask, n, w: loss.masked_fill(~mask, 0).sum() / mask.sum(),
                    "that is the mean over THIS rank's tokens: averaged by DDP it becomes a "
                    "mean of means, which weighs a token of a rank with fewer tokens more. "
                    "Divide the rank's sum by the tokens of the whole global batch "
                    "(global_tokens), then undo DDP's averaging."),
            Pitfall("S2", "DDP's average forgotten",
                    lambda loss, mask, n, w: loss.masked_fill(~mask, 0).sum() / n,
                    "right for one process, but DDP AVERAGES the gradients of the W ranks, so "
                    "this gradient ends up W times too small: multiply by world_size."),
            Pitfall(None, "padding counted",
                    lambda loss, mask, n, w: loss.sum() * w / n,
                    "the padded positions have losses too (the model still predicts there): "
                    "keep only the real tokens, where mask is True."),
        ),
    ),
    "rank_batch": Exercise(
        reference=rank_batch,
        make_cases=_rank_batch_cases,
        sources=(rank_batch,),
        outputs=("items",),
        pitfalls=(
            Pitfall("S3", "every rank takes the whole batch",
                    lambda o, s, r, w, b: o[s * b:(s + 1) * b],
                    "every rank got the whole global batch: the W copies train on the same "
                    "pairs and the run is no faster than one process (what happens without a "
                    "DistributedSampler). Rank r takes every W-th item of the block, from r."),
            Pitfall("S4", "steps advanced by the rank's share",
                    lambda o, s, r, w, b: o[s * (b // w) + r:s * (b // w) + b:w],
                    "step s starts at s * (B / W): a step overlaps the one before, so pairs are "
                    "seen twice and others never. The global batch B moves on by B every step."),
            Pitfall(None, "contiguous pieces",
                    lambda o, s, r, w, b: o[s * b + r * (b // w):s * b + (r + 1) * (b // w)],
                    "your pieces do split the block between the ranks (a valid split), but not "
                    "as DistributedSampler deals: round-robin, rank r takes items r, r + W, "
                    "r + 2W, ... of the block."),
        ),
    ),
}
