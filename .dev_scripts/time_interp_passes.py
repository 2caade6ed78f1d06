"""Per-pass CUDA times of the oriented op: truncation against the interpolated taps, each kernel call alone.

For bfloat16 channels_last and NCHW (C=384) and float32 NCHW (C=512), N=64, 56x56, K=31, angles the
8 directions moved by uniform(-jitter, jitter) rad per channel (seed 0; --jitter, default 0.05),
times the three compiled ops of each pass (forward with bias and residual, input gradient,
weight + bias (+ angle) gradient) for 'trunc', 'bilinear' and 'gaussian' (sigma 0.5, radius 1) in
4 interleaved rounds of 10 calls after 3 warm-up calls, and prints the median of each with the
kernel path it took. For channels_last it also times the copies to NCHW and back (what a route
through the NCHW kernels would add).

    python .dev_scripts/time_interp_passes.py [--jitter 0]
"""
import argparse

import torch

from mmo1d.benchmark.timing import time_samples
from mmo1d.ops import oriented_angles, oriented_dwconv1d_path

N, H, K = 64, 56, 31
SIGMA, RADIUS = 0.5, 1.0
PASSES = ('forward', 'backward_input', 'backward_weight')


def op_inputs(dtype: torch.dtype, c: int, channels_last: bool, jitter: float):
    """x, grad_output, weight, bias (random, seed 0) and the angles: the 8 directions, each channel's
    moved by uniform(-jitter, jitter) rad."""
    torch.manual_seed(0)
    x = torch.randn(N, c, H, H, device='cuda', dtype=dtype)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    dy = torch.randn_like(x)
    w = torch.randn(c, K, device='cuda', dtype=dtype) / K**0.5
    b = torch.randn(c, device='cuda', dtype=dtype)
    moved = (torch.rand(c, generator=torch.Generator().manual_seed(0)) * 2 - 1) * jitter
    return x, dy, w, b, (oriented_angles(c) + moved).cuda()


def cases(x, dy, w, b, th):
    ops = torch.ops.mmo1d
    calls = {'trunc': (lambda: ops.oriented_dwconv1d(x, w, th, b, 1, False, True),
                       lambda: ops.oriented_dwconv1d_backward_input(dy, x, w, th, 1, False, True),
                       lambda: ops.oriented_dwconv1d_backward_weight_bias(dy, x, w, th, 1, False))}
    for r in ('bilinear', 'gaussian'):
        calls[r] = (lambda r=r: ops.oriented_dwconv1d_interp(x, w, th, b, 1, r, SIGMA, RADIUS, True),
                    lambda r=r: ops.oriented_dwconv1d_interp_backward_input(dy, x, w, th, 1, r, SIGMA, RADIUS, True),
                    lambda r=r: ops.oriented_dwconv1d_interp_backward_params(dy, x, w, th, 1, r, SIGMA, RADIUS, True))
    if x.is_contiguous(memory_format=torch.channels_last):
        y = x.contiguous()
        calls['copies'] = (lambda: x.contiguous(), lambda: y.contiguous(memory_format=torch.channels_last),
                           lambda: None)
    return calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--jitter', type=float, default=0.05, help='largest angle change per channel, rad')
    args = parser.parse_args()
    print(torch.cuda.get_device_name(), 'torch', torch.__version__, 'jitter', args.jitter)
    for dtype, c, cl in [(torch.bfloat16, 384, True), (torch.bfloat16, 384, False), (torch.float32, 512, False)]:
        x, dy, w, b, th = op_inputs(dtype, c, cl, args.jitter)
        calls = cases(x, dy, w, b, th)
        times = {k: [[], [], []] for k in calls}
        for _ in range(4):
            for k, fs in calls.items():
                for i, f in enumerate(fs):
                    times[k][i] += time_samples(lambda _, f=f: f(), 10, 3)
        for k in calls:
            med = [sorted(v)[len(v) // 2] for v in times[k]]
            paths = [] if k == 'copies' else [oriented_dwconv1d_path(x, w, 1, p, th, k, RADIUS) for p in PASSES]
            print(f'{str(dtype)[6:]:9s} {"CL" if cl else "NCHW":4s} C={c} {k:9s} fwd {med[0]:.3f} dx {med[1]:.3f} '
                  f'dw {med[2]:.3f} sum {sum(med):.3f} ms  {paths}')


if __name__ == '__main__':
    main()
