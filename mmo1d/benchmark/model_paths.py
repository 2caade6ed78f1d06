"""The kernel path that each oriented convolution of a model takes at its shapes, in each pass.

:func:`layer_paths` runs one forward of a model under a dispatch mode that records the calls of the
oriented op (``mmo1d::oriented_dwconv1d`` and its GELU form, as the dispatcher receives them: after
autocast's casts), then asks the dispatcher which kernel family would serve the forward, the input
gradient and the weight gradient of each (:func:`mmo1d.ops.oriented_dwconv1d_path`). Calls alike in
shape, dtype, layout, K, stride and rounding are listed once, with their count. On the CPU every
path is ``'cpu'``. On a GPU, ``kernels=True`` also runs each pass of each such call once and names
the op's kernels it launched, with their template arguments (which, e.g., tell a window gather's
blocks of several images from its sub-tiles).
"""
import contextlib
from typing import Dict, List, Optional, Tuple

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from mmo1d.ops import oriented_dwconv1d_path

#: The op's entry points whose calls are recorded; both take (input, weight, theta, bias, stride,
#: rounding, sigma, radius, ...): the GELU form's input is the tensor its GELU is taken of.
OPS = ('oriented_dwconv1d', 'oriented_dwconv1d_gelu')
PASSES = ('forward', 'backward_input', 'backward_weight')
INTERPOLATED = ('bilinear', 'gaussian')  # the roundings whose angles have a gradient


def layout_name(x: torch.Tensor) -> str:
    if x.is_contiguous():
        return 'nchw'
    return 'channels_last' if x.is_contiguous(memory_format=torch.channels_last) else 'strided'


class _OpCalls(TorchDispatchMode):
    """The first call of each kind of the oriented op while active, and how many there were."""

    def __init__(self):
        super().__init__()
        self.calls: Dict[Tuple, dict] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        packet = getattr(func, 'overloadpacket', None)
        if func.namespace == 'mmo1d' and getattr(packet, '__name__', '') in OPS:
            x, weight, theta, _, stride, rounding, sigma, radius, residual = args[:9]
            key = (tuple(x.shape), x.dtype, layout_name(x), weight.shape[-1], stride, rounding)
            if key in self.calls:
                self.calls[key]['count'] += 1
            else:
                self.calls[key] = dict(input=x, weight=weight, theta=theta, stride=stride, rounding=rounding,
                                       sigma=sigma, radius=radius, residual=residual, count=1)
        return func(*args, **(kwargs or {}))


def short_kernel_name(name: str) -> str:
    """``void mmo1d::cuda::win_gather_nhwc_kernel<c10::BFloat16, 4, 1>(...)`` ->
    ``win_gather_nhwc_kernel<BFloat16, 4, 1>``: the unqualified name and its template arguments."""
    name = name.removeprefix('void ').replace('(anonymous namespace)::', '').replace('c10::', '')
    depth = 0
    for i, ch in enumerate(name):
        depth += (ch == '<') - (ch == '>')
        if ch == '(' and depth == 0:
            name = name[:i]
            break
    head, _, args = name.partition('<')
    return head.split('::')[-1] + (f'<{args}' if args else '')


def pass_kernels(call: dict) -> Dict[str, str]:
    """The op's kernels that each of ``PASSES`` of a recorded call launches, run once each."""
    x, weight, theta = call['input'], call['weight'], call['theta']
    args = (call['stride'], call['rounding'], call['sigma'], call['radius'])
    # A forward outside the profile: the output's shape for the gradient, and the angles' cached table
    # structures built, so that each pass lists the kernels a training step runs in it.
    out = torch.ops.mmo1d.oriented_dwconv1d(x, weight, theta, None, *args, call['residual'])
    grad = torch.randn_like(out)
    runs = {
        'forward': lambda: torch.ops.mmo1d.oriented_dwconv1d(x, weight, theta, None, *args, call['residual']),
        'backward_input': lambda: torch.ops.mmo1d.oriented_dwconv1d_backward_input(grad, x, weight, theta, *args,
                                                                                   call['residual']),
        'backward_weight': lambda: torch.ops.mmo1d.oriented_dwconv1d_backward_params(
            grad, x, weight, theta, *args, False, call['rounding'] in INTERPOLATED and theta.requires_grad),
    }
    names = {}
    for p, run in runs.items():
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            run()
            torch.cuda.synchronize()
        found = [short_kernel_name(e.key) for e in prof.key_averages()
                 if e.device_type == torch.autograd.DeviceType.CUDA and 'mmo1d::' in e.key]
        names[p] = '; '.join(dict.fromkeys(found)) or '-'
    return names


def layer_paths(model: nn.Module, inputs: torch.Tensor, autocast_dtype: Optional[torch.dtype] = None,
                kernels: bool = False) -> List[dict]:
    """One row per kind of oriented-op call in a forward of ``model(inputs)`` (in call order): its
    input's shape, dtype and layout, K, stride, rounding, how many calls, and the kernel path of each
    of ``PASSES``; with ``kernels`` (a GPU), also the op's kernels of each pass (``'<pass> kernels'``)."""
    if kernels and not inputs.is_cuda:
        raise ValueError('kernels=True names the CUDA kernels of the calls: give the model and inputs on a GPU')
    autocast = (torch.autocast(inputs.device.type, dtype=autocast_dtype)
                if autocast_dtype is not None else contextlib.nullcontext())
    recorder = _OpCalls()
    with torch.no_grad(), autocast, recorder:
        model(inputs)
    rows = []
    for (shape, dtype, layout, k, stride, rounding), call in recorder.calls.items():
        paths = {p: oriented_dwconv1d_path(call['input'], call['weight'], stride, p, call['theta'], rounding,
                                           call['radius'], call['sigma']) for p in PASSES}
        row = dict(shape=shape, dtype=str(dtype).replace('torch.', ''), layout=layout, k=k, stride=stride,
                   rounding=rounding, count=call['count'], **paths)
        if kernels:
            with torch.no_grad():
                row.update({f'{p} kernels': names for p, names in pass_kernels(call).items()})
        rows.append(row)
    return rows


def paths_table(rows: List[dict]) -> List[str]:
    """The rows of :func:`layer_paths` as a markdown table (with the kernels where the rows have them)."""
    columns = list(PASSES) + [f'{p} kernels' for p in PASSES if rows and f'{p} kernels' in rows[0]]
    lines = ['| input (N, C, H, W) | dtype, layout | K | stride | rounding | calls | ' + ' | '.join(columns) + ' |',
             '|---|---|---|---|---|---|' + '---|' * len(columns)]
    for r in rows:
        lines.append(f"| {' x '.join(map(str, r['shape']))} | {r['dtype']}, {r['layout']} | {r['k']} | "
                     f"{r['stride']} | {r['rounding']} | {r['count']} | " + ' | '.join(r[c] for c in columns) + ' |')
    return lines
