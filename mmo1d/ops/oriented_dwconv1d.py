"""Oriented depthwise 1D convolution (Kirchmeyer & Deng, ICCV 2023).

A depthwise convolution whose 1xK kernel of channel ``c`` is turned by the angle ``theta[c]``
(radians, counter-clockwise). Semantics: :mod:`mmo1d.ops.reference`. The op is registered with
``torch.library`` as ``torch.ops.mmo1d.oriented_dwconv1d`` (C++ schema in ``csrc/``), with CPU and
CUDA kernels, fake kernels for ``torch.compile``, autograd for input, weight and bias (in C++, so a
call costs the host no more than an ATen convolution), and an autocast rule (runs in the autocast
dtype, like ``conv2d``). The op takes its tap rule (:mod:`mmo1d.ops.tap_rule`) as
``(rounding, sigma, radius)``; with the interpolated rules (``'bilinear'``, ``'gaussian'``,
semantics: :mod:`mmo1d.ops.interp_reference`) its autograd also gives theta a gradient: the angles
can be learned.
"""
import math
from typing import List, Optional

import torch
from torch import Tensor, nn

from ._ext import _C, ensure_cuda_kernels
from .inductor_fallbacks import register_inductor_fallback
from .tap_rule import DEFAULT_RADIUS, DEFAULT_SIGMA, INTERPOLATIONS, check_tap_rule

_ops = torch.ops.mmo1d


def _memory_format(input: Tensor) -> torch.memory_format:
    # Must agree with output_memory_format() in csrc/oriented_dwconv1d.h.
    if input.is_contiguous(memory_format=torch.channels_last) and not input.is_contiguous():
        return torch.channels_last
    return torch.contiguous_format


