"""CUDA kernels: agreement with the CPU kernels and the reference, determinism, large and odd shapes.

The device-independent matrix (kernel sizes, strides, dtypes, layouts, gradcheck, opcheck, compile,
autocast) runs on CUDA too through ``test_oriented_dwconv1d.py``'s device parameter.
"""
import math

import pytest
import torch
import torch.nn.functional as F

from mmo1d.ops import oriented_angles, oriented_dwconv1d, oriented_dwconv1d_path, oriented_dwconv1d_reference

from .utils import RTOL, make_inputs, rel_err

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA GPU')

FORMATS = {'nchw': torch.contiguous_format, 'channels_last': torch.channels_last}


def forward_backward(x, weight, theta, bias, grad_out, **kwargs):
    x = x.detach().requires_grad_()
    weight = weight.detach().requires_grad_()
    bias = bias.detach().requires_grad_()
    out = oriented_dwconv1d(x, weight, theta, bias, **kwargs)
    out.backward(grad_out)
    return out.detach(), x.grad, weight.grad, bias.grad


@pytest.mark.parametrize('layout', list(FORMATS))
@pytest.mark.parametrize('dtype', [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize('stride,residual,rounding', [(1, False, 'trunc'), (1, True, 'floor'), (2, True, 'trunc')])
def test_gpu_matches_cpu(layout, dtype, stride, residual, rounding):
    x, weight, theta, bias = make_inputs(3, 13, 21, 18, 15, seed=4)
    kwargs = dict(stride=stride, residual=residual, rounding=rounding)
    ho, wo = -(-21 // stride), -(-18 // stride)
    grad_out = torch.randn(3, 13, ho, wo, generator=torch.Generator().manual_seed(5))
    cpu = forward_backward(x, weight, theta, bias, grad_out, **kwargs)
    fmt = FORMATS[layout]
    gpu = forward_backward(x.to('cuda', dtype).contiguous(memory_format=fmt), weight.to('cuda', dtype), theta.cuda(),
                           bias.to('cuda', dtype), grad_out.to('cuda', dtype).contiguous(memory_format=fmt),
                           **kwargs)
    for a, b in zip(gpu, cpu):
        assert a.dtype == dtype
        assert rel_err(a, b) < RTOL[dtype]
    assert gpu[0].is_contiguous(memory_format=fmt) and gpu[1].is_contiguous(memory_format=fmt)


@pytest.mark.parametrize('layout', list(FORMATS))
@pytest.mark.parametrize('dtype', [torch.float32, torch.bfloat16])
@pytest.mark.parametrize('stride', [1, 2])
@pytest.mark.parametrize('rounding', ['trunc', 'bilinear'])
def test_gradients_are_deterministic(layout, dtype, stride, rounding):
    """Bilinear taps at stride 2 in channels_last take the weight gradient per parity class
    (interp_vec_wgrad_classes); the others the per-slot sums."""
    x, weight, theta, bias = make_inputs(8, 64, 28, 28, 31, dtype=dtype, device='cuda', seed=6)
    x = x.contiguous(memory_format=FORMATS[layout])
    theta = oriented_angles(64).cuda()
    grad_out = torch.randn(8, 64, 28 // stride, 28 // stride, dtype=dtype, device='cuda')
    grad_out = grad_out.contiguous(memory_format=FORMATS[layout])
    first = forward_backward(x, weight, theta, bias, grad_out, stride=stride, rounding=rounding)
    for _ in range(3):
        again = forward_backward(x, weight, theta, bias, grad_out, stride=stride, rounding=rounding)
        for a, b in zip(first, again):
            assert torch.equal(a, b)


@pytest.mark.parametrize('layout', list(FORMATS))
def test_large_shape(layout):
    """N=64, C=512, H=W=56, K=31 with the paper's 8-direction layout; checked on a slice of the batch."""
    n, c, h, k = 64, 512, 56, 31
    g = torch.Generator(device='cuda').manual_seed(0)
    x = torch.randn(n, c, h, h, device='cuda', generator=g).contiguous(memory_format=FORMATS[layout])
    weight = torch.randn(c, k, device='cuda', generator=g) / math.sqrt(k)
    theta = oriented_angles(c).cuda()
    out = oriented_dwconv1d(x, weight, theta)
    ref = oriented_dwconv1d_reference(x[:2].double(), weight.double(), theta)
    assert rel_err(out[:2], ref) < RTOL[torch.float32]
    ref_last = oriented_dwconv1d_reference(x[-1:].double(), weight.double(), theta)
    assert rel_err(out[-1:], ref_last) < RTOL[torch.float32]
    horizontal = oriented_dwconv1d(x, weight, torch.zeros_like(theta))
    conv = F.conv2d(x, weight[:, None, None, :], padding=(0, k // 2), groups=c)
    assert rel_err(horizontal, conv) < RTOL[torch.float32]


@pytest.mark.parametrize('layout', list(FORMATS))
def test_fpn_sized_input(layout):
    """A stride-4 feature map of a 1333x800 image (tiled planes), forward and both gradients."""
    x, weight, theta, bias = make_inputs(1, 24, 200, 336, 27, device='cuda', seed=8)
    x = x.contiguous(memory_format=FORMATS[layout])
    grad_out = torch.randn_like(x)
    out, gx, gw, gb = forward_backward(x, weight, theta, bias, grad_out)
    xr = x.double().requires_grad_()
    wr = weight.double().requires_grad_()
    ref = oriented_dwconv1d_reference(xr, wr, theta, bias.double())
    ref.backward(grad_out.double())
    assert rel_err(out, ref) < RTOL[torch.float32]
    assert rel_err(gx, xr.grad) < RTOL[torch.float32]
    assert rel_err(gw, wr.grad) < 1e-4


@pytest.mark.parametrize('layout', list(FORMATS))
def test_empty_batch(layout):
    x = torch.randn(0, 8, 9, 9, device='cuda').contiguous(memory_format=FORMATS[layout]).requires_grad_()
    weight = torch.randn(8, 7, device='cuda', requires_grad=True)
    out = oriented_dwconv1d(x, weight, oriented_angles(8).cuda(), stride=2)
    assert out.shape == (0, 8, 5, 5)
    out.sum().backward()
    assert x.grad.shape == x.shape
    assert torch.equal(weight.grad, torch.zeros_like(weight))


@pytest.mark.parametrize('layout', list(FORMATS))
@pytest.mark.parametrize('c,h,w', [(13, 7, 9), (3, 1, 1), (21, 33, 1), (9, 2, 65)])
def test_odd_sizes_and_channel_counts(layout, c, h, w):
    x, weight, theta, bias = make_inputs(2, c, h, w, 31, device='cuda', seed=c + h + w)
    x = x.contiguous(memory_format=FORMATS[layout])
    for stride in (1, 2, 3):
        grad_out = torch.randn(2, c, -(-h // stride), -(-w // stride), device='cuda')
        out, gx, gw, gb = forward_backward(x, weight, theta, bias, grad_out, stride=stride, residual=True)
        xr = x.double().requires_grad_()
        wr = weight.double().requires_grad_()
        ref = oriented_dwconv1d_reference(xr, wr, theta, bias.double(), stride=stride, residual=True)
        ref.backward(grad_out.double())
        assert rel_err(out, ref) < RTOL[torch.float32]
        assert rel_err(gx, xr.grad) < RTOL[torch.float32]
        assert rel_err(gw, wr.grad) < 1e-4


def test_long_kernel_float64_channels_last():
    """K=63 in float64 channels_last: the largest tile case."""
    x, weight, theta, bias = make_inputs(2, 10, 40, 40, 63, dtype=torch.float64, device='cuda', seed=12)
    x = x.contiguous(memory_format=torch.channels_last)
    out = oriented_dwconv1d(x, weight, theta, bias, stride=1)
    ref = oriented_dwconv1d_reference(x, weight, theta, bias)
    assert rel_err(out, ref) < 1e-12
    assert out.is_contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize('dtype', [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize('angles', ['groups12', 'per_channel', 'single'])
@pytest.mark.parametrize('k', [7, 31])
@pytest.mark.parametrize('stride', [1, 2])
def test_channels_last_channel_blocks(dtype, angles, k, stride):
    """channels_last with C a multiple of the kernels' channel block: angle groups of 12 channels
    (blocks that straddle two groups), a different angle in every channel, one angle for all; output,
    both gradients and the residual form against the reference, on a plane split into tiles (at
    stride 2 with odd and even sides)."""
    c, h, w = (96, 45, 38) if stride == 1 else (96, 83, 70)
    x, weight, _, bias = make_inputs(2, c, h, w, k, seed=k)
    if angles == 'groups12':
        theta = oriented_angles(c)
    elif angles == 'per_channel':
        theta = torch.linspace(0, math.pi, c + 1)[:-1]
    else:
        theta = torch.full((c,), math.radians(67.5))
    grad_out = torch.randn(2, c, -(-h // stride), -(-w // stride), generator=torch.Generator().manual_seed(k + 1),
                           dtype=torch.float64)
    for residual in (False, True):
        xg = x.to('cuda', dtype).contiguous(memory_format=torch.channels_last)
        out, gx, gw, gb = forward_backward(xg, weight.to('cuda', dtype), theta.cuda(), bias.to('cuda', dtype),
                                           grad_out.to('cuda', dtype).contiguous(memory_format=torch.channels_last),
                                           stride=stride, residual=residual)
        xr = x.double().requires_grad_()
        wr = weight.double().requires_grad_()
        ref = oriented_dwconv1d_reference(xr, wr, theta, bias.double(), stride=stride, residual=residual)
        ref.backward(grad_out)
        assert out.is_contiguous(memory_format=torch.channels_last)
        assert rel_err(out, ref) < RTOL[dtype]
        assert rel_err(gx, xr.grad) < RTOL[dtype]
        assert rel_err(gw, wr.grad) < max(RTOL[dtype], 1e-4)


@pytest.mark.parametrize('dtype', [torch.float32, torch.bfloat16])
@pytest.mark.parametrize('angles', ['groups12', 'groups16', 'per_channel'])
@pytest.mark.parametrize('stride', [1, 2])
def test_channels_last_large_batch_tiles(dtype, angles, stride):
    """channels_last with a batch large enough for the window kernels' larger output tiles (staged in
    sub-tiles sized by each block's halo): output and input gradient of three images against the
    reference, the weight gradient with the other images' output gradients zero. groups16: six angles
    of 16 channels each, so that 16-bit blocks share one segment list (staged once, the tile taking
    the others' room) on row, column and diagonal lines."""
    n, c, h, w, k = 48, 96, 61, 57, 31
    x, weight, _, bias = make_inputs(n, c, h, w, k, seed=5)
    if angles == 'groups12':
        theta = oriented_angles(c)
    elif angles == 'groups16':
        theta = torch.tensor([0.0, 22.5, 45.0, 67.5, 90.0, 157.5]).deg2rad().repeat_interleave(c // 6)
    else:
        theta = torch.linspace(0, math.pi, c + 1)[:-1]
    grad_out = torch.randn(n, c, -(-h // stride), -(-w // stride), generator=torch.Generator().manual_seed(6),
                           dtype=torch.float64)
    keep = [0, 1, n - 1]
    grad_out[2:n - 1] = 0
    xg = x.to('cuda', dtype).contiguous(memory_format=torch.channels_last)
    out, gx, gw, _ = forward_backward(xg, weight.to('cuda', dtype), theta.cuda(), bias.to('cuda', dtype),
                                      grad_out.to('cuda', dtype).contiguous(memory_format=torch.channels_last),
                                      stride=stride, residual=True)
    xr = x[keep].requires_grad_()
    wr = weight.clone().requires_grad_()
    ref = oriented_dwconv1d_reference(xr, wr, theta, bias, stride=stride, residual=True)
    ref.backward(grad_out[keep])
    assert rel_err(out[keep], ref) < RTOL[dtype]
    assert rel_err(gx[keep], xr.grad) < RTOL[dtype]
    assert rel_err(gw, wr.grad) < max(RTOL[dtype], 1e-4)


@pytest.mark.parametrize('dtype', [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize('h,w', [(56, 56), (50, 53), (64, 64)])
def test_channels_last_weight_grad_in_one_round(dtype, h, w):
    """The channels_last weight gradient where K=31 tiles of 28 x 28, 25 x 27 and 32 x 32 outputs take
    13 or 16 outputs per thread (the block's pixel slots cover a tile in one round): the weight and
    bias gradients against the reference, a different angle in every channel, C beyond a channel block."""
    c, k = 40, 31
    x, weight, _, bias = make_inputs(2, c, h, w, k, seed=h + w)
    theta = torch.linspace(0, math.pi, c + 1)[:-1]
    grad_out = torch.randn(2, c, h, w, generator=torch.Generator().manual_seed(h), dtype=torch.float64)
    cl = torch.channels_last
    xg = x.to('cuda', dtype).contiguous(memory_format=cl)
    assert oriented_dwconv1d_path(xg, weight.to('cuda', dtype), 1, 'backward_weight') == 'vec_wgrad'
    _, _, gw, gb = forward_backward(xg, weight.to('cuda', dtype), theta.cuda(), bias.to('cuda', dtype),
                                    grad_out.to('cuda', dtype).contiguous(memory_format=cl))
    wr = weight.clone().requires_grad_()
    br = bias.clone().requires_grad_()
    oriented_dwconv1d_reference(x, wr, theta, br).backward(grad_out)
    assert rel_err(gw, wr.grad) < max(RTOL[dtype], 1e-4)
    assert rel_err(gb, br.grad) < RTOL[dtype]
