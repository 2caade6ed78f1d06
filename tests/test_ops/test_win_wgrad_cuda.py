"""The channels_last window weight gradient (path ``win_wgrad_nhwc``) against the float64 reference.

The cases pin what its blocks do differently from the gathers: chunks of points kept over many tasks
(long segments at the axes and diagonals, short ones in between), quarters of a channel block whose
channels straddle two angle groups (walked one channel at a time), planes larger than a block's tile,
planes smaller than one task, several images per block, and the bias gradient summed alongside.
"""
import math

import pytest
import torch

from mmo1d.ops import oriented_angles, oriented_dwconv1d_path, oriented_dwconv1d_reference

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA GPU')

_ops = torch.ops.mmo1d
# Unit roundoff of the output dtype; the kernel accumulates in float32.
EPS = {torch.float32: 2.0**-24, torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8}


def angles(layout: str, c: int, g: torch.Generator) -> torch.Tensor:
    if layout == 'eight':  # the models' 8 directions in contiguous groups
        return oriented_angles(c)
    if layout == 'random':
        return torch.rand(c, generator=g, dtype=torch.float64).mul(math.pi).float()
    return torch.full((c, ), math.radians(float(layout)))


def reference_dw(x, grad, weight, theta, floor):
    """dw of the reference op in float64, and the same on |x|, |grad| (the scale of its rounding)."""
    rounding = 'floor' if floor else 'trunc'
    out = []
    for a, b in ((x, grad), (x.abs(), grad.abs())):
        w = weight.detach().double().requires_grad_()
        y = oriented_dwconv1d_reference(a.double(), w, theta, None, 1, rounding)
        out.append(torch.autograd.grad(y, w, b.double())[0])
    return out


CASES = [
    # n, c, h, w, k, angles, dtype
    (2, 384, 56, 56, 31, 'eight', torch.bfloat16),  # the ++ blocks' 4C convolution, stage 1
    (3, 96, 56, 56, 31, 'eight', torch.float16),
    (2, 48, 29, 30, 31, 'eight', torch.bfloat16),  # 6 channels a group: quarters straddle two angles
    (2, 48, 33, 35, 13, 'eight', torch.float32),
    (2, 32, 40, 36, 31, 'random', torch.float16),
    (2, 16, 130, 70, 31, '22.5', torch.bfloat16),  # three x two tiles of the plane
    (1, 16, 70, 130, 15, '45', torch.float32),
    (2, 16, 57, 61, 31, '90', torch.float16),
    (2, 16, 57, 61, 31, '135', torch.bfloat16),
    (2, 16, 57, 61, 31, '0', torch.float32),
    (3, 64, 1, 2, 31, 'eight', torch.float16),  # one row of two pixels: nearly every tap outside
    (2, 64, 2, 3, 7, 'random', torch.bfloat16),
    (16, 64, 7, 7, 31, 'eight', torch.bfloat16),  # several images per block
    (2, 16, 20, 21, 1, '30', torch.float32),
]


def case_id(case) -> str:
    n, c, h, w, k, layout, dtype = case
    return f'{n}x{c}x{h}x{w}-k{k}-{layout}-{str(dtype)[6:]}'


@pytest.mark.parametrize('case', CASES, ids=[case_id(c) for c in CASES])
@pytest.mark.parametrize('floor', [False, True], ids=['trunc', 'floor'])
def test_matches_reference_and_repeats(case, floor):
    n, c, h, w, k, layout, dtype = case
    g = torch.Generator().manual_seed(n * c + h + k)
    x = torch.randn(n, c, h, w, generator=g).cuda().to(dtype).contiguous(memory_format=torch.channels_last)
    grad = torch.randn(n, c, h, w, generator=g).cuda().to(dtype).contiguous(memory_format=torch.channels_last)
    weight = (torch.randn(c, k, generator=g) / math.sqrt(k)).cuda().to(dtype)
    theta = angles(layout, c, g).cuda()
    assert oriented_dwconv1d_path(x, weight, 1, 'backward_weight', theta) == 'win_wgrad_nhwc'
    dw, db = _ops.oriented_dwconv1d_backward_weight_bias(grad, x, weight, theta, 1, floor)
    ref, scale = reference_dw(x, grad, weight, theta, floor)
    # Rounding of the output and of a float32 accumulation of n * h * w products.
    acc = (4 * math.sqrt(n * h * w) + 4) * 2.0**-24
    tol = 2 * EPS[dtype] * ref.abs() + acc * scale + 1e-30
    worst = ((dw.double() - ref).abs() / tol).max().item()
    assert worst <= 1, f'dw off by {worst:.3g}x the tolerance'
    db_ref = grad.double().sum((0, 2, 3))
    db_tol = 2 * EPS[dtype] * db_ref.abs() + acc * grad.double().abs().sum((0, 2, 3)) + 1e-30
    assert ((db.double() - db_ref).abs() <= db_tol).all()
    # A fixed order of summation: the same bits on every call, and the weight-gradient op agrees.
    dw2, db2 = _ops.oriented_dwconv1d_backward_weight_bias(grad, x, weight, theta, 1, floor)
    assert torch.equal(dw, dw2) and torch.equal(db, db2)
    assert torch.equal(dw, _ops.oriented_dwconv1d_backward_weight(grad, x, weight, theta, 1, floor))
