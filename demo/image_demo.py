"""Run an mmo1d model on one image and paint its prediction, as the toolboxes' image demos do.

Works with the segmentation (mmseg), detection (mmdet) and classification (mmpretrain) configs of
mmo1d and the checkpoints ``tools/train.py`` writes; the config's ``default_scope`` picks the
toolbox. The painted prediction goes to ``--out-file`` (a PNG), or to a window without it.

Example::

    python demo/image_demo.py demo/demo.jpg \\
        configs/demo/oriented-convnext-demo-1d_upernet_1xb8-500iter_ade20k-demo-128x128.py \\
        work_dirs/demo/upernet-1d/iter_500.pth --out-file result.png --device cpu
"""
import argparse
import os.path as osp
from typing import Optional, Sequence

import mmcv
from mmengine.config import Config
from mmengine.model import revert_sync_batchnorm

from mmo1d.utils.quiet import quiet_upstream

TASKS = ('mmseg', 'mmdet', 'mmpretrain')


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('img', help='image file')
    parser.add_argument('config', help='config file')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument('--out-file', default=None, help='write the painted prediction to this PNG file')
    parser.add_argument('--device', default='cuda:0', help='device used for inference (e.g. cpu, cuda:0)')
    parser.add_argument('--opacity', type=float, default=0.5,
                        help='segmentation: opacity of the painted masks, in (0, 1]')
    parser.add_argument('--with-labels', action='store_true', help='segmentation: write the class names')
    parser.add_argument('--score-thr', type=float, default=0.3, help='detection: score threshold of the boxes')
    parser.add_argument('--title', default='result', help='title of the window or of the painted image')
    return parser.parse_args(argv)


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
    {'mmseg': segment, 'mmdet': detect, 'mmpretrain': classify}[toolbox_of(args.config)](args)
    if args.out_file is not None:
        print(f'painted prediction written to {args.out_file}')


if __name__ == '__main__':
    quiet_upstream()
    main()
