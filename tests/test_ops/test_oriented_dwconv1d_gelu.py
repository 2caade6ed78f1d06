"""``oriented_dwconv1d_gelu``: the op on ``gelu(pre)`` keeping ``pre`` for backward.

Its output and every gradient must be those of the two calls it replaces, ``F.gelu`` then
``oriented_dwconv1d`` under autograd, bit for bit (the same kernels in the same order), and those
of the float64 reference within the dtype's tolerance; it must keep ``pre`` and not its GELU.
"""
import pytest
import torch
import torch.nn.functional as F

from mmo1d.ops import oriented_dwconv1d, oriented_dwconv1d_gelu, oriented_dwconv1d_reference

from .utils import DEVICES, RTOL, make_inputs, rel_err

FORMATS = {'nchw': torch.contiguous_format, 'channels_last': torch.channels_last}


def _leaves(pre, weight, theta, bias, learn_theta):
    return (pre.detach().clone().requires_grad_(), weight.detach().clone().requires_grad_(),
            theta.detach().clone().requires_grad_(learn_theta), bias.detach().clone().requires_grad_())


def _run(fn, leaves, grad, **kwargs):
    pre, weight, theta, bias = leaves
    out = fn(pre, weight, theta, bias, **kwargs)
    out.backward(grad)
    return [out.detach()] + [t.grad for t in leaves if t.requires_grad]


def _composition(pre, weight, theta, bias, **kwargs):
    return oriented_dwconv1d(F.gelu(pre), weight, theta, bias, **kwargs)


CASES = [
    # (n, c, h, w, k, stride, rounding, residual, layout)
    (2, 16, 13, 17, 7, 1, 'trunc', True, 'channels_last'),
    (2, 16, 13, 17, 7, 1, 'trunc', False, 'nchw'),
    (1, 24, 20, 15, 31, 1, 'trunc', True, 'nchw'),
    (2, 8, 11, 9, 5, 2, 'trunc', False, 'channels_last'),
    (2, 16, 12, 12, 7, 1, 'bilinear', True, 'channels_last'),
    (1, 8, 9, 10, 5, 1, 'gaussian', False, 'nchw'),
]


