"""Host time per call of the oriented op against ``torch.conv2d`` on the same tensor (torch only).

At detection and segmentation batch sizes a training step can be bound by the host: what matters
there is how long the CPU takes to issue a call, not how long its kernels run. Each case issues many
calls in a row without synchronising (:func:`mmo1d.benchmark.timing.host_us_per_call`), on a tensor
small enough for the GPU to keep up, for the forward alone (no autograd) and forward + backward:

* ``conv2d_1xK`` and ``conv2d_7x7``: depthwise ``torch.conv2d`` with a (C, 1, 1, K) and a 7x7 kernel;
* ``mmo1d``: :func:`mmo1d.ops.oriented_dwconv1d` with each rounding asked for (a (C, K) weight);
* ``empty_like``: one allocation of the input's size, for scale.
"""
import argparse
import math
import statistics
from typing import Callable, Dict, List, Tuple

import torch
import torch.nn.functional as F

from mmo1d.ops import oriented_dwconv1d

from .op_inputs import DTYPES, LAYOUTS, angles
from .timing import device_env, host_us_per_call

HOST_PASSES = ('fwd', 'fwdbwd')


def make_calls(args: argparse.Namespace, dtype_name: str, layout: str, h: int,
               k: int) -> List[Tuple[str, str, str, Callable[[], object]]]:
    """``(impl, rounding, pass, call)`` of one dtype, layout, size and K."""
    device, dtype, n, c = args.device, DTYPES[dtype_name], args.batch, args.channels
    x = torch.randn(n, c, h, h, device=device, dtype=dtype).contiguous(memory_format=LAYOUTS[layout])
    w = (torch.randn(c, k, device=device) / math.sqrt(k)).to(dtype)
    b = torch.zeros(c, device=device, dtype=dtype)
    th = angles(args.angles[0], c, device)
    w77 = torch.randn(c, 1, 7, 7, device=device, dtype=dtype)
    grad = torch.randn_like(x)
    convs = [('conv2d_1xK', None, w, lambda x_, w_, b_: F.conv2d(x_, w_.view(c, 1, 1, k), b_, padding=(0, k // 2),
                                                                 groups=c)),
             ('conv2d_7x7', None, w77, lambda x_, w_, b_: F.conv2d(x_, w_, b_, padding=3, groups=c))]
    for rounding in args.rounding:
        convs.append(('mmo1d', rounding, w, lambda x_, w_, b_, r=rounding: oriented_dwconv1d(x_, w_, th, b_,
                                                                                               rounding=r)))
    xg, bg = x.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    calls = []
    for impl, rounding, weight, f in convs:
        wg = weight.detach().clone().requires_grad_()
        if 'fwd' in args.passes:
            calls.append((impl, rounding, 'fwd', lambda f=f, weight=weight: f(x, weight, b)))
        if 'fwdbwd' in args.passes:
            calls.append((impl, rounding, 'fwdbwd', lambda f=f, wg=wg: f(xg, wg, bg).backward(grad)))
    if 'fwd' in args.passes:
        calls.append(('empty_like', None, 'fwd', lambda: torch.empty_like(x)))
    return calls


def run(args: argparse.Namespace) -> Dict:
    """Every call of ``args`` on ``args.device``: ``{'env', 'records'}``, each record with ``host_us`` (the
    median over ``args.rounds`` rounds of ``args.repeats`` calls; a third as many for forward + backward)."""
    sync = torch.cuda.synchronize if args.device == 'cuda' else (lambda: None)
    records = []
    for dtype_name, layout in args.configs:
        for h in args.sizes:
            for k in args.kernel_sizes:
                for impl, rounding, pas, call in make_calls(args, dtype_name, layout, h, k):
                    calls = args.repeats if pas == 'fwd' else max(1, args.repeats // 3)
                    # The forward alone without autograd, as inference issues it.
                    with torch.set_grad_enabled(pas == 'fwdbwd'):
                        rounds = host_us_per_call(call, calls, args.rounds, args.warmup, sync)
                    rec = dict(impl=impl, rounding=rounding, dtype=dtype_name, layout=layout, N=args.batch,
                               C=args.channels, H=h, K=k, angle_deg=args.angles[0], **{'pass': pas},
                               host_us=round(statistics.median(rounds), 2), round_us=[round(t, 2) for t in rounds])
                    records.append(rec)
                    print(f"{impl:11s} {str(rounding):8s} {dtype_name:8s} {layout:13s} {pas:6s} "
                          f"{rec['host_us']:8.1f} us per call", flush=True)
    env = {**device_env(args.device), 'calls': args.repeats, 'rounds': args.rounds}
    return {'env': env, 'records': records}


def summarize(result: Dict) -> str:
    """Markdown: host microseconds per call of each case, and its ratio to ``conv2d_1xK``'s."""
    env, recs = result['env'], result['records']
    lines = [f"# Host time per call of the oriented op on {env['gpu']}", '',
             f"torch {env['torch']}, CUDA {env['cuda']}, driver {env['driver']}, commit {env['commit']}, "
             f"{env['date']}; median of {env['rounds']} rounds of {env['calls']} calls issued without "
             f"synchronising ({max(1, env['calls'] // 3)} for forward + backward).", '',
             f"Command: `{env['command']}`", '',
             '| dtype, layout | N x C x H x W, K | call | rounding | pass | us per call | / conv2d_1xK |',
             '|---|---|---|---|---|---|---|']
    base = {(r['dtype'], r['layout'], r['H'], r['K'], r['pass']): r['host_us'] for r in recs
            if r['impl'] == 'conv2d_1xK'}
    for r in recs:
        ref = base.get((r['dtype'], r['layout'], r['H'], r['K'], r['pass']))
        ratio = '-' if not ref else f"{r['host_us'] / ref:.2f}x"
        lines.append(f"| {r['dtype']}, {r['layout']} | {r['N']}x{r['C']}x{r['H']}x{r['H']}, {r['K']} | {r['impl']} | "
                     f"{r['rounding'] or '-'} | {r['pass']} | {r['host_us']:.1f} | {ratio} |")
    return '\n'.join(lines)
