"""Benchmark mmo1d's block residual (``scaled_residual``) against the ``torch.addcmul`` it replaces.

For each residual of ConvNeXt-T's four stages (batch 64 at 224x224, channels_last; under AMP a
float32 residual stream plus a bfloat16 or float16 branch, the layer scale per channel, and with
drop path per image and channel) times, with CUDA events in interleaved rounds
(``mmo1d.benchmark.timing.measure_cases``):

* ``mmo1d``: ``mmo1d.ops.scaled_residual``;
* ``aten``: what the blocks ran before, ``torch.addcmul`` outside autocast;

forward and forward+backward (gradients of shortcut, branch and scale). Writes
``<out-dir>/residual_<tag>.json`` and ``.md`` (the tag from :func:`mmo1d.benchmark.names.machine_tag`:
``residual_h200``).

Example::

    python tools/analysis_tools/benchmark_residual.py --out-dir benchmarks/results
"""
import argparse
import json
import math
import os
import os.path as osp
from typing import Callable, Dict, List, Optional, Tuple

import torch

from mmo1d.benchmark.names import machine_tag, results_stem
from mmo1d.benchmark.timing import copy_bandwidth_gbps, gpu_env, measure_cases
from mmo1d.ops import scaled_residual
from mmo1d.utils.quiet import quiet_upstream

# (site, (N, C, H, W), branch dtype, scale per image): the residuals of ConvNeXt-T at 224x224.
SITES = [
    ('stage 1', (64, 96, 56, 56), 'bfloat16', False),
    ('stage 1, drop path', (64, 96, 56, 56), 'bfloat16', True),
    ('stage 2', (64, 192, 28, 28), 'bfloat16', False),
    ('stage 3', (64, 384, 14, 14), 'bfloat16', False),
    ('stage 4', (64, 768, 7, 7), 'bfloat16', False),
    ('stage 1', (64, 96, 56, 56), 'float16', False),
    ('stage 3, drop path', (64, 384, 14, 14), 'float16', True),
]
DTYPES = {'bfloat16': torch.bfloat16, 'float16': torch.float16}


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--repeats', type=int, default=51, help='timed calls per case (over all rounds)')
    parser.add_argument('--rounds', type=int, default=3, help='interleaved rounds per group of cases')
    parser.add_argument('--warmup', type=int, default=10)
    parser.add_argument('--out-dir', default='benchmarks/results')
    return parser.parse_args(argv)


def make_cases(shape: Tuple[int, ...], dtype: torch.dtype, per_image: bool,
               backward: bool) -> List[Tuple[Dict, Callable[[int], None]]]:
    n, c = shape[:2]
    cl = torch.channels_last
    shortcut = torch.randn(shape, device='cuda').contiguous(memory_format=cl).requires_grad_(backward)
    branch = torch.randn(shape, device='cuda', dtype=dtype).contiguous(memory_format=cl).requires_grad_(backward)
    scale = torch.rand((n, c, 1, 1) if per_image else (c, 1, 1), device='cuda').requires_grad_(backward)
    grad = torch.randn(shape, device='cuda').contiguous(memory_format=cl)

    def ours():
        return scaled_residual(shortcut, branch, scale)

    def aten():
        with torch.autocast('cuda', enabled=False):
            return torch.addcmul(shortcut, branch, scale)

    def step(fn):
        if not backward:
            def call(i):
                with torch.no_grad():
                    fn()
        else:
            def call(i):
                torch.autograd.grad(fn(), (shortcut, branch, scale), grad)
        return call

    return [({'impl': 'mmo1d'}, step(ours)), ({'impl': 'aten'}, step(aten))]


def run(args: argparse.Namespace) -> Dict:
    if not torch.cuda.is_available():
        raise SystemExit('benchmark_residual: no CUDA device: this benchmark needs a CUDA GPU')
    records = []
    for site, shape, dtype_name, per_image in SITES:
        for backward in (False, True):
            cases = make_cases(shape, DTYPES[dtype_name], per_image, backward)
            for rec, _ in cases:
                rec.update(site=site, shape=list(shape), dtype=dtype_name, per_image=per_image,
                           **{'pass': 'fwdbwd' if backward else 'fwd'})
            records += measure_cases(cases, args.repeats, args.rounds, args.warmup)
            torch.cuda.empty_cache()
    env = {**gpu_env(), 'batch': 64, 'repeats': math.ceil(args.repeats / args.rounds) * args.rounds,
           'rounds': args.rounds, 'copy_bandwidth_GBps': round(copy_bandwidth_gbps(20), 1)}
    return {'env': env, 'records': records}


def summarize(result: Dict) -> str:
    env = result['env']
    lines = [
        f"# Block residual on {env['gpu']}", '',
        f"torch {env['torch']}, CUDA {env['cuda']}, driver {env['driver']}, commit {env['commit']}, {env['date']}; "
        f"CUDA events, median of {env['repeats']} calls in {env['rounds']} interleaved rounds. Copy bandwidth "
        f"{env['copy_bandwidth_GBps']:.0f} GB/s.", '', f"Command: `{env['command']}`", '',
        '*mmo1d*: `scaled_residual(shortcut, branch, scale)`. *aten*: `torch.addcmul` outside autocast, as '
        'the blocks ran it before. Shortcut float32, branch in the AMP dtype, both channels_last; scale '
        '(C, 1, 1), or (N, C, 1, 1) with drop path. Forward+backward: gradients of shortcut, branch and '
        'scale. GB/s: bytes of shortcut, branch and output over the forward time.', '',
        '| site | (N, C, H, W) | branch | pass | mmo1d ms | aten ms | ratio | mmo1d GB/s |',
        '|---|---|---|---|---|---|---|---|',
    ]
    recs = result['records']
    for ours, aten in zip(recs[0::2], recs[1::2]):
        n = math.prod(ours['shape'])
        size_branch = 2 if ours['dtype'] in ('bfloat16', 'float16') else 4
        gbps = n * (4 + size_branch + 4) / (ours['ms'] * 1e-3) / 1e9 if ours['pass'] == 'fwd' else None
        lines.append(f"| {ours['site']} | {tuple(ours['shape'])} | {ours['dtype']} | {ours['pass']} | "
                     f"{ours['ms']:.3f} | {aten['ms']:.3f} | {ours['ms'] / aten['ms']:.2f}x | "
                     f"{'' if gbps is None else f'{gbps:.0f}'} |")
    return '\n'.join(lines)


def main(argv: Optional[List[str]] = None) -> None:
    args = parse_args(argv)
    os.makedirs(args.out_dir, exist_ok=True)  # before the timed run, not after it
    result = run(args)
    name = results_stem('residual', tag=machine_tag(result['env']['gpu']))
    with open(osp.join(args.out_dir, f'{name}.json'), 'w') as f:
        json.dump(result, f, indent=1)
    md = summarize(result)
    with open(osp.join(args.out_dir, f'{name}.md'), 'w') as f:
        f.write(md + '\n')
    print(md)


if __name__ == '__main__':
    quiet_upstream()
    main()
