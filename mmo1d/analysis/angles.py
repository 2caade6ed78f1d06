"""Angles of the oriented 1D kernels: how far training turned them, per layer, and their histogram.

"Convolutional Networks with Oriented 1D Kernels" (Kirchmeyer & Deng, ICCV 2023) fixes the angles
of its kernels to D directions. With an interpolating discretisation (``rounding='bilinear'`` or
``'gaussian'``) and ``learnable_angles=True`` every :class:`~mmo1d.ops.OrientedDWConv1d` learns its
per-channel angles ``theta``; this module compares them with the directions they started from.

- A layer's initial angles are its configured directions, ``oriented_angles(channels, directions,
  angle_offset)``: the same reference before and after a resumed run.
- A change is the rotation from the initial angle, wrapped to [-180, 180) degrees (a kernel turned
  by 360 degrees is the same kernel; turned by 180 degrees it is reversed, another kernel).
- The histogram shows orientations modulo 180 degrees: the line a kernel lies on.

The statistics need torch only (the training hook :class:`mmo1d.engine.AngleLoggerHook` uses
them); :func:`draw_angles` imports matplotlib when called.
"""
import re
from typing import Dict, Mapping, Optional

import torch
from torch import Tensor, nn

from mmo1d.ops import OrientedDWConv1d, oriented_angles

_EXAMPLES = 3


def oriented_layers(model: nn.Module, learnable_only: bool = False) -> Dict[str, OrientedDWConv1d]:
    """The oriented convolutions of a model by module name, optionally only those learning their angles."""
    return {name: m for name, m in model.named_modules()
            if isinstance(m, OrientedDWConv1d) and (m.learnable_angles or not learnable_only)}


def initial_angles(layers: Mapping[str, OrientedDWConv1d]) -> Dict[str, Tensor]:
    """The configured directions of each layer: (C,) float64 radians on the CPU."""
    return {name: oriented_angles(m.channels, m.directions, m.angle_offset).double() for name, m in layers.items()}


def checkpoint_angles(state_dict: Mapping[str, Tensor]) -> Dict[str, Tensor]:
    """The angles of every oriented convolution of a state dict: ``{layer: theta}``, float64 radians.

    Args:
        state_dict (Mapping[str, Tensor]): Model tensors; every key ending in ``.theta`` is one layer,
            named by the key without ``.theta``.

    Raises:
        KeyError: if no key ends in ``.theta`` (not a model with oriented convolutions).
    """
    angles = {key[:-len('.theta')]: value.detach().cpu().double() for key, value in state_dict.items()
              if key.endswith('.theta') and isinstance(value, Tensor)}
    if not angles:
        raise KeyError('no angles (keys ending in .theta) in the state dict: not a model with oriented 1D kernels; '
                       f'its first keys: {list(state_dict)[:5]}')
    return angles


def _examples(names) -> str:
    names = sorted(names)
    return ', '.join(names[:_EXAMPLES]) + (f' and {len(names) - _EXAMPLES} more' if len(names) > _EXAMPLES else '')


def angle_changes(angles: Mapping[str, Tensor], initial: Mapping[str, Tensor]) -> Dict[str, Tensor]:
    """Rotation of every angle from its initial value, in degrees, wrapped to [-180, 180).

    Args:
        angles (Mapping[str, Tensor]): ``{layer: (C,) radians}``, on any device.
        initial (Mapping[str, Tensor]): The same layers' initial angles (:func:`initial_angles`).

    Returns:
        dict[str, Tensor]: ``{layer: (C,) float64 degrees}`` on the device of ``angles``.

    Raises:
        KeyError: if the two do not name the same layers (naming a few of each side's extra ones).
        ValueError: if a layer's angle counts differ.
    """
    if set(angles) != set(initial):
        only_angles, only_initial = set(angles) - set(initial), set(initial) - set(angles)
        raise KeyError(f'the angles and the initial angles name different layers: {len(only_angles)} only in the '
                       f'angles ({_examples(only_angles)}), {len(only_initial)} only in the initial angles '
                       f'({_examples(only_initial)})')
    changes = {}
    for name, theta in angles.items():
        start = initial[name]
        if theta.shape != start.shape:
            raise ValueError(f'{name}: {tuple(theta.shape)} angles against {tuple(start.shape)} initial angles')
        degrees = torch.rad2deg(theta.detach().double() - start.to(theta.device, torch.float64))
        changes[name] = torch.remainder(degrees + 180.0, 360.0) - 180.0
    return changes


def _stats(changes: Tensor) -> Dict[str, float]:
    magnitude = changes.abs()
    return dict(count=int(changes.numel()), mean_abs_change_deg=magnitude.mean().item(),
                max_abs_change_deg=magnitude.max().item())


