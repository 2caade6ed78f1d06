"""Layer normalisations of the ConvNeXt family used by the oriented 1D models.

Kirchmeyer & Deng, "Convolutional Networks with Oriented 1D Kernels", ICCV 2023: every variant
keeps ConvNeXt's LayerNorms (eps 1e-6), channels-last inside the blocks and channels-first in the
2D stem, the downsampling layers and the outputs.
"""
import torch.nn.functional as F
from torch import Tensor, nn


class LayerNorm2d(nn.LayerNorm):
    """LayerNorm over the channels of a channels-first (N, C, H, W) tensor.

    Normalises over C at every pixel. The result is a channels_last-strided (N, C, H, W) tensor
    (no copy when the input is channels_last already), so a following convolution or block
    keeps working in NHWC memory.

    Args:
        num_channels (int): Number of channels C.
        eps (float): Added to the variance. Default: 1e-6.
    """

    def __init__(self, num_channels: int, eps: float = 1e-6) -> None:
        super().__init__(num_channels, eps=eps)

    def forward(self, x: Tensor) -> Tensor:
        """(N, C, H, W) -> (N, C, H, W), channels_last strides."""
        if x.dim() != 4:
            raise ValueError(f'LayerNorm2d expects an (N, C, H, W) tensor, got shape {tuple(x.shape)}')
        x = F.layer_norm(x.permute(0, 2, 3, 1), self.normalized_shape, self.weight, self.bias, self.eps)
        return x.permute(0, 3, 1, 2)
