"""Figures for the notebooks: functions that only draw (arguments in, a ``matplotlib`` figure
out; no model code). ``style`` holds the course's look, ``maps`` the attention maps and masks of
many notebooks, ``nbNN_*`` the figures of one notebook each, imported on first use."""

import importlib

_BY_MODULE = {
    "maps": "attention_heatmap masked_attention_heatmap attention_heads attention_grid_figure "
            "mask_heatmap plot_bool_masks",
    "nb00_overview": "architecture_figure recurrence_vs_attention_figure",
    "nb01_attention": "SATURATION_D_K softmax_saturation_data softmax_saturation_figure",
    "nb02_positional": "plot_positional_encoding plot_pe_wavelengths plot_pe_similarity "
                       "plot_pe_rotation",
    "nb03_heads": "head_split_figure",
    "nb04_add_norm": "layer_norm_rows_figure gradient_norms_figure post_vs_pre_norm_figure "
                     "norm_placement_figure training_curves_figure",
    "nb05_encoder": "embedding_scale_figure",
    "nb06_masks": "mask_explorer_figure",
    "nb07_decoder": "decoder_step_figure decoder_loss_curves_figure",
    "nb08_model": "next_token_probabilities_figure parameter_breakdown_figure",
    "nb09_training": "sentence_length_figure batch_tokens_figure label_smoothing_figure "
                     "per_position_loss_figure lr_schedule_figure training_loss_figure LiveLoss",
    "nb10_decoding": "beam_tree_figure",
    "nb11_inspecting": "attention_explorer_figure alignment_accuracy_figure",
    "nb12_gpt": "decoder_only_figure next_token_figure ablation_figure gpt_training_figure "
                "gpt_attention_figure rope_figure",
    "nb13_scaling": "sharding_figure distributed_loss_figure data_parallel_figure fsdp_figure",
    "nb14_tokens": "pieces_figure merges_figure vocab_tradeoff_figure",
    "nb15_pretrained": "positional_layouts_figure activation_figure",
}
# figure -> the module of helpers/figures that draws it
FIGURES = {name: module for module, names in _BY_MODULE.items() for name in names.split()}

__all__ = sorted(FIGURES)


def __getattr__(name: str):  # PEP 562: import a figure's module on first use
    if name not in FIGURES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{FIGURES[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted([*globals(), *FIGURES])
