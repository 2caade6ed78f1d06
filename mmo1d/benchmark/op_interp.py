"""The interpolated oriented lines (learnable angles) against truncation, on the same tensors and angles.

Implementations (torch only):

* ``trunc``: rounding ``'trunc'``, angles without gradient (the released models), the baseline;
* each rounding asked for: ``floor`` with fixed angles, ``bilinear`` and ``gaussian`` (sigma 0.5,
  radius 1) with angles requiring a gradient (learnable);
* ``bilinear_fixed`` (with ``bilinear``): rounding ``'bilinear'``, angles without gradient;

forward alone (autograd on, as in training) and forward+backward (gradients of x, weight, bias and,
where it requires one, theta, against a fixed grad_output). The angles are the 8 directions of the
models moved by a fixed uniform random amount (learned angles are not on the lattice). Records the
kernel path of each pass, the peak memory of each case beyond what was allocated before, and the
ratios to ``trunc`` with their targets.
"""
import argparse
import json
import math
import os
import os.path as osp
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

from mmo1d.ops import oriented_dwconv1d, oriented_dwconv1d_path

from .op_inputs import DTYPES, LAYOUTS, perturbed_angles
from .timing import (
    copy_bandwidth_gbps,
    cpu_samples,
    device_env,
    env_line,
    measure_cases,
    peak_bytes,
    round_spread,
    time_samples,
)

INTERPOLATED = ('bilinear', 'gaussian')
# The op's default gaussian band (a whole-number radius puts the output pixel on its edge and is refused).
SIGMA, RADIUS = 0.5, 1.5
PATH_PASSES = ('forward', 'backward_input', 'backward_weight')
# Forward+backward time relative to trunc's, at most (learnable angles); peak memory likewise.
TIME_TARGETS = {'bilinear': 1.5, 'gaussian': 3.0}
MEMORY_TARGET = 1.05
ANCHOR = ("The paper's bilinear kernel takes 2.1-2.25x the time of its round-down kernel on an RTX 3090 "
          '(an anchor from the paper, not measured here).')


def default_channels(dtype_name: str) -> int:
    """512 for float32 and float64 (the NCHW width benchmarked), 384 for half precision (the 4C width of
    the "++" blocks)."""
    return 512 if DTYPES[dtype_name].itemsize >= 4 else 384


def implementations(roundings: Sequence[str]) -> Dict[str, Tuple[str, bool]]:
    """implementation -> (rounding, whether theta requires a gradient): ``trunc`` first, then each
    rounding asked for, then ``bilinear_fixed`` with ``bilinear``."""
    impls = {'trunc': ('trunc', False)}
    for rounding in roundings:
        impls.setdefault(rounding, (rounding, rounding in INTERPOLATED))
    if 'bilinear' in roundings:
        impls['bilinear_fixed'] = ('bilinear', False)
    return impls


def make_step(rounding: str, x: Tensor, weight: Tensor, bias: Tensor, theta: Tensor, grad_out: Tensor,
              backward: bool) -> Callable[[int], Optional[Tuple[Tensor, ...]]]:
    """One call of the op; with ``backward`` it returns the gradients of every input requiring one."""
    leaves = [t for t in (x, weight, bias, theta) if t.requires_grad]

    def step(i: int) -> Optional[Tuple[Tensor, ...]]:
        out = oriented_dwconv1d(x, weight, theta, bias, rounding=rounding, sigma=SIGMA, radius=RADIUS)
        return torch.autograd.grad(out, leaves, grad_out) if backward else None

    return step


def make_cases(dtype_name: str, layout: str, args: argparse.Namespace, device: str) -> List[Tuple[Dict, Callable]]:
    """The ``(record, step)`` cases of one dtype and layout: every implementation and pass on the same
    tensors."""
    dtype = DTYPES[dtype_name]
    c, (h, ), (k, ) = args.channels or default_channels(dtype_name), args.sizes, args.kernel_sizes
    fmt = LAYOUTS[layout]
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
    for impl, (rounding, theta_grad) in implementations(args.rounding).items():
        theta = learnable if theta_grad else fixed
        paths = {p: oriented_dwconv1d_path(x, weight, 1, p, theta=theta, rounding=rounding, radius=RADIUS)
                 for p in PATH_PASSES}
        for backward in (p == 'fwdbwd' for p in args.passes):
            rec = dict(impl=impl, rounding=rounding, theta_grad=theta_grad, dtype=dtype_name, layout=layout,
                       N=args.batch, C=c, H=h, W=h, K=k, **{'pass': 'fwdbwd' if backward else 'fwd'}, paths=paths)
            cases.append((rec, make_step(rounding, x, weight, bias, theta, grad_out, backward)))
    return cases


