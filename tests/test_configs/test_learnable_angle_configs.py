"""The learnable-angle ("-la") configs: their base recipe with bilinear, learnable angles, the angles'
optimizer groups as each toolbox's own constructor builds them, the angle hook, a training step."""
from importlib import import_module
from pathlib import Path

import pytest
import torch
from mmengine.config import Config
from mmengine.optim import build_optim_wrapper
from mmengine.registry import HOOKS, DefaultScope

from mmo1d.engine import AngleLoggerHook
from mmo1d.ops import OrientedDWConv1d

REPO = Path(__file__).resolve().parents[2]
LA_CONFIGS = sorted(REPO.glob('configs/*/*-la_*.py'))
SHIPPED = [
    'configs/demo/oriented-convnext-demo-1d-la_upernet_1xb8-300iter_ade20k-textures-64x64.py',
    'configs/demo/oriented-convnext-demo-1d-la_upernet_1xb8-500iter_ade20k-demo-128x128.py',
    'configs/mmdet/cascade-mask-rcnn_oriented-convnext-t-1d-la_fpn_4conv1fc-giou_amp-ms-crop-3x_coco.py',
    'configs/mmpretrain/oriented-convnext-tiny-1d-la_32xb128_in1k.py',
    'configs/mmpretrain/oriented-convnext-tiny-1dpp-la_32xb128_in1k.py',
    'configs/mmseg/oriented-convnext-tiny-1d-la_upernet_8xb2-amp-160k_ade20k-512x512.py',
    'configs/mmseg/oriented-convnext-tiny-1dpp-la_upernet_8xb2-amp-160k_ade20k-512x512.py',
    'configs/mmseg/oriented-convnext-tiny-2dpp-la_upernet_8xb2-amp-160k_ade20k-512x512.py',
]
# Small enough to build in a fraction of a second; four blocks in stage 2 give mmdet's layer-wise
# rule two layer ids there.
ARCH = dict(depths=[1, 1, 4, 1], channels=[16, 32, 32, 64])
IDS = [p.name for p in LA_CONFIGS]
# The angles' learning rate relative to their block's, as docs/learnable.md recommends: 10x in the
# 300-iteration texture demo, whose optimizer is mmengine's default constructor (custom_keys); the
# block's own rate in the long recipes.
THETA_LR_MULT = {'oriented-convnext-demo-1d-la_upernet_1xb8-300iter_ade20k-textures-64x64.py': 10.0}


def _base(path: Path) -> Path:
    return path.with_name(path.name.replace('-la_', '_'))


def test_the_shipped_learnable_angle_configs() -> None:
    assert [p.relative_to(REPO).as_posix() for p in LA_CONFIGS] == SHIPPED
    assert all(_base(p).is_file() for p in LA_CONFIGS)


@pytest.mark.parametrize('path', LA_CONFIGS, ids=IDS)
def test_only_the_angles_and_their_hook_differ_from_the_base(path: Path) -> None:
    cfg, base = Config.fromfile(str(path)), Config.fromfile(str(_base(path)))
    la, ref = cfg.to_dict(), base.to_dict()
    backbone = la['model']['backbone']
    assert (backbone.pop('rounding'), backbone.pop('learnable_angles')) == ('bilinear', True)
    assert base.model.backbone.get('directions', 8) == 8  # the angles start from the paper's 8 directions
    hooks, base_hooks = la.pop('custom_hooks'), ref.pop('custom_hooks', [])
    angle_hooks = [h for h in hooks if h['type'] == 'mmo1d.AngleLoggerHook']
    # The hooks a config repeats from its base (mmpretrain's EMA hook) lack the scope mark that
    # inheriting from the package's config adds; the default scope builds them all the same.
    assert len(angle_hooks) == 1
    assert [h for h in hooks if h not in angle_hooks] == [{k: v for k, v in h.items() if k != '_scope_'}
                                                          for h in base_hooks]
    keys = la['optim_wrapper']['paramwise_cfg'].get('custom_keys', {})
    theta_keys = [k for k in keys if k in ('theta', '.theta')]
    if la['optim_wrapper'].get('constructor', 'DefaultOptimWrapperConstructor') == 'DefaultOptimWrapperConstructor':
        # mmengine's default constructor reads custom_keys: the angles' entry is the config's recipe.
        assert len(theta_keys) == 1
        assert keys.pop(theta_keys[0]) == dict(lr_mult=THETA_LR_MULT.get(path.name, 1.0), decay_mult=0.0)
        if not keys:
            la['optim_wrapper']['paramwise_cfg'].pop('custom_keys')
    else:
        assert not theta_keys  # the layer-decay constructors of mmseg and mmdet would ignore them
    assert la == ref
    hook = HOOKS.build(angle_hooks[0])  # mmengine's root registry finds mmo1d's hook by its scope
    assert isinstance(hook, AngleLoggerHook) and hook.interval == angle_hooks[0]['interval']


