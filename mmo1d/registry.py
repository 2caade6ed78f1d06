"""Registries of mmo1d: children of mmengine's root registries, scope ``'mmo1d'``.

Models of "Convolutional Networks with Oriented 1D Kernels" (Kirchmeyer & Deng, ICCV 2023) are
registered in :data:`MODELS`. Because it is a child of mmengine's root ``MODELS``, a config inside
mmdet, mmseg or mmpretrain can name ``type='mmo1d.OrientedConvNeXt'``: mmengine then imports
``mmo1d.registry`` by itself, and this registry imports its ``locations`` (``mmo1d.models``) on the
first look-up, so no ``custom_imports`` are needed (they still work: ``import mmo1d`` registers
the models too). Training hooks are registered in :data:`HOOKS` (``type='mmo1d.AngleLoggerHook'``
in ``custom_hooks``) the same way, from ``mmo1d.engine``.
"""
import os.path as osp
import sys

from mmengine.registry import HOOKS as MMENGINE_HOOKS
from mmengine.registry import MODELS as MMENGINE_MODELS
from mmengine.registry import Registry


def _check_not_shadowed() -> None:
    """Fail with the cause when ``mmo1d`` was imported from a folder that is not the package.

    With an editable install (``pip install -e``, what ``make setup`` does), a folder named ``mmo1d``
    in the working directory (e.g. the repository cloned there) takes precedence: ``import mmo1d``
    (and a config's ``custom_imports``) imports that folder as an empty namespace package, so the
    package's ``__init__`` never runs, while its submodules still load. Models then build but, for
    instance, Runner checkpoints are refused (``UnpicklingError ... HistoryBuffer``). This raises a
    ``RuntimeError`` rather than an ``ImportError``, which mmengine's registry would swallow.
    """
    package = sys.modules.get(__name__.rpartition('.')[0])
    if package is not None and getattr(package, '__file__', None) is None:
        folders = ', '.join(getattr(package, '__path__', None) or ['?'])
        raise RuntimeError(
            f'`import mmo1d` found the folder {folders} (no __init__.py; e.g. a clone of the repository named '
            f'mmo1d in the working directory) instead of the installed package at {osp.dirname(osp.abspath(__file__))}'
            ", so the package's __init__ did not run (custom_imports registered nothing, Runner checkpoints "
            'would be refused). Run from another directory, or rename that folder.')


_check_not_shadowed()

MODELS = Registry('model', parent=MMENGINE_MODELS, scope='mmo1d', locations=['mmo1d.models'])
HOOKS = Registry('hook', parent=MMENGINE_HOOKS, scope='mmo1d', locations=['mmo1d.engine'])

__all__ = ['MODELS', 'HOOKS']