@torch.library.register_fake('mmo1d::oriented_dwconv1d')
def _forward_fake(input, weight, theta, bias, stride, rounding, sigma, radius, residual):
    register_inductor_fallback(torch.ops.mmo1d.oriented_dwconv1d.default)  # it has an export decomposition
    n, c, h, w = input.shape
    return torch.empty((n, c, (h + stride - 1) // stride, (w + stride - 1) // stride),
                       dtype=input.dtype, device=input.device, memory_format=_memory_format(input))


@torch.library.register_fake('mmo1d::oriented_dwconv1d_gelu')
def _forward_gelu_fake(pre, weight, theta, bias, stride, rounding, sigma, radius, residual, pre_bias=None):
    return _forward_fake(pre, weight, theta, bias, stride, rounding, sigma, radius, residual)


@torch.library.register_fake('mmo1d::oriented_dwconv1d_backward_input')
def _backward_input_fake(grad_output, input, weight, theta, stride, rounding, sigma, radius, residual):
    return torch.empty(input.shape, dtype=input.dtype, device=input.device,
                       memory_format=_memory_format(input))


@torch.library.register_fake('mmo1d::oriented_dwconv1d_backward_params')
def _backward_params_fake(grad_output, input, weight, theta, stride, rounding, sigma, radius, need_bias, need_theta):
    return (torch.empty(weight.shape, dtype=weight.dtype, device=weight.device),
            torch.empty(theta.shape if need_theta else (0, ), dtype=theta.dtype, device=theta.device),
            torch.empty(input.shape[1:2] if need_bias else (0, ), dtype=input.dtype, device=input.device))


@torch.library.register_fake('mmo1d::gelu_and_grad')
def _gelu_and_grad_fake(pre, grad, bias=None):
    # (gelu(pre + bias), gelu_backward(grad, pre + bias), its sum over every dim but 1): the GELU of
    # oriented_dwconv1d_gelu; the last two empty without grad, the last without bias.
    dpre = torch.empty_like(pre) if grad is not None else pre.new_empty((0, ))
    if bias is None:
        return torch.empty_like(pre), dpre, pre.new_empty((0, ))
    dbias = bias.new_empty((pre.shape[1], ) if grad is not None else (0, ))
    return torch.empty_like(pre), dpre, dbias


def oriented_dwconv1d(input: Tensor,
                      weight: Tensor,
                      theta: Tensor,
                      bias: Optional[Tensor] = None,
                      stride: int = 1,
                      rounding: str = 'trunc',
                      residual: bool = False,
                      sigma: float = DEFAULT_SIGMA,
                      radius: float = DEFAULT_RADIUS) -> Tensor:
    """Depthwise convolution with a 1xK kernel turned to a per-channel angle.

    Args:
        input (Tensor): (N, C, H, W), float32/float64/float16/bfloat16, NCHW or channels_last
            (the output keeps the layout).
        weight (Tensor): (C, K) or (C, 1, 1, K) with K odd; same dtype as ``input``.
        theta (Tensor): (C,) angles in radians. With ``'trunc'`` and ``'floor'`` they are used as
            float32 and get no gradient; with ``'bilinear'`` and ``'gaussian'`` they are used as
            float32 (float64 for a float64 input) and get a gradient when they require one.
        bias (Tensor, optional): (C,). Default: None.
        stride (int): Stride along both axes, >= 1. Default: 1.
        rounding (str): How a tap reads the input at its position ``(p*s - d sin(theta),
            q*s + d cos(theta))``: rounded to a pixel, ``'trunc'`` (toward zero, as the authors'
            kernels and released weights) or ``'floor'`` (the paper's formula); or interpolated,
            ``'bilinear'`` (as ``grid_sample`` with ``align_corners=True`` and zero padding) or
            ``'gaussian'`` (a normalised gaussian band, see :mod:`mmo1d.ops.interp_reference`).
            Default: 'trunc'.
        residual (bool): Return ``input + bias + conv(input)`` (input sampled at the output
            pixels), the form used inside the "++" blocks. Default: False.
        sigma (float): Width of the gaussian band, > 0 (``'gaussian'`` only). Default: 0.5.
        radius (float): Radius of the gaussian band in pixels, in (1, 8) and not a whole number
            (a whole number puts the output pixel on the band's edge; ``'gaussian'`` only).
            Default: 1.5.

    Returns:
        Tensor: (N, C, ceil(H / stride), ceil(W / stride)).
    """
    _check_call('oriented_dwconv1d', input, weight, stride, rounding, sigma, radius)
    return _ops.oriented_dwconv1d(input, weight, theta, bias, stride, rounding, float(sigma), float(radius), residual)


def oriented_dwconv1d_gelu(pre: Tensor,
                           weight: Tensor,
                           theta: Tensor,
                           bias: Optional[Tensor] = None,
                           stride: int = 1,
                           rounding: str = 'trunc',
                           residual: bool = False,
                           sigma: float = DEFAULT_SIGMA,
                           radius: float = DEFAULT_RADIUS,
                           pre_bias: Optional[Tensor] = None) -> Tensor:
    """``oriented_dwconv1d(F.gelu(pre + pre_bias), ...)`` (the exact GELU) keeping ``pre``, not its GELU,
    for backward.

    Backward makes the GELU output again. Where ``pre`` is kept anyway this saves one activation, as a
    recompute through saved-tensor hooks would, but in one autograd node in C++: the "++" blocks call
    it on the output of their first Linear. Arguments and result as :func:`oriented_dwconv1d`, with
    ``pre`` in the place of ``input``. Without ``pre_bias``, values and gradients are those of the two
    calls, bit for bit.

    Args:
        pre_bias (Tensor, optional): (C,) added to ``pre`` per channel before the GELU, in float32
            (float64 for a float64 ``pre``) and never cast by autocast: the bias of the Linear that
            makes ``pre``, whose gradient then comes from the pass that makes GELU's gradient instead of
            a reduction of its own. The GELU output is ``F.gelu(pre.float() + pre_bias.float())`` rounded
            to ``pre``'s dtype; ``pre_bias`` gets the sum of ``pre``'s gradient over every other dim (in
            float32, in its own dtype). Default: None.
    """
    _check_call('oriented_dwconv1d_gelu', pre, weight, stride, rounding, sigma, radius)
    if pre_bias is not None and (pre_bias.dim() != 1 or pre.dim() != 4 or pre_bias.shape[0] != pre.shape[1]):
        raise ValueError(f'oriented_dwconv1d_gelu: pre_bias must have shape (C,) = ({pre.shape[1]},) for pre '
                         f'{tuple(pre.shape)}, got {tuple(pre_bias.shape)}')
    return _ops.oriented_dwconv1d_gelu(pre, weight, theta, bias, stride, rounding, float(sigma), float(radius),
                                       residual, pre_bias)


def _check_call(op: str, input: Tensor, weight: Tensor, stride: int, rounding: str, sigma: float,
                radius: float) -> None:
    """The checks of a call that the op's schema does not make; the CUDA kernels loaded for a CUDA input."""
    _check_tap_rule(op, rounding, sigma, radius)
    if isinstance(stride, bool) or not isinstance(stride, int):
        raise ValueError(f'{op}: stride must be an int, got {stride!r}')
    # A (C, 1, 1, K) weight goes to the op as it is: the op views it as (C, K) (a reshape here would
    # cost host time at every call and, in training, a node of the backward graph). While tracing
    # (TorchScript ONNX export) sizes are traced values: the op's own check of the shape runs then.
    if not torch.jit.is_tracing() and weight.dim() == 4 and (weight.shape[1] != 1 or weight.shape[2] != 1):
        raise ValueError(f'{op}: a 4-D weight must have shape (C, 1, 1, K), got {tuple(weight.shape)}')
    if input.is_cuda:
        ensure_cuda_kernels()


def _check_tap_rule(op: str, rounding: str, sigma: float, radius: float) -> None:
    try:
        check_tap_rule(rounding, sigma, radius)
    except ValueError as e:
        raise ValueError(f'{op}: {e}') from None


PASSES = ('forward', 'backward_input', 'backward_weight')


def oriented_dwconv1d_path(input: Tensor,
                           weight: Tensor,
                           stride: int = 1,
                           pass_: str = 'forward',
                           theta: Optional[Tensor] = None,
                           rounding: str = 'trunc',
                           radius: float = DEFAULT_RADIUS,
                           sigma: float = DEFAULT_SIGMA) -> str:
    """The kernel path a call of :func:`oriented_dwconv1d` takes, without running it.

    On CUDA the dispatcher picks, per call, the first kernel family (in the order of
    :func:`oriented_dwconv1d_paths`) whose domain (pass, dtype, layout, stride, K, channel alignment,
    angles) and the device's limits (shared memory, block and grid sizes) admit the call; the
    general kernels serve every other call. This names that choice. Useful to see which kernels
    serve a model's shapes, and for tests that every path is exercised.

    Args:
        input (Tensor): The input of the call (its shape, dtype, layout, device and alignment count;
            for ``'backward_input'`` the output gradient is taken to be laid out and aligned alike).
        weight (Tensor): (C, K) or (C, 1, 1, K).
        stride (int): Stride of the call. Default: 1.
        pass_ (str): ``'forward'``, ``'backward_input'`` or ``'backward_weight'``.
        theta (Tensor, optional): The call's angles, (C,) on input's device. Default: the 8
            directions the models use, ``oriented_angles(C)``.
        rounding (str): One of ``'trunc'``, ``'floor'``, ``'bilinear'``, ``'gaussian'``.
            Default: ``'trunc'``.
        radius (float): Radius of the gaussian band (``'gaussian'`` only). Default: 1.5.
        sigma (float): Width of the gaussian band (``'gaussian'`` only). Default: 0.5.

    Returns:
        str: ``'cpu'`` on the CPU; on CUDA one of :func:`oriented_dwconv1d_paths` (with
        ``'+nchw_copies'`` when the general kernels run channels_last tensors through NCHW copies).
    """
    if pass_ not in PASSES:
        raise ValueError(f'oriented_dwconv1d_path: pass_ must be one of {PASSES}, got {pass_!r}')
    _check_tap_rule('oriented_dwconv1d_path', rounding, sigma, radius)
    if theta is None:
        theta = oriented_angles(input.shape[1] if input.dim() == 4 else 1).to(input.device)
    if input.is_cuda:
        ensure_cuda_kernels()
    return _ops.oriented_dwconv1d_path(input, weight, theta, stride, rounding, float(sigma), float(radius), pass_)


def oriented_dwconv1d_paths() -> List[str]:
    """Every CUDA kernel path, in the dispatcher's order of preference (empty without CUDA kernels).

    The list comes from the compiled kernel families, so it names exactly the paths that
    :func:`oriented_dwconv1d_path` can return on CUDA.
    """
    if not _C.cuda_compiled():
        if not torch.cuda.is_available():
            return []
        ensure_cuda_kernels()  # compiled just in time: the list comes with them
    return list(_ops.oriented_dwconv1d_cuda_paths())


def oriented_angles(channels: int, directions: int = 8, offset: float = 0.0) -> Tensor:
    """Per-channel angles: ``directions`` contiguous groups of channels, evenly spread over 180 deg.

    ``group(c) = floor((D * (c + 1) - 1) / C)`` and ``theta_c = pi * ((group(c) / D + offset) mod 1)``.

    Args:
        channels (int): Number of channels C.
        directions (int): Number of directions D. Default: 8.
        offset (float): Rotation of every angle, in turns of 180 degrees (0.5 = +90 degrees).

    Returns:
        Tensor: (C,) float32 radians in [0, pi).
    """
    if channels < 1:
        raise ValueError(f'channels must be >= 1, got {channels}')
    if directions < 1:
        raise ValueError(f'directions must be >= 1, got {directions}')
    c = torch.arange(channels, dtype=torch.float64)
    group = torch.div(directions * (c + 1) - 1, channels, rounding_mode='floor')
    return (math.pi * torch.remainder(group / directions + offset, 1.0)).to(torch.float32)


class OrientedDWConv1d(nn.Module):
    """Depthwise 1xK convolution turned to per-channel angles.

    The angles (``theta``, radians, float32) are set by ``directions`` and ``angle_offset``. With
    fixed angles they are a buffer; with ``learnable_angles=True`` (which needs an interpolating
    ``rounding``, ``'bilinear'`` or ``'gaussian'``) they are an ``nn.Parameter`` that training
    updates. Either way they are saved in the state dict as ``theta`` and stay float32 when the
    module is cast to another dtype.

    Args:
        channels (int): Number of input and output channels.
        kernel_size (int): Odd kernel length K.
        stride (int): Stride. Default: 1.
        bias (bool): Learn a per-channel bias. Default: True.
        directions (int): Number of directions D (``channels`` gives every channel its own angle).
            Default: 8.
        angle_offset (float): Rotation of all angles, in turns of 180 degrees. Default: 0.
        rounding (str): ``'trunc'``, ``'floor'``, ``'bilinear'`` or ``'gaussian'``
            (:func:`oriented_dwconv1d`). Default: ``'trunc'``.
        residual (bool): Compute ``x + b + conv(x)``. Default: False.
        learnable_angles (bool): Make ``theta`` a parameter. Default: False.
        sigma (float): Width of the gaussian band (``'gaussian'`` only). Default: 0.5.
        radius (float): Radius of the gaussian band (``'gaussian'`` only). Default: 1.5.
    """

    def __init__(self,
                 channels: int,
                 kernel_size: int,
                 stride: int = 1,
                 bias: bool = True,
                 directions: int = 8,
                 angle_offset: float = 0.0,
                 rounding: str = 'trunc',
                 residual: bool = False,
                 learnable_angles: bool = False,
                 sigma: float = DEFAULT_SIGMA,
                 radius: float = DEFAULT_RADIUS) -> None:
        super().__init__()
        if kernel_size < 1 or kernel_size % 2 == 0:
            raise ValueError(f'kernel_size must be odd and positive, got {kernel_size}')
        if stride < 1:
            raise ValueError(f'stride must be >= 1, got {stride}')
        check_tap_rule(rounding, sigma, radius)
        if learnable_angles and rounding not in INTERPOLATIONS:
            raise ValueError(f'learnable_angles needs an interpolating rounding {INTERPOLATIONS}: with '
                             f'{rounding!r} the angles get no gradient')
        self.channels = channels
        self.kernel_size = kernel_size
        self.stride = stride
        self.directions = directions
        self.angle_offset = angle_offset
        self.rounding = rounding
        self.residual = residual
        self.learnable_angles = learnable_angles
        self.sigma = float(sigma)
        self.radius = float(radius)
        self.weight = nn.Parameter(torch.empty(channels, 1, 1, kernel_size))
        self.bias = nn.Parameter(torch.empty(channels)) if bias else None
        theta = oriented_angles(channels, directions, angle_offset)
        if learnable_angles:
            self.theta = nn.Parameter(theta)
        else:
            self.register_buffer('theta', theta)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # The initialisation of nn.Conv2d with fan_in = K.
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(self.kernel_size)
            nn.init.uniform_(self.bias, -bound, bound)

    def _apply(self, fn, recurse=True):
        # Angles are float32 constants or parameters: follow the module's device, never its dtype
        # (their values are restored, not cast back, so a cast loses no precision).
        theta = self.theta.detach()
        super()._apply(fn, recurse)
        if self.theta.dtype != theta.dtype:
            restored = theta.to(self.theta.device)
            if isinstance(self.theta, nn.Parameter):
                self.theta.data = restored
            else:
                self.theta = restored
        return self

    def forward(self, x: Tensor) -> Tensor:
        """(N, C, H, W) -> (N, C, ceil(H / stride), ceil(W / stride))."""
        return oriented_dwconv1d(x, self.weight, self.theta, self.bias, self.stride, self.rounding, self.residual,
                                 self.sigma, self.radius)

    def forward_gelu(self, pre: Tensor, pre_bias: Optional[Tensor] = None) -> Tensor:
        """``forward(F.gelu(pre + pre_bias))``, keeping ``pre`` instead of the GELU output for backward
        (:func:`oriented_dwconv1d_gelu`)."""
        return oriented_dwconv1d_gelu(pre, self.weight, self.theta, self.bias, self.stride, self.rounding,
                                      self.residual, self.sigma, self.radius, pre_bias)

    def extra_repr(self) -> str:
        s = (f'{self.channels}, kernel_size={self.kernel_size}, stride={self.stride}, '
             f'directions={self.directions}, angle_offset={self.angle_offset}')
        if self.bias is None:
            s += ', bias=False'
        if self.rounding != 'trunc':
            s += f', rounding={self.rounding!r}'
        if self.rounding == 'gaussian':
            s += f', sigma={self.sigma}, radius={self.radius}'
        if self.learnable_angles:
            s += ', learnable_angles=True'
        if self.residual:
            s += ', residual=True'
        return s
