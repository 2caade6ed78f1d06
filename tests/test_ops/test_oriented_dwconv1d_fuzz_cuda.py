"""CUDA kernels at the shapes real configs produce: a seeded shape fuzz against a float64 oracle.

Shapes are drawn from what the models meet downstream: ImageNet 224/256/384 inputs, ADE20K 512/640
crops and slide-inference windows, COCO multi-scale images (480-800 short side, up to 1333 long
side), the 1D stems' planes at each of those sizes (stride 2, K = 15 or 31), every stage's plane of
the T/B/L models (C and 4C channels, stride 1), odd sizes, N 1-16, C 3-6144 aligned or not, K odd
1-63, strides 1-3, float32/float16/bfloat16/float64 x NCHW/channels_last/non-contiguous, the four
roundings (the interpolated ones with learnable angles); forward, input, weight and angle
gradients. Every kernel path of the dispatcher appears in the quick set (checked through
``oriented_dwconv1d_path``).

The oracle is the reference op (``mmo1d.ops.reference``, ``mmo1d.ops.interp_reference``) and its
autograd in float64 on the GPU; the same computation on absolute values bounds the rounding error
of each element (the angle's gradient, a sum of terms of both signs, is compared by its norm).

``MMO1D_FUZZ=long`` runs the long set (about ten times as many shapes).
"""
import math
import os
import random
from typing import List, NamedTuple

import pytest
import torch

from mmo1d.ops import (
    oriented_angles,
    oriented_dwconv1d,
    oriented_dwconv1d_path,
    oriented_dwconv1d_paths,
    oriented_dwconv1d_reference,
)
from mmo1d.ops.interp_reference import INTERPOLATIONS, oriented_dwconv1d_interp_reference

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA GPU')

LONG = os.environ.get('MMO1D_FUZZ', 'quick') == 'long'
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
LAYOUTS = ['nchw', 'channels_last', 'strided']
# Unit roundoff of each dtype (the output's rounding) and of its accumulation.
EPS = {torch.float64: 2.0**-53, torch.float32: 2.0**-24, torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8}
EPS_ACC = {torch.float64: 2.0**-53, torch.float32: 2.0**-24, torch.float16: 2.0**-24, torch.bfloat16: 2.0**-24}
PASSES = ('forward', 'backward_input', 'backward_weight')
# The general kernels' NCHW paths also serve channels_last tensors through NCHW copies.
VIA_COPIES = ('general_gather_nchw+nchw_copies', 'general_wgrad_nchw+nchw_copies')
# Elements of the reference's (N, C, K, H', W') gather per case: large planes get fewer images.
MAX_TAPS = 300_000_000
# Elements of the (N, C, K, H', W', samples) gather the oracle builds at once (a group of channels). Its
# float64 autograd graph is many times that size: at 300M one worker held 53 GiB; a third of it lets two
# test workers (pytest -n 2) share an 80 GB GPU.
ORACLE_TAPS = 100_000_000
# The gaussian band of the interpolated cases (no pixel on its edge: the radius is not an integer)
# and the samples per tap the interpolated reference gathers.
SIGMA, RADIUS = 0.6, 1.2
SAMPLES = {'trunc': 1, 'floor': 1, 'bilinear': 4, 'gaussian': (2 * math.ceil(RADIUS) + 2)**2}
# Relative error (to the norm) allowed in the angle's gradient.
# (float64: the reference's absolute positions round differently, see coefficient_error).
THETA_RTOL = {torch.float64: 1e-6, torch.float32: 2e-3, torch.float16: 2e-3, torch.bfloat16: 2e-3}


class Case(NamedTuple):
    n: int
    c: int
    h: int
    w: int
    k: int
    stride: int
    dtype: torch.dtype
    layout: str
    residual: bool
    rounding: str
    seed: int

    @property
    def id(self) -> str:
        dt = str(self.dtype).replace('torch.', '')
        extra = ('-res' if self.residual else '') + ('' if self.rounding == 'trunc' else f'-{self.rounding}')
        return f'{self.n}x{self.c}x{self.h}x{self.w}-k{self.k}-s{self.stride}-{dt}-{self.layout}{extra}'


