"""The ImageNet classifiers of ``configs/mmpretrain``, built from their configs for benchmarks.

The configs' ``default_scope`` (``'mmpretrain'``) picks the toolbox, which mmengine's registry
imports on demand, so nothing here imports mmpretrain.
"""
import os.path as osp
from typing import Dict, Optional, Tuple

import torch
from mmengine.config import Config
from mmengine.registry import MODELS, DefaultScope
from torch import nn

VARIANTS = ('2d', '1d', '1dpp', '2dpp')
#: Variants timed only when named: T-1D and T-1D++ with learnable bilinear angles (``-la``; T configs
#: only).
OPTIONAL_VARIANTS = ('1d-la', '1dpp-la')
#: Suffix of each variant in the paper's model names (ConvNeXt-T, ConvNeXt-T-1D, ...).
NAMES = {'2d': '', '1d': '-1D', '1dpp': '-1D++', '2dpp': '-2D++', '1d-la': '-1D-la', '1dpp-la': '-1D++-la'}
#: Benchmark modes: (autocast dtype or None, memory format of model and input).
MODES: Dict[str, Tuple[Optional[torch.dtype], torch.memory_format]] = {
    'fp32': (None, torch.contiguous_format), 'bf16': (torch.bfloat16, torch.channels_last),
    'fp16': (torch.float16, torch.channels_last)}
#: Modes whose training step scales the loss with ``torch.amp.GradScaler`` (dynamic scale), as
#: mmengine's ``AmpOptimWrapper`` (float16 by default in mmdet's and mmseg's AMP configs) does.
LOSS_SCALED_MODES = ('fp16', )


def config_path(config_dir: str, arch: str, variant: str) -> str:
    """``<config_dir>/oriented-convnext-{arch}-{variant}_32xb128_in1k.py``.

    Raises:
        FileNotFoundError: if there is no such config.
    """
    path = osp.join(config_dir, f'oriented-convnext-{arch}-{variant}_32xb128_in1k.py')
    if not osp.isfile(path):
        raise FileNotFoundError(f'classifier config not found: {path} (arch {arch!r}, variant {variant!r})')
    return path


def display_name(arch: str, variant: str) -> str:
    """The paper's name of a model, e.g. ``'ConvNeXt-T-1D++ (mmo1d)'``."""
    return f'ConvNeXt-{arch[0].upper()}{NAMES[variant]} (mmo1d)'


def build_classifier(config_dir: str, arch: str, variant: str) -> nn.Module:
    """The ImageClassifier of the config of ``arch`` and ``variant``, with construction-time weights
    (the timings do not depend on the initialisation)."""
    cfg = Config.fromfile(config_path(config_dir, arch, variant))
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        return MODELS.build(cfg.model)


def drop_path_rate(config_dir: str, arch: str) -> float:
    """The stochastic depth rate of the ConvNeXt (2D) recipe of ``arch``, for timm's baseline."""
    return Config.fromfile(config_path(config_dir, arch, '2d')).model.backbone.drop_path_rate
