"""``torch.ops.mmo1d.gelu_and_grad(pre, grad, bias)``: the GELU of ``pre + bias``, its gradient and the
bias's gradient in one pass, for ``oriented_dwconv1d_gelu``.

Oracles: ATen's own ``F.gelu`` and ``aten.gelu_backward`` (exact GELU), bit for bit: without a bias on
``pre`` itself, with one on the float32 sum ``pre + bias`` rounded to ``pre``'s dtype (the CUDA kernels
compute each element as ATen's kernels do; the CPU runs them). The bias's gradient against the float64
sum of the returned ``dpre``: within the float32 bound of its additions on random values, and exactly
where every partial sum is a whole number that float32 holds (any order of additions gives it, so a
missed or repeated row shows). Every dtype the kernels take, both layouts, the models' channel counts
(several column chunks above 4096 16-bit channels), vector and element-wise packs and inputs outside
the kernels' domain (other strides, float64, channels not a multiple of the 16-byte pack).
"""
import pytest
import torch
import torch.nn.functional as F

import mmo1d.ops  # noqa: F401  (loads the op library)

from .utils import DEVICES

FORMATS = {'nchw': torch.contiguous_format, 'channels_last': torch.channels_last}
_op = torch.ops.mmo1d.gelu_and_grad


def _expected(pre, grad, bias=None):
    if bias is None:
        return F.gelu(pre), torch.ops.aten.gelu_backward(grad, pre)
    opmath = torch.float64 if pre.dtype == torch.float64 else torch.float32
    x = pre.to(opmath) + bias.to(opmath).view(1, -1, 1, 1)
    return F.gelu(x).to(pre.dtype), torch.ops.aten.gelu_backward(grad.to(opmath), x).to(pre.dtype)


def _inputs(shape, dtype, device, fmt, seed=0):
    g = torch.Generator().manual_seed(seed)
    # Values over GELU's whole range: its tails, its bend near 0, and exact zeros.
    pre = torch.randn(shape, generator=g, dtype=torch.float64) * 3
    pre.view(-1)[::17] = 0
    grad = torch.randn(shape, generator=g, dtype=torch.float64)
    return tuple(t.to(device=device, dtype=dtype).contiguous(memory_format=FORMATS[fmt]) for t in (pre, grad))


