"""``shortcut + (branch + bias) * scale``: the residual of the ConvNeXt blocks.

``torch.ops.mmo1d.scaled_residual`` computes ``torch.addcmul(shortcut, branch + bias, scale)`` (float32
arithmetic, the inputs' promoted dtype; the per-channel bias optional) and is never cast by autocast,
so a float16 or bfloat16 branch is read as it is. On CUDA, 4-D tensors of one shape in one layout (contiguous or
channels_last) with a scale of shape (C, 1, 1), (1, C, 1, 1) or (N, C, 1, 1) take a kernel that
reads and writes each tensor with vector accesses in memory order (``torch.addcmul`` takes the
broadcast scale through ATen's strided kernel with a cast per element); other inputs, and the CPU,
run ``torch.addcmul``. Its backward (C++, ``csrc/scaled_residual.cpp``) writes the branch's gradient
``grad * scale`` in the branch's dtype directly; on CUDA in channels_last (up to 4096 channels) one
pass over grad and branch gives it, the scale's gradient and the bias's, summed in a fixed order.
"""
from typing import Optional

import torch
from torch import Tensor

from ._ext import ensure_cuda_kernels

_ops = torch.ops.mmo1d


@torch.library.register_fake('mmo1d::scaled_residual')
def _scaled_residual_fake(shortcut, branch, scale, bias=None):
    if bias is not None:
        branch = torch.empty_like(branch, dtype=torch.result_type(branch, bias))
    shape = torch.broadcast_shapes(shortcut.shape, branch.shape, scale.shape)
    # torch.result_type of the three: that of the first two (a tensor of its dtype, dimensioned if one of
    # them is) with the scale.
    first = torch.empty((1, ) if shortcut.dim() or branch.dim() else (),
                        dtype=torch.result_type(shortcut, branch), device='meta')
    dtype = torch.result_type(first, scale)
    if tuple(branch.shape) == tuple(shape):
        return torch.empty_like(branch, dtype=dtype)
    return shortcut.new_empty(shape, dtype=dtype)


@torch.library.register_fake('mmo1d::scaled_residual_backward')
def _scaled_residual_backward_fake(grad, branch, scale, bias, shortcut_sizes, output_mask):
    return (grad.new_empty(shortcut_sizes) if output_mask[0] else None,
            torch.empty_like(branch) if output_mask[1] else None,
            torch.empty_like(scale) if output_mask[2] else None,
            torch.empty_like(bias) if output_mask[3] and bias is not None else None)


def scaled_residual(shortcut: Tensor, branch: Tensor, scale: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    """``shortcut + (branch + bias) * scale`` (broadcasting), as ``torch.addcmul`` outside autocast.

    Args:
        shortcut (Tensor): e.g. the block's input, (N, C, H, W).
        branch (Tensor): the residual branch, e.g. (N, C, H, W) in the autocast dtype.
        scale (Tensor): its factors, e.g. the layer scale (C, 1, 1) times the drop-path factors
            (N, 1, 1, 1).
        bias (Tensor, optional): (C,) added to the branch per channel (dim 1) in float32 (the bias
            of the Linear that makes the branch; its gradient, the sum of ``grad * scale``, comes
            from the pass that makes the others). Default: None.

    Returns:
        Tensor: the broadcast shape, in the promoted dtype of the three.
    """
    if branch.is_cuda:
        ensure_cuda_kernels()
    return _ops.scaled_residual(shortcut, branch, scale, bias)
