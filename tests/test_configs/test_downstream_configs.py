"""The shipped mmseg / mmdet / demo configs: settings of the paper, building and a forward pass."""
import copy
import functools
import re
from pathlib import Path
from typing import List, Tuple

import pytest
import torch
from mmengine.config import Config
from mmengine.model import revert_sync_batchnorm
from mmengine.registry import DefaultScope

from mmo1d.models.backbones.oriented_convnext import OrientedConvNeXt

REPO = Path(__file__).resolve().parents[2]
SEG_CONFIGS = sorted((REPO / 'configs' / 'mmseg').glob('*.py'))
DET_CONFIGS = sorted((REPO / 'configs' / 'mmdet').glob('*.py'))
DEMO_CONFIGS = sorted((REPO / 'configs' / 'demo').glob('*.py'))
ALL_CONFIGS = SEG_CONFIGS + DET_CONFIGS + DEMO_CONFIGS
VARIANTS = ('1d', '1dpp', '2dpp', '2d')
TINY_ARCH = dict(depths=[1, 1, 1, 1], channels=[16, 32, 64, 128])


def _ids(paths: List[Path]) -> List[str]:
    return [p.name for p in paths]


def _size_and_variant(path: Path) -> Tuple[str, str]:
    """('tiny' | 'base' | 'demo', variant) read from a config's file name ('-la': learnable angles)."""
    match = re.search(r'oriented-convnext-(tiny|base|t|b|demo)-(1dpp|2dpp|1d|2d)(?:-la(?:-[a-z]+)?)?_', path.name)
    assert match, f'unexpected config name {path.name}'
    size = {'t': 'tiny', 'b': 'base'}.get(match.group(1), match.group(1))
    return size, match.group(2)


@functools.cache
def _parsed(path: Path) -> Config:
    return Config.fromfile(str(path))


def _load(path: Path) -> Config:
    """A config of its own for each test, parsed once per file (the tests change theirs)."""
    return copy.deepcopy(_parsed(path))


def _learnable(path: Path) -> bool:
    return re.search(r'-la[_-]', path.name) is not None


def test_every_size_and_variant_is_shipped() -> None:
    for configs in (SEG_CONFIGS, DET_CONFIGS):
        assert sorted(_size_and_variant(p) for p in configs if not _learnable(p)) == sorted(
            (size, variant) for size in ('base', 'tiny') for variant in VARIANTS)
    demo = {_size_and_variant(p)[1] for p in DEMO_CONFIGS if not _learnable(p)}
    assert demo == {'1d', '2d'}
    # With learnable angles (tests/test_configs/test_learnable_angle_configs.py checks them further).
    assert sorted(_size_and_variant(p) for p in SEG_CONFIGS if _learnable(p)) == [
        ('tiny', '1d'), ('tiny', '1dpp'), ('tiny', '2dpp')]
    # The demo's: the CPU demo's, and the texture study's with and without a hold of the angles.
    assert [_size_and_variant(p) for p in DET_CONFIGS + DEMO_CONFIGS if _learnable(p)] == [
        ('tiny', '1d'), ('demo', '1d'), ('demo', '1d'), ('demo', '1d')]


@pytest.mark.parametrize('path', ALL_CONFIGS, ids=_ids(ALL_CONFIGS))
def test_backbone_and_imports(path: Path) -> None:
    cfg = _load(path)
    size, variant = _size_and_variant(path)
    backbone = cfg.model.backbone
    assert backbone.type == 'mmo1d.OrientedConvNeXt'
    assert backbone.variant == variant
    assert backbone.kernel_sizes == 'downstream'
    assert backbone.gap_before_final_norm is False
    assert tuple(backbone.out_indices) == (0, 1, 2, 3)
    assert 'init_cfg' not in backbone  # no download; the backbone's own initialisation
    assert cfg.custom_imports.imports == ['mmo1d']
    assert cfg.custom_imports.allow_failed_imports is False
    channels = (OrientedConvNeXt.arch_settings[size]['channels']
                if size != 'demo' else list(backbone.arch.channels))
    if size != 'demo':
        assert backbone.arch == size
    if cfg.default_scope == 'mmseg':
        assert list(cfg.model.decode_head.in_channels) == channels
        assert cfg.model.auxiliary_head.in_channels == channels[2]
    else:
        assert cfg.default_scope == 'mmdet'
        assert list(cfg.model.neck.in_channels) == channels


