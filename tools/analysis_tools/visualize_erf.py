"""Draw saved ERF maps side by side and print their high-contribution area ratios.

Reads the mean maps that ``tools/analysis_tools/analyze_erf.py`` saves (``<name>.npy``), puts them
on RepLKNet's scale (``log10(map + 1)`` over its maximum) and draws them in one figure with their
area ratios at 20, 30, 50 and 99% (:mod:`mmo1d.analysis.erf`), e.g. to compare models computed in
separate runs or on separate machines.

Example::

    python tools/analysis_tools/visualize_erf.py work_dirs/erf/T-2D.npy work_dirs/erf/T-1D.npy \\
        --titles ConvNeXt-T ConvNeXt-T-1D --out work_dirs/erf/compare.png
"""
import argparse
import os.path as osp
from typing import List, Optional

import numpy as np

from mmo1d.analysis import erf as erf_lib
from mmo1d.utils.quiet import quiet_upstream


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('maps', nargs='+', help='.npy maps written by analyze_erf.py')
    parser.add_argument('--titles', nargs='+', help='one title per map (default: the file names)')
    parser.add_argument('--out', required=True, help='PNG to write')
    parser.add_argument('--dpi', type=int, default=100)
    args = parser.parse_args(argv)
    if args.titles is not None and len(args.titles) != len(args.maps):
        parser.error(f'--titles needs one title per map ({len(args.maps)}), got {len(args.titles)}')
    return args


def main(argv: Optional[List[str]] = None) -> List[dict]:
    args = parse_args(argv)
    titles = args.titles or [osp.splitext(osp.basename(p))[0] for p in args.maps]
    maps, ratios = [], []
    for path, title in zip(args.maps, titles):
        erf = np.load(path)
        if erf.ndim != 2:
            raise ValueError(f'{path}: expected a 2-D ERF map, got shape {erf.shape}')
        maps.append(erf_lib.normalise(erf))
        ratios.append(erf_lib.area_ratios(maps[-1]))
        print(f'{title}: ' + ', '.join(f"{float(t):.0%} -> " + ('-' if r is None else f"{r['area_ratio']:.4f}")
                                       for t, r in ratios[-1].items()))
    erf_lib.draw_erf_maps(args.out, maps, titles, ratios, dpi=args.dpi)
    print(f'wrote {args.out}')
    return ratios


if __name__ == '__main__':
    quiet_upstream()
    main()
