"""Density of the depthwise kernels of one or several checkpoints, per block and per stage.

The appendix of "Convolutional Networks with Oriented 1D Kernels" (Kirchmeyer & Deng, ICCV 2023)
compares how sparse the depthwise kernels of 2D and oriented 1D models are: for the first depthwise
convolution of every block, the proportion of weights above 5% of the layer's largest absolute
weight (:mod:`mmo1d.analysis.sparsity`). Reads mmo1d / mmpretrain / mmseg / mmdet checkpoints, the
authors' and official ConvNeXt releases and timm state dicts; writes a JSON with every block and
stage and a figure (per-stage bars, per-block curves).

Example::

    python tools/analysis_tools/analyze_sparsity.py t2d.pth t1d.pth --names T-2D T-1D \\
        --out work_dirs/sparsity/tiny
"""
import argparse
import json
import os
import os.path as osp
from typing import Dict, List, Optional

from mmo1d.analysis import sparsity
from mmo1d.utils import CheckpointFileError
from mmo1d.utils.quiet import quiet_upstream


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('checkpoints', nargs='+', help='checkpoint files')
    parser.add_argument('--names', nargs='+', help='one name per checkpoint (default: the file names)')
    parser.add_argument('--fraction', type=float, default=sparsity.DEFAULT_FRACTION,
                        help='threshold relative to the layer\'s largest absolute weight (default: 0.05)')
    parser.add_argument('--out', required=True, help='output path without extension: writes OUT.json and OUT.png')
    parser.add_argument('--dpi', type=int, default=100)
    args = parser.parse_args(argv)
    if args.names is not None and len(args.names) != len(args.checkpoints):
        parser.error(f'--names needs one name per checkpoint ({len(args.checkpoints)}), got {len(args.names)}')
    if not 0 <= args.fraction < 1:
        parser.error(f'--fraction must be in [0, 1), got {args.fraction}')
    return args


def main(argv: Optional[List[str]] = None) -> Dict[str, dict]:
    args = parse_args(argv)
    names = args.names or [osp.splitext(osp.basename(p))[0] for p in args.checkpoints]
    reports = {}
    for name, path in zip(names, args.checkpoints):
        try:
            state_dict = sparsity.load_state_dict(path)
        except (FileNotFoundError, CheckpointFileError) as e:
            raise SystemExit(f'error: {e}') from e
        reports[name] = dict(checkpoint=path, **sparsity.sparsity_report(state_dict, args.fraction))
        stages = ', '.join(f"stage {s['stage']}: {s['pooled']:.3f}" for s in reports[name]['stages'])
        print(f'{name}: weights above {args.fraction:.0%} of the layer max, per stage: {stages}')
    os.makedirs(osp.dirname(args.out) or '.', exist_ok=True)
    with open(args.out + '.json', 'w') as f:
        json.dump(reports, f, indent=1)
    sparsity.draw_sparsity(args.out + '.png', list(reports.values()), names, dpi=args.dpi)
    print(f'wrote {args.out}.json and {args.out}.png')
    return reports


if __name__ == '__main__':
    quiet_upstream()
    main()
