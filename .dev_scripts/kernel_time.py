"""Kernel time of each pass of the CUDA op, apart from the host's launch latency: to compare two
builds of the kernels (e.g. before and after a restructuring of the sources) where a difference of a
few percent matters.

    python .dev_scripts/kernel_time.py TAG OUT.json     # with one build importable

Cases: N=64, C=512, 56 x 56, K=31; float32 NCHW at 0 and 45 degrees and in the 8-direction layout,
bfloat16 channels_last in the 8-direction layout; passes forward, weight gradient and input gradient
(from one kept forward). Per pass three times in ms:

* ``single``: CUDA events around one call after a synchronisation (what ``benchmark_op.py`` times:
  the kernel plus the host's time to reach the launch), median of 10;
* ``queued``: events around 40 calls issued back to back, per call, median of 2 rounds;
* ``kernels``: every CUDA kernel the pass launches (torch.profiler over 20 calls), as
  ``name: (launches per call, median device time in us)``.

Two builds: run it alternately from each tree with its extension built in place (A B A B) on one GPU.
"""
import json
import math
import statistics
import sys

import torch

from mmo1d.ops import oriented_dwconv1d
from mmo1d.ops.oriented_dwconv1d import oriented_angles

N, C, SIZE, K = 64, 512, 56, 31
CASES = ((torch.float32, torch.contiguous_format, (0.0, 45.0, 'mixed8')),
         (torch.bfloat16, torch.channels_last, ('mixed8', )))


def pass_calls(dtype, fmt, angle):
    """pass -> a call of that pass alone."""
    g = torch.Generator(device='cuda').manual_seed(0)
    x = torch.randn(N, C, SIZE, SIZE, device='cuda', dtype=dtype, generator=g).contiguous(memory_format=fmt)
    w = torch.randn(C, K, device='cuda', dtype=dtype, generator=g) / math.sqrt(K)
    theta = (oriented_angles(C) if angle == 'mixed8' else torch.full((C, ), math.radians(angle))).cuda()
    xg, wg = x.detach().requires_grad_(), w.detach().requires_grad_()
    dy = torch.randn_like(x)
    kept = oriented_dwconv1d(xg, wg, theta)

    def fwd():
        with torch.no_grad():
            return oriented_dwconv1d(x, w, theta)

    return {'fwd': fwd,
            'bwd_weight': lambda: torch.autograd.grad(kept, [wg], dy, retain_graph=True),
            'bwd_input': lambda: torch.autograd.grad(kept, [xg], dy, retain_graph=True)}


def events_ms(fn, calls):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / calls


def measure(fn):
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    single = statistics.median(events_ms(fn, 1) for _ in range(10))
    queued = statistics.median(events_ms(fn, 40) for _ in range(2))
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(20):
            fn()
        torch.cuda.synchronize()
    times = {}
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            times.setdefault(ev.name[:60], []).append(ev.device_time)
    kernels = {name: (len(v) / 20, statistics.median(v)) for name, v in times.items()}
    return dict(single=single, queued=queued, kernels=kernels)


def main(tag, out_path):
    results = {}
    for dtype, fmt, angles in CASES:
        for angle in angles:
            for name, fn in pass_calls(dtype, fmt, angle).items():
                key = f'{str(dtype)[6:]}-{angle}-{name}'
                r = results[key] = measure(fn)
                kernels = {k: (round(a, 2), round(b, 1)) for k, (a, b) in r['kernels'].items()}
                print(tag, key, f"single {r['single']:.4f} queued {r['queued']:.4f}", kernels, flush=True)
    with open(out_path, 'w') as f:
        json.dump(results, f, indent=1)


if __name__ == '__main__':
    main(*sys.argv[1:3])
