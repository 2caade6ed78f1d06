"""The interpolated (learnable-angle) reference: bilinear against grid_sample, gaussian against a
loop over the formula, gradients in float64 (theta included), and angles recovered by descent."""
import math

import pytest
import torch
import torch.nn.functional as F

from mmo1d.ops import oriented_dwconv1d_reference
from mmo1d.ops.interp_reference import interp_dense_kernel
from mmo1d.ops.interp_reference import oriented_dwconv1d_interp_reference as interp


def _inputs(n=2, c=3, h=9, w=11, k=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, c, h, w, generator=g, dtype=torch.float64)
    weight = torch.randn(c, k, generator=g, dtype=torch.float64)
    bias = torch.randn(c, generator=g, dtype=torch.float64)
    theta = torch.rand(c, generator=g, dtype=torch.float64) * math.pi
    return x, weight, bias, theta


def _grid_sample_oracle(x, weight, theta, bias, stride):
    """Each tap through grid_sample (align_corners=True: pixel i at -1 + 2 i / (size - 1))."""
    n, c, h, w = x.shape
    k = weight.shape[1]
    ho, wo = -(-h // stride), -(-w // stride)
    d = torch.arange(k, dtype=x.dtype) - k // 2
    p = (torch.arange(ho, dtype=x.dtype) * stride)[None, :, None]
    q = (torch.arange(wo, dtype=x.dtype) * stride)[None, None, :]
    out = []
    for ch in range(c):
        rows = p - d[:, None, None] * torch.sin(theta[ch])  # (K, Ho, 1)
        cols = q + d[:, None, None] * torch.cos(theta[ch])  # (K, 1, Wo)
        rows, cols = torch.broadcast_tensors(rows, cols)
        grid = torch.stack([2 * cols / (w - 1) - 1, 2 * rows / (h - 1) - 1], dim=-1).reshape(1, k * ho, wo, 2)
        taps = F.grid_sample(x[:, ch:ch + 1], grid.expand(n, -1, -1, -1), mode='bilinear', padding_mode='zeros',
                             align_corners=True).reshape(n, k, ho, wo)
        out.append(torch.einsum('nkhw,k->nhw', taps, weight[ch]) + bias[ch])
    return torch.stack(out, dim=1)


def _gaussian_loops(x, weight, theta, bias, stride, sigma, radius):
    """The gaussian band from its formula, one output and tap at a time."""
    n, c, h, w = x.shape
    k = weight.shape[1]
    ho, wo = -(-h // stride), -(-w // stride)
    out = torch.zeros(n, c, ho, wo, dtype=x.dtype)
    for ch in range(c):
        s, co = math.sin(theta[ch]), math.cos(theta[ch])
        for p in range(ho):
            for q in range(wo):
                acc = torch.full((n, ), float(bias[ch]), dtype=x.dtype)
                for t in range(k):
                    a, b = p * stride - (t - k // 2) * s, q * stride + (t - k // 2) * co
                    pts = [(i, j) for i in range(math.floor(a - radius) - 1, math.ceil(a + radius) + 2)
                           for j in range(math.floor(b - radius) - 1, math.ceil(b + radius) + 2)
                           if (i - a)**2 + (j - b)**2 <= radius**2]
                    ws = [math.exp(-((i - a)**2 + (j - b)**2) / (2 * sigma**2)) for i, j in pts]
                    total = sum(ws)
                    for (i, j), wt in zip(pts, ws):
                        if 0 <= i < h and 0 <= j < w:
                            acc += weight[ch, t] * wt / total * x[:, ch, i, j]
                out[:, ch, p, q] = acc
    return out


@pytest.mark.parametrize('stride', [1, 2, 3])
def test_bilinear_is_grid_sample(stride):
    x, weight, bias, theta = _inputs(seed=stride)
    params = [t.clone().requires_grad_() for t in (x, weight, theta, bias)]
    ours = interp(params[0], params[1], params[2], params[3], stride, 'bilinear')
    ref_params = [t.clone().requires_grad_() for t in (x, weight, theta, bias)]
    ref = _grid_sample_oracle(ref_params[0], ref_params[1], ref_params[2], ref_params[3], stride)
    torch.testing.assert_close(ours, ref, rtol=1e-12, atol=1e-12)
    g = torch.randn_like(ours)
    for a, b in zip(torch.autograd.grad(ours, params, g), torch.autograd.grad(ref, ref_params, g)):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)
    # Lattice lines put taps on integer coordinates (values only: there grid_sample's normalised
    # coordinates may round to the other side of the pixel, which changes the one-sided derivative).
    lattice = torch.tensor([0.0, math.pi / 2, math.pi / 4], dtype=torch.float64)
    torch.testing.assert_close(interp(x, weight, lattice, bias, stride), _grid_sample_oracle(x, weight, lattice, bias,
                                                                                             stride))


@pytest.mark.parametrize('stride', [1, 2])
@pytest.mark.parametrize('sigma, radius', [(0.5, 1.5), (0.8, 1.3), (1.0, 2.7)])
def test_gaussian_is_its_formula(stride, sigma, radius):
    x, weight, bias, theta = _inputs(n=1, c=2, h=6, w=7, k=5, seed=4)
    ours = interp(x, weight, theta, bias, stride, 'gaussian', sigma, radius)
    torch.testing.assert_close(ours, _gaussian_loops(x, weight, theta, bias, stride, sigma, radius), rtol=1e-12,
                               atol=1e-12)


@pytest.mark.parametrize('rounding', ['bilinear', 'gaussian'])
def test_gradients_float64(rounding):
    x, weight, bias, theta = _inputs(n=1, c=2, h=7, w=8, k=5, seed=5)
    args = [t.requires_grad_() for t in (x, weight, theta, bias)]
    assert torch.autograd.gradcheck(lambda a, b, c, d: interp(a, b, c, d, 2, rounding, 0.7, 1.5), args, eps=1e-6,
                                    atol=1e-7)


def test_lattice_lines_read_the_pixels_that_truncation_reads():
    """At 0 and 90 degrees every tap sits on a pixel: both discretisations give the rounded op."""
    x, weight, bias, _ = _inputs(c=2, seed=6)
    theta = torch.tensor([0.0, math.pi / 2], dtype=torch.float64)
    ref = oriented_dwconv1d_reference(x, weight, theta.float(), bias)
    torch.testing.assert_close(interp(x, weight, theta, bias), ref, rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(interp(x, weight, theta, bias, 1, 'gaussian', 0.05, 1.5), ref, rtol=1e-9, atol=1e-9)


# Radii that are not integers: with an integer radius r, the output pixel lies exactly on the band's
# edge of the taps at |d| = r, where two orders of the same float operations disagree.
@pytest.mark.parametrize('rounding, sigma, radius', [('bilinear', 0.5, 1.0), ('gaussian', 0.7, 1.5),
                                                     ('gaussian', 1.0, 2.5)])
@pytest.mark.parametrize('stride', [1, 2, 3])
def test_a_depthwise_conv2d_with_the_dense_kernel_is_the_same_op(rounding, sigma, radius, stride):
    # Angles off the lattice: on it, the two orders of computing a position can round it to either
    # side of a pixel, where the derivative is one-sided.
    x, weight, bias, theta = _inputs(c=4, h=13, w=10, k=7, seed=8)
    params = [t.clone().requires_grad_() for t in (x, weight, theta, bias)]
    kernel = interp_dense_kernel(params[1], params[2], rounding, sigma, radius)
    got = F.conv2d(params[0], kernel, params[3], stride, kernel.shape[-1] // 2, 1, 4)
    ref_params = [t.clone().requires_grad_() for t in (x, weight, theta, bias)]
    want = interp(*ref_params, stride, rounding, sigma, radius)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    g = torch.randn_like(want)
    for a, b in zip(torch.autograd.grad(got, params, g), torch.autograd.grad(want, ref_params, g)):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


def test_bad_arguments():
    x, weight, bias, theta = _inputs()
    with pytest.raises(ValueError, match='rounding must be one of'):
        interp(x, weight, theta, rounding='trunc')
    with pytest.raises(ValueError, match='must not be a whole number'):
        interp(x, weight, theta, bias, 1, 'gaussian', 0.5, 1.0)
    with pytest.raises(ValueError, match='0 < sigma and 1 <= radius'):
        interp(x, weight, theta, rounding='gaussian', sigma=0.0)
    with pytest.raises(ValueError, match='odd'):
        interp(x, torch.randn(3, 4, dtype=torch.float64), theta)


@pytest.mark.parametrize('rounding', ['bilinear', 'gaussian'])
def test_descent_recovers_the_angles(rounding):
    """Targets made by known angles off the 8 directions from smooth inputs; starting 0.25 rad away
    with the true weights, gradient descent on theta alone recovers every angle within 0.02 rad.

    One 16x16 image and 100 steps: the gaussian reference gathers 36 pixels a tap, and this size
    already lands within 0.003 rad of the truth for both discretisations."""
    g = torch.Generator().manual_seed(7)
    c, k = 4, 9
    noise = torch.randn(1, c, 16, 16, generator=g, dtype=torch.float64)
    x = F.avg_pool2d(F.avg_pool2d(noise, 5, 1, 2, count_include_pad=False), 5, 1, 2, count_include_pad=False)
    weight = torch.rand(c, k, generator=g, dtype=torch.float64) + 0.5
    truth = torch.tensor([0.3, 1.1, 1.9, 2.6], dtype=torch.float64)
    target = interp(x, weight, truth, None, 1, rounding, 0.6, 1.5)
    start = truth + torch.tensor([0.25, -0.25, 0.25, -0.25], dtype=torch.float64)
    theta = start.clone().requires_grad_()
    opt = torch.optim.Adam([theta], lr=0.02)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, [60], 0.1)
    for _ in range(100):
        opt.zero_grad()
        loss = (interp(x, weight, theta, None, 1, rounding, 0.6, 1.5) - target).pow(2).mean()
        loss.backward()
        opt.step()
        sched.step()
    err = (theta.detach() - truth).abs()
    assert (err < 0.02).all(), f'{rounding}: errors {err.tolist()} from {(start - truth).abs().tolist()}'
