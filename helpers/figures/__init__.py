"""Figures for the notebooks. Functions here only draw: arguments in, ``matplotlib`` figure out.

In a notebook::

    from helpers.figures import attention_heatmap, mask_heatmap

The package:

- ``style``: the course's look in one place: the palette (blue weights, one grey for a blocked
  cell, orange for what a figure points at), one array converter, one heatmap, one boolean grid,
  one loss-curve helper;
- ``maps``: attention maps and masks, drawn in many notebooks;
- ``nb00_overview`` ... ``nb15_pretrained``: the figures of one notebook each.

A module is imported only when one of its figures is first asked for (``FIGURES`` says which
module holds which figure), so a notebook loads only its own figures. No model code lives here:
the numbers a figure shows come from ``helpers`` (the mask explorer's from
``helpers.masks.mask_explorer_data``). Every function is tested without widgets in
``tests/figures``.
"""

import importlib

# figure -> the module of helpers/figures that draws it
FIGURES = {
    "attention_heatmap": "maps", "masked_attention_heatmap": "maps", "attention_heads": "maps",
    "attention_grid_figure": "maps", "mask_heatmap": "maps", "plot_bool_masks": "maps",
    "architecture_figure": "nb00_overview", "recurrence_vs_attention_figure": "nb00_overview",
    "SATURATION_D_K": "nb01_attention", "softmax_saturation_data": "nb01_attention",
    "softmax_saturation_figure": "nb01_attention",
    "plot_positional_encoding": "nb02_positional", "plot_pe_wavelengths": "nb02_positional",
    "plot_pe_similarity": "nb02_positional", "plot_pe_rotation": "nb02_positional",
    "head_split_figure": "nb03_heads",
    "layer_norm_rows_figure": "nb04_add_norm", "gradient_norms_figure": "nb04_add_norm",
    "post_vs_pre_norm_figure": "nb04_add_norm", "norm_placement_figure": "nb04_add_norm",
    "training_curves_figure": "nb04_add_norm",
    "embedding_scale_figure": "nb05_encoder",
    "mask_explorer_figure": "nb06_masks",
    "decoder_step_figure": "nb07_decoder", "decoder_loss_curves_figure": "nb07_decoder",
    "next_token_probabilities_figure": "nb08_model", "parameter_breakdown_figure": "nb08_model",
    "sentence_length_figure": "nb09_training", "batch_tokens_figure": "nb09_training",
    "label_smoothing_figure": "nb09_training", "per_position_loss_figure": "nb09_training",
    "lr_schedule_figure": "nb09_training", "training_loss_figure": "nb09_training",
    "LiveLoss": "nb09_training",
    "beam_tree_figure": "nb10_decoding",
    "attention_explorer_figure": "nb11_inspecting", "alignment_accuracy_figure": "nb11_inspecting",
    "decoder_only_figure": "nb12_gpt", "next_token_figure": "nb12_gpt",
    "ablation_figure": "nb12_gpt", "gpt_training_figure": "nb12_gpt",
    "gpt_attention_figure": "nb12_gpt", "rope_figure": "nb12_gpt",
    "sharding_figure": "nb13_scaling", "distributed_loss_figure": "nb13_scaling",
    "data_parallel_figure": "nb13_scaling", "fsdp_figure": "nb13_scaling",
    "pieces_figure": "nb14_tokens", "merges_figure": "nb14_tokens",
    "vocab_tradeoff_figure": "nb14_tokens",
    "positional_layouts_figure": "nb15_pretrained", "activation_figure": "nb15_pretrained",
}

__all__ = sorted(FIGURES)


def __getattr__(name: str):  # PEP 562: import a figure's module on first use
    if name not in FIGURES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{FIGURES[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted([*globals(), *FIGURES])
