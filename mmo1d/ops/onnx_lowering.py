"""Lowering of mmo1d's ops to standard operators, for ``torch.export`` and ONNX export.

With truncated (or floored) tap offsets (rules ``'trunc'``, ``'floor'``), the oriented depthwise
1D convolution is exactly a depthwise KxK convolution whose kernel holds each tap's weight at the
tap's integer offset (coinciding taps added): the offsets stay within ``[-K//2, K//2]`` in both axes, so
``padding = K//2`` keeps the output size ``ceil(H/s) x ceil(W/s)``. In the residual form the
centre tap, at offset (0, 0) for every angle, gains 1. The interpolated rules (``'bilinear'``,
``'gaussian'``) are likewise a depthwise convolution with the dense kernel of its samples
(:func:`mmo1d.ops.interp_reference.interp_dense_kernel`; the residual form adds 1 at the centre).
The fused layer norm is ``F.layer_norm`` (then the exact GELU) in float32 (float64 for float64
input).

Importing :mod:`mmo1d.ops` registers, with no action from the user:

- Python decompositions of ``mmo1d::oriented_dwconv1d`` and ``mmo1d::layer_norm_last`` in
  ``torch._decomp.decomposition_table``, which ``torch.onnx.export(..., dynamo=True)`` applies to
  every op without an ONNX translation. :func:`export_decompositions` returns them for
  ``ExportedProgram.run_decompositions`` (``torch.export.export`` itself keeps mmo1d's ops, which
  have fake kernels, in the graph).
- TorchScript symbolics (``torch.onnx.register_custom_op_symbolic``, opset >= 17) for
  ``torch.onnx.export(..., dynamo=False)`` (the interpolated rules export with ``dynamo=True``: the
  symbolic says so).

The KxK kernel is computed in the graph from the weight and the angles (sine and cosine evaluated
in float64, rounded to float32, as :func:`mmo1d.ops.tap_offsets` does), so it needs no knowledge of
the angles' values at trace time; exporters and ONNX Runtime fold it to a constant when the weight
and the angles are initializers. Why a dense kernel and not a sum of shifted slices:
``benchmarks/results/onnx_lowering_cpu.md``.
"""
from typing import Callable, Dict, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor
from torch._decomp import register_decomposition

from .interp_reference import interp_dense_kernel
from .oriented_dwconv1d import _memory_format
from .reference import tap_offsets
from .tap_rule import INTERPOLATIONS, ROUNDINGS, check_tap_rule

#: Lowest ONNX opset of the TorchScript symbolics (``LayerNormalization``, ``ScatterElements``
#: with ``reduction='add'``).
MIN_OPSET = 17


def oriented_dense_kernel(weight: Tensor,
                          theta: Tensor,
                          rounding: str = 'trunc',
                          residual: bool = False) -> Tensor:
    """The depthwise KxK kernel equal to an oriented 1xK kernel.

    Args:
        weight (Tensor): (C, K), K odd.
        theta (Tensor): (C,) angles in radians.
        rounding (str): ``'trunc'`` or ``'floor'``. Default: ``'trunc'``.
        residual (bool): Add 1 at the centre (the residual form ``x + conv(x)``). Default: False.

    Returns:
        Tensor: (C, 1, K, K) in ``weight``'s dtype: tap ``t`` of channel ``c`` at
        ``(K//2 + dh[c, t], K//2 + dw[c, t])``, coinciding taps summed.
    """
    channels, k = weight.shape
    pad = k // 2
    dh, dw = tap_offsets(theta, k, rounding)
    index = (dh + pad) * k + (dw + pad)  # (C, K) into the flattened KxK window
    kernel = weight.new_zeros(channels, k * k).scatter_add(1, index, weight)
    if residual:
        centre = torch.arange(k * k, device=weight.device) == pad * k + pad
        kernel = kernel + centre.to(weight.dtype)
    return kernel.view(channels, 1, k, k)


