"""Representative calls of the CUDA op for compute-sanitizer: every kernel path of every pass, each
dtype, both layouts, strides 1-3, K from 1 to 63, planes with partial tiles, the four roundings (the
interpolated ones with learnable angles), all at small sizes; with and without bias, each case twice
with the same angles (table cache build, then hit). Then the channels-last layer norm's forward and
backward (with GELU, vector and scalar rows, up to the widest fused backward, odd row counts), and
the blocks' residual (``scaled_residual``: both layouts, vector and element-wise kernels, with and
without a bias) and the GELU of the "++" convolution's backward (``gelu_and_grad``: vector and
element-wise packs, with and without a bias).

    compute-sanitizer --tool memcheck python .dev_scripts/sanitize_op.py
    compute-sanitizer --tool racecheck python .dev_scripts/sanitize_op.py

(``--quick``: every other case; ``--shard I/N``: the cases whose index is I modulo N, with the seeds
of the full run, so that N processes side by side cover every case; ``--only WORD``: the op's cases
one of whose paths begins with WORD, with their seeds of the full run, and no other kind of case;
``--covered LOG ...``: no GPU work, the check that the paths these runs' logs print cover every path.)

Prints the path of each call and the set of paths covered; exits non-zero if a call raised or a path
of the compiled families (``oriented_dwconv1d_paths``) was not covered.
"""
import argparse
import math

import torch

from mmo1d.ops import (
    layer_norm_last,
    oriented_angles,
    oriented_dwconv1d,
    oriented_dwconv1d_path,
    oriented_dwconv1d_paths,
    scaled_residual,
)

