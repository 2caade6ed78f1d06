"""The oriented-texture demo data: each region's lines run along its class's orientation.

The oracle is independent of the generator: the structure tensor of the image (its gradients' second
moments) gives the dominant gradient direction, perpendicular to the lines.
"""
import importlib.util
import json
import math
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


def line_orientation_deg(image: np.ndarray, mask: np.ndarray) -> float:
    """Orientation of the lines inside ``mask``, degrees in [0, 180), counter-clockwise on screen.

    The gradient of a line pattern is perpendicular to its lines; the structure tensor's main axis,
    at ``beta`` from the x axis in (x right, y down) coordinates, is that gradient direction. A line
    at ``a`` counter-clockwise on screen runs along (cos a, -sin a) and has its gradient along
    (sin a, cos a), at ``beta = 90 - a`` in those coordinates.
    """
    smooth = cv2.GaussianBlur(image.astype(np.float64), (0, 0), 1.0)
    gx = cv2.Sobel(smooth, cv2.CV_64F, 1, 0, ksize=3)[mask]
    gy = cv2.Sobel(smooth, cv2.CV_64F, 0, 1, ksize=3)[mask]
    beta = 0.5 * math.degrees(math.atan2(2 * (gx * gy).sum(), (gx * gx).sum() - (gy * gy).sum()))
    return (90.0 - beta) % 180.0


def _angle_gap(a: float, b: float) -> float:
    return abs((a - b + 90.0) % 180.0 - 90.0)


@pytest.mark.parametrize('angle', [0.0, 11.25, 56.25, 90.0, 101.25, 146.25, 170.0])
def test_texture_lines_run_along_the_orientation(angle: float) -> None:
    rng = np.random.default_rng(int(angle * 4))
    for _ in range(4):  # gratings and line fields, random periods
        texture = make_demo_data.oriented_texture(rng, 96, 96, angle)
        assert _angle_gap(line_orientation_deg(texture, np.ones(texture.shape, bool)), angle) < 2.5


def test_the_oracle_reads_a_drawn_line() -> None:
    """A line drawn from the centre towards the upper right at 30 degrees on screen reads as 30 (its
    mirror image, 150 degrees, is what a flipped sign convention would read)."""
    image = np.zeros((101, 101), np.float32)
    end = (50 + round(45 * math.cos(math.radians(30))), 50 - round(45 * math.sin(math.radians(30))))
    cv2.line(image, (50, 50), end, 1.0, 2, cv2.LINE_AA)
    assert _angle_gap(line_orientation_deg(image, np.ones(image.shape, bool)), 30.0) < 3.0


def test_every_region_shows_its_labelled_orientation() -> None:
    rng = np.random.default_rng(5)
    orientations = make_demo_data.TEXTURE_ORIENTATIONS
    checked = set()
    for _ in range(6):
        image, seg = make_demo_data.draw_texture_scene(rng, 128, 128, orientations, noise=0.5)
        assert image.dtype == np.uint8 and image.shape == (128, 128, 3)
        assert (image[..., 0] == image[..., 2]).all()  # grey: no colour cue
        assert seg.min() >= 1 and seg.max() <= len(orientations)
        for label in np.unique(seg):
            # Away from the borders, where the gradients of two textures mix.
            inner = cv2.erode((seg == label).astype(np.uint8), np.ones((7, 7), np.uint8)).astype(bool)
            if inner.sum() < 2000:  # too few lines for a steady estimate
                continue
            measured = line_orientation_deg(image[..., 0], inner)
            gaps = [_angle_gap(measured, a) for a in orientations]
            # Its own class's orientation, and nearer to it than to any of the 8 lattice directions.
            assert int(np.argmin(gaps)) == label - 1 and min(gaps) < 22.5 / 4, (label, measured)
            checked.add(int(label))
    assert checked == set(range(1, len(orientations) + 1))


def test_the_default_orientations_sit_between_the_eight_directions() -> None:
    lattice = [22.5 * k for k in range(8)]
    for angle in make_demo_data.TEXTURE_ORIENTATIONS:
        gaps = sorted(_angle_gap(angle, d) for d in lattice)
        assert gaps[0] == gaps[1] == 11.25
    # Each direction of the lattice has a single nearest texture orientation.
    for d in lattice:
        gaps = sorted(_angle_gap(d, a) for a in make_demo_data.TEXTURE_ORIENTATIONS)
        assert gaps[0] == 11.25 < gaps[1]


def test_writes_the_ade20k_layout_and_its_orientations(tmp_path: Path) -> None:
    make_demo_data.main(['--which', 'textures', '--out', str(tmp_path), '--texture-train', '3',
                         '--texture-val', '2', '--texture-size', '48', '40', '--texture-angles', '10', '80', '150'])
    root = tmp_path / 'textures' / 'ADEChallengeData2016'
    meta = json.loads((root / 'textures.json').read_text())
    assert meta['orientations_deg'] == [10.0, 80.0, 150.0]
    assert meta['classes'] == ['fence', 'railing', 'blind']
    from mmseg.datasets import ADE20KDataset
    ade_classes = ADE20KDataset.METAINFO['classes']
    assert [ade_classes[v - 1] for v in meta['ade20k_values']] == meta['classes']
    for split, count in (('training', 3), ('validation', 2)):
        images = sorted((root / 'images' / split).glob('*.jpg'))
        labels = sorted((root / 'annotations' / split).glob('*.png'))
        assert [p.stem for p in images] == [p.stem for p in labels] and len(images) == count
        for path in labels:
            seg = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
            assert seg.shape == (48, 40) and set(np.unique(seg)) <= set(meta['ade20k_values'])
    assert not (tmp_path / 'ade').exists() and not (tmp_path / 'coco').exists()


@pytest.mark.parametrize('args,message', [
    (['--texture-angles'] + ['1'] * 9, 'at most 8'),
    (['--texture-noise', '-1'], '--texture-noise must be >= 0'),
    (['--texture-size', '16', '64'], '--texture-size must be at least 32'),
])
def test_bad_texture_options_are_refused(args, message, capsys) -> None:
    with pytest.raises(SystemExit):
        make_demo_data.parse_args(['--which', 'textures'] + args)
    assert message in capsys.readouterr().err
