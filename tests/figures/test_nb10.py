"""The drawing of notebook 10: the beam-search tree (no widgets needed)."""

import matplotlib.pyplot as plt
import pytest

from helpers.figures import beam_tree_figure


def node(parent, token, score, status, best=False):
    return {"parent": parent, "token": token, "score": score, "status": status, "best": best}


TREE = {"root": "<bos>", "steps": [
    [node(0, "a", -0.1, "kept", True), node(0, "b", -1.5, "kept"), node(0, "c", -4.0, "pruned")],
    [node(0, "<eos>", -0.3, "finished", True), node(0, "x", -2.0, "kept"),
     node(1, "y", -1.9, "kept"), node(1, "z", -6.25, "pruned")],
]}


def artists(ax, gid, kind):
    return [a for a in getattr(ax, kind) if a.get_gid() == gid]


@pytest.fixture
def drawn():
    fig = beam_tree_figure(TREE, title="t")
    yield fig.axes[0]
    plt.close(fig)


def test_one_node_and_one_edge_per_candidate(drawn):
    nodes = artists(drawn, "node", "texts")
    assert [t.get_text() for t in nodes] == ["<bos>", "a", "b", "c", "<eos>", "x", "y", "z"]
    assert len(artists(drawn, "edge", "lines")) == 7  # one incoming edge per candidate
    columns = sorted({round(t.get_position()[0]) for t in nodes})
    assert columns == [0, 1, 2]


def test_edges_carry_the_scores(drawn):
    labels = [t.get_text() for t in artists(drawn, "edge-label", "texts")]
    assert labels == ["-0.10", "-1.50", "-4.00", "-0.30", "-2.00", "-1.90", "-6.25"]


def test_pruned_faded_best_highlighted_finished_marked(drawn):
    edges = artists(drawn, "edge", "lines")
    statuses = [n["status"] for step in TREE["steps"] for n in step]
    best = [n["best"] for step in TREE["steps"] for n in step]
    for edge, status, is_best in zip(edges, statuses, best, strict=True):
        assert (edge.get_alpha() < 0.5) == (status == "pruned")
        assert (edge.get_linewidth() > 2) == is_best
    nodes = artists(drawn, "node", "texts")[1:]
    shapes = [type(t.get_bbox_patch().get_boxstyle()).__name__ for t in nodes]
    assert [s == "Square" for s in shapes] == [st == "finished" for st in statuses]
    assert [t.get_fontweight() == "bold" for t in nodes] == best
    assert drawn.get_title() == "t"


def test_children_sit_near_their_parents(drawn):
    nodes = artists(drawn, "node", "texts")
    y = {t.get_text(): t.get_position()[1] for t in nodes}
    assert y["a"] > y["b"] > y["c"]  # best first
    assert min(y["<eos>"], y["x"]) > max(y["y"], y["z"])  # a's children above b's


def test_a_single_greedy_path():
    tree = {"steps": [[node(0, "a", -0.1, "kept", True)], [node(0, "<eos>", -0.2, "finished",
                                                                 True)]]}
    fig = beam_tree_figure(tree)
    try:
        assert len(artists(fig.axes[0], "edge", "lines")) == 2
        assert "beam search" in fig.axes[0].get_title()
    finally:
        plt.close(fig)
