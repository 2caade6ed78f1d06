"""Write small, learnable demo datasets in the ADE20K and COCO instance formats.

Every image is a procedurally drawn scene: a muted textured ground (tinted grey, oriented stripes
and grain) carrying a few non-overlapping flat-shaded shapes of four kinds (disc, square, triangle,
oriented bar) in random sizes and orientations, plus small scribbles that stand for unlabelled
clutter. By default each kind of shape takes its colours from its own band of hues, which lets a
small model learn the task in a few hundred CPU iterations; with ``--shape-only`` every shape gets
any hue, so that only its geometry tells its kind.

With ``--which textures`` it writes a third, separate dataset where orientation is the whole
task: each image is cut into a few regions (a Voronoi partition), each filled with an oriented
texture (a grating or broken line field of random period, phase, contrast and brightness, under
strong pixel noise) whose orientation is its class. The default orientations, 11.25 + k x 45
degrees, lie halfway between the 8 directions of the paper's kernels (multiples of 22.5 degrees),
and each of those directions has one nearest texture orientation: a kernel with fixed angles sees
every texture 11.25 degrees off its lines, one with learned angles can turn onto them. The images
are grey (no colour cue) and the training pipeline must not flip them (a flip changes the class).

Layouts written under ``--out`` (default ``data/demo``)::

    ade/ADEChallengeData2016/images/{training,validation}/*.jpg
    ade/ADEChallengeData2016/annotations/{training,validation}/*.png
    coco/{train2017,val2017}/*.jpg
    coco/annotations/instances_{train2017,val2017}.json
    textures/ADEChallengeData2016/{images,annotations}/{training,validation}/*  (``--which textures``)
    textures/ADEChallengeData2016/textures.json  (orientations and classes of the texture data)

Both datasets use the real label spaces, so unchanged ADE20K (150 classes) and COCO (80 classes)
configs run on them, and a config can pick the five demo classes by name (mmseg maps a subset of
ADE20K's classes to 0..N-1; mmdet keeps the 80 COCO categories).
ADE20K annotation PNGs follow ``reduce_zero_label`` semantics: 0 = clutter ("other", ignored),
k = ADE20K class k - 1; ground, disc, square, triangle and bar are drawn as the ADE20K classes in
``ADE20K_CLASS_OF``. The COCO json files list the 80 COCO categories with their official ids and
names; the shapes are annotated, with polygon masks, as the categories in ``COCO_CATEGORY_OF``.
The texture data labels orientation k as the ADE20K class ``TEXTURE_CLASSES[k]``.

Example::

    python tools/dataset_converters/make_demo_data.py --out data/demo --seed 0
"""
import argparse
import json
import math
import sys
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import cv2
import numpy as np

SHAPES: Tuple[str, ...] = ('disc', 'square', 'triangle', 'bar')
#: Regions of a scene: label 0 of :func:`draw_scene` is clutter, label i + 1 is ``REGIONS[i]``.
REGIONS: Tuple[str, ...] = ('ground', ) + SHAPES
#: ADE20K class (name, value in the annotation PNGs = class index + 1) drawn for each region.
ADE20K_CLASS_OF: Dict[str, Tuple[str, int]] = {
    'ground': ('floor', 4),
    'disc': ('ball', 120),
    'square': ('box', 42),
    'triangle': ('flag', 150),
    'bar': ('pole', 94),
}
#: COCO category (official name) under which each shape is annotated in the instance files.
COCO_CATEGORY_OF: Dict[str, str] = {
    'disc': 'sports ball',
    'square': 'book',
    'triangle': 'kite',
    'bar': 'baseball bat',
}

