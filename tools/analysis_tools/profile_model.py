"""Where the GPU time of a classifier's step, a detection backbone's step or one op call goes.

By default, profiles a few steps of the models of ``tools/analysis_tools/benchmark_model.py`` (the
mmpretrain classifiers of ``configs/mmpretrain`` and timm's ConvNeXt) with ``torch.profiler`` and
sums the GPU kernel time into groups: the oriented op (mmo1d kernels), other convolutions (cuDNN /
PyTorch depthwise), matrix multiplies (the Linear layers), layer norm, the optimizer and the rest
(element-wise: GELU, layer scale, residual adds, casts, permutes). Writes
``<out-dir>/profile_<sizes>_<tag>.md`` and prints it (``profile_tiny_h100.md``; ``profile_tiny_la_h100.md``
with a learnable-angle variant; the tag from :func:`mmo1d.benchmark.names.machine_tag`).

``--backbone-sizes HxW ...`` times instead the T backbones as the detection recipes train them
(float16 autocast, four outputs, cudnn.benchmark off, batch 2) at those input sizes next to
mmpretrain's ConvNeXt-T, then lists the largest kernels of the slowest relative to it
(:mod:`mmo1d.benchmark.backbones`).

``--paths`` lists instead, for each classifier and mode, the kernel path that each kind of oriented
convolution of its forward takes in the forward, input-gradient and weight-gradient passes, and on
a GPU the op's kernels each pass launches (:mod:`mmo1d.benchmark.model_paths`; printed, no file; on
a machine without CUDA every path is ``cpu``).

``--op`` profiles the oriented op alone: ``--steps`` calls of each of ``--op-passes`` on one case,
with the kernel path of each pass and its largest kernels; with ``--external`` the calls just run,
for an outside profiler (ncu picks a launch, e.g. ``ncu --kernel-name regex:win_gather
--launch-skip 2 --launch-count 1``). ``--external`` without ``--op`` runs each model's ``--steps``
steps after its warm-up between ``cudaProfilerStart`` and ``cudaProfilerStop`` and writes nothing,
for ``ncu --profile-from-start off`` (``.dev_scripts/gpu.sh ncu-step``). ``--ncu-sass CSV`` reads
ncu's SASS page of such a launch (:mod:`mmo1d.benchmark.sass_regions`).

Examples::

    python tools/analysis_tools/profile_model.py --archs tiny --variants 2d 1d 1dpp --modes bf16 --passes train
    python tools/analysis_tools/profile_model.py --paths --variants 1dpp 1dpp-la --modes bf16
    python tools/analysis_tools/profile_model.py --backbone-sizes 800x960 1344x800
    python tools/analysis_tools/profile_model.py --op --op-rounding bilinear gaussian \\
        --op-passes fwd bwd_input bwd_weight
    ncu --kernel-name regex:win_gather --launch-skip 2 --launch-count 1 --section SpeedOfLight \\
        python tools/analysis_tools/profile_model.py --op --external --op-angle 22.5
    ncu --profile-from-start off --kernel-name regex:gather_nhwc --section SpeedOfLight \\
        python tools/analysis_tools/profile_model.py --external --steps 1 --no-timm --variants 1dpp-la --modes bf16
"""
import argparse
import datetime
import os
import os.path as osp
import statistics
import sys
from collections import defaultdict
from typing import Callable, Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from mmo1d.benchmark import backbones, model_paths, sass_regions
from mmo1d.benchmark.classifiers import (
    MODES,
    OPTIONAL_VARIANTS,
    VARIANTS,
    build_classifier,
    display_name,
    drop_path_rate,
)
from mmo1d.benchmark.kernels import device_self_us, profile_kernels
from mmo1d.benchmark.names import machine_tag, results_stem
from mmo1d.benchmark.op_inputs import DEFAULT_LAYOUT, DTYPES, LAYOUTS, MIXED, angles, parse_angle
from mmo1d.benchmark.op_interp import RADIUS
from mmo1d.benchmark.op_passes import PATH_OF, pass_calls
from mmo1d.benchmark.timing import cpu_samples, time_samples
from mmo1d.ops import oriented_dwconv1d_path
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


