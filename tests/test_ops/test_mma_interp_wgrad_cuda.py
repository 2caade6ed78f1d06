"""The tensor-core weight gradient of interpolated taps (path ``mma_interp_wgrad``, sm_90 and later)
against the float64 interpolated reference.

It serves 'bilinear' and 'gaussian' float16 and bfloat16 channels_last calls at stride 1 with C a
multiple of 16 on planes of at least 28 x 28 pixels. Per block of 16 channels it sums dy * x over the
union of the block's points where that union is short enough and lies near an axis (learned angles that
stay near the 8 directions' lines along and off the axes); the other blocks (the diagonals, arbitrary
angles) are summed by the interpolated vector weight gradient in the same call, and the contraction
reads each block's sums where they were summed. Cases: the 8 directions exact and moved by up to 0.05
rad (the learned-angle models, their 56 x 56 and 28 x 28 stages), single angles along the rows and the
columns, gaussian taps, arbitrary angles, odd and narrow planes, a plane just above the bound, blocks
that take several images; dw, db and dtheta against the reference, and determinism.
"""
import math

import pytest
import torch

from mmo1d.ops import oriented_dwconv1d, oriented_dwconv1d_path
from mmo1d.ops.interp_reference import oriented_dwconv1d_interp_reference

from .utils import cuda_wgrad_inputs

pytestmark = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability() < (9, 0),
                                reason='needs a CUDA GPU of compute capability 9.0 or newer')

CL = torch.channels_last
SIGMA, RADIUS = 0.6, 1.2
SAMPLES = {'bilinear': 4, 'gaussian': (2 * math.ceil(RADIUS) + 2)**2}
ORACLE_TAPS = 200_000_000


def inputs(n, c, h, w, k, dtype, angles, seed):
    """'learned8': the 8 directions, each channel's angle moved by up to 0.05 rad; single angles too."""
    if angles == 'learned8' or isinstance(angles, float):
        return cuda_wgrad_inputs(n, c, h, w, k, dtype, 'mixed8' if angles == 'learned8' else angles, seed, 0.05)
    return cuda_wgrad_inputs(n, c, h, w, k, dtype, angles, seed)


def op_grads(x, weight, theta, grad, rounding):
    wr = weight.detach().requires_grad_()
    tr = theta.detach().requires_grad_()
    br = torch.zeros(weight.shape[0], device='cuda', dtype=weight.dtype, requires_grad=True)
    out = oriented_dwconv1d(x, wr, tr, br, 1, rounding, False, SIGMA, RADIUS)
    return torch.autograd.grad(out, [wr, tr, br], grad)


