"""torch.compile's inductor runs mmo1d's ops as calls of their kernels, also where ``CI`` is set.

Importing :mod:`mmo1d.ops` puts Python decompositions of ``mmo1d::oriented_dwconv1d`` and
``mmo1d::layer_norm_last`` into torch's global decomposition table (:mod:`.onnx_lowering`: the ONNX
exporter applies them). Inductor lowers an op that has no lowering of its own to a call of the op (a
fallback), but where the environment variable ``CI`` is set it refuses to do so for an op that has a
registered decomposition ("make_fallback(...): a decomposition exists, we should switch to it"), and
``torch.compile`` of any model with these ops failed in CI jobs. The decompositions are for export (a
dense KxK convolution, not what training should run), so the ops' fake kernels, which torch.compile
runs before inductor lowers the graph, register the fallback first, with the layout constraint that
inductor gives a custom op, marked as intended.
"""
import sys

import torch


def register_inductor_fallback(op: torch._ops.OpOverload) -> None:
    """Inductor's fallback for ``op`` where inductor is loaded and has no lowering of it yet."""
    lowering = sys.modules.get('torch._inductor.lowering')
    if lowering is None or op in lowering.lowerings:
        return
    try:  # inductor's internals, as torch 2.6 and later have them
        from torch._library.utils import get_layout_constraint_tag
        constraint = lowering.tag_to_layout_constraint(get_layout_constraint_tag(op, with_default=True))
    except (ImportError, AttributeError):
        return  # an older torch: its inductor lowers the op as before
    lowering.make_fallback(op, layout_constraint=constraint, override_decomp=True)
