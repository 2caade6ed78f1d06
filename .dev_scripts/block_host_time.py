"""Host microseconds per training call (forward + backward) of one ConvNeXt block: mmpretrain's
ConvNeXtBlock against OrientedConvNeXtBlock's designs, and the "++" block with parts of it swapped
for plain PyTorch, on a tensor small enough for the GPU to keep up (the host is the bound).

    python .dev_scripts/block_host_time.py [--channels 96] [--size 14] [--dtype float16]

Each case issues ``--calls`` calls without synchronising, in ``--rounds`` interleaved rounds; the
median round is printed with the slowest / fastest round.
"""
import argparse
import functools
import statistics
import time
import types

import torch

from mmo1d.models.layers.blocks import OrientedConvNeXtBlock
from mmo1d.models.layers.recompute import call_recomputing


def _keep_h(block):
    """The "++" convolution without the recompute: its input h = GELU(pw1(x)) is saved for backward."""
    def mid(x):
        pre = block.pointwise_conv1(x)
        return block.mid_conv(block.act(pre).permute(0, 3, 1, 2)).permute(0, 2, 3, 1)

    block._mid = mid
    return block


def _hooks(block):
    """h made again in backward through saved-tensor hooks (RecomputeSaved), a node each for GELU and
    the convolution, as the blocks did before oriented_dwconv1d_gelu."""
    def mid(x):
        pre = block.pointwise_conv1(x)
        conv = lambda t: block.mid_conv(t.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)  # noqa: E731
        return call_recomputing(conv, block.act(pre), lambda: block.act(pre))

    block._mid = mid
    return block


def _mul_add(block):
    """The residual as ``shortcut + drop_path(gamma * (branch + bias))``, as mmpretrain writes it (the
    bias: pw2's, where the block computed its product alone)."""
    def residual(self, shortcut, branch, bias=None):
        if bias is not None:
            branch = branch + bias.view(-1, 1, 1)
        return shortcut + self.drop_path(self.gamma.view(-1, 1, 1) * branch)

    block._residual = types.MethodType(residual, block)
    return block


def _cast_nodes(block):
    """The oriented convolutions' weight and bias cast to the autocast dtype by nodes of the graph
    (a ToCopy node each in forward and in backward), as autocast casts conv2d's; the op itself casts
    them inside its node."""
    from mmo1d.ops import oriented_dwconv1d, oriented_dwconv1d_gelu

    def forward(x, *pre_bias, conv, fn):
        dev = conv.weight.device.type
        dtype = torch.get_autocast_dtype(dev) if torch.is_autocast_enabled(dev) else conv.weight.dtype
        return fn(x, conv.weight.to(dtype), conv.theta, conv.bias.to(dtype), conv.stride, conv.rounding,
                  conv.residual, conv.sigma, conv.radius, *pre_bias)

    for conv in (block.depthwise_conv, block.mid_conv):
        conv.forward = functools.partial(forward, conv=conv, fn=oriented_dwconv1d)
        conv.forward_gelu = functools.partial(forward, conv=conv, fn=oriented_dwconv1d_gelu)
    return block


def _cudnn_nhwc(block):
    """The 2D blocks' 7x7 depthwise convolution on the channels_last tensor as it comes (cuDNN's NHWC
    path), as DepthwiseConv2d runs it under ``cudnn.benchmark`` (mmseg's recipes); without it (this
    script) it computes on NCHW copies through ATen's depthwise kernel."""
    block.depthwise_conv.computes_in_nchw = lambda x: False
    return block


def make_cases(c):
    from mmpretrain.models.backbones.convnext import ConvNeXtBlock
    pp = dict(kernel_size=15, oriented=True, mid_kernel_size=31)
    return [
        ('mmpretrain ConvNeXtBlock 7x7', lambda: ConvNeXtBlock(c, drop_path_rate=0.1)),
        # The stock configs feed mmpretrain's ConvNeXt NCHW tensors: ATen's own depthwise kernel.
        ('mmpretrain ConvNeXtBlock 7x7, NCHW input', lambda: ConvNeXtBlock(c, drop_path_rate=0.1), 'nchw'),
        ('2d', lambda: OrientedConvNeXtBlock(c, 7, False, drop_path_rate=0.1)),
        ('2d, cuDNN NHWC depthwise', lambda: _cudnn_nhwc(OrientedConvNeXtBlock(c, 7, False, drop_path_rate=0.1))),
        ('1d (K=31)', lambda: OrientedConvNeXtBlock(c, 31, True, drop_path_rate=0.1)),
        ('2dpp', lambda: OrientedConvNeXtBlock(c, 7, False, mid_kernel_size=31, drop_path_rate=0.1)),
        ('2dpp, cuDNN NHWC depthwise',
         lambda: _cudnn_nhwc(OrientedConvNeXtBlock(c, 7, False, mid_kernel_size=31, drop_path_rate=0.1))),
        ('1dpp', lambda: OrientedConvNeXtBlock(c, drop_path_rate=0.1, **pp)),
        ('1dpp, h kept (no recompute)', lambda: _keep_h(OrientedConvNeXtBlock(c, drop_path_rate=0.1, **pp))),
        ('1dpp, h by saved-tensor hooks', lambda: _hooks(OrientedConvNeXtBlock(c, drop_path_rate=0.1, **pp))),
        ('1dpp, parameters cast by nodes', lambda: _cast_nodes(OrientedConvNeXtBlock(c, drop_path_rate=0.1, **pp))),
        ('1dpp, residual as mul + add', lambda: _mul_add(OrientedConvNeXtBlock(c, drop_path_rate=0.1, **pp))),
        ('1dpp, no drop path', lambda: OrientedConvNeXtBlock(c, **pp)),
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--channels', type=int, default=96)
    parser.add_argument('--size', type=int, default=14)
    parser.add_argument('--batch', type=int, default=2)
    parser.add_argument('--dtype', default='float16')
    parser.add_argument('--calls', type=int, default=100)
    parser.add_argument('--rounds', type=int, default=7)
    parser.add_argument('--device', default='cuda')
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    x0 = torch.randn(args.batch, args.channels, args.size, args.size, device=args.device).contiguous(
        memory_format=torch.channels_last)
    cases = []
    sync = torch.cuda.synchronize if args.device == 'cuda' else (lambda: None)
    for name, make, *layout in make_cases(args.channels):
        block = make().to(args.device).train()
        x = (x0.contiguous() if layout == ['nchw'] else x0).detach().requires_grad_()

        def call(block=block, x=x):
            with torch.autocast(args.device, dtype=dtype):
                y = block(x)
            y.backward(torch.ones_like(y))

        cases.append((name, call, []))
    for _ in range(args.rounds):
        for _, call, times in cases:
            for _ in range(10):
                call()
            sync()
            start = time.perf_counter()
            for _ in range(args.calls):
                call()
            times.append((time.perf_counter() - start) / args.calls * 1e6)
            sync()
    gpu = torch.cuda.get_device_name(0) if args.device == 'cuda' else 'cpu'
    print(f'{gpu}; {args.batch}x{args.channels}x{args.size}x{args.size} channels_last (unless named), '
          f'{args.dtype} autocast, forward + backward, {args.rounds} rounds of {args.calls} calls')
    base = statistics.median(cases[0][2])
    for name, _, times in cases:
        med = statistics.median(times)
        print(f'{name:40s} {med:8.1f} us  {med / base:5.2f}x  spread {max(times) / min(times):.2f}')


if __name__ == '__main__':
    main()
