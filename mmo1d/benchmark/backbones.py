"""The T backbones as the detection recipes train them, for timing and profiling at detection sizes.

mmdet's Cascade Mask R-CNN recipes train with ``AmpOptimWrapper`` (float16 autocast) and leave
``cudnn.benchmark`` off (multi-scale inputs change shape every iteration). A backbone here is
OrientedConvNeXt-T of a variant with the detection kernel sizes and four outputs, or mmpretrain's
ConvNeXt-T (``'stock'``, the stock configs' backbone); ``-nhwc`` after ``2d`` or ``2dpp`` keeps their
depthwise 7x7 convolutions in channels_last (cuDNN's NHWC path, which ``DepthwiseConv2d`` avoids
when cudnn.benchmark is off).
"""
import contextlib
from typing import Callable, Iterator, Tuple

import torch
from torch import nn

from mmo1d.models import OrientedConvNeXt
from mmo1d.models.layers import DepthwiseConv2d

NHWC = '-nhwc'


def parse_size(text: str) -> Tuple[int, int]:
    """``'800x960'`` -> ``(800, 960)`` (height, width).

    Raises:
        ValueError: for anything but two positive integers joined by ``x``.
    """
    parts = text.split('x')
    if len(parts) != 2 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise ValueError(f'an input size is HEIGHTxWIDTH, e.g. 800x960, got {text!r}')
    return int(parts[0]), int(parts[1])


def build_backbone(variant: str, device: torch.device) -> nn.Module:
    """The training-mode T backbone of ``variant`` (``'stock'``, or an OrientedConvNeXt variant, optionally
    with :data:`NHWC`) on ``device``; ours in channels_last."""
    if variant == 'stock':
        from mmpretrain.models import ConvNeXt
        model = ConvNeXt(arch='tiny', out_indices=(0, 1, 2, 3), gap_before_final_norm=False).to(device)
    else:
        model = OrientedConvNeXt(arch='tiny', variant=variant.replace(NHWC, ''), kernel_sizes='downstream',
                                 out_indices=(0, 1, 2, 3), gap_before_final_norm=False)
        model = model.to(device).to(memory_format=torch.channels_last)
    model.train()  # the backbones' train() returns None
    return model


@contextlib.contextmanager
def depthwise_layout(variant: str) -> Iterator[None]:
    """With a :data:`NHWC` variant, depthwise 7x7 convolutions compute in the input's layout (channels_last)."""
    auto = DepthwiseConv2d.computes_in_nchw
    if variant.endswith(NHWC):
        DepthwiseConv2d.computes_in_nchw = lambda self, x: False
    try:
        yield
    finally:
        DepthwiseConv2d.computes_in_nchw = auto


def train_step(module: nn.Module, x: torch.Tensor, dtype: torch.dtype) -> Callable[[int], None]:
    """One step: forward under autocast to ``dtype``, backward of the sum of the outputs' means."""
    def step(i: int) -> None:
        with torch.autocast(x.device.type, dtype=dtype):
            outs = module(x)
        sum(o.float().mean() for o in outs).backward()

    return step
