"""Benchmark the oriented depthwise 1D convolution's CPU kernels against PyTorch's depthwise conv.

Times (``time.perf_counter`` around each call after a warm-up; median of all calls; the cases of one
layout, pass and kernel size run in interleaved rounds through ``mmo1d.benchmark.timing.measure_cases``):

* ``mmo1d`` at the single angles 0, 22.5, 45 and 90 degrees and in the 8-direction layout of the
  models (``oriented_angles(C, 8)``, ``mixed8``);
* ``torch_horizontal``: PyTorch's depthwise ``conv2d`` with a (1, K) kernel (oneDNN on x86), in the
  same layout and dtype;

in NCHW and channels_last, forward and forward+backward (input and weight gradients), K in
{7, 15, 31}, with all cores by default. Each run is stored under a label (``--label``, e.g.
``before`` and ``after`` a kernel change) in ``<out-dir>/cpu_op_<cpu>.json``; the markdown
``<out-dir>/cpu_op_<cpu>.md`` is written from every run of that file (tables with the ratios
mmo1d / PyTorch, and the change of the first run to the last).

Example::

    python tools/analysis_tools/benchmark_op_cpu.py --label after --out-dir benchmarks/results
"""
import argparse
import json
import math
import os
import os.path as osp
import platform
import re
import subprocess
import time
from typing import Callable, Dict, List, Optional

import torch
import torch.nn.functional as F

from mmo1d.benchmark.timing import command_line, cpu_model, measure_cases, utc_now
from mmo1d.ops import oriented_angles, oriented_dwconv1d
from mmo1d.utils.quiet import quiet_upstream

ANGLES = [0.0, 22.5, 45.0, 90.0]
LAYOUTS = {'nchw': torch.contiguous_format, 'channels_last': torch.channels_last}
DTYPES = {'float32': torch.float32, 'float64': torch.float64, 'bfloat16': torch.bfloat16}
PASSES = ('fwd', 'fwdbwd')


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--batch', type=int, default=8)
    parser.add_argument('--channels', type=int, default=96)
    parser.add_argument('--size', type=int, default=56, help='height and width of the input')
    parser.add_argument('--kernel-sizes', type=int, nargs='+', default=[7, 15, 31])
    parser.add_argument('--layouts', nargs='+', default=list(LAYOUTS), choices=list(LAYOUTS))
    parser.add_argument('--dtype', default='float32', choices=list(DTYPES))
    parser.add_argument('--threads', type=int, default=os.cpu_count(), help='torch threads (default: all cores)')
    parser.add_argument('--repeats', type=int, default=21, help='timed calls per case over all rounds')
    parser.add_argument('--rounds', type=int, default=3, help='interleaved rounds per group of cases')
    parser.add_argument('--warmup', type=int, default=3, help='untimed calls before a case first runs')
    parser.add_argument('--label', default='after', help='name of this run in the results file')
    parser.add_argument('--out-dir', default='benchmarks/results')
    return parser.parse_args(argv)


