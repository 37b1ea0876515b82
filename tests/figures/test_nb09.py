"""The drawings of notebook 09 (corpus lengths, batch grids, label smoothing, schedule, loss)."""

import math

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.patches import Rectangle

from helpers.figures import (
    LiveLoss,
    batch_tokens_figure,
    label_smoothing_figure,
    lr_schedule_figure,
    per_position_loss_figure,
    sentence_length_figure,
    training_loss_figure,
)
from helpers.figures.style import TOKEN_COLOURS


def test_sentence_lengths_one_histogram_per_language_with_unit_bins():
    fig = sentence_length_figure({"English": [3, 4, 4, 6], "French": [3, 3, 5]})
    ax = fig.axes[0]
    bars = [p for p in ax.patches if isinstance(p, Rectangle)]
    assert len(bars) == 2 * 4  # lengths 3..6 for both histograms
    heights = [b.get_height() for b in bars]
    assert heights == [1, 2, 0, 1, 2, 0, 1, 0]
    assert all(b.get_width() < 0.5 for b in bars)  # two bars side by side per length
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["English (mean 4.2)", "French (mean 3.7)"]
    with pytest.raises(ValueError, match="non-empty"):
        sentence_length_figure({"English": []})


def test_batch_grid_writes_every_token_and_colours_specials():
    grids = [[["a", "b", "<pad>"], ["c", "d", "e"]], [["<bos>", "x"], ["<bos>", "y"]]]
    fig = batch_tokens_figure(grids, ["src", "tgt_in"])
    top, bottom = fig.axes
    assert [t.get_text() for t in top.texts] == ["a", "b", "<pad>", "c", "d", "e"]
    assert [t.get_text() for t in bottom.texts] == ["<bos>", "x", "<bos>", "y"]
    cells = [p for p in top.patches if isinstance(p, Rectangle)]
    pad_cell = cells[2]
    assert np.allclose(pad_cell.get_facecolor()[:3],
                       plt.matplotlib.colors.to_rgb(TOKEN_COLOURS["<pad>"]))
    assert np.allclose(cells[0].get_facecolor()[:3], (1, 1, 1))
    assert top.get_title(loc="left") == "src"
    with pytest.raises(ValueError, match="rectangular"):
        batch_tokens_figure([[["a"], ["b", "c"]]])


def test_label_smoothing_bars_match_the_distributions_and_bold_the_label():
    one_hot = np.eye(5)[2]
    smoothed = 0.9 * one_hot + 0.1 / 5
    fig = label_smoothing_figure({"one-hot": one_hot, "smoothed": smoothed}, list("abcde"), 2)
    ax = fig.axes[0]
    heights = [p.get_height() for p in ax.patches]
    np.testing.assert_allclose(heights, np.concatenate([one_hot, smoothed]))
    assert ax.get_xticklabels()[2].get_fontweight() == "bold"
    assert "0.92" in [t.get_text() for t in ax.texts]
    with pytest.raises(ValueError, match="5 values"):
        label_smoothing_figure({"x": np.ones(4)}, list("abcde"), 0)


def test_per_position_loss_zeroes_and_labels_ignored_positions():
    fig = per_position_loss_figure([1.0, 2.0, 3.0, 4.0], ["a", "b", "<eos>", "<pad>"],
                                   [False, False, False, True])
    ax = fig.axes[0]
    assert [p.get_height() for p in ax.patches] == [1.0, 2.0, 3.0, 0.0]
    assert [t.get_text() for t in ax.texts] == ["ignored"]
    with pytest.raises(ValueError, match="one entry per position"):
        per_position_loss_figure([1.0], ["a", "b"], [False, False])


def test_lr_schedule_marks_warmup_and_each_peak():
    rates = [min(s ** -0.5, s * 10 ** -1.5) for s in range(1, 51)]
    fig = lr_schedule_figure({"ours": rates}, warmup=10)
    ax = fig.axes[0]
    vertical = [line for line in ax.get_lines() if list(line.get_xdata()) == [10, 10]]
    assert len(vertical) == 1
    peak_dot = [line for line in ax.get_lines() if line.get_marker() == "o"]
    assert len(peak_dot) == 1 and peak_dot[0].get_xdata()[0] == 10
    assert peak_dot[0].get_ydata()[0] == pytest.approx(1 / math.sqrt(10))
    assert any("at step 10" in t.get_text() for t in ax.texts)


def test_training_loss_moving_average_and_levels():
    losses = [6.0, 4.0, 2.0, 2.0, 1.0]
    fig = training_loss_figure(losses, window=2, levels={"ln V": 5.8, "floor": 0.9})
    ax = fig.axes[0]
    raw, smooth, *levels = ax.get_lines()
    np.testing.assert_allclose(raw.get_ydata(), losses)
    np.testing.assert_allclose(smooth.get_xdata(), [2, 3, 4, 5])
    np.testing.assert_allclose(smooth.get_ydata(), [5.0, 3.0, 2.0, 1.5])
    assert [line.get_ydata()[0] for line in levels] == [5.8, 0.9]
    assert ax.get_yscale() == "log"
    with pytest.raises(ValueError, match="non-empty"):
        training_loss_figure([])


def test_live_loss_shows_one_figure_and_redraws_it_in_place(monkeypatch):
    import IPython.display

    shown = []

    class Handle:  # what display(..., display_id=True) returns in a kernel
        def update(self, fig):
            shown.append(("update", fig))

    def fake_display(fig, display_id=False):
        assert display_id is True  # an id, or the redraws would pile up as new outputs
        shown.append(("display", fig))
        return Handle()

    monkeypatch.setattr(IPython.display, "display", fake_display)
    live = LiveLoss(5, every=2, window=2, title="Loss", levels={"floor": 0.5})
    losses = [6.0, 4.0, 3.0, 2.0, 1.5]
    for step, loss in enumerate(losses, start=1):
        live(step, loss)
    assert [kind for kind, _ in shown] == ["display", "update", "update"]  # steps 2, 4 and 5
    ax = shown[-1][1].axes[0]
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), losses)  # every step so far
    assert ax.get_xlim() == (0, 5)  # the axis of the whole run, from the first drawing on
    assert shown[0][1].axes[0].get_xlim() == (0, 5)
    assert ax.get_title() == "Loss: step 5 of 5"
    assert plt.get_fignums() == []  # closed: the cell does not show the figure a second time
    with pytest.raises(ValueError, match="last_step >= 1"):
        LiveLoss(0)
