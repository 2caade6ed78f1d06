"""Learnable angles under layer-wise lr decay: each ``theta`` in its block's layer, without weight decay.

mmdet's and mmseg's ``LearningRateDecayOptimizerConstructor`` place parameters by name (ConvNeXt's
rule); mmpretrain's ``LearningRateDecayOptimWrapperConstructor`` asks the model
(``OrientedConvNeXt.get_layer_depth``). Either way ``theta`` must share the layer of the kernel
``weight`` next to it.
"""
import pytest
from mmdet.engine.optimizers import LearningRateDecayOptimizerConstructor as MMDetConstructor
from mmengine.registry import DefaultScope
from mmpretrain.engine.optimizers import LearningRateDecayOptimWrapperConstructor as MMPretrainConstructor
from mmpretrain.registry import MODELS as MMPRETRAIN_MODELS
from mmseg.engine.optimizers import LearningRateDecayOptimizerConstructor as MMSegConstructor
from torch import nn

from mmo1d.models import OrientedConvNeXt

ARCH = dict(depths=[1, 2, 7, 1], channels=[8, 8, 16, 16])
OPTIM = dict(type='OptimWrapper', optimizer=dict(type='AdamW', lr=1.0, weight_decay=0.05))
BACKBONE = dict(arch=ARCH, kernel_sizes='downstream', rounding='bilinear', learnable_angles=True)


class Detector(nn.Module):

    def __init__(self, variant: str) -> None:
        super().__init__()
        self.backbone = OrientedConvNeXt(variant=variant, out_indices=(0, 1, 2, 3), gap_before_final_norm=False,
                                         **BACKBONE)
        self.neck = nn.Linear(4, 4)


def _classifier(variant: str) -> nn.Module:
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        return MMPRETRAIN_MODELS.build(dict(
            type='ImageClassifier', backbone=dict(type='mmo1d.OrientedConvNeXt', variant=variant, **BACKBONE),
            head=dict(type='LinearClsHead', num_classes=10, in_channels=16)))


def _groups(model: nn.Module, constructor) -> dict:
    """``{parameter name: its param group}`` of the optimizer the constructor builds."""
    names = {id(p): n for n, p in model.named_parameters()}
    groups = {names[id(p)]: group for group in constructor(model).optimizer.param_groups for p in group['params']}
    assert len(groups) == len(names)
    return groups


CASES = {
    'mmdet-layer_wise': (Detector, lambda: MMDetConstructor(OPTIM, dict(decay_rate=0.7, decay_type='layer_wise',
                                                                        num_layers=6))),
    'mmseg-layer_wise': (Detector, lambda: MMSegConstructor(OPTIM, dict(decay_rate=0.7, decay_type='layer_wise',
                                                                        num_layers=6))),
    'mmseg-stage_wise': (Detector, lambda: MMSegConstructor(OPTIM, dict(decay_rate=0.9, decay_type='stage_wise',
                                                                        num_layers=6))),
    'mmpretrain': (_classifier, lambda: MMPretrainConstructor(OPTIM, dict(layer_decay_rate=0.8,
                                                                          flat_decay_mult=0.0))),
}


@pytest.mark.parametrize('case', CASES)
@pytest.mark.parametrize('variant', ['1d', '1dpp', '2dpp'])
def test_theta_in_its_blocks_layer_without_decay(case: str, variant: str) -> None:
    build, constructor = CASES[case]
    model = build(variant)
    groups = _groups(model, constructor())
    thetas = [n for n in groups if n.endswith('.theta')]
    expected = {'1d': 2 + sum(ARCH['depths']), '1dpp': 2 + 2 * sum(ARCH['depths']), '2dpp': sum(ARCH['depths'])}
    assert len(thetas) == expected[variant]
    lrs = set()
    for name in thetas:
        theta, weight = groups[name], groups[name[:-len('theta')] + 'weight']
        assert theta['weight_decay'] == 0.0 and weight['weight_decay'] == 0.05, name
        assert theta['lr'] == pytest.approx(weight['lr']), name
        if case == 'mmpretrain':
            assert theta['layer_id'] == weight['layer_id'], name
        lrs.add(round(theta['lr'], 9))
    assert len(lrs) >= 3  # the angles are spread over the layers, not lumped into one group


@pytest.mark.parametrize('variant', ['1d', '1dpp', '2dpp'])
def test_get_layer_depth_of_theta_is_its_weights(variant: str) -> None:
    backbone = Detector(variant).backbone
    names = [n for n, _ in backbone.named_parameters() if n.endswith('.theta')]
    assert names
    for name in names:
        depth = backbone.get_layer_depth(f'backbone.{name}', 'backbone.')
        assert depth == backbone.get_layer_depth(f'backbone.{name[:-len("theta")]}weight', 'backbone.'), name
    # Stage 2's block 5 (ids 3 + 5 // 3 = 4) and the stem (id 0), out of 6 + 2 layers.
    assert backbone.get_layer_depth('backbone.stages.2.5.depthwise_conv.theta', 'backbone.') == (4, 8)
    if variant != '2dpp':
        assert backbone.get_layer_depth('backbone.downsample_layers.0.dw2.theta', 'backbone.') == (0, 8)
