"""Models of "Convolutional Networks with Oriented 1D Kernels" (Kirchmeyer & Deng, ICCV 2023)."""
from .backbones import OrientedConvNeXt
from .layers import DepthwiseOrientedStem, DropPath, LayerNorm2d, OrientedConvNeXtBlock, patchify_stem

__all__ = [
    'OrientedConvNeXt', 'DepthwiseOrientedStem', 'DropPath', 'LayerNorm2d', 'OrientedConvNeXtBlock',
    'patchify_stem'
]
