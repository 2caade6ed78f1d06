"""The CPU kernels' own paths against the reference op.

Channels_last inputs whose channels form runs of identical angles averaging at least 4 channels are
computed on their NHWC memory, vectorised across each run's channels (aligned vectors in pairs, and
vectors that overhang a run for its leftover channels), runs leaning to the vertical along output
columns; other inputs by the NCHW plane kernels. The cases below reach: runs of every length and
alignment, row and column runs in one call (whose overhangs must blend), runs of one angle split by
another, channel counts that are no multiple of a vector, strides 1 to 3, residual, bias, floor
rounding, K = 1, one-pixel planes, the strided input gradient, the weight gradient's flushes to
double, every instruction-set variant, and the independence of the results from the number of
threads.
"""
import math
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from mmo1d.ops import oriented_angles, oriented_dwconv1d

from .utils import RTOL, reference_with_grads, rel_err


def run_layout(c: int, name: str) -> torch.Tensor:
    """Angles (c,) in radians laid out in runs of identical angles."""
    if name == 'one':
        return torch.full((c, ), math.radians(67.5))
    if name.startswith('d'):
        return oriented_angles(c, int(name[1:]))
    if name == 'split':  # one angle (row lines) in two runs cut by a channel at 90 degrees (column lines)
        theta = torch.full((c, ), math.radians(22.5))
        theta[c // 3] = math.pi / 2
        return theta
    if name == 'special':  # runs of NaN, inf and ordinary angles
        return torch.tensor([float('nan'), math.pi / 4, float('inf'), 0.0])[torch.arange(c) * 4 // c]
    assert name == 'random'  # runs of one channel: the NCHW kernels on a copy
    return torch.rand(c, generator=torch.Generator().manual_seed(c), dtype=torch.float64).mul(math.pi).float()


def inputs(n, c, h, w, k, layout, dtype=torch.float64, seed=0, bias=True):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, c, h, w, generator=g, dtype=torch.float64)
    weight = torch.randn(c, k, generator=g, dtype=torch.float64) / math.sqrt(k)
    b = torch.randn(c, generator=g, dtype=torch.float64) if bias else None
    fmt = torch.channels_last if layout == 'channels_last' else torch.contiguous_format
    return (x.to(dtype).contiguous(memory_format=fmt), weight.to(dtype), None if b is None else b.to(dtype))


def check(x, weight, theta, bias, tol=None, grad_format=None, **kwargs):
    """Output and input, weight and bias gradients against the float64 reference."""
    out_shape = (x.shape[0], x.shape[1], -(-x.shape[2] // kwargs.get('stride', 1)),
                 -(-x.shape[3] // kwargs.get('stride', 1)))
    grad = torch.randn(out_shape, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    xg, wg = x.detach().requires_grad_(), weight.detach().requires_grad_()
    bg = None if bias is None else bias.detach().requires_grad_()
    out = oriented_dwconv1d(xg, wg, theta, bg, **kwargs)
    channels_last = x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous()
    assert out.is_contiguous(memory_format=torch.channels_last if channels_last else torch.contiguous_format)
    g = grad.to(x.dtype)
    if grad_format is not None:
        g = g.contiguous(memory_format=grad_format)
    grads = torch.autograd.grad(out, [t for t in (xg, wg, bg) if t is not None], g)
    ref, ref_grads = reference_with_grads(x, weight, theta, bias, grad, **kwargs)
    tol = RTOL[x.dtype] if tol is None else tol
    assert rel_err(out, ref) < tol
    for got, want, name in zip(grads, ref_grads, ('input', 'weight', 'bias')):
        assert rel_err(got, want) < tol, f'gradient of {name}'


@pytest.mark.parametrize('c', [4, 5, 12, 13, 20, 37, 96, 100])
@pytest.mark.parametrize('name', ['one', 'd2', 'd3', 'd8', 'split', 'special', 'random'])
def test_channel_runs_channels_last(c, name):
    x, weight, bias = inputs(2, c, 6, 9, 7, 'channels_last', dtype=torch.float32, seed=c)
    check(x, weight, run_layout(c, name), bias)


@pytest.mark.parametrize('layout', ['nchw', 'channels_last'])
@pytest.mark.parametrize('stride', [1, 2, 3])
@pytest.mark.parametrize('k', [1, 5, 15])
def test_strides_residual_floor(layout, stride, k):
    x, weight, bias = inputs(2, 24, 11, 14, k, layout, dtype=torch.float32, seed=10 * k + stride)
    for i, (residual, rounding) in enumerate([(False, 'trunc'), (True, 'floor')]):
        check(x, weight, oriented_angles(24, 8 if i == 0 else 3, offset=0.25 * i), bias if i else None,
              stride=stride, residual=residual, rounding=rounding)


@pytest.mark.parametrize('layout', ['nchw', 'channels_last'])
@pytest.mark.parametrize('hw', [(1, 1), (1, 7), (7, 1), (2, 3), (5, 64)])
def test_tiny_and_wide_planes(layout, hw):
    x, weight, bias = inputs(3, 16, *hw, 9, layout, dtype=torch.float32, seed=hw[0] * 100 + hw[1])
    for stride in (1, 2):
        check(x, weight, oriented_angles(16, 4), bias, stride=stride, residual=stride == 2)


@pytest.mark.parametrize('layout', ['nchw', 'channels_last'])
def test_long_lines_and_planes_flush_partial_sums(layout):
    # Lines of 1100 outputs (channels_last) and planes of 2 x 1100 (NCHW): the weight gradient's
    # float partial sums are flushed to double several times per line and plane.
    x, weight, bias = inputs(1, 8, 2, 1100, 7, layout, dtype=torch.float32, seed=4)
    check(x, weight, oriented_angles(8, 2), bias)


@pytest.mark.parametrize('layout', ['nchw', 'channels_last'])
@pytest.mark.parametrize('dtype', [torch.float16, torch.bfloat16])
def test_reduced_precision_in_float32(layout, dtype):
    x, weight, bias = inputs(2, 24, 9, 10, 15, layout, dtype=dtype, seed=5)
    check(x, weight, oriented_angles(24, 8), bias, stride=2, residual=True)


def test_channels_last_input_with_nchw_grad_output():
    x, weight, bias = inputs(2, 24, 8, 9, 7, 'channels_last', dtype=torch.float32, seed=6)
    check(x, weight, oriented_angles(24, 8), bias, grad_format=torch.contiguous_format)
    check(x, weight, oriented_angles(24, 8), bias, stride=2, grad_format=torch.contiguous_format)


@pytest.mark.parametrize('layout', ['nchw', 'channels_last'])
@pytest.mark.parametrize('stride,residual', [(1, False), (2, True), (3, False)])
def test_gradcheck_float64(layout, stride, residual):
    x, weight, bias = inputs(2, 8, 6, 7, 5, layout, seed=stride)
    theta = oriented_angles(8, 2, offset=0.125)
    assert torch.autograd.gradcheck(
        lambda a, b, c: oriented_dwconv1d(a, b, theta, c, stride=stride, residual=residual),
        (x.requires_grad_(), weight.requires_grad_(), bias.requires_grad_()))


@pytest.mark.parametrize('layout', ['nchw', 'channels_last'])
def test_results_do_not_depend_on_threads(layout):
    x, weight, bias = inputs(4, 48, 17, 15, 15, layout, dtype=torch.float32, seed=8)
    x.requires_grad_()
    weight.requires_grad_()
    theta = oriented_angles(48, 8)
    grad = torch.randn(4, 48, 17, 15)
    threads = torch.get_num_threads()
    results = []
    try:
        for n in (1, 2, 3):
            torch.set_num_threads(n)
            out = oriented_dwconv1d(x, weight, theta, bias)
            results.append((out, *torch.autograd.grad(out, (x, weight), grad)))
    finally:
        torch.set_num_threads(threads)
    for other in results[1:]:
        for a, b in zip(results[0], other):
            assert torch.equal(a, b)


CHECK_SCRIPT = textwrap.dedent('''
    import math, sys, torch
    from mmo1d.ops import oriented_angles, oriented_dwconv1d, oriented_dwconv1d_reference
    assert torch.backends.cpu.get_cpu_capability() == sys.argv[1], torch.backends.cpu.get_cpu_capability()
    g = torch.Generator().manual_seed(0)
    for dtype in (torch.float32, torch.float64):
        for fmt in (torch.contiguous_format, torch.channels_last):
            for c, stride in ((37, 1), (24, 2)):
                x = torch.randn(2, c, 9, 11, generator=g, dtype=torch.float64)
                w = torch.randn(c, 9, generator=g, dtype=torch.float64) / 3
                t = oriented_angles(c, 8)
                xt = x.to(dtype).contiguous(memory_format=fmt).requires_grad_()
                wt = w.to(dtype).requires_grad_()
                out = oriented_dwconv1d(xt, wt, t, stride=stride, residual=True)
                gx, gw = torch.autograd.grad(out.square().sum(), (xt, wt))
                xr, wr = x.clone().requires_grad_(), w.clone().requires_grad_()
                ref = oriented_dwconv1d_reference(xr, wr, t, stride=stride, residual=True)
                rx, rw = torch.autograd.grad(ref.square().sum(), (xr, wr))
                tol = 1e-5 if dtype == torch.float32 else 1e-12
                for a, b in ((out, ref), (gx, rx), (gw, rw)):
                    err = ((a.double() - b).norm() / b.norm()).item()
                    assert err < tol, (dtype, fmt, c, stride, err)
''')


@pytest.mark.parametrize('capability', ['DEFAULT', 'AVX2'])
def test_instruction_set_variants(capability):
    # The kernels follow ATen's choice of instruction set: lowering it with ATEN_CPU_CAPABILITY runs
    # the baseline (SSE2 / NEON) and AVX2 variants on a CPU that has AVX-512.
    available = torch.backends.cpu.get_cpu_capability()
    order = ['DEFAULT', 'AVX2', 'AVX512']
    if available not in order or order.index(available) < order.index(capability):
        pytest.skip(f'this CPU runs {available}')
    env = dict(os.environ, ATEN_CPU_CAPABILITY=capability.lower())
    proc = subprocess.run([sys.executable, '-c', CHECK_SCRIPT, capability], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
