"""Do learned angles pay off, and do they turn to the data's orientations? Statistics of the texture study.

The study (``tools/analysis_tools/learnable_angles_study.py``) trains the same small segmentor on the
oriented-texture demo data (``make_demo_data.py --which textures``: each class a texture at its own
orientation, by default halfway between the 8 directions of "Convolutional Networks with Oriented 1D
Kernels", Kirchmeyer & Deng, ICCV 2023) with fixed and with learned angles, several seeds each. This
module holds what is computed from its runs:

- :func:`seed_stats`: mean, sample standard deviation and range of a metric over seeds;
- :func:`texture_alignment`: how the learned angles moved relative to the generating orientations,
  per part of the network (stem, stages) and overall;
- :func:`draw_texture_angles`: the learned orientations' histogram against those orientations.

Orientations are angles modulo 180 degrees (the line a kernel lies on), as in :mod:`.angles`.
"""
import math
import statistics
from typing import Dict, List, Mapping, Optional, Sequence

import torch
from torch import Tensor

#: Change (degrees) below which an angle counts as not moved.
MOVED_DEG = 0.5


def seed_stats(values: Sequence[float]) -> Dict[str, object]:
    """Mean, sample standard deviation (0 for one value), min and max of a metric over seeds.

    Raises:
        ValueError: for no values.
    """
    values = [float(v) for v in values]
    if not values:
        raise ValueError('seed_stats of no values')
    return dict(n=len(values), mean=statistics.fmean(values),
                std=statistics.stdev(values) if len(values) > 1 else 0.0,
                min=min(values), max=max(values), values=values)


def orientation_gap(a: Tensor, b: Tensor) -> Tensor:
    """Distance between orientations in degrees, in [0, 90]: ``|a - b|`` modulo 180, the shorter way."""
    return (torch.remainder(a - b + 90.0, 180.0) - 90.0).abs()


def _nearest(orientations: Tensor, targets: Tensor) -> tuple:
    """Gap to the nearest target (N,), its index (N,) and whether it is the only one that near (N,)."""
    gaps = orientation_gap(orientations[:, None], targets[None, :])
    if targets.numel() == 1:
        everyone = torch.ones(len(orientations), dtype=torch.bool)
        return gaps[:, 0], torch.zeros(len(orientations), dtype=torch.long), everyone
    two = gaps.topk(2, dim=1, largest=False)
    return two.values[:, 0], two.indices[:, 0], two.values[:, 1] - two.values[:, 0] > 1e-6


def _alignment(start: Tensor, end: Tensor, targets: Tensor, moved_deg: float) -> Dict[str, Optional[float]]:
    change = orientation_gap(end, start)
    moved = change > moved_deg
    gap_start, index, unique = _nearest(start, targets)
    gap_end_same = orientation_gap(end, targets[index])
    gap_end, _, _ = _nearest(end, targets)
    judged = moved & unique
    toward = (gap_end_same < gap_start) & judged
    return dict(count=int(start.numel()),
                moved_share=moved.double().mean().item(),
                toward_share=(toward.sum() / judged.sum()).item() if judged.any() else None,
                judged=int(judged.sum()),
                mean_abs_change_deg=change.mean().item(),
                mean_gap_start_deg=gap_start.mean().item(),
                mean_gap_end_deg=gap_end.mean().item())