PASSES = ('forward', 'backward_input', 'backward_weight')
# (N, C, H, W, K, stride, dtype, layout[, rounding[, angles]]): chosen so that every path appears.
CASES = [
    (2, 64, 40, 36, 15, 2, torch.float16, 'channels_last'),   # s2_gather, win_gather_classes, vec_wgrad_classes
    (2, 64, 64, 64, 15, 2, torch.bfloat16, 'channels_last'),  # the stem shape that once failed to launch
    (2, 32, 33, 35, 31, 2, torch.float32, 'channels_last'),
    (2, 64, 29, 30, 31, 1, torch.bfloat16, 'channels_last'),  # win_gather, vec_wgrad
    (2, 256, 56, 56, 31, 1, torch.float16, 'channels_last'),  # win_gather: blocks of one segment list
    (16, 288, 33, 33, 31, 1, torch.bfloat16, 'channels_last'),  # win_gather: grown regions, the blocks' full share
    (16, 64, 225, 223, 15, 2, torch.float16, 'channels_last'),  # s2_gather: grown tiles
    (2, 20, 29, 30, 31, 1, torch.float16, 'channels_last'),   # vec_gather (C not a multiple of 16)
    (2, 40, 56, 56, 31, 1, torch.bfloat16, 'channels_last'),  # vec_wgrad: 13 outputs per thread (28 x 28 tiles)
    (2, 20, 64, 64, 31, 1, torch.float32, 'channels_last'),   # vec_wgrad: 16 outputs per thread (32 x 32 tiles)
    (2, 48, 10, 10, 31, 1, torch.bfloat16, 'channels_last'),  # vec_wgrad: four groups of warps share the points
    (2, 40, 7, 7, 15, 1, torch.float32, 'channels_last'),     # vec_wgrad: eight groups of warps
    (2, 48, 14, 14, 31, 1, torch.bfloat16, 'channels_last'),  # vec_wgrad: the points across the slots
    (3, 40, 14, 13, 63, 1, torch.float16, 'channels_last'),   # ... two slices, element staging
    (2, 32, 20, 20, 15, 1, torch.float32, 'channels_last'),   # ... slices of 16 points, two blocks per SM
    (17, 3072, 7, 7, 31, 1, torch.bfloat16, 'channels_last'),  # win_gather: lines clipped, three images a block
    (2, 64, 13, 13, 31, 2, torch.bfloat16, 'channels_last'),  # win_gather_classes: lines clipped to a 7 x 7 dy
    (40, 1536, 14, 14, 15, 1, torch.float16, 'channels_last'),  # win_gather: groups of images, two buffers
    (24, 1536, 9, 9, 31, 1, torch.bfloat16, 'channels_last'),  # win_gather: diagonal pieces, two images a group
    (22, 1536, 14, 15, 15, 1, torch.float16, 'channels_last'),  # ... a row below the group for the last pieces
    (22, 1536, 28, 28, 9, 1, torch.bfloat16, 'channels_last'),   # win_gather: groups of images, one buffer
    (2, 40, 21, 19, 63, 1, torch.float32, 'channels_last'),
    # mma_wgrad: groups of 8 channels straddling two directions, both views, partial last tiles, the
    # diagonals' blocks to vec_wgrad; with arbitrary angles the blocks of more than two offset lists a
    # group go to vec_wgrad in the same call.
    (2, 96, 57, 49, 31, 1, torch.float16, 'channels_last', 'trunc'),
    (2, 64, 50, 48, 31, 1, torch.bfloat16, 'channels_last', 'trunc', 'arbitrary'),
    (34, 1024, 48, 48, 7, 1, torch.float16, 'channels_last', 'trunc'),  # ... two images a block
    # mma_interp_wgrad: the blocks' united points, the blocks it leaves to interp_vec_wgrad's skipping kernel
    (2, 64, 56, 56, 31, 1, torch.bfloat16, 'channels_last', 'bilinear', 'learned'),
    (3, 96, 50, 52, 15, 1, torch.float16, 'channels_last', 'gaussian', 'learned'),
    (2, 24, 37, 33, 31, 1, torch.float32, 'nchw'),            # seg_gather, seg_wgrad
    (2, 24, 70, 66, 7, 1, torch.bfloat16, 'nchw'),
    (2, 16, 25, 27, 31, 2, torch.float16, 'nchw'),            # general_gather_nchw, general_wgrad_nchw
    (2, 16, 25, 27, 9, 3, torch.float32, 'channels_last'),    # general_gather_nhwc, general_wgrad_nhwc
    (2, 16, 25, 27, 15, 1, torch.float64, 'channels_last'),
    (1, 8, 20, 21, 63, 1, torch.float64, 'channels_last'),    # general_gather_nchw through NCHW copies
    (2, 8, 11, 13, 1, 1, torch.float32, 'nchw'),
    (1, 3, 5, 7, 5, 3, torch.bfloat16, 'channels_last'),
    (2, 64, 25, 30, 31, 1, torch.bfloat16, 'channels_last', 'bilinear'),  # interp_win, interp_vec_wgrad
    (2, 20, 29, 30, 15, 1, torch.float16, 'channels_last', 'gaussian'),   # interp_vec (unaligned channels)
    (2, 64, 29, 30, 15, 2, torch.bfloat16, 'channels_last', 'bilinear'),  # interp_gather_nhwc,
    # interp_vec_wgrad_classes (the weight gradient per parity class; interp_wgrad_nhwc: stride 3 below)
    (2, 32, 45, 37, 31, 2, torch.bfloat16, 'channels_last', 'bilinear'),  # ... small tiles: 2 outputs a thread
    (2, 32, 45, 37, 31, 2, torch.float64, 'channels_last', 'bilinear'),  # interp_wgrad_nhwc: the weight gradient
    # with the points across the slots (the general kernels' small tiles)
    (2, 24, 25, 27, 15, 2, torch.float32, 'nchw', 'gaussian'),           # interp_gather_nchw, interp_wgrad_nchw
    (2, 24, 29, 30, 31, 1, torch.bfloat16, 'nchw', 'bilinear'),          # interp_seg, interp_seg_wgrad
    (2, 24, 29, 30, 31, 1, torch.float32, 'nchw', 'bilinear'),           # (16-bit: sum columns of two lanes)
    (1, 8, 56, 60, 31, 1, torch.float32, 'nchw', 'gaussian'),            # float32, two tasks per thread
    (1, 8, 20, 21, 63, 1, torch.float64, 'channels_last', 'gaussian'),
    (1, 3, 5, 7, 5, 3, torch.float16, 'channels_last', 'bilinear'),  # interp_wgrad_nhwc (stride 3)
    (2, 48, 29, 30, 31, 1, torch.float16, 'channels_last', 'gaussian'),   # interp_win, lanes across 2 angles
    # interp_win with per-channel angles: blocks that walk the union of their channels' points
    # (learned: the 8 directions moved by up to 0.05 rad), blocks that keep their own (arbitrary).
    (2, 24, 56, 56, 31, 1, torch.bfloat16, 'channels_last', 'bilinear', 'learned'),  # 7 outputs per thread (wgrad)
    (2, 64, 29, 30, 31, 1, torch.bfloat16, 'channels_last', 'bilinear', 'learned'),
    (2, 32, 23, 26, 31, 1, torch.float32, 'channels_last', 'gaussian', 'arbitrary'),
    (2, 48, 7, 7, 31, 1, torch.bfloat16, 'channels_last', 'bilinear', 'learned'),  # wgrad: groups of warps
    (2, 48, 14, 14, 31, 1, torch.bfloat16, 'channels_last', 'bilinear', 'learned'),  # wgrad: points across slots
    (2, 64, 58, 60, 15, 2, torch.float16, 'channels_last', 'bilinear', 'learned'),  # wgrad classes, united rows
    (2, 24, 33, 35, 15, 2, torch.float32, 'channels_last', 'gaussian', 'arbitrary'),  # ... own rows, float32
    (2, 40, 16, 13, 15, 1, torch.float16, 'channels_last', 'gaussian', 'arbitrary'),  # ... lanes' own points
    # interp_win on planes that one block covers: several images a block over the tables' merged weights
    (23, 1536, 14, 14, 31, 1, torch.bfloat16, 'channels_last', 'bilinear', 'learned'),  # groups of one image
    (33, 1536, 7, 7, 31, 1, torch.float16, 'channels_last', 'gaussian', 'arbitrary'),  # three a block, own lists
]


