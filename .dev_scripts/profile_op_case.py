"""Run one oriented-convolution case a few times, for a kernel profiler (ncu) to pick a launch.

    ncu --kernel-name regex:win_gather --launch-skip 2 --launch-count 1 --set full \
        python .dev_scripts/profile_op_case.py --channels 384 --size 56 --kernel-size 31 --pass forward

Defaults: the T-1D++ stage-1 "++" convolution (N=64, 4C=384, 56x56, K=31, residual, the 8-direction
layout), bfloat16 channels_last.
"""
import argparse
import math

import torch

from mmo1d.ops import oriented_angles, oriented_dwconv1d, oriented_dwconv1d_path

DTYPES = {'bfloat16': torch.bfloat16, 'float16': torch.float16, 'float32': torch.float32}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--batch', type=int, default=64)
    parser.add_argument('--channels', type=int, default=384)
    parser.add_argument('--size', type=int, default=56)
    parser.add_argument('--kernel-size', type=int, default=31)
    parser.add_argument('--dtype', default='bfloat16', choices=list(DTYPES))
    parser.add_argument('--angle', type=float, default=None, help='one angle in degrees (default: 8 directions)')
    parser.add_argument('--pass', dest='pass_', default='forward', choices=('forward', 'backward'))
    parser.add_argument('--repeats', type=int, default=4)
    args = parser.parse_args()
    dtype = DTYPES[args.dtype]
    c, k = args.channels, args.kernel_size
    x = torch.randn(args.batch, c, args.size, args.size, device='cuda', dtype=dtype)
    x = x.contiguous(memory_format=torch.channels_last).requires_grad_(args.pass_ == 'backward')
    w = (torch.randn(c, k, device='cuda') / math.sqrt(k)).to(dtype).requires_grad_(args.pass_ == 'backward')
    b = torch.randn(c, device='cuda', dtype=dtype).requires_grad_(args.pass_ == 'backward')
    theta = (torch.full((c, ), math.radians(args.angle)) if args.angle is not None else oriented_angles(c)).cuda()
    print('paths:', {p: oriented_dwconv1d_path(x, w, 1, p) for p in ('forward', 'backward_input', 'backward_weight')})
    for _ in range(args.repeats):
        y = oriented_dwconv1d(x, w, theta, b, residual=True)
        if args.pass_ == 'backward':
            y.backward(torch.ones_like(y))
    torch.cuda.synchronize()


if __name__ == '__main__':
    main()