def texture_alignment(initial: Mapping[str, Tensor],
                      learned: Mapping[str, Tensor],
                      orientations_deg: Sequence[float],
                      groups: Optional[Mapping[str, str]] = None,
                      moved_deg: float = MOVED_DEG) -> Dict[str, Dict[str, Optional[float]]]:
    """How far the angles moved and whether towards the texture orientation nearest their start.

    For every channel, the texture orientation nearest its initial angle is its target (a channel
    whose start is equally near two of them has none and is not judged); a channel that moved by
    more than ``moved_deg`` moved *toward* its target when it ended nearer to it than it started.
    Moving at random, half the judged channels would; a channel that overshoots its target by more
    than it started away counts as not toward.

    Args:
        initial (Mapping[str, Tensor]): ``{layer: (C,) radians}``, the angles before training.
        learned (Mapping[str, Tensor]): The same layers after training.
        orientations_deg (Sequence[float]): The data's orientations in degrees.
        groups (Mapping[str, str], optional): ``{layer: group name}`` to report parts of the network
            separately (e.g. :func:`mmo1d.analysis.angles.layer_group`). Default: one group per layer
            is not reported, only ``'all'``.
        moved_deg (float): Change in degrees below which a channel counts as not moved. Default: 0.5.

    Returns:
        dict: ``{group: stats}`` and ``'all'``, where stats are ``count``, ``moved_share`` (share of
        channels moved), ``toward_share`` (share of the judged moved channels that moved toward
        their target; None when none is judged), ``judged``, ``mean_abs_change_deg``,
        ``mean_gap_start_deg`` and ``mean_gap_end_deg`` (mean distance to the nearest texture
        orientation before and after).

    Raises:
        KeyError: if the two do not name the same layers.
        ValueError: for no orientations or layers whose angle counts differ.
    """
    if set(initial) != set(learned):
        raise KeyError(f'initial and learned angles name different layers: {sorted(set(initial) ^ set(learned))[:3]}')
    if len(orientations_deg) == 0:
        raise ValueError('texture_alignment needs at least one texture orientation')
    targets = torch.tensor([float(a) for a in orientations_deg], dtype=torch.float64)
    parts: Dict[str, List[tuple]] = {}
    for name in initial:
        start = torch.rad2deg(initial[name].detach().double().cpu()).flatten()
        end = torch.rad2deg(learned[name].detach().double().cpu()).flatten()
        if start.shape != end.shape:
            raise ValueError(f'{name}: {tuple(end.shape)} learned angles against {tuple(start.shape)} initial ones')
        keys = ['all'] + ([groups[name]] if groups is not None else [])
        for key in keys:
            parts.setdefault(key, []).append((start, end))
    return {key: _alignment(torch.cat([s for s, _ in pairs]), torch.cat([e for _, e in pairs]), targets, moved_deg)
            for key, pairs in parts.items()}


def draw_texture_angles(path: str,
                        panels: Mapping[str, Mapping[str, Sequence[Tensor]]],
                        orientations_deg: Sequence[float],
                        directions: int = 8,
                        dpi: int = 100,
                        title: Optional[str] = None):
    """Histograms of learned orientations, one panel per setting, against the data's orientations.

    Args:
        path (str): PNG to write.
        panels (Mapping): ``{setting: {group: [(C,) radians, ...]}}``: per setting the learned angles
            of every run, by part of the network (stacked bars), pooled over runs.
        orientations_deg (Sequence[float]): The data's orientations (solid red lines).
        directions (int): The fixed directions the angles start from, ``k * 180 / directions``
            (dotted lines). Default: 8.
        dpi (int): Resolution. Default: 100.
        title (str, optional): Figure title.

    Returns:
        matplotlib.figure.Figure: the figure written.
    """
    from matplotlib.figure import Figure

    from .plots import save_figure

    if not panels:
        raise ValueError('draw_texture_angles needs at least one setting')
    # Bins of an eighth of the directions' step, centred on the directions and on the half steps
    # between them (where the default texture orientations lie).
    width = 180.0 / directions / 8
    edges = [-width / 2 + i * width for i in range(directions * 8 + 1)]
    fig = Figure(figsize=(10, 2.6 * len(panels) + 0.6))
    axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
    for ax, (setting, groups) in zip(axes, panels.items()):
        # In [-width / 2, 180 - width / 2): an angle just below 180 falls in the bin around 0.
        degrees = [torch.rad2deg(torch.cat([t.detach().double().cpu().flatten() for t in runs]))
                   for runs in groups.values()]
        data = [(torch.remainder(d + width / 2, 180.0) - width / 2).numpy() for d in degrees]
        ax.hist(data, bins=edges, stacked=True, label=list(groups))
        for k in range(directions):
            ax.axvline(k * 180.0 / directions, color='0.4', ls=':', lw=0.8,
                       label='initial directions' if k == 0 else None)
        for i, angle in enumerate(orientations_deg):
            ax.axvline(math.fmod(angle, 180.0), color='C3', lw=1.2, label='texture orientations' if i == 0 else None)
        ax.set_xlim(edges[0], edges[-1])
        ticks = [k * 180.0 / directions / 2 for k in range(2 * directions + 1)]
        ax.set_xticks(ticks)
        ax.set_xticklabels([f'{t:g}' for t in ticks])
        ax.tick_params(axis='x', labelsize=7)
        ax.set_ylabel('channels')
        ax.set_title(setting, fontsize=9)
        ax.legend(fontsize=7, loc='upper left', bbox_to_anchor=(1.005, 1.0))
        ax.set_yscale('log')
    axes[-1].set_xlabel('learned orientation (degrees, modulo 180)')
    fig.suptitle(title or 'Learned orientations against the textures\' orientations', fontsize=10)
    margin = 0.5 / fig.get_figheight()
    fig.subplots_adjust(left=0.07, right=0.82, top=1 - margin, bottom=margin + 0.05, hspace=0.45)
    save_figure(fig, path, dpi)
    return fig