def run(case, seed: int, only: str = '') -> list:
    n, c, h, w, k, s, dtype, layout = case[:8]
    rounding = case[8] if len(case) > 8 else ('trunc' if seed % 3 else 'floor')
    interp = rounding in ('bilinear', 'gaussian')
    g = torch.Generator().manual_seed(seed)
    cast = dict(device='cuda', dtype=dtype)
    x = torch.randn(n, c, h, w, generator=g).to(**cast)
    gy = torch.randn(n, c, -(-h // s), -(-w // s), generator=g).to(**cast)
    if layout == 'channels_last':
        x, gy = x.contiguous(memory_format=torch.channels_last), gy.contiguous(memory_format=torch.channels_last)
    weight = (torch.randn(c, k, generator=g) / math.sqrt(k)).to(**cast)
    theta = oriented_angles(c, 8, 0.5) + (0.03 if interp else 0.0)
    spread = case[9] if len(case) > 9 else 'groups'
    if spread == 'learned':
        theta = oriented_angles(c) + 0.05 * (2 * torch.rand(c, generator=g) - 1)
    elif spread == 'arbitrary':
        theta = torch.rand(c, generator=g) * math.pi
    theta = theta.cuda()
    paths = [oriented_dwconv1d_path(x, weight, s, p, theta, rounding, 1.2) for p in PASSES]
    if only and not any(p.startswith(only) for p in paths):
        return []
    x.requires_grad_()
    weight.requires_grad_()
    theta.requires_grad_(interp)
    # Odd seeds add a bias (its gradient is fused into the weight gradient's reduction).
    bias = torch.randn(c, generator=g).to(**cast).requires_grad_() if seed % 2 else None
    params = [x, weight] + ([bias] if bias is not None else []) + ([theta] if interp else [])
    # Twice with the same angles: the first call builds the cached table structures, the second
    # reads them (with merged weights from this call's weight).
    for _ in range(2):
        out = oriented_dwconv1d(x, weight, theta, bias, s, rounding, seed % 2 == 0, 0.6, 1.2)
        torch.autograd.grad(out, params, gy)
    torch.cuda.synchronize()
    return paths


# (rows, C, input dtype, output dtype, gelu) of the layer norm.
LAYER_NORM_CASES = [
    (37, 96, torch.float32, torch.float16, False),
    (301, 384, torch.float16, torch.float16, True),
    (77, 768, torch.bfloat16, torch.float32, False),
    (5, 1022, torch.float32, torch.float32, True),   # C not a multiple of the vector width
    (9, 1024, torch.float16, torch.float16, False),  # the widest fused backward
    (3, 7, torch.float64, torch.float64, True),
]


def run_layer_norm(case: tuple, seed: int) -> None:
    rows, c, dtype, out_dtype, gelu = case
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, c, generator=g).to('cuda', dtype).requires_grad_()
    weight = torch.randn(c, generator=g, dtype=torch.float64 if dtype == torch.float64 else torch.float32)
    bias = torch.randn(c, generator=g, dtype=weight.dtype)
    weight, bias = weight.cuda().requires_grad_(), bias.cuda().requires_grad_()
    out = layer_norm_last(x, weight, bias, 1e-6, gelu, out_dtype)
    torch.autograd.grad(out, [x, weight, bias], torch.randn_like(out))
    torch.cuda.synchronize()


# (shape, shortcut dtype, branch dtype, scale's batch, channels_last, bias) of the residual: vector
# accesses in both layouts, and channels (channels_last) or planes (NCHW) not a multiple of 4; with a
# bias (the blocks' pw2 bias) in both layouts, one and several packs a thread.
RESIDUAL_CASES = [
    ((3, 96, 14, 13), torch.float32, torch.bfloat16, True, True, False),
    ((2, 40, 9, 8), torch.float16, torch.float16, False, False, False),
    ((2, 18, 7, 5), torch.float32, torch.float16, True, True, False),
    ((3, 20, 5, 7), torch.float32, torch.float32, False, False, False),
    ((2, 2048, 2, 3), torch.float32, torch.bfloat16, True, True, False),  # several packs a thread
    ((2, 1030, 3, 3), torch.float32, torch.float16, False, True, False),
    ((3, 96, 14, 13), torch.float32, torch.bfloat16, True, True, True),
    ((2, 18, 7, 5), torch.float32, torch.float16, False, True, True),
    ((2, 40, 9, 8), torch.float32, torch.bfloat16, True, False, True),
    ((2, 2048, 2, 3), torch.float32, torch.float16, False, True, True),
]


def run_residual(case: tuple, seed: int) -> None:
    shape, shortcut_dtype, branch_dtype, per_image, channels_last, with_bias = case
    g = torch.Generator().manual_seed(seed)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    shortcut = torch.randn(shape, generator=g).to('cuda', shortcut_dtype).contiguous(memory_format=fmt)
    branch = torch.randn(shape, generator=g).to('cuda', branch_dtype).contiguous(memory_format=fmt)
    scale = torch.rand((shape[0] if per_image else 1, shape[1], 1, 1), generator=g).cuda()
    bias = torch.randn(shape[1], generator=g).cuda() if with_bias else None
    leaves = [t.requires_grad_() for t in (shortcut, branch, scale, bias) if t is not None]
    out = scaled_residual(shortcut, branch, scale, bias)
    torch.autograd.grad(out, leaves, torch.randn_like(out))
    torch.cuda.synchronize()


# (shape, dtype, channels_last, offset in elements, bias) of gelu_and_grad: without a bias, 16-byte packs
# in both layouts and element-wise ones where the size or the offset breaks them; with a bias
# ('grad': the backward's call, 'forward': the GELU output alone), channels_last rows in one to three
# column chunks.
GELU_CASES = [
    ((3, 96, 14, 13), torch.bfloat16, True, 0, None),
    ((2, 40, 9, 8), torch.float32, False, 0, None),
    ((2, 18, 7, 5), torch.float16, True, 0, None),  # 1260 elements: not a multiple of 8
    ((2, 16, 6, 6), torch.float16, False, 1, None),
    ((3, 384, 7, 9), torch.bfloat16, True, 0, 'grad'),
    ((2, 4096, 3, 3), torch.float16, True, 0, 'grad'),
    ((2, 48, 5, 5), torch.float32, True, 0, 'forward'),
    ((1, 6144, 2, 3), torch.bfloat16, True, 0, 'grad'),
    ((1, 8200, 1, 3), torch.float16, True, 0, 'grad'),  # three column chunks, an idle thread
    ((2, 384, 5, 7), torch.bfloat16, True, 0, 'forward'),
]


def run_gelu(case: tuple, seed: int) -> None:
    shape, dtype, channels_last, offset, bias = case
    g = torch.Generator().manual_seed(seed)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    size = math.prod(shape)
    pre, grad = (torch.randn(size + offset, generator=g).to('cuda', dtype)[offset:].view(shape) for _ in range(2))
    if channels_last:
        pre, grad = (t.contiguous(memory_format=fmt) for t in (pre, grad))
    b = None if bias is None else torch.randn(shape[1], generator=g).cuda()
    torch.ops.mmo1d.gelu_and_grad(pre, None if bias == 'forward' else grad, b)
    torch.cuda.synchronize()


def missing_paths(seen) -> list:
    """The paths of the compiled families (``oriented_dwconv1d_paths``) that none of ``seen`` takes."""
    return sorted(set(oriented_dwconv1d_paths()) - {p.split('+')[0] for p in seen})


def covered_in_logs(logs: list) -> None:
    """Checks the union of the paths that the case lines of these logs print (``(...) ... -> paths``)."""
    seen = set()
    for log in logs:
        with open(log) as f:
            for line in f:
                if line.startswith('(') and ' -> ' in line:
                    seen.update(p.strip() for p in line.split(' -> ', 1)[1].split(','))
    missing = missing_paths(seen)
    print(f'{len(oriented_dwconv1d_paths()) - len(missing)} paths covered over the logs')
    if missing:
        raise SystemExit(f'paths not covered: {", ".join(missing)}')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true', help='every other case (for racecheck)')
    parser.add_argument('--shard', default='0/1', metavar='I/N', help='the cases whose index is I modulo N')
    parser.add_argument('--only', default='', metavar='WORD', help='the op cases of a path that begins with WORD')
    parser.add_argument('--covered', nargs='+', metavar='LOG', help="check the paths of these runs' logs and exit")
    args = parser.parse_args()
    if args.covered:
        covered_in_logs(args.covered)
        return
    shard, shards = (int(v) for v in args.shard.split('/'))
    if not 0 <= shard < shards:
        parser.error(f'--shard {args.shard}: I must lie in [0, N)')
    seen = set()
    for i, case in enumerate(CASES[::2] if args.quick else CASES):
        if i % shards != shard:
            continue
        paths = run(case, i, args.only)
        if not paths:
            continue
        seen.update(paths)
        print(case[:6], str(case[6]).replace('torch.', ''), *case[7:], '->', ', '.join(paths), flush=True)
    print(f'{len(seen)} paths covered: {", ".join(sorted(seen))}')
    if args.only:
        return
    for i, case in enumerate(LAYER_NORM_CASES[::2] if args.quick else LAYER_NORM_CASES):
        if i % shards != shard:
            continue
        run_layer_norm(case, i)
        print('layer norm', case[:2], *(str(t).replace('torch.', '') for t in case[2:4]), 'gelu' * case[4], flush=True)
    for i, case in enumerate(RESIDUAL_CASES[::2] if args.quick else RESIDUAL_CASES):
        if i % shards != shard:
            continue
        run_residual(case, i)
        print('residual', case[0], *(str(t).replace('torch.', '') for t in case[1:3]), 'bias' * case[5], flush=True)
    for i, case in enumerate(GELU_CASES[::2] if args.quick else GELU_CASES):
        if i % shards != shard:
            continue
        run_gelu(case, i)
        print('gelu_and_grad', case[0], str(case[1]).replace('torch.', ''), case[4] or '', flush=True)
    missing = missing_paths(seen)
    if missing and not args.quick and shards == 1:
        raise SystemExit(f'paths not covered: {", ".join(missing)}')


if __name__ == '__main__':
    main()
