"""Plain PyTorch reference of the interpolated discretisations of an oriented 1D kernel.

The compiled op rounds every tap to a pixel (``rounding='trunc'`` or ``'floor'``), so its angles get
no gradient. Learning the angles is the paper's stated future work (Kirchmeyer & Deng,
"Convolutional Networks with Oriented 1D Kernels", ICCV 2023, appendix "Angle backpropagation",
and its bilinear 1D kernel). The two differentiable discretisations are written here from their
definitions, as the oracle of kernels that take them. For tap ``t`` (``d = t - K // 2``) of output
pixel ``(p, q)`` at stride ``s`` the tap's position is ``(p*s - d*sin(theta_c), q*s + d*cos(theta_c))``
(rows, columns), the geometry of truncation without the rounding:

- ``'bilinear'``: the tap reads ``x`` bilinearly interpolated at its position between the
  floor-based neighbours, with zero padding: what ``grid_sample(mode='bilinear',
  padding_mode='zeros', align_corners=True)`` computes at those pixel coordinates, gradients
  included (at an integer coordinate the derivative is the one-sided one of the floor pair).
- ``'gaussian'``: the tap reads the pixels ``(h, w)`` with ``(h - a)^2 + (w - b)^2 <= radius^2``
  around its position ``(a, b)``, weighted by ``exp(-((h - a)^2 + (w - b)^2) / (2 sigma^2))`` and
  normalised so that one tap's weights sum to 1 (pixels outside the image read 0 and keep their
  weight, as zero padding does). As sigma tends to 0 it tends to rounding to the nearest pixel.
  With an integer radius r the output pixel itself lies exactly on the band's edge of the taps at
  ``|d| = r`` (for every angle: ``d^2 (sin^2 + cos^2) = r^2``), so whether it is read depends on the
  rounding of the position: implementations that compute it in another order disagree there, and
  the output jumps there. Whole-number radii are therefore refused (the default is 1.5).

``y[n, c, p, q] = b[c] + sum_t w[c, t] * sample_t(x[n, c])``, differentiable in x, w, b and theta.
It materialises an (N, C, K, H', W', M) gather (M = 4 for bilinear, (2 ceil(radius) + 2)^2 for
gaussian) and is meant for small inputs.

A tap's offset from its output pixel, ``(-d sin(theta), d cos(theta))``, is the same at every output
pixel and the output pixels are integers, so the pixels a tap reads and their coefficients are too:
for given angles either discretisation is a depthwise convolution with a dense kernel
(:func:`interp_dense_kernel`), the form an export can write with standard operators.
"""
import math
from typing import Optional, Tuple

import torch
from torch import Tensor

from .tap_rule import DEFAULT_RADIUS, INTERPOLATIONS, check_tap_rule


def tap_positions(theta: Tensor, kernel_size: int, out_size: Tuple[int, int],
                  stride: int = 1) -> Tuple[Tensor, Tensor]:
    """Exact (unrounded) positions of every tap of every output pixel.

    Args:
        theta (Tensor): (C,) angles in radians.
        kernel_size (int): Odd number of taps K.
        out_size (tuple[int, int]): Output height and width (H', W').
        stride (int): Stride along both axes. Default: 1.

    Returns:
        tuple[Tensor, Tensor]: rows (C, K, H', 1) and columns (C, K, 1, W'), in theta's dtype.
    """
    d = torch.arange(kernel_size, dtype=theta.dtype, device=theta.device) - kernel_size // 2
    p = torch.arange(out_size[0], dtype=theta.dtype, device=theta.device) * stride
    q = torch.arange(out_size[1], dtype=theta.dtype, device=theta.device) * stride
    rows = p[None, None, :, None] - d[None, :, None, None] * torch.sin(theta)[:, None, None, None]
    cols = q[None, None, None, :] + d[None, :, None, None] * torch.cos(theta)[:, None, None, None]
    return rows, cols


def _read(x: Tensor, h: Tensor, w: Tensor) -> Tensor:
    """x[n, c, h, w] for integer index tensors h, w of shape (C, ...), zero outside the image.

    Returns:
        Tensor: (N, C, ...).
    """
    n, c, height, width = x.shape
    inside = (h >= 0) & (h < height) & (w >= 0) & (w < width)
    index = (h.clamp(0, height - 1) * width + w.clamp(0, width - 1)).reshape(c, -1)
    values = x.reshape(n, c, height * width).gather(2, index.unsqueeze(0).expand(n, -1, -1))
    return values.reshape(n, *h.shape) * inside.to(x.dtype)


