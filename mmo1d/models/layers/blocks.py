"""ConvNeXt blocks with oriented 1D depthwise kernels.

Kirchmeyer & Deng, "Convolutional Networks with Oriented 1D Kernels", ICCV 2023, Sec. 4. One class
covers the four block designs, which differ only in their depthwise convolutions::

    x + DropPath(gamma * pw2(mid(GELU(pw1(LN(dw(x)))))))

========  =============================  ======================================
design    ``dw`` (on C channels)         ``mid`` (on the 4C hidden tensor)
========  =============================  ======================================
2D        7x7 depthwise Conv2d           identity
1D        oriented 1xK depthwise conv    identity
1D++      oriented 1xK1 (K1 = 15)        h + b + oriented 1xK2 (K2 = 31) of h
2D++      7x7 depthwise Conv2d           h + b + oriented 1xK2 (K2 = 31) of h
========  =============================  ======================================

Inside a block the tensor stays channels-last: (N, C, H, W) tensors are channels_last-strided
views of NHWC memory, so the permutes around the LayerNorm and the Linear layers cost nothing.
The LayerNorm feeds ``pw1`` only, so under autocast it writes the autocast dtype directly. In
training, the Linears' biases are added by the ops that follow them, which also give their gradients
without a reduction of their own: ``pw1``'s by the "++" convolution's GELU pass
(:meth:`OrientedConvNeXtBlock._mid`), ``pw2``'s by the residual (with a layer scale and
channels_last features).
"""
from typing import Optional

import torch
import torch.nn.functional as F
import torch.utils.checkpoint as cp
from mmengine.model import BaseModule
from torch import Tensor, nn

from mmo1d.ops import OrientedDWConv1d, scaled_residual

from .depthwise import DepthwiseConv2d
from .linear import plain_linear
from .norm import LayerNorm
from .tracing import traced_or_compiled


class DropPath(nn.Module):
    """Stochastic depth: zero a sample's residual branch with probability ``drop_prob``.

    Kept samples are scaled by ``1 / (1 - drop_prob)``. Identity in eval mode.

    Args:
        drop_prob (float): Probability to drop the branch of a sample, in [0, 1). Default: 0.
    """

    def __init__(self, drop_prob: float = 0.0) -> None:
        super().__init__()
        if not 0.0 <= drop_prob < 1.0:
            raise ValueError(f'drop_prob must be in [0, 1), got {drop_prob}')
        self.drop_prob = drop_prob

    def sample_scale(self, x: Tensor) -> Optional[Tensor]:
        """The per-sample factors (N, 1, ..., 1) that ``forward`` multiplies ``x`` by; None in eval
        mode or with ``drop_prob`` 0 (the identity)."""
        if self.drop_prob == 0.0 or not self.training:
            return None
        keep = 1.0 - self.drop_prob
        mask = x.new_empty((x.shape[0], ) + (1, ) * (x.dim() - 1)).bernoulli_(keep)
        return mask.div_(keep)

    def forward(self, x: Tensor) -> Tensor:
        """(N, ...) -> (N, ...)."""
        scale = self.sample_scale(x)
        return x if scale is None else x * scale

    def extra_repr(self) -> str:
        return f'drop_prob={self.drop_prob}'


