"""The kernel path that each oriented convolution of a model takes at its shapes, in each pass.

:func:`layer_paths` runs one forward of a model under a dispatch mode that records the calls of the
oriented op (``mmo1d::oriented_dwconv1d`` and its GELU form, as the dispatcher receives them: after
autocast's casts), then asks the dispatcher which kernel family would serve the forward, the input
gradient and the weight gradient of each (:func:`mmo1d.ops.oriented_dwconv1d_path`). Calls alike in
shape, dtype, layout, K, stride and rounding are listed once, with their count. On the CPU every
path is ``'cpu'``.
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
            x, weight, theta, _, stride, rounding, sigma, radius = args[:8]
            key = (tuple(x.shape), x.dtype, layout_name(x), weight.shape[-1], stride, rounding)
            if key in self.calls:
                self.calls[key]['count'] += 1
            else:
                self.calls[key] = dict(input=x, weight=weight, theta=theta, stride=stride, rounding=rounding,
                                       sigma=sigma, radius=radius, count=1)
        return func(*args, **(kwargs or {}))


def layer_paths(model: nn.Module, inputs: torch.Tensor, autocast_dtype: Optional[torch.dtype] = None) -> List[dict]:
    """One row per kind of oriented-op call in a forward of ``model(inputs)`` (in call order): its
    input's shape, dtype and layout, K, stride, rounding, how many calls, and the kernel path of each
    of ``PASSES``."""
    autocast = (torch.autocast(inputs.device.type, dtype=autocast_dtype)
                if autocast_dtype is not None else contextlib.nullcontext())
    recorder = _OpCalls()
    with torch.no_grad(), autocast, recorder:
        model(inputs)
    rows = []
    for (shape, dtype, layout, k, stride, rounding), call in recorder.calls.items():
        paths = {p: oriented_dwconv1d_path(call['input'], call['weight'], stride, p, call['theta'], rounding,
                                           call['radius'], call['sigma']) for p in PASSES}
        rows.append(dict(shape=shape, dtype=str(dtype).replace('torch.', ''), layout=layout, k=k, stride=stride,
                         rounding=rounding, count=call['count'], **paths))
    return rows


def paths_table(rows: List[dict]) -> List[str]:
    """The rows of :func:`layer_paths` as a markdown table."""
    lines = ['| input (N, C, H, W) | dtype, layout | K | stride | rounding | calls | ' + ' | '.join(PASSES) + ' |',
             '|---|---|---|---|---|---|' + '---|' * len(PASSES)]
    for r in rows:
        lines.append(f"| {' x '.join(map(str, r['shape']))} | {r['dtype']}, {r['layout']} | {r['k']} | "
                     f"{r['stride']} | {r['rounding']} | {r['count']} | " + ' | '.join(r[p] for p in PASSES) + ' |')
    return lines
