"""Adaptive pools that torch's TorchScript-based ONNX exporter cannot export at a given input size.

That exporter (``torch.onnx.export(..., dynamo=False)``) writes an adaptive pool as a pool of fixed
kernel and stride, which exists only where every output size divides the input size (or is 1).
UperNet's pyramid pooling module (PPM) pools the 1/32 feature map to 1, 2, 3 and 6: a 128x128 input
gives a 4x4 map, which the scales 3 and 6 do not divide, while 192x192 (a 6x6 map) exports. The
``torch.export``-based exporter has no such limit.
"""
import math
from contextlib import contextmanager
from typing import Iterator, List, NamedTuple, Optional, Sequence, Tuple

from torch import Tensor, nn

ADAPTIVE_POOLS = (nn.AdaptiveAvgPool2d, nn.AdaptiveMaxPool2d)


class PoolCall(NamedTuple):
    """One call of an adaptive pool: the module's name, its input and output sizes (H, W)."""
    name: str
    in_size: Tuple[int, int]
    out_size: Tuple[int, int]


@contextmanager
def record_adaptive_pools(model: nn.Module) -> Iterator[List[PoolCall]]:
    """Record every call of the model's adaptive pools (2D) while the context is open.

    Yields:
        list[PoolCall]: Filled by the forward passes run inside the context.
    """
    calls: List[PoolCall] = []

    def hook(name: str):
        def record(module: nn.Module, inputs: Tuple[Tensor, ...], output) -> None:
            output = output[0] if isinstance(output, tuple) else output  # max pools may return indices
            calls.append(PoolCall(name, tuple(inputs[0].shape[-2:]), tuple(output.shape[-2:])))
        return record

    handles = [
        m.register_forward_hook(hook(name)) for name, m in model.named_modules() if isinstance(m, ADAPTIVE_POOLS)
    ]
    try:
        yield calls
    finally:
        for handle in handles:
            handle.remove()


def _exportable(call: PoolCall) -> bool:
    return all(o == 1 for o in call.out_size) or all(i % o == 0 for i, o in zip(call.in_size, call.out_size))


def _stride(input_size: int, map_size: int) -> int:
    """The downsampling factor from the input to a feature map: the power of two nearest the ratio."""
    return 2 ** round(math.log2(input_size / map_size))


def legacy_export_problem(calls: Sequence[PoolCall], input_size: Tuple[int, int]) -> Optional[str]:
    """Why the TorchScript-based exporter cannot export the recorded pools, or None if it can.

    Args:
        calls (Sequence[PoolCall]): From :func:`record_adaptive_pools` around a forward pass.
        input_size (tuple[int, int]): Height and width of the model's input.

    Returns:
        str | None: The pools that break the rule, and the input sizes that keep every pool exportable.
    """
    failing = {call.name: call for call in calls if not _exportable(call)}
    if not failing:
        return None
    pools = ', '.join(f'{c.name} pools {c.in_size[0]}x{c.in_size[1]} (1/{_stride(input_size[0], c.in_size[0])} '
                      f'of the input) to {c.out_size[0]}x{c.out_size[1]}' for c in failing.values())
    # Input sizes that are multiples of stride x output size give every pool a map its output size divides.
    multiples = [math.lcm(*(_stride(size, c.in_size[d]) * c.out_size[d] for c in calls)) for d, size in
                 enumerate(input_size)]
    example = [math.ceil(size / m) * m for size, m in zip(input_size, multiples)]
    return (f"torch's TorchScript-based ONNX exporter exports an adaptive pool only where each output size "
            f'divides the input size of the pool, and at input {input_size[0]}x{input_size[1]}: {pools}. Every '
            f'pool scale (of a PPM, as in UperNet) must divide the size of the feature map it pools (1/32 of the '
            f'input for a PPM on the last stage): heights that are multiples of {multiples[0]} and widths that are '
            f'multiples of {multiples[1]} work, e.g. {example[0]}x{example[1]}')
