"""The op of the parameter gradients, ``oriented_dwconv1d_backward_params``, with the bias gradient.

On CUDA's channels_last paths the weight-gradient kernel also sums the bias gradient; elsewhere the op
is the weight gradient followed by a sum. Either way its weight gradient must be the one it gives
without the bias gradient, bit for bit, and its bias gradient the sum of grad_output.
"""
import pytest
import torch

from mmo1d.ops import oriented_dwconv1d, oriented_dwconv1d_path

from .utils import DEVICES, RTOL, make_inputs, rel_err

_ops = torch.ops.mmo1d


def weight_bias_grad(grad, x, weight, theta, stride):
    dw, dtheta, db = _ops.oriented_dwconv1d_backward_params(grad, x, weight, theta, stride, 'trunc', 0.5, 1.0, True,
                                                            False)
    assert dtheta.numel() == 0
    return dw, db


def weight_grad(grad, x, weight, theta, stride):
    dw, dtheta, db = _ops.oriented_dwconv1d_backward_params(grad, x, weight, theta, stride, 'trunc', 0.5, 1.0, False,
                                                            False)
    assert dtheta.numel() == 0 and db.numel() == 0
    return dw

FORMATS = {'nchw': torch.contiguous_format, 'channels_last': torch.channels_last}


def grads(c, h, w, k, stride, dtype, device, fmt, seed):
    x, weight, theta, _ = make_inputs(2, c, h, w, k, dtype=dtype, device=device, seed=seed)
    x = x.contiguous(memory_format=fmt)
    g = torch.Generator().manual_seed(seed + 1)
    grad = torch.randn(2, c, -(-h // stride), -(-w // stride), generator=g, dtype=torch.float64)
    grad = grad.to(device=device, dtype=dtype).contiguous(memory_format=fmt)
    return x, weight, theta, grad


@pytest.mark.parametrize('device', DEVICES)
@pytest.mark.parametrize('layout', list(FORMATS))
@pytest.mark.parametrize('dtype', [torch.float64, torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize('c,h,w,k,stride', [(16, 12, 11, 7, 1), (13, 9, 16, 15, 1), (40, 20, 17, 31, 2),
                                            (96, 14, 14, 13, 1), (24, 7, 9, 5, 3)])
def test_matches_weight_grad_and_sum(device, layout, dtype, c, h, w, k, stride):
    if device == 'cpu' and dtype in (torch.float16, torch.bfloat16) and c > 40:
        pytest.skip('one reduced-precision case per shape family is enough on the CPU')
    x, weight, theta, grad = grads(c, h, w, k, stride, dtype, device, FORMATS[layout], seed=c + h + k)
    dw, db = weight_bias_grad(grad, x, weight, theta, stride)
    assert dw.shape == weight.shape and dw.dtype == dtype
    assert db.shape == (c, ) and db.dtype == dtype and db.device == x.device
    # The weight gradient is the weight-gradient op's, bit for bit.
    assert torch.equal(dw, weight_grad(grad, x, weight, theta, stride))
    assert rel_err(db, grad.double().sum((0, 2, 3))) < RTOL[dtype]


@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA GPU')
@pytest.mark.parametrize('dtype', [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize('stride', [1, 2])
@pytest.mark.parametrize('h,w', [(30, 26), (10, 10), (7, 9)])
def test_channels_last_kernel_sums_the_bias(dtype, stride, h, w):
    """The fused path serves these calls (on small planes with groups of warps that share out the points,
    only one of which sums the bias), and its sum is deterministic and accurate."""
    c = 200  # not a multiple of the channel block of any dtype's kernel
    x, weight, theta, grad = grads(c, h, w, 31, stride, dtype, 'cuda', torch.channels_last, seed=3)
    assert oriented_dwconv1d_path(x, weight, stride, 'backward_weight').startswith('vec_wgrad')
    dw, db = weight_bias_grad(grad, x, weight, theta, stride)
    for _ in range(2):
        dw2, db2 = weight_bias_grad(grad, x, weight, theta, stride)
        assert torch.equal(dw, dw2) and torch.equal(db, db2)
    assert rel_err(db, grad.double().sum((0, 2, 3))) < RTOL[dtype]


@pytest.mark.parametrize('device', DEVICES)
def test_autograd_uses_it_for_bias_and_weight(device):
    """Through autograd: bias gradient with and without the weight's, weight gradient without the bias's."""
    x, weight, theta, bias = make_inputs(2, 24, 15, 13, 9, device=device, seed=11)
    x = x.contiguous(memory_format=torch.channels_last)
    grad = torch.randn(2, 24, 15, 13, device=device).contiguous(memory_format=torch.channels_last)
    expected = grad.double().sum((0, 2, 3))
    for needs_weight in (True, False):
        w = weight.detach().requires_grad_(needs_weight)
        b = bias.detach().requires_grad_()
        oriented_dwconv1d(x, w, theta, b).backward(grad)
        assert rel_err(b.grad, expected) < RTOL[torch.float32]
        if needs_weight:
            assert torch.equal(w.grad, weight_grad(grad, x, weight, theta, 1))
    w = weight.detach().requires_grad_()
    oriented_dwconv1d(x, w, theta, bias).backward(grad)
    assert torch.equal(w.grad, weight_grad(grad, x, weight, theta, 1))


def test_bad_grad_output_is_named():
    x, weight, theta, _ = make_inputs(1, 4, 6, 6, 3)
    with pytest.raises(RuntimeError, match='grad'):
        weight_bias_grad(torch.zeros(1, 4, 5, 6), x, weight, theta, 1)
