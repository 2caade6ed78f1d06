"""The compiled oriented depthwise 1D convolution against its reference and the spec's facts."""
import math
import warnings

import pytest
import torch
import torch.nn.functional as F

from mmo1d.ops import OrientedDWConv1d, oriented_angles, oriented_dwconv1d, oriented_dwconv1d_reference, tap_offsets

from .utils import DEVICES, RTOL, make_inputs, random_angles, reference_with_grads, rel_err

SHAPES = [(1, 1), (5, 4), (13, 17), (16, 16), (2, 40)]


def run_op(x, weight, theta, bias, grad_out, **kwargs):
    x = x.detach().requires_grad_()
    weight = weight.detach().requires_grad_()
    bias = None if bias is None else bias.detach().requires_grad_()
    out = oriented_dwconv1d(x, weight, theta, bias, **kwargs)
    grads = torch.autograd.grad(out, [t for t in (x, weight, bias) if t is not None], grad_out)
    return out, grads


def check_against_reference(x, weight, theta, bias, dtype, **kwargs):
    out_shape = oriented_dwconv1d_reference(x[:, :, :, :].double().cpu(), weight.double().cpu(), theta.cpu(),
                                            **kwargs).shape
    grad_out = torch.randn(out_shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    out, grads = run_op(x, weight, theta, bias, grad_out.to(x.device, dtype), **kwargs)
    ref, ref_grads = reference_with_grads(x, weight, theta, bias, grad_out, **kwargs)
    assert out.shape == ref.shape and out.dtype == dtype
    assert rel_err(out, ref) < RTOL[dtype]
    for g, rg, name in zip(grads, ref_grads, ('input', 'weight', 'bias')):
        assert g.dtype == dtype
        assert rel_err(g, rg) < RTOL[dtype], f'grad of {name}'


@pytest.mark.parametrize('device', DEVICES)
@pytest.mark.parametrize('k', [1, 3, 7, 15, 31, 63])
@pytest.mark.parametrize('stride', [1, 2, 3])
@pytest.mark.parametrize('rounding', ['trunc', 'floor'])
def test_matches_reference_kernel_sizes(device, k, stride, rounding):
    for i, (h, w) in enumerate(SHAPES):
        x, weight, theta, bias = make_inputs(2, 5, h, w, k, device=device, seed=100 * k + 10 * stride + i)
        check_against_reference(x, weight, theta, bias, torch.float32, stride=stride, rounding=rounding)


@pytest.mark.parametrize('device', DEVICES)
@pytest.mark.parametrize('residual', [False, True])
@pytest.mark.parametrize('bias', [False, True])
@pytest.mark.parametrize('stride', [1, 2])
def test_matches_reference_residual_bias(device, residual, bias, stride):
    x, weight, theta, b = make_inputs(3, 12, 11, 14, 9, device=device, seed=7, bias=bias)
    check_against_reference(x, weight, theta, b, torch.float32, stride=stride, residual=residual)


@pytest.mark.parametrize('device', DEVICES)
@pytest.mark.parametrize('dtype', [torch.float64, torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize('layout', ['nchw', 'channels_last', 'non_contiguous'])
def test_dtypes_and_layouts(device, dtype, layout):
    x, weight, theta, bias = make_inputs(2, 16, 15, 12, 15, dtype=dtype, device=device, seed=3)
    if layout == 'channels_last':
        x = x.contiguous(memory_format=torch.channels_last)
    elif layout == 'non_contiguous':
        x = torch.cat([x, x], dim=3)[:, :, :, ::2]
        assert not x.is_contiguous() and not x.is_contiguous(memory_format=torch.channels_last)
    for stride, residual in ((1, False), (2, True)):
        check_against_reference(x, weight, theta, bias, dtype, stride=stride, residual=residual)
        out = oriented_dwconv1d(x, weight, theta, bias, stride=stride, residual=residual)
        assert out.is_contiguous(memory_format=torch.channels_last if layout == 'channels_last'
                                 else torch.contiguous_format)


@pytest.mark.parametrize('device', DEVICES)
@pytest.mark.parametrize('k', [1, 7, 31])
@pytest.mark.parametrize('stride', [1, 2, 3])
def test_angle_zero_is_horizontal_conv2d(device, k, stride):
    for h, w in [(9, 20), (1, 1), (7, 5)]:
        x, weight, _, bias = make_inputs(2, 6, h, w, k, device=device, seed=k + stride)
        theta = torch.zeros(6, device=device)
        out = oriented_dwconv1d(x, weight, theta, bias, stride=stride)
        ref = F.conv2d(x, weight[:, None, None, :], bias, stride=stride, padding=(0, k // 2), groups=6)
        torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize('device', DEVICES)
@pytest.mark.parametrize('rounding', ['trunc', 'floor'])
def test_angle_90_is_flipped_vertical_conv2d(device, rounding):
    x, weight, _, bias = make_inputs(2, 6, 19, 8, 7, device=device, seed=5)
    theta = torch.full((6,), math.pi / 2, device=device)
    out = oriented_dwconv1d(x, weight, theta, bias, rounding=rounding)
    ref = F.conv2d(x, weight.flip(1)[:, None, :, None], bias, padding=(3, 0), groups=6)
    if rounding == 'trunc':
        torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    else:
        # float32 cos(pi/2) = -4.4e-8 < 0: floor moves the taps with d > 0 one column to the left.
        assert not torch.allclose(out, ref, atol=1e-3)


def distinct_pixels_touched(k: int, angle_deg: float, device: str) -> int:
    """Number of pixels one output reads, counted through the compiled op (a delta image)."""
    size = 2 * k + 1
    x = torch.zeros(1, 1, size, size, device=device)
    x[0, 0, k, k] = 1.0
    out = oriented_dwconv1d(x, torch.ones(1, k, device=device),
                            torch.tensor([math.radians(angle_deg)], device=device))
    return int((out != 0).sum())


@pytest.mark.parametrize('device', DEVICES)
@pytest.mark.parametrize('k,counts', [(31, [31, 29, 21, 29, 31, 29, 21, 29]), (15, [15, 13, 9, 13, 15, 13, 9, 13])])
def test_distinct_tap_counts(device, k, counts):
    angles = [22.5 * i for i in range(8)]
    assert [distinct_pixels_touched(k, a, device) for a in angles] == counts
    dh, dw = tap_offsets(torch.tensor([math.radians(a) for a in angles]), k)
    assert [len(set(zip(h.tolist(), w.tolist()))) for h, w in zip(dh, dw)] == counts


def test_worked_examples_of_the_spec():
    dh, dw = tap_offsets(torch.tensor([math.pi / 4]), 7)
    assert list(zip(dh[0].tolist(), dw[0].tolist())) == [(2, -2), (1, -1), (0, 0), (0, 0), (0, 0), (-1, 1), (-2, 2)]
    dh, dw = tap_offsets(torch.tensor([math.pi / 2]), 5)
    assert list(zip(dh[0].tolist(), dw[0].tolist())) == [(2, 0), (1, 0), (0, 0), (-1, 0), (-2, 0)]
    dh, dw = tap_offsets(torch.tensor([math.pi / 4]), 7, rounding='floor')
    assert list(zip(dh[0].tolist(), dw[0].tolist())) == [(2, -3), (1, -2), (0, -1), (0, 0), (-1, 0), (-2, 1),
                                                         (-3, 2)]


@pytest.mark.parametrize('device', DEVICES)
@pytest.mark.parametrize('stride,rounding,residual', [(1, 'trunc', False), (2, 'floor', True), (3, 'trunc', True)])
def test_gradcheck_float64(device, stride, rounding, residual):
    x, weight, theta, bias = make_inputs(2, 3, 7, 6, 5, dtype=torch.float64, device=device, seed=11)
    inputs = (x.requires_grad_(), weight.requires_grad_(), theta, bias.requires_grad_())
    assert torch.autograd.gradcheck(
        lambda a, b, t, c: oriented_dwconv1d(a, b, t, c, stride=stride, rounding=rounding, residual=residual),
        inputs)


@pytest.mark.parametrize('device', DEVICES)
def test_opcheck(device):
    x, weight, theta, bias = make_inputs(2, 4, 6, 7, 5, device=device, seed=2)
    leaves = (x.requires_grad_(), weight.requires_grad_(), theta, bias.requires_grad_())
    for args in [leaves + (1, 'trunc', 0.5, 1.0, False),
                 (x.contiguous(memory_format=torch.channels_last), weight, theta, None, 2, 'floor', 0.5, 1.0, True)]:
        torch.library.opcheck(torch.ops.mmo1d.oriented_dwconv1d.default, args)
    y = torch.randn(2, 4, 6, 7, device=device)
    torch.library.opcheck(torch.ops.mmo1d.oriented_dwconv1d_backward_input.default,
                          (y, x.detach(), weight.detach(), theta, 1, 'trunc', 0.5, 1.0, True))
    for need_bias in (False, True):
        torch.library.opcheck(torch.ops.mmo1d.oriented_dwconv1d_backward_params.default,
                              (y, x.detach(), weight.detach(), theta, 1, 'trunc', 0.5, 1.0, need_bias, False))


@pytest.mark.parametrize('device', DEVICES)
def test_torch_compile_fullgraph(device):
    torch._dynamo.reset()
    conv = OrientedDWConv1d(8, 7, residual=True).to(device)
    x = torch.randn(2, 8, 10, 9, device=device, requires_grad=True)
    compiled = torch.compile(conv, fullgraph=True, dynamic=False)
    out = compiled(x)
    (gx_c,) = torch.autograd.grad(out.square().sum(), x)
    ref = conv(x)
    (gx,) = torch.autograd.grad(ref.square().sum(), x)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(gx_c, gx)


@pytest.mark.parametrize('device', DEVICES)
def test_autocast(device):
    dtype = torch.bfloat16
    conv = OrientedDWConv1d(8, 15).to(device)
    x = torch.randn(2, 8, 12, 12, device=device, requires_grad=True)
    with torch.autocast(device_type=device, dtype=dtype):
        out = conv(x)
    assert out.dtype == dtype
    ref = oriented_dwconv1d_reference(x.double(), conv.weight.double(), conv.theta, conv.bias.double())
    assert rel_err(out, ref) < RTOL[dtype]
    out.float().sum().backward()
    assert conv.weight.grad.dtype == torch.float32 and x.grad.dtype == torch.float32
    assert conv.theta.dtype == torch.float32


@pytest.mark.parametrize('device', DEVICES)
@pytest.mark.parametrize('rounding', ['trunc', 'bilinear'])
def test_autocast_casts_parameters_inside_the_node(device, rounding):
    """Under autocast the weight and bias reach the op's node without cast nodes between; values and
    gradients are bit for bit those of the op on explicitly cast tensors (autocast's own casts)."""
    dtype = torch.bfloat16 if device == 'cpu' else torch.float16
    x, weight, theta, bias = make_inputs(2, 16, 13, 11, 15, device=device, seed=21)
    grad = torch.randn(2, 16, 13, 11, device=device)
    results = []
    for under_autocast in (True, False):
        leaves = [t.detach().clone().requires_grad_() for t in (x, weight, theta, bias)]
        if under_autocast:
            with torch.autocast(device, dtype=dtype):
                out = oriented_dwconv1d(*leaves, rounding=rounding, residual=True)
            parents = {id(getattr(f, 'variable', None)) for f, _ in out.grad_fn.next_functions if f is not None}
            assert id(leaves[1]) in parents and id(leaves[3]) in parents, 'weight and bias are not cast by nodes'
        else:
            out = oriented_dwconv1d(leaves[0].to(dtype), leaves[1].to(dtype), leaves[2], leaves[3].to(dtype),
                                    rounding=rounding, residual=True)
        out.backward(grad.to(dtype))
        results.append([out.detach()] + [t.grad for t in leaves])
    assert (results[0][3] is None) == (rounding == 'trunc') and (results[1][3] is None) == (rounding == 'trunc')
    for got, want in zip(*results):
        assert (got is None and want is None) or (got.dtype == want.dtype and torch.equal(got, want))
    assert results[0][2].dtype == torch.float32 and results[0][4].dtype == torch.float32


def test_bad_inputs_raise_clear_errors():
    x, weight, theta, bias = make_inputs(2, 4, 6, 6, 5)
    cases = [
        (lambda: oriented_dwconv1d(x[0], weight, theta), RuntimeError,
         'input must be 4-D (N, C, H, W), got 3-D of shape (4, 6, 6)'),
        (lambda: oriented_dwconv1d(x, torch.randn(4, 4), theta), RuntimeError, 'odd'),
        (lambda: oriented_dwconv1d(x, torch.randn(4, 0), theta), RuntimeError, 'odd and positive'),
        (lambda: oriented_dwconv1d(x, torch.randn(3, 5), theta), RuntimeError, 'weight has 3 channels'),
        (lambda: oriented_dwconv1d(x, torch.randn(4, 2, 1, 5), theta), ValueError, '(C, 1, 1, K)'),
        (lambda: oriented_dwconv1d(x, weight, theta[:3]), RuntimeError, 'theta has 3 angles'),
        (lambda: oriented_dwconv1d(x, weight, theta[None]), RuntimeError, 'theta must be 1-D'),
        (lambda: oriented_dwconv1d(x, weight, theta, torch.randn(3)), RuntimeError, 'bias must have shape'),
        (lambda: oriented_dwconv1d(x, weight, theta, stride=0), RuntimeError, 'stride must be >= 1'),
        (lambda: oriented_dwconv1d(x, weight, theta, stride=1.5), ValueError, 'stride must be an int'),
        (lambda: oriented_dwconv1d(x, weight.double(), theta), RuntimeError, 'weight dtype'),
        (lambda: oriented_dwconv1d(x, weight, theta, bias.half()), RuntimeError, 'bias dtype'),
        (lambda: oriented_dwconv1d(x.long(), weight.long(), theta), RuntimeError, 'floating-point'),
        (lambda: oriented_dwconv1d(x, weight, theta.long()), RuntimeError, 'theta must be a floating'),
        (lambda: oriented_dwconv1d(x, weight, theta, rounding='round'), ValueError, 'rounding must be one of'),
        (lambda: OrientedDWConv1d(4, 4), ValueError, 'kernel_size must be odd'),
        (lambda: OrientedDWConv1d(4, 5, rounding='nearest'), ValueError, 'rounding must be one of'),
        (lambda: oriented_angles(4, directions=0), ValueError, 'directions must be >= 1'),
    ]
    for fn, exc, msg in cases:
        with pytest.raises(exc, match=msg.replace('(', r'\(').replace(')', r'\)')):
            fn()


@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA GPU')
def test_mixed_devices_raise():
    x, weight, theta, _ = make_inputs(1, 4, 6, 6, 5)
    with pytest.raises(RuntimeError, match='same device'):
        oriented_dwconv1d(x.cuda(), weight, theta.cuda())
    with pytest.raises(RuntimeError, match='same device'):
        oriented_dwconv1d(x.cuda(), weight.cuda(), theta)


def test_oriented_angles_follow_the_spec():
    c, d = 20, 8
    for offset in (0.0, 0.5):
        theta = oriented_angles(c, d, offset).double()
        for ch in range(c):
            group = (d * (ch + 1) - 1) // c
            assert theta[ch].item() == pytest.approx(math.pi * ((group / d + offset) % 1.0), abs=1e-6)
    theta = oriented_angles(512)
    assert theta.dtype == torch.float32
    assert [theta[64 * i].item() for i in range(8)] == pytest.approx([math.pi * i / 8 for i in range(8)])
    assert (theta.view(8, 64) == theta.view(8, 64)[:, :1]).all(), 'groups must be contiguous'


def test_module_buffers_and_residual_form():
    conv = OrientedDWConv1d(16, 7, directions=4, angle_offset=0.5, residual=True)
    assert conv.weight.shape == (16, 1, 1, 7)
    assert 'theta' in dict(conv.named_buffers()) and 'theta' not in dict(conv.named_parameters())
    assert 'theta' in conv.state_dict()
    torch.testing.assert_close(conv.theta, oriented_angles(16, 4, 0.5))
    x = torch.randn(2, 16, 9, 9)
    plain = oriented_dwconv1d(x, conv.weight, conv.theta, conv.bias)
    torch.testing.assert_close(conv(x), x + plain, rtol=1e-5, atol=1e-5)
    theta = conv.theta.clone()
    conv.to(torch.bfloat16)
    assert conv.weight.dtype == torch.bfloat16 and conv.theta.dtype == torch.float32
    assert torch.equal(conv.theta, theta)


@pytest.mark.parametrize('device', DEVICES)
def test_random_angles_not_on_the_grid(device):
    g = torch.Generator().manual_seed(9)
    theta = random_angles(64, g)
    assert ((theta.double() / (math.pi / 8)).frac() > 1e-3).float().mean() > 0.9
    x = torch.randn(2, 64, 20, 20, generator=g).to(device)
    weight = torch.randn(64, 31, generator=g).to(device)
    out = oriented_dwconv1d(x, weight, theta.to(device))
    ref = oriented_dwconv1d_reference(x.double(), weight.double(), theta.to(device))
    assert rel_err(out, ref) < RTOL[torch.float32]


@pytest.mark.parametrize('device', DEVICES)
@pytest.mark.parametrize('rounding', ['trunc', 'bilinear'])
def test_module_weight_shape_goes_to_the_op_as_it_is(device, rounding):
    """A (C, 1, 1, K) weight (the modules' parameter) reaches the op without a reshape: the same
    output and gradients as its (C, K) view, the weight's gradient in its own shape, and no view
    node in the backward graph."""
    x, weight, theta, bias = make_inputs(2, 5, 9, 8, 7, device=device, seed=4)
    grad_out = torch.randn(2, 5, 9, 8, device=device)
    out2, grads2 = run_op(x, weight, theta, bias, grad_out, rounding=rounding, residual=True)
    out4, grads4 = run_op(x, weight.view(5, 1, 1, 7), theta, bias, grad_out, rounding=rounding, residual=True)
    assert torch.equal(out4, out2)
    assert grads4[1].shape == (5, 1, 1, 7)
    for g4, g2 in zip(grads4, grads2):
        assert torch.equal(g4.reshape(g2.shape), g2)
    w4 = weight.view(5, 1, 1, 7).clone().requires_grad_()
    out = oriented_dwconv1d(x.requires_grad_(), w4, theta, bias.requires_grad_(), rounding=rounding)
    nodes = [type(fn).__name__ for fn, _ in out.grad_fn.next_functions if fn is not None]
    assert nodes.count('AccumulateGrad') == 3 and 'ViewBackward0' not in nodes, nodes
    op = torch.ops.mmo1d.oriented_dwconv1d.default
    torch.library.opcheck(op, (x, w4, theta, bias, 1, rounding, 0.5, 1.0, True))
    torch.library.opcheck(torch.ops.mmo1d.oriented_dwconv1d_backward_params.default,
                          (grad_out, x.detach(), w4.detach(), theta, 1, rounding, 0.5, 1.0, False, False))
    with pytest.raises(RuntimeError, match=r'weight must be \(C, K\) or \(C, 1, 1, K\), got shape \(5, 1, 7\)'):
        op(x, weight.view(5, 1, 7), theta, bias, 1, rounding, 0.5, 1.0, False)


def test_torchscript_onnx_export_traces_without_warnings(tmp_path):
    """The legacy (TorchScript) exporter traces sizes as values: the front must not branch on them."""
    pytest.importorskip('onnx')
    conv = OrientedDWConv1d(4, 5, residual=True)
    with warnings.catch_warnings():
        warnings.simplefilter('error', torch.jit.TracerWarning)
        torch.onnx.export(conv, (torch.randn(1, 4, 8, 9), ), str(tmp_path / 'conv.onnx'), dynamo=False,
                          opset_version=17)
    assert (tmp_path / 'conv.onnx').stat().st_size > 0
