"""mmo1d: oriented 1D kernels for OpenMMLab.

Implements "Convolutional Networks with Oriented 1D Kernels" (Kirchmeyer & Deng, ICCV 2023): a
compiled oriented depthwise 1D convolution and the ConvNeXt-1D / 1D++ / 2D++ backbones.
"""
from . import models  # noqa: F401  (registers the models in mmo1d.registry.MODELS)
from .version import __version__

__all__ = ['__version__']
