"""Subword tokens (notebook 14): a sentence cut into its pieces, and the trade-off between the
size of a vocabulary and the number of tokens per sentence."""

import matplotlib.pyplot as plt

from .style import CONTRAST, FAINT, INK, LEVELS, MAY_ATTEND, MAY_ATTEND_LIGHT, MUTED, RANK_COLOURS

PIECE_COLOURS = (MAY_ATTEND_LIGHT, RANK_COLOURS[1])  # neighbouring pieces alternate (blue, orange)
PER_LINE = 12  # pieces per line before the sentence wraps


def pieces_figure(pieces, title=None):
    """One box per piece, :data:`PER_LINE` to a line, the end-of-word marker ``</w>`` drawn as a
    thin bar."""
    pieces = [str(p) for p in pieces]
    if not pieces:
        raise ValueError("pieces_figure needs at least one piece")
    rows = (len(pieces) + PER_LINE - 1) // PER_LINE
    fig, ax = plt.subplots(figsize=(11, 0.75 * rows + 0.7))
    ax.set(xlim=(0, PER_LINE), ylim=(rows, 0))
    ax.axis("off")
    for i, piece in enumerate(pieces):
        row, col = divmod(i, PER_LINE)
        ends = piece.endswith("</w>")
        text = piece[:-4] if ends else piece
        ax.add_patch(plt.Rectangle((col + 0.04, row + 0.15), 0.92, 0.7,
                                   color=PIECE_COLOURS[i % 2], ec=FAINT))
        if ends:  # the end-of-word marker: a bar at the right edge of the box
            ax.add_patch(plt.Rectangle((col + 0.9, row + 0.15), 0.06, 0.7, color=INK))
        ax.text(col + 0.47, row + 0.5, text, ha="center", va="center", color=INK,
                fontsize=11 if len(text) <= 8 else 8)
    ax.set_title(title, fontsize=11, loc="left")
    return fig


def merges_figure(pieces, num_merges: int, vocab_size: int, words: int):
    """The slider's view: a sentence's ``words`` in pieces after ``num_merges`` merges."""
    title = (f"{num_merges} merges: vocabulary {vocab_size} tokens, this sentence "
             f"{len(pieces)} tokens for {words} words (a bar = end of a word)")
    return pieces_figure(pieces, title)


def vocab_tradeoff_figure(curves, words_point=None, chars_point=None):
    """Tokens per sentence against vocabulary size: ``curves`` maps a tokenizer to ``(vocab size,
    tokens per sentence)`` points; ``words_point`` and ``chars_point`` are single points."""
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    colours = (MAY_ATTEND, CONTRAST[0], LEVELS[1], LEVELS[2], LEVELS[0])
    if len(curves) > len(colours):
        raise ValueError(f"vocab_tradeoff_figure draws at most {len(colours)} curves")
    for (name, points), colour in zip(curves.items(), colours[:len(curves)], strict=True):
        xs, ys = zip(*sorted(points), strict=True)
        ax.plot(xs, ys, "o-", color=colour, label=name, markersize=4)
    for point, label, marker in ((words_point, "whole words", "s"),
                                 (chars_point, "characters", "D")):
        if point is not None:
            ax.plot(*point, marker, color=INK, markersize=8, label=label)
    ax.set(xscale="log", xlabel="vocabulary size (tokens, log scale)",
           ylabel="tokens per sentence (mean)")
    ax.set_title("A larger vocabulary buys shorter sequences", fontsize=11)
    ax.grid(True, color=FAINT, alpha=0.3)
    ax.legend(frameon=False, fontsize=9, labelcolor=MUTED)
    fig.tight_layout()
    return fig
