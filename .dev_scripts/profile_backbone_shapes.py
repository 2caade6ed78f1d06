"""Training steps of the T backbones at detection-sized inputs, the way mmdet's AMP configs run them.

mmdet's Cascade Mask R-CNN recipes train with ``AmpOptimWrapper`` (float16 autocast) and leave
``cudnn.benchmark`` off (multi-scale inputs change shape every iteration). This script times one
backbone forward + backward per input size for our T variants (detection kernel sizes, four outputs)
and for mmpretrain's ConvNeXt-T (the stock configs' backbone), then profiles the slowest of ours and
times the depthwise 7x7 and patchify convolutions alone in both memory layouts. The 2D and 2D++
backbones are also timed with their depthwise convolutions kept in channels_last (``-nhwc``: cuDNN's
NHWC path, what DepthwiseConv2d avoids when cudnn.benchmark is off).

    python .dev_scripts/profile_backbone_shapes.py [--benchmark] [--sizes 800x960 ...]
"""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from mmo1d.models import OrientedConvNeXt
from mmo1d.models.layers import DepthwiseConv2d


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--variants', nargs='+', default=['2d', '1d', '1dpp', '2dpp'])
    parser.add_argument('--sizes', nargs='+', default=['512x512', '704x736', '800x960', '896x768', '1344x800'])
    parser.add_argument('--dtype', default='float16', choices=('float16', 'bfloat16'))
    parser.add_argument('--benchmark', action='store_true', help='turn cudnn.benchmark on')
    parser.add_argument('--steps', type=int, default=5)
    parser.add_argument('--device', default='cuda', help='cuda, or cpu for a check of the script (bfloat16)')
    return parser.parse_args()


def sync(device):
    if device.type == 'cuda':
        torch.cuda.synchronize()


def step_ms(module, x, dtype, steps):
    """Median ms of forward (autocast) + backward of the sum of the outputs."""
    times = []
    for i in range(steps + 2):
        sync(x.device)
        start = time.perf_counter()
        with torch.autocast(x.device.type, dtype=dtype):
            outs = module(x)
        sum(o.float().mean() for o in outs).backward()
        sync(x.device)
        if i >= 2:
            times.append(1e3 * (time.perf_counter() - start))
    return statistics.median(times)


def build(variant, device):
    if variant == 'stock':
        from mmpretrain.models import ConvNeXt
        return ConvNeXt(arch='tiny', out_indices=(0, 1, 2, 3), gap_before_final_norm=False).to(device)
    model = OrientedConvNeXt(arch='tiny', variant=variant, kernel_sizes='downstream', out_indices=(0, 1, 2, 3),
                             gap_before_final_norm=False)
    return model.to(device).to(memory_format=torch.channels_last)


def top_kernels(module, x, dtype, n=10):
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA if x.is_cuda else ProfilerActivity.CPU]) as prof:
        step_ms(module, x, dtype, 1)
    rows = sorted(prof.key_averages(), key=lambda e: -e.device_time_total)[:n]
    total = sum(e.device_time_total for e in prof.key_averages())
    for e in rows:
        print(f'    {e.device_time_total / 3e3:9.2f} ms/step {e.count // 3:5d} calls  {e.key[:110]}')
    print(f'    total GPU time {total / 3e3:.2f} ms/step')


def conv_alone(dtype, sizes, steps, device):
    """The 2D convolutions of the 2D / 2D++ blocks and stem, alone, per memory layout."""
    print('\n== convolutions alone (forward + input and weight gradients), ms')
    for size in sizes:
        h, w = (int(v) for v in size.split('x'))
        cases = [('stem 4x4/4 3->96', (2, 3, h, w), (96, 3, 4, 4), 4, 0, 1)]
        for i, c in enumerate((96, 192, 384, 768)):
            cases.append((f'dw7x7 C={c}', (2, c, h >> (i + 2), w >> (i + 2)), (c, 1, 7, 7), 1, 3, c))
        for name, xs, ws, stride, pad, groups in cases:
            row = []
            for fmt in (torch.contiguous_format, torch.channels_last):
                x = torch.randn(xs, device=device, dtype=dtype).contiguous(memory_format=fmt).requires_grad_()
                wt = torch.randn(ws, device=device, dtype=dtype).contiguous(memory_format=fmt).requires_grad_()
                times = []
                for i in range(steps + 2):
                    sync(x.device)
                    start = time.perf_counter()
                    y = F.conv2d(x, wt, None, stride, pad, 1, groups)
                    y.backward(torch.ones_like(y))
                    sync(x.device)
                    if i >= 2:
                        times.append(1e3 * (time.perf_counter() - start))
                row.append(statistics.median(times))
            print(f'  {size:>9} {name:<18} NCHW {row[0]:8.2f}  channels_last {row[1]:8.2f}')


def main():
    args = parse_args()
    torch.backends.cudnn.benchmark = args.benchmark
    device = torch.device(args.device)
    dtype = getattr(torch, args.dtype) if device.type == 'cuda' else torch.bfloat16
    name = torch.cuda.get_device_name(0) if device.type == 'cuda' else 'cpu'
    print(f'{name}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, '
          f'{dtype} autocast, cudnn.benchmark={args.benchmark}, batch 2')
    variants = ['stock'] + args.variants + [f'{v}-nhwc' for v in args.variants if v in ('2d', '2dpp')]
    results = {}
    auto = DepthwiseConv2d.computes_in_nchw
    for variant in variants:
        DepthwiseConv2d.computes_in_nchw = (lambda self, x: False) if variant.endswith('-nhwc') else auto
        try:
            model = build(variant.replace('-nhwc', ''), device)
        except ImportError as err:
            print(f'{variant}: skipped ({err})')
            continue
        model.train()
        for size in args.sizes:
            h, w = (int(v) for v in size.split('x'))
            x = torch.randn(2, 3, h, w, device=device)
            if variant != 'stock':
                x = x.contiguous(memory_format=torch.channels_last)
            results[variant, size] = step_ms(model, x, dtype, args.steps)
        print(f'{variant:>9}: ' + '  '.join(f'{s} {results[variant, s]:8.1f} ms' for s in args.sizes), flush=True)
        del model
    worst = max((k for k in results if k[0] != 'stock'), key=lambda k: results[k] / results.get(('stock', k[1]), 1))
    print(f'\n== profile of {worst[0]} at {worst[1]} (top kernels, one step)')
    DepthwiseConv2d.computes_in_nchw = (lambda self, x: False) if worst[0].endswith('-nhwc') else auto
    model = build(worst[0].replace('-nhwc', ''), device).train()
    h, w = (int(v) for v in worst[1].split('x'))
    top_kernels(model, torch.randn(2, 3, h, w, device=device).contiguous(memory_format=torch.channels_last), dtype)
    conv_alone(dtype, args.sizes, args.steps, device)


if __name__ == '__main__':
    main()