def _small_model(cfg: Config, **backbone) -> torch.nn.Module:
    """The config's model with the backbone (and the heads' inputs) narrowed to ``ARCH``."""
    model_cfg = cfg.model.copy()
    model_cfg.backbone.update(arch=ARCH, stem_channels=16, **backbone)
    scope = cfg.default_scope
    if scope == 'mmseg':
        model_cfg.decode_head.update(in_channels=ARCH['channels'], channels=16)
        model_cfg.auxiliary_head.update(in_channels=ARCH['channels'][2], channels=16)
    elif scope == 'mmdet':
        model_cfg.neck.in_channels = ARCH['channels']
    else:
        model_cfg.head.in_channels = ARCH['channels'][-1]
        model_cfg.setdefault('data_preprocessor', cfg.data_preprocessor)  # as mmengine's Runner does
    with DefaultScope.overwrite_default_scope(scope):
        model = import_module(f'{scope}.registry').MODELS.build(model_cfg)
        model.init_weights()
    return model


@pytest.mark.parametrize('path', LA_CONFIGS, ids=IDS)
def test_angles_get_no_weight_decay_and_their_blocks_learning_rate(path: Path) -> None:
    """The optimizer as the config's own constructor builds it (mmseg's / mmdet's layer-decay one, or
    mmengine's default for mmpretrain), AMP wrapper replaced by the plain one (no GPU here)."""
    cfg = Config.fromfile(str(path))
    model = _small_model(cfg)
    optim_cfg = cfg.optim_wrapper.copy()
    optim_cfg.type = 'OptimWrapper'
    optim_cfg.pop('loss_scale', None)
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        wrapper = build_optim_wrapper(model, optim_cfg)
    groups = {}
    for group in wrapper.optimizer.param_groups:
        for param in group['params']:
            assert id(param) not in groups
            groups[id(param)] = group
    params = dict(model.named_parameters())
    assert len(groups) == len(params)
    layers = [name for name, m in model.named_modules() if isinstance(m, OrientedDWConv1d)]
    thetas = [name for name in params if name.endswith('.theta')]
    assert layers and thetas == [f'{name}.theta' for name in layers]  # every oriented layer learns its angles
    base_lr, base_wd = optim_cfg.optimizer.lr, optim_cfg.optimizer.weight_decay
    assert base_wd > 0
    scales = set()
    for name in thetas:
        theta, weight = groups[id(params[name])], groups[id(params[name[:-len('theta')] + 'weight'])]
        assert theta['weight_decay'] == 0.0, name
        assert weight['weight_decay'] == base_wd, name  # the kernel next to it does decay
        assert theta['lr'] == pytest.approx(weight['lr'] * THETA_LR_MULT.get(path.name, 1.0)), name
        scales.add(round(theta['lr'] / base_lr, 6))
    if 'constructor' not in cfg.optim_wrapper:
        assert scales == {THETA_LR_MULT.get(path.name, 1.0)}
    else:
        assert len(scales) >= 3  # layer-wise / stage-wise decay does reach the angles


def test_classifier_training_step_turns_every_angle() -> None:
    cfg = Config.fromfile(str(REPO / 'configs/mmpretrain/oriented-convnext-tiny-1d-la_32xb128_in1k.py'))
    from mmpretrain.structures import DataSample

    torch.manual_seed(0)
    # Layer scale 1 instead of 1e-6, and 64x64 images (stage 3 at 2x2): gradients of the blocks'
    # angles well above float32's rounding of the loss.
    model = _small_model(cfg, layer_scale_init_value=1.0)
    model.train()
    data = dict(inputs=[torch.randint(0, 256, (3, 64, 64), dtype=torch.uint8) for _ in range(2)],
                data_samples=[DataSample().set_gt_label(i) for i in (3, 7)])
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        loss = model(**model.data_preprocessor(data, training=True), mode='loss')['loss']
    loss.backward()
    thetas = {name: p for name, p in model.named_parameters() if name.endswith('.theta')}
    assert len(thetas) == 2 + sum(ARCH['depths'])  # stem dw1, dw2 and one per block
    for name, theta in thetas.items():
        assert theta.grad is not None and torch.isfinite(theta.grad).all() and theta.grad.abs().sum() > 0, name