@pytest.mark.parametrize('path', SEG_CONFIGS, ids=_ids(SEG_CONFIGS))
def test_upernet_recipe(path: Path) -> None:
    cfg = _load(path)
    assert cfg.model.backbone.drop_path_rate == 0.4
    assert cfg.optim_wrapper.type == 'AmpOptimWrapper'
    assert cfg.optim_wrapper.optimizer == dict(type='AdamW', lr=1e-4, betas=(0.9, 0.999), weight_decay=0.05)
    assert cfg.optim_wrapper.constructor == 'LearningRateDecayOptimizerConstructor'
    assert cfg.optim_wrapper.paramwise_cfg.decay_type == 'stage_wise'
    assert cfg.optim_wrapper.paramwise_cfg.decay_rate == 0.9
    assert cfg.train_cfg.max_iters == 160000
    assert cfg.train_dataloader.batch_size == 2  # x 8 GPUs = 16 images per batch
    assert cfg.model.test_cfg.mode == 'slide' and tuple(cfg.model.test_cfg.crop_size) == (512, 512)
    assert cfg.param_scheduler[0].end == 1500 and cfg.param_scheduler[1].type == 'PolyLR'
    assert cfg.model.decode_head.num_classes == 150
    resizes = cfg.tta_pipeline[1].transforms[0]
    assert [tuple(r.scale) for r in resizes] == [(1024, 256), (1536, 384), (2048, 512), (2560, 640),
                                               (3072, 768), (3584, 896)]
    assert [f.prob for f in cfg.tta_pipeline[1].transforms[1]] == [0.0, 1.0]


@pytest.mark.parametrize('path', DET_CONFIGS, ids=_ids(DET_CONFIGS))
def test_cascade_recipe(path: Path) -> None:
    cfg = _load(path)
    size, _ = _size_and_variant(path)
    assert cfg.model.backbone.drop_path_rate == {'tiny': 0.4, 'base': 0.7}[size]
    assert cfg.optim_wrapper.type == 'AmpOptimWrapper'
    assert cfg.optim_wrapper.optimizer == dict(type='AdamW', lr=2e-4, betas=(0.9, 0.999), weight_decay=0.05)
    assert cfg.optim_wrapper.paramwise_cfg.decay_type == 'layer_wise'
    assert cfg.optim_wrapper.paramwise_cfg.decay_rate == {'tiny': 0.7, 'base': 0.8}[size]
    assert cfg.train_cfg.max_epochs == 36
    assert cfg.param_scheduler[1].milestones == [27, 33]
    heads = cfg.model.roi_head.bbox_head
    assert len(heads) == 3
    assert all(h.num_shared_convs == 4 and h.num_shared_fcs == 1 for h in heads)
    assert all(h.loss_bbox.type == 'GIoULoss' and h.num_classes == 80 for h in heads)
    assert cfg.val_evaluator.metric == ['bbox', 'segm']


@pytest.mark.parametrize('path', SEG_CONFIGS + DET_CONFIGS, ids=_ids(SEG_CONFIGS + DET_CONFIGS))
def test_layer_decay_groups_have_no_gaps(path: Path) -> None:
    """num_layers must be the id the constructor gives the last stage, right after stage 3's groups.

    A larger value would leave empty lr groups between stage 3 and stage 4 (and divide the lr of
    the early layers by extra decay factors); a smaller one would give stage 3 blocks ids above the
    last stage's.
    """
    cfg = _load(path)
    size, _ = _size_and_variant(path)
    depths = OrientedConvNeXt.arch_settings[size]['depths']
    paramwise = cfg.optim_wrapper.paramwise_cfg
    names = [f'backbone.downsample_layers.{i}.0.weight' for i in range(4)]
    names += [f'backbone.stages.{i}.{j}.gamma' for i, depth in enumerate(depths) for j in range(depth)]
    if cfg.default_scope == 'mmdet':
        from mmdet.engine.optimizers.layer_decay_optimizer_constructor import get_layer_id_for_convnext
        ids = {get_layer_id_for_convnext(n, paramwise.num_layers) for n in names}
        assert ids == set(range(paramwise.num_layers + 1))
    else:
        from mmseg.engine.optimizers.layer_decay_optimizer_constructor import get_stage_id_for_convnext
        ids = {get_stage_id_for_convnext(n, paramwise.num_layers + 2) for n in names}
        assert ids == set(range(5))
        assert paramwise.num_layers == {'tiny': 6, 'base': 12}[size]  # ConvNeXt's recipe


