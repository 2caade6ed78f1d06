from .blocks import DropPath, OrientedConvNeXtBlock
from .norm import LayerNorm, LayerNorm2d
from .stems import DepthwiseOrientedStem, patchify_stem

__all__ = ['DropPath', 'OrientedConvNeXtBlock', 'LayerNorm', 'LayerNorm2d', 'DepthwiseOrientedStem', 'patchify_stem']
