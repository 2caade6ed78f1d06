"""The oriented op against PyTorch's convolutions, on a CUDA GPU or on the CPU (torch only).

Each group of cases (one dtype and layout, size, pass and kernel size) runs in interleaved rounds
(:func:`mmo1d.benchmark.timing.measure_cases`):

* ``mmo1d`` at each angle asked for and in the 8-direction layout of the models (``mixed8``);
* ``torch_horizontal``: PyTorch's depthwise ``conv2d`` with a (1, K) kernel (on the GPU in NCHW,
  cuDNN's fast layout for it; on the CPU in the case's layout);
* on the GPU also ``torch_2d_7x7``, PyTorch's depthwise 7x7 ``conv2d`` (ConvNeXt), and ``masked_2d``,
  a KxK depthwise ``conv2d`` whose kernel is zero off the oriented lines, both in the case's layout.

Passes: ``fwd`` (forward; on the GPU with autograd on, as in training) and ``fwdbwd`` (forward and
the input and weight gradients).
"""
import argparse
import math
import platform
from typing import Callable, Dict, List

import torch
import torch.nn.functional as F

from mmo1d.ops import oriented_dwconv1d

from .op_inputs import DTYPES, LAYOUTS, MIXED, angles, input_sets, make_step, masked_kernel
from .timing import (
    command_line,
    copy_bandwidth_gbps,
    cpu_model,
    cpu_samples,
    git_commit,
    gpu_env,
    measure_cases,
    utc_now,
)

#: Angles of the GPU benchmark: every 22.5 degrees, and the models' layout.
GPU_ANGLES = [22.5 * i for i in range(8)] + [MIXED]
#: Angles of the CPU benchmark.
CPU_ANGLES = [0.0, 22.5, 45.0, 90.0, MIXED]
BASELINE_PASSES = ('fwd', 'fwdbwd')


def _print(rec: Dict) -> None:
    peak = f"  peak {rec['peak_mem_bytes'] / 2**20:8.1f} MiB" if 'peak_mem_bytes' in rec else ''
    print(f"{rec['impl']:17s} {rec['dtype']:8s} {rec['layout']:13s} H={rec['H']:3d} K={rec['K']:2d} "
          f"angle={str(rec['angle_deg']):6s} {rec['pass']:6s} {rec['ms']:8.3f} ms{peak}", flush=True)


def run_gpu(args: argparse.Namespace) -> Dict:
    """Every case of ``args`` (batch, channels, sizes, kernel_sizes, configs, angles, passes, repeats,
    rounds, warmup, no_masked) on GPU 0: ``{'env', 'records'}``."""
    torch.backends.cudnn.benchmark = True
    bandwidth = copy_bandwidth_gbps(args.repeats)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    n, c = args.batch, args.channels
    records: List[Dict] = []

    def measure(cases):
        for rec in measure_cases(cases, args.repeats, args.rounds, args.warmup):
            records.append(rec)
            _print(rec)

    def case(impl, dtype_name, layout, h, k, angle, backward, fn):
        return dict(impl=impl, dtype=dtype_name, layout=layout, H=h, K=k, angle_deg=angle,
                    **{'pass': 'fwdbwd' if backward else 'fwd'}), fn

    for dtype_name, layout in args.configs:
        dtype = DTYPES[dtype_name]
        for h in args.sizes:
            nbytes = n * c * h * h * torch.finfo(dtype).bits // 8
            sets = max(1, min(8, math.ceil(3 * l2 / nbytes)))  # rotate inputs when they fit in L2
            xs = input_sets((n, c, h, h), dtype, layout, 'cuda', sets)
            xs_nchw = [x.detach().contiguous().requires_grad_() for x in xs]
            grads = [torch.randn_like(x) for x in xs]
            grads_nchw = [g.contiguous() for g in grads]
            mixed = angles(MIXED, c, 'cuda')
            for backward in (p == 'fwdbwd' for p in args.passes):
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
                    for angle in args.angles:
                        theta = angles(angle, c, 'cuda')
                        cases.append(case('mmo1d', dtype_name, layout, h, k, angle, backward,
                                          make_step(lambda x, w, t=theta: oriented_dwconv1d(x, w, t), xs, weight,
                                                    grads, backward)))
                    measure(cases)
            del xs, xs_nchw, grads, grads_nchw
            torch.cuda.empty_cache()
    env = {**gpu_env(), 'batch': n, 'channels': c, 'repeats': math.ceil(args.repeats / args.rounds) * args.rounds,
           'rounds': args.rounds, 'copy_bandwidth_GBps': round(bandwidth, 1)}
    return {'env': env, 'records': records}


def run_cpu(args: argparse.Namespace) -> Dict:
    """Every case of ``args`` (batch, channels, one size, kernel_sizes, configs of one dtype, angles,
    passes, threads, repeats, rounds, warmup) on the CPU: ``{'env', 'records'}``."""
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    (h, ), dtype_name = args.sizes, args.configs[0][0]
    n, c, dtype = args.batch, args.channels, DTYPES[dtype_name]
    records = []
    for _, layout in args.configs:
        xs = input_sets((n, c, h, h), dtype, layout, 'cpu', 2)
        grads = [torch.randn(n, c, h, h, dtype=dtype).contiguous(memory_format=LAYOUTS[layout]) for _ in range(2)]
        for k in args.kernel_sizes:
            weight = torch.randn(c, k, dtype=dtype).div_(math.sqrt(k)).requires_grad_()
            w_h = weight.detach()[:, None, None, :].clone().requires_grad_()
            for pas in args.passes:
                backward = pas == 'fwdbwd'
                base = dict(dtype=dtype_name, layout=layout, H=h, K=k, **{'pass': pas})
                cases = [(dict(impl='torch_horizontal', angle_deg=None, **base),
                          make_step(lambda x, w, k=k: F.conv2d(x, w, padding=(0, k // 2), groups=c), xs, w_h, grads,
                                    backward, grad_mode=False))]
                for angle in args.angles:
                    theta = angles(angle, c, 'cpu')
                    cases.append((dict(impl='mmo1d', angle_deg=angle, **base),
                                  make_step(lambda x, w, t=theta: oriented_dwconv1d(x, w, t), xs, weight, grads,
                                            backward, grad_mode=False)))
                for rec in measure_cases(cases, args.repeats, args.rounds, args.warmup, timer=cpu_samples,
                                         peak=lambda fn: 0):
                    rec.pop('peak_mem_bytes')  # no allocator statistics on the CPU
                    records.append(rec)
                    _print(rec)
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
        'dtype': dtype_name,
        'repeats': math.ceil(args.repeats / args.rounds) * args.rounds,
        'rounds': args.rounds,
    }
    return {'env': env, 'records': records}


def run(args: argparse.Namespace) -> Dict:
    """:func:`run_gpu` or :func:`run_cpu`, by ``args.device``."""
    runner: Callable[[argparse.Namespace], Dict] = run_cpu if args.device == 'cpu' else run_gpu
    return runner(args)
