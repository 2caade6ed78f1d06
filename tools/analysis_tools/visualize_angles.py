"""Histogram of the angles of the oriented 1D kernels of a checkpoint, and how far training turned them.

Oriented convolutions with learnable angles (``rounding='bilinear'`` or ``'gaussian'``,
``learnable_angles=True``; the "-la" configs) train the per-channel angles that "Convolutional
Networks with Oriented 1D Kernels" (Kirchmeyer & Deng, ICCV 2023) fixes to 8 directions. This reads
every ``theta`` of a checkpoint and writes OUT.png (the orientations modulo 180 degrees, stacked by
stem and stage; with the initial angles also each layer's mean and largest change) and OUT.json
(per layer: count, mean and largest absolute change in degrees; see :mod:`mmo1d.analysis.angles`).

The initial angles are the configured directions of the model's layers, read from the backbone
built from ``--config`` or, without it, from the config that mmengine's Runner stores in its
checkpoints; with neither, only the orientations are drawn.

Example::

    python tools/analysis_tools/visualize_angles.py work_dirs/demo_la/iter_500.pth --out work_dirs/demo_la/angles
"""
import argparse
import json
import os
import os.path as osp
from typing import Dict, List, Optional

from mmengine.config import Config
from torch import Tensor

from mmo1d.analysis import angles
from mmo1d.models.utils import extract_state_dict
from mmo1d.registry import MODELS
from mmo1d.utils import load_checkpoint_file
from mmo1d.utils.quiet import quiet_upstream


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('checkpoint', help='checkpoint file (mmengine Runner, backbone or state dict)')
    parser.add_argument('--config', help='config of the model, for its initial angles (default: the one stored in '
                        'the checkpoint by mmengine\'s Runner, if any)')
    parser.add_argument('--prefix', help="prefix of the backbone's keys (default: 'backbone.' when the checkpoint "
                        'has such keys, else none)')
    parser.add_argument('--bin-deg', type=float, default=2.0, help='histogram bin width in degrees (default: 2)')
    parser.add_argument('--out', required=True, help='output path without extension: writes OUT.json and OUT.png')
    parser.add_argument('--dpi', type=int, default=100)
    return parser.parse_args(argv)


def model_config(checkpoint: dict, path: Optional[str]) -> Optional[Config]:
    """The config of ``--config``, else the one a Runner checkpoint stores (``meta.cfg``), else None."""
    if path is not None:
        if not osp.isfile(path):
            raise FileNotFoundError(f'config not found: {path}')
        return Config.fromfile(path)
    text = checkpoint.get('meta', {}).get('cfg') if isinstance(checkpoint.get('meta'), dict) else None
    return Config.fromstring(text, '.py') if isinstance(text, str) else None


def config_initial_angles(cfg: Config) -> Dict[str, Tensor]:
    """Initial angles of the backbone of ``cfg.model``, by module name within the backbone."""
    backbone_cfg = cfg.get('model', {}).get('backbone')
    if backbone_cfg is None:
        raise KeyError('the config has no model.backbone to take the initial angles from')
    backbone_cfg = backbone_cfg.copy()
    backbone_cfg.pop('init_cfg', None)  # built for its structure only: nothing to load or download
    return angles.initial_angles(angles.oriented_layers(MODELS.build(backbone_cfg)))


def main(argv: Optional[List[str]] = None) -> dict:
    args = parse_args(argv)
    checkpoint = load_checkpoint_file(args.checkpoint)
    prefix = args.prefix
    if prefix is None:
        keys = checkpoint.get('state_dict', checkpoint)
        prefix = 'backbone.' if any(str(k).startswith('backbone.') for k in keys) else ''
    learned = angles.checkpoint_angles(extract_state_dict(checkpoint, prefix))
    cfg = model_config(checkpoint, args.config)
    initial = config_initial_angles(cfg) if cfg is not None else None
    stored = 'the one stored in the checkpoint' if cfg is not None else None
    report = dict(checkpoint=args.checkpoint, prefix=prefix, config=args.config or stored)
    if initial is None:
        print('no config (--config, or one stored in the checkpoint): the initial angles are unknown, only the '
              'orientations are drawn')
        report['layers'] = {name: dict(count=int(theta.numel())) for name, theta in learned.items()}
    else:
        report.update(angles.change_summary(angles.angle_changes(learned, initial)))
        total = report['all']
        print(f"{total['count']} angles in {len(learned)} layers: mean |change| {total['mean_abs_change_deg']:.3f} "
              f"deg, max |change| {total['max_abs_change_deg']:.3f} deg from the initial directions")
    os.makedirs(osp.dirname(args.out) or '.', exist_ok=True)
    with open(args.out + '.json', 'w') as f:
        json.dump(report, f, indent=1)
    angles.draw_angles(args.out + '.png', learned, initial, bin_deg=args.bin_deg, dpi=args.dpi,
                       title=f'Angles of {osp.basename(args.checkpoint)}')
    print(f'wrote {args.out}.json and {args.out}.png')
    return report


if __name__ == '__main__':
    quiet_upstream()
    main()
