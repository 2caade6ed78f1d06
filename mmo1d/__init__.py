"""mmo1d: oriented 1D kernels for OpenMMLab.

Implements "Convolutional Networks with Oriented 1D Kernels" (Kirchmeyer & Deng, ICCV 2023): a
compiled oriented depthwise 1D convolution and the ConvNeXt-1D / 1D++ / 2D++ backbones.
"""
from . import models  # noqa: F401  (registers the models in mmo1d.registry.MODELS)
from .utils import allow_mmengine_checkpoints
from .version import __version__

# The toolboxes' init_model / init_detector / inferencers read Runner checkpoints with torch.load's
# safe default (torch >= 2.6); configs import mmo1d (custom_imports), which lets them load.
allow_mmengine_checkpoints()

__all__ = ['__version__']
