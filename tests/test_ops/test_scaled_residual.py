"""``scaled_residual``: the blocks' ``shortcut + branch * scale`` with a leaner backward.

Its output and gradients must be ``torch.addcmul``'s under autograd (outside autocast), bit for bit,
in every dtype mix the blocks make, broadcasting included; autocast must not cast it; higher-order
gradients, inference mode and the registration (``opcheck``) must work.
"""
import pytest
import torch

from mmo1d.ops import scaled_residual

from .utils import DEVICES


def _grads(fn, shortcut, branch, scale, grad):
    leaves = [t.detach().clone().requires_grad_() for t in (shortcut, branch, scale)]
    out = fn(*leaves)
    out.backward(grad)
    return [out.detach()] + [t.grad for t in leaves]


def _addcmul(shortcut, branch, scale):
    with torch.autocast(shortcut.device.type, enabled=False):
        return torch.addcmul(shortcut, branch, scale)


CASES = [
    # (branch dtype, scale shape, branch shape): a block's residual with drop path, without, broadcast
    (torch.float16, (2, 16, 1, 1), (2, 16, 9, 11)),
    (torch.bfloat16, (16, 1, 1), (2, 16, 9, 11)),
    (torch.float32, (2, 16, 1, 1), (2, 16, 9, 11)),
    (torch.float16, (2, 16, 1, 1), (2, 16, 9, 1)),
]


@pytest.mark.parametrize('device', DEVICES)
@pytest.mark.parametrize('dtype,scale_shape,branch_shape', CASES)
def test_equals_addcmul_bitwise(device, dtype, scale_shape, branch_shape):
    g = torch.Generator().manual_seed(3)
    shortcut = torch.randn(2, 16, 9, 11, generator=g).to(device).contiguous(memory_format=torch.channels_last)
    branch = torch.randn(branch_shape, generator=g).to(device=device, dtype=dtype)
    if branch.dim() == 4 and branch.shape[-1] > 1:
        branch = branch.contiguous(memory_format=torch.channels_last)
    scale = torch.rand(scale_shape, generator=g).to(device)
    grad = torch.randn(2, 16, 9, 11, generator=g).to(device).contiguous(memory_format=torch.channels_last)
    got = _grads(scaled_residual, shortcut, branch, scale, grad)
    want = _grads(_addcmul, shortcut, branch, scale, grad)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    assert got[0].is_contiguous(memory_format=torch.channels_last)
    assert got[2].dtype == dtype and got[2].stride() == want[2].stride()


@pytest.mark.parametrize('device', DEVICES)
def test_autocast_does_not_cast_it(device):
    dtype = torch.float16 if device == 'cuda' else torch.bfloat16
    shortcut = torch.randn(2, 8, 5, 5, device=device)
    branch = torch.randn(2, 8, 5, 5, device=device).to(dtype)
    scale = torch.rand(8, 1, 1, device=device)
    with torch.autocast(device, dtype=dtype):
        out = scaled_residual(shortcut, branch, scale)
    assert out.dtype == torch.float32 and torch.equal(out, torch.addcmul(shortcut, branch, scale))


def test_higher_order_gradients_and_inference_mode():
    g = torch.Generator().manual_seed(0)
    args = [torch.randn(2, 3, 4, 5, generator=g, dtype=torch.float64, requires_grad=True),
            torch.randn(2, 3, 4, 5, generator=g, dtype=torch.float64, requires_grad=True),
            torch.rand(2, 3, 1, 1, generator=g, dtype=torch.float64, requires_grad=True)]
    assert torch.autograd.gradcheck(scaled_residual, args)
    assert torch.autograd.gradgradcheck(scaled_residual, args)
    with torch.inference_mode():
        plain = [a.detach().clone() for a in args]
        assert torch.equal(scaled_residual(*plain), torch.addcmul(*plain))


@pytest.mark.parametrize('device', DEVICES)
def test_opcheck(device):
    shortcut = torch.randn(2, 4, 3, 5, device=device, requires_grad=True)
    branch = torch.randn(2, 4, 3, 5, device=device, requires_grad=True)
    scale = torch.rand(2, 4, 1, 1, device=device, requires_grad=True)
    torch.library.opcheck(torch.ops.mmo1d.scaled_residual.default, (shortcut, branch, scale))
