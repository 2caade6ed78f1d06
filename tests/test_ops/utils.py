"""Shared helpers of the op tests: devices, tolerances, random inputs and the float64 oracle."""
import math

import pytest
import torch

from mmo1d.ops import oriented_angles, oriented_dwconv1d_reference

DEVICES = [
    'cpu',
    pytest.param('cuda', marks=pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA GPU')),
]

# Relative error (norm of the difference over norm of the reference) allowed per dtype.
RTOL = {torch.float64: 1e-12, torch.float32: 1e-5, torch.float16: 3e-3, torch.bfloat16: 2e-2}


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    out, ref = out.double().cpu(), ref.double().cpu()
    assert torch.isfinite(out).all(), 'non-finite values in the output'
    return ((out - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def random_angles(channels: int, generator: torch.Generator) -> torch.Tensor:
    """Arbitrary angles in [0, pi), not multiples of 22.5 degrees."""
    return torch.rand(channels, generator=generator, dtype=torch.float64).mul(math.pi).float()


def make_inputs(n, c, h, w, k, dtype=torch.float32, device='cpu', seed=0, bias=True):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, c, h, w, generator=g, dtype=torch.float64)
    weight = torch.randn(c, k, generator=g, dtype=torch.float64) / math.sqrt(k)
    b = torch.randn(c, generator=g, dtype=torch.float64) if bias else None
    theta = random_angles(c, g)
    cast = dict(dtype=dtype, device=device)
    return (x.to(**cast), weight.to(**cast), theta.to(device), None if b is None else b.to(**cast))


def cuda_wgrad_inputs(n, c, h, w, k, dtype, angles, seed, jitter=0.0):
    """x, weight, theta and dy of a channels_last CUDA weight-gradient call: angles 'mixed8' (the
    models' 8 directions), 'arbitrary', or one angle in degrees; jitter moves each channel's angle by
    uniform(-jitter, jitter) rad."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, c, h, w, generator=g)
    grad = torch.randn(n, c, h, w, generator=g)
    weight = torch.randn(c, k, generator=g) / math.sqrt(k)
    if angles == 'arbitrary':
        theta = random_angles(c, g)
    else:
        theta = oriented_angles(c, 8, 0.0) if angles == 'mixed8' else torch.full((c,), math.radians(angles))
        if jitter:
            theta = theta + jitter * (2 * torch.rand(c, generator=g) - 1)
    cast = dict(device='cuda', dtype=dtype)
    cl = torch.channels_last
    return (x.to(**cast).contiguous(memory_format=cl), weight.to(**cast), theta.cuda(),
            grad.to(**cast).contiguous(memory_format=cl))


def reference_with_grads(x, weight, theta, bias, grad_out, **kwargs):
    """Output and gradients of the reference op in float64 on the CPU."""
    xr = x.detach().double().cpu().requires_grad_()
    wr = weight.detach().double().cpu().requires_grad_()
    br = None if bias is None else bias.detach().double().cpu().requires_grad_()
    out = oriented_dwconv1d_reference(xr, wr, theta.cpu(), br, **kwargs)
    grads = torch.autograd.grad(out, [t for t in (xr, wr, br) if t is not None], grad_out.double().cpu())
    return out.detach(), grads
