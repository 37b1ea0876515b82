"""FSDP: a model sharded over the ranks, and sharded checkpoints. Used by notebook 13 (its
``--fsdp`` and ``--save`` options in :mod:`helpers.distributed`).

Under FSDP (``torch.distributed.fsdp.fully_shard``) each of the W ranks keeps only 1/W of every
weight, gradient and optimizer state, gathers a layer's weights just before it runs
(all-gather) and reduce-scatters its gradients after. ``torch.distributed.checkpoint`` (DCP)
saves such a model as one file per rank plus a ``.metadata`` file that says which slice of which
tensor is where, so that a job of any size, even one plain process, can load it.
"""

import warnings

import torch
import torch.distributed as dist


def shard(model, device_type: str = "cpu"):
    """FSDP2 on the default process group: each encoder and decoder layer becomes one unit
    (its weights gathered for its forward and backward only), the embeddings and the output
    layer another; ``model`` is changed in place (its parameters become ``DTensor`` shards)."""
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
    """The model's weights as a ``torch.distributed.checkpoint`` in ``folder``: with FSDP each
    rank writes its own shard (``__0_0.distcp``, ``__1_0.distcp``, ...) plus one ``.metadata``;
    :func:`load_sharded` reads them back into any number of processes, here one."""
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