def git_commit() -> str:
    """The short commit of the source tree, with ``+dirty`` when tracked files differ from it."""
    try:
        root = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
        sha = subprocess.run(['git', '-C', root, 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True,
                             check=True).stdout.strip()
        dirty = subprocess.run(['git', '-C', root, 'diff', '--quiet', 'HEAD', '--', 'csrc'], check=False).returncode
        return sha + ('+dirty' if dirty else '')
    except (OSError, subprocess.CalledProcessError):
        return 'unknown'


def cpu_timer(fn: Callable[[int], None], repeats: int, warmup: int) -> List[float]:
    """Times of ``repeats`` calls of ``fn(i)`` in milliseconds (wall clock)."""
    for i in range(warmup):
        fn(i)
    times = []
    for i in range(repeats):
        start = time.perf_counter()
        fn(i)
        times.append((time.perf_counter() - start) * 1e3)
    return times


def make_step(conv: Callable, xs: List[torch.Tensor], weight: torch.Tensor, grads: List[torch.Tensor],
              backward: bool) -> Callable[[int], None]:
    def step(i: int) -> None:
        x = xs[i % len(xs)]
        if backward:
            out = conv(x, weight)
            torch.autograd.grad(out, (x, weight), grads[i % len(grads)])
        else:
            with torch.no_grad():
                conv(x, weight)

    return step


def run(args: argparse.Namespace) -> Dict:
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    n, c, h, dtype = args.batch, args.channels, args.size, DTYPES[args.dtype]
    records = []
    for layout, fmt in LAYOUTS.items():
        if layout not in args.layouts:
            continue
        # Two input sets, alternated between calls, so that no call finds its input in the cache of the last.
        xs = [torch.randn(n, c, h, h, dtype=dtype).contiguous(memory_format=fmt).requires_grad_() for _ in range(2)]
        grads = [torch.randn(n, c, h, h, dtype=dtype).contiguous(memory_format=fmt) for _ in range(2)]
        for k in args.kernel_sizes:
            weight = torch.randn(c, k, dtype=dtype).div_(math.sqrt(k)).requires_grad_()
            w_h = weight.detach()[:, None, None, :].clone().requires_grad_()
            for pas in PASSES:
                backward = pas == 'fwdbwd'
                base = dict(dtype=args.dtype, layout=layout, H=h, K=k, **{'pass': pas})
                cases = [(dict(impl='torch_horizontal', angle_deg=None, **base),
                          make_step(lambda x, w, k=k: F.conv2d(x, w, padding=(0, k // 2), groups=c), xs, w_h, grads,
                                    backward))]
                for angle in ANGLES + ['mixed8']:
                    theta = oriented_angles(c, 8) if angle == 'mixed8' else torch.full((c, ), math.radians(angle))
                    cases.append((dict(impl='mmo1d', angle_deg=angle, **base),
                                  make_step(lambda x, w, t=theta: oriented_dwconv1d(x, w, t), xs, weight, grads,
                                            backward)))
                for rec in measure_cases(cases, args.repeats, args.rounds, args.warmup, timer=cpu_timer,
                                         peak=lambda fn: 0):
                    rec.pop('peak_mem_bytes')  # no allocator statistics on the CPU
                    records.append(rec)
                    print(f"{rec['impl']:16s} {layout:13s} K={k:2d} {pas:6s} angle={str(rec['angle_deg']):6s} "
                          f"{rec['ms']:8.3f} ms", flush=True)
    env = {
        'cpu': cpu_model(),
        'threads': torch.get_num_threads(),
        'torch': torch.__version__,
        'cpu_capability': torch.backends.cpu.get_cpu_capability(),
        'python': platform.python_version(),
        'git_commit': git_commit(),
        'date': utc_now(),
        'command': command_line(),
        'batch': n,
        'channels': c,
        'size': h,
        'dtype': args.dtype,
        'repeats': math.ceil(args.repeats / args.rounds) * args.rounds,
        'rounds': args.rounds,
    }
    return {'env': env, 'records': records}


def _find(recs: List[Dict], **kw) -> List[Dict]:
    return [r for r in recs if all(r[k] == v for k, v in kw.items())]


def run_table(result: Dict) -> List[str]:
    """Markdown table of one run: times in ms and the ratios of mmo1d to PyTorch's 1xK conv."""
    recs = result['records']
    heads = [f'{a:g} deg' for a in ANGLES] + ['mixed8']
    lines = ['| layout | pass | K | PyTorch 1xK | ' + ' | '.join(heads) + ' | slowest / PyTorch | mixed8 / PyTorch |',
             '|---|---|---|---|' + '---|' * len(heads) + '---|---|']
    for layout in LAYOUTS:
        for pas in PASSES:
            for k in sorted({r['K'] for r in recs}):
                base = _find(recs, impl='torch_horizontal', layout=layout, K=k, **{'pass': pas})
                if not base:
                    continue
                ref = base[0]['ms']
                ours = {r['angle_deg']: r['ms'] for r in _find(recs, impl='mmo1d', layout=layout, K=k, **{'pass': pas})}
                worst = max(ours[a] for a in ANGLES)
                cells = ' | '.join(f'{ours[a]:.2f}' for a in ANGLES + ['mixed8'])
                lines.append(f'| {layout} | {pas} | {k} | {ref:.2f} | {cells} | {worst / ref:.2f}x | '
                             f"{ours['mixed8'] / ref:.2f}x |")
    return lines


def change_table(first: Dict, last: Dict) -> List[str]:
    """Markdown table: the slowest angle and mixed8 of the first run against the last, with their ratios."""
    lines = ['| layout | pass | K | slowest angle, ms | slowest / PyTorch | mixed8, ms | mixed8 / PyTorch |',
             '|---|---|---|---|---|---|---|']

    def stats(result, layout, pas, k):
        recs = result['records']
        ref = _find(recs, impl='torch_horizontal', layout=layout, K=k, **{'pass': pas})[0]['ms']
        ours = {r['angle_deg']: r['ms'] for r in _find(recs, impl='mmo1d', layout=layout, K=k, **{'pass': pas})}
        worst = max(ours[a] for a in ANGLES)
        return worst, worst / ref, ours['mixed8'], ours['mixed8'] / ref

    for layout in LAYOUTS:
        for pas in PASSES:
            for k in sorted({r['K'] for r in last['records']}):
                if not (_find(first['records'], layout=layout, K=k, **{'pass': pas})
                        and _find(last['records'], layout=layout, K=k, **{'pass': pas})):
                    continue
                a, b = stats(first, layout, pas, k), stats(last, layout, pas, k)
                lines.append(f'| {layout} | {pas} | {k} | {a[0]:.2f} -> {b[0]:.2f} | {a[1]:.2f}x -> {b[1]:.2f}x | '
                             f'{a[2]:.2f} -> {b[2]:.2f} | {a[3]:.2f}x -> {b[3]:.2f}x |')
    return lines


def summarize(runs: Dict[str, Dict]) -> str:
    """Markdown of every run of a results file (in the order they were added), then first -> last."""
    labels = list(runs)
    env = runs[labels[-1]]['env']
    lines = [f"# Oriented depthwise 1D convolution on the CPU: {env['cpu']}", '',
             f"N={env['batch']}, C={env['channels']}, {env['size']}x{env['size']}, {env['dtype']}; "
             f"median of {env['repeats']} calls in {env['rounds']} interleaved rounds (wall clock). "
             'Times in ms. *PyTorch 1xK* = PyTorch\'s depthwise conv2d with a (1, K) kernel in the same layout '
             'and dtype; *slowest* = slowest of the single angles; *mixed8* = the 8-direction layout of the '
             'models. fwdbwd = forward + input and weight gradients.', '']
    if len(labels) > 1:
        lines += [f'## Change: {labels[0]} -> {labels[-1]}', ''] + change_table(runs[labels[0]], runs[labels[-1]])
        lines.append('')
    for label in labels:
        e = runs[label]['env']
        lines += [f'## {label}', '',
                  f"{e['cpu']}, {e['threads']} threads, torch {e['torch']} (CPU capability {e['cpu_capability']}), "
                  f"commit {e['git_commit']}, {e['date']}.", '', f"Command: `{e['command']}`", '']
        lines += run_table(runs[label]) + ['']
    return '\n'.join(lines)


def results_name(cpu: str) -> str:
    """``cpu_op_<cpu model>`` with every run of characters other than letters and digits as ``_``."""
    name = re.sub(r'[^A-Za-z0-9]+', '_', cpu).strip('_')
    return f"cpu_op_{name or 'cpu'}"


def main(argv: Optional[List[str]] = None) -> None:
    args = parse_args(argv)
    result = run(args)
    os.makedirs(args.out_dir, exist_ok=True)
    stem = osp.join(args.out_dir, results_name(result['env']['cpu']))
    runs: Dict[str, Dict] = {}
    if osp.exists(stem + '.json'):
        with open(stem + '.json') as f:
            runs = json.load(f)['runs']
    runs.pop(args.label, None)  # a run under an existing label replaces it and moves last
    runs[args.label] = result
    with open(stem + '.json', 'w') as f:
        json.dump({'runs': runs}, f, indent=1)
    md = summarize(runs)
    with open(stem + '.md', 'w') as f:
        f.write(md + '\n')
    print(md)
    print(f'wrote {stem}.json and .md')


if __name__ == '__main__':
    quiet_upstream()
    main()
