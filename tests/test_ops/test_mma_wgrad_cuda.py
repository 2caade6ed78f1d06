"""The tensor-core weight gradient (path ``mma_wgrad``, sm_90 and later) against a float64 oracle.

It serves float16 and bfloat16 channels_last calls at stride 1 with C a multiple of 16 on planes of
at least 48 x 48; per block of 16 channels it takes those whose groups of 8 channels hold at most two
offset lists (the models' direction groups, also where a group straddles two of them) and whose lines
lie within 22.5 degrees of an axis, and leaves the others (the diagonals, arbitrary per-channel angles)
to the vector weight gradient in the same call. Cases: the 8 directions at the models' widths (C = 96
puts two directions in a group of 8), single angles along the rows and the columns, the diagonals and
arbitrary angles (both kernels in one call), odd and wide planes, K from 7 to 63; dw and db within the
float32 accumulation bound of the sum of |dy x|, also where a block takes several images; and a NaN in one
channel leaves the others' sums finite.
"""
import math

import pytest
import torch

from mmo1d.ops import oriented_dwconv1d_path, oriented_dwconv1d_reference

from .utils import cuda_wgrad_inputs as inputs

pytestmark = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability() < (9, 0),
                                reason='needs a CUDA GPU of compute capability 9.0 or newer')

_ops = torch.ops.mmo1d
CL = torch.channels_last


def params_grad(grad, x, weight, theta):
    dw, _, db = _ops.oriented_dwconv1d_backward_params(grad, x, weight, theta, 1, 'trunc', 0.5, 1.0, True, False)
    return dw, db


def oracle(x, weight, theta, grad):
    """dw and db of the reference op in float64, and the same sums over |x| and |dy| (the error scale)."""
    def run(xs, gs):
        xd = xs.double().requires_grad_()
        wd = weight.double().requires_grad_()
        bd = torch.zeros(weight.shape[0], dtype=torch.float64, device=x.device, requires_grad=True)
        out = oriented_dwconv1d_reference(xd, wd, theta.double(), bd, 1, 'trunc')
        return torch.autograd.grad(out, [wd, bd], gs.double())
    return run(x, grad), run(x.abs(), grad.abs())


def assert_close(name, got, ref, scale, terms, dtype):
    eps = 2.0**-11 if dtype == torch.float16 else 2.0**-8
    tol = 2 * eps * ref.abs() + (4 * math.sqrt(terms) + 4) * 2.0**-24 * scale + torch.finfo(dtype).tiny
    diff = (got.double() - ref).abs()
    bad = diff > tol
    assert not bad.any(), f'{name}: {int(bad.sum())} of {bad.numel()} off, worst {(diff / tol).max().item():.3g}x'


CASES = [
    # (N, C, H, W, K, angles)
    (4, 384, 56, 56, 31, 'mixed8'),   # the ++ blocks' 4C tensor, stage 1
    (4, 96, 56, 56, 31, 'mixed8'),    # 12 channels a direction: groups of 8 straddling two
    (2, 768, 48, 48, 31, 'mixed8'),   # the 4C tensor of an ADE20K crop's stage 2
    (2, 64, 52, 49, 31, 0.0),         # rows
    (2, 64, 49, 52, 31, 90.0),        # columns
    (2, 64, 50, 50, 31, 45.0),        # diagonals: every block the vector kernel's
    (2, 64, 48, 61, 31, 22.5),
    (2, 64, 61, 48, 31, 112.5),
    (2, 64, 57, 83, 15, 'mixed8'),    # odd plane, the last tiles partial
    (1, 96, 100, 334, 31, 'mixed8'),  # a COCO image's stage 1: several tiles along the rows
    (2, 128, 50, 50, 31, 'arbitrary'),  # lists per group beyond two: the vector kernel's blocks beside
    (2, 64, 48, 50, 7, 'mixed8'),
    (2, 32, 48, 48, 63, 'mixed8'),    # K=63: the 22.5-degree lines' blocks taken, the others not
    (3, 48, 49, 51, 13, 67.5),
    (1, 32, 3, 800, 31, 'mixed8'),    # planes narrower than a tile and than the line
    (1, 16, 800, 3, 15, 90.0),
    (40, 1024, 48, 48, 7, 'mixed8'),  # two images a block (an H200's 132 SMs: 33 chunks of images)
]


@pytest.mark.parametrize('dtype', [torch.float16, torch.bfloat16])
@pytest.mark.parametrize('case', CASES, ids=lambda c: 'x'.join(map(str, c[:5])) + f'-{c[5]}')
def test_mma_weight_and_bias_gradient(case, dtype):
    n, c, h, w, k, angles = case
    x, weight, theta, grad = inputs(n, c, h, w, k, dtype, angles, seed=h * w + k)
    assert oriented_dwconv1d_path(x, weight, 1, 'backward_weight', theta) == 'mma_wgrad'
    dw, db = params_grad(grad, x, weight, theta)
    (ref_dw, ref_db), (abs_dw, abs_db) = oracle(x, weight, theta, grad)
    assert_close('dw', dw, ref_dw, abs_dw, n * h * w, dtype)
    assert_close('db', db, ref_db, abs_db, n * h * w, dtype)
    # Deterministic: the same call, the same bits.
    dw2, db2 = params_grad(grad, x, weight, theta)
    assert torch.equal(dw, dw2) and torch.equal(db, db2)


def test_mma_domain():
    def path(c, h, dtype, stride=1):
        x = torch.randn(2, c, h, h, device='cuda', dtype=dtype).contiguous(memory_format=CL)
        return oriented_dwconv1d_path(x, torch.randn(c, 31, device='cuda', dtype=dtype), stride, 'backward_weight')

    assert path(64, 56, torch.bfloat16) == 'mma_wgrad'
    assert path(64, 48, torch.float16) == 'mma_wgrad'
    assert path(64, 28, torch.float16) == 'vec_wgrad'  # below 48 x 48
    assert path(64, 56, torch.float32) == 'vec_wgrad'
    assert path(40, 56, torch.bfloat16) == 'vec_wgrad'  # C not a multiple of 16
    assert path(64, 56, torch.bfloat16, 2) == 'vec_wgrad_classes'
    x = torch.randn(2, 64, 56, 56, device='cuda', dtype=torch.bfloat16)  # NCHW
    assert oriented_dwconv1d_path(x, torch.randn(64, 31, device='cuda', dtype=torch.bfloat16), 1,
                                  'backward_weight') == 'seg_wgrad'


def test_mma_nan_stays_in_its_channel():
    """The products pair every channel of a group with every other; only the diagonal is kept."""
    x, weight, theta, grad = inputs(2, 64, 48, 48, 31, torch.bfloat16, 'mixed8', seed=5)
    x[0, 3, 20, 20] = float('nan')
    dw, db = params_grad(grad, x, weight, theta)
    finite = torch.isfinite(dw.float().reshape(64, -1)).all(1)
    assert not finite[3] and finite[torch.arange(64) != 3].all()
    assert torch.isfinite(db).all()
