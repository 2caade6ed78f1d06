"""Layer normalisation over the channels of channels-last rows, optionally fused with GELU.

``torch.ops.mmo1d.layer_norm_last`` normalises the last dimension of a tensor in one pass: a CUDA
kernel reads the input once in its own dtype (no float32 copy under autocast) and writes the
output directly in the dtype its consumer needs, with float32 statistics and arithmetic (float64
for float64 input). Fused with GELU it also saves the float32 pre-activation that
``F.gelu(F.layer_norm(x))`` would keep for backward: the backward kernel recomputes it from the
saved input and statistics. The CPU kernel is a composite of ATen ops with the same semantics.
Autograd is registered in C++ (``csrc/layer_norm.cpp``), fake kernels here for ``torch.compile``.

Under CUDA autocast ``torch.nn.LayerNorm`` runs in float32 and returns float32; the op follows that
rule by default on every device, and returns the autocast dtype when asked to (``autocast_output=True``): the
values are then exactly what a following Linear or convolution would have computed on after its
own cast of the float32 output.
"""
from typing import Optional

import torch
from torch import Tensor

from ._ext import ensure_cuda_kernels
from .inductor_fallbacks import register_inductor_fallback

_ops = torch.ops.mmo1d


@torch.library.register_fake('mmo1d::layer_norm_last')
def _forward_fake(input, weight, bias, eps, gelu, out_dtype):
    register_inductor_fallback(torch.ops.mmo1d.layer_norm_last.default)  # it has an export decomposition
    acc = torch.float64 if input.dtype == torch.float64 else torch.float32
    rows = input.numel() // input.shape[-1] if input.dim() > 0 and input.shape[-1] > 0 else 0
    return (torch.empty(input.shape, dtype=out_dtype, device=input.device),
            input.new_empty((rows, ), dtype=acc), input.new_empty((rows, ), dtype=acc))


@torch.library.register_fake('mmo1d::layer_norm_last_backward')
def _backward_fake(grad_output, input, mean, rstd, weight, bias, gelu, output_mask):
    return (torch.empty(input.shape, dtype=input.dtype, device=input.device) if output_mask[0] else None,
            torch.empty_like(weight) if output_mask[1] else None,
            torch.empty_like(bias) if output_mask[2] else None)


def layer_norm_last(input: Tensor,
                    weight: Tensor,
                    bias: Tensor,
                    eps: float = 1e-6,
                    gelu: bool = False,
                    out_dtype: Optional[torch.dtype] = None) -> Tensor:
    """``act(LayerNorm(input))`` over the last dimension, in one kernel.

    Args:
        input (Tensor): (..., C), float32/float64/float16/bfloat16. A non-contiguous input is
            copied to contiguous rows first (channels-last tensors permuted to (N, H, W, C) are
            contiguous already).
        weight (Tensor): (C,) scale.
        bias (Tensor): (C,) shift.
        eps (float): Added to the variance. Default: 1e-6.
        gelu (bool): Apply the exact (erf) GELU to the normalised output. Default: False.
        out_dtype (torch.dtype, optional): dtype of the output: ``input.dtype``, float32 for
            float16/bfloat16 input, or float16/bfloat16 for float32 input. Default: None, which
            follows ``torch.nn.LayerNorm``: float32 under autocast (for floating input on an
            autocast-enabled device), ``input.dtype`` otherwise.

    Returns:
        Tensor: contiguous, the shape of ``input``.
    """
    if out_dtype is None:
        out_dtype = torch.float32 if _autocast_eligible(input) else input.dtype
    if input.is_cuda:
        ensure_cuda_kernels()
    return _ops.layer_norm_last(input, weight, bias, float(eps), bool(gelu), out_dtype)[0]


def autocast_output_dtype(input: Tensor) -> torch.dtype:
    """The dtype a Linear or convolution consuming a layer norm's output would compute in.

    The autocast dtype when autocast is enabled for ``input``'s device and would cast ``input``
    (float16/bfloat16/float32), else the dtype ``torch.nn.LayerNorm`` returns (``input.dtype``).
    """
    return torch.get_autocast_dtype(input.device.type) if _autocast_eligible(input) else input.dtype


def _autocast_eligible(input: Tensor) -> bool:
    # Autocast casts float16/bfloat16/float32 tensors (never float64) on an enabled device.
    return input.dtype in (torch.float16, torch.bfloat16, torch.float32) and \
        torch.is_autocast_enabled(input.device.type)