class OrientedConvNeXtBlock(BaseModule):
    """ConvNeXt block with a 2D or oriented 1D depthwise convolution, optionally "++".

    Args:
        channels (int): Number of channels C.
        kernel_size (int): Size of the first depthwise convolution: K of the KxK Conv2d
            (``oriented=False``) or of the oriented 1xK kernel (``oriented=True``). Odd.
        oriented (bool): Use an oriented 1D depthwise convolution instead of a square one.
        mid_kernel_size (int, optional): K2 of the oriented 1xK2 convolution, in residual form,
            on the 4C hidden tensor (the "++" designs). None for the plain designs. Default: None.
        directions (int): Number of directions D of the oriented kernels. Default: 8.
        angle_offset (float): Rotation of every oriented kernel, in turns of 180 degrees
            (0.5 for the odd blocks of a stage with layer-wise rotation). Default: 0.
        mlp_ratio (float): Hidden width of the MLP, in multiples of C. Default: 4.
        drop_path_rate (float): Stochastic depth rate of the residual branch. Default: 0.
        layer_scale_init_value (float): Initial value of the layer scale ``gamma``; 0 or less
            removes it. Default: 1e-6.
        with_cp (bool): Recompute the block in the backward pass (activation checkpointing)
            to save memory. Default: False.
        oriented_cfg (dict, optional): Further arguments of every oriented convolution of the block
            (:class:`mmo1d.ops.OrientedDWConv1d`: ``rounding``, ``learnable_angles``, ``sigma``,
            ``radius``). Default: None.
        depthwise_layout (str): ``layout`` of the KxK depthwise convolution (``oriented=False``;
            :class:`DepthwiseConv2d`). Default: 'auto'.
        init_cfg (dict, optional): Initialisation config. Default: None.
    """

    def __init__(self,
                 channels: int,
                 kernel_size: int,
                 oriented: bool,
                 mid_kernel_size: Optional[int] = None,
                 directions: int = 8,
                 angle_offset: float = 0.0,
                 mlp_ratio: float = 4.0,
                 drop_path_rate: float = 0.0,
                 layer_scale_init_value: float = 1e-6,
                 with_cp: bool = False,
                 oriented_cfg: Optional[dict] = None,
                 depthwise_layout: str = 'auto',
                 init_cfg: Optional[dict] = None) -> None:
        super().__init__(init_cfg=init_cfg)
        oriented_cfg = oriented_cfg or {}
        if kernel_size < 1 or kernel_size % 2 == 0:
            raise ValueError(f'kernel_size must be odd and positive, got {kernel_size}')
        self.with_cp = with_cp
        if oriented:
            self.depthwise_conv = OrientedDWConv1d(
                channels, kernel_size, directions=directions, angle_offset=angle_offset, **oriented_cfg)
        else:
            self.depthwise_conv = DepthwiseConv2d(channels, kernel_size, depthwise_layout)
        self.norm = LayerNorm(channels, eps=1e-6, autocast_output=True)
        hidden = int(mlp_ratio * channels)
        self.pointwise_conv1 = nn.Linear(channels, hidden)
        self.act = nn.GELU()
        self.mid_conv = None if mid_kernel_size is None else OrientedDWConv1d(
            hidden, mid_kernel_size, directions=directions, angle_offset=angle_offset, residual=True, **oriented_cfg)
        self.pointwise_conv2 = nn.Linear(hidden, channels)
        self.gamma = nn.Parameter(torch.full((channels, ), float(layer_scale_init_value))) \
            if layer_scale_init_value > 0 else None
        self.drop_path = DropPath(drop_path_rate) if drop_path_rate > 0 else nn.Identity()

    def _inner_forward(self, x: Tensor) -> Tensor:
        shortcut = x
        x = self.norm(self.depthwise_conv(x).permute(0, 2, 3, 1))  # (N, H, W, C)
        x = self.act(self.pointwise_conv1(x)) if self.mid_conv is None else self._mid(x)  # (N, H, W, 4C)
        if (self.gamma is not None and shortcut.is_contiguous(memory_format=torch.channels_last)
                and self._split_bias(self.pointwise_conv2)):
            # pw2's bias added, and its gradient summed, by the residual's kernels (which take a
            # channels_last shortcut with the channels_last branch; other layouts run ATen's ops, where
            # the Linear adds its bias at no cost).
            x = F.linear(x, self.pointwise_conv2.weight)  # (N, H, W, C)
            return self._residual(shortcut, x.permute(0, 3, 1, 2), self.pointwise_conv2.bias)
        x = self.pointwise_conv2(x)  # (N, H, W, C)
        return self._residual(shortcut, x.permute(0, 3, 1, 2))

    def _split_bias(self, linear: nn.Module) -> bool:
        """Whether this call computes ``linear``'s product alone and leaves its bias to our next op:
        in training (gradients on, not traced or compiled, no activation checkpointing) with a plain
        ``nn.Linear``."""
        return torch.is_grad_enabled() and not self.with_cp and not traced_or_compiled() and plain_linear(linear)

    def _mid(self, x: Tensor) -> Tensor:
        """``pw1``, GELU and the "++" convolution: (N, H, W, C) -> (N, H, W, 4C).

        When training (without activation checkpointing, which recomputes everything anyway), one op
        takes ``pre = x @ pw1.weight^T`` and ``pw1.bias``: it adds the bias in the pass that makes
        the GELU output and keeps ``pre``, not the GELU output, for backward, which makes the GELU
        output again, GELU's gradient and the bias's gradient in one pass
        (:func:`mmo1d.ops.oriented_dwconv1d_gelu`). That saves one 4C activation per block, and the
        reduction over the 4C gradient that the Linear's backward would run for its bias. In the
        autocast dtype the GELU's input then differs from ``pw1(x)`` in rounding only: the bias is
        added to the rounded product in float32 instead of inside the matrix product. Without
        gradients, traced or compiled (export), or with a ``pw1`` that is not a plain ``nn.Linear``
        without hooks (an adapter, a quantised layer, a hook that expects it to run), the block calls
        ``pw1``, the GELU and the oriented op, which have lowerings.
        """
        if not self._split_bias(self.pointwise_conv1):
            pre = self.pointwise_conv1(x).permute(0, 3, 1, 2)  # GELU on this view: the same values on the CPU
            return self.mid_conv(self.act(pre)).permute(0, 2, 3, 1)
        pre = F.linear(x, self.pointwise_conv1.weight).permute(0, 3, 1, 2)
        return self.mid_conv.forward_gelu(pre, self.pointwise_conv1.bias).permute(0, 2, 3, 1)

    def _residual(self, shortcut: Tensor, branch: Tensor, bias: Optional[Tensor] = None) -> Tensor:
        """``shortcut + DropPath(gamma * (branch + bias))`` in one ``addcmul``.

        Outside autocast's type promotion, so a low-precision ``branch`` is read as it is: the
        float32 product of the two-step form is never written. In eager mode through
        :func:`mmo1d.ops.scaled_residual` (addcmul's values; a vectorised CUDA kernel, the branch's
        gradient in its dtype; ``bias``, pw2's when its product came alone, added in float32 and its
        gradient summed in the same pass); traced or compiled (export), as ``torch.addcmul``, which
        gets no bias (``_split_bias``).
        """
        scale = None if self.gamma is None else self.gamma.view(-1, 1, 1)
        if isinstance(self.drop_path, DropPath):
            keep = self.drop_path.sample_scale(branch)
            if keep is not None:
                scale = keep if scale is None else scale * keep
        if scale is None:
            return shortcut + branch
        if traced_or_compiled():
            with torch.autocast(branch.device.type, enabled=False):
                return torch.addcmul(shortcut, branch, scale)
        return scaled_residual(shortcut, branch, scale, bias)

    def forward(self, x: Tensor) -> Tensor:
        """(N, C, H, W) -> (N, C, H, W); channels_last-strided input avoids all copies."""
        if self.with_cp and x.requires_grad:
            return cp.checkpoint(self._inner_forward, x, use_reentrant=False)
        return self._inner_forward(x)


__all__ = ['DropPath', 'OrientedConvNeXtBlock']