# Image sizes (H, W) of the downstream recipes.
IMAGENET = [(224, 224), (256, 256), (384, 384)]
ADE = [(512, 512), (640, 640), (512, 683), (512, 512 + 171)]  # crops; slide windows keep 512 on one side
COCO = [(480, 640), (800, 1333), (800, 1199), (672, 1008), (608, 1085), (1333, 800), (544, 725)]
WIDTHS = {'T': (96, 192, 384, 768), 'B': (128, 256, 512, 1024), 'L': (192, 384, 768, 1536)}


def _clamp_n(rng: random.Random, c: int, h: int, w: int, k: int, stride: int, n_max: int = 16) -> int:
    cap = MAX_TAPS // max(1, c * k * -(-h // stride) * -(-w // stride))
    return rng.randint(1, max(1, min(n_max, cap)))


def _common(rng: random.Random) -> dict:
    r = rng.random()
    rounding = 'floor' if r < 0.15 else 'bilinear' if r < 0.3 else 'gaussian' if r < 0.4 else 'trunc'
    return dict(dtype=rng.choice(DTYPES), layout=rng.choice(LAYOUTS), residual=rng.random() < 0.3, rounding=rounding)


def stem_case(rng: random.Random, seed: int) -> Case:
    h, w = rng.choice(IMAGENET + ADE + COCO)
    # The 1D stems: stride-2 oriented convs at the input resolution, then at half of it.
    if rng.random() < 0.5:
        h, w = -(-h // 2), -(-w // 2)
    c = rng.choice([32, 48, 64, 64, 96, 128])
    k = rng.choice([15, 15, 31, 7])
    return Case(_clamp_n(rng, c, h, w, k, 2, 4), c, h, w, k, 2, seed=seed, **_common(rng))


def stage_case(rng: random.Random, seed: int) -> Case:
    h, w = rng.choice(IMAGENET + ADE + COCO)
    stage = rng.randrange(4)
    widths = WIDTHS[rng.choice(list(WIDTHS))]
    c = widths[stage] * rng.choice([1, 1, 4])  # the ++ models' second conv runs on 4C channels
    h, w = -(-h // 2**(stage + 2)), -(-w // 2**(stage + 2))
    k = rng.choice([31, 31, 15, 7, 5])
    return Case(_clamp_n(rng, c, h, w, k, 1), c, h, w, k, 1, seed=seed, **_common(rng))


def odd_case(rng: random.Random, seed: int) -> Case:
    c = rng.choice([3, 5, 8, 13, 16, 24, 31, 64, 100, 257, 1000, 6144])
    h, w = rng.randint(1, 97), rng.randint(1, 97)
    k = 2 * rng.randint(0, 31) + 1
    stride = rng.choice([1, 1, 2, 2, 3])
    return Case(_clamp_n(rng, c, h, w, k, stride), c, h, w, k, stride, seed=seed, **_common(rng))


# Cases that pin each path and the calls that once failed: the 1D++ stem at 512x512 and 64x64 in
# float16/bfloat16 channels_last (K=15, stride 2), and float64 channels_last with K=63, whose
# channels_last tile does not fit and which runs through NCHW copies.
ANCHORS = [
    Case(2, 64, 512, 512, 15, 2, torch.float16, 'channels_last', False, 'trunc', 1),
    Case(1, 64, 512, 512, 15, 2, torch.bfloat16, 'channels_last', False, 'trunc', 2),
    Case(2, 64, 64, 64, 15, 2, torch.bfloat16, 'channels_last', True, 'trunc', 3),
    Case(2, 64, 256, 256, 15, 2, torch.float16, 'channels_last', False, 'floor', 4),
    Case(2, 24, 40, 33, 63, 1, torch.float64, 'channels_last', False, 'trunc', 5),
    Case(2, 24, 40, 33, 31, 3, torch.float32, 'nchw', True, 'trunc', 6),
    Case(2, 24, 40, 33, 31, 3, torch.float16, 'channels_last', False, 'trunc', 7),
    Case(2, 20, 30, 31, 31, 1, torch.bfloat16, 'channels_last', False, 'trunc', 8),
    Case(2, 20, 30, 31, 31, 2, torch.float32, 'channels_last', False, 'trunc', 9),
    Case(4, 96, 56, 56, 31, 1, torch.float16, 'channels_last', True, 'trunc', 10),
    Case(4, 96, 56, 56, 31, 1, torch.float32, 'nchw', False, 'trunc', 11),
    Case(2, 32, 28, 28, 15, 2, torch.float32, 'nchw', False, 'trunc', 12),
    Case(2, 64, 100, 75, 31, 2, torch.bfloat16, 'channels_last', False, 'trunc', 13),
    # Stage 1 of the T models on an ADE20K crop (C and the ++ blocks' 4C), float16 channels_last.
    Case(2, 96, 128, 128, 31, 1, torch.float16, 'channels_last', False, 'trunc', 14),
    Case(2, 384, 128, 128, 31, 1, torch.float16, 'channels_last', True, 'trunc', 28),
    # Grids large enough for the window gather's grown regions (28 x 28 and 17 x 17 outputs a block)
    # staged in the blocks' full share of shared memory: the ++ 4C tensor of a training batch.
    Case(16, 384, 56, 56, 31, 1, torch.bfloat16, 'channels_last', True, 'trunc', 40),
    Case(16, 288, 33, 33, 31, 1, torch.float16, 'channels_last', False, 'bilinear', 41),
    # The stride-2 forward at odd sizes: grown tiles (bf16, K=15: more outputs a block at the same blocks
    # per SM) and the float32 tile's two-channel vector adds (K=31, whose tile keeps its size).
    Case(16, 64, 223, 221, 15, 2, torch.bfloat16, 'channels_last', True, 'trunc', 42),
    Case(8, 64, 225, 219, 31, 2, torch.float32, 'channels_last', False, 'trunc', 43),
    # The channels_last weight gradient's groups of warps that share out the points on planes of up to
    # 128 pixels (10 x 10 at K=31: four groups of 7 outputs; 7 x 7, stage 4 of the ImageNet models:
    # eight groups of 7).
    Case(8, 1536, 10, 10, 31, 1, torch.bfloat16, 'channels_last', True, 'trunc', 44),
    Case(16, 768, 7, 7, 15, 1, torch.float16, 'channels_last', False, 'trunc', 45),
    Case(4, 3072, 7, 7, 31, 1, torch.float32, 'channels_last', False, 'trunc', 46),
    # Several images a block over one staged halo (the later ones copy the plane alone; here the whole
    # batch: the partial sums' workspace allows one chunk), C not a multiple of the channel block
    # (staged element by element).
    Case(24, 1540, 7, 7, 31, 1, torch.float16, 'channels_last', True, 'trunc', 68),
    # ... and the interpolated weight gradient's (seed 47: learned angles, seed 48: arbitrary).
    Case(2, 48, 7, 7, 31, 1, torch.bfloat16, 'channels_last', False, 'bilinear', 47),
    Case(2, 40, 9, 11, 15, 1, torch.float32, 'channels_last', True, 'gaussian', 48),
    # The window gather on planes smaller than the line: lines clipped to the plane, and blocks of
    # several images where the grid keeps 8 blocks per SM on 132 SMs (7 x 7: three images a block
    # in bf16 at 4C = 3072 channels and in float32, two in fp16 at 1536 channels; the last block of
    # each batch holds fewer). One axis clipped (14 x 40), and the stride-2 input gradient's parity
    # classes on a 7 x 7 dy.
    Case(17, 3072, 7, 7, 31, 1, torch.bfloat16, 'channels_last', True, 'trunc', 49),
    Case(23, 1536, 7, 7, 15, 1, torch.float16, 'channels_last', False, 'trunc', 50),
    Case(10, 3072, 7, 7, 31, 1, torch.float32, 'channels_last', False, 'trunc', 51),
    Case(2, 96, 14, 40, 31, 1, torch.float16, 'channels_last', True, 'trunc', 52),
    Case(2, 64, 13, 13, 31, 2, torch.bfloat16, 'channels_last', False, 'trunc', 53),
    # ... and blocks that take their images in groups, one after the other, the last block fewer, each
    # 16-bit plane staged with a zero halo of at most OUTPUTS - 1: 14 x 14 planes one image a group (two
    # groups at K=31 with arbitrary angles; three at K=15 in the 8 directions; the next group staged while
    # one computes; float32 at K=31 with the lines' clipped halo), 28 x 28 planes in two groups (K=9, one
    # buffer), 7 x 7 four images a group, two groups.
    Case(23, 1536, 14, 14, 31, 1, torch.bfloat16, 'channels_last', True, 'trunc', 54),
    Case(40, 1536, 14, 14, 15, 1, torch.float16, 'channels_last', False, 'trunc', 56),
    Case(23, 1536, 14, 14, 31, 1, torch.float32, 'channels_last', False, 'trunc', 69),
    Case(22, 1536, 28, 28, 9, 1, torch.bfloat16, 'channels_last', True, 'trunc', 70),
    Case(96, 1536, 7, 7, 31, 1, torch.bfloat16, 'channels_last', False, 'floor', 55),
    # ... with the interpolated taps' tables (every channel's list staged, the tables' merged weights):
    # 14 x 14 planes one image a group, two groups, learned angles (blocks walk their union of points);
    # 7 x 7 three images a block, arbitrary angles (blocks keep their channels' own lists).
    Case(23, 1536, 14, 14, 31, 1, torch.bfloat16, 'channels_last', True, 'bilinear', 71),
    Case(33, 1536, 7, 7, 31, 1, torch.float16, 'channels_last', False, 'bilinear', 74),
    # Diagonal lines in pieces of the plane's whole diagonals (one round of the block's slots): two
    # 9 x 9 images a group (the pieces of the first read into the second's rows), 14 x 15 (the last
    # pieces read the row staged below the group).
    Case(24, 1536, 9, 9, 31, 1, torch.bfloat16, 'channels_last', False, 'trunc', 65),
    Case(22, 1536, 14, 15, 15, 1, torch.float16, 'channels_last', True, 'floor', 66),
    # The weight gradient with the points across the pixel slots, on planes of more than 128 pixels
    # that one block covers: C not a multiple of the channel block (dy and x staged element by element),
    # two slices of 32 points (K=63) with arbitrary angles (lanes whose channels differ), slices of 16
    # points (K=15) and of 8 (K=7), a plane at the two-block share (20 x 20 at K=31); 28 x 28 at K=15
    # stays with the slot kernel.
    Case(3, 100, 14, 13, 31, 1, torch.float16, 'channels_last', False, 'trunc', 57),
    Case(2, 24, 12, 12, 63, 1, torch.float32, 'channels_last', True, 'trunc', 58),
    Case(4, 48, 16, 16, 15, 1, torch.bfloat16, 'channels_last', False, 'floor', 59),
    Case(2, 64, 11, 17, 7, 1, torch.bfloat16, 'channels_last', True, 'trunc', 60),
    Case(3, 100, 28, 28, 15, 1, torch.float32, 'channels_last', False, 'trunc', 61),
    Case(2, 40, 20, 20, 31, 1, torch.float16, 'channels_last', True, 'trunc', 62),
    # Learnable angles: both interpolations in both layouts, the ++ 4C tensor, strides 2 and 3,
    # and float64 with a long kernel (channels_last through NCHW copies).
    Case(2, 384, 56, 56, 31, 1, torch.bfloat16, 'channels_last', True, 'bilinear', 16),
    Case(2, 96, 56, 56, 31, 1, torch.float16, 'channels_last', False, 'gaussian', 17),
    Case(2, 64, 40, 33, 15, 2, torch.float32, 'nchw', False, 'bilinear', 18),
    Case(2, 24, 40, 33, 31, 3, torch.float16, 'nchw', True, 'gaussian', 19),
    Case(1, 24, 30, 31, 63, 1, torch.float64, 'channels_last', False, 'gaussian', 20),
    # The interpolated vector paths with C not a multiple of the channel block (unaligned loads),
    # the window path with per-channel angles (seeds 22 and 30: arbitrary angles, whose blocks keep
    # their channels' own point lists; seed 27: learned angles on the ++ 4C tensor, whose blocks walk
    # the union of their channels' points), the general interpolated paths in channels_last at
    # stride 2.
    Case(2, 20, 29, 30, 15, 1, torch.float16, 'channels_last', True, 'bilinear', 21),
    Case(2, 40, 33, 28, 31, 1, torch.float32, 'channels_last', False, 'gaussian', 22),
    Case(2, 48, 33, 28, 31, 1, torch.bfloat16, 'channels_last', True, 'bilinear', 30),
    Case(2, 384, 56, 56, 31, 1, torch.float16, 'channels_last', False, 'bilinear', 27),
    Case(2, 64, 40, 33, 15, 2, torch.bfloat16, 'channels_last', False, 'bilinear', 24),
    # The general channels_last input gradient at stride 2 by parity class on output tiles of odd
    # origins (float64, K=59: 7 x 7 tiles of a 13 x 13 plane), and on the 1D++ stem's first plane.
    Case(2, 16, 13, 13, 59, 2, torch.float64, 'channels_last', True, 'trunc', 72),
    Case(2, 64, 224, 224, 15, 2, torch.float16, 'channels_last', True, 'bilinear', 73),
    # ... and the NCHW input gradient by parity class (odd plane sizes).
    Case(2, 8, 61, 59, 31, 2, torch.float32, 'nchw', True, 'trunc', 76),
    # ... and, at K=27 and 31, channels_last tiles of at most 128 outputs: the gather at 2 outputs a thread, the
    # weight gradient with the points across the slots.
    Case(2, 32, 45, 37, 31, 2, torch.bfloat16, 'channels_last', True, 'bilinear', 77),
    Case(2, 12, 23, 29, 27, 2, torch.float32, 'channels_last', False, 'trunc', 78),
    # The interpolated weight gradient with the points across the pixel slots (planes that one block
    # covers): the ++ 4C tensor at 14 x 14 (united points, four slices of 32), and C not a multiple of
    # the channel block (dy and x staged element by element); above 14 x 14 only tables of more than
    # 64 points (gaussian K=15: 90), bilinear K=15 (60) there with the grouped slot kernel.
    Case(3, 384, 14, 14, 31, 1, torch.bfloat16, 'channels_last', True, 'bilinear', 63),
    Case(2, 40, 16, 13, 15, 1, torch.float16, 'channels_last', False, 'gaussian', 64),
    Case(3, 96, 16, 16, 15, 1, torch.bfloat16, 'channels_last', True, 'bilinear', 67),
    # The interpolated NCHW segment paths (seed 26: arbitrary angles; seed 39: learned angles on a
    # plane of two rounds of weight-gradient tasks, walked two at a time in float32).
    Case(2, 24, 37, 33, 31, 1, torch.float32, 'nchw', True, 'gaussian', 25),
    Case(2, 40, 30, 29, 15, 1, torch.bfloat16, 'nchw', False, 'bilinear', 26),
    Case(2, 32, 56, 60, 31, 1, torch.float32, 'nchw', True, 'bilinear', 39),
]


def make_cases() -> List[Case]:
    rng = random.Random(20261123)
    makers = [stem_case, stage_case, stage_case, odd_case]
    count = 1200 if LONG else 110
    return ANCHORS + [rng.choice(makers)(rng, seed) for seed in range(100, 100 + count)]


CASES = make_cases()


def make_tensors(case: Case, device: str = 'cuda'):
    g = torch.Generator().manual_seed(case.seed)
    ho, wo = -(-case.h // case.stride), -(-case.w // case.stride)
    x = torch.randn(case.n, case.c, case.h, case.w, generator=g)
    grad = torch.randn(case.n, case.c, ho, wo, generator=g)
    weight = torch.randn(case.c, case.k, generator=g) / math.sqrt(case.k)
    bias = torch.randn(case.c, generator=g)
    # Angle layouts of the models (contiguous direction groups, both stem offsets), arbitrary angles,
    # and learned ones: each channel's direction moved by up to 0.05 rad.
    layout = case.seed % 4
    if layout == 2:
        theta = torch.rand(case.c, generator=g, dtype=torch.float64).mul(math.pi).float()
    else:
        theta = oriented_angles(case.c, 8, 0.5 if layout == 1 else 0.0)
        if layout == 3:
            theta = theta + 0.05 * (2 * torch.rand(case.c, generator=g) - 1)
    cast = dict(device=device, dtype=case.dtype)
    x, grad, weight, bias = (t.to(**cast) for t in (x, grad, weight, bias))
    if case.layout == 'channels_last':
        x, grad = x.contiguous(memory_format=torch.channels_last), grad.contiguous(memory_format=torch.channels_last)
    elif case.layout == 'strided':  # a view: neither NCHW- nor channels_last-contiguous
        x = torch.cat([x, x[..., :1]], dim=3)[..., :case.w]
        grad = torch.cat([grad, grad[..., :1]], dim=3)[..., :wo]
    return x, weight, theta.to(device), bias, grad


def reference(x, weight, theta, bias, stride, rounding, residual):
    """The reference op of either kind of rounding, in float64."""
    if rounding not in INTERPOLATIONS:
        return oriented_dwconv1d_reference(x, weight, theta, bias, stride, rounding, residual)
    out = oriented_dwconv1d_interp_reference(x, weight, theta, bias, stride, rounding, SIGMA, RADIUS)
    return out + x[:, :, ::stride, ::stride] if residual else out


def oracle(x, weight, theta, bias, grad, stride, rounding, residual):
    """Output, input, weight and (interpolations) angle gradients of the reference op in float64 (on
    the GPU).

    Channels are independent: the reference runs on groups of channels whose (N, C, K, H', W', M)
    gather stays within ORACLE_TAPS elements.
    """
    n, c, h, w = x.shape
    k = weight.shape[1]
    step = max(1, ORACLE_TAPS // max(1, n * k * SAMPLES[rounding] * -(-h // stride) * -(-w // stride)))
    outs, dxs, dws, dts = [], [], [], []
    for c0 in range(0, c, step):
        sl = slice(c0, c0 + step)
        xs = x[:, sl].detach().double().requires_grad_()
        ws = weight[sl].detach().double().requires_grad_()
        ts = theta[sl].detach().double().requires_grad_(rounding in INTERPOLATIONS)
        bs = None if bias is None else bias[sl].detach().double()
        out = reference(xs, ws, ts, bs, stride, rounding, residual)
        grads = torch.autograd.grad(out, [xs, ws] + ([ts] if ts.requires_grad else []), grad[:, sl].double())
        outs.append(out.detach())
        dxs.append(grads[0])
        dws.append(grads[1])
        dts.append(grads[2] if ts.requires_grad else None)
    return torch.cat(outs, 1), torch.cat(dxs, 1), torch.cat(dws, 0), None if dts[0] is None else torch.cat(dts)


def coefficient_error(case: Case) -> float:
    """Bound of the absolute error of an interpolated sample's coefficient.

    The op takes a tap's position relative to its output pixel, in float32 (float64 for float64
    calls); the reference takes the absolute position p*s + a in float64. Their fractional parts
    differ by the rounding of the larger of the two: an absolute error that matters where a
    coefficient is tiny (a tap next to a pixel, e.g. at 90 degrees, where the neighbour's weight is
    |d cos| ~ 1e-7), far below the other terms elsewhere.
    """
    if case.rounding not in INTERPOLATIONS:
        return 0.0
    if case.dtype != torch.float64:
        return 4 * 2.0**-24 * (case.k // 2 + 2)
    return 4 * 2.0**-53 * (max(case.h, case.w) + case.k // 2 + 2)


def assert_close(name: str, out: torch.Tensor, ref: torch.Tensor, scale: torch.Tensor, terms: int,
                 dtype: torch.dtype, extra=0.0) -> None:
    """|out - ref| <= rounding of the output + accumulation over `terms` products (+ `extra`, the
    effect of the interpolation coefficients' error), per element."""
    assert out.dtype == dtype, f'{name}: dtype {out.dtype}'
    assert out.shape == ref.shape, f'{name}: shape {tuple(out.shape)} != {tuple(ref.shape)}'
    diff = (out.double() - ref).abs()
    # Rounding of the output (relative, or the spacing of the subnormals near zero), and of an
    # accumulation of `terms` products (random-walk growth, with a margin), relative to the sum of
    # their magnitudes.
    info = torch.finfo(dtype)
    tol = 2 * EPS[dtype] * ref.abs() + info.tiny * info.eps + (4 * math.sqrt(terms) + 4) * EPS_ACC[dtype] * scale
    tol = tol + extra
    bad = diff > tol
    assert not bad.any(), (f'{name}: {int(bad.sum())} of {bad.numel()} elements off, worst '
                           f'{(diff / tol).max().item():.3g}x the tolerance')


@pytest.mark.parametrize('case', CASES, ids=[c.id for c in CASES])
def test_fuzz_matches_dense_oracle(case: Case):
    x, weight, theta, bias, grad = make_tensors(case)
    interp = case.rounding in INTERPOLATIONS
    xr = x.detach().requires_grad_()
    wr = weight.detach().requires_grad_()
    tr = theta.detach().requires_grad_(interp)
    out = oriented_dwconv1d(xr, wr, tr, bias, case.stride, case.rounding, case.residual, SIGMA, RADIUS)
    grads = torch.autograd.grad(out, [xr, wr] + ([tr] if interp else []), grad)
    torch.cuda.synchronize()
    ref_out, ref_dx, ref_dw, ref_dt = oracle(x, weight, theta, bias, grad, case.stride, case.rounding, case.residual)
    # The same computation on absolute values bounds every element's rounding error.
    abs_out, abs_dx, abs_dw, _ = oracle(x.abs(), weight.abs(), theta, None if bias is None else bias.abs(),
                                        grad.abs(), case.stride, case.rounding, case.residual)
    terms_dw = case.n * (-(-case.h // case.stride)) * (-(-case.w // case.stride))
    samples = SAMPLES[case.rounding]
    # A coefficient error delta moves an output by at most delta * samples * sum_t |w| * max |x|,
    # and likewise the gradients.
    delta = coefficient_error(case) * samples
    wsum = weight.double().abs().sum(1)[None, :, None, None]
    xmax, gmax = x.double().abs().max(), grad.double().abs().max()
    assert_close('output', out, ref_out, abs_out, case.k * samples + 2, case.dtype, delta * wsum * xmax)
    assert_close('grad_input', grads[0], ref_dx, abs_dx, case.k * samples + 1, case.dtype, delta * wsum * gmax)
    assert_close('grad_weight', grads[1], ref_dw, abs_dw, terms_dw * samples, case.dtype,
                 delta * terms_dw * xmax * gmax)
    if interp:
        dt = grads[2]
        assert dt.dtype == torch.float32 and torch.isfinite(dt).all()
        err = ((dt.double() - ref_dt).norm() / ref_dt.norm().clamp_min(1e-30)).item()
        assert err < THETA_RTOL[case.dtype], f'grad_theta: relative error {err:.3g}'
    dx = grads[0]
    fmt = torch.channels_last if case.layout == 'channels_last' else torch.contiguous_format
    assert out.is_contiguous(memory_format=fmt) and dx.is_contiguous(memory_format=fmt)


def test_every_path_is_in_the_quick_set():
    """Each kernel path of the compiled families serves at least one case (the dispatcher's own answer)."""
    seen = set()
    for case in CASES:
        x, weight, theta, _, _ = make_tensors(case)
        seen.update(oriented_dwconv1d_path(x, weight, case.stride, p, theta, case.rounding, RADIUS) for p in PASSES)
    families = set(oriented_dwconv1d_paths())
    missing = sorted(families - {p.split('+')[0] for p in seen} | set(VIA_COPIES) - seen)
    unknown = sorted({p.split('+')[0] for p in seen} - families)
    assert not missing and not unknown, f'paths {missing} never taken, unknown paths {unknown}'


def test_path_query_follows_the_domains():
    """Dtype, layout, stride and channel alignment pick the documented paths."""
    def path(c, h, k, stride, dtype, layout, p='forward'):
        x = torch.randn(2, c, h, h, device='cuda', dtype=dtype)
        if layout == 'channels_last':
            x = x.contiguous(memory_format=torch.channels_last)
        return oriented_dwconv1d_path(x, torch.randn(c, k, device='cuda', dtype=dtype), stride, p)

    assert path(64, 56, 31, 1, torch.bfloat16, 'channels_last') == 'win_gather'
    assert path(60, 56, 31, 1, torch.bfloat16, 'channels_last') == 'vec_gather'  # C not a multiple of 16
    assert path(64, 56, 31, 2, torch.float16, 'channels_last') == 's2_gather'
    assert path(64, 56, 31, 2, torch.float16, 'channels_last', 'backward_input') == 'win_gather_classes'
    assert path(64, 56, 31, 2, torch.float16, 'channels_last', 'backward_weight') == 'vec_wgrad_classes'
    assert path(64, 56, 31, 1, torch.float32, 'nchw') == 'seg_gather'
    assert path(64, 56, 31, 2, torch.float32, 'nchw') == 'general_gather_nchw'
    assert path(64, 56, 31, 1, torch.float64, 'channels_last') == 'general_gather_nhwc'
    assert path(64, 56, 31, 3, torch.float32, 'channels_last', 'backward_weight') == 'general_wgrad_nhwc'
    x = torch.randn(2, 64, 56, 56, device='cuda', dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last)
    w = torch.randn(64, 31, device='cuda', dtype=torch.bfloat16)
    assert oriented_dwconv1d_path(x, w, 1, 'forward', rounding='bilinear') == 'interp_win'
    assert oriented_dwconv1d_path(x, w, 1, 'backward_input', rounding='gaussian', radius=RADIUS) == 'interp_win'
    x60 = x[:, :60].contiguous(memory_format=torch.channels_last)  # C not a multiple of 16
    assert oriented_dwconv1d_path(x60, w[:60], 1, 'forward', rounding='bilinear') == 'interp_vec'
    w63 = torch.randn(64, 63, device='cuda', dtype=torch.bfloat16)  # offsets beyond the segment builder's grid
    assert oriented_dwconv1d_path(x, w63, 1, 'forward', rounding='bilinear') == 'interp_vec'
    # 56 x 56 16-bit planes: the tensor-core weight gradient from sm_90 on; 27 x 27: the vector one.
    mma = torch.cuda.get_device_capability() >= (9, 0)
    assert oriented_dwconv1d_path(x, w, 1, 'backward_weight', rounding='gaussian', radius=RADIUS) == \
        ('mma_interp_wgrad' if mma else 'interp_vec_wgrad')
    x27 = x[..., :27, :27].contiguous(memory_format=torch.channels_last)
    assert oriented_dwconv1d_path(x27, w, 1, 'backward_weight', rounding='gaussian', radius=RADIUS) == \
        'interp_vec_wgrad'
    assert oriented_dwconv1d_path(x, w, 2, 'forward', rounding='bilinear') == 'interp_gather_nhwc'
    assert oriented_dwconv1d_path(x, w, 2, 'backward_weight', rounding='gaussian', radius=RADIUS) == \
        'interp_vec_wgrad_classes'
    assert oriented_dwconv1d_path(x, w, 3, 'backward_weight', rounding='bilinear') == 'interp_wgrad_nhwc'
    assert oriented_dwconv1d_path(x.double(), w.double(), 1, 'forward', rounding='bilinear') == 'interp_gather_nhwc'
    assert oriented_dwconv1d_path(x.contiguous(), w, 2, 'backward_input', rounding='bilinear') == 'interp_gather_nchw'
    assert oriented_dwconv1d_path(x.contiguous(), w, 1, 'backward_input', rounding='bilinear') == 'interp_seg'
    assert oriented_dwconv1d_path(x.contiguous(), w, 1, 'backward_weight', rounding='gaussian', radius=RADIUS) == \
        'interp_seg_wgrad'
    with pytest.raises(ValueError, match='pass_ must be'):
        path(64, 56, 31, 1, torch.float32, 'nchw', 'sideways')
