"""configs/mmpretrain: the paper's ImageNet recipe, buildable, a training step runs."""
from pathlib import Path

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import DefaultScope
from mmpretrain.registry import MODELS
from mmpretrain.structures import DataSample

CONFIG_DIR = Path(__file__).resolve().parents[2] / 'configs' / 'mmpretrain'
SIZES = {'tiny': dict(dpr=0.1, channels=768), 'base': dict(dpr=0.5, channels=1024)}
VARIANTS = ('2d', '1d', '1dpp', '2dpp')
PAPER_PARAMS_M = {('tiny', '2d'): 28.6, ('tiny', '1d'): 28.5, ('tiny', '1dpp'): 29.2, ('tiny', '2dpp'): 29.4,
                  ('base', '2d'): 89, ('base', '1d'): 88, ('base', '1dpp'): 90, ('base', '2dpp'): 91}


def _config(size, variant):
    path = CONFIG_DIR / f'oriented-convnext-{size}-{variant}_32xb128_in1k.py'
    assert path.is_file(), path
    return Config.fromfile(str(path))


def test_every_config_is_covered():
    """The paper's models here; the learnable-angle ones in test_learnable_angle_configs.py."""
    names = sorted(p.name for p in CONFIG_DIR.glob('*.py'))
    assert names == sorted([f'oriented-convnext-{s}-{v}_32xb128_in1k.py' for s in SIZES for v in VARIANTS]
                           + [f'oriented-convnext-tiny-{v}-la_32xb128_in1k.py' for v in ('1d', '1dpp')])


@pytest.mark.parametrize('size', SIZES)
@pytest.mark.parametrize('variant', VARIANTS)
def test_recipe(size, variant):
    cfg = _config(size, variant)
    assert cfg.custom_imports == dict(imports=['mmo1d'], allow_failed_imports=False)
    backbone = cfg.model.backbone
    assert backbone.type == 'mmo1d.OrientedConvNeXt' and backbone.arch == size and backbone.variant == variant
    assert backbone.drop_path_rate == SIZES[size]['dpr'] and backbone.layer_scale_init_value == 1e-6
    assert backbone.kernel_sizes == 'imagenet' and backbone.gap_before_final_norm
    assert set(backbone) <= {'type', 'arch', 'variant', 'kernel_sizes', 'directions', 'layer_rotation',
                             'drop_path_rate', 'layer_scale_init_value', 'out_indices',
                             'gap_before_final_norm'}  # nothing of mmpretrain's ConvNeXt left over
    assert cfg.model.head.in_channels == SIZES[size]['channels'] and cfg.model.head.num_classes == 1000
    assert cfg.model.head.loss.type == 'LabelSmoothLoss' and cfg.model.head.loss.label_smooth_val == 0.1
    assert [(a.type, a.alpha) for a in cfg.model.train_cfg.augments] == [('Mixup', 0.8), ('CutMix', 1.0)]
    # AdamW, lr 4e-3 at a total batch of 4096 (32 GPUs x 128), weight decay 0.05, no clipping.
    opt = cfg.optim_wrapper.optimizer
    assert (opt.type, opt.lr, opt.weight_decay) == ('AdamW', 4e-3, 0.05)
    assert cfg.optim_wrapper.clip_grad is None
    assert cfg.auto_scale_lr.base_batch_size == 4096 == 32 * cfg.train_dataloader.batch_size
    warmup, cosine = cfg.param_scheduler
    assert (warmup.type, warmup.end, cosine.type, cosine.begin) == ('LinearLR', 20, 'CosineAnnealingLR', 20)
    assert cfg.train_cfg.max_epochs == 300
    ema = [h for h in cfg.custom_hooks if h.type == 'EMAHook']
    assert len(ema) == 1 and 1 - ema[0].momentum == pytest.approx(0.9999)
    steps = {t.type: t for t in cfg.train_pipeline}
    assert (steps['RandAugment'].magnitude_level, steps['RandAugment'].magnitude_std) == (9, 0.5)
    assert steps['RandomErasing'].erase_prob == 0.25
    assert steps['RandomResizedCrop'].scale == 224


@pytest.mark.parametrize('size', SIZES)
@pytest.mark.parametrize('variant', VARIANTS)
def test_build_parameter_count(size, variant):
    cfg = _config(size, variant)
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        model = MODELS.build(cfg.model)
    assert type(model.backbone).__name__ == 'OrientedConvNeXt' and model.backbone.variant == variant
    params = sum(p.numel() for p in model.parameters()) / 1e6
    paper = PAPER_PARAMS_M[size, variant]
    assert round(params, 1 if size == 'tiny' else 0) == paper


@pytest.mark.parametrize('variant', VARIANTS)
def test_tiny_training_step(variant):
    cfg = _config('tiny', variant)
    model_cfg = cfg.model.copy()
    model_cfg.setdefault('data_preprocessor', cfg.data_preprocessor)  # as mmengine's Runner does
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        model = MODELS.build(model_cfg)
        model.init_weights()
        model.train()
        data = dict(inputs=[torch.randint(0, 256, (3, 32, 32), dtype=torch.uint8) for _ in range(2)],
                    data_samples=[DataSample().set_gt_label(i) for i in (3, 7)])
        batch = model.data_preprocessor(data, training=True)
        losses = model(**batch, mode='loss')
    loss = losses['loss']
    assert torch.isfinite(loss) and loss.item() > 0
    loss.backward()
    grads = [p.grad for p in model.backbone.parameters()]
    assert all(g is not None for g in grads)
    assert model.backbone.stages[0][0].pointwise_conv1.weight.grad.abs().sum() > 0
