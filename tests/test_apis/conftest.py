"""Tiny demo-config models trained for 1-2 iterations by mmengine's Runner on generated data.

The checkpoints are what ``tools/train.py`` writes: weights plus meta with the message hub's
``HistoryBuffer`` objects (losses, learning rates, validation metrics as numpy scalars), optimizer
and scheduler states, and for the classifier an EMA state.
"""
import json
from pathlib import Path
from typing import Dict, List, Tuple

import cv2
import numpy as np
import pytest

from .utils import REPO, run_python

DEMO = REPO / 'configs' / 'demo'
SEG_DEMO = 'oriented-convnext-demo-1d_upernet_1xb8-500iter_ade20k-demo-128x128.py'
DET_DEMO = 'cascade-mask-rcnn_oriented-convnext-demo-1d_fpn_4conv1fc-giou_ms-crop-200iter_coco-demo.py'
FAST = """
train_dataloader = dict(batch_size=2, num_workers=0, persistent_workers=False)
val_dataloader = dict(num_workers=0, persistent_workers=False)
test_dataloader = val_dataloader
"""
# Iteration-based demo configs: 2 iterations, a validation after each (its metrics enter the
# message hub), the checkpoint at iteration 2; the slower detector: 1 iteration, no validation.
ITERS = """
train_cfg = dict(max_iters=2, val_interval=1)
default_hooks = dict(logger=dict(interval=1), checkpoint=dict(interval=2))
"""
# After one iteration no class score passes the usual 0.05: keep every box so that the tests have
# detections, the 10 best of an image (each kept box goes through the mask heads of three stages).
DET_ITERS = """
train_cfg = dict(max_iters=1, val_interval=100)
default_hooks = dict(logger=dict(interval=1), checkpoint=dict(interval=1))
model = dict(test_cfg=dict(rcnn=dict(score_thr=0.0, max_per_img=10)))
"""
CONFIGS = {
    'seg': f"_base_ = '{DEMO / SEG_DEMO}'\n" + FAST + ITERS,
    'det': f"_base_ = '{DEMO / DET_DEMO}'\n" + FAST + DET_ITERS,
    # The paper's ImageNet recipe (EMA, mixup, cutmix...) on a tiny T-1D-shaped classifier.
    'cls': f"""_base_ = '{REPO}/configs/mmpretrain/oriented-convnext-tiny-1d_32xb128_in1k.py'
model = dict(backbone=dict(arch=dict(_delete_=True, depths=[1, 1, 1, 1], channels=[16, 32, 64, 128]),
                           stem_channels=16),
             head=dict(in_channels=128, num_classes=2))
data_preprocessor = dict(num_classes=2)
dataset = dict(_delete_=True, type='CustomDataset', data_root='data/cls', with_label=True)
train_dataloader = dict(batch_size=2, num_workers=0, persistent_workers=False,
                        dataset=dict(data_prefix='train', pipeline={{{{_base_.train_pipeline}}}}, **dataset))
val_dataloader = dict(batch_size=2, num_workers=0, persistent_workers=False,
                      dataset=dict(data_prefix='val', pipeline={{{{_base_.test_pipeline}}}}, **dataset))
test_dataloader = val_dataloader
val_evaluator = dict(type='Accuracy', topk=(1, ))
test_evaluator = val_evaluator
train_cfg = dict(max_epochs=1)
param_scheduler = dict(_delete_=True, type='ConstantLR', factor=1.0)
default_hooks = dict(logger=dict(interval=1))
""",
}
CHECKPOINTS = {'seg': 'iter_2.pth', 'det': 'iter_1.pth', 'cls': 'epoch_1.pth'}
TRAIN = """
import json, sys
from mmengine.config import Config
from mmengine.runner import Runner
for config, work_dir in json.loads(sys.argv[1]):
    cfg = Config.fromfile(config)
    cfg.work_dir = work_dir
    Runner.from_cfg(cfg).train()
"""


