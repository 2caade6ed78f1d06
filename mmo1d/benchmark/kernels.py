"""GPU kernel time of a step, from ``torch.profiler``: the sum of the device self-times of the kernels
it launches (and its memcpy / memset), and its largest kernels.

Wall-clock step times include the gaps between kernels (host overhead, launch latency) and move
with whatever else runs on a shared GPU; the sum of kernel times measures the work on the device
alone and is the steadier figure to compare two models by.
"""
import re
from typing import Callable, Dict, Iterable

import torch

#: Largest kernels kept per profiled case.
TOP_KERNELS = 10
#: What the names of this project's kernels contain (their C++ namespace).
OWN_KERNELS = 'mmo1d::'


def device_self_us(evt) -> float:
    """Device self-time of a profiler event (``FunctionEvent`` / ``FunctionEventAvg``) in
    microseconds: ``self_device_time_total``, or ``self_cuda_time_total`` in torch versions before
    the rename."""
    us = getattr(evt, 'self_device_time_total', None)
    if us is None:
        us = getattr(evt, 'self_cuda_time_total', 0.0)
    return float(us)


def short_kernel_name(name: str) -> str:
    """A kernel's name without ``void``, its parameter list and the namespaces ``mmo1d::cuda::``,
    ``mmo1d::``, ``c10::`` and ``(anonymous namespace)::``, its template arguments kept:
    ``'void mmo1d::cuda::vec_wgrad_nhwc_kernel<c10::BFloat16, 7, 1, true>(mmo1d::cuda::VecWgradParams<...>)'``
    -> ``'vec_wgrad_nhwc_kernel<BFloat16, 7, 1, true>'``."""
    s = name.strip()
    s = s[5:] if s.startswith('void ') else s
    s = s.replace('(anonymous namespace)::', '')
    depth = 0
    for i, ch in enumerate(s):
        depth += (ch == '<') - (ch == '>')
        if ch == '(' and depth == 0 and i > 0 and not s[i - 1].isspace():  # not 'Memset (Device)'
            s = s[:i]
            break
    return re.sub(r'\b(?:mmo1d::cuda::|mmo1d::|c10::)', '', s)


def kernel_summary(events: Iterable, steps: int, top: int = TOP_KERNELS) -> Dict:
    """Kernel time per step and the largest kernels of ``steps`` profiled steps.

    Args:
        events: The profiler's events, e.g. ``prof.key_averages()``; those whose ``device_type`` is
            CUDA count (kernels, memcpy, memset), the CPU-side ones are ignored.
        steps: How many steps the events cover.
        top: How many of the largest kernels to list. Default: :data:`TOP_KERNELS`.

    Returns:
        ``kernel_ms`` (sum of the device self-times, milliseconds per step), ``launches`` (device
        events per step), ``own_kernel_ms`` (the part of ``kernel_ms`` in this project's kernels,
        :data:`OWN_KERNELS`), ``kernel_steps``, ``top_kernels``: ``{'name', 'total_ms', 'count'}``
        over all ``steps``, largest first, and ``own_kernels``: the same of every kernel of this
        project (what a comparison of two builds sets side by side).

    Raises:
        ValueError: if ``steps`` < 1.
        RuntimeError: if no device event was recorded (the profiler saw no CUDA kernels, e.g.
            without CUPTI).
    """
    if steps < 1:
        raise ValueError(f'steps must be >= 1, got {steps}')
    kernels = [(str(evt.key), device_self_us(evt) / 1e3, int(evt.count)) for evt in events
               if evt.device_type == torch.autograd.DeviceType.CUDA]
    if not kernels:
        raise RuntimeError('the profiler recorded no CUDA kernels (is CUPTI available to torch.profiler?)')
    kernels.sort(key=lambda k: -k[1])
    return {
        'kernel_ms': round(sum(ms for _, ms, _ in kernels) / steps, 4),
        'launches': round(sum(count for _, _, count in kernels) / steps, 1),
        'own_kernel_ms': round(sum(ms for name, ms, _ in kernels if OWN_KERNELS in name) / steps, 4),
        'kernel_steps': steps,
        'top_kernels': [{'name': name, 'total_ms': round(ms, 4), 'count': count} for name, ms, count in kernels[:top]],
        'own_kernels': [{'name': name, 'total_ms': round(ms, 4), 'count': count} for name, ms, count in kernels
                        if OWN_KERNELS in name],
    }


def profile_kernels(step: Callable[[], None], steps: int, top: int = TOP_KERNELS) -> Dict:
    """Run ``step`` ``steps`` times under ``torch.profiler`` (CUDA activity only) and return its
    :func:`kernel_summary`. The caller warms ``step`` up first."""
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    return kernel_summary(prof.key_averages(), steps, top)

