"""Linear layers computed apart from their module: the product alone, or with padded input features."""
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .recompute import RecomputeSaved


def plain_linear(layer: nn.Module) -> bool:
    """``layer`` is an ``nn.Linear`` with a bias and no forward hooks: its product and bias may be
    computed apart."""
    module_hooks = nn.modules.module
    return (type(layer) is nn.Linear and layer.bias is not None and not layer._forward_hooks
            and not layer._forward_pre_hooks and not module_hooks._global_forward_hooks
            and not module_hooks._global_forward_pre_hooks)


def aligned_linear(x: Tensor, layer: nn.Linear, multiple: int = 8) -> Tensor:
    """``layer(x)`` on ``x`` and ``layer.weight`` padded with zero input features up to a multiple of
    ``multiple``.

    The sums are the same (the padding adds products of zeros); the rows of the padded input start
    at aligned addresses, which the matrix-multiply kernels read in vectors: with 3 input features
    (an RGB image) cuBLAS runs a kernel for unaligned rows instead. Under autocast the input is cast
    before it is padded, so the padded copy is made once, in the autocast dtype. Backward makes that
    copy again for the weight gradient (``RecomputeSaved``): none is kept.
    """
    pad = -layer.in_features % multiple
    if pad == 0 or x.shape[-1] != layer.in_features:  # (the Linear's own error for the latter)
        return layer(x)
    device_type = x.device.type
    dtype = torch.get_autocast_dtype(device_type) if torch.is_autocast_enabled(device_type) else x.dtype
    weight = F.pad(layer.weight, (0, pad))

    def padded() -> Tensor:
        return F.pad(x.to(dtype), (0, pad))

    if not torch.is_grad_enabled():
        return F.linear(padded(), weight, layer.bias)
    x_padded = padded()
    hooks = RecomputeSaved(x_padded, padded)
    with torch.autograd.graph.saved_tensors_hooks(hooks.pack, hooks.unpack):
        return F.linear(x_padded, weight, layer.bias)


__all__ = ['aligned_linear', 'plain_linear']
