"""The fused channels-last layer norm against float64 ``F.layer_norm`` (+ ``F.gelu``), on every device."""
import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from mmo1d.ops import autocast_output_dtype, layer_norm_last

from .utils import DEVICES, RTOL, rel_err

# (input dtype, output dtype): the pairs the op supports.
PAIRS = [
    (torch.float32, torch.float32),
    (torch.float64, torch.float64),
    (torch.bfloat16, torch.bfloat16),
    (torch.float16, torch.float16),
    (torch.bfloat16, torch.float32),
    (torch.float16, torch.float32),
    (torch.float32, torch.bfloat16),
    (torch.float32, torch.float16),
]


def _tolerance(*dtypes):
    return max(RTOL[d] for d in dtypes)


def _make(shape, dtype, device, seed=0, offset=0):
    g = torch.Generator().manual_seed(seed)
    c = shape[-1]
    # Rows with a non-zero mean and a spread of scales, as after a convolution.
    x = torch.randn(shape, generator=g, dtype=torch.float64) * torch.rand(shape[:-1] + (1, ), generator=g,
                                                                          dtype=torch.float64).add(0.2) * 3
    x = x + torch.randn(shape[:-1] + (1, ), generator=g, dtype=torch.float64)
    w = torch.randn(c, generator=g, dtype=torch.float64).mul(0.5).add(1)
    b = torch.randn(c, generator=g, dtype=torch.float64).mul(0.5)
    if offset:
        # Same values, but the data pointer is `offset` elements past an aligned allocation.
        buf = torch.empty(x.numel() + offset, dtype=dtype, device=device)
        xd = buf[offset:].view(shape)
        xd.copy_(x)
    else:
        xd = x.to(device, dtype)
    return xd, w.to(device, torch.float32), b.to(device, torch.float32)


def _oracle(x, w, b, gelu, grad_out):
    """Float64 values and gradients of F.layer_norm (+ F.gelu) on the same (rounded) inputs."""
    x64 = x.detach().double().cpu().requires_grad_()
    w64 = w.detach().double().cpu().requires_grad_()
    b64 = b.detach().double().cpu().requires_grad_()
    y = F.layer_norm(x64, x64.shape[-1:], w64, b64, 1e-6)
    if gelu:
        y = F.gelu(y)
    grads = torch.autograd.grad(y, (x64, w64, b64), grad_out.double().cpu())
    return (y.detach(), ) + grads


def _run(x, w, b, gelu, out_dtype, grad_out):
    x = x.detach().requires_grad_()
    w = w.detach().requires_grad_()
    b = b.detach().requires_grad_()
    y = layer_norm_last(x, w, b, 1e-6, gelu, out_dtype)
    y.backward(grad_out)
    return y.detach(), x.grad, w.grad, b.grad


