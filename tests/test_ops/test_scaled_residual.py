"""``scaled_residual``: the blocks' ``shortcut + (branch + bias) * scale``.

Oracle: the same sum in float64, rounded once to the output dtype (the CUDA kernel computes
fmaf(branch, scale, shortcut) in float32 and rounds the result: within one unit in the last place of
the output dtype), and ``torch.addcmul`` under autograd for the dtypes, layouts and the CPU, whose
kernel it is. Every dtype mix the blocks make (a float32 residual stream and a float16 or bfloat16
branch under AMP), both layouts, the three scale shapes, vector and element-wise kernels (channels
not a multiple of 4, a pointer off the vector alignment) and inputs outside the kernel's domain.
"""
import pytest
import torch

from mmo1d.ops import scaled_residual

from .utils import DEVICES


def _leaves(*tensors):
    return [t.detach().clone().requires_grad_() for t in tensors]


def _addcmul(shortcut, branch, scale):
    with torch.autocast(shortcut.device.type, enabled=False):
        return torch.addcmul(shortcut, branch, scale)


def _assert_within_one_ulp(got, exact):
    """|got - exact| <= 1 ulp of got's dtype at |exact| (and the dtype's smallest normal near 0)."""
    info = torch.finfo(got.dtype)
    bound = info.eps * exact.abs() + info.tiny
    err = (got.double() - exact).abs()
    assert bool((err <= bound).all()), f'max error {err.max().item():.3g} beyond one ulp of {got.dtype}'


def _make(device, shape, shortcut_dtype, branch_dtype, scale_shape, layout, seed=0):
    g = torch.Generator().manual_seed(seed)
    fmt = torch.channels_last if layout == 'channels_last' else torch.contiguous_format
    shortcut = torch.randn(shape, generator=g).to(device=device, dtype=shortcut_dtype).contiguous(memory_format=fmt)
    branch = torch.randn(shape, generator=g).to(device=device, dtype=branch_dtype).contiguous(memory_format=fmt)
    scale = torch.rand(scale_shape, generator=g).to(device)
    grad = torch.randn(shape, generator=g).to(device).contiguous(memory_format=fmt)
    return shortcut, branch, scale, grad


CASES = [
    # (shape, shortcut dtype, branch dtype, scale shape, layout): the AMP residual stream with and
    # without drop path, the first block's (both in the autocast dtype), float32; channels a multiple
    # of 4 (vector accesses) and not, planes of a multiple of 4 pixels (NCHW vectors) and not.
    ((2, 16, 9, 11), torch.float32, torch.float16, (2, 16, 1, 1), 'channels_last'),
    ((2, 16, 9, 11), torch.float32, torch.bfloat16, (16, 1, 1), 'channels_last'),
    ((2, 16, 9, 11), torch.bfloat16, torch.bfloat16, (16, 1, 1), 'channels_last'),
    ((2, 16, 9, 11), torch.float16, torch.float16, (1, 16, 1, 1), 'nchw'),
    ((3, 20, 8, 6), torch.float32, torch.float32, (3, 20, 1, 1), 'nchw'),
    ((2, 18, 7, 5), torch.float32, torch.bfloat16, (2, 18, 1, 1), 'channels_last'),
    ((2, 18, 7, 5), torch.float32, torch.float16, (18, 1, 1), 'nchw'),
    # More channels than a block's threads take in one row (each thread several packs), with and
    # without vector accesses, and more than the one-pass backward takes (4096).
    ((2, 2048, 2, 3), torch.float32, torch.bfloat16, (2, 2048, 1, 1), 'channels_last'),
    ((2, 1030, 3, 3), torch.float32, torch.float16, (1030, 1, 1), 'channels_last'),
    ((1, 4104, 2, 2), torch.float32, torch.bfloat16, (4104, 1, 1), 'channels_last'),
]


