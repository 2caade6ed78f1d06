"""Per-kernel GPU time of one channels_last weight-gradient call (torch.profiler), e.g.

    python .dev_scripts/wgrad_breakdown.py 64 384 56 31 0 22.5 45 mixed8

N, C, the plane's side and K, then the angles (degrees, or ``mixed8``: the 8 directions in groups of
C / 8 channels); bfloat16, channels_last. Prints per angle the path and the mean microseconds of each
kernel over 20 calls.
"""
import math
import sys
from collections import defaultdict

import torch
from torch.profiler import ProfilerActivity, profile

from mmo1d.ops import oriented_angles, oriented_dwconv1d_path


def kernel_times(gy, x, w, theta, calls=20):
    """Mean device microseconds per call of each kernel of the weight and bias gradient."""
    def call():
        return torch.ops.mmo1d.oriented_dwconv1d_backward_params(gy, x, w, theta, 1, 'trunc', 0.5, 1.0, True, False)

    for _ in range(5):
        call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            call()
        torch.cuda.synchronize()
    times = defaultdict(float)
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            times[e.name[:70]] += e.device_time / calls
    return times


def main():
    n, c, s, k = (int(v) for v in sys.argv[1:5])
    for angle in sys.argv[5:]:
        x = torch.randn(n, c, s, s, device='cuda', dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last)
        gy = torch.randn_like(x)
        w = torch.randn(c, k, device='cuda', dtype=torch.bfloat16)
        theta = oriented_angles(c, 8, 0.0) if angle == 'mixed8' else torch.full((c,), math.radians(float(angle)))
        theta = theta.cuda()
        times = kernel_times(gy, x, w, theta)
        path = oriented_dwconv1d_path(x, w, 1, 'backward_weight', theta)
        print(f'{angle} bfloat16 {path}: total {sum(times.values()):.1f} us')
        for name, t in sorted(times.items(), key=lambda kv: -kv[1]):
            print(f'   {t:8.1f}  {name}')


if __name__ == '__main__':
    main()
