"""Benchmark the interpolated oriented lines (learnable angles) against truncation on a CUDA GPU.

On the same tensors and angles, in one process (CUDA events, warm-up, median of repeats; the cases
of one dtype run in interleaved rounds through ``mmo1d.benchmark.timing.measure_cases``):

* ``trunc``: rounding ``'trunc'``, angles without gradient (the released models);
* ``bilinear``: rounding ``'bilinear'``, angles requiring a gradient (learnable);
* ``gaussian``: rounding ``'gaussian'`` with sigma 0.5 and radius 1, angles requiring a gradient;
* ``bilinear_fixed``: rounding ``'bilinear'``, angles without gradient;

for float32 NCHW (C=512) and bfloat16 and float16 channels_last (C=384, the 4C width of the "++"
blocks), N=64, 56x56, K=31, forward alone (autograd on, as in training) and forward+backward
(gradients of x, weight, bias and, where it requires one, theta, against a fixed grad_output).
The angles are the 8 directions of the models, ``oriented_angles(C)``, moved by a fixed uniform
random amount (learned angles are not on the lattice); every implementation uses the same ones.
Records the kernel path of each pass (``oriented_dwconv1d_path``), the peak memory of each case
beyond what was allocated before, and the ratios to ``trunc`` with their targets. Writes
``<out-dir>/interp_speed.json`` and ``<out-dir>/interp_speed.md``.

Example::

    python tools/analysis_tools/benchmark_interp.py --out-dir benchmarks/results
"""
import argparse
import json
import math
import os
import os.path as osp
from typing import Callable, Dict, List, Optional, Tuple

import torch
from torch import Tensor

from mmo1d.benchmark.timing import copy_bandwidth_gbps, gpu_env, measure_cases, peak_bytes, round_spread, time_samples
from mmo1d.ops import oriented_angles, oriented_dwconv1d, oriented_dwconv1d_path
from mmo1d.utils.quiet import quiet_upstream

# dtype name -> (dtype, layout, default channels).
CONFIGS = {'float32': (torch.float32, 'nchw', 512), 'bfloat16': (torch.bfloat16, 'channels_last', 384),
           'float16': (torch.float16, 'channels_last', 384)}
# implementation -> (rounding, whether theta requires a gradient); 'trunc' is the baseline.
IMPLS = {'trunc': ('trunc', False), 'bilinear': ('bilinear', True), 'gaussian': ('gaussian', True),
         'bilinear_fixed': ('bilinear', False)}
