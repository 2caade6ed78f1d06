"""Effective receptive field of the last stage of a backbone, RepLKNet's way, for one or several configs.

Kirchmeyer & Deng ("Convolutional Networks with Oriented 1D Kernels", ICCV 2023) show ERF maps of
their models, computed as RepLKNet does (:mod:`mmo1d.analysis.erf`): over a folder of images
resized to a square, the gradient of the central point of the last stage's output with respect to
the input, summed over the input channels and averaged over images. For each config this writes
``<out-dir>/<name>.npy`` (the mean map), ``<name>.json`` (the high-contribution area ratios at 20,
30, 50 and 99% and how the map was made) and ``<name>.png`` (the heatmap, log scale); with
``--compare``, one figure of all the configs side by side. The model is any mmpretrain classifier
or mmseg / mmdet model whose backbone has ``stages`` (or name the layer with ``--layer``); without
a checkpoint it is randomly initialised, as the runner would initialise it. Runs on the GPU when
there is one.

Examples::

    # the paper's setting: 1000 ImageNet validation images at 1024x1024, a trained classifier
    python tools/analysis_tools/analyze_erf.py configs/mmpretrain/oriented-convnext-tiny-1d_32xb128_in1k.py \\
        --checkpoints t1d.pth --data-root data/imagenet/val --num-images 1000
    # the four T designs, randomly initialised, on the demo images, in one figure
    python tools/analysis_tools/analyze_erf.py \\
        configs/mmpretrain/oriented-convnext-tiny-{2d,1d,1dpp,2dpp}_32xb128_in1k.py \\
        --img-size 512 --num-images 8 --compare work_dirs/erf/compare.png
"""
import argparse
import json
import os
import os.path as osp
import sys
from typing import Dict, List, Optional

import numpy as np
import torch
from mmengine.config import Config, DictAction
from mmengine.utils import ProgressBar

from mmo1d.analysis import erf as erf_lib
from mmo1d.utils.quiet import quiet_upstream

DEFAULT_DATA_ROOT = 'data/demo/ade/ADEChallengeData2016/images'


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('configs', nargs='+', help='mmpretrain, mmseg or mmdet config files')
    parser.add_argument('--checkpoints', nargs='+', default=None,
                        help='one checkpoint per config, "none" for random initialisation (default: all random)')
    parser.add_argument('--names', nargs='+', help='one name per config for the files and titles '
                        '(default: the config file names)')
    parser.add_argument('--data-root', default=DEFAULT_DATA_ROOT,
                        help=f'folder of images, searched recursively (default: the demo images, {DEFAULT_DATA_ROOT}; '
                        'write them with tools/dataset_converters/make_demo_data.py)')
    parser.add_argument('--num-images', type=int, default=1000, help='images to average over (default: 1000, '
                        'or all there are)')
    parser.add_argument('--img-size', type=int, default=1024, help='side of the square input (default: 1024)')
    parser.add_argument('--layer', help='dotted name of the module whose output is used (default: the last '
                        'stage, backbone.stages.<last>)')
    parser.add_argument('--seed', type=int, default=0,
                        help='seed of the random initialisation, set before building each model (default: 0)')
    parser.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu',
                        help='default: cuda when available, else cpu')
    parser.add_argument('--out-dir', default='work_dirs/erf')
    parser.add_argument('--compare', metavar='PNG', help='also draw all the configs side by side into this file')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction, default=None,
                        help='settings merged into every config, key=value (e.g. model.backbone.drop_path_rate=0)')
    args = parser.parse_args(argv)
    for option in ('checkpoints', 'names'):
        values = getattr(args, option)
        if values is not None and len(values) != len(args.configs):
            parser.error(f'--{option} needs one value per config ({len(args.configs)}), got {len(values)}')
    if args.num_images < 1 or args.img_size < 32:
        parser.error('--num-images must be >= 1 and --img-size >= 32')
    return args


def analyze(config: str, checkpoint: Optional[str], name: str, paths: List[str],
            args: argparse.Namespace) -> Dict:
    """Compute, save and draw the ERF of one config; returns its JSON record with the map."""
    cfg = Config.fromfile(config)
    if args.cfg_options:
        cfg.merge_from_dict(args.cfg_options)
    device = torch.device(args.device)
    torch.manual_seed(args.seed)
    model = erf_lib.build_model(cfg, checkpoint).to(device)
    layer = args.layer or erf_lib.last_stage_name(model)
    mean, std, rgb = erf_lib.data_normalisation(cfg)
    print(f'{name}: ERF of {layer} over {len(paths)} images at {args.img_size}x{args.img_size} on {device}', flush=True)
    bar = ProgressBar(len(paths))

    def images():
        for path in paths:
            yield erf_lib.load_image(path, args.img_size, mean, std, rgb)
            bar.update()

    erf, used, skipped = erf_lib.accumulate_erf(erf_lib.LayerOutput(model, layer), images(), device)
    sys.stdout.write('\n')
    scaled = erf_lib.normalise(erf)
    ratios = erf_lib.area_ratios(scaled, erf_lib.THRESHOLDS)
    stem = osp.join(args.out_dir, name)
    np.save(stem + '.npy', erf)
    record = dict(name=name, config=config, checkpoint=checkpoint, cfg_options=args.cfg_options, layer=layer,
                  data_root=args.data_root, img_size=args.img_size, images=used, skipped_nan=skipped,
                  device=str(device), seed=None if checkpoint else args.seed, area_ratios=ratios,
                  command='python ' + ' '.join([osp.relpath(sys.argv[0])] + sys.argv[1:]))
    with open(stem + '.json', 'w') as f:
        json.dump(record, f, indent=1)
    erf_lib.draw_erf_maps(stem + '.png', [scaled], [name], [ratios])
    for t, r in ratios.items():
        print(f"  {float(t):.0%} of the contribution: " +
              ('no centred square below half the image' if r is None
               else f"side {r['side']} px, area ratio {r['area_ratio']:.4f}"))
    print(f'  wrote {stem}.npy, .json and .png', flush=True)
    return dict(record, erf=scaled)


def main(argv: Optional[List[str]] = None) -> List[Dict]:
    args = parse_args(argv)
    paths = erf_lib.list_images(args.data_root, args.num_images)
    names = args.names or [osp.splitext(osp.basename(c))[0] for c in args.configs]
    checkpoints = [None if c is None or c.lower() == 'none' else c
                   for c in (args.checkpoints or [None] * len(args.configs))]
    os.makedirs(args.out_dir, exist_ok=True)
    records = [analyze(c, ckpt, n, paths, args) for c, ckpt, n in zip(args.configs, checkpoints, names)]
    if args.compare:
        erf_lib.draw_erf_maps(args.compare, [r['erf'] for r in records], names, [r['area_ratios'] for r in records])
        print(f'wrote {args.compare}')
    return records


if __name__ == '__main__':
    quiet_upstream()
    main()
