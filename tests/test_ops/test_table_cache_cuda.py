"""The CUDA kernels' cache of angle tables: reuse, and no stale tables after the angles (or, for the
interpolated taps' tables, the weight) change."""
import math

import pytest
import torch

from mmo1d.ops import (
    clear_table_cache,
    oriented_angles,
    oriented_dwconv1d,
    oriented_dwconv1d_reference,
    table_cache_size,
)
from mmo1d.ops.interp_reference import oriented_dwconv1d_interp_reference as interp_reference

from .utils import RTOL, rel_err

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA GPU')

# (dtype, layout, stride): the window, vector and stride-2 channels_last paths, the NCHW fast path and
# the general kernels (float64).
CASES = [(torch.bfloat16, torch.channels_last, 1), (torch.float16, torch.channels_last, 2),
         (torch.float32, torch.channels_last, 1), (torch.float32, torch.contiguous_format, 1),
         (torch.float64, torch.contiguous_format, 2)]


def run(x, weight, theta, bias, stride, grad):
    x = x.detach().requires_grad_()
    weight = weight.detach().requires_grad_()
    out = oriented_dwconv1d(x, weight, theta, bias, stride=stride, residual=True)
    out.backward(grad)
    return out.detach(), x.grad, weight.grad


def inputs(c, dtype, layout, stride, seed=0):
    g = torch.Generator(device='cuda').manual_seed(seed)
    x = torch.randn(2, c, 23, 30, device='cuda', generator=g).to(dtype).contiguous(memory_format=layout)
    weight = (torch.randn(c, 15, device='cuda', generator=g) / math.sqrt(15)).to(dtype)
    bias = torch.randn(c, device='cuda', generator=g).to(dtype)
    grad = torch.randn(2, c, -(-23 // stride), -(-30 // stride), device='cuda', generator=g).to(dtype)
    return x, weight, bias, grad.contiguous(memory_format=layout)


@pytest.mark.parametrize('dtype,layout,stride', CASES)
def test_cached_tables_give_the_built_ones(dtype, layout, stride):
    c = 64
    x, weight, bias, grad = inputs(c, dtype, layout, stride)
    theta = oriented_angles(c).cuda()
    clear_table_cache()
    assert table_cache_size() == 0
    first = run(x, weight, theta, bias, stride, grad)
    size = table_cache_size()
    assert size > 0
    second = run(x, weight, theta, bias, stride, grad)  # from the cache
    assert table_cache_size() == size
    for a, b in zip(first, second):
        assert torch.equal(a, b)


@pytest.mark.parametrize('dtype,layout,stride', CASES)
def test_angles_changed_in_place_or_reallocated_are_seen(dtype, layout, stride):
    c = 48
    x, weight, bias, grad = inputs(c, dtype, layout, stride, seed=1)
    theta = oriented_angles(c).cuda()
    run(x, weight, theta, bias, stride, grad)
    theta.add_(0.4)  # in place: the version counter moves
    out = oriented_dwconv1d(x, weight, theta, bias, stride=stride)
    ref = oriented_dwconv1d_reference(x.double().cpu(), weight.double().cpu(), theta.cpu(), bias.double().cpu(),
                                      stride=stride)
    assert rel_err(out, ref) < RTOL[dtype]
    # A new buffer, most likely at the freed one's address, with other angles.
    addr = theta.data_ptr()
    del theta
    theta = oriented_angles(c, offset=0.3).cuda()
    out = oriented_dwconv1d(x, weight, theta, bias, stride=stride)
    ref = oriented_dwconv1d_reference(x.double().cpu(), weight.double().cpu(), theta.cpu(), bias.double().cpu(),
                                      stride=stride)
    assert rel_err(out, ref) < RTOL[dtype], f'reused address: {theta.data_ptr() == addr}'


def test_other_stream_and_clearing():
    c = 32
    x, weight, bias, grad = inputs(c, torch.bfloat16, torch.channels_last, 1, seed=2)
    theta = oriented_angles(c).cuda()
    clear_table_cache()
    expected = run(x, weight, theta, bias, 1, grad)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        got = run(x, weight, theta, bias, 1, grad)
    torch.cuda.current_stream().wait_stream(side)
    for a, b in zip(expected, got):
        assert torch.equal(a, b)
    clear_table_cache()
    assert table_cache_size() == 0


def test_inference_tensor_angles_are_not_cached():
    """Angles made under torch.inference_mode (a model moved to the GPU there) have no version
    counter: their tables are built for each call, with the same results."""
    c = 32
    x, weight, bias, _ = inputs(c, torch.float16, torch.channels_last, 1, seed=3)
    expected = oriented_dwconv1d(x, weight, oriented_angles(c).cuda(), bias)
    clear_table_cache()
    with torch.inference_mode():
        theta = oriented_angles(c).cuda()
        assert theta.is_inference()
        out = oriented_dwconv1d(x, weight, theta, bias)
    assert table_cache_size() == 0
    out_again = oriented_dwconv1d(x, weight, theta, bias)  # outside inference mode too
    assert table_cache_size() == 0
    assert torch.equal(out, expected) and torch.equal(out_again, expected)


# (dtype, layout, rounding, residual): the interpolated taps' channels_last window gather and vector
# weight gradient, the NCHW segment paths, the general kernels (float64).
INTERP_CASES = [(torch.bfloat16, torch.channels_last, 'bilinear', True),
                (torch.float16, torch.channels_last, 'gaussian', False),
                (torch.float32, torch.contiguous_format, 'bilinear', True),
                (torch.float64, torch.contiguous_format, 'gaussian', False)]


def interp_inputs(dtype, layout, seed):
    x, weight, bias, grad = inputs(64, dtype, layout, 1, seed=seed)
    g = torch.Generator().manual_seed(seed)
    theta = (oriented_angles(64) + 0.1 * torch.rand(64, generator=g)).cuda()
    return [t.requires_grad_() for t in (x, weight, theta, bias)], grad


def table_builds(fn):
    """The interpolated tables' builds (kernel launches) while fn() runs."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sum(e.count for e in prof.key_averages() if 'build_interp_tables' in e.key)


def interp_step(leaves, rounding, residual, grad, clear_before_backward=False):
    """Output and gradients of x, weight, theta and bias of one call, and its table builds."""
    result = {}

    def step():
        out = oriented_dwconv1d(*leaves, 1, rounding, residual, 0.6, 1.5)
        if clear_before_backward:
            clear_table_cache()
        result['values'] = (out.detach(), *torch.autograd.grad(out, leaves, grad))

    builds = table_builds(step)
    return result['values'], builds


@pytest.mark.parametrize('dtype,layout,rounding,residual', INTERP_CASES)
def test_interpolated_tables_built_once_a_step(dtype, layout, rounding, residual):
    """A forward that records its backward builds the interpolated taps' tables and keeps them; its
    input gradient reads them and its weight gradient (which reads no merged weights: the residual
    form's serve it) takes them back, so nothing is left kept. The values are those of a backward
    that builds its own tables."""
    leaves, grad = interp_inputs(dtype, layout, seed=4)
    clear_table_cache()
    fresh, _ = interp_step(leaves, rounding, residual, grad, clear_before_backward=True)
    clear_table_cache()
    kept, builds = interp_step(leaves, rounding, residual, grad)
    assert builds == 1 and table_cache_size() == 0
    for a, b in zip(fresh, kept):
        assert torch.equal(a, b)


@pytest.mark.parametrize('dtype,layout,rounding,residual', INTERP_CASES[:1] + INTERP_CASES[-1:])
def test_interpolated_tables_are_not_kept_without_a_backward(dtype, layout, rounding, residual):
    """Forwards that record no backward (no_grad, inference mode, nothing requiring a gradient)
    keep no tables; weights and angles changed behind the version counter between calls (written
    through .data, as an averaged model is) are always seen."""
    leaves, _ = interp_inputs(dtype, layout, seed=6)
    clear_table_cache()
    for mode in (torch.no_grad, torch.inference_mode):
        for changed in (leaves[1], leaves[2]):
            changed.data.add_(0.05)
            with mode():
                out = oriented_dwconv1d(*leaves, 1, rounding, residual, 0.6, 1.5)
            assert table_cache_size() == 0
            x, weight, theta, bias = (t.detach().double().cpu() for t in leaves)
            ref = interp_reference(x, weight, theta, bias, 1, rounding, 0.6, 1.5) + (x if residual else 0)
            assert rel_err(out, ref) < max(RTOL[dtype], 1e-5)
    plain = [t.detach() for t in leaves]
    oriented_dwconv1d(*plain, 1, rounding, residual, 0.6, 1.5)
    assert table_cache_size() == 0


def test_interpolated_tables_kept_for_the_input_gradient_alone():
    """With the weight and angles frozen, the forward keeps its tables for the input gradient, which
    reads them; the next step's forward replaces them (one entry, whatever the steps)."""
    leaves, grad = interp_inputs(torch.bfloat16, torch.channels_last, seed=7)
    leaves[1].requires_grad_(False)
    leaves[2].requires_grad_(False)
    leaves[3].requires_grad_(False)
    clear_table_cache()

    def step():
        out = oriented_dwconv1d(*leaves, 1, 'bilinear', True)
        torch.autograd.grad(out, leaves[0], grad)

    for _ in range(3):
        assert table_builds(step) == 1
        assert table_cache_size() == 1


def test_interpolated_tables_under_autocast():
    """Under autocast the op casts the float32 weight at each step: the step's forward builds the
    tables once for its cast weight, its backward reads them and takes them back."""
    leaves, grad = interp_inputs(torch.float32, torch.channels_last, seed=5)
    clear_table_cache()

    def step():
        with torch.autocast('cuda', dtype=torch.bfloat16):
            out = oriented_dwconv1d(*leaves, 1, 'bilinear', True)
        torch.autograd.grad(out, leaves, grad.bfloat16())

    for _ in range(3):
        assert table_builds(step) == 1
        assert table_cache_size() == 0