@pytest.mark.parametrize('device', DEVICES)
@pytest.mark.parametrize('dtype', [torch.float32, torch.float64])
@pytest.mark.parametrize('n,c,h,w,k,stride,rounding,residual,layout', CASES)
def test_equals_gelu_then_op_bitwise(device, dtype, n, c, h, w, k, stride, rounding, residual, layout):
    x, weight, theta, bias = make_inputs(n, c, h, w, k, dtype=dtype, device=device, seed=k + c)
    pre = x.contiguous(memory_format=FORMATS[layout])
    g = torch.Generator().manual_seed(7)
    grad = torch.randn(n, c, -(-h // stride), -(-w // stride), generator=g, dtype=torch.float64)
    grad = grad.to(device=device, dtype=dtype).contiguous(memory_format=FORMATS[layout])
    learn = rounding != 'trunc'
    kwargs = dict(stride=stride, rounding=rounding, residual=residual)
    fused = _run(oriented_dwconv1d_gelu, _leaves(pre, weight, theta, bias, learn), grad, **kwargs)
    expected = _run(_composition, _leaves(pre, weight, theta, bias, learn), grad, **kwargs)
    assert len(fused) == len(expected) == (5 if learn else 4)
    for got, want in zip(fused, expected):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert torch.equal(got, want)
    assert fused[0].is_contiguous(memory_format=FORMATS[layout])
    if rounding == 'trunc':
        # And the float64 reference's (the reference op on F.gelu's float64 values).
        ref = oriented_dwconv1d_reference(F.gelu(pre.double().cpu()), weight.double().cpu(), theta.cpu(),
                                          bias.double().cpu(), stride=stride, residual=residual)
        assert rel_err(fused[0], ref) < RTOL[dtype]


def test_keeps_pre_not_its_gelu():
    x, weight, theta, bias = make_inputs(2, 16, 10, 12, 7, seed=3)
    pre = x.contiguous(memory_format=torch.channels_last).requires_grad_()
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        out = oriented_dwconv1d_gelu(pre, weight.requires_grad_(), theta, bias, residual=True)
    activations = [t for t in saved if t.shape == pre.shape]
    assert len(activations) == 1 and activations[0].data_ptr() == pre.data_ptr()
    # One node of autograd, whose inputs are the op's leaves.
    assert out.grad_fn is not None and len(out.grad_fn.next_functions) >= 2
    assert all('Gelu' not in type(fn).__name__ for fn, _ in out.grad_fn.next_functions if fn is not None)


@pytest.mark.parametrize('device', DEVICES)
def test_under_autocast_runs_in_the_autocast_dtype(device):
    dtype = torch.bfloat16 if device == 'cpu' else torch.float16
    x, weight, theta, bias = make_inputs(2, 32, 14, 14, 15, device=device, seed=11)
    pre = x.contiguous(memory_format=torch.channels_last)
    grad = torch.randn(2, 32, 14, 14, device=device).contiguous(memory_format=torch.channels_last)
    results = []
    for fn in (oriented_dwconv1d_gelu, _composition):
        leaves = _leaves(pre, weight, theta, bias, False)
        with torch.autocast(device, dtype=dtype):
            # pre as the autocast Linear before it would give it.
            out = fn(leaves[0].to(dtype), *leaves[1:], residual=True)
        out.backward(grad.to(dtype))
        results.append([out.detach()] + [t.grad for t in (leaves[0], leaves[1], leaves[3])])
    assert results[0][0].dtype == dtype
    for got, want in zip(*results):
        assert got.dtype == want.dtype and torch.equal(got, want)


def test_without_autograd_and_in_inference_mode():
    x, weight, theta, bias = make_inputs(1, 8, 9, 9, 5, seed=5)
    expected = oriented_dwconv1d(F.gelu(x), weight, theta, bias)
    with torch.no_grad():
        assert torch.equal(oriented_dwconv1d_gelu(x, weight, theta, bias), expected)
    with torch.inference_mode():
        assert torch.equal(oriented_dwconv1d_gelu(x.clone(), weight.clone(), theta.clone(), bias.clone()), expected)


def test_bad_arguments_name_the_op():
    x, weight, theta, bias = make_inputs(1, 8, 9, 9, 5, seed=5)
    with pytest.raises(ValueError, match='oriented_dwconv1d_gelu: stride must be an int'):
        oriented_dwconv1d_gelu(x, weight, theta, bias, stride=1.0)
    with pytest.raises(ValueError, match=r'oriented_dwconv1d_gelu: a 4-D weight must have shape \(C, 1, 1, K\)'):
        oriented_dwconv1d_gelu(x, weight.view(8, 5, 1, 1), theta, bias)
    with pytest.raises(ValueError, match='oriented_dwconv1d_gelu'):
        oriented_dwconv1d_gelu(x, weight, theta, bias, rounding='nearest')


def _composition_with_pre_bias(pre, weight, theta, bias, pre_bias, **kwargs):
    # GELU on the float32 sum pre + pre_bias (float64 for float64), rounded to pre's dtype.
    opmath = torch.float64 if pre.dtype == torch.float64 else torch.float32
    x = pre.to(opmath) + pre_bias.to(opmath).view(1, -1, 1, 1)
    return oriented_dwconv1d(F.gelu(x).to(pre.dtype), weight, theta, bias, **kwargs)


@pytest.mark.parametrize('device', DEVICES)
@pytest.mark.parametrize('dtype', [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize('layout', ['channels_last', 'nchw'])
@pytest.mark.parametrize('autocast', [False, True])
@pytest.mark.parametrize('rounding', ['trunc', 'bilinear'])
def test_pre_bias_equals_gelu_of_the_sum_then_op(device, dtype, layout, autocast, rounding):
    # The "++" blocks' call: pre from a Linear without its bias, the bias added in the GELU's pass.
    # Output and the gradients of pre, weight and bias bit for bit those of the composition; the
    # pre_bias's gradient the float32 sum of pre's (the composition sums before rounding).
    if autocast and dtype != torch.float32:
        pytest.skip('autocast takes float32 leaves')
    amp_dtype = torch.bfloat16 if device == 'cpu' else torch.float16
    x, weight, theta, bias = make_inputs(2, 32, 11, 13, 15, dtype=dtype, device=device, seed=3)
    pre = x.contiguous(memory_format=FORMATS[layout])
    pre_bias = torch.randn(32, generator=torch.Generator().manual_seed(1)).to(device)
    g = torch.randn(2, 32, 11, 13, generator=torch.Generator().manual_seed(2)).to(device)
    learn = rounding == 'bilinear'  # learned angles: theta's gradient at the GELU output too
    results = []
    for fn in (oriented_dwconv1d_gelu, _composition_with_pre_bias):
        leaves = [t.detach().clone().requires_grad_() for t in (pre, weight, bias, pre_bias)]
        p, w, b, pb = leaves
        th = theta.detach().clone().requires_grad_(learn)
        with torch.autocast(device, dtype=amp_dtype, enabled=autocast):
            p_in = p.to(amp_dtype) if autocast else p  # as the autocast Linear before it would give it
            if fn is oriented_dwconv1d_gelu:
                out = fn(p_in, w, th, b, residual=True, rounding=rounding, pre_bias=pb)
            else:
                out = fn(p_in, w, th, b, pb, residual=True, rounding=rounding)
        out.backward(g.to(out.dtype).contiguous(memory_format=FORMATS[layout]))
        results.append([out.detach(), p.grad, w.grad, b.grad, th.grad, pb.grad])
    results = [[t for t in r if t is not None] for r in results]
    assert len(results[0]) == len(results[1]) == (6 if learn else 5)
    for got, want in zip(results[0][:-1], results[1][:-1]):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert torch.equal(got, want)
    dpb = results[0][-1]
    assert dpb.dtype == torch.float32 and dpb.shape == (32, )
    if not autocast:  # pre.grad is GELU's gradient as rounded: the sum of it over every dim but 1
        d = results[0][1].double().cpu()
        bound = d.numel() // 32 * 2.0**-24 * d.abs().sum((0, 2, 3)) + 1e-30
        assert ((dpb.double().cpu() - d.sum((0, 2, 3))).abs() <= bound).all()
    assert rel_err(dpb, results[1][-1]) < RTOL[dtype if not autocast else amp_dtype]


def test_pre_bias_of_the_wrong_shape_names_the_op():
    x, weight, theta, bias = make_inputs(1, 8, 9, 9, 5, seed=5)
    with pytest.raises(ValueError, match=r'oriented_dwconv1d_gelu: pre_bias must have shape \(C,\) = \(8,\)'):
        oriented_dwconv1d_gelu(x, weight, theta, bias, pre_bias=torch.zeros(9))
