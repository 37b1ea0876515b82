"""Seeding and device choice, in one place for every notebook."""

import os
import random

import numpy as np
import torch


def set_seed(seed: int = 0) -> None:
    """Seed Python's ``random``, NumPy and PyTorch (CPU and every CUDA device) together."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device
    os.environ["PYTHONHASHSEED"] = str(seed)


def get_device() -> torch.device:
    """The fastest device available: CUDA, then Apple's MPS, then the CPU."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")
