"""Layer normalisations of the ConvNeXt family used by the oriented 1D models.

Kirchmeyer & Deng, "Convolutional Networks with Oriented 1D Kernels", ICCV 2023: every variant
keeps ConvNeXt's LayerNorms (eps 1e-6), channels-last inside the blocks and channels-first in the
2D stem, the downsampling layers and the outputs.

Both run mmo1d's fused channels-last layer norm (:func:`mmo1d.ops.layer_norm_last`): one kernel
that reads the input in its own dtype, optionally applies GELU, and writes the dtype the next
layer computes in. The parameters and state-dict keys are those of ``torch.nn.LayerNorm``.
"""
from typing import Optional

from torch import Tensor, nn

from mmo1d.ops import autocast_output_dtype, layer_norm_last

ACTIVATIONS = (None, 'gelu')


class LayerNorm(nn.LayerNorm):
    """LayerNorm over the last dimension of a channels-last (..., C) tensor.

    Args:
        num_channels (int): Number of channels C.
        eps (float): Added to the variance. Default: 1e-6.
        act (str, optional): ``'gelu'`` to apply the exact GELU to the output (fused). Default: None.
        autocast_output (bool): Under autocast, return the autocast dtype instead of float32. Set
            it when the output only feeds a layer that autocast casts to that dtype anyway (a
            Linear, a convolution, the oriented op): the values are the same, and the float32
            tensor and its cast are never made. Outside autocast the output has the input's
            dtype either way. Default: False.
    """

    def __init__(self,
                 num_channels: int,
                 eps: float = 1e-6,
                 act: Optional[str] = None,
                 autocast_output: bool = False) -> None:
        super().__init__(num_channels, eps=eps)
        if act not in ACTIVATIONS:
            raise ValueError(f'act must be one of {ACTIVATIONS}, got {act!r}')
        self.act = act
        self.autocast_output = autocast_output

    def forward(self, x: Tensor) -> Tensor:
        """(..., C) -> (..., C), contiguous."""
        out_dtype = autocast_output_dtype(x) if self.autocast_output else None
        return layer_norm_last(x, self.weight, self.bias, self.eps, self.act == 'gelu', out_dtype)

    def extra_repr(self) -> str:
        s = super().extra_repr()
        if self.act is not None:
            s += f', act={self.act!r}'
        if self.autocast_output:
            s += ', autocast_output=True'
        return s


class LayerNorm2d(LayerNorm):
    """LayerNorm over the channels of a channels-first (N, C, H, W) tensor.

    Normalises over C at every pixel. The result is a channels_last-strided (N, C, H, W) tensor
    (no copy when the input is channels_last already), so a following convolution or block
    keeps working in NHWC memory.

    Args:
        num_channels (int): Number of channels C.
        eps (float): Added to the variance. Default: 1e-6.
        autocast_output (bool): See :class:`LayerNorm`. Default: False.
    """

    def __init__(self, num_channels: int, eps: float = 1e-6, autocast_output: bool = False) -> None:
        super().__init__(num_channels, eps=eps, autocast_output=autocast_output)

    def forward(self, x: Tensor) -> Tensor:
        """(N, C, H, W) -> (N, C, H, W), channels_last strides."""
        if x.dim() != 4:
            raise ValueError(f'LayerNorm2d expects an (N, C, H, W) tensor, got shape {tuple(x.shape)}')
        return super().forward(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
