from .blocks import DropPath, OrientedConvNeXtBlock
from .depthwise import DepthwiseConv2d
from .norm import LayerNorm, LayerNorm2d
from .stems import DepthwiseOrientedStem, patchify_stem

__all__ = [
    'DropPath', 'OrientedConvNeXtBlock', 'DepthwiseConv2d', 'LayerNorm', 'LayerNorm2d', 'DepthwiseOrientedStem',
    'patchify_stem'
]