# The 80 COCO categories: (official id, name).
COCO_CATEGORIES: Tuple[Tuple[int, str], ...] = (
    (1, 'person'), (2, 'bicycle'), (3, 'car'), (4, 'motorcycle'), (5, 'airplane'), (6, 'bus'),
    (7, 'train'), (8, 'truck'), (9, 'boat'), (10, 'traffic light'), (11, 'fire hydrant'),
    (13, 'stop sign'), (14, 'parking meter'), (15, 'bench'), (16, 'bird'), (17, 'cat'), (18, 'dog'),
    (19, 'horse'), (20, 'sheep'), (21, 'cow'), (22, 'elephant'), (23, 'bear'), (24, 'zebra'),
    (25, 'giraffe'), (27, 'backpack'), (28, 'umbrella'), (31, 'handbag'), (32, 'tie'),
    (33, 'suitcase'), (34, 'frisbee'), (35, 'skis'), (36, 'snowboard'), (37, 'sports ball'),
    (38, 'kite'), (39, 'baseball bat'), (40, 'baseball glove'), (41, 'skateboard'),
    (42, 'surfboard'), (43, 'tennis racket'), (44, 'bottle'), (46, 'wine glass'), (47, 'cup'),
    (48, 'fork'), (49, 'knife'), (50, 'spoon'), (51, 'bowl'), (52, 'banana'), (53, 'apple'),
    (54, 'sandwich'), (55, 'orange'), (56, 'broccoli'), (57, 'carrot'), (58, 'hot dog'),
    (59, 'pizza'), (60, 'donut'), (61, 'cake'), (62, 'chair'), (63, 'couch'), (64, 'potted plant'),
    (65, 'bed'), (67, 'dining table'), (70, 'toilet'), (72, 'tv'), (73, 'laptop'), (74, 'mouse'),
    (75, 'remote'), (76, 'keyboard'), (77, 'cell phone'), (78, 'microwave'), (79, 'oven'),
    (80, 'toaster'), (81, 'sink'), (82, 'refrigerator'), (84, 'book'), (85, 'clock'), (86, 'vase'),
    (87, 'scissors'), (88, 'teddy bear'), (89, 'hair drier'), (90, 'toothbrush'))

_DISC_VERTICES = 48
#: ADE20K classes (name, value in the annotation PNGs) of the texture data: orientation k is class k.
TEXTURE_CLASSES: Tuple[Tuple[str, int], ...] = (
    ('fence', 33), ('railing', 39), ('blind', 64), ('curtain', 19),
    ('stairs', 54), ('rug', 29), ('grass', 10), ('wall', 1))
#: Default texture orientations (degrees): halfway between the 8 directions k x 22.5 of the paper's
#: kernels, every other one, so that each of those directions has a single nearest texture orientation.
TEXTURE_ORIENTATIONS: Tuple[float, ...] = (11.25, 56.25, 101.25, 146.25)


class Instance:
    """One drawn shape.

    Args:
        shape: One of :data:`SHAPES`.
        polygon: (V, 2) float array of (x, y) vertices in pixel coordinates, inside the image.
    """

    def __init__(self, shape: str, polygon: np.ndarray) -> None:
        self.shape = shape
        self.polygon = polygon

    @property
    def bbox(self) -> List[float]:
        """COCO box ``[x, y, w, h]`` of the polygon."""
        x0, y0 = self.polygon.min(axis=0)
        x1, y1 = self.polygon.max(axis=0)
        return [float(x0), float(y0), float(x1 - x0), float(y1 - y0)]

    @property
    def area(self) -> float:
        """Area of the polygon (shoelace formula)."""
        x, y = self.polygon[:, 0], self.polygon[:, 1]
        return float(abs(np.dot(x, np.roll(y, 1)) - np.dot(y, np.roll(x, 1))) / 2)


