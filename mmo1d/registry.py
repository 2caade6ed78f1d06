"""Registries of mmo1d: children of mmengine's root registries, scope ``'mmo1d'``.

Models of "Convolutional Networks with Oriented 1D Kernels" (Kirchmeyer & Deng, ICCV 2023) are
registered in :data:`MODELS`. Because it is a child of mmengine's root ``MODELS``, a config inside
mmdet, mmseg or mmpretrain can name ``type='mmo1d.OrientedConvNeXt'``: mmengine then imports
``mmo1d.registry`` by itself, and this registry imports its ``locations`` (``mmo1d.models``) on the
first look-up, so no ``custom_imports`` are needed (they still work: ``import mmo1d`` registers
the models too). Training hooks are registered in :data:`HOOKS` (``type='mmo1d.AngleLoggerHook'``
in ``custom_hooks``) the same way, from ``mmo1d.engine``.
"""
from mmengine.registry import HOOKS as MMENGINE_HOOKS
from mmengine.registry import MODELS as MMENGINE_MODELS
from mmengine.registry import Registry

MODELS = Registry('model', parent=MMENGINE_MODELS, scope='mmo1d', locations=['mmo1d.models'])
HOOKS = Registry('hook', parent=MMENGINE_HOOKS, scope='mmo1d', locations=['mmo1d.engine'])

__all__ = ['MODELS', 'HOOKS']
