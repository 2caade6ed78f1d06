"""Sparsity of the depthwise kernels of ConvNeXt-style checkpoints.

The appendix of "Convolutional Networks with Oriented 1D Kernels" (Kirchmeyer & Deng, ICCV 2023)
measures, for the first depthwise convolution of every block, the proportion of weights whose
absolute value exceeds 5% of the layer's largest absolute weight, and compares the stages of
models with 2D and oriented 1D kernels.

Checkpoints are read as state dicts; the first depthwise convolution of block ``j`` of stage ``i``
is found under any of the names the ConvNeXt family uses (any prefix such as ``backbone.``):

- mmo1d and mmpretrain: ``stages.i.j.depthwise_conv.weight``;
- the authors' release and official ConvNeXt: ``stages.i.j.dwconv.weight``, ``dwconv1.weight``
  (1D++ / 2D++), with an extra ``.conv.`` level in the authors' downstream backbones;
- timm: ``stages.i.blocks.j.conv_dw.weight``.
"""
import re
from typing import Dict, List, Mapping, Optional, Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator
from torch import Tensor

from mmo1d.utils import load_checkpoint_file

from .plots import save_figure

DEFAULT_FRACTION = 0.05
_FIRST_DEPTHWISE = re.compile(
    r'(?:^|\.)stages\.(\d+)\.(?:blocks\.)?(\d+)\.(?:depthwise_conv|dwconv1?|conv_dw)(?:\.conv)?\.weight$')


def kernel_density(weight: Tensor, fraction: float = DEFAULT_FRACTION) -> float:
    """Proportion of weights with ``|w| > fraction * max |w|`` in one layer.

    Args:
        weight (Tensor): The layer's weights, any shape.
        fraction (float): Threshold relative to the largest absolute weight. Default: 0.05.

    Returns:
        float: In [0, 1]; 0 for an all-zero layer.
    """
    if weight.numel() == 0:
        raise ValueError('kernel_density of an empty weight')
    magnitude = weight.detach().abs().double()
    return float((magnitude > fraction * magnitude.max()).double().mean())


def first_depthwise_weights(state_dict: Mapping[str, Tensor]) -> Dict[int, Dict[int, Tensor]]:
    """The first depthwise convolution of every block: ``{stage: {block: weight}}``.

    Raises:
        KeyError: if no key matches, naming a few keys of the state dict.
        ValueError: if two keys give the same block (e.g. a checkpoint holding two models).
    """
    found: Dict[int, Dict[int, Tensor]] = {}
    for key, value in state_dict.items():
        match = _FIRST_DEPTHWISE.search(key)
        if match is None or not isinstance(value, Tensor):
            continue
        stage, block = int(match.group(1)), int(match.group(2))
        if block in found.setdefault(stage, {}):
            raise ValueError(f'two depthwise convolutions for stage {stage}, block {block} (the last: {key}); '
                             'keep a single model in the checkpoint')
        found[stage][block] = value
    if not found:
        raise KeyError('no first depthwise convolution (stages.<i>.<j>.depthwise_conv / dwconv / dwconv1 / '
                       f'blocks.<j>.conv_dw .weight) in the state dict; its first keys: {list(state_dict)[:6]}')
    return {s: dict(sorted(blocks.items())) for s, blocks in sorted(found.items())}


def checkpoint_state_dict(checkpoint: Mapping) -> Mapping[str, Tensor]:
    """The state dict inside a loaded checkpoint: ``state_dict`` (mmengine), ``model`` (the
    authors' and official ConvNeXt releases), ``model_ema`` is ignored; else the mapping itself."""
    for key in ('state_dict', 'model'):
        if isinstance(checkpoint.get(key), Mapping):
            return checkpoint[key]
    return checkpoint


def sparsity_report(state_dict: Mapping[str, Tensor], fraction: float = DEFAULT_FRACTION) -> dict:
    """Densities of the first depthwise convolution of every block.

    Args:
        state_dict (Mapping[str, Tensor]): Model weights.
        fraction (float): Threshold relative to each layer's largest absolute weight. Default: 0.05.

    Returns:
        dict: ``fraction``; ``blocks``: one ``{stage, block, kernel_shape, density}`` per block;
        ``stages``: per stage the ``mean`` of its blocks' densities and their ``pooled`` density
        (weights above their own layer's threshold over all weights of the stage).
    """
    weights = first_depthwise_weights(state_dict)
    blocks: List[dict] = []
    stages: List[dict] = []
    for stage, layers in weights.items():
        densities, above, total = [], 0.0, 0
        for block, weight in layers.items():
            density = kernel_density(weight, fraction)
            densities.append(density)
            above += density * weight.numel()
            total += weight.numel()
            blocks.append(dict(stage=stage, block=block, kernel_shape=list(weight.shape[1:]), density=density))
        stages.append(dict(stage=stage, blocks=len(layers), mean=float(np.mean(densities)), pooled=above / total))
    return dict(fraction=fraction, blocks=blocks, stages=stages)


def draw_sparsity(path: str, reports: Sequence[dict], names: Sequence[str], dpi: int = 100,
                  title: Optional[str] = None) -> Figure:
    """Per-stage bars and per-block curves of the densities of one or several checkpoints.

    Args:
        path (str): PNG to write.
        reports (Sequence[dict]): :func:`sparsity_report` results.
        names (Sequence[str]): One legend entry per report.
        dpi (int): Resolution. Default: 100.
        title (str, optional): Figure title.

    Returns:
        Figure: the figure written (11 x 3.8 inches).
    """
    if not reports or len(reports) != len(names):
        raise ValueError('draw_sparsity needs one name per report, and at least one report')
    fig = Figure(figsize=(11, 3.8))
    bars, curves = fig.subplots(1, 2, gridspec_kw=dict(width_ratios=(1, 2)))
    width = 0.8 / len(reports)
    for i, (report, name) in enumerate(zip(reports, names)):
        stages = [s['stage'] for s in report['stages']]
        bars.bar([s + (i - (len(reports) - 1) / 2) * width for s in stages], [s['pooled'] for s in report['stages']],
                 width=width, color=f'C{i}', label=name)
        xs = list(range(len(report['blocks'])))
        curves.plot(xs, [b['density'] for b in report['blocks']], 'o-', ms=3, color=f'C{i}', label=name)
    first = reports[0]
    edges = [i for i, b in enumerate(first['blocks']) if i and b['stage'] != first['blocks'][i - 1]['stage']]
    for edge in edges:
        curves.axvline(edge - 0.5, color='grey', lw=0.8, ls=':')
    bars.set_xticks(sorted({s['stage'] for r in reports for s in r['stages']}))
    bars.set_xlabel('stage (stages.<i>)')
    bars.set_ylabel(f"weights above {first['fraction']:.0%} of the layer max")
    bars.set_ylim(0, 1.05)
    curves.xaxis.set_major_locator(MaxNLocator(integer=True))
    curves.set_xlabel('block, counted over the network (dotted lines: stage boundaries)')
    curves.set_ylim(0, 1.05)
    curves.legend(fontsize=8)
    for ax in (bars, curves):
        ax.grid(alpha=0.3)
    fig.suptitle(title or 'Density of the first depthwise convolution of every block', fontsize=10)
    fig.subplots_adjust(left=0.07, right=0.99, bottom=0.14, top=0.88, wspace=0.18)
    save_figure(fig, path, dpi)
    return fig


def load_state_dict(path: str) -> Mapping[str, Tensor]:
    """Tensors of a checkpoint file (read with :func:`mmo1d.utils.load_checkpoint_file`)."""
    return checkpoint_state_dict(load_checkpoint_file(path))