def oracle(x, weight, theta, grad, rounding):
    """dw, dtheta and db of the reference in float64, on groups of channels (they are independent)."""
    n, c, h, w = x.shape
    step = max(1, ORACLE_TAPS // (n * weight.shape[1] * SAMPLES[rounding] * h * w))
    dws, dts, dbs = [], [], []
    for c0 in range(0, c, step):
        sl = slice(c0, c0 + step)
        wd = weight[sl].double().requires_grad_()
        td = theta[sl].double().requires_grad_()
        bd = torch.zeros(wd.shape[0], dtype=torch.float64, device='cuda', requires_grad=True)
        out = oriented_dwconv1d_interp_reference(x[:, sl].double(), wd, td, bd, 1, rounding, SIGMA, RADIUS)
        dw, dt, db = torch.autograd.grad(out, [wd, td, bd], grad[:, sl].double())
        dws.append(dw)
        dts.append(dt)
        dbs.append(db)
    return torch.cat(dws), torch.cat(dts), torch.cat(dbs)


def assert_close(name, got, ref, scale, terms, dtype, extra=0.0):
    eps = 2.0**-11 if dtype == torch.float16 else 2.0**-8
    tol = 2 * eps * ref.abs() + (4 * math.sqrt(terms) + 4) * 2.0**-24 * scale + torch.finfo(dtype).tiny + extra
    diff = (got.double() - ref).abs()
    bad = diff > tol
    assert not bad.any(), f'{name}: {int(bad.sum())} of {bad.numel()} off, worst {(diff / tol).max().item():.3g}x'


CASES = [
    # (N, C, H, W, K, rounding, angles)
    (2, 384, 56, 56, 31, 'bilinear', 'learned8'),  # the ++ blocks' 4C tensor, learned angles
    (2, 128, 56, 56, 31, 'bilinear', 'mixed8'),     # the 8 directions exactly (the models at initialisation)
    (2, 768, 28, 28, 31, 'bilinear', 'learned8'),  # the second stage's 4C tensor
    (2, 64, 27, 31, 31, 'gaussian', 0.0),           # 837 pixels: above the bound, one side below 28
    (2, 64, 52, 61, 31, 'bilinear', 0.0),           # rows
    (2, 64, 61, 52, 31, 'bilinear', 90.0),          # columns
    (2, 64, 50, 57, 31, 'bilinear', 22.5),
    (2, 64, 50, 50, 31, 'gaussian', 'learned8'),
    (2, 64, 50, 50, 15, 'bilinear', 'arbitrary'),   # every block or nearly: the vector kernel's
    (3, 48, 49, 51, 13, 'bilinear', 67.5),
    (1, 32, 3, 800, 31, 'bilinear', 'learned8'),    # planes narrower than a tile and than the line
    (40, 1024, 48, 48, 7, 'bilinear', 'learned8'),  # two images a block (an H200's 132 SMs: 33 chunks)
]


@pytest.mark.parametrize('dtype', [torch.float16, torch.bfloat16])
@pytest.mark.parametrize('case', CASES, ids=lambda c: 'x'.join(map(str, c[:5])) + f'-{c[5]}-{c[6]}')
def test_mma_interp_weight_angle_and_bias_gradient(case, dtype):
    n, c, h, w, k, rounding, angles = case
    x, weight, theta, grad = inputs(n, c, h, w, k, dtype, angles, seed=h * w + k)
    assert oriented_dwconv1d_path(x, weight, 1, 'backward_weight', theta, rounding, RADIUS, SIGMA) == \
        'mma_interp_wgrad'
    dw, dt, db = op_grads(x, weight, theta, grad, rounding)
    ref_dw, ref_dt, ref_db = oracle(x, weight, theta, grad, rounding)
    abs_dw, _, abs_db = oracle(x.abs(), weight.abs(), theta, grad.abs(), rounding)
    terms = n * h * w
    # The op takes a tap's position relative to its output in float32, the reference the absolute
    # position in float64: a coefficient error of at most 4 * 2^-24 * (K/2 + 2) per sample.
    delta = 4 * 2.0**-24 * (k // 2 + 2) * SAMPLES[rounding]
    extra = delta * terms * x.double().abs().max() * grad.double().abs().max()
    assert_close('dw', dw, ref_dw, abs_dw, terms * SAMPLES[rounding], dtype, extra)
    assert_close('db', db, ref_db, abs_db, terms, dtype)
    assert dt.dtype == torch.float32 and torch.isfinite(dt).all()
    err = ((dt.double() - ref_dt).norm() / ref_dt.norm().clamp_min(1e-30)).item()
    assert err < 2e-3, f'dtheta: relative error {err:.3g}'
    # Deterministic: the same call, the same bits.
    dw2, dt2, db2 = op_grads(x, weight, theta, grad, rounding)
    assert torch.equal(dw, dw2) and torch.equal(dt, dt2) and torch.equal(db, db2)


def test_mma_interp_domain():
    def path(c, h, dtype, rounding='bilinear', k=31):
        x = torch.randn(2, c, h, h, device='cuda', dtype=dtype).contiguous(memory_format=CL)
        return oriented_dwconv1d_path(x, torch.randn(c, k, device='cuda', dtype=dtype), 1, 'backward_weight',
                                      rounding=rounding)

    assert path(64, 56, torch.bfloat16) == 'mma_interp_wgrad'
    assert path(64, 48, torch.float16, 'gaussian') == 'mma_interp_wgrad'
    assert path(64, 28, torch.float16) == 'mma_interp_wgrad'
    assert path(64, 27, torch.float16) == 'interp_vec_wgrad'  # below 28 x 28
    assert path(64, 56, torch.float32) == 'interp_vec_wgrad'
    assert path(40, 56, torch.bfloat16) == 'interp_vec_wgrad'  # C not a multiple of 16
    assert path(64, 56, torch.bfloat16, k=63) == 'interp_vec_wgrad'  # offsets beyond the union's grid
