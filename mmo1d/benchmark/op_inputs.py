"""Tensors, angles and timed steps of the oriented op's benchmarks (torch only).

A case of the op benchmark is a dtype and memory layout, a shape (N, C, H, H), a kernel size K and
the angles: one angle for every channel (degrees), or ``'mixed8'``, the 8-direction layout of the
models (``oriented_angles(C)``), optionally moved off the pixel lattice by a fixed random amount
per channel, as learned angles are.
"""
import math
from typing import Callable, List, Optional, Sequence, Union

import torch
from torch import Tensor

from mmo1d.ops import oriented_angles, tap_offsets

DTYPES = {'float32': torch.float32, 'float64': torch.float64, 'bfloat16': torch.bfloat16,
          'float16': torch.float16}
LAYOUTS = {'nchw': torch.contiguous_format, 'channels_last': torch.channels_last}
#: The layout each dtype is benchmarked in unless told: half precision as the AMP models run it.
DEFAULT_LAYOUT = {'float32': 'nchw', 'float64': 'nchw', 'bfloat16': 'channels_last', 'float16': 'channels_last'}
MIXED = 'mixed8'
Angle = Union[float, str]


def parse_angle(text: str) -> Angle:
    """``'mixed8'``, or an angle in degrees as a float.

    Raises:
        ValueError: for anything else.
    """
    if text == MIXED:
        return MIXED
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"an angle is degrees or '{MIXED}' (the 8 directions of the models), got {text!r}") from None


def perturbed_angles(channels: int, jitter: float, seed: int) -> Tensor:
    """(C,) float32: ``oriented_angles(C)`` plus uniform(-jitter, jitter) radians, the same for a given seed."""
    g = torch.Generator().manual_seed(seed)
    return oriented_angles(channels) + jitter * (2 * torch.rand(channels, generator=g) - 1)


def angles(angle: Angle, channels: int, device: Union[str, torch.device], jitter: float = 0.0,
           seed: int = 0) -> Tensor:
    """(C,) float32 angles in radians of a case: every channel at ``angle`` degrees, or the 8 directions
    (``'mixed8'``) moved by uniform(-jitter, jitter) radians (none when ``jitter`` is 0)."""
    if angle == MIXED:
        theta = perturbed_angles(channels, jitter, seed) if jitter else oriented_angles(channels)
    else:
        theta = torch.full((channels, ), math.radians(float(angle)))
    return theta.to(device)


def masked_kernel(weight: Tensor, theta: Tensor) -> Tensor:
    """(C, 1, K, K) kernel equal to the oriented op: the taps scattered onto a KxK grid."""
    c, k = weight.shape
    dh, dw = tap_offsets(theta, k)
    dense = torch.zeros(c, k, k, dtype=weight.dtype, device=weight.device)
    rows = (dh + k // 2).to(weight.device)
    cols = (dw + k // 2).to(weight.device)
    dense.index_put_((torch.arange(c, device=weight.device)[:, None].expand(c, k), rows, cols), weight,
                     accumulate=True)
    return dense[:, None]


def make_step(conv: Callable[[Tensor, Tensor], Tensor], xs: Sequence[Tensor], weight: Tensor,
              grads: Sequence[Tensor], backward: bool, grad_mode: bool = True) -> Callable[[int], None]:
    """Call ``i`` of a case: ``conv`` on the i-th input of ``xs`` (cycled), and with ``backward`` the
    gradients of that input and ``weight`` against the i-th of ``grads``. A forward alone runs with
    autograd on (as in training) unless ``grad_mode`` is False."""
    def step(i: int) -> None:
        x = xs[i % len(xs)]
        if backward:
            torch.autograd.grad(conv(x, weight), (x, weight), grads[i % len(grads)])
            return
        with torch.set_grad_enabled(grad_mode):
            conv(x, weight)

    return step


def input_sets(shape: Sequence[int], dtype: torch.dtype, layout: str, device: str, sets: int,
               generator: Optional[torch.Generator] = None) -> List[Tensor]:
    """``sets`` random inputs of ``shape`` in ``layout``, requiring gradients (alternated between calls
    so that a call does not find its input in the cache the last one left)."""
    return [torch.randn(*shape, dtype=dtype, device=device, generator=generator)
            .contiguous(memory_format=LAYOUTS[layout]).requires_grad_() for _ in range(sets)]
