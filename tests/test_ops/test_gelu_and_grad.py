"""``torch.ops.mmo1d.gelu_and_grad``: ``(gelu(pre), gelu_backward(grad, pre))`` in one pass, inside the
backward of ``oriented_dwconv1d_gelu``.

Oracle: ATen's own ``F.gelu`` and ``aten.gelu_backward`` (exact GELU), bit for bit: the CUDA kernel
computes each element as ATen's kernels do, and the CPU runs them. Every dtype the kernel takes, both
layouts, vector and element-wise packs (a pointer off the 16-byte alignment, sizes not a multiple of
the pack) and inputs outside its domain (other strides, float64).
"""
import pytest
import torch
import torch.nn.functional as F

import mmo1d.ops  # noqa: F401  (loads the op library)

from .utils import DEVICES

FORMATS = {'nchw': torch.contiguous_format, 'channels_last': torch.channels_last}


def _expected(pre, grad):
    return F.gelu(pre), torch.ops.aten.gelu_backward(grad, pre)


def _inputs(shape, dtype, device, fmt, seed=0):
    g = torch.Generator().manual_seed(seed)
    # Values over GELU's whole range: its tails, its bend near 0, and exact zeros.
    pre = torch.randn(shape, generator=g, dtype=torch.float64) * 3
    pre.view(-1)[::17] = 0
    grad = torch.randn(shape, generator=g, dtype=torch.float64)
    return tuple(t.to(device=device, dtype=dtype).contiguous(memory_format=FORMATS[fmt]) for t in (pre, grad))


def _assert_bitwise(got, want):
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape and g.stride() == w.stride()
        assert torch.equal(g, w)


@pytest.mark.parametrize('device', DEVICES)
@pytest.mark.parametrize('dtype', [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize('fmt', ['nchw', 'channels_last'])
@pytest.mark.parametrize('shape', [(2, 64, 14, 14), (3, 40, 9, 7), (1, 3, 5, 3)])
def test_equals_atens_gelu_and_its_gradient(device, dtype, fmt, shape):
    pre, grad = _inputs(shape, dtype, device, fmt, seed=shape[1])
    _assert_bitwise(torch.ops.mmo1d.gelu_and_grad(pre, grad), _expected(pre, grad))


@pytest.mark.parametrize('device', DEVICES)
def test_off_the_vector_alignment_and_outside_the_domain(device):
    # A view one element into its storage (element-wise packs), grad in another memory order than
    # pre, and float64: the composite of ATen's two kernels.
    base, grad = _inputs((2 * 16 * 6 * 6 + 1, ), torch.float16, device, 'nchw', seed=3)
    pre = base[1:].view(2, 16, 6, 6)
    grad = grad[1:].view(2, 16, 6, 6).clone()
    _assert_bitwise(torch.ops.mmo1d.gelu_and_grad(pre, grad), _expected(pre, grad))
    pre, grad = _inputs((2, 16, 6, 5), torch.bfloat16, device, 'nchw', seed=4)
    grad = grad.contiguous(memory_format=torch.channels_last)
    _assert_bitwise(torch.ops.mmo1d.gelu_and_grad(pre, grad), _expected(pre, grad))
    pre, grad = _inputs((2, 8, 5, 5), torch.float64, device, 'channels_last', seed=5)
    _assert_bitwise(torch.ops.mmo1d.gelu_and_grad(pre, grad), _expected(pre, grad))


def test_empty_and_fake():
    pre = torch.empty(0, 8, 3, 3)
    h, dpre = torch.ops.mmo1d.gelu_and_grad(pre, pre)
    assert h.shape == dpre.shape == pre.shape
    with torch._subclasses.fake_tensor.FakeTensorMode():
        pre = torch.empty(2, 8, 5, 5).contiguous(memory_format=torch.channels_last)
        h, dpre = torch.ops.mmo1d.gelu_and_grad(pre, pre)
        assert h.shape == pre.shape and h.is_contiguous(memory_format=torch.channels_last)
