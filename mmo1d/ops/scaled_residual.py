"""``shortcut + branch * scale`` for the residual of the ConvNeXt blocks, with a leaner backward.

``torch.ops.mmo1d.scaled_residual`` computes ``torch.addcmul(shortcut, branch, scale)`` in the
inputs' promoted dtype and is never cast by autocast (so a float16 branch is read as it is, with no
float32 copy). Its backward (C++, ``csrc/scaled_residual.cpp``) gives addcmul's gradients, bit for
bit, without the two multiplications by addcmul's ``value`` that ATen's formula makes, and writes
the branch's gradient in the branch's dtype directly: two full-size passes and a cast fewer per call.
"""
import torch
from torch import Tensor

from ._ext import _C  # noqa: F401  (defines the op)

_ops = torch.ops.mmo1d


@torch.library.register_fake('mmo1d::scaled_residual')
def _scaled_residual_fake(shortcut, branch, scale):
    shape = torch.broadcast_shapes(shortcut.shape, branch.shape, scale.shape)
    dtype = torch.result_type(torch.result_type(shortcut, branch), scale)
    if tuple(shortcut.shape) == tuple(shape):
        return torch.empty_like(shortcut, dtype=dtype)
    return shortcut.new_empty(shape, dtype=dtype)


def scaled_residual(shortcut: Tensor, branch: Tensor, scale: Tensor) -> Tensor:
    """``shortcut + branch * scale`` (broadcasting), as ``torch.addcmul`` outside autocast.

    Args:
        shortcut (Tensor): e.g. the block's input, (N, C, H, W).
        branch (Tensor): the residual branch, e.g. (N, C, H, W) in the autocast dtype.
        scale (Tensor): its factors, e.g. the layer scale (C, 1, 1) times the drop-path factors
            (N, 1, 1, 1).

    Returns:
        Tensor: the broadcast shape, in the promoted dtype of the three.
    """
    return _ops.scaled_residual(shortcut, branch, scale)
