"""Benchmark mmo1d's fused channels-last layer norm against the ATen path it replaces in the models.

For each layer norm of the ConvNeXt-T / T-1D models (batch 64 at 224x224: the 1D stem's two norms,
fused with GELU, the block norms of the four stages, a downsampling norm that reads the float32
residual stream) times, with CUDA events in interleaved rounds (``mmo1d.benchmark.timing.measure_cases``):

* ``mmo1d``: ``layer_norm_last`` writing the dtype its consumer computes in;
* ``aten``: what the models ran before, ``F.layer_norm`` (+ ``F.gelu``) under bf16 autocast, which
  returns float32, then the cast to bf16 that the following Linear or convolution makes;

forward and forward+backward (input, weight and bias gradients), in bf16 autocast and in float32.
Writes ``<out-dir>/layer_norm_<tag>.json`` and ``.md`` (the tag from :func:`mmo1d.benchmark.names.machine_tag`:
``layer_norm_h100``).

Example::

    python tools/analysis_tools/benchmark_layer_norm.py --out-dir benchmarks/results
"""
import os
from typing import Dict, List, Optional

import torch
import torch.nn.functional as F

from mmo1d.benchmark.op_pairs import pair_cases, parse_pair_args, run_pairs, write_pair_results
from mmo1d.ops import layer_norm_last
from mmo1d.utils.quiet import quiet_upstream

# (site, (N, H, W, C), input dtype, GELU fused, mode): the norms of ConvNeXt-T / T-1D at 224x224.
SITES = [
    ('1D stem norm1 (+GELU)', (64, 112, 112, 64), 'bfloat16', True, 'bf16'),
    ('1D stem norm2 (+GELU)', (64, 56, 56, 64), 'bfloat16', True, 'bf16'),
    ('block norm, stage 1', (64, 56, 56, 96), 'bfloat16', False, 'bf16'),
    ('block norm, stage 2', (64, 28, 28, 192), 'bfloat16', False, 'bf16'),
    ('block norm, stage 3', (64, 14, 14, 384), 'bfloat16', False, 'bf16'),
    ('block norm, stage 4', (64, 7, 7, 768), 'bfloat16', False, 'bf16'),
    ('downsampling norm 1 -> 2', (64, 56, 56, 96), 'float32', False, 'bf16'),
    ('block norm, stage 1', (64, 56, 56, 96), 'float32', False, 'fp32'),
    ('1D stem norm1 (+GELU)', (64, 112, 112, 64), 'float32', True, 'fp32'),
]
DTYPES = {'bfloat16': torch.bfloat16, 'float32': torch.float32}


def make_cases(fields: Dict, backward: bool):
    shape, dtype, gelu = fields['shape'], DTYPES[fields['dtype']], fields['gelu']
    c = shape[-1]
    x = torch.randn(shape, device='cuda', dtype=dtype, requires_grad=backward)
    w = torch.randn(c, device='cuda').mul_(0.1).add_(1).requires_grad_(backward)
    b = torch.randn(c, device='cuda').mul_(0.1).requires_grad_(backward)
    autocast = fields['mode'] == 'bf16'
    out_dtype = torch.bfloat16 if autocast else dtype
    grad = torch.randn(shape, device='cuda', dtype=out_dtype)

    def ours():
        return layer_norm_last(x, w, b, 1e-6, gelu, out_dtype)

    def aten():
        with torch.autocast('cuda', dtype=torch.bfloat16, enabled=autocast):
            y = F.layer_norm(x, (c, ), w, b, 1e-6)
            y = F.gelu(y) if gelu else y
        return y.to(out_dtype)

    return pair_cases(ours, aten, (x, w, b), grad, backward)


def run(args) -> Dict:
    sites = [dict(site=site, shape=list(shape), dtype=dtype, gelu=gelu, mode=mode)
             for site, shape, dtype, gelu, mode in SITES]
    return run_pairs('benchmark_layer_norm', sites, make_cases, args)


def summarize(result: Dict) -> str:
    env = result['env']
    lines = [
        f"# Fused layer norm on {env['gpu']}", '',
        f"torch {env['torch']}, CUDA {env['cuda']}, driver {env['driver']}, {env['date']}; CUDA events, "
        f"median of {env['repeats']} calls in {env['rounds']} interleaved rounds. Copy bandwidth "
        f"{env['copy_bandwidth_GBps']:.0f} GB/s.", '', f"Command: `{env['command']}`", '',
        '*mmo1d*: `layer_norm_last`, output in the dtype its consumer computes in (bf16 mode: bf16). '
        '*aten*: `F.layer_norm` (+ `F.gelu`) as the models ran it before (bf16 mode: under autocast, '
        'float32 out, then the consumer\'s cast to bf16). Forward+backward: gradients of input, '
        'weight and bias. GB/s: bytes of input and output over the forward time.', '',
        '| site | (N, H, W, C) | input | mode | pass | mmo1d ms | aten ms | ratio | mmo1d GB/s |',
        '|---|---|---|---|---|---|---|---|---|',
    ]
    recs = result['records']
    for ours, aten in zip(recs[0::2], recs[1::2]):
        n = 1
        for s in ours['shape']:
            n *= s
        size_in = 2 if ours['dtype'] == 'bfloat16' else 4
        size_out = 2 if ours['mode'] == 'bf16' else 4
        gbps = n * (size_in + size_out) / (ours['ms'] * 1e-3) / 1e9 if ours['pass'] == 'fwd' else None
        lines.append(f"| {ours['site']} | {tuple(ours['shape'])} | {ours['dtype']} | {ours['mode']} | "
                     f"{ours['pass']} | {ours['ms']:.3f} | {aten['ms']:.3f} | {ours['ms'] / aten['ms']:.2f}x | "
                     f"{'' if gbps is None else f'{gbps:.0f}'} |")
    return '\n'.join(lines)


def main(argv: Optional[List[str]] = None) -> None:
    args = parse_pair_args(__doc__.split('\n\n')[0], argv)
    os.makedirs(args.out_dir, exist_ok=True)  # before the timed run, not after it
    write_pair_results('layer_norm', run(args), summarize, args.out_dir)


if __name__ == '__main__':
    quiet_upstream()
    main()