def _samples(rows: Tensor, cols: Tensor, rounding: str, sigma: float,
             radius: float) -> Tuple[Tensor, Tensor, Tensor]:
    """The pixels each tap reads and their coefficients.

    Args:
        rows, cols (Tensor): Tap positions, both of one shape S.

    Returns:
        tuple[Tensor, Tensor, Tensor]: rows and columns (int64) and coefficients, each (*S, M).
    """
    if rounding == 'bilinear':
        h0, w0 = torch.floor(rows), torch.floor(cols)
        fh, fw = (rows - h0)[..., None], (cols - w0)[..., None]
        m = torch.arange(4, device=rows.device)  # (no tensor literals: the export traces this)
        di, dj = m // 2, m % 2
        coef = torch.where(di == 1, fh, 1 - fh) * torch.where(dj == 1, fw, 1 - fw)
        return h0.long()[..., None] + di, w0.long()[..., None] + dj, coef
    reach = math.ceil(radius)
    offsets = torch.arange(-reach, reach + 2, device=rows.device)  # covers [a - radius, a + radius]
    a, b = rows[..., None, None], cols[..., None, None]
    hh = torch.floor(a).long() + offsets[:, None]
    ww = torch.floor(b).long() + offsets[None, :]
    hh, ww = torch.broadcast_tensors(hh, ww)
    dist2 = (hh.to(a.dtype) - a)**2 + (ww.to(b.dtype) - b)**2
    coef = torch.exp(-dist2 / (2 * sigma**2)) * (dist2 <= radius**2).to(a.dtype)
    coef = coef / coef.sum(dim=(-2, -1), keepdim=True)
    return hh.flatten(-2), ww.flatten(-2), coef.flatten(-2)


def oriented_dwconv1d_interp_reference(input: Tensor,
                                       weight: Tensor,
                                       theta: Tensor,
                                       bias: Optional[Tensor] = None,
                                       stride: int = 1,
                                       rounding: str = 'bilinear',
                                       sigma: float = 0.5,
                                       radius: float = DEFAULT_RADIUS) -> Tensor:
    """Oriented depthwise 1D convolution with interpolated taps (differentiable in theta too).

    Args:
        input (Tensor): (N, C, H, W).
        weight (Tensor): (C, K) or (C, 1, 1, K), K odd.
        theta (Tensor): (C,) radians.
        bias (Tensor, optional): (C,).
        stride (int): Stride along both axes. Default: 1.
        rounding (str): ``'bilinear'`` or ``'gaussian'``. Default: ``'bilinear'``.
        sigma (float): Width of the gaussian band, > 0 (``'gaussian'`` only). Default: 0.5.
        radius (float): Radius of the gaussian band in pixels, in (1, 8), not a whole number
            (``'gaussian'`` only). Default: 1.5.

    Returns:
        Tensor: (N, C, ceil(H / stride), ceil(W / stride)).
    """
    check_tap_rule(rounding, sigma, radius, INTERPOLATIONS)
    n, c, h, w = input.shape
    weight = weight.reshape(c, -1)
    k = weight.shape[1]
    if k % 2 == 0:
        raise ValueError(f'kernel size must be odd, got {k}')
    rows, cols = tap_positions(theta, k, (-(-h // stride), -(-w // stride)), stride)
    rows, cols = torch.broadcast_tensors(rows, cols)
    hh, ww, coef = _samples(rows, cols, rounding, sigma, radius)
    taps = (_read(input, hh, ww) * coef.to(input.dtype)).sum(-1)
    out = torch.einsum('nckhw,ck->nchw', taps, weight.to(taps.dtype))
    if bias is not None:
        out = out + bias[None, :, None, None]
    return out


def interp_dense_kernel(weight: Tensor,
                        theta: Tensor,
                        rounding: str = 'bilinear',
                        sigma: float = 0.5,
                        radius: float = DEFAULT_RADIUS) -> Tensor:
    """The depthwise kernel equal to the interpolated oriented kernel (differentiable in theta).

    ``conv2d(x, kernel, bias, stride, padding=S // 2, groups=C)`` equals
    :func:`oriented_dwconv1d_interp_reference` with the same arguments.

    Args:
        weight (Tensor): (C, K), K odd.
        theta (Tensor): (C,) radians.
        rounding (str): ``'bilinear'`` or ``'gaussian'``. Default: ``'bilinear'``.
        sigma (float): Width of the gaussian band (``'gaussian'`` only). Default: 0.5.
        radius (float): Radius of the gaussian band (``'gaussian'`` only). Default: 1.5.

    Returns:
        Tensor: (C, 1, S, S) with S = 2 (K // 2 + ceil(radius) + 1) + 1 (bilinear: radius 0), in
        weight's dtype.
    """
    check_tap_rule(rounding, sigma, radius, INTERPOLATIONS)
    c, k = weight.shape
    half = k // 2 + (math.ceil(radius) if rounding == 'gaussian' else 0) + 1
    size = 2 * half + 1
    rows, cols = tap_positions(theta, k, (1, 1))  # the taps of output pixel (0, 0): their offsets
    rows, cols = torch.broadcast_tensors(rows, cols)
    hh, ww, coef = _samples(rows + half, cols + half, rounding, sigma, radius)  # (C, K, 1, 1, M)
    values = coef * weight[:, :, None, None, None].to(coef.dtype)
    kernel = weight.new_zeros(c, size * size, dtype=coef.dtype).scatter_add(1, (hh * size + ww).reshape(c, -1),
                                                                            values.reshape(c, -1))
    return kernel.to(weight.dtype).reshape(c, 1, size, size)
