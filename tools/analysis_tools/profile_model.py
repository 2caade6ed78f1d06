"""Where the GPU time of a classifier's inference or training step goes, by kind of kernel.

Profiles a few steps of the models of ``tools/analysis_tools/benchmark_model.py`` (the mmpretrain classifiers of
``configs/mmpretrain`` and timm's ConvNeXt) with ``torch.profiler`` and sums the GPU kernel time
into groups: the oriented op (mmo1d kernels), other convolutions (cuDNN / PyTorch depthwise), matrix
multiplies (the Linear layers), layer norm, the optimizer and the rest (element-wise: GELU, layer
scale, residual adds, casts, permutes). Writes ``<out-dir>/profile_<gpu>.md`` and prints it.

Example::

    python tools/analysis_tools/profile_model.py --archs tiny --variants 2d 1d 1dpp --modes bf16 --passes train
"""
import argparse
import datetime
import os
import os.path as osp
import sys
from collections import defaultdict
from typing import Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from mmo1d.benchmark.classifiers import (
    MODES,
    OPTIONAL_VARIANTS,
    VARIANTS,
    build_classifier,
    display_name,
    drop_path_rate,
)
from mmo1d.benchmark.kernels import device_self_us
from mmo1d.utils.quiet import quiet_upstream

CONFIG_DIR = osp.join(osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))), 'configs', 'mmpretrain')

GROUPS = ('oriented op (mmo1d)', 'other convolutions', 'matmul (Linear)', 'layer norm', 'optimizer',
          'element-wise and other')


def kernel_group(name: str) -> str:
    n = name.lower()
    if 'layer_norm' in n or 'layernorm' in n:  # ATen's and mmo1d's (layer_norm_last_*_kernel)
        return GROUPS[3]
    if 'mmo1d' in n:
        return GROUPS[0]
    if 'conv' in n or 'cudnn' in n or 'depthwise' in n or 'implicit_gemm' in n or 'xmma_fprop' in n:
        return GROUPS[1]
    if 'gemm' in n or 'nvjet' in n or 'cutlass' in n or 'xmma' in n:
        return GROUPS[2]
    if 'adam' in n or 'multi_tensor' in n or 'foreach' in n:
        return GROUPS[4]
    return GROUPS[5]


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--archs', nargs='+', default=['tiny'], choices=('tiny', 'base'))
    parser.add_argument('--variants', nargs='+', default=list(VARIANTS), choices=VARIANTS + OPTIONAL_VARIANTS)
    parser.add_argument('--modes', nargs='+', default=list(MODES), choices=list(MODES))
    parser.add_argument('--passes', nargs='+', default=['train'], choices=('infer', 'train'))
    parser.add_argument('--batch-size', type=int, default=64)
    parser.add_argument('--img-size', type=int, default=224)
    parser.add_argument('--steps', type=int, default=3, help='profiled steps (after 5 warm-up steps)')
    parser.add_argument('--top', type=int, default=6, help='kernels listed per model')
    parser.add_argument('--no-timm', action='store_true', help='skip the timm ConvNeXt baseline')
    parser.add_argument('--out-dir', default='benchmarks/results')
    return parser.parse_args(argv)


def profile(model: nn.Module, mode: str, pas: str, args: argparse.Namespace) -> Tuple[Dict[str, float], List]:
    """GPU milliseconds per step by group, and the top kernels (name, ms per step)."""
    device = torch.device('cuda')
    dtype, memory_format = MODES[mode]
    model.to(device, memory_format=memory_format).train(pas == 'train')
    x = torch.randn(args.batch_size, 3, args.img_size, args.img_size, device=device)
    x = x.contiguous(memory_format=memory_format)
    y = torch.randint(0, 1000, (args.batch_size, ), device=device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4) if pas == 'train' else None

    def step() -> None:
        with torch.autocast('cuda', dtype=dtype or torch.float32, enabled=dtype is not None):
            if optimizer is None:
                with torch.no_grad():
                    model(x)
                return
            loss = F.cross_entropy(model(x).float(), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    for _ in range(5):
        step()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(args.steps):
            step()
        torch.cuda.synchronize()
    groups: Dict[str, float] = defaultdict(float)
    kernels = []
    for evt in prof.key_averages():
        if evt.device_type != torch.autograd.DeviceType.CUDA:
            continue
        ms = device_self_us(evt) / 1e3 / args.steps
        groups[kernel_group(evt.key)] += ms
        kernels.append((evt.key, ms))
    kernels.sort(key=lambda k: -k[1])
    model.zero_grad(set_to_none=True)
    return dict(groups), kernels


def main(argv: Optional[List[str]] = None) -> str:
    args = parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit('no CUDA device: the profile needs a GPU')
    torch.backends.cudnn.benchmark = True
    models = []
    for arch in args.archs:
        if not args.no_timm:
            try:
                import timm
                models.append((f'timm convnext_{arch}', lambda a=arch: timm.create_model(
                    f'convnext_{a}', pretrained=False, drop_path_rate=drop_path_rate(CONFIG_DIR, a))))
            except ImportError:
                print('timm is not installed: skipping the timm ConvNeXt baseline')
        for variant in args.variants:
            models.append((display_name(arch, variant),
                           lambda a=arch, v=variant: build_classifier(CONFIG_DIR, a, v)))
    gpu = torch.cuda.get_device_name(0)
    command = ' '.join(argv if argv is not None else sys.argv[1:])
    lines = [f'# GPU time by kernel group: {gpu}', '',
             f'torch {torch.__version__}, CUDA {torch.version.cuda}, batch {args.batch_size} at '
             f'{args.img_size}x{args.img_size}, {args.steps} profiled steps, '
             f'{datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")}.',
             f'Command: `python tools/analysis_tools/profile_model.py {command}`',
             '', 'Milliseconds of GPU kernel time per step (sum of kernel times; the step time also includes gaps).',
             '', '| model | mode | pass | total | ' + ' | '.join(GROUPS) + ' |',
             '|---|---|---|---|' + '---|' * len(GROUPS)]
    tops = []
    for name, build in models:
        model = build()
        for mode in args.modes:
            for pas in args.passes:
                groups, kernels = profile(model, mode, pas, args)
                total = sum(groups.values())
                lines.append(f'| {name} | {mode} | {pas} | {total:.1f} | '
                             + ' | '.join(f'{groups.get(g, 0.0):.1f}' for g in GROUPS) + ' |')
                print(lines[-1], flush=True)
                tops.append(f'- {name}, {mode}, {pas}: ' + '; '.join(
                    f'`{k[:70]}` {ms:.2f} ms' for k, ms in kernels[:args.top]))
        del model
        torch.cuda.empty_cache()
    md = '\n'.join(lines + ['', 'Largest kernels per step:', ''] + tops) + '\n'
    os.makedirs(args.out_dir, exist_ok=True)
    path = osp.join(args.out_dir, 'profile_' + gpu.replace(' ', '_').replace('/', '_') + '.md')
    with open(path, 'w') as f:
        f.write(md)
    print(md)
    print(f'wrote {path}')
    return md


if __name__ == '__main__':
    quiet_upstream()
    main()
