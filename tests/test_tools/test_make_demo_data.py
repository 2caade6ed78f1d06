"""The demo data maker writes datasets that mmseg's ADE20KDataset and mmdet's CocoDataset read."""
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import cv2
import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]


def _load_tool() -> ModuleType:
    path = REPO / 'tools' / 'dataset_converters' / 'make_demo_data.py'
    spec = importlib.util.spec_from_file_location('make_demo_data', path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


make_demo_data = _load_tool()
SIZES = ['--ade-train', '6', '--ade-val', '3', '--coco-train', '5', '--coco-val', '2']


@pytest.fixture(scope='module')
def demo_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp('demo')
    make_demo_data.main(['--out', str(root), '--seed', '3'] + SIZES)
    return root


def test_ade20k_dataset_reads_layout(demo_root: Path) -> None:
    from mmseg.datasets import ADE20KDataset

    data_root = demo_root / 'ade' / 'ADEChallengeData2016'
    for split, count in (('training', 6), ('validation', 3)):
        dataset = ADE20KDataset(
            data_root=str(data_root),
            data_prefix=dict(img_path=f'images/{split}', seg_map_path=f'annotations/{split}'),
            pipeline=[])
        assert len(dataset) == count
        assert len(dataset.metainfo['classes']) == 150
        assert dataset.reduce_zero_label
        for info in dataset:
            assert Path(info['img_path']).is_file() and Path(info['seg_map_path']).is_file()


def test_ade20k_labels_are_the_named_ade20k_classes(demo_root: Path) -> None:
    from mmseg.datasets import ADE20KDataset

    ade_classes = ADE20KDataset.METAINFO['classes']
    for name, value in make_demo_data.ADE20K_CLASS_OF.values():
        assert ade_classes[value - 1] == name
    allowed = {0} | {value for _, value in make_demo_data.ADE20K_CLASS_OF.values()}
    pngs = sorted((demo_root / 'ade' / 'ADEChallengeData2016' / 'annotations').rglob('*.png'))
    assert len(pngs) == 9
    seen = set()
    for png in pngs:
        seg = cv2.imread(str(png), cv2.IMREAD_UNCHANGED)
        assert seg.dtype == np.uint8 and seg.ndim == 2 and seg.shape == (128, 128)
        seen |= set(np.unique(seg).tolist())
    assert seen <= allowed
    assert 4 in seen and len(seen - {0, 4}) >= 2  # ground plus several shape classes


def test_ade20k_subset_maps_demo_classes_to_0_to_4(demo_root: Path) -> None:
    from mmseg.datasets import ADE20KDataset

    classes = tuple(name for name, _ in make_demo_data.ADE20K_CLASS_OF.values())
    dataset = ADE20KDataset(
        data_root=str(demo_root / 'ade' / 'ADEChallengeData2016'),
        data_prefix=dict(img_path='images/training', seg_map_path='annotations/training'),
        metainfo=dict(classes=classes),
        pipeline=[dict(type='mmseg.LoadAnnotations', reduce_zero_label=True)])
    labels = set()
    for i in range(len(dataset)):
        labels |= set(np.unique(dataset[i]['gt_seg_map']).tolist())
    assert labels <= {0, 1, 2, 3, 4, 255}
    assert 0 in labels and len(labels & {1, 2, 3, 4}) >= 2


def test_coco_dataset_reads_json_with_80_categories(demo_root: Path) -> None:
    from mmdet.datasets import CocoDataset

    for split, count in (('train2017', 5), ('val2017', 2)):
        dataset = CocoDataset(
            data_root=str(demo_root / 'coco'),
            ann_file=f'annotations/instances_{split}.json',
            data_prefix=dict(img=f'{split}/'),
            pipeline=[])
        assert len(dataset) == count
        assert len(dataset.metainfo['classes']) == 80
        assert len(dataset.cat_ids) == 80
        used = {inst['bbox_label'] for info in dataset for inst in info['instances']}
        names = {dataset.metainfo['classes'][label] for label in used}
        assert names <= set(make_demo_data.COCO_CATEGORY_OF.values()) and names


def test_coco_polygons_match_boxes_and_masks(demo_root: Path) -> None:
    from pycocotools import mask as mask_utils

    with open(demo_root / 'coco' / 'annotations' / 'instances_train2017.json') as f:
        coco = json.load(f)
    assert [c['id'] for c in coco['categories']][:3] == [1, 2, 3] and coco['categories'][-1]['id'] == 90
    images = {img['id']: img for img in coco['images']}
    assert coco['annotations']
    for ann in coco['annotations']:
        img = images[ann['image_id']]
        poly = np.array(ann['segmentation'][0]).reshape(-1, 2)
        x, y, w, h = ann['bbox']
        assert w > 0 and h > 0 and x >= 0 and y >= 0
        assert x + w <= img['width'] and y + h <= img['height']
        assert np.allclose(poly.min(0), [x, y], atol=0.02) and np.allclose(poly.max(0), [x + w, y + h], atol=0.02)
        rle = mask_utils.frPyObjects(ann['segmentation'], img['height'], img['width'])
        mask_area = float(mask_utils.area(mask_utils.merge(rle)))
        assert abs(mask_area - ann['area']) <= 0.15 * ann['area'] + 10
        assert (demo_root / 'coco' / 'train2017' / img['file_name']).is_file()


def test_same_seed_same_data_other_seed_other_data(tmp_path: Path) -> None:
    args = ['--which', 'ade', '--ade-train', '2', '--ade-val', '1']
    make_demo_data.main(['--out', str(tmp_path / 'a'), '--seed', '7'] + args)
    make_demo_data.main(['--out', str(tmp_path / 'b'), '--seed', '7'] + args)
    make_demo_data.main(['--out', str(tmp_path / 'c'), '--seed', '8'] + args)
    rel = Path('ade/ADEChallengeData2016/annotations/training/ADE_train_00000000.png')
    a, b, c = ((tmp_path / d / rel).read_bytes() for d in 'abc')
    assert a == b and a != c
    assert not (tmp_path / 'a' / 'coco').exists()


@pytest.mark.parametrize('argv, message', [
    (['--ade-train', '0'], '--ade-train must be at least 1'),
    (['--coco-size', '16', '64'], '--coco-size must be at least 32 32'),
])
def test_bad_arguments_are_named(argv: list, message: str, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        make_demo_data.parse_args(argv)
    assert message in capsys.readouterr().err


def test_draw_scene_rejects_tiny_images() -> None:
    with pytest.raises(ValueError, match='at least 32x32'):
        make_demo_data.draw_scene(np.random.default_rng(0), 16, 64)
