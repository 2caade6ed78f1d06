"""The compiled interpolated op (rounding 'bilinear' / 'gaussian', learnable angles) against the
plain PyTorch reference (itself checked against grid_sample and the formula): outputs and every
gradient, theta's included, on CPU and CUDA, every dtype, both layouts, strides 1-3; gradcheck,
opcheck, torch.compile, autocast, non-finite angles, errors and the module."""
import math

import pytest
import torch
import torch.nn.functional as F

from mmo1d.ops import OrientedDWConv1d, oriented_angles, oriented_dwconv1d
from mmo1d.ops.interp_reference import oriented_dwconv1d_interp_reference as interp_reference

from .utils import DEVICES, RTOL, rel_err

# Bands whose edges no pixel lies on for the angles below (see interp_reference: with an integer
# radius the output pixel sits on the edge of the taps at |d| = radius).
BANDS = [('bilinear', 0.5, 1.0), ('gaussian', 0.6, 1.5), ('gaussian', 1.3, 2.3)]


def _inputs(n, c, h, w, k, seed=0, dtype=torch.float64, device='cpu', angles=None):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, c, h, w, generator=g, dtype=torch.float64)
    weight = torch.randn(c, k, generator=g, dtype=torch.float64) / math.sqrt(k)
    bias = torch.randn(c, generator=g, dtype=torch.float64)
    theta = torch.rand(c, generator=g, dtype=torch.float64) * math.pi if angles is None else angles
    cast = dict(dtype=dtype, device=device)
    return x.to(**cast), weight.to(**cast), theta.to(device), bias.to(**cast)


def _reference(x, weight, theta, bias, stride, rounding, sigma, radius, residual=False, grad=None):
    """Output and gradients (x, w, theta, b) of the reference in float64 on the CPU."""
    leaves = [t.detach().double().cpu().requires_grad_() for t in (x, weight, theta, bias)]
    out = interp_reference(leaves[0], leaves[1], leaves[2], leaves[3], stride, rounding, sigma, radius)
    if residual:
        out = out + leaves[0][:, :, ::stride, ::stride]
    if grad is None:
        return out.detach()
    return out.detach(), torch.autograd.grad(out, leaves, grad.double().cpu())


def _op_with_grads(x, weight, theta, bias, stride, rounding, sigma, radius, residual, grad):
    leaves = [t.detach().clone().requires_grad_() for t in (x, weight, theta, bias)]
    out = oriented_dwconv1d(leaves[0], leaves[1], leaves[2], leaves[3], stride, rounding, residual, sigma, radius)
    return out, torch.autograd.grad(out, leaves, grad)


@pytest.mark.parametrize('device', DEVICES)
@pytest.mark.parametrize('rounding,sigma,radius', BANDS)
@pytest.mark.parametrize('stride,k,layout,residual', [(1, 7, 'nchw', False), (1, 9, 'nhwc', True),
                                                      (2, 5, 'nhwc', False), (3, 7, 'nchw', True),
                                                      (2, 15, 'nchw', False)])
