"""Where the host time of an oriented call goes, next to ``torch.conv2d`` on the same tensor.

For bfloat16 channels_last and float32 NCHW (2 x 96 x 56 x 56, K=31, the 8 directions) prints the
host microseconds per call (``host_overhead.per_call_us``) of ``F.conv2d`` with a 1xK kernel, of
:func:`oriented_dwconv1d` with a (C, 1, 1, K) and a (C, K) weight, of the op called directly
(``torch.ops.mmo1d.oriented_dwconv1d.default``) and of two small ATen calls for scale; then the
torch.profiler CPU tables (self time per op, kernel launches, allocations) of 20 forward + backward
steps and of 50 forwards of the convolution and of the oriented op.

    python .dev_scripts/host_profile.py
"""
import math

import torch
import torch.nn.functional as F
from host_overhead import per_call_us  # this folder is the script's sys.path[0]
from torch.profiler import ProfilerActivity, profile

from mmo1d.ops import oriented_angles, oriented_dwconv1d


def cpu_table(fn, steps: int, rows: int) -> str:
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            fn()
        torch.cuda.synchronize()
    return prof.key_averages().table(sort_by='self_cpu_time_total', row_limit=rows, max_name_column_width=60)


def cases(dtype: torch.dtype, layout: str) -> None:
    c, k = 96, 31
    x = torch.randn(2, c, 56, 56, device='cuda', dtype=dtype)
    if layout == 'channels_last':
        x = x.contiguous(memory_format=torch.channels_last)
    w4 = (torch.randn(c, 1, 1, k, device='cuda') / math.sqrt(k)).to(dtype)
    w = w4.flatten(1)
    b = torch.zeros(c, device='cuda', dtype=dtype)
    th = oriented_angles(c).cuda()
    op = torch.ops.mmo1d.oriented_dwconv1d.default
    print('==', dtype, layout)
    forwards = {
        'conv2d 1xK': lambda: F.conv2d(x, w4, b, padding=(0, k // 2), groups=c),
        'wrapper 4d w': lambda: oriented_dwconv1d(x, w4, th, b),
        'wrapper 2d w': lambda: oriented_dwconv1d(x, w, th, b),
        'overload': lambda: op(x, w, th, b, 1, False, False),
        'empty_like': lambda: torch.empty_like(x),
        'add': lambda: torch.add(b, b),
    }
    with torch.no_grad():
        for name, fn in forwards.items():
            print(f'{name:14s} {per_call_us(fn):6.1f} us')
    xg, wg, bg = (t.detach().clone().requires_grad_() for t in (x, w4, b))
    g = torch.randn_like(x)
    steps = {
        'conv2d': lambda: F.conv2d(xg, wg, bg, padding=(0, k // 2), groups=c).backward(g),
        'oriented': lambda: oriented_dwconv1d(xg, wg, th, bg).backward(g),
    }
    for name, fn in steps.items():
        print(f'fwd+bwd {name:10s} {per_call_us(fn, calls=100):6.1f} us')
        print(cpu_table(fn, 20, 25))
    with torch.no_grad():
        for name in ('conv2d 1xK', 'wrapper 4d w'):
            print({'conv2d 1xK': 'conv2d fwd', 'wrapper 4d w': 'oriented fwd'}[name])
            print(cpu_table(forwards[name], 50, 15))


def main() -> None:
    for dtype, layout in ((torch.bfloat16, 'channels_last'), (torch.float32, 'nchw')):
        cases(dtype, layout)


if __name__ == '__main__':
    main()
