"""Each pass of the oriented op timed alone, per rounding (torch only).

Passes: ``fwd`` (the forward with bias and residual, as the "++" blocks call it, no autograd),
``bwd_input`` (the input gradient alone), ``bwd_weight`` (the weight and bias gradients; with an
interpolated rounding also the angles'), ``fwdbwd`` (forward and every gradient). The roundings
of one case (dtype, layout, shape, K, angles) run on the same tensors and angles, their passes in
interleaved rounds; each record names the kernel path of its pass and, where it is not 1, the stride.

The times are CUDA events around each call after a synchronisation: the kernels plus the host's time
to reach their launch. With ``--kernel-times`` a record also holds the kernels' own device time per
call (``kernel_ms``, :func:`mmo1d.benchmark.kernels.profile_kernels` over ``--kernel-steps`` calls after
the rounds), the steadier figure for an A/B of two builds' kernels.
"""
import argparse
import itertools
import math
from typing import Callable, Dict, List, Tuple

import torch
from torch import Tensor

from mmo1d.ops import oriented_dwconv1d, oriented_dwconv1d_path

from .kernels import profile_kernels
from .op_inputs import DTYPES, LAYOUTS, angles
from .op_interp import INTERPOLATED, RADIUS, SIGMA, default_channels
from .timing import cpu_samples, device_env, measure_cases, peak_bytes, round_spread, time_samples

PASSES = ('fwd', 'bwd_input', 'bwd_weight', 'fwdbwd')
#: The pass of :func:`mmo1d.ops.oriented_dwconv1d_path` whose kernel each pass runs.
PATH_OF = {'fwd': 'forward', 'bwd_input': 'backward_input', 'bwd_weight': 'backward_weight', 'fwdbwd': 'forward'}


def pass_calls(x: Tensor, dy: Tensor, w: Tensor, b: Tensor, th: Tensor, rounding: str,
               stride: int = 1) -> Dict[str, Callable[[], object]]:
    """pass -> a call of that pass alone on ``x``, the output gradient ``dy``, weight ``w``, bias ``b`` and
    angles ``th`` (none of them requiring a gradient) at ``stride``.

    The gradients go through autograd from one forward whose graph is kept: asked for the input's
    gradient alone (or the parameters'), the op's backward computes only that one, so the passes run
    through the public function of any build of the op.
    """
    interp = rounding in INTERPOLATED
    xg, wg, bg = (t.detach().requires_grad_() for t in (x, w, b))
    thg = th.detach().requires_grad_() if interp else th
    params = [wg, bg] + ([thg] if interp else [])

    def forward(x_, w_, th_, b_):
        return oriented_dwconv1d(x_, w_, th_, b_, stride, rounding, residual=True, sigma=SIGMA, radius=RADIUS)

    kept = forward(xg, wg, thg, bg)

    def fwd():
        with torch.no_grad():
            return forward(x, w, th, b)

    return {'fwd': fwd,
            'bwd_input': lambda: torch.autograd.grad(kept, [xg], dy, retain_graph=True),
            'bwd_weight': lambda: torch.autograd.grad(kept, params, dy, retain_graph=True),
            'fwdbwd': lambda: torch.autograd.grad(forward(xg, wg, thg, bg), [xg] + params, dy)}


