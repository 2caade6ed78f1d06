"""Time the op's weight + bias gradient (and, with --full, the whole forward + backward against
cuDNN's 7x7 depthwise convolution) at the models' shapes, for comparing two builds of the extension.

    python .dev_scripts/bench_wgrad.py --label new --out results_new.json
    (cd .old && PYTHONPATH=$PWD python ../.dev_scripts/bench_wgrad.py --label old --out results_old.json)
    python .dev_scripts/bench_wgrad.py --compare results_old.json results_new.json

Times are CUDA-event medians over --iters calls after a warm-up, per case; each case also records
the relative error of dw against the float64 reference on two of its images.
"""
import argparse
import json
import math
import statistics

import torch

from mmo1d.benchmark.timing import time_ms
from mmo1d.ops import oriented_angles, oriented_dwconv1d, oriented_dwconv1d_path, oriented_dwconv1d_reference

DTYPES = {'bfloat16': torch.bfloat16, 'float16': torch.float16, 'float32': torch.float32}
# (N, C, H, W, K, angles): the ++ blocks' 4C convolutions of the T models at 224 (stages 1-4), the
# 1D blocks' C convolutions, single angles of the stage-1 4C tensor, and a segmentation crop's plane.
CASES = [
    (64, 384, 56, 56, 31, 'eight'),
    (64, 768, 28, 28, 31, 'eight'),
    (64, 1536, 14, 14, 31, 'eight'),
    (64, 3072, 7, 7, 31, 'eight'),
    (64, 96, 56, 56, 31, 'eight'),
    (64, 192, 28, 28, 31, 'eight'),
    (64, 384, 56, 56, 31, '0'),
    (64, 384, 56, 56, 31, '22.5'),
    (64, 384, 56, 56, 31, '45'),
    (64, 384, 56, 56, 31, '67.5'),
    (64, 384, 56, 56, 31, '90'),
    (64, 384, 56, 56, 7, 'eight'),
    (8, 96, 128, 128, 31, 'eight'),
]


def theta_of(layout: str, c: int) -> torch.Tensor:
    return oriented_angles(c) if layout == 'eight' else torch.full((c, ), math.radians(float(layout)))


def timed(fn, iters: int) -> float:
    return time_ms(lambda i: fn(), iters, warmup=5)


def rel_error(x, grad, weight, theta) -> float:
    x2, g2 = x[:2], grad[:2]
    dw, _ = torch.ops.mmo1d.oriented_dwconv1d_backward_weight_bias(g2, x2, weight, theta, 1, False)
    w = weight.detach().double().requires_grad_()
    y = oriented_dwconv1d_reference(x2.double(), w, theta, None, 1, 'trunc')
    ref = torch.autograd.grad(y, w, g2.double())[0]
    return ((dw.double() - ref).norm() / ref.norm()).item()


def case_row(args, dtype_name: str, case: tuple) -> dict:
    n, c, h, w, k, layout = case
    dtype = DTYPES[dtype_name]
    g = torch.Generator(device='cuda').manual_seed(c + h + k)
    cl = torch.channels_last
    x = torch.randn(n, c, h, w, device='cuda', generator=g).to(dtype).contiguous(memory_format=cl)
    grad = torch.randn(n, c, h, w, device='cuda', generator=g).to(dtype).contiguous(memory_format=cl)
    weight = (torch.randn(c, k, device='cuda', generator=g) / math.sqrt(k)).to(dtype)
    theta = theta_of(layout, c).cuda()
    op = torch.ops.mmo1d.oriented_dwconv1d_backward_weight_bias
    row = dict(label=args.label, dtype=dtype_name, n=n, c=c, h=h, w=w, k=k, angles=layout,
               path=oriented_dwconv1d_path(x, weight, 1, 'backward_weight', theta),
               wgrad_ms=timed(lambda: op(grad, x, weight, theta, 1, False), args.iters),
               rel_err=rel_error(x, grad, weight, theta))
    if args.full:
        xr = x.detach().requires_grad_()
        wr = weight.detach().requires_grad_()
        b = torch.zeros(c, device='cuda', dtype=dtype, requires_grad=True)
        w7 = torch.randn(c, 1, 7, 7, device='cuda', dtype=dtype, requires_grad=True)
        row['fwd_bwd_ms'] = timed(lambda: oriented_dwconv1d(xr, wr, theta, b, residual=True).backward(grad),
                                  args.iters)
        row['cudnn7x7_fwd_bwd_ms'] = timed(
            lambda: torch.nn.functional.conv2d(xr, w7, b, padding=3, groups=c).backward(grad), args.iters)
    return row


def compare(old_files, new_files) -> None:
    def load(files):
        rows = {}
        for f in files:
            with open(f) as fh:
                for r in json.load(fh):
                    key = (r['dtype'], r['n'], r['c'], r['h'], r['w'], r['k'], r['angles'])
                    rows.setdefault(key, []).append(r)
        return rows

    old, new = load(old_files), load(new_files)
    print('| dtype | N x C x H x W, K | angles | old path | old ms | new path | new ms (rounds) | new / old | '
          'rel. error old / new |')
    print('|---|---|---|---|---|---|---|---|---|')
    for key, rs in new.items():
        if key not in old:
            continue
        o = statistics.median(r['wgrad_ms'] for r in old[key])
        times = [r['wgrad_ms'] for r in rs]
        m = statistics.median(times)
        print(f'| {key[0]} | {key[1]}x{key[2]}x{key[3]}x{key[4]}, {key[5]} | {key[6]} | {old[key][0]["path"]} | '
              f'{o:.3f} | {rs[0]["path"]} | {m:.3f} ({min(times):.3f}-{max(times):.3f}) | {m / o:.2f} | '
              f'{old[key][0]["rel_err"]:.2e} / {rs[0]["rel_err"]:.2e} |')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--label', default='new')
    parser.add_argument('--dtypes', nargs='+', default=['bfloat16', 'float16', 'float32'], choices=list(DTYPES))
    parser.add_argument('--iters', type=int, default=30)
    parser.add_argument('--full', action='store_true', help='also forward + backward against cuDNN 7x7')
    parser.add_argument('--out')
    parser.add_argument('--compare', nargs=2, metavar=('OLD', 'NEW'), help='comma-separated result files')
    args = parser.parse_args()
    if args.compare:
        compare(args.compare[0].split(','), args.compare[1].split(','))
        return
    results = []
    for dtype_name in args.dtypes:
        for case in CASES:
            results.append(case_row(args, dtype_name, case))
            print(json.dumps(results[-1]), flush=True)
    if args.out:
        with open(args.out, 'w') as fh:
            json.dump(results, fh, indent=1)


if __name__ == '__main__':
    main()
