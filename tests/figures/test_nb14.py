"""The drawings of notebook 14 (a sentence's pieces, the merges slider's view, vocabulary size
against tokens per sentence)."""

import matplotlib.pyplot as plt
import numpy as np
import pytest

from helpers.figures import merges_figure, pieces_figure, vocab_tradeoff_figure


def test_pieces_figure_draws_one_box_per_piece_and_a_bar_per_word_end():
    pieces = ["the</w>", "ca", "ts</w>", "m", "ange", "nt</w>"]
    fig = pieces_figure(pieces, title="six pieces")
    try:
        ax = fig.axes[0]
        assert [t.get_text() for t in ax.texts] == ["the", "ca", "ts", "m", "ange", "nt"]
        assert len(ax.patches) == len(pieces) + 3  # a box each, a bar for each of 3 word ends
        assert ax.get_title(loc="left") == "six pieces"
    finally:
        plt.close(fig)


def test_pieces_figure_wraps_long_sentences_and_refuses_none():
    fig = pieces_figure([f"p{i}" for i in range(30)])
    try:
        assert fig.axes[0].get_ylim() == (3, 0)  # 12 per line: 3 lines
    finally:
        plt.close(fig)
    with pytest.raises(ValueError, match="at least one piece"):
        pieces_figure([])


def test_merges_figure_titles_the_vocabulary_and_the_length():
    fig = merges_figure(["a", "b</w>"], num_merges=0, vocab_size=40, words=1)
    try:
        title = fig.axes[0].get_title(loc="left")
        assert "0 merges" in title and "vocabulary 40" in title and "2 tokens for 1 words" in title
    finally:
        plt.close(fig)


def test_vocab_tradeoff_figure_draws_every_curve_on_a_log_axis():
    curves = {"BPE": [(300, 12.0), (100, 20.0)], "unigram": [(100, 18.0), (300, 11.0)]}
    fig = vocab_tradeoff_figure(curves, words_point=(500, 6.0), chars_point=(60, 30.0))
    try:
        ax = fig.axes[0]
        assert ax.get_xscale() == "log"
        np.testing.assert_allclose(ax.lines[0].get_xdata(), [100, 300])  # sorted by size
        np.testing.assert_allclose(ax.lines[0].get_ydata(), [20.0, 12.0])
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert labels == ["BPE", "unigram", "whole words", "characters"]
    finally:
        plt.close(fig)