def oriented_dwconv1d_decomposition(input: Tensor, weight: Tensor, theta: Tensor, bias: Optional[Tensor],
                                    stride: int, rounding: str, sigma: float, radius: float,
                                    residual: bool) -> Tensor:
    """``mmo1d::oriented_dwconv1d`` as a depthwise ``conv2d`` with its dense kernel.

    Same arguments as the op (``weight`` (C, K) or (C, 1, 1, K)); same output, in the op's memory
    format (with an interpolated rule up to the rounding of the positions: the kernel is computed in
    theta's dtype).
    """
    check_tap_rule(rounding, sigma, radius)
    weight = weight.reshape(weight.shape[0], weight.shape[-1])
    channels, k = weight.shape
    if rounding in ROUNDINGS:
        kernel = oriented_dense_kernel(weight.to(input.dtype), theta, rounding, residual)
    else:
        angles = theta.to(torch.float64 if input.dtype == torch.float64 else torch.float32)
        kernel = interp_dense_kernel(weight.to(angles.dtype), angles, rounding, sigma, radius)
        size = kernel.shape[-1]
        if residual:
            centre = torch.arange(size * size, device=weight.device) == (size // 2) * size + size // 2
            kernel = kernel + centre.to(kernel.dtype).view(1, 1, size, size)
        kernel = kernel.to(input.dtype)
    size = kernel.shape[-1]
    out = F.conv2d(input, kernel, None if bias is None else bias.to(input.dtype), stride, size // 2, 1, channels)
    return out.contiguous(memory_format=_memory_format(input))


def layer_norm_last_decomposition(input: Tensor, weight: Tensor, bias: Tensor, eps: float, gelu: bool,
                                  out_dtype: torch.dtype) -> Tuple[Tensor, Tensor, Tensor]:
    """``mmo1d::layer_norm_last`` as ``F.layer_norm`` (and ``F.gelu``) in the op's precision.

    Returns the op's three outputs: the result (contiguous, ``out_dtype``) and the per-row mean and
    reciprocal standard deviation (float32, float64 for float64 input) that backward would use.
    """
    acc = torch.float64 if input.dtype == torch.float64 else torch.float32
    x = input.to(acc)
    out = F.layer_norm(x, (x.shape[-1], ), weight.to(acc), bias.to(acc), eps)
    if gelu:
        out = F.gelu(out)
    var, mean = torch.var_mean(x, -1, correction=0)
    return out.to(out_dtype).contiguous(), mean.reshape(-1), torch.rsqrt(var + eps).reshape(-1)


_DECOMPOSITIONS: Dict[str, Callable] = {
    'oriented_dwconv1d': oriented_dwconv1d_decomposition,
    'layer_norm_last': layer_norm_last_decomposition,
}


def export_decompositions() -> Dict[torch._ops.OpOverload, Callable]:
    """The decompositions of mmo1d's forward ops into ATen ops.

    Returns:
        dict: ``{op overload: function}``, to pass to
        ``ExportedProgram.run_decompositions`` (merged into ``torch.export.default_decompositions()``
        to reach the core ATen op set).
    """
    return {getattr(torch.ops.mmo1d, name).default: fn for name, fn in _DECOMPOSITIONS.items()}


def _oriented_dwconv1d_symbolic(g, input, weight, theta, bias, stride, rounding, sigma, radius, residual):
    """TorchScript ONNX symbolic of ``mmo1d::oriented_dwconv1d`` with a rounded rule: the dense kernel,
    then ``Conv``."""
    from torch.onnx import symbolic_helper as sh
    from torch.onnx._internal.torchscript_exporter._type_utils import JitScalarType

    stride = sh._get_const(stride, 'i', 'stride')
    rounding = sh._get_const(rounding, 's', 'rounding')
    if rounding in INTERPOLATIONS:
        raise RuntimeError(f'mmo1d::oriented_dwconv1d with rounding {rounding!r} exports to ONNX with '
                           'torch.onnx.export(..., dynamo=True) (tools/deployment/pytorch2onnx.py without '
                           '--legacy), which lowers it to a depthwise Conv with its dense kernel')
    check_tap_rule(rounding, allowed=ROUNDINGS)
    residual = sh._get_const(residual, 'b', 'residual')
    sizes = sh._get_tensor_sizes(weight)
    channels, k = (sizes[0], sizes[-1]) if sizes else (None, None)
    if channels is None or k is None:
        raise RuntimeError('mmo1d::oriented_dwconv1d ONNX export needs the weight shape (C, K) or (C, 1, 1, K) '
                           'to be known at export time')
    pad = k // 2
    dtype = JitScalarType.from_value(weight)

    def const(value: Tensor):
        return g.op('Constant', value_t=value)

    angle = g.op('Cast', g.op('Cast', theta, to_i=JitScalarType.FLOAT.onnx_type()),
                 to_i=JitScalarType.DOUBLE.onnx_type())
    col = const(torch.tensor([channels, 1], dtype=torch.int64))

    def offsets(trig: str, d: Tensor):
        f32 = g.op('Cast', g.op(trig, angle), to_i=JitScalarType.FLOAT.onnx_type())
        v = g.op('Mul', g.op('Reshape', f32, col), const(d[None, :]))
        if rounding == 'floor':
            return g.op('Floor', v)
        return g.op('Where', g.op('Less', v, const(torch.tensor(0.0))), g.op('Ceil', v), g.op('Floor', v))

    d = torch.arange(k, dtype=torch.float32) - pad
    dh, dw = offsets('Sin', -d), offsets('Cos', d)
    index = g.op('Add', g.op('Mul', dh, const(torch.tensor(float(k)))), dw)
    index = g.op('Cast', g.op('Add', index, const(torch.tensor(float(pad * k + pad)))),
                 to_i=JitScalarType.INT64.onnx_type())
    zeros = g.op('ConstantOfShape', const(torch.tensor([channels, k * k], dtype=torch.int64)),
                 value_t=torch.zeros(1, dtype=dtype.dtype()))
    if len(sizes) != 2:  # the modules' (C, 1, 1, K) parameter
        weight = g.op('Reshape', weight, const(torch.tensor([channels, k], dtype=torch.int64)))
    kernel = g.op('ScatterElements', zeros, index, weight, axis_i=1, reduction_s='add')
    if residual:
        centre = torch.zeros(1, k * k, dtype=dtype.dtype())
        centre[0, pad * k + pad] = 1
        kernel = g.op('Add', kernel, const(centre))
    kernel = g.op('Reshape', kernel, const(torch.tensor([channels, 1, k, k], dtype=torch.int64)))
    inputs = [input, kernel] if sh._is_none(bias) else [input, kernel, bias]
    return g.op('Conv', *inputs, group_i=channels, kernel_shape_i=[k, k], pads_i=[pad] * 4,
                strides_i=[stride, stride], dilations_i=[1, 1])


def _layer_norm_last_symbolic(g, input, weight, bias, eps, gelu, out_dtype):
    """TorchScript ONNX symbolic of ``mmo1d::layer_norm_last``: ``LayerNormalization`` (+ GELU)."""
    from torch.onnx import symbolic_helper as sh
    from torch.onnx._internal.torchscript_exporter._type_utils import JitScalarType

    eps = sh._get_const(eps, 'f', 'eps')
    gelu = sh._get_const(gelu, 'b', 'gelu')
    out_dtype = JitScalarType(sh._get_const(out_dtype, 'i', 'out_dtype'))
    acc = JitScalarType.DOUBLE if JitScalarType.from_value(input) == JitScalarType.DOUBLE else JitScalarType.FLOAT

    def cast(value):
        return g.op('Cast', value, to_i=acc.onnx_type())

    out, mean, rstd = g.op('LayerNormalization', cast(input), cast(weight), cast(bias), axis_i=-1,
                           epsilon_f=eps, outputs=3)
    if gelu:
        if g.opset >= 20:
            out = g.op('Gelu', out)
        else:
            half = g.op('Constant', value_t=torch.tensor(0.5, dtype=acc.dtype()))
            one = g.op('Constant', value_t=torch.tensor(1.0, dtype=acc.dtype()))
            erf = g.op('Erf', g.op('Mul', out, g.op('Constant', value_t=torch.tensor(0.5**0.5, dtype=acc.dtype()))))
            out = g.op('Mul', g.op('Mul', out, half), g.op('Add', erf, one))
    return g.op('Cast', out, to_i=out_dtype.onnx_type()), mean, rstd


def _register() -> None:
    for op, fn in export_decompositions().items():
        register_decomposition(op)(fn)
    from torch.onnx import register_custom_op_symbolic
    register_custom_op_symbolic('mmo1d::oriented_dwconv1d', _oriented_dwconv1d_symbolic, MIN_OPSET)
    register_custom_op_symbolic('mmo1d::layer_norm_last', _layer_norm_last_symbolic, MIN_OPSET)


_register()

__all__ = ['MIN_OPSET', 'export_decompositions', 'layer_norm_last_decomposition', 'oriented_dense_kernel',
           'oriented_dwconv1d_decomposition']