def make_cases(args: argparse.Namespace, dtype_name: str, layout: str, h: int, k: int, angle,
               stride: int = 1) -> List[Tuple[Dict, Callable[[int], object]]]:
    """The ``(record, step)`` cases of one dtype, layout, size, K, angle and stride: every rounding and pass."""
    device, dtype = args.device, DTYPES[dtype_name]
    n, c = args.batch, args.channels or default_channels(dtype_name)
    g = torch.Generator(device=device).manual_seed(args.seed)
    x = torch.randn(n, c, h, h, generator=g, device=device, dtype=dtype).contiguous(memory_format=LAYOUTS[layout])
    ho = -(-h // stride)
    dy = torch.randn(n, c, ho, ho, generator=g, device=device, dtype=dtype).contiguous(memory_format=LAYOUTS[layout])
    w = (torch.randn(c, k, generator=g, device=device, dtype=dtype) / math.sqrt(k))
    b = torch.randn(c, generator=g, device=device, dtype=dtype)
    th = angles(angle, c, device, args.angle_jitter, args.seed)
    cases = []
    for rounding in args.rounding:
        calls = pass_calls(x, dy, w, b, th, rounding, stride)
        for pas in args.passes:
            path = oriented_dwconv1d_path(x, w, stride, PATH_OF[pas], th, rounding, RADIUS)
            rec = dict(impl='mmo1d', rounding=rounding, dtype=dtype_name, layout=layout, N=n, C=c, H=h, K=k,
                       **({'stride': stride} if stride != 1 else {}), angle_deg=angle,
                       angle_jitter=args.angle_jitter, **{'pass': pas}, path=path)
            cases.append((rec, lambda i, f=calls[pas]: f()))
    return cases


def run(args: argparse.Namespace) -> Dict:
    """Every case of ``args`` on ``args.device``: ``{'env', 'records'}``."""
    cuda = args.device == 'cuda'
    timer, peak = (time_samples, peak_bytes) if cuda else (cpu_samples, lambda fn: 0)
    records = []
    for dtype_name, layout in args.configs:
        for h in args.sizes:
            for k, angle, stride in itertools.product(args.kernel_sizes, args.angles, args.strides):
                cases = make_cases(args, dtype_name, layout, h, k, angle, stride)
                # measure_cases fills in the records of `cases`.
                measure_cases(cases, args.repeats, args.rounds, args.warmup, timer=timer, peak=peak)
                for rec, step in cases:
                    if not cuda:
                        rec.pop('peak_mem_bytes')
                    if args.kernel_times:
                        kernels = profile_kernels(lambda f=step: f(0), args.kernel_steps, top=1)
                        rec.update({name: kernels[name] for name in ('kernel_ms', 'own_kernel_ms', 'launches')})
                    records.append(rec)
                    kernel = f"  kernels {rec['kernel_ms']:.3f} ms" if 'kernel_ms' in rec else ''
                    print(f"{dtype_name:8s} {layout:13s} {rec['N']}x{rec['C']}x{h}x{h} K={k} s={stride} angle={angle} "
                          f"{rec['rounding']:8s} {rec['pass']:10s} {rec['ms']:8.3f} ms{kernel}  {rec['path']}",
                          flush=True)
                del cases
                if cuda:
                    torch.cuda.empty_cache()
    env = {**device_env(args.device), 'repeats': math.ceil(args.repeats / args.rounds) * args.rounds,
           'rounds': args.rounds, 'sigma': SIGMA, 'radius': RADIUS, 'seed': args.seed,
           'kernel_steps': args.kernel_steps if args.kernel_times else None}
    return {'env': env, 'records': records}


def summarize(result: Dict) -> str:
    """Markdown: per case and rounding, the time of each pass, their sum and the kernel paths; with kernel
    times, the same table of the kernels' own time."""
    env, recs = result['env'], result['records']
    passes = [p for p in PASSES if any(r['pass'] == p for r in recs)]
    lines = [f"# Passes of the oriented op on {env['gpu']}", '',
             f"torch {env['torch']}, CUDA {env['cuda']}, driver {env['driver']}, commit {env['commit']}, "
             f"{env['date']}; median of {env['repeats']} calls in {env['rounds']} interleaved rounds; gaussian sigma "
             f"{env['sigma']}, radius {env['radius']:g}.", '', f"Command: `{env['command']}`", '',
             'Times in ms, CUDA events around each call (the kernels and the host\'s time to reach them). fwd: '
             'forward with bias and residual; bwd_input, bwd_weight: the gradient of the input alone, and of weight '
             'and bias (and the angles with an interpolated rounding) alone, from a kept forward; fwdbwd: forward '
             'and every gradient. *sum* adds fwd, bwd_input and bwd_weight; spread = slowest / fastest round of the '
             'slowest pass.', '']
    groups: Dict[Tuple, Dict[str, Dict]] = {}
    for r in recs:
        key = (r['dtype'], r['layout'], r['N'], r['C'], r['H'], r['K'], r.get('stride', 1), str(r['angle_deg']),
               r['angle_jitter'], r['rounding'])
        groups.setdefault(key, {})[r['pass']] = r
    lines += _table(groups, passes, 'ms')
    if any('kernel_ms' in r for r in recs):
        lines += ['', f"Kernel time in ms per call: the device time of the kernels a call launches (torch.profiler "
                  f"over {env.get('kernel_steps')} calls after the rounds).", '']
        lines += _table(groups, passes, 'kernel_ms')
    return '\n'.join(lines)


def _table(groups: Dict[Tuple, Dict[str, Dict]], passes: List[str], measure: str) -> List[str]:
    """The rows of ``summarize``'s table of ``measure`` (``ms`` or ``kernel_ms``)."""
    lines = ['| dtype, layout | N x C x H x W, K | angles | rounding | ' + ' | '.join(passes)
             + ' | sum | spread | paths |', '|---|---|---|---|' + '---|' * len(passes) + '---|---|---|']
    for (dtype, layout, n, c, h, k, stride, angle, jitter, rounding), by_pass in groups.items():
        cells = [f"{by_pass[p][measure]:.3f}" if measure in by_pass.get(p, {}) else '-' for p in passes]
        total = sum(by_pass[p][measure] for p in ('fwd', 'bwd_input', 'bwd_weight') if measure in by_pass.get(p, {}))
        slowest = max(by_pass.values(), key=lambda r: r['ms'])
        spread = round_spread(slowest) if measure == 'ms' else None
        paths = ' / '.join(dict.fromkeys(r['path'] for r in by_pass.values()))
        moved = f' +-{jitter:g} rad' if jitter else ''
        strided = f', stride {stride}' if stride != 1 else ''
        lines.append(f"| {dtype}, {layout} | {n}x{c}x{h}x{h}, {k}{strided} | {angle}{moved} | {rounding} | "
                     + ' | '.join(cells) + f" | {total:.3f} | {'-' if spread is None else f'{spread:.2f}'} | {paths} |")
    return lines
