"""Decoding: the beam-search tree (notebook 10)."""

import matplotlib.pyplot as plt

from .style import BEAM_COLOURS, HIGHLIGHT


def beam_tree_figure(tree, title=None):
    """A beam search as a tree, one column per step: ``tree = {"root": "<bos>", "steps": [[node,
    ...], ...]}``, a node a dict of ``parent`` (its index in the previous step; 0 = the root),
    ``token``, ``score`` (the cumulative log-probability, on the edge into it), ``status``
    ("kept", "pruned": faded, "finished": a green square) and, on the best path, ``best``."""
    steps = tree["steps"]
    columns = [[0.0]]  # the y of every node, column by column: best first, under its parent
    for nodes in steps:
        order = sorted(range(len(nodes)),
                       key=lambda i: (-columns[-1][nodes[i]["parent"]], -nodes[i]["score"]))
        ys = [0.0] * len(nodes)
        for rank, i in enumerate(order):
            ys[i] = (len(nodes) - 1) / 2 - rank
        columns.append(ys)
    tallest = max(len(c) for c in columns)
    fig, ax = plt.subplots(figsize=(min(16.0, 1.7 * (len(steps) + 1) + 0.5),
                                    max(3.0, 0.42 * tallest + 1.4)))
    box = dict(boxstyle="round,pad=0.25", facecolor=BEAM_COLOURS["kept"][0],
               edgecolor=HIGHLIGHT, linewidth=2)
    ax.text(0, 0, tree.get("root", "<bos>"), ha="center", va="center", fontsize=9, bbox=box,
            gid="node")
    for t, nodes in enumerate(steps, start=1):
        for node, y in zip(nodes, columns[t], strict=True):
            face, edge, alpha = BEAM_COLOURS[node["status"]]
            best = bool(node.get("best"))
            y0 = columns[t - 1][node["parent"]]
            ax.plot([t - 1 + 0.3, t - 0.3], [y0, y], color=HIGHLIGHT if best else edge,
                    alpha=alpha, linewidth=3.0 if best else 1.2, zorder=1, gid="edge")
            ax.text(t - 0.34, y + 0.18, f"{node['score']:.2f}", ha="right", va="bottom",
                    fontsize=7, alpha=alpha, color="black", zorder=3, gid="edge-label")
            shape = "square,pad=0.3" if node["status"] == "finished" else "round,pad=0.25"
            ax.text(t, y, node["token"], ha="center", va="center", fontsize=9, alpha=alpha,
                    fontweight="bold" if best else "normal", zorder=2, gid="node",
                    bbox=dict(boxstyle=shape, facecolor=face, alpha=alpha,
                              edgecolor=HIGHLIGHT if best else edge,
                              linewidth=2 if best else 1))
    half = (tallest - 1) / 2
    ax.set(xlim=(-0.6, len(steps) + 0.6), ylim=(-half - 0.8, half + 0.8), yticks=[])
    ax.set_xticks(range(len(steps) + 1),
                  ["start"] + [f"step {t}" for t in range(1, len(steps) + 1)])
    ax.spines[["left", "right", "top"]].set_visible(False)
    handles = [plt.Line2D([], [], color=BEAM_COLOURS["kept"][1], label="kept in the beam"),
               plt.Line2D([], [], color=BEAM_COLOURS["pruned"][1], alpha=0.35, label="pruned"),
               plt.Line2D([], [], color=BEAM_COLOURS["finished"][1], marker="s", linestyle="",
                          markerfacecolor=BEAM_COLOURS["finished"][0], label="finished (EOS)"),
               plt.Line2D([], [], color=HIGHLIGHT, linewidth=3, label="best hypothesis")]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=4,
              fontsize=8, frameon=False)
    ax.set_title(title or "beam search (numbers: cumulative log-probability)", fontsize=10)
    fig.tight_layout()
    return fig
