"""Plain PyTorch reference of the oriented depthwise 1D convolution.

Written straight from the definition (Kirchmeyer & Deng, "Convolutional Networks with Oriented 1D
Kernels", ICCV 2023, Definition 1, with the truncation the released models use)::

    y[n, c, p, q] = b[c] + sum_t w[c, t] * x[n, c, p*s + dh(c, t), q*s + dw(c, t)]
    d = t - K // 2,  dh = R(-d * sin(theta_c)),  dw = R(d * cos(theta_c))

Taps outside the image read zero. A NaN or infinite angle has no direction: its sine and cosine
are taken as 0, so every tap of that channel sits at the centre. ``R`` truncates toward zero
(``rounding='trunc'``) or floors (``rounding='floor'``). The sine and cosine are the float32
values of the float32 angle, and the product with ``d`` is a float32 product. This module is the
test oracle and the documented semantics; it materialises a (N, C, K, H', W') gather and is meant for small inputs only.
"""
from typing import Optional, Tuple

import torch
from torch import Tensor

from .tap_rule import ROUNDINGS, check_tap_rule


def tap_offsets(theta: Tensor, kernel_size: int, rounding: str = 'trunc') -> Tuple[Tensor, Tensor]:
    """Integer offsets of every tap.

    Args:
        theta (Tensor): Angles in radians, shape (C,).
        kernel_size (int): Odd number of taps K.
        rounding (str): ``'trunc'`` (default) or ``'floor'``.

    Returns:
        tuple[Tensor, Tensor]: ``(dh, dw)``, each int64 of shape (C, K), on theta's device.
    """
    check_tap_rule(rounding, allowed=ROUNDINGS)
    angle = theta.detach().to(torch.float32).to(torch.float64)
    # A NaN or infinite angle has no direction: every tap sits at the centre (sine = cosine = 0).
    finite = torch.isfinite(angle)
    angle = torch.where(finite, angle, torch.zeros_like(angle))
    sin = torch.where(finite, torch.sin(angle), torch.zeros_like(angle)).to(torch.float32)
    cos = torch.where(finite, torch.cos(angle), torch.zeros_like(angle)).to(torch.float32)
    d = (torch.arange(kernel_size, device=theta.device) - kernel_size // 2).to(torch.float32)
    vh = -d[None, :] * sin[:, None]
    vw = d[None, :] * cos[:, None]
    return _round(vh, rounding).long(), _round(vw, rounding).long()


def _round(v: Tensor, rounding: str) -> Tensor:
    if rounding == 'floor':
        return torch.floor(v)
    # Truncation written with floor and ceil: torch.trunc has no ONNX operator, and the ONNX lowering
    # (mmo1d.ops.onnx_lowering) computes its offsets here too. Equal to trunc for finite values.
    return torch.where(v < 0, torch.ceil(v), torch.floor(v))


def oriented_dwconv1d_reference(input: Tensor,
                                weight: Tensor,
                                theta: Tensor,
                                bias: Optional[Tensor] = None,
                                stride: int = 1,
                                rounding: str = 'trunc',
                                residual: bool = False) -> Tensor:
    """Reference oriented depthwise 1D convolution (differentiable in input, weight and bias).

    Args:
        input (Tensor): (N, C, H, W).
        weight (Tensor): (C, K) or (C, 1, 1, K).
        theta (Tensor): (C,) radians.
        bias (Tensor, optional): (C,).
        stride (int): Stride along both axes. Default: 1.
        rounding (str): ``'trunc'`` or ``'floor'``. Default: ``'trunc'``.
        residual (bool): Add ``input`` sampled at the output pixels (the "++" form). Default: False.

    Returns:
        Tensor: (N, C, ceil(H / stride), ceil(W / stride)), computed in input's dtype.
    """
    n, c, h, w = input.shape
    weight = weight.reshape(c, -1)
    k = weight.shape[1]
    pad = k // 2
    dh, dw = tap_offsets(theta, k, rounding)
    ho, wo = -(-h // stride), -(-w // stride)
    x = torch.nn.functional.pad(input, (pad, pad, pad, pad))
    rows = (torch.arange(ho, device=input.device) * stride)[None, None, :, None] + dh[:, :, None, None] + pad
    cols = (torch.arange(wo, device=input.device) * stride)[None, None, None, :] + dw[:, :, None, None] + pad
    chan = torch.arange(c, device=input.device)[:, None, None, None]
    taps = x[:, chan, rows, cols]  # (N, C, K, Ho, Wo)
    out = torch.einsum('nckhw,ck->nchw', taps, weight)
    if bias is not None:
        out = out + bias[None, :, None, None]
    if residual:
        out = out + input[:, :, ::stride, ::stride]
    return out
