"""FSDP: a model sharded over the ranks (each keeps 1/W of every weight, gradient and optimizer
state), and sharded checkpoints (``torch.distributed.checkpoint``: a file per rank, loadable by
any number of processes). Notebook 13's ``--fsdp`` and ``--save`` in :mod:`helpers.distributed`.
"""

import warnings

import torch
import torch.distributed as dist


def shard(model, device_type: str = "cpu"):
    """FSDP2 on the default process group, in place: one unit per encoder and decoder layer
    (gathered for its forward and backward only), one for the rest."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard  # torch >= 2.6

    # The course's model returns its logits as a view; nothing edits them in place, so the
    # warning FSDP gives for every such output does not apply here.
    warnings.filterwarnings("ignore", message="FSDP2-wrapped module .* returned a view tensor")
    mesh = init_device_mesh(device_type, (dist.get_world_size(),))
    for layer in [*model.encoder.layers, *model.decoder.layers]:
        fully_shard(layer, mesh=mesh)
    return fully_shard(model, mesh=mesh)


def local_parameters(model) -> int:
    """How many parameter numbers this process holds: all of them, or its shards under FSDP."""
    return sum((p.to_local() if hasattr(p, "to_local") else p).numel()
               for p in model.parameters())


def whole_tensor(tensor: torch.Tensor) -> torch.Tensor:
    """A tensor, or the whole of an FSDP shard (gathered from every rank)."""
    return tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor.detach()


def save_sharded(model, folder) -> None:
    """The model's weights as a ``torch.distributed.checkpoint`` in ``folder``: a shard per
    rank plus ``.metadata``."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_model_state_dict

    dcp.save({"model": get_model_state_dict(model)}, checkpoint_id=str(folder))


def load_sharded(model, folder):
    """Load :func:`save_sharded`'s weights into a whole, undistributed ``model``."""
    import torch.distributed.checkpoint as dcp

    state = {"model": model.state_dict()}
    with warnings.catch_warnings():  # "assuming the intent is to load in a single process": yes
        warnings.filterwarnings("ignore", message="torch.distributed is disabled")
        dcp.load(state, checkpoint_id=str(folder))  # fills the tensors of ``state`` in place
    model.load_state_dict(state["model"])
    return model
