"""Parameter and FLOP counts of models with oriented 1D kernels.

Kirchmeyer & Deng, "Convolutional Networks with Oriented 1D Kernels", ICCV 2023, report FLOPs
the fvcore way (one multiply-add = one FLOP, element-wise operations not counted). mmengine's
fvcore-style :class:`~mmengine.analysis.FlopAnalyzer` does not know the custom ops:
:func:`oriented_dwconv1d_flop_jit` counts ``mmo1d::oriented_dwconv1d`` like a depthwise
convolution, K multiply-adds per output element (bias and the residual add not counted), and
``mmo1d::layer_norm_last`` is counted as fvcore counts ``aten::layer_norm`` (5 per element with
an affine transform; a fused GELU, element-wise, not counted).

Importing this module (which ``import mmo1d`` and ``import mmo1d.models`` do) adds both handles to
mmengine's default tables (:func:`register_flop_handles`), so every ``FlopAnalyzer`` and
``mmengine.analysis.get_model_complexity_info`` -- behind mmdet's and mmseg's
``tools/analysis_tools/get_flops.py`` -- counts the ops with no extra argument.
"""
from collections import Counter
from typing import Any, List, Sequence, Tuple

import torch
from mmengine.analysis import FlopAnalyzer, complexity_analysis
from mmengine.analysis.jit_handles import generic_activation_jit, get_shape, norm_flop_counter
from torch import nn

OP_NAME = 'mmo1d::oriented_dwconv1d'
LAYER_NORM_OP_NAME = 'mmo1d::layer_norm_last'


def oriented_dwconv1d_flop_jit(inputs: List[Any], outputs: List[Any]) -> 'Counter[str]':
    """FlopAnalyzer handle of ``mmo1d::oriented_dwconv1d``: N * C * H' * W' * K multiply-adds.

    Args:
        inputs (list): Traced inputs (input, weight (C, K), theta, bias, stride, ...).
        outputs (list): Traced outputs, the first of shape (N, C, H', W').

    Returns:
        Counter[str]: ``{'oriented_dwconv1d': flops}``.
    """
    out_shape = get_shape(outputs[0])
    kernel_size = get_shape(inputs[1])[-1]
    numel = 1
    for size in out_shape:
        numel *= size
    return Counter({'oriented_dwconv1d': numel * kernel_size})


# As aten::layer_norm, whose affine weight is argument 2; the fused op's is argument 1.
FLOP_HANDLES = {OP_NAME: oriented_dwconv1d_flop_jit, LAYER_NORM_OP_NAME: norm_flop_counter(1)}
# Activations (output elements of convolutions and linear layers): the oriented op as a convolution.
ACTIVATION_HANDLES = {OP_NAME: generic_activation_jit('oriented_dwconv1d')}


def register_flop_handles() -> None:
    """Add the ops' handles to mmengine's default FLOP and activation handle tables.

    ``FlopAnalyzer`` and ``ActivationAnalyzer`` read those tables when they are created, so
    ``mmengine.analysis.get_model_complexity_info`` and the toolboxes' ``get_flops.py`` count
    ``mmo1d::oriented_dwconv1d`` and ``mmo1d::layer_norm_last`` from then on. Idempotent.
    """
    complexity_analysis._DEFAULT_SUPPORTED_FLOP_OPS.update(FLOP_HANDLES)
    complexity_analysis._DEFAULT_SUPPORTED_ACT_OPS.update(ACTIVATION_HANDLES)


def flop_analyzer(model: nn.Module, inputs: Tuple[torch.Tensor, ...]) -> FlopAnalyzer:
    """An mmengine FlopAnalyzer that counts the oriented op, with element-wise ops silenced.

    Args:
        model (nn.Module): Model to trace (put it in eval mode first).
        inputs (tuple[Tensor]): Inputs of ``model.forward``.

    Returns:
        FlopAnalyzer: ``.total()`` gives the FLOPs, ``.by_module()`` the breakdown.
    """
    # The ops' handles are in mmengine's defaults (register_flop_handles). Element-wise
    # operations (GELU, adds, layer scale) stay uncounted, as in the paper's fvcore convention,
    # hence no warnings about them.
    analyzer = FlopAnalyzer(model, inputs)
    return analyzer.unsupported_ops_warnings(False).uncalled_modules_warnings(False)


def model_complexity(model: nn.Module, input_shape: Sequence[int] = (3, 224, 224)) -> Tuple[int, int]:
    """FLOPs (multiply-adds) for one image and trainable parameters (angles are buffers).

    Args:
        model (nn.Module): Model taking a (1, *input_shape) tensor.
        input_shape (Sequence[int]): (C, H, W) of one image. Default: (3, 224, 224).

    Returns:
        tuple[int, int]: ``(flops, params)``.
    """
    params = sum(p.numel() for p in model.parameters())
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            flops = flop_analyzer(model, (torch.zeros(1, *input_shape), )).total()
    finally:
        model.train(was_training)
    return flops, params


register_flop_handles()