@pytest.mark.parametrize('device', DEVICES)
@pytest.mark.parametrize('in_dtype,out_dtype', PAIRS)
@pytest.mark.parametrize('channels', [8, 64, 96, 100, 768, 1536])
@pytest.mark.parametrize('gelu', [False, True])
def test_matches_float64_oracle(device, in_dtype, out_dtype, channels, gelu):
    shape = (3, 7, 5, channels) if device == 'cuda' else (2, 3, channels)
    x, w, b = _make(shape, in_dtype, device, seed=channels)
    grad_out = torch.randn(shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    grad_out = grad_out.to(device, out_dtype)
    y, gx, gw, gb = _run(x, w, b, gelu, out_dtype, grad_out)
    assert y.dtype == out_dtype and gx.dtype == in_dtype and gw.dtype == gb.dtype == torch.float32
    assert y.shape == shape and gx.shape == shape
    expected = _oracle(x, w, b, gelu, grad_out)
    tol = _tolerance(in_dtype, out_dtype)
    for name, got, want in zip(('y', 'dx', 'dw', 'db'), (y, gx, gw, gb), expected):
        # The float32 parameters get float32 gradients.
        assert rel_err(got, want) < (tol if name in ('y', 'dx') else max(tol, RTOL[torch.float32])), name


@pytest.mark.parametrize('device', DEVICES)
def test_gradcheck_float64(device):
    x, w, b = _make((2, 3, 16), torch.float64, device, seed=3)
    w, b = w.double(), b.double()
    for gelu in (False, True):
        assert torch.autograd.gradcheck(lambda x, w, b, gelu=gelu: layer_norm_last(x, w, b, 1e-6, gelu),
                                        (x.requires_grad_(), w.requires_grad_(), b.requires_grad_()))


@pytest.mark.parametrize('device', DEVICES)
def test_non_contiguous_and_empty_input(device):
    x, w, b = _make((4, 6, 32), torch.float32, device, seed=5)
    xt = x.transpose(0, 1)  # (6, 4, 32), rows not contiguous
    y = layer_norm_last(xt, w, b)
    torch.testing.assert_close(y, F.layer_norm(xt, (32, ), w, b, 1e-6), atol=1e-5, rtol=1e-5)
    assert y.is_contiguous()
    empty = torch.empty(0, 32, device=device, requires_grad=True)
    wg = w.detach().requires_grad_()
    out = layer_norm_last(empty, wg, b)
    assert out.shape == (0, 32)
    out.sum().backward()
    assert torch.equal(wg.grad, torch.zeros_like(w))


@pytest.mark.parametrize('device', DEVICES)
def test_output_dtype_follows_autocast(device):
    """Default: float32 under autocast (CUDA autocast's rule for layer_norm, on every device); the
    autocast dtype on request."""
    x, w, b = _make((2, 5, 16), torch.bfloat16, device)
    assert layer_norm_last(x, w, b).dtype == torch.bfloat16
    with torch.autocast(device, dtype=torch.bfloat16):
        y32 = layer_norm_last(x, w, b)
        assert autocast_output_dtype(x) == torch.bfloat16
        assert autocast_output_dtype(x.double()) == torch.float64  # autocast never casts float64
        y16 = layer_norm_last(x, w, b, out_dtype=autocast_output_dtype(x))
        if device == 'cuda':
            assert F.layer_norm(x, (16, ), w, b, 1e-6).dtype == torch.float32
    ref = F.layer_norm(x.float(), (16, ), w, b, 1e-6)
    assert y32.dtype == torch.float32 and y16.dtype == torch.bfloat16
    torch.testing.assert_close(y32, ref, atol=1e-5, rtol=1e-5)
    # The bf16 output holds the values a Linear would get from its own cast of the float32 output.
    torch.testing.assert_close(y16, ref.to(torch.bfloat16), atol=0, rtol=2**-7)
    assert autocast_output_dtype(x.float()) == torch.float32  # outside autocast: the input's dtype


@pytest.mark.parametrize('device', DEVICES)
def test_bad_arguments(device):
    x, w, b = _make((2, 5, 16), torch.float32, device)
    with pytest.raises(RuntimeError, match=r'weight and bias must have shape \(C,\) = \(16,\)'):
        layer_norm_last(x, w[:8], b)
    with pytest.raises(RuntimeError, match='unsupported dtypes'):
        layer_norm_last(x.bfloat16(), w, b, out_dtype=torch.float16)
    with pytest.raises(RuntimeError, match='unsupported dtypes'):
        layer_norm_last(x.int(), w, b)
    with pytest.raises(RuntimeError, match='eps'):
        layer_norm_last(x, w, b, eps=float('nan'))


class _Ops(TorchDispatchMode):
    """The names of the ops dispatched below autograd."""

    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize('device', DEVICES)
def test_backward_is_one_op(device):
    """Backward runs the backward op alone: mean and rstd take no gradient, so no zero-filled
    gradients are made for them (two tensors and fills per call)."""
    x, w, b = _make((2, 5, 16), torch.float32, device, seed=4)
    y = layer_norm_last(x.requires_grad_(), w.requires_grad_(), b.requires_grad_(), 1e-6, True)
    grad = torch.randn_like(y)
    ops = _Ops()
    with ops:
        grads = torch.autograd.grad(y, (x, w, b), grad)
    assert [n for n in ops.names if not n.startswith(('detach', 'view', 'alias'))] == ['layer_norm_last_backward']
    assert all(g is not None for g in grads)


@pytest.mark.parametrize('device', DEVICES)
def test_opcheck(device):
    x, w, b = _make((3, 4, 24), torch.float32, device, seed=2)
    for gelu in (False, True):
        torch.library.opcheck(torch.ops.mmo1d.layer_norm_last.default,
                              (x.requires_grad_(), w.requires_grad_(), b.requires_grad_(), 1e-6, gelu, torch.float32))
