"""The window gather's ring of lines (16-bit channels_last, stride 1, planes that one block does not
cover): the calls that take it, its sums against the float64 reference, and bit for bit the sums of
the sub-tile kernel and of other ring geometries."""
import math

import pytest
import torch

from mmo1d.ops import oriented_angles, oriented_dwconv1d, oriented_dwconv1d_path

from .utils import RTOL, make_inputs, reference_with_grads, rel_err

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA GPU')

DTYPES = [torch.bfloat16, torch.float16]


def cl(t, dtype):
    return t.to('cuda', dtype).contiguous(memory_format=torch.channels_last)


def out_and_dx(x, weight, theta, bias, grad_out, dtype):
    """Output and input gradient of the CUDA op (both gathers) in `dtype`, channels_last."""
    xg = cl(x, dtype).requires_grad_()
    out = oriented_dwconv1d(xg, weight.to('cuda', dtype), theta.cuda(), bias.to('cuda', dtype), 1)
    (dx, ) = torch.autograd.grad(out, [xg], cl(grad_out, dtype))
    return out.detach(), dx


@pytest.mark.parametrize('dtype', DTYPES)
def test_ring_serves_the_large_planes(dtype):
    """The "++" convolution's call (64 x 384 x 56 x 56, K=31) and a downstream plane (2 x 384 x 128 x
    128) take the ring in both gathers; float32 and planes that one block covers do not."""
    def path(n, c, h, k, p, dt=dtype):
        x = torch.empty(n, c, h, h, device='cuda', dtype=dt).contiguous(memory_format=torch.channels_last)
        return oriented_dwconv1d_path(x, torch.empty(c, k, device='cuda', dtype=dt), 1, p)

    for p in ('forward', 'backward_input'):
        assert path(64, 384, 56, 31, p) == 'win_gather_ring'
        assert path(2, 384, 128, 31, p) == 'win_gather_ring'
        assert path(2, 384, 128, 15, p) == 'win_gather_ring'
        assert path(64, 384, 56, 31, p, torch.float32) == 'win_gather'
        assert path(64, 1536, 14, 31, p) == 'win_gather'  # several images a block


@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('n,h,w', [(12, 56, 56), (12, 57, 43), (6, 120, 40)])
@pytest.mark.parametrize('angles', ['directions', 'arbitrary'])
def test_ring_against_reference(dtype, n, h, w, angles):
    """Output and input gradient against the float64 reference on planes whose blocks' tiles (28 x 28,
    29 x 22, 30 x 20 outputs on an H100 or H200) take several steps through a ring shorter than the
    tile, its lines wrapping; the 8 directions (blocks that straddle two) or an angle per channel.
    The reference runs on the first and last images."""
    c, k = 384, 31
    x, weight, theta, bias = make_inputs(n, c, h, w, k, seed=h + w)
    if angles == 'directions':
        theta = oriented_angles(c)
    grad_out = torch.randn(n, c, h, w, generator=torch.Generator().manual_seed(h * w), dtype=torch.float64)
    xr = x.to(dtype)
    assert oriented_dwconv1d_path(cl(x, dtype), weight.to('cuda', dtype), 1, 'forward', theta.cuda()) == \
        'win_gather_ring'
    out, dx = out_and_dx(x, weight, theta, bias, grad_out, dtype)
    keep = [0, n - 1]
    ref, (ref_dx, _, _) = reference_with_grads(xr[keep], weight.to(dtype), theta, bias.to(dtype), grad_out[keep])
    assert rel_err(out[keep], ref) < RTOL[dtype]
    assert rel_err(dx[keep], ref_dx) < RTOL[dtype]


@pytest.mark.parametrize('dtype', DTYPES)
def test_ring_sums_as_the_sub_tiles(dtype):
    """Bit for bit: channels at 0 degrees in blocks whose ring fits (all 0 degrees) against the same
    channels in blocks that also hold a 45-degree line at K=31 (halo 10 x 15: the ring does not fit
    the block's share, so those blocks stage sub-tiles), and the same images in a batch of two
    (14 x 14 tiles: a ring as long as the tile, never wrapping). Both gathers; a sum's order is the
    segment tables' in every kernel."""
    n, c, h, k = 12, 384, 56, 31
    x, weight, _, bias = make_inputs(n, c, h, h, k, seed=3)
    grad_out = torch.randn(n, c, h, h, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    flat = torch.zeros(c)
    mixed = flat.clone()
    mixed[1::16] = math.pi / 4  # one 45-degree channel in every block of 16
    ring = out_and_dx(x, weight, flat, bias, grad_out, dtype)
    sub = out_and_dx(x, weight, mixed, bias, grad_out, dtype)
    zero = mixed == 0
    for a, b in zip(ring, sub):
        assert torch.equal(a[:, zero], b[:, zero])
    pair = [0, n - 1]
    short = out_and_dx(x[pair], weight, flat, bias, grad_out[pair], dtype)
    for a, b in zip(ring, short):
        assert torch.equal(a[pair], b)
