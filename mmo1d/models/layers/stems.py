"""Stems of the oriented 1D ConvNeXt models.

Kirchmeyer & Deng, "Convolutional Networks with Oriented 1D Kernels", ICCV 2023, Sec. 4:
the 1D and 1D++ models replace ConvNeXt's 4x4 patchify stem by a "depthwise 1D stem" built from
oriented 1D depthwise convolutions; the 2D and 2D++ models keep the patchify stem.
"""
from typing import Callable

import torch
from torch import Tensor, nn

from mmo1d.ops import OrientedDWConv1d

from .norm import LayerNorm2d


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


class _RecomputeSaved:
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


class DepthwiseOrientedStem(nn.Module):
    """Depthwise 1D stem: two stride-2 oriented depthwise convolutions between Linear layers.

    Channels-last: Linear(in -> C0); oriented dw 1xK (stride 2, angle offset 0, bias); LN; GELU;
    oriented dw 1xK (stride 2, angle offset 0.5); LN; GELU; Linear(C0 -> C1); LN.
    Submodule names follow the authors' release (``pw1``, ``dw1``, ``norm1``, ...).

    When training, the largest activation, the full-resolution output of ``pw1`` (C0 channels at
    H x W, which ``dw1`` would save for its weight gradient), is not kept for backward but
    recomputed there (bitwise the same): a 3 -> C0 linear map is cheap to redo. At 224x224 and
    C0 = 64 that is 392 MiB of a bf16 batch of 64 images.

    Args:
        in_channels (int): Input channels (3 for images).
        stem_channels (int): Width C0 of the oriented convolutions. Default: 64.
        out_channels (int): Output channels C1.
        kernel_size (int): Oriented kernel length K (31 for 1D, 15 for 1D++).
        directions (int): Number of directions D. Default: 8.
    """

    def __init__(self,
                 in_channels: int,
                 stem_channels: int,
                 out_channels: int,
                 kernel_size: int,
                 directions: int = 8) -> None:
        super().__init__()
        self.pw1 = nn.Linear(in_channels, stem_channels)
        self.dw1 = OrientedDWConv1d(stem_channels, kernel_size, stride=2, directions=directions)
        self.norm1 = nn.LayerNorm(stem_channels, eps=1e-6)
        self.dw2 = OrientedDWConv1d(
            stem_channels, kernel_size, stride=2, directions=directions, angle_offset=0.5)
        self.norm2 = nn.LayerNorm(stem_channels, eps=1e-6)
        self.act = nn.GELU()
        self.pw2 = nn.Linear(stem_channels, out_channels)
        self.norm3 = nn.LayerNorm(out_channels, eps=1e-6)

    def forward(self, x: Tensor) -> Tensor:
        """(N, in, H, W) -> (N, C1, ceil(ceil(H / 2) / 2), ceil(ceil(W / 2) / 2)), channels_last."""
        image = x.permute(0, 2, 3, 1)
        x = self.pw1(image)  # (N, H, W, C0)
        recompute = torch.is_grad_enabled() and x.requires_grad and not torch.compiler.is_compiling()
        if recompute:
            hooks = _RecomputeSaved(x, lambda: self.pw1(image))
            with torch.autograd.graph.saved_tensors_hooks(hooks.pack, hooks.unpack):
                x = self.dw1(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)
        else:
            x = self.dw1(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)
        x = self.act(self.norm1(x))
        x = self.dw2(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)
        x = self.act(self.norm2(x))
        x = self.norm3(self.pw2(x))  # (N, H / 4, W / 4, C1)
        return x.permute(0, 3, 1, 2)
