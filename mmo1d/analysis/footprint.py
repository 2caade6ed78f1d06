"""Where the taps of an oriented 1D kernel land: the footprint of the op on the pixel grid.

The oriented depthwise convolution of "Convolutional Networks with Oriented 1D Kernels" (Kirchmeyer
& Deng, ICCV 2023) reads, for tap ``t`` of a 1xK kernel turned by ``theta``, the pixel at the
integer offset ``(dh, dw)`` given by :func:`mmo1d.ops.tap_offsets`. With truncation (the authors'
kernels and their released weights) the taps stay centred and some coincide; with the floor of the
paper's formula they move off centre. The paper's Figure 1 draws neither; :func:`draw_footprints`
draws both side by side.
"""
import math
import textwrap
from typing import Sequence

import numpy as np
import torch
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from mmo1d.ops import tap_offsets
from mmo1d.ops.reference import ROUNDINGS

from .plots import save_figure

_ROUNDING_NAMES = {'trunc': 'truncation\n(the kernels, default)', 'floor': 'floor\n(the paper\'s formula)'}
# Pixels read by no tap, one, two, three or more taps.
_COLOURS = ListedColormap(['#ffffff', '#4c72b0', '#ee9a3a', '#b2182b'])
# Below this cell size (inches) the tap counts are not written into the cells.
_MIN_TEXT_CELL = 0.15


def footprint(angle_deg: float, kernel_size: int, rounding: str = 'trunc') -> np.ndarray:
    """Number of taps that read each pixel of the (K, K) window around the output pixel.

    Args:
        angle_deg (float): Angle of the kernel in degrees, counter-clockwise (0 = horizontal).
        kernel_size (int): Odd kernel length K.
        rounding (str): ``'trunc'`` or ``'floor'``, as in :func:`mmo1d.ops.tap_offsets`.

    Returns:
        np.ndarray: (K, K) int64 counts; row ``K // 2 + dh``, column ``K // 2 + dw`` (image
        coordinates: rows grow downwards), summing to K.
    """
    if kernel_size < 1 or kernel_size % 2 == 0:
        raise ValueError(f'kernel_size must be odd and positive, got {kernel_size}')
    if rounding not in ROUNDINGS:
        raise ValueError(f'rounding must be one of {ROUNDINGS}, got {rounding!r}')
    theta = torch.tensor([math.radians(angle_deg)], dtype=torch.float32)
    dh, dw = tap_offsets(theta, kernel_size, rounding)
    counts = np.zeros((kernel_size, kernel_size), dtype=np.int64)
    np.add.at(counts, (dh[0].numpy() + kernel_size // 2, dw[0].numpy() + kernel_size // 2), 1)
    return counts


def draw_footprints(path: str,
                    angles_deg: Sequence[float],
                    kernel_size: int,
                    roundings: Sequence[str] = ROUNDINGS,
                    cell_inches: float = 0.065,
                    dpi: int = 100) -> Figure:
    """Draw the footprints of one kernel length at several angles, one row per rounding.

    Each panel is the (K, K) window around an output pixel: pixels read by one tap in blue, by two
    coinciding taps in orange, by three or more in red (with the count written in when cells are
    at least 0.15 inches), the output pixel outlined. The title gives the angle and the number of
    distinct pixels read.

    Args:
        path (str): PNG file to write.
        angles_deg (Sequence[float]): Angles in degrees, one column each.
        kernel_size (int): Odd kernel length K.
        roundings (Sequence[str]): Rows, among ``'trunc'`` and ``'floor'``. Default: both.
        cell_inches (float): Size of one pixel of the window in the figure. Default: 0.065.
        dpi (int): Resolution of the PNG. Default: 100.

    Returns:
        Figure: the figure written; the PNG has ``figsize * dpi`` pixels.
    """
    if not angles_deg or not roundings:
        raise ValueError('draw_footprints needs at least one angle and one rounding')
    panel = max(1.2, kernel_size * cell_inches)
    fig = Figure(figsize=(panel * len(angles_deg) + 0.9, (panel + 0.4) * len(roundings) + 0.7))
    axes = fig.subplots(len(roundings), len(angles_deg), squeeze=False)
    half = kernel_size // 2
    for row, rounding in enumerate(roundings):
        for col, angle in enumerate(angles_deg):
            counts = footprint(angle, kernel_size, rounding)
            ax = axes[row][col]
            ax.imshow(np.minimum(counts, 3), cmap=_COLOURS, vmin=0, vmax=3, interpolation='nearest',
                      extent=(-half - 0.5, half + 0.5, half + 0.5, -half - 0.5))
            if cell_inches >= _MIN_TEXT_CELL:
                for r, c in zip(*np.nonzero(counts > 1)):
                    ax.text(c - half, r - half, str(counts[r, c]), ha='center', va='center',
                            fontsize=50 * cell_inches, color='white')
            ax.add_patch(Rectangle((-0.5, -0.5), 1, 1, fill=False, edgecolor='black', linewidth=1.2))
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_title(f'{angle:g}°: {int(np.count_nonzero(counts))} px', fontsize=8)
        axes[row][0].set_ylabel(_ROUNDING_NAMES[rounding], fontsize=8)
    title = textwrap.fill(f'Pixels read by a 1x{kernel_size} oriented kernel: blue by one tap, orange by two, red '
                          'by three or more (coinciding taps); outlined: the output pixel',
                          width=int(fig.get_figwidth() * 13))
    fig.suptitle(title, fontsize=9)
    top = (0.35 + 0.15 * title.count('\n')) / fig.get_figheight()
    fig.subplots_adjust(left=0.9 / fig.get_figwidth(), right=0.99, bottom=0.01, top=1 - top,
                        wspace=0.08, hspace=0.2)
    save_figure(fig, path, dpi)
    return fig