def test_matches_the_reference_with_gradients(device, rounding, sigma, radius, stride, k, layout, residual):
    x, weight, theta, bias = _inputs(2, 12, 13, 11, k, seed=stride + k, device=device)
    theta[4:8] = theta[4]  # a group of channels with one angle, as the models have
    if layout == 'nhwc':
        x = x.contiguous(memory_format=torch.channels_last)
    grad = torch.randn(2, 12, -(-13 // stride), -(-11 // stride), dtype=x.dtype, device=device)
    ref, ref_grads = _reference(x, weight, theta, bias, stride, rounding, sigma, radius, residual, grad)
    out, grads = _op_with_grads(x, weight, theta, bias, stride, rounding, sigma, radius, residual, grad)
    assert out.is_contiguous(memory_format=torch.channels_last) == (layout == 'nhwc')
    assert rel_err(out, ref) < 1e-12
    for name, got, want in zip(('x', 'weight', 'theta', 'bias'), grads, ref_grads):
        assert rel_err(got, want) < 1e-10, name


@pytest.mark.parametrize('device', DEVICES)
@pytest.mark.parametrize('dtype', [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize('layout', ['nchw', 'nhwc'])
@pytest.mark.parametrize('rounding', ['bilinear', 'gaussian'])
def test_dtypes(device, dtype, layout, rounding):
    if device == 'cpu' and dtype != torch.float32 and layout == 'nhwc':
        pytest.skip('the CPU computes half types through float32 copies: one layout covers it')
    x, weight, theta, bias = _inputs(2, 16, 14, 15, 11, seed=3, dtype=dtype, device=device)
    theta = theta.float()
    if layout == 'nhwc':
        x = x.contiguous(memory_format=torch.channels_last)
    grad = torch.randn(2, 16, 14, 15, dtype=dtype, device=device)
    ref, ref_grads = _reference(x, weight, theta, bias, 1, rounding, 0.6, 1.5, grad=grad)
    out, grads = _op_with_grads(x, weight, theta, bias, 1, rounding, 0.6, 1.5, False, grad)
    assert out.dtype == dtype and grads[2].dtype == torch.float32
    # float32 angles: the positions differ from the float64 reference's by float32 rounding.
    tol = max(RTOL[dtype], 1e-5)
    assert rel_err(out, ref) < tol
    for name, got, want in zip(('x', 'weight', 'theta', 'bias'), grads, ref_grads):
        assert rel_err(got, want) < 4 * tol + (1e-4 if name == 'theta' else 0), name


@pytest.mark.parametrize('device', DEVICES)
@pytest.mark.parametrize('rounding', ['bilinear', 'gaussian'])
def test_gradcheck_float64_every_input(device, rounding):
    x, weight, theta, bias = _inputs(1, 3, 6, 7, 5, seed=4, device=device)
    args = [t.clone().requires_grad_() for t in (x, weight, theta, bias)]

    def fn(x, w, th, b):
        return oriented_dwconv1d(x, w, th, b, 2, rounding, True, 0.7, 1.6)

    assert torch.autograd.gradcheck(fn, args, eps=1e-6, atol=1e-7)


@pytest.mark.parametrize('device', DEVICES)
@pytest.mark.parametrize('stride', [1, 2])
def test_gaussian_default_band_matches_the_reference_and_gradcheck(device, stride):
    """At the default band (no sigma, no radius given) the op is the reference, with every gradient,
    and float64 gradcheck passes: the default radius puts no pixel on a band's edge."""
    x, weight, theta, bias = _inputs(2, 4, 9, 8, 7, seed=12, device=device)
    grad = torch.randn(2, 4, -(-9 // stride), -(-8 // stride), dtype=torch.float64, device=device)
    leaves = [t.clone().requires_grad_() for t in (x, weight, theta, bias)]
    out = oriented_dwconv1d(*leaves, stride, 'gaussian')
    ref_leaves = [t.clone().requires_grad_() for t in (x, weight, theta, bias)]
    ref = interp_reference(*ref_leaves, stride, 'gaussian')
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
    for got, want in zip(torch.autograd.grad(out, leaves, grad), torch.autograd.grad(ref, ref_leaves, grad)):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)
    small = [t.clone().requires_grad_() for t in _inputs(1, 3, 6, 7, 5, seed=13, device=device)]
    assert torch.autograd.gradcheck(lambda a, b, c, d: oriented_dwconv1d(a, b, c, d, stride, 'gaussian'), small,
                                    eps=1e-6, atol=1e-7)


@pytest.mark.parametrize('device', DEVICES)
def test_lattice_angles_need_every_sample(device):
    """At 0 and 90 degrees every tap sits on a pixel: bilinear reads it with weight 1 and its
    neighbours with weight 0, whose derivatives still make the angle's gradient (one-sided, as
    grid_sample's). The angles are float32 values: float64's pi / 2 has a cosine (6e-17) that the
    reference's absolute column q + d cos rounds away but the op's relative offset d cos keeps, which
    flips the side of the one-sided derivative."""
    angles = torch.tensor([0.0, math.pi / 2, math.pi / 4, 3 * math.pi / 4]).double()
    x, weight, theta, bias = _inputs(2, 4, 10, 12, 7, seed=5, device=device, angles=angles)
    grad = torch.randn(2, 4, 10, 12, dtype=torch.float64, device=device)
    ref, ref_grads = _reference(x, weight, theta, bias, 1, 'bilinear', 0.5, 1.0, grad=grad)
    out, grads = _op_with_grads(x, weight, theta, bias, 1, 'bilinear', 0.5, 1.0, False, grad)
    assert rel_err(out, ref) < 1e-12
    assert rel_err(grads[2], ref_grads[2]) < 1e-10
    assert (ref_grads[2][:2].abs() > 1e-3).all()


@pytest.mark.parametrize('device', DEVICES)
def test_angle_gradient_only_when_asked_and_deterministic(device):
    x, weight, theta, bias = _inputs(2, 8, 12, 12, 9, seed=6, device=device)
    w = weight.clone().requires_grad_()
    out = oriented_dwconv1d(x, w, theta, bias, 1, 'bilinear')
    out.sum().backward()
    assert w.grad is not None
    th = theta.float().requires_grad_()
    grads = []
    for _ in range(2):
        th.grad = None
        oriented_dwconv1d(x.float(), weight.float(), th, None, 1, 'gaussian', False, 0.6, 1.5).square().sum().backward()
        grads.append(th.grad.clone())
    assert torch.equal(grads[0], grads[1])


@pytest.mark.parametrize('device', DEVICES)
@pytest.mark.parametrize('rounding', ['bilinear', 'gaussian'])
def test_non_finite_angles_put_every_tap_at_the_centre(device, rounding):
    x, weight, theta, bias = _inputs(1, 3, 7, 8, 5, seed=8, device=device)
    theta = theta.float()
    theta[0], theta[2] = float('nan'), float('inf')
    th = theta.clone().requires_grad_()
    out = oriented_dwconv1d(x.float(), weight.float(), th, bias.float(), 1, rounding, False, 0.6, 1.5)
    centre = bias.float()[None, :, None, None] + x.float() * weight.float().sum(1)[None, :, None, None]
    if rounding == 'bilinear':
        torch.testing.assert_close(out[:, [0, 2]], centre[:, [0, 2]])
    out.sum().backward()
    assert th.grad[[0, 2]].eq(0).all() and torch.isfinite(th.grad).all()


@pytest.mark.parametrize('device', DEVICES)
def test_opcheck(device):
    x, weight, theta, bias = _inputs(2, 4, 6, 7, 5, seed=2, dtype=torch.float32, device=device)
    theta = theta.float()
    for args in [(x.requires_grad_(), weight.requires_grad_(), theta.requires_grad_(), bias.requires_grad_(), 1,
                  'bilinear', 0.5, 1.0, False),
                 (x.detach().contiguous(memory_format=torch.channels_last), weight.detach(), theta.detach(), None, 2,
                  'gaussian', 0.6, 1.5, True)]:
        torch.library.opcheck(torch.ops.mmo1d.oriented_dwconv1d.default, args)
    y = torch.randn(2, 4, 6, 7, device=device)
    torch.library.opcheck(torch.ops.mmo1d.oriented_dwconv1d_backward_input.default,
                          (y, x.detach(), weight.detach(), theta.detach(), 1, 'bilinear', 0.5, 1.0, True))
    for need_bias, need_theta in ((True, True), (False, True), (True, False)):
        torch.library.opcheck(torch.ops.mmo1d.oriented_dwconv1d_backward_params.default,
                              (y, x.detach(), weight.detach(), theta.detach(), 1, 'gaussian', 0.6, 1.5, need_bias,
                               need_theta))


@pytest.mark.parametrize('device', DEVICES)
def test_torch_compile_and_autocast(device):
    torch._dynamo.reset()
    conv = OrientedDWConv1d(8, 7, residual=True, rounding='bilinear', learnable_angles=True).to(device)
    x = torch.randn(2, 8, 10, 9, device=device, requires_grad=True)
    compiled = torch.compile(conv, fullgraph=True, dynamic=False)
    out = compiled(x)
    gc = torch.autograd.grad(out.square().sum(), [x, conv.theta])
    ref = conv(x)
    gr = torch.autograd.grad(ref.square().sum(), [x, conv.theta])
    torch.testing.assert_close(out, ref)
    for a, b in zip(gc, gr):
        torch.testing.assert_close(a, b)
    with torch.autocast(device_type=device, dtype=torch.bfloat16):
        out = conv(x)
    assert out.dtype == torch.bfloat16
    out.float().sum().backward()
    assert conv.theta.grad.dtype == torch.float32 and conv.weight.grad.dtype == torch.float32


def test_bad_arguments_raise_clear_errors():
    x, weight, theta, bias = _inputs(1, 3, 6, 7, 5)
    with pytest.raises(ValueError, match='rounding must be one of'):
        oriented_dwconv1d(x, weight, theta, rounding='nearest')
    with pytest.raises(ValueError, match='0 < sigma and 1 <= radius'):
        oriented_dwconv1d(x, weight, theta, rounding='gaussian', sigma=0.0)
    with pytest.raises(ValueError, match='0 < sigma and 1 <= radius'):
        oriented_dwconv1d(x, weight, theta, rounding='gaussian', radius=0.5)
    with pytest.raises(ValueError, match='limited to 8 pixels'):
        oriented_dwconv1d(x, weight, theta, rounding='gaussian', radius=9.0)
    for radius in (1.0, 2.0):
        with pytest.raises(ValueError, match="must not be a whole number.*band's edge"):
            oriented_dwconv1d(x, weight, theta, rounding='gaussian', radius=radius)
        with pytest.raises(ValueError, match='must not be a whole number'):
            OrientedDWConv1d(3, 5, rounding='gaussian', radius=radius)
    # The compiled op parses the same rule at its entry.
    op = torch.ops.mmo1d.oriented_dwconv1d
    with pytest.raises(RuntimeError, match="rounding must be 'trunc', 'floor', 'bilinear' or 'gaussian', got 'near'"):
        op(x, weight, theta, None, 1, 'near', 0.5, 1.0, False)
    with pytest.raises(RuntimeError, match='limited to 8 pixels'):
        op(x, weight, theta, None, 1, 'gaussian', 0.5, 9.0, False)
    with pytest.raises(RuntimeError, match='0 < sigma and 1 <= radius'):
        op(x, weight, theta, None, 1, 'gaussian', 0.0, 1.5, False)
    with pytest.raises(RuntimeError, match='must not be a whole number'):
        op(x, weight, theta, None, 1, 'gaussian', 0.5, 2.0, False)
    op(x, weight, theta, None, 1, 'bilinear', 0.5, 1.0, False)  # the band's values matter to 'gaussian' only
    with pytest.raises(RuntimeError, match="the angles have no gradient with rounding 'trunc'"):
        torch.ops.mmo1d.oriented_dwconv1d_backward_params(torch.zeros(1, 3, 6, 7), x, weight, theta, 1, 'trunc', 0.5,
                                                          1.0, True, True)
    with pytest.raises(RuntimeError, match='theta has 2 angles but input has 3 channels'):
        oriented_dwconv1d(x, weight, theta[:2], rounding='bilinear')
    with pytest.raises(ValueError, match='learnable_angles needs an interpolating rounding'):
        OrientedDWConv1d(8, 7, learnable_angles=True)


def test_module_learnable_angles():
    conv = OrientedDWConv1d(16, 7, rounding='gaussian', learnable_angles=True, sigma=0.6, radius=1.5, directions=16)
    assert isinstance(conv.theta, torch.nn.Parameter) and 'theta' in dict(conv.named_parameters())
    torch.testing.assert_close(conv.theta.detach(), oriented_angles(16, 16))
    assert 'theta' in conv.state_dict() and 'learnable_angles=True' in repr(conv) and 'sigma=0.6' in repr(conv)
    conv.theta.data += 1e-4  # not representable in half precision
    before = conv.theta.detach().clone()
    conv.half()
    assert conv.theta.dtype == torch.float32 and isinstance(conv.theta, torch.nn.Parameter)
    assert torch.equal(conv.theta.detach(), before) and conv.weight.dtype == torch.float16
    conv.float()
    x = torch.randn(1, 16, 9, 9)
    conv(x).sum().backward()
    assert conv.theta.grad is not None and conv.theta.grad.abs().sum() > 0
    fixed = OrientedDWConv1d(16, 7, rounding='bilinear')
    assert 'theta' not in dict(fixed.named_parameters()) and 'theta' in dict(fixed.named_buffers())


def _smooth_inputs(c, seed, device):
    g = torch.Generator().manual_seed(seed)
    noise = torch.randn(2, c, 28, 28, generator=g, dtype=torch.float64)
    x = F.avg_pool2d(F.avg_pool2d(noise, 5, 1, 2, count_include_pad=False), 5, 1, 2, count_include_pad=False)
    weight = torch.rand(c, 9, generator=g, dtype=torch.float64) + 0.5
    return x.float().to(device), weight.float().to(device)


@pytest.mark.parametrize('device', DEVICES)
@pytest.mark.parametrize('rounding', ['bilinear', 'gaussian'])
def test_descent_recovers_the_angles(device, rounding):
    """Targets made by known angles off the 8 directions from smooth, image-like inputs; starting
    0.25 rad away with the true weights, gradient descent on theta through the compiled op
    recovers every angle within 0.02 rad."""
    x, weight = _smooth_inputs(4, 7, device)
    truth = torch.tensor([0.3, 1.1, 1.9, 2.6], device=device)
    target = oriented_dwconv1d(x, weight, truth, None, 1, rounding, False, 0.6, 1.5)
    start = truth + torch.tensor([0.25, -0.25, 0.25, -0.25], device=device)
    theta = start.clone().requires_grad_()
    opt = torch.optim.Adam([theta], lr=0.02)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, [100], 0.1)
    for _ in range(200):
        opt.zero_grad()
        loss = (oriented_dwconv1d(x, weight, theta, None, 1, rounding, False, 0.6, 1.5) - target).pow(2).mean()
        loss.backward()
        opt.step()
        sched.step()
    err = (theta.detach() - truth).abs().cpu()
    assert (err < 0.02).all(), f'{rounding}: errors {err.tolist()}'


@pytest.mark.parametrize('device', DEVICES)
@pytest.mark.parametrize('stride', [1, 2, 3])
def test_bilinear_is_grid_sample_and_gaussian_is_its_formula(device, stride):
    """The op itself against the two independent oracles of the reference's tests: every tap through
    grid_sample (align_corners=True, zero padding), and the gaussian band from its formula."""
    from .test_interp_reference import _gaussian_loops, _grid_sample_oracle

    x, weight, theta, bias = _inputs(2, 3, 9, 11, 5, seed=stride)
    out = oriented_dwconv1d(x.to(device), weight.to(device), theta.to(device), bias.to(device), stride, 'bilinear')
    assert rel_err(out, _grid_sample_oracle(x, weight, theta, bias, stride)) < 1e-12
    out = oriented_dwconv1d(x.to(device), weight.to(device), theta.to(device), bias.to(device), stride, 'gaussian',
                            False, 0.7, 1.6)
    assert rel_err(out, _gaussian_loops(x, weight, theta, bias, stride, 0.7, 1.6)) < 1e-12


@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA GPU')
@pytest.mark.parametrize('layout', ['nchw', 'channels_last'])
def test_bias_gradient_of_large_tensors_summed_in_slices(layout):
    """grad_output over 8 MiB is summed in slices of images (peak memory); the sum stays exact to
    float32 accumulation, and repeatable."""
    n, c, h, w, k = 9, 64, 96, 100, 7  # 2.3 MiB per image in float32: slices of 3 images
    g = torch.Generator().manual_seed(11)
    x = torch.randn(n, c, h, w, generator=g).cuda()
    gy = torch.randn(n, c, h, w, generator=g).cuda()
    if layout == 'channels_last':
        x, gy = x.contiguous(memory_format=torch.channels_last), gy.contiguous(memory_format=torch.channels_last)
    weight = (torch.randn(c, k, generator=g) / math.sqrt(k)).cuda().requires_grad_()
    bias = torch.randn(c, generator=g).cuda().requires_grad_()
    theta = oriented_angles(c).cuda() + 0.02
    dbs = []
    for _ in range(2):
        out = oriented_dwconv1d(x, weight, theta, bias, 1, 'bilinear')
        dbs.append(torch.autograd.grad(out, [weight, bias], gy)[1])
    ref = gy.double().sum((0, 2, 3))
    scale = gy.double().abs().sum((0, 2, 3))
    assert torch.equal(dbs[0], dbs[1])
    assert ((dbs[0].double() - ref).abs() <= 64 * 2.0**-24 * scale).all()


def _window_kernels(fn):
    """Names of the channels_last window-gather kernels that fn() launched, with their counts."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return {e.key: e.count for e in prof.key_averages() if 'win_gather_nhwc_kernel' in e.key}


@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA GPU')
@pytest.mark.skipif(torch.cuda.is_available() and torch.cuda.get_device_properties(0).major != 9,
                    reason="the plan's shared memory per multiprocessor is a Hopper GPU's (sm_90)")
@pytest.mark.parametrize('h,dtype', [(14, torch.bfloat16), (7, torch.float16)])
def test_small_planes_take_several_images_a_block(h, dtype):
    """The interpolated window gather on the models' small planes (bilinear K=31, 64 x 1536, learned
    angles: blocks of channels walk the union of their points) stages several images a block (the
    window kernel's SMALL over the tables' merged weights), forward and input gradient, and gives
    what a batch of two, on the sub-tile kernel, gives for the same images."""
    n, c, k = 64, 1536, 31
    g = torch.Generator().manual_seed(5)
    x = torch.randn(n, c, h, h, generator=g).to('cuda', dtype).contiguous(memory_format=torch.channels_last)
    gy = torch.randn(n, c, h, h, generator=g).to('cuda', dtype).contiguous(memory_format=torch.channels_last)
    weight = (torch.randn(c, k, generator=g) / math.sqrt(k)).to('cuda', dtype)
    theta = (oriented_angles(c) + 0.05 * torch.rand(c, generator=g)).cuda()
    bias = torch.randn(c, generator=g).to('cuda', dtype)

    def run(x, gy):
        x = x.detach().requires_grad_()
        out = oriented_dwconv1d(x, weight, theta, bias, 1, 'bilinear')
        return out, torch.autograd.grad(out, x, gy)[0]

    result = {}
    kernels = _window_kernels(lambda: result.update(all=run(x, gy)))
    small = [name for name in kernels if ', 1, false, true, true>(' in name]
    assert small and sum(kernels[name] for name in small) == 2, kernels
    two = run(x[:2], gy[:2])
    for got, want in zip(result['all'], two):
        assert rel_err(got[:2], want) < 2**-7