def argument(parse: Callable[[str], object]) -> Callable[[str], object]:
    """``parse`` with its ValueError shown by argparse as the option's error."""
    def convert(text: str) -> object:
        try:
            return parse(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    return convert


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
    parser.add_argument('--paths', action='store_true',
                        help="list the kernel path (and on a GPU the kernels) of each oriented convolution's passes")
    parser.add_argument('--out-dir', default='benchmarks/results')
    parser.add_argument('--external', action='store_true',
                        help='run the calls (--op) or the models\' profiled steps without torch.profiler, the steps '
                        'between cudaProfilerStart and cudaProfilerStop (for ncu)')
    det = parser.add_argument_group('detection backbones (--backbone-sizes)')
    det.add_argument('--backbone-sizes', nargs='+', type=argument(backbones.parse_size), metavar='HxW',
                     help='time and profile the T backbones at these detection input sizes instead')
    det.add_argument('--backbone-dtype', default='float16', choices=('float16', 'bfloat16'))
    det.add_argument('--cudnn-benchmark', action='store_true', help='turn cudnn.benchmark on (backbones)')
    det.add_argument('--device', default='cuda', help='cuda, or cpu to check the backbone steps (bfloat16)')
    op = parser.add_argument_group('the op alone (--op)')
    op.add_argument('--op', action='store_true', help='profile one case of the oriented op instead')
    op.add_argument('--op-shape', type=int, nargs=4, default=[64, 384, 56, 31], metavar=('N', 'C', 'H', 'K'),
                    help='default: the T-1D++ stage-1 "++" convolution')
    op.add_argument('--op-dtype', default='bfloat16', choices=list(DTYPES))
    op.add_argument('--op-layout', choices=list(LAYOUTS), help='default: channels_last for half precision, else NCHW')
    op.add_argument('--op-angle', type=argument(parse_angle), default=MIXED, help=f"degrees, or '{MIXED}' (default)")
    op.add_argument('--op-jitter', type=float, default=0.0, help='the 8 directions move by uniform(-j, j) rad')
    op.add_argument('--op-rounding', nargs='+', default=['trunc'], choices=('trunc', 'floor', 'bilinear', 'gaussian'))
    op.add_argument('--op-passes', nargs='+', default=['fwd'], choices=list(PATH_OF))
    sass = parser.add_argument_group("an ncu SASS page (--ncu-sass; no GPU needed)")
    sass.add_argument('--ncu-sass', metavar='CSV', help="group the instructions of `ncu --page source --csv "
                      "--print-source sass` into regions by times executed, with their share of the stall samples")
    sass.add_argument('--regions', type=int, default=14, help='largest regions listed')
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
    if args.external:  # for an outside profiler: only these steps between its start and stop
        torch.cuda.cudart().cudaProfilerStart()
        for _ in range(args.steps):
            step()
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()
        model.zero_grad(set_to_none=True)
        return {}, []
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


def profile_op(args: argparse.Namespace) -> str:
    """``--op``: the kernel path and the largest kernels of each rounding's passes on one case."""
    n, c, h, k = args.op_shape
    dtype, layout = DTYPES[args.op_dtype], args.op_layout or DEFAULT_LAYOUT[args.op_dtype]
    x = torch.randn(n, c, h, h, device='cuda', dtype=dtype).contiguous(memory_format=LAYOUTS[layout])
    dy = torch.randn_like(x)
    w = torch.randn(c, k, device='cuda', dtype=dtype) / k**0.5
    b = torch.randn(c, device='cuda', dtype=dtype)
    th = angles(args.op_angle, c, 'cuda', args.op_jitter)
    lines = [f'{torch.cuda.get_device_name(0)}, torch {torch.__version__}: {n}x{c}x{h}x{h} K={k} {args.op_dtype} '
             f'{layout}, angles {args.op_angle} +-{args.op_jitter:g} rad; {args.steps} steps of '
             f'{" + ".join(args.op_passes)}']
    for rounding in args.op_rounding:
        calls = pass_calls(x, dy, w, b, th, rounding)
        paths = {p: oriented_dwconv1d_path(x, w, 1, PATH_OF[p], th, rounding, RADIUS) for p in args.op_passes}

        def step(calls=calls) -> None:
            for p in args.op_passes:
                calls[p]()

        if args.external:
            for _ in range(args.steps):
                step()
            torch.cuda.synchronize()
            continue
        for _ in range(3):
            step()
        summary = profile_kernels(step, args.steps, args.top)
        lines += [f"== {rounding}: {summary['kernel_ms']:.3f} ms of kernels per step; paths {paths}"]
        lines += [f"{kern['total_ms'] / args.steps:8.3f} ms  x{kern['count'] // args.steps:<3d} {kern['name'][:110]}"
                  for kern in summary['top_kernels']]
    print('\n'.join(lines))
    return '\n'.join(lines)


def profile_backbones(args: argparse.Namespace) -> str:
    """``--backbone-sizes``: step times of the T backbones per size, then the largest kernels of the slowest
    relative to mmpretrain's ConvNeXt-T."""
    device = torch.device(args.device)
    cuda = device.type == 'cuda'
    torch.backends.cudnn.benchmark = args.cudnn_benchmark
    dtype = getattr(torch, args.backbone_dtype) if cuda else torch.bfloat16
    timer = time_samples if cuda else cpu_samples
    variants = ['stock'] + list(args.variants) + [v + backbones.NHWC for v in args.variants if v in ('2d', '2dpp')]
    lines = [f"{torch.cuda.get_device_name(0) if cuda else 'cpu'}, torch {torch.__version__}, {dtype} autocast, "
             f'cudnn.benchmark={args.cudnn_benchmark}, batch 2; median of {args.steps} training steps after 2, ms']
    print(lines[0], flush=True)
    results = {}
    for variant in variants:
        try:
            model = backbones.build_backbone(variant, device)
        except ImportError as err:
            lines.append(f'{variant:>9}: skipped ({err})')
            print(lines[-1], flush=True)
            continue
        for h, w in args.backbone_sizes:
            x = torch.randn(2, 3, h, w, device=device)
            if variant != 'stock':
                x = x.contiguous(memory_format=torch.channels_last)
            with backbones.depthwise_layout(variant):
                step = backbones.train_step(model, x, dtype)
                results[variant, (h, w)] = statistics.median(timer(step, args.steps, 2))
        lines.append(f'{variant:>9}: ' + '  '.join(f'{h}x{w} {results[variant, (h, w)]:8.1f}'
                                                  for h, w in args.backbone_sizes))
        print(lines[-1], flush=True)
        del model
    ours = [key for key in results if key[0] != 'stock']
    start = len(lines)
    if cuda and ours:
        variant, (h, w) = max(ours, key=lambda key: results[key] / results.get(('stock', key[1]), 1.0))
        model = backbones.build_backbone(variant, device)
        x = torch.randn(2, 3, h, w, device=device).contiguous(memory_format=torch.channels_last)
        with backbones.depthwise_layout(variant):
            step = backbones.train_step(model, x, dtype)
            step(0)
            summary = profile_kernels(lambda: step(0), 1, args.top)
        lines.append(f"== {variant} at {h}x{w}: {summary['kernel_ms']:.1f} ms of kernels per step, largest:")
        lines += [f"  {kern['total_ms']:9.2f} ms {kern['count']:5d} calls  {kern['name'][:110]}"
                  for kern in summary['top_kernels']]
    if len(lines) > start:
        print('\n'.join(lines[start:]))
    return '\n'.join(lines)


def list_paths(args: argparse.Namespace) -> str:
    """The kernel paths of each classifier's oriented convolutions in each mode (model_paths)."""
    cuda = torch.cuda.is_available()
    device = torch.device('cuda' if cuda else 'cpu')
    lines = [f"# Kernel paths of the oriented convolutions: {torch.cuda.get_device_name() if cuda else 'CPU'}", '',
             f'Batch {args.batch_size} at {args.img_size}x{args.img_size}; the calls of one forward, as the '
             'dispatcher receives them.']
    for arch in args.archs:
        for variant in args.variants:
            model = build_classifier(CONFIG_DIR, arch, variant).eval()
            for mode in args.modes:
                dtype, memory_format = MODES[mode]
                model.to(device, memory_format=memory_format)
                x = torch.randn(args.batch_size, 3, args.img_size, args.img_size, device=device)
                rows = model_paths.layer_paths(model, x.contiguous(memory_format=memory_format), dtype, kernels=cuda)
                lines += ['', f'## {display_name(arch, variant)}, {mode}', ''] + model_paths.paths_table(rows)
            del model
    text = '\n'.join(lines) + '\n'
    print(text)
    return text


def results_name(archs: List[str], variants: List[str], device: str) -> str:
    """``profile_<archs>_<tag>``, with ``_la`` before the tag where a learnable-angle variant is profiled
    (``profile_tiny_h100``, ``profile_tiny_base_la_h200``)."""
    la = 'la' if set(variants) & set(OPTIONAL_VARIANTS) else None
    return results_stem('profile', *archs, la, tag=machine_tag(device))


def main(argv: Optional[List[str]] = None) -> str:
    args = parse_args(argv)
    if args.ncu_sass:
        text = sass_regions.report(args.ncu_sass, args.regions, args.top)
        print(text)
        return text
    if args.backbone_sizes:
        return profile_backbones(args)
    if args.paths:
        return list_paths(args)
    if not torch.cuda.is_available():
        raise SystemExit('no CUDA device: the profile needs a GPU')
    if args.op:
        return profile_op(args)
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
                if args.external:
                    print(f'{name}, {mode}, {pas}: {args.steps} steps run for the outside profiler', flush=True)
                    continue
                total = sum(groups.values())
                lines.append(f'| {name} | {mode} | {pas} | {total:.1f} | '
                             + ' | '.join(f'{groups.get(g, 0.0):.1f}' for g in GROUPS) + ' |')
                print(lines[-1], flush=True)
                tops.append(f'- {name}, {mode}, {pas}: ' + '; '.join(
                    f'`{k[:70]}` {ms:.2f} ms' for k, ms in kernels[:args.top]))
        del model
        torch.cuda.empty_cache()
    if args.external:
        return ''
    md = '\n'.join(lines + ['', 'Largest kernels per step:', ''] + tops) + '\n'
    os.makedirs(args.out_dir, exist_ok=True)
    path = osp.join(args.out_dir, results_name(args.archs, args.variants, gpu) + '.md')
    with open(path, 'w') as f:
        f.write(md)
    print(md)
    print(f'wrote {path}')
    return md


if __name__ == '__main__':
    quiet_upstream()
    main()