def _scene(rng: np.random.Generator, height: int, width: int) -> Tuple[np.ndarray, Tuple[int, int, int, int]]:
    """A noisy grey BGR image with a filled square, and the square's box ``(x0, y0, x1, y1)``."""
    image = rng.integers(60, 120, (height, width, 3)).astype(np.uint8)
    size = int(rng.integers(40, 60))
    x0, y0 = int(rng.integers(0, width - size)), int(rng.integers(0, height - size))
    image[y0:y0 + size, x0:x0 + size] = rng.integers(150, 255, 3)
    return image, (x0, y0, x0 + size, y0 + size)


def _write_ade(root: Path, rng: np.random.Generator) -> None:
    """ADE20K layout; the squares are 'box', the rest 'floor' (two of the demo's classes)."""
    from mmseg.datasets import ADE20KDataset

    ade = ADE20KDataset.METAINFO['classes']
    for split in ('training', 'validation'):
        (root / 'images' / split).mkdir(parents=True)
        (root / 'annotations' / split).mkdir(parents=True)
        for i in range(2):
            image, (x0, y0, x1, y1) = _scene(rng, 128, 160)
            label = np.full(image.shape[:2], ade.index('floor') + 1, np.uint8)
            label[y0:y1, x0:x1] = ade.index('box') + 1
            cv2.imwrite(str(root / 'images' / split / f'{split}_{i}.jpg'), image)
            cv2.imwrite(str(root / 'annotations' / split / f'{split}_{i}.png'), label)


def _write_coco(root: Path, rng: np.random.Generator) -> None:
    """COCO instance layout with the 80 categories; every square is a 'person' with a polygon mask."""
    from mmdet.datasets import CocoDataset

    categories = [dict(id=i + 1, name=name) for i, name in enumerate(CocoDataset.METAINFO['classes'])]
    (root / 'annotations').mkdir(parents=True)
    for split in ('train2017', 'val2017'):
        (root / split).mkdir()
        images: List[Dict] = []
        annotations: List[Dict] = []
        for i in range(2):
            image, (x0, y0, x1, y1) = _scene(rng, 128, 160)
            cv2.imwrite(str(root / split / f'{i}.jpg'), image)
            images.append(dict(id=i + 1, file_name=f'{i}.jpg', height=128, width=160))
            annotations.append(dict(id=i + 1, image_id=i + 1, category_id=1, iscrowd=0,
                                    bbox=[x0, y0, x1 - x0, y1 - y0], area=(x1 - x0) * (y1 - y0),
                                    segmentation=[[x0, y0, x1, y0, x1, y1, x0, y1]]))
        (root / 'annotations' / f'instances_{split}.json').write_text(json.dumps(dict(
            images=images, annotations=annotations, categories=categories)))


def _write_cls(root: Path, rng: np.random.Generator) -> None:
    """Folders of dark and light images (two classes)."""
    for split in ('train', 'val'):
        for label, base in (('dark', 40), ('light', 200)):
            (root / split / label).mkdir(parents=True)
            image = rng.integers(base - 30, base + 30, (48, 48, 3)).astype(np.uint8)
            cv2.imwrite(str(root / split / label / f'{label}.png'), image)


@pytest.fixture(scope='session')
def trained(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Dict[str, Path]]:
    """``{'seg' | 'det' | 'cls': {'config', 'checkpoint', 'cwd'}}``: paths of each trained model.

    The configs name their data relative to ``cwd``; run the APIs there.
    """
    root = tmp_path_factory.mktemp('apis')
    rng = np.random.default_rng(0)
    _write_ade(root / 'data' / 'demo' / 'ade' / 'ADEChallengeData2016', rng)
    _write_coco(root / 'data' / 'demo' / 'coco', rng)
    _write_cls(root / 'data' / 'cls', rng)
    runs = {}
    for task, text in CONFIGS.items():
        config = root / f'{task}.py'
        config.write_text(text)
        runs[task] = dict(config=config, checkpoint=root / 'work_dirs' / task / CHECKPOINTS[task], cwd=root)
    run_python(TRAIN, [json.dumps([[str(r['config']), str(r['checkpoint'].parent)] for r in runs.values()])], root)
    for run in runs.values():
        assert run['checkpoint'].is_file(), run
    return runs
