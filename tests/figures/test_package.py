"""The shape of helpers/figures: a lazy index that agrees with the modules, one palette, no
model code, and the one heatmap with the one grey for blocked cells."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from matplotlib.colors import to_hex

import helpers.figures as figures
from helpers.figures import style

FOLDER = Path(figures.__file__).parent
MODULES = sorted(p.stem for p in FOLDER.glob("*.py") if p.stem not in ("__init__", "style"))


def _public(module: str) -> set:
    tree = ast.parse((FOLDER / f"{module}.py").read_text())
    names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    names |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
              if isinstance(t, ast.Name)}
    return {n for n in names if not n.startswith("_") and (n.islower() or n == "SATURATION_D_K"
                                                          or n in classes)}


def test_the_index_names_every_figure_of_every_module_and_nothing_else():
    indexed = {}
    for name, module in figures.FIGURES.items():
        indexed.setdefault(module, set()).add(name)
    assert sorted(indexed) == MODULES
    for module in MODULES:
        assert indexed[module] == _public(module), module


def test_every_indexed_name_resolves_and_an_unknown_one_is_an_attribute_error():
    for name in figures.FIGURES:
        assert getattr(figures, name) is not None
    with pytest.raises(AttributeError, match="no_such_figure"):
        figures.no_such_figure  # noqa: B018


def test_a_figure_imports_only_its_own_module():
    code = ("import sys; from helpers.figures import attention_heatmap; "
            "print(sorted(m for m in sys.modules if m.startswith('helpers.')))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, cwd=FOLDER.parents[1]).stdout
    assert "helpers.figures.maps" in loaded and "helpers.figures.style" in loaded
    assert "nb09_training" not in loaded and "helpers.training" not in loaded


def test_colours_are_named_in_style_only():
    for path in FOLDER.glob("*.py"):
        literals = re.findall(r"#[0-9a-fA-F]{6}\b", path.read_text())
        assert path.name == "style.py" or not literals, (path.name, literals)


def test_figure_modules_draw_only():
    """No figure module imports torch or model code; the mask explorer's numbers come from
    helpers.masks."""
    for path in FOLDER.glob("*.py"):
        tree = ast.parse(path.read_text())
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {(n.module or "") for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert "torch" not in imported, path.name
        assert imported & {"attention", "layers", "model", "training", "decoding"} == set()
    assert "mask_explorer_data" in (FOLDER / "nb06_masks.py").read_text()


@pytest.mark.parametrize("draw", ["attention_heatmap", "attention_grid_figure", "explorer"])
def test_blocked_cells_are_the_same_grey_everywhere(draw):
    weights = np.array([[1.0, 0.0], [0.5, 0.5]])
    blocked = np.array([[False, True], [False, False]])
    if draw == "attention_heatmap":
        fig = figures.attention_heatmap(weights, blocked=blocked)
    elif draw == "attention_grid_figure":
        fig = figures.attention_grid_figure(weights[None, None], list("ab"), list("ab"),
                                            blocked=blocked)
    else:
        fig = figures.attention_explorer_figure(
            {"src_tokens": ["a", "b"], "tgt_in": ["x", "y"], "tgt_out": ["y", "z"],
             "french": "y z", "decoder": weights[None, None]}, kind="decoder")
    image = fig.axes[0].images[0]
    assert to_hex(image.cmap.get_bad()) == style.BLOCKED
    np.testing.assert_array_equal(np.ma.getmaskarray(image.get_array()), blocked)


def test_as_array_accepts_tensors_squeezes_to_the_asked_axes_and_names_a_wrong_shape():
    import torch

    assert style.as_array(torch.ones(1, 1, 2, 3), ndim=2).shape == (2, 3)
    assert style.as_array([1, 0, 1], ndim=2, dtype=bool).shape == (1, 3)
    with pytest.raises(ValueError, match=r"weights must have 2 axes, got shape \(2, 2, 2\)"):
        style.as_array(np.zeros((2, 2, 2)), "weights", ndim=2)