def _build(cfg: Config) -> torch.nn.Module:
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        if cfg.default_scope == 'mmseg':
            from mmseg.registry import MODELS
        else:
            from mmdet.registry import MODELS
        model = MODELS.build(cfg.model)
    model.init_weights()
    return revert_sync_batchnorm(model).eval()


def _shrink(cfg: Config) -> None:
    """Replace the backbone size by a 1-1-1-1 / 16-128 one, and the heads' inputs with it."""
    cfg.model.backbone.arch = TINY_ARCH
    cfg.model.backbone.stem_channels = 16
    if cfg.default_scope == 'mmseg':
        cfg.model.decode_head.update(in_channels=TINY_ARCH['channels'], channels=32)
        cfg.model.auxiliary_head.update(in_channels=TINY_ARCH['channels'][2], channels=16)
    else:
        cfg.model.neck.in_channels = TINY_ARCH['channels']


def _few_proposals(cfg: Config) -> None:
    """At most 20 proposals per image at test time (the recipes keep 1000): the three 4conv1fc box
    heads of a Cascade R-CNN on each proposal cost most of a CPU forward, and the structure of the
    predictions does not depend on how many there are."""
    if cfg.default_scope == 'mmdet':
        cfg.model.test_cfg.rpn.max_per_img = 20


def _forward(cfg: Config, model: torch.nn.Module) -> None:
    """One prediction on a 64x64 image; checks the output structure."""
    if cfg.default_scope == 'mmseg':
        with torch.no_grad():
            logits = model(torch.rand(1, 3, 64, 64), mode='tensor')
        assert logits.shape == (1, cfg.model.decode_head.num_classes, 16, 16)
        assert torch.isfinite(logits).all()
        return
    from mmdet.testing import demo_mm_inputs

    data = demo_mm_inputs(batch_size=1, image_shapes=[(3, 64, 64)], num_items=[1], num_classes=80,
                          with_mask=True)
    with torch.no_grad():
        result = model.test_step(data)[0]
    pred = result.pred_instances
    assert pred.bboxes.shape[1] == 4
    assert len(pred.masks) == len(pred.bboxes) == len(pred.scores)


@pytest.mark.parametrize('path', ALL_CONFIGS, ids=_ids(ALL_CONFIGS))
def test_builds_and_predicts(path: Path) -> None:
    cfg = _load(path)
    size, variant = _size_and_variant(path)
    if size != 'demo':
        _shrink(cfg)
    _few_proposals(cfg)
    model = _build(cfg)
    assert type(model.backbone).__name__ == 'OrientedConvNeXt'
    assert model.backbone.variant == variant
    _forward(cfg, model)


@pytest.mark.parametrize('path', [
    REPO / 'configs/mmseg/oriented-convnext-tiny-1d_upernet_8xb2-amp-160k_ade20k-512x512.py',
    REPO / 'configs/mmdet/cascade-mask-rcnn_oriented-convnext-t-1d_fpn_4conv1fc-giou_amp-ms-crop-3x_coco.py',
], ids=['upernet-tiny-1d', 'cascade-t-1d'])
def test_full_size_tiny_builds_and_predicts(path: Path) -> None:
    cfg = _load(path)
    _few_proposals(cfg)
    model = _build(cfg)
    num_params = sum(p.numel() for p in model.backbone.parameters())
    assert 27e6 < num_params < 29e6  # ConvNeXt-T-1D: 28.5M with its classifier head (0.77M)
    assert model.backbone.depths == [3, 3, 9, 3] and model.backbone.channels == [96, 192, 384, 768]
    assert model.backbone.kernel_sizes == [31, 31, 27, 13]
    _forward(cfg, model)