def measure(args: argparse.Namespace, device: str = 'cuda', timer: Callable = time_samples,
            peak: Callable = peak_bytes) -> List[Dict]:
    """Every record: the cases of each dtype and layout built, then timed in interleaved rounds."""
    records = []
    for dtype_name, layout in args.configs:
        cases = make_cases(dtype_name, layout, args, device)
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
    by_key = {(r['dtype'], r['layout'], r['impl'], r['pass']): r for r in records}
    rows = []
    for dtype_name, layout in dict.fromkeys((r['dtype'], r['layout']) for r in records):
        if (dtype_name, layout, 'trunc', 'fwd') not in by_key or (dtype_name, layout, 'trunc', 'fwdbwd') not in by_key:
            continue  # the ratios need both passes
        base_fwd, base = by_key[dtype_name, layout, 'trunc', 'fwd'], by_key[dtype_name, layout, 'trunc', 'fwdbwd']
        for impl in dict.fromkeys(r['impl'] for r in records):
            if impl == 'trunc':
                continue
            fwd, fwdbwd = by_key[dtype_name, layout, impl, 'fwd'], by_key[dtype_name, layout, impl, 'fwdbwd']
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
             f"{env_line(env)}; N={env['batch']}, {env['size']}x{env['size']}, K={env['kernel_size']}; "
             f"angles: the 8 "
             f"directions + uniform(-{env['angle_jitter']}, {env['angle_jitter']}) rad (seed {env['seed']}); gaussian "
             f"sigma {SIGMA}, radius {RADIUS:g}; median of {env['repeats']} repeats in {env['rounds']} interleaved "
             f"rounds; copy bandwidth {env['copy_bandwidth_GBps']} GB/s.", '', f"Command: `{env['command']}`", '',
             'Ratios to `trunc` on the same tensors and angles. *fwd+bwd* = forward and the gradients of x, weight, '
             'bias and (theta grad = yes) theta; *memory* = peak of one fwd+bwd beyond what was allocated before. '
             f'Targets: fwd+bwd <= {TIME_TARGETS["bilinear"]} (bilinear), <= {TIME_TARGETS["gaussian"]:g} '
             f'(gaussian); memory <= {MEMORY_TARGET}.', '',
             '| dtype, layout | C | rounding | theta grad | fwd / trunc | fwd+bwd / trunc | target | '
             'memory / trunc | targets met |', '|---|---|---|---|---|---|---|---|---|']
    impls = {r['impl']: (r['rounding'], r['theta_grad']) for r in recs}
    for row in result['ratios']:
        rounding, theta_grad = impls[row['impl']]
        target = '-' if row['fwdbwd_target'] is None else f"<= {row['fwdbwd_target']:g}"
        lines.append(f"| {row['dtype']}, {row['layout']} | {row['C']} | {rounding} | "
                     f"{'yes' if theta_grad else 'no'} | {row['fwd_ratio']:.2f} | {row['fwdbwd_ratio']:.2f} | "
                     f"{target} | {row['memory_ratio']:.3f} | {'yes' if row['targets_met'] else 'NO'} |")
    lines += ['', result['anchor'], '', '## Times and kernel paths', '',
              '| dtype, layout | implementation | fwd ms | fwd+bwd ms | round spread fwd / fwd+bwd | fwd+bwd peak MiB '
              '| path forward / backward_input / backward_weight |', '|---|---|---|---|---|---|---|']
    by_key = {(r['dtype'], r['layout'], r['impl'], r['pass']): r for r in recs}
    for dtype_name, layout, impl in dict.fromkeys(key[:3] for key in by_key):
        fwd, fwdbwd = by_key.get((dtype_name, layout, impl, 'fwd')), by_key.get((dtype_name, layout, impl, 'fwdbwd'))
        spreads = ' / '.join('-' if r is None or round_spread(r) is None else f'{round_spread(r):.2f}'
                             for r in (fwd, fwdbwd))
        peak = '-' if fwdbwd is None else f"{fwdbwd['peak_mem_bytes'] / 2**20:.1f}"
        paths = (fwd or fwdbwd)['paths']
        lines.append(f"| {dtype_name}, {layout} | {impl} | {_ms(fwd)} | {_ms(fwdbwd)} | {spreads} | {peak} | "
                     f"{' / '.join(paths.values())} |")
    return '\n'.join(lines)


def _ms(rec: Optional[Dict]) -> str:
    return '-' if rec is None else f"{rec['ms']:.3f}"


def env_info(args: argparse.Namespace, bandwidth: Optional[float]) -> Dict:
    """The device record of :func:`mmo1d.benchmark.timing.device_env` and the settings of the run."""
    return {**device_env(args.device), 'batch': args.batch, 'size': args.sizes[0], 'kernel_size': args.kernel_sizes[0],
            'repeats': math.ceil(args.repeats / args.rounds) * args.rounds, 'rounds': args.rounds,
            'angle_jitter': args.angle_jitter, 'seed': args.seed, 'sigma': SIGMA, 'radius': RADIUS,
            'copy_bandwidth_GBps': None if bandwidth is None else round(bandwidth, 1)}


def write_results(result: Dict, stem: str) -> Tuple[str, str]:
    """``<stem>.json`` (everything) and ``<stem>.md`` (:func:`summarize`), its folder made if missing."""
    os.makedirs(osp.dirname(stem) or '.', exist_ok=True)
    json_path, md_path = stem + '.json', stem + '.md'
    with open(json_path, 'w') as f:
        json.dump(result, f, indent=1)
    with open(md_path, 'w') as f:
        f.write(summarize(result) + '\n')
    return json_path, md_path


def run(args: argparse.Namespace) -> Dict:
    """Every case of ``args`` on ``args.device``: ``{'env', 'records', 'ratios', 'anchor'}``."""
    if args.device == 'cuda':
        bandwidth = copy_bandwidth_gbps(args.repeats)
        records = measure(args)
    else:
        bandwidth = None
        records = measure(args, 'cpu', timer=cpu_samples, peak=lambda fn: 0)
    return {'env': env_info(args, bandwidth), 'records': records, 'ratios': ratios(records), 'anchor': ANCHOR}