@pytest.mark.parametrize('device', DEVICES)
@pytest.mark.parametrize('shape,shortcut_dtype,branch_dtype,scale_shape,layout', CASES)
def test_values_and_gradients(device, shape, shortcut_dtype, branch_dtype, scale_shape, layout):
    shortcut, branch, scale, grad = _make(device, shape, shortcut_dtype, branch_dtype, scale_shape, layout)
    got_in = _leaves(shortcut, branch, scale)
    out = scaled_residual(*got_in)
    out.backward(grad)
    want_in = _leaves(shortcut, branch, scale)
    want = _addcmul(*want_in)
    want.backward(grad)
    # What addcmul gives: dtype, layout, shapes and dtypes of the gradients.
    assert out.dtype == want.dtype and out.shape == want.shape and out.stride() == want.stride()
    for a, b in zip(got_in, want_in):
        assert a.grad.dtype == b.grad.dtype and a.grad.shape == b.grad.shape
    assert got_in[1].grad.stride() == want_in[1].grad.stride()
    # Values: the float64 sum, rounded once (the CPU: addcmul's own kernel, bit for bit).
    s64, b64, c64, g64 = (t.double() for t in (shortcut, branch, scale, grad))
    _assert_within_one_ulp(out, s64 + b64 * c64)
    _assert_within_one_ulp(got_in[1].grad, g64 * c64)
    assert torch.equal(got_in[0].grad, want_in[0].grad)
    # The scale's gradient: float32 sums of the products, within n u sum|terms| of the float64 sum.
    terms = (g64 * b64).sum_to_size(scale.shape), (g64 * b64).abs().sum_to_size(scale.shape)
    count = g64.numel() // scale.numel()
    err = (got_in[2].grad.double() - terms[0]).abs()
    assert bool((err <= count * 2.0**-24 * terms[1] + 1e-30).all())
    if device == 'cpu':
        assert torch.equal(out, want) and torch.equal(got_in[1].grad, want_in[1].grad)


@pytest.mark.parametrize('device', DEVICES)
@pytest.mark.parametrize('bias_dtype', ['float32', 'branch'])
@pytest.mark.parametrize('shape,shortcut_dtype,branch_dtype,scale_shape,layout', CASES)
def test_with_a_bias(device, shape, shortcut_dtype, branch_dtype, scale_shape, layout, bias_dtype):
    # The blocks' pw2 bias (float32, per channel) added to the branch in float32: values against the
    # float64 sum with the branch + bias term as float32 makes it, rounded once; the bias's gradient,
    # the sum of grad * scale, within n u sum|terms|; the others as without a bias (addcmul on the
    # biased branch under autograd: dtypes, shapes, and on the CPU bit for bit).
    shortcut, branch, scale, grad = _make(device, shape, shortcut_dtype, branch_dtype, scale_shape, layout, seed=4)
    bias = torch.randn(shape[1], generator=torch.Generator().manual_seed(5)).to(device)
    if bias_dtype == 'branch':  # e.g. a model cast to half precision
        bias = bias.to(branch_dtype)
    got_in = _leaves(shortcut, branch, scale, bias)
    out = scaled_residual(*got_in)
    out.backward(grad.to(out.dtype))
    want_in = _leaves(shortcut, branch, scale, bias)
    out_dtype = torch.promote_types(torch.promote_types(shortcut.dtype, branch.dtype),
                                    torch.promote_types(scale.dtype, bias.dtype))
    term = want_in[1].float() + want_in[3].float().view(1, -1, 1, 1)
    want = _addcmul(want_in[0], term, want_in[2]).to(out_dtype)
    want.backward(grad.to(out.dtype))
    assert out.dtype == want.dtype and out.shape == want.shape and out.stride() == want.stride()
    for a, b in zip(got_in, want_in):
        assert a.grad.dtype == b.grad.dtype and a.grad.shape == b.grad.shape
    term64 = (branch.float() + bias.float().view(1, -1, 1, 1)).double()  # float32's own sum, as the kernel's
    s64, c64, g64 = (t.double() for t in (shortcut, scale, grad.to(out.dtype)))
    _assert_within_one_ulp(out, s64 + term64 * c64)
    _assert_within_one_ulp(got_in[1].grad, g64 * c64)
    assert torch.equal(got_in[0].grad, want_in[0].grad)
    count = g64.numel() // shape[1]
    for grad_got, products, shape_to in [(got_in[2].grad, g64 * term64, scale.shape),
                                         (got_in[3].grad, g64 * c64, (1, shape[1], 1, 1))]:
        exact = products.sum_to_size(shape_to).reshape(grad_got.shape)
        bound = count * 2.0**-24 * products.abs().sum_to_size(shape_to).reshape(grad_got.shape) + 1e-30
        if grad_got.dtype != torch.float32:  # then rounded once more
            bound = bound + exact.abs() * torch.finfo(grad_got.dtype).eps
        assert bool(((grad_got.double() - exact).abs() <= bound).all())
    if device == 'cpu':
        assert torch.equal(out, want) and torch.equal(got_in[3].grad, want_in[3].grad)
    with pytest.raises(RuntimeError, match=r'scaled_residual: bias must be a floating-point \(C,\) tensor'):
        scaled_residual(shortcut, branch, scale, bias[:-1])


