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
import math
import os
from typing import Dict, List, Optional

import torch

from mmo1d.benchmark.op_pairs import pair_cases, parse_pair_args, run_pairs, write_pair_results
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


def make_cases(fields: Dict, backward: bool):
    shape, dtype = fields['shape'], DTYPES[fields['dtype']]
    n, c = shape[:2]
    cl = torch.channels_last
    shortcut = torch.randn(shape, device='cuda').contiguous(memory_format=cl).requires_grad_(backward)
    branch = torch.randn(shape, device='cuda', dtype=dtype).contiguous(memory_format=cl).requires_grad_(backward)
    scale = torch.rand((n, c, 1, 1) if fields['per_image'] else (c, 1, 1), device='cuda').requires_grad_(backward)
    grad = torch.randn(shape, device='cuda').contiguous(memory_format=cl)

    def ours():
        return scaled_residual(shortcut, branch, scale)

    def aten():
        with torch.autocast('cuda', enabled=False):
            return torch.addcmul(shortcut, branch, scale)

    return pair_cases(ours, aten, (shortcut, branch, scale), grad, backward)


def run(args) -> Dict:
    sites = [dict(site=site, shape=list(shape), dtype=dtype, per_image=per_image)
             for site, shape, dtype, per_image in SITES]
    return run_pairs('benchmark_residual', sites, make_cases, args)


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
    args = parse_pair_args(__doc__.split('\n\n')[0], argv)
    os.makedirs(args.out_dir, exist_ok=True)  # before the timed run, not after it
    write_pair_results('residual', run(args), summarize, args.out_dir)


if __name__ == '__main__':
    quiet_upstream()
    main()
