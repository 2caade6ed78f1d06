"""Benchmark the oriented depthwise 1D convolution against PyTorch baselines on a CUDA GPU.

Times (CUDA events, warm-up, median of repeats, all in one process; the cases of one dtype, size, pass and
kernel size run in interleaved rounds):

* ``mmo1d`` at every angle 0, 22.5, ..., 157.5 degrees and the 8-direction layout of the models;
* ``torch_horizontal``: PyTorch's depthwise ``conv2d`` with a (1, K) kernel, NCHW, same dtype;
* ``torch_2d_7x7``: PyTorch's depthwise 7x7 ``conv2d`` in the same dtype and layout (ConvNeXt);
* ``masked_2d``: a KxK depthwise ``conv2d`` whose kernel is zero off the oriented lines, same dtype and layout;

for fp32 NCHW, bf16 channels_last and fp16 channels_last (the dtype of mmdet's and mmseg's AMP
configs: mmengine's ``AmpOptimWrapper`` autocasts to float16 by default), forward and
forward+backward (input and weight gradients), plus the peak memory of each and the
device-to-device copy bandwidth (memory roofline). Writes
``<out-dir>/<gpu>.json``, ``<out-dir>/<gpu>.md`` and the figure ``<out-dir>/<gpu>.png`` (time per angle).

Example::

    python tools/analysis_tools/benchmark_op.py --out-dir benchmarks/results
"""
import argparse
import json
import math
import os
import os.path as osp
from typing import Callable, Dict, List, Optional

import torch
import torch.nn.functional as F

from mmo1d.analysis.plots import plot_op_benchmark
from mmo1d.benchmark.timing import copy_bandwidth_gbps, gpu_env, measure_cases
from mmo1d.ops import oriented_angles, oriented_dwconv1d, tap_offsets
from mmo1d.utils.quiet import quiet_upstream

