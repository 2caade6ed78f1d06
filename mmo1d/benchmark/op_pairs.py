"""One of the models' ops against the ATen path it replaced, at the models' sites: what the layer-norm and
residual benchmarks (``tools/analysis_tools/benchmark_{layer_norm,residual}.py``) share. Each site is
timed forward and forward+backward, ``mmo1d`` and ``aten`` in interleaved rounds (:func:`measure_cases`);
the tools supply the sites, the two calls and the markdown.
"""
import argparse
import json
import math
import os.path as osp
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import torch

from .names import machine_tag, results_stem
from .timing import copy_bandwidth_gbps, gpu_env, measure_cases

Case = Tuple[Dict, Callable[[int], None]]


def parse_pair_args(description: str, argv: Optional[List[str]] = None) -> argparse.Namespace:
    """``--repeats``, ``--rounds``, ``--warmup`` and ``--out-dir`` of a pair benchmark."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument('--repeats', type=int, default=51, help='timed calls per case (over all rounds)')
    parser.add_argument('--rounds', type=int, default=3, help='interleaved rounds per group of cases')
    parser.add_argument('--warmup', type=int, default=10)
    parser.add_argument('--out-dir', default='benchmarks/results')
    return parser.parse_args(argv)


def pair_cases(ours: Callable[[], torch.Tensor], aten: Callable[[], torch.Tensor], inputs: Sequence[torch.Tensor],
               grad: torch.Tensor, backward: bool) -> List[Case]:
    """The ``mmo1d`` and ``aten`` cases of one site: each call runs its function without gradients, or
    (``backward``) takes the gradients of ``inputs`` for the output gradient ``grad``."""
    def step(fn):
        if not backward:
            def call(i):
                with torch.no_grad():
                    fn()
        else:
            def call(i):
                torch.autograd.grad(fn(), tuple(inputs), grad)
        return call

    return [({'impl': 'mmo1d'}, step(ours)), ({'impl': 'aten'}, step(aten))]


def run_pairs(tool: str, sites: Iterable[Dict], make_cases: Callable[[Dict, bool], List[Case]],
              args: argparse.Namespace) -> Dict:
    """Every site forward (``pass`` 'fwd') and forward+backward ('fwdbwd'), each record tagged with its
    site's fields; ``{'env', 'records'}`` with the GPU, the timing settings and the copy bandwidth.

    Raises:
        SystemExit: without a CUDA device.
    """
    if not torch.cuda.is_available():
        raise SystemExit(f'{tool}: no CUDA device: this benchmark needs a CUDA GPU')
    records = []
    for fields in sites:
        for backward in (False, True):
            cases = make_cases(fields, backward)
            for rec, _ in cases:
                rec.update(fields, **{'pass': 'fwdbwd' if backward else 'fwd'})
            records += measure_cases(cases, args.repeats, args.rounds, args.warmup)
            torch.cuda.empty_cache()
    env = {**gpu_env(), 'batch': 64, 'repeats': math.ceil(args.repeats / args.rounds) * args.rounds,
           'rounds': args.rounds, 'copy_bandwidth_GBps': round(copy_bandwidth_gbps(20), 1)}
    return {'env': env, 'records': records}


def write_pair_results(benchmark: str, result: Dict, summarize: Callable[[Dict], str], out_dir: str) -> None:
    """``<out_dir>/<benchmark>_<tag>.json`` and ``.md`` (``summarize``), the markdown printed too."""
    name = results_stem(benchmark, tag=machine_tag(result['env']['gpu']))
    with open(osp.join(out_dir, f'{name}.json'), 'w') as f:
        json.dump(result, f, indent=1)
    md = summarize(result)
    with open(osp.join(out_dir, f'{name}.md'), 'w') as f:
        f.write(md + '\n')
    print(md)
