"""Run an mmo1d model on one image and paint its prediction, as the toolboxes' image demos do.

Works with the segmentation (mmseg), detection (mmdet) and classification (mmpretrain) configs of
mmo1d and the checkpoints ``tools/train.py`` writes; the config's ``default_scope`` picks the
toolbox. It runs on the first GPU when one is visible, else on the CPU (``--device`` chooses). The
painted prediction goes to ``--out-file`` (a PNG); without it, to a window where there is a display,
else to ``outputs/vis/<image name>.png`` (as mmdet's inferencers do). The script says which.

Example::

    python demo/image_demo.py demo/demo.jpg \\
        configs/demo/oriented-convnext-demo-1d_upernet_1xb8-500iter_ade20k-demo-128x128.py \\
        work_dirs/demo/upernet-1d/iter_500.pth --out-file result.png --device cpu
"""
import argparse
import os
import os.path as osp
import sys
from typing import Optional, Sequence

import mmcv
import torch
from mmengine.config import Config
from mmengine.model import revert_sync_batchnorm

from mmo1d.utils.quiet import quiet_upstream

TASKS = ('mmseg', 'mmdet', 'mmpretrain')
# Where the painted prediction goes without --out-file on a machine without a display.
DEFAULT_OUT_DIR = osp.join('outputs', 'vis')


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('img', help='image file')
    parser.add_argument('config', help='config file')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument('--out-file', default=None,
                        help='write the painted prediction to this PNG file (default: a window, or '
                        f'{DEFAULT_OUT_DIR}/<image name>.png without a display)')
    parser.add_argument('--device', default=None,
                        help='device used for inference, e.g. cpu, cuda:0 (default: cuda:0 when a GPU is visible, '
                        'else cpu)')
    parser.add_argument('--opacity', type=float, default=0.5,
                        help='segmentation: opacity of the painted masks, in (0, 1]')
    parser.add_argument('--with-labels', action='store_true', help='segmentation: write the class names')
    parser.add_argument('--score-thr', type=float, default=0.3, help='detection: score threshold of the boxes')
    parser.add_argument('--title', default='result', help='title of the window or of the painted image')
    return parser.parse_args(argv)


def pick_device(device: Optional[str]) -> str:
    """``device``, else ``'cuda:0'`` when a GPU is visible, else ``'cpu'``.

    Raises:
        RuntimeError: if ``device`` asks for CUDA and no GPU is visible.
    """
    if device is None:
        return 'cuda:0' if torch.cuda.is_available() else 'cpu'
    if device.startswith('cuda') and not torch.cuda.is_available():
        raise RuntimeError(f'--device {device}: no GPU is visible (torch.cuda.is_available() is False); '
                           'use --device cpu, or leave --device out')
    return device


def has_display() -> bool:
    """Whether a window can be shown: on Linux, when ``DISPLAY`` or ``WAYLAND_DISPLAY`` is set."""
    if not sys.platform.startswith('linux'):
        return True
    return bool(os.environ.get('DISPLAY') or os.environ.get('WAYLAND_DISPLAY'))


def toolbox_of(config: str) -> str:
    """The toolbox of a config: its ``default_scope`` (``mmseg``, ``mmdet`` or ``mmpretrain``).

    Raises:
        FileNotFoundError: if the config does not exist.
        ValueError: if its ``default_scope`` is none of those.
    """
    if not osp.isfile(config):
        raise FileNotFoundError(f'config file not found: {config}')
    scope = Config.fromfile(config).get('default_scope')
    if scope not in TASKS:
        raise ValueError(f'{config}: default_scope is {scope!r}; this demo serves {TASKS}')
    return scope


def segment(args: argparse.Namespace) -> None:
    """mmseg's image demo: ``init_model``, ``inference_model``, ``show_result_pyplot``."""
    from mmseg.apis import inference_model, init_model, show_result_pyplot

    model = init_model(args.config, args.checkpoint, device=args.device)
    if args.device == 'cpu':
        model = revert_sync_batchnorm(model)
    result = inference_model(model, args.img)
    show_result_pyplot(model, args.img, result, title=args.title, opacity=args.opacity,
                       with_labels=args.with_labels, draw_gt=False, show=args.out_file is None,
                       out_file=args.out_file)


def detect(args: argparse.Namespace) -> None:
    """mmdet's image demo: ``init_detector``, ``inference_detector``, the config's visualizer."""
    from mmdet.apis import inference_detector, init_detector
    from mmdet.registry import VISUALIZERS

    model = init_detector(args.config, args.checkpoint, device=args.device)
    if args.device == 'cpu':
        model = revert_sync_batchnorm(model)
    visualizer = VISUALIZERS.build(model.cfg.visualizer)
    visualizer.dataset_meta = model.dataset_meta
    result = inference_detector(model, args.img)
    image = mmcv.imconvert(mmcv.imread(args.img), 'bgr', 'rgb')
    visualizer.add_datasample(args.title, image, data_sample=result, draw_gt=False, show=args.out_file is None,
                              wait_time=0, out_file=args.out_file, pred_score_thr=args.score_thr)


def classify(args: argparse.Namespace) -> None:
    """mmpretrain's image demo: ``ImageClassificationInferencer`` and a ``UniversalVisualizer``."""
    from mmpretrain.apis import ImageClassificationInferencer
    from mmpretrain.visualization import UniversalVisualizer

    inferencer = ImageClassificationInferencer(args.config, pretrained=args.checkpoint, device=args.device)
    result = inferencer(args.img, return_datasamples=True)[0]
    print(f'{args.img}: {result.pred_label.item()} '
          f'({inferencer.classes[result.pred_label.item()] if inferencer.classes else "no class names"}), '
          f'score {result.pred_score.max().item():.3f}')
    image = mmcv.imconvert(mmcv.imread(args.img), 'bgr', 'rgb')
    # As the inferencer's own visualize(): the config's visualizer, else mmpretrain's default one.
    visualizer = inferencer.visualizer or UniversalVisualizer()
    visualizer.visualize_cls(image, result, classes=inferencer.classes, draw_gt=False, draw_pred=True,
                             draw_score=True, name=args.title, show=args.out_file is None, out_file=args.out_file)


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_args(argv)
    if not osp.isfile(args.img):
        raise FileNotFoundError(f'image file not found: {args.img}')
    if '://' not in args.checkpoint and not osp.isfile(args.checkpoint):
        raise FileNotFoundError(f'checkpoint not found: {args.checkpoint}')
    toolbox = toolbox_of(args.config)
    args.device = pick_device(args.device)
    window = args.out_file is None and has_display()
    if args.out_file is None and not window:
        args.out_file = osp.join(DEFAULT_OUT_DIR, osp.splitext(osp.basename(args.img))[0] + '.png')
        print(f'no display (DISPLAY is not set): the painted prediction goes to {args.out_file}')
    print(f'running {toolbox} on {args.device}')
    {'mmseg': segment, 'mmdet': detect, 'mmpretrain': classify}[toolbox](args)
    if window:
        print(f'painted prediction shown in the window {args.title!r}')
    elif osp.isfile(args.out_file):
        print(f'painted prediction written to {args.out_file}')
    else:
        raise RuntimeError(f'the painted prediction was not written to {args.out_file}')


if __name__ == '__main__':
    quiet_upstream()
    main()
