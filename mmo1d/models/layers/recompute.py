"""Keep no copy of an activation for backward: recompute it there instead.

Used where an activation is cheap to recompute from a tensor that backward keeps anyway: the
full-resolution output of the 1D stem's first Linear and its LN + GELU outputs. (The "++" blocks'
GELU output is made again inside one C++ op instead, ``mmo1d.ops.oriented_dwconv1d_gelu``: no
Python runs in its backward.)
"""
from typing import Callable

import torch
from torch import Tensor


class RecomputeSaved:
    """Saved-tensor hooks that keep no copy of one tensor for backward and recompute it instead.

    Inside ``torch.autograd.graph.saved_tensors_hooks(hooks.pack, hooks.unpack)``, a saved tensor
    that shares ``tensor``'s storage (the tensor or a view of it) is replaced by its geometry; in
    backward ``recompute()`` runs again without gradients and under the autocast state of the
    forward, and the view is rebuilt on its result. ``recompute`` must be deterministic.
    """

    def __init__(self, tensor: Tensor, recompute: Callable[[], Tensor]) -> None:
        self.storage = tensor.untyped_storage().data_ptr()
        self.recompute = recompute
        self.device_type = tensor.device.type
        self.autocast = torch.is_autocast_enabled(self.device_type)
        self.autocast_dtype = torch.get_autocast_dtype(self.device_type)

    def pack(self, t: Tensor):
        if t.untyped_storage().data_ptr() != self.storage:
            return t
        return (t.shape, t.stride(), t.storage_offset())

    def unpack(self, packed):
        if isinstance(packed, Tensor):
            return packed
        size, stride, offset = packed
        with torch.no_grad(), torch.autocast(self.device_type, self.autocast_dtype, enabled=self.autocast):
            base = self.recompute()
        return base.as_strided(size, stride, offset)


def call_recomputing(layer: Callable[[Tensor], Tensor], x: Tensor, remake: Callable[[], Tensor]) -> Tensor:
    """``layer(x)``, keeping no copy of ``x`` (or of a view of it) for backward: backward makes it
    again with ``remake()`` (``RecomputeSaved``). Just ``layer(x)`` when ``x`` needs no gradient."""
    if not x.requires_grad:
        return layer(x)
    hooks = RecomputeSaved(x, remake)
    with torch.autograd.graph.saved_tensors_hooks(hooks.pack, hooks.unpack):
        return layer(x)


__all__ = ['RecomputeSaved', 'call_recomputing']
