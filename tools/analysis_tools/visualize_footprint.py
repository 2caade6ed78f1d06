"""Draw where the taps of an oriented 1D kernel land, with truncation and with floor rounding.

The oriented depthwise convolution of "Convolutional Networks with Oriented 1D Kernels" (Kirchmeyer
& Deng, ICCV 2023) rounds each tap's offset to a pixel. mmo1d truncates toward zero by default, as
the authors' kernels do (taps centred; some coincide: a 1x31 kernel at 45 degrees reads 21
pixels); the paper's formula floors (taps off centre). One panel per angle and rounding
(:mod:`mmo1d.analysis.footprint`); the table of distinct pixels read is printed.

Example::

    python tools/analysis_tools/visualize_footprint.py --kernel-size 31 --out docs/figures/footprint_k31.png
"""
import argparse
from typing import Dict, List, Optional

import numpy as np

from mmo1d.analysis.footprint import draw_footprints, footprint
from mmo1d.ops.reference import ROUNDINGS
from mmo1d.utils.quiet import quiet_upstream


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--kernel-size', type=int, default=31, help='odd kernel length K (default: 31)')
    parser.add_argument('--angles', type=float, nargs='+', default=[22.5 * i for i in range(8)],
                        help='angles in degrees (default: the 8 directions of the models, 0 to 157.5)')
    parser.add_argument('--roundings', nargs='+', default=list(ROUNDINGS), choices=ROUNDINGS)
    parser.add_argument('--cell-inches', type=float, default=0.065,
                        help='size of one pixel in the figure; from 0.15 the tap counts are written in')
    parser.add_argument('--dpi', type=int, default=100)
    parser.add_argument('--out', required=True, help='PNG to write')
    return parser.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> Dict[str, List[int]]:
    args = parse_args(argv)
    pixels = {r: [int(np.count_nonzero(footprint(a, args.kernel_size, r))) for a in args.angles]
              for r in args.roundings}
    print(f'distinct pixels read by a 1x{args.kernel_size} kernel')
    print('| rounding | ' + ' | '.join(f'{a:g}°' for a in args.angles) + ' |')
    print('|---|' + '---|' * len(args.angles))
    for rounding, counts in pixels.items():
        print(f'| {rounding} | ' + ' | '.join(str(c) for c in counts) + ' |')
    draw_footprints(args.out, args.angles, args.kernel_size, args.roundings, args.cell_inches, args.dpi)
    print(f'wrote {args.out}')
    return pixels


if __name__ == '__main__':
    quiet_upstream()
    main()