SIGMA, RADIUS = 0.5, 1.0
PATH_PASSES = ('forward', 'backward_input', 'backward_weight')
# Forward+backward time relative to trunc's, at most (learnable angles); peak memory likewise.
TIME_TARGETS = {'bilinear': 1.5, 'gaussian': 3.0}
MEMORY_TARGET = 1.05
ANCHOR = ("The paper's bilinear kernel takes 2.1-2.25x the time of its round-down kernel on an RTX 3090 "
          '(an anchor from the paper, not measured here).')


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--batch', type=int, default=64)
    parser.add_argument('--channels', type=int, help='channels of every dtype (default: 512 for float32, 384 for '
                        'bfloat16 and float16)')
    parser.add_argument('--size', type=int, default=56, help='height and width of the input')
    parser.add_argument('--kernel-size', type=int, default=31)
    parser.add_argument('--dtypes', nargs='+', default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument('--repeats', type=int, default=30, help='timed calls per case, spread over the rounds')
    parser.add_argument('--rounds', type=int, default=6, help='interleaved rounds of the cases of one dtype')
    parser.add_argument('--warmup', type=int, default=10, help='warm-up calls before a case first runs')
    parser.add_argument('--angle-jitter', type=float, default=0.05,
                        help='the angles move by uniform(-jitter, jitter) radians off the 8 directions')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--out-dir', default='benchmarks/results')
    return parser.parse_args(argv)


def perturbed_angles(channels: int, jitter: float, seed: int) -> Tensor:
    """(C,) float32: ``oriented_angles(C)`` plus uniform(-jitter, jitter), the same for a given seed."""
    g = torch.Generator().manual_seed(seed)
    return oriented_angles(channels) + jitter * (2 * torch.rand(channels, generator=g) - 1)


def make_step(rounding: str, x: Tensor, weight: Tensor, bias: Tensor, theta: Tensor, grad_out: Tensor,
              backward: bool) -> Callable[[int], Optional[Tuple[Tensor, ...]]]:
    """One call of the op; with ``backward`` it returns the gradients of every input requiring one."""
    leaves = [t for t in (x, weight, bias, theta) if t.requires_grad]

    def step(i: int) -> Optional[Tuple[Tensor, ...]]:
        out = oriented_dwconv1d(x, weight, theta, bias, rounding=rounding, sigma=SIGMA, radius=RADIUS)
        return torch.autograd.grad(out, leaves, grad_out) if backward else None

    return step


def make_cases(dtype_name: str, args: argparse.Namespace, device: str) -> List[Tuple[Dict, Callable]]:
    """The ``(record, step)`` cases of one dtype: every implementation and pass on the same tensors."""
    dtype, layout, channels = CONFIGS[dtype_name]
    c, h, k = args.channels or channels, args.size, args.kernel_size
    fmt = torch.channels_last if layout == 'channels_last' else torch.contiguous_format
    g = torch.Generator(device=device).manual_seed(args.seed)

    def randn(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=dtype)

    x = randn(args.batch, c, h, h).contiguous(memory_format=fmt).requires_grad_()
    weight = (randn(c, k) / math.sqrt(k)).requires_grad_()
    bias = randn(c).requires_grad_()
    grad_out = randn(args.batch, c, h, h).contiguous(memory_format=fmt)
    fixed = perturbed_angles(c, args.angle_jitter, args.seed).to(device)
    learnable = fixed.clone().requires_grad_()
    cases = []
    for impl, (rounding, theta_grad) in IMPLS.items():
        theta = learnable if theta_grad else fixed
        paths = {p: oriented_dwconv1d_path(x, weight, 1, p, theta=theta, rounding=rounding, radius=RADIUS)
                 for p in PATH_PASSES}
        for backward in (False, True):
            rec = dict(impl=impl, rounding=rounding, theta_grad=theta_grad, dtype=dtype_name, layout=layout,
                       N=args.batch, C=c, H=h, W=h, K=k, **{'pass': 'fwdbwd' if backward else 'fwd'}, paths=paths)
            cases.append((rec, make_step(rounding, x, weight, bias, theta, grad_out, backward)))
    return cases


def measure(args: argparse.Namespace, device: str = 'cuda', timer: Callable = time_samples,
            peak: Callable = peak_bytes) -> List[Dict]:
    """Every record: each dtype's cases built, then timed in interleaved rounds."""
    records = []
    for dtype_name in args.dtypes:
        cases = make_cases(dtype_name, args, device)
        first = cases[0][0]
        print(f"{dtype_name} {first['layout']} N={first['N']} C={first['C']} {first['H']}x{first['W']} K={first['K']}: "
              f'{len(cases)} cases in {args.rounds} rounds', flush=True)
        for rec in measure_cases(cases, args.repeats, args.rounds, args.warmup, timer=timer, peak=peak):
            spread = round_spread(rec)
            print(f"  {rec['impl']:15s} {rec['pass']:6s} {rec['ms']:9.3f} ms  round spread "
                  f"{'-' if spread is None else f'{spread:.2f}'}  peak {rec['peak_mem_bytes'] / 2**20:8.1f} MiB  "
                  f"paths {' / '.join(rec['paths'].values())}", flush=True)
            records.append(rec)
        del cases
        if device == 'cuda':
            torch.cuda.empty_cache()
    return records


def ratios(records: List[Dict]) -> List[Dict]:
    """Per dtype and interpolation: its times and fwd+bwd peak memory over trunc's, with the targets."""
    by_key = {(r['dtype'], r['impl'], r['pass']): r for r in records}
    rows = []
    for dtype_name in dict.fromkeys(r['dtype'] for r in records):
        base_fwd, base = by_key[dtype_name, 'trunc', 'fwd'], by_key[dtype_name, 'trunc', 'fwdbwd']
        for impl in IMPLS:
            if impl == 'trunc':
                continue
            fwd, fwdbwd = by_key[dtype_name, impl, 'fwd'], by_key[dtype_name, impl, 'fwdbwd']
            row = dict(dtype=dtype_name, layout=fwdbwd['layout'], C=fwdbwd['C'], impl=impl,
                       fwd_ratio=round(fwd['ms'] / base_fwd['ms'], 3),
                       fwdbwd_ratio=round(fwdbwd['ms'] / base['ms'], 3),
                       fwdbwd_target=TIME_TARGETS.get(impl),
                       memory_ratio=round(fwdbwd['peak_mem_bytes'] / max(1, base['peak_mem_bytes']), 3),
                       memory_target=MEMORY_TARGET)
            row['targets_met'] = (row['memory_ratio'] <= MEMORY_TARGET
                                  and (row['fwdbwd_target'] is None or row['fwdbwd_ratio'] <= row['fwdbwd_target']))
            rows.append(row)
    return rows


def summarize(result: Dict) -> str:
    """Markdown: the ratios to trunc with their targets, the paper's anchor, then times and paths."""
    env, recs = result['env'], result['records']
    lines = [f"# Interpolated oriented lines against truncation on {env['gpu']}", '',
             f"torch {env['torch']}, CUDA {env['cuda']}, cuDNN {env['cudnn']}, driver {env['driver']}, "
             f"{env['date']}; N={env['batch']}, {env['size']}x{env['size']}, K={env['kernel_size']}; angles: the 8 "
             f"directions + uniform(-{env['angle_jitter']}, {env['angle_jitter']}) rad (seed {env['seed']}); gaussian "
             f"sigma {SIGMA}, radius {RADIUS:g}; median of {env['repeats']} repeats in {env['rounds']} interleaved "
             f"rounds; copy bandwidth {env['copy_bandwidth_GBps']} GB/s.", '', f"Command: `{env['command']}`", '',
             'Ratios to `trunc` on the same tensors and angles. *fwd+bwd* = forward and the gradients of x, weight, '
             'bias and (theta grad = yes) theta; *memory* = peak of one fwd+bwd beyond what was allocated before. '
             f'Targets: fwd+bwd <= {TIME_TARGETS["bilinear"]} (bilinear), <= {TIME_TARGETS["gaussian"]:g} '
             f'(gaussian); memory <= {MEMORY_TARGET}.', '',
             '| dtype, layout | C | rounding | theta grad | fwd / trunc | fwd+bwd / trunc | target | '
             'memory / trunc | targets met |', '|---|---|---|---|---|---|---|---|---|']
    for row in result['ratios']:
        rounding, theta_grad = IMPLS[row['impl']]
        target = '-' if row['fwdbwd_target'] is None else f"<= {row['fwdbwd_target']:g}"
        lines.append(f"| {row['dtype']}, {row['layout']} | {row['C']} | {rounding} | "
                     f"{'yes' if theta_grad else 'no'} | {row['fwd_ratio']:.2f} | {row['fwdbwd_ratio']:.2f} | "
                     f"{target} | {row['memory_ratio']:.3f} | {'yes' if row['targets_met'] else 'NO'} |")
    lines += ['', result['anchor'], '', '## Times and kernel paths', '',
              '| dtype, layout | implementation | fwd ms | fwd+bwd ms | round spread fwd / fwd+bwd | fwd+bwd peak MiB '
              '| path forward / backward_input / backward_weight |', '|---|---|---|---|---|---|---|']
    by_key = {(r['dtype'], r['impl'], r['pass']): r for r in recs}
    for dtype_name, impl, pas in by_key:
        if pas != 'fwd':
            continue
        fwd, fwdbwd = by_key[dtype_name, impl, 'fwd'], by_key[dtype_name, impl, 'fwdbwd']
        spreads = ' / '.join('-' if s is None else f'{s:.2f}' for s in (round_spread(fwd), round_spread(fwdbwd)))
        lines.append(f"| {dtype_name}, {fwd['layout']} | {impl} | {fwd['ms']:.3f} | {fwdbwd['ms']:.3f} | {spreads} | "
                     f"{fwdbwd['peak_mem_bytes'] / 2**20:.1f} | {' / '.join(fwd['paths'].values())} |")
    return '\n'.join(lines)


def env_info(args: argparse.Namespace, bandwidth: float) -> Dict:
    return {**gpu_env(), 'batch': args.batch, 'size': args.size, 'kernel_size': args.kernel_size,
            'repeats': math.ceil(args.repeats / args.rounds) * args.rounds, 'rounds': args.rounds,
            'angle_jitter': args.angle_jitter, 'seed': args.seed, 'sigma': SIGMA, 'radius': RADIUS,
            'copy_bandwidth_GBps': round(bandwidth, 1)}


def write_results(result: Dict, out_dir: str) -> Tuple[str, str]:
    """``interp_speed.json`` (everything) and ``interp_speed.md`` (:func:`summarize`) in ``out_dir``."""
    os.makedirs(out_dir, exist_ok=True)
    json_path, md_path = osp.join(out_dir, 'interp_speed.json'), osp.join(out_dir, 'interp_speed.md')
    with open(json_path, 'w') as f:
        json.dump(result, f, indent=1)
    with open(md_path, 'w') as f:
        f.write(summarize(result) + '\n')
    return json_path, md_path


def main(argv: Optional[List[str]] = None) -> None:
    args = parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit('no CUDA device: benchmark_interp.py times the CUDA kernels and needs a CUDA GPU')
    bandwidth = copy_bandwidth_gbps(args.repeats)
    records = measure(args)
    result = {'env': env_info(args, bandwidth), 'records': records, 'ratios': ratios(records), 'anchor': ANCHOR}
    json_path, md_path = write_results(result, args.out_dir)
    print(summarize(result))
    print(f'wrote {json_path} and {md_path}')


if __name__ == '__main__':
    quiet_upstream()
    main()
