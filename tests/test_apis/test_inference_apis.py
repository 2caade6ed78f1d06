"""The toolboxes' inference APIs on mmo1d configs and Runner checkpoints, each in a fresh process.

Nothing imports mmo1d explicitly: the configs' ``custom_imports`` do, which must be enough for
``torch.load``'s safe mode (torch >= 2.6) to accept the checkpoints. The loaded weights must equal
the saved ones, and the two APIs of a toolbox must predict the same.
"""
from pathlib import Path
from typing import Dict

import cv2
import pytest
import torch

from .utils import IMAGE, assert_same_weights, run_python

FRESH = "import sys, torch\nassert 'mmo1d' not in sys.modules\nconfig, checkpoint, image, out = sys.argv[1:5]\n"
SEG = FRESH + """
from mmseg.apis import MMSegInferencer, inference_model, init_model
model = init_model(config, checkpoint, device='cpu')
result = inference_model(model, image)
inferencer = MMSegInferencer(model=config, weights=checkpoint, device='cpu')
sample = inferencer(image, return_datasamples=True)
torch.save(dict(weights=model.state_dict(), inferencer_weights=inferencer.model.state_dict(),
                classes=model.dataset_meta['classes'], pred=result.pred_sem_seg.data,
                logits=result.seg_logits.data, inferencer_pred=sample.pred_sem_seg.data), out)
"""
DET = FRESH + """
from mmdet.apis import DetInferencer, inference_detector, init_detector
model = init_detector(config, checkpoint, device='cpu')
result = inference_detector(model, image).pred_instances
inferencer = DetInferencer(model=config, weights=checkpoint, device='cpu')
other = inferencer(image, return_datasamples=True)['predictions'][0].pred_instances
torch.save(dict(weights=model.state_dict(), inferencer_weights=inferencer.model.state_dict(),
                classes=model.dataset_meta['classes'], bboxes=result.bboxes, scores=result.scores,
                labels=result.labels, masks=result.masks, inferencer_bboxes=other.bboxes,
                inferencer_scores=other.scores), out)
"""
CLS = FRESH + """
from mmpretrain.apis import ImageClassificationInferencer
inferencer = ImageClassificationInferencer(config, pretrained=checkpoint, device='cpu')
result = inferencer(image)[0]
torch.save(dict(weights=inferencer.model.state_dict(), classes=inferencer.classes,
                scores=torch.from_numpy(result['pred_scores']), label=result['pred_label'],
                name=result['pred_class']), out)
"""


def _infer(code: str, run: Dict[str, Path], tmp_path: Path) -> dict:
    out = tmp_path / 'out.pth'
    run_python(code, [str(run['config']), str(run['checkpoint']), str(IMAGE), str(out)], run['cwd'])
    return torch.load(out, weights_only=False)


@pytest.fixture(scope='module')
def image_size() -> tuple:
    height, width = cv2.imread(str(IMAGE)).shape[:2]
    return height, width


def test_mmseg_init_model_inference_model_and_inferencer(trained: dict, tmp_path: Path, image_size: tuple) -> None:
    out = _infer(SEG, trained['seg'], tmp_path)
    assert_same_weights(out['weights'], trained['seg']['checkpoint'], 'init_model')
    assert_same_weights(out['inferencer_weights'], trained['seg']['checkpoint'], 'MMSegInferencer')
    assert tuple(out['classes']) == ('floor', 'ball', 'box', 'flag', 'pole')  # the checkpoint's dataset_meta
    pred, logits = out['pred'], out['logits']
    assert pred.shape == (1, *image_size) and pred.dtype == torch.int64
    assert logits.shape == (5, *image_size)
    assert torch.equal(pred[0], logits.argmax(0))
    assert torch.equal(out['inferencer_pred'], pred)


def test_mmdet_init_detector_inference_detector_and_inferencer(trained: dict, tmp_path: Path,
                                                                image_size: tuple) -> None:
    out = _infer(DET, trained['det'], tmp_path)
    assert_same_weights(out['weights'], trained['det']['checkpoint'], 'init_detector')
    assert_same_weights(out['inferencer_weights'], trained['det']['checkpoint'], 'DetInferencer')
    assert len(out['classes']) == 80 and out['classes'][0] == 'person'
    bboxes, scores, labels, masks = out['bboxes'], out['scores'], out['labels'], out['masks']
    n = len(bboxes)
    assert n > 0 and bboxes.shape == (n, 4) and scores.shape == labels.shape == (n, )
    assert masks.shape == (n, *image_size) and masks.dtype == torch.bool
    height, width = image_size
    assert (bboxes[:, 0::2] >= 0).all() and (bboxes[:, 0::2] <= width).all()
    assert (bboxes[:, 1::2] >= 0).all() and (bboxes[:, 1::2] <= height).all()
    assert ((0 <= labels) & (labels < 80)).all()
    torch.testing.assert_close(out['inferencer_bboxes'], bboxes)
    torch.testing.assert_close(out['inferencer_scores'], scores)


def test_mmpretrain_image_classification_inferencer(trained: dict, tmp_path: Path) -> None:
    out = _infer(CLS, trained['cls'], tmp_path)
    # The EMA hook swaps the averaged weights into the checkpoint's state_dict: those are loaded.
    assert_same_weights(out['weights'], trained['cls']['checkpoint'], 'ImageClassificationInferencer')
    assert tuple(out['classes']) == ('dark', 'light')
    scores = out['scores']
    assert scores.shape == (2, ) and abs(float(scores.sum()) - 1) < 1e-5
    assert out['label'] == int(scores.argmax()) and out['name'] == out['classes'][out['label']]
