"""The tap rule of the oriented convolution: how each tap reads the input at its position.

Tap ``t`` of output pixel ``(p, q)`` sits at ``(p*s - d sin(theta), q*s + d cos(theta))``
(``d = t - K // 2``). The rule is given as ``(rounding, sigma, radius)``:

- ``'trunc'`` / ``'floor'``: the position is rounded to one pixel, toward zero (the authors'
  kernels and released weights) or down (the paper's formula); the angles get no gradient.
- ``'bilinear'``: the four neighbours, weighted as ``grid_sample`` with ``align_corners=True``.
- ``'gaussian'``: the pixels within ``radius`` of the position, weighted by a normalised gaussian
  of width ``sigma`` (:mod:`mmo1d.ops.interp_reference`).

:func:`check_tap_rule` is the one place where Python checks a rule; the compiled op parses the same
three values once at its entry (``parse_tap_rule`` in ``csrc/tap_rule.h``).
"""
import math
from typing import Tuple

#: The pixel roundings (angles fixed).
ROUNDINGS: Tuple[str, ...] = ('trunc', 'floor')
#: The interpolations (angles differentiable).
INTERPOLATIONS: Tuple[str, ...] = ('bilinear', 'gaussian')
#: Every rule of the op.
TAP_RULES: Tuple[str, ...] = ROUNDINGS + INTERPOLATIONS

#: Defaults of the gaussian band. The radius lies between the lattice distances 1 and sqrt(2): with a
#: whole-number radius r the output pixel lies exactly on the band's edge of the taps at |d| = r, for
#: every angle, where the op is discontinuous (see check_tap_rule).
DEFAULT_SIGMA = 0.5
DEFAULT_RADIUS = 1.5
#: The largest gaussian radius: a tap reads (2 ceil(radius) + 2)^2 candidate pixels.
MAX_RADIUS = 8.0


def check_tap_rule(rounding: str,
                   sigma: float = DEFAULT_SIGMA,
                   radius: float = DEFAULT_RADIUS,
                   allowed: Tuple[str, ...] = TAP_RULES) -> None:
    """Raise ``ValueError`` unless ``(rounding, sigma, radius)`` is a tap rule of ``allowed``.

    Args:
        rounding (str): One of ``allowed``.
        sigma (float): Width of the gaussian band, finite and > 0 (``'gaussian'`` only).
        radius (float): Radius of the gaussian band in pixels, finite, in (1, 8) and not a whole
            number (``'gaussian'`` only).
        allowed (tuple[str]): The rules the caller takes. Default: every rule.
    """
    if rounding not in allowed:
        raise ValueError(f'rounding must be one of {allowed}, got {rounding!r}')
    if rounding != 'gaussian':
        return
    if not (0 < sigma < math.inf and 1 <= radius < math.inf):
        raise ValueError('the gaussian band needs 0 < sigma and 1 <= radius (finite), '
                         f'got sigma={sigma}, radius={radius}')
    if radius > MAX_RADIUS:
        raise ValueError(f'the gaussian radius is limited to {MAX_RADIUS:g} pixels (a tap reads '
                         f'(2 ceil(radius) + 2)^2 candidate pixels), got radius={radius}')
    if radius == math.floor(radius):
        raise ValueError(f'the gaussian radius must not be a whole number, got radius={radius}: the taps at '
                         f'distance {radius:g} from the centre then have the output pixel exactly on their '
                         'band\'s edge for every angle, where the result jumps (use e.g. '
                         f'{radius + 0.5:g})')