def _shape_polygon(shape: str, cx: float, cy: float, size: float, angle: float) -> np.ndarray:
    """Vertices (V, 2) of a shape of the given kind, centre, size (circumradius-like) and angle."""
    if shape == 'disc':
        t = np.linspace(0, 2 * math.pi, _DISC_VERTICES, endpoint=False)
        pts = np.stack([np.cos(t), np.sin(t)], axis=1) * size
    elif shape == 'square':
        half = size / math.sqrt(2)
        pts = np.array([[-half, -half], [half, -half], [half, half], [-half, half]])
    elif shape == 'triangle':
        t = np.array([0.0, 2 * math.pi / 3, 4 * math.pi / 3]) - math.pi / 2
        pts = np.stack([np.cos(t), np.sin(t)], axis=1) * size
    elif shape == 'bar':
        half_len, half_wid = size, max(size / 5, 1.5)
        pts = np.array([[-half_len, -half_wid], [half_len, -half_wid], [half_len, half_wid],
                        [-half_len, half_wid]])
    else:
        raise ValueError(f'unknown shape {shape!r}; expected one of {SHAPES}')
    rot = np.array([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]])
    return pts @ rot.T + np.array([cx, cy])


def _ground(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """A textured, muted ground: tinted grey field, oriented stripes and grain, uint8 (H, W, 3)."""
    grey = rng.uniform(70, 180)
    coarse = grey + rng.uniform(-30, 30, size=(4, 4, 3)).astype(np.float32)
    field = cv2.resize(coarse.astype(np.float32), (width, height), interpolation=cv2.INTER_CUBIC)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    theta = rng.uniform(0, math.pi)
    period = rng.uniform(4, 14)
    stripes = np.sin(2 * math.pi * (xx * math.cos(theta) + yy * math.sin(theta)) / period)
    field += rng.uniform(8, 25) * stripes[..., None]
    field += rng.normal(0, rng.uniform(3, 10), size=field.shape).astype(np.float32)
    return np.clip(field, 0, 255).astype(np.uint8)


def _object_colour(rng: np.random.Generator, shape: str, colour_cue: bool) -> np.ndarray:
    """A random saturated colour (BGR, float).

    With ``colour_cue`` the hue (OpenCV scale 0-180) lies within 12 of 45 * (index of the shape);
    otherwise it is any hue, so colour says nothing about the kind of shape.
    """
    hue = (45 * SHAPES.index(shape) + rng.uniform(-12, 12)) % 180 if colour_cue else rng.uniform(0, 180)
    hsv = np.array([[[hue, rng.uniform(150, 255), rng.uniform(130, 255)]]], np.uint8)
    return cv2.cvtColor(hsv, cv2.COLOR_HSV2BGR)[0, 0].astype(np.float32)


def draw_scene(rng: np.random.Generator, height: int, width: int, max_objects: int = 5,
               colour_cue: bool = True) -> Tuple[np.ndarray, np.ndarray, List[Instance]]:
    """Draw one scene.

    Args:
        rng: Random generator (the only source of randomness).
        height: Image height in pixels (at least 32).
        width: Image width in pixels (at least 32).
        max_objects: Upper bound on the number of shapes (2 or more are tried; placement can
            fail on small images, at least one always fits).
        colour_cue: Give each kind of shape its own band of hues (see :func:`_object_colour`).

    Returns:
        ``(image, seg, instances)``: BGR uint8 image (H, W, 3); uint8 label map (H, W) with
        0 = clutter and i + 1 = ``REGIONS[i]``; the drawn shapes.
    """
    if height < 32 or width < 32:
        raise ValueError(f'images must be at least 32x32 pixels, got {height}x{width}')
    image = _ground(rng, height, width)
    seg = np.ones((height, width), np.uint8)
    occupied = np.zeros((height, width), np.uint8)
    instances: List[Instance] = []
    short = min(height, width)
    num_objects = int(rng.integers(min(2, max_objects), max_objects + 1))
    for _ in range(num_objects * 20):
        if len(instances) == num_objects:
            break
        shape = SHAPES[int(rng.integers(len(SHAPES)))]
        size = rng.uniform(0.12, 0.25) * short
        angle = rng.uniform(0, 2 * math.pi)
        margin = size + 2
        if 2 * margin >= short:
            continue
        cx = rng.uniform(margin, width - margin)
        cy = rng.uniform(margin, height - margin)
        polygon = _shape_polygon(shape, cx, cy, size, angle)
        mask = np.zeros((height, width), np.uint8)
        cv2.fillPoly(mask, [np.round(polygon).astype(np.int32)], 1)
        # Keep shapes apart (dilated footprint) so every polygon is fully visible.
        if (cv2.dilate(mask, np.ones((5, 5), np.uint8)) & occupied).any() or mask.sum() < 16:
            continue
        occupied |= mask
        colour = _object_colour(rng, shape, colour_cue)
        shading = np.linspace(-25, 25, width)[None, :, None] * math.cos(angle)
        painted = np.clip(colour[None, None, :] + shading, 0, 255).astype(np.uint8)
        image = np.where(mask[..., None].astype(bool), np.broadcast_to(painted, image.shape), image)
        seg[mask.astype(bool)] = 1 + REGIONS.index(shape)
        instances.append(Instance(shape, polygon))
    # Clutter: short scribbles on free ground, labelled 0 (ignored) like ADE20K's "other".
    for _ in range(int(rng.integers(0, 3))):
        pts = np.cumsum(rng.normal(0, short * 0.05, size=(4, 2)), axis=0)
        pts += rng.uniform([0, 0], [width, height])
        line = np.zeros((height, width), np.uint8)
        cv2.polylines(line, [np.round(pts).astype(np.int32)], False, 1, thickness=2)
        line &= 1 - occupied
        colour = rng.uniform(0, 255, size=3).astype(np.uint8)
        image[line.astype(bool)] = colour
        seg[line.astype(bool)] = 0
    image = cv2.GaussianBlur(image, (3, 3), 0.6)
    return image, seg, instances


def _smooth_field(rng: np.random.Generator, height: int, width: int, cells: int) -> np.ndarray:
    """A smooth random field in [0, 1], (H, W) float32: a ``cells`` x ``cells`` grid upsampled."""
    coarse = rng.uniform(0, 1, size=(cells, cells)).astype(np.float32)
    return cv2.resize(coarse, (width, height), interpolation=cv2.INTER_CUBIC).clip(0, 1)


def oriented_texture(rng: np.random.Generator, height: int, width: int, orientation_deg: float,
                     period: Tuple[float, float] = (4.0, 9.0)) -> np.ndarray:
    """An oriented texture, (H, W) float32 around 0 with amplitude about 1.

    Its lines run along orientation ``orientation_deg``: in image coordinates (x right, y down) along
    ``(cos a, -sin a)``, counter-clockwise from the x axis as seen on screen. That is the line of an
    oriented kernel turned by the same angle (:func:`mmo1d.ops.oriented_dwconv1d`: taps at row
    ``-d sin(theta)``, column ``d cos(theta)``). Half the textures are sine gratings, half broken
    line fields (thin lines whose contrast comes and goes along them); the period (pixels across
    the lines) and phase are random, and the contrast varies slowly over the image.
    """
    a = math.radians(orientation_deg)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    across = xx * math.sin(a) + yy * math.cos(a)  # distance across the lines
    along = xx * math.cos(a) - yy * math.sin(a)
    wave = np.sin(2 * math.pi * across / rng.uniform(*period) + rng.uniform(0, 2 * math.pi))
    if rng.random() < 0.5:
        # Thin bright lines (the crests of the wave), interrupted along their length.
        wave = 2.0 * (wave > 0.5) - 0.5
        dashes = np.sin(2 * math.pi * along / rng.uniform(8, 20) + rng.uniform(0, 2 * math.pi)) > -0.3
        wave = np.where(dashes, wave, -0.5).astype(np.float32)
    contrast = 0.4 + 0.6 * _smooth_field(rng, height, width, 3)
    return (wave * contrast).astype(np.float32)


def draw_texture_scene(rng: np.random.Generator, height: int, width: int,
                       orientations_deg: Sequence[float] = TEXTURE_ORIENTATIONS,
                       noise: float = 0.6) -> Tuple[np.ndarray, np.ndarray]:
    """Draw one scene of oriented textures.

    Args:
        rng: Random generator (the only source of randomness).
        height: Image height in pixels (at least 32).
        width: Image width in pixels (at least 32).
        orientations_deg: Orientation of each class's texture (degrees, see :func:`oriented_texture`).
        noise: Standard deviation of the gaussian pixel noise relative to the textures' amplitude.

    Returns:
        ``(image, seg)``: grey BGR uint8 image (H, W, 3); uint8 label map (H, W) with k + 1 =
        orientation ``orientations_deg[k]`` (no 0: every pixel is labelled).
    """
    if height < 32 or width < 32:
        raise ValueError(f'images must be at least 32x32 pixels, got {height}x{width}')
    if not 1 <= len(orientations_deg) <= len(TEXTURE_CLASSES):
        raise ValueError(f'between 1 and {len(TEXTURE_CLASSES)} texture orientations, got {list(orientations_deg)}')
    if noise < 0:
        raise ValueError(f'noise must be >= 0, got {noise}')
    # Voronoi regions of 2 to 5 random sites, each a random class.
    sites = rng.uniform([0, 0], [width, height], size=(int(rng.integers(2, 6)), 2))
    yy, xx = np.mgrid[0:height, 0:width]
    region = np.argmin((xx[..., None] - sites[:, 0]) ** 2 + (yy[..., None] - sites[:, 1]) ** 2, axis=-1)
    classes = rng.integers(len(orientations_deg), size=len(sites))
    seg = (classes[region] + 1).astype(np.uint8)
    scale = rng.uniform(25, 45)
    field = np.zeros((height, width), np.float32)
    for i, k in enumerate(classes):
        inside = region == i
        texture = oriented_texture(rng, height, width, float(orientations_deg[k]))
        field[inside] = rng.uniform(90, 165) + scale * texture[inside]
    field += rng.normal(0, noise * scale, size=field.shape).astype(np.float32)
    grey = np.clip(np.round(field), 0, 255).astype(np.uint8)
    return np.repeat(grey[..., None], 3, axis=2), seg


def write_textures(root: Path, split_sizes: Dict[str, int], height: int, width: int, seed: int,
                   orientations_deg: Sequence[float] = TEXTURE_ORIENTATIONS, noise: float = 0.6) -> None:
    """Write the oriented-texture dataset in the ADE20K layout under ``root`` (``ADEChallengeData2016``).

    Images are ``.jpg`` as in ADE20K, at quality 100 so that compression leaves the thin lines
    alone. ``textures.json`` in ``root`` records the orientations, their ADE20K classes and the
    generator's settings.

    Args:
        root: Output folder; ``images/{split}`` and ``annotations/{split}`` are created in it.
        split_sizes: Number of images per split, keys ``training`` and ``validation``.
        height: Image height.
        width: Image width.
        seed: Seed of the split-specific random generators.
        orientations_deg: Orientation of each class (degrees).
        noise: Pixel noise relative to the textures' amplitude.
    """
    to_ade = np.zeros(256, np.uint8)
    for k in range(len(orientations_deg)):
        to_ade[k + 1] = TEXTURE_CLASSES[k][1]
    for split_index, (split, count) in enumerate(split_sizes.items()):
        rng = np.random.default_rng([seed, 3, split_index])
        for img_path, ann_path in _ade_paths(root, split, count):
            image, seg = draw_texture_scene(rng, height, width, orientations_deg, noise)
            _write_image(img_path, image, [cv2.IMWRITE_JPEG_QUALITY, 100])
            _write_image(ann_path, to_ade[seg])
    meta = dict(orientations_deg=[float(a) for a in orientations_deg],
                classes=[TEXTURE_CLASSES[k][0] for k in range(len(orientations_deg))],
                ade20k_values=[TEXTURE_CLASSES[k][1] for k in range(len(orientations_deg))],
                size=[height, width], noise=noise, seed=seed, split_sizes=dict(split_sizes))
    (root / 'textures.json').write_text(json.dumps(meta, indent=1) + '\n')


def _write_image(path: Path, image: np.ndarray, params: Optional[List[int]] = None) -> None:
    if not cv2.imwrite(str(path), image, params or []):
        raise OSError(f'could not write {path}')


def _ade_paths(root: Path, split: str, count: int) -> Iterator[Tuple[Path, Path]]:
    """The image and annotation paths of the ``count`` images of an ADE20K-layout ``split``, folders made."""
    img_dir = root / 'images' / split
    ann_dir = root / 'annotations' / split
    img_dir.mkdir(parents=True, exist_ok=True)
    ann_dir.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        stem = f'ADE_{"train" if split == "training" else "val"}_{i:08d}'
        yield img_dir / f'{stem}.jpg', ann_dir / f'{stem}.png'


def write_ade20k(root: Path, split_sizes: Dict[str, int], height: int, width: int,
                 seed: int, colour_cue: bool = True) -> None:
    """Write an ADE20K-layout dataset under ``root`` (``ADEChallengeData2016``).

    Args:
        root: Output folder; ``images/{split}`` and ``annotations/{split}`` are created in it.
        split_sizes: Number of images per split, keys ``training`` and ``validation``.
        height: Image height.
        width: Image width.
        seed: Seed of the split-specific random generators.
        colour_cue: Give each kind of shape its own band of hues.
    """
    to_ade = np.zeros(256, np.uint8)
    for i, region in enumerate(REGIONS):
        to_ade[i + 1] = ADE20K_CLASS_OF[region][1]
    for split_index, (split, count) in enumerate(split_sizes.items()):
        rng = np.random.default_rng([seed, 1, split_index])
        for img_path, ann_path in _ade_paths(root, split, count):
            image, seg, _ = draw_scene(rng, height, width, colour_cue=colour_cue)
            _write_image(img_path, image)
            _write_image(ann_path, to_ade[seg])


def write_coco(root: Path, split_sizes: Dict[str, int], height: int, width: int,
               seed: int, colour_cue: bool = True) -> None:
    """Write a COCO-instance-layout dataset under ``root``.

    Args:
        root: Output folder; ``{split}/*.jpg`` and ``annotations/instances_{split}.json``.
        split_sizes: Number of images per split, keys ``train2017`` and ``val2017``.
        height: Image height.
        width: Image width.
        seed: Seed of the split-specific random generators.
        colour_cue: Give each kind of shape its own band of hues.
    """
    cat_id = {name: cid for cid, name in COCO_CATEGORIES}
    categories = [dict(id=cid, name=name, supercategory='demo') for cid, name in COCO_CATEGORIES]
    (root / 'annotations').mkdir(parents=True, exist_ok=True)
    for split_index, (split, count) in enumerate(split_sizes.items()):
        rng = np.random.default_rng([seed, 2, split_index])
        img_dir = root / split
        img_dir.mkdir(parents=True, exist_ok=True)
        images, annotations = [], []
        for i in range(count):
            image, _, instances = draw_scene(rng, height, width, colour_cue=colour_cue)
            file_name = f'{i + 1:012d}.jpg'
            _write_image(img_dir / file_name, image)
            images.append(dict(id=i + 1, file_name=file_name, height=height, width=width))
            for inst in instances:
                annotations.append(
                    dict(id=len(annotations) + 1, image_id=i + 1,
                         category_id=cat_id[COCO_CATEGORY_OF[inst.shape]],
                         segmentation=[[round(float(v), 2) for v in inst.polygon.reshape(-1)]],
                         area=round(inst.area, 2), bbox=[round(v, 2) for v in inst.bbox],
                         iscrowd=0))
        info = dict(description='mmo1d procedural demo data (shapes on textured ground)',
                    version='1.0')
        with open(root / 'annotations' / f'instances_{split}.json', 'w') as f:
            json.dump(dict(info=info, licenses=[], images=images, annotations=annotations,
                           categories=categories), f)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    """Command-line arguments."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--out', default='data/demo', help='output folder (default: data/demo)')
    parser.add_argument('--seed', type=int, default=0, help='random seed (default: 0)')
    parser.add_argument('--which', choices=['ade', 'coco', 'both', 'textures'], default='both',
                        help='which dataset(s) to write: ade, coco, both of them, or the oriented-texture '
                        'data alone (default: both)')
    parser.add_argument('--shape-only', action='store_true',
                        help='draw every shape in any hue (default: one band of hues per kind)')
    parser.add_argument('--ade-size', type=int, nargs=2, default=[128, 128], metavar=('H', 'W'),
                        help='ADE20K-style image size (default: 128 128)')
    parser.add_argument('--ade-train', type=int, default=400, help='ADE20K training images')
    parser.add_argument('--ade-val', type=int, default=100, help='ADE20K validation images')
    parser.add_argument('--coco-size', type=int, nargs=2, default=[160, 160], metavar=('H', 'W'),
                        help='COCO-style image size (default: 160 160)')
    parser.add_argument('--coco-train', type=int, default=200, help='COCO training images')
    parser.add_argument('--coco-val', type=int, default=50, help='COCO validation images')
    parser.add_argument('--texture-size', type=int, nargs=2, default=[64, 64], metavar=('H', 'W'),
                        help='texture image size (default: 64 64)')
    parser.add_argument('--texture-train', type=int, default=400, help='texture training images')
    parser.add_argument('--texture-val', type=int, default=100, help='texture validation images')
    parser.add_argument('--texture-angles', type=float, nargs='+', default=list(TEXTURE_ORIENTATIONS),
                        metavar='DEG', help='orientation of each texture class in degrees, one class each '
                        f'(at most {len(TEXTURE_CLASSES)}; default: {" ".join(map(str, TEXTURE_ORIENTATIONS))})')
    parser.add_argument('--texture-noise', type=float, default=0.6,
                        help="pixel noise relative to the textures' amplitude (default: 0.6)")
    args = parser.parse_args(argv)
    if len(args.texture_angles) > len(TEXTURE_CLASSES):
        parser.error(f'--texture-angles takes at most {len(TEXTURE_CLASSES)} orientations, got '
                     f'{len(args.texture_angles)}')
    if args.texture_noise < 0:
        parser.error(f'--texture-noise must be >= 0, got {args.texture_noise}')
    for name in ('ade_train', 'ade_val', 'coco_train', 'coco_val', 'texture_train', 'texture_val'):
        if getattr(args, name) < 1:
            parser.error(f'--{name.replace("_", "-")} must be at least 1, got {getattr(args, name)}')
    for name in ('ade_size', 'coco_size', 'texture_size'):
        if min(getattr(args, name)) < 32:
            parser.error(f'--{name.replace("_", "-")} must be at least 32 32, got '
                         f'{" ".join(map(str, getattr(args, name)))}')
    return args


def main(argv: Optional[Sequence[str]] = None) -> None:
    """Write the datasets selected on the command line."""
    args = parse_args(argv)
    out = Path(args.out)
    if args.which in ('ade', 'both'):
        ade_root = out / 'ade' / 'ADEChallengeData2016'
        write_ade20k(ade_root, dict(training=args.ade_train, validation=args.ade_val),
                     *args.ade_size, seed=args.seed, colour_cue=not args.shape_only)
        print(f'ADE20K-style data: {args.ade_train} + {args.ade_val} images in {ade_root}')
    if args.which in ('coco', 'both'):
        coco_root = out / 'coco'
        write_coco(coco_root, dict(train2017=args.coco_train, val2017=args.coco_val),
                   *args.coco_size, seed=args.seed, colour_cue=not args.shape_only)
        print(f'COCO-style data: {args.coco_train} + {args.coco_val} images in {coco_root}')
    if args.which == 'textures':
        texture_root = out / 'textures' / 'ADEChallengeData2016'
        write_textures(texture_root, dict(training=args.texture_train, validation=args.texture_val),
                       *args.texture_size, seed=args.seed, orientations_deg=args.texture_angles,
                       noise=args.texture_noise)
        print(f'oriented-texture data ({", ".join(f"{a:g}" for a in args.texture_angles)} degrees): '
              f'{args.texture_train} + {args.texture_val} images in {texture_root}')


if __name__ == '__main__':
    sys.exit(main())