def change_summary(changes: Mapping[str, Tensor]) -> dict:
    """Count, mean and largest absolute change (degrees) of each layer and of all layers together.

    Args:
        changes (Mapping[str, Tensor]): :func:`angle_changes`.

    Returns:
        dict: ``layers``: ``{layer: {count, mean_abs_change_deg, max_abs_change_deg}}``; ``all``: the
        same over every angle.
    """
    if not changes:
        raise ValueError('change_summary of no layers')
    return dict(layers={name: _stats(c) for name, c in changes.items()},
                all=_stats(torch.cat([c.flatten() for c in changes.values()])))


def orientations_deg(theta: Tensor) -> Tensor:
    """Orientation of each kernel's line in degrees, in [0, 180): the angle modulo 180 degrees."""
    return torch.remainder(torch.rad2deg(theta.detach().double().cpu()), 180.0)


def layer_group(name: str) -> str:
    """The part of the network a layer belongs to: ``'stem'``, ``'stage <i>'`` or the name itself."""
    stage = re.search(r'(?:^|\.)stages\.(\d+)\.', name)
    if stage:
        return f'stage {stage.group(1)}'
    return 'stem' if re.search(r'(?:^|\.)downsample_layers\.0\.', name) else name


def draw_angles(path: str,
                angles: Mapping[str, Tensor],
                initial: Optional[Mapping[str, Tensor]] = None,
                bin_deg: float = 2.0,
                dpi: int = 100,
                title: Optional[str] = None):
    """Histogram of the orientations, stacked by stem and stage; with ``initial``, the changes per layer.

    Args:
        path (str): PNG to write.
        angles (Mapping[str, Tensor]): ``{layer: (C,) radians}`` (:func:`checkpoint_angles`).
        initial (Mapping[str, Tensor], optional): The initial angles of the same layers. With them the
            initial orientations are drawn as an outline, and a second panel gives each layer's mean and
            largest absolute change. Default: None.
        bin_deg (float): Width of a histogram bin in degrees; 180 must be a multiple of it. Default: 2.
        dpi (int): Resolution. Default: 100.
        title (str, optional): Figure title.

    Returns:
        matplotlib.figure.Figure: the figure written.
    """
    # Imported here: the training hook uses this module's statistics and needs no plotting library.
    from matplotlib.figure import Figure

    from .plots import save_figure

    bins = 180.0 / bin_deg
    if bin_deg <= 0 or abs(bins - round(bins)) > 1e-9:
        raise ValueError(f'bin_deg must divide 180 degrees, got {bin_deg}')
    edges = [i * bin_deg for i in range(round(bins) + 1)]
    groups: Dict[str, list] = {}
    for name, theta in angles.items():
        groups.setdefault(layer_group(name), []).append(orientations_deg(theta))
    fig = Figure(figsize=(10, 8 if initial is not None else 4))
    axes = fig.subplots(2 if initial is not None else 1, 1, squeeze=False)[:, 0]
    hist = axes[0]
    hist.hist([torch.cat(g).numpy() for g in groups.values()], bins=edges, stacked=True, label=list(groups))
    if initial is not None:
        start = torch.cat([orientations_deg(initial[name]) for name in angles]).numpy()
        hist.hist(start, bins=edges, histtype='step', color='black', lw=0.8, label='initial directions')
    hist.set_xlim(0, 180)
    hist.set_xticks(range(0, 181, 15))
    hist.set_xlabel('orientation (degrees, modulo 180)')
    hist.set_ylabel('channels')
    hist.legend(fontsize=8, loc='upper left', bbox_to_anchor=(1.005, 1.0))  # beside: the bars fill 0-180
    hist.grid(alpha=0.3)
    if initial is not None:
        summary = change_summary(angle_changes(angles, initial))['layers']
        per_layer = axes[1]
        names = list(summary)
        xs = range(len(names))
        per_layer.bar(xs, [summary[n]['mean_abs_change_deg'] for n in names], color='C0', label='mean |change|')
        per_layer.plot(xs, [summary[n]['max_abs_change_deg'] for n in names], 'v', color='C3', ms=4,
                       label='max |change|')
        per_layer.set_xticks(list(xs))
        per_layer.set_xticklabels(names, rotation=90, fontsize=6)
        per_layer.set_ylabel('change from the initial angle (degrees)')
        per_layer.legend(fontsize=8, loc='upper left', bbox_to_anchor=(1.005, 1.0))
        per_layer.grid(alpha=0.3, axis='y')
    count = sum(t.numel() for t in angles.values())
    fig.suptitle(title or f'Angles of {count} channels in {len(angles)} oriented layers', fontsize=10)
    if initial is not None:
        fig.subplots_adjust(left=0.08, right=0.85, top=0.95, bottom=0.27, hspace=0.3)
    else:
        fig.subplots_adjust(left=0.08, right=0.85, top=0.9, bottom=0.13)
    save_figure(fig, path, dpi)
    return fig
