"""The CUDA kernels' cache of angle tables: reuse, and no stale tables after the angles change."""
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
