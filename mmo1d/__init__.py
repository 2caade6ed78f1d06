"""mmo1d: oriented 1D kernels for OpenMMLab.

Implements "Convolutional Networks with Oriented 1D Kernels" (Kirchmeyer & Deng, ICCV 2023): a
compiled oriented depthwise 1D convolution and the ConvNeXt-1D / 1D++ / 2D++ backbones.
"""
import importlib.util

from .version import __version__

# mmo1d.ops needs torch only; the models and the checkpoint allow-list need the OpenMMLab stack,
# whose versions are checked first (as mmdet and mmseg do) so that a mismatch reads clearly.
if importlib.util.find_spec('mmengine') is not None:
    from .utils.version_check import check_versions

    check_versions()

    from . import engine, models  # noqa: F401  (register the hooks and the models in mmo1d.registry)
    from .utils import allow_mmengine_checkpoints

    # The toolboxes' init_model / init_detector / inferencers read Runner checkpoints with
    # torch.load's safe default (torch >= 2.6); configs import mmo1d (custom_imports), which lets
    # them load.
    allow_mmengine_checkpoints()

__all__ = ['__version__']