ANGLES = [22.5 * i for i in range(8)]
CONFIGS = {'float32': (torch.float32, 'nchw'), 'bfloat16': (torch.bfloat16, 'channels_last'),
           'float16': (torch.float16, 'channels_last')}


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--batch', type=int, default=64)
    parser.add_argument('--channels', type=int, default=512)
    parser.add_argument('--sizes', type=int, nargs='+', default=[14, 28, 56])
    parser.add_argument('--kernel-sizes', type=int, nargs='+', default=[7, 15, 31])
    parser.add_argument('--dtypes', nargs='+', default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument('--repeats', type=int, default=51,
                        help='timed repeats per case, spread over the rounds (median of all reported)')
    parser.add_argument('--rounds', type=int, default=3,
                        help='interleaved rounds: per round every case of a (dtype, size, pass, kernel size) '
                        'group runs its share of the repeats, so that a slow spell of the GPU does not fall on '
                        'one case')
    parser.add_argument('--warmup', type=int, default=10, help='warm-up calls before a case first runs')
    parser.add_argument('--no-masked', action='store_true', help='skip the KxK masked baseline')
    parser.add_argument('--out-dir', default='benchmarks/results')
    parser.add_argument('--readme-table', metavar='JSON',
                        help='print the short README speed table of a results file and exit')
    return parser.parse_args(argv)


def masked_kernel(weight: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """(C, 1, K, K) kernel equal to the oriented op: the taps scattered onto a KxK grid."""
    c, k = weight.shape
    dh, dw = tap_offsets(theta, k)
    dense = torch.zeros(c, k, k, dtype=weight.dtype, device=weight.device)
    rows = (dh + k // 2).to(weight.device)
    cols = (dw + k // 2).to(weight.device)
    dense.index_put_((torch.arange(c, device=weight.device)[:, None].expand(c, k), rows, cols), weight,
                     accumulate=True)
    return dense[:, None]


def make_step(conv: Callable, xs: List[torch.Tensor], weight: torch.Tensor, grads: List[torch.Tensor],
              backward: bool) -> Callable[[int], None]:
    def step(i: int) -> None:
        x = xs[i % len(xs)]
        out = conv(x, weight)
        if backward:
            torch.autograd.grad(out, (x, weight), grads[i % len(grads)])

    return step


def env_info(args: argparse.Namespace, bandwidth: float) -> Dict:
    return {
        **gpu_env(),
        'batch': args.batch,
        'channels': args.channels,
        'repeats': math.ceil(args.repeats / args.rounds) * args.rounds,
        'rounds': args.rounds,
        'copy_bandwidth_GBps': round(bandwidth, 1),
    }


def run(args: argparse.Namespace) -> Dict:
    if not torch.cuda.is_available():
        raise SystemExit('no CUDA device: the op benchmark needs a CUDA GPU')
    torch.backends.cudnn.benchmark = True
    bandwidth = copy_bandwidth_gbps(args.repeats)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    n, c = args.batch, args.channels
    records = []

    def measure(cases):
        for rec in measure_cases(cases, args.repeats, args.rounds, args.warmup):
            records.append(rec)
            print(f"{rec['impl']:17s} {rec['dtype']:8s} {rec['layout']:13s} H={rec['H']:3d} K={rec['K']:2d} "
                  f"angle={str(rec['angle_deg']):6s} {rec['pass']:6s} {rec['ms']:8.3f} ms  "
                  f"peak {rec['peak_mem_bytes'] / 2**20:8.1f} MiB", flush=True)

    def case(impl, dtype_name, layout, h, k, angle, backward, fn):
        return dict(impl=impl, dtype=dtype_name, layout=layout, H=h, K=k, angle_deg=angle,
                    **{'pass': 'fwdbwd' if backward else 'fwd'}), fn

    for dtype_name in args.dtypes:
        dtype, layout = CONFIGS[dtype_name]
        fmt = torch.channels_last if layout == 'channels_last' else torch.contiguous_format
        for h in args.sizes:
            nbytes = n * c * h * h * torch.finfo(dtype).bits // 8
            sets = max(1, min(8, math.ceil(3 * l2 / nbytes)))  # rotate inputs when they fit in L2
            base = [torch.randn(n, c, h, h, device='cuda', dtype=dtype) for _ in range(sets)]
            xs = [x.contiguous(memory_format=fmt).requires_grad_() for x in base]
            xs_nchw = [x.contiguous().requires_grad_() for x in base]
            grads = [torch.randn_like(x) for x in xs]
            grads_nchw = [g.contiguous() for g in grads]
            mixed = oriented_angles(c).cuda()
            for backward in (False, True):
                w7 = torch.randn(c, 1, 7, 7, device='cuda', dtype=dtype, requires_grad=True)
                measure([case('torch_2d_7x7', dtype_name, layout, h, 7, None, backward,
                              make_step(lambda x, w: F.conv2d(x, w, padding=3, groups=c), xs, w7, grads, backward))])
                for k in args.kernel_sizes:
                    weight = torch.randn(c, k, device='cuda', dtype=dtype, requires_grad=True)
                    w_h = weight.detach()[:, None, None, :].clone().requires_grad_()
                    cases = [case('torch_horizontal', dtype_name, 'nchw', h, k, None, backward,
                                  make_step(lambda x, w, k=k: F.conv2d(x, w, padding=(0, k // 2), groups=c),
                                            xs_nchw, w_h, grads_nchw, backward))]
                    if not args.no_masked:
                        w_m = masked_kernel(weight.detach(), mixed).requires_grad_()
                        cases.append(case('masked_2d', dtype_name, layout, h, k, None, backward,
                                          make_step(lambda x, w, k=k: F.conv2d(x, w, padding=k // 2, groups=c), xs,
                                                    w_m, grads, backward)))
                    for angle in ANGLES + ['mixed8']:
                        theta = mixed if angle == 'mixed8' else torch.full((c,), math.radians(angle), device='cuda')
                        cases.append(case('mmo1d', dtype_name, layout, h, k, angle, backward,
                                          make_step(lambda x, w, t=theta: oriented_dwconv1d(x, w, t), xs, weight,
                                                    grads, backward)))
                    measure(cases)
            del base, xs, xs_nchw, grads, grads_nchw
            torch.cuda.empty_cache()
    return {'env': env_info(args, bandwidth), 'records': records}


def summarize(result: Dict) -> str:
    """Markdown tables: times, ratios to the baselines, angle spread, roofline, peak memory."""
    env, recs = result['env'], result['records']
    bw = env['copy_bandwidth_GBps']

    def find(**kw):
        return [r for r in recs if all(r[k] == v for k, v in kw.items())]

    rounds = f" in {env['rounds']} interleaved rounds" if env.get('rounds', 1) > 1 else ''
    lines = [f"# Oriented depthwise 1D convolution on {env['gpu']}", '',
             f"torch {env['torch']}, CUDA {env['cuda']}, cuDNN {env['cudnn']}, driver {env['driver']}, "
             f"{env['date']}; N={env['batch']}, C={env['channels']}; median of {env['repeats']} repeats"
             f"{rounds}; "
             f"copy bandwidth {bw} GB/s.", '', f"Command: `{env['command']}`", '',
             'Times in ms. *any angle* = slowest of the 8 single-angle runs; ratios use it. '
             '*horizontal* = PyTorch depthwise 1xK conv (NCHW, same dtype); *7x7* = PyTorch depthwise 7x7 '
             '(same layout); *masked* = KxK depthwise conv zero off the lines; spread = slowest / fastest '
             'angle; roofline = bytes of x and y / time / copy bandwidth (forward); memory = peak of mmo1d '
             '(mixed8) / peak of horizontal.', '']
    for dtype_name in CONFIGS:
        layout = CONFIGS[dtype_name][1]
        for pas in ('fwd', 'fwdbwd'):
            rows = find(impl='mmo1d', dtype=dtype_name, **{'pass': pas})
            if not rows:
                continue
            lines += [f'## {dtype_name}, {layout}, {"forward" if pas == "fwd" else "forward + backward"}', '',
                      '| H | K | mmo1d any angle | mmo1d mixed8 | horizontal | 7x7 | masked | vs horizontal '
                      '| vs 7x7 | spread | roofline | memory |',
                      '|---|---|---|---|---|---|---|---|---|---|---|---|']
            for h in sorted({r['H'] for r in rows}):
                for k in sorted({r['K'] for r in rows}):
                    angles = [r for r in rows if r['H'] == h and r['K'] == k and r['angle_deg'] != 'mixed8']
                    if not angles:
                        continue
                    worst = max(r['ms'] for r in angles)
                    best = min(r['ms'] for r in angles)
                    mixed = find(impl='mmo1d', dtype=dtype_name, H=h, K=k, angle_deg='mixed8', **{'pass': pas})[0]
                    hor = find(impl='torch_horizontal', dtype=dtype_name, H=h, K=k, **{'pass': pas})[0]
                    d2 = find(impl='torch_2d_7x7', dtype=dtype_name, H=h, **{'pass': pas})[0]
                    masked = find(impl='masked_2d', dtype=dtype_name, H=h, K=k, **{'pass': pas})
                    elem = torch.finfo(CONFIGS[dtype_name][0]).bits // 8
                    xy_bytes = 2 * env['batch'] * env['channels'] * h * h * elem
                    roof = f"{100 * xy_bytes / (worst * 1e-3) / (bw * 1e9):.0f}%" if pas == 'fwd' else '-'
                    lines.append(
                        f"| {h} | {k} | {worst:.3f} | {mixed['ms']:.3f} | {hor['ms']:.3f} | {d2['ms']:.3f} | "
                        f"{masked[0]['ms'] if masked else float('nan'):.3f} | {worst / hor['ms']:.2f}x | "
                        f"{worst / d2['ms']:.2f}x | {worst / best:.2f} | {roof} | "
                        f"{mixed['peak_mem_bytes'] / max(1, hor['peak_mem_bytes']):.2f}x |")
            lines.append('')
    return '\n'.join(lines)


def readme_table(result: Dict) -> str:
    """Short table: mmo1d's slowest angle against the baselines at K=31, per size and pass."""
    env, recs = result['env'], result['records']
    lines = [f"{env['gpu']}, N={env['batch']}, C={env['channels']}, K=31, ms (ratio to the baseline):", '',
             '| dtype, layout | pass | H | mmo1d, slowest angle | PyTorch 1x31 | PyTorch 7x7 |',
             '|---|---|---|---|---|---|']
    for dtype_name, (_, layout) in CONFIGS.items():
        for pas in ('fwd', 'fwdbwd'):
            for h in sorted({r['H'] for r in recs}):
                sel = [r for r in recs if r['dtype'] == dtype_name and r['H'] == h and r['pass'] == pas]
                ours = [r['ms'] for r in sel if r['impl'] == 'mmo1d' and r['K'] == 31 and r['angle_deg'] != 'mixed8']
                hor = [r['ms'] for r in sel if r['impl'] == 'torch_horizontal' and r['K'] == 31]
                d2 = [r['ms'] for r in sel if r['impl'] == 'torch_2d_7x7']
                if not (ours and hor and d2):
                    continue
                worst = max(ours)
                lines.append(f'| {dtype_name}, {layout} | {pas} | {h} | {worst:.2f} | {hor[0]:.2f} '
                             f'({worst / hor[0]:.2f}x) | {d2[0]:.2f} ({worst / d2[0]:.2f}x) |')
    return '\n'.join(lines)


def main(argv: Optional[List[str]] = None) -> None:
    args = parse_args(argv)
    if args.readme_table:
        with open(args.readme_table) as f:
            print(readme_table(json.load(f)))
        return
    os.makedirs(args.out_dir, exist_ok=True)  # before the timed run, not after it
    result = run(args)
    name = result['env']['gpu'].replace(' ', '_').replace('/', '_')
    json_path = osp.join(args.out_dir, f'{name}.json')
    with open(json_path, 'w') as f:
        json.dump(result, f, indent=1)
    md = summarize(result)
    with open(osp.join(args.out_dir, f'{name}.md'), 'w') as f:
        f.write(md + '\n')
    plot_op_benchmark(result, osp.join(args.out_dir, f'{name}.png'))
    print(md)
    print(f'wrote {json_path}, .md and .png')


if __name__ == '__main__':
    quiet_upstream()
    main()
