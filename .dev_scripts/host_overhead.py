"""Host time per call of the oriented op against ``torch.conv2d`` on the same tensor.

At detection and segmentation batch sizes a training step can be bound by the host: what matters
there is how long the CPU takes to issue a call, not how long its kernels run. This times the
issue of many calls in a row without synchronising, on a tensor small enough for the GPU to keep
up (N=2, C=96, 56x56, K=31, bfloat16 channels_last unless told otherwise), for the forward alone
(no autograd) and for forward + backward, and prints microseconds per call next to those of a
depthwise ``torch.conv2d`` with a (C, 1, 1, K) kernel and one with a 7x7 kernel (ConvNeXt's).

    python .dev_scripts/host_overhead.py [--dtype float32 --layout nchw]
"""
import argparse
import math
import time

import torch
import torch.nn.functional as F

from mmo1d.ops import oriented_angles, oriented_dwconv1d


def per_call_us(fn, calls: int = 300, rounds: int = 7) -> float:
    """Median over rounds of the host time of ``calls`` calls, in microseconds per call."""
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        out.append((time.perf_counter() - start) / calls * 1e6)
        torch.cuda.synchronize()
    return sorted(out)[len(out) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--dtype', default='bfloat16', choices=('bfloat16', 'float16', 'float32'))
    parser.add_argument('--layout', default='channels_last', choices=('channels_last', 'nchw'))
    parser.add_argument('--channels', type=int, default=96)
    parser.add_argument('--size', type=int, default=56)
    parser.add_argument('--batch', type=int, default=2)
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    c, k = args.channels, 31
    x = torch.randn(args.batch, c, args.size, args.size, device='cuda', dtype=dtype)
    if args.layout == 'channels_last':
        x = x.contiguous(memory_format=torch.channels_last)
    w = (torch.randn(c, k, device='cuda') / math.sqrt(k)).to(dtype)
    b = torch.zeros(c, device='cuda', dtype=dtype)
    theta = oriented_angles(c).cuda()
    w77 = torch.randn(c, 1, 7, 7, device='cuda', dtype=dtype)
    # Each call: (its weight, its function of input, weight, bias).
    calls = {
        'conv2d 1xK': (w, lambda x, w_, b_: F.conv2d(x, w_.view(c, 1, 1, k), b_, padding=(0, k // 2), groups=c)),
        'conv2d 7x7': (w77, lambda x, w_, b_: F.conv2d(x, w_, b_, padding=3, groups=c)),
        'oriented trunc': (w, lambda x, w_, b_: oriented_dwconv1d(x, w_, theta, b_)),
        'oriented bilinear': (w, lambda x, w_, b_: oriented_dwconv1d(x, w_, theta, b_, rounding='bilinear')),
    }
    print(torch.cuda.get_device_name(), 'torch', torch.__version__, args.dtype, args.layout,
          f'{args.batch}x{c}x{args.size}x{args.size}, K={k}; host microseconds per call (median of 7 rounds '
          'of 300 calls, 100 for forward + backward)')
    xg = x.detach().clone().requires_grad_()
    bg = b.detach().clone().requires_grad_()
    grad = torch.randn_like(x)
    for name, (weight, f) in calls.items():
        wg = weight.detach().clone().requires_grad_()
        with torch.no_grad():
            fwd = per_call_us(lambda f=f, weight=weight: f(x, weight, b))
        step = per_call_us(lambda f=f, wg=wg: f(xg, wg, bg).backward(grad), calls=100)
        print(f'{name:18s} forward {fwd:7.1f} us   forward + backward {step:7.1f} us')


if __name__ == '__main__':
    main()
