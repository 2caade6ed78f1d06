"""Stems of the oriented 1D ConvNeXt models.

Kirchmeyer & Deng, "Convolutional Networks with Oriented 1D Kernels", ICCV 2023, Sec. 4:
the 1D and 1D++ models replace ConvNeXt's 4x4 patchify stem by a "depthwise 1D stem" built from
oriented 1D depthwise convolutions; the 2D and 2D++ models keep the patchify stem.
"""
from typing import Callable, Optional

import torch
from torch import Tensor, nn

from mmo1d.ops import OrientedDWConv1d

from .linear import aligned_linear, plain_linear
from .norm import LayerNorm, LayerNorm2d
from .recompute import call_recomputing
from .tracing import traced_or_compiled


def patchify_stem(in_channels: int, out_channels: int, patch_size: int = 4) -> nn.Sequential:
    """ConvNeXt's stem: Conv2d(patch_size x patch_size, stride patch_size), channels-first LN.

    Args:
        in_channels (int): Input channels (3 for images).
        out_channels (int): Output channels C1.
        patch_size (int): Kernel size and stride. Default: 4.

    Returns:
        nn.Sequential: (N, in, H, W) -> (N, C1, H // patch_size, W // patch_size); submodules
        ``0`` (the convolution) and ``1`` (the LayerNorm), the official ConvNeXt names.
    """
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, patch_size, stride=patch_size),
        LayerNorm2d(out_channels))


class DepthwiseOrientedStem(nn.Module):
    """Depthwise 1D stem: two stride-2 oriented depthwise convolutions between Linear layers.

    Channels-last: Linear(in -> C0); oriented dw 1xK (stride 2, angle offset 0, bias); LN; GELU;
    oriented dw 1xK (stride 2, angle offset 0.5); LN; GELU; Linear(C0 -> C1); LN.
    Submodule names follow the authors' release (``pw1``, ``dw1``, ``norm1``, ...); each GELU is
    fused into the LayerNorm before it (``norm1``, ``norm2``).

    When training, the inputs of ``dw1``, ``dw2`` and ``pw2`` are not kept for backward but
    recomputed there (bitwise the same) from tensors that backward keeps anyway: ``pw1``'s
    full-resolution output from the image (a 3 -> C0 linear map), and each LN + GELU output from
    the LN's own saved input. At 224x224, C0 = 64 and a float32 batch of 64 images that saves
    784 + 196 + 49 MiB (half of it in bf16/fp16); what the stem keeps is ``dw1``'s and ``dw2``'s
    outputs (for the LNs) and ``pw2``'s (for ``norm3``).

    Args:
        in_channels (int): Input channels (3 for images).
        stem_channels (int): Width C0 of the oriented convolutions. Default: 64.
        out_channels (int): Output channels C1.
        kernel_size (int): Oriented kernel length K (31 for 1D, 15 for 1D++).
        directions (int): Number of directions D. Default: 8.
        oriented_cfg (dict, optional): Further arguments of both oriented convolutions
            (:class:`mmo1d.ops.OrientedDWConv1d`). Default: None.
    """

    def __init__(self,
                 in_channels: int,
                 stem_channels: int,
                 out_channels: int,
                 kernel_size: int,
                 directions: int = 8,
                 oriented_cfg: Optional[dict] = None) -> None:
        super().__init__()
        oriented_cfg = oriented_cfg or {}
        self.pw1 = nn.Linear(in_channels, stem_channels)
        self.dw1 = OrientedDWConv1d(stem_channels, kernel_size, stride=2, directions=directions, **oriented_cfg)
        self.norm1 = LayerNorm(stem_channels, eps=1e-6, act='gelu', autocast_output=True)
        self.dw2 = OrientedDWConv1d(
            stem_channels, kernel_size, stride=2, directions=directions, angle_offset=0.5, **oriented_cfg)
        self.norm2 = LayerNorm(stem_channels, eps=1e-6, act='gelu', autocast_output=True)
        self.pw2 = nn.Linear(stem_channels, out_channels)
        self.norm3 = LayerNorm(out_channels, eps=1e-6)

    def _pw1(self, image: Tensor) -> Tensor:
        """``pw1`` on the (N, H, W, in) image view. On a GPU, in eager mode and with a plain
        ``nn.Linear``, its input features are padded with zeros to a multiple of 8
        (:func:`aligned_linear`): with the 3 of an RGB image cuBLAS ran a kernel for unaligned rows,
        0.36 ms of ConvNeXt-T-1D++'s 8.9 ms of bf16 inference kernels on an H200."""
        if image.is_cuda and plain_linear(self.pw1) and not traced_or_compiled():
            return aligned_linear(image, self.pw1)
        return self.pw1(image)

    def forward(self, x: Tensor) -> Tensor:
        """(N, in, H, W) -> (N, C1, ceil(ceil(H / 2) / 2), ceil(ceil(W / 2) / 2)), channels_last."""
        image = x.permute(0, 2, 3, 1)
        dw1, dw2 = _channels_last(self.dw1), _channels_last(self.dw2)
        if not torch.is_grad_enabled() or torch.compiler.is_compiling():
            # One expression: each activation is freed as soon as the next layer has read it.
            return self.norm3(self.pw2(self.norm2(dw2(self.norm1(dw1(self._pw1(image))))))).permute(0, 3, 1, 2)
        # pw1's output and the LN + GELU outputs are temporaries here: backward remakes them.
        a1 = call_recomputing(dw1, self._pw1(image), lambda: self._pw1(image))  # (N, H / 2, W / 2, C0)
        a2 = call_recomputing(dw2, self.norm1(a1), lambda: self.norm1(a1))
        a3 = call_recomputing(self.pw2, self.norm2(a2), lambda: self.norm2(a2))  # (N, H / 4, W / 4, C1)
        return self.norm3(a3).permute(0, 3, 1, 2)


def _channels_last(conv: nn.Module) -> Callable[[Tensor], Tensor]:
    """``conv`` (on (N, C, H, W)) applied to an (N, H, W, C) tensor, as views."""
    return lambda x: conv(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)