def _bias(c, dtype, device, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(c, generator=g, dtype=torch.float64).to(device=device, dtype=dtype)


def _assert_bitwise(got, want):
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape and g.stride() == w.stride()
        assert torch.equal(g, w)


def _assert_bias_grad(dbias, dpre, bias):
    """dbias against the float64 sum of dpre: float32 additions, at most one per row deep."""
    assert dbias.dtype == bias.dtype and dbias.shape == bias.shape
    d = dpre.double().cpu()
    want = d.sum((0, 2, 3))
    rows = d.numel() // d.shape[1]
    bound = rows * 2.0**-24 * d.abs().sum((0, 2, 3)) + 2.0**-126
    if bias.dtype != torch.float32:  # then rounded once more
        bound = bound + want.abs() * torch.finfo(bias.dtype).eps
    assert ((dbias.double().cpu() - want).abs() <= bound).all()


@pytest.mark.parametrize('device', DEVICES)
@pytest.mark.parametrize('dtype', [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize('fmt', ['nchw', 'channels_last'])
@pytest.mark.parametrize('shape', [(2, 64, 14, 14), (3, 40, 9, 7), (1, 3, 5, 3)])
def test_equals_atens_gelu_and_its_gradient(device, dtype, fmt, shape):
    pre, grad = _inputs(shape, dtype, device, fmt, seed=shape[1])
    h, dpre, dbias = _op(pre, grad)
    _assert_bitwise((h, dpre), _expected(pre, grad))
    assert dbias.numel() == 0


@pytest.mark.parametrize('device', DEVICES)
@pytest.mark.parametrize('dtype', [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize('bias_dtype', ['float32', 'same'])
@pytest.mark.parametrize('shape,fmt', [
    ((2, 384, 14, 14), 'channels_last'),  # the kernel: one column chunk of 48 (16-bit) packs
    ((3, 40, 9, 7), 'channels_last'),  # 5 (16-bit) or 10 (float32) packs, odd plane
    ((2, 4096, 3, 2), 'channels_last'),  # one column chunk of 512 16-bit packs (two in float32)
    ((1, 6144, 2, 3), 'channels_last'),  # two (16-bit) or three (float32)
    ((1, 8200, 1, 3), 'channels_last'),  # three of 342 16-bit packs, the last with an idle thread
    ((2, 64, 14, 14), 'nchw'),  # ATen's ops: another memory order
    ((2, 36, 5, 5), 'channels_last'),  # ATen's ops (16-bit): channels not a multiple of the pack
])
def test_with_a_bias_equals_atens_ops_on_the_float32_sum(device, dtype, bias_dtype, shape, fmt):
    pre, grad = _inputs(shape, dtype, device, fmt, seed=shape[1] + 1)
    bias = _bias(shape[1], torch.float32 if bias_dtype == 'float32' else dtype, device, seed=shape[1])
    h, dpre, dbias = _op(pre, grad, bias)
    _assert_bitwise((h, dpre), _expected(pre, grad, bias))
    _assert_bias_grad(dbias, dpre, bias)
    # Without a gradient: the GELU output alone.
    h2, dpre2, dbias2 = _op(pre, None, bias)
    _assert_bitwise((h2, ), (h, ))
    assert dpre2.numel() == dbias2.numel() == 0
    # The same sums again: a fixed order.
    assert torch.equal(_op(pre, grad, bias)[2], dbias)


@pytest.mark.parametrize('device', DEVICES)
@pytest.mark.parametrize('dtype', [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize('shape', [(8, 384, 28, 28), (64, 3072, 7, 7), (4, 96, 3, 3)])
def test_bias_gradient_sums_every_row_once(device, dtype, shape):
    # pre + bias >= 8, where GELU's gradient in float32 is exactly 1, and whole-number gradients:
    # dpre == grad, and every partial sum is exact in float32.
    if device == 'cpu' and shape[0] * shape[2] * shape[3] > 10000:
        pytest.skip('the CPU runs ATen composites: its large cases add nothing')
    g = torch.Generator().manual_seed(shape[1])
    pre = (8 + torch.rand(shape, generator=g) * 4).to(device=device, dtype=dtype)
    pre = pre.contiguous(memory_format=torch.channels_last)
    grad = torch.randint(-8, 9, shape, generator=g).to(device=device, dtype=dtype)
    grad = grad.contiguous(memory_format=torch.channels_last)
    bias = torch.rand(shape[1], generator=g).to(device)
    h, dpre, dbias = _op(pre, grad, bias)
    assert torch.equal(dpre, grad)
    assert torch.equal(dbias.double().cpu(), grad.double().cpu().sum((0, 2, 3)))


@pytest.mark.parametrize('device', DEVICES)
def test_off_the_vector_alignment_and_outside_the_domain(device):
    # A view one element into its storage (element-wise packs; with a bias, ATen's ops), grad in
    # another memory order than pre, and float64: the composite of ATen's kernels.
    base, grad = _inputs((2 * 16 * 6 * 6 + 1, ), torch.float16, device, 'nchw', seed=3)
    pre = base[1:].view(2, 16, 6, 6)
    grad = grad[1:].view(2, 16, 6, 6).clone()
    _assert_bitwise(_op(pre, grad)[:2], _expected(pre, grad))
    pre_cl = base[1:].view(2, 6, 6, 16).permute(0, 3, 1, 2)
    grad_cl = grad.contiguous(memory_format=torch.channels_last)
    bias = _bias(16, torch.float32, device)
    got = _op(pre_cl, grad_cl, bias)
    _assert_bitwise(got[:2], _expected(pre_cl, grad_cl, bias))
    _assert_bias_grad(got[2], got[1], bias)
    # A bias one float into its storage: the kernels' packs of the bias take a copy.
    pre_cl, grad_cl = _inputs((2, 16, 6, 5), torch.bfloat16, device, 'channels_last', seed=6)
    bias = _bias(17, torch.float32, device)[1:]
    got = _op(pre_cl, grad_cl, bias)
    _assert_bitwise(got[:2], _expected(pre_cl, grad_cl, bias))
    _assert_bias_grad(got[2], got[1], bias)
    _assert_bitwise(_op(pre_cl, None, bias)[:1], got[:1])
    pre, grad = _inputs((2, 16, 6, 5), torch.bfloat16, device, 'nchw', seed=4)
    grad = grad.contiguous(memory_format=torch.channels_last)
    _assert_bitwise(_op(pre, grad)[:2], _expected(pre, grad))
    pre, grad = _inputs((2, 8, 5, 5), torch.float64, device, 'channels_last', seed=5)
    _assert_bitwise(_op(pre, grad)[:2], _expected(pre, grad))
    bias = _bias(8, torch.float64, device)
    got = _op(pre, grad, bias)
    _assert_bitwise(got[:2], _expected(pre, grad, bias))
    assert torch.allclose(got[2], got[1].sum((0, 2, 3)), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize('device', DEVICES)
def test_bad_arguments(device):
    pre, grad = _inputs((2, 16, 4, 4), torch.float32, device, 'channels_last')
    with pytest.raises(RuntimeError, match=r'gelu_and_grad: bias must be a floating-point \(C,\) tensor'):
        _op(pre, grad, torch.zeros(15, device=device))
    with pytest.raises(RuntimeError, match="gelu_and_grad: grad must have pre's shape"):
        _op(pre, grad[:1], None)


def test_empty_and_fake():
    pre = torch.empty(0, 8, 3, 3)
    h, dpre, _ = _op(pre, pre)
    assert h.shape == dpre.shape == pre.shape
    h, dpre, dbias = _op(pre, pre, torch.ones(8))
    assert h.shape == dpre.shape == pre.shape and torch.equal(dbias, torch.zeros(8))
    with torch._subclasses.fake_tensor.FakeTensorMode():
        pre = torch.empty(2, 8, 5, 5).contiguous(memory_format=torch.channels_last)
        h, dpre, _ = _op(pre, pre)
        assert h.shape == pre.shape and h.is_contiguous(memory_format=torch.channels_last)
        h, dpre, dbias = _op(pre.half(), pre.half(), torch.ones(8))
        assert dbias.shape == (8, ) and dbias.dtype == torch.float32 and h.dtype == torch.float16