@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA GPU')
def test_cuda_at_the_models_shapes_and_off_the_vector_alignment():
    # ConvNeXt-T's first and last stages at batch 64 (fp32 stream, bf16 branch, drop path), and a
    # view one element into its storage (element-wise kernel).
    for shape in [(64, 96, 56, 56), (64, 768, 7, 7), (3, 384, 33, 47)]:
        shortcut, branch, scale, _ = _make('cuda', shape, torch.float32, torch.bfloat16, (shape[0], shape[1], 1, 1),
                                           'channels_last', seed=1)
        _assert_within_one_ulp(scaled_residual(shortcut, branch, scale),
                               shortcut.double() + branch.double() * scale.double())
    base = torch.randn(2 * 16 * 5 * 5 + 1, device='cuda')
    shortcut = base[1:].view(2, 16, 5, 5)
    branch = torch.randn(2, 16, 5, 5, device='cuda', dtype=torch.float16)
    scale = torch.rand(16, 1, 1, device='cuda')
    _assert_within_one_ulp(scaled_residual(shortcut, branch, scale),
                           shortcut.double() + branch.double() * scale.double())


@pytest.mark.parametrize('device', DEVICES)
def test_outside_the_kernel_domain_it_is_addcmul(device):
    # A broadcast branch, mixed layouts, a scale over the pixels.
    g = torch.Generator().manual_seed(2)
    shortcut = torch.randn(2, 8, 5, 6, generator=g).to(device)
    cases = [(torch.randn(2, 8, 5, 1, generator=g).to(device), torch.rand(8, 1, 1, generator=g).to(device)),
             (torch.randn(2, 8, 5, 6, generator=g).to(device).contiguous(memory_format=torch.channels_last),
              torch.rand(8, 1, 1, generator=g).to(device)),
             (torch.randn(2, 8, 5, 6, generator=g).to(device), torch.rand(8, 5, 6, generator=g).to(device))]
    for branch, scale in cases:
        assert torch.equal(scaled_residual(shortcut, branch, scale), torch.addcmul(shortcut, branch, scale))


@pytest.mark.parametrize('device', DEVICES)
def test_autocast_does_not_cast_it(device):
    dtype = torch.float16 if device == 'cuda' else torch.bfloat16
    shortcut = torch.randn(2, 8, 5, 5, device=device)
    branch = torch.randn(2, 8, 5, 5, device=device).to(dtype)
    scale = torch.rand(8, 1, 1, device=device)
    with torch.autocast(device, dtype=dtype):
        out = scaled_residual(shortcut, branch, scale)
    assert out.dtype == torch.float32
    _assert_within_one_ulp(out, shortcut.double() + branch.double() * scale.double())


def test_higher_order_gradients_and_inference_mode():
    g = torch.Generator().manual_seed(0)
    args = [torch.randn(2, 3, 4, 5, generator=g, dtype=torch.float64, requires_grad=True),
            torch.randn(2, 3, 4, 5, generator=g, dtype=torch.float64, requires_grad=True),
            torch.rand(2, 3, 1, 1, generator=g, dtype=torch.float64, requires_grad=True)]
    assert torch.autograd.gradcheck(scaled_residual, args)
    assert torch.autograd.gradgradcheck(scaled_residual, args)
    with_bias = args + [torch.randn(3, generator=g, dtype=torch.float64, requires_grad=True)]
    assert torch.autograd.gradcheck(scaled_residual, with_bias)
    assert torch.autograd.gradgradcheck(scaled_residual, with_bias)
    with torch.inference_mode():
        plain = [a.detach().clone() for a in args]
        assert torch.equal(scaled_residual(*plain), torch.addcmul(*plain))


@pytest.mark.parametrize('device', DEVICES)
def test_opcheck(device):
    shortcut = torch.randn(2, 4, 3, 5, device=device, requires_grad=True)
    branch = torch.randn(2, 4, 3, 5, device=device, requires_grad=True)
    scale = torch.rand(2, 4, 1, 1, device=device, requires_grad=True)
    torch.library.opcheck(torch.ops.mmo1d.scaled_residual.default, (shortcut, branch, scale))
    bias = torch.randn(4, device=device, requires_grad=True)
    torch.library.opcheck(torch.ops.mmo1d.scaled_residual.default, (shortcut, branch.half(), scale, bias))
