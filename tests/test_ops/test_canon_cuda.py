"""The canonical-direction CUDA kernels: the calls they take, each direction against the float64
reference, and the angles that leave them (changed in place, through ``.data``, not canonical)."""
import math

import pytest
import torch

from mmo1d.ops import (
    clear_table_cache,
    oriented_angles,
    oriented_dwconv1d,
    oriented_dwconv1d_path,
    oriented_dwconv1d_reference,
)

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA GPU')

CANON = 'canon_nhwc'
# Unit roundoff of the output's dtype; sums are float32.
EPS = {torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8}


def tensors(n, c, h, w, k, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, c, h, w, generator=g)
    grad = torch.randn(n, c, h, w, generator=g)
    weight = torch.randn(c, k, generator=g) / math.sqrt(k)
    bias = torch.randn(c, generator=g)
    cast = dict(device='cuda', dtype=dtype)
    x, grad = (t.to(**cast).contiguous(memory_format=torch.channels_last) for t in (x, grad))
    return x, weight.to(**cast), bias.to(**cast), grad


def paths(x, weight, theta, rounding='trunc'):
    return [oriented_dwconv1d_path(x, weight, 1, p, theta, rounding)
            for p in ('forward', 'backward_input', 'backward_weight')]


def check_against_reference(x, weight, theta, bias, grad, residual):
    xr, wr = x.detach().requires_grad_(), weight.detach().requires_grad_()
    out = oriented_dwconv1d(xr, wr, theta, bias, 1, 'trunc', residual)
    dx, = torch.autograd.grad(out, [xr], grad)
    xd, wd = x.double().requires_grad_(), weight.double()
    ref = oriented_dwconv1d_reference(xd, wd, theta, bias.double(), 1, 'trunc', residual)
    ref_dx, = torch.autograd.grad(ref, [xd], grad.double())
    # Bound: the output's rounding plus a float32 sum of K + 2 terms, on the magnitudes.
    with torch.no_grad():
        mag = oriented_dwconv1d_reference(x.double().abs(), wd.abs(), theta, bias.double().abs(), 1, 'trunc', residual)
        mag_dx = oriented_dwconv1d_reference(grad.double().abs(), wd.abs().flip(1), theta, None, 1, 'trunc', residual)
    eps = EPS[x.dtype]
    for name, got, want, m in (('output', out, ref, mag), ('grad_input', dx, ref_dx, mag_dx)):
        tol = 2 * eps * want.abs() + 64 * 2.0**-24 * m + 1e-30
        bad = (got.double() - want).abs() > tol
        assert not bad.any(), f'{name}: {int(bad.sum())} of {bad.numel()} elements off'
    assert out.is_contiguous(memory_format=torch.channels_last) and dx.is_contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize('dtype', [torch.bfloat16, torch.float16])
@pytest.mark.parametrize('direction', range(8))
def test_each_direction_matches_the_reference(dtype, direction):
    # Every channel at one direction, on a plane with partial tiles on both axes.
    x, weight, bias, grad = tensors(2, 32, 37, 45, 31, dtype, seed=direction)
    theta = torch.full((32, ), math.pi * direction / 8, device='cuda')
    assert paths(x, weight, theta)[:2] == [CANON, CANON]
    check_against_reference(x, weight, theta, bias, grad, residual=direction % 2 == 0)


@pytest.mark.parametrize('dtype', [torch.bfloat16, torch.float16])
@pytest.mark.parametrize('offset', [0.0, 0.5])
def test_model_angle_layouts(dtype, offset):
    """The models' layouts: 8 contiguous groups of C/8 channels, with and without layer rotation."""
    x, weight, bias, grad = tensors(2, 384, 56, 56, 31, dtype, seed=3)
    theta = oriented_angles(384, 8, offset).cuda()
    assert paths(x, weight, theta) == [CANON, CANON, 'vec_wgrad_nhwc']
    check_against_reference(x, weight, theta, bias, grad, residual=True)


def test_calls_outside_the_domain_take_other_paths():
    x, weight, _, _ = tensors(1, 128, 20, 20, 31, torch.bfloat16)
    theta = oriented_angles(128).cuda()
    assert paths(x, weight, theta, 'floor')[0] != CANON  # floored offsets
    assert paths(x, weight, oriented_angles(128, 16).cuda())[0] != CANON  # 8-channel groups
    assert paths(x, weight, theta + 0.1)[0] != CANON  # angles off the 8 directions
    assert paths(x.float(), weight.float(), theta)[0] != CANON  # float32
    assert paths(x.contiguous(), weight, theta)[0] != CANON  # NCHW
    x15, w15, _, _ = tensors(1, 128, 20, 20, 15, torch.bfloat16)
    assert paths(x15, w15, theta)[0] != CANON  # a K without compiled kernels


def test_angles_changed_in_place_or_through_data_leave_the_family():
    x, weight, bias, grad = tensors(2, 128, 24, 40, 31, torch.float16, seed=5)
    theta = oriented_angles(128).cuda()
    assert paths(x, weight, theta)[0] == CANON
    theta.add_(0.3)  # in place: the version counter moves
    assert paths(x, weight, theta)[0] != CANON
    check_against_reference(x, weight, theta, bias, grad, residual=False)
    theta.data.copy_(oriented_angles(128).cuda())  # through .data: no version change
    clear_table_cache()  # as documented, after such a change
    assert paths(x, weight, theta)[0] == CANON
    check_against_reference(x, weight, theta, bias, grad, residual=False)


def test_a_buffer_that_keeps_changing_is_no_longer_read():
    """DistributedDataParallel(broadcast_buffers=True) rewrites theta before every forward pass: after
    a few changes the family stops copying that buffer to the host and the other kernels serve it."""
    x, weight, bias, grad = tensors(1, 128, 20, 36, 31, torch.bfloat16, seed=7)
    theta = oriented_angles(128).cuda()
    seen = []
    for _ in range(5):
        seen.append(paths(x, weight, theta)[0])
        theta.add_(0.0)  # same values, new version
    assert seen[:3] == [CANON] * 3 and CANON not in seen[3:], seen
    check_against_reference(x, weight, theta, bias, grad, residual=True)
